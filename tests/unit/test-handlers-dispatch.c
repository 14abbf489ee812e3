/* handlers-dispatch.c: task.dispatch end to end through a whole daemon's
 * modules: the params a client sends, the policy, task_new, and the reply
 * after the scheduler's tick (nothing launches: no slot). The refusals a
 * client gets, with their codes and messages; and what a hostile worker on
 * its task's own socket may not do: widen its sandbox (noSandbox, noOverlay,
 * rwBind, roBind, allowedDirs), leave its directory, raise its limits,
 * dispatch as a timer job, inherit from a session it may not see, or go past
 * the nested-task cap. */

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "api/methods.h"
#include "daemon-fixture.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"

static bool strstarts(const char *s, const char *prefix) { return s && strncmp(s, prefix, strlen(prefix)) == 0; }

/* s with each WORK replaced by with (at most one), malloc'd. */
static char *strreplace(const char *s, const char *what, const char *with) {
        const char *at = strstr(s, what);
        if (!at) return strdup(s);
        return strdup_printf("%.*s%s%s", (int) (at - s), s, with, at + strlen(what));
}

static Manager m;
static TfPeer peer;
static char *work;

static void setup(void) {
        tf_daemon_setup(&m, "test-handlers-dispatch");
        m.settings.max_concurrent_tasks = 0; /* every task stays queued */
        work = strdup_printf("%s/work", m.paths.home);
        ck_assert_int_eq(mkdir(work, 0755), 0);
        tf_mkdirs(work, "sub");
        peer = tf_peer_new(&m, 1);
}

static void teardown(void) {
        tf_peer_free(&peer);
        tf_daemon_teardown(&m);
        free(work);
}

/* One dispatch with these params (JSON text); its one reply frame, after
 * the loop ran until it came (at most 5 s). */
static json_object *dispatch(const char *params) {
        char *line = strdup_printf("{\"version\":1,\"id\":\"d\",\"method\":\"task.dispatch\",\"params\":%s}", params);
        json_object *f = tf_call_frame(&m, &peer, line, 5000);
        free(line);
        return f;
}

static json_object *dispatchf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_object *dispatchf(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *p = NULL;
        ck_assert_int_ge(vasprintf(&p, fmt, ap), 0);
        va_end(ap);
        json_object *f = dispatch(p);
        free(p);
        return f;
}

static void assert_refused(json_object *f, const char *code, const char *message) {
        ck_assert_msg(!json_get_bool(f, "ok", true), "accepted: %s", json_object_to_json_string(f));
        json_object *e = json_get_object(f, "error");
        ck_assert_msg(streq_ptr(json_get_string(e, "code"), code) && streq_ptr(json_get_string(e, "message"), message),
                      "%s\nwanted %s: %s", json_object_to_json_string(f), code, message);
        json_object_put(f);
}

static Task *accepted(json_object *f) {
        ck_assert_msg(json_get_bool(f, "ok", false), "%s", json_object_to_json_string(f));
        Task *t = manager_find_task(&m, json_get_string(json_get_object(f, "result"), "id"));
        ck_assert_ptr_nonnull(t);
        json_object_put(f);
        return t;
}

START_TEST(a_dispatch_is_queued_and_answered_after_the_tick) {
        size_t before = m.n_tasks;
        char *line = strdup_printf("{\"version\":1,\"id\":\"d\",\"method\":\"task.dispatch\",\"params\":{\"prompt\":"
                                   "\"do it\",\"directory\":\"%s\",\"model\":\"prov/model\"}}",
                                   work);
        method_dispatch(&m, tf_request(&m, peer.conn, line, false));
        free(line);
        /* the task exists, durably, before the reply */
        ck_assert_uint_eq(m.n_tasks, before + 1);
        json_object *arr = tf_frames(peer.fd);
        ck_assert_uint_eq(json_object_array_length(arr), 0);
        json_object_put(arr);
        tf_run_pending(&m);
        json_object *f = tf_one_frame(peer.fd);
        json_object *r = json_get_object(f, "result");
        ck_assert_str_eq(json_get_string(r, "status"), "queued");
        ck_assert_str_eq(json_get_string(r, "directory"), work);
        ck_assert_str_eq(json_get_string(r, "model"), "prov/model");
        Task *t = manager_find_task(&m, json_get_string(r, "id"));
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->kind, TASK_KIND_DISPATCH);
        ck_assert_ptr_null(t->rec.dispatched_by);
        char *next = strdup_printf(
                "Task is queued; run taskferry wait or taskferry status with task id \"%s\" to check when it starts", t->id);
        ck_assert_str_eq(json_get_string(r, "next"), next);
        free(next);
        ck_assert_ptr_eq(m.tasks[m.n_tasks - 1], t);
        ck_assert_uint_eq(m.server->in_flight, 0);
        json_object_put(f);
}
END_TEST

START_TEST(a_huge_prompt_is_previewed) {
        size_t n = 600 * 1024;
        char *prompt = malloc(n + 1);
        memset(prompt, 'p', n);
        prompt[n] = 0;
        json_object *f = dispatchf("{\"prompt\":\"%s\",\"directory\":\"%s\",\"model\":\"a/b\"}", prompt, work);
        free(prompt);
        json_object *r = json_get_object(f, "result");
        const char *preview = json_get_string(r, "promptPreview");
        ck_assert_uint_eq(strlen(preview), 200 + 3); /* 200 chars and "…" */
        ck_assert_int_eq(json_object_get_int64(json_get(r, "promptTotalChars")), (int64_t) n);
        accepted(f);
}
END_TEST

START_TEST(refusals_a_client_gets) {
        char *gone = strdup_printf("%s/gone", work);
        char *msg = strdup_printf("directory does not exist: %s", gone);
        assert_refused(dispatchf("{\"prompt\":\"x\",\"directory\":\"%s\",\"model\":\"a/b\"}", gone), "REQUEST_FAILED", msg);
        free(msg);
        free(gone);
        assert_refused(dispatchf("{\"prompt\":\"x\",\"directory\":\"%s\",\"executor\":\"opencode\"}", work), "REQUEST_FAILED",
                       "--model is required");
        assert_refused(dispatchf("{\"prompt\":\"x\",\"directory\":\"%s\",\"sessionId\":\"ses_none\"}", work),
                       "REQUEST_FAILED", "no task found for session id \"ses_none\" to inherit a model from");
        msg = strdup_printf("directory %s overlaps the state dir (%s)", m.paths.state_dir, m.paths.state_dir);
        assert_refused(dispatchf("{\"prompt\":\"x\",\"directory\":\"%s\",\"model\":\"a/b\"}", m.paths.state_dir),
                       "REQUEST_FAILED", msg);
        free(msg);
        /* its parent contains the state dir too */
        char *home_parent = strdup_printf("%s/..", m.paths.home);
        char *real = realpath(home_parent, NULL);
        msg = strdup_printf("directory %s overlaps the state dir (%s)", real, m.paths.state_dir);
        assert_refused(dispatchf("{\"prompt\":\"x\",\"directory\":\"%s\",\"model\":\"a/b\"}", home_parent), "REQUEST_FAILED",
                       msg);
        free(msg);
        free(real);
        free(home_parent);
        json_object *f = dispatchf("{\"prompt\":\"x\",\"directory\":\"%s\",\"model\":\"a/b\",\"finalMarker\":\"(\"}", work);
        ck_assert(!json_get_bool(f, "ok", true));
        ck_assert(strstarts(json_get_string(json_get_object(f, "error"), "message"),
                            "--require-final-marker is not a valid regular expression: "));
        json_object_put(f);
        /* nothing was made */
        ck_assert_uint_eq(m.n_tasks, 0);
}
END_TEST

/* Params the wire refuses before any handler: INVALID_PARAMS. */
static const char *const bad_params[] = {
        "{\"prompt\":5,\"directory\":\"/w\"}",
        "{\"prompt\":\"\",\"directory\":\"/w\"}",
        "{\"prompt\":\"x\",\"directory\":\"relative\"}",
        "{\"prompt\":\"x\"}",
        "{\"prompt\":\"x\",\"directory\":\"/w\",\"noSandbox\":\"yes\"}",
        "{\"prompt\":\"x\",\"directory\":\"/w\",\"noSandbox\":null}",
        "{\"prompt\":\"x\",\"directory\":\"/w\",\"rwBind\":[]}",
        "{\"prompt\":\"x\",\"directory\":\"/w\",\"rwBind\":\"/etc\"}",
        "{\"prompt\":\"x\",\"directory\":\"/w\",\"rwBind\":[\"\"]}",
        "{\"prompt\":\"x\",\"directory\":\"/w\",\"env\":{\"A=B\":\"c\"}}",
        "{\"prompt\":\"x\",\"directory\":\"/w\",\"env\":{\"A\":1}}",
        "{\"prompt\":\"x\",\"directory\":\"/w\",\"executor\":\"bash\"}",
        "{\"prompt\":\"x\",\"directory\":\"/w\",\"internal\":true}",
        "{\"prompt\":\"x\",\"directory\":\"/w\",\"role\":\"advisor\"}",
        "{\"prompt\":\"x\",\"directory\":\"/w\",\"dispatchedBy\":\"oc_x\"}",
        "[\"prompt\"]",
};

START_TEST(the_wire_refuses_bad_params) {
        char *line = strdup_printf("{\"version\":1,\"id\":\"d\",\"method\":\"task.dispatch\",\"params\":%s}", bad_params[_i]);
        proto_request req = {0};
        json_object *err = NULL;
        int k = proto_parse_request(line, strlen(line), &req, &err);
        ck_assert_msg(k < 0, "%s was accepted", bad_params[_i]);
        const char *code = json_get_string(json_get_object(err, "error"), "code");
        ck_assert_msg(streq_ptr(code, "INVALID_PARAMS") || streq_ptr(code, "INVALID_REQUEST"), "%s: %s", bad_params[_i],
                      json_object_to_json_string(err));
        if (streq_ptr(code, "INVALID_PARAMS"))
                ck_assert_str_eq(json_get_string(json_get_object(err, "error"), "message"), "invalid params for task.dispatch");
        json_object_put(err);
        free(line);
}
END_TEST

/* The worker's task: running in work, with limits. */
static Task *sandboxed_caller(void) {
        Task *me = tf_taskf(&m,
                            "{\"id\":\"oc_me\",\"status\":\"running\",\"changesetStatus\":\"pending\",\"directory\":\"%s\","
                            "\"model\":\"a/b\",\"executorId\":\"opencode\",\"sessionId\":\"ses_me\",\"memoryMax\":"
                            "1073741824,\"tasksMax\":100}",
                            work);
        peer.conn->origin = me;
        return me;
}

static const struct {
        const char *extra;
        const char *message;
} widening[] = {
        {",\"noSandbox\":true", "a task running in a sandbox cannot dispatch with noSandbox"},
        {",\"noOverlay\":true", "a task running in a sandbox cannot dispatch with noOverlay"},
        {",\"rwBind\":[\"/\"]", "a task running in a sandbox cannot dispatch with rwBind"},
        {",\"rwBind\":[\"WORK\"]", "a task running in a sandbox cannot dispatch with rwBind"},
        {",\"roBind\":[\"/etc\"]", "a task running in a sandbox cannot dispatch with roBind"},
        {",\"allowedDirs\":[\"/home\"]", "a task running in a sandbox cannot dispatch with allowedDirs"},
        {",\"noSandbox\":false,\"rwBind\":[\"/tmp\"]", "a task running in a sandbox cannot dispatch with rwBind"},
        {",\"job\":\"nightly\"", "a task cannot dispatch as a timer job"},
        {",\"memoryMax\":2147483648", "memoryMax 2147483648 exceeds the limit of the dispatching task oc_me (1073741824)"},
        {",\"tasksMax\":101", "tasksMax 101 exceeds the limit of the dispatching task oc_me (100)"},
};

START_TEST(a_worker_cannot_widen_its_sandbox) {
        sandboxed_caller();
        size_t before = m.n_tasks;
        char *extra = strreplace(widening[_i].extra, "WORK", work);
        json_object *f = dispatchf("{\"prompt\":\"x\",\"directory\":\"%s\",\"model\":\"a/b\"%s}", work, extra);
        free(extra);
        assert_refused(f, "REQUEST_FAILED", widening[_i].message);
        ck_assert_uint_eq(m.n_tasks, before);
}
END_TEST

START_TEST(a_worker_stays_in_its_directory) {
        sandboxed_caller();
        char *msg = strdup_printf("a task running in a sandbox can dispatch only into its own directory %s or a directory "
                                  "under it, not %s",
                                  work, m.paths.home);
        assert_refused(dispatchf("{\"prompt\":\"x\",\"directory\":\"%s\",\"model\":\"a/b\"}", m.paths.home), "REQUEST_FAILED", msg);
        free(msg);
        char *dotdot = strdup_printf("%s/sub/../..", work);
        msg = strdup_printf("a task running in a sandbox can dispatch only into its own directory %s or a directory "
                            "under it, not %s",
                            work, dotdot);
        assert_refused(dispatchf("{\"prompt\":\"x\",\"directory\":\"%s\",\"model\":\"a/b\"}", dotdot), "REQUEST_FAILED", msg);
        free(msg);
        free(dotdot);
        /* a symlink it planted that leads out */
        tf_symlink(m.paths.home, "", "work/out");
        char *out = strdup_printf("%s/out", work);
        json_object *f = dispatchf("{\"prompt\":\"x\",\"directory\":\"%s\",\"model\":\"a/b\"}", out);
        ck_assert(!json_get_bool(f, "ok", true));
        ck_assert_ptr_nonnull(strstr(json_get_string(json_get_object(f, "error"), "message"),
                                     "is not a directory under this task's own directory"));
        json_object_put(f);
        free(out);
        ck_assert_uint_eq(m.n_tasks, 1);
}
END_TEST

START_TEST(a_nested_dispatch_is_its_callers) {
        Task *me = sandboxed_caller();
        char *sub = strdup_printf("%s/sub", work);
        /* noSandbox:false asks for nothing */
        Task *t = accepted(dispatchf("{\"prompt\":\"x\",\"directory\":\"%s\",\"noSandbox\":false,\"model\":\"a/b\"}", sub));
        ck_assert_int_eq(t->kind, TASK_KIND_NESTED);
        ck_assert_str_eq(t->rec.dispatched_by, me->id);
        ck_assert_str_eq(t->rec.directory, sub);
        
        free(sub);
        /* the user's session: not its to inherit from */
        tf_taskf(&m, "{\"id\":\"oc_user\",\"status\":\"done\",\"changesetStatus\":\"none\",\"directory\":\"%s\","
                     "\"model\":\"secret/model\",\"executorId\":\"opencode\",\"sessionId\":\"ses_user\"}",
                 work);
        assert_refused(dispatchf("{\"prompt\":\"x\",\"directory\":\"%s\",\"sessionId\":\"ses_user\"}", work),
                       "REQUEST_FAILED", "no task found for session id \"ses_user\" to inherit a model from");
        /* with its own session it inherits */
        t = accepted(dispatchf("{\"prompt\":\"x\",\"directory\":\"%s\",\"sessionId\":\"ses_me\"}", work));
        ck_assert_str_eq(t->rec.model, "a/b");
}
END_TEST

START_TEST(the_nested_cap) {
        Task *me = sandboxed_caller();
        for (int i = 0; i < 16; i++) accepted(dispatchf("{\"prompt\":\"x%d\",\"directory\":\"%s\",\"model\":\"a/b\"}", i, work));
        assert_refused(dispatchf("{\"prompt\":\"x\",\"directory\":\"%s\",\"model\":\"a/b\"}", work), "SERVER_BUSY",
                       "this task has too many nested tasks queued or running");
        /* a grandchild counts to the same tree */
        peer.conn->origin = m.tasks[m.n_tasks - 1];
        assert_refused(dispatchf("{\"prompt\":\"x\",\"directory\":\"%s\",\"model\":\"a/b\"}", work), "SERVER_BUSY",
                       "this task has too many nested tasks queued or running");
        /* one ends: room for one */
        peer.conn->origin = me;
        ck_assert_int_eq(task_transition(m.tasks[1], TASK_CANCELLED, m.tasks[1]->rec.changeset_status), 1);
        accepted(dispatchf("{\"prompt\":\"x\",\"directory\":\"%s\",\"model\":\"a/b\"}", work));
}
END_TEST

int main(void) {
        Suite *s = suite_create("handlers-dispatch");
        tf_tcase(s, "user", setup, teardown, 60,
                 TF_TESTS(a_dispatch_is_queued_and_answered_after_the_tick, a_huge_prompt_is_previewed,
                          refusals_a_client_gets));
        TCase *tc = tf_tcase(s, "wire", setup, teardown, 30, NULL);
        TF_LOOP(tc, the_wire_refuses_bad_params, bad_params);
        tc = tf_tcase(s, "sandboxed", setup, teardown, 60,
                      TF_TESTS(a_worker_stays_in_its_directory, a_nested_dispatch_is_its_callers, the_nested_cap));
        TF_LOOP(tc, a_worker_cannot_widen_its_sandbox, widening);
        return tf_run_suite(s);
}
