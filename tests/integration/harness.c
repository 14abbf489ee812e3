#include "harness.h"
#include "world-teardown.h"

#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "fileio.h"
#include "fs-util.h"
#include "string-util.h"
#include "strv.h"
#include "time-util.h"
#include "utf8.h"

/* vasprintf() that asserts */
static char *xvstrdup_printf(const char *fmt, va_list ap) {
        char *s = NULL;
        ck_assert_int_ge(vasprintf(&s, fmt, ap), 0);
        return s;
}

/* char *var = fmt and the arguments after it, formatted (asserts;
 * malloc'd), in a function whose last named parameter is fmt */
#define FORMAT_ARGS(var, fmt)                            \
        char *var;                                       \
        do {                                             \
                va_list ap_;                             \
                va_start(ap_, fmt);                      \
                var = xvstrdup_printf(fmt, ap_);         \
                va_end(ap_);                             \
        } while (0)

static char *xstrdup_printf(const char *fmt, ...) {
        FORMAT_ARGS(s, fmt);
        return s;
}

int tf_run_suite(Suite *s) {
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}

const char *tf_bin(const char *name) {
        static char buf[3][4096];
        static int k = 0;
        k = (k + 1) % 3;
        snprintf(buf[k], sizeof buf[k], "%s/%s", TASKFERRY_BUILD_DIR, name);
        return buf[k];
}

void tf_world_setenv(tf_world *w, const char *name, const char *value) {
        ck_assert_int_eq(strv_env_set(&w->env, name, value), 0);
}

tf_world *tf_world_new(char *const extra_env[]) {
        tf_world *w = calloc(1, sizeof *w);
        ck_assert_ptr_nonnull(w);
        const char *base = getenv("TASKFERRY_TEST_TMPDIR");
        if (!base || !*base) base = "/var/tmp";
        char *tmpl = xstrdup_printf("%s/tf-test-XXXXXX", base);
        ck_assert_ptr_nonnull(mkdtemp(tmpl));
        chmod(tmpl, 0755);
        w->root = tmpl;
        w->guard = tf_guard_start(w->root);
        ck_assert_msg(w->guard >= 0, "cannot start the guard of %s: %s", w->root, strerror(-w->guard));
        w->state = xstrdup_printf("%s/state", w->root);
        w->run = xstrdup_printf("%s/run", w->root);
        w->cache = xstrdup_printf("%s/cache", w->root);
        w->home = xstrdup_printf("%s/home", w->root);
        w->cfg = xstrdup_printf("%s/cfg", w->root);
        w->repo_parent = xstrdup_printf("%s/work", w->root);
        w->socket = xstrdup_printf("%s/daemon.sock", w->run);
        ck_assert_int_eq(mkdir(w->home, 0700), 0);
        ck_assert_int_eq(mkdir(w->cfg, 0700), 0);
        ck_assert_int_eq(mkdir(w->repo_parent, 0755), 0);
        /* the fake workers and recorded streams, copied next to the world so a
         * sandboxed worker sees them wherever the source tree lives */
        w->fixtures = xstrdup_printf("%s/fixtures", w->root);
        {
                char *q1 = shell_quote(TASKFERRY_FIXTURES_DIR), *q2 = shell_quote(w->fixtures);
                /* and the CLI, so workers can call it from inside the sandbox */
                char *q3 = shell_quote(tf_bin("taskferry"));
                /* and the hostile-worker helpers (tests/fixtures/src) */
                char *q4 = shell_quote(tf_bin("taskferry-test-peer")), *q5 = shell_quote(tf_bin("tf-connect"));
                char *q6 = shell_quote(tf_bin("tf-stamp"));
                char *cp = xstrdup_printf("cp -a %s %s && cp %s %s/bin/taskferry && cp %s %s/bin/taskferry-test-peer && "
                                          "cp %s %s/bin/tf-connect && cp %s %s/bin/tf-stamp",
                                          q1, q2, q3, q2, q4, q2, q5, q2, q6, q2);
                free(q5), free(q6);
                free(q3), free(q4);
                char *argv[] = {(char *) "sh", (char *) "-c", cp, NULL};
                run_result rr;
                ck_assert_int_eq(run_command(argv, NULL, NULL, 0, -1, &rr), 0);
                ck_assert_msg(rr.exit_code == 0, "copying fixtures failed: %s", rr.err);
                run_result_done(&rr);
                free(q1), free(q2), free(cp);
        }
        char *path = xstrdup_printf("PATH=%s/bin:/usr/local/bin:/usr/bin:/bin", w->fixtures);
        char *const base_env[] = {
                path,
                xstrdup_printf("HOME=%s", w->home),
                xstrdup_printf("TASKFERRY_STATE_DIR=%s", w->state),
                xstrdup_printf("TASKFERRY_RUNTIME_DIR=%s", w->run),
                xstrdup_printf("TASKFERRY_CACHE_DIR=%s", w->cache),
                xstrdup_printf("XDG_CONFIG_HOME=%s", w->cfg),
                xstrdup_printf("TASKFERRY_DAEMON=%s", tf_bin("taskferryd")),
                xstrdup_printf("TASKFERRY_SHIM=%s", tf_bin("taskferry-shim")),
                /* the sandbox shows system dirs, not /var/tmp: the fake workers and
                 * the CLI are bound in as a user would bind a tool of theirs */
                xstrdup_printf("TASKFERRY_RO_BIND=%s", w->fixtures),
                strdup("TASKFERRY_LOWERDIR_STAGGER_MS=0"),
                /* the launch window wide open (the spec's tests do the same:
                 * "window wide open"); test-scheduler sets its own */
                strdup("TASKFERRY_MAX_DISPATCHES_PER_WINDOW=100000"),
                strdup("TASKFERRY_ACTIVITY_SUMMARIES=0"),
                strdup("GIT_AUTHOR_NAME=Test"),
                strdup("GIT_AUTHOR_EMAIL=test@example.invalid"),
                strdup("GIT_COMMITTER_NAME=Test"),
                strdup("GIT_COMMITTER_EMAIL=test@example.invalid"),
                strdup("LC_ALL=C"),
                NULL,
        };
        for (size_t i = 0; base_env[i]; i++) {
                ck_assert_int_eq(strv_consume(&w->env, base_env[i]), 0);
        }
        /* sanitizer settings pass through so forked daemons report the same way */
        const char *san[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"};
        for (size_t i = 0; i < 3; i++)
                if (getenv(san[i])) tf_world_setenv(w, san[i], getenv(san[i]));
        for (size_t i = 0; extra_env && extra_env[i]; i++) {
                char *eq = strchr(extra_env[i], '=');
                ck_assert_ptr_nonnull(eq);
                char *name = strndup(extra_env[i], (size_t) (eq - extra_env[i]));
                tf_world_setenv(w, name, eq + 1);
                free(name);
        }
        return w;
}

void tf_world_free(tf_world *w) {
        if (!w) return;
        pid_t pid = tf_daemon_pid(w);
        if (pid > 0) {
                kill(pid, SIGTERM);
                for (int i = 0; i < 500 && kill(pid, 0) == 0; i++) {
                        if (w->daemon_pid == pid) waitpid(pid, NULL, WNOHANG);
                        usleep(10000);
                }
        }
        if (w->daemon_pid > 0) waitpid(w->daemon_pid, NULL, WNOHANG);
        /* what still runs: a daemon that did not stop, and the shims and
         * workers of tasks still running (they outlive a daemon by design) */
        if (tf_world_kill_all(w->root, NULL) > 0 && w->daemon_pid > 0)
                for (int i = 0; i < 200 && waitpid(w->daemon_pid, NULL, WNOHANG) == 0; i++) usleep(10000);
        /* a sanitizer report from the daemon, a shim or a forked job fails the test */
        const char *logs[] = {"daemon.log", "run/daemon-boot-stderr.log"};
        char *report = NULL;
        for (size_t i = 0; i < 2 && !report; i++) {
                char *p = xstrdup_printf("%s/%s", w->root, logs[i]);
                char *data = NULL;
                if (read_file(p, (size_t) 1 << 26, &data, NULL) == 0) {
                        if (strstr(data, "AddressSanitizer") || strstr(data, "LeakSanitizer") ||
                            strstr(data, "runtime error:"))
                                report = data;
                        else
                                free(data);
                }
                free(p);
        }
        (void) tf_world_remove(w->root);
        tf_guard_release(w->guard);
        free(w->root), free(w->state), free(w->run), free(w->cache), free(w->home), free(w->cfg);
        free(w->repo_parent), free(w->socket), free(w->fixtures);
        strv_free(w->env);
        free(w);
        if (report) ck_abort_msg("sanitizer report from a taskferry process:\n%s", report);
}

void tf_run_done(tf_run *r) {
        free(r->out);
        free(r->err);
        r->out = r->err = NULL;
}

static tf_run run_argv(tf_world *w, const char *cwd, const char *stdin_data, char *const argv[]) {
        int in[2], out[2], err[2];
        ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(err, O_CLOEXEC), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                dup2(in[0], 0);
                dup2(out[1], 1);
                dup2(err[1], 2);
                if (chdir(cwd ? cwd : w->root) < 0) _exit(126);
                execve(argv[0], argv, w->env);
                _exit(127);
        }
        close(in[0]);
        close(out[1]);
        close(err[1]);
        if (stdin_data) {
                size_t len = strlen(stdin_data);
                signal(SIGPIPE, SIG_IGN);
                while (len > 0) {
                        ssize_t n = write(in[1], stdin_data, len);
                        if (n <= 0) break;
                        stdin_data += n;
                        len -= (size_t) n;
                }
        }
        close(in[1]);
        size_t olen = 0, elen = 0, ocap = 4096, ecap = 4096;
        char *obuf = malloc(ocap), *ebuf = malloc(ecap);
        struct pollfd p[2] = {{.fd = out[0], .events = POLLIN}, {.fd = err[0], .events = POLLIN}};
        int open_fds = 2;
        while (open_fds > 0) {
                if (poll(p, 2, -1) < 0) continue;
                for (int i = 0; i < 2; i++) {
                        if (p[i].fd < 0 || !p[i].revents) continue;
                        char **buf = i == 0 ? &obuf : &ebuf;
                        size_t *len = i == 0 ? &olen : &elen, *cap = i == 0 ? &ocap : &ecap;
                        if (*len + 65536 > *cap) {
                                *cap = (*len + 65536) * 2;
                                *buf = realloc(*buf, *cap);
                        }
                        ssize_t n = read(p[i].fd, *buf + *len, 65536);
                        if (n <= 0) {
                                close(p[i].fd);
                                p[i].fd = -1;
                                open_fds--;
                        } else
                                *len += (size_t) n;
                }
        }
        obuf[olen] = 0;
        ebuf[elen] = 0;
        int status;
        waitpid(pid, &status, 0);
        tf_run r = {.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1, .out = obuf, .err = ebuf};
        return r;
}

tf_run tf_cli(tf_world *w, const char *cwd, const char *stdin_data, const char *const argv[]) {
        char **full = NULL;
        strv_push(&full, tf_bin("taskferry"));
        for (size_t i = 0; argv[i]; i++) strv_push(&full, argv[i]);
        tf_run r = run_argv(w, cwd, stdin_data, full);
        strv_free(full);
        return r;
}

tf_run tf_sh(tf_world *w, const char *cwd, const char *script, bool allow_fail) {
        char *argv[] = {(char *) "/bin/sh", (char *) "-c", (char *) script, NULL};
        tf_run r = run_argv(w, cwd, NULL, argv);
        if (!allow_fail && r.exit_code != 0)
                ck_abort_msg("sh -c failed (%d): %s\nstdout: %s\nstderr: %s", r.exit_code, script, r.out, r.err);
        return r;
}

char *tf_shf(tf_world *w, const char *cwd, const char *fmt, ...) {
        FORMAT_ARGS(script, fmt);
        tf_run r = tf_sh(w, cwd, script, false);
        free(script);
        size_t n = strlen(r.out);
        while (n && (r.out[n - 1] == '\n' || r.out[n - 1] == ' ')) r.out[--n] = 0;
        char *out = r.out;
        free(r.err);
        return out;
}

int tf_connect(tf_world *w) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", w->socket);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_msg(connect(fd, (struct sockaddr *) &sa, sizeof sa) == 0, "connect %s: %s", w->socket, strerror(errno));
        return fd;
}

static int try_connect(tf_world *w) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", w->socket);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return -1;
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

void tf_send(int fd, const char *line) {
        size_t len = strlen(line);
        char *buf = malloc(len + 1);
        memcpy(buf, line, len);
        buf[len] = '\n';
        size_t off = 0;
        while (off < len + 1) {
                ssize_t n = send(fd, buf + off, len + 1 - off, MSG_NOSIGNAL);
                if (n <= 0) break;
                off += (size_t) n;
        }
        free(buf);
}

/* Per-fd line buffers so several lines from one read are not lost. */
static struct {
        int fd;
        char *buf;
        size_t len;
} line_bufs[64];

char *tf_recv_line(int fd, int timeout_ms) {
        int slot = -1;
        for (int i = 0; i < 64; i++)
                if (line_bufs[i].buf && line_bufs[i].fd == fd) slot = i;
        if (slot < 0)
                for (int i = 0; i < 64 && slot < 0; i++)
                        if (!line_bufs[i].buf) {
                                slot = i;
                                line_bufs[i].fd = fd;
                                line_bufs[i].buf = calloc(1, 1);
                                line_bufs[i].len = 0;
                        }
        ck_assert_int_ge(slot, 0);
        uint64_t deadline = mono_ms() + (uint64_t) timeout_ms;
        for (;;) {
                char *nl = memchr(line_bufs[slot].buf, '\n', line_bufs[slot].len);
                if (nl) {
                        size_t n = (size_t) (nl - line_bufs[slot].buf);
                        char *line = strndup(line_bufs[slot].buf, n);
                        memmove(line_bufs[slot].buf, nl + 1, line_bufs[slot].len - n - 1);
                        line_bufs[slot].len -= n + 1;
                        return line;
                }
                uint64_t now = mono_ms();
                if (now >= deadline) return NULL;
                struct pollfd p = {.fd = fd, .events = POLLIN};
                if (poll(&p, 1, (int) (deadline - now)) <= 0) return NULL;
                char tmp[65536];
                ssize_t n = recv(fd, tmp, sizeof tmp, 0);
                if (n <= 0) {
                        free(line_bufs[slot].buf);
                        line_bufs[slot].buf = NULL;
                        return NULL;
                }
                line_bufs[slot].buf = realloc(line_bufs[slot].buf, line_bufs[slot].len + (size_t) n + 1);
                memcpy(line_bufs[slot].buf + line_bufs[slot].len, tmp, (size_t) n);
                line_bufs[slot].len += (size_t) n;
        }
}

json_object *tf_json(const char *text) {
        json_object *o = NULL;
        ck_assert_msg(text && json_parse_strict(text, strlen(text), &o) == 0, "not JSON: %s", text ? text : "(null)");
        return o;
}

const char *tf_jstr(json_object *o, const char *key) { return json_get_string(o, key); }

json_object *tf_rpc(tf_world *w, const char *method, const char *params_json) {
        int fd = tf_connect(w);
        char *line = xstrdup_printf("{\"version\":1,\"id\":\"rpc-1\",\"method\":\"%s\",\"params\":%s}", method, params_json);
        tf_send(fd, line);
        free(line);
        char *resp = tf_recv_line(fd, 120000);
        ck_assert_msg(resp != NULL, "no response to %s", method);
        close(fd);
        for (int i = 0; i < 64; i++)
                if (line_bufs[i].buf && line_bufs[i].fd == fd) {
                        free(line_bufs[i].buf);
                        line_bufs[i].buf = NULL;
                }
        json_object *o = tf_json(resp);
        free(resp);
        return o;
}

json_object *tf_result(json_object *frame) {
        json_object *ok = NULL;
        ck_assert_msg(json_object_object_get_ex(frame, "ok", &ok) && json_object_get_boolean(ok), "RPC failed: %s",
                      json_to_line(frame, NULL));
        return json_get_object(frame, "result");
}

pid_t tf_daemon_pid(tf_world *w) {
        int fd = try_connect(w);
        if (fd < 0) return -1;
        tf_send(fd, "{\"version\":1,\"id\":\"pid\",\"method\":\"system.health\",\"params\":{}}");
        char *resp = tf_recv_line(fd, 5000);
        close(fd);
        for (int i = 0; i < 64; i++)
                if (line_bufs[i].buf && line_bufs[i].fd == fd) {
                        free(line_bufs[i].buf);
                        line_bufs[i].buf = NULL;
                }
        if (!resp) return -1;
        json_object *o = NULL;
        pid_t pid = -1;
        if (json_parse_strict(resp, strlen(resp), &o) == 0) {
                int64_t v;
                if (json_get_int64(json_get_object(o, "result"), "pid", &v)) pid = (pid_t) v;
                json_object_put(o);
        }
        free(resp);
        return pid;
}

void tf_daemon_start(tf_world *w) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                /* never hold the test runner's output pipes: an orphaned daemon
                 * would keep ctest waiting */
                int devnull = open("/dev/null", O_RDWR);
                char *logp = xstrdup_printf("%s/daemon.log", w->root);
                int logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND, 0600);
                dup2(devnull, 0);
                dup2(logfd >= 0 ? logfd : devnull, 1);
                dup2(logfd >= 0 ? logfd : devnull, 2);
                setsid();
                char *argv[] = {(char *) tf_bin("taskferryd"), NULL};
                execve(argv[0], argv, w->env);
                _exit(127);
        }
        w->daemon_pid = pid;
        for (int i = 0; i < 1000; i++) {
                int fd = try_connect(w);
                if (fd >= 0) {
                        close(fd);
                        return;
                }
                int status;
                if (waitpid(pid, &status, WNOHANG) == pid) ck_abort_msg("taskferryd exited during start (status %d)", status);
                usleep(10000);
        }
        ck_abort_msg("taskferryd did not start listening on %s", w->socket);
}

char *tf_read(const char *path, size_t *len) {
        char *data = NULL;
        int r = read_file(path, (size_t) 1 << 30, &data, len);
        ck_assert_msg(r == 0, "read %s: %s", path, strerror(-r));
        return data;
}

void tf_write(const char *path, const char *data, size_t len, mode_t mode) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        ck_assert_int_eq(write(fd, data, len), (ssize_t) len);
        close(fd);
}

const char *tf_path(const char *dir, const char *name) {
        static char buf[8][4096];
        static int k = 0;
        k = (k + 1) % 8;
        snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
        return buf[k];
}

bool tf_exists(const char *path) {
        struct stat st;
        return lstat(path, &st) == 0;
}

char *tf_tree_snapshot(const char *dir, bool skip_git) {
        char *q = shell_quote(dir);
        char *script = xstrdup_printf(
                "cd %s && find . %s -printf '%%p %%y %%m %%s %%l\\n' | LC_ALL=C sort && "
                "find . %s -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum",
                q, skip_git ? "-path ./.git -prune -o" : "", skip_git ? "-path ./.git -prune -o" : "");
        char *argv[] = {(char *) "sh", (char *) "-c", script, NULL};
        run_result rr;
        int r = run_command(argv, NULL, NULL, (size_t) 1 << 28, -1, &rr);
        ck_assert_int_eq(r, 0);
        ck_assert_msg(rr.exit_code == 0, "snapshot of %s failed: %s", dir, rr.err);
        free(q);
        free(script);
        char *out = rr.out;
        rr.out = NULL;
        run_result_done(&rr);
        return out;
}

bool tf_wait_until(bool (*pred)(tf_world *, void *), tf_world *w, void *arg, int timeout_ms) {
        uint64_t deadline = mono_ms() + (uint64_t) timeout_ms;
        bool v;
        while (!(v = pred(w, arg)) && mono_ms() < deadline) usleep(20000);
        return v;
}

char *tf_dispatch(tf_world *w, const char *const extra_argv[]) {
        const char *argv[64] = {"dispatch", "--json"};
        size_t n = 2;
        for (size_t i = 0; extra_argv[i] && n < 62; i++) argv[n++] = extra_argv[i];
        argv[n] = NULL;
        tf_run r = tf_cli(w, NULL, NULL, argv);
        ck_assert_msg(r.exit_code == 0, "dispatch failed (%d): %s %s", r.exit_code, r.out, r.err);
        json_object *o = tf_json(r.out);
        const char *id = tf_jstr(o, "id");
        ck_assert_ptr_nonnull(id);
        char *ret = strdup(id);
        json_object_put(o);
        tf_run_done(&r);
        return ret;
}

/* the status of id as `status --json` says it now, for a failure message
 * (malloc'd; never asserts) */
static char *status_now(tf_world *w, const char *id) {
        const char *argv[] = {"status", id, "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        json_object *o = NULL;
        char *why = r.exit_code == 0 && r.out && json_parse_strict(r.out, strlen(r.out), &o) == 0
                            ? tf_status_why(o)
                            : strdup_printf("`status` exited %d: %s %s", r.exit_code, strempty(r.out), strempty(r.err));
        json_object_put(o);
        tf_run_done(&r);
        return why;
}

json_object *tf_wait_settled_at(const char *file, int line, tf_world *w, const char *id) {
        const char *argv[] = {"wait", id, "--json", "--timeout", "120s", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        if (r.exit_code != 0) {
                char *why = status_now(w, id);
                _ck_assert_failed(file, line, "Assertion 'wait exits 0' failed",
                                  "wait %s failed (%d): %s %s; the task now: %s", id, r.exit_code, r.out, r.err, why);
        }
        json_object *o = tf_json(r.out);
        tf_run_done(&r);
        const char *st = tf_jstr(o, "status");
        if (!st || streq(st, "queued") || streq(st, "running")) {
                char *why = tf_status_why(o);
                _ck_assert_failed(file, line, "Assertion 'settled' failed", "task %s did not settle: %s", id, why);
        }
        return o;
}

/* bwrap failed on a path under /etc or /opt: the sandbox's masks there
 * (host-masks.h: a Unix socket, or a file others may not read when the
 * worker is root) are mounted by the shim and skipped when their path is
 * gone (mask-mount.h), so such a failure is a regression of that, not a
 * race to wait out. */
static bool masked_file_vanished(const char *text) {
        if (!text || !strstr(text, "bwrap: ")) return false;
        return strstr(text, " /etc/") || strstr(text, " /opt/");
}

char *tf_status_why(json_object *status) {
        const char *keys[] = {"failureReason", "failureDetail", "spawnError"};
        char *why = strdup_printf("status %s", tf_jstr(status, "status") ? tf_jstr(status, "status") : "(none)");
        bool vanished = false;
        for (size_t i = 0; i < 3 && why; i++) {
                const char *v = tf_jstr(status, keys[i]);
                vanished = vanished || masked_file_vanished(v);
                char *more = strdup_printf("%s, %s %s%s%s", why, keys[i], v ? "\"" : "", v ? v : "null", v ? "\"" : "");
                free(why);
                why = more;
        }
        if (why && streq_ptr(tf_jstr(status, "status"), "unknown")) {
                char *more = strdup_printf(
                        "%s — after a restart the daemon found neither its shim nor its exit status: a daemon "
                        "killed between recording the launch (\"running\") and recording the shim's pid leaves "
                        "it so (a window of the launch's durability, not yet closed)",
                        why);
                free(why);
                why = more;
        }
        if (why && vanished) {
                char *more = strdup_printf(
                        "%s — bwrap failed on a file under /etc or /opt: the shim mounts the masks there and "
                        "skips one whose file another process removed meanwhile (shim/mask-mount.c), so this is "
                        "a defect of that, not a race from outside this test",
                        why);
                free(why);
                why = more;
        }
        ck_assert_ptr_nonnull(why);
        return why;
}

void tf_assert_status_at(const char *file, int line, json_object *status, const char *id, const char *want) {
        if (streq_ptr(tf_jstr(status, "status"), want)) return;
        char *why = tf_status_why(status);
        _ck_assert_failed(file, line, "Assertion 'status == want' failed", "task %s: want status %s, got %s", id, want,
                          why);
}

char *tf_task_message(tf_world *w, const char *id) {
        const char *res[] = {"result", id, "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, res);
        json_object *o = tf_json(r.out);
        char *msg = strdup(strempty(tf_jstr(o, "message")));
        json_object_put(o);
        tf_run_done(&r);
        ck_assert_ptr_nonnull(msg);
        return msg;
}

int tf_listen_unix(const char *path) {
        (void) unlink(path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        ck_assert_uint_lt(strlen(path), sizeof sa.sun_path);
        strcpy(sa.sun_path, path);
        ck_assert_msg(bind(fd, (struct sockaddr *) &sa, sizeof sa) == 0, "bind %s: %m", path);
        ck_assert_int_eq(chmod(path, 0777), 0);
        ck_assert_int_eq(listen(fd, 16), 0);
        return fd;
}

/* ---- a private D-Bus session bus (harness.h) ---- */

tf_bus tf_bus_start(tf_world *w) {
        tf_bus b = {0};
        char *dir = strdup(tf_path(w->root, "bus"));
        ck_assert_int_eq(mkdir(dir, 0700), 0);
        b.socket = strdup(tf_path(dir, "socket"));
        char *listen = strdup_printf("--address=unix:path=%s", b.socket);
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        b.pid = fork();
        ck_assert_int_ge(b.pid, 0);
        if (b.pid == 0) {
                int devnull = open("/dev/null", O_RDWR);
                dup2(devnull, 0);
                dup2(p[1], 1);
                dup2(devnull, 2);
                close(p[0]);
                setsid();
                execlp("dbus-daemon", "dbus-daemon", "--session", "--nofork", "--print-address", listen, (char *) NULL);
                _exit(127);
        }
        close(p[1]);
        char buf[1024];
        size_t n = 0;
        while (n < sizeof buf - 1) {
                ssize_t k = read(p[0], buf + n, sizeof buf - 1 - n);
                if (k <= 0) break;
                n += (size_t) k;
                if (memchr(buf, '\n', n)) break;
        }
        close(p[0]);
        buf[n] = 0;
        ck_assert_msg(n > 0 && strchr(buf, '\n'), "dbus-daemon printed no address (is the dbus-daemon package installed?)");
        *strchr(buf, '\n') = 0;
        b.address = strdup(buf);
        tf_world_setenv(w, "DBUS_SESSION_BUS_ADDRESS", b.address);
        free(dir), free(listen);
        return b;
}

void tf_bus_stop(tf_bus *b) {
        if (b->pid > 0) {
                kill(b->pid, SIGTERM);
                waitpid(b->pid, NULL, 0);
        }
        free(b->socket), free(b->address);
}


/* ---- fake socket activation (harness.h) ---- */

int tf_activation_socket(tf_world *w) {
        ck_assert_int_eq(mkdir_p_chmod(w->run, 0700), 0);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        strcpy(sa.sun_path, w->socket);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        ck_assert_int_eq(chmod(w->socket, 0600), 0);
        ck_assert_int_eq(listen(fd, 64), 0);
        return fd;
}

/* Start taskferryd as systemd would for a socket unit: lfd as fd 3,
 * LISTEN_FDS=1, LISTEN_PID its pid. Does not wait for anything. */
pid_t tf_daemon_start_activated(tf_world *w, int lfd) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int devnull = open("/dev/null", O_RDWR);
                int logfd = open(tf_path(w->root, "daemon.log"), O_WRONLY | O_CREAT | O_APPEND, 0600);
                dup2(devnull, 0);
                dup2(logfd >= 0 ? logfd : devnull, 1);
                dup2(logfd >= 0 ? logfd : devnull, 2);
                if (lfd == 3) (void) fcntl(3, F_SETFD, 0);
                else if (dup2(lfd, 3) < 0) _exit(126);
                setsid();
                char **env = strv_copy(w->env);
                char pidbuf[32];
                snprintf(pidbuf, sizeof pidbuf, "%d", (int) getpid());
                if (strv_env_set(&env, "LISTEN_FDS", "1") < 0 || strv_env_set(&env, "LISTEN_PID", pidbuf) < 0) _exit(126);
                char *argv[] = {(char *) tf_bin("taskferryd"), NULL};
                execve(argv[0], argv, env);
                _exit(127);
        }
        w->daemon_pid = pid;
        return pid;
}

/* Wait up to ms for pid to exit; its wait status, or -1 if it still runs. */
int tf_wait_exit(pid_t pid, int ms) {
        uint64_t end = mono_ms() + (uint64_t) ms;
        do {
                int st;
                if (waitpid(pid, &st, WNOHANG) == pid) return st;
                usleep(20000);
        } while (mono_ms() < end);
        return -1;
}

/* ---- a task-socket client for workers (harness.h) ---- */

const char *const tf_peer_py =
        "import json, os, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(os.environ['TASKFERRY_SOCKET_PATH']); s.settimeout(10)\n"
        "f = s.makefile('rb')\n"
        "for i, a in enumerate(sys.argv[1:]):\n"
        "    req = {'version': 1, 'id': 'r%d' % i}; req.update(json.loads(a))\n"
        "    s.sendall((json.dumps(req) + '\\n').encode())\n"
        "    while True:\n"
        "        line = f.readline()\n"
        "        if not line: print('EOF'); sys.exit(0)\n"
        "        fr = json.loads(line)\n"
        "        if fr.get('id') == req['id']: break\n"
        "    print(json.dumps(fr))\n";

/* ---- suites (harness.h) ---- */

TCase *tf_add_tests(Suite *s, const char *tcase, int timeout_s, const TTest *const tests[]) {
        TCase *tc = tcase_create(tcase);
        tcase_set_timeout(tc, timeout_s);
        for (size_t i = 0; tests[i]; i++) tcase_add_test(tc, tests[i]);
        suite_add_tcase(s, tc);
        return tc;
}

int tf_run_tests(const char *suite, const char *tcase, int timeout_s, const TTest *const tests[]) {
        Suite *s = suite_create(suite);
        tf_add_tests(s, tcase, timeout_s, tests);
        return tf_run_suite(s);
}

/* ---- repositories (harness.h) ---- */

/* dir as tf_repo_new() and tf_worktree_add() take it: relative to the
 * world's repo_parent unless absolute; malloc'd */
static char *under_repo_parent(tf_world *w, const char *dir) {
        return strdup(dir[0] == '/' ? dir : tf_path(w->repo_parent, dir));
}

char *tf_repo_new(tf_world *w, const char *dir, const char *files) {
        char *repo = under_repo_parent(w, dir ? dir : "repo");
        _cleanup_free_ char *q = shell_quote(repo);
        free(tf_shf(w, NULL, "set -e; mkdir -p %s && cd %s && git init -q && { %s\n} && git add -A && git commit -qm initial",
                    q, q, files ? files : "echo base > f"));
        return repo;
}

char *tf_worktree_add(tf_world *w, const char *repo, const char *dir, const char *branch) {
        char *wt = under_repo_parent(w, dir);
        _cleanup_free_ char *qr = shell_quote(repo), *qw = shell_quote(wt), *qb = branch ? shell_quote(branch) : NULL;
        free(tf_shf(w, NULL, "git -C %s worktree add -q %s%s%s", qr, qw, qb ? " -b " : "", strempty(qb)));
        return wt;
}

/* ---- dispatching a worker (harness.h) ---- */

char *tf_dispatch_worker(tf_world *w, const char *executor, const char *model, const char *dir, const char *const extra[],
                         const char *prompt) {
        const char *argv[32] = {"--executor", executor};
        size_t n = 2;
        if (model) argv[n++] = "--model", argv[n++] = model;
        argv[n++] = "--directory", argv[n++] = dir;
        for (size_t i = 0; extra && extra[i]; i++) {
                ck_assert_uint_lt(n, ELEMENTSOF(argv) - 3);
                argv[n++] = extra[i];
        }
        argv[n++] = "--prompt";
        argv[n++] = prompt;
        argv[n] = NULL;
        return tf_dispatch(w, argv);
}

char *tf_worker_settled(tf_world *w, const char *executor, const char *model, const char *dir, const char *const extra[],
                        const char *prompt, json_object **ret_status) {
        char *id = tf_dispatch_worker(w, executor, model, dir, extra, prompt);
        json_object *st = tf_wait_settled(w, id);
        if (ret_status) *ret_status = st;
        else json_object_put(st);
        return id;
}

/* ---- shell tasks (harness.h) ---- */

char *tf_dispatch_shell(tf_world *w, const char *dir, const char *const extra[], const char *script) {
        return tf_dispatch_worker(w, "shell", NULL, dir, extra, script);
}

char *tf_shell_settled(tf_world *w, const char *dir, const char *const extra[], const char *script,
                       json_object **ret_status) {
        return tf_worker_settled(w, "shell", NULL, dir, extra, script, ret_status);
}

char *tf_shell_output(tf_world *w, const char *dir, const char *const extra[], const char *script,
                      json_object **ret_status) {
        _cleanup_free_ char *id = tf_shell_settled(w, dir, extra, script, ret_status);
        return tf_task_message(w, id);
}

/* the settled status st of task id has `key` == want, or the test fails
 * saying how the task ended (tf_status_why) and naming the whole status */
static void assert_status_field(const char *id, json_object *st, const char *key, const char *want) {
        if (streq_ptr(json_get_string(st, key), want)) return;
        char *why = tf_status_why(st);
        ck_abort_msg("task %s: %s is not %s: %s; the whole status: %s", id, key, want, why, json_to_line(st, NULL));
}

static char *shell_expecting(tf_world *w, const char *dir, const char *const extra[], const char *script, const char *key,
                             const char *want, json_object **ret_status) {
        json_object *st = NULL;
        char *id = tf_shell_settled(w, dir, extra, script, &st);
        assert_status_field(id, st, key, want);
        if (ret_status) *ret_status = st;
        else json_object_put(st);
        return id;
}

char *tf_shell_pending(tf_world *w, const char *dir, const char *const extra[], const char *script,
                       json_object **ret_status) {
        return shell_expecting(w, dir, extra, script, "changesetStatus", "pending", ret_status);
}

char *tf_shell_done(tf_world *w, const char *dir, const char *const extra[], const char *script, json_object **ret_status) {
        return shell_expecting(w, dir, extra, script, "status", "done", ret_status);
}

char *tf_shell_done_output(tf_world *w, const char *dir, const char *const extra[], const char *script,
                           json_object **ret_status) {
        _cleanup_free_ char *id = tf_shell_done(w, dir, extra, script, ret_status);
        return tf_task_message(w, id);
}

/* ---- reading a task (harness.h) ---- */

json_object *tf_cli_json(tf_world *w, const char *const argv[], int want_exit) {
        tf_run r = tf_cli(w, NULL, NULL, argv);
        ck_assert_msg(r.exit_code == want_exit, "%s %s: exit %d: %s %s", argv[0], strempty(argv[1]), r.exit_code, r.out,
                      r.err);
        json_object *o = tf_json(r.out);
        tf_run_done(&r);
        return o;
}

json_object *tf_status_full(tf_world *w, const char *id) {
        const char *argv[] = {"status", id, "--full", "--json", NULL};
        return tf_cli_json(w, argv, 0);
}

/* the string `key` of the JSON the CLI prints for argv ("" when absent;
 * malloc'd); the CLI must exit 0 */
static char *cli_json_string(tf_world *w, const char *const argv[], const char *key) {
        json_object *o = tf_cli_json(w, argv, 0);
        char *s = strdup(strempty(tf_jstr(o, key)));
        json_object_put(o);
        return s;
}

char *tf_task_diff(tf_world *w, const char *id) {
        const char *argv[] = {"result", id, "--diff", "--json", NULL};
        return cli_json_string(w, argv, "diff");
}

char *tf_changeset_status(tf_world *w, const char *id) {
        const char *argv[] = {"status", id, "--json", NULL};
        return cli_json_string(w, argv, "changesetStatus");
}

json_object *tf_task_record(tf_world *w, const char *id) {
        const char *path = tf_path(w->state, "tasks.json");
        if (!tf_exists(path)) return NULL;
        char *data = tf_read(path, NULL);
        json_object *arr = tf_json(data);
        free(data);
        json_object *found = NULL;
        for (size_t i = 0; json_object_is_type(arr, json_type_array) && i < json_object_array_length(arr); i++) {
                json_object *rec = json_object_array_get_idx(arr, i);
                if (streq_ptr(json_get_string(rec, "id"), id)) found = json_object_get(rec);
        }
        json_object_put(arr);
        return found;
}

json_object *tf_status_rpc(tf_world *w, const char *id) {
        json_object *frame = tf_rpcf(w, "task.status", "{\"taskId\":\"%s\"}", id);
        json_object *res = json_object_get(tf_result(frame));
        json_object_put(frame);
        return res;
}

bool tf_status_is(tf_world *w, const char *id, const char *want) {
        json_object *frame = tf_rpcf(w, "task.status", "{\"taskId\":\"%s\"}", id);
        json_object *res = json_get_object(frame, "result");
        bool is = res && streq_ptr(json_get_string(res, "status"), want);
        json_object_put(frame);
        return is;
}

typedef struct status_wait {
        const char *id, *want;
} status_wait;

static bool status_reached(tf_world *w, void *arg) {
        status_wait *sw = arg;
        return tf_status_is(w, sw->id, sw->want);
}

bool tf_wait_status(tf_world *w, const char *id, const char *want, int timeout_ms) {
        status_wait sw = {id, want};
        return tf_wait_until(status_reached, w, &sw, timeout_ms);
}

typedef struct check_wait {
        const char *id;
        const char *const *any;
} check_wait;

static bool check_reached(tf_world *w, void *arg) {
        check_wait *c = arg;
        json_object *st = tf_status_full(w, c->id);
        bool ok = false;
        for (const char *const *s = c->any; *s && !ok; s++) ok = streq_ptr(tf_jstr(st, "checkStatus"), *s);
        json_object_put(st);
        return ok;
}

json_object *tf_wait_check(tf_world *w, const char *id, const char *const *any, int timeout_ms) {
        check_wait c = {id, any};
        bool ok = tf_wait_until(check_reached, w, &c, timeout_ms);
        json_object *st = tf_status_full(w, id);
        if (!ok) {
                const char *rargv[] = {"result", id, "--fields", "checkOutputTail", "--json", NULL};
                json_object *res = tf_cli_json(w, rargv, 0);
                ck_abort_msg("checkStatus never became %s%s: %s; checkOutputTail: %s", any[0], any[1] ? " (or another end)" : "",
                             json_to_line(st, NULL), strempty(tf_jstr(res, "checkOutputTail")));
        }
        return st;
}

tf_run tf_accept(tf_world *w, const char *id) {
        const char *argv[] = {"accept", id, "--json", NULL};
        return tf_cli(w, NULL, NULL, argv);
}

void tf_accept_ok(tf_world *w, const char *id) {
        tf_run r = tf_accept(w, id);
        ck_assert_msg(r.exit_code == 0, "accept %s failed: %s %s", id, r.out, r.err);
        tf_run_done(&r);
}

void tf_accept_reviewed_ok(tf_world *w, const char *id, const char *dir) {
        char *before = tf_tree_snapshot(dir, false);
        tf_run r = tf_accept(w, id);
        ck_assert_msg(r.exit_code == 1 && strstr(r.out, "--allow-config"), "accept %s of risky files was not refused: %s %s",
                      id, r.out, r.err);
        tf_run_done(&r);
        char *after = tf_tree_snapshot(dir, false);
        ck_assert_msg(streq(after, before), "a refused accept of %s changed %s", id, dir);
        free(before), free(after);
        const char *argv[] = {"accept", id, "--allow-config", "--json", NULL};
        r = tf_cli(w, NULL, NULL, argv);
        ck_assert_msg(r.exit_code == 0, "accept --allow-config %s failed: %s %s", id, r.out, r.err);
        tf_run_done(&r);
}

/* ---- text (harness.h) ---- */

char *tf_diff_files(const char *diff) {
        char *out = strdup("");
        for (const char *p = diff; (p = strstr(p, "diff --git ")); p++) {
                const char *s = p + strlen("diff --git "), *e = strchr(s, '\n');
                if (!e) break;
                /* "a/X b/X" or "\"a/X\" \"b/X\"": keep the first half */
                size_t n = (size_t) (e - s);
                char *line = strndup(s, n);
                size_t half = (n - 1) / 2;
                line[half] = 0;
                tf_appendf(&out, "%s%s|", line[0] == '"' ? "\"" : "", line + (line[0] == '"' ? 3 : 2));
                free(line);
        }
        return out;
}

char *tf_value_after(const char *text, const char *key) {
        const char *p = text ? strstr(text, key) : NULL;
        if (!p) return NULL;
        p += strlen(key);
        return strndup(p, strcspn(p, "\n"));
}

size_t tf_count(const char *s, const char *needle) {
        size_t n = 0;
        for (const char *p = s; p && (p = strstr(p, needle)); p++) n++;
        return n;
}

char *tf_unescape(const char *out) {
        char *s = strdup(out), *d = s;
        ck_assert_ptr_nonnull(s);
        for (const char *p = out; *p; p++) {
                if (p[0] == '\\' && (p[1] == '"' || p[1] == '\\')) *d++ = *++p;
                else if (p[0] == '\\' && p[1] == 'n') *d++ = '\n', p++;
                else *d++ = *p;
        }
        *d = 0;
        return s;
}

json_object *tf_json_lines(const char *text) {
        json_object *arr = json_object_new_array();
        for (const char *l = text; l && *l;) {
                size_t n = strcspn(l, "\n");
                _cleanup_free_ char *line = strndup(l, n);
                json_object_array_add(arr, tf_json(line));
                l += n;
                if (*l) l++;
        }
        return arr;
}

/* ---- the task's output dir (harness.h) ---- */

const char *tf_output_path(tf_world *w, const char *id, const char *name) {
        static char buf[8][4096];
        static int k = 0;
        k = (k + 1) % 8;
        snprintf(buf[k], sizeof buf[k], "%s/outputs/%s/%s", w->state, id, name);
        return buf[k];
}

char *tf_output_read(tf_world *w, const char *id, const char *name) {
        char *data = NULL;
        int r = read_file(tf_output_path(w, id, name), (size_t) 1 << 30, &data, NULL);
        ck_assert_msg(r == 0, "task %s left no %s in its output dir: %s", id, name, strerror(-r));
        return data;
}

char *tf_output_try_read(tf_world *w, const char *id, const char *name) {
        char *data = NULL;
        if (read_file(tf_output_path(w, id, name), (size_t) 1 << 30, &data, NULL) < 0) return NULL;
        return data;
}

void tf_output_touch(tf_world *w, const char *id, const char *name) { tf_write(tf_output_path(w, id, name), "", 0, 0600); }

char *tf_output_line(tf_world *w, const char *id, const char *name, int timeout_ms) {
        uint64_t deadline = mono_ms() + (uint64_t) timeout_ms;
        for (;;) {
                char *data = tf_output_try_read(w, id, name);
                char *nl = data ? strchr(data, '\n') : NULL;
                if (nl) {
                        *nl = 0;
                        return data;
                }
                free(data);
                ck_assert_msg(mono_ms() < deadline, "task %s wrote no line to %s in %d ms", id, name, timeout_ms);
                usleep(20000);
        }
}

static bool output_exists(tf_world *w, void *arg) {
        const char *const *idname = arg;
        return tf_exists(tf_output_path(w, idname[0], idname[1]));
}

bool tf_wait_output(tf_world *w, const char *id, const char *name, int timeout_ms) {
        const char *idname[] = {id, name};
        return tf_wait_until(output_exists, w, (void *) idname, timeout_ms);
}

void tf_go(tf_world *w, const char *id) { tf_output_touch(w, id, "go"); }

void tf_wait_log(tf_world *w, const char *id, const char *marker) {
        _cleanup_free_ char *log = xstrdup_printf("%s/logs/%s.ndjson", w->state, id);
        bool seen = false;
        for (int i = 0; i < 1500 && !seen; i++) {
                _cleanup_free_ char *data = NULL;
                seen = read_file(log, (size_t) 1 << 24, &data, NULL) == 0 && strstr(data, marker);
                if (!seen) usleep(20000);
        }
        ck_assert_msg(seen, "the worker never printed %s", marker);
}

/* ---- the daemon and processes (harness.h) ---- */

bool tf_pid_running(pid_t pid) {
        if (kill(pid, 0) < 0) return false;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        _cleanup_free_ char *stat = NULL;
        if (read_file(path, 4096, &stat, NULL) < 0) return false;
        const char *p = strrchr(stat, ')');
        return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

void tf_daemon_stop(tf_world *w, int sig) {
        pid_t pid = tf_daemon_pid(w);
        ck_assert_msg(pid > 0, "no daemon answers");
        ck_assert_int_eq(kill(pid, sig), 0);
        for (int i = 0; i < 1000 && tf_pid_running(pid); i++) {
                if (w->daemon_pid == pid) (void) wait_for_terminate_nohang(pid, NULL);
                usleep(10000);
        }
        ck_assert_msg(!tf_pid_running(pid), "daemon %d did not stop", (int) pid);
}

char *tf_daemon_log(tf_world *w) {
        char *s = NULL;
        if (read_file(tf_path(w->root, "daemon.log"), (size_t) 1 << 26, &s, NULL) < 0) s = strdup("");
        return s;
}

json_object *tf_rpcf(tf_world *w, const char *method, const char *fmt, ...) {
        FORMAT_ARGS(params, fmt);
        json_object *f = tf_rpc(w, method, params);
        free(params);
        return f;
}

/* ---- fake workers and their helpers (harness.h) ---- */

char *tf_fake_fixture(tf_world *w, const char *name, const char *stdout_text, int exit_code) {
        char *prefix = xstrdup_printf("%s/%s", w->fixtures, name);
        _cleanup_free_ char *out = xstrdup_printf("%s.stdout.ndjson", prefix);
        tf_write(out, stdout_text, strlen(stdout_text), 0644);
        if (exit_code >= 0) {
                _cleanup_free_ char *ex = xstrdup_printf("%s.exit", prefix), *code = xstrdup_printf("%d\n", exit_code);
                tf_write(ex, code, strlen(code), 0644);
        }
        return prefix;
}

char *tf_write_peer(tf_world *w) {
        char *py = strdup(tf_path(w->fixtures, "peer.py"));
        tf_write(py, tf_peer_py, strlen(tf_peer_py), 0644);
        return py;
}

void tf_put(const char *path, const char *content) {
        _cleanup_free_ char *dir = strdup(path);
        *strrchr(dir, '/') = 0;
        ck_assert_int_eq(mkdir_p(dir, 0700), 0);
        tf_write(path, content, strlen(content), 0600);
}

size_t tf_count_entries(const char *dir) {
        DIR *d = opendir(dir);
        if (!d) return 0;
        size_t n = 0;
        for (struct dirent *e; (e = readdir(d));)
                if (!streq(e->d_name, ".") && !streq(e->d_name, "..")) n++;
        closedir(d);
        return n;
}

char *tf_shared_dir(tf_world *w, const char *name) {
        char *dir = strdup(tf_path(w->root, name));
        ck_assert_int_eq(mkdir_p(dir, 0777), 0);
        ck_assert_int_eq(chmod(dir, 0777), 0);
        return dir;
}

char *tf_record_dir(tf_world *w, char **ret_argv_file) {
        char *rec = tf_shared_dir(w, "rec");
        tf_world_setenv(w, "TASKFERRY_RW_BIND", rec);
        if (ret_argv_file) {
                *ret_argv_file = strdup(tf_path(rec, "argv.txt"));
                /* writable inside the sandbox, whoever the worker runs as */
                tf_write(*ret_argv_file, "", 0, 0666);
                tf_world_setenv(w, "FAKE_ARGV_FILE", *ret_argv_file);
        }
        return rec;
}

/* ---- the CLI as systemd runs it (harness.h) ---- */

tf_run tf_cli_minimal(tf_world *w, int timeout_s, const char *extra_env, const char *args) {
        const char *san = getenv("ASAN_OPTIONS");
        _cleanup_free_ char *q_san = san ? shell_quote(san) : NULL;
        _cleanup_free_ char *cmd = xstrdup_printf(
                "exec timeout -k 5 %d env -i HOME='%s' PATH=/usr/local/bin:/usr/bin:/bin TASKFERRY_RUNTIME_DIR='%s' "
                "TASKFERRY_AUTO_START=0 %s%s %s '%s' %s",
                timeout_s, w->home, w->run, q_san ? "ASAN_OPTIONS=" : "", strempty(q_san), extra_env, tf_bin("taskferry"),
                args);
        return tf_sh(w, NULL, cmd, true);
}

/* ---- the daemon's D-Bus API (harness.h) ---- */

bool tf_bus_name_up(tf_world *w, void *unused) {
        (void) unused;
        tf_run r = tf_sh(w, NULL, "busctl --user get-property " TF_BUS_NAME " " TF_BUS_MPATH " " TF_BUS_MIFACE " Version",
                         true);
        bool ok = r.exit_code == 0;
        tf_run_done(&r);
        return ok;
}

char *tf_bus_task_path(const char *id) {
        char *out = calloc(1, strlen(TF_BUS_MPATH "/task/") + 3 * strlen(id) + 1);
        ck_assert_ptr_nonnull(out);
        char *p = stpcpy(out, TF_BUS_MPATH "/task/");
        for (const unsigned char *s = (const unsigned char *) id; *s; s++)
                if (isalnum(*s) && *s < 0x80) *p++ = (char) *s;
                else p += sprintf(p, "_%02x", *s);
        return out;
}

/* ---- a worker paused while the user works (harness.h) ---- */

char *tf_shell_paused(tf_world *w, const char *dir, const char *script, const char *meanwhile, json_object **ret_status) {
        char *id = tf_dispatch_shell(w, dir, NULL, script);
        tf_wait_log(w, id, "worker-finished");
        tf_run r = tf_sh(w, dir, meanwhile, false);
        tf_run_done(&r);
        tf_go(w, id);
        *ret_status = tf_wait_settled(w, id);
        return id;
}

/* ---- processes, from /proc (harness.h) ---- */

size_t tf_procs(bool (*match)(pid_t pid, void *arg), void *arg, pid_t *pids, size_t max) {
        DIR *d = opendir("/proc");
        ck_assert_msg(d, "cannot list /proc: %s", strerror(errno));
        size_t n = 0;
        for (struct dirent *de; (de = readdir(d));) {
                char *end;
                long pid = strtol(de->d_name, &end, 10);
                if (*end || pid <= 0 || pid == getpid() || !match((pid_t) pid, arg)) continue;
                if (n < max) pids[n] = (pid_t) pid;
                n++;
        }
        closedir(d);
        return n;
}

char *tf_proc_read(pid_t pid, const char *name, char sep, size_t *ret_len) {
        char path[128];
        snprintf(path, sizeof path, "/proc/%d/%s", (int) pid, name);
        char *data = NULL;
        size_t len = 0;
        if (read_file(path, (size_t) 4 << 20, &data, &len) < 0) return NULL;
        if (sep)
                for (size_t i = 0; i < len; i++)
                        if (!data[i]) data[i] = sep;
        if (ret_len) *ret_len = len;
        return data;
}

bool tf_proc_has_env(pid_t pid, const char *entry) {
        size_t len = 0;
        _cleanup_free_ char *env = tf_proc_read(pid, "environ", 0, &len);
        for (size_t off = 0; env && off < len; off += strnlen(env + off, len - off) + 1)
                if (streq(env + off, entry)) return true;
        return false;
}

bool tf_proc_stat(pid_t pid, pid_t *ret_ppid, pid_t *ret_pgrp, pid_t *ret_sid) {
        _cleanup_free_ char *stat = tf_proc_read(pid, "stat", 0, NULL);
        /* pid (comm) state ppid pgrp session ... */
        const char *p = stat ? strrchr(stat, ')') : NULL;
        char state;
        int ppid, pgrp, sid;
        if (!p || sscanf(p + 1, " %c %d %d %d", &state, &ppid, &pgrp, &sid) != 4) return false;
        if (ret_ppid) *ret_ppid = (pid_t) ppid;
        if (ret_pgrp) *ret_pgrp = (pid_t) pgrp;
        if (ret_sid) *ret_sid = (pid_t) sid;
        return true;
}

/* ---- the daemon's env file (harness.h) ---- */

char *tf_env_file(tf_world *w, const char *text) {
        _cleanup_free_ char *dir = xstrdup_printf("%s/.config/taskferry", w->home);
        ck_assert_int_eq(mkdir_p(dir, 0700), 0);
        char *p = xstrdup_printf("%s/env", dir);
        if (text) tf_write(p, text, strlen(text), 0600);
        tf_world_setenv(w, "TASKFERRY_ENV_FILE", p);
        return p;
}

/* ---- C programs a test builds (harness.h) ---- */

void tf_cc(tf_world *w, const char *name, const char *code, const char *out, bool shared) {
        _cleanup_free_ char *src = xstrdup_printf("%s/%s.c", w->root, name);
        tf_write(src, code, strlen(code), 0644);
        _cleanup_free_ char *qs = shell_quote(src), *qo = shell_quote(out);
        free(tf_shf(w, NULL, "cc %s-o %s %s && chmod 0755 %s", shared ? "-shared -fPIC " : "", qo, qs, qo));
}

/* ---- figures (harness.h) ---- */

double tf_clock_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

void tf_sort_ms(double *v, size_t n) { qsort(v, n, sizeof *v, cmp_double); }

double tf_median(const double *sorted, size_t n) {
        return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

/* ---- building strings (harness.h) ---- */

void tf_appendf(char **s, const char *fmt, ...) {
        FORMAT_ARGS(tail, fmt);
        char *joined = xstrdup_printf("%s%s", strempty(*s), tail);
        free(tail);
        free(*s);
        *s = joined;
}

/* ---- JSON objects (harness.h) ---- */

void tf_assert_keys(json_object *o, const char *const keys[]) {
        size_t k = 0;
        json_object_object_foreach(o, key, val) {
                (void) val;
                ck_assert_msg(keys[k] && streq(key, keys[k]), "key %zu is %s, want %s: %s", k, key, strnull(keys[k]),
                              json_to_line(o, NULL));
                k++;
        }
        ck_assert_msg(!keys[k], "key %zu is missing, want %s: %s", k, keys[k], json_to_line(o, NULL));
}
