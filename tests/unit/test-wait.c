/* wait.c alone: a parked task.wait (wait.h) ends exactly
 * once — answered by its timeout, woken by the transition that makes its
 * task final and settled, or dropped unanswered with its connection or its
 * task — and leaves no link, timer, budget or connection reference behind.
 * In-process: a Manager on its own sd-event loop, requests built as
 * server.c builds a task.wait (drawing on the daemon-wide waits budget), and
 * socketpairs as the connections; no shim, no server. */

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon-fixture.h"
#include "json-util.h"
#include "core/manager.h"
#include "api/methods.h"
#include "api/server.h"
#include "core/store.h"
#include "core/task.h"
#include "core/task-table.h"
#include "api/task-views.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"
#include "api/wait.h"

static Manager m;
static char *dir;

/* A connection as the server keeps one, and the peer end the test reads. */
typedef TfPeer Peer;
static Peer p1, p2;

static void peer_free(Peer *p) {
        ck_assert_uint_eq(p->conn->n_ref, 1); /* every request let go of it */
        ck_assert_ptr_null(p->conn->waiting);
        tf_peer_free(p);
}

static void setup(void) {
        tf_manager_setup(&m, "test-wait");
        ck_assert_int_eq(wait_init(&m), 0);
        dir = m.paths.state_dir;
        p1 = tf_peer_new(&m, 1); /* the test's ref */
        p2 = tf_peer_new(&m, 1);
}

static void teardown(void) {
        for (size_t i = 0; i < m.n_tasks; i++) ck_assert_ptr_null(m.tasks[i]->waiters);
        ck_assert_uint_eq(m.server->waits, 0);
        ck_assert_uint_eq(m.server->in_flight, 0);
        tf_manager_teardown(&m);
        peer_free(&p1);
        peer_free(&p2);
}

/* A validated task.wait on p, counted in the waits budget as server.c does. */
static Request *wait_request(Peer *p, const char *id, const char *task_id) {
        char *line = strdup_printf("{\"version\":1,\"id\":\"%s\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"%s\"}}", id,
                                   task_id);
        Request *r = tf_request(&m, p->conn, line, true);
        free(line);
        return r;
}

/* Every frame p has received so far, as a JSON array. */
static json_object *frames(Peer *p) { return tf_frames(p->fd); }

static size_t n_frames(Peer *p) {
        json_object *arr = frames(p);
        size_t n = json_object_array_length(arr);
        json_object_put(arr);
        return n;
}

static json_object *one_frame(Peer *p) { return tf_one_frame(p->fd); }

static Task *add_task(const char *id, const char *status) {
        return tf_taskf(&m, "{\"id\":\"%s\",\"directory\":\"/nonexistent\",\"status\":\"%s\",\"changesetStatus\":\"none\"}", id,
                        status);
}

static void run_loop_ms(unsigned ms) { tf_run_loop_ms(&m, ms); }

static size_t n_waiters(Task *t) {
        size_t n = 0;
        for (Request *r = t->waiters; r; r = r->next_waiter) n++;
        return n;
}

static size_t n_waiting(Peer *p) {
        size_t n = 0;
        for (Request *r = p->conn->waiting; r; r = r->conn_next) n++;
        return n;
}

START_TEST(final_task_answers_at_once) {
        add_task("oc_d", "done");
        wait_park(wait_request(&p1, "a", "oc_d"), m.tasks[0], -1, 0);
        json_object *f = one_frame(&p1);
        ck_assert(json_get_bool(f, "ok", false));
        ck_assert_str_eq(json_get_string(f, "id"), "a");
        json_object *res = json_get_object(f, "result");
        ck_assert_str_eq(json_get_string(res, "id"), "oc_d");
        ck_assert_str_eq(json_get_string(res, "status"), "done");
        ck_assert(!json_object_object_get_ex(res, "timedOut", NULL));
        json_object_put(f);
        ck_assert_ptr_null(m.tasks[0]->waiters);
        ck_assert_ptr_null(p1.conn->waiting);
}
END_TEST

START_TEST(park_links_task_and_connection) {
        Task *a = add_task("oc_a", "running"), *b = add_task("oc_b", "queued");
        wait_park(wait_request(&p1, "1", "oc_a"), a, -1, 0);
        wait_park(wait_request(&p1, "2", "oc_b"), b, -1, 0);
        wait_park(wait_request(&p2, "3", "oc_a"), a, 1000, 0);
        ck_assert_uint_eq(n_frames(&p1) + n_frames(&p2), 0); /* parked, nobody answered */
        ck_assert_uint_eq(n_waiters(a), 2);
        ck_assert_uint_eq(n_waiters(b), 1);
        ck_assert_uint_eq(n_waiting(&p1), 2);
        ck_assert_uint_eq(n_waiting(&p2), 1);
        ck_assert_uint_eq(m.server->waits, 3);
        /* only the one with a timeout holds a timer */
        ck_assert_ptr_nonnull(p2.conn->waiting->timer);
        ck_assert_ptr_null(b->waiters->timer);
        wait_drop_task(a);
        wait_drop_task(b);
        ck_assert_uint_eq(n_frames(&p1) + n_frames(&p2), 0);
}
END_TEST

START_TEST(timeout_answers_once) {
        Task *t = add_task("oc_w", "running");
        wait_park(wait_request(&p1, "w", "oc_w"), t, 50, 0);
        ck_assert_uint_eq(n_frames(&p1), 0);
        run_loop_ms(200);
        json_object *f = one_frame(&p1);
        ck_assert_str_eq(json_get_string(f, "id"), "w");
        json_object *res = json_get_object(f, "result");
        ck_assert(json_get_bool(res, "timedOut", false));
        ck_assert_str_eq(json_get_string(res, "status"), "running");
        ck_assert(!json_object_object_get_ex(res, "outputTail", NULL)); /* no tailChars asked */
        json_object_put(f);
        ck_assert_ptr_null(t->waiters);
        ck_assert_ptr_null(p1.conn->waiting);
        ck_assert_uint_eq(m.server->waits, 0);
        /* the task's end later answers nobody twice */
        ck_assert_int_eq(task_transition(t, TASK_DONE, CHANGESET_NONE), 1);
        ck_assert_uint_eq(n_frames(&p1), 0);
}
END_TEST

START_TEST(timeout_zero_answers_on_the_next_iteration) {
        Task *t = add_task("oc_z", "queued");
        wait_park(wait_request(&p1, "z", "oc_z"), t, 0, 0);
        ck_assert_uint_eq(n_frames(&p1), 0); /* never from inside wait_park */
        run_loop_ms(30);
        json_object *f = one_frame(&p1);
        ck_assert(json_get_bool(json_get_object(f, "result"), "timedOut", false));
        ck_assert_str_eq(json_get_string(json_get_object(f, "result"), "status"), "queued");
        json_object_put(f);
}
END_TEST

START_TEST(woken_by_the_transition_to_final_and_settled) {
        Task *t = add_task("oc_v", "queued");
        wait_park(wait_request(&p1, "1", "oc_v"), t, -1, 0);
        wait_park(wait_request(&p2, "2", "oc_v"), t, 100, 0);
        /* a transition that leaves the task active wakes nobody */
        ck_assert_int_eq(task_transition(t, TASK_RUNNING, CHANGESET_NONE), 1);
        ck_assert_uint_eq(n_frames(&p1) + n_frames(&p2), 0);
        /* final but still settling: not yet */
        t->settling = true;
        ck_assert_int_eq(task_transition(t, TASK_DONE, CHANGESET_NONE), 1);
        ck_assert_uint_eq(n_frames(&p1) + n_frames(&p2), 0);
        ck_assert_uint_eq(n_waiters(t), 2);
        /* the settlement's last transition (changeset pending) wakes both, once */
        t->settling = false;
        ck_assert_int_eq(task_transition(t, TASK_DONE, CHANGESET_PENDING), 1);
        Peer *ps[] = {&p1, &p2};
        for (size_t i = 0; i < 2; i++) {
                json_object *f = one_frame(ps[i]);
                json_object *res = json_get_object(f, "result");
                ck_assert_str_eq(json_get_string(res, "status"), "done");
                ck_assert_str_eq(json_get_string(res, "changesetStatus"), "pending");
                ck_assert(!json_object_object_get_ex(res, "timedOut", NULL));
                json_object_put(f);
        }
        ck_assert_ptr_null(t->waiters);
        ck_assert_ptr_null(p1.conn->waiting);
        ck_assert_ptr_null(p2.conn->waiting);
        /* the second wait's timer went with it */
        run_loop_ms(250);
        ck_assert_uint_eq(n_frames(&p1) + n_frames(&p2), 0);
        /* a later transition (accept) answers nobody */
        ck_assert_int_eq(task_transition(t, TASK_DONE, CHANGESET_ACCEPTED), 1);
        ck_assert_uint_eq(n_frames(&p1) + n_frames(&p2), 0);
}
END_TEST

START_TEST(dropped_with_its_connection) {
        Task *a = add_task("oc_a", "running"), *b = add_task("oc_b", "running");
        /* interleaved on the tasks' lists: p1, p2, p1 on a; p2, p1 on b */
        wait_park(wait_request(&p1, "1", "oc_a"), a, 50, 0);
        wait_park(wait_request(&p2, "2", "oc_a"), a, -1, 0);
        wait_park(wait_request(&p1, "3", "oc_a"), a, -1, 0);
        wait_park(wait_request(&p2, "4", "oc_b"), b, -1, 0);
        wait_park(wait_request(&p1, "5", "oc_b"), b, 50, 0);
        ck_assert_uint_eq(m.server->waits, 5);
        /* the connection died (server.c connection_kill): its waits go unanswered */
        wait_drop_connection(p1.conn);
        ck_assert_ptr_null(p1.conn->waiting);
        ck_assert_uint_eq(p1.conn->n_ref, 1);
        ck_assert_uint_eq(m.server->waits, 2);
        ck_assert_uint_eq(n_waiters(a), 1);
        ck_assert_uint_eq(n_waiters(b), 1);
        ck_assert_ptr_eq(a->waiters->conn, p2.conn);
        ck_assert_ptr_eq(b->waiters->conn, p2.conn);
        /* their timers went too */
        run_loop_ms(150);
        ck_assert_uint_eq(n_frames(&p1) + n_frames(&p2), 0);
        /* the other connection's waits still work */
        ck_assert_int_eq(task_transition(a, TASK_CRASHED, CHANGESET_NONE), 1);
        json_object *f = one_frame(&p2);
        ck_assert_str_eq(json_get_string(f, "id"), "2");
        json_object_put(f);
        ck_assert_uint_eq(n_waiting(&p2), 1);
        ck_assert_uint_eq(n_frames(&p1), 0);
        wait_drop_connection(p2.conn);
        ck_assert_ptr_null(b->waiters);
}
END_TEST

START_TEST(dropped_with_its_task) {
        Task *a = add_task("oc_a", "running"), *b = add_task("oc_b", "running");
        wait_park(wait_request(&p1, "1", "oc_a"), a, 50, 0);
        wait_park(wait_request(&p1, "2", "oc_b"), b, -1, 0);
        wait_park(wait_request(&p2, "3", "oc_a"), a, -1, 0);
        /* the task goes away (shutdown, daemon_free): no answer, every
         * link undone, so the task can be freed */
        wait_drop_task(a);
        ck_assert_ptr_null(a->waiters);
        ck_assert_uint_eq(n_waiting(&p1), 1);
        ck_assert_uint_eq(n_waiting(&p2), 0);
        ck_assert_ptr_eq(p1.conn->waiting->wait_task, b);
        ck_assert_uint_eq(m.server->waits, 1);
        manager_remove_task(&m, a);
        ck_assert_uint_eq(m.n_tasks, 1);
        run_loop_ms(150); /* the dropped wait's timer is gone with it */
        ck_assert_uint_eq(n_frames(&p1) + n_frames(&p2), 0);
        ck_assert_int_eq(task_transition(b, TASK_DONE, CHANGESET_NONE), 1);
        json_object *f = one_frame(&p1);
        ck_assert_str_eq(json_get_string(f, "id"), "2");
        json_object_put(f);
}
END_TEST

START_TEST(detach_leaves_the_request_to_its_owner) {
        Task *t = add_task("oc_t", "running");
        Request *r1 = wait_request(&p1, "1", "oc_t"), *r2 = wait_request(&p1, "2", "oc_t");
        wait_park(r1, t, -1, 0);
        wait_park(r2, t, -1, 0);
        wait_detach(r1);
        ck_assert_uint_eq(n_waiters(t), 1);
        ck_assert_ptr_eq(t->waiters, r2);
        ck_assert_ptr_eq(p1.conn->waiting, r2);
        ck_assert_ptr_null(r2->conn_prev);
        ck_assert_ptr_null(r2->conn_next);
        ck_assert_uint_eq(n_frames(&p1), 0);
        /* unlinked, still unanswered: its owner answers it */
        r1->wait_task = NULL;
        method_reply(r1, 0, json_object_new_object(), NULL);
        json_object *f = one_frame(&p1);
        ck_assert_str_eq(json_get_string(f, "id"), "1");
        json_object_put(f);
        ck_assert_int_eq(task_transition(t, TASK_DONE, CHANGESET_NONE), 1);
        f = one_frame(&p1);
        ck_assert_str_eq(json_get_string(f, "id"), "2");
        json_object_put(f);
}
END_TEST

TF_MAIN("wait", "wait", setup, teardown, 0, final_task_answers_at_once, park_links_task_and_connection,
        timeout_answers_once, timeout_zero_answers_on_the_next_iteration, woken_by_the_transition_to_final_and_settled,
        dropped_with_its_connection, dropped_with_its_task, detach_leaves_the_request_to_its_owner)
