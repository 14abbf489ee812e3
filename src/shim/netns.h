#pragma once
/* The sandbox's network namespace, made by the shim's worker child before
 * it runs bwrap (which then keeps it: --share-net, sandbox.h), so that the
 * egress proxy's listening socket can be created inside it and served from
 * outside (a listening socket keeps the namespace it was made in).
 *
 * The new namespace holds only `lo`, up: no route leaves it. In network
 * mode "proxy" the child creates the listener at
 * NET_PROXY_ADDRESS:NET_PROXY_PORT and hands it to the shim over a unix
 * socket (SCM_RIGHTS); the shim runs the egress proxy on it
 * (egress-proxy.h). */

#include <stdbool.h>

/* unshare(CLONE_NEWNET) and bring lo up. Needs CAP_SYS_ADMIN and
 * CAP_NET_ADMIN in the current user namespace (root, or root of a user
 * namespace of our own). -errno. */
int netns_enter(void);

/* A listening TCP socket (close-on-exec) at NET_PROXY_ADDRESS:NET_PROXY_PORT
 * in the current namespace, backlog 512. The fd, or -errno. */
int netns_proxy_listen(void);

/* Pass one fd over a connected unix socket, and receive it (close-on-exec).
 * fd_recv: -EPIPE when the peer closed without sending one. -errno. */
int fd_send(int sock, int fd);
int fd_recv(int sock, int *ret_fd);
