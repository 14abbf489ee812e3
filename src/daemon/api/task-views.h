#pragma once
/* The protocol's views of tasks (task-views.c): TaskSummary, task.status and
 * task.list. Owns Task.log_has_event/list_row* and Manager.root_cache. */

#include <json-c/json.h>

#include "core/task.h"

/* dst[name of k] = the record's value of k as JSON (null when absent). */
void task_copy_key(json_object *dst, Task *t, TaskKey k);
/* TaskSummary, a new object. */
json_object *task_summary(Task *t);
/* task.status result: summary + logBytesWritten, logLastWriteAt, logHasEvent,
 * and where a queued task stands (scheduler.h). */
json_object *task_status_detail(Task *t);
/* task.list result. visible_to: NULL = every task; else only the task with
 * that id and the tasks it dispatched (a sandboxed caller's view; "" = none). */
json_object *manager_list(Manager *m, const char *directory, const char *visible_to);
/* Free the workspace-root cache (shutdown). */
void manager_free_root_cache(Manager *m);
