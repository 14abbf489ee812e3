/* Attacks on the check gate, the project file, the risk classification of
 * what lands and fix-forward seeding, through the CLI and an isolated daemon
 * with real bwrap, overlayfs and git. The worker is hostile, and so is the
 * repository it edits and the check (the worker's code too: it runs from
 * the worker's overlay). Each case tries to get out and passes when the
 * defence holds. */

#include <check.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"

/* A repository whose committed .taskferry.toml holds toml, at dir (NULL: "repo"). */
static char *gated_repo_at(tf_world *w, const char *dir, const char *toml) {
        char *repo = tf_repo_new(w, dir, "printf 'base\\n' > tracked.txt");
        tf_write(tf_path(repo, ".taskferry.toml"), toml, strlen(toml), 0644);
        free(tf_shf(w, repo, "git add .taskferry.toml && git commit -qm gate"));
        return repo;
}

static char *gated_repo(tf_world *w, const char *toml) { return gated_repo_at(w, NULL, toml); }

/* Wait until the task's checkStatus is want (at most 90 s); its status --full. */
static json_object *wait_check(tf_world *w, const char *id, const char *want) {
        return tf_wait_check(w, id, (const char *const[]) {want, NULL}, 90000);
}

/* Wait until the gate ended (any verdict but running). */
static json_object *wait_verdict(tf_world *w, const char *id) {
        return tf_wait_check(w, id, (const char *const[]) {"passed", "failed", "timeout", NULL}, 90000);
}

/* The task's checkOutputTail (malloc'd, "" when none). */
static char *check_tail(tf_world *w, const char *id) {
        const char *argv[] = {"result", id, "--fields", "checkOutputTail", "--json", NULL};
        json_object *res = tf_cli_json(w, argv, 0);
        char *tail = strdup(strempty(tf_jstr(res, "checkOutputTail")));
        json_object_put(res);
        return tail;
}

static bool proc_cmdline_is(pid_t pid, void *arg) {
        _cleanup_free_ char *c = tf_proc_read(pid, "cmdline", ' ', NULL);
        if (!c) return false;
        size_t n = strlen(c);
        while (n > 0 && c[n - 1] == ' ') c[--n] = 0;
        return streq(c, (const char *) arg);
}

/* How many processes run the command line needle (its words joined by spaces). */
static size_t count_procs(const char *needle) { return tf_procs(proc_cmdline_is, (void *) needle, NULL, 0); }

static char *upper_of(tf_world *w, const char *id, bool gitdir) {
        json_object *rec = tf_task_record(w, id);
        ck_assert_ptr_nonnull(rec);
        json_object *od = json_get_object(rec, "overlayDirs");
        ck_assert_msg(od, "no overlayDirs: %s", json_to_line(rec, NULL));
        const char *u = NULL;
        if (!gitdir) u = json_get_string(od, "upperDir");
        else {
                json_object *rwb = json_get_array(od, "rwBinds");
                ck_assert_msg(rwb && json_object_array_length(rwb) == 1, "%s", json_to_line(od, NULL));
                u = json_get_string(json_object_array_get_idx(rwb, 0), "upperDir");
        }
        ck_assert_ptr_nonnull(u);
        char *ret = strdup(u);
        json_object_put(rec);
        return ret;
}

/* ---- the check ---- */

/* The check writes into git's common dir (a target below the top of its
 * repository: the worker's git dir is an overlay of its own), next to the
 * target and into the worker's tree: none of it reaches the worker's upper
 * dirs, the real repository, or what a fix-forward task starts from. */
TF_WORLD_TEST(check_writes_no_worker_layer) {
        char *repo = tf_repo_new(w, NULL, "mkdir sub && printf 'base\\n' > sub/tracked.txt");
        const char *toml = "check = \"g=$(git rev-parse --git-common-dir); echo c > $g/check-was-here; "
                           "mkdir -p $g/hooks; echo c > $g/hooks/pre-commit; echo c > ../check-up; "
                           "echo c > sub-built.txt; echo ok\"\n";
        tf_write(tf_path(repo, ".taskferry.toml"), toml, strlen(toml), 0644);
        free(tf_shf(w, repo, "git add .taskferry.toml && git commit -qm gate"));
        char *sub = strdup_printf("%s/sub", repo);
        char *before = tf_tree_snapshot(repo, false);
        char *id = tf_shell_pending(w, sub, NULL, "echo x > added.txt; git add added.txt", NULL);
        json_object *st = wait_verdict(w, id);
        _cleanup_free_ char *tail = check_tail(w, id);
        json_object_put(st);
        char *gu = upper_of(w, id, true), *mu = upper_of(w, id, false);
        _cleanup_free_ char *in_git = tf_shf(w, NULL, "find '%s' -name check-was-here -o -name pre-commit | head -3", gu);
        _cleanup_free_ char *in_main = tf_shf(w, NULL, "find '%s' -name sub-built.txt | head -3", mu);
        ck_assert_msg(!*in_git, "the check wrote into the worker's git dir upper: %s (check said %s)", in_git, tail);
        ck_assert_msg(!*in_main, "the check wrote into the worker's upper: %s", in_main);
        char *after = tf_tree_snapshot(repo, false);
        ck_assert_str_eq(after, before);
        /* a fix-forward child starts from the worker's layers only */
        const char *extra[] = {"--parent-task", id, NULL};
        json_object *cst = NULL;
        _cleanup_free_ char *out = tf_shell_output(
                w, sub, extra,
                "g=$(git rev-parse --git-common-dir); ls $g/check-was-here $g/hooks/pre-commit sub-built.txt 2>/dev/null; "
                "test -f added.txt && echo seeded",
                &cst);
        json_object_put(cst);
        ck_assert_msg(strstr(out, "seeded") && !strstr(out, "check-was-here") && !strstr(out, "pre-commit") &&
                              !strstr(out, "sub-built"),
                      "%s", out);
        free(gu), free(mu), free(before), free(after), free(id), free(sub), free(repo);
}

/* The check reads no secret: ~/.ssh, the env file, and reaches neither the
 * daemon's socket nor its state, nor another task's overlay. */
TF_WORLD_TEST(check_reads_no_secret) {
        char *ssh = strdup_printf("%s/.ssh", w->home);
        ck_assert_int_eq(mkdir(ssh, 0700), 0);
        tf_write(tf_path(ssh, "id_ed25519"), "SECRET-KEY\n", 11, 0600);
        _cleanup_free_ char *envf = tf_env_file(w, "GATE_ENV_SECRET=ENV-FILE-SECRET\n");
        /* another task's pending changes */
        char *other = tf_repo_new(w, "other", NULL);
        char *oid = tf_shell_pending(w, other, NULL, "echo OTHER-TASK-SECRET > secret.txt", NULL);
        char *ou = upper_of(w, oid, false);
        _cleanup_free_ char *toml = strdup_printf(
                "check = \"cat %s/id_ed25519 %s %s/secret.txt %s/tasks.json 2>&1 | head -5; env | grep GATE_ENV; "
                "test -S %s && echo SOCKET-VISIBLE; ls %s 2>&1 | head -3; "
                "for s in $(ls -d %s/*/socket 2>/dev/null); do echo RUNTIME $s; done; echo probe-done\"\n",
                ssh, envf, ou, w->state, w->socket, w->state, w->run);
        char *repo = gated_repo(w, toml);
        char *id = tf_shell_pending(w, repo, NULL, "echo x > added.txt", NULL);
        json_object_put(wait_verdict(w, id));
        _cleanup_free_ char *tail = check_tail(w, id);
        ck_assert_msg(strstr(tail, "probe-done"), "%s", tail);
        ck_assert_msg(!strstr(tail, "SECRET-KEY"), "~/.ssh read: %s", tail);
        ck_assert_msg(!strstr(tail, "ENV-FILE-SECRET"), "the env file read: %s", tail);
        ck_assert_msg(!strstr(tail, "OTHER-TASK-SECRET"), "another task's overlay read: %s", tail);
        ck_assert_msg(!strstr(tail, "SOCKET-VISIBLE") && !strstr(tail, "RUNTIME"), "the daemon socket: %s", tail);
        ck_assert_msg(!strstr(tail, "\"status\"") && !strstr(tail, "diffs"), "the state dir: %s", tail);
        free(ou), free(oid), free(other), free(id), free(repo), free(ssh);
}

/* Processes the check leaves behind (setsid, double fork, nohup, one that
 * ignores SIGTERM) are gone once the gate ends, passed or timed out. */
TF_WORLD_TEST(check_leaves_no_process) {
        char *repo = gated_repo(w, "check = \"(setsid sh -c 'sleep 2731' </dev/null >/dev/null 2>&1 &); "
                                   "( ( sleep 2732 </dev/null >/dev/null 2>&1 & ) & ); "
                                   "nohup sleep 2733 </dev/null >/dev/null 2>&1 & "
                                   "sh -c 'trap \\\"\\\" TERM HUP; exec sleep 2734' </dev/null >/dev/null 2>&1 & "
                                   "echo spawned\"\n");
        char *id = tf_shell_pending(w, repo, NULL, "echo x > added.txt", NULL);
        json_object_put(wait_verdict(w, id));
        _cleanup_free_ char *tail = check_tail(w, id);
        ck_assert_msg(strstr(tail, "spawned"), "%s", tail);
        usleep(500 * 1000);
        const char *marks[] = {"sleep 2731", "sleep 2732", "sleep 2733", "sleep 2734"};
        for (size_t i = 0; i < ELEMENTSOF(marks); i++)
                ck_assert_msg(count_procs(marks[i]) == 0, "%s outlived the gate", marks[i]);

        /* a check that ignores SIGTERM and times out: killed, nothing left */
        char *repo2 = gated_repo_at(w, "r2", "check = \"trap '' TERM; sleep 2735 & wait; sleep 2736\"\n"
                                             "check_timeout_seconds = 1\n");
        char *id2 = tf_shell_pending(w, repo2, NULL, "echo x > added.txt", NULL);
        json_object_put(wait_check(w, id2, "timeout"));
        usleep(500 * 1000);
        ck_assert_msg(count_procs("sleep 2735") == 0 && count_procs("sleep 2736") == 0, "a timed-out check lives on");
        free(id), free(repo), free(id2), free(repo2);
}

/* A check that floods its output: the log stays near its cap while it
 * runs, the recorded tail is at most 256 KiB and 40 lines. */
TF_WORLD_TEST(check_output_flood_is_capped) {
        char *repo = gated_repo(w, "check = \"yes 0123456789abcdef0123456789abcdef | head -c 24000000; "
                                   "head -c 3000000 /dev/zero | tr '\\\\0' x; touch flood-done; sleep 4; exit 1\"\n");
        char *id = tf_shell_pending(w, repo, NULL, "echo x > added.txt", NULL);
        json_object_put(wait_check(w, id, "running"));
        _cleanup_free_ char *log = strdup_printf("%s/tasks/%s/check/output.log", w->state, id);
        off_t max_seen = 0;
        for (int i = 0; i < 80; i++) {
                struct stat st;
                if (stat(log, &st) == 0 && st.st_size > max_seen) max_seen = st.st_size;
                json_object *s = tf_status_full(w, id);
                bool running = streq_ptr(tf_jstr(s, "checkStatus"), "running");
                json_object_put(s);
                if (!running) break;
                usleep(100 * 1000);
        }
        json_object_put(wait_check(w, id, "failed"));
        ck_assert_msg(max_seen <= 2 * 256 * 1024 + 128 * 1024, "the check's log grew to %lld bytes", (long long) max_seen);
        _cleanup_free_ char *tail = check_tail(w, id);
        ck_assert_msg(strlen(tail) <= 256 * 1024, "a tail of %zu bytes", strlen(tail));
        ck_assert_msg(tf_count(tail, "\n") < 40, "%zu lines", tf_count(tail, "\n"));
        /* nor the state: tasks.json and its journal */
        _cleanup_free_ char *tasks = strdup_printf("%s/tasks.json", w->state);
        _cleanup_free_ char *journal = strdup_printf("%s/tasks.journal", w->state);
        struct stat st, jst = {0};
        ck_assert_int_eq(stat(tasks, &st), 0);
        (void) stat(journal, &jst);
        ck_assert_msg(st.st_size + jst.st_size < 1024 * 1024, "tasks.json is %lld bytes, tasks.journal %lld",
                      (long long) st.st_size, (long long) jst.st_size);
        free(id), free(repo);
}

/* Output bytes that could break the daemon or a terminal: NUL, invalid
 * UTF-8, ESC and C1 sequences. The daemon lives, the record is JSON, and
 * `status` and `accept` on a terminal print none of them raw. */
TF_WORLD_TEST(check_output_bytes_are_tamed) {
        char *repo = gated_repo(w, "check = \"printf 'a\\\\000b\\\\377\\\\376c\\\\033]0;pwned\\\\007\\\\033[2J"
                                   "\\\\302\\\\23331m\\\\r\\\\033[1Ad\\\\n'; printf 'tail\\\\033[5m'; exit 1\"\n");
        char *id = tf_shell_pending(w, repo, NULL, "echo x > added.txt", NULL);
        json_object_put(wait_check(w, id, "failed"));
        ck_assert(tf_daemon_pid(w) > 0);
        _cleanup_free_ char *tail = check_tail(w, id);
        ck_assert_msg(strstr(tail, "tail"), "%s", tail);
        static const char *const verbs[] = {"status", "accept"};
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++) {
                _cleanup_free_ char *out = strdup_printf("%s/tty-%s.out", w->root, verbs[i]);
                _cleanup_free_ char *cmd = strdup_printf("env -u PAGER PAGER=cat script -qec \"'%s' %s %s\" /dev/null > '%s'",
                                                         tf_bin("taskferry"), verbs[i], id, out);
                tf_run r = tf_sh(w, repo, cmd, true);
                tf_run_done(&r);
                size_t len = 0;
                _cleanup_free_ char *got = tf_read(out, &len);
                ck_assert_msg(strstr(got, id), "%s: %s", verbs[i], got);
                ck_assert_msg(!memmem(got, len, "\033]0;pwned", 9), "%s: a raw OSC: %s", verbs[i], got);
                ck_assert_msg(!memmem(got, len, "\033[2J", 4) && !memmem(got, len, "\033[5m", 4) &&
                                      !memmem(got, len, "\302\233", 2) && !memchr(got, '\007', len),
                              "%s: a raw control sequence: %s", verbs[i], got);
        }
        ck_assert(!tf_exists(tf_path(repo, "added.txt")));
        ck_assert(tf_daemon_pid(w) > 0);
        free(id), free(repo);
}

static bool one_check_left(tf_world *w, void *arg) {
        (void) w, (void) arg;
        return count_procs("sleep 2741") == 1;
}

/* A daemon killed twice during the gate: one check runs at the end, none
 * of the earlier ones. */
TF_WORLD_TEST(check_restarts_never_duplicate) {
        char *repo = gated_repo(w, "check = \"sleep 2741\"\n");
        char *id = tf_shell_pending(w, repo, NULL, "echo x > added.txt", NULL);
        for (int round = 0; round < 2; round++) {
                json_object_put(wait_check(w, id, "running"));
                tf_daemon_stop(w, SIGKILL);
                tf_daemon_start(w);
        }
        json_object_put(wait_check(w, id, "running"));
        /* the killed gates' checks die with their sandboxes (a pid and a
         * network namespace to tear down each): one check is left, and it
         * stays the only one */
        ck_assert_msg(tf_wait_until(one_check_left, w, NULL, 15000), "%zu checks run", count_procs("sleep 2741"));
        usleep(500 * 1000);
        ck_assert_uint_eq(count_procs("sleep 2741"), 1);
        const char *argv[] = {"reject", id, NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        ck_assert_msg(r.exit_code == 0, "%s %s", r.out, r.err);
        tf_run_done(&r);
        usleep(500 * 1000);
        ck_assert_uint_eq(count_procs("sleep 2741"), 0);
        free(id), free(repo);
}

/* A check that fills its scratch upper past the task's disk budget fails,
 * and its files do not stay. */
TF_WORLD_TEST(check_disk_budget) {
        char *repo = gated_repo(w, "check = \"head -c 200000000 /dev/zero > big.bin; echo wrote-all\"\n");
        const char *extra[] = {"--disk-max", "16M", NULL};
        char *id = tf_shell_pending(w, repo, extra, "echo x > added.txt", NULL);
        json_object *st = wait_verdict(w, id);
        const char *cs = tf_jstr(st, "checkStatus");
        _cleanup_free_ char *tail = check_tail(w, id);
        /* stopped while it writes, or (when it outran the walks) judged by the
         * shim's last one: failed either way, and the tail says why */
        ck_assert_msg(streq_ptr(cs, "failed") && strstr(tail, "disk budget"), "a check past the budget: %s, %s", cs, tail);
        json_object_put(st);
        char *mu = upper_of(w, id, false);
        _cleanup_free_ char *root = strdup(mu);
        *strrchr(root, '/') = 0; /* <root>/upper */
        _cleanup_free_ char *big = tf_shf(w, NULL, "find '%s' -name big.bin | head -1", root);
        ck_assert_msg(!*big, "the check's scratch files stay: %s", big);
        free(mu), free(id), free(repo);
}

/* ---- the project file ---- */

static void write_user_config(tf_world *w, const char *text) {
        _cleanup_free_ char *dir = strdup_printf("%s/taskferry", w->cfg), *path = strdup_printf("%s/config.json", dir);
        (void) mkdir(dir, 0700);
        tf_write(path, text, strlen(text), 0600);
}

/* The worker's own .taskferry.toml (in its changeset) is never what the
 * daemon reads: the gate runs the real one's check without the worker's
 * roBind, and the change is a taskferry-config risk accept refuses. */
TF_WORLD_TEST(overlay_project_file_is_not_read) {
        char *ref = strdup_printf("%s/reference", w->root);
        ck_assert_int_eq(mkdir(ref, 0755), 0);
        tf_write(tf_path(ref, "doc.txt"), "REF-DOC\n", 8, 0644);
        _cleanup_free_ char *real = strdup_printf("check = \"echo REAL-CHECK; cat %s/doc.txt 2>&1 | head -1; exit 1\"\n", ref);
        char *repo = gated_repo(w, real);
        _cleanup_free_ char *script = strdup_printf(
                "printf 'check = \"echo OVERLAY-CHECK\"\\nroBind = [\"%s\"]\\n' > .taskferry.toml; echo x > added.txt", ref);
        char *id = tf_shell_pending(w, repo, NULL, script, NULL);
        json_object *st = wait_check(w, id, "failed");
        const char *cmd = strempty(tf_jstr(st, "checkCommand"));
        ck_assert_msg(strstr(cmd, "REAL-CHECK"), "%s", cmd);
        json_object *risks = json_get_array(st, "changesetRisks");
        _cleanup_free_ char *rl = risks ? strdup(json_to_line(risks, NULL)) : strdup("");
        ck_assert_msg(strstr(rl, "taskferry-config") && strstr(rl, ".taskferry.toml"), "risks: %s", rl);
        json_object_put(st);
        _cleanup_free_ char *tail = check_tail(w, id);
        ck_assert_msg(strstr(tail, "REAL-CHECK") && !strstr(tail, "OVERLAY-CHECK") && !strstr(tail, "REF-DOC"), "%s", tail);
        /* --force passes the gate, not the risk */
        const char *argv[] = {"accept", id, "--force", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        ck_assert_int_ne(r.exit_code, 0);
        tf_run_done(&r);
        _cleanup_free_ char *landed = tf_read(tf_path(repo, ".taskferry.toml"), NULL);
        ck_assert_str_eq(landed, real);
        free(id), free(repo), free(ref);
}

/* roBind tricks: a symlink in the repository to ~/.ssh, to the parent dir,
 * `..` out of the repository, the daemon's own dirs, the repository itself
 * and its parent, the env file: none is mounted, for an untrusted
 * repository and (the protected ones) for a trusted one. */
TF_WORLD_TEST(ro_bind_tricks) {
        char *ssh = strdup_printf("%s/.ssh", w->home);
        ck_assert_int_eq(mkdir(ssh, 0700), 0);
        tf_write(tf_path(ssh, "id_ed25519"), "SECRET-KEY\n", 11, 0600);
        char *ref = strdup_printf("%s/outside-ref", w->repo_parent);
        ck_assert_int_eq(mkdir(ref, 0755), 0);
        tf_write(tf_path(ref, "doc.txt"), "OUTSIDE-DOC\n", 12, 0644);
        _cleanup_free_ char *envf = tf_env_file(w, "GATE_ENV_SECRET=ENV-FILE-SECRET\n");
        _cleanup_free_ char *files = strdup_printf("mkdir vendor && echo v > vendor/v.txt && ln -s %s keys && ln -s .. up && "
                                                   "ln -s %s/id_ed25519 keyfile",
                                                   ssh, ssh);
        char *repo = tf_repo_new(w, NULL, files);
        _cleanup_free_ char *toml = strdup_printf(
                "roBind = [\"keys\", \"keyfile\", \"up/outside-ref\", \"vendor/../../outside-ref\", \"./up\", \"up\", \".\", "
                "\"vendor/..\", \"%s\", \"%s\", \"%s\", \"%s\", \"%s\", \"%s\"]\n",
                w->state, w->run, w->cache, envf, w->socket, ssh);
        tf_write(tf_path(repo, ".taskferry.toml"), toml, strlen(toml), 0644);
        free(tf_shf(w, repo, "git add -A && git commit -qm toml"));
        _cleanup_free_ char *script = strdup_printf(
                "cat %s/id_ed25519 %s/doc.txt %s %s/tasks.json 2>/dev/null | head -5; ls %s 2>/dev/null | head -3; "
                "echo w > ../outside-ref/new 2>/dev/null && echo PARENT-WRITABLE; echo probed",
                ssh, ref, envf, w->state, w->state);
        json_object *st = NULL;
        char *out = tf_shell_output(w, repo, NULL, script, &st);
        json_object_put(st);
        ck_assert_msg(strstr(out, "probed"), "%s", out);
        ck_assert_msg(!strstr(out, "SECRET-KEY") && !strstr(out, "OUTSIDE-DOC") && !strstr(out, "ENV-FILE-SECRET") &&
                              !strstr(out, "tasks") && !strstr(out, "PARENT-WRITABLE"),
                      "untrusted: %s", out);
        free(out);
        /* trusted: the outside ref is bound (read-only), the protected ones still not */
        _cleanup_free_ char *cfg = strdup_printf("{\"trustedProjects\": [\"%s\"]}", repo);
        write_user_config(w, cfg);
        tf_daemon_stop(w, SIGTERM);
        out = tf_shell_output(w, repo, NULL, script, &st);
        json_object_put(st);
        ck_assert_msg(strstr(out, "OUTSIDE-DOC"), "trusted, the outside bind is missing: %s", out);
        ck_assert_msg(!strstr(out, "SECRET-KEY") && !strstr(out, "ENV-FILE-SECRET") && !strstr(out, "tasks") &&
                              !strstr(out, "PARENT-WRITABLE"),
                      "trusted: %s", out);
        free(out), free(repo), free(ref), free(ssh);
}

/* Hostile project files: a FIFO (the daemon must not hang on it), a huge
 * file, a directory, a symlink out of the repository, a symlink to a FIFO
 * inside it, 20000 roBind entries. Each warns or is read, and the worker
 * runs. */
TF_WORLD_TEST(hostile_project_files) {
        static const struct {
                const char *make, *warn;
        } cases[] = {
                {"mkfifo .taskferry.toml", "FIFO"},
                {"head -c 3000000 /dev/zero | tr '\\0' '#' > .taskferry.toml", "larger than"},
                {"mkdir .taskferry.toml", "directory"},
                {"ln -s /etc/passwd .taskferry.toml", "outside the repository"},
                {"mkfifo fifo && ln -s fifo .taskferry.toml", "FIFO"},
                {"{ printf 'roBind = ['; for i in $(seq 1 20000); do printf '\"d%d\", ' $i; done; printf '\"vendor\"]\\n'; } "
                 "> .taskferry.toml",
                 "has more than 1024 entries"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *dir = strdup_printf("hostile%zu", i);
                char *repo = tf_repo_new(w, dir, "mkdir vendor && echo v > vendor/v.txt");
                free(tf_shf(w, repo, "%s", cases[i].make));
                json_object *st = NULL;
                char *id = tf_shell_settled(w, repo, NULL, "echo ran > added.txt; echo ran", &st);
                ck_assert_msg(streq_ptr(tf_jstr(st, "status"), "done"), "case %zu: %s", i, json_to_line(st, NULL));
                json_object_put(st);
                st = tf_status_full(w, id);
                const char *warn = strempty(tf_jstr(st, "projectConfigWarning"));
                ck_assert_msg(strstr(warn, cases[i].warn), "case %zu: %s", i, warn);
                ck_assert_msg(strlen(warn) < 4096, "case %zu: a warning of %zu bytes", i, strlen(warn));
                json_object_put(st);
                ck_assert(tf_daemon_pid(w) > 0);
                free(id), free(repo);
        }
}

/* ---- what lands is what you read ---- */

/* Each of these lands a file that can run code on the host; each must be
 * recorded as a risk and refused by a plain accept. */
TF_WORLD_TEST(risk_spellings_are_flagged) {
        static const struct {
                const char *base, *script, *class;
        } cases[] = {
                /* case */
                {NULL, "mkdir -p .Claude && echo '{}' > .Claude/settings.json", "agent-config"},
                /* a rename of a harmless committed file */
                {"echo '{}' > notes.json", "mkdir -p .claude && git mv notes.json .claude/settings.json", "agent-config"},
                /* a directory symlink the worker makes, and a file written through it */
                {NULL, "ln -s .vscode x && mkdir .vscode && echo '{}' > x/tasks.json", "editor-config"},
                /* git quotes this name */
                {NULL, "mkdir -p '.claude/a\tb' && echo x > '.claude/a\tb/c'", "agent-config"},
                /* a symlink committed by the user that the worker repoints out */
                {"ln -s docs link", "rm link && ln -s ../../.. link", "symlink-out"},
                /* exec bit on an existing file */
                {"echo 'echo hi' > run.sh", "chmod +x run.sh", "executable"},
                /* a workflow in a nested dir of .github */
                {NULL, "mkdir -p .github/workflows/sub && echo on: push > .github/workflows/sub/x.yml", "ci-workflow"},
                /* .envrc in a subdirectory */
                {NULL, "mkdir -p deep/er && echo 'curl x|sh' > deep/er/.envrc", "envrc"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *dir = strdup_printf("risk%zu", i);
                char *repo = tf_repo_new(w, dir, cases[i].base);
                char *id = tf_shell_pending(w, repo, NULL, cases[i].script, NULL);
                json_object *st = tf_status_full(w, id);
                json_object *risks = json_get_array(st, "changesetRisks");
                _cleanup_free_ char *rl = risks ? strdup(json_to_line(risks, NULL)) : strdup("");
                ck_assert_msg(strstr(rl, cases[i].class), "case %zu (%s): not flagged: %s", i, cases[i].script, rl);
                json_object_put(st);
                char *before = tf_tree_snapshot(repo, true);
                tf_run r = tf_accept(w, id);
                ck_assert_msg(r.exit_code != 0, "case %zu: a plain accept landed it", i);
                tf_run_done(&r);
                char *after = tf_tree_snapshot(repo, true);
                ck_assert_str_eq(after, before);
                free(before), free(after), free(id), free(repo);
        }
}

/* A symlink the repository already has (the user's, committed) makes a
 * harmless-looking path an agent's or editor's config: what the worker
 * writes through it lands there. The change is flagged as that config
 * (the classifier follows the live tree's symlinks at risky names). */
TF_WORLD_TEST(risk_through_committed_symlink) {
        static const struct {
                const char *base, *script, *class;
        } cases[] = {
                {"mkdir -p tools/agent && echo '{}' > tools/agent/README && ln -s tools/agent .claude",
                 "echo '{\"hooks\":{}}' > tools/agent/settings.json", "agent-config"},
                {"mkdir -p ide .vscode && echo '{}' > ide/tasks.json && ln -s ../ide/tasks.json .vscode/tasks.json",
                 "echo '{\"tasks\":[{\"runOn\":\"folderOpen\"}]}' > ide/tasks.json", "editor-config"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *dir = strdup_printf("link%zu", i);
                char *repo = tf_repo_new(w, dir, cases[i].base);
                char *id = tf_shell_pending(w, repo, NULL, cases[i].script, NULL);
                json_object *st = tf_status_full(w, id);
                json_object *risks = json_get_array(st, "changesetRisks");
                _cleanup_free_ char *rl = risks ? strdup(json_to_line(risks, NULL)) : strdup("");
                ck_assert_msg(strstr(rl, cases[i].class), "case %zu (%s): not flagged: %s", i, cases[i].script, rl);
                json_object_put(st);
                free(id), free(repo);
        }
}

/* Control bytes in file names and risk lines never reach a terminal raw:
 * diff, diff --stat, the refusal of accept, status. */
TF_WORLD_TEST(names_with_escapes_on_a_terminal) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *id = tf_shell_pending(w, repo, NULL,
                                    "mkdir -p .claude && n=$(printf '.claude/x\\033]0;pwn\\007\\033[2Jy'); echo x > \"$n\"; "
                                    "printf 'c\\033[5m\\n' > plain.txt",
                                    NULL);
        static const char *const cmds[] = {"diff %s", "diff --stat %s", "accept %s", "status %s"};
        for (size_t i = 0; i < ELEMENTSOF(cmds); i++) {
                _cleanup_free_ char *args = strdup_printf(cmds[i], id);
                _cleanup_free_ char *out = strdup_printf("%s/tty%zu.out", w->root, i);
                _cleanup_free_ char *cmd = strdup_printf(
                        "env -u PAGER -u GIT_PAGER PAGER=cat script -qec \"'%s' %s\" /dev/null > '%s'", tf_bin("taskferry"),
                        args, out);
                tf_run r = tf_sh(w, repo, cmd, true);
                tf_run_done(&r);
                size_t len = 0;
                _cleanup_free_ char *got = tf_read(out, &len);
                ck_assert_msg(len > 0, "%s: nothing", args);
                ck_assert_msg(!memmem(got, len, "\033]0;pwn", 7) && !memmem(got, len, "\033[2J", 4) &&
                                      !memmem(got, len, "\033[5m", 4) && !memchr(got, '\007', len),
                              "%s: a raw control sequence: %s", args, got);
        }
        ck_assert(!tf_exists(tf_path(repo, "plain.txt")));
        free(id), free(repo);
}

/* ---- fix forward ---- */

/* Seeding needs a pending parent in the same workspace: one in another
 * repository, one already rejected, one accepted, a parent that is the
 * child's own dispatcher's sibling (a worker naming a task it did not
 * dispatch): none seeds the child, whose changeset then holds only its
 * own change. */
TF_WORLD_TEST(seed_from_foreign_parents) {
        char *a = tf_repo_new(w, "a", NULL), *b = tf_repo_new(w, "b", NULL);
        char *pa = tf_shell_pending(w, a, NULL, "echo FROM-A > parent.txt", NULL);
        const char *extra[] = {"--parent-task", pa, NULL};
        json_object *st = NULL;
        _cleanup_free_ char *out = tf_shell_output(w, b, extra, "cat parent.txt 2>&1; echo c > child.txt", &st);
        ck_assert_msg(!strstr(out, "FROM-A"), "a child in another repository saw its parent's: %s", out);
        json_object_put(st);

        char *rej = tf_shell_pending(w, a, NULL, "echo REJECTED > parent2.txt", NULL);
        const char *rargv[] = {"reject", rej, NULL};
        tf_run r = tf_cli(w, NULL, NULL, rargv);
        ck_assert_int_eq(r.exit_code, 0);
        tf_run_done(&r);
        const char *extra2[] = {"--parent-task", rej, NULL};
        _cleanup_free_ char *out2 = tf_shell_output(w, a, extra2, "cat parent2.txt 2>&1; true", &st);
        ck_assert_msg(!strstr(out2, "REJECTED"), "a rejected parent seeded: %s", out2);
        json_object_put(st);

        /* a worker names the user's pending task pa as its nested task's parent */
        _cleanup_free_ char *script = strdup_printf(
                "c=$(taskferry dispatch --executor shell --parent-task %s --prompt 'cat parent.txt 2>&1; true' "
                "| sed -n 's/^id: //p'); taskferry wait $c >/dev/null 2>&1; echo child=$c",
                pa);
        _cleanup_free_ char *msg = tf_shell_done_output(w, a, NULL, script, NULL);
        _cleanup_free_ char *cid = tf_value_after(msg, "child=");
        ck_assert_msg(cid && *cid, "%s", msg);
        json_object_put(tf_wait_settled(w, cid));
        _cleanup_free_ char *cmsg = tf_task_message(w, cid);
        ck_assert_msg(!strstr(cmsg, "FROM-A"), "a worker's nested task read the user's pending task %s: %s", pa, cmsg);
        _cleanup_free_ char *pcs = tf_changeset_status(w, pa);
        ck_assert_str_eq(pcs, "pending");
        free(pa), free(rej), free(a), free(b);
}

/* A parent whose upper holds a symlink out of the repository and a file
 * written through a symlink: the child's accept writes nothing outside,
 * and the child's base is the real tree (the parent's changes arrive
 * through the seed, once). */
TF_WORLD_TEST(seed_symlink_out_lands_nothing_outside) {
        char *outside = strdup_printf("%s/outside", w->root);
        ck_assert_int_eq(mkdir(outside, 0755), 0);
        char *repo = tf_repo_new(w, NULL, "echo base > f");
        _cleanup_free_ char *pscript = strdup_printf("ln -s %s out; echo PARENT > p.txt", outside);
        char *parent = tf_shell_pending(w, repo, NULL, pscript, NULL);
        const char *extra[] = {"--parent-task", parent, NULL};
        char *child = tf_shell_pending(w, repo, extra, "echo THROUGH > out/planted.txt 2>/dev/null; echo c >> p.txt", NULL);
        _cleanup_free_ char *diff = tf_task_diff(w, child);
        ck_assert_uint_eq(tf_count(diff, "+PARENT"), 1);
        ck_assert_msg(!tf_exists(tf_path(outside, "planted.txt")), "the child wrote outside through the seeded link");
        const char *argv[] = {"accept", child, "--allow-config", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        tf_run_done(&r);
        ck_assert_msg(!tf_exists(tf_path(outside, "planted.txt")), "the accept wrote outside through the seeded link");
        ck_assert_uint_eq(tf_count_entries(outside), 0);
        free(outside), free(repo), free(parent), free(child);
}

int main(void) {
        Suite *s = suite_create("attack-gate");
        tf_add_tests(s, "check-escape", 300,
                     TF_TESTS(check_writes_no_worker_layer, check_reads_no_secret, check_leaves_no_process));
        tf_add_tests(s, "check-output", 300,
                     TF_TESTS(check_output_flood_is_capped, check_output_bytes_are_tamed, check_restarts_never_duplicate,
                              check_disk_budget));
        tf_add_tests(s, "project-file", 300, TF_TESTS(overlay_project_file_is_not_read, ro_bind_tricks, hostile_project_files));
        tf_add_tests(s, "risks", 300,
                     TF_TESTS(risk_spellings_are_flagged, names_with_escapes_on_a_terminal,
                              risk_through_committed_symlink));
        tf_add_tests(s, "fix-forward", 300, TF_TESTS(seed_from_foreign_parents, seed_symlink_out_lands_nothing_outside));
        return tf_run_suite(s);
}
