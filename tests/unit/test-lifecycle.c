/* run/lifecycle.c: every kind of task is made by task_new and announced once
 * to every observer (journald included, for the daemon's own summary
 * tasks); a task_new that cannot make its task durable leaves nothing
 * behind; a queued cancel releases what the task held; nothing launches
 * inside a handler's or a settlement's call stack (the scheduler's tick is
 * deferred); coldplug gives each loaded task what it still needs. A whole
 * daemon (daemon.h) on its own loop, no socket, no shim. */

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "daemon-fixture.h"
#include "json-util.h"
#include "paths.h"
#include "process-util.h"
#include "run/launch.h"
#include "core/launch-options.h"
#include "overlay.h"
#include "unit.h"
#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
#include "string-util.h"

static Manager m;
static char *work; /* a dispatch directory */

/* ---- what the observers heard ---- */

typedef struct Heard {
        char *id;
        unsigned added, transitions;
} Heard;
static Heard heard[32];
static size_t n_heard;

static Heard *heard_of(const char *id) {
        for (size_t i = 0; i < n_heard; i++)
                if (streq(heard[i].id, id)) return &heard[i];
        ck_assert_uint_lt(n_heard, ELEMENTSOF(heard));
        heard[n_heard].id = strdup(id);
        return &heard[n_heard++];
}

static void on_added(Task *t, void *userdata) { heard_of(t->id)->added++; }
static void on_transition(Task *t, TaskStatus old_s, ChangesetStatus old_cs, void *userdata) {
        heard_of(t->id)->transitions++;
}

/* journald's entries, as the journal observer sends them */
static char *journal[64];
static size_t n_journal;

static int capture_journal(const struct iovec *iov, int n) {
        char *entry = strdup("");
        for (int i = 0; i < n; i++) {
                char *e = strdup_printf("%s%.*s\n", entry, (int) iov[i].iov_len, (const char *) iov[i].iov_base);
                free(entry);
                entry = e;
        }
        if (n_journal < ELEMENTSOF(journal)) journal[n_journal++] = entry;
        else free(entry);
        return 0;
}

/* The journal entries naming id with MESSAGE=message. */
static unsigned journal_entries(const char *id, const char *message) {
        char *idf = strdup_printf("TASKFERRY_TASK_ID=%s\n", id), *msg = strdup_printf("MESSAGE=%s\n", message);
        unsigned n = 0;
        for (size_t i = 0; i < n_journal; i++)
                if (strstr(journal[i], idf) && strstr(journal[i], msg)) n++;
        free(idf), free(msg);
        return n;
}

/* The scheduler's launch while a test watches it: how deep launches nest. */
static unsigned launch_depth, launch_max_depth, launches;
static void watched_launch(Task *t) {
        launch_depth++;
        if (launch_depth > launch_max_depth) launch_max_depth = launch_depth;
        launches++;
        task_start(t);
        launch_depth--;
}

static void setup(void) {
        tf_daemon_setup(&m, "test-lifecycle");
        /* the test's observer comes after the daemon's */
        ck_assert_int_eq(manager_add_observer(&m, &(TaskObserver) {.added = on_added, .transitioned = on_transition}), 0);
        journal_set_sender(&m, capture_journal);
        work = strdup_printf("%s/work", m.paths.home);
        ck_assert_int_eq(mkdir(work, 0755), 0);
        /* no stagger, no window: a tick launches all it may */
        m.settings.lowerdir_stagger_ms = 0;
        m.settings.max_dispatches_per_window = 0;
        m.settings.max_concurrent_tasks = 4;
        launch_depth = launch_max_depth = launches = 0;
}

static void teardown(void) {
        tf_daemon_teardown(&m);
        for (size_t i = 0; i < n_heard; i++) free(heard[i].id);
        n_heard = 0;
        for (size_t i = 0; i < n_journal; i++) free(journal[i]);
        n_journal = 0;
        free(work);
}

/* The record's keys, comma-separated, in its order. */
static char *record_keys(Task *t) {
        json_object *o = task_record_to_json(&t->rec);
        char *keys = strdup("");
        json_object_object_foreach(o, k, v) {
                (void) v;
                char *n = strdup_printf("%s%s%s", keys, *keys ? "," : "", k);
                free(keys);
                keys = n;
        }
        json_object_put(o);
        return keys;
}

static const char dispatch_keys[] =
        "id,directory,logPath,role,prompt,status,model,executorId,variant,sessionId,originSessionId,pid,startedAt,"
        "endedAt,exitCode,signal,promptPreview,promptTotalChars,spawnError,cancelRequested,internal,failureReason,"
        "failureDetail,incomplete,finalMarker,finalStatus,class,changesetStatus,diffPath,overlayDirs,preDispatchHead,"
        "changesetError,parentTaskId,checkStatus,checkCommand,checkExitCode,checkOutputTail,checkStartedAt,"
        "checkEndedAt,checkOverride,projectConfigWarning,checkGatePid,outputDir,dispatchedBy";

static Task *make(const TaskSpec *spec) {
        Task *t = NULL;
        char *reason = NULL;
        int r = task_new(&m, spec, &t, &reason);
        ck_assert_msg(r == 0, "task_new: %s", strnull(reason));
        ck_assert_ptr_null(reason);
        return t;
}

static bool in_queue(Task *t) {
        for (Task *q = m.scheduler.queue_head; q; q = q->next_queued)
                if (q == t) return true;
        return false;
}

/* tasks.json holds t (it was flushed before task_new returned) */
static bool durable(Task *t) {
        json_object *arr = tf_durable_tasks(m.paths.state_dir);
        bool ok = false;
        for (size_t i = 0; i < json_object_array_length(arr); i++)
                ok = ok || streq_ptr(json_get_string(json_object_array_get_idx(arr, i), "id"), t->id);
        json_object_put(arr);
        return ok;
}

/* What every new task must be: durable, queued, its launch request on disk,
 * announced once to every observer (the test's and journald's). */
static void assert_new(Task *t, TaskKind kind) {
        ck_assert_int_eq(t->kind, kind);
        ck_assert_int_eq(t->rec.status, TASK_QUEUED);
        ck_assert(durable(t));
        ck_assert(in_queue(t));
        ck_assert(launch_request_exists(t));
        Heard *h = heard_of(t->id);
        ck_assert_uint_eq(h->added, 1);
        ck_assert_uint_eq(h->transitions, 0);
        char *queued = strdup_printf("task %s: queued", t->id);
        ck_assert_uint_eq(journal_entries(t->id, queued), 1);
        free(queued);
}

START_TEST(every_kind_through_task_new) {
        LaunchOptions lo = {0};
        TaskSpec d = {.kind = TASK_KIND_DISPATCH, .directory = work, .prompt = "echo one", .executor_id = "shell", .launch = &lo};
        Task *td = make(&d);
        assert_new(td, TASK_KIND_DISPATCH);
        char *keys = record_keys(td);
        ck_assert_str_eq(keys, dispatch_keys);
        free(keys);
        ck_assert_str_eq(td->rec.role, "dispatch");
        ck_assert(!td->rec.internal);
        /* a shell script runs exactly as given; the output dir exists, 0700 */
        ck_assert_str_eq(td->rec.prompt, "echo one");
        struct stat st;
        ck_assert_int_eq(stat(td->rec.output_dir, &st), 0);
        ck_assert_int_eq(st.st_mode & 0777, 0700);

        /* nested: dispatched by td's worker */
        TaskSpec n = d;
        n.kind = TASK_KIND_NESTED;
        n.dispatched_by = td->id;
        Task *tn = make(&n);
        assert_new(tn, TASK_KIND_NESTED);
        ck_assert_str_eq(tn->rec.dispatched_by, td->id);

        /* a timer job's: its name is the record's last key */
        TaskSpec j = d;
        j.kind = TASK_KIND_JOB;
        j.job = "nightly";
        Task *tj = make(&j);
        assert_new(tj, TASK_KIND_JOB);
        keys = record_keys(tj);
        char *want = strdup_printf("%s,job", dispatch_keys);
        ck_assert_str_eq(keys, want);
        free(keys), free(want);

        /* an advisor: role advisor; a model's prompt gets the output-dir block */
        TaskSpec a = d;
        a.kind = TASK_KIND_ADVISOR;
        a.executor_id = "pi";
        a.model = "p/m";
        a.prompt = "review this";
        Task *ta = make(&a);
        assert_new(ta, TASK_KIND_ADVISOR);
        ck_assert_str_eq(ta->rec.role, "advisor");
        ck_assert(startswith(ta->rec.prompt, "review this\n\n## Persistent output dir\n"));
        ck_assert_ptr_nonnull(strstr(ta->rec.prompt, ta->rec.output_dir));

        /* the daemon's own summary task: internal, no role, no output dir, its
         * own key order, its id chosen before (its snapshot is named by it) */
        json_object *of = json_object_new_object();
        json_add_string(of, "sourceTaskId", td->id);
        char *summaries = strdup_printf("%s/summaries", m.paths.state_dir);
        LaunchOptions slo = {.summary_session_id = (char *) "ses_1"};
        TaskSpec s = {.kind = TASK_KIND_SUMMARY,
                      .id = "oc_summary_1",
                      .directory = summaries,
                      .prompt = "Summarize the attached task transcript.",
                      .model = "opencode/m",
                      .executor_id = "opencode",
                      .summary_of = of,
                      .launch = &slo};
        Task *ts = make(&s);
        json_object_put(of);
        free(summaries);
        assert_new(ts, TASK_KIND_SUMMARY);
        ck_assert_str_eq(ts->id, "oc_summary_1");
        keys = record_keys(ts);
        ck_assert_str_eq(keys, "id,logPath,summaryOf,status,directory,model,executorId,variant,sessionId,originSessionId,"
                               "pid,startedAt,endedAt,exitCode,signal,prompt,promptPreview,promptTotalChars,spawnError,"
                               "cancelRequested,internal,failureReason,failureDetail");
        free(keys);
        ck_assert(ts->rec.internal);
        ck_assert_ptr_null(ts->rec.role);
        ck_assert_ptr_null(ts->rec.output_dir);
        ck_assert_str_eq(ts->launch.summary_session_id, "ses_1");
        /* journald says it is the daemon's own */
        bool internal_field = false;
        for (size_t i = 0; i < n_journal; i++)
                if (strstr(journal[i], "TASKFERRY_TASK_ID=oc_summary_1\n") && strstr(journal[i], "TASKFERRY_INTERNAL=1\n"))
                        internal_field = true;
        ck_assert(internal_field);
        /* nothing launched inside task_new: the tick is deferred */
        ck_assert_uint_eq(launches, 0);
        ck_assert_uint_eq(m.scheduler.running, 0);
}
END_TEST

/* A prompt over 200 UTF-16 units is previewed, its length recorded. */
START_TEST(long_prompt_preview) {
        char *prompt = malloc(301);
        memset(prompt, 'x', 300);
        prompt[300] = 0;
        TaskSpec d = {.kind = TASK_KIND_DISPATCH, .directory = work, .prompt = prompt, .executor_id = "shell"};
        Task *t = make(&d);
        int64_t total = 0;
        ck_assert(task_record_get_int(&t->rec, TASK_KEY_prompt_total_chars, &total));
        ck_assert_int_eq(total, 300);
        ck_assert_uint_eq(strlen(t->rec.prompt_preview), 200 + strlen("\xE2\x80\xA6"));
        free(prompt);
}
END_TEST

/* A task that cannot be made durable is not made at all: no record, no
 * output dir, no task dir, no announcement. */
START_TEST(failed_task_new_leaves_nothing) {
        char *tasks_json = strdup_printf("%s/tasks.json", m.paths.state_dir);
        char *in = strdup_printf("%s/x", tasks_json);
        ck_assert_int_eq(mkdir(tasks_json, 0700), 0); /* a non-empty dir: no rename lands over it */
        ck_assert_int_eq(mkdir(in, 0700), 0);
        TaskSpec d = {.kind = TASK_KIND_DISPATCH, .directory = work, .prompt = "echo one", .executor_id = "shell"};
        Task *t = NULL;
        char *reason = NULL;
        ck_assert_int_lt(task_new(&m, &d, &t, &reason), 0);
        ck_assert_ptr_nonnull(reason);
        ck_assert_msg(startswith(reason, "error: cannot record the task durably in "), "%s", reason);
        ck_assert_uint_eq(m.n_tasks, 0);
        ck_assert_uint_eq(n_heard, 0);
        ck_assert_uint_eq(n_journal, 0);
        ck_assert_ptr_null(m.scheduler.queue_head);
        char *outputs = strdup_printf("%s/outputs", m.paths.state_dir), *tasks = strdup_printf("%s/tasks", m.paths.state_dir);
        DIR *dd = opendir(outputs);
        for (struct dirent *de; (de = readdir(dd));) ck_assert_msg(de->d_name[0] == '.', "left behind: %s", de->d_name);
        closedir(dd);
        dd = opendir(tasks);
        for (struct dirent *de; (de = readdir(dd));) ck_assert_msg(de->d_name[0] == '.', "left behind: %s", de->d_name);
        closedir(dd);
        free(reason), free(in), free(tasks_json), free(outputs), free(tasks);
}
END_TEST

/* A queued cancel: cancelled, its queue entry and launch request gone, the
 * note of the protocol, one transition announced. */
START_TEST(cancel_queued_releases_it) {
        m.settings.max_concurrent_tasks = 0; /* nothing launches */
        TaskSpec d = {.kind = TASK_KIND_DISPATCH, .directory = work, .prompt = "echo one", .executor_id = "shell"};
        Task *t = make(&d);
        char *note = NULL, *reason = NULL;
        ck_assert_int_eq(task_cancel(t, 1000, &note, &reason), 0);
        ck_assert_str_eq(note, "queued task cancelled before launch");
        ck_assert_int_eq(t->rec.status, TASK_CANCELLED);
        ck_assert(task_record_is_set(&t->rec, TASK_KEY_ended_at));
        ck_assert(!in_queue(t));
        ck_assert(!launch_request_exists(t));
        ck_assert_uint_eq(heard_of(t->id)->transitions, 1);
        char *moved = strdup_printf("task %s: queued → cancelled", t->id);
        ck_assert_uint_eq(journal_entries(t->id, moved), 1);
        free(moved);
        free(note);
        /* a second cancel changes nothing */
        ck_assert_int_eq(task_cancel(t, 1000, &note, &reason), 0);
        ck_assert_str_eq(note, "task is already cancelled; nothing to cancel");
        ck_assert_uint_eq(heard_of(t->id)->transitions, 1);
        free(note);
        /* a cancel reaches what its worker dispatched */
        Task *parent = make(&d);
        TaskSpec n = d;
        n.kind = TASK_KIND_NESTED;
        n.dispatched_by = parent->id;
        Task *child = make(&n);
        ck_assert_int_eq(task_cancel(parent, 1000, &note, &reason), 0);
        ck_assert_int_eq(child->rec.status, TASK_CANCELLED);
        ck_assert_int_eq(parent->rec.status, TASK_CANCELLED);
        free(note);
}
END_TEST

/* Nothing launches from inside task_new or a settlement: the scheduler's
 * tick runs from the loop, and a launch that fails at once (and settles,
 * and kicks) does not start the next launch inside its own call. */
START_TEST(scheduler_tick_is_deferred) {
        m.scheduler.launch = watched_launch;
        /* an advisor needs the sandbox: with it off, its launch fails at once */
        m.settings.sandbox_enabled = false;
        TaskSpec a = {.kind = TASK_KIND_ADVISOR, .directory = work, .prompt = "p", .executor_id = "pi", .model = "p/m"};
        Task *t1 = make(&a), *t2 = make(&a), *t3 = make(&a);
        ck_assert_uint_eq(launches, 0); /* task_new kicked, nothing ran */
        tf_run_pending(&m);             /* the tick */
        ck_assert_uint_eq(launches, 3);
        ck_assert_uint_eq(launch_max_depth, 1); /* never a launch inside a launch's settlement */
        Task *all[] = {t1, t2, t3};
        for (size_t i = 0; i < ELEMENTSOF(all); i++) {
                ck_assert_int_eq(all[i]->rec.status, TASK_CRASHED);
                ck_assert_ptr_nonnull(strstr(strempty(all[i]->rec.spawn_error), "requires overlay-gated writes"));
                ck_assert_uint_eq(heard_of(all[i]->id)->transitions, 1);
        }
        /* a settlement (here: a queued cancel) launches nothing in its own call */
        m.settings.max_concurrent_tasks = 1;
        m.settings.sandbox_enabled = true;
        TaskSpec d = {.kind = TASK_KIND_DISPATCH, .directory = work, .prompt = "true", .executor_id = "shell"};
        m.scheduler.launch = NULL; /* hold the queue while both are made */
        Task *q1 = make(&d), *q2 = make(&d);
        tf_run_pending(&m);
        m.scheduler.launch = watched_launch;
        launches = 0;
        char *note = NULL, *reason = NULL;
        ck_assert_int_eq(task_cancel(q1, 1000, &note, &reason), 0);
        free(note);
        ck_assert_uint_eq(launches, 0);
        ck_assert_int_eq(q2->rec.status, TASK_QUEUED);
        /* the loop's tick launches q2 (its launch fails here: no shim is
         * built in the unit suites' tree; what matters is when) */
        free(m.settings.shim_path);
        m.settings.shim_path = strdup("/nonexistent/taskferry-shim");
        tf_run_pending(&m);
        ck_assert_uint_eq(launches, 1);
        ck_assert_int_ne(q2->rec.status, TASK_QUEUED);
}
END_TEST

/* ---- coldplug ---- */

static void write_file(const char *path, const char *data) {
        ck_assert_int_eq(write_file_atomic(path, data, strlen(data), 0600), 0);
}

static void write_launch_request(const char *id, const char *json) {
        char *d = tf_path_task_dir(&m.paths, id);
        ck_assert_int_eq(mkdir_p_chmod(d, 0700), 0);
        char *p = strdup_printf("%s/%s", d, LAUNCH_REQUEST_FILE);
        write_file(p, json);
        free(p), free(d);
}

START_TEST(coldplug_gives_each_task_what_it_needs) {
        m.settings.max_concurrent_tasks = 0; /* nothing launches in this test */
        write_launch_request("oc_q1", "{\"launch\":{\"noOverlay\":true},\"env\":{\"K\":\"v\"}}");
        /* durably running, its shim never let go: its request and overlay are
         * still there, its recorded pid runs no shim */
        write_launch_request("oc_unl", "{\"launch\":{},\"env\":{\"K\":\"w\"}}");
        char *tmp_root = strdup_printf("%s/cow", m.paths.home), *root = strdup_printf("%s/taskferry-cow-oc_unl", tmp_root);
        ck_assert_int_eq(overlay_dirs_create(tmp_root, root), 0);
        /* its request is still there, but the shim ran (its launch.json) */
        write_launch_request("oc_ran", "{\"launch\":{},\"env\":null}");
        char *ran_dir = tf_path_task_dir(&m.paths, "oc_ran");
        free(tf_put(ran_dir, "launch.json", "{\"shimPid\":1,\"workerPid\":1}", 27));
        char *tasks = strdup_printf("%s/tasks.json", m.paths.state_dir);
        char *unl = strdup_printf("{\"id\":\"oc_unl\",\"status\":\"running\",\"changesetStatus\":\"pending\",\"shimPid\":1,"
                                  "\"overlayDirs\":{\"tmpRoot\":\"%s\",\"root\":\"%s\"}},"
                                  "{\"id\":\"oc_ran\",\"status\":\"running\",\"changesetStatus\":\"none\"},",
                                  tmp_root, root);
        char *all = strdup_printf(
                   "[{\"id\":\"oc_run\",\"status\":\"running\",\"changesetStatus\":\"none\",\"shimPid\":1},%s"
                   "{\"id\":\"oc_q1\",\"status\":\"queued\",\"changesetStatus\":\"none\"},"
                   "{\"id\":\"oc_q2\",\"status\":\"queued\",\"changesetStatus\":\"none\"},"
                   "{\"id\":\"oc_acc\",\"status\":\"done\",\"changesetStatus\":\"pending\","
                   "\"acceptStartedAt\":\"2026-01-01T00:00:00.000Z\"},"
                   "{\"id\":\"oc_done\",\"status\":\"done\",\"changesetStatus\":\"accepted\"}]", unl);
        write_file(tasks, all);
        free(tasks), free(unl), free(all);
        ck_assert_int_eq(manager_load_tasks(&m), 0);
        /* the load only loads */
        ck_assert_uint_eq(m.n_tasks, 7);
        ck_assert_ptr_null(m.scheduler.queue_head);
        for (size_t i = 0; i < m.n_tasks; i++) ck_assert_uint_eq(heard_of(m.tasks[i]->id)->transitions, 0);
        task_coldplug(&m);
        Task *run = manager_find_task(&m, "oc_run"), *q1 = manager_find_task(&m, "oc_q1"),
             *q2 = manager_find_task(&m, "oc_q2"), *acc = manager_find_task(&m, "oc_acc"),
             *done = manager_find_task(&m, "oc_done");
        /* a running task whose shim is gone (pid 1 is no taskferry-shim) */
        ck_assert_int_eq(run->rec.status, TASK_UNKNOWN);
        ck_assert_uint_eq(heard_of("oc_run")->transitions, 1);
        /* a queued task with its launch request is queued again, with it */
        ck_assert(in_queue(q1));
        ck_assert(q1->launch.no_overlay);
        ck_assert_str_eq(json_get_string(q1->caller_env, "K"), "v");
        /* one without cannot run as dispatched */
        ck_assert_int_eq(q2->rec.status, TASK_CRASHED);
        ck_assert_ptr_nonnull(strstr(strempty(q2->rec.spawn_error), "dispatch it again"));
        ck_assert(!in_queue(q2));
        /* an accept an earlier daemon began is never applied twice */
        ck_assert(acc->accept_interrupted);
        ck_assert(!done->accept_interrupted);
        ck_assert_int_eq(done->rec.status, TASK_DONE);
        ck_assert_uint_eq(heard_of("oc_done")->transitions, 0);
        /* the one never let go runs nothing and is queued again, as
         * dispatched: its overlay gone, its changeset none */
        Task *u = manager_find_task(&m, "oc_unl");
        ck_assert_int_eq(u->rec.status, TASK_QUEUED);
        ck_assert_int_eq(u->rec.changeset_status, CHANGESET_NONE);
        ck_assert(in_queue(u));
        ck_assert_ptr_null(u->rec.overlay_dirs);
        ck_assert(!task_record_is_set(&u->rec, TASK_KEY_shim_pid_recorded));
        ck_assert_int_eq(access(root, F_OK), -1);
        ck_assert_str_eq(json_get_string(u->caller_env, "K"), "w");
        ck_assert(launch_request_exists(u));
        ck_assert_uint_eq(journal_entries("oc_unl", "task oc_unl: running → queued"), 1);
        /* the one whose shim ran is not launched again: its stale request
         * goes, and with its shim gone it is unknown */
        Task *ran = manager_find_task(&m, "oc_ran");
        ck_assert_int_eq(ran->rec.status, TASK_UNKNOWN);
        ck_assert(!launch_request_exists(ran));
        ck_assert(!in_queue(ran));
        /* the coldplug's moves are announced like any (journald too) */
        ck_assert_uint_eq(journal_entries("oc_run", "task oc_run: running → unknown"), 1);
        ck_assert(m.store.dirty);
        free(tmp_root), free(root), free(ran_dir);
}
END_TEST

/* ---- the held shim ---- */

/* Fork a "shim" (a script that leaves a mark) through launch_spawn, then
 * end its hold: let go (launch_go) or not (the hold fd closed, as by a
 * daemon that died). True if the script ran. */
static bool held_shim_ran(bool let_go) {
        char *dir = tf_tmpdir_new("held-shim");
        char *mark = tf_path(dir, "ran");
        char *script = strdup_printf("#!/bin/sh\n: > '%s'\n", mark);
        char *shim = tf_put(dir, "taskferry-shim", script, strlen(script));
        ck_assert_int_eq(chmod(shim, 0755), 0);
        free(m.settings.shim_path);
        m.settings.shim_path = shim;
        m.settings.max_concurrent_tasks = 0; /* only this test launches */
        Task *t = make(&(TaskSpec) {.kind = TASK_KIND_DISPATCH, .directory = work, .prompt = "p", .executor_id = "shell"});
        ck_assert(launch_request_exists(t));
        LaunchPlan plan = LAUNCH_PLAN_INIT;
        plan.spec_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        LaunchedShim ls;
        char *why = NULL;
        ck_assert_int_eq(launch_spawn(t, &plan, &ls, &why), 0);
        if (let_go) {
                launch_go(t, &ls.hold_fd);
                ck_assert_int_eq(ls.hold_fd, -1);
                /* from here on a restart re-adopts: the request is gone */
                ck_assert(!launch_request_exists(t));
        } else
                close(ls.hold_fd);
        int st = wait_for_terminate_and_check("held shim", ls.pid, 0);
        close(ls.status_fd);
        bool ran = access(mark, F_OK) == 0;
        ck_assert_int_eq(st, ran ? 0 : EXIT_FAILURE);
        free(script), free(mark);
        tf_tmpdir_free(dir);
        return ran;
}

START_TEST(held_shim_runs_only_when_let_go) {
        ck_assert(!held_shim_ran(false));
        ck_assert(held_shim_ran(true));
}
END_TEST

TF_MAIN("lifecycle", "lifecycle", setup, teardown, 60, every_kind_through_task_new, long_prompt_preview,
        failed_task_new_leaves_nothing, cancel_queued_releases_it, scheduler_tick_is_deferred,
        coldplug_gives_each_task_what_it_needs, held_shim_runs_only_when_let_go)
