#pragma once
/* The user's repository as the host's git sees it, read-only and before any
 * view of the worker's exists: where D's repository is, the ignore rules in
 * effect for D that do not live in its work tree, a core.hooksPath inside D.
 * These run the user's own git with the user's config (as any git command
 * they run), never with the caller's GIT_* variables. -errno on failure. */

/* What the parent learns about D in the host view. */
typedef struct repo_info {
        char *common_dir; /* absolute; NULL if D is not in a repository */
        char *toplevel;   /* absolute */
        char *prefix;     /* D relative to toplevel, "" or "a/b/" */
        char *excludes;   /* the initial T/info/exclude text */
        char *hooks_rel;  /* core.hooksPath when it lies inside D: relative to D ("" = D itself), else NULL */
} repo_info;

/* Free what ri holds and zero it. */
void repo_info_done(repo_info *ri);

/* Ask git (host view, read-only) where dir's repository is, and assemble
 * the ignore rules that do not live in dir's work tree (see the top of
 * changeset-repo.c). 0 with ri filled (common_dir NULL when dir is in no
 * repository: not an error), -errno. */
int repo_info_gather(const char *dir, repo_info *ri);

/* Ask git (host view, read-only) for a path of dir's repository:
 * `rev-parse --path-format=absolute <what> [<arg>]` (--git-common-dir;
 * --git-path index). 1 with the path in *ret, 0 when dir is in no repository
 * (git printed no absolute path), -errno. */
int host_git_path(const char *dir, const char *what, const char *arg, char **ret);

/* Ask git (host view, read-only) for the commit dir's HEAD is at:
 * `rev-parse --verify -q HEAD`, or git's empty tree for a repository whose
 * HEAD is unborn (what the shim records at launch). 1 with the id in *ret,
 * 0 when it cannot be told (no repository, git missing or failing), -ENOMEM. */
int host_git_head(const char *dir, char **ret);

/* The index file of the work tree whose top is dir, or NULL (none, not a
 * regular file, out of memory). */
char *host_index_path(const char *dir);

/* "<pre_head>", or "<pre_head>:<prefix>" for a subdirectory of the work
 * tree (prefix "a/b/" as rev-parse --show-prefix prints it): the tree of D
 * at dispatch. 0 with a new string in *ret, or -ENOMEM. */
int base_treeish(const char *pre_head, const char *prefix, char **ret);

/* One gitignore pattern that matches exactly `path` (relative to the work
 * tree; a trailing '/' = directory): anchored with a leading '/', every
 * wildcard and special character escaped, ending in a newline (a line of
 * info/exclude). A new string; NULL if the path cannot be written as a
 * pattern (newline) or out of memory. */
char *exclude_pattern_for(const char *path);
