/* path-util.h: path_parent (the one dirname of src/shared), the at-or-below
 * tests, and find_executable's PATH walk. */

#include <check.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
#include "path-util.h"
#include "string-util.h"
#include "unit.h"

static void assert_parent(const char *p, const char *want) {
        _cleanup_free_ char *d = path_parent(p);
        ck_assert_ptr_nonnull(d);
        ck_assert_str_eq(d, want);
}

START_TEST(parent) {
        assert_parent("/a/b/c", "/a/b");
        assert_parent("/a/b", "/a");
        assert_parent("/a", "/");
        assert_parent("/", "/");
        assert_parent("a/b", "a");
        assert_parent("a", "a");   /* no slash: as is */
        assert_parent("/a/b/", "/a/b"); /* a trailing slash is not stripped first */
}
END_TEST

START_TEST(at_or_below) {
        ck_assert(path_is_at_or_below("/a", "/a"));
        ck_assert(path_is_at_or_below("/a/b", "/a"));
        ck_assert(!path_is_at_or_below("/ab", "/a"));
        ck_assert(!path_is_at_or_below("/a", "/a/b"));
        ck_assert(path_is_at_or_below("/anything", "/"));
        ck_assert(paths_overlap("/a", "/a/b"));
        ck_assert(paths_overlap("/a/b", "/a"));
        ck_assert(!paths_overlap("/a/b", "/a/c"));
}
END_TEST

START_TEST(executable) {
        char *dir = tf_tmpdir_new("test-path-util");
        _cleanup_free_ char *bin = strdup_printf("%s/bin", dir), *exe = strdup_printf("%s/bin/tool", dir),
                            *plain = strdup_printf("%s/bin/data", dir), *sub = strdup_printf("%s/bin/sub", dir);
        ck_assert_int_eq(mkdir_p(sub, 0755), 0);
        ck_assert_int_eq(write_file_atomic(exe, "#!/bin/sh\n", 10, 0755), 0);
        ck_assert_int_eq(write_file_atomic(plain, "x", 1, 0644), 0);
        _cleanup_free_ char *path_env = strdup_printf("/nonexistent::%s", bin);

        char *r = NULL;
        ck_assert_int_eq(find_executable("tool", path_env, &r), 0);
        ck_assert_str_eq(r, exe);
        free(r);
        r = NULL;
        /* not executable, a directory, or nowhere: -ENOENT */
        ck_assert_int_eq(find_executable("data", path_env, &r), -ENOENT);
        ck_assert_int_eq(find_executable("sub", path_env, &r), -ENOENT);
        ck_assert_int_eq(find_executable("missing", path_env, &r), -ENOENT);
        /* a name with a slash is taken as is */
        ck_assert_int_eq(find_executable(exe, "/nonexistent", &r), 0);
        ck_assert_str_eq(r, exe);
        free(r);
        r = NULL;
        if (geteuid() != 0) ck_assert_int_eq(find_executable(plain, NULL, &r), -EACCES);
        ck_assert_ptr_null(r);
        tf_tmpdir_free(dir);
}
END_TEST

TF_MAIN("path-util", "path-util", NULL, NULL, 0, parent, at_or_below, executable)
