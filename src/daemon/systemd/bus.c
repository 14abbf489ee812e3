/* The D-Bus API on the user bus (bus.h). Modelled on systemd's own bus objects
 * (src/core/dbus-*.c): static vtables, a fallback vtable with a find callback
 * and a node enumerator for the per-task objects, an object manager, and
 * PropertiesChanged from the task observer. */

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <systemd/sd-bus.h>

#include "protocol-keys.h"
#include "core/user-bus.h"
#include "systemd/bus.h"
#include "core/manager.h"
#include "core/peer.h"
#include "core/settings.h"
#include "core/store.h"
#include "core/task-table.h"
#include "core/task.h"
#include "run/network.h"
#include "run/lifecycle.h"
#include "json-util.h"
#include "taskferry-config.h"
#include "log.h"
#include "macro.h"
#include "path-util.h"
#include "string-util.h"
#include "strv.h"

typedef struct Bus {
        bool started;      /* the objects are exported on the daemon's user-bus connection */
        bool warned;       /* the one "no bus" / "name not acquired" warning went out */
} Bus;

char *bus_task_path(const char *id) {
        char *p = NULL;
        if (sd_bus_path_encode(BUS_TASK_PREFIX, id, &p) < 0) return NULL;
        return p;
}

static sd_bus *bus_of(Manager *m) {
        return m->bus && m->bus->started ? user_bus(m) : NULL;
}

static void bus_warn(Manager *m, int r, const char *what) {
        if (m->bus->warned) return;
        m->bus->warned = true;
        log_warning_errno(r, "no D-Bus API (%s): %s", BUS_NAME, what);
}

/* Tasks the protocol shows (events.c hides internal summary tasks). */
static bool task_exported(const Task *t) {
        return t && !task_kind_info(t->kind)->internal;
}

/* ---- the task object: one table of properties ----
 * X(D-Bus name, tasks.json key, D-Bus type). Read through the record's JSON
 * value of the key, so a key this daemon does not type reads from the
 * record's extras as well, and a new field is one row. Left
 * out on purpose: prompt, promptPreview (the prompt's text), checkOutputTail
 * (a command's output), overlayDirs (paths of the daemon's own). */
#define BUS_TASK_PROPERTIES(X)                                  \
        X("Id", PK_id, "s")                                     \
        X("Status", PK_status, "s")                             \
        X("ChangesetStatus", PK_changesetStatus, "s")           \
        X("Directory", PK_directory, "s")                       \
        X("Role", PK_role, "s")                                 \
        X("Model", PK_model, "s")                               \
        X("Executor", PK_executorId, "s")                       \
        X("Variant", PK_variant, "s")                           \
        X("SessionId", PK_sessionId, "s")                       \
        X("OriginSessionId", PK_originSessionId, "s")           \
        X("Pid", PK_pid, "x")                                   \
        X("StartedAt", PK_startedAt, "s")                       \
        X("EndedAt", PK_endedAt, "s")                           \
        X("ExitCode", PK_exitCode, "x")                         \
        X("Signal", PK_signal, "s")                             \
        X("PromptTotalChars", PK_promptTotalChars, "x")         \
        X("SpawnError", PK_spawnError, "s")                     \
        X("CancelRequested", PK_cancelRequested, "b")           \
        X("FailureReason", PK_failureReason, "s")               \
        X("FailureDetail", PK_failureDetail, "s")               \
        X("Incomplete", PK_incomplete, "b")                     \
        X("FinalMarker", PK_finalMarker, "s")                   \
        X("FinalStatus", PK_finalStatus, "s")                   \
        X("Class", PK_class, "s")                               \
        X("LogPath", PK_logPath, "s")                           \
        X("DiffPath", PK_diffPath, "s")                         \
        X("OutputDir", PK_outputDir, "s")                       \
        X("PreDispatchHead", PK_preDispatchHead, "s")           \
        X("ChangesetError", PK_changesetError, "s")             \
        X("ParentTaskId", PK_parentTaskId, "s")                 \
        X("DispatchedBy", PK_dispatchedBy, "s")                 \
        X("CheckStatus", PK_checkStatus, "s")                   \
        X("CheckCommand", PK_checkCommand, "s")                 \
        X("CheckExitCode", PK_checkExitCode, "x")               \
        X("CheckStartedAt", PK_checkStartedAt, "s")             \
        X("CheckEndedAt", PK_checkEndedAt, "s")                 \
        X("CheckOverride", PK_checkOverride, "b")               \
        X("ProjectConfigWarning", PK_projectConfigWarning, "s") \
        X("DiskMaxBytes", PK_diskMaxBytes, "x")                 \
        X("HeadDriftFrom", PK_headDriftFrom, "s")               \
        X("HeadDriftTo", PK_headDriftTo, "s")                   \
        X("HeadDriftRecovered", PK_headDriftRecovered, "b")     \
        X("AcceptStartedAt", PK_acceptStartedAt, "s")           \
        X("Unit", PK_unit, "s")                                 \
        X("MemoryMax", PK_memoryMax, "x")                       \
        X("TasksMax", PK_tasksMax, "x")                         \
        X("Job", PK_job, "s")                                   \
        X("ChangesetRisks", PK_changesetRisks, "as")           \
        X("Network", PK_network, "s")                           \
        X("NetworkWarning", PK_networkWarning, "s")

typedef struct TaskProperty {
        const char *name, *key, *type;
} TaskProperty;

#define _PROP_ROW(name, key, type) {name, key, type},
static const TaskProperty task_properties[] = {BUS_TASK_PROPERTIES(_PROP_ROW)};
#undef _PROP_ROW

static int task_property_get(sd_bus *bus, const char *path, const char *interface, const char *property,
                             sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Task *t = userdata;
        const TaskProperty *p = NULL;
        for (size_t i = 0; i < ELEMENTSOF(task_properties) && !p; i++)
                if (streq(task_properties[i].name, property)) p = &task_properties[i];
        if (!p) return -ENOENT;
        /* the network as status shows it, counts included (run/network.h), as JSON text */
        if (streq(p->key, PK_network)) {
                _cleanup_(json_object_putp) json_object *nv = network_view(t);
                return sd_bus_message_append_basic(reply, 's', nv ? json_to_line(nv, NULL) : "");
        }
        _cleanup_(json_object_putp) json_object *v = task_record_get_json_by_name(&t->rec, p->key);
        switch (p->type[0]) {
        case 's':
                return sd_bus_message_append_basic(
                        reply, 's', json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "");
        case 'x': {
                int64_t x = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
                return sd_bus_message_append_basic(reply, 'x', &x);
        }
        case 'b': {
                int b = json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
                return sd_bus_message_append_basic(reply, 'b', &b);
        }
        case 'a': {
                /* an array of strings; an element {path, class} reads "class:path" */
                int r = sd_bus_message_open_container(reply, 'a', "s");
                size_t n = json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 0;
                for (size_t i = 0; r >= 0 && i < n; i++) {
                        json_object *e = json_object_array_get_idx(v, i);
                        _cleanup_free_ char *s = json_object_is_type(e, json_type_object)
                                ? strdup_printf("%s:%s", strempty(json_get_string(e, PK_class)),
                                                strempty(json_get_string(e, PK_path)))
                                : strdup(json_object_is_type(e, json_type_string) ? json_object_get_string(e) : "");
                        r = s ? sd_bus_message_append_basic(reply, 's', s) : -ENOMEM;
                }
                return r < 0 ? r : sd_bus_message_close_container(reply);
        }
        }
        return -EINVAL;
}

#define _PROP_VTABLE(name, key, type) \
        SD_BUS_PROPERTY(name, type, task_property_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
static const sd_bus_vtable task_vtable[] = {
        SD_BUS_VTABLE_START(0),
        BUS_TASK_PROPERTIES(_PROP_VTABLE)
        SD_BUS_VTABLE_END,
};
#undef _PROP_VTABLE

/* The task of an object path under BUS_TASK_PREFIX (sd_bus_path_decode), or NULL. */
static Task *task_of_path(Manager *m, const char *path) {
        _cleanup_free_ char *id = NULL;
        if (sd_bus_path_decode(path, BUS_TASK_PREFIX, &id) <= 0 || !id) return NULL;
        Task *t = manager_find_task(m, id);
        return task_exported(t) ? t : NULL;
}

static int bus_caller(Manager *m, sd_bus_message *msg, Caller *ret, sd_bus_error *error);

/* May the caller of the method call being processed see t (the peer rules,
 * peer.h caller_may_see)? Only asked while a call on path or on an object
 * above it (GetManagedObjects, tree, introspect) is dispatched; an object
 * looked up for a signal the daemon emits meanwhile is not the caller's
 * business. A caller that cannot be told sees nothing. */
static bool bus_caller_may_see(sd_bus *bus, const char *path, Task *t) {
        sd_bus_message *msg = sd_bus_get_current_message(bus);
        const char *target = msg ? sd_bus_message_get_path(msg) : NULL;
        if (!msg || !sd_bus_message_is_method_call(msg, NULL, NULL) || !target || !path_is_at_or_below(path, target))
                return true;
        Caller who;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        int r = bus_caller(t->m, msg, &who, &e);
        sd_bus_error_free(&e);
        return r >= 0 && caller_may_see(who, t);
}

static int task_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
                     sd_bus_error *error) {
        Task *t = task_of_path(userdata, path);
        if (!t || !bus_caller_may_see(bus, path, t)) return 0;
        *found = t;
        return 1;
}

static int task_enumerate(sd_bus *bus, const char *path, void *userdata, char ***nodes, sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_strv_free_ char **l = calloc(m->n_tasks + 1, sizeof *l);
        if (!l) return -ENOMEM;
        size_t n = 0;
        for (size_t i = 0; i < m->n_tasks; i++) {
                if (!task_exported(m->tasks[i])) continue;
                if (!(l[n] = bus_task_path(m->tasks[i]->id))) return -ENOMEM;
                if (!bus_caller_may_see(bus, l[n], m->tasks[i])) {
                        free(l[n]);
                        l[n] = NULL;
                        continue;
                }
                n++;
        }
        *nodes = TAKE_PTR(l);
        return 0;
}

/* ---- the manager object ---- */

static void count_tasks(Manager *m, uint32_t *all, uint32_t *queued, uint32_t *running) {
        *all = *queued = *running = 0;
        for (size_t i = 0; i < m->n_tasks; i++) {
                Task *t = m->tasks[i];
                if (!task_exported(t)) continue;
                (*all)++;
                if (t->rec.status == TASK_QUEUED) (*queued)++;
                else if (t->rec.status == TASK_RUNNING) (*running)++;
        }
}

static int property_get_counts(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        uint32_t all, queued, running;
        count_tasks(userdata, &all, &queued, &running);
        uint32_t v = streq(property, "QueuedTasks") ? queued : streq(property, "RunningTasks") ? running : all;
        return sd_bus_message_append_basic(reply, 'u', &v);
}

static int property_get_version(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append_basic(reply, 's', TASKFERRY_VERSION);
}

static int property_get_provider_limits(sd_bus *bus, const char *path, const char *interface, const char *property,
                                        sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        int r = sd_bus_message_open_container(reply, 'a', "(stt)");
        for (size_t i = 0; r >= 0 && i < m->settings.n_provider_limits; i++) {
                const ProviderLimit *p = &m->settings.provider_limits[i];
                r = sd_bus_message_append(reply, "(stt)", p->provider, p->max_concurrent_tasks,
                                          p->max_dispatches_per_window);
        }
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

/* The caller of the message being processed, by the peer rules of peer.c:
 * its pid (from the bus) decides, an unknown pid or another user is refused.
 * 0, or a negative errno with error set. */
static int bus_caller(Manager *m, sd_bus_message *msg, Caller *ret, sd_bus_error *error) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        int r = sd_bus_query_sender_creds(msg, SD_BUS_CREDS_PID | SD_BUS_CREDS_EUID | SD_BUS_CREDS_AUGMENT, &creds);
        pid_t pid = 0;
        uid_t uid = 0;
        if (r >= 0) r = sd_bus_creds_get_pid(creds, &pid);
        if (r >= 0) r = sd_bus_creds_get_euid(creds, &uid);
        if (r < 0 || pid <= 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED, "cannot tell who is calling");
        if (uid != geteuid()) return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED, "not the daemon's user");
        *ret = caller_of_pid(m, pid);
        return 0;
}

static int method_list_tasks(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        Caller who;
        int r = bus_caller(m, msg, &who, error);
        if (r < 0) return r;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0) r = sd_bus_message_open_container(reply, 'a', "(sos)");
        for (size_t i = 0; r >= 0 && i < m->n_tasks; i++) {
                Task *t = m->tasks[i];
                if (!task_exported(t) || !caller_may_see(who, t)) continue;
                _cleanup_free_ char *path = bus_task_path(t->id);
                if (!path) return -ENOMEM;
                r = sd_bus_message_append(reply, "(sos)", t->id, path, strempty(task_status_to_string(t->rec.status)));
        }
        if (r >= 0) r = sd_bus_message_close_container(reply);
        if (r < 0) return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* First line of an "error: ...\nhelp: ..." text, without "error: ". */
static char *error_line(const char *s) {
        if (!s) s = "request failed";
        if (startswith(s, "error: ")) s += strlen("error: ");
        return strndup(s, strcspn(s, "\n"));
}

static int method_cancel_task(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const char *id;
        int r = sd_bus_message_read(msg, "s", &id);
        if (r < 0) return r;
        Caller who;
        r = bus_caller(m, msg, &who, error);
        if (r < 0) return r;
        _cleanup_free_ char *reason = NULL, *note = NULL;
        if (store_check_loaded(m, &reason) < 0) { /* task.cancel's METHOD_STATE: tasks.json did not load */
                _cleanup_free_ char *line = error_line(reason);
                return sd_bus_error_set(error, SD_BUS_ERROR_FAILED, line ? line : "tasks.json could not be read");
        }
        Task *t = manager_find_task(m, id);
        if (!task_exported(t) || !caller_may_see(who, t))
                return sd_bus_error_setf(error, BUS_NAME ".UnknownTask", "unknown task: %s", id);
        /* the protocol's task.cancel: the caller's rule, then the lifecycle */
        r = caller_may_decide(who, t, "cancel", &reason);
        if (r >= 0) r = task_cancel(t, m->settings.cancel_grace_ms, &note, &reason);
        if (r < 0) {
                _cleanup_free_ char *line = error_line(reason);
                return sd_bus_error_set(error, who.sandboxed ? SD_BUS_ERROR_ACCESS_DENIED : SD_BUS_ERROR_FAILED,
                                        line ? line : "cancel failed");
        }
        return sd_bus_reply_method_return(msg, "s", strempty(note));
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Version", "s", property_get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Tasks", "u", property_get_counts, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("QueuedTasks", "u", property_get_counts, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("RunningTasks", "u", property_get_counts, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        /* the limits: read once at start (settings.h), one row per setting */
#define LIMIT(name, field) \
        SD_BUS_PROPERTY(name, "t", NULL, offsetof(Manager, settings.field), SD_BUS_VTABLE_PROPERTY_CONST)
        LIMIT("MaxConcurrentTasks", max_concurrent_tasks),
        LIMIT("MaxDispatchesPerWindow", max_dispatches_per_window),
        LIMIT("DispatchWindowMs", dispatch_window_ms),
        LIMIT("CancelGraceMs", cancel_grace_ms),
        LIMIT("NoOutputTimeoutMs", no_output_timeout_ms),
        LIMIT("PostOutputNoOutputTimeoutMs", post_output_no_output_timeout_ms),
        LIMIT("PreOutputMaxMs", pre_output_max_ms),
        LIMIT("MaxOutputFileBytes", max_output_file_bytes),
        LIMIT("TaskDiskMax", task_disk_max),
        LIMIT("TaskMemoryMax", task_memory_max),
        LIMIT("TaskTasksMax", task_tasks_max),
        LIMIT("TaskCPUWeight", task_cpu_weight),
#undef LIMIT
        SD_BUS_PROPERTY("ProviderLimits", "a(stt)", property_get_provider_limits, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_METHOD_WITH_ARGS("ListTasks", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(sos)", tasks), method_list_tasks,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("CancelTask", SD_BUS_ARGS("s", id), SD_BUS_RESULT("s", note), method_cancel_task,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("TaskStateChanged", SD_BUS_ARGS("s", id, "o", path, "s", old_status, "s", new_status), 0),
        SD_BUS_VTABLE_END,
};

/* ---- signals ---- */

static void emit_state(Manager *m, Task *t, const char *old_status) {
        sd_bus *bus = bus_of(m);
        if (!bus || !task_exported(t)) return;
        _cleanup_free_ char *path = bus_task_path(t->id);
        if (!path) return;
        const char *now = strempty(task_status_to_string(t->rec.status));
        (void) sd_bus_emit_signal(bus, BUS_MANAGER_PATH, BUS_MANAGER_INTERFACE, "TaskStateChanged", "soss", t->id, path,
                                  old_status, now);
        char *counts[] = {(char *) "Tasks", (char *) "QueuedTasks", (char *) "RunningTasks", NULL};
        (void) sd_bus_emit_properties_changed_strv(bus, BUS_MANAGER_PATH, BUS_MANAGER_INTERFACE, counts);
}

static void task_observer(Task *t, TaskStatus old_status, ChangesetStatus old_cs, void *userdata) {
        Manager *m = t->m;
        sd_bus *bus = bus_of(m);
        if (!bus || !task_exported(t)) return;
        _cleanup_free_ char *path = bus_task_path(t->id);
        if (!path) return;
        /* NULL: every property flagged EMITS_CHANGE (a transition writes several) */
        (void) sd_bus_emit_properties_changed_strv(bus, path, BUS_TASK_INTERFACE, NULL);
        if (t->rec.status != old_status) emit_state(m, t, strempty(task_status_to_string(old_status)));
}

/* the check* properties moved (no transition) */
static void task_checked(Task *t, void *userdata) {
        sd_bus *bus = bus_of(t->m);
        if (!bus || !task_exported(t)) return;
        _cleanup_free_ char *path = bus_task_path(t->id);
        if (path) (void) sd_bus_emit_properties_changed_strv(bus, path, BUS_TASK_INTERFACE, NULL);
}

static void task_added(Task *t, void *userdata) {
        Manager *m = t->m;
        sd_bus *bus = bus_of(m);
        if (!bus || !task_exported(t)) return;
        _cleanup_free_ char *path = bus_task_path(t->id);
        if (!path) return;
        (void) sd_bus_emit_interfaces_added(bus, path, BUS_TASK_INTERFACE, NULL);
        emit_state(m, t, "");
}

/* ---- connection ---- */

static int name_acquired(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Manager *m = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        if (e) {
                bus_warn(m, -sd_bus_error_get_errno(e), "cannot acquire the bus name");
                return 0;
        }
        /* RequestName's reply: 1 primary owner, 4 already the owner (the D-Bus
         * specification's DBUS_REQUEST_NAME_REPLY_*) */
        uint32_t ret = 0;
        int r = sd_bus_message_read(reply, "u", &ret);
        if (r < 0 || (ret != 1 && ret != 4))
                bus_warn(m, r < 0 ? r : -EEXIST, "cannot acquire the bus name");
        return 0;
}

static int on_disconnected(sd_bus_message *msg, void *userdata, sd_bus_error *ret_error) {
        Manager *m = userdata;
        bus_warn(m, -ECONNRESET, "the user bus went away");
        return 0;
}

int bus_init(Manager *m) {
        if (m->bus) return 0;
        m->bus = calloc(1, sizeof *m->bus);
        if (!m->bus) return -ENOMEM;
        int r = manager_add_observer(
                m, &(TaskObserver) {.added = task_added, .transitioned = task_observer, .checked = task_checked});
        if (r < 0) {
                free(m->bus);
                m->bus = NULL;
        }
        return r;
}

/* Export the objects on the daemon's user-bus connection and ask for the name. */
static int bus_export(Manager *m, sd_bus *bus) {
        int r;
        if ((r = sd_bus_add_object_vtable(bus, NULL, BUS_MANAGER_PATH, BUS_MANAGER_INTERFACE, manager_vtable, m)) < 0 ||
            (r = sd_bus_add_fallback_vtable(bus, NULL, BUS_TASK_PREFIX, BUS_TASK_INTERFACE, task_vtable, task_find, m)) < 0 ||
            (r = sd_bus_add_node_enumerator(bus, NULL, BUS_TASK_PREFIX, task_enumerate, m)) < 0 ||
            (r = sd_bus_add_object_manager(bus, NULL, BUS_MANAGER_PATH)) < 0 ||
            (r = sd_bus_match_signal(bus, NULL, "org.freedesktop.DBus.Local", NULL, "org.freedesktop.DBus.Local",
                                     "Disconnected", on_disconnected, m)) < 0 ||
            (r = sd_bus_request_name_async(bus, NULL, BUS_NAME, 0, name_acquired, m)) < 0)
                return r;
        return 0;
}

int bus_start(Manager *m) {
        if (!m->bus || m->bus->started) return 0;
        sd_bus *bus = user_bus(m);
        if (!bus) {
                _cleanup_free_ char *why = user_bus_missing(m);
                if (!m->bus->warned) log_warning("no D-Bus API (%s): %s", BUS_NAME, why ? why : "no user bus");
                m->bus->warned = true;
                return 0;
        }
        int r = bus_export(m, bus);
        if (r < 0) {
                bus_warn(m, r, "cannot export the objects on the user bus");
                return 0;
        }
        m->bus->started = true;
        return 0;
}

void bus_free(Manager *m) {
        free(m->bus); /* the connection is user-bus.c's */
        m->bus = NULL;
}
