/* The daemon under systemd's protocols, without systemd (notify.h, macro.h's
 * log priorities): a datagram socket as NOTIFY_SOCKET sees READY=1, STATUS=
 * counts following a task, WATCHDOG=1 keep-alives and STOPPING=1; a
 * listening socket passed as fd 3 with LISTEN_FDS/LISTEN_PID (what
 * systemd-socket-activate does) makes it socket-activated: idle exit after
 * TASKFERRY_IDLE_EXIT_SEC with status 0, never while a task runs or a client
 * is connected, never when it bound the socket itself, and a client that
 * connects after the exit is served by the next daemon on the same fd with
 * the task still there; with JOURNAL_STREAM naming its stderr every line
 * carries a <N> priority, without it none does. */

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"

/* A datagram socket at <root>/notify, set as the world's NOTIFY_SOCKET. */
static int notify_socket(tf_world *w) {
        const char *path = tf_path(w->root, "notify");
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ck_assert_int_ge(fd, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        ck_assert_uint_lt(strlen(path), sizeof sa.sun_path);
        strcpy(sa.sun_path, path);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        tf_world_setenv(w, "NOTIFY_SOCKET", path);
        return fd;
}

/* Every datagram that arrives within ms, appended to *all (one per line). */
static void collect(int fd, int ms, char **all) {
        uint64_t end = mono_ms() + (uint64_t) ms;
        for (;;) {
                char buf[4096];
                ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
                if (n > 0) {
                        buf[n] = 0;
                        char *s = strdup_printf("%s%s\n", strempty(*all), buf);
                        free(*all);
                        *all = s;
                        continue;
                }
                if (mono_ms() >= end) return;
                usleep(10000);
        }
}

/* Collect until needle shows up (or ms pass); true if it did. */
static bool collect_until(int fd, int ms, char **all, const char *needle) {
        uint64_t end = mono_ms() + (uint64_t) ms;
        while (!(*all && strstr(*all, needle)) && mono_ms() < end) collect(fd, 50, all);
        return *all && strstr(*all, needle);
}

TF_WORLD_TEST_ENV(notify_ready_status_watchdog_stopping, "TASKFERRY_DISABLE_SANDBOX=1", "WATCHDOG_USEC=400000") {
        int nfd = notify_socket(w);
        tf_daemon_start(w);
        _cleanup_free_ char *all = NULL;
        ck_assert_msg(collect_until(nfd, 5000, &all, "READY=1"), "no READY=1: %s", strnull(all));
        ck_assert_msg(strstr(all, "STATUS=0 tasks loaded: 0 queued, 0 running"), "%s", all);
        /* keep-alives at least every 400 ms / 2 */
        free(all), all = NULL;
        collect(nfd, 1200, &all);
        ck_assert_msg(tf_count(all, "WATCHDOG=1") >= 3, "watchdog keep-alives in 1.2 s: %s", strnull(all));

        char *marker = strdup_printf("%s/go", w->root);
        char *prompt = strdup_printf("while [ ! -e %s ]; do sleep 0.05; done; echo hi", marker);
        char *id = tf_dispatch_shell(w, w->repo_parent, NULL, prompt);
        free(all), all = NULL;
        ck_assert_msg(collect_until(nfd, 10000, &all, "STATUS=0 queued, 1 running, 1 tasks"), "%s", strnull(all));
        tf_write(marker, "", 0, 0600);
        json_object *o = tf_wait_settled(w, id);
        ck_assert_str_eq(tf_jstr(o, "status"), "done");
        json_object_put(o);
        ck_assert_msg(collect_until(nfd, 5000, &all, "STATUS=0 queued, 0 running, 1 tasks"), "%s", strnull(all));

        /* not socket-activated: no idle exit, whatever the setting (none here) */
        free(all), all = NULL;
        kill(w->daemon_pid, SIGTERM);
        int st;
        ck_assert_int_eq(waitpid(w->daemon_pid, &st, 0), w->daemon_pid);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        collect(nfd, 100, &all);
        ck_assert_msg(all && strstr(all, "STOPPING=1"), "%s", strnull(all));
        close(nfd);
        free(marker), free(prompt), free(id);
}
END_TEST


TF_WORLD_TEST_ENV(idle_exit_when_socket_activated, "TASKFERRY_DISABLE_SANDBOX=1", "TASKFERRY_IDLE_EXIT_SEC=1") {
        int nfd = notify_socket(w);
        int lfd = tf_activation_socket(w);
        pid_t pid = tf_daemon_start_activated(w, lfd);
        char *marker = strdup_printf("%s/go", w->root);
        char *prompt = strdup_printf("while [ ! -e %s ]; do sleep 0.05; done; echo hi", marker);
        char *id = tf_dispatch_shell(w, w->repo_parent, NULL, prompt);
        /* a running task keeps it up well past the idle time */
        ck_assert_int_eq(tf_wait_exit(pid, 2500), -1);
        tf_write(marker, "", 0, 0600);
        json_object *o = tf_wait_settled(w, id);
        ck_assert_str_eq(tf_jstr(o, "status"), "done");
        json_object_put(o);
        /* settled, no client: gone within idle time + slack, with status 0 */
        int st = tf_wait_exit(pid, 5000);
        ck_assert_msg(st != -1, "the socket-activated daemon did not exit when idle");
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "wait status %d", st);
        w->daemon_pid = 0;
        _cleanup_free_ char *all = NULL;
        collect(nfd, 50, &all);
        ck_assert_msg(all && strstr(all, "STOPPING=1"), "%s", strnull(all));
        _cleanup_free_ char *log = tf_daemon_log(w);
        ck_assert_msg(strstr(log, "\ntaskferryd: info: idle for 1 s, exiting") || startswith(log, "taskferryd: info: idle for 1 s"),
                      "%s", log);
        ck_assert_msg(!strstr(log, "<6>"), "priority prefix without a journal stream: %s", log);
        /* the socket is systemd's (ours here): not unlinked; a client now
         * waits in the backlog and the next daemon on the fd answers it */
        ck_assert(tf_exists(w->socket));
        int c = tf_connect(w);
        _cleanup_free_ char *req = strdup_printf(
                "{\"version\":1,\"id\":\"s\",\"method\":\"task.status\",\"params\":{\"taskId\":\"%s\"}}", id);
        tf_send(c, req);
        ck_assert_ptr_null(tf_recv_line(c, 300)); /* nobody answers yet */
        pid = tf_daemon_start_activated(w, lfd);
        char *line = tf_recv_line(c, 15000);
        ck_assert_msg(line, "the re-activated daemon did not answer the queued client");
        json_object *f = tf_json(line);
        ck_assert_msg(json_get_bool(f, "ok", false), "%s", line);
        ck_assert_str_eq(tf_jstr(json_get_object(f, "result"), "status"), "done");
        json_object_put(f);
        free(line);
        close(c);
        /* and it idles out again */
        st = tf_wait_exit(pid, 5000);
        ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "second exit: %d", st);
        w->daemon_pid = 0;
        close(lfd), close(nfd);
        free(marker), free(prompt), free(id);
}
END_TEST

TF_WORLD_TEST_ENV(no_idle_exit_while_a_client_is_connected_or_when_self_bound, "TASKFERRY_DISABLE_SANDBOX=1",
                  "TASKFERRY_IDLE_EXIT_SEC=1") {
        int lfd = tf_activation_socket(w);
        pid_t pid = tf_daemon_start_activated(w, lfd);
        int c = tf_connect(w);
        tf_send(c, "{\"version\":1,\"id\":\"h\",\"method\":\"system.health\",\"params\":{}}");
        char *line = tf_recv_line(c, 10000);
        ck_assert_ptr_nonnull(line);
        free(line);
        /* an open connection (a subscriber, a waiting CLI) keeps it */
        ck_assert_int_eq(tf_wait_exit(pid, 2500), -1);
        close(c);
        int st = tf_wait_exit(pid, 5000);
        ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit after the client left: %d", st);
        w->daemon_pid = 0;
        close(lfd);
        (void) unlink(w->socket);

        /* bound by itself: nobody would start it again, so it stays */
        tf_daemon_start(w);
        ck_assert_int_eq(tf_wait_exit(w->daemon_pid, 3000), -1);
        ck_assert_int_gt(tf_daemon_pid(w), 0);
}
END_TEST

TF_WORLD_TEST_ENV(idle_exit_zero_means_never, "TASKFERRY_DISABLE_SANDBOX=1", "TASKFERRY_IDLE_EXIT_SEC=0") {
        int lfd = tf_activation_socket(w);
        pid_t pid = tf_daemon_start_activated(w, lfd);
        ck_assert_int_gt(tf_daemon_pid(w), 0);
        ck_assert_int_eq(tf_wait_exit(pid, 2500), -1);
        close(lfd);
}
END_TEST

/* ---- priorities on the journal stream ---- */

static void journal_stream_of_log(tf_world *w) {
        tf_write(tf_path(w->root, "daemon.log"), "", 0, 0600);
        struct stat st;
        ck_assert_int_eq(stat(tf_path(w->root, "daemon.log"), &st), 0);
        _cleanup_free_ char *v = strdup_printf("%llu:%llu", (unsigned long long) st.st_dev, (unsigned long long) st.st_ino);
        tf_world_setenv(w, "JOURNAL_STREAM", v);
}

TF_WORLD_TEST_ENV(priority_prefixes_on_the_journal_stream, "TASKFERRY_DISABLE_SANDBOX=1", "TASKFERRY_IDLE_EXIT_SEC=1",
                  "TASKFERRY_ALLOWED_DIRS=/nonexistent-taskferry-dir") {
        journal_stream_of_log(w);
        int lfd = tf_activation_socket(w);
        pid_t pid = tf_daemon_start_activated(w, lfd);
        ck_assert_int_gt(tf_daemon_pid(w), 0);
        int st = tf_wait_exit(pid, 5000);
        ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%d", st);
        w->daemon_pid = 0;
        _cleanup_free_ char *log = tf_daemon_log(w);
        /* a settings warning (log_text) and the idle notice (log_info) */
        ck_assert_msg(startswith(log, "<4>warning: TASKFERRY_ALLOWED_DIRS") || strstr(log, "\n<4>warning: TASKFERRY_ALLOWED_DIRS"),
                      "%s", log);
        ck_assert_msg(strstr(log, "\n<6>taskferryd: info: idle for 1 s, exiting"), "%s", log);
        /* every line carries one */
        for (char *s = log; *s; s = strchr(s, '\n') + 1) {
                ck_assert_msg(s[0] == '<' && s[1] >= '0' && s[1] <= '7' && s[2] == '>', "line without priority: %s", s);
                if (!strchr(s, '\n')) break;
        }
        close(lfd);
}
END_TEST

int main(void) {
        return tf_run_tests("systemd-notify", "notify", 120,
                            TF_TESTS(notify_ready_status_watchdog_stopping, idle_exit_when_socket_activated,
                                     no_idle_exit_while_a_client_is_connected_or_when_self_bound, idle_exit_zero_means_never,
                                     priority_prefixes_on_the_journal_stream));
}
