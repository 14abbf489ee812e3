#pragma once
/* The host masks of one launch (host-masks.h), mounted where they are at
 * mount time.
 *
 * The sockets and private files under /etc and /opt come and go while tasks
 * start: a mask that bwrap is told to mount over a path that vanished in
 * the meantime fails the launch ("Can't create file at ...: Read-only file
 * system"). So the shim's worker child mounts them itself, in its own mount
 * namespace, right before it execs bwrap, each over the file it opened by
 * path (O_PATH | O_NOFOLLOW) a moment before: a path gone by then is
 * skipped, any other failure fails the launch. bwrap binds the system roots
 * recursively, so the masks come along, read-only, and locked in the
 * sandbox's user namespace (the worker can unmount none of them).
 *
 * Which entries a launch masks (mask_set_build), given its mount plan:
 *   - only what the plan shows (sandbox_plan_path_visible), nothing at or
 *     below a dir already masked;
 *   - never a path the plan mounts from or at itself (an --allow-socket,
 *     the task's own socket, the target): the plan's own mounts decide;
 *   - a socket: /dev/null over it, also inside the target or a user bind
 *     (a read-only mount does not stop connect(2));
 *   - a private file or dir (root daemons) that the plan shows only through
 *     a system root: /dev/null over the file, an empty tmpfs over the dir —
 *     but for a private dir that holds something the plan mounts (a
 *     repository in `mktemp -d` under /opt): its entries but the ones on the
 *     way to those mounts are masked instead, at every level below it, so
 *     the target stays reachable and nothing else others could not reach
 *     shows;
 *   - with bwrap's own --overlay (the target's overlay is bwrap's, mounted
 *     after the shim's masks), the sockets inside the target go to bwrap's
 *     options instead (sandbox.h), as before.
 */

#include <stdbool.h>
#include <stddef.h>

#include "host-masks.h"
#include "launch-spec.h"

typedef struct MaskMount {
        char *path;
        bool dir;            /* an empty tmpfs over a dir; else /dev/null over a file */
} MaskMount;

typedef struct MaskSet {
        MaskMount *items;
        size_t n;
} MaskSet;

void mask_set_done(MaskSet *s);

/* Fill *ret with what a launch of directory with the plan (m, n) masks of
 * hm, as above. Sockets at or below directory are appended to *argv_masks
 * as "mask-file" mounts instead when target_by_bwrap. Reads the private
 * dirs on the way to the plan's mounts (a few readdirs). -ENOMEM. */
int mask_set_build(const HostMaskList *hm, const sandbox_mount *m, size_t n, const char *directory,
                   bool target_by_bwrap, MaskSet *ret, sandbox_mount **argv_masks, size_t *n_argv_masks);

/* Mount the set in the calling process's mount namespace (it must be its
 * own: the worker child's, after it unshared one). A path gone, no longer
 * of its kind, or out of reach (EACCES) is skipped. Returns the number
 * mounted, or -errno with *reason (malloc'd, may stay NULL on -ENOMEM)
 * naming the path. */
int mask_set_mount(const MaskSet *s, char **reason);
