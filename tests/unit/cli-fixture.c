/* The CLI command suites' fixture (cli-fixture.h). */
#include "cli-fixture.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli-args.h"
#include "commands.h"
#include "json-util.h"
#include "unit.h"
#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

char *cli_fixture_dir;
volatile sig_atomic_t cli_fixture_interrupted;
int cli_cmd_stdin_fd = -1;

static pid_t server_pid;
static char *log_path, *out_path, *err_path, *sock_path;

static void on_usr1(int sig) {
        (void) sig;
        cli_fixture_interrupted = 1;
}

static void set_dir_env(const char *var, const char *rel) {
        _cleanup_free_ char *p = tf_path(cli_fixture_dir, rel);
        ck_assert_int_ge(mkdir_p(p, 0700), 0);
        ck_assert_int_eq(setenv(var, p, 1), 0);
}

void cli_fixture_setup(void) {
        cli_fixture_dir = tf_tmpdir_new("cli");
        set_dir_env("TASKFERRY_STATE_DIR", "state");
        set_dir_env("TASKFERRY_RUNTIME_DIR", "run");
        set_dir_env("TASKFERRY_CACHE_DIR", "cache");
        set_dir_env("HOME", "home");
        set_dir_env("XDG_CONFIG_HOME", "config");
        set_dir_env("XDG_RUNTIME_DIR", "xdg-run");
        sock_path = tf_path(cli_fixture_dir, "run/daemon.sock");
        setenv("TASKFERRY_SOCKET_PATH", sock_path, 1);
        setenv("TASKFERRY_AUTO_START", "0", 1);
        _cleanup_free_ char *nodaemon = tf_path(cli_fixture_dir, "no-such-taskferryd");
        setenv("TASKFERRY_DAEMON", nodaemon, 1);
        _cleanup_free_ char *nobus = strdup_printf("unix:path=%s/no-bus", cli_fixture_dir);
        setenv("DBUS_SESSION_BUS_ADDRESS", nobus, 1);
        setenv("TZ", "UTC", 1);
        tzset();
        static const char *const unset[] = {"CLAUDE_CODE_SESSION_ID", "TASKFERRY_TASK_ID",
                                            "TASKFERRY_WAIT_DEFAULT_TIMEOUT_MS", "TASKFERRY_ADVISOR_CONTEXT_CHARS",
                                            "GIT_PAGER", "PAGER", "XDG_STATE_HOME", "XDG_CACHE_HOME",
                                            "TASKFERRY_OVERLAY_TMP_DIR", "NO_COLOR"};
        for (size_t i = 0; i < ELEMENTSOF(unset); i++) unsetenv(unset[i]);
        _cleanup_free_ char *work = tf_path(cli_fixture_dir, "work");
        ck_assert_int_ge(mkdir_p(work, 0700), 0);
        ck_assert_int_eq(chdir(work), 0);
        log_path = tf_path(cli_fixture_dir, "requests.jsonl");
        out_path = tf_path(cli_fixture_dir, "cmd.out");
        err_path = tf_path(cli_fixture_dir, "cmd.err");
        struct sigaction sa = {.sa_handler = on_usr1}; /* no SA_RESTART: a wait returns EINTR */
        sigemptyset(&sa.sa_mask);
        ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
        cli_fixture_interrupted = 0;
        cli_cmd_stdin_fd = -1;
        server_pid = 0;
}

void cli_fake_stop(void) {
        if (server_pid > 0) sigkill_wait(server_pid);
        server_pid = 0;
        if (sock_path) (void) unlink(sock_path);
}

void cli_fixture_teardown(void) {
        cli_fake_stop();
        ck_assert_int_eq(chdir("/"), 0);
        cli_fixture_dir = tf_tmpdir_free(cli_fixture_dir);
        free(log_path);
        free(out_path);
        free(err_path);
        free(sock_path);
        log_path = out_path = err_path = sock_path = NULL;
}

/* ---- the fake daemon (runs in a child: it never returns) ---- */

typedef struct out_buf {
        char *data;
        size_t len, cap;
} out_buf;

static void out_add(out_buf *b, const char *s, size_t n) {
        if (b->len + n > b->cap) {
                b->cap = (b->len + n) * 2;
                b->data = realloc(b->data, b->cap);
                if (!b->data) _exit(3);
        }
        memcpy(b->data + b->len, s, n);
        b->len += n;
}

static void out_flush(out_buf *b, int fd) {
        (void) loop_write(fd, b->data, b->len);
        b->len = 0;
}

static void out_frame(out_buf *b, const char *frame, const char *id) {
        for (const char *p = frame; *p;) {
                if (startswith(p, "@ID@")) {
                        out_add(b, id, strlen(id));
                        p += 4;
                } else
                        out_add(b, p++, 1);
        }
}

static unsigned lines_in(const char *path) {
        _cleanup_free_ char *text = tf_read_file(path, true);
        unsigned n = 0;
        for (const char *p = text; *p; p++) n += *p == '\n';
        return n;
}

static void sleep_ms(unsigned ms) {
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
}

static const cli_fake_rule *rule_for(const cli_fake_rule *rules, const char *method, unsigned nth) {
        const cli_fake_rule *last = NULL;
        unsigned k = 0;
        for (const cli_fake_rule *r = rules; r && r->method; r++) {
                if (!streq(r->method, method)) continue;
                if (k++ == nth) return r;
                last = r;
        }
        return last;
}

/* Answer one request; false: the connection is to be closed. */
static bool answer(int fd, const cli_fake_rule *rules, json_object *counts, pid_t test_pid, json_object *req) {
        const char *id = json_get_string(req, "id");
        const char *method = json_get_string(req, "method");
        if (!id) id = "";
        if (!method) method = "";
        int64_t nth = 0;
        (void) json_get_int64(counts, method, &nth);
        json_add_int(counts, method, nth + 1);
        const cli_fake_rule *rule = rule_for(rules, method, (unsigned) nth);
        out_buf b = {};
        if (!rule) {
                json_object *res = json_object_new_object();
                if (streq(method, "system.health")) {
                        json_add_bool(res, "healthy", true);
                        json_add_int(res, "pid", getpid());
                        json_add_int(res, "version", 1);
                } else {
                        json_add_string(res, "method", method);
                        json_object *params = NULL;
                        json_object_object_get_ex(req, "params", &params);
                        json_add(res, "params", json_object_get(params));
                }
                json_object *resp = json_object_new_object();
                json_add_int(resp, "version", 1);
                json_add_bool(resp, "ok", true);
                json_add_string(resp, "id", id);
                json_add(resp, "result", res);
                size_t n;
                const char *line = json_to_line(resp, &n);
                out_add(&b, line, n);
                out_add(&b, "\n", 1);
                json_object_put(resp);
                out_flush(&b, fd);
                free(b.data);
                return true;
        }
        bool keep = true;
        for (const char *const *f = rule->frames; keep && *f; f++) {
                if (streq(*f, "CLOSE")) {
                        keep = false;
                } else if (startswith(*f, "RAW:")) {
                        out_frame(&b, *f + 4, id);
                } else if (streq(*f, "BIG")) {
                        size_t n = 1100 * 1024;
                        char *x = malloc(n);
                        if (!x) _exit(3);
                        memset(x, 'x', n);
                        out_add(&b, x, n);
                        free(x);
                } else if (startswith(*f, "SLEEP:")) {
                        out_flush(&b, fd);
                        sleep_ms((unsigned) atoi(*f + 6));
                } else if (streq(*f, "SIGNAL")) {
                        out_flush(&b, fd);
                        kill(test_pid, SIGUSR1);
                } else if (startswith(*f, "WAITOUT:")) {
                        out_flush(&b, fd);
                        unsigned want = (unsigned) atoi(*f + 8);
                        for (int i = 0; i < 1000 && lines_in(out_path) < want; i++) sleep_ms(10);
                } else {
                        out_frame(&b, *f, id);
                        out_add(&b, "\n", 1);
                }
        }
        out_flush(&b, fd);
        free(b.data);
        return keep;
}

static void serve(int fd, const cli_fake_rule *rules, json_object *counts, pid_t test_pid) {
        char *buf = NULL;
        size_t len = 0, cap = 0;
        for (;;) {
                if (cap - len < 65536) {
                        cap = cap ? cap * 2 : 131072;
                        buf = realloc(buf, cap);
                        if (!buf) _exit(3);
                }
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) break;
                len += (size_t) n;
                char *nl;
                while ((nl = memchr(buf, '\n', len))) {
                        size_t l = (size_t) (nl - buf);
                        _cleanup_close_ int lfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
                        if (lfd >= 0) (void) loop_write(lfd, buf, l + 1);
                        json_object *req = NULL;
                        bool keep = true;
                        if (l > 0 && json_parse_strict(buf, l, &req) == 0) keep = answer(fd, rules, counts, test_pid, req);
                        json_object_put(req);
                        memmove(buf, nl + 1, len - l - 1);
                        len -= l + 1;
                        if (!keep) {
                                free(buf);
                                return;
                        }
                }
        }
        free(buf);
}

void cli_fake_start(const cli_fake_rule *rules) {
        ck_assert_int_eq(server_pid, 0);
        int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(lfd, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        ck_assert_uint_lt(strlen(sock_path), sizeof sa.sun_path);
        strcpy(sa.sun_path, sock_path);
        ck_assert_int_eq(bind(lfd, (struct sockaddr *) &sa, sizeof sa), 0);
        ck_assert_int_eq(listen(lfd, 16), 0);
        pid_t test_pid = getpid();
        pid_t pid;
        int r = safe_fork("fake-daemon", FORK_RESET_SIGNALS | FORK_DEATHSIG_SIGKILL, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                json_object *counts = json_object_new_object();
                for (;;) {
                        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                        if (fd < 0) {
                                if (errno == EINTR) continue;
                                _exit(4);
                        }
                        serve(fd, rules, counts, test_pid);
                        close(fd);
                }
        }
        close(lfd);
        server_pid = pid;
}

static json_object *logged(const char *method, int n, unsigned *ret_count) {
        _cleanup_free_ char *text = tf_read_file(log_path, true);
        json_object *found = NULL;
        unsigned k = 0;
        for (char *line = text; line && *line;) {
                char *nl = strchr(line, '\n');
                json_object *req = NULL;
                if (json_parse_strict(line, nl ? (size_t) (nl - line) : strlen(line), &req) == 0 &&
                    streq_ptr(json_get_string(req, "method"), method)) {
                        if (n < 0 || (unsigned) n == k) {
                                json_object_put(found);
                                found = json_object_get(json_get_object(req, "params"));
                        }
                        k++;
                }
                json_object_put(req);
                line = nl ? nl + 1 : NULL;
        }
        if (ret_count) *ret_count = k;
        return found;
}

json_object *cli_fake_params(const char *method, int n) {
        return logged(method, n, NULL);
}

unsigned cli_fake_count(const char *method) {
        unsigned k = 0;
        json_object_put(logged(method, -1, &k));
        return k;
}

void cli_fake_params_are(const char *method, const char *json) {
        _cleanup_json_ json_object *p = cli_fake_params(method, -1);
        ck_assert_msg(p, "no %s request", method);
        ck_assert_msg(streq(json_to_line(p, NULL), json), "%s: %s, want %s", method, json_to_line(p, NULL), json);
}

/* ---- a command in this process ---- */

static int redirect(int target, const char *path, int flags) {
        int saved = fcntl(target, F_DUPFD_CLOEXEC, 3);
        ck_assert_int_ge(saved, 0);
        _cleanup_close_ int fd = open(path, flags | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_ge(dup2(fd, target), 0);
        return saved;
}

static void restore(int target, int saved) {
        ck_assert_int_ge(dup2(saved, target), 0);
        close(saved);
}

static void cli_cmd_runv(cli_cmd *c, va_list ap) {
        char *argv[64];
        size_t n = 0;
        for (char *s; (s = va_arg(ap, char *));) {
                ck_assert_uint_lt(n, ELEMENTSOF(argv));
                argv[n++] = s;
        }
        *c = (cli_cmd) {};
        cli_args a = {};
        cli_error perr = {};
        int r = cli_args_parse(argv, n, &a, &perr);
        ck_assert_msg(r == 0, "%s: %s", n ? argv[0] : "", strnull(perr.text));
        cli_context ctx = {
                .args = &a,
                .argv0 = "taskferry",
                .interrupted = &cli_fixture_interrupted,
                .client = CLI_CLIENT_INIT,
        };
        fflush(stdout);
        fflush(stderr);
        int saved_in;
        if (cli_cmd_stdin_fd >= 0) {
                saved_in = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
                ck_assert_int_ge(dup2(cli_cmd_stdin_fd, STDIN_FILENO), 0);
        } else
                saved_in = redirect(STDIN_FILENO, "/dev/null", O_RDONLY);
        int saved_out = redirect(STDOUT_FILENO, out_path, O_WRONLY | O_CREAT | O_TRUNC);
        int saved_err = redirect(STDERR_FILENO, err_path, O_WRONLY | O_CREAT | O_TRUNC);
        c->r = a.verb->run(&ctx, &c->value, &c->raw, &c->err);
        c->output_done = ctx.output_done;
        cli_context_done(&ctx);
        fflush(stdout);
        fflush(stderr);
        restore(STDERR_FILENO, saved_err);
        restore(STDOUT_FILENO, saved_out);
        restore(STDIN_FILENO, saved_in);
        cli_args_done(&a);
        c->out = tf_read_file(out_path, false);
        c->errout = tf_read_file(err_path, false);
}

void cli_cmd_run(cli_cmd *c, ...) {
        va_list ap;
        va_start(ap, c);
        cli_cmd_runv(c, ap);
        va_end(ap);
}

void cli_cmd_ok(cli_cmd *c, ...) {
        va_list ap;
        va_start(ap, c);
        cli_cmd_runv(c, ap);
        va_end(ap);
        ck_assert_msg(c->r == 0, "%s", strnull(c->err.text));
}

void cli_cmd_done(cli_cmd *c) {
        json_object_put(c->value);
        json_object_put(c->raw);
        cli_error_done(&c->err);
        free(c->out);
        free(c->errout);
        *c = (cli_cmd) {};
}

void cli_cmd_failed(const cli_cmd *c, int r, int exit_code, const char *value_json) {
        ck_assert_msg(c->r == r, "returned %d, want %d (%s)", c->r, r, strnull(c->err.text));
        ck_assert_int_eq(c->err.exit_code, exit_code);
        _cleanup_json_ json_object *v = cli_error_value(&c->err);
        ck_assert_ptr_nonnull(v);
        ck_assert_msg(streq(json_to_line(v, NULL), value_json), "printed %s, want %s", json_to_line(v, NULL),
                      value_json);
}

void cli_cmd_value_is(const cli_cmd *c, const char *want) {
        ck_assert_msg(c->r == 0, "returned %d: %s", c->r, strnull(c->err.text));
        ck_assert_msg(streq(json_to_line(c->value, NULL), want), "value %s, want %s", json_to_line(c->value, NULL), want);
}

int cli_open_pty(int *ret_slave) {
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        ck_assert_int_ge(m, 0);
        ck_assert_int_eq(grantpt(m), 0);
        ck_assert_int_eq(unlockpt(m), 0);
        int s = open(ptsname(m), O_RDWR | O_NOCTTY | O_CLOEXEC);
        ck_assert_int_ge(s, 0);
        *ret_slave = s;
        return m;
}
