/* Log reading: result parsing (the log pass, message vs narration), the
 * failure classifier and boot-failure detection, over logs
 * written the way the shim writes them: the worker's stdout through the
 * executor normalizer, then its stderr appended raw. Real recorded streams
 * (tests/fixtures/real) and the spec's synthetic OC-x and PI-x streams
 * (tests/fixtures/synthetic). */

#include <check.h>
#include <fcntl.h>
#include <glob.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "executor.h"
#include "fileio.h"
#include "fs-util.h"
#include "json-util.h"
#include "log.h"
#include "logparse.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"
#include "unit.h"
#include "utf8.h"

#include "../bench/realistic-log.h"
#include "json-scan.h"

/* the log readers' depth bound: json_scan's, which logparse.c asserts its
 * tokener shares */
#define LOG_DEPTH_BOUND JSON_SCAN_DEPTH_MAX

#define REAL TASKFERRY_FIXTURES_DIR "/real/"
#define SYN TASKFERRY_FIXTURES_DIR "/synthetic/"
#define SES "019f90ea-1234-70e0-98dc-6847db316eb4"

#define GOLDEN_REALISTIC                                                                                         \
        "sid=01a22cbc-6a4d-7255-9375-4f3d589632c7-r690 tokens={\"total\":1000568,\"input\":939760,\"output\":60808,"  \
        "\"reasoning\":0,\"cache\":{\"write\":0,\"read\":0}} cost=1.0613760000001415 stop=1 json=1 "                   \
        "message=12/10ce906e5aaa3fa1 narration=73244/ec3b2eeabf2cf00d"
#define GOLDEN_REALISTIC_CLASSIFY "classify=1 pi_authentication_failed Incorrect API key provided (mockllm). boot=0 (null)"
#define GOLDEN_DELTA                                                                                             \
        "sid=initial-session tokens={\"total\":32445,\"input\":30900,\"output\":1545,\"cache\":{\"write\":0,"       \
        "\"read\":0}} cost=0.033989999999999874 stop=1 json=1 message=1592656/2d42056ab7832d1d "                      \
        "narration=1592656/2d42056ab7832d1d"
#define GOLDEN_DELTA_CLASSIFY "classify=0 (null) (null) boot=0 (null)"

static char *tmpdir;

static void setup(void) { tmpdir = tf_tmpdir_new("test-logparse"); }

static void teardown(void) { tmpdir = tf_tmpdir_free(tmpdir); }

/* ---- writing logs like the shim ---- */

static void append_bytes(int fd, const char *s, size_t len) {
        while (len > 0) {
                ssize_t k = write(fd, s, len);
                ck_assert_int_gt(k, 0);
                s += k;
                len -= (size_t) k;
        }
}

static char *new_log_path(void) {
        static unsigned counter;
        return strdup_printf("%s/log-%u.ndjson", tmpdir, counter++);
}

/* Normalize stdout text through the executor and append stderr raw. */
static char *write_log(const char *exec_id, const char *out, size_t out_len, const char *err, size_t err_len) {
        const executor *e = executor_find(exec_id);
        ck_assert_ptr_nonnull(e);
        char *path = new_log_path();
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);

        _cleanup_strv_free_ char **lines = tf_normalize(e, out, out_len);
        for (char **l = lines; l && *l; l++) {
                append_bytes(fd, *l, strlen(*l));
                append_bytes(fd, "\n", 1);
        }
        if (err) append_bytes(fd, err, err_len);
        return path;
}

static char *write_log_str(const char *exec_id, const char *out, const char *err) {
        return write_log(exec_id, out, strlen(out), err, err ? strlen(err) : 0);
}

/* The file's text; "" when there is none. */
static char *slurp(const char *path) { return tf_read_file(path, true); }

/* Fixture prefix → log; *ret_exit gets the recorded exit code. */
static char *write_fixture_log(const char *exec_id, const char *prefix, int *ret_exit) {
        _cleanup_free_ char *op = strdup_printf("%s.stdout.ndjson", prefix);
        _cleanup_free_ char *ep = strdup_printf("%s.stderr.txt", prefix);
        _cleanup_free_ char *xp = strdup_printf("%s.exit", prefix);
        _cleanup_free_ char *out = slurp(op), *err = slurp(ep), *ex = slurp(xp);
        *ret_exit = *ex ? atoi(ex) : 0;
        return write_log(exec_id, out, strlen(out), err, strlen(err));
}

/* ---- settlement: trailing classification, status, boot failure, crash
 * recovery, completeness, in that order ---- */

typedef struct outcome {
        const char *status; /* "done" | "crashed" */
        char *reason;
        char *detail;
        log_summary sum;
} outcome;

static void outcome_done(outcome *o) {
        free(o->reason);
        free(o->detail);
        log_summary_done(&o->sum);
}

static void settle(const char *exec_id, const char *log, int exit_code, outcome *o) {
        const executor *e = executor_find(exec_id);
        *o = (outcome) {};
        int r = log_classify_file(log, e->failure_prefix, e->structured_prefix, &o->reason, &o->detail);
        ck_assert_int_ge(r, 0);
        o->status = o->reason ? "crashed" : exit_code == 0 ? "done" : "crashed";
        if (streq(o->status, "crashed") && !o->reason && exit_code != 0) {
                r = log_boot_failure(log, &o->detail);
                ck_assert_int_ge(r, 0);
                if (r > 0) o->reason = strdup(e->boot_failure_reason);
        }
        ck_assert_int_eq(log_summarize_file(log, NULL, &o->sum), 0);
        if (streq(o->status, "crashed") && o->sum.has_stop && !log_line_is_blank(o->sum.message, strlen(o->sum.message)))
                o->status = "done";
}

static void settle_fixture(const char *exec_id, const char *prefix, outcome *o) {
        int ex;
        _cleanup_free_ char *log = write_fixture_log(exec_id, prefix, &ex);
        settle(exec_id, log, ex, o);
}

/* The verdict in o: its status, its reason (NULL: none) and, when it has
 * one, its detail (NULL: not checked). A mismatch names what (the fixture,
 * or the variant of one). */
static void check_verdict(const char *what, const outcome *o, const char *status, const char *reason,
                          const char *detail) {
        ck_assert_msg(streq(o->status, status), "%s: status %s, want %s", what, o->status, status);
        ck_assert_msg(streq_ptr(o->reason, reason), "%s: reason %s (%s), want %s", what, strnull(o->reason),
                      strnull(o->detail), strnull(reason));
        if (reason && detail)
                ck_assert_msg(streq_ptr(o->detail, detail), "%s: detail %s, want %s", what, strnull(o->detail), detail);
}

/* settle and check_verdict; the outcome stays in *o for the caller's other
 * checks. */
static void settle_as(const char *what, const char *exec_id, const char *log, int exit_code, const char *status,
                      const char *reason, const char *detail, outcome *o) {
        settle(exec_id, log, exit_code, o);
        check_verdict(what, o, status, reason, detail);
}

/* The same for the fixture at prefix (with its recorded exit code). */
static void settle_fixture_as(const char *exec_id, const char *prefix, const char *status, const char *reason,
                              const char *detail, outcome *o) {
        settle_fixture(exec_id, prefix, o);
        check_verdict(prefix, o, status, reason, detail);
}

/* s's tokens are json (NULL: none); a mismatch names what. */
static void assert_tokens(const char *what, const log_summary *s, const char *json) {
        const char *got = s->tokens ? json_to_line(s->tokens, NULL) : NULL;
        ck_assert_msg(streq_ptr(got, json), "%s: tokens %s, want %s", what, strnull(got), strnull(json));
}

/* ---- real fixtures ---- */

typedef struct real_case {
        const char *name;
        const char *status;
        const char *reason;  /* NULL: none */
        const char *detail;  /* NULL: don't check (or none when reason is NULL) */
        const char *message;
        const char *tokens;  /* NULL: no step_finish */
        double cost;         /* < 0: no cost */
} real_case;

#define PI_PONG_TOKENS "{\"total\":105,\"input\":100,\"output\":5,\"cache\":{\"write\":0,\"read\":0}}"
#define OC_PONG_TOKENS "{\"total\":105,\"input\":100,\"output\":5,\"reasoning\":0,\"cache\":{\"write\":0,\"read\":0}}"
/* a fixture done with message, its tokens and cost */
#define DONE(name, message, tokens, cost) {name, "done", NULL, NULL, message, tokens, cost}
/* one of the one-call answers (PONG, ticks) */
#define PI_PONG(name, message) DONE(name, message, PI_PONG_TOKENS, 0.00010999999999999999)
#define OC_PONG(name, message) DONE(name, message, OC_PONG_TOKENS, 0.00011)
/* a fixture crashed with reason (NULL: none) and detail, no message, no step_finish */
#define CRASHED(name, reason, detail) {name, "crashed", reason, detail, "", NULL, -1}

static const real_case real_cases[] = {
        PI_PONG("pi-answer", "PONG"),
        PI_PONG("pi-continue", "PONG"),
        PI_PONG("pi-resume", "PONG"),
        PI_PONG("pi-slow", "tick1 tick2 tick3 tick4 tick5 "),
        /* per-call usage summed: 120/20 + 160/4 */
        DONE("pi-write_file", "done", "{\"total\":304,\"input\":280,\"output\":24,\"cache\":{\"write\":0,\"read\":0}}",
             0.00015999999999999999 + 0.000168),
        /* exit 0, but the error events decide */
        CRASHED("pi-rate_limit", "pi_rate_limited",
                "429 Rate limit reached for mock-model (mockllm): please retry later."),
        /* "401 Incorrect API key provided" is an authentication failure, though
         * no older pattern matched it (it was pi_pi_error) */
        CRASHED("pi-auth", "pi_authentication_failed", "401 Incorrect API key provided (mockllm)."),
        /* the Anthropic body: pi prints it raw; the normalizer keeps its type and message */
        CRASHED("pi-auth_anthropic", "pi_authentication_failed",
                "401 authentication_error: invalid x-api-key (mockllm)"),
        /* killed (exit 124): JSON lines exist, so no boot failure; no reason at all */
        CRASHED("pi-hang", NULL, NULL),
        OC_PONG("opencode-answer", "PONG"),
        OC_PONG("opencode-continue", "PONG"),
        OC_PONG("opencode-resume", "PONG"),
        OC_PONG("opencode-slow", "tick1 tick2 tick3 tick4 tick5 "),
        DONE("opencode-write_file", "done",
             "{\"total\":304,\"input\":280,\"output\":24,\"reasoning\":0,\"cache\":{\"write\":0,\"read\":0}}",
             0.00016 + 0.000168),
        /* no top-level message: the serialized event is scanned; the detail is the
         * provider's message (error.data.message) */
        CRASHED("opencode-rate_limit", "rate_limited",
                "Rate limit reached for mock-model (mockllm): please retry later."),
        CRASHED("opencode-auth", "authentication_failed", "Incorrect API key provided (mockllm)."),
        CRASHED("opencode-auth_anthropic", "authentication_failed", "invalid x-api-key (mockllm)"),
        /* empty stdout, exit 124: no JSON, but no candidate line either */
        CRASHED("opencode-hang", NULL, NULL),
};
#undef DONE
#undef PI_PONG
#undef OC_PONG
#undef CRASHED

/* Expected session id: pi's first line `id`, opencode's `sessionID`. */
static char *fixture_session(const char *name) {
        _cleanup_free_ char *path = strdup_printf(REAL "%s.stdout.ndjson", name);
        _cleanup_free_ char *data = slurp(path);
        if (!*data) return NULL;
        *strchr(data, '\n') = 0;
        _cleanup_json_ json_object *o = NULL;
        ck_assert_int_eq(json_parse_strict(data, strlen(data), &o), 0);
        const char *s = startswith(name, "pi-") ? json_get_string(o, "id") : json_get_string(o, "sessionID");
        return s ? strdup(s) : NULL;
}

START_TEST(test_real_fixtures) {
        const real_case *c = &real_cases[_i];
        const char *exec_id = startswith(c->name, "pi-") ? "pi" : "opencode";
        _cleanup_free_ char *prefix = strdup_printf(REAL "%s", c->name);
        outcome o;
        settle_fixture_as(exec_id, prefix, c->status, c->reason, c->detail, &o);
        ck_assert_msg(streq(o.sum.message, c->message), "%s: message %s, want %s", c->name, o.sum.message, c->message);
        assert_tokens(c->name, &o.sum, c->tokens);
        if (c->cost >= 0) {
                ck_assert(o.sum.has_cost);
                ck_assert_msg(o.sum.cost == c->cost, "%s: cost %.20g want %.20g", c->name, o.sum.cost, c->cost);
        } else
                ck_assert(!o.sum.has_cost);
        _cleanup_free_ char *sid = fixture_session(c->name);
        if (sid)
                ck_assert_str_eq(o.sum.session_id, sid);
        else
                ck_assert_ptr_null(o.sum.session_id);
        ck_assert_int_eq(o.sum.has_json_line, !streq(c->name, "opencode-hang"));
        outcome_done(&o);
}
END_TEST

START_TEST(test_real_fixtures_all_covered) {
        glob_t g;
        ck_assert_int_eq(glob(REAL "*.stdout.ndjson", 0, NULL, &g), 0);
        ck_assert_uint_eq(g.gl_pathc, ELEMENTSOF(real_cases));
        for (size_t i = 0; i < g.gl_pathc; i++) {
                _cleanup_free_ char *copy = strdup(g.gl_pathv[i]);
                char *base = basename(copy);
                *strstr(base, ".stdout.ndjson") = 0;
                bool found = false;
                for (size_t k = 0; k < ELEMENTSOF(real_cases); k++) found = found || streq(real_cases[k].name, base);
                ck_assert_msg(found, "fixture %s has no expectation", base);
        }
        globfree(&g);
}
END_TEST


/* ---- synthetic OC-* / PI-* ---- */

/* A synthetic fixture and its verdict (check_verdict's status, reason,
 * detail) and, where set, its summary's message, narration, tokens, cost
 * (>= 0), session id and has_stop (>= 0). Variants of some follow in test_oc_*. */
typedef struct synthetic_case {
        const char *exec_id, *prefix, *status, *reason, *detail, *message, *narration, *tokens;
        double cost;
        const char *session_id;
        int has_stop;
} synthetic_case;

static const synthetic_case synthetic_cases[] = {
        {"opencode", SYN "oc-a", "done", NULL, NULL, "Checked README.md. The answer is PONG.\nStatus: DONE", NULL,
         "{\"total\":1210,\"input\":1100,\"output\":100,\"reasoning\":10,\"cache\":{\"write\":0,\"read\":512}}", 0.0012,
         "ses_fxA", true},
        {"opencode", SYN "oc-b", "done", NULL, NULL, "Fixed CRLF handling in src/parser.js; the parser test passes.",
         "I'll run the failing test first.\n\nFixed CRLF handling in src/parser.js; the parser test passes.",
         "{\"total\":2100,\"input\":1900,\"output\":170,\"reasoning\":30,\"cache\":{\"write\":0,\"read\":1000}}",
         0.0009 + 0.0004 + 0.0003, "ses_fxB", -1},
        {"opencode", SYN "oc-c", "crashed", "rate_limited", "rate_limit_exceeded: please retry after 60s", NULL, NULL,
         NULL, -1, NULL, -1},
        {"opencode", SYN "oc-d", "crashed", "authentication_failed", "Unauthorized: invalid API key provided", NULL,
         NULL, NULL, -1, NULL, -1},
        {"opencode", SYN "oc-e", "crashed", "boot_failure",
         "Error: Extension \"/x/y.js\" error: Provider y: \"baseUrl\" is required when defining models.", NULL, NULL,
         NULL, -1, NULL, -1},
        /* crash recovery: exit 1 after a stop */
        {"opencode", SYN "oc-f", "done", NULL, NULL, "All three call sites now use the shared helper.", NULL, NULL, -1,
         NULL, -1},
        {"pi", SYN "pi-a", "done", NULL, NULL, "PONG\nStatus: DONE", NULL,
         "{\"total\":1525,\"input\":0,\"output\":18,\"cache\":{\"write\":1507,\"read\":0}}", 0.000586725, SES, -1},
        {"pi", SYN "pi-b", "done", NULL, NULL, "Found README.md and src/. Done.",
         "Listing the repo first.\n\nFound README.md and src/. Done.", NULL, -1, NULL, -1},
        {"pi", SYN "pi-c", "crashed", "pi_rate_limited", "rate limit exceeded: 429 Too Many Requests", NULL, NULL, NULL,
         -1, NULL, -1},
        /* exit 0, plain text on stdout */
        {"pi", SYN "pi-d", "crashed", "pi_authentication_failed", "No API key found for openai.", NULL, NULL, NULL, -1,
         NULL, -1},
        {"pi", SYN "pi-e", "crashed", "pi_boot_failure", "Error: auth.json not found", NULL, NULL, NULL, -1, NULL, -1},
        {"pi", SYN "pi-f", "done", NULL, NULL, "PONG\nStatus: DONE", NULL, NULL, -1, NULL, -1},
};

START_TEST(test_synthetic_fixtures) {
        const synthetic_case *c = &synthetic_cases[_i];
        outcome o;
        settle_fixture_as(c->exec_id, c->prefix, c->status, c->reason, c->detail, &o);
        if (c->message)
                ck_assert_msg(streq(o.sum.message, c->message), "%s: message [%s], want [%s]", c->prefix, o.sum.message,
                              c->message);
        if (c->narration)
                ck_assert_msg(streq(o.sum.narration, c->narration), "%s: narration [%s], want [%s]", c->prefix,
                              o.sum.narration, c->narration);
        if (c->tokens) assert_tokens(c->prefix, &o.sum, c->tokens);
        if (c->cost >= 0)
                ck_assert_msg(o.sum.has_cost && o.sum.cost == c->cost, "%s: cost %.20g, want %.20g", c->prefix,
                              o.sum.cost, c->cost);
        if (c->session_id)
                ck_assert_msg(streq_ptr(o.sum.session_id, c->session_id), "%s: session %s, want %s", c->prefix,
                              strnull(o.sum.session_id), c->session_id);
        if (c->has_stop >= 0)
                ck_assert_msg(o.sum.has_stop == c->has_stop, "%s: has_stop %d", c->prefix, o.sum.has_stop);
        outcome_done(&o);
}
END_TEST

/* Replace the first occurrence of `from` in the fixture's stdout with `to`. */
static char *variant_log(const char *exec_id, const char *prefix, const char *from, const char *to,
                         const char *stderr_text) {
        _cleanup_free_ char *op = strdup_printf("%s.stdout.ndjson", prefix);
        _cleanup_free_ char *out = slurp(op);
        _cleanup_free_ char *changed = NULL;
        if (from) {
                char *at = strstr(out, from);
                ck_assert_ptr_nonnull(at);
                changed = strdup_printf("%.*s%s%s", (int) (at - out), out, to, at + strlen(from));
        } else
                changed = strdup(out);
        return write_log_str(exec_id, changed, stderr_text);
}

START_TEST(test_real_opencode_error_details) {
        /* The real opencode error event has no top-level message: the detail is
         * error.data.message, never the serialized event. */
        const char *names[] = { "opencode-rate_limit", "opencode-auth", "opencode-auth_anthropic" };
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                _cleanup_free_ char *prefix = strdup_printf(REAL "%s", names[i]);
                outcome o;
                settle_fixture("opencode", prefix, &o);
                ck_assert_msg(!strchr(o.detail, '{'), "%s: detail %s", names[i], o.detail);
                outcome_done(&o);
        }
        /* without data.message the serialized event stays the (capped) detail */
        _cleanup_free_ char *log = variant_log("opencode", REAL "opencode-auth",
                                               "\"message\":\"Incorrect API key provided (mockllm).\",", "", NULL);
        outcome o;
        settle_as("opencode-auth without data.message", "opencode", log, 1, "crashed", "authentication_failed", NULL,
                  &o);
        ck_assert(startswith(o.detail, "{\"type\":\"error\",\"timestamp\":"));
        ck_assert_uint_eq(utf8_utf16_length(o.detail, strlen(o.detail)), 500);
        ck_assert_str_eq(o.detail + strlen(o.detail) - strlen("…"), "…");
        outcome_done(&o);
}
END_TEST

START_TEST(test_oc_c) {
        outcome o;
        struct {
                const char *msg, *reason;
        } variants[] = {
                { "insufficient_quota: out of credits", "payment_required" },
                { "usage_limit_exceeded: monthly quota reached", "rate_limited" },
        };
        for (size_t i = 0; i < ELEMENTSOF(variants); i++) {
                _cleanup_free_ char *to = strdup_printf("\"message\":\"%s\",\"error\"", variants[i].msg);
                _cleanup_free_ char *log = variant_log(
                        "opencode", SYN "oc-c", "\"message\":\"rate_limit_exceeded: please retry after 60s\",\"error\"",
                        to, "Error: provider request failed (APIError)\n");
                settle_as(variants[i].msg, "opencode", log, 1, "crashed", variants[i].reason, variants[i].msg, &o);
                outcome_done(&o);
        }
}
END_TEST

START_TEST(test_oc_d) {
        outcome o;
        /* Variant: no error event, the raw stderr line decides. */
        _cleanup_free_ char *out = slurp(SYN "oc-d.stdout.ndjson");
        *strchr(out, '\n') = 0; /* keep only step_start */
        _cleanup_free_ char *log = write_log_str("opencode", out, "No API key found for openai.\n");
        settle_as("oc-d without its error event", "opencode", log, 1, "crashed", "authentication_failed",
                  "No API key found for openai.", &o);
        outcome_done(&o);
}
END_TEST

START_TEST(test_oc_e) {
        outcome o;
        /* Without the Error: line the detail is the last non-JSON line. */
        _cleanup_free_ char *err = slurp(SYN "oc-e.stderr.txt");
        char *at = strstr(err, "Error: Extension");
        ck_assert_ptr_nonnull(at);
        memmove(at, strchr(at, '\n') + 1, strlen(strchr(at, '\n') + 1) + 1);
        _cleanup_free_ char *log = write_log_str("opencode", "", err);
        settle_as("oc-e without its Error: line", "opencode", log, 1, "crashed", "boot_failure",
                  "    at async main (file:///opt/opencode/cli.js:3:1)", &o);
        outcome_done(&o);

        /* pi names it pi_boot_failure. */
        _cleanup_free_ char *log2 = write_log_str("pi", "", "Error: x\n");
        settle_as("pi's boot failure", "pi", log2, 2, "crashed", "pi_boot_failure", NULL, &o);
        outcome_done(&o);
}
END_TEST

/* ---- classifier ---- */

static int classify(const char *line, const char *prefix, const char *sprefix, char **reason, char **detail) {
        *reason = *detail = NULL;
        return log_classify_line(line, strlen(line), prefix, sprefix, reason, detail);
}

/* line classified (prefix, sprefix as log_classify_line takes them) as
 * reason (NULL: not classified) with detail (NULL: not checked). */
static void classify_is(const char *line, const char *prefix, const char *sprefix, const char *reason,
                        const char *detail) {
        _cleanup_free_ char *got = NULL, *got_detail = NULL;
        int r = classify(line, prefix, sprefix, &got, &got_detail);
        if (!reason) {
                ck_assert_msg(r == 0, "'%s' classified as %s", line, got);
                return;
        }
        ck_assert_msg(r == 1, "'%s' not classified, want %s", line, reason);
        ck_assert_msg(streq(got, reason), "'%s' → %s, want %s", line, got, reason);
        if (detail) ck_assert_msg(streq(got_detail, detail), "'%s': detail %s, want %s", line, got_detail, detail);
}

static void assert_bucket(const char *line, const char *want) { classify_is(line, NULL, "opencode", want, NULL); }

START_TEST(test_classifier_patterns) {
        assert_bucket("insufficient_quota", "payment_required");
        assert_bucket("Payment Required", "payment_required");
        assert_bucket("PAYMENT-REQUIRED", "payment_required");
        assert_bucket("check your billing details", "payment_required");
        assert_bucket("rebilling", NULL);
        assert_bucket("status: 402", "payment_required");
        assert_bucket("status_code=402", "payment_required");
        assert_bucket("status 4020", NULL);
        assert_bucket("401 Unauthorized", "authentication_failed");
        assert_bucket("Invalid API key", "authentication_failed");
        assert_bucket("invalid_api_key", "authentication_failed");
        assert_bucket("Authentication failed", "authentication_failed");
        assert_bucket("HTTP status:401", "authentication_failed");
        assert_bucket("No API key found for openai.", "authentication_failed");
        /* what the real pi and OpenCode report */
        assert_bucket("401 Incorrect API key provided (mockllm).", "authentication_failed");
        assert_bucket("{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"x\"}}",
                      "authentication_failed");
        assert_bucket("APIError {\"message\":\"nope\",\"statusCode\":401,\"isRetryable\":false}",
                      "authentication_failed");
        assert_bucket("{\"type\":\"error\",\"error\":{\"data\":{\"statusCode\":401}}}", "authentication_failed");
        assert_bucket("status code: 401", "authentication_failed");
        assert_bucket("\"statusCode\":4010", NULL);
        assert_bucket("APIError {\"statusCode\":402}", "payment_required");
        assert_bucket("\033[91m\033[1mError: \033[0mIncorrect API key provided (mockllm).", "authentication_failed");
        assert_bucket("\033[91m\033[1mError: \033[0mUnauthorized", "authentication_failed");
        /* colour codes do not hide a word: "\033[1mrate\033[0mlimit" is "ratelimit" */
        assert_bucket("\033[1mrate\033[0mlimit", "rate_limited");
        assert_bucket("Rate limit reached", "rate_limited");
        assert_bucket("ratelimit", "rate_limited");
        assert_bucket("usage limit", "rate_limited");
        assert_bucket("Too Many Requests", "rate_limited");
        assert_bucket("HTTP 429", "rate_limited");
        assert_bucket("error 4290", NULL);
        assert_bucket("x429", NULL);
        assert_bucket("monthly quota", "rate_limited");
        assert_bucket("quotas", NULL);
        /* Order: payment before authentication before rate limit. */
        assert_bucket("429 insufficient_quota", "payment_required");
        assert_bucket("429 unauthorized", "authentication_failed");
        /* W7: counts and words that only look like failures. */
        assert_bucket("401 tests passed, 0 failed", NULL);
        assert_bucket("Compiling 429 files", "rate_limited"); /* the original's patterns are that blunt */
        assert_bucket("", NULL);
        assert_bucket("all good", NULL);
}
END_TEST

START_TEST(test_classifier_json) {
        /* a colour-coded raw line: matched and reported without the codes */
        classify_is("\033[91m\033[1mError: \033[0mIncorrect API key provided (mockllm).", NULL, "opencode",
                    "authentication_failed", "Error: Incorrect API key provided (mockllm).");
        /* text events are never scanned (W7) */
        classify_is("{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"429 quota rate limit exceeded\"}}", NULL,
                    "opencode", NULL, NULL);
        /* no JSON event other than type:"error" fails */
        classify_is("{\"type\":\"step_finish\",\"message\":\"rate limit\"}", NULL, "opencode", NULL, NULL);
        classify_is("{\"message\":\"unauthorized\"}", NULL, "opencode", NULL, NULL);
        classify_is("[\"unauthorized\"]", NULL, "opencode", NULL, NULL);

        /* W8: unknown structured errors */
        const char *w8 = "{\"type\":\"error\",\"error\":{\"name\":\"UnknownError\",\"data\":{\"message\":\"Streaming "
                         "response failed\"}}}";
        classify_is(w8, NULL, "opencode", "opencode_unknownerror", "Streaming response failed");
        classify_is(w8, "pi", "pi", "pi_unknownerror", NULL);
        /* no data.message: the scanned text (the serialized event) */
        classify_is("{\"type\":\"error\",\"error\":{\"name\":\"Context  Overflow--Error!\"}}", NULL, "opencode",
                    "opencode_context_overflow_error_",
                    "{\"type\":\"error\",\"error\":{\"name\":\"Context  Overflow--Error!\"}}");
        classify_is("{\"type\":\"error\",\"message\":\"boom\"}", "pi", "pi", "pi_error", "boom");
        /* pi's own events */
        classify_is("{\"type\":\"error\",\"message\":\"Connection error.\",\"error\":{\"name\":\"pi_error\",\"data\":{"
                    "\"message\":\"Connection error.\"}}}",
                    "pi", "pi", "pi_pi_error", "Connection error.");
        /* Bucket match on the message: detail is the message, prefix applied. */
        classify_is("{\"type\":\"error\",\"message\":\"Too many requests\",\"error\":{\"name\":\"X\",\"data\":{"
                    "\"message\":\"other\"}}}",
                    "shell", "shell", "shell_rate_limited", "Too many requests");
        /* A non-string message: the whole serialized event is scanned. */
        classify_is("{\"type\":\"error\",\"message\":5,\"error\":{\"data\":{\"statusCode\":429}}}", NULL, "opencode",
                    "rate_limited", NULL);
        /* "." does not cross a newline, as in JavaScript. */
        classify_is("{\"type\":\"error\",\"message\":\"rate\\nlimit\"}", NULL, "opencode", "opencode_error", NULL);
}
END_TEST

START_TEST(test_detail_cap) {
        _cleanup_free_ char *a500 = malloc(501), *a501 = malloc(502);
        memset(a500, 'a', 500);
        a500[500] = 0;
        memset(a501, 'a', 501);
        a501[501] = 0;
        _cleanup_free_ char *c500 = failure_detail_cap(a500), *c501 = failure_detail_cap(a501);
        ck_assert_str_eq(c500, a500);
        ck_assert_uint_eq(strlen(c501), 499 + strlen("…"));
        ck_assert(strncmp(c501, a501, 499) == 0);
        ck_assert_str_eq(c501 + 499, "…");

        /* UTF-16 units: an emoji is 2 units. 250 emoji = 500 units → unchanged. */
        char emoji[] = "\xF0\x9F\x98\x80";
        _cleanup_free_ char *e250 = calloc(1, 251 * 4), *e251 = calloc(1, 252 * 4);
        for (int i = 0; i < 250; i++) strcat(e250, emoji);
        for (int i = 0; i < 251; i++) strcat(e251, emoji);
        _cleanup_free_ char *ce250 = failure_detail_cap(e250), *ce251 = failure_detail_cap(e251);
        ck_assert_str_eq(ce250, e250);
        ck_assert_uint_le(utf8_utf16_length(ce251, strlen(ce251)), 500);
        ck_assert_str_eq(ce251 + strlen(ce251) - strlen("…"), "…");

        /* The classifier caps details. */
        _cleanup_free_ char *line = strdup_printf("HTTP 429 %s", a501);
        _cleanup_free_ char *reason = NULL, *detail = NULL;
        ck_assert_int_eq(classify(line, NULL, "opencode", &reason, &detail), 1);
        ck_assert_uint_eq(utf8_utf16_length(detail, strlen(detail)), 500);
        ck_assert(startswith(detail, "HTTP 429 aaa"));
        ck_assert_ptr_null(failure_detail_cap(NULL));
}
END_TEST

START_TEST(test_classify_file) {
        _cleanup_free_ char *log = write_log_str(
                "opencode",
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"messageID\":\"m\",\"text\":\"429 rate limit\"}}\n",
                "warning: 401 tests passed, 0 failed\nfirst: Too many requests\nsecond: unauthorized\n{partial 402 "
                "billing");
        _cleanup_free_ char *reason = NULL, *detail = NULL;
        ck_assert_int_eq(log_classify_file(log, "pi", "pi", &reason, &detail), 1);
        ck_assert_str_eq(reason, "pi_rate_limited");
        ck_assert_str_eq(detail, "first: Too many requests");

        /* The trailing fragment is classified too. */
        _cleanup_free_ char *log2 = write_log_str("opencode", "", "ok\n{partial payment required");
        _cleanup_free_ char *r2 = NULL, *d2 = NULL;
        ck_assert_int_eq(log_classify_file(log2, NULL, "opencode", &r2, &d2), 1);
        ck_assert_str_eq(r2, "payment_required");
        ck_assert_str_eq(d2, "{partial payment required");

        _cleanup_free_ char *missing = strdup_printf("%s/nope.ndjson", tmpdir);
        ck_assert_int_eq(log_classify_file(missing, NULL, "opencode", &r2, &d2), 0);
}
END_TEST

START_TEST(test_w7_no_false_positive) {
        /* A text event mentioning 429/quota/rate limits, then stop, exit 0: done, no reason. */
        _cleanup_free_ char *log = write_log_str(
                "opencode",
                "{\"type\":\"text\",\"sessionID\":\"s\",\"part\":{\"type\":\"text\",\"messageID\":\"m\",\"text\":"
                "\"The 429 quota rate limit handling is fixed.\"}}\n"
                "{\"type\":\"step_finish\",\"part\":{\"type\":\"step-finish\",\"messageID\":\"m\",\"reason\":\"stop\"}}\n",
                NULL);
        outcome o;
        settle_as("a text event about rate limits", "opencode", log, 0, "done", NULL, NULL, &o);
        outcome_done(&o);

        /* Raw `401 tests passed, 0 failed` + exit 1: not authentication_failed but boot_failure (W10). */
        _cleanup_free_ char *log2 = write_log_str("opencode", "401 tests passed, 0 failed\n", NULL);
        settle_as("a raw test count", "opencode", log2, 1, "crashed", "boot_failure", "401 tests passed, 0 failed", &o);
        outcome_done(&o);
}
END_TEST

/* ---- boot failure ---- */

static char *write_raw(const char *data, size_t len) {
        char *path = new_log_path();
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        append_bytes(fd, data, len);
        return path;
}

static int boot(const char *data, char **detail) {
        _cleanup_free_ char *path = write_raw(data, strlen(data));
        *detail = NULL;
        return log_boot_failure(path, detail);
}

/* A log (NULL: none at all) and what log_boot_failure says of it: the
 * detail and 1, or none and 0. */
static const struct {
        const char *log, *detail;
        int r;
} boot_cases[] = {
        {"warning: x\nerror: first\nERROR second\nat foo\n\n   \n", "ERROR second", 1},
        {"Errors: not this\nErrorX: nor this\nlast line", "last line", 1},
        {"Error:tight\ntrailing\n", "Error:tight", 1},
        {"  Error: indented does not count\nother\n", "other", 1},
        /* OpenCode's coloured error, then its runtime banner: the error is the detail */
        {"\x1b[91m\x1b[1mError: \x1b[0mEROFS: read-only file system, mkdir '/h/.local/share/opencode'\n"
         "\nBun v1.3.14 (Linux x64 baseline)\n",
         "Error: EROFS: read-only file system, mkdir '/h/.local/share/opencode'", 1},
        /* pi's uncaught ENOENT (no "error:" prefix) beats the stack lines after it */
        {"file:///x/main.js:1\nError: ENOENT: no such file or directory, mkdir '/a/sessions/--w--'\n"
         "    at async mkdir (node:internal/fs/promises:858:10)\nNode.js v20.20.2\n",
         "Error: ENOENT: no such file or directory, mkdir '/a/sessions/--w--'", 1},
        {"cannot write: Read-only file system\nbanner v1\n", "cannot write: Read-only file system", 1},
        /* A brace-starting non-JSON line is a candidate too. */
        {"Warning: a\n{oops not json\n", "{oops not json", 1},
        /* OpenCode's colour-coded Error: line beats its runtime banner; the
         * detail has no escape codes */
        {"\033[0m\n\033[91m\033[1mError: \033[0mEROFS: read-only file system, mkdir "
         "'/h/.local/share/opencode'\n\nBun v1.3.14 (Linux x64 baseline)\n",
         "Error: EROFS: read-only file system, mkdir '/h/.local/share/opencode'", 1},
        {"\033[1mlast\033[0m line\n", "last line", 1},
        /* Any JSON line anywhere: no boot failure. */
        {"Error: x\n{\"type\":\"step_start\"}\nError: y\n", NULL, 0},
        /* Nothing but blank lines, or an empty/missing log: no candidate. */
        {"\n  \n\t\n", NULL, 0},
        {"", NULL, 0},
        {NULL, NULL, 0},
};

START_TEST(test_boot_failure) {
        const char *log = boot_cases[_i].log, *want = boot_cases[_i].detail;
        _cleanup_free_ char *d = NULL, *missing = strdup_printf("%s/nope.ndjson", tmpdir);
        int r = log ? boot(log, &d) : log_boot_failure(missing, &d);
        ck_assert_msg(r == boot_cases[_i].r, "[%s]: %d, want %d", strnull(log), r, boot_cases[_i].r);
        ck_assert_msg(streq_ptr(d, want), "[%s]: detail [%s], want [%s]", strnull(log), strnull(d), strnull(want));
}
END_TEST

START_TEST(test_boot_failure_large) {
        /* One 70 KB raw line only: larger than 64 KiB, its partial tail is dropped → no reason. */
        size_t big = 70 * 1000;
        _cleanup_free_ char *one = malloc(big + 2);
        memset(one, 'x', big);
        memcpy(one, "Error: ", 7);
        one[big] = '\n';
        one[big + 1] = 0;
        _cleanup_free_ char *d = NULL;
        ck_assert_int_eq(boot(one, &d), 0);

        /* A > 64 KiB JSON line is evidence of a start. */
        _cleanup_free_ char *jl = malloc(big + 64);
        int n = sprintf(jl, "{\"type\":\"text\",\"part\":{\"text\":\"");
        memset(jl + n, 'y', big);
        strcpy(jl + n + big, "\"}}\nError: after\n");
        ck_assert_int_eq(boot(jl, &d), 0);

        /* The tail starts inside a line that contains "Error: partial": that
         * partial first line is dropped, so the detail is the last line. */
        size_t tail = 64 * 1024;
        const char *last = "the last line\n";
        const char *cut = "Error: partial line text\n";
        size_t filler = 5000;
        size_t total = filler + tail;
        _cleanup_free_ char *buf = malloc(total + 1);
        memset(buf, 'z', total);
        /* line 1: "Error: early" (before the tail window) */
        memcpy(buf, "Error: early\n", 13);
        /* the tail window begins at total - tail: make the cut land right before "Error: partial" */
        size_t start = total - tail;
        memcpy(buf + start, cut, strlen(cut));
        /* the rest: newline-separated z lines, then the last line */
        for (size_t i = start + strlen(cut) + 80; i < total - 200; i += 81) buf[i] = '\n';
        memcpy(buf + total - strlen(last), last, strlen(last));
        buf[total - strlen(last) - 1] = '\n';
        buf[total] = 0;
        ck_assert_int_eq(boot(buf, &d), 1);
        ck_assert_str_eq(d, "the last line");
}
END_TEST

/* ---- summaries: the log pass, message vs narration ---- */

static void summarize_str(const char *log_text, const char *initial, log_summary *s) {
        _cleanup_free_ char *path = write_raw(log_text, strlen(log_text));
        ck_assert_int_eq(log_summarize_file(path, initial, s), 0);
}

START_TEST(test_summary_basics) {
        log_summary s;
        _cleanup_free_ char *missing = strdup_printf("%s/nope.ndjson", tmpdir);
        ck_assert_int_eq(log_summarize_file(missing, "ses_init", &s), 0);
        ck_assert_str_eq(s.message, "");
        ck_assert_str_eq(s.narration, "");
        ck_assert_str_eq(s.session_id, "ses_init");
        ck_assert_ptr_null(s.tokens);
        ck_assert(!s.has_cost && !s.has_stop && !s.has_json_line);
        log_summary_done(&s);

        ck_assert_int_eq(log_summarize_file(missing, NULL, &s), 0);
        ck_assert_ptr_null(s.session_id);
        log_summary_done(&s);

        /* Raw lines only. */
        summarize_str("Error: boom\n", "ses_init", &s);
        ck_assert(!s.has_json_line);
        ck_assert_str_eq(s.session_id, "ses_init");
        log_summary_done(&s);

        /* Last truthy sessionID wins; "" is not truthy; noise is skipped. */
        summarize_str("noise\n{\"sessionID\":\"a\"}\n{\"sessionID\":\"b\",\"type\":\"x\"}\n{\"sessionID\":\"\"}\n"
                      "{\"sessionID\":null}\n",
                      "ses_init", &s);
        ck_assert(s.has_json_line);
        ck_assert_str_eq(s.session_id, "b");
        log_summary_done(&s);
}
END_TEST

/* A log and its summary's message, narration and has_stop (-1: not
 * checked). */
static const struct {
        const char *log, *message, *narration;
        int has_stop;
} message_cases[] = {
        /* R2: no stop → the last text's messageID; parts joined with nothing. */
        {"{\"type\":\"text\",\"part\":{\"messageID\":\"m1\",\"text\":\"a\"}}\n"
         "{\"type\":\"text\",\"part\":{\"messageID\":\"m2\",\"text\":\"b\"}}\n"
         "{\"type\":\"text\",\"part\":{\"messageID\":\"m1\",\"text\":\"c\"}}\n"
         "{\"type\":\"text\",\"part\":{\"messageID\":\"m2\",\"text\":\"d\"}}\n"
         "{\"type\":\"text\",\"part\":{\"messageID\":\"m1\",\"text\":5}}\n",
         "bd", "ac\n\nbd", false},
        /* The last stop wins; a stop message without text gives "" (no fallback). */
        {"{\"type\":\"text\",\"part\":{\"messageID\":\"m1\",\"text\":\"one\"}}\n"
         "{\"type\":\"step_finish\",\"part\":{\"messageID\":\"m1\",\"reason\":\"stop\"}}\n"
         "{\"type\":\"step_finish\",\"part\":{\"messageID\":\"m9\",\"reason\":\"stop\"}}\n"
         "{\"type\":\"text\",\"part\":{\"messageID\":\"m2\",\"text\":\"two\"}}\n",
         "", "one\n\ntwo", true},
        /* A stop without messageID falls back to the last text; texts without
         * messageID are their own message; a numeric messageID is not the string. */
        {"{\"type\":\"text\",\"part\":{\"text\":\"anon\"}}\n"
         "{\"type\":\"text\",\"part\":{\"messageID\":5,\"text\":\"five\"}}\n"
         "{\"type\":\"text\",\"part\":{\"messageID\":\"5\",\"text\":\"str\"}}\n"
         "{\"type\":\"text\",\"part\":{\"text\":\"-again\"}}\n"
         "{\"type\":\"step_finish\",\"part\":{\"reason\":\"stop\"}}\n",
         "anon-again", "anon-again\n\nfive\n\nstr", -1},
        /* tool events are not narration; reason other than stop is not final. */
        {"{\"type\":\"tool_use\",\"part\":{\"type\":\"tool\",\"tool\":\"bash\",\"state\":{\"output\":"
         "\"x\"}}}\n{\"type\":\"text\",\"part\":{\"messageID\":\"m1\",\"text\":\"hi\"}}\n"
         "{\"type\":\"step_finish\",\"part\":{\"messageID\":\"m0\",\"reason\":\"tool-calls\"}}\n",
         "hi", "hi", false},
};

START_TEST(test_summary_messages) {
        const char *log = message_cases[_i].log;
        log_summary s;
        summarize_str(log, NULL, &s);
        ck_assert_msg(streq(s.message, message_cases[_i].message), "[%s]: message [%s], want [%s]", log, s.message,
                      message_cases[_i].message);
        ck_assert_msg(streq(s.narration, message_cases[_i].narration), "[%s]: narration [%s], want [%s]", log,
                      s.narration, message_cases[_i].narration);
        if (message_cases[_i].has_stop >= 0)
                ck_assert_msg(s.has_stop == message_cases[_i].has_stop, "[%s]: has_stop %d", log, s.has_stop);
        log_summary_done(&s);
}
END_TEST

START_TEST(test_summary_tokens) {
        log_summary s;
        summarize_str("{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":1,\"extra\":\"k\",\"output\":2},"
                      "\"cost\":0.1}}\n"
                      "{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"total\":10,\"input\":3,\"reasoning\":4,"
                      "\"cache\":{\"read\":7}},\"cost\":0.2}}\n"
                      "{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":1.5},\"cost\":\"x\"}}\n"
                      "{\"type\":\"step_finish\",\"part\":{\"cost\":1}}\n",
                      NULL, &s);
        assert_tokens("summed", &s,
                      "{\"input\":5.5,\"extra\":\"k\",\"output\":2,\"total\":10,\"reasoning\":4,\"cache\":{"
                      "\"read\":7,\"write\":0}}");
        ck_assert(s.has_cost);
        ck_assert(s.cost == 0.1 + 0.2 + 1);
        log_summary_done(&s);

        /* The first tokens object is taken as-is. */
        summarize_str("{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"weird\":true}}}\n", NULL, &s);
        assert_tokens("the first", &s, "{\"weird\":true}");
        ck_assert(!s.has_cost);
        log_summary_done(&s);
}
END_TEST

/* The sum is {...sum, ...t} with the fields summed: members of later steps
 * replace in place or are appended, a cache is merged the same way, a first
 * value that is no object spreads to nothing. */
START_TEST(test_summary_tokens_merge_order) {
        log_summary s;
        summarize_str("{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"a\":1,\"cache\":{\"x\":1,\"read\":2}}}}\n"
                      "{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"b\":2,\"a\":\"s\",\"cache\":{\"y\":3,\"write\":1}}}}\n"
                      "{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":2,\"cache\":5}}}\n"
                      "{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":0.5,\"cache\":{\"read\":1}}}}\n",
                      NULL, &s);
        assert_tokens("merged", &s,
                      "{\"a\":\"s\",\"cache\":{\"x\":1,\"read\":3,\"y\":3,\"write\":1},\"b\":2,\"input\":2.5}");
        log_summary_done(&s);

        summarize_str("{\"type\":\"step_finish\",\"part\":{\"tokens\":7}}\n"
                      "{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"total\":1,\"cache\":{\"read\":1}}}}\n"
                      "{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"total\":2}}}\n",
                      NULL, &s);
        assert_tokens("after a number", &s, "{\"total\":3,\"cache\":{\"read\":1,\"write\":0}}");
        log_summary_done(&s);

        /* many steps, each with a member of its own: kept in order up to 64
         * members, the rest left out, and input summed over all */
        enum { STEPS = 3000 };
        _cleanup_free_ char *log = strdup("");
        _cleanup_free_ char *want = strdup_printf("{\"input\":%d", STEPS);
        for (int i = 0; i < STEPS; i++) {
                char *l = strdup_printf("%s{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":1,\"k%d\":%d}}}\n",
                                        log, i, i);
                char *w = i < 63 ? strdup_printf("%s,\"k%d\":%d", want, i, i) : strdup(want);
                ck_assert_ptr_nonnull(l);
                ck_assert_ptr_nonnull(w);
                free(log);
                free(want);
                log = l;
                want = w;
        }
        char *w = strdup_printf("%s}", want);
        free(want);
        want = w;
        summarize_str(log, NULL, &s);
        assert_tokens("3000 steps", &s, want);
        log_summary_done(&s);

        /* a first step of more members than that: the first 64 */
        _cleanup_free_ char *wide = strdup("{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":1");
        _cleanup_free_ char *wide_want = strdup("{\"input\":1");
        for (int i = 0; i < 100; i++) {
                char *l = strdup_printf("%s,\"w%d\":%d", wide, i, i);
                char *w2 = i < 63 ? strdup_printf("%s,\"w%d\":%d", wide_want, i, i) : strdup(wide_want);
                ck_assert_ptr_nonnull(l);
                ck_assert_ptr_nonnull(w2);
                free(wide);
                free(wide_want);
                wide = l;
                wide_want = w2;
        }
        char *l = strdup_printf("%s}}}\n", wide);
        free(wide);
        wide = l;
        w = strdup_printf("%s}", wide_want);
        free(wide_want);
        wide_want = w;
        summarize_str(wide, NULL, &s);
        assert_tokens("a wide first step", &s, wide_want);
        log_summary_done(&s);
}
END_TEST

START_TEST(test_summary_large_log) {
        /* A ~100 MB log: streamed, never read whole. */
        _cleanup_free_ char *path = new_log_path();
        _cleanup_fclose_ FILE *f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        char chunk[1001];
        memset(chunk, 'q', 1000);
        chunk[1000] = 0;
        size_t written = 0, texts = 0;
        while (written < 100u * 1000 * 1000) {
                int k = fprintf(f, "{\"type\":\"text\",\"part\":{\"messageID\":\"%s\",\"text\":\"%s\"}}\n",
                                texts % 2 ? "m2" : "m1", chunk);
                ck_assert_int_gt(k, 0);
                written += (size_t) k;
                texts++;
                k = fprintf(f, "raw stderr noise n%zu %s\n", texts, chunk);
                written += (size_t) k;
        }
        fprintf(f, "{\"type\":\"step_finish\",\"sessionID\":\"ses_big\",\"part\":{\"messageID\":\"m1\",\"reason\":"
                   "\"stop\",\"tokens\":{\"total\":1}}}\n");
        ck_assert_int_eq(fclose(TAKE_PTR(f)), 0);

        log_summary s;
        ck_assert_int_eq(log_summarize_file(path, NULL, &s), 0);
        size_t m1 = (texts + 1) / 2, m2 = texts / 2;
        ck_assert_uint_eq(strlen(s.message), m1 * 1000);
        ck_assert_uint_eq(strlen(s.narration), (m1 + m2) * 1000 + 2);
        ck_assert_str_eq(s.session_id, "ses_big");
        log_summary_done(&s);

        _cleanup_free_ char *reason = NULL, *detail = NULL;
        ck_assert_int_eq(log_classify_file(path, NULL, "opencode", &reason, &detail), 0);
        ck_assert_int_eq(log_boot_failure(path, &detail), 0);
        unlink(path);
}
END_TEST

START_TEST(test_blank) {
        ck_assert(log_line_is_blank("", 0));
        ck_assert(log_line_is_blank(" \t\r\n\v\f", 6));
        ck_assert(log_line_is_blank("\xC2\xA0\xE2\x80\xA8\xE3\x80\x80\xEF\xBB\xBF", 11));
        ck_assert(!log_line_is_blank(" x ", 3));
        ck_assert(!log_line_is_blank("\xC2", 1));
}
END_TEST

/* ---- golden outputs on big logs ----
 * The figures below were produced by main's logparse (fbdc228, before the
 * speed work): the faster reader must give byte-identical results
 * on a big realistic log (every recorded stream, normalized, in rounds with
 * their own ids: thousands of messages) and on the bench's single-message
 * pi-delta log. Texts are compared by length and FNV-1a 64. */

static uint64_t fnv1a(const char *s) {
        uint64_t h = 0xcbf29ce484222325ULL;
        for (; s && *s; s++) h = (h ^ (unsigned char) *s) * 0x100000001b3ULL;
        return h;
}

static char *summary_digest(const char *path) {
        log_summary s = {0};
        ck_assert_int_eq(log_summarize_file(path, "initial-session", &s), 0);
        char cost[32];
        char *d = strdup_printf("sid=%s tokens=%s cost=%s stop=%d json=%d message=%zu/%016llx narration=%zu/%016llx",
                                strnull(s.session_id), s.tokens ? json_to_line(s.tokens, NULL) : "none",
                                s.has_cost ? js_number_format(s.cost, cost) : "none", s.has_stop, s.has_json_line,
                                strlen(s.message), (unsigned long long) fnv1a(s.message), strlen(s.narration),
                                (unsigned long long) fnv1a(s.narration));
        log_summary_done(&s);
        return d;
}

static char *classify_digest(const char *path, const executor *e) {
        _cleanup_free_ char *reason = NULL, *detail = NULL, *boot = NULL;
        int r = log_classify_file(path, e->failure_prefix, e->structured_prefix, &reason, &detail);
        int b = log_boot_failure(path, &boot);
        return strdup_printf("classify=%d %s %s boot=%d %s", r, strnull(reason), strnull(detail), b, strnull(boot));
}

START_TEST(test_golden_realistic_log) {
        _cleanup_free_ char *path = new_log_path();
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        size_t written = 0, rounds = 0, fixtures = 0;
        ck_assert_int_eq(realistic_log_write(fd, (size_t) 8 << 20, &written, &rounds, &fixtures), 0);
        ck_assert_uint_eq(fixtures, 18);
        _cleanup_free_ char *d = summary_digest(path);
        ck_assert_str_eq(d, GOLDEN_REALISTIC);
        _cleanup_free_ char *c = classify_digest(path, executor_find("pi"));
        ck_assert_str_eq(c, GOLDEN_REALISTIC_CLASSIFY);
}
END_TEST

START_TEST(test_golden_delta_log) {
        const char *delta = "{\"type\":\"message_update\",\"assistantMessageEvent\":{\"type\":\"text_delta\",\"contentIndex\":0,"
                            "\"delta\":\"Some streamed words of an answer, about a line long.\"},\"message\":{\"role\":"
                            "\"assistant\",\"responseId\":\"chatcmpl-bench-0001\"}}";
        const char *end = "{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"stopReason\":\"stop\","
                          "\"responseId\":\"chatcmpl-bench-0001\",\"usage\":{\"input\":100,\"output\":5,\"cacheRead\":0,"
                          "\"cacheWrite\":0,\"totalTokens\":105,\"cost\":{\"total\":0.00011}}}}";
        const executor *pi = executor_find("pi");
        _cleanup_free_ char *path = new_log_path();
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        normalizer *n = pi->normalizer_new();
        for (size_t written = 0, lines = 0; written < ((size_t) 4 << 20); lines++) {
                _cleanup_strv_free_ char **out = NULL;
                const char *in = (lines % 100 == 99) ? end : delta;
                ck_assert_int_eq(pi->normalize_line(n, in, strlen(in), true, &out), 0);
                for (char **l = out; l && *l; l++) {
                        append_bytes(fd, *l, strlen(*l));
                        append_bytes(fd, "\n", 1);
                        written += strlen(*l) + 1;
                }
        }
        pi->normalizer_free(n);
        _cleanup_free_ char *d = summary_digest(path);
        ck_assert_str_eq(d, GOLDEN_DELTA);
        _cleanup_free_ char *c = classify_digest(path, pi);
        ck_assert_str_eq(c, GOLDEN_DELTA_CLASSIFY);
}
END_TEST

/* The log at path summarized with the fast paths and with json-c alone. */
static void assert_fast_matches_json_c(const char *path, const char *what) {
        _cleanup_free_ char *fast = summary_digest(path);
        log_summarize_use_fast_paths(false);
        _cleanup_free_ char *slow = summary_digest(path);
        log_summarize_use_fast_paths(true);
        ck_assert_msg(streq(fast, slow), "%s: fast %s, json-c %s", what, fast, slow);
}

static void write_lines(const char *path, const char *const *lines, size_t n) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        for (size_t i = 0; i < n; i++) {
                append_bytes(fd, lines[i], strlen(lines[i]));
                append_bytes(fd, "\n", 1);
        }
}

/* summarize's fast paths (the pi text layout, and json_scan for every
 * other line) against json-c: a first text event, so that "which message
 * is last" is tested too, then each line, as written and with one leading
 * space; both must agree — the same texts, message ids, session, tokens,
 * cost and JSON-ness — on each boundary of the subset the fast paths
 * accept. */
START_TEST(test_fast_path_matches_json_c) {
        #define T(text, id) "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"" text "\",\"messageID\":\"" id "\"}}"
        static const char *const lines[] = {
                T("plain", "m1"),
                T("", "m1"),
                T("esc \\\" \\\\ \\/ \\b \\f \\n \\r \\t end", "m1"),
                T("unicode escape \\u0041\\u00e9\\ud83d\\ude00", "m1"),
                T("escaped nul \\u0000 cut", "m1"),
                T("bad escape \\x41", "m1"),
                T("lone surrogate \\ud800", "m1"),
                T("lone low surrogate \\udc00 x", "m1"),
                T("high then no low \\ud83d\\u0041", "m1"),
                T("bmp \\u0001\\u001f\\u007f\\u0080\\u07ff\\u0800\\ud7ff\\ue000\\uffff\\ufffe", "m1"),
                T("hex case \\u00E9\\u00e9\\uAbCd", "m1"),
                T("short \\u12", "m1"),
                T("short at end \\u12\\", "m1"),
                T("not hex \\u12g4 \\u-123 \\u 123", "m1"),
                T("u in id", "m\\u00e9\\u20ac"),
                T("nul in id", "m\\u0000"),
                T("utf8 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "m\xc3\xa9"),
                T("overlong \xc0\xaf", "m1"),
                T("surrogate in utf8 \xed\xa0\x80", "m1"),
                T("beyond U+10FFFF \xf4\x90\x80\x80", "m1"),
                T("truncated \xe2\x82", "m1"),
                T("lone continuation \x80", "m1"),
                T("del \x7f", "m1"),
                T("tab \t raw", "m1"),
                T("id escape", "a\\\"b\\\\c\\u0041"),
                T("empty id", ""),
                T("trailing ws", "m2") " \t\r",
                T("trailing garbage", "m2") "x",
                T("trailing comma", "m2") ",",
                T("two values", "m2") "{}",
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"unterminated",
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"no id\"}}",
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"id number\",\"messageID\":7}}",
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"id null\",\"messageID\":null}}",
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"extra\",\"messageID\":\"m3\",\"x\":1}}",
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"dup\",\"messageID\":\"m3\",\"text\":\"2\"}}",
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"order\",\"messageID\":\"m3\"},\"sessionID\":\"s9\"}",
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"open\",\"messageID\":\"m3\"}",
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"close\",\"messageID\":\"m3\"}}}",
        };
#undef T
        static const char *const others[] = {
                "{\"type\":\"step_finish\",\"sessionID\":\"s1\",\"part\":{\"type\":\"step-finish\",\"reason\":\"stop\","
                "\"messageID\":\"m1\",\"cost\":0.25,\"tokens\":{\"total\":10,\"input\":7,\"output\":3,\"cache\":{\"read\":1,\"write\":2}}}}",
                "{\"type\":\"step_finish\",\"part\":{\"reason\":\"stop\",\"messageID\":\"m0\",\"cost\":1e-3,\"tokens\":{\"total\":\"x\"}}}",
                "{\"type\":\"step_finish\",\"part\":{\"reason\":\"st\\u006fp\",\"messageID\":\"m0\"}}",
                "{\"type\":\"step_finish\",\"part\":{\"reason\":\"stop\",\"messageID\":7}}",
                "{\"type\":\"step_finish\",\"part\":{\"reason\":\"stop\",\"messageID\":null}}",
                "{\"type\":\"step_finish\",\"part\":{\"reason\":\"stop\"}}",
                "{\"type\":\"step_finish\",\"part\":{\"reason\":\"stop\",\"messageID\":\"a\\\"b\"}}",
                "{\"type\":\"step_finish\",\"part\":{\"cost\":123456789012345678901234,\"tokens\":null}}",
                "{\"type\":\"step_finish\",\"part\":{\"cost\":-0,\"tokens\":[1,2]}}",
                "{\"type\":\"step_finish\",\"part\":{\"cost\":\"1\",\"tokens\":7}}",
                "{\"type\":\"step_finish\",\"part\":{\"co\\u0073t\":2}}",
                "{\"type\":\"step_finish\",\"part\":{\"cost\":1.5E+2,\"cost\":2}}",
                "{\"type\":\"step_finish\",\"part\":\"no object\"}",
                "{\"type\":\"step_\\u0066inish\",\"part\":{\"cost\":2}}",
                "{\"type\":\"tool_use\",\"sessionID\":\"ses_tool\",\"part\":{\"tool\":\"bash\",\"state\":{\"output\":\"\\u001b[31mred\"}}}",
                "{\"type\":\"tool_use\",\"sessionID\":\"\",\"part\":{}}",
                "{\"type\":\"tool_use\",\"sessionID\":\"s\\u0031\",\"part\":{}}",
                "{\"type\":\"tool_use\",\"session\\u0049D\":\"sneaky\",\"part\":{}}",
                "{\"type\":\"tool_use\",\"sessionID\":7}",
                "{\"sessionID\":\"a\",\"sessionID\":\"b\"}",
                "{\"sessionID\":\"a\",\"sessionID\":\"\"}",
                "[{\"sessionID\":\"in array\"}]",
                "\"a string\"", "42", "-0.5e10", "true", "null", "01", "1.", ".5", "+1", "-", "1e", "NaN", "{} {}",
                "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],\"sessionID\":\"deep\"}",
                "{\"sessionID\":\"ctl \x01\"}", "{\"sessionID\":\"bad \xc0\xaf\"}", "{\"sessionID\":\"\xe2\x82\xac\"}",
                "{\"type\":\"text\",\"sessionID\":\"s\",\"part\":{\"id\":\"p\",\"messageID\":\"m5\",\"type\":\"text\","
                "\"text\":\"opencode layout \\n with \\\"escapes\\\"\",\"time\":{\"start\":1}}}",
                "{\"type\":\"text\",\"part\":{\"messageID\":\"m6\",\"text\":\"u escape \\u00e9\"}}",
                "{\"type\":\"text\",\"part\":{\"messageID\":\"m6\",\"text\":7}}",
                "{\"type\":\"text\",\"part\":{\"messageID\":\"m6\"}}",
                "{\"type\":\"text\",\"part\":{\"text\":\"no id but layout\",\"id\":1}}",
                "{\"type\":\"text\",\"part\":{\"te\\u0078t\":\"escaped key\",\"messageID\":\"m7\"}}",
                "{\"type\":\"error\",\"error\":{\"name\":\"APIError\",\"data\":{\"message\":\"boom\"}}}",
                "{\"type\":\"error\",\"sessionID\":\"s\",\"error\":{\"name\":\"APIError\",,}}",
        };
        _cleanup_free_ char *path = new_log_path();
        const char *first = "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"first\",\"messageID\":\"m0\"}}";
        for (size_t k = 0; k < ELEMENTSOF(lines) + ELEMENTSOF(others); k++) {
                const char *line = k < ELEMENTSOF(lines) ? lines[k] : others[k - ELEMENTSOF(lines)];
                _cleanup_free_ char *spaced = strdup_printf(" %s", line);
                ck_assert_ptr_nonnull(spaced);
                const char *as_is[] = {first, line}, *with_space[] = {first, spaced};
                _cleanup_free_ char *what = strdup_printf("line %zu (%s)", k, line);
                write_lines(path, as_is, 2);
                assert_fast_matches_json_c(path, what);
                write_lines(path, with_space, 2);
                assert_fast_matches_json_c(path, what);
        }
}
END_TEST

/* The fast paths against json-c over every recorded log (real and
 * synthetic) and the realistic mix of the benchmark, as written and with
 * each line changed at random many times over (a byte flipped, dropped,
 * doubled, or one of JSON's special bytes put in), with a fixed seed. */
START_TEST(test_fast_path_matches_json_c_mutated) {
        glob_t g = {0};
        ck_assert_int_eq(glob(REAL "*.stdout.ndjson", 0, NULL, &g), 0);
        ck_assert_int_eq(glob(SYN "*.stdout.ndjson", GLOB_APPEND, NULL, &g), 0);
        _cleanup_free_ char *mix = new_log_path();
        {
                _cleanup_close_ int fd = open(mix, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                ck_assert_int_ge(fd, 0);
                size_t written, rounds, fixtures;
                ck_assert_int_eq(realistic_log_write(fd, (size_t) 1 << 20, &written, &rounds, &fixtures), 0);
        }
        _cleanup_free_ char *path = new_log_path();
        static const char specials[] = "\"\\{}[],:0-.eE \x01\x80\xc3u";
        uint64_t seed = 0x9e3779b97f4a7c15ULL;
        size_t compared = 0;
        for (size_t f = 0; f <= g.gl_pathc; f++) {
                const char *src = f < g.gl_pathc ? g.gl_pathv[f] : mix;
                _cleanup_free_ char *text = NULL;
                size_t len = 0;
                ck_assert_int_eq(read_file(src, (size_t) 64 << 20, &text, &len), 0);
                assert_fast_matches_json_c(src, src);
                _cleanup_strv_free_ char **lines = NULL;
                for (char *p = text, *nl; *p; p = nl + 1) {
                        nl = strchrnul(p, '\n');
                        ck_assert_int_eq(strv_consume(&lines, strndup(p, (size_t) (nl - p))), 0);
                        if (!*nl) break;
                }
                size_t n = strv_length(lines);
                /* each log mutated 64 times: a few lines of it changed each time */
                for (int round = 0; round < 64; round++) {
                        _cleanup_strv_free_ char **copy = strv_copy(lines);
                        ck_assert_ptr_nonnull(copy);
                        for (size_t i = 0; i < n; i++) {
                                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                                size_t l = strlen(copy[i]);
                                if (l == 0 || (seed >> 33) % 8 != 0) continue;
                                size_t at = (size_t) (seed >> 20) % l;
                                char c = specials[(seed >> 8) % (sizeof specials - 1)];
                                switch ((seed >> 4) % 4) {
                                case 0: copy[i][at] = c; break;
                                case 1: memmove(copy[i] + at, copy[i] + at + 1, l - at); break;
                                case 2: copy[i][at] ^= (char) (1u << ((seed >> 40) % 8)); break;
                                default: {
                                        char *grown = strdup_printf("%.*s%c%s", (int) at, copy[i], c, copy[i] + at);
                                        ck_assert_ptr_nonnull(grown);
                                        free(copy[i]);
                                        copy[i] = grown;
                                }
                                }
                        }
                        write_lines(path, (const char *const *) copy, n);
                        _cleanup_free_ char *what = strdup_printf("%s, mutation round %d", src, round);
                        assert_fast_matches_json_c(path, what);
                        compared++;
                }
        }
        ck_assert_uint_ge(compared, 64 * 19);
        globfree(&g);
}
END_TEST

/* The two narrations name a tool_use without a tool differently (the
 * summaries "unknown", also for an empty name; the activity text "undefined",
 * only for a missing one), and both read only strict JSON lines. */
START_TEST(test_narration_styles) {
        const char *log =
                "{\"type\":\"tool_use\",\"part\":{\"type\":\"tool\",\"state\":{\"input\":\"a\"}}}\n"
                "{\"type\":\"tool_use\",\"part\":{\"type\":\"tool\",\"tool\":\"\",\"state\":{\"input\":\"b\"}}}\n"
                "{'type':'text','part':{'type':'text','text':'single quotes'}}\n"
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"trailing comma\"},}\n"
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"kept\"}}\n";
        char *n = NULL;
        ck_assert_int_eq(log_narration_parse(log, strlen(log), &n), 0);
        ck_assert_str_eq(n, "[tool:unknown] a\n\n[tool:unknown] b\n\nkept");
        free(n);
        ck_assert_int_eq(log_narration_parse_style(log, strlen(log), &log_narration_activity, &n), 0);
        ck_assert_str_eq(n, "[tool:undefined] a\n\n[tool:] b\n\nkept");
        free(n);
}
END_TEST

/* RED TEAM (shows a hole): a line nested 64 levels deep is one JSON value
 * to JSON.parse (the original's reader has no depth limit); json_scan
 * hands it to json-c, whose tokener stops at 63 levels, and the line is
 * skipped: the final message it carries is lost. Both with the fast paths
 * and without. */
START_TEST(test_deep_final_message_is_read) {
        for (int depth = 30; depth <= 80; depth += 1) {
                _cleanup_free_ char *open_ = malloc((size_t) depth + 1), *close_ = malloc((size_t) depth + 1);
                ck_assert_ptr_nonnull(open_);
                ck_assert_ptr_nonnull(close_);
                /* "meta" holds depth - 3 arrays: the line's deepest value is at depth levels */
                int arrays = depth - 3;
                memset(open_, '[', (size_t) arrays);
                open_[arrays] = 0;
                memset(close_, ']', (size_t) arrays);
                close_[arrays] = 0;
                _cleanup_free_ char *text = strdup_printf(
                        "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"FINAL-%d\",\"messageID\":\"mf\","
                        "\"meta\":{\"x\":%s1%s}}}",
                        depth, open_, close_);
                const char *lines[] = {
                        "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"first\",\"messageID\":\"m0\"}}", text,
                        "{\"type\":\"step_finish\",\"part\":{\"reason\":\"stop\",\"messageID\":\"mf\"}}"};
                _cleanup_free_ char *path = new_log_path();
                write_lines(path, lines, ELEMENTSOF(lines));
                _cleanup_free_ char *want = strdup_printf("FINAL-%d", depth);
                for (int fast = 1; fast >= 0; fast--) {
                        log_summarize_use_fast_paths(fast);
                        log_summary sum = {0};
                        ck_assert_int_eq(log_summarize_file(path, NULL, &sum), 0);
                        log_summarize_use_fast_paths(true);
                        ck_assert_msg(sum.message && streq(sum.message, want),
                                      "depth %d (fast paths %s): the final message is \"%s\", JSON.parse reads \"%s\"",
                                      depth, fast ? "on" : "off", strnull(sum.message), want);
                        log_summary_done(&sum);
                }
        }
}
END_TEST

/* A later step's tokens are built from their scan (only the members the
 * sum takes): the same sum as json-c building them whole, with repeated
 * keys, summed members and the cache past the member bound, an escaped
 * key, values of every type. */
START_TEST(test_tokens_scan_matches_json_c) {
        _cleanup_free_ char *wide = strdup("");
        for (int i = 0; i < 80; i++) {
                char *w = strdup_printf("%s\"n%d\":%d,", wide, i, i);
                ck_assert_ptr_nonnull(w);
                free(wide);
                wide = w;
        }
        _cleanup_free_ char *l2 = strdup_printf(
                "{\"type\":\"step_finish\",\"part\":{\"tokens\":{%s\"total\":5,\"cache\":{\"read\":2,\"z\":[1]},"
                "\"n3\":\"again\",\"input\":2.5,\"o\":{\"p\":null},\"n79\":true}}}",
                wide);
        const char *const variants[][3] = {
                {"{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":1,\"a\":1}}}", l2,
                 "{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"a\":2,\"n0\":\"x\",\"output\":1}}}"},
                {"{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":1}}}",
                 "{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"in\\u0070ut\":4,\"input\":1}}}",
                 "{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":1,\"input\":\"s\",\"cache\":7}}}"},
                {"{\"type\":\"step_finish\",\"part\":{\"tokens\":[1]}}",
                 "{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":1}}}", l2},
        };
        _cleanup_free_ char *path = new_log_path();
        for (size_t i = 0; i < ELEMENTSOF(variants); i++) {
                write_lines(path, variants[i], 3);
                _cleanup_free_ char *what = strdup_printf("variant %zu", i);
                assert_fast_matches_json_c(path, what);
        }
}
END_TEST

/* At the log's depth bound (a value 4096 levels down, as json-c's
 * tokener made with that depth counts) a line is read; one level more and
 * it is no JSON line at all: with the fast paths and without, and the
 * classifier alike. */
START_TEST(test_depth_bound) {
        for (int deepest = LOG_DEPTH_BOUND - 2; deepest <= LOG_DEPTH_BOUND + 2; deepest++) {
                /* top object 1, part 2, meta 3, x's arrays 4.. and the 1 inside them at deepest */
                int arrays = deepest - 4;
                _cleanup_free_ char *open_ = malloc((size_t) arrays + 1), *close_ = malloc((size_t) arrays + 1);
                ck_assert_ptr_nonnull(open_);
                ck_assert_ptr_nonnull(close_);
                memset(open_, '[', (size_t) arrays);
                open_[arrays] = 0;
                memset(close_, ']', (size_t) arrays);
                close_[arrays] = 0;
                _cleanup_free_ char *text = strdup_printf(
                        "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"FINAL\",\"messageID\":\"mf\","
                        "\"meta\":{\"x\":%s1%s}}}",
                        open_, close_);
                /* top object 1, x's arrays 2.. and the text inside them at deepest */
                _cleanup_free_ char *err = strdup_printf("{\"type\":\"text\",\"x\":%s[[\"rate limit exceeded\"]]%s}",
                                                         open_, close_);
                const char *lines[] = {
                        "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"first\",\"messageID\":\"m0\"}}", text,
                        "{\"type\":\"step_finish\",\"part\":{\"reason\":\"stop\",\"messageID\":\"mf\"}}"};
                _cleanup_free_ char *path = new_log_path();
                write_lines(path, lines, ELEMENTSOF(lines));
                const char *want = deepest <= LOG_DEPTH_BOUND ? "FINAL" : "";
                for (int fast = 1; fast >= 0; fast--) {
                        log_summarize_use_fast_paths(fast);
                        log_summary sum = {0};
                        ck_assert_int_eq(log_summarize_file(path, NULL, &sum), 0);
                        _cleanup_free_ char *reason = NULL;
                        int k = log_classify_line(err, strlen(err), NULL, NULL, &reason, NULL);
                        log_summarize_use_fast_paths(true);
                        ck_assert_msg(sum.message && streq(sum.message, want),
                                      "deepest value at %d (fast paths %s): the final message is \"%s\", want \"%s\"",
                                      deepest, fast ? "on" : "off", strnull(sum.message), want);
                        /* a JSON text event is never scanned; past the bound the line is no JSON */
                        ck_assert_msg(k == (deepest <= LOG_DEPTH_BOUND ? 0 : 1),
                                      "deepest value at %d (fast paths %s): classified %d %s", deepest,
                                      fast ? "on" : "off", k, strnull(reason));
                        log_summary_done(&sum);
                }
        }
}
END_TEST

/* The classifier's scan of a line (json_scan first, json-c only for an
 * error event or an escaped key) decides as json-c alone does. */
START_TEST(test_classifier_fast_matches_json_c) {
        static const char *const lines[] = {
                "{\"type\":\"error\",\"message\":\"Rate limit reached\"}",
                "{\"type\":\"err\\u006fr\",\"message\":\"Rate limit reached\"}",
                "{\"typ\\u0065\":\"error\",\"message\":\"401 Unauthorized\"}",
                "{\"type\":\"error\",\"error\":{\"name\":\"APIError\",\"data\":{\"message\":\"boom\"}}}",
                "{\"type\":\"text\",\"part\":{\"text\":\"429 quota rate limit exceeded\"}}",
                "{\"type\":\"tool_use\",\"part\":{\"state\":{\"output\":\"invalid api key\"}}}",
                "[\"rate limit\"]", "\"rate limit\"", "429", "{\"type\":7,\"message\":\"rate limit\"}",
                "{\"type\":\"error\",\"message\":\"rate limit\"", "{\"type\":\"text\"} rate limit",
                "Error: Too Many Requests", "\033[91mError: \033[0minsufficient_quota", "all good",
                "{\"type\":\"text\",\"t\":\"\xc0\xaf rate limit\"}", "{\"type\":\"text\",\"t\":\"\x01 ratelimit\"}",
                "{\"type\":\"error\",\"type\":\"text\",\"message\":\"rate limit\"}",
                "{\"type\":\"text\",\"type\":\"error\",\"message\":\"rate limit\"}",
        };
        for (size_t i = 0; i < ELEMENTSOF(lines); i++) {
                _cleanup_free_ char *r1 = NULL, *d1 = NULL, *r2 = NULL, *d2 = NULL;
                int k1 = log_classify_line(lines[i], strlen(lines[i]), "pi_", "pi_error_", &r1, &d1);
                log_summarize_use_fast_paths(false);
                int k2 = log_classify_line(lines[i], strlen(lines[i]), "pi_", "pi_error_", &r2, &d2);
                log_summarize_use_fast_paths(true);
                ck_assert_msg(k1 == k2 && streq_ptr(r1, r2) && streq_ptr(d1, d2), "%s: fast %d %s %s, json-c %d %s %s",
                              lines[i], k1, strnull(r1), strnull(d1), k2, strnull(r2), strnull(d2));
        }
}
END_TEST

int main(void) {
        Suite *s = suite_create("logparse");
        TCase *tc = tf_tcase(s, "core", setup, teardown, 240, TF_TESTS(test_real_fixtures_all_covered,
                test_real_opencode_error_details, test_oc_c, test_oc_d, test_oc_e, test_classifier_patterns,
                test_classifier_json, test_detail_cap, test_classify_file, test_w7_no_false_positive,
                test_boot_failure_large, test_summary_basics, test_summary_tokens, test_summary_tokens_merge_order, test_summary_large_log, test_blank,
                test_golden_realistic_log, test_golden_delta_log, test_fast_path_matches_json_c,
                test_fast_path_matches_json_c_mutated, test_deep_final_message_is_read, test_depth_bound,
                test_classifier_fast_matches_json_c, test_tokens_scan_matches_json_c,
                test_narration_styles));
        TF_LOOP(tc, test_real_fixtures, real_cases);
        TF_LOOP(tc, test_synthetic_fixtures, synthetic_cases);
        TF_LOOP(tc, test_boot_failure, boot_cases);
        TF_LOOP(tc, test_summary_messages, message_cases);
        return tf_run_suite(s);
}
