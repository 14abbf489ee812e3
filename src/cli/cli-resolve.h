#pragma once
/* What the CLI resolves itself before it connects: the directory a command
 * sends (dispatch and advisor: --directory or the current directory; the
 * workspace-wide commands: --directory or the workspace root), the
 * workspace root, the prompt `--prompt -` reads from stdin, and `wait`'s
 * default timeout. */

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "cli-error.h"

#define CLI_DEFAULT_WAIT_TIMEOUT_MS 900000

/* realpath(dir) that must be an existing directory. Usage errors
 * (exit 2): "directory does not exist: <dir>" (help "Use an existing
 * directory path for --directory (<errno text>)") and "path is not a
 * directory: <dir>" (help "Use --directory with a workspace directory, not
 * a file"). Returns 0 and a malloc'd path, -EINVAL with err set, -ENOMEM. */
int cli_normalize_directory(const char *dir, char **ret, cli_error *err);

/* Workspace root of dir (the main worktree of its repository, which all its
 * worktrees share; a submodule's own top level) as workspace.h computes it,
 * without running git. Not in a repository → dir itself (realpath'd), and the
 * notice "no git repository found for <dir>; using it directly" on stderr.
 * Returns 0 and a malloc'd path, -ENOMEM. */
int cli_workspace_root(const char *dir, char **ret);

/* Read the prompt for `--prompt -` from fd: fd must not be a TTY;
 * reads to EOF; strips one trailing "\n" or "\r\n"; an empty result is an
 * error. With `interrupted` non-NULL, SIGINT and SIGTERM are blocked except
 * while waiting for input (ppoll), so a handler that sets *interrupted ends
 * the wait whenever the signal comes: "--prompt - aborted while waiting for
 * stdin to close". All failures are usage errors (exit 2) naming `command`
 * in the help. Returns 0 with a malloc'd, NUL-terminated prompt of
 * *ret_len bytes; -EINVAL with err set; -ENOMEM. */
int cli_read_prompt(int fd, const char *command, volatile sig_atomic_t *interrupted,
                    char **ret, size_t *ret_len, cli_error *err);

/* `wait` default timeout chain without a --timeout flag: env value
 * (TASKFERRY_WAIT_DEFAULT_TIMEOUT_MS) "0" → 0 (send no timeoutMs: wait
 * forever); a finite positive Number() → 1 with that value; otherwise 1 with
 * 900000 (config.json not consulted: config_wait_default_timeout of
 * src/shared/config.h takes the config too). */
int cli_wait_default_timeout(const char *env_value, double *ret_ms);

/* config.json for the settings the CLI reads itself (waitDefaultTimeoutMs,
 * advisorContextChars): ${XDG_CONFIG_HOME:-~/.config}/taskferry/config.json
 * loaded and validated by config_load (src/shared/config.h); a missing file
 * is {}. A malformed file is an operational error (exit 1) with the
 * daemon's own text: -EIO with err set; -ENOMEM. */
int cli_load_config(json_object **ret, cli_error *err);
