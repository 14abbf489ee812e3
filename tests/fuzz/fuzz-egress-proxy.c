/* The task's egress proxy, the one way out of a sandbox in network mode
 * "proxy": what a hostile worker writes to it (an HTTP request head,
 * CONNECT, absolute-form HTTP, SOCKS5). The proxy runs in a thread of this
 * process (egress_proxy_run: its parse and its decisions are what is
 * measured) on a loopback listener, with a policy of one rule,
 * 127.0.0.1:9 (a closed port: an allowed connect is refused, so no input
 * reaches anything; a name is never allowed, so nothing is resolved). Each
 * input is one connection: the bytes, the end of the writes, then the
 * answer read to its end. Checked: the proxy answers every input with an
 * HTTP status line or a SOCKS5 reply (or closes), and stays up to take the
 * next one. */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress-proxy.h"
#include "fuzz.h"
#include "net-policy.h"

static struct sockaddr_in proxy_addr;
static NetPolicy policy = {.mode = NET_MODE_PROXY};
static EgressConfig config;

static void *proxy_thread(void *arg) {
        int r = egress_proxy_run(&config);
        fprintf(stderr, "egress_proxy_run returned %d\n", r);
        abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
        NetRule rule = {};
        const char *why = NULL;
        fuzz_check(net_rule_parse("127.0.0.1:9", &rule, &why) == 0);
        fuzz_check(net_policy_add(&policy, &rule) == 0);
        net_rule_done(&rule);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        fuzz_check(fd >= 0);
        proxy_addr = (struct sockaddr_in) {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        fuzz_check(bind(fd, (struct sockaddr *) &proxy_addr, sizeof proxy_addr) == 0 && listen(fd, 64) == 0);
        socklen_t sl = sizeof proxy_addr;
        fuzz_check(getsockname(fd, (struct sockaddr *) &proxy_addr, &sl) == 0);
        config = (EgressConfig) {.listen_fd = fd, .policy = &policy, .task_id = "oc_fuzz_00000000"};
        pthread_t t;
        fuzz_check(pthread_create(&t, NULL, proxy_thread, NULL) == 0);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 20000) return 0; /* past the head limit: one more 400 */
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        fuzz_check(fd >= 0);
        fuzz_check(connect(fd, (struct sockaddr *) &proxy_addr, sizeof proxy_addr) == 0);
        for (size_t off = 0; off < size;) {
                ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
                if (n <= 0) break; /* the proxy answered and closed already */
                off += (size_t) n;
        }
        (void) shutdown(fd, SHUT_WR);
        char reply[512];
        size_t got = 0;
        for (;;) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                int k = poll(&p, 1, 20000);
                fuzz_check(k > 0); /* an answer (or a close) within 20 s */
                char buf[4096];
                ssize_t n = recv(fd, buf, sizeof buf, 0);
                if (n <= 0) break;
                size_t take = got + (size_t) n > sizeof reply ? sizeof reply - got : (size_t) n;
                memcpy(reply + got, buf, take);
                got += take;
        }
        close(fd);
        if (got > 0) {
                bool http = got >= 9 && memcmp(reply, "HTTP/1.1 ", 9) == 0;
                bool socks = reply[0] == 0x05;
                fuzz_check(http || socks);
        }
        return 0;
}
