#pragma once
/* The task: one typed record per task, its status and changeset-status
 * state machine, and its JSON shape at the two edges: the tasks.json record
 * (task_from_json/task_record_to_json) and the protocol's TaskSummary
 * (task_summary in api/task-views.c).
 *
 * Ownership: only task.c writes the record fields below (and only the
 * transition function writes status/changeset_status); every other module
 * reads them directly and changes them through task_set_*()/task_transition().
 *
 * Keys a record holds that this daemon does not know (written by the Node
 * original or a newer version), and known keys whose value has a type the
 * typed field cannot hold, are kept verbatim in `extras` and written back in
 * their place: a record round-trips byte for byte through load and store.
 * Key order is json-c insertion order, as tasks.json has it today: a key set
 * for the first time is appended; setting a present key keeps its place. */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "core/launch-options.h"
#include "line-buffer.h"
#include "protocol-keys.h"

typedef struct Task Task;
typedef struct Manager Manager;
typedef struct Request Request;
typedef struct TaskSocket TaskSocket;
typedef struct TaskRecord TaskRecord;

/* A task's status. done, crashed, cancelled and unknown are final. */
typedef enum TaskStatus {
        TASK_QUEUED,
        TASK_RUNNING,
        TASK_DONE,
        TASK_CRASHED,
        TASK_CANCELLED,
        TASK_UNKNOWN,
        _TASK_STATUS_MAX,
        _TASK_STATUS_INVALID = -EINVAL,
} TaskStatus;

/* A task's changesetStatus: none while no overlay holds its writes; pending
 * from its launch on an overlay until decided (by the user, or at
 * settlement: an empty one is accepted, one that never lands rejected).
 * accepted and rejected are final. */
typedef enum ChangesetStatus {
        CHANGESET_NONE,
        CHANGESET_PENDING,
        CHANGESET_ACCEPTED,
        CHANGESET_REJECTED,
        _CHANGESET_STATUS_MAX,
        _CHANGESET_STATUS_INVALID = -EINVAL,
} ChangesetStatus;

/* What made a task, which decides its record's shape and how it runs. The
 * record keeps the original's spelling of it (role, summaryOf, internal,
 * dispatchedBy, job: the on-disk format); code asks the kind, through
 * task_kind_info(). */
typedef enum TaskKind {
        TASK_KIND_DISPATCH, /* the user's task.dispatch */
        TASK_KIND_NESTED,   /* a task.dispatch from inside a task's sandbox (dispatchedBy) */
        TASK_KIND_JOB,      /* a timer job's task.dispatch (`taskferry job run`) */
        TASK_KIND_ADVISOR,  /* task.advisor's task (role "advisor") */
        TASK_KIND_SUMMARY,  /* the internal task that writes a report summary (summaryOf) */
        _TASK_KIND_MAX,
        _TASK_KIND_INVALID = -EINVAL,
} TaskKind;

typedef struct TaskKindInfo {
        const char *name;       /* "dispatch", "nested", "job", "advisor", "summary" */
        const char *role;       /* the record's role, NULL: it has none */
        bool internal;          /* the daemon's own: no task.state or task.activity events, not in
                                 * D-Bus counts or task.stats */
        bool overlay;           /* its writes go to an overlay when the sandbox has one */
        bool requires_overlay;  /* it must not run without one (the launch fails instead) */
        bool answers_only;      /* no socket in its sandbox: it cannot dispatch or call the daemon */
        bool never_lands;       /* its changeset is never applied: it ends rejected */
} TaskKindInfo;

const TaskKindInfo *task_kind_info(TaskKind k);
/* The kind a record says it is (a loaded record): summaryOf set or internal
 * true → summary (the original marks only those internal),
 * role "advisor" → advisor, job set → job, dispatchedBy set → nested,
 * else dispatch. */
TaskKind task_kind_of_record(const TaskRecord *rec);

/* NULL / -EINVAL for values outside the tables. */
const char *task_kind_to_string(TaskKind k);
TaskKind task_kind_from_string(const char *s);
const char *task_status_to_string(TaskStatus s);
TaskStatus task_status_from_string(const char *s);
const char *changeset_status_to_string(ChangesetStatus s);
ChangesetStatus changeset_status_from_string(const char *s);

/* Every key of a tasks.json record, in the order a dispatch creates them, then
 * the keys added later (shimPid, diskMaxBytes, changesetWarnings, headDrift*,
 * acceptStartedAt, job) and summaryOf.
 * X(json key, C field, kind): kinds STR (char *, NULL = null), INT (int64_t,
 * null unless task_record_is_set), BOOL (bool, likewise), OBJ / ARR
 * (json_object * of that JSON type: overlayDirs, summaryOf / changesetWarnings),
 * and the two enums. */
#define TASK_FIELDS(X)                                             \
        X(PK_id, id, STR)                                          \
        X(PK_directory, directory, STR)                            \
        X(PK_logPath, log_path, STR)                               \
        X(PK_role, role, STR)                                      \
        X(PK_prompt, prompt, STR)                                  \
        X(PK_status, status, STATUS)                               \
        X(PK_model, model, STR)                                    \
        X(PK_executorId, executor_id, STR)                         \
        X(PK_variant, variant, STR)                                \
        X(PK_sessionId, session_id, STR)                           \
        X(PK_originSessionId, origin_session_id, STR)              \
        X(PK_pid, pid, INT)                                        \
        X(PK_startedAt, started_at, STR)                           \
        X(PK_endedAt, ended_at, STR)                               \
        X(PK_exitCode, exit_code, INT)                             \
        X(PK_signal, signal, STR)                                  \
        X(PK_promptPreview, prompt_preview, STR)                   \
        X(PK_promptTotalChars, prompt_total_chars, INT)            \
        X(PK_spawnError, spawn_error, STR)                         \
        X(PK_cancelRequested, cancel_requested, BOOL)              \
        X(PK_internal, internal, BOOL)                             \
        X(PK_failureReason, failure_reason, STR)                   \
        X(PK_failureDetail, failure_detail, STR)                   \
        X(PK_incomplete, incomplete, BOOL)                         \
        X(PK_finalMarker, final_marker, STR)                       \
        X(PK_finalStatus, final_status, STR)                       \
        X(PK_class, class_name, STR)                               \
        X(PK_changesetStatus, changeset_status, CHANGESET)         \
        X(PK_diffPath, diff_path, STR)                             \
        X(PK_overlayDirs, overlay_dirs, OBJ)                       \
        X(PK_preDispatchHead, pre_dispatch_head, STR)              \
        X(PK_changesetError, changeset_error, STR)                 \
        X(PK_parentTaskId, parent_task_id, STR)                    \
        X(PK_checkStatus, check_status, STR)                       \
        X(PK_checkCommand, check_command, STR)                     \
        X(PK_checkExitCode, check_exit_code, INT)                  \
        X(PK_checkOutputTail, check_output_tail, STR)              \
        X(PK_checkStartedAt, check_started_at, STR)                \
        X(PK_checkEndedAt, check_ended_at, STR)                    \
        X(PK_checkOverride, check_override, BOOL)                  \
        X(PK_projectConfigWarning, project_config_warning, STR)    \
        X(PK_checkGatePid, check_gate_pid, INT)                    \
        X(PK_outputDir, output_dir, STR)                           \
        X(PK_dispatchedBy, dispatched_by, STR)                     \
        X(PK_shimPid, shim_pid_recorded, INT)                      \
        X(PK_diskMaxBytes, disk_max_bytes, INT)                    \
        X(PK_changesetWarnings, changeset_warnings, ARR)           \
        X(PK_headDriftFrom, head_drift_from, STR)                  \
        X(PK_headDriftTo, head_drift_to, STR)                      \
        X(PK_headDriftRecovered, head_drift_recovered, BOOL)       \
        X(PK_acceptStartedAt, accept_started_at, STR)              \
        X(PK_job, job, STR)                                        \
        X(PK_summaryOf, summary_of, OBJ)                           \
        X(PK_unit, unit, STR)                                      \
        X(PK_memoryMax, memory_max, INT)                           \
        X(PK_changesetRisks, changeset_risks, ARR)                 \
        X(PK_tasksMax, tasks_max, INT)                             \
        X(PK_network, network, OBJ)                                \
        X(PK_networkWarning, network_warning, STR)

#define _TASK_KEY_ENUM(json, field, kind) TASK_KEY_##field,
typedef enum TaskKey { TASK_FIELDS(_TASK_KEY_ENUM) _TASK_KEY_MAX, _TASK_KEY_INVALID = -EINVAL } TaskKey;
#undef _TASK_KEY_ENUM

/* The fields are declared by size, the 8-byte ones first, then the enums,
 * then the bools: in key order, each bool between two pointers would take 8
 * bytes (the record is kept for every task in the table). */
#define _TASK_WIDE_STR(field) char *field;
#define _TASK_WIDE_INT(field) int64_t field;
#define _TASK_WIDE_OBJ(field) json_object *field;
#define _TASK_WIDE_ARR(field) json_object *field;
#define _TASK_WIDE_BOOL(field)
#define _TASK_WIDE_STATUS(field)
#define _TASK_WIDE_CHANGESET(field)
#define _TASK_ENUM_STR(field)
#define _TASK_ENUM_INT(field)
#define _TASK_ENUM_OBJ(field)
#define _TASK_ENUM_ARR(field)
#define _TASK_ENUM_BOOL(field)
#define _TASK_ENUM_STATUS(field) TaskStatus field;
#define _TASK_ENUM_CHANGESET(field) ChangesetStatus field;
#define _TASK_BOOL_STR(field)
#define _TASK_BOOL_INT(field)
#define _TASK_BOOL_OBJ(field)
#define _TASK_BOOL_ARR(field)
#define _TASK_BOOL_BOOL(field) bool field;
#define _TASK_BOOL_STATUS(field)
#define _TASK_BOOL_CHANGESET(field)
#define _TASK_FIELD_WIDE(json, field, kind) _TASK_WIDE_##kind(field)
#define _TASK_FIELD_ENUM(json, field, kind) _TASK_ENUM_##kind(field)
#define _TASK_FIELD_BOOL(json, field, kind) _TASK_BOOL_##kind(field)

/* The persisted record. Read freely; write only through task.c. */
typedef struct TaskRecord {
        TASK_FIELDS(_TASK_FIELD_WIDE)
        TASK_FIELDS(_TASK_FIELD_ENUM)
        TASK_FIELDS(_TASK_FIELD_BOOL)
        uint64_t present;   /* bit per TaskKey: the key is in the record */
        uint64_t nonnull;   /* bit per TaskKey: its value is not JSON null */
        json_object *extras; /* unknown / untypable keys, verbatim (NULL: none) */
        uint8_t *order;     /* key order: TaskKey, or TASK_ORDER_EXTRA for the next key of extras */
        size_t n_order;
        /* One block holding a loaded record's order and strings (so a record
         * costs one allocation for them, not one per string): a field or the
         * order pointing into it is not freed on its own; a value set later
         * is a separate allocation. NULL for a record built by task_new. */
        char *pool;
        size_t pool_size;
} TaskRecord;

#define TASK_ORDER_EXTRA 0xFF

/* TaskKey of a JSON key name, or -EINVAL. */
TaskKey task_key_from_string(const char *name);
const char *task_key_to_string(TaskKey k);

/* Record ↔ JSON. task_record_from_json takes a JSON object, fills *rec (zeroed
 * first); -EINVAL if it is not an object or has no string id, -ENOMEM.
 * task_record_to_json returns a new object with the record's keys in its
 * order, NULL on ENOMEM. */
int task_record_from_json(TaskRecord *rec, json_object *o);
json_object *task_record_to_json(const TaskRecord *rec);
void task_record_done(TaskRecord *rec);
/* The value of one key as JSON (a new reference; NULL = JSON null or absent). */
json_object *task_record_get_json(const TaskRecord *rec, TaskKey k);
/* Likewise by JSON key name, unknown keys included (from extras). */
json_object *task_record_get_json_by_name(const TaskRecord *rec, const char *name);
bool task_record_has(const TaskRecord *rec, TaskKey k);    /* key present (maybe null) */
bool task_record_is_set(const TaskRecord *rec, TaskKey k); /* key present and not null */
/* An INT key's value: true and *ret if set, false if null or absent. */
bool task_record_get_int(const TaskRecord *rec, TaskKey k, int64_t *ret);

/* A runtime task with an empty record (status and changeset unset), in no
 * table, every fd -1. NULL on ENOMEM. */
Task *task_alloc(void);
/* A task from its tasks.json record (task_record_from_json; the kind from
 * the record), in no table. 0, -EINVAL (not a task record), -ENOMEM. */
int task_from_json(json_object *o, Task **ret);
/* Free t's memory (record, runtime buffers); closes nothing: the modules
 * that hold its processes, sources and socket release them first. */
void task_free(Task *t);

/* Field writers for every key but status and changesetStatus (assert).
 * Each marks the key present (appending it to the order when new); a NULL
 * string or JSON value writes JSON null. -ENOMEM. Does not persist. */
int task_set_str(Task *t, TaskKey k, const char *v);
int task_set_int(Task *t, TaskKey k, int64_t v);
int task_set_bool(Task *t, TaskKey k, bool v);
int task_set_null(Task *t, TaskKey k);
int task_set_json(Task *t, TaskKey k, json_object *v); /* takes ownership of v */

/* "(new) → queued": the first status and changeset status of a record
 * being built (the lifecycle's task_new), placed at the current end
 * of its key order. -EEXIST if the key is already there, -ENOMEM. */
int task_init_status(Task *t, TaskStatus s);
int task_init_changeset(Task *t, ChangesetStatus cs);

/* Is moving from→to legal? Same state is legal (no change).
 * status: queued → running | crashed | cancelled | unknown;
 *         running → done | crashed | cancelled | unknown; final states never move.
 * changeset: none → pending; pending → accepted | rejected. */
bool task_status_transition_ok(TaskStatus from, TaskStatus to);
bool changeset_status_transition_ok(ChangesetStatus from, ChangesetStatus to);

/* THE transition: every change of a task's status or changesetStatus goes
 * through here. Pass the current value for the one that does not change.
 * Refuses an illegal move of either with -EINVAL and changes nothing. On a
 * change: writes the fields, then calls the `transitioned` callback of every
 * observer of t's manager, in registration order (the task table's counts and
 * the store's persistence are the first two). Returns 1 if something
 * changed, 0 if not. */
int task_transition(Task *t, TaskStatus s, ChangesetStatus cs);
/* The one move back: running → queued (changeset → none), for a task whose
 * "running" was recorded but whose shim was never let go (a daemon killed
 * during the launch): it ran nothing, so it is launched again. Its overlay
 * must be gone first. -EINVAL unless running with a changeset none or
 * pending; else as task_transition (1). */
int task_transition_unlaunch(Task *t);

/* Observers of tasks, registered once at start (manager_add_observer): the
 * task table (its counts and order), the store (persistence), the waiters,
 * and every announcement (events, D-Bus, journald, sd_notify). task.c calls
 * them and nothing else outside itself. Each callback may be NULL.
 *   added          a new task joined the table and is durable (the
 *                  lifecycle's task_new; creation is no transition);
 *   transitioned   after task_transition changed t, with the old values;
 *   key_changing,  around every write of record key k of a task in a table
 *   key_changed    (task_set_*, task_init_*, task_transition): for an
 *                  observer that keeps something ordered or counted by a key;
 *   checked        its check gate started, ended or was interrupted (the
 *                  check* fields say how: gate.h); task_announce_checked.
 * An observer must not free the task; a transitioned callback may call
 * task_transition again (its observers then run inside). */
typedef void (*task_observer_fn)(Task *t, TaskStatus old_status, ChangesetStatus old_cs, void *userdata);
typedef struct TaskObserver {
        void (*added)(Task *t, void *userdata);
        task_observer_fn transitioned;
        void (*key_changing)(Task *t, TaskKey k, void *userdata);
        void (*key_changed)(Task *t, TaskKey k, void *userdata);
        void (*checked)(Task *t, void *userdata);
        void (*inserted)(Task *t, void *userdata); /* t was appended to the table (task-table.c) */
        void (*removed)(Task *t, void *userdata);  /* t is being taken out of the table, still whole */
        void *userdata;
} TaskObserver;

typedef struct TaskObservers {
        TaskObserver *v;
        size_t n;
} TaskObservers;

/* Append an observer (copied). 0, -ENOMEM. */
int manager_add_observer(Manager *m, const TaskObserver *o);
/* The same for a transitions-only observer. 0, -ENOMEM. */
int manager_add_task_observer(Manager *m, task_observer_fn fn, void *userdata);
void manager_free_task_observers(Manager *m);
/* Tell every observer that t was added (the lifecycle, once t is durable). */
void task_announce_added(Task *t);
/* Tell every observer that t's checkStatus moved (the check gate, gate.h). */
void task_announce_checked(Task *t);

/* queued or running. */
bool task_is_active(const Task *t);
/* Neither active nor settling: its final state is written. */
bool task_is_settled(const Task *t);

/* ---- the runtime task: its record plus what each module keeps of it while
 * the daemon runs (not persisted). Each group is written only by the module
 * named beside it. ---- */
struct Task {
        Manager *m;            /* task-table.c: the manager whose table holds it (NULL: not in one yet) */
        TaskRecord rec;        /* the persisted record (task.h; only task.c writes it) */
        const char *id;        /* == rec.id, which never changes */
        TaskKind kind;         /* task.c: what its record says it is (task_kind_of_record), kept
                                * across every write of the keys that say it */
        uint64_t generation;   /* task.c: grows with every write to rec; a cache derived from the
                                * record keeps the generation it was made from */
        /* launch-options.c: what a queued task needs to launch (the lifecycle
         * sets them at task_new and coldplug, the launch drops them) */
        json_object *caller_env; /* the dispatch's env param (not persisted in tasks.json: secrets) */
        LaunchOptions launch;
        /* monitor.c: the shim of a running task */
        pid_t shim_pid;
        int shim_pidfd;
        sd_event_source *shim_source;
        int status_fd;
        sd_event_source *status_source;
        LineBuffer *status_buf; /* its lines, at most STATUS_PIPE_MAX_BYTES held (NULL until the first read) */
        const struct MonitorCallbacks *monitor; /* who hears what the shim reports (NULL: nobody yet) */
        /* scope.c: the start of its transient scope (scope.h): the pending
         * StartTransientUnit, its job, the forked child's hold pipe (-1: released) */
        struct sd_bus_slot *scope_slot;
        sd_event_source *scope_timer;
        char *scope_job;
        int scope_hold_fd;
        sd_event_source *kill_timer; /* task_terminate (monitor.c, for cancel and the watchdog) arms it,
                                      * monitor.c drops it at exit */
        struct Watchdog *watchdog; /* watchdog.c: the running task's watcher or NULL */
        struct Gate *gate;     /* gate.c: its running check gate or NULL */
        /* scheduler.c */
        bool counted_running;  /* holds a concurrency slot */
        Task *next_queued;
        size_t sched_provider; /* 1 + index into the scheduler's providers of the provider whose slot it
                                * holds (0: none) */
        /* settle.c */
        bool settling;         /* settlement job in flight */
        void (*settle_done)(Task *t, TaskStatus status, ChangesetStatus cs); /* who hears its verdict */
        /* change.c (accept/reject) */
        bool busy;             /* accept/reject job in flight or waiting for its workspace */
        bool accept_interrupted; /* coldplug sets it: tasks.json says an accept began
                                  * under an earlier daemon; change.c clears it */
        /* task-views.c */
        bool log_has_event;    /* cache: once true stays true */
        json_object *list_row; /* cache: its task.list row, made at list_row_generation */
        uint64_t list_row_generation;
        /* store.c: in the journal's next commit; its record is durable (in
         * tasks.json or the journal: a removal then needs a tombstone) */
        bool store_pending;
        bool store_durable;
        /* store.c: where the record's text is in the last tasks.json written,
         * made at text_generation (text_len 0: unknown) */
        uint64_t text_off;
        uint32_t text_len;
        uint64_t text_generation;
        /* server.c: the task's own socket, bound into its sandbox at
         * TASKFERRY_SOCKET_PATH: every connection on it comes from inside
         * this task's sandbox (NULL: none) */
        TaskSocket *socket;
        unsigned sock_connections; /* open connections accepted on it (cap PROTOCOL_TASK_SOCKET_MAX_CONNECTIONS) */
        unsigned sock_requests;    /* their requests in flight, waits included (cap PROTOCOL_TASK_SOCKET_MAX_REQUESTS) */
        /* wait.c */
        Request *waiters;
        /* events.c: the last status emitted as task.state, plus one (0: none) */
        uint8_t event_status;
        /* activity.c: the last task.activity refresh (its cache key) */
        bool activity_key_set, activity_key_summary;
        int activity_key_status;
        uint64_t activity_watermark;
        uint64_t activity_at_ms;  /* monotonic */
};
