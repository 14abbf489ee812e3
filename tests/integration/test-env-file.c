/* The env file through the real daemon: a bad file refuses the start
 * loudly; its values reach workers as the lowest layer (env file < daemon
 * env < caller env) without the plumbing names or the denylist; a rewrite
 * (temp + rename, or in place) reaches the next spawn without a restart,
 * a broken one keeps the last good values; a queued task gets the values
 * current at its spawn; the values never land in tasks.json, the logs, the
 * launch request or the daemon's stderr; a worker can neither read the
 * file nor change it.
 *
 * Workers are `shell` tasks. A secret is never put in a prompt (prompts
 * are stored): workers print a hash of what they see, or a variable whose
 * value is no secret. */

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "fileio.h"
#include "fs-util.h"
#include "id-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"

#define SECRET "sk-envfile-7f3c9a1e5b2d4c6e8a0b"

/* Replace the file atomically: a temp file beside it, renamed over it. */
static void write_atomic(const char *path, const char *text) {
        _cleanup_free_ char *tmp = strdup_printf("%s.tmp-XXXXXX", path);
        int fd = mkstemp(tmp);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(loop_write(fd, text, strlen(text)), 0);
        ck_assert_int_eq(fchmod(fd, 0600), 0);
        close(fd);
        ck_assert_int_eq(rename(tmp, path), 0);
}

/* Rewrite the file in place (same inode: truncate, write). */
static void write_in_place(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(loop_write(fd, text, strlen(text)), 0);
        close(fd);
}

/* Reload outcomes ("reloaded (" or "reload failed") the daemon logged. */
static size_t reloads(tf_world *w) {
        _cleanup_free_ char *log = tf_daemon_log(w);
        return tf_count(log, "reloaded (") + tf_count(log, "env file reload failed");
}

typedef struct {
        size_t want;
} reload_wait;

static bool pred_reloads(tf_world *w, void *arg) { return reloads(w) >= ((reload_wait *) arg)->want; }

/* Wait until the daemon logged more reload outcomes than `before`. */
static void wait_reload(tf_world *w, size_t before) {
        reload_wait rw = {before + 1};
        if (!tf_wait_until(pred_reloads, w, &rw, 10000)) {
                _cleanup_free_ char *log = tf_daemon_log(w);
                ck_abort_msg("the daemon never reloaded the env file (%zu outcomes before); its log:\n%s", before, log);
        }
}

/* A shell task in the world's repo_parent, which must end done; its stdout. */
static char *run_shell(tf_world *w, const char *const extra[], const char *script) {
        return tf_shell_done_output(w, w->repo_parent, extra, script, NULL);
}

/* What a worker sees of $name, as "<value>" or "-" if unset. */
static char *worker_value(tf_world *w, const char *name) {
        _cleanup_free_ char *script = strdup_printf("printf '%%s' \"${%s--}\"", name);
        return run_shell(w, NULL, script);
}

/* A short hash of s, as a worker computes it for $K. */
static char *hash_of(tf_world *w, const char *s) {
        _cleanup_free_ char *q = shell_quote(s);
        return tf_shf(w, NULL, "printf %%s %s | sha256sum | cut -c1-16", q); /* trimmed */
}

static const char HASH_K[] = "printf %s \"$K\" | sha256sum | cut -c1-16 | tr -d '\\n'";

/* ---- start failures ---- */

static void refuses(tf_world *w, const char *const *want, const char *not) {
        const char *l[] = {"list", NULL};
        tf_run r = tf_cli(w, NULL, NULL, l);
        _cleanup_free_ char *out = tf_unescape(r.out);
        ck_assert_msg(r.exit_code == 1, "exit %d: %s", r.exit_code, out);
        ck_assert_msg(strstr(out, "daemon boot failed: "), "%s", out);
        for (size_t i = 0; want[i]; i++) ck_assert_msg(strstr(out, want[i]), "want %s: %s", want[i], out);
        if (not) ck_assert_msg(!strstr(out, not) && !strstr(r.err, not), "the content is echoed: %s", out);
        _cleanup_free_ char *be = strdup_printf("%s/daemon-boot.err", w->run);
        _cleanup_free_ char *e = tf_read(be, NULL);
        ck_assert_msg(strstr(e, want[0]), "daemon-boot.err: %s", e);
        if (not) ck_assert(!strstr(e, not));
        tf_run_done(&r);
        ck_assert_int_lt(tf_daemon_pid(w), 0);
}

START_TEST(bad_file_refuses_start) {
        tf_world *w = tf_world_new(NULL);
        _cleanup_free_ char *p = tf_env_file(w, NULL);
        /* missing */
        const char *missing[] = {"not found", p, "TASKFERRY_ENV_FILE", "envFile", NULL};
        refuses(w, missing, NULL);
        /* 0644: the mode and the fix */
        tf_write(p, "K=" SECRET "\n", strlen("K=" SECRET "\n"), 0644);
        ck_assert_int_eq(chmod(p, 0644), 0);
        const char *mode[] = {"readable by group or other", "(mode 0644)", "chmod 600", NULL};
        refuses(w, mode, SECRET);
        ck_assert_int_eq(chmod(p, 0640), 0);
        const char *mode640[] = {"(mode 0640)", NULL};
        refuses(w, mode640, SECRET);
        /* a symlink with mode 0777 to a 0604 file: the target's mode counts */
        _cleanup_free_ char *link = strdup_printf("%s.link", p);
        ck_assert_int_eq(chmod(p, 0604), 0);
        ck_assert_int_eq(symlink(p, link), 0);
        tf_world_setenv(w, "TASKFERRY_ENV_FILE", link);
        const char *mode604[] = {"(mode 0604)", NULL};
        refuses(w, mode604, SECRET);
        tf_world_setenv(w, "TASKFERRY_ENV_FILE", p);
        /* malformed: path and line number, never the line */
        write_in_place(p, "A=1\n" SECRET "\n");
        ck_assert_int_eq(chmod(p, 0600), 0);
        _cleanup_free_ char *where = strdup_printf("%s:2: expected NAME=value", p);
        const char *malformed[] = {where, NULL};
        refuses(w, malformed, SECRET);
        write_in_place(p, "A=1\nK=\"" SECRET "\n");
        const char *unterminated[] = {"unterminated double-quoted value", NULL};
        refuses(w, unterminated, SECRET);
        /* a fifo refuses at once, never hangs the start */
        _cleanup_free_ char *fifo = strdup_printf("%s.fifo", p);
        ck_assert_int_eq(mkfifo(fifo, 0600), 0);
        tf_world_setenv(w, "TASKFERRY_ENV_FILE", fifo);
        const char *notreg[] = {"not a regular file", NULL};
        refuses(w, notreg, NULL);
        /* config.json's envFile, same checks */
        strv_env_unset(&w->env, "TASKFERRY_ENV_FILE");
        _cleanup_free_ char *cfgdir = strdup_printf("%s/taskferry", w->cfg);
        ck_assert_int_eq(mkdir_p(cfgdir, 0700), 0);
        _cleanup_free_ char *cfg = strdup_printf("%s/config.json", cfgdir);
        _cleanup_free_ char *cfgtext = strdup_printf("{\"envFile\": \"%s.nope\"}", p);
        tf_write(cfg, cfgtext, strlen(cfgtext), 0600);
        const char *cfgmissing[] = {"not found", ".nope", NULL};
        refuses(w, cfgmissing, NULL);
        /* TASKFERRY_ENV_FILE="" disables: config's envFile is not used */
        tf_world_setenv(w, "TASKFERRY_ENV_FILE", "");
        const char *l[] = {"list", NULL};
        tf_run r = tf_cli(w, NULL, NULL, l);
        ck_assert_msg(r.exit_code == 0, "%s %s", r.out, r.err);
        tf_run_done(&r);
        tf_world_free(w);
}
END_TEST

/* A watch that cannot be set up (a directory its owner may not list:
 * inotify needs read access) is a warning; the start and the values stand.
 * Root reads any directory, so this runs unprivileged only. */
START_TEST(watch_failure_is_a_warning) {
        if (geteuid() == 0) {
                printf("watch_failure_is_a_warning: skipped as root (root may watch any directory)\n");
                return;
        }
        tf_world *w = tf_world_new(NULL);
        _cleanup_free_ char *p = tf_env_file(w, "PLAIN=kept\n");
        _cleanup_free_ char *dir = strdup_printf("%s/.config/taskferry", w->home);
        ck_assert_int_eq(chmod(dir, 0300), 0);
        tf_daemon_start(w);
        _cleanup_free_ char *v = worker_value(w, "PLAIN");
        ck_assert_str_eq(v, "kept");
        _cleanup_free_ char *log = tf_daemon_log(w);
        ck_assert_msg(strstr(log, "live updates are off"), "%s", log);
        ck_assert_int_eq(chmod(dir, 0700), 0);
        tf_world_free(w);
}
END_TEST

/* ---- values, layers, reload ---- */

TF_WORLD_TEST(values_reach_workers_and_reload_live) {
        _cleanup_free_ char *p = tf_env_file(w, "# provider key\nexport K=" SECRET "\nPLAIN=one\n");
        tf_daemon_start(w);
        _cleanup_free_ char *want = hash_of(w, SECRET);
        _cleanup_free_ char *got = run_shell(w, NULL, HASH_K);
        ck_assert_str_eq(got, want);
        _cleanup_free_ char *v1 = worker_value(w, "PLAIN");
        ck_assert_str_eq(v1, "one");

        pid_t pid = tf_daemon_pid(w);
        enum { ATOMIC, IN_PLACE, MODE_0644, REMOVED };
        static const struct {
                int how;
                const char *text;                /* the new content (ATOMIC, IN_PLACE) */
                const char *name[2], *value[2]; /* what the next worker sees (name NULL: nothing checked) */
        } steps[] = {
                /* temp + rename: the next dispatch sees it, no restart */
                {ATOMIC, "K=" SECRET "\nPLAIN=two\n", {"PLAIN"}, {"two"}},
                /* in place */
                {IN_PLACE, "K=" SECRET "\nPLAIN=three\nNEW=added\n", {"PLAIN", "NEW"}, {"three", "added"}},
                /* whole-map replacement: a name dropped from the file is gone */
                {ATOMIC, "K=" SECRET "\nPLAIN=four\n", {"NEW", "PLAIN"}, {"-", "four"}},
                /* broken rewrites keep the last good values: a malformed line, a
                 * mode with group/other bits, the file gone */
                {IN_PLACE, "K=" SECRET "\nPLAIN=\"broken\n", {"PLAIN"}, {"four"}},
                {ATOMIC, "PLAIN=five\n", {NULL}, {NULL}},
                {MODE_0644, NULL, {"PLAIN", "K"}, {"five", "-"}},
                {REMOVED, NULL, {"PLAIN"}, {"five"}},
                /* back: picked up again */
                {ATOMIC, "PLAIN=six\n", {"PLAIN"}, {"six"}},
        };
        for (size_t i = 0; i < ELEMENTSOF(steps); i++) {
                size_t n = reloads(w);
                if (steps[i].how == ATOMIC) write_atomic(p, steps[i].text);
                else if (steps[i].how == IN_PLACE) write_in_place(p, steps[i].text);
                else if (steps[i].how == MODE_0644) ck_assert_int_eq(chmod(p, 0644), 0);
                else ck_assert_int_eq(unlink(p), 0);
                wait_reload(w, n);
                for (size_t k = 0; k < 2 && steps[i].name[k]; k++) {
                        _cleanup_free_ char *v = worker_value(w, steps[i].name[k]);
                        ck_assert_msg(streq(v, steps[i].value[k]), "step %zu: a worker sees %s=%s, want %s", i,
                                      steps[i].name[k], v, steps[i].value[k]);
                }
        }
        /* events for other files of the directory do not reload */
        size_t n = reloads(w);
        _cleanup_free_ char *other = strdup_printf("%s.other", p);
        tf_write(other, "x", 1, 0600);
        usleep(400 * 1000);
        ck_assert_uint_eq(reloads(w), n);
        ck_assert_int_eq(tf_daemon_pid(w), pid);

        /* the warnings name the path and the rule, never the content */
        _cleanup_free_ char *log = tf_daemon_log(w);
        ck_assert_msg(strstr(log, "keeping the previous values"), "%s", log);
        ck_assert_msg(strstr(log, "unterminated double-quoted value"), "%s", log);
        ck_assert_msg(strstr(log, "readable by group or other"), "%s", log);
        ck_assert_msg(!strstr(log, "broken") && !strstr(log, SECRET), "%s", log);
        /* the secret is nowhere under the world but in the env file itself:
         * not tasks.json, the logs, launch requests, daemon.log */
        _cleanup_free_ char *cfgd = strdup_printf("%s/.config/taskferry", w->home);
        _cleanup_free_ char *q = shell_quote(w->root), *qx = shell_quote(cfgd);
        _cleanup_free_ char *hits = tf_shf(w, NULL, "grep -rlaF -- '%s' %s 2>/dev/null | grep -vF -- %s || true", SECRET,
                                           q, qx);
        ck_assert_msg(isempty(hits), "the secret is in: %s", hits);
}
END_TEST

START_TEST(plumbing_and_denylist_never_from_the_file) {
        tf_world *w = tf_world_new(NULL);
        static const char *const plumbing[] = {"PATH", "HOME", "TASKFERRY_STATE_DIR", "TASKFERRY_RUNTIME_DIR",
                                               "TASKFERRY_CACHE_DIR", "TASKFERRY_SOCKET_PATH",
                                               "TASKFERRY_OVERLAY_TMP_DIR"};
        _cleanup_free_ char *text = strdup("");
        for (size_t i = 0; i < ELEMENTSOF(plumbing); i++) {
                tf_appendf(&text, "%s=/evilmark-%zu\n", plumbing[i], i);
        }
        tf_appendf(&text, "DENIED_ONE=evilmark-d1\nDENIED_TWO=evilmark-d2\nALLOWED=fine\n");
        _cleanup_free_ char *p = tf_env_file(w, text);
        tf_world_setenv(w, "TASKFERRY_ENV_DENYLIST", "DENIED_ONE,DENIED_TWO");
        /* the daemon's own env lacks TASKFERRY_SOCKET_PATH and
         * TASKFERRY_OVERLAY_TMP_DIR: a naive union would let the file's through */
        strv_env_unset(&w->env, "TASKFERRY_SOCKET_PATH");
        strv_env_unset(&w->env, "TASKFERRY_OVERLAY_TMP_DIR");
        tf_daemon_start(w);
        _cleanup_free_ char *out = run_shell(w, NULL, "env");
        ck_assert_msg(!strstr(out, "evilmark"), "a plumbing or denylisted name came from the env file:\n%s", out);
        ck_assert_msg(strstr(out, "\nALLOWED=fine\n") || startswith(out, "ALLOWED=fine\n"), "%s", out);
        /* unsandboxed the same (the env is built before the sandbox) */
        const char *ns[] = {"--no-sandbox", NULL};
        _cleanup_free_ char *out2 = run_shell(w, ns, "env");
        ck_assert_msg(!strstr(out2, "evilmark"), "%s", out2);
        ck_assert_msg(strstr(out2, "ALLOWED=fine"), "%s", out2);
        tf_world_free(w);
}
END_TEST

START_TEST(caller_beats_daemon_beats_file) {
        tf_world *w = tf_world_new(NULL);
        _cleanup_free_ char *p = tf_env_file(w, "L1=file\nL2=file\nL3=file\n");
        tf_world_setenv(w, "L2", "daemon");
        tf_world_setenv(w, "L3", "daemon");
        tf_daemon_start(w);
        /* the caller (the CLI forwards its env) has only L3 */
        strv_env_unset(&w->env, "L2");
        tf_world_setenv(w, "L3", "caller");
        _cleanup_free_ char *out = run_shell(w, NULL, "printf '%s %s %s' \"$L1\" \"$L2\" \"$L3\"");
        ck_assert_str_eq(out, "file daemon caller");
        tf_world_free(w);
}
END_TEST

/* A queued task's caller env is frozen at dispatch, its env-file values are
 * the ones current at its spawn; its launch request holds no env-file value. */
TF_WORLD_TEST(queued_task_gets_the_values_at_spawn) {
        _cleanup_free_ char *p = tf_env_file(w, "K=old-" SECRET "\nPLAIN=old\n");
        tf_world_setenv(w, "TASKFERRY_MAX_CONCURRENT_TASKS", "1");
        tf_daemon_start(w);
        _cleanup_free_ char *hold_script =
                strdup_printf("i=0; while [ ! -e %s/release ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done",
                              w->repo_parent);
        /* unsandboxed: the release file must be seen at once (an overlay
         * caches the negative lookup) */
        const char *nosandbox[] = {"--no-sandbox", NULL};
        _cleanup_free_ char *holder = tf_dispatch_shell(w, w->repo_parent, nosandbox, hold_script);
        tf_world_setenv(w, "FROZEN", "at-dispatch");
        _cleanup_free_ char *script = strdup_printf("printf '%%s %%s ' \"$PLAIN\" \"$FROZEN\"; %s", HASH_K);
        _cleanup_free_ char *queued = tf_dispatch_shell(w, w->repo_parent, NULL, script);
        tf_world_setenv(w, "FROZEN", "later");
        json_object *qs = tf_status_rpc(w, queued);
        ck_assert_str_eq(json_get_string(qs, "status"), "queued");
        json_object_put(qs);
        /* the launch request on disk: the caller's env, no env-file value, 0600 */
        _cleanup_free_ char *req = strdup_printf("%s/tasks/%s/pending-launch.json", w->state, queued);
        struct stat st;
        ck_assert_int_eq(stat(req, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0600);
        _cleanup_free_ char *rq = tf_read(req, NULL);
        ck_assert_msg(!strstr(rq, SECRET) && !strstr(rq, "PLAIN"), "%s", rq);
        ck_assert_msg(strstr(rq, "at-dispatch"), "%s", rq);
        /* rotate while it waits */
        size_t n = reloads(w);
        write_atomic(p, "K=new-" SECRET "\nPLAIN=new\n");
        wait_reload(w, n);
        free(tf_shf(w, NULL, "touch %s/release", w->repo_parent));
        json_object_put(tf_wait_settled(w, holder));
        json_object *st2 = tf_wait_settled(w, queued);
        ck_assert_str_eq(json_get_string(st2, "status"), "done");
        json_object_put(st2);
        _cleanup_free_ char *msg = tf_task_message(w, queued), *h = hash_of(w, "new-" SECRET);
        _cleanup_free_ char *want = strdup_printf("new at-dispatch %s", h);
        ck_assert_str_eq(msg, want);
        /* tasks.json and the logs hold neither value */
        _cleanup_free_ char *q = shell_quote(w->state), *log = tf_daemon_log(w);
        _cleanup_free_ char *hits = tf_shf(w, NULL, "grep -rlaF -- '%s' %s 2>/dev/null || true", SECRET, q);
        ck_assert_msg(isempty(hits), "the secret is in: %s", hits);
        ck_assert(!strstr(log, SECRET));
}
END_TEST

/* A worker's nested dispatch forwards the env the worker got, env-file
 * values included: the nested task's launch request on disk leaves them
 * out, and the nested task still gets them (from the env file, at spawn). */
TF_WORLD_TEST(nested_dispatch_request_holds_no_file_value) {
        _cleanup_free_ char *p = tf_env_file(w, "K=" SECRET "\n");
        tf_world_setenv(w, "TASKFERRY_MAX_CONCURRENT_TASKS", "1");
        tf_daemon_start(w);
        /* the child stays queued while its parent holds the only slot */
        _cleanup_free_ char *nested = shell_quote(HASH_K);
        _cleanup_free_ char *script = strdup_printf(
                "c=$(taskferry dispatch --executor shell --prompt %s | sed -n 's/^id: //p'); "
                "echo $c > $TASKFERRY_OUTPUT_DIR/child; i=0; while [ ! -e $TASKFERRY_OUTPUT_DIR/release ] && "
                "[ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done",
                nested);
        _cleanup_free_ char *parent = tf_dispatch_shell(w, w->repo_parent, NULL, script);
        _cleanup_free_ char *child = tf_output_line(w, parent, "child", 20000);
        ck_assert_msg(task_id_is_valid(child), "no nested task: [%s]", child);
        _cleanup_free_ char *req = strdup_printf("%s/tasks/%s/pending-launch.json", w->state, child);
        _cleanup_free_ char *rq = tf_read(req, NULL);
        ck_assert_msg(!strstr(rq, SECRET), "the env file's value is in the nested task's launch request: %s", rq);
        ck_assert_msg(strstr(rq, "\"TASKFERRY_TASK_ID\""), "no caller env in the request: %s", rq);
        /* release the parent: the child runs and sees K */
        tf_output_touch(w, parent, "release");
        json_object_put(tf_wait_settled(w, parent));
        json_object *st = tf_wait_settled(w, child);
        ck_assert_str_eq(json_get_string(st, "status"), "done");
        json_object_put(st);
        _cleanup_free_ char *msg = tf_task_message(w, child), *want = hash_of(w, SECRET);
        ck_assert_str_eq(msg, want);
        _cleanup_free_ char *q = shell_quote(w->state);
        _cleanup_free_ char *hits = tf_shf(w, NULL, "grep -rlaF -- '%s' %s 2>/dev/null || true", SECRET, q);
        ck_assert_msg(isempty(hits), "the secret is in: %s", hits);
}
END_TEST

/* The hostile worker: it cannot read the env file at its documented place,
 * even with that directory bound in, nor change what later tasks get. */
TF_WORLD_TEST(worker_cannot_read_or_change_the_file) {
        _cleanup_free_ char *p = tf_env_file(w, "K=" SECRET "\nPLAIN=orig\n");
        tf_daemon_start(w);
        _cleanup_free_ char *before = tf_read(p, NULL);
        _cleanup_free_ char *dir = strdup_printf("%s/.config/taskferry", w->home);
        _cleanup_free_ char *qp = shell_quote(p), *qd = shell_quote(dir);
        /* read: as the sandbox shows the home (an empty one), then with the
         * dir bound read-only and read-write (the file stays masked) */
        _cleanup_free_ char *rd = strdup_printf("cat %s 2>&1; ls -la %s 2>&1; echo done", qp, qd);
        const char *ro[] = {"--ro-bind", dir, NULL};
        const char *rw[] = {"--rw-bind", dir, NULL};
        const char *const *binds[] = {NULL, ro, rw};
        for (size_t i = 0; i < ELEMENTSOF(binds); i++) {
                _cleanup_free_ char *out = run_shell(w, binds[i], rd);
                ck_assert_msg(!strstr(out, SECRET) && !strstr(out, "PLAIN"), "bind %zu: the worker read it: %s", i, out);
        }
        /* write: in place, by rename, by unlink + create */
        _cleanup_free_ char *wr = strdup_printf(
                "mkdir -p %s; echo INJECTED=evil >> %s; printf 'INJECTED=evil\\n' > %s.t && mv -f %s.t %s; "
                "rm -f %s; printf 'INJECTED=evil\\n' > %s; chmod 600 %s; echo done",
                qd, qp, qp, qp, qp, qp, qp, qp);
        size_t n = reloads(w);
        for (size_t i = 0; i < ELEMENTSOF(binds); i++) free(run_shell(w, binds[i], wr));
        usleep(400 * 1000);
        _cleanup_free_ char *after = tf_read(p, NULL);
        ck_assert_str_eq(after, before);
        ck_assert_uint_eq(reloads(w), n);
        _cleanup_free_ char *inj = worker_value(w, "INJECTED"), *plain_v = worker_value(w, "PLAIN");
        ck_assert_str_eq(inj, "-");
        ck_assert_str_eq(plain_v, "orig");
}
END_TEST

int main(void) {
        return tf_run_tests("env-file", "env-file", 300,
                            TF_TESTS(bad_file_refuses_start, watch_failure_is_a_warning, values_reach_workers_and_reload_live,
                                     plumbing_and_denylist_never_from_the_file, caller_beats_daemon_beats_file,
                                     queued_task_gets_the_values_at_spawn, nested_dispatch_request_holds_no_file_value,
                                     worker_cannot_read_or_change_the_file));
}
