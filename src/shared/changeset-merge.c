/* Accept with a base snapshot: the 3-way merge (changeset-merge.h).
 *
 * R = base + patch (apply --cached in a private index), O = base with the
 * touched paths (diff-tree base R) taken from the live directory, M =
 * `merge-tree --write-tree` of commits O and R whose only common ancestor
 * is a commit of the base. Conflicts: nothing is written (a conflict where
 * both sides only appended whole lines to the end of a file is resolved by
 * keeping both: merge_appends). Otherwise the patch O -> M (touched paths
 * only) is checked against the live tree and the live tree is written from
 * O to M by the crash-safe write-out (changeset-writeout.h). */
#include "changeset-merge.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "changeset-apply.h"
#include "changeset-git.h"
#include "changeset-paths.h"
#include "changeset-repo.h"
#include "changeset-shape.h"
#include "git-output.h"
#include "changeset-snapshot.h"
#include "changeset-writeout.h"
#include "changeset.h"
#include "git-cat.h"
#include "macro.h"
#include "fileio.h"
#include "fs-util.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"

static int commit_tree(const git_ctx *g, const char *tree, const char *parent, char **ret, char **reason) {
        char *args[] = {(char *) "commit-tree", (char *) tree, (char *) "-m", (char *) "taskferry",
                        parent ? (char *) "-p" : NULL, (char *) parent, NULL};
        return git_line(g, "/", reason, "commit-tree", args, ret);
}

/* One conflicted path of merge-tree: the blobs of stages 1 (base), 2 (ours), 3 (theirs). */
typedef struct conflict_entry {
        char *path;
        char mode[3][8];
        char oid[3][72];
} conflict_entry;

/* Both sides only appended whole lines to the end of the base's file (the
 * user's line and the worker's line after the same last line): keep both,
 * ours first. Anything else stays a conflict. Returns 1 with the merged
 * blob's id, 0 if not such a case, -errno. */
static int merge_appends(const git_ctx *g, git_cat **cat, const char *scratch, const conflict_entry *e, char **ret_oid) {
        for (int k = 0; k < 3; k++)
                if (!*e->oid[k] || !streq(e->mode[k], e->mode[0]) ||
                    (!streq(e->mode[k], "100644") && !streq(e->mode[k], "100755")))
                        return 0;
        _cleanup_free_ char *b = NULL, *o = NULL, *t = NULL;
        size_t bl = 0, ol = 0, tl = 0;
        int r;
        if ((r = git_blob_read(g, cat, e->oid[0], &b, &bl)) < 0 || (r = git_blob_read(g, cat, e->oid[1], &o, &ol)) < 0 ||
            (r = git_blob_read(g, cat, e->oid[2], &t, &tl)) < 0)
                return r;
        if (bl > 0 && b[bl - 1] != '\n') return 0;
        if (ol <= bl || tl <= bl || memcmp(o, b, bl) != 0 || memcmp(t, b, bl) != 0) return 0;
        if (o[ol - 1] != '\n' || memchr(o, 0, ol) || memchr(t, 0, tl)) return 0; /* whole lines of text only */
        if (ol - bl >= tl - bl && memcmp(o + ol - (tl - bl), t + bl, tl - bl) == 0) {
                /* ours ends with their lines already (an accept that landed): ours, so it never lands twice */
                *ret_oid = strdup(e->oid[1]);
                return *ret_oid ? 1 : -ENOMEM;
        }
        _cleanup_free_ char *path = cs_path_join(scratch, "union.blob");
        if (!path) return -ENOMEM;
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) return -errno;
        if ((r = loop_write(fd, o, ol)) < 0 || (r = loop_write(fd, t + bl, tl - bl)) < 0) return r;
        _cleanup_free_ char *err = NULL;
        char *args[] = {(char *) "hash-object", (char *) "-w", (char *) "--no-filters", path, NULL};
        return git_line(g, "/", &err, "hash-object", args, ret_oid) < 0 ? -EIO : 1;
}

/* Resolve what merge_appends can; *ret_conflicts lists the rest (NULL: none
 * left, *tree replaced by the resolved tree). */
static int resolve_appends(const git_ctx *g0, const char *scratch, char *p, char *end, char **tree, char ***ret_conflicts,
                           char **reason) {
        conflict_entry *ce = NULL;
        size_t n = 0;
        int r = 0;
        for (; p < end; p += strlen(p) + 1) {
                char mode[8], oid[72];
                int stage = 0;
                char *tab = strchr(p, '\t');
                if (!tab || sscanf(p, "%7s %71s %d", mode, oid, &stage) != 3 || stage < 1 || stage > 3) continue;
                const char *path = tab + 1;
                if (n == 0 || !streq(ce[n - 1].path, path)) {
                        conflict_entry *nc = realloc(ce, (n + 1) * sizeof *ce);
                        if (!nc) {
                                r = -ENOMEM;
                                break;
                        }
                        ce = nc;
                        memset(&ce[n], 0, sizeof *ce);
                        if (!(ce[n].path = strdup(path))) {
                                r = -ENOMEM;
                                break;
                        }
                        n++;
                }
                snprintf(ce[n - 1].mode[stage - 1], sizeof ce->mode[0], "%s", mode);
                snprintf(ce[n - 1].oid[stage - 1], sizeof ce->oid[0], "%s", oid);
        }
        _cleanup_strv_free_ char **left = NULL, **infos = NULL;
        _cleanup_(git_cat_closep) git_cat *cat = NULL;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                _cleanup_free_ char *oid = NULL;
                int k = merge_appends(g0, &cat, scratch, &ce[i], &oid);
                if (k < 0) r = k;
                else if (k == 0) r = strv_push(&left, ce[i].path);
                else {
                        r = strv_push(&infos, "--cacheinfo");
                        if (r >= 0) r = strv_pushf(&infos, "%s,%s,%s", ce[i].mode[1], oid, ce[i].path);
                }
        }
        if (n == 0 && r >= 0) r = strv_push(&left, "(merge-tree reported a conflict without paths)");
        for (size_t i = 0; i < n; i++) free(ce[i].path);
        free(ce);
        if (r < 0) return r;
        if (left) {
                *ret_conflicts = TAKE_PTR(left);
                return 0;
        }
        /* every conflict resolved: the merged tree with those blobs */
        _cleanup_(git_ctx_done) git_ctx g = {};
        _cleanup_free_ char *index = cs_path_join(scratch, "union-index");
        if ((r = index ? git_ctx_copy(g0, index, false, &g) : -ENOMEM) < 0) return r;
        if ((r = git_read_tree(&g, "/", *tree, "read-tree", reason)) < 0) return r;
        char *ui_prefix[] = {(char *) "update-index", (char *) "--add", NULL};
        if ((r = git_batched(&g, "/", 0, "update-index --cacheinfo", ui_prefix, infos, false, 2, NULL, NULL, reason)) < 0)
                return r;
        _cleanup_free_ char *t = NULL;
        if ((r = git_line(&g, "/", reason, "write-tree", (char *[]) {(char *) "write-tree", NULL}, &t)) < 0) return r;
        free(*tree);
        *tree = TAKE_PTR(t);
        return 0;
}

/* 2: the live tree already holds every change; 1: *ret_patch written (live -> merged);
 * 0: conflicts or no merge (*reason set); -errno. */
static int merge_3way(git_ctx *g, const char *scratch, const char *base_tree, const char *patch, const char *merged_patch,
                      char **ret_tree_o, char **ret_tree_m, char ***ret_touched, char **reason) {
        _cleanup_free_ char *err = NULL, *tree_r = NULL, *tree_o = NULL, *c_b = NULL, *c_o = NULL, *c_r = NULL, *tree_m = NULL;
        _cleanup_strv_free_ char **specs = NULL;
        run_result rr;
        const char *dir = g->work_tree;
        int r;
        /* theirs: the base plus the patch */
        {
                if ((r = git_read_tree(g, "/", base_tree, "read-tree (base)", &err)) < 0) goto fail;
                char *ap_args[] = {(char *) "apply", (char *) "--cached", (char *) patch, NULL};
                _cleanup_free_ char *e = NULL;
                if ((r = git_try(g, "/", ap_args, &e)) < 0) goto fail;
                if (r == 0) {
                        *reason = strdup_printf("the changeset does not apply to its own base: %s", e);
                        return 0;
                }
                if ((r = git_line(g, "/", &err, "write-tree", (char *[]) {(char *) "write-tree", NULL}, &tree_r)) < 0)
                        goto fail;
        }
        /* the touched paths */
        {
                char *dt_args[] = {(char *) "diff-tree", (char *) "-r", (char *) "-z", (char *) "--no-renames",
                                   (char *) base_tree, tree_r, NULL};
                if ((r = git_ok(g, "/", LIST_MAX, &rr, &err, "diff-tree --raw", dt_args)) < 0) goto fail;
                _cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (dfd < 0) r = -errno;
                GitRawRecord rec;
                for (const char *p = rr.out; r >= 0 && (r = git_raw_next(&p, rr.out + rr.out_len, &rec)) > 0;) {
                        const char *path = rec.path;
                        bool in_base = rec.old_mode != 0;
                        int fd = in_base ? -1 : cs_open_beneath(dfd, path, O_PATH);
                        /* a path only the worker added counts if the live tree has it too */
                        if (in_base || fd >= 0) r = strv_pushf(&specs, ":(literal)%s", path);
                        if (fd >= 0) safe_close(fd);
                        if (r >= 0 && ret_touched) r = strv_push(ret_touched, path);
                }
                run_result_done(&rr);
                if (r < 0) goto fail;
        }
        if (streq(tree_r, base_tree)) return 2;
        /* ours: the base with the touched paths as the live tree has them */
        {
                if ((r = git_read_tree(g, "/", base_tree, "read-tree (base)", &err)) < 0) goto fail;
                if (specs) {
                        _cleanup_free_ char *spec_path = cs_path_join(scratch, "live.spec");
                        _cleanup_free_ char *pf = spec_path ? strdup_printf("--pathspec-from-file=%s", spec_path) : NULL;
                        if (!pf) return -ENOMEM;
                        if ((r = cs_write_specs(spec_path, specs, NULL)) < 0) goto fail;
                        char *add_args[] = {(char *) "add", (char *) "-A", (char *) "-f", (char *) "--ignore-errors",
                                            (char *) "--no-warn-embedded-repo", (char *) "--pathspec-file-nul", pf, NULL};
                        _cleanup_free_ char *e = NULL;
                        if ((r = git_try(g, dir, add_args, &e)) < 0) goto fail;
                        if (r == 0) {
                                *reason = strdup_printf("cannot read the live files the changeset touches: %s", e);
                                return 0;
                        }
                }
                if ((r = git_line(g, "/", &err, "write-tree", (char *[]) {(char *) "write-tree", NULL}, &tree_o)) < 0)
                        goto fail;
        }
        if ((r = commit_tree(g, base_tree, NULL, &c_b, &err)) < 0 || (r = commit_tree(g, tree_o, c_b, &c_o, &err)) < 0 ||
            (r = commit_tree(g, tree_r, c_b, &c_r, &err)) < 0)
                goto fail;
        char *mt_args[] = {(char *) "merge-tree", (char *) "--write-tree", (char *) "-z", (char *) "--no-messages",
                           c_o, c_r, NULL};
        if ((r = run_git_argv(g, "/", LIST_MAX, &rr, mt_args)) < 0) goto fail;
        if (rr.exit_code == 129) {
                /* a git before 2.38 has no merge-tree --write-tree */
                run_result_done(&rr);
                return -ENOTSUP;
        }
        if (rr.exit_code != 0 && rr.exit_code != 1) {
                err = git_failure("merge-tree", 0, &rr);
                run_result_done(&rr);
                r = -EIO;
                goto fail;
        }
        tree_m = strdup(rr.out);
        if (!tree_m) {
                run_result_done(&rr);
                return -ENOMEM;
        }
        cs_strip_trailing_space(tree_m);
        if (rr.exit_code == 1) {
                /* "<tree>\0" then "<mode> <oid> <stage>\t<path>\0" per conflicted stage */
                _cleanup_strv_free_ char **conflicts = NULL;
                r = resolve_appends(g, scratch, rr.out + strlen(rr.out) + 1, rr.out + rr.out_len, &tree_m, &conflicts,
                                    &err);
                run_result_done(&rr);
                if (r < 0) goto fail;
                if (conflicts) {
                        size_t size = 0;
                        _cleanup_free_ char *list = NULL;
                        FILE *f = open_memstream(&list, &size);
                        if (!f) return -ENOMEM;
                        for (size_t i = 0; conflicts[i]; i++) {
                                _cleanup_free_ char *q = cs_quote_path(conflicts[i]);
                                fprintf(f, "%s%s", i ? ", " : "", q ? q : conflicts[i]);
                        }
                        fclose(f);
                        *reason = strdup_printf("the changeset conflicts with changes made in %s since the task started: "
                                                "%s; nothing was applied",
                                                dir, list ? list : "");
                        return 0;
                }
        } else
                run_result_done(&rr);
        if (!cs_is_oid(tree_m)) {
                err = strdup("git merge-tree printed no tree id");
                r = -EIO;
                goto fail;
        }
        if (streq(tree_m, tree_o)) return 2;
        if ((r = git_diff_trees(g, tree_o, tree_m, &rr, &err)) < 0) goto fail;
        r = cs_write_small_file(merged_patch, rr.out, rr.out_len);
        run_result_done(&rr);
        if (r < 0) return r;
        if (ret_tree_o) *ret_tree_o = TAKE_PTR(tree_o);
        if (ret_tree_m) *ret_tree_m = TAKE_PTR(tree_m);
        return 1;
fail:
        if (r == -ENOMEM) return r;
        *reason = strdup_printf("3-way merge not possible: %s", err ? err : strerror(-r));
        return r;
}

/* write_out() failed midway (a read-only directory, a full disk: what
 * `git apply --check` cannot see): every file it wrote is whole, but the
 * tree is partly applied. Put the changeset's paths back to tree_o (the live
 * tree as the merge read it) with the same crash-safe writer. 0 with *reason
 * saying the files were restored and nothing was applied; else the original
 * error r with *reason saying the tree is partly applied (a retry of the
 * accept finishes it: the files already written merge cleanly). */
static int write_out_rollback(const git_ctx *g, const char *tree_o, const char *merged, char *const *cs_paths, int r,
                              char **reason) {
        _cleanup_free_ char *werr = TAKE_PTR(*reason), *now = NULL, *rerr = NULL;
        int k = stage_patch_paths(g, "after-write-index", tree_o, merged, &now, &rerr);
        if (k >= 0 && !streq(now, tree_o)) {
                k = write_out(g, now, tree_o, cs_paths, &rerr);
                if (k == 0) k = -EIO; /* refused: nothing restored */
        }
        if (k >= 0) {
                *reason = strdup_printf("%s; the files it had written were restored, nothing was applied",
                                        strempty(werr));
                return 0;
        }
        *reason = strdup_printf("%s; restoring the files it had written failed (%s): the tree is partly applied "
                                "(accepting again finishes it)",
                                strempty(werr), rerr ? rerr : strerror(-k));
        return r;
}

int merge_apply(const char *directory, const char *patch_path, const char *base_tree, const char *base_dir,
                apply_mode mode, char **reason) {
        bool check_only = mode == APPLY_IS_APPLIED;
        _cleanup_free_ char *dir = NULL, *patch = NULL, *scratch = NULL;
        int r = apply_open(directory, patch_path, &dir, &patch, reason);
        if (r <= 0) return r < 0 ? r : check_only ? 0 : 1;
        /* One merge-and-apply at a time per directory (an advisory lock on
         * the directory itself: nothing is written for it, and it goes with
         * the process): a second accept merges with what the first wrote. */
        _cleanup_close_ int lock_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (lock_fd < 0 || flock(lock_fd, LOCK_EX) < 0) {
                r = -errno;
                *reason = strdup_printf("cannot lock %s: %s", dir, strerror(errno));
                return r;
        }
        if ((r = apply_scratch(&scratch, reason)) < 0) return r;
        _cleanup_(git_ctx_done) git_ctx g = {};
        _cleanup_free_ char *merged = cs_path_join(scratch, "merged.patch"), *base_objects = base_objects_dir(base_dir);
        _cleanup_free_ char *common = NULL, *objects = NULL;
        if (!merged || !base_objects) r = -ENOMEM;
        /* the live repository's objects (never the worker's: the overlay is not mounted here) */
        else if ((r = host_git_path(dir, "--git-common-dir", NULL, &common)) > 0 &&
                 !(objects = cs_path_join(common, "objects")))
                r = -ENOMEM;
        if (r >= 0) {
                scratch_repo o = {.work_tree = dir, .objects = objects, .base_objects = base_objects};
                r = git_ctx_scratch(&g, scratch, &o, reason);
        }
        /* commits for merge-tree: fixed identity and dates (same bytes every time) */
        static const char *const ident[] = {"GIT_AUTHOR_NAME=taskferry", "GIT_AUTHOR_EMAIL=taskferry@localhost",
                                            "GIT_AUTHOR_DATE=@0 +0000", "GIT_COMMITTER_NAME=taskferry",
                                            "GIT_COMMITTER_EMAIL=taskferry@localhost", "GIT_COMMITTER_DATE=@0 +0000"};
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(ident); i++) r = strv_push(&g.env, ident[i]);
        if (r >= 0) {
                _cleanup_free_ char *why = NULL, *tree_o = NULL, *tree_m = NULL;
                _cleanup_strv_free_ char **cs_paths = NULL;
                int m = merge_3way(&g, scratch, base_tree, patch, merged, &tree_o, &tree_m, &cs_paths, &why);
                if (m == -ENOTSUP) {
                        /* no 3-way merge with this git: the patch's own check-then-apply */
                        (void) rm_rf(scratch);
                        if (check_only) return changeset_is_applied(directory, patch_path);
                        return apply_plain(directory, patch_path, mode, reason);
                }
                if (check_only) r = m == 2;
                else if (m == 2) {
                        if (mode == APPLY_WRITE) write_out_prune(&g, cs_paths);
                        r = 1;
                }
                else if (m == 1) {
                        r = patch_plants_repository(&g, merged, reason);
                        if (r > 0) r = 0;
                        else if (r == 0) {
                                /* git judges the paths as before; then our crash-safe write-out */
                                r = git_apply_check(&g, g.work_tree, false, merged, reason);
                                bool rolled_back = false;
                                if (r > 0 && mode == APPLY_WRITE) r = write_out(&g, tree_o, tree_m, cs_paths, reason);
                                if (r < 0) {
                                        r = write_out_rollback(&g, tree_o, merged, cs_paths, r, reason);
                                        rolled_back = true;
                                }
                                if (r == 0 && !rolled_back) {
                                        _cleanup_free_ char *e = TAKE_PTR(*reason);
                                        *reason = strdup_printf("the live tree changed while the changeset was being "
                                                                "merged: %s; nothing was applied",
                                                                strempty(e));
                                }
                        }
                } else {
                        r = m;
                        *reason = TAKE_PTR(why);
                }
        }
        (void) rm_rf(scratch);
        return r;
}
