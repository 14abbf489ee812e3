/* scheduler.c: the FIFO queue and the concurrency slots (a global cap,
 * first in first out). Launches need a real shim; these
 * cases keep the cap full so scheduler_kick never launches, and check what
 * it must not do. */

#include <check.h>
#include <stdarg.h>
#include <stdlib.h>

#include "core/cooldown.h"
#include "daemon-fixture.h"
#include "daemon.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"
#include "time-util.h"

static Manager m;

static void setup(void) {
        tf_manager_setup(&m, "test-scheduler");
        /* the settings' defaults (settings.h) unless a case says otherwise */
        m.settings.max_concurrent_tasks = 4;
        m.settings.max_dispatches_per_window = 2;
        m.settings.dispatch_window_ms = 5000;
        m.settings.lowerdir_stagger_ms = 3000;
        m.settings.provider_cooldown_enabled = true;
}

static void teardown(void) {
        cooldowns_free(&m);
        for (size_t i = 0; i < m.settings.n_provider_limits; i++) free(m.settings.provider_limits[i].provider);
        free(m.settings.provider_limits);
        tf_manager_teardown(&m);
}

static Task *queued_model(const char *id, const char *model) {
        if (!model) return tf_taskf(&m, "{\"id\":\"%s\",\"status\":\"queued\",\"changesetStatus\":\"none\"}", id);
        return tf_taskf(&m, "{\"id\":\"%s\",\"status\":\"queued\",\"model\":\"%s\",\"changesetStatus\":\"none\"}", id,
                        model);
}

static Task *queued(const char *id) { return queued_model(id, NULL); }

static void assert_queue(const char *const *want, size_t n) {
        size_t i = 0;
        Task *last = NULL;
        for (Task *t = m.scheduler.queue_head; t; t = t->next_queued) {
                ck_assert_uint_lt(i, n);
                ck_assert_str_eq(t->id, want[i++]);
                last = t;
        }
        ck_assert_uint_eq(i, n);
        ck_assert_ptr_eq(m.scheduler.queue_tail, last);
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
        ck_assert_ptr_null(m.scheduler.queue_head);
}
END_TEST

START_TEST(slots_are_counted_once) {
        Task *a = queued("oc_a"), *b = queued("oc_b");
        scheduler_take_slot(a);
        scheduler_take_slot(a); /* idempotent */
        ck_assert_uint_eq(m.scheduler.running, 1);
        scheduler_take_slot(b);
        ck_assert_uint_eq(m.scheduler.running, 2);
        scheduler_release_slot(a);
        scheduler_release_slot(a);
        ck_assert_uint_eq(m.scheduler.running, 1);
        ck_assert(!a->counted_running);
        scheduler_release_slot(b);
        ck_assert_uint_eq(m.scheduler.running, 0);
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
        ck_assert_uint_eq(m.scheduler.running, 0);
        ck_assert_int_eq(a->rec.status, TASK_CANCELLED);
}
END_TEST


/* ---- the tick's decisions, driven with our own clock ---- */

/* Launch what the scheduler lets launch at now: like the tick with the
 * lifecycle's task_start replaced by taking the slot (the task is running).
 * Returns the ids launched, space-separated. */
static char launched[512];
static const char *launch_at(uint64_t now) {
        launched[0] = 0;
        Task *t;
        while ((t = scheduler_next_launch(&m, now))) {
                ck_assert_int_eq(t->rec.status, TASK_QUEUED);
                ck_assert_int_eq(task_transition(t, TASK_RUNNING, t->rec.changeset_status), 1);
                scheduler_take_slot(t);
                if (launched[0]) strcat(launched, " ");
                strcat(launched, t->id);
        }
        return launched;
}

/* The caps of a case: concurrent tasks, dispatches per window (of
 * dispatch_window_ms), the stagger between launches (ms). */
static void caps(unsigned concurrent, unsigned per_window, uint64_t stagger_ms) {
        m.settings.max_concurrent_tasks = concurrent;
        m.settings.max_dispatches_per_window = per_window;
        m.settings.lowerdir_stagger_ms = stagger_ms;
}

/* A queued task of model (queued_model), enqueued. */
static Task *enqueue(const char *id, const char *model) {
        Task *t = queued_model(id, model);
        scheduler_enqueue(&m, t);
        return t;
}

/* enqueue for each id, model pair that follows (NULL-terminated), in order. */
static void enqueue_all(const char *id, ...) __attribute__((sentinel));
static void enqueue_all(const char *id, ...) {
        va_list ap;
        va_start(ap, id);
        for (; id; id = va_arg(ap, const char *)) enqueue(id, va_arg(ap, const char *));
        va_end(ap);
}

static void finish(Task *t) {
        scheduler_release_slot(t);
        ck_assert_int_eq(task_transition(t, TASK_DONE, t->rec.changeset_status), 1);
}

START_TEST(window_admits_two_per_five_seconds) {
        caps(4, 2, 0);
        uint64_t t0 = mono_ms();
        enqueue_all("oc_a", "p/x", "oc_b", "p/x", "oc_c", "p/x", NULL);
        ck_assert_str_eq(launch_at(t0), "oc_a oc_b");
        ck_assert_str_eq(launch_at(t0 + 4999), "");
        ck_assert_uint_eq(scheduler_next_wakeup(&m, t0 + 10), t0 + 5000);
        ck_assert_str_eq(launch_at(t0 + 5000), "oc_c");
        ck_assert_uint_eq(scheduler_next_wakeup(&m, t0 + 5000), 0); /* nothing queued */
}
END_TEST

START_TEST(stagger_spaces_every_launch) {
        caps(4, 100, 3000);
        uint64_t t0 = mono_ms();
        enqueue_all("oc_a", "p/x", "oc_b", "q/x", NULL);
        ck_assert_str_eq(launch_at(t0), "oc_a");
        ck_assert_str_eq(launch_at(t0 + 2999), "");
        ck_assert_uint_eq(scheduler_next_wakeup(&m, t0 + 1), t0 + 3000);
        ck_assert_str_eq(launch_at(t0 + 3000), "oc_b");
        /* 0 disables it */
        m.settings.lowerdir_stagger_ms = 0;
        enqueue_all("oc_c", "p/x", "oc_d", "p/x", NULL);
        ck_assert_str_eq(launch_at(t0 + 3000), "oc_c oc_d");
}
END_TEST

START_TEST(global_cap_waits_for_a_settlement) {
        caps(2, 100, 0);
        uint64_t t0 = mono_ms();
        Task *a = enqueue("oc_a", "p/x");
        enqueue_all("oc_b", "p/x", "oc_c", "q/x", NULL);
        ck_assert_str_eq(launch_at(t0), "oc_a oc_c"); /* round-robin: p, then q */
        ck_assert_str_eq(launch_at(t0 + 60000), "");
        /* only a settlement frees a slot: no timer to poll with */
        ck_assert_uint_eq(scheduler_next_wakeup(&m, t0 + 60000), 0);
        finish(a);
        ck_assert_str_eq(launch_at(t0 + 60001), "oc_b");
}
END_TEST

START_TEST(provider_limits_bind_only_their_provider) {
        caps(100, 100, 0);
        /* TASKFERRY_PROVIDER_LIMITS=opencode-go:1,prov:10:2 (its grammar: test-settings) */
        m.settings.provider_limits = calloc(2, sizeof(ProviderLimit));
        m.settings.provider_limits[0] = (ProviderLimit) {strdup("opencode-go"), 1, 0};
        m.settings.provider_limits[1] = (ProviderLimit) {strdup("prov"), 10, 2};
        m.settings.n_provider_limits = 2;
        uint64_t t0 = mono_ms();
        Task *g1 = enqueue("oc_g1", "opencode-go/a");
        enqueue_all("oc_g2", "opencode-go/b", "oc_o1", "openai/gpt", NULL);
        ck_assert_str_eq(launch_at(t0), "oc_g1 oc_o1");
        ck_assert_uint_eq(scheduler_next_wakeup(&m, t0), 0); /* opencode-go waits for its running task */
        finish(g1);
        ck_assert_str_eq(launch_at(t0 + 1), "oc_g2");
        /* prov:10:2 holds the 3rd until the (global) window passes */
        enqueue_all("oc_p1", "prov/m", "oc_p2", "prov/m", "oc_p3", "prov/m", "oc_u1", "unlisted/m", NULL);
        ck_assert_str_eq(launch_at(t0 + 10), "oc_p1 oc_u1 oc_p2");
        ck_assert_uint_eq(scheduler_next_wakeup(&m, t0 + 10), t0 + 10 + 5000);
        ck_assert_str_eq(launch_at(t0 + 5009), "");
        ck_assert_str_eq(launch_at(t0 + 5010), "oc_p3");
}
END_TEST

START_TEST(round_robin_between_providers_fifo_within) {
        caps(100, 100, 0);
        uint64_t t0 = mono_ms();
        const char *ids[] = {"oc_a1", "oc_a2", "oc_a3", "oc_b1", "oc_b2", "oc_c1"};
        const char *models[] = {"a/1", "a/2", "a", "b/1", "b/2", "c/x/y"};
        Task *t[6];
        for (int i = 0; i < 6; i++) t[i] = enqueue(ids[i], models[i]);
        /* a cancelled queued task is skipped; it touches only its own provider's queue */
        ck_assert(scheduler_remove(&m, t[3]));
        ck_assert_int_eq(task_transition(t[3], TASK_CANCELLED, t[3]->rec.changeset_status), 1);
        ck_assert_str_eq(launch_at(t0), "oc_a1 oc_b2 oc_c1 oc_a2 oc_a3");
}
END_TEST

START_TEST(cursor_moves_past_the_provider_that_launched) {
        caps(100, 1, 0); /* one launch per tick */
        m.settings.dispatch_window_ms = 10;
        uint64_t t0 = mono_ms();
        enqueue_all("oc_a1", "a/x", "oc_a2", "a/x", "oc_b1", "b/x", NULL);
        ck_assert_str_eq(launch_at(t0), "oc_a1");
        /* new work for a arrives; b's turn comes first */
        enqueue("oc_a3", "a/x");
        ck_assert_str_eq(launch_at(t0 + 10), "oc_b1");
        ck_assert_str_eq(launch_at(t0 + 20), "oc_a2");
        ck_assert_str_eq(launch_at(t0 + 30), "oc_a3");
}
END_TEST

START_TEST(cooldown_parks_only_its_provider) {
        caps(4, 100, 0);
        ck_assert_int_eq(cooldown_start(&m, "p", 3000, "rate_limited", "oc_x"), 0);
        uint64_t t0 = mono_ms();
        const ProviderCooldown *c = cooldown_find(&m, "p", t0);
        ck_assert_ptr_nonnull(c);
        Task *p1 = enqueue("oc_p1", "p/m");
        enqueue("oc_q1", "q/m");
        ck_assert_str_eq(launch_at(t0), "oc_q1");
        ck_assert_uint_eq(scheduler_next_wakeup(&m, t0), c->until_mono);
        json_object *o = json_object_new_object();
        ck_assert_int_eq(scheduler_status_fields(&m, p1, o), 0);
        int64_t pos = 0;
        ck_assert(json_get_int64(o, "queuePosition", &pos));
        ck_assert_int_eq(pos, 1);
        ck_assert_str_eq(json_get_string(o, "queueProvider"), "p");
        ck_assert_ptr_nonnull(json_get_string(o, "cooldownUntil"));
        ck_assert_ptr_nonnull(strstr(json_get_string(o, "queuedReason"), "cooling down"));
        json_object_put(o);
        ck_assert_str_eq(launch_at(c->until_mono - 1), "");
        ck_assert_str_eq(launch_at(c->until_mono), "oc_p1");
        /* a later failure extends, never shortens; the cap holds */
        ck_assert_int_eq(cooldown_start(&m, "p", 99999999999ULL, "rate_limited", "oc_y"), 0);
        c = cooldown_find(&m, "p", mono_ms());
        ck_assert_uint_le(c->until_mono, mono_ms() + COOLDOWN_MAX_MS);
        ck_assert_uint_ge(c->until_mono + 1000, mono_ms() + COOLDOWN_MAX_MS);
        uint64_t before = c->until_mono;
        ck_assert_int_eq(cooldown_start(&m, "p", 10, "rate_limited", "oc_z"), 0);
        ck_assert_uint_eq(cooldown_find(&m, "p", mono_ms())->until_mono, before);
        json_object *snap = cooldown_snapshot(&m);
        ck_assert_uint_eq(json_object_array_length(snap), 1);
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(snap, 0), "provider"), "p");
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(snap, 0), "taskId"), "oc_y");
        json_object_put(snap);
}
END_TEST

START_TEST(status_fields_of_queued_tasks) {
        caps(1, 2, 0);
        uint64_t t0 = mono_ms();
        Task *a = enqueue("oc_a", "p/x");
        enqueue("oc_b", "p/x");
        Task *c = enqueue("oc_c", "p/y");
        ck_assert_str_eq(launch_at(t0), "oc_a");
        json_object *o = json_object_new_object();
        ck_assert_int_eq(scheduler_status_fields(&m, a, o), 0); /* running: nothing */
        ck_assert_int_eq(json_object_object_length(o), 0);
        ck_assert_int_eq(scheduler_status_fields(&m, c, o), 0);
        int64_t pos = 0;
        ck_assert(json_get_int64(o, "queuePosition", &pos));
        ck_assert_int_eq(pos, 2);
        ck_assert_ptr_nonnull(strstr(json_get_string(o, "queuedReason"), "task slots are in use"));
        ck_assert_ptr_null(json_get_string(o, "cooldownUntil"));
        json_object_put(o);
}
END_TEST

/* scheduler_kick arms one sd-event timer for the moment the window frees,
 * and none when only a settlement can help. */
START_TEST(kick_arms_the_timer_for_the_window) {
        caps(4, 2, 0);
        uint64_t t0 = mono_ms();
        enqueue_all("oc_a", "p/x", "oc_b", "p/x", "oc_c", "p/x", NULL);
        ck_assert_str_eq(launch_at(t0), "oc_a oc_b");
        scheduler_kick(&m); /* the window is full: oc_c cannot launch (and no launch is ever reached) */
        tf_run_pending(&m); /* the tick the kick armed */
        ck_assert_ptr_nonnull(m.scheduler.launch_timer);
        uint64_t usec = 0;
        ck_assert_int_ge(sd_event_source_get_time(m.scheduler.launch_timer, &usec), 0);
        ck_assert_uint_eq(usec, (t0 + 5000) * 1000ULL);
        /* at the global cap instead: no timer */
        m.settings.max_concurrent_tasks = 2;
        scheduler_kick(&m);
        tf_run_pending(&m);
        ck_assert_ptr_null(m.scheduler.launch_timer);
}
END_TEST


TF_MAIN("scheduler", "scheduler", setup, teardown, 0, fifo_and_removal, slots_are_counted_once, kick_respects_the_cap,
        window_admits_two_per_five_seconds, stagger_spaces_every_launch, global_cap_waits_for_a_settlement,
        provider_limits_bind_only_their_provider, round_robin_between_providers_fifo_within,
        cursor_moves_past_the_provider_that_launched, cooldown_parks_only_its_provider, status_fields_of_queued_tasks,
        kick_arms_the_timer_for_the_window)
