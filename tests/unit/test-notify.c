/* notify.c alone (notify.h): what counts as idle for the idle exit. The
 * exit itself runs through the real daemon in test-systemd-notify. */

#include <check.h>
#include <stdlib.h>

#include "run/change.h"
#include "core/jobs.h"
#include "core/manager.h"
#include "api/server.h"
#include "systemd/notify.h"
#include "core/task.h"
#include "unit.h"

START_TEST(idle_means_nothing_to_do) {
        Manager m = {0};
        ck_assert(notify_manager_idle(&m));
        /* final tasks do not keep the daemon */
        m.status_counts[TASK_DONE] = 3;
        m.status_counts[TASK_CRASHED] = 1;
        m.status_counts[TASK_CANCELLED] = 1;
        m.status_counts[TASK_UNKNOWN] = 1;
        ck_assert(notify_manager_idle(&m));

        m.status_counts[TASK_QUEUED] = 1;
        ck_assert(!notify_manager_idle(&m));
        m.status_counts[TASK_QUEUED] = 0;
        m.status_counts[TASK_RUNNING] = 1;
        ck_assert(!notify_manager_idle(&m));
        m.status_counts[TASK_RUNNING] = 0;

        Server srv = {0};
        m.server = &srv;
        Connection c = {0};
        m.server->connections = &c; /* a client: a CLI call, a subscriber, a parked wait */
        ck_assert(!notify_manager_idle(&m));
        m.server->connections = NULL;

        Job j = {0};
        m.jobs = &j; /* a settlement, an accept's git, a tail */
        ck_assert(!notify_manager_idle(&m));
        m.jobs = NULL;

        ChangeJob cj = {0};
        m.change_jobs = &cj; /* an accept or reject waiting for its workspace */
        ck_assert(!notify_manager_idle(&m));
        m.change_jobs = NULL;
        ck_assert(notify_manager_idle(&m));
        ck_assert(!notify_idle_exited(&m));
}
END_TEST

TF_MAIN("notify", "idle", NULL, NULL, 0, idle_means_nothing_to_do)
