#pragma once
/* A private network world for the network suites: the test process moves
 * into network and mount namespaces of its own, where every address a
 * sandbox might try to reach is a local stand-in, so nothing leaves the
 * machine and a probe that gets through hits a listener of the test.
 *
 * The world ("the host" from the daemon's side):
 *   lo                 127.0.0.1, ::1 (when IPv6 is there), and the stand-ins
 *                      TF_NET_PRIVATE (RFC 1918), TF_NET_CGNAT (100.64/10),
 *                      TF_NET_METADATA (the cloud metadata address) and
 *                      TF_NET_ULA6 (IPv6 only)
 *   tfpub0             TF_NET_OWN/24: the host's own non-loopback address,
 *                      one end of a veth pair whose other end, TF_NET_PUBLIC/24,
 *                      is in a second network namespace: "the internet".
 *                      TF_NET_PUBLIC is thus not one of the host's own
 *                      addresses (an egress proxy may connect to it), and
 *                      TF_NET_OWN is (it must not).
 * Without veth in the kernel (tf_netns_public_apart() false), TF_NET_PUBLIC
 * and TF_NET_OWN are both on lo instead, and TF_NET_PUBLIC is an own address.
 *
 * /etc/hosts is replaced (a bind mount in the private mount namespace, seen
 * by every process started after, sandboxes included) by:
 *   TF_NET_PUBLIC  allowed.test up.allowed.test
 *   127.0.0.1      loopy.test
 *   TF_NET_PRIVATE private.test
 *   TF_NET_OWN     own.test
 *   TF_NET_METADATA metadata.test
 *
 * As root the namespaces are new network and mount namespaces; as another
 * user a user namespace first, mapping only the caller's uid and gid onto
 * themselves (setgroups denied), which bwrap's own user namespace nests in.
 * Everything is set up with netlink and mount(2): no `ip` binary. */

#include <stdbool.h>
#include <stdint.h>

#define TF_NET_PUBLIC "198.51.100.7"
#define TF_NET_OWN "198.51.100.1"
#define TF_NET_PRIVATE "10.77.0.1"
#define TF_NET_CGNAT "100.64.0.1"
#define TF_NET_METADATA "169.254.169.254"
#define TF_NET_ULA6 "fd00:ec2::254"

/* Enter the world; call first thing in main(), while the process has one
 * thread. Prints why and exits 1 when it cannot (a test suite that runs
 * without it would probe the real network). */
void tf_netns_world_enter(void);
/* Whether the world has IPv6 (::1 and TF_NET_ULA6 on lo). */
bool tf_netns_ipv6(void);
/* Whether TF_NET_PUBLIC is behind the veth pair, not an own address. */
bool tf_netns_public_apart(void);

/* ---- listeners ----
 * Each runs in a thread of the calling process (a test's forked child: it
 * ends with the test) on addr (IPv4 or IPv6 text; TF_NET_PUBLIC's socket is
 * made in the "internet" namespace) and port (0: one the kernel picks;
 * l->port says which). Asserts they could be set up.
 *  tf_listen_banner(): TCP; writes "<marker>\n" to each connection, closes.
 *  tf_listen_http(): TCP; reads a request head, answers "HTTP/1.1 200 OK"
 *    with the body "<marker>\n", closes.
 *  tf_listen_udp(): UDP; counts each datagram and answers it with
 *    "<marker>\n" (a resolver stand-in: a DNS query gets that reply).
 * tf_listener_port(): the port it listens on. tf_listener_hits(): the
 * connections accepted / datagrams received so far. tf_listener_head():
 * the last request head an HTTP listener read ("" before one; at most
 * 4 KiB; malloc'd). tf_listener_free(): stops the thread, closes the
 * socket (NULL: nothing). */
typedef struct tf_listener tf_listener;
tf_listener *tf_listen_banner(const char *addr, uint16_t port, const char *marker);
tf_listener *tf_listen_http(const char *addr, uint16_t port, const char *marker);
tf_listener *tf_listen_udp(const char *addr, uint16_t port, const char *marker);
uint16_t tf_listener_port(const tf_listener *l);
unsigned tf_listener_hits(tf_listener *l);
char *tf_listener_head(tf_listener *l);
void tf_listener_free(tf_listener *l);
