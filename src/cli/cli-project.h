#pragma once
/* Lean projections the CLI prints instead of raw daemon results, as the
 * original taskferry prints them. Every function takes the daemon result
 * (borrowed, not modified) and returns a NEW object with keys in the original's
 * order (TOON prints them as inserted); NULL on ENOMEM. A key the JavaScript
 * original would set to `undefined` is emitted as JSON null (TOON prints
 * undefined fields as null). */

#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>

#define CLI_DEFAULT_LIST_LIMIT 30

/* The human-facing changeset column of list, the workspace view and status
 * (taskferry's addition to the original's projections): the record's
 * changesetStatus, except "none" for a task without one and
 * CLI_CHANGESET_NOT_EXTRACTED for a queued/running task whose overlay exists
 * ("pending" on the wire) but whose patch is only extracted at settlement.
 * Returns a static string or changeset_status itself. */
#define CLI_CHANGESET_NOT_EXTRACTED "not extracted yet"
const char *cli_changeset_text(const char *status, const char *changeset_status);

/* leanStatus (status, wait): full → the raw detail with overlayDirs reduced
 * to {root, tmpRoot}; else {id, status, startedAt, [exitCode, signal],
 * [changesetStatus: "pending" once settled, or changeset: "not extracted yet"
 * while queued/running], [changesetError], [check gate fields],
 * [projectConfigWarning], [outputDir], [log trio], [outputTail trio], [note],
 * next}. */
json_object *cli_lean_status(json_object *detail, bool full);

/* leanResult (result): raw copy when full or raw (--fields/--diff); else the
 * detail without narration/narrationTruncated and with `next` replaced in
 * place or appended. */
json_object *cli_lean_result(json_object *detail, bool full, bool raw);

/* projectList (list): {[directory], counts, tasks, [next]} with rows
 * {id, status, model, startedAt, [changeset], [failureReason]} (changeset:
 * cli_changeset_text, only when the daemon's row has changesetStatus) cut to `limit` rows
 * (limit <= 0 → no cut); empty row array → "none found in this workspace";
 * string tasks pass through. next: server-capped hint when sum(counts) >
 * rows shipped, else the --limit hint when rows were cut. */
json_object *cli_project_list(json_object *value, int64_t limit);

/* Workspace view for `taskferry` without arguments:
 * {workspace, bin, description, counts, tasks (≤30 rows or the none-found
 * string), next[]}; next also names `taskferry diff` when a row's changeset
 * is pending. bin is shown with a $HOME prefix as "~". */
json_object *cli_home_view(json_object *value, const char *workspace, const char *bin, const char *home);

/* Error text for an accept answered with applied:false (exit 1):
 * "error: changeset for task <id> failed to apply\n  reason: <l1>\n  <l2>...\n
 *  help: the task is still pending -- ...". reason NULL/empty → "the target
 * directory rejected the patch"; reason is trimmed. malloc'd, NULL on ENOMEM. */
char *cli_accept_failure_text(const char *task_id, const char *reason);

/* JavaScript truthiness of a JSON value (NULL → false, "" → false, 0 → false). */
bool cli_json_truthy(json_object *v);
