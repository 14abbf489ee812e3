/* The method table and the one dispatcher that replies (methods.h). */

#include <string.h>

#include "api/events.h"
#include "api/handlers.h"
#include "api/methods.h"
#include "api/server.h"
#include "api/stats.h"
#include "api/views.h"
#include "api/wait.h"
#include "core/manager.h"
#include "core/peer.h"
#include "core/store.h"
#include "core/task-table.h"
#include "core/task.h"
#include "macro.h"
#include "string-util.h"

static const Method methods[] = {
        {"system.health", method_health, 0},
        {"task.dispatch", method_dispatch_task, METHOD_STATE},
        {"task.cancel", method_cancel, METHOD_STATE | METHOD_TASK},
        {"task.status", method_status, METHOD_STATE | METHOD_TASK},
        {"task.wait", method_wait, METHOD_STATE | METHOD_TASK},
        {"task.list", method_list, METHOD_STATE},
        {"task.stats", method_stats, METHOD_STATE},
        {"task.result", method_result, METHOD_STATE | METHOD_TASK},
        {"task.tail", method_tail, METHOD_STATE | METHOD_TASK},
        {"task.summary", method_summary, METHOD_STATE | METHOD_TASK},
        {"task.advisor", method_advisor, METHOD_STATE},
        {"task.context", method_context, METHOD_STATE},
        {"task.accept", method_accept, METHOD_STATE | METHOD_TASK},
        {"task.reject", method_reject, METHOD_STATE | METHOD_TASK},
        {"task.output", method_output, METHOD_STATE | METHOD_TASK},
        {"event.subscribe", method_subscribe, METHOD_STATE},
};

const Method *method_find(const char *name) {
        if (!name) return NULL;
        for (size_t i = 0; i < ELEMENTSOF(methods); i++)
                if (streq(methods[i].name, name)) return &methods[i];
        return NULL;
}

const Method *method_table(size_t *ret_n) {
        *ret_n = ELEMENTSOF(methods);
        return methods;
}

static int unknown_task(MethodError *err, const char *id) {
        _cleanup_free_ char *text =
                strdup_printf("error: unknown task id: %s\nhelp: run taskferry list to see valid task ids", id);
        method_error_text(err, E_UNKNOWN_TASK, text ? text : "error: unknown task id");
        return -ENOENT;
}

int method_check_state(Manager *m, MethodError *err) {
        _cleanup_free_ char *reason = NULL;
        int r = store_check_loaded(m, &reason);
        if (r >= 0) return 0;
        return method_fail(err, reason ? reason : "error: could not read persisted task state");
}

int method_lookup_task(Manager *m, Request *r, Task **ret, MethodError *err) {
        const char *id = proto_params_task_id(r->req.method_id, &r->req.p);
        Task *t = id ? manager_find_task(m, id) : NULL;
        if (!t) return unknown_task(err, strempty(id));
        if (!caller_may_see(caller_of(m, r->conn), t)) return unknown_task(err, t->id);
        *ret = t;
        return 0;
}

void method_error_done(MethodError *e) {
        free(e->message);
        free(e->help);
        free(e->text);
        *e = (MethodError) {0};
}

int method_error(MethodError *e, const char *code, const char *message, const char *help) {
        method_error_done(e);
        e->code = code;
        e->message = strdup(strempty(message));
        e->help = strdup(strempty(help));
        return -EIO;
}

int method_error_text(MethodError *e, const char *code, const char *text) {
        method_error_done(e);
        e->code = code;
        e->text = strdup(text ? text : "error: out of memory");
        return -EIO;
}

int method_fail(MethodError *e, const char *text) { return method_error_text(e, E_REQUEST_FAILED, text); }

json_object *method_error_frame(const MethodError *e, const char *id, int rc) {
        if (!e->code) {
                _cleanup_free_ char *text = strdup_printf("error: %s", strerror(rc < 0 ? -rc : EIO));
                return proto_error_from_text(id, E_REQUEST_FAILED, text ? text : "error: request failed");
        }
        if (e->text || (!e->message && !e->help)) return proto_error_from_text(id, e->code, e->text ? e->text : "error: out of memory");
        return proto_error(id, e->code, e->message ? e->message : "", e->help ? e->help : "", NULL);
}

int method_call(Manager *m, Request *r, json_object **ret_result, MethodError *ret_error) {
        *ret_result = NULL;
        const Method *method = method_find(r->req.method);
        if (!method) {
                method_error(ret_error, E_UNKNOWN_METHOD, "unknown method", "");
                return -EOPNOTSUPP;
        }
        int k;
        if ((method->flags & METHOD_STATE) && (k = method_check_state(m, ret_error)) < 0) return k;
        Task *t = NULL;
        if ((method->flags & METHOD_TASK) && (k = method_lookup_task(m, r, &t, ret_error)) < 0) return k;
        k = method->handler(m, r, t, ret_result, ret_error);
        if (k < 0 || k == METHOD_DEFERRED) {
                json_object_put(*ret_result);
                *ret_result = NULL;
        }
        return k;
}

void method_reply(Request *r, int rc, json_object *result, MethodError *error) {
        if (rc < 0) {
                json_object_put(result);
                request_reply_frame(r, method_error_frame(error, r->req.id, rc));
        } else
                request_reply_result(r, result);
        if (error) method_error_done(error);
}

void method_dispatch(Manager *m, Request *r) {
        json_object *result = NULL;
        MethodError err = {0};
        int rc = method_call(m, r, &result, &err);
        if (rc == METHOD_DEFERRED) {
                method_error_done(&err);
                return; /* a wait or a job answers r */
        }
        method_reply(r, rc, result, &err);
}
