#pragma once
/* The bwrap argument list for a worker (spec sandbox-changeset-env.md §1.1,
 * with DESIGN.md's differences: the runtime and cache dirs are masked, only
 * the socket file is bound back; the overlay is mounted by bwrap or by us).
 *
 * Order:
 *   --ro-bind / / --proc /proc --dev /dev --tmpfs /tmp
 *   (--overlay-src D --overlay U W D           method BWRAP
 *    | --bind D D)                             method USERNS (D is already our overlay) or no overlay
 *                                              (sb->overlay NULL: method is ignored)
 *   [--tmpfs <masked>]...                      deny-list, runtime dir, cache dir: after the target,
 *                                              so a target containing a masked dir cannot unmask it
 *   [--bind <socket> <socket>]
 *   [--bind <rw> <rw>]...
 *   [--ro-bind <ro> <ro>]...
 *   [--ro-bind-data <fd> <prompt dest>]        when the prompt is passed as a file
 *   --unshare-all [--share-net] --die-with-parent   --share-net when sb->share_net
 *   [--uid U --gid G]                          method USERNS with an overlay (we are root in our namespace)
 *   --chdir D
 *   -- <worker argv...>
 */

#include "launch-spec.h"
#include "overlay.h"

/* Where the prompt file appears inside the sandbox (on its private /tmp). */
#define SANDBOX_PROMPT_PATH "/tmp/.taskferry-prompt"

/* Build the full argv (bwrap_path first, NULL-terminated strv, malloc'd) for
 * directory + sandbox + worker argv (worker_argv[0] is resolved by bwrap on
 * the worker's PATH). prompt_fd >= 0 adds --ro-bind-data prompt_fd
 * SANDBOX_PROMPT_PATH; the caller must make that fd survive execve (clear
 * FD_CLOEXEC in the child). Pure; -ENOMEM. */
int sandbox_build_argv(const char *bwrap_path, const char *directory, const launch_sandbox *sb,
                       overlay_method method, int prompt_fd, char *const worker_argv[], char ***ret);
