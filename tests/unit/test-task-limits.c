/* task-limits.c: the modes' names, the words each mode says, and the size
 * of a sandbox's tmpfs mounts. */

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "task-limits.h"
#include "unit.h"

START_TEST(mode_names) {
        for (int m = 0; m < _TASK_LIMITS_MODE_MAX; m++)
                ck_assert_int_eq(task_limits_mode_from_string(task_limits_mode_to_string((TaskLimitsMode) m)), m);
        ck_assert_str_eq(task_limits_mode_to_string(TASK_LIMITS_RLIMIT), "rlimit");
        ck_assert_int_eq(task_limits_mode_from_string("systemd"), _TASK_LIMITS_MODE_INVALID);
        ck_assert_int_eq(task_limits_mode_from_string(NULL), _TASK_LIMITS_MODE_INVALID);
        ck_assert_ptr_null(task_limits_mode_to_string(_TASK_LIMITS_MODE_MAX));
}
END_TEST

static void says(TaskLimitsMode m, bool root, uint64_t mem, uint64_t tasks, const char *where, const char *why,
                 const char *const want[]) {
        char *w = task_limits_describe(m, root, mem, tasks, where, why);
        ck_assert_ptr_nonnull(w);
        for (size_t i = 0; want[i]; i++) ck_assert_msg(strstr(w, want[i]), "\"%s\" not in \"%s\"", want[i], w);
        free(w);
}

START_TEST(words) {
        says(TASK_LIMITS_SCOPE, false, 256 << 20, 64, "taskferry-task-x.scope", NULL,
             (const char *const[]) {"memory 256.0 MiB", "64 processes and threads", "systemd scope taskferry-task-x.scope",
                                    NULL});
        says(TASK_LIMITS_CGROUP, true, 1 << 30, 4096, "/sys/fs/cgroup", NULL,
             (const char *const[]) {"memory 1.0 GiB", "4096 processes", "cgroup of its own under /sys/fs/cgroup",
                                    "memory.max, pids.max", NULL});
        says(TASK_LIMITS_RLIMIT, false, 256 << 20, 64, NULL, "no delegated cgroup v2",
             (const char *const[]) {"64 processes and threads in the sandbox, held by the kernel (RLIMIT_NPROC in its own "
                                    "user namespace)",
                                    "memory 256.0 MiB in all, counted by taskferry every 100 ms", "no delegated cgroup v2",
                                    NULL});
        /* root: no RLIMIT_NPROC, and it says so */
        says(TASK_LIMITS_RLIMIT, true, 256 << 20, 64, NULL, NULL,
             (const char *const[]) {"memory 256.0 MiB and 64 processes and threads in all, counted by taskferry",
                                    "root is exempt from RLIMIT_NPROC", "no writable cgroup v2", NULL});
        says(TASK_LIMITS_RLIMIT, false, 0, 0, NULL, NULL, (const char *const[]) {"no memory limit", "no process limit", NULL});
        ck_assert_ptr_null(task_limits_describe(_TASK_LIMITS_MODE_INVALID, false, 1, 1, NULL, NULL));
}
END_TEST

START_TEST(tmp_size) {
        ck_assert_uint_eq(task_limits_tmp_size(128 << 20, 256 << 20), 128 << 20);
        ck_assert_uint_eq(task_limits_tmp_size(10ULL << 30, 256 << 20), 256 << 20);
        ck_assert_uint_eq(task_limits_tmp_size(0, 256 << 20), 256 << 20);
        ck_assert_uint_eq(task_limits_tmp_size(128 << 20, 0), 128 << 20);
        ck_assert_uint_eq(task_limits_tmp_size(0, 0), 0);
}
END_TEST

/* The probe of this process: a mode it can hold, and a reason without a cgroup. */
START_TEST(probe_self) {
        TaskLimitsProbe p;
        ck_assert_int_eq(task_limits_probe(NULL, &p), 0);
        ck_assert(p.mode == TASK_LIMITS_CGROUP || p.mode == TASK_LIMITS_RLIMIT);
        if (p.mode == TASK_LIMITS_CGROUP) ck_assert_ptr_nonnull(p.parent);
        else ck_assert_ptr_nonnull(p.why);
        task_limits_probe_done(&p);
        ck_assert_ptr_null(p.parent);
}
END_TEST

TF_MAIN("task-limits", "limits", NULL, NULL, 0, mode_names, words, tmp_size, probe_self)
