/* TOON encoder tests: every rule of @toon-format/toon 2.3.1's encoding the CLI relies on. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "toon.h"
#include "unit.h"
#include "string-util.h"

/* Parse JSON text (json-c keeps key insertion order) and TOON-encode it. */
static char *enc_json(const char *json) {
        json_object *v = NULL;
        /* A trailing newline terminates a bare root number for the tokener. */
        _cleanup_free_ char *text = strdup_printf("%s\n", json);
        ck_assert_int_eq(json_parse_strict(text, strlen(text), &v), 0);
        char *s = toon_encode(v);
        ck_assert_ptr_nonnull(s);
        json_object_put(v);
        return s;
}

#define ASSERT_TOON(json, expected)                                   \
        do {                                                          \
                _cleanup_free_ char *_s = enc_json(json);             \
                ck_assert_str_eq(_s, expected);                       \
        } while (0)

/* A one-key object {"v": <string>} so the string sits in a key: value slot. */
static char *enc_string_field(const char *s) {
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object_object_add(o, "v", json_object_new_string(s));
        char *r = toon_encode(o);
        ck_assert_ptr_nonnull(r);
        return r;
}

#define ASSERT_FIELD(str, expected_value)                                  \
        do {                                                               \
                _cleanup_free_ char *_s = enc_string_field(str);           \
                ck_assert_str_eq(_s, "v: " expected_value);                \
        } while (0)

START_TEST(test_spec_list_example) {
        ASSERT_TOON("{\"counts\":{\"queued\":0,\"running\":0,\"done\":0,\"crashed\":1,\"cancelled\":0,\"unknown\":0},"
                    "\"tasks\":[{\"id\":\"oc_mx3b8o4p_7eeb1f07\",\"status\":\"crashed\",\"model\":\"prov/model-x\","
                    "\"startedAt\":\"2026-11-30T13:35:06.026Z\",\"failureReason\":\"pi_boot_failure\"}]}",
                    "counts:\n"
                    "  queued: 0\n"
                    "  running: 0\n"
                    "  done: 0\n"
                    "  crashed: 1\n"
                    "  cancelled: 0\n"
                    "  unknown: 0\n"
                    "tasks[1]{id,status,model,startedAt,failureReason}:\n"
                    "  oc_mx3b8o4p_7eeb1f07,crashed,prov/model-x,\"2026-11-30T13:35:06.026Z\",pi_boot_failure");
}
END_TEST

START_TEST(test_spec_list_uniform_without_failure_reason) {
        ASSERT_TOON("{\"tasks\":[{\"id\":\"a\",\"status\":\"done\",\"model\":\"m\",\"startedAt\":\"2026-01-01T00:00:00.000Z\"},"
                    "{\"id\":\"b\",\"status\":\"running\",\"model\":\"m\",\"startedAt\":\"2026-01-01T00:00:01.000Z\"}]}",
                    "tasks[2]{id,status,model,startedAt}:\n"
                    "  a,done,m,\"2026-01-01T00:00:00.000Z\"\n"
                    "  b,running,m,\"2026-01-01T00:00:01.000Z\"");
}
END_TEST

START_TEST(test_spec_list_mixed_key_sets_is_list_form) {
        ASSERT_TOON("{\"tasks\":[{\"id\":\"a\",\"status\":\"crashed\",\"failureReason\":\"x\"},"
                    "{\"id\":\"b\",\"status\":\"done\"}]}",
                    "tasks[2]:\n"
                    "  - id: a\n"
                    "    status: crashed\n"
                    "    failureReason: x\n"
                    "  - id: b\n"
                    "    status: done");
}
END_TEST

START_TEST(test_tabular_row_key_order_follows_first_row) {
        ASSERT_TOON("{\"r\":[{\"a\":1,\"b\":2},{\"b\":4,\"a\":3}]}",
                    "r[2]{a,b}:\n  1,2\n  3,4");
}
END_TEST

START_TEST(test_tabular_requires_primitive_values) {
        ASSERT_TOON("{\"r\":[{\"a\":1,\"b\":{\"c\":2}},{\"a\":3,\"b\":{\"c\":4}}]}",
                    "r[2]:\n"
                    "  - a: 1\n"
                    "    b:\n"
                    "      c: 2\n"
                    "  - a: 3\n"
                    "    b:\n"
                    "      c: 4");
        ASSERT_TOON("{\"r\":[{\"a\":[1]},{\"a\":[2]}]}",
                    "r[2]:\n  - a[1]: 1\n  - a[1]: 2");
}
END_TEST

START_TEST(test_tabular_null_and_quoted_cells) {
        ASSERT_TOON("{\"r\":[{\"a\":null,\"b\":\"x,y\"},{\"a\":true,\"b\":\"\"}]}",
                    "r[2]{a,b}:\n  null,\"x,y\"\n  true,\"\"");
}
END_TEST

START_TEST(test_primitive_field_and_nested_object) {
        ASSERT_TOON("{\"a\":1,\"b\":{\"c\":\"x\",\"d\":{\"e\":false}},\"f\":null}",
                    "a: 1\nb:\n  c: x\n  d:\n    e: false\nf: null");
}
END_TEST

START_TEST(test_empty_object_field) {
        ASSERT_TOON("{\"a\":{},\"b\":1}", "a:\nb: 1");
}
END_TEST

START_TEST(test_empty_array_field) {
        ASSERT_TOON("{\"a\":[],\"b\":{\"c\":[]}}", "a: []\nb:\n  c: []");
}
END_TEST

START_TEST(test_primitive_arrays) {
        ASSERT_TOON("{\"tags\":[\"a\",\"b c\",\"c,d\",1,true,null]}",
                    "tags[6]: a,b c,\"c,d\",1,true,null");
        ASSERT_TOON("[1,2,3]", "[3]: 1,2,3");
        ASSERT_TOON("{\"next\":[\"Run taskferry list --limit 40 for all 40 tasks\"]}",
                    "next[1]: Run taskferry list --limit 40 for all 40 tasks");
}
END_TEST

START_TEST(test_array_of_primitive_arrays) {
        ASSERT_TOON("{\"pairs\":[[1,2],[\"a\"],[]]}",
                    "pairs[3]:\n  - [2]: 1,2\n  - [1]: a\n  - [0]:");
        ASSERT_TOON("[[1],[2,3]]", "[2]:\n  - [1]: 1\n  - [2]: 2,3");
}
END_TEST

START_TEST(test_mixed_array_list_form) {
        ASSERT_TOON("{\"m\":[1,{\"a\":1,\"b\":2},\"text\",[1,2],[{\"x\":1}]]}",
                    "m[5]:\n"
                    "  - 1\n"
                    "  - a: 1\n"
                    "    b: 2\n"
                    "  - text\n"
                    "  - [2]: 1,2\n"
                    "  - [1]:\n"
                    "    - x: 1");
}
END_TEST

START_TEST(test_list_item_first_field_nested_object) {
        ASSERT_TOON("{\"items\":[{\"a\":{\"b\":1,\"c\":2},\"d\":3},{\"z\":1}]}",
                    "items[2]:\n"
                    "  - a:\n"
                    "      b: 1\n"
                    "      c: 2\n"
                    "    d: 3\n"
                    "  - z: 1");
}
END_TEST

START_TEST(test_list_item_first_field_empty_object) {
        ASSERT_TOON("{\"items\":[{\"a\":{},\"d\":3},{\"q\":1,\"r\":2}]}",
                    "items[2]:\n"
                    "  - a:\n"
                    "    d: 3\n"
                    "  - q: 1\n"
                    "    r: 2");
}
END_TEST

START_TEST(test_list_item_first_field_primitive_array) {
        ASSERT_TOON("{\"items\":[{\"tags\":[\"x\",\"y\"],\"n\":1},{\"n\":2}]}",
                    "items[2]:\n"
                    "  - tags[2]: x,y\n"
                    "    n: 1\n"
                    "  - n: 2");
}
END_TEST

START_TEST(test_list_item_first_field_empty_array) {
        ASSERT_TOON("{\"items\":[{\"tags\":[],\"n\":1},{\"n\":2}]}",
                    "items[2]:\n"
                    "  - tags: []\n"
                    "    n: 1\n"
                    "  - n: 2");
}
END_TEST

START_TEST(test_list_item_first_field_tabular_array) {
        ASSERT_TOON("{\"items\":[{\"rows\":[{\"x\":1,\"y\":2},{\"x\":3,\"y\":4}],\"n\":5},{\"n\":6}]}",
                    "items[2]:\n"
                    "  - rows[2]{x,y}:\n"
                    "      1,2\n"
                    "      3,4\n"
                    "    n: 5\n"
                    "  - n: 6");
}
END_TEST

START_TEST(test_list_item_first_field_list_array) {
        ASSERT_TOON("{\"items\":[{\"rows\":[{\"x\":1},{\"y\":2}],\"n\":5},{\"n\":6}]}",
                    "items[2]:\n"
                    "  - rows[2]:\n"
                    "      - x: 1\n"
                    "      - y: 2\n"
                    "    n: 5\n"
                    "  - n: 6");
}
END_TEST

START_TEST(test_list_item_rest_fields_nested) {
        ASSERT_TOON("{\"items\":[{\"a\":1,\"b\":{\"c\":[1,2]},\"d\":[{\"e\":1},{\"e\":2}]},{\"a\":2}]}",
                    "items[2]:\n"
                    "  - a: 1\n"
                    "    b:\n"
                    "      c[2]: 1,2\n"
                    "    d[2]{e}:\n"
                    "      1\n"
                    "      2\n"
                    "  - a: 2");
}
END_TEST

START_TEST(test_empty_object_list_item) {
        ASSERT_TOON("{\"items\":[{},{\"a\":1}]}", "items[2]:\n  -\n  - a: 1");
        ASSERT_TOON("[{}]", "[1]:\n  -");
}
END_TEST

START_TEST(test_root_values) {
        ASSERT_TOON("{}", "");
        ASSERT_TOON("[]", "[]");
        ASSERT_TOON("\"hello world\"", "hello world");
        ASSERT_TOON("\"\"", "\"\"");
        ASSERT_TOON("\"a,b\"", "\"a,b\"");
        ASSERT_TOON("42", "42");
        ASSERT_TOON("null", "null");
        ASSERT_TOON("true", "true");
        ASSERT_TOON("false", "false");
        _cleanup_free_ char *s = toon_encode(NULL);
        ck_assert_str_eq(s, "null");
}
END_TEST

START_TEST(test_root_array_of_objects) {
        ASSERT_TOON("[{\"a\":1},{\"a\":2}]", "[2]{a}:\n  1\n  2");
        ASSERT_TOON("[{\"a\":1},{\"b\":2}]", "[2]:\n  - a: 1\n  - b: 2");
}
END_TEST

START_TEST(test_numbers) {
        ASSERT_TOON("{\"a\":1e21,\"b\":1e-7,\"c\":1.5,\"d\":1.0,\"e\":-2,\"f\":100,\"g\":123456789012}",
                    "a: 1e+21\nb: 1e-7\nc: 1.5\nd: 1\ne: -2\nf: 100\ng: 123456789012");
        /* integers from 2^63 to 2^64-1 (json-c holds them unsigned) print as
         * they are, not capped at 2^63-1 (found by the fuzz target's TOON reader) */
        ASSERT_TOON("{\"u\":9223372036854775808,\"m\":18446744073709551615,\"i\":9223372036854775807}",
                    "u: 9223372036854775808\nm: 18446744073709551615\ni: 9223372036854775807");
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object_object_add(o, "sum", json_object_new_double(0.1 + 0.2));
        json_object_object_add(o, "negzero", json_object_new_double(-0.0));
        json_object_object_add(o, "nan", json_object_new_double(NAN));
        json_object_object_add(o, "inf", json_object_new_double(INFINITY));
        json_object_object_add(o, "ninf", json_object_new_double(-INFINITY));
        json_object_object_add(o, "big", json_object_new_int64(INT64_C(9007199254740993)));
        json_object_object_add(o, "js", json_new_number(0.000001));
        json_object_object_add(o, "small", json_new_number(1.5e-10));
        _cleanup_free_ char *s = toon_encode(o);
        ck_assert_str_eq(s, "sum: 0.30000000000000004\nnegzero: 0\nnan: null\ninf: null\nninf: null\n"
                            "big: 9007199254740993\njs: 0.000001\nsmall: 1.5e-10");
}
END_TEST

START_TEST(test_quoting_rules) {
        /* quoted */
        ASSERT_FIELD("", "\"\"");
        ASSERT_FIELD(" lead", "\" lead\"");
        ASSERT_FIELD("trail ", "\"trail \"");
        ASSERT_FIELD("\xc2\xa0nbsp", "\"\xc2\xa0nbsp\"");       /* U+00A0: JS trim() whitespace */
        ASSERT_FIELD("x\xe3\x80\x80", "\"x\xe3\x80\x80\"");     /* U+3000 at the end */
        ASSERT_FIELD("\xef\xbb\xbf" "bom", "\"\xef\xbb\xbf" "bom\""); /* U+FEFF */
        ASSERT_FIELD("true", "\"true\"");
        ASSERT_FIELD("false", "\"false\"");
        ASSERT_FIELD("null", "\"null\"");
        ASSERT_FIELD("123", "\"123\"");
        ASSERT_FIELD("-1.5", "\"-1.5\"");
        ASSERT_FIELD("1e5", "\"1e5\"");
        ASSERT_FIELD("1E+5", "\"1E+5\"");
        ASSERT_FIELD("2.5e-3", "\"2.5e-3\"");
        ASSERT_FIELD("007", "\"007\"");
        ASSERT_FIELD("0", "\"0\"");
        ASSERT_FIELD("a:b", "\"a:b\"");
        ASSERT_FIELD("say \"hi\"", "\"say \\\"hi\\\"\"");
        ASSERT_FIELD("back\\slash", "\"back\\\\slash\"");
        ASSERT_FIELD("[x]", "\"[x]\"");
        ASSERT_FIELD("a]", "\"a]\"");
        ASSERT_FIELD("{y}", "\"{y}\"");
        ASSERT_FIELD("a}", "\"a}\"");
        ASSERT_FIELD("a,b", "\"a,b\"");
        ASSERT_FIELD("-dash", "\"-dash\"");
        ASSERT_FIELD("-", "\"-\"");
        ASSERT_FIELD("--full", "\"--full\"");
        ASSERT_FIELD("2026-11-30T13:35:06.026Z", "\"2026-11-30T13:35:06.026Z\"");
        /* bare */
        ASSERT_FIELD("a b", "a b");
        ASSERT_FIELD("#hash", "#hash");
        ASSERT_FIELD("a|b", "a|b");
        ASSERT_FIELD("<x>", "<x>");
        ASSERT_FIELD("/p/q", "/p/q");
        ASSERT_FIELD(".", ".");
        ASSERT_FIELD("~/x", "~/x");
        ASSERT_FIELD("h\xc3\xa9llo \xe2\x9c\x93", "h\xc3\xa9llo \xe2\x9c\x93");
        ASSERT_FIELD("1.", "1.");
        ASSERT_FIELD(".5", ".5");
        ASSERT_FIELD("+1", "+1");
        ASSERT_FIELD("True", "True");
        ASSERT_FIELD("NULL", "NULL");
        ASSERT_FIELD("1.2.3", "1.2.3");
        ASSERT_FIELD("e5", "e5");
        ASSERT_FIELD("1e", "1e");
        ASSERT_FIELD("0x10", "0x10");
        ASSERT_FIELD("prov/model-x", "prov/model-x");
        ASSERT_FIELD("a-b", "a-b");
        ASSERT_FIELD("it's", "it's");
        ASSERT_FIELD("x\x7fy", "x\x7fy"); /* DEL is not a C0 control */
}
END_TEST

START_TEST(test_escapes) {
        ASSERT_FIELD("a\nb", "\"a\\nb\"");
        ASSERT_FIELD("a\rb", "\"a\\rb\"");
        ASSERT_FIELD("a\tb", "\"a\\tb\"");
        ASSERT_FIELD("a\x01z", "\"a\\u0001z\"");
        ASSERT_FIELD("a\x1f", "\"a\\u001f\"");
        ASSERT_FIELD("\x1b[0m", "\"\\u001b[0m\"");
        ASSERT_FIELD("\xc2\x9b" "31m", "\"\\u009b31m\""); /* a C1 control (CSI) in UTF-8 */
        ASSERT_FIELD("caf\xc3\xa9", "caf\xc3\xa9");
        ASSERT_FIELD("\\\"\n", "\"\\\\\\\"\\n\"");
        /* A string with an embedded NUL is quoted and escaped in full. */
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object_object_add(o, "v", json_object_new_string_len("a\0b", 3));
        _cleanup_free_ char *s = toon_encode(o);
        ck_assert_str_eq(s, "v: \"a\\u0000b\"");
}
END_TEST

START_TEST(test_keys) {
        ASSERT_TOON("{\"--full\":\"include all\",\"weird key\":1,\"a.b\":2,\"_x\":3,\"1a\":4,\"\":5,\"k\\\"q\":6,\"a-b\":7,\"A9_\":8}",
                    "\"--full\": include all\n\"weird key\": 1\na.b: 2\n_x: 3\n\"1a\": 4\n\"\": 5\n\"k\\\"q\": 6\n\"a-b\": 7\nA9_: 8");
        /* Quoted keys also in array headers and tabular field lists. */
        ASSERT_TOON("{\"my list\":[1],\"t\":[{\"a b\":1,\"c\":2}]}",
                    "\"my list\"[1]: 1\nt[1]{\"a b\",c}:\n  1,2");
}
END_TEST

START_TEST(test_error_object) {
        ASSERT_TOON("{\"error\":\"unknown command: bogus\",\"help\":\"Run `taskferry --help` to see available commands\"}",
                    "error: \"unknown command: bogus\"\nhelp: Run `taskferry --help` to see available commands");
}
END_TEST

START_TEST(test_help_object_shape) {
        ASSERT_TOON("{\"command\":\"cancel\",\"usage\":\"taskferry cancel <id> [--grace-ms <number>]\","
                    "\"options\":{\"--grace-ms <number>\":\"milliseconds before SIGKILL, default 5000\"},"
                    "\"examples\":[\"taskferry cancel <id>\",\"taskferry cancel <id> --grace-ms 10000\"]}",
                    "command: cancel\n"
                    "usage: \"taskferry cancel <id> [--grace-ms <number>]\"\n"
                    "options:\n"
                    "  \"--grace-ms <number>\": \"milliseconds before SIGKILL, default 5000\"\n"
                    "examples[2]: taskferry cancel <id>,taskferry cancel <id> --grace-ms 10000");
}
END_TEST

START_TEST(test_deep_nesting_indentation) {
        ASSERT_TOON("{\"a\":{\"b\":{\"c\":[{\"d\":1},{\"e\":[1,2]}]}}}",
                    "a:\n  b:\n    c[2]:\n      - d: 1\n      - e[2]: 1,2");
}
END_TEST

TF_MAIN("toon", "encode", NULL, NULL, 0, test_spec_list_example, test_spec_list_uniform_without_failure_reason,
        test_spec_list_mixed_key_sets_is_list_form, test_tabular_row_key_order_follows_first_row,
        test_tabular_requires_primitive_values, test_tabular_null_and_quoted_cells,
        test_primitive_field_and_nested_object, test_empty_object_field, test_empty_array_field, test_primitive_arrays,
        test_array_of_primitive_arrays, test_mixed_array_list_form, test_list_item_first_field_nested_object,
        test_list_item_first_field_empty_object, test_list_item_first_field_primitive_array,
        test_list_item_first_field_empty_array, test_list_item_first_field_tabular_array,
        test_list_item_first_field_list_array, test_list_item_rest_fields_nested, test_empty_object_list_item,
        test_root_values, test_root_array_of_objects, test_numbers, test_quoting_rules, test_escapes, test_keys,
        test_error_object, test_help_object_shape, test_deep_nesting_indentation)
