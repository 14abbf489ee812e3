/* CLI argument grammar: argv[0] and what follows it, the flags and their
 * values, the cross-flag rules, retired names, durations, help objects —
 * messages and help byte for byte as the original taskferry's. */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli-args.h"
#include "cli-resolve.h"
#include "js-number-cases.h"
#include "protocol.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"

/* Parse a NULL-terminated list of arguments. */
static int parse(cli_args *a, cli_error *err, ...) {
        char *argv[64];
        size_t n = 0;
        va_list ap;
        va_start(ap, err);
        for (char *s; (s = va_arg(ap, char *)); ) argv[n++] = s;
        va_end(ap);
        *a = (cli_args) {};
        *err = (cli_error) {};
        return cli_args_parse(argv, n, a, err);
}

#define PARSE_OK(...)                                                    \
        cli_args a = {};                                                 \
        cli_error err = {};                                              \
        ck_assert_int_eq(parse(&a, &err, __VA_ARGS__, NULL), 0)

/* Expect a usage error with exactly this message and help (help NULL: not checked). */
#define EXPECT_USAGE(want_msg, want_help, ...)                                       \
        do {                                                                         \
                cli_args _a = {};                                                    \
                cli_error _e = {};                                                   \
                const char *_wh = (want_help);                                       \
                ck_assert_int_eq(parse(&_a, &_e, __VA_ARGS__, NULL), -EINVAL);       \
                ck_assert_int_eq(_e.exit_code, CLI_EXIT_USAGE);                      \
                ck_assert_str_eq(_e.text, want_msg);                                 \
                if (_wh) ck_assert_str_eq(_e.help, _wh);                             \
                cli_error_done(&_e);                                                 \
                cli_args_done(&_a);                                                  \
        } while (0)

static const char *opts_line(const cli_args *a) {
        return json_to_line(a->options, NULL);
}

START_TEST(test_no_args_is_home) {
        PARSE_OK((char *) NULL);
        ck_assert_str_eq(a.command, "home");
        ck_assert(!a.help);
        ck_assert(!a.json);
        cli_args_done(&a);
}
END_TEST

START_TEST(test_top_help_and_version) {
        {
                PARSE_OK("--help");
                ck_assert_str_eq(a.command, "home");
                ck_assert(a.help);
                cli_args_done(&a);
        }
        {
                PARSE_OK("-h");
                ck_assert(a.help);
                cli_args_done(&a);
        }
        {
                PARSE_OK("--version");
                ck_assert_str_eq(a.command, "version");
                cli_args_done(&a);
        }
        {
                PARSE_OK("-V");
                ck_assert_str_eq(a.command, "version");
                cli_args_done(&a);
        }
        EXPECT_USAGE("unexpected argument: list", "Run `taskferry --help` for usage", "--help", "list");
        EXPECT_USAGE("unexpected argument: x", "Run `taskferry --help` for usage", "-V", "x");
        EXPECT_USAGE("unexpected argument: --full", "Run `taskferry --help` for usage", "--version", "--full");
}
END_TEST

START_TEST(test_unknown_and_renamed_commands) {
        EXPECT_USAGE("unknown command: bogus", "Run `taskferry --help` to see available commands", "bogus");
        EXPECT_USAGE("unknown command: --full", "Run `taskferry --help` to see available commands", "--full");
        EXPECT_USAGE("poll was renamed to wait", "Use `taskferry wait <id>`", "poll", "x");
        EXPECT_USAGE("taskferry_poll is an MCP tool name and is no longer a command", "Use: taskferry wait abc",
                     "taskferry_poll", "abc");
        EXPECT_USAGE("taskferry_poll is an MCP tool name and is no longer a command", "Use: taskferry wait <id>",
                     "taskferry_poll");
        EXPECT_USAGE("taskferry_dispatch is an MCP tool name and is no longer a command",
                     "Use: taskferry dispatch --prompt \"<text>\" (received a b)", "taskferry_dispatch", "a", "b");
        EXPECT_USAGE("taskferry_dispatch is an MCP tool name and is no longer a command",
                     "Use: taskferry dispatch --prompt \"<text>\"", "taskferry_dispatch");
        EXPECT_USAGE("taskferry_list is an MCP tool name and is no longer a command", "Use: taskferry list",
                     "taskferry_list");
        EXPECT_USAGE("taskferry_advisor is an MCP tool name and is no longer a command",
                     "Use: taskferry advisor --prompt \"<text>\" --model <id>", "taskferry_advisor");
        EXPECT_USAGE("taskferry_status is an MCP tool name and is no longer a command", "Use: taskferry status <id>",
                     "taskferry_status");
        EXPECT_USAGE("taskferry_frobnicate is an MCP tool name and is no longer a command",
                     "Run `taskferry --help` for the AXI CLI commands", "taskferry_frobnicate");
}
END_TEST

START_TEST(test_json_flag_anywhere) {
        {
                PARSE_OK("--json", "status", "oc_1");
                ck_assert(a.json);
                ck_assert_str_eq(a.command, "status");
                ck_assert_str_eq(a.task_id, "oc_1");
                cli_args_done(&a);
        }
        {
                PARSE_OK("status", "oc_1", "--json", "--full");
                ck_assert(a.json);
                ck_assert(cli_args_bool(&a, "full"));
                cli_args_done(&a);
        }
        {
                PARSE_OK("--json");
                ck_assert(a.json);
                ck_assert_str_eq(a.command, "home");
                cli_args_done(&a);
        }
        EXPECT_USAGE("unknown flag --json for `status`", NULL, "status", "x", "--json=1");
}
END_TEST

START_TEST(test_positional_task_id) {
        static const char *const positional[] = { "cancel", "wait", "status", "tail", "summary", "result",
                                                  "accept", "reject", "output", NULL };
        for (size_t i = 0; positional[i]; i++) {
                PARSE_OK((char *) positional[i], "oc_abc");
                ck_assert_str_eq(a.task_id, "oc_abc");
                cli_args_done(&a);
                cli_args b = {};
                cli_error e = {};
                ck_assert_int_eq(parse(&b, &e, positional[i], NULL), -EINVAL);
                ck_assert_str_eq(e.text, "task id is required");
                _cleanup_free_ char *help = strdup_printf("Valid flags for %s: ", positional[i]);
                ck_assert(startswith(e.help, help));
                cli_error_done(&e);
                cli_args_done(&b);
        }
        EXPECT_USAGE("unexpected argument: b", "Valid flags for status: --full. Run `taskferry status --help` for details",
                     "status", "a", "b");
        EXPECT_USAGE("unexpected argument: foo",
                     "Valid flags for list: --directory <path>, --all, --limit <number>. Run `taskferry list --help` for details",
                     "list", "foo");
        EXPECT_USAGE("task id is required", NULL, "status", "");
        EXPECT_USAGE("unexpected argument: x", NULL, "dispatch", "x", "--prompt", "p");
        /* the id can come after flags */
        PARSE_OK("wait", "--timeout", "5s", "oc_z");
        ck_assert_str_eq(a.task_id, "oc_z");
        cli_args_done(&a);
}
END_TEST

START_TEST(test_command_help_skips_required_checks) {
        {
                PARSE_OK("status", "--help");
                ck_assert(a.help);
                ck_assert_str_eq(a.command, "status");
                ck_assert_ptr_null(a.task_id);
                cli_args_done(&a);
        }
        {
                PARSE_OK("dispatch", "-h");
                ck_assert(a.help);
                cli_args_done(&a);
        }
        {
                PARSE_OK("result", "x", "--diff", "--full", "--help");
                ck_assert(a.help);
                cli_args_done(&a);
        }
        /* unknown flags still fail with --help */
        EXPECT_USAGE("unknown flag --bogus for `dispatch`", NULL, "dispatch", "--help", "--bogus");
        /* --all + --directory is checked even with --help */
        EXPECT_USAGE("--all cannot be combined with --directory", NULL, "list", "--all", "--directory", "/", "--help");
}
END_TEST

START_TEST(test_unknown_flags_and_valid_flags_help) {
        EXPECT_USAGE("unknown flag --bogus for `status`",
                     "Valid flags for status: --full. Run `taskferry status --help` for details",
                     "status", "x", "--bogus");
        EXPECT_USAGE("unknown flag --force for `reject`",
                     "Valid flags for reject: none. Run `taskferry reject --help` for details",
                     "reject", "x", "--force");
        EXPECT_USAGE("unknown flag - for `status`", NULL, "status", "x", "-");
        EXPECT_USAGE("unknown flag -f for `status`", NULL, "status", "x", "-f");
        EXPECT_USAGE("unknown flag --prompt for `status`", NULL, "status", "x", "--prompt", "p");
        EXPECT_USAGE("unknown flag --no-overlay for `advisor`", NULL, "advisor", "--model", "m", "--no-overlay");
        EXPECT_USAGE("unknown flag --all for `status`", NULL, "status", "x", "--all");
        EXPECT_USAGE("unknown flag --bogus for `cancel`",
                     "Valid flags for cancel: --grace-ms <number>. Run `taskferry cancel --help` for details",
                     "cancel", "x", "--bogus=3");
        EXPECT_USAGE("unknown flag --full for `accept`",
                     "Valid flags for accept: --force, --allow-config. Run `taskferry accept --help` for details",
                     "accept", "x", "--full");
}
END_TEST

START_TEST(test_retired_flag_names) {
        EXPECT_USAGE("unknown flag --timeout-ms for `wait`", "--timeout-ms was renamed; use --timeout",
                     "wait", "x", "--timeout-ms", "5");
        EXPECT_USAGE("unknown flag --timeout_ms for `advisor`", "--timeout_ms was renamed; use --timeout",
                     "advisor", "--timeout_ms", "5");
        EXPECT_USAGE("unknown flag --timeout-ms for `status`",
                     "Valid flags for status: --full. Run `taskferry status --help` for details",
                     "status", "x", "--timeout-ms", "5");
        EXPECT_USAGE("unknown flag --tail_chars for `wait`", "--tail_chars was renamed; use --tail-chars",
                     "wait", "x", "--tail_chars", "5");
        EXPECT_USAGE("unknown flag --max_words for `summary`", "--max_words was renamed; use --max-words",
                     "summary", "x", "--max_words", "80");
        EXPECT_USAGE("unknown flag --session_id for `dispatch`", "--session_id was renamed; use --session-id",
                     "dispatch", "--session_id", "s");
        EXPECT_USAGE("unknown flag --style for `summary`", "--style was renamed; use --mode",
                     "summary", "x", "--style", "report");
        EXPECT_USAGE("unknown flag --rw-dirs for `dispatch`", "--rw-dirs was renamed; use --rw-bind",
                     "dispatch", "--rw-dirs", "/a");
        EXPECT_USAGE("unknown flag --ro-dirs for `dispatch`", "--ro-dirs was renamed; use --ro-bind",
                     "dispatch", "--ro-dirs", "/a");
        EXPECT_USAGE("unknown flag --rw-dirs for `list`",
                     "Valid flags for list: --directory <path>, --all, --limit <number>. Run `taskferry list --help` for details",
                     "list", "--rw-dirs", "/a");
        EXPECT_USAGE("unknown flag --task-id for `status`",
                     "--task-id was replaced by the positional task id; use `taskferry status <id>`",
                     "status", "--task-id", "x");
        EXPECT_USAGE("unknown flag --timeout-ms for `wait`", "--timeout-ms was renamed; use --timeout",
                     "wait", "x", "--timeout-ms=5");
        /* --task-id is a real flag on watch */
        PARSE_OK("watch", "--task-id", "oc_1");
        ck_assert_str_eq(cli_args_string(&a, "taskId"), "oc_1");
        cli_args_done(&a);
}
END_TEST

START_TEST(test_value_flag_errors) {
        EXPECT_USAGE("--timeout requires a non-empty value", "Valid flags for wait: --timeout <duration>, --tail-chars <number>, --full, --summarize. Run `taskferry wait --help` for details", "wait", "x", "--timeout=");
        EXPECT_USAGE("--timeout requires a value", "Valid flags for wait: --timeout <duration>, --tail-chars <number>, --full, --summarize. Run `taskferry wait --help` for details", "wait", "x", "--timeout");
        EXPECT_USAGE("--prompt requires a value", NULL, "dispatch", "--prompt", "--model", "m");
        EXPECT_USAGE("--prompt requires a non-empty value", NULL, "dispatch", "--prompt", "");
        EXPECT_USAGE("--full does not take a value",
                     "Valid flags for status: --full. Run `taskferry status --help` for details",
                     "status", "x", "--full=1");
        EXPECT_USAGE("--full does not take a value", NULL, "status", "x", "--full=");
        /* single-dash values are accepted */
        {
                PARSE_OK("dispatch", "--prompt", "-");
                ck_assert_str_eq(cli_args_string(&a, "prompt"), "-");
                cli_args_done(&a);
        }
        {
                PARSE_OK("dispatch", "--prompt=a=b", "--model", "-x");
                ck_assert_str_eq(cli_args_string(&a, "prompt"), "a=b");
                ck_assert_str_eq(cli_args_string(&a, "model"), "-x");
                cli_args_done(&a);
        }
}
END_TEST

START_TEST(test_duplicate_flags) {
        EXPECT_USAGE("duplicate flag timeoutMs",
                     "Valid flags for wait: --timeout <duration>, --tail-chars <number>, --full, --summarize. Run `taskferry wait --help` for details",
                     "wait", "x", "--timeout", "1", "--timeout=2");
        EXPECT_USAGE("duplicate flag full", NULL, "result", "x", "--full", "--full");
        EXPECT_USAGE("duplicate flag sessionId", NULL, "dispatch", "--prompt", "p", "--session-id", "a", "--session-id", "b");
        EXPECT_USAGE("duplicate flag noSandbox", NULL, "dispatch", "--prompt", "p", "--no-sandbox", "--no-sandbox");
        /* the value is validated before the duplicate check */
        EXPECT_USAGE("--timeout must be milliseconds or a duration like 30s, 5m, 1h", NULL,
                     "wait", "x", "--timeout", "1", "--timeout", "bad");
}
END_TEST

START_TEST(test_durations) {
        static const struct { const char *in; int64_t ms; } ok[] = {
                { "0", 0 }, { "10000", 10000 }, { "30s", 30000 }, { "5m", 300000 }, { "1h", 3600000 },
                { "2147483647", 2147483647 }, { "0s", 0 }, { "007", 7 }, { "596h", 2145600000 },
                { "2147483s", 2147483000 }, { "35791m", 2147460000 },
        };
        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                cli_error e = {};
                int64_t ms = -1;
                ck_assert_msg(cli_parse_duration(ok[i].in, "--timeout", &ms, &e) == 0, "%s", ok[i].in);
                ck_assert_int_eq(ms, ok[i].ms);
        }
        static const char *const bad_format[] = { "10ms", "1d", "1.5s", "1s2m", "1S", "1H", " 5", "5 ", "-5", "+5",
                                                   "s", "5x", "1e3", "0x10", "five", NULL };
        for (size_t i = 0; bad_format[i]; i++) {
                cli_error e = {};
                int64_t ms;
                ck_assert_int_eq(cli_parse_duration(bad_format[i], "--timeout", &ms, &e), -EINVAL);
                ck_assert_str_eq(e.text, "--timeout must be milliseconds or a duration like 30s, 5m, 1h");
                ck_assert_str_eq(e.help, "Use --timeout with milliseconds (e.g. 10000) or a duration string (e.g. 30s, 5m, 1h); values must not exceed 2147483647 milliseconds (about 24 days)");
                cli_error_done(&e);
        }
        static const char *const too_big[] = { "2147483648", "597h", "2147484s", "35792m", "9007199254740991",
                                                "99999999999999999999s", NULL };
        for (size_t i = 0; too_big[i]; i++) {
                cli_error e = {};
                int64_t ms;
                ck_assert_int_eq(cli_parse_duration(too_big[i], "--flush-interval", &ms, &e), -EINVAL);
                ck_assert_msg(streq(e.text, "--flush-interval must not exceed 2147483647 milliseconds (about 24 days)"),
                              "%s: %s", too_big[i], e.text);
                cli_error_done(&e);
        }
        cli_error e = {};
        int64_t ms;
        ck_assert_int_eq(cli_parse_duration("9007199254740993", "--timeout", &ms, &e), -EINVAL);
        ck_assert_str_eq(e.text, "--timeout is not a valid integer");
        cli_error_done(&e);

        /* through the parser */
        PARSE_OK("wait", "x", "--timeout", "0");
        int64_t t = -1;
        ck_assert(cli_args_int(&a, "timeoutMs", &t));
        ck_assert_int_eq(t, 0);
        cli_args_done(&a);
        EXPECT_USAGE("--timeout must not exceed 2147483647 milliseconds (about 24 days)", NULL,
                     "wait", "x", "--timeout=2147483648");
}
END_TEST

START_TEST(test_integers) {
        EXPECT_USAGE("--grace-ms must be an integer", "Use --grace-ms with a number from 0 through 9007199254740991",
                     "cancel", "x", "--grace-ms", "abc");
        EXPECT_USAGE("--grace-ms must be an integer", NULL, "cancel", "x", "--grace-ms", "-1");
        EXPECT_USAGE("--grace-ms must be an integer", NULL, "cancel", "x", "--grace-ms", "1.5");
        EXPECT_USAGE("--grace-ms must be an integer", NULL, "cancel", "x", "--grace-ms", "1e3");
        EXPECT_USAGE("--grace-ms must be from 0 through 9007199254740991",
                     "Use --grace-ms with a number from 0 through 9007199254740991",
                     "cancel", "x", "--grace-ms", "9007199254740992");
        EXPECT_USAGE("--tail-chars must be a positive integer", "Use --tail-chars with a number from 1 through 65536",
                     "wait", "x", "--tail-chars", "0");
        EXPECT_USAGE("--tail-chars must be a positive integer from 1 through 65536",
                     "Use --tail-chars with a number from 1 through 65536", "wait", "x", "--tail-chars", "65537");
        EXPECT_USAGE("--chars must be a positive integer from 1 through 131072", NULL, "tail", "x", "--chars", "131073");
        EXPECT_USAGE("--max-words must be from 75 through 300", "Use --max-words with a number from 75 through 300",
                     "summary", "x", "--max-words", "74");
        EXPECT_USAGE("--max-words must be from 75 through 300", NULL, "summary", "x", "--max-words", "301");
        EXPECT_USAGE("--limit must be a positive integer", "Use --limit with a number from 1 through 9007199254740991",
                     "list", "--limit", "0");
        EXPECT_USAGE("--max-output-file-bytes must be a positive integer", NULL, "output", "x", "--max-output-file-bytes", "0");

        PARSE_OK("cancel", "x", "--grace-ms", "007");
        int64_t g = -1;
        ck_assert(cli_args_int(&a, "graceMs", &g));
        ck_assert_int_eq(g, 7);
        cli_args_done(&a);

        cli_error e = {};
        int64_t v;
        ck_assert_int_eq(cli_parse_integer("65536", "--tail-chars", 1, 65536, &v, &e), 0);
        ck_assert_int_eq(v, 65536);
        ck_assert_int_eq(cli_parse_integer("0", "--grace-ms", 0, CLI_MAX_SAFE_INTEGER, &v, &e), 0);
        ck_assert_int_eq(v, 0);
        ck_assert_int_eq(cli_parse_integer("9007199254740991", "--grace-ms", 0, CLI_MAX_SAFE_INTEGER, &v, &e), 0);
        ck_assert_int_eq(v, CLI_MAX_SAFE_INTEGER);
        ck_assert_int_eq(cli_parse_integer("75", "--max-words", 75, 300, &v, &e), 0);
        ck_assert_int_eq(v, 75);
}
END_TEST

/* --disk-max <size>: bytes or a K/M/G/T suffix, sent as diskMax bytes. */
START_TEST(test_disk_max) {
        {
                PARSE_OK("dispatch", "--prompt", "p", "--disk-max", "50M");
                int64_t v = 0;
                ck_assert(cli_args_int(&a, "diskMax", &v));
                ck_assert_int_eq(v, 50LL << 20);
                cli_args_done(&a);
        }
        {
                PARSE_OK("dispatch", "--prompt", "p", "--disk-max=4096");
                int64_t v = 0;
                ck_assert(cli_args_int(&a, "diskMax", &v));
                ck_assert_int_eq(v, 4096);
                cli_args_done(&a);
        }
        EXPECT_USAGE("--disk-max must be a size such as 4096, 50M or 2G",
                     "Use --disk-max with bytes or a size with a K, M, G or T suffix (e.g. 50M, 2G), from 1 byte "
                     "through 9007199254740991 bytes",
                     "dispatch", "--prompt", "p", "--disk-max", "1.5G");
        EXPECT_USAGE("--disk-max must be a size such as 4096, 50M or 2G", NULL, "dispatch", "--prompt", "p",
                     "--disk-max", "lots");
        EXPECT_USAGE("--disk-max must be a positive size within 9007199254740991 bytes", NULL, "dispatch", "--prompt",
                     "p", "--disk-max", "0");
        EXPECT_USAGE("--disk-max must be a positive size within 9007199254740991 bytes", NULL, "dispatch", "--prompt",
                     "p", "--disk-max", "9000T");
        EXPECT_USAGE("--disk-max requires a value", NULL, "dispatch", "--prompt", "p", "--disk-max");
        EXPECT_USAGE("unknown flag --disk-max for `cancel`", NULL, "cancel", "x", "--disk-max", "5M");
}
END_TEST

START_TEST(test_fields) {
        {
                PARSE_OK("result", "x", "--fields", " message, tokens,,narration ");
                ck_assert_str_eq(opts_line(&a), "{\"fields\":[\"message\",\"tokens\",\"narration\"]}");
                cli_args_done(&a);
        }
        const char *help = "Use one of: message, narration, tokens, cost, sessionId, exitCode, signal, spawnError, failureReason, failureDetail, logPath, outputDir, incomplete, finalMarker, finalStatus, class, diff, diffStat, changesetError, checkStatus, checkCommand, checkExitCode, checkOutputTail, checkStartedAt, checkEndedAt, checkOverride, parentTaskId, projectConfigWarning";
        EXPECT_USAGE("--fields must contain one or more supported result fields", help, "result", "x", "--fields", "bogus");
        EXPECT_USAGE("--fields must contain one or more supported result fields", help, "result", "x", "--fields", "message,bogus");
        EXPECT_USAGE("--fields must contain one or more supported result fields", help, "result", "x", "--fields", ", ,");
        size_t n = 0;
        while (protocol_result_fields[n]) n++;
        ck_assert_uint_eq(n, 28);
}
END_TEST

START_TEST(test_path_lists_and_deprecation) {
        {
                PARSE_OK("dispatch", "--prompt", "p", "--rw-bind", " /a , ,/b,", "--ro-bind", "/c");
                ck_assert_str_eq(opts_line(&a), "{\"prompt\":\"p\",\"rwBind\":[\"/a\",\"/b\"],\"roBind\":[\"/c\"]}");
                ck_assert_ptr_null(a.warnings);
                cli_args_done(&a);
        }
        {
                PARSE_OK("dispatch", "--prompt", "p", "--allowed-dirs", "/x", "--rw-bind", "/y");
                ck_assert_str_eq(opts_line(&a), "{\"prompt\":\"p\",\"allowedDirs\":[\"/x\"],\"rwBind\":[\"/y\"]}");
                ck_assert_uint_eq(strv_length(a.warnings), 1);
                ck_assert_str_eq(a.warnings[0], "--allowed-dirs is deprecated; use --rw-bind (same behavior). It will be removed in the next major release.");
                cli_args_done(&a);
        }
        EXPECT_USAGE("--rw-bind must contain at least one path", "Use --rw-bind with one or more comma-separated paths",
                     "dispatch", "--prompt", "p", "--rw-bind", ",");
        EXPECT_USAGE("--allowed-dirs must contain at least one path", "Use --allowed-dirs with one or more comma-separated paths",
                     "dispatch", "--prompt", "p", "--allowed-dirs", " ");
}
END_TEST

START_TEST(test_choices_and_regex) {
        EXPECT_USAGE("--executor must be one of opencode, pi, shell",
                     "Use --executor opencode or --executor pi or --executor shell",
                     "dispatch", "--prompt", "p", "--executor", "claude");
        EXPECT_USAGE("--format must be one of toon, ndjson", "Use --format with one of: toon, ndjson",
                     "watch", "--format", "json");
        EXPECT_USAGE("--format must be one of toon, claude-hook, codex-hook",
                     "Use --format with one of: toon, claude-hook, codex-hook", "context", "--format", "x");
        EXPECT_USAGE("--mode must be one of report, activity", "Use --mode report or --mode activity",
                     "summary", "x", "--mode", "brief");
        {
                cli_args a = {};
                cli_error e = {};
                ck_assert_int_eq(parse(&a, &e, "dispatch", "--prompt", "p", "--require-final-marker", "(unclosed", NULL), -EINVAL);
                ck_assert(startswith(e.text, "--require-final-marker is not a valid regular expression: "));
                ck_assert_uint_gt(strlen(e.text), strlen("--require-final-marker is not a valid RegExp: "));
                ck_assert_str_eq(e.help, "Use --require-final-marker with a pattern that compiles as a POSIX extended regular expression");
                cli_error_done(&e);
        }
        PARSE_OK("dispatch", "--prompt", "p", "--executor", "shell", "--require-final-marker", "^Status: (DONE|BLOCKED)$");
        ck_assert_str_eq(cli_args_string(&a, "executor"), "shell");
        ck_assert_str_eq(cli_args_string(&a, "finalMarker"), "^Status: (DONE|BLOCKED)$");
        cli_args_done(&a);
}
END_TEST

START_TEST(test_dispatch_all_options) {
        PARSE_OK("dispatch", "--prompt", "Fix it", "--directory", "/tmp", "--model", "prov/m", "--variant", "high",
                 "--session-id", "ses_1", "--require-final-marker", "^DONE$", "--no-sandbox", "--no-overlay",
                 "--rw-bind", "/a", "--ro-bind", "/b", "--allowed-dirs", "/c", "--executor", "pi",
                 "--class", "implementer", "--parent-task", "oc_p");
        ck_assert_str_eq(opts_line(&a),
                         "{\"prompt\":\"Fix it\",\"directory\":\"/tmp\",\"model\":\"prov/m\",\"variant\":\"high\","
                         "\"sessionId\":\"ses_1\",\"finalMarker\":\"^DONE$\",\"noSandbox\":true,\"noOverlay\":true,"
                         "\"rwBind\":[\"/a\"],\"roBind\":[\"/b\"],\"allowedDirs\":[\"/c\"],\"executor\":\"pi\","
                         "\"class\":\"implementer\",\"parentTaskId\":\"oc_p\"}");
        cli_args_done(&a);
}
END_TEST

START_TEST(test_other_commands_options) {
        {
                PARSE_OK("wait", "x", "--timeout", "5m", "--tail-chars", "100", "--full");
                ck_assert_str_eq(opts_line(&a), "{\"timeoutMs\":300000,\"tailChars\":100,\"full\":true}");
                cli_args_done(&a);
        }
        {
                PARSE_OK("list", "--all", "--limit", "5");
                ck_assert_str_eq(opts_line(&a), "{\"all\":true,\"limit\":5}");
                cli_args_done(&a);
        }
        {
                PARSE_OK("accept", "x", "--force");
                ck_assert(cli_args_bool(&a, "force"));
                cli_args_done(&a);
        }
        {
                PARSE_OK("result", "x", "--diff");
                ck_assert(cli_args_bool(&a, "diff"));
                cli_args_done(&a);
        }
        {
                PARSE_OK("result", "x", "--full", "--fields", "narration,message");
                ck_assert(cli_args_bool(&a, "full"));
                cli_args_done(&a);
        }
        {
                PARSE_OK("watch", "--summaries", "--flush-interval", "5m", "--format", "ndjson", "--all");
                ck_assert_str_eq(opts_line(&a), "{\"summaries\":true,\"flushIntervalMs\":300000,\"format\":\"ndjson\",\"all\":true}");
                cli_args_done(&a);
        }
        {
                PARSE_OK("advisor", "--model", "m", "--summarize-context", "--timeout", "30s");
                ck_assert_str_eq(opts_line(&a), "{\"model\":\"m\",\"summarizeContext\":true,\"timeoutMs\":30000}");
                cli_args_done(&a);
        }
        {
                PARSE_OK("output", "x", "--path", "a.txt", "--max-output-file-bytes", "1048576");
                ck_assert_str_eq(opts_line(&a), "{\"path\":\"a.txt\",\"maxOutputFileBytes\":1048576}");
                cli_args_done(&a);
        }
        {
                PARSE_OK("doctor", "--stats");
                ck_assert(cli_args_bool(&a, "stats"));
                cli_args_done(&a);
        }
}
END_TEST

START_TEST(test_cross_flag_rules) {
        EXPECT_USAGE("--prompt is required", NULL, "dispatch");
        EXPECT_USAGE("--prompt is required", NULL, "dispatch", "--model", "m");
        EXPECT_USAGE("--model is required", NULL, "advisor", "--prompt", "p");
        EXPECT_USAGE("--full requires narration in --fields", NULL, "result", "x", "--full", "--fields", "message");
        EXPECT_USAGE("--diff cannot be combined with --fields", NULL, "result", "x", "--diff", "--fields", "message");
        EXPECT_USAGE("--diff cannot be combined with --full", NULL, "result", "x", "--diff", "--full");
        EXPECT_USAGE("--summarize cannot be combined with --timeout", NULL, "wait", "x", "--summarize", "--timeout", "5");
        EXPECT_USAGE("--summarize cannot be combined with --tail-chars", NULL, "wait", "x", "--summarize", "--tail-chars", "5");
        EXPECT_USAGE("--flush-interval requires --summaries", NULL, "watch", "--flush-interval", "5s");
        EXPECT_USAGE("--flush-interval must be greater than zero", NULL, "watch", "--summaries", "--flush-interval", "0");
        EXPECT_USAGE("--stats cannot be combined with --full", NULL, "doctor", "--stats", "--full");
        EXPECT_USAGE("--all cannot be combined with --directory",
                     "Valid flags for list: --directory <path>, --all, --limit <number>. Run `taskferry list --help` for details",
                     "list", "--directory", "/", "--all");
        EXPECT_USAGE("--all cannot be combined with --directory", NULL, "watch", "--all", "--directory", "/");
        EXPECT_USAGE("--all cannot be combined with --task-id", NULL, "watch", "--all", "--task-id", "x");
        /* the task id check comes first */
        EXPECT_USAGE("task id is required", NULL, "result", "--diff", "--full");
}
END_TEST

/* taskferry diff <id> [--stat] [-- <path>...] */
START_TEST(test_diff_grammar) {
        {
                PARSE_OK("diff", "x");
                ck_assert_str_eq(a.task_id, "x");
                ck_assert_str_eq(opts_line(&a), "{}");
                cli_args_done(&a);
        }
        {
                PARSE_OK("diff", "--stat", "x", "--", "src", "--stat", "-x", "a b");
                ck_assert_str_eq(a.task_id, "x");
                ck_assert_str_eq(opts_line(&a), "{\"stat\":true,\"paths\":[\"src\",\"--stat\",\"-x\",\"a b\"]}");
                cli_args_done(&a);
        }
        {
                PARSE_OK("diff", "x", "--");
                ck_assert_str_eq(opts_line(&a), "{\"paths\":[]}");
                cli_args_done(&a);
        }
        EXPECT_USAGE("task id is required",
                     "Valid flags for diff: --stat, -- <path>.... Run `taskferry diff --help` for details", "diff");
        EXPECT_USAGE("task id is required", NULL, "diff", "--", "x");
        EXPECT_USAGE("unknown flag --stat for `result`", NULL, "result", "x", "--stat");
        EXPECT_USAGE("unknown flag --full for `diff`", NULL, "diff", "x", "--full");
        EXPECT_USAGE("unknown flag -- for `result`", NULL, "result", "x", "--", "a");
        EXPECT_USAGE("unexpected argument: y", NULL, "diff", "x", "y");
        _cleanup_json_ json_object *help = cli_help_object("diff");
        ck_assert_str_eq(json_object_get_string(json_object_object_get(help, "usage")),
                         "taskferry diff <id> [--stat] [-- <path>...]");
}
END_TEST

/* job: `job run <name>`, `job list` (bare words, not a task id) */
START_TEST(test_job_grammar) {
        {
                PARSE_OK("job", "run", "demo");
                ck_assert_str_eq(a.command, "job");
                ck_assert_int_eq(strv_length(a.words), 2);
                ck_assert_str_eq(a.words[0], "run");
                ck_assert_str_eq(a.words[1], "demo");
                ck_assert_ptr_null(a.task_id);
                cli_args_done(&a);
        }
        {
                /* an empty name reaches the command, which refuses it */
                PARSE_OK("job", "run", "");
                ck_assert_str_eq(a.words[1], "");
                cli_args_done(&a);
        }
        {
                PARSE_OK("job", "list", "--json");
                ck_assert(a.json);
                ck_assert_int_eq(strv_length(a.words), 1);
                cli_args_done(&a);
        }
        {
                PARSE_OK("job", "--help");
                ck_assert(a.help);
                cli_args_done(&a);
        }
        const char *help = "Valid flags for job: none. Run `taskferry job --help` for details";
        EXPECT_USAGE("job needs an action: run <name> or list", help, "job");
        EXPECT_USAGE("job name is required", help, "job", "run");
        EXPECT_USAGE("unexpected argument: x", help, "job", "list", "x");
        EXPECT_USAGE("unexpected argument: c", help, "job", "run", "b", "c");
        EXPECT_USAGE("unknown job action: start (use run or list)", help, "job", "start", "demo");
        EXPECT_USAGE("unknown flag --wait for `job`", help, "job", "run", "demo", "--wait");
        EXPECT_USAGE("unknown flag -x for `job`", help, "job", "run", "-x");
}
END_TEST

START_TEST(test_help_objects) {
        _cleanup_json_ json_object *top = cli_help_object(NULL);
        /* "commands" is what this build implements: test-cli-help checks it */
        ck_assert_ptr_nonnull(json_get_array(top, "commands"));
        json_object_object_del(top, "commands");
        ck_assert_str_eq(json_to_line(top, NULL),
                         "{\"command\":\"taskferry\",\"usage\":\"taskferry <command> [options]\","
                         "\"description\":\"Manage background tasks that run pi, OpenCode or a shell command in the current workspace.\","
                         "\"options\":[\"--help\",\"--version\"],"
                         "\"examples\":[\"taskferry\",\"taskferry dispatch --prompt \\\"Fix the failing tests\\\"\",\"taskferry list\"]}");
        _cleanup_json_ json_object *home = cli_help_object("home");
        ck_assert_str_eq(json_get_string(home, "command"), "taskferry");

        _cleanup_json_ json_object *cancel = cli_help_object("cancel");
        ck_assert_str_eq(json_to_line(cancel, NULL),
                         "{\"command\":\"cancel\",\"usage\":\"taskferry cancel <id> [--grace-ms <number>]\","
                         "\"description\":\"Cancel queued or running work.\","
                         "\"options\":{\"--grace-ms <number>\":\"milliseconds before SIGKILL, default 5000\"},"
                         "\"examples\":[\"taskferry cancel <id>\",\"taskferry cancel <id> --grace-ms 10000\"]}");

        _cleanup_json_ json_object *reject = cli_help_object("reject");
        ck_assert_str_eq(json_to_line(json_get_object(reject, "options"), NULL), "{}");

        /* Every command: the help's option labels are the Valid-flags list, and
         * every flag label names a flag the parser accepts for that command. */
        for (const cli_verb *c = cli_verbs; c->name; c++) {
                if (c->flags & CLI_VERB_HIDDEN) continue; /* no command word: the top help's */
                _cleanup_json_ json_object *h = cli_help_object(c->name);
                ck_assert_str_eq(json_get_string(h, "command"), c->name);
                ck_assert_str_eq(json_get_string(h, "usage"), c->usage);
                ck_assert_uint_gt(json_object_array_length(json_get_array(h, "examples")), 0);
                _cleanup_free_ char *help = cli_valid_flags_help(c->name);
                _cleanup_free_ char *prefix = strdup_printf("Valid flags for %s: ", c->name);
                ck_assert(startswith(help, prefix));
                json_object_object_foreach(json_get_object(h, "options"), label, text) {
                        (void) text;
                        ck_assert_msg(strstr(help, label), "%s missing from %s", label, help);
                        _cleanup_free_ char *flag = strndup(label, strcspn(label, " "));
                        char *argv[8];
                        size_t n = 0;
                        argv[n++] = (char *) c->name;
                        if (c->positional == CLI_POSITIONAL_TASK_ID) argv[n++] = "oc_x";
                        argv[n++] = "--help";
                        argv[n++] = flag;
                        if (strchr(label, ' ')) {
                                const char *value = "100";
                                if (streq(flag, "--format")) value = "toon";
                                else if (streq(flag, "--mode")) value = "report";
                                else if (streq(flag, "--executor")) value = "pi";
                                else if (streq(flag, "--network")) value = "proxy";
                                else if (streq(flag, "--fields")) value = "message";
                                argv[n++] = (char *) value;
                        }
                        cli_args a = {};
                        cli_error e = {};
                        int r = cli_args_parse(argv, n, &a, &e);
                        ck_assert_msg(r == 0, "%s %s: %s", c->name, flag, strnull(e.text));
                        cli_args_done(&a);
                        cli_error_done(&e);
                }
        }
        _cleanup_free_ char *unknown = cli_valid_flags_help("bogus");
        ck_assert_str_eq(unknown, "Run `taskferry --help` for usage");
}
END_TEST

START_TEST(test_js_number) { js_number_check(cli_js_number, _i); }
END_TEST

START_TEST(test_wait_default) {
        double ms = -1;
        ck_assert_int_eq(cli_wait_default_timeout(NULL, &ms), 1);
        ck_assert(ms == 900000);
        ck_assert_int_eq(cli_wait_default_timeout("0", &ms), 0);
        ck_assert_int_eq(cli_wait_default_timeout("1500", &ms), 1);
        ck_assert(ms == 1500);
        ck_assert_int_eq(cli_wait_default_timeout("1e3", &ms), 1);
        ck_assert(ms == 1000);
        ck_assert_int_eq(cli_wait_default_timeout("abc", &ms), 1);
        ck_assert(ms == 900000);
        ck_assert_int_eq(cli_wait_default_timeout("-5", &ms), 1);
        ck_assert(ms == 900000);
        ck_assert_int_eq(cli_wait_default_timeout("", &ms), 1);
        ck_assert(ms == 900000);
        ck_assert_int_eq(cli_wait_default_timeout("Infinity", &ms), 1);
        ck_assert(ms == 900000);
        ck_assert_int_eq(cli_wait_default_timeout("00", &ms), 1); /* only the exact string "0" opts out */
        ck_assert(ms == 900000);
}
END_TEST

int main(void) {
        Suite *s = suite_create("cli-args");
        TCase *tc = tf_tcase(s, "grammar", NULL, NULL, 0, TF_TESTS(test_no_args_is_home, test_top_help_and_version,
                test_unknown_and_renamed_commands, test_json_flag_anywhere, test_positional_task_id,
                test_command_help_skips_required_checks, test_unknown_flags_and_valid_flags_help,
                test_retired_flag_names, test_value_flag_errors, test_duplicate_flags, test_durations, test_integers,
                test_fields, test_disk_max, test_path_lists_and_deprecation, test_choices_and_regex,
                test_dispatch_all_options, test_other_commands_options, test_cross_flag_rules, test_help_objects,
                test_diff_grammar, test_job_grammar, test_wait_default));
        TF_LOOP(tc, test_js_number, js_number_cases);
        return tf_run_suite(s);
}
