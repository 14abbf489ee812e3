/* The store: tasks.json and tasks.journal, the durable copy of the task
 * table (store.h). */

#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/manager.h"
#include "core/store.h"
#include "core/task-table.h"
#include "core/task.h"
#include "json-util.h"
#include "protocol-keys.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"

/* a failed commit is tried again after this */
#define RETRY_MS 1000
/* a change waits at most this long for its commit, however busy the loop
 * (the commit at idle priority comes first when the loop is not) */
#define COMMIT_DEADLINE_MS 250
/* A state this small (tasks.json and journal) is written whole, as a
 * snapshot, by every flush a caller asks for (the changes it needs durable
 * before going on: a dispatch, a launch, a decision): that costs about what
 * a record does, and keeps tasks.json current for whoever reads it alone at
 * those points; the commits of the loop's own (idle, deadline) append. Past
 * it, changes are
 * journal records and the journal is compacted into tasks.json once it is a
 * quarter of tasks.json's size (and at least COMPACT_MIN_BYTES), at idle
 * priority: the snapshot's cost spread over the records that made it due is
 * then a few times their size, whatever the history's. */
#define SMALL_STATE_BYTES (64U << 10)
#define COMPACT_MIN_BYTES (256U << 10)
#define COMPACT_SNAPSHOT_SHARE 4
/* the load gives the mapped text back as it goes, this much at a time */
#define LOAD_RELEASE_STEP (1U << 20)

static int store_ready(Manager *m);
static void arm_flush(Manager *m);
static void arm_deadline(Manager *m);

/* ---- what changed ---- */

static int pending_add(Manager *m, Task *t) {
        Store *st = &m->store;
        st->dirty = true;
        if (t->store_pending) return 0;
        if (st->n_pending == st->cap_pending) {
                size_t ncap = st->cap_pending ? st->cap_pending * 2 : 16;
                Task **n = reallocarray(st->pending, ncap, sizeof *n);
                if (!n) return -ENOMEM;
                st->pending = n;
                st->cap_pending = ncap;
        }
        st->pending[st->n_pending++] = t;
        t->store_pending = true;
        return 0;
}

static void mark(Task *t) {
        Manager *m = t->m;
        if (!m || m->store.loading) return;
        if (pending_add(m, t) < 0) {
                /* out of memory: the next commit cannot know this task changed;
                 * a snapshot of the whole table can */
                m->store.compact_needed = true;
                m->store.dirty = true;
        }
        arm_flush(m);
        arm_deadline(m);
}

static void on_transition(Task *t, TaskStatus old_status, ChangesetStatus old_cs, void *userdata) { mark(t); }
static void on_key_changed(Task *t, TaskKey k, void *userdata) { mark(t); }
static void on_inserted(Task *t, void *userdata) { mark(t); }

static void on_removed(Task *t, void *userdata) {
        Manager *m = t->m;
        Store *st = &m->store;
        if (t->store_pending) {
                for (size_t i = 0; i < st->n_pending; i++)
                        if (st->pending[i] == t) {
                                memmove(st->pending + i, st->pending + i + 1, (st->n_pending - i - 1) * sizeof *st->pending);
                                st->n_pending--;
                                break;
                        }
                t->store_pending = false;
        }
        if (st->loading || !t->store_durable) return;
        char *id = strdup(t->id);
        char **n = id ? reallocarray(st->tombstones, st->n_tombstones + 1, sizeof *n) : NULL;
        if (!n) {
                free(id);
                st->compact_needed = true;
        } else {
                st->tombstones = n;
                st->tombstones[st->n_tombstones++] = id;
        }
        st->dirty = true;
        arm_flush(m);
        arm_deadline(m);
}

int store_init(Manager *m) {
        (void) store_ready(m); /* the state dir may come later: opened again when needed */
        arm_flush(m);
        return manager_add_observer(m, &(TaskObserver) {.transitioned = on_transition, .key_changed = on_key_changed,
                                                        .inserted = on_inserted, .removed = on_removed});
}

static void tombstones_clear(Store *st) {
        for (size_t i = 0; i < st->n_tombstones; i++) free(st->tombstones[i]);
        free(st->tombstones);
        st->tombstones = NULL;
        st->n_tombstones = 0;
}

/* everything pending is durable now */
static void pending_committed(Manager *m) {
        Store *st = &m->store;
        for (size_t i = 0; i < st->n_pending; i++) {
                st->pending[i]->store_pending = false;
                st->pending[i]->store_durable = true;
        }
        st->n_pending = 0;
        tombstones_clear(st);
        st->dirty = st->compact_needed;
        st->deadline_timer = sd_event_source_disable_unref(st->deadline_timer);
}

void store_done(Manager *m) {
        Store *st = &m->store;
        st->flush_source = sd_event_source_disable_unref(st->flush_source);
        st->deadline_timer = sd_event_source_disable_unref(st->deadline_timer);
        st->retry_timer = sd_event_source_disable_unref(st->retry_timer);
        st->compact_source = sd_event_source_disable_unref(st->compact_source);
        free(st->load_error);
        st->load_error = NULL;
        free(st->journal_note);
        st->journal_note = NULL;
        free(st->pending);
        st->pending = NULL;
        st->n_pending = st->cap_pending = 0;
        tombstones_clear(st);
        if (st->ready) {
                state_journal_done(&st->journal);
                st->dir_fd = safe_close(st->dir_fd);
                st->ready = false;
        }
}

/* the journal's writer and the state dir's fd, once (a Manager starts
 * zeroed: fd 0 is not ours) */
static int store_ready(Manager *m) {
        Store *st = &m->store;
        if (!st->ready) {
                st->journal = (StateJournal) STATE_JOURNAL_INIT;
                st->dir_fd = -1;
                st->ready = true;
        }
        if (st->dir_fd < 0 && m->paths.state_dir) {
                st->dir_fd = open(m->paths.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (st->dir_fd < 0) return -errno;
                st->journal.dir_fd = st->dir_fd;
        }
        return 0;
}

int store_check_loaded(Manager *m, char **reason) {
        if (!m->store.load_error) return 0;
        return set_error(reason, -EIO,
                         "error: could not read persisted task state: %s\nhelp: repair %s/tasks.json before using taskferry",
                         m->store.load_error, m->paths.state_dir);
}

const char *store_journal_note(Manager *m) { return m->store.journal_note; }

void task_persist(Task *t) { mark(t); }

/* ---- the group commit ---- */

static int store_commit(Manager *m, bool asked);

static int flush_cb(sd_event_source *s, void *userdata) {
        Manager *m = userdata;
        int r = store_commit(m, false);
        if (r < 0) log_error_errno(r, "failed to persist task state");
        return 0;
}

static int retry_cb(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        m->store.retry_timer = sd_event_source_disable_unref(m->store.retry_timer);
        return flush_cb(NULL, m);
}

/* The commit after the loop's work: a post source, due once another source
 * ran, at idle priority, so that it runs once every other source due has
 * run (sd-event dispatches one source a turn, by priority): everything that
 * changed in a burst is committed together. sd-event marks the post sources
 * due before it dispatches another source, so one turned on inside that
 * source's callback would wait for the next: it stays on from the start
 * instead, and its callback does nothing while nothing changed. What must be
 * durable before the daemon goes on is flushed by its caller at once. */
static void arm_flush(Manager *m) {
        Store *st = &m->store;
        if (!m->event || st->flush_source) return;
        int r = sd_event_add_post(m->event, &st->flush_source, flush_cb, m);
        if (r >= 0) r = sd_event_source_set_priority(st->flush_source, SD_EVENT_PRIORITY_IDLE);
        if (r < 0) {
                st->flush_source = sd_event_source_disable_unref(st->flush_source);
                log_warning_errno(r, "cannot arm the state commit; committing now");
                (void) manager_flush(m);
        }
}

static int deadline_cb(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        m->store.deadline_timer = sd_event_source_disable_unref(m->store.deadline_timer);
        return flush_cb(NULL, m);
}

static void arm_deadline(Manager *m) {
        Store *st = &m->store;
        if (!m->event || st->deadline_timer || st->loading) return;
        (void) sd_event_add_time_relative(m->event, &st->deadline_timer, CLOCK_MONOTONIC, COMMIT_DEADLINE_MS * 1000ULL,
                                          0, deadline_cb, m);
}

static void arm_retry(Manager *m) {
        if (!m->event || m->store.retry_timer) return;
        (void) sd_event_add_time_relative(m->event, &m->store.retry_timer, CLOCK_MONOTONIC, RETRY_MS * 1000ULL, 0,
                                          retry_cb, m);
}

static int compact_cb(sd_event_source *s, void *userdata) {
        Manager *m = userdata;
        m->store.compact_source = sd_event_source_disable_unref(m->store.compact_source);
        int r = manager_compact(m);
        if (r < 0) log_warning_errno(r, "cannot compact the task state into tasks.json (the journal keeps it)");
        return 0;
}

/* the journal is past its threshold: a compaction once nothing else is due */
static void maybe_schedule_compaction(Manager *m) {
        Store *st = &m->store;
        uint64_t limit = st->snapshot_bytes / COMPACT_SNAPSHOT_SHARE;
        if (limit < COMPACT_MIN_BYTES) limit = COMPACT_MIN_BYTES;
        if (st->journal.committed < limit || st->compact_source || !m->event) return;
        int r = sd_event_add_defer(m->event, &st->compact_source, compact_cb, m);
        /* after the commit (which it makes anyway), once nothing else is due */
        if (r >= 0) r = sd_event_source_set_priority(st->compact_source, SD_EVENT_PRIORITY_IDLE + 10);
        if (r < 0) {
                st->compact_source = sd_event_source_disable_unref(st->compact_source);
                log_warning_errno(r, "cannot schedule the compaction of tasks.journal");
        }
}

/* one task's record as a journal payload (tasks.json's record on one line) */
static int append_task(Manager *m, Task *t) {
        _cleanup_json_ json_object *rec = task_record_to_json(&t->rec);
        size_t len = 0;
        const char *s = rec ? json_to_line(rec, &len) : NULL;
        if (!s) return -ENOMEM;
        return state_journal_append(&m->store.journal, JOURNAL_TASK, s, len, NULL);
}

static int append_tombstone(Manager *m, const char *id) {
        _cleanup_json_ json_object *o = json_object_new_string(id);
        size_t len = 0;
        const char *s = o ? json_to_line(o, &len) : NULL;
        if (!s) return -ENOMEM;
        return state_journal_append(&m->store.journal, JOURNAL_TOMBSTONE, s, len, NULL);
}

static bool same_file(const struct stat *sb, dev_t dev, ino_t ino, off_t size, const struct timespec *mtim) {
        return sb->st_dev == dev && sb->st_ino == ino && sb->st_size == size && sb->st_mtim.tv_sec == mtim->tv_sec &&
               sb->st_mtim.tv_nsec == mtim->tv_nsec;
}

/* tasks.json is still the snapshot the journal follows (no one replaced,
 * removed or edited it since the load or the last compaction) */
static bool snapshot_in_place(Manager *m) {
        Store *st = &m->store;
        struct stat sb;
        return st->snap_known && fstatat(st->dir_fd, STATE_SNAPSHOT_FILE, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
               same_file(&sb, st->snap_dev, st->snap_ino, st->snap_size, &st->snap_mtim);
}

/* that, and tasks.journal still the file appended to: else appends would
 * land where the next start ignores them */
static bool pair_in_place(Manager *m) {
        Store *st = &m->store;
        struct stat sb, jb;
        if (!snapshot_in_place(m)) return false;
        return fstat(st->journal.fd, &jb) == 0 && fstatat(st->dir_fd, STATE_JOURNAL_FILE, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
               sb.st_dev == jb.st_dev && sb.st_ino == jb.st_ino;
}

static void keep_damaged_journal(Manager *m);

/* A journal for tasks.json as loaded, carrying what the load replayed (no
 * snapshot written); a compaction where tasks.json changed since or the
 * journal cannot be written. */
static int reset_journal(Manager *m) {
        Store *st = &m->store;
        if (!snapshot_in_place(m)) return manager_compact(m);
        keep_damaged_journal(m);
        int r = state_journal_reset(&st->journal, &st->reset_header, st->reset_src ? st->reset_src : STATE_JOURNAL_FILE,
                                    st->reset_from, st->reset_to, st->reset_records, st->reset_last_seq);
        if (r < 0) {
                log_warning_errno(r, "cannot write a fresh %s/" STATE_JOURNAL_FILE "; writing tasks.json whole",
                                  m->paths.state_dir);
                return manager_compact(m);
        }
        st->reset_needed = false;
        return 0;
}

/* asked: a caller's flush (a small state is then written whole) */
static int store_commit(Manager *m, bool asked) {
        Store *st = &m->store;
        if (!st->dirty) return 0;
        if (st->load_error) return -EIO; /* never overwrite state we could not read */
        int r = store_ready(m);
        if (r < 0) return r;
        if (st->reset_needed && !st->compact_needed) {
                r = reset_journal(m);
                if (r < 0 || !st->dirty) return r;
        }
        if (st->compact_needed || !state_journal_usable(&st->journal)) return manager_compact(m);
        if (asked && st->snapshot_bytes + st->journal.committed <= SMALL_STATE_BYTES) return manager_compact(m);
        if (!pair_in_place(m)) {
                log_warning("%s/tasks.json or tasks.journal was replaced behind the daemon; writing both anew",
                            m->paths.state_dir);
                return manager_compact(m);
        }
        for (size_t i = 0; r >= 0 && i < st->n_pending; i++) r = append_task(m, st->pending[i]);
        for (size_t i = 0; r >= 0 && i < st->n_tombstones; i++) r = append_tombstone(m, st->tombstones[i]);
        if (r >= 0) r = state_journal_commit(&st->journal);
        else state_journal_discard(&st->journal);
        if (r == -EBADF || r == -E2BIG || (r < 0 && !state_journal_usable(&st->journal)))
                /* the journal cannot take it (a write that could not be
                 * undone): the whole table goes to a snapshot instead */
                return manager_compact(m);
        if (r < 0) {
                arm_retry(m);
                return r;
        }
        pending_committed(m);
        maybe_schedule_compaction(m);
        return 0;
}

int manager_flush(Manager *m) { return store_commit(m, true); }

int manager_flush_now(Manager *m) { return manager_flush(m); }

int manager_flush_final(Manager *m) {
        int r = manager_flush(m);
        if (r < 0 || m->store.load_error) return r;
        /* tasks.json is whole already when the journal holds nothing after it */
        if (state_journal_usable(&m->store.journal) && m->store.journal.n_records == 0) return 0;
        int k = manager_compact(m);
        if (k < 0) log_warning_errno(k, "cannot write tasks.json at shutdown; tasks.journal holds the changes since");
        return 0;
}

/* ---- the snapshot text ---- */

/* Where the snapshot text goes: a compaction's temp file, or memory. */
typedef int (*text_sink_fn)(void *userdata, const char *s, size_t n);

#define TASKS_JSON_FLAGS (JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE)

/* The text json-c writes for the array of every record with
 * TASKS_JSON_FLAGS, made one record at a time so that only one record's
 * JSON tree exists at once (10,000 records as one tree take ~100 MB): each
 * record printed alone, its lines indented one level (two spaces; a JSON
 * string holds no raw newline, so every '\n' starts a line), between json-c's
 * "[\n", ",\n" and "\n]". test-store compares it with json-c's own output.
 * prev_fd: the tasks.json of the last compaction (-1: none): a record
 * unchanged since (Task.text_len > 0 made at the record's current
 * generation) is read from it instead of printed again. Every task's
 * text_off/text_len then says where its record is in the new text. */
static int tasks_json(Manager *m, int prev_fd, uint64_t prev_len, text_sink_fn sink, void *userdata) {
        uint64_t pos = 0;
        char copy[64 << 10];
#define PUT(s, n) ({ int _k = sink(userdata, (s), (n)); pos += (n); _k; })
        int r = PUT("[", 1);
        for (size_t i = 0; r >= 0 && i < m->n_tasks; i++) {
                Task *t = m->tasks[i];
                r = PUT(i ? ",\n  " : "\n  ", i ? 4 : 3);
                if (r < 0) break;
                uint64_t off = pos;
                if (prev_fd >= 0 && t->text_len > 0 && t->text_generation == t->generation &&
                    t->text_off + t->text_len <= prev_len) {
                        for (uint64_t k = 0; r >= 0 && k < t->text_len;) {
                                size_t want = t->text_len - k < sizeof copy ? (size_t) (t->text_len - k) : sizeof copy;
                                ssize_t n = pread(prev_fd, copy, want, (off_t) (t->text_off + k));
                                if (n < 0 && errno == EINTR) continue;
                                if (n <= 0) r = n < 0 ? -errno : -EIO;
                                else {
                                        r = PUT(copy, (size_t) n);
                                        k += (uint64_t) n;
                                }
                        }
                } else {
                        json_object *rec = task_record_to_json(&t->rec);
                        size_t len = 0;
                        const char *s = rec ? json_object_to_json_string_length(rec, TASKS_JSON_FLAGS, &len) : NULL;
                        if (!s) r = -ENOMEM;
                        for (size_t k = 0; r >= 0 && k < len;) {
                                const char *nl = memchr(s + k, '\n', len - k);
                                size_t n = nl ? (size_t) (nl - (s + k)) + 1 : len - k;
                                r = PUT(s + k, n);
                                if (r >= 0 && nl) r = PUT("  ", 2);
                                k += n;
                        }
                        json_object_put(rec);
                }
                t->text_off = off;
                t->text_len = pos - off <= UINT32_MAX ? (uint32_t) (pos - off) : 0;
                t->text_generation = t->generation;
        }
        if (r >= 0) r = PUT("\n]", 2);
#undef PUT
        return r;
}

/* The text being built in memory: mmapped memory grown with mremap, so that
 * a 14 MB text goes back to the kernel as soon as it is freed (a malloc'd
 * one would raise glibc's mmap threshold and stay in the heap). */
typedef struct TextBuf {
        char *data;
        size_t len, cap;
} TextBuf;

static int textbuf_append(void *userdata, const char *s, size_t n) {
        TextBuf *b = userdata;
        if (b->len + n + 1 > b->cap) {
                size_t ncap = b->cap ? b->cap : 1 << 20;
                while (ncap < b->len + n + 1) ncap *= 2;
                void *nd = b->data ? mremap(b->data, b->cap, ncap, MREMAP_MAYMOVE)
                                   : mmap(NULL, ncap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (nd == MAP_FAILED) return -ENOMEM;
                b->data = nd;
                b->cap = ncap;
        }
        memcpy(b->data + b->len, s, n);
        b->len += n;
        b->data[b->len] = 0;
        return 0;
}

void manager_tasks_json_free(char *text, size_t len) {
        if (!text) return;
        size_t cap = 1 << 20;
        while (cap < len + 1) cap *= 2;
        (void) munmap(text, cap);
}

int manager_tasks_json(Manager *m, char **ret, size_t *ret_len) {
        TextBuf b = {0};
        int r = tasks_json(m, -1, 0, textbuf_append, &b);
        if (r >= 0 && !b.data) r = textbuf_append(&b, "", 0);
        /* the offsets are into this text, not into the file */
        for (size_t i = 0; i < m->n_tasks; i++) m->tasks[i]->text_len = 0;
        m->store.written = false;
        if (r < 0) {
                if (b.data) (void) munmap(b.data, b.cap);
                return r;
        }
        *ret = b.data;
        *ret_len = b.len;
        return 0;
}

static int compaction_sink(void *userdata, const char *s, size_t n) {
        return state_journal_compact_write(userdata, s, n);
}

/* The last tasks.json this daemon wrote, if it is still the file there (same
 * inode, size and mtime as right after the rename): open for reading. */
static int open_own_text(Manager *m, uint64_t *ret_len) {
        Store *st = &m->store;
        if (!st->written) return -1;
        int fd = openat(st->dir_fd, STATE_SNAPSHOT_FILE, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
        struct stat sb;
        if (fd < 0) return -1;
        if (fstat(fd, &sb) < 0 || sb.st_dev != st->dev || sb.st_ino != st->ino || sb.st_size != st->size ||
            sb.st_mtim.tv_sec != st->mtim.tv_sec || sb.st_mtim.tv_nsec != st->mtim.tv_nsec || sb.st_size == 0)
                return safe_close(fd);
        *ret_len = (uint64_t) sb.st_size;
        return fd;
}

/* a journal with a damaged record stays on disk for a look (its inode,
 * linked before the compaction renames the new journal over it) */
static void keep_damaged_journal(Manager *m) {
        Store *st = &m->store;
        if (!st->keep_damaged) return;
        (void) unlinkat(st->dir_fd, STATE_JOURNAL_DAMAGED_FILE, 0);
        if (linkat(st->dir_fd, STATE_JOURNAL_FILE, st->dir_fd, STATE_JOURNAL_DAMAGED_FILE, 0) < 0)
                log_warning_errno(-errno, "cannot keep the damaged journal as %s/" STATE_JOURNAL_DAMAGED_FILE,
                                  m->paths.state_dir);
        else
                log_warning("the damaged journal is kept as %s/" STATE_JOURNAL_DAMAGED_FILE, m->paths.state_dir);
        st->keep_damaged = false;
}

int manager_compact(Manager *m) {
        Store *st = &m->store;
        if (st->load_error) return -EIO;
        int r = store_ready(m);
        if (r < 0) return r;
        if (st->dir_fd < 0) return -EBADF;
        /* what was committed is carried; nothing may wait in the buffer */
        state_journal_discard(&st->journal);
        keep_damaged_journal(m);
        uint64_t prev_len = 0;
        _cleanup_close_ int prev_fd = open_own_text(m, &prev_len);
        if (prev_fd < 0)
                for (size_t i = 0; i < m->n_tasks; i++) m->tasks[i]->text_len = 0;
        JournalCompaction c = JOURNAL_COMPACTION_INIT;
        r = state_journal_compact_begin(&st->journal, &c);
        st->written = false;
        if (r >= 0) r = tasks_json(m, prev_fd, prev_len, compaction_sink, &c);
        if (r < 0) {
                state_journal_compact_abort(&c);
                return r;
        }
        uint64_t bytes = c.bytes;
        r = state_journal_compact_finish(&st->journal, &c);
        if (r < 0) {
                st->compact_needed = true; /* the next flush tries again */
                st->dirty = true;
                arm_retry(m);
                return r;
        }
        struct stat sb;
        st->snap_known = fstatat(st->dir_fd, STATE_SNAPSHOT_FILE, &sb, AT_SYMLINK_NOFOLLOW) == 0;
        if (st->snap_known) {
                st->written = true;
                st->dev = st->snap_dev = sb.st_dev;
                st->ino = st->snap_ino = sb.st_ino;
                st->size = st->snap_size = sb.st_size;
                st->mtim = st->snap_mtim = sb.st_mtim;
        }
        st->snapshot_bytes = bytes;
        st->compactions++;
        st->compact_needed = st->reset_needed = false;
        for (size_t i = 0; i < m->n_tasks; i++) m->tasks[i]->store_durable = true;
        pending_committed(m);
        return 0;
}

/* ---- load ---- */

/* JSON whitespace (RFC 8259: space, tab, LF, CR), what json_parse_strict accepts around values */
static size_t skip_ws(const char *s, size_t i, size_t len) {
        while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
        return i;
}

/* Parse tasks.json's top-level array one element at a time, calling fn for
 * each with the element (a new reference fn takes): the same grammar and
 * limits as json_parse_strict of the whole text (strict, valid UTF-8, no NUL,
 * nesting depth 64 counting the array), without ever holding more than one
 * element's tree. With release, the pages of s parsed are given back as it
 * goes (s is then a private mapping of the file). -EBADMSG if the text is
 * not a JSON array, or fn's error. */
static int parse_records(const char *s, size_t len, bool release, int (*fn)(void *userdata, json_object *e),
                         void *userdata) {
        if (memchr(s, 0, len) || len > INT_MAX) return -EBADMSG;
        json_tokener *tok = json_tokener_new_ex(63);
        if (!tok) return -ENOMEM;
        /* ALLOW_TRAILING_CHARS: stop after the element; the ',' or ']' after it is ours */
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8 | JSON_TOKENER_ALLOW_TRAILING_CHARS);
        int r = -EBADMSG;
        size_t released = 0;
        size_t i = skip_ws(s, 0, len);
        if (i >= len || s[i] != '[') goto out;
        i = skip_ws(s, i + 1, len);
        if (i < len && s[i] == ']') {
                r = skip_ws(s, i + 1, len) == len ? 0 : -EBADMSG;
                goto out;
        }
        for (;;) {
                json_tokener_reset(tok);
                json_object *e = json_tokener_parse_ex(tok, s + i, (int) (len - i));
                if (json_tokener_get_error(tok) != json_tokener_success) {
                        json_object_put(e);
                        r = -EBADMSG; /* incomplete at the end of the text is malformed too */
                        break;
                }
                size_t used = json_tokener_get_parse_end(tok);
                if (json_extension_check(s + i, used) != json_tokener_success) {
                        /* NaN, 'quotes', a raw control character: no JSON the Node CLI reads */
                        json_object_put(e);
                        r = -EBADMSG;
                        break;
                }
                i += used;
                size_t done = i & ~((size_t) LOAD_RELEASE_STEP - 1);
                if (release && done >= released + LOAD_RELEASE_STEP) {
                        (void) madvise((char *) s + released, done - released, MADV_DONTNEED);
                        released = done;
                }
                r = fn(userdata, e);
                if (r < 0) break;
                r = -EBADMSG;
                i = skip_ws(s, i, len);
                if (i >= len) break;
                if (s[i] == ']') {
                        r = skip_ws(s, i + 1, len) == len ? 0 : -EBADMSG;
                        break;
                }
                if (s[i] != ',') break;
                i = skip_ws(s, i + 1, len);
        }
out:
        json_tokener_free(tok);
        return r;
}

int store_parse_records(const char *s, size_t len, int (*fn)(void *userdata, json_object *e), void *userdata) {
        return parse_records(s, len, false, fn, userdata);
}

/* The tasks loaded so far by id (the first record with an id wins, as
 * before; the journal's records find theirs): an open-addressing table, so
 * a load costs O(n), not O(n²). A removed task's slot keeps a marker. */
typedef struct IdSet {
        Task **slot;
        size_t mask, n;
} IdSet;

static Task removed_marker;
#define REMOVED (&removed_marker)

static uint64_t id_hash(const char *s) {
        uint64_t h = 1469598103934665603ULL;
        for (; *s; s++) h = (h ^ (unsigned char) *s) * 1099511628211ULL;
        return h;
}

/* the slot of id (NULL: none) */
static Task **idset_find(IdSet *set, const char *id) {
        if (!set->slot) return NULL;
        for (size_t j = id_hash(id) & set->mask;; j = (j + 1) & set->mask) {
                if (!set->slot[j]) return NULL;
                if (set->slot[j] != REMOVED && streq(set->slot[j]->id, id)) return &set->slot[j];
        }
}

/* 1 added, 0 already there, -ENOMEM */
static int idset_add(IdSet *set, Task *t) {
        if ((set->n + 1) * 2 > set->mask + 1 || !set->slot) {
                size_t cap = set->slot ? (set->mask + 1) * 2 : 1024;
                Task **ns = calloc(cap, sizeof *ns);
                if (!ns) return -ENOMEM;
                size_t n = 0;
                for (size_t i = 0; set->slot && i <= set->mask; i++)
                        if (set->slot[i] && set->slot[i] != REMOVED) {
                                for (size_t j = id_hash(set->slot[i]->id) & (cap - 1);; j = (j + 1) & (cap - 1))
                                        if (!ns[j]) {
                                                ns[j] = set->slot[i];
                                                break;
                                        }
                                n++;
                        }
                free(set->slot);
                set->slot = ns;
                set->mask = cap - 1;
                set->n = n;
        }
        if (idset_find(set, t->id)) return 0;
        for (size_t j = id_hash(t->id) & set->mask;; j = (j + 1) & set->mask)
                if (!set->slot[j]) {
                        set->slot[j] = t;
                        set->n++;
                        return 1;
                }
}

/* Identical small JSON values of the records (every task's network policy,
 * an empty list of warnings) become one shared object at load: a record's
 * value is never changed in place (a write replaces it), and one json-c
 * object with its hash table is ~1 KB, per task most of a large table's
 * memory otherwise. The values by their text, for the load's duration. */
typedef struct Intern {
        char *text;
        json_object *v;
} Intern;

typedef struct InternSet {
        Intern *slot;
        size_t mask, n;
} InternSet;

/* only values this small are shared (their text is made to compare them) */
#define INTERN_MAX_TEXT 512

typedef struct LoadState {
        IdSet ids;
        InternSet values;
        size_t first; /* m->tasks index of the first task this load added */
        json_tokener *tok;
        size_t replayed, removed;
} LoadState;

static LoadState *load_state;

static void intern_set_done(InternSet *set) {
        for (size_t i = 0; set->slot && i <= set->mask; i++) {
                free(set->slot[i].text);
                json_object_put(set->slot[i].v);
        }
        free(set->slot);
        *set = (InternSet) {0};
}

/* the shared value with that text, or v entered as it (a new reference
 * either way); v itself when the table cannot grow */
static json_object *intern_value(InternSet *set, json_object *v, const char *text) {
        if ((set->n + 1) * 2 > set->mask + 1 || !set->slot) {
                size_t cap = set->slot ? (set->mask + 1) * 2 : 64;
                Intern *ns = calloc(cap, sizeof *ns);
                if (!ns) return json_object_get(v);
                for (size_t i = 0; set->slot && i <= set->mask; i++)
                        if (set->slot[i].text)
                                for (size_t j = id_hash(set->slot[i].text) & (cap - 1);; j = (j + 1) & (cap - 1))
                                        if (!ns[j].text) {
                                                ns[j] = set->slot[i];
                                                break;
                                        }
                free(set->slot);
                set->slot = ns;
                set->mask = cap - 1;
        }
        for (size_t j = id_hash(text) & set->mask;; j = (j + 1) & set->mask) {
                if (!set->slot[j].text) {
                        char *copy = strdup(text);
                        if (!copy) return json_object_get(v);
                        set->slot[j] = (Intern) {.text = copy, .v = json_object_get(v)};
                        set->n++;
                        return json_object_get(v);
                }
                if (streq(set->slot[j].text, text)) return json_object_get(set->slot[j].v);
        }
}

/* t's values of the keys that repeat across tasks, shared */
static void intern_record(LoadState *ls, Task *t) {
        static const TaskKey keys[] = {TASK_KEY_network, TASK_KEY_changeset_warnings, TASK_KEY_changeset_risks};
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                _cleanup_json_ json_object *v = task_record_get_json(&t->rec, keys[i]);
                if (!v) continue;
                size_t len = 0;
                const char *text = json_to_line(v, &len);
                if (!text || len > INTERN_MAX_TEXT) continue;
                json_object *shared = intern_value(&ls->values, v, text);
                if (shared == v) json_object_put(shared);
                else (void) task_set_json(t, keys[i], shared);
        }
}

/* store_parse_records' fn: one record into the table (no side effects yet). */
static int load_one(void *userdata, json_object *rec) {
        Manager *m = userdata;
        _cleanup_json_ json_object *owned = rec;
        if (!json_is_object(rec) || !json_get_string(rec, PK_id)) return 0;
        const char *id = json_get_string(rec, PK_id);
        for (size_t i = 0; i < load_state->first; i++)
                if (streq(m->tasks[i]->id, id)) return 0; /* tasks already in the table (none at start-up) */
        Task *t = task_table_add_json(m, TAKE_PTR(owned));
        if (!t) return -ENOMEM;
        int r = idset_add(&load_state->ids, t);
        if (r < 0) return r;
        if (r == 0) {
                /* a duplicate id: the first record wins */
                manager_remove_task(m, t);
                return 0;
        }
        intern_record(load_state, t);
        return 0;
}

/* state_journal_load's fn: one journal record over the table. A record that
 * is no task record is damaged (-EBADMSG: the replay stops there). */
static int replay_one(JournalKind kind, uint64_t seq, const char *payload, size_t len, void *userdata) {
        Manager *m = userdata;
        LoadState *ls = load_state;
        json_object *o = NULL;
        if (json_parse_strict_with(ls->tok, payload, len, &o) < 0) return -EBADMSG;
        if (kind == JOURNAL_TOMBSTONE) {
                _cleanup_json_ json_object *owned = o;
                if (!json_object_is_type(owned, json_type_string)) return -EBADMSG;
                Task **slot = idset_find(&ls->ids, json_object_get_string(owned));
                if (slot) {
                        Task *t = *slot;
                        *slot = REMOVED;
                        manager_remove_task(m, t);
                        ls->removed++;
                }
                return 0;
        }
        if (!json_is_object(o) || !json_get_string(o, PK_id)) {
                json_object_put(o);
                return -EBADMSG;
        }
        ls->replayed++;
        Task **slot = idset_find(&ls->ids, json_get_string(o, PK_id));
        if (slot) {
                Task *t = NULL;
                int r = task_table_replace_json(m, *slot, o, &t);
                if (r < 0) return r == -EINVAL ? -EBADMSG : r;
                *slot = t;
                intern_record(ls, t);
                return 0;
        }
        for (size_t i = 0; i < ls->first; i++)
                if (streq(m->tasks[i]->id, json_get_string(o, PK_id))) {
                        json_object_put(o); /* tasks already in the table (none at start-up) */
                        return 0;
                }
        Task *t = task_table_add_json(m, o);
        if (!t) return -ENOMEM;
        intern_record(ls, t);
        return idset_add(&ls->ids, t) < 0 ? -ENOMEM : 0;
}

/* size and CRC-32C of the open tasks.json, read in pieces (never whole in memory) */
static int snapshot_identity(int fd, uint64_t size, uint32_t *ret_crc) {
        char buf[64 << 10];
        uint32_t crc = 0;
        for (uint64_t off = 0; off < size;) {
                ssize_t n = pread(fd, buf, sizeof buf, (off_t) off);
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) return n < 0 ? -errno : -EIO;
                crc = crc32c(crc, buf, (size_t) n);
                off += (uint64_t) n;
        }
        *ret_crc = crc;
        return 0;
}

/* The journal's replay, after tasks.json's records: what it found said in
 * the log and kept for doctor; compact_needed where the next flush must
 * write a fresh pair. */
static int load_journal(Manager *m, LoadState *ls, uint64_t bytes, uint32_t crc) {
        Store *st = &m->store;
        JournalLoad ld;
        ls->tok = json_strict_tokener_new_depth(63);
        if (!ls->tok) return -ENOMEM;
        int r = state_journal_load(st->dir_fd, bytes, crc, replay_one, m, &ld);
        json_tokener_free(TAKE_PTR(ls->tok));
        if (r == -ENOMEM) return r;
        free(st->journal_note);
        st->journal_note = NULL;
        const JournalScan *sc = &ld.scan;
        if (r < 0) {
                st->journal_note = strdup_printf("tasks.journal could not be read (%s); tasks.json alone was loaded",
                                                 strerror(-r));
                log_error("%s/%s", m->paths.state_dir, strnull(st->journal_note));
                st->compact_needed = true;
                return 0;
        }
        if (ld.stale)
                st->journal_note = strdup_printf("tasks.journal (%zu bytes) follows another tasks.json than the one there "
                                                 "(replaced since): ignored",
                                                 ld.stale_bytes);
        else if (ld.found && sc->end == JOURNAL_END_TORN)
                st->journal_note = strdup_printf("tasks.journal had a torn tail (a write cut short by a crash): %zu of its "
                                                 "%zu bytes kept, %zu records replayed",
                                                 sc->valid_bytes, sc->total_bytes, sc->n_records);
        else if (ld.found && sc->end == JOURNAL_END_DAMAGED) {
                st->journal_note = strdup_printf("tasks.journal has a damaged record at byte %zu of %zu: the %zu records "
                                                 "before it were replayed, none after",
                                                 sc->valid_bytes, sc->total_bytes, sc->n_records);
                st->keep_damaged = true;
        } else if (ld.found && sc->end == JOURNAL_END_NO_HEADER)
                st->journal_note = strdup("tasks.journal has no valid header: ignored");
        if (st->journal_note) {
                if (ld.found && sc->end == JOURNAL_END_DAMAGED) log_error("%s/%s", m->paths.state_dir, st->journal_note);
                else log_warning("%s/%s", m->paths.state_dir, st->journal_note);
        }
        if (ld.from_next)
                log_info("%s: a compaction stopped between its renames; its journal (" STATE_JOURNAL_NEXT_FILE ") was "
                         "replayed",
                         m->paths.state_dir);
        if (ld.found && !ld.from_next && sc->end == JOURNAL_END_CLEAN) {
                r = state_journal_open(&st->journal, st->dir_fd, sc);
                if (r < 0) {
                        log_warning_errno(r, "cannot open %s/" STATE_JOURNAL_FILE " to append", m->paths.state_dir);
                        st->compact_needed = true;
                }
        } else {
                /* a fresh journal for this tasks.json at the first flush */
                st->reset_needed = true;
                st->reset_header = (JournalHeader) {.base_seq = ld.found ? sc->header.base_seq : 0,
                                                    .snapshot_bytes = bytes, .snapshot_crc = crc};
                st->reset_src = !ld.found ? NULL : ld.from_next ? STATE_JOURNAL_NEXT_FILE : STATE_JOURNAL_FILE;
                st->reset_from = ld.found ? sc->header_bytes : 0;
                st->reset_to = ld.found ? sc->valid_bytes : 0;
                st->reset_records = ld.found ? sc->n_records : 0;
                st->reset_last_seq = ld.found ? sc->last_seq : 0;
                st->journal.next_seq = st->reset_last_seq + 1;
        }
        return 0;
}

int manager_load_tasks(Manager *m) {
        Store *st = &m->store;
        _cleanup_free_ char *path = strdup_printf("%s/tasks.json", m->paths.state_dir);
        if (!path) return -ENOMEM;
        /* no state dir to open: tasks.json's own open below says why */
        (void) store_ready(m);
        state_journal_done(&st->journal);
        st->journal = (StateJournal) STATE_JOURNAL_INIT;
        st->journal.dir_fd = st->dir_fd;
        st->compact_needed = false;
        /* Memory: a store of 10,000 settled tasks must load in a few MB above
         * the records themselves, with no peak above that. The text is
         * mapped, not copied, parsed one record at a time and given back as
         * it is parsed, so only the typed records stay; the transient trees'
         * freed chunks go back to the kernel with malloc_trim at the end. */
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        bool missing = fd < 0 && errno == ENOENT;
        int r = fd < 0 && !missing ? -errno : 0;
        struct stat sb = {0};
        if (r >= 0 && !missing && fstat(fd, &sb) < 0) r = -errno;
        if (r >= 0 && !missing && !S_ISREG(sb.st_mode)) r = S_ISDIR(sb.st_mode) ? -EISDIR : -EBADMSG;
        if (r >= 0 && sb.st_size >= ((off_t) 1 << 31)) r = -EFBIG;
        size_t len = r >= 0 ? (size_t) sb.st_size : 0;
        uint32_t crc = 0;
        if (r >= 0 && len > 0) r = snapshot_identity(fd, len, &crc);
        void *map = NULL;
        if (r >= 0 && len > 0) {
                map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
                if (map == MAP_FAILED) {
                        map = NULL;
                        r = -errno;
                }
        }
        LoadState ls = {.first = m->n_tasks};
        st->loading = true;
        load_state = &ls;
        if (r >= 0 && !missing) r = parse_records(map ? map : "", len, true, load_one, m);
        if (map) (void) munmap(map, len);
        /* the journal only over a snapshot that loaded (never over a file we cannot read) */
        st->reset_needed = false;
        if (r >= 0 && st->dir_fd >= 0) r = load_journal(m, &ls, missing ? 0 : len, crc);
        /* no tasks.json: a journal alone follows nothing; a snapshot is owed */
        if (r >= 0 && (missing || st->dir_fd < 0)) st->compact_needed = true;
        load_state = NULL;
        st->loading = false;
        free(ls.ids.slot);
        intern_set_done(&ls.values);
        if (r < 0) {
                /* a partly read file loads nothing */
                st->loading = true;
                while (m->n_tasks > ls.first) manager_remove_task(m, m->tasks[m->n_tasks - 1]);
                st->loading = false;
                if (r == -ENOMEM) return r;
                free(st->load_error); /* a second load reports its own error */
                st->load_error = strdup_printf("%s: %s", path, r == -EBADMSG ? "not a JSON array of task records" : strerror(-r));
                log_error("could not read persisted task state: %s", strnull(st->load_error));
                (void) malloc_trim(0);
                return 0;
        }
        if (!missing) (void) chmod(path, 0600);
        st->snapshot_bytes = len;
        st->snap_known = !missing;
        st->snap_dev = sb.st_dev;
        st->snap_ino = sb.st_ino;
        st->snap_size = sb.st_size;
        st->snap_mtim = sb.st_mtim;
        st->loading = true;
        /* what the original wrote differently, as it read it back */
        for (size_t i = ls.first; i < m->n_tasks; i++) {
                Task *t = m->tasks[i];
                if (t->rec.summary_of) task_set_bool(t, TASK_KEY_internal, true);
                if (!t->rec.executor_id) task_set_str(t, TASK_KEY_executor_id, "opencode");
                t->store_durable = true;
        }
        st->loading = false;
        /* a fresh journal or pair is owed (none follows tasks.json, or it was cut) */
        st->dirty = st->dirty || st->compact_needed || st->reset_needed;
        (void) malloc_trim(0);
        return 0;
}
