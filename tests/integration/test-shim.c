/* taskferry-shim end to end: real bwrap, real overlayfs, real git. Each case
 * starts the shim the way the daemon does (fork, setsid, the launch spec in a
 * sealed memfd on fd 3, a pipe on fd 4, exec) and checks what really happened
 * on disk and in /proc. Temp trees live under /var/tmp: bwrap gives the
 * sandbox a private /tmp. */

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "harness.h"
#include "json-util.h"
#include "launch-spec.h"
#include "sandbox-plan.h"
#include "macro.h"
#include "overlay.h"
#include "sandbox.h"
#include "fileio.h"
#include "fs-util.h"
#include "path-util.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"

#define SHIM_PATH TASKFERRY_BUILD_DIR "/taskferry-shim"
#define TASK_ID "oc_shimtest_1a2b3c4d"
/* Appears only in prompts: must never show up on a command line. */
#define PROMPT_MARKER "TF-PROMPT-MARKER-5f1e9c"
#define ENV_SECRET "tf-env-secret-value-77ad01"

/* The unprivileged user for the runuser case: $TASKFERRY_TEST_USER (tools/test
 * creates it), else taskferry-test. */
static const char *test_user(void) {
        const char *u = getenv("TASKFERRY_TEST_USER");
        return u && *u ? u : "taskferry-test";
}

static inline void launch_spec_freep(launch_spec **s) { launch_spec_free(*s); }

/* ---- the temp tree: a fake user's home, state, runtime and cache dirs ---- */

typedef struct tree {
        char *root, *repo, *home, *ssh, *state, *logs, *tasks, *task_dir, *log_path, *prompts, *prompt_file,
                *output, *runtime, *socket, *overlay_tmp, *overlay_root, *upper, *work, *cache, *emptybin,
                *shim_stderr;
        int sock_fd;
        char *head; /* git HEAD of repo, read before any chown */
} tree;

static char *path_join(const char *a, const char *b) {
        char *p = strdup_printf("%s/%s", a, b);
        ck_assert_ptr_nonnull(p);
        return p;
}

static void write_text(const char *path, const char *text) {
        ck_assert_int_eq(write_file_atomic(path, text, strlen(text), 0644), 0);
}

static char *read_text(const char *path) {
        char *buf = NULL;
        int r = read_file(path, 64 << 20, &buf, NULL);
        ck_assert_msg(r >= 0, "cannot read %s: %s", path, strerror(-r));
        return buf;
}

static bool exists(const char *path) {
        struct stat st;
        return lstat(path, &st) == 0;
}

static void run_ok(char *const argv[], const char *cwd, char **ret_out) {
        run_result rr;
        int r = run_command(argv, NULL, cwd, 1 << 20, -1, &rr);
        ck_assert_msg(r >= 0, "cannot run %s: %s", argv[0], strerror(-r));
        ck_assert_msg(rr.exit_code == 0, "%s failed: %s", argv[0], rr.err);
        if (ret_out) {
                *ret_out = rr.out;
                rr.out = NULL;
        }
        run_result_done(&rr);
}

static void tree_init(tree *t) {
        char tmpl[] = "/var/tmp/tf-shim-test-XXXXXX";
        ck_assert_ptr_nonnull(mkdtemp(tmpl));
        ck_assert_int_eq(chmod(tmpl, 0755), 0);
        t->root = strdup(tmpl);
        t->repo = path_join(t->root, "repo");
        t->home = path_join(t->root, "home");
        t->ssh = path_join(t->home, ".ssh");
        t->state = path_join(t->home, ".local/state/taskferry");
        t->logs = path_join(t->state, "logs");
        t->tasks = path_join(t->state, "tasks");
        t->task_dir = path_join(t->tasks, TASK_ID);
        t->log_path = path_join(t->logs, TASK_ID ".ndjson");
        t->prompts = path_join(t->state, "prompts");
        t->prompt_file = path_join(t->prompts, TASK_ID ".prompt.txt");
        t->output = path_join(t->state, "outputs/" TASK_ID);
        t->runtime = path_join(t->root, "run/taskferry");
        t->socket = path_join(t->runtime, "daemon.sock");
        t->overlay_tmp = path_join(t->runtime, "overlay");
        t->overlay_root = path_join(t->overlay_tmp, "taskferry-cow-" TASK_ID);
        t->upper = path_join(t->overlay_root, "upper/main");
        t->work = path_join(t->overlay_root, "work/main");
        t->cache = path_join(t->home, ".cache/taskferry");
        t->emptybin = path_join(t->root, "emptybin");
        t->shim_stderr = path_join(t->root, "shim.stderr");

        const char *dirs[] = {t->repo, t->ssh, t->logs, t->prompts, t->output, t->runtime, t->cache, t->emptybin};
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) ck_assert_int_eq(mkdir_p(dirs[i], 0700), 0);
        ck_assert_int_eq(overlay_dirs_create(t->overlay_tmp, t->overlay_root), 0);

        /* Secrets and other tasks' data the sandbox must not see. */
        _cleanup_free_ char *key = path_join(t->ssh, "id_ed25519");
        write_text(key, "PRIVATE KEY\n");
        _cleanup_free_ char *other_log = path_join(t->logs, "oc_other_1.ndjson");
        write_text(other_log, "{\"type\":\"text\"}\n");
        _cleanup_free_ char *cache_file = path_join(t->cache, "opencode-data");
        ck_assert_int_eq(mkdir_p(cache_file, 0700), 0);
        _cleanup_free_ char *other_overlay = path_join(t->overlay_tmp, "taskferry-cow-oc_other_1");
        ck_assert_int_eq(mkdir_p(other_overlay, 0700), 0);

        /* A git repo with three files. */
        _cleanup_free_ char *f1 = path_join(t->repo, "tracked.txt");
        _cleanup_free_ char *f2 = path_join(t->repo, "deleted.txt");
        write_text(f1, "original\n");
        write_text(f2, "doomed\n");
        char *init[] = {"git", "init", "-q", ".", NULL};
        run_ok(init, t->repo, NULL);
        char *add[] = {"git", "add", ".", NULL};
        run_ok(add, t->repo, NULL);
        char *commit[] = {"git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init", NULL};
        run_ok(commit, t->repo, NULL);
        char *head[] = {"git", "rev-parse", "HEAD", NULL};
        run_ok(head, t->repo, &t->head);
        t->head[strcspn(t->head, "\n")] = 0;

        /* A real listening daemon socket. */
        t->sock_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(t->sock_fd, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        ck_assert_uint_lt(strlen(t->socket), sizeof sa.sun_path);
        strcpy(sa.sun_path, t->socket);
        ck_assert_int_eq(bind(t->sock_fd, (struct sockaddr *) &sa, sizeof sa), 0);
        ck_assert_int_eq(listen(t->sock_fd, 4), 0);
        ck_assert_int_eq(chmod(t->socket, 0600), 0);
}

static void tree_chown(tree *t, const char *user) {
        char *argv[] = {"chown", "-R", (char *) user, t->root, NULL};
        char *spec = strdup_printf("%s:%s", user, user);
        argv[2] = spec;
        run_ok(argv, NULL, NULL);
        free(spec);
}

static void tree_done(tree *t) {
        safe_close(t->sock_fd);
        (void) rm_rf(t->root);
        char **all[] = {&t->root, &t->repo, &t->home, &t->ssh, &t->state, &t->logs, &t->tasks, &t->task_dir,
                        &t->log_path, &t->prompts, &t->prompt_file, &t->output, &t->runtime, &t->socket,
                        &t->overlay_tmp, &t->overlay_root, &t->upper, &t->work, &t->cache, &t->emptybin,
                        &t->shim_stderr, &t->head};
        for (size_t i = 0; i < ELEMENTSOF(all); i++) {
                free(*all[i]);
                *all[i] = NULL;
        }
}

/* The launch spec the daemon would build for this tree. */
static launch_spec *spec_new(const tree *t, const char *prompt, bool sandbox, uid_t uid, gid_t gid) {
        launch_spec *s = calloc(1, sizeof *s);
        ck_assert_ptr_nonnull(s);
        s->task_id = strdup(TASK_ID);
        s->executor = strdup("shell");
        s->prompt = strdup(prompt);
        s->directory = strdup(t->repo);
        ck_assert_int_eq(strv_push(&s->env, "PATH=/usr/local/bin:/usr/bin:/bin"), 0);
        ck_assert_int_eq(strv_pushf(&s->env, "HOME=%s", t->home), 0);
        ck_assert_int_eq(strv_pushf(&s->env, "TASKFERRY_OUTPUT_DIR=%s", t->output), 0);
        ck_assert_int_eq(strv_push(&s->env, "TASKFERRY_CHILD=1"), 0);
        ck_assert_int_eq(strv_push(&s->env, "TF_SECRET_TOKEN=" ENV_SECRET), 0);
        s->log_path = strdup(t->log_path);
        s->task_dir = strdup(t->task_dir);
        s->prompt_file = strdup(t->prompt_file);
        if (sandbox) {
                launch_sandbox *sb = calloc(1, sizeof *sb);
                ck_assert_ptr_nonnull(sb);
                sb->uid = uid;
                sb->gid = gid;
                /* the mounts the daemon would plan (sandbox-plan.h) */
                char *deny[] = {t->state, t->ssh, NULL};
                char *structural[] = {t->runtime, t->cache, NULL};
                sandbox_mount *tail = NULL;
                size_t n_tail = 0;
                ck_assert_int_eq(sandbox_mounts_push(&tail, &n_tail, SANDBOX_MOUNT_BIND, t->output, t->output, NULL,
                                                     NULL, NULL),
                                 0);
                ck_assert_int_eq(sandbox_mounts_push(&tail, &n_tail, SANDBOX_MOUNT_BIND, t->socket, t->socket, NULL,
                                                     NULL, NULL),
                                 0);
                sandbox_plan_args pa = {.home = t->home, .directory = t->repo, .deny = deny, .structural = structural,
                                        .tail = tail, .n_tail = n_tail};
                ck_assert_int_eq(sandbox_plan_build(&pa, &sb->mounts, &sb->n_mounts, NULL), 0);
                sandbox_mounts_free(tail, n_tail);
                sb->overlay = calloc(1, sizeof(launch_overlay));
                ck_assert_ptr_nonnull(sb->overlay);
                sb->overlay->lower = strdup(t->repo);
                sb->overlay->upper = strdup(t->upper);
                sb->overlay->work = strdup(t->work);
                sb->share_net = true;
                s->sandbox = sb;
        }
        return s;
}

/* ---- running the shim like the daemon does ---- */

typedef struct shim_run {
        pid_t pid;      /* what we forked (runuser when run as another user) */
        int status_fd;  /* read end of the status pipe */
} shim_run;

static void shim_start_argv(const tree *t, const launch_spec *spec, char *const argv[], shim_run *ret) {
        int spec_fd = launch_spec_to_memfd(spec);
        ck_assert_int_ge(spec_fd, 0);
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        int errfd = open(t->shim_stderr, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        ck_assert_int_ge(errfd, 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                (void) setsid();
                /* If this test dies half way, the shim gets SIGTERM and takes
                 * its worker down with it instead of lingering. */
                (void) prctl(PR_SET_PDEATHSIG, SIGTERM);
                /* Move everything above 4 first so the dup2s cannot clobber. */
                int s = fcntl(spec_fd, F_DUPFD_CLOEXEC, 10), w = fcntl(p[1], F_DUPFD_CLOEXEC, 10);
                if (s < 0 || w < 0 || dup2(s, 3) < 0 || dup2(w, 4) < 0 || dup2(errfd, 2) < 0) _exit(126);
                execv(argv[0], argv);
                _exit(127);
        }
        close(spec_fd);
        close(p[1]);
        close(errfd);
        ret->pid = pid;
        ret->status_fd = p[0];
}

static void shim_start(const tree *t, const launch_spec *spec, const char *user, shim_run *ret) {
        if (user) {
                _cleanup_free_ char *runuser = NULL;
                ck_assert_int_eq(find_executable("runuser", "/usr/sbin:/usr/bin:/sbin:/bin", &runuser), 0);
                char *argv[] = {runuser, "-u", (char *) user, "--", SHIM_PATH, "--spec-fd", "3", "--status-fd", "4", NULL};
                shim_start_argv(t, spec, argv, ret);
        } else {
                char *argv[] = {SHIM_PATH, "--spec-fd", "3", "--status-fd", "4", NULL};
                shim_start_argv(t, spec, argv, ret);
        }
}

/* Everything the shim wrote on the status fd, until it closed it. */
static char *read_status(shim_run *run) {
        size_t cap = 4096, len = 0;
        char *buf = malloc(cap);
        ck_assert_ptr_nonnull(buf);
        for (;;) {
                ssize_t n = read(run->status_fd, buf + len, cap - len - 1);
                if (n < 0 && errno == EINTR) continue;
                ck_assert_int_ge(n, 0);
                if (n == 0) break;
                len += (size_t) n;
                if (cap - len < 2) ck_assert_ptr_nonnull(buf = realloc(buf, cap *= 2));
        }
        buf[len] = 0;
        run->status_fd = safe_close(run->status_fd);
        return buf;
}

static int shim_wait(shim_run *run) {
        int status;
        while (waitpid(run->pid, &status, 0) < 0) ck_assert_int_eq(errno, EINTR);
        ck_assert_msg(WIFEXITED(status), "shim died by signal %d", WTERMSIG(status));
        return WEXITSTATUS(status);
}

/* Run to completion; returns the shim's exit status, *ret_status the status line(s). */
static int shim_run_all(const tree *t, const launch_spec *spec, const char *user, char **ret_status) {
        shim_run run;
        shim_start(t, spec, user, &run);
        char *status = read_status(&run);
        int r = shim_wait(&run);
        if (ret_status) *ret_status = status;
        else free(status);
        return r;
}

/* ---- checks ---- */

static void read_exit(const tree *t, exit_info *ei) {
        int r = exit_info_read(t->task_dir, ei);
        ck_assert_msg(r >= 0, "exit.json: %s", strerror(-r));
}

static void assert_mode_0600(const char *path) {
        struct stat st;
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_msg((st.st_mode & 07777) == 0600, "%s has mode %o", path, st.st_mode & 07777);
}

/* launch.json and the status line hold the same object. */
static void check_launch(const tree *t, const char *status_line, const char *want_method, launch_info *li) {
        int r = launch_info_read(t->task_dir, li);
        ck_assert_msg(r >= 0, "launch.json: %s", strerror(-r));
        _cleanup_free_ char *launch_path = path_join(t->task_dir, LAUNCH_JSON_NAME);
        assert_mode_0600(launch_path);
        _cleanup_free_ char *file = read_text(launch_path);
        ck_assert_str_eq(status_line, file);
        ck_assert_ptr_nonnull(strchr(status_line, '\n'));
        ck_assert_ptr_eq(strchr(status_line, '\n'), status_line + strlen(status_line) - 1);
        ck_assert_int_gt(li->shim_pid, 0);
        ck_assert_int_gt(li->worker_pid, 0);
        ck_assert_int_ne(li->worker_pid, li->shim_pid);
        ck_assert_ptr_nonnull(li->pre_dispatch_head);
        ck_assert_str_eq(li->pre_dispatch_head, t->head);
        if (want_method) {
                ck_assert_ptr_nonnull(li->overlay_method);
                ck_assert_str_eq(li->overlay_method, want_method);
        } else
                ck_assert_ptr_null(li->overlay_method);
        ck_assert_uint_gt(li->started_at_ms, 0);
}

static bool log_has_line(const char *log, const char *line) {
        size_t n = strlen(line);
        for (const char *p = log; (p = strstr(p, line)); p++)
                if ((p == log || p[-1] == '\n') && p[n] == '\n') return true;
        return false;
}

static char *shell_event(const char *text_json) {
        char *s = strdup_printf("{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":%s,\"messageID\":\"shell\"}}",
                                text_json);
        ck_assert_ptr_nonnull(s);
        return s;
}

static void assert_log_has_event(const char *log, const char *text_json) {
        _cleanup_free_ char *ev = shell_event(text_json);
        ck_assert_msg(log_has_line(log, ev), "log lacks %s; log is:\n%.2000s", ev, log);
}

static const char *expected_method(void) {
        _cleanup_free_ char *bwrap = NULL;
        ck_assert_int_eq(find_executable("bwrap", "/usr/local/bin:/usr/bin:/bin", &bwrap), 0);
        overlay_method m;
        ck_assert_int_eq(bwrap_probe_overlay(bwrap, &m), 0);
        return m == OVERLAY_METHOD_BWRAP ? "bwrap" : "userns";
}

static void assert_out_file(const tree *t, const char *name, const char *want) {
        _cleanup_free_ char *p = path_join(t->output, name);
        ck_assert_msg(exists(p), "the worker did not write %s", name);
        _cleanup_free_ char *got = read_text(p);
        ck_assert_msg(streq(got, want), "%s: got \"%s\", want \"%s\"", name, got, want);
}

static void assert_no_secrets_on_stderr(const tree *t) {
        if (!exists(t->shim_stderr)) return;
        _cleanup_free_ char *err = read_text(t->shim_stderr);
        ck_assert_msg(!strstr(err, PROMPT_MARKER), "the prompt reached the shim's stderr");
        ck_assert_msg(!strstr(err, ENV_SECRET), "an env value reached the shim's stderr");
}

/* ---- the core sandbox case, as root and as an unprivileged user ---- */

/* Every probe writes its finding into the output dir (a rw bind). */
static char *core_prompt(const tree *t) {
        char *p = strdup_printf(
                "# " PROMPT_MARKER "\n"
                "O=\"$TASKFERRY_OUTPUT_DIR\"\n"
                "echo 'line one'\n"
                "echo 'to stderr' >&2\n"
                "echo '{\"type\":\"not-really\"}'\n"
                "echo modified >> tracked.txt\n"
                "echo new > created.txt\n"
                "rm deleted.txt\n"
                "ls -A \"$HOME/.ssh\" > \"$O/ssh.txt\" 2>/dev/null\n"
                "if test -e '%s'; then echo visible; else echo hidden; fi > \"$O/logs.txt\"\n"
                "ls -A '%s' > \"$O/state.txt\" 2>&1\n"
                "ls -A '%s' > \"$O/cache.txt\" 2>/dev/null\n"
                "ls -A '%s' > \"$O/runtime.txt\" 2>&1\n"
                "test -S '%s' && echo socket > \"$O/socket.txt\"\n"
                "if touch \"$HOME/planted\" 2>/dev/null; then echo yes; else echo no; fi > \"$O/home-writable.txt\"\n"
                "if touch /usr/planted 2>/dev/null; then echo yes; else echo no; fi > \"$O/usr-writable.txt\"\n"
                "cat /proc/[0-9]*/cmdline | tr '\\0' ' ' > \"$O/cmdlines.txt\"\n"
                "id -u > \"$O/uid.txt\"\n"
                "pwd > \"$O/pwd.txt\"\n"
                "cat tracked.txt > \"$O/tracked.txt\"\n"
                "printf 'no newline at the end'\n"
                "exit 3\n",
                t->logs, t->state, t->cache, t->runtime, t->socket);
        ck_assert_ptr_nonnull(p);
        return p;
}

static void run_core_sandbox(const char *user) {
        tree t;
        tree_init(&t);
        uid_t uid = getuid();
        gid_t gid = getgid();
        if (user) {
                char *argv[] = {"id", "-u", (char *) user, NULL};
                _cleanup_free_ char *out = NULL;
                run_ok(argv, NULL, &out);
                uid = (uid_t) strtoul(out, NULL, 10);
                char *argv2[] = {"id", "-g", (char *) user, NULL};
                _cleanup_free_ char *out2 = NULL;
                run_ok(argv2, NULL, &out2);
                gid = (gid_t) strtoul(out2, NULL, 10);
                tree_chown(&t, user);
        }
        _cleanup_free_ char *prompt = core_prompt(&t);
        _cleanup_(launch_spec_freep) launch_spec *spec = spec_new(&t, prompt, true, uid, gid);

        _cleanup_free_ char *status = NULL;
        ck_assert_int_eq(shim_run_all(&t, spec, user, &status), 0);

        /* launch.json / status line / exit.json */
        launch_info li;
        check_launch(&t, status, expected_method(), &li);
        launch_info_done(&li);
        exit_info ei;
        read_exit(&t, &ei);
        ck_assert_msg(!ei.spawn_error, "spawnError: %s", ei.spawn_error);
        ck_assert(ei.has_exit_code);
        ck_assert_int_eq(ei.exit_code, 3);
        ck_assert_ptr_null(ei.signal);
        ck_assert_uint_ge(ei.ended_at_ms, li.started_at_ms);
        exit_info_done(&ei);
        _cleanup_free_ char *exit_path = path_join(t.task_dir, EXIT_JSON_NAME);
        assert_mode_0600(exit_path);
        struct stat st;
        ck_assert_int_eq(stat(t.task_dir, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0700);

        /* The host directory is untouched... */
        _cleanup_free_ char *host_tracked = path_join(t.repo, "tracked.txt");
        _cleanup_free_ char *host_created = path_join(t.repo, "created.txt");
        _cleanup_free_ char *host_deleted = path_join(t.repo, "deleted.txt");
        _cleanup_free_ char *tracked = read_text(host_tracked);
        ck_assert_str_eq(tracked, "original\n");
        ck_assert(!exists(host_created));
        ck_assert(exists(host_deleted));
        /* ...while the worker saw its own writes... */
        assert_out_file(&t, "tracked.txt", "original\nmodified\n");
        /* ...which all landed in the upper dir, the deletion as a whiteout. */
        _cleanup_free_ char *up_tracked = path_join(t.upper, "tracked.txt");
        _cleanup_free_ char *up_created = path_join(t.upper, "created.txt");
        _cleanup_free_ char *up_deleted = path_join(t.upper, "deleted.txt");
        _cleanup_free_ char *ut = read_text(up_tracked);
        ck_assert_str_eq(ut, "original\nmodified\n");
        _cleanup_free_ char *uc = read_text(up_created);
        ck_assert_str_eq(uc, "new\n");
        ck_assert_int_eq(lstat(up_deleted, &st), 0);
        ck_assert_msg(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0), "deleted.txt is not a whiteout");
        if (user) {
                ck_assert_int_eq(stat(up_created, &st), 0);
                ck_assert_uint_eq(st.st_uid, uid);
        }

        /* The log: canonical events for stdout, stderr raw, 0600. */
        assert_mode_0600(t.log_path);
        _cleanup_free_ char *log = read_text(t.log_path);
        assert_log_has_event(log, "\"line one\\n\"");
        assert_log_has_event(log, "\"{\\\"type\\\":\\\"not-really\\\"}\\n\"");
        assert_log_has_event(log, "\"no newline at the end\"");
        ck_assert_msg(log_has_line(log, "to stderr"), "raw stderr missing from the log:\n%s", log);

        /* Inside the sandbox. */
        assert_out_file(&t, "ssh.txt", "");
        assert_out_file(&t, "logs.txt", "hidden\n"); /* other tasks' logs are hidden */
        assert_out_file(&t, "state.txt", "outputs\n"); /* only the path to the output dir bind */
        assert_out_file(&t, "cache.txt", "");
        assert_out_file(&t, "runtime.txt", "daemon.sock\n"); /* no sibling overlays */
        assert_out_file(&t, "socket.txt", "socket\n");
        /* the sandbox's home is a private tmpfs: writable, and nothing reaches the real home */
        assert_out_file(&t, "home-writable.txt", "yes\n");
        assert_out_file(&t, "usr-writable.txt", "no\n");
        _cleanup_free_ char *home_planted = path_join(t.home, "planted");
        ck_assert(!exists(home_planted));
        _cleanup_free_ char *want_uid = strdup_printf("%u\n", (unsigned) uid);
        assert_out_file(&t, "uid.txt", want_uid);
        _cleanup_free_ char *want_pwd = strdup_printf("%s\n", t.repo);
        assert_out_file(&t, "pwd.txt", want_pwd);
        _cleanup_free_ char *cmdlines_path = path_join(t.output, "cmdlines.txt");
        _cleanup_free_ char *cmdlines = read_text(cmdlines_path);
        ck_assert_msg(strstr(cmdlines, "sh " SANDBOX_PROMPT_PATH), "the worker is not `sh <prompt file>`: %s",
                      cmdlines);
        ck_assert_msg(!strstr(cmdlines, PROMPT_MARKER), "the prompt is on a command line: %s", cmdlines);

        /* No prompt file on the host for a sandboxed run: it went through a memfd. */
        ck_assert(!exists(t.prompt_file));
        assert_no_secrets_on_stderr(&t);
        tree_done(&t);
}

START_TEST(test_sandbox_overlay_root) { run_core_sandbox(NULL); }
END_TEST

/* As root, run the shim as an unprivileged user (runuser). Run as a non-root
 * user, the case above already was the unprivileged one. */
START_TEST(test_sandbox_overlay_unprivileged) {
        if (getuid() != 0) {
                fprintf(stderr, "not root: test_sandbox_overlay_root already ran unprivileged\n");
                return;
        }
        run_core_sandbox(test_user());
}
END_TEST

/* ---- unsandboxed: the prompt goes through a 0600 file ---- */

START_TEST(test_unsandboxed_prompt_file) {
        tree t;
        tree_init(&t);
        _cleanup_free_ char *prompt = strdup_printf(
                "# " PROMPT_MARKER "\n"
                "O=\"$TASKFERRY_OUTPUT_DIR\"\n"
                "echo \"$0\" > \"$O/argv0.txt\"\n"
                "stat -c %%a \"$0\" > \"$O/mode.txt\"\n"
                "tr '\\0' ' ' < /proc/$$/cmdline > \"$O/cmdline.txt\"\n"
                /* An ignored-on-entry signal cannot be trapped by a non-interactive
                 * sh, and a blocked one stays pending: both traps fire only with
                 * default dispositions and an empty mask. */
                "trap 'echo usr1 >> \"$O/signals.txt\"' USR1\n"
                "trap 'echo usr2 >> \"$O/signals.txt\"' USR2\n"
                "kill -USR1 $$\n"
                "kill -USR2 $$\n"
                "env | sort > \"$O/env.txt\"\n"
                "echo written > live.txt\n"
                "echo done\n");
        _cleanup_(launch_spec_freep) launch_spec *spec = spec_new(&t, prompt, false, getuid(), getgid());

        /* A daemon-like parent: SIGUSR1 ignored, SIGUSR2 blocked. The worker
         * must get neither. */
        signal(SIGUSR1, SIG_IGN);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGUSR2);
        ck_assert_int_eq(sigprocmask(SIG_BLOCK, &set, NULL), 0);

        _cleanup_free_ char *status = NULL;
        ck_assert_int_eq(shim_run_all(&t, spec, NULL, &status), 0);
        launch_info li;
        check_launch(&t, status, NULL, &li);
        launch_info_done(&li);
        exit_info ei;
        read_exit(&t, &ei);
        ck_assert_msg(!ei.spawn_error, "spawnError: %s", ei.spawn_error);
        ck_assert(ei.has_exit_code);
        ck_assert_int_eq(ei.exit_code, 0);
        exit_info_done(&ei);

        /* The prompt file: 0600, exactly the prompt, and what sh ran. */
        assert_mode_0600(t.prompt_file);
        _cleanup_free_ char *pf = read_text(t.prompt_file);
        ck_assert_str_eq(pf, prompt);
        _cleanup_free_ char *want_argv0 = strdup_printf("%s\n", t.prompt_file);
        assert_out_file(&t, "argv0.txt", want_argv0);
        assert_out_file(&t, "mode.txt", "600\n");
        _cleanup_free_ char *want_cmdline = strdup_printf("sh %s ", t.prompt_file);
        assert_out_file(&t, "cmdline.txt", want_cmdline);
        assert_out_file(&t, "signals.txt", "usr1\nusr2\n");
        /* Exactly the spec's environment, nothing added (sh adds PWD and may add OLDPWD/SHLVL). */
        _cleanup_free_ char *env_path = path_join(t.output, "env.txt");
        _cleanup_free_ char *env = read_text(env_path);
        for (char **e = spec->env; *e; e++) ck_assert_msg(log_has_line(env, *e), "worker env lacks %s", *e);
        ck_assert_msg(!strstr(env, "LD_PRELOAD") && !strstr(env, "ASAN_OPTIONS="), "extra env: %s", env);
        /* No sandbox: writes are live. */
        _cleanup_free_ char *live = path_join(t.repo, "live.txt");
        ck_assert(exists(live));
        _cleanup_free_ char *log = read_text(t.log_path);
        assert_log_has_event(log, "\"done\\n\"");
        assert_no_secrets_on_stderr(&t);
        tree_done(&t);
}
END_TEST

/* ---- failures before the worker runs ---- */

static void assert_spawn_error(const tree *t, const char *status, const char *needle) {
        ck_assert_str_eq(status, ""); /* EOF without a line */
        _cleanup_free_ char *launch_path = path_join(t->task_dir, LAUNCH_JSON_NAME);
        ck_assert(!exists(launch_path));
        exit_info ei;
        read_exit(t, &ei);
        ck_assert_msg(ei.spawn_error && strstr(ei.spawn_error, needle), "spawnError \"%s\" lacks \"%s\"",
                      strnull(ei.spawn_error), needle);
        ck_assert(!ei.has_exit_code);
        ck_assert_ptr_null(ei.signal);
        exit_info_done(&ei);
        _cleanup_free_ char *exit_path = path_join(t->task_dir, EXIT_JSON_NAME);
        assert_mode_0600(exit_path);
        _cleanup_free_ char *marker = path_join(t->output, "ran.txt");
        ck_assert_msg(!exists(marker), "the worker ran");
}

/* The shim run of a spec whose worker writes ran.txt, ending in a spawn
 * error that names needle. */
static void expect_spawn_error(const tree *t, const launch_spec *spec, const char *needle) {
        _cleanup_free_ char *status = NULL;
        ck_assert_int_eq(shim_run_all(t, spec, NULL, &status), 0);
        assert_spawn_error(t, status, needle);
}

static launch_spec *ran_spec(const tree *t, bool sandbox) {
        return spec_new(t, "echo ran > \"$TASKFERRY_OUTPUT_DIR/ran.txt\"\n", sandbox, getuid(), getgid());
}

START_TEST(test_missing_bwrap) {
        tree t;
        tree_init(&t);
        _cleanup_(launch_spec_freep) launch_spec *spec = ran_spec(&t, true);
        /* A PATH without bwrap (the shim still finds sh on it, if it ever got that far). */
        ck_assert_int_eq(strv_env_set(&spec->env, "PATH", t.emptybin), 0);
        expect_spawn_error(&t, spec, "bwrap is required for sandboxing but was not found on PATH");
        /* Nothing reached the overlay either. */
        DIR *d = opendir(t.upper);
        ck_assert_ptr_nonnull(d);
        struct dirent *de;
        int n = 0;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..")) n++;
        closedir(d);
        ck_assert_int_eq(n, 0);
        tree_done(&t);
}
END_TEST

START_TEST(test_worker_not_found) {
        tree t;
        tree_init(&t);
        _cleanup_(launch_spec_freep) launch_spec *spec = ran_spec(&t, false);
        ck_assert_int_eq(strv_env_set(&spec->env, "PATH", t.emptybin), 0);
        expect_spawn_error(&t, spec, "spawn sh ENOENT");
        tree_done(&t);
}
END_TEST

START_TEST(test_overlay_mount_failure) {
        tree t;
        tree_init(&t);
        _cleanup_(launch_spec_freep) launch_spec *spec = ran_spec(&t, true);
        if (!streq(expected_method(), "userns")) {
                tree_done(&t);
                return; /* bwrap mounts the overlay itself; its errors land in the log */
        }
        ck_assert_int_eq(rm_rf(t.work), 0);
        expect_spawn_error(&t, spec, "overlay mount on");
        tree_done(&t);
}
END_TEST

START_TEST(test_bad_arguments) {
        tree t;
        tree_init(&t);
        const char *const cases[][4] = {
                {"--bogus", NULL},
                {"--spec-fd", "3", NULL},
                {"--spec-fd", "x", "--status-fd", "4"},
                {"--spec-fd", "3", "--status-fd", "3"},
                {"--spec-fd", "3", "--status-fd", "4"}, /* extra positional below */
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *argv[8] = {SHIM_PATH};
                size_t n = 1;
                for (size_t k = 0; k < 4 && cases[i][k]; k++) argv[n++] = (char *) cases[i][k];
                if (i == ELEMENTSOF(cases) - 1) argv[n++] = "extra";
                launch_spec *spec = spec_new(&t, "true", false, getuid(), getgid());
                shim_run run;
                shim_start_argv(&t, spec, argv, &run);
                free(read_status(&run));
                ck_assert_msg(shim_wait(&run) == 2, "case %zu not a usage error", i);
                launch_spec_free(spec);
        }
        _cleanup_free_ char *exit_path = path_join(t.task_dir, EXIT_JSON_NAME);
        ck_assert(!exists(exit_path));
        tree_done(&t);
}
END_TEST

/* ---- output handling ---- */

START_TEST(test_long_line_and_lingering_grandchild) {
        tree t;
        tree_init(&t);
        /* A 5 MB line, then a grandchild that keeps stdout open long after
         * the worker exits: the shim must still finish and record exit 0. */
        _cleanup_(launch_spec_freep) launch_spec *spec = spec_new(
                &t,
                "head -c 5000000 /dev/zero | tr '\\0' x; echo\n"
                "echo after\n"
                "sleep 600 &\n"
                "echo $! > \"$TASKFERRY_OUTPUT_DIR/sleeper.pid\"\n"
                "exit 0\n",
                false, getuid(), getgid());
        _cleanup_free_ char *status = NULL;
        ck_assert_int_eq(shim_run_all(&t, spec, NULL, &status), 0);
        /* The shim is done while the grandchild, still holding its stdout,
         * lives on in the worker's process group. */
        _cleanup_free_ char *pid_path = path_join(t.output, "sleeper.pid");
        _cleanup_free_ char *pid_text = read_text(pid_path);
        pid_t sleeper = (pid_t) strtol(pid_text, NULL, 10);
        ck_assert_int_gt(sleeper, 0);
        pid_t sleeper_pgid = getpgid(sleeper);
        ck_assert_int_eq(kill(sleeper, SIGKILL), 0);
        launch_info li;
        check_launch(&t, status, NULL, &li);
        ck_assert_int_eq(sleeper_pgid, li.worker_pid);
        launch_info_done(&li);
        exit_info ei;
        read_exit(&t, &ei);
        ck_assert(ei.has_exit_code);
        ck_assert_int_eq(ei.exit_code, 0);
        exit_info_done(&ei);

        _cleanup_free_ char *log = read_text(t.log_path);
        _cleanup_free_ char *big = malloc(1 + 5000000 + sizeof "\\n\"");
        ck_assert_ptr_nonnull(big);
        big[0] = '"';
        memset(big + 1, 'x', 5000000);
        strcpy(big + 5000001, "\\n\"");
        assert_log_has_event(log, big);
        assert_log_has_event(log, "\"after\\n\"");
        tree_done(&t);
}
END_TEST

/* ---- signals ---- */

typedef struct sh_search {
        pid_t pgrp;
        const char *want;
} sh_search;

/* Fails if pid's command line holds the prompt marker; whether it is
 * exactly `sh <script>` (search->want) in process group search->pgrp. */
static bool is_sh_of_script(pid_t pid, void *arg) {
        const sh_search *search = arg;
        _cleanup_free_ char *cmd = tf_proc_read(pid, "cmdline", ' ', NULL);
        if (!cmd) return false;
        ck_assert_msg(!strstr(cmd, PROMPT_MARKER), "pid %d has the prompt on its command line", (int) pid);
        pid_t pgrp;
        return streq(cmd, search->want) && tf_proc_stat(pid, NULL, &pgrp, NULL) && pgrp == search->pgrp;
}

/* Scan every host /proc/<pid>/cmdline: fails if any command line holds the
 * prompt marker; returns whether process group pgrp holds a process whose
 * command line is exactly `sh <script>`. */
static bool scan_host_procs(pid_t pgrp, const char *script) {
        _cleanup_free_ char *want = strdup_printf("sh %s ", script);
        ck_assert_ptr_nonnull(want);
        sh_search search = {pgrp, want};
        return tf_procs(is_sh_of_script, &search, NULL, 0) > 0;
}

static void wait_for_file(const char *path) {
        while (!exists(path)) usleep(20000);
}

static void run_sigterm(bool sandbox) {
        tree t;
        tree_init(&t);
        _cleanup_(launch_spec_freep) launch_spec *spec = spec_new(
                &t,
                "# " PROMPT_MARKER "\n"
                "O=\"$TASKFERRY_OUTPUT_DIR\"\n"
                "trap 'echo term > \"$O/term.txt\"; exit 7' TERM\n"
                "echo waiting\n"
                "echo ready > \"$O/ready.txt\"\n"
                "while :; do sleep 0.05; done\n",
                sandbox, getuid(), getgid());
        shim_run run;
        shim_start(&t, spec, NULL, &run);
        _cleanup_free_ char *status = read_status(&run);
        launch_info li;
        check_launch(&t, status, sandbox ? expected_method() : NULL, &li);
        ck_assert_int_eq(li.shim_pid, run.pid);
        _cleanup_free_ char *ready = path_join(t.output, "ready.txt");
        wait_for_file(ready);

        /* The shim leads its own group (the daemon setsid'd it); the worker
         * leads another, which holds the whole worker tree. */
        pid_t pgrp = -1;
        ck_assert(tf_proc_stat(run.pid, NULL, &pgrp, NULL));
        ck_assert_int_eq(pgrp, run.pid);
        ck_assert(tf_proc_stat(li.worker_pid, NULL, &pgrp, NULL));
        ck_assert_int_eq(pgrp, li.worker_pid);
        ck_assert_msg(scan_host_procs(li.worker_pid, sandbox ? SANDBOX_PROMPT_PATH : t.prompt_file),
                      "the worker's sh is not in process group %d", (int) li.worker_pid);

        ck_assert_int_eq(kill(run.pid, SIGTERM), 0);
        ck_assert_int_eq(shim_wait(&run), 0);

        exit_info ei;
        read_exit(&t, &ei);
        ck_assert_ptr_null(ei.spawn_error);
        if (sandbox) {
                /* bwrap itself takes the SIGTERM (default action) and dies by it. */
                ck_assert(!ei.has_exit_code);
                ck_assert_ptr_nonnull(ei.signal);
                ck_assert_str_eq(ei.signal, "SIGTERM");
        } else {
                /* sh got it, ran its trap and exited 7. */
                ck_assert(ei.has_exit_code);
                ck_assert_int_eq(ei.exit_code, 7);
                assert_out_file(&t, "term.txt", "term\n");
        }
        exit_info_done(&ei);
        _cleanup_free_ char *log = read_text(t.log_path);
        assert_log_has_event(log, "\"waiting\\n\"");
        launch_info_done(&li);
        assert_no_secrets_on_stderr(&t);
        tree_done(&t);
}

/* A sandbox whose setup outlives bwrap: bwrap's child (the sandbox's init
 * to be) sets its death signal only once its setup is done, and as the
 * init of a pid namespace it ignores a SIGTERM it has no handler for. A
 * stand-in bwrap leaves such a child in its group and dies of the stop's
 * SIGTERM; the shim must not exit and leave that child running. */
START_TEST(test_sigterm_during_sandbox_setup) {
        tree t;
        tree_init(&t);
        _cleanup_free_ char *fakebin = path_join(t.root, "fakebin"), *fake = path_join(fakebin, "bwrap"),
                            *inner_pid = path_join(t.root, "inner.pid");
        ck_assert_int_eq(mkdir_p(fakebin, 0755), 0);
        _cleanup_free_ char *script = strdup_printf("#!/bin/sh\n"
                                                    "[ \"$1\" = --help ] && exit 0\n"
                                                    "(trap '' TERM; exec /bin/sleep 3197) &\n"
                                                    "echo $! > '%s.tmp' && /bin/mv '%s.tmp' '%s'\n"
                                                    "wait\n",
                                                    inner_pid, inner_pid, inner_pid);
        write_text(fake, script);
        ck_assert_int_eq(chmod(fake, 0755), 0);
        ck_assert_int_eq(chmod(t.root, 0777), 0); /* the stand-in writes its child's pid there */
        _cleanup_(launch_spec_freep) launch_spec *spec = ran_spec(&t, true);
        _cleanup_free_ char *path = strdup_printf("%s:/usr/local/bin:/usr/bin:/bin", fakebin);
        ck_assert_int_eq(strv_env_set(&spec->env, "PATH", path), 0);
        shim_run run;
        shim_start(&t, spec, NULL, &run);
        _cleanup_free_ char *status = read_status(&run);
        wait_for_file(inner_pid);
        _cleanup_free_ char *pid_text = read_text(inner_pid);
        pid_t inner = (pid_t) atoi(pid_text);
        ck_assert_int_gt(inner, 1);
        ck_assert(tf_pid_running(inner));
        ck_assert_int_eq(kill(run.pid, SIGTERM), 0);
        ck_assert_int_eq(shim_wait(&run), 0);
        for (int i = 0; i < 500 && tf_pid_running(inner); i++) usleep(10000);
        bool left = tf_pid_running(inner);
        if (left) (void) kill(inner, SIGKILL);
        ck_assert_msg(!left, "the sandbox's setup child %d outlived the shim", (int) inner);
        tree_done(&t);
}
END_TEST

START_TEST(test_sigterm_sandboxed) { run_sigterm(true); }
END_TEST

START_TEST(test_sigterm_unsandboxed) { run_sigterm(false); }
END_TEST

int main(void) {
        Suite *s = suite_create("shim");
        tf_add_tests(s, "sandbox", 120,
                     TF_TESTS(test_sandbox_overlay_root, test_sandbox_overlay_unprivileged, test_unsandboxed_prompt_file));
        tf_add_tests(s, "failures", 120,
                     TF_TESTS(test_missing_bwrap, test_worker_not_found, test_overlay_mount_failure, test_bad_arguments));
        tf_add_tests(s, "io-and-signals", 120,
                     TF_TESTS(test_long_line_and_lingering_grandchild, test_sigterm_sandboxed, test_sigterm_unsandboxed,
                              test_sigterm_during_sandbox_setup));
        return tf_run_suite(s);
}
