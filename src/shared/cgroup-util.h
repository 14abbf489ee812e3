#pragma once
/* cgroup v2 files a process reads about its own cgroup (the kernel's
 * Documentation/admin-guide/cgroup-v2.rst): the shim reads its scope's
 * memory.events (scope.h in the daemon says why). */

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
