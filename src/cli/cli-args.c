/* taskferry CLI argument grammar: spec protocol-cli.md §2.2, §2.3, §2.4, §2.10. */
#include "cli-args.h"

#include <errno.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "config.h"
#include "disk-budget.h"
#include "json-util.h"
#include "protocol.h"
#include "util.h"

/* ---- command specs (§2.10; texts follow the original command-specs) ---- */

static const cli_option_help dispatch_options[] = {
        { "--prompt <text>", "required" },
        { "--directory <path>", "defaults to the current workspace" },
        { "--model <id>", "required unless resuming via --session-id with a matching prior task" },
        { "--variant <name>", "optional; defaults to the model's highest supported thinking level (defaultVariant in config.json, or TASKFERRY_DEFAULT_VARIANT; see taskferryd(8))" },
        { "--session-id <id>", "resume an existing pi or OpenCode session" },
        { "--require-final-marker <regex>", "flag the task as incomplete if the final message doesn't match this pattern (case-sensitive POSIX extended regular expression, matched line by line, so ^ and $ can match standalone lines)" },
        { "--no-sandbox", "run this dispatch without the bwrap filesystem sandbox (default: sandboxed on Linux)" },
        { "--no-overlay", "run this dispatch without the copy-on-write overlay (writes land directly, not gated by accept/reject)" },
        { "--rw-bind <path,path,...>", "extra directories bound read-write inside the sandbox, in addition to the auto-detected git-common-dir for a worktree; required for anything under /tmp — the sandbox mounts it empty by default, hiding paths that exist on the host; unions with TASKFERRY_RW_BIND and config rwBind" },
        { "--ro-bind <path,path,...>", "extra directories bound read-only inside the sandbox; a path is skipped and reported if it is missing on this host or overlaps a protected sandbox mount; a path also listed in --rw-bind binds read-write (read-write always wins, never an error); unions with TASKFERRY_RO_BIND and config roBind" },
        { "--allowed-dirs <path,path,...>", "deprecated alias for --rw-bind (same behavior, still unions with it); will be removed in the next major release" },
        { "--executor <opencode|pi|shell>", "worker backend to dispatch through, default pi; shell runs the prompt with sh -c and needs no --model" },
        { "--class <name>", "optional free-text task-class tag for external telemetry consumers; taskferry does not validate against a fixed list" },
        { "--parent-task <id>", "tag this dispatch as fixing/retrying an earlier task; persisted as parentTaskId, and echoed by that task's check-gate failure message" },
        { "--disk-max <size>", "disk budget of this task's writes (overlay upper dir plus output dir; sparse files count their apparent size): bytes or a K/M/G/T suffix (50M, 2G); default TASKFERRY_TASK_DISK_MAX, else min(10G, 1/4 of the filesystem holding the overlays); past it the worker is stopped and the task crashes with disk_quota_exceeded" },
        { "--memory-max <size>", "memory limit of this task's scope unit (MemoryMax=; MemoryHigh= is 90% of it): bytes or a K/M/G/T suffix (512M, 4G), at least 8M; default TASKFERRY_TASK_MEMORY_MAX, else half the physical memory; a worker the kernel OOM-kills at it crashes with oom_killed; a nested dispatch cannot exceed its parent's; only enforced under a systemd user manager (taskferry doctor says)" },
        { "--tasks-max <number>", "process and thread limit of this task's scope unit (TasksMax=), at least 8; default TASKFERRY_TASK_TASKS_MAX, else 4096; a nested dispatch cannot exceed its parent's" },
        {}
};
static const char *const dispatch_examples[] = {
        "taskferry dispatch --prompt \"Fix the failing tests\"",
        "taskferry dispatch --prompt \"Review this change\" --model openai/gpt-5.6-sol",
        "taskferry dispatch --prompt \"Investigate\" --require-final-marker \"^Status: (DONE|DONE_WITH_CONCERNS)$\"",
        "taskferry dispatch --prompt \"Run one-off shell tooling\" --no-sandbox",
        "taskferry dispatch --prompt \"Update the shared cache dir\" --rw-bind /home/user/.cache/myapp",
        "taskferry dispatch --prompt \"Review the vendored deps\" --ro-bind /home/user/reference-repo",
        "taskferry dispatch --prompt \"Fix the failing tests\" --class implementer",
        "taskferry dispatch --prompt \"Fix: check gate failed\" --parent-task oc_msgabc12",
        NULL
};

static const cli_option_help cancel_options[] = {
        { "--grace-ms <number>", "milliseconds before SIGKILL, default 5000" },
        {}
};
static const char *const cancel_examples[] = {
        "taskferry cancel <id>", "taskferry cancel <id> --grace-ms 10000", NULL
};

static const cli_option_help accept_options[] = {
        { "--force", "apply the changeset even though its check gate failed, timed out, is still running, or was interrupted by a daemon restart; records checkOverride: true" },
        {}
};
static const char *const accept_examples[] = { "taskferry accept <id>", "taskferry accept <id> --force", NULL };

static const cli_option_help no_options[] = { {} };
static const char *const reject_examples[] = { "taskferry reject <id>", NULL };

static const cli_option_help output_options[] = {
        { "--path <relpath>", "read one file relative to the task's output dir instead of listing; rejects any path that would escape the per-task directory (e.g. \"../sibling\", absolute paths)" },
        { "--max-output-file-bytes <number>", "maximum bytes to read for a single file when --path is used; default 524288 (512 KiB); capped by daemon response budget 1 MiB and provably safe ceiling 174080 ((1 MiB-4096)/6, 6× for control chars). Control-heavy files that would exceed wire budget now surface a clear would-exceed-daemon-response-limit error naming the knob, not generic RESPONSE_TOO_LARGE. Precedence: flag > TASKFERRY_MAX_OUTPUT_FILE_BYTES env var > config.json maxOutputFileBytes > built-in default" },
        {}
};
static const char *const output_examples[] = {
        "taskferry output <id>", "taskferry output <id> --path deliverable.txt",
        "taskferry output <id> --path deliverable.txt --max-output-file-bytes 1048576", NULL
};

static const cli_option_help wait_options[] = {
        { "--timeout <duration>", "maximum wait, e.g. 10000 (ms), 30s, 5m, 1h" },
        { "--tail-chars <number>", "include this many trailing text characters on timeout" },
        { "--full", "include directory, model, and log details" },
        { "--summarize", "print periodic live summaries while waiting; exits when the task settles" },
        {}
};
static const char *const wait_examples[] = {
        "taskferry wait <id>", "taskferry wait <id> --timeout 10s --tail-chars 1000", "taskferry wait <id> --summarize", NULL
};

static const cli_option_help advisor_options[] = {
        { "--model <id>", "required" },
        { "--prompt <text>", "optional; auto-attaches context and asks for methodical review when omitted" },
        { "--directory <path>", "defaults to the current workspace" },
        { "--variant <name>", "optional model reasoning variant" },
        { "--session-id <id>", "continue a recent advisor session" },
        { "--timeout <duration>", "maximum wait, e.g. 10000 (ms), 30s, 5m, 1h" },
        { "--executor <opencode|pi|shell>", "worker backend to dispatch through, default pi" },
        { "--class <name>", "optional free-text task-class tag for external telemetry consumers; taskferry does not validate against a fixed list" },
        { "--parent-task <id>", "tag this dispatch as fixing/retrying an earlier task; persisted as parentTaskId, and echoed by that task's check-gate failure message" },
        { "--summarize-context", "condense the auto-attached context through a throwaway model call before sending it (off by default)" },
        {}
};
static const char *const advisor_examples[] = {
        "taskferry advisor --model openai/gpt-5.6-sol",
        "taskferry advisor --prompt \"How should I split this module?\" --model openai/gpt-5.6-sol",
        "taskferry advisor --prompt \"Review this design\" --model zai/glm-5.2 --timeout 30s",
        NULL
};

static const cli_option_help status_options[] = {
        { "--full", "include all recorded task details" },
        {}
};
static const char *const status_examples[] = { "taskferry status <id>", "taskferry status <id> --full", NULL };

static const cli_option_help tail_options[] = {
        { "--chars <number>", "characters to return, default 1000, maximum 131072" },
        {}
};
static const char *const tail_examples[] = { "taskferry tail <id>", "taskferry tail <id> --chars 2000", NULL };

static const cli_option_help summary_options[] = {
        { "--mode report|activity", "summary mode, default report" },
        { "--max-words <number>", "target length from 75 through 300" },
        { "--wait", "wait for active work before summarizing" },
        {}
};
static const char *const summary_examples[] = {
        "taskferry summary <id>", "taskferry summary <id> --mode activity --wait", NULL
};

static const cli_option_help result_options[] = {
        { "--full", "include untruncated narration" },
        { "--fields <comma-list>", "request selected result fields" },
        { "--diff", "print the task's changeset diff (read-only; cannot combine with --fields or --full)" },
        {}
};
static const char *const result_examples[] = {
        "taskferry result <id>", "taskferry result <id> --full", "taskferry result <id> --fields message,tokens",
        "taskferry result <id> --diff", NULL
};

static const cli_option_help diff_options[] = {
        { "--stat", "print a diffstat of the patch (git apply --stat) instead of the patch" },
        { "-- <path>...", "limit the patch to these files or directories (relative to the task's directory)" },
        {}
};
static const char *const diff_examples[] = {
        "taskferry diff <id>", "taskferry diff <id> | git apply --check", "taskferry diff <id> --stat",
        "taskferry diff <id> -- src/main.c docs", NULL
};

static const cli_option_help list_options[] = {
        { "--directory <path>", "workspace to inspect, defaults to the current workspace; also matches tasks dispatched into any git worktree of the same repo" },
        { "--all", "include tasks from every workspace" },
        { "--limit <number>", "limit displayed rows while preserving counts" },
        {}
};
static const char *const list_examples[] = { "taskferry list", "taskferry list --limit 20", "taskferry list --all", NULL };

static const cli_option_help watch_options[] = {
        { "--directory <path>", "workspace to watch, defaults to the current workspace; also matches tasks dispatched into any git worktree of the same repo" },
        { "--all", "stream events from every workspace, not just one" },
        { "--task-id <id>", "scope the stream to one task; exits automatically once it settles" },
        { "--format toon|ndjson", "stream format, default toon" },
        { "--summaries", "request activity summaries when available" },
        { "--flush-interval <duration>", "batch events and print them together on this interval, e.g. 30s, 5m, 1h; requires --summaries" },
        {}
};
static const char *const watch_examples[] = {
        "taskferry watch", "taskferry watch --all", "taskferry watch --task-id <id> --summaries",
        "taskferry watch --format ndjson", "taskferry watch --summaries --flush-interval 5m", NULL
};

static const cli_option_help context_options[] = {
        { "--directory <path>", "workspace to inspect, defaults to the current workspace; also matches tasks dispatched into any git worktree of the same repo" },
        { "--format toon|claude-hook|codex-hook", "context format, default toon" },
        {}
};
static const char *const context_examples[] = {
        "taskferry context", "taskferry context --format claude-hook", "taskferry context --format codex-hook", NULL
};

static const cli_option_help doctor_options[] = {
        { "--full", "include complete health details" },
        { "--stats", "report aggregate task-history stats instead of environment checks (mutually exclusive with --full)" },
        {}
};
static const char *const doctor_examples[] = {
        "taskferry doctor", "taskferry doctor --full", "taskferry doctor --stats", NULL
};

static const char *const job_examples[] = {
        "taskferry job run demo", "taskferry job list", "systemctl --user enable --now taskferry-job@demo.timer", NULL
};

static const char *const setup_examples[] = { "taskferry setup", NULL };
static const char *const init_examples[] = { "taskferry init", NULL };

const cli_command_spec cli_commands[] = {
        { "dispatch", "taskferry dispatch --prompt <text> [options]", "Queue a background worker run (pi, OpenCode or a shell command) in a sandbox on a copy-on-write overlay.",
          dispatch_options, dispatch_examples, false },
        { "cancel", "taskferry cancel <id> [--grace-ms <number>]", "Cancel queued or running work.",
          cancel_options, cancel_examples, true },
        { "accept", "taskferry accept <id>",
          "Apply a dispatch task's pending changeset to its target directory. Exits nonzero when the apply fails; the response's `applied` field (`applied: false`) is the authoritative signal to check when scripting.",
          accept_options, accept_examples, true },
        { "reject", "taskferry reject <id>", "Discard a task's pending changeset without applying it.",
          no_options, reject_examples, true },
        { "output", "taskferry output <id> [--path <relpath>]",
          "List a task's scratch output directory (or read one file in it). Every dispatch reserves a per-task writable directory at <stateDir>/outputs/<id>/, exposed to the worker as $TASKFERRY_OUTPUT_DIR. When bwrap sandboxing is active, taskferry rw-binds that directory at the same path. With --no-sandbox, it remains a normal host directory. Works on every terminal status (done, crashed, and cancelled, including a done task whose incomplete flag is true).",
          output_options, output_examples, true },
        { "wait", "taskferry wait <id> [options]",
          "Wait for a task to settle or return its current status after a timeout.",
          wait_options, wait_examples, true },
        { "advisor", "taskferry advisor --model <id> [--prompt <text>] [options]",
          "Consult a stronger model for a second opinion and block until it answers. With no --prompt, auto-attaches the caller's own recent context (a Claude Code session transcript, or the calling ferry's own task log) and asks for structured, actionable pushback.",
          advisor_options, advisor_examples, false },
        { "status", "taskferry status <id> [--full]", "Inspect task lifecycle and log activity.",
          status_options, status_examples, true },
        { "tail", "taskferry tail <id> [--chars <number>]", "Read the latest model text for a task.",
          tail_options, tail_examples, true },
        { "summary", "taskferry summary <id> [options]", "Create a bounded report or activity summary for a task.",
          summary_options, summary_examples, true },
        { "result", "taskferry result <id> [options]", "Read the final model result for a task.",
          result_options, result_examples, true },
        { "diff", "taskferry diff <id> [--stat] [-- <path>...]",
          "Show a task's pending changeset as a patch: coloured and paged on a terminal, plain when piped.",
          diff_options, diff_examples, true },
        { "list", "taskferry list [options]", "List tasks scoped to a workspace, newest first.",
          list_options, list_examples, false },
        { "watch", "taskferry watch [options]", "Stream task state events for a workspace.",
          watch_options, watch_examples, false },
        { "context", "taskferry context [options]", "Print compact current-workspace context for an agent hook.",
          context_options, context_examples, false },
        { "doctor", "taskferry doctor [--full] [--stats]",
          "Check daemon health and installation details, or report aggregate task-history stats.",
          doctor_options, doctor_examples, false },
        { "setup", "taskferry setup",
          "Install dependencies and create the CLI and OpenCode plugin symlinks without contacting the daemon.",
          no_options, setup_examples, false },
        { "init", "taskferry init",
          "Scaffold .taskferry.toml for this repo, detecting a check command from the project's ecosystem.",
          no_options, init_examples, false },
        { "job", "taskferry job run <name> | taskferry job list",
          "Dispatch the timer job ${XDG_CONFIG_HOME:-~/.config}/taskferry/jobs/<name>.toml as an ordinary task (what taskferry-job@<name>.service runs), or list the jobs with their timers and last tasks; see taskferry-jobs(5).",
          no_options, job_examples, false },
        {}
};


char *cli_available_commands(void) {
        char *list = strdup("");
        for (const cli_command_spec *c = cli_commands; list && c->name; c++) {
                if (!cli_command_implemented(c->name)) continue;
                char *n = strdup_printf("%s%s%s", list, *list ? ", " : "", c->name);
                free(list);
                list = n;
        }
        return list;
}

const cli_command_spec *cli_command_find(const char *name) {
        for (const cli_command_spec *c = cli_commands; c->name; c++)
                if (streq(c->name, name)) return c;
        return NULL;
}

/* ---- flags (§2.3) ---- */

typedef enum flag_kind {
        FLAG_BOOL,
        FLAG_STRING,
        FLAG_INTEGER,
        FLAG_DURATION,
        FLAG_PATH_LIST,
        FLAG_FIELDS,
        FLAG_CHOICE,
        FLAG_REGEX,
        FLAG_SIZE,
} flag_kind;

typedef struct flag_spec {
        const char *name;
        const char *key;
        flag_kind kind;
        const char *commands; /* space-separated commands that accept the flag */
        int64_t min, max;     /* FLAG_INTEGER */
} flag_spec;

static const flag_spec flags[] = {
        { "--prompt", "prompt", FLAG_STRING, "dispatch advisor", 0, 0 },
        { "--directory", "directory", FLAG_STRING, "dispatch advisor list watch context", 0, 0 },
        { "--model", "model", FLAG_STRING, "dispatch advisor", 0, 0 },
        { "--variant", "variant", FLAG_STRING, "dispatch advisor", 0, 0 },
        { "--session-id", "sessionId", FLAG_STRING, "dispatch advisor", 0, 0 },
        { "--require-final-marker", "finalMarker", FLAG_REGEX, "dispatch", 0, 0 },
        { "--rw-bind", "rwBind", FLAG_PATH_LIST, "dispatch", 0, 0 },
        { "--ro-bind", "roBind", FLAG_PATH_LIST, "dispatch", 0, 0 },
        { "--allowed-dirs", "allowedDirs", FLAG_PATH_LIST, "dispatch", 0, 0 },
        { "--executor", "executor", FLAG_CHOICE, "dispatch advisor", 0, 0 },
        { "--class", "class", FLAG_STRING, "dispatch advisor", 0, 0 },
        { "--parent-task", "parentTaskId", FLAG_STRING, "dispatch advisor", 0, 0 },
        { "--grace-ms", "graceMs", FLAG_INTEGER, "cancel", 0, CLI_MAX_SAFE_INTEGER },
        { "--disk-max", "diskMax", FLAG_SIZE, "dispatch", 0, 0 },
        { "--memory-max", "memoryMax", FLAG_SIZE, "dispatch", 0, 0 },
        { "--tasks-max", "tasksMax", FLAG_INTEGER, "dispatch", 8, 4194304 },
        { "--timeout", "timeoutMs", FLAG_DURATION, "wait advisor", 0, 0 },
        { "--tail-chars", "tailChars", FLAG_INTEGER, "wait", 1, 65536 },
        { "--chars", "chars", FLAG_INTEGER, "tail", 1, 131072 },
        { "--path", "path", FLAG_STRING, "output", 0, 0 },
        { "--max-output-file-bytes", "maxOutputFileBytes", FLAG_INTEGER, "output", 1, CLI_MAX_SAFE_INTEGER },
        { "--mode", "mode", FLAG_CHOICE, "summary", 0, 0 },
        { "--max-words", "maxWords", FLAG_INTEGER, "summary", 75, 300 },
        { "--fields", "fields", FLAG_FIELDS, "result", 0, 0 },
        { "--limit", "limit", FLAG_INTEGER, "list", 1, CLI_MAX_SAFE_INTEGER },
        { "--format", "format", FLAG_CHOICE, "watch context", 0, 0 },
        { "--task-id", "taskId", FLAG_STRING, "watch", 0, 0 },
        { "--flush-interval", "flushIntervalMs", FLAG_DURATION, "watch", 0, 0 },
        { "--full", "full", FLAG_BOOL, "wait status result doctor", 0, 0 },
        { "--all", "all", FLAG_BOOL, "list watch", 0, 0 },
        { "--wait", "wait", FLAG_BOOL, "summary", 0, 0 },
        { "--summaries", "summaries", FLAG_BOOL, "watch", 0, 0 },
        { "--summarize", "summarize", FLAG_BOOL, "wait", 0, 0 },
        { "--summarize-context", "summarizeContext", FLAG_BOOL, "advisor", 0, 0 },
        { "--stats", "stats", FLAG_BOOL, "doctor", 0, 0 },
        { "--no-sandbox", "noSandbox", FLAG_BOOL, "dispatch", 0, 0 },
        { "--no-overlay", "noOverlay", FLAG_BOOL, "dispatch", 0, 0 },
        { "--force", "force", FLAG_BOOL, "accept", 0, 0 },
        { "--diff", "diff", FLAG_BOOL, "result", 0, 0 },
        { "--stat", "stat", FLAG_BOOL, "diff", 0, 0 },
        {}
};

/* Retired flag names (§2.3 "Retired names"). target: the flag the hint
 * points at; when set, the hint is only given if the command accepts it. */
typedef struct migration_flag {
        const char *name;
        const char *hint;
        const char *target;
} migration_flag;

static const migration_flag migration_flags[] = {
        { "--task-id", "--task-id was replaced by the positional task id; use `taskferry status <id>`", NULL },
        { "--timeout_ms", "--timeout_ms was renamed; use --timeout", "--timeout" },
        { "--timeout-ms", "--timeout-ms was renamed; use --timeout", "--timeout" },
        { "--tail_chars", "--tail_chars was renamed; use --tail-chars", NULL },
        { "--max_words", "--max_words was renamed; use --max-words", NULL },
        { "--session_id", "--session_id was renamed; use --session-id", NULL },
        { "--style", "--style was renamed; use --mode", NULL },
        { "--rw-dirs", "--rw-dirs was renamed; use --rw-bind", "--rw-bind" },
        { "--ro-dirs", "--ro-dirs was renamed; use --ro-bind", "--ro-bind" },
        {}
};

static const flag_spec *flag_find(const char *name) {
        for (const flag_spec *f = flags; f->name; f++)
                if (streq(f->name, name)) return f;
        return NULL;
}

static bool word_in_list(const char *list, const char *word) {
        size_t n = strlen(word);
        for (const char *p = list; *p; ) {
                const char *end = strchr(p, ' ');
                size_t len = end ? (size_t) (end - p) : strlen(p);
                if (len == n && strncmp(p, word, n) == 0) return true;
                if (!end) break;
                p = end + 1;
        }
        return false;
}

static bool command_allows(const char *command, const char *flag) {
        const flag_spec *f = flag_find(flag);
        return f && word_in_list(f->commands, command);
}

char *cli_valid_flags_help(const char *command) {
        const cli_command_spec *spec = command ? cli_command_find(command) : NULL;
        if (!spec) return strdup("Run `taskferry --help` for usage");
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        if (!f) return NULL;
        fprintf(f, "Valid flags for %s: ", spec->name);
        if (!spec->options[0].label) fputs("none", f);
        for (const cli_option_help *o = spec->options; o->label; o++)
                fprintf(f, "%s%s", o == spec->options ? "" : ", ", o->label);
        fprintf(f, ". Run `taskferry %s --help` for details", spec->name);
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

/* Usage error with the command's Valid-flags help (§2.2). */
static int usage_error(cli_error *err, const char *command, const char *fmt, ...) _printf_(3, 4);
static int usage_error(cli_error *err, const char *command, const char *fmt, ...) {
        _cleanup_free_ char *help = cli_valid_flags_help(command);
        _cleanup_free_ char *msg = NULL;
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
        va_end(ap);
        return cli_error_usage(err, help, "%s", strempty(msg));
}

/* ---- value coercers ---- */

static bool all_digits(const char *s) {
        if (!*s) return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9') return false;
        return true;
}

int cli_parse_integer(const char *value, const char *flag, int64_t min, int64_t max,
                      int64_t *ret, cli_error *err) {
        _cleanup_free_ char *help = strdup_printf("Use %s with a number from %" PRId64 " through %" PRId64,
                                                  flag, min, max);
        if (!all_digits(value)) return cli_error_usage(err, help, "%s must be an integer", flag);
        double d = strtod(value, NULL); /* Number(value): correctly rounded */
        bool safe = d <= (double) CLI_MAX_SAFE_INTEGER;
        if (!safe || d < (double) min || d > (double) max) {
                if (min != 1) return cli_error_usage(err, help, "%s must be from %" PRId64 " through %" PRId64, flag, min, max);
                if (d < 1) return cli_error_usage(err, help, "%s must be a positive integer", flag);
                return cli_error_usage(err, help, "%s must be a positive integer from 1 through %" PRId64, flag, max);
        }
        *ret = (int64_t) d;
        return 0;
}

int cli_parse_duration(const char *value, const char *flag, int64_t *ret_ms, cli_error *err) {
        _cleanup_free_ char *help = strdup_printf(
                "Use %s with milliseconds (e.g. 10000) or a duration string (e.g. 30s, 5m, 1h); values must not exceed 2147483647 milliseconds (about 24 days)",
                flag);
        if (all_digits(value)) {
                double ms = strtod(value, NULL);
                if (ms > (double) CLI_MAX_SAFE_INTEGER)
                        return cli_error_usage(err, help, "%s is not a valid integer", flag);
                if (ms > (double) CLI_MAX_TIMEOUT_MS)
                        return cli_error_usage(err, help, "%s must not exceed 2147483647 milliseconds (about 24 days)", flag);
                *ret_ms = (int64_t) ms;
                return 0;
        }
        size_t len = strlen(value);
        double unit = 0;
        if (len >= 2) {
                switch (value[len - 1]) {
                case 's': unit = 1000; break;
                case 'm': unit = 60000; break;
                case 'h': unit = 3600000; break;
                }
        }
        _cleanup_free_ char *digits = unit > 0 ? strndup(value, len - 1) : NULL;
        if (!digits || !all_digits(digits))
                return cli_error_usage(err, help, "%s must be milliseconds or a duration like 30s, 5m, 1h", flag);
        double ms = strtod(digits, NULL) * unit;
        if (ms > (double) CLI_MAX_TIMEOUT_MS)
                return cli_error_usage(err, help, "%s must not exceed 2147483647 milliseconds (about 24 days)", flag);
        *ret_ms = (int64_t) ms;
        return 0;
}

double cli_js_number(const char *s) {
        return config_js_number(s);
}

static int parse_path_list(const char *value, const char *flag, json_object **ret, cli_error *err) {
        _cleanup_json_ json_object *arr = json_object_new_array();
        if (!arr) return -ENOMEM;
        for (const char *p = value; ; ) {
                const char *comma = strchr(p, ',');
                size_t len = comma ? (size_t) (comma - p) : strlen(p);
                const char *s = p;
                while (len > 0 && strchr(" \t\n\r\v\f", *s)) s++, len--;
                while (len > 0 && strchr(" \t\n\r\v\f", s[len - 1])) len--;
                if (len > 0 && json_object_array_add(arr, json_object_new_string_len(s, (int) len)) < 0)
                        return -ENOMEM;
                if (!comma) break;
                p = comma + 1;
        }
        if (json_object_array_length(arr) == 0) {
                _cleanup_free_ char *help = strdup_printf("Use %s with one or more comma-separated paths", flag);
                return cli_error_usage(err, help, "%s must contain at least one path", flag);
        }
        *ret = TAKE_PTR(arr);
        return 0;
}

static int parse_fields(const char *value, json_object **ret, cli_error *err) {
        json_object *list = NULL;
        int r = parse_path_list(value, "--fields", &list, err);
        bool ok = r >= 0;
        if (r == -ENOMEM) return r;
        if (ok) {
                for (size_t i = 0; ok && i < json_object_array_length(list); i++) {
                        const char *f = json_object_get_string(json_object_array_get_idx(list, i));
                        ok = strv_contains((char **) protocol_result_fields, f);
                }
        }
        if (!ok) {
                json_object_put(list);
                char *buf = NULL;
                size_t size = 0;
                FILE *f = open_memstream(&buf, &size);
                if (!f) return -ENOMEM;
                fputs("Use one of: ", f);
                for (size_t i = 0; protocol_result_fields[i]; i++) fprintf(f, "%s%s", i ? ", " : "", protocol_result_fields[i]);
                if (fclose(f) != 0) {
                        free(buf);
                        return -ENOMEM;
                }
                _cleanup_free_ char *help = buf;
                return cli_error_usage(err, help, "--fields must contain one or more supported result fields");
        }
        *ret = list;
        return 0;
}

static int parse_choice(const char *command, const char *flag, const char *value, cli_error *err) {
        static const char *const executors[] = { "opencode", "pi", "shell", NULL };
        static const char *const modes[] = { "report", "activity", NULL };
        static const char *const watch_formats[] = { "toon", "ndjson", NULL };
        static const char *const context_formats[] = { "toon", "claude-hook", "codex-hook", NULL };
        const char *const *choices;
        if (streq(flag, "--executor")) choices = executors;
        else if (streq(flag, "--mode")) choices = modes;
        else if (streq(command, "watch")) choices = watch_formats;
        else choices = context_formats;
        if (strv_contains((char **) choices, value)) return 0;

        char *list = NULL, *hint = NULL;
        size_t ls = 0, hs = 0;
        FILE *lf = open_memstream(&list, &ls), *hf = open_memstream(&hint, &hs);
        if (!lf || !hf) {
                if (lf) fclose(lf);
                if (hf) fclose(hf);
                free(list);
                free(hint);
                return -ENOMEM;
        }
        for (size_t i = 0; choices[i]; i++) fprintf(lf, "%s%s", i ? ", " : "", choices[i]);
        if (streq(flag, "--format")) {
                fprintf(hf, "Use %s with one of: ", flag);
                for (size_t i = 0; choices[i]; i++) fprintf(hf, "%s%s", i ? ", " : "", choices[i]);
        } else {
                fputs("Use", hf);
                for (size_t i = 0; choices[i]; i++) fprintf(hf, "%s %s %s", i ? " or" : "", flag, choices[i]);
        }
        fclose(lf);
        fclose(hf);
        _cleanup_free_ char *l = list, *h = hint;
        return cli_error_usage(err, h, "%s must be one of %s", flag, l);
}

static int parse_regex(const char *flag, const char *value, cli_error *err) {
        regex_t re;
        int rc = regcomp(&re, value, REG_EXTENDED | REG_NOSUB | REG_NEWLINE);
        if (rc == 0) {
                regfree(&re);
                return 0;
        }
        char msg[256];
        regerror(rc, &re, msg, sizeof msg);
        return cli_error_usage(err, "Use --require-final-marker with a pattern that compiles as a POSIX extended regular expression",
                               "%s is not a valid regular expression: %s", flag, msg);
}

/* ---- parser ---- */

void cli_args_done(cli_args *a) {
        free(a->task_id);
        strv_free(a->words);
        json_object_put(a->options);
        strv_free(a->warnings);
        *a = (cli_args) {};
}

static int migration_error(const char *name, char *const *rest, size_t nrest, cli_error *err) {
        _cleanup_free_ char *help = NULL;
        if (streq(name, "taskferry_dispatch")) {
                if (nrest == 0) help = strdup("Use: taskferry dispatch --prompt \"<text>\"");
                else {
                        char *buf = NULL;
                        size_t size = 0;
                        FILE *f = open_memstream(&buf, &size);
                        if (!f) return -ENOMEM;
                        fputs("Use: taskferry dispatch --prompt \"<text>\" (received", f);
                        for (size_t i = 0; i < nrest; i++) fprintf(f, " %s", rest[i]);
                        fputc(')', f);
                        if (fclose(f) != 0) {
                                free(buf);
                                return -ENOMEM;
                        }
                        help = buf;
                }
        } else if (streq(name, "taskferry_cancel")) help = strdup("Use: taskferry cancel <id>");
        else if (streq(name, "taskferry_poll"))
                help = strdup_printf("Use: taskferry wait %s", nrest > 0 && rest[0][0] ? rest[0] : "<id>");
        else if (streq(name, "taskferry_advisor")) help = strdup("Use: taskferry advisor --prompt \"<text>\" --model <id>");
        else if (streq(name, "taskferry_status")) help = strdup("Use: taskferry status <id>");
        else if (streq(name, "taskferry_tail")) help = strdup("Use: taskferry tail <id>");
        else if (streq(name, "taskferry_summary")) help = strdup("Use: taskferry summary <id>");
        else if (streq(name, "taskferry_result")) help = strdup("Use: taskferry result <id>");
        else if (streq(name, "taskferry_list")) help = strdup("Use: taskferry list");
        else help = strdup("Run `taskferry --help` for the AXI CLI commands");
        return cli_error_usage(err, help, "%s is an MCP tool name and is no longer a command", name);
}

static int set_option(json_object *options, const char *key, json_object *value, const char *command, cli_error *err) {
        if (json_object_object_get_ex(options, key, NULL)) {
                json_object_put(value);
                return usage_error(err, command, "duplicate flag %s", key);
        }
        if (json_object_object_add(options, key, value) < 0) {
                json_object_put(value);
                return -ENOMEM;
        }
        return 0;
}

int cli_args_parse(char *const *argv_in, size_t argc_in, cli_args *ret, cli_error *err) {
        _cleanup_(cli_args_done) cli_args a = {};
        _cleanup_free_ char **argv = calloc(argc_in + 1, sizeof(char *));
        if (!argv) return -ENOMEM;
        size_t argc = 0;
        for (size_t i = 0; i < argc_in; i++) {
                if (streq(argv_in[i], "--json")) a.json = true;
                else argv[argc++] = argv_in[i];
        }
        a.options = json_object_new_object();
        if (!a.options) return -ENOMEM;

        if (argc == 0) {
                a.command = "home";
                goto done;
        }
        if (streq(argv[0], "--help") || streq(argv[0], "-h")) {
                if (argc > 1) return cli_error_usage(err, NULL, "unexpected argument: %s", argv[1]);
                a.command = "home";
                a.help = true;
                goto done;
        }
        if (streq(argv[0], "--version") || streq(argv[0], "-V")) {
                if (argc > 1) return cli_error_usage(err, NULL, "unexpected argument: %s", argv[1]);
                a.command = "version";
                goto done;
        }
        if (startswith(argv[0], "taskferry_")) return migration_error(argv[0], argv + 1, argc - 1, err);
        if (streq(argv[0], "poll"))
                return cli_error_usage(err, "Use `taskferry wait <id>`", "poll was renamed to wait");
        const cli_command_spec *spec = cli_command_find(argv[0]);
        if (!spec)
                return cli_error_usage(err, "Run `taskferry --help` to see available commands",
                                       "unknown command: %s", argv[0]);
        const char *command = spec->name;
        a.command = command;

        bool positional = false;
        for (size_t i = 1; i < argc; i++) {
                const char *token = argv[i];
                if (streq(token, "--help") || streq(token, "-h")) {
                        a.help = true;
                        continue;
                }
                if (streq(token, "--") && streq(command, "diff")) {
                        /* everything after "--" is a path limit, as git's pathspecs */
                        json_object *paths = json_object_new_array();
                        if (!paths) return -ENOMEM;
                        for (i++; i < argc; i++)
                                if (json_object_array_add(paths, json_object_new_string(argv[i])) < 0) {
                                        json_object_put(paths);
                                        return -ENOMEM;
                                }
                        int r = set_option(a.options, "paths", paths, command, err);
                        if (r < 0) return r;
                        break;
                }
                if (token[0] != '-' && streq(command, "job")) {
                        /* job: <action> [<name>] */
                        if (strv_length(a.words) >= 2) return usage_error(err, command, "unexpected argument: %s", token);
                        if (strv_push(&a.words, token) < 0) return -ENOMEM;
                        continue;
                }
                if (token[0] != '-') {
                        if (positional || !spec->takes_task_id)
                                return usage_error(err, command, "unexpected argument: %s", token);
                        a.task_id = strdup(token);
                        if (!a.task_id) return -ENOMEM;
                        positional = true;
                        continue;
                }
                if (!startswith(token, "--")) return usage_error(err, command, "unknown flag %s for `%s`", token, command);

                const char *eq = strchr(token, '=');
                _cleanup_free_ char *name = eq ? strndup(token, (size_t) (eq - token)) : strdup(token);
                if (!name) return -ENOMEM;
                const char *inline_value = eq ? eq + 1 : NULL;

                for (const migration_flag *m = migration_flags; m->name; m++) {
                        if (!streq(m->name, name)) continue;
                        if (streq(name, "--task-id") && streq(command, "watch")) break;
                        if (m->target && !command_allows(command, m->target))
                                return usage_error(err, command, "unknown flag %s for `%s`", name, command);
                        return cli_error_usage(err, m->hint, "unknown flag %s for `%s`", name, command);
                }

                const flag_spec *f = flag_find(name);
                if (!f || !word_in_list(f->commands, command))
                        return usage_error(err, command, "unknown flag %s for `%s`", name, command);

                if (f->kind == FLAG_BOOL) {
                        if (inline_value) return usage_error(err, command, "%s does not take a value", name);
                        int r = set_option(a.options, f->key, json_object_new_boolean(true), command, err);
                        if (r < 0) return r;
                        continue;
                }

                /* usage errors carry the "Valid flags for <cmd>" help (spec §2.2) */
                const char *value;
                if (inline_value) {
                        if (!*inline_value) return usage_error(err, command, "%s requires a non-empty value", name);
                        value = inline_value;
                } else {
                        if (i + 1 >= argc || startswith(argv[i + 1], "--"))
                                return usage_error(err, command, "%s requires a value", name);
                        value = argv[++i];
                        if (!*value) return usage_error(err, command, "%s requires a non-empty value", name);
                }

                json_object *v = NULL;
                int r = 0;
                int64_t n;
                switch (f->kind) {
                case FLAG_STRING:
                        v = json_object_new_string(value);
                        break;
                case FLAG_INTEGER:
                        r = cli_parse_integer(value, name, f->min, f->max, &n, err);
                        if (r >= 0) v = json_object_new_int64(n);
                        break;
                case FLAG_DURATION:
                        r = cli_parse_duration(value, name, &n, err);
                        if (r >= 0) v = json_object_new_int64(n);
                        break;
                case FLAG_PATH_LIST:
                        r = parse_path_list(value, name, &v, err);
                        if (r >= 0 && streq(f->key, "allowedDirs") &&
                            strv_push(&a.warnings, "--allowed-dirs is deprecated; use --rw-bind (same behavior). It will be removed in the next major release.") < 0) {
                                json_object_put(v);
                                return -ENOMEM;
                        }
                        break;
                case FLAG_FIELDS:
                        r = parse_fields(value, &v, err);
                        break;
                case FLAG_CHOICE:
                        r = parse_choice(command, name, value, err);
                        if (r >= 0) v = json_object_new_string(value);
                        break;
                case FLAG_REGEX:
                        r = parse_regex(name, value, err);
                        if (r >= 0) v = json_object_new_string(value);
                        break;
                case FLAG_SIZE: {
                        uint64_t bytes;
                        r = disk_size_parse(value, &bytes);
                        if (r < 0)
                                r = cli_error_usage(err, streq(name, "--memory-max")
                                                         ? "Use --memory-max with bytes or a size with a K, M, G or T "
                                                           "suffix (e.g. 512M, 4G), at least 8M"
                                                         : "Use --disk-max with bytes or a size with a K, M, G or T suffix "
                                                         "(e.g. 50M, 2G), from 1 byte through 9007199254740991 bytes",
                                                    r == -ERANGE ? "%s must be a positive size within 9007199254740991 bytes"
                                                                 : "%s must be a size such as 4096, 50M or 2G",
                                                    name);
                        else v = json_object_new_int64((int64_t) bytes);
                        break;
                }
                case FLAG_BOOL:
                        break;
                }
                if (r < 0) return r;
                if (!v) return -ENOMEM;
                r = set_option(a.options, f->key, v, command, err);
                if (r < 0) return r;
        }

        bool all = json_get_bool(a.options, "all", false);
        if ((streq(command, "list") || streq(command, "watch")) && all &&
            json_object_object_get_ex(a.options, "directory", NULL))
                return usage_error(err, command, "--all cannot be combined with --directory");
        if (streq(command, "watch") && all && json_object_object_get_ex(a.options, "taskId", NULL))
                return usage_error(err, command, "--all cannot be combined with --task-id");

        if (!a.help) {
                json_object *fields = json_get_array(a.options, "fields");
                bool full = json_get_bool(a.options, "full", false);
                bool diff = json_get_bool(a.options, "diff", false);
                bool summarize = json_get_bool(a.options, "summarize", false);
                int64_t flush;
                bool has_flush = json_get_int64(a.options, "flushIntervalMs", &flush);

                if (spec->takes_task_id && isempty(a.task_id))
                        return usage_error(err, command, "task id is required");
                if (streq(command, "dispatch") && !json_object_object_get_ex(a.options, "prompt", NULL))
                        return usage_error(err, command, "--prompt is required");
                if (streq(command, "advisor") && !json_object_object_get_ex(a.options, "model", NULL))
                        return usage_error(err, command, "--model is required");
                if (streq(command, "result") && full && fields) {
                        bool narration = false;
                        for (size_t i = 0; i < json_object_array_length(fields); i++)
                                if (streq(json_object_get_string(json_object_array_get_idx(fields, i)), "narration"))
                                        narration = true;
                        if (!narration) return usage_error(err, command, "--full requires narration in --fields");
                }
                if (streq(command, "result") && diff && fields)
                        return usage_error(err, command, "--diff cannot be combined with --fields");
                if (streq(command, "result") && diff && full)
                        return usage_error(err, command, "--diff cannot be combined with --full");
                if (streq(command, "wait") && summarize && json_object_object_get_ex(a.options, "timeoutMs", NULL))
                        return usage_error(err, command, "--summarize cannot be combined with --timeout");
                if (streq(command, "wait") && summarize && json_object_object_get_ex(a.options, "tailChars", NULL))
                        return usage_error(err, command, "--summarize cannot be combined with --tail-chars");
                if (streq(command, "watch") && has_flush && !json_get_bool(a.options, "summaries", false))
                        return usage_error(err, command, "--flush-interval requires --summaries");
                if (streq(command, "watch") && has_flush && flush == 0)
                        return usage_error(err, command, "--flush-interval must be greater than zero");
                if (streq(command, "doctor") && json_get_bool(a.options, "stats", false) && full)
                        return usage_error(err, command, "--stats cannot be combined with --full");
                if (streq(command, "job")) {
                        const char *action = a.words ? a.words[0] : NULL;
                        if (!action) return usage_error(err, command, "job needs an action: run <name> or list");
                        if (streq(action, "run") && !a.words[1]) return usage_error(err, command, "job name is required");
                        if (streq(action, "list") && a.words[1])
                                return usage_error(err, command, "unexpected argument: %s", a.words[1]);
                        if (!streq(action, "run") && !streq(action, "list"))
                                return usage_error(err, command, "unknown job action: %s (use run or list)", action);
                }
        }
done:
        *ret = a;
        a = (cli_args) {};
        return 0;
}

const char *cli_args_string(const cli_args *a, const char *key) {
        return json_get_string(a->options, key);
}

bool cli_args_bool(const cli_args *a, const char *key) {
        return json_get_bool(a->options, key, false);
}

bool cli_args_int(const cli_args *a, const char *key, int64_t *ret) {
        return json_get_int64(a->options, key, ret);
}

bool cli_args_has(const cli_args *a, const char *key) {
        return a->options && json_object_object_get_ex(a->options, key, NULL);
}

/* ---- help objects (§2.10) ---- */

static json_object *string_array(const char *const *l) {
        json_object *arr = json_object_new_array();
        if (!arr) return NULL;
        for (; *l; l++)
                if (json_object_array_add(arr, json_object_new_string(*l)) < 0) {
                        json_object_put(arr);
                        return NULL;
                }
        return arr;
}

json_object *cli_help_object(const char *command) {
        const cli_command_spec *spec = command ? cli_command_find(command) : NULL;
        _cleanup_json_ json_object *o = json_object_new_object();
        if (!o) return NULL;
        if (!spec) {
                static const char *const top_options[] = { "--help", "--version", NULL };
                static const char *const top_examples[] = {
                        "taskferry", "taskferry dispatch --prompt \"Fix the failing tests\"", "taskferry list", NULL
                };
                json_object *cmds = json_object_new_array();
                if (!cmds) return NULL;
                /* what this build runs: the table's commands that are implemented
                 * (tests/unit/test-cli-help.c holds this and the man page to it) */
                for (const cli_command_spec *c = cli_commands; c->name; c++)
                        if (cli_command_implemented(c->name))
                                json_object_array_add(cmds, json_object_new_string(c->name));
                if (json_add_string(o, "command", "taskferry") < 0 ||
                    json_add_string(o, "usage", "taskferry <command> [options]") < 0 ||
                    json_add_string(o, "description", CLI_DESCRIPTION) < 0 ||
                    json_add(o, "commands", cmds) < 0 ||
                    json_add(o, "options", string_array(top_options)) < 0 ||
                    json_add(o, "examples", string_array(top_examples)) < 0)
                        return NULL;
                return TAKE_PTR(o);
        }
        json_object *opts = json_object_new_object();
        if (!opts) return NULL;
        for (const cli_option_help *h = spec->options; h->label; h++)
                json_add_string(opts, h->label, h->text);
        if (json_add_string(o, "command", spec->name) < 0 ||
            json_add_string(o, "usage", spec->usage) < 0 ||
            json_add_string(o, "description", spec->description) < 0 ||
            json_add(o, "options", opts) < 0 ||
            json_add(o, "examples", string_array(spec->examples)) < 0)
                return NULL;
        return TAKE_PTR(o);
}
