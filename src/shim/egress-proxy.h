#pragma once
/* The task's egress proxy: the one way out of a sandbox in network mode
 * "proxy" (net-policy.h). It runs in a process of its own forked from the
 * shim, in the host's network namespace, and serves a listening socket that
 * was created inside the sandbox's namespace (a listening socket keeps the
 * namespace it was made in), so nothing of it runs in the sandbox.
 *
 * Per connection (one thread each, at most EGRESS_MAX_CONNECTIONS at once;
 * past that a 503 and close):
 *  - HTTP CONNECT host:port → policy by name, resolve (getaddrinfo, this
 *    thread), policy per address, connect to the checked address (no second
 *    resolution), "HTTP/1.1 200 Connection established", then the bytes
 *    both ways with splice(2) through a pipe per direction, untouched;
 *  - absolute-form plain HTTP ("GET http://host[:port]/p HTTP/1.1"): the
 *    same decision (port 80 default); the request line is sent in origin
 *    form, Proxy-* headers dropped, "Connection: close" forced; a request
 *    with more than one Host header, or a Host that names another host than
 *    the URL, is refused (400);
 *  - SOCKS5 (no authentication, CONNECT, IPv4/IPv6/domain): the same
 *    decision, replies per RFC 1928;
 *  - anything else (origin-form requests, a CONNECT target with a path or
 *    junk, a head over EGRESS_HEAD_MAX bytes, no head within
 *    EGRESS_HEAD_TIMEOUT_MS): 400 and close.
 * A refusal is "HTTP/1.1 403 Forbidden" whose body names the host, the port,
 * the reason and the flag that would allow it (egress_denial_text); a name
 * that does not resolve is 502, an upstream that refuses or times out
 * (EGRESS_CONNECT_TIMEOUT_MS) 502 too.
 *
 * Every decision is counted per host:port and written as stats_path (JSON,
 * 0600, replaced atomically: at most every EGRESS_STATS_INTERVAL_MS while
 * something changed, and at exit):
 *   {"mode":"proxy",
 *    "allowed":[{"host","port","connections","bytesUp","bytesDown"}...],
 *    "denied":[{"host","port","reason","count"}...]}
 * (at most EGRESS_STATS_MAX_HOSTS entries per list; past that one entry with
 * host "*" collects the rest). Each denial goes to journald (sd_journal_send,
 * MESSAGE_ID NET_DENIED_MESSAGE_ID; fields TASKFERRY_TASK_ID,
 * TASKFERRY_NET_HOST, TASKFERRY_NET_PORT, TASKFERRY_NET_REASON; never a URL
 * path, a header or a body), at most EGRESS_JOURNAL_PER_HOST per host:port.
 * A host name in the stats or journal is the normalized one; one that
 * failed normalization is shown as "(invalid)". */

#include <stdint.h>
#include <sys/types.h>

#include "net-policy.h"

#define EGRESS_MAX_CONNECTIONS 512
#define EGRESS_HEAD_MAX 16384
#define EGRESS_HEAD_TIMEOUT_MS 30000
#define EGRESS_CONNECT_TIMEOUT_MS 10000
#define EGRESS_STATS_INTERVAL_MS 500
#define EGRESS_STATS_MAX_HOSTS 64
#define EGRESS_JOURNAL_PER_HOST 10
#define NET_DENIED_MESSAGE_ID "6b1f4a2c9d8e4e0fa3c5b7d9e1f20a44"

/* A forward: a listener made inside the sandbox at the very address and
 * port of a rule naming a loopback address (netns.h), whose connections go
 * to that address on the host as raw TCP, counted like a tunnel. */
typedef struct EgressForward {
        int listen_fd;          /* taken like listen_fd */
        const NetRule *rule;    /* an IP literal rule of the policy */
} EgressForward;

typedef struct EgressConfig {
        int listen_fd;          /* listening TCP socket (taken: closed by the proxy) */
        const EgressForward *forwards; /* n_forwards of them (may be 0) */
        size_t n_forwards;
        const NetPolicy *policy; /* mode NET_MODE_PROXY */
        const char *stats_path; /* where the stats go; NULL: none */
        const char *task_id;    /* for the journal and the 403 text */
} EgressConfig;

/* The body of a 403 (and the journal's MESSAGE): one line naming
 * host:port and reason, one saying how to allow it:
 *   "taskferry: egress to HOST:PORT denied for task ID: REASON\n"
 *   "help: allow it with taskferry dispatch --allow-host HOST:PORT (or
 *    TASKFERRY_ALLOW_HOSTS, or \"network\": {\"allowHosts\": [...]} in
 *    config.json)\n"
 * malloc'd; NULL on ENOMEM. */
char *egress_denial_text(const char *task_id, const char *host, uint16_t port, const char *reason);

/* Run the proxy in the calling process until SIGTERM (the caller blocks
 * nothing: the function installs its handling); writes the last stats and
 * returns 0, or -errno when it could not start. Meant for the forked child. */
int egress_proxy_run(const EgressConfig *c);

/* Fork a child (the caller's death kills it at once: PR_SET_PDEATHSIG with
 * SIGKILL, so a shim killed with its daemon leaves no proxy writing into a
 * task dir the next daemon reuses; a shim that ends normally stops it with
 * egress_proxy_stop, which lets it write its last stats) that runs
 * egress_proxy_run; the parent's copies of listen_fd and the forwards'
 * listeners are closed (also on failure). *ret_pid: the
 * child. Stop it with egress_proxy_stop. -errno. */
int egress_proxy_spawn(const EgressConfig *c, pid_t *ret_pid);
/* SIGTERM, wait up to 2 s for its last stats, then SIGKILL; reaps it. */
void egress_proxy_stop(pid_t pid);
