/* executor-pi.c: pi's argv (the provider split, --thinking levels, the
 * prompt file), and the stateful normalizer from pi's event stream to the
 * canonical log: sessionID, text deltas, tool progress and use (args carried
 * from the start event), a step_finish per assistant message_end with usage
 * (agent_end's only when none came), agent errors; checked on the recorded
 * real streams of tests/fixtures/real/pi-*.stdout.ndjson and on synthetic
 * lines for the edges. */

#include <check.h>
#include <errno.h>
#include <glob.h>
#include <string.h>

#include "executor.h"
#include "fileio.h"
#include "json-util.h"
#include "macro.h"
#include "strv.h"
#include "unit.h"

#define REAL_DIR TASKFERRY_FIXTURES_DIR "/real"

static const executor *pi(void) {
        const executor *e = executor_find("pi");
        ck_assert_ptr_nonnull(e);
        return e;
}

START_TEST(argv_model_split) {
        char **argv = NULL;
        executor_launch l = {.model = "a/b/c", .prompt = "p"};
        ck_assert_int_eq(pi()->build_argv(&l, &argv), 0);
        /* the first slash splits: the model keeps the rest */
        tf_assert_argv(argv, "pi", "--provider", "a", "--model", "b/c", "--mode", "json", "-p", "p", NULL);
        strv_free(argv);
        l.model = "/m"; /* no provider before the slash */
        ck_assert_int_eq(pi()->build_argv(&l, &argv), 0);
        tf_assert_argv(argv, "pi", "--model", "/m", "--mode", "json", "-p", "p", NULL);
        strv_free(argv);
        executor_launch f = {.model = "p/m", .prompt = "SECRET", .prompt_file = "/run/prompt", .variant = "max",
                             .session_id = "s1"};
        ck_assert_int_eq(pi()->build_argv(&f, &argv), 0);
        tf_assert_argv(argv, "pi", "--provider", "p", "--model", "m", "--mode", "json", "--continue", "--session", "s1",
                       "--thinking", "xhigh", "-p", "Follow the instructions in the attached prompt file exactly.",
                       "@/run/prompt", NULL);
        strv_free(argv);
        argv = NULL;
        executor_launch bad[] = {{.prompt = "p"}, {.model = "", .prompt = "p"}, {.model = "m"}};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) ck_assert_int_eq(pi()->build_argv(&bad[i], &argv), -EINVAL);
        ck_assert_int_eq(pi()->build_argv(NULL, &argv), -EINVAL);
        ck_assert_ptr_null(argv);
}
END_TEST

START_TEST(thinking_levels) {
        ck_assert_str_eq(executor_pi_thinking_level("highest"), "xhigh");
        ck_assert_str_eq(executor_pi_thinking_level("max"), "xhigh");
        const char *low = "low";
        ck_assert_ptr_eq(executor_pi_thinking_level(low), low);
        ck_assert_str_eq(executor_pi_thinking_level("MAX"), "MAX");
        ck_assert_ptr_null(executor_pi_thinking_level(NULL));
}
END_TEST

static json_object *parse(const char *line) {
        json_object *o = NULL;
        ck_assert_msg(json_parse_strict(line, strlen(line), &o) == 0 && json_is_object(o), "not an object: %s", line);
        return o;
}

static size_t count_type(char **out, const char *type) {
        size_t n = 0;
        for (char **l = out; l && *l; l++) {
                json_object *o = parse(*l);
                if (streq_ptr(json_get_string(o, "type"), type)) n++;
                json_object_put(o);
        }
        return n;
}

START_TEST(real_streams) {
        glob_t g;
        ck_assert_int_eq(glob(REAL_DIR "/pi-*.stdout.ndjson", 0, NULL, &g), 0);
        ck_assert_uint_ge(g.gl_pathc, 5);
        for (size_t i = 0; i < g.gl_pathc; i++) {
                _cleanup_free_ char *data = NULL;
                size_t len = 0;
                ck_assert_int_eq(read_file(g.gl_pathv[i], 64 << 20, &data, &len), 0);
                _cleanup_strv_free_ char **out = tf_normalize(pi(), data, len);
                /* the assistant message_ends with usage, counted from the input */
                size_t want_steps = 0, sessions = 0;
                for (char *line = data, *next; line && *line; line = next) {
                        next = strchr(line, '\n');
                        if (next) *next++ = 0;
                        json_object *o = NULL;
                        if (json_parse_strict(line, strlen(line), &o) < 0) continue;
                        json_object *m = json_get_object(o, "message");
                        if (streq_ptr(json_get_string(o, "type"), "message_end") &&
                            streq_ptr(json_get_string(m, "role"), "assistant") && json_get_object(m, "usage") &&
                            !streq_ptr(json_get_string(m, "stopReason"), "error"))
                                want_steps++;
                        if (streq_ptr(json_get_string(o, "type"), "session")) sessions++;
                        json_object_put(o);
                }
                size_t steps = count_type(out, "step_finish");
                ck_assert_msg(steps == want_steps || (want_steps == 0 && steps <= 1), "%s: %zu step_finish, want %zu",
                              g.gl_pathv[i], steps, want_steps);
                /* one sessionID line per session event, first */
                size_t ids = 0;
                for (char **l = out; *l; l++) {
                        json_object *o = parse(*l);
                        if (json_get_string(o, "sessionID")) ids++;
                        json_object_put(o);
                }
                ck_assert_uint_eq(ids, sessions);
        }
        globfree(&g);
}
END_TEST

START_TEST(real_answer_text) {
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        ck_assert_int_eq(read_file(REAL_DIR "/pi-answer.stdout.ndjson", 1 << 20, &data, &len), 0);
        _cleanup_strv_free_ char **out = tf_normalize(pi(), data, len);
        json_object *first = parse(out[0]);
        ck_assert_str_eq(json_get_string(first, "sessionID"), "01a22cbc-606f-7155-b2fc-5baf35171d98");
        json_object_put(first);
        /* the text deltas spell the answer */
        char text[256] = "";
        for (char **l = out; *l; l++) {
                json_object *o = parse(*l);
                if (streq_ptr(json_get_string(o, "type"), "text"))
                        strncat(text, json_get_string(json_get_object(o, "part"), "text"), sizeof text - strlen(text) - 1);
                json_object_put(o);
        }
        ck_assert_ptr_nonnull(strstr(text, "PONG"));
}
END_TEST

/* the lines normalized from the synthetic pi events of text */
static char **run(const char *text) { return tf_normalize(pi(), text, strlen(text)); }

START_TEST(tool_args_carried_from_start) {
        _cleanup_strv_free_ char **out = run(
                "{\"type\":\"tool_execution_start\",\"toolName\":\"bash\",\"toolCallId\":\"c1\",\"args\":{\"cmd\":\"ls\"}}\n"
                "{\"type\":\"tool_execution_end\",\"toolName\":\"bash\",\"toolCallId\":\"c1\","
                "\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"image\"},{\"type\":\"text\",\"text\":\"b\"}]}}\n");
        ck_assert_uint_eq(strv_length(out), 2);
        json_object *p = parse(out[0]);
        ck_assert_str_eq(json_get_string(p, "type"), "tool_progress");
        ck_assert_str_eq(json_get_string(json_get_object(p, "part"), "tool"), "bash");
        json_object_put(p);
        json_object *u = parse(out[1]);
        ck_assert_str_eq(json_get_string(u, "type"), "tool_use");
        json_object *state = json_get_object(json_get_object(u, "part"), "state");
        ck_assert_str_eq(json_get_string(json_get_object(state, "input"), "cmd"), "ls");
        ck_assert_ptr_nonnull(strstr(json_get_string(state, "output"), "a"));
        ck_assert_ptr_nonnull(strstr(json_get_string(state, "output"), "b"));
        json_object_put(u);
}
END_TEST

START_TEST(step_finish_rules) {
        /* one per assistant message_end with usage; a user one, an error and
         * one without usage give none; agent_end adds none after them */
        _cleanup_strv_free_ char **out = run(
                "{\"type\":\"agent_start\"}\n"
                "{\"type\":\"message_end\",\"message\":{\"role\":\"user\",\"usage\":{}}}\n"
                "{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"stopReason\":\"toolUse\",\"responseId\":\"r1\","
                "\"usage\":{\"totalTokens\":5,\"input\":3,\"output\":2,\"cost\":{\"total\":0.5}}}}\n"
                "{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"stopReason\":\"stop\"}}\n"
                "{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"stopReason\":\"error\",\"usage\":{}}}\n"
                "{\"type\":\"agent_end\",\"messages\":[{\"role\":\"assistant\",\"stopReason\":\"stop\",\"usage\":{}}]}\n");
        ck_assert_uint_eq(count_type(out, "step_finish"), 1);
        json_object *s = parse(out[0]);
        json_object *part = json_get_object(s, "part");
        ck_assert_str_eq(json_get_string(part, "reason"), "tool-calls");
        ck_assert_str_eq(json_get_string(part, "messageID"), "r1");
        int64_t total = 0;
        ck_assert(json_get_int64(json_get_object(part, "tokens"), "total", &total));
        ck_assert_int_eq(total, 5);
        json_object_put(s);
        /* a run whose message_ends carried no usage: agent_end writes one */
        _cleanup_strv_free_ char **o2 = run(
                "{\"type\":\"agent_start\"}\n"
                "{\"type\":\"agent_end\",\"messages\":[{\"role\":\"assistant\",\"stopReason\":\"stop\",\"usage\":{\"totalTokens\":1}}]}\n");
        ck_assert_uint_eq(count_type(o2, "step_finish"), 1);
}
END_TEST

START_TEST(agent_error_is_an_error_event) {
        _cleanup_strv_free_ char **out = run(
                "{\"type\":\"agent_end\",\"messages\":[{\"role\":\"assistant\",\"stopReason\":\"error\","
                "\"errorMessage\":\"401 {\\\"type\\\":\\\"error\\\",\\\"error\\\":{\\\"type\\\":\\\"authentication_error\\\","
                "\\\"message\\\":\\\"invalid x-api-key\\\"}}\"}]}\n");
        ck_assert_uint_eq(count_type(out, "error"), 1);
        json_object *e = NULL;
        for (char **l = out; *l; l++) {
                json_object *o = parse(*l);
                if (streq_ptr(json_get_string(o, "type"), "error")) e = o;
                else json_object_put(o);
        }
        ck_assert_str_eq(json_get_string(e, "message"), "401 authentication_error: invalid x-api-key");
        ck_assert_str_eq(json_get_string(json_get_object(e, "error"), "name"), "pi_error");
        json_object_put(e);
}
END_TEST

START_TEST(edges) {
        /* plain text is kept verbatim, blank lines go, JSON without a known
         * type writes nothing, a text delta's NUL survives */
        _cleanup_strv_free_ char **out = run(
                "No API key found for openai.\n"
                "   \n"
                "[1,2]\n"
                "{\"no\":\"type\"}\n"
                "{\"type\":\"turn_start\"}\n"
                "{\"type\":\"session\"}\n"
                "{\"type\":\"message_update\",\"assistantMessageEvent\":{\"type\":\"thinking_delta\",\"delta\":\"x\"}}\n"
                "{\"type\":\"message_update\",\"assistantMessageEvent\":{\"type\":\"text_delta\",\"delta\":\"a\\u0000b\"}}");
        ck_assert_uint_eq(strv_length(out), 2);
        ck_assert_str_eq(out[0], "No API key found for openai.");
        ck_assert_ptr_nonnull(strstr(out[1], "a\\u0000b"));
        json_object *t = parse(out[1]);
        ck_assert_str_eq(json_get_string(json_get_object(t, "part"), "messageID"), "__unknown_message__");
        json_object_put(t);
}
END_TEST

TF_MAIN("executor-pi", "pi", NULL, NULL, 0, argv_model_split, thinking_levels, real_streams, real_answer_text,
        tool_args_carried_from_start, step_finish_rules, agent_error_is_an_error_event, edges)
