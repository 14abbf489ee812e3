/* Benchmark: the egress proxy's CONNECT tunnel (src/shim/egress-proxy.c)
 * against a direct loopback copy (goal: the tunnel moves at least 80% of
 * the direct MB/s; figures only, never a pass/fail timing).
 *
 *   1. one stream of MIB MiB (default 512) to a sink on 127.0.0.1, directly
 *      and through the proxy (best of 3 each), and the ratio;
 *   2. 200 tunnels at once, each carrying 1 MiB up and the same back through
 *      an echo server: the total time and how many completed intact.
 * Usage: bench-proxy [MiB, default 512] [tunnels, default 200] */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "egress-proxy.h"
#include "fileio.h"
#include "macro.h"
#include "net-policy.h"
#include "string-util.h"

#define CHUNK (1u << 20)

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void die(const char *what) {
        fprintf(stderr, "bench-proxy: %s: %s\n", what, strerror(errno));
        exit(EXIT_FAILURE);
}

static int listen_lo(uint16_t *ret_port) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0 || listen(fd, 1024) < 0) die("listen");
        socklen_t l = sizeof sa;
        if (getsockname(fd, (struct sockaddr *) &sa, &l) < 0) die("getsockname");
        *ret_port = ntohs(sa.sin_port);
        return fd;
}

static int dial(uint16_t port) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) die("connect");
        return fd;
}

static void spawn(void *(*fn)(void *), void *arg) {
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&a, 256 * 1024);
        pthread_t t;
        if (pthread_create(&t, &a, fn, arg) != 0) die("pthread_create");
        pthread_attr_destroy(&a);
}

/* the sink: reads each connection to EOF, then answers one byte */
static void *sink_conn(void *arg) {
        int fd = (int) (intptr_t) arg;
        char *buf = malloc(CHUNK);
        while (recv(fd, buf, CHUNK, 0) > 0)
                ;
        (void) send(fd, "k", 1, MSG_NOSIGNAL);
        free(buf);
        close(fd);
        return NULL;
}

/* the echo server: everything back, then the half-close */
static void *echo_conn(void *arg) {
        int fd = (int) (intptr_t) arg;
        char *buf = malloc(65536);
        ssize_t n;
        while ((n = recv(fd, buf, 65536, 0)) > 0)
                if (loop_write(fd, buf, (size_t) n) < 0) break;
        shutdown(fd, SHUT_WR);
        free(buf);
        close(fd);
        return NULL;
}

typedef struct Server {
        int fd;
        void *(*conn)(void *);
} Server;

static void *serve(void *arg) {
        Server *s = arg;
        for (;;) {
                int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0) return NULL;
                spawn(s->conn, (void *) (intptr_t) fd);
        }
}

static uint16_t proxy_port;

static int tunnel(uint16_t port) {
        int fd = dial(proxy_port);
        char req[128];
        int n = snprintf(req, sizeof req, "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", port);
        if (loop_write(fd, req, (size_t) n) < 0) die("send CONNECT");
        char head[256];
        size_t len = 0;
        while (len < sizeof head - 1) {
                if (recv(fd, head + len, 1, 0) != 1) die("CONNECT answer");
                len++;
                if (len >= 4 && memcmp(head + len - 4, "\r\n\r\n", 4) == 0) break;
        }
        head[len] = '\0';
        if (strncmp(head, "HTTP/1.1 200 ", 13) != 0) {
                fprintf(stderr, "bench-proxy: CONNECT refused: %s\n", head);
                exit(EXIT_FAILURE);
        }
        return fd;
}

/* MiB to fd, then wait for the sink's byte: seconds */
static double stream(int fd, size_t mib, const char *buf) {
        double t0 = now_s();
        for (size_t i = 0; i < mib; i++)
                if (loop_write(fd, buf, CHUNK) < 0) die("write");
        shutdown(fd, SHUT_WR);
        char k;
        if (recv(fd, &k, 1, 0) != 1) die("the sink's answer");
        double t = now_s() - t0;
        close(fd);
        return t;
}

typedef struct Tunnel {
        int fd;
        bool ok;
        double seconds;
} Tunnel;

static void *writer(void *arg) {
        Tunnel *t = arg;
        char *buf = malloc(CHUNK);
        memset(buf, (int) (t->fd & 0xff), CHUNK);
        (void) loop_write(t->fd, buf, CHUNK);
        shutdown(t->fd, SHUT_WR);
        free(buf);
        return NULL;
}

static uint16_t echo_port;

static void *one_tunnel(void *arg) {
        Tunnel *t = arg;
        double t0 = now_s();
        t->fd = tunnel(echo_port);
        pthread_t w;
        if (pthread_create(&w, NULL, writer, t) != 0) die("pthread_create");
        char *buf = malloc(65536);
        size_t got = 0;
        bool same = true;
        ssize_t n;
        while ((n = recv(t->fd, buf, 65536, 0)) > 0) {
                for (ssize_t i = 0; i < n; i++)
                        if ((uint8_t) buf[i] != (uint8_t) (t->fd & 0xff)) same = false;
                got += (size_t) n;
        }
        pthread_join(w, NULL);
        t->ok = same && got == CHUNK;
        t->seconds = now_s() - t0;
        free(buf);
        close(t->fd);
        return NULL;
}

int main(int argc, char **argv) {
        size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 512;
        size_t n_tunnels = argc > 2 ? strtoul(argv[2], NULL, 10) : 200;
        if (mib == 0 || n_tunnels == 0) {
                fprintf(stderr, "usage: bench-proxy [MiB] [tunnels]\n");
                return EXIT_FAILURE;
        }

        uint16_t sink_port;
        Server sink = {.fd = listen_lo(&sink_port), .conn = sink_conn};
        Server echo = {.fd = listen_lo(&echo_port), .conn = echo_conn};

        NetPolicy policy = {.mode = NET_MODE_PROXY};
        char rule[64];
        NetRule r;
        const char *why;
        snprintf(rule, sizeof rule, "127.0.0.1:%u", sink_port);
        if (net_rule_parse(rule, &r, &why) < 0 || net_policy_add(&policy, &r) < 0) return EXIT_FAILURE;
        net_rule_done(&r);
        snprintf(rule, sizeof rule, "127.0.0.1:%u", echo_port);
        if (net_rule_parse(rule, &r, &why) < 0 || net_policy_add(&policy, &r) < 0) return EXIT_FAILURE;
        net_rule_done(&r);

        EgressConfig c = {.listen_fd = listen_lo(&proxy_port), .policy = &policy, .task_id = "bench"};
        pid_t pid;
        if (egress_proxy_spawn(&c, &pid) < 0) die("egress_proxy_spawn");
        spawn(serve, &sink);
        spawn(serve, &echo);

        char *buf = malloc(CHUNK);
        memset(buf, 'x', CHUNK);
        double best_direct = 1e9, best_proxy = 1e9;
        for (int i = 0; i < 3; i++) {
                double d = stream(dial(sink_port), mib, buf);
                double p = stream(tunnel(sink_port), mib, buf);
                if (d < best_direct) best_direct = d;
                if (p < best_proxy) best_proxy = p;
        }
        double direct = (double) mib / best_direct, proxied = (double) mib / best_proxy;
        printf("one stream of %zu MiB (best of 3):\n", mib);
        printf("  direct loopback   %8.1f MiB/s\n", direct);
        printf("  CONNECT tunnel    %8.1f MiB/s\n", proxied);
        printf("  ratio             %8.1f %% (goal >= 80 %%)\n", 100.0 * proxied / direct);

        Tunnel *t = calloc(n_tunnels, sizeof *t);
        pthread_t *th = calloc(n_tunnels, sizeof *th);
        double t0 = now_s();
        for (size_t i = 0; i < n_tunnels; i++) {
                pthread_attr_t a;
                pthread_attr_init(&a);
                pthread_attr_setstacksize(&a, 256 * 1024);
                if (pthread_create(&th[i], &a, one_tunnel, &t[i]) != 0) die("pthread_create");
                pthread_attr_destroy(&a);
        }
        size_t ok = 0;
        double slowest = 0;
        for (size_t i = 0; i < n_tunnels; i++) {
                pthread_join(th[i], NULL);
                ok += t[i].ok;
                if (t[i].seconds > slowest) slowest = t[i].seconds;
        }
        double total = now_s() - t0;
        printf("%zu tunnels at once, 1 MiB up and back each:\n", n_tunnels);
        printf("  total             %8.3f s (%.1f MiB/s both ways)\n", total, 2.0 * (double) n_tunnels / total);
        printf("  slowest tunnel    %8.3f s\n", slowest);
        printf("  completed intact  %zu of %zu\n", ok, n_tunnels);

        egress_proxy_stop(pid);
        free(t);
        free(th);
        free(buf);
        net_policy_done(&policy);
        return ok == n_tunnels ? EXIT_SUCCESS : EXIT_FAILURE;
}
