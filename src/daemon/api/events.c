/* Subscriptions and events (events.h says the rules). */

#include <stdlib.h>
#include <string.h>

#include "features/activity.h"
#include "api/events.h"
#include "core/manager.h"
#include "api/methods.h"
#include "core/peer.h"
#include "protocol-keys.h"
#include "api/server.h"
#include "core/task.h"
#include "core/task-table.h"
#include "api/task-views.h"
#include "json-util.h"
#include "protocol.h"
#include "id-util.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"
#include "workspace.h"

struct Subscription {
        Manager *m;
        Connection *conn;       /* not ref'd: events_drop_connection forgets us first */
        char id[37];
        bool all;
        char *directory;        /* realpath of the scope (NULL: all) */
        char *root;             /* its workspace root */
        char *origin_session_id;
        bool summaries;
        bool sandboxed;         /* the caller runs inside a task sandbox */
        bool dropped;           /* its connection closed during a broadcast: freed after it */
        char *visible_to;       /* then: its task's id ("" = none: sees nothing) */
        Subscription *next, *prev;
};

typedef struct RootMemo {
        char *dir, *root;
} RootMemo;

struct Events {
        Subscription *subs;
        unsigned n_subs;
        unsigned n_summaries;   /* subscriptions with summaries:true */
        uint64_t sequence;
        RootMemo *roots;
        size_t n_roots;
        unsigned broadcasting;  /* nesting depth of events_broadcast */
        bool sweep;             /* some subscriptions are dropped, not yet freed */
};

/* Task.event_status: the last status emitted for the task, plus one (0: none). */

static void subscription_free(Subscription *s) {
        if (!s) return;
        free(s->directory);
        free(s->root);
        free(s->origin_session_id);
        free(s->visible_to);
        free(s);
}

static void subscription_freep(Subscription **s) {
        subscription_free(*s);
}

static void subscription_unlink(Events *e, Subscription *s) {
        if (s->prev) s->prev->next = s->next;
        else e->subs = s->next;
        if (s->next) s->next->prev = s->prev;
        s->next = s->prev = NULL;
        e->n_subs--;
        if (s->summaries) e->n_summaries--;
}

/* The workspace root of dir (workspace.h), memoized for the daemon's
 * lifetime: a delivery must not run git per event. */
static const char *root_of(Events *e, const char *dir) {
        for (size_t i = 0; i < e->n_roots; i++)
                if (streq(e->roots[i].dir, dir)) return e->roots[i].root;
        char *root = workspace_root(dir);
        if (!root) return NULL;
        RootMemo *n = realloc(e->roots, (e->n_roots + 1) * sizeof *n);
        char *d = strdup(dir);
        if (!n || !d) {
                if (n) e->roots = n;
                free(d);
                free(root);
                return NULL;
        }
        e->roots = n;
        e->roots[e->n_roots++] = (RootMemo) {d, root};
        return root;
}

static void state_observer(Task *t, TaskStatus old_status, ChangesetStatus old_cs, void *userdata);
static void added_observer(Task *t, void *userdata);
static void checked_observer(Task *t, void *userdata);

static bool sink_want_summaries(Manager *m) { return events_have_summary_subscriber(m); }
static unsigned sink_subscribers(Manager *m) { return events_count(m); }
static void sink_broadcast(Manager *m, Task *t, json_object *ev) { (void) events_broadcast(m, t, ev); }
static const ActivitySink activity_sink = {
        .want_summaries = sink_want_summaries,
        .subscribers = sink_subscribers,
        .next_sequence = events_next_sequence,
        .broadcast = sink_broadcast,
};

int events_init(Manager *m) {
        if (m->events) return 0;
        m->events = calloc(1, sizeof *m->events);
        if (!m->events) return -ENOMEM;
        int r = manager_add_observer(
                m, &(TaskObserver) {.added = added_observer, .transitioned = state_observer, .checked = checked_observer});
        if (r >= 0) activity_set_sink(m, &activity_sink);
        if (r < 0) {
                free(m->events);
                m->events = NULL;
        }
        return r;
}

void events_free(Manager *m) {
        Events *e = m->events;
        if (!e) return;
        while (e->subs) {
                Subscription *s = e->subs;
                subscription_unlink(e, s);
                subscription_free(s);
        }
        for (size_t i = 0; i < e->n_roots; i++) {
                free(e->roots[i].dir);
                free(e->roots[i].root);
        }
        free(e->roots);
        free(e);
        m->events = NULL;
}

void events_drop_connection(Connection *c) {
        Events *e = c->m ? c->m->events : NULL;
        if (!e) return;
        for (Subscription *s = e->subs, *next; s; s = next) {
                next = s->next;
                if (s->conn != c || s->dropped) continue;
                if (e->broadcasting) {
                        /* a send of the running broadcast closed c: the loop
                         * may hold s or its neighbours; free after it */
                        s->dropped = true;
                        e->sweep = true;
                        continue;
                }
                subscription_unlink(e, s);
                subscription_free(s);
        }
}

static void sweep_dropped(Events *e) {
        if (e->broadcasting || !e->sweep) return;
        e->sweep = false;
        for (Subscription *s = e->subs, *next; s; s = next) {
                next = s->next;
                if (!s->dropped) continue;
                subscription_unlink(e, s);
                subscription_free(s);
        }
}

uint64_t events_next_sequence(Manager *m) {
        return m->events ? ++m->events->sequence : 0;
}

bool events_have_summary_subscriber(Manager *m) {
        return m->events && m->events->n_summaries > 0;
}

unsigned events_count(Manager *m) {
        return m->events ? m->events->n_subs : 0;
}

json_object *events_state_event(Manager *m, Task *t, int status, int previous) {
        char iso[32];
        format_iso(now_ms(), iso);
        json_object *ev = json_object_new_object();
        if (!ev) return NULL;
        if (json_add_int(ev, PK_sequence, (int64_t) events_next_sequence(m)) < 0 ||
            json_add_string(ev, PK_type, "task.state") < 0 || json_add_string(ev, PK_taskId, t->id) < 0 ||
            json_add_string(ev, PK_directory, t->rec.directory) < 0 ||
            json_add_string(ev, PK_originSessionId, t->rec.origin_session_id) < 0 ||
            json_add_string(ev, PK_status, task_status_to_string(status)) < 0 ||
            json_add_string(ev, PK_previousStatus, previous >= 0 ? task_status_to_string(previous) : NULL) < 0 ||
            json_add_string(ev, PK_occurredAt, iso) < 0 || json_add_null(ev, PK_activity) < 0 ||
            json_add_null(ev, PK_outputWatermark) < 0) {
                json_object_put(ev);
                return NULL;
        }
        return ev;
}

static bool subscription_matches(Events *e, Subscription *s, Task *t, json_object *event) {
        if (s->dropped || s->conn->dead) return false;
        if (s->sandboxed && !(streq(t->id, s->visible_to) || streq_ptr(t->rec.dispatched_by, s->visible_to)))
                return false;
        const char *origin = json_get_string(event, PK_originSessionId);
        if (s->origin_session_id && origin && !streq(s->origin_session_id, origin)) return false;
        if (s->all) return true;
        const char *dir = json_get_string(event, PK_directory);
        if (!dir) return false;
        if (streq(dir, s->directory)) return true;
        const char *root = root_of(e, dir);
        return root && s->root && streq(root, s->root);
}

/* The event a subscriber with summaries `want` gets: a task.activity event's
 * variant merged in (NULL: none for it), else the event itself. */
static json_object *event_for(json_object *event, bool want) {
        json_object *variants = json_get_object(event, PK_activityVariants);
        if (!variants) return json_object_get(event);
        json_object *v = json_get_object(variants, want ? "true" : "false");
        if (!v) return NULL;
        json_object *out = json_object_new_object();
        if (!out) return NULL;
        json_object_object_foreach(event, key, val) {
                if (streq(key, PK_activityVariants)) continue;
                json_add(out, key, json_object_get(val));
        }
        json_object_object_foreach(v, vkey, vval) json_add(out, vkey, json_object_get(vval));
        return out;
}

unsigned events_broadcast(Manager *m, Task *t, json_object *event) {
        Events *e = m->events;
        if (!e || !event) return 0;
        unsigned n = 0;
        json_object *variant_cache[2] = {NULL, NULL};
        e->broadcasting++;
        for (Subscription *s = e->subs, *next; s; s = next) {
                next = s->next;
                if (!subscription_matches(e, s, t, event)) continue;
                json_object **slot = &variant_cache[s->summaries ? 1 : 0];
                if (!*slot) *slot = event_for(event, s->summaries);
                if (!*slot) continue;
                _cleanup_json_ json_object *frame = json_object_new_object();
                if (!frame || json_add_int(frame, PK_version, PROTOCOL_VERSION) < 0 ||
                    json_add_string(frame, PK_type, "event") < 0 || json_add_string(frame, PK_subscriptionId, s->id) < 0 ||
                    json_add(frame, PK_event, json_object_get(*slot)) < 0)
                        continue;
                /* may close the connection (over its budget): its
                 * subscriptions are only marked dropped until the loop ends */
                int k = connection_send_event(s->conn, frame);
                if (k == 1 && !s->dropped) {
                        /* dropped for a subscriber that does not keep up: its
                         * stream has a gap, so it ends here (told by the
                         * drop notice); the connection lives on */
                        s->dropped = true;
                        e->sweep = true;
                }
                if (k >= 0) n++;
        }
        e->broadcasting--;
        sweep_dropped(e);
        json_object_put(variant_cache[0]);
        json_object_put(variant_cache[1]);
        return n;
}

/* Emit t's task.state if its status differs from the last one emitted. */
static void emit_state(Manager *m, Task *t, int passed_previous) {
        if (task_kind_info(t->kind)->internal) return;
        int last = (int) t->event_status - 1;
        TaskStatus now = t->rec.status;
        if (last == (int) now) return;
        int previous = last >= 0 ? last : passed_previous;
        t->event_status = (uint8_t) (now + 1);
        _cleanup_json_ json_object *ev = events_state_event(m, t, now, previous);
        events_broadcast(m, t, ev);
}

static void state_observer(Task *t, TaskStatus old_status, ChangesetStatus old_cs, void *userdata) {
        Manager *m = t->m;
        if (t->rec.status == old_status) return; /* a changeset-only change */
        emit_state(m, t, old_status);
        activity_task_transition(t, old_status);
}

/* The check gate moved: a task.check event {sequence, type, taskId,
 * directory, originSessionId, checkStatus, checkExitCode, occurredAt}. */
static void checked_observer(Task *t, void *userdata) {
        Manager *m = t->m;
        if (task_kind_info(t->kind)->internal) return;
        char iso[32];
        format_iso(now_ms(), iso);
        _cleanup_json_ json_object *ev = json_object_new_object();
        if (!ev || json_add_int(ev, PK_sequence, (int64_t) events_next_sequence(m)) < 0 ||
            json_add_string(ev, PK_type, "task.check") < 0 || json_add_string(ev, PK_taskId, t->id) < 0 ||
            json_add_string(ev, PK_directory, t->rec.directory) < 0 ||
            json_add_string(ev, PK_originSessionId, t->rec.origin_session_id) < 0 ||
            json_add_string(ev, PK_checkStatus, t->rec.check_status) < 0 ||
            json_add(ev, PK_checkExitCode, task_record_get_json(&t->rec, TASK_KEY_check_exit_code)) < 0 ||
            json_add_string(ev, PK_occurredAt, iso) < 0)
                return;
        events_broadcast(m, t, ev);
}

/* a new task's first status: its task.state with previousStatus null */
static void added_observer(Task *t, void *userdata) { emit_state(t->m, t, -1); }

/* ---- event.subscribe ---- */

static int subscribe_fail(MethodError *err, const char *fmt, const char *arg) {
        _cleanup_free_ char *text = strdup_printf(fmt, arg);
        return method_fail(err, text ? text : "error: out of memory");
}

/* Register r's subscription (params already checked) and answer it. */
static int subscribe_register(Manager *m, Request *r, json_object **ret, MethodError *err) {
        Events *e = m->events;
        if (!e) return method_fail(err, "error: events are not available");
        const ProtoSubscribeParams *p = &r->req.p.subscribe;
        Connection *c = r->conn;
        if (!c || c->dead) return -ECONNRESET;
        unsigned on_conn = 0, on_task = 0, on_user = 0;
        for (Subscription *s = e->subs; s; s = s->next) {
                if (s->dropped) continue;
                if (s->conn == c) on_conn++;
                if (c->origin && s->conn->origin == c->origin) on_task++;
                if (!s->conn->origin) on_user++;
        }
        if (c->origin && on_task >= EVENTS_MAX_PER_TASK) {
                _cleanup_free_ char *text = strdup_printf(
                        "error: this task's socket already holds %d subscriptions\nhelp: subscriptions live until their "
                        "connection closes; close one first",
                        EVENTS_MAX_PER_TASK);
                return method_fail(err, text ? text : "error: too many subscriptions");
        }
        if (on_conn >= EVENTS_MAX_PER_CONNECTION) {
                _cleanup_free_ char *text =
                        strdup_printf("error: this connection already holds %d subscriptions\nhelp: subscriptions live until "
                                      "the connection closes; subscribe once per connection with a wider scope (all or "
                                      "directory)",
                                      EVENTS_MAX_PER_CONNECTION);
                return method_fail(err, text ? text : "error: too many subscriptions");
        }
        if (!c->origin && on_user >= EVENTS_MAX_SUBSCRIPTIONS)
                return method_fail(err, "error: the daemon holds too many subscriptions\nhelp: close idle `taskferry "
                                        "watch` processes, then retry");

        Caller who = caller_of(m, c);
        bool summaries = p->summaries;
        _cleanup_(subscription_freep) Subscription *s = calloc(1, sizeof *s);
        if (!s) return -ENOMEM;
        s->m = m;
        s->conn = c;
        s->summaries = summaries;
        s->sandboxed = who.sandboxed;
        if (who.sandboxed) {
                s->visible_to = strdup(who.task ? who.task->id : "");
                if (!s->visible_to) return -ENOMEM;
        }
        if (p->origin_session_id && !(s->origin_session_id = strdup(p->origin_session_id))) return -ENOMEM;

        /* precedence: all > directory > taskId */
        const char *dir = p->directory;
        const char *task_id = p->task_id;
        if (p->all)
                s->all = true;
        else if (dir) {
                s->directory = caller_may_name_directory(who, dir) ? realpath(dir, NULL) : NULL;
                if (who.sandboxed && (!s->directory || !caller_may_name_directory(who, s->directory)))
                        /* the same answer whatever exists on the host (peer.h) */
                        return subscribe_fail(err,
                                              "error: a task running in a sandbox can subscribe only to its own "
                                              "directory %s or an existing directory under it\nhelp: subscribe with "
                                              "taskId or all: true (both show only its own tasks)",
                                              who.task ? strempty(who.task->rec.directory) : "");
                if (!s->directory)
                        return subscribe_fail(err,
                                              "error: directory does not exist: %s\nhelp: subscribe with an existing "
                                              "directory, or with all: true",
                                              dir);
        } else if (task_id) {
                Task *t = NULL;
                int k = method_lookup_task(m, r, &t, err);
                if (k < 0) return k;
                if (!t->rec.directory) return method_fail(err, "error: the task has no directory");
                s->directory = strdup(t->rec.directory);
                if (!s->directory) return -ENOMEM;
        } else
                return method_error(err, E_INVALID_PARAMS, "invalid params for event.subscribe",
                                    "Check the parameter names and types for event.subscribe");
        if (s->directory) {
                const char *root = root_of(e, s->directory);
                if (root && !(s->root = strdup(root))) return -ENOMEM;
        }
        int k = uuid4(s->id);
        if (k < 0) return k;
        json_object *res = json_object_new_object();
        if (!res || json_add_string(res, PK_subscriptionId, s->id) < 0) {
                json_object_put(res);
                return -ENOMEM;
        }
        /* registered before the response is written: no event that follows
         * the subscribe's answer is missed */
        s->next = e->subs;
        if (e->subs) e->subs->prev = s;
        e->subs = s;
        e->n_subs++;
        if (s->summaries) e->n_summaries++;
        TAKE_PTR(s);
        *ret = res;
        return 0;
}

static void subscribe_model_checked(Manager *m, void *userdata, int available, const char *model) {
        Request *r = userdata;
        json_object *res = NULL;
        MethodError err = {0};
        int k;
        if (available > 0)
                k = subscribe_register(m, r, &res, &err);
        else {
                _cleanup_free_ char *text = strdup_printf("error: summary model is unavailable: %s\nhelp: run `opencode "
                                                          "models` to see the models OpenCode lists, and set "
                                                          "TASKFERRY_SUMMARY_MODEL to one of them",
                                                          model);
                k = method_fail(&err, text ? text : "error: summary model is unavailable");
        }
        if (k == -ECONNRESET) {
                method_error_done(&err);
                request_free(r);
                return;
        }
        method_reply(r, k, res, &err);
}

int method_subscribe(Manager *m, Request *r, Task *unused, json_object **ret, MethodError *err) {
        if (r->req.p.subscribe.summaries) {
                Caller who = caller_of(m, r->conn);
                if (who.sandboxed)
                        return method_fail(err, "error: a task running in a sandbox cannot subscribe with summaries\n"
                                                "help: model-backed summaries spend model calls; subscribe without "
                                                "summaries, or run taskferry watch --summaries from outside the sandbox");
                /* the summary model must be listed by `opencode models` first:
                 * a subscription for summaries no model can write fails now */
                int k = activity_model_check(m, subscribe_model_checked, r);
                if (k < 0) return method_fail(err, "error: cannot check the summary model\nhelp: retry in a moment");
                return METHOD_DEFERRED;
        }
        return subscribe_register(m, r, ret, err);
}
