/* Settlement: from the worker's exit to its final state (settle.h):
 * classification and the changeset extraction job. */

#include <dirent.h>
#include <regex.h>
#include <sys/stat.h>

#include "changeset.h"
#include "changeset-risk.h"
#include "core/cooldown.h"
#include "core/jobs.h"
#include "core/manager.h"
#include "core/task.h"
#include "disk-budget.h"
#include "executor.h"
#include "json-util.h"
#include "launch-spec.h"
#include "logparse.h"
#include "overlay.h"
#include "project-config.h"
#include "protocol-keys.h"
#include "run/executor-home.h"
#include "run/scope.h"
#include "run/launch.h"
#include "run/settle.h"
#include "fs-util.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"
#include "task-limits.h"

/* Does the task's overlay (overlayDirs) hold no change: every upper dir
 * (the target's, each rwBind's) missing or empty? False when unsure. */
static bool upper_is_empty(const char *dir) {
        if (!dir) return false;
        DIR *d = opendir(dir);
        if (!d) return errno == ENOENT;
        bool empty = true;
        for (struct dirent *de; empty && (de = readdir(d));)
                empty = streq(de->d_name, ".") || streq(de->d_name, "..");
        closedir(d);
        return empty;
}

static bool overlay_holds_nothing(json_object *od) {
        if (!od || !json_get_string(od, PK_root) || !json_get_string(od, PK_tmpRoot)) return false;
        if (!upper_is_empty(json_get_string(od, PK_upperDir))) return false;
        json_object *binds = json_get_array(od, PK_rwBinds);
        for (size_t i = 0; binds && i < json_object_array_length(binds); i++)
                if (!upper_is_empty(json_get_string(json_object_array_get_idx(binds, i), PK_upperDir))) return false;
        json_object *fbinds = json_get_array(od, PK_rwFileBinds);
        return !fbinds || json_object_array_length(fbinds) == 0;
}

ChangesetStatus settle_spawn_error_changeset(Task *t) {
        /* The launch failed before the fork. An overlay whose upper dirs are
         * empty holds no change — this attempt made it and no worker ran —
         * so it ends like an extraction that found none (accepted, overlay
         * released) instead of a "pending" changeset that `diff` and `accept`
         * cannot find. An overlay with anything in it (an earlier attempt's
         * worker, before a daemon restart) stays pending and kept: nothing
         * stored is dropped. A changeset that never lands ends rejected. */
        ChangesetStatus cs = t->rec.changeset_status;
        bool never_lands = task_kind_info(t->kind)->never_lands;
        if (cs == CHANGESET_PENDING && overlay_holds_nothing(t->rec.overlay_dirs)) {
                if (launch_overlay_remove(t) >= 0) task_set_null(t, TASK_KEY_overlay_dirs);
                cs = never_lands ? CHANGESET_REJECTED : CHANGESET_ACCEPTED;
        }
        if (never_lands && cs == CHANGESET_PENDING) cs = CHANGESET_REJECTED;
        return cs;
}

/* ---- settlement ---- */

/* Remove the task's executor homes but for what a later resume needs. */
static void release_home(Task *t) {
        _cleanup_free_ char *home = executor_home_root(t->m->paths.cache_dir, t->id);
        if (home) (void) executor_home_release(home);
}

#define DISK_STOP_REASON "disk_quota_exceeded"

/* A worker the shim stopped for its disk use keeps a pending changeset,
 * unless keeping it would hurt everyone else: the filesystem holding the
 * overlay is still below its free-space floor (the space is needed for other
 * tasks' dispatch and settlement), or its files measure more than twice its
 * budget (a sparse giant extraction would have to read). Then the overlay is
 * discarded (changesetStatus "rejected"); returns why (malloc'd), else NULL;
 * *ret_over says the files were over twice the budget. Runs in the
 * settlement job. */
static char *disk_stop_discard_reason(Task *t, json_object *od, bool *ret_over) {
        bool stopped = streq_ptr(t->rec.failure_reason, DISK_STOP_REASON);
        const char *root = json_get_string(od, PK_root);
        if (!root) return NULL;
        char a[32], b[32];
        disk_fs_info fs;
        if (stopped && disk_fs_stat(root, &fs) >= 0 && disk_fs_below_floor(&fs))
                return strdup_printf("changeset discarded: the filesystem holding %s still has only %s free after "
                                     "the worker was stopped (floor %s); keeping it would block other tasks",
                                     root, disk_size_format(fs.avail, a), disk_size_format(disk_floor_bytes(fs.size), b));
        int64_t budget = 0;
        if (!task_record_get_int(&t->rec, TASK_KEY_disk_max_bytes, &budget) || budget <= 0) return NULL;
        disk_usage u = {0};
        const char *upper = json_get_string(od, PK_upperDir);
        /* also for a worker that exited before the shim's walk saw its files (a
         * 1 TiB sparse file made at once): extraction would read all of it */
        if (upper && disk_usage_walk(upper, 2 * (uint64_t) budget, &u) == 1) {
                *ret_over = true;
                return strdup_printf("changeset discarded: the worker's files measure more than twice its disk "
                                     "budget of %s (at least %s, sparse files at their apparent size)",
                                     disk_size_format((uint64_t) budget, a), disk_size_format(u.bytes, b));
        }
        return NULL;
}

/* What an earlier settlement attempt of this task left, whose daemon died
 * before it recorded the result (a settlement is persisted by the 250 ms
 * debounce; the attempt's job dies with its daemon, jobs.c): 1 if it found
 * no changes (the empty patch it writes before removing the overlay is
 * there), else 0; or 0 with *ret_discard set when the overlay is gone
 * without that (an attempt discarded it for its disk use, or something
 * removed it): nothing is left to extract. Runs in the settlement job. */
static int earlier_attempt(json_object *od, const char *patch, char **ret_discard) {
        struct stat st;
        if (patch && stat(patch, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0) return 1;
        const char *root = json_get_string(od, PK_root);
        if (root && lstat(root, &st) < 0 && errno == ENOENT)
                *ret_discard = strdup_printf("changeset lost: its overlay %s no longer exists (an earlier settlement "
                                             "discarded it, or it was removed)",
                                             root);
        return 0;
}

/* HEAD drift: the target's HEAD moved while the worker ran (a commit, a
 * checkout). Adds to ex_res where it moved from and to, and whether the
 * changeset would merge into the live tree now (changeset_check_3way:
 * "headDriftRecovered", absent when that could not be told, with
 * "driftDetail" saying why). An unreadable HEAD is no drift. Runs in the
 * settlement job. */
static void drift_probe(Task *t, const char *patch, const char *base, json_object *ex_res) {
        const char *pre = t->rec.pre_dispatch_head;
        _cleanup_free_ char *now = NULL, *why = NULL, *detail = NULL;
        if (!pre || changeset_live_head(t->rec.directory, &now) <= 0 || streq(now, pre)) return;
        json_add_string(ex_res, PK_headDriftFrom, pre);
        json_add_string(ex_res, PK_headDriftTo, now);
        int r = changeset_check_3way(t->rec.directory, patch, base, &why);
        if (r > 0) {
                json_add_bool(ex_res, PK_headDriftRecovered, true);
                return;
        }
        if (r == 0) json_add_bool(ex_res, PK_headDriftRecovered, false);
        detail = strdup_printf("%sHEAD moved from %.7s to %.7s while the worker ran; %s", r < 0 ? "could not evaluate: " : "",
                               pre, now, why ? why : strerror(-r));
        json_add_string(ex_res, "driftDetail", detail);
}

/* Stamp what drift_probe found on the task (the changeset stays pending). */
static void drift_record(Task *t, json_object *ext) {
        if (!json_get_string(ext, PK_headDriftFrom)) return;
        task_set_str(t, TASK_KEY_head_drift_from, json_get_string(ext, PK_headDriftFrom));
        task_set_str(t, TASK_KEY_head_drift_to, json_get_string(ext, PK_headDriftTo));
        json_object *rec = json_get(ext, PK_headDriftRecovered);
        if (rec) task_set_bool(t, TASK_KEY_head_drift_recovered, json_object_get_boolean(rec));
        else task_set_null(t, TASK_KEY_head_drift_recovered);
        if (json_get_string(ext, "driftDetail")) task_set_str(t, TASK_KEY_changeset_error, json_get_string(ext, "driftDetail"));
}

static json_object *settle_job_run(void *userdata, int *error) {
        Task *t = userdata;
        const executor *ex = executor_find(strempty(t->rec.executor_id));
        const char *log = t->rec.log_path;
        json_object *res = json_object_new_object();
        if (!res) return NULL;
        if (ex && log && !t->rec.failure_reason) {
                _cleanup_free_ char *reason = NULL, *detail = NULL;
                if (log_classify_file(log, ex->failure_prefix, ex->structured_prefix, &reason, &detail) > 0) {
                        json_add_string(res, PK_failureReason, reason);
                        json_add_string(res, PK_failureDetail, detail);
                }
        }
        cooldown_settle_scan(t, res); /* the provider's retry hint (cooldown.h) */
        /* the kernel's OOM kills in the task's scope, as the shim saw them (scope.h) */
        _cleanup_free_ char *tdir = tf_path_task_dir(&t->m->paths, t->id);
        exit_info ei = {0};
        if (tdir && exit_info_read(tdir, &ei) >= 0) {
                if (ei.oom_kills > 0) json_add_int(res, "oomKills", ei.oom_kills);
                exit_info_done(&ei);
        }
        if (log) {
                _cleanup_free_ char *boot = NULL;
                if (log_boot_failure(log, &boot) > 0) json_add_string(res, "bootDetail", boot);
                log_summary s = {0};
                if (log_summarize_file(log, t->rec.session_id, &s) >= 0) {
                        json_add_string(res, PK_sessionId, s.session_id);
                        json_add_bool(res, "hasStop", s.has_stop);
                        json_add_bool(res, "hasJsonLine", s.has_json_line);
                        const char *msg = s.message ? s.message : "";
                        /* a final message of only white space is none */
                        json_add_bool(res, "messageNonEmpty", !log_line_is_blank(msg, strlen(msg)));
                        const char *marker = t->rec.final_marker;
                        if (marker) {
                                regex_t re;
                                bool match = false;
                                if (regcomp(&re, marker, REG_EXTENDED | REG_NEWLINE | REG_NOSUB) == 0) {
                                        match = regexec(&re, msg, 0, NULL, 0) == 0;
                                        regfree(&re);
                                }
                                json_add_bool(res, "markerMatched", match);
                        }
                        regex_t fs;
                        if (regcomp(&fs, "^Status:[[:space:]]*(DONE_WITH_CONCERNS|DONE|BLOCKED|NEEDS_CONTEXT)[[:space:]]*$",
                                    REG_EXTENDED | REG_NEWLINE) == 0) {
                                regmatch_t mt[2];
                                if (regexec(&fs, msg, 2, mt, 0) == 0) {
                                        _cleanup_free_ char *v = strndup(msg + mt[1].rm_so, (size_t) (mt[1].rm_eo - mt[1].rm_so));
                                        json_add_string(res, PK_finalStatus, v);
                                }
                                regfree(&fs);
                        }
                        log_summary_done(&s);
                }
        }
        json_object *od = t->rec.overlay_dirs;
        if (!od) release_home(t); /* nothing pending: the homes go now (executor-home.h) */
        _cleanup_free_ char *patch = strdup_printf("%s/diffs/%s.patch", t->m->paths.state_dir, t->id);
        bool over = false;
        _cleanup_free_ char *discard = NULL;
        int earlier = od ? earlier_attempt(od, patch, &discard) : 0;
        if (earlier == 0 && od) discard = disk_stop_discard_reason(t, od, &over);
        if (earlier > 0) {
                /* an attempt under a daemon that died before recording it found
                 * no changes, wrote the empty patch, then removed the overlay
                 * (perhaps only in part): its answer stands */
                json_object *ex_res = json_object_new_object();
                int k = launch_overlay_remove(t);
                json_add_bool(ex_res, PK_ok, true);
                json_add_bool(ex_res, "hasChanges", false);
                json_add_string(ex_res, PK_diffPath, patch);
                json_add_bool(ex_res, "overlayRemoved", k >= 0);
                json_add(res, "extract", ex_res);
                release_home(t);
        } else if (discard) {
                json_object *ex_res = json_object_new_object();
                if (over) json_add_bool(ex_res, "overBudget", true);
                int k = launch_overlay_remove(t);
                json_add_bool(ex_res, PK_ok, true);
                json_add_string(ex_res, "discarded", discard);
                json_add_bool(ex_res, "overlayRemoved", k >= 0);
                json_add(res, "extract", ex_res);
                release_home(t);
        } else if (od) {
                json_object *ex_res = json_object_new_object();
                _cleanup_free_ char *diffs = strdup_printf("%s/diffs", t->m->paths.state_dir);
                _cleanup_free_ char *base = changeset_base_dir(json_get_string(od, PK_root));
                (void) mkdir_p(diffs, 0700);
                changeset_extract_args a = {
                        .directory = t->rec.directory,
                        .upper = json_get_string(od, PK_upperDir),
                        .work = json_get_string(od, PK_workDir),
                        .pre_head = t->rec.pre_dispatch_head,
                        .overlay_root = json_get_string(od, PK_root), /* scratch.<pid> per attempt */
                        .base_dir = base,
                        .patch_path = patch,
                };
                _cleanup_strv_free_ char **warnings = NULL;
                a.ret_warnings = &warnings;
                _cleanup_free_ char *err = NULL;
                int r = changeset_extract(&a, &err);
                if (r < 0) {
                        json_add_bool(ex_res, PK_ok, false);
                        json_add_string(ex_res, PK_error, err ? err : strerror(-r));
                } else {
                        json_add_bool(ex_res, PK_ok, true);
                        json_add_bool(ex_res, "hasChanges", r > 0);
                        json_add_string(ex_res, PK_diffPath, patch);
                        if (warnings) {
                                /* paths left out of the patch (changeset.h) */
                                json_object *arr = json_object_new_array();
                                for (size_t i = 0; arr && warnings[i]; i++)
                                        json_object_array_add(arr, json_object_new_string(warnings[i]));
                                json_add(ex_res, PK_warnings, arr);
                        }
                        if (r > 0) drift_probe(t, patch, base, ex_res);
                        /* files that can run code on the host later
                         * (changeset-risk.h), the project's review_paths
                         * added to the built-in list */
                        if (r > 0) {
                                ProjectConfig cfg = {0};
                                (void) project_config_load(t->rec.directory, &cfg);
                                if (changeset_risks_annotate(ex_res, patch, t->rec.directory, cfg.review_paths) < 0)
                                        log_warning("cannot classify the changeset of %s", t->id);
                                project_config_done(&cfg);
                        }
                        if (r == 0) {
                                int k = launch_overlay_remove(t);
                                json_add_bool(ex_res, "overlayRemoved", k >= 0);
                        }
                        if (r == 0) release_home(t);
                }
                json_add(res, "extract", ex_res);
        }
        /* an advisor's changeset is never applied: its diff stays readable,
         * its overlay goes now */
        json_object *adv = od && task_kind_info(t->kind)->never_lands ? json_get_object(res, "extract") : NULL;
        if (adv && !json_get_bool(adv, "overlayRemoved", false)) {
                int k = launch_overlay_remove(t);
                json_add_bool(adv, "overlayRemoved", k >= 0);
                release_home(t);
        }
        return res;
}

static void settle_job_done(Manager *m, void *userdata, json_object *res, int error) {
        Task *t = userdata;
        t->settling = false;
        if (error < 0 || !res) {
                log_error("settlement analysis for %s failed (%s); settling from the exit status only", t->id,
                          strerror(error < 0 ? -error : EIO));
                res = NULL;
        }
        const executor *ex = executor_find(strempty(t->rec.executor_id));
        int64_t code = 0;
        bool has_code = task_record_get_int(&t->rec, TASK_KEY_exit_code, &code);
        const char *sig = t->rec.signal;
        const char *spawn_error = t->rec.spawn_error;

        json_object *ext0 = res ? json_get_object(res, "extract") : NULL;
        if (ext0 && json_get_bool(ext0, "overBudget", false) && !t->rec.failure_reason) {
                task_set_str(t, TASK_KEY_failure_reason, DISK_STOP_REASON);
                task_set_str(t, TASK_KEY_failure_detail, json_get_string(ext0, "discarded"));
        }
        /* a worker the kernel OOM-killed at its scope's MemoryMax (scope.h):
         * crashed with oom_killed, whatever its log says after that; one that
         * still exited 0 (only a child of it was killed) is not */
        int64_t ooms = 0;
        if (res) (void) json_get_int64(res, "oomKills", &ooms);
        int64_t mem_max = 0;
        (void) task_record_get_int(&t->rec, TASK_KEY_memory_max, &mem_max);
        _cleanup_free_ char *oom_detail = NULL;
        if (!t->rec.failure_reason && !t->rec.cancel_requested && scope_unit_of(t) &&
            !(has_code && code == 0 && !sig) &&
            scope_oom_verdict(scope_unit_of(t), NULL, ooms, mem_max > 0 ? (uint64_t) mem_max : 0, &oom_detail)) {
                task_set_str(t, TASK_KEY_failure_reason, SCOPE_OOM_REASON);
                task_set_str(t, TASK_KEY_failure_detail, oom_detail);
        }
        if (res && !t->rec.failure_reason && json_get_string(res, PK_failureReason)) {
                task_set_str(t, TASK_KEY_failure_reason, json_get_string(res, PK_failureReason));
                task_set_str(t, TASK_KEY_failure_detail, json_get_string(res, PK_failureDetail));
        }
        TaskStatus status;
        if (t->rec.cancel_requested) status = TASK_CANCELLED;
        else if (spawn_error || t->rec.failure_reason) status = TASK_CRASHED;
        else if (has_code && code == 0 && !sig) status = TASK_DONE;
        else status = TASK_CRASHED;

        /* boot failure: explicit nonzero exit, no reason, no JSON line at all */
        if (status == TASK_CRASHED && !spawn_error && !t->rec.failure_reason && has_code && code != 0 && res &&
            json_get_string(res, "bootDetail") && !json_get_bool(res, "hasJsonLine", false) && ex) {
                task_set_str(t, TASK_KEY_failure_reason, ex->boot_failure_reason);
                task_set_str(t, TASK_KEY_failure_detail, json_get_string(res, "bootDetail"));
        }
        /* crash recovery: the worker reached a final answer before failing */
        if (status == TASK_CRASHED && !spawn_error && res && json_get_bool(res, "hasStop", false) &&
            json_get_bool(res, "messageNonEmpty", false) && !streq_ptr(t->rec.failure_reason, DISK_STOP_REASON) &&
            !streq_ptr(t->rec.failure_reason, SCOPE_OOM_REASON) &&
            !streq_ptr(t->rec.failure_reason, TASK_LIMITS_MEMORY_REASON) &&
            !streq_ptr(t->rec.failure_reason, TASK_LIMITS_TASKS_REASON))
                status = TASK_DONE;
        if (res && json_get_string(res, PK_sessionId)) task_set_str(t, TASK_KEY_session_id, json_get_string(res, PK_sessionId));
        /* completeness: a done task whose final message is blank, or does
         * not match its --require-final-marker, is incomplete; for an
         * executor whose exit code is its success (shell), an empty stdout
         * is not incomplete, only an explicit marker that does not match is */
        bool need_message = !ex || !ex->exit_code_is_success;
        if (status == TASK_DONE && res) {
                if (need_message && !json_get_bool(res, "messageNonEmpty", false))
                        task_set_bool(t, TASK_KEY_incomplete, true);
                else {
                        if (t->rec.final_marker && !json_get_bool(res, "markerMatched", false))
                                task_set_bool(t, TASK_KEY_incomplete, true);
                        if (json_get_string(res, PK_finalStatus))
                                task_set_str(t, TASK_KEY_final_status, json_get_string(res, PK_finalStatus));
                }
        }
        ChangesetStatus cs = t->rec.changeset_status;
        json_object *ext = res ? json_get_object(res, "extract") : NULL;
        if (t->rec.overlay_dirs) {
                if (!ext) {
                        task_set_str(t, TASK_KEY_changeset_error, "changeset extraction did not run; the overlay is kept");
                } else if (json_get_string(ext, "discarded")) {
                        cs = CHANGESET_REJECTED;
                        task_set_str(t, TASK_KEY_changeset_error, json_get_string(ext, "discarded"));
                        if (json_get_bool(ext, "overlayRemoved", false)) task_set_null(t, TASK_KEY_overlay_dirs);
                } else if (!json_get_bool(ext, PK_ok, false)) {
                        task_set_str(t, TASK_KEY_changeset_error, json_get_string(ext, PK_error));
                } else {
                        task_set_str(t, TASK_KEY_diff_path, json_get_string(ext, PK_diffPath));
                        task_set_null(t, TASK_KEY_changeset_error);
                        json_object *warnings = json_get_array(ext, PK_warnings);
                        if (warnings && json_object_array_length(warnings) > 0)
                                task_set_json(t, TASK_KEY_changeset_warnings, json_object_get(warnings));
                        json_object *risks = json_get_array(ext, PK_changesetRisks);
                        if (risks) task_set_json(t, TASK_KEY_changeset_risks, json_object_get(risks));
                        if (json_get_bool(ext, "hasChanges", false)) {
                                cs = CHANGESET_PENDING;
                                drift_record(t, ext);
                        } else {
                                cs = CHANGESET_ACCEPTED;
                                if (json_get_bool(ext, "overlayRemoved", false)) task_set_null(t, TASK_KEY_overlay_dirs);
                        }
                }
        }
        if (task_kind_info(t->kind)->never_lands && t->rec.changeset_status == CHANGESET_PENDING) {
                cs = CHANGESET_REJECTED;
                if (ext && json_get_bool(ext, "overlayRemoved", false)) task_set_null(t, TASK_KEY_overlay_dirs);
        }
        cooldown_settle_apply(t, res); /* before the settlement's kick */
        settle_done_fn done = TAKE_PTR(t->settle_done);
        done(t, status, cs);
}

void settle_start(Task *t, settle_done_fn done) {
        if (t->settling) return;
        t->settling = true;
        t->settle_done = done;
        int r = job_start_retrying(t->m, settle_job_run, settle_job_done, t);
        if (r < 0) {
                log_error_errno(r, "cannot start settlement job for %s", t->id);
                settle_job_done(t->m, t, NULL, r);
        }
}

