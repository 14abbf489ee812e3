#pragma once
/* The write-out of an accept: the live tree written from ours (the live
 * contents, as merged) to the merged result, one path at a time, each
 * atomically, so that a crash leaves every file old or new and a re-run
 * converges. */

#include "changeset-git.h"

/* Write g's work tree (the live directory) from tree_o to tree_m (tree
 * ids), every path checked before anything is written (the rules at the top
 * of changeset-writeout.c). cs_paths: the changeset's paths, whose
 * directories are swept of dead temp files too.
 * Returns 1 written, 0 refused before anything was written (*reason), -errno
 * (*reason set; what was written so far is whole, and a re-run finishes it). */
int write_out(const git_ctx *g, const char *tree_o, const char *tree_m, char *const *cs_paths, char **reason);
/* The empty directories above the changeset's paths the live tree does not
 * have, removed (what every write_out does before it writes), for an accept
 * that finds the live tree already merged: an earlier one killed after its
 * last deletion leaves the directories that deletion emptied. Best effort. */
void write_out_prune(const git_ctx *g, char *const *cs_paths);
