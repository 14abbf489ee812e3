#pragma once
/* Accept with a base snapshot: the changeset merged 3-way into the live
 * directory (changeset_apply_3way() of changeset.h). */

#include "changeset-apply.h"

/* The 3-way accept of patch_path into directory with the base snapshot in
 * base_dir (its tree base_tree): changeset_apply_3way() (APPLY_WRITE: 1
 * applied, 0 not with *reason set), changeset_check_3way() (APPLY_CHECK:
 * every step of APPLY_WRITE but the write, 1 it would apply, 0 not with
 * *reason set) or changeset_is_applied_3way() (APPLY_IS_APPLIED: 1 the live
 * tree holds every change already, 0 not), -errno. With a git that has no
 * merge-tree --write-tree it is the plain apply. */
int merge_apply(const char *directory, const char *patch_path, const char *base_tree, const char *base_dir,
                apply_mode mode, char **reason);
