/* The escape battery of the sandbox: a hostile worker tries to get out
 * through its capabilities, the masks, the user's binds, file-shaped secrets,
 * host Unix sockets and the executor homes. Runs as whoever runs the suite:
 * tools/test runs it as root and again as an unprivileged user. */

#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "utf8.h"


/* No capabilities, also under a root daemon: a mask cannot be unmounted,
 * / and the binds cannot be remounted read-write, no nested user namespace
 * gets them back, and nothing reaches the real home. */
TF_WORLD_TEST(no_capabilities_no_unmask) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *gh = strdup(tf_path(w->home, ".config/gh/hosts.yml"));
        tf_put(gh, "SECRET-GH-TOKEN\n");
        tf_put(tf_path(w->home, ".config/other/ok"), "visible\n");
        char *config = strdup(tf_path(w->home, ".config"));
        const char *extra[] = {"--ro-bind", config, NULL};
        const char *script =
                "grep -E '^Cap(Eff|Prm|Bnd|Amb):' /proc/self/status; "
                "umount \"$HOME/.config/gh\" 2>/dev/null; echo umount=$?; "
                "umount -l \"$HOME/.config/gh\" 2>/dev/null; echo umount-lazy=$?; "
                "cat \"$HOME/.config/gh/hosts.yml\" 2>/dev/null; "
                "mount -o remount,bind,rw / 2>/dev/null; echo remount-root=$?; "
                "mount -o remount,bind,rw \"$HOME/.config\" 2>/dev/null; echo remount-bind=$?; "
                "mount -t tmpfs none \"$HOME/.config\" 2>/dev/null; echo mount=$?; "
                "unshare -Urm sh -c 'umount \"$HOME/.config/gh\" && cat \"$HOME/.config/gh/hosts.yml\"' "
                "2>/dev/null; echo nested=$?; "
                "cat \"$HOME/.config/other/ok\"; "
                "echo x > \"$HOME/.config/planted\" 2>/dev/null; echo write-bind=$?; "
                "echo x > \"$HOME/planted\"; echo done";
        char *msg = tf_shell_done_output(w, repo, extra, script, NULL);
        static const char *const want[] = {"CapEff:\t0000000000000000\n", "CapPrm:\t0000000000000000\n",
                                           "CapBnd:\t0000000000000000\n", "CapAmb:\t0000000000000000\n",
                                           "visible\n", "done"};
        for (size_t i = 0; i < ELEMENTSOF(want); i++) ck_assert_msg(strstr(msg, want[i]), "no %s in: %s", want[i], msg);
        static const char *const failed[] = {"umount=0", "umount-lazy=0", "remount-root=0", "remount-bind=0", "mount=0",
                                             "nested=0", "write-bind=0"};
        for (size_t i = 0; i < ELEMENTSOF(failed); i++)
                ck_assert_msg(!strstr(msg, failed[i]), "%s succeeded: %s", failed[i], msg);
        ck_assert_msg(!strstr(msg, "SECRET-GH"), "read the masked gh token: %s", msg);
        ck_assert(!tf_exists(tf_path(w->home, "planted")));
        ck_assert(!tf_exists(tf_path(w->home, ".config/planted")));
        free(msg), free(gh), free(config), free(repo);
}
END_TEST

/* File-shaped secrets are masked by default, with and without a bind of the
 * whole home; TASKFERRY_SANDBOX_DENYLIST takes files too. */
TF_WORLD_TEST(file_secrets_masked) {
        char *extra_secret = strdup(tf_path(w->home, "work-token.txt"));
        tf_world_setenv(w, "TASKFERRY_SANDBOX_DENYLIST", extra_secret);
        char *repo = tf_repo_new(w, NULL, NULL);
        static const char *const secrets[] = {".netrc", ".git-credentials", ".docker/config.json", ".kube/config",
                                              ".npmrc", ".pypirc", ".local/share/keyrings/login.keyring",
                                              ".ssh/id_ed25519", ".aws/credentials", "work-token.txt"};
        _cleanup_free_ char *script = strdup("");
        for (size_t i = 0; i < ELEMENTSOF(secrets); i++) {
                _cleanup_free_ char *content = strdup_printf("SECRET-%zu\n", i);
                tf_put(tf_path(w->home, secrets[i]), content);
                tf_appendf(&script, "cat \"$HOME/%s\" 2>/dev/null; ", secrets[i]);
        }
        tf_appendf(&script, "ls -a \"$HOME\" | tr '\\n' ' '; echo; echo done");
        for (int bound = 0; bound < 2; bound++) {
                const char *extra[] = {"--ro-bind", w->home, NULL};
                _cleanup_free_ char *msg = tf_shell_done_output(w, repo, bound ? extra : NULL, script, NULL);
                ck_assert_msg(strstr(msg, "done"), "%s", msg);
                ck_assert_msg(!strstr(msg, "SECRET-"), "a secret was readable (home %sbound): %s", bound ? "" : "not ", msg);
        }
        /* binding a deny-listed path itself is the user's explicit call: bound, with a loud warning */
        char *ssh = strdup(tf_path(w->home, ".ssh"));
        const char *d[] = {"dispatch", "--executor", "shell", "--directory", repo, "--ro-bind", ssh, "--prompt",
                           "cat \"$HOME/.ssh/id_ed25519\"", NULL};
        tf_run r = tf_cli(w, NULL, NULL, d);
        ck_assert_msg(r.exit_code == 0, "%s %s", r.out, r.err);
        ck_assert_msg(strstr(r.err, "warning: ") && strstr(r.err, ssh) && strstr(r.err, "deny-listed"),
                      "no warning on stderr: %s", r.err);
        const char *idl = strstr(r.out, "id: ");
        ck_assert_ptr_nonnull(idl);
        char *id = strndup(idl + 4, strcspn(idl + 4, "\n"));
        tf_run_done(&r);
        json_object_put(tf_wait_settled(w, id));
        char *msg = tf_task_message(w, id);
        ck_assert_msg(strstr(msg, "SECRET-7"), "the explicitly bound key is not readable: %s", msg);
        free(msg);
        free(id), free(ssh);
        free(extra_secret), free(repo);
}
END_TEST

static int listen_at(const char *path) {
        _cleanup_free_ char *dir = strdup(path);
        *strrchr(dir, '/') = 0;
        ck_assert_int_eq(mkdir_p(dir, 0755), 0);
        return tf_listen_unix(path);
}

/* No host Unix socket is reachable, only the task's own socket (which must
 * connect: the probe works). /run and /var/run need root to create one in. */
TF_WORLD_TEST(host_sockets_unreachable) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *tag = strdup(strrchr(w->root, '/') + 1);
        char *paths[8];
        size_t n = 0;
        paths[n++] = strdup(tf_path(w->home, ".docker/desktop/docker.sock"));
        paths[n++] = strdup_printf("%s/.local/share/%s.sock", w->home, tag);
        paths[n++] = strdup_printf("/var/tmp/%s.sock", tag);
        paths[n++] = strdup_printf("%s/listener.sock", repo); /* the user's own, in the target */
        if (geteuid() == 0) {
                paths[n++] = strdup_printf("/run/%s.sock", tag);
                paths[n++] = strdup_printf("/var/run/%s-v.sock", tag);
        } else
                fprintf(stderr, "host_sockets_unreachable: not root, /run and /var/run listeners skipped\n");
        int fds[8];
        for (size_t i = 0; i < n; i++) fds[i] = listen_at(paths[i]);
        _cleanup_free_ char *script = strdup("tf-connect \"$TASKFERRY_SOCKET_PATH\" | sed 's/^[^ ]* /own: /'; tf-connect");
        for (size_t i = 0; i < n; i++) {
                tf_appendf(&script, " '%s'", paths[i]);
        }
        tf_appendf(&script, "; echo done");
        _cleanup_free_ char *msg = tf_shell_output(w, repo, NULL, script, NULL);
        ck_assert_msg(strstr(msg, "own: connected\n"), "the task's own socket did not connect: %s", msg);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *bad = strdup_printf("%s connected", paths[i]);
                _cleanup_free_ char *tried = strdup_printf("%s refused", paths[i]);
                ck_assert_msg(!strstr(msg, bad), "reached a host socket: %s", msg);
                ck_assert_msg(strstr(msg, tried), "%s not probed: %s", paths[i], msg);
        }
        for (size_t i = 0; i < n; i++) {
                close(fds[i]);
                unlink(paths[i]);
                free(paths[i]);
        }
        free(tag), free(repo);
}
END_TEST

/* Launch preflight: the worker binary missing from PATH, or present only
 * where the sandbox does not look. */
START_TEST(preflight_binary) {
        tf_world *w = tf_world_new(NULL);
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_world_setenv(w, "PATH", "/usr/local/bin:/usr/bin:/bin");
        json_object *st = NULL;
        char *id = tf_worker_settled(w, "pi", "m/x", repo, NULL, "hi", &st);
        ck_assert_str_eq(tf_jstr(st, "status"), "crashed");
        const char *se = strempty(tf_jstr(st, "spawnError"));
        ck_assert_msg(strstr(se, "pi not found on PATH") && strstr(se, "/usr/local/bin:/usr/bin:/bin"), "%s", se);
        /* no worker ran: no pending changeset that `diff`/`accept` cannot find,
         * and no overlay left behind: a task that crashed before its worker spawned
         * has no changes */
        ck_assert_str_eq(tf_jstr(st, "changesetStatus"), "accepted");
        json_object_put(st);
        _cleanup_free_ char *left = tf_shf(w, NULL, "ls %s/overlays 2>/dev/null | grep -c %s || true", w->state, id);
        ck_assert_str_eq(left, "0");
        free(id);
        /* a pi installed only under /tmp (the sandbox's /tmp is private) */
        char tmpl[] = "/tmp/tf-pi-XXXXXX";
        ck_assert_ptr_nonnull(mkdtemp(tmpl));
        free(tf_shf(w, NULL, "mkdir %s/bin && cp %s/bin/fake-worker %s/bin/pi && chmod -R a+rX %s", tmpl,
                    w->fixtures, tmpl, tmpl));
        /* a new world whose daemon starts with that PATH */
        tf_world_free(w);
        w = tf_world_new(NULL);
        free(repo);
        repo = tf_repo_new(w, NULL, NULL);
        char *path = strdup_printf("%s/bin:/usr/bin:/bin", tmpl);
        tf_world_setenv(w, "PATH", path);
        id = tf_worker_settled(w, "pi", "m/x", repo, NULL, "hi", &st);
        ck_assert_str_eq(tf_jstr(st, "status"), "crashed");
        se = strempty(tf_jstr(st, "spawnError"));
        ck_assert_msg(strstr(se, "sandbox does not show") && strstr(se, tmpl) && strstr(se, "--ro-bind"), "%s", se);
        json_object_put(st);
        free(id), free(path), free(repo);
        (void) rm_rf(tmpl);
        tf_world_free(w);
}
END_TEST

/* Per-task executor homes: what one pi or OpenCode task writes into its
 * homes is invisible to the next, the user's read-only parts cannot be
 * written, and the user's real dirs stay byte-identical. */
TF_WORLD_TEST(executor_homes_isolated) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_put(tf_path(w->home, ".pi/agent/models.json"), "{\"providers\":{}}\n");
        tf_put(tf_path(w->home, ".pi/agent/auth.json"), "{}\n");
        tf_put(tf_path(w->home, ".pi/agent/extensions/ok.ts"), "// user extension\n");
        tf_put(tf_path(w->home, ".local/share/opencode/auth.json"), "{}\n");
        tf_put(tf_path(w->cfg, "opencode/opencode.json"), "{}\n");
        char *before_pi = tf_tree_snapshot(tf_path(w->home, ".pi"), false);
        char *before_data = tf_tree_snapshot(tf_path(w->home, ".local/share"), false);
        char *before_cfg = tf_tree_snapshot(w->cfg, false);
        const char *script =
                "o=$TASKFERRY_OUTPUT_DIR/report; : > $o; "
                "if [ -n \"$PI_CODING_AGENT_DIR\" ]; then d=$PI_CODING_AGENT_DIR; "
                "  ls \"$d/sessions\" | sed 's/^/seen:/' >> $o; "
                "  echo mine > \"$d/sessions/planted-$TASKFERRY_TASK_ID\" && echo wrote-session >> $o; "
                "  (echo evil > \"$d/extensions/evil.ts\") 2>/dev/null && echo wrote-extension >> $o; "
                "  (echo x > \"$d/models.json\") 2>/dev/null && echo wrote-models >> $o; "
                "  mkdir \"$d/settings.json.lock\" && echo locked >> $o; "
                "  cat \"$d/extensions/ok.ts\" >> $o; "
                "else d=$XDG_DATA_HOME/opencode; c=${XDG_CONFIG_HOME:-$HOME/.config}/opencode; "
                "  ls \"$d\" \"$c\" \"$XDG_CACHE_HOME\" | sed 's/^/seen:/' >> $o; "
                "  echo mine > \"$d/planted-$TASKFERRY_TASK_ID\" && echo wrote-data >> $o; "
                "  echo mine > \"$c/planted-$TASKFERRY_TASK_ID\" && echo wrote-config >> $o; "
                "  echo mine > \"$XDG_CACHE_HOME/planted-$TASKFERRY_TASK_ID\" && echo wrote-cache >> $o; "
                "  (echo x > \"$d/auth.json\") 2>/dev/null && echo wrote-auth >> $o; "
                "  cat \"$c/opencode.json\" >> $o; "
                "fi";
        tf_world_setenv(w, "FAKE_SCRIPT", script);
        static const char *const exes[] = {"pi", "opencode"};
        for (size_t e = 0; e < ELEMENTSOF(exes); e++) {
                char *ids[2];
                for (int k = 0; k < 2; k++) {
                        json_object *st = NULL;
                        ids[k] = tf_worker_settled(w, exes[e], "m/x", repo, NULL, "hi", &st);
                        ck_assert_msg(streq(tf_jstr(st, "status"), "done"), "%s: %s", exes[e], json_to_line(st, NULL));
                        json_object_put(st);
                        char *rep = tf_output_read(w, ids[k], "report");
                        ck_assert_msg(!strstr(rep, "seen:planted"), "%s task %d saw another task's file: %s", exes[e], k,
                                      rep);
                        if (e == 0) {
                                ck_assert_msg(strstr(rep, "wrote-session") && strstr(rep, "locked") &&
                                                      strstr(rep, "user extension"),
                                              "pi home: %s", rep);
                                ck_assert_msg(!strstr(rep, "wrote-extension") && !strstr(rep, "wrote-models"),
                                              "pi wrote the user's files: %s", rep);
                        } else {
                                ck_assert_msg(strstr(rep, "wrote-data") && strstr(rep, "wrote-config") &&
                                                      strstr(rep, "wrote-cache") && strstr(rep, "{}"),
                                              "opencode home: %s", rep);
                                ck_assert_msg(!strstr(rep, "wrote-auth"), "opencode wrote auth.json: %s", rep);
                        }
                        free(rep);
                }
                free(ids[0]), free(ids[1]);
        }
        char *after_pi = tf_tree_snapshot(tf_path(w->home, ".pi"), false);
        char *after_data = tf_tree_snapshot(tf_path(w->home, ".local/share"), false);
        char *after_cfg = tf_tree_snapshot(w->cfg, false);
        ck_assert_str_eq(before_pi, after_pi);
        ck_assert_str_eq(before_data, after_data);
        ck_assert_str_eq(before_cfg, after_cfg);
        free(before_pi), free(before_data), free(before_cfg), free(after_pi), free(after_data), free(after_cfg);
        free(repo);
}
END_TEST

/* --session-id: the new task starts from the sessions of the task that last
 * ran that session, copied, so the earlier task's home is never written. */
TF_WORLD_TEST(resume_seeds_from_previous_task) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *fixture = strdup(tf_path(w->fixtures, "real/pi-answer"));
        tf_world_setenv(w, "FAKE_FIXTURE", fixture);
        tf_world_setenv(w, "FAKE_SCRIPT",
                        "d=$PI_CODING_AGENT_DIR/sessions/--r--; mkdir -p $d; ls $d > $TASKFERRY_OUTPUT_DIR/seen; "
                        "echo turn >> $d/s_$TASKFERRY_TASK_ID.jsonl");
        json_object *st = NULL;
        char *a = tf_worker_settled(w, "pi", "m/x", repo, NULL, "hi", &st);
        ck_assert_str_eq(tf_jstr(st, "status"), "done");
        char *sid = strdup(strempty(tf_jstr(st, "sessionId")));
        ck_assert_msg(*sid, "no session id: %s", json_to_line(st, NULL));
        json_object_put(st);
        const char *resume[] = {"--session-id", sid, NULL};
        char *b = tf_worker_settled(w, "pi", "m/x", repo, resume, "again", &st);
        ck_assert_str_eq(tf_jstr(st, "status"), "done");
        json_object_put(st);
        char *seen = tf_output_read(w, b, "seen");
        char *want = strdup_printf("s_%s.jsonl", a);
        ck_assert_msg(strstr(seen, want), "the resumed task does not see the earlier session: %s", seen);
        /* the earlier task's own session file got no second turn */
        char *first = strdup_printf("%s/homes/%s/pi/sessions/--r--/s_%s.jsonl", w->cache, a, a);
        char *content = tf_read(first, NULL);
        ck_assert_str_eq(content, "turn\n");
        /* a worker cannot resume another task's session: its nested task starts empty */
        char *nested = strdup_printf("child=$(taskferry dispatch --executor pi --model m/x --session-id %s --prompt x "
                                     "| sed -n 's/^id: //p'); taskferry wait $child >/dev/null; echo child=$child",
                                     sid);
        char *c = tf_shell_settled(w, repo, NULL, nested, NULL);
        const char *res[] = {"result", c, "--json", NULL};
        tf_run rr = tf_cli(w, NULL, NULL, res);
        const char *child = strstr(rr.out, "child=oc_");
        ck_assert_msg(child, "nested dispatch failed: %s", rr.out);
        _cleanup_free_ char *child_id = strndup(child + 6, strcspn(child + 6, "\\\n\""));
        _cleanup_free_ char *cs = tf_output_read(w, child_id, "seen"); /* the nested worker ran */
        ck_assert_msg(!strstr(cs, want), "a worker resumed another task's session: %s", cs);
        tf_run_done(&rr);
        free(nested), free(c);
        free(content), free(first), free(want), free(seen), free(a), free(b), free(sid), free(fixture);
        free(repo);
}
END_TEST

int main(void) {
        return tf_run_tests("sandbox-escape", "escape", 180,
                            TF_TESTS(no_capabilities_no_unmask, file_secrets_masked, host_sockets_unreachable, preflight_binary,
                                     executor_homes_isolated, resume_seeds_from_previous_task));
}
