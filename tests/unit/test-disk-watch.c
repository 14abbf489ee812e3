/* The shim's disk watch (src/shim/disk-watch.h) on real trees: when checks
 * are due, the adaptive walk interval, tripping on the budget (with a detail
 * naming budget and usage), staying quiet under it, tripping once, the
 * exit.json reserve file, and a tmpfs of the sandbox counted. */

#include <check.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "disk-watch.h"
#include "fs-util.h"
#include "macro.h"
#include "overlay.h"
#include "strv.h"
#include "string-util.h"
#include "unit.h"

static void sparse(const char *dir, const char *name, off_t size) {
        _cleanup_free_ char *p = strdup_printf("%s/%s", dir, name);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, size), 0);
        close(fd);
}

START_TEST(test_interval) {
        /* 20 x the walk, within [200 ms, 10 s] */
        ck_assert_uint_eq(disk_watch_walk_interval(0, 0, 100), DISK_WATCH_WALK_MIN_MS);
        ck_assert_uint_eq(disk_watch_walk_interval(5, 0, 100), DISK_WATCH_WALK_MIN_MS);
        ck_assert_uint_eq(disk_watch_walk_interval(50, 0, 100), 1000);
        ck_assert_uint_eq(disk_watch_walk_interval(2000, 0, 100), DISK_WATCH_WALK_MAX_MS);
        /* past 3/4 of the budget: 4 x the walk */
        ck_assert_uint_eq(disk_watch_walk_interval(50, 75, 100), DISK_WATCH_WALK_MIN_MS);
        ck_assert_uint_eq(disk_watch_walk_interval(100, 80, 100), 400);
        ck_assert_uint_eq(disk_watch_walk_interval(100, 74, 100), 2000);
        ck_assert_uint_eq(disk_watch_walk_interval(10000, 99, 100), DISK_WATCH_WALK_MAX_MS);
}
END_TEST

START_TEST(test_budget_trip) {
        char *upper = tf_tmpdir_new("tf-disk-watch");
        char *out = tf_tmpdir_new("tf-disk-watch");
        char *paths[] = {upper, out, NULL};
        disk_watch w;
        uint64_t now = 1000;
        disk_watch_init(&w, 10 << 20, paths, now);
        ck_assert_int_eq(disk_watch_timeout(&w, now), 0); /* checks due at once */
        _cleanup_free_ char *detail = NULL;
        ck_assert_int_eq(disk_watch_check(&w, now, &detail), 0);
        ck_assert_ptr_null(detail);
        int t = disk_watch_timeout(&w, now);
        ck_assert_int_gt(t, 0);
        ck_assert_int_le(t, DISK_WATCH_FS_INTERVAL_MS);
        /* under the budget in both trees together: quiet */
        sparse(upper, "a", 4 << 20);
        sparse(out, "b", 4 << 20);
        now += DISK_WATCH_WALK_MAX_MS;
        ck_assert_int_eq(disk_watch_check(&w, now, &detail), 0);
        ck_assert_uint_ge(w.last_usage, 8 << 20);
        /* not yet due: nothing measured */
        sparse(out, "c", 4 << 20);
        ck_assert_int_eq(disk_watch_check(&w, now + 1, &detail), 0);
        /* due: over the budget, counted across both trees */
        now += DISK_WATCH_WALK_MAX_MS;
        ck_assert_int_eq(disk_watch_check(&w, now, &detail), 1);
        ck_assert_ptr_nonnull(detail);
        ck_assert_msg(strstr(detail, "disk budget of 10.0 MiB"), "%s", detail);
        ck_assert_msg(strstr(detail, "12.0 MiB") || strstr(detail, "at least"), "%s", detail);
        ck_assert_msg(strstr(detail, upper), "%s", detail);
        /* trips once; disarmed afterwards */
        _cleanup_free_ char *again = NULL;
        ck_assert_int_eq(disk_watch_check(&w, now + DISK_WATCH_WALK_MAX_MS, &again), 0);
        ck_assert_ptr_null(again);
        ck_assert_int_eq(disk_watch_timeout(&w, now), -1);
        tf_tmpdir_free(upper);
        tf_tmpdir_free(out);
}
END_TEST

START_TEST(test_unmeasurable_trips) {
        char *upper = tf_tmpdir_new("tf-disk-watch");
        int fd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        for (int i = 0; i < DISK_WALK_MAX_DEPTH + 1; i++) {
                ck_assert_int_eq(mkdirat(fd, "d", 0700), 0);
                int n = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                close(fd);
                fd = n;
        }
        close(fd);
        char *paths[] = {upper, NULL};
        disk_watch w;
        disk_watch_init(&w, 1ULL << 40, paths, 0);
        _cleanup_free_ char *detail = NULL;
        ck_assert_int_eq(disk_watch_check(&w, 0, &detail), 1);
        ck_assert_msg(strstr(detail, "cannot be measured") && strstr(detail, "nested deeper than 512"), "%s", detail);
        tf_tmpdir_free(upper);
}
END_TEST

/* Two tasks on one small filesystem: the one that fills it trips on the
 * floor, the idle one keeps running. Needs a mount: root only (in a private
 * mount namespace of this test process). */
START_TEST(test_floor_only_the_grower) {
        TF_ROOT_OR_SKIP("mounting a small tmpfs needs root");
        _cleanup_free_ char *mnt = tf_tmpdir_new("tf-disk-watch");
        ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
        ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
        ck_assert_int_eq(mount("tmpfs", mnt, "tmpfs", 0, "size=8m"), 0);
        _cleanup_free_ char *a = strdup_printf("%s/a", mnt), *b = strdup_printf("%s/b", mnt);
        ck_assert_int_eq(mkdir(a, 0700), 0);
        ck_assert_int_eq(mkdir(b, 0700), 0);
        _cleanup_free_ char *bf = strdup_printf("%s/kept", b);
        int fd = open(bf, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_eq(posix_fallocate(fd, 0, 100 << 10), 0);
        close(fd);
        char *pa[] = {a, NULL}, *pb[] = {b, NULL};
        disk_watch wa, wb;
        uint64_t now = 0;
        disk_watch_init(&wa, 1ULL << 30, pa, now);
        disk_watch_init(&wb, 1ULL << 30, pb, now);
        _cleanup_free_ char *da = NULL, *db = NULL;
        ck_assert_int_eq(disk_watch_check(&wa, now, &da), 0);
        ck_assert_int_eq(disk_watch_check(&wb, now, &db), 0);
        /* a fills the filesystem */
        for (int i = 0;; i++) {
                _cleanup_free_ char *f = strdup_printf("%s/f%d", a, i);
                fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                if (fd < 0) break;
                int r = posix_fallocate(fd, 0, 256 << 10);
                close(fd);
                if (r != 0) break;
        }
        now += DISK_WATCH_FS_INTERVAL_MS;
        ck_assert_int_eq(disk_watch_check(&wb, now, &db), 0);
        ck_assert_ptr_null(db);
        ck_assert_int_eq(disk_watch_check(&wa, now, &da), 1);
        ck_assert_msg(strstr(da, "below its floor") && strstr(da, a), "%s", da);
        /* b stays quiet while it does not grow */
        for (int i = 0; i < 5; i++) {
                now += DISK_WATCH_WALK_MAX_MS;
                ck_assert_int_eq(disk_watch_check(&wb, now, &db), 0);
        }
        /* and trips once it grows on the full filesystem */
        _cleanup_free_ char *bf2 = strdup_printf("%s/more", b);
        fd = open(bf2, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, 1 << 20), 0); /* apparent size counts */
        close(fd);
        now += DISK_WATCH_WALK_MAX_MS;
        ck_assert_int_eq(disk_watch_check(&wb, now, &db), 1);
        ck_assert_int_eq(umount2(mnt, MNT_DETACH), 0);
        ck_assert_int_eq(rmdir(mnt), 0);
}
END_TEST

START_TEST(test_no_paths) {
        char *none[] = {NULL};
        disk_watch w;
        disk_watch_init(&w, 1, none, 0);
        ck_assert_int_eq(disk_watch_timeout(&w, 0), -1);
        _cleanup_free_ char *detail = NULL;
        ck_assert_int_eq(disk_watch_check(&w, 0, &detail), 0);
}
END_TEST

START_TEST(test_reserve) {
        char *dir = tf_tmpdir_new("tf-disk-watch");
        _cleanup_free_ char *p = strdup_printf("%s/%s", dir, DISK_RESERVE_NAME);
        ck_assert_int_eq(disk_reserve_create(dir), 0);
        struct stat st;
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_int_ge((long long) st.st_blocks * 512, DISK_RESERVE_BYTES); /* real blocks, not a hole */
        ck_assert_int_eq(st.st_mode & 07777, 0600);
        ck_assert_int_eq(disk_reserve_create(dir), 0); /* a stale one is replaced */
        disk_reserve_release(dir);
        ck_assert_int_eq(access(p, F_OK), -1);
        disk_reserve_release(dir); /* idempotent */
        tf_tmpdir_free(dir);
}
END_TEST

/* In a mount namespace of its own (a user namespace too when not root), a
 * 1 MiB tmpfs: its use joins the trees' against the budget; full, it is
 * over the budget; a path that is no tmpfs does not count; its fd keeps it
 * measurable. Returns the child's exit status (0: every check held). */
static int tmpfs_child(const char *tree, const char *mnt) {
        if (geteuid() == 0 ? unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0
                           : userns_enter_as_root(getuid(), getgid()) < 0)
                return 10;
        if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m") < 0) return 11;
        disk_watch w;
        char *paths[] = {(char *) tree, NULL};
        char *dests[] = {(char *) mnt, (char *) "/proc", NULL};
        disk_watch_init(&w, 1 << 20, paths, 0);
        if (disk_watch_set_tmpfs(&w, "", dests) < 0 || strv_length(w.tmpfs) != 1) return 12;
        char *detail = NULL;
        sparse(tree, "a", 600 << 10);
        if (disk_watch_check(&w, 0, &detail) != 0) return 13;
        /* 512 KiB in the tmpfs: 1.1 MiB in all */
        _cleanup_free_ char *f = strdup_printf("%s/f", mnt);
        int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        char buf[65536];
        memset(buf, 1, sizeof buf);
        for (int i = 0; i < 8; i++)
                if (write(fd, buf, sizeof buf) != (ssize_t) sizeof buf) return 14;
        if (disk_watch_check(&w, DISK_WATCH_FS_INTERVAL_MS, &detail) != 1) return 15;
        if (!strstr(detail, "in the sandbox's tmpfs mounts")) return 16;
        free(detail);
        detail = NULL;
        /* full: over the budget whatever else */
        disk_watch w2;
        char *none[] = {NULL};
        disk_watch_init(&w2, 100 << 20, none, 0);
        if (disk_watch_set_tmpfs(&w2, "", dests) < 0) return 17;
        while (write(fd, buf, sizeof buf) > 0)
                ;
        close(fd);
        /* the paths' list is empty: only the tmpfs is checked, on the filesystem clock */
        char *one[] = {(char *) tree, NULL};
        w2.paths = one;
        if (disk_watch_check(&w2, 0, &detail) != 1 || !strstr(detail, "is full")) return 18;
        free(detail);
        disk_watch_done(&w);
        disk_watch_done(&w2);
        return 0;
}

START_TEST(test_tmpfs_counts) {
        char *tree = tf_tmpdir_new("tf-disk-watch");
        char *mnt = tf_tmpdir_new("tf-disk-watch");
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) _exit(tmpfs_child(tree, mnt));
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the tmpfs checks: step %d", WEXITSTATUS(st));
        tf_tmpdir_free(tree);
        tf_tmpdir_free(mnt);
}
END_TEST

TF_MAIN("disk-watch", "watch", NULL, NULL, 120, test_interval, test_budget_trip, test_unmeasurable_trips, test_no_paths,
        test_floor_only_the_grower, test_reserve, test_tmpfs_counts)
