/* Benchmark (figures only, never a pass/fail timing): what a CLI call costs
 * against a running daemon, beside spawning /bin/true (goal: `status` within
 * 1.5× of /bin/true).
 *
 *   build/dev/tests/bench-cli [N]      (N runs of each, default 200)
 *
 * One isolated daemon (the integration harness) with one settled task; then
 * N × `taskferry status <id>`, N × `taskferry list` (from inside a git
 * repository: the workspace root of the cwd) and N × /bin/true, each spawned
 * with the same environment, stdout to /dev/null, timed from posix_spawn to
 * waitpid, interleaved run by run; and N raw task.status round trips on the
 * socket (connect, request, answer: the daemon's share of a status). Prints
 * min / median / max in ms and each median's ratio to /bin/true's. */

#include <check.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"

static int runs = 200;

/* One spawn of argv in cwd, timed from posix_spawn to waitpid; asserts exit 0. */
static double time_spawn(tf_world *w, const posix_spawn_file_actions_t *fa, char *const argv[]) {
        double t0 = tf_clock_ms();
        pid_t pid;
        ck_assert_int_eq(posix_spawn(&pid, argv[0], fa, NULL, argv, w->env), 0);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        double t = tf_clock_ms() - t0;
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s exited with %d", argv[0], status);
        return t;
}

/* The daemon's share: connect, one task.status request, its answer line. */
static double time_rpc(tf_world *w, const char *id, int i) {
        _cleanup_free_ char *req = strdup_printf(
                "{\"version\":1,\"id\":\"bench-%d\",\"method\":\"task.status\",\"params\":{\"taskId\":\"%s\"}}", i, id);
        double t0 = tf_clock_ms();
        int fd = tf_connect(w);
        tf_send(fd, req);
        _cleanup_free_ char *line = tf_recv_line(fd, 10000);
        double t = tf_clock_ms() - t0;
        ck_assert_msg(line && strstr(line, "\"ok\":true"), "task.status failed: %s", strnull(line));
        close(fd);
        return t;
}

static double report(const char *what, const double *t, double base) {
        double med = t[runs / 2];
        printf("bench-cli: %-24s min %7.3f  median %7.3f  max %7.3f ms", what, t[0], med, t[runs - 1]);
        if (base > 0) printf("   %.2f× /bin/true (goal ≤ 1.5×)", med / base);
        printf("\n");
        return med;
}

START_TEST(bench) {
        char *extra[] = {(char *) "TASKFERRY_DISABLE_SANDBOX=1", NULL};
        tf_world *w = tf_world_new(extra);
        tf_daemon_start(w);
        _cleanup_free_ char *repo = strdup_printf("%s/repo", w->repo_parent);
        free(tf_shf(w, NULL, "mkdir -p %s/sub && git -C %s init -q", repo, repo));
        const char *d[] = {"--executor", "shell", "--directory", repo, "--prompt", "echo hi", NULL};
        _cleanup_free_ char *id = tf_dispatch(w, d);
        json_object_put(tf_wait_settled(w, id));

        _cleanup_free_ double *t_true = calloc((size_t) runs, sizeof(double));
        _cleanup_free_ double *t_status = calloc((size_t) runs, sizeof(double));
        _cleanup_free_ double *t_list = calloc((size_t) runs, sizeof(double));
        ck_assert(t_true && t_status && t_list);
        _cleanup_free_ char *sub = strdup_printf("%s/sub", repo);
        char *true_argv[] = {(char *) "/bin/true", NULL};
        char *status_argv[] = {(char *) tf_bin("taskferry"), (char *) "status", id, NULL};
        char *list_argv[] = {(char *) tf_bin("taskferry"), (char *) "list", NULL};
        posix_spawn_file_actions_t fa;
        ck_assert_int_eq(posix_spawn_file_actions_init(&fa), 0);
        ck_assert_int_eq(posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0), 0);
        ck_assert_int_eq(posix_spawn_file_actions_addchdir_np(&fa, sub), 0);
        _cleanup_free_ double *t_rpc = calloc((size_t) runs, sizeof(double));
        ck_assert_ptr_nonnull(t_rpc);
        /* interleaved, so that the machine's load drifts alike over all four;
         * the first rounds only warm the page cache */
        for (int i = -5; i < runs; i++) {
                double ta = time_spawn(w, &fa, true_argv), tb = time_spawn(w, &fa, status_argv),
                       tc = time_spawn(w, &fa, list_argv), td = time_rpc(w, id, i);
                if (i < 0) continue;
                t_true[i] = ta, t_status[i] = tb, t_list[i] = tc, t_rpc[i] = td;
        }
        posix_spawn_file_actions_destroy(&fa);
        tf_sort_ms(t_true, (size_t) runs), tf_sort_ms(t_status, (size_t) runs), tf_sort_ms(t_list, (size_t) runs),
                tf_sort_ms(t_rpc, (size_t) runs);
        printf("bench-cli: %d runs each, one daemon, one settled task\n", runs);
        double base = report("/bin/true", t_true, 0);
        report("taskferry status <id>", t_status, base);
        report("taskferry list", t_list, base);
        printf("bench-cli: %-24s min %7.3f  median %7.3f  max %7.3f ms   (the daemon's share of status)\n",
               "task.status round trip", t_rpc[0], t_rpc[runs / 2], t_rpc[runs - 1]);
        fflush(stdout);
        tf_world_free(w);
}
END_TEST

int main(int argc, char **argv) {
        if (argc > 1) runs = atoi(argv[1]);
        if (runs < 5) runs = 5;
        Suite *s = suite_create("bench-cli");
        TCase *tc = tcase_create("bench");
        tcase_set_timeout(tc, 3600);
        tcase_add_test(tc, bench);
        suite_add_tcase(s, tc);
        return tf_run_suite(s);
}
