#include "mask-mount.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "path-util.h"
#include "sandbox-plan.h"
#include "string-util.h"
#include "strv.h"

void mask_set_done(MaskSet *s) {
        for (size_t i = 0; s->items && i < s->n; i++) free(s->items[i].path);
        free(s->items);
        *s = (MaskSet) {0};
}

static int mask_push(MaskSet *s, const char *path, bool dir) {
        char *p = strdup(path);
        if (!p) return -ENOMEM;
        MaskMount *items = realloc(s->items, (s->n + 1) * sizeof *items);
        if (!items) {
                free(p);
                return -ENOMEM;
        }
        s->items = items;
        items[s->n++] = (MaskMount) {.path = p, .dir = dir};
        return 0;
}

static bool is_system_root_bind(const sandbox_mount *m) {
        static const char *const roots[] = {SANDBOX_SYSTEM_ROOTS};
        if ((m->op != SANDBOX_MOUNT_RO_BIND && m->op != SANDBOX_MOUNT_RO_BIND_TRY) || !m->src || !m->dest || !streq(m->src, m->dest)) return false;
        for (size_t i = 0; i < ELEMENTSOF(roots); i++)
                if (streq(m->dest, roots[i])) return true;
        return false;
}

typedef struct selection {
        char **paths;     /* every path the plan mounts from or at, but the system roots themselves */
        char **contents;  /* the dests and sources of its binds, overlays and the target */
} selection;

static void selection_done(selection *sel) {
        strv_free(sel->paths);
        strv_free(sel->contents);
}

static int selection_add(char ***l, const char *p) {
        if (!p || p[0] != '/' || strv_contains(*l, p)) return 0;
        return strv_push(l, p);
}

static int selection_init(selection *sel, const sandbox_mount *m, size_t n, const char *directory) {
        int r = 0;
        *sel = (selection) {0};
        if ((r = selection_add(&sel->paths, directory)) < 0 || (r = selection_add(&sel->contents, directory)) < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (is_system_root_bind(&m[i]) || m[i].op == SANDBOX_MOUNT_SYMLINK) continue;
                const char *host[] = {m[i].dest, sandbox_mount_op_shows_host(m[i].op) ? m[i].src : NULL, m[i].upper, m[i].work,
                                      m[i].stage};
                for (size_t k = 0; k < ELEMENTSOF(host); k++) {
                        if ((r = selection_add(&sel->paths, host[k])) < 0) return r;
                        if (sandbox_mount_op_shows_host(m[i].op) && k < 2 && (r = selection_add(&sel->contents, host[k])) < 0)
                                return r;
                }
        }
        return 0;
}

static bool at_or_below_any(char **l, const char *p) {
        for (char **e = l; e && *e; e++)
                if (path_is_at_or_below(p, *e)) return true;
        return false;
}

/* p lies strictly above one of l */
static bool above_any(char **l, const char *p) {
        for (char **e = l; e && *e; e++)
                if (!streq(*e, p) && path_is_at_or_below(*e, p)) return true;
        return false;
}

/* In a private dir on the way to the plan's mounts: every entry that is not
 * on the way is masked, at every level below it. */
static int hide_off_path(MaskSet *s, const selection *sel, const char *dir, int depth) {
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return 0;
        DIR *d = fdopendir(fd);
        if (!d) return 0;
        TAKE_FD(fd);
        int r = 0;
        struct dirent *de;
        while (r >= 0 && (de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, "..")) continue;
                _cleanup_free_ char *child = strdup_printf("%s/%s", dir, de->d_name);
                if (!child) {
                        r = -ENOMEM;
                        break;
                }
                if (strv_contains(sel->paths, child)) continue;
                struct stat st;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISLNK(st.st_mode)) continue;
                if (above_any(sel->paths, child)) {
                        if (S_ISDIR(st.st_mode) && depth < HOST_MASKS_DEPTH_MAX)
                                r = hide_off_path(s, sel, child, depth + 1);
                        continue;
                }
                r = mask_push(s, child, S_ISDIR(st.st_mode));
        }
        closedir(d);
        return r;
}

static int cmp_mask(const void *a, const void *b) {
        return strcmp(((const MaskMount *) a)->path, ((const MaskMount *) b)->path);
}

/* sorted, each path once, nothing at or below a masked dir */
static void mask_set_normalize(MaskSet *s) {
        if (s->n == 0) return;
        qsort(s->items, s->n, sizeof *s->items, cmp_mask);
        size_t k = 0;
        for (size_t i = 0; i < s->n; i++) {
                bool covered = false;
                for (size_t j = 0; j < k && !covered; j++)
                        covered = (s->items[j].dir || streq(s->items[j].path, s->items[i].path)) &&
                                  path_is_at_or_below(s->items[i].path, s->items[j].path);
                if (covered) free(s->items[i].path);
                else s->items[k++] = s->items[i];
        }
        s->n = k;
}

int mask_set_build(const HostMaskList *hm, const sandbox_mount *m, size_t n, const char *directory,
                   bool target_by_bwrap, MaskSet *ret, sandbox_mount **argv_masks, size_t *n_argv_masks) {
        _cleanup_(selection_done) selection sel = {0};
        int r = selection_init(&sel, m, n, directory);
        if (r < 0) return r;
        MaskSet s = {0};
        for (size_t i = 0; r >= 0 && i < hm->n; i++) {
                const HostMask *e = &hm->items[i];
                if (strv_contains(sel.paths, e->path) || !sandbox_plan_path_visible(m, n, e->path)) continue;
                if (e->kind == HOST_MASK_SOCKET) {
                        if (target_by_bwrap && path_is_at_or_below(e->path, directory))
                                r = sandbox_mounts_push(argv_masks, n_argv_masks, SANDBOX_MOUNT_MASK_FILE, NULL, e->path,
                                                        NULL, NULL, NULL);
                        else
                                r = mask_push(&s, e->path, false);
                        continue;
                }
                /* a private entry: only where the system roots alone show it */
                if (at_or_below_any(sel.contents, e->path)) continue;
                if (e->kind == HOST_MASK_PRIVATE_DIR && above_any(sel.paths, e->path))
                        r = hide_off_path(&s, &sel, e->path, 0);
                else
                        r = mask_push(&s, e->path, e->kind == HOST_MASK_PRIVATE_DIR);
        }
        if (r < 0) {
                mask_set_done(&s);
                return r;
        }
        mask_set_normalize(&s);
        *ret = s;
        return 0;
}

/* Each mask is read-only, nosuid and nodev from the moment it is there:
 * bwrap remounts a recursive bind's submounts only to add what they lack,
 * and a mask whose file the host removed meanwhile is gone from the mount
 * table by then (the kernel detaches a mount whose mount point is unlinked
 * in another namespace), which bwrap could not remount. */
#define MASK_FLAGS (MS_RDONLY | MS_NOSUID | MS_NODEV)

static int mount_tmpfs(int fd) {
        char at[64];
        snprintf(at, sizeof at, "/proc/self/fd/%d", fd);
        return mount("tmpfs", at, "tmpfs", MASK_FLAGS, "mode=0755") < 0 ? -errno : 0;
}

/* /dev/null over the file fd holds (O_PATH): a detached bind made read-only
 * before it is attached (open_tree, mount_setattr, move_mount); without
 * that API (Linux < 5.12), a bind and its remount */
static int mount_dev_null(int fd, const char *path) {
        _cleanup_close_ int tree = open_tree(AT_FDCWD, "/dev/null", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (tree >= 0) {
                struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
                if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0) {
                        if (errno != ENOSYS) return -errno;
                } else
                        return move_mount(tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0
                                       ? -errno
                                       : 0;
        } else if (errno != ENOSYS)
                return -errno;
        char at[64];
        snprintf(at, sizeof at, "/proc/self/fd/%d", fd);
        if (mount("/dev/null", at, NULL, MS_BIND, NULL) < 0) return -errno;
        /* the new mount, by its path */
        _cleanup_close_ int top = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (top < 0) return -errno;
        snprintf(at, sizeof at, "/proc/self/fd/%d", top);
        return mount(NULL, at, NULL, MS_BIND | MS_REMOUNT | MASK_FLAGS, NULL) < 0 ? -errno : 0;
}

int mask_set_mount(const MaskSet *s, char **reason) {
        int mounted = 0;
        for (size_t i = 0; i < s->n; i++) {
                const MaskMount *mm = &s->items[i];
                _cleanup_close_ int fd = open(mm->path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0) {
                        if (errno == ENOENT || errno == ENOTDIR || errno == EACCES) continue;
                        return set_error(reason, -errno, "cannot open %s to mask it: %s", mm->path, strerror(errno));
                }
                struct stat st;
                if (fstat(fd, &st) < 0) return set_error(reason, -errno, "cannot stat %s: %s", mm->path, strerror(errno));
                /* no longer what was found: nothing to mask there now */
                if (S_ISLNK(st.st_mode) || (mm->dir != !!S_ISDIR(st.st_mode))) continue;
                int k = mm->dir ? mount_tmpfs(fd) : mount_dev_null(fd, mm->path);
                if (k == -ENOENT) continue; /* removed since it was opened */
                if (k < 0) return set_error(reason, k, "cannot mask %s: %s", mm->path, strerror(-k));
                mounted++;
        }
        return mounted;
}
