/* Benchmark (figures only, never a pass/fail timing): a sandboxed launch,
 * from `task.dispatch` on the daemon's socket to the worker's first
 * instruction, with the overlay, beside the bare bwrap floor (goal: within
 * floor + 8 ms, alike with 2,000 and with 60,000 entries under /opt).
 *
 *   build/dev/tests/bench-launch [RUNS [ENTRIES...]]   (default 15 runs; 2000 60000)
 *
 * The worker is a `shell` task whose script execs tf-stamp (the test
 * helper that writes CLOCK_MONOTONIC of its own first instruction into the
 * task's output dir); the floor is `bwrap` with a read-only /, /dev, /proc
 * and every namespace unshared, exec'ing the same `sh -c 'exec tf-stamp'`,
 * timed from fork to the stamp. Each ENTRIES count is a scratch tree under
 * /opt (ENTRIES files and dirs, 20 files a dir: an npm install's shape),
 * made before its runs and removed after; as a user who may not write /opt,
 * the runs see /opt as it is. The shim's timing points
 * (TASKFERRY_SHIM_TIMES=1, shim/main.c) split each launch into its steps:
 * daemon (dispatch request to the shim's first instruction: the request,
 * the plan, the spawn), spec, homes, HEAD, base snapshot, masks, argv, fork
 * to the worker child's user namespace, overlay mount, masks mount, bwrap
 * exec, and bwrap to the worker's first instruction; medians in ms. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"

static int runs = 15;
static int sizes[8] = {2000, 60000};
static int n_sizes = 2;

static const char *const step_names[] = {"spec-read", "homes",  "head",   "base-snapshot", "masks",
                                         "argv",      "userns", "overlay-mount", "masks-mount", "exec"};
#define N_STEPS ELEMENTSOF(step_names)

/* the stamp tf-stamp wrote (CLOCK_MONOTONIC ns) in ms, or -1 while absent */
static double read_stamp(const char *path) {
        FILE *f = fopen(path, "re");
        if (!f) return -1;
        long long ns = -1;
        if (fscanf(f, "%lld", &ns) != 1) ns = -1;
        fclose(f);
        return ns < 0 ? -1 : (double) ns / 1e6;
}

static double wait_stamp(const char *path, int timeout_ms) {
        double end = tf_clock_ms() + timeout_ms;
        while (tf_clock_ms() < end) {
                double t = read_stamp(path);
                if (t >= 0) return t;
                struct timespec ts = {0, 200000};
                nanosleep(&ts, NULL);
        }
        return -1;
}

/* The floor: fork, exec bwrap, the worker's first instruction. */
static double floor_once(tf_world *w, const char *bwrap, int i) {
        _cleanup_free_ char *stamp = strdup_printf("%s/floor-%d.stamp", w->root, i);
        _cleanup_free_ char *script = strdup_printf("exec tf-stamp %s", stamp);
        _cleanup_free_ char *path_env = strdup_printf("PATH=%s/bin:/usr/bin:/bin", w->fixtures);
        char *argv[] = {(char *) bwrap, (char *) "--ro-bind", (char *) "/", (char *) "/", (char *) "--dev",
                        (char *) "/dev", (char *) "--proc", (char *) "/proc", (char *) "--bind", w->root, w->root,
                        (char *) "--unshare-all", (char *) "--die-with-parent", (char *) "--", (char *) "sh",
                        (char *) "-c", script, NULL};
        char *envp[] = {path_env, NULL};
        double t0 = tf_clock_ms();
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                execve(bwrap, argv, envp);
                _exit(127);
        }
        double t1 = wait_stamp(stamp, 10000);
        int status = 0;
        (void) waitpid(pid, &status, 0);
        ck_assert_msg(t1 >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "bwrap floor run failed (%d)", status);
        return t1 - t0;
}

typedef struct launch_times {
        double total;          /* dispatch sent -> the worker's first instruction */
        double daemon;         /* dispatch sent -> the shim's first instruction */
        double step[N_STEPS];  /* each step: from the mark before it; -1: not reached */
        double bwrap;          /* bwrap exec -> the worker's first instruction */
} launch_times;

/* the shim's marks of a task: step -> CLOCK_MONOTONIC ms */
static void read_marks(tf_world *w, const char *id, double t0, double stamp, launch_times *lt) {
        _cleanup_free_ char *path = strdup_printf("%s/tasks/%s/launch-times", w->state, id);
        FILE *f = fopen(path, "re");
        ck_assert_msg(f, "no %s: is the shim built with its timing points?", path);
        char name[64];
        uint64_t us;
        double prev = -1;
        for (size_t i = 0; i < N_STEPS; i++) lt->step[i] = -1;
        while (fscanf(f, "%63s %" SCNu64, name, &us) == 2) {
                double t = (double) us / 1e3;
                if (streq(name, "shim-start")) {
                        lt->daemon = t - t0;
                        prev = t;
                        continue;
                }
                for (size_t i = 0; i < N_STEPS; i++)
                        if (streq(name, step_names[i])) lt->step[i] = prev >= 0 ? t - prev : -1;
                prev = t;
        }
        fclose(f);
        lt->bwrap = prev >= 0 ? stamp - prev : -1;
}

static void launch_once(tf_world *w, const char *repo, int i, launch_times *lt) {
        _cleanup_free_ char *req = strdup_printf(
                "{\"version\":1,\"id\":\"bench-%d\",\"method\":\"task.dispatch\",\"params\":{\"executor\":\"shell\","
                "\"directory\":\"%s\",\"prompt\":\"exec tf-stamp \\\"$TASKFERRY_OUTPUT_DIR/stamp\\\"\"}}",
                i, repo);
        int fd = tf_connect(w);
        double t0 = tf_clock_ms();
        tf_send(fd, req);
        _cleanup_free_ char *line = tf_recv_line(fd, 30000);
        close(fd);
        ck_assert_msg(line && strstr(line, "\"ok\":true"), "dispatch failed: %s", strnull(line));
        json_object *frame = tf_json(line);
        const char *rid = tf_jstr(tf_result(frame), "id");
        ck_assert_msg(rid, "no task id in %s", line);
        _cleanup_free_ char *id = strdup(rid);
        json_object_put(frame);
        double stamp = wait_stamp(tf_output_path(w, id, "stamp"), 30000);
        json_object *st = tf_wait_settled(w, id);
        ck_assert_msg(stamp >= 0, "task %s never ran its worker: %s", id, json_object_to_json_string(st));
        json_object_put(st);
        lt->total = stamp - t0;
        read_marks(w, id, t0, stamp, lt);
}

static int cmp_d(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

static double med_of(double *v, int n) {
        qsort(v, (size_t) n, sizeof *v, cmp_d);
        return v[n / 2];
}

/* a scratch tree of n entries under /opt (20 files a dir); its path, or NULL
 * when /opt is not ours to write */
static char *opt_tree(int n) {
        _cleanup_free_ char *root = strdup_printf("/opt/tf-bench-launch-%d-%d", (int) getpid(), n);
        if (mkdir(root, 0755) < 0) return NULL;
        int made = 0;
        for (int d = 0; made < n; d++) {
                _cleanup_free_ char *dir = strdup_printf("%s/pkg%d", root, d);
                ck_assert_int_eq(mkdir(dir, 0755), 0);
                made++;
                for (int f = 0; f < 20 && made < n; f++, made++) {
                        _cleanup_free_ char *file = strdup_printf("%s/f%d.js", dir, f);
                        int fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                        ck_assert_int_ge(fd, 0);
                        close(fd);
                }
        }
        return TAKE_PTR(root);
}

static void opt_tree_remove(const char *root) {
        if (!root) return;
        _cleanup_free_ char *q = shell_quote(root);
        _cleanup_free_ char *cmd = strdup_printf("rm -rf %s", q);
        ck_assert_int_eq(system(cmd), 0);
}

static size_t count_entries(const char *root) {
        _cleanup_free_ char *cmd = strdup_printf("find %s 2>/dev/null | wc -l", root);
        FILE *p = popen(cmd, "r");
        size_t n = 0;
        if (p && fscanf(p, "%zu", &n) != 1) n = 0;
        if (p) pclose(p);
        return n;
}

static void report_size(const char *label, launch_times *lt, int n, double floor_ms) {
        double *v = calloc((size_t) n, sizeof *v);
        ck_assert_ptr_nonnull(v);
        for (int i = 0; i < n; i++) v[i] = lt[i].total;
        double total = med_of(v, n);
        double lo = v[0], hi = v[n - 1];
        printf("bench-launch: %s: dispatch -> first instruction  min %.2f  median %.2f  max %.2f ms   "
               "floor + %.2f ms (goal <= floor + 8 ms)\n",
               label, lo, total, hi, total - floor_ms);
        for (int i = 0; i < n; i++) v[i] = lt[i].daemon;
        printf("bench-launch:   %-16s %7.3f ms\n", "daemon", med_of(v, n));
        for (size_t s = 0; s < N_STEPS; s++) {
                int k = 0;
                for (int i = 0; i < n; i++)
                        if (lt[i].step[s] >= 0) v[k++] = lt[i].step[s];
                if (k) printf("bench-launch:   %-16s %7.3f ms\n", step_names[s], med_of(v, k));
        }
        for (int i = 0; i < n; i++) v[i] = lt[i].bwrap;
        printf("bench-launch:   %-16s %7.3f ms\n", "bwrap -> worker", med_of(v, n));
        free(v);
        fflush(stdout);
}

START_TEST(bench) {
        char *extra[] = {(char *) "TASKFERRY_SHIM_TIMES=1", NULL};
        tf_world *w = tf_world_new(extra);
        _cleanup_free_ char *repo = tf_repo_new(w, NULL, NULL);
        tf_daemon_start(w);
        _cleanup_free_ char *bwrap = tf_shf(w, NULL, "command -v bwrap");
        printf("bench-launch: %d runs each as uid %u; /opt and /etc hold %zu entries\n", runs, (unsigned) getuid(),
               count_entries("/opt") + count_entries("/etc"));

        double *fl = calloc((size_t) runs, sizeof *fl);
        launch_times *lt = calloc((size_t) runs, sizeof *lt);
        ck_assert(fl && lt);
        for (int i = -3; i < runs; i++) {
                double t = floor_once(w, bwrap, i + 3);
                if (i >= 0) fl[i] = t;
        }
        double floor_ms = med_of(fl, runs);
        printf("bench-launch: bare bwrap floor (fork -> first instruction)  min %.2f  median %.2f  max %.2f ms\n",
               fl[0], floor_ms, fl[runs - 1]);
        for (int k = -1; k < n_sizes; k++) {
                /* k = -1: /opt as it is */
                _cleanup_free_ char *tree = k >= 0 ? opt_tree(sizes[k]) : NULL;
                if (k >= 0 && !tree) {
                        printf("bench-launch: cannot write /opt (%s): no run with %d more entries\n", strerror(errno),
                               sizes[k]);
                        continue;
                }
                launch_times warm;
                launch_once(w, repo, 1000 + k, &warm);
                for (int i = 0; i < runs; i++) launch_once(w, repo, i, &lt[i]);
                _cleanup_free_ char *label = k >= 0 ? strdup_printf("+%d entries under /opt", sizes[k])
                                                    : strdup("/opt as it is");
                report_size(label, lt, runs, floor_ms);
                opt_tree_remove(tree);
        }
        free(fl), free(lt);
        tf_world_free(w);
}
END_TEST

int main(int argc, char **argv) {
        if (argc > 1) runs = atoi(argv[1]);
        if (runs < 3) runs = 3;
        if (argc > 2) {
                n_sizes = 0;
                for (int i = 2; i < argc && n_sizes < (int) ELEMENTSOF(sizes); i++) sizes[n_sizes++] = atoi(argv[i]);
        }
        Suite *s = suite_create("bench-launch");
        TCase *tc = tcase_create("bench");
        tcase_set_timeout(tc, 3600);
        tcase_add_test(tc, bench);
        suite_add_tcase(s, tc);
        return tf_run_suite(s);
}
