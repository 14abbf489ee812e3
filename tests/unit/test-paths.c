/* paths.c: the resolution order of each path (its env variable, empty counting
 * as unset, then the XDG default), as paths.h states it. */

#include <check.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fs-util.h"
#include "paths.h"
#include "string-util.h"
#include "unit.h"

static void clear_env(void) {
        const char *vars[] = {"TASKFERRY_STATE_DIR", "TASKFERRY_RUNTIME_DIR", "TASKFERRY_CACHE_DIR",
                              "TASKFERRY_SOCKET_PATH", "TASKFERRY_OVERLAY_TMP_DIR", "XDG_STATE_HOME",
                              "XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"};
        for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
        setenv("HOME", "/home/u", 1);
}

/* tf_paths_resolve, in this environment, resolves to these paths (NULL: not
 * checked). */
static void resolves_to(const char *state, const char *runtime, const char *cache, const char *socket,
                        const char *config, const char *overlay) {
        tf_paths p;
        ck_assert_int_eq(tf_paths_resolve(&p), 0);
        const struct {
                const char *what, *got, *want;
        } paths[] = {{"state", p.state_dir, state},   {"runtime", p.runtime_dir, runtime},
                     {"cache", p.cache_dir, cache},   {"socket", p.socket_path, socket},
                     {"config", p.config_file, config}, {"overlay", p.overlay_tmp_root, overlay}};
        for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
                if (paths[i].want)
                        ck_assert_msg(streq_ptr(paths[i].got, paths[i].want), "%s dir %s, want %s", paths[i].what,
                                      strnull(paths[i].got), paths[i].want);
        tf_paths_done(&p);
}

/* The runtime dir without XDG_RUNTIME_DIR: /run/user/<uid>/taskferry when
 * that dir exists, else under the state dir. */
static void assert_default_runtime_dir(const tf_paths *p) {
        _cleanup_free_ char *run_user = strdup_printf("/run/user/%u", (unsigned) getuid());
        _cleanup_free_ char *want = is_dir(run_user) ? strdup_printf("%s/taskferry", run_user)
                                                     : strdup("/home/u/.local/state/taskferry/run");
        ck_assert_str_eq(p->runtime_dir, want);
}

START_TEST(defaults_under_home) {
        clear_env();
        tf_paths p;
        ck_assert_int_eq(tf_paths_resolve(&p), 0);
        ck_assert_str_eq(p.state_dir, "/home/u/.local/state/taskferry");
        ck_assert_str_eq(p.cache_dir, "/home/u/.cache/taskferry");
        ck_assert_str_eq(p.config_file, "/home/u/.config/taskferry/config.json");
        assert_default_runtime_dir(&p);
        char *sock = strdup_printf("%s/daemon.sock", p.runtime_dir);
        ck_assert_str_eq(p.socket_path, sock);
        free(sock);
        /* on real disk under the state dir, not the runtime-dir tmpfs */
        char *ov = strdup_printf("%s/overlays", p.state_dir);
        ck_assert_str_eq(p.overlay_tmp_root, ov);
        free(ov);
        tf_paths_done(&p);
}
END_TEST

START_TEST(xdg_and_overrides) {
        clear_env();
        setenv("XDG_STATE_HOME", "/xs", 1);
        setenv("XDG_RUNTIME_DIR", "/xr", 1);
        setenv("XDG_CACHE_HOME", "/xc", 1);
        setenv("XDG_CONFIG_HOME", "/xg", 1);
        resolves_to("/xs/taskferry", "/xr/taskferry", "/xc/taskferry", "/xr/taskferry/daemon.sock",
                    "/xg/taskferry/config.json", NULL);
        setenv("TASKFERRY_STATE_DIR", "/s", 1);
        setenv("TASKFERRY_RUNTIME_DIR", "/r", 1);
        setenv("TASKFERRY_CACHE_DIR", "/c", 1);
        setenv("TASKFERRY_SOCKET_PATH", "/k.sock", 1);
        setenv("TASKFERRY_OVERLAY_TMP_DIR", "/o", 1);
        resolves_to("/s", "/r", "/c", "/k.sock", NULL, "/o");
        /* empty strings count as unset */
        setenv("TASKFERRY_STATE_DIR", "", 1);
        setenv("TASKFERRY_RUNTIME_DIR", "", 1);
        setenv("XDG_RUNTIME_DIR", "", 1);
        resolves_to("/xs/taskferry", NULL, NULL, NULL, NULL, NULL);
}
END_TEST

START_TEST(run_user_dir_without_xdg_runtime_dir) {
        /* /run/user/<uid> is used when it exists even if XDG_RUNTIME_DIR is not exported */
        clear_env();
        char run_user[64];
        snprintf(run_user, sizeof run_user, "/run/user/%u", (unsigned) getuid());
        bool created = false;
        if (!is_dir(run_user) && getuid() == 0) {
                if (mkdir_p(run_user, 0700) == 0) created = true;
        }
        tf_paths p;
        ck_assert_int_eq(tf_paths_resolve(&p), 0);
        assert_default_runtime_dir(&p);
        tf_paths_done(&p);
        if (created) rmdir(run_user);
}
END_TEST

TF_MAIN("paths", "resolve", NULL, NULL, 0, defaults_under_home, xdg_and_overrides, run_user_dir_without_xdg_runtime_dir)
