#pragma once
/* The daemon's side of Type=notify (notify.c; sd_notify(3), sd_event(3)
 * sd_event_set_watchdog). Owns Manager.notify.
 *
 * - READY=1 once recovery is done (notify_ready), with STATUS=.
 * - STATUS="<q> queued, <r> running, <n> tasks" (the status counts of
 *   task.list), sent again after every task state change, at most once per
 *   event-loop iteration (a defer source; nothing is sent without a
 *   NOTIFY_SOCKET).
 * - Watchdog keep-alives (WatchdogSec= in taskferry.service): sd-event sends
 *   WATCHDOG=1 itself once sd_event_set_watchdog() is on (a no-op without
 *   WATCHDOG_USEC).
 * - Idle exit: only when systemd passed the listening socket (a self-bound
 *   socket has nobody to start the daemon again) and idle_exit_sec
 *   (TASKFERRY_IDLE_EXIT_SEC, config idleExitSec, default 300; 0 never) > 0.
 *   Idle (notify_manager_idle) is: no queued or running task, no client
 *   connection (subscriptions and parked waits live on connections), no
 *   forked job (settlement, accept/reject, views, summaries) and no
 *   accept/reject waiting for its workspace. After every loop iteration that
 *   dispatched something (a post source) an idle daemon arms a timer for
 *   idle_exit_sec, a busy one disarms it; when it fires and the daemon is
 *   still idle, the daemon stops accepting (the listening fd stays systemd's:
 *   it is neither closed early nor unlinked, so a client connecting from
 *   here on waits in its backlog and makes systemd start the daemon again),
 *   sends STOPPING=1 and leaves the loop with 0.
 * - STOPPING=1 at exit (notify_stopping). */

#include <stdbool.h>
#include <stdint.h>

typedef struct Manager Manager;
typedef struct Notify Notify;

/* Set up m->notify and the task observer that keeps STATUS= current. Call
 * before manager_load_tasks. 0, -ENOMEM. */
int notify_init(Manager *m);
/* Recovery is done and the socket is ours: READY=1 with STATUS=, the
 * watchdog, and (when socket-activated and idle_exit_sec > 0) idle exit.
 * 0 or -errno from sd-event (then the daemon runs without idle exit). */
int notify_ready(Manager *m);
/* The counts changed outside a transition (a new dispatch): send STATUS=
 * again at the end of this iteration. */
void notify_status_changed(Manager *m);
/* Is the daemon idle (above)? */
bool notify_manager_idle(const Manager *m);
/* True once idle exit ended the loop (main.c then exits 0). */
bool notify_idle_exited(const Manager *m);
/* STOPPING=1 (at exit). */
void notify_stopping(Manager *m);
void notify_free(Manager *m);
