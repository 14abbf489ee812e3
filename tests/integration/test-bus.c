/* The D-Bus API (src/daemon/bus.h; taskferryd(8) "D-BUS"), through the real daemon on a private dbus-daemon the test starts
 * (`dbus-daemon --session --address=unix:path=R/bus/socket`) and the real
 * clients: busctl for calls and properties, `gdbus monitor` for signals. */

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

#define NAME TF_BUS_NAME
#define MPATH TF_BUS_MPATH
#define MIFACE TF_BUS_MIFACE
#define TIFACE TF_BUS_TIFACE

/* busctl --user (the world's DBUS_SESSION_BUS_ADDRESS) with args; stdout, exit 0 asserted. */
static char *busctl(tf_world *w, const char *args) {
        return tf_shf(w, NULL, "busctl --user %s", args);
}

static char *task_property(tf_world *w, const char *path, const char *prop) {
        _cleanup_free_ char *a = strdup_printf("get-property " NAME " %s " TIFACE " %s", path, prop);
        return busctl(w, a);
}

typedef struct { const char *path, *prop, *want; } PropWait;

static bool prop_is(tf_world *w, void *arg) {
        PropWait *pw = arg;
        _cleanup_free_ char *v = task_property(w, pw->path, pw->prop);
        return streq(v, pw->want);
}

static void wait_prop(tf_world *w, const char *path, const char *prop, const char *want) {
        PropWait pw = {path, prop, want};
        if (!tf_wait_until(prop_is, w, &pw, 30000)) {
                _cleanup_free_ char *v = task_property(w, path, prop);
                ck_abort_msg("%s %s: want %s, have %s", path, prop, want, v);
        }
}

static bool file_has(tf_world *w, void *arg) {
        const char *const *fa = arg;
        if (!tf_exists(fa[0])) return false;
        _cleanup_free_ char *s = tf_read(fa[0], NULL);
        return strstr(s, fa[1]) != NULL;
}

static void wait_file_has(tf_world *w, const char *path, const char *what) {
        const char *fa[] = {path, what};
        if (!tf_wait_until(file_has, w, (void *) fa, 30000)) {
                _cleanup_free_ char *s = tf_exists(path) ? tf_read(path, NULL) : strdup("(missing)");
                size_t n = strlen(s);
                ck_abort_msg("%s never said %s; it ends:\n%s", path, what, s + (n > 2000 ? n - 2000 : 0));
        }
}

TF_BUS_TEST_ENV(objects_follow_tasks, "TASKFERRY_MAX_CONCURRENT_TASKS=1", "TF_BUS_TEST_SECRET=secret-env-value-7b1d",
                "TASKFERRY_TASK_MEMORY_MAX=96M", "TASKFERRY_TASK_TASKS_MAX=321") {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_daemon_start(w);
        ck_assert_msg(tf_wait_until(tf_bus_name_up, w, NULL, 20000), "the daemon never took " NAME);
        /* Version: the package version, as taskferryd --version says it */
        _cleanup_free_ char *version = busctl(w, "get-property " NAME " " MPATH " " MIFACE " Version");
        _cleanup_free_ char *dv = tf_shf(w, NULL, "%s --version | cut -d' ' -f2", tf_bin("taskferryd"));
        _cleanup_free_ char *want_version = strdup_printf("s \"%s\"", dv);
        ck_assert_str_eq(version, want_version);
        _cleanup_free_ char *cap = busctl(w, "get-property " NAME " " MPATH " " MIFACE " MaxConcurrentTasks");
        ck_assert_str_eq(cap, "t 1");
        /* the scope limits of the settings (bytes, tasks) */
        _cleanup_free_ char *mem = busctl(w, "get-property " NAME " " MPATH " " MIFACE " TaskMemoryMax");
        ck_assert_str_eq(mem, "t 100663296");
        _cleanup_free_ char *tmax = busctl(w, "get-property " NAME " " MPATH " " MIFACE " TaskTasksMax");
        ck_assert_str_eq(tmax, "t 321");

        /* a signal watcher, in place before the first dispatch */
        char *mon = strdup(tf_path(w->root, "monitor.out"));
        _cleanup_free_ char *mon_pid =
                tf_shf(w, NULL, "gdbus monitor --session --dest " NAME " >%s 2>&1 </dev/null & echo $!", mon);
        wait_file_has(w, mon, "is owned by");

        /* A holds the one slot, B waits queued behind it */
        char *a = tf_dispatch_shell(w, repo, NULL, "sleep 120");
        char *bid = tf_dispatch_shell(w, repo, NULL, "echo secret-prompt-3c9e > out.txt");
        char *pa = tf_bus_task_path(a), *pb = tf_bus_task_path(bid);
        ck_assert(strstr(pb, "_5f")); /* the ids' '_' escaped */
        wait_prop(w, pa, "Status", "s \"running\"");
        wait_prop(w, pb, "Status", "s \"queued\"");
        _cleanup_free_ char *queued = busctl(w, "get-property " NAME " " MPATH " " MIFACE " QueuedTasks");
        _cleanup_free_ char *running = busctl(w, "get-property " NAME " " MPATH " " MIFACE " RunningTasks");
        _cleanup_free_ char *tasks = busctl(w, "get-property " NAME " " MPATH " " MIFACE " Tasks");
        ck_assert_str_eq(queued, "u 1");
        ck_assert_str_eq(running, "u 1");
        ck_assert_str_eq(tasks, "u 2");
        _cleanup_free_ char *id_prop = task_property(w, pb, "Id");
        _cleanup_free_ char *want_id = strdup_printf("s \"%s\"", bid);
        ck_assert_str_eq(id_prop, want_id);
        _cleanup_free_ char *exec_prop = task_property(w, pb, "Executor");
        ck_assert_str_eq(exec_prop, "s \"shell\"");
        _cleanup_free_ char *dir_prop = task_property(w, pb, "Directory");
        _cleanup_free_ char *want_dir = strdup_printf("s \"%s\"", repo);
        ck_assert_str_eq(dir_prop, want_dir);
        _cleanup_free_ char *exit_prop = task_property(w, pb, "ExitCode");
        ck_assert_str_eq(exit_prop, "x -1"); /* null: not exited */

        /* tree: the manager and one object per task */
        _cleanup_free_ char *tree = busctl(w, "tree --list " NAME);
        ck_assert_msg(strstr(tree, MPATH "\n") && strstr(tree, pa) && strstr(tree, pb), "tree:\n%s", tree);
        /* introspection: both interfaces, the object manager at the manager */
        _cleanup_free_ char *im = busctl(w, "introspect " NAME " " MPATH);
        ck_assert_msg(strstr(im, MIFACE) && strstr(im, "org.freedesktop.DBus.ObjectManager") && strstr(im, ".ListTasks") &&
                              strstr(im, ".CancelTask") && strstr(im, ".TaskStateChanged"),
                      "%s", im);
        _cleanup_free_ char *ia = strdup_printf("introspect " NAME " %s", pb);
        _cleanup_free_ char *it = busctl(w, ia);
        ck_assert_msg(strstr(it, TIFACE) && strstr(it, ".Status") && strstr(it, ".FailureReason") && strstr(it, ".Unit"),
                      "%s", it);
        /* ListTasks: (id, path, status) */
        _cleanup_free_ char *lt = busctl(w, "--json=short call " NAME " " MPATH " " MIFACE " ListTasks");
        _cleanup_free_ char *rowa = strdup_printf("[\"%s\",\"%s\",\"running\"]", a, pa);
        _cleanup_free_ char *rowb = strdup_printf("[\"%s\",\"%s\",\"queued\"]", bid, pb);
        ck_assert_msg(strstr(lt, rowa) && strstr(lt, rowb), "ListTasks: %s", lt);

        /* CancelTask: A ends cancelled, its slot lets B run to done */
        _cleanup_free_ char *ca = strdup_printf("call " NAME " " MPATH " " MIFACE " CancelTask s %s", a);
        _cleanup_free_ char *note = busctl(w, ca);
        ck_assert_msg(strstr(note, "SIGTERM"), "CancelTask: %s", note);
        wait_prop(w, pa, "Status", "s \"cancelled\"");
        wait_prop(w, pb, "Status", "s \"done\"");
        _cleanup_free_ char *exit_b = task_property(w, pb, "ExitCode");
        ck_assert_str_eq(exit_b, "x 0");
        _cleanup_free_ char *cs_b = task_property(w, pb, "ChangesetStatus");
        ck_assert_str_eq(cs_b, "s \"pending\"");
        /* an unknown id */
        tf_run r = tf_sh(w, NULL, "busctl --user call " NAME " " MPATH " " MIFACE " CancelTask s oc_nosuchtask", true);
        ck_assert_msg(r.exit_code != 0 && strstr(r.err, "unknown task"), "%d %s", r.exit_code, r.err);
        tf_run_done(&r);

        /* the signals of B's life: TaskStateChanged and PropertiesChanged for
         * queued → running → done */
        const char *transitions[][2] = {{"", "queued"}, {"queued", "running"}, {"running", "done"}};
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *sig = strdup_printf(MIFACE ".TaskStateChanged ('%s', objectpath '%s', '%s', '%s')", bid,
                                                         pb, transitions[i][0], transitions[i][1]);
                wait_file_has(w, mon, sig);
        }
        _cleanup_free_ char *acanc = strdup_printf("('%s', objectpath '%s', 'running', 'cancelled')", a, pa);
        wait_file_has(w, mon, acanc);
        const char *states[] = {"queued", "running", "done"};
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *pc = strdup_printf(
                        "%s: org.freedesktop.DBus.Properties.PropertiesChanged ('" TIFACE "', {'Id': <'%s'>, 'Status': <'%s'>",
                        pb, bid, states[i]);
                wait_file_has(w, mon, pc);
        }
        _cleanup_free_ char *added = strdup_printf("InterfacesAdded (objectpath '%s', {'" TIFACE "'", pb);
        wait_file_has(w, mon, added);

        /* nothing secret: every property of every object, and every signal seen */
        _cleanup_free_ char *all = tf_shf(
                w, NULL,
                "for p in $(busctl --user tree --list " NAME "); do busctl --user introspect " NAME " $p; done; "
                "busctl --user call " NAME " " MPATH " org.freedesktop.DBus.ObjectManager GetManagedObjects; cat %s",
                mon);
        ck_assert_msg(strstr(all, "\"done\"") && strstr(all, "\"cancelled\""), "%.2000s", all);
        const char *leak = strstr(all, "secret-prompt-3c9e");
        ck_assert_msg(!leak, "the prompt is on the bus: ...%.200s", leak ? leak - (leak - all > 100 ? 100 : leak - all) : "");
        leak = strstr(all, "secret-env-value-7b1d");
        ck_assert_msg(!leak, "an env value is on the bus: ...%.200s", leak ? leak - (leak - all > 100 ? 100 : leak - all) : "");

        free(tf_shf(w, NULL, "kill %s", mon_pid));
        free(a), free(bid), free(pa), free(pb), free(mon), free(repo);
}
END_TEST

/* A worker cannot reach the user bus: no address in its environment, the
 * socket not in its sandbox. Should the user bind the bus into a sandbox, the
 * peer rules of the socket hold on the bus too (by the caller's pid): a
 * worker cancels only what it dispatched itself (not even its own task),
 * other tasks are unknown to it, and ListTasks shows it only its own tree. */
TF_BUS_TEST(sandbox_and_the_bus) {
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_daemon_start(w);
        ck_assert_msg(tf_wait_until(tf_bus_name_up, w, NULL, 20000), "the daemon never took " NAME);

        _cleanup_free_ char *probe = strdup_printf(
                "echo addr=${DBUS_SESSION_BUS_ADDRESS:-none}; test -e %s && echo sock=visible || echo sock=hidden; "
                "busctl --address=unix:path=%s list >/dev/null 2>&1; echo busctl=$?; "
                "busctl --user list >/dev/null 2>&1; echo user=$?; "
                "test -e /run/user/$(id -u)/bus && echo runbus=visible || echo runbus=hidden",
                b->socket, b->socket);
        char *msg = tf_shell_output(w, repo, NULL, probe, NULL);
        ck_assert_msg(strstr(msg, "addr=none\n") && strstr(msg, "sock=hidden\n") && !strstr(msg, "busctl=0\n") &&
                              !strstr(msg, "user=0\n") && strstr(msg, "runbus=hidden"),
                      "worker reached the bus: %s", msg);
        free(msg);

        /* the bus bound in on purpose: the peer rules */
        char *victim = tf_dispatch_shell(w, repo, NULL, "sleep 120");
        char *pv = tf_bus_task_path(victim);
        wait_prop(w, pv, "Status", "s \"running\"");
        char *busdir = strdup(tf_path(w->root, "bus"));
        _cleanup_free_ char *script = strdup_printf(
                "B='busctl --address=unix:path=%s'; M='" NAME " " MPATH " " MIFACE "'; "
                "$B call $M CancelTask s %s >/dev/null 2>err; echo victim=$?; grep -c 'unknown task' err; "
                "gdbus call --address unix:path=%s --dest " NAME " --object-path " MPATH " --method " MIFACE ".CancelTask "
                "$TASKFERRY_TASK_ID >/dev/null 2>err; echo self=$?; "
                "grep -c 'Error.AccessDenied: a task running in a sandbox can only cancel' err; "
                "child=$(taskferry dispatch --executor shell --directory %s --prompt 'sleep 120' | sed -n 's/^id: //p'); "
                "echo child=$child; $B --json=short call $M ListTasks | grep -o 'oc_[a-z0-9_]*\",\"/' | sort -u | wc -l | "
                "sed 's/^/listed=/'; "
                "$B call $M CancelTask s $child >/dev/null; echo own=$?",
                b->socket, victim, b->socket, repo);
        const char *bind[] = {"--rw-bind", busdir, NULL};
        msg = tf_shell_done_output(w, repo, bind, script, NULL);
        ck_assert_msg(strstr(msg, "victim=1\n1\n") && strstr(msg, "self=1\n1\n") && strstr(msg, "own=0\n") && strstr(msg, "child=oc_") &&
                              strstr(msg, "listed=2\n"),
                      "worker output: %s", msg);
        free(msg);
        /* the user's task still runs; the user, outside, cancels it */
        _cleanup_free_ char *sv = task_property(w, pv, "Status");
        ck_assert_str_eq(sv, "s \"running\"");
        _cleanup_free_ char *ca = strdup_printf("call " NAME " " MPATH " " MIFACE " CancelTask s %s", victim);
        free(busctl(w, ca));
        wait_prop(w, pv, "Status", "s \"cancelled\"");
        free(victim), free(pv), free(busdir), free(repo);
}
END_TEST

/* No bus at the address: one warning, and the daemon serves as ever. */
TF_WORLD_TEST(no_bus_carries_on) {
        _cleanup_free_ char *addr = strdup_printf("unix:path=%s", tf_path(w->root, "no-bus-here"));
        tf_world_setenv(w, "DBUS_SESSION_BUS_ADDRESS", addr);
        char *repo = tf_repo_new(w, NULL, NULL);
        tf_daemon_start(w);
        char *id = tf_shell_done(w, repo, NULL, "echo ok", NULL);
        char *log = tf_read(tf_path(w->root, "daemon.log"), NULL);
        size_t n = tf_count(log, "D-Bus API");
        ck_assert_msg(n == 1 && strstr(log, "warning"), "daemon log:\n%s", log);
        free(log), free(id), free(repo);
}
END_TEST

/* The check gate's verdict on the task object: CheckStatus moves to passed
 * (PropertiesChanged, no transition), CheckExitCode 0. */
TF_BUS_TEST(check_gate_on_the_bus) {
        char *repo = tf_repo_new(w, NULL, NULL);
        static const char toml[] = "check = \"test -f added.txt\"\n";
        tf_write(tf_path(repo, ".taskferry.toml"), toml, strlen(toml), 0644);
        free(tf_shf(w, repo, "git add .taskferry.toml && git commit -qm gate"));
        tf_daemon_start(w);
        char *id = tf_shell_pending(w, repo, NULL, "echo x > added.txt", NULL);
        char *path = tf_bus_task_path(id);
        wait_prop(w, path, "CheckStatus", "s \"passed\"");
        _cleanup_free_ char *code = task_property(w, path, "CheckExitCode");
        ck_assert_str_eq(code, "x 0");
        free(path), free(id), free(repo);
}
END_TEST

int main(void) {
        return tf_run_tests("bus", "bus", 300,
                            TF_TESTS(objects_follow_tasks, sandbox_and_the_bus, no_bus_carries_on, check_gate_on_the_bus));
}
