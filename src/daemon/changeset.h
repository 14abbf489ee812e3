#pragma once
/* Changesets (spec sandbox-changeset-env.md §5, with DESIGN.md's fixes D7/D8):
 * the worker's filesystem changes, held as a binary-safe git patch until the
 * user accepts or rejects them. Everything here blocks (runs git, walks
 * trees): call it from a forked job, never from the daemon's event loop. */

#include <stdbool.h>
#include <stddef.h>

typedef struct changeset_extract_args {
        const char *directory;   /* the target dir D (host path; the overlay lower) */
        const char *upper;       /* overlay upper dir for D */
        const char *work;        /* overlay work dir for D */
        const char *pre_head;    /* HEAD at dispatch (or the empty tree), NULL for non-git D */
        const char *scratch_dir; /* an empty private dir for temporary git state (removed by the caller) */
        const char *patch_path;  /* output: the patch file (written atomically, 0600) */
        char ***ret_warnings;    /* optional output: one line per path left out of the patch (see
                                  * below), NULL if none; free with strv_free(). Set on success only. */
} changeset_extract_args;

/* At most this many warnings are returned; past it the last one says how many more paths
 * were left out. */
#define CHANGESET_WARNINGS_MAX 100

/* Extract the changes the worker made in the overlay as a patch of the
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
 *  - every changed path inside a directory that git would take for a
 *    repository (GIT_DIR discovery, setup.c is_git_directory()): one that
 *    holds HEAD together with refs (git also wants objects, unless
 *    GIT_OBJECT_DIRECTORY is set), or HEAD with commondir,
 *    counting entries of any type, names compared case-insensitively, the
 *    pieces already on the host (ignored or untracked ones too) included.
 * Pre-existing paths the worker did not touch raise no warning.
 * Returns 1 if the patch is non-empty, 0 if there were no changes (an empty
 * patch file is still written), -errno on failure with *ret_error set to a
 * one-line-first message ("git diff extraction failed for <dir>: ..."). */
int changeset_extract(const changeset_extract_args *a, char **ret_error);

/* Apply a patch to the live directory. The tree is never left half applied:
 * the patch is checked first (`git apply --check`) and only then applied.
 * For a git work tree the apply uses --3way semantics where the plain apply
 * does not fit. Git's path protections stay on (a path git refuses fails the
 * check), and a patch that would leave a directory of the live tree looking
 * like a repository (as above, counting what the live tree already holds) is
 * not applied. Returns 1 if applied, 0 if it did not apply (tree untouched;
 * *ret_reason = git's explanation or ours), -errno on other failures
 * (*ret_reason set). */
int changeset_apply(const char *directory, const char *patch_path, char **ret_reason);

/* Does directory already hold the patch, i.e. does its reverse apply cleanly
 * (`git apply -R --check`, with the same private git dir as changeset_apply)?
 * Used to finish an accept that a crash interrupted without applying twice.
 * Returns 1 yes, 0 no (or an empty patch), -errno. */
int changeset_is_applied(const char *directory, const char *patch_path);

/* `git apply --numstat` summary of a patch: files, added and deleted lines
 * (binary entries count as files only). All zero if git fails. */
int changeset_numstat(const char *patch_path, unsigned *files, unsigned *additions, unsigned *deletions);
