/* --help and the man page describe what exists (issue 7 item 10): the
 * commands the top help advertises and the ones docs/taskferry.1.md
 * documents both follow from the one command table (cli-args.c's
 * cli_commands) and the implemented list (commands.c). A listed command that
 * is not implemented, or an implemented one that is not listed, fails. */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli-args.h"
#include "commands.h"
#include "json-util.h"
#include "util.h"

/* The implemented commands that are table commands (home and version are
 * the no-command view and --version, not commands of the table). */
static char **implemented_commands(void) {
        char **l = NULL;
        for (const char *const *c = cli_implemented_commands; *c; c++) {
                if (streq(*c, "home") || streq(*c, "version")) continue;
                ck_assert_int_eq(strv_push(&l, *c), 0);
        }
        return l;
}

/* The command names docs/taskferry.1.md documents: in its COMMANDS section,
 * every definition term (a line starting with a backquote, followed by a
 * ": " definition line) names the command as its first word; one term line
 * may name several (`tail ...`, `output ...`). */
static char **man_page_commands(const char *text) {
        char **l = NULL;
        const char *sec = strstr(text, "\n## COMMANDS\n");
        ck_assert_ptr_nonnull(sec);
        sec += strlen("\n## COMMANDS\n");
        const char *end = strstr(sec, "\n## ");
        if (!end) end = sec + strlen(sec);
        for (const char *line = sec; line < end;) {
                const char *nl = memchr(line, '\n', (size_t) (end - line));
                const char *next = nl ? nl + 1 : end;
                if (*line == '`' && next < end && startswith(next, ": ")) {
                        for (const char *p = line; p < (nl ? nl : end); p++) {
                                if (*p != '`') continue;
                                const char *w = p + 1;
                                size_t n = strcspn(w, " `");
                                const char *close = strchr(w, '`');
                                _cleanup_free_ char *word = strndup(w, n);
                                if (!streq(word, "taskferry") && !strv_contains(l, word))
                                        ck_assert_int_eq(strv_push(&l, word), 0);
                                p = close ? close : nl;
                                if (!p) break;
                        }
                }
                line = next;
        }
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
                ck_assert_msg(cli_command_implemented(c), "--help lists %s, which is not implemented", c);
                ck_assert_ptr_nonnull(cli_command_find(c));
        }
        /* each implemented command is listed, and has its row in the table */
        for (char **c = impl; c && *c; c++) {
                ck_assert_msg(cli_command_find(*c), "%s is implemented but has no row in cli_commands", *c);
                bool listed = false;
                for (size_t i = 0; i < json_object_array_length(cmds); i++)
                        listed = listed || streq(json_object_get_string(json_object_array_get_idx(cmds, i)), *c);
                ck_assert_msg(listed, "%s is implemented but --help does not list it", *c);
        }
        ck_assert_uint_eq(json_object_array_length(cmds), strv_length(impl));
        /* and in the table's order */
        size_t k = 0;
        for (const cli_command_spec *c = cli_commands; c->name; c++)
                if (cli_command_implemented(c->name))
                        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(cmds, k++)), c->name);
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
}
END_TEST

START_TEST(man_page_documents_exactly_the_implemented_commands) {
        _cleanup_free_ char *path = strdup_printf("%s/docs/taskferry.1.md", TASKFERRY_SOURCE_DIR);
        _cleanup_free_ char *text = NULL;
        ck_assert_int_eq(read_file(path, 1 << 20, &text, NULL), 0);
        _cleanup_strv_free_ char **man = man_page_commands(text);
        _cleanup_strv_free_ char **impl = implemented_commands();
        ck_assert_uint_gt(strv_length(man), 0);
        for (char **c = man; c && *c; c++) {
                ck_assert_msg(cli_command_find(*c), "the man page documents %s, which is not a command", *c);
                ck_assert_msg(cli_command_implemented(*c), "the man page documents %s, which is not implemented", *c);
        }
        for (char **c = impl; c && *c; c++)
                ck_assert_msg(strv_contains(man, *c), "%s is implemented but the man page does not document it", *c);
        /* nothing there advertises commands that are not built */
        for (const cli_command_spec *c = cli_commands; c->name; c++) {
                if (cli_command_implemented(c->name)) continue;
                _cleanup_free_ char *needle = strdup_printf("`%s`", c->name);
                _cleanup_free_ char *needle2 = strdup_printf("`%s ", c->name);
                const char *sec = strstr(text, "\n## COMMANDS\n");
                const char *end = strstr(sec + 1, "\n## ");
                const char *hit = strstr(sec, needle), *hit2 = strstr(sec, needle2);
                ck_assert_msg(!(hit && hit < end) && !(hit2 && hit2 < end),
                              "the man page's COMMANDS names %s, which is not implemented", c->name);
        }
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

/* `diff` is a command of the table (issue 7 item 8): usage and description */
START_TEST(diff_is_in_the_table) {
        const cli_command_spec *d = cli_command_find("diff");
        ck_assert_ptr_nonnull(d);
        ck_assert_str_eq(d->usage, "taskferry diff <id> [--stat] [-- <path>...]");
        ck_assert(startswith(d->description, "Show a task's pending changeset as a patch"));
        ck_assert(d->takes_task_id);
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
