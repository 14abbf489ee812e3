/* Watchdogs and failure classification through the real daemon, the real
 * shim and the real sandbox, with fake workers (tests/fixtures/bin: the
 * `opencode`/`pi` fakes run FAKE_SCRIPT): every scenario of
 * the watchdog scenarios (W1–W11) under the fast watchdog env W, plus the
 * rules on what counts as output (one byte per tick keeps a worker alive;
 * silence after the first event is a stall), a re-adopted task keeping its
 * watchdog, and completeness by executor (a silent shell task that exits 0
 * is complete). */

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

/* the fast watchdog env `W`: a 50 ms poll and timeouts of a second or so */
#define W_ENV                                                                                        \
        (char *) "TASKFERRY_WATCHDOG_POLL_MS=50", (char *) "TASKFERRY_NO_OUTPUT_TIMEOUT_MS=500",     \
                (char *) "TASKFERRY_POST_OUTPUT_NO_OUTPUT_TIMEOUT_MS=1500",                         \
                (char *) "TASKFERRY_WATCHDOG_GRACE_MS=300"

#define STEP_START "{\"type\":\"step_start\",\"sessionID\":\"ses_w\",\"part\":{\"type\":\"step-start\",\"messageID\":\"m1\"}}"
#define TEXT(s) "{\"type\":\"text\",\"sessionID\":\"ses_w\",\"part\":{\"type\":\"text\",\"messageID\":\"m1\",\"text\":\"" s "\"}}"
#define STOP "{\"type\":\"step_finish\",\"sessionID\":\"ses_w\",\"part\":{\"type\":\"step-finish\",\"messageID\":\"m1\",\"reason\":\"stop\"}}"
#define RATE_ERROR                                                                                          \
        "{\"type\":\"error\",\"sessionID\":\"ses_w\",\"message\":\"rate_limit_exceeded: please retry after 60s\"," \
        "\"error\":{\"name\":\"APIError\",\"data\":{\"message\":\"rate_limit_exceeded: please retry after 60s\","  \
        "\"statusCode\":429}}}"

/* For the cases about what a worker's output means, not about its timing: a
 * pre-output budget that a sandbox's start on a loaded machine (several
 * launches at once, unprivileged, beside a -j8 suite) does not use up */
#define BOOT_ROOM "TASKFERRY_NO_OUTPUT_TIMEOUT_MS=3000"

static tf_world *world(const char *extra) {
        char *env[] = {W_ENV, (char *) extra, NULL};
        return tf_world_new(env);
}

/* Tier T0 (no sandbox): the worker is the process group leader, not bwrap.
 * Under bwrap the SIGTERM to the group ends bwrap itself, and with it the
 * whole sandbox: a worker's TERM trap never decides. */
static tf_world *world_t0(const char *extra) {
        char *env[] = {W_ENV, (char *) "TASKFERRY_DISABLE_SANDBOX=1", (char *) extra, NULL};
        return tf_world_new(env);
}

/* Dispatch the fake `executor` running script (sh -c, inside the sandbox). */
static char *dispatch(tf_world *w, const char *executor, const char *script) {
        tf_world_setenv(w, "FAKE_EXEC", "");
        tf_world_setenv(w, "FAKE_SCRIPT", script);
        const char *argv[] = {"--executor", executor, "--model", "mockllm/mock-model", "--directory", w->repo_parent,
                              "--prompt", "do it", NULL};
        return tf_dispatch(w, argv);
}

/* The same, the script being the worker process itself (FAKE_EXEC): its
 * traps and its death are the worker's. */
static char *dispatch_exec(tf_world *w, const char *executor, const char *script) {
        tf_world_setenv(w, "FAKE_SCRIPT", "");
        tf_world_setenv(w, "FAKE_EXEC", script);
        const char *argv[] = {"--executor", executor, "--model", "mockllm/mock-model", "--directory", w->repo_parent,
                              "--prompt", "do it", NULL};
        return tf_dispatch(w, argv);
}

static json_object *result_of(tf_world *w, const char *id) {
        const char *argv[] = {"result", id, "--json", NULL};
        return tf_cli_json(w, argv, 0);
}

static void assert_settled(json_object *st, const char *status, const char *reason, const char *detail) {
        const char *line = json_to_line(st, NULL);
        ck_assert_msg(streq(strempty(tf_jstr(st, "status")), status), "status %s, want %s: %s", tf_jstr(st, "status"),
                      status, line);
        if (reason)
                ck_assert_msg(streq(strempty(tf_jstr(st, "failureReason")), reason), "reason %s, want %s: %s",
                              tf_jstr(st, "failureReason"), reason, line);
        else
                ck_assert_msg(!tf_jstr(st, "failureReason"), "unexpected reason %s: %s", tf_jstr(st, "failureReason"),
                              line);
        if (detail)
                ck_assert_msg(streq(strempty(tf_jstr(st, "failureDetail")), detail), "detail %s, want %s: %s",
                              tf_jstr(st, "failureDetail"), detail, line);
}


/* One fake worker in a world of its own: the fast watchdog env plus extra
 * (t0: tier T0, no sandbox), the `executor` fake running script (exec: as
 * the worker process itself, dispatch_exec); it must settle as status,
 * reason and detail (assert_settled), no sooner than min_ms after the
 * dispatch. Returns its settled status (the caller puts it) and in
 * *ret_ms how long it took. */
typedef struct scenario {
        const char *extra;
        bool t0, exec;
        const char *executor, *script;
        const char *status, *reason, *detail;
        uint64_t min_ms;
} scenario;

static json_object *settle_scenario(const scenario *sc, uint64_t *ret_ms) {
        tf_world *w = sc->t0 ? world_t0(sc->extra) : world(sc->extra);
        uint64_t start = mono_ms();
        char *id = (sc->exec ? dispatch_exec : dispatch)(w, sc->executor, sc->script);
        json_object *st = tf_wait_settled(w, id);
        uint64_t took = mono_ms() - start;
        assert_settled(st, sc->status, sc->reason, sc->detail);
        ck_assert_msg(took >= sc->min_ms, "settled %llu ms after the dispatch, before %llu ms", (unsigned long long) took,
                      (unsigned long long) sc->min_ms);
        free(id);
        tf_world_free(w);
        if (ret_ms) *ret_ms = took;
        return st;
}

static void scenario_run(const scenario *sc) { json_object_put(settle_scenario(sc, NULL)); }

/* ---- W1 dead spawn ---- */

START_TEST(w1_dead_spawn) {
        /* a grace long enough to look at tasks.json while the worker, which
         * traps TERM, still runs */
        tf_world *w = world_t0("TASKFERRY_WATCHDOG_GRACE_MS=3000");
        /* before the dispatch, as in the other cases: the budget runs from
         * the spawn, which may come before the dispatch call returns here */
        uint64_t start = mono_ms();
        char *id = dispatch_exec(w, "opencode",
                                 "trap 'echo term > \"$TASKFERRY_OUTPUT_DIR/term\"' TERM; "
                                 "while :; do sleep 0.05; done");
        char *term_path = strdup(tf_output_path(w, id, "term"));
        while (!tf_exists(term_path) && mono_ms() - start < 20000) usleep(10000);
        ck_assert_msg(tf_exists(term_path), "the worker never got SIGTERM");
        uint64_t fired = mono_ms() - start;
        ck_assert_msg(fired >= 500, "killed after %llu ms, before the 500 ms budget", (unsigned long long) fired);
        /* the reason is on disk before the process exits */
        json_object *rec = tf_task_record(w, id);
        ck_assert_ptr_nonnull(rec);
        ck_assert_str_eq(strempty(tf_jstr(rec, "status")), "running");
        ck_assert_str_eq(strempty(tf_jstr(rec, "failureReason")), "no_output_timeout_dead_spawn");
        ck_assert_str_eq(strempty(tf_jstr(rec, "failureDetail")), "no output for 500ms (pre-output timeout)");
        json_object_put(rec);
        json_object *st = tf_wait_settled(w, id);
        assert_settled(st, "crashed", "no_output_timeout_dead_spawn", "no output for 500ms (pre-output timeout)");
        /* it ignored TERM: SIGKILL after the 3 s grace */
        ck_assert_msg(mono_ms() - start >= 3000, "settled %llu ms after dispatch, before the grace ended",
                      (unsigned long long) (mono_ms() - start));
        ck_assert_str_eq(strempty(tf_jstr(st, "signal")), "SIGKILL");
        json_object_put(st);
        free(term_path), free(id);
        tf_world_free(w);
}
END_TEST

/* The same in the sandbox: the group's SIGTERM ends it. */
START_TEST(w1_dead_spawn_sandboxed) {
        uint64_t took = 0;
        json_object_put(settle_scenario(&(scenario){.executor = "opencode", .script = "trap '' TERM; sleep 60",
                                                    .status = "crashed", .reason = "no_output_timeout_dead_spawn",
                                                    .detail = "no output for 500ms (pre-output timeout)"},
                                        &took));
        ck_assert_msg(took < 30000, "settled after %llu ms", (unsigned long long) took);
}
END_TEST

/* ---- W2 raw noise vs the ceiling ---- */

START_TEST(w2_raw_noise_resets_the_clock) {
        /* 3 s of raw stderr every 100 ms: six no-output budgets, never silent */
        scenario_run(&(scenario){.executor = "opencode",
                                 .script = "i=0; while [ $i -lt 30 ]; do echo noise $i >&2; sleep 0.1; i=$((i+1)); done",
                                 .status = "done"});
}
END_TEST

START_TEST(w2_ceiling) {
        scenario_run(&(scenario){
                .extra = "TASKFERRY_PRE_OUTPUT_MAX_MS=1200", .executor = "opencode",
                .script = "while :; do echo noise >&2; sleep 0.1; done", .status = "crashed",
                .reason = "no_output_timeout_dead_spawn",
                .detail = "no parseable event within 1200ms despite continued raw log growth (pre-output ceiling)",
                .min_ms = 1200});
}
END_TEST

START_TEST(w2_silence_after_noise) {
        scenario_run(&(scenario){.executor = "opencode",
                                 .script = "echo noise >&2; sleep 0.3; echo more noise >&2; sleep 60", .status = "crashed",
                                 .reason = "no_output_timeout_dead_spawn",
                                 .detail = "no output for 500ms (pre-output timeout)"});
}
END_TEST

/* ---- W4 steady output ---- */

START_TEST(w4_steady_output) {
        scenario_run(&(scenario){.executor = "opencode",
                                 .script = "printf '%s\\n' '" STEP_START "'; i=0; while [ $i -lt 15 ]; do "
                                           "printf '%s\\n' '" TEXT("tick") "'; sleep 0.2; i=$((i+1)); done; "
                                           "printf '%s\\n' '" STOP "'",
                                 .status = "done"});
}
END_TEST

/* ---- W5 a worker trapping SIGTERM ---- */

START_TEST(w5_term_trap_exit_0_still_crashed) {
        /* OC-C's error, then it waits; on TERM it exits 0 */
        json_object *st = settle_scenario(
                &(scenario){.t0 = true, .exec = true, .executor = "opencode",
                            .script = "trap 'exit 0' TERM; printf '%s\\n' '" STEP_START "' '" RATE_ERROR "'; "
                                      "echo 'Error: provider request failed (APIError)' >&2; while :; do sleep 0.05; done",
                            .status = "crashed", .reason = "rate_limited",
                            .detail = "rate_limit_exceeded: please retry after 60s"},
                NULL);
        int64_t code = -1;
        ck_assert_msg(json_get_int64(st, "exitCode", &code) && code == 0, "exit code: %s", json_to_line(st, NULL));
        json_object_put(st);
}
END_TEST

START_TEST(w5_term_ignored_gets_sigkill) {
        /* the 300 ms grace passes first */
        json_object *st = settle_scenario(
                &(scenario){.t0 = true, .exec = true, .executor = "opencode",
                            .script = "trap '' TERM; printf '%s\\n' '" STEP_START "' '" RATE_ERROR "'; "
                                      "while :; do sleep 0.05; done",
                            .status = "crashed", .reason = "rate_limited", .min_ms = 300},
                NULL);
        int64_t code = 0;
        bool has_code = json_get_int64(st, "exitCode", &code);
        ck_assert_msg(streq(strempty(tf_jstr(st, "signal")), "SIGKILL") || (has_code && code == 128 + SIGKILL),
                      "not killed by SIGKILL: %s", json_to_line(st, NULL));
        json_object_put(st);
}
END_TEST

/* ---- W7 no false positives ---- */

START_TEST(w7_text_event_is_never_scanned) {
        scenario_run(&(scenario){
                .extra = BOOT_ROOM,
                .executor = "opencode",
                .script = "printf '%s\\n' '" STEP_START "' '" TEXT("429 Too Many Requests: rate limit, quota, billing, unauthorized") "'; "
                          "sleep 0.5; printf '%s\\n' '" STOP "'",
                .status = "done"});
}
END_TEST

START_TEST(w7_tests_passed_is_not_auth) {
        scenario_run(&(scenario){.extra = BOOT_ROOM, .executor = "opencode",
                                 .script = "echo '401 tests passed, 0 failed'; sleep 0.2; exit 1",
                                 .status = "crashed", .reason = "boot_failure", .detail = "401 tests passed, 0 failed"});
}
END_TEST

/* ---- W8 unknown structured error ---- */

START_TEST(w8_unknown_structured_error) {
        static const char *const executors[] = {"opencode", "pi"};
        /* pi's own error: agent_end with stopReason "error", normalized
         * to error.name "pi_error" by the pi normalizer, hence pi_pi_error */
        static const char *const reasons[] = {"opencode_unknownerror", "pi_pi_error"};
        static const char *const events[] = {
                "{\"type\":\"error\",\"error\":{\"name\":\"UnknownError\",\"data\":"
                "{\"message\":\"Streaming response failed\"}}}",
                "{\"type\":\"agent_end\",\"messages\":[{\"role\":\"assistant\",\"stopReason\":\"error\","
                "\"errorMessage\":\"Streaming response failed\"}]}",
        };
        /* a live worker: the watchdog classifies it, then the kill */
        _cleanup_free_ char *script = strdup_printf("printf '%%s\\n' '%s'; while :; do sleep 0.05; done", events[_i]);
        scenario_run(&(scenario){.executor = executors[_i], .script = script, .status = "crashed", .reason = reasons[_i],
                                 .detail = "Streaming response failed"});
}
END_TEST

/* ---- W10 boot failure ---- */

START_TEST(w10_boot_failure) {
        tf_world *w = world(BOOT_ROOM);
        char *a = dispatch(w, "opencode",
                           "echo 'Warning: No models match pattern' >&2; echo 'Error: Extension failed' >&2; "
                           "echo '    at loadExtension (ext.js:10:5)' >&2; exit 1");
        char *b = dispatch(w, "pi", "echo 'INFO loading' >&2; echo 'cannot start' >&2; exit 2");
        char *c = dispatch(w, "opencode", "echo '{not json' >&2; exit 1");
        json_object *st = tf_wait_settled(w, a);
        assert_settled(st, "crashed", "boot_failure", "Error: Extension failed");
        json_object_put(st);
        st = tf_wait_settled(w, b);
        assert_settled(st, "crashed", "pi_boot_failure", "cannot start");
        json_object_put(st);
        /* a brace-starting non-JSON line is evidence too */
        st = tf_wait_settled(w, c);
        assert_settled(st, "crashed", "boot_failure", "{not json");
        json_object_put(st);
        free(a), free(b), free(c);
        tf_world_free(w);
}
END_TEST

START_TEST(w10_not_applied) {
        tf_world *w = world(BOOT_ROOM);
        /* exit 0 */
        char *a = dispatch(w, "opencode", "echo 'Error: cosmetic' >&2; exit 0");
        /* death by signal: T0 below (bwrap reports it as exit 128+N) */
        char *b = NULL;
        /* a parseable event in the log, even one over 64 KiB */
        char *c = dispatch(w, "opencode",
                           "printf '{\"type\":\"step_start\",\"pad\":\"%070000d\"}\\n' 0; echo 'Error: late' >&2; exit 1");
        /* the watchdog already set a reason */
        char *d = dispatch(w, "opencode", "echo 'Error: then silence' >&2; sleep 60");
        /* only one 70 KB raw line */
        char *e = dispatch(w, "opencode", "printf '%070000d\\n' 0 >&2; exit 1");
        json_object *st = tf_wait_settled(w, a);
        assert_settled(st, "done", NULL, NULL);
        json_object_put(st);
        st = tf_wait_settled(w, c);
        assert_settled(st, "crashed", NULL, NULL);
        json_object_put(st);
        st = tf_wait_settled(w, d);
        assert_settled(st, "crashed", "no_output_timeout_dead_spawn", NULL);
        json_object_put(st);
        st = tf_wait_settled(w, e);
        assert_settled(st, "crashed", NULL, NULL);
        json_object_put(st);
        free(a), free(b), free(c), free(d), free(e);
        tf_world_free(w);
        /* death by signal */
        w = world_t0(NULL);
        b = dispatch_exec(w, "opencode", "echo 'Error: dying' >&2; sleep 0.2; kill -KILL $$");
        st = tf_wait_settled(w, b);
        assert_settled(st, "crashed", NULL, NULL);
        ck_assert_str_eq(strempty(tf_jstr(st, "signal")), "SIGKILL");
        json_object_put(st);
        free(b);
        tf_world_free(w);
}
END_TEST

/* ---- W11 crash recovery ---- */

START_TEST(w11_crash_recovery) {
        tf_world *w = world(NULL);
        /* OC-F: a final answer, then exit 1 */
        char *a = dispatch(w, "opencode",
                           "printf '%s\\n' '" STEP_START "' '" TEXT("All three call sites now use the shared helper.") "' '" STOP "'; exit 1");
        /* an error event, then an answer, then exit 1 */
        char *b = dispatch(w, "opencode",
                           "printf '%s\\n' '" STEP_START "' '" RATE_ERROR "' '" TEXT("Recovered anyway.") "' '" STOP "'; exit 1");
        /* text without a stop */
        char *c = dispatch(w, "opencode", "printf '%s\\n' '" STEP_START "' '" TEXT("Half way.") "'; exit 1");
        json_object *st = tf_wait_settled(w, a);
        assert_settled(st, "done", NULL, NULL);
        int64_t code = -1;
        json_get_int64(st, "exitCode", &code);
        ck_assert_int_eq(code, 1);
        json_object_put(st);
        json_object *res = result_of(w, a);
        ck_assert_str_eq(strempty(tf_jstr(res, "message")), "All three call sites now use the shared helper.");
        json_object_put(res);
        st = tf_wait_settled(w, b);
        assert_settled(st, "done", "rate_limited", NULL);
        json_object_put(st);
        st = tf_wait_settled(w, c);
        assert_settled(st, "crashed", NULL, NULL);
        json_object_put(st);
        free(a), free(b), free(c);
        tf_world_free(w);
}
END_TEST

START_TEST(w11_cancelled_is_never_recovered) {
        tf_world *w = world("TASKFERRY_POST_OUTPUT_NO_OUTPUT_TIMEOUT_MS=60000");
        char *id = dispatch(w, "opencode",
                            "printf '%s\\n' '" STEP_START "' '" TEXT("An answer.") "' '" STOP "'; "
                            "touch \"$TASKFERRY_OUTPUT_DIR/ready\"; sleep 60");
        ck_assert(tf_wait_output(w, id, "ready", 20000));
        const char *c[] = {"cancel", id, "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, c);
        ck_assert_msg(r.exit_code == 0, "cancel: %s %s", r.out, r.err);
        tf_run_done(&r);
        json_object *st = tf_wait_settled(w, id);
        assert_settled(st, "cancelled", NULL, NULL);
        json_object_put(st);
        free(id);
        tf_world_free(w);
}
END_TEST

START_TEST(w11_stall_after_stop_is_done) {
        scenario_run(&(scenario){
                .executor = "opencode",
                .script = "printf '%s\\n' '" STEP_START "' '" TEXT("Finished, but hanging on exit.") "' '" STOP "'; sleep 60",
                .status = "done", .reason = "no_output_timeout_stalled",
                .detail = "no output for 1500ms (post-output timeout)", .min_ms = 1500});
}
END_TEST

/* ---- what counts as output: any new byte of the log ---- */

/* Any new byte of the log is activity, JSON or not, complete line or not:
 * a worker that writes one byte to stderr (which reaches the log raw; a
 * partial stdout line waits in the shim's normalizer, so it is not in the
 * log yet) every 100 ms after its first event is alive for 4 s, more than
 * twice the 1.5 s post-output budget. */
START_TEST(one_byte_per_tick_is_not_stalled) {
        scenario_run(&(scenario){
                .executor = "opencode",
                .script = "printf '%s\\n' '" STEP_START "'; i=0; while [ $i -lt 40 ]; do printf . >&2; sleep 0.1; "
                          "i=$((i+1)); done; echo; printf '%s\\n' '" TEXT("done") "' '" STOP "'",
                .status = "done"});
}
END_TEST

/* One event, then nothing: stalled after the post-output budget, not the
 * shorter pre-output one. */
START_TEST(silence_after_first_event_is_stalled) {
        /* stalled no sooner than the post-output budget */
        scenario_run(&(scenario){.executor = "pi",
                                 .script = "printf '%s\\n' '{\"type\":\"session\",\"id\":\"s1\"}'; sleep 60",
                                 .status = "crashed", .reason = "no_output_timeout_stalled",
                                 .detail = "no output for 1500ms (post-output timeout)", .min_ms = 1500});
}
END_TEST

/* ---- a re-adopted task keeps its watchdog ---- */

START_TEST(readopted_task_has_a_watchdog) {
        tf_world *w = world("TASKFERRY_POST_OUTPUT_NO_OUTPUT_TIMEOUT_MS=4000");
        char *id = dispatch(w, "opencode",
                            "printf '%s\\n' '" STEP_START "'; touch \"$TASKFERRY_OUTPUT_DIR/ready\"; sleep 120");
        ck_assert(tf_wait_output(w, id, "ready", 20000));
        /* the daemon dies at once; its successor re-adopts the shim */
        tf_daemon_stop(w, SIGKILL);
        json_object *st = tf_status_full(w, id); /* starts the next daemon */
        ck_assert_str_eq(strempty(tf_jstr(st, "status")), "running");
        json_object_put(st);
        st = tf_wait_settled(w, id);
        /* the log already held an event: the post-output budget */
        assert_settled(st, "crashed", "no_output_timeout_stalled", "no output for 4000ms (post-output timeout)");
        json_object_put(st);
        free(id);
        tf_world_free(w);
}
END_TEST

/* ---- completeness by executor ---- */

START_TEST(shell_silent_success_is_complete) {
        tf_world *w = world("TASKFERRY_NO_OUTPUT_TIMEOUT_MS=60000");
        json_object *st = NULL;
        char *id = tf_shell_settled(w, w->repo_parent, NULL, "true", &st);
        assert_settled(st, "done", NULL, NULL);
        json_object_put(st);
        json_object *res = result_of(w, id);
        ck_assert_msg(!json_get_bool(res, "incomplete", false), "a silent shell success is incomplete: %s",
                      json_to_line(res, NULL));
        ck_assert_ptr_null(tf_jstr(res, "next"));
        json_object_put(res);
        free(id);
        /* pi and OpenCode: a clean exit without a message is incomplete */
        char *oc = dispatch(w, "opencode", "exit 0");
        st = tf_wait_settled(w, oc);
        assert_settled(st, "done", NULL, NULL);
        json_object_put(st);
        res = result_of(w, oc);
        ck_assert_msg(json_get_bool(res, "incomplete", false), "an empty opencode answer is complete: %s",
                      json_to_line(res, NULL));
        json_object_put(res);
        free(oc);
        tf_world_free(w);
}
END_TEST

int main(void) {
        Suite *s = suite_create("watchdogs");
        TCase *tc = tf_add_tests(
                s, "w", 120,
                TF_TESTS(w1_dead_spawn, w1_dead_spawn_sandboxed, w2_raw_noise_resets_the_clock, w2_ceiling,
                         w2_silence_after_noise, w4_steady_output, w5_term_trap_exit_0_still_crashed,
                         w5_term_ignored_gets_sigkill, w7_text_event_is_never_scanned, w7_tests_passed_is_not_auth,
                         w10_boot_failure, w10_not_applied, w11_crash_recovery, w11_cancelled_is_never_recovered,
                         w11_stall_after_stop_is_done, one_byte_per_tick_is_not_stalled,
                         silence_after_first_event_is_stalled, readopted_task_has_a_watchdog,
                         shell_silent_success_is_complete));
        tcase_add_loop_test(tc, w8_unknown_structured_error, 0, 2);
        return tf_run_suite(s);
}
