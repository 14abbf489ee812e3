#pragma once
/* Ending a test world: its processes, its mounts and its directory, on every
 * way a test case can end.
 *
 * A world's processes are those that name its root R: an environment value
 * at or below R (the daemon and the shims carry the world's TASKFERRY_*_DIR,
 * HOME and PATH), a working directory at or below R (a worker in the world's
 * repository) or an executable there (a fixture copied into R/fixtures).
 * Killing a shim ends its sandbox too (bwrap's --die-with-parent).
 *
 * A Check case runs in a forked child that a failed assertion _exit()s and a
 * timeout SIGKILLs: nothing placed at the end of a case, in a teardown
 * fixture or in an atexit() handler runs then, and the daemon (a session of
 * its own) survives Check's killpg of the case's process group. So every
 * world has a guard: a process of its own session, made when the world is,
 * that waits on a pipe only the case's process holds open. When the world is
 * freed the guard is told so and exits; when the case's process ends first,
 * the pipe's end tells the guard, which kills the world's processes, removes
 * R and says on stderr what it found. */

#include <sys/types.h>

/* SIGKILL every process of the world at root, except the caller, until none
 * is left (at most about 5 s). When ret_names is non-NULL it gets the killed
 * ones as "comm[pid] comm[pid]" ("" for none; malloc'd, may be NULL on
 * ENOMEM). Returns how many were killed. */
int tf_world_kill_all(const char *root, char **ret_names);

/* Unmount whatever this mount namespace has mounted at or below root
 * (deepest first, detached; best effort), then remove the tree. 0 or -errno
 * (rm_rf's). */
int tf_world_remove(const char *root);

/* Start the guard of the world at root. Returns the fd the caller keeps
 * (close-on-exec, so no daemon or CLI it execs holds it), or -errno. */
int tf_guard_start(const char *root);
/* The world was freed: the guard exits without touching anything; closes
 * fd. No-op for fd < 0. */
void tf_guard_release(int fd);
