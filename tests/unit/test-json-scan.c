/* json_scan: which texts are one JSON value (RFC 8259, as JavaScript's
 * JSON.parse reads them), where the named top-level keys' values are, and
 * that it agrees with json_parse_strict (json-c and our checks on top) on
 * every line of the recorded logs and on many mutations of them. */

#include <check.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "json-scan.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"
#include "unit.h"

static JsonScanResult scan(const char *text) {
        JsonScanValue v[1];
        static const char *const keys[] = {"k", NULL};
        JsonScanType top;
        return json_scan(text, strlen(text), keys, &top, v);
}

static const char *const valid[] = {
        "{}", "[]", " {} ", "\t\r\n[1]\n", "0", "-0", "-0.0e-0", "1E+9", "123.456", "\"\"", "\"\\u0000\"",
        "\"\\ud800\"", "\"\\/\\b\\f\\n\\r\\t\\\"\\\\\"", "\"\x7f\"", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"", "true",
        "false", "null", "{\"a\":{\"b\":[1,{\"c\":null}]},\"d\":\"e\"}", "[[],[[]],{}]",
        "{\"a\":1,\"a\":2}",
};

static const char *const invalid[] = {
        "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{,}", "[,1]", "01", "1.", ".5", "+1", "-", "1e", "1e+", "0x1",
        "NaN", "Infinity", "-Infinity", "tru", "nul", "True", "'a'", "{'a':1}", "{a:1}", "\"", "\"\\x\"",
        "\"\\u12\"", "\"\\u12g4\"", "\"\x01\"", "\"a\nb\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
        "\"\xe2\x82\"", "\"\x80\"", "{} {}", "1 2", "[1] x", "{\"a\" 1}", "{\"a\":}", "[1 2]", "/* c */ 1",
        "1 // c", "\xef\xbb\xbf{}",
};

START_TEST(scan_valid) { ck_assert_msg(scan(valid[_i]) == JSON_SCAN_VALID, "%s", valid[_i]); }
END_TEST

START_TEST(scan_invalid) { ck_assert_msg(scan(invalid[_i]) == JSON_SCAN_INVALID, "%s", invalid[_i]); }
END_TEST

START_TEST(scan_nul_is_invalid) {
        ck_assert_int_eq(json_scan("\"a\0b\"", 5, NULL, NULL, NULL), JSON_SCAN_INVALID);
        ck_assert_int_eq(json_scan("{}\0", 3, NULL, NULL, NULL), JSON_SCAN_INVALID);
}
END_TEST

/* n nested containers (objects and arrays in turn, from the top) around
 * a 1, as written; cut: the last closing bracket left off. malloc'd. */
static char *nested(size_t n, bool cut) {
        char *t = malloc(8 * n + 2);
        ck_assert_ptr_nonnull(t);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                if (i % 2 == 0) {
                        memcpy(t + k, "{\"a\":", 5);
                        k += 5;
                } else
                        t[k++] = '[';
        }
        t[k++] = '1';
        for (size_t i = n; i-- > 0;) t[k++] = i % 2 == 0 ? '}' : ']';
        if (cut) k--;
        t[k] = 0;
        return t;
}

START_TEST(scan_depth) {
        /* deeper than it follows: too deep, valid or not, as for json-c
         * with the same bound */
        json_tokener *tok = json_strict_tokener_new_depth(JSON_SCAN_DEPTH_MAX);
        ck_assert_ptr_nonnull(tok);
        for (size_t n = JSON_SCAN_DEPTH_MAX - 2; n <= JSON_SCAN_DEPTH_MAX + 2; n++)
                for (int cut = 0; cut <= 1; cut++) {
                        _cleanup_free_ char *t = nested(n, cut);
                        /* the 1 is at depth n + 1 */
                        JsonScanResult want = n + 1 > JSON_SCAN_DEPTH_MAX ? JSON_SCAN_TOO_DEEP
                                              : cut                    ? JSON_SCAN_INVALID
                                                                       : JSON_SCAN_VALID;
                        ck_assert_msg(scan(t) == want, "depth %zu%s: %d", n, cut ? " (cut)" : "", scan(t));
                        json_object *o = NULL;
                        bool parsed = json_parse_strict_with(tok, t, strlen(t), &o) >= 0;
                        json_object_put(o);
                        ck_assert_msg(parsed == (want == JSON_SCAN_VALID), "depth %zu%s: json-c %d", n,
                                      cut ? " (cut)" : "", parsed);
                }
        json_tokener_free(tok);
        /* empty containers count as deep as they are */
        for (size_t n = JSON_SCAN_DEPTH_MAX; n <= JSON_SCAN_DEPTH_MAX + 1; n++) {
                _cleanup_free_ char *t = malloc(2 * n + 3);
                ck_assert_ptr_nonnull(t);
                memset(t, '[', n - 1);
                memcpy(t + n - 1, "{ }", 3);
                memset(t + n + 2, ']', n - 1);
                t[2 * n + 1] = 0;
                ck_assert_int_eq(scan(t), n > JSON_SCAN_DEPTH_MAX ? JSON_SCAN_TOO_DEEP : JSON_SCAN_VALID);
        }
        /* far deeper than the bound: no stack to speak of, and an answer */
        size_t huge = (size_t) 1 << 20;
        char *t = malloc(2 * huge + 1);
        ck_assert_ptr_nonnull(t);
        memset(t, '[', huge);
        memset(t + huge, ']', huge);
        t[2 * huge] = 0;
        ck_assert_int_eq(scan(t), JSON_SCAN_TOO_DEEP);
        free(t);
        /* invalid before the depth is reached: invalid */
        ck_assert_int_eq(scan("[[1,]"), JSON_SCAN_INVALID);
}
END_TEST

START_TEST(scan_unsure) {
        /* a top-level key with an escape might be a named one */
        ck_assert_int_eq(scan("{\"\\u006b\":1}"), JSON_SCAN_UNSURE);
        ck_assert_int_eq(scan("{\"x\\n\":1}"), JSON_SCAN_UNSURE);
        /* below the top level, escaped keys are no matter */
        ck_assert_int_eq(scan("{\"a\":{\"\\u006b\":1}}"), JSON_SCAN_VALID);
}
END_TEST

START_TEST(scan_spans) {
        static const char *const keys[] = {"sessionID", "type", "part", "n", NULL};
        JsonScanValue v[4];
        JsonScanType top = JSON_SCAN_NONE;
        const char *t = " {\"type\":\"a\\\"b\",\"part\":{\"x\":[1,2]},\"n\":-1.5e3,\"sessionID\":\"s1\",\"sessionID\":\"s2\"} ";
        ck_assert_int_eq(json_scan(t, strlen(t), keys, &top, v), JSON_SCAN_VALID);
        ck_assert_int_eq(top, JSON_SCAN_OBJECT);
        ck_assert_int_eq(v[0].type, JSON_SCAN_STRING);
        ck_assert_str_eq(strndupa(t + v[0].offset, v[0].len), "s2"); /* the last of duplicates */
        ck_assert(!v[0].escaped);
        ck_assert_int_eq(v[1].type, JSON_SCAN_STRING);
        ck_assert_str_eq(strndupa(t + v[1].offset, v[1].len), "a\\\"b");
        ck_assert(v[1].escaped);
        ck_assert_int_eq(v[2].type, JSON_SCAN_OBJECT);
        ck_assert_str_eq(strndupa(t + v[2].offset, v[2].len), "{\"x\":[1,2]}");
        ck_assert_int_eq(v[3].type, JSON_SCAN_NUMBER);
        ck_assert_str_eq(strndupa(t + v[3].offset, v[3].len), "-1.5e3");

        /* nested keys of the same name are not the top-level ones */
        t = "{\"part\":{\"sessionID\":\"inner\"}}";
        ck_assert_int_eq(json_scan(t, strlen(t), keys, &top, v), JSON_SCAN_VALID);
        ck_assert_int_eq(v[0].type, JSON_SCAN_NONE);
        ck_assert_int_eq(v[1].type, JSON_SCAN_NONE);
        /* no object at the top: no keys */
        t = "[{\"sessionID\":\"x\"}]";
        ck_assert_int_eq(json_scan(t, strlen(t), keys, &top, v), JSON_SCAN_VALID);
        ck_assert_int_eq(top, JSON_SCAN_ARRAY);
        ck_assert_int_eq(v[0].type, JSON_SCAN_NONE);
        t = "{\"n\":true,\"type\":null,\"part\":false}";
        ck_assert_int_eq(json_scan(t, strlen(t), keys, &top, v), JSON_SCAN_VALID);
        ck_assert_int_eq(v[1].type, JSON_SCAN_NULL);
        ck_assert_int_eq(v[2].type, JSON_SCAN_FALSE);
        ck_assert_int_eq(v[3].type, JSON_SCAN_TRUE);
}
END_TEST

/* json_scan and json_parse_strict on one text: the same verdict (unless
 * the scan is unsure), and for an object the same sessionID. */
static void assert_agrees(const char *text, size_t len) {
        static const char *const keys[] = {"sessionID", NULL};
        JsonScanValue v[1];
        JsonScanType top;
        JsonScanResult k = json_scan(text, len, keys, &top, v);
        if (k == JSON_SCAN_UNSURE) return;
        json_tokener *tok = json_strict_tokener_new_depth(JSON_SCAN_DEPTH_MAX);
        ck_assert_ptr_nonnull(tok);
        json_object *o = NULL;
        bool parsed = json_parse_strict_with(tok, text, len, &o) >= 0;
        json_tokener_free(tok);
        ck_assert_msg(parsed == (k == JSON_SCAN_VALID), "scan %d, json-c %d: %.*s", k, parsed, (int) len, text);
        if (parsed && top == JSON_SCAN_OBJECT && v[0].type == JSON_SCAN_STRING && !v[0].escaped) {
                const char *sid = json_get_string(o, "sessionID");
                ck_assert_ptr_nonnull(sid);
                ck_assert_msg(strlen(sid) == v[0].len && memcmp(sid, text + v[0].offset, v[0].len) == 0, "%.*s",
                              (int) len, text);
        }
        json_object_put(o);
}

START_TEST(scan_agrees_with_json_c) {
        for (size_t i = 0; i < ELEMENTSOF(valid); i++) assert_agrees(valid[i], strlen(valid[i]));
        for (size_t i = 0; i < ELEMENTSOF(invalid); i++) assert_agrees(invalid[i], strlen(invalid[i]));

        glob_t g = {0};
        ck_assert_int_eq(glob(TASKFERRY_FIXTURES_DIR "/real/*.stdout.ndjson", 0, NULL, &g), 0);
        ck_assert_int_eq(glob(TASKFERRY_FIXTURES_DIR "/synthetic/*.stdout.ndjson", GLOB_APPEND, NULL, &g), 0);
        static const char specials[] = "\"\\{}[],:0-.eE+ \x01\x7f\x80\xc3\xedu/";
        uint64_t seed = 0x2545F4914F6CDD1DULL;
        size_t lines = 0;
        for (size_t f = 0; f < g.gl_pathc; f++) {
                _cleanup_free_ char *text = NULL;
                size_t len = 0;
                ck_assert_int_eq(read_file(g.gl_pathv[f], (size_t) 16 << 20, &text, &len), 0);
                for (char *p = text, *nl; p < text + len; p = nl + 1) {
                        nl = memchr(p, '\n', (size_t) (text + len - p));
                        if (!nl) nl = text + len;
                        size_t l = (size_t) (nl - p);
                        assert_agrees(p, l);
                        lines++;
                        if (l == 0) continue;
                        /* 200 mutations of each line: one to three edits each */
                        _cleanup_free_ char *m = malloc(l + 4);
                        ck_assert_ptr_nonnull(m);
                        for (int round = 0; round < 200; round++) {
                                memcpy(m, p, l);
                                size_t ml = l;
                                int edits = 1 + round % 3;
                                for (int e = 0; e < edits && ml > 0; e++) {
                                        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                                        size_t at = (size_t) (seed >> 20) % ml;
                                        char c = specials[(seed >> 8) % (sizeof specials - 1)];
                                        switch ((seed >> 4) % 4) {
                                        case 0: m[at] = c; break;
                                        case 1: memmove(m + at, m + at + 1, ml - at - 1); ml--; break;
                                        case 2: m[at] ^= (char) (1u << ((seed >> 40) % 8)); break;
                                        default:
                                                memmove(m + at + 1, m + at, ml - at);
                                                m[at] = c;
                                                ml++;
                                        }
                                }
                                assert_agrees(m, ml);
                        }
                }
        }
        ck_assert_uint_gt(lines, 100);
        globfree(&g);
}
END_TEST

int main(void) {
        Suite *s = suite_create("json-scan");
        TCase *tc = tf_tcase(s, "scan", NULL, NULL, 240,
                             TF_TESTS(scan_nul_is_invalid, scan_depth, scan_unsure, scan_spans, scan_agrees_with_json_c));
        TF_LOOP(tc, scan_valid, valid);
        TF_LOOP(tc, scan_invalid, invalid);
        return tf_run_suite(s);
}
