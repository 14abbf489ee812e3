#pragma once
/* One place that knows how to fork (modelled on systemd's safe_fork_full,
 * src/basic/process-util.h): every fork() of taskferry goes through
 * safe_fork, and each caller says with flags what its child needs. The
 * child then does only what is specific to it (its dup2()s, chdir, exec, or
 * its work and _exit) — setup that every child needs is never hand-written.
 *
 * With FORK_RESET_SIGNALS or a FORK_DEATHSIG_* flag every signal is blocked
 * in the parent around fork(), so a signal arriving in between can never run
 * the parent's handler in the child (the shim's handler writes to a pipe the
 * parent reads); the parent's mask is restored before safe_fork returns.
 *
 * The daemon's RLIMIT_NOFILE: a systemd user service starts with a soft
 * limit of 1024 and a hard limit far above it; the daemon holds a socket per
 * client connection and per running task, pipes and pidfds per job, so it
 * raises its soft limit to the hard one at start (fd_limit_raise). Children
 * get the original soft limit back (FORK_RLIMIT_NOFILE_SAFE): programs using
 * select() break on descriptors above 1024 (select(2) NOTES), and a worker has
 * no business inheriting the daemon's budget (docs/taskferryd.8.md
 * "Limits"). */

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef enum ForkFlags {
        /* every signal's disposition back to SIG_DFL and an empty signal
         * mask (exec resets handlers, but ignored signals and the mask —
         * sd-event blocks the signals it handles — would be inherited) */
        FORK_RESET_SIGNALS = 1 << 0,
        /* close every fd but 0, 1, 2 and the except_fds of safe_fork_full
         * (close_range(2)); CLOEXEC fds would close at exec anyway, this also
         * catches those opened without it, and children that do not exec */
        FORK_CLOSE_ALL_FDS = 1 << 1,
        /* PR_SET_PDEATHSIG: the child gets SIGKILL/SIGTERM when the parent
         * dies. If the parent already died before the prctl (getppid() is no
         * longer the forking process), the child kills itself the same way.
         * For children that must not outlive their parent: never for one
         * that must survive it (the shim, the auto-started daemon). */
        FORK_DEATHSIG_SIGKILL = 1 << 2,
        FORK_DEATHSIG_SIGTERM = 1 << 3,
        /* setpgid(0, 0): the child leads a new process group (the shim kills
         * the worker's whole group) */
        FORK_NEW_PROCESS_GROUP = 1 << 4,
        /* setsid(): a new session and process group, no controlling tty */
        FORK_NEW_SESSION = 1 << 5,
        /* the soft RLIMIT_NOFILE back to what it was before fd_limit_raise */
        FORK_RLIMIT_NOFILE_SAFE = 1 << 6,
        /* the child's fds 0, 1 and 2 become stdio_fds[0..2] of
         * safe_fork_full; an entry < 0 (or stdio_fds NULL) is /dev/null.
         * Done before FORK_CLOSE_ALL_FDS, so a source fd need not be among
         * the except_fds; an fd may be named for several of the three */
        FORK_REARRANGE_STDIO = 1 << 7,
        /* the child is a grandchild: the intermediate process exits at once
         * and safe_fork reaps it, so the child is reparented to init (or the
         * nearest subreaper) and nobody waits for it. The parent's *ret_pid
         * is 0: it has no child to wait for. For work that must outlive a
         * short-lived helper (the boot sweep's trash remover). Not with a
         * FORK_DEATHSIG_* flag (-EINVAL) */
        FORK_DETACH = 1 << 8,
} ForkFlags;

/* Fork. In the parent returns 1 and *ret_pid = the child's pid; in the child
 * returns 0 (*ret_pid = its own pid) once the flags' setup is done; -errno
 * (from fork(2) or the parent's sigprocmask) when there is no child. A child
 * whose setup fails writes "<name>: <step>: <error>" to its stderr (the one
 * it had before FORK_REARRANGE_STDIO) and _exit(EXIT_FAILURE)s. name is for
 * that message only (NULL → "child"). stdio_fds (3 entries, or NULL) is read
 * only with FORK_REARRANGE_STDIO; except_fds (n_except_fds entries, any
 * order, negative entries ignored) stay open with FORK_CLOSE_ALL_FDS. */
int safe_fork_full(const char *name, const int stdio_fds[3], const int except_fds[], size_t n_except_fds,
                   ForkFlags flags, pid_t *ret_pid);

static inline int safe_fork(const char *name, ForkFlags flags, pid_t *ret_pid) {
        return safe_fork_full(name, NULL, NULL, 0, flags, ret_pid);
}

/* ---- waiting for a child (blocking: never on the daemon's event loop,
 * which watches its children through pidfds) ---- */

/* Wait until child pid exits and reap it, retrying EINTR. 0 with its
 * siginfo in *ret (may be NULL: si_code CLD_EXITED with the exit status in
 * si_status, or CLD_KILLED/CLD_DUMPED with the signal), or -errno (-ECHILD:
 * not our child). */
int wait_for_terminate(pid_t pid, siginfo_t *ret);

/* Reap child pid if it has exited, without blocking: 1 with *ret filled as
 * wait_for_terminate does, 0 while it still runs, -errno. */
int wait_for_terminate_nohang(pid_t pid, siginfo_t *ret);

/* What a shell's $? says of a reaped child: its exit status (0..255), or
 * 128 + the signal that killed it. */
int wait_status_to_exit_code(const siginfo_t *si);

typedef enum WaitFlags {
        /* log a warning naming `name` when the child did not exit 0 */
        WAIT_LOG_ABNORMAL = 1 << 0,
} WaitFlags;

/* wait_for_terminate, then judge: the exit status (0..255) of a child that
 * exited, -EPROTO for one a signal killed, -errno when the wait failed. */
int wait_for_terminate_and_check(const char *name, pid_t pid, WaitFlags flags);

/* SIGKILL child pid and reap it (both best effort): for a child the caller
 * gives up on. */
void sigkill_wait(pid_t pid);

/* The parent, process group and session of pid, from /proc/<pid>/stat
 * (the fields after the parenthesised comm, which may hold anything). Any
 * ret may be NULL. 0, -errno (-ESRCH: gone), -EBADMSG. */
int proc_stat_ids(pid_t pid, pid_t *ret_ppid, pid_t *ret_pgrp, pid_t *ret_session);

/* Send sig to every child of pid (each thread's /proc/<pid>/task/<tid>/children)
 * and, first, to the process group of each child that leads one. For a
 * parent about to be killed whose children's groups must go with it: a
 * sandbox whose init has not yet set its death signal outlives its bwrap.
 * The number of children signalled, or -errno (-ESRCH: pid is gone). */
int kill_children_and_groups(pid_t pid, int sig);

/* Close every fd >= 3 except those listed. Async-signal-safe. 0 or -errno. */
int close_all_fds(const int except_fds[], size_t n_except_fds);

/* Raise the soft RLIMIT_NOFILE to the hard limit, remembering the original:
 * 1 if raised, 0 if it already was at the hard limit, -errno. */
int fd_limit_raise(void);
/* Put back the soft limit fd_limit_raise found; no-op if it changed nothing.
 * Async-signal-safe (safe_fork calls it in the child). */
void fd_limit_restore(void);

/* ---- running a command to completion (blocking: for helpers, the shim
 * and forked jobs; never on the daemon's event loop) ---- */

typedef struct run_result {
        int exit_code;      /* exit status, or -1 if killed by a signal */
        int signal;         /* terminating signal or 0 */
        char *out;          /* captured stdout (NUL-terminated), NULL if not captured */
        size_t out_len;     /* bytes */
        char *err;          /* captured stderr (NUL-terminated; reading stops
                             * adding once 64 KiB are held) */
        size_t err_len;     /* bytes */
} run_result;
/* Free what run_command captured (the struct itself is the caller's). */
void run_result_done(run_result *r);
/* Run argv[0] (PATH lookup through envp's PATH or ours) with envp (NULL → our
 * environ), cwd (NULL → ours), stdin from /dev/null, stdout captured up to
 * max_out bytes (-EFBIG beyond, nothing captured then; 0 → discard stdout),
 * stderr captured. stdout_fd >= 0 sends stdout to that fd instead of
 * capturing. The child gets SIGKILL should the caller die first
 * (PR_SET_PDEATHSIG). Returns 0 when the child ran (check r->exit_code: 127
 * when it could not chdir or exec, the reason on its stderr), -errno if it
 * could not be started (-ENOENT: argv[0] not found). */
int run_command(char *const argv[], char *const envp[], const char *cwd,
                size_t max_out, int stdout_fd, run_result *r);
