/* scope.c (transient scope units, scope.h) and cgroup-util.c: the unit
 * names, the limits a task's scope gets, and the mapping of what systemd
 * and the kernel report for a scope to failureReason "oom_killed" — over
 * recorded memory.events contents and Result property values (the cgroup v1
 * hybrid hosts CI runs on enforce no memory limit, so the real OOM kill is
 * only seen by the e2e case where the memory controller is delegated). */

#include <check.h>
#include <stdlib.h>

#include "cgroup-util.h"
#include "daemon-fixture.h"
#include "daemon.h"
#include "json-util.h"
#include "run/scope.h"
#include "unit.h"
#include "macro.h"

/* recorded from a scope with MemoryMax=64M whose worker allocated past it
 * (kernel 6.1, cgroup v2), and from one that never came near it */
static const char events_oom[] = "low 0\nhigh 0\nmax 1893\noom 1\noom_kill 1\noom_group_kill 0\n";
static const char events_quiet[] = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n";
/* an older kernel: no oom_group_kill line */
static const char events_old[] = "low 0\nhigh 7\nmax 2\noom 2\noom_kill 2\n";

START_TEST(memory_events_oom_kill_count) {
        uint64_t v = 99;
        ck_assert_int_eq(cgroup_memory_events_oom_kills(events_oom, &v), 0);
        ck_assert_uint_eq(v, 1);
        ck_assert_int_eq(cgroup_memory_events_oom_kills(events_quiet, &v), 0);
        ck_assert_uint_eq(v, 0);
        ck_assert_int_eq(cgroup_memory_events_oom_kills(events_old, &v), 0);
        ck_assert_uint_eq(v, 2);
        /* oom_group_kill is not oom_kill; the last line needs no newline */
        ck_assert_int_eq(cgroup_memory_events_oom_kills("oom_group_kill 5\noom_kill 3", &v), 0);
        ck_assert_uint_eq(v, 3);
        ck_assert_int_eq(cgroup_memory_events_oom_kills("oom_group_kill 5\n", &v), -ENOENT);
        ck_assert_int_eq(cgroup_memory_events_oom_kills("", &v), -ENOENT);
        ck_assert_int_eq(cgroup_memory_events_oom_kills(NULL, &v), -ENOENT);
        ck_assert_int_eq(cgroup_memory_events_oom_kills("oom_kill x\n", &v), -EINVAL);
        ck_assert_int_eq(cgroup_memory_events_oom_kills("oom_kill 1x\n", &v), -EINVAL);
        ck_assert_int_eq(cgroup_memory_events_oom_kills("oom_kill 99999999999999999999999\n", &v), -EINVAL);
}
END_TEST

START_TEST(oom_verdict_from_memory_events_and_result) {
        const char *unit = "taskferry-task-oc_abc.scope";
        uint64_t kills = 0;
        _cleanup_free_ char *d1 = NULL, *d2 = NULL, *d3 = NULL, *d4 = NULL;
        /* memory.events said so (systemd 252 has no OOM result for scopes) */
        ck_assert_int_eq(cgroup_memory_events_oom_kills(events_oom, &kills), 0);
        ck_assert(scope_oom_verdict(unit, "success", (int64_t) kills, UINT64_C(64) << 20, &d1));
        ck_assert_ptr_nonnull(strstr(d1, unit));
        ck_assert_ptr_nonnull(strstr(d1, "MemoryMax=64.0 MiB"));
        ck_assert_ptr_nonnull(strstr(d1, "1 process killed"));
        /* systemd said so (Result=oom-kill, systemd >= 253 with OOMPolicy) */
        ck_assert(scope_oom_verdict(unit, "oom-kill", -1, UINT64_C(2) << 30, &d2));
        ck_assert_ptr_nonnull(strstr(d2, "MemoryMax=2.0 GiB"));
        ck_assert_ptr_nonnull(strstr(d2, "Result=oom-kill"));
        ck_assert(scope_oom_verdict(unit, NULL, 3, 0, &d3));
        ck_assert_ptr_nonnull(strstr(d3, "3 processes killed"));
        ck_assert_ptr_nonnull(strstr(d3, "MemoryMax=unknown"));
        /* nothing was OOM-killed: no verdict, whatever else failed */
        ck_assert_int_eq(cgroup_memory_events_oom_kills(events_quiet, &kills), 0);
        ck_assert(!scope_oom_verdict(unit, "success", (int64_t) kills, UINT64_C(64) << 20, &d4));
        ck_assert(!scope_oom_verdict(unit, "exit-code", 0, UINT64_C(64) << 20, &d4));
        ck_assert(!scope_oom_verdict(unit, "signal", -1, 0, &d4));
        ck_assert(!scope_oom_verdict(unit, NULL, -1, 0, &d4));
        ck_assert_ptr_null(d4);
}
END_TEST

START_TEST(unit_names) {
        _cleanup_free_ char *a = scope_unit_name("oc_mabc12-x.y:z");
        ck_assert_str_eq(a, "taskferry-task-oc_mabc12-x.y:z.scope");
        static const char *const bad[] = {"", "a/b", "a b", "a\\b", "../x", "ü", "a\nb"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) ck_assert_ptr_null(scope_unit_name(bad[i]));
        char longid[300];
        memset(longid, 'a', sizeof longid - 1);
        longid[sizeof longid - 1] = 0;
        ck_assert_ptr_null(scope_unit_name(longid));
        ck_assert_ptr_null(scope_unit_name(NULL));
}
END_TEST

static Manager m;

static void setup(void) {
        tf_manager_setup(&m, "test-scope");
        m.settings.task_memory_max = UINT64_C(8) << 30;
        m.settings.task_tasks_max = 4096;
        m.settings.task_cpu_weight = 100;
}

static void teardown(void) { tf_manager_teardown(&m); }

static Task *task_json(const char *s) { return tf_task(&m, s); }

static void set_launch(Task *t, const char *s) {
        json_object *o = NULL;
        ck_assert_int_eq(json_parse_strict(s, strlen(s), &o), 0);
        launch_options_done(&t->launch);
        ck_assert_int_eq(launch_options_from_json(o, &t->launch), 0);
        json_object_put(o);
}

/* the record's unit is only ever the task's own scope */
START_TEST(unit_of_trusts_only_the_own_name) {
        Task *t = task_json("{\"id\":\"oc_a\",\"status\":\"running\",\"unit\":\"taskferry-task-oc_a.scope\"}");
        ck_assert_str_eq(scope_unit_of(t), "taskferry-task-oc_a.scope");
        Task *o = task_json("{\"id\":\"oc_b\",\"status\":\"running\",\"unit\":\"taskferry-task-oc_a.scope\"}");
        ck_assert_ptr_null(scope_unit_of(o));
        Task *u = task_json("{\"id\":\"oc_c\",\"status\":\"running\",\"unit\":\"taskferry.service\"}");
        ck_assert_ptr_null(scope_unit_of(u));
        Task *v = task_json("{\"id\":\"oc_d\",\"status\":\"running\",\"unit\":\"taskferry-task-oc_d.scope.x\"}");
        ck_assert_ptr_null(scope_unit_of(v));
        Task *w = task_json("{\"id\":\"oc_e\",\"status\":\"running\"}");
        ck_assert_ptr_null(scope_unit_of(w));
}
END_TEST

/* defaults, the dispatch's own, and a nested dispatch capped at its parent's */
START_TEST(limits_defaults_dispatch_and_nested_cap) {
        ScopeLimits l;
        Task *a = task_json("{\"id\":\"oc_p\",\"status\":\"running\"}");
        scope_limits_for(a, &l);
        ck_assert_uint_eq(l.memory_max, UINT64_C(8) << 30);
        ck_assert_uint_eq(l.memory_high, (UINT64_C(8) << 30) / 10 * 9);
        ck_assert_uint_eq(l.tasks_max, 4096);
        ck_assert_uint_eq(l.cpu_weight, 100);
        int64_t v = 0;
        ck_assert(task_record_get_int(&a->rec, TASK_KEY_memory_max, &v) && v == (int64_t) (UINT64_C(8) << 30));

        Task *b = task_json("{\"id\":\"oc_q\",\"status\":\"running\"}");
        set_launch(b, "{\"memoryMax\":67108864,\"tasksMax\":64}");
        scope_limits_for(b, &l);
        ck_assert_uint_eq(l.memory_max, 67108864);
        ck_assert_uint_eq(l.tasks_max, 64);
        ck_assert(task_record_get_int(&b->rec, TASK_KEY_tasks_max, &v) && v == 64);

        /* dispatched by b: inherits b's smaller limits instead of the defaults */
        Task *c = task_json("{\"id\":\"oc_r\",\"status\":\"running\",\"dispatchedBy\":\"oc_q\"}");
        scope_limits_for(c, &l);
        ck_assert_uint_eq(l.memory_max, 67108864);
        ck_assert_uint_eq(l.tasks_max, 64);
        /* and asking for more (dispatch_check_limits refuses it; a stale request too) gets no more */
        Task *d = task_json("{\"id\":\"oc_s\",\"status\":\"running\",\"dispatchedBy\":\"oc_q\"}");
        set_launch(d, "{\"memoryMax\":1073741824,\"tasksMax\":5000}");
        scope_limits_for(d, &l);
        ck_assert_uint_eq(l.memory_max, 67108864);
        ck_assert_uint_eq(l.tasks_max, 64);
        /* asking for less is fine */
        Task *e = task_json("{\"id\":\"oc_t\",\"status\":\"running\",\"dispatchedBy\":\"oc_q\"}");
        set_launch(e, "{\"memoryMax\":33554432}");
        scope_limits_for(e, &l);
        ck_assert_uint_eq(l.memory_max, 33554432);
        ck_assert_uint_eq(l.tasks_max, 64);
}
END_TEST

int main(void) {
        Suite *s = suite_create("scope");
        tf_tcase(s, "pure", NULL, NULL, 0, TF_TESTS(memory_events_oom_kill_count,
                oom_verdict_from_memory_events_and_result, unit_names));
        tf_tcase(s, "tasks", setup, teardown, 0, TF_TESTS(unit_of_trusts_only_the_own_name,
                limits_defaults_dispatch_and_nested_cap));
        return tf_run_suite(s);
}
