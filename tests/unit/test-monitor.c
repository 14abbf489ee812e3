/* run/monitor.c: what a restarted daemon makes of a task recorded as
 * running (monitor_unlaunch for one never let go: only a held child is
 * killed, never a stranger whose pid was reused; monitor_readopt: gone,
 * exited with its exit.json on the task, or watched again), and the signals
 * to the worker (task_signal, task_terminate's SIGTERM then SIGKILL after
 * the grace). A whole daemon (daemon.h) on its own loop; the processes are
 * real: children of the test, copies of sleep(1) under the names the
 * monitor looks for, a detached one in a session of its own. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon-fixture.h"
#include "disk-budget.h"
#include "fileio.h"
#include "fs-util.h"
#include "json-util.h"
#include "launch-spec.h"
#include "paths.h"
#include "process-util.h"
#include "run/monitor.h"
#include "string-util.h"
#include "unit.h"

static Manager m;
static char *bin; /* copies of sleep under other names */

static void setup(void) {
        tf_daemon_setup(&m, "test-monitor");
        bin = tf_tmpdir_new("bin");
}

static void teardown(void) {
        tf_daemon_teardown(&m);
        bin = tf_tmpdir_free(bin);
}

/* sleep(1) copied to <bin>/name (a hard link or a symlink would not do:
 * /proc/<pid>/exe names what was executed, resolved). */
static char *sleep_as(const char *name) {
        char *p = tf_path(bin, name);
        free(tf_sh(NULL, "cp \"$(command -v sleep)\" '%s'", p));
        return p;
}

/* A child of the test running exe 30, forked with the extra flags, holding
 * a launch-spec memfd when memfd. */
static pid_t spawn_child_ex(const char *exe, ForkFlags extra, bool memfd) {
        pid_t pid;
        int r = safe_fork("child", FORK_RESET_SIGNALS | FORK_CLOSE_ALL_FDS | extra, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                if (memfd && memfd_create(LAUNCH_SPEC_MEMFD_NAME, 0) < 0) _exit(127);
                execl(exe, exe, "30", (char *) NULL);
                _exit(127);
        }
        /* wait until it runs exe (not the fork of the test still) */
        char *link = strdup_printf("/proc/%d/exe", (int) pid);
        char buf[4096];
        for (int i = 0; i < 500; i++) {
                ssize_t n = readlink(link, buf, sizeof buf - 1);
                if (n > 0) {
                        buf[n] = 0;
                        if (streq(buf, exe)) break;
                }
                usleep(10000);
        }
        free(link);
        return pid;
}

static pid_t spawn_child(const char *exe, bool new_group) {
        return spawn_child_ex(exe, new_group ? FORK_NEW_PROCESS_GROUP : 0, false);
}

static bool child_alive(pid_t pid) {
        siginfo_t si;
        return wait_for_terminate_nohang(pid, &si) == 0;
}

static void child_kill(pid_t pid) {
        (void) kill(pid, SIGKILL);
        siginfo_t si;
        (void) wait_for_terminate(pid, &si);
}

/* Has the process of pidfd ended within ms? */
static bool ends_within(int pidfd, int ms) {
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        return poll(&p, 1, ms) == 1;
}

/* A "held child": exe (named taskferryd...) in a session of its own,
 * holding a launch-spec memfd, no child of the test (detached: init's).
 * Its pid (and, with ret_pidfd, a pidfd of it). */
static pid_t spawn_held(const char *exe, bool with_memfd, int *ret_pidfd) {
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid_t none;
        int r = safe_fork_full("held", NULL, (int[]) {p[1]}, 1,
                               FORK_RESET_SIGNALS | FORK_CLOSE_ALL_FDS | FORK_NEW_SESSION | FORK_DETACH, &none);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                /* not close-on-exec: the exec'd process holds it */
                int fd = with_memfd ? memfd_create(LAUNCH_SPEC_MEMFD_NAME, 0) : -1;
                if (with_memfd && fd < 0) _exit(127);
                pid_t self = getpid();
                if (write(p[1], &self, sizeof self) != sizeof self) _exit(127);
                execl(exe, exe, "30", (char *) NULL);
                _exit(127);
        }
        close(p[1]);
        pid_t pid = 0;
        ck_assert_int_eq(read(p[0], &pid, sizeof pid), (ssize_t) sizeof pid);
        /* the pipe's end: the exec closed it */
        char c;
        ck_assert_int_eq(read(p[0], &c, 1), 0);
        close(p[0]);
        int pidfd = pidfd_open(pid, 0);
        ck_assert_int_ge(pidfd, 0);
        ck_assert(!ends_within(pidfd, 0));
        *ret_pidfd = pidfd;
        return pid;
}

static Task *running_task(const char *id, pid_t shim_pid) {
        if (shim_pid)
                return tf_taskf(&m, "{\"id\":\"%s\",\"status\":\"running\",\"changesetStatus\":\"none\",\"shimPid\":%d}",
                                id, (int) shim_pid);
        return tf_taskf(&m, "{\"id\":\"%s\",\"status\":\"running\",\"changesetStatus\":\"none\"}", id);
}

static char *task_dir(const char *id) {
        char *d = tf_path_task_dir(&m.paths, id);
        ck_assert_int_eq(mkdir_p_chmod(d, 0700), 0);
        return d;
}

/* ---- monitor_unlaunch ---- */

START_TEST(unlaunch_busy_when_the_shim_wrote) {
        const char *names[] = {EXIT_JSON_NAME, LAUNCH_JSON_NAME};
        for (size_t i = 0; i < 2; i++) {
                char id[16];
                snprintf(id, sizeof id, "oc_busy%zu", i);
                Task *t = running_task(id, 0); /* even with no pid recorded */
                char *d = task_dir(id);
                free(tf_put(d, names[i], "", 0)); /* whatever it holds */
                ck_assert_int_eq(monitor_unlaunch(t), -EBUSY);
                free(d);
        }
}
END_TEST

START_TEST(unlaunch_without_a_pid) {
        Task *t = running_task("oc_nopid", 0);
        ck_assert_int_eq(monitor_unlaunch(t), 0);
        /* pid 1, 0, negative, beyond a pid: none of them is a held child */
        const char *bad[] = {"1", "0", "-5", "4294967297", "null"};
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                Task *b = tf_taskf(&m, "{\"id\":\"oc_bad%zu\",\"status\":\"running\",\"changesetStatus\":\"none\","
                                       "\"shimPid\":%s}",
                                   i, bad[i]);
                ck_assert_int_eq(monitor_unlaunch(b), 0);
        }
}
END_TEST

/* monitor_unlaunch of a running task recorded with pid (a child of this
 * process) leaves that process running; it is killed after. */
static void unlaunch_leaves(const char *id, pid_t pid) {
        Task *t = running_task(id, pid);
        ck_assert_int_eq(monitor_unlaunch(t), 0);
        usleep(100000);
        ck_assert(child_alive(pid));
        child_kill(pid);
}

/* A held child of exe (spawn_held) recorded as the shim of the running
 * task id, and monitor_unlaunch of that task; the child's pid (its pidfd in
 * *ret_pidfd). */
static pid_t unlaunch_held(const char *exe, bool with_memfd, const char *id, int *ret_pidfd) {
        pid_t pid = spawn_held(exe, with_memfd, ret_pidfd);
        Task *t = running_task(id, pid);
        ck_assert_int_eq(monitor_unlaunch(t), 0);
        return pid;
}

/* A recorded pid reused by some other process: left alone. */
START_TEST(unlaunch_leaves_a_stranger) {
        char *slp = sleep_as("sleep");
        pid_t pid = spawn_child(slp, false);
        unlaunch_leaves("oc_stranger", pid);
        free(slp);
}
END_TEST

/* A process named as the daemon, in its own session, but not holding a
 * launch spec (another taskferryd), or one that holds one but is this
 * daemon's own child: neither is a held child of a daemon that died. */
START_TEST(unlaunch_leaves_another_daemon) {
        char *exe = sleep_as("taskferryd");
        int pidfd;
        unlaunch_held(exe, false, "oc_otherd", &pidfd);
        ck_assert(!ends_within(pidfd, 200));
        ck_assert_int_eq(pidfd_send_signal(pidfd, SIGKILL, NULL, 0), 0);
        ck_assert(ends_within(pidfd, 5000));
        close(pidfd);
        /* ours: a child of this process, in a session of its own, holding a
         * launch spec (this daemon's own held child) */
        pid_t own = spawn_child_ex(exe, FORK_NEW_SESSION, true);
        unlaunch_leaves("oc_ownchild", own);
        free(exe);
}
END_TEST

/* The held child of a daemon that died: killed. */
START_TEST(unlaunch_kills_a_held_child) {
        char *exe = sleep_as("taskferryd");
        int pidfd;
        pid_t held = unlaunch_held(exe, true, "oc_held", &pidfd);
        ck_assert_msg(ends_within(pidfd, 5000), "the held child %d still runs", (int) held);
        close(pidfd);
        free(exe);
}
END_TEST

/* A recorded pid that runs taskferry-shim: it ran; re-adopt, do not kill. */
START_TEST(unlaunch_busy_for_a_running_shim) {
        char *exe = sleep_as("taskferry-shim");
        pid_t pid = spawn_child(exe, false);
        Task *t = running_task("oc_shimruns", pid);
        ck_assert_int_eq(monitor_unlaunch(t), -EBUSY);
        usleep(50000);
        ck_assert(child_alive(pid));
        child_kill(pid);
        free(exe);
}
END_TEST

/* ---- monitor_readopt ---- */

static unsigned n_exited, n_started;
static void on_exited(Task *t) { n_exited++; }
static void on_started(Task *t) { n_started++; }
static const MonitorCallbacks cb = {.worker_started = on_started, .exited = on_exited};

START_TEST(readopt_gone) {
        Task *t = running_task("oc_gone", 0);
        ck_assert_int_eq(monitor_readopt(t, &cb), MONITOR_READOPT_GONE);
        /* a recorded pid that runs no shim */
        char *slp = sleep_as("sleep");
        pid_t pid = spawn_child(slp, false);
        Task *s = running_task("oc_gone2", pid);
        ck_assert_int_eq(monitor_readopt(s, &cb), MONITOR_READOPT_GONE);
        ck_assert_int_eq(s->shim_pid, 0);
        ck_assert_ptr_null(s->shim_source);
        ck_assert(child_alive(pid));
        child_kill(pid);
        /* an exit.json that is none: no exit status */
        Task *g = running_task("oc_garbage", 0);
        char *d = task_dir(g->id);
        free(tf_put(d, EXIT_JSON_NAME, "{\"exitCode\":", 12));
        ck_assert_int_eq(monitor_readopt(g, &cb), MONITOR_READOPT_GONE);
        ck_assert(!task_record_is_set(&g->rec, TASK_KEY_exit_code));
        ck_assert_uint_eq(n_exited, 0);
        free(d), free(slp);
}
END_TEST

static void put_exit_json(const char *id, const exit_info *ei) {
        json_object *o = NULL;
        ck_assert_int_eq(exit_info_to_json(ei, &o), 0);
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        char *d = task_dir(id);
        free(tf_put(d, EXIT_JSON_NAME, s, strlen(s)));
        json_object_put(o);
        free(d);
}

START_TEST(readopt_exited) {
        Task *t = running_task("oc_exited", 0);
        exit_info ei = {.has_exit_code = true,
                        .exit_code = 3,
                        .signal = (char *) "SIGTERM",
                        .spawn_error = (char *) "could not start",
                        .ended_at_ms = UINT64_C(1767225600000), /* 2026-01-01T00:00:00.000Z */
                        .stop_reason = (char *) "disk_quota_exceeded",
                        .stop_detail = (char *) "used 2 of 1 bytes"};
        put_exit_json(t->id, &ei);
        /* a disk reserve the killed shim left behind goes */
        char *d = task_dir(t->id);
        char *reserve = tf_put(d, DISK_RESERVE_NAME, "x", 1);
        ck_assert_int_eq(monitor_readopt(t, &cb), MONITOR_READOPT_EXITED);
        int64_t code = -1;
        ck_assert(task_record_get_int(&t->rec, TASK_KEY_exit_code, &code));
        ck_assert_int_eq(code, 3);
        ck_assert_str_eq(strnull(t->rec.signal), "SIGTERM");
        ck_assert_str_eq(strnull(t->rec.spawn_error), "could not start");
        ck_assert_str_eq(strnull(t->rec.failure_reason), "disk_quota_exceeded");
        ck_assert_str_eq(strnull(t->rec.failure_detail), "used 2 of 1 bytes");
        ck_assert_str_eq(strnull(t->rec.ended_at), "2026-01-01T00:00:00.000Z");
        ck_assert_int_eq(access(reserve, F_OK), -1);
        /* nothing watched, no callback: the caller settles it */
        ck_assert_ptr_null(t->shim_source);
        ck_assert_uint_eq(n_exited, 0);

        /* a plain exit: no signal, no stop reason; an earlier spawnError and
         * failure reason of the record are not invented over */
        Task *p = running_task("oc_plain", 0);
        put_exit_json(p->id, &(exit_info) {.has_exit_code = true, .exit_code = 0, .ended_at_ms = 1});
        ck_assert_int_eq(monitor_readopt(p, &cb), MONITOR_READOPT_EXITED);
        ck_assert(task_record_get_int(&p->rec, TASK_KEY_exit_code, &code));
        ck_assert_int_eq(code, 0);
        ck_assert_ptr_null(p->rec.signal);
        ck_assert_ptr_null(p->rec.spawn_error);
        ck_assert_ptr_null(p->rec.failure_reason);
        ck_assert_str_eq(strnull(p->rec.ended_at), "1970-01-01T00:00:00.001Z");
        /* killed by a signal: exitCode null */
        Task *k = running_task("oc_killed", 0);
        put_exit_json(k->id, &(exit_info) {.signal = (char *) "SIGKILL", .ended_at_ms = 1000});
        ck_assert_int_eq(monitor_readopt(k, &cb), MONITOR_READOPT_EXITED);
        ck_assert(!task_record_get_int(&k->rec, TASK_KEY_exit_code, &code));
        ck_assert_str_eq(strnull(k->rec.signal), "SIGKILL");
        free(reserve), free(d);
}
END_TEST

/* A shim that still runs is watched again; its exit reaches the callback. */
START_TEST(readopt_watching) {
        char *exe = sleep_as("taskferry-shim");
        pid_t pid = spawn_child(exe, false);
        Task *t = running_task("oc_watch", 0);
        /* its pid from launch.json, the record saying nothing */
        json_object *o = NULL;
        ck_assert_int_eq(launch_info_to_json(&(launch_info) {.shim_pid = pid, .worker_pid = pid, .started_at_ms = 1}, &o),
                         0);
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        char *d = task_dir(t->id);
        free(tf_put(d, LAUNCH_JSON_NAME, s, strlen(s)));
        json_object_put(o);
        ck_assert_int_eq(monitor_readopt(t, &cb), MONITOR_READOPT_WATCHING);
        ck_assert_int_eq(t->shim_pid, pid);
        ck_assert_ptr_nonnull(t->shim_source);
        tf_run_loop_ms(&m, 50);
        ck_assert_uint_eq(n_exited, 0);
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        for (int i = 0; i < 100 && !n_exited; i++) tf_run_loop_ms(&m, 20);
        ck_assert_uint_eq(n_exited, 1);
        ck_assert_int_eq(t->shim_pid, 0);
        ck_assert_ptr_null(t->shim_source);
        /* it left no exit.json: the task says so */
        ck_assert_ptr_nonnull(strstr(strempty(t->rec.spawn_error), "without reporting the worker's exit status"));
        ck_assert(task_record_is_set(&t->rec, TASK_KEY_ended_at));
        /* reaped by the monitor (it was our child) */
        siginfo_t si;
        ck_assert_int_eq(wait_for_terminate_nohang(pid, &si), -ECHILD);
        free(d), free(exe);
}
END_TEST

/* ---- signals ---- */

START_TEST(signal_without_a_pid) {
        Task *t = running_task("oc_nosig", 0);
        ck_assert_int_eq(task_signal(t, SIGTERM), -ESRCH);
        ck_assert_int_eq(task_terminate(t, 100), -ESRCH);
        ck_assert_ptr_null(t->kill_timer);
}
END_TEST

/* A worker that ignores SIGTERM: it is signalled, lives through the grace,
 * and the timer's SIGKILL ends it with its whole group. */
static int term_pipe[2];

static pid_t spawn_stubborn(pid_t *ret_member) {
        ck_assert_int_eq(pipe2(term_pipe, O_CLOEXEC), 0);
        pid_t pid;
        int r = safe_fork_full("stubborn", NULL, (int[]) {term_pipe[1]}, 1,
                               FORK_RESET_SIGNALS | FORK_CLOSE_ALL_FDS | FORK_NEW_PROCESS_GROUP, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                sigset_t ss;
                sigemptyset(&ss);
                sigaddset(&ss, SIGTERM);
                sigprocmask(SIG_BLOCK, &ss, NULL);
                /* a second member of its group (SIGTERM blocked from birth) */
                pid_t member = fork();
                if (member < 0) _exit(127);
                if (member == 0)
                        for (;;) pause();
                if (write(term_pipe[1], &member, sizeof member) != sizeof member) _exit(127);
                for (;;) {
                        int sig = 0;
                        if (sigwait(&ss, &sig) == 0 && sig == SIGTERM) {
                                char c = 't';
                                (void) write(term_pipe[1], &c, 1);
                        }
                }
        }
        close(term_pipe[1]);
        ck_assert_int_eq(read(term_pipe[0], ret_member, sizeof *ret_member), (ssize_t) sizeof *ret_member);
        return pid;
}

static bool got_term(int ms) {
        struct pollfd p = {.fd = term_pipe[0], .events = POLLIN};
        if (poll(&p, 1, ms) != 1) return false;
        char c = 0;
        return read(term_pipe[0], &c, 1) == 1 && c == 't';
}

static Task *worker_task(const char *id, pid_t pid) {
        return tf_taskf(&m, "{\"id\":\"%s\",\"status\":\"running\",\"changesetStatus\":\"none\",\"pid\":%d}", id,
                        (int) pid);
}

START_TEST(terminate_then_kill_after_grace) {
        pid_t member;
        pid_t pid = spawn_stubborn(&member);
        int member_fd = pidfd_open(member, 0);
        ck_assert_int_ge(member_fd, 0);
        Task *t = worker_task("oc_term", pid);
        /* a grace long enough that a slow SIGTERM (a loaded machine) still
         * leaves some of it */
        ck_assert_int_eq(task_terminate(t, 2000), 0);
        ck_assert_ptr_nonnull(t->kill_timer);
        ck_assert(got_term(1500));
        /* within the grace it lives */
        tf_run_loop_ms(&m, 100);
        ck_assert(child_alive(pid));
        ck_assert(!ends_within(member_fd, 0));
        /* after it, SIGKILL to the group */
        tf_run_loop_ms(&m, 2500);
        ck_assert_ptr_null(t->kill_timer);
        siginfo_t si;
        ck_assert_int_eq(wait_for_terminate(pid, &si), 0);
        ck_assert_int_eq(si.si_code, CLD_KILLED);
        ck_assert_int_eq(si.si_status, SIGKILL);
        ck_assert(ends_within(member_fd, 5000));
        close(member_fd);
        close(term_pipe[0]);
}
END_TEST

/* A task that left running before the grace ends is not killed; a second
 * terminate replaces the first timer; monitor_stop_kill_timer drops it. */
START_TEST(terminate_spares_a_task_that_left_running) {
        pid_t member;
        pid_t pid = spawn_stubborn(&member);
        Task *t = worker_task("oc_spared", pid);
        ck_assert_int_eq(task_terminate(t, 200), 0);
        ck_assert(got_term(2000));
        t->rec.status = TASK_DONE; /* settled meanwhile (the lifecycle's move) */
        tf_run_loop_ms(&m, 400);
        ck_assert_ptr_null(t->kill_timer);
        ck_assert(child_alive(pid));

        t->rec.status = TASK_RUNNING;
        ck_assert_int_eq(task_terminate(t, 5000), 0);
        ck_assert(got_term(2000));
        sd_event_source *first = t->kill_timer;
        ck_assert_ptr_nonnull(first);
        ck_assert_int_eq(task_terminate(t, 200), 0); /* the earlier escalation dropped */
        ck_assert(got_term(2000));
        monitor_stop_kill_timer(t);
        ck_assert_ptr_null(t->kill_timer);
        tf_run_loop_ms(&m, 400);
        ck_assert(child_alive(pid));

        /* and with the short one armed last, it fires */
        ck_assert_int_eq(task_terminate(t, 100), 0);
        tf_run_loop_ms(&m, 400);
        siginfo_t si;
        ck_assert_int_eq(wait_for_terminate(pid, &si), 0);
        ck_assert_int_eq(si.si_status, SIGKILL);
        (void) kill(member, SIGKILL);
        close(term_pipe[0]);
}
END_TEST

/* A worker pid that leads no group gets the signal itself; one that is gone
 * already is no error; before the worker is known the shim gets it. */
START_TEST(signal_falls_back) {
        char *slp = sleep_as("sleep");
        pid_t pid = spawn_child(slp, false); /* in the test's group */
        Task *t = worker_task("oc_nogroup", pid);
        ck_assert_int_eq(task_signal(t, SIGTERM), 0);
        siginfo_t si;
        ck_assert_int_eq(wait_for_terminate(pid, &si), 0);
        ck_assert_int_eq(si.si_status, SIGTERM);
        /* reaped: neither group nor pid exists */
        ck_assert_int_eq(task_signal(t, SIGTERM), 0);

        pid_t shim = spawn_child(slp, false);
        Task *s = running_task("oc_shimsig", 0);
        s->shim_pid = shim;
        ck_assert_int_eq(task_signal(s, SIGTERM), 0);
        ck_assert_int_eq(wait_for_terminate(shim, &si), 0);
        ck_assert_int_eq(si.si_status, SIGTERM);
        s->shim_pid = 0;
        free(slp);
}
END_TEST

TF_MAIN("monitor", "monitor", setup, teardown, 60, unlaunch_busy_when_the_shim_wrote, unlaunch_without_a_pid,
        unlaunch_leaves_a_stranger, unlaunch_leaves_another_daemon, unlaunch_kills_a_held_child,
        unlaunch_busy_for_a_running_shim, readopt_gone, readopt_exited, readopt_watching, signal_without_a_pid,
        terminate_then_kill_after_grace, terminate_spares_a_task_that_left_running, signal_falls_back)
