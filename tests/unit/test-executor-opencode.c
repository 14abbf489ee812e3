/* executor-opencode.c: `opencode run` argv (a task, a report summary with
 * its attachment, the refusals), and the identity normalizer, checked on the
 * recorded real streams of tests/fixtures/real/opencode-*.stdout.ndjson: each
 * JSON line comes out as the same value, blank lines go, others verbatim. */

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

static const executor *oc(void) {
        const executor *e = executor_find("opencode");
        ck_assert_ptr_nonnull(e);
        return e;
}

START_TEST(argv_refusals) {
        char **argv = NULL;
        const executor_launch bad[] = {
                {.model = "a/b", .prompt = "p"},                                   /* no directory */
                {.directory = "", .model = "a/b", .prompt = "p"},
                {.directory = "/w", .prompt = "p"},                                /* no model */
                {.directory = "/w", .model = "", .prompt = "p"},
                {.directory = "/w", .model = "a/b"},                               /* no prompt */
                {.directory = "/w", .model = "a/b", .prompt = "", .attachment = "/s"}, /* a summary needs its instruction */
                {.directory = "/w", .model = "a/b", .prompt_file = "/p", .attachment = "/s"},
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ck_assert_msg(oc()->build_argv(&bad[i], &argv) == -EINVAL, "row %zu", i);
        ck_assert_int_eq(oc()->build_argv(NULL, &argv), -EINVAL);
        ck_assert_ptr_null(argv);
}
END_TEST

START_TEST(argv_prompt_never_on_argv_with_a_file) {
        char **argv = NULL;
        executor_launch l = {.directory = "/w d", .model = "p/m", .prompt = "SECRET", .prompt_file = "/run/p"};
        ck_assert_int_eq(oc()->build_argv(&l, &argv), 0);
        for (char **a = argv; *a; a++) ck_assert_ptr_null(strstr(*a, "SECRET"));
        tf_assert_argv(argv, "opencode", "run", "--dir", "/w d", "--auto", "--format", "json", "-m", "p/m", "-f",
                       "/run/p", "--", "Follow the instructions in the attached prompt file exactly.", NULL);
        strv_free(argv);
        /* a prompt that looks like a flag stays after "--" */
        executor_launch f = {.directory = "/w", .model = "p/m", .prompt = "--help"};
        ck_assert_int_eq(oc()->build_argv(&f, &argv), 0);
        tf_assert_argv(argv, "opencode", "run", "--dir", "/w", "--auto", "--format", "json", "-m", "p/m", "--",
                       "--help", NULL);
        strv_free(argv);
}
END_TEST

START_TEST(argv_summary) {
        char **argv = NULL;
        executor_launch l = {.directory = "/w", .model = "p/m", .variant = "high", .session_id = "ses",
                             .prompt = "Summarize.", .attachment = "/snap/log"};
        ck_assert_int_eq(oc()->build_argv(&l, &argv), 0);
        tf_assert_argv(argv, "opencode", "run", "--dir", "/w", "--pure", "--format", "json", "-m", "p/m", "-f",
                       "/snap/log", "--continue", "--session", "ses", "--", "Summarize.", NULL);
        strv_free(argv);
}
END_TEST

static bool same_json(const char *a, const char *b) {
        json_object *x = NULL, *y = NULL;
        if (json_parse_strict(a, strlen(a), &x) < 0 || json_parse_strict(b, strlen(b), &y) < 0) return false;
        bool eq = json_object_equal(x, y);
        json_object_put(x);
        json_object_put(y);
        return eq;
}

START_TEST(real_streams_are_kept) {
        glob_t g;
        ck_assert_int_eq(glob(REAL_DIR "/opencode-*.stdout.ndjson", 0, NULL, &g), 0);
        ck_assert_uint_ge(g.gl_pathc, 5);
        for (size_t i = 0; i < g.gl_pathc; i++) {
                _cleanup_free_ char *data = NULL;
                size_t len = 0;
                ck_assert_int_eq(read_file(g.gl_pathv[i], 64 << 20, &data, &len), 0);
                _cleanup_strv_free_ char **out = tf_normalize(oc(), data, len);
                /* the input's non-blank lines, one for one */
                _cleanup_strv_free_ char **in = NULL;
                for (char *line = data, *next; line && *line; line = next) {
                        next = strchr(line, '\n');
                        if (next) *next++ = 0;
                        if (line[strspn(line, " \t\r")]) ck_assert_int_eq(strv_push(&in, line), 0);
                }
                ck_assert_msg(strv_length(out) == strv_length(in), "%s: %zu lines, want %zu", g.gl_pathv[i],
                              strv_length(out), strv_length(in));
                for (size_t k = 0; in && in[k]; k++)
                        ck_assert_msg(same_json(out[k], in[k]) || streq(out[k], in[k]), "%s line %zu", g.gl_pathv[i], k);
        }
        globfree(&g);
}
END_TEST

START_TEST(edges) {
        const char in[] = "  \n{ \"a\" : 1 }\nnull\n[1, 2]\nError: boom\n\n{\"x\":\"a/b\"}";
        _cleanup_strv_free_ char **out = tf_normalize(oc(), in, sizeof in - 1);
        /* blank dropped, JSON compacted, null nothing, text verbatim, the partial last line kept */
        tf_assert_argv(out, "{\"a\":1}", "[1,2]", "Error: boom", "{\"x\":\"a/b\"}", NULL);
        /* a line with bytes that are no JSON (a raw NUL, bad UTF-8) is passed verbatim */
        normalizer *n = oc()->normalizer_new();
        _cleanup_strv_free_ char **o2 = NULL;
        ck_assert_int_eq(oc()->normalize_line(n, "{\"a\":\"\xc0\x80\"}", 10, true, &o2), 0);
        oc()->normalizer_free(n);
        ck_assert_uint_eq(strv_length(o2), 1);
        ck_assert_str_eq(o2[0], "{\"a\":\"\xc0\x80\"}");
}
END_TEST

TF_MAIN("executor-opencode", "opencode", NULL, NULL, 0, argv_refusals, argv_prompt_never_on_argv_with_a_file, argv_summary,
        real_streams_are_kept, edges)
