#pragma once
/* journald reports (journal.c): one structured entry per task state
 * change, sent with sd_journal_sendv(3) from a task observer (task.h):
 * every transition, and a new task's first "queued" (creation is no
 * transition), of every kind: the daemon's own summary tasks too, marked
 * TASKFERRY_INTERNAL=1.
 *
 * An entry's fields (journal_task_fields):
 *   MESSAGE_ID=JOURNAL_TASK_STATE_MESSAGE_ID (units/taskferry.catalog explains
 *     it: `journalctl -x`),
 *   MESSAGE="task <id>: <old> → <new>" ("task <id>: queued" for a new task,
 *     "task <id>: changeset <old> → <new>" when only the changeset moved),
 *     with " (exit <n>)" / " (<failureReason>)" when set,
 *   PRIORITY=6 (info), 4 (warning) for a move to crashed or unknown,
 *   SYSLOG_IDENTIFIER=taskferryd,
 *   TASKFERRY_TASK_ID, TASKFERRY_STATUS, TASKFERRY_CHANGESET (its
 *     changesetStatus), TASKFERRY_OLD_STATUS and TASKFERRY_OLD_CHANGESET
 *     (absent for a new task), and when set: TASKFERRY_EXECUTOR
 *     (executorId), TASKFERRY_MODEL, TASKFERRY_UNIT (the task's `unit`),
 *     TASKFERRY_EXIT_CODE, TASKFERRY_SIGNAL, TASKFERRY_FAILURE_REASON,
 *     TASKFERRY_ROLE, TASKFERRY_INTERNAL=1.
 * Never a prompt (nor its preview), a log line, a failure detail or an
 * environment value: the fields above are all there is.
 *
 * A check gate's start and end (task.h's checked observer) is one entry too
 * (journal_check_fields): MESSAGE_ID=JOURNAL_TASK_CHECK_MESSAGE_ID,
 * MESSAGE="task <id>: check gate <checkStatus>" (with " (exit <n>)" once it
 * has one), PRIORITY=6, or 4 for failed, timeout and interrupted,
 * SYSLOG_IDENTIFIER, TASKFERRY_TASK_ID, TASKFERRY_CHECK_STATUS and, when
 * set, TASKFERRY_CHECK_EXIT_CODE. Never the command's output (nor the
 * command: the project file's, not ours to echo).
 *
 * Without a journal (no /run/systemd/journal/socket: containers, CI) the
 * send fails and is ignored, quietly. */

#include <stdbool.h>

typedef struct Manager Manager;
typedef struct Task Task;

/* Also in units/taskferry.catalog (`-- <id>`). */
#define JOURNAL_TASK_STATE_MESSAGE_ID "4dce0313cbcf459bbccb6c78dc414922"

#define JOURNAL_TASK_CHECK_MESSAGE_ID "8b10d456827840208bfa8b7e70c1c8e8"

/* The entry of t's check gate as its record is now. 0, -ENOMEM. */
int journal_check_fields(const Task *t, char ***ret);

/* The entry of t's move from old_status / old_changeset (each < 0: none, a
 * new task) to its current values: a NULL-terminated list of "FIELD=value"
 * strings (the caller frees it with strv_free), in the order above.
 * 0, -ENOMEM. */
int journal_task_fields(const Task *t, int old_status, int old_changeset, char ***ret);

/* Manager.journal, and its observer. Call before coldplug. 0, -ENOMEM. */
int journal_init(Manager *m);
void journal_free(Manager *m);
/* Where the entries go (sd_journal_sendv(3) by default; a unit suite's own
 * to read them; NULL: the default). */
struct iovec;
typedef int (*journal_sendv_fn)(const struct iovec *iov, int n);
void journal_set_sender(Manager *m, journal_sendv_fn send);

