/* Type=notify: READY, STATUS counts, watchdog, idle exit, STOPPING
 * (notify.h says the rules). */

#include <inttypes.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>

#include "core/manager.h"
#include "systemd/notify.h"
#include "api/server.h"
#include "core/task.h"
#include "log.h"
#include "macro.h"

struct Notify {
        bool enabled;              /* NOTIFY_SOCKET is set: STATUS= goes somewhere */
        bool ready;                /* READY=1 sent */
        sd_event_source *status;   /* defer: send STATUS= at the end of this iteration */
        sd_event_source *post;     /* after every dispatching iteration: arm or disarm the idle timer */
        sd_event_source *idle;     /* the idle timer (off while busy) */
        bool idle_armed;
        bool idle_exited;
        uint64_t idle_usec;
};

static int send_status(sd_event_source *s, void *userdata) {
        Manager *m = userdata;
        (void) sd_notifyf(false, "STATUS=%" PRId64 " queued, %" PRId64 " running, %zu tasks",
                          m->status_counts[TASK_QUEUED], m->status_counts[TASK_RUNNING], m->n_tasks);
        return 0;
}

void notify_status_changed(Manager *m) {
        Notify *n = m->notify;
        if (!n || !n->enabled || !n->ready || !n->status) return;
        (void) sd_event_source_set_enabled(n->status, SD_EVENT_ONESHOT);
}

static void status_observer(Task *t, TaskStatus old_status, ChangesetStatus old_cs, void *userdata) {
        if (old_status != t->rec.status) notify_status_changed(t->m);
}

static void added_observer(Task *t, void *userdata) { notify_status_changed(t->m); }

int notify_init(Manager *m) {
        if (m->notify) return 0;
        Notify *n = calloc(1, sizeof *n);
        if (!n) return -ENOMEM;
        n->enabled = !isempty(getenv("NOTIFY_SOCKET"));
        int r = manager_add_observer(m, &(TaskObserver) {.added = added_observer, .transitioned = status_observer});
        if (r < 0) {
                free(n);
                return r;
        }
        m->notify = n;
        return 0;
}

bool notify_manager_idle(const Manager *m) {
        return m->status_counts[TASK_QUEUED] == 0 && m->status_counts[TASK_RUNNING] == 0 && !server_has_connections(m) &&
               !m->jobs && !m->change_jobs;
}

bool notify_idle_exited(const Manager *m) { return m->notify && m->notify->idle_exited; }

static int on_idle(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        Notify *n = m->notify;
        n->idle_armed = false;
        if (!notify_manager_idle(m) || m->shutting_down) return 0; /* the post source arms it again */
        log_info("idle for %" PRIu64 " s, exiting; systemd keeps the socket and starts the daemon on the next connection",
                 m->settings.idle_exit_sec);
        n->idle_exited = true;
        m->shutting_down = true;
        /* from here on a new client waits in the listening socket's backlog,
         * which systemd holds: it starts the daemon again for it */
        server_stop_accepting(m);
        (void) sd_notify(false, "STOPPING=1\nSTATUS=idle, exiting");
        return sd_event_exit(m->event, 0);
}

static int on_post(sd_event_source *s, void *userdata) {
        Manager *m = userdata;
        Notify *n = m->notify;
        if (m->shutting_down) return 0;
        bool idle = notify_manager_idle(m);
        if (idle && !n->idle_armed) {
                uint64_t now;
                if (sd_event_now(m->event, CLOCK_MONOTONIC, &now) < 0) return 0;
                if (sd_event_source_set_time(n->idle, now + n->idle_usec) < 0) return 0;
                if (sd_event_source_set_enabled(n->idle, SD_EVENT_ONESHOT) < 0) return 0;
                n->idle_armed = true;
        } else if (!idle && n->idle_armed) {
                (void) sd_event_source_set_enabled(n->idle, SD_EVENT_OFF);
                n->idle_armed = false;
        }
        return 0;
}

int notify_ready(Manager *m) {
        Notify *n = m->notify;
        if (!n) return -EINVAL;
        int r = 0;
        if (n->enabled && !n->status) {
                r = sd_event_add_defer(m->event, &n->status, send_status, m);
                if (r >= 0) r = sd_event_source_set_enabled(n->status, SD_EVENT_OFF);
                if (r < 0) log_warning_errno(r, "cannot set up STATUS= updates");
        }
        /* the watchdog keep-alives (WATCHDOG_USEC from WatchdogSec=) */
        int k = sd_event_set_watchdog(m->event, true);
        if (k < 0) log_warning_errno(k, "cannot enable the watchdog keep-alives");
        n->ready = true;
        (void) sd_notifyf(false, "READY=1\nSTATUS=%zu tasks loaded: %" PRId64 " queued, %" PRId64 " running\nMAINPID=%d",
                          m->n_tasks, m->status_counts[TASK_QUEUED], m->status_counts[TASK_RUNNING], (int) getpid());

        if (!m->server || m->server->self_bound || m->settings.idle_exit_sec == 0) return 0;
        n->idle_usec = m->settings.idle_exit_sec * UINT64_C(1000000);
        r = sd_event_add_time(m->event, &n->idle, CLOCK_MONOTONIC, 0, 0, on_idle, m);
        if (r >= 0) r = sd_event_source_set_enabled(n->idle, SD_EVENT_OFF);
        if (r >= 0) r = sd_event_add_post(m->event, &n->post, on_post, m);
        if (r < 0) {
                n->idle = sd_event_source_disable_unref(n->idle);
                return log_warning_errno(r, "cannot set up idle exit; the daemon stays up");
        }
        /* idle already (nothing may dispatch before the timer would be due) */
        return on_post(NULL, m);
}

void notify_stopping(Manager *m) {
        Notify *n = m->notify;
        if (n && n->idle_exited) return; /* sent with the decision */
        (void) sd_notify(false, "STOPPING=1");
}

void notify_free(Manager *m) {
        Notify *n = m->notify;
        if (!n) return;
        sd_event_source_disable_unref(n->status);
        sd_event_source_disable_unref(n->post);
        sd_event_source_disable_unref(n->idle);
        free(n);
        m->notify = NULL;
}
