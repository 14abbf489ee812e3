#pragma once
/* Seeding a task's overlay upper dirs from another task's (launch-spec.h
 * "upperSeeds"): fix-forward from a parent task's pending changeset
 * (taskferry-dispatch(1) --parent-task). The copy is an overlay upper dir as
 * overlayfs reads it: whiteouts (character devices 0:0, which an
 * unprivileged process may create since Linux 5.8), opaque directories
 * (the trusted. or user.overlay.opaque xattr), modes, times and symlinks
 * kept. Runs in the shim on the host, before the overlay is mounted and
 * while the upper dirs are still empty. */

#include "launch-spec.h"

/* Copy every seed's src tree into its dest dir (`cp -a --no-dereference
 * --reflink=auto src/. dest`, which keeps devices, xattrs and modes). All or
 * nothing: when one copy fails, every dest is emptied again (the worker then
 * starts from no seed at all, never from part of one) and the return is
 * -errno with *reason naming the seed and cp's words. 0 on success (also
 * for n == 0). */
int upper_seeds_copy(const sandbox_seed *seeds, size_t n, char **reason);
