/* activity.c's text rules (activity.h): the 96 KiB snapshot
 * with its head/tail split and U+FFFD trimming, the narration (grouped by
 * messageID, tool lines, 500-unit cuts, the first 4000 code points),
 * sanitize, and the local activity's fallbacks. */

#include <check.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "features/activity.h"
#include "json-util.h"
#include "core/manager.h"
#include "core/task.h"
#include "core/task-table.h"
#include "api/task-views.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"
#include "utf8.h"

static void write_all(const char *path, const char *data, size_t len) { tf_write_file(path, data, len, 0600); }

START_TEST(snapshot_small_is_whole) {
        char *d = tf_tmpdir_new("test-activity");
        char *p = strdup_printf("%s/log", d);
        write_all(p, "line1\nline2\n", 12);
        char *snap = NULL;
        uint64_t size = 0;
        ck_assert_int_eq(activity_read_snapshot(p, &snap, &size), 0);
        ck_assert_str_eq(snap, "line1\nline2\n");
        ck_assert_uint_eq(size, 12);
        free(snap);
        /* a missing log: "" and size 0 */
        char *q = strdup_printf("%s/none", d);
        ck_assert_int_eq(activity_read_snapshot(q, &snap, &size), 0);
        ck_assert_str_eq(snap, "");
        ck_assert_uint_eq(size, 0);
        free(snap), free(q), free(p);
        tf_tmpdir_free(d);
}
END_TEST

START_TEST(snapshot_large_is_head_and_tail_with_fffd_trimmed) {
        char *d = tf_tmpdir_new("test-activity");
        char *p = strdup_printf("%s/log", d);
        size_t n = 200 * 1024;
        char *buf = malloc(n);
        memset(buf, 'm', n);
        memset(buf, 'h', 10);
        memset(buf + n - 10, 't', 10);
        /* a 3-byte "€" split by the head's end (bytes 49151..49153) and one
         * split by the tail's start (its first byte just before the tail) */
        memcpy(buf + ACTIVITY_SNAPSHOT_HALF - 1, "\xE2\x82\xAC", 3);
        memcpy(buf + n - ACTIVITY_SNAPSHOT_HALF - 2, "\xE2\x82\xAC", 3);
        write_all(p, buf, n);
        char *snap = NULL;
        uint64_t size = 0;
        ck_assert_int_eq(activity_read_snapshot(p, &snap, &size), 0);
        ck_assert_uint_eq(size, n);
        size_t len = strlen(snap);
        ck_assert(startswith(snap, "hhhhhhhhhhm"));
        ck_assert_str_eq(snap + len - 11, "mtttttttttt");
        ck_assert_ptr_null(strstr(snap, "\xEF\xBF\xBD")); /* both partial sequences trimmed */
        /* head: 49151 bytes (the cut sequence's first byte trimmed), "\n", tail:
         * 49151 (its lone last byte trimmed) */
        char *nl = strchr(snap, '\n');
        ck_assert_ptr_nonnull(nl);
        ck_assert_uint_eq((size_t) (nl - snap), ACTIVITY_SNAPSHOT_HALF - 1);
        ck_assert_uint_eq(len - (size_t) (nl - snap) - 1, ACTIVITY_SNAPSHOT_HALF - 1);
        free(snap), free(buf), free(p);
        tf_tmpdir_free(d);
}
END_TEST

START_TEST(narration_groups_text_and_tool_lines) {
        const char *log =
                "not json\n"
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"Hel\",\"messageID\":\"m1\"}}\n"
                "{\"type\":\"tool_use\",\"part\":{\"type\":\"tool\",\"tool\":\"bash\",\"state\":{\"input\":{\"cmd\":\"ls\"},\"output\":\"a b\"}}}\n"
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"lo\",\"messageID\":\"m1\"}}\n"
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"anon\"}}\n"
                "{\"type\":\"tool_use\",\"part\":{\"type\":\"tool\",\"tool\":\"read\",\"state\":{\"input\":\"f.c\",\"output\":\"\"}}}\n"
                "{\"type\":\"tool_use\",\"part\":{\"type\":\"tool\",\"tool\":\"x\"}}\n"
                "{\"type\":\"tool_use\",\"part\":{\"type\":\"tool-progress\",\"tool\":\"skip\"}}\n"
                "{\"type\":\"step_finish\",\"part\":{\"reason\":\"stop\"}}\n";
        char *n = activity_narration(log);
        ck_assert_str_eq(n, "Hello\n\n[tool:bash] {\"cmd\":\"ls\"} -> a b\n\nanon\n\n[tool:read] f.c\n\n[tool:x] {}");
        free(n);
}
END_TEST

START_TEST(narration_cuts_tool_text_and_total) {
        char *in = malloc(601);
        memset(in, 'i', 600);
        in[600] = 0;
        char *log = strdup_printf("{\"type\":\"tool_use\",\"part\":{\"type\":\"tool\",\"tool\":\"t\",\"state\":{\"input\":\"%s\"}}}\n", in);
        char *n = activity_narration(log);
        char *want = strdup_printf("[tool:t] %.*s\xE2\x80\xA6[truncated]", 500, in);
        ck_assert_str_eq(n, want);
        free(n), free(want), free(log);
        /* the narration keeps the first 4000 code points (here 2-byte ones) */
        size_t cps = 5000;
        char *text = malloc(cps * 2 + 1);
        for (size_t i = 0; i < cps; i++) memcpy(text + 2 * i, "\xC3\xA9", 2);
        text[cps * 2] = 0;
        log = strdup_printf("{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"%s\",\"messageID\":\"m\"}}\n", text);
        n = activity_narration(log);
        ck_assert_uint_eq(utf8_codepoints(n, strlen(n)), ACTIVITY_MAX_CODEPOINTS);
        ck_assert_uint_eq(strlen(n), ACTIVITY_MAX_CODEPOINTS * 2);
        free(n), free(log), free(text), free(in);
}
END_TEST

START_TEST(sanitize_rules) {
        char *s = activity_sanitize("  \x1b[31mred\x1b[0m\ttext\r\n\x7f more\x01x  ");
        ck_assert_str_eq(s, "red text more x");
        free(s);
        s = activity_sanitize("a\xC2\xA0\xE2\x80\x83" "b");
        ck_assert_str_eq(s, "a b");
        free(s);
        s = activity_sanitize("\x1b[2J   ");
        ck_assert_str_eq(s, "");
        free(s);
        char *big = malloc(9001);
        for (int i = 0; i < 9000; i++) big[i] = i % 3 == 2 ? ' ' : 'w';
        big[9000] = 0;
        s = activity_sanitize(big);
        ck_assert_uint_eq(utf8_codepoints(s, strlen(s)), ACTIVITY_MAX_CODEPOINTS);
        free(s), free(big);
}
END_TEST

START_TEST(local_activity_fallbacks) {
        Manager m = {0};
        char *d = tf_tmpdir_new("test-activity");
        char *log = strdup_printf("%s/oc_l.ndjson", d);
        char *rec = strdup_printf("{\"id\":\"oc_l\",\"directory\":\"/\",\"status\":\"running\",\"logPath\":\"%s\","
                                  "\"prompt\":\"the\\nwhole prompt\",\"promptPreview\":\"the\\npreview\"}",
                                  log);
        json_object *o = NULL;
        ck_assert_int_eq(json_parse_strict(rec, strlen(rec), &o), 0);
        Task *t = task_table_add_json(&m, o);
        uint64_t wm = 7;
        char *a = activity_local(t, &wm);
        ck_assert_str_eq(a, "the preview"); /* no log yet: the prompt preview, sanitized */
        ck_assert_uint_eq(wm, 0);
        free(a);
        const char *line = "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"Working on it\",\"messageID\":\"m\"}}\n";
        write_all(log, line, strlen(line));
        a = activity_local(t, &wm);
        ck_assert_str_eq(a, "Working on it");
        ck_assert_uint_eq(wm, strlen(line));
        free(a);
        task_free(t);
        free(m.tasks);
        /* nothing at all: "Task <status>" */
        char *rec2 = strdup_printf("{\"id\":\"oc_e\",\"directory\":\"/\",\"status\":\"queued\",\"logPath\":\"%s/none\"}", d);
        ck_assert_int_eq(json_parse_strict(rec2, strlen(rec2), &o), 0);
        Manager m2 = {0};
        t = task_table_add_json(&m2, o);
        a = activity_local(t, &wm);
        ck_assert_str_eq(a, "Task queued");
        free(a);
        task_free(t);
        free(m2.tasks);
        free(rec), free(rec2), free(log);
        tf_tmpdir_free(d);
}
END_TEST

TF_MAIN("activity", "activity", NULL, NULL, 0, snapshot_small_is_whole,
        snapshot_large_is_head_and_tail_with_fffd_trimmed, narration_groups_text_and_tool_lines,
        narration_cuts_tool_text_and_total, sanitize_rules, local_activity_fallbacks)
