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

#include "change.h"
#include "executor-home.h"
#include "jobs.h"
#include "journal.h"
#include "launch.h"
#include "manager.h"
#include "methods.h"
#include "monitor.h"
#include "notify.h"
#include "peer.h"
#include "scheduler.h"
#include "server.h"
#include "settings.h"
#include "settle.h"
#include "store.h"
#include "sweep.h"
#include "task.h"
#include "tasks.h"
#include "wait.h"
#include "watchdog.h"
