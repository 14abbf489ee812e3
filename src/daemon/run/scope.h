#pragma once
/* Transient scope units: every worker's shim runs in its own
 * taskferry-task-<id>.scope under taskferry.slice on the user's systemd
 * manager, created with StartTransientUnit (org.freedesktop.systemd1(5),
 * systemd.resource-control(5)), with the task's MemoryMax, MemoryHigh,
 * TasksMax and CPUWeight. The forked child that becomes the shim waits on a
 * pipe until the scope's job is done (or failed), so the shim and everything
 * it starts are in the scope from their first instruction.
 *
 * Without a user manager (no user bus, no org.freedesktop.systemd1 on it: a
 * container, CI) the scope is skipped and the worker runs in its own process
 * group, its limits held by the shim instead: a cgroup of its own where a
 * delegated cgroup v2 takes one, else rlimits and the shim's count
 * (task-limits.h); that is logged once, and `dispatch`, `status` and
 * `taskferry doctor` say in words which limits hold (scope_limits_words).
 *
 * Owns Manager.scope (its calls on the daemon's user-bus connection) and
 * Task.scope_* (the pending start of a task's scope). */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <json-c/json.h>

typedef struct Manager Manager;
typedef struct Task Task;

#define SCOPE_SLICE "taskferry.slice"
/* failureReason of a worker the kernel OOM-killed in its scope */
#define SCOPE_OOM_REASON "oom_killed"
#define SCOPE_UNIT_PREFIX "taskferry-task-"
#define SCOPE_UNIT_SUFFIX ".scope"
/* How long a forked child waits for its scope's job before it runs without
 * one (ms). */
#define SCOPE_START_TIMEOUT_MS 15000

/* The limits of one task's scope (systemd.resource-control(5)); 0: not set. */
typedef struct ScopeLimits {
        uint64_t memory_max;   /* bytes (MemoryMax=) */
        uint64_t memory_high;  /* bytes (MemoryHigh=) */
        uint64_t tasks_max;    /* processes + threads (TasksMax=) */
        uint64_t cpu_weight;   /* 1..10000 (CPUWeight=) */
} ScopeLimits;

/* At start, on the daemon's user-bus connection (user-bus.h): subscribe to
 * the manager's JobRemoved and probe org.freedesktop.systemd1
 * asynchronously. No bus is no error: m->scope then says why and every task
 * takes the process-group path. 0, -ENOMEM. */
int scope_setup(Manager *m);
void scope_free(Manager *m);

/* "taskferry-task-<id>.scope" (malloc'd), or NULL when the id holds a
 * character a unit name cannot (systemd.unit(5): [A-Za-z0-9:_.-]) or on
 * ENOMEM. */
char *scope_unit_name(const char *task_id);

/* The task's scope, if it has one: its record's `unit` when that is exactly
 * scope_unit_name(id) (a record is never trusted to name another unit). */
const char *scope_unit_of(const Task *t);

/* The limits of t's scope from the settings and the dispatch (launch
 * options memoryMax/tasksMax), a nested dispatch capped at the limits of the
 * task that dispatched it. Records memoryMax and tasksMax on the task. */
void scope_limits_for(Task *t, ScopeLimits *ret);

/* Put the freshly forked child `pid` into t's scope. hold_fd is the write end
 * of the pipe the child waits on; it is taken and the child let go
 * (launch_go, launch.h) once the scope's job is done (then the record's
 * `unit` is set), or at once / on a failure or timeout (the child then runs
 * in its own process group; logged once per daemon). Never fails the
 * launch. */
void scope_start(Task *t, pid_t pid, int hold_fd, const ScopeLimits *limits);

/* KillUnit(unit, "all", sig) on t's scope, asynchronously: every process in
 * its cgroup, setsid()ed or not. 0 when sent, -ESRCH when t has no scope or
 * there is no bus (the caller signals the process group instead). */
int scope_kill(Task *t, int sig);

/* Drop the pending start of t's scope (the task goes away). */
void scope_forget(Task *t);

/* At re-adoption: the scope a running shim is in, from /proc/<pid>/cgroup,
 * recorded as `unit` if it is t's own. */
void scope_readopt(Task *t, pid_t shim_pid);

/* task.stats' resourceLimits object (system.health's result stays exactly
 * {healthy, pid, version}): {"enforced": bool (by a systemd scope),
 * "reason": str (when not), "slice", "memoryMax", "memoryHigh", "tasksMax",
 * "cpuWeight", "mode": "scope"|"cgroup"|"rlimit", "limits": str} (the
 * defaults a dispatch gets; "limits" says in words what holds them). NULL
 * on ENOMEM. */
json_object *scope_health(Manager *m);

/* The words saying which limits hold for a worker with memory_max bytes
 * and tasks_max processes and threads (task_limits_describe): in the scope
 * unit when one is given or the user manager answers, else what the
 * shim's probe finds (the same as the daemon's: its child, in its
 * cgroup). malloc'd, NULL on ENOMEM. */
char *scope_limits_words(Manager *m, const char *unit, uint64_t memory_max, uint64_t tasks_max);
/* The same for t from its record (unit, memoryMax, tasksMax); NULL before
 * its limits were recorded (a queued task) or on ENOMEM. */
char *scope_task_limits_words(const Task *t);

/* ---- pure helpers (unit-tested, tests/unit/test-scope.c) ---- */

/* Did the kernel's OOM killer stop a worker in its scope? From what systemd
 * reported (the scope's Result property: "oom-kill"; NULL when unknown)
 * and the growth of its cgroup's memory.events oom_kill count while the
 * worker ran (cgroup-util.h; the shim reports it in exit.json; < 0: unknown).
 * Returns true with *ret_detail (malloc'd) naming the unit and the limit
 * (memory_max bytes, 0: unknown): the failureDetail of failureReason
 * "oom_killed". */
bool scope_oom_verdict(const char *unit, const char *result, int64_t oom_kills, uint64_t memory_max,
                       char **ret_detail);
