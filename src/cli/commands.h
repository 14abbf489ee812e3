#pragma once
/* taskferry command implementations (spec protocol-cli.md §2.6): each turns
 * parsed arguments into RPCs and returns the value to print. */

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
        bool output_done; /* the command wrote its own output (diff): print nothing */
} cli_context;

/* The commands this build implements, "home" and "version" included;
 * NULL-terminated. A command added here needs its row in cli_commands
 * (cli-args.c) and its entry in docs/taskferry.1.md: test-cli-help checks. */
extern const char *const cli_implemented_commands[];
/* True for the commands this build implements (others answer
 * "<c> is not available in this build of taskferry yet"). */
bool cli_command_implemented(const char *command);

/* Run ctx->args->command. On success returns 0 and sets *ret_value (what to
 * print as TOON: the projection) and *ret_raw (what --json prints: the raw
 * daemon result, or the same value for local commands); both owned by the
 * caller. On failure returns < 0 with err set; *ret_raw may still be set
 * (accept's applied:false result, printed by --json). */
int cli_run_command(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);

void cli_context_done(cli_context *ctx);

/* One RPC over the context's connection (connecting, and auto-starting the
 * daemon, on first use). As cli_client_call. */
int cli_call(cli_context *ctx, const char *method, json_object *params, json_object **ret, cli_error *err);
/* task.dispatch (§2.6) with the caller's whole environment as `env`, the
 * prompt (prompt_len bytes), the directory (already normalized), and from
 * `options` (keyed like cli_args.options) each of model, variant,
 * sessionId, finalMarker, noSandbox, noOverlay, allowedDirs, rwBind,
 * roBind, executor, class, parentTaskId, diskMax that is set; `job` (NULL:
 * none) names the timer job it comes from (an addition to the spec's
 * params, shown by `job list`). The one dispatch builder: `dispatch` and
 * `job run` both call it. *ret: the daemon's result. As cli_call. */
int cli_dispatch(cli_context *ctx, json_object *options, const char *directory, const char *prompt, size_t prompt_len,
                 const char *job, json_object **ret, cli_error *err);
/* realpath(--directory or the workspace root of the cwd) (§2.5). */
int cli_workspace_directory(const cli_args *a, char **ret, cli_error *err);

/* cli-views.c: context (§2.6/§2.7), doctor [--full|--stats] (§2.6), init
 * (§2.10). Same contract as cli_run_command. */
int cli_run_context(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
int cli_run_doctor(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
int cli_run_init(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
/* projectContext (§2.7): {directory, counts, tasks (≤10 lean rows or the
 * none-found string), [next]}. A new object, NULL on ENOMEM. */
json_object *cli_project_context(json_object *raw);
/* The stats object aggregated from a task.list {} result (the fallback for a
 * daemon answering UNKNOWN_METHOD to task.stats). A new object. */
json_object *cli_stats_from_list(json_object *list, uint64_t now_ms);
