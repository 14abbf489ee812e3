#pragma once
/* cgroup v2 files a process reads about its own cgroup (the kernel's
 * Documentation/admin-guide/cgroup-v2.rst): the shim reads its scope's
 * memory.events (scope.h in the daemon says why); the shim makes a task a
 * cgroup of its own where no systemd scope holds it (task-limits.h). */

#include <stdint.h>

/* The oom_kill counter of a memory.events text ("oom_kill N" line). 0 with
 * *ret; -ENOENT if text is NULL or has no such line; -EINVAL for a malformed
 * value. */
int cgroup_memory_events_oom_kills(const char *text, uint64_t *ret);

/* The oom_kill counter of the calling process's own cgroup: the "0::<path>"
 * line of /proc/self/cgroup, then /sys/fs/cgroup<path>/memory.events.
 * -ENOENT where there is none (cgroup v1, no memory controller on that
 * cgroup, the root cgroup), -errno otherwise. */
int cgroup_self_oom_kills(uint64_t *ret);

/* ---- a task's own cgroup, where no systemd scope holds it ---- */

/* The cgroup v2 mount: /sys/fs/cgroup when it is cgroup2 itself, else the
 * unified hierarchy of a hybrid setup (/sys/fs/cgroup/unified); NULL when
 * neither is mounted. root_override (tests) is returned as is when set. */
const char *cgroup_v2_root(const char *root_override);

/* The relative path of the calling process's cgroup v2 ("/a/b") from a
 * /proc/<pid>/cgroup text: its "0::" line. malloc'd; -ENOENT without one,
 * -EINVAL for a path that is not absolute or holds "..". */
int cgroup_self_path(const char *proc_cgroup_text, char **ret);

/* The cgroup directory under which a task's own cgroup can be made with
 * memory.max and pids.max, for a process in the cgroup self_rel (relative,
 * "/" for the root) of the v2 mount at root: the parent of self_rel (a
 * cgroup holding processes cannot enable controllers for its children, the
 * kernel's no-internal-process rule), or self_rel itself when it is the
 * root. It is usable when its cgroup.controllers lists memory and pids, its
 * cgroup.subtree_control enables both (enabled here if it is the root and
 * they are not yet), and the caller may write the directory and its
 * cgroup.procs (a delegated subtree, or root). 0 with *ret (malloc'd,
 * absolute), -ENOENT when none is usable (*ret_why, malloc'd, says why),
 * -ENOMEM. */
int cgroup_delegated_parent(const char *root, const char *self_rel, char **ret, char **ret_why);

/* A cgroup v2 keyed file's counter ("max 3", "oom_kill 1" in pids.events,
 * memory.events): 0 with *ret; -ENOENT without that key, -EINVAL when malformed.
 * cgroup_memory_events_oom_kills is this with key "oom_kill". */
int cgroup_keyed_counter(const char *text, const char *key, uint64_t *ret);
