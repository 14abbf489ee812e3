/* Disk budget: size parsing, default rules, free-space floors and the tree
 * walker (disk-budget.h). */
#include "disk-budget.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "macro.h"

int disk_size_parse(const char *s, uint64_t *ret) {
        if (!s || !*s) return -EINVAL;
        uint64_t v = 0;
        const char *p = s;
        if (*p < '0' || *p > '9') return -EINVAL;
        bool overflow = false;
        for (; *p >= '0' && *p <= '9'; p++) {
                if (v > (UINT64_MAX - 9) / 10) overflow = true;
                else v = v * 10 + (uint64_t) (*p - '0');
        }
        unsigned shift = 0;
        switch (*p) {
        case 'k': case 'K': shift = 10; p++; break;
        case 'm': case 'M': shift = 20; p++; break;
        case 'g': case 'G': shift = 30; p++; break;
        case 't': case 'T': shift = 40; p++; break;
        default: break;
        }
        if (shift && (p[0] == 'i' || p[0] == 'I') && (p[1] == 'b' || p[1] == 'B')) p += 2;
        else if (p[0] == 'b' || p[0] == 'B') p++;
        if (*p) return -EINVAL;
        if (overflow || v > (DISK_SIZE_MAX >> shift)) return -ERANGE;
        v <<= shift;
        if (v == 0) return -ERANGE;
        *ret = v;
        return 0;
}

char *disk_size_format(uint64_t bytes, char buf[static 32]) {
        static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
        if (bytes < 1024) {
                snprintf(buf, 32, "%llu B", (unsigned long long) bytes);
                return buf;
        }
        double v = (double) bytes / 1024.0;
        size_t i = 0;
        while (v >= 1024.0 && i + 1 < ELEMENTSOF(units)) v /= 1024.0, i++;
        snprintf(buf, 32, "%.1f %s", v, units[i]);
        return buf;
}

uint64_t disk_budget_default(uint64_t fs_size) {
        uint64_t b = DISK_BUDGET_DEFAULT_MAX;
        if (fs_size > 0 && fs_size / 4 < b) b = fs_size / 4;
        return b < ((uint64_t) 1 << 20) ? (uint64_t) 1 << 20 : b;
}

uint64_t disk_floor_bytes(uint64_t fs_size) {
        uint64_t f = fs_size / 20;
        return f < DISK_FLOOR_MAX ? f : DISK_FLOOR_MAX;
}

uint64_t disk_floor_inodes(uint64_t fs_inodes) {
        uint64_t f = fs_inodes / 20;
        return f < 10000 ? f : 10000;
}

int disk_fs_stat(const char *path, disk_fs_info *ret) {
        struct statvfs sv;
        if (statvfs(path, &sv) < 0) return -errno;
        uint64_t fr = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
        *ret = (disk_fs_info) {
                .size = (uint64_t) sv.f_blocks * fr,
                .avail = (uint64_t) sv.f_bavail * fr,
                .inodes = (uint64_t) sv.f_files,
                .inodes_avail = (uint64_t) sv.f_favail,
        };
        return 0;
}

bool disk_fs_below_floor(const disk_fs_info *fs) {
        if (fs->size > 0 && fs->avail < disk_floor_bytes(fs->size)) return true;
        if (fs->inodes > 0 && fs->inodes_avail < disk_floor_inodes(fs->inodes)) return true;
        return false;
}

static uint64_t charge(const struct stat *st) {
        uint64_t apparent = S_ISREG(st->st_mode) || S_ISDIR(st->st_mode) || S_ISLNK(st->st_mode)
                                    ? (uint64_t) (st->st_size > 0 ? st->st_size : 0)
                                    : 0;
        uint64_t allocated = (uint64_t) (st->st_blocks > 0 ? st->st_blocks : 0) * 512;
        return apparent > allocated ? apparent : allocated;
}

int disk_usage_walk(const char *path, uint64_t stop_above, disk_usage *u) {
        _cleanup_close_ int at = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (at < 0) return errno == ENOENT ? 0 : -errno;
        struct stat st;
        if (fstat(at, &st) < 0) return -errno;
        if (S_ISLNK(st.st_mode)) return -ENOTDIR; /* never followed */
        if (!S_ISDIR(st.st_mode)) {
                /* a file (the task's log) counts alone */
                u->bytes += charge(&st);
                u->entries++;
                return stop_above && u->bytes > stop_above ? 1 : 0;
        }
        _cleanup_close_ int top = openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (top < 0) return -errno;
        if (fstat(top, &st) < 0) return -errno;
        dev_t dev = st.st_dev;
        u->bytes += charge(&st);
        u->entries++;

        /* one open directory per level: the worker controls the names, so the
         * walk never builds a path and never follows a symlink */
        DIR *stack[DISK_WALK_MAX_DEPTH];
        size_t depth = 0;
        int r = 0;
        stack[0] = fdopendir(top);
        if (!stack[0]) return -errno;
        top = -1; /* owned by stack[0] */
        depth = 1;
        while (depth > 0) {
                DIR *d = stack[depth - 1];
                errno = 0;
                struct dirent *de = readdir(d);
                if (!de) {
                        closedir(d);
                        depth--;
                        continue;
                }
                if (streq(de->d_name, ".") || streq(de->d_name, "..")) continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue; /* vanished */
                u->bytes += charge(&st);
                u->entries++;
                if (stop_above && u->bytes > stop_above) {
                        r = 1;
                        break;
                }
                if (!S_ISDIR(st.st_mode) || st.st_dev != dev) continue;
                if (depth >= DISK_WALK_MAX_DEPTH) {
                        r = -ELOOP;
                        break;
                }
                int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0) {
                        if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) continue; /* replaced meanwhile */
                        r = -errno;
                        break;
                }
                DIR *sub = fdopendir(fd);
                if (!sub) {
                        r = -errno;
                        close(fd);
                        break;
                }
                stack[depth++] = sub;
        }
        while (depth > 0) closedir(stack[--depth]);
        return r;
}
