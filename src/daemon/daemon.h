#pragma once
/* taskferryd internals, all of them: an umbrella for tests that drive a
 * whole Manager. No module includes it: a module's .c includes only the
 * headers it uses, and a new declaration goes into its module's header.
 * One header per module, each owning its struct (CONTRIBUTING.md "Where
 * things go"):
 *
 *   manager.h    Manager (the top object), TaskObserver
 *   settings.h   Settings (read once at start)
 *   task.h       TaskRecord, the status enums, task_transition, Task
 *   tasks.h      the task table and its protocol views (tasks.c)
 *   store.h      tasks.json (store.c)
 *   scheduler.h  FIFO under the concurrency cap (scheduler.c)
 *   launch.h     env, launch spec, spawn of the shim (launch.c)
 *   monitor.h    the shim of a running task, re-adoption (monitor.c)
 *   settle.h     exit → changeset → final state (settle.c)
 *   wait.h       parked task.wait requests (wait.c)
 *   server.h     Listener, Connection, Request (server.c)
 *   jobs.h       Job: forked blocking work (jobs.c)
 *   peer.h       Caller: who is calling (peer.c)
 *   change.h     ChangeJob: accept/reject, serialized per workspace (change.c)
 *   methods.h    the method table, MethodError, the handlers (methods.c, handlers.c)
 *   sweep.h      boot sweeps (sweep.c)
 *   executor-home.h  per-task executor homes (executor-home.c)
 *   journal.h    journald entries of task state changes (journal.c)
 *   notify.h     Notify: READY/STATUS/watchdog/idle exit/STOPPING (notify.c)
 *
 * Nothing here blocks the loop on git, child processes or large reads: such
 * work runs in forked jobs (jobs.h) watched through pidfds. */

#include "run/change.h"
#include "run/executor-home.h"
#include "core/jobs.h"
#include "systemd/journal.h"
#include "run/launch.h"
#include "core/manager.h"
#include "api/methods.h"
#include "run/monitor.h"
#include "systemd/notify.h"
#include "core/peer.h"
#include "core/scheduler.h"
#include "api/server.h"
#include "core/settings.h"
#include "run/settle.h"
#include "core/store.h"
#include "run/sweep.h"
#include "core/task.h"
#include "core/tasks.h"
#include "api/wait.h"
#include "run/watchdog.h"
