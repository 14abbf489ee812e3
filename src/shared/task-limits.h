#pragma once
/* How a worker's processes and memory are bounded, and the words that say
 * so (`dispatch`, `status` and `doctor` show them).
 *
 *  - scope: the task's systemd scope unit (MemoryMax=, TasksMax=; the
 *    daemon's run/scope.h).
 *  - cgroup: no user manager, but a cgroup v2 subtree this user may write
 *    (cgroup_delegated_parent, cgroup-util.h): the shim makes the task a
 *    cgroup of its own there, taskferry-<uid>-<task id>, with memory.max,
 *    memory.swap.max 0 and pids.max, and moves the worker into it before it
 *    execs bwrap; a worker the kernel OOM-killed there, or whose fork the
 *    kernel refused at pids.max, is stopped whole.
 *  - rlimit: neither. For a daemon that is not root the worker gets
 *    RLIMIT_NPROC at the tasks limit, set inside a user namespace of the
 *    worker's own, so that the kernel counts only the sandbox's processes
 *    and threads against it, never the user's others (the kernel keeps a
 *    count per user per user namespace; set before the namespace existed,
 *    the limit would also bind the user's count outside). Root is exempt
 *    from RLIMIT_NPROC whatever its namespace. The shim counts the worker's
 *    processes, threads and resident memory every TASK_LIMITS_WATCH_MS and
 *    stops the worker at its tasks limit or past its memory limit: the only
 *    bound on memory here, and on processes for root. (No RLIMIT_DATA or
 *    RLIMIT_AS: they count address space a runtime reserves, not memory it
 *    uses; a sanitizer's shadow, a JIT's reservations would fail at once.)
 *
 * A worker stopped for a limit ends crashed with failureReason
 * TASK_LIMITS_MEMORY_REASON or TASK_LIMITS_TASKS_REASON and a detail naming
 * the limit (the shim's exit.json stopReason, launch-spec.h). */

#include <stdbool.h>
#include <stdint.h>

#define TASK_LIMITS_WATCH_MS 100
/* a count that takes long (many processes) is repeated at 10 x its time, at most this (ms) */
#define TASK_LIMITS_WATCH_MAX_MS 1000
/* ... but every this many ms where it is the only bound on processes (root without a cgroup) */
#define TASK_LIMITS_WATCH_ROOT_MS 20
#define TASK_LIMITS_MEMORY_REASON "memory_limit_exceeded"
#define TASK_LIMITS_TASKS_REASON "tasks_limit_exceeded"

typedef enum TaskLimitsMode {
        TASK_LIMITS_SCOPE,
        TASK_LIMITS_CGROUP,
        TASK_LIMITS_RLIMIT,
        _TASK_LIMITS_MODE_MAX,
        _TASK_LIMITS_MODE_INVALID = -1,
} TaskLimitsMode;

const char *task_limits_mode_to_string(TaskLimitsMode m);
TaskLimitsMode task_limits_mode_from_string(const char *s);

/* Where no scope holds a task: which of cgroup and rlimit applies to a
 * worker started by this process. */
typedef struct TaskLimitsProbe {
        TaskLimitsMode mode;  /* TASK_LIMITS_CGROUP or TASK_LIMITS_RLIMIT */
        char *parent;         /* cgroup: the delegated parent directory */
        char *why;            /* rlimit: why no cgroup could be used */
        bool root;            /* the effective uid is 0: RLIMIT_NPROC does not bind */
} TaskLimitsProbe;

/* Probe the calling process (/proc/self/cgroup, the cgroup v2 mount, or
 * cgroup_root when not NULL, for tests). 0, -ENOMEM. */
int task_limits_probe(const char *cgroup_root, TaskLimitsProbe *ret);
void task_limits_probe_done(TaskLimitsProbe *p);

/* The sentence saying which limits hold, e.g. "memory 256.0 MiB and 64
 * processes and threads, held by the kernel in the cgroup /sys/fs/cgroup/x
 * (memory.max, pids.max)". where: the scope's unit or the cgroup parent,
 * why: the rlimit mode's reason (both may be NULL). 0 limits are "no
 * limit". malloc'd, NULL on ENOMEM. */
char *task_limits_describe(TaskLimitsMode mode, bool root, uint64_t memory_max, uint64_t tasks_max, const char *where,
                           const char *why);

/* The size of each tmpfs of a sandbox (/tmp, /var/tmp, masked dirs): the
 * smaller of the disk budget and the memory limit that are set (a tmpfs is
 * memory, and without a cgroup no memory limit counts it); 0 when neither is. */
uint64_t task_limits_tmp_size(uint64_t disk_budget, uint64_t memory_max);
