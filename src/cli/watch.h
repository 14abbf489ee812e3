#pragma once
/* taskferry watch: event.subscribe, then one
 * line per event until SIGINT/SIGTERM (exit 0), or with --task-id until the
 * task's first terminal event (after subscribing it checks task.status and
 * prints a synthetic terminal event when the task has settled already).
 * Formats: toon (default) lines "<HH:MM:SS> <taskId> [<prev> -> ]<status>",
 * "<time> <taskId> <status>: <activity>" or "... summary unavailable (<e>)"
 * (other event types as TOON); ndjson: the event object per line.
 * --flush-interval: the latest event per task, flushed every interval (an
 * ndjson flush is one {"type":"watch.flush","timestamp","events"} line). */

#include <stdbool.h>
#include <json-c/json.h>

#include "cli-args.h"
#include "cli-error.h"
#include "commands.h"

/* The line printed for event (malloc'd, no "\n"; NULL on ENOMEM). color:
 * stdout is a TTY: ANSI status colours, and the worker's text (activity,
 * a summary's error) with its control bytes shown visibly
 * (cli_escape_controls). */
char *watch_format_line(json_object *event, bool ndjson, bool color);
/* "HH:MM:SS" in local time (hour 0 printed as 24), NULL if iso is unparseable. */
char *watch_time_prefix(const char *iso);
/* The `watch` command (its row's `run` in cli-verbs.c, cli_verb_run_fn):
 * streams the lines itself and sets ctx->output_done; 0 (exit 0) or < 0
 * with err. */
int cli_run_watch(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
