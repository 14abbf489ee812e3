#include "run/executor-home.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "macro.h"
#include "path-util.h"
#include "string-util.h"
#include "strv.h"

char *executor_home_root(const char *cache_dir, const char *task_id) {
        return strdup_printf("%s/homes/%s", cache_dir, task_id);
}

void executor_home_done(executor_home *h) {
        free(h->root);
        strv_free(h->dirs);
        for (size_t i = 0; i < h->n_seeds; i++) {
                free(h->seeds[i].src);
                free(h->seeds[i].dest);
        }
        free(h->seeds);
        sandbox_mounts_free(h->mounts, h->n_mounts);
        strv_free(h->env);
        *h = (executor_home){0};
}

static bool denied(char *const *deny, const char *p) {
        for (; deny && *deny; deny++)
                if (paths_overlap(p, *deny)) return true;
        return false;
}

/* The path to expose for src, or NULL when it must not be exposed: lstat,
 * never stat, and a failure is a no; a directory, or a regular file with a
 * single link (a hard link may be anybody's file); a symlink only to such a
 * target, resolved; and never a path that overlaps a deny-listed one (the
 * same, inside it or holding it). */
static char *safe_source(const char *src, char *const *deny) {
        struct stat st;
        if (lstat(src, &st) < 0) return NULL;
        char real[PATH_MAX];
        const char *p = src;
        if (S_ISLNK(st.st_mode)) {
                if (!realpath(src, real) || lstat(real, &st) < 0) return NULL;
                p = real;
        }
        if (!(S_ISDIR(st.st_mode) || (S_ISREG(st.st_mode) && st.st_nlink == 1))) return NULL;
        if (denied(deny, p)) return NULL;
        return strdup(p);
}

static int push_dir(executor_home *h, const char *fmt, const char *a, const char *b) {
        return strv_consume(&h->dirs, strdup_printf(fmt, a, b));
}

static int push_env(executor_home *h, const char *name, const char *root, const char *sub) {
        return strv_consume(&h->env, strdup_printf("%s=%s/%s", name, root, sub));
}

/* Is root/rel a directory reached without a symlink below root? The earlier
 * task owned everything below <H'>/pi and <H'>/opencode, and the shim's copy
 * follows a symlink it meets on the way to the source: a sessions dir
 * replaced by a link to ~/.ssh would copy the keys into the new task's home.
 * Race-free because the task that wrote <H'> has settled (launch.c
 * seed_home_for): nothing writes there any more. */
static bool seed_dir_ok(const char *root, const char *rel) {
        _cleanup_free_ char *p = strdup(root), *rest = strdup(rel);
        if (!p || !rest) return false;
        char *save = NULL;
        for (char *c = strtok_r(rest, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                char *n = strdup_printf("%s/%s", p, c);
                if (!n) return false;
                free(p);
                p = n;
                struct stat st;
                if (lstat(p, &st) < 0 || !S_ISDIR(st.st_mode)) return false;
        }
        return true;
}

static int push_seed(executor_home *h, const char *src, const char *dest) {
        sandbox_seed *n = realloc(h->seeds, (h->n_seeds + 1) * sizeof *n);
        if (!n) return -ENOMEM;
        h->seeds = n;
        n[h->n_seeds] = (sandbox_seed){strdup(src), strdup(dest)};
        if (!n[h->n_seeds].src || !n[h->n_seeds].dest) {
                free(n[h->n_seeds].src);
                free(n[h->n_seeds].dest);
                return -ENOMEM;
        }
        h->n_seeds++;
        return 0;
}

static int add_mount(executor_home *h, sandbox_mount_op op, const char *src, const char *dest) {
        return sandbox_mounts_push(&h->mounts, &h->n_mounts, op, src, dest, NULL, NULL, NULL);
}

/* The user's dir named by env var `var` (absolute), else home/def. */
static char *user_dir(const executor_home_args *a, const char *var, const char *def) {
        const char *v = strv_env_get(a->env, var);
        if (v && v[0] == '/') return strdup(v);
        return strdup_printf("%s/%s", a->home, def);
}

static int plan_pi(const executor_home_args *a, executor_home *h) {
        _cleanup_free_ char *ad = user_dir(a, "PI_CODING_AGENT_DIR", ".pi/agent");
        _cleanup_free_ char *pi = strdup_printf("%s/pi", h->root), *sessions = strdup_printf("%s/pi/sessions", h->root);
        if (!ad || !pi || !sessions) return -ENOMEM;
        int r;
        if ((r = strv_push(&h->dirs, pi)) < 0 || (r = strv_push(&h->dirs, sessions)) < 0) return r;
        if ((r = push_env(h, "PI_CODING_AGENT_DIR", h->root, "pi")) < 0) return r;
        if ((r = add_mount(h, SANDBOX_MOUNT_BIND, pi, pi)) < 0) return r;
        if (a->seed_root) {
                _cleanup_free_ char *from = strdup_printf("%s/pi/sessions", a->seed_root);
                if (!from) return -ENOMEM;
                if (seed_dir_ok(a->seed_root, "pi/sessions") && (r = push_seed(h, from, sessions)) < 0) return r;
        }
        _cleanup_free_ char *real_ad = safe_source(ad, a->deny);
        if (!real_ad || !is_dir(real_ad)) return 0;
        DIR *d = opendir(real_ad);
        if (!d) return 0;
        struct dirent *de;
        r = 0;
        while (r >= 0 && (de = readdir(d))) {
                const char *n = de->d_name;
                if (streq(n, ".") || streq(n, "..") || streq(n, "sessions")) continue;
                size_t len = strlen(n);
                if (len >= 5 && streq(n + len - 5, ".lock")) continue;
                _cleanup_free_ char *src = strdup_printf("%s/%s", real_ad, n), *dest = strdup_printf("%s/%s", pi, n);
                if (!src || !dest) {
                        r = -ENOMEM;
                        break;
                }
                _cleanup_free_ char *safe = safe_source(src, a->deny);
                if (safe) r = add_mount(h, SANDBOX_MOUNT_RO_BIND, safe, dest);
        }
        closedir(d);
        return r;
}

static int plan_opencode(const executor_home_args *a, executor_home *h) {
        _cleanup_free_ char *data = user_dir(a, "XDG_DATA_HOME", ".local/share");
        _cleanup_free_ char *config = user_dir(a, "XDG_CONFIG_HOME", ".config");
        _cleanup_free_ char *oc = strdup_printf("%s/opencode", h->root);
        if (!data || !config || !oc) return -ENOMEM;
        static const char *const subs[] = {"data", "data/opencode", "cache", "state", "config-upper", "config-work",
                                           "config-mnt", "config-empty"};
        int r;
        if ((r = strv_push(&h->dirs, oc)) < 0) return r;
        for (size_t i = 0; i < ELEMENTSOF(subs); i++)
                if ((r = push_dir(h, "%s/%s", oc, subs[i])) < 0) return r;
        if ((r = push_env(h, "XDG_DATA_HOME", oc, "data")) < 0 || (r = push_env(h, "XDG_CACHE_HOME", oc, "cache")) < 0 ||
            (r = push_env(h, "XDG_STATE_HOME", oc, "state")) < 0)
                return r;
        if ((r = add_mount(h, SANDBOX_MOUNT_BIND, oc, oc)) < 0) return r;
        if (a->seed_root) {
                _cleanup_free_ char *from = strdup_printf("%s/opencode/data/opencode", a->seed_root),
                                    *to = strdup_printf("%s/data/opencode", oc);
                if (!from || !to) return -ENOMEM;
                if (seed_dir_ok(a->seed_root, "opencode/data/opencode") && (r = push_seed(h, from, to)) < 0) return r;
        }
        _cleanup_free_ char *auth = strdup_printf("%s/opencode/auth.json", data),
                            *auth_dest = strdup_printf("%s/data/opencode/auth.json", oc);
        if (!auth || !auth_dest) return -ENOMEM;
        _cleanup_free_ char *auth_src = safe_source(auth, a->deny);
        if (auth_src && !is_dir(auth_src) && (r = add_mount(h, SANDBOX_MOUNT_RO_BIND, auth_src, auth_dest)) < 0) return r;

        _cleanup_free_ char *cfg = strdup_printf("%s/opencode", config);
        if (!cfg) return -ENOMEM;
        if (denied(a->deny, cfg)) return 0;
        _cleanup_free_ char *lower = safe_source(cfg, a->deny);
        if (lower && !is_dir(lower)) {
                free(lower);
                lower = NULL;
        }
        if (!lower && !(lower = strdup_printf("%s/config-empty", oc))) return -ENOMEM;
        _cleanup_free_ char *up = strdup_printf("%s/config-upper", oc), *wk = strdup_printf("%s/config-work", oc),
                            *st = strdup_printf("%s/config-mnt", oc);
        if (!up || !wk || !st) return -ENOMEM;
        return sandbox_mounts_push(&h->mounts, &h->n_mounts, SANDBOX_MOUNT_OVERLAY, lower, cfg, up, wk, st);
}

int executor_home_plan(const executor_home_args *a, executor_home *ret) {
        executor_home h = {.root = executor_home_root(a->cache_dir, a->task_id)};
        int r = -ENOMEM;
        _cleanup_free_ char *uv = NULL; /* before the first goto: fail frees it */
        if (!h.root) goto fail;
        uv = strdup_printf("%s/uv", h.root);
        if (!uv) goto fail;
        if ((r = strv_push(&h.dirs, h.root)) < 0 || (r = strv_push(&h.dirs, uv)) < 0 ||
            (r = push_dir(&h, "%s/%s", uv, "cache")) < 0 || (r = push_dir(&h, "%s/%s", uv, "tools")) < 0 ||
            (r = push_env(&h, "UV_CACHE_DIR", uv, "cache")) < 0 || (r = push_env(&h, "UV_TOOL_DIR", uv, "tools")) < 0 ||
            (r = add_mount(&h, SANDBOX_MOUNT_BIND, uv, uv)) < 0)
                goto fail;
        if (streq(a->executor, "pi")) r = plan_pi(a, &h);
        else if (streq(a->executor, "opencode")) r = plan_opencode(a, &h);
        if (r < 0) goto fail;
        *ret = h;
        return 0;
fail:
        executor_home_done(&h);
        return r;
}

int executor_home_release(const char *root) {
        static const char *const keep[] = {"pi/sessions", "opencode/data"};
        _cleanup_close_ int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return errno == ENOENT ? 0 : -errno;
        int r = 0;
        /* two levels: <H>/<exe>/<sub> — keep the listed subdirs, remove the rest */
        DIR *d = fdopendir(dup(fd));
        if (!d) return -errno;
        struct dirent *de;
        while ((de = readdir(d))) {
                const char *n = de->d_name;
                if (streq(n, ".") || streq(n, "..")) continue;
                bool parent_of_keep = false;
                for (size_t i = 0; i < ELEMENTSOF(keep); i++)
                        if (strncmp(keep[i], n, strlen(n)) == 0 && keep[i][strlen(n)] == '/') parent_of_keep = true;
                _cleanup_free_ char *p = strdup_printf("%s/%s", root, n);
                if (!p) return -ENOMEM;
                if (!parent_of_keep) {
                        int k = rm_rf(p);
                        if (k < 0 && r == 0) r = k;
                        continue;
                }
                DIR *sd = opendir(p);
                if (!sd) continue;
                struct dirent *se;
                while ((se = readdir(sd))) {
                        if (streq(se->d_name, ".") || streq(se->d_name, "..")) continue;
                        _cleanup_free_ char *rel = strdup_printf("%s/%s", n, se->d_name);
                        if (!rel) break;
                        bool kept = false;
                        for (size_t i = 0; i < ELEMENTSOF(keep); i++) kept = kept || streq(rel, keep[i]);
                        if (kept) continue;
                        _cleanup_free_ char *sp = strdup_printf("%s/%s", p, se->d_name);
                        int k = sp ? rm_rf(sp) : -ENOMEM;
                        if (k < 0 && r == 0) r = k;
                }
                closedir(sd);
        }
        closedir(d);
        return r;
}

int executor_home_writable_dirs(const char *root, char ***ret) {
        static const char *const subs[] = {"uv", "pi", "opencode/data", "opencode/cache", "opencode/state",
                                           "opencode/config-upper"};
        _cleanup_strv_free_ char **l = NULL;
        for (size_t i = 0; i < ELEMENTSOF(subs); i++)
                if (strv_pushf(&l, "%s/%s", root, subs[i]) < 0) return -ENOMEM;
        *ret = TAKE_PTR(l);
        return 0;
}
