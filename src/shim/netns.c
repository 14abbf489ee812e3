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

int fd_send(int sock, int fd) {
        char byte = 'F';
        struct iovec iov = {.iov_base = &byte, .iov_len = 1};
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } c = {0};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof c.buf};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
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
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int))) {
                        memcpy(ret_fd, CMSG_DATA(cm), sizeof(int));
                        return 0;
                }
        return -EBADMSG;
}
