/* scheduler.c: the FIFO queue and the concurrency slots (spec lifecycle.md
 * §5: a global cap, first in first out). Launches need a real shim; these
 * cases keep the cap full so scheduler_kick never launches, and check what
 * it must not do. */

#include <check.h>
#include <stdlib.h>

#include "daemon.h"
#include "json-util.h"
#include "util.h"

static Manager m;

static void setup(void) {
        m = (Manager) {0};
        ck_assert_int_ge(sd_event_new(&m.event), 0);
}

static void teardown(void) {
        for (size_t i = 0; i < m.n_tasks; i++) task_free(m.tasks[i]);
        free(m.tasks);
        m.persist_timer = sd_event_source_disable_unref(m.persist_timer);
        m.event = sd_event_unref(m.event);
}

static Task *queued(const char *id) {
        char *s = strdup_printf("{\"id\":\"%s\",\"status\":\"queued\",\"changesetStatus\":\"none\"}", id);
        json_object *o = NULL;
        ck_assert_int_eq(json_parse_strict(s, strlen(s), &o), 0);
        free(s);
        Task *t = task_new(&m, o);
        ck_assert_ptr_nonnull(t);
        return t;
}

static void assert_queue(const char *const *want, size_t n) {
        size_t i = 0;
        Task *last = NULL;
        for (Task *t = m.queue_head; t; t = t->next_queued) {
                ck_assert_uint_lt(i, n);
                ck_assert_str_eq(t->id, want[i++]);
                last = t;
        }
        ck_assert_uint_eq(i, n);
        ck_assert_ptr_eq(m.queue_tail, last);
}

START_TEST(fifo_and_removal) {
        Task *a = queued("oc_a"), *b = queued("oc_b"), *c = queued("oc_c"), *d = queued("oc_d");
        scheduler_enqueue(&m, a);
        scheduler_enqueue(&m, b);
        scheduler_enqueue(&m, c);
        scheduler_enqueue(&m, d);
        static const char *const all[] = {"oc_a", "oc_b", "oc_c", "oc_d"};
        assert_queue(all, 4);
        ck_assert(scheduler_remove(&m, b)); /* middle */
        static const char *const no_b[] = {"oc_a", "oc_c", "oc_d"};
        assert_queue(no_b, 3);
        ck_assert(scheduler_remove(&m, d)); /* tail */
        static const char *const no_d[] = {"oc_a", "oc_c"};
        assert_queue(no_d, 2);
        ck_assert(!scheduler_remove(&m, d)); /* not queued any more */
        ck_assert(scheduler_remove(&m, a)); /* head */
        static const char *const only_c[] = {"oc_c"};
        assert_queue(only_c, 1);
        scheduler_enqueue(&m, a);
        static const char *const c_a[] = {"oc_c", "oc_a"};
        assert_queue(c_a, 2);
        ck_assert(scheduler_remove(&m, c));
        ck_assert(scheduler_remove(&m, a));
        assert_queue(NULL, 0);
        ck_assert_ptr_null(m.queue_head);
}
END_TEST

START_TEST(slots_are_counted_once) {
        Task *a = queued("oc_a"), *b = queued("oc_b");
        scheduler_take_slot(a);
        scheduler_take_slot(a); /* idempotent */
        ck_assert_uint_eq(m.running, 1);
        scheduler_take_slot(b);
        ck_assert_uint_eq(m.running, 2);
        scheduler_release_slot(a);
        scheduler_release_slot(a);
        ck_assert_uint_eq(m.running, 1);
        ck_assert(!a->counted_running);
        scheduler_release_slot(b);
        ck_assert_uint_eq(m.running, 0);
}
END_TEST

START_TEST(kick_respects_the_cap) {
        m.settings.max_concurrent_tasks = 1;
        Task *busy = queued("oc_busy");
        scheduler_take_slot(busy); /* the one slot is taken */
        Task *a = queued("oc_a"), *b = queued("oc_b");
        scheduler_enqueue(&m, a);
        scheduler_enqueue(&m, b);
        scheduler_kick(&m);
        static const char *const both[] = {"oc_a", "oc_b"};
        assert_queue(both, 2); /* nothing launched, order kept */
        ck_assert_int_eq(a->rec.status, TASK_QUEUED);
        /* a shutting-down daemon launches nothing even with free slots */
        scheduler_release_slot(busy);
        m.shutting_down = true;
        scheduler_kick(&m);
        assert_queue(both, 2);
        /* a queued entry that is no longer queued (cancelled) is skipped, not launched */
        m.shutting_down = false;
        scheduler_take_slot(busy);
        ck_assert_int_eq(task_transition(a, TASK_CANCELLED, a->rec.changeset_status), 1);
        ck_assert_int_eq(task_transition(b, TASK_CANCELLED, b->rec.changeset_status), 1);
        scheduler_release_slot(busy);
        scheduler_kick(&m);
        assert_queue(NULL, 0);
        ck_assert_uint_eq(m.running, 0);
        ck_assert_int_eq(a->rec.status, TASK_CANCELLED);
}
END_TEST

int main(void) {
        Suite *s = suite_create("scheduler");
        TCase *tc = tcase_create("scheduler");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, fifo_and_removal);
        tcase_add_test(tc, slots_are_counted_once);
        tcase_add_test(tc, kick_respects_the_cap);
        suite_add_tcase(s, tc);
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
