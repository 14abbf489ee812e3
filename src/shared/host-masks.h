#pragma once
/* What the sandbox must hide of the host's scanned system roots
 * (HOST_MASKS_ROOTS: /etc and /opt), whatever the launch: every
 * Unix socket (a read-only mount does not stop connect(2), and Landlock
 * ABI <= 6 cannot forbid it on a path) and, for a daemon running as root
 * (whose worker is host uid 0 and so owns root's files), every file others
 * may not read and every dir others may not list (/etc/shadow, ssh host
 * keys, /etc/ssl/private), so that such a worker reads in those roots what
 * an unprivileged user could.
 *
 * The facts are the host's, not a launch's: the daemon keeps them current
 * (run/host-watch.h) and hands them to the shim in the launch spec
 * ("hostMasks"); a shim given none walks the roots itself
 * (host_masks_scan). Which of them a launch masks, and how, is the shim's
 * (shim/mask-mount.h). */

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/* The roots that may hold a Unix socket (a daemon's, an appliance's):
 * /usr, /sys and /nix/store hold none by convention and are too large to
 * walk or watch. */
#define HOST_MASKS_ROOTS "/etc", "/opt"
/* Entries a walk of the roots visits at most (a larger tree is walked that
 * far and reported as partial). */
#define HOST_MASKS_SCAN_MAX 200000
/* Dirs below a root a walk descends at most. */
#define HOST_MASKS_DEPTH_MAX 32

typedef enum HostMaskKind {
        HOST_MASK_SOCKET,       /* "socket": a Unix socket */
        HOST_MASK_PRIVATE_FILE, /* "private-file": a file others may not read (root daemons only) */
        HOST_MASK_PRIVATE_DIR,  /* "private-dir": a dir others may not list or enter (root daemons), or
                                 * one the walker may enter but not list (others: a socket in it is
                                 * reachable by name, unseen) */
        _HOST_MASK_KIND_MAX,
        _HOST_MASK_KIND_INVALID = -1,
} HostMaskKind;

const char *host_mask_kind_to_string(HostMaskKind k);
HostMaskKind host_mask_kind_from_string(const char *s);

typedef struct HostMask {
        char *path;             /* absolute, as found (no symlink followed below the root) */
        HostMaskKind kind;
} HostMask;

typedef struct HostMaskList {
        HostMask *items;        /* sorted by path (strcmp) */
        size_t n;
        bool partial;           /* the walk stopped at HOST_MASKS_SCAN_MAX entries */
} HostMaskList;

void host_mask_list_done(HostMaskList *l);
/* Set path's kind (insert or replace), keeping the order. -ENOMEM. */
int host_mask_list_set(HostMaskList *l, const char *path, HostMaskKind kind);
/* Remove path and, with below, every entry under it. Returns how many went. */
size_t host_mask_list_remove(HostMaskList *l, const char *path, bool below);
/* A copy of src into *dst (which is overwritten). -ENOMEM. */
int host_mask_list_copy(const HostMaskList *src, HostMaskList *dst);

/* What an entry of a scanned dir is to the sandbox, from its lstat:
 * HOST_MASK_SOCKET, HOST_MASK_PRIVATE_FILE / _DIR (private_files only), or
 * _HOST_MASK_KIND_INVALID for nothing to hide. */
HostMaskKind host_mask_classify(const struct stat *st, bool private_files);
/* Whether a walk needs the entry's lstat to classify it, from its d_type
 * (DT_UNKNOWN always; regular files and dirs only with private_files). */
bool host_mask_needs_stat(unsigned char d_type, bool private_files);

/* Walk the roots (HOST_MASKS_ROOTS) and fill *ret: no symlink
 * followed, at most max_entries entries, depth <= HOST_MASKS_DEPTH_MAX;
 * private dirs are walked too (a socket in one is listed). Blocking: the
 * shim's fallback, never from the daemon's loop. 0 or -ENOMEM. */
int host_masks_scan(size_t max_entries, bool private_files, HostMaskList *ret);
