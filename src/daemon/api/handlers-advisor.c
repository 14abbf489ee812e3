/* task.advisor (handlers.h): dispatch an advisor task, park the request
 * until it settles or timeoutMs passes, answer with the advisor object
 * (advisor.h builds it). Owns Manager.advisor_calls. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/handlers.h"
#include "api/methods.h"
#include "api/server.h"
#include "core/jobs.h"
#include "core/manager.h"
#include "core/peer.h"
#include "core/task.h"
#include "features/advisor.h"
#include "json-util.h"
#include "logparse.h"
#include "protocol-keys.h"
#include "macro.h"
#include "strv.h"
#include "time-util.h"

typedef struct AdvisorCall AdvisorCall;

/* The parked calls. */
typedef struct AdvisorCalls {
        AdvisorCall *calls;
} AdvisorCalls;

struct AdvisorCall {
        Manager *m;
        Request *r;
        Task *t;
        char *owner;             /* the sandboxed caller's task id, NULL: the user */
        AdvisorResolved res;
        sd_event_source *timer;
        bool answering;          /* its answer job runs */
        AdvisorCall *next, *prev;
};

/* ---- parked calls ---- */

static AdvisorCalls *state(Manager *m) { return m->advisor_calls; }

static void call_unlink(AdvisorCall *c) {
        AdvisorCalls *st = state(c->m);
        if (c->prev) c->prev->next = c->next;
        else if (st->calls == c) st->calls = c->next;
        if (c->next) c->next->prev = c->prev;
        c->next = c->prev = NULL;
}

static void call_free(AdvisorCall *c) {
        if (!c) return;
        c->timer = sd_event_source_disable_unref(c->timer);
        advisor_resolved_done(&c->res);
        free(c->owner);
        free(c);
}

/* Runs in the forked job: the log's session id, message, tokens and cost. */
static json_object *answer_job_run(void *userdata, int *error) {
        AdvisorCall *c = userdata;
        log_summary s = {0};
        int r = log_summarize_file(c->t->rec.log_path, c->t->rec.session_id, &s);
        if (r < 0 && r != -ENOENT) {
                *error = r;
                return NULL;
        }
        json_object *o = json_object_new_object();
        json_add_string(o, PK_sessionId, s.session_id);
        json_add_string(o, PK_message, s.message ? s.message : "");
        json_add(o, PK_tokens, s.tokens ? json_object_get(s.tokens) : NULL);
        json_add(o, PK_cost, s.has_cost ? json_new_number(s.cost) : NULL);
        log_summary_done(&s);
        return o;
}

static void answer_job_done(Manager *m, void *userdata, json_object *res, int error) {
        AdvisorCall *c = userdata;
        Task *t = c->t;
        call_unlink(c);
        const char *status = strempty(task_status_to_string(t->rec.status));
        bool active = !task_is_settled(t);
        if (t->settling) status = "running";
        const char *sid = t->rec.session_id;
        if (res && json_get_string(res, PK_sessionId)) sid = json_get_string(res, PK_sessionId);
        json_object *o;
        if (active)
                o = advisor_active_answer(t->id, status, sid, &c->res);
        else {
                _cleanup_json_ json_object *code = task_record_get_json(&t->rec, TASK_KEY_exit_code);
                _cleanup_json_ json_object *sig = task_record_get_json(&t->rec, TASK_KEY_signal);
                _cleanup_json_ json_object *spawn = task_record_get_json(&t->rec, TASK_KEY_spawn_error);
                o = advisor_settled_answer(t->id, status, sid, &c->res, res ? strempty(json_get_string(res, PK_message)) : "",
                                           res ? json_get_object(res, PK_tokens) : NULL,
                                           json_get(res, PK_cost), code, sig, spawn);
        }
        if (sid && m->advisor) (void) advisor_sessions_touch(m->advisor, sid, c->owner, now_ms());
        method_reply(c->r, o ? 0 : -ENOMEM, o, NULL);
        c->r = NULL;
        call_free(c);
}

static void call_answer(AdvisorCall *c) {
        if (c->answering) return;
        c->answering = true;
        c->timer = sd_event_source_disable_unref(c->timer);
        if (job_start_retrying(c->m, answer_job_run, answer_job_done, c) < 0) answer_job_done(c->m, c, NULL, -EIO);
}

static int call_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        call_answer(userdata);
        return 0;
}

static void on_task(Task *t, TaskStatus old_status, ChangesetStatus old_cs, void *userdata) {
        Manager *m = userdata;
        if (task_is_active(t) || !state(m)) return;
        for (AdvisorCall *c = state(m)->calls, *next; c; c = next) {
                next = c->next;
                if (c->t == t) call_answer(c);
        }
}

int advisor_method_init(Manager *m) {
        if (m->advisor_calls) return 0;
        m->advisor_calls = calloc(1, sizeof(AdvisorCalls));
        if (!m->advisor_calls) return -ENOMEM;
        return manager_add_task_observer(m, on_task, m);
}

void advisor_method_free(Manager *m) {
        AdvisorCalls *st = state(m);
        if (!st) return;
        while (st->calls) {
                AdvisorCall *c = st->calls;
                call_unlink(c);
                /* jobs_free ran first: no job answers it any more */
                if (c->r) request_free(c->r);
                call_free(c);
        }
        free(st);
        m->advisor_calls = NULL;
}

static void rewrite_error(MethodError *err) {
        if (err->text) {
                char *n = advisor_error_text(err->text);
                if (n) free(err->text), err->text = n;
        }
        if (err->message) {
                char *n = advisor_error_text(err->message);
                if (n) free(err->message), err->message = n;
        }
        if (err->help) {
                char *n = advisor_error_text(err->help);
                if (n) free(err->help), err->help = n;
        }
}

int method_advisor(Manager *m, Request *r, Task *target, json_object **ret, MethodError *err) {
        const ProtoAdvisorParams *p = &r->req.p.advisor;
        Caller who = caller_of(m, r->conn);
        const char *owner = who.sandboxed ? (who.task ? who.task->id : "") : NULL;
        AdvisorCall *c = calloc(1, sizeof *c);
        if (!c) return method_fail(err, "error: out of memory");
        c->m = m;
        if (!m->advisor || (owner && !(c->owner = strdup(owner))) ||
            advisor_sessions_resolve(m->advisor, p->session_id, owner, now_ms(), m->settings.advisor_session_ttl_ms,
                                     &c->res) < 0) {
                call_free(c);
                return method_fail(err, "error: out of memory");
        }
        uint64_t timeout = p->timeout_ms.set ? (uint64_t) p->timeout_ms.value : ADVISOR_DEFAULT_TIMEOUT_MS;
        /* the advisor's params as a dispatch's: it resumes only the resolved
         * session (a reset starts afresh) */
        ProtoDispatchParams d = {
                .prompt = p->prompt,
                .directory = p->directory,
                .model = p->model,
                .variant = p->variant,
                .session_id = c->res.session_id,
                .env = p->env,
                .executor = p->executor,
                .class_name = p->class_name,
                .parent_task_id = p->parent_task_id,
        };
        Task *t = NULL;
        _cleanup_strv_free_ char **warnings = NULL;
        int k = dispatch_ask(m, who, &d, true, &t, &warnings, err);
        if (k < 0) {
                rewrite_error(err);
                call_free(c);
                return k;
        }
        c->r = r;
        c->t = t;
        c->next = state(m)->calls;
        if (c->next) c->next->prev = c;
        state(m)->calls = c;
        uint64_t now;
        sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        k = sd_event_add_time(m->event, &c->timer, CLOCK_MONOTONIC, now + timeout * 1000ULL, 0, call_timeout, c);
        if (k < 0) call_answer(c);
        return METHOD_DEFERRED; /* answer_job_done answers it */
}
