#pragma once
/* taskferryd put together (daemon.c), and an umbrella of every internal
 * header for the code that drives a whole Manager: main.c and the unit
 * suites. No module includes it: a module's .c includes only the headers it
 * uses, and a new declaration goes into its module's header.
 * The layers, bottom first (docs/architecture.md):
 *
 *   core/      the task record and its observers, the table, the store, the
 *              launch options, the scheduler, cooldowns, jobs, settings,
 *              the env file, callers
 *   run/       the lifecycle (the one owner of a task's life) and the work it
 *              drives: launch, monitor, watchdog, settlement, accept/reject,
 *              scopes, executor homes, boot sweeps
 *   features/  advisor sessions, report summaries, activity
 *   api/       the socket server, the method table and handlers, the
 *              dispatch policy, views, events, waits, stats
 *   systemd/   D-Bus, journald, sd_notify
 *
 * Nothing here blocks the loop on git, child processes or large reads: such
 * work runs in forked jobs (jobs.h) watched through pidfds. */

#include "core/cooldown.h"
#include "core/env-file.h"
#include "core/jobs.h"
#include "core/launch-options.h"
#include "core/manager.h"
#include "core/peer.h"
#include "core/scheduler.h"
#include "core/settings.h"
#include "core/store.h"
#include "core/task-table.h"
#include "core/task.h"
#include "core/user-bus.h"
#include "run/change.h"
#include "run/executor-home.h"
#include "run/launch.h"
#include "run/lifecycle.h"
#include "run/monitor.h"
#include "run/gate.h"
#include "run/host-watch.h"
#include "run/scope.h"
#include "run/settle.h"
#include "run/sweep.h"
#include "run/watchdog.h"
#include "features/activity.h"
#include "features/advisor.h"
#include "features/summary.h"
#include "api/dispatch-policy.h"
#include "api/events.h"
#include "api/handlers.h"
#include "api/methods.h"
#include "api/server.h"
#include "api/stats.h"
#include "api/task-views.h"
#include "api/views.h"
#include "api/wait.h"
#include "systemd/bus.h"
#include "systemd/journal.h"
#include "systemd/notify.h"

/* Every module's state on m (m->event, m->paths and m->settings set): the
 * user bus, scopes, the server (no socket yet), advisor sessions, the
 * lifecycle; then the task observers, in order: the table's counts and
 * order, the store, the parked advisor calls, summaries, activity, events,
 * D-Bus, journald, sd_notify, and last the parked waits, so that a caller
 * who hears a task settled finds all of the settlement done (a summary's
 * snapshot gone, its events sent). Before the load and coldplug, so that
 * coldplug's moves count as emitted. 0, -ENOMEM. */
int daemon_setup(Manager *m);
/* Undo it (and the load): every task, job and connection, each module's
 * state, the loop, settings and paths. */
void daemon_free(Manager *m);
