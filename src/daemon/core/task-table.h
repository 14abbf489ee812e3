#pragma once
/* The task table (task-table.c): every task the daemon knows, in creation
 * order (tasks.json's order). Owns Manager.tasks/n_tasks/cap_tasks,
 * Manager.status_counts and Manager.started_inversions, and Task.m. */

#include <json-c/json.h>

#include "core/task.h"

/* Register the table's key observer, which keeps the counts per status and
 * the startedAt order of the tasks in the table across every write (the
 * first observer of a manager). 0, -ENOMEM. */
int task_table_init(Manager *m);
/* Append t (not in a table yet): counted, t->m = m, the observers told
 * (inserted). 0, -ENOMEM. */
int task_table_add(Manager *m, Task *t);
/* A task from its tasks.json record (task_from_json), appended; takes
 * ownership of rec. NULL if rec is no task record or on ENOMEM. */
Task *task_table_add_json(Manager *m, json_object *rec);
/* Put a task made from its record json (task_from_json; json taken) in
 * old's place in the table, old freed, the new one in *ret; no observer is
 * told (the store's replay of a newer record at load). 0, -ENOENT (old is
 * not in the table), -EINVAL (no task record), -ENOMEM. */
int task_table_replace_json(Manager *m, Task *old, json_object *json, Task **ret);
/* The task with that id, NULL if none (a linear scan of the table). */
Task *manager_find_task(Manager *m, const char *id);
/* Take t out of the table (order kept) and free it, the observers told
 * first (removed): a task that never became durable (a dispatch whose flush
 * failed). t must own no process, socket or waiter. */
void manager_remove_task(Manager *m, Task *t);
