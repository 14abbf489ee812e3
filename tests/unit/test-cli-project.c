/* Lean projections and the workspace view, the printed error object
 * (errorValue) and accept's applied:false error. Sample daemon results
 * follow the key order of the daemon's task summaries. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "cli-error.h"
#include "cli-project.h"
#include "json-util.h"
#include "toon.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"
#include "utf8.h"

static json_object *J(const char *text) {
        json_object *v = NULL;
        ck_assert_int_eq(json_parse_strict(text, strlen(text), &v), 0);
        return v;
}

#define ASSERT_JSON(obj, expected)                                       \
        do {                                                             \
                json_object *_o = (obj);                                 \
                ck_assert_ptr_nonnull(_o);                               \
                ck_assert_str_eq(json_to_line(_o, NULL), expected);      \
                json_object_put(_o);                                     \
        } while (0)

/* A settled TaskSummary + status log fields. */
#define SUMMARY_DONE                                                                                   \
        "{\"id\":\"oc_a\",\"status\":\"done\",\"directory\":\"/w\",\"model\":\"p/m\",\"sessionId\":\"ses_1\","  \
        "\"originSessionId\":null,\"pid\":null,\"startedAt\":\"2026-01-01T00:00:00.000Z\","             \
        "\"endedAt\":\"2026-01-01T00:01:00.000Z\",\"exitCode\":0,\"signal\":null,\"logPath\":\"/s/l\","   \
        "\"failureReason\":null,\"failureDetail\":null,\"spawnError\":null,\"promptPreview\":\"p\","     \
        "\"overlayDirs\":{\"root\":\"/o/r\",\"upperDir\":\"/o/u\",\"workDir\":\"/o/w\",\"tmpRoot\":\"/o\"," \
        "\"rwBinds\":[],\"rwFileBinds\":[]},\"role\":\"dispatch\",\"changesetStatus\":\"pending\","      \
        "\"cancelRequested\":false,\"outputDir\":\"/s/out\",\"logBytesWritten\":75,"                    \
        "\"logLastWriteAt\":\"2026-01-01T00:00:59.000Z\",\"logHasEvent\":true}"

START_TEST(test_lean_status_done_pending) {
        _cleanup_json_ json_object *d = J(SUMMARY_DONE);
        ASSERT_JSON(cli_lean_status(d, false),
                    "{\"id\":\"oc_a\",\"status\":\"done\",\"startedAt\":\"2026-01-01T00:00:00.000Z\",\"exitCode\":0,"
                    "\"signal\":null,\"changesetStatus\":\"pending\",\"outputDir\":\"/s/out\",\"logBytesWritten\":75,"
                    "\"logLastWriteAt\":\"2026-01-01T00:00:59.000Z\",\"logHasEvent\":true,"
                    "\"next\":\"Run taskferry result with task id \\\"oc_a\\\" to see the final message; pass --full here for directory/model/log path details\"}");
}
END_TEST

START_TEST(test_lean_status_running_wait_timeout) {
        _cleanup_json_ json_object *d = J(
                "{\"id\":\"oc_r\",\"status\":\"running\",\"startedAt\":\"2026-01-01T00:00:00.000Z\",\"exitCode\":null,"
                "\"signal\":null,\"changesetStatus\":\"none\",\"outputDir\":null,\"cancelRequested\":false,"
                "\"timedOut\":true,\"outputTail\":\"abc\",\"outputTailTotalChars\":10,\"outputTailTruncated\":true}");
        ASSERT_JSON(cli_lean_status(d, false),
                    "{\"id\":\"oc_r\",\"status\":\"running\",\"startedAt\":\"2026-01-01T00:00:00.000Z\","
                    "\"outputTail\":\"abc\",\"outputTailTotalChars\":10,\"outputTailTruncated\":true,"
                    "\"note\":\"wait timed out; the task may still be running. Run taskferry wait again to keep waiting, or pass --timeout to set a longer cap\","
                    "\"next\":\"Run taskferry wait or taskferry status with task id \\\"oc_r\\\" to check progress; pass --full for directory/model/log path details\"}");
        _cleanup_json_ json_object *q = J("{\"id\":\"oc_q\",\"status\":\"queued\",\"startedAt\":null}");
        ASSERT_JSON(cli_lean_status(q, false),
                    "{\"id\":\"oc_q\",\"status\":\"queued\",\"startedAt\":null,"
                    "\"next\":\"Run taskferry wait or taskferry status with task id \\\"oc_q\\\" to check progress; pass --full for directory/model/log path details\"}");
}
END_TEST

/* a live task's wire "pending" is shown as not extracted yet */
START_TEST(test_lean_status_changeset_not_extracted) {
        static const char *const live[] = {"running", "queued"};
        for (size_t i = 0; i < 2; i++) {
                _cleanup_free_ char *text = strdup_printf(
                        "{\"id\":\"oc_r\",\"status\":\"%s\",\"startedAt\":\"t\",\"role\":\"dispatch\","
                        "\"changesetStatus\":\"pending\",\"outputDir\":\"/o\"}", live[i]);
                _cleanup_json_ json_object *d = J(text);
                _cleanup_free_ char *want = strdup_printf(
                        "{\"id\":\"oc_r\",\"status\":\"%s\",\"startedAt\":\"t\",\"changeset\":\"not extracted yet\","
                        "\"outputDir\":\"/o\",\"next\":\"Run taskferry wait or taskferry status with task id \\\"oc_r\\\" "
                        "to check progress; pass --full for directory/model/log path details\"}", live[i]);
                ASSERT_JSON(cli_lean_status(d, false), want);
                /* --full and --json keep the wire value */
                json_object *full = cli_lean_status(d, true);
                ck_assert_str_eq(json_get_string(full, "changesetStatus"), "pending");
                json_object_put(full);
        }
        ck_assert_str_eq(cli_changeset_text("running", "pending"), "not extracted yet");
        ck_assert_str_eq(cli_changeset_text("queued", "pending"), "not extracted yet");
        ck_assert_str_eq(cli_changeset_text("done", "pending"), "pending");
        ck_assert_str_eq(cli_changeset_text("crashed", "pending"), "pending");
        ck_assert_str_eq(cli_changeset_text("running", "none"), "none");
        ck_assert_str_eq(cli_changeset_text("done", NULL), "none");
        ck_assert_str_eq(cli_changeset_text("done", "accepted"), "accepted");
        ck_assert_str_eq(cli_changeset_text("cancelled", "rejected"), "rejected");
}
END_TEST

START_TEST(test_lean_status_crashed_salvage_hint) {
        _cleanup_json_ json_object *d = J(
                "{\"id\":\"oc_c\",\"status\":\"crashed\",\"directory\":\"/w/it's here\",\"sessionId\":\"ses_o'k\","
                "\"startedAt\":\"2026-01-01T00:00:00.000Z\",\"exitCode\":1,\"signal\":null,"
                "\"changesetError\":\"diff failed\",\"projectConfigWarning\":\"bad toml\",\"outputDir\":\"\"}");
        ASSERT_JSON(cli_lean_status(d, false),
                    "{\"id\":\"oc_c\",\"status\":\"crashed\",\"startedAt\":\"2026-01-01T00:00:00.000Z\",\"exitCode\":1,"
                    "\"signal\":null,\"changesetError\":\"diff failed\",\"projectConfigWarning\":\"bad toml\","
                    "\"next\":\"Session 'ses_o'\\\\''k' may be salvageable; resume with taskferry dispatch --session-id 'ses_o'\\\\''k' --directory '/w/it'\\\\''s here' --prompt \\\"<continuation prompt>\\\"\"}");
        /* crashed without a session id → the result hint */
        _cleanup_json_ json_object *n = J("{\"id\":\"oc_n\",\"status\":\"crashed\",\"sessionId\":null,\"startedAt\":null,\"exitCode\":1,\"signal\":\"SIGKILL\"}");
        ASSERT_JSON(cli_lean_status(n, false),
                    "{\"id\":\"oc_n\",\"status\":\"crashed\",\"startedAt\":null,\"exitCode\":1,\"signal\":\"SIGKILL\","
                    "\"next\":\"Run taskferry result with task id \\\"oc_n\\\" to see the final message; pass --full here for directory/model/log path details\"}");
}
END_TEST

START_TEST(test_lean_status_check_gate) {
        _cleanup_json_ json_object *d = J(
                "{\"id\":\"oc_g\",\"status\":\"done\",\"startedAt\":\"s\",\"exitCode\":0,\"signal\":null,"
                "\"checkStatus\":\"failed\",\"checkCommand\":\"make check\",\"checkExitCode\":2,"
                "\"checkStartedAt\":\"a\",\"checkEndedAt\":\"b\",\"checkOverride\":true,"
                "\"role\":\"dispatch\",\"changesetStatus\":\"accepted\"}");
        ASSERT_JSON(cli_lean_status(d, false),
                    "{\"id\":\"oc_g\",\"status\":\"done\",\"startedAt\":\"s\",\"exitCode\":0,\"signal\":null,"
                    "\"checkStatus\":\"failed\",\"checkCommand\":\"make check\",\"checkExitCode\":2,"
                    "\"checkStartedAt\":\"a\",\"checkEndedAt\":\"b\",\"checkOverride\":true,"
                    "\"next\":\"Run taskferry result with task id \\\"oc_g\\\" to see the final message; pass --full here for directory/model/log path details\"}");
        /* checkStatus "none" or null: no gate fields; no checkOverride unless true */
        _cleanup_json_ json_object *none = J("{\"id\":\"x\",\"status\":\"done\",\"startedAt\":\"s\",\"exitCode\":0,\"signal\":null,\"checkStatus\":\"none\",\"checkCommand\":\"c\"}");
        ASSERT_JSON(cli_lean_status(none, false),
                    "{\"id\":\"x\",\"status\":\"done\",\"startedAt\":\"s\",\"exitCode\":0,\"signal\":null,"
                    "\"next\":\"Run taskferry result with task id \\\"x\\\" to see the final message; pass --full here for directory/model/log path details\"}");
        _cleanup_json_ json_object *running = J("{\"id\":\"x\",\"status\":\"done\",\"startedAt\":\"s\",\"exitCode\":0,\"signal\":null,\"checkStatus\":\"running\",\"checkCommand\":\"c\",\"checkExitCode\":null,\"checkStartedAt\":\"a\",\"checkEndedAt\":null}");
        ASSERT_JSON(cli_lean_status(running, false),
                    "{\"id\":\"x\",\"status\":\"done\",\"startedAt\":\"s\",\"exitCode\":0,\"signal\":null,"
                    "\"checkStatus\":\"running\",\"checkCommand\":\"c\",\"checkExitCode\":null,\"checkStartedAt\":\"a\",\"checkEndedAt\":null,"
                    "\"next\":\"Run taskferry result with task id \\\"x\\\" to see the final message; pass --full here for directory/model/log path details\"}");
}
END_TEST

START_TEST(test_lean_status_full_reduces_overlay_dirs) {
        _cleanup_json_ json_object *d = J(SUMMARY_DONE);
        _cleanup_json_ json_object *full = cli_lean_status(d, true);
        ck_assert_ptr_nonnull(full);
        ck_assert_str_eq(json_to_line(json_get_object(full, "overlayDirs"), NULL), "{\"root\":\"/o/r\",\"tmpRoot\":\"/o\"}");
        /* every other key is kept in place */
        ck_assert_int_eq(json_object_object_length(full), json_object_object_length(d));
        ck_assert_str_eq(json_get_string(full, "promptPreview"), "p");
        ck_assert(!json_object_object_get_ex(full, "next", NULL));
        /* the input was not modified */
        ck_assert_ptr_nonnull(json_get_string(json_get_object(d, "overlayDirs"), "upperDir"));
        /* overlayDirs null stays null */
        _cleanup_json_ json_object *n = J("{\"id\":\"x\",\"overlayDirs\":null}");
        ASSERT_JSON(cli_lean_status(n, true), "{\"id\":\"x\",\"overlayDirs\":null}");
}
END_TEST

START_TEST(test_lean_result) {
        _cleanup_json_ json_object *d = J(
                "{\"taskId\":\"oc_a\",\"status\":\"done\",\"exitCode\":0,\"signal\":null,\"spawnError\":null,"
                "\"failureReason\":null,\"failureDetail\":null,\"diff\":null,\"diffStat\":null,\"changesetError\":null,"
                "\"sessionId\":\"s\",\"tokens\":{\"input\":1},\"cost\":0.5,\"message\":\"hi\",\"narration\":\"long\","
                "\"narrationTotalChars\":2500,\"narrationTruncated\":true,"
                "\"next\":\"Run taskferry result with full: true on task id \\\"oc_a\\\" to see the complete narration\","
                "\"logPath\":\"/l\",\"outputDir\":\"/o\"}");
        ASSERT_JSON(cli_lean_result(d, false, false),
                    "{\"taskId\":\"oc_a\",\"status\":\"done\",\"exitCode\":0,\"signal\":null,\"spawnError\":null,"
                    "\"failureReason\":null,\"failureDetail\":null,\"diff\":null,\"diffStat\":null,\"changesetError\":null,"
                    "\"sessionId\":\"s\",\"tokens\":{\"input\":1},\"cost\":0.5,\"message\":\"hi\",\"narrationTotalChars\":2500,"
                    "\"next\":\"Run taskferry result --full or --fields narration with task id \\\"oc_a\\\" to see intermediate step narration (2500 chars total)\","
                    "\"logPath\":\"/l\",\"outputDir\":\"/o\"}");
        /* without a daemon next: appended last */
        _cleanup_json_ json_object *nonext = J("{\"taskId\":\"oc_b\",\"message\":\"m\",\"narration\":\"n\",\"narrationTotalChars\":1,\"narrationTruncated\":false,\"logPath\":\"/l\"}");
        ASSERT_JSON(cli_lean_result(nonext, false, false),
                    "{\"taskId\":\"oc_b\",\"message\":\"m\",\"narrationTotalChars\":1,\"logPath\":\"/l\","
                    "\"next\":\"Run taskferry result --full or --fields narration with task id \\\"oc_b\\\" to see intermediate step narration (1 chars total)\"}");
        /* still running: no narrationTotalChars */
        _cleanup_json_ json_object *run = J("{\"taskId\":\"oc_r\",\"status\":\"running\",\"message\":\"task is still running; poll taskferry status first\"}");
        ASSERT_JSON(cli_lean_result(run, false, false),
                    "{\"taskId\":\"oc_r\",\"status\":\"running\",\"message\":\"task is still running; poll taskferry status first\","
                    "\"next\":\"Run taskferry wait with task id \\\"oc_r\\\" to block until the task settles, then re-run taskferry result\"}");
        /* --full and --fields/--diff: raw */
        ASSERT_JSON(cli_lean_result(d, true, false), json_to_line(d, NULL));
        _cleanup_json_ json_object *fields = J("{\"taskId\":\"oc_a\",\"status\":\"done\",\"narration\":\"n\"}");
        ASSERT_JSON(cli_lean_result(fields, false, true), "{\"taskId\":\"oc_a\",\"status\":\"done\",\"narration\":\"n\"}");
}
END_TEST

#define COUNTS(q, r, d, c, x, u) \
        "{\"queued\":" #q ",\"running\":" #r ",\"done\":" #d ",\"crashed\":" #c ",\"cancelled\":" #x ",\"unknown\":" #u "}"

START_TEST(test_project_list_rows) {
        _cleanup_json_ json_object *v = J(
                "{\"counts\":" COUNTS(0, 0, 1, 1, 0, 0) ",\"tasks\":["
                "{\"id\":\"a\",\"status\":\"crashed\",\"model\":\"m\",\"startedAt\":\"t1\",\"directory\":\"/w\",\"failureReason\":\"pi_boot_failure\"},"
                "{\"id\":\"b\",\"status\":\"done\",\"model\":null,\"startedAt\":\"t2\",\"directory\":\"/w\",\"failureReason\":null}]}");
        ASSERT_JSON(cli_project_list(v, 30),
                    "{\"counts\":" COUNTS(0, 0, 1, 1, 0, 0) ",\"tasks\":["
                    "{\"id\":\"a\",\"status\":\"crashed\",\"model\":\"m\",\"startedAt\":\"t1\",\"failureReason\":\"pi_boot_failure\"},"
                    "{\"id\":\"b\",\"status\":\"done\",\"model\":null,\"startedAt\":\"t2\"}]}");
        /* and as TOON: mixed key sets → list form */
        _cleanup_json_ json_object *p = cli_project_list(v, 30);
        _cleanup_free_ char *toon = toon_encode(p);
        ck_assert_str_eq(toon,
                         "counts:\n  queued: 0\n  running: 0\n  done: 1\n  crashed: 1\n  cancelled: 0\n  unknown: 0\n"
                         "tasks[2]:\n  - id: a\n    status: crashed\n    model: m\n    startedAt: t1\n    failureReason: pi_boot_failure\n"
                         "  - id: b\n    status: done\n    model: null\n    startedAt: t2");
}
END_TEST

START_TEST(test_project_list_empty_and_strings) {
        _cleanup_json_ json_object *e = J("{\"counts\":" COUNTS(0, 0, 0, 0, 0, 0) ",\"tasks\":[]}");
        ASSERT_JSON(cli_project_list(e, 30),
                    "{\"counts\":" COUNTS(0, 0, 0, 0, 0, 0) ",\"tasks\":\"none found in this workspace\"}");
        _cleanup_json_ json_object *s = J("{\"counts\":" COUNTS(0, 0, 0, 0, 0, 0) ",\"tasks\":\"none found (this server process's lifetime)\"}");
        ASSERT_JSON(cli_project_list(s, 30),
                    "{\"counts\":" COUNTS(0, 0, 0, 0, 0, 0) ",\"tasks\":\"none found (this server process's lifetime)\"}");
        /* a directory key is kept first when the response has one */
        _cleanup_json_ json_object *d = J("{\"directory\":\"/w\",\"counts\":{},\"tasks\":[]}");
        ASSERT_JSON(cli_project_list(d, 30), "{\"directory\":\"/w\",\"counts\":{},\"tasks\":\"none found in this workspace\"}");
}
END_TEST

static json_object *rows_value(size_t n, size_t done_count) {
        json_object *v = json_object_new_object();
        json_object *counts = json_object_new_object();
        json_add_int(counts, "queued", 0);
        json_add_int(counts, "running", 0);
        json_add_int(counts, "done", (int64_t) done_count);
        json_add_int(counts, "crashed", 0);
        json_add_int(counts, "cancelled", 0);
        json_add_int(counts, "unknown", 0);
        json_add(v, "counts", counts);
        json_object *tasks = json_object_new_array();
        for (size_t i = 0; i < n; i++) {
                json_object *r = json_object_new_object();
                char id[32];
                snprintf(id, sizeof id, "oc_%zu", i);
                json_add_string(r, "id", id);
                json_add_string(r, "status", "done");
                json_add_string(r, "model", "m");
                json_add_string(r, "startedAt", "t");
                json_add_string(r, "directory", "/w");
                json_add_null(r, "failureReason");
                json_object_array_add(tasks, r);
        }
        json_add(v, "tasks", tasks);
        return v;
}

START_TEST(test_project_list_limits_and_next) {
        /* 40 rows, default limit 30 → display truncation hint */
        _cleanup_json_ json_object *v = rows_value(40, 40);
        _cleanup_json_ json_object *p = cli_project_list(v, 30);
        ck_assert_uint_eq(json_object_array_length(json_get_array(p, "tasks")), 30);
        ck_assert_str_eq(json_to_line(json_get_array(p, "next"), NULL), "[\"Run taskferry list --limit 40 for all 40 tasks\"]");
        /* last key is next */
        struct json_object_iterator it = json_object_iter_begin(p), end = json_object_iter_end(p);
        const char *last = NULL;
        for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it)) last = json_object_iter_peek_name(&it);
        ck_assert_str_eq(last, "next");

        /* --limit 40: everything shown, no hint */
        _cleanup_json_ json_object *all = cli_project_list(v, 40);
        ck_assert_uint_eq(json_object_array_length(json_get_array(all, "tasks")), 40);
        ck_assert(!json_object_object_get_ex(all, "next", NULL));

        /* server cap: 500 rows shipped of 600 counted */
        _cleanup_json_ json_object *capped = rows_value(500, 600);
        _cleanup_json_ json_object *cp = cli_project_list(capped, 30);
        ck_assert_uint_eq(json_object_array_length(json_get_array(cp, "tasks")), 30);
        ck_assert_str_eq(json_to_line(json_get_array(cp, "next"), NULL),
                         "[\"Showing the newest 500 of 600 tasks (server-capped); pass --directory to narrow further\"]");

        /* few rows: no next */
        _cleanup_json_ json_object *few = rows_value(3, 3);
        _cleanup_json_ json_object *fp = cli_project_list(few, 30);
        ck_assert(!json_object_object_get_ex(fp, "next", NULL));
        ck_assert_str_eq(json_to_line(json_object_array_get_idx(json_get_array(fp, "tasks"), 0), NULL),
                         "{\"id\":\"oc_0\",\"status\":\"done\",\"model\":\"m\",\"startedAt\":\"t\"}");
        /* uniform rows → tabular TOON */
        _cleanup_free_ char *toon = toon_encode(fp);
        ck_assert(strstr(toon, "tasks[3]{id,status,model,startedAt}:\n  oc_0,done,m,t\n"));
}
END_TEST

START_TEST(test_list_changeset_column) {
        _cleanup_json_ json_object *v = J(
                "{\"counts\":" COUNTS(0, 1, 1, 0, 1, 0) ",\"tasks\":["
                "{\"id\":\"a\",\"status\":\"running\",\"model\":\"m\",\"startedAt\":\"t1\",\"directory\":\"/w\",\"failureReason\":null,\"changesetStatus\":\"pending\"},"
                "{\"id\":\"b\",\"status\":\"done\",\"model\":\"m\",\"startedAt\":\"t2\",\"directory\":\"/w\",\"failureReason\":null,\"changesetStatus\":\"pending\"},"
                "{\"id\":\"c\",\"status\":\"cancelled\",\"model\":\"m\",\"startedAt\":\"t3\",\"directory\":\"/w\",\"failureReason\":null,\"changesetStatus\":\"rejected\"},"
                "{\"id\":\"d\",\"status\":\"done\",\"model\":\"m\",\"startedAt\":\"t4\",\"directory\":\"/w\",\"failureReason\":null,\"changesetStatus\":null}]}");
        _cleanup_json_ json_object *p = cli_project_list(v, 30);
        _cleanup_free_ char *toon = toon_encode(p);
        ck_assert_msg(strstr(toon, "tasks[4]{id,status,model,startedAt,changeset}:\n"
                                   "  a,running,m,t1,not extracted yet\n"
                                   "  b,done,m,t2,pending\n"
                                   "  c,cancelled,m,t3,rejected\n"
                                   "  d,done,m,t4,none"), "%s", toon);
        /* the home view: the same column, and a hint at diff for the pending one */
        _cleanup_json_ json_object *h = cli_home_view(v, "/w", "/b", "/h");
        ck_assert_str_eq(json_to_line(json_object_array_get_idx(json_get_array(h, "tasks"), 1), NULL),
                         "{\"id\":\"b\",\"status\":\"done\",\"model\":\"m\",\"startedAt\":\"t2\",\"changeset\":\"pending\"}");
        json_object *next = json_get_array(h, "next");
        ck_assert_uint_eq(json_object_array_length(next), 4);
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(next, 3)),
                         "Run taskferry diff <id> to review a pending changeset, then taskferry accept <id> or taskferry reject <id>");
        /* no pending changeset (a live task's does not count): no hint */
        _cleanup_json_ json_object *v2 = J(
                "{\"counts\":" COUNTS(0, 1, 0, 0, 0, 0) ",\"tasks\":["
                "{\"id\":\"a\",\"status\":\"running\",\"model\":\"m\",\"startedAt\":\"t1\",\"directory\":\"/w\",\"failureReason\":null,\"changesetStatus\":\"pending\"}]}");
        _cleanup_json_ json_object *h2 = cli_home_view(v2, "/w", "/b", "/h");
        ck_assert_uint_eq(json_object_array_length(json_get_array(h2, "next")), 3);
}
END_TEST

START_TEST(test_home_view) {
        _cleanup_json_ json_object *v = rows_value(2, 2);
        ASSERT_JSON(cli_home_view(v, "/w", "/home/u/.local/bin/taskferry", "/home/u"),
                    "{\"workspace\":\"/w\",\"bin\":\"~/.local/bin/taskferry\","
                    "\"description\":\"Manage background tasks that run pi, OpenCode or a shell command in the current workspace.\","
                    "\"counts\":" COUNTS(0, 0, 2, 0, 0, 0) ",\"tasks\":["
                    "{\"id\":\"oc_0\",\"status\":\"done\",\"model\":\"m\",\"startedAt\":\"t\"},"
                    "{\"id\":\"oc_1\",\"status\":\"done\",\"model\":\"m\",\"startedAt\":\"t\"}],"
                    "\"next\":[\"Run taskferry status <id> for activity\",\"Run taskferry wait <id> to wait for settlement\","
                    "\"Run taskferry result <id> for the final answer\"]}");
        _cleanup_json_ json_object *e = J("{\"counts\":{},\"tasks\":[]}");
        ASSERT_JSON(cli_home_view(e, "/w", "/usr/bin/taskferry", "/home/u"),
                    "{\"workspace\":\"/w\",\"bin\":\"/usr/bin/taskferry\","
                    "\"description\":\"Manage background tasks that run pi, OpenCode or a shell command in the current workspace.\","
                    "\"counts\":{},\"tasks\":\"none found in this workspace\","
                    "\"next\":[\"Run taskferry dispatch --prompt \\\"<text>\\\" to start a task\",\"Run taskferry list --all to inspect every workspace\"]}");
        /* a sibling of $HOME is not shortened */
        _cleanup_json_ json_object *h = cli_home_view(e, "/w", "/home/user2/bin/taskferry", "/home/user");
        ck_assert_str_eq(json_get_string(h, "bin"), "/home/user2/bin/taskferry");
        /* more than 30 rows */
        _cleanup_json_ json_object *many = rows_value(31, 31);
        _cleanup_json_ json_object *m = cli_home_view(many, "/w", "/b", NULL);
        ck_assert_uint_eq(json_object_array_length(json_get_array(m, "tasks")), 30);
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(json_get_array(m, "next"), 3)),
                         "Run taskferry list --limit 31 for all 31 tasks");
}
END_TEST

static json_object *error_value(const char *text, const char *help) {
        cli_error e = {};
        cli_error_fail(&e, NULL, "%s", text);
        if (help) e.help = strdup(help);
        json_object *v = cli_error_value(&e);
        cli_error_done(&e);
        return v;
}

START_TEST(test_error_value) {
        /* daemon error detail with error:/help: lines, as a failed handler sends it */
        ASSERT_JSON(error_value("error: unknown task id: zzz\nhelp: run taskferry list to see valid task ids", NULL),
                    "{\"error\":\"unknown task id: zzz\",\"help\":\"run taskferry list to see valid task ids\"}");
        /* "<message>\nhelp: <help>" (client text when detail == message) */
        ASSERT_JSON(error_value("--model is required\nhelp: pass --model", NULL),
                    "{\"error\":\"--model is required\",\"help\":\"pass --model\"}");
        /* detail lines are folded after an error: line, help: lines are not */
        ASSERT_JSON(error_value("error: changeset for task x failed to apply\n  reason: conflict\n  in a.c\nhelp: fix it", NULL),
                    "{\"error\":\"changeset for task x failed to apply\\n  reason: conflict\\n  in a.c\",\"help\":\"fix it\"}");
        /* without an error: line only the first line, no folding */
        ASSERT_JSON(error_value("first line\nsecond line", NULL),
                    "{\"error\":\"first line\",\"help\":\"Retry the command or run `taskferry --help`\"}");
        ASSERT_JSON(error_value("", NULL),
                    "{\"error\":\"taskferry request failed\",\"help\":\"Retry the command or run `taskferry --help`\"}");
        ASSERT_JSON(error_value("\nsecond", NULL),
                    "{\"error\":\"taskferry request failed\",\"help\":\"Retry the command or run `taskferry --help`\"}");
        /* an explicit help wins over help: lines */
        ASSERT_JSON(error_value("unknown command: bogus\nhelp: ignored", "Run `taskferry --help` to see available commands"),
                    "{\"error\":\"unknown command: bogus\",\"help\":\"Run `taskferry --help` to see available commands\"}");
        /* empty error:/help: lines are skipped; prefixes are trimmed */
        ASSERT_JSON(error_value("error:\nerror:   real  \nhelp:\nhelp:  h ", NULL),
                    "{\"error\":\"real\",\"help\":\"h\"}");
        /* TOON rendering of the spec example */
        _cleanup_json_ json_object *v = error_value("unknown command: bogus", "Run `taskferry --help` to see available commands");
        _cleanup_free_ char *t = toon_encode(v);
        ck_assert_str_eq(t, "error: \"unknown command: bogus\"\nhelp: Run `taskferry --help` to see available commands");
}
END_TEST

START_TEST(test_accept_failure_text) {
        _cleanup_free_ char *t = cli_accept_failure_text("oc_a", "  error: patch failed: a.c:1\nerror: a.c: patch does not apply \n");
        ck_assert_str_eq(t,
                         "error: changeset for task oc_a failed to apply\n"
                         "  reason: error: patch failed: a.c:1\n"
                         "  error: a.c: patch does not apply\n"
                         "help: the task is still pending -- resolve the reported conflict in the target directory, then retry \"taskferry accept oc_a\", or discard the changeset with \"taskferry reject oc_a\"");
        ASSERT_JSON(error_value(t, NULL),
                    "{\"error\":\"changeset for task oc_a failed to apply\\n  reason: error: patch failed: a.c:1\\n  error: a.c: patch does not apply\","
                    "\"help\":\"the task is still pending -- resolve the reported conflict in the target directory, then retry \\\"taskferry accept oc_a\\\", or discard the changeset with \\\"taskferry reject oc_a\\\"\"}");
        _cleanup_free_ char *d = cli_accept_failure_text("oc_b", NULL);
        ck_assert(strstr(d, "\n  reason: the target directory rejected the patch\n"));
        _cleanup_free_ char *e = cli_accept_failure_text("oc_b", "");
        ck_assert(strstr(e, "\n  reason: the target directory rejected the patch\n"));
}
END_TEST

START_TEST(test_truthy) {
        ck_assert(!cli_json_truthy(NULL));
        _cleanup_json_ json_object *v = J("[0,\"\",false,0.0,1,\"x\",true,{},[]]");
        bool want[] = { false, false, false, false, true, true, true, true, true };
        for (size_t i = 0; i < ELEMENTSOF(want); i++)
                ck_assert_int_eq(cli_json_truthy(json_object_array_get_idx(v, i)), want[i]);
}
END_TEST

TF_MAIN("cli-project", "projections", NULL, NULL, 0, test_lean_status_done_pending,
        test_lean_status_running_wait_timeout, test_lean_status_crashed_salvage_hint,
        test_lean_status_changeset_not_extracted, test_list_changeset_column, test_lean_status_check_gate,
        test_lean_status_full_reduces_overlay_dirs, test_lean_result, test_project_list_rows,
        test_project_list_empty_and_strings, test_project_list_limits_and_next, test_home_view, test_error_value,
        test_accept_failure_text, test_truthy)
