/* The store: tasks.json, the durable copy of the task table (spec
 * lifecycle.md §1.4–§1.6). Owns Manager.dirty, .persist_timer and
 * .state_load_error; records go to and from JSON only through task.h. */

#include <fcntl.h>
#include <sys/stat.h>

#include "launch.h"
#include "manager.h"
#include "monitor.h"
#include "scheduler.h"
#include "store.h"
#include "task.h"
#include "tasks.h"
#include "json-util.h"
#include "util.h"

#define PERSIST_DEBOUNCE_MS 250

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
        for (size_t i = 0; i < m->n_tasks; i++) {
                json_object *rec = task_record_to_json(&m->tasks[i]->rec);
                if (!rec || json_object_array_add(arr, rec) < 0) {
                        json_object_put(rec);
                        return -ENOMEM;
                }
        }
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
                if (!t) return -ENOMEM;
                if (t->rec.summary_of) task_set_bool(t, TASK_KEY_internal, true);
                if (t->rec.accept_started_at && t->rec.changeset_status == CHANGESET_PENDING)
                        t->accept_interrupted = true;
                if (!t->rec.executor_id) task_set_str(t, TASK_KEY_executor_id, "opencode");
                /* A running task's shim outlives the daemon: re-adopt it, or settle
                 * it from its exit.json (DESIGN.md: workers outlive a daemon restart).
                 * Only a task whose shim is truly gone, or one never launched (its
                 * caller's environment was not persisted), reads "unknown"
                 * (lifecycle.md §1.5). */
                if (t->rec.status == TASK_RUNNING && task_readopt(t)) continue;
                /* A task still queued when the daemon died is queued again, in
                 * its order in tasks.json (issue 6 item 5), with the launch
                 * options and caller env its dispatch recorded. Without them it
                 * cannot run as dispatched (an older daemon's record, a lost
                 * file, or one already launched whose "running" was never
                 * durable): it crashes with a reason instead of running wrong
                 * or twice. */
                if (t->rec.status == TASK_QUEUED) {
                        r = launch_request_load(t);
                        if (r >= 0) {
                                scheduler_enqueue(m, t);
                                continue;
                        }
                        if (r == -ENOMEM) return r;
                        log_warning("task %s was queued, but its launch request (%s) cannot be read: %s; not launched",
                                    t->id, LAUNCH_REQUEST_FILE, r == -EBADMSG ? "malformed" : strerror(-r));
                        _cleanup_free_ char *msg = strdup_printf(
                                "queued when the daemon stopped, but what it needs to launch (its launch options and "
                                "environment, %s) %s; dispatch it again",
                                LAUNCH_REQUEST_FILE, r == -ENOENT ? "was not recorded" : "cannot be read");
                        char iso[32];
                        task_set_str(t, TASK_KEY_spawn_error, msg ? msg : "launch request lost; dispatch it again");
                        task_set_str(t, TASK_KEY_ended_at, format_iso(now_ms(), iso));
                        (void) task_transition(t, TASK_CRASHED, t->rec.changeset_status);
                        m->dirty = true;
                        continue;
                }
                if (task_is_active(t)) {
                        (void) task_transition(t, TASK_UNKNOWN, t->rec.changeset_status);
                        m->dirty = true;
                }
        }
        return 0;
}

