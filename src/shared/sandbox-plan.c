#include "sandbox-plan.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "path-util.h"
#include "string-util.h"
#include "strv.h"

typedef struct plan {
        sandbox_mount *m;
        size_t n;
} plan;

static int add(plan *p, sandbox_mount_op op, const char *src, const char *dest) {
        return sandbox_mounts_push(&p->m, &p->n, op, src, dest, NULL, NULL, NULL);
}

static bool path_visible(const sandbox_mount *m, size_t n, const char *p, int depth) {
        bool visible = false;
        for (size_t i = 0; i < n; i++) {
                /* a path through one of the sandbox's own symlinks (/bin -> usr/bin) */
                if (m[i].op == SANDBOX_MOUNT_SYMLINK && m[i].dest && m[i].src && depth < 8 &&
                    path_is_at_or_below(p, m[i].dest) && !streq(p, m[i].dest)) {
                        const char *rest = p + strlen(m[i].dest);
                        _cleanup_free_ char *parent = strdup(m[i].dest);
                        if (!parent) return false;
                        char *slash = strrchr(parent, '/');
                        if (slash) *slash = 0;
                        _cleanup_free_ char *via = m[i].src[0] == '/' ? strdup_printf("%s%s", m[i].src, rest)
                                                                      : strdup_printf("%s/%s%s", parent, m[i].src, rest);
                        return via && path_visible(m, n, via, depth + 1);
                }
                if (!m[i].dest || !path_is_at_or_below(p, m[i].dest)) continue;
                if (sandbox_mount_op_shows_host(m[i].op)) visible = true;
                else if (m[i].op == SANDBOX_MOUNT_TMPFS || m[i].op == SANDBOX_MOUNT_MASK_FILE ||
                         m[i].op == SANDBOX_MOUNT_DIR)
                        visible = false;
        }
        return visible;
}

bool sandbox_plan_path_visible(const sandbox_mount *m, size_t n, const char *p) { return path_visible(m, n, p, 0); }

/* 1. system roots */
static int add_system_roots(plan *p) {
        static const char *const roots[] = {SANDBOX_SYSTEM_ROOTS};
        for (size_t i = 0; i < ELEMENTSOF(roots); i++) {
                struct stat st;
                if (lstat(roots[i], &st) < 0) continue;
                int r = 0;
                if (S_ISLNK(st.st_mode)) {
                        char target[PATH_MAX];
                        ssize_t k = readlink(roots[i], target, sizeof target - 1);
                        if (k <= 0) continue;
                        target[k] = 0;
                        r = add(p, SANDBOX_MOUNT_SYMLINK, target, roots[i]);
                } else if (S_ISDIR(st.st_mode))
                        /* a root removed before bwrap runs is just absent */
                        r = add(p, SANDBOX_MOUNT_RO_BIND_TRY, roots[i], roots[i]);
                if (r < 0) return r;
        }
        return 0;
}

/* 2. /var, /run, and the files /etc points to outside the roots */
static int add_var_run(plan *p) {
        int r;
        /* every place a worker may write is a sized tmpfs (the shim counts
         * them in the disk budget): bwrap's own root and /dev are tmpfs
         * mounts of half the RAM each, made read-only once set up */
        if ((r = add(p, SANDBOX_MOUNT_DIR, NULL, "/var")) < 0 || (r = add(p, SANDBOX_MOUNT_TMPFS, NULL, "/var/tmp")) < 0 ||
            (r = add(p, SANDBOX_MOUNT_TMPFS, NULL, "/run")) < 0 || (r = add(p, SANDBOX_MOUNT_TMPFS, NULL, "/dev/shm")) < 0 ||
            (r = add(p, SANDBOX_MOUNT_SYMLINK, "../run", "/var/run")) < 0)
                return r;
        static const char *const etc_links[] = {"/etc/resolv.conf", "/etc/hosts", "/etc/localtime", "/etc/hostname"};
        for (size_t i = 0; i < ELEMENTSOF(etc_links); i++) {
                char real[PATH_MAX];
                struct stat st;
                if (!realpath(etc_links[i], real) || stat(real, &st) < 0 || !S_ISREG(st.st_mode)) continue;
                if (sandbox_plan_path_visible(p->m, p->n, real)) continue;
                if ((r = add(p, SANDBOX_MOUNT_RO_BIND, real, real)) < 0) return r;
        }
        return 0;
}

/* an allow-listed entry: bound if it is a dir or a regular file (never a socket) */
static int add_allowed(plan *p, const char *home, const char *entry) {
        _cleanup_free_ char *path = entry[0] == '/' ? strdup(entry) : strdup_printf("%s/%s", home, entry);
        if (!path) return -ENOMEM;
        struct stat st;
        if (stat(path, &st) < 0 || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) return 0;
        if (sandbox_plan_path_visible(p->m, p->n, path)) return 0;
        return add(p, SANDBOX_MOUNT_RO_BIND, path, path);
}

/* 3. the home dir: an empty dir on the root tmpfs, or, where a system root
 * shows it (a home under /opt), an empty tmpfs over it, so that its
 * entries are hidden there too */
static bool is_system_root(const char *path) {
        static const char *const roots[] = {SANDBOX_SYSTEM_ROOTS};
        for (size_t i = 0; i < ELEMENTSOF(roots); i++)
                if (streq(path, roots[i])) return true;
        return false;
}

static int add_home_at(plan *p, const sandbox_plan_args *a, const char *home, bool real) {
        bool shown = sandbox_plan_path_visible(p->m, p->n, home);
        /* a home that is a system root itself (HOME=/opt) stays as the root
         * shows it, its deny-list masked on top (step 6): hiding it would
         * hide the system's tools */
        if (shown && is_system_root(home)) return 0;
        /* the dir a home symlink leads to only needs hiding where it shows */
        if (real && !shown) return 0;
        int r = add(p, SANDBOX_MOUNT_TMPFS, NULL, home);
        if (r < 0) return r;
        static const char *const allow[] = {SANDBOX_HOME_ALLOW};
        for (size_t i = 0; i < ELEMENTSOF(allow); i++)
                if ((r = add_allowed(p, home, allow[i])) < 0) return r;
        for (char *const *e = a->home_allow; e && *e; e++)
                if (**e && (r = add_allowed(p, home, *e)) < 0) return r;
        return 0;
}

static int add_home(plan *p, const sandbox_plan_args *a) {
        if (!a->home || a->home[0] != '/' || streq(a->home, "/")) return 0;
        int r = add_home_at(p, a, a->home, false);
        if (r < 0) return r;
        /* a home reached through a symlink (/home/u -> /opt/homes/u): the
         * dir itself is hidden too wherever a system root shows it */
        char real[PATH_MAX];
        if (realpath(a->home, real) && !streq(real, a->home) && !streq(real, "/"))
                r = add_home_at(p, a, real, true);
        return r;
}

/* 6. one mask, if the path exists and something above shows it */
static int add_mask(plan *p, const char *path, char ***masked) {
        struct stat st;
        if (lstat(path, &st) < 0) return 0;
        char real[PATH_MAX];
        const char *target = path;
        if (S_ISLNK(st.st_mode)) {
                if (!realpath(path, real) || stat(real, &st) < 0) return 0;
                target = real;
        }
        if (!sandbox_plan_path_visible(p->m, p->n, target)) return 0;
        int r = add(p, S_ISDIR(st.st_mode) ? SANDBOX_MOUNT_TMPFS : SANDBOX_MOUNT_MASK_FILE, NULL, target);
        if (r < 0) return r;
        return strv_push(masked, target);
}

int sandbox_plan_build(const sandbox_plan_args *a, sandbox_mount **ret, size_t *ret_n, char ***ret_warnings) {
        plan p = {0};
        _cleanup_strv_free_ char **masked = NULL, **warnings = NULL, **structural = NULL;
        int r;
        if ((r = add_system_roots(&p)) < 0 || (r = add_var_run(&p)) < 0 || (r = add_home(&p, a)) < 0) goto fail;
        /* not a home dir kept in git (dotfiles): that would show the whole home */
        if (a->work_tree && !streq(a->work_tree, a->directory) && path_is_at_or_below(a->directory, a->work_tree) &&
            !(a->home && path_is_at_or_below(a->home, a->work_tree)) &&
            (r = add(&p, SANDBOX_MOUNT_RO_BIND, a->work_tree, a->work_tree)) < 0)
                goto fail;
        if ((r = add(&p, SANDBOX_MOUNT_TARGET, NULL, a->directory)) < 0) goto fail;
        for (char *const *b = a->rw_binds; b && *b; b++)
                if ((r = add(&p, SANDBOX_MOUNT_BIND, *b, *b)) < 0) goto fail;
        for (char *const *b = a->ro_binds; b && *b; b++)
                if ((r = add(&p, SANDBOX_MOUNT_RO_BIND, *b, *b)) < 0) goto fail;
        for (char *const *d = a->deny; d && *d; d++)
                if ((r = add_mask(&p, *d, &masked)) < 0) goto fail;
        for (char *const *d = a->structural; d && *d; d++)
                if ((r = add_mask(&p, *d, &structural)) < 0) goto fail;
        /* a user bind of a deny-listed path itself: the user's explicit call */
        for (int rw = 1; rw >= 0; rw--)
                for (char *const *b = rw ? a->rw_binds : a->ro_binds; b && *b; b++)
                        for (char **mk = masked; mk && *mk; mk++) {
                                if (!path_is_at_or_below(*b, *mk)) continue;
                                if ((r = add(&p, rw ? SANDBOX_MOUNT_BIND : SANDBOX_MOUNT_RO_BIND, *b, *b)) < 0 ||
                                    (r = strv_pushf(&warnings,
                                                    "warning: %s is inside the masked %s; it is bound %s anyway "
                                                    "because you asked for it (--%s-bind)",
                                                    *b, *mk, rw ? "read-write" : "read-only", rw ? "rw" : "ro")) < 0)
                                        goto fail;
                                break;
                        }
        for (size_t i = 0; i < a->n_tail; i++) {
                const sandbox_mount *t = &a->tail[i];
                if ((r = sandbox_mounts_push(&p.m, &p.n, t->op, t->src, t->dest, t->upper, t->work, t->stage)) < 0)
                        goto fail;
        }
        *ret = p.m;
        *ret_n = p.n;
        if (ret_warnings) *ret_warnings = TAKE_PTR(warnings);
        return 0;
fail:
        sandbox_mounts_free(p.m, p.n);
        return r;
}

int sandbox_deny_list(const char *home, const char *state_dir, char *const *extra, char ***ret) {
        static const char *const home_rel[] = {SANDBOX_DENY_HOME};
        _cleanup_strv_free_ char **l = NULL, **raw = NULL;
        int r;
        if (state_dir && (r = strv_push(&raw, state_dir)) < 0) return r;
        for (size_t i = 0; i < ELEMENTSOF(home_rel); i++)
                if ((r = strv_pushf(&raw, "%s/%s", home, home_rel[i])) < 0) return r;
        for (char *const *e = extra; e && *e; e++) {
                if (!**e) continue;
                r = **e == '/' ? strv_push(&raw, *e) : strv_pushf(&raw, "%s/%s", home, *e);
                if (r < 0) return r;
        }
        for (char **e = raw; e && *e; e++) {
                if (!strv_contains(l, *e) && (r = strv_push(&l, *e)) < 0) return r;
                char real[PATH_MAX];
                if (realpath(*e, real) && !strv_contains(l, real) && (r = strv_push(&l, real)) < 0) return r;
        }
        if (!l && !(l = calloc(1, sizeof(char *)))) return -ENOMEM;
        *ret = TAKE_PTR(l);
        return 0;
}
