/* cli-verbs.h: the one verb table. Its rows in the order the top help lists
 * them, each with a handler, help texts and whether it talks to the daemon;
 * the flags each command takes (protocol-cli.md 2.3, with taskferry's
 * additions) and how each of them parses for every command that takes it;
 * every flag a command does not take refused with the spec's text and the
 * command's Valid-flags help; the lookups and the usage-error builder.
 * test-cli-args has the grammar's corner cases, test-cli-help the man page
 * and the completion. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli-args.h"
#include "cli-verbs.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"

/* ---- what the spec says each command is ---- */

#define FLAGS(...) ((const char *const[]) {__VA_ARGS__, NULL})
#define NO_FLAGS ((const char *const[]) {NULL})

static const struct {
        const char *name;
        bool daemon;
        cli_verb_positional positional;
        const char *const *flags; /* the flags it takes, in help order */
} commands[] = {
        {"dispatch", true, CLI_POSITIONAL_NONE,
         FLAGS("--prompt", "--directory", "--model", "--variant", "--session-id", "--require-final-marker",
               "--no-sandbox", "--no-overlay", "--rw-bind", "--ro-bind", "--allowed-dirs", "--executor", "--network", "--allow-host", "--allow-socket", "--class",
               "--parent-task", "--disk-max", "--memory-max", "--tasks-max")},
        {"cancel", true, CLI_POSITIONAL_TASK_ID, FLAGS("--grace-ms")},
        {"accept", true, CLI_POSITIONAL_TASK_ID, FLAGS("--force", "--allow-config")},
        {"reject", true, CLI_POSITIONAL_TASK_ID, NO_FLAGS},
        {"output", true, CLI_POSITIONAL_TASK_ID, FLAGS("--path", "--max-output-file-bytes")},
        {"wait", true, CLI_POSITIONAL_TASK_ID, FLAGS("--timeout", "--tail-chars", "--full", "--summarize")},
        {"advisor", true, CLI_POSITIONAL_NONE,
         FLAGS("--model", "--prompt", "--directory", "--variant", "--session-id", "--timeout", "--executor", "--class",
               "--parent-task", "--summarize-context")},
        {"status", true, CLI_POSITIONAL_TASK_ID, FLAGS("--full")},
        {"tail", true, CLI_POSITIONAL_TASK_ID, FLAGS("--chars")},
        {"summary", true, CLI_POSITIONAL_TASK_ID, FLAGS("--mode", "--max-words", "--wait")},
        {"result", true, CLI_POSITIONAL_TASK_ID, FLAGS("--full", "--fields", "--diff")},
        {"diff", true, CLI_POSITIONAL_TASK_ID, FLAGS("--stat", "--")},
        {"list", true, CLI_POSITIONAL_NONE, FLAGS("--directory", "--all", "--limit")},
        {"watch", true, CLI_POSITIONAL_NONE,
         FLAGS("--directory", "--all", "--task-id", "--format", "--summaries", "--flush-interval")},
        {"context", true, CLI_POSITIONAL_NONE, FLAGS("--directory", "--format")},
        {"doctor", true, CLI_POSITIONAL_NONE, FLAGS("--full", "--stats")},
        {"setup", false, CLI_POSITIONAL_NONE, NO_FLAGS},
        {"init", false, CLI_POSITIONAL_NONE, NO_FLAGS},
        {"job", true, CLI_POSITIONAL_WORDS, NO_FLAGS},
};

/* Every flag: the value token given to it (NULL: a boolean), the option
 * key it sets and that option's JSON. A command-specific value (--format)
 * is chosen in flag_value(). */
static const struct {
        const char *flag, *value, *key, *json;
} flag_forms[] = {
        {"--prompt", "Fix it", "prompt", "\"Fix it\""},
        {"--directory", "/some/dir", "directory", "\"/some/dir\""},
        {"--model", "prov/m", "model", "\"prov/m\""},
        {"--variant", "high", "variant", "\"high\""},
        {"--session-id", "ses_1", "sessionId", "\"ses_1\""},
        {"--require-final-marker", "^Status: DONE$", "finalMarker", "\"^Status: DONE$\""},
        {"--no-sandbox", NULL, "noSandbox", "true"},
        {"--no-overlay", NULL, "noOverlay", "true"},
        {"--rw-bind", " /a , ,/b", "rwBind", "[\"/a\",\"/b\"]"},
        {"--ro-bind", "/c", "roBind", "[\"/c\"]"},
        {"--allowed-dirs", "/e,/f", "allowedDirs", "[\"/e\",\"/f\"]"},
        {"--executor", "shell", "executor", "\"shell\""},
        {"--class", "implementer", "class", "\"implementer\""},
        {"--parent-task", "oc_p", "parentTaskId", "\"oc_p\""},
        {"--disk-max", "2G", "diskMax", "2147483648"},
        {"--memory-max", "512M", "memoryMax", "536870912"},
        {"--tasks-max", "64", "tasksMax", "64"},
        {"--grace-ms", "0", "graceMs", "0"},
        {"--force", NULL, "force", "true"},
        {"--path", "out/a.txt", "path", "\"out/a.txt\""},
        {"--max-output-file-bytes", "1048576", "maxOutputFileBytes", "1048576"},
        {"--timeout", "5m", "timeoutMs", "300000"},
        {"--tail-chars", "0100", "tailChars", "100"},
        {"--full", NULL, "full", "true"},
        {"--summarize", NULL, "summarize", "true"},
        {"--summarize-context", NULL, "summarizeContext", "true"},
        {"--chars", "131072", "chars", "131072"},
        {"--mode", "activity", "mode", "\"activity\""},
        {"--max-words", "75", "maxWords", "75"},
        {"--wait", NULL, "wait", "true"},
        {"--fields", "message,tokens", "fields", "[\"message\",\"tokens\"]"},
        {"--diff", NULL, "diff", "true"},
        {"--stat", NULL, "stat", "true"},
        {"--all", NULL, "all", "true"},
        {"--limit", "5", "limit", "5"},
        {"--task-id", "oc_t", "taskId", "\"oc_t\""},
        {"--format", "", "format", ""},
        {"--summaries", NULL, "summaries", "true"},
        {"--flush-interval", "30s", "flushIntervalMs", "30000"},
        {"--stats", NULL, "stats", "true"},
};

static bool takes(size_t cmd, const char *flag) {
        return strv_contains((char **) commands[cmd].flags, flag);
}

/* ---- the rows ---- */

START_TEST(rows_in_help_order) {
        /* the hidden rows first, then the commands in the spec's order with
         * diff after result and job last */
        const cli_verb *v = cli_verbs;
        ck_assert_str_eq(v[0].name, "home");
        ck_assert_str_eq(v[1].name, "version");
        ck_assert(v[0].flags & CLI_VERB_HIDDEN);
        ck_assert(v[1].flags & CLI_VERB_HIDDEN);
        size_t n = 0;
        for (v = cli_verbs + 2; v->name; v++, n++) {
                ck_assert_uint_lt(n, ELEMENTSOF(commands));
                ck_assert_str_eq(v->name, commands[n].name);
                ck_assert_msg(!(v->flags & CLI_VERB_HIDDEN), "%s is hidden", v->name);
                ck_assert_ptr_eq(cli_verb_find(v->name), v);
                ck_assert_ptr_null(cli_verb_hidden(v->name));
        }
        ck_assert_uint_eq(n, ELEMENTSOF(commands));
        ck_assert_ptr_eq(cli_verb_hidden("home"), &cli_verbs[0]);
        ck_assert_ptr_eq(cli_verb_hidden("version"), &cli_verbs[1]);
        /* exact words only */
        ck_assert_ptr_null(cli_verb_find(NULL));
        ck_assert_ptr_null(cli_verb_find(""));
        ck_assert_ptr_null(cli_verb_find("Dispatch"));
        ck_assert_ptr_null(cli_verb_find("dispatch "));
        ck_assert_ptr_null(cli_verb_find("dis"));
        ck_assert_ptr_null(cli_verb_hidden(NULL));
        ck_assert_ptr_null(cli_verb_hidden("bogus"));
}
END_TEST

START_TEST(each_row_has_handler_help_and_daemon_column) {
        for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
                const cli_verb *v = cli_verb_find(commands[i].name);
                ck_assert_ptr_nonnull(v);
                /* setup (the original's installer) is the one command of the
                 * surface this build does not run */
                if (streq(v->name, "setup")) ck_assert_ptr_null(v->run);
                else ck_assert_msg(v->run, "%s has no handler", v->name);
                ck_assert_msg(!!(v->flags & CLI_VERB_DAEMON) == commands[i].daemon, "%s: daemon column %d, want %d",
                              v->name, !!(v->flags & CLI_VERB_DAEMON), commands[i].daemon);
                ck_assert_msg(v->positional == commands[i].positional, "%s: positional %d", v->name, v->positional);
                _cleanup_free_ char *usage_prefix = strdup_printf("taskferry %s", v->name);
                ck_assert_msg(startswith(v->usage, usage_prefix), "%s usage: %s", v->name, v->usage);
                ck_assert_msg(!isempty(v->description), "%s has no description", v->name);
                ck_assert_msg(v->examples && v->examples[0], "%s has no example", v->name);
                for (const cli_option_help *o = v->options; o->label; o++)
                        ck_assert_msg(!isempty(o->text), "%s %s has no help text", v->name, o->label);
                /* a task-id command's usage shows the id */
                if (v->positional == CLI_POSITIONAL_TASK_ID) ck_assert(strstr(v->usage, "<id>"));
        }
        /* --version needs no daemon; the workspace view does */
        ck_assert(!(cli_verb_hidden("version")->flags & CLI_VERB_DAEMON));
        ck_assert(cli_verb_hidden("version")->run);
        ck_assert(cli_verb_hidden("home")->flags & CLI_VERB_DAEMON);
        ck_assert(cli_verb_hidden("home")->run);
        _cleanup_free_ char *available = cli_available_commands();
        ck_assert_str_eq(available, "dispatch, cancel, accept, reject, output, wait, advisor, status, tail, summary, "
                                    "result, diff, list, watch, context, doctor, init, job");
}
END_TEST

/* Each command's help lists exactly its flags, in order, and the parser
 * takes exactly those: every flag of every command is tried. */
START_TEST(flags_per_command) {
        const cli_verb *v = cli_verb_find(commands[_i].name);
        size_t k = 0;
        for (const cli_option_help *o = v->options; o->label; o++, k++) {
                _cleanup_free_ char *word = strndup(o->label, strcspn(o->label, " "));
                ck_assert_msg(commands[_i].flags[k], "%s: extra option %s", v->name, o->label);
                ck_assert_msg(streq(word, commands[_i].flags[k]), "%s option %zu: %s, want %s", v->name, k, word,
                              commands[_i].flags[k]);
        }
        ck_assert_msg(!commands[_i].flags[k], "%s lacks %s", v->name, commands[_i].flags[k]);
        for (size_t f = 0; f < ELEMENTSOF(flag_forms); f++)
                ck_assert_msg(cli_verb_accepts(v, flag_forms[f].flag) == takes(_i, flag_forms[f].flag), "%s %s",
                              v->name, flag_forms[f].flag);
        /* a flag is its label's whole first word */
        static const char *const never[] = {"--ful", "--full-x", "--", "-", "", "--p", "--prompt=", "-h"};
        for (size_t j = 0; j < ELEMENTSOF(never); j++) {
                if (streq(never[j], "--") && takes(_i, "--")) continue;
                ck_assert_msg(!cli_verb_accepts(v, never[j]), "%s accepts [%s]", v->name, never[j]);
        }
}
END_TEST

START_TEST(flag_arguments) {
        static const struct {
                const char *command, *flag, *want;
        } rows[] = {
                {"watch", "--format", "toon|ndjson"},
                {"context", "--format", "toon|claude-hook|codex-hook"},
                {"summary", "--mode", "report|activity"},
                {"dispatch", "--executor", "<opencode|pi|shell>"},
                {"wait", "--timeout", "<duration>"},
                {"diff", "--", "<path>..."},
                {"status", "--full", NULL},   /* a boolean shows none */
                {"status", "--prompt", NULL}, /* not a flag of status */
                {"status", "--ful", NULL},
        };
        for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
                const char *got = cli_verb_argument(cli_verb_find(rows[i].command), rows[i].flag);
                ck_assert_msg(streq_ptr(got, rows[i].want), "%s %s: [%s]", rows[i].command, rows[i].flag, strnull(got));
        }
}
END_TEST

/* ---- parsing every flag of every command ---- */

/* The arguments a command needs besides the flag under test. */
static size_t base_argv(size_t cmd, const char *flag, char **argv) {
        size_t n = 0;
        argv[n++] = (char *) commands[cmd].name;
        if (commands[cmd].positional == CLI_POSITIONAL_TASK_ID) argv[n++] = "oc_x";
        if (commands[cmd].positional == CLI_POSITIONAL_WORDS) argv[n++] = "list";
        if (streq(commands[cmd].name, "dispatch") && !streq(flag, "--prompt")) argv[n++] = "--prompt=p";
        if (streq(commands[cmd].name, "advisor") && !streq(flag, "--model")) argv[n++] = "--model=m";
        if (streq(flag, "--flush-interval") && takes(cmd, flag)) argv[n++] = "--summaries";
        return n;
}

static const char *flag_value(size_t cmd, size_t f) {
        if (!streq(flag_forms[f].flag, "--format")) return flag_forms[f].value;
        return streq(commands[cmd].name, "watch") ? "ndjson" : "codex-hook";
}

START_TEST(every_flag_parses) {
        for (size_t f = 0; f < ELEMENTSOF(flag_forms); f++) {
                if (!takes(_i, flag_forms[f].flag)) continue;
                for (int inline_form = 0; inline_form < 2; inline_form++) {
                        char *argv[16];
                        size_t n = base_argv(_i, flag_forms[f].flag, argv);
                        const char *value = flag_value(_i, f);
                        _cleanup_free_ char *joined = NULL;
                        if (!value) {
                                if (inline_form) continue;
                                argv[n++] = (char *) flag_forms[f].flag;
                        } else if (inline_form) {
                                joined = strdup_printf("%s=%s", flag_forms[f].flag, value);
                                argv[n++] = joined;
                        } else {
                                argv[n++] = (char *) flag_forms[f].flag;
                                argv[n++] = (char *) value;
                        }
                        cli_args a = {};
                        cli_error e = {};
                        int r = cli_args_parse(argv, n, &a, &e);
                        ck_assert_msg(r == 0, "%s %s: %s", commands[_i].name, flag_forms[f].flag, strnull(e.text));
                        ck_assert_str_eq(a.command, commands[_i].name);
                        json_object *o = NULL;
                        ck_assert_msg(json_object_object_get_ex(a.options, flag_forms[f].key, &o), "%s %s: no %s in %s",
                                      commands[_i].name, flag_forms[f].flag, flag_forms[f].key,
                                      json_to_line(a.options, NULL));
                        _cleanup_free_ char *want = streq(flag_forms[f].flag, "--format")
                                                            ? strdup_printf("\"%s\"", value)
                                                            : strdup(flag_forms[f].json);
                        ck_assert_msg(streq(json_to_line(o, NULL), want), "%s %s: %s, want %s", commands[_i].name,
                                      flag_forms[f].flag, json_to_line(o, NULL), want);
                        /* the deprecated alias warns; nothing else does */
                        if (streq(flag_forms[f].flag, "--allowed-dirs")) {
                                ck_assert_uint_eq(strv_length(a.warnings), 1);
                                ck_assert_str_eq(a.warnings[0], "--allowed-dirs is deprecated; use --rw-bind (same "
                                                                "behavior). It will be removed in the next major release.");
                        } else
                                ck_assert_ptr_null(a.warnings);
                        cli_args_done(&a);
                        cli_error_done(&e);
                }
        }
}
END_TEST

/* Every flag a command does not take: "unknown flag <f> for `<cmd>`", exit
 * 2, the command's Valid-flags help (--task-id off watch: the hint at the
 * positional id). */
START_TEST(every_foreign_flag_is_refused) {
        _cleanup_free_ char *valid = cli_valid_flags_help(commands[_i].name);
        for (size_t f = 0; f < ELEMENTSOF(flag_forms); f++) {
                if (takes(_i, flag_forms[f].flag)) continue;
                char *argv[16];
                size_t n = base_argv(_i, flag_forms[f].flag, argv);
                argv[n++] = (char *) flag_forms[f].flag;
                const char *value = flag_value(_i, f);
                if (value) argv[n++] = (char *) value;
                cli_args a = {};
                cli_error e = {};
                ck_assert_int_eq(cli_args_parse(argv, n, &a, &e), -EINVAL);
                ck_assert_int_eq(e.exit_code, CLI_EXIT_USAGE);
                _cleanup_free_ char *want = strdup_printf("unknown flag %s for `%s`", flag_forms[f].flag, commands[_i].name);
                ck_assert_str_eq(e.text, want);
                if (streq(flag_forms[f].flag, "--task-id"))
                        ck_assert_str_eq(e.help, "--task-id was replaced by the positional task id; use `taskferry status <id>`");
                else
                        ck_assert_msg(streq_ptr(e.help, valid), "%s %s: help [%s], want [%s]", commands[_i].name,
                                      flag_forms[f].flag, strnull(e.help), valid);
                cli_args_done(&a);
                cli_error_done(&e);
        }
}
END_TEST

/* The Valid-flags help: the labels as the help shows them. */
START_TEST(valid_flags_help_texts) {
        static const struct {
                const char *command, *want;
        } rows[] = {
                {"watch", "Valid flags for watch: --directory <path>, --all, --task-id <id>, --format toon|ndjson, "
                          "--summaries, --flush-interval <duration>. Run `taskferry watch --help` for details"},
                {"context", "Valid flags for context: --directory <path>, --format toon|claude-hook|codex-hook. Run "
                            "`taskferry context --help` for details"},
                {"summary", "Valid flags for summary: --mode report|activity, --max-words <number>, --wait. Run "
                            "`taskferry summary --help` for details"},
                {"doctor", "Valid flags for doctor: --full, --stats. Run `taskferry doctor --help` for details"},
                {"output", "Valid flags for output: --path <relpath>, --max-output-file-bytes <number>. Run `taskferry "
                           "output --help` for details"},
                {"tail", "Valid flags for tail: --chars <number>. Run `taskferry tail --help` for details"},
                {"init", "Valid flags for init: none. Run `taskferry init --help` for details"},
                {"job", "Valid flags for job: none. Run `taskferry job --help` for details"},
                {"home", "Run `taskferry --help` for usage"}, /* not a command word */
                {NULL, "Run `taskferry --help` for usage"},
        };
        for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
                _cleanup_free_ char *got = cli_valid_flags_help(rows[i].command);
                ck_assert_str_eq(got, rows[i].want);
        }
}
END_TEST

START_TEST(usage_error_builder) {
        cli_error e = {};
        ck_assert_int_eq(cli_usage_error(&e, cli_verb_find("tail"), "%s must be %d", "--chars", 5), -EINVAL);
        ck_assert_int_eq(e.exit_code, CLI_EXIT_USAGE);
        ck_assert_str_eq(e.text, "--chars must be 5");
        ck_assert_str_eq(e.help, "Valid flags for tail: --chars <number>. Run `taskferry tail --help` for details");
        ck_assert_int_eq(cli_usage_error(&e, NULL, "unexpected argument: %s", "x"), -EINVAL);
        ck_assert_str_eq(e.text, "unexpected argument: x");
        ck_assert_str_eq(e.help, "Run `taskferry --help` for usage");
        /* a message is taken as data, not as a format */
        ck_assert_int_eq(cli_usage_error(&e, NULL, "%s", "100% %s %n"), -EINVAL);
        ck_assert_str_eq(e.text, "100% %s %n");
        cli_error_done(&e);
}
END_TEST

/* Each command's help object: its keys in order, its options the labels. */
START_TEST(help_object_shape) {
        const cli_verb *v = cli_verb_find(commands[_i].name);
        _cleanup_json_ json_object *h = cli_help_object(v->name);
        static const char *const keys[] = {"command", "usage", "description", "options", "examples"};
        size_t k = 0;
        json_object_object_foreach(h, key, val) {
                (void) val;
                ck_assert_uint_lt(k, ELEMENTSOF(keys));
                ck_assert_str_eq(key, keys[k++]);
        }
        ck_assert_uint_eq(k, ELEMENTSOF(keys));
        ck_assert_str_eq(json_get_string(h, "description"), v->description);
        json_object *opts = json_get_object(h, "options");
        size_t n = 0;
        for (const cli_option_help *o = v->options; o->label; o++, n++)
                ck_assert_str_eq(json_get_string(opts, o->label), o->text);
        ck_assert_int_eq(json_object_object_length(opts), (int) n);
        json_object *ex = json_get_array(h, "examples");
        for (size_t i = 0; v->examples[i]; i++)
                ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(ex, i)), v->examples[i]);
}
END_TEST

/* The cross-flag rules --help skips (it asks for the help, not the run)
 * and the scope rules it does not. */
START_TEST(rules_under_help) {
        const struct {
                const char *const *argv;
                const char *want; /* NULL: parses */
        } rows[] = {
                {FLAGS("dispatch", "--help"), NULL},
                {FLAGS("advisor", "--help"), NULL},
                {FLAGS("status", "--help"), NULL},
                {FLAGS("job", "--help"), NULL},
                {FLAGS("wait", "x", "--summarize", "--timeout", "5", "--help"), NULL},
                {FLAGS("result", "x", "--full", "--fields", "message", "--help"), NULL},
                {FLAGS("watch", "--flush-interval", "5s", "--help"), NULL},
                {FLAGS("watch", "--summaries", "--flush-interval", "0", "--help"), NULL},
                {FLAGS("doctor", "--stats", "--full", "--help"), NULL},
                {FLAGS("watch", "--all", "--task-id", "x", "--help"), "--all cannot be combined with --task-id"},
                {FLAGS("watch", "--all", "--directory", "/", "-h"), "--all cannot be combined with --directory"},
                /* without --help the same rules hold */
                {FLAGS("doctor", "--full", "--stats"), "--stats cannot be combined with --full"},
                {FLAGS("watch", "--flush-interval", "5s"), "--flush-interval requires --summaries"},
        };
        for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
                cli_args a = {};
                cli_error e = {};
                int r = cli_args_parse((char *const *) rows[i].argv, strv_length((char **) rows[i].argv), &a, &e);
                if (!rows[i].want)
                        ck_assert_msg(r == 0, "row %zu: %s", i, strnull(e.text));
                else {
                        ck_assert_int_eq(r, -EINVAL);
                        ck_assert_str_eq(e.text, rows[i].want);
                }
                cli_args_done(&a);
                cli_error_done(&e);
        }
}
END_TEST

int main(void) {
        Suite *s = suite_create("cli-verbs");
        TCase *tc = tf_tcase(s, "verbs", NULL, NULL, 0,
                             TF_TESTS(rows_in_help_order, each_row_has_handler_help_and_daemon_column, flag_arguments,
                                      valid_flags_help_texts, usage_error_builder, rules_under_help));
        TF_LOOP(tc, flags_per_command, commands);
        TF_LOOP(tc, every_flag_parses, commands);
        TF_LOOP(tc, every_foreign_flag_is_refused, commands);
        TF_LOOP(tc, help_object_shape, commands);
        return tf_run_suite(s);
}
