/* taskferry commands: spec protocol-cli.md §2.5, §2.6, §2.7, §2.8. */
#include "commands.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli-project.h"
#include "cli-resolve.h"
#include "json-util.h"
#include "taskferry-config.h"
#include "util.h"

extern char **environ;

static const char *const implemented[] = {
        "home", "version", "dispatch", "cancel", "accept", "reject", "status", "wait",
        "result", "list", "tail", "output", "context", "doctor", "init", NULL
};

bool cli_command_implemented(const char *command) {
        return strv_contains((char **) implemented, command);
}

void cli_context_done(cli_context *ctx) {
        cli_client_close(&ctx->client);
        tf_paths_done(&ctx->paths);
}

static int ensure_connected(cli_context *ctx, cli_error *err) {
        if (ctx->connected) return 0;
        int r = tf_paths_resolve(&ctx->paths);
        if (r < 0) return cli_error_fail(err, NULL, "cannot resolve taskferry paths: %s", strerror(-r));
        r = cli_client_open(&ctx->client, &ctx->paths, err);
        if (r < 0) return r;
        ctx->connected = true;
        return 0;
}

int cli_call(cli_context *ctx, const char *method, json_object *params, json_object **ret, cli_error *err) {
        int r = ensure_connected(ctx, err);
        if (r < 0) return r;
        return cli_client_call(&ctx->client, method, params, ret, err);
}
#define call cli_call

static json_object *task_params(const cli_context *ctx) {
        json_object *p = json_object_new_object();
        if (p && json_add_string(p, "taskId", ctx->args->task_id) < 0) {
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

/* --directory or `fallback`, then realpath + is-dir (§2.5). */
static int directory_param(const cli_args *a, const char *fallback, char **ret, cli_error *err) {
        const char *d = cli_args_string(a, "directory");
        return cli_normalize_directory(d ? d : fallback, ret, err);
}

/* Workspace root of the cwd (or --directory), normalized. */
int cli_workspace_directory(const cli_args *a, char **ret, cli_error *err) {
        const char *d = cli_args_string(a, "directory");
        if (d) return cli_normalize_directory(d, ret, err);
        _cleanup_free_ char *cwd = current_dir();
        if (!cwd) return cli_error_fail(err, NULL, "cannot determine the current directory: %s", strerror(errno));
        _cleanup_free_ char *root = NULL;
        int r = cli_workspace_root(cwd, &root);
        if (r < 0) return r;
        return cli_normalize_directory(root, ret, err);
}

static int run_dispatch(cli_context *ctx, json_object **ret, cli_error *err) {
        const cli_args *a = ctx->args;
        _cleanup_free_ char *cwd = current_dir();
        if (!cwd) return cli_error_fail(err, NULL, "cannot determine the current directory: %s", strerror(errno));
        _cleanup_free_ char *directory = NULL;
        int r = directory_param(a, cwd, &directory, err);
        if (r < 0) return r;

        const char *prompt = cli_args_string(a, "prompt");
        _cleanup_free_ char *stdin_prompt = NULL;
        size_t stdin_len = 0;
        if (streq(prompt, "-")) {
                r = cli_read_prompt(STDIN_FILENO, "dispatch", ctx->interrupted, &stdin_prompt, &stdin_len, err);
                if (r < 0) return r;
        }

        _cleanup_json_ json_object *params = json_object_new_object();
        if (!params) return -ENOMEM;
        if (json_add(params, "env", env_object()) < 0 ||
            json_add(params, "prompt", stdin_prompt ? json_object_new_string_len(stdin_prompt, (int) stdin_len)
                                                    : json_object_new_string(prompt)) < 0 ||
            json_add_string(params, "directory", directory) < 0)
                return -ENOMEM;
        static const char *const passthrough[] = {
                "model", "variant", "sessionId", "finalMarker", "noSandbox", "noOverlay",
                "allowedDirs", "rwBind", "roBind", "executor", "class", "parentTaskId", "diskMax", NULL
        };
        for (size_t i = 0; passthrough[i]; i++)
                if (pass_option(params, a, passthrough[i]) < 0) return -ENOMEM;
        const char *origin = getenv("CLAUDE_CODE_SESSION_ID");
        if (!isempty(origin) && json_add_string(params, "originSessionId", origin) < 0) return -ENOMEM;
        r = call(ctx, "task.dispatch", params, ret, err);
        /* the daemon's warnings (a bind that exposes a deny-listed path) go to stderr */
        json_object *w = r >= 0 && *ret ? json_get_array(*ret, "warnings") : NULL;
        for (size_t i = 0; w && i < json_object_array_length(w); i++)
                fprintf(stderr, "%s\n", json_object_get_string(json_object_array_get_idx(w, i)));
        return r;
}

static int run_cancel(cli_context *ctx, json_object **ret, cli_error *err) {
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params || pass_option(params, ctx->args, "graceMs") < 0) return -ENOMEM;
        return call(ctx, "task.cancel", params, ret, err);
}

static int run_accept(cli_context *ctx, json_object **ret_raw, cli_error *err) {
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params) return -ENOMEM;
        if (cli_args_bool(ctx->args, "force") && json_add_bool(params, "force", true) < 0) return -ENOMEM;
        json_object *res = NULL;
        int r = call(ctx, "task.accept", params, &res, err);
        if (r < 0) return r;
        *ret_raw = res;
        const char *task_id = json_get_string(res, "taskId");
        if (!task_id) task_id = ctx->args->task_id;
        json_object *applied = NULL;
        json_object_object_get_ex(res, "applied", &applied);
        if (applied && json_object_is_type(applied, json_type_boolean) && !json_object_get_boolean(applied)) {
                _cleanup_free_ char *text = cli_accept_failure_text(task_id, json_get_string(res, "reason"));
                if (!text) return -ENOMEM;
                return cli_error_fail(err, NULL, "%s", text);
        }
        if (json_get_bool(res, "cleanupFailed", false))
                fprintf(stderr, "warning: changeset applied, but overlay cleanup failed -- %s's overlay dir remains on disk (a daemon restart will sweep it)\n", task_id);
        if (json_get_bool(res, "applied", false)) {
                const char *check = json_get_string(res, "checkStatus");
                if (!check || streq(check, "none"))
                        fprintf(stderr, "warning: changeset applied, but this repo declares no check command in .taskferry.toml -- nothing was verified before landing\n");
        }
        return 0;
}

static int run_reject(cli_context *ctx, json_object **ret, cli_error *err) {
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params) return -ENOMEM;
        int r = call(ctx, "task.reject", params, ret, err);
        if (r < 0) return r;
        if (json_get_bool(*ret, "cleanupFailed", false)) {
                const char *task_id = json_get_string(*ret, "taskId");
                fprintf(stderr, "warning: changeset rejected, but overlay cleanup failed -- %s's overlay dir remains on disk (a daemon restart will sweep it)\n",
                        task_id ? task_id : ctx->args->task_id);
        }
        return 0;
}

static int run_status(cli_context *ctx, json_object **ret, cli_error *err) {
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params) return -ENOMEM;
        return call(ctx, "task.status", params, ret, err);
}

static int run_wait(cli_context *ctx, json_object **ret, cli_error *err) {
        const cli_args *a = ctx->args;
        if (cli_args_bool(a, "summarize"))
                return cli_error_usage(err, "Run `taskferry wait <id>` without --summarize",
                                       "wait --summarize is not available in this build yet");
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params) return -ENOMEM;
        if (cli_args_has(a, "timeoutMs")) {
                if (pass_option(params, a, "timeoutMs") < 0) return -ENOMEM;
        } else {
                double ms;
                if (cli_wait_default_timeout(getenv("TASKFERRY_WAIT_DEFAULT_TIMEOUT_MS"), &ms) > 0 &&
                    json_add(params, "timeoutMs", json_new_number(ms)) < 0)
                        return -ENOMEM;
        }
        if (pass_option(params, a, "tailChars") < 0) return -ENOMEM;
        return call(ctx, "task.wait", params, ret, err);
}

static int run_result_cmd(cli_context *ctx, json_object **ret, cli_error *err) {
        const cli_args *a = ctx->args;
        bool diff = cli_args_bool(a, "diff");
        bool full = cli_args_bool(a, "full");
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params) return -ENOMEM;
        json_object *fields = NULL;
        if (diff) {
                fields = json_object_new_array();
                if (!fields || json_object_array_add(fields, json_object_new_string("diff")) < 0 ||
                    json_add(params, "fields", fields) < 0)
                        return -ENOMEM;
        } else if (cli_args_has(a, "fields")) {
                if (pass_option(params, a, "fields") < 0) return -ENOMEM;
                fields = json_get_array(params, "fields");
        }
        if (full && !diff && json_add_bool(params, "full", true) < 0) return -ENOMEM;
        int r = call(ctx, "task.result", params, ret, err);
        if (r == -EBADMSG && streq_ptr(err->code, "RESPONSE_TOO_LARGE")) {
                bool diff_requested = !fields;
                for (size_t i = 0; fields && i < json_object_array_length(fields); i++)
                        if (streq(json_object_get_string(json_object_array_get_idx(fields, i)), "diff"))
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
        return r;
}

static int run_list(cli_context *ctx, json_object **ret, cli_error *err) {
        _cleanup_json_ json_object *params = json_object_new_object();
        if (!params) return -ENOMEM;
        if (!cli_args_bool(ctx->args, "all")) {
                _cleanup_free_ char *directory = NULL;
                int r = cli_workspace_directory(ctx->args, &directory, err);
                if (r < 0) return r;
                if (json_add_string(params, "directory", directory) < 0) return -ENOMEM;
        }
        return call(ctx, "task.list", params, ret, err);
}

static int run_tail(cli_context *ctx, json_object **ret, cli_error *err) {
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params || pass_option(params, ctx->args, "chars") < 0) return -ENOMEM;
        return call(ctx, "task.tail", params, ret, err);
}

static int run_output(cli_context *ctx, json_object **ret, cli_error *err) {
        _cleanup_json_ json_object *params = task_params(ctx);
        if (!params || pass_option(params, ctx->args, "path") < 0 ||
            pass_option(params, ctx->args, "maxOutputFileBytes") < 0)
                return -ENOMEM;
        return call(ctx, "task.output", params, ret, err);
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

static int run_home(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        _cleanup_free_ char *directory = NULL;
        int r = cli_workspace_directory(ctx->args, &directory, err);
        if (r < 0) return r;
        _cleanup_json_ json_object *params = json_object_new_object();
        if (!params || json_add_string(params, "directory", directory) < 0) return -ENOMEM;
        r = call(ctx, "task.list", params, ret_raw, err);
        if (r < 0) return r;
        _cleanup_free_ char *bin = bin_path(ctx->argv0);
        if (!bin) return -ENOMEM;
        *ret_value = cli_home_view(*ret_raw, directory, bin, ctx->paths.home);
        return *ret_value ? 0 : -ENOMEM;
}

int cli_run_command(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        const cli_args *a = ctx->args;
        const char *cmd = a->command;
        json_object *raw = NULL, *value = NULL;
        int r;

        if (streq(cmd, "version")) {
                value = json_object_new_object();
                if (!value || json_add_string(value, "name", "taskferry") < 0 ||
                    json_add_string(value, "version", TASKFERRY_VERSION) < 0 ||
                    json_add_int(value, "protocolVersion", 1) < 0) {
                        json_object_put(value);
                        return -ENOMEM;
                }
                *ret_value = value;
                *ret_raw = json_object_get(value);
                return 0;
        }
        if (streq(cmd, "context") || streq(cmd, "doctor") || streq(cmd, "init")) {
                r = streq(cmd, "context") ? cli_run_context(ctx, &value, &raw, err)
                  : streq(cmd, "doctor")  ? cli_run_doctor(ctx, &value, &raw, err)
                                          : cli_run_init(ctx, &value, &raw, err);
                *ret_raw = raw;
                *ret_value = value;
                return r;
        }
        if (streq(cmd, "home")) {
                r = run_home(ctx, &value, &raw, err);
                *ret_raw = raw;
                *ret_value = value;
                return r;
        }

        if (streq(cmd, "dispatch")) r = run_dispatch(ctx, &raw, err);
        else if (streq(cmd, "cancel")) r = run_cancel(ctx, &raw, err);
        else if (streq(cmd, "accept")) r = run_accept(ctx, &raw, err);
        else if (streq(cmd, "reject")) r = run_reject(ctx, &raw, err);
        else if (streq(cmd, "status")) r = run_status(ctx, &raw, err);
        else if (streq(cmd, "wait")) r = run_wait(ctx, &raw, err);
        else if (streq(cmd, "result")) r = run_result_cmd(ctx, &raw, err);
        else if (streq(cmd, "list")) r = run_list(ctx, &raw, err);
        else if (streq(cmd, "tail")) r = run_tail(ctx, &raw, err);
        else if (streq(cmd, "output")) r = run_output(ctx, &raw, err);
        else
                return cli_error_usage(err, "Run `taskferry --help` to see available commands", "unknown command: %s", cmd);
        *ret_raw = raw;
        if (r < 0) return r;

        if (streq(cmd, "status") || streq(cmd, "wait"))
                value = cli_lean_status(raw, cli_args_bool(a, "full"));
        else if (streq(cmd, "result"))
                value = cli_lean_result(raw, cli_args_bool(a, "full"),
                                        cli_args_has(a, "fields") || cli_args_bool(a, "diff"));
        else if (streq(cmd, "list")) {
                int64_t limit = CLI_DEFAULT_LIST_LIMIT;
                (void) cli_args_int(a, "limit", &limit);
                value = cli_project_list(raw, limit);
        } else
                value = raw ? json_object_get(raw) : NULL;
        if (raw && !value) return -ENOMEM;
        *ret_value = value;
        return 0;
}
