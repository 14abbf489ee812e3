/* Attacks on the network isolation of a worker (net-policy.h, netns.h,
 * egress-proxy.h, run/network.h), through the CLI and an isolated daemon
 * with real bwrap: a hostile worker tries to reach a service of the host's
 * loopback that no rule names. Each case passes when the defence holds, and
 * when what the task's record says about its network is what the worker
 * really had. */

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"

/* A listening TCP socket on the host's 127.0.0.1 at a free port (*ret_port):
 * a connect completes in the kernel's backlog without an accept, so a
 * worker that prints REACHED got to it. */
static int host_listener(unsigned *ret_port) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &a, sizeof a), 0);
        ck_assert_int_eq(listen(fd, 64), 0);
        socklen_t l = sizeof a;
        ck_assert_int_eq(getsockname(fd, (struct sockaddr *) &a, &l), 0);
        *ret_port = ntohs(a.sin_port);
        return fd;
}

/* The worker's probe: a direct connect to the host's listener, the proxy
 * environment ignored (what a hostile worker does). */
static char *probe_script(unsigned port) {
        return strdup_printf("python3 -c \"import socket\n"
                             "try:\n"
                             "    socket.create_connection(('127.0.0.1', %u), timeout=3); print('REACHED')\n"
                             "except Exception as e: print('BLOCKED', e)\"",
                             port);
}

/* The network mode the task's status shows (malloc'd; "" when none). */
static char *status_mode(tf_world *w, const char *id, bool *ret_warning) {
        json_object *st = tf_status_full(w, id);
        char *mode = strdup(strempty(json_get_string(json_get_object(st, "network"), "mode")));
        if (ret_warning) *ret_warning = json_get_string(st, "networkWarning") != NULL;
        json_object_put(st);
        return mode;
}

/* --no-sandbox runs the worker without bwrap, and so without the network
 * namespace the shim makes only for a sandbox: the worker has the host's
 * network. Held (it was open): an unsandboxed dispatch that asks for
 * --network proxy|none is refused, a plain one is recorded as mode "host"
 * with networkWarning (run/network.c network_decide), so that status says
 * what the worker has. */
TF_WORLD_TEST(no_sandbox_network_is_what_the_record_says) {
        unsigned port;
        _cleanup_close_ int lfd = host_listener(&port);
        char *repo = tf_repo_new(w, NULL, NULL);
        _cleanup_free_ char *script = probe_script(port);

        /* asked for no network at all: refused, or really cut off */
        const char *argv[] = {"dispatch", "--json", "--executor", "shell", "--directory", repo, "--no-sandbox",
                              "--network", "none", "--prompt", script, NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        if (r.exit_code == 0) {
                json_object *o = tf_json(r.out);
                _cleanup_free_ char *id = strdup(tf_jstr(o, "id"));
                json_object_put(o);
                json_object_put(tf_wait_settled(w, id));
                _cleanup_free_ char *msg = tf_task_message(w, id);
                _cleanup_free_ char *mode = status_mode(w, id, NULL);
                ck_assert_msg(!strstr(msg, "REACHED"),
                              "--no-sandbox --network none was accepted, recorded network mode \"%s\", and its worker "
                              "reached the host's 127.0.0.1:%u: %s",
                              mode, port, msg);
        }
        tf_run_done(&r);

        /* the default: whatever it is, the record must say it */
        const char *extra[] = {"--no-sandbox", NULL};
        json_object *st = NULL;
        _cleanup_free_ char *msg = tf_shell_output(w, repo, extra, script, &st);
        const char *id = tf_jstr(st, "id");
        bool warned = false;
        _cleanup_free_ char *mode = status_mode(w, id, &warned);
        if (strstr(msg, "REACHED"))
                ck_assert_msg(streq(mode, "host") && warned,
                              "an unsandboxed worker reached the host's loopback, yet its status says network mode "
                              "\"%s\"%s",
                              mode, warned ? "" : " and carries no networkWarning");
        json_object_put(st);
        free(repo);
}

/* What held, cheaply in one task: a sandboxed worker with a rule for the
 * name "localhost" at the listener's port gets neither a direct connect
 * (its namespace has only lo) nor one through the proxy (the name resolves
 * to loopback, which only a rule naming the address allows), by CONNECT,
 * by an absolute URL or by SOCKS5; ::ffff:127.0.0.1 is no way around. */
TF_WORLD_TEST(sandboxed_worker_reaches_no_host_loopback) {
        unsigned port;
        _cleanup_close_ int lfd = host_listener(&port);
        char *repo = tf_repo_new(w, NULL, NULL);
        _cleanup_free_ char *rule = strdup_printf("localhost:%u", port);
        _cleanup_free_ char *script = strdup_printf(
                "python3 -c \"\n"
                "import socket, struct\n"
                "P=%u\n"
                "def ask(data):\n"
                "    try:\n"
                "        s=socket.create_connection(('127.0.0.1',3128),timeout=5); s.sendall(data); s.settimeout(5)\n"
                "        return s.recv(64)\n"
                "    except Exception as e: return repr(e).encode()\n"
                "try:\n"
                "    socket.create_connection(('127.0.0.1',P),timeout=3); print('DIRECT-REACHED')\n"
                "except Exception: pass\n"
                "print('connect', ask(b'CONNECT localhost:%%d HTTP/1.1\\r\\n\\r\\n' %% P))\n"
                "print('mapped', ask(b'CONNECT [::ffff:127.0.0.1]:%%d HTTP/1.1\\r\\n\\r\\n' %% P))\n"
                "print('url', ask(b'GET http://localhost:%%d/ HTTP/1.1\\r\\n\\r\\n' %% P))\n"
                "print('socks', ask(b'\\x05\\x01\\x00\\x05\\x01\\x00\\x03\\x09localhost'+struct.pack('>H',P)))\n"
                "print('probe-done')\"",
                port);
        const char *extra[] = {"--allow-host", rule, NULL};
        _cleanup_free_ char *msg = tf_shell_done_output(w, repo, extra, script, NULL);
        ck_assert_msg(strstr(msg, "probe-done"), "%s", msg);
        ck_assert_msg(!strstr(msg, "DIRECT-REACHED"), "a direct connect left the namespace: %s", msg);
        ck_assert_msg(!strstr(msg, " 200 "), "the proxy carried a connection to the host's loopback: %s", msg);
        /* SOCKS5: the method reply, then a reply that is not 0x00 (succeeded) */
        ck_assert_msg(!strstr(msg, "socks b'\\x05\\x00\\x05\\x00"), "SOCKS5 reached the host's loopback: %s", msg);
        free(repo);
}

int main(void) {
        Suite *s = suite_create("attack-network");
        tf_add_tests(s, "network", 120,
                     TF_TESTS(no_sandbox_network_is_what_the_record_says, sandboxed_worker_reaches_no_host_loopback));
        return tf_run_suite(s);
}
