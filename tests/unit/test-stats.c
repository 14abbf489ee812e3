/* stats.c: task.stats over the non-internal tasks. The user gets every
 * task's figures, the provider cooldowns and the scope limits; a caller on a
 * task's own socket gets only the tasks it may see (its own and those it
 * dispatched) and nothing of the daemon's state. */

#include <check.h>
#include <stdlib.h>

#include "api/methods.h"
#include "api/stats.h"
#include "daemon-fixture.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"

static Manager m;
static TfPeer peer;

static void setup(void) {
        tf_manager_setup(&m, "test-stats");
        peer = tf_peer_new(&m, 1);
        tf_task(&m, "{\"id\":\"oc_me\",\"status\":\"running\",\"changesetStatus\":\"none\",\"model\":\"a/one\","
                    "\"startedAt\":\"2026-01-01T00:00:00.000Z\",\"directory\":\"/w\"}");
        tf_task(&m, "{\"id\":\"oc_kid\",\"status\":\"crashed\",\"changesetStatus\":\"none\",\"model\":\"a/one\","
                    "\"failureReason\":\"rate_limit\",\"dispatchedBy\":\"oc_me\",\"startedAt\":\"2026-01-01T00:00:00.001Z\","
                    "\"directory\":\"/w\"}");
        tf_task(&m, "{\"id\":\"oc_u1\",\"status\":\"done\",\"changesetStatus\":\"none\",\"model\":\"b/two\","
                    "\"startedAt\":\"2026-01-01T00:00:00.002Z\",\"directory\":\"/secret\"}");
        tf_task(&m, "{\"id\":\"oc_u2\",\"status\":\"crashed\",\"changesetStatus\":\"none\",\"model\":\"b/two\","
                    "\"failureReason\":\"oom\",\"startedAt\":\"2026-01-01T00:00:00.003Z\",\"directory\":\"/secret\"}");
        tf_task(&m, "{\"id\":\"oc_sum\",\"status\":\"done\",\"changesetStatus\":\"none\",\"model\":\"c/summ\","
                    "\"summaryOf\":\"oc_u1\",\"internal\":true,\"startedAt\":\"2026-01-01T00:00:00.004Z\"}");
}

static void teardown(void) {
        tf_manager_teardown(&m);
        tf_peer_free(&peer);
}

static char *ids_of(json_object *rows) {
        char *s = strdup("");
        for (size_t i = 0; i < json_object_array_length(rows); i++) {
                char *n = strdup_printf("%s%s%s", s, *s ? "," : "", json_get_string(json_object_array_get_idx(rows, i), "id"));
                free(s);
                s = n;
        }
        return s;
}

START_TEST(rows_leave_out_internal_tasks) {
        json_object *rows = stats_rows(&m, NULL);
        char *ids = ids_of(rows);
        ck_assert_str_eq(ids, "oc_me,oc_kid,oc_u1,oc_u2");
        free(ids);
        json_object *row = json_object_array_get_idx(rows, 1);
        ck_assert_uint_eq(json_object_object_length(row), 6);
        ck_assert_str_eq(json_get_string(row, "failureReason"), "rate_limit");
        ck_assert_str_eq(json_get_string(row, "model"), "a/one");
        json_object_put(rows);
        rows = stats_rows(&m, "oc_me");
        ids = ids_of(rows);
        ck_assert_str_eq(ids, "oc_me,oc_kid");
        free(ids);
        json_object_put(rows);
        rows = stats_rows(&m, "");
        ck_assert_uint_eq(json_object_array_length(rows), 0);
        json_object_put(rows);
        /* a summary task's own tree is still internal */
        rows = stats_rows(&m, "oc_sum");
        ck_assert_uint_eq(json_object_array_length(rows), 0);
        json_object_put(rows);
}
END_TEST

static json_object *stats(void) {
        method_dispatch(&m, tf_request(&m, peer.conn, "{\"version\":1,\"id\":\"s\",\"method\":\"task.stats\",\"params\":{}}",
                                       false));
        json_object *f = tf_one_frame(peer.fd);
        ck_assert_msg(json_get_bool(f, "ok", false), "%s", json_object_to_json_string(f));
        json_object *res = json_object_get(json_get_object(f, "result"));
        json_object_put(f);
        return res;
}

static int64_t mix(json_object *o, const char *key) {
        return json_object_get_int64(json_get(json_get_object(json_get_object(o, "statusMix"), "overall"), key));
}

START_TEST(the_user_sees_everything) {
        json_object *o = stats();
        ck_assert_int_eq(mix(o, "total"), 4);
        ck_assert_int_eq(mix(o, "crashed"), 2);
        json_object *by = json_get_array(o, "byModel");
        ck_assert_uint_eq(json_object_array_length(by), 2);
        ck_assert_ptr_nonnull(json_get(o, "cooldowns"));
        ck_assert_ptr_nonnull(json_get(o, "resourceLimits"));
        ck_assert_ptr_nonnull(strstr(json_object_to_json_string(o), "oom"));
        /* a state journal the start found intact: nothing said */
        ck_assert_ptr_null(json_get(o, "stateJournal"));
        json_object_put(o);
        /* one it found torn: said, for doctor */
        m.store.journal_note = strdup("tasks.journal had a torn tail");
        o = stats();
        ck_assert_str_eq(json_get_string(o, "stateJournal"), "tasks.journal had a torn tail");
        json_object_put(o);
        /* never to a sandboxed caller */
        peer.conn->origin = manager_find_task(&m, "oc_me");
        o = stats();
        ck_assert_ptr_null(json_get(o, "stateJournal"));
        json_object_put(o);
}
END_TEST

START_TEST(a_sandboxed_caller_sees_its_tree_only) {
        peer.conn->origin = manager_find_task(&m, "oc_me");
        json_object *o = stats();
        ck_assert_int_eq(mix(o, "total"), 2);
        ck_assert_int_eq(mix(o, "crashed"), 1);
        ck_assert_int_eq(mix(o, "done"), 0);
        const char *text = json_object_to_json_string(o);
        /* nothing of the user's other tasks, their models or failures */
        ck_assert_ptr_null(strstr(text, "b/two"));
        ck_assert_ptr_null(strstr(text, "oom"));
        ck_assert_ptr_null(strstr(text, "oc_u"));
        /* nor of the daemon's state */
        ck_assert_ptr_null(json_get(o, "cooldowns"));
        ck_assert_ptr_null(json_get(o, "resourceLimits"));
        json_object_put(o);
        /* its child's socket sees the child alone */
        peer.conn->origin = manager_find_task(&m, "oc_kid");
        o = stats();
        ck_assert_int_eq(mix(o, "total"), 1);
        ck_assert_ptr_null(strstr(json_object_to_json_string(o), "\"oc_me\""));
        json_object_put(o);
}
END_TEST

TF_MAIN("stats", "stats", setup, teardown, 30, rows_leave_out_internal_tasks, the_user_sees_everything,
        a_sandboxed_caller_sees_its_tree_only)
