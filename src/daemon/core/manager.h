#pragma once
/* The daemon's top object: one sd-event loop owning the task table, the
 * socket server, launches, settlements and forked jobs. Each field is owned
 * (written) by the module named beside it; the others only read it. The
 * core's state is embedded; a layer above keeps its own struct, known here
 * only by name, so that this header includes nothing above core/
 * (docs/architecture.md). */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "paths.h"
#include "core/scheduler.h"
#include "core/settings.h"
#include "core/store.h"
#include "core/task.h"

typedef struct Manager Manager;
typedef struct Job Job;
typedef struct ChangeJob ChangeJob;

/* A task's own socket: the api layer serves it (server.h), the run layer
 * binds it into the task's sandbox and closes it when the task ends. The
 * server sets Manager.task_sockets once at start. */
typedef struct TaskSocketOps {
        int (*open)(Task *t);                /* listen on it: 0, -errno */
        const char *(*path)(const Task *t);  /* where it is, NULL: none */
        void (*close)(Task *t);              /* stop listening, close the connections it accepted */
} TaskSocketOps;

struct Manager {
        /* main.c: set up once at start, then only read */
        sd_event *event;
        tf_paths paths;
        Settings settings;
        bool shutting_down;            /* main.c: the loop is stopping */

        /* ---- core/ ---- */
        TaskObservers observers;       /* task.c (manager_add_observer) */
        /* task-table.c: the table, in creation order; the tasks per status
         * (its key observer keeps them), and how many neighbours in the
         * table are out of startedAt order (0: the table is sorted, the list
         * is its reverse) */
        Task **tasks;
        size_t n_tasks, cap_tasks;
        int64_t status_counts[_TASK_STATUS_MAX];
        size_t started_inversions;
        Store store;                   /* store.c: tasks.json */
        Scheduler scheduler;           /* scheduler.c: the queue, slots, windows and the tick */
        struct ProviderCooldown *cooldowns; /* cooldown.c: providers parked after a rate limit */
        size_t n_cooldowns;
        Job *jobs;                     /* jobs.c: forked blocking work */
        Job *jobs_waiting, *jobs_waiting_tail; /* jobs.c: queries waiting for a slot, oldest first */
        unsigned n_query_jobs;         /* jobs.c: queries running */
        struct EnvFile *env_file;      /* env-file.c: the env file's last good values, its watch */
        sd_bus *user_bus;              /* user-bus.c: the one user-bus connection (NULL: none) */
        int user_bus_error;            /* user-bus.c: why there is none (-errno of sd_bus_open_user) */
        /* what the layers above provide the ones below, set once at start */
        const TaskSocketOps *task_sockets; /* server.c (NULL: tasks get no socket) */

        /* ---- run/ ---- */
        ChangeJob *change_jobs;        /* change.c: accepts/rejects, running and waiting */
        struct Scope *scope;           /* scope.c: transient scopes on the user bus */
        struct HostWatch *host_watch;  /* host-watch.c: what the sandbox masks of /etc and /opt (NULL: none) */

        /* ---- features/ ---- */
        struct AdvisorSessions *advisor; /* advisor.c: the advisor sessions */
        struct SummaryState *summary;  /* summary.c: report summary sessions, the models listing */
        struct Activity *activity;     /* activity.c: refresh timer, summary-model check */

        /* ---- api/ ---- */
        struct Server *server;         /* server.c: the user's socket, connections, budgets */
        struct RootCache *root_cache;  /* task-views.c: workspace roots of task directories */
        struct AdvisorCalls *advisor_calls; /* handlers-advisor.c: parked task.advisor calls */
        struct Events *events;         /* events.c: subscriptions, sequence */

        /* ---- systemd/ ---- */
        struct Bus *bus;               /* bus.c: the D-Bus API on the user bus */
        struct Journal *journal;       /* journal.c: where task state entries go */
        struct Notify *notify;         /* notify.c: STATUS= updates, idle exit */
};
