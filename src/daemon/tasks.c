/* The task table: records, tasks.json persistence and the summary shapes
 * (spec lifecycle.md §1, protocol-cli.md §1.7). */

#include <fcntl.h>
#include <sys/stat.h>

#include "manager.h"
#include "task.h"
#include "tasks.h"
#include "json-util.h"
#include "util.h"
#include "workspace.h"

#define MAX_LIST_ROWS 500

void task_copy_key(json_object *dst, Task *t, TaskKey k) {
        json_object_object_add(dst, task_key_to_string(k), task_record_get_json(&t->rec, k));
}

Task *task_new(Manager *m, json_object *json) {
        _cleanup_json_ json_object *owned = json;
        if (m->n_tasks == m->cap_tasks) {
                size_t ncap = m->cap_tasks ? m->cap_tasks * 2 : 64;
                Task **n = realloc(m->tasks, ncap * sizeof *n);
                if (!n) return NULL;
                m->tasks = n;
                m->cap_tasks = ncap;
        }
        Task *t = calloc(1, sizeof *t);
        if (!t) return NULL;
        if (task_record_from_json(&t->rec, json) < 0) {
                free(t);
                return NULL;
        }
        t->m = m;
        t->id = t->rec.id;
        t->shim_pidfd = -1;
        t->status_fd = -1;
        t->sock.fd = -1;
        m->tasks[m->n_tasks++] = t;
        return t;
}

Task *task_create(Manager *m, const char *id) {
        _cleanup_json_ json_object *o = json_object_new_object();
        if (!o || json_add_string(o, "id", id) < 0) return NULL;
        return task_new(m, TAKE_PTR(o));
}

void task_free(Task *t) {
        if (!t) return;
        task_record_done(&t->rec);
        json_object_put(t->caller_env);
        json_object_put(t->launch);
        free(t->status_buf);
        free(t->sock_path);
        free(t);
}

void manager_remove_task(Manager *m, Task *t) {
        for (size_t i = 0; i < m->n_tasks; i++)
                if (m->tasks[i] == t) {
                        memmove(m->tasks + i, m->tasks + i + 1, (m->n_tasks - i - 1) * sizeof *m->tasks);
                        m->n_tasks--;
                        break;
                }
        task_free(t);
}

Task *manager_find_task(Manager *m, const char *id) {
        for (size_t i = 0; i < m->n_tasks; i++)
                if (streq(m->tasks[i]->id, id)) return m->tasks[i];
        return NULL;
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
        if (task_record_is_set(rec, TASK_KEY_incomplete) && rec->incomplete) json_add_bool(o, "incomplete", true);
        /* variant and changesetWarnings: additions to the spec's TaskSummary
         * (issue 5 items 3 and 11): `status --full` shows the resolved
         * thinking level and the paths left out of the changeset */
        static const TaskKey opt2[] = {TASK_KEY_final_marker,    TASK_KEY_final_status,      TASK_KEY_class_name,
                                       TASK_KEY_executor_id,     TASK_KEY_variant,           TASK_KEY_overlay_dirs,
                                       TASK_KEY_changeset_error, TASK_KEY_changeset_warnings, TASK_KEY_parent_task_id,
                                       TASK_KEY_project_config_warning};
        for (size_t i = 0; i < ELEMENTSOF(opt2); i++)
                if (task_record_is_set(rec, opt2[i])) task_copy_key(o, t, opt2[i]);
        if (rec->check_status && !streq(rec->check_status, "none")) {
                static const TaskKey ck[] = {TASK_KEY_check_status, TASK_KEY_check_command, TASK_KEY_check_exit_code,
                                             TASK_KEY_check_started_at, TASK_KEY_check_ended_at};
                for (size_t i = 0; i < ELEMENTSOF(ck); i++) task_copy_key(o, t, ck[i]);
                if (task_record_is_set(rec, TASK_KEY_check_override) && rec->check_override)
                        json_add_bool(o, "checkOverride", true);
        }
        if (task_record_is_set(rec, TASK_KEY_changeset_status) &&
            (rec->changeset_status != CHANGESET_NONE || streq_ptr(rec->role, "advisor"))) {
                task_copy_key(o, t, TASK_KEY_role);
                task_copy_key(o, t, TASK_KEY_changeset_status);
        }
        if (task_record_is_set(rec, TASK_KEY_head_drift_from)) {
                task_copy_key(o, t, TASK_KEY_head_drift_from);
                task_copy_key(o, t, TASK_KEY_head_drift_to);
                task_copy_key(o, t, TASK_KEY_head_drift_recovered);
        }
        json_add_bool(o, "cancelRequested", task_record_is_set(rec, TASK_KEY_cancel_requested) && rec->cancel_requested);
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
        const char *log = t->rec.log_path;
        struct stat st;
        if (log && stat(log, &st) == 0) {
                char iso[32];
                json_add_int(o, "logBytesWritten", st.st_size);
                json_add_string(o, "logLastWriteAt",
                                format_iso((uint64_t) st.st_mtim.tv_sec * 1000 + (uint64_t) st.st_mtim.tv_nsec / 1000000, iso));
                if (!t->log_has_event) t->log_has_event = log_has_event(log);
        } else {
                json_add_int(o, "logBytesWritten", 0);
                json_add_null(o, "logLastWriteAt");
        }
        json_add_bool(o, "logHasEvent", t->log_has_event);
        return o;
}

static int cmp_started_desc(const void *a, const void *b) {
        Task *x = *(Task *const *) a, *y = *(Task *const *) b;
        return strcmp(strempty(y->rec.started_at), strempty(x->rec.started_at));
}

static const char *started(const Task *t) { return strempty(t->rec.started_at); }

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

/* Which task directories lie in the asked workspace, computed once per
 * distinct directory per call (workspace_root walks the file system). */
typedef struct DirSlot {
        const char *dir;
        bool match;
} DirSlot;

static uint64_t str_hash(const char *s) {
        uint64_t h = 1469598103934665603ULL;
        for (; *s; s++) h = (h ^ (unsigned char) *s) * 1099511628211ULL;
        return h;
}

static bool dir_in_workspace(DirSlot *slots, size_t mask, const char *d, const char *directory, const char *root) {
        for (size_t i = str_hash(d) & mask;; i = (i + 1) & mask) {
                if (!slots[i].dir) {
                        _cleanup_free_ char *r2 = workspace_root(d);
                        slots[i].dir = d;
                        slots[i].match = streq(d, directory) || streq_ptr(r2, root);
                        return slots[i].match;
                }
                if (streq(slots[i].dir, d)) return slots[i].match;
        }
}

json_object *manager_list(Manager *m, const char *directory, const char *visible_to) {
        int64_t counts[_TASK_STATUS_MAX] = {0};
        _cleanup_free_ Task **rows = calloc(m->n_tasks + 1, sizeof *rows);
        if (!rows) return NULL;
        size_t n = 0;
        _cleanup_free_ char *root = NULL;
        if (directory) {
                char *real = realpath(directory, NULL);
                root = workspace_root(real ? real : directory);
                free(real);
        }
        _cleanup_free_ DirSlot *slots = NULL;
        size_t mask = 0;
        if (directory) {
                size_t cap = 16;
                while (cap < 2 * m->n_tasks) cap *= 2;
                slots = calloc(cap, sizeof *slots);
                if (!slots) return NULL;
                mask = cap - 1;
        }
        for (size_t i = 0; i < m->n_tasks; i++) {
                Task *t = m->tasks[i];
                if (visible_to && !streq(t->id, visible_to) && !streq_ptr(t->rec.dispatched_by, visible_to))
                        continue;
                if (directory) {
                        const char *d = t->rec.directory;
                        if (!d || !dir_in_workspace(slots, mask, d, directory, root)) continue;
                }
                rows[n++] = t;
                if (t->rec.status >= 0 && t->rec.status < _TASK_STATUS_MAX) counts[t->rec.status]++;
        }
        sort_started_desc(rows, n);
        json_object *o = json_object_new_object(), *c = json_object_new_object();
        for (TaskStatus k = 0; k < _TASK_STATUS_MAX; k++) json_add_int(c, task_status_to_string(k), counts[k]);
        json_add(o, "counts", c);
        if (n == 0) {
                json_add_string(o, "tasks", directory ? "none found in this workspace"
                                                      : "none found (this server process's lifetime)");
                return o;
        }
        json_object *arr = json_object_new_array();
        size_t cap = directory ? n : (n > MAX_LIST_ROWS ? MAX_LIST_ROWS : n);
        for (size_t i = 0; i < cap; i++) {
                Task *t = rows[i];
                json_object *row = json_object_new_object();
                static const TaskKey keys[] = {TASK_KEY_id,         TASK_KEY_status,    TASK_KEY_model,
                                               TASK_KEY_started_at, TASK_KEY_directory, TASK_KEY_failure_reason};
                for (size_t k = 0; k < ELEMENTSOF(keys); k++) task_copy_key(row, t, keys[k]);
                json_object_array_add(arr, row);
        }
        json_add(o, "tasks", arr);
        return o;
}
