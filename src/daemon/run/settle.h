#pragma once
/* Settlement (settle.c): a task's end, from its shim's exit to its final state. */

#include "core/task.h"

/* settle.c (spec lifecycle.md §4.4): exit → classification → changeset
 * extraction job → the one transition to the final state. Owns Task.settling. */
/* The shim exited (or was found gone at re-adoption): start the settlement
 * job (log analysis, changeset extraction; job_start_retrying, so it is
 * deferred, never skipped, for lack of resources). Idempotent while one is in
 * flight. Its end is task_settlement_done. */
void task_start_settlement(Task *t);
/* A launch failed before the worker ran: record spawnError = message and
 * endedAt, then task_settlement_done(crashed). */
void task_settle_spawn_error(Task *t, const char *message);
/* End a settlement: release the slot, socket and launch state, then move the
 * task to status/cs through task_transition (which wakes its waiters). */
void task_settlement_done(Task *t, TaskStatus status, ChangesetStatus cs);
