/* task.dispatch (handlers.h): the caller's params, checked by the dispatch
 * policy, become a TaskSpec for the lifecycle; the reply follows the
 * scheduler's next tick, so that it says whether the task launched. */

#include <stdlib.h>
#include <string.h>

#include "api/dispatch-policy.h"
#include "api/handlers.h"
#include "api/methods.h"
#include "api/server.h"
#include "api/task-views.h"
#include "core/manager.h"
#include "core/peer.h"
#include "core/scheduler.h"
#include "core/task-table.h"
#include "core/task.h"
#include "executor.h"
#include "json-util.h"
#include "protocol-keys.h"
#include "run/lifecycle.h"
#include "run/network.h"
#include "sandbox-plan.h"
#include "fs-util.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"

/* The newest task that ran session_id (with executor_id, when given). */
static Task *find_session_task(Manager *m, const char *session_id, const char *executor_id) {
        Task *best = NULL;
        for (size_t i = 0; i < m->n_tasks; i++) {
                Task *t = m->tasks[i];
                if (!streq_ptr(t->rec.session_id, session_id)) continue;
                if (executor_id && !streq_ptr(t->rec.executor_id, executor_id)) continue;
                if (!best || strcmp(strempty(t->rec.started_at), strempty(best->rec.started_at)) > 0) best = t;
        }
        return best;
}

/* The top-level task of t's dispatch tree. */
static Task *dispatch_root(Manager *m, Task *t) {
        for (unsigned depth = 0; depth < 256; depth++) {
                const char *by = t->rec.dispatched_by;
                Task *p = by ? manager_find_task(m, by) : NULL;
                if (!p) break;
                t = p;
        }
        return t;
}

static unsigned live_nested_tasks(Manager *m, Task *root) {
        unsigned n = 0;
        for (size_t i = 0; i < m->n_tasks; i++) {
                Task *o = m->tasks[i];
                if (o != root && o->rec.dispatched_by && task_is_active(o) && dispatch_root(m, o) == root) n++;
        }
        return n;
}

static int fail(MethodError *err, int r, const char *reason) {
        if (r == -ENOMEM && !reason) return method_fail(err, "error: out of memory");
        return method_fail(err, reason);
}

int dispatch_ask(Manager *m, Caller who, const ProtoDispatchParams *p, bool advisor, Task **ret_task,
                 char ***ret_warnings, MethodError *err) {
        _cleanup_free_ char *reason = NULL, *directory = NULL;
        int r;
        if (who.task) {
                if (live_nested_tasks(m, dispatch_root(m, who.task)) >= NESTED_TASKS_MAX) {
                        _cleanup_free_ char *help = strdup_printf(
                                "Wait for a nested task to finish; a task and the tasks dispatched from it may have at "
                                "most %d nested tasks queued or running",
                                NESTED_TASKS_MAX);
                        return method_error(err, E_SERVER_BUSY, "this task has too many nested tasks queued or running",
                                            help ? help : "");
                }
                if ((r = dispatch_nested_directory(strempty(who.task->rec.directory), p->directory, &directory, &reason)) < 0 ||
                    (r = dispatch_check_nested_job(p, &reason)) < 0)
                        return fail(err, r, reason);
        }
        DispatchParent parent = {0};
        if (who.task) {
                parent.id = who.task->id;
                (void) task_record_get_int(&who.task->rec, TASK_KEY_memory_max, &parent.memory_max);
                (void) task_record_get_int(&who.task->rec, TASK_KEY_tasks_max, &parent.tasks_max);
        }
        if ((r = dispatch_check_limits(p, who.task ? &parent : NULL, &reason)) < 0) return fail(err, r, reason);
        if (!who.task) directory = realpath(p->directory, NULL);
        if (!directory || !is_dir(directory)) {
                _cleanup_free_ char *text = strdup_printf(
                        "error: directory does not exist: %s\nhelp: Use an existing directory path for --directory",
                        p->directory);
                return method_fail(err, text);
        }
        const char *executor_id = p->executor;
        Task *prior = p->session_id ? find_session_task(m, p->session_id, executor_id) : NULL;
        /* a sandboxed caller inherits nothing from a session it may not see */
        if (prior && !caller_may_see(who, prior)) prior = NULL;
        if (!executor_id) executor_id = prior ? prior->rec.executor_id : m->settings.default_executor;
        const executor *ex = executor_find(strempty(executor_id));
        if (!ex) {
                _cleanup_free_ char *text = strdup_printf("error: unknown executor: %s\nhelp: use one of %s",
                                                          strempty(executor_id), executor_names());
                return method_fail(err, text);
        }
        const char *model = p->model;
        if (!model && prior) model = prior->rec.model;
        if (!model && ex->needs_model) {
                if (p->session_id) {
                        _cleanup_free_ char *text = strdup_printf(
                                "error: no task found for session id \"%s\" to inherit a model from\nhelp: pass --model",
                                p->session_id);
                        return method_fail(err, text);
                }
                return method_fail(err, "error: --model is required\nhelp: pass --model <provider/model>, or use "
                                        "--executor shell for a plain command");
        }
        if ((r = dispatch_check_marker(p->final_marker, who.sandboxed, &reason)) < 0) return fail(err, r, reason);
        _cleanup_strv_free_ char **deny = NULL;
        if (sandbox_deny_list(m->paths.home, NULL, m->settings.sandbox_denylist, &deny) < 0)
                return method_fail(err, "error: out of memory");
        if ((r = dispatch_check_directory(&m->paths, deny, directory, &reason)) < 0) return fail(err, r, reason);
        if (who.sandboxed && (r = dispatch_check_sandboxed(p, &reason)) < 0) return fail(err, r, reason);
        if ((r = dispatch_check_binds(&m->paths, p, directory, &reason)) < 0) return fail(err, r, reason);
        _cleanup_strv_free_ char **warnings = NULL, **loud = NULL;
        if (dispatch_bind_warnings(deny, p, &warnings, &loud) < 0) return method_fail(err, "error: out of memory");
        for (char **w = loud; w && *w; w++) log_warning("%s", *w);

        const char *requested_variant = p->variant;
        if (!requested_variant && prior) requested_variant = prior->rec.variant;
        if (!requested_variant) requested_variant = m->settings.default_variant;
        _cleanup_free_ char *variant = dispatch_resolve_variant(ex->id, requested_variant);

        /* the launch options: rwBind then the deprecated allowedDirs */
        _cleanup_(launch_options_done) LaunchOptions lo = {
                .no_sandbox = p->no_sandbox,
                .no_overlay = p->no_overlay,
                .ro_bind_given = p->ro_bind != NULL,
                .disk_max = p->disk_max.set ? p->disk_max.value : 0,
                .memory_max = p->memory_max.set ? p->memory_max.value : 0,
                .tasks_max = p->tasks_max.set ? p->tasks_max.value : 0,
        };
        for (char *const *b = p->rw_bind; b && *b; b++)
                if (strv_push(&lo.rw_bind, *b) < 0) return method_fail(err, "error: out of memory");
        for (char *const *b = p->allowed_dirs; b && *b; b++)
                if (strv_push(&lo.rw_bind, *b) < 0) return method_fail(err, "error: out of memory");
        if (p->ro_bind && !(lo.ro_bind = strv_copy(p->ro_bind))) return method_fail(err, "error: out of memory");
        if ((r = dispatch_check_sockets(&m->paths, p->allow_sockets, &lo.allow_sockets, &reason)) < 0)
                return fail(err, r, reason);
        for (char **s = lo.allow_sockets; s && *s; s++) {
                _cleanup_free_ char *w = strdup_printf("warning: the host socket %s is bound into the sandbox "
                                                       "(--allow-socket): the worker can use whatever it serves",
                                                       *s);
                if (!w || strv_consume(&warnings, TAKE_PTR(w)) < 0) return method_fail(err, "error: out of memory");
        }

        /* the network (run/network.h): decided once, recorded on the task */
        NetworkRequest nrq = {
                .mode = p->network,
                .directory = directory,
                .allow_hosts = p->allow_hosts,
                .executor_id = ex->id,
                .model = model,
                .caller_env = p->env,
                .unsandboxed = p->no_sandbox || !m->settings.sandbox_enabled,
        };
        _cleanup_json_ json_object *network = NULL;
        _cleanup_free_ char *network_warning = NULL;
        if ((r = network_decide(m, &nrq, who.task, &network, &network_warning, &reason)) < 0) return fail(err, r, reason);
        if (network_warning) {
                _cleanup_free_ char *w = strdup_printf("warning: %s", network_warning);
                if (!w || strv_consume(&warnings, TAKE_PTR(w)) < 0) return method_fail(err, "error: out of memory");
                log_warning("dispatch into %s: %s", directory, network_warning);
        }

        TaskSpec spec = {
                .kind = advisor      ? TASK_KIND_ADVISOR
                        : who.task   ? TASK_KIND_NESTED
                        : p->job     ? TASK_KIND_JOB
                                     : TASK_KIND_DISPATCH,
                .directory = directory,
                .prompt = p->prompt,
                .model = model,
                .executor_id = ex->id,
                .variant = variant,
                .session_id = p->session_id,
                .origin_session_id = p->origin_session_id,
                .final_marker = p->final_marker,
                .class_name = p->class_name,
                .parent_task_id = p->parent_task_id,
                /* the task whose worker dispatched this one (it may cancel or reject it) */
                .dispatched_by = who.task ? who.task->id : NULL,
                /* the timer job it comes from; never a worker's (refused above) */
                .job = p->job,
                .launch = &lo,
                .caller_env = p->env,
                .network = network,
                .network_warning = network_warning,
        };
        r = task_new(m, &spec, ret_task, &reason);
        if (r < 0) return fail(err, r, reason);
        *ret_warnings = TAKE_PTR(warnings);
        return 0;
}

json_object *dispatch_reply(Task *t, char *const *warnings) {
        json_object *res = task_summary(t);
        if (!res) return NULL;
        _cleanup_free_ char *next =
                t->rec.status == TASK_QUEUED
                        ? strdup_printf("Task is queued; run taskferry wait or taskferry status with task id \"%s\" to "
                                        "check when it starts",
                                        t->id)
                        : strdup_printf("Run taskferry wait or taskferry status with task id \"%s\" to check progress",
                                        t->id);
        json_add_string(res, PK_next, next);
        if (warnings && *warnings) {
                json_object *w = json_object_new_array();
                for (char *const *s = warnings; w && *s; s++) json_object_array_add(w, json_object_new_string(*s));
                json_add(res, PK_warnings, w);
        }
        return res;
}

/* A dispatch answered after the scheduler's tick. */
typedef struct DispatchReply {
        Request *r;
        Task *t;
        char **warnings;
} DispatchReply;

static void dispatch_reply_after_tick(Manager *m, void *userdata) {
        DispatchReply *d = userdata;
        json_object *res = dispatch_reply(d->t, d->warnings);
        MethodError e = {0};
        method_reply(d->r, res ? 0 : method_fail(&e, "error: out of memory"), res, &e);
        strv_free(d->warnings);
        free(d);
}

int method_dispatch_task(Manager *m, Request *r, Task *target, json_object **ret, MethodError *err) {
        Task *t = NULL;
        _cleanup_strv_free_ char **warnings = NULL;
        int k = dispatch_ask(m, caller_of(m, r->conn), &r->req.p.dispatch, false, &t, &warnings, err);
        if (k < 0) return k;
        DispatchReply *d = calloc(1, sizeof *d);
        if (d) *d = (DispatchReply) {.r = r, .t = t, .warnings = warnings};
        if (d && scheduler_after_tick(m, dispatch_reply_after_tick, d) >= 0) {
                TAKE_PTR(warnings);
                return METHOD_DEFERRED; /* dispatch_reply_after_tick answers it */
        }
        free(d);
        *ret = dispatch_reply(t, warnings);
        return *ret ? 0 : method_fail(err, "error: out of memory");
}
