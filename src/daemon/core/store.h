#pragma once
/* The store (store.c): tasks.json, the durable copy of the task table. It
 * loads the records into the table at start (deserialization only: what a
 * loaded task still needs — re-adopting its shim, queueing it again — is the
 * lifecycle's coldplug), and writes the whole table back, debounced after
 * every change and at once where a caller needs it durable. Owns
 * Manager.store and Task.text_*. Records go to and from JSON only through
 * task.h. */

#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>
#include <sys/types.h>
#include <systemd/sd-event.h>
#include <time.h>

typedef struct Manager Manager;
typedef struct Task Task;

typedef struct Store {
        char *load_error;             /* why tasks.json could not be read at start (every state call then
                                       * fails, and the file is never overwritten); NULL: loaded */
        bool dirty;                   /* the table has changes tasks.json lacks */
        sd_event_source *persist_timer;
        /* identity of the tasks.json it wrote last (a flush copies unchanged
         * records' text from it, Task.text_off/text_len) */
        bool written;
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtim;
} Store;

/* Register the store's observer: every transition persists (before the
 * other observers but the table's). 0, -ENOMEM. */
int store_init(Manager *m);
void store_done(Manager *m);
/* Parse tasks.json's text, s[0..len), its top-level array one element at a
 * time, calling fn for each with the element (a new reference fn takes;
 * not necessarily an object): the same grammar and limits as
 * json_parse_strict of the whole text (strict, valid UTF-8, no NUL,
 * nesting depth 64 counting the array), without ever holding more than one
 * element's tree. Pure: the load's reader (manager_load_tasks), callable
 * without a Manager. 0; -EBADMSG if the text is not a JSON array (fn may
 * have seen the elements before the fault), or fn's error (< 0). */
int store_parse_records(const char *s, size_t len, int (*fn)(void *userdata, json_object *e), void *userdata);
/* Load <state>/tasks.json into the table, in file order (the first record of
 * an id wins; records without a string id are skipped). A missing file is an
 * empty store; an unreadable or malformed one sets m->store.load_error and
 * loads nothing. Loaded records are normalized as the original did
 * (summaryOf → internal true, executorId defaults to "opencode"). 0 or
 * -ENOMEM. */
int manager_load_tasks(Manager *m);
/* Did tasks.json load? 0, or -EIO with *reason (the "error: ...\nhelp: ..."
 * text every state call answers with then). */
int store_check_loaded(Manager *m, char **reason);
/* Mark the table dirty and arm the 250 ms debounced flush. */
void task_persist(Task *t);
/* Write tasks.json now if dirty: the whole table, to a temp file in the state
 * dir, fsync'd, renamed over tasks.json, the dir fsync'd (write_file_atomic).
 * 0 once durable (or nothing to do), -EIO after a failed load, else -errno of
 * the write (EROFS, ENOSPC, EACCES, ...); the table stays dirty then. */
int manager_flush(Manager *m);
/* Mark dirty and write now: manager_flush's answer. */
int manager_flush_now(Manager *m);
/* tasks.json's text for the table (json-c's pretty, spaced array of every
 * record, built one record at a time, none copied from an earlier write):
 * *ret NUL-terminated, freed with manager_tasks_json_free. -ENOMEM. */
int manager_tasks_json(Manager *m, char **ret, size_t *ret_len);
void manager_tasks_json_free(char *text, size_t len);
