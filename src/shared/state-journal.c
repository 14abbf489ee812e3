/* The task state journal: tasks.json's append-only companion (state-journal.h). */

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "json-util.h"
#include "macro.h"
#include "protocol-keys.h"
#include "state-journal.h"
#include "string-util.h"

int (*state_journal_fault_hook)(JournalStep step) = NULL;

static const char *const journal_end_table[_JOURNAL_END_MAX] = {
        [JOURNAL_END_CLEAN] = "clean",
        [JOURNAL_END_TORN] = "torn tail",
        [JOURNAL_END_DAMAGED] = "damaged record",
        [JOURNAL_END_NO_HEADER] = "no valid header",
};

const char *journal_end_to_string(JournalEnd e) {
        return e >= 0 && e < _JOURNAL_END_MAX ? journal_end_table[e] : NULL;
}

static const char *const journal_step_table[_JOURNAL_STEP_MAX] = {
        [JOURNAL_STEP_APPEND_WRITE] = "append-write",
        [JOURNAL_STEP_APPEND_SYNC] = "append-sync",
        [JOURNAL_STEP_SNAPSHOT_WRITE] = "snapshot-write",
        [JOURNAL_STEP_SNAPSHOT_SYNC] = "snapshot-sync",
        [JOURNAL_STEP_NEXT_WRITE] = "next-write",
        [JOURNAL_STEP_NEXT_SYNC] = "next-sync",
        [JOURNAL_STEP_SNAPSHOT_RENAME] = "snapshot-rename",
        [JOURNAL_STEP_SNAPSHOT_DIR_SYNC] = "snapshot-dir-sync",
        [JOURNAL_STEP_JOURNAL_RENAME] = "journal-rename",
        [JOURNAL_STEP_JOURNAL_DIR_SYNC] = "journal-dir-sync",
};

const char *journal_step_to_string(JournalStep s) {
        return s >= 0 && s < _JOURNAL_STEP_MAX ? journal_step_table[s] : NULL;
}

/* the hook's word on step s: 0 go on, < 0 fail with it, JOURNAL_FAULT_CRASH stop */
static int fault(JournalStep s) { return state_journal_fault_hook ? state_journal_fault_hook(s) : 0; }

/* ---- CRC-32C ---- */

#define CRC32C_POLY 0x82F63B78U /* reflected */

static uint32_t crc_table[8][256];
static bool crc_table_ready;

static void crc_table_init(void) {
        for (uint32_t i = 0; i < 256; i++) {
                uint32_t c = i;
                for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
                crc_table[0][i] = c;
        }
        for (uint32_t i = 0; i < 256; i++)
                for (int t = 1; t < 8; t++) crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
        crc_table_ready = true;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const unsigned char *p, size_t len) {
        uint64_t c = ~crc & 0xffffffffU;
        for (; len >= 8; p += 8, len -= 8) {
                uint64_t v;
                memcpy(&v, p, 8);
                c = __builtin_ia32_crc32di(c, v);
        }
        uint32_t c32 = (uint32_t) c;
        for (; len > 0; p++, len--) c32 = __builtin_ia32_crc32qi(c32, *p);
        return ~c32;
}
#endif

uint32_t crc32c(uint32_t crc, const void *data, size_t len) {
        const unsigned char *p = data;
#if defined(__x86_64__)
        if (__builtin_cpu_supports("sse4.2")) return crc32c_sse42(crc, p, len);
#endif
        if (!crc_table_ready) crc_table_init();
        uint32_t c = ~crc;
        for (; len >= 8; p += 8, len -= 8) {
                uint32_t lo = c ^ ((uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24);
                uint32_t hi = (uint32_t) p[4] | (uint32_t) p[5] << 8 | (uint32_t) p[6] << 16 | (uint32_t) p[7] << 24;
                c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^ crc_table[5][(lo >> 16) & 0xff] ^
                    crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
                    crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
        }
        for (; len > 0; p++, len--) c = (c >> 8) ^ crc_table[0][(c ^ *p) & 0xff];
        return ~c;
}

/* ---- the line format ---- */

#define HEADER_MAGIC "taskferry-state-journal 1"

static int buf_reserve(char **buf, size_t *len, size_t *cap, size_t n) {
        if (*len + n <= *cap) return 0;
        size_t ncap = *cap ? *cap : 4096;
        while (ncap < *len + n) {
                if (ncap > SIZE_MAX / 2) return -ENOMEM;
                ncap *= 2;
        }
        char *nb = realloc(*buf, ncap);
        if (!nb) return -ENOMEM;
        *buf = nb;
        *cap = ncap;
        return 0;
}

int journal_format_line(char **buf, size_t *len, size_t *cap, JournalKind kind, uint64_t seq, const char *payload,
                        size_t payload_len) {
        if (memchr(payload, '\n', payload_len)) return -EINVAL;
        char head[64];
        int n = snprintf(head, sizeof head, "%c %" PRIu64 " %zu ", (char) kind, seq, payload_len);
        int r = buf_reserve(buf, len, cap, (size_t) n + payload_len + 10);
        if (r < 0) return r;
        char *start = *buf + *len;
        memcpy(start, head, (size_t) n);
        memcpy(start + n, payload, payload_len);
        size_t body = (size_t) n + payload_len;
        uint32_t crc = crc32c(0, start, body);
        snprintf(start + body, 11, " %08" PRIx32 "\n", crc);
        *len += body + 10;
        return 0;
}

/* a decimal of 1 to 19 digits, no leading zero unless it is "0"; *p moves past it */
static bool parse_u64(const char **p, const char *end, uint64_t *ret) {
        const char *s = *p;
        uint64_t v = 0;
        size_t n = 0;
        while (s + n < end && s[n] >= '0' && s[n] <= '9') {
                if (n == 19) return false;
                v = v * 10 + (uint64_t) (s[n] - '0');
                n++;
        }
        if (n == 0 || (n > 1 && s[0] == '0')) return false;
        *p = s + n;
        *ret = v;
        return true;
}

static bool parse_hex32(const char *s, uint32_t *ret) {
        uint32_t v = 0;
        for (int i = 0; i < 8; i++) {
                char c = s[i];
                uint32_t d;
                if (c >= '0' && c <= '9') d = (uint32_t) (c - '0');
                else if (c >= 'a' && c <= 'f') d = (uint32_t) (c - 'a' + 10);
                else return false;
                v = v << 4 | d;
        }
        *ret = v;
        return true;
}

typedef struct Line {
        JournalKind kind;
        uint64_t seq;
        const char *payload;
        size_t len;
} Line;

/* One line [s, e) (without its newline) checked: fields, length, CRC. */
static bool parse_line(const char *s, const char *e, Line *ret) {
        if (e - s < 2 + 1 + 1 + 1 + 1 + 1 + 8 || s[1] != ' ') return false;
        if (s[0] != JOURNAL_HEADER && s[0] != JOURNAL_TASK && s[0] != JOURNAL_TOMBSTONE) return false;
        const char *p = s + 2;
        uint64_t seq, len;
        if (!parse_u64(&p, e, &seq) || seq > INT64_MAX || p >= e || *p++ != ' ') return false;
        if (!parse_u64(&p, e, &len) || p >= e || *p++ != ' ') return false;
        if ((uint64_t) (e - p) != len + 9) return false;
        const char *tail = p + len;
        uint32_t want;
        if (*tail != ' ' || !parse_hex32(tail + 1, &want)) return false;
        if (crc32c(0, s, (size_t) (tail - s)) != want) return false;
        *ret = (Line) {.kind = (JournalKind) s[0], .seq = seq, .payload = p, .len = (size_t) len};
        return true;
}

static bool parse_header(const Line *l, JournalHeader *ret) {
        if (l->kind != JOURNAL_HEADER) return false;
        const char *p = l->payload, *end = l->payload + l->len;
        size_t m = strlen(HEADER_MAGIC);
        if (l->len < m + 1 || memcmp(p, HEADER_MAGIC, m) || p[m] != ' ') return false;
        p += m + 1;
        uint64_t bytes;
        uint32_t crc;
        if (!parse_u64(&p, end, &bytes) || p >= end || *p++ != ' ' || end - p != 8 || !parse_hex32(p, &crc)) return false;
        *ret = (JournalHeader) {.base_seq = l->seq, .snapshot_bytes = bytes, .snapshot_crc = crc};
        return true;
}

static int format_header(char **buf, size_t *len, size_t *cap, const JournalHeader *h) {
        char payload[96];
        int n = snprintf(payload, sizeof payload, HEADER_MAGIC " %" PRIu64 " %08" PRIx32, h->snapshot_bytes, h->snapshot_crc);
        return journal_format_line(buf, len, cap, JOURNAL_HEADER, h->base_seq, payload, (size_t) n);
}

int journal_scan(const char *text, size_t len, journal_record_fn fn, void *userdata, JournalScan *ret) {
        *ret = (JournalScan) {.end = JOURNAL_END_NO_HEADER, .total_bytes = len};
        size_t off = 0;
        bool have_header = false;
        uint64_t prev = 0;
        while (off < len) {
                size_t room = len - off < STATE_JOURNAL_LINE_MAX + 1 ? len - off : STATE_JOURNAL_LINE_MAX + 1;
                const char *nl = memchr(text + off, '\n', room);
                Line l;
                bool ok = nl && parse_line(text + off, nl, &l);
                if (ok && !have_header) {
                        ok = parse_header(&l, &ret->header);
                        if (!ok) return 0; /* no header: nothing in it is used */
                        have_header = true;
                        prev = ret->last_seq = ret->header.base_seq;
                        off = (size_t) (nl - text) + 1;
                        ret->valid_bytes = ret->header_bytes = off;
                        ret->end = JOURNAL_END_CLEAN;
                        continue;
                }
                /* a record's number only grows; one at or below the snapshot's
                 * is in the snapshot already and is skipped */
                ok = ok && l.kind != JOURNAL_HEADER && (ret->n_records == 0 || l.seq > prev);
                if (ok && fn && l.seq > ret->header.base_seq) {
                        int r = fn(l.kind, l.seq, l.payload, l.len, userdata);
                        if (r == -EBADMSG) ok = false;
                        else if (r < 0) return r;
                }
                if (!ok) {
                        if (!have_header) return 0;
                        bool last = !nl || (size_t) (nl - text) + 1 >= len;
                        ret->end = last ? JOURNAL_END_TORN : JOURNAL_END_DAMAGED;
                        return 0;
                }
                prev = l.seq;
                if (l.seq > ret->last_seq) ret->last_seq = l.seq;
                ret->n_records++;
                off = (size_t) (nl - text) + 1;
                ret->valid_bytes = off;
        }
        return 0;
}

/* ---- load ---- */

typedef struct Replay {
        journal_record_fn fn;
        void *userdata;
        char *map;
        size_t released; /* bytes of the mapping given back so far */
} Replay;

#define RELEASE_STEP (1U << 20)

/* each record to the caller; the pages scanned go back as it goes, so the
 * journal never sits in memory whole */
static int replay_one(JournalKind kind, uint64_t seq, const char *payload, size_t len, void *userdata) {
        Replay *rp = userdata;
        int r = rp->fn ? rp->fn(kind, seq, payload, len, rp->userdata) : 0;
        size_t done = (size_t) (payload - rp->map) & ~((size_t) RELEASE_STEP - 1);
        if (done >= rp->released + RELEASE_STEP) {
                (void) madvise(rp->map + rp->released, done - rp->released, MADV_DONTNEED);
                rp->released = done;
        }
        return r;
}

/* tasks.journal or .next mapped read-only: 1, 0 if it is missing, -errno */
static int map_journal(int dir_fd, const char *name, char **ret, size_t *ret_len) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0) return errno == ENOENT ? 0 : -errno;
        struct stat st;
        if (fstat(fd, &st) < 0) return -errno;
        if (!S_ISREG(st.st_mode)) return -EBADMSG;
        *ret_len = (size_t) st.st_size;
        *ret = NULL;
        if (st.st_size == 0) return 1;
        void *p = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) return -errno;
        *ret = p;
        return 1;
}

static bool header_names(const char *text, size_t len, uint64_t bytes, uint32_t crc) {
        const char *nl = text ? memchr(text, '\n', len < 256 ? len : 256) : NULL;
        Line l;
        JournalHeader h;
        return nl && parse_line(text, nl, &l) && parse_header(&l, &h) && h.snapshot_bytes == bytes && h.snapshot_crc == crc;
}

int state_journal_load(int dir_fd, uint64_t snapshot_bytes, uint32_t snapshot_crc, journal_record_fn fn,
                       void *userdata, JournalLoad *ret) {
        *ret = (JournalLoad) {.scan.end = JOURNAL_END_NO_HEADER};
        char *text = NULL;
        size_t len = 0;
        int r = map_journal(dir_fd, STATE_JOURNAL_FILE, &text, &len);
        if (r < 0) return r;
        bool have = r > 0;
        if (have && !header_names(text, len, snapshot_bytes, snapshot_crc)) {
                /* a compaction that stopped between its renames left the
                 * journal of the new tasks.json as .next */
                char *next = NULL;
                size_t next_len = 0;
                r = map_journal(dir_fd, STATE_JOURNAL_NEXT_FILE, &next, &next_len);
                if (r > 0 && header_names(next, next_len, snapshot_bytes, snapshot_crc)) {
                        if (text) (void) munmap(text, len);
                        text = next, len = next_len;
                        ret->from_next = true;
                } else {
                        if (r > 0 && next) (void) munmap(next, next_len);
                        ret->stale = true;
                        ret->stale_bytes = len;
                        have = false;
                }
        } else if (!have) {
                r = map_journal(dir_fd, STATE_JOURNAL_NEXT_FILE, &text, &len);
                if (r < 0) return r;
                have = r > 0 && header_names(text, len, snapshot_bytes, snapshot_crc);
                ret->from_next = have;
        }
        if (!have) {
                if (text) (void) munmap(text, len);
                return 0;
        }
        ret->found = true;
        Replay rp = {.fn = fn, .userdata = userdata, .map = text};
        r = journal_scan(text ? text : "", len, replay_one, &rp, &ret->scan);
        if (text) (void) munmap(text, len);
        return r;
}

/* ---- the writer ---- */

int state_journal_open(StateJournal *j, int dir_fd, const JournalScan *scan) {
        j->dir_fd = dir_fd;
        j->fd = safe_close(j->fd);
        int fd = openat(dir_fd, STATE_JOURNAL_FILE, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0) return -errno;
        j->fd = fd;
        j->broken = false;
        j->base_seq = scan->header.base_seq;
        j->next_seq = scan->last_seq + 1;
        j->committed = scan->valid_bytes;
        j->n_records = scan->n_records;
        return 0;
}

void state_journal_done(StateJournal *j) {
        j->fd = safe_close(j->fd);
        free(j->buf);
        j->buf = NULL;
        j->len = j->cap = j->n_buffered = 0;
}

bool state_journal_usable(const StateJournal *j) { return j->fd >= 0 && !j->broken; }

int state_journal_append(StateJournal *j, JournalKind kind, const char *payload, size_t len, uint64_t *ret_seq) {
        if (kind != JOURNAL_TASK && kind != JOURNAL_TOMBSTONE) return -EINVAL;
        /* a line load would refuse is never written */
        if (len > STATE_JOURNAL_LINE_MAX - 64) return -E2BIG;
        int r = journal_format_line(&j->buf, &j->len, &j->cap, kind, j->next_seq, payload, len);
        if (r < 0) return r;
        if (ret_seq) *ret_seq = j->next_seq;
        j->next_seq++;
        j->n_buffered++;
        return 0;
}

void state_journal_discard(StateJournal *j) {
        j->next_seq -= j->n_buffered;
        j->len = j->n_buffered = 0;
}

static int pwrite_all(int fd, const char *p, size_t len, uint64_t off) {
        while (len > 0) {
                ssize_t n = pwrite(fd, p, len, (off_t) off);
                if (n < 0) {
                        if (errno == EINTR) continue;
                        return -errno;
                }
                if (n == 0) return -EIO;
                p += n, len -= (size_t) n, off += (uint64_t) n;
        }
        return 0;
}

int state_journal_commit(StateJournal *j) {
        if (j->len == 0) return 0;
        if (!state_journal_usable(j)) return -EBADF;
        int r = fault(JOURNAL_STEP_APPEND_WRITE);
        if (r == JOURNAL_FAULT_CRASH) {
                (void) pwrite_all(j->fd, j->buf, j->len / 2, j->committed);
                return -ECANCELED;
        }
        if (r >= 0) r = pwrite_all(j->fd, j->buf, j->len, j->committed);
        if (r >= 0) {
                r = fault(JOURNAL_STEP_APPEND_SYNC);
                if (r == JOURNAL_FAULT_CRASH) return -ECANCELED;
                if (r >= 0 && fdatasync(j->fd) < 0) r = -errno;
        }
        if (r < 0) {
                /* nothing of a failed commit may stay: a later one would follow it */
                if (ftruncate(j->fd, (off_t) j->committed) < 0 || fdatasync(j->fd) < 0) j->broken = true;
                state_journal_discard(j);
                return r;
        }
        j->committed += j->len;
        j->n_records += j->n_buffered;
        j->len = j->n_buffered = 0;
        return 0;
}

/* ---- compaction ---- */

#define SNAPSHOT_CHUNK (256U << 10)

int state_journal_compact_begin(StateJournal *j, JournalCompaction *c) {
        if (j->len) return -EBUSY;
        *c = (JournalCompaction) {.fd = -1, .dir_fd = j->dir_fd, .base_seq = j->next_seq - 1,
                                  .from = j->fd >= 0 ? j->committed : 0};
        c->buf = malloc(SNAPSHOT_CHUNK);
        if (!c->buf) return -ENOMEM;
        int fd = openat(j->dir_fd, STATE_SNAPSHOT_TMP_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY,
                        0600);
        if (fd < 0 || fchmod(fd, 0600) < 0) {
                int r = -errno;
                safe_close(fd);
                free(TAKE_PTR(c->buf));
                return r;
        }
        c->fd = fd;
        return 0;
}

/* the buffered snapshot bytes to the temp file */
static int compaction_flush(JournalCompaction *c) {
        if (c->error) return c->error;
        if (c->len == 0) return 0;
        int r = fault(JOURNAL_STEP_SNAPSHOT_WRITE);
        if (r == JOURNAL_FAULT_CRASH) {
                (void) loop_write(c->fd, c->buf, c->len / 2);
                return c->error = -ECANCELED;
        }
        if (r >= 0) r = loop_write(c->fd, c->buf, c->len);
        c->len = 0;
        return r < 0 ? (c->error = r) : 0;
}

int state_journal_compact_write(JournalCompaction *c, const void *data, size_t len) {
        const char *p = data;
        c->crc = crc32c(c->crc, p, len);
        c->bytes += len;
        while (len > 0) {
                if (c->error) return c->error;
                size_t n = SNAPSHOT_CHUNK - c->len < len ? SNAPSHOT_CHUNK - c->len : len;
                memcpy(c->buf + c->len, p, n);
                c->len += n, p += n, len -= n;
                if (c->len == SNAPSHOT_CHUNK && compaction_flush(c) < 0) return c->error;
        }
        return c->error;
}

/* what c holds in memory and its fd, nothing on disk touched */
static void compaction_close(JournalCompaction *c) {
        c->fd = safe_close(c->fd);
        free(TAKE_PTR(c->buf));
        c->len = 0;
}

/* the compaction's temp files after a failure (their names are fixed:
 * whatever is there is ours) */
static void unlink_temps(int dir_fd, bool snapshot, bool next) {
        if (snapshot) (void) unlinkat(dir_fd, STATE_SNAPSHOT_TMP_FILE, 0);
        if (next) (void) unlinkat(dir_fd, STATE_JOURNAL_NEXT_FILE, 0);
}

void state_journal_compact_abort(JournalCompaction *c) {
        bool had = c->fd >= 0;
        compaction_close(c);
        if (had) unlink_temps(c->dir_fd, true, false);
}

/* bytes [from, to) of fd appended to *buf */
static int pread_append(int fd, uint64_t from, uint64_t to, char **buf, size_t *len, size_t *cap) {
        int r = buf_reserve(buf, len, cap, (size_t) (to - from));
        for (uint64_t off = from; r >= 0 && off < to;) {
                ssize_t n = pread(fd, *buf + *len, (size_t) (to - off), (off_t) off);
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) r = n < 0 ? -errno : -EIO;
                else *len += (size_t) n, off += (uint64_t) n;
        }
        return r;
}

/* The next journal: header, then the records committed to j since the
 * compaction began (copied as they are). fd of it, or -errno. */
static int write_next(StateJournal *j, JournalCompaction *c, size_t *ret_len, size_t *ret_records) {
        _cleanup_close_ int fd = openat(j->dir_fd, STATE_JOURNAL_NEXT_FILE,
                                        O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
        if (fd < 0) return -errno;
        if (fchmod(fd, 0600) < 0) return -errno;
        char *buf = NULL;
        size_t len = 0, cap = 0;
        JournalHeader h = {.base_seq = c->base_seq, .snapshot_bytes = c->bytes, .snapshot_crc = c->crc};
        int r = format_header(&buf, &len, &cap, &h);
        size_t records = 0;
        /* the carried records: re-read from the journal file (what was
         * committed since begin, so valid lines) */
        uint64_t from = c->from, to = j->fd >= 0 ? j->committed : c->from;
        if (r >= 0 && to > from) {
                r = pread_append(j->fd, from, to, &buf, &len, &cap);
                for (size_t i = len - (size_t) (to - from); r >= 0 && i < len; i++) records += buf[i] == '\n';
        }
        if (r >= 0) {
                r = fault(JOURNAL_STEP_NEXT_WRITE);
                if (r == JOURNAL_FAULT_CRASH) {
                        (void) loop_write(fd, buf, len / 2);
                        r = -ECANCELED;
                } else if (r >= 0)
                        r = loop_write(fd, buf, len);
        }
        free(buf);
        if (r < 0) return r;
        r = fault(JOURNAL_STEP_NEXT_SYNC);
        if (r == JOURNAL_FAULT_CRASH) return -ECANCELED;
        if (r >= 0 && fsync(fd) < 0) r = -errno;
        if (r < 0) return r;
        *ret_len = len;
        *ret_records = records;
        return TAKE_FD(fd);
}

int state_journal_reset(StateJournal *j, const JournalHeader *h, const char *src, uint64_t from, uint64_t to,
                        size_t n_records, uint64_t last_seq) {
        if (j->len) return -EBUSY;
        char *buf = NULL;
        size_t len = 0, cap = 0;
        int r = format_header(&buf, &len, &cap, h);
        if (r >= 0 && to > from) {
                _cleanup_close_ int sfd = openat(j->dir_fd, src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
                r = sfd < 0 ? -errno : pread_append(sfd, from, to, &buf, &len, &cap);
        }
        _cleanup_close_ int fd = r >= 0 ? openat(j->dir_fd, STATE_JOURNAL_TMP_FILE,
                                                 O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600)
                                        : -1;
        if (r >= 0 && (fd < 0 || fchmod(fd, 0600) < 0)) r = -errno;
        if (r >= 0) r = loop_write(fd, buf, len);
        free(buf);
        if (r >= 0 && fsync(fd) < 0) r = -errno;
        if (r >= 0 && renameat(j->dir_fd, STATE_JOURNAL_TMP_FILE, j->dir_fd, STATE_JOURNAL_FILE) < 0) r = -errno;
        if (r >= 0 && fsync(j->dir_fd) < 0) r = -errno;
        if (r < 0) {
                (void) unlinkat(j->dir_fd, STATE_JOURNAL_TMP_FILE, 0);
                return r;
        }
        safe_close(j->fd);
        j->fd = TAKE_FD(fd);
        j->broken = false;
        j->base_seq = h->base_seq;
        j->next_seq = last_seq + 1;
        j->committed = len;
        j->n_records = n_records;
        return 0;
}

/* a step of its own: the fault hook first, then fn; -ECANCELED for a crash */
#define STEP(s, call) ({ int _r = fault(s); _r == JOURNAL_FAULT_CRASH ? -ECANCELED : _r < 0 ? _r : (call) < 0 ? -errno : 0; })

int state_journal_compact_finish(StateJournal *j, JournalCompaction *c) {
        int r = compaction_flush(c);
        if (r >= 0) r = STEP(JOURNAL_STEP_SNAPSHOT_SYNC, fsync(c->fd));
        if (r >= 0 && close(TAKE_FD(c->fd)) < 0) r = -errno;
        if (r < 0) {
                if (r == -ECANCELED) compaction_close(c);
                else state_journal_compact_abort(c);
                return r;
        }
        free(TAKE_PTR(c->buf));
        size_t next_len = 0, records = 0;
        int nfd = write_next(j, c, &next_len, &records);
        if (nfd < 0) {
                if (nfd != -ECANCELED) unlink_temps(j->dir_fd, true, true);
                return nfd;
        }
        r = STEP(JOURNAL_STEP_SNAPSHOT_RENAME, renameat(j->dir_fd, STATE_SNAPSHOT_TMP_FILE, j->dir_fd, STATE_SNAPSHOT_FILE));
        if (r < 0) {
                safe_close(nfd);
                if (r != -ECANCELED) unlink_temps(j->dir_fd, true, true);
                return r;
        }
        /* from here tasks.json is the new one: the old journal no longer
         * follows it, so nothing more is appended to that */
        j->broken = true;
        r = STEP(JOURNAL_STEP_SNAPSHOT_DIR_SYNC, fsync(j->dir_fd));
        if (r >= 0)
                r = STEP(JOURNAL_STEP_JOURNAL_RENAME,
                         renameat(j->dir_fd, STATE_JOURNAL_NEXT_FILE, j->dir_fd, STATE_JOURNAL_FILE));
        if (r >= 0) r = STEP(JOURNAL_STEP_JOURNAL_DIR_SYNC, fsync(j->dir_fd));
        if (r < 0) {
                safe_close(nfd);
                return r;
        }
        safe_close(j->fd);
        j->fd = nfd;
        j->broken = false;
        j->base_seq = c->base_seq;
        j->committed = next_len;
        j->n_records = records;
        return 0;
}

/* ---- the durable state as JSON, for tools and tests ---- */

typedef struct JsonReplay {
        json_object *arr;
        json_tokener *tok;
} JsonReplay;

/* the index of the record with that id in arr, or -1 */
static ssize_t json_index_of(json_object *arr, const char *id) {
        size_t n = json_object_array_length(arr);
        for (size_t i = 0; i < n; i++)
                if (streq_ptr(json_get_string(json_object_array_get_idx(arr, i), PK_id), id)) return (ssize_t) i;
        return -1;
}

static int json_replay_one(JournalKind kind, uint64_t seq, const char *payload, size_t len, void *userdata) {
        JsonReplay *jr = userdata;
        json_object *o = NULL;
        if (json_parse_strict_with(jr->tok, payload, len, &o) < 0) return -EBADMSG;
        if (kind == JOURNAL_TOMBSTONE) {
                ssize_t i = json_object_is_type(o, json_type_string) ? json_index_of(jr->arr, json_object_get_string(o)) : -1;
                bool ok = json_object_is_type(o, json_type_string);
                json_object_put(o);
                if (!ok) return -EBADMSG;
                if (i >= 0) json_object_array_del_idx(jr->arr, (size_t) i, 1);
                return 0;
        }
        const char *id = json_is_object(o) ? json_get_string(o, PK_id) : NULL;
        if (!id) {
                json_object_put(o);
                return -EBADMSG;
        }
        ssize_t i = json_index_of(jr->arr, id);
        int r = i >= 0 ? json_object_array_put_idx(jr->arr, (size_t) i, o) : json_object_array_add(jr->arr, o);
        if (r < 0) {
                json_object_put(o);
                return -ENOMEM;
        }
        return 0;
}

int state_journal_read_json(int dir_fd, json_object **ret) {
        _cleanup_close_ int fd = openat(dir_fd, STATE_SNAPSHOT_FILE, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 && errno != ENOENT) return -errno;
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (fd >= 0) {
                int r = read_fd(fd, SIZE_MAX, &text, &len);
                if (r < 0) return r;
        }
        _cleanup_json_ json_object *arr = NULL;
        if (fd >= 0 && json_parse_strict(text, len, &arr) < 0) return -EBADMSG;
        if (fd >= 0 && !json_object_is_type(arr, json_type_array)) return -EBADMSG;
        if (!arr && !(arr = json_object_new_array())) return -ENOMEM;
        /* the first record of an id wins, as at load */
        for (size_t i = json_object_array_length(arr); i > 0; i--) {
                const char *id = json_get_string(json_object_array_get_idx(arr, i - 1), PK_id);
                if (!id || json_index_of(arr, id) != (ssize_t) (i - 1)) json_object_array_del_idx(arr, i - 1, 1);
        }
        JsonReplay jr = {.arr = arr, .tok = json_strict_tokener_new_depth(63)};
        if (!jr.tok) return -ENOMEM;
        JournalLoad ld;
        int r = state_journal_load(dir_fd, len, crc32c(0, text ? text : "", len), json_replay_one, &jr, &ld);
        json_tokener_free(jr.tok);
        if (r < 0) return r;
        *ret = TAKE_PTR(arr);
        return 0;
}
