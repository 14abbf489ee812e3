/* The daemon's file-descriptor limit (docs/taskferryd.8.md "Limits"). A
 * systemd user service starts with a soft RLIMIT_NOFILE of 1024 and a hard
 * limit far above it; the daemon holds a socket per client connection and per
 * running task, pipes and pidfds per job, so it raises its soft limit to the
 * hard one at start. Children get the original soft limit back: programs
 * using select() break on descriptors above 1024 (select(2) NOTES), and a
 * worker has no business inheriting the daemon's budget. */

#include <sys/resource.h>

#include "daemon.h"
#include "util.h"

static struct rlimit original;
static bool raised;

int fd_limit_raise(void) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0) return -errno;
        if (rl.rlim_cur >= rl.rlim_max) return 0;
        original = rl;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0) return -errno;
        raised = true;
        return 1;
}

void fd_limit_restore(void) {
        /* async-signal-safe: called between fork() and exec() */
        if (raised) (void) setrlimit(RLIMIT_NOFILE, &original);
}
