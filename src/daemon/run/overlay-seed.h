#pragma once
/* Fix-forward (taskferry-dispatch(1) --parent-task): a new task's overlay
 * starts from its parent task's pending result, so the parent's changes are
 * in the new worker's tree. The shim copies the parent's upper dirs into the
 * new task's before the overlay is mounted (launch-spec.h "upperSeeds"); the
 * base snapshot it takes stays the live tree, so the new changeset is the
 * parent's changes plus the new worker's own. overlayDirs.seededFrom names
 * the parent; accepting the new changeset supersedes the parent's (change.h).
 *
 * The parent seeds only when it exists, is a dispatch-role task (not an
 * advisor), has settled with changesetStatus "pending", is not being
 * accepted or rejected, and its overlay is on disk; and when the new task
 * runs with an overlay in the same directory as the parent or in a
 * directory below it (the part of the parent's upper dir under it). Else
 * nothing is seeded and the dispatch goes on as without --parent-task. */

#include <stddef.h>

#include "core/task.h"
#include "launch-spec.h"

/* t's overlayDirs were just made (empty): set od.seededFrom to the id of the
 * parent whose result seeds them, when there is one (the rule above).
 * Returns 1 seeded, 0 not, -ENOMEM. Runs on the loop: reads records and
 * stats a few paths only. */
int overlay_seed_choose(Task *t, json_object *od);

/* The upperSeeds of t's launch (its od.seededFrom parent's upper dirs, each
 * to t's upper dir for the same place): a new array in *ret, free it with
 * overlay_seeds_free(), and its length in *n; none (NULL, 0) when t is not
 * seeded. 0, or -ENOMEM. */
int overlay_seed_spec(Task *t, sandbox_seed **ret, size_t *n);
void overlay_seeds_free(sandbox_seed *seeds, size_t n);
