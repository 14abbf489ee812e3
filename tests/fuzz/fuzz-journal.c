/* tasks.journal, the append-only state journal beside tasks.json (a torn
 * tail, a damaged record, a file another program wrote): its record reader
 * (journal_scan) in memory, and the load behind it (state_journal_read_json:
 * snapshot plus the journal's valid prefix) over a scratch directory.
 *
 * The first input byte selects what the rest is:
 *   bits 0-1  0: a journal, scanned in memory; 1: the same, the record
 *             callback refusing the record numbered by bits 2-7 (as a replay
 *             does a record it cannot read); 2: journal records after a
 *             header that names the snapshot (its base sequence number the
 *             next input byte), loaded from the scratch directory; 3: a whole
 *             journal, loaded from there as it is (most name no snapshot:
 *             stale)
 *   bit 4     (2, 3) a small tasks.json is there; else none
 *   bit 5     (2, 3) the journal is .tasks-journal.next, not tasks.journal
 *
 * Checked on every scan: what it keeps is a prefix of the text, ending where
 * its end says (clean: all of it; torn: only an unfinished last line after
 * it; damaged: more lines after it); the records it replays follow the
 * header in that prefix, numbered upwards above the header's base; the
 * prefix alone scans clean to the same records; the header and the records
 * re-encoded by the writer's own line format (journal_format_line) are the
 * prefix's bytes and scan back to the same records. A record the callback
 * refuses stops the scan right before its line. A load gives the snapshot's
 * records plus what the journal's prefix changes, the same from .next as from
 * tasks.journal, the same from a journal rewritten of only its replayed
 * records, and the snapshot alone from a journal naming another snapshot.
 *
 * Unlike the other targets this one writes files: the load reads a
 * directory, so the target makes one scratch directory under $TMPDIR once,
 * rewrites its three files for every input and removes it at exit. */

#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "json-util.h"
#include "state-journal.h"

#define HEADER_MAGIC "taskferry-state-journal 1"

static const char snapshot_text[] = "[{\"id\":\"a\",\"status\":\"done\"},{\"id\":\"b\",\"status\":\"running\"}]\n";

typedef struct Rec {
        JournalKind kind;
        uint64_t seq;
        const char *payload;
        size_t len;
} Rec;

typedef struct Seen {
        Rec *recs;
        size_t n, cap;
        size_t refuse; /* the index of the record to refuse (SIZE_MAX: none) */
} Seen;

static int record(JournalKind kind, uint64_t seq, const char *payload, size_t len, void *userdata) {
        Seen *s = userdata;
        if (s->n == s->refuse) return -EBADMSG;
        if (s->n == s->cap) {
                s->cap = s->cap ? 2 * s->cap : 64;
                fuzz_check(s->recs = realloc(s->recs, s->cap * sizeof *s->recs));
        }
        s->recs[s->n++] = (Rec) {.kind = kind, .seq = seq, .payload = payload, .len = len};
        return 0;
}

#define SEEN_INIT {.refuse = SIZE_MAX}

static void seen_done(Seen *s) { free(s->recs); }

static void format_or_die(char **buf, size_t *len, size_t *cap, JournalKind kind, uint64_t seq, const char *p,
                          size_t n) {
        fuzz_check(journal_format_line(buf, len, cap, kind, seq, p, n) == 0);
}

static void format_header(char **buf, size_t *len, size_t *cap, uint64_t base, uint64_t bytes, uint32_t crc) {
        char payload[96];
        int n = snprintf(payload, sizeof payload, HEADER_MAGIC " %" PRIu64 " %08" PRIx32, bytes, crc);
        format_or_die(buf, len, cap, JOURNAL_HEADER, base, payload, (size_t) n);
}

static bool same_records(const Seen *a, const Seen *b) {
        if (a->n != b->n) return false;
        for (size_t i = 0; i < a->n; i++)
                if (a->recs[i].kind != b->recs[i].kind || a->recs[i].seq != b->recs[i].seq ||
                    a->recs[i].len != b->recs[i].len || memcmp(a->recs[i].payload, b->recs[i].payload, a->recs[i].len))
                        return false;
        return true;
}

/* header and replayed records through the writer's line format */
static void reencode(const JournalScan *sc, const Seen *s, bool with_header, char **buf, size_t *len) {
        size_t cap = 0;
        *buf = NULL;
        *len = 0;
        if (with_header) format_header(buf, len, &cap, sc->header.base_seq, sc->header.snapshot_bytes, sc->header.snapshot_crc);
        for (size_t i = 0; i < s->n; i++) format_or_die(buf, len, &cap, s->recs[i].kind, s->recs[i].seq, s->recs[i].payload, s->recs[i].len);
        if (!*buf) *buf = fuzz_strndup(NULL, 0);
}

/* scan text with every invariant checked; the scan and its records in *sc, *s */
static void scan_checked(const char *text, size_t len, JournalScan *sc, Seen *s) {
        s->n = 0;
        s->refuse = SIZE_MAX;
        fuzz_check(journal_scan(text, len, record, s, sc) == 0);
        fuzz_check(sc->total_bytes == len && sc->valid_bytes <= len);
        const char *rest_nl = memchr(text + sc->valid_bytes, '\n', len - sc->valid_bytes);
        if (sc->end == JOURNAL_END_NO_HEADER) {
                fuzz_check(sc->valid_bytes == 0 && sc->header_bytes == 0 && sc->n_records == 0 && s->n == 0);
                return;
        }
        fuzz_check(sc->header_bytes > 0 && sc->header_bytes <= sc->valid_bytes);
        fuzz_check(text[sc->valid_bytes - 1] == '\n');
        switch (sc->end) {
        case JOURNAL_END_CLEAN: fuzz_check(sc->valid_bytes == len); break;
        case JOURNAL_END_TORN: fuzz_check(sc->valid_bytes < len && (!rest_nl || rest_nl == text + len - 1)); break;
        case JOURNAL_END_DAMAGED: fuzz_check(rest_nl && rest_nl < text + len - 1); break;
        default: fuzz_check(false); /* no other end */
        }
        fuzz_check(s->n <= sc->n_records);
        uint64_t prev = sc->header.base_seq;
        for (size_t i = 0; i < s->n; i++) {
                const Rec *r = &s->recs[i];
                fuzz_check(r->kind == JOURNAL_TASK || r->kind == JOURNAL_TOMBSTONE);
                fuzz_check(r->seq > prev && r->seq <= INT64_MAX);
                fuzz_check(r->payload >= text + sc->header_bytes && r->payload + r->len < text + sc->valid_bytes);
                fuzz_check(!memchr(r->payload, '\n', r->len));
                prev = r->seq;
        }
        fuzz_check(sc->last_seq == prev);

        /* the prefix alone: clean, the same */
        JournalScan sp;
        Seen prefix = SEEN_INIT, *p = &prefix;
        fuzz_check(journal_scan(text, sc->valid_bytes, record, p, &sp) == 0);
        fuzz_check(sp.end == JOURNAL_END_CLEAN && sp.valid_bytes == sc->valid_bytes && sp.n_records == sc->n_records);
        fuzz_check(memcmp(&sp.header, &sc->header, sizeof sp.header) == 0 && sp.last_seq == sc->last_seq);
        fuzz_check(same_records(p, s));

        /* re-encoded: the header's bytes, the last records' bytes, and back */
        char *enc;
        size_t enc_len;
        reencode(sc, s, false, &enc, &enc_len);
        fuzz_check(enc_len <= sc->valid_bytes - sc->header_bytes);
        fuzz_check(memcmp(enc, text + sc->valid_bytes - enc_len, enc_len) == 0);
        free(enc);
        reencode(sc, s, true, &enc, &enc_len);
        fuzz_check(memcmp(enc, text, sc->header_bytes) == 0);
        JournalScan se;
        p->n = 0;
        fuzz_check(journal_scan(enc, enc_len, record, p, &se) == 0);
        fuzz_check(se.end == JOURNAL_END_CLEAN && se.n_records == s->n && se.valid_bytes == enc_len);
        fuzz_check(same_records(p, s));
        free(enc);
        seen_done(p);
}

/* the record numbered refuse refused: the scan stops right before its line */
static void check_refused(const char *text, size_t len, const JournalScan *full, const Seen *s, size_t refuse) {
        if (refuse >= s->n) return;
        Seen refused = {.refuse = refuse}, *f = &refused;
        JournalScan sf;
        fuzz_check(journal_scan(text, len, record, f, &sf) == 0);
        const char *line = s->recs[refuse].payload;
        while (line > text && line[-1] != '\n') line--;
        size_t skipped = full->n_records - s->n; /* at or below the base: never replayed */
        fuzz_check(f->n == refuse && sf.n_records == skipped + refuse);
        fuzz_check(sf.valid_bytes == (size_t) (line - text));
        fuzz_check(sf.end == (memchr(line, '\n', len - sf.valid_bytes) == text + len - 1 ? JOURNAL_END_TORN : JOURNAL_END_DAMAGED));
        seen_done(f);
}

/* ---- the load, over a scratch directory ---- */

static char scratch[64];
static int scratch_fd = -1;

static const char *const scratch_files[] = {STATE_SNAPSHOT_FILE, STATE_JOURNAL_FILE, STATE_JOURNAL_NEXT_FILE};

static void scratch_clear(void) {
        for (size_t i = 0; i < sizeof scratch_files / sizeof scratch_files[0]; i++)
                (void) unlinkat(scratch_fd, scratch_files[i], 0);
}

static void scratch_remove(void) {
        scratch_clear();
        close(scratch_fd);
        (void) rmdir(scratch);
}

static void scratch_open(void) {
        if (scratch_fd >= 0) return;
        const char *tmp = getenv("TMPDIR");
        snprintf(scratch, sizeof scratch, "%.40s/fuzz-journal.XXXXXX", tmp && *tmp && strlen(tmp) <= 40 ? tmp : "/tmp");
        fuzz_check(mkdtemp(scratch));
        scratch_fd = open(scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        fuzz_check(scratch_fd >= 0);
        atexit(scratch_remove);
}

static void scratch_write(const char *name, const char *data, size_t len) {
        int fd = openat(scratch_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        fuzz_check(fd >= 0);
        for (size_t off = 0; off < len;) {
                ssize_t n = write(fd, data + off, len - off);
                fuzz_check(n > 0);
                off += (size_t) n;
        }
        close(fd);
}

/* the state the directory holds now, as one line (NULL: -ENOMEM) */
static char *load_text(void) {
        json_object *arr = NULL;
        int r = state_journal_read_json(scratch_fd, &arr);
        fuzz_check(r == 0 || r == -ENOMEM);
        if (r < 0) return NULL;
        size_t len;
        const char *l = json_to_line(arr, &len);
        char *s = fuzz_strndup((const uint8_t *) l, len);
        json_object_put(arr);
        return s;
}

static char *load_from(bool snapshot, const char *journal_name, const char *journal, size_t len) {
        scratch_clear();
        if (snapshot) scratch_write(STATE_SNAPSHOT_FILE, snapshot_text, sizeof snapshot_text - 1);
        if (journal_name) scratch_write(journal_name, journal, len);
        return load_text();
}

static bool same_text(const char *a, const char *b) { return !a || !b || strcmp(a, b) == 0; }

static void check_load(const char *text, size_t len, bool snapshot, bool next) {
        scratch_open();
        JournalScan sc;
        Seen seen = SEEN_INIT, *s = &seen;
        scan_checked(text, len, &sc, s);
        uint64_t bytes = snapshot ? sizeof snapshot_text - 1 : 0;
        uint32_t crc = snapshot ? crc32c(0, snapshot_text, bytes) : 0;
        bool names = sc.end != JOURNAL_END_NO_HEADER && sc.header.snapshot_bytes == bytes && sc.header.snapshot_crc == crc;

        char *got = load_from(snapshot, next ? STATE_JOURNAL_NEXT_FILE : STATE_JOURNAL_FILE, text, len);
        char *alone = load_from(snapshot, NULL, NULL, 0);
        if (!names) fuzz_check(same_text(got, alone));
        /* the other name: the same */
        char *other = load_from(snapshot, next ? STATE_JOURNAL_FILE : STATE_JOURNAL_NEXT_FILE, text, len);
        fuzz_check(same_text(got, other));
        if (names) {
                /* only the records it replayed, rewritten: the same state */
                char *enc;
                size_t enc_len;
                reencode(&sc, s, true, &enc, &enc_len);
                char *again = load_from(snapshot, STATE_JOURNAL_FILE, enc, enc_len);
                fuzz_check(same_text(got, again));
                free(again);
                free(enc);
        }
        free(other);
        free(alone);
        free(got);
        seen_done(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint8_t sel = fuzz_take_byte(&data, &size);
        bool snapshot = sel & 0x10, next = sel & 0x20;
        switch (sel & 3) {
        case 0:
        case 1: {
                Seen s = SEEN_INIT;
                JournalScan sc;
                scan_checked((const char *) data, size, &sc, &s);
                if ((sel & 3) == 1) check_refused((const char *) data, size, &sc, &s, sel >> 2);
                seen_done(&s);
                break;
        }
        case 2: {
                uint64_t base = fuzz_take_byte(&data, &size);
                char *text = NULL;
                size_t len = 0, cap = 0;
                uint64_t bytes = snapshot ? sizeof snapshot_text - 1 : 0;
                format_header(&text, &len, &cap, base, bytes, snapshot ? crc32c(0, snapshot_text, bytes) : 0);
                if (len + size > cap) fuzz_check(text = realloc(text, len + size));
                if (size) memcpy(text + len, data, size);
                check_load(text, len + size, snapshot, next);
                free(text);
                break;
        }
        case 3: check_load((const char *) data, size, snapshot, next); break;
        }
        return 0;
}
