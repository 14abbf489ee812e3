/* landlock.c: the IPC scoping of a worker (landlock(7), ABI 6). It restricts
 * no filesystem access; what it builds is a domain scoped to abstract
 * AF_UNIX sockets and signals. Checked in forked children (the scope cannot
 * be undone): where the kernel has ABI 6, a scoped child cannot connect to
 * an abstract socket made outside, cannot signal its parent, still can
 * signal its own child and write files, and has no_new_privs; elsewhere the
 * call reports 0 (or -EPERM under a seccomp filter) and changes nothing. */

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "fileio.h"
#include "landlock.h"
#include "macro.h"
#include "process-util.h"
#include "unit.h"

static char *dir;

static void setup(void) { dir = tf_tmpdir_new("landlock"); }
static void teardown(void) { dir = tf_tmpdir_free(dir); }

static long landlock_abi(void) {
        long abi = syscall(444 /* landlock_create_ruleset */, NULL, 0, 1U /* VERSION */);
        return abi < 0 ? 0 : abi;
}

/* An abstract socket listening in the parent, named after our pid. */
static int abstract_listener(struct sockaddr_un *ret_addr, socklen_t *ret_len) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "taskferry-landlock-test-%d", (int) getpid());
        socklen_t len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + (size_t) n);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &a, len), 0);
        ck_assert_int_eq(listen(fd, 4), 0);
        *ret_addr = a;
        *ret_len = len;
        return fd;
}

static int connect_to(const struct sockaddr_un *a, socklen_t len) {
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return -errno;
        return connect(fd, (const struct sockaddr *) a, len) < 0 ? -errno : 0;
}

/* Exit codes of the scoped child: 0 all held, 77 not applied, else the step. */
START_TEST(scoped_child) {
        struct sockaddr_un addr;
        socklen_t alen;
        _cleanup_close_ int lfd = abstract_listener(&addr, &alen);
        /* outside any domain the socket is reachable */
        ck_assert_int_eq(connect_to(&addr, alen), 0);
        _cleanup_free_ char *file = tf_path(dir, "written");
        pid_t parent = getpid(), pid;
        long abi = landlock_abi();
        int r = safe_fork("landlock-test", FORK_DEATHSIG_SIGKILL, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                int k = landlock_scope_ipc();
                if (k == 0) _exit(abi >= 6 ? 10 : 77); /* ABI 6 present yet nothing done: wrong */
                if (k == -EPERM) _exit(77);            /* a seccomp filter */
                if (k != 1) _exit(11);
                if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) _exit(12);
                /* abstract sockets made outside the domain: refused */
                if (connect_to(&addr, alen) != -EPERM) _exit(13);
                /* signals to processes outside: refused (SIGURG is ignored by default) */
                if (kill(parent, SIGURG) == 0 || errno != EPERM) _exit(14);
                /* no filesystem access is restricted */
                if (write_file_atomic(file, "ok", 2, 0600) < 0) _exit(15);
                /* a child of the scoped process is inside the domain: signalable */
                pid_t g;
                int f = safe_fork("landlock-grandchild", FORK_DEATHSIG_SIGKILL, &g);
                if (f < 0) _exit(16);
                if (f == 0) {
                        pause();
                        _exit(0);
                }
                if (kill(g, SIGKILL) < 0) _exit(17);
                siginfo_t si;
                if (wait_for_terminate(g, &si) < 0 || si.si_code != CLD_KILLED) _exit(18);
                /* applying it again nests a second domain: still 1 */
                if (landlock_scope_ipc() != 1) _exit(19);
                _exit(0);
        }
        int code = wait_for_terminate_and_check("landlock-test", pid, 0);
        if (code == 77) {
                fprintf(stderr, "%s: skipped: Landlock ABI %ld, scoping not applied\n", __func__, abi);
                return;
        }
        ck_assert_msg(code == 0, "scoped child failed at step %d", code);
        _cleanup_free_ char *got = tf_read_file(file, false);
        ck_assert_str_eq(got, "ok");
        /* the parent, outside the domain, is unaffected */
        ck_assert_int_eq(connect_to(&addr, alen), 0);
}
END_TEST

START_TEST(result_matches_the_kernel) {
        /* 1 exactly where the kernel has ABI 6; never another error here */
        long abi = landlock_abi();
        pid_t pid;
        int r = safe_fork("landlock-probe", FORK_DEATHSIG_SIGKILL, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                int k = landlock_scope_ipc();
                _exit(k == 1 ? 1 : k == 0 ? 0 : k == -EPERM ? 2 : 3);
        }
        int code = wait_for_terminate_and_check("landlock-probe", pid, 0);
        ck_assert_int_ne(code, 3);
        if (code != 2) ck_assert_int_eq(code, abi >= 6 ? 1 : 0);
}
END_TEST

TF_MAIN("landlock", "landlock", setup, teardown, 30, scoped_child, result_matches_the_kernel)
