/* events.c alone (events.h): subscribe,
 * task.state events from the task-state observer (key order, one sequence,
 * deduplicated, none for internal tasks), delivery filters (workspace,
 * originSessionId, a sandboxed caller's own tree), caps, and a subscriber
 * that never reads. In-process: a Manager on its own sd-event loop,
 * socketpairs as the connections. */

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon-fixture.h"
#include "features/activity.h"
#include "api/events.h"
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
#include "time-util.h"

static Manager m;
static char *dir, *dir_a, *dir_b;

typedef TfPeer Peer;
static Peer p1, p2;

static void setup(void) {
        tf_manager_setup(&m, "test-events");
        m.settings.summarizer_timeout_ms = 360000;
        m.settings.watchdog_poll_ms = 2000;
        ck_assert_int_eq(events_init(&m), 0);
        dir = m.paths.state_dir;
        dir_a = strdup_printf("%s/a", dir);
        dir_b = strdup_printf("%s/b", dir);
        ck_assert_int_eq(mkdir(dir_a, 0700), 0);
        ck_assert_int_eq(mkdir(dir_b, 0700), 0);
        /* the test's ref, and the one a connection_kill would drop */
        p1 = tf_peer_new(&m, 2);
        p2 = tf_peer_new(&m, 2);
}

static void teardown(void) {
        tf_peer_free(&p1);
        tf_peer_free(&p2);
        events_free(&m);
        tf_manager_teardown(&m);
        free(dir_a), free(dir_b);
}

/* Run event.subscribe with params on p as the server would; returns the frame p got. */
static Request *request(Peer *p, const char *method, const char *params) {
        char *line = strdup_printf("{\"version\":1,\"id\":\"r1\",\"method\":\"%s\",\"params\":%s}", method, params);
        Request *r = tf_request(&m, p->conn, line, false);
        free(line);
        return r;
}

/* Every frame p has received so far. */
static json_object *frames(Peer *p) { return tf_frames(p->fd); }

/* Subscribe p with params; returns the subscriptionId (asserts success). */
static char *subscribe(Peer *p, const char *params) {
        method_dispatch(&m, request(p, "event.subscribe", params));
        json_object *arr = frames(p);
        ck_assert_uint_eq(json_object_array_length(arr), 1);
        json_object *f = json_object_array_get_idx(arr, 0);
        ck_assert_msg(json_get_bool(f, "ok", false), "%s", json_object_to_json_string(f));
        char *id = strdup(json_get_string(json_get_object(f, "result"), "subscriptionId"));
        ck_assert_int_eq(strlen(id), 36);
        json_object_put(arr);
        return id;
}

static json_object *subscribe_error(Peer *p, const char *params) {
        method_dispatch(&m, request(p, "event.subscribe", params));
        json_object *arr = frames(p);
        ck_assert_uint_eq(json_object_array_length(arr), 1);
        json_object *f = json_object_get(json_object_array_get_idx(arr, 0));
        json_object_put(arr);
        ck_assert(!json_get_bool(f, "ok", true));
        return f;
}

static Task *add_task(const char *id, const char *directory, const char *status, const char *extra) {
        return tf_taskf(&m, "{\"id\":\"%s\",\"directory\":\"%s\",\"status\":\"%s\",\"changesetStatus\":\"none\"%s%s}", id,
                        directory, status, extra ? "," : "", extra ? extra : "");
}

/* The task.state events among frames, in order. */
static json_object *state_events(json_object *arr) {
        json_object *out = json_object_new_array();
        for (size_t i = 0; i < json_object_array_length(arr); i++) {
                json_object *f = json_object_array_get_idx(arr, i);
                json_object *ev = json_get_object(f, "event");
                if (ev && streq_ptr(json_get_string(ev, "type"), "task.state")) json_object_array_add(out, json_object_get(ev));
        }
        return out;
}

START_TEST(state_event_shape_and_order) {
        char *sid = subscribe(&p1, "{\"all\":true}");
        Task *t = add_task("oc_s", dir_a, "queued", "\"originSessionId\":\"sess-A\"");
        task_announce_added(t);
        ck_assert_int_eq(task_transition(t, TASK_RUNNING, CHANGESET_NONE), 1);
        ck_assert_int_eq(task_transition(t, TASK_RUNNING, CHANGESET_PENDING), 1); /* changeset only: no event */
        ck_assert_int_eq(task_transition(t, TASK_DONE, CHANGESET_PENDING), 1);
        json_object *arr = frames(&p1);
        /* the envelope: exactly {version, type, subscriptionId, event} in that order */
        json_object *f0 = json_object_array_get_idx(arr, 0);
        static const char *const env_keys[] = {"version", "type", "subscriptionId", "event"};
        size_t k = 0;
        json_object_object_foreach(f0, key, val) {
                ck_assert_uint_lt(k, 4);
                ck_assert_str_eq(key, env_keys[k++]);
                (void) val;
        }
        ck_assert_uint_eq(k, 4);
        ck_assert_str_eq(json_get_string(f0, "subscriptionId"), sid);
        json_object *ev = state_events(arr);
        ck_assert_uint_eq(json_object_array_length(ev), 3);
        static const char *const keys[] = {"sequence", "type",           "taskId",     "directory", "originSessionId",
                                           "status",   "previousStatus", "occurredAt", "activity",  "outputWatermark"};
        static const char *const st[] = {"queued", "running", "done"};
        static const char *const prev[] = {NULL, "queued", "running"};
        int64_t last_seq = 0;
        for (size_t i = 0; i < 3; i++) {
                json_object *e = json_object_array_get_idx(ev, i);
                k = 0;
                json_object_object_foreach(e, ekey, eval) {
                        ck_assert_uint_lt(k, ELEMENTSOF(keys));
                        ck_assert_str_eq(ekey, keys[k++]);
                        (void) eval;
                }
                ck_assert_uint_eq(k, ELEMENTSOF(keys));
                ck_assert_str_eq(json_get_string(e, "status"), st[i]);
                if (prev[i]) ck_assert_str_eq(json_get_string(e, "previousStatus"), prev[i]);
                else ck_assert_ptr_null(json_get_string(e, "previousStatus"));
                ck_assert_str_eq(json_get_string(e, "taskId"), "oc_s");
                ck_assert_str_eq(json_get_string(e, "directory"), dir_a);
                ck_assert_str_eq(json_get_string(e, "originSessionId"), "sess-A");
                int64_t seq;
                ck_assert(json_get_int64(e, "sequence", &seq));
                ck_assert_int_gt(seq, last_seq);
                last_seq = seq;
        }
        json_object_put(ev);
        json_object_put(arr);
        free(sid);
}
END_TEST

START_TEST(deduplicated_and_never_internal) {
        free(subscribe(&p1, "{\"all\":true}"));
        Task *t = add_task("oc_d", dir_a, "queued", NULL);
        task_announce_added(t);
        task_announce_added(t); /* the same status again: nothing new */
        Task *in = add_task("oc_i", dir_a, "queued", "\"internal\":true");
        task_announce_added(in);
        ck_assert_int_eq(task_transition(in, TASK_RUNNING, CHANGESET_NONE), 1);
        json_object *arr = frames(&p1);
        json_object *ev = state_events(arr);
        ck_assert_uint_eq(json_object_array_length(ev), 1);
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(ev, 0), "taskId"), "oc_d");
        json_object_put(ev);
        json_object_put(arr);
}
END_TEST

START_TEST(directory_and_origin_filters) {
        char *pa = strdup_printf("{\"directory\":\"%s\",\"originSessionId\":\"sess-A\"}", dir_a);
        char *pb = strdup_printf("{\"directory\":\"%s\"}", dir_b);
        free(subscribe(&p1, pa));
        free(subscribe(&p2, pb));
        free(pa), free(pb);
        Task *a1 = add_task("oc_a1", dir_a, "queued", "\"originSessionId\":\"sess-A\"");
        Task *a2 = add_task("oc_a2", dir_a, "queued", "\"originSessionId\":\"sess-B\"");
        Task *a3 = add_task("oc_a3", dir_a, "queued", NULL);
        Task *b1 = add_task("oc_b1", dir_b, "queued", "\"originSessionId\":\"sess-B\"");
        task_announce_added(a1);
        task_announce_added(a2);
        task_announce_added(a3);
        task_announce_added(b1);
        json_object *arr = frames(&p1), *ev = state_events(arr);
        ck_assert_uint_eq(json_object_array_length(ev), 2); /* a1 (same origin), a3 (none) */
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(ev, 0), "taskId"), "oc_a1");
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(ev, 1), "taskId"), "oc_a3");
        json_object_put(ev), json_object_put(arr);
        arr = frames(&p2), ev = state_events(arr);
        ck_assert_uint_eq(json_object_array_length(ev), 1);
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(ev, 0), "taskId"), "oc_b1");
        json_object_put(ev), json_object_put(arr);
}
END_TEST

START_TEST(task_id_scope_and_errors) {
        Task *t = add_task("oc_x", dir_a, "running", NULL);
        (void) t;
        json_object *f = subscribe_error(&p1, "{\"taskId\":\"oc_nope\"}");
        ck_assert_str_eq(json_get_string(json_get_object(f, "error"), "code"), "UNKNOWN_TASK");
        json_object_put(f);
        char *missing = strdup_printf("{\"directory\":\"%s/gone\"}", dir);
        f = subscribe_error(&p1, missing);
        ck_assert_str_eq(json_get_string(json_get_object(f, "error"), "code"), "REQUEST_FAILED");
        ck_assert_msg(strstr(json_get_string(json_get_object(f, "error"), "message"), "does not exist"), "%s",
                      json_object_to_json_string(f));
        json_object_put(f);
        free(missing);
        /* {taskId} covers the task's directory */
        free(subscribe(&p1, "{\"taskId\":\"oc_x\"}"));
        Task *y = add_task("oc_y", dir_a, "queued", NULL), *z = add_task("oc_z", dir_b, "queued", NULL);
        task_announce_added(y);
        task_announce_added(z);
        json_object *arr = frames(&p1), *ev = state_events(arr);
        ck_assert_uint_eq(json_object_array_length(ev), 1);
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(ev, 0), "taskId"), "oc_y");
        json_object_put(ev), json_object_put(arr);
}
END_TEST

START_TEST(sandboxed_caller_sees_its_own_tree_only) {
        Task *self = add_task("oc_self", dir_a, "running", NULL);
        add_task("oc_other", dir_a, "running", NULL);
        p1.conn->origin = self; /* accepted on oc_self's own socket */
        json_object *f = subscribe_error(&p1, "{\"taskId\":\"oc_other\"}");
        ck_assert_str_eq(json_get_string(json_get_object(f, "error"), "code"), "UNKNOWN_TASK");
        json_object_put(f);
        f = subscribe_error(&p1, "{\"all\":true,\"summaries\":true}");
        ck_assert_msg(strstr(json_get_string(json_get_object(f, "error"), "message"), "sandbox"), "%s",
                      json_object_to_json_string(f));
        json_object_put(f);
        free(subscribe(&p1, "{\"all\":true}"));
        Task *child = add_task("oc_child", dir_b, "queued", "\"dispatchedBy\":\"oc_self\"");
        Task *stranger = add_task("oc_stranger", dir_a, "queued", NULL);
        task_announce_added(child);
        task_announce_added(stranger);
        ck_assert_int_eq(task_transition(m.tasks[1], TASK_DONE, CHANGESET_NONE), 1); /* oc_other */
        ck_assert_int_eq(task_transition(self, TASK_DONE, CHANGESET_NONE), 1);
        json_object *arr = frames(&p1), *ev = state_events(arr);
        ck_assert_uint_eq(json_object_array_length(ev), 2);
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(ev, 0), "taskId"), "oc_child");
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(ev, 1), "taskId"), "oc_self");
        json_object_put(ev), json_object_put(arr);
        p1.conn->origin = NULL;
}
END_TEST

START_TEST(subscriptions_end_with_their_connection_and_are_capped) {
        for (int i = 0; i < EVENTS_MAX_PER_CONNECTION; i++) free(subscribe(&p1, "{\"all\":true}"));
        json_object *f = subscribe_error(&p1, "{\"all\":true}");
        ck_assert_msg(strstr(json_get_string(json_get_object(f, "error"), "message"), "subscriptions"), "%s",
                      json_object_to_json_string(f));
        json_object_put(f);
        free(subscribe(&p2, "{\"all\":true}"));
        ck_assert_uint_eq(events_count(&m), EVENTS_MAX_PER_CONNECTION + 1);
        events_drop_connection(p1.conn);
        ck_assert_uint_eq(events_count(&m), 1);
        Task *t = add_task("oc_c", dir_a, "queued", NULL);
        task_announce_added(t);
        json_object *arr = frames(&p1);
        ck_assert_uint_eq(json_object_array_length(arr), 0);
        json_object_put(arr);
        arr = frames(&p2);
        ck_assert_uint_eq(json_object_array_length(arr), 1);
        json_object_put(arr);
}
END_TEST

/* A worker's task socket holds at most EVENTS_MAX_PER_TASK subscriptions
 * over all its connections; the user's socket keeps its own share. */
START_TEST(a_task_socket_cannot_take_the_users_share) {
        Task *self = add_task("oc_w", dir_a, "running", NULL);
        p1.conn->origin = self;
        p2.conn->origin = self;
        for (int i = 0; i < EVENTS_MAX_PER_TASK / 2; i++) free(subscribe(&p1, "{\"all\":true}"));
        for (int i = 0; i < EVENTS_MAX_PER_TASK / 2; i++) free(subscribe(&p2, "{\"all\":true}"));
        json_object *f = subscribe_error(&p2, "{\"all\":true}");
        ck_assert_msg(strstr(json_get_string(json_get_object(f, "error"), "message"), "task's socket"), "%s",
                      json_object_to_json_string(f));
        json_object_put(f);
        Peer user = tf_peer_new(&m, 2);
        free(subscribe(&user, "{\"all\":true}"));
        tf_peer_free(&user);
        p1.conn->origin = p2.conn->origin = NULL;
}
END_TEST

/* A subscriber that never reads: its unsent bytes stay within the outbound
 * budget (1 MiB beside the kernel's socket buffer), the daemon never blocks,
 * and at the first event that does not fit its subscriptions end with the
 * drop notice queued; nothing more is queued for it after that. The other
 * subscriber keeps getting everything. */
START_TEST(never_reading_subscriber_is_bounded_then_closed) {
        free(subscribe(&p1, "{\"all\":true}"));
        free(subscribe(&p1, "{\"all\":true}")); /* two on the dying connection: both must go safely */
        free(subscribe(&p2, "{\"all\":true}"));
        /* big events: a 200 KiB originSessionId */
        char *big = malloc(200 * 1024 + 1);
        memset(big, 's', 200 * 1024);
        big[200 * 1024] = 0;
        size_t max_pending = 0;
        size_t got2 = 0;
        uint64_t start = mono_ms();
        for (int i = 0; i < 40; i++) {
                char id[32];
                snprintf(id, sizeof id, "oc_big%02d", i);
                char *extra = strdup_printf("\"originSessionId\":\"%s\"", big);
                Task *t = add_task(id, dir_a, "queued", extra);
                free(extra);
                task_announce_added(t);
                if (!p1.conn->dead && p1.conn->out_len - p1.conn->out_off > max_pending)
                        max_pending = p1.conn->out_len - p1.conn->out_off;
                /* p2 reads as it goes */
                json_object *arr = frames(&p2);
                got2 += json_object_array_length(arr);
                json_object_put(arr);
        }
        ck_assert_uint_lt(mono_ms() - start, 10000);
        ck_assert_uint_le(max_pending, 1048576);
        ck_assert_msg(events_count(&m) == 1, "the never-reading subscriber's subscriptions did not end");
        ck_assert_uint_eq(got2, 40); /* the reader got every event */
        ck_assert(!p1.conn->dead); /* the connection survives the degrade */
        size_t pending = p1.conn->out_len - p1.conn->out_off;
        ck_assert_ptr_nonnull(memmem(p1.conn->out + p1.conn->out_off, pending, "event dropped: response too large",
                                     strlen("event dropped: response too large")));
        /* later events cost it nothing */
        Task *t = add_task("oc_after", dir_a, "queued", NULL);
        task_announce_added(t);
        ck_assert_uint_eq(p1.conn->out_len - p1.conn->out_off, pending);
        /* what p1 got so far: the events the kernel buffer took, in full */
        json_object *arr = frames(&p1);
        size_t n = json_object_array_length(arr);
        ck_assert_uint_gt(n, 0);
        ck_assert_uint_lt(n, 80);
        json_object_put(arr);
        free(big);
}
END_TEST

TF_MAIN("events", "events", setup, teardown, 60, state_event_shape_and_order, deduplicated_and_never_internal,
        directory_and_origin_filters, task_id_scope_and_errors, sandboxed_caller_sees_its_own_tree_only,
        subscriptions_end_with_their_connection_and_are_capped, a_task_socket_cannot_take_the_users_share,
        never_reading_subscriber_is_bounded_then_closed)
