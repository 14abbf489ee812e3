/* executor_home_plan / executor_home_release (executor-home.h): per-task
 * homes for pi and OpenCode, built against a fake user home with real
 * files, hard links and symlinks. */

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/executor-home.h"
#include "macro.h"
#include "unit.h"
#include "fileio.h"
#include "fs-util.h"
#include "string-util.h"
#include "strv.h"

static char *root, *home, *cache;

static char *at(const char *rel) { return strdup_printf("%s/%s", home, rel); }

static void mkfile_at(const char *p) {
        _cleanup_free_ char *dir = strdup(p);
        *strrchr(dir, '/') = 0;
        ck_assert_int_eq(mkdir_p(dir, 0700), 0);
        ck_assert_int_eq(write_file_atomic(p, "x", 1, 0600), 0);
}

static void mkfile(const char *rel) {
        _cleanup_free_ char *p = at(rel);
        mkfile_at(p);
}

static void setup(void) {
        root = tf_tmpdir_new("tf-home");
        home = strdup_printf("%s/home", root);
        cache = strdup_printf("%s/cache", root);
        mkfile(".pi/agent/auth.json");
        mkfile(".pi/agent/models.json");
        mkfile(".pi/agent/settings.json");
        mkfile(".pi/agent/extensions/ext.ts");
        mkfile(".pi/agent/sessions/--repo--/2026_abc.jsonl");
        mkfile(".pi/agent/settings.json.lock/x");
        mkfile(".ssh/id_ed25519");
        mkfile(".local/share/opencode/auth.json");
        mkfile(".local/share/opencode/opencode.db");
        mkfile(".config/opencode/opencode.json");
}

static void teardown(void) {
        root = tf_tmpdir_free(root);
        free(home), free(cache);
}

static ssize_t find(const executor_home *h, sandbox_mount_op op, const char *dest) {
        for (size_t i = 0; i < h->n_mounts; i++)
                if (h->mounts[i].op == op && streq(h->mounts[i].dest, dest)) return (ssize_t) i;
        return -1;
}

static void plan(const char *executor, char **env, const char *seed, executor_home *h) {
        _cleanup_free_ char *ssh = at(".ssh");
        char *deny[] = {ssh, cache, NULL};
        char *no_env[] = {NULL};
        executor_home_args a = {.executor = executor, .task_id = "oc_t_1", .cache_dir = cache, .home = home,
                                .env = env ? env : no_env, .seed_root = seed, .deny = deny};
        ck_assert_int_eq(executor_home_plan(&a, h), 0);
}

START_TEST(test_pi_home) {
        /* a hard-linked entry and a symlink into a deny-listed dir are not exposed */
        _cleanup_free_ char *auth = at(".pi/agent/auth.json"), *hl = at(".pi/agent/hardlinked.json");
        ck_assert_int_eq(link(auth, hl), 0);
        _cleanup_free_ char *ssh = at(".ssh"), *sl = at(".pi/agent/keys");
        ck_assert_int_eq(symlink(ssh, sl), 0);
        executor_home h = {0};
        plan("pi", NULL, NULL, &h);
        _cleanup_free_ char *H = strdup_printf("%s/homes/oc_t_1", cache);
        ck_assert_str_eq(h.root, H);
        _cleanup_free_ char *pi = strdup_printf("%s/pi", H), *sessions = strdup_printf("%s/pi/sessions", H);
        ck_assert(strv_contains(h.dirs, pi));
        ck_assert(strv_contains(h.dirs, sessions));
        _cleanup_free_ char *env = strdup_printf("PI_CODING_AGENT_DIR=%s", pi);
        ck_assert(strv_contains(h.env, env));
        ssize_t rw = find(&h, SANDBOX_MOUNT_BIND, pi);
        ck_assert_int_ge(rw, 0);
        static const char *const ro[] = {"models.json", "settings.json", "extensions"};
        for (size_t i = 0; i < ELEMENTSOF(ro); i++) {
                _cleanup_free_ char *d = strdup_printf("%s/%s", pi, ro[i]);
                ssize_t k = find(&h, SANDBOX_MOUNT_RO_BIND, d);
                ck_assert_msg(k > rw, "%s not bound read-only over the home", ro[i]);
        }
        /* auth.json got a second link above: it is no longer a safe source */
        static const char *const never[] = {"sessions", "settings.json.lock", "hardlinked.json", "keys", "auth.json"};
        for (size_t i = 0; i < ELEMENTSOF(never); i++) {
                _cleanup_free_ char *d = strdup_printf("%s/%s", pi, never[i]);
                ck_assert_msg(find(&h, SANDBOX_MOUNT_RO_BIND, d) < 0, "%s exposed", never[i]);
        }
        ck_assert_uint_eq(h.n_seeds, 0);
        executor_home_done(&h);

        /* resume: the earlier task's sessions seed this one */
        _cleanup_free_ char *seed = strdup_printf("%s/homes/oc_t_0", cache), *ss = strdup_printf("%s/pi/sessions/x", seed);
        mkfile_at(ss);
        plan("pi", NULL, seed, &h);
        ck_assert_uint_eq(h.n_seeds, 1);
        ck_assert(strstr(h.seeds[0].src, "oc_t_0/pi/sessions"));
        ck_assert(strstr(h.seeds[0].dest, "oc_t_1/pi/sessions"));
        executor_home_done(&h);

        /* the earlier task replaced its sessions dir by a symlink: no seed */
        _cleanup_free_ char *sdir = strdup_printf("%s/pi/sessions", seed), *ssh2 = at(".ssh");
        ck_assert_int_eq(rm_rf(sdir), 0);
        ck_assert_int_eq(symlink(ssh2, sdir), 0);
        plan("pi", NULL, seed, &h);
        ck_assert_uint_eq(h.n_seeds, 0);
        executor_home_done(&h);
}
END_TEST

START_TEST(test_pi_agent_dir_from_env) {
        mkfile("custom-agent/models.json");
        _cleanup_free_ char *ad = at("custom-agent");
        _cleanup_free_ char *e = strdup_printf("PI_CODING_AGENT_DIR=%s", ad);
        char *env[] = {e, NULL};
        executor_home h = {0};
        plan("pi", env, NULL, &h);
        _cleanup_free_ char *src = at("custom-agent/models.json");
        bool found = false;
        for (size_t i = 0; i < h.n_mounts; i++) found = found || (h.mounts[i].src && streq(h.mounts[i].src, src));
        ck_assert(found);
        executor_home_done(&h);
        /* an agent dir inside a deny-listed dir is not exposed at all */
        _cleanup_free_ char *e2 = strdup_printf("PI_CODING_AGENT_DIR=%s/.ssh", home);
        char *env2[] = {e2, NULL};
        plan("pi", env2, NULL, &h);
        for (size_t i = 0; i < h.n_mounts; i++)
                ck_assert_msg(h.mounts[i].op != SANDBOX_MOUNT_RO_BIND, "exposed %s", h.mounts[i].src);
        executor_home_done(&h);
}
END_TEST

START_TEST(test_opencode_home) {
        executor_home h = {0};
        plan("opencode", NULL, NULL, &h);
        _cleanup_free_ char *oc = strdup_printf("%s/homes/oc_t_1/opencode", cache);
        static const char *const vars[] = {"XDG_DATA_HOME=%s/data", "XDG_CACHE_HOME=%s/cache", "XDG_STATE_HOME=%s/state"};
        for (size_t i = 0; i < ELEMENTSOF(vars); i++) {
                _cleanup_free_ char *v = strdup_printf(vars[i], oc);
                ck_assert_msg(strv_contains(h.env, v), "%s missing", v);
        }
        _cleanup_free_ char *auth_dest = strdup_printf("%s/data/opencode/auth.json", oc);
        ssize_t a = find(&h, SANDBOX_MOUNT_RO_BIND, auth_dest);
        ck_assert_int_ge(a, 0);
        _cleanup_free_ char *auth_src = at(".local/share/opencode/auth.json");
        ck_assert_str_eq(h.mounts[a].src, auth_src);
        _cleanup_free_ char *cfg = at(".config/opencode");
        ssize_t o = find(&h, SANDBOX_MOUNT_OVERLAY, cfg);
        ck_assert_int_ge(o, 0);
        ck_assert_str_eq(h.mounts[o].src, cfg);
        ck_assert(strstr(h.mounts[o].upper, "oc_t_1/opencode/config-upper"));
        ck_assert(strstr(h.mounts[o].stage, "oc_t_1/opencode/config-mnt"));
        /* the user's data home itself (its opencode.db) is never bound */
        _cleanup_free_ char *db = at(".local/share/opencode/opencode.db");
        for (size_t i = 0; i < h.n_mounts; i++) ck_assert(!h.mounts[i].src || !streq(h.mounts[i].src, db));
        executor_home_done(&h);

        /* no config dir of the user's: an empty per-task lower */
        _cleanup_free_ char *cfgdir = at(".config/opencode");
        ck_assert_int_eq(rm_rf(cfgdir), 0);
        plan("opencode", NULL, NULL, &h);
        o = find(&h, SANDBOX_MOUNT_OVERLAY, cfg);
        ck_assert_int_ge(o, 0);
        ck_assert(strstr(h.mounts[o].src, "oc_t_1/opencode/config-empty"));
        executor_home_done(&h);
}
END_TEST

START_TEST(test_shell_gets_uv_only) {
        executor_home h = {0};
        plan("shell", NULL, NULL, &h);
        _cleanup_free_ char *uv = strdup_printf("UV_CACHE_DIR=%s/homes/oc_t_1/uv/cache", cache);
        ck_assert(strv_contains(h.env, uv));
        ck_assert_uint_eq(strv_length(h.env), 2);
        ck_assert_uint_eq(h.n_mounts, 1);
        executor_home_done(&h);
}
END_TEST

START_TEST(test_release_keeps_sessions) {
        _cleanup_free_ char *H = strdup_printf("%s/homes/oc_t_1", cache);
        static const char *const keep[] = {"pi/sessions/--r--/s.jsonl", "opencode/data/opencode/opencode.db"};
        static const char *const drop[] = {"pi/auth.json", "pi/x.lock/y", "uv/cache/z", "opencode/cache/c",
                                           "opencode/config-upper/.gitignore", "opencode/state/s"};
        for (size_t i = 0; i < ELEMENTSOF(keep); i++) {
                _cleanup_free_ char *p = strdup_printf("%s/%s", H, keep[i]);
                mkfile_at(p);
        }
        for (size_t i = 0; i < ELEMENTSOF(drop); i++) {
                _cleanup_free_ char *p = strdup_printf("%s/%s", H, drop[i]);
                mkfile_at(p);
        }
        ck_assert_int_eq(executor_home_release(H), 0);
        for (size_t i = 0; i < ELEMENTSOF(keep); i++) {
                _cleanup_free_ char *p = strdup_printf("%s/%s", H, keep[i]);
                ck_assert_msg(access(p, F_OK) == 0, "%s removed", keep[i]);
        }
        for (size_t i = 0; i < ELEMENTSOF(drop); i++) {
                _cleanup_free_ char *p = strdup_printf("%s/%s", H, drop[i]);
                ck_assert_msg(access(p, F_OK) < 0, "%s kept", drop[i]);
        }
        _cleanup_free_ char *missing = strdup_printf("%s/homes/oc_none", cache);
        ck_assert_int_eq(executor_home_release(missing), 0);
}
END_TEST

TF_MAIN("executor-home", "home", setup, teardown, 0, test_pi_home, test_pi_agent_dir_from_env, test_opencode_home,
        test_shell_gets_uv_only, test_release_keeps_sessions)
