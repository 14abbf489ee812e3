#pragma once
/* The watchdog (watchdog.c): a running task's log, read as it grows, for
 * silence and provider failures. A worker may be silent for no_output_ms
 * until its first JSON line and post_output_ms after it, and must print a
 * JSON line within pre_output_max_ms of the watch however much raw output
 * it prints; a line naming a provider failure (rate limit, payment,
 * authentication) or an error event fails it at once.
 *
 * Two layers:
 *  - WatchState: the watcher over one log file, with no loop and no task
 *    (the unit suite drives it with its own clock). Each tick reads only
 *    what was appended since the last one (at most WATCHDOG_READ_MAX bytes),
 *    so a tick costs O(new bytes), never O(log size).
 *  - the daemon's watchdog: one sd-event timer per running task, every
 *    Settings.watchdog_poll_ms, armed by the lifecycle once the shim reports
 *    the worker started (not during the sandbox's set-up) and at re-adoption
 *    (task_coldplug); stopped at the shim's exit, by cancel and by its own
 *    kill. Owns Task.watchdog. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "logparse.h"

typedef struct Task Task;

/* At most this much of the log's growth is read per tick (the rest on the next) */
#define WATCHDOG_READ_MAX ((size_t) 1 << 20)
/* An unterminated line longer than this is not kept for classification: its
 * bytes count as activity, the line itself is dropped up to its '\n' (a
 * hostile worker cannot make the daemon hold an unbounded carry). */
#define WATCHDOG_LINE_MAX ((size_t) 4 << 20)

/* A carry (unterminated line) longer than this is not classified each tick,
 * only once its line ends: a worker adding a byte a tick to an endless line
 * must not cost a scan of all of it every tick. */
#define WATCHDOG_CARRY_CLASSIFY_MAX ((size_t) 64 << 10)

/* The watchdog's timeouts, all ms, all > 0. */
typedef struct WatchdogLimits {
        uint64_t no_output_ms;      /* TASKFERRY_NO_OUTPUT_TIMEOUT_MS, default 256000 */
        uint64_t post_output_ms;    /* TASKFERRY_POST_OUTPUT_NO_OUTPUT_TIMEOUT_MS, default 400000 */
        uint64_t pre_output_max_ms; /* TASKFERRY_PRE_OUTPUT_MAX_MS, default 1024000 (a constant, not
                                       derived from no_output_ms) */
} WatchdogLimits;

typedef struct WatchState {
        uint64_t bytes_read;    /* offset in the log read so far */
        char *carry;            /* the unterminated last piece (bytes, not NUL-terminated) */
        size_t carry_len;
        bool skipping;          /* inside a line over WATCHDOG_LINE_MAX: dropping up to its '\n' */
        bool output_seen;       /* a complete line parsed as JSON */
        uint64_t armed_at;      /* ms, the caller's monotonic clock */
        uint64_t last_activity; /* ms: the last tick that read a new byte (or armed_at) */
        LogClassifier *cls;
} WatchState;

/* Arm a watcher at now_ms: nothing read, no output seen, the silence
 * measured from now_ms. 0, -ENOMEM. */
int watch_state_init(WatchState *w, uint64_t now_ms);
void watch_state_done(WatchState *w);

/* One tick over the log at path at now_ms: read what was appended,
 * classify its complete lines (and a carry that does not start with '{';
 * logparse.h's classifier, executor prefixes as in executor.h), then the
 * timeouts. Returns 1 with *ret_reason / *ret_detail (malloc'd) when the
 * task must fail: a provider bucket, no_output_timeout_dead_spawn,
 * no_output_timeout_stalled or watchdog_log_read_error (detail = the error
 * text); 0 when it lives on (a missing log is retried next tick); -ENOMEM. */
int watch_tick(WatchState *w, const char *path, const WatchdogLimits *lim, const char *prefix,
               const char *structured_prefix, uint64_t now_ms, char **ret_reason, char **ret_detail);

/* A watchdog's verdict: t must stop, with failureReason reason and
 * failureDetail detail (NULL: none). The watchdog is stopped (freed) before
 * the call. */
typedef void (*watchdog_fire_fn)(Task *t, const char *reason, const char *detail);
/* Start t's watchdog (t is running, t->rec.log_path set); a no-op if one
 * runs. Logs and goes on without one if the timer cannot be added. */
void watchdog_start(Task *t, watchdog_fire_fn fire);
/* Stop and free t's watchdog; a no-op without one. */
void watchdog_stop(Task *t);
