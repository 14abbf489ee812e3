/* Benchmark (figures only, never a pass/fail timing): how long the real pi
 * 0.73.1 takes from `taskferry dispatch` to its first model request, through
 * taskferry with default settings (sandbox, overlay, per-task homes), against
 * the scripted model server of tests/fixtures/model-server, and the same for
 * pi started directly (no taskferry) as the baseline.
 *
 *   build/dev/tests/bench-real-pi [N]      (N runs each, default 5)
 *
 * Needs the pinned pi from tools/test in /opt/taskferry-test/agents (or
 * $TASKFERRY_TEST_AGENTS_DIR). Runs in a private network namespace where
 * the machine allows it. Prints min / median / max in milliseconds. */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agents-rig.h"
#include "harness.h"
#include "json-util.h"
#include "fileio.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"
#include "utf8.h"

static int runs = 5;

static double wall_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1e6;
}

/* arrival time (epoch ms) of the first main request carrying marker, or -1 */
static double first_request_t(rig *r, const char *marker, int timeout_ms) {
        uint64_t deadline = mono_ms() + (uint64_t) timeout_ms;
        do {
                _cleanup_json_ json_object *all = rig_requests(r);
                for (size_t i = 0; i < json_object_array_length(all); i++) {
                        json_object *req = json_object_array_get_idx(all, i);
                        json_object *body = NULL, *t = NULL;
                        json_object_object_get_ex(req, "body", &body);
                        const char *text = json_object_to_json_string(body);
                        if (text && strstr(text, marker) && json_object_object_get_ex(req, "t", &t))
                                return json_object_get_double(t);
                }
                usleep(5000);
        } while (mono_ms() < deadline);
        return -1;
}

static void print_figures(const char *what, double *v, int n) {
        tf_sort_ms(v, (size_t) n);
        double median = tf_median(v, (size_t) n);
        printf("%-58s n=%d  min %7.1f  median %7.1f  max %7.1f ms\n", what, n, v[0], median, v[n - 1]);
}

START_TEST(bench) {
        rig *r = rig_new();
        double *first = calloc((size_t) runs, sizeof(double)), *done = calloc((size_t) runs, sizeof(double));
        double *direct = calloc((size_t) runs, sizeof(double));
        int ok = 0;
        for (int i = 0; i < runs; i++) {
                _cleanup_free_ char *marker = strdup_printf("bench-run-%d-%d", (int) getpid(), i);
                _cleanup_free_ char *prompt = strdup_printf("scenario:answer %s Reply with exactly: PONG", marker);
                double t0 = wall_ms();
                char *id = rig_dispatch(r, "pi", rig_model(false), prompt, NULL);
                double t1 = first_request_t(r, marker, 120000);
                json_object *st = tf_wait_settled(r->w, id);
                double t2 = wall_ms();
                const char *status = tf_jstr(st, "status");
                if (t1 < 0 || !streq_ptr(status, "done")) {
                        printf("run %d: task %s %s (%s: %s); not counted\n", i, id, status ? status : "?",
                               strempty(tf_jstr(st, "failureReason")), strempty(tf_jstr(st, "failureDetail")));
                } else {
                        first[ok] = t1 - t0;
                        done[ok] = t2 - t0;
                        ok++;
                }
                json_object_put(st);
                free(id);
        }
        /* baseline: the same pi, config and prompt, started directly (on a copy
         * of the agent dir, so its sessions stay out of the user's) */
        _cleanup_free_ char *agent = strdup_printf("%s/direct-agent", r->w->root);
        _cleanup_free_ char *copied = tf_shf(r->w, NULL, "cp -a \"$HOME/.pi/agent\" %s", agent);
        int dok = 0;
        for (int i = 0; i < runs; i++) {
                _cleanup_free_ char *marker = strdup_printf("bench-direct-%d-%d", (int) getpid(), i);
                _cleanup_free_ char *q = shell_quote(marker);
                double t0 = wall_ms();
                _cleanup_free_ char *out = tf_shf(r->w, r->repo,
                                                  "PI_CODING_AGENT_DIR=%s pi --provider mockllm --model mock-model "
                                                  "--mode json -p \"scenario:answer \"%s >/dev/null 2>&1; echo $?",
                                                  agent, q);
                double t1 = first_request_t(r, marker, 1000);
                if (t1 >= 0 && streq(out, "0")) direct[dok++] = t1 - t0;
        }
        _cleanup_free_ char *load = NULL;
        if (read_file("/proc/loadavg", 256, &load, NULL) == 0) load[strcspn(load, "\n")] = 0;
        printf("\nreal pi %s, %d runs; load average %s\n", RIG_PI_VERSION, runs, load ? load : "?");
        if (ok) {
                print_figures("taskferry dispatch -> first model request", first, ok);
                print_figures("taskferry dispatch -> task settled (done)", done, ok);
        } else
                printf("no dispatch reached the model: taskferry cannot run the real pi here\n");
        if (dok) print_figures("pi started directly -> first model request (baseline)", direct, dok);
        fflush(stdout);
        free(first), free(done), free(direct);
        rig_free(r);
}
END_TEST

int main(int argc, char **argv) {
        if (argc > 1) runs = atoi(argv[1]);
        if (runs < 1) runs = 1;
        _cleanup_free_ char *missing = rig_agents_missing();
        if (missing) {
                fprintf(stderr, "bench-real-pi: %s\n", missing);
                return 1;
        }
        int r = rig_private_network();
        printf("bench-real-pi: %s\n", r < 0 ? "host network namespace (no private one allowed here)"
                                            : "private network namespace (only lo)");
        if (getenv("TASKFERRY_TEST_REAL_AGENTS_NO_SANDBOX"))
                printf("bench-real-pi: TASKFERRY_TEST_REAL_AGENTS_NO_SANDBOX: dispatches use --no-sandbox\n");
        else if (getenv("TASKFERRY_TEST_REAL_AGENTS_RW_BIND_HOMES"))
                printf("bench-real-pi: TASKFERRY_TEST_REAL_AGENTS_RW_BIND_HOMES: the user's executor dirs are rw-bound\n");
        Suite *s = suite_create("bench-real-pi");
        TCase *tc = tcase_create("bench");
        tcase_set_timeout(tc, 3600);
        tcase_add_test(tc, bench);
        suite_add_tcase(s, tc);
        return tf_run_suite(s);
}
