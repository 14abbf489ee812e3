/* The shim's disk watch (disk-watch.h). */
#include "disk-watch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"
#include "time-util.h"

void disk_watch_init(disk_watch *w, uint64_t max_bytes, char **paths, uint64_t now) {
        *w = (disk_watch) {.max_bytes = max_bytes, .paths = paths, .next_fs_ms = now, .next_walk_ms = now};
}

int disk_watch_set_tmpfs(disk_watch *w, const char *root, char *const *dests) {
        disk_watch_done(w);
        size_t n = strv_length((char **) dests);
        w->tmpfs_fds = calloc(n + 1, sizeof(int));
        if (!w->tmpfs_fds) return -ENOMEM;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *p = strdup_printf("%s%s", root, dests[i]);
                if (!p) return -ENOMEM;
                /* the worker cannot move its mounts, but only a tmpfs is what we mean */
                _cleanup_close_ int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOCTTY);
                struct statfs sf;
                if (fd < 0 || fstatfs(fd, &sf) < 0 || sf.f_type != TMPFS_MAGIC) continue;
                if (strv_push(&w->tmpfs, dests[i]) < 0) return -ENOMEM;
                w->tmpfs_fds[k++] = TAKE_FD(fd);
        }
        w->tmpfs_fds[k] = -1;
        if (!w->tmpfs && !(w->tmpfs = calloc(1, sizeof(char *)))) return -ENOMEM;
        return 0;
}

void disk_watch_done(disk_watch *w) {
        for (size_t i = 0; w->tmpfs_fds && w->tmpfs_fds[i] >= 0; i++) safe_close(w->tmpfs_fds[i]);
        free(w->tmpfs_fds);
        w->tmpfs_fds = NULL;
        strv_free(w->tmpfs);
        w->tmpfs = NULL;
}

/* The used bytes of the sandbox's tmpfs mounts into w->tmpfs_usage; 1 with
 * *ret_full naming one that is full. */
static int measure_tmpfs(disk_watch *w, const char **ret_full) {
        uint64_t used = 0;
        int full = 0;
        for (size_t i = 0; w->tmpfs_fds && w->tmpfs_fds[i] >= 0; i++) {
                struct statvfs sv;
                if (fstatvfs(w->tmpfs_fds[i], &sv) < 0) continue;
                used += (uint64_t) (sv.f_blocks - sv.f_bfree) * sv.f_frsize;
                if (sv.f_blocks > 0 && sv.f_bavail == 0 && !full) {
                        full = 1;
                        *ret_full = w->tmpfs[i];
                }
        }
        w->tmpfs_usage = used;
        return full;
}

static int check_tmpfs(disk_watch *w, char **ret_detail);

int disk_watch_timeout(const disk_watch *w, uint64_t now) {
        if (w->tripped || !w->paths || !w->paths[0]) return -1;
        uint64_t next = w->next_fs_ms < w->next_walk_ms ? w->next_fs_ms : w->next_walk_ms;
        if (next <= now) return 0;
        uint64_t d = next - now;
        return d > 60000 ? 60000 : (int) d;
}

uint64_t disk_watch_walk_interval(uint64_t walk_ms, uint64_t usage, uint64_t max_bytes) {
        uint64_t iv = walk_ms * 20;
        if (max_bytes && usage >= max_bytes / 4 * 3) iv = walk_ms * 4;
        if (iv < DISK_WATCH_WALK_MIN_MS) iv = DISK_WATCH_WALK_MIN_MS;
        if (iv > DISK_WATCH_WALK_MAX_MS) iv = DISK_WATCH_WALK_MAX_MS;
        return iv;
}

static int trip(disk_watch *w, char *detail, char **ret_detail) {
        if (!detail) return -ENOMEM;
        w->tripped = true;
        *ret_detail = detail;
        return 1;
}

static char *floor_detail(const disk_watch *w, uint64_t usage) {
        char a[32], b[32], c[32], d[32], e[32];
        const disk_fs_info *fs = &w->below_fs;
        if (fs->size > 0 && fs->avail < disk_floor_bytes(fs->size))
                return strdup_printf("the filesystem holding %s has %s free, below its floor of %s (min(256 MiB, 5%% "
                                     "of %s)), while the task's files grew to %s (disk budget %s)",
                                     w->below_path, disk_size_format(fs->avail, a),
                                     disk_size_format(disk_floor_bytes(fs->size), b), disk_size_format(fs->size, c),
                                     disk_size_format(usage, d), disk_size_format(w->max_bytes, e));
        return strdup_printf("the filesystem holding %s has %llu free inodes, below its floor of %llu (min(10000, "
                             "5%% of %llu)), while the task's files grew to %s (disk budget %s)",
                             w->below_path, (unsigned long long) fs->inodes_avail,
                             (unsigned long long) disk_floor_inodes(fs->inodes), (unsigned long long) fs->inodes,
                             disk_size_format(usage, d), disk_size_format(w->max_bytes, e));
}

/* statvfs every watched tree's filesystem; updates w->below. */
static void check_floors(disk_watch *w) {
        bool below = false;
        for (char **p = w->paths; *p && !below; p++) {
                disk_fs_info fs;
                if (disk_fs_stat(*p, &fs) < 0 || !disk_fs_below_floor(&fs)) continue;
                below = true;
                w->below_path = *p;
                w->below_fs = fs;
        }
        if (below && !w->below) w->walked_below = false;
        w->below = below;
}

int disk_watch_check(disk_watch *w, uint64_t now, char **ret_detail) {
        char a[32], b[32];
        *ret_detail = NULL;
        if (w->tripped || !w->paths || !w->paths[0]) return 0;
        if (now >= w->next_fs_ms) {
                w->next_fs_ms = now + DISK_WATCH_FS_INTERVAL_MS;
                check_floors(w);
                int k = check_tmpfs(w, ret_detail);
                if (k != 0) return k;
        }
        if (now >= w->next_walk_ms || (w->below && !w->walked_below)) {
                uint64_t t0 = mono_ms();
                disk_usage u = {0};
                int r = 0;
                for (char **p = w->paths; *p && r == 0; p++) r = disk_usage_walk(*p, w->max_bytes, &u);
                uint64_t t1 = mono_ms();
                w->last_walk_ms = t1 - t0;
                w->last_usage = u.bytes;
                /* on the caller's clock: now plus the walk itself plus the interval */
                w->next_walk_ms = now + w->last_walk_ms + disk_watch_walk_interval(w->last_walk_ms, u.bytes, w->max_bytes);
                if (r < 0)
                        /* the worker controls the tree: what cannot be measured is not allowed */
                        return trip(w,
                                    strdup_printf("the task's files cannot be measured against its %s disk budget "
                                                  "(%s)",
                                                  disk_size_format(w->max_bytes, a),
                                                  r == -ELOOP ? "directories nested deeper than 512 levels"
                                                              : strerror(-r)),
                                    ret_detail);
                if (u.bytes + w->tmpfs_usage > w->max_bytes)
                        return trip(w,
                                    strdup_printf("the task used more than its disk budget of %s: %s%s in %llu "
                                                  "entries under %s%s",
                                                  disk_size_format(w->max_bytes, a), r == 1 ? "at least " : "",
                                                  disk_size_format(u.bytes + w->tmpfs_usage, b),
                                                  (unsigned long long) u.entries, w->paths[0],
                                                  w->tmpfs_usage ? " and the sandbox's tmpfs mounts" : ""),
                                    ret_detail);
                /* the usage counts as "while above the floor" only if the floors
                 * still hold after the walk: writes during the walk may have
                 * filled the filesystem */
                if (!w->below) check_floors(w);
                if (w->below) {
                        w->walked_below = true;
                        if (u.bytes > w->ok_usage) return trip(w, floor_detail(w, u.bytes), ret_detail);
                } else
                        w->ok_usage = u.bytes;
        }
        return 0;
}

static int check_tmpfs(disk_watch *w, char **ret_detail) {
        char a[32], b[32], c[32];
        if (!w->tmpfs) return 0;
        const char *full = NULL;
        if (measure_tmpfs(w, &full))
                return trip(w,
                            strdup_printf("the sandbox's %s is full (each tmpfs of the sandbox holds at most the "
                                          "smaller of the task's disk budget of %s and its memory limit); the task's "
                                          "tmpfs mounts hold %s",
                                          full, disk_size_format(w->max_bytes, a),
                                          disk_size_format(w->tmpfs_usage, b)),
                            ret_detail);
        if (w->last_usage + w->tmpfs_usage > w->max_bytes)
                return trip(w,
                            strdup_printf("the task used more than its disk budget of %s: %s in the sandbox's tmpfs "
                                          "mounts (/tmp, /var/tmp) and %s in its files",
                                          disk_size_format(w->max_bytes, a), disk_size_format(w->tmpfs_usage, b),
                                          disk_size_format(w->last_usage, c)),
                            ret_detail);
        return 0;
}

int disk_watch_final(disk_watch *w, char **ret_detail) {
        uint64_t now = mono_ms();
        w->next_walk_ms = now;
        w->next_fs_ms = now;
        return disk_watch_check(w, now, ret_detail);
}

int disk_reserve_create(const char *task_dir) {
        _cleanup_free_ char *p = strdup_printf("%s/%s", task_dir, DISK_RESERVE_NAME);
        if (!p) return -ENOMEM;
        (void) unlink(p);
        _cleanup_close_ int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) return -errno;
        /* real blocks, not a hole: posix_fallocate, or zeros where it is not supported */
        int r = posix_fallocate(fd, 0, DISK_RESERVE_BYTES);
        if (r == EOPNOTSUPP || r == EINVAL) {
                static const char zeros[65536];
                for (size_t done = 0; r != 0 && done < DISK_RESERVE_BYTES; done += sizeof zeros)
                        if (loop_write(fd, zeros, sizeof zeros) < 0) break;
                r = 0;
        }
        if (r != 0) {
                (void) unlink(p);
                return -r;
        }
        return 0;
}

void disk_reserve_release(const char *task_dir) {
        _cleanup_free_ char *p = strdup_printf("%s/%s", task_dir, DISK_RESERVE_NAME);
        if (p) (void) unlink(p);
}
