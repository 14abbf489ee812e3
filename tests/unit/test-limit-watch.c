/* limit-watch.c, the shim's side of a task's limits, on real processes:
 * the tree count (by parent pids), the rlimit a worker child gets, the
 * checks that stop a worker at its tasks or memory limit, and the log's
 * last words naming a refused fork. */

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "limit-watch.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"
#include "unit.h"

/* A child that starts n sleeping children of its own and then sleeps,
 * holding hold_bytes of touched memory; its pid. */
static pid_t tree(int n, size_t hold_bytes) {
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(p[0]);
                for (int i = 0; i < n; i++)
                        if (fork() == 0) {
                                close(p[1]);
                                pause();
                                _exit(0);
                        }
                if (hold_bytes) {
                        char *m = mmap(NULL, hold_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                        if (m == MAP_FAILED) _exit(1);
                        memset(m, 1, hold_bytes);
                }
                (void) !write(p[1], "x", 1);
                pause();
                _exit(0);
        }
        close(p[1]);
        char c;
        ck_assert_int_eq(read(p[0], &c, 1), 1);
        close(p[0]);
        return pid;
}

static void end_tree(pid_t pid) {
        /* the children first: their parent's death would leave them to init */
        _cleanup_free_ char *cmd = strdup_printf("pkill -KILL -P %d", (int) pid);
        (void) !system(cmd);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
}

START_TEST(tree_count) {
        pid_t pid = tree(5, 32 << 20);
        uint64_t tasks = 0, rss = 0;
        ck_assert_int_eq(proc_tree_measure(pid, 1000, &tasks, &rss), 0);
        ck_assert_uint_eq(tasks, 6);
        ck_assert_uint_ge(rss, 32 << 20);
        /* a bound on what is counted */
        ck_assert_int_eq(proc_tree_measure(pid, 2, &tasks, &rss), 0);
        ck_assert_uint_le(tasks, 3);
        /* a child is a tree of its own */
        pid_t kid = proc_first_child(pid);
        ck_assert_int_gt(kid, 0);
        ck_assert_int_eq(proc_tree_measure(kid, 1000, &tasks, &rss), 0);
        ck_assert_uint_eq(tasks, 1);
        ck_assert_int_lt(proc_sandbox_pid(pid), 0); /* not a sandbox: its root is ours */
        end_tree(pid);
        ck_assert_int_eq(proc_tree_measure(pid, 1000, &tasks, &rss), -ENOENT);
}
END_TEST

static limit_watch rlimit_watch(uint64_t mem, uint64_t tasks) {
        launch_limits l = {.memory_max = mem, .tasks_max = tasks};
        limit_watch w;
        char *note = NULL;
        /* a cgroup root with no controllers: rlimits */
        char *root = tf_tmpdir_new("tf-limit-watch");
        ck_assert_int_eq(limit_watch_prepare(&w, &l, "oc_test_1", root, &note), 0);
        ck_assert_ptr_null(note);
        tf_tmpdir_free(root);
        ck_assert_int_eq(w.mode, TASK_LIMITS_RLIMIT);
        return w;
}

START_TEST(no_limits_no_watch) {
        limit_watch w;
        char *note = NULL;
        ck_assert_int_eq(limit_watch_prepare(&w, NULL, "oc_test_1", NULL, &note), 0);
        ck_assert_int_eq(w.mode, _TASK_LIMITS_MODE_INVALID);
        limit_watch_start(&w, getpid(), 0);
        ck_assert_int_eq(limit_watch_timeout(&w, 0), -1);
        ck_assert(!limit_watch_needs_userns(&w));
        ck_assert_int_eq(limit_watch_set_rlimits(&w), 0);
        limit_watch_done(&w);
}
END_TEST

/* In a child: RLIMIT_NPROC at the tasks limit unless root, not raisable;
 * no limit on address space (a runtime's reservations are not memory). */
START_TEST(rlimits_in_the_child) {
        limit_watch w = rlimit_watch(64 << 20, 100);
        ck_assert(limit_watch_needs_userns(&w) == (geteuid() != 0));
        struct rlimit data0;
        ck_assert_int_eq(getrlimit(RLIMIT_DATA, &data0), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (limit_watch_set_rlimits(&w) < 0) _exit(10);
                struct rlimit rl;
                if (getrlimit(RLIMIT_NPROC, &rl) < 0) _exit(12);
                if (geteuid() != 0 && (rl.rlim_cur != 100 || rl.rlim_max != 100)) _exit(13);
                if (getrlimit(RLIMIT_DATA, &rl) < 0 || rl.rlim_cur != data0.rlim_cur) _exit(14);
                rl.rlim_cur = rl.rlim_max = 1000;
                if (geteuid() != 0 && setrlimit(RLIMIT_NPROC, &rl) == 0) _exit(15);
                _exit(0);
        }
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d", WEXITSTATUS(st));
        w.no_nproc = true;
        ck_assert(!limit_watch_needs_userns(&w));
        limit_watch_done(&w);
}
END_TEST

static int check_now(limit_watch *w, const char **reason, char **detail) {
        return limit_watch_check(w, mono_ms() + 1000000, reason, detail);
}

/* The count stops a worker at its tasks limit and past its memory limit. */
START_TEST(check_trips) {
        limit_watch w = rlimit_watch(16 << 20, 8);
        pid_t pid = tree(9, 0);
        limit_watch_start(&w, pid, mono_ms());
        ck_assert_int_eq(limit_watch_timeout(&w, mono_ms()), 0);
        const char *reason = NULL;
        char *detail = NULL;
        ck_assert_int_eq(check_now(&w, &reason, &detail), 1);
        ck_assert_str_eq(reason, TASK_LIMITS_TASKS_REASON);
        ck_assert_msg(strstr(detail, "limit of 8 processes and threads (10 counted"), "%s", detail);
        ck_assert_uint_eq(w.peak_tasks, 10);
        free(detail);
        /* once */
        ck_assert_int_eq(check_now(&w, &reason, &detail), 0);
        ck_assert_int_eq(limit_watch_timeout(&w, 0), -1);
        end_tree(pid);
        limit_watch_done(&w);

        w = rlimit_watch(16 << 20, 8);
        pid = tree(1, 64 << 20);
        limit_watch_start(&w, pid, mono_ms());
        ck_assert_int_eq(check_now(&w, &reason, &detail), 1);
        ck_assert_str_eq(reason, TASK_LIMITS_MEMORY_REASON);
        ck_assert_msg(strstr(detail, "over its memory limit of 16.0 MiB"), "%s", detail);
        free(detail);
        end_tree(pid);
        limit_watch_done(&w);

        /* within both: nothing, and the next check later */
        w = rlimit_watch(256 << 20, 8);
        pid = tree(2, 1 << 20);
        uint64_t now = mono_ms();
        limit_watch_start(&w, pid, now);
        ck_assert_int_eq(limit_watch_check(&w, now, &reason, &detail), 0);
        ck_assert_int_ge(limit_watch_timeout(&w, now), geteuid() == 0 ? TASK_LIMITS_WATCH_ROOT_MS : TASK_LIMITS_WATCH_MS);
        ck_assert_uint_eq(w.peak_tasks, 3);
        end_tree(pid);
        limit_watch_done(&w);
}
END_TEST

/* A worker whose log ends naming a refused fork ran into RLIMIT_NPROC,
 * however it ended, where that binds (not for root). */
START_TEST(final_words) {
        char *dir = tf_tmpdir_new("tf-limit-watch");
        _cleanup_free_ char *log = strdup_printf("%s/log", dir);
        static const struct {
                const char *text;
                bool fork;
        } cases[] = {
                {"/tmp/.taskferry-prompt: 0: Cannot fork\n", true},
                {"bash: fork: Resource temporarily unavailable\n", true},
                {"{\"type\":\"x\"}\nOut of memory!\n", false},
                {"error: no such file\n", false},
        };
        bool nproc = geteuid() != 0;
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                ck_assert_int_eq(write_file_atomic(log, cases[i].text, strlen(cases[i].text), 0600), 0);
                limit_watch w = rlimit_watch(256 << 20, 64);
                const char *reason = NULL;
                char *detail = NULL;
                bool want = cases[i].fork && nproc;
                ck_assert_msg(limit_watch_final(&w, log, &reason, &detail) == (want ? 1 : 0), "%s", cases[i].text);
                if (want) {
                        ck_assert_str_eq(reason, TASK_LIMITS_TASKS_REASON);
                        ck_assert_msg(strstr(detail, "limit of 64 processes and threads (RLIMIT_NPROC"), "%s", detail);
                }
                free(detail);
                limit_watch_done(&w);
                /* without RLIMIT_NPROC nothing refused the fork */
                w = rlimit_watch(256 << 20, 64);
                w.no_nproc = true;
                ck_assert_int_eq(limit_watch_final(&w, log, &reason, &detail), 0);
                limit_watch_done(&w);
        }
        tf_tmpdir_free(dir);
}
END_TEST

TF_MAIN("limit-watch", "watch", NULL, NULL, 60, tree_count, no_limits_no_watch, rlimits_in_the_child, check_trips,
        final_words)
