/* The lifecycle: every task's creation, every move of its state, and what
 * each state releases (lifecycle.h). */

#include <assert.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/launch-options.h"
#include "core/manager.h"
#include "core/scheduler.h"
#include "core/store.h"
#include "core/task-table.h"
#include "core/task.h"
#include "json-util.h"
#include "paths.h"
#include "project-config.h"
#include "protocol-keys.h"
#include "run/gate.h"
#include "run/launch.h"
#include "run/lifecycle.h"
#include "run/monitor.h"
#include "run/scope.h"
#include "run/settle.h"
#include "run/watchdog.h"
#include "fs-util.h"
#include "id-util.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"
#include "utf8.h"

/* ---- the record of a new task ---- */

/* What task_new computes once for the record it builds. */
typedef struct NewRecord {
        const TaskSpec *spec;
        const char *id, *log_path, *output_dir, *prompt, *preview, *started_at;
        size_t prompt_units;           /* UTF-16 units of the user's prompt (JavaScript's length) */
} NewRecord;

#define PREVIEW_UNITS 200

/* Runs of keys both layouts below share, in the same order. */
#define LAYOUT_MODEL_RUN \
        TASK_KEY_model, TASK_KEY_executor_id, TASK_KEY_variant, TASK_KEY_session_id, TASK_KEY_origin_session_id
#define LAYOUT_PROCESS_RUN TASK_KEY_pid, TASK_KEY_started_at, TASK_KEY_ended_at, TASK_KEY_exit_code, TASK_KEY_signal
#define LAYOUT_FAILURE_RUN                                                                                         \
        TASK_KEY_prompt_preview, TASK_KEY_prompt_total_chars, TASK_KEY_spawn_error, TASK_KEY_cancel_requested, \
                TASK_KEY_internal, TASK_KEY_failure_reason, TASK_KEY_failure_detail

/* tasks.json's key order of a dispatch, nested, job or advisor task (the
 * original's: records stay byte for byte what it wrote); job only when
 * given. */
static const TaskKey dispatch_layout[] = {
        TASK_KEY_id, TASK_KEY_directory, TASK_KEY_log_path, TASK_KEY_role, TASK_KEY_prompt, TASK_KEY_status,
        LAYOUT_MODEL_RUN,
        LAYOUT_PROCESS_RUN,
        LAYOUT_FAILURE_RUN,
        TASK_KEY_incomplete, TASK_KEY_final_marker, TASK_KEY_final_status, TASK_KEY_class_name,
        TASK_KEY_changeset_status, TASK_KEY_diff_path, TASK_KEY_overlay_dirs, TASK_KEY_pre_dispatch_head,
        TASK_KEY_changeset_error, TASK_KEY_parent_task_id,
        TASK_KEY_check_status, TASK_KEY_check_command, TASK_KEY_check_exit_code, TASK_KEY_check_output_tail,
        TASK_KEY_check_started_at, TASK_KEY_check_ended_at, TASK_KEY_check_override,
        TASK_KEY_project_config_warning, TASK_KEY_check_gate_pid,
        TASK_KEY_output_dir, TASK_KEY_dispatched_by, TASK_KEY_job,
};

/* ... and of the internal task that writes a report summary; dispatchedBy
 * only when given */
static const TaskKey summary_layout[] = {
        TASK_KEY_id, TASK_KEY_log_path, TASK_KEY_summary_of, TASK_KEY_status, TASK_KEY_directory,
        LAYOUT_MODEL_RUN,
        LAYOUT_PROCESS_RUN,
        TASK_KEY_prompt,
        LAYOUT_FAILURE_RUN,
        TASK_KEY_dispatched_by,
};

/* The string a new record holds for key k (NULL: JSON null), for the keys
 * that hold strings. */
static const char *new_string(const NewRecord *n, TaskKey k) {
        const TaskSpec *s = n->spec;
        switch (k) {
        case TASK_KEY_id: return n->id;
        case TASK_KEY_directory: return s->directory;
        case TASK_KEY_log_path: return n->log_path;
        case TASK_KEY_role: return task_kind_info(s->kind)->role;
        case TASK_KEY_prompt: return n->prompt;
        case TASK_KEY_model: return s->model;
        case TASK_KEY_executor_id: return s->executor_id;
        case TASK_KEY_variant: return s->variant;
        case TASK_KEY_session_id: return s->session_id;
        case TASK_KEY_origin_session_id: return s->origin_session_id;
        case TASK_KEY_started_at: return n->started_at;
        case TASK_KEY_prompt_preview: return n->preview;
        case TASK_KEY_final_marker: return s->final_marker;
        case TASK_KEY_class_name: return s->class_name;
        case TASK_KEY_parent_task_id: return s->parent_task_id;
        case TASK_KEY_check_status: return "none";
        case TASK_KEY_output_dir: return n->output_dir;
        case TASK_KEY_dispatched_by: return s->dispatched_by;
        case TASK_KEY_job: return s->job;
        default: return NULL;
        }
}

/* Keys a new record has only with a value. */
static bool key_optional(const NewRecord *n, TaskKey k) {
        return k == TASK_KEY_job || (n->spec->kind == TASK_KIND_SUMMARY && k == TASK_KEY_dispatched_by);
}

/* Write key k of a new record. */
static int new_key(Task *t, const NewRecord *n, TaskKey k) {
        switch (k) {
        case TASK_KEY_id: return 0; /* the record is made with it */
        case TASK_KEY_status: return task_init_status(t, TASK_QUEUED);
        case TASK_KEY_changeset_status: return task_init_changeset(t, CHANGESET_NONE);
        case TASK_KEY_cancel_requested:
        case TASK_KEY_incomplete:
        case TASK_KEY_check_override: return task_set_bool(t, k, false);
        case TASK_KEY_internal: return task_set_bool(t, k, task_kind_info(t->kind)->internal);
        case TASK_KEY_prompt_total_chars:
                return n->prompt_units > PREVIEW_UNITS ? task_set_int(t, k, (int64_t) n->prompt_units) : task_set_null(t, k);
        case TASK_KEY_summary_of: return task_set_json(t, k, json_object_get(n->spec->summary_of));
        default: {
                const char *v = new_string(n, k);
                return v ? task_set_str(t, k, v) : task_set_null(t, k);
        }
        }
}

/* A task in no table with the record of n, keys in its kind's order. */
static int new_record(const NewRecord *n, Task **ret) {
        const TaskKey *layout = n->spec->kind == TASK_KIND_SUMMARY ? summary_layout : dispatch_layout;
        size_t n_layout = n->spec->kind == TASK_KIND_SUMMARY ? ELEMENTSOF(summary_layout) : ELEMENTSOF(dispatch_layout);
        _cleanup_json_ json_object *idrec = json_object_new_object();
        if (!idrec || json_add_string(idrec, PK_id, n->id) < 0) return -ENOMEM;
        Task *t = NULL;
        int r = task_from_json(idrec, &t);
        if (r < 0) return r;
        for (size_t i = 0; r >= 0 && i < n_layout; i++) {
                if (key_optional(n, layout[i]) && !new_string(n, layout[i])) continue;
                r = new_key(t, n, layout[i]);
        }
        /* the record says what the spec asked for */
        assert(r < 0 || t->kind == n->spec->kind);
        /* keys added later go at the end, after the original's */
        if (r >= 0 && n->spec->network) r = task_set_json(t, TASK_KEY_network, json_object_get(n->spec->network));
        if (r >= 0 && n->spec->network_warning) r = task_set_str(t, TASK_KEY_network_warning, n->spec->network_warning);
        if (r >= 0 && n->spec->launch) r = launch_options_copy(n->spec->launch, &t->launch);
        if (r >= 0 && n->spec->caller_env) t->caller_env = json_object_get(n->spec->caller_env);
        if (r < 0) {
                task_free(t);
                return r;
        }
        *ret = t;
        return 0;
}

/* <state>/outputs/<id>, 0700, never through a symlink. */
static int create_output_dir(const char *path) {
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) return -ELOOP;
        int r = mkdir_p(path, 0700);
        if (r < 0) return r;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return -errno;
        if (fchmod(fd, 0700) < 0) return -errno;
        return 0;
}

/* The worker's prompt: the user's, with what it needs to know of its
 * sandbox. A shell script runs exactly as given; a summary's is fixed. */
/* The worker's prompt: the user's, then the blocks a worker must know of:
 * the check its changes will be judged by (a dispatch whose writes go to an
 * overlay, in a project that declares one; check: NULL when none), and its
 * output dir. A shell worker's prompt is a script: left as it is. */
static char *worker_prompt(Manager *m, const TaskSpec *s, const char *id, const char *output_dir,
                           const char *check) {
        if (s->kind == TASK_KIND_SUMMARY || streq_ptr(s->executor_id, "shell")) return strdup(s->prompt);
        bool sandboxed = m->settings.sandbox_enabled && !(s->launch && s->launch->no_sandbox);
        bool gated = check && sandboxed && m->settings.overlay_enabled && !(s->launch && s->launch->no_overlay) &&
                     !task_kind_info(s->kind)->never_lands;
        _cleanup_free_ char *verify = gated ? strdup_printf(
                "\n\n## Verification (required)\nThis repository declares a check command in .taskferry.toml; your "
                "changes are run through it before they can land:\n\n    %s\n\nRun it before you declare the task "
                "done. If it fails, fix the failures and run it again until it passes, then state the result.",
                check) : strdup("");
        if (!verify) return NULL;
        return strdup_printf("%s%s\n\n## Persistent output dir\nWrite any files you want to keep beyond this task "
                             "(reports, logs, artifacts) to %s (also available as $TASKFERRY_OUTPUT_DIR)%s. "
                             "They survive after the task ends; retrieve them with `taskferry output %s`.",
                             s->prompt, verify, output_dir, sandboxed ? " inside the sandbox" : "", id);
}

/* Take a task that never became durable out again, and what it made. */
static void task_unmake(Manager *m, Task *t, const char *output_dir) {
        launch_request_drop(t);
        _cleanup_free_ char *task_dir = tf_path_task_dir(&m->paths, t->id);
        if (task_dir) (void) rmdir(task_dir);
        if (output_dir) (void) rmdir(output_dir);
        manager_remove_task(m, t);
}

int task_new(Manager *m, const TaskSpec *spec, Task **ret, char **reason) {
        assert(spec && spec->kind >= 0 && spec->kind < _TASK_KIND_MAX);
        bool summary = spec->kind == TASK_KIND_SUMMARY;
        _cleanup_free_ char *new_id = spec->id ? NULL : task_id_new();
        const char *id = spec->id ? spec->id : new_id;
        _cleanup_free_ char *log_path = id ? tf_path_log(&m->paths, id) : NULL;
        _cleanup_free_ char *out_dir = id && !summary ? tf_path_output_dir(&m->paths, id) : NULL;
        if (!id || !log_path || (!summary && !out_dir)) return set_error(reason, -ENOMEM, "error: out of memory");
        if (out_dir) {
                int k = create_output_dir(out_dir);
                if (k < 0)
                        return set_error(reason, k, "error: cannot create task output directory %s: %s", out_dir,
                                         k == -ELOOP ? "task output directory is a symlink" : strerror(-k));
        }
        /* the project file as it is now: its check for the prompt, its
         * warning on the record (read again at launch and settlement) */
        ProjectConfig cfg = {0};
        if (!summary && project_config_load(spec->directory, &cfg) < 0) return set_error(reason, -ENOMEM, "error: out of memory");
        _cleanup_free_ char *prompt = worker_prompt(m, spec, id, out_dir, cfg.check);
        const char *user = strempty(spec->prompt);
        size_t plen = strlen(user), units = utf8_utf16_length(user, plen);
        _cleanup_free_ char *preview = units > PREVIEW_UNITS
                                               ? strdup_printf("%.*s\xE2\x80\xA6", (int) utf8_prefix_utf16(user, plen, PREVIEW_UNITS), user)
                                               : strdup(user);
        char iso[32];
        NewRecord n = {.spec = spec, .id = id, .log_path = log_path, .output_dir = out_dir, .prompt = prompt,
                       .preview = preview, .prompt_units = units,
                       .started_at = spec->started_at ? spec->started_at : format_iso(now_ms(), iso)};
        Task *t = NULL;
        int r = prompt && preview ? new_record(&n, &t) : -ENOMEM;
        if (r >= 0 && cfg.warning && (r = task_set_str(t, TASK_KEY_project_config_warning, cfg.warning)) < 0)
                task_free(t);
        project_config_done(&cfg);
        if (r >= 0 && (r = task_table_add(m, t)) < 0) task_free(t);
        if (r < 0) {
                if (out_dir) (void) rmdir(out_dir);
                return set_error(reason, r, "error: out of memory");
        }
        if (!summary && (t->launch.no_overlay || !m->settings.overlay_enabled) && m->settings.sandbox_enabled &&
            !t->launch.no_sandbox)
                log_warning("overlay disabled -- writes of task %s land directly on %s, not gated by accept/reject", t->id,
                            t->rec.directory);
        /* what it needs to launch after a restart, durable first (a crash
         * before the record is flushed leaves an orphan the boot sweep takes) */
        r = launch_request_save(t);
        if (r < 0) log_error_errno(r, "cannot record the launch request of task %s; dispatch refused", t->id);
        else if ((r = manager_flush_now(m)) < 0)
                log_error_errno(r, "cannot record task %s in tasks.json; dispatch refused", t->id);
        if (r < 0) {
                task_unmake(m, t, out_dir);
                if (summary) return set_error(reason, r, "error: cannot record the summary task durably: %s", strerror(-r));
                return set_error(reason, r,
                                 "error: cannot record the task durably in %s/tasks.json: %s\nhelp: make the state "
                                 "directory writable and free some space on its file system, then dispatch again",
                                 m->paths.state_dir, strerror(-r));
        }
        task_announce_added(t);
        scheduler_enqueue(m, t);
        scheduler_kick(m);
        *ret = t;
        return 0;
}

/* ---- what a state releases ---- */

static bool status_is_final(TaskStatus s) { return s != TASK_QUEUED && s != TASK_RUNNING; }

static void task_release(Task *t, TaskStatus entering) {
        Manager *m = t->m;
        if (t->rec.status == TASK_QUEUED && entering != TASK_QUEUED) scheduler_remove(m, t);
        if (!status_is_final(entering)) return;
        watchdog_stop(t);
        monitor_stop_kill_timer(t);
        _cleanup_free_ char *pf = tf_path_prompt(&m->paths, t->id);
        if (pf) (void) unlink(pf);
        launch_request_drop(t);
        scheduler_release_slot(t);
        if (m->task_sockets) m->task_sockets->close(t);
}

/* The one way into a final state: release what the task holds, then the
 * transition, then a kick (what it held may let another launch). */
static void task_enter_final(Task *t, TaskStatus s, ChangesetStatus cs) {
        Manager *m = t->m;
        task_release(t, s);
        task_persist(t);
        int r = task_transition(t, s, cs);
        if (r < 0)
                log_error("refusing an illegal move of %s: %s/%s to %s/%s", t->id,
                          strnull(task_status_to_string(t->rec.status)),
                          strnull(changeset_status_to_string(t->rec.changeset_status)),
                          strnull(task_status_to_string(s)), strnull(changeset_status_to_string(cs)));
        scheduler_kick(m);
}

static void task_set_ended_now(Task *t) {
        char iso[32];
        task_set_str(t, TASK_KEY_ended_at, format_iso(now_ms(), iso));
}

/* The launch failed before the worker ran: spawnError, crashed. */
static void task_fail_launch(Task *t, const char *message) {
        task_set_str(t, TASK_KEY_spawn_error, message);
        task_set_ended_now(t);
        task_enter_final(t, TASK_CRASHED, settle_spawn_error_changeset(t));
}

/* ---- running ---- */

/* The verdict is final; a changeset kept for review then meets the
 * project's check (gate.h). */
static void on_settled(Task *t, TaskStatus s, ChangesetStatus cs) {
        task_enter_final(t, s, cs);
        if (t->rec.changeset_status == CHANGESET_PENDING) (void) gate_start(t);
}

/* The shim reported the worker's pid: the watchdog watches its log from now
 * on (the sandbox set-up before it is not the worker's silence). */
static void on_worker_started(Task *t) {
        if (t->rec.status == TASK_RUNNING && t->shim_pid > 0 && !t->rec.cancel_requested && !t->rec.failure_reason)
                watchdog_start(t, task_fail_running);
}

/* The shim exited (its exit.json is on the task): running → settling. */
static void on_shim_exited(Task *t) {
        watchdog_stop(t); /* the settlement classifies the whole log */
        /* whatever the worker left in its scope (a setsid() daemon, a
         * process that ignored SIGTERM) ends with it */
        (void) scope_kill(t, SIGKILL);
        settle_start(t, on_settled);
}

static const MonitorCallbacks monitor_callbacks = {
        .worker_started = on_worker_started,
        .exited = on_shim_exited,
};

void task_start(Task *t) {
        Manager *m = t->m;
        _cleanup_(launch_plan_done) LaunchPlan plan = LAUNCH_PLAN_INIT;
        _cleanup_free_ char *why = NULL;
        int r = launch_prepare(t, &plan, &why);
        /* the overlay is made: its changeset is pending from here on, even if
         * the launch fails now (an empty overlay then ends as no changes) */
        if (t->rec.overlay_dirs && t->rec.changeset_status == CHANGESET_NONE)
                (void) task_transition(t, t->rec.status, CHANGESET_PENDING);
        if (r < 0) return task_fail_launch(t, why ? why : "cannot prepare the launch: out of memory");

        /* the overlay is never on disk without a durable owning record; and a
         * task not durably "running" must not run: after a restart it is
         * queued again and would run twice */
        task_release(t, TASK_RUNNING);
        (void) task_transition(t, TASK_RUNNING, t->rec.changeset_status);
        r = manager_flush_now(m);
        if (r < 0) {
                log_error_errno(r, "cannot flush tasks.json before spawning %s", t->id);
                _cleanup_free_ char *msg = strdup_printf("cannot record the launch durably in %s/tasks.json: %s",
                                                         m->paths.state_dir, strerror(-r));
                return task_fail_launch(t, msg ? msg : "cannot record the launch durably");
        }
        /* the scope's limits (scope.h), from the launch options */
        ScopeLimits limits;
        scope_limits_for(t, &limits);
        /* the request file (the caller's secrets, held by the launch spec
         * now) goes when the shim is let go (launch_go): until then it says
         * this launch may be started again */

        LaunchedShim shim;
        r = launch_spawn(t, &plan, &shim, &why);
        if (r < 0) return task_fail_launch(t, why ? why : "cannot fork taskferry-shim");
        t->shim_pid = shim.pid;
        /* durable at once: a daemon dying before the shim reports can still
         * re-adopt it */
        task_set_int(t, TASK_KEY_shim_pid_recorded, shim.pid);
        r = manager_flush_now(m);
        if (r < 0) log_warning_errno(r, "cannot flush tasks.json after spawning %s", t->id);
        scheduler_take_slot(t);
        monitor_watch_shim(t, shim.status_fd, &monitor_callbacks);
        scope_start(t, shim.pid, shim.hold_fd, &limits);
        task_persist(t);
}

/* ---- cancel ---- */

/* A cancel reaches the tasks the cancelled task's worker dispatched, and
 * theirs: a worker cannot go on through a nested task after its user
 * stopped it. */
static void cancel_dispatched(Task *parent, uint64_t grace_ms, unsigned depth) {
        Manager *m = parent->m;
        if (depth > 64) return;
        for (size_t i = 0; i < m->n_tasks; i++) {
                Task *c = m->tasks[i];
                if (c == parent || !streq_ptr(c->rec.dispatched_by, parent->id)) continue;
                if (c->rec.status == TASK_QUEUED) {
                        task_set_ended_now(c);
                        task_enter_final(c, TASK_CANCELLED, c->rec.changeset_status);
                } else if (c->rec.status == TASK_RUNNING && !c->rec.cancel_requested) {
                        task_set_bool(c, TASK_KEY_cancel_requested, true);
                        watchdog_stop(c);
                        (void) task_terminate(c, grace_ms);
                        task_persist(c);
                }
                cancel_dispatched(c, grace_ms, depth + 1);
        }
}

int task_cancel(Task *t, uint64_t grace_ms, char **note, char **reason) {
        cancel_dispatched(t, grace_ms, 0);
        if (t->rec.status == TASK_QUEUED) {
                task_set_ended_now(t);
                task_enter_final(t, TASK_CANCELLED, t->rec.changeset_status);
                *note = strdup("queued task cancelled before launch");
                return *note ? 0 : -ENOMEM;
        }
        if (t->rec.status != TASK_RUNNING) {
                *note = strdup_printf("task is already %s; nothing to cancel", strempty(task_status_to_string(t->rec.status)));
                return *note ? 0 : -ENOMEM;
        }
        int64_t pid = 0;
        bool has_pid = task_record_get_int(&t->rec, TASK_KEY_pid, &pid);
        if (!has_pid && t->shim_pid <= 0) return set_error(reason, -ESRCH, "error: task %s has no pid on record", t->id);
        task_set_bool(t, TASK_KEY_cancel_requested, true);
        watchdog_stop(t);
        int r = task_terminate(t, grace_ms);
        if (r < 0) return set_error(reason, r, "error: cannot signal task %s: %s", t->id, strerror(-r));
        task_persist(t);
        *note = strdup_printf("SIGTERM sent to process group %" PRId64 "; escalates to SIGKILL after %" PRIu64
                              "ms if it hasn't exited",
                              has_pid ? pid : (int64_t) t->shim_pid, grace_ms);
        return *note ? 0 : -ENOMEM;
}

void task_fail_running(Task *t, const char *reason, const char *detail) {
        Manager *m = t->m;
        if (t->rec.failure_reason || t->rec.status != TASK_RUNNING) return;
        task_set_str(t, TASK_KEY_failure_reason, reason);
        if (detail) task_set_str(t, TASK_KEY_failure_detail, detail);
        else task_set_null(t, TASK_KEY_failure_detail);
        watchdog_stop(t);
        log_info("task %s: %s; terminating its process group", t->id, reason);
        int r = manager_flush_now(m); /* tasks.json says why before the worker is signalled */
        if (r < 0) log_warning("cannot write tasks.json for %s: %s", t->id, strerror(-r));
        r = task_terminate(t, m->settings.watchdog_grace_ms);
        if (r < 0) log_warning("cannot signal task %s: %s", t->id, strerror(-r));
}

int task_decide_changeset(Task *t, ChangesetStatus cs) {
        assert(cs == CHANGESET_ACCEPTED || cs == CHANGESET_REJECTED);
        return task_transition(t, t->rec.status, cs);
}

/* ---- coldplug ---- */

static void coldplug_queued(Task *t);

/* A task durably running whose shim was never let go (its launch request is
 * still there: the daemon died during the launch) ran nothing: its overlay
 * goes and it is queued again. True if so. */
static bool coldplug_unlaunched(Task *t) {
        if (!launch_request_exists(t)) return false;
        int r = monitor_unlaunch(t);
        if (r == -EBUSY) {
                /* the shim runs all the same: the request is stale */
                launch_request_drop(t);
                return false;
        }
        if (r < 0) {
                log_warning_errno(r, "task %s: cannot tell whether its launch went ahead", t->id);
                return false;
        }
        r = launch_overlay_remove(t);
        if (r < 0) {
                log_warning_errno(r, "task %s: cannot remove the overlay of its unfinished launch", t->id);
                return false;
        }
        (void) task_set_null(t, TASK_KEY_overlay_dirs);
        (void) task_set_null(t, TASK_KEY_shim_pid_recorded);
        (void) task_set_null(t, TASK_KEY_unit);
        if (task_transition_unlaunch(t) < 0) return false;
        log_info("task %s: the daemon stopped before its worker started; queued again", t->id);
        coldplug_queued(t);
        return true;
}

/* A running task's shim outlives the daemon: watch it again, or settle it
 * from its exit.json. True if it stays "running" (adopted or settling). */
static bool coldplug_running(Task *t) {
        int r = monitor_readopt(t, &monitor_callbacks);
        if (r == MONITOR_READOPT_GONE) return false;
        scheduler_take_slot(t);
        if (r == MONITOR_READOPT_EXITED) {
                log_info("task %s finished while the daemon was down; settling it from its exit status", t->id);
                settle_start(t, on_settled);
                return true;
        }
        /* a fresh watcher: it reads the log from its start, so a worker that
         * printed before the restart is in the post-output phase */
        watchdog_start(t, task_fail_running);
        log_info("re-adopted task %s (shim pid %d)", t->id, (int) t->shim_pid);
        return true;
}

/* A task still queued when the daemon died is queued again, in table order,
 * with the launch options and caller env its dispatch recorded. Without them
 * it cannot run as dispatched (an older daemon's record, a lost file, or one
 * already launched whose "running" was never durable): it crashes with a
 * reason instead of running wrong or twice. */
static void coldplug_queued(Task *t) {
        int r = launch_request_load(t);
        if (r >= 0) {
                scheduler_enqueue(t->m, t);
                return;
        }
        log_warning("task %s was queued, but its launch request (%s) cannot be read: %s; not launched", t->id,
                    LAUNCH_REQUEST_FILE, r == -EBADMSG ? "malformed" : strerror(-r));
        _cleanup_free_ char *msg = strdup_printf("queued when the daemon stopped, but what it needs to launch (its launch "
                                                 "options and environment, %s) %s; dispatch it again",
                                                 LAUNCH_REQUEST_FILE, r == -ENOENT ? "was not recorded" : "cannot be read");
        task_set_str(t, TASK_KEY_spawn_error, msg ? msg : "launch request lost; dispatch it again");
        task_set_ended_now(t);
        task_enter_final(t, TASK_CRASHED, t->rec.changeset_status);
}

void task_coldplug(Manager *m) {
        /* nothing here adds to the table; settlements started here end later,
         * from the loop */
        size_t n = m->n_tasks;
        for (size_t i = 0; i < n; i++) {
                Task *t = m->tasks[i];
                if (t->rec.accept_started_at && t->rec.changeset_status == CHANGESET_PENDING) t->accept_interrupted = true;
                if (t->rec.status == TASK_RUNNING && (coldplug_unlaunched(t) || coldplug_running(t))) continue;
                if (t->rec.status == TASK_QUEUED) {
                        coldplug_queued(t);
                        continue;
                }
                /* Only a task whose shim is truly gone, or one never launched,
                 * reads "unknown". */
                if (task_is_active(t)) task_enter_final(t, TASK_UNKNOWN, t->rec.changeset_status);
                /* a settled task whose check gate the daemon's stop interrupted */
                if (task_is_settled(t)) gate_coldplug(t);
        }
}

int lifecycle_init(Manager *m) {
        m->scheduler.launch = task_start;
        return 0;
}
