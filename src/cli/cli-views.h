#pragma once
/* The workspace and installation views: `context` (the workspace's tasks for
 * an agent hook), `doctor` (daemon health and local checks, or with --stats
 * the task history) and `init` (a .taskferry.toml for this repository).
 * The cli_run_* are the `run` of their rows in cli-verbs.c (cli_verb_run_fn). */

#include <stdint.h>
#include <json-c/json.h>

#include "cli-error.h"
#include "commands.h"

/* context [--directory <path>] [--format toon|claude-hook|codex-hook]:
 * task.context {directory: the workspace} projected (cli_project_context);
 * claude-hook wraps its TOON as {hookSpecificOutput:{hookEventName:
 * "SessionStart", additionalContext}}, codex-hook as {additionalContext}.
 * *ret_raw: the daemon's result. */
int cli_run_context(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
/* doctor [--full]: system.health's result (none if it fails) with
 * task.stats's resourceLimits, [cliVersion, protocolVersion with --full],
 * integrations {claude, playwrightMcpIsolation {opencode, claudeCode}} and
 * the warnings they call for. doctor --stats: task.stats (a daemon without
 * it: its task.list aggregated here) with the rates as "xx.x%". */
int cli_run_doctor(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
/* init: write .taskferry.toml in the current directory with a check command
 * detected from the project (package.json, pyproject.toml, go.mod,
 * Cargo.toml, deno.json(c), bunfig.toml, a makefile's check/test target,
 * CMakeLists.txt; asked on a terminal, commented out otherwise), in the form
 * project_config_load (project-config.h) reads; never overwrites a file or
 * follows a link there. Needs no daemon. */
int cli_run_init(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);

/* The context view: {directory, counts, tasks (at most 10 lean rows, or the
 * none-found string), [next]}, cut and hinted as `list` is. A new object,
 * NULL on ENOMEM. */
json_object *cli_project_context(json_object *raw);
/* The stats object aggregated from a task.list {} result (the fallback for a
 * daemon answering UNKNOWN_METHOD to task.stats); now_ms: wall clock ms. A
 * new object. */
json_object *cli_stats_from_list(json_object *list, uint64_t now_ms);
