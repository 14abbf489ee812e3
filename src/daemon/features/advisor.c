/* The advisor's sessions and answers (advisor.h). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/manager.h"
#include "features/advisor.h"
#include "json-util.h"
#include "protocol-keys.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"


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
        json_add_string(o, PK_status, status);
        json_add_string(o, PK_task_id, task_id);
        json_add_string(o, PK_session_id, session_id);
        json_add_bool(o, PK_session_reset, res->reset);
        if (res->reset) json_add_string(o, PK_previous_session_id, res->previous_session_id);
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
        json_add_string(o, PK_note, note);
        return o;
}

json_object *advisor_settled_answer(const char *task_id, const char *status, const char *session_id,
                                    const AdvisorResolved *res, const char *message, json_object *tokens,
                                    json_object *cost, json_object *exit_code, json_object *signal,
                                    json_object *spawn_error) {
        json_object *o = answer_head(task_id, status, session_id, res);
        json_add_string(o, PK_message, message);
        if (streq(status, "done")) {
                json_add(o, PK_tokens, json_object_get(tokens));
                json_add(o, PK_cost, json_object_get(cost));
        } else {
                json_add(o, PK_exitCode, json_object_get(exit_code));
                json_add(o, PK_signal, json_object_get(signal));
                json_add(o, PK_spawnError, json_object_get(spawn_error));
        }
        return o;
}

int advisor_init(Manager *m) {
        if (m->advisor) return 0;
        m->advisor = calloc(1, sizeof(AdvisorSessions));
        return m->advisor ? 0 : -ENOMEM;
}

void advisor_free(Manager *m) {
        if (!m->advisor) return;
        advisor_sessions_done(m->advisor);
        free(m->advisor);
        m->advisor = NULL;
}
