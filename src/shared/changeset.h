#pragma once
/* Changesets: the worker's filesystem changes, held as a binary-safe git
 * patch (every byte, binary files too) until the user accepts or rejects
 * them. No configuration of the worker's repository ever runs, and an
 * accept never leaves the live tree half applied nor stages anything in the
 * live index; changeset.c says how, and where each part lives. Everything
 * here blocks (runs git, walks trees): call it from a forked job, never
 * from the daemon's event loop. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct changeset_extract_args {
        const char *directory;   /* the target dir D (host path; the overlay lower) */
        const char *upper;       /* overlay upper dir for D */
        const char *work;        /* overlay work dir for D */
        const char *pre_head;    /* HEAD at dispatch (or the empty tree), NULL for non-git D */
        const char *scratch_dir; /* an empty private dir for temporary git state (removed by the caller) */
        const char *patch_path;  /* output: the patch file (written atomically, 0600) */
        char ***ret_warnings;    /* optional output: one line per path left out of the patch (see
                                  * below), NULL if none; free with strv_free(). Set on success only. */
        const char *base_dir;    /* optional: the task's base snapshot (changeset_snapshot()); when it
                                  * holds a base, only the paths the upper dir lists are compared */
        const char *overlay_root; /* optional, used when scratch_dir is NULL: the scratch dir is then
                                  * <overlay_root>/scratch.<pid>, made and removed here; older
                                  * scratch.* dirs (a killed attempt's) are removed first */
        uint64_t file_max;       /* files larger than this are left out (0: TASKFERRY_CHANGESET_FILE_MAX,
                                  * else CHANGESET_FILE_MAX_DEFAULT); base path only */
} changeset_extract_args;

/* Files larger than this are left out of a changeset with a warning (setting
 * TASKFERRY_CHANGESET_FILE_MAX, a size as disk_size_parse() reads it). */
#define CHANGESET_FILE_MAX_DEFAULT ((uint64_t) 100 << 20)
/* The bound in effect (bytes): TASKFERRY_CHANGESET_FILE_MAX if it parses to more
 * than 0, else the default (0 is not a usable bound: it would leave out every
 * non-empty file in extraction while the snapshot read it as none). */
uint64_t changeset_file_max(void);

/* "<overlay_root>/base": where a task's base snapshot lives (removed with the overlay). */
char *changeset_base_dir(const char *overlay_root);

/* The base of a changeset: the directory D as it is now (its working tree,
 * untracked files and uncommitted edits included, ignored files not), taken
 * on the host just before the worker starts. Written to base_dir, which must
 * not exist, through a temp dir renamed into place (crash-safe):
 *   base_dir/tree     "<tree id>\n"
 *   base_dir/exclude  the ignore rules in effect then (pinned ignored paths included)
 *   base_dir/git/     a private repository whose objects/ holds what the real
 *                     repository's object store lacks (untracked and dirty files)
 * Built from a copy of the repository's index when D is the top of a work
 * tree, so only files whose stat data changed are hashed (about the cost of
 * `git status`); else from pre_head (the whole of D is hashed). Files over
 * changeset_file_max() are not hashed: untracked ones stay out of the base,
 * tracked ones keep their index version. The same
 * protections as extraction apply (private git dir, no repository config,
 * attributes reset, nested repositories flattened). Blocks: call it from the
 * shim or a job. Needs git >= 2.38 (merge-tree --write-tree, used by the
 * accept): -ENOTSUP before; without a base everything works as before.
 * Returns 0, or -errno with *reason set. */
int changeset_snapshot(const char *directory, const char *pre_head, const char *base_dir, char **reason);

/* Accept: merge the changeset into the live directory, 3-way, with the
 * task's base snapshot as the merge base (ours = the live directory now,
 * theirs = base + patch). Every merged result is computed in a private index
 * before anything is written; then one patch from the live contents to the
 * merged ones goes through check-then-apply (changeset_apply's protections).
 * Nothing is ever staged in the live index. A conflict touches nothing and
 * returns 0 with *reason naming the conflicting paths. With no usable
 * base (base_dir NULL or without a tree) this is changeset_apply().
 * Returns 1 applied (also when the live tree already holds every change),
 * 0 not applied (tree untouched, *reason set), -errno. */
int changeset_apply_3way(const char *directory, const char *patch_path, const char *base_dir, char **reason);
/* The commit the live directory's HEAD is at now, read by the host's git
 * (read-only; no hook runs), or git's empty tree when HEAD is unborn: the
 * same spelling as the task's preDispatchHead, so the two compare. 1 with
 * *ret set, 0 when it cannot be told (not a repository, git failing),
 * -ENOMEM. */
int changeset_live_head(const char *directory, char **ret);

/* The dry run of changeset_apply_3way(): every step of it (the merge, the
 * checks of the merged result against the live tree) but the write; the
 * live tree and its index are only read. For a settlement that finds HEAD
 * moved while the worker ran. Returns 1 the accept would apply now (also
 * when the live tree already holds every change), 0 it would not (*reason
 * = what the accept would say, naming the conflicting paths), -errno
 * (*reason set). */
int changeset_check_3way(const char *directory, const char *patch_path, const char *base_dir, char **reason);
/* Does the live directory already hold every change of the changeset (the
 * 3-way merge would change nothing)? Falls back to changeset_is_applied()
 * without a base. 1 yes, 0 no, -errno. */
int changeset_is_applied_3way(const char *directory, const char *patch_path, const char *base_dir);

/* At most this many warnings are returned; past it the last one says how many more paths
 * were left out. */
#define CHANGESET_WARNINGS_MAX 100

/* Extract the changes the worker made in the overlay as a patch. With a base
 * (a->base_dir holds one): base tree vs base tree with the upper dir's paths
 * taken from the merged view; the cost follows what the worker wrote, a path
 * it never touched never appears, files over a->file_max and those a patch
 * cannot represent (fifos, sockets, devices) are left out with a warning
 * without being read, and a patch that does not apply to its own base
 * (`git apply --cached --check`) is an error with git's reason. Rerunning it
 * writes the same bytes. Without a base, as follows: a patch of the
 * working tree of D before (lower) vs after (merged view): a git diff with
 * --binary --full-index, run with a private GIT_DIR and index so that the
 * worker's repository config, hooks, fsmonitor, external diff and textconv
 * never run, and with untracked-but-preexisting files and pre-existing dirty
 * state excluded (only what the worker changed appears). Files ignored by
 * .gitignore are not part of the changeset. Works for non-git directories too.
 * The merged view is mounted in a child that enters a new user+mount
 * namespace (overlay.h).
 *
 * Git's path protections stay on (core.protectNTFS and core.protectHFS true,
 * read-cache.c verify_path()), and some of the worker's changes are left out
 * of the patch, each with a warning "<path>: left out of the changeset: <why>"
 * (the path C-quoted the way git quotes it when it is not plain ASCII):
 *  - paths git refuses to record (".GIT/x", ".git.", "git~1", ".g\u200cit",
 *    a ".gitmodules" symlink, a file git cannot read); the rest extracts;
 *  - a ".git" file or directory the worker created at any depth (git never
 *    records one; the files beside it are kept, as for any nested repository);
 *  - (with a base) a path longer than PATH_MAX or nested deeper than 256
 *    directories, with what lies below it;
 *  - every changed path inside a directory that git would take for a
 *    repository (GIT_DIR discovery, setup.c is_git_directory()): one that
 *    holds HEAD together with refs (git also wants objects, unless
 *    GIT_OBJECT_DIRECTORY is set), or HEAD with commondir,
 *    counting entries of any type, names compared case-insensitively, the
 *    pieces already on the host (ignored or untracked ones too) included.
 * Pre-existing paths the worker did not touch raise no warning.
 * Returns 1 if the patch is non-empty, 0 if there were no changes (an empty
 * patch file is still written), -errno on failure with *reason set to a
 * one-line-first message ("git diff extraction failed for <dir>: ..."). */
int changeset_extract(const changeset_extract_args *a, char **reason);

/* Apply a patch to the live directory. The tree is never left half applied:
 * the patch is checked first (`git apply --check`) and only then applied;
 * should the apply still fail while writing (a read-only directory, a full
 * disk), what it wrote is put back from the live contents staged just
 * before (the reason then says so; only if that fails too is the tree left
 * partly applied, with a -errno return).
 * For a git work tree the apply uses --3way semantics where the plain apply
 * does not fit. Git's path protections stay on (a path git refuses fails the
 * check), and a patch that would leave a directory of the live tree looking
 * like a repository (as above, counting what the live tree already holds) is
 * not applied. Returns 1 if applied, 0 if it did not apply (tree untouched;
 * *reason = git's explanation or ours), -errno on other failures
 * (*reason set). */
int changeset_apply(const char *directory, const char *patch_path, char **reason);

/* Does directory already hold the patch, i.e. does its reverse apply cleanly
 * (`git apply -R --check`, with the same private git dir as changeset_apply)?
 * Used to finish an accept that a crash interrupted without applying twice.
 * Returns 1 yes, 0 no (or an empty patch), -errno. */
int changeset_is_applied(const char *directory, const char *patch_path);

/* `git apply --numstat` summary of a patch: files, added and deleted lines
 * (binary entries count as files only). All zero if git fails. */
int changeset_numstat(const char *patch_path, unsigned *files, unsigned *additions, unsigned *deletions);
