/* A decision on a changeset: accept or reject, serialized per workspace
 * (change.h). */

#include <stdlib.h>
#include <unistd.h>

#include "run/change.h"
#include "run/gate.h"
#include "run/launch.h"
#include "changeset.h"
#include "changeset-risk.h"
#include "run/executor-home.h"
#include "core/jobs.h"
#include "json-util.h"
#include "core/manager.h"
#include "run/lifecycle.h"
#include "overlay.h"
#include "project-config.h"
#include "protocol-keys.h"
#include "core/store.h"
#include "core/task.h"
#include "core/task-table.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"
#include "workspace.h"

/* An outcome that failed: done(-EIO, NULL, text). */
static void change_failed(change_done_fn done, void *userdata, const char *text) {
        done(userdata, -EIO, NULL, text ? text : "error: out of memory");
}

/* In the forked child: apply (accept) and clean up. */
static json_object *change_job_run(void *userdata, int *error) {
        ChangeJob *cj = userdata;
        Task *t = cj->t;
        json_object *o = json_object_new_object();
        if (cj->accept) {
                _cleanup_free_ char *reason = NULL;
                int r;
                /* what lands is what is read: the patch itself, classified again */
                if (!cj->allow_config) {
                        _cleanup_free_ char *text = NULL;
                        /* the review_paths of the user's project file (the live one, never the worker's) */
                        ProjectConfig cfg = {0};
                        (void) project_config_load(t->rec.directory, &cfg);
                        r = changeset_risks_refusal(t->id, t->rec.diff_path, t->rec.directory, cfg.review_paths, &text);
                        project_config_done(&cfg);
                        if (r < 0)
                                text = strdup_printf("error: the changeset of task %s cannot be read to check it for files "
                                                     "that can run code on this machine: %s; nothing was applied\nhelp: "
                                                     "read it (taskferry diff %s), then run \"taskferry accept %s "
                                                     "--allow-config\" to land it, or \"taskferry reject %s\"",
                                                     t->id, strerror(-r), t->id, t->id, t->id);
                        if (r != 0) {
                                json_add_string(o, PK_changesetRisks, text ? text : "error: out of memory");
                                return o;
                        }
                }
                json_object *cod = t->rec.overlay_dirs;
                _cleanup_free_ char *base = cod ? changeset_base_dir(json_get_string(cod, PK_root)) : NULL;
                /* an accept a crash interrupted may have landed already: never twice */
                if (t->accept_interrupted && changeset_is_applied_3way(t->rec.directory, t->rec.diff_path, base) > 0)
                        r = 1;
                else
                        r = changeset_apply_3way(t->rec.directory, t->rec.diff_path, base, &reason);
                json_add_int(o, "apply", r);
                json_add_string(o, PK_reason, reason);
                if (r <= 0) return o;
        }
        /* the executor homes go with the overlay, but for what a resume needs */
        _cleanup_free_ char *home = executor_home_root(t->m->paths.cache_dir, t->id);
        if (home) (void) executor_home_release(home);
        int k = launch_overlay_remove(t);
        json_add_bool(o, "removed", k >= 0);
        if (k < 0) json_add_string(o, "removeError", strerror(-k));
        return o;
}

static void change_job_done(Manager *m, void *userdata, json_object *res, int error);
static void change_job_finish(Manager *m, Task *t, bool accept, json_object *res, change_done_fn done, void *userdata);

static bool change_job_conflicts(Manager *m, ChangeJob *cj) {
        for (ChangeJob *o = m->change_jobs; o && o != cj; o = o->next)
                if (same_workspace(o->t->rec.directory, cj->t->rec.directory)) return true;
        return false;
}

static void change_job_unlink(Manager *m, ChangeJob *cj) {
        for (ChangeJob **pp = &m->change_jobs; *pp; pp = &(*pp)->next)
                if (*pp == cj) {
                        *pp = cj->next;
                        break;
                }
}

/* Start every waiting job that no earlier job's workspace blocks. */
static void change_jobs_kick(Manager *m) {
        for (ChangeJob *cj = m->change_jobs, *next; cj; cj = next) {
                next = cj->next;
                if (cj->started || cj->waiting_gate || change_job_conflicts(m, cj)) continue;
                cj->started = true;
                int k = job_start(m, change_job_run, change_job_done, cj);
                if (k < 0) {
                        change_done_fn done = cj->done;
                        void *userdata = cj->userdata;
                        cj->t->busy = false;
                        change_job_unlink(m, cj);
                        free(cj);
                        change_failed(done, userdata, "error: cannot start the changeset job");
                        next = m->change_jobs; /* the list changed: rescan */
                }
        }
}

static void change_job_done(Manager *m, void *userdata, json_object *res, int error) {
        ChangeJob *cj = userdata;
        Task *t = cj->t;
        bool accept = cj->accept;
        change_done_fn done = cj->done;
        void *done_userdata = cj->userdata;
        /* accept --force over a gate that blocked it says so on the record */
        int64_t applied = 1;
        if (res) (void) json_get_int64(res, "apply", &applied);
        if (accept && cj->override && res && applied > 0) (void) task_set_bool(t, TASK_KEY_check_override, true);
        change_job_unlink(m, cj);
        free(cj);
        t->busy = false;
        change_job_finish(m, t, accept, res, done, done_userdata);
        change_jobs_kick(m);
}

/* The parent's superseding reject has no one to answer. */
static void superseded_done(void *userdata, int rc, json_object *result, const char *reason) {
        char *id = userdata;
        if (rc < 0 && rc != -ECANCELED) log_warning("cannot remove the overlay of superseded task %s: %s", id, strempty(reason));
        json_object_put(result);
        free(id);
}

/* t's accepted changeset started from its parent's pending one
 * (overlay-seed.h, overlayDirs.seededFrom) and so included it: the
 * parent's is superseded, rejected with its overlay released as a reject
 * releases it. A parent no longer pending (accepted or rejected meanwhile)
 * is left as it is. */
static void supersede_parent(Manager *m, Task *t, const char *parent_id) {
        Task *p = parent_id ? manager_find_task(m, parent_id) : NULL;
        if (!p || p == t || p->rec.changeset_status != CHANGESET_PENDING || !task_is_settled(p) || p->busy) return;
        _cleanup_free_ char *why = strdup_printf("superseded by %s, whose accepted changeset included this one", t->id);
        if (why) task_set_str(p, TASK_KEY_changeset_error, why);
        _cleanup_free_ char *reason = NULL, *id = strdup(p->id);
        if (!id) return;
        if (change_start(m, p, false, false, superseded_done, id, &reason) < 0)
                log_warning("cannot reject superseded task %s: %s", p->id, strempty(reason));
        else
                TAKE_PTR(id); /* superseded_done frees it */
}

static void change_job_finish(Manager *m, Task *t, bool accept, json_object *res, change_done_fn done, void *userdata) {
        if (!res) {
                task_persist(t);
                return change_failed(done, userdata,
                                     accept ? "error: the accept job failed; the changeset is still pending"
                                            : "error: the overlay removal job failed; the changeset is rejected and its overlay remains on disk");
        }
        if (accept && json_get_string(res, PK_changesetRisks))
                return done(userdata, CHANGE_REFUSED_RISKS, NULL, json_get_string(res, PK_changesetRisks));
        int64_t applied = 1;
        json_get_int64(res, "apply", &applied);
        if (accept && applied < 0) {
                _cleanup_free_ char *text = strdup_printf("error: changeset for task %s could not be applied: %s\nhelp: the "
                                                          "task is still pending; fix the problem and retry, or reject it",
                                                          t->id, strempty(json_get_string(res, PK_reason)));
                return change_failed(done, userdata, text);
        }
        if (accept) {
                t->accept_interrupted = false;
                task_set_null(t, TASK_KEY_accept_started_at);
        }
        json_object *o = json_object_new_object();
        json_add_string(o, PK_taskId, t->id);
        if (accept && applied == 0) {
                json_add_string(o, PK_changesetStatus, "pending");
                json_add_bool(o, PK_applied, false);
                json_add_string(o, PK_reason, json_get_string(res, PK_reason));
                return done(userdata, 0, o, NULL);
        }
        bool removed = json_get_bool(res, "removed", false);
        json_object *od = t->rec.overlay_dirs;
        _cleanup_free_ char *seeded_from = accept && od && json_get_string(od, PK_seededFrom)
                                                   ? strdup(json_get_string(od, PK_seededFrom))
                                                   : NULL;
        if (removed) task_set_null(t, TASK_KEY_overlay_dirs);
        if (accept) (void) task_decide_changeset(t, CHANGESET_ACCEPTED);
        task_persist(t);
        if (seeded_from) supersede_parent(m, t, seeded_from);
        /* the decision is durable before the caller hears of it */
        int k = manager_flush(m);
        if (k < 0) log_warning_errno(k, "cannot flush tasks.json after deciding %s", t->id);
        json_add_string(o, PK_changesetStatus, accept ? "accepted" : "rejected");
        if (accept) {
                json_add_bool(o, PK_applied, true);
                json_add(o, task_key_to_string(TASK_KEY_check_status), task_record_get_json(&t->rec, TASK_KEY_check_status));
        }
        if (!removed) json_add_bool(o, PK_cleanupFailed, true);
        done(userdata, 0, o, NULL);
}

/* A refusal: -EIO with its text (NULL: out of memory) in *reason. */
static int refuse(char **reason, const char *text) {
        *reason = strdup(text ? text : "error: out of memory");
        return -EIO;
}

/* The gate a decision waited for has exited (gate.h gate_stop). */
static void change_gate_stopped(Task *t, void *userdata) {
        ChangeJob *cj = userdata;
        cj->waiting_gate = false;
        change_jobs_kick(t->m);
}

int change_start(Manager *m, Task *t, bool accept, bool allow_config, change_done_fn done, void *userdata,
                 char **reason) {
        ChangeRequest rq = {.accept = accept, .allow_config = allow_config};
        return change_start_full(m, t, &rq, done, userdata, reason);
}

int change_start_full(Manager *m, Task *t, const ChangeRequest *rq, change_done_fn done, void *userdata,
                      char **reason) {
        bool accept = rq->accept, allow_config = rq->allow_config;
        const char *verb = accept ? "accepted" : "rejected";
        if (accept && task_kind_info(t->kind)->never_lands) {
                _cleanup_free_ char *text = strdup_printf(
                        "error: task %s has role \"advisor\" and cannot be accepted\nhelp: advisor changesets are never applied; "
                        "inspect them with taskferry result %s --diff",
                        t->id, t->id);
                return refuse(reason, text);
        }
        const char *cs = strempty(changeset_status_to_string(t->rec.changeset_status));
        if (t->rec.changeset_status != CHANGESET_PENDING) {
                _cleanup_free_ char *text = strdup_printf(
                        "error: task %s has no pending changeset (changesetStatus: %s)\nhelp: only a task with changesetStatus "
                        "\"pending\" can be %s",
                        t->id, cs, verb);
                return refuse(reason, text);
        }
        if (!task_is_settled(t)) {
                _cleanup_free_ char *text = strdup_printf(
                        "error: task %s is still %s; its changeset is not extracted yet\nhelp: wait for it with taskferry wait "
                        "%s, or cancel it with taskferry cancel %s",
                        t->id, strempty(task_status_to_string(t->rec.status)), t->id, t->id);
                return refuse(reason, text);
        }
        if (t->busy) {
                _cleanup_free_ char *text = strdup_printf(
                        "error: task %s is already being accepted or rejected\nhelp: retry once that request has finished", t->id);
                return refuse(reason, text);
        }
        if (accept) {
                const char *diff = t->rec.diff_path;
                json_object *od = t->rec.overlay_dirs;
                if (!diff) {
                        _cleanup_free_ char *text = strdup_printf(
                                "error: changeset for task %s was never extracted (%s); its overlay is preserved at %s\nhelp: "
                                "reject it with taskferry reject %s",
                                t->id, t->rec.changeset_error ? t->rec.changeset_error : "unknown reason",
                                od ? strempty(json_get_string(od, PK_root)) : "(none)", t->id);
                        return refuse(reason, text);
                }
                if (access(diff, R_OK) < 0) {
                        _cleanup_free_ char *text = strdup_printf(
                                "error: the diff of task %s is missing at %s; the changeset cannot be applied without its diff\n"
                                "help: restore the file, or reject the changeset with taskferry reject %s",
                                t->id, diff, t->id);
                        return refuse(reason, text);
                }
                /* the check gate's verdict: only --force lands a changeset it
                 * has not passed (or is still judging) */
                if (check_status_blocks(task_check_status(t)) && !rq->force) {
                        _cleanup_free_ char *text = check_refusal_text(t);
                        return refuse(reason, text);
                }
        } else {
                /* flip before any cleanup so a late gate result is ignored */
                (void) task_decide_changeset(t, CHANGESET_REJECTED);
                int k = manager_flush(m);
                if (k < 0) log_warning_errno(k, "cannot flush tasks.json after rejecting %s", t->id);
        }
        if (accept) {
                /* durable before the live tree is touched: a daemon dying mid-apply
                 * leaves a trace that the next accept checks (changeset_is_applied) */
                char iso[32];
                task_set_str(t, TASK_KEY_accept_started_at, format_iso(now_ms(), iso));
                int k = manager_flush_now(m);
                if (k < 0) log_warning_errno(k, "cannot flush tasks.json before accepting %s", t->id);
        }
        ChangeJob *cj = calloc(1, sizeof *cj);
        if (!cj) return refuse(reason, NULL);
        cj->t = t;
        cj->accept = accept;
        cj->override = accept && rq->force && check_status_blocks(task_check_status(t));
        cj->allow_config = allow_config;
        cj->done = done;
        cj->userdata = userdata;
        t->busy = true;
        /* a running gate is stopped first (accept --force, reject): the
         * decision starts once it exited */
        int g = gate_stop(t, change_gate_stopped, cj);
        if (g < 0) {
                t->busy = false;
                free(cj);
                return refuse(reason, NULL);
        }
        cj->waiting_gate = g > 0;
        /* queued behind the accepts/rejects into the same workspace */
        ChangeJob **pp = &m->change_jobs;
        while (*pp) pp = &(*pp)->next;
        *pp = cj;
        change_jobs_kick(m); /* reports through done itself if the job cannot start */
        return 0;
}

void change_jobs_free(Manager *m) {
        while (m->change_jobs) {
                ChangeJob *cj = m->change_jobs;
                m->change_jobs = cj->next;
                /* a started one's job is freed after this without its callback
                 * (jobs_free): its request is answered here, like a waiting one's */
                cj->done(cj->userdata, -ECANCELED, NULL, NULL);
                free(cj);
        }
}
