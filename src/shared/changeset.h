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
} changeset_extract_args;

/* Extract the changes the worker made in the overlay as a patch of the
 * working tree of D before (lower) vs after (merged view): a git diff with
 * --binary --full-index, run with a private GIT_DIR and index so that the
 * worker's repository config, hooks, fsmonitor, external diff and textconv
 * never run, and with untracked-but-preexisting files and pre-existing dirty
 * state excluded (only what the worker changed appears). Files ignored by
 * .gitignore are not part of the changeset. Works for non-git directories too.
 * The merged view is mounted in a child that enters a new user+mount
 * namespace (overlay.h).
 * Returns 1 if the patch is non-empty, 0 if there were no changes (an empty
 * patch file is still written), -errno on failure with *ret_error set to a
 * one-line-first message ("git diff extraction failed for <dir>: ..."). */
int changeset_extract(const changeset_extract_args *a, char **ret_error);

/* Apply a patch to the live directory. The tree is never left half applied:
 * the patch is checked first (`git apply --check`) and only then applied.
 * For a git work tree the apply uses --3way semantics where the plain apply
 * does not fit. Returns 1 if applied, 0 if it did not apply (tree untouched;
 * *ret_reason = git's explanation), -errno on other failures (*ret_reason set). */
int changeset_apply(const char *directory, const char *patch_path, char **ret_reason);

/* Does directory already hold the patch, i.e. does its reverse apply cleanly
 * (`git apply -R --check`, with the same private git dir as changeset_apply)?
 * Used to finish an accept that a crash interrupted without applying twice.
 * Returns 1 yes, 0 no (or an empty patch), -errno. */
int changeset_is_applied(const char *directory, const char *patch_path);

/* `git apply --numstat` summary of a patch: files, added and deleted lines
 * (binary entries count as files only). All zero if git fails. */
int changeset_numstat(const char *patch_path, unsigned *files, unsigned *additions, unsigned *deletions);
