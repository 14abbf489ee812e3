#pragma once
/* Launch (launch.c): from an admitted task to its running shim. */

typedef struct Task Task;

/* launch.c (DESIGN.md "Data flow of one dispatch" steps 3–5): env, sandbox,
 * overlay, launch spec, spawn of taskferry-shim. */
/* Launch a task the scheduler admitted: on success it is running and
 * watched (monitor_watch_shim); on failure it is settled as a spawn error. */
void launch_task(Task *t);
/* <state>/prompts/<id>.prompt.txt (malloc'd, NULL on ENOMEM). */
char *task_prompt_file_path(Task *t);
/* The launch request: what a queued task needs to launch that tasks.json
 * does not hold — its launch options (Task.launch: noSandbox, noOverlay,
 * rwBind, roBind, diskMax) and the caller's environment (Task.caller_env:
 * secrets; on disk without the entries equal to the env file's, which
 * never goes to disk and supplies them at spawn) — in <state>/tasks/<id>/pending-launch.json, mode 0600 in the
 * 0700 task dir, as {"launch": {...}, "env": {...} | null}. Written at
 * dispatch before the record is flushed (temp + fsync + rename); removed
 * once the task's launch spec is built and it is durably running, or when
 * it settles or is cancelled; the boot sweep removes one a task no longer
 * queued left behind. Values are never logged.
 * save: 0 once durable, -errno (EROFS, ENOSPC, ...), the dir may be left.
 * load: fills Task.launch/caller_env; -ENOENT, -EBADMSG, -errno.
 * drop: frees both and removes the file (ENOENT is fine). */
#define LAUNCH_REQUEST_FILE "pending-launch.json"
int launch_request_save(Task *t);
int launch_request_load(Task *t);
void launch_request_drop(Task *t);
