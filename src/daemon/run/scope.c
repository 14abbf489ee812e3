/* Transient scope units on the user manager (scope.h). */
#include "core/user-bus.h"
#include "run/scope.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <systemd/sd-bus.h>

#include "disk-budget.h"
#include "json-util.h"
#include "macro.h"
#include "core/manager.h"
#include "protocol-keys.h"
#include "core/store.h"
#include "core/task.h"
#include "core/task-table.h"
#include "run/launch.h"
#include "fileio.h"
#include "log.h"
#include "string-util.h"
#include "strv.h"
#include "task-limits.h"

#define SD_DEST "org.freedesktop.systemd1"
#define SD_PATH "/org/freedesktop/systemd1"
#define SD_MANAGER "org.freedesktop.systemd1.Manager"

typedef enum ScopeState {
        SCOPE_PROBING,     /* bus open, systemd1 not answered yet: try */
        SCOPE_AVAILABLE,
        SCOPE_UNAVAILABLE, /* reason says why */
} ScopeState;

typedef struct Scope Scope;
struct Scope {
        sd_bus *bus;           /* the daemon's user-bus connection (user-bus.h), NULL: none */
        sd_bus_slot *job_removed;
        sd_bus_slot *probe;
        ScopeState state;
        char *reason;
        bool fallback_logged;
        TaskLimitsProbe probe_limits; /* what holds a worker's limits without a scope (task-limits.h) */
};

static void scope_unavailable(Manager *m, const char *fmt, ...) _printf_(2, 3);
static void scope_unavailable(Manager *m, const char *fmt, ...) {
        Scope *s = m->scope;
        va_list ap;
        va_start(ap, fmt);
        char *text = NULL;
        if (vasprintf(&text, fmt, ap) < 0) text = NULL;
        va_end(ap);
        if (s->state != SCOPE_UNAVAILABLE)
                log_info("no systemd scope for the workers (%s): their limits hold as %s",
                         text ? text : "out of memory",
                         s->probe_limits.mode == TASK_LIMITS_CGROUP ? "a cgroup of their own" : "rlimits");
        s->fallback_logged = true;
        s->state = SCOPE_UNAVAILABLE;
        free(s->reason);
        s->reason = text;
}

/* ---- unit names ---- */

char *scope_unit_name(const char *task_id) {
        if (isempty(task_id) || strlen(task_id) > 200) return NULL;
        for (const char *p = task_id; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == ':' ||
                      *p == '_' || *p == '.' || *p == '-'))
                        return NULL;
        return strdup_printf(SCOPE_UNIT_PREFIX "%s" SCOPE_UNIT_SUFFIX, task_id);
}

const char *scope_unit_of(const Task *t) {
        const char *u = t->rec.unit;
        if (!u || !startswith(u, SCOPE_UNIT_PREFIX)) return NULL;
        const char *id = u + strlen(SCOPE_UNIT_PREFIX);
        size_t n = strlen(id), sl = strlen(SCOPE_UNIT_SUFFIX), il = strlen(t->id);
        if (n != il + sl || strncmp(id, t->id, il) != 0 || !streq(id + il, SCOPE_UNIT_SUFFIX)) return NULL;
        _cleanup_free_ char *expect = scope_unit_name(t->id);
        return expect && streq(expect, u) ? u : NULL;
}

/* ---- limits ---- */

void scope_limits_for(Task *t, ScopeLimits *ret) {
        const Settings *st = &t->m->settings;
        uint64_t mem = st->task_memory_max, tasks = st->task_tasks_max;
        int64_t v = 0;
        if (t->launch.memory_max > 0) mem = (uint64_t) t->launch.memory_max;
        if (t->launch.tasks_max > 0) tasks = (uint64_t) t->launch.tasks_max;
        /* a nested dispatch gets its own scope, never more than the
         * dispatching worker's (dispatch_check_limits refuses asking for more) */
        Task *parent = t->rec.dispatched_by ? manager_find_task(t->m, t->rec.dispatched_by) : NULL;
        if (parent) {
                if (task_record_get_int(&parent->rec, TASK_KEY_memory_max, &v) && v > 0 && (uint64_t) v < mem)
                        mem = (uint64_t) v;
                if (task_record_get_int(&parent->rec, TASK_KEY_tasks_max, &v) && v > 0 && (uint64_t) v < tasks)
                        tasks = (uint64_t) v;
        }
        *ret = (ScopeLimits) {
                .memory_max = mem,
                .memory_high = mem / 10 * 9,
                .tasks_max = tasks,
                .cpu_weight = st->task_cpu_weight,
        };
        (void) task_set_int(t, TASK_KEY_memory_max, (int64_t) mem);
        (void) task_set_int(t, TASK_KEY_tasks_max, (int64_t) tasks);
}

/* ---- the child on hold ---- */

static void release(Task *t) {
        t->scope_slot = sd_bus_slot_unref(t->scope_slot);
        t->scope_timer = sd_event_source_disable_unref(t->scope_timer);
        free(t->scope_job);
        t->scope_job = NULL;
        launch_go(t, &t->scope_hold_fd);
}

static void fallback(Task *t, const char *why) {
        Scope *s = t->m->scope;
        if (s && !s->fallback_logged) {
                log_warning("task %s: no scope unit (%s); the worker's limits hold as %s (logged once)", t->id, why,
                            s->probe_limits.mode == TASK_LIMITS_CGROUP ? "a cgroup of its own" : "rlimits");
                s->fallback_logged = true;
        }
        release(t);
}

void scope_forget(Task *t) {
        release(t);
}

static bool error_means_no_manager(const sd_bus_error *e) {
        return sd_bus_error_has_names(e, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER,
                                      SD_BUS_ERROR_UNKNOWN_METHOD, SD_BUS_ERROR_UNKNOWN_OBJECT,
                                      SD_BUS_ERROR_UNKNOWN_INTERFACE, SD_BUS_ERROR_NO_REPLY);
}

static int start_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Task *t = userdata;
        t->scope_slot = sd_bus_slot_unref(t->scope_slot);
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        if (e) {
                if (error_means_no_manager(e))
                        scope_unavailable(t->m, "StartTransientUnit: %s", e->message ? e->message : e->name);
                fallback(t, e->message ? e->message : e->name);
                return 0;
        }
        const char *job = NULL;
        if (sd_bus_message_read(reply, "o", &job) < 0 || !job) {
                fallback(t, "malformed StartTransientUnit reply");
                return 0;
        }
        if (t->m->scope->state == SCOPE_PROBING) t->m->scope->state = SCOPE_AVAILABLE;
        /* JobRemoved may have come first: then the hold is gone already */
        if (t->scope_hold_fd >= 0 && !(t->scope_job = strdup(job))) fallback(t, "out of memory");
        return 0;
}

static int job_removed(sd_bus_message *msg, void *userdata, sd_bus_error *ret_error) {
        Manager *m = userdata;
        uint32_t id;
        const char *job, *unit, *result;
        if (sd_bus_message_read(msg, "uoss", &id, &job, &unit, &result) < 0) return 0;
        size_t ul = strlen(unit), pl = strlen(SCOPE_UNIT_PREFIX), sl = strlen(SCOPE_UNIT_SUFFIX);
        if (ul <= pl + sl || !startswith(unit, SCOPE_UNIT_PREFIX) || !streq(unit + ul - sl, SCOPE_UNIT_SUFFIX)) return 0;
        size_t n = ul - pl - sl;
        _cleanup_free_ char *task_id = strndup(unit + pl, n);
        Task *t = task_id ? manager_find_task(m, task_id) : NULL;
        if (!t || (t->scope_job && !streq(t->scope_job, job))) return 0;
        if (t->scope_hold_fd < 0) {
                /* done after we stopped waiting: the shim runs in it all the same */
                if (streq(result, "done") && t->rec.status == TASK_RUNNING && !t->rec.unit) {
                        (void) task_set_str(t, TASK_KEY_unit, unit);
                        task_persist(t);
                }
                return 0;
        }
        if (!streq(result, "done")) {
                _cleanup_free_ char *why = strdup_printf("the job of %s ended with result \"%s\"", unit, result);
                fallback(t, why ? why : result);
                return 0;
        }
        (void) task_set_str(t, TASK_KEY_unit, unit);
        task_persist(t);
        release(t);
        return 0;
}

static int start_timeout(sd_event_source *es, uint64_t usec, void *userdata) {
        Task *t = userdata;
        t->scope_timer = sd_event_source_disable_unref(t->scope_timer);
        fallback(t, "the user manager did not start the scope in time");
        return 0;
}

static int append_prop_t(sd_bus_message *msg, const char *name, uint64_t v) {
        return v ? sd_bus_message_append(msg, "(sv)", name, "t", v) : 0;
}

void scope_start(Task *t, pid_t pid, int hold_fd, const ScopeLimits *lim) {
        Manager *m = t->m;
        Scope *s = m->scope;
        t->scope_hold_fd = hold_fd;
        if (!s || !s->bus || s->state == SCOPE_UNAVAILABLE) return release(t);
        _cleanup_free_ char *unit = scope_unit_name(t->id);
        if (!unit) return fallback(t, "the task id cannot name a unit");
        _cleanup_free_ char *desc = strdup_printf("taskferry task %s", t->id);
        if (!desc) return fallback(t, "out of memory");
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *msg = NULL;
        int r = sd_bus_message_new_method_call(s->bus, &msg, SD_DEST, SD_PATH, SD_MANAGER, "StartTransientUnit");
        if (r >= 0) r = sd_bus_message_append(msg, "ss", unit, "fail");
        if (r >= 0) r = sd_bus_message_open_container(msg, 'a', "(sv)");
        if (r >= 0) r = sd_bus_message_append(msg, "(sv)", "PIDs", "au", 1, (uint32_t) pid);
        if (r >= 0) r = sd_bus_message_append(msg, "(sv)", "Slice", "s", SCOPE_SLICE);
        if (r >= 0) r = sd_bus_message_append(msg, "(sv)", "Description", "s", desc);
        if (r >= 0) r = append_prop_t(msg, "MemoryMax", lim->memory_max);
        if (r >= 0) r = append_prop_t(msg, "MemoryHigh", lim->memory_high);
        if (r >= 0) r = append_prop_t(msg, "TasksMax", lim->tasks_max);
        if (r >= 0) r = append_prop_t(msg, "CPUWeight", lim->cpu_weight);
        /* a scope that failed goes too, not only one that ended cleanly: no
         * failed taskferry-task-*.scope piles up in the user manager */
        if (r >= 0) r = sd_bus_message_append(msg, "(sv)", "CollectMode", "s", "inactive-or-failed");
        if (r >= 0) r = sd_bus_message_close_container(msg);
        if (r >= 0) r = sd_bus_message_append(msg, "a(sa(sv))", 0);
        if (r >= 0)
                r = sd_bus_call_async(s->bus, &t->scope_slot, msg, start_reply, t,
                                      (uint64_t) SCOPE_START_TIMEOUT_MS * 1000);
        if (r < 0) return fallback(t, strerror(-r));
        uint64_t now;
        sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        if (sd_event_add_time(m->event, &t->scope_timer, CLOCK_MONOTONIC,
                              now + ((uint64_t) SCOPE_START_TIMEOUT_MS + 1000) * 1000, 0, start_timeout, t) < 0)
                return fallback(t, "cannot arm the scope timer");
}

/* ---- kill ---- */

static int kill_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        /* gone already (its last process exited) is what we wanted */
        if (e && !sd_bus_error_has_names(e, "org.freedesktop.systemd1.NoSuchUnit", "org.freedesktop.systemd1.NoSuchProcess"))
                log_warning("KillUnit: %s", e->message ? e->message : e->name);
        return 0;
}

int scope_kill(Task *t, int sig) {
        Scope *s = t->m->scope;
        const char *unit = scope_unit_of(t);
        if (!unit || !s || !s->bus) return -ESRCH;
        int r = sd_bus_call_method_async(s->bus, NULL, SD_DEST, SD_PATH, SD_MANAGER, "KillUnit", kill_reply, NULL,
                                         "ssi", unit, "all", (int32_t) sig);
        return r < 0 ? -ESRCH : 0;
}

/* ---- re-adoption ---- */

void scope_readopt(Task *t, pid_t shim_pid) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/cgroup", (int) shim_pid);
        _cleanup_free_ char *data = NULL, *unit = scope_unit_name(t->id);
        size_t len = 0;
        if (!unit || read_file(path, 65536, &data, &len) < 0) return;
        /* the unified hierarchy's line: "0::/user.slice/.../taskferry-task-<id>.scope" */
        for (char *line = data, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next) *next++ = 0;
                if (!startswith(line, "0::")) continue;
                const char *last = strrchr(line, '/');
                if (last && streq(last + 1, unit) && !streq_ptr(t->rec.unit, unit)) {
                        (void) task_set_str(t, TASK_KEY_unit, unit);
                        task_persist(t);
                }
        }
}

/* ---- setup ---- */

static int probe_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Manager *m = userdata;
        Scope *s = m->scope;
        s->probe = sd_bus_slot_unref(s->probe);
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        if (e) {
                scope_unavailable(m, "no systemd user manager (no org.freedesktop.systemd1 on the user bus: %s)",
                                  e->message ? e->message : e->name);
                return 0;
        }
        if (s->state == SCOPE_PROBING) s->state = SCOPE_AVAILABLE;
        return 0;
}

int scope_setup(Manager *m) {
        Scope *s = calloc(1, sizeof *s);
        if (!s) return -ENOMEM;
        m->scope = s;
        s->state = SCOPE_PROBING;
        /* the shim probes the same way: it is our child, in our cgroup, with our ids */
        int k = task_limits_probe(NULL, &s->probe_limits);
        if (k < 0) return k;
        s->bus = user_bus(m);
        if (!s->bus) {
                _cleanup_free_ char *why = user_bus_missing(m);
                scope_unavailable(m, "no systemd user manager (%s)", why ? why : "no user bus");
                return 0;
        }
        int r = sd_bus_match_signal_async(s->bus, &s->job_removed, SD_DEST, SD_PATH, SD_MANAGER, "JobRemoved", job_removed,
                                          NULL, m);
        if (r >= 0)
                r = sd_bus_call_method_async(s->bus, &s->probe, SD_DEST, SD_PATH, "org.freedesktop.DBus.Properties", "Get",
                                             probe_reply, m, "ss", SD_MANAGER, "Version");
        if (r < 0) {
                s->job_removed = sd_bus_slot_unref(s->job_removed);
                s->probe = sd_bus_slot_unref(s->probe);
                s->bus = NULL;
                scope_unavailable(m, "cannot talk to the user bus: %s", strerror(-r));
        }
        return 0;
}

void scope_free(Manager *m) {
        Scope *s = m->scope;
        if (!s) return;
        s->job_removed = sd_bus_slot_unref(s->job_removed);
        s->probe = sd_bus_slot_unref(s->probe);
        s->bus = NULL; /* the connection is user-bus.c's */
        task_limits_probe_done(&s->probe_limits);
        free(s->reason);
        free(s);
        m->scope = NULL;
}

json_object *scope_health(Manager *m) {
        Scope *s = m->scope;
        json_object *o = json_object_new_object();
        if (!o) return NULL;
        bool enforced = s && s->bus && s->state != SCOPE_UNAVAILABLE;
        json_add_bool(o, PK_enforced, enforced);
        if (!enforced)
                json_add_string(o, PK_reason, s && s->reason ? s->reason : "no systemd user manager");
        else if (s->state == SCOPE_PROBING)
                json_add_string(o, PK_reason, "the user manager has not answered yet");
        json_add_string(o, PK_slice, SCOPE_SLICE);
        const Settings *st = &m->settings;
        json_add_int(o, PK_memoryMax, (int64_t) st->task_memory_max);
        json_add_int(o, PK_memoryHigh, (int64_t) (st->task_memory_max / 10 * 9));
        json_add_int(o, PK_tasksMax, (int64_t) st->task_tasks_max);
        json_add_int(o, PK_cpuWeight, (int64_t) st->task_cpu_weight);
        _cleanup_free_ char *words = scope_limits_words(m, NULL, st->task_memory_max, st->task_tasks_max);
        json_add_string(o, PK_mode, task_limits_mode_to_string(enforced ? TASK_LIMITS_SCOPE : s ? s->probe_limits.mode
                                                                                                 : TASK_LIMITS_RLIMIT));
        json_add_string(o, PK_limits, words);
        return o;
}

char *scope_limits_words(Manager *m, const char *unit, uint64_t memory_max, uint64_t tasks_max) {
        Scope *s = m->scope;
        bool scoped = unit || (s && s->bus && s->state != SCOPE_UNAVAILABLE);
        if (scoped) return task_limits_describe(TASK_LIMITS_SCOPE, false, memory_max, tasks_max, unit, NULL);
        if (!s) return task_limits_describe(TASK_LIMITS_RLIMIT, geteuid() == 0, memory_max, tasks_max, NULL, NULL);
        const TaskLimitsProbe *p = &s->probe_limits;
        _cleanup_free_ char *why = strdup_printf("no systemd user manager: %s; %s", s->reason ? s->reason : "none",
                                                 p->why ? p->why : "no writable cgroup v2");
        return task_limits_describe(p->mode, p->root, memory_max, tasks_max, p->parent, why);
}

char *scope_task_limits_words(const Task *t) {
        int64_t mem = 0, tasks = 0;
        (void) task_record_get_int(&t->rec, TASK_KEY_memory_max, &mem);
        (void) task_record_get_int(&t->rec, TASK_KEY_tasks_max, &tasks);
        if (mem <= 0 && tasks <= 0) return NULL;
        return scope_limits_words(t->m, scope_unit_of(t), mem > 0 ? (uint64_t) mem : 0, tasks > 0 ? (uint64_t) tasks : 0);
}

/* ---- pure helpers ---- */

bool scope_oom_verdict(const char *unit, const char *result, int64_t oom_kills, uint64_t memory_max,
                       char **ret_detail) {
        bool by_result = streq_ptr(result, "oom-kill");
        if (!by_result && oom_kills <= 0) return false;
        char size[32] = "unknown";
        if (memory_max) disk_size_format(memory_max, size);
        _cleanup_free_ char *kills = oom_kills > 0 ? strdup_printf("; %" PRId64 " process%s killed", oom_kills,
                                                                   oom_kills == 1 ? "" : "es")
                                                   : strdup("");
        *ret_detail = strdup_printf("the kernel's OOM killer stopped the worker at the memory limit of %s "
                                    "(MemoryMax=%s)%s%s",
                                    unit ? unit : "its scope", size, by_result ? "; systemd: Result=oom-kill" : "",
                                    kills ? kills : "");
        return true;
}
