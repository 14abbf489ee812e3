/* Benchmark (figures only, never a pass/fail timing) of the daemon core
 * against its goals, through the real taskferryd of the
 * build tree in an isolated world (tests/integration/harness):
 *
 *   - RSS of an idle daemon with an empty state            goal <= 4 MB
 *   - RSS of an idle daemon with N settled tasks            goal <= 15 MB (N = 10,000)
 *   - its peak while loading them (VmHWM)                   goal <= 1.5 x the idle RSS
 *   - dispatch + wait of a trivial `shell` worker (the CLI, end to end),
 *     median, with an empty state and with N tasks         goal <= 1.3 x growth
 *   - what the daemon writes per dispatch + wait: its write(2) bytes
 *     (/proc/<pid>/io wchar: the state files, the launch request, its
 *     socket replies), what reached the block layer (write_bytes) and what
 *     tasks.journal grew by, medians; and how often tasks.json was
 *     replaced                                              goal: about one record's size
 *   - task.list {} over them, median round trip             goal <= 1 ms
 *   - task.list {directory} over them, median round trip
 *   - task.status while 256 task.wait requests are parked:
 *     median / max round trip and SERVER_BUSY answers       goal <= 50 ms, no SERVER_BUSY
 *
 * The N records are copies of a record the daemon itself wrote for a settled
 * `shell` task (so their shape is the real one), with distinct ids, times and
 * one of 20 workspace directories.
 *
 *   build/dev/tests/bench-daemon [N]     (default 10000)
 *
 * Round trips are measured by the client over one connection, so they include
 * the socket and the JSON parse of the reply: an upper bound of the daemon's
 * own time. */

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"

#define DIRS 20
#define WAITS 256

static int n_tasks = 10000;

/* sorts v */
static double median(double *v, int n) {
        tf_sort_ms(v, (size_t) n);
        return tf_median(v, (size_t) n);
}


/* One request on an open connection; returns the reply frame. *ms: the
 * round trip (send, whole reply read and parsed); *daemon_ms: from the
 * request's first byte sent to the reply's first byte readable — the daemon's
 * own time (its parse, the method, the reply's JSON text) plus the send and
 * one wakeup. (Measured from the send's end instead, a daemon that runs the
 * moment the write wakes it, on this CPU, has answered before the clock is
 * read: the figure would be ~0.) */
static json_object *rpc_timed(int fd, const char *line, double *ms, double *daemon_ms) {
        double t0 = tf_clock_ms();
        tf_send(fd, line);
        double t1 = tf_clock_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        (void) poll(&p, 1, 30000);
        double t2 = tf_clock_ms();
        char *reply = tf_recv_line(fd, 30000);
        if (daemon_ms) *daemon_ms = t2 - t0;
        (void) t1;
        ck_assert_msg(reply, "no reply to %s", line);
        json_object *o = tf_json(reply);
        if (ms) *ms = tf_clock_ms() - t0;
        free(reply);
        return o;
}

/* A /proc/<pid>/status field in kB (-1 if unknown). */
static long status_kb(pid_t pid, const char *field) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
        FILE *f = fopen(path, "re");
        if (!f) return -1;
        char line[256];
        long kb = -1;
        size_t n = strlen(field);
        while (fgets(line, sizeof line, f))
                if (!strncmp(line, field, n) && line[n] == ':' && sscanf(line + n + 1, "%ld", &kb) == 1) break;
        fclose(f);
        return kb;
}

/* A /proc/<pid>/io counter in bytes (-1 if unknown). */
static long long io_bytes(pid_t pid, const char *field) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/io", (int) pid);
        FILE *f = fopen(path, "re");
        if (!f) return -1;
        char line[256];
        long long v = -1;
        size_t n = strlen(field);
        while (fgets(line, sizeof line, f))
                if (!strncmp(line, field, n) && line[n] == ':' && sscanf(line + n + 1, "%lld", &v) == 1) break;
        fclose(f);
        return v;
}

typedef struct DispatchCost {
        double ms;          /* median dispatch + wait */
        double wchar;       /* median bytes the daemon passed to write(2) */
        double write_bytes; /* median bytes it sent to the block layer */
        double journal;     /* median growth of tasks.journal */
        int replaced;       /* rounds in which tasks.json was replaced */
        int rounds;
} DispatchCost;

enum { DROUNDS = 15 };

/* DROUNDS dispatches of a trivial shell worker in dir, each waited for. */
static void dispatch_rounds(tf_world *w, const char *dir, DispatchCost *ret) {
        double ms[DROUNDS], wc[DROUNDS], wb[DROUNDS], jg[DROUNDS];
        const char *argv[] = {"--directory", dir, "--executor", "shell", "--no-overlay", "--prompt", "true", NULL};
        _cleanup_free_ char *path = strdup_printf("%s/tasks.json", w->state);
        _cleanup_free_ char *jpath = strdup_printf("%s/tasks.journal", w->state);
        int replaced = 0;
        for (int i = 0; i < DROUNDS; i++) {
                pid_t pid = tf_daemon_pid(w);
                struct stat st0 = {0}, st1 = {0}, j0 = {0}, j1 = {0};
                (void) stat(path, &st0);
                (void) stat(jpath, &j0);
                long long c0 = io_bytes(pid, "wchar"), b0 = io_bytes(pid, "write_bytes");
                double t0 = tf_clock_ms();
                char *id = tf_dispatch(w, argv);
                json_object_put(tf_wait_settled(w, id));
                ms[i] = tf_clock_ms() - t0;
                wc[i] = (double) (io_bytes(pid, "wchar") - c0);
                wb[i] = (double) (io_bytes(pid, "write_bytes") - b0);
                (void) stat(path, &st1);
                (void) stat(jpath, &j1);
                jg[i] = (double) (j1.st_size - j0.st_size);
                if (st1.st_ino != st0.st_ino || st1.st_mtim.tv_nsec != st0.st_mtim.tv_nsec) replaced++;
                free(id);
        }
        *ret = (DispatchCost) {.ms = median(ms, DROUNDS), .wchar = median(wc, DROUNDS), .write_bytes = median(wb, DROUNDS),
                               .journal = median(jg, DROUNDS),
                               .replaced = replaced, .rounds = DROUNDS};
}

static json_object *rpc_on(int fd, const char *line, double *ms) { return rpc_timed(fd, line, ms, NULL); }

/* The reply line on a waiter's connection (the harness keeps line buffers
 * for 64 fds only); the bytes are dropped. */
static void drain_line(int fd, int timeout_ms) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char c;
        while (poll(&p, 1, timeout_ms) > 0) {
                if (recv(fd, &c, 1, 0) != 1 || c == '\n') return;
        }
}

static void print_row(const char *what, double value, const char *unit, const char *goal) {
        printf("%-58s %10.3f %-3s  (goal %s)\n", what, value, unit, goal);
}

static long settle_rss(tf_world *w) {
        /* let start-up work (loads, sweeps, jobs) finish */
        usleep(1500 * 1000);
        return status_kb(tf_daemon_pid(w), "VmRSS");
}

START_TEST(bench) {
        tf_world *w = tf_world_new(NULL);
        tf_daemon_start(w);
        long empty_kb = settle_rss(w);

        /* one real record */
        char *dirs[DIRS];
        for (int i = 0; i < DIRS; i++) {
                _cleanup_free_ char *name = strdup_printf("repo%02d", i);
                dirs[i] = tf_repo_new(w, name, "mkdir sub && echo a > a");
        }
        const char *argv[] = {"--directory", dirs[0], "--executor", "shell", "--no-overlay", "--prompt", "echo hi",
                              NULL};
        char *id = tf_dispatch(w, argv);
        json_object_put(tf_wait_settled(w, id));
        DispatchCost empty_cost;
        dispatch_rounds(w, dirs[2], &empty_cost);
        tf_daemon_stop(w, SIGTERM);
        char *path = strdup_printf("%s/tasks.json", w->state);
        char *text = tf_read(path, NULL);
        json_object *arr = tf_json(text);
        free(text);
        ck_assert_int_eq(json_object_array_length(arr), 1 + DROUNDS);
        json_object *proto = json_object_array_get_idx(arr, 0);

        /* N copies */
        json_object *big = json_object_new_array();
        int64_t base = (int64_t) time(NULL) * 1000 - (int64_t) n_tasks * 1000;
        for (int i = 0; i < n_tasks; i++) {
                json_object *rec = NULL;
                ck_assert_int_eq(json_object_deep_copy(proto, &rec, NULL), 0);
                char tid[64], iso[64];
                snprintf(tid, sizeof tid, "bench%08d-%04x", i, (unsigned) (i * 2654435761u) & 0xffff);
                time_t s = (time_t) ((base + (int64_t) i * 1000) / 1000);
                struct tm tm;
                gmtime_r(&s, &tm);
                strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
                json_object_object_add(rec, "id", json_object_new_string(tid));
                json_object *v;
                if (json_object_object_get_ex(rec, "directory", &v))
                        json_object_object_add(rec, "directory", json_object_new_string(dirs[i % DIRS]));
                const char *times[] = {"startedAt", "endedAt"};
                for (size_t k = 0; k < sizeof times / sizeof *times; k++)
                        if (json_object_object_get_ex(rec, times[k], &v) && json_object_is_type(v, json_type_string))
                                json_object_object_add(rec, times[k], json_object_new_string(iso));
                json_object_array_add(big, rec);
        }
        const char *out = json_object_to_json_string_ext(big, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
        tf_write(path, out, strlen(out), 0600);
        size_t file_bytes = strlen(out);
        json_object_put(big);
        json_object_put(arr);

        double t0 = tf_clock_ms();
        tf_daemon_start(w);
        double start_ms = tf_clock_ms() - t0;
        long full_kb = settle_rss(w);
        long full_hwm_kb = status_kb(tf_daemon_pid(w), "VmHWM");
        DispatchCost full_cost;
        dispatch_rounds(w, dirs[2], &full_cost);

        int fd = tf_connect(w);
        enum { ROUNDS = 50 };
        double v[ROUNDS], dv[ROUNDS];
        for (int i = 0; i < ROUNDS; i++) {
                json_object *o = rpc_timed(fd, "{\"version\":1,\"id\":\"1\",\"method\":\"task.list\",\"params\":{}}",
                                           &v[i], &dv[i]);
                ck_assert_ptr_nonnull(tf_result(o));
                json_object_put(o);
        }
        double list_ms = median(v, ROUNDS), list_daemon_ms = median(dv, ROUNDS);
        char *req = NULL;
        {
                json_object *p = json_object_new_object();
                json_object_object_add(p, "version", json_object_new_int(1));
                json_object_object_add(p, "id", json_object_new_string("2"));
                json_object_object_add(p, "method", json_object_new_string("task.list"));
                json_object *params = json_object_new_object();
                json_object_object_add(params, "directory", json_object_new_string(dirs[3]));
                json_object_object_add(p, "params", params);
                req = strdup(json_object_to_json_string_ext(p, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
                json_object_put(p);
        }
        for (int i = 0; i < ROUNDS; i++) {
                json_object *o = rpc_timed(fd, req, &v[i], &dv[i]);
                ck_assert_ptr_nonnull(tf_result(o));
                json_object_put(o);
        }
        double list_dir_ms = median(v, ROUNDS), list_dir_daemon_ms = median(dv, ROUNDS);
        free(req);

        /* 256 parked waits on a task that runs until we let it go */
        char *stop = strdup_printf("%s/stop", w->root);
        char *prompt = strdup_printf("while [ ! -e '%s' ]; do sleep 0.1; done", stop);
        const char *argv2[] = {"--directory", dirs[1], "--executor", "shell", "--no-overlay", "--no-sandbox",
                               "--prompt", prompt, NULL};
        char *runner = tf_dispatch(w, argv2);
        int waiters[WAITS];
        char *wait_req = strdup_printf("{\"version\":1,\"id\":\"7\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"%s\",\"timeoutMs\":120000}}",
                                        runner);
        int parked = 0;
        for (int i = 0; i < WAITS; i++) {
                waiters[i] = tf_connect(w);
                tf_send(waiters[i], wait_req);
                parked++;
        }
        usleep(300 * 1000);
        char *status_req = strdup_printf("{\"version\":1,\"id\":\"3\",\"method\":\"task.status\",\"params\":{\"taskId\":\"%s\"}}", runner);
        enum { SROUNDS = 100 };
        double sv[SROUNDS];
        int busy = 0, other_err = 0;
        for (int i = 0; i < SROUNDS; i++) {
                json_object *o = rpc_on(fd, status_req, &sv[i]);
                json_object *e = NULL;
                if (json_object_object_get_ex(o, "error", &e) && e) {
                        const char *code = tf_jstr(e, "code");
                        if (code && !strcmp(code, "SERVER_BUSY"))
                                busy++;
                        else
                                other_err++;
                }
                json_object_put(o);
        }
        int max_round = 0;
        for (int i = 1; i < SROUNDS; i++)
                if (sv[i] > sv[max_round]) max_round = i;
        double status_med = median(sv, SROUNDS), status_max = sv[SROUNDS - 1];
        tf_write(stop, "", 0, 0644);
        for (int i = 0; i < WAITS; i++) {
                drain_line(waiters[i], 60000);
                close(waiters[i]);
        }
        close(fd);

        printf("\n== bench-daemon: %d settled tasks, tasks.json %.1f MB ==\n", n_tasks, (double) file_bytes / 1e6);
        print_row("idle RSS, empty state", (double) empty_kb / 1024.0, "MB", "<= 4 MB");
        print_row("idle RSS, N settled tasks", (double) full_kb / 1024.0, "MB", "<= 15 MB for N=10000");
        print_row("peak RSS while loading N settled tasks (VmHWM)", (double) full_hwm_kb / 1024.0, "MB",
                  "<= 1.5 x the idle RSS");
        print_row("  ... peak / idle", (double) full_hwm_kb / (double) full_kb, "x", "<= 1.5");
        print_row("start with N tasks (until the socket answers)", start_ms, "ms", "-");
        print_row("dispatch + wait of a shell worker, empty state, median", empty_cost.ms, "ms", "-");
        print_row("dispatch + wait of a shell worker, N tasks, median", full_cost.ms, "ms", "-");
        print_row("  ... growth", full_cost.ms / empty_cost.ms, "x", "<= 1.3");
        print_row("bytes the daemon wrote per dispatch + wait, empty, median", empty_cost.wchar / 1024.0, "KiB", "one record");
        print_row("bytes the daemon wrote per dispatch + wait, N tasks, median", full_cost.wchar / 1024.0, "KiB",
                  "one record");
        print_row("  ... of it reaching the block layer (write_bytes)", full_cost.write_bytes / 1024.0, "KiB", "-");
        print_row("  ... of it appended to tasks.journal", full_cost.journal / 1024.0, "KiB", "-");
        print_row("  ... one record of tasks.json, for scale", (double) file_bytes / n_tasks / 1024.0, "KiB", "-");
        printf("%-58s %10d      (of %d dispatches; goal: rare)\n", "tasks.json replaced while dispatching, N tasks",
               full_cost.replaced, full_cost.rounds);
        print_row("task.list {} median, in the daemon (to first reply byte)", list_daemon_ms, "ms", "<= 1 ms");
        print_row("task.list {} median round trip (reply read and parsed)", list_ms, "ms", "-");
        print_row("task.list {directory} median, in the daemon", list_dir_daemon_ms, "ms", "-");
        print_row("task.list {directory} median round trip", list_dir_ms, "ms", "-");
        char what[128];
        snprintf(what, sizeof what, "task.status with %d waits parked, median", parked);
        print_row(what, status_med, "ms", "<= 50 ms");
        snprintf(what, sizeof what, "task.status with %d waits parked, max", parked);
        print_row(what, status_max, "ms", "<= 50 ms");
        printf("%-58s %10d      (of %d)\n", "  ... the max was round", max_round + 1, SROUNDS);
        printf("%-58s %10d      (goal 0)\n", "task.status answered SERVER_BUSY", busy);
        printf("%-58s %10d      (goal 0)\n", "task.status answered another error", other_err);
        fflush(stdout);

        free(status_req), free(wait_req), free(runner), free(prompt), free(stop), free(id), free(path);
        for (int i = 0; i < DIRS; i++) free(dirs[i]);
        tf_world_free(w);
}
END_TEST

int main(int argc, char **argv) {
        if (argc > 1 && atoi(argv[1]) > 0) n_tasks = atoi(argv[1]);
        Suite *s = suite_create("bench-daemon");
        TCase *tc = tcase_create("bench");
        tcase_set_timeout(tc, 1800);
        tcase_add_test(tc, bench);
        suite_add_tcase(s, tc);
        return tf_run_suite(s);
}
