/* handlers-query.c: system.health, task.status, task.list and task.result
 * through the method table, as a client gets them: from the user, and from a
 * hostile worker on its task's own socket, which learns nothing of tasks it
 * may not see (the same UNKNOWN_TASK as for an id that names nothing). */

#include <check.h>
#include <stdlib.h>
#include <unistd.h>

#include "api/methods.h"
#include "daemon-fixture.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"

static Manager m;
static TfPeer peer;
static char *dir;

static void setup(void) {
        tf_manager_setup(&m, "test-handlers-query");
        dir = m.paths.state_dir;
        peer = tf_peer_new(&m, 1);
        tf_task(&m, "{\"id\":\"oc_me\",\"status\":\"running\",\"changesetStatus\":\"none\",\"directory\":\"/w\"}");
        tf_task(&m, "{\"id\":\"oc_kid\",\"status\":\"queued\",\"changesetStatus\":\"none\",\"directory\":\"/w\","
                    "\"dispatchedBy\":\"oc_me\"}");
        tf_task(&m, "{\"id\":\"oc_user\",\"status\":\"done\",\"changesetStatus\":\"none\",\"directory\":\"/secret\","
                    "\"promptPreview\":\"the user's secret prompt\"}");
}

static void teardown(void) {
        tf_manager_teardown(&m);
        ck_assert_uint_eq(peer.conn->n_ref, 1);
        tf_peer_free(&peer);
}

/* Send method(params) on the peer; the one frame it is answered with
 * (driving the loop, for at most 10 s, when a job answers it). */
static json_object *call(const char *method, const char *params) {
        char *line = strdup_printf("{\"version\":1,\"id\":\"q\",\"method\":\"%s\",\"params\":%s}", method, params);
        json_object *f = tf_call_frame(&m, &peer, line, 10000);
        free(line);
        ck_assert_str_eq(json_get_string(f, "id"), "q");
        return f;
}

static json_object *result_of(json_object *f) {
        ck_assert_msg(json_get_bool(f, "ok", false), "%s", json_object_to_json_string(f));
        return json_get_object(f, "result");
}

static void assert_error(json_object *f, const char *code, const char *message) {
        ck_assert_msg(!json_get_bool(f, "ok", true), "%s", json_object_to_json_string(f));
        json_object *e = json_get_object(f, "error");
        ck_assert_msg(streq_ptr(json_get_string(e, "code"), code), "%s", json_object_to_json_string(f));
        ck_assert_str_eq(json_get_string(e, "message"), message);
}

START_TEST(health_is_three_keys) {
        json_object *f = call("system.health", "{}");
        json_object *r = result_of(f);
        ck_assert_uint_eq(json_object_object_length(r), 3);
        ck_assert(json_get_bool(r, "healthy", false));
        ck_assert_int_eq(json_object_get_int64(json_get(r, "pid")), getpid());
        ck_assert_int_eq(json_object_get_int64(json_get(r, "version")), 1);
        json_object_put(f);
}
END_TEST

/* method on task id answers UNKNOWN_TASK. */
static void assert_unknown(const char *method, const char *id) {
        char *params = strdup_printf("{\"taskId\":\"%s\"}", id);
        char *message = strdup_printf("unknown task id: %s", id);
        json_object *f = call(method, params);
        assert_error(f, "UNKNOWN_TASK", message);
        json_object_put(f);
        free(message);
        free(params);
}

START_TEST(status_of_what_a_caller_may_see) {
        json_object *f = call("task.status", "{\"taskId\":\"oc_user\"}");
        ck_assert_str_eq(json_get_string(result_of(f), "promptPreview"), "the user's secret prompt");
        ck_assert_ptr_nonnull(json_get(result_of(f), "logHasEvent"));
        json_object_put(f);
        assert_unknown("task.status", "oc_nope");
        /* a worker on its socket: its own and its child, never the user's */
        peer.conn->origin = manager_find_task(&m, "oc_me");
        f = call("task.status", "{\"taskId\":\"oc_kid\"}");
        ck_assert_str_eq(json_get_string(result_of(f), "status"), "queued");
        json_object_put(f);
        f = call("task.status", "{\"taskId\":\"oc_user\"}");
        assert_error(f, "UNKNOWN_TASK", "unknown task id: oc_user"); /* as if it did not exist */
        ck_assert_ptr_null(strstr(json_object_to_json_string(f), "secret"));
        json_object_put(f);
        /* an id that is a prefix, or differs in case: no match either */
        assert_unknown("task.status", "oc_m");
        assert_unknown("task.result", "oc_user");
        /* the child's socket does not see its parent */
        peer.conn->origin = manager_find_task(&m, "oc_kid");
        assert_unknown("task.status", "oc_me");
}
END_TEST

static char *ids(json_object *res) {
        json_object *rows = json_get_array(res, "tasks");
        char *s = strdup("");
        for (size_t i = 0; rows && i < json_object_array_length(rows); i++) {
                char *n = strdup_printf("%s%s%s", s, *s ? "," : "", json_get_string(json_object_array_get_idx(rows, i), "id"));
                free(s);
                s = n;
        }
        return s;
}

START_TEST(list_from_a_sandbox) {
        json_object *f = call("task.list", "{}");
        char *got = ids(result_of(f));
        ck_assert_str_eq(got, "oc_me,oc_kid,oc_user"); /* no startedAt: ties, table order */
        free(got);
        json_object_put(f);
        peer.conn->origin = manager_find_task(&m, "oc_me");
        f = call("task.list", "{}");
        got = ids(result_of(f));
        ck_assert_str_eq(got, "oc_me,oc_kid");
        free(got);
        ck_assert_ptr_null(strstr(json_object_to_json_string(f), "secret"));
        ck_assert_int_eq(json_object_get_int64(json_get(json_get_object(result_of(f), "counts"), "done")), 0);
        json_object_put(f);
        /* naming the user's directory does not widen it */
        f = call("task.list", "{\"directory\":\"/secret\"}");
        ck_assert_str_eq(json_get_string(result_of(f), "tasks"), "none found in this workspace");
        json_object_put(f);
}
END_TEST

START_TEST(result_of_an_unsettled_task) {
        json_object *f = call("task.result", "{\"taskId\":\"oc_me\"}");
        json_object *r = result_of(f);
        ck_assert_uint_eq(json_object_object_length(r), 3);
        ck_assert_str_eq(json_get_string(r, "message"), "task is still running; poll taskferry status first");
        json_object_put(f);
        f = call("task.result", "{\"taskId\":\"oc_kid\",\"fields\":[\"diff\",\"message\"]}");
        r = result_of(f);
        ck_assert_str_eq(json_object_to_json_string_ext(r, JSON_C_TO_STRING_PLAIN),
                         "{\"taskId\":\"oc_kid\",\"status\":\"queued\",\"diff\":null,"
                         "\"message\":\"task is still queued; poll taskferry status first\"}");
        json_object_put(f);
        f = call("task.result", "{\"taskId\":\"oc_me\",\"full\":true,\"fields\":[\"message\"]}");
        assert_error(f, "REQUEST_FAILED", "full requires narration in fields");
        json_object_put(f);
}
END_TEST

START_TEST(result_of_a_settled_task) {
        char *log = tf_put(dir, "t.log",
                           "{\"type\":\"text\",\"part\":{\"messageID\":\"m1\",\"text\":\"all done\"}}\n", 59);
        const char *patch = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1,2 @@\n a\n+b\n";
        char *diff = tf_put(dir, "t.diff", patch, strlen(patch));
        tf_taskf(&m, "{\"id\":\"oc_s\",\"status\":\"done\",\"changesetStatus\":\"pending\",\"directory\":\"/w\","
                     "\"logPath\":\"%s\",\"diffPath\":\"%s\"}",
                 log, diff);
        json_object *f = call("task.result", "{\"taskId\":\"oc_s\"}");
        json_object *r = result_of(f);
        ck_assert_str_eq(json_get_string(r, "message"), "all done");
        ck_assert_str_eq(json_get_string(r, "diff"), patch);
        ck_assert_int_eq(json_object_get_int64(json_get(json_get_object(r, "diffStat"), "additions")), 1);
        ck_assert(!json_get_bool(r, "narrationTruncated", true));
        json_object_put(f);
        /* projected */
        f = call("task.result", "{\"taskId\":\"oc_s\",\"fields\":[\"message\",\"exitCode\"]}");
        ck_assert_str_eq(json_object_to_json_string_ext(result_of(f), JSON_C_TO_STRING_PLAIN),
                         "{\"taskId\":\"oc_s\",\"status\":\"done\",\"message\":\"all done\",\"exitCode\":null}");
        json_object_put(f);
        free(log);
        free(diff);
}
END_TEST

START_TEST(a_patch_past_the_frame_budget_is_never_read) {
        size_t n = 1100 * 1024;
        char *big = malloc(n);
        memset(big, '+', n);
        char *diff = tf_put(dir, "big.diff", big, n);
        free(big);
        /* its log was never written (a missing log is no error) */
        tf_taskf(&m, "{\"id\":\"oc_big\",\"status\":\"done\",\"changesetStatus\":\"pending\",\"directory\":\"/w\","
                     "\"diffPath\":\"%s\",\"logPath\":\"%s/none.log\"}",
                 diff, dir);
        json_object *f = call("task.result", "{\"taskId\":\"oc_big\"}");
        assert_error(f, "RESPONSE_TOO_LARGE", "daemon response for this request exceeds 1048576 bytes");
        json_object_put(f);
        /* without the diff it is answered */
        f = call("task.result", "{\"taskId\":\"oc_big\",\"fields\":[\"exitCode\"]}");
        ck_assert_str_eq(json_get_string(result_of(f), "status"), "done");
        json_object_put(f);
        free(diff);
}
END_TEST

TF_MAIN("handlers-query", "query", setup, teardown, 60, health_is_three_keys, status_of_what_a_caller_may_see,
        list_from_a_sandbox, result_of_an_unsettled_task, result_of_a_settled_task,
        a_patch_past_the_frame_budget_is_never_read)
