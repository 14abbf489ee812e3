/* The disk budget (disk-budget.h; the suite is test-disk-usage because
 * integration/test-disk-budget holds the name): the size parser, the default and floor
 * rules, and the tree walker the shim's disk watch measures with, on real
 * files (sparse, dense, symlinks, deep nesting) under $TASKFERRY_TEST_TMPDIR. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk-budget.h"
#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
#include "string-util.h"
#include "unit.h"

START_TEST(test_size_parse) {
        static const struct {
                const char *in;
                uint64_t want;
        } ok[] = {
                {"1", 1},
                {"4096", 4096},
                {"50M", 50ULL << 20},
                {"50m", 50ULL << 20},
                {"50MiB", 50ULL << 20},
                {"50MB", 50ULL << 20},
                {"8G", 8ULL << 30},
                {"1k", 1024},
                {"2T", 2ULL << 40},
                {"100B", 100},
                {"007", 7},
                {"9007199254740991", 9007199254740991ULL},
                {"8191T", 8191ULL << 40},
        };
        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                uint64_t v = 0;
                ck_assert_msg(disk_size_parse(ok[i].in, &v) == 0, "refused %s", ok[i].in);
                ck_assert_msg(v == ok[i].want, "%s parsed as %llu", ok[i].in, (unsigned long long) v);
        }
        static const struct {
                const char *in;
                int err;
        } bad[] = {
                {"", -EINVAL},       {"M", -EINVAL},      {"-1", -EINVAL},    {"+5", -EINVAL},
                {"1.5G", -EINVAL},   {" 5M", -EINVAL},    {"5M ", -EINVAL},   {"5 M", -EINVAL},
                {"5X", -EINVAL},     {"5Mi", -EINVAL},    {"5iB", -EINVAL},   {"5MM", -EINVAL},
                {"0x10", -EINVAL},   {"1e6", -EINVAL},    {"0", -ERANGE},     {"0G", -ERANGE},
                {"9007199254740992", -ERANGE},            {"8192T", -ERANGE},
                {"99999999999999999999999", -ERANGE},
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                uint64_t v = 12345;
                int r = disk_size_parse(bad[i].in, &v);
                ck_assert_msg(r == bad[i].err, "\"%s\": got %d, want %d", bad[i].in, r, bad[i].err);
                ck_assert_uint_eq(v, 12345);
        }
        ck_assert_int_eq(disk_size_parse(NULL, &(uint64_t) {0}), -EINVAL);
}
END_TEST

START_TEST(test_size_format) {
        char b[32];
        ck_assert_str_eq(disk_size_format(0, b), "0 B");
        ck_assert_str_eq(disk_size_format(1023, b), "1023 B");
        ck_assert_str_eq(disk_size_format(1024, b), "1.0 KiB");
        ck_assert_str_eq(disk_size_format(50ULL << 20, b), "50.0 MiB");
        ck_assert_str_eq(disk_size_format(8ULL << 30, b), "8.0 GiB");
        ck_assert_str_eq(disk_size_format(3ULL << 39, b), "1.5 TiB");
}
END_TEST

START_TEST(test_rules) {
        /* budget: min(10 GiB, fs/4), at least 1 MiB; unknown fs → 10 GiB */
        ck_assert_uint_eq(disk_budget_default(0), 10ULL << 30);
        ck_assert_uint_eq(disk_budget_default(1ULL << 40), 10ULL << 30);
        ck_assert_uint_eq(disk_budget_default(64ULL << 20), 16ULL << 20);
        ck_assert_uint_eq(disk_budget_default(40ULL << 30), 10ULL << 30);
        ck_assert_uint_eq(disk_budget_default(2ULL << 20), 1ULL << 20);
        /* floor: min(256 MiB, 5%) */
        ck_assert_uint_eq(disk_floor_bytes(1ULL << 40), 256ULL << 20);
        ck_assert_uint_eq(disk_floor_bytes(100ULL << 20), 5ULL << 20);
        ck_assert_uint_eq(disk_floor_bytes(0), 0);
        ck_assert_uint_eq(disk_floor_inodes(0), 0);
        ck_assert_uint_eq(disk_floor_inodes(1000), 50);
        ck_assert_uint_eq(disk_floor_inodes(100000000), 10000);
        disk_fs_info fs = {.size = 100ULL << 20, .avail = 6ULL << 20};
        ck_assert(!disk_fs_below_floor(&fs));
        fs.avail = 4ULL << 20;
        ck_assert(disk_fs_below_floor(&fs));
        fs = (disk_fs_info) {.size = 100ULL << 20, .avail = 50ULL << 20, .inodes = 1000, .inodes_avail = 49};
        ck_assert(disk_fs_below_floor(&fs));
        fs.inodes_avail = 51;
        ck_assert(!disk_fs_below_floor(&fs));
        /* a real filesystem answers */
        ck_assert_int_eq(disk_fs_stat("/", &fs), 0);
        ck_assert_uint_gt(fs.size, 0);
        ck_assert_int_eq(disk_fs_stat("/nonexistent/taskferry", &fs), -ENOENT);
}
END_TEST

static void write_bytes(const char *path, size_t n) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        char buf[4096];
        memset(buf, 'x', sizeof buf);
        for (size_t done = 0; done < n;) {
                size_t k = n - done < sizeof buf ? n - done : sizeof buf;
                ck_assert_int_eq(loop_write(fd, buf, k), 0);
                done += k;
        }
        ck_assert_int_eq(fsync(fd), 0);
        close(fd);
}

static uint64_t walk(const char *path) {
        disk_usage u = {0};
        ck_assert_int_eq(disk_usage_walk(path, 0, &u), 0);
        return u.bytes;
}

START_TEST(test_walk_counts) {
        char *t = tf_tmpdir_new("tf-disk-budget");
        uint64_t empty = walk(t);
        ck_assert_uint_lt(empty, 1 << 16); /* only the directory itself */
        /* a dense 1 MiB file counts at least its size */
        _cleanup_free_ char *a = strdup_printf("%s/a", t);
        write_bytes(a, 1 << 20);
        uint64_t one = walk(t);
        ck_assert_uint_ge(one, empty + (1 << 20));
        ck_assert_uint_lt(one, empty + (1 << 20) + (1 << 16));
        /* a sparse 8 GiB file counts its apparent size, though it holds no blocks */
        _cleanup_free_ char *sp = strdup_printf("%s/sub/deeper", t);
        ck_assert_int_eq(mkdir_p(sp, 0700), 0);
        _cleanup_free_ char *big = strdup_printf("%s/big.bin", sp);
        int fd = open(big, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, (off_t) 8 << 30), 0);
        close(fd);
        struct stat st;
        ck_assert_int_eq(stat(big, &st), 0);
        ck_assert_int_lt((long long) st.st_blocks * 512, 1 << 20); /* really sparse */
        uint64_t with_sparse = walk(t);
        ck_assert_uint_ge(with_sparse, one + (8ULL << 30));
        ck_assert_int_eq(unlink(big), 0);
        /* a file whose blocks exceed its size (preallocated) counts its blocks */
        _cleanup_free_ char *pre = strdup_printf("%s/pre", t);
        fd = open(pre, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        int fr = fallocate(fd, 1 /* FALLOC_FL_KEEP_SIZE */, 0, 2 << 20);
        close(fd);
        if (fr == 0) {
                ck_assert_int_eq(stat(pre, &st), 0);
                ck_assert_int_eq(st.st_size, 0);
                ck_assert_uint_ge(walk(t), one + (2 << 20));
        }
        ck_assert_int_eq(unlink(pre), 0);
        /* 3,000 empty files: entries counted, next to no bytes */
        _cleanup_free_ char *many = strdup_printf("%s/many", t);
        ck_assert_int_eq(mkdir(many, 0700), 0);
        for (int i = 0; i < 3000; i++) {
                _cleanup_free_ char *f = strdup_printf("%s/e%d", many, i);
                fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                ck_assert_int_ge(fd, 0);
                close(fd);
        }
        disk_usage u = {0};
        ck_assert_int_eq(disk_usage_walk(t, 0, &u), 0);
        ck_assert_uint_ge(u.entries, 3000 + 5);
        ck_assert_uint_lt(u.bytes, one + (1 << 20));
        /* a missing tree adds nothing */
        _cleanup_free_ char *missing = strdup_printf("%s/missing", t);
        disk_usage m = {7, 7};
        ck_assert_int_eq(disk_usage_walk(missing, 0, &m), 0);
        ck_assert_uint_eq(m.bytes, 7);
        tf_tmpdir_free(t);
}
END_TEST

START_TEST(test_walk_no_follow) {
        char *t = tf_tmpdir_new("tf-disk-budget");
        char *outside = tf_tmpdir_new("tf-disk-budget");
        _cleanup_free_ char *big = strdup_printf("%s/big", outside);
        write_bytes(big, 4 << 20);
        _cleanup_free_ char *tree = strdup_printf("%s/tree", t);
        ck_assert_int_eq(mkdir(tree, 0700), 0);
        _cleanup_free_ char *l1 = strdup_printf("%s/link-file", tree), *l2 = strdup_printf("%s/link-dir", tree);
        ck_assert_int_eq(symlink(big, l1), 0);
        ck_assert_int_eq(symlink(outside, l2), 0);
        ck_assert_uint_lt(walk(tree), 1 << 20);
        /* the top itself as a symlink is refused, not followed */
        _cleanup_free_ char *top = strdup_printf("%s/top", t);
        ck_assert_int_eq(symlink(outside, top), 0);
        disk_usage u = {0};
        ck_assert_int_lt(disk_usage_walk(top, 0, &u), 0);
        ck_assert_uint_eq(u.bytes, 0);
        tf_tmpdir_free(t);
        tf_tmpdir_free(outside);
}
END_TEST

START_TEST(test_walk_early_stop) {
        char *t = tf_tmpdir_new("tf-disk-budget");
        for (int i = 0; i < 10; i++) {
                _cleanup_free_ char *f = strdup_printf("%s/f%d", t, i);
                write_bytes(f, 1 << 20);
        }
        disk_usage u = {0};
        ck_assert_int_eq(disk_usage_walk(t, 3 << 20, &u), 1);
        ck_assert_uint_gt(u.bytes, 3 << 20);
        ck_assert_uint_lt(u.bytes, 5 << 20); /* stopped as soon as it was over */
        u = (disk_usage) {0};
        ck_assert_int_eq(disk_usage_walk(t, 20 << 20, &u), 0);
        ck_assert_uint_ge(u.bytes, 10 << 20);
        tf_tmpdir_free(t);
}
END_TEST

/* Nesting deeper than the walker measures is refused (-ELOOP), never
 * silently left out, and costs no more than DISK_WALK_MAX_DEPTH open fds. */
START_TEST(test_walk_deep) {
        char *t = tf_tmpdir_new("tf-disk-budget");
        int fd = open(t, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        for (int i = 0; i < DISK_WALK_MAX_DEPTH + 10; i++) {
                ck_assert_int_eq(mkdirat(fd, "d", 0700), 0);
                int n = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ck_assert_int_ge(n, 0);
                close(fd);
                fd = n;
        }
        /* the data sits below the limit */
        int f = openat(fd, "hidden", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(f, 0);
        ck_assert_int_eq(ftruncate(f, (off_t) 1 << 30), 0);
        close(f);
        close(fd);
        disk_usage u = {0};
        ck_assert_int_eq(disk_usage_walk(t, 0, &u), -ELOOP);
        /* a tree just within the limit is measured */
        char *t2 = tf_tmpdir_new("tf-disk-budget");
        fd = open(t2, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        for (int i = 0; i < DISK_WALK_MAX_DEPTH - 1; i++) {
                ck_assert_int_eq(mkdirat(fd, "d", 0700), 0);
                int n = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                close(fd);
                fd = n;
        }
        f = openat(fd, "big", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_eq(ftruncate(f, (off_t) 1 << 30), 0);
        close(f);
        close(fd);
        u = (disk_usage) {0};
        ck_assert_int_eq(disk_usage_walk(t2, 0, &u), 0);
        ck_assert_uint_ge(u.bytes, 1ULL << 30);
        tf_tmpdir_free(t);
        tf_tmpdir_free(t2);
}
END_TEST

/* A directory the walker cannot read is an error, not zero bytes (a
 * worker could hide a giant behind chmod 000). Root reads it anyway. */
START_TEST(test_walk_unreadable) {
        char *t = tf_tmpdir_new("tf-disk-budget");
        _cleanup_free_ char *d = strdup_printf("%s/locked", t);
        ck_assert_int_eq(mkdir(d, 0700), 0);
        _cleanup_free_ char *big = strdup_printf("%s/big", d);
        int fd = open(big, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_eq(ftruncate(fd, (off_t) 1 << 30), 0);
        close(fd);
        ck_assert_int_eq(chmod(d, 0), 0);
        disk_usage u = {0};
        int r = disk_usage_walk(t, 0, &u);
        if (geteuid() == 0) {
                ck_assert_int_eq(r, 0);
                ck_assert_uint_ge(u.bytes, 1ULL << 30);
        } else
                ck_assert_int_eq(r, -EACCES);
        tf_tmpdir_free(t);
}
END_TEST

START_TEST(test_fs_stat) {
        char *t = tf_tmpdir_new("tf-disk-budget");
        disk_fs_info fs = {0};
        ck_assert_int_eq(disk_fs_stat(t, &fs), 0);
        ck_assert_uint_gt(fs.size, 0);
        ck_assert_uint_le(fs.avail, fs.size);
        ck_assert_uint_le(fs.inodes_avail, fs.inodes ? fs.inodes : UINT64_MAX);
        /* a file names its filesystem too */
        _cleanup_free_ char *f = tf_put(t, "f", "x", 1);
        disk_fs_info ff = {0};
        ck_assert_int_eq(disk_fs_stat(f, &ff), 0);
        ck_assert_uint_eq(ff.size, fs.size);
        _cleanup_free_ char *missing = strdup_printf("%s/missing", t), *through = strdup_printf("%s/f/x", t);
        disk_fs_info untouched = {1, 2, 3, 4};
        ck_assert_int_eq(disk_fs_stat(missing, &untouched), -ENOENT);
        ck_assert_int_eq(disk_fs_stat(through, &untouched), -ENOTDIR);
        ck_assert_uint_eq(untouched.size, 1);
        tf_tmpdir_free(t);
}
END_TEST

/* The top of a walk: missing adds nothing, a file counts alone (the task's
 * log), a symlink is refused (-ENOTDIR: never followed), and u is added to,
 * never reset. */
START_TEST(test_walk_top) {
        char *t = tf_tmpdir_new("tf-disk-budget");
        tf_mkdirs(t, "d");
        _cleanup_free_ char *f = tf_put(t, "d/f", "12345", 5);
        tf_symlink(t, "d", "link");
        _cleanup_free_ char *missing = strdup_printf("%s/missing", t), *link = strdup_printf("%s/link", t),
                            *d = strdup_printf("%s/d", t);
        disk_usage u = {.bytes = 100, .entries = 3};
        ck_assert_int_eq(disk_usage_walk(missing, 0, &u), 0);
        ck_assert_uint_eq(u.bytes, 100);
        ck_assert_uint_eq(u.entries, 3);
        ck_assert_int_eq(disk_usage_walk(link, 0, &u), -ENOTDIR);
        ck_assert_uint_eq(u.entries, 3);
        ck_assert_int_eq(disk_usage_walk(f, 0, &u), 0);
        ck_assert_uint_eq(u.entries, 4);
        ck_assert_uint_ge(u.bytes, 105);
        ck_assert_int_eq(disk_usage_walk(f, 100, &u), 1); /* over stop_above */
        ck_assert_int_eq(disk_usage_walk(d, 0, &u), 0);
        ck_assert_uint_eq(u.entries, 7); /* f alone, then d and f, added to the 3 */
        ck_assert_uint_ge(u.bytes, 115);
        tf_tmpdir_free(t);
}
END_TEST

int main(void) {
        Suite *s = suite_create("disk-usage");
        tf_tcase(s, "size", NULL, NULL, 0, TF_TESTS(test_size_parse, test_size_format, test_rules));
        tf_tcase(s, "walk", NULL, NULL, 120, TF_TESTS(test_walk_counts, test_walk_no_follow, test_walk_early_stop,
                test_walk_deep, test_walk_unreadable, test_walk_top));
        tf_tcase(s, "fs", NULL, NULL, 0, TF_TESTS(test_fs_stat));
        return tf_run_suite(s);
}
