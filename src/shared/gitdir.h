#pragma once
/* Git's own directories for a path, read from the .git entries without
 * running git (the daemon's event loop never runs git): what
 * `git rev-parse --absolute-git-dir` and `--git-common-dir` would say
 * (gitrepository-layout(5): a `.git` directory, or a `.git` file holding
 * `gitdir: <path>`, whose gitdir may hold a `commondir` file — a linked
 * worktree, git-worktree(1)). The one reader of .git entries: the
 * workspace roots (workspace.h) and the daemon ask git_dirs_find. */

typedef struct git_dirs {
        char *top;     /* the directory holding the .git entry (dir or an ancestor) */
        char *gitdir;  /* G: the repository dir of this work tree (canonical) */
        char *common;  /* C: the common dir (== gitdir unless a linked worktree) */
} git_dirs;

/* Find the .git entry at dir or above it. Returns 1 and fills *ret, 0 if dir
 * is in no git work tree (ret zeroed), -ENOMEM. */
int git_dirs_find(const char *dir, git_dirs *ret);
void git_dirs_done(git_dirs *d);
