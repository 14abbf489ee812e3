#pragma once
/* The advisor: task.advisor dispatches a task with role "advisor"
 * (sandboxed on an overlay, no socket in its sandbox, no check gate, its
 * changeset always ends "rejected": launch.c and settle.c), waits for it up
 * to timeoutMs (default 45000) and answers with the advisor object
 * (snake_case keys).
 *
 * Advisor sessions: an in-memory map session id → last use (monotonic ms).
 * A sessionId used within TASKFERRY_ADVISOR_SESSION_TTL_MS (default
 * 1800000) is resumed; any other (expired, never seen, lost with a restart)
 * is reported as session_reset:true with previous_session_id, and a fresh
 * session starts. Every session id an answer carries is touched.
 * Beyond the original: a session touched by an answer to a caller inside a
 * task sandbox (peer.h) belongs to that caller's task, and only that task
 * resumes it; a sandboxed caller naming any other session gets a fresh one
 * (session_reset). The user (outside any sandbox) may resume every session. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

typedef struct Manager Manager;
typedef struct Request Request;
typedef struct Task Task;

#define ADVISOR_DEFAULT_TIMEOUT_MS 45000
#define ADVISOR_DEFAULT_SESSION_TTL_MS 1800000
/* sessions kept at most: past it the oldest is forgotten (a forgotten one is
 * reset on its next use, as after a restart) */
#define ADVISOR_SESSIONS_MAX 4096

typedef struct AdvisorSession {
        char *id;
        char *owner;          /* task id of the sandboxed caller it answered, NULL: the user */
        uint64_t last_used_ms;
} AdvisorSession;

typedef struct AdvisorSessions {
        AdvisorSession *v;
        size_t n;
} AdvisorSessions;

typedef struct AdvisorResolved {
        char *session_id;          /* the session to resume, NULL: a fresh one */
        bool reset;                /* a session id was given but is not resumed */
        char *previous_session_id; /* the id given, when reset */
} AdvisorResolved;

/* Resolve a given session id (NULL or "": none) for a caller (owner: its
 * task id when it runs in a sandbox, NULL for the user) at now_ms with ttl_ms.
 * Fresh iff the map has it, now - last use <= ttl, and (owner NULL or the
 * same owner). 0, -ENOMEM. */
int advisor_sessions_resolve(const AdvisorSessions *s, const char *given, const char *owner, uint64_t now_ms,
                             uint64_t ttl_ms, AdvisorResolved *ret);
/* Record a use of id (NULL/"" ignored) by owner at now_ms; past
 * ADVISOR_SESSIONS_MAX entries the least recently used goes. 0, -ENOMEM. */
int advisor_sessions_touch(AdvisorSessions *s, const char *id, const char *owner, uint64_t now_ms);
void advisor_sessions_done(AdvisorSessions *s);
void advisor_resolved_done(AdvisorResolved *r);

/* s with every "taskferry dispatch" replaced by "taskferry advisor"
 * (malloc'd; NULL on ENOMEM or if s is NULL). */
char *advisor_error_text(const char *s);

/* The answer while the task is still queued or running (with a note on how
 * to go on waiting) and the settled one, from the task's id and status, the
 * session, and for a settled task its result (message, tokens, cost) and
 * exit fields. New objects. */
json_object *advisor_active_answer(const char *task_id, const char *status, const char *session_id,
                                   const AdvisorResolved *res);
json_object *advisor_settled_answer(const char *task_id, const char *status, const char *session_id,
                                    const AdvisorResolved *res, const char *message, json_object *tokens,
                                    json_object *cost, json_object *exit_code, json_object *signal,
                                    json_object *spawn_error);

/* Manager.advisor: the sessions of this daemon's lifetime (the parked
 * task.advisor calls are handlers-advisor.c's). 0, -ENOMEM. */
int advisor_init(Manager *m);
void advisor_free(Manager *m);
