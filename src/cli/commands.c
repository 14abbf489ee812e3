/* The commands that talk to the daemon, and the connection they share (commands.h). */
#include "commands.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "changeset-risk.h"
#include "cli-diff.h"
#include "cli-pager.h"
#include "cli-advisor.h"
#include "cli-project.h"
#include "cli-resolve.h"
#include "config.h"
#include "json-util.h"
#include "protocol.h"
#include "protocol-keys.h"
#include "taskferry-config.h"
#include "macro.h"
#include "path-util.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"

extern char **environ;

void cli_context_done(cli_context *ctx) {
        cli_client_close(&ctx->client);
        tf_paths_done(&ctx->paths);
}

static int ensure_connected(cli_context *ctx, cli_error *err) {
        if (ctx->connected) return 0;
        int r = ctx->paths.home ? 0 : tf_paths_resolve(&ctx->paths);
        if (r < 0) return cli_error_fail(err, NULL, "cannot resolve taskferry paths: %s", strerror(-r));
        r = cli_client_open(&ctx->client, &ctx->paths, err);
        if (r < 0) return r;
        ctx->connected = true;
        return 0;
}

int cli_call(cli_context *ctx, const char *method, json_object *params, json_object **ret, cli_error *err) {
        const cli_verb *v = ctx->args->verb;
        if (!(v->flags & CLI_VERB_DAEMON)) {
                cli_error_fail(err, NULL, "internal error: taskferry %s is not a command that talks to the daemon", v->name);
                return -EPERM;
        }
        int r = ensure_connected(ctx, err);
        if (r < 0) return r;
        return cli_client_call(&ctx->client, method, params, ret, err);
}
#define call cli_call

/* What TOON prints is the daemon's result itself: r, and on success
 * *ret_value a second reference to *ret_raw. */
static int print_as_is(int r, json_object **ret_value, json_object **ret_raw) {
        if (r < 0) return r;
        *ret_value = json_object_get(*ret_raw);
        return 0;
}

/* *ret_value = value, the projection of raw: -ENOMEM when there was a
 * result but its projection could not be made. */
static int projected(json_object *raw, json_object *value, json_object **ret_value) {
        if (raw && !value) return -ENOMEM;
        *ret_value = value;
        return 0;
}

static json_object *task_params(const cli_context *ctx) {
        json_object *p = json_object_new_object();
        if (p && json_add_string(p, PK_taskId, ctx->args->task_id) < 0) {
                json_object_put(p);
                return NULL;
        }
        return p;
}

/* Copy option `key` from the parsed flags into params when set. */
static int pass_option(json_object *params, const cli_args *a, const char *key) {
        json_object *v = NULL;
        if (!json_object_object_get_ex(a->options, key, &v)) return 0;
        return json_add(params, key, json_object_get(v));
}

static json_object *env_object(void) {
        json_object *env = json_object_new_object();
        if (!env) return NULL;
        for (char **e = environ; e && *e; e++) {
                const char *eq = strchr(*e, '=');
                if (!eq || eq == *e) continue;
                _cleanup_free_ char *name = strndup(*e, (size_t) (eq - *e));
                if (!name || json_add_string(env, name, eq + 1) < 0) {
                        json_object_put(env);
                        return NULL;
                }
        }
        return env;
}

static char *current_dir(void) {
        return getcwd(NULL, 0);
}

/* --directory or `fallback`, then realpath, which must be a directory. */
static int directory_param(const cli_args *a, const char *fallback, char **ret, cli_error *err) {
        const char *d = cli_args_string(a, PK_directory);
        return cli_normalize_directory(d ? d : fallback, ret, err);
}

/* Workspace root of the cwd (or --directory), normalized. */
int cli_workspace_directory(const cli_args *a, char **ret, cli_error *err) {
        const char *d = cli_args_string(a, PK_directory);
        if (d) return cli_normalize_directory(d, ret, err);
        _cleanup_free_ char *cwd = current_dir();
        if (!cwd) return cli_error_fail(err, NULL, "cannot determine the current directory: %s", strerror(errno));
        _cleanup_free_ char *root = NULL;
        int r = cli_workspace_root(cwd, &root);
        if (r < 0) return r;
        return cli_normalize_directory(root, ret, err);
}

/* task.wait's default timeoutMs: TASKFERRY_WAIT_DEFAULT_TIMEOUT_MS,
 * else config.json's waitDefaultTimeoutMs, else 900000; none when the env
 * says "0". A malformed config.json is the error. */
static int add_default_wait_timeout(json_object *params, cli_error *err) {
        _cleanup_json_ json_object *cfg = NULL;
        int r = cli_load_config(&cfg, err);
        if (r < 0) return r;
        double ms;
        if (config_wait_default_timeout(cfg, getenv("TASKFERRY_WAIT_DEFAULT_TIMEOUT_MS"), &ms) > 0 &&
            json_add(params, PK_timeoutMs, json_new_number(ms)) < 0)
                return -ENOMEM;
        return 0;
}

int cli_dispatch(cli_context *ctx, json_object *options, const char *directory, const char *prompt, size_t prompt_len,
                 const char *job, json_object **ret, cli_error *err) {
        _cleanup_json_ json_object *params = json_object_new_object();
        if (!params) return -ENOMEM;
        if (json_add(params, PK_env, env_object()) < 0 ||
            json_add(params, PK_prompt, json_object_new_string_len(prompt, (int) prompt_len)) < 0 ||
            json_add_string(params, PK_directory, directory) < 0)
                return -ENOMEM;
        static const char *const passthrough[] = {
                PK_model,  PK_variant, PK_sessionId, PK_finalMarker, PK_noSandbox,    PK_noOverlay, PK_allowedDirs,
                PK_rwBind, PK_roBind,  PK_executor,  PK_class,       PK_parentTaskId, PK_diskMax,   PK_memoryMax,
                PK_tasksMax, PK_network, PK_allowHosts, PK_allowSockets, NULL
        };
        for (size_t i = 0; passthrough[i]; i++) {
                json_object *v = NULL;
                if (json_object_object_get_ex(options, passthrough[i], &v) &&
                    json_add(params, passthrough[i], json_object_get(v)) < 0)
                        return -ENOMEM;
        }
        /* the timer job it came from (`taskferry job run`), for `job list` */
        if (job && json_add_string(params, PK_job, job) < 0) return -ENOMEM;
        const char *origin = getenv("CLAUDE_CODE_SESSION_ID");
        if (!isempty(origin) && json_add_string(params, PK_originSessionId, origin) < 0) return -ENOMEM;
        int r = call(ctx, "task.dispatch", params, ret, err);
        /* the daemon decides whether a model is needed (executor, a model
         * inherited through --session-id); a missing one is still the
         * caller's usage error (exit 2) */
        if (r < 0 && streq_ptr(err->code, "REQUEST_FAILED") && err->text &&
            (startswith(err->text, "error: --model is required\n") || streq(err->text, "--model is required")))
                err->exit_code = CLI_EXIT_USAGE;
        /* the daemon's warnings (a bind that exposes a deny-listed path) go to stderr */
        json_object *w = r >= 0 && *ret ? json_get_array(*ret, PK_warnings) : NULL;
        for (size_t i = 0; w && i < json_object_array_length(w); i++)
                fprintf(stderr, "%s\n", json_object_get_string(json_object_array_get_idx(w, i)));
        return r;
}

/* What dispatch and advisor read first: the current directory, --directory
 * resolved against it, and --prompt (stdin's bytes for "-", read as
 * <command>'s). */
typedef struct command_input {
        char *cwd, *directory;
        char *stdin_prompt; /* what "-" read, else NULL */
        const char *prompt; /* --prompt or stdin_prompt; NULL: none given */
        size_t prompt_len;  /* bytes */
} command_input;

static void command_input_done(command_input *in) {
        free(in->cwd);
        free(in->directory);
        free(in->stdin_prompt);
}

static int command_input_read(cli_context *ctx, const char *command, command_input *in, cli_error *err) {
        *in = (command_input) {0};
        if (!(in->cwd = current_dir()))
                return cli_error_fail(err, NULL, "cannot determine the current directory: %s", strerror(errno));
        int r = directory_param(ctx->args, in->cwd, &in->directory, err);
        if (r < 0) return r;
        in->prompt = cli_args_string(ctx->args, PK_prompt);
        if (streq_ptr(in->prompt, "-")) {
                r = cli_read_prompt(STDIN_FILENO, command, ctx->interrupted, &in->stdin_prompt, &in->prompt_len, err);
                if (r < 0) return r;
                in->prompt = in->stdin_prompt;
        } else
                in->prompt_len = in->prompt ? strlen(in->prompt) : 0;
        return 0;
}

int cli_run_dispatch(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        _cleanup_(command_input_done) command_input in = {0};
        int r = command_input_read(ctx, "dispatch", &in, err);
        if (r < 0) return r;
        r = cli_dispatch(ctx, ctx->args->options, in.directory, in.prompt, in.prompt_len, NULL, ret_raw, err);
        return print_as_is(r, ret_value, ret_raw);
}

int cli_run_cancel(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params || pass_option(params, ctx->args, PK_graceMs) < 0) return -ENOMEM;
        return print_as_is(call(ctx, "task.cancel", params, ret_raw, err), ret_value, ret_raw);
}

/* The daemon refused an accept for files that can run code on this machine
 * (E_CHANGESET_RISKS): on a terminal (stdin and stderr), list them and ask.
 * True when the answer is yes. */
static bool accept_risks_confirmed(const cli_error *err) {
        if (!streq_ptr(err->code, E_CHANGESET_RISKS) || !isatty(STDIN_FILENO) || !isatty(STDERR_FILENO)) return false;
        /* the daemon's text: the error line and the risks, then its help */
        const char *text = strempty(err->text);
        const char *help = strstr(text, "\nhelp:");
        size_t n = help ? (size_t) (help - text) : strlen(text);
        _cleanup_free_ char *shown = cli_escape_controls(text, n);
        fprintf(stderr, "%s\nLand these anyway? [y/N] ", shown ? shown : "");
        fflush(stderr);
        char line[64];
        if (!fgets(line, sizeof line, stdin)) {
                fputc('\n', stderr);
                return false;
        }
        line[strcspn(line, "\r\n")] = 0;
        return strcasecmp(line, "y") == 0 || strcasecmp(line, "yes") == 0;
}

int cli_run_accept(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params) return -ENOMEM;
        if (cli_args_bool(ctx->args, PK_force) && json_add_bool(params, PK_force, true) < 0) return -ENOMEM;
        if (cli_args_bool(ctx->args, PK_allowConfig) && json_add_bool(params, PK_allowConfig, true) < 0) return -ENOMEM;
        json_object *res = NULL;
        int r = call(ctx, "task.accept", params, &res, err);
        if (r < 0 && accept_risks_confirmed(err)) {
                /* asked and answered yes: the same request, allowing them */
                cli_error_done(err);
                if (json_add_bool(params, PK_allowConfig, true) < 0) return -ENOMEM;
                r = call(ctx, "task.accept", params, &res, err);
        }
        if (r < 0) return r;
        *ret_raw = res;
        const char *task_id = json_get_string(res, PK_taskId);
        if (!task_id) task_id = ctx->args->task_id;
        json_object *applied = NULL;
        json_object_object_get_ex(res, PK_applied, &applied);
        if (applied && json_object_is_type(applied, json_type_boolean) && !json_object_get_boolean(applied)) {
                _cleanup_free_ char *text = cli_accept_failure_text(task_id, json_get_string(res, PK_reason));
                if (!text) return -ENOMEM;
                return cli_error_fail(err, NULL, "%s", text);
        }
        if (json_get_bool(res, PK_cleanupFailed, false))
                fprintf(stderr, "warning: changeset applied, but overlay cleanup failed -- %s's overlay dir remains on disk (a daemon restart will sweep it)\n", task_id);
        if (json_get_bool(res, PK_applied, false)) {
                const char *check = json_get_string(res, PK_checkStatus);
                if (!check || streq(check, "none"))
                        fprintf(stderr, "warning: changeset applied, but this repo declares no check command in .taskferry.toml -- nothing was verified before landing\n");
        }
        return print_as_is(0, ret_value, ret_raw);
}

int cli_run_reject(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params) return -ENOMEM;
        int r = call(ctx, "task.reject", params, ret_raw, err);
        if (r < 0) return r;
        if (json_get_bool(*ret_raw, PK_cleanupFailed, false)) {
                const char *task_id = json_get_string(*ret_raw, PK_taskId);
                fprintf(stderr, "warning: changeset rejected, but overlay cleanup failed -- %s's overlay dir remains on disk (a daemon restart will sweep it)\n",
                        task_id ? task_id : ctx->args->task_id);
        }
        return print_as_is(0, ret_value, ret_raw);
}

/* status and wait print the lean status (the whole record with --full). */
static int lean_status(int r, const cli_args *a, json_object **ret_value, json_object **ret_raw) {
        if (r < 0) return r;
        return projected(*ret_raw, cli_lean_status(*ret_raw, cli_args_bool(a, PK_full)), ret_value);
}

int cli_run_status(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params) return -ENOMEM;
        return lean_status(call(ctx, "task.status", params, ret_raw, err), ctx->args, ret_value, ret_raw);
}

int cli_run_wait(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        const cli_args *a = ctx->args;
        if (cli_args_bool(a, "summarize"))
                return cli_error_usage(err, "Run `taskferry wait <id>` without --summarize",
                                       "wait --summarize is not available in this build yet");
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params) return -ENOMEM;
        if (cli_args_has(a, PK_timeoutMs)) {
                if (pass_option(params, a, PK_timeoutMs) < 0) return -ENOMEM;
        } else {
                /* --timeout, else the default chain */
                int r = add_default_wait_timeout(params, err);
                if (r < 0) return r;
        }
        if (pass_option(params, a, PK_tailChars) < 0) return -ENOMEM;
        return lean_status(call(ctx, "task.wait", params, ret_raw, err), a, ret_value, ret_raw);
}

int cli_run_result(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        const cli_args *a = ctx->args;
        bool diff = cli_args_bool(a, PK_diff);
        bool full = cli_args_bool(a, PK_full);
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params) return -ENOMEM;
        json_object *fields = NULL;
        if (diff) {
                fields = json_object_new_array();
                if (!fields || json_object_array_add(fields, json_object_new_string(PK_diff)) < 0 ||
                    json_add(params, PK_fields, fields) < 0)
                        return -ENOMEM;
        } else if (cli_args_has(a, PK_fields)) {
                if (pass_option(params, a, PK_fields) < 0) return -ENOMEM;
                fields = json_get_array(params, PK_fields);
        }
        if (full && !diff && json_add_bool(params, PK_full, true) < 0) return -ENOMEM;
        int r = call(ctx, "task.result", params, ret_raw, err);
        if (r == -EBADMSG && streq_ptr(err->code, "RESPONSE_TOO_LARGE")) {
                bool diff_requested = !fields;
                for (size_t i = 0; fields && i < json_object_array_length(fields); i++)
                        if (streq(json_object_get_string(json_object_array_get_idx(fields, i)), PK_diff))
                                diff_requested = true;
                const char *id = a->task_id;
                if (diff_requested)
                        return cli_error_fail(err, "RESPONSE_TOO_LARGE",
                                              "error: the result payload for task %s exceeds the daemon's response size cap (1 MiB)\n"
                                              "help: the payload includes the task's diff (only the task's own changes); read the "
                                              "patch directly at %s/diffs/%s.patch, or fetch a narrower set of fields instead "
                                              "(e.g. \"taskferry result %s --fields message,tokens\")",
                                              id, ctx->paths.state_dir, id, id);
                return cli_error_fail(err, "RESPONSE_TOO_LARGE",
                                      "error: the result payload for task %s exceeds the daemon's response size cap (1 MiB)\n"
                                      "help: fetch a narrower set of fields instead (e.g. \"taskferry result %s --fields message,tokens\")",
                                      id, id);
        }
        if (r < 0) return r;
        /* the lean result; what --full, --fields or --diff asked for as it is */
        return projected(*ret_raw, cli_lean_result(*ret_raw, full, cli_args_has(a, PK_fields) || diff), ret_value);
}

int cli_call_workspace(cli_context *ctx, const char *method, char **ret_directory, json_object **ret, cli_error *err) {
        _cleanup_free_ char *directory = NULL;
        int r = cli_workspace_directory(ctx->args, &directory, err);
        if (r < 0) return r;
        _cleanup_json_ json_object *params = json_object_new_object();
        if (!params || json_add_string(params, PK_directory, directory) < 0) return -ENOMEM;
        r = call(ctx, method, params, ret, err);
        if (r >= 0 && ret_directory) *ret_directory = TAKE_PTR(directory);
        return r;
}

int cli_run_list(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        int r;
        if (cli_args_bool(ctx->args, PK_all)) {
                /* every workspace: no directory */
                _cleanup_json_ json_object *params = json_object_new_object();
                if (!params) return -ENOMEM;
                r = call(ctx, "task.list", params, ret_raw, err);
        } else
                r = cli_call_workspace(ctx, "task.list", NULL, ret_raw, err);
        if (r < 0) return r;
        int64_t limit = CLI_DEFAULT_LIST_LIMIT;
        (void) cli_args_int(ctx->args, "limit", &limit);
        return projected(*ret_raw, cli_project_list(*ret_raw, limit), ret_value);
}

int cli_run_tail(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params || pass_option(params, ctx->args, PK_chars) < 0) return -ENOMEM;
        return print_as_is(call(ctx, "task.tail", params, ret_raw, err), ret_value, ret_raw);
}

/* ---- advisor: a stronger model's second opinion, with the caller's context ---- */

/* The auto-attached context: the Claude Code transcript when
 * $CLAUDE_CODE_SESSION_ID is set, else the calling task's task.tail when
 * $TASKFERRY_TASK_ID is set; *ret_text NULL: none. */
static int advisor_context(cli_context *ctx, const char *cwd, uint64_t budget, char **ret_source, char **ret_text,
                           cli_error *err) {
        *ret_source = *ret_text = NULL;
        const char *sid = getenv("CLAUDE_CODE_SESSION_ID");
        if (!isempty(sid)) {
                _cleanup_free_ char *path = cli_advisor_transcript_path(ctx->paths.home, cwd, sid);
                if (!path) return -ENOMEM;
                _cleanup_free_ char *text = NULL;
                int r = cli_advisor_transcript_text(path, budget, &text, err);
                if (r < 0) return r;
                if (!isempty(text)) {
                        *ret_source = strdup("claude-session");
                        if (!*ret_source) return -ENOMEM;
                        *ret_text = TAKE_PTR(text);
                }
                return 0;
        }
        const char *tid = getenv("TASKFERRY_TASK_ID");
        if (isempty(tid)) return 0;
        _cleanup_json_ json_object *params = json_object_new_object(), *res = NULL;
        if (!params || json_add_string(params, PK_taskId, tid) < 0 ||
            json_add_int(params, PK_chars, (int64_t) (budget < CLI_ADVISOR_TAIL_CHARS_MAX ? budget : CLI_ADVISOR_TAIL_CHARS_MAX)) < 0)
                return -ENOMEM;
        int r = call(ctx, "task.tail", params, &res, err);
        if (r < 0) return r;
        const char *text = json_get_string(res, PK_text);
        if (isempty(text) || streq(text, "none observed yet")) return 0;
        *ret_source = strdup("ferry-log");
        *ret_text = strdup(text);
        return *ret_source && *ret_text ? 0 : -ENOMEM;
}

/* --summarize-context: a throwaway dispatch condenses the text; any failure
 * keeps it. Returns the condensed text (malloc'd) or NULL. */
static char *advisor_condense(cli_context *ctx, const char *text, const char *directory) {
        const char *model = getenv("TASKFERRY_ADVISOR_SUMMARIZER_MODEL");
        _cleanup_free_ char *prompt = strdup_printf("%s\n\n%s", cli_advisor_condense_lead, text);
        _cleanup_json_ json_object *p = json_object_new_object(), *d = NULL, *w = NULL, *res = NULL;
        if (!prompt || !p || json_add(p, PK_env, env_object()) < 0 || json_add_string(p, PK_prompt, prompt) < 0 ||
            json_add_string(p, PK_directory, directory) < 0 ||
            json_add_string(p, PK_model, isempty(model) ? CLI_ADVISOR_SUMMARIZER_MODEL : model) < 0)
                return NULL;
        cli_error e = {0};
        if (call(ctx, "task.dispatch", p, &d, &e) < 0 || !json_get_string(d, PK_id)) {
                cli_error_done(&e);
                return NULL;
        }
        const char *id = json_get_string(d, PK_id);
        _cleanup_json_ json_object *wp = json_object_new_object(), *rp = json_object_new_object(),
                                   *fields = json_object_new_array();
        if (!wp || !rp || !fields || json_add_string(wp, PK_taskId, id) < 0 ||
            json_add_int(wp, PK_timeoutMs, CLI_ADVISOR_SUMMARIZE_TIMEOUT_MS) < 0 || json_add_string(rp, PK_taskId, id) < 0 ||
            json_object_array_add(fields, json_object_new_string(PK_message)) < 0 ||
            json_add(rp, PK_fields, json_object_get(fields)) < 0)
                return NULL;
        if (call(ctx, "task.wait", wp, &w, &e) < 0 || call(ctx, "task.result", rp, &res, &e) < 0) {
                cli_error_done(&e);
                return NULL;
        }
        const char *msg = json_get_string(res, PK_message);
        json_object *st = NULL;
        /* a still-running task answers with a "task is still ..." message: not a summary */
        if (isempty(msg) || !json_object_object_get_ex(res, PK_status, &st) ||
            !streq_ptr(json_object_get_string(st), "done"))
                return NULL;
        return strdup(msg);
}

int cli_run_advisor(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        const cli_args *a = ctx->args;
        _cleanup_(command_input_done) command_input in = {0};
        int r = command_input_read(ctx, "advisor", &in, err);
        if (r < 0) return r;
        const char *cwd = in.cwd, *directory = in.directory, *prompt = in.prompt;
        r = ctx->paths.home ? 0 : tf_paths_resolve(&ctx->paths);
        if (r < 0) return cli_error_fail(err, NULL, "cannot resolve taskferry paths: %s", strerror(-r));
        uint64_t budget = cli_advisor_budget(getenv("TASKFERRY_ADVISOR_CONTEXT_CHARS"), ctx->paths.config_file);
        _cleanup_free_ char *source = NULL, *text = NULL;
        r = advisor_context(ctx, cwd, budget, &source, &text, err);
        if (r < 0) return r;
        if (!text && isempty(prompt))
                return cli_error_usage(err,
                                       "Neither CLAUDE_CODE_SESSION_ID nor TASKFERRY_TASK_ID is set in the environment, so "
                                       "advisor has nothing to auto-attach -- pass --prompt explicitly, or run this from a "
                                       "Claude Code session or a taskferry-dispatched worker",
                                       "advisor needs context or an explicit --prompt: no context source found");
        if (text && cli_args_bool(a, "summarizeContext")) {
                _cleanup_free_ char *condensed = advisor_condense(ctx, text, directory);
                if (condensed && !streq(condensed, text)) {
                        char *label = strdup_printf("summarized %s", source);
                        if (!label) return -ENOMEM;
                        free(source);
                        source = label;
                        free(text);
                        text = TAKE_PTR(condensed);
                }
        }
        _cleanup_free_ char *full = cli_advisor_prompt(prompt, source, text);
        _cleanup_json_ json_object *params = json_object_new_object();
        if (!full || !params || json_add(params, PK_env, env_object()) < 0 || json_add_string(params, PK_prompt, full) < 0 ||
            json_add_string(params, PK_directory, directory) < 0)
                return -ENOMEM;
        static const char *const passthrough[] = {PK_model, PK_variant, PK_sessionId, PK_timeoutMs, PK_executor, PK_class,
                                                  PK_parentTaskId, NULL};
        for (size_t i = 0; passthrough[i]; i++)
                if (pass_option(params, a, passthrough[i]) < 0) return -ENOMEM;
        return print_as_is(call(ctx, "task.advisor", params, ret_raw, err), ret_value, ret_raw);
}

int cli_run_output(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params || pass_option(params, ctx->args, PK_path) < 0 ||
            pass_option(params, ctx->args, PK_maxOutputFileBytes) < 0)
                return -ENOMEM;
        return print_as_is(call(ctx, "task.output", params, ret_raw, err), ret_value, ret_raw);
}

/* ---- diff ---- */

/* Why task `id` has no patch to show (changesetStatus and the rest from
 * task.result's projection). */
static int diff_unavailable(const char *id, json_object *res, cli_error *err) {
        const char *status = json_get_string(res, PK_status);
        const char *cs = json_get_string(res, PK_changesetStatus);
        if (streq_ptr(status, "running") || streq_ptr(status, "queued"))
                return cli_error_fail(err, NULL,
                                      "error: task %s is still %s; its changeset is not extracted yet\n"
                                      "help: Run taskferry wait %s, then taskferry diff %s",
                                      id, status, id, id);
        if (!streq_ptr(cs, "pending")) {
                const char *why = streq_ptr(cs, "accepted")
                        ? "its changes were applied to the target directory (or it made none); see git diff there"
                        : streq_ptr(cs, "rejected")
                        ? "its changeset was discarded (taskferry reject, or a conflict at extraction)"
                        : "it ran without a copy-on-write overlay, so there is nothing to review";
                return cli_error_fail(err, NULL, "error: task %s has no pending changeset (changesetStatus: %s)\nhelp: %s",
                                      id, cs ? cs : "none", why);
        }
        const char *cerr = json_get_string(res, PK_changesetError);
        return cli_error_fail(err, NULL,
                              "error: the changeset of task %s was never extracted%s%s\n"
                              "help: Run taskferry status %s --full for details; taskferry reject %s discards it",
                              id, cerr ? ": " : "", strempty(cerr), id, id);
}

static char **git_stat_env(void) {
        _cleanup_strv_free_ char **env = strv_copy(environ);
        if (!env) return NULL;
        /* a program on the patch only: no repository, no user or system config */
        if (strv_env_set(&env, "GIT_CONFIG_NOSYSTEM", "1") < 0 ||
            strv_env_set(&env, "GIT_CONFIG_GLOBAL", "/dev/null") < 0 ||
            strv_env_set(&env, "GIT_CEILING_DIRECTORIES", "/") < 0)
                return NULL;
        (void) strv_env_unset(&env, "GIT_DIR");
        (void) strv_env_unset(&env, "GIT_WORK_TREE");
        (void) strv_env_unset(&env, "GIT_CONFIG_PARAMETERS");
        return TAKE_PTR(env);
}

/* `git apply --stat` reading from a pipe, writing to out_fd. */
static int start_git_stat(int out_fd, cli_pager *ret) {
        _cleanup_strv_free_ char **env = git_stat_env();
        if (!env) return -ENOMEM;
        _cleanup_free_ char *git = NULL;
        int r = find_executable("git", getenv("PATH"), &git);
        if (r < 0) return r;
        r = cli_pager_fork("git apply --stat", out_fd, ret);
        if (r != 0) return r < 0 ? r : 0;
        if (chdir("/") < 0) _exit(127);
        char *argv[] = {(char *) "git", (char *) "-c", (char *) "core.quotePath=true", (char *) "apply",
                        (char *) "--stat", NULL};
        execve(git, argv, env);
        _exit(127);
}

/* Stream the patch from fd through the filter into out (escape: show
 * control bytes visibly, for a terminal). */
static int pump_patch(int fd, char *const *paths, bool color, bool escape, FILE *out) {
        _cleanup_(cli_diff_filter_freep) cli_diff_filter *f = NULL;
        int r = cli_diff_filter_new(paths, color, out, &f);
        if (r < 0) return r;
        cli_diff_filter_set_escape(f, escape);
        static char buf[1 << 16];
        for (;;) {
                ssize_t n = read(fd, buf, sizeof buf);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) return -errno;
                if (n == 0) break;
                r = cli_diff_filter_feed(f, buf, (size_t) n);
                if (r < 0) return r;
        }
        return cli_diff_filter_finish(f);
}

/* `diff --stat`: git's lines from stat_fd (taken over) to out_fd, each file that can run
 * code on the host (the patch classified here, and the record's
 * changesetRisks, which hold the project's review_paths) with its classes
 * after it. */
static int diff_mark_stat(int patch_fd, json_object *res, int stat_fd, int out_fd, bool color) {
        _cleanup_(changeset_risks_done) ChangesetRisks risks = {};
        const char *dir = json_get_string(res, PK_directory);
        if (lseek(patch_fd, 0, SEEK_SET) == 0) {
                int r;
                if (dir) r = changeset_risks_classify(json_get_string(res, PK_diffPath), dir, NULL, &risks);
                else r = changeset_risks_read(patch_fd, NULL, NULL, -1, &risks);
                if (r < 0) changeset_risks_done(&risks); /* marks only what the record says */
        }
        _cleanup_strv_free_ char **paths = NULL, **classes = NULL;
        for (size_t i = 0; i < risks.n; i++)
                if (strv_push(&paths, risks.entries[i].path) < 0 ||
                    strv_push(&classes, risk_class_to_string(risks.entries[i].class)) < 0)
                        return -ENOMEM;
        json_object *rec = json_get_array(res, PK_changesetRisks);
        for (size_t i = 0; rec && i < json_object_array_length(rec); i++) {
                json_object *e = json_object_array_get_idx(rec, i);
                const char *p = json_get_string(e, PK_path), *c = json_get_string(e, PK_class);
                if (!p || risk_class_from_string(c) < 0) continue;
                if (strv_push(&paths, p) < 0 || strv_push(&classes, c) < 0) return -ENOMEM;
        }
        int dup_fd = fcntl(out_fd, F_DUPFD_CLOEXEC, 3);
        FILE *in = fdopen(stat_fd, "r"), *out = dup_fd >= 0 ? fdopen(dup_fd, "w") : NULL;
        if (!in || !out) {
                if (in) fclose(in);
                else safe_close(stat_fd);
                if (out) fclose(out);
                else safe_close(dup_fd);
                return -ENOMEM;
        }
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        int r = 0;
        while (r >= 0 && (n = getline(&line, &cap, in)) > 0) {
                _cleanup_free_ char *marks = cli_diff_stat_marks(line, (size_t) n, paths, classes);
                if (!marks) {
                        if (fwrite(line, 1, (size_t) n, out) != (size_t) n) r = -errno;
                        continue;
                }
                size_t l = (size_t) n - (line[n - 1] == '\n');
                if (fprintf(out, "%.*s  %s%s%s\n", (int) l, line, color ? CLI_DIFF_COLOR_OLD : "", marks,
                            color ? CLI_DIFF_COLOR_RESET : "") < 0)
                        r = -errno;
        }
        fclose(in);
        if (fclose(out) != 0 && r >= 0) r = -errno;
        return r;
}

int cli_run_diff(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        /* the patch is the output, written here: no value to print */
        (void) ret_value;
        (void) ret_raw;
        const cli_args *a = ctx->args;
        const char *id = a->task_id;
        _cleanup_json_ json_object *params = task_params(ctx);
        json_object *fields = json_object_new_array();
        if (!params || !fields) {
                json_object_put(fields);
                return -ENOMEM;
        }
        json_object_array_add(fields, json_object_new_string(PK_changesetStatus));
        json_object_array_add(fields, json_object_new_string(PK_diffPath));
        json_object_array_add(fields, json_object_new_string(PK_changesetError));
        if (cli_args_bool(a, "stat")) {
                /* the markers: the record's risks, and D to classify the patch as the daemon does */
                json_object_array_add(fields, json_object_new_string(PK_changesetRisks));
                json_object_array_add(fields, json_object_new_string(PK_directory));
        }
        if (json_add(params, PK_fields, fields) < 0) return -ENOMEM;
        /* not handed back in *ret: on an error main would print it for --json */
        _cleanup_json_ json_object *res = NULL;
        int r = call(ctx, "task.result", params, &res, err);
        if (r < 0) return r;

        const char *path = json_get_string(res, PK_diffPath);
        const char *status = json_get_string(res, PK_status);
        if (!path || !streq_ptr(json_get_string(res, PK_changesetStatus), "pending") || streq_ptr(status, "running") ||
            streq_ptr(status, "queued"))
                return diff_unavailable(id, res, err);
        /* the daemon named the file (its own state dir): open it, never follow a link there */
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        struct stat st;
        if (fd < 0 && errno == ENOENT)
                return cli_error_fail(err, NULL,
                                      "error: the patch of task %s is gone (accepted or rejected meanwhile)\n"
                                      "help: Run taskferry status %s",
                                      id, id);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return cli_error_fail(err, NULL, "error: cannot read the patch of task %s: %s\nhelp: Run taskferry status %s --full",
                                      id, fd < 0 ? strerror(errno) : "not a regular file", id);

        json_object *pl = json_get_array(a->options, "paths");
        _cleanup_strv_free_ char **paths = NULL;
        for (size_t i = 0; pl && i < json_object_array_length(pl); i++)
                if (strv_push(&paths, json_object_get_string(json_object_array_get_idx(pl, i))) < 0) return -ENOMEM;

        /* a reader that goes away (a pager quit early, `| head`) ends the output quietly */
        signal(SIGPIPE, SIG_IGN);
        bool tty = isatty(STDOUT_FILENO);
        bool color = !cli_args_bool(a, "stat") && cli_diff_want_color(STDOUT_FILENO);
        fflush(stdout);
        cli_pager pager = CLI_PAGER_INIT;
        const char *pager_cmd = tty ? cli_pager_command() : NULL;
        int out_fd = STDOUT_FILENO;
        if (pager_cmd) {
                r = cli_pager_start(pager_cmd, &pager);
                if (r >= 0) out_fd = pager.fd;
                /* no pager (fork failed): write to the terminal directly */
        }

        cli_pager git = CLI_PAGER_INIT;
        bool stat = cli_args_bool(a, "stat");
        _cleanup_close_ int stat_fd = -1; /* git's --stat output, marked by cli_diff_mark_stat */
        int final_fd = out_fd;
        if (stat) {
                int p[2];
                r = pipe2(p, O_CLOEXEC) < 0 ? -errno : 0;
                if (r >= 0) {
                        r = start_git_stat(p[1], &git);
                        safe_close(p[1]);
                        if (r < 0) safe_close(p[0]);
                        else stat_fd = p[0];
                }
                if (r < 0) {
                        (void) cli_pager_finish(&pager);
                        return cli_error_fail(err, NULL, "error: cannot run git apply --stat: %s\nhelp: install git, or run taskferry diff %s without --stat",
                                              strerror(-r), id);
                }
                out_fd = git.fd;
        }
        int dup_fd = fcntl(out_fd, F_DUPFD_CLOEXEC, 3);
        FILE *out = dup_fd >= 0 ? fdopen(dup_fd, "w") : NULL;
        if (!out) {
                safe_close(dup_fd);
                r = -errno;
        } else {
                /* a terminal never gets the worker's bytes raw; git's stat reads them raw */
                r = pump_patch(fd, paths, color, tty && !stat, out);
                if (fclose(out) != 0 && r >= 0) r = -errno;
        }
        if (stat) {
                /* git read the whole patch before writing a line: now mark its lines */
                git.fd = safe_close(git.fd);
                int k = diff_mark_stat(fd, res, TAKE_FD(stat_fd), final_fd, tty && cli_diff_want_color(STDOUT_FILENO));
                if (k < 0 && k != -EPIPE && r >= 0) r = k;
        }
        int git_status = cli_pager_finish(&git);
        (void) cli_pager_finish(&pager);
        ctx->output_done = true;
        if (r == -EPIPE) return 0;
        if (r == -E2BIG)
                return cli_error_fail(err, NULL, "error: the patch of task %s has a file header over %zu bytes\n"
                                      "help: Run taskferry result %s --diff to read it raw",
                                      id, CLI_DIFF_HEADER_MAX, id);
        if (r < 0) return cli_error_fail(err, NULL, "error: cannot write the patch of task %s: %s", id, strerror(-r));
        if (paths && r == 0)
                return cli_error_fail(err, NULL, "error: no file of task %s's changeset matches the given paths\n"
                                      "help: Run taskferry diff %s --stat to list its files",
                                      id, id);
        if (git_status != 0)
                return cli_error_fail(err, NULL, "error: git apply --stat failed (exit status %d) on the patch of task %s", git_status, id);
        return 0;
}

/* summary: [--wait first], then task.summary {taskId[,maxWords][,mode
 * only if activity][,env only if not activity]}; activity → {mode:"activity", ...}. */
int cli_run_summary(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        const cli_args *a = ctx->args;
        const char *mode = cli_args_string(a, PK_mode);
        bool activity = streq_ptr(mode, "activity");
        if (cli_args_bool(a, "wait")) {
                _cleanup_json_ json_object *wp = task_params(ctx), *st = NULL;
                if (!wp) return -ENOMEM;
                int r = add_default_wait_timeout(wp, err);
                if (r < 0) return r;
                r = call(ctx, "task.wait", wp, &st, err);
                if (r < 0) return r;
                const char *s = json_get_string(st, PK_status);
                if (streq_ptr(s, "running") || streq_ptr(s, "queued")) {
                        json_object *lean = cli_lean_status(st, false);
                        if (!lean) return -ENOMEM;
                        _cleanup_free_ char *note = strdup_printf(
                                "Task has not settled yet (status: %s); run taskferry summary --wait again to keep waiting, "
                                "or omit --wait to summarize the in-progress task", s);
                        json_add_string(lean, PK_note, note);
                        *ret_value = lean;
                        *ret_raw = json_object_get(st);
                        return 0;
                }
        }
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params || pass_option(params, a, PK_maxWords) < 0) return -ENOMEM;
        if (activity) {
                if (json_add_string(params, PK_mode, "activity") < 0) return -ENOMEM;
        } else if (json_add(params, PK_env, env_object()) < 0)
                return -ENOMEM;
        int r = call(ctx, "task.summary", params, ret_raw, err);
        if (r < 0) return r;
        if (!activity) {
                *ret_value = json_object_get(*ret_raw);
                return 0;
        }
        json_object *v = json_object_new_object();
        if (!v || json_add_string(v, PK_mode, "activity") < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        json_object_object_foreach(*ret_raw, key, val) json_add(v, key, json_object_get(val));
        *ret_value = v;
        return 0;
}

/* `bin` of the workspace view: argv[0] resolved to an absolute path (through
 * PATH when it has no slash), not symlink-resolved. */
static char *bin_path(const char *argv0) {
        char *found = NULL;
        if (!strchr(argv0, '/') && find_executable(argv0, NULL, &found) >= 0 && found[0] == '/') return found;
        free(found);
        if (argv0[0] == '/') return strdup(argv0);
        _cleanup_free_ char *cwd = current_dir();
        if (!cwd) return strdup(argv0);
        const char *rel = argv0;
        while (startswith(rel, "./")) rel += 2;
        return strdup_printf("%s/%s", cwd, rel);
}

int cli_run_home(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        _cleanup_free_ char *directory = NULL;
        int r = cli_call_workspace(ctx, "task.list", &directory, ret_raw, err);
        if (r < 0) return r;
        _cleanup_free_ char *bin = bin_path(ctx->argv0);
        if (!bin) return -ENOMEM;
        *ret_value = cli_home_view(*ret_raw, directory, bin, ctx->paths.home);
        return *ret_value ? 0 : -ENOMEM;
}

int cli_run_version(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        (void) ctx;
        (void) err;
        json_object *value = json_object_new_object();
        if (!value || json_add_string(value, "name", "taskferry") < 0 ||
            json_add_string(value, PK_version, TASKFERRY_VERSION) < 0 || json_add_int(value, PK_protocolVersion, 1) < 0) {
                json_object_put(value);
                return -ENOMEM;
        }
        *ret_value = value;
        *ret_raw = json_object_get(value);
        return 0;
}
