/* The sandbox's network namespace and the proxy's listener in it
 * (netns.h). */

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macro.h"
#include "net-policy.h"
#include "netns.h"

static int loopback_up(void) {
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return -errno;
        struct ifreq ifr = {0};
        strncpy(ifr.ifr_name, "lo", sizeof ifr.ifr_name - 1);
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) return -errno;
        if (ifr.ifr_flags & IFF_UP) return 0;
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0) return -errno;
        return 0;
}

int netns_enter(void) {
        if (unshare(CLONE_NEWNET) < 0) return -errno;
        return loopback_up();
}

int netns_proxy_listen(void) {
        _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return -errno;
        int one = 1;
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(NET_PROXY_PORT)};
        if (inet_pton(AF_INET, NET_PROXY_ADDRESS, &a.sin_addr) != 1) return -EINVAL;
        if (bind(fd, (struct sockaddr *) &a, sizeof a) < 0) return -errno;
        if (listen(fd, 512) < 0) return -errno;
        return TAKE_FD(fd);
}

/* The rule's address as a socket address. -EINVAL for a name. */
static int rule_sockaddr(const NetRule *r, struct sockaddr_storage *ss, socklen_t *len) {
        *ss = (struct sockaddr_storage) {0};
        if (!r->is_ip) return -EINVAL;
        struct sockaddr_in *a4 = (struct sockaddr_in *) ss;
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *) ss;
        if (inet_pton(AF_INET, r->host, &a4->sin_addr) == 1) {
                a4->sin_family = AF_INET;
                a4->sin_port = htons(r->port);
                *len = sizeof *a4;
                return 0;
        }
        if (inet_pton(AF_INET6, r->host, &a6->sin6_addr) == 1) {
                a6->sin6_family = AF_INET6;
                a6->sin6_port = htons(r->port);
                *len = sizeof *a6;
                return 0;
        }
        return -EINVAL;
}

bool netns_rule_is_forward(const NetRule *r) {
        struct sockaddr_storage ss;
        socklen_t len;
        if (rule_sockaddr(r, &ss, &len) < 0) return false;
        if (net_addr_classify((struct sockaddr *) &ss) != NET_ADDR_LOOPBACK) return false;
        /* the proxy's own address stays the proxy's */
        return !(r->port == NET_PROXY_PORT && ss.ss_family == AF_INET && streq(r->host, NET_PROXY_ADDRESS));
}

int netns_forward_listen(const NetRule *r) {
        struct sockaddr_storage ss;
        socklen_t len;
        int k = rule_sockaddr(r, &ss, &len);
        if (k < 0) return k;
        _cleanup_close_ int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return -errno;
        int one = 1;
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (ss.ss_family == AF_INET6) (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        /* 127.0.0.0/8 beyond 127.0.0.1 is routed to lo too, so any of it binds */
        if (bind(fd, (struct sockaddr *) &ss, len) < 0) return -errno;
        if (listen(fd, 128) < 0) return -errno;
        return TAKE_FD(fd);
}

int fd_send(int sock, int fd) {
        char byte = fd >= 0 ? 'F' : 'X';
        struct iovec iov = {.iov_base = &byte, .iov_len = 1};
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } c = {0};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof c.buf};
        if (fd >= 0) {
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &fd, sizeof(int));
        } else {
                mh.msg_control = NULL;
                mh.msg_controllen = 0;
        }
        for (;;) {
                if (sendmsg(sock, &mh, MSG_NOSIGNAL) == 1) return 0;
                if (errno != EINTR) return -errno;
        }
}

int fd_recv(int sock, int *ret_fd) {
        char byte;
        struct iovec iov = {.iov_base = &byte, .iov_len = 1};
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } c = {0};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof c.buf};
        ssize_t n;
        do
                n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0) return -errno;
        if (n == 0) return -EPIPE;
        if (byte == 'X') return -ENOENT;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int))) {
                        memcpy(ret_fd, CMSG_DATA(cm), sizeof(int));
                        return 0;
                }
        return -EBADMSG;
}
