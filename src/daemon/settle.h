#pragma once
#include "task.h"

/* settle.c (spec lifecycle.md §4.4): exit → classification → changeset
 * extraction job → the one transition to the final state. Owns Task.settling. */
void task_start_settlement(Task *t);
void task_settle_spawn_error(Task *t, const char *message);
/* End a settlement: release the slot, socket and launch state, then move the
 * task to status/cs through task_transition (which wakes its waiters). */
void task_settlement_done(Task *t, TaskStatus status, ChangesetStatus cs);
