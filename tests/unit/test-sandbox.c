/* sandbox_build_argv: the exact bwrap argument list for each overlay method
 * (sandbox.h), in its exact order. */

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "sandbox.h"
#include "strv.h"
#include "unit.h"

static sandbox_mount mounts[] = {
        {.op = SANDBOX_MOUNT_RO_BIND, .src = "/usr", .dest = "/usr"},
        {.op = SANDBOX_MOUNT_SYMLINK, .src = "usr/bin", .dest = "/bin"},
        {.op = SANDBOX_MOUNT_DIR, .dest = "/home/u"},
        {.op = SANDBOX_MOUNT_TARGET, .dest = "/repo"},
        {.op = SANDBOX_MOUNT_TMPFS, .dest = "/home/u/.ssh"},
        {.op = SANDBOX_MOUNT_MASK_FILE, .dest = "/home/u/.netrc"},
        {.op = SANDBOX_MOUNT_OVERLAY, .src = "/home/u/.config/opencode", .dest = "/home/u/.config/opencode",
         .upper = "/h/up", .work = "/h/wk", .stage = "/h/mnt"},
        {.op = SANDBOX_MOUNT_BIND, .src = "/state/outputs/oc_1", .dest = "/state/outputs/oc_1"},
};
static launch_overlay ov = {.lower = "/repo", .upper = "/ov/upper/main", .work = "/ov/work/main"};
static char *worker[] = {"sh", "/tmp/.taskferry-prompt", NULL};

static launch_sandbox full_sandbox(void) {
        return (launch_sandbox){
                .uid = 1000,
                .gid = 1001,
                .mounts = mounts,
                .n_mounts = ELEMENTSOF(mounts),
                .overlay = &ov,
                .share_net = true,
        };
}

/* bwrap mounts the overlays itself: --overlay-src for the target and the extra one. */
START_TEST(test_bwrap_overlay_method) {
        launch_sandbox sb = full_sandbox();
        _cleanup_strv_free_ char **argv = NULL;
        ck_assert_int_eq(sandbox_build_argv("/usr/bin/bwrap", "/repo", &sb, OVERLAY_METHOD_BWRAP, 7, worker, &argv), 0);
        tf_assert_argv(argv, "/usr/bin/bwrap", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind", "/usr",
                    "/usr", "--symlink", "usr/bin", "/bin", "--dir", "/home/u", "--overlay-src", "/repo", "--overlay",
                    "/ov/upper/main", "/ov/work/main", "/repo", "--tmpfs", "/home/u/.ssh", "--ro-bind", "/dev/null",
                    "/home/u/.netrc", "--overlay-src", "/home/u/.config/opencode", "--overlay", "/h/up", "/h/wk",
                    "/home/u/.config/opencode", "--bind", "/state/outputs/oc_1", "/state/outputs/oc_1",
                    "--ro-bind-data", "7", SANDBOX_PROMPT_PATH, "--remount-ro", "/", "--remount-ro", "/dev", "--unshare-all", "--unshare-user", "--disable-userns",
                    "--share-net", "--die-with-parent", "--cap-drop", "ALL", "--chdir", "/repo", "--", "sh",
                    "/tmp/.taskferry-prompt", NULL);
}
END_TEST

/* The shim mounted the overlays in its own user namespace: bwrap binds them
 * (the extra one from its stage dir) and restores our ids. */
START_TEST(test_userns_overlay_method) {
        launch_sandbox sb = full_sandbox();
        ck_assert(sandbox_needs_userns(&sb, OVERLAY_METHOD_USERNS));
        ck_assert(!sandbox_needs_userns(&sb, OVERLAY_METHOD_BWRAP));
        _cleanup_strv_free_ char **argv = NULL;
        ck_assert_int_eq(sandbox_build_argv("bwrap", "/repo", &sb, OVERLAY_METHOD_USERNS, 12, worker, &argv), 0);
        tf_assert_argv(argv, "bwrap", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind", "/usr", "/usr",
                    "--symlink", "usr/bin", "/bin", "--dir", "/home/u", "--bind", "/repo", "/repo", "--tmpfs",
                    "/home/u/.ssh", "--ro-bind", "/dev/null", "/home/u/.netrc", "--bind", "/h/mnt",
                    "/home/u/.config/opencode", "--bind", "/state/outputs/oc_1", "/state/outputs/oc_1",
                    "--ro-bind-data", "12", SANDBOX_PROMPT_PATH, "--remount-ro", "/", "--remount-ro", "/dev", "--unshare-all", "--unshare-user",
                    "--disable-userns", "--share-net", "--die-with-parent", "--cap-drop", "ALL", "--uid", "1000",
                    "--gid", "1001", "--chdir", "/repo", "--", "sh", "/tmp/.taskferry-prompt", NULL);
}
END_TEST

/* No overlay at all (--no-overlay, a shell task): a plain bind of the
 * target and no --uid/--gid whatever the probed method. */
START_TEST(test_no_overlay_minimal) {
        for (int m = 0; m < 2; m++) {
                sandbox_mount t[] = {{.op = SANDBOX_MOUNT_TARGET, .dest = "/w d"}};
                launch_sandbox sb = {.uid = 1000, .gid = 1000, .mounts = t, .n_mounts = 1, .share_net = true};
                ck_assert(!sandbox_needs_userns(&sb, m ? OVERLAY_METHOD_USERNS : OVERLAY_METHOD_BWRAP));
                _cleanup_strv_free_ char **argv = NULL;
                char *w[] = {"opencode", "run", NULL};
                ck_assert_int_eq(sandbox_build_argv("/b/bwrap", "/w d", &sb,
                                                    m ? OVERLAY_METHOD_USERNS : OVERLAY_METHOD_BWRAP, -1, w, &argv),
                                 0);
                tf_assert_argv(argv, "/b/bwrap", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", "/w d",
                            "/w d", "--remount-ro", "/", "--remount-ro", "/dev", "--unshare-all", "--unshare-user", "--disable-userns", "--share-net",
                            "--die-with-parent", "--cap-drop", "ALL", "--chdir", "/w d", "--", "opencode", "run", NULL);
        }
}
END_TEST

/* bwrap always keeps the network namespace it starts in: the shim made it
 * (proxy, none) or it is the host's (host); a shim that entered a user
 * namespace of its own only for the network maps the ids back */
START_TEST(test_unshared_net) {
        launch_sandbox sb = {.uid = 5, .gid = 6, .net = {.mode = NET_MODE_NONE}};
        _cleanup_strv_free_ char **argv = NULL;
        char *w[] = {"true", NULL};
        ck_assert_int_eq(sandbox_build_argv("bwrap", "/d", &sb, OVERLAY_METHOD_BWRAP, -1, w, &argv), 0);
        tf_assert_argv(argv, "bwrap", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--remount-ro", "/", "--remount-ro", "/dev", "--unshare-all",
                    "--unshare-user", "--disable-userns", "--share-net", "--die-with-parent", "--cap-drop", "ALL",
                    "--chdir", "/d", "--", "true", NULL);
        strv_free(argv);
        argv = NULL;
        sb.own_userns = true;
        ck_assert(sandbox_needs_userns(&sb, OVERLAY_METHOD_BWRAP));
        ck_assert_int_eq(sandbox_build_argv("bwrap", "/d", &sb, OVERLAY_METHOD_BWRAP, -1, w, &argv), 0);
        tf_assert_argv(argv, "bwrap", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--remount-ro", "/", "--remount-ro", "/dev", "--unshare-all",
                    "--unshare-user", "--disable-userns", "--share-net", "--die-with-parent", "--cap-drop", "ALL",
                    "--uid", "5", "--gid", "6", "--chdir", "/d", "--", "true", NULL);
}
END_TEST

/* With a tmpSize every tmpfs of the sandbox is sized: bwrap's --size comes
 * right before each --tmpfs, /tmp's and a masked dir's alike. */
START_TEST(test_sized_tmpfs) {
        sandbox_mount m[] = {{.op = SANDBOX_MOUNT_TMPFS, .dest = "/var/tmp"}, {.op = SANDBOX_MOUNT_TARGET, .dest = "/d"}};
        launch_sandbox sb = {.uid = 5, .gid = 6, .mounts = m, .n_mounts = 2, .share_net = true,
                             .net = {.mode = NET_MODE_HOST}, .tmp_size = 268435456};
        _cleanup_strv_free_ char **argv = NULL;
        char *w[] = {"true", NULL};
        ck_assert_int_eq(sandbox_build_argv("bwrap", "/d", &sb, OVERLAY_METHOD_BWRAP, -1, w, &argv), 0);
        tf_assert_argv(argv, "bwrap", "--proc", "/proc", "--dev", "/dev", "--size", "268435456", "--tmpfs", "/tmp",
                    "--size", "268435456", "--tmpfs", "/var/tmp", "--bind", "/d", "/d", "--remount-ro", "/", "--remount-ro", "/dev", "--unshare-all",
                    "--unshare-user", "--disable-userns", "--share-net", "--die-with-parent", "--cap-drop", "ALL",
                    "--chdir", "/d", "--", "true", NULL);
}
END_TEST

/* A mount missing the path its op needs is refused, not emitted half. */
START_TEST(test_every_op) {
        sandbox_mount bad[] = {{.op = SANDBOX_MOUNT_BIND, .dest = "/x"}};
        launch_sandbox sb = {.mounts = bad, .n_mounts = 1};
        char **argv = NULL;
        char *w[] = {"true", NULL};
        ck_assert_int_eq(sandbox_build_argv("bwrap", "/d", &sb, OVERLAY_METHOD_BWRAP, -1, w, &argv), -EINVAL);
        sandbox_mount ov_no_stage[] = {{.op = SANDBOX_MOUNT_OVERLAY, .src = "/l", .dest = "/x", .upper = "/u", .work = "/w"}};
        sb.mounts = ov_no_stage;
        ck_assert_int_eq(sandbox_build_argv("bwrap", "/d", &sb, OVERLAY_METHOD_USERNS, -1, w, &argv), -EINVAL);
        for (int op = 0; op < _SANDBOX_MOUNT_OP_MAX; op++) {
                const char *name = sandbox_mount_op_to_string((sandbox_mount_op) op);
                ck_assert_ptr_nonnull(name);
                ck_assert_int_eq(sandbox_mount_op_from_string(name), op);
        }
        ck_assert_int_eq(sandbox_mount_op_from_string("mount"), _SANDBOX_MOUNT_OP_INVALID);
}
END_TEST

/* An IPC namespace the shim made (its shared memory capped) is kept: every
 * namespace of --unshare-all but that one. */
START_TEST(test_own_ipc) {
        launch_sandbox sb = {.own_ipc = true};
        _cleanup_strv_free_ char **argv = NULL;
        char *w[] = {"true", NULL};
        ck_assert_int_eq(sandbox_build_argv("bwrap", "/d", &sb, OVERLAY_METHOD_BWRAP, -1, w, &argv), 0);
        tf_assert_argv(argv, "bwrap", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--remount-ro", "/",
                       "--remount-ro", "/dev", "--unshare-user", "--unshare-pid", "--unshare-uts",
                       "--unshare-cgroup-try", "--disable-userns", "--share-net", "--die-with-parent", "--cap-drop",
                       "ALL", "--chdir", "/d", "--", "true", NULL);
}
END_TEST

/* A system root is bound with bwrap's -try form: one removed after the plan
 * is left out of the sandbox instead of failing the launch; it needs its src. */
START_TEST(test_ro_bind_try) {
        sandbox_mount m[] = {{.op = SANDBOX_MOUNT_RO_BIND_TRY, .src = "/nix", .dest = "/nix"}};
        launch_sandbox sb = {.mounts = m, .n_mounts = 1};
        _cleanup_strv_free_ char **argv = NULL;
        char *w[] = {"true", NULL};
        ck_assert_int_eq(sandbox_build_argv("bwrap", "/d", &sb, OVERLAY_METHOD_BWRAP, -1, w, &argv), 0);
        tf_assert_argv(argv, "bwrap", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind-try", "/nix",
                       "/nix", "--remount-ro", "/", "--remount-ro", "/dev", "--unshare-all", "--unshare-user", "--disable-userns", "--share-net",
                       "--die-with-parent", "--cap-drop", "ALL", "--chdir", "/d", "--", "true", NULL);
        m[0].src = NULL;
        char **bad = NULL;
        ck_assert_int_eq(sandbox_build_argv("bwrap", "/d", &sb, OVERLAY_METHOD_BWRAP, -1, w, &bad), -EINVAL);
}
END_TEST

TF_MAIN("sandbox", "argv", NULL, NULL, 0, test_bwrap_overlay_method, test_userns_overlay_method,
        test_no_overlay_minimal, test_unshared_net, test_sized_tmpfs, test_every_op,
        test_ro_bind_try, test_own_ipc)
