/* Protocol and daemon-socket scenarios over a raw socket against the real
 * taskferryd (scenarios P1–P11): framing, envelopes, validation, errors,
 * limits, a second daemon, shutdown and socket activation. */

#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "harness.h"
#include "json-util.h"
#include "protocol.h"
#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

static json_object *error_of(json_object *frame) { return json_get_object(frame, "error"); }

static void assert_error(json_object *frame, const char *code) {
        json_object *e = error_of(frame);
        ck_assert_msg(e != NULL, "expected an error frame: %s", json_to_line(frame, NULL));
        ck_assert_str_eq(json_get_string(e, "code"), code);
}

TF_WORLD_TEST(health_and_permissions) {
        tf_daemon_start(w);
        json_object *f = tf_rpc(w, "system.health", "{}");
        /* exact result {"healthy":true,"pid":<pid>,"version":1} and envelope order */
        char *expect = strdup_printf("{\"version\":1,\"ok\":true,\"id\":\"rpc-1\",\"result\":{\"healthy\":true,\"pid\":%d,\"version\":1}}",
                                     (int) w->daemon_pid);
        ck_assert_str_eq(json_to_line(f, NULL), expect);
        free(expect);
        json_object_put(f);
        struct stat st;
        ck_assert_int_eq(stat(w->run, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0700);
        ck_assert_int_eq(lstat(w->socket, &st), 0);
        ck_assert(S_ISSOCK(st.st_mode));
        ck_assert_int_eq(st.st_mode & 07777, 0600);
        ck_assert_int_eq(stat(w->state, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0700);
}
END_TEST

TF_WORLD_TEST(malformed_json_keeps_connection) {
        tf_daemon_start(w);
        int fd = tf_connect(w);
        tf_send(fd, "{not json");
        char *l = tf_recv_line(fd, 5000);
        ck_assert_ptr_nonnull(l);
        ck_assert_str_eq(l, "{\"version\":1,\"ok\":false,\"error\":{\"code\":\"MALFORMED_JSON\",\"message\":\"request is not valid "
                            "JSON\",\"help\":\"Send one JSON request object followed by a newline\",\"detail\":\"request is not "
                            "valid JSON\"},\"id\":null}");
        free(l);
        tf_send(fd, "");
        tf_send(fd, "{\"version\":1,\"id\":\"h2\",\"method\":\"system.health\",\"params\":{}}");
        l = tf_recv_line(fd, 5000);
        ck_assert_ptr_nonnull(l);
        json_object *o = tf_json(l);
        ck_assert_str_eq(json_get_string(o, "id"), "h2");
        ck_assert(json_get_bool(json_get_object(o, "result"), "healthy", false));
        json_object_put(o);
        free(l);
        close(fd);
}
END_TEST

static void expect_line_error(tf_world *w, const char *line, const char *code, const char *id, const char *message) {
        int fd = tf_connect(w);
        tf_send(fd, line);
        char *l = tf_recv_line(fd, 5000);
        ck_assert_msg(l != NULL, "no reply to %s", line);
        json_object *o = tf_json(l);
        assert_error(o, code);
        if (id) ck_assert_str_eq(json_get_string(o, "id"), id);
        else ck_assert_msg(json_get_string(o, "id") == NULL, "id should be null: %s", l);
        if (message) ck_assert_str_eq(json_get_string(error_of(o), "message"), message);
        json_object_put(o);
        free(l);
        close(fd);
}

TF_WORLD_TEST(envelope_validation_order) {
        tf_daemon_start(w);
#define BAD_REQ "request must contain version, id, method, and params"
        static const struct {
                const char *line, *code, *id, *message; /* id NULL: the reply's id is null */
        } cases[] = {
                {"[1,2]", "INVALID_REQUEST", NULL, BAD_REQ},
                {"{\"version\":1,\"id\":\"a\",\"method\":\"system.health\",\"params\":{},\"x\":1}", "INVALID_REQUEST", "a", BAD_REQ},
                {"{\"id\":\"a\",\"method\":\"system.health\",\"params\":{}}", "INVALID_REQUEST", "a", BAD_REQ},
                {"{\"version\":1,\"id\":\"\",\"method\":\"system.health\",\"params\":{}}", "INVALID_REQUEST", "", BAD_REQ},
                {"{\"version\":1,\"id\":7,\"method\":\"system.health\",\"params\":{}}", "INVALID_REQUEST", NULL, BAD_REQ},
                {"{\"version\":1,\"id\":\"a\",\"method\":\"system.health\",\"params\":null}", "INVALID_REQUEST", "a", BAD_REQ},
                {"{\"version\":1,\"id\":\"a\",\"method\":\"system.health\",\"params\":[]}", "INVALID_REQUEST", "a", BAD_REQ},
                {"{\"version\":2,\"id\":\"a\",\"method\":\"system.health\",\"params\":{}}", "UNSUPPORTED_VERSION", "a",
                 "unsupported protocol version: 2"},
                {"{\"version\":\"1\",\"id\":\"a\",\"method\":\"system.health\",\"params\":{}}", "UNSUPPORTED_VERSION", "a",
                 "unsupported protocol version: 1"},
                {"{\"version\":1,\"id\":\"a\",\"method\":\"task.bogus\",\"params\":{}}", "UNKNOWN_METHOD", "a",
                 "unknown method: task.bogus"},
        };
#undef BAD_REQ
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                expect_line_error(w, cases[i].line, cases[i].code, cases[i].id, cases[i].message);
        {
                /* the help names all 16 methods of the protocol, in their order */
                json_object *f = tf_rpc(w, "task.bogus", "{}");
                ck_assert_str_eq(json_get_string(json_get_object(f, "error"), "help"),
                                 "Use one of: system.health, task.dispatch, task.cancel, task.status, task.wait, "
                                 "task.list, task.stats, task.result, task.tail, task.summary, task.advisor, "
                                 "task.context, task.accept, task.reject, task.output, event.subscribe");
                json_object_put(f);
        }
        /* version is checked before the method */
        expect_line_error(w, "{\"version\":3,\"id\":\"a\",\"method\":\"task.bogus\",\"params\":{}}", "UNSUPPORTED_VERSION",
                          "a", NULL);
}
END_TEST

TF_WORLD_TEST(param_validation) {
        tf_daemon_start(w);
        struct {
                const char *method, *params;
        } bad[] = {
                {"task.status", "{}"},
                {"task.list", "{\"directory\":\"relative/dir\"}"},
                {"system.health", "{\"x\":1}"},
                {"task.result", "{\"taskId\":\"t\",\"fields\":[\"nope\"]}"},
                {"task.result", "{\"taskId\":\"t\",\"fields\":[]}"},
                {"task.dispatch", "{\"prompt\":\"p\",\"directory\":\"/\",\"env\":null}"},
                {"task.dispatch", "{\"prompt\":\"p\",\"directory\":\"/\",\"env\":[]}"},
                {"task.dispatch", "{\"prompt\":\"p\",\"directory\":\"/\",\"env\":5}"},
                {"task.dispatch", "{\"prompt\":\"p\",\"directory\":\"/\",\"env\":\"A=1\"}"},
                {"task.dispatch", "{\"prompt\":\"p\",\"directory\":\"/\",\"env\":{\"A\":1}}"},
                {"task.dispatch", "{\"prompt\":\"p\",\"directory\":\"/\",\"env\":{\"BAD=KEY\":\"v\"}}"},
                {"task.dispatch", "{\"prompt\":\"p\",\"directory\":\"/\",\"env\":{\"\":\"v\"}}"},
                {"task.dispatch", "{\"prompt\":\"p\",\"directory\":\"/\",\"class\":\"\"}"},
                {"task.dispatch", "{\"prompt\":\"p\",\"directory\":\"/\",\"keySlot\":\"x\"}"},
                {"task.dispatch", "{\"prompt\":\"p\",\"directory\":\"/\",\"executor\":\"bogus\"}"},
                {"task.dispatch", "{\"prompt\":\"p\",\"directory\":\"/\",\"noSandbox\":\"true\"}"},
                {"task.dispatch", "{\"prompt\":\"\",\"directory\":\"/\"}"},
                {"task.dispatch", "{\"prompt\":\"p\",\"directory\":\"rel\"}"},
                {"task.dispatch", "{\"prompt\":\"p\"}"},
                {"task.dispatch", "{\"prompt\":\"p\",\"directory\":\"/\",\"model\":null}"},
                {"task.accept", "{\"taskId\":\"t\",\"force\":\"yes\"}"},
                {"task.wait", "{\"taskId\":\"t\",\"tailChars\":0}"},
                {"task.wait", "{\"taskId\":\"t\",\"timeoutMs\":-1}"},
                {"task.wait", "{\"taskId\":\"t\",\"timeoutMs\":1.5}"},
                {"task.cancel", "{\"taskId\":\"t\",\"graceMs\":\"5\"}"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                json_object *f = tf_rpc(w, bad[i].method, bad[i].params);
                json_object *e = error_of(f);
                ck_assert_msg(e && streq(json_get_string(e, "code"), "INVALID_PARAMS"), "%s %s -> %s", bad[i].method,
                              bad[i].params, json_to_line(f, NULL));
                char *msg = strdup_printf("invalid params for %s", bad[i].method);
                ck_assert_str_eq(json_get_string(e, "message"), msg);
                free(msg);
                json_object_put(f);
        }
        /* accepted shapes reach the handler (unknown task, not INVALID_PARAMS) */
        json_object *f = tf_rpc(w, "task.result", "{\"taskId\":\"zzz\",\"fields\":[\"failureDetail\",\"outputDir\"]}");
        assert_error(f, "UNKNOWN_TASK");
        ck_assert_str_eq(json_get_string(error_of(f), "message"), "unknown task id: zzz");
        ck_assert_str_eq(json_get_string(error_of(f), "help"), "run taskferry list to see valid task ids");
        ck_assert_str_eq(json_get_string(error_of(f), "detail"),
                         "error: unknown task id: zzz\nhelp: run taskferry list to see valid task ids");
        json_object_put(f);
}
END_TEST

static void send_all(int fd, const char *data, size_t n) {
        for (size_t off = 0; off < n;) {
                ssize_t k = send(fd, data + off, n - off, MSG_NOSIGNAL);
                ck_assert_int_gt(k, 0);
                off += (size_t) k;
        }
}

static void expect_health_reply(int fd, const char *id) {
        char *l = tf_recv_line(fd, 10000);
        ck_assert_msg(l, "no reply for id %s", id);
        json_object *o = tf_json(l);
        ck_assert_str_eq(json_get_string(o, "id"), id);
        tf_result(o);
        json_object_put(o);
        free(l);
}

/* Line framing (one JSON request per line, 1 MiB inbound) at its edges: CRLF, empty and whitespace-only
 * lines (ignored), a request arriving a byte at a time, several in one
 * chunk, and a line that fills the 1 MiB inbound budget exactly (answered;
 * one byte more is REQUEST_TOO_LARGE, oversized_inbound). */
TF_WORLD_TEST(framing_edges) {
        tf_daemon_start(w);
        int fd = tf_connect(w);
        const char *req = "{\"version\":1,\"id\":\"%s\",\"method\":\"system.health\",\"params\":{}}";
        char *a = strdup_printf(req, "a");
        char *first = strdup_printf("\r\n \t\r\n\n%s\r\n", a);
        send_all(fd, first, strlen(first));
        expect_health_reply(fd, "a");
        char *b = strdup_printf(req, "b");
        for (size_t i = 0; b[i]; i++) {
                send_all(fd, b + i, 1);
                if (i % 8 == 0) usleep(2000);
        }
        send_all(fd, "\n", 1);
        expect_health_reply(fd, "b");
        char *c = strdup_printf(req, "c"), *d = strdup_printf(req, "d");
        char *two = strdup_printf("%s\n\n%s\n", c, d);
        send_all(fd, two, strlen(two));
        expect_health_reply(fd, "c");
        expect_health_reply(fd, "d");
        /* exactly 1 MiB held: the request, spaces, '\n' */
        char *e = strdup_printf(req, "e");
        size_t n = 1024 * 1024;
        char *big = malloc(n);
        memset(big, ' ', n);
        memcpy(big, e, strlen(e));
        big[n - 1] = '\n';
        send_all(fd, big, n);
        expect_health_reply(fd, "e");
        free(big);
        free(a), free(first), free(b), free(c), free(d), free(two), free(e);
        close(fd);
}
END_TEST

TF_WORLD_TEST(oversized_inbound) {
        tf_daemon_start(w);
        int fd = tf_connect(w);
        size_t n = 1024 * 1024 + 1;
        char *big = malloc(n);
        memset(big, 'a', n);
        size_t off = 0;
        while (off < n) {
                ssize_t k = send(fd, big + off, n - off, MSG_NOSIGNAL);
                if (k <= 0) break;
                off += (size_t) k;
        }
        free(big);
        char *l = tf_recv_line(fd, 10000);
        ck_assert_ptr_nonnull(l);
        json_object *o = tf_json(l);
        assert_error(o, "REQUEST_TOO_LARGE");
        ck_assert_ptr_null(json_get_string(o, "id"));
        ck_assert_str_eq(json_get_string(error_of(o), "message"), "request exceeds 1 MiB");
        json_object_put(o);
        free(l);
        /* then the daemon closes the connection */
        ck_assert_ptr_null(tf_recv_line(fd, 10000));
        close(fd);
        /* and keeps serving others */
        json_object *f = tf_rpc(w, "system.health", "{}");
        tf_result(f);
        json_object_put(f);
}
END_TEST

TF_WORLD_TEST_ENV(out_of_order_replies, "TASKFERRY_DISABLE_SANDBOX=1") {
        char *slow = tf_dispatch_shell(w, w->repo_parent, NULL, "sleep 30");
        char *fast = tf_dispatch_shell(w, w->repo_parent, NULL, "echo done");
        json_object_put(tf_wait_settled(w, fast));
        int fd = tf_connect(w);
        char *l1 = strdup_printf("{\"version\":1,\"id\":\"slow\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"%s\",\"timeoutMs\":1500}}", slow);
        char *l2 = strdup_printf("{\"version\":1,\"id\":\"fast\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"%s\"}}", fast);
        tf_send(fd, l1);
        tf_send(fd, l2);
        char *a = tf_recv_line(fd, 10000), *b = tf_recv_line(fd, 10000);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        json_object *ja = tf_json(a), *jb = tf_json(b);
        ck_assert_str_eq(json_get_string(ja, "id"), "fast");
        ck_assert_str_eq(json_get_string(json_get_object(ja, "result"), "status"), "done");
        ck_assert_str_eq(json_get_string(jb, "id"), "slow");
        ck_assert(json_get_bool(json_get_object(jb, "result"), "timedOut", false));
        ck_assert_str_eq(json_get_string(json_get_object(jb, "result"), "status"), "running");
        json_object_put(ja), json_object_put(jb);
        free(a), free(b), free(l1), free(l2);
        /* 256 parked waits (the in-flight limit of docs/taskferryd.8.md
         * "Limits": 256 *active* requests): waits draw on a budget of their
         * own, so the user's health, status and list still answer */
        for (int i = 0; i < 256; i++) {
                char *l = strdup_printf("{\"version\":1,\"id\":\"w%d\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"%s\"}}", i, slow);
                tf_send(fd, l);
                free(l);
        }
        /* let the daemon take all 256 in (ordering across connections is not
         * defined): the parked waits answer nothing until their task ends */
        usleep(500000);
        int fd2 = tf_connect(w);
        char *status_params = strdup_printf("{\"taskId\":\"%s\"}", slow);
        const char *probes[][2] = {{"system.health", "{}"}, {"task.status", status_params}, {"task.list", "{}"}};
        for (size_t i = 0; i < ELEMENTSOF(probes); i++) {
                char *l = strdup_printf("{\"version\":1,\"id\":\"p%zu\",\"method\":\"%s\",\"params\":%s}", i, probes[i][0],
                                        probes[i][1]);
                uint64_t t0 = mono_ms();
                tf_send(fd2, l);
                char *resp = tf_recv_line(fd2, 15000);
                fprintf(stderr, "  %s with 256 waits parked: %s after %" PRIu64 " ms\n", probes[i][0],
                        resp ? "answered" : "NO ANSWER", mono_ms() - t0);
                ck_assert_msg(resp != NULL, "%s did not answer with 256 waits parked", probes[i][0]);
                json_object *jr = tf_json(resp);
                ck_assert_msg(json_get_bool(jr, "ok", false), "%s with 256 waits parked: %s", probes[i][0], resp);
                json_object_put(jr);
                free(resp), free(l);
        }
        /* the waits' own budget: once it is full, one more wait is SERVER_BUSY
         * and everything else still answers */
        for (int i = 256; i < PROTOCOL_MAX_WAITS; i++) {
                char *l = strdup_printf("{\"version\":1,\"id\":\"w%d\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"%s\"}}", i, slow);
                tf_send(fd, l);
                free(l);
        }
        usleep(500000);
        char *lb = strdup_printf("{\"version\":1,\"id\":\"busy\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"%s\"}}", slow);
        tf_send(fd2, lb);
        char *busy = tf_recv_line(fd2, 10000);
        ck_assert_ptr_nonnull(busy);
        json_object *jbusy = tf_json(busy);
        assert_error(jbusy, "SERVER_BUSY");
        ck_assert_str_eq(json_get_string(jbusy, "id"), "busy");
        json_object_put(jbusy);
        free(busy), free(lb);
        tf_send(fd2, "{\"version\":1,\"id\":\"h\",\"method\":\"system.health\",\"params\":{}}");
        char *h = tf_recv_line(fd2, 10000);
        ck_assert_msg(h && strstr(h, "\"ok\":true"), "health with every wait slot taken: %s", h ? h : "(none)");
        free(h);
        /* the parked waits are released when their connection closes */
        close(fd);
        usleep(200000);
        char *lw = strdup_printf("{\"version\":1,\"id\":\"again\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"%s\",\"timeoutMs\":1}}", slow);
        tf_send(fd2, lw);
        char *again = tf_recv_line(fd2, 10000);
        ck_assert_msg(again && strstr(again, "\"ok\":true") && strstr(again, "\"timedOut\":true"), "wait after release: %s",
                      again ? again : "(none)");
        free(again), free(lw), free(status_params);
        close(fd2);
        json_object *f = tf_rpc(w, "system.health", "{}");
        tf_result(f);
        json_object_put(f);
        const char *cancel_argv[] = {"cancel", slow, "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, cancel_argv);
        ck_assert_int_eq(r.exit_code, 0);
        tf_run_done(&r);
        json_object_put(tf_wait_settled(w, slow));
        free(slow), free(fast);
}
END_TEST

TF_WORLD_TEST(second_daemon_refuses_and_stale_socket_is_replaced) {
        ck_assert_int_eq(mkdir_p(w->run, 0700), 0);
        /* a plain file where the socket goes is stale and replaced */
        tf_write(w->socket, "stale", 5, 0600);
        tf_daemon_start(w);
        struct stat st;
        ck_assert_int_eq(lstat(w->socket, &st), 0);
        ck_assert(S_ISSOCK(st.st_mode));
        /* a second daemon on the live socket refuses and leaves it alone */
        char *argv[] = {(char *) tf_bin("taskferryd"), NULL};
        (void) argv;
        tf_run r = tf_sh(w, NULL, "\"$TASKFERRY_DAEMON\"", true);
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert_msg(strstr(r.err, "taskferry daemon is already listening on"), "stderr: %s", r.err);
        tf_run_done(&r);
        json_object *f = tf_rpc(w, "system.health", "{}");
        int64_t pid = 0;
        json_get_int64(tf_result(f), "pid", &pid);
        ck_assert_int_eq(pid, w->daemon_pid);
        json_object_put(f);
}
END_TEST

TF_WORLD_TEST(graceful_shutdown) {
        tf_daemon_start(w);
        int fd = tf_connect(w);
        /* make sure the daemon has accepted this connection */
        tf_send(fd, "{\"version\":1,\"id\":\"h\",\"method\":\"system.health\",\"params\":{}}");
        char *h = tf_recv_line(fd, 5000);
        ck_assert_ptr_nonnull(h);
        free(h);
        kill(w->daemon_pid, SIGTERM);
        char *l = tf_recv_line(fd, 10000);
        ck_assert_ptr_nonnull(l);
        ck_assert_str_eq(l, "{\"version\":1,\"type\":\"shutdown\",\"reason\":\"shutdown\"}");
        free(l);
        ck_assert_ptr_null(tf_recv_line(fd, 10000));
        close(fd);
        int status = 0;
        ck_assert_int_eq(waitpid(w->daemon_pid, &status, 0), w->daemon_pid);
        ck_assert(WIFEXITED(status));
        ck_assert_int_eq(WEXITSTATUS(status), 0);
        ck_assert(!tf_exists(w->socket));
        char *tasks = strdup_printf("%s/tasks.json", w->state);
        ck_assert(tf_exists(tasks));
        free(tasks);
        w->daemon_pid = 0;
}
END_TEST

TF_WORLD_TEST(socket_activation) {
        ck_assert_int_eq(mkdir_p(w->run, 0700), 0);
        /* systemd-socket-activate passes a listening socket the way systemd does */
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                setsid();
                char *logp = strdup_printf("%s/daemon.log", w->root);
                int logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
                if (logfd >= 0) dup2(logfd, 1), dup2(logfd, 2);
                char *argv[] = {(char *) "systemd-socket-activate", (char *) "-l", w->socket,
                                (char *) tf_bin("taskferryd"), NULL};
                execvpe(argv[0], argv, w->env);
                _exit(127);
        }
        w->daemon_pid = pid;
        /* the activator binds before it listens: retry until it accepts */
        int fd = -1;
        for (int i = 0; i < 500 && fd < 0; i++) {
                struct sockaddr_un sa = {.sun_family = AF_UNIX};
                snprintf(sa.sun_path, sizeof sa.sun_path, "%s", w->socket);
                fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                ck_assert_int_ge(fd, 0);
                if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                        close(fd);
                        fd = -1;
                        usleep(10000);
                }
        }
        ck_assert_int_ge(fd, 0);
        tf_send(fd, "{\"version\":1,\"id\":\"sa\",\"method\":\"system.health\",\"params\":{}}");
        char *l = tf_recv_line(fd, 10000);
        ck_assert_ptr_nonnull(l);
        json_object *o = tf_json(l);
        ck_assert(json_get_bool(json_get_object(o, "result"), "healthy", false));
        int64_t dpid = 0;
        json_get_int64(json_get_object(o, "result"), "pid", &dpid);
        /* systemd-socket-activate execs the daemon in its own process */
        ck_assert_int_eq(dpid, pid);
        json_object_put(o);
        free(l);
        close(fd);
        kill(pid, SIGTERM);
        int status;
        waitpid(pid, &status, 0);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        /* the socket belongs to the activator: the daemon must not unlink it */
        ck_assert(tf_exists(w->socket));
        w->daemon_pid = 0;
}
END_TEST

int main(void) {
        return tf_run_tests("daemon-protocol", "protocol", 300,
                            TF_TESTS(health_and_permissions, malformed_json_keeps_connection, envelope_validation_order,
                                     param_validation, oversized_inbound, framing_edges, out_of_order_replies,
                                     second_daemon_refuses_and_stale_socket_is_replaced, graceful_shutdown,
                                     socket_activation));
}
