/* job-file.c: the TOML subset of timer-job files and the job keys
 * (docs/taskferry-jobs.5.md): every accepted form, every rejection, and
 * that no error message repeats a value (a prompt is a secret). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "job-file.h"
#include "json-util.h"
#include "unit.h"
#include "util.h"

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
        ck_assert_msg(strstr(msg, needle), "message '%s' lacks '%s'", msg, needle);
        ck_assert_msg(line == want_line, "error on line %u, expected %u (%s)", line, want_line, msg);
        /* never the value itself */
        ck_assert_msg(!strstr(msg, "SECRET"), "the message repeats a value: %s", msg);
        free(msg);
}

static void parse_fails(const char *text, unsigned want_line, const char *needle) {
        parse_fails_len(text, strlen(text), want_line, needle);
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
        ck_assert_msg(strstr(msg, needle), "message '%s' lacks '%s'", msg, needle);
        ck_assert_msg(line == want_line, "error on line %u, expected %u (%s)", line, want_line, msg);
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
        t = parse_ok("a = \"x\" # trailing comment\r\n  b\t=\t'y'\nc=\"z\"");
        ck_assert_str_eq(str(t, "a"), "x");
        ck_assert_str_eq(str(t, "b"), "y");
        ck_assert_str_eq(str(t, "c"), "z");
        json_object_put(t);
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
        json_object *t = parse_ok("a = \"q\\\" b\\\\ n\\n t\\t r\\r f\\f b\\b\"\n"
                                  "u = \"\\u00e9\\u20AC\\U0001F600\"\n"
                                  "raw = \"tab\there é €\"\n"
                                  "hash = \"# not a comment\"\n"
                                  "sq = \"it's\"\n");
        ck_assert_str_eq(str(t, "a"), "q\" b\\ n\n t\t r\r f\f b\b");
        ck_assert_str_eq(str(t, "u"), "é€\xf0\x9f\x98\x80");
        ck_assert_str_eq(str(t, "raw"), "tab\there é €");
        ck_assert_str_eq(str(t, "hash"), "# not a comment");
        ck_assert_str_eq(str(t, "sq"), "it's");
        json_object_put(t);
        t = parse_ok("e = \"\"\n");
        ck_assert_str_eq(str(t, "e"), "");
        json_object_put(t);
}
END_TEST

START_TEST(literal_strings) {
        json_object *t = parse_ok("a = 'C:\\Users\\x \\n \"q\" #no'\nb = ''\n");
        ck_assert_str_eq(str(t, "a"), "C:\\Users\\x \\n \"q\" #no");
        ck_assert_str_eq(str(t, "b"), "");
        json_object_put(t);
}
END_TEST

START_TEST(multi_line_basic) {
        /* the newline after the opening quotes is trimmed; CRLF becomes LF;
         * quotes inside; escapes work */
        json_object *t = parse_ok("p = \"\"\"\r\nline 1\r\n  \"quoted\" and \"\"two\"\"\n\\ttab\\u00e9\n\"\"\"\n");
        ck_assert_str_eq(str(t, "p"), "line 1\n  \"quoted\" and \"\"two\"\"\n\ttabé\n");
        json_object_put(t);
        /* line-ending backslash trims the newline and following blanks */
        t = parse_ok("p = \"\"\"\nThe quick \\\n    brown \\   \n\n   fox.\"\"\"\n");
        ck_assert_str_eq(str(t, "p"), "The quick brown fox.");
        json_object_put(t);
        /* up to two quotes touching the closing delimiter */
        t = parse_ok("a = \"\"\"x\"\"\"\"\nb = \"\"\"x\"\"\"\"\"\nc = \"\"\"\"\"\"\n");
        ck_assert_str_eq(str(t, "a"), "x\"");
        ck_assert_str_eq(str(t, "b"), "x\"\"");
        ck_assert_str_eq(str(t, "c"), "");
        json_object_put(t);
        /* one line; a comment may follow */
        t = parse_ok("a = \"\"\"one\"\"\" # c\n");
        ck_assert_str_eq(str(t, "a"), "one");
        json_object_put(t);
}
END_TEST

START_TEST(multi_line_literal) {
        json_object *t = parse_ok("p = '''\nno \\escapes\\n here\n'quoted' ''two''\n'''\n"
                                  "q = '''x''''\n");
        ck_assert_str_eq(str(t, "p"), "no \\escapes\\n here\n'quoted' ''two''\n");
        ck_assert_str_eq(str(t, "q"), "x'");
        json_object_put(t);
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

START_TEST(rejects_tables_and_keys) {
        parse_fails("[job]\na = 'x'\n", 1, "tables are not supported");
        parse_fails("a = 'x'\n[[jobs]]\n", 2, "tables are not supported");
        parse_fails("\"quoted\" = 'x'\n", 1, "quoted keys");
        parse_fails("'quoted' = 'x'\n", 1, "quoted keys");
        parse_fails("a.b = 'x'\n", 1, "dotted keys");
        parse_fails("a . b = 'x'\n", 1, "dotted keys");
        parse_fails("= 'x'\n", 1, "expected a key");
        parse_fails("a 'x'\n", 1, "expected = after the key a");
        parse_fails("a\n", 1, "expected = after the key a");
        parse_fails("a b = 'x'\n", 1, "expected = after the key a");
        parse_fails("é = 'x'\n", 1, "expected a key");
        parse_fails("a = 'x'\nb = 'y'\na = 'SECRET'\n", 3, "duplicate key a");
}
END_TEST

START_TEST(rejects_values) {
        parse_fails("a =\n", 1, "missing value");
        parse_fails("a = # c\n", 1, "missing value");
        parse_fails("a = ", 1, "missing value");
        parse_fails("a = 42\n", 1, "unsupported value");
        parse_fails("a = -1\n", 1, "unsupported value");
        parse_fails("a = 1979-05-27\n", 1, "unsupported value");
        parse_fails("a = inf\n", 1, "unsupported value");
        parse_fails("a = True\n", 1, "unsupported value");
        parse_fails("a = truex\n", 1, "unsupported value");
        parse_fails("a = SECRET\n", 1, "unsupported value");
        parse_fails("a = { b = 'x' }\n", 1, "inline tables");
        parse_fails("a = 'x' 'y'\n", 1, "expected the end of the line");
        parse_fails("a = 'x' b = 'y'\n", 1, "expected the end of the line");
        parse_fails("a = true false\n", 1, "expected the end of the line");
        parse_fails("a = 'x'\rb = 'y'\n", 1, "expected the end of the line");
}
END_TEST

START_TEST(rejects_strings) {
        parse_fails("a = \"SECRET\n", 1, "unterminated string");
        parse_fails("a = \"SECRET", 1, "unterminated string");
        parse_fails("a = 'SECRET\n", 1, "unterminated string");
        parse_fails("x = 'y'\na = \"\"\"SECRET\n\nmore", 2, "unterminated multi-line string");
        parse_fails("a = '''SECRET\n", 1, "unterminated multi-line string");
        parse_fails("a = \"SECRET \\q\"\n", 1, "invalid escape sequence");
        parse_fails("a = \"SECRET \\x41\"\n", 1, "invalid escape sequence");
        parse_fails("a = \"SECRET \\ \"\n", 1, "invalid escape sequence");
        parse_fails("a = \"SECRET \\u12\"\n", 1, "\\u needs 4 hex digits");
        parse_fails("a = \"SECRET \\U0001F60\"\n", 1, "\\U needs 8 hex digits");
        parse_fails("a = \"\\u0000\"\n", 1, "NUL");
        parse_fails("a = \"\\uD800\"\n", 1, "no Unicode scalar value");
        parse_fails("a = \"\\U00110000\"\n", 1, "no Unicode scalar value");
        parse_fails("a = \"SECRET\x01\"\n", 1, "control character in a string");
        parse_fails("a = \"SECRET\x7f\"\n", 1, "control character in a string");
        parse_fails("a = 'SECRET\x1b'\n", 1, "control character in a literal string");
        parse_fails("a = \"\"\"\nok\nSECRET\x0c\"\"\"\n", 3, "control character in a string");
        parse_fails("a = \"\"\"SECRET\rx\"\"\"\n", 1, "control character in a string");
        parse_fails("a = \"\"\"x\"\"\"\"\"\"\n", 1, "too many quotes");
        parse_fails("a = '''x''''''\n", 1, "too many quotes");
        /* a raw NUL byte, also in a comment */
        parse_fails_len("a = \"SE\0CRET\"\n", 14, 1, "control character in a string");
        parse_fails_len("# c\0\na = 'x'\n", 12, 1, "control character in a comment");
        parse_fails("# c\x01\n", 1, "control character in a comment");
}
END_TEST

START_TEST(rejects_arrays) {
        parse_fails("a = [\"x\", [\"y\"]]\n", 1, "nested arrays");
        parse_fails("a = [1, 2]\n", 1, "array elements must be strings");
        parse_fails("a = [true]\n", 1, "array elements must be strings");
        parse_fails("a = [\"x\" \"y\"]\n", 1, "expected , or ]");
        parse_fails("a = [\"x\",,]\n", 1, "array elements must be strings");
        parse_fails("a = [,]\n", 1, "array elements must be strings");
        parse_fails("a = [\n\"x\",\n", 1, "unterminated array");
        parse_fails("a = [\"x\"", 1, "unterminated array");
        parse_fails("a = [\"x\"] 'y'\n", 1, "expected the end of the line");
}
END_TEST

START_TEST(rejects_bad_utf8) {
        parse_fails("a = 'x'\nb = '\xff'\n", 2, "not valid UTF-8");
        parse_fails("a = '\xc0\xaf'\n", 1, "not valid UTF-8");         /* overlong */
        parse_fails("a = '\xed\xa0\x80'\n", 1, "not valid UTF-8");     /* surrogate */
        parse_fails("a = '\xf4\x90\x80\x80'\n", 1, "not valid UTF-8"); /* past U+10FFFF */
        parse_fails("a = '\xe2\x82'", 1, "not valid UTF-8");           /* truncated */
        parse_fails("# \xe2\x28\xa1\n", 1, "not valid UTF-8");
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

START_TEST(job_rejections) {
        spec_fails("directory = '/r'\nprompt = 'SECRET'\nschedule = 'daily'\n", 3, "unknown key schedule");
        spec_fails("directory = '/r'\nprompt = 'SECRET'\nschedule = 'daily'\n", 3, "a job has: directory, executor");
        spec_fails("directory = '/r'\nprompt = 'SECRET'\nrwBind = ['/x']\n", 3, "unknown key rwBind");
        spec_fails("prompt = 'SECRET'\n", 0, "missing key directory");
        spec_fails("directory = '/r'\n", 0, "missing key prompt");
        spec_fails("directory = '/r'\nprompt = 'SECRET'\nprompt_file = 'p'\n", 3, "exclude each other");
        spec_fails("directory = '/r'\nprompt_file = 'p'\nprompt = 'SECRET'\n", 3, "exclude each other");
        spec_fails("directory = 'src/app'\nprompt = 'SECRET'\n", 1, "directory must be an absolute path");
        spec_fails("directory = '~other/x'\nprompt = 'SECRET'\n", 1, "directory must be an absolute path");
        spec_fails("directory = ''\nprompt = 'SECRET'\n", 1, "directory must not be empty");
        spec_fails("directory = ['/r']\nprompt = 'SECRET'\n", 1, "directory must be a string");
        spec_fails("directory = true\nprompt = 'SECRET'\n", 1, "directory must be a string");
        spec_fails("directory = '/r'\nprompt = ''\n", 2, "prompt must not be empty");
        spec_fails("directory = '/r'\nprompt = ['SECRET']\n", 2, "prompt must be a string");
        spec_fails("directory = '/r'\nprompt = 'SECRET'\nexecutor = 'claude'\n", 3,
                   "executor must be one of opencode, pi, shell");
        spec_fails("directory = '/r'\nprompt = 'SECRET'\nmodel = ''\n", 3, "model must not be empty");
        spec_fails("directory = '/r'\nprompt = 'SECRET'\nvariant = false\n", 3, "variant must be a string");
        spec_fails("directory = '/r'\nprompt = 'SECRET'\nrw_bind = '/x'\n", 3, "rw_bind must be an array of paths");
        spec_fails("directory = '/r'\nprompt = 'SECRET'\nro_bind = ['rel/x']\n", 3,
                   "ro_bind entries must be absolute paths");
        spec_fails("directory = '/r'\nprompt = 'SECRET'\nro_bind = ['']\n", 3, "ro_bind entries must be absolute");
        spec_fails("directory = '/r'\nprompt_file = '~nobody/p'\n", 2, "prompt_file must be a path");
        /* a TOML error comes through with its line */
        spec_fails("directory = '/r'\nprompt = \"SECRET\n", 2, "unterminated string");
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
        tf_tcase(s, "toml", NULL, NULL, 0, TF_TESTS(names, empty_comments_blank_lines, bare_keys_and_lines,
                basic_string_escapes, literal_strings, multi_line_basic, multi_line_literal, arrays, booleans,
                rejects_tables_and_keys, rejects_values, rejects_strings, rejects_arrays, rejects_bad_utf8));
        tf_tcase(s, "job", NULL, NULL, 0, TF_TESTS(job_all_keys, job_minimal_and_prompt_file, job_rejections,
                job_home_required_for_tilde));
        return tf_run_suite(s);
}
