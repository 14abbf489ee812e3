/* Per-task resource limits (taskferryd(8) "RESOURCE
 * LIMITS") where no systemd user manager runs — the integration tests' and
 * CI's host: the limits are validated, recorded on the task and capped for
 * a nested dispatch, the worker runs in its process group (no `unit`), and
 * system.health / `taskferry doctor` say the limits are not enforced. The
 * scope itself is the e2e case tests/e2e/cases/20-scope.sh. */

#include <check.h>
#include <stdlib.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

/* a world whose user bus cannot exist: no manager, whatever the host has */
static tf_world *world_without_manager(void) {
        tf_world *w = tf_world_new(NULL);
        char *bus = strdup_printf("unix:path=%s/no-such-bus", w->root);
        tf_world_setenv(w, "DBUS_SESSION_BUS_ADDRESS", bus);
        free(bus);
        return w;
}

static int64_t jint(json_object *o, const char *key) {
        int64_t v = -1;
        ck_assert_msg(json_get_int64(o, key, &v), "no integer %s in %s", key, json_to_line(o, NULL));
        return v;
}

START_TEST(no_manager_runs_in_a_process_group_and_says_so) {
        tf_world *w = world_without_manager();
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *limits[] = {"--memory-max", "64M", "--tasks-max", "100", NULL};
        char *id = tf_shell_done(w, repo, limits, "echo hi > out.txt", NULL);
        json_object *o = tf_status_full(w, id);
        ck_assert_int_eq(jint(o, "memoryMax"), 64 << 20);
        ck_assert_int_eq(jint(o, "tasksMax"), 100);
        json_object *unit = NULL;
        ck_assert_msg(!json_object_object_get_ex(o, "unit", &unit) || !unit, "a unit without a manager: %s",
                      json_to_line(o, NULL));
        json_object_put(o);

        json_object *hf = tf_rpc(w, "task.stats", "{}"), *h = tf_result(hf);
        json_object *rl = json_get_object(h, "resourceLimits");
        ck_assert_ptr_nonnull(rl);
        ck_assert(!json_get_bool(rl, "enforced", true));
        ck_assert_ptr_nonnull(tf_jstr(rl, "reason"));
        ck_assert_int_eq(jint(rl, "tasksMax"), 4096);
        ck_assert_int_eq(jint(rl, "cpuWeight"), 100);
        ck_assert_int_gt(jint(rl, "memoryMax"), 0);
        ck_assert_str_eq(tf_jstr(rl, "slice"), "taskferry.slice");
        json_object_put(hf);

        const char *doc[] = {"doctor", NULL};
        tf_run dr = tf_cli(w, NULL, NULL, doc);
        ck_assert_int_eq(dr.exit_code, 0);
        ck_assert_msg(strstr(dr.out, "resource limits are not enforced"), "doctor: %s", dr.out);
        tf_run_done(&dr);
        free(id);
        free(repo);
        tf_world_free(w);
}
END_TEST

/* settings: TASKFERRY_TASK_* env beats config.json, which beats the default */
START_TEST(settings_from_env_and_config) {
        tf_world *w = world_without_manager();
        free(tf_shf(w, NULL, "mkdir -p %s/taskferry && printf '{\"taskMemoryMax\": \"2G\", \"taskTasksMax\": 77, "
                             "\"taskCpuWeight\": 40}' > %s/taskferry/config.json",
                    w->cfg, w->cfg));
        tf_world_setenv(w, "TASKFERRY_TASK_TASKS_MAX", "99");
        char *repo = tf_repo_new(w, NULL, NULL);
        char *id = tf_shell_settled(w, repo, NULL, "true", NULL);
        json_object *o = tf_status_full(w, id);
        ck_assert_int_eq(jint(o, "memoryMax"), INT64_C(2) << 30);
        ck_assert_int_eq(jint(o, "tasksMax"), 99);
        json_object_put(o);
        json_object *hf = tf_rpc(w, "task.stats", "{}"), *h = tf_result(hf);
        json_object *rl = json_get_object(h, "resourceLimits");
        ck_assert_int_eq(jint(rl, "cpuWeight"), 40);
        ck_assert_int_eq(jint(rl, "memoryHigh"), (INT64_C(2) << 30) / 10 * 9);
        json_object_put(hf);
        free(id);
        free(repo);
        tf_world_free(w);
}
END_TEST

START_TEST(malformed_memory_setting_fails_the_start) {
        tf_world *w = world_without_manager();
        tf_world_setenv(w, "TASKFERRY_TASK_MEMORY_MAX", "lots");
        const char *l[] = {"list", NULL};
        tf_run r = tf_cli(w, NULL, NULL, l);
        ck_assert_int_ne(r.exit_code, 0);
        ck_assert_msg(strstr(r.out, "TASKFERRY_TASK_MEMORY_MAX must be a positive size") ||
                              strstr(r.err, "TASKFERRY_TASK_MEMORY_MAX must be a positive size"),
                      "%s %s", r.out, r.err);
        tf_run_done(&r);
        tf_world_free(w);
}
END_TEST

START_TEST(limits_are_validated) {
        tf_world *w = world_without_manager();
        char *repo = tf_repo_new(w, NULL, NULL);
        /* on the command line: the minimum, a size, a count */
        static const struct {
                const char *flag, *value;
                int exit_code; /* -1: any failure */
                const char *said;
        } refused[] = {
                {"--memory-max", "1M", -1, "memoryMax must be at least"},
                {"--memory-max", "lots", 2, "--memory-max"},
                {"--tasks-max", "2", 2, "--tasks-max"},
        };
        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                const char *argv[] = {"dispatch", "--executor", "shell", "--directory", repo, "--prompt", "true",
                                      refused[i].flag, refused[i].value, NULL};
                tf_run r = tf_cli(w, NULL, NULL, argv);
                ck_assert_msg(refused[i].exit_code < 0 ? r.exit_code != 0 : r.exit_code == refused[i].exit_code,
                              "%s %s: exit %d", refused[i].flag, refused[i].value, r.exit_code);
                ck_assert_msg(strstr(r.out, refused[i].said) || strstr(r.err, refused[i].said), "%s %s", r.out, r.err);
                tf_run_done(&r);
        }
        /* over the protocol: a positive integer, and the minimum */
        char *p = strdup_printf("{\"prompt\":\"true\",\"directory\":\"%s\",\"executor\":\"shell\",\"tasksMax\":-3}", repo);
        json_object *f = tf_rpc(w, "task.dispatch", p);
        ck_assert_ptr_nonnull(json_get_object(f, "error"));
        json_object_put(f);
        free(p);
        p = strdup_printf("{\"prompt\":\"true\",\"directory\":\"%s\",\"executor\":\"shell\",\"tasksMax\":3}", repo);
        f = tf_rpc(w, "task.dispatch", p);
        json_object *e = json_get_object(f, "error");
        ck_assert_ptr_nonnull(e);
        ck_assert_msg(strstr(strempty(tf_jstr(e, "message")), "tasksMax must be at least 8"), "%s", json_to_line(f, NULL));
        json_object_put(f);
        free(p);
        free(repo);
        tf_world_free(w);
}
END_TEST

/* A hostile worker cannot dispatch its way out of its limits: asking for
 * more is refused, and without flags its nested task inherits its limits. */
START_TEST(nested_dispatch_cannot_raise_a_limit) {
        tf_world *w = world_without_manager();
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *script =
                "taskferry dispatch --executor shell --directory . --prompt true --memory-max 1G >err1 2>&1; "
                "echo more-memory=$?; sed 's/^/err1: /' err1; rm -f err1; "
                "taskferry dispatch --executor shell --directory . --prompt true --tasks-max 500 >err2 2>&1; "
                "echo more-tasks=$?; sed 's/^/err2: /' err2; rm -f err2; "
                "child=$(taskferry dispatch --executor shell --directory . --prompt true | sed -n 's/^id: //p'); "
                "echo child=$child; "
                "less=$(taskferry dispatch --executor shell --directory . --prompt true --memory-max 32M | sed -n 's/^id: //p'); "
                "echo less=$less";
        const char *limits[] = {"--memory-max", "64M", "--tasks-max", "200", NULL};
        char *msg = tf_shell_done_output(w, repo, limits, script, NULL);
        ck_assert_msg(strstr(msg, "more-memory=1\n") && strstr(msg, "more-tasks=1\n"), "worker output: %s", msg);
        ck_assert_msg(strstr(msg, "exceeds the limit of the dispatching task"), "worker output: %s", msg);
        static const struct {
                const char *tag;
                int64_t mem, tasks;
        } kids[] = {{"child=", 64 << 20, 200}, {"less=", 32 << 20, 200}};
        for (size_t i = 0; i < 2; i++) {
                char *kid = tf_value_after(msg, kids[i].tag);
                ck_assert_msg(kid && startswith(kid, "oc_"), "worker output: %s", msg);
                json_object_put(tf_wait_settled(w, kid));
                json_object *ks = tf_status_full(w, kid);
                ck_assert_int_eq(jint(ks, "memoryMax"), kids[i].mem);
                ck_assert_int_eq(jint(ks, "tasksMax"), kids[i].tasks);
                json_object_put(ks);
                free(kid);
        }
        free(msg);
        free(repo);
        tf_world_free(w);
}
END_TEST

int main(void) {
        return tf_run_tests("resource-limits", "no-manager", 240,
                            TF_TESTS(no_manager_runs_in_a_process_group_and_says_so, settings_from_env_and_config,
                                     malformed_memory_setting_fails_the_start, limits_are_validated,
                                     nested_dispatch_cannot_raise_a_limit));
}
