/* paths.c: resolution order of spec protocol-cli.md §3.1. */

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

START_TEST(defaults_under_home) {
        clear_env();
        tf_paths p;
        ck_assert_int_eq(tf_paths_resolve(&p), 0);
        ck_assert_str_eq(p.state_dir, "/home/u/.local/state/taskferry");
        ck_assert_str_eq(p.cache_dir, "/home/u/.cache/taskferry");
        ck_assert_str_eq(p.config_file, "/home/u/.config/taskferry/config.json");
        char run_user[64];
        snprintf(run_user, sizeof run_user, "/run/user/%u", (unsigned) getuid());
        if (is_dir(run_user)) {
                char *want = strdup_printf("%s/taskferry", run_user);
                ck_assert_str_eq(p.runtime_dir, want);
                free(want);
        } else
                ck_assert_str_eq(p.runtime_dir, "/home/u/.local/state/taskferry/run");
        char *sock = strdup_printf("%s/daemon.sock", p.runtime_dir);
        ck_assert_str_eq(p.socket_path, sock);
        free(sock);
        /* on real disk under the state dir, not the runtime-dir tmpfs (issue 5 item 14) */
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
        tf_paths p;
        ck_assert_int_eq(tf_paths_resolve(&p), 0);
        ck_assert_str_eq(p.state_dir, "/xs/taskferry");
        ck_assert_str_eq(p.runtime_dir, "/xr/taskferry");
        ck_assert_str_eq(p.cache_dir, "/xc/taskferry");
        ck_assert_str_eq(p.socket_path, "/xr/taskferry/daemon.sock");
        ck_assert_str_eq(p.config_file, "/xg/taskferry/config.json");
        tf_paths_done(&p);
        setenv("TASKFERRY_STATE_DIR", "/s", 1);
        setenv("TASKFERRY_RUNTIME_DIR", "/r", 1);
        setenv("TASKFERRY_CACHE_DIR", "/c", 1);
        setenv("TASKFERRY_SOCKET_PATH", "/k.sock", 1);
        setenv("TASKFERRY_OVERLAY_TMP_DIR", "/o", 1);
        ck_assert_int_eq(tf_paths_resolve(&p), 0);
        ck_assert_str_eq(p.state_dir, "/s");
        ck_assert_str_eq(p.runtime_dir, "/r");
        ck_assert_str_eq(p.cache_dir, "/c");
        ck_assert_str_eq(p.socket_path, "/k.sock");
        ck_assert_str_eq(p.overlay_tmp_root, "/o");
        tf_paths_done(&p);
        /* empty strings count as unset */
        setenv("TASKFERRY_STATE_DIR", "", 1);
        setenv("TASKFERRY_RUNTIME_DIR", "", 1);
        setenv("XDG_RUNTIME_DIR", "", 1);
        ck_assert_int_eq(tf_paths_resolve(&p), 0);
        ck_assert_str_eq(p.state_dir, "/xs/taskferry");
        tf_paths_done(&p);
}
END_TEST

START_TEST(run_user_dir_without_xdg_runtime_dir) {
        /* #280: /run/user/<uid> is used when it exists even if XDG_RUNTIME_DIR is not exported */
        clear_env();
        char run_user[64];
        snprintf(run_user, sizeof run_user, "/run/user/%u", (unsigned) getuid());
        bool created = false;
        if (!is_dir(run_user) && getuid() == 0) {
                if (mkdir_p(run_user, 0700) == 0) created = true;
        }
        tf_paths p;
        ck_assert_int_eq(tf_paths_resolve(&p), 0);
        if (is_dir(run_user)) {
                char *want = strdup_printf("%s/taskferry", run_user);
                ck_assert_str_eq(p.runtime_dir, want);
                free(want);
        } else
                ck_assert_str_eq(p.runtime_dir, "/home/u/.local/state/taskferry/run");
        tf_paths_done(&p);
        if (created) rmdir(run_user);
}
END_TEST

TF_MAIN("paths", "resolve", NULL, NULL, 0, defaults_under_home, xdg_and_overrides, run_user_dir_without_xdg_runtime_dir)
