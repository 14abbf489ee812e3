#pragma once
/* Repository shapes: directories git would take for a git directory. GIT_DIR
 * discovery (setup.c is_git_directory()) takes a directory that holds HEAD
 * with refs (and objects, unless GIT_OBJECT_DIRECTORY is set), or HEAD with
 * a commondir file; entries of any type count and names are compared as a
 * case-insensitive, NTFS or HFS+ file system would compare them. A
 * changeset never plants one: extraction leaves out the changes inside such
 * a directory (and those below a core.hooksPath inside D), and apply refuses
 * a patch that would leave one in the live tree. */

#include <stddef.h>

#include "changeset-git.h"
#include "changeset-paths.h"

/* Leave out of the after tree every change inside a directory that git
 * would take for a repository once the patch is applied: its pieces are
 * counted from the after tree and from what the host has there (ignored
 * and untracked entries, empty directories). A changed path in such a
 * directory goes back to its before state in the index (removed, or its
 * old entry restored) and the tree is written again. Reverting only removes
 * pieces that the host does not have, so one pass leaves no repository made
 * of the worker's changes. */
int drop_repository_shapes(const git_ctx *g, const char *dir, const char *hooks_rel, const char *before,
                           char *after, size_t after_size, warnings *w, char **reason);

/* Would the patch leave a directory of the live tree that git takes for a
 * repository with one of the patch's paths inside it? The pieces are those
 * the live tree has (untracked, ignored and empty entries too) and those the
 * patch's paths would create (a deleted one still counts: erring on the safe
 * side). Returns 1 with *reason set, 0 if not, -errno. */
int patch_plants_repository(const git_ctx *g, const char *patch, char **reason);
