#pragma once
/* doctor --stats aggregation: one pure function over task rows, used by the
 * daemon's task.stats (stats.c) and by the CLI's fallback for daemons that
 * answer task.stats with UNKNOWN_METHOD (it asks task.list and aggregates
 * the rows itself).
 *
 * rows: a JSON array of objects {id, status, model, startedAt, failureReason}
 * (extra keys ignored; model/failureReason may be null). The caller leaves
 * internal tasks out (the daemon does; task.list rows carry no such flag).
 *
 * Result, keys in this order:
 *   byModel[]        {model, dispatches, done, crashed, cancelled, unknown,
 *                     doneRate, crashRate, dominantFailureReason}; rates are
 *                     fractions over settled (null if settled is 0); sorted by
 *                     dispatches desc, then model asc (strcmp; a missing or
 *                     empty model sorts last and is printed as "")
 *   failureReasons[] {reason, count} over crashed rows with a reason, count
 *                     desc then reason asc (the dominant reason ties the same)
 *   unknownBacklog   {total, tasks: newest 20 {id, model, startedAt}}
 *   computedAt       ISO-8601 of now_ms
 *   statusMix        {overall, last24h, last7d}: {queued, running, done,
 *                     crashed, cancelled, unknown, other, total}; windows are
 *                     startedAt >= now-24h / now-7d
 *   trend            {window:"24h", current:{crashRate, settled},
 *                     previous:{crashRate, settled} (over [now-48h, now-24h)),
 *                     direction: worsening|improving|flat when both settled
 *                     > 0, else unknown}
 * settled = total - queued - running - cancelled - unknown. A row whose
 * startedAt does not parse is in no time window (JavaScript's NaN compares
 * false). Returns a new object, NULL on ENOMEM. */

#include <stdint.h>
#include <json-c/json.h>

json_object *task_stats_compute(json_object *rows, uint64_t now_ms);

/* The CLI's projection of a stats object (what `doctor --stats` prints):
 * byModel[].doneRate/crashRate and
 * trend.current/previous.crashRate become "<rate*100, 1 decimal>%" strings
 * (null stays null); everything else is copied. A new object (NULL on
 * ENOMEM). */
json_object *task_stats_format_rates(json_object *stats);
/* "12.5%" for 0.125 (JavaScript (r*100).toFixed(1) + "%"). buf >= 32. */
char *task_stats_rate_text(double rate, char buf[static 32]);
