/* The network policy of one task (net-policy.h). Every host name and port
 * reaching this file may come from a hostile worker: nothing here trusts a
 * length, a terminator or a spelling it did not check itself. */
#include "net-policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json-util.h"
#include "macro.h"
#include "protocol-keys.h"
#include "string-util.h"

/* the key of the rule list in the policy's JSON */
#define NET_POLICY_JSON_ALLOW "allow"

static const char *const net_mode_table[_NET_MODE_MAX] = {
        [NET_MODE_PROXY] = "proxy",
        [NET_MODE_NONE] = "none",
        [NET_MODE_HOST] = "host",
};

const char *net_mode_to_string(NetMode m) {
        return m >= 0 && m < _NET_MODE_MAX ? net_mode_table[m] : NULL;
}

NetMode net_mode_from_string(const char *s) {
        if (!s) return _NET_MODE_INVALID;
        for (int m = 0; m < _NET_MODE_MAX; m++)
                if (streq(s, net_mode_table[m])) return (NetMode) m;
        return _NET_MODE_INVALID;
}

static const char *const net_addr_class_table[_NET_ADDR_CLASS_MAX] = {
        [NET_ADDR_PUBLIC] = "public",         [NET_ADDR_LOOPBACK] = "loopback",
        [NET_ADDR_LINK_LOCAL] = "link-local", [NET_ADDR_PRIVATE] = "private",
        [NET_ADDR_CGNAT] = "cgnat",           [NET_ADDR_ULA] = "ula",
        [NET_ADDR_MULTICAST] = "multicast",   [NET_ADDR_UNSPECIFIED] = "unspecified",
};

/* the refusal of check_addr for each class that is refused */
static const char *const net_addr_class_reason[_NET_ADDR_CLASS_MAX] = {
        [NET_ADDR_LOOPBACK] = "resolves to a loopback address",
        [NET_ADDR_LINK_LOCAL] = "resolves to a link-local address",
        [NET_ADDR_PRIVATE] = "resolves to a private address",
        [NET_ADDR_CGNAT] = "resolves to a carrier-grade NAT address",
        [NET_ADDR_ULA] = "resolves to a unique local address",
        [NET_ADDR_MULTICAST] = "resolves to a multicast address",
        [NET_ADDR_UNSPECIFIED] = "resolves to an unspecified or reserved address",
};

const char *net_addr_class_to_string(NetAddrClass c) {
        return c >= 0 && c < _NET_ADDR_CLASS_MAX ? net_addr_class_table[c] : NULL;
}

/* ---- addresses ---- */

static NetAddrClass classify_v4(uint32_t a) {
        if ((a >> 24) == 0) return NET_ADDR_UNSPECIFIED;            /* 0/8 */
        if ((a >> 24) == 127) return NET_ADDR_LOOPBACK;             /* 127/8 */
        if ((a >> 16) == 0xa9fe) return NET_ADDR_LINK_LOCAL;        /* 169.254/16 */
        if ((a >> 24) == 10) return NET_ADDR_PRIVATE;               /* 10/8 */
        if ((a >> 20) == ((172u << 4) | 1)) return NET_ADDR_PRIVATE; /* 172.16/12 */
        if ((a >> 16) == ((192u << 8) | 168)) return NET_ADDR_PRIVATE; /* 192.168/16 */
        if ((a >> 22) == ((100u << 2) | 1)) return NET_ADDR_CGNAT;  /* 100.64/10 */
        if ((a >> 28) == 0xe) return NET_ADDR_MULTICAST;            /* 224/4 */
        if ((a >> 28) == 0xf) return NET_ADDR_UNSPECIFIED;          /* 240/4, 255.255.255.255 */
        return NET_ADDR_PUBLIC;
}

static uint32_t v4_at(const uint8_t *b) {
        return (uint32_t) b[0] << 24 | (uint32_t) b[1] << 16 | (uint32_t) b[2] << 8 | (uint32_t) b[3];
}

static bool all_zero(const uint8_t *b, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (b[i]) return false;
        return true;
}

/* The IPv4 address an IPv6 one carries: mapped ::ffff:0:0/96, translated
 * ::ffff:0:0:0/96, compatible ::/96 (not :: or ::1), NAT64 64:ff9b::/96 all
 * mean that very IPv4 host; with six_to_four also 2002::/16, whose IPv4
 * address is the site's gateway rather than the host. */
static bool v6_embedded_v4(const struct in6_addr *a6, bool six_to_four, uint32_t *ret) {
        const uint8_t *b = a6->s6_addr;
        static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
        if ((all_zero(b, 10) && b[10] == 0xff && b[11] == 0xff) ||               /* mapped */
            (all_zero(b, 8) && b[8] == 0xff && b[9] == 0xff && all_zero(b + 10, 2)) || /* translated */
            memcmp(b, nat64, 12) == 0) {
                *ret = v4_at(b + 12);
                return true;
        }
        if (all_zero(b, 12)) {
                uint32_t v = v4_at(b + 12);
                if (v <= 1) return false; /* :: and ::1 are IPv6's own */
                *ret = v;
                return true;
        }
        if (six_to_four && b[0] == 0x20 && b[1] == 0x02) {
                *ret = v4_at(b + 2);
                return true;
        }
        return false;
}

static NetAddrClass classify_v6(const struct in6_addr *a6) {
        const uint8_t *b = a6->s6_addr;
        static const uint8_t ec2_metadata[16] = {0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54};
        static const uint8_t nat64_local[6] = {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01};
        uint32_t v4;

        if (all_zero(b, 16)) return NET_ADDR_UNSPECIFIED;
        if (all_zero(b, 15) && b[15] == 1) return NET_ADDR_LOOPBACK;
        if (v6_embedded_v4(a6, true, &v4)) return classify_v4(v4);
        if (memcmp(b, nat64_local, sizeof(nat64_local)) == 0) return NET_ADDR_PRIVATE;
        if (memcmp(b, ec2_metadata, 16) == 0) return NET_ADDR_LINK_LOCAL;
        if (b[0] == 0xfe && b[1] >= 0x80 && b[1] <= 0xbf) return NET_ADDR_LINK_LOCAL; /* fe80::/10 */
        if (b[0] == 0xfe && b[1] >= 0xc0) return NET_ADDR_ULA;                       /* fec0::/10 */
        if ((b[0] & 0xfe) == 0xfc) return NET_ADDR_ULA;                        /* fc00::/7 */
        if (b[0] == 0xff) return NET_ADDR_MULTICAST;                           /* ff00::/8 */
        return NET_ADDR_PUBLIC;
}

NetAddrClass net_addr_classify(const struct sockaddr *sa) {
        if (!sa) return _NET_ADDR_CLASS_INVALID;
        if (sa->sa_family == AF_INET)
                return classify_v4(ntohl(((const struct sockaddr_in *) sa)->sin_addr.s_addr));
        if (sa->sa_family == AF_INET6) return classify_v6(&((const struct sockaddr_in6 *) sa)->sin6_addr);
        return (NetAddrClass) -EAFNOSUPPORT;
}

/* ---- host names ---- */

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

static bool is_name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '-' || c == '_';
}

/* [s, s+n) (no NUL inside) as the canonical text of the address of family
 * af, when it is an address of that family; ret holds INET6_ADDRSTRLEN. */
static bool ip_canonical(int af, const char *s, size_t n, char ret[static INET6_ADDRSTRLEN]) {
        char buf[INET6_ADDRSTRLEN];
        struct in6_addr a;
        if (n == 0 || n >= sizeof(buf)) return false;
        memcpy(buf, s, n);
        buf[n] = 0;
        if (inet_pton(af, buf, &a) != 1) return false;
        return inet_ntop(af, &a, ret, INET6_ADDRSTRLEN) != NULL;
}

int net_host_normalize(const char *name, size_t len, char **ret, bool *ret_is_ip) {
        char ip[INET6_ADDRSTRLEN];
        bool is_ip = false;

        if (!ret) return -EINVAL;
        if (!name || len == 0 || memchr(name, 0, len)) return -EINVAL;

        if (name[0] == '[') {
                /* "[v6]": nothing but an IPv6 address inside, nothing after */
                if (len < 3 || name[len - 1] != ']' || !ip_canonical(AF_INET6, name + 1, len - 2, ip))
                        return -EINVAL;
                is_ip = true;
        } else if (memchr(name, ':', len)) {
                if (!ip_canonical(AF_INET6, name, len, ip)) return -EINVAL;
                is_ip = true;
        } else if (ip_canonical(AF_INET, name, len, ip)) {
                /* a dotted quad only in the text inet_ntop writes back
                 * (inet_pton takes no leading zeros, but say it here) */
                if (strlen(ip) != len || memcmp(ip, name, len) != 0) return -EINVAL;
                is_ip = true;
        }
        if (is_ip) {
                char *s = strdup(ip);
                if (!s) return -ENOMEM;
                *ret = s;
                if (ret_is_ip) *ret_is_ip = true;
                return 0;
        }

        /* a name */
        if (name[len - 1] == '.') len--;
        if (len == 0 || len > NET_HOST_MAX) return -EINVAL;

        char buf[NET_HOST_MAX + 1];
        size_t label = 0, last = 0; /* bytes of the label so far; where the last label starts */
        for (size_t i = 0; i < len; i++) {
                char c = name[i];
                if (c == '.') {
                        if (label == 0 || buf[i - 1] == '-') return -EINVAL;
                        label = 0;
                        last = i + 1;
                        buf[i] = c;
                        continue;
                }
                if (!is_name_char(c)) return -EINVAL;
                if (c == '-' && label == 0) return -EINVAL;
                if (++label > 63) return -EINVAL;
                buf[i] = c >= 'A' && c <= 'Z' ? (char) (c - 'A' + 'a') : c;
        }
        if (label == 0 || buf[len - 1] == '-') return -EINVAL;
        buf[len] = 0;

        /* a name that a resolver would read as a number: a last label of
         * digits alone ("127.1", "2130706433"), or what inet_aton takes
         * ("0x7f", "0x7f.0x1", "017.1") */
        bool digits = true;
        for (size_t i = last; i < len && digits; i++) digits = is_digit(buf[i]);
        struct in_addr a4;
        if (digits || inet_aton(buf, &a4) != 0) return -EINVAL;

        char *s = strdup(buf);
        if (!s) return -ENOMEM;
        *ret = s;
        if (ret_is_ip) *ret_is_ip = false;
        return 0;
}

/* ---- rules ---- */

void net_rule_done(NetRule *r) {
        if (!r) return;
        free(r->host);
        *r = (NetRule) {};
}

int net_port_parse(const char *s, size_t n, uint16_t *ret) {
        if (n == 0 || n > 5) return -EINVAL;
        unsigned v = 0;
        for (size_t i = 0; i < n; i++) {
                if (!is_digit(s[i])) return -EINVAL;
                v = v * 10 + (unsigned) (s[i] - '0');
        }
        if (v == 0 || v > 65535) return -EINVAL;
        *ret = (uint16_t) v;
        return 0;
}

static int fail(const char **ret_reason, const char *why) {
        if (ret_reason) *ret_reason = why;
        return -EINVAL;
}

int net_rule_parse(const char *text, NetRule *ret, const char **ret_reason) {
        if (!ret) return -EINVAL;
        *ret = (NetRule) {};
        if (isempty(text)) return fail(ret_reason, "empty host");

        const char *s = text;
        uint16_t port = 443;
        bool url = false;
        if (strncasecmp(s, "https://", 8) == 0) {
                s += 8;
                url = true;
        } else if (strncasecmp(s, "http://", 7) == 0) {
                s += 7;
                port = 80;
                url = true;
        } else if (strstr(s, "://"))
                return fail(ret_reason, "only http:// and https:// URLs name a host");

        /* the authority: up to a path, a query or a fragment in a URL; the
         * whole text otherwise */
        size_t n = url ? strcspn(s, "/?#") : strlen(s);
        if (!url && strcspn(s, "/?#") != n) return fail(ret_reason, "a path needs a URL (https://host/path)");
        if (memchr(s, '@', n)) return fail(ret_reason, "user info (user@host) is not allowed");
        if (n == 0) return fail(ret_reason, "empty host");

        const char *host = s, *colon = NULL;
        size_t host_len;
        if (s[0] == '[') {
                const char *close = memchr(s, ']', n);
                if (!close) return fail(ret_reason, "an IPv6 address without its closing ']'");
                host_len = (size_t) (close - s) + 1;
                if (host_len < n) {
                        if (close[1] != ':') return fail(ret_reason, "junk after the IPv6 address");
                        colon = close + 1;
                }
        } else {
                colon = memchr(s, ':', n);
                if (colon && memchr(colon + 1, ':', n - (size_t) (colon + 1 - s)))
                        return fail(ret_reason, "an IPv6 address is written in brackets: [v6]:port");
                host_len = colon ? (size_t) (colon - s) : n;
        }
        if (colon && net_port_parse(colon + 1, n - (size_t) (colon + 1 - s), &port) < 0)
                return fail(ret_reason, "the port is not a number from 1 to 65535");
        if (host_len == 0) return fail(ret_reason, "empty host");

        bool wildcard = host_len >= 1 && host[0] == '*';
        if (wildcard) {
                if (url) return fail(ret_reason, "a URL names one host, not a wildcard");
                if (host_len < 2 || host[1] != '.')
                        return fail(ret_reason, "a wildcard is \"*.\" followed by a domain");
                host += 2;
                host_len -= 2;
        }

        _cleanup_free_ char *h = NULL;
        bool is_ip = false;
        int r = net_host_normalize(host, host_len, &h, &is_ip);
        if (r == -ENOMEM) return r;
        if (r < 0)
                return fail(ret_reason, wildcard ? "the domain of the wildcard is not a valid host name"
                                                 : "not a valid host name or IP address");
        if (wildcard) {
                if (is_ip) return fail(ret_reason, "a wildcard over an IP address");
                /* a suffix of one label is a top-level domain: anyone can
                 * register a name below it */
                if (!strchr(h, '.')) return fail(ret_reason, "a wildcard needs a domain of two labels or more");
                char *w = strdup_printf("*.%s", h);
                if (!w) return -ENOMEM;
                free(h);
                h = w;
        }

        *ret = (NetRule) {.host = TAKE_PTR(h), .port = port, .is_ip = is_ip};
        return 0;
}

char *net_rule_to_string(const NetRule *r) {
        if (!r || !r->host) return NULL;
        if (r->is_ip && strchr(r->host, ':')) return strdup_printf("[%s]:%u", r->host, (unsigned) r->port);
        return strdup_printf("%s:%u", r->host, (unsigned) r->port);
}

/* ---- policies ---- */

static bool rule_eq(const NetRule *a, const NetRule *b) {
        return a->port == b->port && a->is_ip == b->is_ip && streq(a->host, b->host);
}

int net_policy_add(NetPolicy *p, const NetRule *r) {
        if (!p || !r || !r->host || r->port == 0) return -EINVAL;
        for (size_t i = 0; i < p->n_rules; i++)
                if (rule_eq(&p->rules[i], r)) return 0;
        if (p->n_rules >= NET_POLICY_MAX_RULES) return -E2BIG;

        _cleanup_free_ char *h = strdup(r->host);
        if (!h) return -ENOMEM;
        NetRule *n = realloc(p->rules, (p->n_rules + 1) * sizeof(NetRule));
        if (!n) return -ENOMEM;
        p->rules = n;
        p->rules[p->n_rules++] = (NetRule) {.host = TAKE_PTR(h), .port = r->port, .is_ip = r->is_ip};
        return 0;
}

void net_policy_done(NetPolicy *p) {
        if (!p) return;
        for (size_t i = 0; i < p->n_rules; i++) free(p->rules[i].host);
        free(p->rules);
        p->rules = NULL;
        p->n_rules = 0;
}

int net_policy_copy(const NetPolicy *p, NetPolicy *ret) {
        if (!p || !ret) return -EINVAL;
        NetPolicy c = {.mode = p->mode};
        for (size_t i = 0; i < p->n_rules; i++) {
                int r = net_policy_add(&c, &p->rules[i]);
                if (r < 0) {
                        net_policy_done(&c);
                        return r;
                }
        }
        *ret = c;
        return 0;
}

int net_policy_add_strv(NetPolicy *p, char *const *entries, const char **ret_bad, const char **ret_reason) {
        if (!p) return -EINVAL;
        NetPolicy c;
        int r = net_policy_copy(p, &c);
        if (r < 0) return r;
        for (char *const *e = entries; e && *e; e++) {
                NetRule rule;
                const char *why = NULL;
                r = net_rule_parse(*e, &rule, &why);
                if (r >= 0) {
                        r = net_policy_add(&c, &rule);
                        net_rule_done(&rule);
                        if (r == -E2BIG) why = "too many hosts (at most 256)";
                }
                if (r < 0) {
                        net_policy_done(&c);
                        if (r != -ENOMEM) {
                                if (ret_bad) *ret_bad = *e;
                                if (ret_reason) *ret_reason = why;
                        }
                        return r;
                }
        }
        net_policy_done(p);
        *p = c;
        return 0;
}

/* Is name (normalized, not an IP) strictly below suffix? */
static bool name_below(const char *name, const char *suffix) {
        size_t n = strlen(name), s = strlen(suffix);
        return n > s + 1 && name[n - s - 1] == '.' && streq(name + n - s, suffix);
}

static bool is_wildcard(const NetRule *r) {
        return !r->is_ip && startswith(r->host, "*.");
}

static bool rules_match(const NetPolicy *p, const char *host, bool is_ip, uint16_t port) {
        for (size_t i = 0; i < p->n_rules; i++) {
                const NetRule *r = &p->rules[i];
                if (r->port != port || r->is_ip != is_ip) continue;
                if (streq(r->host, host)) return true;
                if (is_wildcard(r) && name_below(host, r->host + 2)) return true;
        }
        return false;
}

bool net_policy_match(const NetPolicy *p, const char *host, uint16_t port) {
        if (!p || !host || p->mode == NET_MODE_NONE) return false;
        /* only a host already in its normalized form: raw client bytes
         * ("x/.a.test", "A.TEST.") match nothing */
        _cleanup_free_ char *n = NULL;
        bool is_ip = false;
        if (net_host_normalize(host, strlen(host), &n, &is_ip) < 0 || !streq(n, host)) return false;
        return rules_match(p, host, is_ip, port);
}

static int mode_width(NetMode m) {
        switch (m) {
        case NET_MODE_NONE:
                return 0;
        case NET_MODE_PROXY:
                return 1;
        case NET_MODE_HOST:
                return 2;
        default:
                return 3; /* an unknown mode is wider than any */
        }
}

bool net_policy_covers(const NetPolicy *parent, const NetPolicy *child, const NetRule **ret_uncovered) {
        if (ret_uncovered) *ret_uncovered = NULL;
        if (!parent || !child) return false;
        int pw = mode_width(parent->mode), cw = mode_width(child->mode);
        if (cw > 2 || pw > 2 || cw > pw) return false;
        if (parent->mode == NET_MODE_HOST || child->mode == NET_MODE_NONE) return true;

        for (size_t i = 0; i < child->n_rules; i++) {
                const NetRule *c = &child->rules[i];
                bool ok = false;
                if (is_wildcard(c)) {
                        const char *cs = c->host + 2;
                        for (size_t j = 0; j < parent->n_rules && !ok; j++) {
                                const NetRule *q = &parent->rules[j];
                                ok = is_wildcard(q) && q->port == c->port &&
                                     (streq(q->host + 2, cs) || name_below(cs, q->host + 2));
                        }
                } else
                        ok = rules_match(parent, c->host, c->is_ip, c->port);
                if (!ok) {
                        if (ret_uncovered) *ret_uncovered = c;
                        return false;
                }
        }
        return true;
}

/* a and b are the same host: the same IPv6 address, or the same IPv4
 * address however either carries it */
static bool same_host(const struct sockaddr *a, const struct sockaddr *b) {
        uint32_t va, vb;
        bool ha = false, hb = false;
        if (a->sa_family == AF_INET6 && b->sa_family == AF_INET6 &&
            memcmp(&((const struct sockaddr_in6 *) a)->sin6_addr, &((const struct sockaddr_in6 *) b)->sin6_addr,
                   sizeof(struct in6_addr)) == 0)
                return true;
        if (a->sa_family == AF_INET) {
                va = ntohl(((const struct sockaddr_in *) a)->sin_addr.s_addr);
                ha = true;
        } else if (a->sa_family == AF_INET6)
                ha = v6_embedded_v4(&((const struct sockaddr_in6 *) a)->sin6_addr, false, &va);
        if (b->sa_family == AF_INET) {
                vb = ntohl(((const struct sockaddr_in *) b)->sin_addr.s_addr);
                hb = true;
        } else if (b->sa_family == AF_INET6)
                hb = v6_embedded_v4(&((const struct sockaddr_in6 *) b)->sin6_addr, false, &vb);
        return ha && hb && va == vb;
}

static int refuse(const char **ret_reason, const char *why) {
        if (ret_reason) *ret_reason = why;
        return -EACCES;
}

int net_policy_check_addr(const NetPolicy *p, uint16_t port, const struct sockaddr *sa,
                          const struct sockaddr_storage *own, size_t n_own, const char **ret_reason) {
        if (!p || !sa) return refuse(ret_reason, "no address");
        if (p->mode == NET_MODE_NONE) return refuse(ret_reason, "the network mode is none");

        char text[INET6_ADDRSTRLEN];
        const void *addr;
        if (sa->sa_family == AF_INET)
                addr = &((const struct sockaddr_in *) sa)->sin_addr;
        else if (sa->sa_family == AF_INET6)
                addr = &((const struct sockaddr_in6 *) sa)->sin6_addr;
        else
                return refuse(ret_reason, "resolves to an address that is not IPv4 or IPv6");
        if (!inet_ntop(sa->sa_family, addr, text, sizeof(text))) return refuse(ret_reason, "no address");

        /* a rule that names this very address with this port */
        if (rules_match(p, text, true, port)) return 0;

        NetAddrClass c = net_addr_classify(sa);
        if (c < 0 || c >= _NET_ADDR_CLASS_MAX) return refuse(ret_reason, "no address");
        if (c != NET_ADDR_PUBLIC) return refuse(ret_reason, net_addr_class_reason[c]);

        for (size_t i = 0; i < n_own; i++)
                if (same_host(sa, (const struct sockaddr *) &own[i]))
                        return refuse(ret_reason, "resolves to one of this host's addresses");
        return 0;
}

/* ---- JSON ---- */

int net_policy_to_json(const NetPolicy *p, json_object **ret) {
        if (!p || !ret) return -EINVAL;
        const char *mode = net_mode_to_string(p->mode);
        if (!mode) return -EINVAL;
        _cleanup_json_ json_object *o = json_object_new_object(), *a = json_object_new_array();
        if (!o || !a) return -ENOMEM;
        for (size_t i = 0; i < p->n_rules; i++) {
                _cleanup_free_ char *s = net_rule_to_string(&p->rules[i]);
                if (!s) return -ENOMEM;
                json_object *v = json_object_new_string(s);
                if (!v) return -ENOMEM;
                if (json_object_array_add(a, v) < 0) {
                        json_object_put(v);
                        return -ENOMEM;
                }
        }
        int r;
        if ((r = json_add_string(o, PK_mode, mode)) < 0) return r;
        if ((r = json_add(o, NET_POLICY_JSON_ALLOW, TAKE_PTR(a))) < 0) return r;
        *ret = TAKE_PTR(o);
        return 0;
}

int net_policy_from_json(json_object *o, NetPolicy *ret) {
        if (!ret) return -EINVAL;
        *ret = (NetPolicy) {};
        if (!json_is_object(o)) return -EINVAL;
        json_object_object_foreach(o, key, val) {
                (void) val;
                if (!streq(key, PK_mode) && !streq(key, NET_POLICY_JSON_ALLOW)) return -EINVAL;
        }

        json_object *m = json_get(o, PK_mode);
        if (!json_is_nonempty_string(m)) return -EINVAL;
        NetMode mode = net_mode_from_string(json_object_get_string(m));
        if (mode < 0) return -EINVAL;

        NetPolicy p = {.mode = mode};
        json_object *a = NULL;
        if (json_object_object_get_ex(o, NET_POLICY_JSON_ALLOW, &a)) {
                if (!json_object_is_type(a, json_type_array)) return -EINVAL;
                size_t n = json_object_array_length(a);
                for (size_t i = 0; i < n; i++) {
                        json_object *v = json_object_array_get_idx(a, i);
                        NetRule rule;
                        int r = json_is_nonempty_string(v) ? net_rule_parse(json_object_get_string(v), &rule, NULL)
                                                           : -EINVAL;
                        if (r >= 0) {
                                r = net_policy_add(&p, &rule);
                                net_rule_done(&rule);
                        }
                        if (r < 0) {
                                net_policy_done(&p);
                                return r;
                        }
                }
        }
        *ret = p;
        return 0;
}
