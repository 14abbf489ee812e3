/* The runtime socket: socket activation or self-bind with the stale-socket
 * rules, line framing, limits and out-of-order replies (server.h). */

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>

#include "api/events.h"
#include "core/peer.h"
#include "core/manager.h"
#include "api/methods.h"
#include "api/server.h"
#include "protocol-keys.h"
#include "core/task.h"
#include "api/wait.h"
#include "json-util.h"
#include "fs-util.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"

static void connection_unref(Connection *c);
static void connection_kill(Connection *c);

static Connection *connection_ref(Connection *c) {
        c->n_ref++;
        return c;
}

static void connection_unref(Connection *c) {
        if (!c || --c->n_ref > 0) return;
        line_buffer_done(&c->in);
        free(c->out);
        free(c);
}

static void connection_update_events(Connection *c) {
        if (c->dead || !c->io) return;
        uint32_t ev = c->closing ? 0 : EPOLLIN;
        if (c->out_len > c->out_off) ev |= EPOLLOUT;
        sd_event_source_set_io_events(c->io, ev);
        if (c->closing && c->out_len <= c->out_off) connection_kill(c);
}

static void connection_kill(Connection *c) {
        if (c->dead) return;
        c->dead = true;
        c->io = sd_event_source_disable_unref(c->io);
        c->fd = safe_close(c->fd);
        Manager *m = c->m;
        if (c->prev) c->prev->next = c->next;
        else m->server->connections = c->next;
        if (c->next) c->next->prev = c->prev;
        c->next = c->prev = NULL;
        wait_drop_connection(c); /* parked waits stop counting in flight */
        events_drop_connection(c);
        if (c->origin && c->origin->sock_connections > 0) c->origin->sock_connections--;
        connection_unref(c);
}

static int connection_flush(Connection *c) {
        while (c->out_off < c->out_len) {
                ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR) continue;
                        if (errno == EAGAIN) break;
                        return -errno;
                }
                c->out_off += (size_t) n;
        }
        if (c->out_off == c->out_len) c->out_off = c->out_len = 0;
        return 0;
}

static size_t connection_pending(Connection *c) { return c->out_len - c->out_off; }

static int connection_append(Connection *c, const char *data, size_t len) {
        if (c->out_off > 0 && c->out_off == c->out_len) c->out_off = c->out_len = 0;
        if (c->out_len + len + 1 > c->out_cap) {
                /* compact, then grow */
                if (c->out_off > 0) {
                        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
                        c->out_len -= c->out_off;
                        c->out_off = 0;
                }
                size_t ncap = c->out_cap ? c->out_cap : 4096;
                while (ncap < c->out_len + len + 1) ncap *= 2;
                char *n = realloc(c->out, ncap);
                if (!n) return -ENOMEM;
                c->out = n;
                c->out_cap = ncap;
        }
        memcpy(c->out + c->out_len, data, len);
        c->out_len += len;
        c->out[c->out_len++] = '\n';
        return 0;
}

/* Queue one frame within the outbound budget: the connection's unsent bytes
 * plus the frame stay within 1 MiB. One that does not fit degrades (the
 * connection survives): a response to RESPONSE_TOO_LARGE with the same id,
 * an event to an id-null error; then to a shorter "response too large"
 * frame; the connection is closed only when even that does not fit. */
static int connection_send_frame(Connection *c, json_object *frame, const char *id, bool is_response) {
        if (!frame || c->dead) return -EPIPE;
        int sent = 0;
        size_t len;
        const char *s = json_to_line(frame, &len);
        if (connection_pending(c) + len + 1 <= PROTOCOL_MAX_BUFFER_BYTES) {
                if (connection_append(c, s, len) < 0) goto kill;
        } else {
                sent = 1; /* degraded */
                _cleanup_json_ json_object *big = NULL;
                if (is_response) {
                        _cleanup_free_ char *msg = strdup_printf("daemon response for this request exceeds %d bytes",
                                                                 PROTOCOL_MAX_BUFFER_BYTES);
                        big = proto_error(id, E_RESPONSE_TOO_LARGE, msg,
                                          "Narrow the request (e.g. pass --directory), or use a method that summarizes "
                                          "server-side if one exists",
                                          NULL);
                } else
                        big = proto_error(NULL, E_RESPONSE_TOO_LARGE, "event dropped: response too large", "", NULL);
                const char *bs = json_to_line(big, &len);
                if (connection_pending(c) + len + 1 <= PROTOCOL_MAX_BUFFER_BYTES) {
                        if (connection_append(c, bs, len) < 0) goto kill;
                } else {
                        _cleanup_json_ json_object *small =
                                proto_error(is_response ? id : NULL, E_RESPONSE_TOO_LARGE, "response too large", "", NULL);
                        const char *ss = json_to_line(small, &len);
                        if (connection_pending(c) + len + 1 > PROTOCOL_MAX_BUFFER_BYTES) goto kill;
                        if (connection_append(c, ss, len) < 0) goto kill;
                }
        }
        if (connection_flush(c) < 0) goto kill;
        connection_update_events(c);
        return sent;
kill:
        connection_kill(c);
        return -EPIPE;
}

int connection_send_event(Connection *c, json_object *frame) {
        return connection_send_frame(c, frame, NULL, false);
}

void request_free(Request *r) {
        if (!r) return;
        Manager *m = r->m;
        r->timer = sd_event_source_disable_unref(r->timer);
        if (r->conn) {
                /* unlink from the connection's waiting list */
                if (r->conn_prev) r->conn_prev->conn_next = r->conn_next;
                else if (r->conn->waiting == r) r->conn->waiting = r->conn_next;
                if (r->conn_next) r->conn_next->conn_prev = r->conn_prev;
                connection_unref(r->conn);
        }
        Task *bt = r->budget_task;
        bool wait = r->budget_wait;
        proto_request_done(&r->req);
        free(r);
        if (bt) {
                if (bt->sock_requests > 0) bt->sock_requests--;
        } else if (wait) {
                if (m->server->waits > 0) m->server->waits--;
        } else if (m->server->in_flight > 0)
                m->server->in_flight--;
}

void request_reply_frame(Request *r, json_object *frame) {
        if (r->conn && !r->conn->dead) connection_send_frame(r->conn, frame, r->req.id, true);
        json_object_put(frame);
        request_free(r);
}

void request_reply_result(Request *r, json_object *result) {
        request_reply_frame(r, proto_success(r->req.id, result));
}

void request_reply_error(Request *r, const char *code, const char *message, const char *help) {
        request_reply_frame(r, proto_error(r->req.id, code, message, help, NULL));
}

void request_reply_error_text(Request *r, const char *code, const char *text) {
        request_reply_frame(r, proto_error_from_text(r->req.id, code, text));
}

static void connection_handle_line(Connection *c, const char *line, size_t len) {
        Manager *m = c->m;
        /* empty (whitespace-only) lines are ignored */
        size_t i = 0;
        while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) i++;
        if (i == len) return;
        proto_request pr;
        _cleanup_json_ json_object *err = NULL;
        int r = proto_parse_request(line, len, &pr, &err);
        if (r < 0) {
                if (err) connection_send_frame(c, err, json_get_string(err, PK_id), true);
                return;
        }
        /* the budget this request draws on (docs/taskferryd.8.md "Limits") */
        Task *bt = c->origin;
        bool wait = !bt && streq(pr.method, "task.wait");
        const char *busy_msg = NULL;
        if (bt && bt->sock_requests >= PROTOCOL_TASK_SOCKET_MAX_REQUESTS)
                busy_msg = "this task's socket has too many requests in flight";
        else if (wait && m->server->waits >= PROTOCOL_MAX_WAITS)
                busy_msg = "daemon has too many task.wait requests parked";
        else if (!bt && !wait && m->server->in_flight >= PROTOCOL_MAX_IN_FLIGHT)
                busy_msg = "daemon has too many requests in flight";
        if (busy_msg) {
                _cleanup_json_ json_object *busy =
                        proto_error(pr.id, E_SERVER_BUSY, busy_msg, "Wait for an outstanding request to finish, then retry", NULL);
                connection_send_frame(c, busy, pr.id, true);
                proto_request_done(&pr);
                return;
        }
        Request *req = calloc(1, sizeof *req);
        if (!req) {
                proto_request_done(&pr);
                return;
        }
        req->m = m;
        req->conn = connection_ref(c);
        req->req = pr;
        req->budget_task = bt;
        req->budget_wait = wait;
        if (bt) bt->sock_requests++;
        else if (wait) m->server->waits++;
        else m->server->in_flight++;
        method_dispatch(m, req);
}

static int connection_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Connection *c = userdata;
        connection_ref(c);
        if (revents & EPOLLOUT) {
                if (connection_flush(c) < 0) {
                        connection_kill(c);
                        goto out;
                }
        }
        if ((revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->closing) {
                ssize_t n = line_buffer_read(&c->in, c->fd, 65536);
                if (n == -EAGAIN || n == -EINTR) goto out_update;
                if (n == -ENOBUFS) {
                        /* after appending each received chunk, the not-yet-split
                         * buffer over 1 MiB (LINE_BUFFER_LIMIT_BUFFERED): the
                         * connection is answered, then closed */
                        _cleanup_json_ json_object *e = proto_error(NULL, E_REQUEST_TOO_LARGE, "request exceeds 1 MiB",
                                                                    "Send a smaller request", NULL);
                        connection_send_frame(c, e, NULL, true);
                        c->closing = true;
                        line_buffer_done(&c->in);
                        goto out_update;
                }
                if (n <= 0) {
                        connection_kill(c);
                        goto out;
                }
                const char *line;
                size_t len;
                while (!c->dead && line_buffer_pop(&c->in, &line, &len) == LINE_BUFFER_LINE)
                        connection_handle_line(c, line, len);
                if (c->dead) goto out;
        }
out_update:
        connection_update_events(c);
out:
        connection_unref(c);
        return 0;
}

static int accept_resume(sd_event_source *s, uint64_t usec, void *userdata) {
        Listener *l = userdata;
        l->retry = sd_event_source_disable_unref(l->retry);
        if (l->io) sd_event_source_set_enabled(l->io, SD_EVENT_ON);
        return 0;
}

/* Out of file descriptors (EMFILE/ENFILE, or the kernel out of memory for
 * one): the listening socket stays readable, so stop polling it for a moment
 * instead of spinning (and logging) on it. One mechanism for every listener,
 * the user's socket and each task socket. */
static void accept_pause(Listener *l, int error) {
        Manager *m = l->m;
        if (l->retry) return;
        /* at most one warning a minute daemon-wide however long the shortage lasts */
        uint64_t now_mono = mono_ms();
        if (!m->server->accept_warned_ms || now_mono - m->server->accept_warned_ms >= 60000) {
                if (l->origin)
                        log_warning_errno(error, "cannot accept connections on the socket of task %s; pausing for 250 ms at a time",
                                          l->origin->id);
                else
                        log_warning_errno(error, "cannot accept connections; pausing for 250 ms at a time");
                m->server->accept_warned_ms = now_mono;
        }
        sd_event_source_set_enabled(l->io, SD_EVENT_OFF);
        uint64_t now;
        sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        if (sd_event_add_time(m->event, &l->retry, CLOCK_MONOTONIC, now + 250000, 0, accept_resume, l) < 0)
                sd_event_source_set_enabled(l->io, SD_EVENT_ON);
}

/* A connection over its task socket's cap: told why, then closed. The frame
 * is small and the socket fresh, so one nonblocking send delivers it. */
static void refuse_connection(int cfd) {
        char help[128];
        snprintf(help, sizeof help, "Close a connection to the daemon first; a task may hold at most %d at a time",
                 PROTOCOL_TASK_SOCKET_MAX_CONNECTIONS);
        _cleanup_json_ json_object *e =
                proto_error(NULL, E_SERVER_BUSY, "this task's socket has too many connections", help, NULL);
        size_t len = 0;
        const char *s = e ? json_to_line(e, &len) : NULL;
        if (s) {
                (void) send(cfd, s, len, MSG_NOSIGNAL | MSG_DONTWAIT);
                (void) send(cfd, "\n", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        close(cfd);
}

/* Accept at most this many connections per wakeup, so one busy listener (a
 * worker connecting in a loop) cannot keep the loop from everything else. */
#define ACCEPT_BATCH 64

static int listener_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Listener *l = userdata;
        Manager *m = l->m;
        Task *origin = l->origin;
        for (unsigned n = 0; n < ACCEPT_BATCH; n++) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0) {
                        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) return 0;
                        accept_pause(l, -errno);
                        return 0;
                }
                if (origin && origin->sock_connections >= PROTOCOL_TASK_SOCKET_MAX_CONNECTIONS) {
                        refuse_connection(cfd);
                        continue;
                }
                Connection *c = calloc(1, sizeof *c);
                if (!c) {
                        close(cfd);
                        continue;
                }
                c->m = m;
                c->n_ref = 1;
                c->fd = cfd;
                c->origin = origin;
                line_buffer_init(&c->in, PROTOCOL_MAX_BUFFER_BYTES, LINE_BUFFER_LIMIT_BUFFERED);
                struct ucred cred;
                socklen_t cl = sizeof cred;
                if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0) {
                        c->peer_pid = cred.pid;
                        c->peer_uid = cred.uid;
                }
                if (sd_event_add_io(m->event, &c->io, cfd, EPOLLIN, connection_io, c) < 0) {
                        close(cfd);
                        free(c);
                        continue;
                }
                if (origin) origin->sock_connections++;
                c->next = m->server->connections;
                if (m->server->connections) m->server->connections->prev = c;
                m->server->connections = c;
        }
        return 0;
}

static int listener_start(Manager *m, Listener *l, int fd, Task *origin) {
        l->m = m;
        l->origin = origin;
        l->fd = fd;
        return sd_event_add_io(m->event, &l->io, fd, EPOLLIN, listener_io, l);
}

static void listener_stop(Listener *l) {
        l->retry = sd_event_source_disable_unref(l->retry);
        l->io = sd_event_source_disable_unref(l->io);
        l->fd = safe_close(l->fd);
}

Caller caller_of(Manager *m, Connection *c) {
        Caller who = {0};
        if (!c) return who;
        /* The reliable answer: every sandbox gets its task's own socket in place
         * of the daemon's, so the socket a connection arrived on names its task
         * (a peer pid can vanish or be reused; a socket cannot lie). */
        if (c->origin) {
                who.sandboxed = true;
                who.task = c->origin;
                return who;
        }
        return caller_of_pid(m, c->peer_pid);
}

static const TaskSocketOps task_socket_ops = {
        .open = task_socket_open,
        .path = task_socket_path,
        .close = task_socket_close,
};

int server_init(Manager *m) {
        if (m->server) return 0;
        m->server = calloc(1, sizeof *m->server);
        if (!m->server) return -ENOMEM;
        m->server->listener.fd = -1;
        m->task_sockets = &task_socket_ops;
        return 0;
}

void server_free(Manager *m) {
        free(m->server);
        m->server = NULL;
}

int task_socket_open(Task *t) {
        Manager *m = t->m;
        _cleanup_free_ char *dir = strdup_printf("%s/task-sockets", m->paths.runtime_dir);
        if (!dir) return -ENOMEM;
        int r = mkdir_p_chmod(dir, 0700);
        if (r < 0) return r;
        _cleanup_free_ char *path = strdup_printf("%s/%s.sock", dir, t->id);
        if (!path) return -ENOMEM;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof sa.sun_path) return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        (void) unlink(path);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) return -errno;
        mode_t old = umask(0177);
        r = bind(fd, (struct sockaddr *) &sa, sizeof sa);
        umask(old);
        if (r < 0 || listen(fd, PROTOCOL_TASK_SOCKET_MAX_CONNECTIONS) < 0) return -errno;
        TaskSocket *ts = calloc(1, sizeof *ts);
        if (!ts) {
                (void) unlink(path);
                return -ENOMEM;
        }
        ts->listener.fd = -1;
        r = listener_start(m, &ts->listener, fd, t);
        if (r < 0) {
                (void) unlink(path);
                free(ts);
                return r;
        }
        TAKE_FD(fd);
        ts->path = TAKE_PTR(path);
        t->socket = ts;
        return 0;
}

bool server_has_connections(const Manager *m) { return m->server && m->server->connections; }

const char *task_socket_path(const Task *t) { return t->socket ? t->socket->path : NULL; }

void task_socket_close(Task *t) {
        TaskSocket *ts = TAKE_PTR(t->socket);
        if (ts) {
                listener_stop(&ts->listener);
                if (ts->path) (void) unlink(ts->path);
                free(ts->path);
                free(ts);
        }
        /* a task's connections end with it: nothing inside its sandbox is left
         * to use them, and they must not outlive the cap that bounded them */
        for (Connection *c = t->m->server->connections, *next; c; c = next) {
                next = c->next;
                if (c->origin == t) connection_kill(c);
        }
}

static int bind_socket(Manager *m) {
        const char *path = m->paths.socket_path;
        _cleanup_free_ char *dir = strdup(path);
        if (!dir) return -ENOMEM;
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) *slash = 0;
        int r = mkdir_p_chmod(dir, 0700);
        if (r < 0) return log_error_errno(r, "cannot create runtime dir %s", dir);

        _cleanup_free_ char *lock_path = strdup_printf("%s/socket-bind.lock", dir);
        if (!lock_path) return -ENOMEM;
        _cleanup_close_ int lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (lock_fd < 0) return log_error_errno(-errno, "cannot open %s", lock_path);
        if (flock(lock_fd, LOCK_EX) < 0) return -errno;

        for (int attempt = 0; attempt < 200; attempt++) {
                struct stat st;
                if (lstat(path, &st) < 0) {
                        if (errno != ENOENT) return -errno;
                        break;
                }
                int p = proto_health_probe(path, 250); /* a live listener: refuse; a dead one: stale */
                if (p >= 0) {
                        log_text("error", "error: %s %s\nhelp: use the existing daemon or choose another TASKFERRY_RUNTIME_DIR",
                                 p == 1 ? "taskferry daemon is already listening on" : "another process is already listening on",
                                 path);
                        return -EADDRINUSE;
                }
                if (p != -ENOENT && p != -ECONNREFUSED && p != -ENOTSOCK) return p;
                /* stale: unlink only if it is still the same file (dev, ino, ctime) */
                struct stat st2;
                if (lstat(path, &st2) < 0) continue;
                if (st2.st_dev == st.st_dev && st2.st_ino == st.st_ino && st2.st_ctim.tv_sec == st.st_ctim.tv_sec &&
                    st2.st_ctim.tv_nsec == st.st_ctim.tv_nsec) {
                        if (unlink(path) < 0 && errno != ENOENT) return -errno;
                        break;
                }
                usleep(25000);
        }
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof sa.sun_path) return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) return -errno;
        mode_t old = umask(0177);
        r = bind(fd, (struct sockaddr *) &sa, sizeof sa);
        umask(old);
        if (r < 0 || listen(fd, SOMAXCONN) < 0 || chmod(path, 0600) < 0) {
                r = -errno;
                close(fd);
                return log_error_errno(r, "cannot listen on %s", path);
        }
        m->server->listener.fd = fd;
        m->server->self_bound = true;
        return 0;
}

int server_listen(Manager *m) {
        int n = sd_listen_fds(1);
        if (n < 0) return log_error_errno(n, "sd_listen_fds failed");
        if (n > 1) {
                log_error("expected at most one socket from systemd, got %d", n);
                return -EINVAL;
        }
        if (n == 1) {
                int fd = SD_LISTEN_FDS_START;
                int r = sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0);
                if (r < 0) return log_error_errno(r, "checking the passed socket failed");
                if (r == 0) {
                        log_error("the passed fd is not a listening AF_UNIX stream socket");
                        return -EINVAL;
                }
                int fl = fcntl(fd, F_GETFL);
                if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -errno;
                (void) fcntl(fd, F_SETFD, FD_CLOEXEC);
                m->server->listener.fd = fd;
                m->server->self_bound = false;
        } else {
                int r = bind_socket(m);
                if (r < 0) return r;
        }
        /* accept_pause and job_start_retrying arm CLOCK_MONOTONIC timers exactly
         * when the daemon is out of fds: sd-event creates a clock's timerfd on
         * first use and keeps it, so make that use happen now */
        sd_event_source *warm = NULL;
        uint64_t now;
        sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        if (sd_event_add_time(m->event, &warm, CLOCK_MONOTONIC, now + 3600ULL * 1000000ULL, 0, NULL, NULL) >= 0)
                sd_event_source_disable_unref(warm);
        return listener_start(m, &m->server->listener, m->server->listener.fd, NULL);
}

void server_stop_accepting(Manager *m) {
        m->server->listener.retry = sd_event_source_disable_unref(m->server->listener.retry);
        m->server->listener.io = sd_event_source_disable_unref(m->server->listener.io);
}

void server_close(Manager *m, const char *reason) {
        _cleanup_json_ json_object *frame = proto_shutdown(reason);
        size_t len = 0;
        const char *s = frame ? json_to_line(frame, &len) : NULL;
        while (m->server->connections) {
                Connection *c = m->server->connections;
                if (s && connection_append(c, s, len) == 0) {
                        /* best effort, blocking for at most a moment */
                        int fl = fcntl(c->fd, F_GETFL);
                        if (fl >= 0) fcntl(c->fd, F_SETFL, fl & ~O_NONBLOCK);
                        struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
                        setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
                        (void) connection_flush(c);
                }
                connection_kill(c);
        }
        listener_stop(&m->server->listener);
        if (m->server->self_bound && unlink(m->paths.socket_path) < 0 && errno != ENOENT)
                log_warning_errno(-errno, "cannot remove %s", m->paths.socket_path);
}
