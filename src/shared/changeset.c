/* Changesets: the worker's filesystem changes, held as a binary-safe git
 * patch until the user accepts or rejects them (changeset.h). This file is
 * the front: each public operation picks its way here, by whether the task
 * has a base snapshot and what git can do.
 *
 * What a changeset is
 * -------------------
 * The difference between D as the worker found it and what it left, over the
 * paths it touched. The shim takes the base (changeset_snapshot) on the host
 * just before the worker starts, into <overlay root>/base; extraction then
 * reads only the overlay's upper dir, and accept merges 3-way with that base.
 * Without a base (records from before bases existed, a snapshot that failed,
 * a git before 2.38) extraction compares the whole tree of the host view
 * with the merged view, and accept is a plain check-then-apply. Either way,
 * git only ever runs against a private repository of ours (no configuration
 * of the worker's repository runs), the patch carries exact bytes (binary
 * too: --binary --full-index), nested repositories are flattened into their
 * files, paths git refuses, planted repository shapes and hooks are left out
 * with a warning, and an accept never leaves the live tree half applied nor
 * stages anything in the live index.
 *
 * Where each part lives
 * ---------------------
 *   changeset-git       the private repository and how git runs against it
 *   changeset-repo      the user's repository as the host's git sees it:
 *                       where it is, its ignore rules, its hooks path
 *   changeset-paths     paths quoted as git quotes them, opened beneath a
 *                       directory; the warnings of paths left out
 *   changeset-view      the child that indexes a view of D (host or merged)
 *                       in a user + mount namespace: nested repositories
 *                       flattened, refused paths, planted .git entries
 *   changeset-shape     directories git would take for a repository
 *   changeset-snapshot  the base, taken at launch
 *   changeset-extract   extraction with a base: the upper dir's paths
 *   changeset-extract-full  extraction without a base: the whole tree
 *   changeset-numstat   a patch's paths and line counts
 *   changeset-apply     check-then-apply of a patch, a 3-way rebase as fallback
 *   changeset-merge     accept with a base: the 3-way merge
 *   changeset-writeout  the crash-safe write of the merged result
 *
 * Known limits of the patch format: empty directories are not represented
 * (git apply removes a directory a deletion leaves empty), and ownership and
 * permission bits other than the executable bit are not carried. */
#include "changeset.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "changeset-apply.h"
#include "changeset-extract-full.h"
#include "changeset-extract.h"
#include "changeset-git.h"
#include "changeset-merge.h"
#include "changeset-repo.h"
#include "changeset-snapshot.h"
#include "macro.h"
#include "fs-util.h"
#include "string-util.h"

/* A scratch dir of this attempt's own: <root>/scratch.<pid>, after removing
 * what earlier attempts left (a killed daemon's job may still run: it never
 * shares our dir, and its patch, were it to finish, has the same bytes). */
static int scratch_begin(const char *root, char **ret) {
        _cleanup_free_ char *mine = strdup_printf("%s/scratch.%d", root, (int) getpid());
        if (!mine) return -ENOMEM;
        DIR *d = opendir(root);
        if (!d) return -errno;
        for (struct dirent *de; (de = readdir(d));) {
                if (!streq(de->d_name, "scratch") && !startswith(de->d_name, "scratch.")) continue;
                _cleanup_free_ char *p = cs_path_join(root, de->d_name);
                if (p) (void) rm_rf(p);
        }
        closedir(d);
        if (mkdir(mine, 0700) < 0) return -errno;
        *ret = TAKE_PTR(mine);
        return 0;
}

static int extract_dispatch(const changeset_extract_args *a, char **reason) {
        if (!a || isempty(a->directory) || isempty(a->upper) || isempty(a->work) || isempty(a->patch_path) ||
            a->directory[0] != '/' || (isempty(a->scratch_dir) && isempty(a->overlay_root))) {
                *reason = strdup("invalid arguments");
                return -EINVAL;
        }
        _cleanup_free_ char *own = NULL;
        changeset_extract_args b = *a;
        int r;
        if (isempty(a->scratch_dir)) {
                if ((r = scratch_begin(a->overlay_root, &own)) < 0) {
                        *reason = strdup_printf("cannot create a scratch dir in %s: %s", a->overlay_root, strerror(-r));
                        return r;
                }
                b.scratch_dir = own;
        }
        _cleanup_free_ char *base_tree = git_has_merge_tree() ? base_tree_read(a->base_dir) : NULL;
        if (!base_tree) r = extract_full(&b, reason);
        else {
                _cleanup_free_ char *dir = NULL, *scratch = NULL;
                if ((r = extract_resolve(&b, &dir, &scratch, reason)) >= 0 &&
                    (r = extract_touched(&b, dir, scratch, base_tree, reason)) == -EXDEV) {
                        /* the upper dir needs the lower to be read: compare whole trees, in a clean scratch */
                        _cleanup_free_ char *again = strdup_printf("%s/full", scratch);
                        if (!again) r = -ENOMEM;
                        else if (mkdir(again, 0700) < 0) r = -errno;
                        else {
                                b.scratch_dir = again;
                                r = extract_full(&b, reason);
                        }
                }
        }
        if (own) (void) rm_rf(own);
        return r;
}

int changeset_extract(const changeset_extract_args *a, char **reason) {
        _cleanup_free_ char *err = NULL;
        if (a && a->ret_warnings) *a->ret_warnings = NULL;
        int r = extract_dispatch(a, &err);
        if (r >= 0) return r;
        if (reason)
                *reason = strdup_printf("git diff extraction failed for %s: %s",
                                        a && a->directory ? a->directory : "(null)", err ? err : strerror(-r));
        return r;
}

int changeset_snapshot(const char *directory, const char *pre_head, const char *base_dir, char **reason) {
        _cleanup_free_ char *err = NULL;
        int r = git_has_merge_tree() ? snapshot_take(directory, pre_head, base_dir, &err)
                                     : (err = strdup("git 2.38 or later is needed for a base (merge-tree --write-tree)"),
                                        -ENOTSUP);
        if (r >= 0) return 0;
        if (reason)
                *reason = strdup_printf("cannot take the base snapshot of %s: %s", strnull(directory),
                                        err ? err : strerror(-r));
        return r;
}

int changeset_is_applied(const char *directory, const char *patch_path) {
        _cleanup_free_ char *reason = NULL;
        return apply_plain(directory, patch_path, APPLY_IS_APPLIED, &reason);
}

int changeset_apply(const char *directory, const char *patch_path, char **reason) {
        _cleanup_free_ char *text = NULL;
        int r = apply_plain(directory, patch_path, APPLY_WRITE, &text);
        if (r < 0 && !text) text = strdup(strerror(-r));
        if (reason) *reason = r > 0 ? NULL : TAKE_PTR(text);
        return r;
}

/* The accept and its dry run: one path up to the write (merge_apply). */
static int apply_3way(const char *directory, const char *patch_path, const char *base_dir, apply_mode mode,
                      char **reason) {
        _cleanup_free_ char *base_tree = git_has_merge_tree() ? base_tree_read(base_dir) : NULL, *text = NULL;
        int r = !base_tree ? apply_plain(directory, patch_path, mode, &text)
                : isempty(directory) || isempty(patch_path) ? -EINVAL
                : merge_apply(directory, patch_path, base_tree, base_dir, mode, &text);
        if (r < 0 && !text) text = strdup(strerror(-r));
        /* a dry run never applies anything: the accept's closing words say nothing then */
        static const char tail[] = "; nothing was applied";
        size_t n = text ? strlen(text) : 0;
        if (mode == APPLY_CHECK && n >= sizeof tail - 1 && streq(text + n - (sizeof tail - 1), tail))
                text[n - (sizeof tail - 1)] = 0;
        if (reason) *reason = r > 0 ? NULL : TAKE_PTR(text);
        return r;
}

int changeset_apply_3way(const char *directory, const char *patch_path, const char *base_dir, char **reason) {
        return apply_3way(directory, patch_path, base_dir, APPLY_WRITE, reason);
}

int changeset_live_head(const char *directory, char **ret) {
        *ret = NULL;
        return isempty(directory) ? 0 : host_git_head(directory, ret);
}

int changeset_check_3way(const char *directory, const char *patch_path, const char *base_dir, char **reason) {
        return apply_3way(directory, patch_path, base_dir, APPLY_CHECK, reason);
}

int changeset_is_applied_3way(const char *directory, const char *patch_path, const char *base_dir) {
        _cleanup_free_ char *base_tree = git_has_merge_tree() ? base_tree_read(base_dir) : NULL;
        if (!base_tree) return changeset_is_applied(directory, patch_path);
        _cleanup_free_ char *reason = NULL;
        if (isempty(directory) || isempty(patch_path)) return -EINVAL;
        return merge_apply(directory, patch_path, base_tree, base_dir, APPLY_IS_APPLIED, &reason);
}
