/* commands.h: the daemon-backed commands run in this process against a fake
 * daemon (cli-fixture.h): the RPC each sends, what it returns to print, its
 * exit code, and what a daemon that fails mid-way (closes, closes mid-line,
 * answers malformed JSON, an error frame, a frame past 1 MiB) makes of it;
 * diff's patch on a pipe (never a pager) and on a terminal (a pager, one
 * that quits early). The binary's own printing and auto-start are
 * test-cli-client's. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli-args.h"
#include "cli-fixture.h"
#include "commands.h"
#include "json-util.h"
#include "unit.h"
#include "fileio.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

#define RETRY_HELP "Retry the command or run `taskferry --help`"

/* ---- the connection ---- */

/* A command whose row does not talk to the daemon never connects. */
START_TEST(call_refuses_a_command_without_daemon) {
        char *argv[] = {"init"};
        cli_args a = {};
        cli_error err = {};
        ck_assert_int_eq(cli_args_parse(argv, 1, &a, &err), 0);
        cli_context ctx = {.args = &a, .argv0 = "taskferry", .client = CLI_CLIENT_INIT};
        json_object *res = NULL;
        ck_assert_int_eq(cli_call(&ctx, "task.list", NULL, &res, &err), -EPERM);
        ck_assert_ptr_null(res);
        ck_assert_str_eq(err.text, "internal error: taskferry init is not a command that talks to the daemon");
        ck_assert(!ctx.connected);
        ck_assert_int_eq(ctx.client.fd, -1);
        cli_context_done(&ctx);
        cli_error_done(&err);
        cli_args_done(&a);
}
END_TEST

/* No daemon, auto-start off: the connect error, exit 1. */
START_TEST(no_daemon) {
        cli_cmd c;
        cli_cmd_run(&c, "status", "oc_a", NULL);
        _cleanup_json_ json_object *v = cli_error_value(&c.err);
        _cleanup_free_ char *text = strdup_printf("cannot connect to %s/run/daemon.sock: No such file or directory",
                                                  cli_fixture_dir);
        ck_assert_str_eq(json_get_string(v, "error"), text);
        ck_assert_str_eq(json_get_string(v, "help"), RETRY_HELP);
        ck_assert_int_eq(c.err.exit_code, CLI_EXIT_FAILURE);
        ck_assert_int_lt(c.r, 0);
        ck_assert_ptr_null(c.value);
        ck_assert_str_eq(c.out, "");
        cli_cmd_done(&c);
}
END_TEST

/* What a failing daemon makes of `status`: each row's frames for
 * task.status, the return and the printed error (exit 1 for all). */
static const cli_fake_failure failures[] = {
        {"closes", FAKE_FRAMES("CLOSE"), -ECONNRESET,
         "{\"error\":\"taskferry daemon connection closed\",\"help\":\"" RETRY_HELP "\"}"},
        {"closes mid-line", FAKE_FRAMES("RAW:{\"version\":1,\"ok\":true,\"id\":\"@ID@\",\"res", "CLOSE"), -ECONNRESET,
         "{\"error\":\"taskferry daemon connection closed\",\"help\":\"" RETRY_HELP "\"}"},
        {"malformed JSON", FAKE_FRAMES("{\"version\":1,\"ok\":true,\"id\":\"@ID@\",\"result\":{"), -EPROTO,
         "{\"error\":\"taskferry daemon sent an invalid frame\",\"help\":\"" RETRY_HELP "\"}"},
        {"not an object", FAKE_FRAMES("[1,2]"), -EPROTO,
         "{\"error\":\"taskferry daemon sent an invalid frame\",\"help\":\"" RETRY_HELP "\"}"},
        {"extra key", FAKE_FRAMES("{\"version\":1,\"ok\":true,\"id\":\"@ID@\",\"result\":{},\"x\":1}"), -EPROTO,
         "{\"error\":\"taskferry daemon sent an invalid frame\",\"help\":\"" RETRY_HELP "\"}"},
        {"error frame",
         FAKE_FRAMES(FAKE_ERR("UNKNOWN_TASK", "unknown task id: oc_a", "run taskferry list to see valid task ids",
                              "error: unknown task id: oc_a\\nhelp: run taskferry list to see valid task ids")),
         -EBADMSG, "{\"error\":\"unknown task id: oc_a\",\"help\":\"run taskferry list to see valid task ids\"}"},
        {"error frame, detail = message", FAKE_FRAMES(FAKE_ERR("REQUEST_FAILED", "boom", "try again", "boom")), -EBADMSG,
         "{\"error\":\"boom\",\"help\":\"try again\"}"},
        {"id-null error frame",
         FAKE_FRAMES("{\"version\":1,\"ok\":false,\"error\":{\"code\":\"MALFORMED_JSON\",\"message\":\"m\",\"help\":\"h\","
                     "\"detail\":\"m\"},\"id\":null}"),
         -EPROTO, "{\"error\":\"taskferry daemon sent an invalid frame\",\"help\":\"" RETRY_HELP "\"}"},
        {"frame past 1 MiB", FAKE_FRAMES("BIG"), -EPROTO,
         "{\"error\":\"taskferry daemon message exceeds 1048576 bytes\",\"help\":\"" RETRY_HELP "\"}"},
        {"restart", FAKE_FRAMES("{\"version\":1,\"type\":\"shutdown\",\"reason\":\"restart\"}", "CLOSE"), -ECONNRESET,
         "{\"error\":\"taskferry daemon is restarting (config or version change) — retry your command in a moment\","
         "\"help\":\"" RETRY_HELP "\"}"},
};

START_TEST(daemon_failures) {
        cli_fake_rule rules[] = {{"task.status", failures[_i].frames}, {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_run(&c, "status", "oc_a", NULL);
        ck_assert_msg(c.r == failures[_i].r, "%s: %d (%s)", failures[_i].name, c.r, strnull(c.err.text));
        cli_cmd_failed(&c, failures[_i].r, CLI_EXIT_FAILURE, failures[_i].error);
        /* nothing to print but the error, nothing on the streams */
        ck_assert_ptr_null(c.value);
        ck_assert_ptr_null(c.raw);
        ck_assert_str_eq(c.out, "");
        ck_assert_str_eq(c.errout, "");
        cli_cmd_done(&c);
        cli_fake_params_are("task.status", "{\"taskId\":\"oc_a\"}");
}
END_TEST

/* A result just under the 1 MiB line limit arrives whole. */
START_TEST(large_result) {
        size_t n = 1000 * 1000;
        _cleanup_free_ char *text = malloc(n + 1);
        memset(text, 'y', n);
        text[n] = 0;
        _cleanup_free_ char *frame = strdup_printf(
                FAKE_OK("{\"taskId\":\"oc_a\",\"status\":\"done\",\"text\":\"%s\",\"textTotalChars\":%zu,\"truncated\":false}"),
                text, n);
        const char *frames[] = {frame, NULL};
        cli_fake_rule rules[] = {{"task.tail", frames}, {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_run(&c, "tail", "oc_a", "--chars", "131072", NULL);
        ck_assert_int_eq(c.r, 0);
        ck_assert_str_eq(json_get_string(c.value, "text"), text);
        ck_assert_ptr_eq(c.value, c.raw); /* printed as the daemon sent it */
        cli_cmd_done(&c);
        cli_fake_params_are("task.tail", "{\"taskId\":\"oc_a\",\"chars\":131072}");
}
END_TEST

/* ---- each command's RPC ---- */

START_TEST(plain_commands_send_their_params) {
        cli_fake_start(NULL);
        const struct {
                const char *argv[8]; /* NULL-padded */
                const char *method, *params;
        } rows[] = {
                {{"cancel", "oc_a"}, "task.cancel", "{\"taskId\":\"oc_a\"}"},
                {{"cancel", "oc_a", "--grace-ms", "0"}, "task.cancel", "{\"taskId\":\"oc_a\",\"graceMs\":0}"},
                {{"reject", "oc_b"}, "task.reject", "{\"taskId\":\"oc_b\"}"},
                {{"tail", "oc_c"}, "task.tail", "{\"taskId\":\"oc_c\"}"},
                {{"output", "oc_d"}, "task.output", "{\"taskId\":\"oc_d\"}"},
                {{"output", "oc_d", "--max-output-file-bytes", "10", "--path", "a/b.txt"}, "task.output",
                 "{\"taskId\":\"oc_d\",\"path\":\"a/b.txt\",\"maxOutputFileBytes\":10}"},
                {{"summary", "oc_e", "--mode", "activity", "--max-words", "80"}, "task.summary",
                 "{\"taskId\":\"oc_e\",\"maxWords\":80,\"mode\":\"activity\"}"},
                {{"list", "--all"}, "task.list", "{}"},
                {{"wait", "oc_f", "--timeout", "0"}, "task.wait", "{\"taskId\":\"oc_f\",\"timeoutMs\":0}"},
        };
        for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
                const char *const *v = rows[i].argv;
                cli_cmd c;
                cli_cmd_run(&c, v[0], v[1], v[2], v[3], v[4], v[5], v[6], NULL);
                ck_assert_msg(c.r == 0, "%s: %s", v[0], strnull(c.err.text));
                cli_fake_params_are(rows[i].method, rows[i].params);
                cli_cmd_done(&c);
        }
}
END_TEST

/* summary: the report forwards the caller's env, activity never does and
 * prints mode first; --wait on a task still running stops at the lean
 * status with the spec's note. */
START_TEST(summary_modes_and_wait) {
        cli_fake_rule rules[] = {
                {"task.summary", FAKE_FRAMES(FAKE_OK("{\"sourceTaskId\":\"oc_a\",\"sourceStatus\":\"done\",\"activity\":\"x\"}"))},
                {"task.wait", FAKE_FRAMES(FAKE_OK("{\"id\":\"oc_a\",\"status\":\"running\",\"startedAt\":null}"))},
                {"task.wait", FAKE_FRAMES(FAKE_OK("{\"id\":\"oc_a\",\"status\":\"done\",\"startedAt\":null}"))},
                {}};
        cli_fake_start(rules);
        setenv("TF_SUMMARY_MARKER", "m1", 1);
        cli_cmd c;
        cli_cmd_run(&c, "summary", "oc_a", NULL);
        ck_assert_int_eq(c.r, 0);
        _cleanup_json_ json_object *p = cli_fake_params("task.summary", -1);
        ck_assert_str_eq(json_get_string(json_get_object(p, "env"), "TF_SUMMARY_MARKER"), "m1");
        ck_assert_ptr_null(json_get(p, "mode"));
        ck_assert_str_eq(json_to_line(c.value, NULL), json_to_line(c.raw, NULL));
        cli_cmd_done(&c);

        cli_cmd_run(&c, "summary", "oc_a", "--mode", "activity", NULL);
        cli_cmd_value_is(&c, "{\"mode\":\"activity\",\"sourceTaskId\":\"oc_a\",\"sourceStatus\":\"done\",\"activity\":\"x\"}");
        cli_fake_params_are("task.summary", "{\"taskId\":\"oc_a\",\"mode\":\"activity\"}");
        cli_cmd_done(&c);

        cli_cmd_run(&c, "summary", "oc_a", "--wait", NULL);
        ck_assert_int_eq(c.r, 0);
        ck_assert_str_eq(json_get_string(c.value, "note"),
                         "Task has not settled yet (status: running); run taskferry summary --wait again to keep "
                         "waiting, or omit --wait to summarize the in-progress task");
        ck_assert_str_eq(json_get_string(c.value, "status"), "running");
        cli_fake_params_are("task.wait", "{\"taskId\":\"oc_a\",\"timeoutMs\":900000}");
        ck_assert_uint_eq(cli_fake_count("task.summary"), 2); /* not asked again */
        cli_cmd_done(&c);

        /* settled: on to the summary */
        cli_cmd_run(&c, "summary", "oc_a", "--wait", NULL);
        ck_assert_int_eq(c.r, 0);
        ck_assert_uint_eq(cli_fake_count("task.summary"), 3);
        cli_cmd_done(&c);
}
END_TEST

START_TEST(wait_summarize_is_a_usage_error) {
        cli_fake_start(NULL);
        cli_cmd c;
        cli_cmd_run(&c, "wait", "oc_a", "--summarize", NULL);
        cli_cmd_failed(&c, -EINVAL, CLI_EXIT_USAGE,
                       "{\"error\":\"wait --summarize is not available in this build yet\",\"help\":\"Run `taskferry wait "
                       "<id>` without --summarize\"}");
        ck_assert_uint_eq(cli_fake_count("task.wait"), 0);
        cli_cmd_done(&c);
}
END_TEST

/* The daemon's "--model is required" is the caller's usage error (exit 2);
 * other dispatch failures stay operational; the daemon's warnings go to
 * stderr. */
START_TEST(dispatch_model_required_and_warnings) {
        cli_fake_rule rules[] = {
                {"task.dispatch", FAKE_FRAMES(FAKE_ERR("REQUEST_FAILED", "--model is required", "pass --model <provider/model>",
                                                       "error: --model is required\\nhelp: pass --model <provider/model>"))},
                {"task.dispatch", FAKE_FRAMES(FAKE_ERR("REQUEST_FAILED", "--model is invalid", "pass another",
                                                       "error: --model is invalid\\nhelp: pass another"))},
                {"task.dispatch", FAKE_FRAMES(FAKE_OK("{\"id\":\"oc_n\",\"status\":\"queued\",\"warnings\":[\"warning: --rw-bind "
                                                      "/home/u exposes ~/.ssh\",\"second\"]}"))},
                {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_run(&c, "dispatch", "--prompt", "p", NULL);
        cli_cmd_failed(&c, -EBADMSG, CLI_EXIT_USAGE,
                       "{\"error\":\"--model is required\",\"help\":\"pass --model <provider/model>\"}");
        cli_cmd_done(&c);
        cli_cmd_run(&c, "dispatch", "--prompt", "p", NULL);
        cli_cmd_failed(&c, -EBADMSG, CLI_EXIT_FAILURE, "{\"error\":\"--model is invalid\",\"help\":\"pass another\"}");
        cli_cmd_done(&c);
        cli_cmd_run(&c, "dispatch", "--prompt", "p", NULL);
        ck_assert_int_eq(c.r, 0);
        ck_assert_str_eq(c.errout, "warning: --rw-bind /home/u exposes ~/.ssh\nsecond\n");
        ck_assert_str_eq(json_get_string(c.value, "id"), "oc_n");
        cli_cmd_done(&c);
}
END_TEST

/* accept: a gate that ran is no warning; "none" is */
START_TEST(accept_check_warning) {
        cli_fake_rule rules[] = {
                {"task.accept", FAKE_FRAMES(FAKE_OK("{\"taskId\":\"oc_a\",\"changesetStatus\":\"accepted\",\"applied\":true,\"checkStatus\":\"passed\"}"))},
                {"task.accept", FAKE_FRAMES(FAKE_OK("{\"taskId\":\"oc_a\",\"changesetStatus\":\"accepted\",\"applied\":true,\"checkStatus\":\"none\"}"))},
                {"task.accept", FAKE_FRAMES(FAKE_OK("{\"taskId\":\"oc_a\",\"changesetStatus\":\"pending\",\"applied\":false}"))},
                {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_run(&c, "accept", "oc_a", NULL);
        ck_assert_int_eq(c.r, 0);
        ck_assert_str_eq(c.errout, "");
        cli_cmd_done(&c);
        cli_cmd_run(&c, "accept", "oc_a", "--force", NULL);
        ck_assert_int_eq(c.r, 0);
        ck_assert_str_eq(c.errout, "warning: changeset applied, but this repo declares no check command in .taskferry.toml "
                                   "-- nothing was verified before landing\n");
        cli_fake_params_are("task.accept", "{\"taskId\":\"oc_a\",\"force\":true}");
        cli_cmd_done(&c);
        /* applied:false without a reason: the default one, exit 1, the raw result kept for --json */
        cli_cmd_run(&c, "accept", "oc_a", NULL);
        cli_cmd_failed(&c, -EIO, CLI_EXIT_FAILURE,
                       "{\"error\":\"changeset for task oc_a failed to apply\\n  reason: the target directory rejected the "
                       "patch\",\"help\":\"the task is still pending -- resolve the reported conflict in the target "
                       "directory, then retry \\\"taskferry accept oc_a\\\", or discard the changeset with \\\"taskferry "
                       "reject oc_a\\\"\"}");
        ck_assert_ptr_nonnull(c.raw);
        ck_assert_ptr_null(c.value);
        cli_cmd_done(&c);
}
END_TEST

/* ---- directories ---- */

START_TEST(workspace_directory_errors_before_connecting) {
        /* no daemon: a connect would be a different error */
        _cleanup_free_ char *file = tf_put(cli_fixture_dir, "afile", "x", 1);
        cli_cmd c;
        cli_cmd_run(&c, "list", "--directory", "/nonexistent/taskferry-dir", NULL);
        cli_cmd_failed(&c, -EINVAL, CLI_EXIT_USAGE,
                       "{\"error\":\"directory does not exist: /nonexistent/taskferry-dir\",\"help\":\"Use an existing "
                       "directory path for --directory (No such file or directory)\"}");
        cli_cmd_done(&c);
        cli_cmd_run(&c, "context", "--directory", file, NULL);
        ck_assert_int_eq(c.r, -EINVAL);
        ck_assert_int_eq(c.err.exit_code, CLI_EXIT_USAGE);
        _cleanup_free_ char *want = strdup_printf("path is not a directory: %s", file);
        ck_assert_str_eq(c.err.text, want);
        ck_assert_str_eq(c.err.help, "Use --directory with a workspace directory, not a file");
        cli_cmd_done(&c);
        cli_cmd_run(&c, "dispatch", "--prompt", "p", "--directory", file, NULL);
        ck_assert_int_eq(c.err.exit_code, CLI_EXIT_USAGE);
        cli_cmd_done(&c);
}
END_TEST

/* The workspace view: the workspace root of the cwd, bin through PATH
 * with $HOME shown as ~. */
START_TEST(home_view) {
        cli_fake_start(NULL);
        _cleanup_free_ char *bin = tf_path(cli_fixture_dir, "home/bin/taskferry");
        tf_mkdirs(cli_fixture_dir, "home/bin");
        tf_write_file(bin, "#!/bin/sh\n", 10, 0755);
        _cleanup_free_ char *path = strdup_printf("%s/home/bin:/usr/bin:/bin", cli_fixture_dir);
        setenv("PATH", path, 1);
        _cleanup_free_ char *work = tf_path(cli_fixture_dir, "work");
        cli_cmd c;
        cli_cmd_ok(&c, NULL);
        ck_assert_str_eq(json_get_string(c.value, "workspace"), work);
        ck_assert_str_eq(json_get_string(c.value, "bin"), "~/bin/taskferry");
        _cleanup_json_ json_object *p = cli_fake_params("task.list", -1);
        ck_assert_str_eq(json_get_string(p, "directory"), work);
        /* not in a repository: said on stderr */
        _cleanup_free_ char *notice = strdup_printf("no git repository found for %s; using it directly\n", work);
        ck_assert_str_eq(c.errout, notice);
        cli_cmd_done(&c);
}
END_TEST

START_TEST(version_needs_no_daemon) {
        cli_cmd c;
        cli_cmd_run(&c, "--version", NULL);
        ck_assert_int_eq(c.r, 0);
        ck_assert_str_eq(json_get_string(c.value, "name"), "taskferry");
        ck_assert_str_eq(json_get_string(c.value, "version"), json_get_string(c.raw, "version"));
        int64_t pv = 0;
        ck_assert(json_get_int64(c.value, "protocolVersion", &pv));
        ck_assert_int_eq(pv, 1);
        cli_cmd_done(&c);
}
END_TEST

/* ---- diff ---- */

#define PATCH                                                                                                          \
        "diff --git a/a.txt b/a.txt\nnew file mode 100644\n--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+hello\n"          \
        "diff --git a/src/b.c b/src/b.c\n--- a/src/b.c\n+++ b/src/b.c\n@@ -1 +1 @@\n-old\n+new\n"

static char *diff_frame(const char *changeset_status, const char *diff_path, const char *status) {
        _cleanup_free_ char *path = diff_path ? strdup_printf("\"%s\"", diff_path) : strdup("null");
        return strdup_printf(FAKE_OK("{\"taskId\":\"oc_a\",\"status\":\"%s\",\"changesetStatus\":\"%s\",\"diffPath\":%s,"
                                     "\"changesetError\":null}"),
                             status, changeset_status, path);
}

/* cli_run_diff with the daemon answering one frame. */
static void run_diff(cli_cmd *c, const char *frame) {
        const char *frames[] = {frame, NULL};
        cli_fake_rule rules[] = {{"task.result", frames}, {}};
        cli_fake_stop();
        cli_fake_start(rules);
        cli_cmd_run(c, "diff", "oc_a", NULL);
}

static const struct {
        const char *status, *changeset, *want_error, *want_help;
} diff_refusals[] = {
        {"running", "pending", "task oc_a is still running; its changeset is not extracted yet",
         "Run taskferry wait oc_a, then taskferry diff oc_a"},
        {"done", "accepted", "task oc_a has no pending changeset (changesetStatus: accepted)",
         "its changes were applied to the target directory (or it made none); see git diff there"},
        {"done", "rejected", "task oc_a has no pending changeset (changesetStatus: rejected)",
         "its changeset was discarded (taskferry reject, or a conflict at extraction)"},
        {"crashed", "none", "task oc_a has no pending changeset (changesetStatus: none)",
         "it ran without a copy-on-write overlay, so there is nothing to review"},
};

START_TEST(diff_refusals_name_why) {
        _cleanup_free_ char *patch = tf_put(cli_fixture_dir, "state/diffs/oc_a.patch", PATCH, strlen(PATCH));
        _cleanup_free_ char *frame = diff_frame(diff_refusals[_i].changeset, patch, diff_refusals[_i].status);
        cli_cmd c;
        run_diff(&c, frame);
        ck_assert_int_eq(c.r, -EIO);
        _cleanup_json_ json_object *v = cli_error_value(&c.err);
        ck_assert_str_eq(json_get_string(v, "error"), diff_refusals[_i].want_error);
        ck_assert_str_eq(json_get_string(v, "help"), diff_refusals[_i].want_help);
        ck_assert_str_eq(c.out, "");
        cli_cmd_done(&c);
        cli_fake_params_are("task.result", "{\"taskId\":\"oc_a\",\"fields\":[\"changesetStatus\",\"diffPath\",\"changesetError\"]}");
}
END_TEST

START_TEST(diff_patch_file_problems) {
        cli_cmd c;
        /* pending but never extracted */
        {
                const char *frame = FAKE_OK("{\"taskId\":\"oc_a\",\"status\":\"done\",\"changesetStatus\":\"pending\","
                                            "\"diffPath\":null,\"changesetError\":\"git diff failed\"}");
                run_diff(&c, frame);
                _cleanup_json_ json_object *v = cli_error_value(&c.err);
                ck_assert_str_eq(json_get_string(v, "error"), "the changeset of task oc_a was never extracted: git diff failed");
                ck_assert_str_eq(json_get_string(v, "help"),
                                 "Run taskferry status oc_a --full for details; taskferry reject oc_a discards it");
                cli_cmd_done(&c);
        }
        /* gone meanwhile */
        {
                _cleanup_free_ char *missing = tf_path(cli_fixture_dir, "state/diffs/gone.patch");
                _cleanup_free_ char *frame = diff_frame("pending", missing, "done");
                run_diff(&c, frame);
                _cleanup_json_ json_object *v = cli_error_value(&c.err);
                ck_assert_str_eq(json_get_string(v, "error"), "the patch of task oc_a is gone (accepted or rejected meanwhile)");
                cli_cmd_done(&c);
        }
        /* a symlink there is never followed; a directory is not a patch */
        {
                _cleanup_free_ char *secret = tf_put(cli_fixture_dir, "home/.ssh/id_ed25519", "KEY", 3);
                _cleanup_free_ char *link = tf_path(cli_fixture_dir, "state/link.patch");
                ck_assert_int_eq(symlink(secret, link), 0);
                _cleanup_free_ char *frame = diff_frame("pending", link, "done");
                run_diff(&c, frame);
                ck_assert_int_eq(c.r, -EIO);
                ck_assert_str_eq(c.err.text, "error: cannot read the patch of task oc_a: Too many levels of symbolic "
                                             "links\nhelp: Run taskferry status oc_a --full");
                ck_assert(!strstr(c.out, "KEY"));
                cli_cmd_done(&c);
        }
        {
                _cleanup_free_ char *d = tf_path(cli_fixture_dir, "state");
                _cleanup_free_ char *frame = diff_frame("pending", d, "done");
                run_diff(&c, frame);
                ck_assert_str_eq(c.err.text, "error: cannot read the patch of task oc_a: not a regular file\nhelp: Run "
                                             "taskferry status oc_a --full");
                cli_cmd_done(&c);
        }
}
END_TEST

/* On a pipe: the patch byte for byte, never a pager. */
START_TEST(diff_on_a_pipe_has_no_pager) {
        _cleanup_free_ char *patch = tf_put(cli_fixture_dir, "state/diffs/oc_a.patch", PATCH, strlen(PATCH));
        _cleanup_free_ char *marker = tf_path(cli_fixture_dir, "pager-ran");
        _cleanup_free_ char *pager = strdup_printf("touch %s; cat", marker);
        setenv("PAGER", pager, 1);
        setenv("GIT_PAGER", pager, 1);
        _cleanup_free_ char *frame = diff_frame("pending", patch, "done");
        cli_cmd c;
        run_diff(&c, frame);
        ck_assert_msg(c.r == 0, "%s", strnull(c.err.text));
        ck_assert(c.output_done);
        ck_assert_ptr_null(c.value);
        ck_assert_str_eq(c.out, PATCH);
        ck_assert_int_lt(access(marker, F_OK), 0);
        cli_cmd_done(&c);
}
END_TEST

START_TEST(diff_path_limits_and_stat) {
        _cleanup_free_ char *patch = tf_put(cli_fixture_dir, "state/diffs/oc_a.patch", PATCH, strlen(PATCH));
        _cleanup_free_ char *frame = diff_frame("pending", patch, "done");
        const char *frames[] = {frame, NULL};
        cli_fake_rule rules[] = {{"task.result", frames}, {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_run(&c, "diff", "oc_a", "--", "src", NULL);
        ck_assert_int_eq(c.r, 0);
        ck_assert_str_eq(c.out, "diff --git a/src/b.c b/src/b.c\n--- a/src/b.c\n+++ b/src/b.c\n@@ -1 +1 @@\n-old\n+new\n");
        cli_cmd_done(&c);
        cli_cmd_run(&c, "diff", "oc_a", "--", "nothing/here", NULL);
        ck_assert_int_eq(c.r, -EIO);
        ck_assert_str_eq(c.err.text, "error: no file of task oc_a's changeset matches the given paths\nhelp: Run taskferry "
                                     "diff oc_a --stat to list its files");
        cli_cmd_done(&c);
        cli_cmd_ok(&c, "diff", "oc_a", "--stat", NULL);
        /* git's own diffstat of the patch */
        ck_assert_msg(startswith(c.out, " a.txt   |") && strstr(c.out, "\n src/b.c |") &&
                              strstr(c.out, "\n 2 files changed, 2 insertions(+), 1 deletion(-)\n"),
                      "%s", c.out);
        cli_cmd_done(&c);
}
END_TEST

/* cli_cmd_run with our stdout a terminal: run diff with its output there
 * (cli_cmd's capture replaced by the pty for this one run). */
static int diff_on_terminal(const char *pager, const char *patch_path, cli_cmd *c) {
        setenv("PAGER", pager, 1);
        _cleanup_free_ char *frame = diff_frame("pending", patch_path, "done");
        const char *frames[] = {frame, NULL};
        cli_fake_rule rules[] = {{"task.result", frames}, {}};
        cli_fake_stop();
        cli_fake_start(rules);
        /* a pty for our stdout, its master kept, drained by nobody (the
         * pager writes to a file) */
        int slave;
        _cleanup_close_ int master = cli_open_pty(&slave);
        char *argv[] = {"diff", "oc_a"};
        cli_args a = {};
        ck_assert_int_eq(cli_args_parse(argv, 2, &a, &c->err), 0);
        cli_context ctx = {.args = &a, .argv0 = "taskferry", .interrupted = &cli_fixture_interrupted, .client = CLI_CLIENT_INIT};
        fflush(stdout);
        int saved = dup(STDOUT_FILENO);
        ck_assert_int_ge(dup2(slave, STDOUT_FILENO), 0);
        close(slave);
        int r = cli_run_diff(&ctx, &c->value, &c->raw, &c->err);
        c->output_done = ctx.output_done;
        ck_assert_int_ge(dup2(saved, STDOUT_FILENO), 0);
        close(saved);
        cli_context_done(&ctx);
        cli_args_done(&a);
        return r;
}

START_TEST(diff_on_a_terminal_pages) {
        _cleanup_free_ char *patch = tf_put(cli_fixture_dir, "state/diffs/oc_a.patch", PATCH, strlen(PATCH));
        _cleanup_free_ char *paged = tf_path(cli_fixture_dir, "paged");
        _cleanup_free_ char *pager = strdup_printf("cat > %s", paged);
        cli_cmd c = {};
        ck_assert_int_eq(diff_on_terminal(pager, patch, &c), 0);
        ck_assert(c.output_done);
        _cleanup_free_ char *got = tf_read_file(paged, false);
        /* coloured for the terminal, every line of the patch there */
        ck_assert_msg(strstr(got, "\033[") && strstr(got, "+hello") && strstr(got, "-old"), "%s", got);
        cli_cmd_done(&c);
}
END_TEST

/* A pager that quits before the end (q in less, a pager that is not
 * there): the patch stops quietly, exit 0, no SIGPIPE. */
START_TEST(diff_pager_quits_early) {
        size_t n = 4 << 20;
        _cleanup_free_ char *big = malloc(n + 256);
        ck_assert_ptr_nonnull(big);
        size_t len = (size_t) sprintf(big, "diff --git a/big b/big\n--- a/big\n+++ b/big\n@@ -1 +1,99999 @@\n");
        while (len + 8 < n) len += (size_t) sprintf(big + len, "+line\n");
        _cleanup_free_ char *patch = tf_put(cli_fixture_dir, "state/diffs/oc_a.patch", big, len);
        static const char *const pagers[] = {"head -c 100 >/dev/null", "exit 0", "taskferry-no-such-pager 2>/dev/null"};
        for (size_t i = 0; i < ELEMENTSOF(pagers); i++) {
                cli_cmd c = {};
                ck_assert_msg(diff_on_terminal(pagers[i], patch, &c) == 0, "%s: %s", pagers[i], strnull(c.err.text));
                ck_assert(c.output_done);
                cli_cmd_done(&c);
        }
}
END_TEST

int main(void) {
        Suite *s = suite_create("commands");
        TCase *tc = tf_tcase(s, "commands", cli_fixture_setup, cli_fixture_teardown, 60,
                             TF_TESTS(call_refuses_a_command_without_daemon, no_daemon, large_result,
                                      plain_commands_send_their_params, summary_modes_and_wait,
                                      wait_summarize_is_a_usage_error, dispatch_model_required_and_warnings,
                                      accept_check_warning, workspace_directory_errors_before_connecting, home_view,
                                      version_needs_no_daemon));
        TF_LOOP(tc, daemon_failures, failures);
        tf_tcase(s, "diff", cli_fixture_setup, cli_fixture_teardown, 60,
                 TF_TESTS(diff_patch_file_problems, diff_on_a_pipe_has_no_pager, diff_path_limits_and_stat,
                          diff_on_a_terminal_pages, diff_pager_quits_early));
        TCase *d = tcase_create("diff-refusals");
        tcase_add_checked_fixture(d, cli_fixture_setup, cli_fixture_teardown);
        TF_LOOP(d, diff_refusals_name_why, diff_refusals);
        suite_add_tcase(s, d);
        return tf_run_suite(s);
}
