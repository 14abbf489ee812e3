/* CLI client (its frame checks), daemon auto-start and the taskferry binary
 * end to end (streams, exit codes, each command's RPCs), against a
 * fake daemon: this test binary re-executed with TF_FAKE_DAEMON set, which
 * listens on $TASKFERRY_SOCKET_PATH and answers from a script of canned
 * frames (method → frames with %ID% replaced by the request id; "CLOSE"
 * closes the connection, "BIG" sends 1.1 MiB without a newline). Methods
 * not in the script get {"method":..., "params":...} back, so tests can
 * check exactly what the CLI sent. */
#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli-args.h"
#include "cli-advisor.h"
#include "cli-client.h"
#include "json-util.h"
#include "paths.h"
#include "unit.h"
#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

extern char **environ;

/* ------------------------------------------------------------------ */
/* fake daemon                                                         */

static void write_all(int fd, const char *s, size_t len) {
        while (len > 0) {
                ssize_t n = write(fd, s, len);
                if (n <= 0) return;
                s += n;
                len -= (size_t) n;
        }
}

static void append_file(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd < 0) return;
        write_all(fd, text, strlen(text));
        close(fd);
}

static char *replace_id(const char *frame, const char *id) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        for (const char *p = frame; *p; ) {
                if (startswith(p, "%ID%")) {
                        fputs(id, f);
                        p += 4;
                } else
                        fputc(*p++, f);
        }
        fclose(f);
        return buf;
}

static void serve_connection(int fd, json_object *script, pid_t daemon_pid, const char *log) {
        char *buf = NULL;
        size_t len = 0, cap = 0;
        for (;;) {
                if (cap - len < 4096) {
                        cap = cap ? cap * 2 : 65536;
                        buf = realloc(buf, cap);
                }
                ssize_t n = read(fd, buf + len, cap - len);
                if (n <= 0) break;
                len += (size_t) n;
                char *nl;
                while ((nl = memchr(buf, '\n', len))) {
                        size_t l = (size_t) (nl - buf);
                        json_object *req = NULL;
                        if (json_parse_strict(buf, l, &req) == 0) {
                                if (log) {
                                        _cleanup_free_ char *line = strndup(buf, l + 1);
                                        append_file(log, line);
                                }
                                const char *id = json_get_string(req, "id");
                                const char *method = json_get_string(req, "method");
                                json_object *frames = script ? json_get_array(script, method) : NULL;
                                if (frames) {
                                        for (size_t i = 0; i < json_object_array_length(frames); i++) {
                                                const char *fr = json_object_get_string(json_object_array_get_idx(frames, i));
                                                if (streq(fr, "CLOSE")) _exit(0);
                                                if (startswith(fr, "WAITFILE:")) {
                                                        /* hold the answer until the test creates the file (max 60 s) */
                                                        for (int w = 0; w < 6000 && access(fr + 9, F_OK) < 0; w++) {
                                                                struct pollfd pfd = { .fd = fd, .events = POLLRDHUP };
                                                                if (poll(&pfd, 1, 10) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP))) _exit(0);
                                                        }
                                                        continue;
                                                }
                                                if (streq(fr, "BIG")) {
                                                        size_t big = 1100 * 1024;
                                                        char *x = malloc(big);
                                                        memset(x, 'x', big);
                                                        write_all(fd, x, big);
                                                        free(x);
                                                        continue;
                                                }
                                                _cleanup_free_ char *out = replace_id(fr, id);
                                                write_all(fd, out, strlen(out));
                                                write_all(fd, "\n", 1);
                                        }
                                } else {
                                        json_object *resp = json_object_new_object();
                                        json_add_int(resp, "version", 1);
                                        json_add_bool(resp, "ok", true);
                                        json_add_string(resp, "id", id);
                                        json_object *result = json_object_new_object();
                                        if (streq_ptr(method, "system.health")) {
                                                json_add_bool(result, "healthy", true);
                                                json_add_int(result, "pid", daemon_pid);
                                                json_add_int(result, "version", 1);
                                        } else {
                                                json_add_string(result, "method", method);
                                                json_object *params = NULL;
                                                json_object_object_get_ex(req, "params", &params);
                                                json_add(result, "params", json_object_get(params));
                                        }
                                        json_add(resp, "result", result);
                                        size_t rl;
                                        const char *line = json_to_line(resp, &rl);
                                        write_all(fd, line, rl);
                                        write_all(fd, "\n", 1);
                                        json_object_put(resp);
                                }
                                json_object_put(req);
                        }
                        memmove(buf, nl + 1, len - l - 1);
                        len -= l + 1;
                }
        }
        _exit(0);
}

/* Listen on sock and serve forever (one forked child per connection). */
static _Noreturn void fake_serve(const char *sock, json_object *script, const char *log) {
        /* A fork of the test process inherits Check's SIGTERM handler, which
         * signals the whole process group: die plainly instead. */
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGALRM, SIG_DFL);
        signal(SIGCHLD, SIG_IGN);
        unlink(sock);
        int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        strncpy(sa.sun_path, sock, sizeof sa.sun_path - 1);
        if (lfd < 0 || bind(lfd, (struct sockaddr *) &sa, sizeof sa) < 0 || listen(lfd, 64) < 0) _exit(3);
        pid_t me = getpid();
        for (;;) {
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0) continue;
                pid_t pid = fork();
                if (pid == 0) {
                        close(lfd);
                        serve_connection(fd, script, me, log);
                }
                close(fd);
        }
}

/* Entry point when this binary runs as TASKFERRY_DAEMON. */
static int fake_daemon_main(const char *mode) {
        const char *runtime = getenv("TASKFERRY_RUNTIME_DIR");
        const char *sock = getenv("TASKFERRY_SOCKET_PATH");
        if (!runtime || !sock) return 2;
        _cleanup_free_ char *starts = strdup_printf("%s/starts", runtime);
        /* Daemons that stay up log their pid (teardown kills them); the ones
         * that exit at once log "exited", so no pid can be reused by mistake. */
        _cleanup_free_ char *line = streq(mode, "serve") ? strdup_printf("%d\n", (int) getpid()) : strdup("exited\n");
        append_file(starts, line);

        if (streq(mode, "bootfail")) {
                _cleanup_free_ char *p = strdup_printf("%s/daemon-boot.err", runtime);
                append_file(p, "config key \"x\" in /c/config.json must be a number (got \"y\")\nsecond line\n");
                return 1;
        }
        if (streq(mode, "stderr")) {
                fprintf(stderr, "fake daemon crashed early\n");
                return 1;
        }

        /* Record how we were started. */
        json_object *info = json_object_new_object();
        json_add_string(info, "state", getenv("TASKFERRY_STATE_DIR"));
        json_add_string(info, "runtime", runtime);
        json_add_string(info, "socket", sock);
        json_add_string(info, "marker", getenv("TF_MARKER"));
        char cwd[4096];
        json_add_string(info, "cwd", getcwd(cwd, sizeof cwd) ? cwd : NULL);
        struct stat st;
        json_add_bool(info, "stdinNull", fstat(0, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));
        json_add_bool(info, "stdoutNull", fstat(1, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));
        json_add_bool(info, "stderrFile", fstat(2, &st) == 0 && S_ISREG(st.st_mode));
        json_add_int(info, "sid", getsid(0));
        json_add_int(info, "pid", getpid());
        json_add_bool(info, "fd50Closed", fcntl(50, F_GETFD) < 0);
        _cleanup_free_ char *info_path = strdup_printf("%s/daemon-info.json", runtime);
        write_file_atomic(info_path, json_to_line(info, NULL), strlen(json_to_line(info, NULL)), 0600);
        json_object_put(info);

        json_object *script = NULL;
        const char *script_path = getenv("TF_FAKE_SCRIPT");
        if (script_path) {
                char *data = NULL;
                size_t len;
                if (read_file(script_path, 1 << 24, &data, &len) == 0) json_parse_strict(data, len, &script);
                free(data);
        }
        _cleanup_free_ char *log = strdup_printf("%s/requests.jsonl", runtime);
        fake_serve(sock, script, log);
}

/* ------------------------------------------------------------------ */
/* fixtures                                                            */

static char *tmp;        /* test temp dir */
static char *runtime;    /* <tmp>/run */
static char *sock;       /* <runtime>/daemon.sock */
static char *self_exe;   /* this binary */
static pid_t server_pid; /* in-process fake server (client tests) */

static void setup(void) {
        tmp = tf_tmpdir_new("test-cli-client");
        runtime = strdup_printf("%s/run", tmp);
        sock = strdup_printf("%s/daemon.sock", runtime);
        self_exe = realpath("/proc/self/exe", NULL);
        ck_assert_ptr_nonnull(self_exe);
        setenv("TASKFERRY_RUNTIME_DIR", runtime, 1);
        _cleanup_free_ char *state = strdup_printf("%s/state", tmp);
        setenv("TASKFERRY_STATE_DIR", state, 1);
        unsetenv("TASKFERRY_SOCKET_PATH");
        unsetenv("TASKFERRY_AUTO_START");
        setenv("TASKFERRY_DAEMON", self_exe, 1);
        setenv("TF_FAKE_DAEMON", "serve", 1);
        unsetenv("TF_FAKE_SCRIPT");
        unsetenv("CLAUDE_CODE_SESSION_ID");
        unsetenv("TASKFERRY_WAIT_DEFAULT_TIMEOUT_MS");
        server_pid = 0;
}

/* Kill every fake daemon this test started (their pids are in <runtime>/starts). */
static void kill_started_daemons(void) {
        _cleanup_free_ char *starts = strdup_printf("%s/starts", runtime);
        char *data = NULL;
        size_t len;
        if (read_file(starts, 1 << 20, &data, &len) == 0) {
                for (char *p = data; p && *p; ) {
                        char *nl = strchr(p, '\n');
                        pid_t pid = (pid_t) strtol(p, NULL, 10);
                        /* The fake daemons are detached (not our children): wait
                         * for each through a pidfd, so the next CLI run can never
                         * reach a daemon that is still on its way out. */
                        int pfd = pid > 1 ? pidfd_open(pid, 0) : -1;
                        if (pid > 1) kill(pid, SIGTERM);
                        if (pfd >= 0) {
                                struct pollfd pf = {.fd = pfd, .events = POLLIN};
                                if (poll(&pf, 1, 10000) <= 0) {
                                        kill(pid, SIGKILL);
                                        (void) poll(&pf, 1, 10000);
                                }
                                close(pfd);
                        }
                        p = nl ? nl + 1 : NULL;
                }
        }
        free(data);
        /* each pid is signalled once */
        unlink(starts);
}

static void teardown(void) {
        if (server_pid > 0) {
                kill(server_pid, SIGTERM);
                waitpid(server_pid, NULL, 0);
        }
        kill_started_daemons();
        tmp = tf_tmpdir_free(tmp);
        free(runtime);
        free(sock);
        free(self_exe);
}

/* Start the fake server in-process (forked child) with a JSON script. */
static void start_server(const char *script_json) {
        ck_assert_int_ge(mkdir_p(runtime, 0700), 0);
        json_object *script = NULL;
        if (script_json) ck_assert_int_eq(json_parse_strict(script_json, strlen(script_json), &script), 0);
        server_pid = fork();
        ck_assert_int_ge(server_pid, 0);
        if (server_pid == 0) fake_serve(sock, script, NULL);
        json_object_put(script);
        /* wait until it listens */
        for (int i = 0; i < 2000; i++) {
                cli_client c = CLI_CLIENT_INIT;
                if (cli_client_connect(&c, sock) == 0) {
                        cli_client_close(&c);
                        return;
                }
                usleep(5000);
        }
        ck_abort_msg("fake server did not start");
}

/* c connected to the fake server's socket. */
static void fake_connect(cli_client *c) {
        *c = (cli_client) CLI_CLIENT_INIT;
        ck_assert_int_eq(cli_client_connect(c, sock), 0);
}

/* method (no params) called on c fails with want_r and, unless want_text is
 * NULL, that error text; a mismatch names the method. The error stays in
 * *err for the caller's other checks (and its cli_error_done). */
static void call_error(cli_client *c, const char *method, int want_r, const char *want_text, cli_error *err) {
        json_object *res = NULL;
        *err = (cli_error) {};
        int r = cli_client_call(c, method, NULL, &res, err);
        ck_assert_msg(r == want_r, "%s: %d, want %d (%s)", method, r, want_r, strnull(err->text));
        if (want_text)
                ck_assert_msg(streq_ptr(err->text, want_text), "%s: [%s], want [%s]", method, strnull(err->text),
                              want_text);
}

/* The same, the error dropped. */
static void call_fails(cli_client *c, const char *method, int want_r, const char *want_text) {
        cli_error err;
        call_error(c, method, want_r, want_text, &err);
        cli_error_done(&err);
}

static json_object *load_json(const char *path) {
        char *data = NULL;
        size_t len;
        ck_assert_int_eq(read_file(path, 1 << 24, &data, &len), 0);
        json_object *v = NULL;
        ck_assert_int_eq(json_parse_strict(data, len, &v), 0);
        free(data);
        return v;
}

static size_t count_starts(void) {
        _cleanup_free_ char *starts = strdup_printf("%s/starts", runtime);
        char *data = NULL;
        size_t len, n = 0;
        if (read_file(starts, 1 << 20, &data, &len) < 0) return 0;
        for (size_t i = 0; i < len; i++) n += data[i] == '\n';
        free(data);
        return n;
}


/* ------------------------------------------------------------------ */
/* requests against the in-process fake server                         */

START_TEST(test_call_echo_and_request_shape) {
        start_server(NULL);
        cli_client c;
        fake_connect(&c);
        _cleanup_json_ json_object *params = json_object_new_object();
        json_add_string(params, "taskId", "oc_1");
        cli_error err = {};
        _cleanup_json_ json_object *res = NULL;
        ck_assert_int_eq(cli_client_call(&c, "task.status", params, &res, &err), 0);
        ck_assert_str_eq(json_to_line(res, NULL), "{\"method\":\"task.status\",\"params\":{\"taskId\":\"oc_1\"}}");
        /* a second request on the same connection, NULL params → {} */
        _cleanup_json_ json_object *res2 = NULL;
        ck_assert_int_eq(cli_client_call(&c, "task.list", NULL, &res2, &err), 0);
        ck_assert_str_eq(json_to_line(json_get_object(res2, "params"), NULL), "{}");
        cli_client_close(&c);
}
END_TEST

START_TEST(test_call_skips_events_unknown_ids_and_empty_lines) {
        start_server("{\"task.status\":["
                     "\"{\\\"version\\\":1,\\\"type\\\":\\\"event\\\",\\\"subscriptionId\\\":\\\"s\\\",\\\"event\\\":{\\\"type\\\":\\\"task.state\\\"}}\","
                     "\"\","
                     "\"{\\\"version\\\":1,\\\"ok\\\":true,\\\"id\\\":\\\"someone-else\\\",\\\"result\\\":1}\","
                     "\"{\\\"version\\\":1,\\\"ok\\\":false,\\\"error\\\":{\\\"code\\\":\\\"C\\\",\\\"message\\\":\\\"m\\\",\\\"help\\\":\\\"h\\\",\\\"detail\\\":\\\"m\\\"},\\\"id\\\":\\\"other\\\"}\","
                     "\"{\\\"version\\\":1,\\\"type\\\":\\\"shutdown\\\",\\\"reason\\\":\\\"shutdown\\\"}\","
                     "\"{\\\"version\\\":1,\\\"ok\\\":true,\\\"id\\\":\\\"%ID%\\\",\\\"result\\\":{\\\"x\\\":1}}\"]}");
        cli_client c;
        fake_connect(&c);
        cli_error err = {};
        _cleanup_json_ json_object *res = NULL;
        ck_assert_int_eq(cli_client_call(&c, "task.status", NULL, &res, &err), 0);
        ck_assert_str_eq(json_to_line(res, NULL), "{\"x\":1}");
        cli_client_close(&c);
}
END_TEST

START_TEST(test_call_error_responses) {
        start_server("{"
                     "\"same\":[\"{\\\"version\\\":1,\\\"ok\\\":false,\\\"error\\\":{\\\"code\\\":\\\"REQUEST_FAILED\\\",\\\"message\\\":\\\"--model is required\\\",\\\"help\\\":\\\"pass --model\\\",\\\"detail\\\":\\\"--model is required\\\"},\\\"id\\\":\\\"%ID%\\\"}\"],"
                     "\"differs\":[\"{\\\"version\\\":1,\\\"ok\\\":false,\\\"error\\\":{\\\"code\\\":\\\"UNKNOWN_TASK\\\",\\\"message\\\":\\\"unknown task id: zzz\\\",\\\"help\\\":\\\"run taskferry list to see valid task ids\\\",\\\"detail\\\":\\\"error: unknown task id: zzz\\\\nhelp: run taskferry list to see valid task ids\\\"},\\\"id\\\":\\\"%ID%\\\"}\"],"
                     "\"nocode\":[\"{\\\"version\\\":1,\\\"ok\\\":false,\\\"error\\\":{\\\"code\\\":\\\"\\\",\\\"message\\\":\\\"m\\\",\\\"help\\\":\\\"h\\\",\\\"detail\\\":\\\"m\\\"},\\\"id\\\":\\\"%ID%\\\"}\"]"
                     "}");
        cli_client c;
        fake_connect(&c);
        cli_error err;
        call_error(&c, "same", -EBADMSG, "--model is required\nhelp: pass --model", &err);
        ck_assert_str_eq(err.code, "REQUEST_FAILED");
        ck_assert_int_eq(err.exit_code, CLI_EXIT_FAILURE);
        cli_error_done(&err);
        /* an error response does not break the connection */
        call_error(&c, "differs", -EBADMSG, "error: unknown task id: zzz\nhelp: run taskferry list to see valid task ids",
                   &err);
        ck_assert_str_eq(err.code, "UNKNOWN_TASK");
        _cleanup_json_ json_object *v = cli_error_value(&err);
        ck_assert_str_eq(json_to_line(v, NULL), "{\"error\":\"unknown task id: zzz\",\"help\":\"run taskferry list to see valid task ids\"}");
        cli_error_done(&err);
        call_error(&c, "nocode", -EBADMSG, NULL, &err);
        ck_assert_str_eq(err.code, "REQUEST_FAILED");
        cli_error_done(&err);
        cli_client_close(&c);
}
END_TEST

START_TEST(test_call_invalid_frames) {
        static const char *const bad[] = {
                "not json",
                "{\\\"version\\\":1,\\\"ok\\\":true,\\\"id\\\":\\\"%ID%\\\",\\\"result\\\":{},\\\"extra\\\":1}",
                "{\\\"version\\\":2,\\\"ok\\\":true,\\\"id\\\":\\\"%ID%\\\",\\\"result\\\":{}}",
                "{\\\"version\\\":1,\\\"ok\\\":false,\\\"error\\\":{\\\"code\\\":\\\"C\\\",\\\"message\\\":\\\"m\\\",\\\"help\\\":\\\"h\\\",\\\"detail\\\":\\\"m\\\"},\\\"id\\\":null}",
                "{\\\"version\\\":1,\\\"type\\\":\\\"event\\\",\\\"event\\\":{}}",
                "[1]",
        };
        _cleanup_free_ char *script = NULL;
        {
                char *buf = NULL;
                size_t size = 0;
                FILE *f = open_memstream(&buf, &size);
                fputc('{', f);
                for (size_t i = 0; i < ELEMENTSOF(bad); i++) fprintf(f, "%s\"bad%zu\":[\"%s\"]", i ? "," : "", i, bad[i]);
                fputc('}', f);
                fclose(f);
                script = buf;
        }
        start_server(script);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                cli_client c;
                fake_connect(&c);
                char method[16];
                snprintf(method, sizeof method, "bad%zu", i);
                call_fails(&c, method, -EPROTO, "taskferry daemon sent an invalid frame");
                /* the connection is gone afterwards */
                call_fails(&c, "task.list", -ECONNRESET, "taskferry daemon connection is closed");
                cli_client_close(&c);
        }
}
END_TEST

START_TEST(test_call_shutdown_and_close) {
        start_server("{"
                     "\"down\":[\"{\\\"version\\\":1,\\\"type\\\":\\\"shutdown\\\",\\\"reason\\\":\\\"shutdown\\\"}\",\"CLOSE\"],"
                     "\"restart\":[\"{\\\"version\\\":1,\\\"type\\\":\\\"shutdown\\\",\\\"reason\\\":\\\"restart\\\"}\",\"CLOSE\"],"
                     "\"gone\":[\"CLOSE\"]"
                     "}");
        static const struct { const char *method, *text; } cases[] = {
                { "down", "taskferry daemon connection closed" },
                { "restart", "taskferry daemon is restarting (config or version change) — retry your command in a moment" },
                { "gone", "taskferry daemon connection closed" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                cli_client c;
                fake_connect(&c);
                cli_error err;
                call_error(&c, cases[i].method, -ECONNRESET, cases[i].text, &err);
                ck_assert_int_eq(err.exit_code, CLI_EXIT_FAILURE);
                cli_error_done(&err);
                cli_client_close(&c);
        }
}
END_TEST

/* A socket-activated daemon whose start failed closes the connection
 * systemd handed it: the CLI shows daemon-boot.err if the daemon wrote it
 * since the connect, never a stale one. */
START_TEST(test_call_closed_by_a_failed_boot) {
        start_server("{\"gone\":[\"CLOSE\"]}");
        _cleanup_free_ char *be = strdup_printf("%s/daemon-boot.err", runtime);
        tf_paths p = {.runtime_dir = runtime, .socket_path = sock};
        for (int fresh = 0; fresh < 2; fresh++) {
                (void) unlink(be);
                ck_assert_int_eq(write_file_atomic(be, "error: env file /e is readable by group or other (mode 0644)\n",
                                                   strlen("error: env file /e is readable by group or other (mode 0644)\n"),
                                                   0600),
                                 0);
                if (!fresh) {
                        struct timespec old[2] = {{.tv_sec = time(NULL) - 3600}, {.tv_sec = time(NULL) - 3600}};
                        ck_assert_int_eq(utimensat(AT_FDCWD, be, old, 0), 0);
                }
                cli_client c = CLI_CLIENT_INIT;
                cli_error err = {};
                ck_assert_int_eq(cli_client_open(&c, &p, &err), 0);
                call_fails(&c, "gone", -ECONNRESET,
                           fresh ? "error: taskferry daemon connection closed\ndaemon boot failed: error: env file /e "
                                   "is readable by group or other (mode 0644)"
                                 : "taskferry daemon connection closed");
                cli_client_close(&c);
        }
        (void) unlink(be);
}
END_TEST

START_TEST(test_call_large_and_oversized_frames) {
        /* a valid 900 KiB response line is fine */
        size_t n = 900 * 1024;
        _cleanup_free_ char *big = malloc(n + 1);
        memset(big, 'y', n);
        big[n] = 0;
        _cleanup_free_ char *script = strdup_printf(
                "{\"large\":[\"{\\\"version\\\":1,\\\"ok\\\":true,\\\"id\\\":\\\"%%ID%%\\\",\\\"result\\\":\\\"%s\\\"}\"],"
                "\"huge\":[\"BIG\"]}", big);
        start_server(script);
        cli_client c;
        fake_connect(&c);
        cli_error err = {};
        _cleanup_json_ json_object *res = NULL;
        ck_assert_int_eq(cli_client_call(&c, "large", NULL, &res, &err), 0);
        ck_assert_int_eq(json_object_get_string_len(res), (int) n);
        /* an unterminated remainder over 1 MiB is a protocol failure */
        call_fails(&c, "huge", -EPROTO, "taskferry daemon message exceeds 1048576 bytes");
        cli_client_close(&c);
}
END_TEST

START_TEST(test_health_probe) {
        ck_assert_int_lt(proto_health_probe(sock, 200), 0); /* nothing listens */
        start_server("{\"bogus.method\":[]}");
        ck_assert_int_eq(proto_health_probe(sock, 2000), 1);
}
END_TEST

START_TEST(test_health_probe_rejects_bad_answer) {
        start_server("{\"system.health\":[\"{\\\"version\\\":1,\\\"ok\\\":true,\\\"id\\\":\\\"health-check\\\",\\\"result\\\":{\\\"healthy\\\":false}}\"]}");
        ck_assert_int_eq(proto_health_probe(sock, 2000), 0); /* it answers, but not healthy */
}
END_TEST

/* "healthy":true somewhere in the line is not enough: the answer must be the
 * probe's own (the daemon's socket bind used to accept any such line) */
START_TEST(test_health_probe_rejects_other_id) {
        start_server("{\"system.health\":[\"{\\\"version\\\":1,\\\"ok\\\":true,\\\"id\\\":\\\"other\\\",\\\"result\\\":{\\\"healthy\\\":true}}\"]}");
        ck_assert_int_eq(proto_health_probe(sock, 2000), 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* auto-start                                                          */

static int open_client(cli_client *c, cli_error *err) {
        tf_paths p = {};
        ck_assert_int_eq(tf_paths_resolve(&p), 0);
        int r = cli_client_open(c, &p, err);
        tf_paths_done(&p);
        return r;
}

/* c opened through open_client, which must succeed (auto-starting a
 * daemon when none runs). */
static void open_ok(cli_client *c) {
        *c = (cli_client) CLI_CLIENT_INIT;
        cli_error err = {};
        int r = open_client(c, &err);
        ck_assert_msg(r == 0, "open_client: %d %s", r, strnull(err.text));
        cli_error_done(&err);
}

/* open_client fails to reach a daemon (-EIO): the error in *err, for the
 * caller's checks (and its cli_error_done). */
static void open_fails(cli_error *err) {
        cli_client c = CLI_CLIENT_INIT;
        *err = (cli_error) {};
        ck_assert_int_eq(open_client(&c, err), -EIO);
}

/* open_fails, and the error's JSON value says error and (unless NULL)
 * help. */
static void open_fails_with(const char *error, const char *help) {
        cli_error err;
        open_fails(&err);
        _cleanup_json_ json_object *v = cli_error_value(&err);
        ck_assert_str_eq(json_get_string(v, "error"), error);
        if (help) ck_assert_str_eq(json_get_string(v, "help"), help);
        cli_error_done(&err);
}

/* open_fails_with the auto-start's timeout: connecting to sock failed with
 * connect_error (strerror's words), then what the start said. */
static void open_fails_unready(const char *connect_error, const char *then, const char *help) {
        _cleanup_free_ char *want = strdup_printf(
                "taskferry daemon did not become ready within 5000ms: cannot connect to %s: %s\n%s", sock, connect_error,
                then);
        open_fails_with(want, help);
}

static int64_t health_pid(cli_client *c) {
        cli_error err = {};
        _cleanup_json_ json_object *res = NULL;
        ck_assert_int_eq(cli_client_call(c, "system.health", NULL, &res, &err), 0);
        int64_t pid = 0;
        ck_assert(json_get_int64(res, "pid", &pid));
        return pid;
}

START_TEST(test_autostart_spawns_daemon) {
        /* a stray inherited descriptor must not reach the daemon */
        int stray = open("/dev/null", O_RDONLY);
        ck_assert_int_ge(stray, 0);
        ck_assert_int_eq(dup2(stray, 50), 50);
        close(stray);
        setenv("TF_MARKER", "marker-value", 1);
        cli_client c = CLI_CLIENT_INIT;
        cli_error err = {};
        ck_assert_int_eq(open_client(&c, &err), 0);
        ck_assert_ptr_null(err.text);
        int64_t pid = health_pid(&c);
        ck_assert_int_gt(pid, 1);
        ck_assert_uint_eq(count_starts(), 1);

        struct stat st;
        ck_assert_int_eq(stat(runtime, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0700);
        _cleanup_free_ char *lock = strdup_printf("%s/daemon-start.lock", runtime);
        ck_assert_int_eq(stat(lock, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0600);
        _cleanup_free_ char *log = strdup_printf("%s/daemon-boot-stderr.log", runtime);
        ck_assert_int_eq(stat(log, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0600);

        _cleanup_free_ char *info_path = strdup_printf("%s/daemon-info.json", runtime);
        _cleanup_json_ json_object *info = load_json(info_path);
        _cleanup_free_ char *state = strdup_printf("%s/state", tmp);
        ck_assert_str_eq(json_get_string(info, "state"), state);
        ck_assert_str_eq(json_get_string(info, "runtime"), runtime);
        ck_assert_str_eq(json_get_string(info, "socket"), sock);
        ck_assert_str_eq(json_get_string(info, "marker"), "marker-value");
        ck_assert_str_eq(json_get_string(info, "cwd"), "/");
        ck_assert(json_get_bool(info, "stdinNull", false));
        ck_assert(json_get_bool(info, "stdoutNull", false));
        ck_assert(json_get_bool(info, "stderrFile", false));
        /* double fork + setsid: a new session, and not its leader */
        int64_t sid = 0, dpid = 0;
        ck_assert(json_get_int64(info, "sid", &sid));
        ck_assert(json_get_int64(info, "pid", &dpid));
        ck_assert_int_ne(sid, getsid(0));
        ck_assert_int_ne(sid, dpid);
        ck_assert_int_eq(dpid, pid);
        ck_assert(json_get_bool(info, "fd50Closed", false));

        /* a second open connects to the running daemon without starting another */
        cli_client c2 = CLI_CLIENT_INIT;
        ck_assert_int_eq(open_client(&c2, &err), 0);
        ck_assert_int_eq(health_pid(&c2), pid);
        ck_assert_uint_eq(count_starts(), 1);
        cli_client_close(&c);
        cli_client_close(&c2);
}
END_TEST

START_TEST(test_autostart_replaces_stale_socket) {
        /* a socket file nobody listens on → ECONNREFUSED → auto-start */
        ck_assert_int_ge(mkdir_p(runtime, 0700), 0);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        strncpy(sa.sun_path, sock, sizeof sa.sun_path - 1);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        close(fd);
        cli_client probe = CLI_CLIENT_INIT;
        ck_assert_int_eq(cli_client_connect(&probe, sock), -ECONNREFUSED);

        cli_client c;
        open_ok(&c);
        ck_assert_int_gt(health_pid(&c), 1);
        ck_assert_uint_eq(count_starts(), 1);
        cli_client_close(&c);
}
END_TEST

START_TEST(test_autostart_disabled) {
        setenv("TASKFERRY_AUTO_START", "0", 1);
        cli_error err;
        open_fails(&err);
        _cleanup_free_ char *want = strdup_printf("cannot connect to %s: No such file or directory", sock);
        ck_assert_str_eq(err.text, want);
        ck_assert_int_eq(err.exit_code, CLI_EXIT_FAILURE);
        ck_assert_uint_eq(count_starts(), 0);
        cli_error_done(&err);
}
END_TEST

START_TEST(test_autostart_boot_failure_reports_boot_err) {
        setenv("TF_FAKE_DAEMON", "bootfail", 1);
        _cleanup_free_ char *want_help = strdup_printf("check %s permissions and daemon startup diagnostics, then retry", runtime);
        open_fails_unready("No such file or directory",
                           "daemon boot failed: config key \"x\" in /c/config.json must be a number (got \"y\")\n"
                           "second line",
                           want_help);
        ck_assert_uint_eq(count_starts(), 1);
}
END_TEST

START_TEST(test_autostart_removes_old_boot_err) {
        /* a daemon-boot.err left by an earlier failure is removed before the spawn */
        ck_assert_int_ge(mkdir_p(runtime, 0700), 0);
        _cleanup_free_ char *old = strdup_printf("%s/daemon-boot.err", runtime);
        ck_assert_int_eq(write_file_atomic(old, "stale failure", 13, 0644), 0);
        cli_client c;
        open_ok(&c);
        ck_assert_int_eq(access(old, F_OK), -1);
        cli_client_close(&c);
}
END_TEST

START_TEST(test_autostart_booter_stderr) {
        setenv("TF_FAKE_DAEMON", "stderr", 1);
        open_fails_unready("No such file or directory", "booter subprocess failed before startup: fake daemon crashed early",
                           NULL);
}
END_TEST

START_TEST(test_autostart_missing_or_unexecutable_binary) {
        setenv("TASKFERRY_DAEMON", "/nonexistent/taskferryd", 1);
        cli_error err;
        open_fails(&err);
        ck_assert(startswith(err.text, "error: taskferry daemon binary not found"));
        cli_error_done(&err);

        /* executable bit but not a program: the exec failure is reported */
        _cleanup_free_ char *junk = strdup_printf("%s/junk", tmp);
        ck_assert_int_eq(write_file_atomic(junk, "\x01\x02garbage", 9, 0755), 0);
        setenv("TASKFERRY_DAEMON", junk, 1);
        _cleanup_free_ char *then = strdup_printf("booter subprocess failed before startup: cannot execute %s: Exec format error",
                                                  junk);
        open_fails_unready("Connection refused", then, NULL);
}
END_TEST

START_TEST(test_autostart_race_starts_one_daemon) {
        enum { N = 6 };
        pid_t kids[N];
        for (int i = 0; i < N; i++) {
                kids[i] = fork();
                ck_assert_int_ge(kids[i], 0);
                if (kids[i] == 0) {
                        cli_client c = CLI_CLIENT_INIT;
                        cli_error err = {};
                        tf_paths p = {};
                        if (tf_paths_resolve(&p) < 0 || cli_client_open(&c, &p, &err) < 0) _exit(1);
                        json_object *res = NULL;
                        if (cli_client_call(&c, "system.health", NULL, &res, &err) < 0) _exit(2);
                        _exit(json_get_bool(res, "healthy", false) ? 0 : 3);
                }
        }
        for (int i = 0; i < N; i++) {
                int status;
                ck_assert_int_eq(waitpid(kids[i], &status, 0), kids[i]);
                ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d failed", i);
        }
        ck_assert_uint_eq(count_starts(), 1);
}
END_TEST

START_TEST(test_find_daemon_order) {
        unsetenv("TASKFERRY_DAEMON");
        /* Without the override the lookup finds an executable or nothing. */
        _cleanup_free_ char *found = NULL;
        int r = cli_find_daemon(&found);
        if (r >= 0) ck_assert_int_eq(access(found, X_OK), 0);
        else ck_assert_int_eq(r, -ENOENT);
        setenv("TASKFERRY_DAEMON", self_exe, 1);
        _cleanup_free_ char *over = NULL;
        ck_assert_int_eq(cli_find_daemon(&over), 0);
        ck_assert_str_eq(over, self_exe);
}
END_TEST

/* ------------------------------------------------------------------ */
/* the taskferry binary                                                */

typedef struct cli_run {
        int exit_code;
        char *out, *err;
} cli_run;

static void cli_run_done(cli_run *r) {
        free(r->out);
        free(r->err);
}

/* r exited 0 (else its output is the message); r freed. */
static void cli_ok(cli_run r) {
        ck_assert_msg(r.exit_code == 0, "exit %d: %s %s", r.exit_code, strnull(r.out), strnull(r.err));
        cli_run_done(&r);
}

/* r exited with exit_code and printed exactly out (a mismatch shows both
 * streams). */
static void cli_printed(const cli_run *r, int exit_code, const char *out) {
        ck_assert_msg(r->exit_code == exit_code, "exit %d, want %d: %s %s", r->exit_code, exit_code, strnull(r->out),
                      strnull(r->err));
        ck_assert_msg(streq_ptr(r->out, out), "printed [%s], want [%s]", strnull(r->out), out);
}

/* Run build/taskferry with args (NULL-terminated) in cwd tmp, stdin from
 * `input` (NULL: /dev/null), the current environment. */
static cli_run run_cli(const char *input, ...) {
        _cleanup_free_ char *bin = strdup_printf("%s/taskferry", TASKFERRY_BUILD_DIR);
        ck_assert_msg(access(bin, X_OK) == 0, "%s not built", bin);
        char *argv[64];
        size_t n = 0;
        argv[n++] = "sh";
        argv[n++] = "-c";
        argv[n++] = input ? "printf '%s' \"$TF_STDIN\" | exec \"$@\"" : "exec \"$@\" </dev/null";
        argv[n++] = "sh";
        argv[n++] = bin;
        va_list ap;
        va_start(ap, input);
        for (char *s; (s = va_arg(ap, char *)); ) argv[n++] = s;
        va_end(ap);
        argv[n] = NULL;
        if (input) setenv("TF_STDIN", input, 1);
        run_result r = {};
        ck_assert_int_eq(run_command(argv, NULL, tmp, 1 << 24, -1, &r), 0);
        unsetenv("TF_STDIN");
        cli_run out = { .exit_code = r.exit_code, .out = r.out, .err = r.err };
        r.out = r.err = NULL;
        run_result_done(&r);
        if (!out.out) out.out = strdup("");
        if (!out.err) out.err = strdup("");
        return out;
}

static void write_script(const char *json) {
        _cleanup_free_ char *path = strdup_printf("%s/script.json", tmp);
        ck_assert_int_eq(write_file_atomic(path, json, strlen(json), 0600), 0);
        setenv("TF_FAKE_SCRIPT", path, 1);
}

/* The params the fake daemon received for the last request of `method`. */
static json_object *last_params(const char *method) {
        _cleanup_free_ char *path = strdup_printf("%s/requests.jsonl", runtime);
        char *data = NULL;
        size_t len;
        ck_assert_int_eq(read_file(path, 1 << 24, &data, &len), 0);
        json_object *found = NULL;
        for (char *line = data; line && *line; ) {
                char *nl = strchr(line, '\n');
                json_object *req = NULL;
                if (json_parse_strict(line, nl ? (size_t) (nl - line) : strlen(line), &req) == 0) {
                        if (streq_ptr(json_get_string(req, "method"), method)) {
                                json_object_put(found);
                                found = json_object_get(json_get_object(req, "params"));
                                /* the envelope is exactly {version,id,method,params} */
                                ck_assert_int_eq(json_object_object_length(req), 4);
                                ck_assert_int_eq(json_object_get_string_len(json_object_object_get(req, "id")), 36);
                        }
                        json_object_put(req);
                }
                line = nl ? nl + 1 : NULL;
        }
        free(data);
        ck_assert_msg(found, "no %s request", method);
        return found;
}

/* The last request of method had exactly these params (JSON text). */
static void params_are(const char *method, const char *json) {
        _cleanup_json_ json_object *p = last_params(method);
        ck_assert_msg(streq(json_to_line(p, NULL), json), "%s: %s, want %s", method, json_to_line(p, NULL), json);
}

/* The last request of method had the string param key == value. */
static void param_is(const char *method, const char *key, const char *value) {
        _cleanup_json_ json_object *p = last_params(method);
        const char *got = json_get_string(p, key);
        ck_assert_msg(streq_ptr(got, value), "%s %s: [%s], want [%s]", method, key, strnull(got), value);
}

#define STATUS_RESULT                                                                                     \
        "{\\\"id\\\":\\\"oc_a\\\",\\\"status\\\":\\\"done\\\",\\\"directory\\\":\\\"/w\\\",\\\"model\\\":\\\"p/m\\\","    \
        "\\\"startedAt\\\":\\\"2026-11-30T13:35:06.026Z\\\",\\\"exitCode\\\":0,\\\"signal\\\":null,"                   \
        "\\\"changesetStatus\\\":\\\"pending\\\",\\\"cancelRequested\\\":false,\\\"outputDir\\\":\\\"/s/o\\\","        \
        "\\\"logBytesWritten\\\":12,\\\"logLastWriteAt\\\":null,\\\"logHasEvent\\\":false}"

START_TEST(test_cli_status_lean_toon_and_json) {
        write_script("{\"task.status\":[\"{\\\"version\\\":1,\\\"ok\\\":true,\\\"id\\\":\\\"%ID%\\\",\\\"result\\\":" STATUS_RESULT "}\"]}");
        cli_run r = run_cli(NULL, "status", "oc_a", NULL);
        cli_printed(&r, 0,
                    "id: oc_a\nstatus: done\nstartedAt: \"2026-11-30T13:35:06.026Z\"\nexitCode: 0\nsignal: null\n"
                    "changesetStatus: pending\noutputDir: /s/o\nlogBytesWritten: 12\nlogLastWriteAt: null\nlogHasEvent: false\n"
                    "next: \"Run taskferry result with task id \\\"oc_a\\\" to see the final message; pass --full here for directory/model/log path details\"\n");
        ck_assert_str_eq(r.err, "");
        cli_run_done(&r);
        _cleanup_json_ json_object *p = last_params("task.status");
        ck_assert_str_eq(json_to_line(p, NULL), "{\"taskId\":\"oc_a\"}");

        /* --json: the raw daemon result as one JSON document */
        r = run_cli(NULL, "status", "oc_a", "--json", NULL);
        ck_assert_int_eq(r.exit_code, 0);
        _cleanup_json_ json_object *raw = NULL;
        ck_assert_int_eq(json_parse_strict(r.out, strlen(r.out), &raw), 0);
        ck_assert_str_eq(json_get_string(raw, "directory"), "/w");
        ck_assert_str_eq(json_get_string(raw, "model"), "p/m");
        cli_run_done(&r);
        ck_assert_uint_eq(count_starts(), 1);
}
END_TEST


/* advisor's second context source: inside a task
 * ($TASKFERRY_TASK_ID, no $CLAUDE_CODE_SESSION_ID) the CLI asks task.tail
 * for chars = min(budget, 131072) and attaches its text after the caller's
 * --prompt and the fixed instructions; "none observed yet" is no context;
 * --summarize-context condenses it through a throwaway dispatch. */
#define TAIL_RESULT(text) \
        "{\"task.tail\":[\"{\\\"version\\\":1,\\\"ok\\\":true,\\\"id\\\":\\\"%ID%\\\",\\\"result\\\":{\\\"taskId\\\":\\\"oc_caller\\\"," \
        "\\\"status\\\":\\\"running\\\",\\\"text\\\":\\\"" text "\\\",\\\"textTotalChars\\\":5,\\\"truncated\\\":false}}\"]"

START_TEST(test_cli_advisor_ferry_log_context) {
        unsetenv("CLAUDE_CODE_SESSION_ID");
        setenv("TASKFERRY_TASK_ID", "oc_caller", 1);
        write_script(TAIL_RESULT("last words of the ferry") "}");
        cli_ok(run_cli(NULL, "advisor", "--model", "m/x", "--prompt", "ask", NULL));
        params_are("task.tail", "{\"taskId\":\"oc_caller\",\"chars\":120000}");
        _cleanup_json_ json_object *ap = last_params("task.advisor");
        _cleanup_free_ char *want = strdup_printf("ask\n%s\n\n--- attached context (ferry-log, 23 chars) ---\nlast words of the ferry\n---",
                                                  cli_advisor_instructions);
        ck_assert_str_eq(json_get_string(ap, "prompt"), want);
        ck_assert_str_eq(json_get_string(ap, "model"), "m/x");
        ck_assert(json_get_object(ap, "env") != NULL);

        /* the budget caps chars at task.tail's 131072 */
        setenv("TASKFERRY_ADVISOR_CONTEXT_CHARS", "500000", 1);
        cli_ok(run_cli(NULL, "advisor", "--model", "m/x", "--prompt", "ask", NULL));
        params_are("task.tail", "{\"taskId\":\"oc_caller\",\"chars\":131072}");
        unsetenv("TASKFERRY_ADVISOR_CONTEXT_CHARS");

        /* no text yet: no context; without --prompt a usage error (a new
         * fake daemon for the new script) */
        kill_started_daemons();
        write_script(TAIL_RESULT("none observed yet") "}");
        cli_run r = run_cli(NULL, "advisor", "--model", "m/x", NULL);
        ck_assert_int_eq(r.exit_code, 2);
        ck_assert(startswith(r.out, "error: \"advisor needs context or an explicit --prompt: no context source found\""));
        cli_run_done(&r);
        cli_ok(run_cli(NULL, "advisor", "--model", "m/x", "--prompt", "only this", NULL));
        _cleanup_free_ char *want2 = strdup_printf("only this\n%s", cli_advisor_instructions);
        param_is("task.advisor", "prompt", want2);

        /* --summarize-context: dispatch, wait, result; the condensed text replaces it */
        kill_started_daemons();
        write_script(TAIL_RESULT("a long ferry log")
                     ",\"task.dispatch\":[\"{\\\"version\\\":1,\\\"ok\\\":true,\\\"id\\\":\\\"%ID%\\\",\\\"result\\\":{\\\"id\\\":\\\"oc_sum\\\",\\\"status\\\":\\\"queued\\\"}}\"]"
                     ",\"task.wait\":[\"{\\\"version\\\":1,\\\"ok\\\":true,\\\"id\\\":\\\"%ID%\\\",\\\"result\\\":{\\\"id\\\":\\\"oc_sum\\\",\\\"status\\\":\\\"done\\\"}}\"]"
                     ",\"task.result\":[\"{\\\"version\\\":1,\\\"ok\\\":true,\\\"id\\\":\\\"%ID%\\\",\\\"result\\\":{\\\"taskId\\\":\\\"oc_sum\\\",\\\"status\\\":\\\"done\\\",\\\"message\\\":\\\"condensed\\\"}}\"]}");
        setenv("TASKFERRY_ADVISOR_SUMMARIZER_MODEL", "cheap/model", 1);
        cli_ok(run_cli(NULL, "advisor", "--model", "m/x", "--summarize-context", NULL));
        unsetenv("TASKFERRY_ADVISOR_SUMMARIZER_MODEL");
        param_is("task.dispatch", "model", "cheap/model");
        _cleanup_free_ char *lead = strdup_printf("%s\n\na long ferry log", cli_advisor_condense_lead);
        param_is("task.dispatch", "prompt", lead);
        params_are("task.wait", "{\"taskId\":\"oc_sum\",\"timeoutMs\":120000}");
        _cleanup_free_ char *want3 = strdup_printf("%s\n\n--- attached context (summarized ferry-log, 9 chars) ---\ncondensed\n---",
                                                   cli_advisor_instructions);
        param_is("task.advisor", "prompt", want3);
        unsetenv("TASKFERRY_TASK_ID");
}
END_TEST

START_TEST(test_cli_daemon_error) {
        write_script("{\"task.status\":[\"{\\\"version\\\":1,\\\"ok\\\":false,\\\"error\\\":{\\\"code\\\":\\\"UNKNOWN_TASK\\\",\\\"message\\\":\\\"unknown task id: nope\\\",\\\"help\\\":\\\"run taskferry list to see valid task ids\\\",\\\"detail\\\":\\\"error: unknown task id: nope\\\\nhelp: run taskferry list to see valid task ids\\\"},\\\"id\\\":\\\"%ID%\\\"}\"]}");
        cli_run r = run_cli(NULL, "status", "nope", NULL);
        cli_printed(&r, 1, "error: \"unknown task id: nope\"\nhelp: run taskferry list to see valid task ids\n");
        ck_assert_str_eq(r.err, "");
        cli_run_done(&r);
        r = run_cli(NULL, "--json", "status", "nope", NULL);
        cli_printed(&r, 1,
                    "{\"error\":\"unknown task id: nope\",\"help\":\"run taskferry list to see valid task ids\"}\n");
        cli_run_done(&r);
}
END_TEST

START_TEST(test_cli_usage_errors_do_not_start_daemon) {
        cli_run r = run_cli(NULL, "dispatch", NULL);
        ck_assert_int_eq(r.exit_code, 2);
        ck_assert(startswith(r.out, "error: \"--prompt is required\"\nhelp: \"Valid flags for dispatch: --prompt <text>, "));
        cli_run_done(&r);
        r = run_cli(NULL, "dispatch", "--prompt", "p", "--directory", "/nonexistent/dir", NULL);
        ck_assert_int_eq(r.exit_code, 2);
        ck_assert(startswith(r.out, "error: \"directory does not exist: /nonexistent/dir\"\nhelp: Use an existing directory path for --directory (No such file or directory)\n"));
        cli_run_done(&r);
        r = run_cli(NULL, "bogus", NULL);
        cli_printed(&r, 2,
                    "error: \"unknown command: bogus\"\nhelp: Run `taskferry --help` to see available commands\n");
        cli_run_done(&r);
        /* a command of the spec's surface that is not built yet says so, and starts no daemon */
        r = run_cli(NULL, "setup", NULL);
        ck_assert_int_eq(r.exit_code, 1);
        {
                /* the list comes from the one command table */
                _cleanup_free_ char *available = cli_available_commands();
                _cleanup_free_ char *want = strdup_printf(
                        "error: setup is not available in this build of taskferry yet\nhelp: \"available now: %s\"\n", available);
                ck_assert_str_eq(r.out, want);
                ck_assert_ptr_nonnull(strstr(available, "dispatch, cancel, accept, reject, output, wait, advisor, status"));
                ck_assert_ptr_null(strstr(available, "setup"));
        }
        cli_run_done(&r);
        r = run_cli(NULL, "--json", "wait", "x", "--timeout", "1d", NULL);
        ck_assert_int_eq(r.exit_code, 2);
        _cleanup_json_ json_object *v = NULL;
        ck_assert_int_eq(json_parse_strict(r.out, strlen(r.out), &v), 0);
        ck_assert_str_eq(json_get_string(v, "error"), "--timeout must be milliseconds or a duration like 30s, 5m, 1h");
        cli_run_done(&r);
        r = run_cli("", "dispatch", "--prompt", "-", NULL);
        ck_assert_int_eq(r.exit_code, 2);
        ck_assert(startswith(r.out, "error: \"--prompt - received empty stdin\"\n"));
        cli_run_done(&r);
        ck_assert_uint_eq(count_starts(), 0);
}
END_TEST

START_TEST(test_cli_help_and_version) {
        cli_run r = run_cli(NULL, "cancel", "--help", NULL);
        cli_printed(&r, 0,
                    "command: cancel\nusage: \"taskferry cancel <id> [--grace-ms <number>]\"\n"
                    "description: Cancel queued or running work.\noptions:\n"
                    "  \"--grace-ms <number>\": \"milliseconds before SIGKILL, default 5000\"\n"
                    "examples[2]: taskferry cancel <id>,taskferry cancel <id> --grace-ms 10000\n");
        cli_run_done(&r);
        r = run_cli(NULL, "-h", NULL);
        ck_assert_int_eq(r.exit_code, 0);
        ck_assert(startswith(r.out, "command: taskferry\nusage: \"taskferry <command> [options]\"\n"));
        cli_run_done(&r);
        r = run_cli(NULL, "-V", NULL);
        ck_assert_int_eq(r.exit_code, 0);
        ck_assert(startswith(r.out, "name: taskferry\nversion: "));
        ck_assert(strstr(r.out, "\nprotocolVersion: 1\n"));
        cli_run_done(&r);
        ck_assert_uint_eq(count_starts(), 0);
}
END_TEST

START_TEST(test_cli_dispatch_params) {
        _cleanup_free_ char *repo = strdup_printf("%s/repo/sub", tmp);
        ck_assert_int_ge(mkdir_p(repo, 0755), 0);
        _cleanup_free_ char *link = strdup_printf("%s/link", tmp);
        ck_assert_int_eq(symlink(repo, link), 0);
        setenv("TF_MARKER", "secret-ish", 1);
        setenv("CLAUDE_CODE_SESSION_ID", "claude-session-1", 1);
        cli_run r = run_cli("Fix the tests\r\n", "dispatch", "--prompt", "-", "--directory", link, "--executor", "shell",
                            "--no-sandbox", "--rw-bind", "/a, /b", "--allowed-dirs", "/c", "--class", "impl", NULL);
        ck_assert_msg(r.exit_code == 0, "%s", r.out);
        ck_assert_str_eq(r.err, "warning: --allowed-dirs is deprecated; use --rw-bind (same behavior). It will be removed in the next major release.\n");
        /* raw result printed as TOON */
        ck_assert(startswith(r.out, "method: task.dispatch\nparams:\n  env:\n"));
        cli_run_done(&r);

        _cleanup_json_ json_object *p = last_params("task.dispatch");
        /* key order: env, prompt, directory, each set option, originSessionId */
        const char *want_keys[] = { "env", "prompt", "directory", "noSandbox", "allowedDirs", "rwBind", "executor",
                                    "class", "originSessionId", NULL };
        size_t i = 0;
        json_object_object_foreach(p, k, v) {
                (void) v;
                ck_assert_ptr_nonnull(want_keys[i]);
                ck_assert_str_eq(k, want_keys[i]);
                i++;
        }
        ck_assert_ptr_null(want_keys[i]);
        ck_assert_str_eq(json_get_string(p, "prompt"), "Fix the tests");
        ck_assert_str_eq(json_get_string(p, "directory"), repo);
        ck_assert_str_eq(json_get_string(json_get_object(p, "env"), "TF_MARKER"), "secret-ish");
        ck_assert_str_eq(json_get_string(json_get_object(p, "env"), "CLAUDE_CODE_SESSION_ID"), "claude-session-1");
        ck_assert_str_eq(json_get_string(p, "originSessionId"), "claude-session-1");
        ck_assert_str_eq(json_to_line(json_get_array(p, "rwBind"), NULL), "[\"/a\",\"/b\"]");
        ck_assert_str_eq(json_to_line(json_get_array(p, "allowedDirs"), NULL), "[\"/c\"]");
        ck_assert(json_get_bool(p, "noSandbox", false));
        ck_assert_str_eq(json_get_string(p, "executor"), "shell");

        /* literal cwd by default (not the workspace root) */
        cli_ok(run_cli(NULL, "dispatch", "--prompt", "hello", NULL));
        _cleanup_json_ json_object *p2 = last_params("task.dispatch");
        ck_assert_str_eq(json_get_string(p2, "directory"), tmp);
        ck_assert_str_eq(json_get_string(p2, "prompt"), "hello");
        ck_assert(!json_object_object_get_ex(p2, "model", NULL));
        ck_assert(!json_object_object_get_ex(p2, "noSandbox", NULL));
}
END_TEST

START_TEST(test_cli_wait_timeout_chain) {
        /* --json prints the echo, which carries the params the CLI sent */
        cli_ok(run_cli(NULL, "wait", "oc_w", "--json", NULL));
        params_are("task.wait", "{\"taskId\":\"oc_w\",\"timeoutMs\":900000}");

        setenv("TASKFERRY_WAIT_DEFAULT_TIMEOUT_MS", "0", 1);
        cli_run r = run_cli(NULL, "wait", "oc_w", "--json", NULL);
        cli_run_done(&r);
        params_are("task.wait", "{\"taskId\":\"oc_w\"}");

        setenv("TASKFERRY_WAIT_DEFAULT_TIMEOUT_MS", "1500", 1);
        r = run_cli(NULL, "wait", "oc_w", "--json", "--tail-chars", "10", NULL);
        cli_run_done(&r);
        params_are("task.wait", "{\"taskId\":\"oc_w\",\"timeoutMs\":1500,\"tailChars\":10}");

        r = run_cli(NULL, "wait", "oc_w", "--json", "--timeout", "0", NULL);
        cli_run_done(&r);
        params_are("task.wait", "{\"taskId\":\"oc_w\",\"timeoutMs\":0}");
}
END_TEST

START_TEST(test_cli_accept) {
        write_script("{"
                     "\"task.accept\":[\"{\\\"version\\\":1,\\\"ok\\\":true,\\\"id\\\":\\\"%ID%\\\",\\\"result\\\":{\\\"taskId\\\":\\\"oc_a\\\",\\\"changesetStatus\\\":\\\"pending\\\",\\\"applied\\\":false,\\\"reason\\\":\\\"error: patch failed: a.c:1\\\\nerror: a.c: patch does not apply\\\"}}\"],"
                     "\"task.reject\":[\"{\\\"version\\\":1,\\\"ok\\\":true,\\\"id\\\":\\\"%ID%\\\",\\\"result\\\":{\\\"taskId\\\":\\\"oc_a\\\",\\\"changesetStatus\\\":\\\"rejected\\\",\\\"cleanupFailed\\\":true}}\"]"
                     "}");
        cli_run r = run_cli(NULL, "accept", "oc_a", "--force", NULL);
        cli_printed(&r, 1,
                    "error: \"changeset for task oc_a failed to apply\\n  reason: error: patch failed: a.c:1\\n  error: a.c: patch does not apply\"\n"
                    "help: \"the task is still pending -- resolve the reported conflict in the target directory, then retry \\\"taskferry accept oc_a\\\", or discard the changeset with \\\"taskferry reject oc_a\\\"\"\n");
        cli_run_done(&r);
        params_are("task.accept", "{\"taskId\":\"oc_a\",\"force\":true}");

        /* --json: the daemon's result, still exit 1 */
        r = run_cli(NULL, "accept", "oc_a", "--json", NULL);
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert(startswith(r.out, "{\"taskId\":\"oc_a\",\"changesetStatus\":\"pending\",\"applied\":false,"));
        cli_run_done(&r);
        params_are("task.accept", "{\"taskId\":\"oc_a\"}");

        r = run_cli(NULL, "reject", "oc_a", NULL);
        cli_printed(&r, 0, "taskId: oc_a\nchangesetStatus: rejected\ncleanupFailed: true\n");
        ck_assert_str_eq(r.err, "warning: changeset rejected, but overlay cleanup failed -- oc_a's overlay dir remains on disk (a daemon restart will sweep it)\n");
        cli_run_done(&r);
}
END_TEST

START_TEST(test_cli_accept_applied_warnings) {
        write_script("{\"task.accept\":[\"{\\\"version\\\":1,\\\"ok\\\":true,\\\"id\\\":\\\"%ID%\\\",\\\"result\\\":{\\\"taskId\\\":\\\"oc_a\\\",\\\"changesetStatus\\\":\\\"accepted\\\",\\\"applied\\\":true,\\\"checkStatus\\\":null,\\\"cleanupFailed\\\":true}}\"]}");
        cli_run r = run_cli(NULL, "accept", "oc_a", NULL);
        cli_printed(&r, 0,
                    "taskId: oc_a\nchangesetStatus: accepted\napplied: true\ncheckStatus: null\ncleanupFailed: true\n");
        ck_assert_str_eq(r.err,
                         "warning: changeset applied, but overlay cleanup failed -- oc_a's overlay dir remains on disk (a daemon restart will sweep it)\n"
                         "warning: changeset applied, but this repo declares no check command in .taskferry.toml -- nothing was verified before landing\n");
        cli_run_done(&r);
}
END_TEST

START_TEST(test_cli_result_params_and_rewrite) {
        write_script("{\"task.tail\":[\"{\\\"version\\\":1,\\\"ok\\\":false,\\\"error\\\":{\\\"code\\\":\\\"RESPONSE_TOO_LARGE\\\",\\\"message\\\":\\\"daemon response for this request exceeds 1048576 bytes\\\",\\\"help\\\":\\\"Narrow the request\\\",\\\"detail\\\":\\\"daemon response for this request exceeds 1048576 bytes\\\"},\\\"id\\\":\\\"%ID%\\\"}\"]}");
        cli_ok(run_cli(NULL, "result", "oc_r", "--diff", "--json", NULL));
        params_are("task.result", "{\"taskId\":\"oc_r\",\"fields\":[\"diff\"]}");
        cli_run r = run_cli(NULL, "result", "oc_r", "--full", "--fields", "narration", "--json", NULL);
        cli_run_done(&r);
        params_are("task.result", "{\"taskId\":\"oc_r\",\"fields\":[\"narration\"],\"full\":true}");
        /* without --json the lean projection adds next */
        r = run_cli(NULL, "result", "oc_r", NULL);
        ck_assert_int_eq(r.exit_code, 0);
        ck_assert_msg(strstr(r.out, "\nnext: \"Run taskferry wait with task id \\\"undefined\\\" to block until the task settles, then re-run taskferry result\"\n"), "%s", r.out);
        cli_run_done(&r);

        write_script("{\"task.result\":[\"{\\\"version\\\":1,\\\"ok\\\":false,\\\"error\\\":{\\\"code\\\":\\\"RESPONSE_TOO_LARGE\\\",\\\"message\\\":\\\"daemon response for this request exceeds 1048576 bytes\\\",\\\"help\\\":\\\"Narrow the request\\\",\\\"detail\\\":\\\"daemon response for this request exceeds 1048576 bytes\\\"},\\\"id\\\":\\\"%ID%\\\"}\"]}");
        kill_started_daemons(); /* restart the fake daemon with the new script */
        for (int i = 0; i < 400 && proto_health_probe(sock, 100) > 0; i++) usleep(10000);
        r = run_cli(NULL, "result", "oc_r", "--fields", "message", NULL);
        cli_printed(&r, 1,
                    "error: the result payload for task oc_r exceeds the daemon's response size cap (1 MiB)\n"
                    "help: \"fetch a narrower set of fields instead (e.g. \\\"taskferry result oc_r --fields message,tokens\\\")\"\n");
        cli_run_done(&r);
        r = run_cli(NULL, "result", "oc_r", NULL);
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert_msg(strstr(r.out, "help: \"the payload includes the task's diff (only the task's own changes); read the "
                                    "patch directly at ") && strstr(r.out, "/diffs/oc_r.patch"),
                      "%s", r.out);
        cli_run_done(&r);
}
END_TEST

START_TEST(test_cli_list_projection) {
        write_script("{\"task.list\":[\"{\\\"version\\\":1,\\\"ok\\\":true,\\\"id\\\":\\\"%ID%\\\",\\\"result\\\":{\\\"counts\\\":{\\\"queued\\\":0,\\\"running\\\":0,\\\"done\\\":0,\\\"crashed\\\":1,\\\"cancelled\\\":0,\\\"unknown\\\":0},"
                     "\\\"tasks\\\":[{\\\"id\\\":\\\"oc_mx3b8o4p_7eeb1f07\\\",\\\"status\\\":\\\"crashed\\\",\\\"model\\\":\\\"prov/model-x\\\",\\\"startedAt\\\":\\\"2026-11-30T13:35:06.026Z\\\",\\\"directory\\\":\\\"/w\\\",\\\"failureReason\\\":\\\"pi_boot_failure\\\"}]}}\"]}");
        _cleanup_free_ char *repo = strdup_printf("%s/repo", tmp);
        char *git[] = { "git", "init", "-q", repo, NULL };
        run_result gr = {};
        ck_assert_int_eq(run_command(git, NULL, NULL, 0, -1, &gr), 0);
        run_result_done(&gr);
        _cleanup_free_ char *deep = strdup_printf("%s/repo/a/b", tmp);
        ck_assert_int_ge(mkdir_p(deep, 0755), 0);

        cli_run r = run_cli(NULL, "list", "--directory", deep, NULL);
        cli_printed(&r, 0,
                    "counts:\n  queued: 0\n  running: 0\n  done: 0\n  crashed: 1\n  cancelled: 0\n  unknown: 0\n"
                    "tasks[1]{id,status,model,startedAt,failureReason}:\n"
                    "  oc_mx3b8o4p_7eeb1f07,crashed,prov/model-x,\"2026-11-30T13:35:06.026Z\",pi_boot_failure\n");
        cli_run_done(&r);
        _cleanup_json_ json_object *p1 = last_params("task.list");
        _cleanup_free_ char *want1 = strdup_printf("{\"directory\":\"%s\"}", deep);
        ck_assert_str_eq(json_to_line(p1, NULL), want1);

        /* --all sends no directory */
        cli_ok(run_cli(NULL, "list", "--all", NULL));
        params_are("task.list", "{}");

        /* default: the workspace root of the cwd (run from repo/a/b via sh) */
        char *argv[] = { "sh", "-c", "cd \"$1\" && exec \"$2\" list", "sh", deep, NULL, NULL };
        _cleanup_free_ char *bin = strdup_printf("%s/taskferry", TASKFERRY_BUILD_DIR);
        argv[5] = bin;
        run_result rr = {};
        ck_assert_int_eq(run_command(argv, NULL, NULL, 1 << 20, -1, &rr), 0);
        ck_assert_int_eq(rr.exit_code, 0);
        run_result_done(&rr);
        _cleanup_json_ json_object *p3 = last_params("task.list");
        _cleanup_free_ char *want3 = strdup_printf("{\"directory\":\"%s\"}", repo);
        ck_assert_str_eq(json_to_line(p3, NULL), want3);
}
END_TEST

START_TEST(test_cli_auto_start_disabled) {
        setenv("TASKFERRY_AUTO_START", "0", 1);
        cli_run r = run_cli(NULL, "status", "oc_a", NULL);
        ck_assert_int_eq(r.exit_code, 1);
        _cleanup_free_ char *want = strdup_printf("error: \"cannot connect to %s: No such file or directory\"\nhelp: Retry the command or run `taskferry --help`\n", sock);
        ck_assert_str_eq(r.out, want);
        cli_run_done(&r);
        ck_assert_uint_eq(count_starts(), 0);
}
END_TEST

/* Start build/taskferry with args in tmp; stdout to <tmp>/<name>.out; stdin
 * from *stdin_fd (a pipe we keep the write end of) when stdin_w is non-NULL. */
static pid_t spawn_cli(const char *name, int *stdin_w, char *const *args) {
        _cleanup_free_ char *bin = strdup_printf("%s/taskferry", TASKFERRY_BUILD_DIR);
        _cleanup_free_ char *out = strdup_printf("%s/%s.out", tmp, name);
        int p[2] = { -1, -1 };
        if (stdin_w) ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        int execd[2]; /* closed by the exec: tells us taskferry (not the fork of this test) runs */
        ck_assert_int_eq(pipe2(execd, O_CLOEXEC), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                signal(SIGTERM, SIG_DFL);
                signal(SIGINT, SIG_DFL);
                int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
                dup2(fd, STDOUT_FILENO);
                if (stdin_w) dup2(p[0], STDIN_FILENO);
                else {
                        int nfd = open("/dev/null", O_RDONLY);
                        dup2(nfd, STDIN_FILENO);
                }
                if (chdir(tmp) < 0) _exit(126);
                char *argv[32];
                size_t n = 0;
                argv[n++] = bin;
                for (size_t i = 0; args[i]; i++) argv[n++] = args[i];
                argv[n] = NULL;
                execv(bin, argv);
                _exit(127);
        }
        close(execd[1]);
        char c;
        while (read(execd[0], &c, 1) < 0 && errno == EINTR) {}
        close(execd[0]);
        if (stdin_w) {
                close(p[0]);
                *stdin_w = p[1];
        }
        return pid;
}

/* Whether pid currently catches signal sig (SigCgt in /proc/<pid>/status). */
static bool catches_signal(pid_t pid, int sig) {
        _cleanup_free_ char *path = strdup_printf("/proc/%d/status", (int) pid);
        char *data = NULL;
        size_t len;
        if (read_file(path, 1 << 16, &data, &len) < 0) return false;
        char *line = strstr(data, "\nSigCgt:");
        unsigned long long mask = line ? strtoull(line + 8, NULL, 16) : 0;
        free(data);
        return mask & (1ULL << (sig - 1));
}

static void wait_until(bool (*pred)(void *), void *arg, const char *what) {
        for (int i = 0; i < 6000; i++) {
                if (pred(arg)) return;
                usleep(10000);
        }
        ck_abort_msg("gave up waiting for %s", what);
}

static bool request_logged(void *method) {
        _cleanup_free_ char *path = strdup_printf("%s/requests.jsonl", runtime);
        char *data = NULL;
        size_t len;
        if (read_file(path, 1 << 24, &data, &len) < 0) return false;
        _cleanup_free_ char *needle = strdup_printf("\"method\":\"%s\"", (const char *) method);
        bool found = strstr(data, needle) != NULL;
        free(data);
        return found;
}

static bool sigint_handler_gone(void *pid) {
        return !catches_signal(*(pid_t *) pid, SIGINT);
}

static bool sigint_handler_installed(void *pid) {
        return catches_signal(*(pid_t *) pid, SIGINT);
}

#define WAIT_SCRIPT(go)                                                                                    \
        "{\"task.wait\":[\"WAITFILE:" go "\",\"{\\\"version\\\":1,\\\"ok\\\":true,\\\"id\\\":\\\"%%ID%%\\\","     \
        "\\\"result\\\":{\\\"id\\\":\\\"oc_a\\\",\\\"status\\\":\\\"done\\\",\\\"startedAt\\\":null,"          \
        "\\\"exitCode\\\":0,\\\"signal\\\":null}}\"]}"

/* `taskferry wait oc_a` (spawn_cli "wait") against a fake daemon that
 * answers once the file *ret_go (malloc'd) exists; its pid, once its
 * request reached the daemon. */
static pid_t start_wait(char **ret_go) {
        char *go = strdup_printf("%s/go", tmp);
        _cleanup_free_ char *script = strdup_printf(WAIT_SCRIPT("%s"), go);
        write_script(script);
        char *args[] = {"wait", "oc_a", NULL};
        pid_t pid = spawn_cli("wait", NULL, args);
        wait_until(request_logged, "task.wait", "the wait request");
        *ret_go = go;
        return pid;
}

/* The CLI child pid reaped: its wait status. */
static int cli_status(pid_t pid) {
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        return status;
}

/* What the spawn_cli child `name` wrote to its stdout. */
static char *cli_out(const char *name) {
        _cleanup_free_ char *path = strdup_printf("%s/%s.out", tmp, name);
        return tf_read_file(path, false);
}

START_TEST(test_cli_first_sigint_swallowed_during_wait) {
        _cleanup_free_ char *go = NULL;
        pid_t pid = start_wait(&go);
        ck_assert(catches_signal(pid, SIGINT));
        ck_assert_int_eq(kill(pid, SIGINT), 0);
        wait_until(sigint_handler_gone, &pid, "the SIGINT handler to run");
        ck_assert_int_eq(write_file_atomic(go, "", 0, 0600), 0);
        int status = cli_status(pid);
        ck_assert(WIFEXITED(status));
        ck_assert_int_eq(WEXITSTATUS(status), 0);
        _cleanup_free_ char *out = cli_out("wait");
        ck_assert(startswith(out, "id: oc_a\nstatus: done\n"));
}
END_TEST

START_TEST(test_cli_second_sigint_kills_wait) {
        _cleanup_free_ char *go = NULL;
        pid_t pid = start_wait(&go);
        ck_assert_int_eq(kill(pid, SIGINT), 0);
        wait_until(sigint_handler_gone, &pid, "the SIGINT handler to run");
        ck_assert_int_eq(kill(pid, SIGINT), 0);
        int status = cli_status(pid);
        ck_assert(WIFSIGNALED(status));
        ck_assert_int_eq(WTERMSIG(status), SIGINT);
        /* let the fake daemon's connection handler finish */
        ck_assert_int_eq(write_file_atomic(go, "", 0, 0600), 0);
}
END_TEST

START_TEST(test_cli_sigint_aborts_prompt_stdin) {
        int w = -1;
        char *args[] = { "dispatch", "--prompt", "-", NULL };
        pid_t pid = spawn_cli("dispatch", &w, args);
        ck_assert_int_eq(write(w, "partial prompt", 14), 14); /* stdin stays open */
        wait_until(sigint_handler_installed, &pid, "the SIGINT handler");
        ck_assert_int_eq(kill(pid, SIGINT), 0);
        int status = cli_status(pid);
        close(w);
        ck_assert(WIFEXITED(status));
        ck_assert_int_eq(WEXITSTATUS(status), 2);
        _cleanup_free_ char *out = cli_out("dispatch");
        ck_assert_str_eq(out, "error: \"--prompt - aborted while waiting for stdin to close\"\n"
                              "help: \"Pipe a prompt into the command (e.g. `cat prompt.txt | taskferry dispatch --prompt -`), or pass --prompt \\\"<text>\\\" directly\"\n");
        ck_assert_uint_eq(count_starts(), 0);
}
END_TEST

int main(void) {
        const char *fake = getenv("TF_FAKE_DAEMON");
        if (fake && getenv("TASKFERRY_SOCKET_PATH")) return fake_daemon_main(fake);
        Suite *s = suite_create("cli-client");
        tf_tcase(s, "client", setup, teardown, 60, TF_TESTS(test_call_echo_and_request_shape,
                test_call_skips_events_unknown_ids_and_empty_lines, test_call_error_responses, test_call_invalid_frames,
                test_call_shutdown_and_close, test_call_closed_by_a_failed_boot, test_call_large_and_oversized_frames,
                test_health_probe, test_health_probe_rejects_bad_answer, test_health_probe_rejects_other_id));
        tf_tcase(s, "autostart", setup, teardown, 60, TF_TESTS(test_autostart_spawns_daemon,
                test_autostart_replaces_stale_socket, test_autostart_disabled,
                test_autostart_boot_failure_reports_boot_err, test_autostart_removes_old_boot_err,
                test_autostart_booter_stderr, test_autostart_missing_or_unexecutable_binary,
                test_autostart_race_starts_one_daemon, test_find_daemon_order));
        tf_tcase(s, "binary", setup, teardown, 60, TF_TESTS(test_cli_status_lean_toon_and_json, test_cli_daemon_error,
                test_cli_usage_errors_do_not_start_daemon, test_cli_help_and_version, test_cli_dispatch_params,
                test_cli_wait_timeout_chain, test_cli_accept, test_cli_accept_applied_warnings,
                test_cli_result_params_and_rewrite, test_cli_list_projection, test_cli_advisor_ferry_log_context,
                test_cli_auto_start_disabled, test_cli_first_sigint_swallowed_during_wait,
                test_cli_second_sigint_kills_wait, test_cli_sigint_aborts_prompt_stdin));
        return tf_run_suite(s);
}
