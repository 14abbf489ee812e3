#pragma once
/* The bwrap argument list for a worker: the mount list of the launch spec
 * (built by sandbox-plan.h) turned into bwrap(1) options, in order.
 * (Unlike the original's list: a root built from an allow-list instead of
 * `--ro-bind / /`, masks on top of user binds, no capabilities and no nested
 * user namespaces.)
 *
 *   --proc /proc --dev /dev [--size N] --tmpfs /tmp
 *   then, per mount, in order:
 *     ro-bind S D     → --ro-bind S D
 *     ro-bind-try S D → --ro-bind-try S D
 *     bind S D        → --bind S D
 *     tmpfs D         → [--size N] --tmpfs D
 *   (--size N before every --tmpfs when the spec has a tmpSize: no tmpfs of
 *   the sandbox, each of them memory, outgrows it; the disk watch counts
 *   their use against the disk budget)
 *     dir D           → --dir D
 *     symlink S D     → --symlink S D
 *     mask-file D     → --ro-bind /dev/null D
 *     overlay S D     → --overlay-src S --overlay UPPER WORK D          method BWRAP
 *                     | --bind STAGE D                                  method USERNS (the shim mounted it at STAGE)
 *     target D        → --overlay-src L --overlay U W D                 method BWRAP with sb->overlay
 *                     | --bind D D                                      USERNS (D is our overlay) or no overlay
 *   [--ro-bind-data <fd> SANDBOX_PROMPT_PATH]      when the prompt is passed as a file
 *   --remount-ro / --remount-ro /dev               bwrap's own tmpfs mounts, which it cannot size
 *   --unshare-all --unshare-user [--disable-userns] --share-net --die-with-parent --cap-drop ALL
 *                                                  (sb->own_ipc: --unshare-user --unshare-pid --unshare-uts
 *                                                  --unshare-cgroup-try, keeping the shim's IPC namespace)
 *                                                  --disable-userns unless sb->userns_allowed
 *   [--uid U --gid G]                              sandbox_needs_userns(): the shim mounted overlays in a
 *                                                  user namespace of its own, in which it is root
 *   --chdir D
 *   -- <worker argv...>
 *
 * --share-net: bwrap keeps the network namespace it is started in, which is
 * the host's only in network mode "host"; in the other modes the shim made
 * a new one before (net-policy.h, and the shim's netns.h).
 *
 * --cap-drop ALL: the worker holds no capability in any namespace, also when
 * the daemon runs as root (bwrap keeps them for a privileged caller by
 * default); --disable-userns: it cannot make a user namespace in which it
 * would hold them again (bwrap does that by writing
 * /proc/sys/user/max_user_namespaces, which a container may mount read-only:
 * there the shim sets userns_allowed and says so in the task log; the
 * mounts inherited from outside stay locked in any namespace the worker
 * makes, so it can neither unmount a mask nor remount a read-only bind). */

#include "launch-spec.h"
#include "overlay.h"

/* Where the prompt file appears inside the sandbox (on its private /tmp). */
#define SANDBOX_PROMPT_PATH "/tmp/.taskferry-prompt"

/* Does the sandbox mount any overlay (the target's or an extra one)? */
bool sandbox_has_overlays(const launch_sandbox *sb);
/* Must the shim enter a user namespace of its own: to mount the overlays
 * itself (bwrap lacks --overlay and there is an overlay to mount), or to
 * make the network namespace (sb->own_userns)? */
bool sandbox_needs_userns(const launch_sandbox *sb, overlay_method method);

/* Build the full argv (bwrap_path first, NULL-terminated strv, malloc'd) for
 * directory + sandbox + worker argv (worker_argv[0] is resolved by bwrap on
 * the worker's PATH). prompt_fd >= 0 adds --ro-bind-data prompt_fd
 * SANDBOX_PROMPT_PATH; the caller must make that fd survive execve (clear
 * FD_CLOEXEC in the child). Pure; -ENOMEM, -EINVAL for a mount missing a
 * path its op needs. */
int sandbox_build_argv(const char *bwrap_path, const char *directory, const launch_sandbox *sb,
                       overlay_method method, int prompt_fd, char *const worker_argv[], char ***ret);
