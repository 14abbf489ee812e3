/* What a worker can do to the daemon from inside its sandbox (a peer inside a
 * task sandbox cannot accept, reject or cancel tasks it did not start, though
 * the runtime dir is visible to it), and which dispatch
 * directories are refused because they would unmask what every sandbox hides. */

#include <check.h>
#include <dirent.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <inttypes.h>
#include <sys/resource.h>
#include <sys/un.h>

#include "harness.h"
#include "json-util.h"
#include "protocol.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

static const char *status_of(tf_world *w, const char *id, char buf[static 64]) {
        const char *argv[] = {"status", id, "--full", "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        json_object *o = tf_json(r.out);
        snprintf(buf, 64, "%s/%s", strempty(tf_jstr(o, "status")), strempty(tf_jstr(o, "changesetStatus")));
        json_object_put(o);
        tf_run_done(&r);
        return buf;
}

TF_WORLD_TEST(worker_cannot_decide_for_the_user) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *a = tf_shell_settled(w, repo, NULL, "echo changed > f", NULL);
        char *l = tf_dispatch_shell(w, repo, NULL, "sleep 60");
        char *escaped = strdup(tf_path(w->root, "escaped"));
        char *script = strdup_printf(
                "taskferry status %s >/dev/null; echo status=$?; "
                "taskferry list --all --json | grep -o '\"id\":\"oc_[a-z0-9_]*\"' | sort -u | wc -l | sed 's/^/listed=/'; "
                "taskferry accept %s >/dev/null; echo accept=$?; "
                "taskferry reject %s >/dev/null; echo reject=$?; "
                "taskferry cancel %s >/dev/null; echo cancel=$?; "
                "taskferry dispatch --executor shell --no-sandbox --directory %s --prompt 'touch %s' >/dev/null; echo nosandbox=$?; "
                "taskferry dispatch --executor shell --rw-bind /var/tmp --directory %s --prompt 'true' >/dev/null; echo rwbind=$?; "
                "child=$(taskferry dispatch --executor shell --directory %s --prompt 'sleep 60' | sed -n 's/^id: //p'); "
                "echo child=$child; taskferry cancel $child >/dev/null; echo own-cancel=$?",
                a, a, a, l, repo, escaped, repo, repo);
        char *msg = tf_shell_done_output(w, repo, NULL, script, NULL);
        ck_assert_msg(strstr(msg, "accept=1\n") && strstr(msg, "reject=1\n") && strstr(msg, "cancel=1\n") &&
                              strstr(msg, "nosandbox=1\n") && strstr(msg, "rwbind=1\n") && strstr(msg, "own-cancel=0\n") &&
                              strstr(msg, "status=1\n") && strstr(msg, "listed=1\n"),
                      "worker output: %s", msg);
        ck_assert_msg(strstr(msg, "child=oc_"), "nested dispatch failed: %s", msg);
        free(msg);
        char buf[64];
        ck_assert_str_eq(status_of(w, a, buf), "done/pending");
        ck_assert_str_eq(status_of(w, l, buf), "running/pending");
        ck_assert(!tf_exists(escaped));
        char *f = tf_read(tf_path(repo, "f"), NULL);
        ck_assert_str_eq(f, "base\n");
        free(f);
        /* the user, outside every sandbox, still decides */
        const char *c[] = {"cancel", l, NULL};
        tf_run r = tf_cli(w, NULL, NULL, c);
        ck_assert_int_eq(r.exit_code, 0);
        tf_run_done(&r);
        const char *acc[] = {"accept", a, NULL};
        r = tf_cli(w, NULL, NULL, acc);
        ck_assert_int_eq(r.exit_code, 0);
        tf_run_done(&r);
        json_object_put(tf_wait_settled(w, l));
        free(a), free(l), free(script), free(escaped), free(repo);
}
END_TEST

TF_WORLD_TEST(directories_that_would_unmask_are_refused) {
        free(tf_shf(w, NULL, "mkdir -p %s/.ssh && echo SECRETKEY > %s/.ssh/id && mkdir -p %s", w->home, w->home, w->state));
        const char *refused[] = {w->root, w->state, "/", NULL};
        for (size_t i = 0; refused[i]; i++) {
                const char *d[] = {"dispatch", "--executor", "shell", "--directory", refused[i], "--prompt", "true", NULL};
                tf_run r = tf_cli(w, NULL, NULL, d);
                ck_assert_msg(r.exit_code == 1 && strstr(r.out, "overlaps"), "%s: %d %s", refused[i], r.exit_code, r.out);
                tf_run_done(&r);
        }
        char *ssh = strdup(tf_path(w->home, ".ssh"));
        const char *d[] = {"dispatch", "--executor", "shell", "--directory", ssh, "--prompt", "true", NULL};
        tf_run r = tf_cli(w, NULL, NULL, d);
        ck_assert_msg(r.exit_code == 1 && strstr(r.out, "masked in every sandbox"), "%s", r.out);
        tf_run_done(&r);
        /* a directory that contains a masked dir: allowed, and the mask holds */
        char *msg = tf_shell_output(w, w->home, NULL, "cat .ssh/id 2>&1; ls -A .ssh | wc -l", NULL);
        ck_assert_msg(!strstr(msg, "SECRETKEY"), "secret leaked: %s", msg);
        ck_assert_msg(strstr(msg, "\n0\n"), "mask missing: %s", msg);
        free(msg), free(ssh);
}
END_TEST

/* The caller's environment reaches the worker inside the sandbox, but never
 * bwrap on the host: a forwarded LD_PRELOAD would run the caller's code there. */
TF_WORLD_TEST(caller_env_reaches_the_worker_not_bwrap) {
        char *so = strdup(tf_path(w->root, "probe.so"));
        char *marker = strdup(tf_path(w->root, "bwrap-ran-preload"));
        const char *code =
                "#include <fcntl.h>\n#include <stdlib.h>\n#include <string.h>\n#include <unistd.h>\n"
                "__attribute__((constructor)) static void probe(void) {\n"
                "  char exe[4096]; ssize_t n = readlink(\"/proc/self/exe\", exe, sizeof exe - 1);\n"
                "  if (n <= 0) return; exe[n] = 0; const char *b = strrchr(exe, '/');\n"
                "  const char *m = getenv(\"PROBE_MARKER\");\n"
                "  if (m && b && strcmp(b + 1, \"bwrap\") == 0) { int fd = open(m, O_WRONLY|O_CREAT, 0600); if (fd >= 0) close(fd); }\n"
                "}\n";
        tf_cc(w, "probe", code, so, true);
        /* start the daemon first, without the variables (it would inherit them) */
        const char *warm[] = {"list", "--all", NULL};
        tf_run wr = tf_cli(w, NULL, NULL, warm);
        ck_assert_int_eq(wr.exit_code, 0);
        tf_run_done(&wr);
        /* the caller's environment as the CLI forwards it (task.dispatch env), sent
         * over the wire directly: an LD_PRELOAD in the test's own CLI process
         * would also load into it (and break an ASan build) */
        json_object *params = json_object_new_object(), *env = json_object_new_object();
        json_add_string(env, "LD_PRELOAD", so);
        json_add_string(env, "PROBE_MARKER", marker);
        json_add_string(env, "FOO_FROM_CALLER", "caller value with spaces");
        json_add_string(params, "prompt", "echo \"foo=$FOO_FROM_CALLER child=$TASKFERRY_CHILD\"");
        json_add_string(params, "directory", w->repo_parent);
        json_add_string(params, "executor", "shell");
        json_add(params, "env", env);
        json_object *f = tf_rpc(w, "task.dispatch", json_to_line(params, NULL));
        char *id = strdup(tf_jstr(tf_result(f), "id"));
        json_object_put(f);
        json_object_put(params);
        char *ld = NULL;
        json_object *st = tf_wait_settled(w, id);
        ck_assert_str_eq(tf_jstr(st, "status"), "done");
        json_object_put(st);
        char *msg = tf_task_message(w, id);
        ck_assert_str_eq(msg, "foo=caller value with spaces child=1\n");
        free(msg);
        ck_assert_msg(!tf_exists(marker), "the caller's LD_PRELOAD ran in bwrap on the host");
        /* and no environment value is on bwrap's command line: the shim passes it via --args */
        free(ld), free(id), free(so), free(marker);
}
END_TEST

/* Second review: the connecting process exits before the request is sent,
 * so /proc has nothing left to look at. The request must still be refused:
 * the connection came through the task's own socket. */
TF_WORLD_TEST(orphaned_connection_is_still_sandboxed) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *bin = strdup(tf_path(w->fixtures, "bin/orphan-request"));
        const char *code =
                "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <unistd.h>\n"
                "#include <sys/socket.h>\n#include <sys/un.h>\n"
                "int main(int argc, char **argv) {\n"
                "  struct sockaddr_un sa = {.sun_family = AF_UNIX};\n"
                "  snprintf(sa.sun_path, sizeof sa.sun_path, \"%s\", getenv(\"TASKFERRY_SOCKET_PATH\"));\n"
                "  int fd = socket(AF_UNIX, SOCK_STREAM, 0);\n"
                "  if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) { perror(\"connect\"); return 1; }\n"
                "  if (fork() != 0) _exit(0);\n"
                "  usleep(500000);\n"
                "  char req[4096]; snprintf(req, sizeof req, \"{\\\"version\\\":1,\\\"id\\\":\\\"o\\\",\\\"method\\\":\\\"%s\\\",\\\"params\\\":%s}\\n\", argv[1], argv[2]);\n"
                "  write(fd, req, strlen(req));\n"
                "  char buf[65536]; ssize_t n = read(fd, buf, sizeof buf - 1); if (n > 0) { buf[n] = 0; fputs(buf, stdout); }\n"
                "  return 0;\n}\n";
        tf_cc(w, "orphan", code, bin, false);
        char *a = tf_shell_settled(w, repo, NULL, "echo changed > f", NULL);
        char *script = strdup_printf(
                "orphan-request task.accept '{\"taskId\":\"%s\"}'; sleep 1; "
                "orphan-request task.dispatch '{\"prompt\":\"touch %s/escaped\",\"directory\":\"%s\",\"executor\":\"shell\",\"noSandbox\":true}'; sleep 1",
                a, w->root, repo);
        char *msg = tf_shell_output(w, repo, NULL, script, NULL);
        /* another task is invisible from inside a sandbox; widening is refused */
        ck_assert_msg(strstr(msg, "unknown task id") && strstr(msg, "cannot dispatch with noSandbox"),
                      "requests through an orphaned connection: %s", msg);
        free(msg);
        char buf[64];
        ck_assert_str_eq(status_of(w, a, buf), "done/pending");
        ck_assert(!tf_exists(tf_path(w->root, "escaped")));
        free(a), free(script), free(bin), free(repo);
}
END_TEST

/* Third review: a read-only view does not stop connect(), so every socket in
 * the user's runtime dir (the user manager: systemd-run runs code on the
 * host; the session bus; ssh and gpg agents) was reachable from a worker. */
TF_WORLD_TEST(host_service_sockets_are_hidden) {
        char *xdg = strdup(tf_path(w->root, "xdg-runtime"));
        ck_assert_int_eq(mkdir(xdg, 0700), 0);
        char *bus = strdup(tf_path(xdg, "bus"));
        int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", bus);
        ck_assert_int_eq(bind(lfd, (struct sockaddr *) &sa, sizeof sa), 0);
        ck_assert_int_eq(listen(lfd, 4), 0);
        char *bin = strdup(tf_path(w->fixtures, "bin/unix-connect"));
        /* "@name" connects to the abstract socket "name" */
        const char *code = "#include <stddef.h>\n#include <stdio.h>\n#include <string.h>\n#include <sys/socket.h>\n"
                           "#include <sys/un.h>\n"
                           "int main(int c, char **v) { struct sockaddr_un sa = {.sun_family = AF_UNIX};\n"
                           "  socklen_t len = sizeof sa;\n"
                           "  if (v[1][0] == '@') { sa.sun_path[0] = 0; strncpy(sa.sun_path + 1, v[1] + 1, sizeof sa.sun_path - 2);\n"
                           "    len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(v[1] + 1); }\n"
                           "  else snprintf(sa.sun_path, sizeof sa.sun_path, \"%s\", v[1]);\n"
                           "  int fd = socket(AF_UNIX, SOCK_STREAM, 0);\n"
                           "  return connect(fd, (struct sockaddr *) &sa, len) == 0 ? 0 : 1; }\n";
        tf_cc(w, "uconnect", code, bin, false);
        /* an abstract socket on the host: no mount hides it (shared network namespace) */
        char abstract[64];
        snprintf(abstract, sizeof abstract, "tf-test-abstract-%d", (int) getpid());
        int afd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un aa = {.sun_family = AF_UNIX};
        strncpy(aa.sun_path + 1, abstract, sizeof aa.sun_path - 2);
        ck_assert_int_eq(bind(afd, (struct sockaddr *) &aa, (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + strlen(abstract))), 0);
        ck_assert_int_eq(listen(afd, 4), 0);
        /* both reachable from the host */
        free(tf_shf(w, NULL, "%s %s && %s @%s", bin, bus, bin, abstract));
        /* the daemon (and so every worker) runs with this runtime dir and bus address */
        tf_world_setenv(w, "XDG_RUNTIME_DIR", xdg);
        char *addr = strdup_printf("unix:path=%s", bus);
        tf_world_setenv(w, "DBUS_SESSION_BUS_ADDRESS", addr);
        tf_world_setenv(w, "SSH_AUTH_SOCK", bus);
        char *script = strdup_printf("unix-connect %s && echo bus-reachable; unix-connect @%s && echo abstract-reachable; "
                                     "env | grep -E '^(DBUS_|SSH_AUTH_SOCK|XDG_RUNTIME_DIR)' "
                                     "| sed 's/=.*//;s/^/leaked /'; echo end",
                                     bus, abstract);
        char *msg = tf_shell_output(w, w->repo_parent, NULL, script, NULL);
        ck_assert_str_eq(msg, "end\n");
        free(msg);
        close(lfd);
        close(afd);
        free(xdg), free(bus), free(bin), free(addr), free(script);
}
END_TEST

/* ---- floods from inside a sandbox ---- */

/* How long a request may take before the test calls it hung. Not a timing
 * assertion: an answer takes milliseconds; a starved daemon never answers. */
#define HANG_MS 15000

/* One request on a fresh connection to the user's socket; NULL if no reply
 * came within HANG_MS. Prints the latency. */
static json_object *timed_rpc(tf_world *w, const char *method, const char *params) {
        uint64_t t0 = mono_ms();
        int fd = tf_connect(w);
        char *line = strdup_printf("{\"version\":1,\"id\":\"timed\",\"method\":\"%s\",\"params\":%s}", method, params);
        tf_send(fd, line);
        char *resp = tf_recv_line(fd, HANG_MS);
        close(fd);
        fprintf(stderr, "  %s answered %s after %" PRIu64 " ms\n", method, resp ? "" : "NOTHING", mono_ms() - t0);
        json_object *o = resp ? tf_json(resp) : NULL;
        free(resp), free(line);
        return o;
}

/* Asserts an ok:true answer within HANG_MS; returns the frame. */
static json_object *answered(tf_world *w, const char *method, const char *params) {
        json_object *f = timed_rpc(w, method, params);
        ck_assert_msg(f != NULL, "%s did not answer within %d ms", method, HANG_MS);
        tf_result(f);
        return f;
}

/* st, a settled status, says done with a pending changeset and no error
 * (else the test fails: lost); the diff task.result gives for id (within
 * HANG_MS) holds want1, and want2 unless it is NULL. */
static void assert_pending_diff(tf_world *w, json_object *st, const char *id, const char *lost, const char *want1,
                                const char *want2) {
        ck_assert_msg(streq_ptr(tf_jstr(st, "status"), "done") && streq_ptr(tf_jstr(st, "changesetStatus"), "pending") &&
                              !tf_jstr(st, "changesetError"),
                      "%s: %s", lost, json_to_line(st, NULL));
        _cleanup_free_ char *rq = strdup_printf("{\"taskId\":\"%s\",\"fields\":[\"diff\"]}", id);
        json_object *res = answered(w, "task.result", rq);
        const char *diff = tf_jstr(json_get_object(res, "result"), "diff");
        ck_assert_msg(diff && strstr(diff, want1) && (!want2 || strstr(diff, want2)), "diff: %s", diff ? diff : "(null)");
        json_object_put(res);
}

static int report_value(const char *report, const char *key) {
        char *k = strdup_printf("%s=", key);
        const char *at = strstr(report, k);
        ck_assert_msg(at != NULL, "no %s in report %s", key, report);
        int v = atoi(at + strlen(k));
        free(k);
        return v;
}

static const char *task_status_of(json_object *status_frame) {
        return tf_jstr(json_get_object(status_frame, "result"), "status");
}

/* A worker floods its own task socket with `flood` (a taskferry-test-peer
 * command); meanwhile the user's health, list and cancel of that worker
 * answer, and another task settles with its changeset. Returns the worker's
 * report ("key=value ..."). */
static char *flood_scenario(const char *flood) {
        /* the default soft limit of a systemd user service: a flood of a
         * thousand connections reaches it */
        struct rlimit rl;
        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
        if (rl.rlim_cur > 1024) rl.rlim_cur = 1024;
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
        tf_world *w = tf_world_new(NULL);
        char *repo = tf_repo_new(w, NULL, NULL);
        char *other = tf_repo_new(w, "other", NULL);
        char *flooder = tf_dispatch_shell(w, repo, NULL, flood);
        ck_assert_msg(tf_wait_output(w, flooder, "report", 60000), "the flooding worker never reported");
        char *report = tf_output_read(w, flooder, "report");
        fprintf(stderr, "worker `%s`: %s", flood, report);

        /* the user, while the flood holds */
        json_object_put(answered(w, "system.health", "{}"));
        json_object_put(answered(w, "task.list", "{}"));
        char *sp = strdup_printf("{\"taskId\":\"%s\"}", flooder);
        json_object *st = answered(w, "task.status", sp);
        ck_assert_str_eq(task_status_of(st), "running");
        json_object_put(st);

        /* another task settles meanwhile, with its changeset */
        json_object *params = json_object_new_object();
        json_add_string(params, "prompt", "echo hi > new.txt");
        json_add_string(params, "directory", other);
        json_add_string(params, "executor", "shell");
        json_object *d = answered(w, "task.dispatch", json_to_line(params, NULL));
        char *settler = strdup(tf_jstr(tf_result(d), "id"));
        json_object_put(d), json_object_put(params);
        char *sq = strdup_printf("{\"taskId\":\"%s\"}", settler);
        json_object *done = NULL;
        for (uint64_t end = mono_ms() + 120000; mono_ms() < end; usleep(100000)) {
                json_object *f = answered(w, "task.status", sq);
                const char *s = task_status_of(f);
                if (!streq(s, "queued") && !streq(s, "running")) {
                        done = f;
                        break;
                }
                json_object_put(f);
        }
        ck_assert_msg(done != NULL, "the other task did not settle during the flood");
        json_object *ds = json_get_object(done, "result");
        assert_pending_diff(w, ds, settler, "the other task lost its changeset", "+++ b/new.txt", "+hi");
        json_object_put(done);

        /* and the user cancels the flooding worker */
        json_object_put(answered(w, "task.cancel", sp));
        json_object *fs = tf_wait_settled(w, flooder);
        ck_assert_str_eq(tf_jstr(fs, "status"), "cancelled");
        json_object_put(fs);
        json_object_put(answered(w, "system.health", "{}"));
        free(sp), free(sq), free(settler), free(flooder), free(other), free(repo);
        tf_world_free(w);
        return report;
}

START_TEST(worker_parking_waits_starves_nothing) {
        char *report = flood_scenario("taskferry-test-peer waits 300");
        /* the worker's own socket refuses what is over its cap, and only that */
        int parked = report_value(report, "parked"), busy = report_value(report, "busy");
        ck_assert_msg(parked >= 1 && parked <= PROTOCOL_TASK_SOCKET_MAX_REQUESTS, "%s", report);
        ck_assert_msg(busy == 300 - parked, "%s", report);
        free(report);
}
END_TEST

START_TEST(worker_opening_connections_starves_nothing) {
        char *report = flood_scenario("taskferry-test-peer connections 1100");
        int open = report_value(report, "open"), busy = report_value(report, "busy");
        ck_assert_msg(open >= 1 && open <= PROTOCOL_TASK_SOCKET_MAX_CONNECTIONS, "%s", report);
        ck_assert_msg(busy >= 1, "no connection over the cap was told SERVER_BUSY: %s", report);
        free(report);
}
END_TEST

/* ---- out of file descriptors ---- */

/* The highest fd number open in pid; *count: how many are open. */
static unsigned daemon_max_fd(pid_t pid, unsigned *count) {
        char *dir = strdup_printf("/proc/%d/fd", (int) pid);
        DIR *d = opendir(dir);
        ck_assert_msg(d != NULL, "cannot read %s", dir);
        unsigned max = 0;
        *count = 0;
        for (struct dirent *e; (e = readdir(d));) {
                if (e->d_name[0] == '.') continue;
                (*count)++;
                if ((unsigned) atoi(e->d_name) > max) max = (unsigned) atoi(e->d_name);
        }
        closedir(d);
        free(dir);
        return max;
}

/* utime + stime of a process, in seconds */
static double cpu_seconds(pid_t pid) {
        char *p = strdup_printf("/proc/%d/stat", (int) pid);
        char *s = tf_read(p, NULL);
        const char *rest = strrchr(s, ')');
        ck_assert_ptr_nonnull(rest);
        unsigned long ut = 0, st = 0;
        /* fields 3..13, then utime (14) and stime (15) */
        ck_assert_int_eq(sscanf(rest + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st), 2);
        free(s), free(p);
        return (double) (ut + st) / (double) sysconf(_SC_CLK_TCK);
}

/* Leave the daemon no descriptor: its soft limit at its highest fd + 1, and
 * the test's own connections filling every hole below (the rest wait in the
 * backlog). Returns those connections. */
static int *starve_daemon(tf_world *w, pid_t pid, size_t *n_fill) {
        struct rlimit low;
        ck_assert_int_eq(prlimit(pid, RLIMIT_NOFILE, NULL, &low), 0);
        unsigned count, prev = 0;
        /* first let the daemon finish closing what it is done with (the
         * worker's previous connection, a child's pipes): a descriptor it
         * closes after the measurement below is a hole nothing fills, since
         * its listeners are paused by then. Stable for 1 s (at most 20 s: a
         * bound, not a timing). */
        for (int i = 0, same = 0; i < 200 && same < 10; i++) {
                daemon_max_fd(pid, &count);
                same = count == prev ? same + 1 : 0;
                prev = count;
                usleep(100000);
        }
        low.rlim_cur = daemon_max_fd(pid, &count) + 1;
        ck_assert_int_eq(prlimit(pid, RLIMIT_NOFILE, &low, NULL), 0);
        *n_fill = low.rlim_cur - count + 16;
        int *fill = calloc(*n_fill, sizeof *fill);
        for (size_t i = 0; i < *n_fill; i++) fill[i] = tf_connect(w);
        /* the daemon accepts them in batches: wait until it holds every fd it
         * may (a loaded machine needs a while — 10 s was not enough beside the
         * durability suite's 1000-file accepts under ctest -j2; this bounds a
         * hang at 60 s, it times nothing) */
        for (int i = 0; i < 1200; i++) {
                usleep(50000);
                daemon_max_fd(pid, &count);
                if (count == low.rlim_cur) break;
        }
        ck_assert_msg(count == low.rlim_cur, "the daemon has %u fds open, limit %u", count, (unsigned) low.rlim_cur);
        return fill;
}

static void feed_daemon(pid_t pid, const struct rlimit *saved, int *fill, size_t n_fill) {
        ck_assert_int_eq(prlimit(pid, RLIMIT_NOFILE, saved, NULL), 0);
        for (size_t i = 0; i < n_fill; i++) close(fill[i]);
        free(fill);
}

static bool reply_arrived(tf_world *w, void *id) {
        _cleanup_free_ char *data = tf_output_try_read(w, id, "reply.txt");
        return data && strstr(data, "own directory");
}

/* The daemon runs out of descriptors while a worker connects to its own
 * socket and then finishes: every listener pauses instead of spinning (one
 * warning), and the settlement waits for descriptors instead of recording
 * "changeset extraction did not run". */
TF_WORLD_TEST(out_of_fds_pauses_listeners_and_defers_settlement) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_daemon_start(w);
        pid_t pid = w->daemon_pid;
        const char *script = "while [ ! -e $TASKFERRY_OUTPUT_DIR/go1 ]; do sleep 0.1; done; "
                             "taskferry-test-peer dispatch '{\"prompt\":\"true\",\"directory\":\"/\"}' > $TASKFERRY_OUTPUT_DIR/reply.txt & "
                             "while [ ! -e $TASKFERRY_OUTPUT_DIR/go2 ]; do sleep 0.1; done; echo hi > new.txt";
        char *id = tf_dispatch_shell(w, repo, NULL, script);
        /* running under its shim, with its socket */
        char *sp = strdup_printf("{\"taskId\":\"%s\"}", id);
        for (uint64_t end = mono_ms() + 60000;; usleep(100000)) {
                json_object *f = answered(w, "task.status", sp);
                int64_t wpid = 0;
                bool up = json_get_int64(json_get_object(f, "result"), "pid", &wpid) && wpid > 0;
                json_object_put(f);
                if (up) break;
                ck_assert_msg(mono_ms() < end, "the worker never started");
        }
        /* phase 1: out of fds while the worker connects to its own socket */
        struct rlimit saved;
        ck_assert_int_eq(prlimit(pid, RLIMIT_NOFILE, NULL, &saved), 0);
        size_t n_fill;
        int *fill = starve_daemon(w, pid, &n_fill);
        double c0 = cpu_seconds(pid);
        tf_output_touch(w, id, "go1");
        sleep(3);
        double c1 = cpu_seconds(pid);
        fprintf(stderr, "  daemon CPU while out of fds, worker connecting: %.2f s in 3 s\n", c1 - c0);
        ck_assert_msg(c1 - c0 < 0.3, "the daemon spins while out of fds: %.2f s CPU in 3 s", c1 - c0);
        feed_daemon(pid, &saved, fill, n_fill);
        /* the paused task socket accepts again: the worker's request is answered */
        ck_assert_msg(tf_wait_until(reply_arrived, w, id, HANG_MS), "the worker's socket never resumed accepting");

        /* phase 2: out of fds when the worker finishes; its settlement needs a
         * pipe, a fork and a pidfd */
        fill = starve_daemon(w, pid, &n_fill);
        tf_output_touch(w, id, "go2");
        sleep(3);
        double c2 = cpu_seconds(pid);
        fprintf(stderr, "  daemon CPU while out of fds, settlement pending: %.2f s in 3 s\n", c2 - c1);
        ck_assert_msg(c2 - c1 < 0.3, "the daemon spins while out of fds: %.2f s CPU in 3 s", c2 - c1);
        feed_daemon(pid, &saved, fill, n_fill);
        json_object *st = tf_wait_settled(w, id);
        assert_pending_diff(w, st, id, "settlement was skipped", "+hi", NULL);
        json_object_put(st);
        /* one warning, not one per failed accept */
        char *log = tf_read(tf_path(w->root, "daemon.log"), NULL);
        size_t warnings = 0;
        for (const char *p = log; (p = strstr(p, "cannot accept connections")); p++) warnings++;
        fprintf(stderr, "  accept warnings logged: %zu\n", warnings);
        ck_assert_msg(warnings >= 1 && warnings <= 2, "%zu accept warnings:\n%s", warnings, log);
        free(log), free(sp), free(id), free(repo);
}
END_TEST

/* The daemon takes the hard fd limit for itself; the worker (and the shim)
 * get the user's soft limit back: select() users break above 1024. */
START_TEST(workers_get_the_users_fd_limit) {
        struct rlimit rl;
        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
        if (rl.rlim_max <= 1024) return; /* nothing to raise here */
        rl.rlim_cur = 1000;
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
        tf_world *w = tf_world_new(NULL);
        tf_daemon_start(w);
        struct rlimit daemon;
        ck_assert_int_eq(prlimit(w->daemon_pid, RLIMIT_NOFILE, NULL, &daemon), 0);
        ck_assert_msg(daemon.rlim_cur == rl.rlim_max, "daemon soft limit %lu, hard %lu", (unsigned long) daemon.rlim_cur,
                      (unsigned long) rl.rlim_max);
        char *msg = tf_shell_output(w, w->repo_parent, NULL, "ulimit -Sn", NULL);
        ck_assert_str_eq(msg, "1000\n");
        free(msg);
        tf_world_free(w);
}
END_TEST

/* ---- nested dispatch stays inside the caller's view ---- */

static size_t count_tasks(tf_world *w) {
        json_object *f = answered(w, "task.list", "{}");
        json_object *counts = json_get_object(json_get_object(f, "result"), "counts");
        size_t n = 0;
        json_object_object_foreach(counts, k, v) {
                (void) k;
                n += (size_t) json_object_get_int64(v);
        }
        json_object_put(f);
        return n;
}

TF_WORLD_TEST(nested_dispatch_stays_inside_the_callers_target) {
        char *outside = strdup(tf_path(w->repo_parent, "outside"));
        char *repo = strdup(tf_path(w->repo_parent, "repo"));
        /* a host dir next to the target, and a symlink to it committed in the target */
        free(tf_shf(w, NULL,
                    "mkdir -p %s && echo HOSTSECRET > %s/secret.txt && mkdir -p %s/sub && cd %s && git init -q && "
                    "echo base > f && echo keep > sub/keep && ln -s %s hostlink && git add -A && git commit -qm base",
                    outside, outside, repo, repo, outside));
        char *overlay = strdup(tf_path(w->run, "overlay"));
        char *outputs = strdup(tf_path(w->state, "outputs"));
        /* the worker's script: each line one raw task.dispatch reply */
        const char *targets[] = {
                outside,                    /* a host dir outside the target */
                "$R/../outside",            /* .. out of the target */
                "$R/sub/../../outside",     /* .. through a real subdir */
                "$R/made-link",             /* a symlink the worker made in its overlay */
                "$R/made-link/",            /* ... with a trailing slash */
                "$R/hostlink",              /* a symlink in the target pointing out */
                "$R/made-dir",              /* a dir that exists only in the overlay */
                "/tmp",                     /* the sandbox's private /tmp, the host's /tmp */
                "/",
                NULL,
        };
        char *script = strdup_printf("R=%s; O=$TASKFERRY_OUTPUT_DIR/dispatch.txt; ln -s %s $R/made-link; mkdir $R/made-dir; ",
                                     repo, outside);
        for (size_t i = 0; targets[i]; i++) {
                char *s = strdup_printf("%staskferry-test-peer dispatch \"{\\\"prompt\\\":\\\"cat secret.txt\\\",\\\"directory\\\":"
                                        "\\\"%s\\\",\\\"executor\\\":\\\"shell\\\"}\" >> $O; ",
                                        script, targets[i]);
                free(script);
                script = s;
        }
        char *s = strdup_printf("%staskferry-test-peer dispatch \"{\\\"prompt\\\":\\\"echo nested > n.txt\\\",\\\"directory\\\":"
                                "\\\"$R/sub\\\",\\\"executor\\\":\\\"shell\\\"}\" >> $O; cat $O",
                                script);
        free(script);
        script = s;
        tf_daemon_start(w);
        size_t tasks_before = count_tasks(w), outputs_before = tf_count_entries(outputs);
        char *id = tf_shell_done(w, repo, NULL, script, NULL);
        char *replies = tf_output_read(w, id, "dispatch.txt");
        fprintf(stderr, "nested dispatch replies:\n%s", replies);
        /* every refused one: an error frame that says why, nothing created */
        char *save = NULL, *line = strtok_r(replies, "\n", &save);
        size_t i = 0;
        char *nested = NULL;
        for (; line; line = strtok_r(NULL, "\n", &save), i++) {
                json_object *f = tf_json(line);
                json_object *e = json_get_object(f, "error");
                if (targets[i]) {
                        ck_assert_msg(e != NULL, "dispatch into %s was not refused: %s", targets[i], line);
                        ck_assert_str_eq(json_get_string(e, "code"), "REQUEST_FAILED");
                        ck_assert_msg(strstr(json_get_string(e, "message"), "own directory"), "unclear refusal: %s", line);
                } else {
                        ck_assert_msg(e == NULL, "dispatch into a subdir of the target failed: %s", line);
                        nested = strdup(tf_jstr(tf_result(f), "id"));
                }
                json_object_put(f);
        }
        ck_assert_int_eq(i, ELEMENTSOF(targets));
        ck_assert_ptr_nonnull(nested);
        json_object *ns = tf_wait_settled(w, nested);
        ck_assert_str_eq(tf_jstr(ns, "status"), "done");
        ck_assert_str_eq(tf_jstr(ns, "changesetStatus"), "pending");
        json_object_put(ns);
        /* the worker and its one allowed child: no other task record, output dir or overlay */
        ck_assert_int_eq(count_tasks(w), tasks_before + 2);
        ck_assert_int_eq(tf_count_entries(outputs), outputs_before + 2);
        ck_assert_int_le(tf_count_entries(overlay), 2);
        const char *res[] = {"result", nested, "--diff", "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, res);
        ck_assert_msg(strstr(r.out, "+++ b/n.txt") && !strstr(r.out, "HOSTSECRET"), "%s", r.out);
        tf_run_done(&r);
        free(nested), free(replies), free(id), free(script), free(overlay), free(outputs), free(repo),
                free(outside);
}
END_TEST

int main(void) {
        return tf_run_tests("sandbox-peers", "peers", 300,
                            TF_TESTS(worker_cannot_decide_for_the_user, directories_that_would_unmask_are_refused,
                                     caller_env_reaches_the_worker_not_bwrap, orphaned_connection_is_still_sandboxed,
                                     host_service_sockets_are_hidden, worker_parking_waits_starves_nothing,
                                     worker_opening_connections_starves_nothing,
                                     out_of_fds_pauses_listeners_and_defers_settlement, workers_get_the_users_fd_limit,
                                     nested_dispatch_stays_inside_the_callers_target));
}
