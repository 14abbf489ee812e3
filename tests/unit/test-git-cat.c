/* git-cat.h: blobs through one `git cat-file --batch`, against the real git.
 * Every blob read must be byte for byte what `git cat-file blob` prints,
 * whatever comes before or after it in the same process (the framing of
 * the batch output), and a refused request must leave the reader usable. */
#include <check.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "fs-util.h"
#include "git-cat.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"
#include "unit.h"

static char *root, *git_dir;
static char **env;

/* Store data as a blob; its oid. */
static char *blob_of(const void *data, size_t len) {
        char *path = strdup_printf("%s/data", root);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(loop_write(fd, data, len), 0);
        close(fd);
        char *oid = tf_sh(NULL, "GIT_DIR='%s' git hash-object -w --no-filters '%s'", git_dir, path);
        free(path);
        ck_assert_uint_eq(strlen(oid), 40);
        return oid;
}

static void setup(void) {
        root = tf_tmpdir_new("tf-git-cat");
        git_dir = strdup_printf("%s/git", root);
        free(tf_sh(NULL, "git init -q --bare '%s'", git_dir));
        env = NULL;
        ck_assert_int_eq(strv_pushf(&env, "PATH=%s", getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin"), 0);
        ck_assert_int_eq(strv_pushf(&env, "GIT_DIR=%s", git_dir), 0);
        ck_assert_int_eq(strv_push(&env, "GIT_CONFIG_NOSYSTEM=1"), 0);
        ck_assert_int_eq(strv_push(&env, "GIT_CONFIG_GLOBAL=/dev/null"), 0);
}

static void teardown(void) {
        root = tf_tmpdir_free(root);
        free(git_dir);
        strv_free(env);
}

START_TEST(test_blobs_in_sequence) {
        /* larger than the reader's buffer and a pipe's, with NULs and LFs at the edges */
        size_t big_len = 300000;
        char *big = malloc(big_len);
        for (size_t i = 0; i < big_len; i++) big[i] = (char) (i % 251 == 0 ? 0 : i % 7 == 0 ? '\n' : 'a' + i % 26);
        big[big_len - 1] = '\n';
        const struct { const char *data; size_t len; } blobs[] = {
                {"", 0}, {"hello\n", 6}, {big, big_len}, {"\n", 1}, {"no newline", 10}, {big, 65536},
        };
        char *oids[ELEMENTSOF(blobs)];
        for (size_t i = 0; i < ELEMENTSOF(blobs); i++) oids[i] = blob_of(blobs[i].data, blobs[i].len);
        git_cat *c = NULL;
        char *err = NULL;
        ck_assert_int_eq(git_cat_open(env, &c, &err), 0);
        /* twice over, to memory and to a file, alternating */
        for (int round = 0; round < 2; round++)
                for (size_t i = 0; i < ELEMENTSOF(blobs); i++) {
                        char *got = NULL;
                        size_t len = 0;
                        if ((i + (size_t) round) % 2 == 0) {
                                ck_assert_int_eq(git_cat_blob(c, oids[i], 0, &got, &len, &err), 0);
                        } else {
                                char *path = strdup_printf("%s/out", root);
                                int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                                ck_assert_int_ge(fd, 0);
                                ck_assert_int_eq(git_cat_blob_to_fd(c, oids[i], fd, 0, &err), 0);
                                close(fd);
                                ck_assert_int_eq(read_file(path, 1 << 20, &got, &len), 0);
                                free(path);
                        }
                        ck_assert_uint_eq(len, blobs[i].len);
                        ck_assert(memcmp(got, blobs[i].data, len) == 0);
                        free(got);
                }
        git_cat_close(c);
        for (size_t i = 0; i < ELEMENTSOF(blobs); i++) free(oids[i]);
        free(big);
}
END_TEST

START_TEST(test_refusals_keep_the_reader) {
        char *small = blob_of("small\n", 6), *large = blob_of("0123456789abcdef\n", 17);
        /* a tree (the empty one, written) is not a blob */
        char *tree = tf_sh(NULL, "GIT_DIR='%s' git mktree </dev/null", git_dir);
        git_cat *c = NULL;
        char *err = NULL, *got = NULL;
        size_t len = 0;
        ck_assert_int_eq(git_cat_open(env, &c, &err), 0);
        ck_assert_int_eq(git_cat_blob(c, "0123456789012345678901234567890123456789", 0, &got, &len, &err), -ENOENT);
        ck_assert_int_eq(git_cat_blob(c, tree, 0, &got, &len, &err), -EINVAL);
        ck_assert_int_eq(git_cat_blob(c, "HEAD", 0, &got, &len, &err), -EINVAL); /* names, not ids */
        ck_assert_int_eq(git_cat_blob(c, "abc\ndef", 0, &got, &len, &err), -EINVAL);
        ck_assert_int_eq(git_cat_blob(c, large, 16, &got, &len, &err), -EFBIG);
        ck_assert_int_eq(git_cat_blob(c, large, 17, &got, &len, &err), 0);
        ck_assert_str_eq(got, "0123456789abcdef\n");
        free(got);
        ck_assert_int_eq(git_cat_blob(c, small, 0, &got, &len, &err), 0);
        ck_assert_str_eq(got, "small\n");
        free(got);
        ck_assert_ptr_null(err);
        git_cat_close(c);
        free(small), free(large), free(tree);
}
END_TEST

START_TEST(test_git_failure_is_reported) {
        char *oid = blob_of("x\n", 2);
        char **bad = NULL;
        ck_assert_int_eq(strv_pushf(&bad, "PATH=%s", getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin"), 0);
        ck_assert_int_eq(strv_pushf(&bad, "GIT_DIR=%s/nowhere", root), 0);
        git_cat *c = NULL;
        char *err = NULL, *got = NULL;
        size_t len = 0;
        ck_assert_int_eq(git_cat_open(bad, &c, &err), 0);
        ck_assert_int_eq(git_cat_blob(c, oid, 0, &got, &len, &err), -EIO);
        ck_assert_ptr_nonnull(err);
        ck_assert_msg(strstr(err, "not a git repository"), "%s", err);
        free(err), err = NULL;
        /* unusable from then on, without hanging */
        ck_assert_int_eq(git_cat_blob(c, oid, 0, &got, &len, &err), -EIO);
        free(err);
        git_cat_close(c);
        strv_free(bad);
        free(oid);
}
END_TEST

TF_MAIN("git-cat", "core", setup, teardown, 120, test_blobs_in_sequence, test_refusals_keep_the_reader,
        test_git_failure_is_reported)
