#pragma once
/* A decision on a changeset: task.accept applies a pending changeset to the
 * user's tree (3-way, against the base the shim snapshotted at launch),
 * task.reject drops it; both then remove the task's overlay and executor
 * homes.
 *
 * Decisions into one workspace (same_workspace(), workspace.h) run one at a
 * time, in the order they were asked for (a second accept must not race the
 * first between its checks and its apply, nor see a tree half applied);
 * decisions into different workspaces run in parallel. Each runs as a
 * forked job (jobs.h). Owns ChangeJob, Manager.change_jobs and Task.busy;
 * reads Task.accept_interrupted (coldplug sets it) and clears it once an
 * accept completes. Every status change goes through task_transition. */

#include <errno.h>
#include <stdbool.h>
#include <json-c/json.h>


typedef struct Manager Manager;
typedef struct Task Task;
typedef struct ChangeJob ChangeJob;

/* The outcome of a queued decision, called exactly once (possibly before
 * change_start returns, when its job cannot be started): rc 0 with the
 * method's result (ownership passes: task.accept's {taskId,
 * changesetStatus, applied, checkStatus | reason, cleanupFailed?} or
 * task.reject's {taskId, changesetStatus, cleanupFailed?}), or rc < 0
 * with reason (the "error: ..." text). rc == -ECANCELED (reason NULL, result
 * NULL): the daemon stops before the decision started; answer nothing.
 * rc == CHANGE_REFUSED_RISKS (reason set, result NULL): the accept was
 * refused because the patch holds files that can run code on the host
 * later (changeset-risk.h) and allowConfig was not given; nothing was
 * applied, the changeset is still pending. */
#define CHANGE_REFUSED_RISKS (-EPERM)
typedef void (*change_done_fn)(void *userdata, int rc, json_object *result, const char *reason);

/* One queued or running decision; the list Manager.change_jobs holds them
 * in request order. */
struct ChangeJob {
        Task *t;
        bool accept;
        bool allow_config; /* accept: land files that can run code on the host (changeset-risk.h) */
        bool started;      /* its job runs; the job owns it until done */
        bool waiting_gate; /* the task's check gate is being stopped first (gate.h gate_stop) */
        bool override;     /* accept --force over a check gate that blocks it: checkOverride once applied */
        change_done_fn done;
        void *userdata;
        ChangeJob *next;
};

/* Decide t's changeset: accept (true) or reject (false). Refuses, with the
 * reason in *reason and -EIO, the accept of a changeset that never lands, a changeset that is not
 * pending, a task still queued/running/settling, one already being decided,
 * and an accept whose diff was never extracted or is missing on disk. An
 * accept without allow_config whose patch holds files that can run code
 * on the host later (classified again in the job, from the patch that
 * would be applied) is refused through done(CHANGE_REFUSED_RISKS). A
 * reject flips changesetStatus to rejected (and flushes tasks.json) before
 * any cleanup; an accept records acceptStartedAt durably before the tree is
 * touched (coldplug then marks an interrupted accept so it is never applied
 * twice). 0 once queued: done() reports the outcome; out of memory is -EIO
 * with its text in *reason too. */
int change_start(Manager *m, Task *t, bool accept, bool allow_config, change_done_fn done, void *userdata,
                 char **reason);

/* What a decision asks. */
typedef struct ChangeRequest {
        bool accept;
        bool force;        /* accept: land it whatever the check gate says (a running gate is stopped
                            * first); checkOverride is recorded when the gate blocked it */
        bool allow_config; /* accept: land files that can run code on this machine later (changeset-risk.h) */
} ChangeRequest;

/* change_start with the request's options. An accept without force is
 * refused while the check gate blocks it (gate.h check_status_blocks), with
 * check_refusal_text's text; a reject stops a running gate before its
 * cleanup. */
int change_start_full(Manager *m, Task *t, const ChangeRequest *rq, change_done_fn done, void *userdata,
                      char **reason);

/* Drop every decision, waiting or running (shutdown): each gets
 * done(-ECANCELED) and is freed. A running one's job is freed afterwards by
 * jobs_free, which calls no callback; the next daemon redoes an interrupted
 * accept (acceptStartedAt) or removal. */
void change_jobs_free(Manager *m);
