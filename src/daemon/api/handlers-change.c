/* task.cancel, task.accept, task.reject (handlers.h): who may decide
 * (peer.h), then the lifecycle's cancel or the changeset decision
 * (change.h). */

#include <inttypes.h>
#include <stdlib.h>

#include "api/handlers.h"
#include "api/methods.h"
#include "api/server.h"
#include "api/task-views.h"
#include "core/manager.h"
#include "core/peer.h"
#include "core/task.h"
#include "json-util.h"
#include "protocol.h"
#include "protocol-keys.h"
#include "run/change.h"
#include "run/lifecycle.h"
#include "macro.h"

int method_cancel(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err) {
        const ProtoCancelParams *p = &r->req.p.cancel;
        uint64_t grace = p->grace_ms.set ? (uint64_t) p->grace_ms.value : m->settings.cancel_grace_ms;
        _cleanup_free_ char *reason = NULL, *note = NULL;
        int k = caller_may_decide(caller_of(m, r->conn), t, "cancel", &reason);
        if (k >= 0) k = task_cancel(t, grace, &note, &reason);
        if (k < 0) return method_fail(err, reason ? reason : "error: out of memory");
        json_object *o = task_summary(t);
        if (!o) return method_fail(err, "error: out of memory");
        json_add_string(o, PK_note, note);
        *ret = o;
        return 0;
}

/* change.h change_done_fn: answer the request (or drop it at shutdown). */
static void change_answer(void *userdata, int rc, json_object *result, const char *reason) {
        Request *r = userdata;
        if (rc == -ECANCELED) return request_free(r);
        MethodError e = {0};
        if (rc == CHANGE_REFUSED_RISKS) rc = method_error_text(&e, E_CHANGESET_RISKS, reason);
        else if (rc < 0) rc = method_fail(&e, reason ? reason : "error: out of memory");
        method_reply(r, rc, result, &e);
}

static int change(Manager *m, Request *r, Task *t, bool accept, MethodError *err) {
        _cleanup_free_ char *reason = NULL;
        int k = caller_may_decide(caller_of(m, r->conn), t, accept ? "accept" : "reject", &reason);
        ChangeRequest rq = {.accept = accept,
                            .force = accept && r->req.p.accept.force,
                            .allow_config = accept && r->req.p.accept.allow_config};
        if (k >= 0) k = change_start_full(m, t, &rq, change_answer, r, &reason);
        if (k < 0) return method_fail(err, reason ? reason : "error: out of memory");
        return METHOD_DEFERRED; /* change_answer answers it */
}

int method_accept(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err) {
        return change(m, r, t, true, err);
}

int method_reject(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err) {
        return change(m, r, t, false, err);
}
