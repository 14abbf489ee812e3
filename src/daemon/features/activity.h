#pragma once
/* Activity (activity.c): what a task is doing, in one line, for
 * task.summary {mode:"activity"} and the task.activity events of
 * event.subscribe. Owns Task.activity_* and the summary-model check.
 *
 * Snapshot: a log ≤ 96 KiB whole; else its first 48 KiB + "\n" + its last
 * 48 KiB, each decoded as UTF-8 (invalid bytes → U+FFFD) with a trailing
 * U+FFFD trimmed from the head and a leading one from the tail.
 * Narration of a snapshot: text events grouped by messageID (missing →
 * "__unknown_message__", first-seen order), each tool_use of part.type
 * "tool" a line "[tool:<tool>] <input> -> <output>" (input the string or
 * JSON.stringify(input ?? {}); input and output each cut to 500 UTF-16 units
 * + "…[truncated]"; " -> output" only for a non-empty string output),
 * entries joined "\n\n", then the first 4000 code points.
 * Local activity = sanitize(narration || promptPreview || prompt), or
 * "Task <status>" when that is empty. sanitize: ANSI CSI sequences removed,
 * control chars (0–31, 127) → space, whitespace runs → one space, trimmed,
 * ≤ 4000 code points.
 *
 * Refreshes, only while a subscription exists: forced at spawn (queued →
 * running) and when the task ends (a queued cancel too); unforced for each
 * running task on a timer every TASKFERRY_WATCHDOG_POLL_MS, skipped while
 * the log grew < 4096 bytes since the last refresh, or less than
 * TASKFERRY_SUMMARIZER_TIMEOUT_MS (default 360000, 0 allowed) has passed.
 * The cache key is [id, status, watermark, summaryModel, maxWords,
 * includeSummary]: an unchanged key sends nothing new. Internal tasks have
 * no activity events. Each refresh broadcasts one task.activity event whose
 * activityVariants "false" is the local text. With summaries off (no
 * summaries:true subscriber, or TASKFERRY_ACTIVITY_SUMMARIES=0) its "true"
 * is the local text too; with them on, the event carries only the "false"
 * variant and starts the model-backed summary (one at a time per task): a
 * report summary (summary.c, with the prompt fallback) whose result
 * message, sanitized and cut to 4000 code points, becomes a second
 * task.activity event with only the "true" variant {includeSummary:true,
 * activity, outputWatermark}, or {includeSummary:true, summaryFailed:true,
 * summaryError} when the summary cannot start, fails or has not settled
 * within ACTIVITY_SUMMARY_POLL_MS (the summary task itself runs on). Such
 * an event scheduled while the task ran is dropped when its status changed
 * meanwhile: it would describe a task that no longer runs. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "core/task.h"

typedef struct Manager Manager;
typedef struct Request Request;

#define ACTIVITY_SNAPSHOT_MAX (96 * 1024)
#define ACTIVITY_SNAPSHOT_HALF (48 * 1024)
#define ACTIVITY_MAX_CODEPOINTS 4000
#define ACTIVITY_MIN_GROWTH 4096
#define ACTIVITY_MODEL_CACHE_MS (5 * 60 * 1000)
#define ACTIVITY_MODEL_CHECK_TIMEOUT_S 10
#define ACTIVITY_SUMMARY_POLL_MS 45000

/* ---- pure text functions (unit-tested) ---- */
/* The snapshot of a log's bytes (already bounded: callers read it with
 * activity_read_snapshot). malloc'd, NULL on ENOMEM. */
char *activity_snapshot(const char *head, size_t head_len, const char *tail, size_t tail_len);
/* Read the snapshot of the file at path: 0 and *ret (malloc'd; "" for a
 * missing file) and *ret_size (the file's size, the watermark), -errno. */
int activity_read_snapshot(const char *path, char **ret, uint64_t *ret_size);
/* The narration of snapshot text. malloc'd, NULL on ENOMEM. */
char *activity_narration(const char *snapshot);
/* The sanitize of the rules above (ANSI CSI sequences removed, control
 * chars → space, white space collapsed, trimmed, ≤ 4000 code points).
 * malloc'd, NULL on ENOMEM. */
char *activity_sanitize(const char *s);
/* The local activity text of t from its log (or prompt). *ret_watermark =
 * the log's size. malloc'd, NULL on ENOMEM. */
char *activity_local(Task *t, uint64_t *ret_watermark);

/* ---- in the daemon ---- */
/* Arm the refresh machinery (the unforced timer). 0, -ENOMEM. */
int activity_init(Manager *m);
void activity_free(Manager *m);
/* events.c calls it after every status change of t (forced refreshes). */
void activity_task_transition(Task *t, TaskStatus old_status);
/* Refresh t's activity now (forced) or if the throttle allows: broadcast a
 * task.activity event when its cache key changed. */
void activity_refresh(Manager *m, Task *t, bool forced);

/* Is the summary model listed by `opencode models` (exact trimmed line)?
 * Runs it in a forked job (10 s timeout), the answer cached 5 min and
 * concurrent checks coalesced; done(m, userdata, available > 0, model) is
 * called once, maybe before this returns (cached). 0, -errno. */
typedef void (*activity_model_fn)(Manager *m, void *userdata, int available, const char *model);
int activity_model_check(Manager *m, activity_model_fn done, void *userdata);


/* task.summary {mode:"activity"}: {sourceTaskId, sourceStatus, activity,
 * outputWatermark}, a new object; NULL when it cannot be made (ENOMEM). */
json_object *activity_summary_result(Task *t);

/* Where task.activity events go: the subscriptions (events.c registers it).
 * want_summaries: a subscriber asked for summaries (summaries:true);
 * subscribers: how many subscriptions there are; next_sequence: the event
 * sequence shared with task.state; broadcast: send an event (borrowed). */
typedef struct ActivitySink {
        bool (*want_summaries)(Manager *m);
        unsigned (*subscribers)(Manager *m);
        uint64_t (*next_sequence)(Manager *m);
        void (*broadcast)(Manager *m, Task *t, json_object *event);
} ActivitySink;
void activity_set_sink(Manager *m, const ActivitySink *sink);
