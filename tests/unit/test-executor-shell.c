/* executor-shell.c: `sh <promptFile>` or `sh -c <prompt>`, and the
 * normalizer that makes every stdout line, blank or JSON or not UTF-8, one
 * canonical text event of message "shell" (its text the line with its
 * newline, ill-formed bytes as U+FFFD). */

#include <check.h>
#include <errno.h>
#include <string.h>

#include "executor.h"
#include "json-util.h"
#include "macro.h"
#include "strv.h"
#include "unit.h"

static const executor *shell(void) {
        const executor *e = executor_find("shell");
        ck_assert_ptr_nonnull(e);
        return e;
}

START_TEST(argv_file_or_inline) {
        char **argv = NULL;
        executor_launch l = {.prompt = "echo hi", .directory = "/w"};
        ck_assert_int_eq(shell()->build_argv(&l, &argv), 0);
        tf_assert_argv(argv, "sh", "-c", "echo hi", NULL);
        strv_free(argv);
        /* with a prompt file the script never goes on argv */
        l.prompt_file = "/run/p.sh";
        ck_assert_int_eq(shell()->build_argv(&l, &argv), 0);
        tf_assert_argv(argv, "sh", "/run/p.sh", NULL);
        strv_free(argv);
        /* a model, variant or session changes nothing */
        executor_launch m = {.prompt = "x", .model = "a/b", .variant = "high", .session_id = "s"};
        ck_assert_int_eq(shell()->build_argv(&m, &argv), 0);
        tf_assert_argv(argv, "sh", "-c", "x", NULL);
        strv_free(argv);
        /* an empty script is still a script */
        executor_launch e = {.prompt = ""};
        ck_assert_int_eq(shell()->build_argv(&e, &argv), 0);
        tf_assert_argv(argv, "sh", "-c", "", NULL);
        strv_free(argv);
        argv = NULL;
        executor_launch none = {.directory = "/w"};
        ck_assert_int_eq(shell()->build_argv(&none, &argv), -EINVAL);
        ck_assert_int_eq(shell()->build_argv(NULL, &argv), -EINVAL);
        ck_assert_ptr_null(argv);
        ck_assert(!shell()->needs_model);
        ck_assert(shell()->exit_code_is_success);
        ck_assert_ptr_null(shell()->normalize_finish);
}
END_TEST

/* the one event of line: its text */
static char *text_of(const char *event) {
        json_object *o = NULL;
        ck_assert_int_eq(json_parse_strict(event, strlen(event), &o), 0);
        ck_assert_str_eq(json_get_string(o, "type"), "text");
        json_object *part = json_get_object(o, "part");
        ck_assert_str_eq(json_get_string(part, "type"), "text");
        ck_assert_str_eq(json_get_string(part, "messageID"), "shell");
        json_object *t = json_get(part, "text");
        char *s = strndup(json_object_get_string(t), (size_t) json_object_get_string_len(t));
        json_object_put(o);
        return s;
}

START_TEST(every_line_is_a_text_event) {
        const char in[] = "hello\n\n   \n{\"type\":\"step_finish\"}\nnot json\nlast";
        _cleanup_strv_free_ char **out = tf_normalize(shell(), in, sizeof in - 1);
        ck_assert_uint_eq(strv_length(out), 6);
        const char *want[] = {"hello\n", "\n", "   \n", "{\"type\":\"step_finish\"}\n", "not json\n", "last"};
        for (size_t i = 0; i < ELEMENTSOF(want); i++) {
                _cleanup_free_ char *t = text_of(out[i]);
                ck_assert_str_eq(t, want[i]);
        }
}
END_TEST

START_TEST(ill_formed_bytes_become_replacement_characters) {
        normalizer *n = shell()->normalizer_new();
        ck_assert_ptr_nonnull(n);
        _cleanup_strv_free_ char **out = NULL;
        /* an overlong NUL is two bad bytes; a lone continuation byte one; a
         * truncated sequence at the end one; é and 😀 kept */
        const char line[] = "\xc0\x80|\x80|\xc3\xa9\xf0\x9f\x98\x80|\xe2\x82";
        ck_assert_int_eq(shell()->normalize_line(n, line, sizeof line - 1, false, &out), 0);
        /* an embedded NUL is a character like any other */
        ck_assert_int_eq(shell()->normalize_line(n, "a\0b", 3, true, &out), 0);
        shell()->normalizer_free(n);
        ck_assert_uint_eq(strv_length(out), 2);
        _cleanup_free_ char *t = text_of(out[0]);
        ck_assert_str_eq(t, "\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd|\xc3\xa9\xf0\x9f\x98\x80|\xef\xbf\xbd\xef\xbf\xbd");
        ck_assert_ptr_nonnull(strstr(out[1], "a\\u0000b\\n"));
        /* every line written is valid JSON again */
        for (char **l = out; *l; l++) {
                json_object *o = NULL;
                ck_assert_int_eq(json_parse_strict(*l, strlen(*l), &o), 0);
                json_object_put(o);
        }
}
END_TEST

START_TEST(long_line) {
        size_t len = 1 << 20;
        char *big = malloc(len);
        memset(big, 'x', len);
        normalizer *n = shell()->normalizer_new();
        _cleanup_strv_free_ char **out = NULL;
        ck_assert_int_eq(shell()->normalize_line(n, big, len, true, &out), 0);
        shell()->normalizer_free(n);
        _cleanup_free_ char *t = text_of(out[0]);
        ck_assert_uint_eq(strlen(t), len + 1);
        free(big);
}
END_TEST

TF_MAIN("executor-shell", "shell", NULL, NULL, 0, argv_file_or_inline, every_line_is_a_text_event,
        ill_formed_bytes_become_replacement_characters, long_line)
