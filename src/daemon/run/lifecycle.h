#pragma once
/* The lifecycle (lifecycle.c): the one owner of a task's life. Every task of
 * every kind is made by task_new, and every move of its state is one
 * function here, which also releases what the task holds, keyed by the
 * state it enters, the way systemd's service_set_state() does:
 *
 *   (new) ──task_new──▶ queued ──task_start──▶ running ──shim exits──▶ settling
 *     │                   │                      │                       │
 *     │                   └─task_cancel─▶ cancelled                      │
 *     │                   └─launch fails─▶ crashed          settlement done
 *     │                                          │                       ▼
 *     └──────────── coldplug: running again, queued again, crashed, unknown; or final
 *
 * The modules under it do the work and report back through the callbacks it
 * gives them (launch prepares and spawns, the monitor watches the shim, the
 * settlement classifies and extracts, the watchdog watches the log); none of
 * them moves a task's status. The protocol and D-Bus layers above create
 * and cancel tasks only through here.
 *
 * What a state releases (task_release):
 *   leaving queued       its queue entry;
 *   running → settling   the watchdog, the kill timer, what is left of its
 *                        scope unit (SIGKILL to the cgroup);
 *   any final state      the launch request (the caller's env), the prompt
 *                        file, its concurrency slot, its own socket and the
 *                        connections on it; the scheduler is kicked.
 * Its overlay and executor homes go when its changeset is decided (change.h)
 * or found empty (the settlement); its waiters are answered by their own
 * observer (wait.h). */

#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>

#include "core/launch-options.h"
#include "core/task.h"

typedef struct Manager Manager;

/* What to make: the kind, and the values of the new record. Strings and JSON
 * are borrowed (copied into the task). */
typedef struct TaskSpec {
        TaskKind kind;
        const char *id;                /* NULL: a new one (task_id_new); a summary's is chosen before */
        const char *directory;         /* absolute and resolved (a summary: the summaries dir) */
        const char *prompt;            /* the user's prompt (a summary: its fixed description) */
        bool augment_prompt;           /* add the output-dir block to the worker's prompt */
        const char *model, *executor_id, *variant;
        const char *session_id, *origin_session_id;
        const char *final_marker, *class_name, *parent_task_id;
        const char *dispatched_by;     /* the task whose worker asked for it (nested, or a sandboxed caller's
                                        * advisor or summary) */
        const char *job;               /* a timer job's name */
        const char *started_at;        /* ISO time; NULL: now */
        json_object *summary_of;       /* a summary's summaryOf object */
        const LaunchOptions *launch;   /* NULL: none */
        json_object *caller_env;       /* the env param (secrets; never logged) */
        json_object *network;          /* the record's network (network.h); NULL: none (a summary gets the default) */
        const char *network_warning;   /* networkWarning; NULL: none */
} TaskSpec;

/* Give the scheduler task_start as its launch (the lifecycle registers no
 * observer). 0. */
int lifecycle_init(Manager *m);

/* Make a task: its record in tasks.json's key order for its kind (a
 * dispatch-like kind creates its output dir first), its launch request, both
 * durable (the id handed out survives a crash right after the reply); then
 * announced to every observer (task_announce_added), queued, and the
 * scheduler kicked. On failure nothing is left behind. 0 and *ret; -errno
 * with *reason (malloc'd, "error: ...\nhelp: ..." text: the sentence the
 * caller answers with). */
int task_new(Manager *m, const TaskSpec *spec, Task **ret, char **reason);

/* The scheduler admitted t: prepare (launch.h), move to running durably,
 * spawn the shim, watch it. Any failure on the way settles t as crashed with
 * spawnError. */
void task_start(Task *t);

/* Cancel t and, first, the tasks its worker dispatched (and theirs): a
 * queued one is cancelled before launch; a running one gets SIGTERM, SIGKILL
 * after grace_ms (monitor.h task_terminate), and cancelRequested. Who may
 * cancel is the caller's rule (peer.h), checked before. 0 with *note (the
 * protocol's note: what happened, malloc'd); -ESRCH (a running task with no
 * pid yet) or the signal's -errno, with *reason. */
int task_cancel(Task *t, uint64_t grace_ms, char **note, char **reason);

/* A running task must stop (a watchdog's verdict: reason and detail become
 * its failureReason/failureDetail): recorded durably, then terminated with
 * the watchdog grace. No-op for a task already failing or not running. */
void task_fail_running(Task *t, const char *reason, const char *detail);

/* The changeset of t moved (accepted or rejected: change.c's decision). */
int task_decide_changeset(Task *t, ChangesetStatus cs);

/* After the store loaded the table and this daemon owns the socket: what
 * each loaded task still needs. A running task's shim is watched again (or
 * the task settled from its exit.json when it ended meanwhile); a queued one
 * is queued again in table order with its launch request, or crashed when
 * that cannot be read; any other active task becomes unknown; an accept that
 * began under an earlier daemon is marked interrupted. */
void task_coldplug(Manager *m);
