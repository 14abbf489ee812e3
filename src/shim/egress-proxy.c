#include "egress-proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <syslog.h>
#include <systemd/sd-journal.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

/* A connection thread's stack (bytes). getaddrinfo runs on it, through the
 * NSS modules of the host (nss-resolve, nss-myhostname), which want more
 * than the 64 KiB a relay alone needs; the pages are only touched as used. */
#define EGRESS_THREAD_STACK (256u * 1024u)
/* the stack of a relay's second thread (bytes): it only splices */
#define PUMP_THREAD_STACK (64u * 1024u)
/* bytes moved per splice(2) call, and the size asked of a relay's pipes */
#define SPLICE_CHUNK (1u << 20)
/* a tunnel adds its bytes to the stats once this many are pending, and at
 * its end */
#define BYTES_FLUSH (1u << 20)
/* distinct host:port keys whose journal entries are counted one by one;
 * past that all the others share one budget of EGRESS_JOURNAL_PER_HOST */
#define JOURNAL_KEYS 256
/* how long a refused client may go on sending before we close on it (ms),
 * so that it reads our answer rather than a reset */
#define LINGER_MS 500
/* at SIGTERM, how long the open connections get to end once shut down (ms) */
#define STOP_GRACE_MS 1000

#define INVALID_HOST "(invalid)"

typedef struct AllowedStat {
        char host[NET_HOST_MAX + 1];
        uint16_t port;
        uint64_t connections, bytes_up, bytes_down;
} AllowedStat;

typedef struct DeniedStat {
        char host[NET_HOST_MAX + 1];
        uint16_t port;
        const char *reason; /* static text */
        uint64_t count;
} DeniedStat;

typedef struct JournalCount {
        char host[NET_HOST_MAX + 1];
        uint16_t port;
        unsigned n;
} JournalCount;

typedef struct Proxy Proxy;

typedef struct Conn {
        Proxy *proxy;
        size_t slot;     /* index in proxy->conns */
        int client_fd;   /* written under proxy->lock */
        int upstream_fd; /* written under proxy->lock */
        char *buf;       /* the request head as read (EGRESS_HEAD_MAX bytes) */
        size_t len;
        uint64_t head_deadline; /* mono_ms */
        ssize_t stat;    /* index in proxy->allowed, -1 before the connect */
        uint64_t pending_up, pending_down;
        const EgressForward *forward; /* accepted on a forward's listener: raw TCP to its rule's address */
} Conn;

struct Proxy {
        const EgressConfig *config;
        struct sockaddr_storage *own;
        size_t n_own;

        pthread_mutex_t lock;
        pthread_cond_t idle; /* signalled when n_conns drops */
        /* everything below is guarded by lock */
        Conn *conns[EGRESS_MAX_CONNECTIONS];
        size_t n_conns;
        bool stopping;
        AllowedStat allowed[EGRESS_STATS_MAX_HOSTS + 1]; /* the last: host "*" */
        size_t n_allowed;
        DeniedStat denied[EGRESS_STATS_MAX_HOSTS + 1];
        size_t n_denied;
        JournalCount journal[JOURNAL_KEYS];
        size_t n_journal;
        unsigned journal_overflow;
        bool dirty;
};

/* ---- texts ---- */

static char *host_port(const char *host, uint16_t port) {
        if (strchr(host, ':')) return strdup_printf("[%s]:%u", host, (unsigned) port);
        return strdup_printf("%s:%u", host, (unsigned) port);
}

char *egress_denial_text(const char *task_id, const char *host, uint16_t port, const char *reason) {
        _cleanup_free_ char *hp = host_port(strempty(host), port);
        if (!hp) return NULL;
        return strdup_printf("taskferry: egress to %s denied for task %s: %s\n"
                             "help: allow it with taskferry dispatch --allow-host %s (or "
                             "TASKFERRY_ALLOW_HOSTS, or \"network\": {\"allowHosts\": [...]} in config.json)\n",
                             hp, strempty(task_id), strempty(reason), hp);
}

/* ---- stats ---- */

static void copy_host(char dst[static NET_HOST_MAX + 1], const char *src) {
        snprintf(dst, NET_HOST_MAX + 1, "%s", src);
}

/* The allowed entry of host:port (made on first use; past the limit the
 * "*" entry). Under lock. */
static size_t allowed_slot(Proxy *p, const char *host, uint16_t port) {
        for (size_t i = 0; i < p->n_allowed; i++)
                if (p->allowed[i].port == port && streq(p->allowed[i].host, host)) return i;
        if (p->n_allowed < EGRESS_STATS_MAX_HOSTS) {
                AllowedStat *a = &p->allowed[p->n_allowed];
                *a = (AllowedStat) {.port = port};
                copy_host(a->host, host);
                return p->n_allowed++;
        }
        AllowedStat *rest = &p->allowed[EGRESS_STATS_MAX_HOSTS];
        if (rest->host[0] == '\0') copy_host(rest->host, "*");
        return EGRESS_STATS_MAX_HOSTS;
}

static ssize_t stats_connected(Proxy *p, const char *host, uint16_t port) {
        pthread_mutex_lock(&p->lock);
        size_t i = allowed_slot(p, host, port);
        p->allowed[i].connections++;
        p->dirty = true;
        pthread_mutex_unlock(&p->lock);
        return (ssize_t) i;
}

static void stats_add_bytes(Conn *c, uint64_t up, uint64_t down) {
        if (c->stat < 0 || (up == 0 && down == 0)) return;
        Proxy *p = c->proxy;
        pthread_mutex_lock(&p->lock);
        p->allowed[c->stat].bytes_up += up;
        p->allowed[c->stat].bytes_down += down;
        p->dirty = true;
        pthread_mutex_unlock(&p->lock);
}

/* what the request head and an early body counted goes to the stats */
static void stats_flush_bytes(Conn *c) {
        stats_add_bytes(c, c->pending_up, c->pending_down);
        c->pending_up = c->pending_down = 0;
}

static bool stats_denied(Proxy *p, const char *host, uint16_t port, const char *reason) {
        bool journal = false;
        pthread_mutex_lock(&p->lock);
        size_t i;
        for (i = 0; i < p->n_denied; i++)
                if (p->denied[i].port == port && streq(p->denied[i].reason, reason) && streq(p->denied[i].host, host))
                        break;
        if (i == p->n_denied) {
                if (p->n_denied < EGRESS_STATS_MAX_HOSTS) {
                        DeniedStat *d = &p->denied[p->n_denied++];
                        *d = (DeniedStat) {.port = port, .reason = reason};
                        copy_host(d->host, host);
                } else {
                        i = EGRESS_STATS_MAX_HOSTS;
                        DeniedStat *rest = &p->denied[i];
                        if (!rest->reason) {
                                copy_host(rest->host, "*");
                                rest->reason = "*";
                        }
                }
        }
        p->denied[i].count++;
        p->dirty = true;

        size_t j;
        for (j = 0; j < p->n_journal; j++)
                if (p->journal[j].port == port && streq(p->journal[j].host, host)) break;
        if (j == p->n_journal && p->n_journal < JOURNAL_KEYS) {
                JournalCount *k = &p->journal[p->n_journal++];
                *k = (JournalCount) {.port = port};
                copy_host(k->host, host);
        }
        unsigned *n = j < p->n_journal ? &p->journal[j].n : &p->journal_overflow;
        if (*n < EGRESS_JOURNAL_PER_HOST) {
                (*n)++;
                journal = true;
        }
        pthread_mutex_unlock(&p->lock);
        return journal;
}

/* The stats as JSON text, malloc'd (NULL on ENOMEM). Under lock. */
static char *stats_render_locked(Proxy *p) {
        _cleanup_json_ json_object *o = json_object_new_object(), *al = json_object_new_array(),
                                   *de = json_object_new_array();
        if (!o || !al || !de) return NULL;
        bool rest_a = p->allowed[EGRESS_STATS_MAX_HOSTS].host[0] != '\0';
        for (size_t i = 0; i < p->n_allowed + rest_a; i++) {
                const AllowedStat *a = &p->allowed[i < p->n_allowed ? i : EGRESS_STATS_MAX_HOSTS];
                json_object *e = json_object_new_object();
                if (!e || json_object_array_add(al, e) < 0) {
                        json_object_put(e);
                        return NULL;
                }
                if (json_add_string(e, "host", a->host) < 0 || json_add_int(e, "port", a->port) < 0 ||
                    json_add_int(e, "connections", (int64_t) a->connections) < 0 ||
                    json_add_int(e, "bytesUp", (int64_t) a->bytes_up) < 0 ||
                    json_add_int(e, "bytesDown", (int64_t) a->bytes_down) < 0)
                        return NULL;
        }
        bool rest_d = p->denied[EGRESS_STATS_MAX_HOSTS].reason != NULL;
        for (size_t i = 0; i < p->n_denied + rest_d; i++) {
                const DeniedStat *d = &p->denied[i < p->n_denied ? i : EGRESS_STATS_MAX_HOSTS];
                json_object *e = json_object_new_object();
                if (!e || json_object_array_add(de, e) < 0) {
                        json_object_put(e);
                        return NULL;
                }
                if (json_add_string(e, "host", d->host) < 0 || json_add_int(e, "port", d->port) < 0 ||
                    json_add_string(e, "reason", d->reason) < 0 || json_add_int(e, "count", (int64_t) d->count) < 0)
                        return NULL;
        }
        if (json_add_string(o, "mode", strempty(net_mode_to_string(p->config->policy->mode))) < 0) return NULL;
        if (json_add(o, "allowed", al) < 0) return NULL;
        al = NULL;
        if (json_add(o, "denied", de) < 0) return NULL;
        de = NULL;
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        return s ? strdup_printf("%s\n", s) : NULL;
}

/* The stats text and dirty cleared; NULL when nothing changed (unless
 * force) or on ENOMEM. */
static char *stats_render(Proxy *p, bool force) {
        char *text = NULL;
        pthread_mutex_lock(&p->lock);
        if (p->dirty || force) {
                text = stats_render_locked(p);
                if (text) p->dirty = false;
        }
        pthread_mutex_unlock(&p->lock);
        return text;
}

/* Only the accept loop's thread writes the file. */
static void stats_write(Proxy *p, bool force) {
        if (!p->config->stats_path) return;
        _cleanup_free_ char *text = stats_render(p, force);
        if (!text) return;
        int r = write_file_atomic(p->config->stats_path, text, strlen(text), 0600);
        if (r < 0) {
                log_warning_errno(r, "task %s: cannot write the egress stats", strempty(p->config->task_id));
                pthread_mutex_lock(&p->lock);
                p->dirty = true;
                pthread_mutex_unlock(&p->lock);
        }
}

/* ---- socket helpers ---- */

static int remaining_ms(uint64_t deadline) {
        uint64_t now = mono_ms();
        if (now >= deadline) return 0;
        uint64_t left = deadline - now;
        return left > 60000 ? 60000 : (int) left;
}

static int wait_fd(int fd, short events, uint64_t deadline) {
        for (;;) {
                struct pollfd pfd = {.fd = fd, .events = events};
                int left = remaining_ms(deadline);
                if (left == 0) return -ETIMEDOUT;
                int n = poll(&pfd, 1, left);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) return -errno;
                if (n > 0) return 0;
        }
}

/* All of buf to the non-blocking socket fd by the deadline. */
static int send_all(int fd, const void *buf, size_t len, uint64_t deadline) {
        const char *b = buf;
        while (len > 0) {
                ssize_t n = send(fd, b, len, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0 && errno == EAGAIN) {
                        int r = wait_fd(fd, POLLOUT, deadline);
                        if (r < 0) return r;
                        continue;
                }
                if (n < 0) return -errno;
                b += n;
                len -= (size_t) n;
        }
        return 0;
}

/* Read more of the head into c->buf: >0 bytes added, 0 at EOF, -E2BIG when
 * the buffer is full, -ETIMEDOUT, -errno. */
static ssize_t read_more(Conn *c) {
        if (c->len >= EGRESS_HEAD_MAX) return -E2BIG;
        for (;;) {
                ssize_t n = recv(c->client_fd, c->buf + c->len, EGRESS_HEAD_MAX - c->len, 0);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0 && errno == EAGAIN) {
                        int r = wait_fd(c->client_fd, POLLIN, c->head_deadline);
                        if (r < 0) return r;
                        continue;
                }
                if (n < 0) return -errno;
                c->len += (size_t) n;
                return n;
        }
}

/* Have at least n bytes of the head in c->buf. 0, -EPIPE at EOF before. */
static int need(Conn *c, size_t n) {
        while (c->len < n) {
                ssize_t r = read_more(c);
                if (r == 0) return -EPIPE;
                if (r < 0) return (int) r;
        }
        return 0;
}

/* Close the sending side, then read and drop what the client still sends
 * for a moment, so that it reads our answer instead of a reset. */
static void linger_close(int fd) {
        (void) shutdown(fd, SHUT_WR);
        uint64_t deadline = mono_ms() + LINGER_MS;
        char junk[4096];
        for (size_t total = 0; total < 1024 * 1024;) {
                if (wait_fd(fd, POLLIN, deadline) < 0) return;
                ssize_t n = recv(fd, junk, sizeof junk, 0);
                if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
                if (n <= 0) return;
                total += (size_t) n;
        }
}

/* ---- the decision and the connect ---- */

typedef enum Verdict {
        VERDICT_OK,
        VERDICT_BAD,         /* 400 */
        VERDICT_DENIED,      /* 403 */
        VERDICT_UNREACHABLE, /* 502 */
} Verdict;

typedef struct Outcome {
        Verdict verdict;
        char host[NET_HOST_MAX + 1]; /* normalized, or INVALID_HOST */
        uint16_t port;
        const char *reason; /* static text */
        int error;          /* the connect's error for VERDICT_UNREACHABLE */
} Outcome;

static Verdict fail_with(Outcome *o, Verdict v, const char *reason) {
        o->verdict = v;
        o->reason = reason;
        return v;
}

static void conn_set_upstream(Conn *c, int fd) {
        pthread_mutex_lock(&c->proxy->lock);
        c->upstream_fd = fd;
        pthread_mutex_unlock(&c->proxy->lock);
}

/* A non-blocking connect to sa by the deadline: the socket, or -errno. */
static int connect_one(Conn *c, const struct sockaddr *sa, socklen_t salen, uint64_t deadline) {
        int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) return -errno;
        conn_set_upstream(c, fd);
        int r = 0;
        if (connect(fd, sa, salen) < 0) {
                if (errno != EINPROGRESS && errno != EINTR)
                        r = -errno;
                else if ((r = wait_fd(fd, POLLOUT, deadline)) >= 0) {
                        int err = 0;
                        socklen_t l = sizeof err;
                        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
                                r = -errno;
                        else if (err != 0)
                                r = -err;
                }
        }
        if (r < 0) {
                conn_set_upstream(c, -1);
                close(fd);
                return r;
        }
        int one = 1;
        (void) setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
        (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return fd;
}

/* The whole decision on raw host bytes (as the client sent them) and port;
 * with VERDICT_OK c->upstream_fd is connected and counted in the stats. */
static Verdict decide(Conn *c, const char *raw, size_t raw_len, bool want_ip, uint16_t port, Outcome *o) {
        Proxy *p = c->proxy;
        *o = (Outcome) {.port = port};
        copy_host(o->host, INVALID_HOST);

        _cleanup_free_ char *host = NULL;
        bool is_ip = false;
        if (net_host_normalize(raw, raw_len, &host, &is_ip) < 0 || (want_ip && !is_ip))
                return fail_with(o, VERDICT_BAD, "invalid host name");
        copy_host(o->host, host);
        if (port == 0) return fail_with(o, VERDICT_BAD, "invalid port");

        if (!net_policy_match(p->config->policy, host, port))
                return fail_with(o, VERDICT_DENIED, "not in the task's allowed hosts");

        struct addrinfo hints = {
                .ai_family = AF_UNSPEC,
                .ai_socktype = SOCK_STREAM,
                .ai_flags = is_ip ? AI_NUMERICHOST : 0,
        };
        struct addrinfo *res = NULL;
        int g = getaddrinfo(host, NULL, &hints, &res);
        if (g != 0 || !res) {
                if (res) freeaddrinfo(res);
                return fail_with(o, VERDICT_UNREACHABLE, "the name does not resolve");
        }

        const char *refused = NULL;
        int last_error = 0;
        uint64_t deadline = mono_ms() + EGRESS_CONNECT_TIMEOUT_MS;
        int fd = -1;
        for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
                if (ai->ai_family == AF_INET && ai->ai_addrlen >= sizeof(struct sockaddr_in))
                        ((struct sockaddr_in *) ai->ai_addr)->sin_port = htons(port);
                else if (ai->ai_family == AF_INET6 && ai->ai_addrlen >= sizeof(struct sockaddr_in6))
                        ((struct sockaddr_in6 *) ai->ai_addr)->sin6_port = htons(port);
                else
                        continue;
                const char *why = NULL;
                if (net_policy_check_addr(p->config->policy, port, ai->ai_addr, p->own, p->n_own, &why) < 0) {
                        if (!refused) refused = why ? why : "refused address";
                        continue;
                }
                if (mono_ms() >= deadline) {
                        last_error = -ETIMEDOUT;
                        break;
                }
                int r = connect_one(c, ai->ai_addr, ai->ai_addrlen, deadline);
                if (r < 0)
                        last_error = r;
                else
                        fd = r;
        }
        freeaddrinfo(res);

        if (fd < 0) {
                if (last_error == 0) return fail_with(o, VERDICT_DENIED, refused ? refused : "refused address");
                o->error = last_error;
                return fail_with(o, VERDICT_UNREACHABLE,
                                 last_error == -ETIMEDOUT ? "the upstream does not answer" : "the upstream refuses");
        }
        c->stat = stats_connected(p, host, port);
        o->verdict = VERDICT_OK;
        return VERDICT_OK;
}

/* Count a refusal and journal it (within the budget of its host:port). */
static void note_refusal(Conn *c, const Outcome *o) {
        Proxy *p = c->proxy;
        if (!stats_denied(p, o->host, o->port, o->reason)) return;
        const char *id = strempty(p->config->task_id);
        _cleanup_free_ char *msg = o->verdict == VERDICT_DENIED
                                           ? egress_denial_text(id, o->host, o->port, o->reason)
                                           : strdup_printf("taskferry: egress request refused for task %s: %s", id,
                                                           o->reason);
        if (!msg) return;
        (void) sd_journal_send("MESSAGE=%s", msg, "MESSAGE_ID=" NET_DENIED_MESSAGE_ID, "PRIORITY=%d", LOG_WARNING,
                               "TASKFERRY_TASK_ID=%s", id, "TASKFERRY_NET_HOST=%s", o->host, "TASKFERRY_NET_PORT=%u",
                               (unsigned) o->port, "TASKFERRY_NET_REASON=%s", o->reason, NULL);
}

/* ---- the relay ---- */

/* One direction of a relay: blocking splices from `from` through a pipe
 * of its own into `to`, on a thread of its own, so that each direction
 * moves as soon as its bytes arrive and costs no poll round per chunk. */
typedef struct Pump {
        Conn *conn;
        int from, to;
        uint64_t read_left; /* bytes still to take from `from` (UINT64_MAX: all) */
        bool shut_on_eof;   /* shutdown(to, SHUT_WR) once drained */
        bool up;            /* counted as bytes up (else down) */
        int error;          /* -errno of a failed splice, 0 at EOF */
} Pump;

static int fd_set_blocking(int fd) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) return -errno;
        return 0;
}

/* Runs one direction to its EOF (or its byte limit), passing the EOF on as
 * a half-close when asked. A failure shuts both ends down, which wakes the
 * other direction's splice. Sets p->error. */
static void pump_run(Pump *p) {
        int pipefd[2] = {-1, -1};
        uint64_t pending = 0;
        int r = 0;
        if (pipe2(pipefd, O_CLOEXEC) < 0) {
                r = -errno;
                goto out;
        }
        (void) fcntl(pipefd[1], F_SETPIPE_SZ, SPLICE_CHUNK);
        while (p->read_left > 0) {
                size_t want = p->read_left < SPLICE_CHUNK ? (size_t) p->read_left : SPLICE_CHUNK;
                ssize_t n = splice(p->from, NULL, pipefd[1], NULL, want, SPLICE_F_MOVE);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) {
                        r = -errno;
                        goto out;
                }
                if (n == 0) break;
                if (p->read_left != UINT64_MAX) p->read_left -= (uint64_t) n;
                while (n > 0) {
                        ssize_t m = splice(pipefd[0], NULL, p->to, NULL, (size_t) n, SPLICE_F_MOVE);
                        if (m < 0 && errno == EINTR) continue;
                        if (m <= 0) {
                                r = m < 0 ? -errno : -EPIPE;
                                goto out;
                        }
                        n -= m;
                        pending += (uint64_t) m;
                }
                if (pending >= BYTES_FLUSH) {
                        stats_add_bytes(p->conn, p->up ? pending : 0, p->up ? 0 : pending);
                        pending = 0;
                }
        }
        if (p->shut_on_eof) (void) shutdown(p->to, SHUT_WR);
out:
        stats_add_bytes(p->conn, p->up ? pending : 0, p->up ? 0 : pending);
        safe_close(pipefd[0]);
        safe_close(pipefd[1]);
        if (r < 0) {
                (void) shutdown(p->from, SHUT_RDWR);
                (void) shutdown(p->to, SHUT_RDWR);
        }
        p->error = r;
}

static void *pump_main(void *arg) {
        pump_run(arg);
        return NULL;
}

/* Bytes both ways between the client and c->upstream_fd until both ends
 * are done (each EOF passed on as a half-close) or one fails. up_limit:
 * the bytes the client may still send up (UINT64_MAX: no limit). The
 * downstream direction runs on a thread of its own, the upstream one on
 * the caller's. */
static void relay(Conn *c, uint64_t up_limit, bool up_shut) {
        stats_flush_bytes(c);
        if (fd_set_blocking(c->client_fd) < 0 || fd_set_blocking(c->upstream_fd) < 0) return;
        Pump up = {.conn = c, .from = c->client_fd, .to = c->upstream_fd, .read_left = up_limit,
                   .shut_on_eof = up_shut, .up = true};
        Pump down = {.conn = c, .from = c->upstream_fd, .to = c->client_fd, .read_left = UINT64_MAX,
                     .shut_on_eof = true};
        pthread_attr_t attr;
        pthread_t t;
        if (pthread_attr_init(&attr) != 0) return;
        (void) pthread_attr_setstacksize(&attr, PUMP_THREAD_STACK);
        int k = pthread_create(&t, &attr, pump_main, &down);
        pthread_attr_destroy(&attr);
        if (k != 0) return;
        pump_run(&up);
        (void) pthread_join(t, NULL);
}

/* ---- answers ---- */

static const char *status_text(int status) {
        switch (status) {
        case 400:
                return "Bad Request";
        case 403:
                return "Forbidden";
        case 502:
                return "Bad Gateway";
        case 503:
                return "Service Unavailable";
        default:
                return "Error";
        }
}

static void http_answer(int fd, int status, const char *body, uint64_t deadline) {
        _cleanup_free_ char *head = strdup_printf("HTTP/1.1 %d %s\r\n"
                                                  "Content-Type: text/plain; charset=utf-8\r\n"
                                                  "Content-Length: %zu\r\n"
                                                  "Connection: close\r\n\r\n",
                                                  status, status_text(status), strlen(body));
        if (!head || send_all(fd, head, strlen(head), deadline) < 0) return;
        (void) send_all(fd, body, strlen(body), deadline);
}

/* The HTTP answer to a refused request, counted and journaled. */
static void http_refuse(Conn *c, const Outcome *o) {
        note_refusal(c, o);
        uint64_t deadline = mono_ms() + 5000;
        const char *id = strempty(c->proxy->config->task_id);
        _cleanup_free_ char *body = NULL;
        int status;
        switch (o->verdict) {
        case VERDICT_DENIED:
                status = 403;
                body = egress_denial_text(id, o->host, o->port, o->reason);
                break;
        case VERDICT_UNREACHABLE:
                status = 502;
                body = strdup_printf("taskferry: egress to %s port %u for task %s failed: %s\n", o->host,
                                     (unsigned) o->port, id, o->reason);
                break;
        default:
                status = 400;
                body = strdup_printf("taskferry: egress proxy of task %s: %s (the proxy takes \"CONNECT host:port\", "
                                     "an absolute http:// URL, or SOCKS5)\n",
                                     id, o->reason);
        }
        http_answer(c->client_fd, status, body ? body : "taskferry: refused\n", deadline);
        linger_close(c->client_fd);
}

static void http_bad(Conn *c, const char *reason, const char *host, uint16_t port) {
        Outcome o = {.verdict = VERDICT_BAD, .port = port, .reason = reason};
        copy_host(o.host, host ? host : INVALID_HOST);
        http_refuse(c, &o);
}

/* ---- HTTP parsing ---- */

static bool is_tchar(char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static bool is_digit(char ch) {
        return ch >= '0' && ch <= '9';
}


/* "host[:port]" or "[v6][:port]": the raw host (brackets off, *ret_ip set
 * for brackets) and the port (def_port when absent; 0 = required). */
static int parse_authority(const char *s, size_t n, uint16_t def_port, const char **ret_host, size_t *ret_len,
                           bool *ret_ip, uint16_t *ret_port) {
        const char *host = s, *port = NULL;
        size_t host_len, port_len = 0;
        bool bracket = n > 0 && s[0] == '[';
        if (bracket) {
                const char *end = memchr(s, ']', n);
                if (!end) return -EINVAL;
                host = s + 1;
                host_len = (size_t) (end - host);
                size_t rest = n - (size_t) (end + 1 - s);
                if (rest > 0) {
                        if (end[1] != ':') return -EINVAL;
                        port = end + 2;
                        port_len = rest - 1;
                }
        } else {
                const char *colon = memrchr(s, ':', n);
                host_len = colon ? (size_t) (colon - s) : n;
                if (colon) {
                        port = colon + 1;
                        port_len = n - host_len - 1;
                }
                if (memchr(host, ':', host_len)) return -EINVAL; /* an IPv6 literal needs its brackets */
        }
        if (host_len == 0) return -EINVAL;
        if (port) {
                if (net_port_parse(port, port_len, ret_port) < 0) return -EINVAL;
        } else if (def_port == 0)
                return -EINVAL;
        else
                *ret_port = def_port;
        *ret_host = host;
        *ret_len = host_len;
        *ret_ip = bracket;
        return 0;
}

static bool token_eq(const char *s, size_t n, const char *word) {
        return strlen(word) == n && strncasecmp(s, word, n) == 0;
}

typedef struct Line {
        const char *p;
        size_t n;
} Line;

/* Split the head (up to the blank line, excluded) into lines; every line
 * must end in CRLF, hold no NUL, no bare CR or LF. -EINVAL. */
static int split_lines(const char *head, size_t len, Line **ret, size_t *ret_n) {
        size_t cap = 0, n = 0;
        _cleanup_free_ Line *lines = NULL;
        for (size_t i = 0; i < len;) {
                const char *lf = memchr(head + i, '\n', len - i);
                if (!lf || lf == head + i || lf[-1] != '\r') return -EINVAL;
                size_t l = (size_t) (lf - 1 - (head + i));
                for (size_t k = 0; k < l; k++)
                        if (head[i + k] == '\0' || head[i + k] == '\r') return -EINVAL;
                if (n == cap) {
                        cap = cap ? cap * 2 : 16;
                        Line *m = realloc(lines, cap * sizeof *m);
                        if (!m) return -ENOMEM;
                        lines = m;
                }
                lines[n++] = (Line) {head + i, l};
                i = (size_t) (lf + 1 - head);
        }
        if (n == 0) return -EINVAL;
        *ret = TAKE_PTR(lines);
        *ret_n = n;
        return 0;
}

/* The trimmed value of a header line "Name: value" whose name is name_len
 * bytes. */
static void header_value(const Line *l, size_t name_len, const char **ret, size_t *ret_n) {
        const char *v = l->p + name_len + 1, *e = l->p + l->n;
        while (v < e && (*v == ' ' || *v == '\t')) v++;
        while (e > v && (e[-1] == ' ' || e[-1] == '\t')) e--;
        *ret = v;
        *ret_n = (size_t) (e - v);
}

static void serve_tunnel(Conn *c, const char *target, size_t target_len, size_t head_len) {
        const char *raw;
        size_t raw_len;
        bool want_ip;
        uint16_t port = 0;
        if (parse_authority(target, target_len, 0, &raw, &raw_len, &want_ip, &port) < 0)
                return http_bad(c, "malformed CONNECT target", NULL, 0);
        Outcome o;
        if (decide(c, raw, raw_len, want_ip, port, &o) != VERDICT_OK) return http_refuse(c, &o);

        uint64_t deadline = mono_ms() + EGRESS_CONNECT_TIMEOUT_MS;
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        if (send_all(c->client_fd, ok, sizeof ok - 1, deadline) < 0) return;
        /* what the client sent early goes first */
        if (c->len > head_len) {
                if (send_all(c->upstream_fd, c->buf + head_len, c->len - head_len, deadline) < 0) return;
                c->pending_up += c->len - head_len;
        }
        relay(c, UINT64_MAX, true);
}

static void serve_http(Conn *c, const Line *lines, size_t n_lines, const char *method, size_t method_len,
                       const char *target, size_t target_len, const char *version, size_t head_len) {
        /* http://authority[/path] */
        const char *auth = target + 7, *end = target + target_len;
        const char *path = auth;
        while (path < end && *path != '/' && *path != '?' && *path != '#') path++;
        if (memchr(auth, '@', (size_t) (path - auth))) return http_bad(c, "user info in the URL", NULL, 0);
        const char *raw;
        size_t raw_len;
        bool want_ip;
        uint16_t port = 0;
        if (parse_authority(auth, (size_t) (path - auth), 80, &raw, &raw_len, &want_ip, &port) < 0)
                return http_bad(c, "malformed URL", NULL, 0);
        _cleanup_free_ char *host = NULL;
        bool is_ip = false;
        if (net_host_normalize(raw, raw_len, &host, &is_ip) < 0 || (want_ip && !is_ip))
                return http_bad(c, "invalid host name", NULL, port);

        /* the headers: which to keep, and the checks */
        size_t n_host = 0, n_cl = 0, n_te = 0;
        uint64_t content_length = 0;
        _cleanup_free_ bool *keep = calloc(n_lines, sizeof(bool));
        if (!keep) return;
        for (size_t i = 1; i < n_lines; i++) {
                const Line *l = &lines[i];
                const char *colon = memchr(l->p, ':', l->n);
                size_t name_len = colon ? (size_t) (colon - l->p) : 0;
                if (name_len == 0) return http_bad(c, "malformed header", host, port);
                for (size_t k = 0; k < name_len; k++)
                        if (!is_tchar(l->p[k])) return http_bad(c, "malformed header", host, port);
                const char *v;
                size_t vn;
                header_value(l, name_len, &v, &vn);
                if (name_len >= 6 && strncasecmp(l->p, "proxy-", 6) == 0) continue;
                if (token_eq(l->p, name_len, "connection") || token_eq(l->p, name_len, "keep-alive")) continue;
                if (token_eq(l->p, name_len, "host")) {
                        if (++n_host > 1) return http_bad(c, "more than one Host header", host, port);
                        const char *hr;
                        size_t hrl;
                        bool hip;
                        uint16_t hport = 0;
                        _cleanup_free_ char *hn = NULL;
                        if (parse_authority(v, vn, 80, &hr, &hrl, &hip, &hport) < 0 ||
                            net_host_normalize(hr, hrl, &hn, NULL) < 0 || !streq(hn, host) || hport != port)
                                return http_bad(c, "the Host header names another host than the URL", host, port);
                } else if (token_eq(l->p, name_len, "content-length")) {
                        n_cl++;
                        content_length = 0;
                        if (vn == 0 || vn > 18) return http_bad(c, "malformed Content-Length", host, port);
                        for (size_t k = 0; k < vn; k++) {
                                if (!is_digit(v[k])) return http_bad(c, "malformed Content-Length", host, port);
                                content_length = content_length * 10 + (uint64_t) (v[k] - '0');
                        }
                } else if (token_eq(l->p, name_len, "transfer-encoding"))
                        n_te++;
                keep[i] = true;
        }
        if (n_te > 0 && n_cl > 0)
                return http_bad(c, "Content-Length together with Transfer-Encoding", host, port);
        if (n_cl > 1) return http_bad(c, "more than one Content-Length", host, port);

        Outcome o;
        if (decide(c, raw, raw_len, want_ip, port, &o) != VERDICT_OK) return http_refuse(c, &o);

        /* the head in origin form */
        size_t cap = head_len + 256 + (size_t) (end - auth);
        _cleanup_free_ char *out = malloc(cap);
        if (!out) return;
        size_t n = 0;
        const char *p = path < end ? path : "/";
        size_t pl = path < end ? (size_t) (end - path) : 1;
        bool slash = pl > 0 && p[0] != '/';
        n += (size_t) snprintf(out + n, cap - n, "%.*s %s%.*s %.8s\r\n", (int) method_len, method, slash ? "/" : "",
                               (int) pl, p, version);
        for (size_t i = 1; i < n_lines; i++)
                if (keep[i]) {
                        memcpy(out + n, lines[i].p, lines[i].n);
                        n += lines[i].n;
                        memcpy(out + n, "\r\n", 2);
                        n += 2;
                }
        if (n_host == 0)
                n += (size_t) snprintf(out + n, cap - n, "Host: %.*s\r\n", (int) (path - auth), auth);
        n += (size_t) snprintf(out + n, cap - n, "Connection: close\r\n\r\n");

        uint64_t deadline = mono_ms() + EGRESS_CONNECT_TIMEOUT_MS;
        if (send_all(c->upstream_fd, out, n, deadline) < 0) return;
        c->pending_up += n;
        /* the body: exactly Content-Length bytes, all of a chunked one (its
         * end is the client's), none without either */
        uint64_t body = n_te > 0 ? UINT64_MAX : content_length;
        size_t early = c->len - head_len;
        if (body != UINT64_MAX && early > body) early = (size_t) body;
        if (early > 0) {
                if (send_all(c->upstream_fd, c->buf + head_len, early, deadline) < 0) return;
                c->pending_up += early;
                if (body != UINT64_MAX) body -= early;
        }
        relay(c, body, n_te > 0);
}

static void serve_http_head(Conn *c) {
        const char *end;
        size_t checked = 0;
        for (;;) {
                /* a bare LF or a NUL is refused at once, not after the
                 * head's timeout */
                for (; checked < c->len; checked++)
                        if (c->buf[checked] == '\0' ||
                            (c->buf[checked] == '\n' && (checked == 0 || c->buf[checked - 1] != '\r')))
                                return http_bad(c, "malformed request head", NULL, 0);
                end = c->len >= 4 ? memmem(c->buf, c->len, "\r\n\r\n", 4) : NULL;
                if (end) break;
                ssize_t r = read_more(c);
                if (r == 0) return http_bad(c, "incomplete request head", NULL, 0);
                if (r == -E2BIG) return http_bad(c, "request head over 16 KiB", NULL, 0);
                if (r == -ETIMEDOUT) return http_bad(c, "no request head in time", NULL, 0);
                if (r < 0) return;
        }
        size_t head_len = (size_t) (end - c->buf) + 4;
        _cleanup_free_ Line *lines = NULL;
        size_t n_lines = 0;
        if (split_lines(c->buf, head_len - 2, &lines, &n_lines) < 0)
                return http_bad(c, "malformed request head", NULL, 0);

        /* METHOD SP target SP HTTP/1.x */
        const Line *rl = &lines[0];
        const char *sp1 = memchr(rl->p, ' ', rl->n);
        const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t) (rl->p + rl->n - sp1 - 1)) : NULL;
        if (!sp1 || !sp2 || sp1 == rl->p || sp2 == sp1 + 1) return http_bad(c, "malformed request line", NULL, 0);
        const char *method = rl->p, *target = sp1 + 1, *version = sp2 + 1;
        size_t method_len = (size_t) (sp1 - rl->p), target_len = (size_t) (sp2 - target);
        size_t version_len = (size_t) (rl->p + rl->n - version);
        for (size_t k = 0; k < method_len; k++)
                if (!is_tchar(method[k])) return http_bad(c, "malformed request line", NULL, 0);
        for (size_t k = 0; k < target_len; k++)
                if ((unsigned char) target[k] <= ' ' || target[k] == 0x7f)
                        return http_bad(c, "malformed request line", NULL, 0);
        if (!(version_len == 8 && (memcmp(version, "HTTP/1.1", 8) == 0 || memcmp(version, "HTTP/1.0", 8) == 0)))
                return http_bad(c, "malformed request line", NULL, 0);
        /* obsolete line folding */
        for (size_t i = 1; i < n_lines; i++)
                if (lines[i].n == 0 || lines[i].p[0] == ' ' || lines[i].p[0] == '\t')
                        return http_bad(c, "malformed header", NULL, 0);

        if (method_len == 7 && memcmp(method, "CONNECT", 7) == 0)
                return serve_tunnel(c, target, target_len, head_len);
        if (target_len > 7 && strncasecmp(target, "http://", 7) == 0)
                return serve_http(c, lines, n_lines, method, method_len, target, target_len, version, head_len);
        if (target_len > 8 && strncasecmp(target, "https://", 8) == 0)
                return http_bad(c, "an https:// URL needs CONNECT", NULL, 0);
        return http_bad(c, "not a proxy request (origin-form)", NULL, 0);
}

/* ---- SOCKS5 (RFC 1928) ---- */

enum {
        SOCKS_OK = 0x00,
        SOCKS_GENERAL_FAILURE = 0x01,
        SOCKS_NOT_ALLOWED = 0x02,
        SOCKS_HOST_UNREACHABLE = 0x04,
        SOCKS_REFUSED = 0x05,
        SOCKS_COMMAND_UNSUPPORTED = 0x07,
        SOCKS_ATYP_UNSUPPORTED = 0x08,
};

static int socks_reply(Conn *c, uint8_t rep) {
        /* BND.ADDR 0.0.0.0:0: the host's own address is none of the
         * sandbox's business */
        const uint8_t r[10] = {0x05, rep, 0x00, 0x01, 0, 0, 0, 0, 0, 0};
        return send_all(c->client_fd, r, sizeof r, mono_ms() + 5000);
}

static void socks_bad(Conn *c, uint8_t rep, const char *reason) {
        Outcome o = {.verdict = VERDICT_BAD, .reason = reason};
        copy_host(o.host, INVALID_HOST);
        note_refusal(c, &o);
        (void) socks_reply(c, rep);
        linger_close(c->client_fd);
}

static void serve_socks(Conn *c) {
        const uint8_t *b = (const uint8_t *) c->buf;
        if (need(c, 2) < 0 || need(c, 2 + (size_t) b[1]) < 0) return;
        size_t nm = b[1];
        if (!memchr(b + 2, 0x00, nm)) {
                static const uint8_t no[2] = {0x05, 0xff};
                (void) send_all(c->client_fd, no, sizeof no, mono_ms() + 5000);
                Outcome o = {.verdict = VERDICT_BAD, .reason = "SOCKS5 without the no-authentication method"};
                copy_host(o.host, INVALID_HOST);
                note_refusal(c, &o);
                return linger_close(c->client_fd);
        }
        static const uint8_t yes[2] = {0x05, 0x00};
        if (send_all(c->client_fd, yes, sizeof yes, mono_ms() + 5000) < 0) return;

        size_t q = 2 + nm; /* the request starts here */
        if (need(c, q + 5) < 0) return;
        if (b[q] != 0x05) return socks_bad(c, SOCKS_GENERAL_FAILURE, "malformed SOCKS5 request");
        if (b[q + 1] != 0x01) return socks_bad(c, SOCKS_COMMAND_UNSUPPORTED, "SOCKS5 command other than CONNECT");
        char text[INET6_ADDRSTRLEN];
        const char *raw;
        size_t raw_len, addr_end;
        switch (b[q + 3]) {
        case 0x01:
                if (need(c, q + 4 + 4 + 2) < 0) return;
                if (!inet_ntop(AF_INET, b + q + 4, text, sizeof text)) return;
                raw = text;
                raw_len = strlen(text);
                addr_end = q + 8;
                break;
        case 0x04:
                if (need(c, q + 4 + 16 + 2) < 0) return;
                if (!inet_ntop(AF_INET6, b + q + 4, text, sizeof text)) return;
                raw = text;
                raw_len = strlen(text);
                addr_end = q + 20;
                break;
        case 0x03:
                if (need(c, q + 5 + (size_t) b[q + 4] + 2) < 0) return;
                raw = c->buf + q + 5;
                raw_len = b[q + 4];
                addr_end = q + 5 + raw_len;
                break;
        default:
                return socks_bad(c, SOCKS_ATYP_UNSUPPORTED, "SOCKS5 address type unknown");
        }
        uint16_t port = (uint16_t) (b[addr_end] << 8 | b[addr_end + 1]);
        size_t req_end = addr_end + 2;

        Outcome o;
        if (decide(c, raw, raw_len, false, port, &o) != VERDICT_OK) {
                note_refusal(c, &o);
                uint8_t rep = o.verdict == VERDICT_DENIED        ? SOCKS_NOT_ALLOWED
                              : o.verdict == VERDICT_BAD         ? SOCKS_GENERAL_FAILURE
                              : o.error == -ECONNREFUSED         ? SOCKS_REFUSED
                                                                 : SOCKS_HOST_UNREACHABLE;
                (void) socks_reply(c, rep);
                return linger_close(c->client_fd);
        }
        if (socks_reply(c, SOCKS_OK) < 0) return;
        if (c->len > req_end) {
                if (send_all(c->upstream_fd, c->buf + req_end, c->len - req_end, mono_ms() + 5000) < 0) return;
                c->pending_up += c->len - req_end;
        }
        relay(c, UINT64_MAX, true);
}

/* ---- connections ---- */

static void conn_free(Conn *c) {
        Proxy *p = c->proxy;
        pthread_mutex_lock(&p->lock);
        int cfd = c->client_fd, ufd = c->upstream_fd;
        c->client_fd = c->upstream_fd = -1;
        p->conns[c->slot] = NULL;
        p->n_conns--;
        pthread_cond_broadcast(&p->idle);
        pthread_mutex_unlock(&p->lock);
        safe_close(cfd);
        safe_close(ufd);
        free(c->buf);
        free(c);
}

/* A connection to a forward (netns.h): the same decision on the rule's own
 * address (it names it, so its class does not matter), then the bytes as
 * they come; a refusal just closes (there is no protocol to answer in). */
static void serve_forward(Conn *c) {
        const NetRule *rule = c->forward->rule;
        Outcome o;
        if (decide(c, rule->host, strlen(rule->host), true, rule->port, &o) != VERDICT_OK) {
                note_refusal(c, &o);
                return;
        }
        relay(c, UINT64_MAX, true);
}

static void *conn_main(void *arg) {
        Conn *c = arg;
        if (c->forward) {
                serve_forward(c);
                conn_free(c);
                return NULL;
        }
        c->head_deadline = mono_ms() + EGRESS_HEAD_TIMEOUT_MS;
        ssize_t r = read_more(c);
        if (r > 0) {
                if ((uint8_t) c->buf[0] == 0x05)
                        serve_socks(c);
                else
                        serve_http_head(c);
        } else if (r == -ETIMEDOUT)
                http_bad(c, "no request head in time", NULL, 0);
        conn_free(c);
        return NULL;
}

/* Start a thread for the accepted fd (taken), or answer 503 (close, for a
 * forward's). */
static void conn_start(Proxy *p, int fd, const EgressForward *forward, const pthread_attr_t *attr) {
        Conn *c = calloc(1, sizeof *c);
        char *buf = c ? malloc(EGRESS_HEAD_MAX) : NULL;
        if (!buf) {
                free(c);
                close(fd);
                return;
        }
        *c = (Conn) {.proxy = p, .client_fd = fd, .upstream_fd = -1, .buf = buf, .stat = -1, .forward = forward};

        pthread_mutex_lock(&p->lock);
        bool full = p->n_conns >= EGRESS_MAX_CONNECTIONS;
        if (!full) {
                for (c->slot = 0; p->conns[c->slot]; c->slot++)
                        ;
                p->conns[c->slot] = c;
                p->n_conns++;
        }
        pthread_mutex_unlock(&p->lock);
        if (full && forward) {
                close(fd);
                free(buf);
                free(c);
                return;
        }
        if (full) {
                static const char busy[] = "taskferry: the egress proxy is serving as many connections as it "
                                           "takes; try again\n";
                char head[160];
                int n = snprintf(head, sizeof head,
                                 "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
                                 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                                 sizeof busy - 1);
                (void) send(fd, head, (size_t) n, MSG_NOSIGNAL | MSG_DONTWAIT);
                (void) send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
                (void) shutdown(fd, SHUT_WR);
                close(fd);
                free(buf);
                free(c);
                return;
        }
        pthread_t t;
        int r = pthread_create(&t, attr, conn_main, c);
        if (r != 0) {
                log_warning_errno(-r, "task %s: cannot start an egress connection thread",
                                  strempty(p->config->task_id));
                conn_free(c);
        }
}

static int own_addresses(Proxy *p) {
        struct ifaddrs *ifa = NULL;
        if (getifaddrs(&ifa) < 0) return -errno;
        size_t n = 0;
        for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
                if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6)) n++;
        p->own = calloc(n ? n : 1, sizeof *p->own);
        if (!p->own) {
                freeifaddrs(ifa);
                return -ENOMEM;
        }
        for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
                if (!i->ifa_addr) continue;
                if (i->ifa_addr->sa_family == AF_INET)
                        memcpy(&p->own[p->n_own++], i->ifa_addr, sizeof(struct sockaddr_in));
                else if (i->ifa_addr->sa_family == AF_INET6)
                        memcpy(&p->own[p->n_own++], i->ifa_addr, sizeof(struct sockaddr_in6));
        }
        freeifaddrs(ifa);
        return 0;
}

/* Shut every open connection down and wait (a little) for their threads:
 * true when all ended. */
static bool stop_connections(Proxy *p) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += STOP_GRACE_MS / 1000;
        until.tv_nsec += (long) (STOP_GRACE_MS % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&p->lock);
        p->stopping = true;
        for (size_t i = 0; i < EGRESS_MAX_CONNECTIONS; i++) {
                Conn *c = p->conns[i];
                if (!c) continue;
                if (c->client_fd >= 0) (void) shutdown(c->client_fd, SHUT_RDWR);
                if (c->upstream_fd >= 0) (void) shutdown(c->upstream_fd, SHUT_RDWR);
        }
        while (p->n_conns > 0)
                if (pthread_cond_timedwait(&p->idle, &p->lock, &until) == ETIMEDOUT) break;
        bool all = p->n_conns == 0;
        pthread_mutex_unlock(&p->lock);
        return all;
}

int egress_proxy_run(const EgressConfig *c) {
        _cleanup_close_ int listen_fd = c ? c->listen_fd : -1;
        if (!c || listen_fd < 0 || !c->policy) return -EINVAL;

        /* SIGTERM through a signalfd, blocked in every thread (they inherit
         * the mask); a peer that went away is an EPIPE, not a signal */
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        if (sigprocmask(SIG_BLOCK, &term, NULL) < 0) return -errno;
        (void) signal(SIGPIPE, SIG_IGN);
        _cleanup_close_ int sfd = signalfd(-1, &term, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0) return -errno;
        /* two sockets and four pipe ends per connection */
        (void) fd_limit_raise();

        int fl = fcntl(listen_fd, F_GETFL);
        if (fl < 0 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) < 0) return -errno;
        if (c->n_forwards > NET_POLICY_MAX_RULES) return -E2BIG;
        for (size_t i = 0; i < c->n_forwards; i++) {
                int ff = fcntl(c->forwards[i].listen_fd, F_GETFL);
                if (ff < 0 || fcntl(c->forwards[i].listen_fd, F_SETFL, ff | O_NONBLOCK) < 0) return -errno;
        }

        Proxy *p = calloc(1, sizeof *p);
        if (!p) return -ENOMEM;
        p->config = c;
        pthread_mutex_init(&p->lock, NULL);
        pthread_cond_init(&p->idle, NULL);
        int r = own_addresses(p);
        if (r < 0) {
                free(p);
                return r;
        }
        p->dirty = true;

        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, EGRESS_THREAD_STACK);

        uint64_t next_stats = 0;
        for (;;) {
                uint64_t now = mono_ms();
                if (now >= next_stats) {
                        stats_write(p, false);
                        next_stats = now + EGRESS_STATS_INTERVAL_MS;
                }
                /* the proxy's listener, the signal, then each forward's */
                struct pollfd pfd[2 + NET_POLICY_MAX_RULES] = {{.fd = listen_fd, .events = POLLIN},
                                                                {.fd = sfd, .events = POLLIN}};
                for (size_t i = 0; i < c->n_forwards; i++)
                        pfd[2 + i] = (struct pollfd) {.fd = c->forwards[i].listen_fd, .events = POLLIN};
                int n = poll(pfd, 2 + c->n_forwards, (int) (next_stats - now));
                if (n < 0 && errno != EINTR) {
                        r = -errno;
                        break;
                }
                if (pfd[1].revents & POLLIN) {
                        r = 0;
                        break;
                }
                for (size_t i = 0; i < 2 + c->n_forwards; i++) {
                        if (i == 1 || !(pfd[i].revents & POLLIN)) continue;
                        const EgressForward *fw = i == 0 ? NULL : &c->forwards[i - 2];
                        for (unsigned k = 0; k < 64; k++) {
                                int fd = accept4(pfd[i].fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                                if (fd < 0) break;
                                int one = 1;
                                (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                                conn_start(p, fd, fw, &attr);
                        }
                }
        }
        for (size_t i = 0; i < c->n_forwards; i++) safe_close(c->forwards[i].listen_fd);
        pthread_attr_destroy(&attr);
        listen_fd = safe_close(listen_fd);

        bool all = stop_connections(p);
        stats_write(p, true);
        if (all) {
                pthread_mutex_destroy(&p->lock);
                pthread_cond_destroy(&p->idle);
                free(p->own);
                free(p);
        }
        /* else a thread still holds p (stuck in getaddrinfo): it stays
         * allocated until the process exits, which is the caller's next
         * step */
        return r;
}

/* The parent's copies of the listeners, closed once the child has them. */
static void close_listeners(const EgressConfig *c) {
        safe_close(c->listen_fd);
        for (size_t i = 0; i < c->n_forwards; i++) safe_close(c->forwards[i].listen_fd);
}

int egress_proxy_spawn(const EgressConfig *c, pid_t *ret_pid) {
        if (!c || c->listen_fd < 0 || !c->policy || !ret_pid || c->n_forwards > NET_POLICY_MAX_RULES) {
                if (c) close_listeners(c);
                return -EINVAL;
        }
        int keep[1 + NET_POLICY_MAX_RULES];
        keep[0] = c->listen_fd;
        for (size_t i = 0; i < c->n_forwards; i++) keep[1 + i] = c->forwards[i].listen_fd;
        pid_t pid;
        int r = safe_fork_full("egress-proxy", NULL, keep, 1 + c->n_forwards,
                               FORK_RESET_SIGNALS | FORK_CLOSE_ALL_FDS | FORK_DEATHSIG_SIGKILL, &pid);
        if (r < 0) {
                close_listeners(c);
                return r;
        }
        if (r == 0) {
                r = egress_proxy_run(c);
                if (r < 0) log_error_errno(r, "task %s: the egress proxy failed", strempty(c->task_id));
                _exit(r < 0 ? EXIT_FAILURE : EXIT_SUCCESS);
        }
        close_listeners(c);
        *ret_pid = pid;
        return 0;
}

void egress_proxy_stop(pid_t pid) {
        if (pid <= 0) return;
        if (kill(pid, SIGTERM) < 0) {
                (void) wait_for_terminate(pid, NULL);
                return;
        }
        uint64_t deadline = mono_ms() + 2000;
        while (mono_ms() < deadline) {
                if (wait_for_terminate_nohang(pid, NULL) != 0) return;
                (void) nanosleep(&(struct timespec) {.tv_nsec = 10 * 1000 * 1000}, NULL);
        }
        sigkill_wait(pid);
}
