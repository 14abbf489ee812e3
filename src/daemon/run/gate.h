#pragma once
/* The check gate (gate.c): after a dispatch's changeset is extracted with
 * changes, on a git target whose project file (project-config.h) names a
 * `check`, that command runs over the changeset — `sh -c <check>` through
 * taskferry-shim in the worker's sandbox (launch.h launch_prepare_check), in
 * the task's scope with the task's limits, for at most
 * check_timeout_seconds — and its verdict decides whether accept needs
 * --force. Owns Task.gate and the record's check* fields.
 *
 *   none ──gate_start──▶ running ──exit 0──▶ passed
 *                          │ ├─exit ≠ 0, a signal, a spawn error──▶ failed
 *                          │ └─out of time (SIGTERM, SIGKILL 5 s later)──▶ timeout
 *                          └─the daemon stopped meanwhile──▶ interrupted ──coldplug, overlay still there──▶ running
 *
 * A gate's end is recorded only while the changeset is pending: a reject
 * (which stops the gate) leaves the fields as they were. */

#include <stdbool.h>
#include <stddef.h>
#include <errno.h>

typedef struct Task Task;

typedef enum CheckStatus {
        CHECK_NONE,
        CHECK_RUNNING,
        CHECK_PASSED,
        CHECK_FAILED,
        CHECK_TIMEOUT,
        CHECK_INTERRUPTED,
        _CHECK_STATUS_MAX,
        _CHECK_STATUS_INVALID = -EINVAL,
} CheckStatus;

const char *check_status_to_string(CheckStatus s);
CheckStatus check_status_from_string(const char *s);
/* The record's checkStatus (absent or null: none). */
CheckStatus task_check_status(const Task *t);
/* running, failed, timeout, interrupted: accept needs --force. */
bool check_status_blocks(CheckStatus s);

/* At most this many lines of the check's output are kept as checkOutputTail. */
#define CHECK_TAIL_LINES 40

/* Start t's gate if it has one to run: a task whose changes land (not an
 * advisor), on a git target (preDispatchHead set), with a pending
 * changeset whose overlay is there, and a project file that parses and
 * names a non-empty check (a file that does not parse: its warning becomes
 * projectConfigWarning, and no gate). 1 started (checkStatus running), 0
 * nothing to run; a launch that fails ends the gate at once as failed with
 * checkOutputTail "spawn error: <why>" (still 1). */
int gate_start(Task *t);

/* Is t's gate process running (gate_start's, not yet exited)? */
bool gate_running(const Task *t);

/* Stop t's running gate: SIGTERM to everything in it, SIGKILL 5 s later,
 * and give up waiting 5 s after that. done(t, userdata) runs once it exited
 * (or was given up on). 0: no gate runs (done is not called); 1: done will
 * be called. -ENOMEM. */
int gate_stop(Task *t, void (*done)(Task *t, void *userdata), void *userdata);

/* At daemon start, for a task whose record says checkStatus running: it
 * was interrupted (what still runs of it is killed: a shim recorded as
 * checkGatePid that is still the gate's); when the changeset is pending and
 * its overlay there, the gate runs again. */
void gate_coldplug(Task *t);

/* The daemon stops: drop t's watch (the gate process is left to the next
 * daemon's coldplug); gate_stop callers are not called (their requests go
 * with the daemon: change_jobs_free). */
void gate_free(Task *t);

/* checkOutputTail of a check's output: its last `lines` lines (one trailing
 * "\n" does not count as a line and is not kept; fewer lines: the text
 * unchanged), invalid UTF-8 (the front of a trimmed log may start inside a
 * character) and NUL bytes replaced by U+FFFD. malloc'd; NULL on ENOMEM. */
char *check_output_tail(const char *buf, size_t len, unsigned lines);

/* The text accept answers with for a gate that blocks it (running, or a
 * failed/timeout/interrupted verdict): what ran, how it ended, the tail of
 * its output (control characters shown as \xNN), and the fix-forward
 * dispatch that resumes the worker on top of this changeset. malloc'd;
 * NULL on ENOMEM. */
char *check_refusal_text(const Task *t);
