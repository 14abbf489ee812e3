/* summary.c's pure parts (summary.h): the excerpt (whole log
 * up to 96 KiB, else head + omitted marker + tail), the delta and its cap,
 * the snapshot document and its private file, the models listing check and
 * the env fingerprint. Files under $TASKFERRY_TEST_TMPDIR. */

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "features/summary.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"
#include "utf8.h"

static char *dir;

static void setup(void) { dir = tf_tmpdir_new("tf-summary"); }

static void teardown(void) { dir = tf_tmpdir_free(dir); }

static char *text_line(const char *mid, const char *text) {
        return strdup_printf("{\"type\":\"text\",\"part\":{\"type\":\"text\",\"messageID\":\"%s\",\"text\":\"%s\"}}\n", mid, text);
}

START_TEST(excerpt_small_log) {
        char *a = text_line("m1", "Hello"), *b = text_line("m1", " world");
        const char *tool = "{\"type\":\"tool_use\",\"part\":{\"type\":\"tool\",\"tool\":\"read\",\"state\":{\"input\":\"x.c\",\"output\":\"\"}}}\n"
                           "not json\n";
        char *log = strdup_printf("%s%s%s", a, tool, b);
        char *p = tf_put(dir, "small.ndjson", log, strlen(log));
        char *n = NULL;
        uint64_t lb = 0, ib = 0;
        ck_assert_int_eq(summary_excerpt(p, &n, &lb, &ib), 0);
        ck_assert_str_eq(n, "Hello world\n\n[tool:read] x.c");
        ck_assert_uint_eq(lb, strlen(log));
        ck_assert_uint_eq(ib, strlen(log));
        free(n);
        /* a missing log: nothing */
        ck_assert_int_eq(summary_excerpt("/nonexistent/x", &n, &lb, &ib), 0);
        ck_assert_str_eq(n, "");
        ck_assert_uint_eq(lb, 0);
        free(n), free(p), free(log), free(a), free(b);
}
END_TEST

START_TEST(excerpt_large_log) {
        /* head text, 200 KiB of filler lines, tail text */
        size_t filler = 200 * 1024;
        char *head = text_line("m1", "beginning"), *tail = text_line("m9", "the end");
        size_t hl = strlen(head), tl = strlen(tail), total = hl + filler + tl;
        char *log = malloc(total + 1);
        memcpy(log, head, hl);
        for (size_t i = 0; i < filler; i++) log[hl + i] = (i % 64 == 63) ? '\n' : 'x';
        memcpy(log + hl + filler, tail, tl);
        log[total] = 0;
        char *p = tf_put(dir, "big.ndjson", log, total);
        char *n = NULL;
        uint64_t lb = 0, ib = 0;
        ck_assert_int_eq(summary_excerpt(p, &n, &lb, &ib), 0);
        char *want = strdup_printf("beginning\n\n[%zu bytes omitted from source log]\n\nthe end", total - SUMMARY_INPUT_BYTES);
        ck_assert_str_eq(n, want);
        ck_assert_uint_eq(lb, total);
        ck_assert_uint_eq(ib, SUMMARY_INPUT_BYTES);
        free(n), free(want), free(p), free(log), free(head), free(tail);
}
END_TEST

START_TEST(delta_and_cap) {
        char *a = text_line("m1", "old"), *b = text_line("m2", "new one"), *c = text_line("m2", " more");
        char *log = strdup_printf("%s%s%s", a, b, c);
        char *p = tf_put(dir, "d.ndjson", log, strlen(log));
        char *n = NULL;
        uint64_t lb = 0, ib = 0;
        ck_assert_int_eq(summary_delta(p, strlen(a), &n, &lb, &ib), 0);
        ck_assert_str_eq(n, "new one more");
        ck_assert_uint_eq(lb, strlen(log));
        ck_assert_uint_eq(ib, strlen(log) - strlen(a));
        free(n);
        /* from at or past the end: nothing new */
        ck_assert_int_eq(summary_delta(p, strlen(log), &n, &lb, &ib), 0);
        ck_assert_str_eq(n, "");
        ck_assert_uint_eq(ib, 0);
        free(n);
        /* the first 4000 code points (2-byte ones here) */
        size_t cps = 5000;
        char *big = malloc(cps * 2 + 1);
        for (size_t i = 0; i < cps; i++) big[2 * i] = (char) 0xC3, big[2 * i + 1] = (char) 0xA9;
        big[cps * 2] = 0;
        char *line = text_line("m3", big);
        char *q = tf_put(dir, "cap.ndjson", line, strlen(line));
        ck_assert_int_eq(summary_delta(q, 0, &n, &lb, &ib), 0);
        ck_assert_uint_eq(strlen(n), SUMMARY_DELTA_MAX_CHARS * 2);
        ck_assert_uint_eq(utf8_codepoints(n, strlen(n)), SUMMARY_DELTA_MAX_CHARS);
        free(n), free(q), free(line), free(big), free(p), free(log), free(a), free(b), free(c);
}
END_TEST

START_TEST(snapshot_document) {
        char *s = summary_snapshot_json("oc_a", "running", "Fix it", "2026-12-01T00:00:00.000Z", "did a/b", NULL, false);
        ck_assert_str_eq(s, "{\n"
                            "  \"source\": {\n"
                            "    \"id\": \"oc_a\",\n"
                            "    \"status\": \"running\",\n"
                            "    \"promptPreview\": \"Fix it\",\n"
                            "    \"capturedAt\": \"2026-12-01T00:00:00.000Z\"\n"
                            "  },\n"
                            "  \"narration\": \"did a/b\"\n"
                            "}");
        free(s);
        s = summary_snapshot_json("oc_a", "done", NULL, "t", "n", "before", true);
        json_object *o = NULL;
        ck_assert_int_eq(json_parse_strict(s, strlen(s), &o), 0);
        ck_assert_str_eq(json_get_string(o, "previous_summary"), "before");
        ck_assert(json_get_bool(o, "narration_is_delta", false));
        json_object *pp = NULL;
        ck_assert(json_object_object_get_ex(json_get_object(o, "source"), "promptPreview", &pp) && pp == NULL);
        json_object_put(o);
        free(s);
}
END_TEST

START_TEST(snapshot_file_is_private) {
        mode_t old = umask(0);
        char *p = strdup_printf("%s/s.json", dir);
        ck_assert_int_eq(summary_snapshot_write(p, "{}"), 0);
        struct stat st;
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_int_eq(st.st_mode & 0777, 0600);
        /* never over an existing file, never through a symlink */
        ck_assert_int_eq(summary_snapshot_write(p, "{}"), -EEXIST);
        char *l = strdup_printf("%s/link.json", dir), *target = strdup_printf("%s/elsewhere", dir);
        ck_assert_int_eq(symlink(target, l), 0);
        ck_assert_int_lt(summary_snapshot_write(l, "secret"), 0);
        ck_assert_int_ne(access(target, F_OK), 0);
        umask(old);
        free(p), free(l), free(target);
}
END_TEST

START_TEST(models_listing) {
        const char *listing = "opencode/big-pickle\n  opencode/mimo-v2.5-free  \r\nprov/x\n";
        ck_assert(summary_models_list_has(listing, "opencode/mimo-v2.5-free"));
        ck_assert(summary_models_list_has(listing, "prov/x"));
        ck_assert(!summary_models_list_has(listing, "opencode/mimo"));
        ck_assert(!summary_models_list_has(listing, "prov/x\n"));
        ck_assert(!summary_models_list_has(NULL, "prov/x"));
        ck_assert(!summary_models_list_has("", ""));
}
END_TEST

START_TEST(fingerprint) {
        char *env[] = {(char *) "PATH=/bin", (char *) "Z_API_KEY=z", (char *) "A_BASE_URL=http://a",
                       (char *) "OPENCODE_CONFIG=/c", (char *) "LANG=C", (char *) "PI_CODING_AGENT_DIR=/p", NULL};
        char *f = summary_env_fingerprint(env);
        ck_assert_str_eq(f, "A_BASE_URL=http://a\nOPENCODE_CONFIG=/c\nPI_CODING_AGENT_DIR=/p\nZ_API_KEY=z");
        free(f);
        char *none[] = {(char *) "PATH=/bin", NULL};
        f = summary_env_fingerprint(none);
        ck_assert_str_eq(f, "");
        free(f);
}
END_TEST

TF_MAIN("summary", "core", setup, teardown, 0, excerpt_small_log, excerpt_large_log, delta_and_cap, snapshot_document,
        snapshot_file_is_private, models_listing, fingerprint)
