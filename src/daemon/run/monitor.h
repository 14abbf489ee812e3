#pragma once
/* The monitor (monitor.c): a running task's shim, watched from the loop
 * through its pidfd and its status pipe; re-adoption of a shim that outlived
 * a daemon (the shim, not the daemon, owns the log and the exit status, so a
 * worker survives a daemon restart); the signals to the worker. Owns
 * Task.shim_pid/shim_pidfd/shim_source/status_*, Task.monitor and
 * Task.kill_timer. It moves no state: it tells its caller (the lifecycle)
 * what the shim reported. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct Task Task;

typedef struct MonitorCallbacks {
        /* the shim reported the worker's pid (recorded as the task's pid) */
        void (*worker_started)(Task *t);
        /* the shim exited: its exit.json is on the task (exitCode, signal,
         * spawnError, endedAt, and the shim's own stop reason), or a
         * spawnError says it reported none */
        void (*exited)(Task *t);
} MonitorCallbacks;

/* Watch t's freshly spawned shim (t->shim_pid): its pidfd and the status
 * pipe status_fd (taken); cb (static storage) hears what it reports. */
void monitor_watch_shim(Task *t, int status_fd, const MonitorCallbacks *cb);

/* At daemon start, for a task recorded as running: */
enum {
        MONITOR_READOPT_GONE,     /* its shim is gone without an exit status */
        MONITOR_READOPT_EXITED,   /* it ended meanwhile: its exit.json is on the task */
        MONITOR_READOPT_WATCHING, /* it still runs: watched again, cb hears its exit */
};
int monitor_readopt(Task *t, const MonitorCallbacks *cb);
/* At daemon start, for a task recorded as running whose launch request is
 * still on disk (its shim was never let go, launch.h launch_go): make sure
 * nothing of the launch runs. 0: nothing does (a held child left behind is
 * killed); -EBUSY: the shim ran all the same (its launch.json or exit.json is
 * there, or its recorded pid runs taskferry-shim): re-adopt it instead;
 * -ENOMEM. */
int monitor_unlaunch(Task *t);

/* Is pid a task's taskferry-shim (or the child a daemon forked for one),
 * pids being reused? */
bool monitor_pid_is_shim(pid_t pid);
/* kill(-pid, sig) to the worker's process group (ESRCH → kill(pid)); before
 * the worker's pid is known, to the shim, which forwards it. -errno. */
int task_signal(Task *t, int sig);
/* Terminate a running task (cancel, a watchdog's verdict): drop an earlier
 * escalation timer, SIGTERM every process of its scope unit (scope_kill;
 * without one, the worker's process group: task_signal), and after grace_ms
 * SIGKILL it if the task is still running. The one kill path. 0, or -errno
 * of the SIGTERM (then no timer is armed). */
int task_terminate(Task *t, uint64_t grace_ms);
/* Drop the escalation timer (the task left running). */
void monitor_stop_kill_timer(Task *t);
