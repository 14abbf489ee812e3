/* settle.c: a task's end, from the exit fields the monitor recorded and
 * the log its worker wrote to the verdict (status, changeset status) and
 * the record's result fields. The settlement is a forked job: each case
 * runs a Manager's loop until the verdict arrives. The logs are what the
 * executors write (canonical NDJSON: pi's and OpenCode's events, the shell's
 * text lines); the overlays are real directories, and extraction runs on
 * them for real. */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/manager.h"
#include "core/task.h"
#include "daemon-fixture.h"
#include "json-util.h"
#include "launch-spec.h"
#include "overlay.h"
#include "run/scope.h"
#include "run/settle.h"
#include "unit.h"
#include "fileio.h"
#include "fs-util.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"

static Manager m;
static char *dir, *ws;

static void setup(void) {
        tf_manager_setup(&m, "test-settle");
        dir = m.paths.state_dir;
        ws = strdup_printf("%s/ws", dir);
        ck_assert_int_eq(mkdir(ws, 0700), 0);
        _cleanup_free_ char *a = strdup_printf("%s/a.txt", ws);
        ck_assert_int_eq(write_file_atomic(a, "one\n", 4, 0600), 0);
}

static void teardown(void) {
        tf_manager_teardown(&m);
        free(ws);
}

/* ---- logs ---- */

/* Write <state>/logs/<id>.ndjson with text (lines, each ending in '\n');
 * returns its path. */
static char *log_write(const char *id, const char *text) {
        _cleanup_free_ char *logs = strdup_printf("%s/logs", dir);
        ck_assert_int_eq(mkdir_p(logs, 0700), 0);
        char *p = strdup_printf("%s/%s.ndjson", logs, id);
        ck_assert_int_eq(write_file_atomic(p, text, strlen(text), 0600), 0);
        return p;
}

/* pi's canonical log of a final answer: its session line, the text of the
 * answer (json: a JSON string's contents), the stop. */
static char *pi_answer(const char *json_text) {
        return strdup_printf("{\"sessionID\":\"ses_pi\"}\n"
                             "{\"type\":\"tool_progress\",\"part\":{\"type\":\"tool-progress\",\"tool\":\"bash\","
                             "\"toolCallId\":\"c1\"}}\n"
                             "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"%s\",\"messageID\":\"r1\"}}\n"
                             "{\"type\":\"step_finish\",\"part\":{\"type\":\"step-finish\",\"reason\":\"stop\","
                             "\"tokens\":{\"input\":3,\"output\":5},\"cost\":0.001,\"messageID\":\"r1\"}}\n",
                             json_text);
}

/* pi's log of a worker that wrote but never finished its answer. */
static const char pi_unfinished[] =
        "{\"sessionID\":\"ses_pi\"}\n"
        "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"Let me look\",\"messageID\":\"r1\"}}\n"
        "{\"type\":\"tool_progress\",\"part\":{\"type\":\"tool-progress\",\"tool\":\"bash\",\"toolCallId\":\"c1\"}}\n";

/* The shell's: each stdout line a text event of message "shell". */
static char *shell_lines(const char *const *lines) {
        char *s = strdup("");
        for (; *lines; lines++) {
                char *n = strdup_printf("%s{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"%s\\n\","
                                        "\"messageID\":\"shell\"}}\n",
                                        s, *lines);
                free(s);
                s = n;
        }
        return s;
}

/* ---- tasks ---- */

/* A running task of executor ex with log text (NULL: no log file) and the
 * record's other keys (a JSON object's members: exitCode, signal, ...). */
static Task *task_with(const char *id, const char *ex, const char *log_text, const char *members) {
        _cleanup_free_ char *log = log_text ? log_write(id, log_text) : strdup_printf("%s/logs/%s.ndjson", dir, id);
        /* no overlay unless members name one */
        bool overlay = strstr(members, "\"changesetStatus\"");
        return tf_taskf(&m,
                        "{\"id\":\"%s\",\"directory\":\"%s\",\"logPath\":\"%s\",\"status\":\"running\","
                        "\"model\":\"prov/model\",\"executorId\":\"%s\"%s%s%s}",
                        id, ws, log, ex, overlay ? "" : ",\"changesetStatus\":\"none\",\"overlayDirs\":null",
                        *members ? "," : "", members);
}

/* ---- the settlement, run to its verdict ---- */

typedef struct Verdict {
        int calls;
        Task *t;
        TaskStatus status;
        ChangesetStatus cs;
} Verdict;
static Verdict verdict;

static void on_done(Task *t, TaskStatus status, ChangesetStatus cs) {
        verdict.calls++;
        verdict.t = t;
        verdict.status = status;
        verdict.cs = cs;
}

/* settle_start(t) and the loop until its verdict (30 s at most). */
static void settle(Task *t) {
        verdict = (Verdict) {0};
        settle_start(t, on_done);
        ck_assert(t->settling || verdict.calls > 0);
        uint64_t end = mono_ms() + 30000;
        while (verdict.calls == 0) {
                ck_assert_msg(mono_ms() < end, "task %s: no verdict", t->id);
                ck_assert_int_ge(sd_event_run(m.event, 100 * 1000), 0);
        }
        ck_assert_int_eq(verdict.calls, 1);
        ck_assert_ptr_eq(verdict.t, t);
        ck_assert(!t->settling);
}

static void check_status(Task *t, TaskStatus want) {
        ck_assert_msg(verdict.status == want, "task %s: %s, want %s (failureReason %s: %s)", t->id,
                      task_status_to_string(verdict.status), task_status_to_string(want),
                      strnull(t->rec.failure_reason), strnull(t->rec.failure_detail));
}

/* A task made by task_with, settled, and its verdict's status checked. */
static Task *settled(const char *id, const char *ex, const char *log_text, const char *members, TaskStatus want) {
        Task *t = task_with(id, ex, log_text, members);
        settle(t);
        check_status(t, want);
        return t;
}

static bool incomplete(Task *t) { return task_record_is_set(&t->rec, TASK_KEY_incomplete) && t->rec.incomplete; }

/* ---- status ---- */

START_TEST(done_with_a_final_answer) {
        _cleanup_free_ char *log = pi_answer("All done.");
        Task *t = settled("st_done", "pi", log, "\"exitCode\":0,\"signal\":null", TASK_DONE);
        ck_assert_int_eq(verdict.cs, CHANGESET_NONE);
        ck_assert(!incomplete(t));
        ck_assert_ptr_null(t->rec.failure_reason);
        ck_assert_ptr_null(t->rec.final_status);
}
END_TEST

START_TEST(crashed) {
        /* a nonzero exit without a final answer */
        Task *a = settled("st_exit2", "pi", pi_unfinished, "\"exitCode\":2,\"signal\":null", TASK_CRASHED);
        ck_assert_ptr_null(a->rec.failure_reason); /* the log has JSON: no boot failure */
        /* killed by a signal */
        (void) settled("st_sig", "pi", pi_unfinished, "\"exitCode\":null,\"signal\":\"SIGKILL\"", TASK_CRASHED);
        /* a clean exit, but the launch recorded a spawn error */
        (void) settled("st_spawn", "pi", NULL,
                       "\"exitCode\":0,\"signal\":null,\"spawnError\":\"spawn pi ENOENT\"", TASK_CRASHED);
        /* a clean exit, but a watcher recorded a failure */
        Task *d = settled("st_reason", "pi", pi_unfinished,
                          "\"exitCode\":0,\"signal\":null,\"failureReason\":\"no_output_timeout_dead_spawn\"",
                          TASK_CRASHED);
        ck_assert_str_eq(d->rec.failure_reason, "no_output_timeout_dead_spawn");
        /* both are read: a signal is a crash even beside a 0 exit code */
        (void) settled("st_sig0", "pi", pi_unfinished, "\"exitCode\":0,\"signal\":\"SIGTERM\"", TASK_CRASHED);
        /* no exit code at all */
        (void) settled("st_nocode", "pi", pi_unfinished, "\"exitCode\":null,\"signal\":null", TASK_CRASHED);
}
END_TEST

/* The log says why: the classifier's reason, or a boot failure's line. */
START_TEST(crashed_with_the_log_s_reason) {
        Task *a = settled("st_rate", "opencode",
                          "{\"type\":\"step_start\",\"sessionID\":\"ses_oc\"}\n"
                          "{\"type\":\"error\",\"sessionID\":\"ses_oc\",\"message\":\"429 rate limit exceeded\"}\n",
                          "\"exitCode\":0,\"signal\":null", TASK_CRASHED);
        ck_assert_str_eq(a->rec.failure_reason, "rate_limited");
        ck_assert_str_eq(a->rec.failure_detail, "429 rate limit exceeded");
        /* a reason recorded before is not overwritten by the log's */
        Task *b = settled("st_kept", "opencode",
                          "{\"type\":\"error\",\"sessionID\":\"ses_oc\",\"message\":\"429 rate limit exceeded\"}\n",
                          "\"exitCode\":1,\"signal\":null,\"failureReason\":\"no_output_timeout_stalled\"",
                          TASK_CRASHED);
        ck_assert_str_eq(b->rec.failure_reason, "no_output_timeout_stalled");
        /* no JSON line at all and an explicit nonzero exit: pi did not boot */
        Task *c = settled("st_boot", "pi", "node: warning: something\nerror: Cannot find module 'pi'\n\n",
                          "\"exitCode\":1,\"signal\":null", TASK_CRASHED);
        ck_assert_str_eq(c->rec.failure_reason, "pi_boot_failure");
        ck_assert_str_eq(c->rec.failure_detail, "error: Cannot find module 'pi'");
        /* killed by a signal is no boot failure */
        Task *d = settled("st_boot_sig", "pi", "error: Cannot find module 'pi'\n",
                          "\"exitCode\":null,\"signal\":\"SIGTERM\"", TASK_CRASHED);
        ck_assert_ptr_null(d->rec.failure_reason);
}
END_TEST

START_TEST(cancelled) {
        _cleanup_free_ char *log = pi_answer("All done.");
        /* a cancel wins over a clean exit with a final answer */
        (void) settled("st_cancel_ok", "pi", log,
                       "\"exitCode\":0,\"signal\":null,\"cancelRequested\":true", TASK_CANCELLED);
        /* and over a failure */
        (void) settled("st_cancel_sig", "pi", log,
                       "\"exitCode\":null,\"signal\":\"SIGTERM\",\"cancelRequested\":true,"
                       "\"failureReason\":\"no_output_timeout_stalled\"", TASK_CANCELLED);
        /* cancelRequested false is no cancel */
        (void) settled("st_cancel_no", "pi", log,
                       "\"exitCode\":0,\"signal\":null,\"cancelRequested\":false", TASK_DONE);
}
END_TEST

/* A worker that reached a final answer before it failed is done; its
 * failure stays on the record. Not for a launch that never ran. */
START_TEST(crashed_after_a_final_answer_is_done) {
        _cleanup_free_ char *log = pi_answer("The fix is in.");
        Task *a = settled("st_rec_exit", "pi", log, "\"exitCode\":1,\"signal\":null", TASK_DONE);
        ck_assert(!incomplete(a));
        Task *b = settled("st_rec_stall", "pi", log,
                          "\"exitCode\":null,\"signal\":\"SIGTERM\",\"failureReason\":\"no_output_timeout_stalled\","
                          "\"failureDetail\":\"no output for 600s\"", TASK_DONE);
        ck_assert_str_eq(b->rec.failure_reason, "no_output_timeout_stalled");
        ck_assert_str_eq(b->rec.failure_detail, "no output for 600s");
        (void) settled("st_rec_spawn", "pi", log,
                       "\"exitCode\":1,\"signal\":null,\"spawnError\":\"spawn failed\"", TASK_CRASHED);
        /* a final answer that is only blank is none */
        _cleanup_free_ char *blank = pi_answer(" \\n\\t ");
        (void) settled("st_rec_blank", "pi", blank, "\"exitCode\":1,\"signal\":null", TASK_CRASHED);
        /* the disk budget's stop stays a crash */
        (void) settled("st_rec_disk", "pi", log,
                       "\"exitCode\":null,\"signal\":\"SIGKILL\",\"failureReason\":\"disk_quota_exceeded\"",
                       TASK_CRASHED);
}
END_TEST

/* ---- completeness ---- */

START_TEST(no_output) {
        /* a shell's exit code is its success: silence is complete */
        Task *a = settled("st_sh_quiet", "shell", "", "\"exitCode\":0,\"signal\":null", TASK_DONE);
        ck_assert(!incomplete(a));
        /* a coding agent that exits 0 without an answer is incomplete */
        Task *b = settled("st_pi_quiet", "pi", "", "\"exitCode\":0,\"signal\":null", TASK_DONE);
        ck_assert(incomplete(b));
        Task *c = settled("st_oc_quiet", "opencode", "{\"type\":\"step_start\",\"sessionID\":\"ses_oc\"}\n",
                          "\"exitCode\":0,\"signal\":null", TASK_DONE);
        ck_assert(incomplete(c));
        /* the shell's output is its message */
        const char *out[] = {"formatted 3 files", NULL};
        _cleanup_free_ char *sh = shell_lines(out);
        Task *d = settled("st_sh_out", "shell", sh, "\"exitCode\":0,\"signal\":null", TASK_DONE);
        ck_assert(!incomplete(d));
}
END_TEST

START_TEST(final_marker) {
        _cleanup_free_ char *hit = pi_answer("I changed it.\\nTASK-COMPLETE"), *miss = pi_answer("I changed it.");
        const char *marker = "\"finalMarker\":\"^TASK-COMPLETE$\"";
        _cleanup_free_ char *members = strdup_printf("\"exitCode\":0,\"signal\":null,%s", marker);
        Task *a = settled("st_mark_hit", "pi", hit, members, TASK_DONE);
        ck_assert(!incomplete(a));
        Task *b = settled("st_mark_miss", "pi", miss, members, TASK_DONE);
        ck_assert(incomplete(b));
        /* for the shell too, an explicit marker must match */
        const char *yes[] = {"building", "TASK-COMPLETE", NULL}, *no[] = {"building", NULL};
        _cleanup_free_ char *sh_yes = shell_lines(yes), *sh_no = shell_lines(no);
        Task *c = settled("st_mark_sh_hit", "shell", sh_yes, members, TASK_DONE);
        ck_assert(!incomplete(c));
        Task *d = settled("st_mark_sh_miss", "shell", sh_no, members, TASK_DONE);
        ck_assert(incomplete(d));
        /* the marker is matched against the final message only, not earlier ones */
        _cleanup_free_ char *earlier = strdup_printf(
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"TASK-COMPLETE\",\"messageID\":\"r0\"}}\n%s",
                miss);
        Task *e = settled("st_mark_early", "pi", earlier, members, TASK_DONE);
        ck_assert(incomplete(e));
}
END_TEST

START_TEST(final_status) {
        const struct {
                const char *id, *text, *want; /* want NULL: not set */
        } cases[] = {
                {"st_fs_done", "Fixed it.\\nStatus: DONE", "DONE"},
                {"st_fs_concerns", "Fixed most.\\nStatus:  DONE_WITH_CONCERNS  \\nsee above", "DONE_WITH_CONCERNS"},
                {"st_fs_blocked", "Status:BLOCKED", "BLOCKED"},
                {"st_fs_context", "Status: NEEDS_CONTEXT", "NEEDS_CONTEXT"},
                {"st_fs_other", "Status: MAYBE", NULL},
                {"st_fs_midline", "The Status: DONE", NULL},
                {"st_fs_trailing", "Status: DONE.", NULL},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *log = pi_answer(cases[i].text);
                Task *t = settled(cases[i].id, "pi", log, "\"exitCode\":0,\"signal\":null", TASK_DONE);
                if (cases[i].want) {
                        ck_assert_msg(t->rec.final_status, "%s: no finalStatus", cases[i].id);
                        ck_assert_str_eq(t->rec.final_status, cases[i].want);
                } else
                        ck_assert_msg(!t->rec.final_status, "%s: finalStatus %s", cases[i].id, t->rec.final_status);
        }
        /* read independently of the marker: an answer the marker finds
         * incomplete still says its status */
        _cleanup_free_ char *log = pi_answer("Status: BLOCKED");
        Task *t = task_with("st_fs_incomplete", "pi", log,
                            "\"exitCode\":0,\"signal\":null,\"finalMarker\":\"^TASK-COMPLETE$\"");
        settle(t);
        ck_assert(incomplete(t));
        ck_assert_str_eq(t->rec.final_status, "BLOCKED");
        /* a crashed task's answer is not read for it */
        Task *c = settled("st_fs_crashed", "pi",
                          "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"Status: DONE\","
                          "\"messageID\":\"r1\"}}\n",
                          "\"exitCode\":1,\"signal\":null", TASK_CRASHED);
        ck_assert_ptr_null(c->rec.final_status);
}
END_TEST

START_TEST(session_id_from_the_log) {
        /* the last one the log names */
        Task *a = settled("st_ses", "opencode",
                          "{\"type\":\"step_start\",\"sessionID\":\"ses_first\"}\n"
                          "{\"type\":\"text\",\"sessionID\":\"ses_last\",\"part\":{\"type\":\"text\",\"text\":\"hi\","
                          "\"messageID\":\"m1\"}}\n"
                          "{\"type\":\"step_finish\",\"sessionID\":\"\",\"part\":{\"type\":\"step-finish\","
                          "\"reason\":\"stop\",\"messageID\":\"m1\"}}\n",
                          "\"exitCode\":0,\"signal\":null,\"sessionId\":\"ses_resumed\"", TASK_DONE);
        ck_assert_str_eq(a->rec.session_id, "ses_last");
        /* none in the log: the one it was resumed from stays */
        const char *out[] = {"ok", NULL};
        _cleanup_free_ char *sh = shell_lines(out);
        Task *b = task_with("st_ses_keep", "shell", sh, "\"exitCode\":0,\"signal\":null,\"sessionId\":\"ses_resumed\"");
        settle(b);
        ck_assert_str_eq(b->rec.session_id, "ses_resumed");
        /* pi's session line */
        _cleanup_free_ char *pi = pi_answer("x");
        Task *c = task_with("st_ses_pi", "pi", pi, "\"exitCode\":0,\"signal\":null");
        settle(c);
        ck_assert_str_eq(c->rec.session_id, "ses_pi");
}
END_TEST

/* ---- the scope's OOM kills ---- */

static void exit_json_with_oom_kills(const char *id, int64_t kills) {
        _cleanup_free_ char *tdir = tf_path_task_dir(&m.paths, id);
        ck_assert_int_eq(mkdir_p(tdir, 0700), 0);
        exit_info ei = {
                .has_exit_code = false, .signal = (char *) "SIGKILL", .ended_at_ms = now_ms(), .oom_kills = kills};
        json_object *j = NULL;
        ck_assert_int_eq(exit_info_to_json(&ei, &j), 0);
        _cleanup_free_ char *p = strdup_printf("%s/%s", tdir, EXIT_JSON_NAME);
        const char *text = json_object_to_json_string(j);
        ck_assert_int_eq(write_file_atomic(p, text, strlen(text), 0600), 0);
        json_object_put(j);
}

START_TEST(oom_killed) {
        _cleanup_free_ char *log = pi_answer("Almost there");
        /* killed in its scope by the OOM killer: crashed, whatever the log says */
        exit_json_with_oom_kills("st_oom", 2);
        Task *a = settled("st_oom", "pi", log,
                          "\"exitCode\":null,\"signal\":\"SIGKILL\",\"unit\":\"taskferry-task-st_oom.scope\","
                          "\"memoryMax\":67108864", TASK_CRASHED);
        ck_assert_str_eq(a->rec.failure_reason, SCOPE_OOM_REASON);
        ck_assert_ptr_nonnull(a->rec.failure_detail);
        ck_assert_msg(strstr(a->rec.failure_detail, "taskferry-task-st_oom.scope") &&
                              strstr(a->rec.failure_detail, "2 processes killed"),
                      "%s", a->rec.failure_detail);
        /* the OOM kill is the reason, not what the log said before it */
        exit_json_with_oom_kills("st_oom_log", 1);
        Task *f = settled("st_oom_log", "opencode",
                          "{\"type\":\"error\",\"sessionID\":\"s\",\"message\":\"429 rate limit exceeded\"}\n",
                          "\"exitCode\":null,\"signal\":\"SIGKILL\",\"unit\":\"taskferry-task-st_oom_log.scope\"",
                          TASK_CRASHED);
        ck_assert_str_eq(f->rec.failure_reason, SCOPE_OOM_REASON);
        /* without a scope of its own, the count says nothing: the final answer makes it done */
        exit_json_with_oom_kills("st_oom_noscope", 2);
        Task *b = settled("st_oom_noscope", "pi", log, "\"exitCode\":null,\"signal\":\"SIGKILL\"", TASK_DONE);
        ck_assert_ptr_null(b->rec.failure_reason);
        /* a record naming another task's unit has none either */
        exit_json_with_oom_kills("st_oom_other", 2);
        (void) settled("st_oom_other", "pi", log,
                       "\"exitCode\":null,\"signal\":\"SIGKILL\",\"unit\":\"taskferry-task-st_oom.scope\"",
                       TASK_DONE);
        /* only a child was killed and the worker exited 0: done */
        exit_json_with_oom_kills("st_oom_child", 1);
        Task *d = settled("st_oom_child", "pi", log,
                          "\"exitCode\":0,\"signal\":null,\"unit\":\"taskferry-task-st_oom_child.scope\"", TASK_DONE);
        ck_assert_ptr_null(d->rec.failure_reason);
        /* no kills counted: a plain crash */
        Task *e = settled("st_oom_none", "pi", pi_unfinished,
                          "\"exitCode\":null,\"signal\":\"SIGKILL\",\"unit\":\"taskferry-task-st_oom_none.scope\"",
                          TASK_CRASHED);
        ck_assert_ptr_null(e->rec.failure_reason);
}
END_TEST

/* ---- overlays ---- */

/* An overlay as the launch makes one: <state>/overlays/taskferry-cow-<id>
 * with upper/main and work/main; *ret_json: the record's overlayDirs. */
static char *overlay_new(const char *id, char **ret_json) {
        _cleanup_free_ char *tmp_root = strdup_printf("%s/overlays", dir);
        char *root = strdup_printf("%s/taskferry-cow-%s", tmp_root, id);
        ck_assert_int_eq(overlay_dirs_create(tmp_root, root), 0);
        *ret_json = strdup_printf("{\"root\":\"%s\",\"upperDir\":\"%s/upper/main\",\"workDir\":\"%s/work/main\","
                                  "\"tmpRoot\":\"%s\",\"rwBinds\":[],\"rwFileBinds\":[]}",
                                  root, root, root, tmp_root);
        return root;
}

static void put_in(const char *root, const char *rel, const char *text) {
        _cleanup_free_ char *p = strdup_printf("%s/%s", root, rel);
        char *slash = strrchr(p, '/');
        *slash = 0;
        ck_assert_int_eq(mkdir_p(p, 0700), 0);
        *slash = '/';
        ck_assert_int_eq(write_file_atomic(p, text, strlen(text), 0600), 0);
}

static bool path_exists(const char *p) {
        struct stat st;
        return lstat(p, &st) == 0;
}

/* A task whose launch failed before its worker ran, with an overlay. */
static Task *spawn_failed(const char *id, const char *extra, const char *od) {
        return tf_taskf(&m,
                        "{\"id\":\"%s\",\"directory\":\"%s\",\"status\":\"running\",\"executorId\":\"pi\","
                        "\"spawnError\":\"spawn failed\",\"changesetStatus\":\"pending\",\"overlayDirs\":%s%s}",
                        id, ws, od, extra);
}

START_TEST(spawn_error_changeset) {
        /* nothing in the overlay: no change, accepted, the overlay removed */
        _cleanup_free_ char *od = NULL, *root = overlay_new("se_empty", &od);
        Task *a = spawn_failed("se_empty", "", od);
        ck_assert_int_eq(settle_spawn_error_changeset(a), CHANGESET_ACCEPTED);
        ck_assert(!path_exists(root));
        ck_assert(task_record_has(&a->rec, TASK_KEY_overlay_dirs) && !a->rec.overlay_dirs);
        /* an advisor's changeset never lands: rejected, removed the same */
        _cleanup_free_ char *od_adv = NULL, *root_adv = overlay_new("se_adv", &od_adv);
        Task *b = spawn_failed("se_adv", ",\"role\":\"advisor\"", od_adv);
        ck_assert_int_eq(b->kind, TASK_KIND_ADVISOR);
        ck_assert_int_eq(settle_spawn_error_changeset(b), CHANGESET_REJECTED);
        ck_assert(!path_exists(root_adv));
        ck_assert(!b->rec.overlay_dirs);
        /* a file in its upper dir (an earlier attempt's worker): pending, kept */
        _cleanup_free_ char *od_f = NULL, *root_f = overlay_new("se_file", &od_f);
        put_in(root_f, "upper/main/new.txt", "kept\n");
        Task *c = spawn_failed("se_file", "", od_f);
        ck_assert_int_eq(settle_spawn_error_changeset(c), CHANGESET_PENDING);
        ck_assert(path_exists(root_f));
        ck_assert_ptr_nonnull(c->rec.overlay_dirs);
        /* the same for an advisor: rejected, but nothing stored is dropped */
        _cleanup_free_ char *od_af = NULL, *root_af = overlay_new("se_adv_file", &od_af);
        put_in(root_af, "upper/main/new.txt", "kept\n");
        Task *d = spawn_failed("se_adv_file", ",\"role\":\"advisor\"", od_af);
        ck_assert_int_eq(settle_spawn_error_changeset(d), CHANGESET_REJECTED);
        ck_assert(path_exists(root_af));
        /* a change in an rwBind's upper dir, or a file bind, counts too */
        _cleanup_free_ char *od_b = NULL, *root_b = overlay_new("se_bind", &od_b);
        put_in(root_b, "upper/extra/b/x", "x");
        _cleanup_free_ char *od_bind = strdup_printf(
                "%.*s,\"rwBinds\":[{\"path\":\"/srv\",\"upperDir\":\"%s/upper/extra/b\",\"workDir\":\"%s/work/b\"}]}",
                (int) (strstr(od_b, ",\"rwBinds\"") - od_b), od_b, root_b, root_b);
        Task *e = spawn_failed("se_bind", "", od_bind);
        ck_assert_int_eq(settle_spawn_error_changeset(e), CHANGESET_PENDING);
        ck_assert(path_exists(root_b));
        _cleanup_free_ char *od_fb0 = NULL, *root_fb = overlay_new("se_fbind", &od_fb0);
        _cleanup_free_ char *od_fb = strdup_printf(
                "%.*s,\"rwBinds\":[],\"rwFileBinds\":[{\"path\":\"/etc/x\",\"bindSrc\":\"%s/files/x\"}]}",
                (int) (strstr(od_fb0, ",\"rwBinds\"") - od_fb0), od_fb0, root_fb);
        Task *f = spawn_failed("se_fbind", "", od_fb);
        ck_assert_int_eq(settle_spawn_error_changeset(f), CHANGESET_PENDING);
        ck_assert(path_exists(root_fb));
        /* unsure (no tmpRoot recorded): kept */
        _cleanup_free_ char *od_u0 = NULL, *root_u = overlay_new("se_unsure", &od_u0);
        _cleanup_free_ char *od_u = strdup_printf("{\"root\":\"%s\",\"upperDir\":\"%s/upper/main\"}", root_u, root_u);
        Task *g = spawn_failed("se_unsure", "", od_u);
        ck_assert_int_eq(settle_spawn_error_changeset(g), CHANGESET_PENDING);
        ck_assert(path_exists(root_u));
        /* no overlay, no changeset */
        Task *h = tf_taskf(&m, "{\"id\":\"se_none\",\"directory\":\"%s\",\"status\":\"running\",\"executorId\":\"pi\","
                               "\"spawnError\":\"x\",\"changesetStatus\":\"none\",\"overlayDirs\":null}",
                           ws);
        ck_assert_int_eq(settle_spawn_error_changeset(h), CHANGESET_NONE);
}
END_TEST

/* A settled worker's overlay: its change extracted as a patch (pending,
 * the overlay kept for the accept), or none (accepted, the overlay gone). */
START_TEST(extraction) {
        _cleanup_free_ char *log = pi_answer("Added b.txt");
        _cleanup_free_ char *od = NULL, *root = overlay_new("sx_change", &od);
        put_in(root, "upper/main/b.txt", "hello from the worker\n");
        _cleanup_free_ char *members =
                strdup_printf("\"exitCode\":0,\"signal\":null,\"changesetStatus\":\"pending\",\"overlayDirs\":%s", od);
        Task *a = task_with("sx_change", "pi", log, members);
        ck_assert_int_eq(a->rec.changeset_status, CHANGESET_PENDING);
        settle(a);
        check_status(a, TASK_DONE);
        ck_assert_msg(verdict.cs == CHANGESET_PENDING, "cs %s, changesetError %s",
                      changeset_status_to_string(verdict.cs), strnull(a->rec.changeset_error));
        _cleanup_free_ char *patch = strdup_printf("%s/diffs/sx_change.patch", dir);
        ck_assert_ptr_nonnull(a->rec.diff_path);
        ck_assert_str_eq(a->rec.diff_path, patch);
        ck_assert_ptr_null(a->rec.changeset_error);
        char *text = NULL;
        size_t len = 0;
        ck_assert_int_ge(read_file(patch, 1 << 20, &text, &len), 0);
        ck_assert_msg(strstr(text, "b/b.txt") && strstr(text, "+hello from the worker"), "%s", text);
        free(text);
        ck_assert(path_exists(root));
        ck_assert_ptr_nonnull(a->rec.overlay_dirs);

        /* nothing written */
        _cleanup_free_ char *od2 = NULL, *root2 = overlay_new("sx_none", &od2);
        _cleanup_free_ char *members2 =
                strdup_printf("\"exitCode\":0,\"signal\":null,\"changesetStatus\":\"pending\",\"overlayDirs\":%s", od2);
        Task *b = settled("sx_none", "pi", log, members2, TASK_DONE);
        ck_assert_msg(verdict.cs == CHANGESET_ACCEPTED, "cs %s, changesetError %s",
                      changeset_status_to_string(verdict.cs), strnull(b->rec.changeset_error));
        ck_assert(!path_exists(root2));
        ck_assert(task_record_has(&b->rec, TASK_KEY_overlay_dirs) && !b->rec.overlay_dirs);
        _cleanup_free_ char *patch2 = strdup_printf("%s/diffs/sx_none.patch", dir);
        ck_assert_str_eq(b->rec.diff_path, patch2);
        struct stat st;
        ck_assert_int_eq(stat(patch2, &st), 0);
        ck_assert_int_eq(st.st_size, 0);

        /* an advisor's change is extracted (its diff stays readable) and rejected, its overlay removed */
        _cleanup_free_ char *od3 = NULL, *root3 = overlay_new("sx_adv", &od3);
        put_in(root3, "upper/main/c.txt", "advice\n");
        _cleanup_free_ char *members3 = strdup_printf(
                "\"role\":\"advisor\",\"exitCode\":0,\"signal\":null,\"changesetStatus\":\"pending\","
                "\"overlayDirs\":%s",
                od3);
        Task *c = task_with("sx_adv", "pi", log, members3);
        settle(c);
        ck_assert_int_eq(verdict.cs, CHANGESET_REJECTED);
        ck_assert(!path_exists(root3));
        ck_assert(!c->rec.overlay_dirs);
        _cleanup_free_ char *patch3 = strdup_printf("%s/diffs/sx_adv.patch", dir);
        ck_assert_int_eq(stat(patch3, &st), 0);
        ck_assert_int_gt(st.st_size, 0);
}
END_TEST

/* One settlement at a time per task: a second start while one is in flight
 * is a no-op, and the verdict comes once. */
START_TEST(idempotent_while_in_flight) {
        _cleanup_free_ char *log = pi_answer("ok");
        Task *t = task_with("st_twice", "pi", log, "\"exitCode\":0,\"signal\":null");
        verdict = (Verdict) {0};
        settle_start(t, on_done);
        ck_assert(t->settling);
        settle_start(t, on_done);
        uint64_t end = mono_ms() + 30000;
        while (verdict.calls == 0) {
                ck_assert(mono_ms() < end);
                ck_assert_int_ge(sd_event_run(m.event, 100 * 1000), 0);
        }
        tf_run_loop_ms(&m, 300);
        ck_assert_int_eq(verdict.calls, 1);
        ck_assert_ptr_null(m.jobs);
}
END_TEST

TF_MAIN("settle", "settle", setup, teardown, 240, done_with_a_final_answer, crashed, crashed_with_the_log_s_reason,
        cancelled, crashed_after_a_final_answer_is_done, no_output, final_marker, final_status, session_id_from_the_log,
        oom_killed, spawn_error_changeset, extraction, idempotent_while_in_flight)
