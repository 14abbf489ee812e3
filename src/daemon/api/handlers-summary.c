/* task.summary (handlers.h): the activity mode answers at once (activity.h);
 * the report mode starts a report summary (summary.h) and answers once its
 * task is queued. */

#include <stdlib.h>

#include "api/handlers.h"
#include "api/methods.h"
#include "api/server.h"
#include "core/manager.h"
#include "core/peer.h"
#include "core/task.h"
#include "features/activity.h"
#include "features/summary.h"
#include "json-util.h"
#include "protocol-keys.h"
#include "macro.h"
#include "string-util.h"

/* summary.h summary_done_fn: answer the request. */
static void summary_answer(Manager *m, const SummaryOutcome *o, void *userdata) {
        Request *r = userdata;
        MethodError e = {0};
        if (o->error) return method_reply(r, method_fail(&e, o->error), NULL, &e);
        json_object *res = json_object_new_object();
        if (!res) return method_reply(r, method_fail(&e, "error: out of memory"), NULL, &e);
        if (o->empty) {
                json_add_string(res, PK_sourceTaskId, o->source->id);
                json_add_string(res, PK_sourceStatus, o->source_status);
                json_add_string(res, PK_summary, "no model text observed yet");
                _cleanup_free_ char *help = strdup_printf(
                        "Run taskferry tail with task id \"%s\" after the task emits output", o->source->id);
                json_add_string(res, PK_help, help);
                return method_reply(r, 0, res, NULL);
        }
        Task *t = o->task;
        json_add_string(res, PK_sourceStatus, o->source_status);
        json_add_string(res, PK_capturedAt, o->captured_at);
        json_add_string(res, PK_sourceTaskId, o->source->id);
        json_add(res, PK_sourceLogBytes, json_object_get(o->source_log_bytes));
        json_add(res, PK_summaryInputBytes, json_object_get(o->summary_input_bytes));
        json_object *st = json_object_new_object();
        json_add_string(st, PK_id, t->id);
        json_add_string(st, PK_status, task_status_to_string(t->rec.status));
        json_add_string(st, PK_model, t->rec.model);
        json_add(res, PK_summaryTask, st);
        _cleanup_free_ char *next = strdup_printf(
                "Run taskferry wait with task id \"%s\", then taskferry result with task id \"%s\"", t->id, t->id);
        json_add_string(res, PK_next, next);
        method_reply(r, 0, res, NULL);
}

int method_summary(Manager *m, Request *r, Task *source, json_object **ret, MethodError *err) {
        const ProtoSummaryParams *p = &r->req.p.summary;
        if (streq_ptr(p->mode, "activity")) {
                /* the params parser refused env with this mode */
                *ret = activity_summary_result(source);
                return *ret ? 0 : method_fail(err, "error: activity summary was not refreshed");
        }
        uint64_t max_words = p->max_words.set ? (uint64_t) p->max_words.value : 200;
        /* a worker (peer.h) summarizes only tasks it may see (METHOD_TASK), and
         * holds at most SUMMARY_NESTED_MAX summaries queued or running: each
         * is a task, a job and an `opencode models` run */
        Caller who = caller_of(m, r->conn);
        if (who.sandboxed && who.task && summary_live_for(m, who.task->id) >= SUMMARY_NESTED_MAX)
                return method_error(err, E_SERVER_BUSY, "this task has too many summaries queued or running",
                                    "Wait for one of its summaries to finish, then retry");
        /* a worker's env (LD_PRELOAD, NODE_OPTIONS, XDG_CONFIG_HOME, ...) must
         * not reach the models listing, which runs outside every sandbox, nor
         * the summary task: it gets the daemon's env only */
        SummaryRequest req = {
                .source = source,
                .max_words = max_words,
                .env = who.sandboxed ? NULL : p->env,
                .dispatched_by = who.sandboxed && who.task ? who.task->id : NULL,
        };
        int k = summary_request(m, &req, summary_answer, r);
        if (k == -ENOMEM) return method_fail(err, "error: out of memory");
        if (k < 0) return method_fail(err, "error: cannot start the summary job");
        return METHOD_DEFERRED; /* summary_answer answers it */
}
