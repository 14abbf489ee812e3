#pragma once
/* Git workspace roots: tasks of one repository (its subdirectories and
 * linked worktrees too) are of one workspace. One function for the daemon
 * (task.list, event delivery) and the CLI (the default directory of list
 * and the workspace view), computed from the
 * filesystem only (gitdir.h; no git process, so the daemon may call it on its
 * event loop):
 *
 *   root(dir) = the parent of the common git dir of dir — what
 *               `dirname(realpath(git -C dir rev-parse --git-common-dir))`
 *               says — so a repository, its subdirectories and its linked
 *               worktrees share one root;
 *             = the submodule's own top level when that common dir is under
 *               a `/.git/modules/` (what `git rev-parse --show-toplevel` says);
 *             = realpath(dir) (or dir when that fails) outside any repository.
 *
 * A `.git` file naming a git dir elsewhere (`git init --separate-git-dir`)
 * therefore has the parent of that git dir as its root, as git's answer has.
 * Cost: one realpath and an lstat per directory level up to the .git entry,
 * plus reading the .git file and commondir when there are ones. */

#include <stdbool.h>

/* Returns 1 and the root (malloc'd) in *ret when dir is in a git work tree,
 * 0 and realpath(dir) (dir itself when that fails) when it is not, -ENOMEM. */
int workspace_root_find(const char *dir, char **ret);

/* The workspace root of dir, malloc'd; NULL on ENOMEM. */
char *workspace_root(const char *dir);

/* Are a and b of one workspace: a == b, or both have the same root (events
 * reach the subscriptions of their workspace; the accepts into one
 * workspace run one at a time). */
bool same_workspace(const char *a, const char *b);
