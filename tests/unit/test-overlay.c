/* overlay.c: deciding the mount method from bwrap's --help (the pure check
 * and a real probe), the per-task overlay dirs (anti-plant creation, the
 * guarded removal), and, as root, a real overlayfs mount through libmount in
 * a child's own mount namespace; unprivileged, the user-namespace route. */

#include <check.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "macro.h"
#include "overlay.h"
#include "process-util.h"
#include "string-util.h"
#include "unit.h"

static char *dir;

static void setup(void) { dir = tf_tmpdir_new("overlay"); }
static void teardown(void) { dir = tf_tmpdir_free(dir); }

START_TEST(help_text_decides) {
        ck_assert(bwrap_help_has_overlay("  --overlay-src DEST    ..."));
        ck_assert(bwrap_help_has_overlay("usage\n--tmp-overlay\n--overlay-src SRC\n"));
        ck_assert(!bwrap_help_has_overlay("  --overlay DEST\n  --tmp-overlay\n"));
        ck_assert(!bwrap_help_has_overlay("--overlay-sr"));
        ck_assert(!bwrap_help_has_overlay(""));
        ck_assert(!bwrap_help_has_overlay(NULL));
}
END_TEST

START_TEST(probe_runs_the_binary) {
        /* fake bwraps: one listing the option on stderr, one without it */
        _cleanup_free_ char *yes = tf_put(dir, "yes-bwrap", "#!/bin/sh\necho '--overlay-src SRC' >&2\n", 40);
        _cleanup_free_ char *no = tf_put(dir, "no-bwrap", "#!/bin/sh\necho '--bind SRC DEST'\n", 33);
        ck_assert_int_eq(chmod(yes, 0700), 0);
        ck_assert_int_eq(chmod(no, 0700), 0);
        overlay_method m = (overlay_method) 99;
        ck_assert_int_eq(bwrap_probe_overlay(yes, &m), 0);
        ck_assert_int_eq(m, OVERLAY_METHOD_BWRAP);
        ck_assert_int_eq(bwrap_probe_overlay(no, &m), 0);
        ck_assert_int_eq(m, OVERLAY_METHOD_USERNS);
        m = (overlay_method) 99;
        _cleanup_free_ char *missing = tf_path(dir, "no-such-bwrap");
        ck_assert_int_eq(bwrap_probe_overlay(missing, &m), -ENOENT);
        ck_assert_int_eq(m, 99);
        /* the installed one decides one way or the other */
        if (access("/usr/bin/bwrap", X_OK) == 0) {
                ck_assert_int_eq(bwrap_probe_overlay("/usr/bin/bwrap", &m), 0);
                ck_assert(m == OVERLAY_METHOD_BWRAP || m == OVERLAY_METHOD_USERNS);
        }
}
END_TEST

static mode_t mode_of(const char *p) {
        struct stat st;
        ck_assert_int_eq(lstat(p, &st), 0);
        ck_assert(S_ISDIR(st.st_mode));
        return st.st_mode & 07777;
}

START_TEST(dirs_create) {
        _cleanup_free_ char *tmp = tf_path(dir, "a/tmproot"), *root = tf_path(dir, "a/tmproot/taskferry-cow-1");
        ck_assert_int_eq(overlay_dirs_create(tmp, root), 0);
        ck_assert_uint_eq(mode_of(tmp), 0700);
        ck_assert_uint_eq(mode_of(root), 0700);
        const char *subs[] = {"upper", "upper/main", "work", "work/main"};
        for (size_t i = 0; i < ELEMENTSOF(subs); i++) {
                _cleanup_free_ char *p = tf_path(root, subs[i]);
                ck_assert_uint_eq(mode_of(p), 0700);
        }
        /* a root that exists already is refused: nothing planted is used */
        ck_assert_int_eq(overlay_dirs_create(tmp, root), -EEXIST);
        _cleanup_free_ char *planted = tf_path(dir, "a/tmproot/taskferry-cow-2");
        tf_symlink(dir, "a", "a/tmproot/taskferry-cow-2");
        ck_assert_int_eq(overlay_dirs_create(tmp, planted), -EEXIST);
        /* a root whose parent is not tmp_root's existing tree: mkdir is not recursive */
        _cleanup_free_ char *deep = tf_path(dir, "a/tmproot/x/taskferry-cow-3");
        ck_assert_int_eq(overlay_dirs_create(tmp, deep), -ENOENT);
        /* a tmp_root that is a file */
        _cleanup_free_ char *f = tf_put(dir, "file", "x", 1), *under = tf_path(dir, "file/taskferry-cow-4");
        ck_assert_int_eq(overlay_dirs_create(f, under), -ENOTDIR);
}
END_TEST

START_TEST(dirs_remove_guards) {
        _cleanup_free_ char *tmp = tf_path(dir, "tmproot"), *root = tf_path(dir, "tmproot/taskferry-cow-1");
        ck_assert_int_eq(overlay_dirs_create(tmp, root), 0);
        const char *refused[] = {
                "tmproot",                            /* tmp_root itself */
                "tmproot/other-1",                    /* not ours by name */
                "tmproot/taskferry-cow-1/upper",      /* below a root */
                "tmproot/../tmproot/taskferry-cow-1", /* .. */
                "tmproot/taskferry-cow-..",
                "tmprootX/taskferry-cow-1",           /* a sibling sharing the prefix */
                "elsewhere/taskferry-cow-1",
        };
        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                _cleanup_free_ char *p = tf_path(dir, refused[i]);
                ck_assert_msg(overlay_dirs_remove(tmp, p, NULL) == -EPERM, "%s", refused[i]);
        }
        ck_assert(is_dir(root));
        ck_assert_int_eq(overlay_dirs_remove(tmp, "relative/taskferry-cow-1", NULL), -EPERM);
        /* a trailing slash on tmp_root is the same root; a mode-000 work dir goes too */
        _cleanup_free_ char *work = tf_path(root, "work/main"), *slashed = strdup_printf("%s//", tmp);
        ck_assert_int_eq(chmod(work, 0), 0);
        /* another task's overlay is not this one's to remove */
        ck_assert_int_eq(overlay_dirs_remove(tmp, root, "2"), -EPERM);
        ck_assert_int_eq(overlay_dirs_remove(tmp, root, "1x"), -EPERM);
        ck_assert_int_eq(overlay_dirs_remove(tmp, root, ""), -EPERM);
        ck_assert(is_dir(root));
        ck_assert_int_eq(overlay_dirs_remove(slashed, root, "1"), 0);
        ck_assert(!is_dir(root));
        ck_assert(is_dir(tmp));
        /* already gone: success */
        ck_assert_int_eq(overlay_dirs_remove(tmp, root, NULL), 0);
}
END_TEST

START_TEST(mount_refuses_missing_dirs) {
        tf_mkdirs(dir, "l");
        tf_mkdirs(dir, "u");
        tf_mkdirs(dir, "w");
        tf_mkdirs(dir, "t");
        _cleanup_free_ char *l = tf_path(dir, "l"), *u = tf_path(dir, "u"), *w = tf_path(dir, "w"),
                            *t = tf_path(dir, "t"), *m = tf_path(dir, "missing");
        _cleanup_free_ char *f = tf_put(dir, "f", "x", 1);
        const struct {
                const char *lower, *upper, *work;
                int want;
        } rows[] = {{m, u, w, -ENOENT}, {l, m, w, -ENOENT}, {l, u, m, -ENOENT}, {f, u, w, -ENOTDIR}};
        for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
                char *err = NULL;
                ck_assert_int_eq(overlay_mount(rows[i].lower, rows[i].upper, rows[i].work, t, false, &err), rows[i].want);
                /* the sentence for the user, set with every failure */
                _cleanup_free_ char *want = strdup_printf("overlay mount on %s failed: %s", t, strerror(-rows[i].want));
                ck_assert_str_eq(strempty(err), want);
                free(err);
                ck_assert_int_eq(overlay_mount(rows[i].lower, rows[i].upper, rows[i].work, t, false, NULL), rows[i].want);
        }
}
END_TEST

/* In a child with its own mount namespace (userns: a user namespace too),
 * mount lower/upper/work on target, write through it and check where the
 * write landed; exits 0 when all holds, 77 when the kernel refuses the
 * namespace. */
static void mount_and_write(bool userns) {
        tf_mkdirs(dir, "lower");
        _cleanup_free_ char *keep = tf_put(dir, "lower/kept", "lower", 5);
        _cleanup_free_ char *tmp = tf_path(dir, "tmp"), *root = tf_path(dir, "tmp/taskferry-cow-m");
        ck_assert_int_eq(overlay_dirs_create(tmp, root), 0);
        tf_mkdirs(dir, "target,with:odd\\chars");
        _cleanup_free_ char *lower = tf_path(dir, "lower"), *upper = tf_path(root, "upper/main"),
                            *work = tf_path(root, "work/main"), *target = tf_path(dir, "target,with:odd\\chars");
        uid_t uid = getuid();
        gid_t gid = getgid();
        pid_t pid;
        int r = safe_fork("overlay-test", FORK_DEATHSIG_SIGKILL, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                if (userns) {
                        if (userns_enter_as_root(uid, gid) < 0) _exit(77);
                } else if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                        _exit(77);
                char *err = NULL;
                if (overlay_mount(lower, upper, work, target, userns, &err) < 0) {
                        fprintf(stderr, "%s\n", err ? err : "overlay_mount failed");
                        _exit(userns ? 77 : 1);
                }
                _cleanup_free_ char *seen = strdup_printf("%s/kept", target), *w = strdup_printf("%s/new", target);
                char *data = tf_read_file(seen, false);
                if (strcmp(data, "lower") != 0) _exit(2);
                free(data);
                tf_write_file(w, "upper", 5, 0600);
                _exit(0);
        }
        int code = wait_for_terminate_and_check("overlay-test", pid, 0);
        if (code == 77) {
                fprintf(stderr, "%s: skipped: the kernel refused the namespace\n", __func__);
                return;
        }
        ck_assert_int_eq(code, 0);
        /* the write is in upper, lower is untouched, the target was never changed outside */
        _cleanup_free_ char *in_upper = tf_path(upper, "new"), *in_lower = tf_path(lower, "new"),
                            *in_target = tf_path(target, "new");
        _cleanup_free_ char *u = tf_read_file(in_upper, false);
        ck_assert_str_eq(u, "upper");
        ck_assert_int_eq(access(in_lower, F_OK), -1);
        ck_assert_int_eq(access(in_target, F_OK), -1);
        ck_assert_int_eq(overlay_dirs_remove(tmp, root, NULL), 0);
}

START_TEST(mount_as_root) {
        TF_ROOT_OR_SKIP("mounting overlayfs in the init user namespace needs root");
        mount_and_write(false);
}
END_TEST

START_TEST(mount_in_user_namespace) {
        if (geteuid() == 0) {
                fprintf(stderr, "%s: skipped: the user-namespace route is the unprivileged one\n", __func__);
                return;
        }
        mount_and_write(true);
}
END_TEST

TF_MAIN("overlay", "overlay", setup, teardown, 30, help_text_decides, probe_runs_the_binary, dirs_create,
        dirs_remove_guards, mount_refuses_missing_dirs, mount_as_root, mount_in_user_namespace)
