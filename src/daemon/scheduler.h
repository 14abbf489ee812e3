#pragma once
/* The scheduler (scheduler.c): which queued task launches next. */

#include <stdbool.h>

typedef struct Manager Manager;
typedef struct Task Task;

/* scheduler.c (spec lifecycle.md §5): FIFO under the global concurrency cap.
 * Owns Manager.queue_head/queue_tail/running, Task.next_queued/counted_running. */
/* Launch queued tasks FIFO while fewer than settings.max_concurrent_tasks run. */
void scheduler_kick(Manager *m);
/* Append t (queued) to the FIFO; launches nothing (scheduler_kick does). */
void scheduler_enqueue(Manager *m, Task *t);
/* Take t out of the FIFO, order of the rest kept: true if it was queued. */
bool scheduler_remove(Manager *m, Task *t);
/* t holds a concurrency slot from now on (idempotent) / gives it back. */
void scheduler_take_slot(Task *t);
void scheduler_release_slot(Task *t);
