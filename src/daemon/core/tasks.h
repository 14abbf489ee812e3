#pragma once
/* The task table (tasks.c): lookup, creation, removal and the protocol's
 * views of tasks (TaskSummary, task.status, task.list). Owns Manager.tasks/
 * n_tasks/cap_tasks and Task.log_has_event. */

#include <json-c/json.h>

#include "core/task.h"

/* tasks.c (spec lifecycle.md §1) */
/* The task with that id, NULL if none (a linear scan of the table). */
Task *manager_find_task(Manager *m, const char *id);
/* Take t out of the table (order kept) and free it: a task that never
 * became durable (a dispatch whose flush failed). t must own no process,
 * socket or waiter. */
void manager_remove_task(Manager *m, Task *t);
/* task.c calls these around a change of t's startedAt / status (task.list's
 * incremental order and counts). */
void manager_task_started_unlink(Task *t);
void manager_task_started_link(Task *t);
void manager_task_count_status(Task *t, TaskStatus old_status);
/* Free the workspace-root cache (shutdown). */
void manager_free_root_cache(Manager *m);
/* A task from its tasks.json record (task_record_from_json), appended to the
 * table; takes ownership of rec. NULL if rec is no task record or on ENOMEM. */
Task *task_new(Manager *m, json_object *rec);
/* A new task whose record holds only its id, appended to the table; the
 * caller adds the other keys in order (task_set_*, task_init_*). NULL on ENOMEM. */
Task *task_create(Manager *m, const char *id);
/* Free t's memory (record, runtime buffers); closes nothing. */
void task_free(Task *t);
/* dst[name of k] = the record's value of k as JSON (null when absent). */
void task_copy_key(json_object *dst, Task *t, TaskKey k);
/* TaskSummary (spec protocol-cli.md §1.7), a new object. */
json_object *task_summary(Task *t);
/* task.status result: summary + logBytesWritten, logLastWriteAt, logHasEvent. */
json_object *task_status_detail(Task *t);

/* task.list result (spec §1.7, lifecycle.md §7.4). visible_to: NULL = every
 * task; else only the task with that id and the tasks it dispatched (a
 * sandboxed caller's view; "" = none). */
json_object *manager_list(Manager *m, const char *directory, const char *visible_to);
