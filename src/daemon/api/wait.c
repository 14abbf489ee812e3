/* Waits: the only owner of parked task.wait requests. A wait parks on its
 * task and its connection, and ends exactly once:
 * woken by the task observer when the task is final and settled, by its
 * timeout (with an output tail from a job when asked), or dropped with its
 * connection. Owns Task.waiters, Connection.waiting and the Request wait_*,
 * next_waiter, conn_next/conn_prev, timer and tail_chars fields. */

#include "core/jobs.h"
#include "core/manager.h"
#include "api/methods.h"
#include "protocol-keys.h"
#include "api/server.h"
#include "core/task.h"
#include "core/task-table.h"
#include "api/task-views.h"
#include "api/wait.h"
#include "json-util.h"
#include "logparse.h"
#include "utf8.h"

static json_object *tail_job_run(void *userdata, int *error) {
        Request *r = userdata;
        Task *t = r->wait_task;
        log_summary s = {0};
        if (!t || log_summarize_file(t->rec.log_path, t->rec.session_id, &s) < 0) return NULL;
        json_object *o = json_object_new_object();
        const char *n = s.narration ? s.narration : "";
        size_t len = strlen(n), units = utf8_utf16_length(n, len);
        size_t want = r->tail_chars;
        const char *start = n;
        if (units > want) {
                /* keep the last `want` UTF-16 units */
                size_t skip_bytes = utf8_prefix_utf16(n, len, units - want);
                start = n + skip_bytes;
        }
        json_add_string(o, PK_outputTail, start);
        json_add_int(o, PK_outputTailTotalChars, (int64_t) units);
        json_add_bool(o, PK_outputTailTruncated, units > want);
        log_summary_done(&s);
        return o;
}

static void tail_job_done(Manager *m, void *userdata, json_object *res, int error) {
        Request *r = userdata;
        Task *t = r->wait_task;
        r->wait_task = NULL;
        json_object *o = t ? task_summary(t) : json_object_new_object();
        json_add_bool(o, PK_timedOut, true);
        if (res && t && t->rec.status == TASK_RUNNING) {
                json_object_object_foreach(res, key, val) json_add(o, key, json_object_get(val));
        }
        method_reply(r, 0, o, NULL);
}

void wait_detach(Request *r) {
        Task *t = r->wait_task;
        if (t) {
                Request **pp = &t->waiters;
                while (*pp && *pp != r) pp = &(*pp)->next_waiter;
                if (*pp) *pp = r->next_waiter;
        }
        Connection *c = r->conn;
        if (c) {
                if (r->conn_prev) r->conn_prev->conn_next = r->conn_next;
                else if (c->waiting == r) c->waiting = r->conn_next;
                if (r->conn_next) r->conn_next->conn_prev = r->conn_prev;
                r->conn_next = r->conn_prev = NULL;
        }
}

static int wait_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Request *r = userdata;
        Task *t = r->wait_task;
        r->timer = sd_event_source_disable_unref(r->timer);
        wait_detach(r);
        if (t && r->tail_chars > 0 && t->rec.status == TASK_RUNNING) {
                if (job_start_query(r->m, tail_job_run, tail_job_done, r) >= 0) return 0;
        }
        r->wait_task = NULL;
        json_object *o = t ? task_summary(t) : json_object_new_object();
        json_add_bool(o, PK_timedOut, true);
        method_reply(r, 0, o, NULL);
        return 0;
}

void wait_park(Request *r, Task *t, int64_t timeout, uint64_t tail_chars) {
        Manager *m = r->m;
        if (!task_is_active(t)) return method_reply(r, 0, task_summary(t), NULL);
        r->tail_chars = tail_chars;
        r->wait_task = t;
        r->next_waiter = t->waiters;
        t->waiters = r;
        Connection *c = r->conn;
        r->conn_prev = NULL;
        r->conn_next = c->waiting;
        if (c->waiting) c->waiting->conn_prev = r;
        c->waiting = r;
        if (timeout >= 0) {
                uint64_t now;
                sd_event_now(m->event, CLOCK_MONOTONIC, &now);
                if (sd_event_add_time(m->event, &r->timer, CLOCK_MONOTONIC, now + (uint64_t) timeout * 1000ULL, 0,
                                      wait_timeout, r) < 0) {
                        wait_detach(r);
                        r->wait_task = NULL;
                        {
                                MethodError e = {0};
                                method_reply(r, method_fail(&e, "error: cannot arm the wait timer"), NULL, &e);
                        }
                }
        }
}

static void wait_wake(Task *t) {
        while (t->waiters) {
                Request *r = t->waiters;
                t->waiters = r->next_waiter;
                r->wait_task = NULL;
                method_reply(r, 0, task_summary(t), NULL);
        }
}


/* The protocol's waiters: the first task observer (task.h). A task.wait
 * returns once its task is final and settled. */
static void waiters_observer(Task *t, TaskStatus old_status, ChangesetStatus old_cs, void *userdata) {
        if (!task_is_active(t) && !t->settling) wait_wake(t);
}


int wait_init(Manager *m) { return manager_add_task_observer(m, waiters_observer, NULL); }

void wait_drop_connection(Connection *c) {
        while (c->waiting) {
                Request *r = c->waiting;
                wait_detach(r);
                request_free(r);
        }
}

void wait_drop_task(Task *t) {
        while (t->waiters) {
                Request *r = t->waiters;
                wait_detach(r);
                request_free(r);
        }
}

int method_wait(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err) {
        const ProtoWaitParams *p = &r->req.p.wait;
        wait_park(r, t, p->timeout_ms.set ? p->timeout_ms.value : -1,
                  p->tail_chars.set ? (uint64_t) p->tail_chars.value : 0);
        return METHOD_DEFERRED; /* wait_park answers it */
}
