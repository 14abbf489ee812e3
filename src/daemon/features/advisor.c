/* The advisor: task.advisor and its sessions (advisor.h). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "features/advisor.h"
#include "core/jobs.h"
#include "core/manager.h"
#include "api/methods.h"
#include "core/peer.h"
#include "api/server.h"
#include "core/task.h"
#include "json-util.h"
#include "logparse.h"
#include "util.h"

typedef struct AdvisorCall AdvisorCall;

typedef struct AdvisorState {
        AdvisorSessions sessions;
        AdvisorCall *calls;
} AdvisorState;

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

/* ---- sessions ---- */

static AdvisorSession *session_find(const AdvisorSessions *s, const char *id) {
        for (size_t i = 0; i < s->n; i++)
                if (streq(s->v[i].id, id)) return &s->v[i];
        return NULL;
}

int advisor_sessions_resolve(const AdvisorSessions *s, const char *given, const char *owner, uint64_t now_ms,
                             uint64_t ttl_ms, AdvisorResolved *ret) {
        *ret = (AdvisorResolved) {0};
        if (isempty(given)) return 0;
        const AdvisorSession *e = session_find(s, given);
        bool fresh = e && now_ms >= e->last_used_ms && now_ms - e->last_used_ms <= ttl_ms &&
                     (!owner || streq_ptr(e->owner, owner));
        if (fresh) {
                ret->session_id = strdup(given);
                return ret->session_id ? 0 : -ENOMEM;
        }
        ret->reset = true;
        ret->previous_session_id = strdup(given);
        return ret->previous_session_id ? 0 : -ENOMEM;
}

int advisor_sessions_touch(AdvisorSessions *s, const char *id, const char *owner, uint64_t now_ms) {
        if (isempty(id)) return 0;
        AdvisorSession *e = session_find(s, id);
        if (e) {
                /* a session the user resumed stays the user's; a sandboxed
                 * task never takes over another owner's session (resolve
                 * refuses it, so it never reaches a touch with it) */
                if (!e->owner || streq_ptr(e->owner, owner)) e->last_used_ms = now_ms;
                return 0;
        }
        _cleanup_free_ char *cid = strdup(id), *cowner = owner ? strdup(owner) : NULL;
        if (!cid || (owner && !cowner)) return -ENOMEM;
        if (s->n >= ADVISOR_SESSIONS_MAX) {
                size_t oldest = 0;
                for (size_t i = 1; i < s->n; i++)
                        if (s->v[i].last_used_ms < s->v[oldest].last_used_ms) oldest = i;
                free(s->v[oldest].id);
                free(s->v[oldest].owner);
                s->v[oldest] = s->v[--s->n];
        } else {
                AdvisorSession *v = realloc(s->v, (s->n + 1) * sizeof *v);
                if (!v) return -ENOMEM;
                s->v = v;
        }
        s->v[s->n++] = (AdvisorSession) {.id = TAKE_PTR(cid), .owner = TAKE_PTR(cowner), .last_used_ms = now_ms};
        return 0;
}

void advisor_sessions_done(AdvisorSessions *s) {
        for (size_t i = 0; i < s->n; i++) {
                free(s->v[i].id);
                free(s->v[i].owner);
        }
        free(s->v);
        *s = (AdvisorSessions) {0};
}

void advisor_resolved_done(AdvisorResolved *r) {
        free(r->session_id);
        free(r->previous_session_id);
        *r = (AdvisorResolved) {0};
}

char *advisor_error_text(const char *s) {
        if (!s) return NULL;
        static const char from[] = "taskferry dispatch", to[] = "taskferry advisor";
        size_t n = 0;
        for (const char *p = s; (p = strstr(p, from)); p += sizeof from - 1) n++;
        char *out = malloc(strlen(s) + n * (sizeof to - 1) + 1), *o = out;
        if (!out) return NULL;
        for (const char *p = s;;) {
                const char *q = strstr(p, from);
                if (!q) {
                        strcpy(o, p);
                        break;
                }
                memcpy(o, p, (size_t) (q - p));
                o += q - p;
                memcpy(o, to, sizeof to - 1);
                o += sizeof to - 1;
                p = q + sizeof from - 1;
        }
        return out;
}

/* ---- answers ---- */

static json_object *answer_head(const char *task_id, const char *status, const char *session_id,
                                const AdvisorResolved *res) {
        json_object *o = json_object_new_object();
        if (!o) return NULL;
        json_add_string(o, "status", status);
        json_add_string(o, "task_id", task_id);
        json_add_string(o, "session_id", session_id);
        json_add_bool(o, "session_reset", res->reset);
        if (res->reset) json_add_string(o, "previous_session_id", res->previous_session_id);
        return o;
}

json_object *advisor_active_answer(const char *task_id, const char *status, const char *session_id,
                                   const AdvisorResolved *res) {
        json_object *o = answer_head(task_id, status, session_id, res);
        _cleanup_free_ char *note =
                session_id ? strdup_printf("still %s; call taskferry wait or taskferry advisor again with session_id "
                                           "\"%s\" to continue",
                                           status, session_id)
                           : strdup_printf("still %s; call taskferry wait with task id \"%s\" to continue (no "
                                           "session_id yet)",
                                           status, task_id);
        json_add_string(o, "note", note);
        return o;
}

json_object *advisor_settled_answer(const char *task_id, const char *status, const char *session_id,
                                    const AdvisorResolved *res, const char *message, json_object *tokens,
                                    json_object *cost, json_object *exit_code, json_object *signal,
                                    json_object *spawn_error) {
        json_object *o = answer_head(task_id, status, session_id, res);
        json_add_string(o, "message", message);
        if (streq(status, "done")) {
                json_add(o, "tokens", json_object_get(tokens));
                json_add(o, "cost", json_object_get(cost));
        } else {
                json_add(o, "exitCode", json_object_get(exit_code));
                json_add(o, "signal", json_object_get(signal));
                json_add(o, "spawnError", json_object_get(spawn_error));
        }
        return o;
}

/* ---- parked calls ---- */

/* res[key] of any type, NULL if absent (a borrowed reference). */
static json_object *json_field(json_object *res, const char *key) {
        json_object *v = NULL;
        return res && json_object_object_get_ex(res, key, &v) ? v : NULL;
}

static AdvisorState *state(Manager *m) { return m->advisor; }

static void call_unlink(AdvisorCall *c) {
        AdvisorState *st = state(c->m);
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
        json_add_string(o, "sessionId", s.session_id);
        json_add_string(o, "message", s.message ? s.message : "");
        json_add(o, "tokens", s.tokens ? json_object_get(s.tokens) : NULL);
        json_add(o, "cost", s.has_cost ? json_new_number(s.cost) : NULL);
        log_summary_done(&s);
        return o;
}

static void answer_job_done(Manager *m, void *userdata, json_object *res, int error) {
        AdvisorCall *c = userdata;
        Task *t = c->t;
        call_unlink(c);
        const char *status = strempty(task_status_to_string(t->rec.status));
        bool active = task_is_active(t) || t->settling;
        if (t->settling) status = "running";
        const char *sid = t->rec.session_id;
        if (res && json_get_string(res, "sessionId")) sid = json_get_string(res, "sessionId");
        json_object *o;
        if (active)
                o = advisor_active_answer(t->id, status, sid, &c->res);
        else {
                _cleanup_json_ json_object *code = task_record_get_json(&t->rec, TASK_KEY_exit_code);
                _cleanup_json_ json_object *sig = task_record_get_json(&t->rec, TASK_KEY_signal);
                _cleanup_json_ json_object *spawn = task_record_get_json(&t->rec, TASK_KEY_spawn_error);
                o = advisor_settled_answer(t->id, status, sid, &c->res, res ? strempty(json_get_string(res, "message")) : "",
                                           res ? json_get_object(res, "tokens") : NULL,
                                           json_field(res, "cost"), code, sig, spawn);
        }
        if (sid) (void) advisor_sessions_touch(&state(m)->sessions, sid, c->owner, now_ms());
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

int advisor_init(Manager *m) {
        m->advisor = calloc(1, sizeof(AdvisorState));
        if (!m->advisor) return -ENOMEM;
        return manager_add_task_observer(m, on_task, m);
}

void advisor_free(Manager *m) {
        AdvisorState *st = state(m);
        if (!st) return;
        while (st->calls) {
                AdvisorCall *c = st->calls;
                call_unlink(c);
                /* jobs_free ran first: no job answers it any more */
                if (c->r) request_free(c->r);
                call_free(c);
        }
        advisor_sessions_done(&st->sessions);
        free(st);
        m->advisor = NULL;
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
        json_object *p = r->req.params;
        Caller who = caller_of(m, r->conn);
        const char *owner = who.sandboxed ? (who.task ? who.task->id : "") : NULL;
        AdvisorCall *c = calloc(1, sizeof *c);
        if (!c) return method_fail(err, "error: out of memory");
        c->m = m;
        if ((owner && !(c->owner = strdup(owner))) ||
            advisor_sessions_resolve(&state(m)->sessions, json_get_string(p, "sessionId"), owner, now_ms(),
                                     m->settings.advisor_session_ttl_ms, &c->res) < 0) {
                call_free(c);
                return method_fail(err, "error: out of memory");
        }
        /* dispatch resumes only the resolved session; a reset starts afresh */
        if (c->res.session_id) json_add_string(p, "sessionId", c->res.session_id);
        else json_object_object_del(p, "sessionId");
        int64_t timeout = ADVISOR_DEFAULT_TIMEOUT_MS;
        json_get_int64(p, "timeoutMs", &timeout);
        json_object_object_del(p, "timeoutMs");

        _cleanup_json_ json_object *summary = NULL;
        Task *t = NULL;
        int k = dispatch_create(m, r, "advisor", &t, &summary, err);
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
        if (!task_is_active(t) && !t->settling) call_answer(c); /* it failed to launch at once */
        else {
                uint64_t now;
                sd_event_now(m->event, CLOCK_MONOTONIC, &now);
                k = sd_event_add_time(m->event, &c->timer, CLOCK_MONOTONIC, now + (uint64_t) timeout * 1000ULL, 0,
                                      call_timeout, c);
                if (k < 0) call_answer(c);
        }
        return METHOD_DEFERRED; /* answer_job_done answers it */
}
