#pragma once
/* Executors: how a worker CLI is started and how its stdout becomes the
 * canonical NDJSON log (text, tool_use, tool_progress and step_finish events,
 * and a top-level sessionID, which the log readers of logparse.h consume).
 * A new executor is one new file and one table entry in executor.c. */

#include <stdbool.h>
#include <stddef.h>

typedef struct executor_launch {
        const char *model;       /* "provider/model" or NULL (shell) */
        const char *variant;     /* resolved thinking/variant value or NULL (no flag) */
        const char *session_id;  /* resume session or NULL */
        const char *directory;   /* launch dir (absolute) */
        const char *prompt;      /* the augmented prompt text */
        const char *prompt_file; /* path of a file holding the prompt, as seen by
                                    the worker; when non-NULL the prompt is passed
                                    through the file and never on argv (prompts are
                                    secrets: /proc/<pid>/cmdline is world-readable) */
        const char *attachment;  /* a report summary: the snapshot of the source task to attach;
                                    the prompt is then the fixed summary instruction and goes on
                                    argv, prompt_file is not used (opencode only) */
} executor_launch;

/* Opaque per-run normalizer state. */
typedef struct normalizer normalizer;

typedef struct executor {
        const char *id;             /* "pi", "opencode", "shell" */
        const char *failure_prefix; /* bucket prefix: "pi" → "pi_rate_limited"; NULL → bare names
                                       ("rate_limited": opencode) */
        const char *structured_prefix; /* prefix for unmatched type:"error" events: "opencode", "pi", "shell" */
        const char *boot_failure_reason; /* "boot_failure" (opencode), "pi_boot_failure", "shell_boot_failure" */
        bool needs_model;           /* dispatch without --model is an error */
        bool exit_code_is_success;  /* a clean exit is complete whatever its output (shell: a
                                       silent `make fmt` succeeded), else a task is complete
                                       only with a non-blank final message that matches its
                                       finalMarker, if any (pi, opencode) */
        bool raw_output;            /* stdout goes to the log byte for byte like stderr, never split into
                                       lines nor normalized (the check executor) */
        /* Worker argv (binary first), NULL-terminated, malloc'd. -ENOMEM/-EINVAL. */
        int (*build_argv)(const executor_launch *l, char ***ret_argv);
        /* Normalizer lifecycle. */
        normalizer *(*normalizer_new)(void);
        void (*normalizer_free)(normalizer *n);
        /* Normalize one stdout line (line[0..len) without its '\n'; newline says
         * whether it ended with '\n' — false only for a trailing partial line at
         * EOF). Every line is passed, including whitespace-only ones: JSON
         * executors drop whitespace-only lines (log_line_is_blank), the
         * shell executor keeps them. Appends zero or more canonical log lines
         * (each without '\n') to *out (a strv). For pi/opencode a line that is
         * not JSON is passed through verbatim. -ENOMEM only. */
        int (*normalize_line)(normalizer *n, const char *line, size_t len, bool newline, char ***out);
        /* End of stdout: flush anything pending into *out. May be NULL. */
        int (*normalize_finish)(normalizer *n, char ***out);
} executor;

/* The --thinking level pi gets for a variant: "highest" and "max" → the
 * highest level the supported pi accepts ("xhigh" for pi 0.73.1, which
 * refuses "max" with a warning on every run; the original passed "max");
 * anything else (or NULL) unchanged. Static storage or variant itself. */
const char *executor_pi_thinking_level(const char *variant);

/* Look an executor up by id; NULL if unknown. Only those a task may name:
 * pi, opencode, shell. */
const executor *executor_find(const char *id);
/* The same, plus the daemon's own "check" (a check gate's run, launched by
 * the daemon only): the shim's lookup. */
const executor *executor_find_any(const char *id);
/* Comma+space list of executor ids ("opencode, pi, shell") for error messages. */
const char *executor_names(void);
