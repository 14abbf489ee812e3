#pragma once
/* The task state journal (state-journal.c): the append-only companion of
 * <state>/tasks.json. tasks.json is a snapshot of the task table (its format
 * is the original's, untouched); every state change since that snapshot is
 * one record appended to <state>/tasks.journal, made durable in groups (one
 * fdatasync for every record of a commit). The durable state is the snapshot
 * plus the journal's valid prefix; a compaction writes a new snapshot and a
 * new journal that holds only what the snapshot lacks.
 *
 * The journal is text, one record a line:
 *
 *     <kind> <seq> <len> <payload> <crc>\n
 *
 *   kind     H: the header, always the first line and only there; T: a task's
 *            whole record; X: a tombstone (the task was removed)
 *   seq      decimal, 1..2^63; each record's is greater than the one before
 *            it. The header's is the last sequence number the snapshot
 *            holds: a record at or below it is in the snapshot already.
 *   len      decimal byte count of payload
 *   payload  one line (no newline byte): for H the text
 *            "taskferry-state-journal 1 <snapshot bytes> <snapshot crc>" (the
 *            snapshot it follows: tasks.json's size and CRC-32C, 8 hex
 *            digits); for T the record as JSON (as tasks.json holds it, on one
 *            line); for X the removed task's id as a JSON string
 *   crc      8 lowercase hex digits: CRC-32C (Castagnoli) of every byte of the
 *            line before the space in front of it
 *
 * A journal applies only to the snapshot its header names: a tasks.json
 * replaced by anything else (a restore, another program) makes it stale, and
 * it is ignored. Load stops at the first line that is incomplete or fails its
 * checks: at the end of the file that is a torn tail (a crash mid-append),
 * before more lines a damaged record (reported; what follows is not
 * replayed).
 *
 * A compaction (state_journal_compact_*), in this order, each step durable
 * before the next:
 *   1. the snapshot is written to <state>/.tasks-compact.json and fsync'd;
 *   2. the next journal, <state>/.tasks-journal.next: a header naming that
 *      snapshot and the last sequence number it holds, then every record
 *      committed since (appends may go on between begin and finish), fsync'd;
 *   3. .tasks-compact.json is renamed over tasks.json, the directory fsync'd;
 *   4. .tasks-journal.next is renamed over tasks.journal, the directory
 *      fsync'd.
 * A crash before 3 leaves the old pair; between 3 and 4 tasks.json is new and
 * the journal naming it is .tasks-journal.next, which load then takes; after
 * 4 the new pair. Every journal record is kept in one of them.
 *
 * Sizes are bytes; errors -errno. Nothing here knows what a record holds,
 * but state_journal_read_json that a record is a JSON object keyed by "id". */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct json_object;

#define STATE_JOURNAL_FILE "tasks.journal"
#define STATE_JOURNAL_NEXT_FILE ".tasks-journal.next"
#define STATE_JOURNAL_DAMAGED_FILE "tasks.journal.damaged"
#define STATE_SNAPSHOT_FILE "tasks.json"
#define STATE_SNAPSHOT_TMP_FILE ".tasks-compact.json"
#define STATE_JOURNAL_TMP_FILE ".tasks-journal.tmp"
/* the longest line load accepts (a record larger than this is damaged) */
#define STATE_JOURNAL_LINE_MAX (64U << 20)

typedef enum JournalKind {
        JOURNAL_HEADER = 'H',
        JOURNAL_TASK = 'T',
        JOURNAL_TOMBSTONE = 'X',
} JournalKind;

/* How a scan ended. */
typedef enum JournalEnd {
        JOURNAL_END_CLEAN,     /* every byte is a valid line */
        JOURNAL_END_TORN,      /* the last line is incomplete or fails its checks: cut there */
        JOURNAL_END_DAMAGED,   /* a line fails its checks with more after it: the replay stops there */
        JOURNAL_END_NO_HEADER, /* empty, or the first line is no valid header: nothing in it is used */
        _JOURNAL_END_MAX,
        _JOURNAL_END_INVALID = -EINVAL,
} JournalEnd;

const char *journal_end_to_string(JournalEnd e);

/* The steps of an append and of a compaction, for the fault-injection hook. */
typedef enum JournalStep {
        JOURNAL_STEP_APPEND_WRITE,
        JOURNAL_STEP_APPEND_SYNC,
        JOURNAL_STEP_SNAPSHOT_WRITE,
        JOURNAL_STEP_SNAPSHOT_SYNC,
        JOURNAL_STEP_NEXT_WRITE,
        JOURNAL_STEP_NEXT_SYNC,
        JOURNAL_STEP_SNAPSHOT_RENAME,
        JOURNAL_STEP_SNAPSHOT_DIR_SYNC,
        JOURNAL_STEP_JOURNAL_RENAME,
        JOURNAL_STEP_JOURNAL_DIR_SYNC,
        _JOURNAL_STEP_MAX,
        _JOURNAL_STEP_INVALID = -EINVAL,
} JournalStep;

const char *journal_step_to_string(JournalStep s);

/* Tests only: called before each step. A negative return fails the step
 * with that error, as a failed call would (what the step made is cleaned up
 * as after a real error); JOURNAL_FAULT_CRASH stops right there as a crash
 * would, nothing cleaned up (a write step writes half of its bytes first) and
 * -ECANCELED returned; the caller then drops its objects unwritten. 0 or
 * NULL: no fault. */
#define JOURNAL_FAULT_CRASH 1
extern int (*state_journal_fault_hook)(JournalStep step);

/* CRC-32C (Castagnoli, reflected, as iSCSI and ext4 use it) of data,
 * continuing from crc (0 to start). */
uint32_t crc32c(uint32_t crc, const void *data, size_t len);

typedef struct JournalHeader {
        uint64_t base_seq;       /* the last sequence number the snapshot holds */
        uint64_t snapshot_bytes; /* tasks.json's size */
        uint32_t snapshot_crc;   /* its CRC-32C */
} JournalHeader;

typedef struct JournalScan {
        JournalHeader header;
        JournalEnd end;
        size_t header_bytes; /* the header line's */
        size_t valid_bytes; /* the valid prefix: header and records (where a replay stopped) */
        size_t total_bytes;
        size_t n_records;   /* valid records after the header */
        uint64_t last_seq;  /* of the last valid record; the header's base_seq if none */
} JournalScan;

/* One valid record; a negative return stops the scan: -EBADMSG marks the
 * record damaged (the scan ends JOURNAL_END_DAMAGED or _TORN before it), any
 * other error is returned by the scan. payload is not NUL-terminated. */
typedef int (*journal_record_fn)(JournalKind kind, uint64_t seq, const char *payload, size_t len, void *userdata);

/* Scan a journal's text: the header, then each record in order to fn (NULL:
 * only count). 0, or fn's error. */
int journal_scan(const char *text, size_t len, journal_record_fn fn, void *userdata, JournalScan *ret);

/* One record line, appended to *buf (malloc'd, grown; *len and *cap kept). */
int journal_format_line(char **buf, size_t *len, size_t *cap, JournalKind kind, uint64_t seq, const char *payload,
                        size_t payload_len);

/* What state_journal_load found. */
typedef struct JournalLoad {
        bool found;          /* a journal naming this snapshot was read (scan says how far it was valid) */
        bool from_next;      /* it was .tasks-journal.next: a compaction stopped between its renames */
        bool stale;          /* tasks.journal names another snapshot (tasks.json was replaced): ignored */
        size_t stale_bytes;  /* its size then */
        JournalScan scan;
} JournalLoad;

/* Read the journal that follows the snapshot of snapshot_bytes bytes and CRC
 * snapshot_crc in dir_fd (tasks.journal, or .tasks-journal.next where a
 * compaction stopped between its renames) and replay its valid records above
 * the header's base to fn, in order. Nothing is written. The text is read
 * through a mapping released as it is scanned. 0 (also when there is no
 * journal, or only a stale one: ret says so), fn's error or -errno of the
 * read. */
int state_journal_load(int dir_fd, uint64_t snapshot_bytes, uint32_t snapshot_crc, journal_record_fn fn,
                       void *userdata, JournalLoad *ret);

/* The writer of tasks.journal. */
typedef struct StateJournal {
        int dir_fd;          /* the state directory (not owned) */
        int fd;              /* tasks.journal (-1: none open: a compaction must make one) */
        bool broken;         /* a write that failed could not be undone, or a compaction stopped
                              * after tasks.json was replaced: nothing more is appended to this file */
        uint64_t next_seq;   /* the next record's */
        uint64_t base_seq;   /* the header's */
        uint64_t committed;  /* bytes of the file that are durable */
        size_t n_records;    /* committed records after the header */
        char *buf;           /* appended, not yet committed */
        size_t len, cap;
        size_t n_buffered;
} StateJournal;

#define STATE_JOURNAL_INIT {.dir_fd = -1, .fd = -1, .next_seq = 1}

/* Open tasks.journal in dir_fd to append after what load found valid (scan:
 * a JOURNAL_END_CLEAN scan of it). 0, -errno. */
int state_journal_open(StateJournal *j, int dir_fd, const JournalScan *scan);
void state_journal_done(StateJournal *j);
/* Whether appends can go to the open journal (else the next commit must be a
 * compaction). */
bool state_journal_usable(const StateJournal *j);
/* Buffer one record (the next sequence number, in *ret_seq if not NULL);
 * nothing reaches the file before state_journal_commit. 0, -ENOMEM, -E2BIG
 * (longer than a line load accepts: the state needs a snapshot instead). */
int state_journal_append(StateJournal *j, JournalKind kind, const char *payload, size_t len, uint64_t *ret_seq);
/* Write every buffered record and fdatasync once: 0 once they are durable.
 * On failure nothing of them stays in the file (it is cut back to what was
 * durable; if that fails too, the journal is broken), the buffer is dropped
 * and their sequence numbers are given out again: the caller appends them
 * anew. -errno (-EBADF: no usable journal). */
int state_journal_commit(StateJournal *j);
/* Drop what is buffered (the same sequence numbers are given out again). */
void state_journal_discard(StateJournal *j);

/* A compaction in flight. */
typedef struct JournalCompaction {
        int fd;              /* .tasks-compact.json */
        int dir_fd;          /* the state directory (not owned) */
        uint64_t base_seq;   /* the last sequence number the snapshot holds */
        uint64_t from;       /* the journal's committed bytes then: what follows goes to the next journal */
        uint64_t bytes;      /* snapshot bytes written */
        uint32_t crc;
        char *buf;           /* snapshot bytes not yet written */
        size_t len;
        int error;           /* the first failed write */
} JournalCompaction;

#define JOURNAL_COMPACTION_INIT {.fd = -1, .dir_fd = -1}

/* Begin a snapshot of the state as of every committed record (nothing may be
 * buffered: -EBUSY). j need not be usable: with no journal open the snapshot
 * follows the last sequence number given out. 0, -errno. */
int state_journal_compact_begin(StateJournal *j, JournalCompaction *c);
/* Append snapshot text (tasks.json's, whole, across any number of calls).
 * -errno of the first failed write (then every later call fails alike). */
int state_journal_compact_write(JournalCompaction *c, const void *data, size_t len);
/* Steps 1-4 above; j then appends to the new journal. Records committed to j
 * since begin are carried over. Where a step fails, c is aborted; after step
 * 3, j is broken (the next commit must be a compaction again). 0, -errno. */
int state_journal_compact_finish(StateJournal *j, JournalCompaction *c);
/* A journal that follows the snapshot h names and holds the bytes [from,
 * to) of the file src in dir (valid records of a journal that a load
 * replayed: after its header, before where it stopped; from == to: none),
 * n_records of them, the last numbered last_seq, put in place of
 * tasks.journal (temp file .tasks-journal.tmp, fsync, rename, directory
 * fsync); j then appends to it. What a start does where tasks.json is sound
 * but the journal was missing, stale, cut or damaged, or left as .next: no
 * snapshot is written. A stop at any step leaves what the load read. 0,
 * -errno. */
int state_journal_reset(StateJournal *j, const JournalHeader *h, const char *src, uint64_t from, uint64_t to,
                        size_t n_records, uint64_t last_seq);
/* Give up a compaction: its temp file goes. */
void state_journal_compact_abort(JournalCompaction *c);

/* The durable task state in dir_fd as one JSON array of records, what a
 * compaction would write now: tasks.json's records (the first of an id; a
 * missing file is none), each journal record replacing the record of its
 * "id" in place or appended, each tombstone removing it. For tools and tests:
 * it holds the whole state in memory (the daemon loads record by record).
 * 0, -EBADMSG (tasks.json is no JSON array), -errno. */
int state_journal_read_json(int dir_fd, struct json_object **ret);
