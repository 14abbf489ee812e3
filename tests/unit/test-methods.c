/* methods.c: the method table (the same methods as protocol.c's list), the
 * one dispatcher (replies exactly once, or never for a deferred method until
 * its completion: a task.wait answered by its timeout), flags. wait.c alone
 * is tests/unit/test-wait.c.
 * In-process: a Manager on its own sd-event loop, a socketpair for the
 * connection, no shim. */

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon-fixture.h"
#include "json-util.h"
#include "api/methods.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"

static Manager m;
static char *dir;
static Connection *conn;
static int peer = -1;

static void setup(void) {
        tf_manager_setup(&m, "test-methods");
        ck_assert_int_eq(wait_init(&m), 0);
        dir = m.paths.state_dir;
        conn = tf_connection_new(&m, 1, &peer); /* the test's ref */
}

static void teardown(void) {
        tf_manager_teardown(&m);
        ck_assert_uint_eq(conn->n_ref, 1); /* every request let go of it */
        tf_connection_free(conn, peer);
}

/* A validated request on conn, as server.c makes one (it counts in flight). */
static Request *request(const char *line) { return tf_request(&m, conn, line, false); }

/* Every frame the peer has received so far, as a JSON array. */
static json_object *frames(void) { return tf_frames(peer); }

static json_object *one_frame(void) { return tf_one_frame(peer); }

static Task *add_task(const char *id, const char *status) {
        return tf_taskf(&m,
                        "{\"id\":\"%s\",\"directory\":\"/nonexistent\",\"status\":\"%s\",\"changesetStatus\":\"none\","
                        "\"cancelRequested\":false,\"outputDir\":null}",
                        id, status);
}

START_TEST(table_names_the_methods) {
        /* every one of the protocol's 16 methods is served */
        size_t n = 0;
        for (const char *const *name = protocol_methods; *name; name++, n++) {
                const Method *x = method_find(*name);
                ck_assert_msg(x, "%s is not served", *name);
                ck_assert_str_eq(x->name, *name);
                ck_assert_ptr_nonnull(x->handler);
        }
        ck_assert_uint_eq(n, 16);
        ck_assert_ptr_null(method_find("task.bogus"));
        ck_assert(!(method_find("event.subscribe")->flags & METHOD_TASK)); /* taskId is optional there */
        ck_assert_ptr_null(method_find("task.Status"));
        ck_assert_ptr_null(method_find(NULL));
        ck_assert_uint_eq(method_find("system.health")->flags, 0);
        ck_assert(method_find("task.list")->flags & METHOD_STATE);
        ck_assert(!(method_find("task.list")->flags & METHOD_TASK));
        ck_assert(method_find("task.accept")->flags & METHOD_TASK);
}
END_TEST

/* The protocol module's method list (what requests may name, and the
 * UNKNOWN_METHOD help) and the daemon's table (what it serves) are one set,
 * in one order: a method added to one and not the other is caught here. */
START_TEST(table_and_protocol_name_the_same_methods) {
        /* protocol_methods names all 16 of the protocol; the served ones
         * (those whose params it validates) are exactly the table, in order */
        size_t n = 0, n_served = 0;
        const Method *table = method_table(&n);
        for (size_t k = 0; protocol_methods[k]; k++) {
                if (!proto_method_served(protocol_methods[k])) {
                        ck_assert_ptr_null(method_find(protocol_methods[k]));
                        continue;
                }
                ck_assert_uint_lt(n_served, n);
                ck_assert_str_eq(table[n_served].name, protocol_methods[k]);
                ck_assert_ptr_eq(method_find(protocol_methods[k]), &table[n_served]);
                n_served++;
        }
        ck_assert_uint_eq(n, n_served);
        for (size_t i = 0; i < n; i++) {
                ck_assert_ptr_nonnull(table[i].handler);
                for (size_t j = i + 1; j < n; j++) ck_assert_str_ne(table[i].name, table[j].name);
        }
}
END_TEST

START_TEST(unknown_method_is_one_error) {
        /* a request that names no table entry: every one of the 16 names the
         * server accepts is served (table_names_the_methods), so the
         * method is changed after validation */
        Request *r = request("{\"version\":1,\"id\":\"a\",\"method\":\"system.health\",\"params\":{}}");
        json_object_object_add(r->req.frame, "method", json_object_new_string("task.bogus"));
        r->req.method = json_get_string(r->req.frame, "method");
        json_object *res = NULL;
        MethodError err = {0};
        ck_assert_int_eq(method_call(&m, r, &res, &err), -EOPNOTSUPP);
        ck_assert_ptr_null(res);
        ck_assert_str_eq(err.code, "UNKNOWN_METHOD");
        method_reply(r, -EOPNOTSUPP, res, &err);
        ck_assert_ptr_null(err.code); /* cleared */
        json_object *f = one_frame();
        ck_assert(!json_get_bool(f, "ok", true));
        ck_assert_str_eq(json_get_string(f, "id"), "a");
        ck_assert_str_eq(json_get_string(json_get_object(f, "error"), "code"), "UNKNOWN_METHOD");
        json_object_put(f);
        ck_assert_uint_eq(m.server->in_flight, 0);
}
END_TEST

START_TEST(state_flag_and_task_flag) {
        /* health needs no state */
        m.store.load_error = strdup("tasks.json: broken");
        method_dispatch(&m, request("{\"version\":1,\"id\":\"h\",\"method\":\"system.health\",\"params\":{}}"));
        json_object *f = one_frame();
        ck_assert(json_get_bool(f, "ok", false));
        ck_assert(json_get_bool(json_get_object(f, "result"), "healthy", false));
        json_object_put(f);
        /* a METHOD_STATE method fails with the load error, before any lookup */
        method_dispatch(&m, request("{\"version\":1,\"id\":\"s\",\"method\":\"task.status\",\"params\":{\"taskId\":\"oc_x\"}}"));
        f = one_frame();
        json_object *e = json_get_object(f, "error");
        ck_assert_str_eq(json_get_string(e, "code"), "REQUEST_FAILED");
        ck_assert_str_eq(json_get_string(e, "message"), "could not read persisted task state: tasks.json: broken");
        json_object_put(f);
        free(m.store.load_error);
        m.store.load_error = NULL;
        /* METHOD_TASK: an unknown id */
        method_dispatch(&m, request("{\"version\":1,\"id\":\"u\",\"method\":\"task.status\",\"params\":{\"taskId\":\"oc_x\"}}"));
        f = one_frame();
        e = json_get_object(f, "error");
        ck_assert_str_eq(json_get_string(e, "code"), "UNKNOWN_TASK");
        ck_assert_str_eq(json_get_string(e, "message"), "unknown task id: oc_x");
        ck_assert_str_eq(json_get_string(e, "help"), "run taskferry list to see valid task ids");
        json_object_put(f);
        /* and a known one reaches the handler with its task */
        add_task("oc_k", "done");
        method_dispatch(&m, request("{\"version\":1,\"id\":\"k\",\"method\":\"task.status\",\"params\":{\"taskId\":\"oc_k\"}}"));
        f = one_frame();
        ck_assert(json_get_bool(f, "ok", false));
        ck_assert_str_eq(json_get_string(json_get_object(f, "result"), "id"), "oc_k");
        ck_assert_str_eq(json_get_string(json_get_object(f, "result"), "status"), "done");
        json_object_put(f);
        ck_assert_uint_eq(m.server->in_flight, 0);
}
END_TEST

START_TEST(method_call_does_not_reply) {
        add_task("oc_c", "done");
        Request *r = request("{\"version\":1,\"id\":\"c\",\"method\":\"task.cancel\",\"params\":{\"taskId\":\"oc_c\"}}");
        json_object *res = NULL;
        MethodError err = {0};
        ck_assert_int_eq(method_call(&m, r, &res, &err), 0);
        ck_assert_ptr_null(err.code);
        ck_assert_str_eq(json_get_string(res, "note"), "task is already done; nothing to cancel");
        json_object *arr = frames();
        ck_assert_uint_eq(json_object_array_length(arr), 0); /* the handler itself sent nothing */
        json_object_put(arr);
        method_reply(r, 0, res, &err);
        json_object *f = one_frame();
        ck_assert_str_eq(json_get_string(f, "id"), "c");
        json_object_put(f);
}
END_TEST

START_TEST(accept_refusal_is_an_error) {
        add_task("oc_n", "done");
        method_dispatch(&m, request("{\"version\":1,\"id\":\"n\",\"method\":\"task.accept\",\"params\":{\"taskId\":\"oc_n\"}}"));
        json_object *f = one_frame();
        json_object *e = json_get_object(f, "error");
        ck_assert_str_eq(json_get_string(e, "code"), "REQUEST_FAILED");
        ck_assert_str_eq(json_get_string(e, "message"), "task oc_n has no pending changeset (changesetStatus: none)");
        json_object_put(f);
}
END_TEST

static void run_loop_ms(unsigned ms) {
        uint64_t end = now_ms() + ms;
        while (now_ms() < end) ck_assert_int_ge(sd_event_run(m.event, 10 * 1000), 0);
}

START_TEST(wait_answers_once_on_timeout) {
        add_task("oc_w", "running");
        method_dispatch(&m, request("{\"version\":1,\"id\":\"w\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"oc_w\","
                                    "\"timeoutMs\":50}}"));
        json_object *arr = frames();
        ck_assert_uint_eq(json_object_array_length(arr), 0); /* parked */
        json_object_put(arr);
        ck_assert_ptr_nonnull(m.tasks[0]->waiters);
        run_loop_ms(200);
        json_object *f = one_frame();
        ck_assert(json_get_bool(json_get_object(f, "result"), "timedOut", false));
        ck_assert_str_eq(json_get_string(json_get_object(f, "result"), "status"), "running");
        json_object_put(f);
        ck_assert_ptr_null(m.tasks[0]->waiters);
        /* the task's end later answers nobody twice */
        ck_assert_int_eq(task_transition(m.tasks[0], TASK_DONE, CHANGESET_NONE), 1);
        arr = frames();
        ck_assert_uint_eq(json_object_array_length(arr), 0);
        json_object_put(arr);
}
END_TEST

static Task *add_task_at(const char *id, const char *where, const char *started_at) {
        return tf_taskf(&m, "{\"id\":\"%s\",\"directory\":\"%s\",\"status\":\"done\",\"startedAt\":\"%s\"}", id, where,
                        started_at);
}

static void assert_list(const char *params, const char *const *want, size_t n) {
        char *line = strdup_printf("{\"version\":1,\"id\":\"l\",\"method\":\"task.list\",\"params\":%s}", params);
        method_dispatch(&m, request(line));
        free(line);
        json_object *f = one_frame();
        json_object *rows = json_get_array(json_get_object(f, "result"), "tasks");
        ck_assert_ptr_nonnull(rows);
        ck_assert_uint_eq(json_object_array_length(rows), n);
        for (size_t i = 0; i < n; i++)
                ck_assert_str_eq(json_get_string(json_object_array_get_idx(rows, i), "id"), want[i]);
        json_object_put(f);
}

START_TEST(list_newest_first_ties_in_table_order) {
        char *a = strdup_printf("%s/a", dir), *b = strdup_printf("%s/b", dir);
        ck_assert_int_eq(mkdir(a, 0700), 0);
        ck_assert_int_eq(mkdir(b, 0700), 0);
        /* in creation order, with ties (one millisecond, two dispatches) */
        add_task_at("oc_1", a, "2026-01-01T00:00:00.001Z");
        add_task_at("oc_2", b, "2026-01-01T00:00:00.002Z");
        add_task_at("oc_3", a, "2026-01-01T00:00:00.002Z");
        add_task_at("oc_4", a, "2026-01-01T00:00:00.002Z");
        add_task_at("oc_5", b, "2026-01-01T00:00:00.003Z");
        static const char *const all[] = {"oc_5", "oc_2", "oc_3", "oc_4", "oc_1"};
        assert_list("{}", all, ELEMENTSOF(all));
        char *pa = strdup_printf("{\"directory\":\"%s\"}", a);
        static const char *const in_a[] = {"oc_3", "oc_4", "oc_1"};
        assert_list(pa, in_a, ELEMENTSOF(in_a));
        /* out of creation order (records from another daemon): the same rule */
        add_task_at("oc_0", b, "2026-01-01T00:00:00.000Z");
        add_task_at("oc_6", a, "2026-01-01T00:00:00.002Z");
        static const char *const all2[] = {"oc_5", "oc_2", "oc_3", "oc_4", "oc_6", "oc_1", "oc_0"};
        assert_list("{}", all2, ELEMENTSOF(all2));
        static const char *const in_a2[] = {"oc_3", "oc_4", "oc_6", "oc_1"};
        assert_list(pa, in_a2, ELEMENTSOF(in_a2));
        free(pa);
        free(a);
        free(b);
}
END_TEST

TF_MAIN("methods", "methods", setup, teardown, 0, table_names_the_methods, table_and_protocol_name_the_same_methods,
        unknown_method_is_one_error, state_flag_and_task_flag, method_call_does_not_reply, accept_refusal_is_an_error,
        wait_answers_once_on_timeout, list_newest_first_ties_in_table_order)
