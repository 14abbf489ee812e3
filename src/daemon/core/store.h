#pragma once
/* tasks.json (store.c). Owns Manager.dirty/persist_timer/state_load_error. */

typedef struct Manager Manager;
typedef struct Task Task;

/* store.c (spec lifecycle.md §1.4–§1.6) */
/* Load <state>/tasks.json. A missing file is an empty store; an unreadable or
 * malformed one sets m->state_load_error (every state call then fails and the
 * file is never overwritten). Running tasks are re-adopted (task_readopt);
 * queued ones are queued again in file order (the caller kicks the
 * scheduler once it owns the socket);
 * anything else active becomes unknown. 0 or -ENOMEM. */
int manager_load_tasks(Manager *m);
/* Mark the table dirty and arm the 250 ms debounced flush. */
void task_persist(Task *t);
/* Write tasks.json now if dirty: the whole table, to a temp file in the state
 * dir, fsync'd, renamed over tasks.json, the dir fsync'd (write_file_atomic).
 * 0 once durable (or nothing to do), -EIO after a failed load, else -errno of
 * the write (EROFS, ENOSPC, EACCES, ...); the table stays dirty then. */
int manager_flush(Manager *m);
/* tasks.json's text for the table (json-c's pretty, spaced array of every
 * record, built one record at a time, none copied from an earlier write):
 * *ret NUL-terminated, freed with manager_tasks_json_free. -ENOMEM. */
int manager_tasks_json(Manager *m, char **ret, size_t *ret_len);
void manager_tasks_json_free(char *text, size_t len);
