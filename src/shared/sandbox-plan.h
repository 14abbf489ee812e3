#pragma once
/* The sandbox's file system: which host paths a worker sees, in which order
 * they are mounted.
 *
 * The root is not the host's `/`: it is built from an allow-list, so that no
 * host Unix socket (under /run, /var/run, /var/tmp, the home dir: Docker,
 * podman, containerd, editors' and agents' sockets) exists in the sandbox at
 * all — a read-only mount does not stop connect(2), an absent file does.
 * In mount order:
 *
 *  1. system roots, read-only: each of SANDBOX_SYSTEM_ROOTS that exists
 *     (a symlink such as /bin -> usr/bin is recreated as a symlink), a root
 *     removed before bwrap runs left out rather than failing the launch;
 *  2. /var with an empty /var/tmp and /var/run -> ../run, an empty /run
 *     and /dev/shm (each a tmpfs: bwrap's root and /dev, which it cannot
 *     size, are read-only once set up, so that all a worker writes in
 *     memory is in a sized tmpfs the disk budget counts);
 *     the files /etc points into elsewhere (resolv.conf -> /run/systemd/...,
 *     hosts, localtime) bound read-only where they lie, if they are regular
 *     files (DNS and TLS setup keep working);
 *  3. the home dir as an empty tmpfs (writable, gone with the sandbox),
 *     also where a system root already shows it (a home under /opt), so that no
 *     entry of the host's home shows through (a home that is a system root,
 *     HOME=/opt, stays as shown, its deny-list masked); a home that is a
 *     symlink gets the same over the dir it leads to where a system root
 *     shows that (/home/u -> /opt/homes/u) — with the entries of
 *     SANDBOX_HOME_ALLOW (toolchains, git's config) and a->home_allow bound
 *     read-only where they exist and are directories or regular files;
 *  4. the git work tree the target lies in, read-only, when the target is a
 *     subdirectory of it (git then sees the whole repository) — unless that
 *     work tree is the home dir or above it (a home kept in git), then the
 *     target directory ("target" mount: its overlay, or a plain bind);
 *  5. the user's binds: rw (`--rw-bind`), then ro (`--ro-bind`);
 *  6. the masks, on top of everything above, so no bind unmasks them: each
 *     path of a->deny and a->structural that exists on the host and lies at
 *     or below something mounted above (a dir becomes an empty tmpfs, any
 *     other file /dev/null read-only; a symlink is masked where it points);
 *     then every user bind that lies inside a mask is bound again on top (a
 *     bind the user asked for overrides the deny-list; the caller warns);
 *  7. a->tail, taskferry's own re-exposures (the task's executor homes, its
 *     output dir, its socket), mounted last.
 *
 * Every path is absolute and canonical (the caller resolves symlinks of user
 * binds). Stats host paths; allocates; no other side effect. */

#include <stdbool.h>
#include <stddef.h>

#include "launch-spec.h"

/* System directories a worker sees read-only (those that exist). */
#define SANDBOX_SYSTEM_ROOTS "/usr", "/etc", "/opt", "/nix", "/sys", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"

/* Home-relative entries a worker sees read-only: git's config and the usual
 * per-user toolchain dirs (npm/nvm/volta/bun/deno/cargo/rustup/go/pyenv/asdf
 * installs, ~/.local/bin and ~/.local/lib, OpenCode's installer). No
 * credential file lives in these (~/.cargo/credentials* stays hidden:
 * only ~/.cargo/bin is listed). */
#define SANDBOX_HOME_ALLOW                                                                              \
        ".gitconfig", ".config/git", ".local/bin", ".local/lib", ".npm-global", ".nvm", ".volta", ".bun", \
                ".deno", ".cargo/bin", ".rustup", "go/bin", ".pyenv", ".asdf", ".opencode/bin"

/* The fixed deny-list below the home dir (the original's credential dirs,
 * plus file-shaped secrets: .npmrc, .netrc, .git-credentials, docker's and
 * kube's configs, ...): dirs are masked with an empty tmpfs, files with
 * /dev/null. .config/git/credentials is git-credential-store(1)'s second
 * default file, inside the allow-listed .config/git; .npm-global/etc/npmrc
 * is npm's global config (prefix ~/.npm-global), inside the allow-listed
 * .npm-global. */
#define SANDBOX_DENY_HOME                                                                                  \
        ".ssh", ".aws", ".config/gcloud", ".config/gh", ".gnupg", ".claude", ".local/share/keyrings", ".netrc", \
                ".git-credentials", ".config/git/credentials", ".docker/config.json", ".kube/config", ".npmrc", \
                ".npm-global/etc/npmrc", ".pypirc"

/* The full deny-list, in the original's order: state_dir, then home/<each of
 * SANDBOX_DENY_HOME>, then extra (TASKFERRY_SANDBOX_DENYLIST: dirs or
 * files; absolute entries as given, relative ones under home). Each entry
 * also appears resolved (realpath) when that differs, so a check against a
 * canonical path matches. strv, -ENOMEM. */
int sandbox_deny_list(const char *home, const char *state_dir, char *const *extra, char ***ret);

typedef struct sandbox_plan_args {
        const char *home;            /* the user's home dir */
        const char *directory;       /* the target dir */
        const char *work_tree;       /* the top of the git work tree around it, or NULL */
        char *const *home_allow;     /* extra entries: home-relative or absolute (TASKFERRY_SANDBOX_HOME_ALLOW) */
        char *const *rw_binds;       /* user rw binds (absolute, canonical, existing) */
        char *const *ro_binds;       /* user ro binds */
        char *const *deny;           /* deny-list: dirs or files (absolute) */
        char *const *structural;     /* taskferry's own dirs (state, runtime, overlay root, cache) */
        const sandbox_mount *tail;   /* mounted after the masks */
        size_t n_tail;
} sandbox_plan_args;

/* Build the mount list. *ret_warnings (may be NULL) gets one line per user
 * bind that re-exposes a masked path ("<bind> is inside the masked <mask>;
 * bound anyway (your --ro-bind/--rw-bind)"). -ENOMEM. */
int sandbox_plan_build(const sandbox_plan_args *a, sandbox_mount **ret, size_t *ret_n, char ***ret_warnings);

/* The Unix sockets under /etc and /opt, and a root daemon's files others may
 * not read there, are not in this plan: they come and go while tasks run,
 * so the shim masks them at mount time (host-masks.h, shim/mask-mount.h). */

/* Is host path p visible inside a sandbox with these mounts — at or below
 * the dest of a bind/ro-bind/overlay/target mount and not at or below a
 * later mask (tmpfs or mask-file)? Used by the launch preflight to tell a
 * binary that exists on the host but that the sandbox hides. Follows the
 * mounts' order; p must be canonical. */
bool sandbox_plan_path_visible(const sandbox_mount *m, size_t n, const char *p);
