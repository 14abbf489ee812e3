#pragma once
/* The launch spec: everything taskferry-shim needs to start one worker.
 * The daemon serializes it as one JSON document into a sealed memfd passed
 * to the shim as fd 3 (`taskferry-shim --spec-fd 3 --status-fd 4`). It holds
 * the prompt and environment values, so it is never written to a file and
 * never put on a command line.
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
 *   "promptFile": "<state>/prompts/<id>.prompt.txt"|null,  used when unsandboxed (0600, O_EXCL; deleted by the
 *                                           daemon at settle); a sandboxed worker reads the prompt from a memfd
 *                                           bound at SANDBOX_PROMPT_PATH instead (sandbox.h)
 *   "sandbox": null | {
 *       "uid": N, "gid": N,                  our real ids
 *       "mounts": [{"op": OP, "src": str|null, "dest": "/abs", "upper": str|null, "work": str|null,
 *                   "stage": str|null}, ...]
 *                                            the sandbox's file system, in mount order (sandbox-plan.h
 *                                            builds it, sandbox.h turns it into bwrap options); OP is one
 *                                            of sandbox_mount_op_to_string()
 *       "dirs": ["/abs", ...],               created (mkdir -p, 0700) by the shim before bwrap runs:
 *                                            the task's executor homes (executor-home.h)
 *       "seeds": [{"src": "/abs", "dest": "/abs"}, ...]
 *                                            trees the shim copies before bwrap runs (a resumed session)
 *       "upperSeeds": [{"src": "/abs", "dest": "/abs"}, ...]   optional (absent: none)
 *                                            overlay upper dirs the shim copies into this task's upper dirs
 *                                            before the overlay is mounted, whiteouts, opaque directories and
 *                                            modes kept (a parent task's result: --parent-task); a failed
 *                                            copy is a spawn error, with the uppers emptied again
 *       "overlay": null | {"lower": D, "upper": U, "work": W},   copy-on-write overlay of "directory"
 *                                            (mounted where the "target" mount stands)
 *       "shareNet": bool,                    network.mode is "host"
 *       "tmpSize": N                         optional (absent: the kernel's default, half the RAM): the size in
 *                                            bytes of every tmpfs the sandbox gets (/tmp, /var/tmp, masked
 *                                            dirs); their use counts in the disk budget (disk-watch.h)
 *       "network": {"mode": "proxy"|"none"|"host", "allow": ["host:port", ...]}
 *                                            optional (absent: "host" when shareNet, else "none"); the
 *                                            sandbox's network (net-policy.h): the shim makes the network
 *                                            namespace and, in mode "proxy", the egress proxy serving it,
 *                                            which writes <taskDir>/network.json (egress-proxy.h)
 *       "hostMasks": [{"path": "/abs", "kind": "socket"|"private-file"|"private-dir"}, ...]
 *                                            optional (absent: the shim walks /etc and /opt itself): what
 *                                            the daemon knows the sandbox must hide of the host's scanned
 *                                            roots, current at the launch (host-masks.h, run/host-watch.h)
 *   },
 *   "attachment": "/abs"                     optional, a report summary's only: the
 *                                            snapshot file; the worker runs `opencode run --pure ... -f <it>`
 *                                            with the (fixed, non-secret) summary instruction as its prompt
 *   "check": true, "logMaxBytes": N          optional, a check gate's only (both or neither): the run of
 *                                            the project's check over a settled task's changeset; the shim
 *                                            takes no base snapshot and keeps the log to its last N bytes
 *                                            (4096..2^30), trimming its front as it grows
 *   "logBudget": N                           optional: the log is kept to N bytes (>= LAUNCH_LOG_BUDGET_MIN),
 *                                            its head and its tail with a marker between them (log-pipe.h)
 *   "limits": {"memoryMax": N, "tasksMax": N} optional: the task's limits in bytes and in processes and
 *                                            threads (0: none), which the shim makes hold where no systemd
 *                                            scope does (task-limits.h)
 *   "disk": null | {                         the task's disk budget (disk-budget.h); optional on read
 *       "maxBytes": N,                       budget in bytes, 1..2^53-1
 *       "graceMs": N,                        SIGTERM → SIGKILL delay when the worker is stopped for it
 *       "paths": ["/abs", ...]               trees that count (overlay upper dir, output dir)
 *   }
 * }
 *
 * launch.json (written by the shim atomically, 0600, as soon as the worker was exec'd):
 *   {"shimPid": N, "workerPid": N, "preDispatchHead": sha|null, "overlayMethod": "bwrap"|"userns"|null,
 *    "startedAt": ISO}
 * The same object is written as one line to the status fd, which the shim
 * then closes. When the worker cannot be started, there is no launch.json and
 * no line: the status fd reaches EOF after exit.json has been written.
 *
 * exit.json (written by the shim atomically, 0600, after the worker exited and
 * its stdout was drained into the log):
 *   {"exitCode": N|null, "signal": "SIGTERM"|null, "spawnError": str|null, "endedAt": ISO
 *    [, "stopReason": "disk_quota_exceeded"|"memory_limit_exceeded"|"tasks_limit_exceeded",
 *       "stopDetail": str|null]}
 * stopReason/stopDetail are present only when the shim stopped the worker
 * itself (over its disk budget, or a filesystem below its free-space floor;
 * at its memory or tasks limit, task-limits.h);
 * optional on read.
 * spawnError is set when the worker could not be started (bwrap missing,
 * overlay mount failed, exec failed); exitCode and signal are then null. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <json-c/json.h>

#include "host-masks.h"
#include "net-policy.h"

typedef struct launch_overlay {
        char *lower, *upper, *work;
        char *lower_top; /* NULL, or a second lower layer stacked on top of lower (a check gate's: the
                          * worker's upper dir, so the check sees the worker's result and writes none of it) */
} launch_overlay;

/* One entry of the sandbox's mount list (sandbox-plan.h says what each
 * entry is for; sandbox.h says which bwrap options each becomes). */
typedef enum sandbox_mount_op {
        SANDBOX_MOUNT_RO_BIND,   /* "ro-bind": src (host) read-only at dest */
        SANDBOX_MOUNT_BIND,      /* "bind": src (host) read-write at dest */
        SANDBOX_MOUNT_TMPFS,     /* "tmpfs": an empty tmpfs at dest (a masked dir) */
        SANDBOX_MOUNT_DIR,       /* "dir": an empty directory at dest on the sandbox's root tmpfs */
        SANDBOX_MOUNT_SYMLINK,   /* "symlink": dest is a symlink whose target is src */
        SANDBOX_MOUNT_MASK_FILE, /* "mask-file": /dev/null read-only over dest (a masked file) */
        SANDBOX_MOUNT_OVERLAY,   /* "overlay": overlayfs of lower=src, upper, work at dest; without bwrap's
                                  * --overlay the shim mounts it at stage (a host dir, in its private mount
                                  * namespace) and bwrap binds stage at dest */
        SANDBOX_MOUNT_TARGET,    /* "target": the target directory (dest): the task's overlay, or a plain bind */
        SANDBOX_MOUNT_RO_BIND_TRY, /* "ro-bind-try": as ro-bind, but nothing if src is gone by the launch
                                    * (a system root removed between the plan and bwrap) */
        _SANDBOX_MOUNT_OP_MAX,
        _SANDBOX_MOUNT_OP_INVALID = -1,
} sandbox_mount_op;

const char *sandbox_mount_op_to_string(sandbox_mount_op op);
sandbox_mount_op sandbox_mount_op_from_string(const char *s);
/* Whether op shows a host path at its dest: ro-bind, ro-bind-try, bind,
 * overlay (its lower dir) and target. */
bool sandbox_mount_op_shows_host(sandbox_mount_op op);

typedef struct sandbox_mount {
        sandbox_mount_op op;
        char *src;               /* ro-bind, bind, overlay (lower): host path; symlink: the link's target */
        char *dest;              /* absolute path inside the sandbox */
        char *upper, *work, *stage; /* overlay only */
} sandbox_mount;

typedef struct sandbox_seed {
        char *src, *dest;        /* copy the tree src to dest (both absolute host paths) */
} sandbox_seed;

typedef struct launch_sandbox {
        uid_t uid;
        gid_t gid;
        sandbox_mount *mounts;
        size_t n_mounts;
        char **dirs;             /* strv */
        sandbox_seed *seeds;
        size_t n_seeds;
        sandbox_seed *upper_seeds; /* "upperSeeds" */
        size_t n_upper_seeds;
        launch_overlay *overlay; /* NULL: plain --bind of directory */
        bool share_net;          /* "shareNet": net.mode is NET_MODE_HOST (kept for older readers) */
        NetPolicy net;           /* "network" */
        bool have_host_masks;    /* "hostMasks" present */
        HostMaskList host_masks; /* "hostMasks" */
        /* not serialized: set by the shim where /proc/sys is read-only (a
         * container), so bwrap cannot disable user namespaces (sandbox.h) */
        bool userns_allowed;
        /* not serialized: set by the shim when it enters a user namespace of
         * its own only to make the network namespace (unprivileged, no
         * overlay to mount): bwrap then maps the ids back (sandbox.h) */
        bool own_userns;
        /* not serialized: set by the shim when it makes the sandbox's IPC
         * namespace itself, to cap its shared memory (limit-watch.h): bwrap
         * then keeps it instead of making one */
        bool own_ipc;
        uint64_t tmp_size;       /* "tmpSize": bytes of each tmpfs, 0: not set */
} launch_sandbox;

/* Free the contents of an array of mounts (and the array). */
void sandbox_mounts_free(sandbox_mount *m, size_t n);
/* Append a copy of (op, src, dest, upper, work, stage) to *m (length *n). -ENOMEM. */
int sandbox_mounts_push(sandbox_mount **m, size_t *n, sandbox_mount_op op, const char *src, const char *dest,
                        const char *upper, const char *work, const char *stage);
typedef struct launch_disk {
        uint64_t max_bytes;
        uint64_t grace_ms;
        char **paths;     /* strv */
} launch_disk;

typedef struct launch_limits {
        uint64_t memory_max;     /* bytes, 0: none */
        uint64_t tasks_max;      /* processes and threads, 0: none */
} launch_limits;

/* The smallest log budget: eight times the longest line the shim logs
 * (log-pipe.h), so that the quarter of the budget kept as the log's tail
 * holds a final line of that length and the lines after it. */
#define LAUNCH_LOG_BUDGET_MIN ((uint64_t) 64 << 20)

typedef struct launch_spec {
        char *task_id, *executor, *model, *variant, *session_id, *prompt, *directory;
        char **env;       /* strv */
        char *log_path, *task_dir, *prompt_file;
        launch_sandbox *sandbox; /* NULL: --no-sandbox */
        launch_disk *disk;       /* NULL: no disk watch (a spec from an older daemon) */
        char *attachment;        /* a summary's snapshot, else NULL (key absent) */
        bool check;              /* a check gate's run (key "check": true, else absent): no base snapshot,
                                  * the log kept to its last log_max_bytes bytes */
        uint64_t log_max_bytes;  /* "logMaxBytes", with check only: 4096..2^30 */
        uint64_t log_budget;     /* "logBudget": bytes, 0: unbounded (an older daemon's spec) */
        launch_limits *limits;   /* "limits", NULL: none given */
} launch_spec;

/* Serialize / parse. Parsing is strict (-EBADMSG): every key of the shape
 * above except "disk" must be present (nullable ones as null), with the right type, and no
 * other key; taskId must pass task_id_is_valid(); executor must be non-empty;
 * directory, logPath, taskDir, promptFile and every path in sandbox must be
 * absolute; env entries must be "NAME=value" with a non-empty NAME; strings
 * must not contain NUL; uid/gid must be integers in 0..2^32-2. -ENOMEM. */
int launch_spec_to_json(const launch_spec *s, json_object **ret);
int launch_spec_from_json(json_object *j, launch_spec **ret);
void launch_spec_free(launch_spec *s);

/* The name of the memfd launch_spec_to_memfd makes: the forked child a daemon
 * holds before it execs the shim is told apart from another taskferryd by
 * holding one. */
#define LAUNCH_SPEC_MEMFD_NAME "taskferry-launch-spec"
/* Write the serialized spec into a sealed memfd (F_SEAL_SEAL|SHRINK|GROW|WRITE,
 * memfd_create(2)) with its offset at 0; returns the fd (>= 0, close-on-exec:
 * dup2 it to 3 in the child that execs the shim) or -errno. */
int launch_spec_to_memfd(const launch_spec *s);
/* Read and parse the spec from fd (reads to EOF from offset 0 with pread; a
 * pipe is read from its current position). At most 256 MiB (-EFBIG). */
int launch_spec_read_fd(int fd, launch_spec **ret);

/* ---- launch.json / exit.json (written by the shim, read by the daemon) ---- */

#define LAUNCH_JSON_NAME "launch.json"
#define EXIT_JSON_NAME "exit.json"
/* the egress proxy's counts, in the task dir (egress-proxy.h) */
#define NETWORK_JSON_NAME "network.json"

typedef struct launch_info {
        pid_t shim_pid, worker_pid;
        char *pre_dispatch_head;  /* 40-hex sha (or the empty tree), NULL for a non-git target */
        char *overlay_method;     /* "bwrap", "userns" or NULL (no sandbox / no overlay) */
        uint64_t started_at_ms;   /* epoch ms; serialized as ISO-8601 (format_iso) */
} launch_info;

typedef struct exit_info {
        bool has_exit_code;       /* false → "exitCode": null */
        int exit_code;            /* 0..255 */
        char *signal;             /* "SIGTERM" or NULL */
        char *spawn_error;        /* NULL unless the worker could not be started */
        uint64_t ended_at_ms;     /* epoch ms; serialized as ISO-8601 */
        char *stop_reason;        /* "disk_quota_exceeded" or NULL */
        char *stop_detail;        /* why, naming the budget and the usage; NULL without stop_reason */
        int64_t oom_kills;        /* "oomKills" (written only when > 0): how much the oom_kill count
                                   * of the shim's cgroup (memory.events, cgroup-util.h) grew while
                                   * the worker ran; 0: none, or unknown (no memory controller) */
} exit_info;

/* launch.json object, keys in the order documented above. -ENOMEM. */
int launch_info_to_json(const launch_info *i, json_object **ret);
/* Strict parse (every key present, right types; unknown keys refused) → -EBADMSG. */
int launch_info_from_json(json_object *j, launch_info *ret);
void launch_info_done(launch_info *i);
/* exit.json object, keys in the order documented above. -ENOMEM. */
int exit_info_to_json(const exit_info *i, json_object **ret);
/* Strict parse → -EBADMSG. */
int exit_info_from_json(json_object *j, exit_info *ret);
void exit_info_done(exit_info *i);
/* Read <task_dir>/launch.json or <task_dir>/exit.json (at most 1 MiB).
 * -ENOENT when the file does not exist (yet), -EBADMSG when malformed. */
int launch_info_read(const char *task_dir, launch_info *ret);
int exit_info_read(const char *task_dir, exit_info *ret);
