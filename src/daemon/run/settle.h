#pragma once
/* Settlement (settle.c): a task's end, from its shim's exit to its final
 * state: log classification, the retry hint of a rate limit (cooldown.h),
 * an OOM kill of its scope, completeness, and the changeset extraction job;
 * the lifecycle moves the task with the verdict.
 * Owns Task.settling and Task.settle_done. */

#include "core/task.h"

/* The verdict: the final status and changeset status t moves to. */
typedef void (*settle_done_fn)(Task *t, TaskStatus status, ChangesetStatus cs);

/* The shim exited (or was found gone at re-adoption; its exit.json is on the
 * task): start the settlement job (log analysis, changeset extraction;
 * job_start_retrying, so it is deferred, never skipped, for lack of
 * resources), whose end calls done from the loop. Idempotent while one is in
 * flight. */
void settle_start(Task *t, settle_done_fn done);
/* The changeset status of a task whose launch failed before the worker ran:
 * an overlay with nothing in it is removed (no changes: accepted, or
 * rejected for a changeset that never lands); anything else is kept. */
ChangesetStatus settle_spawn_error_changeset(Task *t);
