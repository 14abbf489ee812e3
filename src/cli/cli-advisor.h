#pragma once
/* `taskferry advisor`'s context, which the CLI attaches when it can: the
 * caller's Claude Code transcript, else the calling task's own log. Here: the
 * budget, the transcript tail, and the prompt the advisor gets. Pure logic and
 * file reads; the RPCs (task.tail, the --summarize-context dispatch,
 * task.advisor) are commands.c's. */

#include <stddef.h>
#include <stdint.h>

#include "cli-error.h"

#define CLI_ADVISOR_CONTEXT_CHARS 120000      /* default budget, code points */
#define CLI_ADVISOR_TAIL_CHARS_MAX 131072     /* task.tail's chars cap */
#define CLI_ADVISOR_TAIL_BYTES_FLOOR 4096
#define CLI_ADVISOR_TAIL_BYTES_MULTIPLIER 8
#define CLI_ADVISOR_TAIL_BYTES_CAP (16u << 20)
#define CLI_ADVISOR_SUMMARIZER_MODEL "opencode/mimo-v2.5-free"
#define CLI_ADVISOR_SUMMARIZE_TIMEOUT_MS 120000

/* The fixed pushback instructions that follow the caller's --prompt. */
extern const char cli_advisor_instructions[];
/* The --summarize-context prompt's lead ("Condense the following…"); the
 * text follows after "\n\n". */
extern const char cli_advisor_condense_lead[];

/* The budget, in code points: env (TASKFERRY_ADVISOR_CONTEXT_CHARS, as JavaScript's
 * Number(), > 0 and finite), else config (advisorContextChars of the
 * config.json at config_path, a number > 0, NULL/unreadable: none), else
 * CLI_ADVISOR_CONTEXT_CHARS. Fractions are dropped (as slice() does). */
uint64_t cli_advisor_budget(const char *env_value, const char *config_path);

/* <home>/.claude/projects/<cwd with every "/" replaced by "-">/<sid>.jsonl. malloc'd. */
char *cli_advisor_transcript_path(const char *home, const char *cwd, const char *session_id);

/* The transcript's text (the first context source): read the last
 * min(size, max(4096, min(budget*8, 16 MiB))) bytes, drop the first line if
 * the read did not start at 0, strip a leading BOM, keep entries whose type
 * is "user" or "assistant" with message.content a string or an array of
 * {type:"text", text} blocks (joined with "\n"), each as "<type>: <text>",
 * joined with "\n\n", and keep the last `budget` code points. *ret = ""
 * when there is none. An unreadable file is a usage error naming it
 * (-EINVAL, err set). -ENOMEM. */
int cli_advisor_transcript_text(const char *path, uint64_t budget, char **ret, cli_error *err);

/* The advisor's prompt: the lines [user_prompt (if non-empty)],
 * cli_advisor_instructions, [context block (if text): "\n--- attached context
 * (<source>, <UTF-16 length of text> chars) ---\n<text>\n---"], joined with
 * "\n". malloc'd. */
char *cli_advisor_prompt(const char *user_prompt, const char *source, const char *text);
