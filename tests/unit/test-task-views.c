/* task-views.c: TaskSummary in the spec's key order with its conditional
 * keys, task.status's log fields, and task.list: newest first, the 500-row
 * cap with counts over every task, the workspace filter (a repository's
 * subdirectory is its workspace), a sandboxed caller's view, and list rows
 * rebuilt when their record changes. */

#include <check.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "daemon-fixture.h"
#include "json-util.h"
#include "api/task-views.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"

static Manager m;
static char *dir;

static void setup(void) {
        tf_manager_setup(&m, "test-task-views");
        dir = m.paths.state_dir;
}
static void teardown(void) { tf_manager_teardown(&m); }

/* o's keys, comma-separated, in order. */
static char *keys_of(json_object *o) {
        char *s = strdup("");
        json_object_object_foreach(o, k, v) {
                (void) v;
                char *n = strdup_printf("%s%s%s", s, *s ? "," : "", k);
                free(s);
                s = n;
        }
        return s;
}

static void assert_keys(json_object *o, const char *want) {
        char *got = keys_of(o);
        ck_assert_str_eq(got, want);
        free(got);
}

#define HEAD                                                                                                           \
        "id,status,directory,model,sessionId,originSessionId,pid,startedAt,endedAt,exitCode,signal,logPath,"          \
        "failureReason,failureDetail,spawnError,promptPreview"

START_TEST(summary_key_order) {
        Task *t = tf_task(&m, "{\"id\":\"oc_a\",\"status\":\"done\",\"changesetStatus\":\"none\",\"directory\":\"/w\"}");
        json_object *o = task_summary(t);
        assert_keys(o, HEAD ",cancelRequested,outputDir");
        /* absent keys are null, never missing */
        ck_assert(json_object_is_type(json_get(o, "failureReason"), json_type_null));
        ck_assert(json_object_is_type(json_get(o, "outputDir"), json_type_null));
        ck_assert(!json_get_bool(o, "cancelRequested", true));
        json_object_put(o);
        /* the conditional keys, each where the spec puts it, whatever the record's order */
        t = tf_task(&m,
                    "{\"outputDir\":\"/o\",\"cancelRequested\":true,\"checkOverride\":true,\"checkStatus\":\"passed\","
                    "\"headDriftFrom\":\"a\",\"class\":\"c\",\"finalStatus\":\"ok\",\"finalMarker\":\"M\","
                    "\"incomplete\":true,\"promptTotalChars\":300,\"changesetStatus\":\"pending\",\"role\":\"worker\","
                    "\"id\":\"oc_b\",\"status\":\"done\",\"directory\":\"/w\",\"parentTaskId\":\"oc_a\"}");
        o = task_summary(t);
        assert_keys(o, HEAD ",promptTotalChars,incomplete,finalMarker,finalStatus,class,parentTaskId,checkStatus,"
                           "checkCommand,checkExitCode,checkStartedAt,checkEndedAt,checkOverride,role,changesetStatus,"
                           "headDriftFrom,headDriftTo,headDriftRecovered,cancelRequested,outputDir");
        ck_assert(json_get_bool(o, "cancelRequested", false));
        ck_assert_str_eq(json_get_string(o, "outputDir"), "/o");
        json_object_put(o);
        /* false/none/null conditions show nothing */
        t = tf_task(&m, "{\"id\":\"oc_c\",\"status\":\"done\",\"changesetStatus\":\"none\",\"incomplete\":false,"
                        "\"checkStatus\":\"none\",\"checkOverride\":true,\"promptTotalChars\":null,\"finalMarker\":null}");
        o = task_summary(t);
        assert_keys(o, HEAD ",cancelRequested,outputDir");
        json_object_put(o);
}
END_TEST

START_TEST(status_log_fields) {
        char *log = tf_path(dir, "t.log");
        Task *t = tf_taskf(&m, "{\"id\":\"oc_a\",\"status\":\"running\",\"changesetStatus\":\"none\",\"logPath\":\"%s\"}",
                           log);
        /* no log yet */
        json_object *o = task_status_detail(t);
        ck_assert_int_eq(json_object_get_int64(json_get(o, "logBytesWritten")), 0);
        ck_assert(json_object_is_type(json_get(o, "logLastWriteAt"), json_type_null));
        ck_assert(!json_get_bool(o, "logHasEvent", true));
        json_object_put(o);
        /* text lines and a JSON line without its newline: no event yet */
        free(tf_put(dir, "t.log", "starting\n{not json}\n{\"type\":\"text\"}", 36));
        o = task_status_detail(t);
        ck_assert_int_eq(json_object_get_int64(json_get(o, "logBytesWritten")), 36);
        const char *at = json_get_string(o, "logLastWriteAt");
        ck_assert_ptr_nonnull(at);
        ck_assert_uint_eq(strlen(at), 24); /* 2026-01-01T00:00:00.000Z */
        ck_assert_int_eq(at[23], 'Z');
        ck_assert(!json_get_bool(o, "logHasEvent", true));
        json_object_put(o);
        /* its newline arrives */
        free(tf_put(dir, "t.log", "starting\n{not json}\n{\"type\":\"text\"}\n", 37));
        o = task_status_detail(t);
        ck_assert(json_get_bool(o, "logHasEvent", false));
        json_object_put(o);
        free(log);
}
END_TEST

START_TEST(an_event_past_64k_is_not_seen) {
        size_t n = 70000;
        char *text = malloc(n + 32);
        memset(text, 'x', n);
        text[n - 1] = '\n';
        strcpy(text + n, "{\"type\":\"text\"}\n");
        char *log = tf_put(dir, "big.log", text, strlen(text));
        Task *t = tf_taskf(&m, "{\"id\":\"oc_a\",\"status\":\"running\",\"changesetStatus\":\"none\",\"logPath\":\"%s\"}",
                           log);
        json_object *o = task_status_detail(t);
        ck_assert(!json_get_bool(o, "logHasEvent", true));
        json_object_put(o);
        free(text);
        free(log);
}
END_TEST

static json_object *list(const char *directory, const char *visible_to) {
        json_object *o = manager_list(&m, directory, visible_to);
        ck_assert_ptr_nonnull(o);
        return o;
}

static void assert_rows(json_object *o, const char *want) {
        json_object *rows = json_get_array(o, "tasks");
        char *got = strdup("");
        for (size_t i = 0; rows && i < json_object_array_length(rows); i++) {
                char *n = strdup_printf("%s%s%s", got, *got ? "," : "",
                                        json_get_string(json_object_array_get_idx(rows, i), "id"));
                free(got);
                got = n;
        }
        ck_assert_str_eq(got, want);
        free(got);
}

static int64_t count(json_object *o, const char *status) {
        return json_object_get_int64(json_get(json_get_object(o, "counts"), status));
}

START_TEST(empty_lists_say_so) {
        json_object *o = list(NULL, NULL);
        ck_assert_str_eq(json_get_string(o, "tasks"), "none found (this server process's lifetime)");
        assert_keys(json_get_object(o, "counts"), "queued,running,done,crashed,cancelled,unknown");
        json_object_put(o);
        o = list(dir, NULL);
        ck_assert_str_eq(json_get_string(o, "tasks"), "none found in this workspace");
        json_object_put(o);
}
END_TEST

START_TEST(rows_and_the_cap) {
        char id[32], at[40];
        for (int i = 0; i < 520; i++) {
                snprintf(id, sizeof id, "oc_%03d", i);
                snprintf(at, sizeof at, "2026-01-01T00:%02d:%02d.000Z", i / 60, i % 60);
                tf_taskf(&m, "{\"id\":\"%s\",\"status\":\"%s\",\"changesetStatus\":\"none\",\"startedAt\":\"%s\","
                             "\"directory\":\"/w\",\"model\":\"m\"}",
                         id, i % 2 ? "done" : "crashed", at);
        }
        json_object *o = list(NULL, NULL);
        json_object *rows = json_get_array(o, "tasks");
        ck_assert_uint_eq(json_object_array_length(rows), 500);
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(rows, 0), "id"), "oc_519");
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(rows, 499), "id"), "oc_020");
        /* counts cover every task, not the rows shipped */
        ck_assert_int_eq(count(o, "done"), 260);
        ck_assert_int_eq(count(o, "crashed"), 260);
        assert_keys(json_object_array_get_idx(rows, 0), "id,status,model,startedAt,directory,failureReason,changesetStatus");
        json_object_put(o);
        /* out of startedAt order: the same newest 500 */
        ck_assert_int_eq(task_set_str(m.tasks[3], TASK_KEY_started_at, "2027-01-01T00:00:00.000Z"), 0);
        o = list(NULL, NULL);
        rows = json_get_array(o, "tasks");
        ck_assert_uint_eq(json_object_array_length(rows), 500);
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(rows, 0), "id"), "oc_003");
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(rows, 1), "id"), "oc_519");
        json_object_put(o);
}
END_TEST

START_TEST(a_row_follows_its_record) {
        Task *t = tf_task(&m, "{\"id\":\"oc_a\",\"status\":\"running\",\"changesetStatus\":\"none\",\"directory\":\"/w\"}");
        json_object *o = list(NULL, NULL);
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(json_get_array(o, "tasks"), 0), "status"), "running");
        json_object_put(o);
        ck_assert_int_eq(task_transition(t, TASK_DONE, CHANGESET_NONE), 1);
        ck_assert_int_eq(task_set_str(t, TASK_KEY_failure_reason, "oops"), 0);
        o = list(NULL, NULL);
        json_object *row = json_object_array_get_idx(json_get_array(o, "tasks"), 0);
        ck_assert_str_eq(json_get_string(row, "status"), "done");
        /* the serialized row too, not just the object */
        ck_assert_ptr_nonnull(strstr(json_object_to_json_string(o), "\"failureReason\":\"oops\""));
        ck_assert_int_eq(count(o, "done"), 1);
        ck_assert_int_eq(count(o, "running"), 0);
        json_object_put(o);
}
END_TEST

START_TEST(the_workspace_filter) {
        char *repo = tf_path(dir, "repo"), *sub = tf_path(dir, "repo/src"), *other = tf_path(dir, "other");
        tf_mkdirs(dir, "repo/src");
        tf_mkdirs(dir, "other");
        free(tf_sh(repo, "git init -q ."));
        tf_taskf(&m, "{\"id\":\"oc_top\",\"status\":\"done\",\"changesetStatus\":\"none\",\"directory\":\"%s\","
                     "\"startedAt\":\"2026-01-01T00:00:00.001Z\"}",
                 repo);
        tf_taskf(&m, "{\"id\":\"oc_sub\",\"status\":\"crashed\",\"changesetStatus\":\"none\",\"directory\":\"%s\","
                     "\"startedAt\":\"2026-01-01T00:00:00.002Z\"}",
                 sub);
        tf_taskf(&m, "{\"id\":\"oc_out\",\"status\":\"done\",\"changesetStatus\":\"none\",\"directory\":\"%s\","
                     "\"startedAt\":\"2026-01-01T00:00:00.003Z\"}",
                 other);
        tf_task(&m, "{\"id\":\"oc_nodir\",\"status\":\"done\",\"changesetStatus\":\"none\"}");
        json_object *o = list(repo, NULL);
        assert_rows(o, "oc_sub,oc_top");
        ck_assert_int_eq(count(o, "done"), 1); /* over the rows only */
        ck_assert_int_eq(count(o, "crashed"), 1);
        json_object_put(o);
        /* asked from the subdirectory: the same workspace */
        o = list(sub, NULL);
        assert_rows(o, "oc_sub,oc_top");
        json_object_put(o);
        /* outside any repository: that directory only */
        o = list(other, NULL);
        assert_rows(o, "oc_out");
        json_object_put(o);
        /* a directory that does not exist matches nothing */
        char *gone = tf_path(dir, "gone");
        o = list(gone, NULL);
        ck_assert_str_eq(json_get_string(o, "tasks"), "none found in this workspace");
        json_object_put(o);
        /* the repository moved away: the cached root is not trusted */
        char *moved = tf_path(dir, "moved");
        ck_assert_int_eq(rename(repo, moved), 0);
        tf_mkdirs(dir, "repo/src");
        o = list(repo, NULL);
        assert_rows(o, "oc_top"); /* repo and repo/src are plain directories now: only equal strings */
        json_object_put(o);
        o = list(sub, NULL);
        assert_rows(o, "oc_sub");
        json_object_put(o);
        free(moved);
        free(gone);
        free(repo);
        free(sub);
        free(other);
}
END_TEST

START_TEST(a_sandboxed_view) {
        tf_task(&m, "{\"id\":\"oc_me\",\"status\":\"running\",\"changesetStatus\":\"none\",\"directory\":\"/w\"}");
        tf_task(&m, "{\"id\":\"oc_kid\",\"status\":\"queued\",\"changesetStatus\":\"none\",\"directory\":\"/w\","
                    "\"dispatchedBy\":\"oc_me\"}");
        tf_task(&m, "{\"id\":\"oc_gk\",\"status\":\"queued\",\"changesetStatus\":\"none\",\"directory\":\"/w\","
                    "\"dispatchedBy\":\"oc_kid\"}");
        tf_task(&m, "{\"id\":\"oc_user\",\"status\":\"done\",\"changesetStatus\":\"none\",\"directory\":\"/w\"}");
        json_object *o = list(NULL, "oc_me");
        assert_rows(o, "oc_me,oc_kid"); /* no startedAt: ties, in table order */
        /* counts say nothing of the user's other tasks */
        ck_assert_int_eq(count(o, "done"), 0);
        ck_assert_int_eq(count(o, "queued"), 1);
        json_object_put(o);
        o = list(NULL, "");
        ck_assert_str_eq(json_get_string(o, "tasks"), "none found (this server process's lifetime)");
        ck_assert_int_eq(count(o, "done") + count(o, "queued") + count(o, "running"), 0);
        json_object_put(o);
        o = list("/w", "oc_kid");
        assert_rows(o, "oc_kid,oc_gk");
        json_object_put(o);
}
END_TEST

TF_MAIN("task-views", "task-views", setup, teardown, 60, summary_key_order, status_log_fields, an_event_past_64k_is_not_seen,
        empty_lists_say_so, rows_and_the_cap, a_row_follows_its_record, the_workspace_filter, a_sandboxed_view)
