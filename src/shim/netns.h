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

#include "net-policy.h"

/* unshare(CLONE_NEWNET) and bring lo up. Needs CAP_SYS_ADMIN and
 * CAP_NET_ADMIN in the current user namespace (root, or root of a user
 * namespace of our own). -errno. */
int netns_enter(void);

/* A listening TCP socket (close-on-exec) at NET_PROXY_ADDRESS:NET_PROXY_PORT
 * in the current namespace, backlog 512. The fd, or -errno. */
int netns_proxy_listen(void);

/* Does a rule of the policy name a loopback address (an IP literal of
 * 127/8 or ::1, the user's own local service: a model server)? A worker
 * reaches its own loopback directly (NO_PROXY), so such a rule is served
 * as a forward: a listener at that very address and port inside the
 * namespace, whose connections the proxy carries to the host's (not for
 * the proxy's own port). */
bool netns_rule_is_forward(const NetRule *r);
/* A listening socket at the rule's address and port in the current
 * namespace (for netns_rule_is_forward rules). The fd, or -errno. */
int netns_forward_listen(const NetRule *r);

/* Pass one fd over a connected unix socket (fd < 0: a message saying there
 * is none), and receive it (close-on-exec). fd_recv: -ENOENT for such a
 * message, -EPIPE when the peer closed without sending one. -errno. */
int fd_send(int sock, int fd);
int fd_recv(int sock, int *ret_fd);
