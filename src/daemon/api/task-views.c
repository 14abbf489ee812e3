/* The protocol's views of tasks (task-views.h): TaskSummary, task.status's
 * detail and task.list's rows, counts and workspace filter. */

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "api/task-views.h"
#include "core/manager.h"
#include "core/scheduler.h"
#include "core/task.h"
#include "gitdir.h"
#include "json-util.h"
#include "protocol-keys.h"
#include "run/network.h"
#include "run/scope.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"
#include "workspace.h"

#define MAX_LIST_ROWS 500

static const char *started(const Task *t) { return strempty(t->rec.started_at); }

void task_copy_key(json_object *dst, Task *t, TaskKey k) {
        json_object_object_add(dst, task_key_to_string(k), task_record_get_json(&t->rec, k));
}

json_object *task_summary(Task *t) {
        const TaskRecord *rec = &t->rec;
        json_object *o = json_object_new_object();
        if (!o) return NULL;
        static const TaskKey head[] = {TASK_KEY_id,          TASK_KEY_status,         TASK_KEY_directory,
                                       TASK_KEY_model,       TASK_KEY_session_id,     TASK_KEY_origin_session_id,
                                       TASK_KEY_pid,         TASK_KEY_started_at,     TASK_KEY_ended_at,
                                       TASK_KEY_exit_code,   TASK_KEY_signal,         TASK_KEY_log_path,
                                       TASK_KEY_failure_reason, TASK_KEY_failure_detail, TASK_KEY_spawn_error,
                                       TASK_KEY_prompt_preview};
        for (size_t i = 0; i < ELEMENTSOF(head); i++) task_copy_key(o, t, head[i]);
        static const TaskKey opt[] = {TASK_KEY_prompt_total_chars, TASK_KEY_summary_of};
        for (size_t i = 0; i < ELEMENTSOF(opt); i++)
                if (task_record_is_set(rec, opt[i])) task_copy_key(o, t, opt[i]);
        if (task_record_is_set(rec, TASK_KEY_incomplete) && rec->incomplete) json_add_bool(o, PK_incomplete, true);
        /* variant, changesetWarnings, unit, memoryMax, tasksMax and job:
         * additions to the original's TaskSummary: `status --full` shows the
         * resolved thinking level, the paths left out of the changeset, the
         * task's scope unit and its limits, the timer job the task came
         * from, and the files of its changeset that can run code on the host
         * (changesetRisks) */
        static const TaskKey opt2[] = {TASK_KEY_final_marker,    TASK_KEY_final_status,      TASK_KEY_class_name,
                                       TASK_KEY_executor_id,     TASK_KEY_variant,           TASK_KEY_overlay_dirs,
                                       TASK_KEY_changeset_error, TASK_KEY_changeset_warnings, TASK_KEY_parent_task_id,
                                       TASK_KEY_project_config_warning, TASK_KEY_unit, TASK_KEY_memory_max,
                                       TASK_KEY_tasks_max, TASK_KEY_job, TASK_KEY_changeset_risks};
        for (size_t i = 0; i < ELEMENTSOF(opt2); i++)
                if (task_record_is_set(rec, opt2[i])) task_copy_key(o, t, opt2[i]);
        /* limits: which of memoryMax and tasksMax hold, and how (scope.h) */
        _cleanup_free_ char *limits = scope_task_limits_words(t);
        if (limits) json_add_string(o, PK_limits, limits);
        if (rec->check_status && !streq(rec->check_status, "none")) {
                static const TaskKey ck[] = {TASK_KEY_check_status, TASK_KEY_check_command, TASK_KEY_check_exit_code,
                                             TASK_KEY_check_started_at, TASK_KEY_check_ended_at};
                for (size_t i = 0; i < ELEMENTSOF(ck); i++) task_copy_key(o, t, ck[i]);
                if (task_record_is_set(rec, TASK_KEY_check_override) && rec->check_override)
                        json_add_bool(o, PK_checkOverride, true);
        }
        if (task_record_is_set(rec, TASK_KEY_changeset_status) &&
            (rec->changeset_status != CHANGESET_NONE || t->kind == TASK_KIND_ADVISOR)) {
                task_copy_key(o, t, TASK_KEY_role);
                task_copy_key(o, t, TASK_KEY_changeset_status);
        }
        if (task_record_is_set(rec, TASK_KEY_head_drift_from)) {
                task_copy_key(o, t, TASK_KEY_head_drift_from);
                task_copy_key(o, t, TASK_KEY_head_drift_to);
                task_copy_key(o, t, TASK_KEY_head_drift_recovered);
        }
        json_add_bool(o, PK_cancelRequested, task_record_is_set(rec, TASK_KEY_cancel_requested) && rec->cancel_requested);
        task_copy_key(o, t, TASK_KEY_output_dir);
        return o;
}

/* logHasEvent: any line in the first 64 KiB of the log parses as JSON. */
static bool log_has_event(const char *path) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return false;
        char buf[65536 + 1];
        ssize_t n = read(fd, buf, sizeof buf - 1);
        if (n <= 0) return false;
        buf[n] = 0;
        char *p = buf;
        while (p && *p) {
                char *nl = strchr(p, '\n');
                if (!nl) break; /* a partial last line does not count */
                size_t len = (size_t) (nl - p);
                json_object *o = NULL;
                if (len > 0 && json_parse_strict(p, len, &o) == 0) {
                        json_object_put(o);
                        return true;
                }
                p = nl + 1;
        }
        return false;
}

json_object *task_status_detail(Task *t) {
        json_object *o = task_summary(t);
        if (!o) return NULL;
        /* the network and what its proxy let through (run/network.h): an
         * addition, read from the proxy's file, so status only */
        json_object *net = network_view(t);
        if (net) json_add(o, PK_network, net);
        if (task_record_is_set(&t->rec, TASK_KEY_network_warning)) task_copy_key(o, t, TASK_KEY_network_warning);
        const char *log = t->rec.log_path;
        struct stat st;
        if (log && stat(log, &st) == 0) {
                char iso[32];
                json_add_int(o, PK_logBytesWritten, st.st_size);
                json_add_string(o, PK_logLastWriteAt,
                                format_iso((uint64_t) st.st_mtim.tv_sec * 1000 + (uint64_t) st.st_mtim.tv_nsec / 1000000, iso));
                if (!t->log_has_event) t->log_has_event = log_has_event(log);
        } else {
                json_add_int(o, PK_logBytesWritten, 0);
                json_add_null(o, PK_logLastWriteAt);
        }
        json_add_bool(o, PK_logHasEvent, t->log_has_event);
        (void) scheduler_status_fields(t->m, t, o); /* queuePosition, queuedReason, ... (scheduler.h) */
        return o;
}

static int cmp_started_desc(const void *a, const void *b) {
        Task *x = *(Task *const *) a, *y = *(Task *const *) b;
        return strcmp(strempty(y->rec.started_at), strempty(x->rec.started_at));
}

static void reverse(Task **rows, size_t n) {
        for (size_t i = 0; i < n / 2; i++) {
                Task *x = rows[i];
                rows[i] = rows[n - 1 - i];
                rows[n - 1 - i] = x;
        }
}

/* Newest first, ties in table order (what glibc's merge-sort qsort gives).
 * The table is nearly always in creation order already: then a reversal
 * does it in O(n), with each run of equal startedAt turned back. */
static void sort_started_desc(Task **rows, size_t n) {
        for (size_t i = 1; i < n; i++)
                if (strcmp(started(rows[i - 1]), started(rows[i])) > 0) {
                        qsort(rows, n, sizeof *rows, cmp_started_desc);
                        return;
                }
        reverse(rows, n);
        for (size_t i = 0, j; i < n; i = j) {
                for (j = i + 1; j < n && streq(started(rows[j]), started(rows[i])); j++)
                        ;
                reverse(rows + i, j - i);
        }
}

/* ---- workspace roots of task directories, cached across calls ----
 * workspace_root walks the file system (a realpath, an lstat per level, the
 * .git file and commondir): the daemon keeps each directory's root, keyed by
 * the directory string, and reuses it while the stat identity of what
 * decided it is unchanged: the directory itself (st_dev, st_ino: moved,
 * replaced, or a symlink on its path retargeted) and the .git entry found
 * for it (st_dev, st_ino; for a .git file also its mtime: rewritten), or,
 * outside any repository, the directory's mtime (a .git created in it).
 * Validated once per task.list call: two stat calls per distinct
 * directory instead of a walk. Not seen: a .git created between a
 * subdirectory and its repository's top, or in an ancestor of a directory
 * outside every repository — tasks run in a work tree's top almost always.
 * At most ROOT_CACHE_MAX directories; when full it starts over. */

#define ROOT_CACHE_MAX 1024
#define ROOT_CACHE_SLOTS (2 * ROOT_CACHE_MAX)

typedef struct RootEntry {
        char *dir, *root;
        char *git;            /* <top>/.git, NULL outside a repository */
        dev_t dev, gdev;
        ino_t ino, gino;
        struct timespec mtim; /* of dir (no repository) or of a .git file */
        bool git_is_dir;
        uint64_t checked;     /* the task.list call that last validated it */
} RootEntry;

typedef struct RootCache RootCache;
struct RootCache {
        RootEntry *slot[ROOT_CACHE_SLOTS];
        size_t n;
        uint64_t call;
};

static uint64_t str_hash(const char *s) {
        uint64_t h = 1469598103934665603ULL;
        for (; *s; s++) h = (h ^ (unsigned char) *s) * 1099511628211ULL;
        return h;
}

static void root_entry_free(RootEntry *e) {
        if (!e) return;
        free(e->dir);
        free(e->root);
        free(e->git);
        free(e);
}

void manager_free_root_cache(Manager *m) {
        RootCache *c = m->root_cache;
        if (!c) return;
        for (size_t i = 0; i < ROOT_CACHE_SLOTS; i++) root_entry_free(c->slot[i]);
        free(c);
        m->root_cache = NULL;
}

static bool same_time(struct timespec a, struct timespec b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; }

/* Is e's root still what workspace_root would say? */
static bool root_entry_valid(const RootEntry *e) {
        struct stat st;
        if (stat(e->dir, &st) < 0 || st.st_dev != e->dev || st.st_ino != e->ino) return false;
        if (!e->git) return same_time(st.st_mtim, e->mtim);
        if (lstat(e->git, &st) < 0 || st.st_dev != e->gdev || st.st_ino != e->gino) return false;
        if (!!S_ISDIR(st.st_mode) != e->git_is_dir) return false;
        return e->git_is_dir || same_time(st.st_mtim, e->mtim);
}

/* (Re)compute e's root; the identities are taken first, so a change racing
 * with the walk shows at the next validation. false if dir is gone. */
static bool root_entry_fill(RootEntry *e) {
        free(e->root);
        free(e->git);
        e->root = e->git = NULL;
        struct stat st;
        if (stat(e->dir, &st) < 0) return false;
        e->dev = st.st_dev;
        e->ino = st.st_ino;
        e->mtim = st.st_mtim;
        git_dirs g = {0};
        if (git_dirs_find(e->dir, &g) > 0) {
                e->git = strdup_printf("%s%s.git", g.top, streq(g.top, "/") ? "" : "/");
                struct stat gs;
                if (e->git && lstat(e->git, &gs) == 0) {
                        e->gdev = gs.st_dev;
                        e->gino = gs.st_ino;
                        e->git_is_dir = S_ISDIR(gs.st_mode);
                        e->mtim = gs.st_mtim;
                } else {
                        git_dirs_done(&g);
                        return false;
                }
        }
        git_dirs_done(&g);
        e->root = workspace_root(e->dir);
        return e->root != NULL;
}

/* The cache entry of dir, validated in this call; NULL if dir has no
 * cacheable root (gone, ENOMEM): the caller computes it directly. */
static RootEntry *root_lookup(Manager *m, const char *dir) {
        RootCache *c = m->root_cache;
        if (!c) {
                c = m->root_cache = calloc(1, sizeof *c);
                if (!c) return NULL;
        }
        size_t i;
        for (i = str_hash(dir) & (ROOT_CACHE_SLOTS - 1); c->slot[i]; i = (i + 1) & (ROOT_CACHE_SLOTS - 1)) {
                RootEntry *e = c->slot[i];
                if (!streq(e->dir, dir)) continue;
                if (e->checked != c->call) {
                        if (!root_entry_valid(e) && !root_entry_fill(e)) return NULL;
                        e->checked = c->call;
                }
                return e;
        }
        if (c->n >= ROOT_CACHE_MAX) {
                uint64_t call = c->call;
                manager_free_root_cache(m);
                if (!(m->root_cache = calloc(1, sizeof *c))) return NULL;
                m->root_cache->call = call;
                return root_lookup(m, dir);
        }
        RootEntry *e = calloc(1, sizeof *e);
        if (!e || !(e->dir = strdup(dir)) || !root_entry_fill(e)) {
                root_entry_free(e);
                return NULL;
        }
        e->checked = c->call;
        c->slot[i] = e;
        c->n++;
        return e;
}

/* Which task directories lie in the asked workspace, decided once per
 * distinct directory per call. */
typedef struct DirSlot {
        const char *dir;
        bool match;
} DirSlot;

static bool dir_in_workspace(Manager *m, DirSlot *slots, size_t mask, const char *d, const char *directory, const char *root) {
        for (size_t i = str_hash(d) & mask;; i = (i + 1) & mask) {
                if (!slots[i].dir) {
                        slots[i].dir = d;
                        if (streq(d, directory))
                                slots[i].match = true;
                        else {
                                RootEntry *e = root_lookup(m, d);
                                if (e)
                                        slots[i].match = streq_ptr(e->root, root);
                                else {
                                        _cleanup_free_ char *r2 = workspace_root(d);
                                        slots[i].match = streq_ptr(r2, root);
                                }
                        }
                        return slots[i].match;
                }
                if (streq(slots[i].dir, d)) return slots[i].match;
        }
}

/* rows[0..n) in table order (a sorted table's subsequence: no inversions)
 * → newest first, ties in table order: reversed, each run of equal
 * startedAt turned back. Only the first `want` rows are produced, into out. */
static size_t newest_first(Task **rows, size_t n, size_t want, Task **out) {
        size_t k = 0;
        for (size_t i = n; i > 0 && k < want;) {
                size_t j = i - 1;
                while (j > 0 && streq(started(rows[j - 1]), started(rows[i - 1]))) j--;
                for (size_t x = j; x < i && k < want; x++) out[k++] = rows[x];
                i = j;
        }
        return k;
}

/* A list row is printed once: its text (as json_to_line() prints it) is kept
 * on the row and json-c's serializer for the row just copies it, so a
 * task.list reply of 500 cached rows costs a memcpy per row instead of
 * escaping 3,000 strings again. The row is never modified after this (a
 * write to the record makes it stale: Task.generation). */
typedef struct RowText {
        size_t len;
        char text[];
} RowText;

static int row_text_serialize(json_object *o, struct printbuf *pb, int level, int flags) {
        const RowText *rt = json_object_get_userdata(o);
        return printbuf_memappend(pb, rt->text, (int) rt->len);
}

static void row_text_free(json_object *o, void *userdata) {
        free(userdata);
}

static void row_prerender(json_object *row) {
        size_t len = 0;
        const char *s = json_to_line(row, &len);
        if (!s || len > INT_MAX) return; /* keep json-c's own serializer */
        RowText *rt = malloc(sizeof *rt + len + 1);
        if (!rt) return;
        rt->len = len;
        memcpy(rt->text, s, len + 1);
        json_object_set_serializer(row, row_text_serialize, rt, row_text_free);
}

json_object *manager_list(Manager *m, const char *directory, const char *visible_to) {
        int64_t counts[_TASK_STATUS_MAX] = {0};
        bool all = !directory && !visible_to;
        size_t cap = directory ? m->n_tasks : (m->n_tasks > MAX_LIST_ROWS ? MAX_LIST_ROWS : m->n_tasks);
        _cleanup_free_ Task **rows = NULL;
        size_t n = 0;
        if (all && m->started_inversions == 0) {
                /* the incremental path: counts kept, table sorted */
                memcpy(counts, m->status_counts, sizeof counts);
                rows = calloc(cap + 1, sizeof *rows);
                if (!rows) return NULL;
                n = newest_first(m->tasks, m->n_tasks, cap, rows);
        } else {
                rows = calloc(m->n_tasks + 1, sizeof *rows);
                if (!rows) return NULL;
                _cleanup_free_ char *root = NULL;
                _cleanup_free_ DirSlot *slots = NULL;
                size_t mask = 0;
                if (directory) {
                        if (m->root_cache) m->root_cache->call++;
                        RootEntry *e = root_lookup(m, directory);
                        if (e) root = strdup(e->root);
                        else {
                                char *real = realpath(directory, NULL);
                                root = workspace_root(real ? real : directory);
                                free(real);
                        }
                        size_t scap = 16;
                        while (scap < 2 * m->n_tasks) scap *= 2;
                        slots = calloc(scap, sizeof *slots);
                        if (!slots) return NULL;
                        mask = scap - 1;
                }
                for (size_t i = 0; i < m->n_tasks; i++) {
                        Task *t = m->tasks[i];
                        if (visible_to && !streq(t->id, visible_to) && !streq_ptr(t->rec.dispatched_by, visible_to))
                                continue;
                        if (directory) {
                                const char *d = t->rec.directory;
                                if (!d || !dir_in_workspace(m, slots, mask, d, directory, root)) continue;
                        }
                        rows[n++] = t;
                        if (t->rec.status >= 0 && t->rec.status < _TASK_STATUS_MAX) counts[t->rec.status]++;
                }
                if (m->started_inversions == 0) {
                        /* a subsequence of a sorted table is sorted */
                        _cleanup_free_ Task **sorted = calloc(n + 1, sizeof *sorted);
                        if (!sorted) return NULL;
                        n = newest_first(rows, n, cap, sorted);
                        free(rows);
                        rows = TAKE_PTR(sorted);
                } else
                        sort_started_desc(rows, n);
        }
        json_object *o = json_object_new_object(), *c = json_object_new_object();
        for (TaskStatus k = 0; k < _TASK_STATUS_MAX; k++) json_add_int(c, task_status_to_string(k), counts[k]);
        json_add(o, PK_counts, c);
        if (n == 0) {
                json_add_string(o, PK_tasks, directory ? "none found in this workspace"
                                                      : "none found (this server process's lifetime)");
                return o;
        }
        json_object *arr = json_object_new_array();
        if (n > cap) n = cap;
        for (size_t i = 0; i < n; i++) {
                Task *t = rows[i];
                if (t->list_row && t->list_row_generation != t->generation) {
                        json_object_put(t->list_row);
                        t->list_row = NULL;
                }
                if (!t->list_row) {
                        /* built once, until the record changes */
                        json_object *row = json_object_new_object();
                        /* changesetStatus: an addition to the original's row, so that
                         * `list` can show which tasks wait for accept/reject */
                        static const TaskKey keys[] = {TASK_KEY_id,         TASK_KEY_status,    TASK_KEY_model,
                                                       TASK_KEY_started_at, TASK_KEY_directory, TASK_KEY_failure_reason,
                                                       TASK_KEY_changeset_status};
                        for (size_t k = 0; row && k < ELEMENTSOF(keys); k++) task_copy_key(row, t, keys[k]);
                        /* job: the timer job a task came from, only when set (additive, for `job list`) */
                        if (row && task_record_is_set(&t->rec, TASK_KEY_job)) task_copy_key(row, t, TASK_KEY_job);
                        /* HEAD drift, only when set (additive, for `list`'s drift marker) */
                        if (row && task_record_is_set(&t->rec, TASK_KEY_head_drift_from)) {
                                task_copy_key(row, t, TASK_KEY_head_drift_from);
                                task_copy_key(row, t, TASK_KEY_head_drift_recovered);
                        }
                        /* the check gate's verdict and the files that can run code on the
                         * host, only when set (additive, for `list`'s check and risks columns) */
                        if (row && t->rec.check_status && !streq(t->rec.check_status, "none"))
                                task_copy_key(row, t, TASK_KEY_check_status);
                        if (row && task_record_is_set(&t->rec, TASK_KEY_changeset_risks))
                                task_copy_key(row, t, TASK_KEY_changeset_risks);
                        if (row) row_prerender(row);
                        t->list_row = row;
                        t->list_row_generation = t->generation;
                }
                json_object_array_add(arr, json_object_get(t->list_row));
        }
        json_add(o, PK_tasks, arr);
        return o;
}
