/* run/launch.c: the worker env's layers (env file < daemon < caller, the
 * denylist on each, the plumbing only from the daemon), the held child of
 * launch_spawn and what launch_go lets it do, the overlay a task may remove,
 * and the refusals of launch_prepare that come before any bwrap runs. A
 * whole daemon (daemon.h) on its own dirs; "shims" are shell scripts. (The
 * go-or-EOF case of the held child is test-lifecycle's.) */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/env-file.h"
#include "core/launch-options.h"
#include "daemon-fixture.h"
#include "fileio.h"
#include "fs-util.h"
#include "json-util.h"
#include "launch-spec.h"
#include "overlay.h"
#include "path-util.h"
#include "paths.h"
#include "process-util.h"
#include "run/launch.h"
#include "string-util.h"
#include "strv.h"
#include "unit.h"

static Manager m;
static char *work; /* a dispatch directory */

static void setup(void) {
        tf_daemon_setup(&m, "test-launch");
        work = strdup_printf("%s/work", m.paths.home);
        ck_assert_int_eq(mkdir(work, 0755), 0);
}

static void teardown(void) {
        tf_daemon_teardown(&m);
        free(work);
}

static json_object *json_of(const char *text) {
        json_object *o = NULL;
        ck_assert_msg(json_parse_strict(text, strlen(text), &o) == 0, "not JSON: %s", text);
        return o;
}

static void set_denylist(char **l) {
        strv_free(m.settings.env_denylist);
        m.settings.env_denylist = strv_copy(l);
        ck_assert_ptr_nonnull(m.settings.env_denylist);
}

/* ---- the env's layers ---- */

START_TEST(env_layers_order_and_filters) {
        tf_use_env_file(&m, "F_ONLY=file\nF_D=file\nF_C=file\nALL=file\nPATH=/evil/file\nHOME=/evil/file\n"
                     "TASKFERRY_STATE_DIR=/evil/file\nTASKFERRY_OUTPUT_DIR=/o/file\nDENIED=file\n");
        /* the daemon's own environment (this process's) */
        ck_assert_int_eq(setenv("F_D", "daemon", 1), 0);
        ck_assert_int_eq(setenv("D_ONLY", "daemon", 1), 0);
        ck_assert_int_eq(setenv("ALL", "daemon", 1), 0);
        ck_assert_int_eq(setenv("DENIED", "daemon", 1), 0);
        ck_assert_int_eq(setenv("HOME", "/daemon/home", 1), 0);
        ck_assert_int_eq(setenv("TASKFERRY_SOCKET_PATH", "/daemon/sock", 1), 0);
        ck_assert_int_eq(unsetenv("TASKFERRY_STATE_DIR"), 0);
        ck_assert_int_eq(unsetenv("TASKFERRY_CACHE_DIR"), 0);
        ck_assert_int_eq(unsetenv("TASKFERRY_OVERLAY_TMP_DIR"), 0);
        const char *path = getenv("PATH");
        ck_assert_ptr_nonnull(path);
        set_denylist((char *[]) {"DENIED", NULL});
        json_object *caller = json_of("{\"F_C\":\"caller\",\"ALL\":\"caller\",\"C_ONLY\":\"caller\",\"PATH\":\"/evil/c\","
                                      "\"HOME\":\"/evil/c\",\"TASKFERRY_SOCKET_PATH\":\"/evil/c\","
                                      "\"TASKFERRY_CACHE_DIR\":\"/evil/c\",\"TASKFERRY_OVERLAY_TMP_DIR\":\"/evil/c\","
                                      "\"DENIED\":\"caller\",\"NUM\":1,\"NUL\":null,\"OBJ\":{}}");
        char **env = NULL;
        ck_assert_int_eq(launch_env_layers(&m, caller, &env), 0);
        /* each layer wins over the ones below */
        ck_assert_str_eq(strnull(strv_env_get(env, "F_ONLY")), "file");
        ck_assert_str_eq(strnull(strv_env_get(env, "F_D")), "daemon");
        ck_assert_str_eq(strnull(strv_env_get(env, "F_C")), "caller");
        ck_assert_str_eq(strnull(strv_env_get(env, "D_ONLY")), "daemon");
        ck_assert_str_eq(strnull(strv_env_get(env, "ALL")), "caller");
        ck_assert_str_eq(strnull(strv_env_get(env, "C_ONLY")), "caller");
        /* the plumbing: the daemon's own, or nothing */
        ck_assert_str_eq(strnull(strv_env_get(env, "PATH")), path);
        ck_assert_str_eq(strnull(strv_env_get(env, "HOME")), "/daemon/home");
        ck_assert_str_eq(strnull(strv_env_get(env, "TASKFERRY_SOCKET_PATH")), "/daemon/sock");
        ck_assert_ptr_null(strv_env_get(env, "TASKFERRY_STATE_DIR"));
        ck_assert_ptr_null(strv_env_get(env, "TASKFERRY_CACHE_DIR"));
        ck_assert_ptr_null(strv_env_get(env, "TASKFERRY_OVERLAY_TMP_DIR"));
        /* not plumbing: an env file may set it (the per-task value goes on top later) */
        ck_assert_str_eq(strnull(strv_env_get(env, "TASKFERRY_OUTPUT_DIR")), "/o/file");
        /* the denylist on every layer */
        ck_assert_ptr_null(strv_env_get(env, "DENIED"));
        /* only strings come from the caller */
        ck_assert_ptr_null(strv_env_get(env, "NUM"));
        ck_assert_ptr_null(strv_env_get(env, "NUL"));
        ck_assert_ptr_null(strv_env_get(env, "OBJ"));
        /* each name once */
        size_t n_all = 0;
        for (char **e = env; *e; e++) n_all += !!startswith(*e, "ALL=");
        ck_assert_uint_eq(n_all, 1);
        strv_free(env);

        /* the denylist reaches the daemon's own env and its plumbing too */
        set_denylist((char *[]) {"D_ONLY", "HOME", "C_ONLY", NULL});
        ck_assert_int_eq(launch_env_layers(&m, caller, &env), 0);
        ck_assert_ptr_null(strv_env_get(env, "D_ONLY"));
        ck_assert_ptr_null(strv_env_get(env, "HOME"));
        ck_assert_ptr_null(strv_env_get(env, "C_ONLY"));
        ck_assert_str_eq(strnull(strv_env_get(env, "DENIED")), "caller");
        strv_free(env);

        /* no caller env: the lower two */
        ck_assert_int_eq(launch_env_layers(&m, NULL, &env), 0);
        ck_assert_str_eq(strnull(strv_env_get(env, "ALL")), "daemon");
        ck_assert_str_eq(strnull(strv_env_get(env, "F_C")), "file");
        strv_free(env);
        json_object_put(caller);
}
END_TEST

/* Without an env file and with an empty caller env: exactly the daemon's
 * environment, less what the denylist names. */
START_TEST(env_layers_without_file) {
        clearenv();
        ck_assert_int_eq(setenv("PATH", "/bin", 1), 0);
        ck_assert_int_eq(setenv("A", "1", 1), 0);
        ck_assert_int_eq(setenv("B", "2=3", 1), 0);
        set_denylist((char *[]) {"B", NULL});
        json_object *caller = json_object_new_object();
        char **env = NULL;
        ck_assert_int_eq(launch_env_layers(&m, caller, &env), 0);
        ck_assert_uint_eq(strv_length(env), 2);
        ck_assert_str_eq(strnull(strv_env_get(env, "PATH")), "/bin");
        ck_assert_str_eq(strnull(strv_env_get(env, "A")), "1");
        strv_free(env);
        set_denylist((char *[]) {NULL});
        ck_assert_int_eq(launch_env_layers(&m, caller, &env), 0);
        ck_assert_str_eq(strnull(strv_env_get(env, "B")), "2=3");
        strv_free(env);
        json_object_put(caller);
}
END_TEST

/* ---- the held child ---- */

static char *dir; /* the "shim"'s dir */

/* A "shim" script at <dir>/taskferry-shim running body. */
static void use_shim(const char *body) {
        dir = tf_tmpdir_new("shim");
        char *script = strdup_printf("#!/bin/sh\n%s\n", body);
        char *shim = tf_put(dir, "taskferry-shim", script, strlen(script));
        ck_assert_int_eq(chmod(shim, 0755), 0);
        free(m.settings.shim_path);
        m.settings.shim_path = shim;
        free(script);
}

static Task *queued_task(const char *id) {
        Task *t = tf_taskf(&m, "{\"id\":\"%s\",\"status\":\"queued\",\"changesetStatus\":\"none\",\"directory\":\"%s\"}",
                           id, work);
        t->caller_env = json_of("{\"K\":\"v\"}");
        ck_assert_int_eq(launch_request_save(t), 0);
        return t;
}

/* A spec memfd holding text, its offset at 0. */
static int spec_memfd(const char *text) {
        int fd = memfd_create(LAUNCH_SPEC_MEMFD_NAME, MFD_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t) strlen(text));
        ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
        return fd;
}

static LaunchedShim spawn(Task *t, const char *spec) {
        LaunchPlan plan = LAUNCH_PLAN_INIT;
        plan.spec_fd = spec_memfd(spec);
        LaunchedShim ls;
        char *why = NULL;
        ck_assert_msg(launch_spawn(t, &plan, &ls, &why) == 0, "spawn: %s", strnull(why));
        ck_assert_int_eq(plan.spec_fd, -1); /* taken */
        ck_assert_int_gt(ls.pid, 0);
        ck_assert_int_ge(ls.status_fd, 0);
        ck_assert_int_ge(ls.hold_fd, 0);
        return ls;
}

/* Field n (1-based: pid is 1) of /proc/<pid>/stat, after comm. */
static long stat_field(pid_t pid, int n) {
        char *p = strdup_printf("/proc/%d/stat", (int) pid), *data = tf_read_file(p, false);
        const char *s = strrchr(data, ')');
        ck_assert_ptr_nonnull(s);
        s += 2; /* field 3 */
        for (int i = 3; i < n; i++) {
                s = strchr(s, ' ');
                ck_assert_ptr_nonnull(s);
                s++;
        }
        long v = strtol(s, NULL, 10);
        free(p), free(data);
        return v;
}

/* The fds the process holds. */
static unsigned n_fds(pid_t pid) {
        char *p = strdup_printf("/proc/%d/fd", (int) pid);
        char *out = tf_sh(NULL, "ls %s | wc -l", p);
        unsigned n = (unsigned) strtoul(out, NULL, 10);
        free(p), free(out);
        return n;
}

/* Let go: the shim sees the spec as fd 3 and the status pipe as fd 4, no
 * other fd of the daemon, and the request is gone before it runs. */
START_TEST(go_drops_the_request_first) {
        Task *t = queued_task("oc_go");
        char *req = strdup_printf("%s/tasks/oc_go/%s", m.paths.state_dir, LAUNCH_REQUEST_FILE);
        char *body = strdup_printf("d=$(dirname \"$0\")\n"
                                   "if [ -e '%s' ]; then echo present; else echo absent; fi > \"$d/req\"\n"
                                   "cat <&3 > \"$d/spec\"\n"
                                   "for f in 5 6 7 8 9; do [ -e /proc/$$/fd/$f ] && echo $f; done > \"$d/extra\"\n"
                                   "echo \"$@\" > \"$d/args\"\n"
                                   "echo hello >&4",
                                   req);
        use_shim(body);
        /* a stray fd of the daemon's, not close-on-exec */
        int stray = open("/dev/null", O_RDONLY);
        ck_assert_int_ge(stray, 0);
        LaunchedShim ls = spawn(t, "SPEC");
        close(stray);
        /* held: in a session of its own, holding 0-2 and the three fds of
         * the hold (spec, status, hold) and nothing else */
        /* (the fork sets up the session, then closes the fds: wait for both) */
        for (int i = 0; i < 500 && (stat_field(ls.pid, 6) != ls.pid || n_fds(ls.pid) != 6); i++) usleep(10000);
        ck_assert_int_eq(stat_field(ls.pid, 6), ls.pid);
        ck_assert_uint_eq(n_fds(ls.pid), 6);
        /* still held: the request is there and nothing ran */
        usleep(50000);
        ck_assert(launch_request_exists(t));
        char *req_mark = tf_path(dir, "req");
        ck_assert_int_eq(access(req_mark, F_OK), -1);
        launch_go(t, &ls.hold_fd);
        ck_assert_int_eq(ls.hold_fd, -1);
        ck_assert(!launch_request_exists(t));
        ck_assert_ptr_null(t->caller_env);
        ck_assert_int_eq(wait_for_terminate_and_check("shim", ls.pid, 0), 0);
        char *got = tf_read_file(req_mark, false);
        ck_assert_str_eq(got, "absent\n");
        free(got);
        char *p = tf_path(dir, "spec");
        got = tf_read_file(p, false);
        ck_assert_str_eq(got, "SPEC");
        free(got), free(p);
        p = tf_path(dir, "extra");
        got = tf_read_file(p, false);
        ck_assert_str_eq(got, "");
        free(got), free(p);
        p = tf_path(dir, "args");
        got = tf_read_file(p, false);
        ck_assert_str_eq(got, "--spec-fd 3 --status-fd 4\n");
        free(got), free(p);
        char buf[16] = "";
        ck_assert_int_eq(read(ls.status_fd, buf, sizeof buf - 1), 6);
        ck_assert_str_eq(buf, "hello\n");
        close(ls.status_fd);
        free(req_mark), free(req), free(body);
        dir = tf_tmpdir_free(dir);
}
END_TEST

/* launch_go with no hold fd does nothing: the request and the env stay. */
START_TEST(go_without_hold_fd_does_nothing) {
        Task *t = queued_task("oc_nohold");
        int fd = -1;
        launch_go(t, &fd);
        ck_assert_int_eq(fd, -1);
        ck_assert(launch_request_exists(t));
        ck_assert_ptr_nonnull(t->caller_env);
        ck_assert_str_eq(json_get_string(t->caller_env, "K"), "v");
}
END_TEST

/* Any byte but the go byte ends the held child without running the shim. */
START_TEST(held_child_needs_the_go_byte) {
        use_shim(": > \"$(dirname \"$0\")/ran\"");
        Task *t = queued_task("oc_wrong");
        LaunchedShim ls = spawn(t, "{}");
        ck_assert_int_eq(write(ls.hold_fd, "x", 1), 1);
        close(ls.hold_fd);
        ck_assert_int_eq(wait_for_terminate_and_check("held", ls.pid, 0), EXIT_FAILURE);
        char *mark = tf_path(dir, "ran");
        ck_assert_int_eq(access(mark, F_OK), -1);
        /* nothing let it go: the request stays */
        ck_assert(launch_request_exists(t));
        close(ls.status_fd);
        free(mark);
        dir = tf_tmpdir_free(dir);
}
END_TEST

/* A go to a child that is already gone: a warning, the fd closed, the
 * request dropped all the same (the caller goes on as after any go). */
START_TEST(go_to_a_dead_child) {
        signal(SIGPIPE, SIG_IGN); /* as main.c has it */
        use_shim("true");
        Task *t = queued_task("oc_dead");
        LaunchedShim ls = spawn(t, "{}");
        ck_assert_int_eq(kill(ls.pid, SIGKILL), 0);
        siginfo_t si;
        ck_assert_int_eq(wait_for_terminate(ls.pid, &si), 0);
        ck_assert_int_eq(si.si_status, SIGKILL);
        launch_go(t, &ls.hold_fd);
        ck_assert_int_eq(ls.hold_fd, -1);
        ck_assert(!launch_request_exists(t));
        close(ls.status_fd);
        dir = tf_tmpdir_free(dir);
}
END_TEST

/* ---- the overlay ---- */

START_TEST(overlay_remove_only_its_own) {
        Task *none = tf_task(&m, "{\"id\":\"oc_none\",\"status\":\"done\",\"changesetStatus\":\"none\"}");
        ck_assert_int_eq(launch_overlay_remove(none), 0);

        char *tmp = strdup_printf("%s/cow", m.paths.home);
        char *other = strdup_printf("%s/taskferry-cow-oc_other", tmp), *own = strdup_printf("%s/taskferry-cow-oc_me", tmp);
        ck_assert_int_eq(overlay_dirs_create(tmp, other), 0);
        ck_assert_int_eq(overlay_dirs_create(tmp, own), 0);
        /* a record naming another task's overlay */
        Task *t = tf_taskf(&m,
                           "{\"id\":\"oc_me\",\"status\":\"done\",\"changesetStatus\":\"none\","
                           "\"overlayDirs\":{\"tmpRoot\":\"%s\",\"root\":\"%s\"}}",
                           tmp, other);
        ck_assert_int_eq(launch_overlay_remove(t), -EPERM);
        char *marker = strdup_printf("%s/upper/main", other);
        ck_assert_int_eq(access(marker, F_OK), 0);
        ck_assert_ptr_nonnull(t->rec.overlay_dirs);
        /* its own name under another root, or a path that climbs out */
        char *elsewhere = strdup_printf("%s/sub/taskferry-cow-oc_me", tmp);
        json_object *od = json_object_new_object();
        json_add_string(od, "tmpRoot", tmp);
        json_add_string(od, "root", elsewhere);
        ck_assert_int_eq(task_set_json(t, TASK_KEY_overlay_dirs, od), 0);
        ck_assert_int_eq(launch_overlay_remove(t), -EPERM);
        char *climb = strdup_printf("%s/../cow/taskferry-cow-oc_other/../taskferry-cow-oc_me", tmp);
        od = json_object_new_object();
        json_add_string(od, "tmpRoot", tmp);
        json_add_string(od, "root", climb);
        ck_assert_int_eq(task_set_json(t, TASK_KEY_overlay_dirs, od), 0);
        ck_assert_int_lt(launch_overlay_remove(t), 0);
        ck_assert_int_eq(access(marker, F_OK), 0);
        ck_assert_int_eq(access(own, F_OK), 0);
        /* a record missing its root */
        od = json_object_new_object();
        json_add_string(od, "tmpRoot", tmp);
        ck_assert_int_eq(task_set_json(t, TASK_KEY_overlay_dirs, od), 0);
        ck_assert_int_lt(launch_overlay_remove(t), 0);
        ck_assert_int_eq(access(own, F_OK), 0);
        /* its own: removed (work/work at mode 000, as overlayfs leaves it), the
         * record left as it is */
        char *ww = strdup_printf("%s/work/main/work", own);
        ck_assert_int_eq(mkdir(ww, 0), 0);
        od = json_object_new_object();
        json_add_string(od, "tmpRoot", tmp);
        json_add_string(od, "root", own);
        ck_assert_int_eq(task_set_json(t, TASK_KEY_overlay_dirs, od), 0);
        ck_assert_int_eq(launch_overlay_remove(t), 0);
        ck_assert_int_eq(access(own, F_OK), -1);
        ck_assert_ptr_nonnull(t->rec.overlay_dirs);
        ck_assert_int_eq(access(marker, F_OK), 0);
        free(tmp), free(other), free(own), free(marker), free(elsewhere), free(climb), free(ww);
}
END_TEST

/* ---- launch_prepare's refusals ---- */

static void assert_refused(Task *t, int want, const char *reason_part) {
        LaunchPlan plan = LAUNCH_PLAN_INIT;
        char *reason = NULL;
        int r = launch_prepare(t, &plan, &reason);
        ck_assert_msg(r == want, "launch_prepare: %d (%s), wanted %d", r, strnull(reason), want);
        ck_assert_ptr_nonnull(reason);
        ck_assert_msg(strstr(reason, reason_part), "reason: %s", reason);
        ck_assert_int_eq(plan.spec_fd, -1);
        free(reason);
}

START_TEST(prepare_refuses_an_advisor_without_overlay) {
        Task *a = tf_taskf(&m,
                           "{\"id\":\"oc_adv\",\"role\":\"advisor\",\"status\":\"queued\",\"changesetStatus\":\"none\","
                           "\"directory\":\"%s\",\"executorId\":\"pi\",\"model\":\"p/m\"}",
                           work);
        ck_assert_int_eq(a->kind, TASK_KIND_ADVISOR);
        m.settings.sandbox_enabled = false;
        assert_refused(a, -EPERM, "advisor dispatch requires overlay-gated writes, but the sandbox is unavailable");
        m.settings.sandbox_enabled = true;
        a->launch.no_sandbox = true; /* the dispatch's own --no-sandbox is no way round */
        assert_refused(a, -EPERM, "but the sandbox is unavailable");
        a->launch.no_sandbox = false;
        m.settings.overlay_enabled = false;
        assert_refused(a, -EPERM, "but overlay is disabled");
        m.settings.overlay_enabled = true;
        a->launch.no_overlay = true;
        assert_refused(a, -EPERM, "but overlay is disabled");
        /* refused before anything was made: no overlay, no task dir */
        char *td = tf_path_task_dir(&m.paths, a->id);
        ck_assert_int_eq(access(td, F_OK), -1);
        ck_assert_ptr_null(a->rec.overlay_dirs);
        free(td);
}
END_TEST

START_TEST(prepare_refuses_without_bwrap) {
        char *empty = tf_tmpdir_new("nopath");
        ck_assert_int_eq(setenv("PATH", empty, 1), 0);
        Task *t = tf_taskf(&m, "{\"id\":\"oc_nobw\",\"status\":\"queued\",\"changesetStatus\":\"none\",\"directory\":\"%s\","
                               "\"executorId\":\"shell\",\"prompt\":\"true\"}",
                           work);
        m.settings.sandbox_enabled = true;
        assert_refused(t, -ENOENT, "bwrap is required for sandboxing but was not found on PATH");
        ck_assert_ptr_null(t->rec.overlay_dirs);
        empty = tf_tmpdir_free(empty);
}
END_TEST

START_TEST(prepare_refuses_without_task_dir) {
        Task *t = tf_taskf(&m, "{\"id\":\"oc_nodir\",\"status\":\"queued\",\"changesetStatus\":\"none\",\"directory\":\"%s\","
                               "\"executorId\":\"shell\",\"prompt\":\"true\"}",
                           work);
        t->launch.no_sandbox = true;
        char *td = tf_path_task_dir(&m.paths, t->id);
        tf_write_file(td, "x", 1, 0600);
        assert_refused(t, -EIO, "cannot create the task's state directory");
        free(td);
}
END_TEST

START_TEST(prepare_refuses_a_reused_overlay) {
        if (!getenv("PATH")) setenv("PATH", "/usr/bin:/bin", 1);
        char *bwrap = NULL;
        if (find_executable("bwrap", getenv("PATH"), &bwrap) < 0) {
                fprintf(stderr, "%s: skipped: no bwrap on PATH\n", __func__);
                return;
        }
        free(bwrap);
        Task *t = tf_taskf(&m, "{\"id\":\"oc_reuse\",\"status\":\"queued\",\"changesetStatus\":\"none\",\"directory\":\"%s\","
                               "\"executorId\":\"shell\",\"prompt\":\"true\"}",
                           work);
        m.settings.sandbox_enabled = m.settings.overlay_enabled = true;
        char *root = tf_path_overlay_root(&m.paths, t->id);
        ck_assert_int_eq(overlay_dirs_create(m.paths.overlay_tmp_root, root), 0);
        assert_refused(t, -EEXIST, "an overlay for this task id already exists (refusing to reuse it)");
        ck_assert_ptr_null(t->rec.overlay_dirs);
        free(root);
}
END_TEST

/* The worker's binary missing from PATH: the preflight names it. */
START_TEST(prepare_refuses_a_missing_worker_binary) {
        char *bin = tf_tmpdir_new("bin");
        char *bwrap = NULL;
        if (find_executable("bwrap", "/usr/local/bin:/usr/bin:/bin", &bwrap) < 0) {
                fprintf(stderr, "%s: skipped: no bwrap\n", __func__);
                bin = tf_tmpdir_free(bin);
                return;
        }
        /* a PATH with bwrap and nothing else */
        char *link = tf_path(bin, "bwrap");
        ck_assert_int_eq(symlink(bwrap, link), 0);
        ck_assert_int_eq(setenv("PATH", bin, 1), 0);
        Task *t = tf_taskf(&m, "{\"id\":\"oc_nopi\",\"status\":\"queued\",\"changesetStatus\":\"none\",\"directory\":\"%s\","
                               "\"executorId\":\"pi\",\"model\":\"p/m\",\"prompt\":\"hi\"}",
                           work);
        m.settings.sandbox_enabled = true;
        m.settings.overlay_enabled = false;
        char *want = strdup_printf("pi not found on PATH (searched %s)", bin);
        assert_refused(t, -ENOENT, want);
        free(want), free(link), free(bwrap);
        bin = tf_tmpdir_free(bin);
}
END_TEST

TF_MAIN("launch", "launch", setup, teardown, 60, env_layers_order_and_filters, env_layers_without_file,
        go_drops_the_request_first, go_without_hold_fd_does_nothing, held_child_needs_the_go_byte, go_to_a_dead_child,
        overlay_remove_only_its_own, prepare_refuses_an_advisor_without_overlay, prepare_refuses_without_bwrap,
        prepare_refuses_without_task_dir, prepare_refuses_a_reused_overlay, prepare_refuses_a_missing_worker_binary)
