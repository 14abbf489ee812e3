#pragma once
/* The launch spec: everything taskferry-shim needs to start one worker.
 * The daemon serializes it as one JSON document into a sealed memfd passed
 * to the shim as fd 3 (`taskferry-shim --spec-fd 3 --status-fd 4`). It holds
 * the prompt and environment values, so it is never written to a file and
 * never put on a command line (DESIGN.md "taskferry-shim").
 *
 * JSON shape (keys in this order; null where absent):
 * {
 *   "taskId": "oc_...",
 *   "executor": "pi" | "opencode" | "shell",
 *   "model": str|null, "variant": str|null, "sessionId": str|null,
 *   "prompt": str,
 *   "directory": "/abs/launch/dir",
 *   "env": ["NAME=value", ...],            complete worker environment
 *   "logPath": "<state>/logs/<id>.ndjson",
 *   "taskDir": "<state>/tasks/<id>",        shim writes launch.json and exit.json here
 *   "promptFile": "<state>/prompts/<id>.prompt.txt",  used when unsandboxed (0600, deleted by the daemon at settle)
 *   "sandbox": null | {
 *       "uid": N, "gid": N,                  our real ids
 *       "tmpfs": ["/abs", ...],              masked dirs, in order (deny-list that exists, runtime dir, cache dir)
 *       "socketPath": str|null,              bound back read-write (file only) for nested dispatch
 *       "rwBinds": ["/abs", ...],            bound read-write at the same path (output dir, ...)
 *       "roBinds": ["/abs", ...],            bound read-only at the same path
 *       "overlay": null | {"lower": D, "upper": U, "work": W},   copy-on-write overlay of "directory"
 *       "shareNet": true
 *   }
 * }
 *
 * launch.json (written by the shim atomically, 0600, before the worker runs):
 *   {"shimPid": N, "workerPid": N, "preDispatchHead": sha|null, "overlayMethod": "bwrap"|"userns"|null,
 *    "startedAt": ISO}
 * The same object is written as one line to the status fd.
 *
 * exit.json (written by the shim atomically, 0600, after the worker exited and
 * its stdout was drained into the log):
 *   {"exitCode": N|null, "signal": "SIGTERM"|null, "spawnError": str|null, "endedAt": ISO}
 * spawnError is set when the worker could not be started (bwrap missing,
 * overlay mount failed, exec failed); exitCode and signal are then null. */

#include <stdbool.h>
#include <sys/types.h>
#include <json-c/json.h>

typedef struct launch_overlay {
        char *lower, *upper, *work;
} launch_overlay;

typedef struct launch_sandbox {
        uid_t uid;
        gid_t gid;
        char **tmpfs;     /* strv */
        char *socket_path;
        char **rw_binds;  /* strv */
        char **ro_binds;  /* strv */
        launch_overlay *overlay; /* NULL: plain --bind of directory */
        bool share_net;
} launch_sandbox;

typedef struct launch_spec {
        char *task_id, *executor, *model, *variant, *session_id, *prompt, *directory;
        char **env;       /* strv */
        char *log_path, *task_dir, *prompt_file;
        launch_sandbox *sandbox; /* NULL: --no-sandbox */
} launch_spec;

/* Serialize / parse (strict: wrong types → -EBADMSG). */
int launch_spec_to_json(const launch_spec *s, json_object **ret);
int launch_spec_from_json(json_object *j, launch_spec **ret);
void launch_spec_free(launch_spec *s);

/* Write the serialized spec into a sealed memfd; returns the fd (>= 0) or -errno. */
int launch_spec_to_memfd(const launch_spec *s);
/* Read and parse the spec from fd (reads to EOF from offset 0). */
int launch_spec_read_fd(int fd, launch_spec **ret);
