#pragma once
/* The monitor (monitor.c): a running task's shim, watched from the loop. */

#include <stdbool.h>

typedef struct Task Task;

/* monitor.c: the shim of a running task (status pipe, pidfd), re-adoption,
 * signals. Owns Task.shim_pid/shim_pidfd/shim_source/status_fd/status_*. */
/* Watch t's freshly spawned shim (t->shim_pid): its pidfd and the status
 * pipe status_fd (taken). On the shim's exit: read exit.json, settle. */
void monitor_watch_shim(Task *t, int status_fd);
/* kill(-pid, sig) to the worker's process group (ESRCH → kill(pid)); before
 * the worker's pid is known, to the shim, which forwards it. -errno. */
int task_signal(Task *t, int sig);
/* Terminate a running task as task.cancel does (lifecycle.md §7.1, §6.2
 * failRunningTask): stop its watchdog, drop an earlier escalation timer,
 * SIGTERM every process of its scope unit (scope_kill; without one, the
 * worker's process group: task_signal), and after grace_ms
 * SIGKILL it if the task is still running. The one kill path of cancel and
 * the watchdog. 0, or -errno of the SIGTERM (then no timer is armed). */
int task_terminate(Task *t, uint64_t grace_ms);
/* At daemon start, for a task recorded as running: watch its shim again if it
 * still runs, or settle it from exit.json if it finished meanwhile. Returns
 * true if the task stays "running" (adopted or settling), false if its shim
 * is gone without an exit status. */
bool task_readopt(Task *t);
