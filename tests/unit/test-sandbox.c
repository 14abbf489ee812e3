/* sandbox_build_argv: the exact bwrap argument list for each overlay method
 * (sandbox.h; spec sandbox-changeset-env.md §1.1 with DESIGN.md's changes). */

#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "sandbox.h"
#include "util.h"

static void assert_argv(char **argv, ...) {
        va_list ap;
        va_start(ap, argv);
        size_t i = 0;
        for (const char *want; (want = va_arg(ap, const char *)); i++) {
                ck_assert_msg(argv[i], "argv too short: missing [%zu] %s", i, want);
                ck_assert_msg(streq(argv[i], want), "argv[%zu] is \"%s\", want \"%s\"", i, argv[i], want);
        }
        va_end(ap);
        ck_assert_msg(!argv[i], "argv too long: extra [%zu] %s", i, argv[i]);
}

static char *tmpfs_list[] = {"/home/u/.local/state/taskferry", "/home/u/.ssh", "/run/user/1000/taskferry",
                             "/home/u/.cache/taskferry", NULL};
static char *rw_list[] = {"/home/u/.local/state/taskferry/outputs/oc_1", "/data/rw", NULL};
static char *ro_list[] = {"/data/ro", NULL};
static launch_overlay ov = {.lower = "/repo", .upper = "/ov/upper/main", .work = "/ov/work/main"};
static char *worker[] = {"sh", "/tmp/.taskferry-prompt", NULL};

static launch_sandbox full_sandbox(void) {
        return (launch_sandbox){
                .uid = 1000,
                .gid = 1001,
                .tmpfs = tmpfs_list,
                .socket_path = "/run/user/1000/taskferry/daemon.sock",
                .rw_binds = rw_list,
                .ro_binds = ro_list,
                .overlay = &ov,
                .share_net = true,
        };
}

START_TEST(test_bwrap_overlay_method) {
        launch_sandbox sb = full_sandbox();
        _cleanup_strv_free_ char **argv = NULL;
        ck_assert_int_eq(sandbox_build_argv("/usr/bin/bwrap", "/repo", &sb, OVERLAY_METHOD_BWRAP, 7, worker, &argv), 0);
        assert_argv(argv, "/usr/bin/bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs",
                    "/tmp", "--overlay-src", "/repo", "--overlay", "/ov/upper/main", "/ov/work/main", "/repo",
                    "--tmpfs", "/home/u/.local/state/taskferry", "--tmpfs", "/home/u/.ssh", "--tmpfs",
                    "/run/user/1000/taskferry", "--tmpfs", "/home/u/.cache/taskferry", "--bind",
                    "/run/user/1000/taskferry/daemon.sock", "/run/user/1000/taskferry/daemon.sock", "--bind",
                    "/home/u/.local/state/taskferry/outputs/oc_1", "/home/u/.local/state/taskferry/outputs/oc_1",
                    "--bind", "/data/rw", "/data/rw", "--ro-bind", "/data/ro", "/data/ro", "--ro-bind-data", "7",
                    SANDBOX_PROMPT_PATH, "--unshare-all", "--share-net", "--die-with-parent", "--chdir", "/repo",
                    "--", "sh", "/tmp/.taskferry-prompt", NULL);
}
END_TEST

START_TEST(test_userns_overlay_method) {
        launch_sandbox sb = full_sandbox();
        _cleanup_strv_free_ char **argv = NULL;
        ck_assert_int_eq(sandbox_build_argv("bwrap", "/repo", &sb, OVERLAY_METHOD_USERNS, 12, worker, &argv), 0);
        assert_argv(argv, "bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                    "--bind", "/repo", "/repo", "--tmpfs", "/home/u/.local/state/taskferry", "--tmpfs",
                    "/home/u/.ssh", "--tmpfs", "/run/user/1000/taskferry", "--tmpfs", "/home/u/.cache/taskferry",
                    "--bind", "/run/user/1000/taskferry/daemon.sock", "/run/user/1000/taskferry/daemon.sock",
                    "--bind", "/home/u/.local/state/taskferry/outputs/oc_1",
                    "/home/u/.local/state/taskferry/outputs/oc_1", "--bind", "/data/rw", "/data/rw", "--ro-bind",
                    "/data/ro", "/data/ro", "--ro-bind-data", "12", SANDBOX_PROMPT_PATH, "--unshare-all",
                    "--share-net", "--die-with-parent", "--uid", "1000", "--gid", "1001", "--chdir", "/repo", "--",
                    "sh", "/tmp/.taskferry-prompt", NULL);
}
END_TEST

/* No overlay (--no-overlay): a plain bind and no --uid/--gid whatever the
 * probed method; no socket (advisor), no prompt fd, no extra binds. */
START_TEST(test_no_overlay_minimal) {
        for (int m = 0; m < 2; m++) {
                launch_sandbox sb = {.uid = 1000, .gid = 1000, .share_net = true};
                _cleanup_strv_free_ char **argv = NULL;
                char *w[] = {"opencode", "run", NULL};
                ck_assert_int_eq(sandbox_build_argv("/b/bwrap", "/w d", &sb,
                                                    m ? OVERLAY_METHOD_USERNS : OVERLAY_METHOD_BWRAP, -1, w, &argv),
                                 0);
                assert_argv(argv, "/b/bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs",
                            "/tmp", "--bind", "/w d", "/w d", "--unshare-all", "--share-net", "--die-with-parent",
                            "--chdir", "/w d", "--", "opencode", "run", NULL);
        }
}
END_TEST

START_TEST(test_unshared_net) {
        launch_sandbox sb = {.uid = 5, .gid = 6, .share_net = false};
        _cleanup_strv_free_ char **argv = NULL;
        char *w[] = {"true", NULL};
        ck_assert_int_eq(sandbox_build_argv("bwrap", "/d", &sb, OVERLAY_METHOD_BWRAP, -1, w, &argv), 0);
        assert_argv(argv, "bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                    "--bind", "/d", "/d", "--unshare-all", "--die-with-parent", "--chdir", "/d", "--", "true", NULL);
}
END_TEST

/* Masked dirs keep their order and come after the target mount (a target
 * containing a masked dir must not unmask it) but before the single-path
 * binds, so a bind beneath a masked dir (the output dir under the state dir,
 * the socket under the runtime dir) stays visible. */
START_TEST(test_mask_before_binds) {
        launch_sandbox sb = full_sandbox();
        _cleanup_strv_free_ char **argv = NULL;
        ck_assert_int_eq(sandbox_build_argv("bwrap", "/repo", &sb, OVERLAY_METHOD_USERNS, -1, worker, &argv), 0);
        ssize_t last_tmpfs = -1, first_bind = -1, dashdash = -1, target = -1;
        for (size_t i = 0; argv[i]; i++) {
                if (streq(argv[i], "--tmpfs") && !streq(argv[i + 1], "/tmp")) last_tmpfs = (ssize_t) i;
                if (target < 0 && streq(argv[i], "--bind")) target = (ssize_t) i;
                else if (first_bind < 0 && streq(argv[i], "--bind")) first_bind = (ssize_t) i;
                if (dashdash < 0 && streq(argv[i], "--")) dashdash = (ssize_t) i;
                ck_assert_msg(!streq(argv[i], "--ro-bind-data"), "no prompt fd, no --ro-bind-data");
        }
        ck_assert_str_eq(argv[target + 1], "/repo");
        ck_assert_int_lt(target, last_tmpfs);
        ck_assert_int_gt(first_bind, last_tmpfs);
        ck_assert_int_gt(dashdash, first_bind);
        ck_assert_str_eq(argv[dashdash + 1], "sh");
}
END_TEST

static Suite *sandbox_suite(void) {
        Suite *s = suite_create("sandbox");
        TCase *tc = tcase_create("argv");
        tcase_add_test(tc, test_bwrap_overlay_method);
        tcase_add_test(tc, test_userns_overlay_method);
        tcase_add_test(tc, test_no_overlay_minimal);
        tcase_add_test(tc, test_unshared_net);
        tcase_add_test(tc, test_mask_before_binds);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        SRunner *sr = srunner_create(sandbox_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
