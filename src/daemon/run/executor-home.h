#pragma once
/* Per-task executor homes: every sandboxed task gets writable homes of its
 * own under <cacheDir>/homes/<taskId>/, and nothing it writes there is ever
 * loaded by another task or reaches the user's real dirs (one data home
 * shared by every task would let a worker plant a plugin or an extension
 * that later tasks load, and read other tasks' sessions).
 *
 *   <H> = <cacheDir>/homes/<taskId>
 *   every executor  UV_CACHE_DIR=<H>/uv/cache  UV_TOOL_DIR=<H>/uv/tools
 *   pi              PI_CODING_AGENT_DIR=<H>/pi; every entry of the user's agent
 *                   dir (PI_CODING_AGENT_DIR, default ~/.pi/agent: auth.json,
 *                   models.json, settings.json, extensions/, ...) read-only
 *                   inside it, except sessions/ (per task, writable) and lock
 *                   files (pi's locks land in <H>/pi, next to the read-only
 *                   files, and succeed)
 *   opencode        XDG_DATA_HOME=<H>/opencode/data (the user's
 *                   $XDG_DATA_HOME/opencode/auth.json read-only inside),
 *                   XDG_CACHE_HOME=<H>/opencode/cache, XDG_STATE_HOME=<H>/opencode/state;
 *                   the user's config dir ($XDG_CONFIG_HOME/opencode, default
 *                   ~/.config/opencode) at its own path as an overlay whose
 *                   upper dir is <H>/opencode/config-upper: OpenCode's writes at
 *                   start (.gitignore, its plugin install) land there
 *
 * Resume (--session-id): the home of the task that last ran that session
 * seeds the new one (pi: <H'>/pi/sessions, OpenCode: <H'>/opencode/data),
 * copied by the shim before the worker starts, so no writable store is
 * shared. A seed source reached through a symlink below <H'> (the earlier
 * task planted it) is no seed. executor_home_release() removes a home except those two dirs.
 *
 * Sources are exposed only when lstat shows a directory, or a regular file
 * with one link (a symlink is followed only to a directory or single-link
 * file that lies outside every deny-listed and structural dir). */

#include <stddef.h>

#include "launch-spec.h"

typedef struct executor_home_args {
        const char *executor;        /* executor id: "pi", "opencode", anything else gets only the uv dirs */
        const char *task_id;
        const char *cache_dir;       /* taskferry's cache dir */
        const char *home;            /* the user's home */
        char *const *env;            /* the worker's environment: its PI_CODING_AGENT_DIR / XDG_* pick the user's dirs */
        const char *seed_root;       /* <H'> of the task whose session this one resumes, or NULL */
        char *const *deny;           /* never exposed: deny-list and structural dirs */
} executor_home_args;

typedef struct executor_home {
        char *root;                  /* <H> */
        char **dirs;                 /* to create (mkdir -p 0700), parents first */
        sandbox_seed *seeds;
        size_t n_seeds;
        sandbox_mount *mounts;       /* mounted after the masks (sandbox-plan.h step 7) */
        size_t n_mounts;
        char **env;                  /* NAME=value to set in the worker's environment */
} executor_home;

/* <cacheDir>/homes/<taskId>, malloc'd (NULL on ENOMEM). */
char *executor_home_root(const char *cache_dir, const char *task_id);
/* Plan the homes of one task (stats host paths; creates nothing). -ENOMEM. */
int executor_home_plan(const executor_home_args *a, executor_home *ret);
void executor_home_done(executor_home *h);
/* The dirs of <H> a worker can write (what its disk budget counts): never
 * an overlay's work dir, which overlayfs keeps at mode 000. strv, -ENOMEM. */
int executor_home_writable_dirs(const char *root, char ***ret);
/* Remove <H> except what a later resume needs (pi/sessions, opencode/data).
 * Missing home: 0. -errno. Blocking: call from a job or the shim. */
int executor_home_release(const char *root);
