/* The network suites' private world (netns-world.h): namespaces, addresses
 * and routes by netlink, /etc/hosts by a bind mount, listeners in threads. */

#include "netns-world.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int host_ns_fd = -1;   /* the world's network namespace */
static int public_ns_fd = -1; /* "the internet" behind the veth pair */
static bool have_ipv6, public_apart;

bool tf_netns_ipv6(void) { return have_ipv6; }
bool tf_netns_public_apart(void) { return public_apart; }

static _Noreturn void die(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        fputs("netns-world: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        exit(1);
}

static void write_file(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0) die("open %s: %m", path);
        ssize_t n = write(fd, text, strlen(text));
        if (n != (ssize_t) strlen(text)) die("write %s: %m", path);
        close(fd);
}

/* ---- netlink ---- */

typedef struct {
        struct nlmsghdr *h;
        char buf[1024];
} nlreq;

static void nl_init(nlreq *q, uint16_t type, uint16_t flags) {
        memset(q->buf, 0, sizeof(q->buf));
        q->h = (struct nlmsghdr *) q->buf;
        q->h->nlmsg_len = NLMSG_LENGTH(0);
        q->h->nlmsg_type = type;
        q->h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        q->h->nlmsg_seq = 1;
}

static void *nl_put(nlreq *q, const void *data, size_t len) {
        size_t at = NLMSG_ALIGN(q->h->nlmsg_len);
        if (at + NLMSG_ALIGN(len) > sizeof(q->buf)) die("netlink request too long");
        void *p = q->buf + at;
        if (data) memcpy(p, data, len);
        q->h->nlmsg_len = at + len;
        return p;
}

static struct rtattr *nl_attr(nlreq *q, uint16_t type, const void *data, size_t len) {
        struct rtattr *a = nl_put(q, NULL, RTA_LENGTH(len));
        a->rta_type = type;
        a->rta_len = RTA_LENGTH(len);
        if (data) memcpy(RTA_DATA(a), data, len);
        return a;
}

/* close a nested attribute opened by nl_attr(q, type, NULL, 0) */
static void nl_end(nlreq *q, struct rtattr *a) { a->rta_len = (char *) q->buf + q->h->nlmsg_len - (char *) a; }

/* Send on a socket of the namespace the caller is in now; the kernel's ack. */
static int nl_talk(nlreq *q) {
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        if (fd < 0) return -errno;
        struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
        int r = 0;
        if (sendto(fd, q->buf, q->h->nlmsg_len, 0, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                r = -errno;
                goto out;
        }
        char rbuf[4096];
        ssize_t n = recv(fd, rbuf, sizeof(rbuf), 0);
        if (n < 0) {
                r = -errno;
                goto out;
        }
        for (struct nlmsghdr *h = (struct nlmsghdr *) rbuf; NLMSG_OK(h, (size_t) n); h = NLMSG_NEXT(h, n))
                if (h->nlmsg_type == NLMSG_ERROR) {
                        r = ((struct nlmsgerr *) NLMSG_DATA(h))->error;
                        break;
                }
out:
        close(fd);
        return r;
}

static void link_up(const char *name) {
        unsigned idx = if_nametoindex(name);
        if (idx == 0) die("no interface %s: %m", name);
        nlreq q;
        nl_init(&q, RTM_NEWLINK, 0);
        struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = (int) idx, .ifi_flags = IFF_UP, .ifi_change = IFF_UP};
        nl_put(&q, &ifi, sizeof(ifi));
        int r = nl_talk(&q);
        if (r < 0) die("bringing %s up: %s", name, strerror(-r));
}

static void addr_add(const char *ifname, const char *text, unsigned prefix) {
        unsigned idx = if_nametoindex(ifname);
        if (idx == 0) die("no interface %s: %m", ifname);
        unsigned char a[16];
        int family = strchr(text, ':') ? AF_INET6 : AF_INET;
        if (inet_pton(family, text, a) != 1) die("bad address %s", text);
        size_t alen = family == AF_INET ? 4 : 16;
        nlreq q;
        nl_init(&q, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
        struct ifaddrmsg ifa = {.ifa_family = family, .ifa_prefixlen = prefix, .ifa_index = idx,
                                .ifa_flags = family == AF_INET6 ? IFA_F_NODAD : 0, .ifa_scope = RT_SCOPE_UNIVERSE};
        nl_put(&q, &ifa, sizeof(ifa));
        nl_attr(&q, IFA_LOCAL, a, alen);
        nl_attr(&q, IFA_ADDRESS, a, alen);
        int r = nl_talk(&q);
        if (r < 0) die("adding %s/%u to %s: %s", text, prefix, ifname, strerror(-r));
}

/* A veth pair: name here, peer in the namespace of peer_ns_fd. */
static int veth_add(const char *name, const char *peer, int peer_ns_fd) {
        nlreq q;
        nl_init(&q, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
        struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
        nl_put(&q, &ifi, sizeof(ifi));
        nl_attr(&q, IFLA_IFNAME, name, strlen(name) + 1);
        struct rtattr *info = nl_attr(&q, IFLA_LINKINFO, NULL, 0);
        nl_attr(&q, IFLA_INFO_KIND, "veth", 4);
        struct rtattr *data = nl_attr(&q, IFLA_INFO_DATA, NULL, 0);
        struct rtattr *p = nl_attr(&q, VETH_INFO_PEER, NULL, 0);
        struct ifinfomsg pifi = {.ifi_family = AF_UNSPEC};
        nl_put(&q, &pifi, sizeof(pifi));
        nl_attr(&q, IFLA_IFNAME, peer, strlen(peer) + 1);
        uint32_t nsfd = (uint32_t) peer_ns_fd;
        nl_attr(&q, IFLA_NET_NS_FD, &nsfd, sizeof(nsfd));
        nl_end(&q, p);
        nl_end(&q, data);
        nl_end(&q, info);
        return nl_talk(&q);
}

static void enter_ns(int fd, const char *what) {
        if (setns(fd, CLONE_NEWNET) < 0) die("setns into %s: %m", what);
}

/* ---- the world ---- */

static void enter_namespaces(void) {
        if (geteuid() == 0) {
                if (unshare(CLONE_NEWNET | CLONE_NEWNS) < 0) die("unshare(NET|NS): %m");
                return;
        }
        uid_t uid = geteuid();
        gid_t gid = getegid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) < 0)
                die("unshare(USER|NET|NS) as uid %u: %m (unprivileged user namespaces are needed)", (unsigned) uid);
        char map[64];
        write_file("/proc/self/setgroups", "deny");
        snprintf(map, sizeof(map), "%u %u 1\n", (unsigned) uid, (unsigned) uid);
        write_file("/proc/self/uid_map", map);
        snprintf(map, sizeof(map), "%u %u 1\n", (unsigned) gid, (unsigned) gid);
        write_file("/proc/self/gid_map", map);
}

static void replace_hosts(void) {
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) die("making / private: %m");
        char text[512];
        snprintf(text, sizeof(text),
                 "# the network suites' world (tests/integration/netns-world.h)\n"
                 "127.0.0.1 localhost\n"
                 "::1 localhost ip6-localhost ip6-loopback\n"
                 "%s allowed.test up.allowed.test\n"
                 "127.0.0.1 loopy.test\n"
                 "%s private.test\n"
                 "%s own.test\n"
                 "%s metadata.test\n",
                 TF_NET_PUBLIC, TF_NET_PRIVATE, TF_NET_OWN, TF_NET_METADATA);
        const char *dir = getenv("TASKFERRY_TEST_TMPDIR");
        char path[4096];
        snprintf(path, sizeof(path), "%s/tf-netns-hosts.XXXXXX", dir && *dir ? dir : "/var/tmp");
        int fd = mkstemp(path);
        if (fd < 0) die("mkstemp %s: %m", path);
        if (fchmod(fd, 0644) < 0 || write(fd, text, strlen(text)) != (ssize_t) strlen(text)) die("writing %s: %m", path);
        close(fd);
        int r = mount(path, "/etc/hosts", NULL, MS_BIND, NULL);
        int e = errno;
        /* the mount keeps the file: nothing is left behind */
        unlink(path);
        if (r < 0) die("bind-mounting a hosts file over /etc/hosts: %s", strerror(e));
}

void tf_netns_world_enter(void) {
        enter_namespaces();
        replace_hosts();
        link_up("lo");
        have_ipv6 = access("/proc/net/if_inet6", F_OK) == 0 && access("/proc/sys/net/ipv6/conf/lo", F_OK) == 0;
        addr_add("lo", TF_NET_PRIVATE, 32);
        addr_add("lo", TF_NET_CGNAT, 32);
        addr_add("lo", TF_NET_METADATA, 32);
        if (have_ipv6) addr_add("lo", TF_NET_ULA6, 128);

        host_ns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (host_ns_fd < 0) die("open /proc/self/ns/net: %m");
        if (unshare(CLONE_NEWNET) < 0) die("unshare(NET) for the public side: %m");
        public_ns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (public_ns_fd < 0) die("open /proc/self/ns/net: %m");
        link_up("lo");
        enter_ns(host_ns_fd, "the world");

        int r = veth_add("tfpub0", "tfpub1", public_ns_fd);
        if (r == 0) {
                public_apart = true;
                addr_add("tfpub0", TF_NET_OWN, 24);
                link_up("tfpub0");
                enter_ns(public_ns_fd, "the public side");
                addr_add("tfpub1", TF_NET_PUBLIC, 24);
                link_up("tfpub1");
                enter_ns(host_ns_fd, "the world");
        } else {
                fprintf(stderr, "netns-world: no veth pair (%s): %s and %s are both on lo, %s is an own address\n",
                        strerror(-r), TF_NET_PUBLIC, TF_NET_OWN, TF_NET_PUBLIC);
                addr_add("lo", TF_NET_PUBLIC, 32);
                addr_add("lo", TF_NET_OWN, 32);
        }
}

/* ---- listeners ---- */

enum { KIND_BANNER, KIND_HTTP, KIND_UDP };

struct tf_listener {
        int kind;
        int fd, stop_fd;
        uint16_t port;
        char marker[128];
        pthread_mutex_t lock;
        unsigned hits;
        char head[4096];
        pthread_t thread;
};

uint16_t tf_listener_port(const tf_listener *l) { return l->port; }

unsigned tf_listener_hits(tf_listener *l) {
        pthread_mutex_lock(&l->lock);
        unsigned n = l->hits;
        pthread_mutex_unlock(&l->lock);
        return n;
}

char *tf_listener_head(tf_listener *l) {
        pthread_mutex_lock(&l->lock);
        char *s = strdup(l->head);
        pthread_mutex_unlock(&l->lock);
        ck_assert(s);
        return s;
}

static void serve_http(tf_listener *l, int c) {
        char head[4096];
        size_t n = 0;
        while (n < sizeof(head) - 1) {
                struct pollfd p = {c, POLLIN, 0};
                if (poll(&p, 1, 10000) <= 0) break;
                ssize_t k = read(c, head + n, sizeof(head) - 1 - n);
                if (k <= 0) break;
                n += (size_t) k;
                head[n] = 0;
                if (strstr(head, "\r\n\r\n")) break;
        }
        head[n] = 0;
        pthread_mutex_lock(&l->lock);
        memcpy(l->head, head, n + 1);
        pthread_mutex_unlock(&l->lock);
        char resp[512];
        int len = snprintf(resp, sizeof(resp),
                           "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                           "Connection: close\r\n\r\n%s\n",
                           strlen(l->marker) + 1, l->marker);
        (void) !write(c, resp, (size_t) len);
}

static void *listener_main(void *arg) {
        tf_listener *l = arg;
        for (;;) {
                struct pollfd p[2] = {{l->fd, POLLIN, 0}, {l->stop_fd, POLLIN, 0}};
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR) continue;
                        break;
                }
                if (p[1].revents) break;
                if (!p[0].revents) continue;
                if (l->kind == KIND_UDP) {
                        char buf[2048];
                        struct sockaddr_storage from;
                        socklen_t fl = sizeof(from);
                        ssize_t k = recvfrom(l->fd, buf, sizeof(buf), 0, (struct sockaddr *) &from, &fl);
                        if (k < 0) continue;
                        pthread_mutex_lock(&l->lock);
                        l->hits++;
                        pthread_mutex_unlock(&l->lock);
                        char reply[160];
                        int len = snprintf(reply, sizeof(reply), "%s\n", l->marker);
                        (void) !sendto(l->fd, reply, (size_t) len, 0, (struct sockaddr *) &from, fl);
                        continue;
                }
                int c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
                if (c < 0) continue;
                pthread_mutex_lock(&l->lock);
                l->hits++;
                pthread_mutex_unlock(&l->lock);
                if (l->kind == KIND_HTTP)
                        serve_http(l, c);
                else {
                        char line[160];
                        int len = snprintf(line, sizeof(line), "%s\n", l->marker);
                        (void) !write(c, line, (size_t) len);
                }
                close(c);
        }
        return NULL;
}

static tf_listener *listen_on(int kind, const char *addr, uint16_t port, const char *marker) {
        struct sockaddr_storage ss = {0};
        socklen_t sl;
        int family;
        if (strchr(addr, ':')) {
                struct sockaddr_in6 *s6 = (struct sockaddr_in6 *) &ss;
                s6->sin6_family = family = AF_INET6;
                s6->sin6_port = htons(port);
                ck_assert_msg(inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1, "bad address %s", addr);
                sl = sizeof(*s6);
        } else {
                struct sockaddr_in *s4 = (struct sockaddr_in *) &ss;
                s4->sin_family = family = AF_INET;
                s4->sin_port = htons(port);
                ck_assert_msg(inet_pton(AF_INET, addr, &s4->sin_addr) == 1, "bad address %s", addr);
                sl = sizeof(*s4);
        }
        ck_assert_msg(host_ns_fd >= 0, "tf_netns_world_enter() was not called");
        bool public = public_apart && strcmp(addr, TF_NET_PUBLIC) == 0;
        /* a socket stays in the namespace it was made in */
        if (public) enter_ns(public_ns_fd, "the public side");
        int fd = socket(family, (kind == KIND_UDP ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC, 0);
        int e = errno;
        if (public) enter_ns(host_ns_fd, "the world");
        ck_assert_msg(fd >= 0, "socket: %s", strerror(e));
        int one = 1;
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (family == AF_INET6) (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        ck_assert_msg(bind(fd, (struct sockaddr *) &ss, sl) == 0, "bind %s:%u: %m", addr, (unsigned) port);
        if (kind != KIND_UDP) ck_assert_msg(listen(fd, 64) == 0, "listen %s:%u: %m", addr, (unsigned) port);
        struct sockaddr_storage got;
        socklen_t gl = sizeof(got);
        ck_assert(getsockname(fd, (struct sockaddr *) &got, &gl) == 0);

        tf_listener *l = calloc(1, sizeof(*l));
        ck_assert(l);
        l->kind = kind;
        l->fd = fd;
        l->port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *) &got)->sin6_port : ((struct sockaddr_in *) &got)->sin_port);
        snprintf(l->marker, sizeof(l->marker), "%s", marker);
        l->stop_fd = eventfd(0, EFD_CLOEXEC);
        ck_assert(l->stop_fd >= 0);
        pthread_mutex_init(&l->lock, NULL);
        ck_assert_int_eq(pthread_create(&l->thread, NULL, listener_main, l), 0);
        return l;
}

tf_listener *tf_listen_banner(const char *addr, uint16_t port, const char *marker) {
        return listen_on(KIND_BANNER, addr, port, marker);
}
tf_listener *tf_listen_http(const char *addr, uint16_t port, const char *marker) {
        return listen_on(KIND_HTTP, addr, port, marker);
}
tf_listener *tf_listen_udp(const char *addr, uint16_t port, const char *marker) {
        return listen_on(KIND_UDP, addr, port, marker);
}

void tf_listener_free(tf_listener *l) {
        if (!l) return;
        uint64_t one = 1;
        (void) !write(l->stop_fd, &one, sizeof(one));
        pthread_join(l->thread, NULL);
        close(l->fd);
        close(l->stop_fd);
        pthread_mutex_destroy(&l->lock);
        free(l);
}
