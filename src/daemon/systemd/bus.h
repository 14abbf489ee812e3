#pragma once
/* The D-Bus API: the daemon owns BUS_NAME on the user bus (the daemon's one
 * connection, user-bus.h, on its sd-event loop), with
 *
 *   BUS_MANAGER_PATH  org.taskferry.Taskferry1.Manager
 *       properties  Version s (the package version, TASKFERRY_VERSION),
 *                   Tasks u, QueuedTasks u, RunningTasks u (visible tasks:
 *                   internal summary tasks are not counted, as the
 *                   protocol's events do not show them), the limits of the
 *                   Settings (one row each in bus.c's limit table, type t:
 *                   MaxConcurrentTasks, MaxDispatchesPerWindow,
 *                   DispatchWindowMs, CancelGraceMs, TaskDiskMax, ...) and
 *                   ProviderLimits a(stt) (provider, maxConcurrentTasks,
 *                   maxDispatchesPerWindow; 0 = unset)
 *       methods     ListTasks() → a(sos): (id, object path, status) per task
 *                   the caller may see, in table (dispatch) order;
 *                   CancelTask(s id) → s note: the protocol's task.cancel
 *                   (the lifecycle's task_cancel, the peer rules of peer.c
 *                   for the caller's pid, which sd_bus_query_sender_creds
 *                   asks the bus for: one synchronous round trip per call);
 *                   errors org.taskferry.Taskferry1.UnknownTask,
 *                   org.freedesktop.DBus.Error.AccessDenied,
 *                   org.freedesktop.DBus.Error.Failed
 *       signal      TaskStateChanged(s id, o path, s old_status, s new_status):
 *                   every status change of a task; old_status "" when the
 *                   task was just dispatched (new_status "queued")
 *   BUS_TASK_PREFIX/<sd_bus_path_encode(id)>  org.taskferry.Taskferry1.Task
 *       one property per status field (bus.c's property table: Id, Status,
 *       ChangesetStatus, Directory, Model, Executor, ExitCode, FailureReason,
 *       Unit, ...), strings spelled as the protocol spells them; a JSON null
 *       is "" (s), -1 (x) or false (b). PropertiesChanged (all of them) on
 *       every transition. Never the prompt, its preview, the caller's
 *       environment or the launch request.
 *   org.freedesktop.DBus.ObjectManager at BUS_MANAGER_PATH: InterfacesAdded
 *       when a task is dispatched (tasks are never deleted).
 *
 * No bus (unset address, connect or name failure): one warning, and the
 * daemon carries on without it. */

#include "core/manager.h"
#include "core/task.h"

#define BUS_NAME "org.taskferry.Taskferry1"
#define BUS_MANAGER_PATH "/org/taskferry/Taskferry1"
#define BUS_MANAGER_INTERFACE "org.taskferry.Taskferry1.Manager"
#define BUS_TASK_PREFIX "/org/taskferry/Taskferry1/task"
#define BUS_TASK_INTERFACE "org.taskferry.Taskferry1.Task"

/* Register the task observer (call before manager_load_tasks). 0, -ENOMEM. */
int bus_init(Manager *m);
/* On the daemon's user-bus connection (user-bus.h): export the objects and
 * request BUS_NAME asynchronously. Never fails the start: without a bus it
 * logs one warning and returns 0. Call once the daemon owns its socket. */
int bus_start(Manager *m);
/* Free the state (shutdown); the connection is user-bus.c's to close. */
void bus_free(Manager *m);

/* The object path of a task id (sd_bus_path_encode), malloc'd; NULL on ENOMEM. */
char *bus_task_path(const char *id);
