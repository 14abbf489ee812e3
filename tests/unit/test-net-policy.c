/* net-policy.h: the names, rules and addresses a sandboxed worker's egress
 * proxy decides on, fed the spellings a hostile worker would send: NUL
 * bytes inside a name, suffixes without a dot boundary, trailing dots, the
 * numeric spellings resolvers read as loopback, IPv4 inside IPv6, and every
 * edge of every address range. */

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "json-util.h"
#include "macro.h"
#include "net-policy.h"
#include "string-util.h"
#include "strv.h"
#include "unit.h"

/* ---- helpers ---- */

/* text (an IPv4 or IPv6 literal) as a sockaddr in ss. */
static const struct sockaddr *sa_of(const char *text, struct sockaddr_storage *ss) {
        memset(ss, 0, sizeof(*ss));
        struct sockaddr_in *in = (struct sockaddr_in *) ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) ss;
        if (inet_pton(AF_INET, text, &in->sin_addr) == 1) {
                in->sin_family = AF_INET;
                in->sin_port = htons(443);
        } else {
                ck_assert_msg(inet_pton(AF_INET6, text, &in6->sin6_addr) == 1, "bad test address %s", text);
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons(443);
        }
        return (const struct sockaddr *) ss;
}

static NetAddrClass classify(const char *text) {
        struct sockaddr_storage ss;
        return net_addr_classify(sa_of(text, &ss));
}

/* net_host_normalize of a C string; the result (malloc'd) or NULL when it
 * is refused (then it must be -EINVAL). */
static char *norm(const char *s, bool *is_ip) {
        char *out = NULL;
        bool ip = false;
        int r = net_host_normalize(s, strlen(s), &out, &ip);
        if (r < 0) {
                ck_assert_msg(r == -EINVAL, "%s: %d", s, r);
                ck_assert_ptr_null(out);
                return NULL;
        }
        ck_assert_int_eq(r, 0);
        ck_assert_ptr_nonnull(out);
        if (is_ip) *is_ip = ip;
        return out;
}

static void policy_of(NetPolicy *p, NetMode mode, ...) {
        *p = (NetPolicy) {.mode = mode};
        va_list ap;
        va_start(ap, mode);
        for (const char *t; (t = va_arg(ap, const char *));) {
                NetRule r = {};
                const char *why = NULL;
                ck_assert_msg(net_rule_parse(t, &r, &why) == 0, "%s: %s", t, strnull(why));
                ck_assert_int_eq(net_policy_add(p, &r), 0);
                net_rule_done(&r);
        }
        va_end(ap);
}

/* ---- modes and classes ---- */

START_TEST(mode_names) {
        ck_assert_str_eq(net_mode_to_string(NET_MODE_PROXY), "proxy");
        ck_assert_str_eq(net_mode_to_string(NET_MODE_NONE), "none");
        ck_assert_str_eq(net_mode_to_string(NET_MODE_HOST), "host");
        for (int m = 0; m < _NET_MODE_MAX; m++) ck_assert_int_eq(net_mode_from_string(net_mode_to_string(m)), m);
        ck_assert_ptr_null(net_mode_to_string(_NET_MODE_MAX));
        ck_assert_ptr_null(net_mode_to_string(_NET_MODE_INVALID));
        ck_assert_int_eq(net_mode_from_string("Proxy"), _NET_MODE_INVALID);
        ck_assert_int_eq(net_mode_from_string("proxy "), _NET_MODE_INVALID);
        ck_assert_int_eq(net_mode_from_string(""), _NET_MODE_INVALID);
        ck_assert_int_eq(net_mode_from_string(NULL), _NET_MODE_INVALID);

        static const char *const names[] = {"public", "loopback", "link-local", "private",
                                            "cgnat",  "ula",      "multicast",  "unspecified"};
        ck_assert_int_eq(ELEMENTSOF(names), _NET_ADDR_CLASS_MAX);
        for (int c = 0; c < _NET_ADDR_CLASS_MAX; c++) ck_assert_str_eq(net_addr_class_to_string(c), names[c]);
        ck_assert_ptr_null(net_addr_class_to_string(_NET_ADDR_CLASS_MAX));
        ck_assert_ptr_null(net_addr_class_to_string(_NET_ADDR_CLASS_INVALID));
}
END_TEST

/* Every range: its first and last address inside, and the first outside on
 * each side. */
static const struct {
        const char *addr;
        NetAddrClass class;
} class_rows[] = {
        /* 0/8 */
        {"0.0.0.0", NET_ADDR_UNSPECIFIED},
        {"0.255.255.255", NET_ADDR_UNSPECIFIED},
        {"1.0.0.0", NET_ADDR_PUBLIC},
        /* 10/8 */
        {"9.255.255.255", NET_ADDR_PUBLIC},
        {"10.0.0.0", NET_ADDR_PRIVATE},
        {"10.255.255.255", NET_ADDR_PRIVATE},
        {"11.0.0.0", NET_ADDR_PUBLIC},
        /* 100.64/10 */
        {"100.63.255.255", NET_ADDR_PUBLIC},
        {"100.64.0.0", NET_ADDR_CGNAT},
        {"100.127.255.255", NET_ADDR_CGNAT},
        {"100.128.0.0", NET_ADDR_PUBLIC},
        /* 127/8 */
        {"126.255.255.255", NET_ADDR_PUBLIC},
        {"127.0.0.0", NET_ADDR_LOOPBACK},
        {"127.0.0.1", NET_ADDR_LOOPBACK},
        {"127.255.255.255", NET_ADDR_LOOPBACK},
        {"128.0.0.0", NET_ADDR_PUBLIC},
        /* 169.254/16 */
        {"169.253.255.255", NET_ADDR_PUBLIC},
        {"169.254.0.0", NET_ADDR_LINK_LOCAL},
        {"169.254.169.254", NET_ADDR_LINK_LOCAL},
        {"169.254.255.255", NET_ADDR_LINK_LOCAL},
        {"169.255.0.0", NET_ADDR_PUBLIC},
        /* 172.16/12 */
        {"172.15.255.255", NET_ADDR_PUBLIC},
        {"172.16.0.0", NET_ADDR_PRIVATE},
        {"172.31.255.255", NET_ADDR_PRIVATE},
        {"172.32.0.0", NET_ADDR_PUBLIC},
        /* 192.168/16 */
        {"192.167.255.255", NET_ADDR_PUBLIC},
        {"192.168.0.0", NET_ADDR_PRIVATE},
        {"192.168.255.255", NET_ADDR_PRIVATE},
        {"192.169.0.0", NET_ADDR_PUBLIC},
        /* 224/4, 240/4, 255.255.255.255 */
        {"223.255.255.255", NET_ADDR_PUBLIC},
        {"224.0.0.0", NET_ADDR_MULTICAST},
        {"239.255.255.255", NET_ADDR_MULTICAST},
        {"240.0.0.0", NET_ADDR_UNSPECIFIED},
        {"255.255.255.254", NET_ADDR_UNSPECIFIED},
        {"255.255.255.255", NET_ADDR_UNSPECIFIED},
        {"8.8.8.8", NET_ADDR_PUBLIC},
        /* ::, ::1 */
        {"::", NET_ADDR_UNSPECIFIED},
        {"::1", NET_ADDR_LOOPBACK},
        {"::2", NET_ADDR_UNSPECIFIED}, /* IPv4-compatible 0.0.0.2 */
        /* IPv4-compatible ::/96 by its IPv4 */
        {"::127.0.0.1", NET_ADDR_LOOPBACK},
        {"::10.0.0.1", NET_ADDR_PRIVATE},
        {"::8.8.8.8", NET_ADDR_PUBLIC},
        {"::1:0:0", NET_ADDR_PUBLIC}, /* past ::/96 */
        /* IPv4-mapped ::ffff:0:0/96 */
        {"::ffff:127.0.0.1", NET_ADDR_LOOPBACK},
        {"::ffff:7f00:1", NET_ADDR_LOOPBACK},
        {"::ffff:169.254.169.254", NET_ADDR_LINK_LOCAL},
        {"::ffff:10.1.2.3", NET_ADDR_PRIVATE},
        {"::ffff:100.64.0.1", NET_ADDR_CGNAT},
        {"::ffff:0.0.0.0", NET_ADDR_UNSPECIFIED},
        {"::ffff:255.255.255.255", NET_ADDR_UNSPECIFIED},
        {"::ffff:224.0.0.1", NET_ADDR_MULTICAST},
        {"::ffff:8.8.8.8", NET_ADDR_PUBLIC},
        {"::fffe:7f00:1", NET_ADDR_PUBLIC}, /* not mapped: ::fffe:0:0 is outside every range */
        {"::1:ffff:7f00:1", NET_ADDR_PUBLIC},
        /* IPv4-translated ::ffff:0:0:0/96 */
        {"::ffff:0:127.0.0.1", NET_ADDR_LOOPBACK},
        {"::ffff:0:8.8.8.8", NET_ADDR_PUBLIC},
        /* NAT64 64:ff9b::/96 */
        {"64:ff9b::127.0.0.1", NET_ADDR_LOOPBACK},
        {"64:ff9b::a9fe:a9fe", NET_ADDR_LINK_LOCAL},
        {"64:ff9b::192.168.1.1", NET_ADDR_PRIVATE},
        {"64:ff9b::8.8.8.8", NET_ADDR_PUBLIC},
        {"64:ff9b::1:7f00:1", NET_ADDR_PUBLIC}, /* past the /96 */
        {"64:ff9a:ffff:ffff:ffff:ffff:7f00:1", NET_ADDR_PUBLIC},
        /* local-use NAT64 64:ff9b:1::/48 */
        {"64:ff9b:1::", NET_ADDR_PRIVATE},
        {"64:ff9b:1:ffff:ffff:ffff:ffff:ffff", NET_ADDR_PRIVATE},
        {"64:ff9b:2::", NET_ADDR_PUBLIC},
        /* 6to4 2002::/16 */
        {"2002:7f00:1::1", NET_ADDR_LOOPBACK},
        {"2002:a9fe:a9fe::", NET_ADDR_LINK_LOCAL},
        {"2002:0a00:0001::", NET_ADDR_PRIVATE},
        {"2002:0808:0808::1", NET_ADDR_PUBLIC},
        {"2001:ffff:ffff:ffff:ffff:ffff:7f00:1", NET_ADDR_PUBLIC},
        {"2003:7f00:1::", NET_ADDR_PUBLIC},
        /* fe80::/10 */
        {"fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", NET_ADDR_PUBLIC},
        {"fe80::", NET_ADDR_LINK_LOCAL},
        {"febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", NET_ADDR_LINK_LOCAL},
        /* fec0::/10, deprecated site-local */
        {"fec0::", NET_ADDR_ULA},
        {"feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", NET_ADDR_ULA},
        /* fc00::/7 */
        {"fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", NET_ADDR_PUBLIC},
        {"fc00::", NET_ADDR_ULA},
        {"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", NET_ADDR_ULA},
        {"fe00::", NET_ADDR_PUBLIC},
        /* the EC2 IPv6 metadata, inside fc00::/7 but link-local */
        {"fd00:ec2::254", NET_ADDR_LINK_LOCAL},
        {"fd00:ec2::253", NET_ADDR_ULA},
        {"fd00:ec2::255", NET_ADDR_ULA},
        /* ff00::/8 */
        {"ff00::", NET_ADDR_MULTICAST},
        {"ff02::1", NET_ADDR_MULTICAST},
        {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", NET_ADDR_MULTICAST},
        /* public */
        {"2001:4860:4860::8888", NET_ADDR_PUBLIC},
        {"2606:4700::1111", NET_ADDR_PUBLIC},
};

START_TEST(classify_rows) {
        NetAddrClass c = classify(class_rows[_i].addr);
        ck_assert_msg(c == class_rows[_i].class, "%s: %s, want %s", class_rows[_i].addr,
                      strnull(net_addr_class_to_string(c)), net_addr_class_to_string(class_rows[_i].class));
}
END_TEST

START_TEST(classify_other_family) {
        struct sockaddr_un un = {.sun_family = AF_UNIX};
        ck_assert_int_eq(net_addr_classify((const struct sockaddr *) &un), -EAFNOSUPPORT);
        struct sockaddr_storage ss = {.ss_family = AF_UNSPEC};
        ck_assert_int_lt(net_addr_classify((const struct sockaddr *) &ss), 0);
        ck_assert_int_lt(net_addr_classify(NULL), 0);
}
END_TEST

/* ---- host names ---- */

static const struct {
        const char *in;
        const char *out; /* NULL: refused */
        bool is_ip;
} host_rows[] = {
        {"allowed.test", "allowed.test", false},
        {"ALLOWED.TEST.", "allowed.test", false},
        {"Allowed.Test", "allowed.test", false},
        {"allowed.test.evil.test", "allowed.test.evil.test", false},
        {"localhost", "localhost", false},
        {"a", "a", false},
        {"xn--bcher-kva.example", "xn--bcher-kva.example", false},
        {"_srv._tcp.example.com", "_srv._tcp.example.com", false},
        {"a-b.c-d.example", "a-b.c-d.example", false},
        {"1.example.com", "1.example.com", false},
        {"example.c0m", "example.c0m", false},
        {"0x7f.example", "0x7f.example", false},
        /* refused */
        {"", NULL, false},
        {".", NULL, false},
        {"..", NULL, false},
        {"allowed..test", NULL, false},
        {".allowed.test", NULL, false},
        {"allowed.test..", NULL, false},
        {"-a.test", NULL, false},
        {"a-.test", NULL, false},
        {"a.-test", NULL, false},
        {"a b", NULL, false},
        {" a", NULL, false},
        {"a\t", NULL, false},
        {"a\n", NULL, false},
        {"a%2e", NULL, false},
        {"a/b", NULL, false},
        {"a\\b", NULL, false},
        {"user@host", NULL, false},
        {"host:80", NULL, false},
        {"host#x", NULL, false},
        {"host?x", NULL, false},
        {"*.example.com", NULL, false},
        {"b\xc3\xbc" "cher.example", NULL, false},
        {"\xff.example", NULL, false},
        {"a\x7f", NULL, false},
        /* IP literals */
        {"1.2.3.4", "1.2.3.4", true},
        {"127.0.0.1", "127.0.0.1", true},
        {"0.0.0.0", "0.0.0.0", true},
        {"255.255.255.255", "255.255.255.255", true},
        {"[::1]", "::1", true},
        {"::1", "::1", true},
        {"[2001:DB8::1]", "2001:db8::1", true},
        {"2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1", true},
        {"::ffff:127.0.0.1", "::ffff:127.0.0.1", true},
        {"[::FFFF:7F00:1]", "::ffff:127.0.0.1", true},
        {"[fd00:ec2::254]", "fd00:ec2::254", true},
        /* IP literal spellings that are not the canonical text */
        {"[1.2.3.4]", NULL, false},
        {"1.2.3.4.", NULL, false},
        {"[::1", NULL, false},
        {"::1]", NULL, false},
        {"[::1]x", NULL, false},
        {"[::1]:80", NULL, false},
        {"[]", NULL, false},
        {"[[::1]]", NULL, false},
        {"fe80::1%eth0", NULL, false},
        {"[fe80::1%25eth0]", NULL, false},
        {"::1:", NULL, false},
        {":::1", NULL, false},
        /* numeric spellings a resolver reads as an address */
        {"0x7f.1", NULL, false},
        {"0x7f000001", NULL, false},
        {"0X7F.0.0.1", NULL, false},
        {"2130706433", NULL, false},
        {"127.1", NULL, false},
        {"127.0.1", NULL, false},
        {"0177.0.0.1", NULL, false},
        {"127.000.000.001", NULL, false},
        {"01.02.03.04", NULL, false},
        {"1.2.3.4.5", NULL, false},
        {"1.2.3.256", NULL, false},
        {"0", NULL, false},
        {"0x0", NULL, false},
        {"0x7f.0x0.0x0.0x1", NULL, false},
        {"example.123", NULL, false},
        {"example.123.", NULL, false},
        {"1.2.3.4.xip", "1.2.3.4.xip", false},
};

START_TEST(host_rows_test) {
        bool ip = !host_rows[_i].is_ip;
        _cleanup_free_ char *out = norm(host_rows[_i].in, &ip);
        if (!host_rows[_i].out) {
                ck_assert_msg(!out, "%s: accepted as %s", host_rows[_i].in, strnull(out));
                return;
        }
        ck_assert_msg(out, "%s: refused", host_rows[_i].in);
        ck_assert_str_eq(out, host_rows[_i].out);
        ck_assert_int_eq(ip, host_rows[_i].is_ip);
}
END_TEST

START_TEST(host_nul_inside) {
        static const char evil[] = "evil\0.allowed.test";
        char *out = NULL;
        bool ip = false;
        ck_assert_int_eq(net_host_normalize(evil, sizeof(evil) - 1, &out, &ip), -EINVAL);
        ck_assert_ptr_null(out);
        /* a NUL at the end, inside len */
        ck_assert_int_eq(net_host_normalize("allowed.test", sizeof("allowed.test"), &out, &ip), -EINVAL);
        ck_assert_int_eq(net_host_normalize("\0", 1, &out, &ip), -EINVAL);
        /* len is what counts, not the NUL: the first 7 bytes of "allowed.test" */
        ck_assert_int_eq(net_host_normalize("allowed.test", 7, &out, &ip), 0);
        ck_assert_str_eq(out, "allowed");
        free(out);
        out = NULL;
        ck_assert_int_eq(net_host_normalize("allowed.test", 0, &out, &ip), -EINVAL);
        ck_assert_int_eq(net_host_normalize(NULL, 0, &out, &ip), -EINVAL);
        ck_assert_ptr_null(out);
        /* the IP literal's bytes are counted by len too */
        ck_assert_int_eq(net_host_normalize("1.2.3.45", 7, &out, NULL), 0);
        ck_assert_str_eq(out, "1.2.3.4");
        free(out);
        out = NULL;
        ck_assert_int_eq(net_host_normalize("[::1]\0", 6, &out, NULL), -EINVAL);
        ck_assert_int_eq(net_host_normalize("1.2.3.4\0", 8, &out, NULL), -EINVAL);
        ck_assert_ptr_null(out);
}
END_TEST

/* n bytes of labels of 63 (or fewer at the end), dot-separated. */
static char *name_of_len(size_t n) {
        char *s = malloc(n + 1);
        ck_assert_ptr_nonnull(s);
        for (size_t i = 0; i < n; i++) s[i] = i % 64 == 63 ? '.' : 'a';
        if (s[n - 1] == '.') s[n - 1] = 'b';
        s[n] = 0;
        return s;
}

START_TEST(host_lengths) {
        _cleanup_free_ char *n253 = name_of_len(253), *n254 = name_of_len(254);
        _cleanup_free_ char *ok = norm(n253, NULL);
        ck_assert_ptr_nonnull(ok);
        ck_assert_str_eq(ok, n253);
        ck_assert_ptr_null(norm(n254, NULL));
        /* 253 bytes and a trailing dot is 253 */
        _cleanup_free_ char *n253dot = strdup_printf("%s.", n253);
        _cleanup_free_ char *ok2 = norm(n253dot, NULL);
        ck_assert_ptr_nonnull(ok2);
        ck_assert_str_eq(ok2, n253);
        _cleanup_free_ char *n254dot = strdup_printf("%s.", n254);
        ck_assert_ptr_null(norm(n254dot, NULL));

        char l63[64], l64[65];
        memset(l63, 'x', 63);
        l63[63] = 0;
        memset(l64, 'x', 64);
        l64[64] = 0;
        _cleanup_free_ char *a = strdup_printf("%s.test", l63), *b = strdup_printf("%s.test", l64);
        _cleanup_free_ char *c = strdup_printf("test.%s", l64), *d = strdup_printf("test.%s.x", l64);
        _cleanup_free_ char *na = norm(a, NULL);
        ck_assert_ptr_nonnull(na);
        ck_assert_ptr_null(norm(b, NULL));
        ck_assert_ptr_null(norm(c, NULL));
        ck_assert_ptr_null(norm(d, NULL));
        ck_assert_ptr_null(norm(l64, NULL));

        /* a huge input is refused, not read past */
        size_t big = 1 << 20;
        _cleanup_free_ char *huge = malloc(big);
        ck_assert_ptr_nonnull(huge);
        memset(huge, 'a', big);
        char *out = NULL;
        ck_assert_int_eq(net_host_normalize(huge, big, &out, NULL), -EINVAL);
        huge[0] = '[';
        ck_assert_int_eq(net_host_normalize(huge, big, &out, NULL), -EINVAL);
        memset(huge, ':', big);
        ck_assert_int_eq(net_host_normalize(huge, big, &out, NULL), -EINVAL);
        ck_assert_ptr_null(out);
}
END_TEST

/* Every byte value in a label: only letters, digits, '-' and '_' pass. */
START_TEST(host_every_byte) {
        for (int c = 0; c < 256; c++) {
                char s[] = {'a', (char) c, 'b', '.', 't', 'e', 's', 't'};
                char *out = NULL;
                int r = net_host_normalize(s, sizeof(s), &out, NULL);
                bool want = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                            c == '-' || c == '_';
                if (c == '.') want = true; /* "a.b.test" */
                ck_assert_msg((r == 0) == want, "byte 0x%02x: %d", c, r);
                free(out);
        }
}
END_TEST

/* ---- rules ---- */

static const struct {
        const char *text;
        const char *host; /* NULL: refused */
        uint16_t port;
        bool is_ip;
} rule_rows[] = {
        {"example.com", "example.com", 443, false},
        {"Example.COM.", "example.com", 443, false},
        {"example.com:8080", "example.com", 8080, false},
        {"example.com:1", "example.com", 1, false},
        {"example.com:65535", "example.com", 65535, false},
        {"localhost:3000", "localhost", 3000, false},
        {"*.example.com", "*.example.com", 443, false},
        {"*.Example.Com.:80", "*.example.com", 80, false},
        {"*.co.uk", "*.co.uk", 443, false},
        {"1.2.3.4", "1.2.3.4", 443, true},
        {"127.0.0.1:11434", "127.0.0.1", 11434, true},
        {"[::1]", "::1", 443, true},
        {"[::1]:8080", "::1", 8080, true},
        {"[2001:DB8::1]:22", "2001:db8::1", 22, true},
        {"[::ffff:127.0.0.1]:80", "::ffff:127.0.0.1", 80, true},
        {"https://api.example.com", "api.example.com", 443, false},
        {"https://api.example.com/", "api.example.com", 443, false},
        {"https://api.example.com/v1/chat?x=1#y", "api.example.com", 443, false},
        {"https://api.example.com?x=1", "api.example.com", 443, false},
        {"https://api.example.com#x", "api.example.com", 443, false},
        {"http://api.example.com", "api.example.com", 80, false},
        {"http://api.example.com:8080/v1", "api.example.com", 8080, false},
        {"HTTPS://API.example.com:8443", "api.example.com", 8443, false},
        {"http://127.0.0.1:11434/api", "127.0.0.1", 11434, true},
        {"http://[::1]:11434/", "::1", 11434, true},
        {"https://[2001:db8::1]", "2001:db8::1", 443, true},
        /* refused */
        {"", NULL, 0, false},
        {"*", NULL, 0, false},
        {"*:443", NULL, 0, false},
        {"*.", NULL, 0, false},
        {"*.com", NULL, 0, false},
        {"*.com.", NULL, 0, false},
        {"*.localhost:80", NULL, 0, false},
        {"*.*.example.com", NULL, 0, false},
        {"*example.com", NULL, 0, false},
        {"a*.example.com", NULL, 0, false},
        {"example.*", NULL, 0, false},
        {"*.1.2.3.4", NULL, 0, false},
        {"*.[::1]", NULL, 0, false},
        {"*..example.com", NULL, 0, false},
        {"example.com:0", NULL, 0, false},
        {"example.com:65536", NULL, 0, false},
        {"example.com:99999999999999999999", NULL, 0, false},
        {"example.com:-1", NULL, 0, false},
        {"example.com:+80", NULL, 0, false},
        {"example.com: 80", NULL, 0, false},
        {"example.com:80 ", NULL, 0, false},
        {"example.com:8o", NULL, 0, false},
        {"example.com:0x50", NULL, 0, false},
        {"example.com:", NULL, 0, false},
        {"example.com:80:80", NULL, 0, false},
        {":443", NULL, 0, false},
        {"example.com/path", NULL, 0, false},
        {"user@example.com", NULL, 0, false},
        {"::1", NULL, 0, false},
        {"2001:db8::1:443", NULL, 0, false},
        {"[::1]8080", NULL, 0, false},
        {"[::1]:", NULL, 0, false},
        {"[1.2.3.4]:80", NULL, 0, false},
        {"[example.com]:80", NULL, 0, false},
        {"0x7f.1:80", NULL, 0, false},
        {"127.1", NULL, 0, false},
        {"2130706433:80", NULL, 0, false},
        {"https://", NULL, 0, false},
        {"https:///path", NULL, 0, false},
        {"https://:443/", NULL, 0, false},
        {"https://user@example.com/", NULL, 0, false},
        {"https://user:pw@example.com/", NULL, 0, false},
        {"https://allowed.test@evil.test/", NULL, 0, false},
        {"https://evil.test\\@allowed.test/", NULL, 0, false},
        {"https://*.example.com/", NULL, 0, false},
        {"https://example.com:0/", NULL, 0, false},
        {"https://example.com:/", NULL, 0, false},
        {"ftp://example.com", NULL, 0, false},
        {"file:///etc/passwd", NULL, 0, false},
        {"https:example.com", NULL, 0, false},
        {"//example.com", NULL, 0, false},
        {" example.com", NULL, 0, false},
        {"example.com\n", NULL, 0, false},
};

START_TEST(rule_rows_test) {
        NetRule r = {};
        const char *why = NULL;
        int k = net_rule_parse(rule_rows[_i].text, &r, &why);
        if (!rule_rows[_i].host) {
                ck_assert_msg(k == -EINVAL, "%s: %d (%s:%u)", rule_rows[_i].text, k, strnull(r.host), r.port);
                ck_assert_ptr_nonnull(why);
                ck_assert_ptr_null(r.host);
                return;
        }
        ck_assert_msg(k == 0, "%s: %d %s", rule_rows[_i].text, k, strnull(why));
        ck_assert_str_eq(r.host, rule_rows[_i].host);
        ck_assert_int_eq(r.port, rule_rows[_i].port);
        ck_assert_int_eq(r.is_ip, rule_rows[_i].is_ip);

        /* its string form parses back to itself */
        _cleanup_free_ char *s = net_rule_to_string(&r);
        ck_assert_ptr_nonnull(s);
        NetRule back = {};
        ck_assert_int_eq(net_rule_parse(s, &back, &why), 0);
        ck_assert_str_eq(back.host, r.host);
        ck_assert_int_eq(back.port, r.port);
        ck_assert_int_eq(back.is_ip, r.is_ip);
        net_rule_done(&back);
        net_rule_done(&r);
        ck_assert_ptr_null(r.host);
}
END_TEST

START_TEST(rule_to_string) {
        NetRule r = {};
        const char *why = NULL;
        ck_assert_int_eq(net_rule_parse("[2001:db8::1]", &r, &why), 0);
        _cleanup_free_ char *a = net_rule_to_string(&r);
        ck_assert_str_eq(a, "[2001:db8::1]:443");
        net_rule_done(&r);
        ck_assert_int_eq(net_rule_parse("http://Example.com", &r, &why), 0);
        _cleanup_free_ char *b = net_rule_to_string(&r);
        ck_assert_str_eq(b, "example.com:80");
        net_rule_done(&r);
        ck_assert_int_eq(net_rule_parse("*.example.com:8443", &r, &why), 0);
        _cleanup_free_ char *c = net_rule_to_string(&r);
        ck_assert_str_eq(c, "*.example.com:8443");
        net_rule_done(&r);
        ck_assert_int_eq(net_rule_parse("10.0.0.1:5432", &r, &why), 0);
        _cleanup_free_ char *d = net_rule_to_string(&r);
        ck_assert_str_eq(d, "10.0.0.1:5432");
        net_rule_done(&r);
        net_rule_done(&r);
        ck_assert_int_eq(net_rule_parse(NULL, &r, &why), -EINVAL);
        ck_assert_int_eq(net_rule_parse("*.com", &r, NULL), -EINVAL);
        ck_assert_int_eq(net_rule_parse("*.com", &r, &why), -EINVAL);
        ck_assert(strstr(why, "two labels"));
        ck_assert_int_eq(net_rule_parse("https://allowed.test@evil.test/", &r, &why), -EINVAL);
        ck_assert(strstr(why, "user info"));
        ck_assert_int_eq(net_rule_parse("example.com:0", &r, &why), -EINVAL);
        ck_assert(strstr(why, "port"));
}
END_TEST

/* ---- policies ---- */

START_TEST(policy_add) {
        NetPolicy p = {.mode = NET_MODE_PROXY};
        NetRule r = {};
        const char *why = NULL;
        ck_assert_int_eq(net_rule_parse("example.com", &r, &why), 0);
        ck_assert_int_eq(net_policy_add(&p, &r), 0);
        ck_assert_int_eq(net_policy_add(&p, &r), 0);
        ck_assert_uint_eq(p.n_rules, 1);
        ck_assert_ptr_ne(p.rules[0].host, r.host); /* a copy */
        r.port = 80;
        ck_assert_int_eq(net_policy_add(&p, &r), 0);
        ck_assert_uint_eq(p.n_rules, 2);
        net_rule_done(&r);

        NetRule bad = {.host = (char *) "example.org", .port = 0};
        ck_assert_int_eq(net_policy_add(&p, &bad), -EINVAL);
        bad = (NetRule) {.host = NULL, .port = 1};
        ck_assert_int_eq(net_policy_add(&p, &bad), -EINVAL);

        for (unsigned i = 0; p.n_rules < NET_POLICY_MAX_RULES; i++) {
                _cleanup_free_ char *t = strdup_printf("h%u.example.com", i);
                ck_assert_int_eq(net_rule_parse(t, &r, &why), 0);
                ck_assert_int_eq(net_policy_add(&p, &r), 0);
                net_rule_done(&r);
        }
        ck_assert_int_eq(net_rule_parse("one-more.example.com", &r, &why), 0);
        ck_assert_int_eq(net_policy_add(&p, &r), -E2BIG);
        net_rule_done(&r);
        /* a duplicate is still fine when full */
        ck_assert_int_eq(net_rule_parse("example.com", &r, &why), 0);
        ck_assert_int_eq(net_policy_add(&p, &r), 0);
        net_rule_done(&r);
        ck_assert_uint_eq(p.n_rules, NET_POLICY_MAX_RULES);

        NetPolicy q = {};
        ck_assert_int_eq(net_policy_copy(&p, &q), 0);
        ck_assert_int_eq(q.mode, NET_MODE_PROXY);
        ck_assert_uint_eq(q.n_rules, p.n_rules);
        for (size_t i = 0; i < q.n_rules; i++) {
                ck_assert_str_eq(q.rules[i].host, p.rules[i].host);
                ck_assert_ptr_ne(q.rules[i].host, p.rules[i].host);
                ck_assert_int_eq(q.rules[i].port, p.rules[i].port);
        }
        net_policy_done(&p);
        ck_assert_uint_eq(p.n_rules, 0);
        ck_assert_ptr_null(p.rules);
        net_policy_done(&p);
        net_policy_done(&q);
}
END_TEST

START_TEST(policy_add_strv) {
        NetPolicy p = {.mode = NET_MODE_PROXY};
        const char *bad = NULL, *why = NULL;
        ck_assert_int_eq(net_policy_add_strv(&p, NULL, &bad, &why), 0);
        ck_assert_uint_eq(p.n_rules, 0);
        char *good[] = {(char *) "example.com", (char *) "*.example.org:80", (char *) "example.com", NULL};
        ck_assert_int_eq(net_policy_add_strv(&p, good, &bad, &why), 0);
        ck_assert_uint_eq(p.n_rules, 2);
        char *mixed[] = {(char *) "a.example.net", (char *) "*.net", (char *) "b.example.net", NULL};
        ck_assert_int_eq(net_policy_add_strv(&p, mixed, &bad, &why), -EINVAL);
        ck_assert_ptr_eq(bad, mixed[1]);
        ck_assert_ptr_nonnull(why);
        ck_assert_uint_eq(p.n_rules, 2); /* all or nothing */
        ck_assert(!net_policy_match(&p, "a.example.net", 443));
        net_policy_done(&p);

        _cleanup_strv_free_ char **many = NULL;
        for (unsigned i = 0; i <= NET_POLICY_MAX_RULES; i++) ck_assert_int_eq(strv_pushf(&many, "h%u.example", i), 0);
        p.mode = NET_MODE_PROXY;
        ck_assert_int_eq(net_policy_add_strv(&p, many, &bad, &why), -E2BIG);
        ck_assert_ptr_eq(bad, many[NET_POLICY_MAX_RULES]);
        ck_assert_uint_eq(p.n_rules, 0);
        net_policy_done(&p);
}
END_TEST

START_TEST(policy_match) {
        NetPolicy p;
        policy_of(&p, NET_MODE_PROXY, "allowed.test", "*.wild.test", "api.example.com:8080", "10.0.0.1:5432",
                  "[fd00::1]:80", NULL);

        ck_assert(net_policy_match(&p, "allowed.test", 443));
        ck_assert(!net_policy_match(&p, "allowed.test", 80));
        /* no substring, no suffix without a dot boundary, no prefix */
        ck_assert(!net_policy_match(&p, "allowed.test.evil.test", 443));
        ck_assert(!net_policy_match(&p, "evilallowed.test", 443));
        ck_assert(!net_policy_match(&p, "evil.allowed.test", 443));
        ck_assert(!net_policy_match(&p, "allowed.tes", 443));
        ck_assert(!net_policy_match(&p, "allowed", 443));
        /* not normalized: nothing matches */
        ck_assert(!net_policy_match(&p, "ALLOWED.TEST", 443));
        ck_assert(!net_policy_match(&p, "allowed.test.", 443));
        ck_assert(!net_policy_match(&p, "x/.wild.test", 443));
        ck_assert(!net_policy_match(&p, "x..wild.test", 443));
        ck_assert(!net_policy_match(&p, ".wild.test", 443));
        ck_assert(!net_policy_match(&p, "", 443));
        ck_assert(!net_policy_match(&p, NULL, 443));
        ck_assert(!net_policy_match(NULL, "allowed.test", 443));

        /* wildcards: strictly below */
        ck_assert(net_policy_match(&p, "a.wild.test", 443));
        ck_assert(net_policy_match(&p, "a.b.c.wild.test", 443));
        ck_assert(!net_policy_match(&p, "wild.test", 443));
        ck_assert(!net_policy_match(&p, "evilwild.test", 443));
        ck_assert(!net_policy_match(&p, "a.wild.test.evil", 443));
        ck_assert(!net_policy_match(&p, "a.wild.test", 80));
        ck_assert(!net_policy_match(&p, "*.wild.test", 443));
        ck_assert(!net_policy_match(&p, "A.wild.test", 443));
        ck_assert(!net_policy_match(&p, "a.WILD.test", 443));
        ck_assert(!net_policy_match(&p, "a.wild.test.", 443));

        ck_assert(net_policy_match(&p, "api.example.com", 8080));
        ck_assert(!net_policy_match(&p, "api.example.com", 443));

        /* IP literals only against IP rules, exact text */
        ck_assert(net_policy_match(&p, "10.0.0.1", 5432));
        ck_assert(!net_policy_match(&p, "10.0.0.1", 443));
        ck_assert(!net_policy_match(&p, "::ffff:10.0.0.1", 5432));
        ck_assert(!net_policy_match(&p, "010.0.0.1", 5432));
        ck_assert(net_policy_match(&p, "fd00::1", 80));
        ck_assert(!net_policy_match(&p, "[fd00::1]", 80));
        ck_assert(!net_policy_match(&p, "fd00:0::1", 80));
        net_policy_done(&p);

        /* a wildcard rule does not match an IP literal below it in text */
        policy_of(&p, NET_MODE_PROXY, "*.example.com", NULL);
        ck_assert(net_policy_match(&p, "www.example.com", 443));
        net_policy_done(&p);

        /* the whole chain, from a hostile name to the rule */
        policy_of(&p, NET_MODE_PROXY, "allowed.test", NULL);
        static const char evil[] = "evil\0.allowed.test";
        char *h = NULL;
        ck_assert_int_lt(net_host_normalize(evil, sizeof(evil) - 1, &h, NULL), 0);
        ck_assert_int_eq(net_host_normalize("ALLOWED.TEST.", 13, &h, NULL), 0);
        ck_assert(net_policy_match(&p, h, 443));
        free(h);

        /* mode none matches nothing */
        p.mode = NET_MODE_NONE;
        ck_assert(!net_policy_match(&p, "allowed.test", 443));
        net_policy_done(&p);
}
END_TEST

START_TEST(policy_covers) {
        NetPolicy parent, child;
        const NetRule *u = NULL;
        policy_of(&parent, NET_MODE_PROXY, "*.example.com", "api.test", "10.0.0.1:5432", "[::1]:80", NULL);

        policy_of(&child, NET_MODE_PROXY, "*.example.com", "*.a.example.com", "x.example.com", "api.test",
                  "10.0.0.1:5432", "[::1]:80", NULL);
        ck_assert(net_policy_covers(&parent, &child, &u));
        ck_assert(net_policy_covers(&parent, &child, NULL));
        net_policy_done(&child);

        static const char *const uncovered[] = {
                "example.com",     /* the suffix itself is not below it */
                "x.example.com:80", /* port */
                "*.com.example.com:80",
                "evilexample.com",
                "x.api.test",
                "*.api.test",
                "10.0.0.2:5432",
                "10.0.0.1:5433",
                "[::ffff:10.0.0.1]:5432",
                "[::2]:80",
        };
        for (size_t i = 0; i < ELEMENTSOF(uncovered); i++) {
                policy_of(&child, NET_MODE_PROXY, "a.example.com", uncovered[i], NULL);
                u = NULL;
                ck_assert_msg(!net_policy_covers(&parent, &child, &u), "%s covered", uncovered[i]);
                ck_assert_ptr_eq(u, &child.rules[1]);
                net_policy_done(&child);
        }

        /* a wider wildcard in the child */
        NetPolicy narrow;
        policy_of(&narrow, NET_MODE_PROXY, "*.a.example.com", NULL);
        policy_of(&child, NET_MODE_PROXY, "*.example.com", NULL);
        ck_assert(!net_policy_covers(&narrow, &child, &u));
        ck_assert_ptr_eq(u, &child.rules[0]);
        ck_assert(net_policy_covers(&child, &narrow, &u));
        net_policy_done(&child);
        net_policy_done(&narrow);

        /* modes */
        policy_of(&child, NET_MODE_HOST, NULL);
        u = &parent.rules[0];
        ck_assert(!net_policy_covers(&parent, &child, &u));
        ck_assert_ptr_null(u);
        child.mode = NET_MODE_NONE;
        ck_assert(net_policy_covers(&parent, &child, &u));
        child.mode = NET_MODE_PROXY;
        ck_assert(net_policy_covers(&parent, &child, &u)); /* no rules */
        parent.mode = NET_MODE_NONE;
        ck_assert(!net_policy_covers(&parent, &child, &u));
        parent.mode = NET_MODE_HOST;
        child.mode = NET_MODE_HOST;
        ck_assert(net_policy_covers(&parent, &child, &u));
        net_policy_done(&child);
        policy_of(&child, NET_MODE_PROXY, "anything.test", NULL);
        ck_assert(net_policy_covers(&parent, &child, &u));
        net_policy_done(&child);
        net_policy_done(&parent);
}
END_TEST

static int check(const NetPolicy *p, uint16_t port, const char *addr, const struct sockaddr_storage *own,
                 size_t n_own, const char **why) {
        struct sockaddr_storage ss;
        *why = NULL;
        int r = net_policy_check_addr(p, port, sa_of(addr, &ss), own, n_own, why);
        if (r < 0) {
                ck_assert_int_eq(r, -EACCES);
                ck_assert_ptr_nonnull(*why);
        }
        return r;
}

START_TEST(policy_check_addr) {
        NetPolicy p;
        const char *why;
        policy_of(&p, NET_MODE_PROXY, "api.example.com", "127.0.0.1:11434", "[::1]:8080", "169.254.169.254:80",
                  NULL);

        ck_assert_int_eq(check(&p, 443, "8.8.8.8", NULL, 0, &why), 0);
        ck_assert_ptr_null(why);
        ck_assert_int_eq(check(&p, 443, "2606:4700::1111", NULL, 0, &why), 0);

        ck_assert_int_eq(check(&p, 443, "127.0.0.1", NULL, 0, &why), -EACCES);
        ck_assert_str_eq(why, "resolves to a loopback address");
        ck_assert_int_eq(check(&p, 443, "127.0.0.2", NULL, 0, &why), -EACCES);
        ck_assert_int_eq(check(&p, 443, "::1", NULL, 0, &why), -EACCES);
        ck_assert_str_eq(why, "resolves to a loopback address");
        ck_assert_int_eq(check(&p, 443, "::ffff:127.0.0.1", NULL, 0, &why), -EACCES);
        ck_assert_str_eq(why, "resolves to a loopback address");
        ck_assert_int_eq(check(&p, 443, "64:ff9b::7f00:1", NULL, 0, &why), -EACCES);
        ck_assert_int_eq(check(&p, 443, "169.254.169.254", NULL, 0, &why), -EACCES);
        ck_assert_str_eq(why, "resolves to a link-local address");
        ck_assert_int_eq(check(&p, 443, "fd00:ec2::254", NULL, 0, &why), -EACCES);
        ck_assert_str_eq(why, "resolves to a link-local address");
        ck_assert_int_eq(check(&p, 443, "10.1.1.1", NULL, 0, &why), -EACCES);
        ck_assert_str_eq(why, "resolves to a private address");
        ck_assert_int_eq(check(&p, 443, "100.64.0.1", NULL, 0, &why), -EACCES);
        ck_assert(strstr(why, "carrier-grade NAT"));
        ck_assert_int_eq(check(&p, 443, "fc00::1", NULL, 0, &why), -EACCES);
        ck_assert(strstr(why, "unique local"));
        ck_assert_int_eq(check(&p, 443, "224.0.0.1", NULL, 0, &why), -EACCES);
        ck_assert(strstr(why, "multicast"));
        ck_assert_int_eq(check(&p, 443, "0.0.0.0", NULL, 0, &why), -EACCES);
        ck_assert(strstr(why, "unspecified"));
        ck_assert_int_eq(check(&p, 443, "::", NULL, 0, &why), -EACCES);

        /* a rule naming the address with this port allows it */
        ck_assert_int_eq(check(&p, 11434, "127.0.0.1", NULL, 0, &why), 0);
        ck_assert_int_eq(check(&p, 11435, "127.0.0.1", NULL, 0, &why), -EACCES);
        ck_assert_int_eq(check(&p, 11434, "127.0.0.2", NULL, 0, &why), -EACCES);
        ck_assert_int_eq(check(&p, 11434, "::ffff:127.0.0.1", NULL, 0, &why), -EACCES);
        ck_assert_int_eq(check(&p, 8080, "::1", NULL, 0, &why), 0);
        ck_assert_int_eq(check(&p, 80, "169.254.169.254", NULL, 0, &why), 0);
        ck_assert_int_eq(check(&p, 80, "fd00:ec2::254", NULL, 0, &why), -EACCES);

        /* the host's own addresses */
        struct sockaddr_storage own[3];
        sa_of("203.0.113.5", &own[0]);
        sa_of("2001:db8::5", &own[1]);
        sa_of("198.51.100.7", &own[2]);
        ck_assert_int_eq(check(&p, 443, "203.0.113.5", own, 3, &why), -EACCES);
        ck_assert_str_eq(why, "resolves to one of this host's addresses");
        ck_assert_int_eq(check(&p, 443, "198.51.100.7", own, 3, &why), -EACCES);
        ck_assert_int_eq(check(&p, 443, "198.51.100.7", own, 2, &why), 0);
        ck_assert_int_eq(check(&p, 443, "2001:db8::5", own, 3, &why), -EACCES);
        ck_assert_int_eq(check(&p, 443, "::ffff:203.0.113.5", own, 3, &why), -EACCES);
        ck_assert_int_eq(check(&p, 443, "64:ff9b::203.0.113.5", own, 3, &why), -EACCES);
        ck_assert_int_eq(check(&p, 443, "203.0.113.6", own, 3, &why), 0);
        ck_assert_int_eq(check(&p, 443, "2001:db8::6", own, 3, &why), 0);
        /* an own address given as IPv4-mapped is that IPv4 address */
        sa_of("::ffff:192.0.2.9", &own[0]);
        ck_assert_int_eq(check(&p, 443, "192.0.2.9", own, 1, &why), -EACCES);
        /* ports are ignored */
        ((struct sockaddr_in *) &own[2])->sin_port = htons(1);
        ck_assert_int_eq(check(&p, 443, "198.51.100.7", own, 3, &why), -EACCES);
        /* a rule naming an own address allows it */
        net_policy_done(&p);
        policy_of(&p, NET_MODE_PROXY, "198.51.100.7:443", NULL);
        ck_assert_int_eq(check(&p, 443, "198.51.100.7", own, 3, &why), 0);

        /* another family, mode none */
        struct sockaddr_un un = {.sun_family = AF_UNIX};
        why = NULL;
        ck_assert_int_eq(net_policy_check_addr(&p, 443, (const struct sockaddr *) &un, NULL, 0, &why), -EACCES);
        ck_assert_ptr_nonnull(why);
        ck_assert_int_eq(net_policy_check_addr(&p, 443, NULL, NULL, 0, NULL), -EACCES);
        p.mode = NET_MODE_NONE;
        ck_assert_int_eq(check(&p, 443, "198.51.100.7", NULL, 0, &why), -EACCES);
        ck_assert_int_eq(check(&p, 443, "8.8.8.8", NULL, 0, &why), -EACCES);
        struct sockaddr_storage ss;
        ck_assert_int_eq(net_policy_check_addr(&p, 443, sa_of("8.8.8.8", &ss), NULL, 0, NULL), -EACCES);
        net_policy_done(&p);
}
END_TEST

/* ---- JSON ---- */

static int from_text(const char *text, NetPolicy *ret) {
        _cleanup_json_ json_object *j = NULL;
        ck_assert_int_eq(json_parse_strict(text, strlen(text), &j), 0);
        return net_policy_from_json(j, ret);
}

START_TEST(policy_json) {
        NetPolicy p;
        policy_of(&p, NET_MODE_PROXY, "api.example.com", "*.example.org:80", "[::1]:8080", "10.0.0.1:5432", NULL);
        _cleanup_json_ json_object *j = NULL;
        ck_assert_int_eq(net_policy_to_json(&p, &j), 0);
        ck_assert_str_eq(json_to_line(j, NULL), "{\"mode\":\"proxy\",\"allow\":[\"api.example.com:443\","
                                                "\"*.example.org:80\",\"[::1]:8080\",\"10.0.0.1:5432\"]}");
        NetPolicy q;
        ck_assert_int_eq(net_policy_from_json(j, &q), 0);
        ck_assert_int_eq(q.mode, NET_MODE_PROXY);
        ck_assert_uint_eq(q.n_rules, p.n_rules);
        for (size_t i = 0; i < q.n_rules; i++) {
                ck_assert_str_eq(q.rules[i].host, p.rules[i].host);
                ck_assert_int_eq(q.rules[i].port, p.rules[i].port);
                ck_assert_int_eq(q.rules[i].is_ip, p.rules[i].is_ip);
        }
        net_policy_done(&q);
        net_policy_done(&p);

        ck_assert_int_eq(from_text("{\"mode\":\"none\"}", &q), 0);
        ck_assert_int_eq(q.mode, NET_MODE_NONE);
        ck_assert_uint_eq(q.n_rules, 0);
        net_policy_done(&q);
        ck_assert_int_eq(from_text("{\"mode\":\"host\",\"allow\":[]}", &q), 0);
        ck_assert_int_eq(q.mode, NET_MODE_HOST);
        net_policy_done(&q);

        static const char *const bad[] = {
                "[]",
                "null",
                "\"proxy\"",
                "{}",
                "{\"allow\":[]}",
                "{\"mode\":\"Proxy\"}",
                "{\"mode\":\"\"}",
                "{\"mode\":null}",
                "{\"mode\":1}",
                "{\"mode\":\"proxy\\u0000\"}",
                "{\"mode\":\"proxy\",\"allow\":null}",
                "{\"mode\":\"proxy\",\"allow\":\"a.test\"}",
                "{\"mode\":\"proxy\",\"allow\":{}}",
                "{\"mode\":\"proxy\",\"allow\":[1]}",
                "{\"mode\":\"proxy\",\"allow\":[null]}",
                "{\"mode\":\"proxy\",\"allow\":[\"\"]}",
                "{\"mode\":\"proxy\",\"allow\":[\"*.com\"]}",
                "{\"mode\":\"proxy\",\"allow\":[\"evil\\u0000.allowed.test\"]}",
                "{\"mode\":\"proxy\",\"allow\":[\"allowed.test\\u0000\"]}",
                "{\"mode\":\"proxy\",\"allow\":[\"ok.test\",\"127.1\"]}",
                "{\"mode\":\"proxy\",\"allow\":[],\"extra\":1}",
                "{\"mode\":\"proxy\",\"Allow\":[]}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                q = (NetPolicy) {.mode = NET_MODE_HOST, .n_rules = 7};
                int r = from_text(bad[i], &q);
                ck_assert_msg(r == -EINVAL, "%s: %d", bad[i], r);
                ck_assert_uint_eq(q.n_rules, 0);
                ck_assert_ptr_null(q.rules);
        }
        ck_assert_int_eq(net_policy_from_json(NULL, &q), -EINVAL);

        /* too many */
        _cleanup_json_ json_object *big = json_object_new_object(), *arr = json_object_new_array();
        ck_assert_int_eq(json_add_string(big, "mode", "proxy"), 0);
        for (unsigned i = 0; i <= NET_POLICY_MAX_RULES; i++) {
                _cleanup_free_ char *t = strdup_printf("h%u.example", i);
                json_object_array_add(arr, json_object_new_string(t));
        }
        ck_assert_int_eq(json_add(big, "allow", json_object_get(arr)), 0);
        ck_assert_int_eq(net_policy_from_json(big, &q), -E2BIG);
        ck_assert_ptr_null(q.rules);
        json_object_array_del_idx(arr, 0, 1);
        ck_assert_int_eq(net_policy_from_json(big, &q), 0);
        ck_assert_uint_eq(q.n_rules, NET_POLICY_MAX_RULES);
        net_policy_done(&q);
}
END_TEST

int main(void) {
        Suite *s = suite_create("net-policy");
        tf_tcase(s, "modes", NULL, NULL, 0, TF_TESTS(mode_names, classify_other_family));
        TCase *tc = tf_tcase(s, "classify", NULL, NULL, 0, NULL);
        TF_LOOP(tc, classify_rows, class_rows);
        tc = tf_tcase(s, "hosts", NULL, NULL, 0, TF_TESTS(host_nul_inside, host_lengths, host_every_byte));
        TF_LOOP(tc, host_rows_test, host_rows);
        tc = tf_tcase(s, "rules", NULL, NULL, 0, TF_TESTS(rule_to_string));
        TF_LOOP(tc, rule_rows_test, rule_rows);
        tf_tcase(s, "policies", NULL, NULL, 0,
                 TF_TESTS(policy_add, policy_add_strv, policy_match, policy_covers, policy_check_addr, policy_json));
        return tf_run_suite(s);
}
