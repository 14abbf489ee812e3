#pragma once
/* The daemon's top object: one sd-event loop owning the task table, the
 * socket server, launches, settlements and forked jobs (DESIGN.md
 * "Processes"). Each group of fields below is owned (written) by the module
 * named beside it; the others only read it. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "paths.h"
#include "api/server.h"
#include "core/settings.h"
#include "core/task.h"

typedef struct Manager Manager;
typedef struct Job Job;
typedef struct ChangeJob ChangeJob;

typedef struct TaskObserver {
        task_observer_fn fn;
        void *userdata;
} TaskObserver;

struct Manager {
        /* main.c: set up once at start, then only read */
        sd_event *event;
        tf_paths paths;
        Settings settings;
        /* server.c */
        Listener listener;             /* the user's socket */
        bool socket_self_bound;
        uint64_t accept_warned_ms;     /* monotonic ms of the last "cannot accept" warning */
        Connection *connections;
        unsigned in_flight;            /* active requests on the user's socket (cap PROTOCOL_MAX_IN_FLIGHT) */
        unsigned waits;                /* task.wait requests on the user's socket (cap PROTOCOL_MAX_WAITS) */
        /* tasks.c: the table */
        Task **tasks;
        size_t n_tasks, cap_tasks;
        /* tasks.c, for task.list without scanning the table: tasks per status
         * (task_transition keeps it), and how many neighbours in the table
         * are out of startedAt order (0: the table is sorted, the list is
         * its reverse) */
        int64_t status_counts[_TASK_STATUS_MAX];
        size_t started_inversions;
        struct RootCache *root_cache;  /* workspace roots of task directories (tasks.c) */
        /* scheduler.c (lifecycle.md §5): the queued tasks in dispatch order
         * (each provider's FIFO is its tasks in this list), the slots, the
         * launch window and stagger, the providers and the one launch timer */
        Task *queue_head, *queue_tail;
        unsigned running;
        struct SchedProvider *sched_providers; /* insertion order, never removed */
        size_t n_sched_providers;
        size_t sched_cursor;
        uint64_t *launch_times;        /* CLOCK_MONOTONIC ms of the launches in the window, oldest first */
        size_t n_launch_times;
        uint64_t last_launch_at;       /* CLOCK_MONOTONIC ms of the last launch (valid if launched_once) */
        bool launched_once;
        bool sched_kicking, sched_kick_again;
        sd_event_source *launch_timer;
        /* cooldown.c: providers parked after a rate limit (cooldown.h) */
        struct ProviderCooldown *cooldowns;
        size_t n_cooldowns;
        /* task.c (manager_add_task_observer) */
        TaskObserver *task_observers;
        size_t n_task_observers;
        /* store.c */
        char *state_load_error;
        bool dirty;
        /* store.c: identity of the tasks.json it wrote last (a flush copies
         * unchanged records' text from it, Task.text_off/text_len) */
        bool tasks_json_written;
        dev_t tasks_json_dev;
        ino_t tasks_json_ino;
        off_t tasks_json_size;
        struct timespec tasks_json_mtim;
        sd_event_source *persist_timer;
        /* advisor.c: sessions and parked task.advisor calls; summary.c: report summary state */
        struct AdvisorState *advisor;
        struct SummaryState *summary;
        /* jobs.c */
        Job *jobs;
        ChangeJob *change_jobs;        /* change.c: accepts/rejects, running and waiting */
        bool shutting_down;            /* main.c: the loop is stopping */
        struct Events *events;         /* events.c: subscriptions, sequence */
        struct Activity *activity;     /* activity.c: refresh timer, summary-model check */
        struct Bus *bus;               /* bus.c: the user bus connection (NULL: none) */
        struct Scope *scope;           /* scope.c: the user-bus connection for transient scopes */
        struct Notify *notify;         /* notify.c: STATUS= updates, idle exit */
        struct EnvFile *env_file;      /* env-file.c: the env file's last good values, its watch */
};
