/* The daemon put together (daemon.h): every module's state, and every task
 * observer in the order it hears of a change. main.c runs it; the unit
 * suites that drive a whole daemon set one up the same way. */

#include "daemon.h"
#include "process-util.h"
#include "macro.h"

int daemon_setup(Manager *m) {
        int r;
        /* the user bus (user-bus.h), for the user manager's transient scopes
         * (scope.h) and, once the socket is ours, the D-Bus API (bus.h); none
         * is no error (workers then run in process groups) */
        (void) user_bus_open(m);
        r = scope_setup(m);
        /* the sandbox's masks of /etc and /opt, kept current for every launch */
        host_watch_setup(m);
        if (r >= 0) r = server_init(m);
        if (r >= 0) r = advisor_init(m);
        if (r >= 0) r = lifecycle_init(m);
        if (r < 0) return r;
        /* the observers of every task, in the order they hear of a change:
         * the table's counts and order, the store, the features, the
         * announcements, and last the parked waits, so that a caller who
         * hears a task settled finds all of the settlement done (a summary's
         * snapshot gone, its events sent). Before the load and coldplug, so
         * that coldplug's moves to unknown count as emitted. */
        r = task_table_init(m);
        if (r >= 0) r = store_init(m);
        if (r >= 0) r = advisor_method_init(m);
        if (r >= 0) r = summary_init(m);
        if (r >= 0) r = activity_init(m);
        if (r >= 0) r = events_init(m);
        if (r >= 0) r = bus_init(m);
        if (r >= 0) r = journal_init(m);
        if (r >= 0) r = notify_init(m);
        if (r >= 0) r = wait_init(m);
        if (r < 0) return r;
        return 0;
}

void daemon_free(Manager *m) {
        if (m->server) server_close(m, "shutdown");
        bus_free(m);
        change_jobs_free(m);
        jobs_free(m);
        advisor_method_free(m);
        advisor_free(m);
        summary_free(m);
        for (size_t i = 0; i < m->n_tasks; i++) {
                Task *t = m->tasks[i];
                wait_drop_task(t);
                sd_event_source_disable_unref(t->shim_source);
                sd_event_source_disable_unref(t->status_source);
                monitor_stop_kill_timer(t);
                scope_forget(t);
                gate_free(t);
                watchdog_stop(t);
                if (m->task_sockets) m->task_sockets->close(t);
                safe_close(t->shim_pidfd);
                safe_close(t->status_fd);
                task_free(t);
        }
        free(m->tasks);
        m->tasks = NULL;
        activity_free(m);
        env_file_free(m);
        events_free(m);
        scope_free(m);
        host_watch_teardown(m);
        user_bus_close(m);
        notify_free(m);
        journal_free(m);
        server_free(m);
        manager_free_task_observers(m);
        manager_free_root_cache(m);
        m->n_tasks = 0;
        store_done(m);
        scheduler_free(m);
        cooldowns_free(m);
        m->event = sd_event_unref(m->event);
        settings_done(&m->settings);
        tf_paths_done(&m->paths);
}
