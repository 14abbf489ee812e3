/* handlers-summary.c: task.summary as a client and a hostile worker get it:
 * the wire's refusals (env with mode "activity", maxWords out of range), a
 * worker asking about a task it may not see (UNKNOWN_TASK, as for an id that
 * names nothing), a worker's summary cap, and the activity mode's answer. */

#include <check.h>
#include <stdlib.h>

#include "api/methods.h"
#include "daemon-fixture.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"

static Manager m;
static TfPeer peer;

static void setup(void) {
        tf_daemon_setup(&m, "test-handlers-summary");
        m.settings.max_concurrent_tasks = 0;
        peer = tf_peer_new(&m, 1);
        tf_task(&m, "{\"id\":\"oc_me\",\"status\":\"running\",\"changesetStatus\":\"none\",\"directory\":\"/w\"}");
        tf_task(&m, "{\"id\":\"oc_user\",\"status\":\"done\",\"changesetStatus\":\"none\",\"directory\":\"/secret\"}");
}

static void teardown(void) {
        tf_daemon_teardown(&m);
        tf_peer_free(&peer);
}

static json_object *call(const char *params) {
        char *line = strdup_printf("{\"version\":1,\"id\":\"s\",\"method\":\"task.summary\",\"params\":%s}", params);
        method_dispatch(&m, tf_request(&m, peer.conn, line, false));
        free(line);
        return tf_one_frame(peer.fd);
}

static void assert_error(json_object *f, const char *code, const char *message) {
        json_object *e = json_get_object(f, "error");
        ck_assert_msg(!json_get_bool(f, "ok", true) && streq_ptr(json_get_string(e, "code"), code) &&
                              streq_ptr(json_get_string(e, "message"), message),
                      "%s\nwanted %s: %s", json_object_to_json_string(f), code, message);
        json_object_put(f);
}

static void assert_wire_refuses(const char *params, const char *message, const char *help) {
        char *line = strdup_printf("{\"version\":1,\"id\":\"s\",\"method\":\"task.summary\",\"params\":%s}", params);
        proto_request req = {0};
        json_object *err = NULL;
        ck_assert_msg(proto_parse_request(line, strlen(line), &req, &err) < 0, "%s accepted", params);
        json_object *e = json_get_object(err, "error");
        ck_assert_str_eq(json_get_string(e, "code"), "INVALID_PARAMS");
        ck_assert_str_eq(json_get_string(e, "message"), message);
        if (help) ck_assert_str_eq(json_get_string(e, "help"), help);
        json_object_put(err);
        free(line);
}

START_TEST(the_wire_refuses) {
        assert_wire_refuses("{\"taskId\":\"oc_me\",\"mode\":\"activity\",\"env\":{\"A\":\"b\"}}",
                            "task.summary does not accept env with mode \"activity\"",
                            "Omit env, or use mode \"report\" so the spawned summary child can forward caller env");
        assert_wire_refuses("{\"taskId\":\"oc_me\",\"maxWords\":74}", "invalid params for task.summary", NULL);
        assert_wire_refuses("{\"taskId\":\"oc_me\",\"maxWords\":301}", "invalid params for task.summary", NULL);
        assert_wire_refuses("{\"taskId\":\"oc_me\",\"mode\":\"full\"}", "invalid params for task.summary", NULL);
        assert_wire_refuses("{\"taskId\":\"oc_me\",\"internal\":true}", "invalid params for task.summary", NULL);
        assert_wire_refuses("{\"taskId\":\"\"}", "invalid params for task.summary", NULL);
}
END_TEST

START_TEST(a_worker_summarizes_only_what_it_may_see) {
        peer.conn->origin = manager_find_task(&m, "oc_me");
        assert_error(call("{\"taskId\":\"oc_user\"}"), "UNKNOWN_TASK", "unknown task id: oc_user");
        assert_error(call("{\"taskId\":\"oc_user\",\"mode\":\"activity\"}"), "UNKNOWN_TASK", "unknown task id: oc_user");
        assert_error(call("{\"taskId\":\"oc_nope\"}"), "UNKNOWN_TASK", "unknown task id: oc_nope");
        /* nothing was started on its behalf */
        ck_assert_uint_eq(m.n_tasks, 2);
        ck_assert_ptr_null(m.jobs);
}
END_TEST

START_TEST(a_workers_summary_cap) {
        peer.conn->origin = manager_find_task(&m, "oc_me");
        for (int i = 0; i < SUMMARY_NESTED_MAX; i++)
                tf_taskf(&m, "{\"id\":\"oc_s%d\",\"status\":\"running\",\"changesetStatus\":\"none\",\"summaryOf\":"
                             "\"oc_me\",\"internal\":true,\"dispatchedBy\":\"oc_me\"}",
                         i);
        assert_error(call("{\"taskId\":\"oc_me\"}"), "SERVER_BUSY", "this task has too many summaries queued or running");
        ck_assert_ptr_null(m.jobs);
}
END_TEST

START_TEST(activity_mode_answers_at_once) {
        json_object *f = call("{\"taskId\":\"oc_user\",\"mode\":\"activity\"}");
        ck_assert_msg(json_get_bool(f, "ok", false), "%s", json_object_to_json_string(f));
        json_object *r = json_get_object(f, "result");
        ck_assert_str_eq(json_get_string(r, "sourceTaskId"), "oc_user");
        ck_assert_str_eq(json_get_string(r, "sourceStatus"), "done");
        json_object_put(f);
}
END_TEST

TF_MAIN("handlers-summary", "summary", setup, teardown, 30, the_wire_refuses, a_worker_summarizes_only_what_it_may_see,
        a_workers_summary_cap, activity_mode_answers_at_once)
