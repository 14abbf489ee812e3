/* The task table: records, tasks.json persistence and the summary shapes
 * (spec lifecycle.md §1, protocol-cli.md §1.7). */

#include <fcntl.h>
#include <sys/stat.h>

#include "daemon.h"
#include "json-util.h"
#include "util.h"

#define PERSIST_DEBOUNCE_MS 250
#define MAX_LIST_ROWS 500

const char *task_str(Task *t, const char *key) { return json_get_string(t->rec, key); }
const char *task_status(Task *t) { return strempty(task_str(t, "status")); }

void task_set(Task *t, const char *key, json_object *v) { json_object_object_add(t->rec, key, v); }
void task_set_str(Task *t, const char *key, const char *value) {
        task_set(t, key, value ? json_object_new_string(value) : NULL);
}
void task_set_int(Task *t, const char *key, int64_t v) { task_set(t, key, json_object_new_int64(v)); }
void task_set_null(Task *t, const char *key) { task_set(t, key, NULL); }
void task_set_bool(Task *t, const char *key, bool v) { task_set(t, key, json_object_new_boolean(v)); }

bool task_is_active(Task *t) {
        const char *s = task_status(t);
        return streq(s, "queued") || streq(s, "running");
}

Task *task_new(Manager *m, json_object *rec) {
        const char *id = json_get_string(rec, "id");
        if (!id) return NULL;
        if (m->n_tasks == m->cap_tasks) {
                size_t ncap = m->cap_tasks ? m->cap_tasks * 2 : 64;
                Task **n = realloc(m->tasks, ncap * sizeof *n);
                if (!n) return NULL;
                m->tasks = n;
                m->cap_tasks = ncap;
        }
        Task *t = calloc(1, sizeof *t);
        if (!t) return NULL;
        t->m = m;
        t->rec = rec;
        t->id = strdup(id);
        t->shim_pidfd = -1;
        t->status_fd = -1;
        t->sock.fd = -1;
        if (!t->id) {
                free(t);
                return NULL;
        }
        m->tasks[m->n_tasks++] = t;
        return t;
}

Task *manager_find_task(Manager *m, const char *id) {
        for (size_t i = 0; i < m->n_tasks; i++)
                if (streq(m->tasks[i]->id, id)) return m->tasks[i];
        return NULL;
}

static int persist_timer_cb(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        m->persist_timer = sd_event_source_disable_unref(m->persist_timer);
        int r = manager_flush(m);
        if (r < 0) log_error_errno(r, "failed to persist task state");
        return 0;
}

void task_persist(Task *t) {
        Manager *m = t->m;
        m->dirty = true;
        if (m->persist_timer) return;
        uint64_t now;
        sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        int r = sd_event_add_time(m->event, &m->persist_timer, CLOCK_MONOTONIC, now + PERSIST_DEBOUNCE_MS * 1000ULL, 0,
                                  persist_timer_cb, m);
        if (r < 0) {
                log_warning_errno(r, "cannot arm persist timer; flushing now");
                (void) manager_flush(m);
        }
}

int manager_flush(Manager *m) {
        if (!m->dirty) return 0;
        if (m->state_load_error) return -EIO; /* never overwrite state we could not read */
        m->persist_timer = sd_event_source_disable_unref(m->persist_timer);
        _cleanup_json_ json_object *arr = json_object_new_array();
        if (!arr) return -ENOMEM;
        for (size_t i = 0; i < m->n_tasks; i++) json_object_array_add(arr, json_object_get(m->tasks[i]->rec));
        size_t len = 0;
        const char *s = json_object_to_json_string_length(
                arr, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
        _cleanup_free_ char *path = strdup_printf("%s/tasks.json", m->paths.state_dir);
        if (!path) return -ENOMEM;
        int r = write_file_atomic(path, s, len, 0600);
        if (r < 0) return r;
        m->dirty = false;
        return 0;
}

int manager_load_tasks(Manager *m) {
        _cleanup_free_ char *path = strdup_printf("%s/tasks.json", m->paths.state_dir);
        if (!path) return -ENOMEM;
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = read_file(path, (size_t) 1 << 31, &data, &len);
        if (r == -ENOENT) {
                m->dirty = true; /* start with an empty store on disk */
                return 0;
        }
        _cleanup_json_ json_object *arr = NULL;
        if (r >= 0 && json_parse_strict(data, len, &arr) < 0) r = -EBADMSG;
        if (r >= 0 && !json_object_is_type(arr, json_type_array)) r = -EBADMSG;
        if (r < 0) {
                m->state_load_error = strdup_printf("%s: %s", path, r == -EBADMSG ? "not a JSON array of task records" : strerror(-r));
                log_error("could not read persisted task state: %s", strnull(m->state_load_error));
                return 0;
        }
        (void) chmod(path, 0600);
        size_t n = json_object_array_length(arr);
        for (size_t i = 0; i < n; i++) {
                json_object *rec = json_object_array_get_idx(arr, i);
                if (!json_is_object(rec) || !json_get_string(rec, "id")) continue;
                if (manager_find_task(m, json_get_string(rec, "id"))) continue;
                Task *t = task_new(m, json_object_get(rec));
                if (!t) {
                        json_object_put(rec);
                        return -ENOMEM;
                }
                if (json_get_object(rec, "summaryOf")) task_set_bool(t, "internal", true);
                if (json_get_string(rec, "acceptStartedAt") && streq_ptr(task_str(t, "changesetStatus"), "pending"))
                        t->accept_interrupted = true;
                if (!task_str(t, "executorId")) task_set_str(t, "executorId", "opencode");
                /* A running task's shim outlives the daemon: re-adopt it, or settle
                 * it from its exit.json (DESIGN.md: workers outlive a daemon restart).
                 * Only a task whose shim is truly gone, or one never launched (its
                 * caller's environment was not persisted), reads "unknown"
                 * (lifecycle.md §1.5). */
                if (streq(task_status(t), "running") && task_readopt(t)) continue;
                if (task_is_active(t)) {
                        task_set_str(t, "status", "unknown");
                        m->dirty = true;
                }
        }
        return 0;
}

void json_copy_key(json_object *dst, json_object *src, const char *key) {
        json_object *v = NULL;
        json_object_object_get_ex(src, key, &v);
        json_object_object_add(dst, key, json_object_get(v));
}

static bool rec_has_nonnull(json_object *rec, const char *key) {
        json_object *v = NULL;
        return json_object_object_get_ex(rec, key, &v) && v != NULL;
}

json_object *task_summary(Task *t) {
        json_object *rec = t->rec, *o = json_object_new_object();
        if (!o) return NULL;
        static const char *const head[] = {"id", "status", "directory", "model", "sessionId", "originSessionId", "pid",
                                           "startedAt", "endedAt", "exitCode", "signal", "logPath", "failureReason",
                                           "failureDetail", "spawnError", "promptPreview"};
        for (size_t i = 0; i < ELEMENTSOF(head); i++) json_copy_key(o, rec, head[i]);
        static const char *const opt[] = {"promptTotalChars", "summaryOf"};
        for (size_t i = 0; i < ELEMENTSOF(opt); i++)
                if (rec_has_nonnull(rec, opt[i])) json_copy_key(o, rec, opt[i]);
        if (json_get_bool(rec, "incomplete", false)) json_add_bool(o, "incomplete", true);
        /* variant and changesetWarnings: additions to the spec's TaskSummary
         * (issue 5 items 3 and 11): `status --full` shows the resolved
         * thinking level and the paths left out of the changeset */
        static const char *const opt2[] = {"finalMarker",    "finalStatus",       "class",        "executorId",
                                           "variant",        "overlayDirs",       "changesetError", "changesetWarnings",
                                           "parentTaskId",   "projectConfigWarning"};
        for (size_t i = 0; i < ELEMENTSOF(opt2); i++)
                if (rec_has_nonnull(rec, opt2[i])) json_copy_key(o, rec, opt2[i]);
        const char *check = json_get_string(rec, "checkStatus");
        if (check && !streq(check, "none")) {
                static const char *const ck[] = {"checkStatus", "checkCommand", "checkExitCode", "checkStartedAt",
                                                 "checkEndedAt"};
                for (size_t i = 0; i < ELEMENTSOF(ck); i++) json_copy_key(o, rec, ck[i]);
                if (json_get_bool(rec, "checkOverride", false)) json_add_bool(o, "checkOverride", true);
        }
        const char *cs = json_get_string(rec, "changesetStatus");
        const char *role = json_get_string(rec, "role");
        if (cs && (!streq(cs, "none") || streq_ptr(role, "advisor"))) {
                json_copy_key(o, rec, "role");
                json_copy_key(o, rec, "changesetStatus");
        }
        if (rec_has_nonnull(rec, "headDriftFrom")) {
                json_copy_key(o, rec, "headDriftFrom");
                json_copy_key(o, rec, "headDriftTo");
                json_copy_key(o, rec, "headDriftRecovered");
        }
        json_add_bool(o, "cancelRequested", json_get_bool(rec, "cancelRequested", false));
        json_copy_key(o, rec, "outputDir");
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
        const char *log = task_str(t, "logPath");
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

void task_set_status(Task *t, const char *status) {
        task_set_str(t, "status", status);
        task_persist(t);
}

void task_wake_waiters(Task *t) {
        while (t->waiters) {
                Request *r = t->waiters;
                t->waiters = r->next_waiter;
                r->wait_task = NULL;
                request_reply_result(r, task_summary(t));
        }
}

static int cmp_started_desc(const void *a, const void *b) {
        Task *x = *(Task *const *) a, *y = *(Task *const *) b;
        return strcmp(strempty(task_str(y, "startedAt")), strempty(task_str(x, "startedAt")));
}

json_object *manager_list(Manager *m, const char *directory, const char *visible_to) {
        static const char *const statuses[] = {"queued", "running", "done", "crashed", "cancelled", "unknown"};
        int64_t counts[ELEMENTSOF(statuses)] = {0};
        _cleanup_free_ Task **rows = calloc(m->n_tasks + 1, sizeof *rows);
        if (!rows) return NULL;
        size_t n = 0;
        _cleanup_free_ char *root = NULL;
        if (directory) {
                char *real = realpath(directory, NULL);
                root = workspace_root(real ? real : directory);
                free(real);
        }
        for (size_t i = 0; i < m->n_tasks; i++) {
                Task *t = m->tasks[i];
                if (visible_to && !streq(t->id, visible_to) && !streq_ptr(task_str(t, "dispatchedBy"), visible_to))
                        continue;
                if (directory) {
                        const char *d = task_str(t, "directory");
                        if (!d) continue;
                        _cleanup_free_ char *r2 = workspace_root(d);
                        if (!streq(d, directory) && !streq_ptr(r2, root)) continue;
                }
                rows[n++] = t;
                for (size_t k = 0; k < ELEMENTSOF(statuses); k++)
                        if (streq(task_status(t), statuses[k])) counts[k]++;
        }
        if (!directory) {
                /* counts cover all tasks */
        }
        qsort(rows, n, sizeof *rows, cmp_started_desc);
        json_object *o = json_object_new_object(), *c = json_object_new_object();
        for (size_t k = 0; k < ELEMENTSOF(statuses); k++) json_add_int(c, statuses[k], counts[k]);
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
                static const char *const keys[] = {"id", "status", "model", "startedAt", "directory", "failureReason"};
                for (size_t k = 0; k < ELEMENTSOF(keys); k++) json_copy_key(row, t->rec, keys[k]);
                json_object_array_add(arr, row);
        }
        json_add(o, "tasks", arr);
        return o;
}
