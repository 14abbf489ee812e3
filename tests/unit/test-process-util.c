/* process-util.[ch]: what each safe_fork flag does to the child, seen from
 * inside the real child — signals reset, fds closed, the death signal when
 * the parent dies (and only with the flag), process group and session, the
 * fd soft limit — and what the child inherits without the flags. */

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "process-util.h"
#include "unit.h"

/* Wait for pid; its exit code (a failed check in the child exits non-zero). */
static int wait_exit(pid_t pid) {
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status), "child killed by signal %d", WTERMSIG(status));
        return WEXITSTATUS(status);
}

static bool sig_is_default(int sig) {
        struct sigaction sa;
        return sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL;
}

static bool sig_is_blocked(int sig) {
        sigset_t cur;
        return sigprocmask(SIG_SETMASK, NULL, &cur) == 0 && sigismember(&cur, sig) == 1;
}

static void on_usr(int sig) { (void) sig; }

START_TEST(test_reset_signals) {
        struct sigaction ign = { .sa_handler = SIG_IGN }, handler = { .sa_handler = on_usr };
        ck_assert_int_eq(sigaction(SIGUSR1, &ign, NULL), 0);
        ck_assert_int_eq(sigaction(SIGHUP, &handler, NULL), 0);
        sigset_t block, saved;
        sigemptyset(&block);
        sigaddset(&block, SIGUSR2);
        ck_assert_int_eq(sigprocmask(SIG_BLOCK, &block, &saved), 0);

        /* without the flag the child inherits all of it */
        pid_t pid;
        int r = safe_fork("test", 0, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) _exit(!sig_is_default(SIGUSR1) && !sig_is_default(SIGHUP) && sig_is_blocked(SIGUSR2) ? 0 : 1);
        ck_assert_int_eq(wait_exit(pid), 0);

        r = safe_fork("test", FORK_RESET_SIGNALS, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                bool ok = sig_is_default(SIGUSR1) && sig_is_default(SIGHUP) && sig_is_default(SIGPIPE);
                sigset_t cur;
                sigprocmask(SIG_SETMASK, NULL, &cur);
                for (int s = 1; s < SIGRTMIN; s++)
                        if (sigismember(&cur, s) == 1) ok = false;
                _exit(ok ? 0 : 1);
        }
        ck_assert_int_eq(wait_exit(pid), 0);
        /* the parent's mask is what it was (safe_fork blocks all around fork) */
        ck_assert(sig_is_blocked(SIGUSR2));
        ck_assert(!sig_is_blocked(SIGTERM));
        sigprocmask(SIG_SETMASK, &saved, NULL);
        signal(SIGUSR1, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
}
END_TEST

static bool fd_open(int fd) { return fcntl(fd, F_GETFD) >= 0; }

START_TEST(test_close_all_fds) {
        int a = open("/dev/null", O_RDONLY); /* no CLOEXEC on purpose */
        int b = open("/dev/null", O_RDONLY);
        int c = open("/dev/null", O_RDONLY | O_CLOEXEC);
        int high = fcntl(a, F_DUPFD, 200);
        ck_assert_int_ge(a, 3);
        ck_assert_int_ge(b, 3);
        ck_assert_int_ge(c, 3);
        ck_assert_int_ge(high, 200);

        pid_t pid;
        int r = safe_fork("test", 0, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) _exit(fd_open(a) && fd_open(b) && fd_open(c) && fd_open(high) ? 0 : 1);
        ck_assert_int_eq(wait_exit(pid), 0);

        int except[] = { high, -1, b, b };
        r = safe_fork_full("test", NULL, except, ELEMENTSOF(except), FORK_CLOSE_ALL_FDS, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0)
                _exit(fd_open(0) && fd_open(1) && fd_open(2) && !fd_open(a) && fd_open(b) && !fd_open(c) &&
                                      fd_open(high) && !fd_open(high + 1)
                              ? 0
                              : 1);
        ck_assert_int_eq(wait_exit(pid), 0);
        /* the parent's fds are untouched */
        ck_assert(fd_open(a) && fd_open(b) && fd_open(c) && fd_open(high));
        close(a), close(b), close(c), close(high);
}
END_TEST

/* An intermediate process forks a sleeper with `flags`, reports its pid and
 * exits; we are the subreaper, so the sleeper becomes our child. Returns the
 * sleeper's wait status, or -1 if it was still alive after 5 s (then killed). */
static int orphan_status(ForkFlags flags) {
        ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
        int p[2], q[2]; /* the sleeper's pid to us, and "ready" to the intermediate */
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(q, O_CLOEXEC), 0);
        pid_t mid = fork();
        ck_assert_int_ge(mid, 0);
        if (mid == 0) {
                close(p[0]);
                pid_t sleeper;
                int r = safe_fork("sleeper", flags, &sleeper);
                if (r < 0) _exit(2);
                if (r == 0) {
                        /* report once the prctl is in place, then wait to be killed */
                        pid_t me = getpid();
                        (void) !write(p[1], &me, sizeof me);
                        (void) !write(q[1], &me, sizeof me);
                        close(p[1]);
                        close(q[1]);
                        for (int i = 0; i < 100; i++) usleep(100 * 1000);
                        _exit(0);
                }
                close(q[1]);
                pid_t got;
                (void) !read(q[0], &got, sizeof got);
                _exit(0); /* the parent dies */
        }
        close(q[0]);
        close(q[1]);
        close(p[1]);
        pid_t sleeper = 0;
        ck_assert_int_eq(read(p[0], &sleeper, sizeof sleeper), (ssize_t) sizeof sleeper);
        close(p[0]);
        ck_assert_int_eq(wait_exit(mid), 0);
        int status = 0;
        for (int i = 0; i < 500; i++) {
                pid_t w = waitpid(sleeper, &status, WNOHANG);
                ck_assert_int_ge(w, 0);
                if (w == sleeper) return status;
                usleep(10 * 1000);
        }
        kill(sleeper, SIGKILL);
        ck_assert_int_eq(waitpid(sleeper, &status, 0), sleeper);
        return -1;
}

START_TEST(test_deathsig) {
        int status = orphan_status(FORK_DEATHSIG_SIGKILL);
        ck_assert_int_ne(status, -1);
        ck_assert(WIFSIGNALED(status));
        ck_assert_int_eq(WTERMSIG(status), SIGKILL);

        status = orphan_status(FORK_DEATHSIG_SIGTERM | FORK_RESET_SIGNALS);
        ck_assert_int_ne(status, -1);
        ck_assert(WIFSIGNALED(status));
        ck_assert_int_eq(WTERMSIG(status), SIGTERM);

        /* without the flag the child outlives its parent */
        ck_assert_int_eq(orphan_status(0), -1);
}
END_TEST

START_TEST(test_process_group_and_session) {
        pid_t pid;
        int r = safe_fork("test", 0, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) _exit(getpgid(0) == getpgid(getppid()) && getsid(0) == getsid(getppid()) ? 0 : 1);
        ck_assert_int_eq(wait_exit(pid), 0);

        r = safe_fork("test", FORK_NEW_PROCESS_GROUP, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) _exit(pid == getpid() && getpgid(0) == getpid() && getsid(0) == getsid(getppid()) ? 0 : 1);
        ck_assert_int_eq(wait_exit(pid), 0);

        r = safe_fork("test", FORK_NEW_SESSION, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) _exit(getsid(0) == getpid() && getpgid(0) == getpid() ? 0 : 1);
        ck_assert_int_eq(wait_exit(pid), 0);
}
END_TEST

START_TEST(test_rlimit_nofile) {
        struct rlimit rl, low;
        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
        if (rl.rlim_max < 512) return; /* nothing to raise to */
        low = (struct rlimit) { .rlim_cur = 256, .rlim_max = rl.rlim_max };
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
        ck_assert_int_eq(fd_limit_raise(), 1);
        struct rlimit now;
        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &now), 0);
        ck_assert_uint_eq(now.rlim_cur, rl.rlim_max);

        pid_t pid;
        int r = safe_fork("test", 0, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                struct rlimit c;
                _exit(getrlimit(RLIMIT_NOFILE, &c) == 0 && c.rlim_cur == rl.rlim_max ? 0 : 1);
        }
        ck_assert_int_eq(wait_exit(pid), 0);
        r = safe_fork("test", FORK_RLIMIT_NOFILE_SAFE, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                struct rlimit c;
                _exit(getrlimit(RLIMIT_NOFILE, &c) == 0 && c.rlim_cur == 256 ? 0 : 1);
        }
        ck_assert_int_eq(wait_exit(pid), 0);
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
}
END_TEST


/* Is fd open on the same file as path? */
static bool fd_is(int fd, const char *path) {
        struct stat a, b;
        return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

START_TEST(test_rearrange_stdio) {
        char *dir = tf_tmpdir_new("tf-pu");
        _cleanup_free_ char *fa = tf_path(dir, "a"), *fb = tf_path(dir, "b");
        int a = open(fa, O_RDWR | O_CREAT | O_CLOEXEC, 0600), b = open(fb, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(a, 3);
        ck_assert_int_ge(b, 3);

        /* sources above 2, one of them twice, one slot /dev/null; the
         * sources need not be kept open by except_fds */
        int stdio[3] = {-1, a, a};
        pid_t pid;
        int r = safe_fork_full("test", stdio, NULL, 0, FORK_REARRANGE_STDIO | FORK_CLOSE_ALL_FDS, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0)
                _exit(fd_is(0, "/dev/null") && fd_is(1, fa) && fd_is(2, fa) && !(fcntl(1, F_GETFD) & FD_CLOEXEC) &&
                                      !fd_open(a) && !fd_open(b)
                              ? 0
                              : 1);
        ck_assert_int_eq(wait_exit(pid), 0);

        /* sources inside 0..2, crossed over: 0 <- what was 1, 1 <- what was 0 */
        r = safe_fork("test", 0, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                if (dup2(a, 0) < 0 || dup2(b, 1) < 0) _exit(2);
                pid_t inner;
                int swap[3] = {1, 0, 2};
                int k = safe_fork_full("inner", swap, NULL, 0, FORK_REARRANGE_STDIO, &inner);
                if (k < 0) _exit(3);
                if (k == 0) _exit(fd_is(0, fb) && fd_is(1, fa) ? 0 : 1);
                siginfo_t si;
                if (wait_for_terminate(inner, &si) < 0) _exit(4);
                _exit(si.si_code == CLD_EXITED ? si.si_status : 5);
        }
        ck_assert_int_eq(wait_exit(pid), 0);
        /* NULL is /dev/null for all three */
        r = safe_fork_full("test", NULL, NULL, 0, FORK_REARRANGE_STDIO, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) _exit(fd_is(0, "/dev/null") && fd_is(1, "/dev/null") && fd_is(2, "/dev/null") ? 0 : 1);
        ck_assert_int_eq(wait_exit(pid), 0);
        close(a), close(b);
        tf_tmpdir_free(dir);
}
END_TEST

START_TEST(test_detach) {
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid_t pid = -1;
        int r = safe_fork_full("test", NULL, &p[1], 1, FORK_DETACH | FORK_CLOSE_ALL_FDS, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                /* not our child any more: the intermediate exited */
                pid_t me = getpid(), pp = getppid();
                (void) !write(p[1], &me, sizeof me);
                (void) !write(p[1], &pp, sizeof pp);
                _exit(0);
        }
        close(p[1]);
        ck_assert_int_eq(pid, 0);
        pid_t grandchild = 0, its_parent = 0;
        ck_assert_int_eq(read(p[0], &grandchild, sizeof grandchild), (ssize_t) sizeof grandchild);
        ck_assert_int_eq(read(p[0], &its_parent, sizeof its_parent), (ssize_t) sizeof its_parent);
        close(p[0]);
        ck_assert_int_gt(grandchild, 1);
        ck_assert_int_ne(its_parent, getpid());
        /* it was never ours to reap */
        ck_assert_int_eq(wait_for_terminate(grandchild, NULL), -ECHILD);
        /* no death signal for a child that is meant to outlive its parent */
        ck_assert_int_eq(safe_fork("test", FORK_DETACH | FORK_DEATHSIG_SIGKILL, &pid), -EINVAL);
}
END_TEST

START_TEST(test_wait_helpers) {
        pid_t pid;
        int r = safe_fork("test", 0, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) _exit(7);
        ck_assert_int_eq(wait_for_terminate_and_check("test", pid, 0), 7);
        ck_assert_int_eq(wait_for_terminate(pid, NULL), -ECHILD);

        r = safe_fork("test", FORK_RESET_SIGNALS, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                raise(SIGTERM);
                _exit(0);
        }
        siginfo_t si;
        ck_assert_int_eq(wait_for_terminate(pid, &si), 0);
        ck_assert_int_eq(si.si_code, CLD_KILLED);
        ck_assert_int_eq(wait_status_to_exit_code(&si), 128 + SIGTERM);

        r = safe_fork("test", FORK_RESET_SIGNALS, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                raise(SIGTERM);
                _exit(0);
        }
        ck_assert_int_eq(wait_for_terminate_and_check("test", pid, 0), -EPROTO);

        /* nohang: 0 while it runs, 1 once it exited */
        int go[2];
        ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
        r = safe_fork("test", 0, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                char c;
                close(go[1]);
                (void) !read(go[0], &c, 1);
                _exit(3);
        }
        close(go[0]);
        ck_assert_int_eq(wait_for_terminate_nohang(pid, &si), 0);
        close(go[1]);
        for (int i = 0; i < 500 && (r = wait_for_terminate_nohang(pid, &si)) == 0; i++) usleep(10 * 1000);
        ck_assert_int_eq(r, 1);
        ck_assert_int_eq(wait_status_to_exit_code(&si), 3);

        /* sigkill_wait reaps a child that would never exit */
        r = safe_fork("test", 0, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0)
                for (;;) pause();
        sigkill_wait(pid);
        ck_assert_int_eq(wait_for_terminate(pid, NULL), -ECHILD);
}
END_TEST

/* Dead or a zombie: what a SIGKILL leaves until someone reaps. */
static bool pid_gone(pid_t pid) {
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return true;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0) return true;
        buf[n] = 0;
        const char *p = strrchr(buf, ')');
        return p && (p[2] == 'Z' || p[2] == 'X');
}

static bool wait_gone(pid_t pid) {
        for (int i = 0; i < 500; i++) {
                if (pid_gone(pid)) return true;
                usleep(10 * 1000);
        }
        return false;
}

/* A parent with a child that leads a group holding a grandchild, and a
 * child in the parent's own group: both children and the grandchild go,
 * the parent and its group stay. */
START_TEST(test_kill_children_and_groups) {
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid_t parent;
        int r = safe_fork("test-parent", 0, &parent);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                pid_t c;
                if (safe_fork("test-leader", FORK_NEW_PROCESS_GROUP, &c) == 0) {
                        pid_t g;
                        if (safe_fork("test-grandchild", 0, &g) == 0)
                                for (;;) pause();
                        if (write(p[1], &g, sizeof g) != sizeof g) _exit(1);
                        for (;;) pause();
                }
                if (write(p[1], &c, sizeof c) != sizeof c) _exit(1);
                pid_t d;
                if (safe_fork("test-plain", 0, &d) == 0)
                        for (;;) pause();
                if (write(p[1], &d, sizeof d) != sizeof d) _exit(1);
                for (;;) pause();
        }
        close(p[1]);
        pid_t got[3];
        for (size_t i = 0; i < ELEMENTSOF(got); i++) ck_assert_int_eq(read(p[0], &got[i], sizeof got[i]), sizeof got[i]);
        close(p[0]);
        ck_assert_int_eq(kill_children_and_groups(parent, SIGKILL), 2);
        for (size_t i = 0; i < ELEMENTSOF(got); i++) ck_assert_msg(wait_gone(got[i]), "%d lives on", (int) got[i]);
        ck_assert(!pid_gone(parent));
        ck_assert_int_eq(getpgid(0), getpgid(parent));
        sigkill_wait(parent);
        ck_assert_int_eq(kill_children_and_groups(parent, SIGKILL), -ESRCH);
}
END_TEST

TF_MAIN("process-util", "core", NULL, NULL, 60, test_reset_signals, test_close_all_fds, test_deathsig,
        test_process_group_and_session, test_rlimit_nofile, test_rearrange_stdio, test_detach, test_wait_helpers,
        test_kill_children_and_groups)
