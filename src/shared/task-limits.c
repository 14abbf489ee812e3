/* How a worker's processes and memory are bounded (task-limits.h). */
#include "task-limits.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "cgroup-util.h"
#include "disk-budget.h"
#include "fileio.h"
#include "macro.h"
#include "string-util.h"

static const char *const mode_table[_TASK_LIMITS_MODE_MAX] = {
        [TASK_LIMITS_SCOPE] = "scope",
        [TASK_LIMITS_CGROUP] = "cgroup",
        [TASK_LIMITS_RLIMIT] = "rlimit",
};

const char *task_limits_mode_to_string(TaskLimitsMode m) {
        return m >= 0 && m < _TASK_LIMITS_MODE_MAX ? mode_table[m] : NULL;
}

TaskLimitsMode task_limits_mode_from_string(const char *s) {
        for (int i = 0; s && i < _TASK_LIMITS_MODE_MAX; i++)
                if (streq(s, mode_table[i])) return (TaskLimitsMode) i;
        return _TASK_LIMITS_MODE_INVALID;
}

int task_limits_probe(const char *cgroup_root, TaskLimitsProbe *ret) {
        *ret = (TaskLimitsProbe) {.mode = TASK_LIMITS_RLIMIT, .root = geteuid() == 0};
        _cleanup_free_ char *data = NULL, *self = NULL;
        size_t len = 0;
        int r = read_file("/proc/self/cgroup", 65536, &data, &len);
        if (r == -ENOMEM) return r;
        if (r >= 0) r = cgroup_self_path(data, &self);
        if (r == -ENOMEM) return r;
        r = cgroup_delegated_parent(cgroup_v2_root(cgroup_root), self, &ret->parent, &ret->why);
        if (r == -ENOMEM) return r;
        if (r >= 0) ret->mode = TASK_LIMITS_CGROUP;
        return 0;
}

void task_limits_probe_done(TaskLimitsProbe *p) {
        free(p->parent);
        free(p->why);
        p->parent = p->why = NULL;
}

char *task_limits_describe(TaskLimitsMode mode, bool root, uint64_t memory_max, uint64_t tasks_max, const char *where,
                           const char *why) {
        char mem[48] = "no memory limit", sz[32];
        if (memory_max) snprintf(mem, sizeof mem, "memory %s", disk_size_format(memory_max, sz));
        char tasks[48] = "no process limit";
        if (tasks_max) snprintf(tasks, sizeof tasks, "%llu processes and threads", (unsigned long long) tasks_max);
        switch (mode) {
        case TASK_LIMITS_SCOPE:
                return strdup_printf("%s and %s, held by the kernel in the systemd scope %s (MemoryMax=, TasksMax=)", mem,
                                     tasks, where ? where : "of the task");
        case TASK_LIMITS_CGROUP:
                return strdup_printf("%s and %s, held by the kernel in a cgroup of its own under %s (memory.max, "
                                     "pids.max; no systemd user manager)",
                                     mem, tasks, where ? where : "a delegated cgroup v2");
        case TASK_LIMITS_RLIMIT:
                if (root)
                        return strdup_printf("%s and %s in all, counted by taskferry every %d ms (processes every %d "
                                             "ms), so a burst can pass them briefly (root is exempt from RLIMIT_NPROC; "
                                             "%s)",
                                             mem, tasks, TASK_LIMITS_WATCH_MS, TASK_LIMITS_WATCH_ROOT_MS,
                                             why ? why : "no writable cgroup v2");
                return strdup_printf("%s in the sandbox, held by the kernel (RLIMIT_NPROC in its own user namespace); "
                                     "%s in all, counted by taskferry every %d ms, so a burst can pass it briefly (%s)",
                                     tasks, mem, TASK_LIMITS_WATCH_MS, why ? why : "no writable cgroup v2");
        default: return NULL;
        }
}

uint64_t task_limits_tmp_size(uint64_t disk_budget, uint64_t memory_max) {
        if (!disk_budget) return memory_max;
        if (!memory_max) return disk_budget;
        return disk_budget < memory_max ? disk_budget : memory_max;
}
