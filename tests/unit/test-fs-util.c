/* fs-util.c: mkdir -p (modes, trailing slashes, a file in the way), the
 * chmod that follows it, rm_rf (mode-000 dirs, symlinks removed never
 * followed, a missing path, errors), is_dir. */

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "macro.h"
#include "unit.h"

static char *dir;

static void setup(void) { dir = tf_tmpdir_new("fs-util"); }
static void teardown(void) { dir = tf_tmpdir_free(dir); }

static mode_t mode_of(const char *p) {
        struct stat st;
        ck_assert_int_eq(lstat(p, &st), 0);
        return st.st_mode & 07777;
}

START_TEST(mkdir_p_makes_every_component) {
        _cleanup_free_ char *p = tf_path(dir, "a/b/c"), *a = tf_path(dir, "a");
        mode_t old = umask(0022);
        ck_assert_int_eq(mkdir_p(p, 0775), 0);
        umask(old);
        ck_assert(is_dir(p));
        ck_assert_uint_eq(mode_of(a), 0755); /* as the umask lets it */
        ck_assert_uint_eq(mode_of(p), 0755);
        /* existing: fine; trailing slashes and // inside too */
        ck_assert_int_eq(mkdir_p(p, 0700), 0);
        _cleanup_free_ char *slashes = tf_path(dir, "a//b/c/d///");
        ck_assert_int_eq(mkdir_p(slashes, 0700), 0);
        _cleanup_free_ char *d = tf_path(dir, "a/b/c/d");
        ck_assert(is_dir(d));
        /* .. is walked as the kernel walks it */
        _cleanup_free_ char *dots = tf_path(dir, "a/../e/f");
        ck_assert_int_eq(mkdir_p(dots, 0700), 0);
        _cleanup_free_ char *ef = tf_path(dir, "e/f");
        ck_assert(is_dir(ef));
        ck_assert_int_eq(mkdir_p("/", 0700), 0);
}
END_TEST

START_TEST(mkdir_p_refuses_what_is_in_the_way) {
        _cleanup_free_ char *f = tf_put(dir, "file", "x", 1);
        ck_assert_int_eq(mkdir_p(f, 0700), -ENOTDIR);
        _cleanup_free_ char *below = tf_path(dir, "file/sub/x");
        ck_assert_int_eq(mkdir_p(below, 0700), -ENOTDIR);
        /* a dangling symlink is no directory */
        tf_symlink(dir, "nowhere", "dangling");
        _cleanup_free_ char *dl = tf_path(dir, "dangling");
        ck_assert_int_eq(mkdir_p(dl, 0700), -ENOTDIR);
        /* a symlink to a dir counts as the dir */
        tf_mkdirs(dir, "real");
        tf_symlink(dir, "real", "tolink");
        _cleanup_free_ char *via = tf_path(dir, "tolink/new");
        ck_assert_int_eq(mkdir_p(via, 0700), 0);
        _cleanup_free_ char *real_new = tf_path(dir, "real/new");
        ck_assert(is_dir(real_new));
        ck_assert_int_eq(mkdir_p("", 0700), -ENOENT);
}
END_TEST

START_TEST(mkdir_p_chmod_sets_the_last_component) {
        _cleanup_free_ char *p = tf_path(dir, "x/y"), *x = tf_path(dir, "x");
        mode_t old = umask(0077);
        ck_assert_int_eq(mkdir_p_chmod(p, 0751), 0);
        umask(old);
        ck_assert_uint_eq(mode_of(p), 0751);
        ck_assert_uint_eq(mode_of(x), 0700); /* the others as the umask lets them */
        /* an existing dir is chmod'ed too */
        ck_assert_int_eq(chmod(p, 0700), 0);
        ck_assert_int_eq(mkdir_p_chmod(p, 0705), 0);
        ck_assert_uint_eq(mode_of(p), 0705);
        _cleanup_free_ char *f = tf_put(dir, "f", "", 0);
        ck_assert_int_eq(mkdir_p_chmod(f, 0700), -ENOTDIR);
}
END_TEST

START_TEST(rm_rf_removes_everything_below) {
        tf_mkdirs(dir, "t/a/b/c");
        _cleanup_free_ char *f1 = tf_put(dir, "t/a/f", "1", 1), *f2 = tf_put(dir, "t/a/b/c/g", "2", 1);
        /* mode 000 dirs, as overlayfs leaves its work dir, and a read-only one */
        _cleanup_free_ char *c = tf_path(dir, "t/a/b/c"), *b = tf_path(dir, "t/a/b"), *t = tf_path(dir, "t");
        ck_assert_int_eq(chmod(c, 0), 0);
        ck_assert_int_eq(chmod(b, 0500), 0);
        ck_assert_int_eq(rm_rf(t), 0);
        ck_assert_int_eq(access(t, F_OK), -1);
        ck_assert_int_eq(errno, ENOENT);
        /* missing: success; a plain file: removed */
        ck_assert_int_eq(rm_rf(t), 0);
        _cleanup_free_ char *f = tf_put(dir, "single", "s", 1);
        ck_assert_int_eq(rm_rf(f), 0);
        ck_assert_int_eq(access(f, F_OK), -1);
}
END_TEST

START_TEST(rm_rf_never_follows_symlinks) {
        tf_mkdirs(dir, "precious/sub");
        _cleanup_free_ char *keep = tf_put(dir, "precious/sub/keep", "k", 1);
        tf_mkdirs(dir, "victim");
        tf_symlink(dir, "precious", "victim/link");
        tf_symlink(dir, "precious/sub/keep", "victim/filelink");
        _cleanup_free_ char *victim = tf_path(dir, "victim");
        ck_assert_int_eq(rm_rf(victim), 0);
        ck_assert_int_eq(access(victim, F_OK), -1);
        ck_assert_int_eq(access(keep, F_OK), 0);
        /* a symlink given as the path itself: the link goes, its target stays */
        tf_symlink(dir, "precious", "toplink");
        _cleanup_free_ char *top = tf_path(dir, "toplink"), *precious = tf_path(dir, "precious");
        ck_assert_int_eq(rm_rf(top), 0);
        struct stat st;
        ck_assert_int_eq(lstat(top, &st), -1);
        ck_assert(is_dir(precious));
        ck_assert_int_eq(access(keep, F_OK), 0);
}
END_TEST

START_TEST(is_dir_follows_symlinks) {
        tf_mkdirs(dir, "d");
        _cleanup_free_ char *d = tf_path(dir, "d"), *f = tf_put(dir, "f", "", 0), *l = tf_path(dir, "l"),
                            *m = tf_path(dir, "missing"), *dl = tf_path(dir, "dl");
        tf_symlink(dir, "d", "l");
        tf_symlink(dir, "gone", "dl");
        ck_assert(is_dir(d));
        ck_assert(is_dir(l));
        ck_assert(!is_dir(f));
        ck_assert(!is_dir(m));
        ck_assert(!is_dir(dl));
        ck_assert(!is_dir(""));
        ck_assert(is_dir("/"));
}
END_TEST

TF_MAIN("fs-util", "fs-util", setup, teardown, 0, mkdir_p_makes_every_component, mkdir_p_refuses_what_is_in_the_way,
        mkdir_p_chmod_sets_the_last_component, rm_rf_removes_everything_below, rm_rf_never_follows_symlinks,
        is_dir_follows_symlinks)
