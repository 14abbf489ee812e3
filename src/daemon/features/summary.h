#pragma once
/* Report summaries: `taskferry summary <id>` in its default mode
 * (task.summary). The summary is written by an internal OpenCode task
 * (`opencode run --pure ... -f <snapshot>`, executor-opencode.c) whose
 * record has summaryOf; it runs sandboxed, with no overlay, no socket and no
 * output dir, and its sandbox shows of the state dir only its own snapshot,
 * read-only (launch.c).
 *
 * Per source task the daemon keeps (in memory) the summary session of the
 * last done summary and the source log's size then (the watermark): the next
 * summary of that task continues the session (--continue --session) with
 * only the narration written since (narration_is_delta), so the model keeps
 * its own context across summaries of one task. A watermark beyond the log's
 * size (a truncated log) clears both.
 *
 * The snapshot (<stateDir>/summaries/<summaryId>.json) is created 0600 with
 * O_EXCL|O_NOFOLLOW inside a 0700 dir, never named on a command line other
 * than the worker's own -f (a path, not its content), deleted when the
 * summary task settles. The caller's env param is the summary child's env
 * (it may hold provider keys): it is kept in memory and in the task's launch
 * request file (0600), never logged.
 *
 * A caller inside a task sandbox (peer.h) may summarize only the tasks it may
 * see (its own and those it dispatched: their logs are its own business, no
 * other task's narration reaches it), holds at most SUMMARY_NESTED_MAX live
 * summaries, and the summary task it asked for is recorded as dispatched by
 * its task, so it may wait for and read it. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

typedef struct Manager Manager;
typedef struct Request Request;
typedef struct Task Task;

#define SUMMARY_INPUT_BYTES 98304            /* the excerpt: whole log up to 96 KiB, else 48 KiB head + tail */
#define SUMMARY_DELTA_MAX_CHARS 4000         /* delta narration cap, code points */
#define SUMMARY_DELTA_READ_MAX (16u << 20)   /* bytes of a delta read at most (beyond the original: bounded) */
#define SUMMARY_STATE_MAX 4096               /* source tasks remembered at most */
#define SUMMARY_NESTED_MAX 4                 /* live summaries a sandboxed caller may hold */
#define SUMMARY_MODELS_TTL_MS (5 * 60 * 1000)
#define SUMMARY_MODELS_TIMEOUT_MS 10000
#define SUMMARY_MODELS_OUTPUT_MAX (4u << 20)
#define SUMMARY_TASK_PROMPT "Summarize the attached task transcript."


/* The excerpt of a log (a summary's input when there is no session to
 * continue, or the log did not grow since): size <= SUMMARY_INPUT_BYTES →
 * the narration of the whole file; else of the first and the last
 * SUMMARY_INPUT_BYTES/2 bytes, joined by "[<N> bytes omitted from source
 * log]" (N = the bytes between), empty parts left out, "\n\n" between.
 * *ret_log_bytes = the file's size, *ret_input_bytes = the bytes read. A
 * missing or unreadable log gives "" and zeros. -ENOMEM. */
int summary_excerpt(const char *log_path, char **ret_narration, uint64_t *ret_log_bytes, uint64_t *ret_input_bytes);
/* The delta since `from` (a continued session's input): the narration of
 * [from, size) (at most SUMMARY_DELTA_READ_MAX bytes of it), its first
 * SUMMARY_DELTA_MAX_CHARS code points. Sizes as summary_excerpt (input = delta
 * bytes read). -ENOMEM. */
int summary_delta(const char *log_path, uint64_t from, char **ret_narration, uint64_t *ret_log_bytes,
                  uint64_t *ret_input_bytes);
/* The snapshot document, 2-space indented as JSON.stringify(v, null, 2):
 * {source:{id,status,promptPreview,capturedAt}, narration,
 *  [previous_summary], [narration_is_delta:true]}. malloc'd, NULL on ENOMEM. */
char *summary_snapshot_json(const char *id, const char *status, const char *prompt_preview, const char *captured_at,
                            const char *narration, const char *previous_summary, bool is_delta);
/* Write the snapshot at path: O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600. -errno. */
int summary_snapshot_write(const char *path, const char *data);
/* Is `model` a line (trimmed) of an `opencode models` listing? */
bool summary_models_list_has(const char *listing, const char *model);
/* The env fingerprint the models cache is keyed by (a caller with other keys
 * or config must not be answered from another's listing): the sorted
 * NAME=value lines, joined by '\n', of *_API_KEY, *_BASE_URL,
 * OPENCODE_CONFIG*, OPENCODE_AUTH_CONTENT, OPENCODE_MODELS_PATH/URL and
 * PI_CODING_AGENT_DIR, over env (a strv). Kept in memory only (it holds keys).
 * malloc'd. */
char *summary_env_fingerprint(char *const *env);

/* Daemon glue (daemon.c): the state, and the observer that turns a done
 * summary task into its source's session and removes its snapshot. */
int summary_init(Manager *m);
void summary_free(Manager *m);

/* What a report summary is asked for. */
typedef struct SummaryRequest {
        Task *source;
        uint64_t max_words;          /* 75..300 */
        json_object *env;            /* the caller's env param for the summary child (NULL: the daemon's only) */
        const char *dispatched_by;   /* the sandboxed caller's task (it may see its summary), NULL: the user */
        bool prompt_fallback;        /* empty narration → "Task prompt: <promptPreview>" (the daemon's own) */
} SummaryRequest;

/* How it went: an error text, nothing to summarize yet (empty), or the
 * summary task, queued; with what the answer reports of the source. */
typedef struct SummaryOutcome {
        const char *error;            /* "error: ...\nhelp: ..." text, NULL: none */
        bool empty;                   /* no model text observed yet: no task */
        Task *task;                   /* the summary task, queued (NULL with error or empty) */
        Task *source;
        const char *source_status, *captured_at;
        json_object *source_log_bytes, *summary_input_bytes; /* numbers (borrowed) */
} SummaryOutcome;
typedef void (*summary_done_fn)(Manager *m, const SummaryOutcome *o, void *userdata);

/* Start a report summary of req->source: a forked job reads the source's log
 * (its excerpt, or the delta since the cached session's watermark), checks
 * the summary model against `opencode models` (cached per env fingerprint),
 * writes the snapshot and creates the summary task (lifecycle.h task_new).
 * done is called exactly once, later, from the event loop. 0, or -errno
 * (then done is never called). */
int summary_request(Manager *m, const SummaryRequest *req, summary_done_fn done, void *userdata);
/* Summary tasks queued or running that dispatched_by asked for. */
unsigned summary_live_for(Manager *m, const char *dispatched_by);
