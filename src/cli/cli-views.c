/* taskferry context, doctor [--full|--stats] and init (cli-views.h). */
#include "cli-views.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli-project.h"
#include "json-util.h"
#include "protocol-keys.h"
#include "task-stats.h"
#include "toon.h"
#include "fileio.h"
#include "macro.h"
#include "path-util.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

/* ---- context ---- */

#define CONTEXT_LIMIT 10

json_object *cli_project_context(json_object *raw) {
        json_object *tasks = json_get_array(raw, PK_tasks);
        /* projectList's rows, cut and hinted the same way (an empty array
         * becomes the none-found string there) */
        _cleanup_json_ json_object *as_list = json_object_new_object();
        if (!as_list) return NULL;
        json_add(as_list, PK_counts, json_object_get(json_get_object(raw, PK_counts)));
        json_object *t = NULL;
        json_object_object_get_ex(raw, PK_tasks, &t);
        json_add(as_list, PK_tasks, tasks ? json_object_get(tasks) : json_object_get(t));
        _cleanup_json_ json_object *list = cli_project_list(as_list, CONTEXT_LIMIT);
        if (!list) return NULL;
        json_object *o = json_object_new_object();
        if (!o) return NULL;
        json_add_string(o, PK_directory, json_get_string(raw, PK_directory));
        json_object_object_foreach(list, key, val) json_add(o, key, json_object_get(val));
        return o;
}

int cli_run_context(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        const char *format = cli_args_string(ctx->args, "format");
        if (!format) format = "toon";
        int r = cli_call_workspace(ctx, "task.context", NULL, ret_raw, err);
        if (r < 0) return r;
        _cleanup_json_ json_object *proj = cli_project_context(*ret_raw);
        if (!proj) return -ENOMEM;
        if (streq(format, "toon")) {
                *ret_value = TAKE_PTR(proj);
                return 0;
        }
        _cleanup_free_ char *text = toon_encode(proj);
        if (!text) return -ENOMEM;
        json_object *o = json_object_new_object();
        if (!o) return -ENOMEM;
        if (streq(format, "claude-hook")) {
                json_object *h = json_object_new_object();
                json_add_string(h, "hookEventName", "SessionStart");
                json_add_string(h, "additionalContext", text);
                json_add(o, "hookSpecificOutput", h);
        } else
                json_add_string(o, "additionalContext", text);
        *ret_value = o;
        return 0;
}

/* ---- doctor --stats ---- */

json_object *cli_stats_from_list(json_object *list, uint64_t now) {
        json_object *tasks = json_get_array(list, PK_tasks);
        _cleanup_json_ json_object *rows = tasks ? json_object_get(tasks) : json_object_new_array();
        return rows ? task_stats_compute(rows, now) : NULL;
}

static int run_stats(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        _cleanup_json_ json_object *params = json_object_new_object();
        if (!params) return -ENOMEM;
        json_object *stats = NULL;
        int r = cli_call(ctx, "task.stats", params, &stats, err);
        if (r < 0 && streq_ptr(err->code, "UNKNOWN_METHOD")) {
                /* an older daemon: aggregate its task.list rows here */
                cli_error_done(err);
                _cleanup_json_ json_object *list = NULL;
                r = cli_call(ctx, "task.list", params, &list, err);
                if (r < 0) return r;
                stats = cli_stats_from_list(list, now_ms());
                if (!stats) return -ENOMEM;
        } else if (r < 0)
                return r;
        *ret_raw = stats;
        *ret_value = task_stats_format_rates(stats);
        return *ret_value ? 0 : -ENOMEM;
}

/* ---- doctor ---- */

static json_object *isolation(bool checked, const char *path, int isolated, const char *reason) {
        json_object *o = json_object_new_object();
        if (!o) return NULL;
        json_add_bool(o, PK_checked, checked);
        if (path) json_add_string(o, PK_path, path);
        if (isolated >= 0) json_add_bool(o, PK_isolated, isolated);
        if (reason) json_add_string(o, PK_reason, reason);
        return o;
}

/* JSON with // and block comments dropped outside strings (opencode.jsonc),
 * into *ret: 0, -EINVAL with *reason ("invalid JSON", whatever json-c's
 * reason; the caller frees it), -ENOMEM (*reason NULL). */
static int parse_jsonc(const char *text, size_t len, json_object **ret, char **reason) {
        _cleanup_free_ char *out = malloc(len + 1);
        if (!out) return -ENOMEM;
        size_t o = 0;
        for (size_t i = 0; i < len;) {
                if (text[i] == '"') {
                        out[o++] = text[i++];
                        while (i < len && text[i] != '"') {
                                if (text[i] == '\\' && i + 1 < len) out[o++] = text[i++];
                                out[o++] = text[i++];
                        }
                        if (i < len) out[o++] = text[i++];
                } else if (text[i] == '/' && i + 1 < len && text[i + 1] == '/') {
                        while (i < len && text[i] != '\n') i++;
                } else if (text[i] == '/' && i + 1 < len && text[i + 1] == '*') {
                        const char *e = strstr(text + i + 2, "*/");
                        i = e ? (size_t) (e - text) + 2 : len;
                } else
                        out[o++] = text[i++];
        }
        if (json_parse_strict(out, o, ret) < 0) {
                *reason = strdup("invalid JSON");
                return -EINVAL;
        }
        return 0;
}

static bool array_has_string(json_object *a, const char *s) {
        for (size_t i = 0; a && i < json_object_array_length(a); i++)
                if (streq_ptr(json_object_get_string(json_object_array_get_idx(a, i)), s)) return true;
        return false;
}

static json_object *check_opencode(const char *home) {
        const char *xdg = getenv("XDG_CONFIG_HOME");
        _cleanup_free_ char *dir = xdg && *xdg ? strdup_printf("%s/opencode", xdg) : strdup_printf("%s/.config/opencode", home);
        static const char *const names[] = {"opencode.jsonc", "opencode.json"};
        for (size_t i = 0; dir && i < ELEMENTSOF(names); i++) {
                _cleanup_free_ char *path = strdup_printf("%s/%s", dir, names[i]);
                _cleanup_free_ char *data = NULL, *perr = NULL;
                size_t len = 0;
                if (!path || read_file(path, 16u << 20, &data, &len) < 0) continue;
                _cleanup_json_ json_object *v = NULL;
                if (parse_jsonc(data, len, &v, &perr) < 0) {
                        _cleanup_free_ char *reason = strdup_printf("failed to parse: %s", perr ? perr : "out of memory");
                        return isolation(false, path, -1, reason);
                }
                json_object *cmd = json_get_array(json_get_object(json_get_object(v, "mcp"), "playwright"), "command");
                if (cmd) return isolation(true, path, array_has_string(cmd, "--isolated"), NULL);
        }
        return isolation(false, NULL, -1, "no opencode config with a playwright MCP entry found");
}

static json_object *check_claude_code(const char *home) {
        _cleanup_free_ char *path = strdup_printf("%s/.claude.json", home);
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        if (!path || read_file(path, 64u << 20, &data, &len) < 0) return isolation(false, NULL, -1, "~/.claude.json not found");
        _cleanup_json_ json_object *v = NULL;
        if (json_parse_strict(data, len, &v) < 0)
                return isolation(false, NULL, -1, "failed to parse ~/.claude.json: invalid JSON");
        json_object *args = json_get_array(json_get_object(json_get_object(v, "mcpServers"), "playwright"), "args");
        if (!args) return isolation(false, NULL, -1, "no playwright MCP entry found in ~/.claude.json");
        const char *config = NULL;
        for (size_t i = 0; i + 1 < json_object_array_length(args); i++)
                if (streq_ptr(json_object_get_string(json_object_array_get_idx(args, i)), "--config")) {
                        config = json_object_get_string(json_object_array_get_idx(args, i + 1));
                        break;
                }
        if (!config) return isolation(true, NULL, 0, "playwright MCP entry has no --config file; cannot verify isolation");
        _cleanup_free_ char *cdata = NULL;
        if (read_file(config, 16u << 20, &cdata, &len) < 0)
                return isolation(true, config, 0, "referenced config file does not exist");
        _cleanup_json_ json_object *c = NULL;
        if (json_parse_strict(cdata, len, &c) < 0)
                return isolation(true, config, 0, "failed to parse referenced config: invalid JSON");
        json_object *iso = NULL;
        json_object_object_get_ex(json_get_object(c, "browser"), "isolated", &iso);
        return isolation(true, config, iso && json_object_is_type(iso, json_type_boolean) && json_object_get_boolean(iso), NULL);
}

static json_object *check_claude_plugin(void) {
        json_object *o = json_object_new_object();
        if (!o) return NULL;
        _cleanup_free_ char *claude = NULL;
        if (find_executable("claude", NULL, &claude) < 0) {
                json_add_bool(o, PK_installed, false);
                json_add_string(o, PK_reason, "claude CLI not found");
                return o;
        }
        char *argv[] = {claude, (char *) "plugin", (char *) "list", (char *) "--json", NULL};
        run_result rr = {0};
        int r = run_command(argv, NULL, NULL, 4u << 20, -1, &rr);
        _cleanup_json_ json_object *list = NULL;
        if (r < 0 || rr.exit_code != 0 || json_parse_strict(rr.out ? rr.out : "", rr.out_len, &list) < 0) {
                json_add_bool(o, PK_installed, false);
                json_add_string(o, PK_reason, "claude plugin list failed");
        } else {
                bool installed = false;
                for (size_t i = 0; json_object_is_type(list, json_type_array) && i < json_object_array_length(list); i++)
                        if (streq_ptr(json_get_string(json_object_array_get_idx(list, i), "id"), "taskferry@taskferry"))
                                installed = true;
                json_add_bool(o, PK_installed, installed);
        }
        run_result_done(&rr);
        return o;
}

int cli_run_doctor(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        if (cli_args_bool(ctx->args, "stats")) return run_stats(ctx, ret_value, ret_raw, err);
        _cleanup_json_ json_object *params = json_object_new_object();
        if (!params) return -ENOMEM;
        json_object *health = NULL;
        cli_error herr = {0};
        if (cli_call(ctx, "system.health", params, &health, &herr) < 0) health = NULL;
        cli_error_done(&herr);
        json_object *o = json_object_new_object();
        if (!o) return -ENOMEM;
        /* system.health's result, or nothing when no daemon answered */
        if (health) {
                json_object_object_foreach(health, key, val) json_add(o, key, json_object_get(val));
        }
        json_object_put(health);
        /* the daemon's scope limits, enforced or not (task.stats's
         * resourceLimits, taskferry's addition; an older daemon has none) */
        json_object *stats = NULL;
        cli_error serr = {0};
        if (health && cli_call(ctx, "task.stats", params, &stats, &serr) >= 0) {
                json_object *rl = json_get_object(stats, PK_resourceLimits);
                if (rl) json_add(o, PK_resourceLimits, json_object_get(rl));
                /* the workers' network policy (net-policy.h), an addition too */
                json_object *net = json_get_object(stats, PK_network);
                if (net) json_add(o, PK_network, json_object_get(net));
                /* what the daemon's start found wrong with tasks.journal, an addition too */
                const char *sj = json_get_string(stats, PK_stateJournal);
                if (sj) json_add_string(o, PK_stateJournal, sj);
        }
        json_object_put(stats);
        cli_error_done(&serr);
        if (cli_args_bool(ctx->args, PK_full)) {
                json_add_string(o, PK_cliVersion, "2.0.0");
                json_add_int(o, PK_protocolVersion, 1);
        }
        const char *home = ctx->paths.home ? ctx->paths.home : getenv("HOME");
        if (!home) home = "/";
        json_object *integ = json_object_new_object(), *pw = json_object_new_object();
        json_add(o, PK_integrations, integ);
        json_add(integ, PK_claude, check_claude_plugin());
        json_add(integ, PK_playwrightMcpIsolation, pw);
        json_object *oc = check_opencode(home), *cc = check_claude_code(home);
        json_add(pw, PK_opencode, oc);
        json_add(pw, PK_claudeCode, cc);
        json_object *warnings = json_object_new_array();
        if (json_get_bool(oc, PK_checked, false) && !json_get_bool(oc, PK_isolated, true))
                json_object_array_add(warnings, json_object_new_string(
                        "opencode's Playwright MCP is not started with --isolated: parallel tasks share one browser profile"));
        if (json_get_bool(cc, PK_checked, false) && !json_get_bool(cc, PK_isolated, true))
                json_object_array_add(warnings, json_object_new_string(
                        "Claude Code's Playwright MCP config does not set browser.isolated: parallel sessions share one "
                        "browser profile"));
        _cleanup_free_ char *bwrap = NULL;
        if (find_executable("bwrap", NULL, &bwrap) < 0)
                json_object_array_add(warnings, json_object_new_string(
                        "bwrap (bubblewrap) was not found on PATH: sandboxed dispatches cannot start; install bubblewrap"));
        /* the daemon's scope units (taskferryd(8) "Resource limits") */
        json_object *rl = json_get_object(o, PK_resourceLimits);
        if (rl && !json_get_bool(rl, PK_enforced, true)) {
                const char *how = json_get_string(rl, PK_limits);
                _cleanup_free_ char *w = strdup_printf(
                        "resource limits are not held by a systemd scope: %s; %s%s; run the daemon under a systemd "
                        "user manager for MemoryMax/TasksMax/CPUWeight",
                        strempty(json_get_string(rl, PK_reason)), how ? "they hold as: " : "they are not enforced",
                        strempty(how));
                if (w) json_object_array_add(warnings, json_object_new_string(w));
        }
        const char *sj = json_get_string(o, PK_stateJournal);
        if (sj) {
                _cleanup_free_ char *w = strdup_printf("the task state: %s", sj);
                if (w) json_object_array_add(warnings, json_object_new_string(w));
        }
        json_object *net = json_get_object(o, PK_network);
        if (net && streq_ptr(json_get_string(net, PK_mode), "host"))
                json_object_array_add(warnings, json_object_new_string(
                        "the workers' network mode is host (TASKFERRY_NETWORK or config network.mode): every worker "
                        "reaches every address this machine reaches; the default, proxy, allows only listed hosts"));
        if (json_object_array_length(warnings) > 0) json_add(o, PK_warnings, warnings);
        else json_object_put(warnings);
        *ret_raw = o;
        *ret_value = json_object_get(o);
        return 0;
}

/* ---- init ---- */

static const char *package_check(const char *dir) {
        _cleanup_free_ char *path = strdup_printf("%s/package.json", dir);
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        if (!path || read_file(path, 16u << 20, &data, &len) < 0) return NULL;
        _cleanup_json_ json_object *pkg = NULL;
        if (json_parse_strict(data, len, &pkg) < 0) return NULL;
        json_object *scripts = json_get_object(pkg, "scripts");
        if (json_get_string(scripts, "check")) return "npm run check";
        static char buf[128];
        buf[0] = 0;
        static const char *const names[] = {"lint", "typecheck", "test"};
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (json_get_string(scripts, names[i])) {
                        if (buf[0]) strcat(buf, " && ");
                        strcat(buf, "npm run ");
                        strcat(buf, names[i]);
                }
        return buf[0] ? buf : NULL;
}

/* Does the makefile at path have a rule for target (a line "a b: ..." at
 * the start naming it before the colon; "x := ...", "x ::= ..." and
 * "x = a:b" are assignments, not rules)? */
static bool makefile_has_target(const char *path, const char *target) {
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        if (read_file(path, 1u << 20, &data, &len) < 0) return false;
        for (char *line = data, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next) *next++ = 0;
                if (line[0] == '\t' || line[0] == '#' || line[0] == ' ') continue;
                char *colon = strchr(line, ':');
                if (!colon || memchr(line, '=', (size_t) (colon - line))) continue;
                const char *after = colon;
                while (*after == ':') after++;
                if (*after == '=') continue; /* :=, ::=, :::= */
                *colon = 0;
                char *save = NULL;
                for (char *w = strtok_r(line, " \t", &save); w; w = strtok_r(NULL, " \t", &save))
                        if (streq(w, target)) return true;
        }
        return false;
}

/* make's own names of a makefile, in the order it looks for them. */
static const char *make_check(const char *dir) {
        static const char *const names[] = {"GNUmakefile", "makefile", "Makefile"};
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                _cleanup_free_ char *path = strdup_printf("%s/%s", dir, names[i]);
                if (!path || access(path, F_OK) < 0) continue;
                if (makefile_has_target(path, "check")) return "make check";
                if (makefile_has_target(path, "test")) return "make test";
                return NULL; /* make reads the first one only */
        }
        return NULL;
}

static const char *detect_check(const char *dir) {
        const char *p = package_check(dir);
        if (p) return p;
        static const struct {
                const char *marker;
                const char *command;
        } eco[] = {
                {"pyproject.toml", "uv run pytest && uv run ruff check ."},
                {"go.mod", "go vet ./... && go test ./..."},
                {"Cargo.toml", "cargo clippy -- -D warnings && cargo test"},
                {"deno.json", "deno check . && deno test"},
                {"deno.jsonc", "deno check . && deno test"},
                {"bunfig.toml", "bun test"},
        };
        for (size_t i = 0; i < ELEMENTSOF(eco); i++) {
                _cleanup_free_ char *path = strdup_printf("%s/%s", dir, eco[i].marker);
                if (path && access(path, F_OK) == 0) return eco[i].command;
        }
        /* a makefile's own check or test target, before CMake's generic build */
        if ((p = make_check(dir))) return p;
        _cleanup_free_ char *cmake = strdup_printf("%s/CMakeLists.txt", dir);
        if (cmake && access(cmake, F_OK) == 0) return "cmake -S . -B build && cmake --build build && ctest --test-dir build";
        return NULL;
}

/* The file init writes. check NULL: the commented fill-in; commented: the
 * detected command, commented out (no TTY to confirm it). */
static char *render_config(const char *check, bool commented) {
        _cleanup_free_ char *line = NULL;
        if (check) {
                json_object *q = json_object_new_string(check);
                line = strdup_printf("%scheck = %s\n", commented ? "# " : "", q ? json_to_line(q, NULL) : "\"\"");
                json_object_put(q);
        } else
                line = strdup("# check = \"npm run check\"  -- fill this in; until it is set, there is no gate\n");
        if (!line) return NULL;
        return strdup_printf(
                "# taskferry project config (.taskferry.toml)\n"
                "# The command the verification gate runs when a task settles, and that workers\n"
                "# are told to run before they declare done. Absent: no gate (taskferry warns).\n"
                "%s\n"
                "# Optional: the gate run is killed after this many seconds and recorded as a\n"
                "# timeout. Default 900.\n"
                "# check_timeout_seconds = 900\n\n"
                "# Optional: paths bound read-only into the sandbox of every dispatch from\n"
                "# this project; relative ones are under the repository root. One outside the\n"
                "# repository is bound only if config.json's trustedProjects lists this\n"
                "# repository (or a directory above it). Ignored when sandboxing is off.\n"
                "# roBind = [\"/path/to/reference-docs\"]\n\n"
                "# Optional: paths whose changes a reviewer must confirm before accept, beside\n"
                "# the built-in ones: fnmatch patterns under the repository root, a trailing /\n"
                "# meaning a whole directory. See taskferry-project(5).\n"
                "# review_paths = [\"deploy/\", \"*.lock\"]\n",
                line);
}

int cli_run_init(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        _cleanup_free_ char *cwd = getcwd(NULL, 0);
        if (!cwd) return cli_error_fail(err, NULL, "error: cannot determine the current directory: %s", strerror(errno));
        _cleanup_free_ char *path = strdup_printf("%s/.taskferry.toml", cwd);
        if (!path) return -ENOMEM;
        json_object *o = json_object_new_object();
        if (!o) return -ENOMEM;
        json_add_string(o, PK_path, path);
        struct stat st;
        if (lstat(path, &st) == 0) {
                json_add_bool(o, "written", false);
                json_add_null(o, PK_checkCommand);
                _cleanup_free_ char *reason = strdup_printf("%s already exists -- taskferry init never overwrites it", path);
                json_add_string(o, PK_reason, reason);
                *ret_raw = o;
                *ret_value = json_object_get(o);
                return 0;
        }
        const char *detected = detect_check(cwd);
        const char *written_check = NULL;
        bool commented = false;
        if (detected && isatty(STDIN_FILENO)) {
                printf("Detected check command: %s\nWrite .taskferry.toml with this command? [Y/n] ", detected);
                fflush(stdout);
                char answer[256] = "";
                if (!fgets(answer, sizeof answer, stdin)) answer[0] = 0;
                const char *a = answer;
                while (*a == ' ' || *a == '\t') a++;
                if (*a != 'n' && *a != 'N') written_check = detected;
        } else if (detected) {
                printf("Detected check command: %s\nNo TTY to confirm -- writing .taskferry.toml with a commented fill-in "
                       "instead. Edit \"check\" in %s to enable the gate.\n",
                       detected, path);
                commented = true;
        }
        _cleanup_free_ char *text = render_config(commented ? detected : written_check, commented);
        if (!text) {
                json_object_put(o);
                return -ENOMEM;
        }
        /* never overwrite, never follow a symlink planted meanwhile */
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0) {
                json_object_put(o);
                return cli_error_fail(err, NULL, "error: cannot write %s: %s\nhelp: check the directory's permissions",
                                      path, strerror(errno));
        }
        int r = loop_write(fd, text, strlen(text));
        if (r >= 0 && fchmod(fd, 0644) < 0) r = -errno;
        if (close(fd) < 0 && r >= 0) r = -errno;
        if (r < 0) {
                json_object_put(o);
                return cli_error_fail(err, NULL, "error: cannot write %s: %s\nhelp: check the free space and permissions",
                                      path, strerror(-r));
        }
        json_add_bool(o, "written", true);
        json_add_string(o, PK_checkCommand, written_check);
        *ret_raw = o;
        *ret_value = json_object_get(o);
        return 0;
}
