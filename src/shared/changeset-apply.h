#pragma once
/* Apply a patch to the live directory, never leaving it half applied
 * (changeset_apply() of changeset.h), and the steps the 3-way accept shares
 * with it. Errors are -errno; *reason is the sentence for the
 * user. */

#include <stdbool.h>

#include "changeset-git.h"

/* The live contents of the paths `patch` touches, staged into a private
 * index (<dir of g->index_file>/<index_name>) over start_tree (NULL: an
 * empty index), as a tree in *ret. Only paths the live tree has (no
 * symlink followed) or the index holds are named, so no pathspec fails.
 * 0, or -errno (*reason set). */
int stage_patch_paths(const git_ctx *g0, const char *index_name, const char *start_tree, const char *patch,
                      char **ret, char **reason);

/* The live directory and the patch of an apply, resolved: 1 with both in
 * *ret_dir and *ret_patch, 0 when the patch is empty (an empty changeset:
 * nothing to do), -errno with *reason set. */
int apply_open(const char *directory, const char *patch_path, char **ret_dir, char **ret_patch, char **reason);

/* A private scratch directory for one apply, under $TMPDIR (default /tmp),
 * that the caller removes: 0, or -errno with *reason set. */
int apply_scratch(char **ret, char **reason);

/* What an apply does: write the live tree (changeset_apply()), only judge
 * whether it would apply, everything up to the write (changeset_check_3way()),
 * or ask whether the tree already holds the patch (changeset_is_applied()). */
typedef enum apply_mode {
        APPLY_WRITE,
        APPLY_CHECK,
        APPLY_IS_APPLIED,
} apply_mode;

/* changeset_apply() (APPLY_WRITE: 1 applied, 0 not, *reason set), the same
 * without writing (APPLY_CHECK: 1 would apply, 0 not, *reason set) or
 * changeset_is_applied() (APPLY_IS_APPLIED: 1 the tree already holds the
 * patch, 0 not), -errno (*reason set where there is something to say). */
int apply_plain(const char *directory, const char *patch_path, apply_mode mode, char **reason);
