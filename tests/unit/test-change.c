/* change.c: a decision on a changeset (change.h).
 * Decisions into one workspace run one at a time in request order; decisions
 * into different workspaces run side by side; the refusals; an accept that
 * no longer applies stays pending with git's reason and touches nothing.
 * In-process: a Manager on its own sd-event loop running the real forked
 * jobs (jobs.c) and the real git apply on real directories; tasks are
 * records (no shim). */

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run/change.h"
#include "core/jobs.h"
#include "json-util.h"
#include "core/manager.h"
#include "api/methods.h"
#include "core/store.h"
#include "core/task.h"
#include "core/task-table.h"
#include "api/task-views.h"
#include "unit.h"
#include "fileio.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"

static Manager m;
static char *dir, *ws1, *ws2;

/* One outcome reported through change_done_fn. */
typedef struct Outcome {
        int calls;
        int order; /* 1-based position among all outcomes */
        int rc;
        json_object *result;
        char *text; /* the error text (REQUEST_FAILED) */
} Outcome;
static int n_outcomes;

static void outcome_cb(void *userdata, int rc, json_object *result, const char *reason) {
        Outcome *o = userdata;
        o->calls++;
        o->order = ++n_outcomes;
        o->rc = rc;
        o->result = result;
        if (reason) o->text = strdup(reason);
}

static void outcome_done(Outcome *o) {
        json_object_put(o->result);
        free(o->text);
        *o = (Outcome) {0};
}

static char *path_in(const char *base, const char *name) { return strdup_printf("%s/%s", base, name); }

static void put(const char *base, const char *name, const char *content) {
        char *p = path_in(base, name);
        ck_assert_int_eq(write_file_atomic(p, content, strlen(content), 0600), 0);
        free(p);
}

static char *get(const char *base, const char *name) {
        char *p = path_in(base, name), *data = NULL;
        size_t len = 0;
        ck_assert_int_ge(read_file(p, 1 << 20, &data, &len), 0);
        free(p);
        return data;
}

static void setup(void) {
        m = (Manager) {0};
        n_outcomes = 0;
        ck_assert_int_ge(sd_event_new(&m.event), 0);
        dir = tf_tmpdir_new("test-change");
        m.paths.state_dir = strdup(dir);
        m.paths.cache_dir = path_in(dir, "cache");
        ws1 = path_in(dir, "ws1");
        ws2 = path_in(dir, "ws2");
        ck_assert_int_eq(mkdir(ws1, 0700), 0);
        ck_assert_int_eq(mkdir(ws2, 0700), 0);
        put(ws1, "a.txt", "one\n");
        put(ws2, "a.txt", "one\n");
}

static void teardown(void) {
        change_jobs_free(&m);
        ck_assert_ptr_null(m.change_jobs);
        jobs_free(&m);
        for (size_t i = 0; i < m.n_tasks; i++) task_free(m.tasks[i]);
        free(m.tasks);
        store_done(&m);
        manager_free_task_observers(&m);
        m.event = sd_event_unref(m.event);
        free(m.paths.state_dir);
        free(m.paths.cache_dir);
        dir = tf_tmpdir_free(dir);
        free(ws1);
        free(ws2);
}

/* A settled task with a pending changeset: a patch of a.txt "one" → `to` in
 * directory `where` (no overlay, no base: the plain check-then-apply). */
static Task *pending_task(const char *id, const char *where, const char *to) {
        char *patch = strdup_printf("diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+%s\n", to);
        char *name = strdup_printf("%s.patch", id);
        put(dir, name, patch);
        char *diff = path_in(dir, name);
        char *s = strdup_printf("{\"id\":\"%s\",\"directory\":\"%s\",\"status\":\"done\",\"changesetStatus\":\"pending\","
                                "\"diffPath\":\"%s\",\"overlayDirs\":null}",
                                id, where, diff);
        json_object *o = NULL;
        ck_assert_int_eq(json_parse_strict(s, strlen(s), &o), 0);
        Task *t = task_table_add_json(&m, o);
        ck_assert_ptr_nonnull(t);
        free(s);
        free(diff);
        free(name);
        free(patch);
        return t;
}

static ChangeJob *job_of(Task *t) {
        for (ChangeJob *cj = m.change_jobs; cj; cj = cj->next)
                if (cj->t == t) return cj;
        return NULL;
}

/* Run the loop until every outcome in os has been reported (10 s at most). */
static void run_until(Outcome **os, size_t n) {
        uint64_t end = now_ms() + 10000;
        for (;;) {
                bool all = true;
                for (size_t i = 0; i < n; i++) all = all && os[i]->calls > 0;
                if (all) return;
                ck_assert_msg(now_ms() < end, "decisions did not complete");
                ck_assert_int_ge(sd_event_run(m.event, 10 * 1000), 0);
        }
}

START_TEST(one_workspace_one_at_a_time_in_order) {
        Task *a = pending_task("oc_a", ws1, "two");
        Task *b = pending_task("oc_b", ws1, "three"); /* the same line: cannot both land */
        Task *c = pending_task("oc_c", ws2, "four");  /* another workspace */
        Outcome oa = {0}, ob = {0}, oc = {0};
        _cleanup_free_ char *err = NULL;
        ck_assert_int_eq(change_start(&m, a, true, false, outcome_cb, &oa, &err), 0);
        ck_assert_int_eq(change_start(&m, b, true, false, outcome_cb, &ob, &err), 0);
        ck_assert_int_eq(change_start(&m, c, true, false, outcome_cb, &oc, &err), 0);
        ck_assert_ptr_null(err);
        /* a and c run; b waits for a's workspace */
        ck_assert(job_of(a)->started);
        ck_assert(!job_of(b)->started);
        ck_assert(job_of(c)->started);
        ck_assert(a->busy && b->busy && c->busy);
        /* recorded before the tree is touched */
        ck_assert(task_record_is_set(&a->rec, TASK_KEY_accept_started_at));
        Outcome *all[] = {&oa, &ob, &oc};
        run_until(all, 3);
        ck_assert_int_eq(oa.calls + ob.calls + oc.calls, 3); /* once each */
        ck_assert_int_lt(oa.order, ob.order);
        /* a landed */
        ck_assert_int_eq(oa.rc, 0);
        ck_assert_str_eq(json_get_string(oa.result, "taskId"), "oc_a");
        ck_assert_str_eq(json_get_string(oa.result, "changesetStatus"), "accepted");
        ck_assert(json_get_bool(oa.result, "applied", false));
        ck_assert_int_eq(a->rec.changeset_status, CHANGESET_ACCEPTED);
        ck_assert(!task_record_is_set(&a->rec, TASK_KEY_accept_started_at));
        /* b came after it and no longer applies: pending, with the reason, tree untouched */
        ck_assert_int_eq(ob.rc, 0);
        ck_assert_str_eq(json_get_string(ob.result, "changesetStatus"), "pending");
        ck_assert(!json_get_bool(ob.result, "applied", true));
        ck_assert_ptr_nonnull(json_get_string(ob.result, "reason"));
        ck_assert_int_eq(b->rec.changeset_status, CHANGESET_PENDING);
        char *s = get(ws1, "a.txt");
        ck_assert_str_eq(s, "two\n");
        free(s);
        /* c, in its own workspace, landed too */
        ck_assert_str_eq(json_get_string(oc.result, "changesetStatus"), "accepted");
        s = get(ws2, "a.txt");
        ck_assert_str_eq(s, "four\n");
        free(s);
        ck_assert(!a->busy && !b->busy && !c->busy);
        ck_assert_ptr_null(m.change_jobs);
        /* the accepted state is durable: tasks.json and its journal say so */
        char *tj = tf_durable_tasks_text(m.paths.state_dir);
        ck_assert_ptr_nonnull(strstr(tj, "\"changesetStatus\": \"accepted\""));
        free(tj);
        outcome_done(&oa);
        outcome_done(&ob);
        outcome_done(&oc);
}
END_TEST

START_TEST(reject_flips_first_and_waits_its_turn) {
        Task *a = pending_task("oc_a", ws1, "two");
        Task *b = pending_task("oc_b", ws1, "three");
        Outcome oa = {0}, ob = {0};
        _cleanup_free_ char *err = NULL;
        ck_assert_int_eq(change_start(&m, a, true, false, outcome_cb, &oa, &err), 0);
        ck_assert_int_eq(change_start(&m, b, false, false, outcome_cb, &ob, &err), 0);
        /* a reject is rejected at once (a late check gate result is then
         * ignored), its cleanup job queued behind the accept */
        ck_assert_int_eq(b->rec.changeset_status, CHANGESET_REJECTED);
        ck_assert(!job_of(b)->started);
        Outcome *all[] = {&oa, &ob};
        run_until(all, 2);
        ck_assert_int_lt(oa.order, ob.order);
        ck_assert_str_eq(json_get_string(ob.result, "changesetStatus"), "rejected");
        ck_assert(!json_object_object_get_ex(ob.result, "cleanupFailed", NULL));
        char *s = get(ws1, "a.txt");
        ck_assert_str_eq(s, "two\n");
        free(s);
        outcome_done(&oa);
        outcome_done(&ob);
}
END_TEST

START_TEST(refusals_queue_nothing) {
        Task *t = pending_task("oc_t", ws1, "two");
        Outcome o = {0};
        _cleanup_free_ char *err = NULL;
        /* already being decided */
        ck_assert_int_eq(change_start(&m, t, true, false, outcome_cb, &o, &err), 0);
        Outcome o2 = {0};
        ck_assert_int_eq(change_start(&m, t, false, false, outcome_cb, &o2, &err), -EIO);
        ck_assert_str_eq(err, "error: task oc_t is already being accepted or rejected\nhelp: retry once that request has finished");
        free(err), err = NULL;
        ck_assert_int_eq(t->rec.changeset_status, CHANGESET_PENDING); /* the refused reject flipped nothing */
        Outcome *all[] = {&o};
        run_until(all, 1);
        ck_assert_int_eq(o2.calls, 0);
        /* no pending changeset any more */
        ck_assert_int_eq(change_start(&m, t, false, false, outcome_cb, &o2, &err), -EIO);
        ck_assert_ptr_nonnull(strstr(err, "has no pending changeset (changesetStatus: accepted)"));
        free(err), err = NULL;
        /* an advisor's changeset is never accepted */
        Task *adv = pending_task("oc_adv", ws1, "x");
        ck_assert_int_eq(task_set_str(adv, TASK_KEY_role, "advisor"), 0);
        ck_assert_int_eq(change_start(&m, adv, true, false, outcome_cb, &o2, &err), -EIO);
        ck_assert_ptr_nonnull(strstr(err, "has role \"advisor\" and cannot be accepted"));
        free(err), err = NULL;
        /* still settling */
        Task *s = pending_task("oc_s", ws1, "x");
        s->settling = true;
        ck_assert_int_eq(change_start(&m, s, false, false, outcome_cb, &o2, &err), -EIO);
        ck_assert_ptr_nonnull(strstr(err, "its changeset is not extracted yet"));
        free(err), err = NULL;
        s->settling = false;
        /* the diff is gone */
        Task *g = pending_task("oc_g", ws1, "x");
        ck_assert_int_eq(unlink(g->rec.diff_path), 0);
        ck_assert_int_eq(change_start(&m, g, true, false, outcome_cb, &o2, &err), -EIO);
        ck_assert_ptr_nonnull(strstr(err, "the diff of task oc_g is missing at"));
        free(err), err = NULL;
        ck_assert(!adv->busy && !s->busy && !g->busy);
        ck_assert_ptr_null(m.change_jobs);
        ck_assert_int_eq(o2.calls, 0);
        outcome_done(&o);
}
END_TEST

START_TEST(shutdown_drops_the_waiting_ones) {
        Task *a = pending_task("oc_a", ws1, "two");
        Task *b = pending_task("oc_b", ws1, "three");
        Outcome oa = {0}, ob = {0};
        _cleanup_free_ char *err = NULL;
        ck_assert_int_eq(change_start(&m, a, true, false, outcome_cb, &oa, &err), 0);
        ck_assert_int_eq(change_start(&m, b, true, false, outcome_cb, &ob, &err), 0);
        ck_assert_ptr_nonnull(m.jobs);
        pid_t running = m.jobs->pid;
        /* as daemon_free does it: the decisions, then the jobs (no job calls back) */
        change_jobs_free(&m);
        jobs_free(&m);
        /* the waiting one and the running one both hear -ECANCELED (their
         * requests are dropped unanswered) and nothing of them is left */
        Outcome *each[] = {&oa, &ob};
        for (size_t i = 0; i < ELEMENTSOF(each); i++) {
                ck_assert_int_eq(each[i]->calls, 1);
                ck_assert_int_eq(each[i]->rc, -ECANCELED);
                ck_assert_ptr_null(each[i]->result);
                outcome_done(each[i]);
        }
        ck_assert_ptr_null(m.change_jobs);
        (void) a;
        /* a's abandoned job: reaped so teardown leaves no child behind */
        ck_assert_int_eq(waitpid(running, NULL, 0), running);
}
END_TEST

TF_MAIN("change", "change", setup, teardown, 60, one_workspace_one_at_a_time_in_order,
        reject_flips_first_and_waits_its_turn, refusals_queue_nothing, shutdown_drops_the_waiting_ones)
