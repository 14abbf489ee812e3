/* cli-views.h: `context` (its projection and hook formats), `doctor`
 * (health, the daemon's resource limits, the local integration checks and
 * their warnings; --stats with its task.list fallback) against a fake
 * daemon (cli-fixture.h) with PATH and HOME of the case's own, and `init`
 * (detection, no TTY, a TTY's answer, never overwriting or following a
 * link). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli-fixture.h"
#include "cli-views.h"
#include "json-util.h"
#include "toon.h"
#include "unit.h"
#include "macro.h"
#include "project-config.h"
#include "string-util.h"
#include "strv.h"

static char *bin; /* the case's PATH */

static void setup(void) {
        cli_fixture_setup();
        tf_mkdirs(cli_fixture_dir, "bin");
        bin = tf_path(cli_fixture_dir, "bin");
        setenv("PATH", bin, 1);
}

static void teardown(void) {
        free(bin);
        bin = NULL;
        cli_fixture_teardown();
}

static void put_exe(const char *name, const char *script) {
        _cleanup_free_ char *p = tf_path(bin, name);
        tf_write_file(p, script, strlen(script), 0755);
}

/* ---- context ---- */

#define ROW(n) "{\"id\":\"oc_" #n "\",\"status\":\"done\",\"model\":\"p/m\",\"startedAt\":null,\"directory\":\"/w\",\"logBytesWritten\":1}"
#define ROWS12 ROW(1) "," ROW(2) "," ROW(3) "," ROW(4) "," ROW(5) "," ROW(6) "," ROW(7) "," ROW(8) "," ROW(9) "," ROW(10) "," ROW(11) "," ROW(12)
#define COUNTS "{\"queued\":0,\"running\":0,\"done\":12,\"crashed\":0,\"cancelled\":0,\"unknown\":0}"

START_TEST(context_projection) {
        const char *raw_text = "{\"directory\":\"/w\",\"tasks\":[" ROWS12 "],\"counts\":" COUNTS "}";
        _cleanup_json_ json_object *raw = NULL;
        ck_assert_int_eq(json_parse_strict(raw_text, strlen(raw_text), &raw), 0);
        _cleanup_json_ json_object *p = cli_project_context(raw);
        /* directory first, at most 10 lean rows, the --limit hint */
        ck_assert_str_eq(json_to_line(p, NULL),
                         "{\"directory\":\"/w\",\"counts\":" COUNTS ",\"tasks\":["
                         "{\"id\":\"oc_1\",\"status\":\"done\",\"model\":\"p/m\",\"startedAt\":null},"
                         "{\"id\":\"oc_2\",\"status\":\"done\",\"model\":\"p/m\",\"startedAt\":null},"
                         "{\"id\":\"oc_3\",\"status\":\"done\",\"model\":\"p/m\",\"startedAt\":null},"
                         "{\"id\":\"oc_4\",\"status\":\"done\",\"model\":\"p/m\",\"startedAt\":null},"
                         "{\"id\":\"oc_5\",\"status\":\"done\",\"model\":\"p/m\",\"startedAt\":null},"
                         "{\"id\":\"oc_6\",\"status\":\"done\",\"model\":\"p/m\",\"startedAt\":null},"
                         "{\"id\":\"oc_7\",\"status\":\"done\",\"model\":\"p/m\",\"startedAt\":null},"
                         "{\"id\":\"oc_8\",\"status\":\"done\",\"model\":\"p/m\",\"startedAt\":null},"
                         "{\"id\":\"oc_9\",\"status\":\"done\",\"model\":\"p/m\",\"startedAt\":null},"
                         "{\"id\":\"oc_10\",\"status\":\"done\",\"model\":\"p/m\",\"startedAt\":null}],"
                         "\"next\":[\"Run taskferry list --limit 12 for all 12 tasks\"]}");
        /* task.context's empty array is the list's none-found string */
        const char *empty_text = "{\"directory\":\"/w\",\"tasks\":[],\"counts\":" COUNTS "}";
        _cleanup_json_ json_object *empty = NULL;
        ck_assert_int_eq(json_parse_strict(empty_text, strlen(empty_text), &empty), 0);
        _cleanup_json_ json_object *pe = cli_project_context(empty);
        ck_assert_str_eq(json_get_string(pe, "tasks"), "none found in this workspace");
        ck_assert_ptr_null(json_get(pe, "next"));
}
END_TEST

START_TEST(context_formats) {
        cli_fake_rule rules[] = {
                {"task.context", FAKE_FRAMES(FAKE_OK("{\"directory\":\"/w\",\"tasks\":[" ROW(1) "],\"counts\":" COUNTS "}"))},
                {}};
        cli_fake_start(rules);
        _cleanup_free_ char *work = tf_path(cli_fixture_dir, "work");
        cli_cmd c;
        cli_cmd_ok(&c, "context", NULL);
        _cleanup_free_ char *params = strdup_printf("{\"directory\":\"%s\"}", work);
        cli_fake_params_are("task.context", params);
        _cleanup_free_ char *toon = toon_encode(c.value);
        ck_assert_str_eq(json_get_string(c.value, "directory"), "/w");
        ck_assert_ptr_nonnull(json_get_string(c.raw, "directory"));
        cli_cmd_done(&c);

        cli_cmd_run(&c, "context", "--format", "claude-hook", NULL);
        json_object *hs = json_get_object(c.value, "hookSpecificOutput");
        ck_assert_str_eq(json_get_string(hs, "hookEventName"), "SessionStart");
        ck_assert_str_eq(json_get_string(hs, "additionalContext"), toon);
        ck_assert_int_eq(json_object_object_length(c.value), 1);
        ck_assert_int_eq(json_object_object_length(hs), 2);
        cli_cmd_done(&c);

        cli_cmd_run(&c, "context", "--format", "codex-hook", NULL);
        ck_assert_str_eq(json_get_string(c.value, "additionalContext"), toon);
        ck_assert_int_eq(json_object_object_length(c.value), 1);
        cli_cmd_done(&c);
}
END_TEST

/* ---- doctor ---- */

#define BWRAP_WARNING "bwrap (bubblewrap) was not found on PATH: sandboxed dispatches cannot start; install bubblewrap"

START_TEST(doctor_without_tools_or_configs) {
        cli_fake_rule rules[] = {
                {"task.stats", FAKE_FRAMES(FAKE_OK("{\"resourceLimits\":{\"enforced\":false,\"reason\":\"no systemd user "
                                                   "manager\"},\"byModel\":[]}"))},
                {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_ok(&c, "doctor", "--full", NULL);
        json_object *v = c.value;
        ck_assert(json_get_bool(v, "healthy", false));
        ck_assert_str_eq(json_to_line(json_get_object(v, "resourceLimits"), NULL),
                         "{\"enforced\":false,\"reason\":\"no systemd user manager\"}");
        ck_assert_str_eq(json_get_string(v, "cliVersion"), "2.0.0");
        ck_assert_str_eq(json_to_line(json_get_object(v, "integrations"), NULL),
                         "{\"claude\":{\"installed\":false,\"reason\":\"claude CLI not found\"},"
                         "\"playwrightMcpIsolation\":{\"opencode\":{\"checked\":false,\"reason\":\"no opencode config with a "
                         "playwright MCP entry found\"},\"claudeCode\":{\"checked\":false,\"reason\":\"~/.claude.json not "
                         "found\"}}}");
        ck_assert_str_eq(json_to_line(json_get_array(v, "warnings"), NULL),
                         "[\"" BWRAP_WARNING "\",\"resource limits are not held by a systemd scope: no systemd user manager; "
                         "they are not enforced; run the daemon under a systemd user manager for "
                         "MemoryMax/TasksMax/CPUWeight\"]");
        /* key order: health first, then the rest */
        json_object_object_foreach(v, first, val) {
                (void) val;
                ck_assert_str_eq(first, "healthy");
                break;
        }
        cli_cmd_done(&c);
}
END_TEST

/* No daemon answering: doctor still reports the local checks. */
START_TEST(doctor_without_daemon) {
        cli_cmd c;
        cli_cmd_ok(&c, "doctor", NULL);
        ck_assert_ptr_null(json_get(c.value, "healthy"));
        ck_assert_ptr_null(json_get(c.value, "cliVersion"));
        ck_assert_ptr_nonnull(json_get_object(c.value, "integrations"));
        ck_assert_str_eq(json_to_line(json_get_array(c.value, "warnings"), NULL), "[\"" BWRAP_WARNING "\"]");
        cli_cmd_done(&c);
}
END_TEST

START_TEST(doctor_integrations) {
        cli_fake_start(NULL);
        put_exe("bwrap", "#!/bin/sh\nexit 0\n");
        put_exe("claude", "#!/bin/sh\nprintf '[{\"id\":\"other\"},{\"id\":\"taskferry@taskferry\"}]'\n");
        _cleanup_free_ char *oc = tf_put(cli_fixture_dir, "config/opencode/opencode.jsonc",
                                         "{\n  // the MCP servers\n  \"mcp\": {/* pw */ \"playwright\": {\"command\": "
                                         "[\"npx\", \"@playwright/mcp\", \"--x//y\"]}}\n}\n",
                                         strlen("{\n  // the MCP servers\n  \"mcp\": {/* pw */ \"playwright\": {\"command\": "
                                                "[\"npx\", \"@playwright/mcp\", \"--x//y\"]}}\n}\n"));
        _cleanup_free_ char *pwcfg = tf_put(cli_fixture_dir, "home/pw.json", "{\"browser\":{\"isolated\":true}}",
                                            strlen("{\"browser\":{\"isolated\":true}}"));
        _cleanup_free_ char *claude_json = strdup_printf(
                "{\"mcpServers\":{\"playwright\":{\"args\":[\"@playwright/mcp\",\"--config\",\"%s\"]}}}", pwcfg);
        _cleanup_free_ char *cj = tf_put(cli_fixture_dir, "home/.claude.json", claude_json, strlen(claude_json));
        cli_cmd c;
        cli_cmd_ok(&c, "doctor", NULL);
        json_object *integ = json_get_object(c.value, "integrations");
        ck_assert_str_eq(json_to_line(json_get_object(integ, "claude"), NULL), "{\"installed\":true}");
        json_object *pw = json_get_object(integ, "playwrightMcpIsolation");
        _cleanup_free_ char *want_oc = strdup_printf("{\"checked\":true,\"path\":\"%s\",\"isolated\":false}", oc);
        ck_assert_str_eq(json_to_line(json_get_object(pw, "opencode"), NULL), want_oc);
        _cleanup_free_ char *want_cc = strdup_printf("{\"checked\":true,\"path\":\"%s\",\"isolated\":true}", pwcfg);
        ck_assert_str_eq(json_to_line(json_get_object(pw, "claudeCode"), NULL), want_cc);
        ck_assert_str_eq(json_to_line(json_get_array(c.value, "warnings"), NULL),
                         "[\"opencode's Playwright MCP is not started with --isolated: parallel tasks share one browser "
                         "profile\"]");
        cli_cmd_done(&c);

        /* a claude that fails; an opencode config that does not parse; a
         * --config file that is not isolated */
        put_exe("claude", "#!/bin/sh\nexit 1\n");
        tf_write_file(oc, "{ \"mcp\": ", 9, 0600);
        tf_write_file(pwcfg, "{\"browser\":{}}", 14, 0600);
        cli_cmd_run(&c, "doctor", NULL);
        integ = json_get_object(c.value, "integrations");
        ck_assert_str_eq(json_to_line(json_get_object(integ, "claude"), NULL),
                         "{\"installed\":false,\"reason\":\"claude plugin list failed\"}");
        pw = json_get_object(integ, "playwrightMcpIsolation");
        _cleanup_free_ char *want_bad = strdup_printf("{\"checked\":false,\"path\":\"%s\",\"reason\":\"failed to parse: invalid JSON\"}", oc);
        ck_assert_str_eq(json_to_line(json_get_object(pw, "opencode"), NULL), want_bad);
        ck_assert(!json_get_bool(json_get_object(pw, "claudeCode"), "isolated", true));
        ck_assert_str_eq(json_to_line(json_get_array(c.value, "warnings"), NULL),
                         "[\"Claude Code's Playwright MCP config does not set browser.isolated: parallel sessions share "
                         "one browser profile\"]");
        cli_cmd_done(&c);
}
END_TEST

START_TEST(doctor_stats) {
        cli_fake_rule rules[] = {
                {"task.stats", FAKE_FRAMES(FAKE_OK("{\"byModel\":[{\"model\":\"p/m\",\"doneRate\":0.5,\"crashRate\":null}],"
                                                   "\"trend\":{\"current\":{\"crashRate\":0.125,\"settled\":8},"
                                                   "\"previous\":{\"crashRate\":null,\"settled\":0}}}"))},
                {"task.stats", FAKE_FRAMES(FAKE_ERR("UNKNOWN_METHOD", "unknown method: task.stats", "Use one of: x",
                                                    "unknown method: task.stats"))},
                {"task.stats", FAKE_FRAMES(FAKE_ERR("REQUEST_FAILED", "stats failed", "h", "stats failed"))},
                {"task.list", FAKE_FRAMES(FAKE_OK("{\"counts\":{},\"tasks\":[{\"id\":\"oc_1\",\"status\":\"done\","
                                                  "\"model\":\"p/m\",\"startedAt\":\"2026-11-30T13:35:06.026Z\"}]}"))},
                {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_ok(&c, "doctor", "--stats", NULL);
        json_object *m = json_object_array_get_idx(json_get_array(c.value, "byModel"), 0);
        ck_assert_str_eq(json_get_string(m, "doneRate"), "50.0%");
        ck_assert_ptr_null(json_get_string(m, "crashRate"));
        ck_assert_str_eq(json_get_string(json_get_object(json_get_object(c.value, "trend"), "current"), "crashRate"), "12.5%");
        /* the daemon's numbers as they were for --json */
        ck_assert(json_object_is_type(json_get(json_object_array_get_idx(json_get_array(c.raw, "byModel"), 0), "doneRate"),
                                      json_type_double));
        cli_cmd_done(&c);

        /* an older daemon: its task.list aggregated here */
        cli_cmd_ok(&c, "doctor", "--stats", NULL);
        cli_fake_params_are("task.list", "{}");
        json_object *m2 = json_object_array_get_idx(json_get_array(c.value, "byModel"), 0);
        ck_assert_str_eq(json_get_string(m2, "model"), "p/m");
        ck_assert_str_eq(json_get_string(m2, "doneRate"), "100.0%");
        cli_cmd_done(&c);

        /* any other error is the command's */
        cli_cmd_run(&c, "doctor", "--stats", NULL);
        cli_cmd_failed(&c, -EBADMSG, CLI_EXIT_FAILURE, "{\"error\":\"stats failed\",\"help\":\"h\"}");
        ck_assert_uint_eq(cli_fake_count("task.list"), 1);
        cli_cmd_done(&c);
}
END_TEST

/* ---- init ---- */

static const struct {
        const char *marker, *content;
        const char *want; /* NULL: nothing detected */
} ecosystems[] = {
        {"package.json", "{\"scripts\":{\"check\":\"x\",\"test\":\"y\"}}", "npm run check"},
        {"package.json", "{\"scripts\":{\"test\":\"y\",\"lint\":\"x\"}}", "npm run lint && npm run test"},
        {"package.json", "{\"scripts\":{\"typecheck\":\"t\",\"test\":\"y\",\"lint\":\"x\"}}",
         "npm run lint && npm run typecheck && npm run test"},
        {"package.json", "{\"scripts\":{\"build\":\"b\"}}", NULL},
        {"pyproject.toml", "", "uv run pytest && uv run ruff check ."},
        {"go.mod", "module x\n", "go vet ./... && go test ./..."},
        {"Cargo.toml", "", "cargo clippy -- -D warnings && cargo test"},
        {"deno.json", "{}", "deno check . && deno test"},
        {"deno.jsonc", "{}", "deno check . && deno test"},
        {"bunfig.toml", "", "bun test"},
        {"CMakeLists.txt", "project(x C)\n", "cmake -S . -B build && cmake --build build && ctest --test-dir build"},
        {"Makefile", "all: x\n\tcc x.c\ncheck: all\n\t./t\n", "make check"},
        {"Makefile", "all:\n\ttrue\ntest:\n\t./t\n", "make test"},
        {"Makefile", "test:\n\t./t\ncheck :: all\n", "make check"},
        {"GNUmakefile", ".PHONY: check\nlint check test: deps\n\t./t\n", "make check"},
        {"makefile", "# check: no\n\tcheck: no\ncheck := x\ncheck ::= y\ncheck=a:b\nCHECK_FLAGS = -x\nall:\n", NULL},
        {"README.md", "", NULL},
};

#define FILL_IN "# check = \"npm run check\"  -- fill this in; until it is set, there is no gate\n"

START_TEST(init_detects_without_a_tty) {
        _cleanup_free_ char *work = tf_path(cli_fixture_dir, "work");
        _cleanup_free_ char *m = tf_put(work, ecosystems[_i].marker, ecosystems[_i].content, strlen(ecosystems[_i].content));
        umask(077);
        cli_cmd c;
        cli_cmd_ok(&c, "init", NULL);
        _cleanup_free_ char *path = tf_path(work, ".taskferry.toml");
        _cleanup_free_ char *text = tf_read_file(path, false);
        ck_assert_str_eq(json_get_string(c.value, "path"), path);
        ck_assert(json_get_bool(c.value, "written", false));
        /* nothing is active without a yes on a terminal */
        ck_assert(json_object_object_get_ex(c.value, "checkCommand", NULL));
        ck_assert(startswith(text, "# taskferry project config (.taskferry.toml)\n"));
        ck_assert(strstr(text, "\n# check_timeout_seconds = 900\n"));
        if (ecosystems[_i].want) {
                _cleanup_free_ char *line = strdup_printf("\n# check = \"%s\"\n", ecosystems[_i].want);
                ck_assert_msg(strstr(text, line), "%s", text);
                _cleanup_free_ char *said = strdup_printf(
                        "Detected check command: %s\nNo TTY to confirm -- writing .taskferry.toml with a commented "
                        "fill-in instead. Edit \"check\" in %s to enable the gate.\n",
                        ecosystems[_i].want, path);
                ck_assert_str_eq(c.out, said);
        } else {
                ck_assert_msg(strstr(text, "\n" FILL_IN), "%s", text);
                ck_assert_str_eq(c.out, "");
                ck_assert(json_object_get_type(json_get(c.value, "checkCommand")) == json_type_null);
        }
        /* no uncommented check line either way */
        ck_assert(!strstr(text, "\ncheck ="));
        struct stat st;
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0644);
        cli_cmd_done(&c);

        /* what project_config_load reads of it: nothing, and no warning */
        ProjectConfig pc = {};
        ck_assert_int_eq(project_config_load(work, &pc), 0);
        ck_assert_str_eq(pc.path, path);
        ck_assert(pc.exists);
        ck_assert_msg(!pc.warning, "%s", pc.warning);
        ck_assert_ptr_null(pc.check);
        ck_assert_ptr_null(pc.ro_bind);
        ck_assert_ptr_null(pc.review_paths);
        project_config_done(&pc);

        /* every example uncommented (the fill-in line is prose) reads as it says */
        _cleanup_free_ char *edited = strdup(text);
        for (char *l = edited; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                static const char *const keys[] = {"check = ", "check_timeout_seconds = ", "roBind = ", "review_paths = "};
                for (size_t k = 0; k < ELEMENTSOF(keys); k++)
                        if (startswith(l, "# ") && startswith(l + 2, keys[k]) && !strstr(l, "fill this in"))
                                memcpy(l, "  ", 2);
        }
        ck_assert_int_eq(unlink(path), 0);
        tf_write_file(path, edited, strlen(edited), 0644);
        ck_assert_int_eq(project_config_load(work, &pc), 0);
        ck_assert_msg(!pc.warning, "%s\n---\n%s", pc.warning, edited);
        if (ecosystems[_i].want) ck_assert_str_eq(strnull(pc.check), ecosystems[_i].want);
        else ck_assert_ptr_null(pc.check);
        ck_assert_uint_eq(pc.check_timeout_s, 900);
        ck_assert_uint_eq(strv_length(pc.ro_bind), 1);
        ck_assert_uint_eq(strv_length(pc.review_paths), 2);
        project_config_done(&pc);
}
END_TEST

/* A terminal's yes: the detected command is the project's check. */
START_TEST(init_yes_is_what_the_project_file_reads) {
        _cleanup_free_ char *work = tf_path(cli_fixture_dir, "work");
        _cleanup_free_ char *m = tf_put(work, ecosystems[_i].marker, ecosystems[_i].content, strlen(ecosystems[_i].content));
        int slave;
        int master = cli_open_pty(&slave);
        ck_assert_int_eq(write(master, "y\n", 2), 2);
        cli_cmd_stdin_fd = slave;
        cli_cmd c;
        cli_cmd_run(&c, "init", NULL);
        cli_cmd_stdin_fd = -1;
        close(slave);
        close(master);
        ck_assert_msg(c.r == 0, "%s", strnull(c.err.text));
        ProjectConfig pc = {};
        ck_assert_int_eq(project_config_load(work, &pc), 0);
        ck_assert_msg(!pc.warning, "%s", pc.warning);
        if (ecosystems[_i].want) {
                ck_assert_str_eq(json_get_string(c.value, "checkCommand"), ecosystems[_i].want);
                ck_assert_str_eq(strnull(pc.check), ecosystems[_i].want);
        } else
                ck_assert_ptr_null(pc.check);
        project_config_done(&pc);
        cli_cmd_done(&c);
}
END_TEST

/* A CMake project with a makefile check target: the makefile's. */
START_TEST(init_makefile_before_cmake) {
        _cleanup_free_ char *work = tf_path(cli_fixture_dir, "work");
        _cleanup_free_ char *a = tf_put(work, "CMakeLists.txt", "project(x)\n", 11);
        _cleanup_free_ char *b = tf_put(work, "Makefile", "check:\n\tctest\n", 14);
        cli_cmd c;
        cli_cmd_ok(&c, "init", NULL);
        ck_assert(startswith(c.out, "Detected check command: make check\n"));
        cli_cmd_done(&c);
        /* a makefile without either target: CMake's */
        _cleanup_free_ char *p = tf_path(work, ".taskferry.toml");
        ck_assert_int_eq(unlink(p), 0);
        ck_assert_int_eq(unlink(b), 0);
        free(tf_put(work, "Makefile", "all:\n\tcc x.c\n", 13));
        cli_cmd_ok(&c, "init", NULL);
        ck_assert(startswith(c.out, "Detected check command: cmake -S . -B build && cmake --build build && ctest --test-dir build\n"));
        cli_cmd_done(&c);
}
END_TEST

/* On a terminal init asks; "n..." keeps the fill-in, anything else takes
 * the detected command. */
START_TEST(init_asks_on_a_tty) {
        static const struct {
                const char *answer;
                bool taken;
        } answers[] = {{"\n", true}, {"y\n", true}, {"  no\n", false}, {"N\n", false}};
        _cleanup_free_ char *work = tf_path(cli_fixture_dir, "work");
        _cleanup_free_ char *m = tf_put(work, "go.mod", "module x\n", 9);
        _cleanup_free_ char *path = tf_path(work, ".taskferry.toml");
        for (size_t i = 0; i < ELEMENTSOF(answers); i++) {
                int slave;
                int master = cli_open_pty(&slave);
                ck_assert_int_eq(write(master, answers[i].answer, strlen(answers[i].answer)),
                                 (ssize_t) strlen(answers[i].answer));
                cli_cmd_stdin_fd = slave;
                cli_cmd c;
                cli_cmd_run(&c, "init", NULL);
                cli_cmd_stdin_fd = -1;
                close(slave);
                close(master);
                ck_assert_msg(c.r == 0, "%s", strnull(c.err.text));
                ck_assert_str_eq(c.out, "Detected check command: go vet ./... && go test ./...\nWrite .taskferry.toml with "
                                        "this command? [Y/n] ");
                _cleanup_free_ char *text = tf_read_file(path, false);
                if (answers[i].taken) {
                        ck_assert_msg(strstr(text, "\ncheck = \"go vet ./... && go test ./...\"\n"), "%s", text);
                        ck_assert_str_eq(json_get_string(c.value, "checkCommand"), "go vet ./... && go test ./...");
                } else {
                        ck_assert_msg(strstr(text, "\n" FILL_IN), "%s", text);
                        ck_assert_ptr_null(json_get_string(c.value, "checkCommand"));
                }
                cli_cmd_done(&c);
                ck_assert_int_eq(unlink(path), 0);
        }
}
END_TEST

START_TEST(init_never_overwrites_or_follows) {
        _cleanup_free_ char *work = tf_path(cli_fixture_dir, "work");
        _cleanup_free_ char *path = tf_put(work, ".taskferry.toml", "check = \"mine\"\n", 15);
        cli_cmd c;
        cli_cmd_run(&c, "init", NULL);
        _cleanup_free_ char *want = strdup_printf("{\"path\":\"%s\",\"written\":false,\"checkCommand\":null,\"reason\":\"%s "
                                                  "already exists -- taskferry init never overwrites it\"}",
                                                  path, path);
        cli_cmd_value_is(&c, want);
        _cleanup_free_ char *text = tf_read_file(path, false);
        ck_assert_str_eq(text, "check = \"mine\"\n");
        cli_cmd_done(&c);

        /* a dangling link is there too: its target is never made */
        ck_assert_int_eq(unlink(path), 0);
        _cleanup_free_ char *target = tf_path(cli_fixture_dir, "home/planted");
        ck_assert_int_eq(symlink(target, path), 0);
        cli_cmd_run(&c, "init", NULL);
        ck_assert_int_eq(c.r, 0);
        ck_assert(!json_get_bool(c.value, "written", true));
        ck_assert_int_lt(access(target, F_OK), 0);
        cli_cmd_done(&c);
}
END_TEST

START_TEST(init_unwritable_directory) {
        if (geteuid() == 0) {
                fprintf(stderr, "init_unwritable_directory: skipped (root writes through the mode)\n");
                return;
        }
        _cleanup_free_ char *work = tf_path(cli_fixture_dir, "work");
        _cleanup_free_ char *m = tf_put(work, "bunfig.toml", "", 0);
        ck_assert_int_eq(chmod(work, 0500), 0);
        cli_cmd c;
        cli_cmd_run(&c, "init", NULL);
        ck_assert_int_eq(chmod(work, 0700), 0);
        _cleanup_free_ char *want = strdup_printf("error: cannot write %s/.taskferry.toml: Permission denied\nhelp: check "
                                                  "the directory's permissions", work);
        ck_assert_int_eq(c.r, -EIO);
        ck_assert_str_eq(c.err.text, want);
        ck_assert_int_eq(c.err.exit_code, CLI_EXIT_FAILURE);
        ck_assert_ptr_null(c.value);
        cli_cmd_done(&c);
}
END_TEST

int main(void) {
        Suite *s = suite_create("cli-views");
        tf_tcase(s, "context", NULL, NULL, 0, TF_TESTS(context_projection));
        tf_tcase(s, "daemon", setup, teardown, 30,
                 TF_TESTS(context_formats, doctor_without_tools_or_configs, doctor_without_daemon, doctor_integrations,
                          doctor_stats));
        TCase *init = tf_tcase(s, "init", setup, teardown, 30,
                               TF_TESTS(init_asks_on_a_tty, init_never_overwrites_or_follows, init_unwritable_directory,
                                        init_makefile_before_cmake));
        TF_LOOP(init, init_detects_without_a_tty, ecosystems);
        TF_LOOP(init, init_yes_is_what_the_project_file_reads, ecosystems);
        return tf_run_suite(s);
}
