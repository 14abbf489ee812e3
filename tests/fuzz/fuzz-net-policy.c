/* The network policy's rules (dispatch --allow-host, config.json
 * allowHosts, .taskferry.toml allowHosts, a launch spec's "network") and
 * the host names a worker asks its egress proxy for. Each input line is a
 * rule and a host name; the whole input, when JSON, a policy object.
 * Checked: a parsed rule prints as text that parses to the same rule; a
 * normalized host normalizes to itself; a policy covers itself and matches
 * its own exact rules; its JSON form reads back to the same form; the first
 * 16 bytes of a line, as an IPv6 and an IPv4 address, are classified and
 * judged without failing. */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <json-c/json.h>

#include "fuzz.h"
#include "json-util.h"
#include "net-policy.h"

static void one_line(void *userdata, const char *line, size_t len, bool newline) {
        NetPolicy *p = userdata;
        char *host = NULL;
        bool is_ip = false;
        int r = net_host_normalize(line, len, &host, &is_ip);
        fuzz_check(r == 0 || r == -EINVAL || r == -ENOMEM);
        if (r == 0) {
                char *again = NULL;
                bool again_ip = false;
                fuzz_check(net_host_normalize(host, strlen(host), &again, &again_ip) == 0);
                fuzz_check(strcmp(host, again) == 0 && is_ip == again_ip);
                free(again);
                free(host);
        }
        uint16_t port;
        if (net_port_parse(line, len, &port) == 0) fuzz_check(port >= 1);

        if (memchr(line, 0, len)) return;
        char *text = strndup(line, len);
        fuzz_check(text);
        NetRule rule = {};
        const char *why = NULL;
        r = net_rule_parse(text, &rule, &why);
        fuzz_check(r == 0 || r == -ENOMEM || (r == -EINVAL && why));
        if (r == 0) {
                fuzz_check(rule.host && rule.port >= 1);
                char *s = net_rule_to_string(&rule);
                fuzz_check(s);
                NetRule back = {};
                fuzz_check(net_rule_parse(s, &back, &why) == 0);
                fuzz_check(strcmp(back.host, rule.host) == 0 && back.port == rule.port && back.is_ip == rule.is_ip);
                net_rule_done(&back);
                free(s);
                r = net_policy_add(p, &rule);
                fuzz_check(r == 0 || r == -E2BIG || r == -ENOMEM);
                if (r == 0 && rule.host[0] != '*') fuzz_check(net_policy_match(p, rule.host, rule.port));
                net_rule_done(&rule);
        }
        free(text);

        uint8_t raw[16] = {};
        memcpy(raw, line, len < 16 ? len : 16);
        struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(443)};
        memcpy(&a6.sin6_addr, raw, 16);
        struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(443)};
        memcpy(&a4.sin_addr, raw, 4);
        struct sockaddr_storage own[2] = {};
        memcpy(&own[0], &a4, sizeof a4);
        memcpy(&own[1], &a6, sizeof a6);
        fuzz_check(net_addr_classify((struct sockaddr *) &a6) >= 0);
        fuzz_check(net_addr_classify((struct sockaddr *) &a4) >= 0);
        const char *reason = NULL;
        r = net_policy_check_addr(p, 443, (struct sockaddr *) &a6, own, 1, &reason);
        fuzz_check(r == 0 || (r == -EACCES && reason));
        r = net_policy_check_addr(p, 443, (struct sockaddr *) &a4, own + 1, 1, &reason);
        fuzz_check(r == 0 || (r == -EACCES && reason));
}

static char *policy_line(const NetPolicy *p) {
        json_object *j = NULL;
        fuzz_check(net_policy_to_json(p, &j) == 0);
        char *s = strdup(json_to_line(j, NULL));
        json_object_put(j);
        fuzz_check(s);
        return s;
}

/* p's JSON form reads back (net_policy_from_json) to the same form */
static void policy_round_trip(const NetPolicy *p) {
        char *a = policy_line(p);
        json_object *j = NULL;
        fuzz_check(json_parse_strict(a, strlen(a), &j) == 0);
        NetPolicy back = {};
        fuzz_check(net_policy_from_json(j, &back) == 0);
        char *b = policy_line(&back);
        fuzz_check(strcmp(a, b) == 0);
        json_object_put(j);
        net_policy_done(&back);
        free(a);
        free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        NetPolicy p = {.mode = NET_MODE_PROXY};
        fuzz_lines(data, size, one_line, &p);
        const NetRule *uncovered = NULL;
        fuzz_check(net_policy_covers(&p, &p, &uncovered));
        NetPolicy copy = {};
        fuzz_check(net_policy_copy(&p, &copy) == 0);
        char *a = policy_line(&p), *b = policy_line(&copy);
        fuzz_check(strcmp(a, b) == 0);
        free(a);
        free(b);
        policy_round_trip(&p);
        net_policy_done(&copy);
        net_policy_done(&p);

        /* the input as a policy object (a launch spec's "network", a task record's) */
        json_object *j = NULL;
        if (json_parse_strict((const char *) data, size, &j) == 0) {
                NetPolicy q = {};
                int r = net_policy_from_json(j, &q);
                fuzz_check(r == 0 || r == -EINVAL || r == -E2BIG || r == -ENOMEM);
                if (r == 0) policy_round_trip(&q);
                net_policy_done(&q);
                json_object_put(j);
        }
        return 0;
}
