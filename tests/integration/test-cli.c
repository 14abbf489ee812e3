/* The CLI surface against a real daemon: TOON errors and exit codes, --json
 * for every command, auto-start (exactly one daemon for racing CLIs). */

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

TF_WORLD_TEST(unknown_task_is_a_toon_error_exit_1) {
        const char *argv[] = {"status", "nope", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert_str_eq(r.out, "error: \"unknown task id: nope\"\nhelp: run taskferry list to see valid task ids\n");
        tf_run_done(&r);
}
END_TEST

TF_WORLD_TEST(dispatch_without_prompt_is_usage_error) {
        const char *argv[] = {"dispatch", "--executor", "shell", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        ck_assert_int_eq(r.exit_code, 2);
        ck_assert_msg(strstr(r.out, "error: \"--prompt is required\"\n"), "%s", r.out);
        tf_run_done(&r);
        /* usage errors never start a daemon */
        ck_assert_int_lt(tf_daemon_pid(w), 0);
        const char *bad[] = {"dispatch", "--prompt", "x", "--bogus", NULL};
        r = tf_cli(w, NULL, NULL, bad);
        ck_assert_int_eq(r.exit_code, 2);
        ck_assert_msg(strstr(r.out, "unknown flag --bogus for `dispatch`"), "%s", r.out);
        tf_run_done(&r);
        const char *dir[] = {"dispatch", "--prompt", "x", "--directory", "/nonexistent/dir", NULL};
        r = tf_cli(w, NULL, NULL, dir);
        ck_assert_int_eq(r.exit_code, 2);
        ck_assert_msg(strstr(r.out, "directory does not exist: /nonexistent/dir"), "%s", r.out);
        tf_run_done(&r);
}
END_TEST

static void assert_json_output(tf_world *w, const char *const argv[], int want_exit) {
        tf_run r = tf_cli(w, NULL, NULL, argv);
        ck_assert_msg(r.exit_code == want_exit, "%s: exit %d (want %d): %s %s", argv[0], r.exit_code, want_exit, r.out,
                      r.err);
        json_object *o = NULL;
        ck_assert_msg(json_parse_strict(r.out, strlen(r.out), &o) == 0 && o, "%s --json is not JSON: %s", argv[0], r.out);
        json_object_put(o);
        tf_run_done(&r);
}

TF_WORLD_TEST(json_output_for_every_command) {
        char *repo = tf_repo_new(w, NULL, "echo a > a");
        char *id = tf_dispatch_shell(w, repo, NULL, "echo b > b; echo hi");
        const struct {
                const char *argv[5];
                int exit;
        } cmds[] = {
                {{"wait", id, "--json"}, 0},
                {{"status", id, "--json"}, 0},
                {{"result", id, "--json"}, 0},
                {{"result", id, "--diff", "--json"}, 0},
                {{"list", "--all", "--json"}, 0},
                {{"cancel", id, "--json"}, 0},
                {{"reject", id, "--json"}, 0},
                /* errors are JSON too under --json */
                {{"accept", id, "--json"}, 1},
                {{"status", "nope", "--json"}, 1},
                {{"dispatch", "--json"}, 2},
                {{"--version", "--json"}, 0},
        };
        for (size_t i = 0; i < ELEMENTSOF(cmds); i++) assert_json_output(w, cmds[i].argv, cmds[i].exit);
        /* TOON by default */
        const char *v[] = {"--version", NULL};
        tf_run r = tf_cli(w, NULL, NULL, v);
        ck_assert_int_eq(r.exit_code, 0);
        ck_assert_msg(startswith(r.out, "name: taskferry\nversion: "), "%s", r.out);
        ck_assert_msg(strstr(r.out, "\nprotocolVersion: 1\n"), "%s", r.out);
        tf_run_done(&r);
        const char *st[] = {"status", id, NULL};
        r = tf_cli(w, NULL, NULL, st);
        ck_assert_int_eq(r.exit_code, 0);
        char *head = strdup_printf("id: %s\nstatus: done\nstartedAt: \"", id);
        ck_assert_msg(startswith(r.out, head), "%s", r.out);
        free(head);
        tf_run_done(&r);
        const char *help[] = {"dispatch", "--help", NULL};
        r = tf_cli(w, NULL, NULL, help);
        ck_assert_int_eq(r.exit_code, 0);
        ck_assert_msg(strstr(r.out, "command: dispatch"), "%s", r.out);
        tf_run_done(&r);
        free(id), free(repo);
}
END_TEST

TF_WORLD_TEST(oversized_request_is_explained) {
        size_t n = 1100 * 1024;
        char *big = malloc(n + 1);
        memset(big, 'a', n);
        big[n] = 0;
        const char *argv[] = {"dispatch", "--executor", "shell", "--directory", w->repo_parent, "--prompt", "-", NULL};
        tf_run r = tf_cli(w, NULL, big, argv);
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert_msg(strstr(r.out, "over the daemon's 1 MiB request limit"), "%s", r.out);
        tf_run_done(&r);
        free(big);
}
END_TEST

/* a taskferryd whose environment names the world's state dir */
static bool world_daemon(pid_t pid, void *entry) {
        char exe[4096], path[64];
        snprintf(path, sizeof path, "/proc/%d/exe", (int) pid);
        ssize_t k = readlink(path, exe, sizeof exe - 1);
        if (k <= 0) return false;
        exe[k] = 0;
        return strstr(exe, "taskferryd") && tf_proc_has_env(pid, entry);
}

static int count_daemons(tf_world *w) {
        _cleanup_free_ char *entry = strdup_printf("TASKFERRY_STATE_DIR=%s", w->state);
        return (int) tf_procs(world_daemon, entry, NULL, 0);
}

TF_WORLD_TEST(racing_clis_start_one_daemon) {
        pid_t kids[4];
        for (int i = 0; i < 4; i++) {
                kids[i] = fork();
                ck_assert_int_ge(kids[i], 0);
                if (kids[i] == 0) {
                        int devnull = open("/dev/null", O_WRONLY);
                        dup2(devnull, 1);
                        dup2(devnull, 2);
                        char *argv[] = {(char *) tf_bin("taskferry"), (char *) "list", (char *) "--all", NULL};
                        execve(argv[0], argv, w->env);
                        _exit(127);
                }
        }
        for (int i = 0; i < 4; i++) {
                int status;
                waitpid(kids[i], &status, 0);
                ck_assert(WIFEXITED(status));
                ck_assert_int_eq(WEXITSTATUS(status), 0);
        }
        ck_assert_int_eq(count_daemons(w), 1);
}
END_TEST

TF_WORLD_TEST(auto_start_disabled) {
        tf_world_setenv(w, "TASKFERRY_AUTO_START", "0");
        const char *argv[] = {"list", "--all", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert_int_eq(count_daemons(w), 0);
        tf_run_done(&r);
}
END_TEST

/* doctor without a daemon to ask: the health part is empty, the local
 * checks still run (it crashed once on the missing answer) */
TF_WORLD_TEST(doctor_without_a_daemon) {
        tf_world_setenv(w, "TASKFERRY_AUTO_START", "0");
        const char *argv[] = {"doctor", "--json", NULL};
        json_object *o = tf_cli_json(w, argv, 0);
        ck_assert(!json_object_object_get_ex(o, "healthy", NULL));
        ck_assert(json_object_object_get_ex(o, "integrations", NULL));
        json_object_put(o);
        ck_assert_int_eq(count_daemons(w), 0);
}
END_TEST

int main(void) {
        return tf_run_tests("cli", "cli", 300,
                            TF_TESTS(unknown_task_is_a_toon_error_exit_1, dispatch_without_prompt_is_usage_error,
                                     json_output_for_every_command, racing_clis_start_one_daemon, auto_start_disabled,
                                     doctor_without_a_daemon, oversized_request_is_explained));
}
