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
#include <dirent.h>
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

/* The proxy stopped taking or answering connections: say what the process
 * holds (open fds, threads and what they wait in), then abort. */
static _Noreturn void proxy_stuck(const char *what, int e) {
        size_t fds = 0;
        DIR *d = opendir("/proc/self/fd");
        for (struct dirent *de; d && (de = readdir(d));) fds++;
        if (d) closedir(d);
        fprintf(stderr, "%s: %s; %zu fds open\n", what, e ? strerror(e) : "no answer", fds);
        char cmd[128];
        snprintf(cmd, sizeof cmd, "grep Threads /proc/%d/status; cat /proc/%d/task/*/wchan | sort | uniq -c", getpid(), getpid());
        (void) system(cmd);
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 20000) return 0; /* past the head limit: one more 400 */
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        fuzz_check(fd >= 0);
        /* libFuzzer's SIGALRM (its -timeout clock) interrupts calls here: a
         * connect it interrupts goes on, and is waited for */
        if (connect(fd, (struct sockaddr *) &proxy_addr, sizeof proxy_addr) < 0) {
                int e = errno;
                if (e != EINTR) proxy_stuck("connect to the proxy", e);
                struct pollfd w = {.fd = fd, .events = POLLOUT};
                while (poll(&w, 1, -1) < 0)
                        if (errno != EINTR) proxy_stuck("connect to the proxy", errno);
                socklen_t el = sizeof e;
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 || e != 0) proxy_stuck("connect to the proxy", e);
        }
        for (size_t off = 0; off < size;) {
                ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) break; /* the proxy answered and closed already */
                off += (size_t) n;
        }
        (void) shutdown(fd, SHUT_WR);
        char reply[512];
        size_t got = 0;
        for (;;) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                int k = poll(&p, 1, 20000);
                if (k < 0 && errno == EINTR) continue;
                if (k <= 0) proxy_stuck("an answer (or a close) within 20 s", k < 0 ? errno : 0);
                char buf[4096];
                ssize_t n = recv(fd, buf, sizeof buf, 0);
                if (n < 0 && errno == EINTR) continue;
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
