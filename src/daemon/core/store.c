/* The store: tasks.json, the durable copy of the task table (store.h). */

#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/stat.h>

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

#define PERSIST_DEBOUNCE_MS 250

static int persist_timer_cb(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        m->store.persist_timer = sd_event_source_disable_unref(m->store.persist_timer);
        int r = manager_flush(m);
        if (r < 0) log_error_errno(r, "failed to persist task state");
        return 0;
}

static void on_transition(Task *t, TaskStatus old_status, ChangesetStatus old_cs, void *userdata) {
        task_persist(t);
}

int store_init(Manager *m) { return manager_add_task_observer(m, on_transition, NULL); }

void store_done(Manager *m) {
        m->store.persist_timer = sd_event_source_disable_unref(m->store.persist_timer);
        free(m->store.load_error);
        m->store.load_error = NULL;
}

int store_check_loaded(Manager *m, char **reason) {
        if (!m->store.load_error) return 0;
        return set_error(reason, -EIO,
                         "error: could not read persisted task state: %s\nhelp: repair %s/tasks.json before using taskferry",
                         m->store.load_error, m->paths.state_dir);
}

void task_persist(Task *t) {
        Manager *m = t->m;
        if (!m) return; /* not in a table yet: nothing to write */
        m->store.dirty = true;
        if (m->store.persist_timer || !m->event) return;
        uint64_t now;
        sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        int r = sd_event_add_time(m->event, &m->store.persist_timer, CLOCK_MONOTONIC,
                                  now + PERSIST_DEBOUNCE_MS * 1000ULL, 0, persist_timer_cb, m);
        if (r < 0) {
                log_warning_errno(r, "cannot arm persist timer; flushing now");
                (void) manager_flush(m);
        }
}

/* The text being written: mmapped memory grown with mremap, so that a
 * 14 MB tasks.json goes back to the kernel as soon as it is written (a
 * malloc'd one would raise glibc's mmap threshold and stay in the heap). */
typedef struct TextBuf {
        char *data;
        size_t len, cap;
} TextBuf;

static int textbuf_append(TextBuf *b, const char *s, size_t n) {
        if (b->len + n > b->cap) {
                size_t ncap = b->cap ? b->cap : 1 << 20;
                while (ncap < b->len + n) ncap *= 2;
                void *nd = b->data ? mremap(b->data, b->cap, ncap, MREMAP_MAYMOVE)
                                   : mmap(NULL, ncap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (nd == MAP_FAILED) return -ENOMEM;
                b->data = nd;
                b->cap = ncap;
        }
        memcpy(b->data + b->len, s, n);
        b->len += n;
        return 0;
}

void manager_tasks_json_free(char *text, size_t len) {
        if (text) (void) munmap(text, len + 1 > 1 << 20 ? len + 1 : 1 << 20);
}

#define TASKS_JSON_FLAGS (JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE)

/* The text json-c writes for the array of every record with
 * TASKS_JSON_FLAGS, built one record at a time so that only one record's
 * JSON tree exists at once (10,000 records as one tree take ~100 MB): each
 * record printed alone, its lines indented one level (two spaces; a JSON
 * string holds no raw newline, so every '\n' starts a line), between json-c's
 * "[\n", ",\n" and "\n]". test-store compares it with json-c's own output.
 * prev: the text of the last write (NULL: none): a record unchanged since
 * (Task.text_len > 0 made at the record's current generation) is copied
 * from it instead of printed again. Every task's text_off/text_len then says
 * where its record is in the new text. */
static int tasks_json(Manager *m, const char *prev, size_t prev_len, char **ret, size_t *ret_len) {
        TextBuf b = {0};
        int r = textbuf_append(&b, "[", 1);
        for (size_t i = 0; r >= 0 && i < m->n_tasks; i++) {
                Task *t = m->tasks[i];
                r = textbuf_append(&b, i ? ",\n  " : "\n  ", i ? 4 : 3);
                if (r < 0) break;
                size_t off = b.len;
                if (prev && t->text_len > 0 && t->text_generation == t->generation &&
                    t->text_off + t->text_len <= prev_len) {
                        r = textbuf_append(&b, prev + t->text_off, t->text_len);
                } else {
                        json_object *rec = task_record_to_json(&t->rec);
                        size_t len = 0;
                        const char *s = rec ? json_object_to_json_string_length(rec, TASKS_JSON_FLAGS, &len) : NULL;
                        if (!s) r = -ENOMEM;
                        for (size_t k = 0; r >= 0 && k < len;) {
                                const char *nl = memchr(s + k, '\n', len - k);
                                size_t n = nl ? (size_t) (nl - (s + k)) + 1 : len - k;
                                r = textbuf_append(&b, s + k, n);
                                if (r >= 0 && nl) r = textbuf_append(&b, "  ", 2);
                                k += n;
                        }
                        json_object_put(rec);
                }
                t->text_off = off;
                t->text_len = b.len - off <= UINT32_MAX ? (uint32_t) (b.len - off) : 0;
                t->text_generation = t->generation;
        }
        if (r >= 0) r = textbuf_append(&b, "\n]", 2);
        if (r >= 0) r = textbuf_append(&b, "", 1); /* NUL */
        if (r < 0) {
                if (b.data) (void) munmap(b.data, b.cap);
                return r;
        }
        *ret = b.data;
        *ret_len = b.len - 1;
        return 0;
}

int manager_tasks_json(Manager *m, char **ret, size_t *ret_len) {
        for (size_t i = 0; i < m->n_tasks; i++) m->tasks[i]->text_len = 0;
        int r = tasks_json(m, NULL, 0, ret, ret_len);
        /* the offsets are into this text, not into the file */
        for (size_t i = 0; i < m->n_tasks; i++) m->tasks[i]->text_len = 0;
        m->store.written = false;
        return r;
}

/* The last tasks.json this daemon wrote, if it is still the file at path
 * (same inode, size and mtime as right after the rename): mapped read-only. */
static void *map_own_text(Manager *m, const char *path, size_t *ret_len) {
        if (!m->store.written) return NULL;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_dev != m->store.dev || st.st_ino != m->store.ino ||
            st.st_size != m->store.size || st.st_mtim.tv_sec != m->store.mtim.tv_sec ||
            st.st_mtim.tv_nsec != m->store.mtim.tv_nsec || st.st_size == 0)
                return NULL;
        void *p = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) return NULL;
        *ret_len = (size_t) st.st_size;
        return p;
}

int manager_flush(Manager *m) {
        if (!m->store.dirty) return 0;
        if (m->store.load_error) return -EIO; /* never overwrite state we could not read */
        m->store.persist_timer = sd_event_source_disable_unref(m->store.persist_timer);
        _cleanup_free_ char *path = strdup_printf("%s/tasks.json", m->paths.state_dir);
        if (!path) return -ENOMEM;
        size_t prev_len = 0, len = 0;
        void *prev = map_own_text(m, path, &prev_len);
        if (!prev)
                for (size_t i = 0; i < m->n_tasks; i++) m->tasks[i]->text_len = 0;
        char *s = NULL;
        int r = tasks_json(m, prev, prev_len, &s, &len);
        if (prev) (void) munmap(prev, prev_len);
        m->store.written = false;
        if (r < 0) return r;
        r = write_file_atomic(path, s, len, 0600);
        manager_tasks_json_free(s, len);
        struct stat st;
        if (r >= 0 && stat(path, &st) == 0) {
                m->store.written = true;
                m->store.dev = st.st_dev;
                m->store.ino = st.st_ino;
                m->store.size = st.st_size;
                m->store.mtim = st.st_mtim;
        }
        if (r < 0) return r;
        m->store.dirty = false;
        return 0;
}

int manager_flush_now(Manager *m) {
        m->store.dirty = true;
        return manager_flush(m);
}

/* JSON whitespace (RFC 8259: space, tab, LF, CR), what json_parse_strict accepts around values */
static size_t skip_ws(const char *s, size_t i, size_t len) {
        while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
        return i;
}

int store_parse_records(const char *s, size_t len, int (*fn)(void *userdata, json_object *e), void *userdata) {
        if (memchr(s, 0, len) || len > INT_MAX) return -EBADMSG;
        json_tokener *tok = json_tokener_new_ex(63);
        if (!tok) return -ENOMEM;
        /* ALLOW_TRAILING_CHARS: stop after the element; the ',' or ']' after it is ours */
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8 | JSON_TOKENER_ALLOW_TRAILING_CHARS);
        int r = -EBADMSG;
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

/* The ids loaded so far (the first record with an id wins, as before):
 * an open-addressing set, so a load costs O(n), not O(n²). */
typedef struct IdSet {
        const char **slot;
        size_t mask, n;
} IdSet;

static uint64_t id_hash(const char *s) {
        uint64_t h = 1469598103934665603ULL;
        for (; *s; s++) h = (h ^ (unsigned char) *s) * 1099511628211ULL;
        return h;
}

/* 1 added, 0 already there, -ENOMEM */
static int idset_add(IdSet *set, const char *id) {
        if ((set->n + 1) * 2 > set->mask + 1 || !set->slot) {
                size_t cap = set->slot ? (set->mask + 1) * 2 : 1024;
                const char **ns = calloc(cap, sizeof *ns);
                if (!ns) return -ENOMEM;
                for (size_t i = 0; set->slot && i <= set->mask; i++)
                        if (set->slot[i])
                                for (size_t j = id_hash(set->slot[i]) & (cap - 1);; j = (j + 1) & (cap - 1))
                                        if (!ns[j]) {
                                                ns[j] = set->slot[i];
                                                break;
                                        }
                free(set->slot);
                set->slot = ns;
                set->mask = cap - 1;
        }
        for (size_t j = id_hash(id) & set->mask;; j = (j + 1) & set->mask) {
                if (!set->slot[j]) {
                        set->slot[j] = id;
                        set->n++;
                        return 1;
                }
                if (streq(set->slot[j], id)) return 0;
        }
}

typedef struct LoadState {
        IdSet ids;
        size_t first; /* m->tasks index of the first task this load added */
} LoadState;

static LoadState *load_state;

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
        int r = idset_add(&load_state->ids, t->id);
        if (r < 0) return r;
        if (r == 0) {
                /* a duplicate id: the first record wins */
                manager_remove_task(m, t);
        }
        return 0;
}

int manager_load_tasks(Manager *m) {
        _cleanup_free_ char *path = strdup_printf("%s/tasks.json", m->paths.state_dir);
        if (!path) return -ENOMEM;
        /* Memory: a store of 10,000 settled tasks must load in a few MB above
         * the records themselves. The text is mapped, not copied, and parsed
         * one record at a time, so only the typed records stay; the transient
         * trees' freed chunks go back to the kernel with malloc_trim at the
         * end. */
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 && errno == ENOENT) {
                m->store.dirty = true; /* start with an empty store on disk */
                return 0;
        }
        int r = fd < 0 ? -errno : 0;
        struct stat st;
        if (r >= 0 && fstat(fd, &st) < 0) r = -errno;
        if (r >= 0 && !S_ISREG(st.st_mode)) r = S_ISDIR(st.st_mode) ? -EISDIR : -EBADMSG;
        if (r >= 0 && st.st_size >= ((off_t) 1 << 31)) r = -EFBIG;
        void *map = NULL;
        size_t len = r >= 0 ? (size_t) st.st_size : 0;
        if (len > 0) {
                map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
                if (map == MAP_FAILED) {
                        map = NULL;
                        r = -errno;
                }
        }
        LoadState ls = {.first = m->n_tasks};
        if (r >= 0) {
                load_state = &ls;
                r = store_parse_records(map ? map : "", len, load_one, m);
                load_state = NULL;
        }
        if (map) (void) munmap(map, len);
        free(ls.ids.slot);
        if (r < 0) {
                /* a partly read file loads nothing */
                while (m->n_tasks > ls.first) manager_remove_task(m, m->tasks[m->n_tasks - 1]);
                if (r == -ENOMEM) return r;
                free(m->store.load_error); /* a second load reports its own error */
                m->store.load_error = strdup_printf("%s: %s", path, r == -EBADMSG ? "not a JSON array of task records" : strerror(-r));
                log_error("could not read persisted task state: %s", strnull(m->store.load_error));
                (void) malloc_trim(0);
                return 0;
        }
        (void) chmod(path, 0600);
        /* what the original wrote differently, as it read it back */
        for (size_t i = ls.first; i < m->n_tasks; i++) {
                Task *t = m->tasks[i];
                if (t->rec.summary_of) task_set_bool(t, TASK_KEY_internal, true);
                if (!t->rec.executor_id) task_set_str(t, TASK_KEY_executor_id, "opencode");
        }
        (void) malloc_trim(0);
        return 0;
}
