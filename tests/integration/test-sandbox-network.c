/* The network policy end to end (net-policy.h, egress-proxy.h): real
 * daemons, shims, bwrap sandboxes and egress proxies, in a private network
 * world (netns-world.h) where every address a worker might try is a
 * listener of the test. A sandboxed worker, its check gate and its nested
 * dispatches reach nothing but the task's proxy by default; the proxy lets
 * through exactly the hosts allowed; --network none leaves nothing;
 * --network host is the host's network, recorded and warned about.
 *
 * Every probe is shown to reach its target under --network host in the
 * same test before it is shown not to by default, so that no case passes
 * because its probe is broken. TF_NETWORK_PROBES_ONLY=1 runs only those
 * host legs, dispatched with no network flag at all: what a daemon without
 * the network policy does (its workers share the host's network), to check
 * the probes themselves against such a daemon. */

#include <check.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "netns-world.h"
#include "string-util.h"

/* The worker's probes, one line of output each: "@<label>: REACHED <what
 * the target said>" or "@<label>: UNREACHABLE <errno name or timeout>";
 * "raw" prints what came back, CR LF as " | ".
 *   tcp LABEL HOST PORT            connect, read the banner
 *   udp LABEL HOST PORT            send a datagram, wait for the answer
 *   dns LABEL HOST PORT NAME       a DNS A query for NAME, wait for the answer
 *   get LABEL NAME PORT            GET http://NAME:PORT/ over a CONNECT tunnel
 *                                  through $HTTPS_PROXY when it is set,
 *                                  straight to NAME otherwise
 *   raw LABEL HOST PORT HEX [HEX2] send HEX's bytes; after a 200, HEX2's
 *   env LABEL                      the *_proxy variables of the environment */
static const char probe_py[] =
        "import binascii, errno, os, socket, struct, sys, http.client, urllib.parse\n"
        "def out(label, s):\n"
        "    print('@%s: %s' % (label, s.replace('\\r\\n', ' | ').replace('\\n', ' | ')), flush=True)\n"
        "def fam(h):\n"
        "    return socket.AF_INET6 if ':' in h else socket.AF_INET\n"
        "def why(e):\n"
        "    if isinstance(e, socket.timeout): return 'timeout'\n"
        "    return errno.errorcode.get(e.errno, str(e)) if e.errno else str(e)\n"
        "def readall(s):\n"
        "    data = b''\n"
        "    try:\n"
        "        while True:\n"
        "            b = s.recv(65536)\n"
        "            if not b: break\n"
        "            data += b\n"
        "    except OSError: pass\n"
        "    return data\n"
        "mode, label, a = sys.argv[1], sys.argv[2], sys.argv[3:]\n"
        "try:\n"
        "    if mode == 'tcp':\n"
        "        s = socket.socket(fam(a[0]), socket.SOCK_STREAM); s.settimeout(3)\n"
        "        s.connect((a[0], int(a[1])))\n"
        "        out(label, 'REACHED ' + s.recv(200).decode(errors='replace').strip())\n"
        "    elif mode in ('udp', 'dns'):\n"
        "        s = socket.socket(fam(a[0]), socket.SOCK_DGRAM); s.settimeout(3)\n"
        "        msg = b'probe'\n"
        "        if mode == 'dns':\n"
        "            q = b''.join(bytes([len(p)]) + p.encode() for p in a[2].split('.')) + b'\\0'\n"
        "            msg = struct.pack('>HHHHHH', 0x7466, 0x0100, 1, 0, 0, 0) + q + struct.pack('>HH', 1, 1)\n"
        "        s.sendto(msg, (a[0], int(a[1])))\n"
        "        out(label, 'REACHED ' + s.recv(200).decode(errors='replace').strip())\n"
        "    elif mode == 'get':\n"
        "        p = os.environ.get('HTTPS_PROXY')\n"
        "        if p:\n"
        "            u = urllib.parse.urlsplit(p)\n"
        "            c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)\n"
        "            c.set_tunnel(a[0], int(a[1]))\n"
        "        else:\n"
        "            c = http.client.HTTPConnection(a[0], int(a[1]), timeout=10)\n"
        "        c.request('GET', '/probe')\n"
        "        r = c.getresponse()\n"
        "        out(label, 'REACHED %d %s' % (r.status, r.read().decode(errors='replace').strip()))\n"
        "    elif mode == 'raw':\n"
        "        s = socket.socket(fam(a[0]), socket.SOCK_STREAM); s.settimeout(5)\n"
        "        s.connect((a[0], int(a[1])))\n"
        "        s.sendall(binascii.unhexlify(a[2]))\n"
        "        data = b''\n"
        "        while b'\\r\\n\\r\\n' not in data:\n"
        "            b = s.recv(65536)\n"
        "            if not b: break\n"
        "            data += b\n"
        "        if data.startswith(b'HTTP/1.1 200') and len(a) > 3:\n"
        "            s.sendall(binascii.unhexlify(a[3]))\n"
        "        data += readall(s)\n"
        "        out(label, 'REACHED ' + data.decode(errors='replace'))\n"
        "    elif mode == 'env':\n"
        "        v = sorted(k + '=' + x for k, x in os.environ.items() if k.lower().endswith('_proxy'))\n"
        "        out(label, ' '.join(v) if v else '(none)')\n"
        "except (OSError, http.client.HTTPException) as e:\n"
        "    out(label, 'UNREACHABLE ' + (why(e) if isinstance(e, OSError) else repr(e)))\n";

static bool probes_only(void) { return streq_ptr(getenv("TF_NETWORK_PROBES_ONLY"), "1"); }

/* The host leg's flags: --network host, or none with TF_NETWORK_PROBES_ONLY. */
static const char *const host_flags[] = {"--network", "host", NULL};
#define HOST_LEG (probes_only() ? NULL : host_flags)

/* probe.py in the world's fixtures (bound into every sandbox); its path. */
static const char *probe(tf_world *w) {
        const char *p = tf_path(w->fixtures, "probe.py");
        if (!tf_exists(p)) tf_write(p, probe_py, strlen(probe_py), 0644);
        return p;
}

/* What the probe labelled label said (the line after "@label: "), or the
 * test fails showing all of msg. malloc'd. */
static char *said(const char *msg, const char *label) {
        _cleanup_free_ char *key = strdup_printf("@%s: ", label);
        char *v = tf_value_after(msg, key);
        ck_assert_msg(v, "no probe %s in the worker's output:\n%s", label, msg);
        return v;
}

static void assert_reached(const char *msg, const char *label, const char *want) {
        _cleanup_free_ char *v = said(msg, label);
        ck_assert_msg(startswith(v, "REACHED") && strstr(v, want), "%s: wanted it to reach %s, got: %s\n%s", label, want, v, msg);
}

static void assert_unreachable(const char *msg, const char *label) {
        _cleanup_free_ char *v = said(msg, label);
        ck_assert_msg(startswith(v, "UNREACHABLE"), "%s: got through: %s\n%s", label, v, msg);
}

/* A hex dump of len bytes (a NUL may be among them), for probe raw. */
static char *hex(const char *s, size_t len) {
        char *h = malloc(2 * len + 1);
        ck_assert(h);
        for (size_t i = 0; i < len; i++) sprintf(h + 2 * i, "%02x", (unsigned char) s[i]);
        h[2 * len] = 0;
        return h;
}
#define HEX(lit) hex((lit), sizeof(lit) - 1)

/* ---- the status's network object ---- */

static json_object *network_of(tf_world *w, const char *id, json_object **ret_status) {
        json_object *st = tf_status_full(w, id);
        json_object *net = json_get_object(st, "network");
        ck_assert_msg(net, "no network in the status: %s", json_to_line(st, NULL));
        *ret_status = st;
        return net;
}

static bool entry_is(json_object *e, const char *host, int64_t port) {
        int64_t p = -1;
        return streq_ptr(json_get_string(e, "host"), host) && json_get_int64(e, "port", &p) && p == port;
}

/* The entry of list ("allowed", "denied") for host:port in the task's
 * network status, or NULL. Owned by *ret_status. */
static json_object *net_entry(tf_world *w, const char *id, const char *list, const char *host, int64_t port,
                              json_object **ret_status) {
        json_object *net = network_of(w, id, ret_status);
        json_object *a = json_get_array(net, list);
        for (size_t i = 0; a && i < json_object_array_length(a); i++)
                if (entry_is(json_object_array_get_idx(a, i), host, port)) return json_object_array_get_idx(a, i);
        return NULL;
}

typedef struct {
        const char *id, *list, *host;
        int64_t port;
} entry_wait;

static bool has_entry(tf_world *w, void *arg) {
        entry_wait *e = arg;
        json_object *st = NULL;
        bool found = net_entry(w, e->id, e->list, e->host, e->port, &st) != NULL;
        json_object_put(st);
        return found;
}

/* Wait (at most 15 s: the proxy writes its stats every 500 ms) for the
 * entry; the test fails showing the network status when it never comes. */
static void wait_entry(tf_world *w, const char *id, const char *list, const char *host, int64_t port) {
        entry_wait e = {id, list, host, port};
        if (tf_wait_until(has_entry, w, &e, 15000)) return;
        json_object *st = NULL;
        json_object *net = network_of(w, id, &st);
        ck_abort_msg("no %s entry %s:%" PRIi64 " in the network status: %s", list, host, port, json_to_line(net, NULL));
}

static bool allow_lists(json_object *net, const char *rule) {
        json_object *a = json_get_array(net, "allow");
        for (size_t i = 0; a && i < json_object_array_length(a); i++)
                if (streq_ptr(json_object_get_string(json_object_array_get_idx(a, i)), rule)) return true;
        return false;
}

/* ---- unreachable by default ---- */

typedef struct {
        const char *label, *addr;
        bool udp;
        tf_listener *l;
} target;

/* Listeners on every address a worker must not reach, the probes of all of
 * them: under --network host each reaches its target (and the target
 * counts it), by default none does (and no target counts anything). */
TF_WORLD_TEST(default_reaches_nothing) {
        char *repo = tf_repo_new(w, NULL, NULL);
        target t[] = {
                {"lo4", "127.0.0.1", false, NULL},        {"lo6", "::1", false, NULL},
                {"own", TF_NET_OWN, false, NULL},         {"public", TF_NET_PUBLIC, false, NULL},
                {"private", TF_NET_PRIVATE, false, NULL}, {"cgnat", TF_NET_CGNAT, false, NULL},
                {"metadata", TF_NET_METADATA, false, NULL}, {"ula6", TF_NET_ULA6, false, NULL},
                {"udp-public", TF_NET_PUBLIC, true, NULL}, {"udp-own", TF_NET_OWN, true, NULL},
        };
        _cleanup_free_ char *script = strdup_printf("P=%s; ", probe(w));
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                if (strchr(t[i].addr, ':') && !tf_netns_ipv6()) continue;
                _cleanup_free_ char *marker = strdup_printf("marker-%s", t[i].label);
                t[i].l = t[i].udp ? tf_listen_udp(t[i].addr, 0, marker) : tf_listen_banner(t[i].addr, 0, marker);
                tf_appendf(&script, "python3 $P %s %s %s %u; ", t[i].udp ? "udp" : "tcp", t[i].label, t[i].addr,
                           tf_listener_port(t[i].l));
        }
        /* a resolver stand-in: a DNS query must not reach it (getent would
         * read /etc/hosts, which the sandbox sees, and never ask one) */
        tf_listener *dns = tf_listen_udp(TF_NET_PRIVATE, 53, "marker-dns");
        tf_appendf(&script, "python3 $P dns dns %s 53 allowed.test; ", TF_NET_PRIVATE);
        tf_appendf(&script, "python3 $P dns dns-public %s %u allowed.test; ", TF_NET_PUBLIC, tf_listener_port(t[8].l));

        _cleanup_free_ char *host = tf_shell_done_output(w, repo, HOST_LEG, script, NULL);
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                if (!t[i].l) continue;
                _cleanup_free_ char *marker = strdup_printf("marker-%s", t[i].label);
                assert_reached(host, t[i].label, marker);
        }
        assert_reached(host, "dns", "marker-dns");
        assert_reached(host, "dns-public", "marker-udp-public");
        unsigned before[ELEMENTSOF(t)];
        for (size_t i = 0; i < ELEMENTSOF(t); i++) before[i] = t[i].l ? tf_listener_hits(t[i].l) : 0;
        unsigned dns_before = tf_listener_hits(dns);
        ck_assert_uint_ge(dns_before, 1);
        if (!probes_only()) {
                _cleanup_free_ char *dflt = tf_shell_done_output(w, repo, NULL, script, NULL);
                for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                        if (!t[i].l) continue;
                        assert_unreachable(dflt, t[i].label);
                        ck_assert_msg(tf_listener_hits(t[i].l) == before[i], "%s: the target counted a connection", t[i].label);
        }
        assert_unreachable(dflt, "dns");
        assert_unreachable(dflt, "dns-public");
        ck_assert_uint_eq(tf_listener_hits(dns), dns_before);
        }
        for (size_t i = 0; i < ELEMENTSOF(t); i++) tf_listener_free(t[i].l);
        tf_listener_free(dns);
        free(repo);
}

/* ---- through the proxy ---- */

/* --allow-host allowed.test:PORT: a CONNECT through $HTTPS_PROXY reaches
 * the upstream on TF_NET_PUBLIC; the proxy environment is the documented
 * one; the status lists the rule and counts the connection. */
TF_WORLD_TEST(proxy_reaches_allowed_host) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_listener *up = tf_listen_http(TF_NET_PUBLIC, 0, "marker-upstream");
        unsigned port = tf_listener_port(up);
        _cleanup_free_ char *script = strdup_printf("P=%s; python3 $P get up allowed.test %u; python3 $P env env", probe(w), port);
        _cleanup_free_ char *host = tf_shell_done_output(w, repo, HOST_LEG, script, NULL);
        assert_reached(host, "up", "200 marker-upstream");
        if (!probes_only()) {
                /* host mode sets no proxy */
                _cleanup_free_ char *henv = said(host, "env");
                ck_assert_str_eq(henv, "(none)");
                unsigned before = tf_listener_hits(up);

                _cleanup_free_ char *rule = strdup_printf("allowed.test:%u", port);
                const char *allow[] = {"--allow-host", rule, NULL};
                json_object *st = NULL;
                char *id = tf_shell_done(w, repo, allow, script, &st);
                json_object_put(st);
                _cleanup_free_ char *msg = tf_task_message(w, id);
                assert_reached(msg, "up", "200 marker-upstream");
                ck_assert_uint_gt(tf_listener_hits(up), before);
                _cleanup_free_ char *env = said(msg, "env");
                const char *p = "http://127.0.0.1:3128";
                _cleanup_free_ char *want = strdup_printf("ALL_PROXY=%s HTTPS_PROXY=%s HTTP_PROXY=%s NO_PROXY=localhost,127.0.0.1,::1 "
                                                          "all_proxy=%s http_proxy=%s https_proxy=%s no_proxy=localhost,127.0.0.1,::1",
                                                          p, p, p, p, p, p);
                ck_assert_str_eq(env, want);

                wait_entry(w, id, "allowed", "allowed.test", port);
                json_object *net = network_of(w, id, &st);
                ck_assert_str_eq(strempty(json_get_string(net, "mode")), "proxy");
                ck_assert_msg(allow_lists(net, rule), "%s", json_to_line(net, NULL));
                ck_assert_msg(!json_get_string(st, "networkWarning"), "%s", json_to_line(st, NULL));
                json_object_put(st);
                json_object *e = net_entry(w, id, "allowed", "allowed.test", port, &st);
                int64_t conns = 0, down = 0;
                ck_assert(json_get_int64(e, "connections", &conns) && conns >= 1);
                ck_assert(json_get_int64(e, "bytesDown", &down) && down > 0);
                json_object_put(st);
                free(id);
        }
        tf_listener_free(up);
        free(repo);
}

/* A request the policy refuses: the 403 text names host:port, the task
 * and the flag that would allow it, and the status counts it in denied. */
TF_WORLD_TEST(proxy_denies_unlisted_host) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_listener *up = tf_listen_http(TF_NET_PUBLIC, 0, "marker-upstream");
        unsigned port = tf_listener_port(up);
        /* the host leg: the same request straight to the upstream */
        _cleanup_free_ char *req = strdup_printf("GET /x HTTP/1.1\r\nHost: allowed.test:%u\r\n\r\n", port);
        _cleanup_free_ char *hreq = hex(req, strlen(req));
        _cleanup_free_ char *hscript = strdup_printf("python3 %s raw direct allowed.test %u %s", probe(w), port, hreq);
        _cleanup_free_ char *host = tf_shell_done_output(w, repo, HOST_LEG, hscript, NULL);
        assert_reached(host, "direct", "marker-upstream");
        if (!probes_only()) {
                _cleanup_free_ char *connect = HEX("CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n");
                _cleanup_free_ char *script = strdup_printf("python3 %s raw denied 127.0.0.1 3128 %s; python3 %s get up denied.test 443",
                                                            probe(w), connect, probe(w));
                json_object *st = NULL;
                char *id = tf_shell_done(w, repo, NULL, script, &st);
                json_object_put(st);
                _cleanup_free_ char *msg = tf_task_message(w, id);
                _cleanup_free_ char *v = said(msg, "denied");
                _cleanup_free_ char *line1 = strdup_printf("taskferry: egress to denied.test:443 denied for task %s: ", id);
                ck_assert_msg(startswith(v, "REACHED HTTP/1.1 403 Forbidden") && strstr(v, line1) &&
                                      strstr(v, "help: ") && strstr(v, "--allow-host denied.test:443"),
                              "%s", v);
                _cleanup_free_ char *g = said(msg, "up");
                ck_assert_msg(!strstr(g, "200"), "%s", g);
                wait_entry(w, id, "denied", "denied.test", 443);
                json_object *e = net_entry(w, id, "denied", "denied.test", 443, &st);
                int64_t count = 0;
                ck_assert(json_get_int64(e, "count", &count) && count >= 2);
                ck_assert_msg(!isempty(json_get_string(e, "reason")), "%s", json_to_line(e, NULL));
                json_object_put(st);
                free(id);
        }
        tf_listener_free(up);
        free(repo);
}

/* Names and requests the proxy must refuse or match exactly as
 * net-policy.h says, with allowed.test:PORT and *.allowed.test:PORT2
 * allowed, loopy.test:LPORT (→ 127.0.0.1), private.test:PORT and
 * own.test:PORT (→ TF_NET_OWN) allowed by name. */
TF_WORLD_TEST(proxy_matches_exactly) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_listener *up = tf_listen_http(TF_NET_PUBLIC, 0, "marker-upstream");
        tf_listener *up2 = tf_listen_http(TF_NET_PUBLIC, 0, "marker-wild");
        tf_listener *lo = tf_listen_banner("127.0.0.1", 0, "marker-loopback");
        tf_listener *priv = tf_listen_banner(TF_NET_PRIVATE, 0, "marker-private");
        unsigned port = tf_listener_port(up), port2 = tf_listener_port(up2), lport = tf_listener_port(lo),
                 pport = tf_listener_port(priv);
        tf_listener *own = tf_listen_banner(TF_NET_OWN, port, "marker-own");

        /* the host leg: every target reached straight */
        _cleanup_free_ char *hscript = strdup_printf("P=%s; python3 $P get up allowed.test %u; python3 $P get wild up.allowed.test %u; "
                                                     "python3 $P tcp loopy loopy.test %u; python3 $P tcp private private.test %u; "
                                                     "python3 $P tcp own own.test %u",
                                                     probe(w), port, port2, lport, pport, port);
        _cleanup_free_ char *host = tf_shell_done_output(w, repo, HOST_LEG, hscript, NULL);
        assert_reached(host, "up", "marker-upstream");
        assert_reached(host, "wild", "marker-wild");
        assert_reached(host, "loopy", "marker-loopback");
        assert_reached(host, "private", "marker-private");
        assert_reached(host, "own", "marker-own");
        if (!probes_only()) {
                unsigned hits_lo = tf_listener_hits(lo), hits_priv = tf_listener_hits(priv), hits_own = tf_listener_hits(own);

                _cleanup_free_ char *r1 = strdup_printf("allowed.test:%u", port), *r2 = strdup_printf("*.allowed.test:%u", port2),
                                    *r3 = strdup_printf("loopy.test:%u", lport), *r4 = strdup_printf("private.test:%u", pport),
                                    *r5 = strdup_printf("own.test:%u", port);
                const char *allow[] = {"--allow-host", r1, "--allow-host", r2, "--allow-host", r3,
                                       "--allow-host", r4, "--allow-host", r5, NULL};
                _cleanup_free_ char *get = HEX("GET /in-tunnel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                char longname[300];
                memset(longname, 'a', sizeof(longname));
                for (size_t i = 60; i < 290; i += 61) longname[i] = '.';
                snprintf(longname + 290, 10, ".test");
                typedef struct {
                        const char *label;
                        char *request;
                } raw;
                raw r[] = {
                        {"upper", strdup_printf("CONNECT ALLOWED.TEST.:%u HTTP/1.1\r\n\r\n", port)},
                        {"wild", strdup_printf("CONNECT up.allowed.test:%u HTTP/1.1\r\n\r\n", port2)},
                        {"wild-apex", strdup_printf("CONNECT allowed.test:%u HTTP/1.1\r\n\r\n", port2)},
                        {"nul", strdup_printf("CONNECT evil%c.allowed.test:%u HTTP/1.1\r\n\r\n", 1, port2)},
                        {"suffix", strdup_printf("CONNECT allowed.test.evil.test:%u HTTP/1.1\r\n\r\n", port)},
                        {"ip", strdup_printf("CONNECT %s:%u HTTP/1.1\r\n\r\n", TF_NET_PUBLIC, port)},
                        {"long", strdup_printf("CONNECT %s:%u HTTP/1.1\r\n\r\n", longname, port)},
                        {"path", strdup_printf("CONNECT allowed.test:%u/x HTTP/1.1\r\n\r\n", port)},
                        {"loopy", strdup_printf("CONNECT loopy.test:%u HTTP/1.1\r\n\r\n", lport)},
                        {"private", strdup_printf("CONNECT private.test:%u HTTP/1.1\r\n\r\n", pport)},
                        {"own", strdup_printf("CONNECT own.test:%u HTTP/1.1\r\n\r\n", port)},
                        {"plain", strdup_printf("GET http://allowed.test:%u/p HTTP/1.1\r\nHost: allowed.test:%u\r\n\r\n", port, port)},
                        {"two-hosts", strdup_printf("GET http://allowed.test:%u/p HTTP/1.1\r\nHost: allowed.test:%u\r\nHost: evil.test\r\n\r\n",
                                                    port, port)},
                        {"other-host",
                         strdup_printf("GET http://allowed.test:%u/p HTTP/1.1\r\nHost: evil.test\r\n\r\n", port)},
                        {"origin-form", strdup_printf("GET /p HTTP/1.1\r\nHost: allowed.test:%u\r\n\r\n", port)},
                };
                /* the NUL: a byte 1 stood in for it above (a C string ends at a NUL) */
                *strchr(r[3].request, 1) = 0;
                size_t nul_len = strlen(r[3].request) + 1 + strlen(r[3].request + strlen(r[3].request) + 1);
                _cleanup_free_ char *script = strdup_printf("P=%s; ", probe(w));
                for (size_t i = 0; i < ELEMENTSOF(r); i++) {
                        _cleanup_free_ char *h = hex(r[i].request, i == 3 ? nul_len : strlen(r[i].request));
                        tf_appendf(&script, "python3 $P raw %s 127.0.0.1 3128 %s %s; ", r[i].label, h, get);
        }
        _cleanup_free_ char *msg = tf_shell_done_output(w, repo, allow, script, NULL);

        /* matched: the trailing dot dropped, the case folded; the wildcard below its suffix */
        assert_reached(msg, "upper", "HTTP/1.1 200");
        assert_reached(msg, "upper", "marker-upstream");
        assert_reached(msg, "wild", "marker-wild");
        assert_reached(msg, "plain", "marker-upstream");
        _cleanup_free_ char *head = tf_listener_head(up);
        ck_assert_msg(startswith(head, "GET /p HTTP/1.1\r\n") && strstr(head, "Connection: close"), "%s", head);
        /* refused by name: 403 */
        const char *forbidden[] = {"wild-apex", "suffix", "ip"};
        for (size_t i = 0; i < ELEMENTSOF(forbidden); i++) assert_reached(msg, forbidden[i], "HTTP/1.1 403 Forbidden");
        /* refused per address, with the reason */
        assert_reached(msg, "loopy", "HTTP/1.1 403 Forbidden");
        assert_reached(msg, "loopy", "loopback");
        assert_reached(msg, "private", "HTTP/1.1 403 Forbidden");
        assert_reached(msg, "own", "HTTP/1.1 403 Forbidden");
        ck_assert_uint_eq(tf_listener_hits(lo), hits_lo);
        ck_assert_uint_eq(tf_listener_hits(priv), hits_priv);
        ck_assert_uint_eq(tf_listener_hits(own), hits_own);
        /* malformed: 400 (a name that fails normalization may be a 403 too) */
        const char *bad[] = {"nul", "long", "path", "two-hosts", "other-host", "origin-form"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *v = said(msg, bad[i]);
                ck_assert_msg(startswith(v, "REACHED HTTP/1.1 400") || startswith(v, "REACHED HTTP/1.1 403"), "%s: %s", bad[i], v);
                ck_assert_msg(!strstr(v, "marker-"), "%s got through: %s", bad[i], v);
        }
        for (size_t i = 0; i < ELEMENTSOF(r); i++) free(r[i].request);
        }
        tf_listener_free(up), tf_listener_free(up2), tf_listener_free(lo), tf_listener_free(priv), tf_listener_free(own);
        free(repo);
}

/* The daemon's TASKFERRY_ALLOW_HOSTS and config.json's network.allowHosts
 * allow hosts for every task; the status lists their rules. */
TF_WORLD_TEST(allow_hosts_from_env_and_config) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_listener *up = tf_listen_http(TF_NET_PUBLIC, 0, "marker-upstream");
        unsigned port = tf_listener_port(up);
        _cleanup_free_ char *script = strdup_printf("P=%s; python3 $P get env allowed.test %u; python3 $P get cfg up.allowed.test %u",
                                                    probe(w), port, port);
        _cleanup_free_ char *host = tf_shell_done_output(w, repo, HOST_LEG, script, NULL);
        assert_reached(host, "env", "marker-upstream");
        assert_reached(host, "cfg", "marker-upstream");
        if (!probes_only()) {
                /* a fresh daemon reads both */
                tf_daemon_stop(w, SIGTERM);
                _cleanup_free_ char *envrule = strdup_printf("allowed.test:%u", port), *cfgrule = strdup_printf("up.allowed.test:%u", port);
                _cleanup_free_ char *envval = strdup_printf("nothing.test, %s", envrule);
                tf_world_setenv(w, "TASKFERRY_ALLOW_HOSTS", envval);
                _cleanup_free_ char *cfg = strdup_printf("{\"network\": {\"mode\": \"proxy\", \"allowHosts\": [\"%s\"]}}\n", cfgrule);
                tf_put(tf_path(w->cfg, "taskferry/config.json"), cfg);
                json_object *st = NULL;
                char *id = tf_shell_done(w, repo, NULL, script, &st);
                json_object_put(st);
                _cleanup_free_ char *msg = tf_task_message(w, id);
                assert_reached(msg, "env", "200 marker-upstream");
                assert_reached(msg, "cfg", "200 marker-upstream");
                json_object *net = network_of(w, id, &st);
                ck_assert_msg(allow_lists(net, envrule) && allow_lists(net, cfgrule) && allow_lists(net, "nothing.test:443"), "%s",
                              json_to_line(net, NULL));
                json_object_put(st);
                free(id);
        }
        tf_listener_free(up);
        free(repo);
}

/* ---- none and host ---- */

/* --network none: no proxy listens inside, no proxy environment, nothing
 * reached; its host leg shows the probe finds a listener on 127.0.0.1:3128. */
TF_WORLD_TEST(network_none_has_nothing) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_listener *l = tf_listen_banner("127.0.0.1", 3128, "marker-3128");
        tf_listener *pub = tf_listen_banner(TF_NET_PUBLIC, 0, "marker-public");
        _cleanup_free_ char *script = strdup_printf("P=%s; python3 $P tcp proxy 127.0.0.1 3128; python3 $P tcp public %s %u; "
                                                    "python3 $P env env",
                                                    probe(w), TF_NET_PUBLIC, tf_listener_port(pub));
        _cleanup_free_ char *host = tf_shell_done_output(w, repo, HOST_LEG, script, NULL);
        assert_reached(host, "proxy", "marker-3128");
        assert_reached(host, "public", "marker-public");
        if (!probes_only()) {
                const char *none[] = {"--network", "none", NULL};
                json_object *st = NULL;
                char *id = tf_shell_done(w, repo, none, script, &st);
                json_object_put(st);
                _cleanup_free_ char *msg = tf_task_message(w, id);
                assert_unreachable(msg, "proxy");
                assert_unreachable(msg, "public");
                _cleanup_free_ char *env = said(msg, "env");
                ck_assert_str_eq(env, "(none)");
                json_object *net = network_of(w, id, &st);
                ck_assert_str_eq(strempty(json_get_string(net, "mode")), "none");
                json_object_put(st);
                free(id);
        }
        tf_listener_free(l), tf_listener_free(pub);
        free(repo);
}

/* --network host reaches the host's loopback; the status records mode
 * host and a warning. */
TF_WORLD_TEST(network_host_is_recorded) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_listener *l = tf_listen_banner("127.0.0.1", 0, "marker-loopback");
        _cleanup_free_ char *script = strdup_printf("python3 %s tcp lo4 127.0.0.1 %u", probe(w), tf_listener_port(l));
        json_object *st = NULL;
        char *id = tf_shell_done(w, repo, HOST_LEG, script, &st);
        json_object_put(st);
        _cleanup_free_ char *msg = tf_task_message(w, id);
        assert_reached(msg, "lo4", "marker-loopback");
        if (!probes_only()) {
                        json_object *net = network_of(w, id, &st);
                        ck_assert_str_eq(strempty(json_get_string(net, "mode")), "host");
                        ck_assert_msg(!isempty(json_get_string(st, "networkWarning")), "%s", json_to_line(st, NULL));
                        json_object_put(st);
        }
        tf_listener_free(l);
        free(id), free(repo);
}

/* ---- host unix sockets ---- */

/* A unix socket that answers each connection with a marker (an agent). */
static void *unix_banner(void *arg) {
        int fd = (int) (intptr_t) arg;
        for (;;) {
                int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
                if (c < 0) return NULL;
                (void) !write(c, "marker-agent\n", 13);
                close(c);
        }
}

/* --allow-socket binds exactly that socket in, with a warning; without it
 * the socket is not there (the sandbox shows no host socket). */
TF_WORLD_TEST(allow_socket_binds_one_socket) {
        char *repo = tf_repo_new(w, NULL, NULL);
        _cleanup_free_ char *dir = strdup_printf("%s/agent", w->root);
        ck_assert_int_eq(mkdir(dir, 0700), 0);
        _cleanup_free_ char *path = strdup_printf("%s/agent.sock", dir);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        ck_assert_int_eq(listen(fd, 16), 0);
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, unix_banner, (void *) (intptr_t) fd), 0);
        pthread_detach(t);
        _cleanup_free_ char *script = strdup_printf(
                "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('%s'); "
                "print('@sock: REACHED', s.recv(64).decode().strip())\" 2>/dev/null || echo '@sock: UNREACHABLE'",
                path);
        char *msg = tf_shell_output(w, repo, NULL, script, NULL);
        assert_unreachable(msg, "sock");
        free(msg);
        if (!probes_only()) {
                const char *extra[] = {"--allow-socket", path, NULL};
                json_object *st = NULL;
                char *id = tf_shell_done(w, repo, extra, script, &st);
                json_object_put(st);
                msg = tf_task_message(w, id);
                assert_reached(msg, "sock", "marker-agent");
                free(msg), free(id);
                /* a relative path, a file that is no socket: refused with a clear error */
                const char *rel[] = {"dispatch", "--executor", "shell", "--prompt", "true", "--allow-socket", "agent.sock",
                                     NULL};
                tf_run r = tf_cli(w, repo, NULL, rel);
                ck_assert_msg(r.exit_code != 0 && strstr(r.out, "not an absolute path"), "%s %s", r.out, r.err);
                tf_run_done(&r);
                _cleanup_free_ char *file = strdup_printf("%s/plain", dir);
                tf_write(file, "x", 1, 0600);
                const char *plain[] = {"dispatch", "--executor", "shell", "--prompt", "true", "--allow-socket", file, NULL};
                r = tf_cli(w, repo, NULL, plain);
                ck_assert_msg(r.exit_code != 0 && strstr(r.out, "not a unix socket"), "%s %s", r.out, r.err);
                tf_run_done(&r);
        }
        free(repo);
}
END_TEST

/* ---- nested dispatch ---- */

/* From inside a worker, through its task socket: a proxy parent may not
 * dispatch a host child ("can only narrow"), may dispatch a none child; a
 * host parent may dispatch a host child (the host leg). */
TF_WORLD_TEST(nested_dispatch_only_narrows) {
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *nested = probes_only() ? "" : "--network host";
        _cleanup_free_ char *script =
                strdup_printf("out=$(taskferry dispatch --executor shell %s --prompt 'echo nested' 2>&1); echo \"rc=$? $out\" | tr '\\n' ' '; echo; "
                              "out=$(taskferry dispatch --executor shell --network none --prompt 'echo nested' 2>&1); "
                              "echo \"none-rc=$?\"",
                              nested);
        _cleanup_free_ char *host = tf_shell_done_output(w, repo, HOST_LEG, script, NULL);
        ck_assert_msg(strstr(host, "rc=0 "), "a host parent could not dispatch a host child: %s", host);
        if (!probes_only()) {
                ck_assert_msg(strstr(host, "none-rc=0"), "%s", host);

                _cleanup_free_ char *msg = tf_shell_done_output(w, repo, NULL, script, NULL);
                _cleanup_free_ char *text = tf_unescape(msg);
                ck_assert_msg(!strstr(text, "rc=0 ") && strstr(text, "can only narrow"), "%s", text);
                ck_assert_msg(strstr(text, "none-rc=0"), "a proxy parent could not dispatch a none child: %s", text);
        }
        free(repo);
}

/* ---- the check gate ---- */

static void wait_check(tf_world *w, const char *id, const char *want) {
        json_object_put(tf_wait_check(w, id, (const char *const[]) {want, NULL}, 60000));
}

/* The check gate runs under the task's policy: its probe of a loopback
 * listener fails by default, passes under --network host. */
TF_WORLD_TEST(check_gate_same_policy) {
        tf_listener *l = tf_listen_banner("127.0.0.1", 0, "marker-loopback");
        _cleanup_free_ char *toml = strdup_printf("check = \"out=$(python3 %s tcp gate 127.0.0.1 %u); echo $out; "
                                                  "case $out in '@gate: REACHED'*) exit 0;; esac; exit 1\"\n",
                                                  probe(w), tf_listener_port(l));
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_write(tf_path(repo, ".taskferry.toml"), toml, strlen(toml), 0644);
        free(tf_shf(w, repo, "git add .taskferry.toml && git commit -qm gate"));

        char *hid = tf_shell_pending(w, repo, HOST_LEG, "echo x > added.txt", NULL);
        wait_check(w, hid, "passed");
        ck_assert_uint_ge(tf_listener_hits(l), 1);
        if (!probes_only()) {
                unsigned before = tf_listener_hits(l);

                char *id = tf_shell_pending(w, repo, NULL, "echo x > added.txt", NULL);
                wait_check(w, id, "failed");
                const char *rargv[] = {"result", id, "--fields", "checkOutputTail", "--json", NULL};
                json_object *res = tf_cli_json(w, rargv, 0);
                ck_assert_msg(strstr(strempty(tf_jstr(res, "checkOutputTail")), "@gate: UNREACHABLE"), "%s", json_to_line(res, NULL));
                json_object_put(res);
                ck_assert_uint_eq(tf_listener_hits(l), before);
                free(id);
        }
        tf_listener_free(l);
        free(hid), free(repo);
}

int main(void) {
        tf_netns_world_enter();
        Suite *s = suite_create("network");
        tf_add_tests(s, "unreachable", 300, TF_TESTS(default_reaches_nothing));
        tf_add_tests(s, "proxy", 300,
                     TF_TESTS(proxy_reaches_allowed_host, proxy_denies_unlisted_host, proxy_matches_exactly,
                              allow_hosts_from_env_and_config));
        tf_add_tests(s, "modes", 300, TF_TESTS(network_none_has_nothing, network_host_is_recorded,
                                               allow_socket_binds_one_socket));
        tf_add_tests(s, "nested", 300, TF_TESTS(nested_dispatch_only_narrows, check_gate_same_policy));
        return tf_run_suite(s);
}
