#pragma once
/* The host masks (host-masks.h) kept current in the daemon, so that a launch
 * does not walk /etc and /opt (a walk costs ~3 ms per 1,000 entries; an
 * ordinary /opt of a few npm installs holds 60,000).
 *
 * At start the roots are walked in slices on the loop (idle priority, a
 * few hundred dirs a slice), each dir watched with inotify(7) before it is
 * read, so that nothing made meanwhile is missed. Then every create, delete,
 * move and (root daemons) mode change under them updates the list: a new
 * dir is watched and walked, a removed or moved-away one forgotten with
 * everything under it. A launch first reads every event already queued
 * (inotify queues them in the syscall that made the change, so a socket
 * bound before the launch is in the list it gets), walks the few dirs made
 * since, and takes a copy.
 *
 * It cannot tell — and a launch then walks the roots in its shim, as
 * before — while the first walk runs, after a queue overflow (walked again
 * from the start), after a mount under a root changed (/proc/self/mountinfo:
 * inotify does not see into a new mount; walked again), once a root appears
 * or goes, and for good when a watch cannot be added (the user's
 * fs.inotify.max_user_watches, logged once) or the roots hold more than
 * HOST_MASKS_SCAN_MAX entries.
 *
 * The list lives in the daemon's memory only: a worker (sandboxed or not)
 * can write none of it. Owns Manager.host_watch. */

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "host-masks.h"

typedef struct Manager Manager;
typedef struct HostWatch HostWatch;

/* Slices of the walk on the loop: dirs per slice. */
#define HOST_WATCH_SLICE_DIRS 256
/* Dirs made since the last launch that a launch walks itself before it
 * gives up and lets its shim walk. */
#define HOST_WATCH_LAUNCH_DIRS 64

/* A watch of roots (NULL-terminated absolute dirs; NULL: HOST_MASKS_ROOTS)
 * on the loop e; private_files as host_mask_classify. Starts the walk.
 * -ENOMEM, -errno of inotify_init1. */
int host_watch_new(sd_event *e, const char *const *roots, bool private_files, HostWatch **ret);
HostWatch *host_watch_free(HostWatch *hw);

/* The masks as they are now (the queued events read first): 1 with *ret
 * filled (the caller frees it), 0 when the watch cannot tell (above; *ret
 * untouched), -ENOMEM. Never blocks but for the few dirs it walks. */
int host_watch_snapshot(HostWatch *hw, HostMaskList *ret);
/* Whether the first walk is done and the watch is usable (tests). */
bool host_watch_ready(const HostWatch *hw);

/* Manager.host_watch of HOST_MASKS_ROOTS (private files when the daemon
 * runs as root); none when inotify is unavailable (logged): launches then
 * walk as before. Never fails the daemon. */
void host_watch_setup(Manager *m);
void host_watch_teardown(Manager *m);
