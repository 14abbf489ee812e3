/* task-table.c: the table in creation order, its counts per status and its
 * count of neighbours out of startedAt order, kept across adds, removals and
 * every write of status or startedAt (through the table's key observer). */

#include <check.h>
#include <stdlib.h>

#include "daemon-fixture.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"

static Manager m;

static void setup(void) { tf_manager_setup(&m, "test-task-table"); }
static void teardown(void) { tf_manager_teardown(&m); }

static Task *add(const char *id, const char *status, const char *started_at) {
        return tf_taskf(&m,
                        "{\"id\":\"%s\",\"directory\":\"/nonexistent\",\"status\":\"%s\",\"changesetStatus\":\"none\","
                        "\"startedAt\":\"%s\"}",
                        id, status, started_at);
}

static void assert_ids(const char *const *want, size_t n) {
        ck_assert_uint_eq(m.n_tasks, n);
        for (size_t i = 0; i < n; i++) ck_assert_str_eq(m.tasks[i]->id, want[i]);
}

START_TEST(creation_order_and_lookup) {
        char id[32];
        /* past the first allocation (64 rows): the table grows, order kept */
        for (int i = 0; i < 130; i++) {
                snprintf(id, sizeof id, "oc_%03d", i);
                Task *t = add(id, "done", "2026-01-01T00:00:00.000Z");
                ck_assert_ptr_eq(t->m, &m);
                ck_assert_ptr_eq(m.tasks[i], t);
        }
        ck_assert_uint_eq(m.n_tasks, 130);
        ck_assert_uint_ge(m.cap_tasks, 130);
        for (int i = 0; i < 130; i++) {
                snprintf(id, sizeof id, "oc_%03d", i);
                ck_assert_ptr_eq(manager_find_task(&m, id), m.tasks[i]);
        }
        ck_assert_ptr_null(manager_find_task(&m, "oc_999"));
        ck_assert_ptr_null(manager_find_task(&m, ""));
        ck_assert_ptr_null(manager_find_task(&m, "OC_000")); /* ids are exact */
        ck_assert_ptr_null(manager_find_task(&m, "oc_00"));  /* no prefix match */
        ck_assert_int_eq(m.status_counts[TASK_DONE], 130);
        ck_assert_uint_eq(m.started_inversions, 0);
}
END_TEST

START_TEST(not_a_record_is_not_added) {
        static const char *const bad[] = {"[]", "\"oc_x\"", "{}", "{\"id\":7}", "{\"id\":null}", "{\"status\":\"done\"}"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                json_object *o = NULL;
                ck_assert_int_eq(json_parse_strict(bad[i], strlen(bad[i]), &o), 0);
                ck_assert_msg(!task_table_add_json(&m, o), "%s was added", bad[i]); /* o is freed either way */
        }
        ck_assert_uint_eq(m.n_tasks, 0);
        for (int s = 0; s < _TASK_STATUS_MAX; s++) ck_assert_int_eq(m.status_counts[s], 0);
        /* a record with a status the daemon does not know is kept (verbatim),
         * counted under no status */
        Task *t = add("oc_odd", "exploded", "2026-01-01T00:00:00.000Z");
        ck_assert_ptr_eq(manager_find_task(&m, "oc_odd"), t);
        for (int s = 0; s < _TASK_STATUS_MAX; s++) ck_assert_int_eq(m.status_counts[s], 0);
        manager_remove_task(&m, t);
        for (int s = 0; s < _TASK_STATUS_MAX; s++) ck_assert_int_eq(m.status_counts[s], 0);
        ck_assert_uint_eq(m.n_tasks, 0);
}
END_TEST

START_TEST(counts_follow_every_status_write) {
        Task *a = add("oc_a", "queued", "2026-01-01T00:00:00.001Z");
        Task *b = add("oc_b", "queued", "2026-01-01T00:00:00.002Z");
        add("oc_c", "crashed", "2026-01-01T00:00:00.003Z");
        ck_assert_int_eq(m.status_counts[TASK_QUEUED], 2);
        ck_assert_int_eq(m.status_counts[TASK_CRASHED], 1);
        ck_assert_int_eq(task_transition(a, TASK_RUNNING, CHANGESET_NONE), 1);
        ck_assert_int_eq(m.status_counts[TASK_QUEUED], 1);
        ck_assert_int_eq(m.status_counts[TASK_RUNNING], 1);
        ck_assert_int_eq(task_transition(a, TASK_DONE, CHANGESET_NONE), 1);
        ck_assert_int_eq(task_transition(b, TASK_CANCELLED, CHANGESET_NONE), 1);
        ck_assert_int_eq(m.status_counts[TASK_QUEUED], 0);
        ck_assert_int_eq(m.status_counts[TASK_RUNNING], 0);
        ck_assert_int_eq(m.status_counts[TASK_DONE], 1);
        ck_assert_int_eq(m.status_counts[TASK_CANCELLED], 1);
        /* a move the status machine refuses changes no count */
        ck_assert_int_lt(task_transition(a, TASK_QUEUED, CHANGESET_NONE), 0);
        ck_assert_int_eq(m.status_counts[TASK_DONE], 1);
        ck_assert_int_eq(m.status_counts[TASK_QUEUED], 0);
        /* removal takes the task's count away */
        manager_remove_task(&m, a);
        ck_assert_int_eq(m.status_counts[TASK_DONE], 0);
        int64_t total = 0;
        for (int s = 0; s < _TASK_STATUS_MAX; s++) total += m.status_counts[s];
        ck_assert_int_eq(total, (int64_t) m.n_tasks);
}
END_TEST

START_TEST(inversions_follow_adds_writes_and_removals) {
        Task *a = add("oc_a", "done", "2026-01-01T00:00:00.001Z");
        Task *b = add("oc_b", "done", "2026-01-01T00:00:00.005Z");
        Task *c = add("oc_c", "done", "2026-01-01T00:00:00.003Z"); /* b > c */
        ck_assert_uint_eq(m.started_inversions, 1);
        /* equal neighbours are in order */
        add("oc_d", "done", "2026-01-01T00:00:00.003Z");
        ck_assert_uint_eq(m.started_inversions, 1);
        /* writing c's startedAt past b's mends b/c and breaks c/d */
        ck_assert_int_eq(task_set_str(c, TASK_KEY_started_at, "2026-01-01T00:00:00.009Z"), 0);
        ck_assert_uint_eq(m.started_inversions, 1);
        /* and back below a: a/b fine, b > c, c < d fine */
        ck_assert_int_eq(task_set_str(c, TASK_KEY_started_at, "2026-01-01T00:00:00.000Z"), 0);
        ck_assert_uint_eq(m.started_inversions, 1);
        /* removing c: its pairs go, and b (005) now meets d (003): inverted */
        manager_remove_task(&m, c);
        static const char *const left[] = {"oc_a", "oc_b", "oc_d"};
        assert_ids(left, ELEMENTSOF(left));
        ck_assert_uint_eq(m.started_inversions, 1);
        /* removing b mends the table */
        manager_remove_task(&m, b);
        ck_assert_uint_eq(m.started_inversions, 0);
        /* an absent startedAt sorts first ("") */
        Task *e = tf_task(&m, "{\"id\":\"oc_e\",\"directory\":\"/x\",\"status\":\"done\"}");
        ck_assert_uint_eq(m.started_inversions, 1);
        ck_assert_int_eq(task_set_null(e, TASK_KEY_started_at), 0);
        ck_assert_uint_eq(m.started_inversions, 1);
        ck_assert_int_eq(task_set_str(e, TASK_KEY_started_at, "2026-01-02T00:00:00.000Z"), 0);
        ck_assert_uint_eq(m.started_inversions, 0);
        /* removing the head and the tail */
        manager_remove_task(&m, a);
        manager_remove_task(&m, e);
        static const char *const last[] = {"oc_d"};
        assert_ids(last, 1);
        ck_assert_uint_eq(m.started_inversions, 0);
}
END_TEST

/* The invariant: started_inversions is the number of out-of-order
 * neighbours, whatever sequence of writes and removals made the table. */
START_TEST(inversions_match_a_recount) {
        char id[32], at[40];
        unsigned seed = 7;
        for (int i = 0; i < 40; i++) {
                seed = seed * 1103515245u + 12345u;
                snprintf(id, sizeof id, "oc_%02d", i);
                snprintf(at, sizeof at, "2026-01-01T00:00:00.%03uZ", (seed >> 16) % 10);
                add(id, "done", at);
        }
        for (int round = 0; round < 200; round++) {
                seed = seed * 1103515245u + 12345u;
                size_t i = (seed >> 16) % m.n_tasks;
                if (round % 7 == 6 && m.n_tasks > 2) manager_remove_task(&m, m.tasks[i]);
                else {
                        snprintf(at, sizeof at, "2026-01-01T00:00:00.%03uZ", (seed >> 8) % 10);
                        ck_assert_int_eq(task_set_str(m.tasks[i], TASK_KEY_started_at, at), 0);
                }
                size_t want = 0;
                for (size_t k = 1; k < m.n_tasks; k++)
                        if (strcmp(m.tasks[k - 1]->rec.started_at, m.tasks[k]->rec.started_at) > 0) want++;
                ck_assert_uint_eq(m.started_inversions, want);
        }
}
END_TEST

TF_MAIN("task-table", "task-table", setup, teardown, 0, creation_order_and_lookup, not_a_record_is_not_added,
        counts_follow_every_status_write, inversions_follow_adds_writes_and_removals, inversions_match_a_recount)
