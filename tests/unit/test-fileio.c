/* fileio.c: loop_write, the atomic replace (temp file name, mode past the
 * umask, no temp file left on failure, symlinks replaced rather than
 * followed), and read_fd/read_file's limit (-EFBIG), NUL bytes and -errno. */

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "string-util.h"
#include "unit.h"

static char *dir;

static void setup(void) { dir = tf_tmpdir_new("fileio"); }
static void teardown(void) { dir = tf_tmpdir_free(dir); }

/* entries of dir but . and .. */
static size_t entries(const char *d) {
        DIR *dd = opendir(d);
        ck_assert_ptr_nonnull(dd);
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(dd)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
        closedir(dd);
        return n;
}

START_TEST(atomic_write_creates_and_replaces) {
        _cleanup_free_ char *p = tf_path(dir, "f.json");
        ck_assert_int_eq(write_file_atomic(p, "one", 3, 0600), 0);
        _cleanup_free_ char *a = tf_read_file(p, false);
        ck_assert_str_eq(a, "one");
        struct stat st;
        ck_assert_int_eq(stat(p, &st), 0);
        ino_t first = st.st_ino;
        /* mode is applied past the umask */
        mode_t old = umask(0077);
        ck_assert_int_eq(write_file_atomic(p, "a\0b", 3, 0644), 0);
        umask(old);
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0644);
        ck_assert_uint_eq(st.st_size, 3);
        ck_assert_uint_ne(st.st_ino, first); /* a new inode renamed over it */
        char *data = NULL;
        size_t len = 0;
        ck_assert_int_eq(read_file(p, 100, &data, &len), 0);
        ck_assert_uint_eq(len, 3);
        ck_assert_mem_eq(data, "a\0b", 3);
        free(data);
        /* an empty file too; and no temp file left behind */
        ck_assert_int_eq(write_file_atomic(p, "", 0, 0600), 0);
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_uint_eq(st.st_size, 0);
        ck_assert_uint_eq(entries(dir), 1);
}
END_TEST

START_TEST(atomic_write_replaces_a_symlink_not_its_target) {
        _cleanup_free_ char *target = tf_put(dir, "target", "keep", 4);
        tf_symlink(dir, "target", "link");
        _cleanup_free_ char *link = tf_path(dir, "link");
        ck_assert_int_eq(write_file_atomic(link, "new", 3, 0600), 0);
        _cleanup_free_ char *t = tf_read_file(target, false), *l = tf_read_file(link, false);
        ck_assert_str_eq(t, "keep");
        ck_assert_str_eq(l, "new");
        struct stat st;
        ck_assert_int_eq(lstat(link, &st), 0);
        ck_assert(S_ISREG(st.st_mode));
}
END_TEST

START_TEST(atomic_write_errors) {
        /* a missing directory: -ENOENT */
        _cleanup_free_ char *missing = tf_path(dir, "no/such/f");
        ck_assert_int_eq(write_file_atomic(missing, "x", 1, 0600), -ENOENT);
        /* renaming over a directory fails and removes the temp file */
        tf_mkdirs(dir, "d/inner");
        _cleanup_free_ char *d = tf_path(dir, "d");
        ck_assert_int_lt(write_file_atomic(d, "x", 1, 0600), 0);
        ck_assert_uint_eq(entries(dir), 1);
        ck_assert(access(d, F_OK) == 0);
        /* a path through a file: -ENOTDIR */
        _cleanup_free_ char *f = tf_put(dir, "plain", "p", 1);
        _cleanup_free_ char *under = tf_path(dir, "plain/x");
        ck_assert_int_eq(write_file_atomic(under, "x", 1, 0600), -ENOTDIR);
}
END_TEST

START_TEST(atomic_write_bare_name) {
        /* a name without '/' is in the working directory */
        _cleanup_close_ int cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(cwd, 0);
        ck_assert_int_eq(chdir(dir), 0);
        int r = write_file_atomic("bare", "b", 1, 0600);
        ck_assert_int_eq(fchdir(cwd), 0);
        ck_assert_int_eq(r, 0);
        _cleanup_free_ char *p = tf_path(dir, "bare");
        _cleanup_free_ char *c = tf_read_file(p, false);
        ck_assert_str_eq(c, "b");
}
END_TEST

START_TEST(read_limits) {
        /* sizes around the first buffer (4096) and a limit on either side */
        const size_t sizes[] = {0, 1, 4095, 4096, 4097, 100000};
        for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
                size_t n = sizes[i];
                char *buf = malloc(n + 1);
                for (size_t k = 0; k < n; k++) buf[k] = (char) ('a' + k % 26);
                _cleanup_free_ char *p = tf_put(dir, "sized", buf, n);
                char *data = NULL;
                size_t len = 7;
                ck_assert_int_eq(read_file(p, n, &data, &len), 0);
                ck_assert_uint_eq(len, n);
                ck_assert_mem_eq(data, buf, n);
                ck_assert_int_eq(data[n], 0);
                free(data);
                data = NULL;
                ck_assert_int_eq(read_file(p, n + 1000000, &data, NULL), 0);
                free(data);
                if (n > 0) {
                        data = (char *) 0x1;
                        ck_assert_int_eq(read_file(p, n - 1, &data, &len), -EFBIG);
                        ck_assert_ptr_eq(data, (char *) 0x1); /* untouched */
                }
                free(buf);
        }
}
END_TEST

START_TEST(read_without_a_limit) {
        /* SIZE_MAX, "no limit": max + 1 must not wrap to 0 */
        char big[10000];
        memset(big, 'q', sizeof big);
        _cleanup_free_ char *p = tf_put(dir, "big", big, sizeof big);
        char *data = NULL;
        size_t len = 0;
        ck_assert_int_eq(read_file(p, SIZE_MAX, &data, &len), 0);
        ck_assert_uint_eq(len, sizeof big);
        free(data);
        ck_assert_int_eq(read_file(p, SIZE_MAX - 1, &data, &len), 0);
        free(data);
}
END_TEST

START_TEST(read_fd_from_offset_and_pipe) {
        _cleanup_free_ char *p = tf_put(dir, "off", "0123456789", 10);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(lseek(fd, 4, SEEK_SET), 0);
        char *data = NULL;
        size_t len = 0;
        ck_assert_int_eq(read_fd(fd, 100, &data, &len), 0);
        ck_assert_str_eq(data, "456789");
        free(data);
        /* a pipe, written in pieces by loop_write */
        int pfd[2];
        ck_assert_int_eq(pipe(pfd), 0);
        ck_assert_int_eq(loop_write(pfd[1], "abc", 3), 0);
        ck_assert_int_eq(loop_write(pfd[1], "", 0), 0);
        ck_assert_int_eq(loop_write(pfd[1], "\0z", 2), 0);
        close(pfd[1]);
        ck_assert_int_eq(read_fd(pfd[0], 5, &data, &len), 0);
        ck_assert_uint_eq(len, 5);
        ck_assert_mem_eq(data, "abc\0z", 5);
        free(data);
        close(pfd[0]);
}
END_TEST

START_TEST(errors_are_errno) {
        char *data = NULL;
        _cleanup_free_ char *missing = tf_path(dir, "missing");
        ck_assert_int_eq(read_file(missing, 10, &data, NULL), -ENOENT);
        ck_assert_int_eq(read_file(dir, 10, &data, NULL), -EISDIR);
        _cleanup_free_ char *f = tf_put(dir, "f", "x", 1);
        _cleanup_free_ char *through = tf_path(dir, "f/x");
        ck_assert_int_eq(read_file(through, 10, &data, NULL), -ENOTDIR);
        ck_assert_int_eq(read_fd(-1, 10, &data, NULL), -EBADF);
        ck_assert_int_eq(loop_write(-1, "x", 1), -EBADF);
        /* writing into a pipe nobody reads: -EPIPE (SIGPIPE ignored here) */
        int pfd[2];
        ck_assert_int_eq(pipe(pfd), 0);
        close(pfd[0]);
        signal(SIGPIPE, SIG_IGN);
        ck_assert_int_eq(loop_write(pfd[1], "x", 1), -EPIPE);
        close(pfd[1]);
        ck_assert_ptr_null(data);
}
END_TEST

TF_MAIN("fileio", "fileio", setup, teardown, 0, atomic_write_creates_and_replaces,
        atomic_write_replaces_a_symlink_not_its_target, atomic_write_errors, atomic_write_bare_name, read_limits, read_without_a_limit,
        read_fd_from_offset_and_pipe, errors_are_errno)
