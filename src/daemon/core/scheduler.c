/* The scheduler: the queue of tasks waiting for a slot, the slots, the
 * launch window, the lower-dir stagger and the per-provider limits, plus
 * provider cooldowns (cooldown.h). Owns
 * Manager.scheduler and Task.next_queued/counted_running/sched_provider. */

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cooldown.h"
#include "core/manager.h"
#include "core/scheduler.h"
#include "core/settings.h"
#include "core/task.h"
#include "json-util.h"
#include "protocol-keys.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"

#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- providers ---- */

size_t scheduler_provider_key_len(const char *model) {
        if (!model) return 0;
        const char *slash = strchr(model, '/');
        return slash ? (size_t) (slash - model) : strlen(model);
}

/* 1 + index of the provider of model, created if new; 0 on ENOMEM. */
static size_t provider_of_model(Manager *m, const char *model) {
        Scheduler *sch = &m->scheduler;
        size_t len = scheduler_provider_key_len(model);
        for (size_t i = 0; i < sch->n_providers; i++) {
                const char *k = sch->providers[i].key;
                if (strlen(k) == len && (len == 0 || strncmp(k, model, len) == 0)) return i + 1;
        }
        SchedProvider *n = reallocarray(sch->providers, sch->n_providers + 1, sizeof *n);
        if (!n) return 0;
        sch->providers = n;
        SchedProvider *p = &n[sch->n_providers];
        *p = (SchedProvider) {.key = strndup(model ? model : "", len)};
        if (!p->key) return 0;
        const ProviderLimit *l = settings_provider_limit(&m->settings, model);
        if (l) {
                p->max_concurrent = l->max_concurrent_tasks;
                p->max_per_window = l->max_dispatches_per_window;
        }
        return ++sch->n_providers;
}

static SchedProvider *provider_of(Manager *m, Task *t) {
        Scheduler *sch = &m->scheduler;
        size_t i = provider_of_model(m, t->rec.model);
        return i ? &sch->providers[i - 1] : NULL;
}

static bool task_in_provider(const Task *t, const SchedProvider *p) {
        size_t len = scheduler_provider_key_len(t->rec.model);
        return strlen(p->key) == len && (len == 0 || strncmp(p->key, t->rec.model, len) == 0);
}

/* ---- slots ---- */

void scheduler_take_slot(Task *t) {
        Scheduler *sch = &t->m->scheduler;
        if (t->counted_running) return;
        Manager *m = t->m;
        t->counted_running = true;
        sch->running++;
        size_t i = provider_of_model(m, t->rec.model);
        t->sched_provider = i;
        if (i) sch->providers[i - 1].running++;
}

void scheduler_release_slot(Task *t) {
        Scheduler *sch = &t->m->scheduler;
        if (!t->counted_running) return;
        t->counted_running = false;
        if (sch->running > 0) sch->running--;
        if (t->sched_provider && t->sched_provider <= sch->n_providers) {
                SchedProvider *p = &sch->providers[t->sched_provider - 1];
                if (p->running > 0) p->running--;
        }
        t->sched_provider = 0;
}

/* ---- the queue ---- */

void scheduler_enqueue(Manager *m, Task *t) {
        Scheduler *sch = &m->scheduler;
        (void) provider_of(m, t); /* providers are created on first enqueue */
        t->next_queued = NULL;
        if (sch->queue_tail) sch->queue_tail->next_queued = t;
        else sch->queue_head = t;
        sch->queue_tail = t;
}

bool scheduler_remove(Manager *m, Task *t) {
        Scheduler *sch = &m->scheduler;
        Task **pp = &sch->queue_head, *prev = NULL;
        while (*pp && *pp != t) {
                prev = *pp;
                pp = &(*pp)->next_queued;
        }
        if (!*pp) return false;
        *pp = t->next_queued;
        if (sch->queue_tail == t) sch->queue_tail = prev;
        t->next_queued = NULL;
        /* the launch timer is dropped only once no work is left: a cancel
         * of one queued task leaves it armed for the others */
        if (!sch->queue_head) sch->launch_timer = sd_event_source_disable_unref(sch->launch_timer);
        return true;
}

/* Drop queue entries that are no longer queued (cancelled meanwhile). */
static void drop_stale(Manager *m) {
        Scheduler *sch = &m->scheduler;
        Task *t = sch->queue_head;
        while (t) {
                Task *next = t->next_queued;
                if (t->rec.status != TASK_QUEUED) scheduler_remove(m, t);
                t = next;
        }
}

static Task *provider_head(Manager *m, const SchedProvider *p) {
        Scheduler *sch = &m->scheduler;
        for (Task *t = sch->queue_head; t; t = t->next_queued)
                if (t->rec.status == TASK_QUEUED && task_in_provider(t, p)) return t;
        return NULL;
}

/* ---- windows ---- */

static void prune(uint64_t *times, size_t *n, uint64_t now, uint64_t window) {
        size_t k = 0;
        while (k < *n && times[k] + window <= now) k++;
        if (k == 0) return;
        memmove(times, times + k, (*n - k) * sizeof *times);
        *n -= k;
}

static int push_time(uint64_t **times, size_t *n, uint64_t now) {
        uint64_t *nt = reallocarray(*times, *n + 1, sizeof *nt);
        if (!nt) return -ENOMEM;
        nt[(*n)++] = now;
        *times = nt;
        return 0;
}

static bool global_at_cap(Manager *m) { return m->scheduler.running >= m->settings.max_concurrent_tasks; }

static bool global_window_full(Manager *m) {
        Scheduler *sch = &m->scheduler;
        return m->settings.max_dispatches_per_window > 0 && sch->n_launch_times >= m->settings.max_dispatches_per_window;
}

static bool staggering(Manager *m, uint64_t now) {
        Scheduler *sch = &m->scheduler;
        return sch->launched_once && m->settings.lowerdir_stagger_ms > 0 &&
               now - sch->last_launch_at < m->settings.lowerdir_stagger_ms;
}

static bool provider_at_cap(const SchedProvider *p) { return p->max_concurrent > 0 && p->running >= p->max_concurrent; }

static bool provider_window_full(const SchedProvider *p) {
        return p->max_per_window > 0 && p->n_launch_times >= p->max_per_window;
}

/* ms until p's cooldown ends, 0 if none */
static uint64_t provider_cooldown_left(Manager *m, const SchedProvider *p, uint64_t now) {
        const ProviderCooldown *c = cooldown_find(m, p->key, now);
        return c ? c->until_mono - now : 0;
}

/* ---- the tick ---- */

static int on_launch_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        m->scheduler.launch_timer = sd_event_source_disable_unref(m->scheduler.launch_timer);
        scheduler_kick(m);
        return 0;
}

/* The earliest CLOCK_MONOTONIC ms at which a queued task could launch
 * without a settlement first, or 0 when only a settlement can help (a
 * concurrency cap) or nothing is queued. */
static uint64_t next_wakeup(Manager *m, uint64_t now) {
        Scheduler *sch = &m->scheduler;
        if (!sch->queue_head || global_at_cap(m)) return 0;
        uint64_t when = now;
        if (global_window_full(m)) when = MAX(when, sch->launch_times[0] + m->settings.dispatch_window_ms);
        if (staggering(m, now)) when = MAX(when, sch->last_launch_at + m->settings.lowerdir_stagger_ms);
        uint64_t best = 0;
        for (size_t i = 0; i < sch->n_providers; i++) {
                SchedProvider *p = &sch->providers[i];
                if (provider_at_cap(p) || !provider_head(m, p)) continue;
                uint64_t at = now;
                if (provider_window_full(p)) at = MAX(at, p->launch_times[0] + m->settings.dispatch_window_ms);
                uint64_t cd = provider_cooldown_left(m, p, now);
                if (cd > 0) at = MAX(at, now + cd);
                if (!best || at < best) best = at;
        }
        if (!best) return 0;
        return MAX(MAX(when, best), now + 1);
}

static void arm_timer(Manager *m, uint64_t now) {
        Scheduler *sch = &m->scheduler;
        uint64_t at = next_wakeup(m, now);
        if (!at) {
                sch->launch_timer = sd_event_source_disable_unref(sch->launch_timer);
                return;
        }
        uint64_t usec = at * 1000ULL;
        if (sch->launch_timer) {
                if (sd_event_source_set_time(sch->launch_timer, usec) >= 0 &&
                    sd_event_source_set_enabled(sch->launch_timer, SD_EVENT_ONESHOT) >= 0)
                        return;
                sch->launch_timer = sd_event_source_disable_unref(sch->launch_timer);
        }
        int r = sd_event_add_time(m->event, &sch->launch_timer, CLOCK_MONOTONIC, usec, 1000, on_launch_timer, m);
        if (r < 0) log_error_errno(r, "cannot arm the scheduler's launch timer; queued tasks wait for the next settlement");
}

/* One pass: the first provider from the cursor on that can launch gives up
 * its queue head, with the launch recorded, and the cursor moves past it
 * (round-robin: one launch per provider per pass). */
static Task *drain_pass(Manager *m, uint64_t now) {
        Scheduler *sch = &m->scheduler;
        size_t n = sch->n_providers;
        for (size_t i = 0; i < n; i++) {
                size_t idx = (sch->cursor + i) % n;
                SchedProvider *p = &sch->providers[idx];
                Task *t = provider_head(m, p);
                if (!t || provider_window_full(p) || provider_at_cap(p) || provider_cooldown_left(m, p, now) > 0) continue;
                if (push_time(&sch->launch_times, &sch->n_launch_times, now) < 0 ||
                    push_time(&p->launch_times, &p->n_launch_times, now) < 0) {
                        log_error("cannot record a launch time: out of memory");
                        return NULL;
                }
                sch->last_launch_at = now;
                sch->launched_once = true;
                sch->cursor = (sch->cursor + i + 1) % n;
                scheduler_remove(m, t);
                return t;
        }
        return NULL;
}

Task *scheduler_next_launch(Manager *m, uint64_t now) {
        Scheduler *sch = &m->scheduler;
        drop_stale(m);
        uint64_t window = m->settings.dispatch_window_ms;
        prune(sch->launch_times, &sch->n_launch_times, now, window);
        for (size_t i = 0; i < sch->n_providers; i++)
                prune(sch->providers[i].launch_times, &sch->providers[i].n_launch_times, now, window);
        if (!sch->queue_head || global_window_full(m) || global_at_cap(m) || staggering(m, now)) return NULL;
        return drain_pass(m, now);
}

uint64_t scheduler_next_wakeup(Manager *m, uint64_t now) { return next_wakeup(m, now); }

/* The tick itself, from the event loop. */
static int on_tick(sd_event_source *s, void *userdata) {
        Manager *m = userdata;
        Scheduler *sch = &m->scheduler;
        sch->tick = sd_event_source_disable_unref(sch->tick);
        sch->launch_timer = sd_event_source_disable_unref(sch->launch_timer);
        Task *t;
        while (!m->shutting_down && sch->launch && (t = scheduler_next_launch(m, mono_ms())))
                sch->launch(t); /* a launch that fails at once settles t and kicks: the next tick */
        if (!m->shutting_down) arm_timer(m, mono_ms());
        /* those waiting for this tick; the ones a callback adds wait for the next */
        SchedulerAfter *after = TAKE_PTR(sch->after);
        size_t n = sch->n_after;
        sch->n_after = 0;
        for (size_t i = 0; i < n; i++) after[i].fn(m, after[i].userdata);
        free(after);
        return 0;
}

static int arm_tick(Manager *m) {
        Scheduler *sch = &m->scheduler;
        if (sch->tick) return 0;
        if (!m->event) return -ESTALE; /* a manager without a loop (a unit test's) runs no tick */
        int r = sd_event_add_defer(m->event, &sch->tick, on_tick, m);
        if (r < 0) return log_error_errno(r, "cannot arm the scheduler's tick; queued tasks wait for the next kick");
        return 0;
}

void scheduler_kick(Manager *m) {
        if (m->shutting_down) return;
        drop_stale(m);
        (void) arm_tick(m);
}

int scheduler_after_tick(Manager *m, scheduler_after_fn fn, void *userdata) {
        Scheduler *sch = &m->scheduler;
        SchedulerAfter *n = reallocarray(sch->after, sch->n_after + 1, sizeof *n);
        if (!n) return -ENOMEM;
        sch->after = n;
        int r = arm_tick(m);
        if (r < 0) return r;
        sch->after[sch->n_after++] = (SchedulerAfter) {fn, userdata};
        return 0;
}

void scheduler_free(Manager *m) {
        Scheduler *sch = &m->scheduler;
        sch->launch_timer = sd_event_source_disable_unref(sch->launch_timer);
        sch->tick = sd_event_source_disable_unref(sch->tick);
        /* the daemon stops: those waiting for a tick get none (their owners drop them) */
        free(sch->after);
        sch->after = NULL;
        sch->n_after = 0;
        for (size_t i = 0; i < sch->n_providers; i++) {
                free(sch->providers[i].key);
                free(sch->providers[i].launch_times);
        }
        free(sch->providers);
        sch->providers = NULL;
        sch->n_providers = 0;
        free(sch->launch_times);
        sch->launch_times = NULL;
        sch->n_launch_times = 0;
}

/* ---- task.status ---- */

static uint64_t ms_until(uint64_t at, uint64_t now) { return at > now ? at - now : 0; }

static char *iso_in(uint64_t ms_from_now, char buf[static 32]) { return format_iso(now_ms() + ms_from_now, buf); }

int scheduler_status_fields(Manager *m, Task *t, json_object *o) {
        Scheduler *sch = &m->scheduler;
        if (t->rec.status != TASK_QUEUED) return 0;
        size_t len = scheduler_provider_key_len(t->rec.model);
        _cleanup_free_ char *key = strndup(t->rec.model ? t->rec.model : "", len);
        if (!key) return -ENOMEM;
        SchedProvider *p = NULL;
        for (size_t i = 0; i < sch->n_providers && !p; i++)
                if (streq(sch->providers[i].key, key)) p = &sch->providers[i];
        int64_t pos = 0;
        bool in_queue = false;
        for (Task *q = sch->queue_head; q; q = q->next_queued) {
                if (q->rec.status != TASK_QUEUED || !p || !task_in_provider(q, p)) continue;
                pos++;
                if (q == t) {
                        in_queue = true;
                        break;
                }
        }
        uint64_t now = mono_ms();
        const char *shown = *key ? key : "(no model)";
        char iso[32];
        _cleanup_free_ char *reason = NULL;
        uint64_t cd = p ? provider_cooldown_left(m, p, now) : 0;
        const ProviderCooldown *c = p ? cooldown_find(m, p->key, now) : NULL;
        if (!in_queue)
                reason = strdup("waiting to be queued again (the daemon is starting or stopping)");
        else if (cd > 0)
                reason = strdup_printf("provider %s is cooling down after %s of task %s: no launch for it before %s",
                                       shown, c && c->reason ? c->reason : "a rate limit", c && c->task_id ? c->task_id : "?",
                                       iso_in(cd, iso));
        else if (global_at_cap(m))
                reason = strdup_printf("all %" PRIu64 " task slots are in use (maxConcurrentTasks); it launches when a task ends",
                                       m->settings.max_concurrent_tasks);
        else if (p && provider_at_cap(p))
                reason = strdup_printf("provider %s is at its limit of %" PRIu64
                                       " running tasks (providerLimits); it launches when one of them ends",
                                       shown, p->max_concurrent);
        else if (pos > 1)
                reason = strdup_printf("%" PRId64 " earlier task%s for provider %s launch%s first (first in, first out)",
                                       pos - 1, pos - 1 == 1 ? "" : "s", shown, pos - 1 == 1 ? "es" : "");
        else if (global_window_full(m))
                reason = strdup_printf("%zu launches in the last %" PRIu64 " ms (maxDispatchesPerWindow); next launch "
                                       "at %s at the earliest",
                                       sch->n_launch_times, m->settings.dispatch_window_ms,
                                       iso_in(ms_until(sch->launch_times[0] + m->settings.dispatch_window_ms, now), iso));
        else if (p && provider_window_full(p))
                reason = strdup_printf("provider %s had %zu launches in the last %" PRIu64
                                       " ms (providerLimits); next launch at %s at the earliest",
                                       shown, p->n_launch_times, m->settings.dispatch_window_ms,
                                       iso_in(ms_until(p->launch_times[0] + m->settings.dispatch_window_ms, now), iso));
        else if (staggering(m, now))
                reason = strdup_printf("launches are staggered by %" PRIu64 " ms (lowerdirStaggerMs); next launch at %s",
                                       m->settings.lowerdir_stagger_ms,
                                       iso_in(ms_until(sch->last_launch_at + m->settings.lowerdir_stagger_ms, now), iso));
        else
                reason = strdup("other providers' tasks launch first (round-robin between providers)");
        if (!reason) return -ENOMEM;
        if ((in_queue && json_add_int(o, PK_queuePosition, pos) < 0) || json_add_string(o, PK_queueProvider, key) < 0 ||
            json_add_string(o, PK_queuedReason, reason) < 0)
                return -ENOMEM;
        if (cd > 0 && c && json_add_string(o, PK_cooldownUntil, format_iso(c->until_real, iso)) < 0) return -ENOMEM;
        return 0;
}
