/* Executors: the table, worker argv (OpenCode's and pi's) and the
 * stdout normalizers, checked against the recorded real pi/opencode
 * streams in tests/fixtures/real/. */

#include <check.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "executor.h"
#include "fileio.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"
#include "unit.h"

#define REAL_DIR TASKFERRY_FIXTURES_DIR "/real"
#define INSTRUCTION "Follow the instructions in the attached prompt file exactly."

/* ---- helpers ---- */

static char **build(const char *id, const executor_launch *l) {
        const executor *e = executor_find(id);
        ck_assert_ptr_nonnull(e);
        char **argv = NULL;
        ck_assert_int_eq(e->build_argv(l, &argv), 0);
        ck_assert_ptr_nonnull(argv);
        return argv;
}

static char **normalize_str(const char *id, const char *text) {
        return tf_normalize(executor_find(id), text, strlen(text));
}

static char **normalize_file(const char *id, const char *path) {
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        ck_assert_int_eq(read_file(path, 64 * 1024 * 1024, &data, &len), 0);
        return tf_normalize(executor_find(id), data, len);
}

static json_object *parse(const char *line) {
        json_object *o = NULL;
        ck_assert_msg(json_parse_strict(line, strlen(line), &o) == 0, "not JSON: %s", line);
        ck_assert_msg(json_is_object(o), "not an object: %s", line);
        return o;
}

static const char *type_of(json_object *o) { return json_get_string(o, "type"); }

static size_t count_type(char **out, const char *type) {
        size_t n = 0;
        for (char **l = out; *l; l++) {
                _cleanup_json_ json_object *o = parse(*l);
                if (streq_ptr(type_of(o), type)) n++;
        }
        return n;
}

/* The n-th (0-based) output line of the given type, parsed. */
static json_object *nth_of_type(char **out, const char *type, size_t nth) {
        for (char **l = out; *l; l++) {
                json_object *o = parse(*l);
                if (streq_ptr(type_of(o), type) && nth-- == 0) return o;
                json_object_put(o);
        }
        ck_abort_msg("no %s event #%zu", type, nth);
        return NULL;
}

/* o.a.b as an integer (asserted present). */
static int64_t path_int(json_object *o, const char *a, const char *b) {
        int64_t x = -1;
        ck_assert_msg(json_get_int64(json_get_object(o, a), b, &x), "missing number %s.%s", a, b);
        return x;
}

/* ---- table ---- */

START_TEST(test_table) {
        const executor *oc = executor_find("opencode"), *pi = executor_find("pi"), *sh = executor_find("shell");
        ck_assert_ptr_nonnull(oc);
        ck_assert_ptr_nonnull(pi);
        ck_assert_ptr_nonnull(sh);
        ck_assert_ptr_null(executor_find("claude"));
        ck_assert_ptr_null(executor_find(""));
        ck_assert_ptr_null(executor_find(NULL));
        ck_assert_str_eq(executor_names(), "opencode, pi, shell");

        ck_assert_str_eq(oc->id, "opencode");
        ck_assert_ptr_null(oc->failure_prefix);
        ck_assert_str_eq(oc->structured_prefix, "opencode");
        ck_assert_str_eq(oc->boot_failure_reason, "boot_failure");
        ck_assert(oc->needs_model);

        ck_assert_str_eq(pi->id, "pi");
        ck_assert_str_eq(pi->failure_prefix, "pi");
        ck_assert_str_eq(pi->structured_prefix, "pi");
        ck_assert_str_eq(pi->boot_failure_reason, "pi_boot_failure");
        ck_assert(pi->needs_model);

        ck_assert_str_eq(sh->id, "shell");
        ck_assert_str_eq(sh->failure_prefix, "shell");
        ck_assert_str_eq(sh->structured_prefix, "shell");
        ck_assert_str_eq(sh->boot_failure_reason, "shell_boot_failure");
        ck_assert(!sh->needs_model);

        /* Every executor id in the names list resolves. */
        _cleanup_free_ char *names = strdup(executor_names());
        char *save = NULL;
        for (char *t = strtok_r(names, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
                ck_assert_ptr_nonnull(executor_find(t));
}
END_TEST

/* ---- argv ---- */

/* A report summary: --pure, the snapshot attached, the
 * instruction on argv (never the prompt file), never --auto or --variant. */
START_TEST(test_opencode_argv_summary) {
        executor_launch l = {.model = "opencode/mimo-v2.5-free", .variant = "high", .directory = "/s/summaries",
                             .prompt = "Summarize.", .prompt_file = "/tmp/.taskferry-prompt",
                             .attachment = "/s/summaries/oc_a.json"};
        char **argv = build("opencode", &l);
        tf_assert_argv(argv, "opencode", "run", "--dir", "/s/summaries", "--pure", "--format", "json", "-m",
                    "opencode/mimo-v2.5-free", "-f", "/s/summaries/oc_a.json", "--", "Summarize.", NULL);
        strv_free(argv);
        l.session_id = "ses_s";
        argv = build("opencode", &l);
        tf_assert_argv(argv, "opencode", "run", "--dir", "/s/summaries", "--pure", "--format", "json", "-m",
                    "opencode/mimo-v2.5-free", "-f", "/s/summaries/oc_a.json", "--continue", "--session", "ses_s", "--",
                    "Summarize.", NULL);
        strv_free(argv);
}
END_TEST

START_TEST(test_opencode_argv_inline) {
        executor_launch l = { .model = "openrouter/~anthropic/x", .directory = "/w/repo", .prompt = "fix it" };
        _cleanup_strv_free_ char **argv = build("opencode", &l);
        tf_assert_argv(argv, "opencode", "run", "--dir", "/w/repo", "--auto", "--format", "json", "-m",
                    "openrouter/~anthropic/x", "--", "fix it", NULL);
}
END_TEST

START_TEST(test_opencode_argv_resume_variant_file) {
        executor_launch l = { .model = "p/m", .variant = "high", .session_id = "ses_123", .directory = "/w",
                              .prompt = "SECRET PROMPT", .prompt_file = "/run/p/oc_1.prompt.txt" };
        _cleanup_strv_free_ char **argv = build("opencode", &l);
        tf_assert_argv(argv, "opencode", "run", "--dir", "/w", "--auto", "--format", "json", "-m", "p/m", "--continue",
                    "--session", "ses_123", "--variant", "high", "-f", "/run/p/oc_1.prompt.txt", "--", INSTRUCTION,
                    NULL);
        for (char **a = argv; *a; a++) ck_assert_ptr_null(strstr(*a, "SECRET"));
}
END_TEST

START_TEST(test_opencode_argv_errors) {
        const executor *e = executor_find("opencode");
        char **argv = NULL;
        executor_launch no_model = { .directory = "/w", .prompt = "x" };
        ck_assert_int_eq(e->build_argv(&no_model, &argv), -EINVAL);
        executor_launch no_dir = { .model = "p/m", .prompt = "x" };
        ck_assert_int_eq(e->build_argv(&no_dir, &argv), -EINVAL);
        executor_launch no_prompt = { .model = "p/m", .directory = "/w" };
        ck_assert_int_eq(e->build_argv(&no_prompt, &argv), -EINVAL);
        ck_assert_ptr_null(argv);
}
END_TEST

START_TEST(test_pi_argv_provider_split) {
        executor_launch l = { .model = "openrouter/~anthropic/x", .directory = "/w", .prompt = "hi" };
        _cleanup_strv_free_ char **argv = build("pi", &l);
        tf_assert_argv(argv, "pi", "--provider", "openrouter", "--model", "~anthropic/x", "--mode", "json", "-p", "hi",
                    NULL);
}
END_TEST

/* pi 0.73.1 refuses "max" (a warning on every run, level ignored): "highest"
 * and "max" become its highest level, xhigh; real levels pass verbatim. */
START_TEST(test_pi_argv_thinking_levels) {
        const char *cases[][2] = { { "highest", "xhigh" }, { "max", "xhigh" }, { "xhigh", "xhigh" }, { "high", "high" },
                                   { "medium", "medium" }, { "low", "low" }, { "minimal", "minimal" }, { "off", "off" } };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                executor_launch l = { .model = "p/m", .variant = cases[i][0], .directory = "/w", .prompt = "hi" };
                _cleanup_strv_free_ char **argv = build("pi", &l);
                tf_assert_argv(argv, "pi", "--provider", "p", "--model", "m", "--mode", "json", "--thinking", cases[i][1],
                            "-p", "hi", NULL);
                ck_assert_str_eq(executor_pi_thinking_level(cases[i][0]), cases[i][1]);
        }
        ck_assert_ptr_null(executor_pi_thinking_level(NULL));
        /* opencode keeps "max": it is one of its variant keys */
        executor_launch l = { .model = "p/m", .variant = "max", .directory = "/w", .prompt = "hi" };
        _cleanup_strv_free_ char **argv = build("opencode", &l);
        bool has_max = false;
        for (char **a = argv; *a; a++) has_max = has_max || streq(*a, "max");
        ck_assert(has_max);
}
END_TEST

START_TEST(test_pi_argv_no_slash) {
        executor_launch l = { .model = "gpt-5", .directory = "/w", .prompt = "hi" };
        _cleanup_strv_free_ char **argv = build("pi", &l);
        tf_assert_argv(argv, "pi", "--model", "gpt-5", "--mode", "json", "-p", "hi", NULL);
}
END_TEST

START_TEST(test_pi_argv_resume_thinking_file) {
        executor_launch l = { .model = "mockllm/mock-model", .variant = "max", .session_id = "019f90ea",
                              .directory = "/w", .prompt = "SECRET PROMPT", .prompt_file = "/p/oc_2.prompt.txt" };
        _cleanup_strv_free_ char **argv = build("pi", &l);
        tf_assert_argv(argv, "pi", "--provider", "mockllm", "--model", "mock-model", "--mode", "json", "--continue",
                    "--session", "019f90ea", "--thinking", "xhigh", "-p", INSTRUCTION, "@/p/oc_2.prompt.txt", NULL);
        for (char **a = argv; *a; a++) ck_assert_ptr_null(strstr(*a, "SECRET"));

        const executor *e = executor_find("pi");
        char **bad = NULL;
        executor_launch no_model = { .directory = "/w", .prompt = "x" };
        ck_assert_int_eq(e->build_argv(&no_model, &bad), -EINVAL);
        ck_assert_ptr_null(bad);
}
END_TEST

START_TEST(test_shell_argv) {
        executor_launch f = { .directory = "/w", .prompt = "echo SECRET", .prompt_file = "/p/oc_3.prompt.txt" };
        _cleanup_strv_free_ char **a1 = build("shell", &f);
        tf_assert_argv(a1, "sh", "/p/oc_3.prompt.txt", NULL);

        executor_launch i = { .directory = "/w", .prompt = "echo hi" };
        _cleanup_strv_free_ char **a2 = build("shell", &i);
        tf_assert_argv(a2, "sh", "-c", "echo hi", NULL);
}
END_TEST

/* ---- pi normalizer over the real streams ---- */

START_TEST(test_pi_real_all) {
        /* Properties every recorded pi stream must keep. */
        glob_t g;
        ck_assert_int_eq(glob(REAL_DIR "/pi-*.stdout.ndjson", 0, NULL, &g), 0);
        ck_assert_uint_ge(g.gl_pathc, 8);
        for (size_t i = 0; i < g.gl_pathc; i++) {
                _cleanup_strv_free_ char **out = normalize_file("pi", g.gl_pathv[i]);
                ck_assert_msg(out[0], "%s: no output", g.gl_pathv[i]);
                /* The first line is the session id of the first raw line. */
                _cleanup_free_ char *raw = NULL;
                ck_assert_int_eq(read_file(g.gl_pathv[i], 1 << 20, &raw, NULL), 0);
                *strchr(raw, '\n') = 0;
                _cleanup_json_ json_object *session = parse(raw);
                _cleanup_json_ json_object *first = parse(out[0]);
                ck_assert_str_eq(json_get_string(first, "sessionID"), json_get_string(session, "id"));
                ck_assert_int_eq(json_object_object_length(first), 1);
                /* Every written line is a canonical JSON object of a known type. */
                for (char **l = out + 1; *l; l++) {
                        _cleanup_json_ json_object *o = parse(*l);
                        const char *t = type_of(o);
                        ck_assert_msg(t && (streq(t, "text") || streq(t, "tool_progress") || streq(t, "tool_use") ||
                                            streq(t, "step_finish") || streq(t, "error")),
                                      "%s: unexpected line %s", g.gl_pathv[i], *l);
                }
        }
        globfree(&g);
}
END_TEST

START_TEST(test_pi_real_answer) {
        _cleanup_strv_free_ char **out = normalize_file("pi", REAL_DIR "/pi-answer.stdout.ndjson");
        ck_assert_uint_eq(strv_length(out), 3);
        ck_assert_str_eq(out[0], "{\"sessionID\":\"01a22cbc-606f-7155-b2fc-5baf35171d98\"}");
        ck_assert_str_eq(out[1], "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"PONG\","
                                 "\"messageID\":\"chatcmpl-mock-0001\"}}");
        ck_assert_str_eq(out[2], "{\"type\":\"step_finish\",\"part\":{\"type\":\"step-finish\",\"reason\":\"stop\","
                                 "\"tokens\":{\"total\":105,\"input\":100,\"output\":5,\"cache\":{\"write\":0,"
                                 "\"read\":0}},\"cost\":0.00010999999999999999,"
                                 "\"messageID\":\"chatcmpl-mock-0001\"}}");
}
END_TEST

START_TEST(test_pi_real_write_file) {
        _cleanup_strv_free_ char **out = normalize_file("pi", REAL_DIR "/pi-write_file.stdout.ndjson");
        ck_assert_uint_eq(count_type(out, "step_finish"), 2);
        ck_assert_uint_eq(count_type(out, "tool_progress"), 1);
        ck_assert_uint_eq(count_type(out, "tool_use"), 1);
        ck_assert_uint_eq(count_type(out, "text"), 1);
        ck_assert_uint_eq(count_type(out, "error"), 0);

        _cleanup_json_ json_object *s1 = nth_of_type(out, "step_finish", 0);
        _cleanup_json_ json_object *s2 = nth_of_type(out, "step_finish", 1);
        ck_assert_str_eq(json_get_string(json_get_object(s1, "part"), "reason"), "tool-calls");
        ck_assert_int_eq(path_int(json_get_object(s1, "part"), "tokens", "input"), 120);
        ck_assert_int_eq(path_int(json_get_object(s1, "part"), "tokens", "output"), 20);
        ck_assert_int_eq(path_int(json_get_object(s1, "part"), "tokens", "total"), 140);
        ck_assert_str_eq(json_get_string(json_get_object(s2, "part"), "reason"), "stop");
        ck_assert_int_eq(path_int(json_get_object(s2, "part"), "tokens", "input"), 160);
        ck_assert_int_eq(path_int(json_get_object(s2, "part"), "tokens", "output"), 4);
        ck_assert_str_eq(json_get_string(json_get_object(s2, "part"), "messageID"), "chatcmpl-mock-0002");

        _cleanup_json_ json_object *prog = nth_of_type(out, "tool_progress", 0);
        ck_assert_str_eq(json_to_line(prog, NULL), "{\"type\":\"tool_progress\",\"part\":{\"type\":\"tool-progress\","
                                                   "\"tool\":\"write\",\"toolCallId\":\"call_mock_0001\"}}");
        /* pi 0.73's tool_execution_end has no args: the input comes from the start event. */
        _cleanup_json_ json_object *use = nth_of_type(out, "tool_use", 0);
        ck_assert_str_eq(json_to_line(use, NULL),
                         "{\"type\":\"tool_use\",\"part\":{\"type\":\"tool\",\"tool\":\"write\",\"state\":{\"input\":"
                         "{\"path\":\"hello.txt\",\"content\":\"hi\\n\"},\"output\":\"Successfully wrote 3 bytes "
                         "to hello.txt\"}}}");
        _cleanup_json_ json_object *text = nth_of_type(out, "text", 0);
        ck_assert_str_eq(json_get_string(json_get_object(text, "part"), "text"), "done");
}
END_TEST

START_TEST(test_pi_real_rate_limit) {
        _cleanup_strv_free_ char **out = normalize_file("pi", REAL_DIR "/pi-rate_limit.stdout.ndjson");
        /* Four agent runs (one try + three auto-retries), each ending in an error. */
        ck_assert_uint_eq(count_type(out, "error"), 4);
        ck_assert_uint_eq(count_type(out, "step_finish"), 0);
        ck_assert_uint_eq(count_type(out, "text"), 0);
        for (size_t i = 0; i < 4; i++) {
                _cleanup_json_ json_object *e = nth_of_type(out, "error", i);
                ck_assert_str_eq(json_to_line(e, NULL),
                                 "{\"type\":\"error\",\"message\":\"429 Rate limit reached for mock-model (mockllm): "
                                 "please retry later.\",\"error\":{\"name\":\"pi_error\",\"data\":{\"message\":\"429 "
                                 "Rate limit reached for mock-model (mockllm): please retry later.\"}}}");
        }
}
END_TEST

START_TEST(test_pi_real_auth) {
        _cleanup_strv_free_ char **out = normalize_file("pi", REAL_DIR "/pi-auth.stdout.ndjson");
        ck_assert_uint_eq(strv_length(out), 2);
        _cleanup_json_ json_object *e = parse(out[1]);
        ck_assert_str_eq(json_get_string(e, "message"), "401 Incorrect API key provided (mockllm).");
        ck_assert_str_eq(json_get_string(json_get_object(e, "error"), "name"), "pi_error");
        ck_assert_str_eq(json_get_string(json_get_object(json_get_object(e, "error"), "data"), "message"),
                         "401 Incorrect API key provided (mockllm).");

        /* Anthropic's JSON error body, printed raw by pi: its type and message */
        _cleanup_strv_free_ char **ant = normalize_file("pi", REAL_DIR "/pi-auth_anthropic.stdout.ndjson");
        ck_assert_uint_eq(strv_length(ant), 2);
        _cleanup_json_ json_object *a = parse(ant[1]);
        ck_assert_str_eq(json_get_string(a, "message"), "401 authentication_error: invalid x-api-key (mockllm)");
        ck_assert_str_eq(json_get_string(json_get_object(json_get_object(a, "error"), "data"), "message"),
                         "401 authentication_error: invalid x-api-key (mockllm)");
}
END_TEST

START_TEST(test_pi_real_hang_slow_resume) {
        _cleanup_strv_free_ char **hang = normalize_file("pi", REAL_DIR "/pi-hang.stdout.ndjson");
        ck_assert_uint_eq(strv_length(hang), 1); /* only the session id: cut off before any answer */
        ck_assert_uint_eq(count_type(hang, "step_finish"), 0);

        _cleanup_strv_free_ char **slow = normalize_file("pi", REAL_DIR "/pi-slow.stdout.ndjson");
        ck_assert_uint_eq(count_type(slow, "text"), 5);
        ck_assert_uint_eq(count_type(slow, "step_finish"), 1);
        _cleanup_json_ json_object *t3 = nth_of_type(slow, "text", 2);
        ck_assert_str_eq(json_get_string(json_get_object(t3, "part"), "text"), "tick3 ");

        const char *again[] = { REAL_DIR "/pi-resume.stdout.ndjson", REAL_DIR "/pi-continue.stdout.ndjson" };
        for (size_t i = 0; i < ELEMENTSOF(again); i++) {
                _cleanup_strv_free_ char **out = normalize_file("pi", again[i]);
                ck_assert_uint_eq(count_type(out, "step_finish"), 1);
                _cleanup_json_ json_object *sf = nth_of_type(out, "step_finish", 0);
                ck_assert_str_eq(json_get_string(json_get_object(sf, "part"), "messageID"), "chatcmpl-mock-0002");
        }
}
END_TEST

/* ---- pi normalizer: pi events to the canonical shapes, and edge cases ---- */

START_TEST(test_pi_spec_examples) {
        _cleanup_strv_free_ char **out = normalize_str(
                "pi",
                "{\"type\":\"session\",\"version\":3,\"id\":\"019f90ea-1234-70e0-98dc-6847db316eb4\",\"timestamp\":"
                "\"2026-07-23T21:42:41.761Z\",\"cwd\":\"/tmp\"}\n"
                "{\"type\":\"message_update\",\"assistantMessageEvent\":{\"type\":\"text_delta\",\"contentIndex\":1,"
                "\"delta\":\"PONG\"},\"message\":{\"role\":\"assistant\",\"responseId\":"
                "\"06b1bce4cdb53b25ebd32ffbbf5c6b83\"}}\n"
                "{\"type\":\"agent_end\",\"messages\":[{\"role\":\"user\",\"content\":[]},{\"role\":\"assistant\","
                "\"stopReason\":\"stop\",\"responseId\":\"resp-1\",\"usage\":{\"input\":0,\"output\":18,\"cacheRead\":"
                "0,\"cacheWrite\":1507,\"totalTokens\":1525,\"cost\":{\"total\":0.000586725}}}]}\n");
        ck_assert_uint_eq(strv_length(out), 3);
        ck_assert_str_eq(out[0], "{\"sessionID\":\"019f90ea-1234-70e0-98dc-6847db316eb4\"}");
        ck_assert_str_eq(out[1], "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"PONG\",\"messageID\":"
                                 "\"06b1bce4cdb53b25ebd32ffbbf5c6b83\"}}");
        /* tokens in the canonical shape (our deliberate change; the original copied usage). */
        ck_assert_str_eq(out[2], "{\"type\":\"step_finish\",\"part\":{\"type\":\"step-finish\",\"reason\":\"stop\","
                                 "\"tokens\":{\"total\":1525,\"input\":0,\"output\":18,\"cache\":{\"write\":1507,"
                                 "\"read\":0}},\"cost\":0.000586725,\"messageID\":\"resp-1\"}}");
}
END_TEST

START_TEST(test_pi_edge_cases) {
        _cleanup_strv_free_ char **out = normalize_str(
                "pi",
                "{\"type\":\"session\",\"id\":42}\n"                          /* non-string id → nothing */
                "   \t\n"                                                      /* whitespace-only → dropped */
                "No API key found for openai.\n"                               /* plain text → verbatim */
                "{\"type\":\"message_update\",\"assistantMessageEvent\":{\"type\":\"text_start\"},\"message\":{}}\n"
                "{\"type\":\"message_update\",\"assistantMessageEvent\":{\"type\":\"text_delta\"},\"message\":{}}\n"
                "{\"type\":\"tool_execution_update\"}\n"
                "{\"type\":\"tool_execution_end\",\"toolName\":\"bash\",\"args\":{\"c\":1},\"result\":{\"content\":"
                "[{\"type\":\"image\",\"text\":\"no\"}]}}\n"
                "{\"type\":\"turn_start\"}\n"
                "[1,2]\n"
                "{\"type\":\"agent_end\",\"messages\":[{\"role\":\"assistant\",\"stopReason\":\"error\"}]}\n"
                "{\"type\":\"agent_end\",\"messages\":[{\"role\":\"user\"}]}\n"
                "{\"type\":\"agent_end\",\"messages\":[{\"role\":\"assistant\",\"stopReason\":\"stop\"}]}");
        ck_assert_uint_eq(strv_length(out), 6);
        ck_assert_str_eq(out[0], "No API key found for openai.");
        ck_assert_str_eq(out[1], "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"\",\"messageID\":"
                                 "\"__unknown_message__\"}}");
        ck_assert_str_eq(out[2], "{\"type\":\"tool_progress\",\"part\":{\"type\":\"tool-progress\",\"tool\":"
                                 "\"unknown\",\"toolCallId\":null}}");
        ck_assert_str_eq(out[3], "{\"type\":\"tool_use\",\"part\":{\"type\":\"tool\",\"tool\":\"bash\",\"state\":"
                                 "{\"input\":{\"c\":1}}}}");
        ck_assert_str_eq(out[4], "{\"type\":\"error\",\"message\":\"pi agent error\",\"error\":{\"name\":"
                                 "\"pi_error\",\"data\":{\"message\":\"pi agent error\"}}}");
        /* No usage anywhere: step_finish without tokens, cost null. */
        ck_assert_str_eq(out[5], "{\"type\":\"step_finish\",\"part\":{\"type\":\"step-finish\",\"reason\":\"stop\","
                                 "\"cost\":null,\"messageID\":\"__unknown_message__\"}}");
}
END_TEST

START_TEST(test_pi_agent_end_dedup) {
        /* A message_end with usage makes agent_end's step_finish redundant;
         * agent_start starts a new run that may need one again. */
        const char *msg_end = "{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"stopReason\":\"toolUse\","
                              "\"responseId\":\"r1\",\"usage\":{\"input\":7,\"output\":3,\"cacheRead\":1,"
                              "\"cacheWrite\":2,\"totalTokens\":13,\"cost\":{\"total\":0.5}}}}\n";
        const char *agent_end = "{\"type\":\"agent_end\",\"messages\":[{\"role\":\"assistant\",\"stopReason\":"
                                "\"stop\",\"responseId\":\"r2\"}]}\n";
        _cleanup_free_ char *stream = strdup_printf("{\"type\":\"agent_start\"}\n%s%s{\"type\":\"agent_start\"}\n%s",
                                                    msg_end, agent_end, agent_end);
        _cleanup_strv_free_ char **out = normalize_str("pi", stream);
        ck_assert_uint_eq(strv_length(out), 2);
        ck_assert_str_eq(out[0], "{\"type\":\"step_finish\",\"part\":{\"type\":\"step-finish\",\"reason\":"
                                 "\"tool-calls\",\"tokens\":{\"total\":13,\"input\":7,\"output\":3,\"cache\":{\"write\":"
                                 "2,\"read\":1}},\"cost\":0.5,\"messageID\":\"r1\"}}");
        ck_assert_str_eq(out[1], "{\"type\":\"step_finish\",\"part\":{\"type\":\"step-finish\",\"reason\":\"stop\","
                                 "\"cost\":null,\"messageID\":\"r2\"}}");

        /* Error and user message_end events give nothing; other stop reasons pass through. */
        _cleanup_strv_free_ char **out2 = normalize_str(
                "pi",
                "{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"stopReason\":\"error\",\"usage\":{}}}\n"
                "{\"type\":\"message_end\",\"message\":{\"role\":\"user\",\"usage\":{}}}\n"
                "{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"stopReason\":\"length\"}}\n"
                "{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"stopReason\":\"length\",\"usage\":"
                "{}}}\n");
        ck_assert_uint_eq(strv_length(out2), 1);
        ck_assert_str_eq(out2[0], "{\"type\":\"step_finish\",\"part\":{\"type\":\"step-finish\",\"reason\":\"length\","
                                  "\"tokens\":{\"total\":0,\"input\":0,\"output\":0,\"cache\":{\"write\":0,\"read\":"
                                  "0}},\"cost\":null,\"messageID\":\"__unknown_message__\"}}");
}
END_TEST

START_TEST(test_pi_synthetic_pi_a_b) {
        _cleanup_strv_free_ char **a = normalize_file("pi", TASKFERRY_FIXTURES_DIR "/synthetic/pi-a.stdout.ndjson");
        ck_assert_uint_eq(strv_length(a), 4);
        ck_assert_uint_eq(count_type(a, "text"), 2);
        _cleanup_json_ json_object *sf = nth_of_type(a, "step_finish", 0);
        ck_assert_str_eq(json_to_line(json_get_object(sf, "part"), NULL),
                         "{\"type\":\"step-finish\",\"reason\":\"stop\",\"tokens\":{\"total\":1525,\"input\":0,"
                         "\"output\":18,\"cache\":{\"write\":1507,\"read\":0}},\"cost\":0.000586725,\"messageID\":"
                         "\"resp-a1\"}");

        _cleanup_strv_free_ char **b = normalize_file("pi", TASKFERRY_FIXTURES_DIR "/synthetic/pi-b.stdout.ndjson");
        ck_assert_uint_eq(count_type(b, "tool_progress"), 2);
        ck_assert_uint_eq(count_type(b, "tool_use"), 1);
        _cleanup_json_ json_object *use = nth_of_type(b, "tool_use", 0);
        ck_assert_str_eq(json_get_string(json_get_object(json_get_object(use, "part"), "state"), "output"),
                         "README.md\nsrc\n");
}
END_TEST

/* ---- shell normalizer ---- */

START_TEST(test_shell_normalizer) {
        const char text[] = "hello\n\n  \n{\"type\":\"error\",\"message\":\"429\"}\nbad\xff\x00z\nlast";
        _cleanup_strv_free_ char **out = tf_normalize(executor_find("shell"), text, sizeof(text) - 1);
        ck_assert_uint_eq(strv_length(out), 6);
        const char *want[] = { "hello\n", "\n", "  \n", "{\"type\":\"error\",\"message\":\"429\"}\n", NULL, "last" };
        for (size_t i = 0; i < 6; i++) {
                _cleanup_json_ json_object *o = parse(out[i]);
                ck_assert_str_eq(type_of(o), "text");
                json_object *part = json_get_object(o, "part");
                ck_assert_str_eq(json_get_string(part, "type"), "text");
                ck_assert_str_eq(json_get_string(part, "messageID"), "shell");
                if (want[i]) ck_assert_str_eq(json_get_string(part, "text"), want[i]);
        }
        /* Invalid UTF-8 becomes U+FFFD, a NUL byte survives as \u0000. */
        ck_assert_ptr_nonnull(strstr(out[4], "\"text\":\"bad\xef\xbf\xbd\\u0000z\\n\""));
        ck_assert_str_eq(out[5], "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"last\",\"messageID\":"
                                 "\"shell\"}}");
}
END_TEST

/* ---- opencode normalizer ---- */

START_TEST(test_opencode_identity_real) {
        glob_t g;
        ck_assert_int_eq(glob(REAL_DIR "/opencode-*.stdout.ndjson", 0, NULL, &g), 0);
        ck_assert_uint_ge(g.gl_pathc, 8);
        for (size_t i = 0; i < g.gl_pathc; i++) {
                _cleanup_free_ char *raw = NULL;
                size_t len = 0;
                ck_assert_int_eq(read_file(g.gl_pathv[i], 1 << 20, &raw, &len), 0);
                _cleanup_strv_free_ char **out = normalize_file("opencode", g.gl_pathv[i]);
                size_t k = 0;
                for (char *save = NULL, *l = strtok_r(raw, "\n", &save); l; l = strtok_r(NULL, "\n", &save), k++) {
                        ck_assert_msg(out[k], "%s: line %zu missing", g.gl_pathv[i], k);
                        /* The recorded lines are compact JSON already: byte-identical. */
                        ck_assert_str_eq(out[k], l);
                }
                ck_assert_ptr_null(out[k]);
        }
        globfree(&g);
}
END_TEST

START_TEST(test_opencode_normalizer_edges) {
        _cleanup_strv_free_ char **out = normalize_str(
                "opencode", "  { \"type\" : \"text\", \"part\" : {\"text\":\"a/b\"} }  \n\n \t \n"
                            "Error: boom\n{not json\n{\"type\":\"step_start\"}");
        ck_assert_uint_eq(strv_length(out), 4);
        ck_assert_str_eq(out[0], "{\"type\":\"text\",\"part\":{\"text\":\"a/b\"}}");
        ck_assert_str_eq(out[1], "Error: boom");
        ck_assert_str_eq(out[2], "{not json");
        ck_assert_str_eq(out[3], "{\"type\":\"step_start\"}");
}
END_TEST

TF_MAIN("executor", "core", NULL, NULL, 0, test_table, test_opencode_argv_inline, test_opencode_argv_summary,
        test_opencode_argv_resume_variant_file, test_pi_argv_thinking_levels, test_opencode_argv_errors,
        test_pi_argv_provider_split, test_pi_argv_no_slash, test_pi_argv_resume_thinking_file, test_shell_argv,
        test_pi_real_all, test_pi_real_answer, test_pi_real_write_file, test_pi_real_rate_limit, test_pi_real_auth,
        test_pi_real_hang_slow_resume, test_pi_spec_examples, test_pi_edge_cases, test_pi_agent_end_dedup,
        test_pi_synthetic_pi_a_b, test_shell_normalizer, test_opencode_identity_real, test_opencode_normalizer_edges)
