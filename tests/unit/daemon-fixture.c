/* The daemon's unit-suite fixture (daemon-fixture.h). */

#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/methods.h"
#include "core/env-file.h"
#include "daemon-fixture.h"
#include "json-util.h"
#include "unit.h"
#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

void tf_manager_setup(Manager *m, const char *name) {
        *m = (Manager) {0};
        ck_assert_int_ge(sd_event_new(&m->event), 0);
        char *dir = tf_tmpdir_new(name);
        m->paths.state_dir = dir;
        m->paths.runtime_dir = strdup_printf("%s/run", dir);
        m->paths.cache_dir = strdup_printf("%s/cache", dir);
        ck_assert_int_eq(server_init(m), 0);
        ck_assert_int_eq(task_table_init(m), 0);
        ck_assert_int_eq(store_init(m), 0);
}

void tf_manager_teardown(Manager *m) {
        jobs_free(m);
        for (size_t i = 0; i < m->n_tasks; i++) {
                Task *t = m->tasks[i];
                if (t->socket) task_socket_close(t);
                task_free(t);
        }
        free(m->tasks);
        m->tasks = NULL;
        m->n_tasks = 0;
        manager_free_root_cache(m);
        scheduler_free(m);
        store_done(m);
        journal_free(m);
        server_free(m);
        manager_free_task_observers(m);
        m->event = sd_event_unref(m->event);
        tf_tmpdir_free(m->paths.state_dir);
        free(m->paths.runtime_dir);
        free(m->paths.cache_dir);
        m->paths.state_dir = m->paths.runtime_dir = m->paths.cache_dir = NULL;
}

static char *daemon_dir;

void tf_daemon_setup(Manager *m, const char *name) {
        *m = (Manager) {0};
        ck_assert_int_ge(sd_event_new(&m->event), 0);
        daemon_dir = tf_tmpdir_new(name);
        tf_paths *p = &m->paths;
        p->home = tf_path(daemon_dir, "home");
        p->state_dir = tf_path(daemon_dir, "state");
        p->runtime_dir = tf_path(daemon_dir, "run");
        p->cache_dir = tf_path(daemon_dir, "cache");
        p->socket_path = tf_path(daemon_dir, "run/daemon.sock");
        p->overlay_tmp_root = tf_path(daemon_dir, "state/overlays");
        p->config_file = tf_path(daemon_dir, "config.json");
        const char *subs[] = {"", "/logs", "/prompts", "/outputs", "/tasks", "/diffs", "/summaries"};
        for (size_t i = 0; i < ELEMENTSOF(subs); i++) {
                char *d = strdup_printf("%s%s", p->state_dir, subs[i]);
                ck_assert_int_eq(mkdir_p_chmod(d, 0700), 0);
                free(d);
        }
        ck_assert_int_eq(mkdir_p_chmod(p->home, 0700), 0);
        ck_assert_int_eq(mkdir_p_chmod(p->runtime_dir, 0700), 0);
        /* the shim of this build (a launch that gets this far fails in it) */
        ck_assert_int_eq(setenv("TASKFERRY_SHIM", TASKFERRY_BUILD_DIR "/taskferry-shim", 1), 0);
        char *err = NULL;
        int r = settings_load(&m->settings, p->config_file, &err);
        ck_assert_msg(r >= 0, "settings: %s", strnull(err));
        free(err);
        ck_assert_int_eq(daemon_setup(m), 0);
}

void tf_daemon_teardown(Manager *m) {
        daemon_free(m);
        daemon_dir = tf_tmpdir_free(daemon_dir);
}

Task *tf_task(Manager *m, const char *json) {
        json_object *o = NULL;
        ck_assert_msg(json_parse_strict(json, strlen(json), &o) == 0, "not JSON: %s", json);
        Task *t = task_table_add_json(m, o);
        ck_assert_msg(t, "not a task record: %s", json);
        return t;
}

Task *tf_taskf(Manager *m, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *json = NULL;
        int k = vasprintf(&json, fmt, ap);
        va_end(ap);
        ck_assert_int_ge(k, 0);
        Task *t = tf_task(m, json);
        free(json);
        return t;
}

Connection *tf_connection_new(Manager *m, unsigned refs, int *ret_peer) {
        int sp[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp), 0);
        Connection *c = calloc(1, sizeof *c);
        ck_assert_ptr_nonnull(c);
        c->m = m;
        c->n_ref = refs;
        c->fd = sp[0];
        c->peer_uid = getuid();
        *ret_peer = sp[1];
        return c;
}

void tf_connection_free(Connection *c, int peer) {
        events_drop_connection(c);
        if (!c->dead) close(c->fd);
        line_buffer_done(&c->in);
        free(c->out);
        free(c);
        close(peer);
}

TfPeer tf_peer_new(Manager *m, unsigned refs) {
        TfPeer p;
        p.conn = tf_connection_new(m, refs, &p.fd);
        return p;
}

void tf_peer_free(TfPeer *p) {
        tf_connection_free(p->conn, p->fd);
        *p = (TfPeer) {.fd = -1};
}

json_object *tf_frames(int fd) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, size = 0;
        for (;;) {
                if (size - len < 65536) {
                        size = size ? 2 * size : 65536;
                        buf = realloc(buf, size);
                        ck_assert_ptr_nonnull(buf);
                }
                ssize_t n = read(fd, buf + len, size - 1 - len);
                if (n <= 0) break;
                len += (size_t) n;
        }
        json_object *arr = json_object_new_array();
        if (!buf) return arr;
        buf[len] = 0;
        for (char *s = buf, *nl; (nl = strchr(s, '\n')); s = nl + 1) {
                json_object *o = NULL;
                ck_assert_msg(json_parse_strict(s, (size_t) (nl - s), &o) == 0, "not JSON: %.*s", (int) (nl - s), s);
                json_object_array_add(arr, o);
        }
        return arr;
}

json_object *tf_one_frame(int fd) {
        json_object *arr = tf_frames(fd);
        ck_assert_uint_eq(json_object_array_length(arr), 1);
        json_object *f = json_object_get(json_object_array_get_idx(arr, 0));
        json_object_put(arr);
        return f;
}

Request *tf_request(Manager *m, Connection *c, const char *line, bool wait) {
        Request *r = calloc(1, sizeof *r);
        ck_assert_ptr_nonnull(r);
        json_object *err = NULL;
        int k = proto_parse_request(line, strlen(line), &r->req, &err);
        ck_assert_msg(k == 0, "%s: %s", line, err ? json_object_to_json_string(err) : "?");
        r->m = m;
        r->conn = c;
        c->n_ref++;
        if (wait) {
                r->budget_wait = true;
                m->server->waits++;
        } else
                m->server->in_flight++;
        return r;
}

json_object *tf_call_frame(Manager *m, const TfPeer *peer, const char *line, uint64_t ms) {
        method_dispatch(m, tf_request(m, peer->conn, line, false));
        uint64_t end = mono_ms() + ms;
        for (;;) {
                json_object *arr = tf_frames(peer->fd);
                size_t n = json_object_array_length(arr);
                if (n > 0 || mono_ms() >= end) {
                        ck_assert_uint_eq(n, 1);
                        json_object *f = json_object_get(json_object_array_get_idx(arr, 0));
                        json_object_put(arr);
                        return f;
                }
                json_object_put(arr);
                ck_assert_int_ge(sd_event_run(m->event, 20 * 1000), 0);
        }
}

void tf_run_loop_ms(Manager *m, uint64_t ms) {
        uint64_t end = mono_ms() + ms;
        for (uint64_t now = mono_ms(); now < end; now = mono_ms())
                ck_assert_int_ge(sd_event_run(m->event, (end - now) * 1000ULL), 0);
}

void tf_run_pending(Manager *m) { ck_assert_int_ge(sd_event_run(m->event, 0), 0); }

pid_t tf_dbus_daemon_start(const char *dir) {
        if (access("/usr/bin/dbus-daemon", X_OK) < 0) return 0;
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        char *listen = strdup_printf("--address=unix:path=%s/bus", dir);
        char *print = strdup_printf("--print-address=%d", p[1]);
        pid_t pid;
        int r = safe_fork_full("tf-dbus", NULL, &p[1], 1, FORK_DEATHSIG_SIGKILL | FORK_CLOSE_ALL_FDS, &pid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                execl("/usr/bin/dbus-daemon", "dbus-daemon", "--session", "--nofork", "--nopidfile", listen, print,
                      (char *) NULL);
                _exit(127);
        }
        close(p[1]);
        free(listen);
        free(print);
        char addr[512];
        size_t n = 0;
        while (n < sizeof addr - 1) {
                ssize_t k = read(p[0], addr + n, sizeof addr - 1 - n);
                if (k <= 0) break;
                n += (size_t) k;
                if (memchr(addr, '\n', n)) break;
        }
        close(p[0]);
        addr[n] = 0;
        char *nl = strchr(addr, '\n');
        ck_assert_msg(nl, "dbus-daemon printed no address: %s", addr);
        *nl = 0;
        setenv("DBUS_SESSION_BUS_ADDRESS", addr, 1);
        return pid;
}

void tf_use_env_file(Manager *m, const char *text) {
        char *path = strdup_printf("%s/env", m->paths.home);
        tf_write_file(path, text, strlen(text), 0600);
        free(m->settings.env_file);
        m->settings.env_file = path;
        char *reason = NULL;
        ck_assert_msg(env_file_init(m, &reason) == 0, "env file: %s", strnull(reason));
}
