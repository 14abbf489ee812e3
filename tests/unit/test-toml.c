/* toml.c: the one TOML reader (src/shared/toml.h): every accepted form
 * (strings of the four kinds, integers, booleans, arrays), every rejection
 * with the line it names, hostile bytes and sizes, and that no error message
 * repeats a value (a job's prompt is a secret). */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "string-util.h"
#include "toml.h"
#include "unit.h"

/* ---- helpers ---- */

static json_object *parse_ok(const char *text) {
        json_object *table = NULL, *lines = NULL;
        unsigned line = 0;
        char *msg = NULL;
        int r = toml_parse(text, strlen(text), &table, &lines, &line, &msg);
        ck_assert_msg(r == 0, "parse failed (line %u): %s\n---\n%s", line, msg ? msg : "?", text);
        json_object_put(lines);
        return table;
}

/* Expect a parse error at `line` whose message contains `needle`. */
static void parse_fails_len(const char *text, size_t len, unsigned want_line, const char *needle) {
        json_object *table = NULL, *lines = NULL;
        unsigned line = 0;
        char *msg = NULL;
        int r = toml_parse(text, len, &table, &lines, &line, &msg);
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
        ck_assert_int_eq(toml_parse(text, strlen(text), &table, &lines, &line, &msg), 0);
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
        ck_assert_int_eq(toml_parse(text, strlen(text), &table, &lines, &line, &msg), 0);
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


static int64_t int_of(json_object *t, const char *key) {
        json_object *v = NULL;
        ck_assert_msg(json_object_object_get_ex(t, key, &v), "no key %s", key);
        ck_assert_msg(json_object_is_type(v, json_type_int), "%s is no integer", key);
        return json_object_get_int64(v);
}

START_TEST(integers) {
        json_object *t = parse_ok("a = 0\nb = +0\nc = -0\nd = 42\ne = +99\nf = -17\n"
                                  "g = 1_000\nh = 5_349_221\ni = 1_2_3_4\n"
                                  "max = 9223372036854775807\nmin = -9223372036854775808\n"
                                  "j = 900 # the default\nk=7\n");
        ck_assert_int_eq(int_of(t, "a"), 0);
        ck_assert_int_eq(int_of(t, "b"), 0);
        ck_assert_int_eq(int_of(t, "c"), 0);
        ck_assert_int_eq(int_of(t, "d"), 42);
        ck_assert_int_eq(int_of(t, "e"), 99);
        ck_assert_int_eq(int_of(t, "f"), -17);
        ck_assert_int_eq(int_of(t, "g"), 1000);
        ck_assert_int_eq(int_of(t, "h"), 5349221);
        ck_assert_int_eq(int_of(t, "i"), 1234);
        ck_assert(int_of(t, "max") == INT64_MAX);
        ck_assert(int_of(t, "min") == INT64_MIN);
        ck_assert_int_eq(int_of(t, "j"), 900);
        ck_assert_int_eq(int_of(t, "k"), 7);
        json_object_put(t);

        /* in arrays, beside strings, across lines */
        t = parse_ok("a = [1, -2, 3_0]\nb = [\n  'x',\n  7, # seven\n]\nc = [1,2]\n");
        json_object *a = json_get_array(t, "a");
        ck_assert_int_eq(json_object_array_length(a), 3);
        ck_assert(json_object_is_type(json_object_array_get_idx(a, 1), json_type_int));
        ck_assert_int_eq(json_object_get_int64(json_object_array_get_idx(a, 1)), -2);
        ck_assert_int_eq(json_object_get_int64(json_object_array_get_idx(a, 2)), 30);
        json_object *b = json_get_array(t, "b");
        ck_assert_int_eq(json_object_array_length(b), 2);
        ck_assert(json_object_is_type(json_object_array_get_idx(b, 0), json_type_string));
        ck_assert_int_eq(json_object_get_int64(json_object_array_get_idx(b, 1)), 7);
        ck_assert_int_eq(json_object_array_length(json_get_array(t, "c")), 2);
        json_object_put(t);

        /* a string of digits stays a string */
        parses_to("s = \"42\"\n", "s", "42", NULL);
}
END_TEST

/* ---- hostile input ---- */

START_TEST(hostile_sizes) {
        /* 1 MiB lines (a string value, a comment, a number, a key): parsed
         * or refused in linear time, never misread */
        size_t n = 1024 * 1024;
        _cleanup_free_ char *text = malloc(n + 16);
        ck_assert_ptr_nonnull(text);
        memcpy(text, "a = '", 5);
        memset(text + 5, 'x', n);
        memcpy(text + 5 + n, "'\n", 2);
        json_object *table = NULL, *lines = NULL;
        unsigned line = 0;
        char *msg = NULL;
        ck_assert_int_eq(toml_parse(text, n + 7, &table, &lines, &line, &msg), 0);
        ck_assert_uint_eq(strlen(str(table, "a")), n);
        json_object_put(table);
        json_object_put(lines);
        table = lines = NULL;

        /* the same line unterminated */
        ck_assert_int_eq(toml_parse(text, n + 5, &table, &lines, &line, &msg), -EINVAL);
        ck_assert_ptr_nonnull(strstr(msg, "unterminated string"));
        ck_assert_uint_lt(strlen(msg), 200);
        free(msg);
        msg = NULL;

        /* a comment of 1 MiB, then a key */
        text[0] = '#';
        memset(text + 1, ' ', 4);
        memcpy(text + 5 + n, "\nb=1", 4);
        ck_assert_int_eq(toml_parse(text, n + 9, &table, &lines, &line, &msg), 0);
        int64_t l = 0;
        ck_assert(json_get_int64(lines, "b", &l) && l == 2);
        json_object_put(table);
        json_object_put(lines);
        table = lines = NULL;

        /* a million digits: out of range, the digits never echoed */
        memcpy(text, "a = ", 4);
        memset(text + 4, '9', n);
        text[4 + n] = '\n';
        ck_assert_int_eq(toml_parse(text, n + 5, &table, &lines, &line, &msg), -EINVAL);
        ck_assert_ptr_nonnull(strstr(msg, "integer out of range"));
        ck_assert_ptr_null(strstr(msg, "99999999999999999999"));
        free(msg);
        msg = NULL;

        /* a key of 1 MiB */
        memset(text, 'k', n);
        memcpy(text + n, " = 1\n", 5);
        ck_assert_int_eq(toml_parse(text, n + 5, &table, &lines, &line, &msg), 0);
        ck_assert_int_eq(json_object_object_length(table), 1);
        json_object_put(table);
        json_object_put(lines);
}
END_TEST

START_TEST(hostile_bytes) {
        /* a NUL byte anywhere: in a value, a key, after a number, between lines */
        static const struct {
                const char *text;
                size_t len;
                unsigned line;
        } cases[] = {
                {"a = 1\0\n", 7, 1},
                {"a\0 = 1\n", 7, 1},
                {"a = 1\n\0\n", 8, 2},
                {"a = [1,\0 2]\n", 12, 1},
                {"a = '''x\n\0'''\n", 14, 2},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                json_object *table = NULL, *lines = NULL;
                unsigned line = 0;
                char *msg = NULL;
                ck_assert_msg(toml_parse(cases[i].text, cases[i].len, &table, &lines, &line, &msg) == -EINVAL,
                              "case %zu parsed", i);
                ck_assert_ptr_null(table);
                ck_assert_msg(line == cases[i].line, "case %zu: line %u (%s)", i, line, msg);
                free(msg);
        }
        /* every byte value as the whole value: a digit reads as its
         * integer, anything else is refused, nothing crashes */
        for (int c = 0; c < 256; c++) {
                char text[8] = "a = ";
                text[4] = (char) c;
                text[5] = '\n';
                json_object *table = NULL, *lines = NULL;
                unsigned line = 0;
                char *msg = NULL;
                int r = toml_parse(text, 6, &table, &lines, &line, &msg);
                if (c >= '0' && c <= '9') {
                        ck_assert_int_eq(r, 0);
                        ck_assert_int_eq(int_of(table, "a"), c - '0');
                } else
                        ck_assert_msg(r == -EINVAL, "byte %d parsed", c);
                json_object_put(table);
                json_object_put(lines);
                free(msg);
        }
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
        {"a = 1979-05-27\n", 0, 1, "dates and times are not supported"},
        {"a = 1979-05-27T07:32:00Z\n", 0, 1, "dates and times are not supported"},
        {"a = 1979-05-27 07:32:00\n", 0, 1, "dates and times are not supported"},
        {"a = 07:32:00\n", 0, 1, "dates and times are not supported"},
        {"a = inf\n", 0, 1, "floats are not supported"},
        {"a = -inf\n", 0, 1, "floats are not supported"},
        {"a = +nan\n", 0, 1, "floats are not supported"},
        {"a = 900.0\n", 0, 1, "floats are not supported"},
        {"a = 1.5\n", 0, 1, "floats are not supported"},
        {"a = 1e3\n", 0, 1, "floats are not supported"},
        {"a = -2E-2\n", 0, 1, "floats are not supported"},
        {"a = 0x1F\n", 0, 1, "hexadecimal, octal and binary"},
        {"a = 0o17\n", 0, 1, "hexadecimal, octal and binary"},
        {"a = 0b101\n", 0, 1, "hexadecimal, octal and binary"},
        {"a = 007\n", 0, 1, "leading zeros"},
        {"a = -01\n", 0, 1, "leading zeros"},
        {"a = 0_0\n", 0, 1, "leading zeros"},
        {"a = 1__000\n", 0, 1, "underscore in an integer"},
        {"a = 1_\n", 0, 1, "underscore in an integer"},
        {"a = 1_x\n", 0, 1, "underscore in an integer"},
        {"a = _1\n", 0, 1, "unsupported value"},
        {"a = +\n", 0, 1, "unsupported value"},
        {"a = -\n", 0, 1, "unsupported value"},
        {"a = --1\n", 0, 1, "unsupported value"},
        {"a = +-1\n", 0, 1, "unsupported value"},
        {"a = 12abc\n", 0, 1, "unsupported value"},
        {"a = 9223372036854775808\n", 0, 1, "integer out of range"},
        {"a = -9223372036854775809\n", 0, 1, "integer out of range"},
        {"a = 99999999999999999999999999999999999999\n", 0, 1, "integer out of range"},
        {"x = 1\na = 1 2\n", 0, 2, "expected the end of the line"},
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
        {"a = [1, 2.5]\n", 0, 1, "floats are not supported"},
        {"a = [{ b = 1 }]\n", 0, 1, "array elements must be strings or integers"},
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

int main(void) {
        Suite *s = suite_create("toml");
        tf_tcase(s, "accepted", NULL, NULL, 0, TF_TESTS(empty_comments_blank_lines, bare_keys_and_lines,
                basic_string_escapes, literal_strings, multi_line_basic, multi_line_literal, arrays, booleans,
                integers, hostile_sizes, hostile_bytes));
        TCase *tr = tf_tcase(s, "rejected", NULL, NULL, 0, NULL);
        TF_LOOP(tr, rejects, toml_rejections);
        return tf_run_suite(s);
}
