/* The harness itself: however a case ends, it leaves no process and no
 * directory of its worlds behind, and a failed settle assertion says how
 * the task ended.
 *
 * The suite runs itself again (TF_HARNESS_INNER=<file>) as an inner suite
 * whose cases end every way a case can while a task of theirs runs: a
 * failed assertion, a timeout, a failure in a world whose daemon the case
 * started itself, and a clean tf_world_free(). Each inner case writes its
 * world's root to <file>; the outer case then checks that each root is gone
 * and that no process names it, and reads what the inner suite printed. */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"
#include "world-teardown.h"

/* ---- the inner suite ---- */

static tf_world *inner_world(void) {
        tf_world *w = tf_world_new(NULL);
        FILE *f = fopen(getenv("TF_HARNESS_INNER"), "a");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "%s\n", w->root);
        fclose(f);
        return w;
}

static char *inner_repo(tf_world *w) {
        char *repo = strdup(tf_path(w->repo_parent, "repo"));
        free(tf_shf(w, NULL, "set -e; mkdir -p %s && cd %s && git init -q && echo a > a && git add -A && git commit -qm i",
                    repo, repo));
        return repo;
}

static bool is_running(tf_world *w, void *id) {
        const char *argv[] = {"status", id, "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        bool running = r.exit_code == 0 && strstr(r.out, "\"status\":\"running\"");
        tf_run_done(&r);
        return running;
}

/* a shell task that runs until it is killed, running when this returns */
static char *inner_running_task(tf_world *w, const char *repo) {
        const char *argv[] = {"--executor", "shell", "--directory", repo, "--prompt", "sleep 1000", NULL};
        char *id = tf_dispatch(w, argv);
        ck_assert_msg(tf_wait_until(is_running, w, id, 60000), "task %s never ran", id);
        return id;
}

START_TEST(inner_fails) {
        tf_world *w = inner_world();
        _cleanup_free_ char *repo = inner_repo(w);
        _cleanup_free_ char *running = inner_running_task(w, repo);
        const char *argv[] = {"--executor", "shell", "--directory", repo, "--prompt", "exit 3", NULL};
        _cleanup_free_ char *id = tf_dispatch(w, argv);
        json_object *st = tf_wait_settled(w, id);
        tf_assert_status(st, id, "done"); /* it crashed: the case ends here */
        ck_abort_msg("not reached");
}
END_TEST

START_TEST(inner_times_out) {
        tf_world *w = inner_world();
        _cleanup_free_ char *repo = inner_repo(w);
        _cleanup_free_ char *running = inner_running_task(w, repo);
        for (;;) pause(); /* until Check's timeout SIGKILLs the case */
}
END_TEST

START_TEST(inner_own_daemon_fails) {
        tf_world *w = inner_world();
        tf_daemon_start(w);
        _cleanup_free_ char *repo = inner_repo(w);
        _cleanup_free_ char *running = inner_running_task(w, repo);
        ck_abort_msg("failing on purpose with daemon %d running", (int) w->daemon_pid);
}
END_TEST

START_TEST(inner_frees) {
        tf_world *w = inner_world();
        _cleanup_free_ char *repo = inner_repo(w);
        _cleanup_free_ char *running = inner_running_task(w, repo);
        tf_world_free(w); /* the task still runs: its shim and worker go too */
}
END_TEST

static int inner_main(void) {
        Suite *s = suite_create("harness-inner");
        TCase *tc = tcase_create("ends");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, inner_fails);
        tcase_add_test(tc, inner_own_daemon_fails);
        tcase_add_test(tc, inner_frees);
        suite_add_tcase(s, tc);
        /* long enough to dispatch and run a task on a loaded machine, then
         * the case is SIGKILLed */
        TCase *slow = tcase_create("timeout");
        tcase_set_timeout(slow, 30);
        tcase_add_test(slow, inner_times_out);
        suite_add_tcase(s, slow);
        return tf_run_suite(s);
}

/* ---- the outer suite ---- */

START_TEST(failed_cases_leave_nothing) {
        tf_world *w = tf_world_new(NULL);
        _cleanup_free_ char *roots_file = strdup(tf_path(w->root, "inner-roots"));
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        ck_assert_int_gt(n, 0);
        self[n] = 0;
        _cleanup_free_ char *qs = shell_quote(self), *qf = shell_quote(roots_file);
        _cleanup_free_ char *script = strdup_printf("TF_HARNESS_INNER=%s exec %s", qf, qs);
        /* the guards hold the inner suite's stderr: tf_sh returns once they
         * all did their work */
        tf_run r = tf_sh(w, NULL, script, true);
        printf("---- the inner suite (exit %d):\n%s%s----\n", r.exit_code, r.out, r.err);
        fflush(stdout);
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert_msg(strstr(r.out, "Checks: 4, Failures: 2, Errors: 1"), "%s", r.out);
        /* the settle assertion names the caller's line and how the task ended */
        ck_assert_msg(strstr(r.out, "test-harness.c:") && strstr(r.out, ":F:ends:inner_fails:"), "%s", r.out);
        ck_assert_msg(strstr(r.out, "want status done, got status crashed, failureReason ") &&
                              strstr(r.out, ", failureDetail ") && strstr(r.out, ", spawnError "),
                      "%s", r.out);

        _cleanup_free_ char *roots = tf_read(roots_file, NULL);
        size_t count = 0;
        char *save = NULL;
        for (char *root = strtok_r(roots, "\n", &save); root; root = strtok_r(NULL, "\n", &save), count++) {
                ck_assert_msg(!tf_exists(root), "%s is still there", root);
                _cleanup_free_ char *names = NULL;
                ck_assert_msg(tf_world_kill_all(root, &names) == 0, "processes of %s still ran: %s", root, names);
                /* the guard spoke for the three that were not freed: how
                 * their tasks ended, and that one still ran */
                bool freed = count == 2; /* inner_frees, third in order */
                _cleanup_free_ char *note = strdup_printf("without freeing its world %s ", root);
                ck_assert_msg(!strstr(r.err, note) == freed, "guard note for %s (freed: %d):\n%s", root, freed, r.err);
        }
        ck_assert_uint_eq(count, 4);
        ck_assert_msg(strstr(r.err, "status crashed") && strstr(r.err, "1 task(s) still queued or running"), "%s", r.err);
        ck_assert_msg(strstr(r.err, "taskferry-shim["), "%s", r.err);
        tf_run_done(&r);
        tf_world_free(w);
}
END_TEST

int main(void) {
        if (getenv("TF_HARNESS_INNER")) return inner_main();
        Suite *s = suite_create("harness");
        TCase *tc = tcase_create("main");
        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, failed_cases_leave_nothing);
        suite_add_tcase(s, tc);
        return tf_run_suite(s);
}
