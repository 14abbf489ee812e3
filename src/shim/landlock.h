#pragma once
/* Landlock IPC scoping for sandboxed workers (landlock(7); kernel
 * Documentation/userspace-api/landlock.rst, ABI 6, Linux 6.12).
 *
 * A worker shares the host's network namespace (its model provider needs the
 * network), and with it the host's abstract AF_UNIX sockets, which no mount
 * can hide (X11, some D-Bus buses, agents). A Landlock domain scoped with
 * LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET cannot connect to abstract sockets
 * created outside the domain, and with LANDLOCK_SCOPE_SIGNAL cannot signal
 * processes outside it. No filesystem access is restricted, so the later
 * mounts of bwrap still work. */

/* Scope the calling process (and everything it execs) as above. Sets
 * no_new_privs first (required without CAP_SYS_ADMIN; bwrap sets it anyway).
 * Returns 1 if applied, 0 if the kernel's Landlock ABI is older than 6 or
 * Landlock is disabled (nothing done), -EPERM if a seccomp filter forbids the
 * Landlock syscalls (e.g. inside systemd-nspawn), other -errno on failure. */
int landlock_scope_ipc(void);
