#pragma once
/* Launch (launch.c): from an admitted task to its spawned shim: the
 * worker's environment, the sandbox and overlay plan, the launch spec, the
 * fork of taskferry-shim. It does the work; the lifecycle moves the task
 * (lifecycle.h task_start). */

#include <stdbool.h>
#include <sys/types.h>
#include <json-c/json.h>

typedef struct Manager Manager;
typedef struct Task Task;

/* What a prepared launch holds until the spawn. */
typedef struct LaunchPlan {
        int spec_fd;  /* the launch spec in a sealed memfd (launch-spec.h), -1: none */
} LaunchPlan;
#define LAUNCH_PLAN_INIT {.spec_fd = -1}
void launch_plan_done(LaunchPlan *p);

/* Everything before the fork: the kind's and the sandbox's preconditions,
 * the worker env (env file, daemon, caller; the per-task variables), the
 * task dir, the overlay dirs (recorded as overlayDirs), the sandbox plan
 * (masks, binds, homes, the task's socket through Manager.task_sockets, a
 * preflight of the worker's binary), the disk budget (recorded as
 * diskMaxBytes) and the spec. 0; -errno with *reason (malloc'd): the
 * spawnError the task gets. */
int launch_prepare(Task *t, LaunchPlan *plan, char **reason);

/* A check gate's output: the log is kept to about this many bytes of its
 * tail (the shim trims it), of which checkOutputTail takes the last lines. */
#define CHECK_OUTPUT_MAX_BYTES (256 * 1024)
/* SIGTERM → SIGKILL of a check that ran out of time or is stopped (ms). */
#define CHECK_KILL_GRACE_MS 5000
/* Prepare the run of the project's check command over t's settled
 * changeset: `sh -c <check>` through taskferry-shim in the sandbox the
 * worker had (its masks, binds, the project's read-only binds as the policy
 * allows, its executor homes), but with no socket, no output dir, an
 * environment of the daemon's own without TASKFERRY_* or the denylist, and
 * an overlay whose lower layers are the target and the worker's upper dir
 * (so the check writes nothing the changeset holds). Its state lives in
 * tf_path_check_dir (emptied first): output.log, launch.json, exit.json.
 * 0; -errno with *reason (malloc'd). */
int launch_prepare_check(Task *t, const char *check, LaunchPlan *plan, char **reason);

typedef struct LaunchedShim {
        pid_t pid;
        int status_fd;  /* the read end of its status pipe (monitor.h) */
        int hold_fd;    /* the write end of the pipe it waits on before exec (scope.h scope_start) */
} LaunchedShim;
/* Fork the shim with the plan's spec (taken). The child waits on the hold
 * pipe: on launch_go's byte it execs taskferry-shim in a new session with
 * the user's soft fd limit and only the spec and status fds; on EOF (the
 * hold fd closed without it: a daemon that died first) it exits, running
 * nothing. 0; -errno with *reason. */
int launch_spawn(Task *t, LaunchPlan *plan, LaunchedShim *ret, char **reason);

/* Let a spawned shim exec: drop t's launch request (launch-options.h; from
 * here on a restarted daemon re-adopts the shim instead of launching the
 * task again), then write the go byte to *hold_fd and close it (-1 after).
 * Nothing if *hold_fd is -1. */
#define LAUNCH_GO_BYTE 'g'
void launch_go(Task *t, int *hold_fd);

/* A worker's environment before its per-task variables, lowest layer
 * first, each entry winning over the layers below: the env file's current
 * values (env-file.h), the daemon's own environment, then the caller's env
 * frozen at dispatch (caller_env: an object of strings, NULL: none); the
 * daemon's denylist applies to every layer, and PATH, HOME and taskferry's
 * path variables come only from the daemon's own. A strv; -ENOMEM. */
int launch_env_layers(Manager *m, json_object *caller_env, char ***ret);

/* The fixed instruction a report summary's worker gets on its command line
 * (not a secret: the same for every summary; the transcript is the
 * attachment, its snapshot). */
extern const char summary_worker_prompt[];

/* Remove t's overlay (its record's overlayDirs; nothing without one):
 * overlay_dirs_remove, only where the record names t's own
 * <tmpRoot>/taskferry-cow-<id>. 0, -EPERM (the record names another), -errno
 * of the removal. The record is left as it is. */
int launch_overlay_remove(const Task *t);
