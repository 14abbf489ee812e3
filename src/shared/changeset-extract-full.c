/* Extraction without a base snapshot: the whole tree of D in the host view
 * against the merged view (changeset-extract-full.h).
 *
 * One forked child enters a new user + mount namespace (overlay.h), so both
 * views are seen with the same identity (file owners map the same way; this
 * keeps index stat data valid between the two views, so only files whose stat
 * data changed are re-hashed in the merged view):
 *   A. host view (no overlay yet), with GIT_ALTERNATE_OBJECT_DIRECTORIES = the
 *      real repository's object store (so blobs already there are not copied):
 *      read-tree <pre_head>[:<prefix>] when it resolves (keeps tracked files
 *      that .gitignore would hide), then `add -A` -> index B = D's working tree
 *      as the host sees it, including pre-existing untracked files and
 *      uncommitted edits; write-tree -> tree_before. Then every path that is
 *      ignored in this view is pinned into T/info/exclude, so a worker that
 *      deletes .gitignore cannot make pre-existing ignored files (node_modules,
 *      .env) appear as "added".
 *   B. mount the overlay (lower D, the task's upper/work) on D, drop the
 *      alternates (in this view D/.git/objects is worker-controlled and we
 *      only need to hash new content into T/objects), `add -A` on the same
 *      index -> the merged view; write-tree --missing-ok -> tree_after.
 * The child compares what git refused in the two views and looks for a .git
 * the worker planted (changeset-view.c). The parent then leaves out the
 * repository shapes (changeset-shape.h), runs `git diff-tree -p --binary
 * --full-index` of the two trees (with the alternates, host view) and writes
 * the bytes as they are. A commit the worker made is flattened (only working
 * trees are compared) and pre-existing untracked files / dirty edits cancel
 * out (they are in both trees). The same mechanism works for non-git
 * directories (no base tree) and for a subdirectory of a repository (the
 * private work tree is D itself, so patch paths are relative to D). */
#include "changeset-extract-full.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "changeset-extract.h"
#include "changeset-git.h"
#include "changeset-repo.h"
#include "changeset-view.h"
#include "macro.h"
#include "overlay.h"
#include "string-util.h"
#include "strv.h"

/* Phase B: the merged view, in the index phase A left. */
static int merged_view_tree(view_child *c, char **ret_tree, char **reason) {
        int r = view_mount_overlay(c->a, reason);
        if (r < 0) return r;
        /* New view: the earlier hides are covered by the overlay. */
        strv_free(c->hidden);
        c->hidden = NULL;
        free(c->g->alternates);
        c->g->alternates = NULL;
        if ((r = git_ctx_build_env(c->g)) < 0) return r;
        if ((r = add_all_flattened(c, "merged view", reason)) < 0) return r;
        return git_write_tree(c->g, c->a->directory, true, ret_tree, reason);
}

static _Noreturn void full_child_main(void *userdata, int out_fd) {
        view_child *c = userdata;
        _cleanup_free_ char *err = NULL, *before = NULL, *after = NULL;
        _cleanup_(refused_list_done) refused_list host = {}, merged = {};
        int r = userns_enter_as_root(getuid(), getgid());
        if (r < 0) err = strdup_printf("cannot enter a user namespace: %s", strerror(-r));
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL); /* a credential change may have cleared it */
        if (r >= 0 && (c->host_fd = open(c->a->directory, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) r = -errno;
        c->refused = &host;
        if (r >= 0) r = view_host_tree(c, &before, &err);
        c->refused = &merged;
        if (r >= 0) r = merged_view_tree(c, &after, &err);
        if (r >= 0) r = refused_warn(c, &host, &merged);
        if (r >= 0) r = dotgit_warn(c, &err);
        if (r < 0 && !err) err = strdup(strerror(-r));
        _cleanup_free_ char *trees = r >= 0 ? strdup_printf("%s %s", before, after) : NULL;
        if (r >= 0 && !trees) r = -ENOMEM;
        view_child_reply(out_fd, r, trees, &c->w, err);
}

int extract_full(const changeset_extract_args *a, char **reason) {
        if (!a || isempty(a->directory) || isempty(a->upper) || isempty(a->work) || isempty(a->scratch_dir) ||
            isempty(a->patch_path) || a->directory[0] != '/') {
                *reason = strdup("invalid arguments");
                return -EINVAL;
        }
        if (a->pre_head && !cs_is_oid(a->pre_head)) {
                *reason = strdup("the pre-dispatch HEAD is not an object id");
                return -EINVAL;
        }
        _cleanup_free_ char *dir = NULL, *scratch = NULL;
        int r = extract_resolve(a, &dir, &scratch, reason);
        if (r < 0) return r;

        _cleanup_(repo_info_done) repo_info ri = {};
        r = repo_info_gather(dir, &ri);
        if (r < 0) {
                *reason = strdup_printf("cannot run git: %s", strerror(-r));
                return r;
        }
        _cleanup_free_ char *base = NULL, *objects = NULL, *empty_dir = NULL, *empty_file = NULL;
        if (a->pre_head && (r = base_treeish(a->pre_head, ri.prefix, &base)) < 0) return r;
        if (ri.common_dir && !(objects = cs_path_join(ri.common_dir, "objects"))) return -ENOMEM;
        _cleanup_(git_ctx_done) git_ctx g = {};
        scratch_repo o = {.work_tree = dir, .objects = objects, .excludes = strempty(ri.excludes),
                          .excludes_len = strlen(strempty(ri.excludes))};
        if ((r = git_ctx_scratch(&g, scratch, &o, reason)) < 0 || (r = hiders_create(scratch, &empty_dir, &empty_file, reason)) < 0)
                return r;

        /* The child works on the canonical D. */
        changeset_extract_args ca = *a;
        ca.directory = dir;
        view_child c = {.a = &ca, .g = &g, .base_treeish = base, .empty_dir = empty_dir, .empty_file = empty_file,
                        .host_fd = -1};
        _cleanup_free_ char *reply = NULL;
        size_t reply_len = 0;
        r = view_child_run("changeset-extract", "the extraction process", full_child_main, &c, &reply, &reply_len, reason);
        if (r < 0) return r;
        char before[80] = "", after[80] = "";
        size_t child_total = 0;
        char *nl = strchr(reply, '\n');
        if (!nl || sscanf(reply + 1, "%79s %79s %zu", before, after, &child_total) != 3 || !cs_is_oid(before) ||
            !cs_is_oid(after)) {
                *reason = strdup("the extraction process returned no trees");
                return -EIO;
        }
        /* The child's warnings, then ours. */
        _cleanup_(warnings_done) warnings w = {};
        if ((r = warnings_add_reply(&w, nl + 1, reply + reply_len, child_total)) < 0) return r;
        return extract_finish(a, &g, dir, ri.hooks_rel, before, after, sizeof after, &w, NULL, reason);
}
