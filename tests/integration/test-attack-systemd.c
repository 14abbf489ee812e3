/* Attacks on the systemd-facing channels (the env file and its reload, the daemon's
 * log lines on stderr / the journal, nested dispatch env, the process-group
 * kill without a user manager) by a hostile worker, mostly through its own
 * task socket. Each test is one attempt to get out; a pass means the attack
 * failed. Those that found a hole say so. */

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <inttypes.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "fs-util.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

#define SECRET "sk-attack8-2b9e71c4d05a"
#define ROTATED "sk-attack8-rotated-5f1d8e"


typedef struct {
        const char *needle;
        unsigned want;
} log_wait;

static bool pred_log(tf_world *w, void *arg) {
        log_wait *lw = arg;
        _cleanup_free_ char *log = tf_daemon_log(w);
        return tf_count(log, lw->needle) >= lw->want;
}

/* A shell task in repo runs cmd, its output kept as replies.txt: the
 * replies must hold want (else the test fails saying what); then, after
 * a moment for the daemon's log to catch up, the daemon's log (malloc'd). */
static char *log_after_replies(tf_world *w, const char *repo, const char *cmd, const char *want, const char *what) {
        _cleanup_free_ char *script = strdup_printf("%s > \"$TASKFERRY_OUTPUT_DIR/replies.txt\" 2>&1; true", cmd);
        _cleanup_free_ char *id = tf_shell_settled(w, repo, NULL, script, NULL);
        _cleanup_free_ char *replies = tf_output_try_read(w, id, "replies.txt");
        fprintf(stderr, "replies:\n%s\n", strnull(replies));
        ck_assert_msg(replies && strstr(replies, want), "%s: %s", what, strnull(replies));
        usleep(300 * 1000);
        return tf_daemon_log(w);
}

/* Hole found (fixed in src/shared/util.c log_emit): text a worker controls
 * reached the daemon's log lines raw. A nested dispatch's bind path with a
 * newline in it ("bind %s does not exist", "is inside the deny-listed %s")
 * wrote a second, forged line into the daemon's stderr — under systemd that
 * is a journal entry of its own, looking like one of taskferryd's. Control
 * characters in a message's arguments are now escaped; a line the daemon
 * means to split (error + help) still is. */
TF_WORLD_TEST(worker_text_forges_no_log_line) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_daemon_start(w);
        char *py = tf_write_peer(w);
        /* a nested shell dispatch whose binds carry a forged line each */
        char *req = strdup_printf(
                "{\"method\":\"task.dispatch\",\"params\":{\"executor\":\"shell\",\"prompt\":\"true\","
                "\"directory\":\"%s\",\"rwBind\":[\"/nonexistent-a\\ntaskferryd: error: FORGED-A\"],"
                "\"roBind\":[\"%s/.ssh/x\\ntaskferryd: error: FORGED-B\\r<0>FORGED-C\"]}}",
                repo, w->home);
        char *cmd = strdup_printf("python3 %s '%s'", py, req);
        /* the dispatch was answered (refused: a sandboxed caller has no
         * binds; since nested_binds_flood_no_log that is decided before the
         * binds are resolved or warned about, so they never reach the log) */
        char *log = log_after_replies(w, repo, cmd, "\"r0\"", "no reply");
        for (const char *l = log; l && *l;) {
                size_t n = strcspn(l, "\n");
                char *line = strndup(l, n);
                ck_assert_msg(!strstr(line, "FORGED") || strncmp(line, "taskferryd: error: FORGED", 25) != 0,
                              "a forged log line: %s\nlog:\n%s", line, log);
                ck_assert_msg(!strchr(line, '\r'), "a raw CR in a log line: %s", line);
                free(line);
                l += n;
                if (*l) l++;
        }
        free(log), free(cmd), free(req), free(py), free(repo);
}
END_TEST

/* Hole found (fixed in launch.c, push_env_file_dirs): the user binds the env
 * file's directory (read-only) into a worker; the file itself was masked
 * (/dev/null over it). While the worker ran, the user rotated the secret the
 * documented way (temp file + rename over the old one): the rename detached
 * the mask in the sandbox's namespace and the temp file was never masked, so
 * the worker read the new secret. The env file's directory is now masked as
 * a whole (unless it holds the home or the target). */
TF_WORLD_TEST(env_file_rotation_stays_masked) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *p = tf_env_file(w, "K=" SECRET "\n");
        char *dir = strdup_printf("%s/.config/taskferry", w->home);
        tf_daemon_start(w);
        /* the worker reads everything in the dir for a while */
        char *script = strdup_printf(
                "O=\"$TASKFERRY_OUTPUT_DIR\"; : > \"$O/started\"; i=0; while [ $i -lt 60 ]; do "
                "cat '%s'/* '%s'/.[!.]* >> \"$O/seen\" 2>/dev/null; i=$((i+1)); sleep 0.1; done; true",
                dir, dir);
        const char *bind[] = {"--ro-bind", dir, NULL};
        char *id = tf_dispatch_shell(w, repo, bind, script);
        ck_assert_msg(tf_wait_output(w, id, "started", 10000), "the worker never started");
        /* rotate: temp + rename, as a secrets-unlock tool does */
        char *tmp = strdup_printf("%s.tmp-rot", p);
        const char text2[] = "K=" ROTATED "\n";
        tf_write(tmp, text2, strlen(text2), 0600);
        usleep(300 * 1000);
        ck_assert_int_eq(rename(tmp, p), 0);
        json_object_put(tf_wait_settled(w, id));
        char *seen = tf_output_try_read(w, id, "seen");
        ck_assert_msg(!seen || (!strstr(seen, SECRET) && !strstr(seen, ROTATED)), "the worker read the env file: %s",
                      seen);
        free(seen), free(tmp), free(id), free(script), free(p), free(dir), free(repo);
}
END_TEST

/* Attack: a worker's nested dispatch forwards plumbing variables in its env
 * (TASKFERRY_STATE_DIR, TASKFERRY_SOCKET_PATH, PATH, HOME, TASKFERRY_TASK_ID,
 * TASKFERRY_OUTPUT_DIR, TASKFERRY_RUNTIME_DIR) to misroute the next worker. */
TF_WORLD_TEST(nested_env_carries_no_plumbing) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_daemon_start(w);
        char *py = tf_write_peer(w);
        /* the nested worker writes what it sees into its own output dir */
        const char *probe = "for v in TASKFERRY_STATE_DIR TASKFERRY_SOCKET_PATH PATH HOME TASKFERRY_TASK_ID "
                            "TASKFERRY_OUTPUT_DIR TASKFERRY_RUNTIME_DIR TASKFERRY_CACHE_DIR; do "
                            "eval echo $v=\\\\${$v-}; done > \\\"$TASKFERRY_OUTPUT_DIR/env.txt\\\"";
        char *req = strdup_printf(
                "{\"method\":\"task.dispatch\",\"params\":{\"executor\":\"shell\",\"prompt\":\"%s\","
                "\"directory\":\"%s\",\"env\":{\"TASKFERRY_STATE_DIR\":\"/evil/state\",\"TASKFERRY_SOCKET_PATH\":"
                "\"/evil/sock\",\"PATH\":\"/evil/bin\",\"HOME\":\"/evil/home\",\"TASKFERRY_TASK_ID\":\"evil\","
                "\"TASKFERRY_OUTPUT_DIR\":\"/evil/out\",\"TASKFERRY_RUNTIME_DIR\":\"/evil/run\","
                "\"TASKFERRY_CACHE_DIR\":\"/evil/cache\"}}}",
                probe, repo);
        char *script = strdup_printf("python3 %s '%s' > \"$TASKFERRY_OUTPUT_DIR/replies.txt\" 2>&1; true", py, req);
        char *id = tf_shell_settled(w, repo, NULL, script, NULL);
        char *replies = tf_output_try_read(w, id, "replies.txt");
        ck_assert_msg(replies, "no replies");
        json_object *fr = tf_json(replies);
        json_object *res = json_get_object(fr, "result");
        ck_assert_msg(res, "dispatch refused: %s", replies);
        const char *nid = json_get_string(res, "id");
        ck_assert_msg(nid, "%s", replies);
        json_object_put(tf_wait_settled(w, nid));
        char *env = tf_output_try_read(w, nid, "env.txt");
        ck_assert_msg(env, "the nested worker wrote nothing");
        ck_assert_msg(!strstr(env, "/evil") && !strstr(env, "=evil"), "plumbing from a nested dispatch: %s", env);
        free(env), json_object_put(fr), free(replies), free(id), free(script), free(req), free(py), free(repo);
}
END_TEST

/* Attack: without a user manager (this host), a worker that setsid()s and
 * double-forks a sleeper, then is cancelled: does anything of it live on? */
TF_WORLD_TEST(cancel_leaves_no_setsid_grandchild) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_daemon_start(w);
        /* a sleep of a length no one else uses marks the worker's processes */
        char *mark = strdup_printf("sleep 9%d", (int) getpid());
        char *script = strdup_printf(
                "O=\"$TASKFERRY_OUTPUT_DIR\"; (setsid sh -c '(%s </dev/null >/dev/null 2>&1 &) ; "
                "%s' </dev/null >/dev/null 2>&1 &); sleep 0.5; : > \"$O/forked\"; sleep 300",
                mark, mark);
        char *id = tf_dispatch_shell(w, repo, NULL, script);
        ck_assert_msg(tf_wait_output(w, id, "forked", 15000), "the worker never forked");
        char *n0 = tf_shf(w, NULL, "pgrep -f -x -c '%s' || true", mark);
        ck_assert_msg(atoi(n0) >= 1, "no sleeper seen (%s)", n0);
        const char *c[] = {"cancel", id, NULL};
        tf_run r = tf_cli(w, NULL, NULL, c);
        tf_run_done(&r);
        json_object_put(tf_wait_settled(w, id));
        char *n1 = NULL;
        for (int i = 0; i < 50; i++) {
                free(n1);
                n1 = tf_shf(w, NULL, "pgrep -f -x -c '%s' || true", mark);
                if (atoi(n1) == 0) break;
                usleep(100 * 1000);
        }
        free(tf_shf(w, NULL, "pkill -KILL -f -x '%s' || true", mark)); /* our own marked sleepers, if any */
        ck_assert_msg(atoi(n1) == 0, "%s processes of the cancelled worker live on", n1);
        free(n1), free(n0), free(id), free(script), free(mark), free(repo);
}
END_TEST

/* Attack: from inside the sandbox, reach the daemon's or the shim's process:
 * read a variable the denylist keeps from workers (and an env-file value it
 * also keeps) through any /proc/<pid>/environ or cmdline the worker sees,
 * and write a forged log line to every fd it holds and to /proc/<pid>/fd/2
 * of every process it sees (the daemon's stderr is the journal). */
TF_WORLD_TEST(proc_and_fds_reach_no_daemon) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *p = tf_env_file(w, "FILEDENY=" SECRET "-file\n");
        tf_world_setenv(w, "TASKFERRY_ENV_DENYLIST", "DENYME,FILEDENY");
        tf_world_setenv(w, "DENYME", SECRET "-ambient");
        tf_daemon_start(w);
        const char *script =
                "O=\"$TASKFERRY_OUTPUT_DIR\"; "
                "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline /proc/[0-9]*/task/*/environ; do "
                "tr '\\0' '\\n' < $f 2>/dev/null; done > \"$O/proc.txt\"; "
                "env >> \"$O/proc.txt\"; "
                "for f in /proc/self/fd/* /proc/[0-9]*/fd/1 /proc/[0-9]*/fd/2 /dev/stderr /dev/console /dev/kmsg; do "
                "printf '\\ntaskferryd: error: FORGED-FD %s\\n<0>FORGED-FD\\n' \"$f\" > \"$f\" 2>/dev/null; done; "
                "ls -l /proc/[0-9]*/fd/ >> \"$O/fds.txt\" 2>&1; true";
        char *id = tf_shell_settled(w, repo, NULL, script, NULL);
        char *seen = tf_output_try_read(w, id, "proc.txt");
        ck_assert_msg(seen && strstr(seen, "TASKFERRY_TASK_ID="), "the probe read nothing: %s", strnull(seen));
        ck_assert_msg(!strstr(seen, SECRET), "the worker read a denied value: ...%.200s", strstr(seen, SECRET) - 40);
        usleep(300 * 1000);
        char *log = tf_daemon_log(w);
        ck_assert_msg(!strstr(log, "FORGED-FD"), "a worker wrote into the daemon's stderr:\n%s", log);
        ck_assert_int_gt(tf_daemon_pid(w), 0);
        free(log), free(seen), free(id), free(p), free(repo);
}
END_TEST

/* ---- the D-Bus API on a private dbus-daemon (as test-bus.c) ---- */

#define NAME TF_BUS_NAME
#define MPATH TF_BUS_MPATH
#define MIFACE TF_BUS_MIFACE
#define TIFACE TF_BUS_TIFACE

/* Hole found (fixed in bus.c task_find/task_enumerate): with the bus bound
 * into a sandbox, ListTasks and CancelTask kept to the peer rules (a worker
 * knows only its own task tree), but the per-task objects did not: a worker
 * read every property of the user's other tasks (Directory, LogPath, Model,
 * FailureDetail ...) with Get/GetAll, saw them in `busctl tree`, introspect
 * and GetManagedObjects. The objects a sandboxed caller may not see are now
 * unknown to it, as on the socket. Odd object paths under the task prefix
 * (undecodable, overlong, escaped dots) are unknown objects and the daemon
 * carries on. */
TF_BUS_TEST(bus_objects_keep_the_peer_rules) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *other = strdup(tf_path(w->repo_parent, "other-secret-project"));
        free(tf_shf(w, NULL, "mkdir -p %s", other));
        tf_daemon_start(w);
        ck_assert_msg(tf_wait_until(tf_bus_name_up, w, NULL, 20000), "the daemon never took " NAME);
        char *victim = tf_dispatch_shell(w, other, NULL, "sleep 120");
        ck_assert(tf_wait_status(w, victim, "running", 30000));
        char *pv = tf_bus_task_path(victim);
        char *busdir = strdup(tf_path(w->root, "bus"));
        char *longp = calloc(1, 4000);
        strcpy(longp, MPATH "/task/");
        for (size_t i = strlen(longp); i < 3000; i++) longp[i] = 'a';
        char *script = strdup_printf(
                "B='busctl --address=unix:path=%s'; "
                "$B get-property " NAME " %s " TIFACE " Directory 2>&1; echo get=$?; "
                "$B call " NAME " %s org.freedesktop.DBus.Properties GetAll s " TIFACE " 2>&1; echo getall=$?; "
                "$B introspect " NAME " %s 2>&1; echo intro=$?; "
                "echo tree=$($B tree --list " NAME " 2>&1 | grep -c -e %s -e %s); "
                "echo gmo=$($B call " NAME " " MPATH " org.freedesktop.DBus.ObjectManager GetManagedObjects 2>&1 | "
                "grep -c -e %s -e %s); "
                "for p in " MPATH "/task/_ " MPATH "/task/_zz " MPATH "/task/_2e_2e " MPATH "/task/a_2fb "
                MPATH "/task/x/y %s; do $B introspect " NAME " $p >/dev/null 2>&1; "
                "$B get-property " NAME " $p " TIFACE " Status >/dev/null 2>&1; done; "
                "echo own=$($B tree --list " NAME " | grep -c \"$(echo $TASKFERRY_TASK_ID | sed 's/_/_5f/g')\"); "
                "$B get-property " NAME " " MPATH " " MIFACE " Version; echo alive=$?",
                b->socket, pv, pv, pv, victim, strrchr(pv, '/') + 1, victim, strrchr(pv, '/') + 1, longp);
        const char *bind[] = {"--rw-bind", busdir, NULL};
        char *wid = tf_shell_settled(w, repo, bind, script, NULL);
        char *msg = tf_task_message(w, wid);
        fprintf(stderr, "the worker's bus view:\n%s\n", msg);
        ck_assert_msg(strstr(msg, "alive=0"), "the worker never reached the bus (output above)");
        ck_assert_msg(!strstr(msg, "other-secret-project"), "the worker read another task's properties (output above)");
        ck_assert_msg(strstr(msg, "get=1\n") && strstr(msg, "getall=1\n") && !strstr(msg, "intro=0\n") &&
                              !strstr(msg, "\"Status\"") && strstr(msg, "tree=0\n") && strstr(msg, "gmo=0\n") && strstr(msg, "own=1\n"),
                      "the worker saw another task on the bus (output above)");
        /* the daemon carries on; the user still sees the task */
        ck_assert_int_gt(tf_daemon_pid(w), 0);
        _cleanup_free_ char *d = tf_shf(w, NULL, "busctl --user get-property " NAME " %s " TIFACE " Directory", pv);
        ck_assert_msg(strstr(d, "other-secret-project"), "%s", d);
        const char *c[] = {"cancel", victim, NULL};
        tf_run r = tf_cli(w, NULL, NULL, c);
        tf_run_done(&r);
        json_object_put(tf_wait_settled(w, victim));
        free(msg), free(wid), free(script), free(longp), free(busdir), free(pv), free(victim), free(other), free(repo);
}
END_TEST


/* ---- second round: error paths, edge values, idle exit ---- */

#define LEAK "sk-attack8b-7c1e04aa93"

/* Attack (local input): env-file rewrites that fail to parse, each carrying a
 * value: a malformed line after a good one, a huge value, invalid UTF-8, a
 * value with "\n<0>" in it, a line with no '='; then the file swapped for a
 * symlink to another 0600 file of the user's (shadow-like lines). No value,
 * nor the target's content, may reach the daemon's log, a CLI's output or
 * tasks.json; the last good value stays. */
TF_WORLD_TEST(env_file_errors_leak_no_value) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *p = tf_env_file(w, "K=good-value\n");
        tf_daemon_start(w);
        char *big = malloc(70000);
        memset(big, 'Q', 69999);
        big[69999] = 0;
        memcpy(big + 30000, LEAK "-huge", strlen(LEAK "-huge"));
        char *bad[] = {
                strdup("K=" LEAK "-a\n" LEAK "-noeq\n"),
                strdup("K=ok\nbad name=" LEAK "-b\n"),
                strdup_printf("K=ok\nH=%s\n" LEAK "-after-huge\n", big),
                strdup("K=ok\nU=\xff\xfe" LEAK "-utf8\xc0\n" "V=\"" LEAK "-unterminated\n"),
                strdup("K=\"x\n<0>taskferryd: error: " LEAK "-nl\n"),
                strdup("root:$6$" LEAK "-shadow:19000:0:99999:7:::\n"),
        };
        char *tmp = strdup_printf("%s.tmp", p);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *before = tf_daemon_log(w);
                log_wait lw = {"env file reload failed", 1};
                lw.want += tf_count(before, lw.needle);
                tf_write(tmp, bad[i], strlen(bad[i]), 0600);
                ck_assert_int_eq(rename(tmp, p), 0);
                ck_assert_msg(tf_wait_until(pred_log, w, &lw, 10000), "no reload failure logged for case %zu", i);
        }
        /* a symlink to another private file of the user's, then back */
        char *other = strdup_printf("%s/private-notes", w->home);
        const char notes[] = "root:$6$" LEAK "-link:19000:0:99999:7:::\nline two " LEAK "-link2\n";
        tf_write(other, notes, strlen(notes), 0600);
        {
                _cleanup_free_ char *before = tf_daemon_log(w);
                log_wait lw = {"env file reload failed", 1};
                lw.want += tf_count(before, lw.needle);
                ck_assert_int_eq(symlink(other, tmp), 0);
                ck_assert_int_eq(rename(tmp, p), 0);
                ck_assert_msg(tf_wait_until(pred_log, w, &lw, 10000), "no reload failure for the symlink");
        }
        char *id = tf_shell_settled(w, repo, NULL, "echo K=$K", NULL);
        char *msg = tf_task_message(w, id);
        ck_assert_msg(strstr(msg, "K=good-value"), "the last good value is gone: %s", msg);
        const char *cmds[][4] = {{"list", NULL}, {"doctor", NULL}, {"status", id, "--full", NULL}};
        for (size_t i = 0; i < ELEMENTSOF(cmds); i++) {
                tf_run r = tf_cli(w, NULL, NULL, cmds[i]);
                ck_assert_msg(!strstr(strempty(r.out), LEAK) && !strstr(strempty(r.err), LEAK), "`%s` shows a value: %s%s",
                              cmds[i][0], strempty(r.out), strempty(r.err));
                tf_run_done(&r);
        }
        ck_assert_int_gt(tf_daemon_pid(w), 0);
        char *log = tf_daemon_log(w);
        const char *hit = strstr(log, LEAK);
        ck_assert_msg(!hit, "a value reached the daemon's log: ...%.120s", hit ? hit - 60 : "");
        char *tj = strdup_printf("%s/tasks.json", w->state);
        char *tasks = tf_read(tj, NULL);
        ck_assert_msg(!strstr(tasks, LEAK), "a value reached tasks.json");
        _cleanup_free_ char *jp = strdup_printf("%s/tasks.journal", w->state);
        if (tf_exists(jp)) {
                _cleanup_free_ char *journal = tf_read(jp, NULL);
                ck_assert_msg(!strstr(journal, LEAK), "a value reached tasks.journal");
        }
        char *be = strdup_printf("%s/daemon-boot.err", w->run);
        if (tf_exists(be)) {
                char *e = tf_read(be, NULL);
                ck_assert_msg(!strstr(e, LEAK), "a value reached daemon-boot.err");
                free(e);
        }
        free(be), free(tasks), free(tj), free(log), free(msg), free(id), free(other), free(tmp);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) free(bad[i]);
        free(big), free(p), free(repo);
}
END_TEST

/* Attack: a worker's nested dispatches with memoryMax/tasksMax at the edges
 * (2^63-1, 2^64, -1, 0, 1.5, "8M", 8M exactly, 1e300, nested objects): the
 * daemon answers each (a result or an error), never crashes, and no nested
 * task ends up with a limit above its parent's. */
TF_WORLD_TEST(scope_limits_at_the_edges) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_daemon_start(w);
        pid_t pid0 = tf_daemon_pid(w);
        char *py = tf_write_peer(w);
        static const char *const vals[] = {"9223372036854775807", "18446744073709551616", "18446744073709551615",
                                           "-1", "0", "1.5", "\"8M\"", "8388608", "8388607", "1e300", "-1e300",
                                           "{}", "[8388608]", "true", "null", "9223372036854775808",
                                           "-9223372036854775808"};
        char *args = strdup("");
        size_t nreq = 0;
        for (size_t i = 0; i < ELEMENTSOF(vals); i++)
                for (int k = 0; k < 2; k++) {
                        char *a = strdup_printf(
                                "%s '{\"method\":\"task.dispatch\",\"params\":{\"executor\":\"shell\",\"prompt\":\"true\","
                                "\"directory\":\"%s\",\"%s\":%s}}'",
                                args, repo, k ? "tasksMax" : "memoryMax", vals[i]);
                        free(args), args = a, nreq++;
                }
        char *script = strdup_printf("python3 %s %s > \"$TASKFERRY_OUTPUT_DIR/replies.txt\" 2>&1; true", py, args);
        const char *lim[] = {"--memory-max", "64M", "--tasks-max", "64", NULL};
        char *id = tf_shell_settled(w, repo, lim, script, NULL);
        char *replies = tf_output_try_read(w, id, "replies.txt");
        ck_assert_msg(replies, "no replies");
        fprintf(stderr, "replies:\n%s\n", replies);
        ck_assert_msg(!strstr(replies, "EOF") && !strstr(replies, "Traceback"), "a request went unanswered:\n%s", replies);
        ck_assert_uint_eq(tf_count(replies, "\n"), nreq);
        ck_assert_int_eq(tf_daemon_pid(w), pid0);
        /* every nested task that was created keeps within its parent's limits */
        _cleanup_json_ json_object *frames = tf_json_lines(replies);
        for (size_t i = 0; i < json_object_array_length(frames); i++) {
                const char *nid = json_get_string(json_get_object(json_object_array_get_idx(frames, i), "result"), "id");
                if (!nid) continue;
                json_object *st = tf_wait_settled(w, nid);
                int64_t mm = 0, tm = 0;
                if (json_get_int64(st, "memoryMax", &mm))
                        ck_assert_msg(mm > 0 && mm <= 64 << 20, "%s memoryMax %" PRId64, nid, mm);
                if (json_get_int64(st, "tasksMax", &tm)) ck_assert_msg(tm > 0 && tm <= 64, "%s tasksMax %" PRId64, nid, tm);
                json_object_put(st);
        }
        ck_assert_int_eq(tf_daemon_pid(w), pid0);
        free(replies), free(id), free(script), free(args), free(py), free(repo);
}
END_TEST

/* ---- idle exit under fake socket activation (as test-systemd-notify.c) ---- */


/* Attack: make a socket-activated daemon (idle exit 1 s) exit while work is
 * left: the worker's nested dispatches (one refused, one queued behind a
 * sleeping one), its task socket closed early, a cancel whose grace runs,
 * a worker leaving a changeset to extract. Whenever the daemon exits, every
 * task in tasks.json must be settled (no queued/running) and the next
 * daemon must see them so. */
TF_WORLD_TEST_ENV(idle_exit_leaves_no_task_unsettled, "TASKFERRY_IDLE_EXIT_SEC=1") {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *py = tf_write_peer(w);
        int lfd = tf_activation_socket(w);
        pid_t pid = tf_daemon_start_activated(w, lfd);
        /* nested: a refused one, then one that sleeps and one more; the
         * worker closes its socket and exits before they finish */
        char *req = strdup_printf(
                "'{\"method\":\"task.dispatch\",\"params\":{\"executor\":\"shell\",\"prompt\":\"true\",\"directory\":\"/nonexistent\"}}' "
                "'{\"method\":\"task.dispatch\",\"params\":{\"executor\":\"shell\",\"prompt\":\"sleep 3; echo x > n1\",\"directory\":\"%s\"}}' "
                "'{\"method\":\"task.dispatch\",\"params\":{\"executor\":\"shell\",\"prompt\":\"trap \\\"\\\" TERM; sleep 3; echo y > n2\",\"directory\":\"%s\"}}'",
                repo, repo);
        char *script = strdup_printf("python3 %s %s > \"$TASKFERRY_OUTPUT_DIR/replies.txt\" 2>&1; "
                                     "dd if=/dev/urandom of=big bs=1M count=20 2>/dev/null; true",
                                     py, req);
        char *id = tf_shell_settled(w, repo, NULL, script, NULL);
        char *replies = tf_output_try_read(w, id, "replies.txt");
        fprintf(stderr, "replies:\n%s\n", strnull(replies));
        /* cancel the trap-TERM one (its grace keeps it running a while) */
        char *ids[2] = {NULL, NULL};
        size_t ni = 0;
        for (const char *l = replies; l && *l && ni < 2;) {
                size_t n = strcspn(l, "\n");
                _cleanup_free_ char *line = strndup(l, n);
                json_object *fr = tf_json(line);
                const char *nid = json_get_string(json_get_object(fr, "result"), "id");
                if (nid) ids[ni++] = strdup(nid);
                json_object_put(fr);
                l += n;
                if (*l) l++;
        }
        ck_assert_msg(ni == 2, "nested dispatches: %s", strnull(replies));
        const char *c[] = {"cancel", ids[1], NULL};
        tf_run r = tf_cli(w, NULL, NULL, c);
        tf_run_done(&r);
        /* now leave it alone: it may exit only when all is settled */
        int st = tf_wait_exit(pid, 30000);
        ck_assert_msg(st != -1, "the daemon never idled out");
        w->daemon_pid = 0;
        char *tj = strdup_printf("%s/tasks.json", w->state);
        char *tasks = tf_read(tj, NULL);
        ck_assert_msg(!strstr(tasks, "\"status\":\"queued\"") && !strstr(tasks, "\"status\":\"running\"") &&
                              !strstr(tasks, "\"status\": \"queued\"") && !strstr(tasks, "\"status\": \"running\""),
                      "the daemon exited with a task unsettled:\n%s", tasks);
        /* the next daemon on the same socket sees them settled */
        pid = tf_daemon_start_activated(w, lfd);
        for (size_t i = 0; i < 2; i++) {
                json_object *o = tf_wait_settled(w, ids[i]);
                fprintf(stderr, "%s: %s\n", ids[i], tf_jstr(o, "status"));
                json_object_put(o);
        }
        json_object *o = tf_wait_settled(w, id);
        ck_assert_str_eq(tf_jstr(o, "status"), "done");
        json_object_put(o);
        st = tf_wait_exit(pid, 10000);
        ck_assert(st != -1);
        w->daemon_pid = 0;
        close(lfd);
        free(tasks), free(tj), free(ids[0]), free(ids[1]), free(replies), free(id), free(script), free(req), free(py), free(repo);
}
END_TEST

/* Attack (bus bound in, as above): CancelTask with ids of odd shapes (another
 * user's-looking id, 100 KiB, path-ish, escapes), GetAll on the manager, a
 * call with a wrong signature; the daemon answers each and carries on. */
TF_BUS_TEST(bus_odd_calls_from_a_worker) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_daemon_start(w);
        pid_t pid0 = tf_daemon_pid(w);
        ck_assert_msg(tf_wait_until(tf_bus_name_up, w, NULL, 20000), "the daemon never took " NAME);
        char *busdir = strdup(tf_path(w->root, "bus"));
        char *script = strdup_printf(
                "B='busctl --address=unix:path=%s'; "
                "L=$(head -c 100000 /dev/zero | tr '\\\\0' a); "
                "for id in 'root-1700000000-abcd' \"$L\" '../../etc' '%%s%%n' '' ' ' 'a/b' \"$TASKFERRY_TASK_ID\"x; do "
                "$B call " NAME " " MPATH " " MIFACE " CancelTask s \"$id\" >/dev/null 2>&1; echo c=$?; done; "
                "$B call " NAME " " MPATH " org.freedesktop.DBus.Properties GetAll s " MIFACE " 2>&1 | head -c 2000; echo; "
                "$B call " NAME " " MPATH " " MIFACE " CancelTask i 5 2>&1; echo wrong=$?; "
                "$B call " NAME " " MPATH " " MIFACE " ListTasks 2>&1 | head -c 300; echo; "
                "$B get-property " NAME " " MPATH " " MIFACE " Version; echo alive=$?",
                b->socket);
        const char *bind[] = {"--rw-bind", busdir, NULL};
        char *wid = tf_shell_settled(w, repo, bind, script, NULL);
        char *msg = tf_task_message(w, wid);
        fprintf(stderr, "the worker's bus calls:\n%s\n", msg);
        ck_assert_msg(strstr(msg, "alive=0"), "the daemon stopped answering on the bus (output above)");
        ck_assert_msg(!strstr(msg, "c=0"), "a CancelTask of an odd id succeeded (output above)");
        ck_assert_int_eq(tf_daemon_pid(w), pid0);
        free(msg), free(wid), free(script), free(busdir), free(repo);
}
END_TEST

/* Hole found (fixed in cli-job.c, read_prompt_file): a job's prompt_file in
 * a directory the user binds rw into workers. A worker replaced it with a
 * symlink to the env file (whose directory the sandbox masks: it only writes
 * the link's text, the host path). The next `taskferry job run` — a timer,
 * unattended — read the env file through the link on the host and sent its
 * content as the prompt: the secret landed in the task's prompt (tasks.json,
 * status, and the next worker's input, a model provider's for an agent).
 * A prompt_file that is a symlink is now refused. */
TF_WORLD_TEST(job_prompt_file_swapped_for_a_symlink) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *cfg = strdup_printf("%s/.config/taskferry", w->home);
        char *jobs = strdup_printf("%s/jobs", cfg);
        ck_assert_int_eq(mkdir_p(jobs, 0700), 0);
        char *envp = tf_env_file(w, "K=" LEAK "-jobenv\n");
        char *shared = strdup(tf_path(w->repo_parent, "shared"));
        ck_assert_int_eq(mkdir_p(shared, 0700), 0);
        char *pf = strdup_printf("%s/prompt.sh", shared);
        tf_write(pf, "echo nightly\n", 13, 0600);
        char *job = strdup_printf("directory = '%s'\nexecutor = 'shell'\nprompt_file = '%s'\n", repo, pf);
        char *jf = strdup_printf("%s/nightly.toml", jobs);
        tf_write(jf, job, strlen(job), 0600);
        tf_daemon_start(w);
        /* the hostile worker, with the shared dir bound rw as the user asked */
        char *script = strdup_printf("rm -f '%s' && ln -s '%s' '%s'; ls -l '%s'", pf, envp, pf, shared);
        const char *bind[] = {"--rw-bind", shared, NULL};
        char *wid = tf_shell_settled(w, repo, bind, script, NULL);
        char *msg = tf_task_message(w, wid);
        fprintf(stderr, "worker: %s\n", msg);
        struct stat st;
        ck_assert_msg(lstat(pf, &st) == 0 && S_ISLNK(st.st_mode), "the worker could not swap the prompt file");
        /* the timer fires */
        tf_run r = tf_cli_minimal(w, 30, "", "job run nightly");
        fprintf(stderr, "job run: exit %d\n%s%s\n", r.exit_code, strempty(r.out), strempty(r.err));
        ck_assert_msg(!strstr(strempty(r.out), LEAK) && !strstr(strempty(r.err), LEAK), "job run echoed the secret");
        tf_run_done(&r);
        /* settle whatever it dispatched, then look for the secret everywhere */
        const char *l[] = {"list", "--json", NULL};
        tf_run lr = tf_cli(w, NULL, NULL, l);
        tf_run_done(&lr);
        usleep(500 * 1000);
        char *hits = tf_shf(w, NULL, "grep -rl -- '%s' '%s' 2>/dev/null | grep -v '/env$' || true", LEAK, w->state);
        ck_assert_msg(isempty(hits) || !strchr(hits, '/'), "the env file's secret reached the daemon's state: %s", hits);
        free(hits), free(msg), free(wid), free(script), free(jf), free(job), free(pf), free(shared), free(envp), free(jobs),
                free(cfg), free(repo);
}
END_TEST

/* Attack (local input, or a worker that can write into the jobs dir through
 * a careless rw bind): `job list` over 10,000 job files and a fifo named
 * x.toml, and `job run` of hostile job files (a BOM, CRLF, \u0000 in a basic
 * string, a 1 MiB string, a 100,000-deep array, a 200,000-element array):
 * each ends within the timeout with a clean exit, and no error repeats the
 * value it refused. Hole found (fixed in job-file.c): the wide array took
 * 20 s of CPU to parse; a job file is read in seconds at most now. */
TF_WORLD_TEST(hostile_job_files_and_dirs) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *jobs = strdup_printf("%s/.config/taskferry/jobs", w->home);
        ck_assert_int_eq(mkdir_p(jobs, 0700), 0);
        tf_daemon_start(w);
        free(tf_shf(w, NULL,
                    "cd '%s' && mkfifo x.toml && i=0; while [ $i -lt 10000 ]; do "
                    "printf \"directory = '%s'\\nexecutor = 'shell'\\nprompt = 'true'\\n\" > j$i.toml; i=$((i+1)); done",
                    jobs, repo));
        /* hostile files; LEAK marks a value that must not be echoed */
        char *mib = malloc((1 << 20) + 64);
        memset(mib, 'A', 1 << 20);
        memcpy(mib + 1000, LEAK, strlen(LEAK));
        mib[(1 << 20)] = 0;
        struct {
                const char *name;
                char *text;
        } bad[] = {
                {"bom", strdup_printf("\xef\xbb\xbf" "directory = '%s'\nexecutor = 'shell'\nprompt = '" LEAK "'\n", repo)},
                {"crlf", strdup_printf("directory = '%s'\r\nexecutor = 'shell'\r\nprompt = \"" LEAK "\\u0000x\"\r\n", repo)},
                {"nul", strdup_printf("directory = '%s'\nexecutor = 'shell'\nprompt = \"" LEAK "\\u0000x\"\n", repo)},
                {"huge", strdup_printf("directory = '%s'\nexecutor = 'shell'\nprompt = \"%s\n", repo, mib)},
                {"deep", NULL},
                {"wide", NULL},
                {"ctl", strdup_printf("directory = '%s'\nexecutor = 'shell'\nprompt = \"" LEAK "\x1b[2J\"\nmodel = 1\n", repo)},
        };
        {
                size_t n = 100000;
                char *d = malloc(2 * n + 64), *q = d;
                q = stpcpy(q, "rw_bind = ");
                for (size_t i = 0; i < n; i++) *q++ = '[';
                for (size_t i = 0; i < n; i++) *q++ = ']';
                strcpy(q, "\n");
                bad[4].text = d;
                char *wd = malloc(200000 * 6 + 64);
                q = stpcpy(wd, "ro_bind = [");
                for (size_t i = 0; i < 200000; i++) q = stpcpy(q, "'/a',");
                strcpy(q, "]\n");
                bad[5].text = wd;
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                char *p = strdup_printf("%s/%s.toml", jobs, bad[i].name);
                tf_write(p, bad[i].text, strlen(bad[i].text), 0600);
                free(p);
        }
        uint64_t t0 = mono_ms();
        tf_run r = tf_cli_minimal(w, 60, "", "job list");
        fprintf(stderr, "job list over 10,000 files and a fifo: exit %d in %" PRIu64 " ms, %zu bytes out\n",
                r.exit_code, mono_ms() - t0, strlen(strempty(r.out)));
        ck_assert_msg(r.exit_code == 0, "job list: exit %d: %.500s", r.exit_code, strempty(r.err));
        ck_assert_msg(strstr(strempty(r.out), "j9999"), "job list misses a job");
        ck_assert_msg(!strstr(strempty(r.out), LEAK) && !strstr(strempty(r.err), LEAK), "job list shows a value");
        tf_run_done(&r);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *args = strdup_printf("job run %s", bad[i].name);
                t0 = mono_ms();
                r = tf_cli_minimal(w, 60, "", args);
                fprintf(stderr, "job run %s: exit %d in %" PRIu64 " ms: %.300s\n", bad[i].name, r.exit_code,
                        mono_ms() - t0, strempty(r.err));
                ck_assert_msg(r.exit_code == 0 || r.exit_code == 1, "job run %s: exit %d", bad[i].name, r.exit_code);
                /* a hole found (fixed in job-file.c): a 200,000-entry ro_bind
                 * took 20 s of CPU (strv_consume per entry, O(n^2)) */
                ck_assert_msg(mono_ms() - t0 < 10000, "job run %s took %" PRIu64 " ms", bad[i].name, mono_ms() - t0);
                ck_assert_msg(!strstr(strempty(r.err), LEAK) && (r.exit_code == 0 || !strstr(strempty(r.out), LEAK)),
                              "job run %s echoed the value", bad[i].name);
                tf_run_done(&r);
        }
        r = tf_cli_minimal(w, 60, "", "job run x");
        ck_assert_msg(r.exit_code == 1, "job run of a fifo: exit %d", r.exit_code);
        tf_run_done(&r);
        ck_assert_int_gt(tf_daemon_pid(w), 0);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) free(bad[i].text);
        free(mib), free(jobs), free(repo);
}
END_TEST

/* Hole found (fixed in handlers.c dispatch_create): a sandboxed worker may
 * not dispatch with binds at all, but the refusal came after the daemon had
 * resolved every bind entry and logged a deny-list warning for each one
 * inside ~/.ssh: one nested dispatch of 1 MiB (15,000 entries) wrote 15,000
 * lines into the daemon's log — under systemd, enough to hit journald's rate
 * limit and have the daemon's own messages dropped — and kept the loop busy
 * resolving them. The refusal now comes before the binds are looked at. */
static const char *const flood_py =
        "import json, os, socket, sys\n"
        "home = sys.argv[1]; n = int(sys.argv[2])\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(os.environ['TASKFERRY_SOCKET_PATH']); s.settimeout(60)\n"
        "f = s.makefile('rb')\n"
        "for r in range(3):\n"
        "    binds = ['%s/.ssh/k%d-%d' % (home, r, i) for i in range(n)]\n"
        "    req = {'version': 1, 'id': 'f%d' % r, 'method': 'task.dispatch', 'params': {'executor': 'shell',\n"
        "           'prompt': 'true', 'directory': os.getcwd(), 'roBind': binds}}\n"
        "    s.sendall((json.dumps(req) + '\\n').encode())\n"
        "    print(f.readline().decode()[:300].strip())\n";

TF_WORLD_TEST(nested_binds_flood_no_log) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *ssh = strdup_printf("%s/.ssh", w->home);
        ck_assert_int_eq(mkdir_p(ssh, 0700), 0);
        tf_daemon_start(w);
        char *py = strdup(tf_path(w->fixtures, "flood.py"));
        tf_write(py, flood_py, strlen(flood_py), 0644);
        _cleanup_free_ char *before = tf_daemon_log(w);
        size_t lines0 = tf_count(before, "\n");
        char *cmd = strdup_printf("python3 %s '%s' 15000", py, w->home);
        char *log = log_after_replies(w, repo, cmd, "cannot dispatch with roBind", "not refused");
        size_t lines1 = tf_count(log, "\n");
        fprintf(stderr, "daemon log lines: %zu before, %zu after\n", lines0, lines1);
        ck_assert_msg(lines1 - lines0 < 200, "a worker's refused dispatches wrote %zu lines into the daemon's log",
                      lines1 - lines0);
        ck_assert_int_gt(tf_daemon_pid(w), 0);
        free(log), free(cmd), free(py), free(ssh), free(repo);
}
END_TEST

int main(void) {
        return tf_run_tests("attack-systemd", "attack-systemd", 300,
                            TF_TESTS(worker_text_forges_no_log_line, env_file_rotation_stays_masked,
                                     nested_env_carries_no_plumbing, cancel_leaves_no_setsid_grandchild,
                                     bus_objects_keep_the_peer_rules, proc_and_fds_reach_no_daemon,
                                     env_file_errors_leak_no_value, scope_limits_at_the_edges,
                                     idle_exit_leaves_no_task_unsettled, bus_odd_calls_from_a_worker,
                                     job_prompt_file_swapped_for_a_symlink, hostile_job_files_and_dirs,
                                     nested_binds_flood_no_log));
}
