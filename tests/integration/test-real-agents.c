/* The real pi 0.73.1 and OpenCode 1.18.33 (installed by tools/test into
 * /opt/taskferry-test/agents), dispatched through taskferry with DEFAULT
 * settings — sandboxed, overlay on, no extra binds — against the scripted
 * model server of tests/fixtures/model-server on 127.0.0.1, with the user's
 * ordinary config made in the world's HOME (agents-rig.c): real workers with
 * default settings, and executor homes isolated from the user's:
 *   answer → done, PONG, tokens and cost as scripted, a session id (OpenAI
 *            and Anthropic APIs);
 *   write_file → a pending changeset of exactly hello.txt = "hi\n"; accept
 *            lands it;
 *   rate_limit / auth → the rate / auth bucket, the provider's message as
 *            the detail;
 *   slow → streamed to the end; hang → cancel settles cancelled with no
 *            process of the task left; hang with short watchdog timeouts →
 *            crashed with the stall / no-output reason within them, nothing
 *            of the task left;
 *   --session-id of a settled task → the same session, the model sees the
 *            earlier turns;
 *   two concurrent tasks and a later one: what a worker writes into its
 *            homes is invisible to the others; the user's real dirs are
 *            byte-identical afterwards (checked after every test).
 * The suite runs in a private network namespace where the machine allows it
 * (main()), so nothing can leave loopback. */

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agents-rig.h"
#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

/* the rig checks of agents-rig.c: the workers do write the real dirs */
static bool no_sandbox(void) {
        return getenv("TASKFERRY_TEST_REAL_AGENTS_NO_SANDBOX") || getenv("TASKFERRY_TEST_REAL_AGENTS_RW_BIND_HOMES");
}

/* Lines of a that are not lines of b, "<prefix>line\n" each, at most max
 * bytes in all (Check's failure messages are small). */
static void append_missing_lines(char **out, const char *a, const char *b, const char *prefix, size_t max) {
        _cleanup_free_ char *copy = strdup(a);
        char *save = NULL;
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                bool found = false;
                size_t n = strlen(line);
                for (const char *p = b; !found && (p = strstr(p, line)); p += n)
                        found = (p == b || p[-1] == '\n') && (p[n] == '\n' || p[n] == 0);
                if (found) continue;
                if (strlen(*out) + n + 8 > max) {
                        tf_appendf(out, "…\n");
                        return;
                }
                tf_appendf(out, "%s%.200s\n", prefix, line);
        }
}

static void assert_user_dirs_unchanged(rig *r) {
        if (no_sandbox()) return; /* unsandboxed workers do write the real dirs */
        _cleanup_free_ char *after = rig_user_dirs_snapshot(r);
        if (streq(after, r->user_dirs_before)) return;
        _cleanup_free_ char *diff = strdup("");
        append_missing_lines(&diff, r->user_dirs_before, after, "- ", 1200);
        append_missing_lines(&diff, after, r->user_dirs_before, "+ ", 2400);
        ck_abort_msg("the user's real pi/OpenCode dirs changed (path type mode size target / sha256 path):\n%s", diff);
}

/* status after settling, with a readable message on a mismatch */
static json_object *settle(rig *r, const char *id, const char *want_status) {
        json_object *st = tf_wait_settled(r->w, id);
        ck_assert_msg(streq_ptr(tf_jstr(st, "status"), want_status),
                      "task %s: status %s, want %s (failureReason %s, failureDetail %s, spawnError %s)", id,
                      tf_jstr(st, "status"), want_status, tf_jstr(st, "failureReason"), tf_jstr(st, "failureDetail"),
                      tf_jstr(st, "spawnError"));
        return st;
}

/* Is the task still queued or running? When what is set, a task that is
 * not fails the test ("ended before <what>"). */
static bool task_active(rig *r, const char *id, const char *what) {
        _cleanup_free_ char *st = tf_shf(r->w, NULL, "%s status %s --json | tr -d '\n'", tf_bin("taskferry"), id);
        bool active = strstr(st, "\"status\":\"running\"") || strstr(st, "\"status\":\"queued\"");
        ck_assert_msg(active || !what, "task %s ended before %s: %s", id, what, st);
        return active;
}

static int64_t token(json_object *res, const char *key) {
        int64_t v = -1;
        json_get_int64(json_get_object(res, "tokens"), key, &v);
        return v;
}

/* ---- answer ---- */

RIG_TEST(answer) {
        bool anthropic = _i >= 2;
        char *id = rig_dispatch(r, ex, rig_model(anthropic), "scenario:answer Reply with exactly: PONG", NULL);
        json_object *st = settle(r, id, "done");
        ck_assert_msg(tf_jstr(st, "failureReason") == NULL, "reason %s", tf_jstr(st, "failureReason"));
        json_object_put(st);

        json_object *res = rig_result(r, id, false);
        ck_assert_str_eq(strempty(tf_jstr(res, "message")), "PONG");
        ck_assert_int_eq(token(res, "input"), 100);
        ck_assert_int_eq(token(res, "output"), 5);
        json_object *cost = NULL;
        ck_assert_msg(json_object_object_get_ex(res, "cost", &cost) && cost, "no cost: %s", json_to_line(res, NULL));
        /* 100 in × $1/M + 5 out × $2/M, as each CLI computes it (pi's binary
         * float noise included) */
        double want = streq(ex, "pi") ? 0.00010999999999999999 : 0.00011;
        ck_assert_msg(json_object_get_double(cost) == want, "cost %.17g, want %.17g", json_object_get_double(cost), want);
        const char *sid = tf_jstr(res, "sessionId");
        ck_assert_msg(sid && (streq(ex, "pi") ? strlen(sid) == 36 : startswith(sid, "ses_")), "session id %s",
                      sid ? sid : "(none)");
        json_object_put(res);

        /* it was the model server that answered: one main request; OpenCode's
         * title request came on the side */
        ck_assert_uint_eq(rig_count_requests(r, "main", "scenario:answer"), 1);
        ck_assert_uint_eq(rig_count_requests(r, "title", NULL), streq(ex, "opencode") ? 1 : 0);
        assert_user_dirs_unchanged(r);
        free(id);
}
END_TEST

/* ---- write_file ---- */

static size_t count_substr(const char *s, const char *needle) {
        size_t n = 0;
        for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
        return n;
}

RIG_TEST(write_file) {
        char *id = rig_dispatch(r, ex, rig_model(false), "scenario:write_file Write hello.txt containing hi.", NULL);
        json_object *st = settle(r, id, "done");
        ck_assert_str_eq(strempty(tf_jstr(st, "changesetStatus")), "pending");
        json_object_put(st);
        ck_assert_msg(!tf_exists(tf_path(r->repo, "hello.txt")), "the worker wrote the real repository");

        json_object *res = rig_result(r, id, true);
        const char *diff = tf_jstr(res, "diff");
        ck_assert_ptr_nonnull(diff);
        ck_assert_msg(count_substr(diff, "diff --git ") == 1 && strstr(diff, "diff --git a/hello.txt b/hello.txt\n"),
                      "the changeset is not exactly hello.txt:\n%s", diff);
        ck_assert_msg(strstr(diff, "new file mode 100644\n") && strstr(diff, "\n+hi\n"), "diff:\n%s", diff);
        json_object_put(res);

        const char *acc[] = {"accept", id, "--json", NULL};
        tf_run a = tf_cli(r->w, NULL, NULL, acc);
        ck_assert_msg(a.exit_code == 0, "accept: %s %s", a.out, a.err);
        tf_run_done(&a);
        size_t len = 0;
        char *data = tf_read(tf_path(r->repo, "hello.txt"), &len);
        ck_assert_uint_eq(len, 3);
        ck_assert_str_eq(data, "hi\n");
        free(data);
        char *status = tf_shf(r->w, r->repo, "git status --porcelain");
        ck_assert_str_eq(status, "?? hello.txt");
        free(status);
        assert_user_dirs_unchanged(r);
        free(id);
}
END_TEST

/* ---- rate_limit, auth ---- */

RIG_TEST(rate_limit) {
        char *id = rig_dispatch(r, ex, rig_model(false), "scenario:rate_limit Reply with exactly: PONG", NULL);
        json_object *st = settle(r, id, "crashed");
        ck_assert_str_eq(strempty(tf_jstr(st, "failureReason")), streq(ex, "pi") ? "pi_rate_limited" : "rate_limited");
        ck_assert_msg(strstr(strempty(tf_jstr(st, "failureDetail")), "Rate limit reached for mock-model (mockllm)"),
                      "detail: %s", tf_jstr(st, "failureDetail"));
        /* the CLI retried (Retry-After: 0) before giving up */
        ck_assert_uint_ge(rig_count_requests(r, "main", "scenario:rate_limit"), 2);
        json_object_put(st);
        assert_user_dirs_unchanged(r);
        free(id);
}
END_TEST

RIG_TEST(auth) {
        bool anthropic = _i >= 2;
        char *id = rig_dispatch(r, ex, rig_model(anthropic), "scenario:auth Reply with exactly: PONG", NULL);
        json_object *st = settle(r, id, "crashed");
        ck_assert_str_eq(strempty(tf_jstr(st, "failureReason")),
                         streq(ex, "pi") ? "pi_authentication_failed" : "authentication_failed");
        /* the provider's own message (the mock's 401 body), never a serialized event */
        const char *want = anthropic ? (streq(ex, "pi") ? "401 authentication_error: invalid x-api-key (mockllm)"
                                                        : "invalid x-api-key (mockllm)")
                                     : (streq(ex, "pi") ? "401 Incorrect API key provided (mockllm)."
                                                        : "Incorrect API key provided (mockllm).");
        ck_assert_str_eq(strempty(tf_jstr(st, "failureDetail")), want);
        json_object_put(st);
        assert_user_dirs_unchanged(r);
        free(id);
}
END_TEST

/* ---- slow, hang ---- */

RIG_TEST(slow) {
        char *id = rig_dispatch(r, ex, rig_model(false), "scenario:slow Count to five.", NULL);
        json_object *st = settle(r, id, "done");
        json_object_put(st);
        json_object *res = rig_result(r, id, false);
        ck_assert_str_eq(strempty(tf_jstr(res, "message")), "tick1 tick2 tick3 tick4 tick5 ");
        ck_assert_int_eq(token(res, "output"), 5);
        json_object_put(res);
        free(id);
}
END_TEST

RIG_TEST(hang) {
        char *id = rig_dispatch(r, ex, rig_model(false), "scenario:hang Reply with exactly: PONG", NULL);
        /* the worker is up and waiting for the model */
        uint64_t deadline = mono_ms() + 90000;
        while (rig_count_requests(r, "main", "scenario:hang") == 0 && mono_ms() < deadline) {
                task_active(r, id, "calling the model");
                usleep(50000);
        }
        ck_assert_msg(rig_count_requests(r, "main", "scenario:hang") > 0, "the CLI never called the model");
        pid_t pids[64];
        ck_assert_msg(rig_task_processes(id, pids, 64) > 0, "no process of task %s found while it runs", id);

        const char *cancel[] = {"cancel", id, "--json", NULL};
        tf_run c = tf_cli(r->w, NULL, NULL, cancel);
        ck_assert_msg(c.exit_code == 0, "cancel: %s %s", c.out, c.err);
        tf_run_done(&c);
        json_object *st = settle(r, id, "cancelled");
        json_object_put(st);
        size_t left = 0;
        for (int i = 0; i < 50 && (left = rig_task_processes(id, pids, 64)) > 0; i++) usleep(100000);
        ck_assert_msg(left == 0, "%zu process(es) of cancelled task %s still run (first pid %d)", left, id, (int) pids[0]);
        assert_user_dirs_unchanged(r);
        free(id);
}
END_TEST

/* Processes in the process group or session pgid (the worker's: bwrap
 * leads it), up to max stored in pids; count returned. */
static bool in_group_or_session(pid_t pid, void *arg) {
        pid_t pgid = *(pid_t *) arg, pgrp, sid;
        return tf_proc_stat(pid, NULL, &pgrp, &sid) && (pgrp == pgid || sid == pgid);
}

static size_t group_processes(pid_t pgid, pid_t *pids, size_t max) { return tf_procs(in_group_or_session, &pgid, pids, max); }

/* The model server takes the request and never answers (hang), or starts
 * its stream and then goes silent (stall). With short watchdog timeouts the
 * task ends crashed by the watchdog: pi prints its session event first, so
 * its silence is a stall after the post-output budget; OpenCode prints
 * nothing before the model's stream starts, so a hang is a dead spawn after
 * the no-output budget and a stall a stall after the post-output one.
 * Nothing of the task is left running. */
START_TEST(hang_watchdog) {
        const char *ex = rig_executor(_i);
        bool stall = _i >= 2;
        const char *scenario = stall ? "scenario:stall" : "scenario:hang";
        /* The CLIs take 4 s (idle) to 60 s (a machine at load 20) to start
         * and call the model, silent all along: the no-output budget covers
         * that start. pi prints its session event once started, OpenCode
         * its step_start once the model's stream starts; after that the
         * short post-output budget is the one that ends them. OpenCode
         * against a hang prints nothing at all: the no-output budget ends it. */
        const uint64_t no_output = 90000, post_output = 10000;
        _cleanup_free_ char *e1 = strdup_printf("TASKFERRY_NO_OUTPUT_TIMEOUT_MS=%llu", (unsigned long long) no_output);
        _cleanup_free_ char *e2 =
                strdup_printf("TASKFERRY_POST_OUTPUT_NO_OUTPUT_TIMEOUT_MS=%llu", (unsigned long long) post_output);
        char *env[] = {e1, e2, (char *) "TASKFERRY_WATCHDOG_POLL_MS=200", (char *) "TASKFERRY_WATCHDOG_GRACE_MS=1000",
                       NULL};
        rig *r = rig_new_with(env);
        uint64_t start = mono_ms();
        _cleanup_free_ char *prompt = strdup_printf("%s Reply with exactly: PONG", scenario);
        char *id = rig_dispatch(r, ex, rig_model(false), prompt, NULL);
        int64_t pid = 0;
        while (rig_count_requests(r, "main", scenario) == 0 && mono_ms() - start < 90000) {
                if (!task_active(r, id, NULL)) break;
                if (pid <= 0) {
                        const char *sa[] = {"status", id, "--full", "--json", NULL};
                        tf_run sr = tf_cli(r->w, NULL, NULL, sa);
                        json_object *so = sr.exit_code == 0 ? json_tokener_parse(sr.out) : NULL;
                        if (so) json_get_int64(so, "pid", &pid);
                        json_object_put(so);
                        tf_run_done(&sr);
                }
                usleep(50000);
        }
        uint64_t asked = mono_ms();
        ck_assert_msg(rig_count_requests(r, "main", scenario) > 0, "the CLI never called the model");
        ck_assert_msg(pid > 0, "no worker pid seen while task %s ran", id);
        json_object *st = settle(r, id, "crashed");
        uint64_t ended = mono_ms();
        bool stalled = streq(ex, "pi") || stall;
        const char *want = stalled ? "no_output_timeout_stalled" : "no_output_timeout_dead_spawn";
        ck_assert_msg(streq_ptr(tf_jstr(st, "failureReason"), want), "%s: failureReason %s (%s), want %s", ex,
                      tf_jstr(st, "failureReason"), tf_jstr(st, "failureDetail"), want);
        printf("real-agents: %s %s: model called after %llu ms, crashed (%s: %s) %llu ms later\n", ex,
               scenario + 9, (unsigned long long) (asked - start), tf_jstr(st, "failureReason"), tf_jstr(st, "failureDetail"),
               (unsigned long long) (ended - asked));
        fflush(stdout);
        json_object_put(st);
        /* within the configured timeout: the budget from the worker's last
         * byte, plus a tick, the grace and the settlement */
        uint64_t budget = stalled ? post_output : no_output;
        ck_assert_msg(ended - start >= budget && (stalled || ended - start <= budget + 30000) &&
                              ended - asked <= budget + 10000,
                      "%s: settled %llu ms after the model request (budget %llu ms)", ex,
                      (unsigned long long) (ended - asked), (unsigned long long) budget);
        pid_t pids[64];
        size_t left = 0, in_group = 0;
        for (int i = 0; i < 50; i++) {
                left = rig_task_processes(id, pids, 64);
                in_group = group_processes((pid_t) pid, pids + (left < 32 ? left : 32), 32);
                if (left == 0 && in_group == 0) break;
                usleep(100000);
        }
        ck_assert_msg(left == 0, "%zu process(es) of crashed task %s still run (first pid %d)", left, id, (int) pids[0]);
        ck_assert_msg(in_group == 0, "%zu process(es) in the worker's group/session %lld still run", in_group,
                      (long long) pid);
        ck_assert_msg(kill((pid_t) -pid, 0) < 0 && errno == ESRCH, "the worker's process group %lld still exists",
                      (long long) pid);
        assert_user_dirs_unchanged(r);
        free(id);
        rig_free(r);
}
END_TEST

/* ---- resume ---- */

RIG_TEST(resume) {
        char *first = rig_dispatch(r, ex, rig_model(false), "scenario:answer first-turn-kiwi Reply with exactly: PONG",
                                   NULL);
        json_object *st = settle(r, first, "done");
        json_object_put(st);
        json_object *res = rig_result(r, first, false);
        char *sid = strdup(strempty(tf_jstr(res, "sessionId")));
        json_object_put(res);
        ck_assert_msg(*sid, "no session id");

        const char *extra[] = {"--session-id", sid, NULL};
        char *second = rig_dispatch(r, ex, NULL, "scenario:answer second-turn-mango Reply with exactly: PONG", extra);
        st = settle(r, second, "done");
        json_object_put(st);
        res = rig_result(r, second, false);
        ck_assert_str_eq(strempty(tf_jstr(res, "sessionId")), sid);
        ck_assert_str_eq(strempty(tf_jstr(res, "message")), "PONG");
        json_object_put(res);

        /* the model saw the earlier turns: the first prompt and its answer
         * travel in the resumed request */
        json_object *req = rig_last_request(r, "second-turn-mango");
        ck_assert_ptr_nonnull(req);
        json_object *body = NULL;
        json_object_object_get_ex(req, "body", &body);
        const char *text = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        ck_assert_msg(strstr(text, "first-turn-kiwi") && strstr(text, "PONG"),
                      "the resumed request lacks the earlier turns: %.2000s", text);
        json_object_put(req);
        assert_user_dirs_unchanged(r);
        free(sid), free(first), free(second);
}
END_TEST

/* ---- the check gate, fixed forward ---- */

/* status --full of id once its checkStatus is want (at most 120 s). */
static json_object *check_settled(rig *r, const char *id, const char *want) {
        uint64_t deadline = mono_ms() + 120000;
        for (;;) {
                json_object *st = tf_status_full(r->w, id);
                if (streq_ptr(tf_jstr(st, "checkStatus"), want)) return st;
                ck_assert_msg(mono_ms() < deadline, "task %s: checkStatus never became %s: %s", id, want,
                              json_to_line(st, NULL));
                json_object_put(st);
                usleep(100000);
        }
}

/* A gated repository: the worker's first change fails the project's check,
 * accept refuses it naming the session to resume; the resumed worker
 * (--session-id, --parent-task) starts from that change, fixes it, passes,
 * and its accept lands both once. */
RIG_TEST(gate_fix_forward) {
        static const char toml[] = "check = \"grep -q fixed feature.txt\"\n";
        tf_write(tf_path(r->repo, ".taskferry.toml"), toml, strlen(toml), 0644);
        free(tf_shf(r->w, r->repo, "git add .taskferry.toml && git commit -qm gate"));
        _cleanup_free_ char *p1 = rig_bash_prompt("printf 'feature\\n' > feature.txt; echo wrote");
        char *parent = rig_dispatch(r, ex, rig_model(false), p1, NULL);
        json_object *st = settle(r, parent, "done");
        ck_assert_str_eq(strempty(tf_jstr(st, "changesetStatus")), "pending");
        json_object_put(st);
        json_object_put(check_settled(r, parent, "failed"));
        json_object *res = rig_result(r, parent, false);
        char *sid = strdup(strempty(tf_jstr(res, "sessionId")));
        json_object_put(res);
        ck_assert_msg(*sid, "no session id");
        const char *acc[] = {"accept", parent, NULL};
        tf_run a = tf_cli(r->w, NULL, NULL, acc);
        _cleanup_free_ char *said = tf_unescape(a.out), *want = strdup_printf("--session-id %s --parent-task %s", sid, parent);
        ck_assert_msg(a.exit_code == 1 && strstr(said, want), "accept of a failed gate: %s", said);
        tf_run_done(&a);
        ck_assert(!tf_exists(tf_path(r->repo, "feature.txt")));

        _cleanup_free_ char *p2 = rig_bash_prompt("grep -q feature feature.txt && printf 'fixed\\n' >> feature.txt; echo fixed");
        const char *extra[] = {"--session-id", sid, "--parent-task", parent, NULL};
        char *child = rig_dispatch(r, ex, NULL, p2, extra);
        st = settle(r, child, "done");
        json_object_put(st);
        json_object_put(check_settled(r, child, "passed"));
        const char *acc2[] = {"accept", child, NULL};
        a = tf_cli(r->w, NULL, NULL, acc2);
        ck_assert_msg(a.exit_code == 0, "accept: %s %s", a.out, a.err);
        tf_run_done(&a);
        _cleanup_free_ char *feature = tf_read(tf_path(r->repo, "feature.txt"), NULL);
        ck_assert_str_eq(feature, "feature\nfixed\n");
        st = tf_status_full(r->w, parent);
        ck_assert_str_eq(strempty(tf_jstr(st, "changesetStatus")), "rejected");
        json_object_put(st);
        assert_user_dirs_unchanged(r);
        free(sid), free(parent), free(child);
}
END_TEST

/* ---- isolation of executor homes ---- */

/* The worker's homes as the CLIs find them (their own defaults when the
 * sandbox sets nothing), one "label:path" a line. */
#define HOMES_SH                                                                                  \
        "AD=${PI_CODING_AGENT_DIR:-$HOME/.pi/agent}; DH=${XDG_DATA_HOME:-$HOME/.local/share}; "   \
        "CH=${XDG_CACHE_HOME:-$HOME/.cache}; CF=${XDG_CONFIG_HOME:-$HOME/.config}; "              \
        "SH=${XDG_STATE_HOME:-$HOME/.local/state}; "                                              \
        "homes=\"agent:$AD sessions:$AD/sessions data:$DH/opencode cache:$CH cache-oc:$CH/opencode " \
        "config:$CF/opencode state:$SH state-oc:$SH/opencode\"; "
static char *isolation_writer(void) {
        return strdup(HOMES_SH
                      "for h in $homes; do d=${h#*:}; mkdir -p \"$d\" 2>/dev/null; "
                      "if echo \"$TASKFERRY_TASK_ID\" > \"$d/tf-marker-$TASKFERRY_TASK_ID\" 2>/dev/null; "
                      "then echo \"W ok ${h%%:*}\"; else echo \"W fail ${h%%:*}\"; fi; done; "
                      ": > \"$TASKFERRY_OUTPUT_DIR/written\"; i=0; "
                      "while [ ! -e \"$TASKFERRY_OUTPUT_DIR/go\" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; "
                      "for h in $homes; do for f in \"${h#*:}\"/tf-marker-*; do [ -e \"$f\" ] && "
                      "echo \"SEEN ${h%%:*} ${f##*/tf-marker-}\"; done; done; echo END");
}

static char *isolation_reader(void) {
        return strdup(HOMES_SH
                      "for h in $homes; do for f in \"${h#*:}\"/tf-marker-*; do [ -e \"$f\" ] && "
                      "echo \"SEEN ${h%%:*} ${f##*/tf-marker-}\"; done; done; echo END");
}

static bool has_line(const char *text, const char *line) {
        size_t n = strlen(line);
        for (const char *p = text; (p = strstr(p, line)); p += n)
                if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == 0)) return true;
        return false;
}

RIG_TEST(isolation) {
        bool pi = streq(ex, "pi");
        _cleanup_free_ char *writer = isolation_writer(), *reader = isolation_reader();
        _cleanup_free_ char *wprompt = rig_bash_prompt(writer), *rprompt = rig_bash_prompt(reader);
        char *ids[2];
        for (int k = 0; k < 2; k++) ids[k] = rig_dispatch(r, ex, rig_model(false), wprompt, NULL);

        /* both have written their markers before either looks */
        for (int k = 0; k < 2; k++) {
                _cleanup_free_ char *written = strdup_printf("%s/outputs/%s/written", r->w->state, ids[k]);
                uint64_t deadline = mono_ms() + 120000;
                while (!tf_exists(written) && mono_ms() < deadline) {
                        task_active(r, ids[k], "writing its markers");
                        usleep(100000);
                }
                ck_assert_msg(tf_exists(written), "task %s never wrote its markers", ids[k]);
        }
        for (int k = 0; k < 2; k++) {
                _cleanup_free_ char *go = strdup_printf("%s/outputs/%s/go", r->w->state, ids[k]);
                tf_write(go, "", 0, 0644);
        }
        /* the homes the CLI itself uses must be writable; the rest is reported */
        const char *required_pi[] = {"agent", "sessions", NULL};
        const char *required_oc[] = {"data", "cache-oc", "config", "state-oc", NULL};
        for (int k = 0; k < 2; k++) {
                json_object *st = settle(r, ids[k], "done");
                json_object_put(st);
                json_object *res = rig_result(r, ids[k], false);
                const char *msg = strempty(tf_jstr(res, "message"));
                printf("real-agents: %s isolation task %s saw:\n%s\n", ex, ids[k], msg);
                ck_assert_msg(strstr(msg, "END"), "task %s: the script did not run to its end: %s", ids[k], msg);
                for (const char *const *h = pi ? required_pi : required_oc; *h; h++) {
                        _cleanup_free_ char *ok = strdup_printf("W ok %s", *h);
                        ck_assert_msg(has_line(msg, ok), "task %s could not write its %s home:\n%s", ids[k], *h, msg);
                        _cleanup_free_ char *own = strdup_printf("SEEN %s %s", *h, ids[k]);
                        ck_assert_msg(has_line(msg, own), "task %s does not see its own %s marker:\n%s", ids[k], *h,
                                      msg);
                }
                const char *other = ids[1 - k];
                ck_assert_msg(!strstr(msg, other), "task %s sees a file of concurrent task %s:\n%s", ids[k], other, msg);
                json_object_put(res);
        }

        /* the next task of the same CLI sees none of it */
        char *next = rig_dispatch(r, ex, rig_model(false), rprompt, NULL);
        json_object *st = settle(r, next, "done");
        json_object_put(st);
        json_object *res = rig_result(r, next, false);
        const char *msg = strempty(tf_jstr(res, "message"));
        printf("real-agents: %s isolation, next task %s saw:\n%s\n", ex, next, msg);
        ck_assert_msg(strstr(msg, "END"), "the next task's script did not run: %s", msg);
        for (int k = 0; k < 2; k++)
                ck_assert_msg(!strstr(msg, ids[k]), "the next task %s sees a file of task %s:\n%s", next, ids[k], msg);
        json_object_put(res);
        fflush(stdout);
        assert_user_dirs_unchanged(r);
        free(ids[0]), free(ids[1]), free(next);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("real-agents");
        struct {
                const char *name;
                const TTest *test;
                int n;
        } cases[] = {
                {"answer", answer, 4},   /* pi, opencode × OpenAI, Anthropic */
                {"write_file", write_file, 2},
                {"rate_limit", rate_limit, 2},
                {"auth", auth, 4},       /* pi, opencode × OpenAI, Anthropic */
                {"slow", slow, 2},
                {"hang", hang, 2},
                {"hang_watchdog", hang_watchdog, 4}, /* pi, opencode × hang, stall */
                {"resume", resume, 2},
                {"isolation", isolation, 2},
                {"gate_fix_forward", gate_fix_forward, 2},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                TCase *tc = tcase_create(cases[i].name);
                /* OpenCode starts in 4–5 s; a few runs per test, plus retries */
                tcase_set_timeout(tc, 300);
                tcase_add_loop_test(tc, cases[i].test, 0, cases[i].n);
                suite_add_tcase(s, tc);
        }
        return s;
}

int main(void) {
        /* never a silent skip: without the CLIs the suite fails and says why */
        _cleanup_free_ char *missing = rig_agents_missing();
        if (missing) {
                fprintf(stderr, "real-agents: FAIL: %s\n", missing);
                return 1;
        }
        int r = rig_private_network();
        if (r < 0)
                printf("real-agents: no private network namespace on this machine (%s as uid %u); running in the "
                       "host's network namespace\n",
                       strerror(-r), (unsigned) geteuid());
        else
                printf("real-agents: running in a private network namespace (only lo, up)\n");
        if (getenv("TASKFERRY_TEST_REAL_AGENTS_NO_SANDBOX"))
                printf("real-agents: TASKFERRY_TEST_REAL_AGENTS_NO_SANDBOX is set: dispatching with --no-sandbox "
                       "(a check of the rig, not the acceptance test)\n");
        else if (getenv("TASKFERRY_TEST_REAL_AGENTS_RW_BIND_HOMES"))
                printf("real-agents: TASKFERRY_TEST_REAL_AGENTS_RW_BIND_HOMES is set: dispatching with the user's "
                       "executor dirs rw-bound (a check of the rig, not the acceptance test)\n");
        fflush(stdout);
        return tf_run_suite(suite());
}
