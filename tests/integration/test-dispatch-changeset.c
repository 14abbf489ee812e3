/* The main job, end to end through the CLI and an isolated daemon, with real
 * bwrap, real overlayfs and real git: the host repository stays untouched
 * while a sandboxed worker changes it, `result --diff` shows exactly the
 * worker's changes, `accept` lands them byte for byte, `reject` drops them,
 * and no overlay stays behind. Also what the worker can and cannot see. */

#include <check.h>
#include <dirent.h>
#include <sys/stat.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

static char *make_repo(tf_world *w) {
        char *repo = tf_repo_new(w, NULL,
                                 "printf 'line one\\nline two\\n' > tracked.txt && printf 'doomed\\n' > doomed.txt && "
                                 "printf 'keep\\n' > keep.txt && mkdir -p sub && printf 'nested\\n' > sub/file.txt && "
                                 "printf 'ignored/\\n' > .gitignore");
        free(tf_shf(w, repo, "printf 'untracked before dispatch\\n' > preexisting-untracked.txt"));
        return repo;
}

/* working tree, index, HEAD and refs of the host repository */
static char *repo_state(tf_world *w, const char *repo) {
        char *tree = tf_tree_snapshot(repo, false);
        char *git = tf_shf(w, repo, "git rev-parse HEAD; git for-each-ref; sha256sum .git/index; git status --porcelain");
        char *s = strdup_printf("%s\n--\n%s", tree, git);
        free(tree);
        free(git);
        return s;
}

static bool no_cow_dirs(tf_world *w, void *arg) {
        char *dir = strdup(tf_path(w->state, "overlays"));
        DIR *d = opendir(dir);
        free(dir);
        if (!d) return true;
        bool none = true;
        struct dirent *de;
        while ((de = readdir(d)))
                if (startswith(de->d_name, "taskferry-cow-")) none = false;
        closedir(d);
        return none;
}

START_TEST(git_round_trip_accept_and_reject) {
        umask(022); /* the user's umask: accept must create and keep files as the user would */
        tf_world *w = tf_world_new(NULL);
        char *repo = make_repo(w);
        char *before = repo_state(w, repo);
        /* The worker: modify, add, delete, write a binary file, create an
         * ignored file, commit inside the sandbox, then wait for a go signal so
         * the test can look at the host while it runs. */
        char *go = strdup(tf_path(w->root, "go"));
        const char *script =
                "set -e; printf 'line one\\nline 2\\nline three\\n' > tracked.txt; printf 'brand new\\n' > added.txt; "
                "rm doomed.txt; printf 'bin\\000\\377\\001data' > blob.bin; mkdir -p ignored && echo x > ignored/cache; "
                "printf 'changed nested\\n' > sub/file.txt; "
                "git add -A && git -c user.email=w@x -c user.name=w commit -qm 'worker commit'; " TF_PAUSE;
        char *id = tf_dispatch_shell(w, repo, NULL, script);

        /* while it runs: wait for the worker's stdout line, then check the host */
        tf_wait_log(w, id, "worker-finished");
        char *during = repo_state(w, repo);
        ck_assert_str_eq(during, before);
        free(during);
        /* tasks.json records the overlay before the worker runs (#346) */
        char *tasks_path = strdup(tf_path(w->state, "tasks.json"));
        char *tasks = tf_read(tasks_path, NULL);
        ck_assert_msg(strstr(tasks, "taskferry-cow-") != NULL, "overlay not persisted: %s", tasks);
        free(tasks);
        tf_go(w, id);

        json_object *st = tf_wait_settled(w, id);
        ck_assert_str_eq(tf_jstr(st, "status"), "done");
        ck_assert_str_eq(tf_jstr(st, "changesetStatus"), "pending");
        json_object_put(st);
        char *after = repo_state(w, repo);
        ck_assert_str_eq(after, before);
        free(after);

        /* result --diff: exactly the worker's changes */
        const char *diff_argv[] = {"result", id, "--diff", "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, diff_argv);
        ck_assert_int_eq(r.exit_code, 0);
        json_object *res = tf_json(r.out);
        const char *diff = tf_jstr(res, "diff");
        ck_assert_ptr_nonnull(diff);
        ck_assert(strstr(diff, "diff --git a/tracked.txt b/tracked.txt"));
        ck_assert(strstr(diff, "+line 2"));
        ck_assert(strstr(diff, "+line three"));
        ck_assert(strstr(diff, "diff --git a/added.txt b/added.txt"));
        ck_assert(strstr(diff, "+brand new"));
        ck_assert(strstr(diff, "diff --git a/doomed.txt b/doomed.txt"));
        ck_assert(strstr(diff, "deleted file mode"));
        ck_assert(strstr(diff, "diff --git a/blob.bin b/blob.bin"));
        ck_assert(strstr(diff, "GIT binary patch"));
        ck_assert(strstr(diff, "diff --git a/sub/file.txt b/sub/file.txt"));
        ck_assert_msg(!strstr(diff, "preexisting-untracked"), "pre-existing untracked file leaked: %s", diff);
        ck_assert_msg(!strstr(diff, "ignored/cache"), "ignored file leaked");
        ck_assert_msg(!strstr(diff, "keep.txt"), "unchanged file in diff");
        ck_assert_msg(!strstr(diff, ".git/"), ".git content in diff");
        /* exactly five files */
        int files = 0;
        for (const char *p = diff; (p = strstr(p, "diff --git ")); p++) files++;
        ck_assert_int_eq(files, 5);
        json_object_put(res);
        tf_run_done(&r);

        /* the worker's commit never reaches the host */
        char *head_before = tf_shf(w, repo, "git rev-list --count HEAD");
        ck_assert_str_eq(head_before, "1");

        /* accept: the working tree becomes byte-for-byte what the worker left */
        const char *accept_argv[] = {"accept", id, "--json", NULL};
        r = tf_cli(w, NULL, NULL, accept_argv);
        ck_assert_msg(r.exit_code == 0, "accept failed: %s %s", r.out, r.err);
        res = tf_json(r.out);
        ck_assert_str_eq(tf_jstr(res, "changesetStatus"), "accepted");
        ck_assert(json_get_bool(res, "applied", false));
        json_object_put(res);
        tf_run_done(&r);
        size_t len;
        char *t = tf_read(tf_path(repo, "tracked.txt"), &len);
        ck_assert_str_eq(t, "line one\nline 2\nline three\n");
        free(t);
        t = tf_read(tf_path(repo, "added.txt"), &len);
        ck_assert_str_eq(t, "brand new\n");
        free(t);
        struct stat sb;
        ck_assert_int_eq(stat(tf_path(repo, "tracked.txt"), &sb), 0);
        ck_assert_int_eq(sb.st_mode & 0777, 0644);
        ck_assert_int_eq(stat(tf_path(repo, "added.txt"), &sb), 0);
        ck_assert_int_eq(sb.st_mode & 0777, 0644);
        t = tf_read(tf_path(repo, "blob.bin"), &len);
        ck_assert_int_eq(len, 10);
        ck_assert(memcmp(t, "bin\0\377\001data", 10) == 0);
        free(t);
        ck_assert(!tf_exists(tf_path(repo, "doomed.txt")));
        t = tf_read(tf_path(repo, "sub/file.txt"), &len);
        ck_assert_str_eq(t, "changed nested\n");
        free(t);
        ck_assert(!tf_exists(tf_path(repo, "ignored")));
        ck_assert(tf_exists(tf_path(repo, "preexisting-untracked.txt")));
        char *count = tf_shf(w, repo, "git rev-list --count HEAD");
        ck_assert_str_eq(count, "1");
        free(count);
        ck_assert(tf_wait_until(no_cow_dirs, w, NULL, 10000));
        /* the decision is durable */
        json_object *rec = tf_task_record(w, id);
        ck_assert_ptr_nonnull(rec);
        ck_assert_str_eq(tf_jstr(rec, "changesetStatus"), "accepted");
        ck_assert_ptr_null(json_get_object(rec, "overlayDirs"));
        json_object_put(rec);

        /* second task, rejected: nothing changes */
        char *mid = repo_state(w, repo);
        char *id2 = tf_shell_pending(w, repo, NULL, "echo rejected > tracked.txt; rm keep.txt; echo n > other.txt", NULL);
        const char *reject_argv[] = {"reject", id2, "--json", NULL};
        r = tf_cli(w, NULL, NULL, reject_argv);
        ck_assert_msg(r.exit_code == 0, "reject failed: %s", r.out);
        res = tf_json(r.out);
        ck_assert_str_eq(tf_jstr(res, "changesetStatus"), "rejected");
        json_object_put(res);
        tf_run_done(&r);
        char *end = repo_state(w, repo);
        ck_assert_str_eq(end, mid);
        ck_assert(tf_wait_until(no_cow_dirs, w, NULL, 10000));
        /* a decided changeset cannot be decided again */
        const char *again[] = {"accept", id2, NULL};
        r = tf_cli(w, NULL, NULL, again);
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert_msg(strstr(r.out, "no pending changeset"), "%s", r.out);
        tf_run_done(&r);
        free(mid), free(end), free(id2), free(before), free(head_before), free(go), free(tasks_path);
        free(id), free(repo);
        tf_world_free(w);
}
END_TEST

TF_WORLD_TEST(no_changes_auto_accepts) {
        char *repo = make_repo(w);
        json_object *st = NULL;
        char *id = tf_shell_done(w, repo, NULL, "cat tracked.txt", &st);
        /* changesetStatus "accepted" is shown (≠ "none") */
        ck_assert_str_eq(tf_jstr(st, "changesetStatus"), "accepted");
        json_object_put(st);
        char *msg = tf_task_message(w, id);
        ck_assert_str_eq(msg, "line one\nline two\n");
        free(msg);
        ck_assert(tf_wait_until(no_cow_dirs, w, NULL, 10000));
        free(id), free(repo);
}
END_TEST

TF_WORLD_TEST(apply_failure_keeps_pending) {
        char *repo = make_repo(w);
        char *id = tf_shell_settled(w, repo, NULL, "printf 'worker version\\n' > tracked.txt", NULL);
        /* the user edits the same file meanwhile */
        free(tf_shf(w, repo, "printf 'user version\\n' > tracked.txt"));
        char *state = repo_state(w, repo);
        const char *accept_argv[] = {"accept", id, NULL};
        tf_run r = tf_cli(w, NULL, NULL, accept_argv);
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert_msg(strstr(r.out, "failed to apply"), "%s", r.out);
        ck_assert_msg(strstr(r.out, "still pending"), "%s", r.out);
        tf_run_done(&r);
        /* the live tree was not touched */
        char *state2 = repo_state(w, repo);
        ck_assert_str_eq(state2, state);
        char *cs = tf_changeset_status(w, id);
        ck_assert_str_eq(cs, "pending");
        free(cs);
        free(state), free(state2), free(id), free(repo);
}
END_TEST

/* What the worker sees: deny-listed and daemon dirs are empty, the runtime dir
 * holds only the socket, nothing outside the overlay and the output dir is
 * writable. */
TF_WORLD_TEST(sandbox_confinement) {
        char *repo = make_repo(w);
        free(tf_shf(w, NULL, "mkdir -p %s/.ssh && echo secret > %s/.ssh/id_ed25519 && mkdir -p %s && echo c > %s/cached",
                    w->home, w->home, w->cache, w->cache));
        /* runs once so the daemon, its socket and the state dir exist */
        char *id0 = tf_shell_settled(w, repo, NULL, "true", NULL);
        const char *probe =
                "r=$TASKFERRY_OUTPUT_DIR/report; : > $r; "
                "echo \"ssh=$(ls -A \"$HOME/.ssh\" 2>/dev/null | tr '\\n' ' ')\" >> $r; "
                "echo \"state=$(ls -A \"$STATE\" 2>&1 | tr '\\n' ' ')\" >> $r; "
                "echo \"outputs-ids=$(ls -A \"$STATE/outputs\" | grep -c .)\" >> $r; "
                "echo \"cache=$(ls -A \"$CACHE\" 2>&1 | tr '\\n' ' ')\" >> $r; "
                "echo \"homes=$(ls -A \"$CACHE/homes\" 2>&1 | tr '\\n' ' ')\" >> $r; "
                "echo \"run=$(ls -A \"$RUN\" 2>&1 | tr '\\n' ' ')\" >> $r; "
                "cat \"$CACHE/cached\" >/dev/null 2>&1 && echo cache-readable >> $r; "
                "(echo x > \"$HOME/planted\") 2>/dev/null && echo home-writable >> $r; "
                "(echo x > /usr/planted) 2>/dev/null && echo usr-writable >> $r; "
                "(echo x > \"$WORLD/planted\") 2>/dev/null && echo world-writable >> $r; "
                "(echo x > ./in-overlay) 2>/dev/null && echo overlay-writable >> $r; "
                "test -S \"$TASKFERRY_SOCKET_PATH\" && echo socket-present >> $r; "
                "test -e \"$RUN/daemon.sock\" || echo main-socket-hidden >> $r; "
                "echo \"socket-dir=$(ls -A \"$RUN/task-sockets\" | tr '\\n' ' ')\" >> $r; "
                "id -u >> $r; echo \"mode=$(stat -c %a .)\" >> $r; echo done";
        char *env_state = strdup_printf("STATE=%s", w->state), *env_cache = strdup_printf("CACHE=%s", w->cache);
        char *env_run = strdup_printf("RUN=%s", w->run), *env_world = strdup_printf("WORLD=%s", w->root);
        tf_world_setenv(w, "STATE", w->state);
        tf_world_setenv(w, "CACHE", w->cache);
        tf_world_setenv(w, "RUN", w->run);
        tf_world_setenv(w, "WORLD", w->root);
        char *id = tf_shell_done(w, repo, NULL, probe, NULL);
        char *report = tf_output_read(w, id, "report");
        ck_assert_msg(strstr(report, "ssh=\n"), "~/.ssh visible: %s", report);
        /* the state dir is empty but for the mountpoint path of the task's own output dir */
        ck_assert_msg(strstr(report, "state=outputs \n"), "state dir visible: %s", report);
        ck_assert_msg(strstr(report, "outputs-ids=1\n"), "other tasks' output dirs visible: %s", report);
        /* the cache dir shows nothing but the path to this task's own homes */
        ck_assert_msg(strstr(report, "cache=homes \n"), "cache dir visible: %s", report);
        char *homes = strdup_printf("homes=%s \n", id);
        ck_assert_msg(strstr(report, homes), "other tasks' homes visible: %s", report);
        free(homes);
        /* the runtime dir holds nothing but the path to the task's own socket:
         * the daemon's socket stays hidden (nested dispatch goes through the
         * task's socket, on which the daemon knows the caller is sandboxed) */
        ck_assert_msg(strstr(report, "run=task-sockets \n"), "runtime dir shows more than the socket: %s", report);
        ck_assert_msg(strstr(report, "socket-present"), "socket not bound for nested dispatch: %s", report);
        ck_assert_msg(strstr(report, "main-socket-hidden"), "the daemon's own socket is visible: %s", report);
        char *sockline = strdup_printf("socket-dir=%s.sock \n", id);
        ck_assert_msg(strstr(report, sockline), "other tasks' sockets visible: %s", report);
        free(sockline);
        ck_assert_msg(!strstr(report, "cache-readable"), "%s", report);
        /* the sandbox's home and /var/tmp (where the world lives) are private
         * tmpfs (sandbox-plan.h): a write there succeeds and never reaches the
         * real dirs (checked below) */
        ck_assert_msg(!strstr(report, "usr-writable"), "%s", report);
        ck_assert_msg(strstr(report, "overlay-writable"), "%s", report);
        /* the target directory keeps its own mode inside the overlay */
        struct stat rs;
        ck_assert_int_eq(stat(repo, &rs), 0);
        char mode[32];
        snprintf(mode, sizeof mode, "mode=%o\n", rs.st_mode & 07777);
        ck_assert_msg(strstr(report, mode), "want %s in %s", mode, report);
        char uid[32];
        snprintf(uid, sizeof uid, "\n%u\n", (unsigned) getuid());
        ck_assert_msg(strstr(report, uid), "worker uid differs: %s", report);
        ck_assert(!tf_exists(tf_path(w->home, "planted")));
        ck_assert(!tf_exists(tf_path(w->root, "planted")));
        ck_assert(!tf_exists(tf_path(repo, "in-overlay")));
        /* the prompt never sat on a command line */
        char *tasks_path = strdup(tf_path(w->state, "tasks.json"));
        struct stat sb;
        ck_assert_int_eq(stat(tasks_path, &sb), 0);
        ck_assert_int_eq(sb.st_mode & 0777, 0600);
        char *log = strdup_printf("%s/logs/%s.ndjson", w->state, id);
        ck_assert_int_eq(stat(log, &sb), 0);
        ck_assert_int_eq(sb.st_mode & 0777, 0600);
        free(report), free(env_state), free(env_cache), free(env_run), free(env_world);
        free(id), free(id0), free(repo), free(tasks_path), free(log);
}
END_TEST

TF_WORLD_TEST(missing_bwrap_crashes_with_spawn_error) {
        char *repo = make_repo(w);
        /* a PATH without bwrap, for the daemon and hence the worker */
        char *bin = strdup(tf_path(w->root, "nobwrap"));
        free(tf_shf(w, NULL,
                    "mkdir -p %s && for t in sh git cat rm printf mkdir ls env sleep true id tr; do "
                    "ln -s \"$(command -v $t)\" %s/$t; done",
                    bin, bin));
        char *path = strdup_printf("%s/bin:%s", w->fixtures, bin);
        tf_world_setenv(w, "PATH", path);
        json_object *st = NULL;
        char *id = tf_shell_settled(w, repo, NULL, "echo hi > x", &st);
        ck_assert_str_eq(tf_jstr(st, "status"), "crashed");
        const char *se = tf_jstr(st, "spawnError");
        ck_assert_msg(se && strstr(se, "bwrap is required"), "spawnError: %s", se ? se : "(null)");
        json_object_put(st);
        ck_assert(!tf_exists(tf_path(repo, "x")));
        free(id), free(repo), free(bin), free(path);
}
END_TEST

TF_WORLD_TEST(no_sandbox_runs_directly) {
        char *repo = make_repo(w);
        const char *nosandbox[] = {"--no-sandbox", NULL};
        char *id = tf_shell_done(w, repo, nosandbox,
                                 "echo direct > direct.txt; ls -A \"$HOME\" | grep -c . ; echo \"$TASKFERRY_CHILD $TASKFERRY_TASK_ID\"",
                                 NULL);
        /* unsandboxed writes land directly, no changeset */
        ck_assert(tf_exists(tf_path(repo, "direct.txt")));
        char *msg = tf_task_message(w, id);
        char *expect = strdup_printf("1 %s\n", id);
        ck_assert_msg(strstr(msg, expect), "message: %s", msg);
        free(expect), free(msg);
        free(id), free(repo);
}
END_TEST

/* The warning in arr that names quoted_path ("<path>: left out of the changeset: ..."). */
static const char *warning_naming(json_object *arr, const char *quoted_path) {
        size_t n = strlen(quoted_path);
        for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
                const char *s = json_object_get_string(json_object_array_get_idx(arr, i));
                if (s && strncmp(s, quoted_path, n) == 0 && startswith(s + n, ": left out of the changeset")) return s;
        }
        return NULL;
}

/* tasks.json holds the task's changesetWarnings naming .GIT/x and src/config. */
static bool warnings_persisted(tf_world *w, void *arg) {
        _cleanup_json_ json_object *rec = tf_task_record(w, arg);
        json_object *wa = json_get_array(rec, "changesetWarnings");
        return wa && warning_naming(wa, ".GIT/x") && warning_naming(wa, "src/config");
}

/* Paths left out of the changeset, through the daemon: a worker that edits a.txt and
 * creates paths git refuses (.GIT/x, .git., git~1, .g<U+200C>it) and a bare
 * repository whose config runs a program (src/HEAD, src/objects/, src/refs/,
 * src/config with core.fsmonitor). The changeset holds a.txt alone, status
 * and result name every left-out path in changesetWarnings (also in
 * tasks.json), accept lands a.txt, and afterwards `git status` anywhere in the
 * tree runs nothing and none of the planted paths exists. */
TF_WORLD_TEST(planted_repository_paths_are_left_out) {
        char *repo = tf_repo_new(w, NULL, "mkdir -p src/lib && echo a > a.txt && echo f > src/lib/f.c");
        char *markers = strdup(tf_path(w->root, "markers"));
        char *mark = strdup(tf_path(w->root, "mark.sh"));
        free(tf_shf(w, NULL, "set -e; mkdir -p %s && printf '#!/bin/sh\\necho \"ran in $PWD\" >> %s/ran\\n' > %s && chmod +x %s",
                    markers, markers, mark, mark));
        char *script = strdup_printf(
                "set -e; echo more >> a.txt; mkdir -p .GIT; echo x > .GIT/x; "
                "zw=$(printf '.g\\342\\200\\214it'); mkdir .git. git~1 \"$zw\"; "
                "echo c > .git./config; echo c > git~1/config; echo c > \"$zw/config\"; "
                "printf 'ref: refs/heads/main\\n' > src/HEAD; mkdir -p src/objects/info src/refs/heads; "
                "echo > src/objects/info/keep; echo > src/refs/heads/keep; "
                "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tworktree = ..\\n"
                "\\tfsmonitor = %s\\n' > src/config",
                mark);
        json_object *st = NULL;
        char *id = tf_shell_done(w, repo, NULL, script, &st);
        ck_assert_msg(!json_get_string(st, "changesetError"), "changesetError: %s", json_get_string(st, "changesetError"));
        ck_assert_str_eq(tf_jstr(st, "changesetStatus"), "pending");
        json_object_put(st);

        static const char *const left_out[] = {
                ".GIT/x", ".git./config", "git~1/config", "\".g\\342\\200\\214it/config\"",
                "src/HEAD", "src/config", "src/objects/info/keep", "src/refs/heads/keep",
        };
        /* status (lean and --full) and result show them */
        const char *status_argv[] = {"status", id, "--json", NULL};
        const char *full_argv[] = {"status", id, "--full", "--json", NULL};
        const char *result_argv[] = {"result", id, "--json", NULL};
        const char *const *views[] = {status_argv, full_argv, result_argv};
        for (size_t v = 0; v < ELEMENTSOF(views); v++) {
                tf_run r = tf_cli(w, NULL, NULL, views[v]);
                ck_assert_msg(r.exit_code == 0, "%s: %s %s", views[v][0], r.out, r.err);
                json_object *o = tf_json(r.out);
                json_object *arr = json_get_array(o, "changesetWarnings");
                ck_assert_msg(arr, "%s %s: no changesetWarnings in %s", views[v][0], views[v][2], r.out);
                ck_assert_int_eq(json_object_array_length(arr), ELEMENTSOF(left_out));
                for (size_t i = 0; i < ELEMENTSOF(left_out); i++)
                        ck_assert_msg(warning_naming(arr, left_out[i]), "%s: no warning names %s: %s", views[v][0],
                                      left_out[i], r.out);
                json_object_put(o);
                tf_run_done(&r);
        }
        /* the changeset is a.txt alone */
        const char *diff_argv[] = {"result", id, "--diff", "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, diff_argv);
        json_object *res = tf_json(r.out);
        const char *diff = tf_jstr(res, "diff");
        ck_assert_ptr_nonnull(diff);
        ck_assert_msg(strstr(diff, "diff --git a/a.txt b/a.txt"), "%s", diff);
        int files = 0;
        for (const char *p = diff; (p = strstr(p, "diff --git ")); p++) files++;
        ck_assert_msg(files == 1, "%s", diff);
        json_object_put(res);
        tf_run_done(&r);
        /* persisted (tasks.json is written 250 ms after a change) */
        ck_assert_msg(tf_wait_until(warnings_persisted, w, id, 10000), "changesetWarnings not in tasks.json");

        const char *accept_argv[] = {"accept", id, "--json", NULL};
        r = tf_cli(w, NULL, NULL, accept_argv);
        ck_assert_msg(r.exit_code == 0, "accept failed: %s %s", r.out, r.err);
        tf_run_done(&r);
        char *a = tf_read(tf_path(repo, "a.txt"), NULL);
        ck_assert_str_eq(a, "a\nmore\n");
        free(a);
        free(tf_shf(w, repo,
                    "for d in . src src/lib; do (cd $d && git status >/dev/null 2>&1; git log -1 >/dev/null 2>&1); done; "
                    "true"));
        ck_assert_msg(!tf_exists(tf_path(markers, "ran")), "git status ran the planted program after the accept");
        char *absent = tf_shf(w, repo,
                              "for p in .GIT .git. git~1 \"$(printf '.g\\342\\200\\214it')\" src/HEAD src/objects "
                              "src/refs src/config; do test ! -e \"$p\" || echo \"$p\"; done");
        ck_assert_msg(streq(absent, ""), "planted paths in the tree: %s", absent);
        free(absent);
        free(script), free(id), free(mark), free(markers), free(repo);
}
END_TEST

int main(void) {
        return tf_run_tests("dispatch-changeset", "main", 600,
                            TF_TESTS(git_round_trip_accept_and_reject, no_changes_auto_accepts, apply_failure_keeps_pending,
                                     sandbox_confinement, missing_bwrap_crashes_with_spawn_error, no_sandbox_runs_directly,
                                     planted_repository_paths_are_left_out));
}
