/* event.subscribe, task.state / task.activity events and taskferry watch
 * through the real daemon and CLI with fake workers (scenarios P13, P14 and
 * the subscription lifecycle and watch scenarios of P12/P15: registration
 * before the response, no replay, watch --task-id), the
 * activity summary of section A (summary --mode activity; the summaries
 * preflight), and the attacker cases: a worker subscribing through its own
 * task socket, and a subscriber that never reads. */

#include <inttypes.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

/* A raw subscriber: connect, send event.subscribe, read its answer. */
static int subscribe(tf_world *w, const char *params, json_object **ret_reply) {
        int fd = tf_connect(w);
        char *line = strdup_printf("{\"version\":1,\"id\":\"sub-1\",\"method\":\"event.subscribe\",\"params\":%s}", params);
        tf_send(fd, line);
        free(line);
        char *reply = tf_recv_line(fd, 15000);
        ck_assert_msg(reply, "no answer to event.subscribe %s", params);
        json_object *o = tf_json(reply);
        free(reply);
        if (ret_reply) *ret_reply = o;
        else {
                ck_assert_msg(json_get_bool(o, "ok", false), "%s", json_object_to_json_string(o));
                json_object_put(o);
        }
        return fd;
}

/* Close a raw connection without leaving lines in the harness's per-fd
 * buffer (a later connection on the same fd number would read them): shut
 * our side, read to the daemon's EOF, which drops the buffer. */
static void sub_close(int fd) {
        shutdown(fd, SHUT_WR);
        char *l;
        uint64_t end = mono_ms() + 10000;
        while (mono_ms() < end && (l = tf_recv_line(fd, 2000))) free(l);
        close(fd);
}

/* Events read on fd until one of task `id` with status `status` arrives (or
 * timeout): a JSON array of the inner events, in order. */
static json_object *events_until(int fd, const char *id, const char *status, int timeout_ms) {
        json_object *arr = json_object_new_array();
        uint64_t end = mono_ms() + (uint64_t) timeout_ms;
        while (mono_ms() < end) {
                char *line = tf_recv_line(fd, (int) (end - mono_ms()) + 1);
                if (!line) break;
                json_object *f = tf_json(line);
                free(line);
                json_object *ev = json_get_object(f, "event");
                if (ev) {
                        json_object_array_add(arr, json_object_get(ev));
                        bool last = id && streq_ptr(json_get_string(ev, "taskId"), id) &&
                                    streq_ptr(json_get_string(ev, "type"), "task.state") &&
                                    streq_ptr(json_get_string(ev, "status"), status);
                        json_object_put(f);
                        if (last) break;
                } else
                        json_object_put(f);
        }
        return arr;
}

/* events_until, then whatever else arrives within 1 s (other tasks may
 * settle after the one waited for) */
static json_object *events_until_then_more(int fd, const char *id, const char *status, int timeout_ms) {
        json_object *arr = events_until(fd, id, status, timeout_ms);
        json_object *more = events_until(fd, NULL, NULL, 1000);
        for (size_t i = 0; i < json_object_array_length(more); i++)
                json_object_array_add(arr, json_object_get(json_object_array_get_idx(more, i)));
        json_object_put(more);
        return arr;
}

static size_t count_for(json_object *events, const char *id, const char *type) {
        size_t n = 0;
        for (size_t i = 0; i < json_object_array_length(events); i++) {
                json_object *e = json_object_array_get_idx(events, i);
                if (streq_ptr(json_get_string(e, "taskId"), id) && (!type || streq_ptr(json_get_string(e, "type"), type))) n++;
        }
        return n;
}

static char *shell_task(tf_world *w, const char *dir, const char *prompt) { return tf_dispatch_shell(w, dir, NULL, prompt); }

TF_WORLD_TEST_ENV(state_stream_in_order_with_one_sequence_and_no_replay, "TASKFERRY_DISABLE_SANDBOX=1") {
        tf_daemon_start(w);
        char *params = strdup_printf("{\"directory\":\"%s\"}", w->repo_parent);
        int fd = subscribe(w, params, NULL);
        char *id = shell_task(w, w->repo_parent, "echo working hard");
        json_object *ev = events_until(fd, id, "done", 20000);
        /* task.state: queued, running, done; previousStatus chains; keys in the spec's order */
        static const char *const keys[] = {"sequence", "type",           "taskId",     "directory", "originSessionId",
                                           "status",   "previousStatus", "occurredAt", "activity",  "outputWatermark",
                                           NULL};
        static const char *const want[] = {"queued", "running", "done"};
        size_t k = 0;
        int64_t last_seq = 0;
        const char *prev = NULL;
        bool activity_done = false;
        for (size_t i = 0; i < json_object_array_length(ev); i++) {
                json_object *e = json_object_array_get_idx(ev, i);
                int64_t seq = 0;
                ck_assert(json_get_int64(e, "sequence", &seq));
                ck_assert_int_gt(seq, last_seq); /* one counter for state and activity events */
                last_seq = seq;
                if (streq_ptr(json_get_string(e, "type"), "task.activity")) {
                        ck_assert_ptr_null(json_get_string(e, "previousStatus"));
                        ck_assert(!json_get_bool(e, "includeSummary", true));
                        ck_assert_ptr_nonnull(json_get_string(e, "activity"));
                        continue;
                }
                ck_assert_uint_lt(k, 3);
                tf_assert_keys(e, keys);
                ck_assert_str_eq(json_get_string(e, "status"), want[k]);
                if (prev) ck_assert_str_eq(json_get_string(e, "previousStatus"), prev);
                else ck_assert_ptr_null(json_get_string(e, "previousStatus"));
                ck_assert_str_eq(json_get_string(e, "directory"), w->repo_parent);
                prev = want[k++];
        }
        ck_assert_uint_eq(k, 3);
        json_object_put(ev);
        /* the settlement's activity event follows the done state event */
        ev = events_until(fd, NULL, NULL, 1500);
        for (size_t i = 0; i < json_object_array_length(ev); i++) {
                json_object *e = json_object_array_get_idx(ev, i);
                if (streq_ptr(json_get_string(e, "type"), "task.activity") && streq_ptr(json_get_string(e, "status"), "done")) {
                        ck_assert_str_eq(json_get_string(e, "activity"), "working hard");
                        activity_done = true;
                }
        }
        ck_assert(activity_done);
        json_object_put(ev);
        /* no replay: a later subscriber hears nothing of the settled task */
        int fd2 = subscribe(w, params, NULL);
        ev = events_until(fd2, NULL, NULL, 700);
        ck_assert_uint_eq(json_object_array_length(ev), 0);
        json_object_put(ev);
        sub_close(fd2);
        sub_close(fd);
        free(id), free(params);
}
END_TEST

TF_WORLD_TEST_ENV(p13_routing_by_task_all_and_workspace, "TASKFERRY_DISABLE_SANDBOX=1") {
        tf_daemon_start(w);
        char *repo = tf_repo_new(w, NULL, NULL), *other = tf_repo_new(w, "other", NULL);
        char *wt = tf_worktree_add(w, repo, "linked", NULL);
        /* an unknown task id */
        json_object *reply = NULL;
        int bad = subscribe(w, "{\"taskId\":\"oc_nope_12345678\"}", &reply);
        json_object *err = json_get_object(reply, "error");
        ck_assert_str_eq(json_get_string(err, "code"), "UNKNOWN_TASK");
        ck_assert_msg(strstr(json_get_string(err, "message"), "unknown task id"), "%s", json_object_to_json_string(reply));
        json_object_put(reply);
        sub_close(bad);
        /* invalid scopes */
        static const char *const invalid[] = {"{}", "{\"all\":false}", "{\"directory\":\"relative\"}", "{\"internal\":true}"};
        for (size_t i = 0; i < ELEMENTSOF(invalid); i++) {
                int fd = subscribe(w, invalid[i], &reply);
                ck_assert_str_eq(json_get_string(json_get_object(reply, "error"), "code"), "INVALID_PARAMS");
                json_object_put(reply);
                sub_close(fd);
        }
        char *anchor = shell_task(w, repo, "sleep 30");
        char *p_task = strdup_printf("{\"taskId\":\"%s\"}", anchor);
        char *p_root = strdup_printf("{\"directory\":\"%s\"}", repo);
        int by_task = subscribe(w, p_task, NULL);
        int by_root = subscribe(w, p_root, NULL);
        int all = subscribe(w, "{\"all\":true}", NULL);
        char *in_wt = shell_task(w, wt, "true");
        char *in_other = shell_task(w, other, "true");
        json_object *ev_all = events_until_then_more(all, in_other, "done", 20000);
        json_object_put(tf_wait_settled(w, in_wt));
        json_object *ev_root = events_until(by_root, NULL, NULL, 1500);
        json_object *ev_task = events_until(by_task, NULL, NULL, 500);
        /* all: both; the repo root: the linked worktree's task, not the other repo's; by task: its workspace */
        ck_assert_uint_ge(count_for(ev_all, in_wt, "task.state"), 3);
        ck_assert_uint_ge(count_for(ev_all, in_other, "task.state"), 3);
        ck_assert_uint_eq(count_for(ev_root, in_wt, "task.state"), 3);
        ck_assert_uint_eq(count_for(ev_root, in_other, NULL), 0);
        ck_assert_uint_eq(count_for(ev_task, in_wt, "task.state"), 3);
        ck_assert_uint_eq(count_for(ev_task, in_other, NULL), 0);
        json_object_put(ev_all), json_object_put(ev_root), json_object_put(ev_task);
        /* task.list matches the same way */
        char *lp = strdup_printf("{\"directory\":\"%s\"}", repo);
        json_object *f = tf_rpc(w, "task.list", lp);
        const char *txt = json_object_to_json_string(tf_result(f));
        ck_assert(strstr(txt, in_wt) && !strstr(txt, in_other));
        json_object_put(f);
        const char *c[] = {"cancel", anchor, NULL};
        tf_run r = tf_cli(w, NULL, NULL, c);
        tf_run_done(&r);
        sub_close(by_task), sub_close(by_root), sub_close(all);
        free(lp), free(p_task), free(p_root), free(anchor), free(in_wt), free(in_other), free(repo), free(other), free(wt);
}
END_TEST

TF_WORLD_TEST_ENV(p14_origin_session_filter, "TASKFERRY_DISABLE_SANDBOX=1") {
        tf_daemon_start(w);
        int a = subscribe(w, "{\"all\":true,\"originSessionId\":\"sess-A\"}", NULL);
        int b = subscribe(w, "{\"all\":true,\"originSessionId\":\"sess-B\"}", NULL);
        tf_world_setenv(w, "CLAUDE_CODE_SESSION_ID", "sess-A");
        char *ta = shell_task(w, w->repo_parent, "true");
        tf_world_setenv(w, "CLAUDE_CODE_SESSION_ID", "sess-B");
        char *tb = shell_task(w, w->repo_parent, "true");
        tf_world_setenv(w, "CLAUDE_CODE_SESSION_ID", "");
        char *tn = shell_task(w, w->repo_parent, "true");
        json_object_put(tf_wait_settled(w, ta));
        json_object_put(tf_wait_settled(w, tb));
        json_object *ea = events_until_then_more(a, tn, "done", 20000), *eb = events_until_then_more(b, tn, "done", 20000);
        ck_assert_uint_eq(count_for(ea, ta, "task.state"), 3);
        ck_assert_uint_eq(count_for(ea, tb, NULL), 0);
        ck_assert_uint_eq(count_for(ea, tn, "task.state"), 3);
        ck_assert_uint_eq(count_for(eb, tb, "task.state"), 3);
        ck_assert_uint_eq(count_for(eb, ta, NULL), 0);
        ck_assert_uint_eq(count_for(eb, tn, "task.state"), 3);
        for (size_t i = 0; i < json_object_array_length(ea); i++) {
                json_object *e = json_object_array_get_idx(ea, i);
                if (streq_ptr(json_get_string(e, "taskId"), ta)) ck_assert_str_eq(json_get_string(e, "originSessionId"), "sess-A");
        }
        json_object_put(ea), json_object_put(eb);
        sub_close(a), sub_close(b);
        free(ta), free(tb), free(tn);
}
END_TEST

static bool endswith_str(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);
        return a >= b && streq(s + a - b, suffix);
}

static bool line_matches_time(const char *line) {
        return strlen(line) > 9 && line[2] == ':' && line[5] == ':' && line[8] == ' ';
}

TF_WORLD_TEST_ENV(watch_task_id_exits_when_the_task_settles, "TASKFERRY_DISABLE_SANDBOX=1") {
        char *id = shell_task(w, w->repo_parent, "sleep 2; echo finished");
        uint64_t start = mono_ms();
        const char *wa[] = {"watch", "--task-id", id, NULL};
        tf_run r = tf_cli(w, NULL, NULL, wa);
        uint64_t took = mono_ms() - start;
        ck_assert_int_eq(r.exit_code, 0);
        ck_assert_msg(took >= 1000, "watch returned after %" PRIu64 " ms, before the task settled", took);
        /* toon lines: "<HH:MM:SS> <id> running -> done" last */
        char *last = NULL;
        for (char *l = strtok(r.out, "\n"); l; l = strtok(NULL, "\n")) {
                ck_assert_msg(line_matches_time(l), "line: %s", l);
                ck_assert_msg(strstr(l, id), "another task's line: %s", l);
                last = l;
        }
        ck_assert_ptr_nonnull(last);
        char *want = strdup_printf("%s running -> done", id);
        ck_assert_msg(endswith_str(last, want), "last line: %s", last);
        free(want);
        tf_run_done(&r);
        /* settled already: a synthetic terminal event (no sequence) at once */
        const char *wn[] = {"watch", "--task-id", id, "--format", "ndjson", NULL};
        start = mono_ms();
        r = tf_cli(w, NULL, NULL, wn);
        ck_assert_int_eq(r.exit_code, 0);
        ck_assert_uint_lt(mono_ms() - start, 5000);
        json_object *o = tf_json(r.out);
        ck_assert_str_eq(tf_jstr(o, "type"), "task.state");
        ck_assert_str_eq(tf_jstr(o, "status"), "done");
        ck_assert_ptr_null(tf_jstr(o, "previousStatus"));
        ck_assert(!json_object_object_get_ex(o, "sequence", NULL));
        json_object_put(o);
        tf_run_done(&r);
        /* ndjson while it runs: the events themselves, one per line */
        char *id2 = shell_task(w, w->repo_parent, "sleep 1");
        const char *wn2[] = {"watch", "--task-id", id2, "--format", "ndjson", NULL};
        r = tf_cli(w, NULL, NULL, wn2);
        ck_assert_int_eq(r.exit_code, 0);
        char *lastl = NULL;
        for (char *l = strtok(r.out, "\n"); l; l = strtok(NULL, "\n")) lastl = l;
        ck_assert_ptr_nonnull(lastl);
        o = tf_json(lastl);
        ck_assert_str_eq(tf_jstr(o, "status"), "done");
        ck_assert(json_object_object_get_ex(o, "sequence", NULL) || !tf_jstr(o, "previousStatus"));
        json_object_put(o);
        tf_run_done(&r);
        /* usage errors of watch's flags: exit 2 */
        const char *bad1[] = {"watch", "--flush-interval", "5s", NULL};
        r = tf_cli(w, NULL, NULL, bad1);
        ck_assert_int_eq(r.exit_code, 2);
        ck_assert_msg(strstr(r.out, "--flush-interval requires --summaries"), "%s", r.out);
        tf_run_done(&r);
        free(id), free(id2);
}
END_TEST

TF_WORLD_TEST_ENV(summary_mode_activity_reads_the_narration, "TASKFERRY_DISABLE_SANDBOX=1") {
        const char *stream =
                "{\"type\":\"text\",\"sessionID\":\"ses_1\",\"part\":{\"type\":\"text\",\"messageID\":\"m1\",\"text\":\"Reading\\tthe\\nfile\"}}\n"
                "{\"type\":\"tool_use\",\"sessionID\":\"ses_1\",\"part\":{\"type\":\"tool\",\"tool\":\"read\",\"state\":{\"input\":{\"path\":\"f.c\"},\"output\":\"int x;\"}}}\n"
                "{\"type\":\"text\",\"sessionID\":\"ses_1\",\"part\":{\"type\":\"text\",\"messageID\":\"m2\",\"text\":\"Done.\"}}\n"
                "{\"type\":\"step_finish\",\"sessionID\":\"ses_1\",\"part\":{\"type\":\"step-finish\",\"messageID\":\"m2\",\"reason\":\"stop\"}}\n";
        char *fx = tf_fake_fixture(w, "activity-fx", stream, -1);
        tf_world_setenv(w, "FAKE_FIXTURE", fx);
        char *id = tf_worker_settled(w, "opencode", "prov/m", w->repo_parent, NULL, "look", NULL);
        const char *s[] = {"summary", id, "--mode", "activity", "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, s);
        ck_assert_msg(r.exit_code == 0, "%s", r.out);
        json_object *o = tf_json(r.out);
        /* --json: the daemon's object, keys in order */
        static const char *const keys[] = {"sourceTaskId", "sourceStatus", "activity", "outputWatermark", NULL};
        tf_assert_keys(o, keys);
        ck_assert_str_eq(tf_jstr(o, "sourceTaskId"), id);
        ck_assert_str_eq(tf_jstr(o, "sourceStatus"), "done");
        ck_assert_str_eq(tf_jstr(o, "activity"), "Reading the file [tool:read] {\"path\":\"f.c\"} -> int x; Done.");
        int64_t wm = 0;
        ck_assert(json_get_int64(o, "outputWatermark", &wm));
        struct stat st;
        char *logname = strdup_printf("%s.ndjson", id);
        ck_assert_int_eq(stat(tf_path(tf_path(w->state, "logs"), logname), &st), 0);
        free(logname);
        ck_assert_int_eq(wm, st.st_size);
        json_object_put(o);
        tf_run_done(&r);
        /* TOON: mode first */
        const char *s2[] = {"summary", id, "--mode", "activity", NULL};
        r = tf_cli(w, NULL, NULL, s2);
        ck_assert_int_eq(r.exit_code, 0);
        ck_assert_msg(startswith(r.out, "mode: activity\n"), "%s", r.out);
        tf_run_done(&r);
        /* env with mode activity is refused on the wire */
        char *p = strdup_printf("{\"taskId\":\"%s\",\"mode\":\"activity\",\"env\":{}}", id);
        json_object *f = tf_rpc(w, "task.summary", p);
        json_object *err = json_get_object(f, "error");
        ck_assert_str_eq(json_get_string(err, "code"), "INVALID_PARAMS");
        ck_assert_str_eq(json_get_string(err, "message"), "task.summary does not accept env with mode \"activity\"");
        ck_assert(startswith(json_get_string(err, "help"), "Omit env"));
        json_object_put(f);
        free(p), free(id), free(fx);
}
END_TEST

/* A fake `opencode models` printing `listing` verbatim, first on PATH. */
static void fake_models(tf_world *w, const char *listing) {
        char *bin = strdup_printf("%s/models-bin", w->root);
        ck_assert_int_eq(mkdir(bin, 0755), 0);
        char *script = strdup_printf("#!/bin/sh\n[ \"$1\" = models ] || exit 0\ncat <<'EOF'\n%sEOF\n", listing);
        tf_write(tf_path(bin, "opencode"), script, strlen(script), 0755);
        char *path = strdup_printf("PATH=%s:%s/bin:/usr/local/bin:/usr/bin:/bin", bin, w->fixtures);
        tf_world_setenv(w, "PATH", path + 5);
        free(path), free(bin), free(script);
}

START_TEST(summaries_need_the_model_listed) {
        char *extra[] = {(char *) "TASKFERRY_DISABLE_SANDBOX=1", NULL};
        tf_world *w = tf_world_new(extra);
        fake_models(w, "other/model\nopencode/mimo-v2.5-free-not\n x opencode/mimo-v2.5-free\n");
        tf_daemon_start(w);
        json_object *reply = NULL;
        int fd = subscribe(w, "{\"all\":true,\"summaries\":true}", &reply);
        ck_assert(!json_get_bool(reply, "ok", true));
        ck_assert_str_eq(json_get_string(json_get_object(reply, "error"), "message"),
                         "summary model is unavailable: opencode/mimo-v2.5-free");
        json_object_put(reply);
        sub_close(fd);
        /* the CLI says it on stdout, exit 1 */
        const char *wa[] = {"watch", "--all", "--summaries", NULL};
        tf_run r = tf_cli(w, NULL, NULL, wa);
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert_msg(strstr(r.out, "summary model is unavailable"), "%s", r.out);
        tf_run_done(&r);
        tf_world_free(w);

        w = tf_world_new(extra);
        fake_models(w, "other/model\n  opencode/mimo-v2.5-free \r\n");
        tf_daemon_start(w);
        fd = subscribe(w, "{\"all\":true,\"summaries\":true}", NULL);
        /* TASKFERRY_ACTIVITY_SUMMARIES=0 (the harness's): the summaries
         * subscriber gets the local text, includeSummary false */
        char *id = shell_task(w, w->repo_parent, "echo local words");
        json_object *ev = events_until(fd, id, "done", 20000);
        json_object_put(ev);
        ev = events_until(fd, NULL, NULL, 1500);
        bool seen = false;
        for (size_t i = 0; i < json_object_array_length(ev); i++) {
                json_object *e = json_object_array_get_idx(ev, i);
                if (!streq_ptr(json_get_string(e, "type"), "task.activity")) continue;
                ck_assert(!json_object_object_get_ex(e, "activityVariants", NULL));
                ck_assert(!json_get_bool(e, "includeSummary", true));
                if (streq_ptr(json_get_string(e, "status"), "done")) {
                        ck_assert_str_eq(json_get_string(e, "activity"), "local words");
                        seen = true;
                }
        }
        ck_assert(seen);
        json_object_put(ev);
        sub_close(fd);
        free(id);
        tf_world_free(w);
}
END_TEST

/* Each subscriber gets the activity variant of its summaries flag: with TASKFERRY_ACTIVITY_SUMMARIES on and a summaries subscriber,
 * the "true" variant is the model-backed one; here the summary worker (an
 * `opencode` that prints nothing) gives no text, so it is reported failed
 * (summaryFailed, summaryError), and `watch --summaries` prints it as
 * "summary unavailable (...)"; the plain subscriber still gets the text. */
TF_WORLD_TEST_ENV(activity_variants_follow_the_summaries_flag, "TASKFERRY_DISABLE_SANDBOX=1",
                  "TASKFERRY_ACTIVITY_SUMMARIES=1") {
        fake_models(w, "opencode/mimo-v2.5-free\n");
        tf_daemon_start(w);
        int plain = subscribe(w, "{\"all\":true}", NULL);
        int summ = subscribe(w, "{\"all\":true,\"summaries\":true}", NULL);
        char *id = shell_task(w, w->repo_parent, "echo plain text");
        json_object *ep = events_until(plain, id, "done", 20000), *es = events_until(summ, id, "done", 20000);
        json_object_put(ep), json_object_put(es);
        ep = events_until(plain, NULL, NULL, 1500);
        es = events_until(summ, NULL, NULL, 500);
        bool plain_done = false, summ_done = false;
        for (size_t i = 0; i < json_object_array_length(ep); i++) {
                json_object *e = json_object_array_get_idx(ep, i);
                if (!streq_ptr(json_get_string(e, "type"), "task.activity") || !streq_ptr(json_get_string(e, "status"), "done"))
                        continue;
                ck_assert(!json_get_bool(e, "includeSummary", true));
                ck_assert_str_eq(json_get_string(e, "activity"), "plain text");
                plain_done = true;
        }
        for (size_t i = 0; i < json_object_array_length(es); i++) {
                json_object *e = json_object_array_get_idx(es, i);
                if (!streq_ptr(json_get_string(e, "type"), "task.activity") || !streq_ptr(json_get_string(e, "status"), "done"))
                        continue;
                ck_assert(json_get_bool(e, "includeSummary", false));
                ck_assert(json_get_bool(e, "summaryFailed", false));
                ck_assert_ptr_nonnull(json_get_string(e, "summaryError"));
                ck_assert(!json_object_object_get_ex(e, "activity", NULL));
                summ_done = true;
        }
        ck_assert(plain_done && summ_done);
        json_object_put(ep), json_object_put(es);
        /* watch --summaries prints the failure as such */
        char *out = strdup_printf("%s/watch.out", w->root);
        char *script = strdup_printf("timeout --foreground --preserve-status -s INT 4 taskferry watch --all --summaries > %s 2>&1 & "
                                     "sleep 1; taskferry dispatch --executor shell --directory %s --prompt 'echo two' "
                                     ">/dev/null; wait $!; echo rc=$?",
                                     out, w->repo_parent);
        tf_run r = tf_sh(w, NULL, script, false);
        char *text = tf_read(out, NULL);
        ck_assert_msg(strstr(r.out, "rc=0") && strstr(text, " done: summary unavailable (") && strstr(text, " -> done"),
                      "%s / %s", r.out, text);
        tf_run_done(&r);
        sub_close(plain), sub_close(summ);
        free(text), free(script), free(out), free(id);
}
END_TEST

/* The model-backed activity summary:
 * a summaries subscriber gets, after the local event, a task.activity event
 * whose text is the result message of an internal report summary of the
 * task (summary.c, the fake `opencode` standing in for the model); a plain
 * subscriber never sees it, and the summary task is internal (no
 * task.state of its own, not in the user's list). */
TF_WORLD_TEST_ENV(model_backed_activity_summary_reaches_summaries_subscribers, "TASKFERRY_DISABLE_SANDBOX=1",
                  "TASKFERRY_ACTIVITY_SUMMARIES=1") {
        char *fx = strdup_printf("%s/summary-fx", w->root);
        char *out = strdup_printf("%s.stdout.ndjson", fx);
        const char *ndjson =
                "{\"type\":\"text\",\"sessionID\":\"ses_act\",\"part\":{\"type\":\"text\",\"messageID\":\"m1\","
                "\"text\":\"It printed the greeting and stopped.\"}}\n"
                "{\"type\":\"step_finish\",\"sessionID\":\"ses_act\",\"part\":{\"type\":\"step-finish\","
                "\"messageID\":\"m1\",\"reason\":\"stop\"}}\n";
        tf_write(out, ndjson, strlen(ndjson), 0644);
        tf_world_setenv(w, "FAKE_FIXTURE", fx);
        tf_daemon_start(w);
        int plain = subscribe(w, "{\"all\":true}", NULL);
        int summ = subscribe(w, "{\"all\":true,\"summaries\":true}", NULL);
        char *id = shell_task(w, w->repo_parent, "echo hello there");
        json_object *ep = events_until(plain, id, "done", 30000);
        /* the summary task runs after the source settled: wait for its event */
        json_object *es = json_object_new_array();
        bool got = false;
        for (uint64_t end = mono_ms() + 60000; !got && mono_ms() < end;) {
                json_object *more = events_until(summ, NULL, NULL, 2000);
                for (size_t i = 0; i < json_object_array_length(more); i++) {
                        json_object *e = json_object_array_get_idx(more, i);
                        json_object_array_add(es, json_object_get(e));
                        if (streq_ptr(json_get_string(e, "type"), "task.activity") &&
                            json_get_bool(e, "includeSummary", false)) {
                                ck_assert_msg(!json_get_bool(e, "summaryFailed", false), "%s", json_to_line(e, NULL));
                                ck_assert_str_eq(json_get_string(e, "taskId"), id);
                                ck_assert_str_eq(json_get_string(e, "activity"), "It printed the greeting and stopped.");
                                got = true;
                        }
                }
                json_object_put(more);
        }
        ck_assert_msg(got, "no model-backed activity event: %s", json_to_line(es, NULL));
        /* only the source task's events reached the subscribers */
        for (size_t i = 0; i < json_object_array_length(es); i++)
                ck_assert_str_eq(json_get_string(json_object_array_get_idx(es, i), "taskId"), id);
        json_object *more = events_until(plain, NULL, NULL, 1000);
        for (size_t i = 0; i < json_object_array_length(more); i++) json_object_array_add(ep, json_object_get(json_object_array_get_idx(more, i)));
        json_object_put(more);
        for (size_t i = 0; i < json_object_array_length(ep); i++) {
                json_object *e = json_object_array_get_idx(ep, i);
                ck_assert_str_eq(json_get_string(e, "taskId"), id);
                ck_assert(!json_get_bool(e, "includeSummary", false));
        }
        json_object_put(ep), json_object_put(es);
        sub_close(plain), sub_close(summ);
        free(id), free(out), free(fx);
}
END_TEST

/* --flush-interval: one watch.flush line per interval holding the latest
 * event of each task; SIGINT flushes what is left and exits 0. (timeout runs
 * in the foreground: otherwise it signals its whole process group too, the
 * watch gets SIGINT twice, and the second one ends it as a second Ctrl-C
 * does: 130, under load.) */
TF_WORLD_TEST_ENV(watch_flush_interval_keeps_the_latest_per_task, "TASKFERRY_DISABLE_SANDBOX=1") {
        fake_models(w, "opencode/mimo-v2.5-free\n");
        char *out = strdup_printf("%s/watch.out", w->root);
        char *script = strdup_printf("timeout --foreground --preserve-status -s INT 5 taskferry watch --all --summaries --flush-interval 2s --format ndjson "
                                     "> %s 2>&1 & sleep 1; taskferry dispatch --executor shell --directory %s "
                                     "--prompt 'echo one' >/dev/null; wait $!; echo rc=$?",
                                     out, w->repo_parent);
        tf_run r = tf_sh(w, NULL, script, false);
        free(script);
        char *text = tf_read(out, NULL);
        ck_assert_msg(strstr(r.out, "rc=0"), "watch did not exit 0 on SIGINT: %s / %s", r.out, text);
        tf_run_done(&r);
        size_t flushes = 0;
        char *final_status = NULL;
        for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
                json_object *o = tf_json(l);
                ck_assert_str_eq(tf_jstr(o, "type"), "watch.flush");
                ck_assert_ptr_nonnull(tf_jstr(o, "timestamp"));
                json_object *evs = json_get_array(o, "events");
                ck_assert_ptr_nonnull(evs);
                /* one event per task per flush */
                for (size_t i = 0; i < json_object_array_length(evs); i++)
                        for (size_t j = i + 1; j < json_object_array_length(evs); j++)
                                ck_assert_str_ne(json_get_string(json_object_array_get_idx(evs, i), "taskId"),
                                                 json_get_string(json_object_array_get_idx(evs, j), "taskId"));
                if (json_object_array_length(evs) > 0) {
                        free(final_status);
                        final_status = strdup(json_get_string(
                                json_object_array_get_idx(evs, json_object_array_length(evs) - 1), "status"));
                }
                flushes++;
                json_object_put(o);
        }
        ck_assert_uint_ge(flushes, 1);
        ck_assert_str_eq(final_status, "done");
        free(final_status);
        free(text), free(out);
}
END_TEST

/* A worker subscribing through its own task socket (where the CLI inside
 * its sandbox connects) hears only its own task and the tasks it
 * dispatched, whatever scope it asks for. */
TF_WORLD_TEST(worker_subscription_sees_only_its_own_tree) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *pre = tf_shell_settled(w, repo, NULL, "echo before", NULL);
        char *script = strdup_printf(
                "O=$TASKFERRY_OUTPUT_DIR; taskferry watch --all --format ndjson > $O/events 2> $O/watch.err & W=$!; sleep 1; "
                "taskferry dispatch --executor shell --directory \"$PWD\" --prompt 'echo child' | sed -n 's/^id: //p' > $O/child; "
                "touch $O/ready; i=0; while [ ! -e $O/go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; sleep 1; "
                "kill $W; taskferry summary --mode activity $(cat $O/child) > $O/own-summary; echo rc=$? >> $O/own-summary; "
                "taskferry summary --mode activity %s > $O/other-summary; echo rc=$? >> $O/other-summary",
                pre);
        char *wid = tf_dispatch_shell(w, repo, NULL, script);
        ck_assert_msg(tf_wait_output(w, wid, "ready", 30000), "the worker never got ready");
        /* the user's task beside it, in the same repo */
        char *stranger = tf_shell_settled(w, repo, NULL, "echo stranger", NULL);
        tf_go(w, wid);
        json_object *st = tf_wait_settled(w, wid);
        ck_assert_str_eq(tf_jstr(st, "status"), "done");
        json_object_put(st);
        char *events = tf_output_read(w, wid, "events");
        char *child = tf_output_read(w, wid, "child");
        child[strcspn(child, "\n")] = 0;
        ck_assert_msg(strlen(child) > 3, "nested dispatch failed");
        ck_assert_msg(strstr(events, child), "the worker did not see its own child: %s", events);
        ck_assert_msg(!strstr(events, stranger), "the worker saw another task's events: %s", events);
        /* and it may ask about its child's activity */
        char *own = tf_output_read(w, wid, "own-summary");
        ck_assert_msg(strstr(own, "rc=0") && strstr(own, "child"), "%s", own);
        /* but not about a task it did not dispatch */
        char *other = tf_output_read(w, wid, "other-summary");
        ck_assert_msg(strstr(other, "rc=1") && strstr(other, "unknown task id") && !strstr(other, "before"), "%s", other);
        free(other), free(pre), free(script);
        free(own), free(events), free(child), free(stranger), free(wid), free(repo);
}
END_TEST

static long rss_kib(pid_t pid) {
        char path[64], *text;
        snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
        text = tf_read(path, NULL);
        char *p = strstr(text, "VmRSS:");
        long v = p ? strtol(p + 6, NULL, 10) : -1;
        free(text);
        return v;
}

/* A subscriber that never reads cannot grow the daemon without bound nor
 * stall it: with 50 events of 150 KiB each queued for it, the daemon keeps
 * answering at once, the reading subscriber gets everything, and what the
 * stalled one finally reads is bounded, ending with the drop notice. */
TF_WORLD_TEST_ENV(never_reading_subscriber_cannot_hurt_the_daemon, "TASKFERRY_DISABLE_SANDBOX=1") {
        tf_daemon_start(w);
        pid_t pid = tf_daemon_pid(w);
        int stalled = subscribe(w, "{\"all\":true}", NULL);
        int reader = subscribe(w, "{\"all\":true}", NULL);
        long rss0 = rss_kib(pid);
        size_t big_len = 150 * 1024;
        char *big = malloc(big_len + 1);
        memset(big, 'o', big_len);
        big[big_len] = 0;
        char **ids = calloc(10, sizeof *ids);
        size_t reader_events = 0;
        for (int i = 0; i < 10; i++) {
                char *p = strdup_printf("{\"prompt\":\"true\",\"directory\":\"%s\",\"executor\":\"shell\",\"originSessionId\":\"%s\"}",
                                        w->repo_parent, big);
                json_object *f = tf_rpc(w, "task.dispatch", p);
                ids[i] = strdup(tf_jstr(tf_result(f), "id"));
                json_object_put(f);
                free(p);
                /* the daemon answers at once while the stalled subscriber's output piles up */
                uint64_t t0 = mono_ms();
                json_object_put(tf_rpc(w, "system.health", "{}"));
                ck_assert_uint_lt(mono_ms() - t0, 2000);
                json_object *ev = events_until(reader, ids[i], "done", 20000);
                reader_events += count_for(ev, ids[i], "task.state");
                json_object_put(ev);
        }
        ck_assert_uint_eq(reader_events, 30);
        long rss1 = rss_kib(pid);
#ifndef __SANITIZE_ADDRESS__
        /* (under ASan its quarantine keeps freed memory: the byte count below is the bound there) */
        ck_assert_msg(rss1 - rss0 < 48 * 1024, "daemon grew by %ld KiB", rss1 - rss0);
#else
        (void) rss0, (void) rss1;
#endif
        /* what the stalled subscriber reads at last: bounded, then the notice */
        size_t bytes = 0, n = 0;
        bool notice = false;
        for (char *line; (line = tf_recv_line(stalled, 1000));) {
                bytes += strlen(line) + 1;
                n++;
                if (strstr(line, "event dropped: response too large")) notice = true;
                free(line);
        }
        ck_assert_msg(bytes < 3 * 1024 * 1024, "the stalled subscriber was sent %zu bytes", bytes);
        ck_assert(notice);
        ck_assert_uint_lt(n, 60);
        sub_close(stalled), sub_close(reader);
        for (int i = 0; i < 10; i++) free(ids[i]);
        free(ids), free(big);
}
END_TEST

int main(void) {
        return tf_run_tests("subscribe", "subscribe", 240,
                            TF_TESTS(state_stream_in_order_with_one_sequence_and_no_replay, p13_routing_by_task_all_and_workspace,
                                     p14_origin_session_filter, watch_task_id_exits_when_the_task_settles,
                                     summary_mode_activity_reads_the_narration, summaries_need_the_model_listed,
                                     activity_variants_follow_the_summaries_flag,
                                     model_backed_activity_summary_reaches_summaries_subscribers,
                                     watch_flush_interval_keeps_the_latest_per_task, worker_subscription_sees_only_its_own_tree,
                                     never_reading_subscriber_cannot_hurt_the_daemon));
}
