/* The scheduler: the queue of tasks waiting for a slot and the slots
 * themselves (spec lifecycle.md §5; today a global cap, FIFO). Owns
 * Manager.queue_head/queue_tail/running and Task.next_queued/counted_running. */

#include "launch.h"
#include "manager.h"
#include "scheduler.h"
#include "settings.h"
#include "task.h"
#include "util.h"

void scheduler_take_slot(Task *t) {
        if (t->counted_running) return;
        t->counted_running = true;
        t->m->running++;
}

void scheduler_release_slot(Task *t) {
        if (t->counted_running) {
                t->counted_running = false;
                if (t->m->running > 0) t->m->running--;
        }
}

void scheduler_enqueue(Manager *m, Task *t) {
        t->next_queued = NULL;
        if (m->queue_tail) m->queue_tail->next_queued = t;
        else m->queue_head = t;
        m->queue_tail = t;
}

bool scheduler_remove(Manager *m, Task *t) {
        Task **pp = &m->queue_head, *prev = NULL;
        while (*pp && *pp != t) {
                prev = *pp;
                pp = &(*pp)->next_queued;
        }
        if (!*pp) return false;
        *pp = t->next_queued;
        if (m->queue_tail == t) m->queue_tail = prev;
        t->next_queued = NULL;
        return true;
}

void scheduler_kick(Manager *m) {
        if (m->shutting_down) return;
        while (m->queue_head && m->running < m->settings.max_concurrent_tasks) {
                Task *t = m->queue_head;
                scheduler_remove(m, t);
                if (t->rec.status != TASK_QUEUED) continue;
                launch_task(t);
        }
}

