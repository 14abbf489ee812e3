#pragma once
/* taskferryd internals: one sd-event loop owning the task table, the socket
 * server, launches, settlements and forked jobs (DESIGN.md "Processes").
 * Nothing here blocks the loop on git, child processes or large reads: such
 * work runs in forked jobs (jobs.c) watched through pidfds. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "line-buffer.h"
#include "paths.h"
#include "process-util.h"
#include "protocol.h"
#include "workspace.h"
#include "task.h"

typedef struct Manager Manager;
typedef struct Connection Connection;
typedef struct Request Request;
typedef struct Task Task;
typedef struct Job Job;
typedef struct ChangeJob ChangeJob;

typedef struct TaskObserver {
        task_observer_fn fn;
        void *userdata;
} TaskObserver;

/* ---- settings read once at start (spec protocol-cli.md §3.2/§3.3, env part) ---- */
typedef struct Settings {
        unsigned max_concurrent;      /* TASKFERRY_MAX_CONCURRENT_TASKS, default 4 */
        uint64_t cancel_grace_ms;     /* TASKFERRY_CANCEL_GRACE_MS, default 5000 */
        bool sandbox_enabled;         /* !TASKFERRY_DISABLE_SANDBOX */
        bool overlay_enabled;         /* !TASKFERRY_DISABLE_OVERLAY */
        char *default_executor;       /* TASKFERRY_DEFAULT_EXECUTOR || "pi" */
        char *default_variant;        /* TASKFERRY_DEFAULT_VARIANT || "highest" */
        char **env_denylist;          /* TASKFERRY_ENV_DENYLIST */
        char **sandbox_denylist;      /* TASKFERRY_SANDBOX_DENYLIST (extra deny dirs or files) */
        char **rw_bind, **ro_bind;    /* TASKFERRY_RW_BIND / TASKFERRY_RO_BIND: unioned with each dispatch's (spec §2.4) */
        char **home_allow;            /* TASKFERRY_SANDBOX_HOME_ALLOW: more home entries a sandbox sees read-only */
        char *shim_path;              /* resolved taskferry-shim */
        uint64_t task_disk_max;       /* TASKFERRY_TASK_DISK_MAX (disk_size_parse), 0: the default rule
                                         of disk-budget.h */
} Settings;

/* ---- the socket server ---- */
/* One listening socket: the user's (origin NULL) or a task's own. Every
 * listener pauses the same way when the daemon is out of fds (EMFILE/ENFILE:
 * stop polling it for 250 ms, one warning a minute daemon-wide) instead of
 * spinning on a socket that stays readable. */
typedef struct Listener {
        Manager *m;
        Task *origin;            /* NULL: the user's socket */
        int fd;
        sd_event_source *io;
        sd_event_source *retry;  /* armed while accepting is paused */
} Listener;

struct Connection {
        Manager *m;
        unsigned n_ref;
        int fd;
        pid_t peer_pid;    /* SO_PEERCRED at accept time (0 if unknown) */
        Task *origin;      /* accepted on this task's own socket: the caller runs inside its sandbox */
        uid_t peer_uid;
        sd_event_source *io;
        LineBuffer in;     /* inbound bytes, LINE_BUFFER_LIMIT_BUFFERED at PROTOCOL_MAX_BUFFER_BYTES (§1.5) */
        char *out;         /* pending outbound bytes */
        size_t out_len, out_off, out_cap;
        bool closing;      /* close once out is flushed */
        bool dead;         /* fd closed; replies are dropped */
        Request *waiting;  /* task.wait requests parked on this connection */
        Connection *next, *prev;
};

/* One request that passed validation; answered exactly once with
 * request_reply_* (possibly later, from a callback). */
struct Request {
        Manager *m;
        Connection *conn;  /* ref held */
        proto_request req;
        Request *next_waiter; /* list link while waiting on a task */
        Request *conn_next, *conn_prev; /* the connection's list of waiting requests */
        sd_event_source *timer;
        Task *wait_task;
        uint64_t tail_chars;  /* task.wait tailChars (0: none) */
        /* the budget the request draws on until it is freed (docs/taskferryd.8.md
         * "Limits"): its task socket's, else the daemon-wide waits or active one */
        Task *budget_task;
        bool budget_wait;
};

/* ---- tasks ---- */
struct Task {
        Manager *m;
        TaskRecord rec;        /* the persisted record (task.h; only task.c writes it) */
        const char *id;        /* == rec.id, which never changes */
        /* handlers.c (dispatch) sets, settle.c drops: */
        json_object *caller_env; /* dispatch env param (not persisted; secrets) */
        json_object *launch;   /* launch options of the dispatch (noSandbox, noOverlay, rwBind, roBind); not persisted */
        /* monitor.c: the shim of a running task */
        pid_t shim_pid;
        int shim_pidfd;
        sd_event_source *shim_source;
        int status_fd;
        sd_event_source *status_source;
        LineBuffer *status_buf; /* its lines, at most STATUS_PIPE_MAX_BYTES held (NULL until the first read) */
        sd_event_source *kill_timer; /* handlers.c (cancel) arms it, monitor.c drops it at exit */
        /* scheduler.c */
        bool counted_running;  /* holds a concurrency slot */
        Task *next_queued;
        /* settle.c */
        bool settling;         /* settlement job in flight */
        /* handlers.c (accept/reject) */
        bool busy;             /* accept/reject job in flight or waiting for its workspace */
        bool accept_interrupted; /* tasks.json says an accept began under an earlier daemon */
        /* tasks.c */
        bool log_has_event;    /* cache: once true stays true */
        json_object *list_row; /* cache: its task.list row (dropped by every write to rec, task.c) */
        /* store.c: where the record's text is in the last tasks.json written
         * (text_len 0: unknown, or the record changed since; task.c resets it) */
        uint64_t text_off;
        uint32_t text_len;
        /* server.c: the task's own socket, bound into its sandbox at
         * TASKFERRY_SOCKET_PATH: every connection on it comes from inside
         * this task's sandbox */
        Listener sock;
        char *sock_path;
        unsigned sock_connections; /* open connections accepted on it (cap PROTOCOL_TASK_SOCKET_MAX_CONNECTIONS) */
        unsigned sock_requests;    /* their requests in flight, waits included (cap PROTOCOL_TASK_SOCKET_MAX_REQUESTS) */
        /* wait.c */
        Request *waiters;
};

typedef void (*job_done_fn)(Manager *m, void *userdata, json_object *result, int error);
/* Runs in the forked child; returns a JSON result (may be NULL) or sets *error. */
typedef json_object *(*job_run_fn)(void *userdata, int *error);

struct Job {
        Manager *m;
        pid_t pid;
        int pidfd;
        int pipe_fd;
        sd_event_source *pid_source, *pipe_source;
        char *buf;
        size_t len, cap;
        bool exited, eof;
        int status;
        job_done_fn done;
        void *userdata;
        /* job_start_retrying: a start deferred for lack of resources */
        job_run_fn run;
        sd_event_source *retry_source;
        unsigned attempts;
        Job *next, *prev;
};

struct Manager {
        sd_event *event;
        tf_paths paths;
        Settings settings;
        /* socket */
        Listener listener;             /* the user's socket */
        bool socket_self_bound;
        uint64_t accept_warned_ms;     /* monotonic ms of the last "cannot accept" warning */
        Connection *connections;
        unsigned in_flight;            /* active requests on the user's socket (cap PROTOCOL_MAX_IN_FLIGHT) */
        unsigned waits;                /* task.wait requests on the user's socket (cap PROTOCOL_MAX_WAITS) */
        /* tasks */
        Task **tasks;
        size_t n_tasks, cap_tasks;
        /* tasks.c, for task.list without scanning the table: tasks per status
         * (task_transition keeps it), and how many neighbours in the table
         * are out of startedAt order (0: the table is sorted, the list is
         * its reverse) */
        int64_t status_counts[_TASK_STATUS_MAX];
        size_t started_inversions;
        struct RootCache *root_cache;  /* workspace roots of task directories (tasks.c) */
        Task *queue_head, *queue_tail;
        TaskObserver *task_observers;  /* task.h manager_add_task_observer */
        size_t n_task_observers;
        unsigned running;
        char *state_load_error;
        /* persistence */
        bool dirty;
        /* store.c: identity of the tasks.json it wrote last (a flush copies
         * unchanged records' text from it, Task.text_off/text_len) */
        bool tasks_json_written;
        dev_t tasks_json_dev;
        ino_t tasks_json_ino;
        off_t tasks_json_size;
        struct timespec tasks_json_mtim;
        sd_event_source *persist_timer;
        /* jobs */
        Job *jobs;
        ChangeJob *change_jobs;        /* accepts/rejects, running and waiting (handlers.c) */
        bool shutting_down;
};

/* server.c (spec protocol-cli.md §1.1–§1.5, §4.2–§4.3) */
/* Take the socket from systemd (sd_listen_fds(3), checked with
 * sd_is_socket_unix(3)) or bind <runtime>/daemon.sock under a flock with the
 * stale-socket rules. -EADDRINUSE if a live listener owns the path. */
int server_listen(Manager *m);
/* Send {"type":"shutdown","reason":reason} to every client (best effort,
 * ≤ 200 ms each), close them and the listener, unlink a self-bound socket. */
void server_close(Manager *m, const char *reason);
/* Answer a request exactly once; each takes ownership of `result` and frees r.
 * Frames over the 1 MiB outbound budget degrade to RESPONSE_TOO_LARGE. */
void request_reply_result(Request *r, json_object *result);
void request_reply_error(Request *r, const char *code, const char *message, const char *help);
/* Reply with an error frame built from "error: ...\nhelp: ..." text (§1.8). */
void request_reply_error_text(Request *r, const char *code, const char *text);
/* Answer with a ready frame (a success or error envelope); frees r. */
void request_reply_frame(Request *r, json_object *frame);
/* Drop a request without answering (its connection died); frees r. */
void request_free(Request *r);
/* Listen on a socket of task t's own (<runtime>/task-sockets/<id>.sock, 0600)
 * and tag its connections with t; they draw on t's own budgets
 * (PROTOCOL_TASK_SOCKET_MAX_*), never on the daemon-wide ones. -errno. */
int task_socket_open(Task *t);
/* Stop listening on t's socket, remove it and close the connections it accepted. */
void task_socket_close(Task *t);

/* tasks.c (spec lifecycle.md §1) */
Task *manager_find_task(Manager *m, const char *id);
/* Take t out of the table (order kept) and free it: a task that never
 * became durable (a dispatch whose flush failed). t must own no process,
 * socket or waiter. */
void manager_remove_task(Manager *m, Task *t);
/* task.c calls these around a change of t's startedAt / status (task.list's
 * incremental order and counts). */
void manager_task_started_unlink(Task *t);
void manager_task_started_link(Task *t);
void manager_task_count_status(Task *t, TaskStatus old_status);
/* Free the workspace-root cache (shutdown). */
void manager_free_root_cache(Manager *m);
/* A task from its tasks.json record (task_record_from_json), appended to the
 * table; takes ownership of rec. NULL if rec is no task record or on ENOMEM. */
Task *task_new(Manager *m, json_object *rec);
/* A new task whose record holds only its id, appended to the table; the
 * caller adds the other keys in order (task_set_*, task_init_*). NULL on ENOMEM. */
Task *task_create(Manager *m, const char *id);
/* Free t's memory (record, runtime buffers); closes nothing. */
void task_free(Task *t);
/* dst[name of k] = the record's value of k as JSON (null when absent). */
void task_copy_key(json_object *dst, Task *t, TaskKey k);
/* TaskSummary (spec protocol-cli.md §1.7), a new object. */
json_object *task_summary(Task *t);
/* task.status result: summary + logBytesWritten, logLastWriteAt, logHasEvent. */
json_object *task_status_detail(Task *t);

/* task.list result (spec §1.7, lifecycle.md §7.4). visible_to: NULL = every
 * task; else only the task with that id and the tasks it dispatched (a
 * sandboxed caller's view; "" = none). */
json_object *manager_list(Manager *m, const char *directory, const char *visible_to);

/* store.c (spec lifecycle.md §1.4–§1.6) */
/* Load <state>/tasks.json. A missing file is an empty store; an unreadable or
 * malformed one sets m->state_load_error (every state call then fails and the
 * file is never overwritten). Running tasks are re-adopted (task_readopt);
 * queued ones are queued again in file order (the caller kicks the
 * scheduler once it owns the socket);
 * anything else active becomes unknown. 0 or -ENOMEM. */
int manager_load_tasks(Manager *m);
/* Mark the table dirty and arm the 250 ms debounced flush. */
void task_persist(Task *t);
/* Write tasks.json now if dirty: the whole table, to a temp file in the state
 * dir, fsync'd, renamed over tasks.json, the dir fsync'd (write_file_atomic).
 * 0 once durable (or nothing to do), -EIO after a failed load, else -errno of
 * the write (EROFS, ENOSPC, EACCES, ...); the table stays dirty then. */
int manager_flush(Manager *m);
/* tasks.json's text for the table (json-c's pretty, spaced array of every
 * record, built one record at a time, none copied from an earlier write):
 * *ret NUL-terminated, freed with manager_tasks_json_free. -ENOMEM. */
int manager_tasks_json(Manager *m, char **ret, size_t *ret_len);
void manager_tasks_json_free(char *text, size_t len);

/* scheduler.c (spec lifecycle.md §5): FIFO under the global concurrency cap.
 * Owns Manager.queue_head/queue_tail/running, Task.next_queued/counted_running. */
/* Launch queued tasks FIFO while fewer than max_concurrent run. */
void scheduler_kick(Manager *m);
void scheduler_enqueue(Manager *m, Task *t);
bool scheduler_remove(Manager *m, Task *t);
/* t holds a concurrency slot from now on (idempotent) / gives it back. */
void scheduler_take_slot(Task *t);
void scheduler_release_slot(Task *t);

/* launch.c (DESIGN.md "Data flow of one dispatch" steps 3–5): env, sandbox,
 * overlay, launch spec, spawn of taskferry-shim. */
/* Launch a task the scheduler admitted: on success it is running and
 * watched (monitor_watch_shim); on failure it is settled as a spawn error. */
void launch_task(Task *t);
/* <state>/prompts/<id>.prompt.txt (malloc'd, NULL on ENOMEM). */
char *task_prompt_file_path(Task *t);

/* monitor.c: the shim of a running task (status pipe, pidfd), re-adoption,
 * signals. Owns Task.shim_pid/shim_pidfd/shim_source/status_fd/status_*. */
/* Watch t's freshly spawned shim (t->shim_pid): its pidfd and the status
 * pipe status_fd (taken). On the shim's exit: read exit.json, settle. */
void monitor_watch_shim(Task *t, int status_fd);
/* kill(-pid, sig) to the worker's process group (ESRCH → kill(pid)); before
 * the worker's pid is known, to the shim, which forwards it. -errno. */
int task_signal(Task *t, int sig);
/* At daemon start, for a task recorded as running: watch its shim again if it
 * still runs, or settle it from exit.json if it finished meanwhile. Returns
 * true if the task stays "running" (adopted or settling), false if its shim
 * is gone without an exit status. */
bool task_readopt(Task *t);

/* settle.c (spec lifecycle.md §4.4): exit → classification → changeset
 * extraction job → the one transition to the final state. Owns Task.settling. */
void task_start_settlement(Task *t);
void task_settle_spawn_error(Task *t, const char *message);
/* End a settlement: release the slot, socket and launch state, then move the
 * task to status/cs through task_transition (which wakes its waiters). */
void task_settlement_done(Task *t, TaskStatus status, ChangesetStatus cs);

/* wait.c (spec lifecycle.md §7.2): the only owner of parked task.wait requests. */
/* Register the waiters' task observer: the first observer of every manager. */
int wait_init(Manager *m);
/* Answer r now if t is final and settled, else park it on t until then or
 * for timeout ms (< 0: no timeout); tail_chars > 0 adds the output tail to a
 * timed-out answer. Replies exactly once. */
void wait_park(Request *r, Task *t, int64_t timeout, uint64_t tail_chars);
/* Unlink r from its task and connection (it stays unanswered). */
void wait_detach(Request *r);
/* Drop every parked wait of a dead connection / of a task (daemon shutdown)
 * without answering. */
void wait_drop_connection(Connection *c);
void wait_drop_task(Task *t);

/* jobs.c */
/* Fork a child that runs run(userdata) (blocking work: git, logs, mounts),
 * writes its JSON result to a pipe and exits; done() is called on the loop
 * with the parsed result (or NULL and -ECHILD/-EBADMSG) once the child exited
 * and the pipe hit EOF. The child keeps only stdio and the pipe. -errno. */
int job_start(Manager *m, job_run_fn run, job_done_fn done, void *userdata);
/* As job_start, but a start that fails for lack of resources (EMFILE, ENFILE,
 * EAGAIN, ENOMEM: fds, processes, memory) is retried every second until it
 * starts, so work that must happen (a settlement) is deferred, never skipped.
 * If the daemon stops first, done() is never called (a task left running is
 * settled from its exit.json at the next start, task_readopt). 0 once started
 * or deferred; other errors as job_start. */
int job_start_retrying(Manager *m, job_run_fn run, job_done_fn done, void *userdata);
void jobs_free(Manager *m);

/* fd_limit_raise/fd_limit_restore and safe_fork: process-util.h (src/shared) */

/* handlers.c + methods.c: the method table and its handlers (methods.h) */
/* Drop the accepts/rejects still waiting for their workspace (shutdown). */
void change_jobs_free(Manager *m);

/* peer.c: who is calling (DESIGN.md: a peer inside a task sandbox cannot
 * accept, reject or cancel tasks it did not start). */
typedef struct Caller {
        bool sandboxed;  /* the peer runs inside a task's process tree or another pid namespace */
        Task *task;      /* the task whose shim is an ancestor of the peer, if any */
} Caller;
Caller caller_of(Manager *m, Connection *c);

