/* The base snapshot of a changeset, taken by the shim on the host just
 * before the worker starts (changeset-snapshot.h).
 *
 * It is the host view of the whole-tree extraction (`add -A`, nested
 * repositories flattened, ignored paths pinned: view_host_tree) run once, at
 * launch, from a copy of the repository's index so that its stat data spares
 * re-hashing unchanged files. The child maps our uid to itself in its user
 * namespace (not to root), so owners match the index's stat data. Its tree
 * id, exclude rules and private object store go to <overlay root>/base. */
#include "changeset-snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "changeset-git.h"
#include "changeset-repo.h"
#include "changeset-view.h"
#include "disk-budget.h"
#include "macro.h"
#include "fileio.h"
#include "fs-util.h"
#include "path-util.h"
#include "string-util.h"
#include "strv.h"

uint64_t changeset_file_max(void) {
        const char *v = getenv("TASKFERRY_CHANGESET_FILE_MAX");
        uint64_t n;
        if (!isempty(v) && disk_size_parse(v, &n) >= 0 && n > 0) return n;
        return CHANGESET_FILE_MAX_DEFAULT;
}

char *changeset_base_dir(const char *overlay_root) {
        return overlay_root ? cs_path_join(overlay_root, "base") : NULL;
}

char *base_tree_read(const char *base_dir) {
        if (isempty(base_dir)) return NULL;
        _cleanup_free_ char *p = cs_path_join(base_dir, BASE_TREE_NAME), *data = NULL;
        if (!p || read_file(p, 256, &data, NULL) < 0) return NULL;
        cs_strip_trailing_space(data);
        return cs_is_oid(data) ? TAKE_PTR(data) : NULL;
}

char *base_objects_dir(const char *base_dir) {
        return strdup_printf("%s/%s/objects", base_dir, BASE_GIT_NAME);
}

static int write_proc(const char *path, const char *data) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0) return -errno;
        return loop_write(fd, data, strlen(data));
}

/* A user + mount namespace where our uid and gid map to themselves (file
 * owners read as on the host, so the index's stat data stays valid); the
 * process keeps its capabilities there until it execs. */
static int userns_enter_identity(void) {
        uid_t u = getuid();
        gid_t g = getgid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) return -errno;
        char map[64];
        int r = write_proc("/proc/self/setgroups", "deny");
        if (r < 0 && r != -ENOENT) return r;
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned) u, (unsigned) u);
        if ((r = write_proc("/proc/self/uid_map", map)) < 0) return r;
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned) g, (unsigned) g);
        if ((r = write_proc("/proc/self/gid_map", map)) < 0) return r;
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) return -errno;
        return 0;
}

typedef struct snapshot_child {
        view_child c;
        const char *index_copy; /* the repository's index, or NULL */
        const char *exclude_text;
} snapshot_child;

static int snapshot_reset(snapshot_child *s) {
        _cleanup_free_ char *ex = cs_path_join(s->c.g->git_dir, "info/exclude");
        if (!ex) return -ENOMEM;
        (void) unlink(s->c.g->index_file);
        return cs_write_small_file(ex, s->exclude_text, strlen(s->exclude_text));
}

static _Noreturn void snapshot_child_main(void *userdata, int out_fd) {
        snapshot_child *s = userdata;
        view_child *c = &s->c;
        _cleanup_free_ char *err = NULL, *tree = NULL;
        int r = userns_enter_identity();
        if (r < 0) err = strdup_printf("cannot enter a user namespace: %s", strerror(-r));
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (r >= 0 && s->index_copy) {
                /* from the repository's index: its stat data spares re-hashing */
                const char *keep = c->base_treeish;
                c->base_treeish = NULL;
                r = index_copy_keep_mtime(s->index_copy, c->g->index_file);
                if (r >= 0) r = view_host_tree(c, &tree, &err);
                c->base_treeish = keep;
                if (r < 0) {
                        /* a split, sparse or otherwise unusable index: from the tree then */
                        free(err);
                        err = NULL;
                        strv_free(c->hidden);
                        c->hidden = NULL;
                        r = snapshot_reset(s);
                        if (r >= 0) r = 1;
                }
        }
        if (r > 0 || (r >= 0 && !tree)) r = view_host_tree(c, &tree, &err);
        if (r < 0 && !err) err = strdup(strerror(-r));
        _cleanup_free_ char *msg = r >= 0 ? strdup_printf("O%s", tree) : strdup_printf("E%s", err ? err : "out of memory");
        if (msg) (void) loop_write(out_fd, msg, strlen(msg));
        _exit(r >= 0 ? 0 : 1);
}

int snapshot_take(const char *directory, const char *pre_head, const char *base_dir, char **reason) {
        if (isempty(directory) || directory[0] != '/' || isempty(base_dir)) {
                *reason = strdup("invalid arguments");
                return -EINVAL;
        }
        if (pre_head && !cs_is_oid(pre_head)) {
                *reason = strdup("the pre-dispatch HEAD is not an object id");
                return -EINVAL;
        }
        _cleanup_free_ char *dir = realpath(directory, NULL);
        if (!dir) {
                int r = -errno;
                *reason = strdup_printf("cannot resolve %s: %s", directory, strerror(errno));
                return r;
        }
        if (access(base_dir, F_OK) == 0) {
                *reason = strdup_printf("%s already exists", base_dir);
                return -EEXIST;
        }
        _cleanup_free_ char *tmp = strdup_printf("%s.tmp.%d", base_dir, (int) getpid());
        if (!tmp) return -ENOMEM;
        (void) rm_rf(tmp);
        if (mkdir(tmp, 0700) < 0) {
                int r = -errno;
                *reason = strdup_printf("cannot create %s: %s", tmp, strerror(errno));
                return r;
        }
        _cleanup_free_ char *real_tmp = realpath(tmp, NULL);
        if (!real_tmp || path_is_at_or_below(real_tmp, dir)) {
                (void) rm_rf(tmp);
                *reason = strdup_printf("the snapshot directory %s lies inside the target directory", tmp);
                return -EINVAL;
        }

        /* every owned variable is declared before the first goto fail: a jump
         * past a _cleanup_ declaration would free an indeterminate pointer */
        _cleanup_free_ char *base = NULL, *index_copy = NULL, *empty_dir = NULL, *empty_file = NULL,
                            *exclude_path = NULL, *tree_path = NULL, *base_exclude = NULL, *reply = NULL,
                            *line = NULL, *ex = NULL, *objects = NULL;
        _cleanup_(git_ctx_done) git_ctx g = {};
        _cleanup_(repo_info_done) repo_info ri = {};
        int r = repo_info_gather(dir, &ri);
        if (r < 0) {
                *reason = strdup_printf("cannot run git: %s", strerror(-r));
                goto fail;
        }
        if (pre_head && (r = base_treeish(pre_head, ri.prefix, &base)) < 0) goto fail;
        /* The index is relative to the top of the work tree: only usable there. */
        if (ri.toplevel && isempty(ri.prefix)) index_copy = host_index_path(dir);

        /* tmp becomes the base: its scratch repository is the base's BASE_GIT_NAME */
        tree_path = cs_path_join(tmp, BASE_TREE_NAME);
        base_exclude = cs_path_join(tmp, BASE_EXCLUDE_NAME);
        if (!tree_path || !base_exclude || (ri.common_dir && !(objects = cs_path_join(ri.common_dir, "objects")))) {
                r = -ENOMEM;
                goto fail;
        }
        scratch_repo o = {.work_tree = dir, .objects = objects, .excludes = strempty(ri.excludes),
                          .excludes_len = strlen(strempty(ri.excludes))};
        if ((r = git_ctx_scratch(&g, tmp, &o, reason)) < 0 || (r = hiders_create(tmp, &empty_dir, &empty_file, reason)) < 0)
                goto fail;
        if (!(exclude_path = cs_path_join(g.git_dir, "info/exclude"))) {
                r = -ENOMEM;
                goto fail;
        }

        changeset_extract_args fake = {.directory = dir};
        snapshot_child s = {
                .c = {.a = &fake, .g = &g, .base_treeish = base, .empty_dir = empty_dir, .empty_file = empty_file,
                      .host_fd = -1, .file_max = changeset_file_max()},
                .index_copy = index_copy,
                .exclude_text = strempty(ri.excludes),
        };
        if ((r = view_child_run("changeset-snapshot", "the git process", snapshot_child_main, &s, &reply, NULL, reason)) < 0) goto fail;
        if (!cs_is_oid(reply + 1)) {
                *reason = strdup("the snapshot process returned no tree");
                r = -EIO;
                goto fail;
        }
        line = strdup_printf("%s\n", reply + 1);
        size_t ex_len = 0;
        if (!line) {
                r = -ENOMEM;
                goto fail;
        }
        if ((r = read_file(exclude_path, LIST_MAX, &ex, &ex_len)) < 0 ||
            (r = write_file_atomic(base_exclude, ex, ex_len, 0600)) < 0 ||
            (r = write_file_atomic(tree_path, line, strlen(line), 0600)) < 0) {
                *reason = strdup_printf("cannot write the snapshot: %s", strerror(-r));
                goto fail;
        }
        (void) unlink(g.index_file);
        (void) rmdir(empty_dir);
        (void) unlink(empty_file);
        if (rename(tmp, base_dir) < 0) {
                r = -errno;
                *reason = strdup_printf("cannot rename %s to %s: %s", tmp, base_dir, strerror(errno));
                goto fail;
        }
        return 0;
fail:
        (void) rm_rf(tmp);
        return r < 0 ? r : -EIO;
}
