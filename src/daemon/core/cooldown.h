#pragma once
/* Provider cooldown (cooldown.c; taskferry's addition, not in the original):
 * when a worker fails rate_limited or payment_required (any executor prefix:
 * pi_rate_limited, ...) and its output said when to retry (a Retry-After
 * header, "retry after 60s", "try again in 1m30s", a reset time), no task of
 * that provider (the model up to its first '/', scheduler.h) launches before
 * then: the scheduler keeps them queued and wakes when it ends.
 *
 * Bounds (the worker is hostile): a cooldown lasts at most
 * COOLDOWN_MAX_MS; it only ever parks the failing task's own provider (the
 * key comes from its record's model, never from its output); a task
 * dispatched from inside a sandbox (dispatchedBy set) parks nothing; a
 * later failure extends an active cooldown, never shortens it. Cooldowns
 * live in the daemon's memory only (a restart forgets them). Off with
 * Settings.provider_cooldown_enabled = false (TASKFERRY_PROVIDER_COOLDOWN=0).
 * Owns Manager.cooldowns/n_cooldowns. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

typedef struct Manager Manager;
typedef struct Task Task;

#define COOLDOWN_MAX_MS (3600ULL * 1000ULL)
/* How much of the end of a log the settlement scans for a retry hint. */
#define COOLDOWN_SCAN_BYTES (256U * 1024U)

typedef struct ProviderCooldown {
        char *provider;       /* provider key */
        uint64_t until_mono;  /* CLOCK_MONOTONIC ms it ends */
        uint64_t until_real;  /* the same as wall-clock epoch ms (what status and list show) */
        char *reason;         /* the failureReason that started it */
        char *task_id;        /* the task whose failure started it */
} ProviderCooldown;

/* failureReason is a rate_limited or payment_required bucket (bare or with
 * an executor prefix). */
bool cooldown_reason_applies(const char *failure_reason);

/* The retry delay that text[0..len) states, in ms from now_real_ms (wall
 * clock, epoch ms): 1 and *ret_ms, 0 if it states none (or a time already
 * past). Case-insensitive forms, first kind found wins, the longest of
 * that kind:
 *   1. retry-after-ms / retry_after_ms / retryAfterMs = N (ms);
 *      retry-after / retry_after / retryAfter / "retry after" followed by
 *      ':', '=', quotes or blanks, then N seconds, a duration with units,
 *      or an HTTP date ("Wed, 21 Oct 2026 07:28:00 GMT");
 *   2. "try again in" / "retry in" + a duration ("20s", "1m30s", "2 minutes",
 *      a bare number is seconds);
 *   3. "reset"/"resets" (also as a header suffix, x-ratelimit-reset-requests)
 *      + optional "at"/"in"/"on", then an ISO-8601 time, epoch seconds or
 *      ms (10 or 13 digits), or a duration.
 * Units: ms, s/sec/second(s), m/min/minute(s), h/hr/hour(s), d/day(s);
 * decimals allowed. No allocation beyond a lowercase copy; -ENOMEM. */
int cooldown_parse_hint(const char *text, size_t len, uint64_t now_real_ms, uint64_t *ret_ms);

/* Scan the last COOLDOWN_SCAN_BYTES of the log at path for the retry hint
 * of its last rate-limit / payment failure: lines the classifier puts in
 * those buckets (logparse.h, with the executor's prefixes), and raw
 * non-JSON lines that are a Retry-After header of their own. The last
 * hint wins. 1 and *ret_ms, 0 if none (missing file too), -errno. Blocking:
 * runs in the settlement job. */
int cooldown_scan_log(const char *path, const char *prefix, const char *structured_prefix, uint64_t now_real_ms,
                      uint64_t *ret_ms);

/* Settlement glue (settle.c, one call each). In the settlement job: if
 * cooldowns are on, the task may park its provider and its failure reason
 * (t's record, else res's "failureReason") applies, scan its log and add
 * "retryAfterMs" to res. On the loop, before the settlement's kick: start
 * or extend its provider's cooldown from res's "retryAfterMs". */
void cooldown_settle_scan(Task *t, json_object *res);
void cooldown_settle_apply(Task *t, json_object *res);

/* Park provider for ms (capped at COOLDOWN_MAX_MS) from now; an active
 * later end is kept. reason and task_id are copied (may be NULL). Kicks
 * nothing. 0, -ENOMEM. */
int cooldown_start(Manager *m, const char *provider, uint64_t ms, const char *reason, const char *task_id);
/* The active cooldown of provider at CLOCK_MONOTONIC ms now, NULL if none. */
const ProviderCooldown *cooldown_find(Manager *m, const char *provider, uint64_t now_mono);
/* The active cooldowns as a new JSON array (maybe empty), oldest first:
 * [{provider, until (ISO), remainingMs, reason, taskId}]; task.list's
 * "cooldowns" and task.stats use it. Drops expired entries. NULL on ENOMEM. */
json_object *cooldown_snapshot(Manager *m);
void cooldowns_free(Manager *m);
