/* cli-error.h: the CLI's error values (usage errors exit 2, all others 1)
 * and the {error, help} object every failure is printed as, folded from the
 * error text as the original's errorValue folds it. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "cli-error.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"

/* The printed object of e, as one JSON line. */
static void value_is(const cli_error *e, const char *want) {
        _cleanup_json_ json_object *v = cli_error_value(e);
        ck_assert_ptr_nonnull(v);
        /* exactly the two keys, error first */
        ck_assert_int_eq(json_object_object_length(v), 2);
        ck_assert_msg(streq(json_to_line(v, NULL), want), "%s, want %s", json_to_line(v, NULL), want);
}

START_TEST(usage_error_sets_exit_2_and_default_help) {
        cli_error e = {};
        ck_assert_int_eq(cli_error_usage(&e, NULL, "unknown command: %s", "bogus"), -EINVAL);
        ck_assert_int_eq(e.exit_code, CLI_EXIT_USAGE);
        ck_assert_int_eq(CLI_EXIT_USAGE, 2);
        ck_assert_str_eq(e.text, "unknown command: bogus");
        ck_assert_str_eq(e.help, "Run `taskferry --help` for usage");
        ck_assert_ptr_null(e.code);
        value_is(&e, "{\"error\":\"unknown command: bogus\",\"help\":\"Run `taskferry --help` for usage\"}");

        /* an explicit help is kept */
        ck_assert_int_eq(cli_error_usage(&e, "Run `taskferry --help` to see available commands", "unknown command: x"),
                         -EINVAL);
        value_is(&e, "{\"error\":\"unknown command: x\",\"help\":\"Run `taskferry --help` to see available commands\"}");
        cli_error_done(&e);
        ck_assert_ptr_null(e.text);
        ck_assert_ptr_null(e.help);
        ck_assert_int_eq(e.exit_code, 0);
}
END_TEST

START_TEST(fail_sets_exit_1_and_code) {
        cli_error e = {};
        ck_assert_int_eq(cli_error_fail(&e, "UNKNOWN_TASK", "error: unknown task id: %s\nhelp: run taskferry list", "zz"),
                         -EIO);
        ck_assert_int_eq(e.exit_code, CLI_EXIT_FAILURE);
        ck_assert_int_eq(CLI_EXIT_FAILURE, 1);
        ck_assert_str_eq(e.code, "UNKNOWN_TASK");
        ck_assert_ptr_null(e.help);
        value_is(&e, "{\"error\":\"unknown task id: zz\",\"help\":\"run taskferry list\"}");
        /* a later error replaces the earlier one, code and help included
         * (LeakSanitizer: nothing of the first is left) */
        ck_assert_int_eq(cli_error_usage(&e, "h", "second"), -EINVAL);
        ck_assert_ptr_null(e.code);
        ck_assert_int_eq(e.exit_code, CLI_EXIT_USAGE);
        ck_assert_int_eq(cli_error_fail(&e, NULL, "third"), -EIO);
        ck_assert_ptr_null(e.help);
        ck_assert_ptr_null(e.code);
        value_is(&e, "{\"error\":\"third\",\"help\":\"Retry the command or run `taskferry --help`\"}");
        cli_error_done(&e);
        /* done twice is harmless */
        cli_error_done(&e);
}
END_TEST

/* The folding of the text into {error, help}: each row's text (as
 * cli_error_fail sets it, no own help) and the object printed. */
static const struct {
        const char *text;
        const char *want;
} folds[] = {
        /* no "error:" line: the first line, the rest dropped */
        {"daemon connection closed", "{\"error\":\"daemon connection closed\",\"help\":\"Retry the command or run `taskferry --help`\"}"},
        {"first\nsecond\nthird", "{\"error\":\"first\",\"help\":\"Retry the command or run `taskferry --help`\"}"},
        /* ... but a help: line is still the help */
        {"--model is required\nhelp: pass --model", "{\"error\":\"--model is required\",\"help\":\"pass --model\"}"},
        /* empty text, or an empty first line */
        {"", "{\"error\":\"taskferry request failed\",\"help\":\"Retry the command or run `taskferry --help`\"}"},
        {"\nhelp: h", "{\"error\":\"taskferry request failed\",\"help\":\"h\"}"},
        /* the error: line, prefix stripped and trimmed; the lines that are
         * neither error: nor help: appended after "\n", untrimmed */
        {"error:   unknown task id: zzz  \nhelp: run taskferry list to see valid task ids",
         "{\"error\":\"unknown task id: zzz\",\"help\":\"run taskferry list to see valid task ids\"}"},
        {"error: taskferry daemon did not become ready within 5000ms: connect ENOENT /s\ndaemon boot failed: bad key\n"
         "help: check /r permissions and daemon startup diagnostics, then retry",
         "{\"error\":\"taskferry daemon did not become ready within 5000ms: connect ENOENT /s\\ndaemon boot failed: "
         "bad key\",\"help\":\"check /r permissions and daemon startup diagnostics, then retry\"}"},
        /* lines before the error: line are appended too, in order */
        {"lead\nerror: e\n  indented\nhelp: h\ntail",
         "{\"error\":\"e\\nlead\\n  indented\\ntail\",\"help\":\"h\"}"},
        /* a second error: line is neither the message nor appended */
        {"error: one\nerror: two", "{\"error\":\"one\",\"help\":\"Retry the command or run `taskferry --help`\"}"},
        /* the first non-empty help: line wins */
        {"error: e\nhelp:   \nhelp: second\nhelp: third", "{\"error\":\"e\",\"help\":\"second\"}"},
        /* a prefix mid-line is not a prefix */
        {"x error: y\nnot help: z", "{\"error\":\"x error: y\",\"help\":\"Retry the command or run `taskferry --help`\"}"},
        /* a CR before the newline is trimmed from the error: line */
        {"error: crlf\r\nhelp: h\r", "{\"error\":\"crlf\",\"help\":\"h\"}"},
};

START_TEST(value_folds_text) {
        cli_error e = {};
        cli_error_fail(&e, NULL, "%s", folds[_i].text);
        value_is(&e, folds[_i].want);
        cli_error_done(&e);
}
END_TEST

START_TEST(own_help_wins_over_help_lines) {
        cli_error e = {};
        cli_error_usage(&e, "own help", "error: m\nhelp: from text");
        value_is(&e, "{\"error\":\"m\",\"help\":\"own help\"}");
        cli_error_done(&e);
        /* an error never set prints the generic failure */
        value_is(&e, "{\"error\":\"taskferry request failed\",\"help\":\"Retry the command or run `taskferry --help`\"}");
}
END_TEST

/* Control bytes of a worker's text stay in the value as they are: the
 * TOON and JSON printers escape them (test-toon), this layer neither drops
 * nor doubles them. */
START_TEST(value_keeps_bytes) {
        cli_error e = {};
        cli_error_fail(&e, NULL, "error: bad \x1b[31mred\x07\nhelp: h");
        _cleanup_json_ json_object *v = cli_error_value(&e);
        ck_assert_str_eq(json_get_string(v, "error"), "bad \x1b[31mred\x07");
        cli_error_done(&e);
}
END_TEST

int main(void) {
        Suite *s = suite_create("cli-error");
        TCase *tc = tf_tcase(s, "error", NULL, NULL, 0,
                             TF_TESTS(usage_error_sets_exit_2_and_default_help, fail_sets_exit_1_and_code,
                                      own_help_wins_over_help_lines, value_keeps_bytes));
        TF_LOOP(tc, value_folds_text, folds);
        return tf_run_suite(s);
}
