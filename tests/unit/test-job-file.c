/* job-file.c: the TOML subset of timer-job files and the job keys
 * (docs/taskferry-jobs.5.md): every accepted form, every rejection, and
 * that no error message repeats a value (a prompt is a secret). */
#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "job-file.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"
#include "strv.h"

/* ---- helpers ---- */

static json_object *parse_ok(const char *text) {
        json_object *table = NULL, *lines = NULL;
        unsigned line = 0;
        char *msg = NULL;
        int r = job_toml_parse(text, strlen(text), &table, &lines, &line, &msg);
        ck_assert_msg(r == 0, "parse failed (line %u): %s\n---\n%s", line, msg ? msg : "?", text);
        json_object_put(lines);
        return table;
}

/* Expect a parse error at `line` whose message contains `needle`. */
static void parse_fails_len(const char *text, size_t len, unsigned want_line, const char *needle) {
        json_object *table = NULL, *lines = NULL;
        unsigned line = 0;
        char *msg = NULL;
        int r = job_toml_parse(text, len, &table, &lines, &line, &msg);
        ck_assert_msg(r == -EINVAL, "parse did not fail (r=%d)\n---\n%s", r, text);
        ck_assert_ptr_null(table);
        ck_assert_ptr_nonnull(msg);
        ck_assert_msg(strstr(msg, needle), "message '%s' lacks '%s'\n---\n%s", msg, needle, text);
        ck_assert_msg(line == want_line, "error on line %u, expected %u (%s)\n---\n%s", line, want_line, msg, text);
        /* never the value itself */
        ck_assert_msg(!strstr(msg, "SECRET"), "the message repeats a value: %s", msg);
        free(msg);
}

static const char *str(json_object *t, const char *key);

/* text parses to a table holding each key (a string) with its value: the
 * key, value pairs that follow, NULL-terminated. A mismatch names the text. */
static void parses_to(const char *text, ...) __attribute__((sentinel));
static void parses_to(const char *text, ...) {
        json_object *t = parse_ok(text);
        va_list ap;
        va_start(ap, text);
        for (const char *key; (key = va_arg(ap, const char *));) {
                const char *want = va_arg(ap, const char *), *got = str(t, key);
                ck_assert_msg(streq(got, want), "%s = [%s], want [%s]\n---\n%s", key, got, want, text);
        }
        va_end(ap);
        json_object_put(t);
}

static const char *str(json_object *t, const char *key) {
        json_object *v = NULL;
        ck_assert_msg(json_object_object_get_ex(t, key, &v), "no key %s", key);
        ck_assert(json_object_is_type(v, json_type_string));
        return json_object_get_string(v);
}

static void spec_ok(const char *text, job_spec *j) {
        unsigned line = 0;
        char *msg = NULL;
        int r = job_spec_parse(text, strlen(text), "/home/u", "/home/u/.config/taskferry/jobs", j, &line, &msg);
        ck_assert_msg(r == 0, "job failed (line %u): %s\n---\n%s", line, msg ? msg : "?", text);
}

static void spec_fails(const char *text, unsigned want_line, const char *needle) {
        job_spec j = {};
        unsigned line = 99;
        char *msg = NULL;
        int r = job_spec_parse(text, strlen(text), "/home/u", "/home/u/.config/taskferry/jobs", &j, &line, &msg);
        ck_assert_msg(r == -EINVAL, "job did not fail (r=%d)\n---\n%s", r, text);
        ck_assert_ptr_nonnull(msg);
        ck_assert_msg(strstr(msg, needle), "message '%s' lacks '%s'\n---\n%s", msg, needle, text);
        ck_assert_msg(line == want_line, "error on line %u, expected %u (%s)\n---\n%s", line, want_line, msg, text);
        ck_assert_msg(!strstr(msg, "SECRET"), "the message repeats a value: %s", msg);
        ck_assert_ptr_null(j.directory);
        free(msg);
}

/* ---- names ---- */

START_TEST(names) {
        ck_assert(job_name_is_valid("demo"));
        ck_assert(job_name_is_valid("nightly-review_2.x"));
        ck_assert(job_name_is_valid("a.b"));
        ck_assert(!job_name_is_valid(""));
        ck_assert(!job_name_is_valid(NULL));
        ck_assert(!job_name_is_valid("."));
        ck_assert(!job_name_is_valid(".."));
        ck_assert(!job_name_is_valid(".hidden"));
        ck_assert(!job_name_is_valid("-x"));
        ck_assert(job_name_is_valid("x-"));
        ck_assert(!job_name_is_valid("../x"));
        ck_assert(!job_name_is_valid("a/b"));
        ck_assert(!job_name_is_valid("a b"));
        ck_assert(!job_name_is_valid("a\\x2d"));
        ck_assert(!job_name_is_valid("a@b"));
        ck_assert(!job_name_is_valid("ä"));
        char long_name[JOB_NAME_MAX + 2];
        memset(long_name, 'a', sizeof long_name);
        long_name[JOB_NAME_MAX] = 0;
        ck_assert(job_name_is_valid(long_name));
        long_name[JOB_NAME_MAX] = 'a';
        long_name[JOB_NAME_MAX + 1] = 0;
        ck_assert(!job_name_is_valid(long_name));
}
END_TEST

/* ---- accepted forms ---- */

START_TEST(empty_comments_blank_lines) {
        json_object *t = parse_ok("");
        ck_assert_int_eq(json_object_object_length(t), 0);
        json_object_put(t);
        t = parse_ok("# only a comment\n\n   \t\n# another\r\n");
        ck_assert_int_eq(json_object_object_length(t), 0);
        json_object_put(t);
        /* no final newline; comment after a value; CRLF; blanks around = */
        parses_to("a = \"x\" # trailing comment\r\n  b\t=\t'y'\nc=\"z\"", "a", "x", "b", "y", "c", "z", NULL);
}
END_TEST

START_TEST(bare_keys_and_lines) {
        json_object *table = NULL, *lines = NULL;
        unsigned line = 0;
        char *msg = NULL;
        const char *text = "# c\nkey_1 = \"a\"\n\nKEY-2 = \"\"\"\nx\ny\"\"\"\n3 = 'n'\n";
        ck_assert_int_eq(job_toml_parse(text, strlen(text), &table, &lines, &line, &msg), 0);
        ck_assert_str_eq(str(table, "key_1"), "a");
        ck_assert_str_eq(str(table, "KEY-2"), "x\ny");
        ck_assert_str_eq(str(table, "3"), "n");
        int64_t l;
        ck_assert(json_get_int64(lines, "key_1", &l) && l == 2);
        ck_assert(json_get_int64(lines, "KEY-2", &l) && l == 4);
        ck_assert(json_get_int64(lines, "3", &l) && l == 7);
        /* file order */
        const char *order[] = { "key_1", "KEY-2", "3" };
        size_t i = 0;
        json_object_object_foreach(table, k, v) {
                (void) v;
                ck_assert_str_eq(k, order[i++]);
        }
        json_object_put(table);
        json_object_put(lines);
}
END_TEST

START_TEST(basic_string_escapes) {
        parses_to("a = \"q\\\" b\\\\ n\\n t\\t r\\r f\\f b\\b\"\n"
                  "u = \"\\u00e9\\u20AC\\U0001F600\"\n"
                  "raw = \"tab\there é €\"\n"
                  "hash = \"# not a comment\"\n"
                  "sq = \"it's\"\n",
                  "a", "q\" b\\ n\n t\t r\r f\f b\b", "u", "é€\xf0\x9f\x98\x80", "raw", "tab\there é €", "hash",
                  "# not a comment", "sq", "it's", NULL);
        parses_to("e = \"\"\n", "e", "", NULL);
}
END_TEST

START_TEST(literal_strings) {
        parses_to("a = 'C:\\Users\\x \\n \"q\" #no'\nb = ''\n", "a", "C:\\Users\\x \\n \"q\" #no", "b", "", NULL);
}
END_TEST

START_TEST(multi_line_basic) {
        /* the newline after the opening quotes is trimmed; CRLF becomes LF;
         * quotes inside; escapes work */
        parses_to("p = \"\"\"\r\nline 1\r\n  \"quoted\" and \"\"two\"\"\n\\ttab\\u00e9\n\"\"\"\n", "p",
                  "line 1\n  \"quoted\" and \"\"two\"\"\n\ttabé\n", NULL);
        /* line-ending backslash trims the newline and following blanks */
        parses_to("p = \"\"\"\nThe quick \\\n    brown \\   \n\n   fox.\"\"\"\n", "p", "The quick brown fox.", NULL);
        /* up to two quotes touching the closing delimiter */
        parses_to("a = \"\"\"x\"\"\"\"\nb = \"\"\"x\"\"\"\"\"\nc = \"\"\"\"\"\"\n", "a", "x\"", "b", "x\"\"", "c", "",
                  NULL);
        /* one line; a comment may follow */
        parses_to("a = \"\"\"one\"\"\" # c\n", "a", "one", NULL);
}
END_TEST

START_TEST(multi_line_literal) {
        parses_to("p = '''\nno \\escapes\\n here\n'quoted' ''two''\n'''\n"
                  "q = '''x''''\n",
                  "p", "no \\escapes\\n here\n'quoted' ''two''\n", "q", "x'", NULL);
}
END_TEST

START_TEST(arrays) {
        json_object *t = parse_ok("a = [\"x\", 'y']\n"
                                  "b = []\n"
                                  "c = [ \"one\", ]\n"
                                  "d = [\n  \"/p/1\", # first\n\n  '/p/2',\n  # a comment line\n]\n"
                                  "e = [\"\"\"m\nl\"\"\"]\n");
        json_object *a = json_get_array(t, "a");
        ck_assert_int_eq(json_object_array_length(a), 2);
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(a, 0)), "x");
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(a, 1)), "y");
        ck_assert_int_eq(json_object_array_length(json_get_array(t, "b")), 0);
        ck_assert_int_eq(json_object_array_length(json_get_array(t, "c")), 1);
        json_object *d = json_get_array(t, "d");
        ck_assert_int_eq(json_object_array_length(d), 2);
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(d, 1)), "/p/2");
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(json_get_array(t, "e"), 0)), "m\nl");
        json_object_put(t);
        /* the line numbers after a multi-line array */
        json_object *table = NULL, *lines = NULL;
        unsigned line = 0;
        char *msg = NULL;
        const char *text = "a = [\n'x',\n]\nb = 'y'\n";
        ck_assert_int_eq(job_toml_parse(text, strlen(text), &table, &lines, &line, &msg), 0);
        int64_t l;
        ck_assert(json_get_int64(lines, "b", &l) && l == 4);
        json_object_put(table);
        json_object_put(lines);
}
END_TEST

START_TEST(booleans) {
        json_object *t = parse_ok("a = true\nb = false # no\n");
        json_object *v = NULL;
        ck_assert(json_object_object_get_ex(t, "a", &v) && json_object_is_type(v, json_type_boolean) &&
                  json_object_get_boolean(v));
        ck_assert(json_object_object_get_ex(t, "b", &v) && json_object_is_type(v, json_type_boolean) &&
                  !json_object_get_boolean(v));
        json_object_put(t);
}
END_TEST

/* ---- rejections ---- */

/* A TOML text (len 0: strlen), the line its error names and what the
 * message says (never a value: each SECRET stays out of it). */
static const struct {
        const char *text;
        size_t len;
        unsigned line;
        const char *needle;
} toml_rejections[] = {
        /* tables and keys */
        {"[job]\na = 'x'\n", 0, 1, "tables are not supported"},
        {"a = 'x'\n[[jobs]]\n", 0, 2, "tables are not supported"},
        {"\"quoted\" = 'x'\n", 0, 1, "quoted keys"},
        {"'quoted' = 'x'\n", 0, 1, "quoted keys"},
        {"a.b = 'x'\n", 0, 1, "dotted keys"},
        {"a . b = 'x'\n", 0, 1, "dotted keys"},
        {"= 'x'\n", 0, 1, "expected a key"},
        {"a 'x'\n", 0, 1, "expected = after the key a"},
        {"a\n", 0, 1, "expected = after the key a"},
        {"a b = 'x'\n", 0, 1, "expected = after the key a"},
        {"é = 'x'\n", 0, 1, "expected a key"},
        {"a = 'x'\nb = 'y'\na = 'SECRET'\n", 0, 3, "duplicate key a"},
        /* values */
        {"a =\n", 0, 1, "missing value"},
        {"a = # c\n", 0, 1, "missing value"},
        {"a = ", 0, 1, "missing value"},
        {"a = 42\n", 0, 1, "unsupported value"},
        {"a = -1\n", 0, 1, "unsupported value"},
        {"a = 1979-05-27\n", 0, 1, "unsupported value"},
        {"a = inf\n", 0, 1, "unsupported value"},
        {"a = True\n", 0, 1, "unsupported value"},
        {"a = truex\n", 0, 1, "unsupported value"},
        {"a = SECRET\n", 0, 1, "unsupported value"},
        {"a = { b = 'x' }\n", 0, 1, "inline tables"},
        {"a = 'x' 'y'\n", 0, 1, "expected the end of the line"},
        {"a = 'x' b = 'y'\n", 0, 1, "expected the end of the line"},
        {"a = true false\n", 0, 1, "expected the end of the line"},
        {"a = 'x'\rb = 'y'\n", 0, 1, "expected the end of the line"},
        /* strings */
        {"a = \"SECRET\n", 0, 1, "unterminated string"},
        {"a = \"SECRET", 0, 1, "unterminated string"},
        {"a = 'SECRET\n", 0, 1, "unterminated string"},
        {"x = 'y'\na = \"\"\"SECRET\n\nmore", 0, 2, "unterminated multi-line string"},
        {"a = '''SECRET\n", 0, 1, "unterminated multi-line string"},
        {"a = \"SECRET \\q\"\n", 0, 1, "invalid escape sequence"},
        {"a = \"SECRET \\x41\"\n", 0, 1, "invalid escape sequence"},
        {"a = \"SECRET \\ \"\n", 0, 1, "invalid escape sequence"},
        {"a = \"SECRET \\u12\"\n", 0, 1, "\\u needs 4 hex digits"},
        {"a = \"SECRET \\U0001F60\"\n", 0, 1, "\\U needs 8 hex digits"},
        {"a = \"\\u0000\"\n", 0, 1, "NUL"},
        {"a = \"\\uD800\"\n", 0, 1, "no Unicode scalar value"},
        {"a = \"\\U00110000\"\n", 0, 1, "no Unicode scalar value"},
        {"a = \"SECRET\x01\"\n", 0, 1, "control character in a string"},
        {"a = \"SECRET\x7f\"\n", 0, 1, "control character in a string"},
        {"a = 'SECRET\x1b'\n", 0, 1, "control character in a literal string"},
        {"a = \"\"\"\nok\nSECRET\x0c\"\"\"\n", 0, 3, "control character in a string"},
        {"a = \"\"\"SECRET\rx\"\"\"\n", 0, 1, "control character in a string"},
        {"a = \"\"\"x\"\"\"\"\"\"\n", 0, 1, "too many quotes"},
        {"a = '''x''''''\n", 0, 1, "too many quotes"},
        /* a raw NUL byte, also in a comment */
        {"a = \"SE\0CRET\"\n", 14, 1, "control character in a string"},
        {"# c\0\na = 'x'\n", 12, 1, "control character in a comment"},
        {"# c\x01\n", 0, 1, "control character in a comment"},
        /* arrays */
        {"a = [\"x\", [\"y\"]]\n", 0, 1, "nested arrays"},
        {"a = [1, 2]\n", 0, 1, "array elements must be strings"},
        {"a = [true]\n", 0, 1, "array elements must be strings"},
        {"a = [\"x\" \"y\"]\n", 0, 1, "expected , or ]"},
        {"a = [\"x\",,]\n", 0, 1, "array elements must be strings"},
        {"a = [,]\n", 0, 1, "array elements must be strings"},
        {"a = [\n\"x\",\n", 0, 1, "unterminated array"},
        {"a = [\"x\"", 0, 1, "unterminated array"},
        {"a = [\"x\"] 'y'\n", 0, 1, "expected the end of the line"},
        /* bad utf8 */
        {"a = 'x'\nb = '\xff'\n", 0, 2, "not valid UTF-8"},
        {"a = '\xc0\xaf'\n", 0, 1, "not valid UTF-8"}, /* overlong */
        {"a = '\xed\xa0\x80'\n", 0, 1, "not valid UTF-8"}, /* surrogate */
        {"a = '\xf4\x90\x80\x80'\n", 0, 1, "not valid UTF-8"}, /* past U+10FFFF */
        {"a = '\xe2\x82'", 0, 1, "not valid UTF-8"}, /* truncated */
        {"# \xe2\x28\xa1\n", 0, 1, "not valid UTF-8"},
};

START_TEST(rejects) {
        size_t len = toml_rejections[_i].len;
        const char *text = toml_rejections[_i].text;
        parse_fails_len(text, len ? len : strlen(text), toml_rejections[_i].line, toml_rejections[_i].needle);
}
END_TEST

/* ---- the job keys ---- */

START_TEST(job_all_keys) {
        job_spec j = {};
        spec_ok("# a nightly review\n"
                "directory = \"~/src/app\"\n"
                "executor = \"pi\"\n"
                "model = \"openai/gpt-5.6-sol\"\n"
                "variant = 'high'\n"
                "prompt = \"\"\"\nReview the last day's commits.\n\"\"\"\n"
                "rw_bind = [\"~/.cache/app\", \"/srv/data\"]\n"
                "ro_bind = [\n  \"/usr/share/doc\",\n]\n",
                &j);
        ck_assert_str_eq(j.directory, "/home/u/src/app");
        ck_assert_str_eq(j.executor, "pi");
        ck_assert_str_eq(j.model, "openai/gpt-5.6-sol");
        ck_assert_str_eq(j.variant, "high");
        ck_assert_str_eq(j.prompt, "Review the last day's commits.\n");
        ck_assert_ptr_null(j.prompt_file);
        ck_assert_int_eq(strv_length(j.rw_bind), 2);
        ck_assert_str_eq(j.rw_bind[0], "/home/u/.cache/app");
        ck_assert_str_eq(j.rw_bind[1], "/srv/data");
        ck_assert_int_eq(strv_length(j.ro_bind), 1);
        ck_assert_str_eq(j.ro_bind[0], "/usr/share/doc");
        job_spec_done(&j);
}
END_TEST

START_TEST(job_minimal_and_prompt_file) {
        job_spec j = {};
        spec_ok("directory = '/srv/repo'\nprompt = 'echo hi > new.txt'\n", &j);
        ck_assert_str_eq(j.directory, "/srv/repo");
        ck_assert_ptr_null(j.executor);
        ck_assert_ptr_null(j.model);
        ck_assert_ptr_null(j.variant);
        ck_assert_ptr_null(j.rw_bind);
        ck_assert_ptr_null(j.ro_bind);
        ck_assert_str_eq(j.prompt, "echo hi > new.txt");
        job_spec_done(&j);
        /* relative to the job file's directory */
        spec_ok("directory = '~'\n\nprompt_file = 'prompts/nightly.md'\nrw_bind = []\n", &j);
        ck_assert_str_eq(j.directory, "/home/u");
        ck_assert_str_eq(j.prompt_file, "/home/u/.config/taskferry/jobs/prompts/nightly.md");
        ck_assert_uint_eq(j.prompt_file_line, 3);
        ck_assert_ptr_null(j.prompt);
        ck_assert_ptr_null(j.rw_bind);
        job_spec_done(&j);
        spec_ok("directory = '/r'\nprompt_file = '~/p.txt'\n", &j);
        ck_assert_str_eq(j.prompt_file, "/home/u/p.txt");
        job_spec_done(&j);
        spec_ok("directory = '/r'\nprompt_file = '/etc/p.txt'\n", &j);
        ck_assert_str_eq(j.prompt_file, "/etc/p.txt");
        job_spec_done(&j);
        /* every executor of the table */
        spec_ok("directory = '/r'\nprompt = 'x'\nexecutor = 'shell'\n", &j);
        ck_assert_str_eq(j.executor, "shell");
        job_spec_done(&j);
        spec_ok("directory = '/r'\nprompt = 'x'\nexecutor = 'opencode'\n", &j);
        job_spec_done(&j);
}
END_TEST

/* A job file, the line its error names (0: none) and what the message
 * says. */
static const struct {
        const char *text;
        unsigned line;
        const char *needle;
} job_rejections_cases[] = {
        {"directory = '/r'\nprompt = 'SECRET'\nschedule = 'daily'\n", 3, "unknown key schedule"},
        {"directory = '/r'\nprompt = 'SECRET'\nschedule = 'daily'\n", 3, "a job has: directory, executor"},
        {"directory = '/r'\nprompt = 'SECRET'\nrwBind = ['/x']\n", 3, "unknown key rwBind"},
        {"prompt = 'SECRET'\n", 0, "missing key directory"},
        {"directory = '/r'\n", 0, "missing key prompt"},
        {"directory = '/r'\nprompt = 'SECRET'\nprompt_file = 'p'\n", 3, "exclude each other"},
        {"directory = '/r'\nprompt_file = 'p'\nprompt = 'SECRET'\n", 3, "exclude each other"},
        {"directory = 'src/app'\nprompt = 'SECRET'\n", 1, "directory must be an absolute path"},
        {"directory = '~other/x'\nprompt = 'SECRET'\n", 1, "directory must be an absolute path"},
        {"directory = ''\nprompt = 'SECRET'\n", 1, "directory must not be empty"},
        {"directory = ['/r']\nprompt = 'SECRET'\n", 1, "directory must be a string"},
        {"directory = true\nprompt = 'SECRET'\n", 1, "directory must be a string"},
        {"directory = '/r'\nprompt = ''\n", 2, "prompt must not be empty"},
        {"directory = '/r'\nprompt = ['SECRET']\n", 2, "prompt must be a string"},
        {"directory = '/r'\nprompt = 'SECRET'\nexecutor = 'claude'\n", 3,
         "executor must be one of opencode, pi, shell"},
        {"directory = '/r'\nprompt = 'SECRET'\nmodel = ''\n", 3, "model must not be empty"},
        {"directory = '/r'\nprompt = 'SECRET'\nvariant = false\n", 3, "variant must be a string"},
        {"directory = '/r'\nprompt = 'SECRET'\nrw_bind = '/x'\n", 3, "rw_bind must be an array of paths"},
        {"directory = '/r'\nprompt = 'SECRET'\nro_bind = ['rel/x']\n", 3, "ro_bind entries must be absolute paths"},
        {"directory = '/r'\nprompt = 'SECRET'\nro_bind = ['']\n", 3, "ro_bind entries must be absolute"},
        {"directory = '/r'\nprompt_file = '~nobody/p'\n", 2, "prompt_file must be a path"},
        /* a TOML error comes through with its line */
        {"directory = '/r'\nprompt = \"SECRET\n", 2, "unterminated string"},
};

START_TEST(job_rejections) {
        spec_fails(job_rejections_cases[_i].text, job_rejections_cases[_i].line, job_rejections_cases[_i].needle);
}
END_TEST

START_TEST(job_home_required_for_tilde) {
        job_spec j = {};
        unsigned line = 0;
        char *msg = NULL;
        const char *text = "directory = '~/x'\nprompt = 'p'\n";
        ck_assert_int_eq(job_spec_parse(text, strlen(text), NULL, "/b", &j, &line, &msg), -EINVAL);
        ck_assert_uint_eq(line, 1);
        free(msg);
        msg = NULL;
        ck_assert_int_eq(job_spec_parse(text, strlen(text), "relative", "/b", &j, &line, &msg), -EINVAL);
        free(msg);
}
END_TEST

int main(void) {
        Suite *s = suite_create("job-file");
        TCase *tc = tf_tcase(s, "toml", NULL, NULL, 0, TF_TESTS(names, empty_comments_blank_lines, bare_keys_and_lines,
                basic_string_escapes, literal_strings, multi_line_basic, multi_line_literal, arrays, booleans));
        TF_LOOP(tc, rejects, toml_rejections);
        TCase *tj = tf_tcase(s, "job", NULL, NULL, 0, TF_TESTS(job_all_keys, job_minimal_and_prompt_file,
                job_home_required_for_tilde));
        TF_LOOP(tj, job_rejections, job_rejections_cases);
        return tf_run_suite(s);
}
