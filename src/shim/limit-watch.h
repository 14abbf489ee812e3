#pragma once
/* The shim's side of a task's limits where no systemd scope holds them
 * (task-limits.h says which mode holds what):
 *   limit_watch_prepare()  in the shim, before the worker's fork: the mode,
 *                          and in mode cgroup the task's own cgroup;
 *   limit_watch_enter_cgroup() in the worker child, first: into that cgroup;
 *   limit_watch_set_rlimits()  in the worker child, right before it execs;
 *   limit_watch_check()    from the monitor loop, every TASK_LIMITS_WATCH_MS:
 *                          says when the worker must be stopped, and why;
 *   limit_watch_final()    after the worker ended: a fork refused at
 *                          RLIMIT_NPROC, seen in the log's tail;
 *   limit_watch_done()     what is left in the cgroup is killed, the cgroup
 *                          removed. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "launch-spec.h"
#include "task-limits.h"

typedef struct limit_watch {
        TaskLimitsMode mode;     /* _TASK_LIMITS_MODE_INVALID: no limits given (an older daemon) */
        bool root;               /* euid 0: RLIMIT_NPROC does not bind, the count is the bound */
        bool sandboxed;          /* set by the caller: the worker is bwrap, whose sandbox has a procfs of
                                  * its own to count in */
        int sandbox_proc_fd;     /* that procfs, once found, else -1 */
        bool no_nproc;           /* set by the caller for a worker without a sandbox: no user namespace
                                  * of its own, so RLIMIT_NPROC would count the user's other processes */
        uint64_t memory_max, tasks_max;
        char *cgroup;            /* mode cgroup: the task's own cgroup directory */
        pid_t worker;
        uint64_t next_ms;
        bool tripped;
        uint64_t peak_tasks, peak_rss; /* the largest counts seen (mode rlimit) */
} limit_watch;

/* Decide the mode for a worker of task_id with limits l (NULL: none): scope
 * when the shim already runs in the task's systemd scope, else cgroup when
 * a delegated cgroup v2 parent takes the task's own cgroup (made here),
 * else rlimit. cgroup_root: NULL, or a cgroup v2 root for tests. *ret_note
 * (malloc'd or NULL) is a line for the task log when a cgroup could not be
 * made. 0, -ENOMEM. */
int limit_watch_prepare(limit_watch *w, const launch_limits *l, const char *task_id, const char *cgroup_root,
                        char **ret_note);

/* In the worker child: mode cgroup moves the calling process into the
 * task's cgroup (first, before any namespace). -errno. */
int limit_watch_enter_cgroup(const limit_watch *w);
/* In the worker child before it execs: mode rlimit sets RLIMIT_NPROC,
 * unless root or no_nproc (soft and hard: the worker cannot raise it). The
 * caller must already be in the user namespace of the worker's own
 * (limit_watch_needs_userns). -errno. */
int limit_watch_set_rlimits(const limit_watch *w);

/* Does the worker need a user namespace of its own before limit_watch_set_rlimits
 * (mode rlimit, not root: RLIMIT_NPROC counts per user namespace)? */
bool limit_watch_needs_userns(const limit_watch *w);

void limit_watch_start(limit_watch *w, pid_t worker, uint64_t now);
/* Milliseconds until the next check (0: due), -1 when there is none. */
int limit_watch_timeout(const limit_watch *w, uint64_t now);
/* 1 with *ret_reason (TASK_LIMITS_*_REASON, static) and *ret_detail
 * (malloc'd) when the worker must be stopped; 0; -ENOMEM. Trips once. */
int limit_watch_check(limit_watch *w, uint64_t now, const char **ret_reason, char **ret_detail);
/* After the worker ended: in mode rlimit, the log's last 64 KiB naming a
 * fork that failed ("Cannot fork", "Resource temporarily unavailable", ...)
 * are RLIMIT_NPROC refusing it, where it binds: the worker ran into its
 * tasks limit, however it ended (a shell gives up at the first refused
 * fork, too soon for a count to see it). 1 with reason and detail as
 * above; in mode cgroup the cgroup's events once more; else 0. -ENOMEM. */
int limit_watch_final(limit_watch *w, const char *log_path, const char **ret_reason, char **ret_detail);
void limit_watch_done(limit_watch *w);

/* Should the worker get an IPC namespace made here with its SysV shared
 * memory capped at the memory limit (mode rlimit with a memory limit: no
 * cgroup charges those pages, and a segment nobody has attached is no
 * process's memory)? limit_watch_enter_ipc, in the worker child with
 * CAP_SYS_ADMIN in its user namespace, makes it: shmmax and shmall at the
 * limit, shm_rmid_forced on. bwrap must then keep that namespace. 0, or
 * -errno of the unshare; a cap that cannot be written is only warned of on
 * stderr_fd. */
bool limit_watch_wants_ipc(const limit_watch *w);
int limit_watch_enter_ipc(const limit_watch *w, int stderr_fd);

/* Count the processes' threads and their memory (bytes: resident, and the
 * memfds they hold open) in the
 * tree of processes under pid, pid included (every /proc/<pid>/stat read
 * once, the tree found by parent pids; a kernel without
 * CONFIG_PROC_CHILDREN has no children files). At most max_procs
 * processes are counted. 0, -ENOENT when pid is gone, -ENOMEM. */
int proc_tree_measure(pid_t pid, size_t max_procs, uint64_t *ret_tasks, uint64_t *ret_rss);

/* A child of parent (the lowest in /proc's order), -ENOENT without one. */
pid_t proc_first_child(pid_t parent);

/* The first process bwrap (worker) starts in its sandbox once the sandbox
 * is made: the child of its child, whose root is no longer ours. -ENOENT
 * before that. */
pid_t proc_sandbox_pid(pid_t worker);
