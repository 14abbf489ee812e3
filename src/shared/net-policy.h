#pragma once
/* The network policy of one task: its mode and the hosts its egress proxy
 * may connect to, with the rules that decide each connection.
 *
 * A sandboxed worker (and its check gate, summary and advisor children) runs
 * in a network namespace of its own holding only `lo`. In mode "proxy" the
 * one way out is the task's egress proxy (egress-proxy.h), listening inside
 * that namespace at 127.0.0.1:NET_PROXY_PORT and connecting from outside it;
 * in mode "none" there is no way out at all; mode "host" shares the host's
 * network (the old behaviour, recorded on the task and warned about).
 *
 * A rule is a host and a port. The host is a DNS name matched exactly, a
 * "*.suffix" matching any name strictly below the suffix (not the suffix
 * itself), or an IP literal. Names are compared after net_host_normalize();
 * nothing else (no substring, no "endsWith" on raw bytes).
 *
 * The decision is taken twice: by name (net_policy_match) before resolving,
 * then per resolved address (net_policy_check_addr): an address of a class
 * other than NET_ADDR_PUBLIC, or one of the host's own addresses, is refused
 * unless a rule names that very address as an IP literal (with the port).
 * The proxy connects to the address it checked, never resolving again. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* where the proxy listens inside the sandbox's namespace (nothing else can
 * hold a port there, so the port is fixed) */
#define NET_PROXY_ADDRESS "127.0.0.1"
#define NET_PROXY_PORT 3128
/* the most rules one policy holds (-E2BIG beyond) */
#define NET_POLICY_MAX_RULES 256
/* the longest DNS name (bytes, without a trailing dot) */
#define NET_HOST_MAX 253

typedef enum NetMode {
        NET_MODE_PROXY,
        NET_MODE_NONE,
        NET_MODE_HOST,
        _NET_MODE_MAX,
        _NET_MODE_INVALID = -22, /* -EINVAL */
} NetMode;

const char *net_mode_to_string(NetMode m);
NetMode net_mode_from_string(const char *s);

typedef enum NetAddrClass {
        NET_ADDR_PUBLIC,
        NET_ADDR_LOOPBACK,    /* 127/8, ::1, ::ffff:127/104 */
        NET_ADDR_LINK_LOCAL,  /* 169.254/16 (the metadata 169.254.169.254), fe80::/10, fd00:ec2::254 */
        NET_ADDR_PRIVATE,     /* 10/8, 172.16/12, 192.168/16, 64:ff9b:1::/48 (a network's own NAT64) */
        NET_ADDR_CGNAT,       /* 100.64/10 */
        NET_ADDR_ULA,         /* fc00::/7, fec0::/10 (the deprecated site-local) */
        NET_ADDR_MULTICAST,   /* 224/4, ff00::/8 */
        NET_ADDR_UNSPECIFIED, /* 0/8, ::, 255.255.255.255, 240/4 (reserved) */
        _NET_ADDR_CLASS_MAX,
        _NET_ADDR_CLASS_INVALID = -22,
} NetAddrClass;

/* "public", "loopback", "link-local", "private", "cgnat", "ula",
 * "multicast", "unspecified" */
const char *net_addr_class_to_string(NetAddrClass c);
/* The class of an AF_INET or AF_INET6 address. An IPv6 address that
 * carries an IPv4 one is classified as that IPv4 address: IPv4-mapped
 * ::ffff:0:0/96, IPv4-translated ::ffff:0:0:0/96, IPv4-compatible ::/96
 * (other than :: and ::1), NAT64 64:ff9b::/96 and 6to4 2002::/16. A
 * negative value for another family (-EAFNOSUPPORT) or a NULL sa
 * (_NET_ADDR_CLASS_INVALID). */
NetAddrClass net_addr_classify(const struct sockaddr *sa);

typedef struct NetRule {
        char *host;    /* normalized: lower-case ASCII name, "*.suffix", or an IP literal in canonical text (inet_ntop) */
        uint16_t port; /* 1..65535 */
        bool is_ip;    /* host is an IP literal */
} NetRule;

typedef struct NetPolicy {
        NetMode mode;
        NetRule *rules;
        size_t n_rules;
} NetPolicy;

/* Normalize a host name as a client sent it (len bytes, not NUL-terminated:
 * a NUL inside is an error): ASCII only (IDNA names arrive as "xn--"
 * labels), letters, digits, '-' and '_' (labels of 1..63 bytes, no '-' at a
 * label's start or end), at most NET_HOST_MAX bytes, at least one label, one
 * trailing '.' dropped, lower-cased. An IP literal ("1.2.3.4", "[::1]" or
 * "::1") becomes its canonical text and *ret_is_ip is set; an IPv4
 * literal only as the dotted quad inet_ntop writes (no brackets, no
 * trailing dot), an IPv6 one without a zone. A name a resolver would read
 * as a number is -EINVAL: one whose last label is all digits, or that
 * inet_aton takes ("127.1", "0x7f.1", "2130706433", "0177.0.0.1", all of
 * them 127.0.0.1). Anything else (spaces, '%', '/', '@', ':' in a name, an
 * empty label, trailing junk) is -EINVAL. *ret is malloc'd (untouched on
 * error); ret_is_ip may be NULL. -EINVAL, -ENOMEM. */
int net_host_normalize(const char *name, size_t len, char **ret, bool *ret_is_ip);

/* Parse one rule as a user writes it: "host", "host:port", "*.suffix[:port]",
 * "1.2.3.4[:port]", "[v6][:port]", or a URL "https://host[:port][/...]" /
 * "http://host[:port][/...]" (a base URL from an agent's config). The port
 * defaults to 443 (80 for an http:// URL). On -EINVAL *ret_reason (static
 * text) says what is wrong. A wildcard needs a suffix of two labels or more
 * ("*.com" is refused: it would allow every name anyone can register under
 * a top-level domain); an IPv6 literal with a port needs its brackets;
 * a URL with user info ("https://u@host") is refused. -EINVAL, -ENOMEM. */
int net_rule_parse(const char *text, NetRule *ret, const char **ret_reason);
/* A port as a client or a user writes it: "1".."65535" in [s, s+n),
 * decimal digits only (no sign, no spaces, at most 5 digits). 0, -EINVAL. */
int net_port_parse(const char *s, size_t n, uint16_t *ret);

/* "host:port" ("[v6]:port" for an IPv6 literal), malloc'd; NULL on ENOMEM. */
char *net_rule_to_string(const NetRule *r);
void net_rule_done(NetRule *r);

/* Append a rule (copied) unless the policy holds it already. 0, -E2BIG
 * (NET_POLICY_MAX_RULES), -ENOMEM. */
int net_policy_add(NetPolicy *p, const NetRule *r);
/* Parse and add each entry of a strv (NULL: none); the first bad one stops
 * with -EINVAL (or -E2BIG) and *ret_bad pointing at it, *ret_reason saying
 * why, and p as it was (all or nothing). */
int net_policy_add_strv(NetPolicy *p, char *const *entries, const char **ret_bad, const char **ret_reason);
void net_policy_done(NetPolicy *p);
int net_policy_copy(const NetPolicy *p, NetPolicy *ret);

/* Does a rule allow this normalized host (name or IP literal text) and
 * port? Exact names, "*.suffix" for names strictly below the suffix, IP
 * literals only against IP rules (exact text). A host that is not already
 * in net_host_normalize's form matches nothing, and in mode "none" nothing
 * matches. */
bool net_policy_match(const NetPolicy *p, const char *host, uint16_t port);
/* Is every rule of child allowed by parent (a nested dispatch may only
 * narrow)? A "*.x" child rule is covered by an equal or wider parent
 * wildcard; a name by an exact rule or a wildcard above it; an IP literal
 * by the same literal; the ports must be equal. The modes narrow too
 * (host > proxy > none): a child in a wider mode than its parent is not
 * covered (*ret_uncovered NULL); a parent in mode "host" covers every
 * child, a child in mode "none" is covered by every parent. *ret_uncovered
 * (may be NULL) points at the first rule that is not covered. */
bool net_policy_covers(const NetPolicy *parent, const NetPolicy *child, const NetRule **ret_uncovered);

/* The decision on one resolved address of an allowed host:port. 0: connect
 * to it. -EACCES: refused, *ret_reason (static text) says why ("resolves to a
 * loopback address", "... link-local ...", "... one of this host's
 * addresses"). own[] (n_own entries, may be 0) are the host's own addresses
 * (getifaddrs, ports ignored; an IPv6 address carrying an IPv4 one, as
 * net_addr_classify reads it, apart from 6to4, equals that IPv4 address).
 * An address a rule names as an IP literal with this port (the canonical
 * text of the address, so ::ffff:127.0.0.1 is not 127.0.0.1) is allowed
 * whatever its class. Another family, or mode "none": -EACCES. ret_reason
 * may be NULL. */
int net_policy_check_addr(const NetPolicy *p, uint16_t port, const struct sockaddr *sa,
                          const struct sockaddr_storage *own, size_t n_own, const char **ret_reason);

/* JSON form of a policy in a launch spec and on the task record:
 * {"mode":"proxy","allow":["host:port",...]}. net_policy_from_json is
 * strict (not an object, unknown keys, no "mode", an "allow" that is not an
 * array of strings, bad rules: -EINVAL; more than NET_POLICY_MAX_RULES:
 * -E2BIG); "allow" may be absent (no rules). -EINVAL, -E2BIG, -ENOMEM. */
typedef struct json_object json_object;
int net_policy_to_json(const NetPolicy *p, json_object **ret);
int net_policy_from_json(json_object *o, NetPolicy *ret);
