/* server.c: the socket server's framing and budgets (server.h,
 * docs/taskferryd.8.md "Limits"), through the real thing: the
 * Manager binds its socket (server_listen, self-bound: no LISTEN_FDS) on an
 * in-process sd-event loop, and the test connects as a client and talks
 * bytes. A line split over reads, several lines in one read, an over-long
 * request (REQUEST_TOO_LARGE, then the socket is destroyed), invalid JSON
 * (MALFORMED_JSON / INVALID_REQUEST, the connection stays), a task's own
 * socket and its connection and request caps, and a dead connection's parked
 * waits. No shim: tasks are records. */

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon-fixture.h"
#include "json-util.h"
#include "core/manager.h"
#include "api/server.h"
#include "core/store.h"
#include "core/task.h"
#include "core/task-table.h"
#include "api/task-views.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"
#include "api/wait.h"

static Manager m;
static char *dir;

static void setup(void) {
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_PID");
        tf_manager_setup(&m, "test-server");
        ck_assert_int_eq(wait_init(&m), 0);
        dir = m.paths.state_dir;
        m.paths.socket_path = strdup_printf("%s/run/daemon.sock", dir);
        ck_assert_int_eq(server_listen(&m), 0);
        ck_assert(m.server->self_bound);
}

static void teardown(void) {
        server_close(&m, "shutdown");
        for (size_t i = 0; i < m.n_tasks; i++) wait_drop_task(m.tasks[i]);
        ck_assert_uint_eq(m.server->in_flight, 0);
        ck_assert_uint_eq(m.server->waits, 0);
        ck_assert_int_eq(access(m.paths.socket_path, F_OK), -1); /* a self-bound socket is removed */
        free(m.paths.socket_path);
        tf_manager_teardown(&m);
}

static void run_loop_ms(unsigned ms) { tf_run_loop_ms(&m, ms); }

/* ---- the client side ---- */

typedef struct Client {
        int fd;
        char *buf;   /* received, not yet returned */
        size_t len;
        bool eof;
} Client;

static Client client_connect(const char *path) {
        Client c = {.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)};
        ck_assert_int_ge(c.fd, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        ck_assert_uint_lt(strlen(path), sizeof sa.sun_path);
        strcpy(sa.sun_path, path);
        ck_assert_int_eq(connect(c.fd, (struct sockaddr *) &sa, sizeof sa), 0);
        run_loop_ms(20); /* accepted */
        return c;
}

static void client_close(Client *c) {
        if (c->fd >= 0) close(c->fd);
        c->fd = -1;
        free(c->buf);
        c->buf = NULL;
        c->len = 0;
}

/* Send all of data, running the loop while the socket is full. Returns the
 * bytes sent: fewer if the daemon closed the connection meanwhile. */
static size_t client_send(Client *c, const char *data, size_t len) {
        size_t off = 0;
        while (off < len) {
                ssize_t n = send(c->fd, data + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                        ck_assert_int_ge(sd_event_run(m.event, 5 * 1000), 0);
                        continue;
                }
                if (n < 0) {
                        ck_assert_msg(errno == EPIPE || errno == ECONNRESET, "send: %s", strerror(errno));
                        break;
                }
                off += (size_t) n;
        }
        return off;
}

static void client_send_str(Client *c, const char *s) { ck_assert_uint_eq(client_send(c, s, strlen(s)), strlen(s)); }

static void client_pump(Client *c) {
        char buf[65536];
        for (;;) {
                ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR) return;
                        if (errno == ECONNRESET) {
                                c->eof = true;
                                return;
                        }
                        ck_abort_msg("recv: %s", strerror(errno));
                }
                if (n == 0) {
                        c->eof = true;
                        return;
                }
                c->buf = realloc(c->buf, c->len + (size_t) n + 1);
                memcpy(c->buf + c->len, buf, (size_t) n);
                c->len += (size_t) n;
        }
}

static size_t complete_lines(const Client *c) {
        size_t n = 0;
        for (size_t i = 0; i < c->len; i++) n += c->buf[i] == '\n';
        return n;
}

/* The next `want` frames within timeout_ms (fewer if they do not come), as a
 * JSON array; the loop runs meanwhile. */
static json_object *client_frames(Client *c, size_t want, unsigned timeout_ms) {
        uint64_t end = now_ms() + timeout_ms;
        for (;;) {
                client_pump(c);
                if (complete_lines(c) >= want || c->eof || now_ms() >= end) break;
                ck_assert_int_ge(sd_event_run(m.event, 5 * 1000), 0);
        }
        json_object *arr = json_object_new_array();
        size_t start = 0;
        for (size_t i = 0; i < c->len && json_object_array_length(arr) < want; i++) {
                if (c->buf[i] != '\n') continue;
                json_object *o = NULL;
                ck_assert_int_eq(json_parse_strict(c->buf + start, i - start, &o), 0);
                json_object_array_add(arr, o);
                start = i + 1;
        }
        if (start > 0) {
                memmove(c->buf, c->buf + start, c->len - start);
                c->len -= start;
        }
        return arr;
}

static json_object *client_frame(Client *c) {
        json_object *arr = client_frames(c, 1, 2000);
        ck_assert_uint_eq(json_object_array_length(arr), 1);
        json_object *f = json_object_get(json_object_array_get_idx(arr, 0));
        json_object_put(arr);
        return f;
}

/* Nothing arrives within ms. */
static void client_silent(Client *c, unsigned ms) {
        json_object *arr = client_frames(c, 1, ms);
        ck_assert_uint_eq(json_object_array_length(arr), 0);
        json_object_put(arr);
        ck_assert(!c->eof);
}

/* The daemon closes the connection within 2 s. */
static void client_sees_eof(Client *c) {
        uint64_t end = now_ms() + 2000;
        while (!c->eof && now_ms() < end) {
                client_pump(c);
                if (!c->eof) ck_assert_int_ge(sd_event_run(m.event, 5 * 1000), 0);
        }
        ck_assert(c->eof);
}

static void assert_ok(json_object *f, const char *id) {
        ck_assert_msg(json_get_bool(f, "ok", false), "not ok: %s", json_object_to_json_string(f));
        ck_assert_str_eq(json_get_string(f, "id"), id);
}

static void assert_error(json_object *f, const char *id, const char *code, const char *message, const char *help) {
        ck_assert(!json_get_bool(f, "ok", true));
        json_object *idv = NULL;
        ck_assert(json_object_object_get_ex(f, "id", &idv));
        if (id)
                ck_assert_str_eq(json_object_get_string(idv), id);
        else
                ck_assert_ptr_null(idv); /* JSON null */
        json_object *e = json_get_object(f, "error");
        ck_assert_str_eq(json_get_string(e, "code"), code);
        if (message) ck_assert_str_eq(json_get_string(e, "message"), message);
        if (help) ck_assert_str_eq(json_get_string(e, "help"), help);
}

static char *health(const char *id) {
        return strdup_printf("{\"version\":1,\"id\":\"%s\",\"method\":\"system.health\",\"params\":{}}\n", id);
}

static Task *add_task(const char *id, const char *status) {
        return tf_taskf(&m, "{\"id\":\"%s\",\"directory\":\"/nonexistent\",\"status\":\"%s\",\"changesetStatus\":\"none\"}", id,
                        status);
}

/* ---- framing ---- */

START_TEST(line_split_over_reads) {
        Client c = client_connect(m.paths.socket_path);
        char *req = health("h1");
        size_t len = strlen(req), half = len / 2;
        ck_assert_uint_eq(client_send(&c, req, half), half);
        client_silent(&c, 100); /* half a line is no request */
        ck_assert_uint_eq(client_send(&c, req + half, len - half), len - half);
        json_object *f = client_frame(&c);
        assert_ok(f, "h1");
        ck_assert(json_get_bool(json_get_object(f, "result"), "healthy", false));
        json_object_put(f);
        free(req);
        /* one byte per read: the loop runs between every byte */
        req = health("h2");
        for (size_t i = 0; req[i]; i++) {
                ck_assert_uint_eq(client_send(&c, req + i, 1), 1);
                run_loop_ms(1);
                if (req[i + 1]) {
                        client_pump(&c);
                        ck_assert_uint_eq(complete_lines(&c), 0);
                }
        }
        f = client_frame(&c);
        assert_ok(f, "h2");
        json_object_put(f);
        free(req);
        client_close(&c);
}
END_TEST

START_TEST(several_lines_in_one_read) {
        Client c = client_connect(m.paths.socket_path);
        char *a = health("a"), *b = health("b"), *d = health("d"), *e = health("e");
        /* three requests, an empty and a whitespace-only line (ignored), and the
         * first half of a fourth, in one send */
        size_t elen = strlen(e);
        char *all = strdup_printf("%s%s\n \t\r\n%s%.*s", a, b, d, (int) (elen / 2), e);
        client_send_str(&c, all);
        json_object *arr = client_frames(&c, 4, 300);
        ck_assert_uint_eq(json_object_array_length(arr), 3);
        assert_ok(json_object_array_get_idx(arr, 0), "a");
        assert_ok(json_object_array_get_idx(arr, 1), "b");
        assert_ok(json_object_array_get_idx(arr, 2), "d");
        json_object_put(arr);
        /* the rest of the fourth completes it */
        client_send_str(&c, e + elen / 2);
        json_object *f = client_frame(&c);
        assert_ok(f, "e");
        json_object_put(f);
        ck_assert_uint_eq(m.server->in_flight, 0);
        free(all);
        free(a);
        free(b);
        free(d);
        free(e);
        client_close(&c);
}
END_TEST

/* A health request with id on c; the frame it is answered with. */
static json_object *health_frame(Client *c, const char *id) {
        char *h = health(id);
        client_send_str(c, h);
        free(h);
        return client_frame(c);
}

/* The same, answered ok. */
static void health_ok(Client *c, const char *id) {
        json_object *f = health_frame(c, id);
        assert_ok(f, id);
        json_object_put(f);
}

START_TEST(over_long_request_is_refused_and_closed) {
        Client c = client_connect(m.paths.socket_path);
        /* a request answered before the flood still got its answer */
        health_ok(&c, "before");
        /* more than 1 MiB without a newline: the start of a valid request */
        size_t len = PROTOCOL_MAX_BUFFER_BYTES + 4096;
        char *big = malloc(len);
        const char *head = "{\"version\":1,\"id\":\"big\",\"method\":\"task.list\",\"params\":{\"directory\":\"/";
        memset(big, 'a', len);
        memcpy(big, head, strlen(head));
        size_t sent = client_send(&c, big, len);
        ck_assert_uint_gt(sent, PROTOCOL_MAX_BUFFER_BYTES);
        free(big);
        json_object *f = client_frame(&c);
        assert_error(f, NULL, "REQUEST_TOO_LARGE", "request exceeds 1 MiB", "Send a smaller request");
        json_object_put(f);
        client_sees_eof(&c); /* the socket is then destroyed */
        ck_assert_ptr_null(m.server->connections);
        client_close(&c);
        /* and the server goes on serving others */
        Client d = client_connect(m.paths.socket_path);
        health_ok(&d, "after");
        client_close(&d);
}
END_TEST

START_TEST(invalid_json_is_an_error_and_the_connection_stays) {
        Client c = client_connect(m.paths.socket_path);
        client_send_str(&c, "{nope\n");
        json_object *f = client_frame(&c);
        assert_error(f, NULL, "MALFORMED_JSON", "request is not valid JSON",
                     "Send one JSON request object followed by a newline");
        json_object_put(f);
        /* a bad envelope, the id echoed when it is a string */
        client_send_str(&c, "{\"version\":1,\"id\":\"x\",\"method\":\"system.health\"}\n");
        f = client_frame(&c);
        assert_error(f, "x", "INVALID_REQUEST", "request must contain version, id, method, and params", NULL);
        json_object_put(f);
        client_send_str(&c, "[1,2]\n");
        f = client_frame(&c);
        assert_error(f, NULL, "INVALID_REQUEST", NULL, NULL);
        json_object_put(f);
        /* still open: the next request is served */
        health_ok(&c, "ok");
        ck_assert_uint_eq(m.server->in_flight, 0);
        client_close(&c);
}
END_TEST

/* ---- budgets ---- */

START_TEST(dead_connection_drops_its_waits) {
        Task *t = add_task("oc_r", "running");
        Client c = client_connect(m.paths.socket_path);
        client_send_str(&c, "{\"version\":1,\"id\":\"w1\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"oc_r\"}}\n"
                            "{\"version\":1,\"id\":\"w2\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"oc_r\"}}\n");
        client_silent(&c, 100);
        ck_assert_uint_eq(m.server->waits, 2);
        ck_assert_uint_eq(m.server->in_flight, 0); /* waits have their own budget */
        ck_assert_ptr_nonnull(t->waiters);
        client_close(&c);
        run_loop_ms(100);
        ck_assert_ptr_null(m.server->connections);
        ck_assert_uint_eq(m.server->waits, 0);
        ck_assert_ptr_null(t->waiters);
        /* the task's end answers nobody (and does not crash) */
        ck_assert_int_eq(task_transition(t, TASK_DONE, CHANGESET_NONE), 1);
}
END_TEST

START_TEST(task_socket_budgets) {
        Task *t = add_task("oc_s", "running");
        ck_assert_int_eq(task_socket_open(t), 0);
        ck_assert_ptr_nonnull(task_socket_path(t));
        struct stat st;
        ck_assert_int_eq(stat(task_socket_path(t), &st), 0);
        ck_assert_int_eq(st.st_mode & 0777, 0600);
        /* connections: at most PROTOCOL_TASK_SOCKET_MAX_CONNECTIONS */
        Client cs[PROTOCOL_TASK_SOCKET_MAX_CONNECTIONS];
        for (size_t i = 0; i < ELEMENTSOF(cs); i++) cs[i] = client_connect(task_socket_path(t));
        ck_assert_uint_eq(t->sock_connections, PROTOCOL_TASK_SOCKET_MAX_CONNECTIONS);
        Client extra = client_connect(task_socket_path(t));
        json_object *f = client_frame(&extra);
        assert_error(f, NULL, "SERVER_BUSY", "this task's socket has too many connections", NULL);
        json_object_put(f);
        client_sees_eof(&extra);
        client_close(&extra);
        ck_assert_uint_eq(t->sock_connections, PROTOCOL_TASK_SOCKET_MAX_CONNECTIONS);
        /* one closes: there is room for one more */
        client_close(&cs[0]);
        run_loop_ms(50);
        ck_assert_uint_eq(t->sock_connections, PROTOCOL_TASK_SOCKET_MAX_CONNECTIONS - 1);
        cs[0] = client_connect(task_socket_path(t));
        health_ok(&cs[0], "again");

        /* requests in flight, waits included: at most PROTOCOL_TASK_SOCKET_MAX_REQUESTS */
        Client *c = &cs[1];
        for (int i = 0; i < PROTOCOL_TASK_SOCKET_MAX_REQUESTS; i++) {
                char *w = strdup_printf("{\"version\":1,\"id\":\"w%d\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"oc_s\"}}\n", i);
                client_send_str(c, w);
                free(w);
        }
        client_silent(c, 100);
        ck_assert_uint_eq(t->sock_requests, PROTOCOL_TASK_SOCKET_MAX_REQUESTS);
        /* none of them drew on the daemon-wide budgets */
        ck_assert_uint_eq(m.server->waits, 0);
        ck_assert_uint_eq(m.server->in_flight, 0);
        /* one more, of any method, on any of the task's connections: busy */
        f = health_frame(&cs[2], "busy");
        assert_error(f, "busy", "SERVER_BUSY", "this task's socket has too many requests in flight",
                     "Wait for an outstanding request to finish, then retry");
        json_object_put(f);
        /* while the user's socket is served as ever */
        Client u = client_connect(m.paths.socket_path);
        health_ok(&u, "user");
        /* the task ends: every wait is answered, the budget is free again */
        ck_assert_int_eq(task_transition(t, TASK_DONE, CHANGESET_NONE), 1);
        json_object *arr = client_frames(c, PROTOCOL_TASK_SOCKET_MAX_REQUESTS, 2000);
        ck_assert_uint_eq(json_object_array_length(arr), PROTOCOL_TASK_SOCKET_MAX_REQUESTS);
        json_object_put(arr);
        ck_assert_uint_eq(t->sock_requests, 0);
        health_ok(&cs[2], "free");
        /* closing the task's socket closes the connections it accepted, and only those */
        char *path = strdup(task_socket_path(t));
        task_socket_close(t);
        ck_assert_int_eq(access(path, F_OK), -1);
        free(path);
        for (size_t i = 0; i < ELEMENTSOF(cs); i++) {
                client_sees_eof(&cs[i]);
                client_close(&cs[i]);
        }
        ck_assert_uint_eq(t->sock_connections, 0);
        health_ok(&u, "still");
        client_close(&u);
}
END_TEST

START_TEST(shutdown_frame_on_close) {
        Client c = client_connect(m.paths.socket_path);
        server_close(&m, "shutdown");
        client_pump(&c);
        json_object *f = client_frame(&c);
        int64_t version = 0;
        ck_assert(json_get_int64(f, "version", &version));
        ck_assert_int_eq(version, 1);
        ck_assert_str_eq(json_get_string(f, "type"), "shutdown");
        ck_assert_str_eq(json_get_string(f, "reason"), "shutdown");
        json_object_put(f);
        client_sees_eof(&c);
        client_close(&c);
        ck_assert_int_eq(access(m.paths.socket_path, F_OK), -1);
}
END_TEST

TF_MAIN("server", "server", setup, teardown, 60, line_split_over_reads, several_lines_in_one_read,
        over_long_request_is_refused_and_closed, invalid_json_is_an_error_and_the_connection_stays,
        dead_connection_drops_its_waits, task_socket_budgets, shutdown_frame_on_close)
