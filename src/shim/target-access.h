#pragma once
/* Can the sandboxed worker reach its target directory?
 *
 * The sandbox shows the target at its own path, and every dir above it that
 * a system root shows (/opt/tmp.XXXXXX for a repository under /opt) is the
 * host's, with its mode; the dirs above it that no mount shows are bwrap's
 * (0755). The worker has no capability in the sandbox, also when the daemon
 * runs as root, so a host dir above the target that its uid may not enter
 * (mode 0700 of another user) leaves bwrap with "Can't chdir". That is told
 * before bwrap runs, with the dir, its mode and owner, and the fix.
 *
 * The check reads the mode bits against the shim's uid, gid and
 * supplementary groups (the worker's); a dir with an ACL is given the
 * benefit of the doubt (bwrap then decides). */

#include "launch-spec.h"

/* 0 when every dir above directory that the plan (m, n) shows from the host
 * lets the worker enter; -EACCES with *reason ("error: ...\nhelp: ...",
 * malloc'd) naming the first that does not; -ENOMEM. */
int target_access_check(const char *directory, const sandbox_mount *m, size_t n, char **reason);
