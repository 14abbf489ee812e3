/* safe_fork, waiting for children, the fd limit and run_command; see
 * process-util.h. */

#include "process-util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "path-util.h"
#include "signal-util.h"
#include "strv.h"

#ifndef CLOSE_RANGE_CLOEXEC
#include <linux/close_range.h>
#endif

extern char **environ;

static struct rlimit original_nofile;
static bool nofile_raised;

int fd_limit_raise(void) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0) return -errno;
        if (rl.rlim_cur >= rl.rlim_max) return 0;
        struct rlimit orig = rl;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0) return -errno;
        if (!nofile_raised) original_nofile = orig;
        nofile_raised = true;
        return 1;
}

void fd_limit_restore(void) {
        if (nofile_raised) (void) setrlimit(RLIMIT_NOFILE, &original_nofile);
}

/* close_range(first, last) or, on a kernel without it, close() one by one. */
static int close_span(unsigned first, unsigned last) {
        if (first > last) return 0;
        if (close_range(first, last, 0) == 0) return 0;
        if (errno != ENOSYS) return -errno;
        struct rlimit rl;
        unsigned top = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < UINT_MAX ? (unsigned) rl.rlim_cur : 65536;
        if (last > top) last = top;
        for (unsigned fd = first; fd <= last && fd != UINT_MAX; fd++) (void) close((int) fd);
        return 0;
}

int close_all_fds(const int except_fds[], size_t n_except_fds) {
        /* the kept fds in ascending order (insertion sort: async-signal-safe, few entries) */
        int keep[64];
        size_t n = 0;
        for (size_t i = 0; i < n_except_fds; i++) {
                int fd = except_fds[i];
                if (fd < 3) continue;
                if (n == sizeof keep / sizeof keep[0]) return -E2BIG;
                size_t j = n++;
                while (j > 0 && keep[j - 1] > fd) {
                        keep[j] = keep[j - 1];
                        j--;
                }
                keep[j] = fd;
        }
        unsigned next = 3;
        for (size_t i = 0; i < n; i++) {
                unsigned fd = (unsigned) keep[i];
                if (fd < next) continue; /* a duplicate */
                int r = close_span(next, fd - 1);
                if (r < 0) return r;
                next = fd + 1;
        }
        return close_span(next, UINT_MAX);
}

static _Noreturn void child_fail(const char *name, const char *step, int error) {
        /* stderr is still the parent's: one line, no secrets (names only) */
        dprintf(STDERR_FILENO, "%s: %s: %s\n", name ? name : "child", step, strerror(error));
        _exit(EXIT_FAILURE);
}

static void reset_all_signal_handlers(void) {
        struct sigaction sa = { .sa_handler = SIG_DFL };
        sigemptyset(&sa.sa_mask);
        for (int sig = 1; sig < _NSIG; sig++) {
                if (sig == SIGKILL || sig == SIGSTOP) continue;
                (void) sigaction(sig, &sa, NULL); /* EINVAL for the realtime signals glibc keeps */
        }
}

/* Make fds[0..2] (< 0: /dev/null) the child's 0, 1, 2 (dup2 clears their
 * CLOEXEC). A source below 3 that is not already in its place is first
 * moved above 2, so that no dup2 overwrites a source still to be used.
 * The copies this makes are closed again. Async-signal-safe. 0 or -errno. */
static int rearrange_stdio(const int fds[3]) {
        int src[3], made[4], n_made = 0, null = -1;
        for (int i = 0; i < 3; i++) {
                int fd = fds ? fds[i] : -1;
                if (fd < 0) {
                        if (null < 0) {
                                null = open("/dev/null", O_RDWR | O_CLOEXEC);
                                if (null < 0) return -errno;
                                made[n_made++] = null;
                        }
                        fd = null;
                }
                src[i] = fd;
        }
        for (int i = 0; i < 3; i++) {
                if (src[i] >= 3 || src[i] == i) continue;
                int old = src[i], moved = fcntl(old, F_DUPFD_CLOEXEC, 3);
                if (moved < 0) return -errno;
                made[n_made++] = moved;
                for (int j = 0; j < 3; j++)
                        if (src[j] == old) src[j] = moved;
        }
        for (int i = 0; i < 3; i++) {
                if (src[i] == i) {
                        int fl = fcntl(i, F_GETFD);
                        if (fl < 0 || fcntl(i, F_SETFD, fl & ~FD_CLOEXEC) < 0) return -errno;
                } else if (dup2(src[i], i) < 0)
                        return -errno;
        }
        for (int k = 0; k < n_made; k++)
                if (made[k] >= 3) (void) close(made[k]);
        return 0;
}

int safe_fork_full(const char *name, const int stdio_fds[3], const int except_fds[], size_t n_except_fds,
                   ForkFlags flags, pid_t *ret_pid) {
        /* a detached child's parent is gone at once: no death signal for it */
        if ((flags & FORK_DETACH) && (flags & (FORK_DEATHSIG_SIGKILL | FORK_DEATHSIG_SIGTERM))) return -EINVAL;
        pid_t parent = getpid();
        int deathsig = (flags & FORK_DEATHSIG_SIGKILL) ? SIGKILL : (flags & FORK_DEATHSIG_SIGTERM) ? SIGTERM : 0;
        bool block = (flags & FORK_RESET_SIGNALS) || deathsig != 0;
        sigset_t all, saved;
        if (block) {
                sigfillset(&all);
                if (sigprocmask(SIG_SETMASK, &all, &saved) < 0) return -errno;
        }

        pid_t pid = fork();
        if (pid < 0) {
                int r = -errno;
                if (block) (void) sigprocmask(SIG_SETMASK, &saved, NULL);
                return r;
        }
        if (pid > 0) {
                int r = 1;
                /* the intermediate of a detached child exits at once */
                if (flags & FORK_DETACH) {
                        int k = wait_for_terminate(pid, NULL);
                        if (k < 0) r = k;
                }
                if (block) (void) sigprocmask(SIG_SETMASK, &saved, NULL);
                if (ret_pid) *ret_pid = (flags & FORK_DETACH) ? 0 : pid;
                return r;
        }

        /* the child */
        if (flags & FORK_DETACH) {
                pid_t grandchild = fork();
                if (grandchild < 0) child_fail(name, "fork", errno);
                if (grandchild > 0) _exit(EXIT_SUCCESS);
        }
        if ((flags & FORK_NEW_SESSION) && setsid() < 0) child_fail(name, "setsid", errno);
        if ((flags & FORK_NEW_PROCESS_GROUP) && !(flags & FORK_NEW_SESSION) && setpgid(0, 0) < 0)
                child_fail(name, "setpgid", errno);
        if (deathsig != 0) {
                if (prctl(PR_SET_PDEATHSIG, deathsig) < 0) child_fail(name, "PR_SET_PDEATHSIG", errno);
                /* the parent died before the prctl: no signal will come */
                if (getppid() != parent) {
                        (void) raise(deathsig); /* SIGKILL is never blocked; SIGTERM is, so: */
                        _exit(EXIT_FAILURE);
                }
        }
        if (flags & FORK_RESET_SIGNALS) {
                reset_all_signal_handlers();
                sigset_t none;
                sigemptyset(&none);
                if (sigprocmask(SIG_SETMASK, &none, NULL) < 0) child_fail(name, "sigprocmask", errno);
        } else if (block && sigprocmask(SIG_SETMASK, &saved, NULL) < 0)
                child_fail(name, "sigprocmask", errno);
        if (flags & FORK_REARRANGE_STDIO) {
                int r = rearrange_stdio(stdio_fds);
                if (r < 0) child_fail(name, "rearranging stdio", -r);
        }
        if (flags & FORK_CLOSE_ALL_FDS) {
                int r = close_all_fds(except_fds, n_except_fds);
                if (r < 0) child_fail(name, "closing inherited file descriptors", -r);
        }
        if (flags & FORK_RLIMIT_NOFILE_SAFE) fd_limit_restore();
        if (ret_pid) *ret_pid = getpid();
        return 0;
}

/* waitid(2) for child pid's exit (WEXITED | extra), retrying EINTR: 1 and
 * *ret (may be NULL) once it is reaped, 0 while it runs (WNOHANG), -errno. */
static int wait_exited(pid_t pid, int extra, siginfo_t *ret) {
        if (pid <= 1) return -EINVAL;
        siginfo_t si;
        for (;;) {
                si = (siginfo_t) {0};
                if (waitid(P_PID, (id_t) pid, &si, WEXITED | extra) == 0) break;
                if (errno != EINTR) return -errno;
        }
        if (si.si_pid == 0) return 0; /* WNOHANG: still running */
        if (ret) *ret = si;
        return 1;
}

int wait_for_terminate(pid_t pid, siginfo_t *ret) {
        int r = wait_exited(pid, 0, ret);
        return r < 0 ? r : 0;
}

int wait_for_terminate_nohang(pid_t pid, siginfo_t *ret) { return wait_exited(pid, WNOHANG, ret); }

int wait_status_to_exit_code(const siginfo_t *si) {
        return si->si_code == CLD_EXITED ? si->si_status : 128 + si->si_status;
}

int wait_for_terminate_and_check(const char *name, pid_t pid, WaitFlags flags) {
        siginfo_t si = {0};
        int r = wait_for_terminate(pid, &si);
        if (r < 0) {
                if (flags & WAIT_LOG_ABNORMAL) log_warning_errno(r, "cannot wait for %s", name ? name : "child");
                return r;
        }
        if (si.si_code == CLD_EXITED) {
                if (si.si_status != 0 && (flags & WAIT_LOG_ABNORMAL))
                        log_warning("%s failed with exit status %d", name ? name : "child", si.si_status);
                return si.si_status;
        }
        if (flags & WAIT_LOG_ABNORMAL)
                log_warning("%s terminated by %s", name ? name : "child", strnull(signal_to_name(si.si_status)));
        return -EPROTO;
}

void sigkill_wait(pid_t pid) {
        if (pid <= 1) return;
        (void) kill(pid, SIGKILL);
        (void) wait_for_terminate(pid, NULL);
}

/* ---- running a command to completion ---- */

void run_result_done(run_result *r) {
        free(r->out);
        free(r->err);
        r->out = r->err = NULL;
}

static int append_buf(char **buf, size_t *len, size_t *cap, const char *data, size_t n) {
        if (*len + n + 1 > *cap) {
                size_t ncap = (*cap ? *cap : 4096);
                while (ncap < *len + n + 1) ncap *= 2;
                char *nb = realloc(*buf, ncap);
                if (!nb) return -ENOMEM;
                *buf = nb;
                *cap = ncap;
        }
        memcpy(*buf + *len, data, n);
        *len += n;
        (*buf)[*len] = 0;
        return 0;
}

int run_command(char *const argv[], char *const envp[], const char *cwd, size_t max_out,
                int stdout_fd, run_result *res) {
        int outp[2] = {-1, -1}, errp[2] = {-1, -1};
        memset(res, 0, sizeof *res);
        _cleanup_free_ char *exe = NULL;
        int r = find_executable(argv[0], envp ? strv_env_get(envp, "PATH") : NULL, &exe);
        if (r < 0) return r;
        if (pipe2(errp, O_CLOEXEC) < 0) return -errno;
        bool capture = stdout_fd < 0 && max_out > 0;
        if (capture && pipe2(outp, O_CLOEXEC) < 0) {
                r = -errno;
                close(errp[0]);
                close(errp[1]);
                return r;
        }
        /* the caller waits for it: it never outlives the caller (a daemon job
         * killed with its daemon takes its git along) */
        pid_t pid;
        r = safe_fork(argv[0], FORK_DEATHSIG_SIGKILL | FORK_RESET_SIGNALS, &pid);
        if (r < 0) {
                safe_close(outp[0]), safe_close(outp[1]), safe_close(errp[0]), safe_close(errp[1]);
                return r;
        }
        if (r == 0) {
                int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (devnull < 0) _exit(127);
                dup2(devnull, 0);
                if (stdout_fd >= 0) dup2(stdout_fd, 1);
                else if (capture) dup2(outp[1], 1);
                else dup2(devnull, 1);
                dup2(errp[1], 2);
                if (cwd && chdir(cwd) < 0) {
                        dprintf(2, "chdir %s: %s\n", cwd, strerror(errno));
                        _exit(127);
                }
                execve(exe, argv, envp ? envp : environ);
                dprintf(2, "exec %s: %s\n", exe, strerror(errno));
                _exit(127);
        }
        safe_close(outp[1]);
        safe_close(errp[1]);
        size_t olen = 0, ocap = 0, elen = 0, ecap = 0;
        char *obuf = NULL, *ebuf = NULL;
        bool too_big = false;
        struct pollfd pfd[2] = {{.fd = capture ? outp[0] : -1, .events = POLLIN},
                                {.fd = errp[0], .events = POLLIN}};
        int open_fds = capture ? 2 : 1;
        char chunk[65536];
        while (open_fds > 0) {
                if (poll(pfd, 2, -1) < 0) {
                        if (errno == EINTR) continue;
                        break;
                }
                for (int i = 0; i < 2; i++) {
                        if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                        ssize_t n = read(pfd[i].fd, chunk, sizeof chunk);
                        if (n < 0 && errno == EINTR) continue;
                        if (n <= 0) {
                                close(pfd[i].fd);
                                pfd[i].fd = -1;
                                open_fds--;
                                continue;
                        }
                        if (i == 0) {
                                if (olen + (size_t) n > max_out) too_big = true;
                                else if (append_buf(&obuf, &olen, &ocap, chunk, (size_t) n) < 0) too_big = true;
                        } else if (elen < 65536)
                                (void) append_buf(&ebuf, &elen, &ecap, chunk, (size_t) n);
                }
        }
        siginfo_t si = {0};
        /* a child that cannot be waited for (-ECHILD: it was reaped
         * already, as a SIGCHLD set to SIG_IGN does) has no status to
         * report: it reads as exit status 0, the output is what there is */
        if (wait_for_terminate(pid, &si) < 0) si = (siginfo_t) {.si_code = CLD_EXITED};
        if (si.si_code == CLD_EXITED) {
                res->exit_code = si.si_status;
                res->signal = 0;
        } else {
                res->exit_code = -1;
                res->signal = si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED ? si.si_status : 0;
        }
        if (capture && !obuf) obuf = strdup("");
        if (!ebuf) ebuf = strdup("");
        res->out = obuf;
        res->out_len = olen;
        res->err = ebuf;
        res->err_len = elen;
        if (too_big) {
                run_result_done(res);
                return -EFBIG;
        }
        return 0;
}

int proc_stat_ids(pid_t pid, pid_t *ret_ppid, pid_t *ret_pgrp, pid_t *ret_session) {
        char path[64], buf[1024];
        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return errno == ENOENT ? -ESRCH : -errno;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        int r = n < 0 ? -errno : 0;
        close(fd);
        if (r < 0) return r;
        if (n == 0) return -EBADMSG;
        buf[n] = 0;
        const char *p = strrchr(buf, ')');
        int ppid = 0, pgrp = 0, session = 0;
        if (!p || sscanf(p + 1, " %*c %d %d %d", &ppid, &pgrp, &session) != 3) return -EBADMSG;
        if (ret_ppid) *ret_ppid = (pid_t) ppid;
        if (ret_pgrp) *ret_pgrp = (pid_t) pgrp;
        if (ret_session) *ret_session = (pid_t) session;
        return 0;
}

int kill_children_and_groups(pid_t pid, int sig) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/task", (int) pid);
        DIR *d = opendir(path);
        if (!d) return errno == ENOENT ? -ESRCH : -errno;
        int n = 0;
        for (struct dirent *de; (de = readdir(d));) {
                if (de->d_name[0] == '.') continue;
                char cpath[320], buf[4096];
                snprintf(cpath, sizeof cpath, "/proc/%d/task/%s/children", (int) pid, de->d_name);
                int fd = open(cpath, O_RDONLY | O_CLOEXEC);
                if (fd < 0) continue;
                ssize_t len = read(fd, buf, sizeof buf - 1);
                close(fd);
                if (len <= 0) continue;
                buf[len] = 0;
                for (char *p = buf, *end; *p; p = end) {
                        long c = strtol(p, &end, 10);
                        if (end == p) break;
                        if (c <= 1 || c > INT32_MAX) continue;
                        /* a pidfd pins the child while it is checked to be ours */
                        int pidfd = pidfd_open((pid_t) c, 0);
                        pid_t ppid = 0, pgrp = 0;
                        if (pidfd >= 0 && proc_stat_ids((pid_t) c, &ppid, &pgrp, NULL) >= 0 && ppid == pid) {
                                if (pgrp == (pid_t) c) (void) kill(-(pid_t) c, sig);
                                (void) pidfd_send_signal(pidfd, sig, NULL, 0);
                                n++;
                        }
                        if (pidfd >= 0) close(pidfd);
                }
        }
        closedir(d);
        return n;
}
