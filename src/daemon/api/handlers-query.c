/* system.health, task.status, task.list, task.result (handlers.h): the
 * questions about tasks; task.result reads the log and the patch in a
 * forked job. */

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/handlers.h"
#include "api/methods.h"
#include "api/server.h"
#include "api/task-views.h"
#include "changeset.h"
#include "core/cooldown.h"
#include "core/jobs.h"
#include "core/manager.h"
#include "core/peer.h"
#include "core/task.h"
#include "json-util.h"
#include "logparse.h"
#include "protocol-keys.h"
#include "fileio.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"
#include "utf8.h"

#define NARRATION_PREVIEW_UNITS 2000

/* A completion (a job's or a timer's) that failed. */
static void complete_failed(Request *r, const char *text) {
        MethodError e = {0};
        method_reply(r, method_fail(&e, text), NULL, &e);
}

/* ---- system.health ---- */
int method_health(Manager *m, Request *r, Task *target, json_object **ret, MethodError *err) {
        json_object *o = json_object_new_object();
        json_add_bool(o, PK_healthy, true);
        json_add_int(o, PK_pid, getpid());
        json_add_int(o, PK_version, PROTOCOL_VERSION);
        /* exactly these three (the CLI's health probe and clients compare
         * them): whether the scope limits are enforced is in task.stats
         * (stats.c) */
        *ret = o;
        return 0;
}

/* ---- task.status ---- */
int method_status(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err) {
        *ret = task_status_detail(t);
        return *ret ? 0 : -ENOMEM;
}

/* ---- task.list ---- */
int method_list(Manager *m, Request *r, Task *target, json_object **ret, MethodError *err) {
        Caller who = caller_of(m, r->conn);
        *ret = manager_list(m, r->req.p.list.directory,
                            who.sandboxed ? (who.task ? who.task->id : "") : NULL);
        if (*ret && !who.sandboxed) { /* active provider cooldowns (cooldown.h), only when there are any */
                json_object *cd = cooldown_snapshot(m);
                if (cd && json_object_array_length(cd) > 0) json_add(*ret, PK_cooldowns, cd);
                else json_object_put(cd);
        }
        return *ret ? 0 : -ENOMEM;
}

/* ---- task.result ---- */

static bool fields_include(char *const *fields, const char *name) { return !fields || strv_contains(fields, name); }


typedef struct ResultJob {
        Request *r;
        Task *t;
} ResultJob;

static int64_t file_size(const char *path) {
        struct stat st;
        return stat(path, &st) == 0 ? (int64_t) st.st_size : -1;
}

/* Runs in the forked child: reads the log (the final message, the narration,
 * tokens, cost, the last session id) and the patch. */
static json_object *result_job_run(void *userdata, int *error) {
        ResultJob *rj = userdata;
        Task *t = rj->t;
        char *const *fields = rj->r->req.p.result.fields;
        bool full = rj->r->req.p.result.full;
        log_summary s = {0};
        int r = log_summarize_file(t->rec.log_path, t->rec.session_id, &s);
        if (r < 0 && r != -ENOENT) {
                *error = r;
                return NULL;
        }
        json_object *o = json_object_new_object();
        json_add_string(o, PK_taskId, t->id);
        task_copy_key(o, t, TASK_KEY_status);
        static const TaskKey head[] = {TASK_KEY_exit_code, TASK_KEY_signal, TASK_KEY_spawn_error, TASK_KEY_failure_reason,
                                       TASK_KEY_failure_detail};
        for (size_t i = 0; i < ELEMENTSOF(head); i++) task_copy_key(o, t, head[i]);
        const char *diff_path = t->rec.diff_path;
        /* a patch that alone exceeds the frame budget is never read: the
         * answer could not be sent, and the daemon would hold all of it */
        if (diff_path && fields_include(fields, PK_diff) && file_size(diff_path) > PROTOCOL_MAX_BUFFER_BYTES) {
                json_object_put(o);
                o = json_object_new_object();
                json_add_bool(o, "responseTooLarge", true);
                log_summary_done(&s);
                return o;
        }
        json_object *diff = NULL, *stat = NULL;
        if (diff_path && (fields_include(fields, PK_diff) || fields_include(fields, PK_diffStat))) {
                _cleanup_free_ char *data = NULL;
                size_t len = 0;
                if (read_file(diff_path, (size_t) 1 << 30, &data, &len) >= 0) {
                        _cleanup_free_ char *clean = utf8_sanitize(data, len);
                        diff = clean ? json_object_new_string(clean) : NULL;
                        unsigned files = 0, adds = 0, dels = 0;
                        changeset_numstat(diff_path, &files, &adds, &dels);
                        stat = json_object_new_object();
                        json_add_int(stat, PK_files, files);
                        json_add_int(stat, PK_additions, adds);
                        json_add_int(stat, PK_deletions, dels);
                }
        }
        json_add(o, PK_diff, diff);
        json_add(o, PK_diffStat, stat);
        task_copy_key(o, t, TASK_KEY_changeset_error);
        if (t->rec.changeset_warnings) task_copy_key(o, t, TASK_KEY_changeset_warnings);
        if (t->rec.changeset_risks) task_copy_key(o, t, TASK_KEY_changeset_risks);
        if (t->rec.head_drift_from) {
                task_copy_key(o, t, TASK_KEY_head_drift_from);
                task_copy_key(o, t, TASK_KEY_head_drift_to);
                task_copy_key(o, t, TASK_KEY_head_drift_recovered);
        }
        bool incomplete = t->rec.incomplete;
        if (incomplete) json_add_bool(o, PK_incomplete, true);
        static const TaskKey opt[] = {TASK_KEY_final_marker, TASK_KEY_final_status, TASK_KEY_class_name,
                                      TASK_KEY_parent_task_id, TASK_KEY_project_config_warning};
        for (size_t i = 0; i < ELEMENTSOF(opt); i++)
                if (task_record_is_set(&t->rec, opt[i])) task_copy_key(o, t, opt[i]);
        const char *check = t->rec.check_status;
        if (check && !streq(check, "none")) {
                static const TaskKey ck[] = {TASK_KEY_check_status, TASK_KEY_check_command, TASK_KEY_check_exit_code,
                                             TASK_KEY_check_started_at, TASK_KEY_check_ended_at};
                for (size_t i = 0; i < ELEMENTSOF(ck); i++) task_copy_key(o, t, ck[i]);
                if (t->rec.check_override) json_add_bool(o, PK_checkOverride, true);
                if (fields_include(fields, PK_checkOutputTail)) task_copy_key(o, t, TASK_KEY_check_output_tail);
        }
        json_add_string(o, PK_sessionId, s.session_id ? s.session_id : t->rec.session_id);
        json_add(o, PK_tokens, s.tokens ? json_object_get(s.tokens) : NULL);
        json_add(o, PK_cost, s.has_cost ? json_new_number(s.cost) : NULL);
        json_add_string(o, PK_message, s.message ? s.message : "");
        const char *narr = s.narration ? s.narration : "";
        size_t nlen = strlen(narr), units = utf8_utf16_length(narr, nlen);
        bool truncated = !full && units > NARRATION_PREVIEW_UNITS;
        if (truncated) {
                size_t cut = utf8_prefix_utf16(narr, nlen, NARRATION_PREVIEW_UNITS);
                _cleanup_free_ char *n = strdup_printf("%.*s\xE2\x80\xA6", (int) cut, narr);
                json_add_string(o, PK_narration, n);
        } else
                json_add_string(o, PK_narration, narr);
        json_add_int(o, PK_narrationTotalChars, (int64_t) units);
        json_add_bool(o, PK_narrationTruncated, truncated);
        if (incomplete) {
                _cleanup_free_ char *why = NULL;
                const char *marker = t->rec.final_marker;
                if (marker) {
                        json_object *q = json_object_new_string(marker);
                        why = strdup_printf("(--require-final-marker %s did not match)", json_to_line(q, NULL));
                        json_object_put(q);
                } else
                        why = strdup("(empty message)");
                _cleanup_free_ char *next = strdup_printf(
                        "Task %s exited cleanly but produced no usable final output %s; treat as incomplete", t->id, why);
                json_add_string(o, PK_next, next);
        } else if (truncated) {
                _cleanup_free_ char *next = strdup_printf(
                        "Run taskferry result with full: true on task id \"%s\" to see the complete narration", t->id);
                json_add_string(o, PK_next, next);
        }
        task_copy_key(o, t, TASK_KEY_log_path);
        task_copy_key(o, t, TASK_KEY_output_dir);
        log_summary_done(&s);
        if (!fields) return o;
        json_object *proj = json_object_new_object();
        json_add_string(proj, PK_taskId, t->id);
        task_copy_key(proj, t, TASK_KEY_status);
        for (char *const *fp = fields; *fp; fp++) {
                const char *f = *fp;
                json_object *v = NULL;
                if (json_object_object_get_ex(o, f, &v)) v = json_object_get(v);
                else v = task_record_get_json_by_name(&t->rec, f); /* fields not in the detail shape come from the record */
                json_object_object_add(proj, f, v);
        }
        json_object_put(o);
        return proj;
}

static void result_job_done(Manager *m, void *userdata, json_object *res, int error) {
        ResultJob *rj = userdata;
        Request *r = rj->r;
        free(rj);
        if (!res) {
                _cleanup_free_ char *text = strdup_printf("error: could not read the task log: %s",
                                                          strerror(error < 0 ? -error : EIO));
                return complete_failed(r, text);
        }
        if (json_get_bool(res, "responseTooLarge", false)) {
                /* the same answer connection_send_frame gives a frame over budget */
                _cleanup_free_ char *msg = strdup_printf("daemon response for this request exceeds %d bytes",
                                                         PROTOCOL_MAX_BUFFER_BYTES);
                MethodError e = {0};
                int k = method_error(&e, E_RESPONSE_TOO_LARGE, msg ? msg : "response too large",
                                     "Narrow the request (e.g. pass --directory), or use a method that "
                                     "summarizes server-side if one exists");
                return method_reply(r, k, NULL, &e);
        }
        method_reply(r, 0, json_object_get(res), NULL);
}

int method_result(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err) {
        char *const *fields = r->req.p.result.fields;
        if (fields && r->req.p.result.full && !fields_include(fields, PK_narration))
                return method_fail(err, "error: full requires narration in fields\nhelp: add narration to fields or drop full");
        if (!task_is_settled(t)) {
                const char *status = t->settling ? "running" : strempty(task_status_to_string(t->rec.status));
                json_object *o = json_object_new_object();
                json_add_string(o, PK_taskId, t->id);
                json_add_string(o, PK_status, status);
                _cleanup_free_ char *msg = strdup_printf("task is still %s; poll taskferry status first", status);
                if (!fields) json_add_string(o, PK_message, msg);
                else
                        for (char *const *fp = fields; *fp; fp++) {
                                if (streq(*fp, PK_message)) json_add_string(o, *fp, msg);
                                else json_add_null(o, *fp);
                        }
                return *ret = o, 0;
        }
        ResultJob *rj = calloc(1, sizeof *rj);
        if (!rj) return method_fail(err, "error: out of memory");
        rj->r = r;
        rj->t = t;
        int k = job_start_query(m, result_job_run, result_job_done, rj);
        if (k < 0) {
                free(rj);
                return method_fail(err, "error: cannot start the result job");
        }
        return METHOD_DEFERRED; /* result_job_done answers it */
}

