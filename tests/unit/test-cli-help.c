/* --help, the man page and the bash completion describe what exists: the
 * commands the top help advertises, the ones docs/taskferry.1.md documents
 * and the ones the completion offers all follow from the one verb table
 * (cli-verbs.c's cli_verbs), where a command this build runs has a `run`.
 * A listed command that does not run, or one that runs but is not listed,
 * fails. */

/* GCC 12 at -O3 takes the pointers into a _cleanup_free_ buffer that these
 * parsers pass on for dangling (a false -Wdangling-pointer that breaks a
 * release build of the tests under -Werror). */
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wdangling-pointer"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli-args.h"
#include "cli-verbs.h"
#include "json-util.h"
#include "unit.h"
#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"

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

/* ---- the bash completion, run against the built CLI ---- */

static char *tmp;
static char *fake_cli; /* the CLI, but `list --all --json` prints one task, oc_fake1 */

static void completion_setup(void) {
        tmp = tf_tmpdir_new("test-cli-help");
        fake_cli = strdup_printf("%s/taskferry", tmp);
        _cleanup_free_ char *script = strdup_printf(
                "#!/bin/sh\n"
                "if [ \"$*\" = 'list --all --json' ]; then echo '{\"tasks\":[{\"id\":\"oc_fake1\"}]}'; exit 0; fi\n"
                "exec '%s/taskferry' \"$@\"\n",
                TASKFERRY_BUILD_DIR);
        ck_assert_int_eq(write_file_atomic(fake_cli, script, strlen(script), 0755), 0);
        _cleanup_free_ char *jobs = strdup_printf("%s/config/taskferry/jobs", tmp);
        ck_assert_int_eq(mkdir_p_chmod(jobs, 0700), 0);
        _cleanup_free_ char *job = strdup_printf("%s/demo.toml", jobs);
        ck_assert_int_eq(write_file_atomic(job, "", 0, 0600), 0);
}

static void completion_teardown(void) {
        tmp = tf_tmpdir_free(tmp);
        free(fake_cli);
}

/* What the completion offers for the command line `words` (the last one is
 * the word being completed), sorted, one a line. */
static char *complete(const char *words) {
        _cleanup_free_ char *script = strdup_printf(
                ". '%s/src/cli/taskferry.bash-completion'; COMP_WORDS=('%s' %s); "
                "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _taskferry; "
                "[ ${#COMPREPLY[@]} -eq 0 ] || printf '%%s\\n' \"${COMPREPLY[@]}\" | sort",
                TASKFERRY_SOURCE_DIR, fake_cli, words);
        _cleanup_free_ char *xdg = strdup_printf("XDG_CONFIG_HOME=%s/config", tmp);
        char *envp[] = {(char *) "PATH=/usr/local/bin:/usr/bin:/bin", xdg, (char *) "TASKFERRY_AUTO_START=0",
                        (char *) "HOME=/nonexistent", NULL};
        char *argv[] = {(char *) "bash", (char *) "-c", script, NULL};
        run_result r = {0};
        ck_assert_int_eq(run_command(argv, envp, tmp, 1 << 20, -1, &r), 0);
        ck_assert_msg(r.exit_code == 0, "completing %s: exit %d: %s", words, r.exit_code, strnull(r.err));
        char *out = TAKE_PTR(r.out);
        run_result_done(&r);
        return out ? out : strdup("");
}

/* l sorted as `sort` does with C collation, one a line. */
static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}
static char *lines(char **l) {
        size_t n = strv_length(l);
        if (n > 0) qsort(l, n, sizeof(char *), cmp_str);
        _cleanup_free_ char *out = strdup("");
        for (size_t i = 0; i < n; i++) {
                char *o = strdup_printf("%s%s\n", out, l[i]);
                free(out);
                out = o;
        }
        return TAKE_PTR(out);
}

START_TEST(completion_follows_the_table) {
        /* `sort` in the script runs with the C collation of the test's env */
        _cleanup_strv_free_ char **cmds = implemented_commands();
        _cleanup_free_ char *want_cmds = lines(cmds);
        _cleanup_free_ char *got_cmds = complete("''");
        ck_assert_str_eq(got_cmds, want_cmds);

        /* the global flags: the top help's options and --json */
        _cleanup_strv_free_ char **top = NULL;
        for (const cli_option_help *o = cli_verb_hidden("home")->options; o->label; o++)
                ck_assert_int_eq(strv_push(&top, o->label), 0);
        ck_assert_int_eq(strv_push(&top, "--json"), 0);
        _cleanup_free_ char *want_top = lines(top);
        _cleanup_free_ char *got_top = complete("-");
        ck_assert_str_eq(got_top, want_top);

        for (const cli_verb *v = cli_verbs; v->name; v++) {
                if (!implemented(v)) continue;
                /* its flags: the first word of each option label, --json and --help */
                _cleanup_strv_free_ char **flags = NULL;
                for (const cli_option_help *o = v->options; o->label; o++) {
                        _cleanup_free_ char *flag = strndup(o->label, strcspn(o->label, " "));
                        ck_assert_int_eq(strv_push(&flags, flag), 0);
                }
                ck_assert_int_eq(strv_push(&flags, "--json"), 0);
                ck_assert_int_eq(strv_push(&flags, "--help"), 0);
                _cleanup_free_ char *words = strdup_printf("%s --", v->name);
                _cleanup_free_ char *want = lines(flags), *got = complete(words);
                ck_assert_msg(streq(got, want), "taskferry %s --<TAB>: got\n%swant\n%s", v->name, got, want);

                /* its bare words: a task id, job's actions, or nothing */
                _cleanup_free_ char *bare = strdup_printf("%s ''", v->name);
                _cleanup_free_ char *got_bare = complete(bare);
                const char *want_bare = v->positional == CLI_POSITIONAL_TASK_ID ? "oc_fake1\n"
                                      : v->positional == CLI_POSITIONAL_WORDS  ? "list\nrun\n"
                                                                               : "";
                ck_assert_msg(streq(got_bare, want_bare), "taskferry %s <TAB>: got\n%swant\n%s", v->name, got_bare,
                              want_bare);

                /* the value of a flag of fixed choices shown as <a|b|c> */
                for (const cli_option_help *o = v->options; o->label; o++) {
                        const char *lt = strchr(o->label, '<'), *gt = lt ? strchr(lt, '>') : NULL;
                        if (!gt || !memchr(lt, '|', (size_t) (gt - lt))) continue;
                        _cleanup_strv_free_ char **choices = NULL;
                        _cleanup_free_ char *inner = strndup(lt + 1, (size_t) (gt - lt - 1));
                        for (char *c = strtok(inner, "|"); c; c = strtok(NULL, "|"))
                                ck_assert_int_eq(strv_push(&choices, c), 0);
                        _cleanup_free_ char *flag = strndup(o->label, strcspn(o->label, " "));
                        _cleanup_free_ char *line = strdup_printf("%s %s ''", v->name, flag);
                        _cleanup_free_ char *want_c = lines(choices), *got_c = complete(line);
                        ck_assert_msg(streq(got_c, want_c), "taskferry %s %s <TAB>: got\n%swant\n%s", v->name, flag,
                                      got_c, want_c);
                }
        }
        /* after `job run`: the job files */
        _cleanup_free_ char *jobs = complete("job run ''");
        ck_assert_str_eq(jobs, "demo\n");
}
END_TEST

int main(void) {
        Suite *s = suite_create("cli-help");
        tf_tcase(s, "help", NULL, NULL, 0, TF_TESTS(top_help_lists_exactly_the_implemented_commands,
                man_page_documents_exactly_the_implemented_commands, man_page_says_which_commands_need_no_daemon,
                man_page_parser, diff_is_in_the_table));
        TCase *comp = tf_tcase(s, "completion", NULL, NULL, 120, TF_TESTS(completion_follows_the_table));
        tcase_add_unchecked_fixture(comp, completion_setup, completion_teardown);
        return tf_run_suite(s);
}
