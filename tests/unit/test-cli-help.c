/* --help and the man page describe what exists: the commands the top help
 * advertises and the ones docs/taskferry.1.md documents both follow from
 * the one verb table (cli-verbs.c's cli_verbs), where a command this build
 * runs has a `run`. A listed command that does not run, or one that runs
 * but is not listed, fails. */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli-args.h"
#include "cli-verbs.h"
#include "json-util.h"
#include "util.h"

/* A command word this build runs (home and version are the no-command view
 * and --version, not command words). */
static bool implemented(const cli_verb *v) {
        return v && !(v->flags & CLI_VERB_HIDDEN) && v->run;
}

static char **implemented_commands(void) {
        char **l = NULL;
        for (const cli_verb *v = cli_verbs; v->name; v++)
                if (implemented(v)) ck_assert_int_eq(strv_push(&l, v->name), 0);
        return l;
}

/* The COMMANDS section of the man page: [*ret_start, *ret_end). */
static void man_page_commands_section(const char *text, const char **ret_start, const char **ret_end) {
        const char *sec = strstr(text, "\n## COMMANDS\n");
        ck_assert_ptr_nonnull(sec);
        sec += strlen("\n## COMMANDS\n");
        const char *end = strstr(sec, "\n## ");
        *ret_start = sec;
        *ret_end = end ? end : sec + strlen(sec);
}

/* Each definition term of the COMMANDS section (a line starting with a
 * backquote, followed by a ": " definition line), in order: calls fn with
 * every command the term names as its first word (one term line may name
 * several: `tail ...`, `output ...`) and the term's definition (from its
 * ": " line up to the blank line that ends it). */
static void man_page_terms(const char *text, void (*fn)(const char *command, const char *definition, void *userdata),
                           void *userdata) {
        const char *sec, *end;
        man_page_commands_section(text, &sec, &end);
        for (const char *line = sec; line < end;) {
                const char *nl = memchr(line, '\n', (size_t) (end - line));
                const char *next = nl ? nl + 1 : end;
                if (*line == '`' && next < end && startswith(next, ": ")) {
                        const char *def_end = strstr(next, "\n\n");
                        if (!def_end || def_end > end) def_end = end;
                        _cleanup_free_ char *definition = strndup(next, (size_t) (def_end - next));
                        for (const char *p = line; p < (nl ? nl : end); p++) {
                                if (*p != '`') continue;
                                const char *w = p + 1;
                                size_t n = strcspn(w, " `");
                                const char *close = strchr(w, '`');
                                _cleanup_free_ char *word = strndup(w, n);
                                if (!streq(word, "taskferry")) fn(word, definition, userdata);
                                p = close ? close : nl;
                                if (!p) break;
                        }
                }
                line = next;
        }
}

static void collect_command(const char *command, const char *definition, void *userdata) {
        (void) definition;
        char ***l = userdata;
        if (!strv_contains(*l, command)) ck_assert_int_eq(strv_push(l, command), 0);
}

/* The command names docs/taskferry.1.md documents, in order. */
static char **man_page_commands(const char *text) {
        char **l = NULL;
        man_page_terms(text, collect_command, &l);
        return l;
}

START_TEST(top_help_lists_exactly_the_implemented_commands) {
        _cleanup_json_ json_object *top = cli_help_object(NULL);
        json_object *cmds = json_get_array(top, "commands");
        ck_assert_ptr_nonnull(cmds);
        _cleanup_strv_free_ char **impl = implemented_commands();
        /* each listed command runs */
        for (size_t i = 0; i < json_object_array_length(cmds); i++) {
                const char *c = json_object_get_string(json_object_array_get_idx(cmds, i));
                ck_assert_ptr_nonnull(cli_verb_find(c));
                ck_assert_msg(implemented(cli_verb_find(c)), "--help lists %s, which is not implemented", c);
        }
        /* each implemented command is listed */
        for (char **c = impl; c && *c; c++) {
                bool listed = false;
                for (size_t i = 0; i < json_object_array_length(cmds); i++)
                        listed = listed || streq(json_object_get_string(json_object_array_get_idx(cmds, i)), *c);
                ck_assert_msg(listed, "%s is implemented but --help does not list it", *c);
        }
        ck_assert_uint_eq(json_object_array_length(cmds), strv_length(impl));
        /* and in the table's order */
        size_t k = 0;
        for (const cli_verb *v = cli_verbs; v->name; v++)
                if (implemented(v)) ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(cmds, k++)), v->name);
        /* the not-built-yet error names the same set */
        _cleanup_free_ char *available = cli_available_commands();
        _cleanup_free_ char *joined = strdup("");
        for (size_t i = 0; i < json_object_array_length(cmds); i++) {
                char *n = strdup_printf("%s%s%s", joined, i ? ", " : "",
                                        json_object_get_string(json_object_array_get_idx(cmds, i)));
                free(joined);
                joined = n;
        }
        ck_assert_str_eq(available, joined);
        /* the hidden rows are reached without a command word only */
        ck_assert_ptr_null(cli_verb_find("home"));
        ck_assert_ptr_null(cli_verb_find("version"));
        ck_assert_ptr_nonnull(cli_verb_hidden("home"));
        ck_assert_ptr_nonnull(cli_verb_hidden("version"));
}
END_TEST

static char *read_man_page(void) {
        _cleanup_free_ char *path = strdup_printf("%s/docs/taskferry.1.md", TASKFERRY_SOURCE_DIR);
        char *text = NULL;
        ck_assert_int_eq(read_file(path, 1 << 20, &text, NULL), 0);
        return text;
}

START_TEST(man_page_documents_exactly_the_implemented_commands) {
        _cleanup_free_ char *text = read_man_page();
        _cleanup_strv_free_ char **man = man_page_commands(text);
        _cleanup_strv_free_ char **impl = implemented_commands();
        ck_assert_uint_gt(strv_length(man), 0);
        for (char **c = man; c && *c; c++) {
                ck_assert_msg(cli_verb_find(*c), "the man page documents %s, which is not a command", *c);
                ck_assert_msg(implemented(cli_verb_find(*c)), "the man page documents %s, which is not implemented", *c);
        }
        for (char **c = impl; c && *c; c++)
                ck_assert_msg(strv_contains(man, *c), "%s is implemented but the man page does not document it", *c);
        /* nothing there advertises commands that are not built */
        const char *sec, *end;
        man_page_commands_section(text, &sec, &end);
        for (const cli_verb *v = cli_verbs; v->name; v++) {
                if ((v->flags & CLI_VERB_HIDDEN) || implemented(v)) continue;
                _cleanup_free_ char *needle = strdup_printf("`%s`", v->name);
                _cleanup_free_ char *needle2 = strdup_printf("`%s ", v->name);
                const char *hit = strstr(sec, needle), *hit2 = strstr(sec, needle2);
                ck_assert_msg(!(hit && hit < end) && !(hit2 && hit2 < end),
                              "the man page's COMMANDS names %s, which is not implemented", v->name);
        }
}
END_TEST

static void check_daemon_note(const char *command, const char *definition, void *userdata) {
        (void) userdata;
        const cli_verb *v = cli_verb_find(command);
        ck_assert_ptr_nonnull(v);
        bool says = strstr(definition, "Needs no daemon") != NULL;
        if (v->flags & CLI_VERB_DAEMON)
                ck_assert_msg(!says, "the man page says %s needs no daemon, but its row talks to it", command);
        else
                ck_assert_msg(says, "%s's row does not talk to the daemon: its man page entry says \"Needs no daemon\"",
                              command);
}

/* The table's daemon column is what the man page says of each command. */
START_TEST(man_page_says_which_commands_need_no_daemon) {
        _cleanup_free_ char *text = read_man_page();
        man_page_terms(text, check_daemon_note, NULL);
}
END_TEST

/* the parser for the man page itself: a term line naming two commands, and
 * a section end */
START_TEST(man_page_parser) {
        static const char text[] = "# x\n\n## COMMANDS\n\n`taskferry` (no command)\n: view\n\n"
                                   "`tail <id>`, `output <id> [--path <p>]`\n: two\n\n`status <id>`\n: one\n\n"
                                   "`not-a-term`\nplain text\n\n## ENVIRONMENT\n\n`wait`\n: not in COMMANDS\n";
        _cleanup_strv_free_ char **l = man_page_commands(text);
        ck_assert_uint_eq(strv_length(l), 3);
        ck_assert_str_eq(l[0], "tail");
        ck_assert_str_eq(l[1], "output");
        ck_assert_str_eq(l[2], "status");
}
END_TEST

/* `diff` is a command of the table, after `result`: usage and description */
START_TEST(diff_is_in_the_table) {
        const cli_verb *d = cli_verb_find("diff");
        ck_assert_ptr_nonnull(d);
        ck_assert_str_eq(d->usage, "taskferry diff <id> [--stat] [-- <path>...]");
        ck_assert(startswith(d->description, "Show a task's pending changeset as a patch"));
        ck_assert(d->positional == CLI_POSITIONAL_TASK_ID);
        _cleanup_json_ json_object *h = cli_help_object("diff");
        ck_assert_str_eq(json_get_string(h, "command"), "diff");
        ck_assert_ptr_nonnull(json_get_string(json_get_object(h, "options"), "--stat"));
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("cli-help");
        TCase *tc = tcase_create("help");
        tcase_add_test(tc, top_help_lists_exactly_the_implemented_commands);
        tcase_add_test(tc, man_page_documents_exactly_the_implemented_commands);
        tcase_add_test(tc, man_page_says_which_commands_need_no_daemon);
        tcase_add_test(tc, man_page_parser);
        tcase_add_test(tc, diff_is_in_the_table);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
