/* Fake pi and opencode workers replay the recorded output of the real CLIs
 * (tests/fixtures/real, with their recorded exit codes) inside the real
 * sandbox; the daemon must report what the real run would: final message,
 * summed tokens and cost, session id, status and failure reason. */

#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"

typedef struct fixture_case {
        const char *name;
        const char *executor;
        const char *status;
        const char *message;     /* NULL: not checked */
        int64_t input, output;   /* summed tokens; -1: not checked */
        const char *cost;        /* exact JS-printed cost or sum "a+b"; NULL: not checked */
        const char *reason;      /* failureReason (NULL = none) */
        const char *session;     /* NULL: not checked */
} fixture_case;

static const fixture_case cases[] = {
        {"pi-answer", "pi", "done", "PONG", 100, 5, "0.00010999999999999999", NULL, "01a22cbc-606f-7155-b2fc-5baf35171d98"},
        {"pi-write_file", "pi", "done", "done", 280, 24, NULL, NULL, "01a22cbc-6a4d-7255-9375-4f3d589632c7"},
        {"pi-slow", "pi", "done", NULL, -1, -1, NULL, NULL, NULL},
        {"pi-rate_limit", "pi", "crashed", NULL, -1, -1, NULL, "pi_rate_limited", NULL},
        {"pi-auth", "pi", "crashed", NULL, -1, -1, NULL, "pi_authentication_failed", NULL},
        {"pi-auth_anthropic", "pi", "crashed", NULL, -1, -1, NULL, "pi_authentication_failed", NULL},
        {"pi-hang", "pi", "crashed", NULL, -1, -1, NULL, NULL, NULL},
        {"opencode-answer", "opencode", "done", "PONG", -1, -1, NULL, NULL, "ses_dd342a805ffeA0bRD1FUzzv5oO"},
        {"opencode-write_file", "opencode", "done", "done", 280, 24, "0.00016+0.000168", NULL,
         "ses_dd3429236ffe1BVlij5y3VQ3dS"},
        {"opencode-rate_limit", "opencode", "crashed", NULL, -1, -1, NULL, "rate_limited", NULL},
        {"opencode-auth", "opencode", "crashed", NULL, -1, -1, NULL, "authentication_failed", NULL},
        {"opencode-auth_anthropic", "opencode", "crashed", NULL, -1, -1, NULL, "authentication_failed", NULL},
        {"opencode-hang", "opencode", "crashed", NULL, -1, -1, NULL, NULL, NULL},
};

static double expected_cost(const char *spec) {
        double sum = 0;
        char *copy = strdup(spec), *save = NULL;
        for (char *t = strtok_r(copy, "+", &save); t; t = strtok_r(NULL, "+", &save)) sum += strtod(t, NULL);
        free(copy);
        return sum;
}

START_TEST(replay_fixture) {
        const fixture_case *c = &cases[_i];
        tf_world *w = tf_world_new(NULL);
        char *fixture = strdup_printf("%s/real/%s", w->fixtures, c->name);
        tf_world_setenv(w, "FAKE_FIXTURE", fixture);
        json_object *st = NULL;
        char *id = tf_worker_settled(w, c->executor, "mockllm/mock-model", w->repo_parent, NULL, "Reply with exactly: PONG", &st);
        ck_assert_msg(streq(tf_jstr(st, "status"), c->status), "%s: status %s, want %s (%s)", c->name,
                      tf_jstr(st, "status"), c->status, json_to_line(st, NULL));
        if (c->reason) ck_assert_str_eq(strempty(tf_jstr(st, "failureReason")), c->reason);
        else ck_assert_msg(tf_jstr(st, "failureReason") == NULL, "%s: unexpected reason %s", c->name, tf_jstr(st, "failureReason"));
        json_object_put(st);

        /* status --full shows the resolved variant: the default "highest" is
         * pi's highest thinking level (xhigh for pi 0.73.1, never "max");
         * opencode without a variants cache gets no flag */
        json_object *full = tf_status_full(w, id);
        if (streq(c->executor, "pi"))
                ck_assert_str_eq(strempty(tf_jstr(full, "variant")), "xhigh");
        else
                ck_assert_ptr_null(tf_jstr(full, "variant"));
        json_object_put(full);

        const char *res_argv[] = {"result", id, "--json", NULL};
        json_object *res = tf_cli_json(w, res_argv, 0);
        if (c->message) ck_assert_str_eq(tf_jstr(res, "message"), c->message);
        if (c->session) ck_assert_str_eq(strempty(tf_jstr(res, "sessionId")), c->session);
        json_object *tokens = json_get_object(res, "tokens");
        if (c->input >= 0) {
                ck_assert_msg(tokens != NULL, "%s: no tokens", c->name);
                int64_t in = -1, out = -1;
                json_get_int64(tokens, "input", &in);
                json_get_int64(tokens, "output", &out);
                ck_assert_int_eq(in, c->input);
                ck_assert_int_eq(out, c->output);
        }
        if (c->cost) {
                json_object *cost = NULL;
                ck_assert(json_object_object_get_ex(res, "cost", &cost) && cost);
                double want = strchr(c->cost, '+') ? expected_cost(c->cost) : strtod(c->cost, NULL);
                ck_assert_msg(json_object_get_double(cost) == want, "%s: cost %.17g want %.17g", c->name,
                              json_object_get_double(cost), want);
        }
        json_object_put(res);
        free(id);
        free(fixture);
        tf_world_free(w);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("worker-fixtures");
        TCase *tc = tcase_create("replay");
        tcase_set_timeout(tc, 300);
        tcase_add_loop_test(tc, replay_fixture, 0, (int) (sizeof cases / sizeof cases[0]));
        suite_add_tcase(s, tc);
        return s;
}

int main(void) { return tf_run_suite(suite()); }
