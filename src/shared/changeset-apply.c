/* Apply a patch to the live directory: check, then apply, never half
 * (changeset-apply.h).
 *
 * The apply uses the same kind of private repository as extraction, with
 * the live directory as work tree, so paths are relative to D even inside a
 * larger repository, and no attribute conversion or repository config
 * applies. `git apply --check` first, then `git apply` (which itself applies
 * all or nothing in memory before writing); a write that still fails partway
 * (a read-only directory, a full disk) is undone from the live contents of
 * the patch's paths, staged in a private index just before the apply. If the
 * check fails, a 3-way merge is tried in a scratch index only (never in the
 * live tree): the touched paths of the live tree are staged into a private
 * index, `git apply --cached --3way` runs there, and only a conflict-free
 * result is turned into a new patch against the live contents, which then
 * goes through the same check-then-apply. The preimage blobs for that merge
 * come from the live repository's objects, so it helps where the worker's
 * base was committed content; otherwise the check's failure is reported.
 * Nothing is ever staged in the live index. */
#include "changeset-apply.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "changeset-git.h"
#include "changeset-numstat.h"
#include "changeset-paths.h"
#include "changeset-repo.h"
#include "changeset-shape.h"
#include "macro.h"
#include "fs-util.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"

/* 3-way merge in a private index only. On success writes the rebased patch
 * (live contents -> merged result) to rebased_path and returns 1, or returns 2
 * when the merge result equals the live contents; returns 0 (with *reason set
 * when there is something to say) when no clean merge exists; -errno on
 * other failures. */
static int three_way_rebase(git_ctx *g, const char *patch, const char *rebased_path, char **reason) {
        _cleanup_strv_free_ char **paths = NULL, **ui = NULL;
        _cleanup_free_ char *err = NULL, *t0 = NULL, *t1 = NULL, *ap_err = NULL;
        run_result rr;

        /* Preimage blobs can only come from the live repository's objects. */
        _cleanup_free_ char *common = NULL;
        int r = host_git_path(g->work_tree, "--git-common-dir", NULL, &common);
        if (r <= 0) return r; /* 0: not a repository, no base to merge with */
        if (!(g->alternates = cs_path_join(common, "objects"))) return -ENOMEM;
        if ((r = git_ctx_build_env(g)) < 0) return r;

        r = patch_paths(g, g->work_tree, patch, &paths, &err);
        if (r >= 0) {
                if (!paths) return 0;

                /* Stage the live contents of exactly the touched paths. */
                r = strv_push(&ui, "update-index");
                if (r >= 0) r = strv_push(&ui, "--add");
                if (r >= 0) r = strv_push(&ui, "--remove");
                if (r >= 0) r = strv_push(&ui, "--");
                for (size_t i = 0; r >= 0 && paths[i]; i++) r = strv_push(&ui, paths[i]);
                if (r < 0) return r;
                r = git_ok(g, g->work_tree, 0, &rr, &err, "update-index", ui);
        }
        if (r >= 0) {
                run_result_done(&rr);
                r = git_write_tree(g, g->work_tree, true, &t0, &err);
        }
        if (r >= 0) {
                char *ap_args[] = {(char *) "apply", (char *) "--cached", (char *) "--3way", (char *) patch, NULL};
                if ((r = git_try(g, g->work_tree, ap_args, &ap_err)) < 0) return r;
                bool applied = r > 0;
                char *lu_args[] = {(char *) "ls-files", (char *) "-u", (char *) "-z", NULL};
                r = git_ok(g, g->work_tree, LIST_MAX, &rr, &err, "ls-files -u", lu_args);
                if (r >= 0) {
                        bool conflicts = rr.out_len > 0;
                        run_result_done(&rr);
                        if (!applied || conflicts) {
                                *reason = strdup_printf("3-way merge %s%s%s", conflicts ? "has conflicts" : "failed",
                                                        !isempty(ap_err) ? ": " : "", strempty(ap_err));
                                return 0;
                        }
                        r = git_write_tree(g, g->work_tree, true, &t1, &err);
                }
        }
        if (r >= 0 && streq(t0, t1)) return 2; /* the live tree already has these changes */
        if (r >= 0) r = git_diff_trees(g, t0, t1, &rr, &err);
        if (r >= 0) {
                r = cs_write_small_file(rebased_path, rr.out, rr.out_len);
                run_result_done(&rr);
                return r < 0 ? r : 1;
        }
        if (r == -ENOMEM) return r;
        *reason = strdup_printf("3-way merge not possible: %s", err ? err : strerror(-r));
        return 0;
}

int stage_patch_paths(const git_ctx *g0, const char *index_name, const char *start_tree, const char *patch,
                      char **ret, char **reason) {
        _cleanup_(git_ctx_done) git_ctx g = {};
        _cleanup_free_ char *index = git_ctx_scratch_path(g0, index_name);
        _cleanup_free_ char *spec = index ? strdup_printf("%s.spec", index) : NULL;
        _cleanup_free_ char *pf = spec ? strdup_printf("--pathspec-from-file=%s", spec) : NULL;
        if (!pf) return -ENOMEM;
        int r = git_ctx_copy(g0, index, true, &g);
        if (r < 0) return r;
        (void) unlink(g.index_file);
        _cleanup_strv_free_ char **paths = NULL, **literal = NULL, **indexed = NULL, **specs = NULL;
        if ((r = patch_paths(&g, g.work_tree, patch, &paths, reason)) < 0) return r;
        if (start_tree && (r = git_read_tree(&g, "/", start_tree, "read-tree", reason)) < 0) return r;
        for (size_t i = 0; paths && paths[i]; i++)
                if ((r = strv_pushf(&literal, ":(literal)%s", paths[i])) < 0) return r;
        if (start_tree && literal) {
                char *ls_prefix[] = {(char *) "ls-files", (char *) "-z", (char *) "--cached", NULL};
                if ((r = git_batched(&g, g.work_tree, LIST_MAX, "ls-files", ls_prefix, literal, false, 1,
                                     git_collect_nul_paths, &indexed, reason)) < 0)
                        return r;
        }
        _cleanup_close_ int dfd = open(g.work_tree, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) return -errno;
        size_t n_indexed = strv_length(indexed);
        if (n_indexed > 0) qsort(indexed, n_indexed, sizeof *indexed, cs_strp_cmp);
        for (size_t i = 0; paths && paths[i]; i++) {
                int fd = cs_open_beneath(dfd, paths[i], O_PATH);
                bool keep = fd >= 0 ||
                            (n_indexed > 0 && bsearch(&paths[i], indexed, n_indexed, sizeof *indexed, cs_strp_cmp));
                if (fd >= 0) safe_close(fd);
                if (keep && (r = strv_push(&specs, literal[i])) < 0) return r;
        }
        if (specs) {
                if ((r = cs_write_specs(spec, specs, NULL)) < 0) return r;
                char *add_args[] = {(char *) "add", (char *) "-A", (char *) "-f", (char *) "--ignore-errors",
                                    (char *) "--no-warn-embedded-repo", (char *) "--pathspec-file-nul", pf, NULL};
                _cleanup_free_ char *add_err = NULL;
                if ((r = git_add_tolerant(&g, g.work_tree, add_args, "add -A (live paths)", &add_err, reason)) < 0) return r;
        }
        r = git_line(&g, "/", reason, "write-tree", (char *[]) {(char *) "write-tree", NULL}, ret);
        (void) unlink(g.index_file);
        return r;
}

/* `git apply --check`, then (unless check_only) `git apply`. The check does not see every way
 * a write can fail (a read-only directory, a full disk): if the apply
 * fails after it, what it wrote is put back (the live contents of the
 * touched paths were staged first), so the tree is never left half
 * applied. 1 applied, 0 not (tree as it was, *reason set), -errno (only
 * when restoring failed too: *reason says so). */
static int apply_check_then_apply(const git_ctx *g, const char *patch, bool check_only, char **reason) {
        run_result rr;
        int r = git_apply_check(g, g->work_tree, false, patch, reason);
        if (r <= 0 || check_only) return r;
        _cleanup_free_ char *before = NULL, *serr = NULL;
        if ((r = stage_patch_paths(g, "before-apply-index", NULL, patch, &before, &serr)) < 0) {
                *reason = strdup_printf("cannot record the live files before applying: %s", serr ? serr : strerror(-r));
                return r;
        }
        char *apply_args[] = {(char *) "apply", (char *) patch, NULL};
        _cleanup_free_ char *aerr = NULL;
        r = git_ok(g, g->work_tree, 0, &rr, &aerr, "apply (after a successful --check)", apply_args);
        if (r >= 0) {
                run_result_done(&rr);
                return 1;
        }
        /* roll back: what the live tree has at those paths now, back to `before` */
        _cleanup_free_ char *now = NULL, *back = NULL, *rerr = NULL;
        int k = stage_patch_paths(g, "after-apply-index", before, patch, &now, &rerr);
        if (k >= 0 && !streq(now, before)) {
                back = git_ctx_scratch_path(g, "rollback.patch");
                if (!back) k = -ENOMEM;
                if (k >= 0) k = git_diff_trees(g, now, before, &rr, &rerr);
                if (k >= 0) {
                        k = cs_write_small_file(back, rr.out, rr.out_len);
                        run_result_done(&rr);
                }
                char *back_args[] = {(char *) "apply", back, NULL};
                if (k >= 0 && (k = git_ok(g, g->work_tree, 0, &rr, &rerr, "apply (rolling back)", back_args)) >= 0)
                        run_result_done(&rr);
        }
        if (k >= 0) {
                *reason = strdup_printf("%s; the files it had written were restored, nothing was applied", strempty(aerr));
                return 0;
        }
        *reason = strdup_printf("%s; restoring the files it had written failed (%s): the tree is partly applied",
                                strempty(aerr), rerr ? rerr : strerror(-k));
        return r;
}

/* Does the live tree already hold the patch: does its reverse apply cleanly? */
static int reverse_applies(const git_ctx *g, const char *patch, char **reason) {
        run_result rr;
        char *args[] = {(char *) "apply", (char *) "-R", (char *) "--check", (char *) patch, NULL};
        int r = run_git_argv(g, g->work_tree, 0, &rr, args);
        if (r < 0) {
                *reason = git_failure("apply -R --check", r, &rr);
                return r;
        }
        r = rr.exit_code == 0 ? 1 : 0;
        run_result_done(&rr);
        return r;
}

int apply_open(const char *directory, const char *patch_path, char **ret_dir, char **ret_patch, char **reason) {
        _cleanup_free_ char *dir = realpath(directory, NULL);
        if (!dir || !is_dir(dir)) {
                int r = dir ? -ENOTDIR : -errno;
                *reason = strdup_printf("cannot use %s: %s", directory, strerror(-r));
                return r;
        }
        _cleanup_free_ char *patch = realpath(patch_path, NULL);
        struct stat st;
        if (!patch || stat(patch, &st) < 0) {
                int r = -errno;
                *reason = strdup_printf("cannot read the patch %s: %s", patch_path, strerror(errno));
                return r;
        }
        if (st.st_size == 0) return 0;
        *ret_dir = TAKE_PTR(dir);
        *ret_patch = TAKE_PTR(patch);
        return 1;
}

int apply_scratch(char **ret, char **reason) {
        const char *tmp = getenv("TMPDIR");
        _cleanup_free_ char *scratch = strdup_printf("%s/taskferry-apply-XXXXXX", isempty(tmp) ? "/tmp" : tmp);
        if (!scratch) return -ENOMEM;
        if (!mkdtemp(scratch)) {
                int r = -errno;
                *reason = strdup_printf("cannot create a scratch directory: %s", strerror(errno));
                return r;
        }
        *ret = TAKE_PTR(scratch);
        return 0;
}

int apply_plain(const char *directory, const char *patch_path, apply_mode mode, char **reason) {
        bool check_applied = mode == APPLY_IS_APPLIED, check_only = mode == APPLY_CHECK;
        if (isempty(directory) || isempty(patch_path)) {
                *reason = strdup("invalid arguments");
                return -EINVAL;
        }
        _cleanup_free_ char *dir = NULL, *patch = NULL, *scratch = NULL;
        int r = apply_open(directory, patch_path, &dir, &patch, reason);
        if (r <= 0) return r < 0 ? r : check_applied ? 0 : 1;
        if ((r = apply_scratch(&scratch, reason)) < 0) return r;
        _cleanup_(git_ctx_done) git_ctx g = {};
        _cleanup_free_ char *rebased = cs_path_join(scratch, "rebased.patch");
        if (!rebased) r = -ENOMEM;
        else if ((r = git_ctx_scratch(&g, scratch, &(scratch_repo) {.work_tree = dir}, reason)) >= 0 && check_applied)
                r = reverse_applies(&g, patch, reason);
        else if (r >= 0 && (r = patch_plants_repository(&g, patch, reason)) != 0)
                r = r > 0 ? 0 : r;
        else if (r >= 0) {
                r = apply_check_then_apply(&g, patch, check_only, reason);
                if (r == 0) {
                        /* The plain patch does not fit the live tree: try a
                         * 3-way merge away from it. */
                        _cleanup_free_ char *why = NULL, *check_reason = TAKE_PTR(*reason);
                        int r3 = three_way_rebase(&g, patch, rebased, &why);
                        if (r3 == 2)
                                r = 1;
                        else if (r3 == 1) {
                                r = apply_check_then_apply(&g, rebased, check_only, reason);
                                if (r == 0) {
                                        _cleanup_free_ char *second = TAKE_PTR(*reason);
                                        *reason = strdup_printf("%s\n3-way merged patch did not apply: %s",
                                                                strempty(check_reason), strempty(second));
                                }
                        } else if (r3 < 0 && !why)
                                why = strdup_printf("3-way merge not possible: %s", strerror(-r3));
                        /* r3 <= 0: the patch does not apply; the tree is untouched. */
                        if (r == 0 && !*reason)
                                *reason = why ? strdup_printf("%s\n%s", strempty(check_reason), why)
                                              : TAKE_PTR(check_reason);
                }
        }
        (void) rm_rf(scratch);
        return r;
}
