/* json-util.c: the strict parser (one value, trailing whitespace only, no
 * raw NUL, valid UTF-8, depth 64), the wire serializer, JavaScript's
 * Number#toString, the typed lookups (json_get and its kin), the add
 * helpers, and the string and integer checks the protocol builds on. */

#include <check.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "unit.h"

/* ---- strict parsing ---- */

static int parse_len(const char *s, size_t len, json_object **ret) {
        *ret = NULL;
        return json_parse_strict(s, len, ret);
}
#define PARSE(lit, ret) parse_len((lit), sizeof(lit) - 1, (ret))

static void parses_to(const char *text, size_t len, const char *line) {
        json_object *o = NULL;
        ck_assert_msg(parse_len(text, len, &o) == 0, "refused: %.*s", (int) len, text);
        ck_assert_str_eq(o ? json_to_line(o, NULL) : "null", line);
        json_object_put(o);
}

static const struct {
        const char *text, *line;
} accepted[] = {
        {"{}", "{}"},
        {"[]", "[]"},
        {"42", "42"},            /* a bare number at the end of input */
        {"-0", "0"},
        {"1.5", "1.5"},
        {"[0,10,0.05,1e05,1E-007,-0.0]", "[0,10,0.05,1e05,1E-007,-0.0]"}, /* zeros that are no leading ones */
        {"true", "true"},
        {"false", "false"},
        {"null", "null"},
        {"\"s\"", "\"s\""},
        {" \t\r\n{\"a\":1} \t\r\n", "{\"a\":1}"},
        {"42\n", "42"},
        {"\"a\\u0000b\"", "\"a\\u0000b\""}, /* an escaped NUL is valid JSON */
        {"\"\xc3\xa9\xf0\x9f\x98\x80\"", "\"\xc3\xa9\xf0\x9f\x98\x80\""},
        {"\"a/b\"", "\"a/b\""},  /* '/' is not escaped */
        {"{\"k\":[1,{\"x\":null}]}", "{\"k\":[1,{\"x\":null}]}"},
};

START_TEST(parse_accepts) {
        parses_to(accepted[_i].text, strlen(accepted[_i].text), accepted[_i].line);
}
END_TEST

static const char *const refused[] = {
        "",
        "   ",
        "\n",
        "{",
        "{\"a\":",
        "[1,]",          /* strict: no trailing comma */
        "{\"a\":1} x",   /* more than whitespace after the value */
        "{} {}",
        "1 2",
        "[1]]",
        "nul",
        "\"\xff\"",      /* invalid UTF-8 */
        "\"abc",
        "{\"a\":1}\v",   /* only space, tab, CR and LF count as trailing whitespace */
};

START_TEST(parse_refuses) {
        json_object *o = (json_object *) 0x1;
        ck_assert_msg(parse_len(refused[_i], strlen(refused[_i]), &o) == -EBADMSG, "accepted: %s", refused[_i]);
        /* *ret is untouched on failure (parse_len set it NULL) */
        ck_assert_ptr_null(o);
}
END_TEST

static void parses_lit(const char *text, size_t len, const char *line) {
        ck_assert_uint_eq(len, strlen(text));
        parses_to(text, len, line);
}

/* What JSON.parse refuses but json-c's strict mode lets through: its
 * extensions (single-quoted keys, NaN, Infinity, "1."), raw control
 * characters in strings, and sequences no well-formed UTF-8 has. */
static const char *const not_json[] = {
        "{'a':1}",
        "00",
        "01",
        "-01",
        "[1,007]",
        "{\"a\":-00.5}",
        "-.5",
        "[.5]",
        "NaN",
        "[NaN]",
        "Infinity",
        "-Infinity",
        "{\"a\":Infinity}",
        "[1.]",
        "1.e5",
        "[\"\t\"]",
        "\"a\nb\"",
        "\"\x1f\"",
        "\"\xc0\x80\"",             /* an overlong NUL */
        "\"\xe0\x80\xaf\"",         /* an overlong '/' */
        "\"\xed\xa0\x80\"",         /* a surrogate */
        "\"\xf4\x90\x80\x80\"",     /* past U+10FFFF */
        "{\"\xed\xbf\xbf\":1}",     /* in a key too */
};

START_TEST(parse_refuses_what_json_parse_refuses) {
        json_object *o = NULL;
        ck_assert_msg(parse_len(not_json[_i], strlen(not_json[_i]), &o) == -EBADMSG, "accepted: %s", not_json[_i]);
        ck_assert_ptr_null(o);
}
END_TEST

START_TEST(parse_keeps_what_json_parse_takes) {
        /* the letters, digits and escapes around the refused ones */
        parses_lit("[true,false,null,-1.5e+3,0.5E-2]", 32, "[true,false,null,-1.5e+3,0.5E-2]");
        parses_lit("\"it's \\\"q\\\" \\t\\u00e9 \\ud83d\\ude00 \\/\"", 37,
                  "\"it's \\\"q\\\" \\t\xc3\xa9 \xf0\x9f\x98\x80 /\"");
        parses_lit("{\"NaN\":\"Infinity\",\"'\":\"\x7f\"}", 26, "{\"NaN\":\"Infinity\",\"'\":\"\x7f\"}");
}
END_TEST

START_TEST(parse_refuses_raw_nul) {
        json_object *o;
        ck_assert_int_eq(PARSE("\"a\0b\"", &o), -EBADMSG);
        ck_assert_int_eq(PARSE("{}\0", &o), -EBADMSG);
        ck_assert_int_eq(PARSE("\0", &o), -EBADMSG);
        /* len bounds the input: what follows it is not read */
        parses_to("{}garbage", 2, "{}");
        parses_to("123456", 3, "123");
        json_tokener *tok = json_strict_tokener_new();
        ck_assert_ptr_nonnull(tok);
        ck_assert_int_eq(json_parse_strict_with(tok, "[1,\0 2]", 7, &o), -EBADMSG);
        json_tokener_free(tok);
}
END_TEST

/* n nested arrays */
static char *nested(int n) {
        char *s = malloc((size_t) n * 2 + 1);
        ck_assert_ptr_nonnull(s);
        memset(s, '[', (size_t) n);
        memset(s + n, ']', (size_t) n);
        s[2 * n] = 0;
        return s;
}

START_TEST(parse_depth) {
        _cleanup_free_ char *ok = nested(64), *deep = nested(65), *huge = nested(100000);
        json_object *o = NULL;
        ck_assert_int_eq(parse_len(ok, strlen(ok), &o), 0);
        json_object_put(o);
        ck_assert_int_eq(parse_len(deep, strlen(deep), &o), -EBADMSG);
        ck_assert_int_eq(parse_len(huge, strlen(huge), &o), -EBADMSG);
        /* a tokener of its own depth */
        json_tokener *tok = json_strict_tokener_new_depth(2);
        ck_assert_ptr_nonnull(tok);
        ck_assert_int_eq(json_parse_strict_with(tok, "[[]]", 4, &o), 0);
        json_object_put(o);
        ck_assert_int_eq(json_parse_strict_with(tok, "[[[]]]", 6, &o), -EBADMSG);
        enum json_tokener_error err = json_tokener_success;
        ck_assert_int_eq(json_parse_strict_ex(tok, "[[[]]]", 6, &o, &err), -EBADMSG);
        ck_assert_int_eq(err, json_tokener_error_depth);
        json_tokener_free(tok);
}
END_TEST

START_TEST(parse_with_reuses_the_tokener) {
        json_tokener *tok = json_strict_tokener_new();
        ck_assert_ptr_nonnull(tok);
        json_object *o = NULL;
        /* a failed partial value leaves no state behind for the next line */
        ck_assert_int_eq(json_parse_strict_with(tok, "{\"a\":", 5, &o), -EBADMSG);
        ck_assert_int_eq(json_parse_strict_with(tok, "{\"b\":2}", 7, &o), 0);
        ck_assert_str_eq(json_to_line(o, NULL), "{\"b\":2}");
        json_object_put(o);
        ck_assert_int_eq(json_parse_strict_with(tok, "7", 1, &o), 0);
        ck_assert_int_eq(json_object_get_int(o), 7);
        json_object_put(o);
        ck_assert_int_eq(json_parse_strict_with(tok, "[1] [2]", 7, &o), -EBADMSG);
        ck_assert_int_eq(json_parse_strict_with(tok, "[3]", 3, &o), 0);
        ck_assert_str_eq(json_to_line(o, NULL), "[3]");
        json_object_put(o);
        json_tokener_free(tok);
}
END_TEST

START_TEST(parse_ex_says_why) {
        json_tokener *tok = json_strict_tokener_new();
        json_object *o = NULL;
        enum json_tokener_error err = json_tokener_continue;
        ck_assert_int_eq(json_parse_strict_ex(tok, "{} x", 4, &o, &err), -EBADMSG);
        ck_assert_int_eq(err, json_tokener_success); /* a complete value, then more */
        ck_assert_int_eq(json_parse_strict_ex(tok, "1 2", 3, &o, &err), -EBADMSG);
        ck_assert_int_eq(err, json_tokener_success);
        ck_assert_int_eq(json_parse_strict_ex(tok, "\"\xc0\x80\"", 4, &o, &err), -EBADMSG);
        ck_assert_int_eq(err, json_tokener_error_parse_utf8_string);
        ck_assert_int_eq(json_parse_strict_ex(tok, "{", 1, &o, &err), -EBADMSG);
        ck_assert_int_ne(err, json_tokener_success);
        ck_assert_int_eq(json_parse_strict_ex(tok, "[]", (size_t) INT_MAX + 1, &o, &err), -EBADMSG);
        ck_assert_int_eq(err, json_tokener_error_size);
        ck_assert_int_eq(json_parse_strict_ex(tok, "[1]", 3, &o, &err), 0);
        ck_assert_int_eq(err, json_tokener_success);
        json_object_put(o);
        /* its error out-parameter may be NULL; it does not check for NUL (the caller does) */
        ck_assert_int_eq(json_parse_strict_ex(tok, "\"x\"", 3, &o, NULL), 0);
        json_object_put(o);
        json_tokener_free(tok);
}
END_TEST

/* ---- serialization and numbers ---- */

START_TEST(to_line_is_compact) {
        json_object *o = json_object_new_object();
        json_add_string(o, "p", "/a/b \"q\"\n");
        json_add_int(o, "n", -3);
        json_object *a = json_object_new_array();
        json_object_array_add(a, json_object_new_boolean(true));
        json_add(o, "a", a);
        size_t len = 0;
        const char *s = json_to_line(o, &len);
        ck_assert_str_eq(s, "{\"p\":\"/a/b \\\"q\\\"\\n\",\"n\":-3,\"a\":[true]}");
        ck_assert_uint_eq(len, strlen(s));
        ck_assert_ptr_nonnull(json_to_line(o, NULL));
        json_object_put(o);
        /* an embedded NUL survives as \u0000; ret_len counts every byte */
        json_object *n = json_object_new_string_len("a\0b", 3);
        s = json_to_line(n, &len);
        ck_assert_str_eq(s, "\"a\\u0000b\"");
        ck_assert_uint_eq(len, 10);
        json_object_put(n);
}
END_TEST

static const struct {
        double d;
        const char *s;
} numbers[] = {
        {0, "0"},
        {-0.0, "0"},
        {1, "1"},
        {-1, "-1"},
        {0.1, "0.1"},
        {0.1 + 0.2, "0.30000000000000004"},
        {1.5, "1.5"},
        {-2.25, "-2.25"},
        {100, "100"},
        {1e20, "100000000000000000000"},
        {1e21, "1e+21"},
        {1.5e21, "1.5e+21"},
        {123456789012345680000.0, "123456789012345680000"},
        {1e-6, "0.000001"},
        {1e-7, "1e-7"},
        {1.5e-7, "1.5e-7"},
        {0.000123, "0.000123"},
        {9007199254740991.0, "9007199254740991"},
        {9007199254740992.0, "9007199254740992"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
        {-1.7976931348623157e308, "-1.7976931348623157e+308"},
        {5e-324, "5e-324"},
        {-2.2250738585072014e-308, "-2.2250738585072014e-308"},
        {-1.25e-7, "-1.25e-7"},
        {-0.0000012345678901234567, "-0.0000012345678901234567"},
        {NAN, "null"},
        {INFINITY, "null"},
        {-INFINITY, "null"},
};

START_TEST(number_format_like_javascript) {
        char buf[32];
        memset(buf, 'x', sizeof buf);
        ck_assert_ptr_eq(js_number_format(numbers[_i].d, buf), buf);
        ck_assert_str_eq(buf, numbers[_i].s);
        ck_assert_uint_lt(strlen(buf), sizeof buf);
}
END_TEST

START_TEST(new_number_serializes_as_javascript) {
        json_object *o = json_new_number(3.0);
        ck_assert(json_object_is_type(o, json_type_int)); /* integers stay integers */
        ck_assert_str_eq(json_to_line(o, NULL), "3");
        json_object_put(o);
        o = json_new_number(-0.0);
        ck_assert_str_eq(json_to_line(o, NULL), "0");
        json_object_put(o);
        o = json_new_number(0.1 + 0.2);
        ck_assert(json_object_is_type(o, json_type_double));
        ck_assert_str_eq(json_to_line(o, NULL), "0.30000000000000004");
        ck_assert(json_object_get_double(o) == 0.1 + 0.2);
        json_object_put(o);
        o = json_new_number(1e21);
        ck_assert_str_eq(json_to_line(o, NULL), "1e+21");
        json_object_put(o);
        o = json_new_number(9007199254740992.0); /* past the safe range: a double */
        ck_assert(json_object_is_type(o, json_type_double));
        json_object_put(o);
        o = json_new_number(NAN);
        ck_assert_str_eq(json_to_line(o, NULL), "null");
        json_object_put(o);
}
END_TEST

/* ---- lookups ---- */

static json_object *sample(void) {
        json_object *o = NULL;
        const char *t = "{\"s\":\"str\",\"e\":\"\",\"n\":null,\"i\":42,\"d\":2.0,\"f\":2.5,\"b\":true,\"o\":{\"x\":1},"
                        "\"a\":[1],\"big\":9007199254740993,\"neg\":-7,\"bigd\":9007199254740992.0}";
        ck_assert_int_eq(json_parse_strict(t, strlen(t), &o), 0);
        return o;
}

START_TEST(get_any_type) {
        json_object *o = sample();
        ck_assert_ptr_nonnull(json_get(o, "s"));
        ck_assert_ptr_nonnull(json_get(o, "o"));
        ck_assert_ptr_eq(json_get(o, "o"), json_get_object(o, "o"));
        /* a JSON null and an absent key both read NULL */
        ck_assert_ptr_null(json_get(o, "n"));
        ck_assert_ptr_null(json_get(o, "missing"));
        ck_assert_ptr_null(json_get(NULL, "s"));
        /* on a non-object json-c finds nothing */
        json_object *arr = json_get(o, "a");
        ck_assert_ptr_null(json_get(arr, "0"));
        /* keys are exact */
        ck_assert_ptr_null(json_get(o, "S"));
        ck_assert_ptr_null(json_get(o, ""));
        json_object_put(o);
}
END_TEST

START_TEST(typed_gets) {
        json_object *o = sample();
        ck_assert_str_eq(json_get_string(o, "s"), "str");
        ck_assert_str_eq(json_get_string(o, "e"), "");
        ck_assert_ptr_null(json_get_string(o, "i"));
        ck_assert_ptr_null(json_get_string(o, "n"));
        ck_assert_ptr_null(json_get_string(o, "missing"));
        ck_assert_ptr_null(json_get_string(NULL, "s"));
        ck_assert_ptr_nonnull(json_get_object(o, "o"));
        ck_assert_ptr_null(json_get_object(o, "a"));
        ck_assert_ptr_null(json_get_object(o, "n"));
        ck_assert_ptr_null(json_get_object(NULL, "o"));
        ck_assert_ptr_nonnull(json_get_array(o, "a"));
        ck_assert_ptr_null(json_get_array(o, "o"));
        ck_assert_ptr_null(json_get_array(NULL, "a"));
        ck_assert(json_get_bool(o, "b", false));
        ck_assert(!json_get_bool(o, "missing", false));
        ck_assert(json_get_bool(o, "missing", true));
        ck_assert(json_get_bool(o, "i", true)); /* 42 is no boolean: the default */
        ck_assert(!json_get_bool(o, "s", false));
        ck_assert(json_get_bool(NULL, "b", true));
        json_object_put(o);
}
END_TEST

START_TEST(get_int64) {
        json_object *o = sample();
        int64_t v = -1;
        ck_assert(json_get_int64(o, "i", &v));
        ck_assert_int_eq(v, 42);
        ck_assert(json_get_int64(o, "neg", &v));
        ck_assert_int_eq(v, -7);
        ck_assert(json_get_int64(o, "d", &v)); /* an integral double */
        ck_assert_int_eq(v, 2);
        ck_assert(json_get_int64(o, "big", &v)); /* an int beyond 2^53 is still an int */
        ck_assert_int_eq(v, 9007199254740993LL);
        v = 99;
        ck_assert(!json_get_int64(o, "f", &v));
        ck_assert(!json_get_int64(o, "bigd", &v)); /* a double past 2^53 is not trusted */
        ck_assert(!json_get_int64(o, "s", &v));
        ck_assert(!json_get_int64(o, "n", &v));
        ck_assert(!json_get_int64(o, "missing", &v));
        ck_assert(!json_get_int64(NULL, "i", &v));
        ck_assert_int_eq(v, 99); /* untouched when false */
        json_object_put(o);
}
END_TEST

START_TEST(add_helpers) {
        json_object *o = json_object_new_object();
        ck_assert_int_eq(json_add_string(o, "s", "v"), 0);
        ck_assert_int_eq(json_add_string(o, "ns", NULL), 0);
        ck_assert_int_eq(json_add_int(o, "i", INT64_MIN), 0);
        ck_assert_int_eq(json_add_bool(o, "b", false), 0);
        ck_assert_int_eq(json_add_null(o, "z"), 0);
        ck_assert_int_eq(json_add(o, "o", json_object_new_object()), 0);
        ck_assert_str_eq(json_to_line(o, NULL),
                         "{\"s\":\"v\",\"ns\":null,\"i\":-9223372036854775808,\"b\":false,\"z\":null,\"o\":{}}");
        /* adding a key again replaces it, in place */
        ck_assert_int_eq(json_add_int(o, "s", 1), 0);
        ck_assert_str_eq(json_to_line(o, NULL),
                         "{\"s\":1,\"ns\":null,\"i\":-9223372036854775808,\"b\":false,\"z\":null,\"o\":{}}");
        json_object_put(o);
}
END_TEST

/* ---- checks ---- */

START_TEST(string_checks) {
        json_object *nul = json_object_new_string_len("a\0b", 3), *lead = json_object_new_string_len("\0", 1),
                    *plain = json_object_new_string("abc"), *empty = json_object_new_string(""),
                    *num = json_object_new_int(1), *obj = json_object_new_object();
        ck_assert(json_string_has_nul(nul));
        ck_assert(json_string_has_nul(lead));
        ck_assert(!json_string_has_nul(plain));
        ck_assert(!json_string_has_nul(empty));
        ck_assert(!json_string_has_nul(num));
        ck_assert(!json_string_has_nul(NULL));
        ck_assert(json_is_nonempty_string(plain));
        ck_assert(!json_is_nonempty_string(empty));
        ck_assert(!json_is_nonempty_string(nul));
        ck_assert(!json_is_nonempty_string(lead));
        ck_assert(!json_is_nonempty_string(num));
        ck_assert(!json_is_nonempty_string(NULL));
        ck_assert(json_is_object(obj));
        ck_assert(!json_is_object(NULL));
        ck_assert(!json_is_object(plain));
        json_object *arr = json_object_new_array();
        ck_assert(!json_is_object(arr));
        json_object_put(arr);
        json_object_put(nul);
        json_object_put(lead);
        json_object_put(plain);
        json_object_put(empty);
        json_object_put(num);
        json_object_put(obj);
}
END_TEST

static const struct {
        const char *text;
        bool safe;
        int64_t value;
} integers[] = {
        {"0", true, 0},
        {"-0", true, 0},
        {"1.0", true, 1},
        {"-5", true, -5},
        {"9007199254740991", true, 9007199254740991LL},
        {"-9007199254740991", true, -9007199254740991LL},
        {"9007199254740992", false, 0},
        {"-9007199254740992", false, 0},
        {"9007199254740991.0", true, 9007199254740991LL},
        {"9007199254740992.0", false, 0},
        {"1e3", true, 1000},
        {"1.5", false, 0},
        {"1e400", false, 0},     /* an infinite double */
        {"18446744073709551615", false, 0},
        {"\"1\"", false, 0},
        {"true", false, 0},
        {"null", false, 0},
        {"[1]", false, 0},
};

START_TEST(safe_integer) {
        json_object *v = NULL;
        ck_assert_int_eq(json_parse_strict(integers[_i].text, strlen(integers[_i].text), &v), 0);
        int64_t got = 12345;
        ck_assert_msg(json_safe_integer(v, &got) == integers[_i].safe, "%s", integers[_i].text);
        ck_assert_int_eq(got, integers[_i].safe ? integers[_i].value : 12345);
        json_object_put(v);
}
END_TEST

START_TEST(copy_is_deep_and_keeps_numbers) {
        json_object *o = json_object_new_object();
        json_add(o, "d", json_new_number(0.1 + 0.2));
        json_add(o, "big", json_new_number(1e21));
        json_object *inner = json_object_new_array();
        json_object_array_add(inner, json_object_new_string("x"));
        json_add(o, "a", inner);
        json_object *c = json_copy(o);
        ck_assert_ptr_nonnull(c);
        ck_assert_ptr_ne(c, o);
        ck_assert_str_eq(json_to_line(c, NULL), "{\"d\":0.30000000000000004,\"big\":1e+21,\"a\":[\"x\"]}");
        /* changing the original leaves the copy alone */
        json_object_array_add(inner, json_object_new_string("y"));
        ck_assert_uint_eq(json_object_array_length(json_get_array(c, "a")), 1);
        json_object_put(o);
        ck_assert_str_eq(json_to_line(c, NULL), "{\"d\":0.30000000000000004,\"big\":1e+21,\"a\":[\"x\"]}");
        json_object_put(c);
        ck_assert_ptr_null(json_copy(NULL));
}
END_TEST

int main(void) {
        Suite *s = suite_create("json-util");
        TCase *tc = tf_tcase(s, "json", NULL, NULL, 0,
                             TF_TESTS(parse_refuses_raw_nul, parse_depth, parse_with_reuses_the_tokener, parse_ex_says_why,
                                      to_line_is_compact, new_number_serializes_as_javascript, get_any_type, typed_gets,
                                      get_int64, add_helpers, string_checks, copy_is_deep_and_keeps_numbers));
        TF_LOOP(tc, parse_accepts, accepted);
        TF_LOOP(tc, parse_refuses, refused);
        TF_LOOP(tc, parse_refuses_what_json_parse_refuses, not_json);
        tcase_add_test(tc, parse_keeps_what_json_parse_takes);
        TF_LOOP(tc, number_format_like_javascript, numbers);
        TF_LOOP(tc, safe_integer, integers);
        return tf_run_suite(s);
}
