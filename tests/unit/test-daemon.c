/* daemon.c: daemon_setup puts every module together and daemon_free takes
 * it all apart: after a setup and a teardown the process holds exactly the
 * fds it held before (the loop's epoll and timer fds included: an event
 * source left behind keeps its loop, and so those fds, alive), whatever the
 * daemon did meanwhile: tasks, their transitions (the store's debounce
 * timer), a dispatch answered after the scheduler's tick, a forked job still
 * running, a client connection. */

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon-fixture.h"
#include "unit.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

static Manager m;

/* The open fds of this process, as "0,1,2,...". */
static char *fds(void) {
        DIR *d = opendir("/proc/self/fd");
        ck_assert_ptr_nonnull(d);
        bool open_fd[4096] = {false};
        for (struct dirent *e; (e = readdir(d));) {
                int fd = atoi(e->d_name);
                if (e->d_name[0] != '.' && fd != dirfd(d) && fd >= 0 && fd < 4096) open_fd[fd] = true;
        }
        closedir(d);
        char *s = strdup("");
        for (int fd = 0; fd < 4096; fd++)
                if (open_fd[fd]) {
                        char *n = strdup_printf("%s%s%d", s, *s ? "," : "", fd);
                        free(s);
                        s = n;
                }
        return s;
}

static void setup(void) {
        unsetenv("DBUS_SESSION_BUS_ADDRESS");
        unsetenv("XDG_RUNTIME_DIR");
}

START_TEST(an_idle_daemon_leaves_nothing) {
        char *before = fds();
        tf_daemon_setup(&m, "test-daemon");
        ck_assert_ptr_nonnull(m.server);
        ck_assert_ptr_nonnull(m.event);
        tf_daemon_teardown(&m);
        ck_assert_ptr_null(m.event);
        ck_assert_ptr_null(m.tasks);
        char *after = fds();
        ck_assert_str_eq(after, before);
        /* and again: nothing of the first is in the way */
        tf_daemon_setup(&m, "test-daemon");
        tf_daemon_teardown(&m);
        free(after);
        after = fds();
        ck_assert_str_eq(after, before);
        free(before);
        free(after);
}
END_TEST

static json_object *run_slow(void *userdata, int *error) {
        sleep(30); /* still running at teardown: forgotten, and killed with the test */
        return NULL;
}
static void slow_done(Manager *mm, void *userdata, json_object *result, int error) { ck_abort_msg("called back"); }

static int drop_entry(const struct iovec *iov, int n) { return 0; }

START_TEST(a_busy_daemon_leaves_nothing) {
        char *before = fds();
        tf_daemon_setup(&m, "test-daemon");
        m.settings.max_concurrent_tasks = 0;
        /* libsystemd keeps its journal socket open for the process's life once
         * an entry is sent: not the daemon's fd to close */
        journal_set_sender(&m, drop_entry);
        char *work = strdup_printf("%s/work", m.paths.home);
        ck_assert_int_eq(mkdir(work, 0755), 0);
        /* a task moved: the store arms its debounce timer */
        Task *t = tf_task(&m, "{\"id\":\"oc_a\",\"status\":\"queued\",\"changesetStatus\":\"none\",\"directory\":\"/w\"}");
        ck_assert_int_eq(task_transition(t, TASK_CANCELLED, CHANGESET_NONE), 1);
        /* a client and a dispatch, answered after the tick */
        TfPeer peer = tf_peer_new(&m, 1);
        char *line = strdup_printf("{\"version\":1,\"id\":\"d\",\"method\":\"task.dispatch\",\"params\":{\"prompt\":\"x\","
                                   "\"directory\":\"%s\",\"model\":\"a/b\"}}",
                                   work);
        method_dispatch(&m, tf_request(&m, peer.conn, line, false));
        free(line);
        tf_run_pending(&m);
        json_object *f = tf_one_frame(peer.fd);
        ck_assert(json_get_bool(f, "ok", false));
        json_object_put(f);
        /* a job still running, and a wait parked with its timer */
        ck_assert_int_eq(job_start(&m, run_slow, slow_done, NULL), 0);
        pid_t job = m.jobs->pid;
        Request *w = tf_request(&m, peer.conn,
                                "{\"version\":1,\"id\":\"w\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"oc_a\","
                                "\"timeoutMs\":60000}}",
                                true);
        method_dispatch(&m, w);
        tf_run_loop_ms(&m, 5);
        /* the daemon first: it lets go of the requests that hold the connection */
        tf_daemon_teardown(&m);
        tf_peer_free(&peer);
        sigkill_wait(job);
        char *after = fds();
        ck_assert_str_eq(after, before);
        free(before);
        free(after);
        free(work);
}
END_TEST

TF_MAIN("daemon", "daemon", setup, NULL, 60, an_idle_daemon_leaves_nothing, a_busy_daemon_leaves_nothing)
