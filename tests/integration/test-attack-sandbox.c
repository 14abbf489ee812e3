/* A hostile worker against the sandbox: each case is one way out
 * a security review found. A case that still escapes carries an OPEN comment
 * naming where the fix belongs. Runs as whoever runs the suite: tools/test
 * runs it as root and again as an unprivileged user. */

#include <check.h>
#include <stddef.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "fs-util.h"
#include "macro.h"
#include "string-util.h"
#include "utf8.h"

/* A file a worker left in its output dir ("" when it left none). */
static char *output_file(tf_world *w, const char *id, const char *name) {
        char *s = tf_output_try_read(w, id, name);
        return s ? s : strdup("");
}

/* Finding: a resumed session is seeded by `cp -a <H'>/pi/sessions/. <H>/...`
 * on the host, and the earlier task owned <H'>/pi/sessions: it replaced the
 * dir by a symlink to ~/.ssh, so the resume copied the user's keys into the
 * new task's home. Same for OpenCode's <H'>/opencode/data/opencode. */
TF_WORLD_TEST(resume_seed_follows_planted_symlink) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_put(tf_path(w->home, ".ssh/id_ed25519"), "SECRET-SSH-KEY\n");
        char *fixture = strdup(tf_path(w->fixtures, "real/pi-answer"));
        static const char *const exes[] = {"pi", "opencode"};
        static const char *const plant[] = {
                "rm -rf \"$PI_CODING_AGENT_DIR/sessions\" && ln -s \"$HOME/.ssh\" \"$PI_CODING_AGENT_DIR/sessions\"",
                "rm -rf \"$XDG_DATA_HOME/opencode\" && ln -s \"$HOME/.ssh\" \"$XDG_DATA_HOME/opencode\"",
        };
        static const char *const loot[] = {
                "cat \"$PI_CODING_AGENT_DIR/sessions/id_ed25519\" > $TASKFERRY_OUTPUT_DIR/loot 2>&1; true",
                "cat \"$XDG_DATA_HOME/opencode/id_ed25519\" > $TASKFERRY_OUTPUT_DIR/loot 2>&1; true",
        };
        for (size_t e = 0; e < ELEMENTSOF(exes); e++) {
                tf_world_setenv(w, "FAKE_FIXTURE", e == 0 ? fixture : tf_path(w->fixtures, "real/opencode-answer"));
                tf_world_setenv(w, "FAKE_SCRIPT", plant[e]);
                json_object *st = NULL;
                free(tf_worker_settled(w, exes[e], "m/x", repo, NULL, "hi", &st));
                const char *sid = tf_jstr(st, "sessionId");
                ck_assert_msg(sid && *sid, "%s: no session id: %s", exes[e], json_to_line(st, NULL));
                _cleanup_free_ char *session = strdup(sid);
                json_object_put(st);
                tf_world_setenv(w, "FAKE_SCRIPT", loot[e]);
                const char *resume[] = {"--session-id", session, NULL};
                char *b = tf_worker_settled(w, exes[e], "m/x", repo, resume, "again", NULL);
                _cleanup_free_ char *got = output_file(w, b, "loot");
                ck_assert_msg(!strstr(got, "SECRET-SSH-KEY"), "%s: the resumed task read ~/.ssh through the earlier "
                              "task's planted symlink: %s", exes[e], got);
                free(b);
        }
        free(fixture), free(repo);
}
END_TEST

/* Finding: a nested dispatch carries the worker's own environment, and the
 * daemon picks the user's pi agent dir from PI_CODING_AGENT_DIR in it, then
 * binds every entry of that dir read-only into the nested task's home: a
 * worker names any directory that is not deny-listed (another project, a
 * browser profile, ~/.cargo with its credentials) and reads it. */
TF_WORLD_TEST(nested_env_names_user_dir) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_put(tf_path(w->home, "private/notes.txt"), "SECRET-PRIVATE-NOTES\n");
        tf_put(tf_path(w->home, ".cargo/credentials.toml"), "SECRET-CARGO-TOKEN\n");
        tf_world_setenv(w, "FAKE_SCRIPT", "true");
        const char *script =
                "for d in \"$HOME/private\" \"$HOME/.cargo\"; do "
                "  c=$(FAKE_SCRIPT='cat \"$PI_CODING_AGENT_DIR\"/notes.txt \"$PI_CODING_AGENT_DIR\"/credentials.toml "
                "2>/dev/null > $TASKFERRY_OUTPUT_DIR/loot; true' PI_CODING_AGENT_DIR=$d taskferry dispatch --executor pi "
                "--model m/x --prompt x | sed -n 's/^id: //p'); "
                "  taskferry wait $c >/dev/null; echo child=$c; "
                "done";
        char *msg = tf_shell_output(w, repo, NULL, script, NULL);
        int children = 0;
        for (const char *p = msg; (p = strstr(p, "child=oc_")); p++) {
                _cleanup_free_ char *cid = strndup(p + 6, strcspn(p + 6, "\n"));
                _cleanup_free_ char *got = output_file(w, cid, "loot");
                ck_assert_msg(!strstr(got, "SECRET-"), "a nested task read a user dir its dispatcher named in "
                              "PI_CODING_AGENT_DIR: %s", got);
                children++;
        }
        ck_assert_msg(children == 2, "nested dispatches did not run: %s", msg);
        free(msg), free(repo);
}
END_TEST

/* A secret file in a dir of the home the sandbox shows, beside a file it
 * may show: paths under the home; the words of each the worker's output
 * must (shown) or must never (hidden) hold; what names the secret. */
typedef struct home_secret {
        const char *secret, *secret_text, *hidden;
        const char *visible, *visible_text, *shown;
        const char *what;
} home_secret;

/* The worker cats the visible file, then the secret: it shows the one and
 * runs to its end, and never the other. */
static void assert_home_secret_masked(tf_world *w, const home_secret *hs) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_put(tf_path(w->home, hs->secret), hs->secret_text);
        tf_put(tf_path(w->home, hs->visible), hs->visible_text);
        _cleanup_free_ char *script = strdup_printf("cat $HOME/%s $HOME/%s 2>/dev/null; echo done", hs->visible, hs->secret);
        char *msg = tf_shell_output(w, repo, NULL, script, NULL);
        ck_assert_msg(strstr(msg, hs->shown) && strstr(msg, "done"), "%s", msg);
        ck_assert_msg(!strstr(msg, hs->hidden), "%s was readable: %s", hs->what, msg);
        free(msg), free(repo);
}

/* Finding: ~/.config/git is allow-listed for git's config, but git's
 * credential store also lives there ($XDG_CONFIG_HOME/git/credentials,
 * git-credential-store(1)); only ~/.git-credentials was masked. */
TF_WORLD_TEST(xdg_git_credentials_masked) {
        const home_secret git = {".config/git/credentials", "https://u:SECRET-GIT-TOKEN@example.com\n", "SECRET-GIT-TOKEN",
                                 ".config/git/config", "[user]\n\tname = visible\n", "visible",
                                 "git's XDG credential store"};
        assert_home_secret_masked(w, &git);
}
END_TEST

/* Finding (daemon as root): the worker holds no capabilities, but it runs as
 * uid 0 mapped to the host's uid 0, so it owns every root-owned file the
 * read-only system dirs show: /etc/shadow, the host's SSH keys. The fix is a
 * mapping in which the worker's uid is not privileged over anything
 * mounted. */
START_TEST(root_worker_reads_root_only_files) {
        if (geteuid() != 0) {
                fprintf(stderr, "root_worker_reads_root_only_files: not root, nothing to test\n");
                return;
        }
        tf_world *w = tf_world_new(NULL);
        char *repo = tf_repo_new(w, NULL, NULL);
        char *tag = strdup(strrchr(w->root, '/') + 1);
        char *secret = strdup_printf("/etc/%s-root-only", tag);
        tf_write(secret, "SECRET-ROOT-ONLY\n", 17, 0600);
        char *script = strdup_printf("id -u; cat %s 2>&1; echo done", secret);
        char *msg = tf_shell_output(w, repo, NULL, script, NULL);
        (void) unlink(secret);
        ck_assert_msg(strstr(msg, "done"), "%s", msg);
        /* mitigated: the shim of a root daemon masks what others may not read
         * under /etc and /opt (sandbox_plan_scan_roots). Still open: the
         * worker is host uid 0 (a non-zero outside uid needs an idmapped
         * overlay), so root-only files elsewhere it is shown stay readable. */
        tf_world_free(w); /* before the check: a failed check ends the test at once */
        ck_assert_msg(!strstr(msg, "SECRET-ROOT-ONLY"), "a root daemon's worker read a root-only file: %s", msg);
        free(msg), free(script), free(secret), free(tag), free(repo);
}
END_TEST

/* Finding: a worker's nested tasks outlive a cancel of the worker: the user
 * cancels A, A's child goes on running what A gave it. */
TF_WORLD_TEST(cancel_leaves_nested_tasks_running) {
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *script =
                "c=$(taskferry dispatch --executor shell --prompt 'sleep 120' | sed -n 's/^id: //p'); "
                "echo $c > $TASKFERRY_OUTPUT_DIR/child; sleep 120";
        char *a = tf_dispatch_shell(w, repo, NULL, script);
        char *child = tf_output_line(w, a, "child", 20000);
        ck_assert_msg(tf_wait_status(w, child, "running", 20000), "nested task %s never ran", child);
        const char *c[] = {"cancel", a, "--json", NULL};
        tf_run cr = tf_cli(w, NULL, NULL, c);
        tf_run_done(&cr);
        json_object_put(tf_wait_settled(w, a));
        bool gone = tf_wait_status(w, child, "cancelled", 10000);
        if (!gone) {
                const char *cc[] = {"cancel", child, "--json", NULL};
                tf_run r2 = tf_cli(w, NULL, NULL, cc);
                tf_run_done(&r2);
                json_object_put(tf_wait_settled(w, child));
        }
        /* fixed: handle_cancel cancels the tasks the worker dispatched, transitively */
        ck_assert_msg(gone, "the nested task %s kept running after its dispatcher %s was cancelled", child, a);
        free(child), free(a), free(repo);
}
END_TEST

/* Finding: nothing bounded how many tasks a worker dispatches: its nested
 * tasks queued in front of the user's, each with a socket that may dispatch
 * more. Now at most 16 (handlers.c NESTED_TASKS_MAX) live per dispatch tree,
 * with SERVER_BUSY past it. */
TF_WORLD_TEST(nested_dispatch_unbounded) {
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *script =
                "n=0; i=0; while [ $i -lt 80 ]; do i=$((i+1)); "
                "taskferry dispatch --executor shell --prompt 'sleep 60' >$TASKFERRY_OUTPUT_DIR/err 2>&1 "
                "&& n=$((n+1)); done; echo accepted=$n; cat $TASKFERRY_OUTPUT_DIR/err";
        char *msg = tf_shell_output(w, repo, NULL, script, NULL);
        ck_assert_msg(strstr(msg, "accepted="), "%s", msg);
        int n = atoi(strstr(msg, "accepted=") + 9);
        /* clean up: cancel everything still queued or running */
        json_object *f = tf_rpc(w, "task.list", "{}");
        json_object *tasks = json_get_array(json_get_object(f, "result"), "tasks");
        for (size_t i = 0; tasks && i < json_object_array_length(tasks); i++) {
                const char *id = json_get_string(json_object_array_get_idx(tasks, i), "id");
                _cleanup_free_ char *p = strdup_printf("{\"taskId\":\"%s\",\"graceMs\":0}", id);
                json_object_put(tf_rpc(w, "task.cancel", p));
        }
        json_object_put(f);
        ck_assert_msg(n == 16, "a worker queued %d nested tasks: %s", n, msg);
        ck_assert_msg(strstr(msg, "too many nested tasks"), "no reason given: %s", msg);
        free(msg), free(repo);
}
END_TEST


/* A listener of the host: on loopback TCP, or an abstract Unix socket. */
static int listen_tcp_loopback(int *ret_port) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        socklen_t l = sizeof sa;
        ck_assert_int_eq(getsockname(fd, (struct sockaddr *) &sa, &l), 0);
        ck_assert_int_eq(listen(fd, 16), 0);
        *ret_port = ntohs(sa.sin_port);
        return fd;
}

static int listen_abstract(const char *name) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        size_t n = strlen(name);
        memcpy(sa.sun_path + 1, name, n);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &sa, (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + n)), 0);
        ck_assert_int_eq(listen(fd, 16), 0);
        return fd;
}

/* Held: the host's abstract Unix sockets (X11, some agents) stay out of
 * reach (Landlock scope, where the kernel has ABI 6). */
TF_WORLD_TEST(abstract_socket_unreachable) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *name = strdup_printf("tf-attack-%s", strrchr(w->root, '/') + 1);
        int fd = listen_abstract(name);
        char *script = strdup_printf(
                "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('\\\\0%s'); print('abstract-connected')\" "
                "2>&1; echo done", name);
        char *msg = tf_shell_output(w, repo, NULL, script, NULL);
        close(fd);
        ck_assert_msg(strstr(msg, "done"), "%s", msg);
        ck_assert_msg(!strstr(msg, "abstract-connected"), "reached a host abstract socket: %s", msg);
        ck_assert_msg(strstr(msg, "Error"), "the probe did not run: %s", msg);
        free(msg), free(script), free(name), free(repo);
}
END_TEST

/* Held (it was open): the sandbox shared the host's network namespace, so every service
 * listening on the host's loopback (databases with trust auth, dev servers,
 * an unauthenticated Docker TCP port, a local model server, the cloud
 * metadata endpoint through the host's routes) was reachable. */
START_TEST(loopback_service_reachable) {
        tf_world *w = tf_world_new(NULL);
        char *repo = tf_repo_new(w, NULL, NULL);
        int port = 0;
        int fd = listen_tcp_loopback(&port);
        char *script = strdup_printf(
                "python3 -c \"import socket; socket.create_connection(('127.0.0.1', %d), 3); print('tcp-connected')\" "
                "2>&1; echo done", port);
        char *msg = tf_shell_output(w, repo, NULL, script, NULL);
        close(fd);
        ck_assert_msg(strstr(msg, "done"), "%s", msg);
        /* held: the sandbox has a network namespace of its own (only lo) */
        tf_world_free(w);
        ck_assert_msg(!strstr(msg, "tcp-connected"), "reached a host loopback service: %s", msg);
        free(msg), free(script), free(repo);
}
END_TEST

/* Finding: ~/.npm-global is allow-listed as a toolchain dir, and npm keeps
 * its global config (with registry tokens, like ~/.npmrc which is masked)
 * at <prefix>/etc/npmrc, i.e. ~/.npm-global/etc/npmrc. */
TF_WORLD_TEST(npm_global_npmrc_masked) {
        const home_secret npm = {".npm-global/etc/npmrc", "//registry.npmjs.org/:_authToken=SECRET-NPM-TOKEN\n",
                                 "SECRET-NPM-TOKEN", ".npm-global/bin/tool", "visible-tool\n", "visible-tool",
                                 "npm's global config"};
        assert_home_secret_masked(w, &npm);
}
END_TEST

/* Held: a resumed OpenCode session is seeded from the earlier task's data
 * dir, and the user's auth.json is then bound at
 * <H>/opencode/data/opencode/auth.json — a path inside what was copied. The
 * earlier task (run while the user had no auth.json, so nothing was mounted
 * there) left a dangling symlink at that name. bwrap resolves a mount
 * point's symlinks inside the new root, so no host file is created (the
 * resumed task fails to start instead: a denial of that resume only). */
TF_WORLD_TEST(seeded_mount_point_symlink) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *victim = strdup_printf("/var/tmp/%s-created-by-bwrap", strrchr(w->root, '/') + 1);
        (void) unlink(victim);
        tf_world_setenv(w, "FAKE_FIXTURE", tf_path(w->fixtures, "real/opencode-answer"));
        char *plant = strdup_printf("ln -s %s \"$XDG_DATA_HOME/opencode/auth.json\"", victim);
        tf_world_setenv(w, "FAKE_SCRIPT", plant);
        json_object *st = NULL;
        free(tf_worker_settled(w, "opencode", "m/x", repo, NULL, "hi", &st));
        _cleanup_free_ char *session = strdup(strempty(tf_jstr(st, "sessionId")));
        ck_assert_msg(*session, "no session id: %s", json_to_line(st, NULL));
        json_object_put(st);
        /* the user logs in to OpenCode, then resumes the session */
        tf_put(tf_path(w->home, ".local/share/opencode/auth.json"), "{\"k\":\"SECRET-AUTH\"}\n");
        tf_world_setenv(w, "FAKE_SCRIPT", "true");
        const char *resume[] = {"--session-id", session, NULL};
        free(tf_worker_settled(w, "opencode", "m/x", repo, resume, "again", NULL));
        bool created = tf_exists(victim);
        (void) unlink(victim);
        ck_assert_msg(!created, "bwrap created %s on the host through the earlier task's symlink", victim);
        free(plant), free(victim), free(repo);
}
END_TEST

/* Finding: the read-only system dirs are bound whole, and a read-only mount
 * does not stop connect(2): a Unix socket under /etc or /opt (or the Nix
 * daemon's /nix/var/nix/daemon-socket/socket, through which a root-owned
 * client is a trusted Nix user) is reachable. Needs root to create one. */
START_TEST(socket_in_system_dir_reachable) {
        if (geteuid() != 0) {
                fprintf(stderr, "socket_in_system_dir_reachable: not root, cannot create sockets in /etc or /opt\n");
                return;
        }
        tf_world *w = tf_world_new(NULL);
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *tag = strrchr(w->root, '/') + 1;
        char *dir = strdup_printf("/opt/%s", tag);
        ck_assert_int_eq(mkdir_p(dir, 0755), 0);
        char *paths[2] = {strdup_printf("/etc/%s.sock", tag), strdup_printf("%s/run.sock", dir)};
        int fds[2];
        for (int i = 0; i < 2; i++) fds[i] = tf_listen_unix(paths[i]);
        char *script = strdup_printf("tf-connect %s %s; echo done", paths[0], paths[1]);
        char *msg = tf_shell_output(w, repo, NULL, script, NULL);
        for (int i = 0; i < 2; i++) close(fds[i]), unlink(paths[i]);
        (void) rm_rf(dir);
        ck_assert_msg(strstr(msg, "done"), "%s", msg);
        /* fixed: the shim masks the sockets a bounded walk of /etc and /opt
         * finds (sandbox_plan_scan_roots); one made later stays reachable */
        tf_world_free(w);
        ck_assert_msg(!strstr(msg, " connected"), "reached a host socket in a system dir: %s", msg);
        free(msg), free(script), free(paths[0]), free(paths[1]), free(dir), free(repo);
}
END_TEST

/* Finding: the Nix daemon's socket lies under the read-only /nix (bound for
 * the store): a worker reaches nix-daemon (builds, store imports; a root
 * client is a trusted user). Root only: creates /nix/var/nix/daemon-socket
 * when the machine has no /nix, and removes it again. */
START_TEST(nix_daemon_socket_masked) {
        if (geteuid() != 0) {
                fprintf(stderr, "nix_daemon_socket_masked: not root\n");
                return;
        }
        bool made_nix = !tf_exists("/nix");
        if (!made_nix && !tf_exists("/nix/var/nix/daemon-socket")) {
                fprintf(stderr, "nix_daemon_socket_masked: a /nix without a daemon socket dir; skipped\n");
                return;
        }
        tf_world *w = tf_world_new(NULL);
        char *repo = tf_repo_new(w, NULL, NULL);
        int fd = -1;
        const char *sock = "/nix/var/nix/daemon-socket/socket";
        if (made_nix) {
                ck_assert_int_eq(mkdir_p("/nix/var/nix/daemon-socket", 0755), 0);
                ck_assert_int_eq(mkdir_p("/nix/store", 0755), 0);
                fd = tf_listen_unix(sock);
        }
        char *msg = tf_shell_output(w, repo, NULL, "ls -d /nix/store; tf-connect /nix/var/nix/daemon-socket/socket; echo done",
                                    NULL);
        if (made_nix) {
                close(fd);
                (void) rm_rf("/nix");
        }
        ck_assert_msg(strstr(msg, "/nix/store\n") && strstr(msg, "done"), "%s", msg);
        ck_assert_msg(!strstr(msg, " connected"), "reached the Nix daemon: %s", msg);
        free(msg), free(repo);
        tf_world_free(w);
}
END_TEST

/* Kill the daemon's forked children (a settlement job that never ends
 * would outlive the daemon: jobs have no parent-death signal). */
static void kill_daemon_children(tf_world *w) {
        pid_t d = tf_daemon_pid(w);
        if (d <= 0) return;
        _cleanup_free_ char *p = strdup_printf("/proc/%d/task/%d/children", (int) d, (int) d);
        if (!tf_exists(p)) return;
        _cleanup_free_ char *list = tf_read(p, NULL);
        char *save = NULL;
        for (char *t = strtok_r(list, " \n", &save); t; t = strtok_r(NULL, " \n", &save)) {
                _cleanup_free_ char *comm_p = strdup_printf("/proc/%s/comm", t);
                if (!tf_exists(comm_p)) continue;
                _cleanup_free_ char *comm = tf_read(comm_p, NULL);
                if (startswith(comm, "taskferryd")) kill(atoi(t), SIGKILL);
        }
}

/* Finding: a nested dispatch may carry a --require-final-marker, which the
 * settlement job matches against the task's message with regexec(3). glibc
 * matches back-references by backtracking, polynomial in the message with
 * the number of groups: a marker like (.*)(.*)...\2\1 against a message the
 * nested worker prints never finishes. The task never settles, holds one of
 * the daemon's concurrency slots for good (four such tasks stop every
 * launch of the user's), and the hung job outlives the daemon. Fixed:
 * a sandboxed caller's marker may use neither back-references nor
 * intervals (handlers.c marker_is_costly). */
TF_WORLD_TEST(final_marker_redos) {
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *script =
                "c=$(taskferry dispatch --executor shell "
                "--require-final-marker '^(.*)(.*)(.*)(.*)(.*)(.*)\\6\\5\\4\\3\\2\\1c' "
                "--prompt 'head -c 3000 /dev/zero | tr \"\\\\0\" a' 2>&1 | sed -n 's/^id: //p'); "
                "echo child=$c; "
                "taskferry dispatch --executor shell --require-final-marker '((a{200}){200}){20}' --prompt true 2>&1";
        char *msg = tf_shell_output(w, repo, NULL, script, NULL);
        /* regcomp of nested intervals runs in the daemon's loop: seconds and
         * GiBs for (((a{255}){255}){255}), so a worker may not send one */
        ck_assert_msg(strstr(msg, "interval"), "a nested dispatch with nested intervals was taken: %s", msg);
        const char *c = strstr(msg, "child=");
        ck_assert_ptr_nonnull(c);
        _cleanup_free_ char *child = strndup(c + 6, strcspn(c + 6, "\n"));
        bool settled = true;
        if (*child) {
                settled = false;
                for (int i = 0; i < 150 && !settled; i++) {
                        settled = !tf_status_is(w, child, "running") && !tf_status_is(w, child, "queued");
                        if (!settled) usleep(100000);
                }
        }
        kill_daemon_children(w);
        ck_assert_msg(settled, "the nested task %s with a back-reference marker never settled", child);
        free(msg), free(repo);
}
END_TEST

/* Finding: "a changeset never plants a hook" (DESIGN.md) covers .git, but a
 * repository whose core.hooksPath points into its own work tree (husky's
 * .husky/_, a .githooks dir) keeps its hooks in tracked files: the worker
 * edits .githooks/pre-commit, the changeset shows an ordinary file change,
 * and after accept the user's next `git commit` runs the worker's code on
 * the host. */
START_TEST(hookspath_hook_planted) {
        tf_world *w = tf_world_new(NULL);
        char *repo = tf_repo_new(w, NULL, NULL);
        free(tf_shf(w, repo, "mkdir .githooks && printf '#!/bin/sh\\nexit 0\\n' > .githooks/pre-commit && "
                             "chmod +x .githooks/pre-commit && git config core.hooksPath .githooks && "
                             "git add .githooks && git commit -qm hooks"));
        char *marker = strdup_printf("%s/hook-ran", w->root);
        char *script = strdup_printf("printf '#!/bin/sh\\ntouch %s\\n' > .githooks/pre-commit; echo edit >> f", marker);
        json_object *st = NULL;
        char *a = tf_shell_pending(w, repo, NULL, script, &st);
        json_object *warn = json_get_array(st, "changesetWarnings");
        bool warned = warn && strstr(json_to_line(warn, NULL), "pre-commit");
        json_object_put(st);
        tf_run r = tf_accept(w, a);
        tf_run_done(&r);
        tf_run g = tf_sh(w, repo, "git add f && git commit -qm user-commit", true);
        tf_run_done(&g);
        bool ran = tf_exists(marker);
        /* fixed: paths under a work-tree core.hooksPath are left out with a warning */
        tf_world_free(w);
        ck_assert_msg(!ran, "the accepted changeset planted a hook that ran on the user's git commit");
        ck_assert_msg(warned, "the hook left out of the changeset has no warning");
        free(marker), free(script), free(a), free(repo);
}
END_TEST

static long daemon_hwm_kb(tf_world *w) {
        pid_t d = tf_daemon_pid(w);
        _cleanup_free_ char *p = strdup_printf("/proc/%d/status", (int) d);
        _cleanup_free_ char *st = tf_read(p, NULL);
        const char *h = strstr(st, "VmHWM:");
        return h ? atol(h + 6) : -1;
}

/* Finding: task.result reads the whole patch (up to 1 GiB) in a forked job,
 * and the daemon reads the job's whole answer into memory before it finds
 * the response exceeds the 1 MiB frame budget. A worker asking for the diff
 * of its own big nested changeset, 32 requests at a time on each task
 * socket, makes the daemon hold gigabytes (the OOM killer then takes the
 * daemon). Here: a 24 MiB changeset, 4 requests at once. */
TF_WORLD_TEST(result_diff_buffers_whole_patch) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *a = tf_shell_pending(w, repo, NULL, "head -c 25165824 /dev/urandom > big.bin", NULL);
        long before = daemon_hwm_kb(w);
        int fds[4];
        _cleanup_free_ char *req = strdup_printf(
                "{\"version\":1,\"id\":\"r\",\"method\":\"task.result\",\"params\":{\"taskId\":\"%s\",\"fields\":[\"diff\"]}}", a);
        for (int i = 0; i < 4; i++) {
                fds[i] = tf_connect(w);
                tf_send(fds[i], req);
        }
        for (int i = 0; i < 4; i++) {
                char *line = tf_recv_line(fds[i], 60000);
                ck_assert_msg(line && strstr(line, "RESPONSE_TOO_LARGE"), "%.200s", line ? line : "(none)");
                free(line);
                close(fds[i]);
        }
        long after = daemon_hwm_kb(w);
        ck_assert_msg(after - before < 64 * 1024, "the daemon's peak memory grew by %ld KiB answering 4 diffs it could "
                      "not send", after - before);
        free(a), free(repo);
}
END_TEST

static char *cgroup_file(pid_t pid, const char *name) {
        _cleanup_free_ char *cgp = strdup_printf("/proc/%d/cgroup", (int) pid);
        if (!tf_exists(cgp)) return strdup("");
        _cleanup_free_ char *cg = tf_read(cgp, NULL);
        const char *v2 = strstr(cg, "0::");
        if (!v2) return strdup("");
        _cleanup_free_ char *rel = strndup(v2 + 3, strcspn(v2 + 3, "\n"));
        _cleanup_free_ char *f = strdup_printf("/sys/fs/cgroup%s/%s", rel, name);
        if (!tf_exists(f)) return strdup("(none)");
        char *v = tf_read(f, NULL);
        v[strcspn(v, "\n")] = 0;
        return v;
}

static long limit_of(pid_t pid, const char *label) {
        _cleanup_free_ char *lp = strdup_printf("/proc/%d/limits", (int) pid);
        _cleanup_free_ char *l = tf_read(lp, NULL);
        const char *p = strstr(l, label);
        if (!p) return -1;
        p += strlen(label);
        while (*p == ' ') p++;
        return strncmp(p, "unlimited", 9) == 0 ? -1 : atol(p);
}

/* Finding: a worker runs with no limit of its own on processes or memory
 * (DESIGN.md promises per-task limits through the scope unit; no scope is
 * made): a fork bomb uses up the user's RLIMIT_NPROC (for root: the pid
 * space) and the daemon can fork no job or shim; filling the sandbox's
 * tmpfs /tmp or home takes the host's memory. Checked from the host, no
 * bomb is set off. */
START_TEST(worker_has_no_resource_limits) {
        tf_world *w = tf_world_new(NULL);
        char *repo = tf_repo_new(w, NULL, NULL);
        char *a = tf_dispatch_shell(w, repo, NULL, "sleep 60");
        ck_assert(tf_wait_status(w, a, "running", 20000));
        _cleanup_free_ char *params = strdup_printf("{\"taskId\":\"%s\"}", a);
        int64_t pid = 0;
        for (int i = 0; i < 100 && pid <= 0; i++) {
                json_object *f = tf_rpc(w, "task.status", params);
                json_get_int64(json_get_object(f, "result"), "pid", &pid);
                json_object_put(f);
                if (pid <= 0) usleep(100000);
        }
        ck_assert_int_gt(pid, 0);
        _cleanup_free_ char *pids_max = cgroup_file((pid_t) pid, "pids.max");
        _cleanup_free_ char *mem_max = cgroup_file((pid_t) pid, "memory.max");
        long nproc = limit_of((pid_t) pid, "Max processes");
        long as = limit_of((pid_t) pid, "Max address space");
        const char *c[] = {"cancel", a, "--json", NULL};
        tf_run cr = tf_cli(w, NULL, NULL, c);
        tf_run_done(&cr);
        json_object_put(tf_wait_settled(w, a));
        bool procs_bounded = (nproc > 0 && nproc <= 16384) ||
                             (*pids_max && !streq(pids_max, "max") && !streq(pids_max, "(none)"));
        bool mem_bounded = as > 0 || (*mem_max && !streq(mem_max, "max") && !streq(mem_max, "(none)"));
        /* OPEN: the transient scope unit with TasksMax/MemoryMax (DESIGN.md
         * "Per-task resource limits") is not implemented; without a user
         * manager a fallback is needed too (a delegated cgroup of the
         * daemon's, or prlimit RLIMIT_NPROC/RLIMIT_AS on the worker): in
         * src/daemon/launch.c launch_task. */
        tf_world_free(w);
        ck_assert_msg(procs_bounded && mem_bounded, "worker limits: pids.max=%s memory.max=%s nproc=%ld as=%ld", pids_max,
                      mem_max, nproc, as);
        free(a), free(repo);
}
END_TEST

/* Finding: the daemon's forked jobs (settlement, accept, result) have no
 * parent-death signal: a job that does not end (here a settlement matching
 * the user's own back-reference marker against a long message) keeps
 * burning a CPU after the daemon is stopped, and the next daemon starts
 * another one. */
TF_WORLD_TEST(job_outlives_daemon) {
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *marker[] = {"--require-final-marker", "^(.*)(.*)(.*)(.*)(.*)(.*)\\6\\5\\4\\3\\2\\1c", NULL};
        char *a = tf_dispatch_shell(w, repo, marker, "head -c 3000 /dev/zero | tr '\\0' a");
        pid_t daemon = tf_daemon_pid(w);
        ck_assert_int_gt(daemon, 0);
        /* the settlement job is running once the shim is gone */
        pid_t job = 0;
        for (int i = 0; i < 200 && !job; i++) {
                _cleanup_free_ char *p = strdup_printf("/proc/%d/task/%d/children", (int) daemon, (int) daemon);
                _cleanup_free_ char *list = tf_read(p, NULL);
                char *save = NULL;
                for (char *t = strtok_r(list, " \n", &save); t && !job; t = strtok_r(NULL, " \n", &save)) {
                        _cleanup_free_ char *cp = strdup_printf("/proc/%s/comm", t);
                        _cleanup_free_ char *comm = tf_exists(cp) ? tf_read(cp, NULL) : strdup("");
                        if (startswith(comm, "taskferryd")) job = atoi(t);
                }
                if (job) {
                        /* still the daemon's program a moment later: a job, not a shim before its exec */
                        usleep(300000);
                        _cleanup_free_ char *cp = strdup_printf("/proc/%d/comm", (int) job);
                        _cleanup_free_ char *comm = tf_exists(cp) ? tf_read(cp, NULL) : strdup("");
                        if (!startswith(comm, "taskferryd")) job = 0;
                } else
                        usleep(50000);
        }
        ck_assert_msg(job > 0, "no settlement job seen");
        ck_assert_int_eq(kill(daemon, SIGTERM), 0);
        bool gone = false;
        for (int i = 0; i < 100 && !gone; i++) {
                gone = kill(job, 0) < 0;
                if (!gone) usleep(50000);
        }
        if (!gone) kill(job, SIGKILL);
        ck_assert_msg(gone, "settlement job %d outlived its daemon", (int) job);
        free(a), free(repo);
}
END_TEST

/* Finding: extraction hashes every file the worker left, whatever its size:
 * a sparse file of 1 TiB costs no disk (so no disk budget would see it) but
 * hours of `git add`, and until the settlement ends the task holds one of
 * the daemon's concurrency slots: four such tasks (or a worker's nested
 * ones) stop every launch of the user's. */
START_TEST(sparse_file_stalls_settlement) {
        tf_world *w = tf_world_new(NULL);
        char *repo = tf_repo_new(w, NULL, NULL);
        char *a = tf_dispatch_shell(w, repo, NULL, "truncate -s 1T huge.bin");
        bool settled = false;
        for (int i = 0; i < 300 && !settled; i++) {
                settled = !tf_status_is(w, a, "running") && !tf_status_is(w, a, "queued");
                if (!settled) usleep(100000);
        }
        /* OPEN: leave files over a size limit out of the changeset with a
         * warning (or fail the extraction with a changesetError) before git
         * reads them, in src/daemon/changeset.c (the upper dir lists the
         * touched paths; st_size is known without reading). */
        tf_world_free(w); /* the daemon's death takes the settlement job and its git along */
        ck_assert_msg(settled, "a task with a 1 TiB sparse file did not settle in 30 s");
        free(a), free(repo);
}
END_TEST

int main(void) {
        Suite *s = suite_create("attack-sandbox");
        tf_add_tests(s, "attack", 300,
                     TF_TESTS(resume_seed_follows_planted_symlink, nested_env_names_user_dir, xdg_git_credentials_masked,
                              cancel_leaves_nested_tasks_running, nested_dispatch_unbounded, abstract_socket_unreachable,
                              npm_global_npmrc_masked, seeded_mount_point_symlink, nix_daemon_socket_masked,
                              final_marker_redos, result_diff_buffers_whole_patch, job_outlives_daemon,
                              sparse_file_stalls_settlement, hookspath_hook_planted, socket_in_system_dir_reachable,
                              root_worker_reads_root_only_files, loopback_service_reachable));
        /* Ways out that are still open (each case's OPEN comment says where
         * the fix belongs). They escape
         * today, so they run only when asked for — never counted as passing:
         *   TASKFERRY_TEST_OPEN_ATTACKS=1 build/dev/tests/test-attack-sandbox */
        const char *open_env = getenv("TASKFERRY_TEST_OPEN_ATTACKS");
        if (open_env && streq(open_env, "1"))
                tf_add_tests(s, "open", 300, TF_TESTS(worker_has_no_resource_limits));
        else
                fprintf(stderr, "attack-sandbox: 1 known-open case not run (worker_has_no_resource_limits); "
                                "TASKFERRY_TEST_OPEN_ATTACKS=1 runs it\n");
        return tf_run_suite(s);
}
