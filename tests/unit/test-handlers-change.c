/* handlers-change.c: task.cancel, task.accept and task.reject through the
 * method table of a whole daemon. The refusals a client gets (unknown task,
 * wrong changeset state, a task still running, an advisor's changeset, a
 * diff never extracted), and what a worker on its task's socket may decide:
 * cancel or reject what it dispatched, never accept, never touch itself or
 * a task it cannot see. */

#include <check.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "api/methods.h"
#include "daemon-fixture.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"

static Manager m;
static TfPeer peer;

static void setup(void) {
        tf_daemon_setup(&m, "test-handlers-change");
        m.settings.max_concurrent_tasks = 0;
        peer = tf_peer_new(&m, 1);
        tf_task(&m, "{\"id\":\"oc_me\",\"status\":\"running\",\"changesetStatus\":\"pending\",\"directory\":\"/w\"}");
        tf_task(&m, "{\"id\":\"oc_kid\",\"status\":\"done\",\"changesetStatus\":\"pending\",\"directory\":\"/w\","
                    "\"dispatchedBy\":\"oc_me\",\"diffPath\":\"/nonexistent/kid.diff\"}");
        tf_task(&m, "{\"id\":\"oc_q\",\"status\":\"queued\",\"changesetStatus\":\"none\",\"directory\":\"/w\","
                    "\"dispatchedBy\":\"oc_me\"}");
        tf_task(&m, "{\"id\":\"oc_user\",\"status\":\"done\",\"changesetStatus\":\"pending\",\"directory\":\"/w\"}");
        tf_task(&m, "{\"id\":\"oc_none\",\"status\":\"done\",\"changesetStatus\":\"none\",\"directory\":\"/w\"}");
        tf_task(&m, "{\"id\":\"oc_adv\",\"status\":\"done\",\"changesetStatus\":\"pending\",\"role\":\"advisor\","
                    "\"directory\":\"/w\"}");
        tf_task(&m, "{\"id\":\"oc_nodiff\",\"status\":\"crashed\",\"changesetStatus\":\"pending\",\"directory\":\"/w\","
                    "\"changesetError\":\"disk full\"}");
}

static void teardown(void) {
        tf_peer_free(&peer);
        tf_daemon_teardown(&m);
}

static json_object *call(const char *method, const char *task_id) {
        char *line = strdup_printf("{\"version\":1,\"id\":\"c\",\"method\":\"%s\",\"params\":{\"taskId\":\"%s\"}}", method,
                                   task_id);
        json_object *f = tf_call_frame(&m, &peer, line, 10000);
        free(line);
        return f;
}

static void assert_refused(const char *method, const char *task_id, const char *code, const char *message) {
        json_object *f = call(method, task_id);
        json_object *e = json_get_object(f, "error");
        ck_assert_msg(!json_get_bool(f, "ok", true) && streq_ptr(json_get_string(e, "code"), code) &&
                              streq_ptr(json_get_string(e, "message"), message),
                      "%s %s: %s\nwanted %s: %s", method, task_id, json_object_to_json_string(f), code, message);
        json_object_put(f);
}

static json_object *ok(const char *method, const char *task_id) {
        json_object *f = call(method, task_id);
        ck_assert_msg(json_get_bool(f, "ok", false), "%s %s: %s", method, task_id, json_object_to_json_string(f));
        json_object *r = json_object_get(json_get_object(f, "result"));
        json_object_put(f);
        return r;
}

START_TEST(refusals_a_client_gets) {
        static const char *const methods[] = {"task.cancel", "task.accept", "task.reject"};
        for (size_t i = 0; i < ELEMENTSOF(methods); i++)
                assert_refused(methods[i], "oc_missing", "UNKNOWN_TASK", "unknown task id: oc_missing");
        assert_refused("task.accept", "oc_none", "REQUEST_FAILED", "task oc_none has no pending changeset (changesetStatus: none)");
        assert_refused("task.reject", "oc_none", "REQUEST_FAILED", "task oc_none has no pending changeset (changesetStatus: none)");
        assert_refused("task.accept", "oc_me", "REQUEST_FAILED", "task oc_me is still running; its changeset is not extracted yet");
        assert_refused("task.reject", "oc_me", "REQUEST_FAILED", "task oc_me is still running; its changeset is not extracted yet");
        assert_refused("task.accept", "oc_adv", "REQUEST_FAILED", "task oc_adv has role \"advisor\" and cannot be accepted");
        assert_refused("task.accept", "oc_nodiff", "REQUEST_FAILED",
                       "changeset for task oc_nodiff was never extracted (disk full); its overlay is preserved at (none)");
        assert_refused("task.accept", "oc_kid", "REQUEST_FAILED",
                       "the diff of task oc_kid is missing at /nonexistent/kid.diff; the changeset cannot be applied without its diff");
        /* none of them changed a thing */
        ck_assert_int_eq(manager_find_task(&m, "oc_kid")->rec.changeset_status, CHANGESET_PENDING);
        ck_assert_int_eq(manager_find_task(&m, "oc_me")->rec.status, TASK_RUNNING);
        json_object *r = ok("task.cancel", "oc_none");
        ck_assert_str_eq(json_get_string(r, "note"), "task is already done; nothing to cancel");
        json_object_put(r);
}
END_TEST

START_TEST(the_user_rejects) {
        json_object *r = ok("task.reject", "oc_user");
        ck_assert_str_eq(json_get_string(r, "taskId"), "oc_user");
        ck_assert_str_eq(json_get_string(r, "changesetStatus"), "rejected");
        json_object_put(r);
        ck_assert_int_eq(manager_find_task(&m, "oc_user")->rec.changeset_status, CHANGESET_REJECTED);
        /* once */
        assert_refused("task.reject", "oc_user", "REQUEST_FAILED",
                       "task oc_user has no pending changeset (changesetStatus: rejected)");
}
END_TEST

START_TEST(a_worker_decides_on_what_it_dispatched_only) {
        peer.conn->origin = manager_find_task(&m, "oc_me");
        /* the user's tasks are not there for it */
        assert_refused("task.reject", "oc_user", "UNKNOWN_TASK", "unknown task id: oc_user");
        assert_refused("task.accept", "oc_user", "UNKNOWN_TASK", "unknown task id: oc_user");
        assert_refused("task.cancel", "oc_user", "UNKNOWN_TASK", "unknown task id: oc_user");
        /* never accept, even its own child's */
        assert_refused("task.accept", "oc_kid", "REQUEST_FAILED", "a task running in a sandbox cannot accept changesets");
        /* nor decide on itself */
        assert_refused("task.cancel", "oc_me", "REQUEST_FAILED",
                       "a task running in a sandbox can only cancel tasks it dispatched itself, and oc_me was not "
                       "dispatched by it");
        assert_refused("task.reject", "oc_me", "REQUEST_FAILED",
                       "a task running in a sandbox can only reject tasks it dispatched itself, and oc_me was not "
                       "dispatched by it");
        ck_assert_int_eq(manager_find_task(&m, "oc_user")->rec.changeset_status, CHANGESET_PENDING);
        ck_assert_int_eq(manager_find_task(&m, "oc_me")->rec.status, TASK_RUNNING);
        ck_assert_int_eq(manager_find_task(&m, "oc_kid")->rec.changeset_status, CHANGESET_PENDING);
        /* what it dispatched: cancel and reject */
        json_object *r = ok("task.cancel", "oc_q");
        ck_assert_str_eq(json_get_string(r, "note"), "queued task cancelled before launch");
        ck_assert_str_eq(json_get_string(r, "status"), "cancelled");
        json_object_put(r);
        r = ok("task.reject", "oc_kid");
        ck_assert_str_eq(json_get_string(r, "changesetStatus"), "rejected");
        json_object_put(r);
        /* a child's socket cannot decide on its parent's other children */
        peer.conn->origin = manager_find_task(&m, "oc_kid");
        assert_refused("task.cancel", "oc_q", "UNKNOWN_TASK", "unknown task id: oc_q");
}
END_TEST

TF_MAIN("handlers-change", "change", setup, teardown, 60, refusals_a_client_gets, the_user_rejects,
        a_worker_decides_on_what_it_dispatched_only)
