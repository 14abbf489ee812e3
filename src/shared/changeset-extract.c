/* Extraction with a base snapshot: the patch of the paths the overlay's
 * upper dir lists (changeset-extract.h).
 *
 * The upper dir lists every path the worker touched: regular files and
 * symlinks (complete copies: the overlay runs without metacopy), whiteouts
 * (char device 0:0: deleted), opaque directories (trusted. or
 * user.overlay.opaque = "y": the lower's contents are hidden) and
 * directories that merge with the lower's. The child reads the base tree
 * into a private index (host view, real objects as alternates), mounts the
 * overlay, and updates only those paths: `rm --cached` for whiteouts, `add
 * -A` of files, symlinks, and of opaque or new directories as a whole
 * (minus what is left out), by pathspec file with :(literal) magic. Cost:
 * the bytes the worker wrote, plus reading the base tree. The patch is
 * `diff-tree base result`; it is stored only if it applies to its own base
 * (`apply --cached --check` on a scratch index holding the base tree). */
#include "changeset-extract.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "changeset-git.h"
#include "changeset-paths.h"
#include "changeset-repo.h"
#include "changeset-shape.h"
#include "changeset-snapshot.h"
#include "changeset-view.h"
#include "disk-budget.h"
#include "macro.h"
#include "overlay.h"
#include "fileio.h"
#include "path-util.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"

/* Rounds of nested repositories found inside the touched paths before giving up. */
#define TOUCHED_ROUNDS_MAX 16

typedef struct touched {
        char **rm;      /* :(literal)<path> for whiteouts: paths deleted */
        char **add;     /* :(literal)<path> for files, symlinks, opaque and new dirs */
        char **exclude; /* :(exclude,literal)<path> left out inside an added dir */
        char **dotgit;  /* .git entries the worker made (nested repositories to hide) */
        size_t n;       /* entries seen */
} touched;

static void touched_done(touched *t) {
        strv_free(t->rm);
        strv_free(t->add);
        strv_free(t->exclude);
        strv_free(t->dotgit);
        memset(t, 0, sizeof *t);
}

static bool dir_is_opaque(int dirfd, const char *rel) {
        _cleanup_close_ int fd = openat(dirfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return false;
        static const char *const names[] = {"trusted.overlay.opaque", "user.overlay.opaque"};
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                char v[4] = "";
                ssize_t n = fgetxattr(fd, names[i], v, sizeof v);
                if (n == 1 && v[0] == 'y') return true;
        }
        return false;
}

/* Does the entry carry an overlay.metacopy (a file whose data is still the
 * lower's) or overlay.redirect (a renamed directory) xattr? Then the upper
 * dir alone does not say what changed (overlayfs(5): metacopy, redirect_dir,
 * which the userxattr mounts we make never use, but a kernel's defaults may
 * for other mounts): the caller falls back to the whole-tree comparison. */
static bool entry_needs_lower(int dirfd, const char *rel, const struct stat *st) {
        if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) return false;
        char proc[64];
        _cleanup_close_ int fd = openat(dirfd, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return false;
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        static const char *const names[] = {"trusted.overlay.metacopy", "user.overlay.metacopy",
                                            "trusted.overlay.redirect", "user.overlay.redirect"};
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (getxattr(proc, names[i], NULL, 0) >= 0) return true;
        return false;
}

static const char *special_kind(mode_t m) {
        if (S_ISFIFO(m)) return "a named pipe";
        if (S_ISSOCK(m)) return "a socket";
        if (S_ISCHR(m)) return "a character device";
        if (S_ISBLK(m)) return "a block device";
        return "a special file";
}

/* Walk the upper dir below rel ("" = top). in_added: rel is covered by an
 * added directory pathspec (only exclusions and .git entries matter then). */
static int touched_walk(int upper_fd, int lower_fd, const char *rel, bool in_added, unsigned depth, uint64_t file_max,
                        touched *t, warnings *w) {
        if (depth > DOTGIT_DEPTH_MAX) return -ELOOP;
        int fd = openat(upper_fd, *rel ? rel : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }
        int r = 0;
        for (struct dirent *de; r >= 0 && (errno = 0, de = readdir(d));) {
                if (streq(de->d_name, ".") || streq(de->d_name, "..")) continue;
                _cleanup_free_ char *path = *rel ? strdup_printf("%s/%s", rel, de->d_name) : strdup(de->d_name);
                if (!path) {
                        r = -ENOMEM;
                        break;
                }
                /* Longer than a path git (or any relative lookup) can use: left
                 * out, with what lies below it, instead of failing the whole
                 * extraction (a worker could otherwise lose every change it made
                 * with one deep directory). */
                if (strlen(path) >= PATH_MAX - 1) {
                        r = warn_path(w, path, "its path is longer than PATH_MAX");
                        if (r >= 0 && in_added) r = strv_pushf(&t->exclude, ":(exclude,literal)%s", path);
                        continue;
                }
                struct stat st;
                if (fstatat(upper_fd, path, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = -errno;
                        break;
                }
                t->n++;
                if (entry_needs_lower(upper_fd, path, &st)) {
                        r = -EXDEV;
                        break;
                }
                bool whiteout = S_ISCHR(st.st_mode) && st.st_rdev == 0;
                if (streq(de->d_name, ".git")) {
                        /* git never records a .git; a non-whiteout one is hidden in the merged view */
                        if (!whiteout) r = strv_consume(&t->dotgit, TAKE_PTR(path));
                        continue;
                }
                if (whiteout) {
                        /* literal: a deleted "*" or "a[1].txt" names that path alone */
                        if (!in_added) r = strv_pushf(&t->rm, ":(literal)%s", path);
                        continue;
                }
                if (S_ISDIR(st.st_mode)) {
                        struct stat lst;
                        bool lower_dir = fstatat(lower_fd, path, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(lst.st_mode);
                        bool whole = !in_added && (!lower_dir || dir_is_opaque(upper_fd, path));
                        if (depth + 1 > DOTGIT_DEPTH_MAX) {
                                /* the walk's bound (one open directory per level) */
                                char why[96];
                                snprintf(why, sizeof why, "it is nested deeper than %d directories", DOTGIT_DEPTH_MAX);
                                r = warn_path(w, path, why);
                                if (r >= 0 && in_added) r = strv_pushf(&t->exclude, ":(exclude,literal)%s", path);
                                continue;
                        }
                        if (whole) r = strv_pushf(&t->add, ":(literal)%s", path);
                        if (r >= 0) r = touched_walk(upper_fd, lower_fd, path, in_added || whole, depth + 1, file_max, t, w);
                        continue;
                }
                char why[200] = "";
                if (S_ISREG(st.st_mode) && (uint64_t) st.st_size > file_max) {
                        char a[32], b[32];
                        snprintf(why, sizeof why,
                                 "it is %s, over the %s bound for one file (TASKFERRY_CHANGESET_FILE_MAX)",
                                 disk_size_format((uint64_t) st.st_size, a), disk_size_format(file_max, b));
                } else if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
                        snprintf(why, sizeof why, "it is %s, which a patch cannot represent", special_kind(st.st_mode));
                if (*why) {
                        r = warn_path(w, path, why);
                        if (r >= 0 && in_added) r = strv_pushf(&t->exclude, ":(exclude,literal)%s", path);
                        continue;
                }
                if (!in_added) r = strv_pushf(&t->add, ":(literal)%s", path);
        }
        if (r >= 0 && errno != 0) r = -errno;
        closedir(d);
        return r;
}

typedef struct touched_child {
        view_child c;
        const char *base_tree;
        touched *t;
        const char *rm_spec, *add_spec; /* pathspec files */
        const char *host_objects;       /* empty dir: the host's object store is bound here */
        const char *check_index;        /* where the base index is copied */
} touched_child;

/* Hide every .git in the merged view that lies in a directory above a touched
 * path (a pre-existing nested repository, a submodule) or that the worker made. */
static int hide_touched_nested(touched_child *tc, char **reason) {
        view_child *c = &tc->c;
        char **lists[] = {tc->t->rm, tc->t->add};
        int r = 0;
        for (size_t k = 0; k < ELEMENTSOF(lists); k++)
                for (size_t i = 0; r >= 0 && lists[k] && lists[k][i]; i++) {
                        const char *p = lists[k][i];
                        if (startswith(p, ":(literal)")) p += strlen(":(literal)");
                        for (const char *sl = p; r >= 0 && (sl = strchr(sl, '/')); sl++) {
                                _cleanup_free_ char *anc = strndup(p, (size_t) (sl - p + 1));
                                r = anc ? hide_nested_git(c, anc, reason) : -ENOMEM;
                        }
                }
        for (size_t i = 0; r >= 0 && tc->t->dotgit && tc->t->dotgit[i]; i++) {
                _cleanup_free_ char *parent = strdup(tc->t->dotgit[i]);
                if (!parent) return -ENOMEM;
                char *sl = strrchr(parent, '/');
                if (sl) sl[1] = 0;
                else parent[0] = 0;
                if (*parent) r = hide_nested_git(c, parent, reason);
        }
        return r < 0 ? r : 0;
}

static int warn_refused_touched(touched_child *tc, const char *add_err, char **reason) {
        view_child *c = &tc->c;
        _cleanup_strv_free_ char **specs = NULL, **refused = NULL;
        for (size_t i = 0; tc->t->add && tc->t->add[i]; i++)
                if (strv_push(&specs, tc->t->add[i]) < 0) return -ENOMEM;
        for (size_t i = 0; tc->t->exclude && tc->t->exclude[i]; i++)
                if (strv_push(&specs, tc->t->exclude[i]) < 0) return -ENOMEM;
        if (!specs) return 0;
        char *ls_prefix[] = {(char *) "-c", (char *) "core.quotePath=false", (char *) "ls-files", (char *) "-o",
                             (char *) "--exclude-standard", (char *) "--", NULL};
        char *df_prefix[] = {(char *) "-c", (char *) "core.quotePath=false", (char *) "diff-files", (char *) "--name-only",
                             (char *) "--no-ext-diff", (char *) "--", NULL};
        /* exclusions must go with every batch: one run (the list is the upper dir's, small) */
        int r = git_batched(c->g, c->a->directory, LIST_MAX, "ls-files -o", ls_prefix, specs, true, SIZE_MAX / 2,
                            git_collect_lines, &refused, reason);
        if (r >= 0)
                r = git_batched(c->g, c->a->directory, LIST_MAX, "diff-files", df_prefix, specs, true, SIZE_MAX / 2,
                                git_collect_lines, &refused, reason);
        refused_list l = {.add_err = (char *) add_err};
        for (size_t i = 0; r >= 0 && refused && refused[i]; i++) {
                if (i > 0 && strv_contains(refused + i + 1, refused[i])) continue;
                r = refused_warn_one(&c->w, &l, refused[i], "");
        }
        return r;
}

/* Gitlink entries (mode 160000) under the added paths: only there can `git add` have made one. */
static int collect_gitlinks(void *userdata, const run_result *rr) {
        char ***l = userdata;
        int r = 0;
        for (char *p = rr->out; r >= 0 && p < rr->out + rr->out_len; p += strlen(p) + 1) {
                char *tab = strchr(p, '\t');
                if (tab && startswith(p, "160000 ")) r = strv_push(l, tab + 1);
        }
        return r;
}

static int touched_gitlinks(touched_child *tc, char ***ret, char **reason) {
        char *prefix[] = {(char *) "ls-files", (char *) "-s", (char *) "-z", NULL};
        return git_batched(tc->c.g, tc->c.a->directory, LIST_MAX, "ls-files -s", prefix, tc->t->add, false, 1,
                           collect_gitlinks, ret, reason);
}

static int add_touched(touched_child *tc, char **reason) {
        view_child *c = &tc->c;
        run_result rr;
        int r;
        if (tc->t->rm) {
                char *rm_args[] = {(char *) "rm", (char *) "--cached", (char *) "-r", (char *) "-f", (char *) "-q",
                                   (char *) "--ignore-unmatch", (char *) "--pathspec-file-nul", NULL, NULL};
                _cleanup_free_ char *pf = strdup_printf("--pathspec-from-file=%s", tc->rm_spec);
                if (!pf) return -ENOMEM;
                rm_args[7] = pf;
                if ((r = git_ok(c->g, c->a->directory, 0, &rr, reason, "rm --cached", rm_args)) < 0) return r;
                run_result_done(&rr);
        }
        if (!tc->t->add) return 0;
        _cleanup_strv_free_ char **tried = NULL;
        _cleanup_free_ char *pf = strdup_printf("--pathspec-from-file=%s", tc->add_spec);
        if (!pf) return -ENOMEM;
        for (unsigned round = 0; round < TOUCHED_ROUNDS_MAX; round++) {
                char *add_args[] = {(char *) "add", (char *) "-A", (char *) "--ignore-errors", (char *) "--no-warn-embedded-repo",
                                    (char *) "--pathspec-file-nul", pf, NULL};
                _cleanup_free_ char *add_err = NULL;
                r = git_add_tolerant(c->g, c->a->directory, add_args, "add -A (merged view, touched paths)", &add_err, reason);
                if (r < 0) return r;
                _cleanup_strv_free_ char **links = NULL;
                if ((r = touched_gitlinks(tc, &links, reason)) < 0) return r;
                if (!links) return add_err ? warn_refused_touched(tc, add_err, reason) : 0;
                if ((r = flatten_gitlinks(c, links, &tried, reason)) < 0) return r;
        }
        *reason = strdup_printf("nested repositories deeper than %d levels", TOUCHED_ROUNDS_MAX);
        return -ELOOP;
}

static _Noreturn void touched_child_main(void *userdata, int out_fd) {
        touched_child *tc = userdata;
        view_child *c = &tc->c;
        const changeset_extract_args *a = c->a;
        _cleanup_free_ char *err = NULL, *after = NULL;
        int r = userns_enter_as_root(getuid(), getgid());
        if (r < 0) err = strdup_printf("cannot enter a user namespace: %s", strerror(-r));
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (r >= 0 && (c->host_fd = open(a->directory, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) r = -errno;
        /* host view: the base tree's objects are in the base store or the real repository */
        if (r >= 0) r = git_read_tree(c->g, a->directory, tc->base_tree, "read-tree (base)", &err);
        /* the base index, for the parent's "applies to its own base" check */
        if (r >= 0 && tc->check_index && index_copy_keep_mtime(c->g->index_file, tc->check_index) < 0)
                (void) unlink(tc->check_index);
        /* The real object store as the host has it, at a private path: once the
         * overlay is on D, D/.git/objects is the worker's, this bind is not. With
         * it, the base's trees stay reachable and write-tree rewrites none. */
        bool host_objects = false;
        if (r >= 0 && c->g->alternates && tc->host_objects &&
            mount(c->g->alternates, tc->host_objects, NULL, MS_BIND | MS_REC, NULL) >= 0) {
                (void) mount(NULL, tc->host_objects, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL);
                host_objects = true;
        }
        if (r >= 0) r = view_mount_overlay(a, &err);
        if (r >= 0) {
                /* merged view: D/.git/objects is the worker's now; the base store and
                 * the host's objects through the private bind stay */
                free(c->g->alternates);
                c->g->alternates = NULL;
                if (host_objects && !(c->g->alternates = strdup(tc->host_objects))) r = -ENOMEM;
                if (r >= 0) r = git_ctx_build_env(c->g);
        }
        if (r >= 0) r = hide_touched_nested(tc, &err);
        if (r >= 0) r = add_touched(tc, &err);
        if (r >= 0) r = git_write_tree(c->g, c->a->directory, true, &after, &err);
        if (r >= 0) r = dotgit_warn(c, &err);
        if (r < 0 && !err) err = strdup(strerror(-r));
        view_child_reply(out_fd, r, after, &c->w, err);
}

/* Does the patch apply to tree (a scratch index of g's)? 1 yes, 0 no (*reason = git's reason), -errno. */
static int patch_applies_to_tree(const git_ctx *g0, const char *scratch, const char *tree, const char *patch, char **reason) {
        _cleanup_(git_ctx_done) git_ctx g = {};
        _cleanup_free_ char *index = cs_path_join(scratch, "check-index");
        int r = index ? git_ctx_copy(g0, index, false, &g) : -ENOMEM;
        if (r < 0) return r;
        /* the child left a copy of the base index there (else read the tree) */
        if (access(g.index_file, F_OK) < 0 && (r = git_read_tree(&g, "/", tree, "read-tree", reason)) < 0) return r;
        r = git_apply_check(&g, "/", true, patch, reason);
        (void) unlink(g.index_file);
        return r;
}

int extract_resolve(const changeset_extract_args *a, char **ret_dir, char **ret_scratch, char **reason) {
        _cleanup_free_ char *dir = realpath(a->directory, NULL), *scratch = realpath(a->scratch_dir, NULL);
        if (!dir || !scratch) {
                int r = -errno;
                *reason = strdup_printf("cannot resolve %s: %s", dir ? a->scratch_dir : a->directory, strerror(errno));
                return r;
        }
        if (path_is_at_or_below(scratch, dir)) {
                *reason = strdup_printf("the scratch directory %s lies inside the target directory", scratch);
                return -EINVAL;
        }
        *ret_dir = TAKE_PTR(dir);
        *ret_scratch = TAKE_PTR(scratch);
        return 0;
}

int extract_finish(const changeset_extract_args *a, const git_ctx *g, const char *dir, const char *hooks_rel,
                   const char *before, char *after, size_t after_size, warnings *w, const char *check_scratch,
                   char **reason) {
        int r = drop_repository_shapes(g, dir, hooks_rel, before, after, after_size, w, reason);
        if (r < 0) return r;
        run_result rr = {};
        bool diffed = false;
        if (!streq(before, after)) {
                if ((r = git_diff_trees(g, before, after, &rr, reason)) < 0) return r;
                diffed = rr.out_len > 0;
                if (!diffed) run_result_done(&rr);
        }
        if (diffed && check_scratch) {
                /* pending only if it applies to its own base */
                _cleanup_free_ char *patch_tmp = cs_path_join(check_scratch, "patch"), *why = NULL;
                r = patch_tmp ? cs_write_small_file(patch_tmp, rr.out, rr.out_len) : -ENOMEM;
                if (r >= 0) r = patch_applies_to_tree(g, check_scratch, before, patch_tmp, &why);
                if (r <= 0) {
                        run_result_done(&rr);
                        *reason = r == 0 ? strdup_printf("the patch does not apply to its own base: %s", strempty(why))
                                      : why ? TAKE_PTR(why) : strdup(strerror(-r));
                        return r == 0 ? -EIO : r;
                }
        }
        r = write_file_atomic(a->patch_path, diffed ? rr.out : "", diffed ? rr.out_len : 0, 0600);
        if (diffed) run_result_done(&rr);
        if (r < 0) {
                *reason = strdup_printf("cannot write %s: %s", a->patch_path, strerror(-r));
                return r;
        }
        if (a->ret_warnings && (r = warnings_finish(w, a->ret_warnings)) < 0) return r;
        return diffed ? 1 : 0;
}

int extract_touched(const changeset_extract_args *a, const char *dir, const char *scratch, const char *base_tree,
                    char **reason) {
        _cleanup_(repo_info_done) repo_info ri = {};
        int r = repo_info_gather(dir, &ri);
        if (r < 0) {
                *reason = strdup_printf("cannot run git: %s", strerror(-r));
                return r;
        }
        _cleanup_(git_ctx_done) git_ctx g = {};
        _cleanup_free_ char *empty_dir = NULL, *empty_file = NULL, *ex = NULL, *objects = NULL;
        _cleanup_free_ char *rm_spec = cs_path_join(scratch, "rm.spec"), *add_spec = cs_path_join(scratch, "add.spec");
        _cleanup_free_ char *base_exclude = cs_path_join(a->base_dir, BASE_EXCLUDE_NAME);
        _cleanup_free_ char *base_objects = base_objects_dir(a->base_dir);
        _cleanup_free_ char *host_objects = cs_path_join(scratch, "host-objects"), *check_index = cs_path_join(scratch, "check-index");
        if (!rm_spec || !add_spec || !base_exclude || !base_objects || !host_objects || !check_index ||
            (ri.common_dir && !(objects = cs_path_join(ri.common_dir, "objects"))))
                return -ENOMEM;
        if (mkdir(host_objects, 0700) < 0) return -errno;
        size_t ex_len = 0;
        if ((r = read_file(base_exclude, LIST_MAX, &ex, &ex_len)) < 0) {
                *reason = strdup_printf("cannot prepare %s: %s", scratch, strerror(-r));
                return r;
        }
        scratch_repo o = {.work_tree = dir, .objects = objects, .base_objects = base_objects, .excludes = ex,
                          .excludes_len = ex_len};
        if ((r = git_ctx_scratch(&g, scratch, &o, reason)) < 0 || (r = hiders_create(scratch, &empty_dir, &empty_file, reason)) < 0)
                return r;

        /* what the worker touched */
        _cleanup_(touched_done) touched t = {};
        _cleanup_(warnings_done) warnings w = {};
        uint64_t file_max = a->file_max ? a->file_max : changeset_file_max();
        {
                _cleanup_close_ int ufd = open(a->upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                _cleanup_close_ int lfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (ufd < 0 || lfd < 0) {
                        r = -errno;
                        *reason = strdup_printf("cannot open %s: %s", ufd < 0 ? a->upper : dir, strerror(errno));
                        return r;
                }
                if ((r = touched_walk(ufd, lfd, "", false, 0, file_max, &t, &w)) == -EXDEV)
                        return -EXDEV; /* metacopy or redirect: the caller compares whole trees */
                if (r < 0) {
                        *reason = strdup_printf("cannot read the overlay's upper dir %s: %s", a->upper, strerror(-r));
                        return r;
                }
        }
        if ((r = cs_write_specs(rm_spec, t.rm, NULL)) < 0 || (r = cs_write_specs(add_spec, t.add, t.exclude)) < 0) return r;

        char after[80] = "";
        if (!t.rm && !t.add) {
                snprintf(after, sizeof after, "%s", base_tree);
        } else {
                changeset_extract_args ca = *a;
                ca.directory = dir;
                touched_child tc = {
                        .c = {.a = &ca, .g = &g, .empty_dir = empty_dir, .empty_file = empty_file, .host_fd = -1},
                        .base_tree = base_tree,
                        .t = &t,
                        .rm_spec = rm_spec,
                        .add_spec = add_spec,
                        .host_objects = host_objects,
                        .check_index = check_index,
                };
                _cleanup_free_ char *reply = NULL;
                size_t reply_len = 0;
                r = view_child_run("changeset-extract", "the git process", touched_child_main, &tc, &reply, &reply_len, reason);
                if (r < 0) return r;
                size_t child_total = 0;
                char *nl = strchr(reply, '\n');
                if (!nl || sscanf(reply + 1, "%79s %zu", after, &child_total) != 2 || !cs_is_oid(after)) {
                        *reason = strdup("the extraction process returned no tree");
                        return -EIO;
                }
                if ((r = warnings_add_reply(&w, nl + 1, reply + reply_len, child_total)) < 0) return r;
        }
        return extract_finish(a, &g, dir, ri.hooks_rel, base_tree, after, sizeof after, &w, scratch, reason);
}
