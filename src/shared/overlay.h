#pragma once
/* Copy-on-write overlay of a target directory: the worker's writes land in
 * the task's upper dir, the target stays as it was until an accept.
 *
 * Two ways to mount it, chosen by probing the installed bwrap, never by its
 * version:
 *  - bwrap has --overlay-src (bubblewrap >= 0.11): bwrap mounts it
 *    (`--overlay-src D --overlay U W D`);
 *  - otherwise: the process enters a new user + mount namespace in which it is
 *    root (uid 0 maps to our uid; mount(7) needs CAP_SYS_ADMIN in the
 *    namespace owning the mount namespace), mounts overlayfs with libmount
 *    (option `userxattr`, required for overlay mounts inside a user
 *    namespace, overlayfs(5) / kernel Documentation/filesystems/overlayfs.rst),
 *    then execs bwrap, which must then be given `--uid <our uid> --gid <our gid>`
 *    so the worker keeps its real identity. */

#include <stdbool.h>
#include <sys/types.h>

typedef enum overlay_method {
        OVERLAY_METHOD_BWRAP,  /* bwrap --overlay-src/--overlay */
        OVERLAY_METHOD_USERNS, /* our own user namespace + libmount */
} overlay_method;

/* Does this bwrap's --help list "--overlay-src"? help_text is the output of
 * `bwrap --help` (stdout+stderr). Pure function. */
bool bwrap_help_has_overlay(const char *help_text);
/* Run `<bwrap> --help` (blocking, 5 s budget) and decide the method.
 * -ENOENT if bwrap cannot be run. */
int bwrap_probe_overlay(const char *bwrap_path, overlay_method *ret);

/* Enter a new user namespace (uid/gid 0 inside map to our real uid/gid,
 * setgroups denied) and a new mount namespace with all mounts private.
 * Must be called by a single-threaded process. Returns 0 or -errno
 * (-EPERM/-ENOSPC when unprivileged user namespaces are unavailable). */
int userns_enter_as_root(uid_t outer_uid, gid_t outer_gid);
/* Mount overlayfs with lowerdir=lower, upperdir=upper, workdir=work (and
 * userxattr when in a user namespace) on target, through libmount.
 * Paths are passed as /proc/self/fd/N of O_PATH fds, so commas, colons and
 * backslashes in paths need no escaping. 0, or -errno with *reason (may be
 * NULL: not wanted) the sentence for the user, "overlay mount on <target>
 * failed: <libmount's message, or strerror>", set exactly when the return is
 * negative (but for -ENOMEM); the caller frees it. */
int overlay_mount(const char *lower, const char *upper, const char *work, const char *target,
                  bool userxattr, char **reason);
/* The same with a second lower layer lower_top stacked over lower (NULL:
 * none): what lower_top holds, whiteouts and opaque dirs included, hides
 * lower beneath it; writes go to upper only. */
int overlay_mount_layers(const char *lower, const char *lower_top, const char *upper, const char *work,
                         const char *target, bool userxattr, char **reason);

/* Create the overlay directories of one task:
 * mkdir -p <tmp_root> 0700; mkdir <root> 0700 non-recursively (EEXIST fails:
 * anti-plant); mkdir -p <root>/upper/main and <root>/work/main 0700.
 * Returns -EEXIST if root already exists. */
int overlay_dirs_create(const char *tmp_root, const char *root);
/* Remove an overlay root: refused (-EPERM) unless root is directly under
 * tmp_root and its basename is "taskferry-cow-<id>" (with id NULL: any
 * "taskferry-cow-" name), so a damaged record cannot name another task's
 * overlay; makes everything writable then removes it (overlayfs leaves
 * work/work at mode 000). */
int overlay_dirs_remove(const char *tmp_root, const char *root, const char *id);
