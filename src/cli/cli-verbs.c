/* The verb table and what reads only it: lookups, help objects, the
 * Valid-flags help, and each command's cross-flag rules (cli-verbs.h). The
 * texts are the original taskferry's command help, verbatim. */
#include "cli-verbs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-args.h"
#include "cli-job.h"
#include "cli-views.h"
#include "commands.h"
#include "json-util.h"
#include "protocol-keys.h"
#include "macro.h"
#include "string-util.h"
#include "watch.h"

/* ---- cross-flag rules: usage errors, in the order they are checked ---- */

/* --all is every workspace, so it names no narrower scope. */
static int check_all_scope(const cli_args *a, cli_error *err) {
        if (cli_args_bool(a, PK_all) && cli_args_has(a, PK_directory))
                return cli_usage_error(err, a->verb, "--all cannot be combined with --directory");
        return 0;
}

static int check_dispatch(const cli_args *a, cli_error *err) {
        if (!a->help && !cli_args_has(a, PK_prompt)) return cli_usage_error(err, a->verb, "--prompt is required");
        return 0;
}

static int check_advisor(const cli_args *a, cli_error *err) {
        if (!a->help && !cli_args_has(a, PK_model)) return cli_usage_error(err, a->verb, "--model is required");
        return 0;
}

static int check_wait(const cli_args *a, cli_error *err) {
        /* a summarizing wait ends when the task settles, and prints no tail */
        if (a->help || !cli_args_bool(a, "summarize")) return 0;
        if (cli_args_has(a, PK_timeoutMs)) return cli_usage_error(err, a->verb, "--summarize cannot be combined with --timeout");
        if (cli_args_has(a, PK_tailChars))
                return cli_usage_error(err, a->verb, "--summarize cannot be combined with --tail-chars");
        return 0;
}

static int check_result(const cli_args *a, cli_error *err) {
        if (a->help) return 0;
        json_object *fields = json_get_array(a->options, PK_fields);
        bool full = cli_args_bool(a, PK_full), diff = cli_args_bool(a, PK_diff);
        /* --full only widens the narration, so with --fields it needs that field */
        if (full && fields) {
                bool narration = false;
                for (size_t i = 0; i < json_object_array_length(fields); i++)
                        if (streq(json_object_get_string(json_object_array_get_idx(fields, i)), PK_narration))
                                narration = true;
                if (!narration) return cli_usage_error(err, a->verb, "--full requires narration in --fields");
        }
        /* --diff is a field selection of its own */
        if (diff && fields) return cli_usage_error(err, a->verb, "--diff cannot be combined with --fields");
        if (diff && full) return cli_usage_error(err, a->verb, "--diff cannot be combined with --full");
        return 0;
}

static int check_list(const cli_args *a, cli_error *err) {
        return check_all_scope(a, err);
}

static int check_watch(const cli_args *a, cli_error *err) {
        int r = check_all_scope(a, err);
        if (r < 0) return r;
        if (cli_args_bool(a, PK_all) && cli_args_has(a, PK_taskId))
                return cli_usage_error(err, a->verb, "--all cannot be combined with --task-id");
        if (a->help) return 0;
        /* batching only makes sense for summaries, and needs an interval */
        int64_t flush;
        if (!cli_args_int(a, "flushIntervalMs", &flush)) return 0;
        if (!cli_args_bool(a, PK_summaries)) return cli_usage_error(err, a->verb, "--flush-interval requires --summaries");
        if (flush == 0) return cli_usage_error(err, a->verb, "--flush-interval must be greater than zero");
        return 0;
}

static int check_doctor(const cli_args *a, cli_error *err) {
        if (!a->help && cli_args_bool(a, "stats") && cli_args_bool(a, PK_full))
                return cli_usage_error(err, a->verb, "--stats cannot be combined with --full");
        return 0;
}

/* job <action> [<name>]: `run <name>` or `list` */
static int check_job(const cli_args *a, cli_error *err) {
        if (a->help) return 0;
        const char *action = a->words ? a->words[0] : NULL;
        if (!action) return cli_usage_error(err, a->verb, "job needs an action: run <name> or list");
        if (streq(action, "run") && !a->words[1]) return cli_usage_error(err, a->verb, "job name is required");
        if (streq(action, "list") && a->words[1])
                return cli_usage_error(err, a->verb, "unexpected argument: %s", a->words[1]);
        if (!streq(action, "run") && !streq(action, "list"))
                return cli_usage_error(err, a->verb, "unknown job action: %s (use run or list)", action);
        return 0;
}

/* ---- the table ---- */

#define OPTIONS(...) ((const cli_option_help[]) { __VA_ARGS__, {} })
#define NO_OPTIONS ((const cli_option_help[]) { {} })
#define EXAMPLES(...) ((const char *const[]) { __VA_ARGS__, NULL })

const cli_verb cli_verbs[] = {
        {
                /* no arguments: the workspace view; its texts are the top help's */
                .name = "home",
                .run = cli_run_home,
                .flags = CLI_VERB_DAEMON | CLI_VERB_HIDDEN,
                .usage = "taskferry <command> [options]",
                .description = CLI_DESCRIPTION,
                .options = OPTIONS({ "--help", NULL }, { "--version", NULL }),
                .examples = EXAMPLES("taskferry", "taskferry dispatch --prompt \"Fix the failing tests\"", "taskferry list"),
        },
        {
                /* --version, -V */
                .name = "version",
                .run = cli_run_version,
                .flags = CLI_VERB_HIDDEN,
                .options = NO_OPTIONS,
        },
        {
                .name = "dispatch",
                .run = cli_run_dispatch,
                .flags = CLI_VERB_DAEMON,
                .check = check_dispatch,
                .usage = "taskferry dispatch --prompt <text> [options]",
                .description = "Queue a background worker run (pi, OpenCode or a shell command) in a sandbox on a copy-on-write overlay.",
                .options = OPTIONS(
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
                        { "--network <proxy|none|host>", "the worker's network, default proxy: its own network namespace whose one way out is a per-task proxy allowing the model provider's endpoints and the hosts of --allow-host; none: no network at all; host: this machine's network (loopback services, the local network, the internet), recorded on the task with a warning; TASKFERRY_NETWORK or config network.mode set the default" },
                        { "--allow-host <host[:port],...>", "hosts the proxy lets this worker reach (repeatable; port 443 unless given; *.example.com for its subdomains; an IP address only when named; loopback, link-local, private and this machine's own addresses are refused unless named as an address); unions with TASKFERRY_ALLOW_HOSTS and config network.allowHosts" },
                        { "--allow-socket <path,...>", "host unix sockets bound into the sandbox, e.g. \"$SSH_AUTH_SOCK\" (repeatable; a warning says the worker can use what they serve)" },
                        { "--class <name>", "optional free-text task-class tag for external telemetry consumers; taskferry does not validate against a fixed list" },
                        { "--parent-task <id>", "fix forward from an earlier task: persisted as parentTaskId and echoed by that task's check-gate failure message; when that task is a settled dispatch in the same directory (or one above this one) with a pending changeset and its overlay, this worker starts from its changes, its changeset holds both, and accepting it supersedes (rejects) the parent's; any other parent seeds nothing" },
                        { "--disk-max <size>", "disk budget of this task's writes (overlay upper dir plus output dir; sparse files count their apparent size): bytes or a K/M/G/T suffix (50M, 2G); default TASKFERRY_TASK_DISK_MAX, else min(10G, 1/4 of the filesystem holding the overlays); past it the worker is stopped and the task crashes with disk_quota_exceeded" },
                        { "--memory-max <size>", "memory limit of this task's scope unit (MemoryMax=; MemoryHigh= is 90% of it): bytes or a K/M/G/T suffix (512M, 4G), at least 8M; default TASKFERRY_TASK_MEMORY_MAX, else half the physical memory; a worker the kernel OOM-kills at it crashes with oom_killed; a nested dispatch cannot exceed its parent's; only enforced under a systemd user manager (taskferry doctor says)" },
                        { "--tasks-max <number>", "process and thread limit of this task's scope unit (TasksMax=), at least 8; default TASKFERRY_TASK_TASKS_MAX, else 4096; a nested dispatch cannot exceed its parent's" }),
                .examples = EXAMPLES(
                        "taskferry dispatch --prompt \"Fix the failing tests\"",
                        "taskferry dispatch --prompt \"Review this change\" --model openai/gpt-5.6-sol",
                        "taskferry dispatch --prompt \"Investigate\" --require-final-marker \"^Status: (DONE|DONE_WITH_CONCERNS)$\"",
                        "taskferry dispatch --prompt \"Run one-off shell tooling\" --no-sandbox",
                        "taskferry dispatch --prompt \"Update the shared cache dir\" --rw-bind /home/user/.cache/myapp",
                        "taskferry dispatch --prompt \"Review the vendored deps\" --ro-bind /home/user/reference-repo",
                        "taskferry dispatch --prompt \"Fix the failing tests\" --class implementer",
                        "taskferry dispatch --prompt \"Fix: check gate failed\" --parent-task oc_msgabc12"),
        },
        {
                .name = "cancel",
                .run = cli_run_cancel,
                .flags = CLI_VERB_DAEMON,
                .positional = CLI_POSITIONAL_TASK_ID,
                .usage = "taskferry cancel <id> [--grace-ms <number>]",
                .description = "Cancel queued or running work.",
                .options = OPTIONS(
                        { "--grace-ms <number>", "milliseconds before SIGKILL, default 5000" }),
                .examples = EXAMPLES("taskferry cancel <id>", "taskferry cancel <id> --grace-ms 10000"),
        },
        {
                .name = "accept",
                .run = cli_run_accept,
                .flags = CLI_VERB_DAEMON,
                .positional = CLI_POSITIONAL_TASK_ID,
                .usage = "taskferry accept <id> [--force] [--allow-config]",
                .description = "Apply a dispatch task's pending changeset to its target directory. Exits nonzero when the apply fails; the response's `applied` field (`applied: false`) is the authoritative signal to check when scripting.",
                .options = OPTIONS(
                        { "--force", "apply the changeset even though its check gate failed, timed out, is still running, or was interrupted by a daemon restart; records checkOverride: true (it does not imply --allow-config)" },
                        { "--allow-config", "land a changeset that adds or changes files that can run code on this machine later (agent or editor configuration, .envrc, .gitattributes, .gitmodules, hook managers, CI workflows, new executables, symlinks leaving the repository); without it such an accept is refused and, on a terminal, asks first" }),
                .examples = EXAMPLES("taskferry accept <id>", "taskferry accept <id> --force", "taskferry accept <id> --allow-config"),
        },
        {
                .name = "reject",
                .run = cli_run_reject,
                .flags = CLI_VERB_DAEMON,
                .positional = CLI_POSITIONAL_TASK_ID,
                .usage = "taskferry reject <id>",
                .description = "Discard a task's pending changeset without applying it.",
                .options = NO_OPTIONS,
                .examples = EXAMPLES("taskferry reject <id>"),
        },
        {
                .name = "output",
                .run = cli_run_output,
                .flags = CLI_VERB_DAEMON,
                .positional = CLI_POSITIONAL_TASK_ID,
                .usage = "taskferry output <id> [--path <relpath>]",
                .description = "List a task's scratch output directory (or read one file in it). Every dispatch reserves a per-task writable directory at <stateDir>/outputs/<id>/, exposed to the worker as $TASKFERRY_OUTPUT_DIR. When bwrap sandboxing is active, taskferry rw-binds that directory at the same path. With --no-sandbox, it remains a normal host directory. Works on every terminal status (done, crashed, and cancelled, including a done task whose incomplete flag is true).",
                .options = OPTIONS(
                        { "--path <relpath>", "read one file relative to the task's output dir instead of listing; rejects any path that would escape the per-task directory (e.g. \"../sibling\", absolute paths)" },
                        { "--max-output-file-bytes <number>", "maximum bytes to read for a single file when --path is used; default 524288 (512 KiB); capped by daemon response budget 1 MiB and provably safe ceiling 174080 ((1 MiB-4096)/6, 6× for control chars). Control-heavy files that would exceed wire budget now surface a clear would-exceed-daemon-response-limit error naming the knob, not generic RESPONSE_TOO_LARGE. Precedence: flag > TASKFERRY_MAX_OUTPUT_FILE_BYTES env var > config.json maxOutputFileBytes > built-in default" }),
                .examples = EXAMPLES(
                        "taskferry output <id>",
                        "taskferry output <id> --path deliverable.txt",
                        "taskferry output <id> --path deliverable.txt --max-output-file-bytes 1048576"),
        },
        {
                .name = "wait",
                .run = cli_run_wait,
                .flags = CLI_VERB_DAEMON,
                .positional = CLI_POSITIONAL_TASK_ID,
                .check = check_wait,
                .usage = "taskferry wait <id> [options]",
                .description = "Wait for a task to settle or return its current status after a timeout.",
                .options = OPTIONS(
                        { "--timeout <duration>", "maximum wait, e.g. 10000 (ms), 30s, 5m, 1h" },
                        { "--tail-chars <number>", "include this many trailing text characters on timeout" },
                        { "--full", "include directory, model, and log details" },
                        { "--summarize", "print periodic live summaries while waiting; exits when the task settles" }),
                .examples = EXAMPLES(
                        "taskferry wait <id>",
                        "taskferry wait <id> --timeout 10s --tail-chars 1000",
                        "taskferry wait <id> --summarize"),
        },
        {
                .name = "advisor",
                .run = cli_run_advisor,
                .flags = CLI_VERB_DAEMON,
                .check = check_advisor,
                .usage = "taskferry advisor --model <id> [--prompt <text>] [options]",
                .description = "Consult a stronger model for a second opinion and block until it answers. With no --prompt, auto-attaches the caller's own recent context (a Claude Code session transcript, or the calling ferry's own task log) and asks for structured, actionable pushback.",
                .options = OPTIONS(
                        { "--model <id>", "required" },
                        { "--prompt <text>", "optional; auto-attaches context and asks for methodical review when omitted" },
                        { "--directory <path>", "defaults to the current workspace" },
                        { "--variant <name>", "optional model reasoning variant" },
                        { "--session-id <id>", "continue a recent advisor session" },
                        { "--timeout <duration>", "maximum wait, e.g. 10000 (ms), 30s, 5m, 1h" },
                        { "--executor <opencode|pi|shell>", "worker backend to dispatch through, default pi" },
                        { "--class <name>", "optional free-text task-class tag for external telemetry consumers; taskferry does not validate against a fixed list" },
                        { "--parent-task <id>", "tag this dispatch as fixing/retrying an earlier task; persisted as parentTaskId, and echoed by that task's check-gate failure message" },
                        { "--summarize-context", "condense the auto-attached context through a throwaway model call before sending it (off by default)" }),
                .examples = EXAMPLES(
                        "taskferry advisor --model openai/gpt-5.6-sol",
                        "taskferry advisor --prompt \"How should I split this module?\" --model openai/gpt-5.6-sol",
                        "taskferry advisor --prompt \"Review this design\" --model zai/glm-5.2 --timeout 30s"),
        },
        {
                .name = "status",
                .run = cli_run_status,
                .flags = CLI_VERB_DAEMON,
                .positional = CLI_POSITIONAL_TASK_ID,
                .usage = "taskferry status <id> [--full]",
                .description = "Inspect task lifecycle and log activity.",
                .options = OPTIONS(
                        { "--full", "include all recorded task details" }),
                .examples = EXAMPLES("taskferry status <id>", "taskferry status <id> --full"),
        },
        {
                .name = "tail",
                .run = cli_run_tail,
                .flags = CLI_VERB_DAEMON,
                .positional = CLI_POSITIONAL_TASK_ID,
                .usage = "taskferry tail <id> [--chars <number>]",
                .description = "Read the latest model text for a task.",
                .options = OPTIONS(
                        { "--chars <number>", "characters to return, default 1000, maximum 131072" }),
                .examples = EXAMPLES("taskferry tail <id>", "taskferry tail <id> --chars 2000"),
        },
        {
                .name = "summary",
                .run = cli_run_summary,
                .flags = CLI_VERB_DAEMON,
                .positional = CLI_POSITIONAL_TASK_ID,
                .usage = "taskferry summary <id> [options]",
                .description = "Create a bounded report or activity summary for a task.",
                .options = OPTIONS(
                        { "--mode report|activity", "summary mode, default report" },
                        { "--max-words <number>", "target length from 75 through 300" },
                        { "--wait", "wait for active work before summarizing" }),
                .examples = EXAMPLES("taskferry summary <id>", "taskferry summary <id> --mode activity --wait"),
        },
        {
                .name = "result",
                .run = cli_run_result,
                .flags = CLI_VERB_DAEMON,
                .positional = CLI_POSITIONAL_TASK_ID,
                .check = check_result,
                .usage = "taskferry result <id> [options]",
                .description = "Read the final model result for a task.",
                .options = OPTIONS(
                        { "--full", "include untruncated narration" },
                        { "--fields <comma-list>", "request selected result fields" },
                        { "--diff", "print the task's changeset diff (read-only; cannot combine with --fields or --full)" }),
                .examples = EXAMPLES(
                        "taskferry result <id>",
                        "taskferry result <id> --full",
                        "taskferry result <id> --fields message,tokens",
                        "taskferry result <id> --diff"),
        },
        {
                .name = "diff",
                .run = cli_run_diff,
                .flags = CLI_VERB_DAEMON,
                .positional = CLI_POSITIONAL_TASK_ID,
                .usage = "taskferry diff <id> [--stat] [-- <path>...]",
                .description = "Show a task's pending changeset as a patch: coloured and paged on a terminal, plain when piped.",
                .options = OPTIONS(
                        { "--stat", "print a diffstat of the patch (git apply --stat) instead of the patch" },
                        { "-- <path>...", "limit the patch to these files or directories (relative to the task's directory)" }),
                .examples = EXAMPLES(
                        "taskferry diff <id>",
                        "taskferry diff <id> | git apply --check",
                        "taskferry diff <id> --stat",
                        "taskferry diff <id> -- src/main.c docs"),
        },
        {
                .name = "list",
                .run = cli_run_list,
                .flags = CLI_VERB_DAEMON,
                .check = check_list,
                .usage = "taskferry list [options]",
                .description = "List tasks scoped to a workspace, newest first.",
                .options = OPTIONS(
                        { "--directory <path>", "workspace to inspect, defaults to the current workspace; also matches tasks dispatched into any git worktree of the same repo" },
                        { "--all", "include tasks from every workspace" },
                        { "--limit <number>", "limit displayed rows while preserving counts" }),
                .examples = EXAMPLES("taskferry list", "taskferry list --limit 20", "taskferry list --all"),
        },
        {
                .name = "watch",
                .run = cli_run_watch,
                .flags = CLI_VERB_DAEMON,
                .check = check_watch,
                .usage = "taskferry watch [options]",
                .description = "Stream task state events for a workspace.",
                .options = OPTIONS(
                        { "--directory <path>", "workspace to watch, defaults to the current workspace; also matches tasks dispatched into any git worktree of the same repo" },
                        { "--all", "stream events from every workspace, not just one" },
                        { "--task-id <id>", "scope the stream to one task; exits automatically once it settles" },
                        { "--format toon|ndjson", "stream format, default toon" },
                        { "--summaries", "request activity summaries when available" },
                        { "--flush-interval <duration>", "batch events and print them together on this interval, e.g. 30s, 5m, 1h; requires --summaries" }),
                .examples = EXAMPLES(
                        "taskferry watch",
                        "taskferry watch --all",
                        "taskferry watch --task-id <id> --summaries",
                        "taskferry watch --format ndjson",
                        "taskferry watch --summaries --flush-interval 5m"),
        },
        {
                .name = "context",
                .run = cli_run_context,
                .flags = CLI_VERB_DAEMON,
                .usage = "taskferry context [options]",
                .description = "Print compact current-workspace context for an agent hook.",
                .options = OPTIONS(
                        { "--directory <path>", "workspace to inspect, defaults to the current workspace; also matches tasks dispatched into any git worktree of the same repo" },
                        { "--format toon|claude-hook|codex-hook", "context format, default toon" }),
                .examples = EXAMPLES(
                        "taskferry context",
                        "taskferry context --format claude-hook",
                        "taskferry context --format codex-hook"),
        },
        {
                .name = "doctor",
                .run = cli_run_doctor,
                .flags = CLI_VERB_DAEMON,
                .check = check_doctor,
                .usage = "taskferry doctor [--full] [--stats]",
                .description = "Check daemon health and installation details, or report aggregate task-history stats.",
                .options = OPTIONS(
                        { "--full", "include complete health details" },
                        { "--stats", "report aggregate task-history stats instead of environment checks (mutually exclusive with --full)" }),
                .examples = EXAMPLES("taskferry doctor", "taskferry doctor --full", "taskferry doctor --stats"),
        },
        {
                .name = "setup",
                .usage = "taskferry setup",
                .description = "Install dependencies and create the CLI and OpenCode plugin symlinks without contacting the daemon.",
                .options = NO_OPTIONS,
                .examples = EXAMPLES("taskferry setup"),
        },
        {
                .name = "init",
                .run = cli_run_init,
                .usage = "taskferry init",
                .description = "Scaffold .taskferry.toml for this repo, detecting a check command from the project's ecosystem.",
                .options = NO_OPTIONS,
                .examples = EXAMPLES("taskferry init"),
        },
        {
                .name = "job",
                .run = cli_run_job,
                .flags = CLI_VERB_DAEMON,
                .positional = CLI_POSITIONAL_WORDS,
                .check = check_job,
                .usage = "taskferry job run <name> | taskferry job list",
                .description = "Dispatch the timer job ${XDG_CONFIG_HOME:-~/.config}/taskferry/jobs/<name>.toml as an ordinary task (what taskferry-job@<name>.service runs), or list the jobs with their timers and last tasks; see taskferry-jobs(5).",
                .options = NO_OPTIONS,
                .examples = EXAMPLES(
                        "taskferry job run demo",
                        "taskferry job list",
                        "systemctl --user enable --now taskferry-job@demo.timer"),
        },
        {}
};

static const cli_verb *verb_named(const char *name, bool hidden) {
        for (const cli_verb *v = cli_verbs; name && v->name; v++)
                if (!!(v->flags & CLI_VERB_HIDDEN) == hidden && streq(v->name, name)) return v;
        return NULL;
}

const cli_verb *cli_verb_find(const char *name) {
        return verb_named(name, false);
}

const cli_verb *cli_verb_hidden(const char *name) {
        return verb_named(name, true);
}

/* v's option row for `flag`: the one whose label's first word it is. */
static const cli_option_help *verb_option(const cli_verb *v, const char *flag) {
        size_t n = strlen(flag);
        for (const cli_option_help *o = v->options; o && o->label; o++)
                if (strncmp(o->label, flag, n) == 0 && (o->label[n] == 0 || o->label[n] == ' ')) return o;
        return NULL;
}

bool cli_verb_accepts(const cli_verb *v, const char *flag) {
        return verb_option(v, flag) != NULL;
}

const char *cli_verb_argument(const cli_verb *v, const char *flag) {
        const cli_option_help *o = verb_option(v, flag);
        if (!o || !o->label[strlen(flag)]) return NULL;
        return o->label + strlen(flag) + 1;
}

char *cli_available_commands(void) {
        char *list = strdup("");
        for (const cli_verb *v = cli_verbs; list && v->name; v++) {
                if ((v->flags & CLI_VERB_HIDDEN) || !v->run) continue;
                char *n = strdup_printf("%s%s%s", list, *list ? ", " : "", v->name);
                free(list);
                list = n;
        }
        return list;
}

/* ---- help ---- */

static char *verb_flags_help(const cli_verb *v) {
        if (!v) return strdup("Run `taskferry --help` for usage");
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        if (!f) return NULL;
        fprintf(f, "Valid flags for %s: ", v->name);
        if (!v->options[0].label) fputs("none", f);
        for (const cli_option_help *o = v->options; o->label; o++)
                fprintf(f, "%s%s", o == v->options ? "" : ", ", o->label);
        fprintf(f, ". Run `taskferry %s --help` for details", v->name);
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

char *cli_valid_flags_help(const char *command) {
        return verb_flags_help(command ? cli_verb_find(command) : NULL);
}

int cli_usage_error(cli_error *err, const cli_verb *v, const char *fmt, ...) {
        _cleanup_free_ char *help = verb_flags_help(v);
        _cleanup_free_ char *msg = NULL;
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
        va_end(ap);
        return cli_error_usage(err, help, "%s", strempty(msg));
}

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

/* The top help: the home row's texts, its option labels as a list, and the
 * commands this build runs. */
static json_object *top_help_object(const cli_verb *home) {
        _cleanup_json_ json_object *o = json_object_new_object();
        _cleanup_json_ json_object *cmds = json_object_new_array(), *opts = json_object_new_array();
        if (!o || !cmds || !opts) return NULL;
        for (const cli_verb *v = cli_verbs; v->name; v++)
                if (!(v->flags & CLI_VERB_HIDDEN) && v->run) json_object_array_add(cmds, json_object_new_string(v->name));
        for (const cli_option_help *h = home->options; h->label; h++)
                json_object_array_add(opts, json_object_new_string(h->label));
        if (json_add_string(o, "command", "taskferry") < 0 || json_add_string(o, "usage", home->usage) < 0 ||
            json_add_string(o, "description", home->description) < 0 || json_add(o, "commands", TAKE_PTR(cmds)) < 0 ||
            json_add(o, "options", TAKE_PTR(opts)) < 0 || json_add(o, "examples", string_array(home->examples)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

json_object *cli_help_object(const char *command) {
        const cli_verb *v = command ? cli_verb_find(command) : NULL;
        if (!v) return top_help_object(cli_verb_hidden("home"));
        _cleanup_json_ json_object *o = json_object_new_object();
        if (!o) return NULL;
        json_object *opts = json_object_new_object();
        if (!opts) return NULL;
        for (const cli_option_help *h = v->options; h->label; h++)
                json_add_string(opts, h->label, h->text);
        if (json_add_string(o, "command", v->name) < 0 || json_add_string(o, "usage", v->usage) < 0 ||
            json_add_string(o, "description", v->description) < 0 || json_add(o, "options", opts) < 0 ||
            json_add(o, "examples", string_array(v->examples)) < 0)
                return NULL;
        return TAKE_PTR(o);
}
