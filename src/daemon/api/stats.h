#pragma once
/* task.stats: the doctor --stats object, computed in the daemon (so that no
 * reply ships every row) over its non-internal tasks by task_stats_compute
 * (src/shared/task-stats.h). A caller inside a task sandbox (peer.h) gets the
 * stats of the tasks it may see (its own and those it dispatched), never of
 * the user's other tasks. */

#include <json-c/json.h>

#include "api/methods.h"

/* The rows task_stats_compute takes: {id, status, model, startedAt,
 * directory, failureReason} of every non-internal task visible_to sees
 * (NULL: all; else that task and the tasks it dispatched). NULL on ENOMEM. */
json_object *stats_rows(Manager *m, const char *visible_to);

int method_stats(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err);
