#pragma once
/* The scheduler (scheduler.c): which queued task launches next, and when. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "core/settings.h"

typedef struct Manager Manager;
typedef struct Task Task;

/* One provider (the model up to its first '/'), with its own launch times
 * and running count: created on first use (enqueue or a slot taken), never
 * removed, kept in insertion order. Its launch queue is its tasks in
 * Scheduler.queue_head's list (dispatch order), so FIFO within the
 * provider. Written only by scheduler.c. */
typedef struct SchedProvider {
        char *key;                  /* provider key (scheduler_provider_key_len) */
        uint64_t max_concurrent;    /* its providerLimits entry, 0 = unlimited */
        uint64_t max_per_window;    /* likewise; counted over the global window length */
        uint64_t *launch_times;     /* CLOCK_MONOTONIC ms of its launches in the window, oldest first */
        size_t n_launch_times;
        unsigned running;           /* slots its tasks hold */
} SchedProvider;

typedef void (*scheduler_launch_fn)(Task *t);
typedef void (*scheduler_after_fn)(Manager *m, void *userdata);

typedef struct SchedulerAfter {
        scheduler_after_fn fn;
        void *userdata;
} SchedulerAfter;

/* The scheduler's state (Manager.scheduler, written only by scheduler.c;
 * also Task.next_queued/counted_running/sched_provider). */
typedef struct Scheduler {
        Task *queue_head, *queue_tail; /* the queued tasks in dispatch order (each provider's FIFO is its
                                        * tasks in this list) */
        unsigned running;              /* slots held */
        SchedProvider *providers;      /* insertion order, never removed */
        size_t n_providers;
        size_t cursor;                 /* the provider the next pass starts at */
        uint64_t *launch_times;        /* CLOCK_MONOTONIC ms of the launches in the window, oldest first */
        size_t n_launch_times;
        uint64_t last_launch_at;       /* CLOCK_MONOTONIC ms of the last launch (valid if launched_once) */
        bool launched_once;
        sd_event_source *launch_timer; /* the earliest time-based block lifts */
        sd_event_source *tick;         /* the deferred tick a kick armed */
        scheduler_launch_fn launch;    /* starts an admitted task (the lifecycle's; NULL: none) */
        SchedulerAfter *after;         /* called once at the end of the next tick */
        size_t n_after;
} Scheduler;

/* The tick: prune the windows, launch queue heads round-robin over the
 * providers (starting at the cursor, one launch per pass, FIFO within a
 * provider) while the global cap, window and stagger allow and the provider's
 * own limits and cooldown (cooldown.h) allow, then arm the one launch timer
 * (sd-event, CLOCK_MONOTONIC) for the moment the earliest time-based block
 * lifts. A block that only a settlement can lift (a concurrency cap) arms no
 * timer: settlement kicks. Triggers: enqueue, the timer, settlement, a
 * cooldown change.
 *
 * scheduler_kick runs no tick itself: it drops the queue entries that are no
 * longer queued and arms a one-shot defer source, whose callback runs the
 * tick on its own stack, from the event loop. So nothing launches from
 * inside a method handler or a settlement, and a launch that fails at once
 * (and settles, and kicks) only arms the next tick. Kicks before it runs
 * fold into one tick. */
void scheduler_kick(Manager *m);
/* Call fn(m, userdata) once, at the end of the next tick (its launches
 * done); arms one. For an answer that must tell whether the task launched
 * (task.dispatch's reply says "running" when a slot was free). 0, -ENOMEM
 * (then fn is not called). */
int scheduler_after_tick(Manager *m, scheduler_after_fn fn, void *userdata);
/* The decision of one tick's pass at CLOCK_MONOTONIC ms now, without the
 * launch: prunes the windows, and if the global limits allow, takes the
 * next task (round-robin from the cursor, FIFO within its provider, the
 * provider's limits and cooldown allowing) out of the queue with its launch
 * recorded in the windows and the stagger; NULL if none may launch now.
 * the tick launches each; the unit tests drive it with their own clock. */
Task *scheduler_next_launch(Manager *m, uint64_t now);
/* When a blocked queue can move without a settlement (CLOCK_MONOTONIC ms,
 * > now), or 0: nothing queued, or only a settlement can help. */
uint64_t scheduler_next_wakeup(Manager *m, uint64_t now);
/* Append t (queued) to the queue; creates its provider; launches nothing
 * (scheduler_kick does). */
void scheduler_enqueue(Manager *m, Task *t);
/* Take t out of the queue, order of the rest kept: true if it was queued.
 * With nothing left queued the launch timer is dropped. */
bool scheduler_remove(Manager *m, Task *t);
/* t holds a concurrency slot from now on (idempotent; global and its
 * provider's count) / gives it back. */
void scheduler_take_slot(Task *t);
void scheduler_release_slot(Task *t);
/* Drop the scheduler's state (shutdown). */
void scheduler_free(Manager *m);

/* Provider key of a model: the model up to the first '/', the whole
 * string without one; "" for no model. Returns its length in model. */
size_t scheduler_provider_key_len(const char *model);

/* Where a queued task stands, for task.status (additive fields, documented
 * in docs/taskferryd.8.md "SCHEDULER"): adds to o
 *   queuePosition  1-based place in its provider's FIFO (1: launches next
 *                  for that provider),
 *   queueProvider  the provider key,
 *   queuedReason   why it is not running yet (one sentence),
 *   cooldownUntil  ISO time its provider's cooldown ends (cooldown.h), only
 *                  while one is active.
 * Nothing for a task that is not queued. -ENOMEM. */
int scheduler_status_fields(Manager *m, Task *t, json_object *o);

/* The providerLimits entries come parsed from settings.c (Settings.provider_limits). */
