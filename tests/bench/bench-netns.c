/* Benchmark: what a sandbox's own network costs a launch (figures only;
 * never a pass/fail timing). Each iteration forks a child as the shim forks
 * its worker child and, in it:
 *   - "fork only": exits (the floor);
 *   - "netns": unshare(CLONE_NEWNET) and lo up (netns.h netns_enter);
 *   - "netns + listener": that, the proxy's listener at 127.0.0.1:3128, and
 *     the listener handed to the parent over a socket pair (SCM_RIGHTS), as
 *     in mode proxy;
 * an unprivileged caller first enters a user namespace of its own, as the
 * shim does (overlay.h userns_enter_as_root), in every variant, so the
 * difference is the network's. Prints the median and the 90th percentile
 * per variant and the added cost of each over the floor.
 * Usage: bench-netns [iterations, default 200] */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "netns.h"
#include "overlay.h"

static double now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

enum { FORK_ONLY, NETNS, NETNS_LISTENER, N_VARIANTS };
static const char *const names[N_VARIANTS] = {"fork only", "netns", "netns + listener"};

/* One iteration of variant v: ms from the fork to the parent holding what
 * the child made (its exit, or the listener). -1 on failure. */
static double once(int v, uid_t uid, gid_t gid) {
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) return -1;
        double t0 = now_ms();
        pid_t pid = fork();
        if (pid < 0) return -1;
        if (pid == 0) {
                close(sp[0]);
                if (uid != 0 && userns_enter_as_root(uid, gid) < 0) _exit(2);
                if (v >= NETNS && netns_enter() < 0) _exit(3);
                if (v == NETNS_LISTENER) {
                        int fd = netns_proxy_listen();
                        if (fd < 0 || fd_send(sp[1], fd) < 0) _exit(4);
                }
                _exit(0);
        }
        close(sp[1]);
        int ok = 1;
        if (v == NETNS_LISTENER) {
                int fd = -1;
                ok = fd_recv(sp[0], &fd) >= 0;
                safe_close(fd);
        }
        int status = 0;
        (void) waitpid(pid, &status, 0);
        double t = now_ms() - t0;
        close(sp[0]);
        return ok && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? t : -1;
}

int main(int argc, char **argv) {
        int n = argc > 1 ? atoi(argv[1]) : 200;
        if (n < 1) n = 1;
        uid_t uid = getuid();
        gid_t gid = getgid();
        printf("bench-netns: %d iterations as uid %u (%s)\n", n, (unsigned) uid,
               uid == 0 ? "root: no user namespace" : "unprivileged: a user namespace in every variant");
        double med[N_VARIANTS] = {0};
        double *t = calloc((size_t) n, sizeof *t);
        if (!t) return 1;
        for (int v = 0; v < N_VARIANTS; v++) {
                for (int i = 0; i < n; i++) {
                        t[i] = once(v, uid, gid);
                        if (t[i] < 0) {
                                fprintf(stderr, "bench-netns: %s failed (iteration %d)\n", names[v], i);
                                free(t);
                                return 1;
                        }
                }
                qsort(t, (size_t) n, sizeof *t, cmp);
                med[v] = t[n / 2];
                printf("  %-18s median %7.3f ms   p90 %7.3f ms\n", names[v], med[v], t[(n * 9) / 10]);
        }
        printf("  added by the namespace: %.3f ms; by namespace and listener: %.3f ms (median over the floor)\n",
               med[NETNS] - med[FORK_ONLY], med[NETNS_LISTENER] - med[FORK_ONLY]);
        free(t);
        return 0;
}
