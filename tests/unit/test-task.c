/* task.c: the typed record, its string tables, its JSON round trip and the
 * one transition function (task.h). */

#include <check.h>
#include <stdlib.h>

#include "daemon-fixture.h"
#include "daemon.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"

static Manager m;

static void setup(void) {
        m = (Manager) {0};
        ck_assert_int_ge(sd_event_new(&m.event), 0);
        ck_assert_int_eq(task_table_init(&m), 0);
        ck_assert_int_eq(store_init(&m), 0);
}

static void teardown(void) { tf_manager_teardown(&m); }

static Task *task_from_string(const char *s) {
        json_object *o = NULL;
        ck_assert_int_eq(json_parse_strict(s, strlen(s), &o), 0);
        return task_table_add_json(&m, o);
}

/* A task whose record holds only its id, in the table: the caller adds the
 * other keys (a record being built). */
static Task *task_created(const char *id) {
        char *json = strdup_printf("{\"id\":\"%s\"}", id);
        Task *t = task_from_string(json);
        free(json);
        return t;
}

static Task *task_in(TaskStatus s, ChangesetStatus cs) {
        char *json = strdup_printf("{\"id\":\"oc_t_%zu\",\"status\":\"%s\",\"changesetStatus\":\"%s\"}", m.n_tasks,
                                   task_status_to_string(s), changeset_status_to_string(cs));
        Task *t = task_from_string(json);
        free(json);
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->rec.status, s);
        ck_assert_int_eq(t->rec.changeset_status, cs);
        return t;
}

START_TEST(string_tables_both_ways) {
        static const char *const st[] = {"queued", "running", "done", "crashed", "cancelled", "unknown"};
        ck_assert_int_eq(ELEMENTSOF(st), _TASK_STATUS_MAX);
        for (int i = 0; i < _TASK_STATUS_MAX; i++) {
                ck_assert_str_eq(task_status_to_string(i), st[i]);
                ck_assert_int_eq(task_status_from_string(st[i]), i);
        }
        static const char *const cs[] = {"none", "pending", "accepted", "rejected"};
        ck_assert_int_eq(ELEMENTSOF(cs), _CHANGESET_STATUS_MAX);
        for (int i = 0; i < _CHANGESET_STATUS_MAX; i++) {
                ck_assert_str_eq(changeset_status_to_string(i), cs[i]);
                ck_assert_int_eq(changeset_status_from_string(cs[i]), i);
        }
        ck_assert_int_eq(task_status_from_string("Queued"), -EINVAL);
        ck_assert_int_eq(task_status_from_string(""), -EINVAL);
        ck_assert_int_eq(task_status_from_string(NULL), -EINVAL);
        ck_assert_int_eq(task_status_from_string("pending"), -EINVAL);
        ck_assert_int_eq(changeset_status_from_string("done"), -EINVAL);
        ck_assert_int_eq(changeset_status_from_string(NULL), -EINVAL);
        ck_assert_ptr_null(task_status_to_string(_TASK_STATUS_MAX));
        ck_assert_ptr_null(task_status_to_string(_TASK_STATUS_INVALID));
        ck_assert_ptr_null(changeset_status_to_string(_CHANGESET_STATUS_MAX));
        ck_assert_int_eq(task_key_from_string("changesetStatus"), TASK_KEY_changeset_status);
        ck_assert_str_eq(task_key_to_string(TASK_KEY_class_name), "class");
        ck_assert_int_eq(task_key_from_string("nope"), -EINVAL);
}
END_TEST

/* the legal moves of a status, written out independently of task.c */
static bool status_legal(TaskStatus from, TaskStatus to) {
        if (from == to) return true;
        switch (from) {
        case TASK_QUEUED: return to == TASK_RUNNING || to == TASK_CRASHED || to == TASK_CANCELLED || to == TASK_UNKNOWN;
        case TASK_RUNNING: return to == TASK_DONE || to == TASK_CRASHED || to == TASK_CANCELLED || to == TASK_UNKNOWN;
        default: return false;
        }
}

static bool changeset_legal(ChangesetStatus from, ChangesetStatus to) {
        if (from == to) return true;
        if (from == CHANGESET_NONE) return to == CHANGESET_PENDING;
        if (from == CHANGESET_PENDING) return to == CHANGESET_ACCEPTED || to == CHANGESET_REJECTED;
        return false;
}

typedef struct Seen {
        unsigned calls;
        Task *task;
        TaskStatus old_status, new_status;
        ChangesetStatus old_cs, new_cs;
        bool dirty_when_called;
        unsigned order;
} Seen;

static unsigned observer_clock;

static void observer(Task *t, TaskStatus old_status, ChangesetStatus old_cs, void *userdata) {
        Seen *s = userdata;
        s->calls++;
        s->task = t;
        s->old_status = old_status;
        s->old_cs = old_cs;
        s->new_status = t->rec.status;
        s->new_cs = t->rec.changeset_status;
        s->dirty_when_called = t->m->store.dirty;
        s->order = ++observer_clock;
}

START_TEST(every_status_transition) {
        Seen seen = {0};
        ck_assert_int_eq(manager_add_task_observer(&m, observer, &seen), 0);
        unsigned legal = 0, illegal = 0;
        for (TaskStatus from = 0; from < _TASK_STATUS_MAX; from++)
                for (TaskStatus to = 0; to < _TASK_STATUS_MAX; to++) {
                        ck_assert_int_eq(task_status_transition_ok(from, to), status_legal(from, to));
                        Task *t = task_in(from, CHANGESET_NONE);
                        m.store.dirty = false;
                        seen = (Seen) {0};
                        int r = task_transition(t, to, CHANGESET_NONE);
                        if (from == to) {
                                ck_assert_int_eq(r, 0);
                                ck_assert_uint_eq(seen.calls, 0);
                                ck_assert(!m.store.dirty);
                        } else if (status_legal(from, to)) {
                                legal++;
                                ck_assert_int_eq(r, 1);
                                ck_assert_int_eq(t->rec.status, to);
                                ck_assert_uint_eq(seen.calls, 1);
                                ck_assert_ptr_eq(seen.task, t);
                                ck_assert_int_eq(seen.old_status, from);
                                ck_assert_int_eq(seen.new_status, to);
                                ck_assert(seen.dirty_when_called); /* persisted before observers run */
                        } else {
                                illegal++;
                                ck_assert_int_eq(r, -EINVAL);
                                ck_assert_int_eq(t->rec.status, from);
                                ck_assert_uint_eq(seen.calls, 0);
                                ck_assert(!m.store.dirty);
                        }
                }
        ck_assert_uint_eq(legal, 8);
        ck_assert_uint_eq(illegal, 22);
        ck_assert(!task_status_transition_ok(_TASK_STATUS_INVALID, TASK_QUEUED));
        ck_assert(!task_status_transition_ok(TASK_QUEUED, _TASK_STATUS_MAX));
}
END_TEST

START_TEST(every_changeset_transition) {
        Seen seen = {0};
        ck_assert_int_eq(manager_add_task_observer(&m, observer, &seen), 0);
        unsigned legal = 0, illegal = 0;
        for (ChangesetStatus from = 0; from < _CHANGESET_STATUS_MAX; from++)
                for (ChangesetStatus to = 0; to < _CHANGESET_STATUS_MAX; to++) {
                        ck_assert_int_eq(changeset_status_transition_ok(from, to), changeset_legal(from, to));
                        Task *t = task_in(TASK_DONE, from);
                        seen = (Seen) {0};
                        int r = task_transition(t, TASK_DONE, to);
                        if (from == to)
                                ck_assert_int_eq(r, 0);
                        else if (changeset_legal(from, to)) {
                                legal++;
                                ck_assert_int_eq(r, 1);
                                ck_assert_int_eq(t->rec.changeset_status, to);
                                ck_assert_int_eq(seen.old_cs, from);
                                ck_assert_int_eq(seen.new_cs, to);
                                ck_assert_int_eq(seen.old_status, TASK_DONE);
                        } else {
                                illegal++;
                                ck_assert_int_eq(r, -EINVAL);
                                ck_assert_int_eq(t->rec.changeset_status, from);
                                ck_assert_uint_eq(seen.calls, 0);
                        }
                }
        ck_assert_uint_eq(legal, 3);
        ck_assert_uint_eq(illegal, 9);
}
END_TEST

START_TEST(one_illegal_half_refuses_both) {
        Task *t = task_in(TASK_RUNNING, CHANGESET_ACCEPTED);
        /* status legal, changeset illegal: nothing changes */
        ck_assert_int_eq(task_transition(t, TASK_DONE, CHANGESET_PENDING), -EINVAL);
        ck_assert_int_eq(t->rec.status, TASK_RUNNING);
        ck_assert_int_eq(t->rec.changeset_status, CHANGESET_ACCEPTED);
        Task *u = task_in(TASK_DONE, CHANGESET_NONE);
        ck_assert_int_eq(task_transition(u, TASK_RUNNING, CHANGESET_PENDING), -EINVAL);
        ck_assert_int_eq(u->rec.changeset_status, CHANGESET_NONE);
        /* both legal at once: one notification */
        Seen seen = {0};
        ck_assert_int_eq(manager_add_task_observer(&m, observer, &seen), 0);
        Task *v = task_in(TASK_RUNNING, CHANGESET_PENDING);
        ck_assert_int_eq(task_transition(v, TASK_DONE, CHANGESET_ACCEPTED), 1);
        ck_assert_uint_eq(seen.calls, 1);
        ck_assert_int_eq(seen.old_status, TASK_RUNNING);
        ck_assert_int_eq(seen.old_cs, CHANGESET_PENDING);
}
END_TEST

START_TEST(observers_in_registration_order) {
        Seen a = {0}, b = {0};
        ck_assert_int_eq(manager_add_task_observer(&m, observer, &a), 0);
        ck_assert_int_eq(manager_add_task_observer(&m, observer, &b), 0);
        Task *t = task_in(TASK_QUEUED, CHANGESET_NONE);
        ck_assert_int_eq(task_transition(t, TASK_RUNNING, CHANGESET_NONE), 1);
        ck_assert_uint_eq(a.calls, 1);
        ck_assert_uint_eq(b.calls, 1);
        ck_assert_uint_lt(a.order, b.order);
        ck_assert_int_eq(task_transition(t, TASK_RUNNING, CHANGESET_NONE), 0);
        ck_assert_uint_eq(a.calls, 1);
        /* the commit at the end of the loop iteration takes it */
        ck_assert(t->store_pending);
        ck_assert_ptr_nonnull(m.store.flush_source);
}
END_TEST

/* A record as the daemon writes it at dispatch, with keys of a newer version
 * (and one known key whose value the typed field cannot hold) interleaved. */
static const char full_record[] =
        "{\"id\":\"oc_mrutsm8i_764c0067\",\"directory\":\"/w/r\",\"logPath\":\"/s/logs/x.ndjson\",\"role\":\"dispatch\","
        "\"prompt\":\"p\",\"status\":\"running\",\"futureKey\":{\"a\":[1,2]},\"model\":\"m\",\"executorId\":\"pi\","
        "\"variant\":null,\"sessionId\":null,\"originSessionId\":null,\"pid\":42,\"startedAt\":\"2026-01-01T00:00:00.000Z\","
        "\"endedAt\":null,\"exitCode\":null,\"signal\":null,\"promptPreview\":\"p\",\"promptTotalChars\":null,"
        "\"spawnError\":null,\"cancelRequested\":false,\"internal\":false,\"failureReason\":null,\"failureDetail\":null,"
        "\"incomplete\":false,\"finalMarker\":null,\"finalStatus\":null,\"class\":\"c\",\"changesetStatus\":\"pending\","
        "\"diffPath\":null,\"overlayDirs\":{\"root\":\"/o\",\"rwBinds\":[]},\"preDispatchHead\":null,\"changesetError\":null,"
        "\"parentTaskId\":null,\"checkStatus\":\"none\",\"checkCommand\":null,\"checkExitCode\":null,"
        "\"checkOutputTail\":null,\"checkStartedAt\":null,\"checkEndedAt\":null,\"checkOverride\":false,"
        "\"projectConfigWarning\":null,\"checkGatePid\":null,\"outputDir\":\"/s/outputs/x\",\"dispatchedBy\":null,"
        "\"shimPid\":7,\"diskMaxBytes\":1.5,\"zz\":\"last\"}";

static void assert_round_trip(const char *in) {
        Task *t = task_from_string(in);
        ck_assert_ptr_nonnull(t);
        json_object *out = task_record_to_json(&t->rec);
        ck_assert_ptr_nonnull(out);
        ck_assert_str_eq(json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE), in);
        json_object_put(out);
}

START_TEST(json_round_trip_with_unknown_keys) {
        assert_round_trip(full_record);
        Task *t = m.tasks[0];
        ck_assert_str_eq(t->rec.directory, "/w/r");
        ck_assert_int_eq(t->rec.status, TASK_RUNNING);
        ck_assert_int_eq(t->rec.changeset_status, CHANGESET_PENDING);
        int64_t v;
        ck_assert(task_record_get_int(&t->rec, TASK_KEY_pid, &v));
        ck_assert_int_eq(v, 42);
        ck_assert(!task_record_get_int(&t->rec, TASK_KEY_exit_code, &v));
        ck_assert(task_record_has(&t->rec, TASK_KEY_exit_code));
        ck_assert(!task_record_has(&t->rec, TASK_KEY_head_drift_from));
        /* 1.5 is no int: kept verbatim, the typed field stays unset */
        ck_assert(!task_record_has(&t->rec, TASK_KEY_disk_max_bytes));
        json_object *d = task_record_get_json_by_name(&t->rec, "diskMaxBytes");
        ck_assert(json_object_is_type(d, json_type_double));
        json_object_put(d);
        json_object *f = task_record_get_json_by_name(&t->rec, "futureKey");
        ck_assert_ptr_nonnull(f);
        json_object_put(f);
        ck_assert_str_eq(t->rec.class_name, "c");
        ck_assert_str_eq(json_get_string(t->rec.overlay_dirs, "root"), "/o");
        /* a summary task of the Node original: no role, changeset or check keys */
        assert_round_trip("{\"id\":\"oc_s\",\"logPath\":\"/l\",\"summaryOf\":{\"sourceTaskId\":\"oc_a\"},\"status\":\"done\","
                          "\"directory\":\"/d\",\"internal\":true}");
        Task *s = m.tasks[1];
        ck_assert(!task_record_has(&s->rec, TASK_KEY_changeset_status));
        ck_assert_int_eq(s->rec.changeset_status, _CHANGESET_STATUS_INVALID);
        /* an unparseable status (a newer version's) is kept verbatim, not coerced */
        assert_round_trip("{\"id\":\"oc_n\",\"status\":\"paused\",\"changesetStatus\":\"merged\"}");
        ck_assert_int_eq(m.tasks[2]->rec.status, _TASK_STATUS_INVALID);
        ck_assert(!task_is_active(m.tasks[2]));
        ck_assert_int_eq(task_transition(m.tasks[2], TASK_UNKNOWN, m.tasks[2]->rec.changeset_status), -EINVAL);
}
END_TEST

START_TEST(set_keeps_place_and_appends_new_keys) {
        Task *t = task_from_string("{\"id\":\"oc_k\",\"status\":\"running\",\"x\":1,\"endedAt\":null,\"changesetStatus\":\"none\"}");
        ck_assert_int_eq(task_set_str(t, TASK_KEY_ended_at, "E"), 0);
        ck_assert_int_eq(task_set_str(t, TASK_KEY_head_drift_from, "A"), 0);
        ck_assert_int_eq(task_set_null(t, TASK_KEY_accept_started_at), 0);
        ck_assert_int_eq(task_set_int(t, TASK_KEY_shim_pid_recorded, 9), 0);
        ck_assert_int_eq(task_set_json(t, TASK_KEY_changeset_warnings, json_object_new_array()), 0);
        ck_assert_int_eq(task_transition(t, TASK_DONE, CHANGESET_PENDING), 1);
        json_object *out = task_record_to_json(&t->rec);
        ck_assert_str_eq(json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN),
                         "{\"id\":\"oc_k\",\"status\":\"done\",\"x\":1,\"endedAt\":\"E\",\"changesetStatus\":\"pending\","
                         "\"headDriftFrom\":\"A\",\"acceptStartedAt\":null,\"shimPid\":9,\"changesetWarnings\":[]}");
        json_object_put(out);
        /* a known key kept verbatim (wrong type) is replaced in the output once typed */
        Task *u = task_from_string("{\"id\":\"oc_v\",\"pid\":\"12\"}");
        ck_assert_int_eq(task_set_int(u, TASK_KEY_pid, 12), 0);
        out = task_record_to_json(&u->rec);
        ck_assert_str_eq(json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN), "{\"id\":\"oc_v\",\"pid\":12}");
        json_object_put(out);
        /* a summary task gets no changesetStatus by keeping it */
        Task *s = task_from_string("{\"id\":\"oc_s\",\"status\":\"queued\"}");
        ck_assert_int_eq(task_transition(s, TASK_UNKNOWN, s->rec.changeset_status), 1);
        out = task_record_to_json(&s->rec);
        ck_assert_str_eq(json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN), "{\"id\":\"oc_s\",\"status\":\"unknown\"}");
        json_object_put(out);
}
END_TEST

START_TEST(create_then_init_in_order) {
        Task *t = task_created("oc_new");
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(task_set_str(t, TASK_KEY_directory, "/d"), 0);
        ck_assert_int_eq(task_init_status(t, TASK_QUEUED), 0);
        ck_assert_int_eq(task_set_str(t, TASK_KEY_model, NULL), 0);
        ck_assert_int_eq(task_init_changeset(t, CHANGESET_NONE), 0);
        /* only once: later moves go through task_transition */
        ck_assert_int_eq(task_init_status(t, TASK_RUNNING), -EEXIST);
        ck_assert_int_eq(task_init_changeset(t, CHANGESET_PENDING), -EEXIST);
        ck_assert_int_eq(t->rec.status, TASK_QUEUED);
        json_object *out = task_record_to_json(&t->rec);
        ck_assert_str_eq(json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
                         "{\"id\":\"oc_new\",\"directory\":\"/d\",\"status\":\"queued\",\"model\":null,"
                         "\"changesetStatus\":\"none\"}");
        json_object_put(out);
        ck_assert_ptr_eq(manager_find_task(&m, "oc_new"), t);
        manager_remove_task(&m, t);
        ck_assert_ptr_null(manager_find_task(&m, "oc_new"));
}
END_TEST

START_TEST(rejects_non_records) {
        json_object *o = json_object_new_array();
        ck_assert_ptr_null(task_table_add_json(&m, o));
        o = NULL;
        ck_assert_int_eq(json_parse_strict("{\"id\":5}", 8, &o), 0);
        ck_assert_ptr_null(task_table_add_json(&m, o));
        ck_assert_uint_eq(m.n_tasks, 0);
}
END_TEST

START_TEST(summary_from_typed_fields) {
        Task *t = task_from_string(full_record);
        json_object *s = task_summary(t);
        ck_assert_str_eq(json_get_string(s, "status"), "running");
        ck_assert_str_eq(json_get_string(s, "changesetStatus"), "pending");
        ck_assert_str_eq(json_get_string(s, "role"), "dispatch");
        ck_assert_ptr_null(json_get_object(s, "futureKey"));
        ck_assert(!json_object_object_get_ex(s, "prompt", NULL));
        ck_assert(!json_object_object_get_ex(s, "checkStatus", NULL));
        ck_assert(json_object_object_get_ex(s, "failureReason", NULL));
        ck_assert(!json_get_bool(s, "cancelRequested", true));
        json_object_put(s);
}
END_TEST

/* task.list from the incremental order and counts equals the list computed
 * from scratch (every task, stable sort by startedAt descending, counted). */
static void check_list_matches(void) {
        size_t n = m.n_tasks;
        Task **want = calloc(n + 1, sizeof *want);
        int64_t counts[_TASK_STATUS_MAX] = {0};
        for (size_t i = 0; i < n; i++) {
                /* insertion sort: stable */
                Task *t = m.tasks[i];
                size_t j = i;
                while (j > 0 && strcmp(strempty(want[j - 1]->rec.started_at), strempty(t->rec.started_at)) < 0) {
                        want[j] = want[j - 1];
                        j--;
                }
                want[j] = t;
                if (t->rec.status >= 0) counts[t->rec.status]++;
        }
        json_object *o = manager_list(&m, NULL, NULL);
        ck_assert_ptr_nonnull(o);
        json_object *c = NULL, *rows = NULL;
        ck_assert(json_object_object_get_ex(o, "counts", &c));
        for (TaskStatus s = 0; s < _TASK_STATUS_MAX; s++) {
                int64_t v = -1;
                ck_assert(json_get_int64(c, task_status_to_string(s), &v));
                ck_assert_int_eq(v, counts[s]);
        }
        ck_assert(json_object_object_get_ex(o, "tasks", &rows));
        if (n == 0) ck_assert(json_object_is_type(rows, json_type_string));
        else {
                ck_assert_uint_eq(json_object_array_length(rows), n);
                for (size_t i = 0; i < n; i++) {
                        json_object *row = json_object_array_get_idx(rows, i);
                        ck_assert_str_eq(json_get_string(row, "id"), want[i]->id);
                        ck_assert_str_eq(json_get_string(row, "status"), task_status_to_string(want[i]->rec.status));
                        ck_assert_str_eq(strempty(json_get_string(row, "model")), strempty(want[i]->rec.model));
                        ck_assert_str_eq(strempty(json_get_string(row, "startedAt")), strempty(want[i]->rec.started_at));
                }
        }
        json_object_put(o);
        free(want);
}

START_TEST(list_order_and_counts_follow_every_change) {
        check_list_matches();
        const char *starts[] = {"2026-01-01T00:00:01.000Z", "2026-01-01T00:00:02.000Z", "2026-01-01T00:00:02.000Z",
                                "2026-01-01T00:00:03.000Z", "2026-01-01T00:00:03.000Z", "2026-01-01T00:00:03.000Z",
                                "2026-01-01T00:00:04.000Z"};
        Task *t[10];
        for (size_t i = 0; i < ELEMENTSOF(starts); i++) {
                char *json = strdup_printf("{\"id\":\"oc_l%zu\",\"status\":\"%s\",\"changesetStatus\":\"none\",\"startedAt\":\"%s\"}",
                                           i, i % 2 ? "done" : "running", starts[i]);
                t[i] = task_from_string(json);
                free(json);
                check_list_matches();
        }
        ck_assert_uint_eq(m.started_inversions, 0);
        /* a record out of order (an older one appended) */
        t[7] = task_from_string("{\"id\":\"oc_l7\",\"status\":\"queued\",\"startedAt\":\"2026-01-01T00:00:02.000Z\"}");
        check_list_matches();
        ck_assert_uint_gt(m.started_inversions, 0);
        /* one without startedAt, then one created and set as dispatch does */
        t[8] = task_from_string("{\"id\":\"oc_l8\",\"status\":\"crashed\"}");
        check_list_matches();
        t[9] = task_created("oc_l9");
        ck_assert_int_eq(task_init_status(t[9], TASK_QUEUED), 0);
        ck_assert_int_eq(task_init_changeset(t[9], CHANGESET_NONE), 0);
        check_list_matches();
        ck_assert_int_eq(task_set_str(t[9], TASK_KEY_started_at, "2026-01-01T00:00:09.000Z"), 0);
        check_list_matches();
        /* transitions move the counts; field writes refresh the cached rows */
        ck_assert_int_eq(task_transition(t[9], TASK_RUNNING, CHANGESET_NONE), 1);
        ck_assert_int_eq(task_transition(t[0], TASK_DONE, CHANGESET_NONE), 1);
        ck_assert_int_eq(task_set_str(t[3], TASK_KEY_model, "m1"), 0);
        check_list_matches();
        /* startedAt rewritten: earlier, later, null */
        ck_assert_int_eq(task_set_str(t[6], TASK_KEY_started_at, "2026-01-01T00:00:00.000Z"), 0);
        check_list_matches();
        ck_assert_int_eq(task_set_str(t[6], TASK_KEY_started_at, "2026-01-01T00:00:05.000Z"), 0);
        check_list_matches();
        ck_assert_int_eq(task_set_null(t[2], TASK_KEY_started_at), 0);
        check_list_matches();
        /* removals: middle, the out-of-order ones, the last */
        manager_remove_task(&m, t[4]);
        check_list_matches();
        manager_remove_task(&m, t[7]);
        check_list_matches();
        manager_remove_task(&m, t[2]);
        check_list_matches();
        manager_remove_task(&m, t[8]);
        check_list_matches();
        ck_assert_uint_eq(m.started_inversions, 0); /* sorted again: the fast path */
        manager_remove_task(&m, t[9]);
        check_list_matches();
        manager_free_root_cache(&m);
}
END_TEST

TF_MAIN("task", "task", setup, teardown, 0, string_tables_both_ways, every_status_transition,
        every_changeset_transition, one_illegal_half_refuses_both, observers_in_registration_order,
        json_round_trip_with_unknown_keys, set_keeps_place_and_appends_new_keys, rejects_non_records,
        create_then_init_in_order, summary_from_typed_fields, list_order_and_counts_follow_every_change)
