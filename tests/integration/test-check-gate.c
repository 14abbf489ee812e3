/* The check gate end to end, through the CLI and an isolated daemon with
 * real bwrap, overlayfs and git: a repository's .taskferry.toml names a
 * check; after a worker leaves changes, the check runs over them in the
 * sandbox, and its verdict decides whether accept needs --force. The check
 * is the worker's code too (package scripts live in the overlay): it gets
 * out through nothing a worker could not. */

#include <check.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"

/* A repository whose committed .taskferry.toml holds toml. */
static char *gated_repo(tf_world *w, const char *toml) {
        char *repo = tf_repo_new(w, NULL, "printf 'base\\n' > tracked.txt");
        tf_write(tf_path(repo, ".taskferry.toml"), toml, strlen(toml), 0644);
        free(tf_shf(w, repo, "git add .taskferry.toml && git commit -qm gate"));
        return repo;
}

/* Wait until the task's checkStatus is want (at most 60 s); its status --full. */
static json_object *wait_check(tf_world *w, const char *id, const char *want) {
        return tf_wait_check(w, id, (const char *const[]) {want, NULL}, 60000);
}

static tf_run cli(tf_world *w, const char *const argv[]) { return tf_cli(w, NULL, NULL, argv); }

/* What a refused command said (errors go to stdout as TOON), unescaped. */
static char *said(const tf_run *r) { return tf_unescape(r->out); }

/* G1: a passing check; accept lands it without a word about verification. */
TF_WORLD_TEST(gate_passes) {
        char *repo = gated_repo(w, "# the gate\ncheck = \"test -f added.txt\"\n");
        char *id = tf_shell_pending(w, repo, NULL, "printf 'new\\n' > added.txt", NULL);
        json_object *st = wait_check(w, id, "passed");
        int64_t code = -1;
        ck_assert(json_get_int64(st, "checkExitCode", &code) && code == 0);
        ck_assert_str_eq(strempty(tf_jstr(st, "checkCommand")), "test -f added.txt");
        ck_assert_msg(tf_jstr(st, "checkStartedAt") && tf_jstr(st, "checkEndedAt"), "%s", json_to_line(st, NULL));
        /* list's check column */
        const char *largv[] = {"list", "--all", NULL};
        tf_run l = cli(w, largv);
        ck_assert_msg(l.exit_code == 0 && strstr(l.out, "passed"), "%s", l.out);
        tf_run_done(&l);
        const char *argv[] = {"accept", id, NULL};
        tf_run r = cli(w, argv);
        ck_assert_msg(r.exit_code == 0, "%s %s", r.out, r.err);
        ck_assert_msg(!strstr(r.err, "declares no check"), "%s", r.err);
        ck_assert(tf_exists(tf_path(repo, "added.txt")));
        tf_run_done(&r);
        json_object_put(st);
        free(id), free(repo);
}

/* event.subscribe hears the gate: task.check events, running then passed. */
TF_WORLD_TEST(gate_events) {
        char *repo = gated_repo(w, "check = \"test -f added.txt\"\n");
        tf_daemon_start(w);
        int fd = tf_connect(w);
        tf_send(fd, "{\"version\":1,\"id\":\"s\",\"method\":\"event.subscribe\",\"params\":{\"all\":true}}");
        char *id = tf_dispatch_shell(w, repo, NULL, "echo x > added.txt");
        bool running = false, passed = false;
        for (int i = 0; i < 200 && !passed; i++) {
                _cleanup_free_ char *line = tf_recv_line(fd, 30000);
                ck_assert_msg(line, "no task.check passed event (running seen: %d)", running);
                if (!strstr(line, "\"task.check\"") || !strstr(line, id)) continue;
                running = running || strstr(line, "\"checkStatus\":\"running\"");
                passed = strstr(line, "\"checkStatus\":\"passed\"") && strstr(line, "\"checkExitCode\":0");
                ck_assert_msg(!strstr(line, "added.txt"), "the event carries the check's command or output: %s", line);
        }
        ck_assert(running && passed);
        close(fd);
        free(id), free(repo);
}

/* No project file, or a worker that changed nothing: no gate, no field. */
TF_WORLD_TEST(no_file_or_no_changes_no_gate) {
        char *plain = tf_repo_new(w, NULL, NULL);
        char *id = tf_shell_pending(w, plain, NULL, "echo x > added.txt", NULL);
        json_object *st = tf_status_full(w, id);
        ck_assert_msg(!json_get_string(st, "checkStatus"), "%s", json_to_line(st, NULL));
        const char *argv[] = {"accept", id, NULL};
        tf_run r = cli(w, argv);
        ck_assert_int_eq(r.exit_code, 0);
        ck_assert_msg(strstr(r.err, "declares no check command"), "%s", r.err);
        tf_run_done(&r);
        json_object_put(st);

        char *repo = gated_repo(w, "check = \"true\"\n");
        json_object *st2 = NULL;
        char *id2 = tf_shell_settled(w, repo, NULL, "true", &st2);
        json_object_put(st2);
        st2 = tf_status_full(w, id2);
        ck_assert_msg(!json_get_string(st2, "checkStatus"), "%s", json_to_line(st2, NULL));
        json_object_put(st2);
        free(id), free(id2), free(plain), free(repo);
}

/* G2: a failing check blocks accept with the fix-forward text; the tail is
 * the last 40 lines; --force lands it and says so. */
TF_WORLD_TEST(gate_fails_blocks_accept) {
        char *repo = gated_repo(w, "check = \"seq 1 50; exit 1\"\n");
        char *id = tf_shell_pending(w, repo, NULL, "echo x > added.txt", NULL);
        json_object *st = wait_check(w, id, "failed");
        int64_t code = -1;
        ck_assert(json_get_int64(st, "checkExitCode", &code) && code == 1);
        json_object_put(st);
        const char *rargv[] = {"result", id, "--fields", "checkOutputTail", "--json", NULL};
        json_object *res = tf_cli_json(w, rargv, 0);
        _cleanup_free_ char *want = tf_shf(w, NULL, "seq 11 50");
        ck_assert_str_eq(strempty(tf_jstr(res, "checkOutputTail")), want);
        json_object_put(res);

        char *before = tf_tree_snapshot(repo, false);
        const char *argv[] = {"accept", id, NULL};
        tf_run r = cli(w, argv);
        ck_assert_int_eq(r.exit_code, 1);
        _cleanup_free_ char *text = said(&r);
        ck_assert_msg(strstr(text, "command: seq 1 50; exit 1 (from .taskferry.toml)"), "%s", text);
        ck_assert_msg(strstr(text, "exit: 1"), "%s", text);
        ck_assert_msg(strstr(text, "    50\n") && !strstr(text, "    10\n"), "%s", text);
        _cleanup_free_ char *resume = strdup_printf("--parent-task %s", id);
        ck_assert_msg(strstr(text, "taskferry dispatch --directory ") && strstr(text, resume), "%s", text);
        tf_run_done(&r);
        char *after = tf_tree_snapshot(repo, false);
        ck_assert_str_eq(after, before);
        _cleanup_free_ char *cs = tf_changeset_status(w, id);
        ck_assert_str_eq(cs, "pending");

        const char *fargv[] = {"accept", id, "--force", NULL};
        r = cli(w, fargv);
        ck_assert_msg(r.exit_code == 0, "%s %s", r.out, r.err);
        tf_run_done(&r);
        ck_assert(tf_exists(tf_path(repo, "added.txt")));
        st = tf_status_full(w, id);
        ck_assert_msg(json_get_bool(st, "checkOverride", false), "%s", json_to_line(st, NULL));
        json_object_put(st);
        free(before), free(after), free(id), free(repo);
}

/* G4: a running gate blocks accept; reject stops it and keeps the record's
 * gate fields; accept --force stops it and lands. */
TF_WORLD_TEST(gate_running) {
        char *repo = gated_repo(w, "check = \"sleep 300\"\n");
        char *id = tf_shell_pending(w, repo, NULL, "echo x > added.txt", NULL);
        json_object_put(wait_check(w, id, "running"));
        const char *argv[] = {"accept", id, NULL};
        tf_run r = cli(w, argv);
        ck_assert_int_eq(r.exit_code, 1);
        _cleanup_free_ char *text = said(&r);
        ck_assert_msg(strstr(text, "check gate still running"), "%s", text);
        tf_run_done(&r);
        const char *jargv[] = {"reject", id, NULL};
        r = cli(w, jargv);
        ck_assert_msg(r.exit_code == 0, "%s %s", r.out, r.err);
        tf_run_done(&r);
        json_object *st = tf_status_full(w, id);
        ck_assert_str_eq(strempty(tf_jstr(st, "changesetStatus")), "rejected");
        ck_assert_str_eq(strempty(tf_jstr(st, "checkStatus")), "running");
        ck_assert(!json_get_bool(st, "checkOverride", false));
        json_object_put(st);
        ck_assert(!tf_exists(tf_path(repo, "added.txt")));

        char *id2 = tf_shell_pending(w, repo, NULL, "echo y > added.txt", NULL);
        json_object_put(wait_check(w, id2, "running"));
        const char *fargv[] = {"accept", id2, "--force", NULL};
        r = cli(w, fargv);
        ck_assert_msg(r.exit_code == 0, "%s %s", r.out, r.err);
        tf_run_done(&r);
        st = tf_status_full(w, id2);
        ck_assert_msg(json_get_bool(st, "checkOverride", false), "%s", json_to_line(st, NULL));
        json_object_put(st);
        _cleanup_free_ char *added = tf_read(tf_path(repo, "added.txt"), NULL);
        ck_assert_str_eq(added, "y\n");
        free(id), free(id2), free(repo);
}

/* A check out of time: SIGTERM, then timeout. */
TF_WORLD_TEST(gate_timeout) {
        char *repo = gated_repo(w, "check = \"sleep 120\"\ncheck_timeout_seconds = 2\n");
        char *id = tf_shell_pending(w, repo, NULL, "echo x > added.txt", NULL);
        json_object *st = wait_check(w, id, "timeout");
        json_object_put(st);
        const char *argv[] = {"accept", id, NULL};
        tf_run r = cli(w, argv);
        ck_assert_int_eq(r.exit_code, 1);
        _cleanup_free_ char *text = said(&r);
        ck_assert_msg(strstr(text, "timed out"), "%s", text);
        tf_run_done(&r);
        free(id), free(repo);
}

/* A daemon killed during the gate: the next daemon records it interrupted
 * and runs it again (here, with the file changed meanwhile, to a pass). */
static bool first_gate_gone(tf_world *w, void *arg) {
        (void) arg;
        _cleanup_free_ char *left = tf_shf(w, NULL, "pgrep -f 'slee[p] 301' | wc -l");
        return streq_ptr(left, "0");
}

TF_WORLD_TEST(gate_interrupted_reruns) {
        char *repo = gated_repo(w, "check = \"sleep 301\"\n");
        char *id = tf_shell_pending(w, repo, NULL, "echo x > added.txt", NULL);
        json_object_put(wait_check(w, id, "running"));
        tf_daemon_stop(w, SIGKILL);
        const char *again = "check = \"test -f added.txt\"\n";
        tf_write(tf_path(repo, ".taskferry.toml"), again, strlen(again), 0644);
        tf_daemon_start(w);
        json_object *st = wait_check(w, id, "passed");
        json_object_put(st);
        /* no sleep of the first gate is left (killed with its sandbox: a
         * pid, user and network namespace to tear down, which takes a moment
         * on a loaded machine) */
        ck_assert_msg(tf_wait_until(first_gate_gone, w, NULL, 15000), "the first gate's check lives on");
        free(id), free(repo);
}

/* The check's environment has no TASKFERRY_* variable, whatever the
 * daemon's has. */
TF_WORLD_TEST_ENV(gate_env_has_no_taskferry_vars, "TASKFERRY_GATE_SECRET=leak-me") {
        char *repo = gated_repo(w, "check = \"env | grep TASKFERRY_ ; env | grep -c . ; exit 1\"\n");
        char *id = tf_shell_pending(w, repo, NULL, "echo x > added.txt", NULL);
        json_object *st = wait_check(w, id, "failed");
        json_object_put(st);
        const char *rargv[] = {"result", id, "--fields", "checkOutputTail", "--json", NULL};
        json_object *res = tf_cli_json(w, rargv, 0);
        const char *tail = strempty(tf_jstr(res, "checkOutputTail"));
        ck_assert_msg(*tail && !strstr(tail, "TASKFERRY_"), "%s", tail);
        json_object_put(res);
        free(id), free(repo);
}

/* The check runs in the sandbox: it writes nothing outside the overlay,
 * reads no secret, leaves no process, and what it writes inside stays out
 * of the changeset. */
TF_WORLD_TEST(gate_is_sandboxed) {
        char *ssh = strdup_printf("%s/.ssh", w->home);
        ck_assert_int_eq(mkdir(ssh, 0700), 0);
        tf_write(tf_path(ssh, "id_ed25519"), "SECRET-KEY\n", 11, 0600);
        char *outside = strdup_printf("%s/outside-escape", w->root);
        _cleanup_free_ char *toml = strdup_printf(
                "check = \"echo junk > built.txt; echo x > %s; echo x > $HOME/escape; cat $HOME/.ssh/id_ed25519; "
                "(setsid sh -c 'sleep 271' </dev/null >/dev/null 2>&1 &); echo done\"\n",
                outside);
        char *repo = gated_repo(w, toml);
        char *id = tf_shell_pending(w, repo, NULL, "echo x > added.txt", NULL);
        json_object *st = wait_check(w, id, "passed");
        json_object_put(st);
        const char *rargv[] = {"result", id, "--fields", "checkOutputTail", "--json", NULL};
        json_object *res = tf_cli_json(w, rargv, 0);
        const char *tail = strempty(tf_jstr(res, "checkOutputTail"));
        ck_assert_msg(strstr(tail, "done") && !strstr(tail, "SECRET-KEY"), "%s", tail);
        json_object_put(res);
        ck_assert(!tf_exists(outside));
        ck_assert(!tf_exists(tf_path(w->home, "escape")));
        _cleanup_free_ char *left = tf_shf(w, NULL, "sleep 1; pgrep -f 'slee[p] 271' | wc -l");
        ck_assert_str_eq(left, "0");
        _cleanup_free_ char *diff = tf_task_diff(w, id);
        ck_assert_msg(strstr(diff, "added.txt") && !strstr(diff, "built.txt"), "%s", diff);
        tf_accept_ok(w, id);
        ck_assert(!tf_exists(tf_path(repo, "built.txt")));
        free(id), free(repo), free(ssh), free(outside);
}

/* The worker is told the command that will judge it. */
TF_WORLD_TEST(prompt_names_the_check) {
        char *repo = gated_repo(w, "check = \"make check\"\n");
        const char *extra[] = {"--model", "x/y", NULL};
        char *id = tf_dispatch_worker(w, "opencode", "x/y", repo, NULL, "do the thing");
        (void) extra;
        json_object *rec = tf_task_record(w, id);
        const char *prompt = strempty(tf_jstr(rec, "prompt"));
        ck_assert_msg(strstr(prompt, "## Verification (required)") && strstr(prompt, "    make check"), "%s", prompt);
        json_object_put(rec);
        const char *cargv[] = {"cancel", id, NULL};
        tf_run r = cli(w, cargv);
        tf_run_done(&r);
        char *plain = tf_repo_new(w, "plain", NULL);
        char *id2 = tf_dispatch_worker(w, "opencode", "x/y", plain, NULL, "do the thing");
        rec = tf_task_record(w, id2);
        ck_assert_msg(!strstr(strempty(tf_jstr(rec, "prompt")), "Verification"), "%s", tf_jstr(rec, "prompt"));
        json_object_put(rec);
        const char *c2[] = {"cancel", id2, NULL};
        r = cli(w, c2);
        tf_run_done(&r);
        free(id), free(id2), free(repo), free(plain);
}

/* The four kinds of malformed project file: each gives a warning naming the
 * file, the line and the key (never the value), no gate, and the task runs. */
TF_WORLD_TEST(malformed_project_files_warn) {
        static const struct {
                const char *toml, *line, *key;
        } cases[] = {
                {"check = \"true\"\ncheck = [unclosed\n", ":2:", NULL},
                {"check = \"true\"\nchek = \"sekrit-value\"\n", ":2:", "chek"},
                {"check = \"true\"\n\ncheck_timeout_seconds = -5\n", ":3:", "check_timeout_seconds"},
                {"check = 42\n", ":1:", "check"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *dir = strdup_printf("bad%zu", i);
                char *repo = tf_repo_new(w, dir, "printf 'base\\n' > tracked.txt");
                tf_write(tf_path(repo, ".taskferry.toml"), cases[i].toml, strlen(cases[i].toml), 0644);
                json_object *st = NULL;
                char *id = tf_shell_settled(w, repo, NULL, "echo ran > added.txt; echo ran", &st);
                ck_assert_msg(streq_ptr(tf_jstr(st, "status"), "done"), "%s", json_to_line(st, NULL));
                json_object_put(st);
                st = tf_status_full(w, id);
                const char *warn = strempty(tf_jstr(st, "projectConfigWarning"));
                _cleanup_free_ char *file = strdup_printf("%s/.taskferry.toml%s", repo, cases[i].line);
                ck_assert_msg(strstr(warn, file), "case %zu: %s", i, warn);
                ck_assert_msg(!cases[i].key || strstr(warn, cases[i].key), "case %zu: %s", i, warn);
                /* Only the text after the path: the scratch dir's random name may hold "-5". */
                const char *what = strstr(warn, file) + strlen(file);
                ck_assert_msg(!strstr(what, "sekrit-value") && !strstr(what, "-5"), "case %zu echoes a value: %s", i, warn);
                ck_assert_msg(!json_get_string(st, "checkStatus"), "case %zu: %s", i, json_to_line(st, NULL));
                json_object_put(st);
                free(id), free(repo);
        }
}

static void write_user_config(tf_world *w, const char *text) {
        _cleanup_free_ char *dir = strdup_printf("%s/taskferry", w->cfg), *path = strdup_printf("%s/config.json", dir);
        (void) mkdir(dir, 0700);
        tf_write(path, text, strlen(text), 0600);
}

/* A cloned repository cannot widen its own sandbox: its roBind inside the
 * repository is mounted read-only; outside it, only with the user's trust;
 * the deny-list stays on top; $HOME and / never. */
TF_WORLD_TEST(project_ro_binds_policy) {
        char *ref = strdup_printf("%s/reference", w->root);
        ck_assert_int_eq(mkdir(ref, 0755), 0);
        tf_write(tf_path(ref, "doc.txt"), "ref-doc\n", 8, 0644);
        char *ssh = strdup_printf("%s/.ssh", w->home);
        ck_assert_int_eq(mkdir(ssh, 0700), 0);
        tf_write(tf_path(ssh, "id_ed25519"), "SECRET-KEY\n", 11, 0600);
        _cleanup_free_ char *toml = strdup_printf("roBind = [\"vendor\", \"%s\", \"%s\", \"%s\", \"/\"]\n", ref, ssh, w->home);
        char *repo = tf_repo_new(w, NULL, "mkdir vendor && printf 'v\\n' > vendor/lib.txt");
        tf_write(tf_path(repo, ".taskferry.toml"), toml, strlen(toml), 0644);
        free(tf_shf(w, repo, "git add -A && git commit -qm toml"));
        const char *script_fmt = "cat %s/doc.txt 2>&1 | head -1; echo w > vendor/lib.txt 2>/dev/null && echo vendor-writable "
                                 "|| echo vendor-ro; cat %s/id_ed25519 2>&1 | head -1; true";
        _cleanup_free_ char *script = strdup_printf(script_fmt, ref, ssh);
        json_object *st = NULL;
        char *out = tf_shell_output(w, repo, NULL, script, &st);
        ck_assert_msg(!strstr(out, "ref-doc"), "an untrusted repo bound %s: %s", ref, out);
        ck_assert_msg(strstr(out, "vendor-ro"), "vendor/ was writable: %s", out);
        ck_assert_msg(!strstr(out, "SECRET-KEY"), "%s", out);
        json_object_put(st);

        /* the user trusts the repository: the outside bind is mounted, the rest still refused */
        _cleanup_free_ char *cfg = strdup_printf("{\"trustedProjects\": [\"%s\"]}", repo);
        write_user_config(w, cfg);
        tf_daemon_stop(w, SIGTERM);
        json_object *st2 = NULL;
        char *out2 = tf_shell_output(w, repo, NULL, script, &st2);
        ck_assert_msg(strstr(out2, "ref-doc"), "a trusted repo's bind is not there: %s", out2);
        ck_assert_msg(strstr(out2, "vendor-ro") && !strstr(out2, "SECRET-KEY"), "%s", out2);
        json_object_put(st2);
        free(out), free(out2), free(repo), free(ref), free(ssh);
}

/* The warning of the first run names what was refused and why. */
TF_WORLD_TEST(project_ro_binds_warning) {
        char *ref = strdup_printf("%s/reference", w->root);
        ck_assert_int_eq(mkdir(ref, 0755), 0);
        _cleanup_free_ char *toml = strdup_printf("roBind = [\"%s\", \"%s\", \"/\"]\n", ref, w->home);
        char *repo = gated_repo(w, toml);
        json_object *st = NULL;
        char *id = tf_shell_settled(w, repo, NULL, "true", &st);
        json_object_put(st);
        st = tf_status_full(w, id);
        const char *warn = strempty(tf_jstr(st, "projectConfigWarning"));
        ck_assert_msg(strstr(warn, "overlaps a protected sandbox mount") && strstr(warn, "not trusted") && strstr(warn, ref),
                      "%s", warn);
        json_object_put(st);
        free(id), free(repo), free(ref);
}

/* Fix forward: the gate fails; a task dispatched with --parent-task starts
 * from the parent's changes, fixes them, passes; its accept lands both
 * changes once and the parent ends rejected. */
TF_WORLD_TEST(fix_forward_after_failed_gate) {
        char *repo = gated_repo(w, "check = \"grep -q fixed feature.txt\"\n");
        char *parent = tf_shell_pending(w, repo, NULL, "printf 'feature\\n' > feature.txt; echo p > part.txt", NULL);
        json_object_put(wait_check(w, parent, "failed"));
        const char *extra[] = {"--parent-task", parent, NULL};
        char *child = tf_shell_pending(w, repo, extra, "test -f part.txt && printf 'fixed\\n' >> feature.txt", NULL);
        json_object_put(wait_check(w, child, "passed"));
        tf_accept_ok(w, child);
        _cleanup_free_ char *feature = tf_read(tf_path(repo, "feature.txt"), NULL), *part = tf_read(tf_path(repo, "part.txt"), NULL);
        ck_assert_str_eq(feature, "feature\nfixed\n");
        ck_assert_str_eq(part, "p\n");
        _cleanup_free_ char *cs = tf_changeset_status(w, parent);
        ck_assert_str_eq(cs, "rejected");
        free(parent), free(child), free(repo);
}

int main(void) {
        Suite *s = suite_create("check-gate");
        tf_add_tests(s, "verdicts", 300, TF_TESTS(gate_passes, gate_events, no_file_or_no_changes_no_gate, gate_fails_blocks_accept));
        tf_add_tests(s, "running", 300, TF_TESTS(gate_running, gate_timeout, gate_interrupted_reruns));
        tf_add_tests(s, "sandbox", 300, TF_TESTS(gate_env_has_no_taskferry_vars, gate_is_sandboxed, prompt_names_the_check));
        tf_add_tests(s, "project", 300,
                     TF_TESTS(malformed_project_files_warn, project_ro_binds_policy, project_ro_binds_warning,
                              fix_forward_after_failed_gate));
        return tf_run_suite(s);
}
