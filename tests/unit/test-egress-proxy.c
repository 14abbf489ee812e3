/* The task's egress proxy (src/shim/egress-proxy.c) through real sockets on
 * 127.0.0.1: the proxy runs as its own process (egress_proxy_spawn) on a
 * listener made here; its upstreams are an echo server and a one-shot HTTP
 * server in this process, which the policy names by IP literal and port
 * (loopback is refused otherwise). CONNECT, absolute-form HTTP and SOCKS5
 * each reach an allowed upstream and are refused one that is not; hostile
 * request heads get a 400; the stats file counts what happened. */

#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "egress-proxy.h"
#include "fileio.h"
#include "json-util.h"
#include "macro.h"
#include "net-policy.h"
#include "string-util.h"
#include "unit.h"

static char *tmpdir;
static char *stats_path;
static NetPolicy policy;
static pid_t proxy_pid;
static uint16_t proxy_port;
static uint16_t echo_port, http_port;
static int echo_listen = -1, http_listen = -1;

/* ---- upstreams ---- */

static int listen_on(const char *addr, uint16_t *ret_port) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        int one = 1;
        ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
        struct sockaddr_in sa = {.sin_family = AF_INET};
        ck_assert_int_eq(inet_pton(AF_INET, addr, &sa.sin_addr), 1);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        ck_assert_int_eq(listen(fd, 512), 0);
        socklen_t l = sizeof sa;
        ck_assert_int_eq(getsockname(fd, (struct sockaddr *) &sa, &l), 0);
        *ret_port = ntohs(sa.sin_port);
        return fd;
}

static void start_detached(void *(*fn)(void *), void *arg) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, &attr, fn, arg), 0);
        pthread_attr_destroy(&attr);
}

/* one connection: everything back until EOF, then the half-close passed on */
static void *echo_conn(void *arg) {
        int fd = (int) (intptr_t) arg;
        char buf[65536];
        for (;;) {
                ssize_t n = recv(fd, buf, sizeof buf, 0);
                if (n <= 0) break;
                if (loop_write(fd, buf, (size_t) n) < 0) break;
        }
        shutdown(fd, SHUT_WR);
        /* wait for the other side to close before closing */
        while (recv(fd, buf, sizeof buf, 0) > 0)
                ;
        close(fd);
        return NULL;
}

static void *echo_server(void *arg) {
        int lfd = (int) (intptr_t) arg;
        for (;;) {
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0) return NULL;
                start_detached(echo_conn, (void *) (intptr_t) fd);
        }
}

/* The HTTP upstream: one request per connection, its head kept in
 * http_seen, answered "hello". */
static pthread_mutex_t http_lock = PTHREAD_MUTEX_INITIALIZER;
static char http_seen[65536];

static void *http_server(void *arg) {
        int lfd = (int) (intptr_t) arg;
        for (;;) {
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0) return NULL;
                char buf[65536];
                size_t len = 0;
                while (len < sizeof buf - 1) {
                        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
                        if (n <= 0) break;
                        len += (size_t) n;
                        buf[len] = '\0';
                        if (strstr(buf, "\r\n\r\n")) break;
                }
                buf[len] = '\0';
                pthread_mutex_lock(&http_lock);
                memcpy(http_seen, buf, len + 1);
                pthread_mutex_unlock(&http_lock);
                static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
                (void) loop_write(fd, reply, sizeof reply - 1);
                shutdown(fd, SHUT_WR);
                while (recv(fd, buf, sizeof buf, 0) > 0)
                        ;
                close(fd);
        }
}

static char *http_seen_copy(void) {
        pthread_mutex_lock(&http_lock);
        char *s = strdup(http_seen);
        pthread_mutex_unlock(&http_lock);
        return s;
}

/* ---- the proxy ---- */

/* A proxy whose policy holds rules (NULL-terminated; "%E" is replaced by
 * the echo server's port, "%H" by the HTTP server's). */
static bool with_forward;
static uint16_t forward_port;

static void start_proxy(const char *const *rules) {
        tmpdir = tf_tmpdir_new("test-egress-proxy");
        stats_path = tf_path(tmpdir, "egress.json");
        echo_listen = listen_on("127.0.0.1", &echo_port);
        http_listen = listen_on("127.0.0.1", &http_port);

        policy = (NetPolicy) {.mode = NET_MODE_PROXY};
        for (size_t i = 0; rules[i]; i++) {
                char text[256];
                snprintf(text, sizeof text, "%s", rules[i]);
                char *e = strstr(text, "%E"), *h = strstr(text, "%H");
                char out[300];
                if (e) {
                        *e = '\0';
                        snprintf(out, sizeof out, "%s%u%s", text, echo_port, e + 2);
                } else if (h) {
                        *h = '\0';
                        snprintf(out, sizeof out, "%s%u%s", text, http_port, h + 2);
                } else
                        snprintf(out, sizeof out, "%s", text);
                NetRule r;
                const char *why = NULL;
                ck_assert_msg(net_rule_parse(out, &r, &why) == 0, "rule %s: %s", out, strnull(why));
                ck_assert_int_eq(net_policy_add(&policy, &r), 0);
                net_rule_done(&r);
        }

        int lfd = listen_on("127.0.0.1", &proxy_port);
        /* with_forward: the first rule (the echo server's) served as a
         * forward too, on a listener of its own */
        EgressForward fw = {.listen_fd = -1, .rule = &policy.rules[0]};
        if (with_forward) fw.listen_fd = listen_on("127.0.0.1", &forward_port);
        EgressConfig c = {.listen_fd = lfd, .policy = &policy, .stats_path = stats_path, .task_id = "t-test",
                          .forwards = &fw, .n_forwards = with_forward ? 1 : 0};
        ck_assert_int_eq(egress_proxy_spawn(&c, &proxy_pid), 0);
        /* the parent's copies are closed */
        ck_assert_int_lt(fcntl(lfd, F_GETFD), 0);
        if (with_forward) ck_assert_int_lt(fcntl(fw.listen_fd, F_GETFD), 0);
        /* the upstreams' threads start after the fork */
        start_detached(echo_server, (void *) (intptr_t) echo_listen);
        start_detached(http_server, (void *) (intptr_t) http_listen);
}

static void teardown(void) {
        if (proxy_pid > 0) egress_proxy_stop(proxy_pid);
        proxy_pid = 0;
        net_policy_done(&policy);
        free(stats_path);
        stats_path = NULL;
        tmpdir = tf_tmpdir_free(tmpdir);
}

static const char *const default_rules[] = {"127.0.0.1:%E", "127.0.0.1:%H", NULL};
static void setup(void) {
        start_proxy(default_rules);
}

/* ---- clients ---- */

static int dial(uint16_t port) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        /* a guard against a hang (not a timed assertion): a stuck read
         * fails the case instead of waiting for Check's timeout */
        struct timeval tv = {.tv_sec = 30};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
        inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
        ck_assert_int_eq(connect(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        return fd;
}

static void send_all(int fd, const void *buf, size_t len) {
        ck_assert_int_eq(loop_write(fd, buf, len), 0);
}

static void send_str(int fd, const char *s) {
        send_all(fd, s, strlen(s));
}

static void recv_exact(int fd, void *buf, size_t len) {
        size_t got = 0;
        while (got < len) {
                ssize_t n = recv(fd, (char *) buf + got, len - got, 0);
                ck_assert_msg(n > 0, "recv: %zd after %zu of %zu bytes", n, got, len);
                got += (size_t) n;
        }
}

/* Everything until EOF (at most 1 MiB), NUL-terminated. */
static char *recv_all(int fd, size_t *ret_len) {
        size_t cap = 1 << 20, len = 0;
        char *buf = malloc(cap + 1);
        ck_assert_ptr_nonnull(buf);
        for (;;) {
                ssize_t n = recv(fd, buf + len, cap - len, 0);
                if (n < 0 && errno == EINTR) continue;
                ck_assert_msg(n >= 0, "recv: %s", strerror(errno));
                if (n == 0 || (len += (size_t) n) == cap) break;
        }
        buf[len] = '\0';
        if (ret_len) *ret_len = len;
        return buf;
}

/* A response head, read a byte at a time (so nothing after it is taken),
 * NUL-terminated. */
static char *recv_head(int fd) {
        char *buf = malloc(8192);
        size_t len = 0;
        while (len < 8191) {
                ssize_t n = recv(fd, buf + len, 1, 0);
                ck_assert_msg(n == 1, "the response head ends early: %.*s", (int) len, buf);
                len++;
                if (len >= 4 && memcmp(buf + len - 4, "\r\n\r\n", 4) == 0) break;
        }
        buf[len] = '\0';
        return buf;
}

/* A CONNECT to target through the proxy, its answer's head in *ret_head. */
static int tunnel(const char *target, char **ret_head) {
        int fd = dial(proxy_port);
        char *req = strdup_printf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target);
        send_str(fd, req);
        free(req);
        *ret_head = recv_head(fd);
        return fd;
}

static int tunnel_ok(const char *target) {
        char *head;
        int fd = tunnel(target, &head);
        ck_assert_msg(startswith(head, "HTTP/1.1 200 "), "CONNECT %s: %s", target, head);
        free(head);
        return fd;
}

static char *echo_target(void) {
        return strdup_printf("127.0.0.1:%u", echo_port);
}

static void fill(uint8_t *b, size_t n, unsigned seed) {
        uint32_t x = seed * 2654435761u + 1;
        for (size_t i = 0; i < n; i++) {
                x = x * 1103515245u + 12345u;
                b[i] = (uint8_t) (x >> 16);
        }
}

typedef struct Writer {
        int fd;
        const uint8_t *data;
        size_t len;
        int r;
} Writer;

static void *writer_main(void *arg) {
        Writer *w = arg;
        w->r = loop_write(w->fd, w->data, w->len);
        return NULL;
}

/* n bytes up while the same n come back (a writer thread, so that neither
 * side's buffers fill); they must be equal. */
static void exchange(int fd, size_t n, unsigned seed) {
        uint8_t *out = malloc(n), *in = malloc(n);
        fill(out, n, seed);
        Writer w = {.fd = fd, .data = out, .len = n};
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, writer_main, &w), 0);
        recv_exact(fd, in, n);
        pthread_join(t, NULL);
        ck_assert_int_eq(w.r, 0);
        ck_assert_msg(memcmp(in, out, n) == 0, "the bytes came back changed");
        free(out);
        free(in);
}

/* The status code of a refusal read to EOF; the body in *ret_body. */
static int refusal(int fd, char **ret_body) {
        char *all = recv_all(fd, NULL);
        int status = 0;
        ck_assert_msg(sscanf(all, "HTTP/1.1 %d ", &status) == 1, "not an HTTP answer: %s", all);
        char *body = strstr(all, "\r\n\r\n");
        ck_assert_ptr_nonnull(body);
        if (ret_body) *ret_body = strdup(body + 4);
        free(all);
        return status;
}

/* The raw request through a fresh connection: the answer's status. */
static int raw_status(const char *req, size_t len) {
        int fd = dial(proxy_port);
        send_all(fd, req, len);
        int s = refusal(fd, NULL);
        close(fd);
        return s;
}

static json_object *read_stats(void) {
        char *text = tf_read_file(stats_path, false);
        json_object *o = NULL;
        ck_assert_msg(json_parse_strict(text, strlen(text), &o) == 0, "stats: %s", text);
        free(text);
        return o;
}

static json_object *find_entry(json_object *stats, const char *list, const char *host, int port) {
        json_object *a = json_get_array(stats, list);
        ck_assert_ptr_nonnull(a);
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i);
                int64_t p = 0;
                if (streq_ptr(json_get_string(e, "host"), host) && json_get_int64(e, "port", &p) && p == port)
                        return e;
        }
        return NULL;
}

static int64_t get_int(json_object *e, const char *key) {
        int64_t v = -1;
        ck_assert_msg(json_get_int64(e, key, &v), "no %s", key);
        return v;
}

/* ---- cases ---- */

START_TEST(connect_relays_both_ways) {
        _cleanup_free_ char *t = echo_target();
        int fd = tunnel_ok(t);
        send_str(fd, "hello");
        char buf[6] = {0};
        recv_exact(fd, buf, 5);
        ck_assert_str_eq(buf, "hello");
        exchange(fd, 1 << 20, 1);
        /* the half-close: our EOF reaches the echo server, whose own EOF
         * comes back after everything it echoed */
        send_str(fd, "tail");
        ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
        size_t len;
        _cleanup_free_ char *rest = recv_all(fd, &len);
        ck_assert_uint_eq(len, 4);
        ck_assert_str_eq(rest, "tail");
        close(fd);
}
END_TEST

START_TEST(connect_denied) {
        char *head;
        int fd = tunnel("127.0.0.3:9", &head);
        ck_assert_msg(startswith(head, "HTTP/1.1 403 "), "%s", head);
        ck_assert_ptr_nonnull(strstr(head, "Content-Type: text/plain"));
        ck_assert_ptr_nonnull(strstr(head, "Connection: close"));
        int cl = -1;
        const char *l = strstr(head, "Content-Length: ");
        ck_assert_ptr_nonnull(l);
        cl = atoi(l + 16);
        size_t len;
        _cleanup_free_ char *body = recv_all(fd, &len);
        ck_assert_int_eq((int) len, cl);
        ck_assert_ptr_nonnull(strstr(body, "127.0.0.3:9"));
        ck_assert_ptr_nonnull(strstr(body, "--allow-host 127.0.0.3:9"));
        ck_assert_ptr_nonnull(strstr(body, "task t-test"));
        free(head);
        close(fd);

        /* a name that is not listed is refused before any resolution */
        fd = tunnel("not-listed.invalid:443", &head);
        ck_assert_msg(startswith(head, "HTTP/1.1 403 "), "%s", head);
        free(head);
        close(fd);

        /* the echo server's address on another port is not allowed either */
        fd = tunnel("127.0.0.1:1", &head);
        ck_assert_msg(startswith(head, "HTTP/1.1 403 "), "%s", head);
        free(head);
        close(fd);
}
END_TEST

START_TEST(stats_count_and_stop_writes_them) {
        _cleanup_free_ char *t = echo_target();
        int fd = tunnel_ok(t);
        exchange(fd, 300000, 2);
        shutdown(fd, SHUT_WR);
        free(recv_all(fd, NULL));
        close(fd);
        for (int i = 0; i < 3; i++) {
                char *head;
                fd = tunnel("127.0.0.3:9", &head);
                free(head);
                free(recv_all(fd, NULL));
                close(fd);
        }
        /* the final write at SIGTERM holds all of it */
        egress_proxy_stop(proxy_pid);
        proxy_pid = 0;

        json_object *s = read_stats();
        ck_assert_str_eq(json_get_string(s, "mode"), "proxy");
        json_object *a = find_entry(s, "allowed", "127.0.0.1", echo_port);
        ck_assert_ptr_nonnull(a);
        ck_assert_int_eq(get_int(a, "connections"), 1);
        ck_assert_int_eq(get_int(a, "bytesUp"), 300000);
        ck_assert_int_eq(get_int(a, "bytesDown"), 300000);
        json_object *d = find_entry(s, "denied", "127.0.0.3", 9);
        ck_assert_ptr_nonnull(d);
        ck_assert_int_eq(get_int(d, "count"), 3);
        ck_assert_str_eq(json_get_string(d, "reason"), "not in the task's allowed hosts");
        json_object_put(s);

        struct stat st;
        ck_assert_int_eq(stat(stats_path, &st), 0);
        ck_assert_int_eq(st.st_mode & 0777, 0600);
}
END_TEST

/* "localhost" allowed by name: it resolves to loopback, which only an IP
 * literal rule may reach */
static const char *const localhost_rules[] = {"localhost:%E", NULL};
static void setup_localhost(void) {
        start_proxy(localhost_rules);
}

START_TEST(name_resolving_to_loopback) {
        char *target = strdup_printf("localhost:%u", echo_port), *head;
        int fd = tunnel(target, &head);
        ck_assert_msg(startswith(head, "HTTP/1.1 403 "), "%s", head);
        _cleanup_free_ char *body = recv_all(fd, NULL);
        ck_assert_msg(strstr(body, "loopback"), "%s", body);
        ck_assert_ptr_nonnull(strstr(body, target));
        close(fd);
        free(head);
        free(target);
        egress_proxy_stop(proxy_pid);
        proxy_pid = 0;
        json_object *s = read_stats();
        ck_assert_ptr_nonnull(find_entry(s, "denied", "localhost", echo_port));
        ck_assert_ptr_null(find_entry(s, "allowed", "localhost", echo_port));
        json_object_put(s);
}
END_TEST

static const struct {
        const char *name;
        const char *req; /* "%H": the HTTP server's port */
        int status;
} hostile[] = {
        {"nul in the name", "CONNECT evil\\0.x:443 HTTP/1.1\r\n\r\n", 400},
        {"a path", "CONNECT 127.0.0.1:443/x HTTP/1.1\r\n\r\n", 400},
        {"junk after the port", "CONNECT 127.0.0.1:443junk HTTP/1.1\r\n\r\n", 400},
        {"no port", "CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n", 400},
        {"port 0", "CONNECT 127.0.0.1:0 HTTP/1.1\r\n\r\n", 400},
        {"port 65536", "CONNECT 127.0.0.1:65536 HTTP/1.1\r\n\r\n", 400},
        {"user info", "GET http://u@127.0.0.1:%H/ HTTP/1.1\r\n\r\n", 400},
        {"v6 without brackets", "CONNECT ::1:443 HTTP/1.1\r\n\r\n", 400},
        {"a name in brackets", "CONNECT [localhost]:443 HTTP/1.1\r\n\r\n", 400},
        {"origin-form", "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400},
        {"https without CONNECT", "GET https://127.0.0.1:%H/ HTTP/1.1\r\n\r\n", 400},
        {"two Host headers",
         "GET http://127.0.0.1:%H/ HTTP/1.1\r\nHost: 127.0.0.1:%H\r\nHost: evil.example\r\n\r\n", 400},
        {"Host names another host", "GET http://127.0.0.1:%H/ HTTP/1.1\r\nHost: evil.example\r\n\r\n", 400},
        {"Host names another port", "GET http://127.0.0.1:%H/ HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", 400},
        {"CL and TE", "POST http://127.0.0.1:%H/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
         400},
        {"two CL", "POST http://127.0.0.1:%H/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc", 400},
        {"bare LF", "GET http://127.0.0.1:%H/ HTTP/1.1\nHost: 127.0.0.1\n\n", 400},
        {"folded header", "GET http://127.0.0.1:%H/ HTTP/1.1\r\nX-A: 1\r\n  folded\r\n\r\n", 400},
        {"HTTP/2 version", "GET http://127.0.0.1:%H/ HTTP/2\r\n\r\n", 400},
        {"space in the target", "GET http://127.0.0.1:%H/a b HTTP/1.1\r\n\r\n", 400},
        {"a decimal IP spelling", "CONNECT 2130706433:443 HTTP/1.1\r\n\r\n", 400},
        {"not listed over plain HTTP", "GET http://127.0.0.3:80/ HTTP/1.1\r\n\r\n", 403},
};

START_TEST(hostile_requests) {
        char port[8];
        snprintf(port, sizeof port, "%u", http_port);
        /* "%H" → the port; "\\0" → a NUL byte */
        char req[1024];
        size_t n = 0;
        for (const char *s = hostile[_i].req; *s; s++) {
                if (s[0] == '%' && s[1] == 'H') {
                        n += (size_t) snprintf(req + n, sizeof req - n, "%s", port);
                        s++;
                } else if (s[0] == '\\' && s[1] == '0') {
                        req[n++] = '\0';
                        s++;
                } else
                        req[n++] = *s;
        }
        int status = raw_status(req, n);
        ck_assert_msg(status == hostile[_i].status, "%s: %d, wanted %d", hostile[_i].name, status,
                      hostile[_i].status);
}
END_TEST

START_TEST(long_name_and_big_head) {
        /* a label of 64 bytes, and a name over 253 */
        char req[20000];
        char label[65];
        memset(label, 'a', 64);
        label[64] = '\0';
        int n = snprintf(req, sizeof req, "CONNECT %s.example:443 HTTP/1.1\r\n\r\n", label);
        ck_assert_int_eq(raw_status(req, (size_t) n), 400);
        char name[300];
        for (size_t i = 0; i < 290; i++) name[i] = i % 10 == 9 ? '.' : 'a';
        memcpy(name + 290, "a.b", 4);
        n = snprintf(req, sizeof req, "CONNECT %s:443 HTTP/1.1\r\n\r\n", name);
        ck_assert_int_eq(raw_status(req, (size_t) n), 400);

        /* a head over EGRESS_HEAD_MAX without its end */
        n = snprintf(req, sizeof req, "CONNECT 127.0.0.1:%u HTTP/1.1\r\nX-Pad: ", echo_port);
        memset(req + n, 'x', sizeof req - (size_t) n);
        ck_assert_int_eq(raw_status(req, sizeof req), 400);

        egress_proxy_stop(proxy_pid);
        proxy_pid = 0;
        json_object *s = read_stats();
        json_object *d = find_entry(s, "denied", "(invalid)", 443);
        ck_assert_ptr_nonnull(d);
        ck_assert_int_eq(get_int(d, "count"), 2);
        ck_assert_ptr_nonnull(find_entry(s, "denied", "(invalid)", 0));
        json_object_put(s);
}
END_TEST

START_TEST(plain_http_rewritten) {
        int fd = dial(proxy_port);
        char *req = strdup_printf("GET http://127.0.0.1:%u/path/x?q=1 HTTP/1.1\r\n"
                                  "Host: 127.0.0.1:%u\r\n"
                                  "Proxy-Authorization: Basic c2VjcmV0\r\n"
                                  "Proxy-Connection: keep-alive\r\n"
                                  "Connection: keep-alive\r\n"
                                  "User-Agent: test\r\n\r\n",
                                  http_port, http_port);
        send_str(fd, req);
        free(req);
        size_t len;
        _cleanup_free_ char *answer = recv_all(fd, &len);
        close(fd);
        ck_assert_msg(startswith(answer, "HTTP/1.1 200 OK\r\n"), "%s", answer);
        ck_assert_msg(len >= 5 && streq(answer + len - 5, "hello"), "%s", answer);

        _cleanup_free_ char *seen = http_seen_copy();
        ck_assert_msg(startswith(seen, "GET /path/x?q=1 HTTP/1.1\r\n"), "%s", seen);
        ck_assert_msg(!strcasestr(seen, "Proxy-"), "%s", seen);
        ck_assert_msg(!strstr(seen, "c2VjcmV0"), "%s", seen);
        ck_assert_msg(!strstr(seen, "keep-alive"), "%s", seen);
        ck_assert_msg(strstr(seen, "\r\nConnection: close\r\n"), "%s", seen);
        ck_assert_msg(strstr(seen, "\r\nUser-Agent: test\r\n"), "%s", seen);
        ck_assert_msg(strstr(seen, "\r\nHost: 127.0.0.1:"), "%s", seen);

        /* no path, no Host: "/" and the URL's authority */
        fd = dial(proxy_port);
        req = strdup_printf("GET http://127.0.0.1:%u HTTP/1.0\r\n\r\n", http_port);
        send_str(fd, req);
        free(req);
        free(recv_all(fd, NULL));
        close(fd);
        free(seen);
        seen = http_seen_copy();
        char *want = strdup_printf("GET / HTTP/1.0\r\nHost: 127.0.0.1:%u\r\nConnection: close\r\n\r\n", http_port);
        ck_assert_str_eq(seen, want);
        free(want);
}
END_TEST

static void socks_connect(int fd, const uint8_t addr[4], uint16_t port, uint8_t *ret_rep) {
        const uint8_t hello[3] = {0x05, 0x01, 0x00};
        send_all(fd, hello, sizeof hello);
        uint8_t m[2];
        recv_exact(fd, m, 2);
        ck_assert_int_eq(m[0], 5);
        ck_assert_int_eq(m[1], 0);
        uint8_t req[10] = {0x05, 0x01, 0x00, 0x01, addr[0], addr[1], addr[2], addr[3], (uint8_t) (port >> 8),
                           (uint8_t) port};
        send_all(fd, req, sizeof req);
        uint8_t rep[10];
        recv_exact(fd, rep, sizeof rep);
        ck_assert_int_eq(rep[0], 5);
        *ret_rep = rep[1];
}

START_TEST(socks5) {
        const uint8_t lo[4] = {127, 0, 0, 1}, other[4] = {127, 0, 0, 3};
        int fd = dial(proxy_port);
        uint8_t rep;
        socks_connect(fd, lo, echo_port, &rep);
        ck_assert_int_eq(rep, 0x00);
        exchange(fd, 100000, 3);
        close(fd);

        fd = dial(proxy_port);
        socks_connect(fd, other, 9, &rep);
        ck_assert_int_eq(rep, 0x02); /* connection not allowed by ruleset */
        close(fd);

        /* a domain name: "localhost" is not listed */
        fd = dial(proxy_port);
        const uint8_t hello[3] = {0x05, 0x01, 0x00};
        send_all(fd, hello, sizeof hello);
        uint8_t m[2];
        recv_exact(fd, m, 2);
        uint8_t req[7 + 9] = {0x05, 0x01, 0x00, 0x03, 9, 'l', 'o', 'c', 'a', 'l', 'h', 'o', 's', 't', 0, 80};
        send_all(fd, req, sizeof req);
        uint8_t r[10];
        recv_exact(fd, r, sizeof r);
        ck_assert_int_eq(r[1], 0x02);
        close(fd);

        /* only username/password offered: no acceptable method */
        fd = dial(proxy_port);
        const uint8_t auth_only[3] = {0x05, 0x01, 0x02};
        send_all(fd, auth_only, sizeof auth_only);
        recv_exact(fd, m, 2);
        ck_assert_int_eq(m[1], 0xff);
        close(fd);
}
END_TEST

#define N_TUNNELS 200
START_TEST(concurrent_tunnels) {
        _cleanup_free_ char *t = echo_target();
        static int fds[N_TUNNELS];
        char *req = strdup_printf("CONNECT %s HTTP/1.1\r\n\r\n", t);
        for (size_t i = 0; i < N_TUNNELS; i++) {
                fds[i] = dial(proxy_port);
                send_str(fds[i], req);
        }
        free(req);
        for (size_t i = 0; i < N_TUNNELS; i++) {
                char *head = recv_head(fds[i]);
                ck_assert_msg(startswith(head, "HTTP/1.1 200 "), "tunnel %zu: %s", i, head);
                free(head);
        }
        /* every tunnel open at once, each carrying its own bytes */
        enum { N = 16384 };
        static uint8_t out[N], in[N];
        for (size_t i = 0; i < N_TUNNELS; i++) {
                fill(out, N, (unsigned) i + 10);
                send_all(fds[i], out, N);
        }
        for (size_t i = 0; i < N_TUNNELS; i++) {
                fill(out, N, (unsigned) i + 10);
                recv_exact(fds[i], in, N);
                ck_assert_msg(memcmp(in, out, N) == 0, "tunnel %zu: bytes changed", i);
        }
        for (size_t i = 0; i < N_TUNNELS; i++) close(fds[i]);

        egress_proxy_stop(proxy_pid);
        proxy_pid = 0;
        json_object *s = read_stats();
        json_object *a = find_entry(s, "allowed", "127.0.0.1", echo_port);
        ck_assert_ptr_nonnull(a);
        ck_assert_int_eq(get_int(a, "connections"), N_TUNNELS);
        json_object_put(s);
}
END_TEST

START_TEST(denial_text) {
        _cleanup_free_ char *t = egress_denial_text("abc", "api.example.com", 443, "not in the task's allowed hosts");
        ck_assert_str_eq(t, "taskferry: egress to api.example.com:443 denied for task abc: not in the task's allowed "
                            "hosts\nhelp: allow it with taskferry dispatch --allow-host api.example.com:443 (or "
                            "TASKFERRY_ALLOW_HOSTS, or \"network\": {\"allowHosts\": [...]} in config.json)\n");
        _cleanup_free_ char *v6 = egress_denial_text("abc", "2001:db8::1", 8443, "x");
        ck_assert_ptr_nonnull(strstr(v6, "--allow-host [2001:db8::1]:8443 "));
}
END_TEST

/* A forward (a loopback rule served at its own address inside the
 * sandbox): raw bytes both ways to the rule's address, no request head,
 * counted as the rule's host:port. */
static void setup_forward(void) {
        with_forward = true;
        start_proxy(default_rules);
}
static void teardown_forward(void) {
        teardown();
        with_forward = false;
}

START_TEST(forward_relays_raw_tcp) {
        for (int i = 0; i < 3; i++) {
                int fd = dial(forward_port);
                /* no head: what looks like one is just bytes to the echo server */
                send_str(fd, "CONNECT x:1 HTTP/1.1\r\n\r\n");
                char buf[25] = {0};
                recv_exact(fd, buf, 24);
                ck_assert_str_eq(buf, "CONNECT x:1 HTTP/1.1\r\n\r\n");
                exchange(fd, 256 << 10, (unsigned) i);
                ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
                size_t len;
                _cleanup_free_ char *rest = recv_all(fd, &len);
                ck_assert_uint_eq(len, 0);
                close(fd);
        }
        egress_proxy_stop(proxy_pid);
        proxy_pid = 0;
        _cleanup_json_ json_object *st = read_stats();
        json_object *e = find_entry(st, "allowed", "127.0.0.1", echo_port);
        ck_assert_msg(e, "%s", json_to_line(st, NULL));
        ck_assert_int_eq(get_int(e, "connections"), 3);
        ck_assert_int_ge(get_int(e, "bytesUp"), 3 * ((256 << 10) + 24));
        ck_assert_int_ge(get_int(e, "bytesDown"), 3 * ((256 << 10) + 24));
}
END_TEST

int main(void) {
        Suite *s = suite_create("egress-proxy");
        TCase *tc = tf_tcase(s, "proxy", setup, teardown, 120,
                             TF_TESTS(connect_relays_both_ways, connect_denied, stats_count_and_stop_writes_them,
                                      long_name_and_big_head, plain_http_rewritten, socks5, concurrent_tunnels,
                                      denial_text));
        TF_LOOP(tc, hostile_requests, hostile);
        tf_tcase(s, "localhost", setup_localhost, teardown, 120, TF_TESTS(name_resolving_to_loopback));
        tf_tcase(s, "forward", setup_forward, teardown_forward, 120, TF_TESTS(forward_relays_raw_tcp));
        return tf_run_suite(s);
}
