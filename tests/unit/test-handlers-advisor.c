/* handlers-advisor.c: task.advisor through a whole daemon's modules: the
 * call parks until its task settles or its timeout (0 here: at once, the task
 * still queued, since nothing may launch), answered with the advisor's
 * snake_case object; a session it does not hold is never resumed, and a
 * worker's advisor is its own and stays in its directory. */

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
static char *work;

static void setup(void) {
        tf_daemon_setup(&m, "test-handlers-advisor");
        m.settings.max_concurrent_tasks = 0;
        work = strdup_printf("%s/work", m.paths.home);
        ck_assert_int_eq(mkdir(work, 0755), 0);
        peer = tf_peer_new(&m, 1);
}

static void teardown(void) {
        tf_daemon_teardown(&m);
        tf_peer_free(&peer);
        free(work);
}

static json_object *advise(const char *dir, const char *extra) {
        char *line = strdup_printf("{\"version\":1,\"id\":\"a\",\"method\":\"task.advisor\",\"params\":{\"prompt\":\"why?\","
                                   "\"directory\":\"%s\",\"model\":\"a/b\",\"timeoutMs\":0%s}}",
                                   dir, extra);
        json_object *f = tf_call_frame(&m, &peer, line, 5000);
        free(line);
        return f;
}

static json_object *result_of(json_object *f) {
        ck_assert_msg(json_get_bool(f, "ok", false), "%s", json_object_to_json_string(f));
        return json_get_object(f, "result");
}

START_TEST(a_call_answered_at_its_timeout) {
        json_object *f = advise(work, "");
        json_object *r = result_of(f);
        ck_assert_str_eq(json_get_string(r, "status"), "queued");
        const char *id = json_get_string(r, "task_id");
        Task *t = manager_find_task(&m, id);
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->kind, TASK_KIND_ADVISOR);
        /* no session yet: the worker has not said one */
        ck_assert(json_object_is_type(json_get(r, "session_id"), json_type_null));
        ck_assert(!json_get_bool(r, "session_reset", true));
        ck_assert_ptr_nonnull(strstr(json_get_string(r, "note"), "still queued"));
        json_object_put(f);
}
END_TEST

/* A session the advisor does not hold (expired, another owner's, made up)
 * is never handed to the worker: a fresh one, said as session_reset. */
START_TEST(an_unknown_session_is_not_resumed) {
        json_object *f = advise(work, ",\"sessionId\":\"ses_someone_elses\"");
        json_object *r = result_of(f);
        ck_assert(json_get_bool(r, "session_reset", false));
        Task *t = manager_find_task(&m, json_get_string(r, "task_id"));
        ck_assert(!streq_ptr(t->rec.session_id, "ses_someone_elses"));
        json_object_put(f);
        /* the same from a worker, whose advisor is its own */
        peer.conn->origin = tf_taskf(&m, "{\"id\":\"oc_me\",\"status\":\"running\",\"changesetStatus\":\"pending\","
                                         "\"directory\":\"%s\"}",
                                     work);
        f = advise(work, ",\"sessionId\":\"ses_someone_elses\"");
        r = result_of(f);
        ck_assert(json_get_bool(r, "session_reset", false));
        t = manager_find_task(&m, json_get_string(r, "task_id"));
        ck_assert(!streq_ptr(t->rec.session_id, "ses_someone_elses"));
        ck_assert_str_eq(t->rec.dispatched_by, "oc_me");
        json_object_put(f);
}
END_TEST

START_TEST(a_workers_advisor_stays_in_its_directory) {
        peer.conn->origin = tf_taskf(&m, "{\"id\":\"oc_me\",\"status\":\"running\",\"changesetStatus\":\"pending\","
                                         "\"directory\":\"%s\"}",
                                     work);
        size_t before = m.n_tasks;
        json_object *f = advise(m.paths.home, "");
        ck_assert(!json_get_bool(f, "ok", true));
        ck_assert_str_eq(json_get_string(json_get_object(f, "error"), "code"), "REQUEST_FAILED");
        ck_assert_ptr_nonnull(strstr(json_get_string(json_get_object(f, "error"), "message"), m.paths.home));
        json_object_put(f);
        ck_assert_uint_eq(m.n_tasks, before);
        /* and the wire has no way to widen it */
        char *line = strdup_printf("{\"version\":1,\"id\":\"a\",\"method\":\"task.advisor\",\"params\":{\"prompt\":\"x\","
                                   "\"directory\":\"%s\",\"model\":\"a/b\",\"noSandbox\":true}}",
                                   work);
        proto_request req = {0};
        json_object *err = NULL;
        ck_assert_int_lt(proto_parse_request(line, strlen(line), &req, &err), 0);
        ck_assert_str_eq(json_get_string(json_get_object(err, "error"), "code"), "INVALID_PARAMS");
        json_object_put(err);
        free(line);
}
END_TEST

TF_MAIN("handlers-advisor", "advisor", setup, teardown, 30, a_call_answered_at_its_timeout,
        an_unknown_session_is_not_resumed, a_workers_advisor_stays_in_its_directory)
