#pragma once
/* Reading canonical NDJSON task logs: result parsing, failure
 * classification and boot-failure detection.
 * These read whole files and must run off the daemon's event loop (in a
 * forked job), except the per-line classifier. */

#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>

typedef struct log_summary {
        char *session_id;        /* last truthy top-level "sessionID", else the initial one, else NULL */
        json_object *tokens;     /* summed step_finish part.tokens (tokens_add; at most 64 members) or NULL */
        bool has_cost;
        double cost;             /* summed part.cost (valid if has_cost) */
        char *message;           /* texts of the final message (the last step_finish
                                    "stop"'s messageID, else the last text's), joined
                                    without separator; "" if none */
        char *narration;         /* all messages' texts joined with "\n\n" */
        bool has_stop;           /* a step_finish with reason "stop" exists */
        bool has_json_line;      /* any line parsed as JSON */
} log_summary;

/* Parse the whole log at path. A missing file yields an empty summary
 * (message and narration ""). initial_session_id may be NULL.
 * -ENOMEM, -EIO and other read errors (not -ENOENT). */
int log_summarize_file(const char *path, const char *initial_session_id, log_summary *ret);
void log_summary_done(log_summary *s);
/* Whether the log readers (summary, classifier, boot failure) may settle a line
 * with json_scan, without json-c (the default:
 * yes). Tests turn it off to compare the fast paths with json-c. */
void log_summarize_use_fast_paths(bool on);

/* Classify one log line (the buckets payment_required, then
 * authentication_failed, then rate_limited; beyond the original's patterns,
 * "incorrect api key", "authentication_error" and JSON
 * "statusCode":401 are authentication failures; a non-JSON line is matched
 * and reported without terminal escape sequences; a bucketed JSON error
 * without a top-level message reports error.data.message when it has one,
 * not the serialized event). prefix is the executor's
 * failure_prefix (NULL → bare bucket names), structured_prefix its
 * structured error prefix. On a match returns 1 and sets *ret_reason and
 * *ret_detail (malloc'd, detail capped: > 500 UTF-16 units → first 499 + "…");
 * returns 0 when the line is not a failure. -ENOMEM. */
int log_classify_line(const char *line, size_t len, const char *prefix, const char *structured_prefix,
                      char **ret_reason, char **ret_detail);
/* The same classifier with its compiled patterns and JSON tokener kept
 * between lines, for a reader that classifies a log as it grows (the daemon's
 * watchdog). log_classifier_new: 0, -ENOMEM.
 * log_classifier_line: like log_classify_line; *ret_json (may be NULL) says
 * whether the line parsed as JSON ("parseable", which ends the pre-output
 * phase). Patterns are compiled on first need. */
typedef struct LogClassifier LogClassifier;
int log_classifier_new(LogClassifier **ret);
LogClassifier *log_classifier_free(LogClassifier *lc); /* NULL */
int log_classifier_line(LogClassifier *lc, const char *line, size_t len, const char *prefix,
                        const char *structured_prefix, bool *ret_json, char **ret_reason, char **ret_detail);
/* Classify every line of the log (used at settlement, when the task has no
 * failure reason yet): the first matching line wins.
 * Returns 1/0 like log_classify_line. Missing file → 0. */
int log_classify_file(const char *path, const char *prefix, const char *structured_prefix,
                      char **ret_reason, char **ret_detail);
/* Boot-failure detail (asked at settlement for a worker that crashed with
 * a nonzero exit code and no failure reason): if no line of the log parses
 * as JSON, take the last 64 KiB (dropping the first, partial line if the
 * file is larger), skip blank lines, and return 1 with *ret_detail = the
 * last line
 * matching /^error\b[:\s]/i after any leading terminal escape sequences,
 * else the last line naming an errno (EROFS, ENOENT, "Read-only file
 * system", ...; not the runtime's banner that OpenCode prints last), else
 * the last non-blank line — escape sequences removed, capped. Returns 0 when
 * the log has a JSON line or no candidate line. */
int log_boot_failure(const char *path, char **ret_detail);
/* Cap a failure detail: > 500 UTF-16 units → first 499 units + "…".
 * Returns a malloc'd copy (NULL on -ENOMEM or when s is NULL). */
char *failure_detail_cap(const char *s);
/* True if s[0..len) is empty or only whitespace as JavaScript's String#trim
 * sees it (ASCII \t\n\v\f\r and space, U+00A0, U+1680, U+2000–U+200A,
 * U+2028, U+2029, U+202F, U+205F, U+3000, U+FEFF). The pi and OpenCode
 * normalizers drop such stdout lines; the boot-failure reader skips them. */
bool log_line_is_blank(const char *s, size_t len);

/* The narration of a piece of a log that the activity text and the report
 * summaries are made from: data[0..len) split on '\n', lines that
 * do not parse as JSON skipped; `text` events' part.text grouped by
 * part.messageID (missing → "__unknown_message__") at the place the id was
 * first seen, joined without separator; each `tool_use` event with
 * part.type "tool" adds "[tool:<tool or unknown>] <input>[ -> <output>]"
 * where input is part.state.input if a string, else its JSON (or "{}"), and
 * input and output are each cut to 500 UTF-16 units + "…[truncated]"; the
 * output part only for a non-empty string output. Entries joined with
 * "\n\n". Invalid UTF-8 is replaced (utf8_sanitize) first. No length cap:
 * the caller keeps what it needs. *ret is malloc'd ("" for nothing). -ENOMEM. */
int log_narration_parse(const char *data, size_t len, char **ret);
/* How the two narrations of the original differ: the name a tool_use
 * without a tool gets, and whether an empty name counts as none. The
 * summaries' ("unknown", empty too) is log_narration_parse's; the activity
 * text's ("undefined", only a missing name) is log_narration_activity. */
typedef struct LogNarrationStyle {
        const char *unnamed_tool;
        bool empty_tool_is_unnamed;
} LogNarrationStyle;
extern const LogNarrationStyle log_narration_summary;
extern const LogNarrationStyle log_narration_activity;
/* log_narration_parse with the tool naming of style. */
int log_narration_parse_style(const char *data, size_t len, const LogNarrationStyle *style, char **ret);
