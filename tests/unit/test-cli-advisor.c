/* cli-advisor.c (where the CLI finds the advisor's context): the budget's
 * sources, the Claude Code transcript tail (its byte window, BOM, partial
 * first line, entry filter, code-point cut) and the prompt layout. Files
 * under $TASKFERRY_TEST_TMPDIR. */

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli-advisor.h"
#include "unit.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

static char *dir;

static void setup(void) { dir = tf_tmpdir_new("tf-cli-advisor"); }

static void teardown(void) { dir = tf_tmpdir_free(dir); }

START_TEST(budget_sources) {
        char *cfg = tf_put(dir, "config.json", "{\"advisorContextChars\": 50}", 27);
        ck_assert_uint_eq(cli_advisor_budget("1e3", cfg), 1000);
        ck_assert_uint_eq(cli_advisor_budget(" 7 ", cfg), 7);
        /* not a positive number: the config, then the default */
        ck_assert_uint_eq(cli_advisor_budget("abc", cfg), 50);
        ck_assert_uint_eq(cli_advisor_budget("0", cfg), 50);
        ck_assert_uint_eq(cli_advisor_budget("-5", cfg), 50);
        ck_assert_uint_eq(cli_advisor_budget(NULL, cfg), 50);
        ck_assert_uint_eq(cli_advisor_budget(NULL, NULL), 120000);
        char *bad = tf_put(dir, "bad.json", "{\"advisorContextChars\": 0}", 26);
        ck_assert_uint_eq(cli_advisor_budget(NULL, bad), 120000);
        ck_assert_uint_eq(cli_advisor_budget(NULL, "/nonexistent/config.json"), 120000);
        free(cfg), free(bad);
}
END_TEST

START_TEST(transcript_path) {
        char *p = cli_advisor_transcript_path("/home/u", "/work/my/repo", "abc-123");
        ck_assert_str_eq(p, "/home/u/.claude/projects/-work-my-repo/abc-123.jsonl");
        free(p);
}
END_TEST

START_TEST(transcript_entries) {
        const char *t = "\xEF\xBB\xBF{\"type\":\"user\",\"message\":{\"content\":\"hi\"}}\n"
                        "{\"type\":\"system\",\"message\":{\"content\":\"skip\"}}\n"
                        "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"tool_use\",\"name\":\"x\"}]}}\n"
                        "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}}\n"
                        "{broken\n"
                        "{\"type\":\"user\",\"message\":{\"content\":\"\"}}\n"
                        "{\"type\":\"user\",\"message\":{\"content\":\"bye\"}}";
        char *p = tf_put(dir, "t.jsonl", t, strlen(t));
        char *text = NULL;
        cli_error err = {0};
        ck_assert_int_eq(cli_advisor_transcript_text(p, 1000, &text, &err), 0);
        ck_assert_str_eq(text, "user: hi\n\nassistant: a\nb\n\nuser: bye");
        free(text);
        /* the last `budget` code points */
        ck_assert_int_eq(cli_advisor_transcript_text(p, 4, &text, &err), 0);
        ck_assert_str_eq(text, " bye");
        free(text);
        /* no user/assistant text: empty (no context) */
        char *q = tf_put(dir, "none.jsonl", "{\"type\":\"system\"}\n", 18);
        ck_assert_int_eq(cli_advisor_transcript_text(q, 1000, &text, &err), 0);
        ck_assert_str_eq(text, "");
        free(text);
        /* unreadable: a usage error naming the path */
        ck_assert_int_eq(cli_advisor_transcript_text("/nonexistent/t.jsonl", 1000, &text, &err), -EINVAL);
        ck_assert_int_eq(err.exit_code, CLI_EXIT_USAGE);
        ck_assert(strstr(err.text, "/nonexistent/t.jsonl") != NULL);
        cli_error_done(&err);
        free(p), free(q);
}
END_TEST

START_TEST(transcript_tail_window) {
        /* 10000 bytes of a first entry, then a short one: budget 600 → the read
         * is max(4096, 4800) bytes from the end, lands inside the first line,
         * which is dropped (its text would fit the budget) */
        size_t n = 10000;
        char *big = malloc(n + 200);
        int k = snprintf(big, 200, "{\"type\":\"user\",\"message\":{\"content\":\"");
        memset(big + k, 'x', n);
        size_t len = (size_t) k + n;
        len += (size_t) sprintf(big + len, "\"}}\n{\"type\":\"assistant\",\"message\":{\"content\":\"ok\"}}\n");
        char *p = tf_put(dir, "big.jsonl", big, len);
        char *text = NULL;
        cli_error err = {0};
        ck_assert_int_eq(cli_advisor_transcript_text(p, 600, &text, &err), 0);
        ck_assert_str_eq(text, "assistant: ok");
        free(text);
        /* a tiny budget still reads the 4096-byte floor */
        ck_assert_int_eq(cli_advisor_transcript_text(p, 5, &text, &err), 0);
        ck_assert_str_eq(text, "t: ok");
        free(text);
        /* a budget whose window covers the file keeps the first entry */
        ck_assert_int_eq(cli_advisor_transcript_text(p, 20000, &text, &err), 0);
        ck_assert(startswith(text, "user: xxx"));
        free(text), free(p), free(big);
}
END_TEST

START_TEST(prompt_layout) {
        char *p = cli_advisor_prompt("ask", "ferry-log", "t\xC3\xA9xt");
        char *want = strdup_printf("ask\n%s\n\n--- attached context (ferry-log, 4 chars) ---\nt\xC3\xA9xt\n---", cli_advisor_instructions);
        ck_assert_str_eq(p, want);
        free(p), free(want);
        /* UTF-16 length: an astral character counts 2 */
        p = cli_advisor_prompt(NULL, "claude-session", "\xF0\x9F\x98\x80");
        want = strdup_printf("%s\n\n--- attached context (claude-session, 2 chars) ---\n\xF0\x9F\x98\x80\n---", cli_advisor_instructions);
        ck_assert_str_eq(p, want);
        free(p), free(want);
        p = cli_advisor_prompt("only", NULL, NULL);
        want = strdup_printf("only\n%s", cli_advisor_instructions);
        ck_assert_str_eq(p, want);
        free(p), free(want);
}
END_TEST

TF_MAIN("cli-advisor", "core", setup, teardown, 0, budget_sources, transcript_path, transcript_entries,
        transcript_tail_window, prompt_layout)
