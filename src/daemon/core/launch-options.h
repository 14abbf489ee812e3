#pragma once
/* Launch options (launch-options.c): what a dispatch asked of its sandbox and
 * scope, typed, from the dispatch to the launch; and the launch request file
 * that keeps them, with the caller's environment, for a queued task across a
 * daemon restart (tasks.json does not hold them: the environment is a
 * secret). Owns Task.launch and Task.caller_env. */

#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>

typedef struct Task Task;

typedef struct LaunchOptions {
        bool no_sandbox;          /* --no-sandbox */
        bool no_overlay;          /* --no-overlay */
        char **rw_bind;           /* --rw-bind then the deprecated allowedDirs, as given (NULL: none) */
        char **ro_bind;           /* --ro-bind, as given (NULL: none) */
        bool ro_bind_given;       /* the dispatch named roBind (its request file says null when not) */
        int64_t disk_max;         /* --disk-max, bytes (0: not given) */
        int64_t memory_max;       /* --memory-max, bytes (0: not given) */
        int64_t tasks_max;        /* --tasks-max (0: not given) */
        char *summary_session_id; /* a report summary: the summary session it continues (NULL: a new one) */
        char **allow_sockets;     /* --allow-socket, resolved (dispatch-policy.h; NULL: none) */
} LaunchOptions;

void launch_options_done(LaunchOptions *o);
/* Deep copy. 0, -ENOMEM (ret then empty). */
int launch_options_copy(const LaunchOptions *o, LaunchOptions *ret);

/* The request file's "launch" object: a summary's {summarySessionId?}, any
 * other task's {noSandbox, noOverlay, rwBind, roBind|null, diskMax?,
 * memoryMax?, tasksMax?, allowSockets?} (a number or list only when given). NULL on ENOMEM. */
json_object *launch_options_to_json(const LaunchOptions *o, bool summary);
/* Its inverse; absent keys keep their defaults, a value of another type is
 * ignored (the file is the daemon's own). -EBADMSG if o is no object,
 * -ENOMEM. */
int launch_options_from_json(json_object *o, LaunchOptions *ret);

/* The launch request: <state>/tasks/<id>/pending-launch.json, mode 0600 in
 * the 0700 task dir, {"launch": {...}, "env": {...} | null}, written at
 * dispatch before the record is flushed (temp + fsync + rename) and removed
 * when the task's shim is let go (run/launch.h launch_go: the task is durably
 * running and its launch spec holds the options and env), or when it settles
 * or is cancelled; so a running task whose request is still there never ran,
 * and the next daemon launches it again. The boot sweep removes one that a
 * task neither queued nor running left behind. The caller's env goes to disk
 * without the entries equal to the env file's (they are the env file's
 * secrets, which never go to disk, and it supplies them at spawn); values are
 * never logged.
 * save: 0 once durable, -errno (EROFS, ENOSPC, ...), the dir may be left.
 * load: fills Task.launch/caller_env; -ENOENT, -EBADMSG, -errno.
 * drop: frees both and removes the file (ENOENT is fine). */
#define LAUNCH_REQUEST_FILE "pending-launch.json"
int launch_request_save(Task *t);
int launch_request_load(Task *t);
void launch_request_drop(Task *t);
/* Is t's request file there? (true also when that cannot be told) */
bool launch_request_exists(Task *t);
