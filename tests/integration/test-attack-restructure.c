/* Attacks on the restructured daemon: the coldplug of a task durably
 * "running" whose shim was never let go, the boot sweeps and the overlay
 * removal driven by what tasks.json says (a damaged or stale state), the
 * write-out's pruning after a deletion, a worker's processes outliving it,
 * and hostile framing on a task's socket. Each test is one attack; those
 * that found a hole say so. */

#include <check.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"

static char *mkid(int n) { return strdup_printf("oc_rtest%03d_%08x", n, 0xbad00000u + (unsigned) n); }

/* A dispatch record as tasks.json holds it; od: its overlayDirs (taken),
 * NULL for null. */
static json_object *record(tf_world *w, const char *id, const char *status, const char *cs, json_object *od) {
        json_object *r = json_object_new_object();
        json_add_string(r, "id", id);
        json_add_string(r, "directory", w->repo_parent);
        char *log = strdup_printf("%s/logs/%s.ndjson", w->state, id);
        json_add_string(r, "logPath", log);
        free(log);
        json_add_string(r, "role", "dispatch");
        json_add_string(r, "prompt", "true");
        json_add_string(r, "status", status);
        json_add_string(r, "model", "shell");
        json_add_string(r, "executorId", "shell");
        json_add_string(r, "startedAt", "2026-01-01T00:00:00.000Z");
        if (!streq(status, "running")) {
                json_add_string(r, "endedAt", "2026-01-01T00:00:01.000Z");
                json_add_int(r, "exitCode", 0);
        }
        json_add_string(r, "promptPreview", "true");
        json_add_string(r, "changesetStatus", cs);
        json_add_string(r, "checkStatus", "none");
        if (od) json_add(r, "overlayDirs", od);
        else json_add_null(r, "overlayDirs");
        char *out = strdup_printf("%s/outputs/%s", w->state, id);
        json_add_string(r, "outputDir", out);
        free(out);
        return r;
}

/* overlayDirs naming root under tmp_root. */
static json_object *overlay_dirs(const char *tmp_root, const char *root) {
        json_object *od = json_object_new_object();
        char *up = strdup_printf("%s/upper/main", root), *wk = strdup_printf("%s/work/main", root);
        json_add_string(od, "root", root);
        json_add_string(od, "upperDir", up);
        json_add_string(od, "workDir", wk);
        json_add_string(od, "tmpRoot", tmp_root);
        json_add(od, "rwBinds", json_object_new_array());
        json_add(od, "rwFileBinds", json_object_new_array());
        free(up), free(wk);
        return od;
}

static void write_tasks(tf_world *w, json_object *arr) {
        ck_assert_int_eq(mkdir_p(w->state, 0700), 0);
        const char *s = json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PRETTY);
        tf_write(tf_path(w->state, "tasks.json"), s, strlen(s), 0600);
}

/* Something of another program that a daemon must never remove: a dir
 * holding a file. */
static void precious_dir(const char *dir) {
        ck_assert_int_eq(mkdir_p(tf_path(dir, "upper/main"), 0700), 0);
        tf_write(tf_path(dir, "upper/main/precious"), "keep\n", 5, 0600);
}

static bool precious_intact(const char *dir) {
        const char *p = tf_path(dir, "upper/main/precious");
        if (!tf_exists(p)) return false;
        char *s = tf_read(p, NULL);
        bool ok = streq(s, "keep\n");
        free(s);
        return ok;
}

/* Hole found: the coldplug of a task durably running whose launch request is
 * still on disk SIGKILLs the process its record names as the shim when that
 * "looks like" the held child (the daemon's binary, a session leader, not
 * this daemon's child). A taskferryd of another state dir — started by
 * systemd or setsid, as every daemon is — looks exactly like that: a stale
 * shimPid (the pid reused after a reboot, a damaged record) killed another
 * user's or environment's daemon. The held child is told apart by the
 * launch spec memfd it holds. */
TF_WORLD_TEST(unlaunch_kills_no_foreign_daemon) {
        tf_world *other = tf_world_new(NULL);
        tf_daemon_start(other);
        pid_t victim = other->daemon_pid;
        ck_assert(tf_pid_running(victim));
        char *id = mkid(1);
        json_object *rec = record(w, id, "running", "none", NULL);
        json_add_int(rec, "shimPid", victim);
        json_object *arr = json_object_new_array();
        json_object_array_add(arr, rec);
        write_tasks(w, arr);
        json_object_put(arr);
        char *tdir = strdup_printf("%s/tasks/%s", w->state, id);
        ck_assert_int_eq(mkdir_p(tdir, 0700), 0);
        tf_write(tf_path(tdir, "pending-launch.json"), "{}", 2, 0600);

        tf_daemon_start(w);
        ck_assert_int_gt(tf_daemon_pid(w), 0);
        usleep(300000);
        ck_assert_msg(tf_pid_running(victim), "the daemon killed another daemon (pid %d) its stale record named",
                      (int) victim);
        ck_assert_int_eq(tf_daemon_pid(other), victim);
        tf_world_free(other);
        free(tdir), free(id);
}

/* Hole found: the overlay a record names was removed (reject, a settlement,
 * the coldplug of an unlaunched task) wherever its overlayDirs pointed, as
 * long as the last component started with taskferry-cow-: a damaged record
 * naming another task's pending overlay in the daemon's own overlay root had
 * that task's changeset deleted. A task removes only its own
 * <tmpRoot>/taskferry-cow-<id>. (The boot sweep keeps the victim: its owner
 * is pending and names it.) */
TF_WORLD_TEST(record_names_no_foreign_overlay) {
        char *ov_root = strdup_printf("%s/overlays", w->state);
        char *victim_id = mkid(2), *pending = mkid(3), *unlaunched = mkid(4);
        char *victim = strdup_printf("%s/taskferry-cow-%s", ov_root, victim_id);
        precious_dir(victim);
        json_object *arr = json_object_new_array();
        json_object_array_add(arr, record(w, victim_id, "done", "pending", overlay_dirs(ov_root, victim)));
        json_object_array_add(arr, record(w, pending, "done", "pending", overlay_dirs(ov_root, victim)));
        json_object *rec = record(w, unlaunched, "running", "none", overlay_dirs(ov_root, victim));
        json_add_int(rec, "shimPid", 999999999);
        json_object_array_add(arr, rec);
        write_tasks(w, arr);
        json_object_put(arr);
        char *tdir = strdup_printf("%s/tasks/%s", w->state, unlaunched);
        ck_assert_int_eq(mkdir_p(tdir, 0700), 0);
        tf_write(tf_path(tdir, "pending-launch.json"), "{}", 2, 0600);

        tf_daemon_start(w);
        ck_assert_int_gt(tf_daemon_pid(w), 0);
        /* the coldplug has run once the daemon answers */
        json_object_put(tf_status_full(w, unlaunched));
        ck_assert_msg(precious_intact(victim), "the coldplug removed another task's overlay %s", victim);
        tf_run r = tf_cli(w, NULL, NULL, (const char *[]) {"reject", pending, "--json", NULL});
        tf_run_done(&r);
        ck_assert_msg(precious_intact(victim), "reject removed another task's overlay %s", victim);
        json_object *sv = tf_status_full(w, victim_id);
        ck_assert_str_eq(strempty(tf_jstr(sv, "changesetStatus")), "pending");
        json_object_put(sv);
        free(tdir), free(pending), free(unlaunched), free(victim), free(victim_id), free(ov_root);
}

/* Attack: the worker deletes d/sub/f; meanwhile the user replaces d by a
 * symlink to a dir outside the repository that has an (empty) sub of its
 * own. The pruning of the dirs a deletion empties must never go through the
 * symlink. Held: whatever accept answers, the outside dir stays. */
TF_WORLD_TEST(pruning_never_follows_a_symlinked_parent) {
        char *repo = tf_repo_new(w, NULL, "mkdir -p d/sub && echo f > d/sub/f && echo keep > top");
        char *outside = strdup(tf_path(w->root, "outside"));
        ck_assert_int_eq(mkdir_p(tf_path(outside, "sub"), 0700), 0);
        char *meanwhile = strdup_printf("rm -rf d && ln -s %s d", outside);
        json_object *st = NULL;
        char *id = tf_shell_paused(w, repo, "rm d/sub/f; " TF_PAUSE, meanwhile, &st);
        json_object_put(st);
        tf_run r = tf_accept(w, id);
        fprintf(stderr, "accept: %d %s %s\n", r.exit_code, r.out, r.err);
        tf_run_done(&r);
        ck_assert_msg(tf_exists(tf_path(outside, "sub")), "the pruning removed %s/sub through the symlink d", outside);
        struct stat sb;
        ck_assert_int_eq(lstat(tf_path(repo, "d"), &sb), 0);
        ck_assert(S_ISLNK(sb.st_mode));
        free(id), free(meanwhile), free(outside), free(repo);
}

/* Attack: the user's own empty dir beside a worker's deletion: the worker
 * deletes a/f (a tracked file); the user's empty a/keep/ (untracked, git
 * cannot see it) must stay, and so must a/ that holds it. Held. */
TF_WORLD_TEST(pruning_keeps_user_empty_dirs) {
        char *repo = tf_repo_new(w, NULL, "mkdir a && echo f > a/f && echo x > x");
        ck_assert_int_eq(mkdir_p(tf_path(repo, "a/keep"), 0755), 0);
        ck_assert_int_eq(mkdir_p(tf_path(repo, "empty-of-mine"), 0755), 0);
        char *id = tf_shell_pending(w, repo, NULL, "rm a/f; echo y > x", NULL);
        tf_accept_ok(w, id);
        ck_assert_msg(tf_exists(tf_path(repo, "a/keep")), "the pruning removed the user's empty a/keep");
        ck_assert(tf_exists(tf_path(repo, "empty-of-mine")));
        ck_assert(!tf_exists(tf_path(repo, "a/f")));
        free(id), free(repo);
}

/* Attack: a worker forks a daemon of its own (setsid, stdio closed) and
 * exits at once; the daemon would go on writing into the output dir after
 * the task settled. Held: the sandbox's pid namespace ends with the worker. */
TF_WORLD_TEST(setsid_daemon_dies_with_its_task) {
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *script = "O=\"$TASKFERRY_OUTPUT_DIR\"; "
                             "setsid sh -c 'i=0; while [ $i -lt 80 ]; do echo $i >> \"$0/late\"; sleep 0.1; "
                             "i=$((i+1)); done' \"$O\" </dev/null >/dev/null 2>&1 & "
                             "sleep 0.3; echo started";
        json_object *st = NULL;
        char *id = tf_shell_done(w, repo, NULL, script, &st);
        json_object_put(st);
        char *a = tf_output_try_read(w, id, "late");
        size_t na = a ? strlen(a) : 0;
        sleep(2);
        char *b = tf_output_try_read(w, id, "late");
        size_t nb = b ? strlen(b) : 0;
        ck_assert_msg(na > 0, "the worker's daemon never ran");
        ck_assert_msg(nb == na, "the worker's setsid daemon still writes after its task settled (%zu -> %zu bytes)",
                      na, nb);
        free(a), free(b), free(id), free(repo);
}

/* Attack: hostile framing on the task's own socket: a line that never ends
 * (64 MiB, no newline), half a line then a close, a NUL in the middle of a
 * frame, a frame of nested arrays 100,000 deep. Held: the daemon drops the
 * connection or answers an error and stays up for the next caller. */
TF_WORLD_TEST(task_socket_hostile_framing) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_daemon_start(w);
        pid_t daemon = tf_daemon_pid(w);
        const char *py =
                "import os, socket, sys\n"
                "P = os.environ['TASKFERRY_SOCKET_PATH']\n"
                "def conn():\n"
                "    s = socket.socket(socket.AF_UNIX); s.connect(P); s.settimeout(10); return s\n"
                "def reply(s):\n"
                "    b = b''\n"
                "    try:\n"
                "        while not b.endswith(b'\\n'):\n"
                "            d = s.recv(65536)\n"
                "            if not d: return 'EOF'\n"
                "            b += d\n"
                "    except Exception as e: return 'ERR ' + type(e).__name__\n"
                "    return b.decode(errors='replace').strip()[:200]\n"
                "s = conn()\n"
                "try:\n"
                "    chunk = b'x' * (1 << 20)\n"
                "    for i in range(64): s.sendall(chunk)\n"
                "    print('long: sent all')\n"
                "except Exception as e: print('long:', type(e).__name__)\n"
                "s.close()\n"
                "s = conn(); s.sendall(b'{\"version\":1,\"id\":\"h\",\"method\":\"system.he'); s.close(); print('half: ok')\n"
                "s = conn(); s.sendall(b'{\"version\":1,\"id\":\"n\",\"method\":\"system.health\\x00\"}\\n'); "
                "print('nul:', reply(s)); s.close()\n"
                "s = conn(); s.sendall(b'[' * 100000 + b']' * 100000 + b'\\n'); print('deep:', reply(s)); s.close()\n"
                "s = conn(); s.sendall(b'{\"version\":1,\"id\":\"ok\",\"method\":\"system.health\",\"params\":{}}\\n'); "
                "print('after:', reply(s)); s.close()\n";
        char *pyp = strdup(tf_path(w->fixtures, "framing.py"));
        tf_write(pyp, py, strlen(py), 0644);
        char *script = strdup_printf("python3 %s > \"$TASKFERRY_OUTPUT_DIR/out.txt\" 2>&1; true", pyp);
        json_object *st = NULL;
        char *id = tf_shell_done(w, repo, NULL, script, &st);
        json_object_put(st);
        char *out = tf_output_read(w, id, "out.txt");
        fprintf(stderr, "framing:\n%s\n", out);
        ck_assert_msg(strstr(out, "nul: {") && strstr(out, "\"ok\":false"), "%s", out);
        ck_assert_msg(strstr(out, "after: {") && strstr(out, "\"ok\":true,\"id\":\"ok\""), "%s", out);
        ck_assert_int_eq(tf_daemon_pid(w), daemon);
        free(out), free(id), free(script), free(pyp), free(repo);
}

int main(void) {
        Suite *s = suite_create("attack-restructure");
        tf_add_tests(s, "state", 120,
                     TF_TESTS(unlaunch_kills_no_foreign_daemon, record_names_no_foreign_overlay));
        tf_add_tests(s, "writeout", 300, TF_TESTS(pruning_never_follows_a_symlinked_parent, pruning_keeps_user_empty_dirs));
        tf_add_tests(s, "worker", 300, TF_TESTS(setsid_daemon_dies_with_its_task, task_socket_hostile_framing));
        return tf_run_suite(s);
}
