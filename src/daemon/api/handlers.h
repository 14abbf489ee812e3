#pragma once
/* The method handlers, by family (methods.h: a handler returns its result
 * or a MethodError, or METHOD_DEFERRED when a wait or a job answers later).
 * The others are with what they serve: task.wait in wait.h, task.stats in
 * stats.h, task.tail/output/context in views.h, event.subscribe in events.h. */

#include <stdbool.h>
#include <json-c/json.h>

#include "api/methods.h"
#include "core/peer.h"
#include "protocol-params.h"

typedef struct Manager Manager;
typedef struct Request Request;
typedef struct Task Task;

/* handlers-dispatch.c: task.dispatch */
int method_dispatch_task(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err);
/* What task.dispatch and task.advisor share: the policy's checks of p and of
 * who asks (dispatch-policy.h), then the task (lifecycle.h task_new): of kind
 * advisor, or dispatch/nested/job by who asks. 0 with *ret_task and the bind
 * warnings for the reply (*ret_warnings, NULL: none); -EIO with err. */
int dispatch_ask(Manager *m, Caller who, const ProtoDispatchParams *p, bool advisor, Task **ret_task,
                 char ***ret_warnings, MethodError *err);
/* task.dispatch's result: TaskSummary + next (+ warnings). NULL on ENOMEM. */
json_object *dispatch_reply(Task *t, char *const *warnings);

/* handlers-query.c: system.health, task.status, task.list, task.result */
int method_health(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err);
int method_status(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err);
int method_list(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err);
int method_result(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err);

/* handlers-change.c: task.cancel, task.accept, task.reject */
int method_cancel(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err);
int method_accept(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err);
int method_reject(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err);

/* handlers-summary.c: task.summary (the summary itself: summary.h) */
int method_summary(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err);

/* handlers-advisor.c: task.advisor (its sessions and answers: advisor.h) */
int advisor_method_init(Manager *m);
void advisor_method_free(Manager *m);
int method_advisor(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err);
