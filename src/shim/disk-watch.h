#pragma once
/* The shim's disk watch: it stops a worker past its disk budget or that
 * takes a filesystem below its floor (disk-budget.h says what counts).
 * Called from the shim's monitor loop: disk_watch_timeout() bounds the poll
 * timeout, disk_watch_check() measures what is due and says when the worker
 * must be stopped.
 *
 * Two checks, each on its own clock:
 *  - the filesystems of the watched trees against their free-space floors
 *    (statvfs, every DISK_WATCH_FS_INTERVAL_MS: cheap). A filesystem below
 *    its floor stops the worker only if this task is among those taking the
 *    space: the trees are walked at once, and the worker is stopped when they
 *    grew past what they measured at the last walk after which the filesystem
 *    was still above its floor (0 if there was none). A task that sits idle while
 *    another one fills the disk keeps running;
 *  - the sandbox's tmpfs mounts against the budget, with the trees' usage
 *    at their last walk (statvfs, on the filesystem clock: cheap);
 *  - the trees themselves against the budget (a full walk). The interval
 *    adapts to the walk's cost: 20 x the last walk's duration, within
 *    [DISK_WATCH_WALK_MIN_MS, DISK_WATCH_WALK_MAX_MS], and at most 4 x the
 *    duration (within the same bounds) once usage passed 3/4 of the budget,
 *    so a tree of many files is not walked constantly. */

#include <stdbool.h>
#include <stdint.h>

#include "disk-budget.h"

#define DISK_WATCH_FS_INTERVAL_MS 100
#define DISK_WATCH_WALK_MIN_MS 200
#define DISK_WATCH_WALK_MAX_MS 10000

typedef struct disk_watch {
        uint64_t max_bytes;
        char **paths;            /* strv, borrowed */
        uint64_t next_fs_ms, next_walk_ms; /* mono_ms() deadlines */
        uint64_t last_usage, last_walk_ms;
        uint64_t ok_usage;       /* usage at the last walk while every filesystem was above its floor */
        bool below;              /* the last filesystem check found one below its floor */
        bool walked_below;       /* a walk ran since it went below */
        const char *below_path;  /* which tree's filesystem, and what it looked like */
        disk_fs_info below_fs;
        bool tripped;
        int *tmpfs_fds;          /* owned: the sandbox's tmpfs mounts, open (they outlive the sandbox
                                  * while open: the last check still sees what a worker left there) */
        char **tmpfs;            /* strv, owned: their paths in the sandbox, NULL until disk_watch_set_tmpfs */
        uint64_t tmpfs_usage;    /* their used bytes at the last check */
} disk_watch;

/* Arm the watch (paths borrowed, must outlive it); starts checking now. */
void disk_watch_init(disk_watch *w, uint64_t max_bytes, char **paths, uint64_t now);
/* The sandbox's tmpfs mounts count too (a tmpfs is memory, outside every
 * tree): their used blocks join the trees' usage at every filesystem check,
 * and a tmpfs that is full (its size is the smaller of the budget and the
 * memory limit, task-limits.h) is over the budget. root: the sandbox's root
 * seen from the host (/proc/<pid>/root), dests: the tmpfs mount points in
 * it (borrowed); each is opened now, and only a tmpfs counts. 0, -ENOMEM. */
int disk_watch_set_tmpfs(disk_watch *w, const char *root, char *const *dests);
/* Close the tmpfs mounts (their memory goes with the last reference). */
void disk_watch_done(disk_watch *w);
/* Milliseconds until the next check is due (0: due now), -1 when disarmed or tripped. */
int disk_watch_timeout(const disk_watch *w, uint64_t now);
/* Run the checks that are due at now. Returns 1 when the worker must be
 * stopped, with a malloc'd detail naming the budget (or floor) and the usage
 * in *ret_detail; 0 otherwise; -ENOMEM. Trips only once. */
int disk_watch_check(disk_watch *w, uint64_t now, char **ret_detail);

/* One last walk now, whatever the clocks say (after the worker ended: what
 * it wrote between two walks counts too). Same results as disk_watch_check. */
int disk_watch_final(disk_watch *w, char **ret_detail);

/* The interval until the next walk after one that took walk_ms and measured
 * usage bytes against max_bytes (exposed for tests). */
uint64_t disk_watch_walk_interval(uint64_t walk_ms, uint64_t usage, uint64_t max_bytes);

/* A small file (DISK_RESERVE_BYTES, blocks allocated) in the task dir, made
 * before the worker starts and removed right before exit.json is written, so
 * that exit.json can be written on a filesystem the worker filled (the
 * daemon removes a leftover one at settlement, disk-budget.h).
 * Best effort: create returns -errno, release ignores errors. */
int disk_reserve_create(const char *task_dir);
void disk_reserve_release(const char *task_dir);
