/* CLI daemon client and auto-start (cli-client.h). */
#include "cli-client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <linux/close_range.h>

#include "json-util.h"
#include "libsystemd-dl.h"
#include "protocol-keys.h"
#include "taskferry-config.h"
#include "process-util.h"
#include "fileio.h"
#include "fs-util.h"
#include "id-util.h"
#include "macro.h"
#include "path-util.h"
#include "string-util.h"
#include "strv.h"
#include "time-util.h"

extern char **environ;

#define INVALID_FRAME "taskferry daemon sent an invalid frame"

void cli_client_close(cli_client *c) {
        c->fd = safe_close(c->fd);
        line_buffer_done(&c->lines);
        json_object_put(c->events);
        c->events = NULL;
        free(c->boot_err);
        c->boot_err = NULL;
}

int cli_client_connect(cli_client *c, const char *socket_path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(socket_path) >= sizeof sa.sun_path) return -ENAMETOOLONG;
        strcpy(sa.sun_path, socket_path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return -errno;
        int r;
        do r = connect(fd, (struct sockaddr *) &sa, sizeof sa);
        while (r < 0 && errno == EINTR);
        if (r < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        cli_client_close(c);
        line_buffer_init(&c->lines, CLI_CLIENT_MAX_BUFFER_BYTES, 0);
        c->fd = fd;
        c->restarting = false;
        c->failed = false;
        return 0;
}

static int client_fail(cli_client *c, cli_error *err, int r, const char *text) {
        c->failed = true;
        c->fd = safe_close(c->fd);
        cli_error_fail(err, NULL, "%s", text);
        return r;
}

static char *read_diag(const char *path);

/* A socket-activated daemon whose start failed (a bad config.json or env
 * file) closes the connection systemd handed it: its reason, written since
 * the connect, or NULL. */
static char *boot_error_since_open(cli_client *c) {
        struct stat st;
        if (!c->boot_err || stat(c->boot_err, &st) < 0) return NULL;
        uint64_t mtime_ms = (uint64_t) st.st_mtim.tv_sec * 1000 + (uint64_t) st.st_mtim.tv_nsec / 1000000;
        if (mtime_ms + 1000 < c->opened_ms) return NULL;
        return read_diag(c->boot_err);
}

static int closed_error(cli_client *c, cli_error *err) {
        if (c->restarting)
                return client_fail(c, err, -ECONNRESET,
                                   "taskferry daemon is restarting (config or version change) — retry your command in a moment");
        _cleanup_free_ char *boot = boot_error_since_open(c);
        _cleanup_free_ char *text = boot ? strdup_printf("error: taskferry daemon connection closed\ndaemon boot failed: %s", boot) : NULL;
        return client_fail(c, err, -ECONNRESET, text ? text : "taskferry daemon connection closed");
}

static int send_all(int fd, const char *data, size_t len) {
        while (len > 0) {
                ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EINTR) continue;
                        return -errno;
                }
                data += n;
                len -= (size_t) n;
        }
        return 0;
}

/* Read more bytes into the buffer (blocking). 0 = EOF, >0 bytes read, -errno. */
static ssize_t fill(cli_client *c) {
        for (;;) {
                ssize_t n = line_buffer_read(&c->lines, c->fd, 65536);
                if (n == -EINTR) continue;
                return n;
        }
}

/* The next complete line (without '\n'), valid until the next call on c:
 * 1, 0 if none yet, -ENOBUFS if the unterminated remainder exceeds 1 MiB
 * (more than a frame may be: a protocol failure). */
static int next_line(cli_client *c, const char **ret_line, size_t *ret_len) {
        int r = line_buffer_pop(&c->lines, ret_line, ret_len);
        return r == LINE_BUFFER_LINE ? 1 : r;
}

/* The next frame other than a shutdown notice (which only marks a restart),
 * parsed and classified: 1 with *ret_msg (owned by the caller) and
 * *ret_kind, never PROTO_FRAME_INVALID (that fails the connection).
 * Without a complete line at hand it reads more, blocking; with poll_first
 * it first waits at most timeout_ms (< 0: forever) for bytes, and returns 0
 * when none came or a signal interrupted the wait. < 0 with err set, as
 * cli_client_call fails. */
static int next_frame(cli_client *c, bool poll_first, int timeout_ms, json_object **ret_msg, proto_frame_kind *ret_kind,
                      cli_error *err) {
        for (;;) {
                size_t llen;
                const char *l;
                int k = next_line(c, &l, &llen);
                if (k == -ENOBUFS)
                        return client_fail(c, err, -EPROTO, "taskferry daemon message exceeds 1048576 bytes");
                if (k == 0) {
                        if (poll_first) {
                                struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
                                int p = poll(&pfd, 1, timeout_ms);
                                if (p < 0 && errno == EINTR) return 0;
                                if (p < 0) return client_fail(c, err, -errno, "taskferry daemon connection failed");
                                if (p == 0) return 0;
                        }
                        ssize_t n = fill(c);
                        if (n == -ENOMEM) return -ENOMEM;
                        if (n == -EAGAIN) continue;
                        if (n <= 0) return closed_error(c, err);
                        continue;
                }
                if (llen == 0) continue;
                _cleanup_json_ json_object *msg = NULL;
                if (json_parse_strict(l, llen, &msg) < 0) return client_fail(c, err, -EPROTO, INVALID_FRAME);
                proto_frame_kind kind = proto_classify_frame(msg);
                if (kind == PROTO_FRAME_INVALID) return client_fail(c, err, -EPROTO, INVALID_FRAME);
                if (kind == PROTO_FRAME_SHUTDOWN) {
                        c->restarting = streq_ptr(json_get_string(msg, PK_reason), "restart");
                        continue;
                }
                *ret_msg = TAKE_PTR(msg);
                *ret_kind = kind;
                return 1;
        }
}

int cli_client_call(cli_client *c, const char *method, json_object *params,
                    json_object **ret_result, cli_error *err) {
        if (c->failed || c->fd < 0) {
                cli_error_fail(err, NULL, "taskferry daemon connection is closed");
                return -ECONNRESET;
        }
        char id[37];
        int r = uuid4(id);
        if (r < 0) return cli_error_fail(err, NULL, "could not generate a request id: %s", strerror(-r));

        _cleanup_json_ json_object *req = proto_request_new(id, method, params);
        if (!req) return -ENOMEM;
        size_t len;
        const char *line = json_to_line(req, &len);
        /* The daemon drops a connection whose request exceeds MAX_BUFFER_BYTES
         * without an answer it can match; say why here instead of failing on
         * its id-null reply. */
        if (len + 1 > CLI_CLIENT_MAX_BUFFER_BYTES) {
                cli_error_fail(err, NULL,
                               "the %s request is %zu bytes, over the daemon's 1 MiB request limit (1048576 bytes)\n"
                               "help: shorten the prompt (dispatch also forwards your whole environment, which counts "
                               "toward the limit; unset large variables)",
                               method, len + 1);
                return -E2BIG;
        }
        _cleanup_free_ char *frame = malloc(len + 1);
        if (!frame) return -ENOMEM;
        memcpy(frame, line, len);
        frame[len] = '\n';
        if (send_all(c->fd, frame, len + 1) < 0) return closed_error(c, err);

        for (;;) {
                _cleanup_json_ json_object *msg = NULL;
                proto_frame_kind kind;
                int k = next_frame(c, false, -1, &msg, &kind, err);
                if (k < 0) return k;
                switch (kind) {
                case PROTO_FRAME_INVALID:
                case PROTO_FRAME_SHUTDOWN:
                        continue; /* next_frame returns neither */
                case PROTO_FRAME_EVENT:
                        /* events may come before the response to the request that caused them */
                        if (!c->events && !(c->events = json_object_new_array())) return -ENOMEM;
                        if (json_object_array_length(c->events) >= CLI_CLIENT_MAX_QUEUED_EVENTS)
                                return client_fail(c, err, -EPROTO, "taskferry daemon sent more than 1000 unread events");
                        json_object_array_add(c->events, json_object_get(msg));
                        continue;
                case PROTO_FRAME_RESPONSE_OK:
                        if (!streq(json_get_string(msg, PK_id), id)) continue;
                        json_object *result = NULL;
                        json_object_object_get_ex(msg, PK_result, &result);
                        *ret_result = result ? json_object_get(result) : NULL;
                        return 0;
                case PROTO_FRAME_RESPONSE_ERROR: {
                        if (!streq(json_get_string(msg, PK_id), id)) continue;
                        json_object *e = json_get_object(msg, PK_error);
                        const char *code = json_get_string(e, PK_code);
                        const char *message = json_get_string(e, PK_message);
                        const char *help = json_get_string(e, PK_help);
                        const char *detail = json_get_string(e, PK_detail);
                        if (!streq(detail, message)) cli_error_fail(err, *code ? code : "REQUEST_FAILED", "%s", detail);
                        else cli_error_fail(err, *code ? code : "REQUEST_FAILED", "%s\nhelp: %s", message, help);
                        return -EBADMSG;
                }
                }
        }
}

int cli_client_next_event(cli_client *c, int timeout_ms, json_object **ret_frame, cli_error *err) {
        *ret_frame = NULL;
        if (c->events && json_object_array_length(c->events) > 0) {
                *ret_frame = json_object_get(json_object_array_get_idx(c->events, 0));
                json_object_array_del_idx(c->events, 0, 1);
                return 1;
        }
        if (c->failed || c->fd < 0) {
                cli_error_fail(err, NULL, "taskferry daemon connection is closed");
                return -ECONNRESET;
        }
        for (;;) {
                _cleanup_json_ json_object *msg = NULL;
                proto_frame_kind kind;
                int k = next_frame(c, true, timeout_ms, &msg, &kind, err);
                if (k <= 0) return k;
                if (kind != PROTO_FRAME_EVENT) continue; /* a response nobody waits for */
                *ret_frame = TAKE_PTR(msg);
                return 1;
        }
}

int cli_find_daemon(char **ret) {
        const char *env = getenv("TASKFERRY_DAEMON");
        if (!isempty(env)) {
                if (access(env, X_OK) < 0) return -errno;
                char *p = strdup(env);
                if (!p) return -ENOMEM;
                *ret = p;
                return 0;
        }
        _cleanup_free_ char *dir = NULL;
        _cleanup_strv_free_ char **candidates = NULL;
        if (self_exe_dir(&dir) >= 0) {
                if (strv_pushf(&candidates, "%s/taskferryd", dir) < 0 ||
                    strv_pushf(&candidates, "%s/../libexec/taskferryd", dir) < 0)
                        return -ENOMEM;
        }
        if (strv_push(&candidates, TASKFERRY_INSTALL_LIBEXECDIR "/taskferryd") < 0) return -ENOMEM;
        for (char **c = candidates; *c; c++) {
                struct stat st;
                if (stat(*c, &st) == 0 && S_ISREG(st.st_mode) && access(*c, X_OK) == 0) {
                        char *p = realpath(*c, NULL);
                        if (!p) p = strdup(*c);
                        if (!p) return -ENOMEM;
                        *ret = p;
                        return 0;
                }
        }
        return -ENOENT;
}

static char *connect_error_text(int r, const char *path) {
        return strdup_printf("cannot connect to %s: %s", path, strerror(-r));
}

/* Poll connect every 25 ms for up to 5000 ms (at least one attempt).
 * stop_file: stop early once it exists and is non-empty (daemon-boot.err).
 * Returns 0 (connected) or the last -errno. */
static int poll_connect(cli_client *c, const char *socket_path, const char *stop_file) {
        uint64_t deadline = mono_ms() + CLI_AUTOSTART_TIMEOUT_MS;
        int r;
        for (;;) {
                r = cli_client_connect(c, socket_path);
                if (r >= 0) return 0;
                struct stat st;
                if (stop_file && stat(stop_file, &st) == 0 && st.st_size > 0) return r;
                if (mono_ms() >= deadline) return r;
                struct timespec ts = { 0, CLI_AUTOSTART_RETRY_MS * 1000000L };
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
        }
}

/* (a): the systemd user manager starts taskferry.socket. Only for the
 * default socket path, which is where the unit listens. */
static int start_socket_unit(const tf_paths *p) {
        if (!isempty(getenv("TASKFERRY_SOCKET_PATH")) || !isempty(getenv("TASKFERRY_RUNTIME_DIR"))) return -EPERM;
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        _cleanup_free_ char *expected = !isempty(xdg) ? strdup_printf("%s/taskferry/daemon.sock", xdg)
                                                      : strdup_printf("/run/user/%u/taskferry/daemon.sock", (unsigned) getuid());
        if (!expected) return -ENOMEM;
        if (!streq(expected, p->socket_path)) return -EPERM;

        /* libsystemd is loaded only here (libsystemd-dl.h): the common path,
         * a daemon already listening, never pays for it */
        int r = dlopen_libsystemd();
        if (r < 0) return r;
        sd_bus *bus = NULL;
        r = sym_sd_bus_open_user(&bus);
        if (r < 0) return r;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        r = sym_sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                   "org.freedesktop.systemd1.Manager", "StartUnit", &error, &reply,
                                   "ss", "taskferry.socket", "replace");
        sym_sd_bus_error_free(&error);
        sym_sd_bus_message_unref(reply);
        sym_sd_bus_flush_close_unref(bus);
        return r;
}

/* Read a small diagnostics file, trimmed; NULL if missing or empty. */
static char *read_diag(const char *path) {
        char *data = NULL;
        size_t len = 0;
        if (read_file(path, 64 * 1024, &data, &len) < 0) return NULL;
        while (len > 0 && strchr(" \t\r\n", data[len - 1])) data[--len] = 0;
        if (len == 0) {
                free(data);
                return NULL;
        }
        return data;
}

/* Double-fork + setsid the daemon. Returns 0 once the grandchild exec'd,
 * or -errno (exec failure errno from the grandchild). */
static int spawn_daemon(const char *daemon, char **envp, int log_fd) {
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) < 0) return -errno;
        int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd < 0) {
                int r = -errno;
                close(pfd[0]);
                close(pfd[1]);
                return r;
        }
        /* Detached: neither fork gets a death signal — the daemon outlives
         * this CLI (its parent, the intermediate child, exits at once). */
        pid_t pid;
        int r = safe_fork("taskferry-autostart", FORK_NEW_SESSION, &pid);
        if (r < 0) {
                close(pfd[0]);
                close(pfd[1]);
                close(null_fd);
                return r;
        }
        if (r == 0) {
                /* child: new session, then the daemon as a grandchild, its
                 * stdin and stdout /dev/null and its stderr the boot log.
                 * Inherited descriptors we did not open must not reach the
                 * daemon: all but the error pipe close. */
                const int stdio[3] = {null_fd, null_fd, log_fd >= 0 ? log_fd : null_fd};
                r = safe_fork_full("taskferryd", stdio, &pfd[1], 1,
                                   FORK_RESET_SIGNALS | FORK_REARRANGE_STDIO | FORK_CLOSE_ALL_FDS, NULL);
                if (r < 0) {
                        int e = -r;
                        (void) !write(pfd[1], &e, sizeof e);
                        _exit(1);
                }
                if (r > 0) _exit(0);
                if (chdir("/") < 0) {}
                char *argv[] = { (char *) daemon, NULL };
                execve(daemon, argv, envp);
                int e = errno;
                (void) !write(pfd[1], &e, sizeof e);
                _exit(127);
        }
        close(pfd[1]);
        close(null_fd);
        /* the intermediate child exits at once: 0 once it forked the daemon */
        int status = wait_for_terminate_and_check("taskferry-autostart", pid, 0);
        int e = 0;
        ssize_t n;
        do n = read(pfd[0], &e, sizeof e);
        while (n < 0 && errno == EINTR);
        close(pfd[0]);
        if (n == (ssize_t) sizeof e) return -e;
        if (status != 0) return -ECHILD;
        return 0;
}

/* The error of an auto-start whose daemon did not answer in time. */
static int not_ready_error(cli_error *err, const tf_paths *p, int last, const char *extra) {
        _cleanup_free_ char *conn = connect_error_text(last, p->socket_path);
        _cleanup_free_ char *boot_err_path = strdup_printf("%s/daemon-boot.err", p->runtime_dir);
        _cleanup_free_ char *log_path = strdup_printf("%s/daemon-boot-stderr.log", p->runtime_dir);
        _cleanup_free_ char *boot = boot_err_path ? read_diag(boot_err_path) : NULL;
        _cleanup_free_ char *log = !boot && log_path ? read_diag(log_path) : NULL;
        _cleanup_free_ char *line = NULL;
        if (boot) line = strdup_printf("daemon boot failed: %s\n", boot);
        else if (extra) line = strdup_printf("booter subprocess failed before startup: %s\n", extra);
        else if (log) line = strdup_printf("booter subprocess failed before startup: %s\n", log);
        return cli_error_fail(err, NULL,
                              "error: taskferry daemon did not become ready within %dms: %s\n%shelp: check %s permissions and daemon startup diagnostics, then retry",
                              CLI_AUTOSTART_TIMEOUT_MS, strempty(conn), strempty(line), p->runtime_dir);
}

/* (b): spawn the daemon ourselves under the start lock. */
static int spawn_and_connect(cli_client *c, const tf_paths *p, cli_error *err) {
        int r = mkdir_p_chmod(p->runtime_dir, 0700);
        if (r < 0)
                return cli_error_fail(err, NULL, "error: cannot create the runtime directory %s: %s\nhelp: check %s permissions and daemon startup diagnostics, then retry",
                                      p->runtime_dir, strerror(-r), p->runtime_dir);
        _cleanup_free_ char *lock_path = strdup_printf("%s/daemon-start.lock", p->runtime_dir);
        _cleanup_free_ char *boot_err = strdup_printf("%s/daemon-boot.err", p->runtime_dir);
        _cleanup_free_ char *log_path = strdup_printf("%s/daemon-boot-stderr.log", p->runtime_dir);
        if (!lock_path || !boot_err || !log_path) return -ENOMEM;

        _cleanup_close_ int lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (lock_fd < 0)
                return cli_error_fail(err, NULL, "error: cannot open %s: %s\nhelp: check %s permissions and daemon startup diagnostics, then retry",
                                      lock_path, strerror(errno), p->runtime_dir);
        while (flock(lock_fd, LOCK_EX) < 0)
                if (errno != EINTR)
                        return cli_error_fail(err, NULL, "error: cannot lock %s: %s\nhelp: check %s permissions and daemon startup diagnostics, then retry",
                                              lock_path, strerror(errno), p->runtime_dir);

        /* Another CLI may have started it while we waited for the lock. */
        if (proto_health_probe(p->socket_path, 500) > 0 && cli_client_connect(c, p->socket_path) >= 0) return 0;

        if (unlink(boot_err) < 0 && errno != ENOENT) {}
        _cleanup_close_ int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (log_fd >= 0) (void) fchmod(log_fd, 0600);

        _cleanup_free_ char *daemon = NULL;
        r = cli_find_daemon(&daemon);
        if (r == -ENOMEM) return r;
        if (r < 0)
                return cli_error_fail(err, NULL,
                                      "error: taskferry daemon binary not found (set TASKFERRY_DAEMON, or install taskferryd next to taskferry or in %s)\nhelp: reinstall taskferry, then retry",
                                      TASKFERRY_INSTALL_LIBEXECDIR);

        _cleanup_strv_free_ char **envp = strv_copy(environ);
        if (!envp && environ && environ[0]) return -ENOMEM;
        if (strv_env_set(&envp, "TASKFERRY_STATE_DIR", p->state_dir) < 0 ||
            strv_env_set(&envp, "TASKFERRY_RUNTIME_DIR", p->runtime_dir) < 0 ||
            strv_env_set(&envp, "TASKFERRY_SOCKET_PATH", p->socket_path) < 0)
                return -ENOMEM;

        r = spawn_daemon(daemon, envp, log_fd);
        if (r < 0) {
                _cleanup_free_ char *why = strdup_printf("cannot execute %s: %s", daemon, strerror(-r));
                return not_ready_error(err, p, -ECONNREFUSED, why);
        }
        r = poll_connect(c, p->socket_path, boot_err);
        if (r >= 0) return 0;
        return not_ready_error(err, p, r, NULL);
}

static int client_opened(cli_client *c, const tf_paths *p) {
        c->opened_ms = now_ms();
        c->boot_err = strdup_printf("%s/daemon-boot.err", p->runtime_dir);
        return 0;
}

int cli_client_open(cli_client *c, const tf_paths *p, cli_error *err) {
        int r = cli_client_connect(c, p->socket_path);
        if (r >= 0) return client_opened(c, p);
        const char *auto_start = getenv("TASKFERRY_AUTO_START");
        if ((auto_start && streq(auto_start, "0")) || (r != -ENOENT && r != -ECONNREFUSED)) {
                _cleanup_free_ char *text = connect_error_text(r, p->socket_path);
                return cli_error_fail(err, NULL, "%s", strempty(text));
        }
        if (start_socket_unit(p) >= 0 && poll_connect(c, p->socket_path, NULL) >= 0) return client_opened(c, p);
        r = spawn_and_connect(c, p, err);
        return r < 0 ? r : client_opened(c, p);
}
