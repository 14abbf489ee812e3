#pragma once
/* The commands that talk to the daemon: each turns the parsed arguments into
 * RPCs and returns what to print; and the context they share (the
 * connection, opened on the first call). */

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>

#include "cli-args.h"
#include "cli-client.h"
#include "cli-error.h"
#include "paths.h"

typedef struct cli_context {
        const cli_args *args;
        const char *argv0;                  /* for the workspace view's `bin` */
        volatile sig_atomic_t *interrupted; /* set by the SIGINT/SIGTERM handler */
        tf_paths paths;
        cli_client client;
        bool connected;
        bool output_done; /* the command wrote its own output (diff, watch): print nothing */
} cli_context;

void cli_context_done(cli_context *ctx);

/* One RPC over the context's connection (connecting, and auto-starting the
 * daemon, on first use). As cli_client_call; a command whose row lacks
 * CLI_VERB_DAEMON gets -EPERM (an internal error: its row is wrong). */
int cli_call(cli_context *ctx, const char *method, json_object *params, json_object **ret, cli_error *err);
/* `method` with params {directory: the workspace directory
 * (cli_workspace_directory)}; *ret_directory (NULL: not wanted) gets that
 * directory, malloc'd. As cli_call. */
int cli_call_workspace(cli_context *ctx, const char *method, char **ret_directory, json_object **ret, cli_error *err);
/* task.dispatch with the caller's whole environment as `env`, the prompt
 * (prompt_len bytes), the directory (already normalized), and from
 * `options` (keyed like cli_args.options) each of model, variant,
 * sessionId, finalMarker, noSandbox, noOverlay, allowedDirs, rwBind,
 * roBind, executor, class, parentTaskId, diskMax, memoryMax, tasksMax that
 * is set; `job` (NULL: none) names the timer job it comes from (shown by
 * `job list`). The one dispatch builder: `dispatch` and `job run` both
 * call it. *ret: the daemon's result. As cli_call. */
int cli_dispatch(cli_context *ctx, json_object *options, const char *directory, const char *prompt, size_t prompt_len,
                 const char *job, json_object **ret, cli_error *err);
/* realpath(--directory, or the workspace root of the current directory):
 * the directory the workspace-wide commands send. */
int cli_workspace_directory(const cli_args *a, char **ret, cli_error *err);

/* The commands of this file, each the `run` of its row in cli-verbs.c
 * (cli_verb_run_fn). home: task.list of the workspace as the workspace view
 * (cli_home_view); version: {name, version, protocolVersion}, no daemon;
 * status and wait: the lean status (the daemon's with --full); result: the
 * lean result; list: the projected list; diff writes the patch itself; the
 * others print the daemon's result. */
int cli_run_home(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
int cli_run_version(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
int cli_run_dispatch(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
int cli_run_cancel(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
int cli_run_accept(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
int cli_run_reject(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
int cli_run_output(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
int cli_run_wait(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
int cli_run_advisor(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
int cli_run_status(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
int cli_run_tail(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
int cli_run_summary(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
int cli_run_result(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
int cli_run_diff(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
int cli_run_list(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
