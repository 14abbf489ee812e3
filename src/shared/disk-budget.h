#pragma once
/* A task's disk budget: a worker cannot fill the host's disks. A worker
 * past its budget is stopped (failureReason "disk_quota_exceeded") and what
 * it wrote so far can still be extracted or rejected; a full disk never
 * blocks the other tasks' dispatch or settlement (README "Sandbox",
 * taskferry(1) --disk-max, taskferryd(8) TASKFERRY_TASK_DISK_MAX).
 *
 * What counts against the budget: every inode under the watched trees (the
 * overlay upper dir, the task's output dir and its log), each charged
 * max(apparent size, allocated blocks): a sparse giant (`truncate -s 8G`)
 * counts its apparent size, a file that fills its blocks counts them.
 * Independently of the budget, a worker is stopped when a filesystem it
 * writes to falls below its free-space floor, so one task cannot take the
 * space other tasks' settlement and dispatch need. */

#include <stdbool.h>
#include <stdint.h>

#define DISK_BUDGET_DEFAULT_MAX ((uint64_t) 10 << 30)    /* 10 GiB */
#define DISK_FLOOR_MAX ((uint64_t) 256 << 20)            /* 256 MiB */
#define DISK_SIZE_MAX ((uint64_t) 9007199254740991ULL)   /* 2^53-1, a JSON safe integer */

/* <taskDir>/disk-reserve: space the shim sets aside for exit.json while its
 * worker runs (src/shim/disk-watch.h) */
#define DISK_RESERVE_NAME "disk-reserve"
#define DISK_RESERVE_BYTES (256 * 1024)

/* Parse a size: decimal digits, optionally followed by one of K, M, G, T
 * (either case, binary multiples 2^10..2^40) and an optional "B"/"iB"
 * ("50M", "50MiB", "1g", "4096"). No sign, no spaces, no fraction.
 * 0 → -ERANGE; above DISK_SIZE_MAX → -ERANGE; anything else malformed → -EINVAL. */
int disk_size_parse(const char *s, uint64_t *ret);
/* "50.0 MiB", "8.0 GiB", "512 B" into buf (>= 32 bytes); returns buf. */
char *disk_size_format(uint64_t bytes, char buf[static 32]);

/* The default budget for a task whose overlay lives on a filesystem of
 * fs_size bytes: min(10 GiB, fs_size / 4); fs_size 0 (unknown) → 10 GiB.
 * At least 1 MiB. */
uint64_t disk_budget_default(uint64_t fs_size);
/* The free-space floor of a filesystem of fs_size bytes: min(256 MiB, 5% of
 * fs_size). */
uint64_t disk_floor_bytes(uint64_t fs_size);
/* The free-inode floor of a filesystem with fs_inodes inodes (0: no limit
 * reported): min(10000, 5% of fs_inodes). */
uint64_t disk_floor_inodes(uint64_t fs_inodes);

typedef struct disk_fs_info {
        uint64_t size, avail;           /* bytes: total, available to unprivileged users */
        uint64_t inodes, inodes_avail;  /* 0 when the filesystem reports no inode limit */
} disk_fs_info;
/* statvfs(3) of the filesystem holding path. -errno. */
int disk_fs_stat(const char *path, disk_fs_info *ret);
/* True when the filesystem is below either floor. */
bool disk_fs_below_floor(const disk_fs_info *fs);

typedef struct disk_usage {
        uint64_t bytes;    /* sum over inodes of max(st_size, st_blocks * 512) */
        uint64_t entries;  /* inodes visited, the top directory included */
} disk_usage;

#define DISK_WALK_MAX_DEPTH 512

/* Add the usage of the tree at path to *u (a file at path, the task's log,
 * counts alone; a symlink at path is -ENOTDIR; not following symlinks, not
 * crossing into other filesystems; a missing path adds nothing). Stops early
 * once u->bytes exceeds stop_above (0: never) and returns 1; else 0.
 * -ELOOP when directories nest deeper than DISK_WALK_MAX_DEPTH (a tree the
 * walker refuses to measure), other -errno on failure to open the top. Entries
 * that vanish while walking are skipped. */
int disk_usage_walk(const char *path, uint64_t stop_above, disk_usage *u);
