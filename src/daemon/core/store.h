#pragma once
/* The store (store.c): the durable copy of the task table, tasks.json (a
 * snapshot in the original's format) plus tasks.journal beside it (every
 * change since, one record each: shared/state-journal.h). It loads the
 * snapshot and replays the journal into the table at start
 * (deserialization only: what a loaded task still needs — re-adopting its
 * shim, queueing it again — is the lifecycle's coldplug). Every change to a
 * task's record (its observers see each one), a task added to the table or
 * taken out of it becomes one journal record; what changed while the loop
 * worked is committed together once it is idle (one fdatasync; within 250
 * ms however busy it stays), or at once where a caller needs it durable. tasks.json is rewritten from memory (a
 * compaction) by every flush a caller asks for while the state is small
 * (64 KiB: it costs what a record does), else only once the journal has
 * grown past a quarter of it (at idle priority, never inside a request);
 * also when load found the
 * journal missing, stale or damaged, when either file was replaced behind
 * the daemon, and at shutdown. Owns Manager.store and Task.store_* /
 * Task.text_*. Records go to and from JSON only through task.h. */

#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>
#include <sys/types.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "state-journal.h"

typedef struct Manager Manager;
typedef struct Task Task;

typedef struct Store {
        char *load_error;             /* why tasks.json could not be read at start (every state call then
                                       * fails, and the file is never overwritten); NULL: loaded */
        bool dirty;                   /* the table has changes neither file holds durably */
        bool ready;                   /* journal and dir_fd are set up (store_init or the load) */
        int dir_fd;                   /* the state directory */
        StateJournal journal;
        bool compact_needed;          /* the next flush must write a snapshot: load found no journal that
                                       * follows tasks.json, or a torn/damaged one */
        bool keep_damaged;            /* that journal had a damaged record: kept as tasks.journal.damaged */
        /* the next flush writes a journal for tasks.json as loaded (no
         * snapshot): load found tasks.json sound but its journal missing,
         * stale, cut, damaged or left as .next; the valid records the load
         * replayed, [reset_from, reset_to) of reset_src, are carried */
        bool reset_needed;
        JournalHeader reset_header;
        const char *reset_src;
        uint64_t reset_from, reset_to;
        size_t reset_records;
        uint64_t reset_last_seq;
        char *journal_note;           /* what load found wrong with the journal (NULL: nothing), for doctor */
        uint64_t snapshot_bytes;      /* tasks.json's size, for the compaction threshold */
        uint64_t compactions;         /* snapshots this daemon wrote */
        Task **pending;               /* tasks whose record changed since the last commit, in order */
        size_t n_pending, cap_pending;
        char **tombstones;            /* ids of durable tasks taken out of the table since */
        size_t n_tombstones;
        bool loading;                 /* manager_load_tasks is filling the table */
        sd_event_source *flush_source;   /* post source: the group commit at the end of a loop iteration */
        sd_event_source *deadline_timer; /* the commit of a change at the latest (the loop stays busy) */
        sd_event_source *retry_timer;    /* a failed commit tried again */
        sd_event_source *compact_source; /* defer source at idle priority: the threshold compaction */
        /* identity of the tasks.json the journal follows (loaded or written
         * last): a commit checks it is still the file there */
        bool snap_known;
        dev_t snap_dev;
        ino_t snap_ino;
        off_t snap_size;
        struct timespec snap_mtim;
        /* identity of the tasks.json it wrote last (a compaction copies
         * unchanged records' text from it, Task.text_off/text_len) */
        bool written;
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtim;
} Store;

/* Register the store's observers: every transition and every write of a
 * record marks the task for the next commit (before the other observers but
 * the table's), as does a task added to the table; one taken out of it gets
 * a tombstone. 0, -ENOMEM. */
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
 * an id wins; records without a string id are skipped), then replay
 * tasks.journal's valid records over it (a task's record replaces it in
 * place, a new id is appended, a tombstone removes). A missing file is an
 * empty store; an unreadable or malformed one sets m->store.load_error and
 * loads nothing (and no journal). A journal that does not follow tasks.json,
 * a torn tail or a damaged record is logged, never fatal: what is valid is
 * replayed, and the first flush writes a snapshot. Nothing is written.
 * Loaded records are normalized as the original did (summaryOf → internal
 * true, executorId defaults to "opencode"). 0 or -ENOMEM. */
int manager_load_tasks(Manager *m);
/* Did tasks.json load? 0, or -EIO with *reason (the "error: ...\nhelp: ..."
 * text every state call answers with then). */
int store_check_loaded(Manager *m, char **reason);
/* Mark t for the commit at the end of this loop iteration. */
void task_persist(Task *t);
/* Make every change so far durable now: one journal record per changed task
 * (and tombstone), written and fdatasync'd once; a snapshot instead where the
 * journal cannot take appends. 0 once durable (or nothing to do), -EIO after
 * a failed load, else -errno of the write (EROFS, ENOSPC, EACCES, ...); the
 * changes stay pending then. */
int manager_flush(Manager *m);
/* The same (every change is pending already; kept for the callers that say
 * "durable before going on"). */
int manager_flush_now(Manager *m);
/* At shutdown: every change durable (manager_flush's answer), then
 * tasks.json whole again where the journal holds records after it (what the
 * original, or any reader of tasks.json alone, sees next); a failure of that
 * is logged (the journal holds the changes). */
int manager_flush_final(Manager *m);
/* Write tasks.json from memory now (a compaction: temp file, fsync, rename,
 * directory fsync, then a journal holding nothing more; state-journal.h) and
 * make every change durable with it. 0, -EIO after a failed load, -errno. */
int manager_compact(Manager *m);
/* What the start's load found wrong with the journal (kept while the daemon
 * runs, after the fresh pair replaced it), one line, or NULL. */
const char *store_journal_note(Manager *m);
/* tasks.json's text for the table (json-c's pretty, spaced array of every
 * record, built one record at a time, none copied from an earlier write):
 * *ret NUL-terminated, freed with manager_tasks_json_free. -ENOMEM. */
int manager_tasks_json(Manager *m, char **ret, size_t *ret_len);
void manager_tasks_json_free(char *text, size_t len);
