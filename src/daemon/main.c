/* taskferryd: the per-user daemon (DESIGN.md "Processes"; spec
 * protocol-cli.md §4.2–§4.3). */

#include <getopt.h>
#include <signal.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>

#include "change.h"
#include "jobs.h"
#include "manager.h"
#include "methods.h"
#include "scheduler.h"
#include "server.h"
#include "settings.h"
#include "store.h"
#include "task.h"
#include "tasks.h"
#include "wait.h"
#include "watchdog.h"
#include "disk-budget.h"
#include "executor.h"
#include "process-util.h"
#include "sweep.h"
#include "taskferry-config.h"
#include "util.h"

static char **split_comma_list(const char *s) {
        char **l = NULL;
        if (!s) return NULL;
        _cleanup_free_ char *copy = strdup(s);
        if (!copy) return NULL;
        char *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                while (*tok == ' ' || *tok == '\t') tok++;
                size_t n = strlen(tok);
                while (n && (tok[n - 1] == ' ' || tok[n - 1] == '\t')) tok[--n] = 0;
                if (n && !strv_contains(l, tok)) strv_push(&l, tok);
        }
        return l;
}

/* Number(env) as a positive safe integer, else def (spec §3.3: invalid falls back). */
static uint64_t env_positive(const char *name, uint64_t def) {
        const char *v = getenv(name);
        if (!v || !*v) return def;
        char *end = NULL;
        double d = strtod(v, &end);
        while (end && (*end == ' ' || *end == '\t' || *end == '\n')) end++;
        if (!end || *end || d <= 0 || d != (double) (uint64_t) d || d > 9007199254740991.0) return def;
        return (uint64_t) d;
}

/* TASKFERRY_DISABLE_*: "1"/"true" disables; any other set value enables. */
static bool env_enabled_unless_disabled(const char *name) {
        const char *v = getenv(name);
        return !(v && (streq(v, "1") || streq(v, "true")));
}

static int resolve_shim(char **ret) {
        const char *env = getenv("TASKFERRY_SHIM");
        if (env && *env) {
                *ret = strdup(env);
                return *ret ? 0 : -ENOMEM;
        }
        _cleanup_free_ char *dir = NULL;
        if (self_exe_dir(&dir) >= 0) {
                _cleanup_free_ char *p = strdup_printf("%s/taskferry-shim", dir);
                if (p && access(p, X_OK) == 0) {
                        *ret = TAKE_PTR(p);
                        return 0;
                }
        }
        _cleanup_free_ char *p = strdup(TASKFERRY_INSTALL_LIBEXECDIR "/taskferry-shim");
        if (p && access(p, X_OK) == 0) {
                *ret = TAKE_PTR(p);
                return 0;
        }
        return -ENOENT;
}

static int settings_load(Settings *s, char **ret_error) {
        s->max_concurrent = (unsigned) env_positive("TASKFERRY_MAX_CONCURRENT_TASKS", 4);
        s->cancel_grace_ms = env_positive("TASKFERRY_CANCEL_GRACE_MS", 5000);
        s->no_output_timeout_ms = env_positive("TASKFERRY_NO_OUTPUT_TIMEOUT_MS", 256000);
        s->post_output_no_output_timeout_ms = env_positive("TASKFERRY_POST_OUTPUT_NO_OUTPUT_TIMEOUT_MS", 400000);
        s->pre_output_max_ms = env_positive("TASKFERRY_PRE_OUTPUT_MAX_MS", 1024000);
        s->watchdog_poll_ms = env_positive("TASKFERRY_WATCHDOG_POLL_MS", 2000);
        s->watchdog_grace_ms = env_positive("TASKFERRY_WATCHDOG_GRACE_MS", 5000);
        s->sandbox_enabled = env_enabled_unless_disabled("TASKFERRY_DISABLE_SANDBOX");
        s->overlay_enabled = env_enabled_unless_disabled("TASKFERRY_DISABLE_OVERLAY");
        const char *ex = getenv("TASKFERRY_DEFAULT_EXECUTOR");
        s->default_executor = strdup(ex && *ex ? ex : "pi");
        if (!executor_find(s->default_executor)) {
                *ret_error = strdup_printf("unknown executor: %s", s->default_executor);
                return -EINVAL;
        }
        const char *var = getenv("TASKFERRY_DEFAULT_VARIANT");
        _cleanup_free_ char *v = strdup(var ? var : "highest");
        if (!v) return -ENOMEM;
        char *a = v;
        while (*a == ' ') a++;
        size_t n = strlen(a);
        while (n && a[n - 1] == ' ') a[--n] = 0;
        static const char *const variants[] = {"highest", "off", "minimal", "low", "medium", "high", "xhigh", "max"};
        bool ok = false;
        for (size_t i = 0; i < ELEMENTSOF(variants); i++) ok = ok || streq(a, variants[i]);
        if (!ok) {
                *ret_error = strdup_printf(
                        "defaultVariant must be one of highest, off, minimal, low, medium, high, xhigh, max (got \"%s\")", a);
                return -EINVAL;
        }
        s->default_variant = strdup(a);
        s->env_denylist = split_comma_list(getenv("TASKFERRY_ENV_DENYLIST"));
        s->sandbox_denylist = split_comma_list(getenv("TASKFERRY_SANDBOX_DENYLIST"));
        s->rw_bind = split_comma_list(getenv("TASKFERRY_RW_BIND"));
        s->ro_bind = split_comma_list(getenv("TASKFERRY_RO_BIND"));
        s->home_allow = split_comma_list(getenv("TASKFERRY_SANDBOX_HOME_ALLOW"));
        const char *dm = getenv("TASKFERRY_TASK_DISK_MAX");
        if (dm && *dm && disk_size_parse(dm, &s->task_disk_max) < 0) {
                *ret_error = strdup_printf("TASKFERRY_TASK_DISK_MAX must be a positive size in bytes, optionally "
                                           "with a K, M, G or T suffix (got \"%s\")", dm);
                return -EINVAL;
        }
        int r = resolve_shim(&s->shim_path);
        if (r < 0) {
                *ret_error = strdup("cannot find taskferry-shim next to taskferryd or in " TASKFERRY_INSTALL_LIBEXECDIR);
                return r;
        }
        return 0;
}

static void settings_done(Settings *s) {
        free(s->default_executor);
        free(s->default_variant);
        strv_free(s->env_denylist);
        strv_free(s->sandbox_denylist);
        strv_free(s->rw_bind);
        strv_free(s->ro_bind);
        strv_free(s->home_allow);
        free(s->shim_path);
}

/* Leave the reason of a failed start where the CLI's auto-start looks (§4.1). */
static void write_boot_error(Manager *m, const char *msg) {
        if (!m->paths.runtime_dir) return;
        if (mkdir_p_chmod(m->paths.runtime_dir, 0700) < 0) return;
        _cleanup_free_ char *p = strdup_printf("%s/daemon-boot.err", m->paths.runtime_dir);
        if (p) (void) write_file_atomic(p, msg, strlen(msg), 0600);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;
        m->shutting_down = true;
        sd_event_exit(m->event, 0);
        return 0;
}

static int create_state_dirs(Manager *m) {
        const char *subs[] = {"", "/logs", "/prompts", "/outputs", "/tasks", "/diffs"};
        for (size_t i = 0; i < ELEMENTSOF(subs); i++) {
                _cleanup_free_ char *p = strdup_printf("%s%s", m->paths.state_dir, subs[i]);
                if (!p) return -ENOMEM;
                int r = mkdir_p_chmod(p, 0700);
                if (r < 0) return log_error_errno(r, "cannot create %s", p);
        }
        int r = mkdir_p_chmod(m->paths.runtime_dir, 0700);
        if (r < 0) return log_error_errno(r, "cannot create %s", m->paths.runtime_dir);
        return 0;
}

static void help(void) {
        printf("Usage: taskferryd [--help] [--version]\n\n"
               "The taskferry daemon. It serves the CLI's protocol on its socket\n"
               "(passed by systemd through socket activation, or bound at\n"
               "$TASKFERRY_RUNTIME_DIR/daemon.sock), runs each worker through\n"
               "taskferry-shim in a bubblewrap sandbox on a copy-on-write overlay, and\n"
               "keeps task state under $TASKFERRY_STATE_DIR. The CLI starts it on demand.\n");
}

static void manager_free(Manager *m) {
        server_close(m, "shutdown");
        change_jobs_free(m);
        jobs_free(m);
        for (size_t i = 0; i < m->n_tasks; i++) {
                Task *t = m->tasks[i];
                wait_drop_task(t);
                sd_event_source_disable_unref(t->shim_source);
                sd_event_source_disable_unref(t->status_source);
                sd_event_source_disable_unref(t->kill_timer);
                watchdog_stop(t);
                task_socket_close(t);
                safe_close(t->shim_pidfd);
                safe_close(t->status_fd);
                task_free(t);
        }
        free(m->tasks);
        m->tasks = NULL;
        manager_free_task_observers(m);
        manager_free_root_cache(m);
        m->n_tasks = 0;
        m->persist_timer = sd_event_source_disable_unref(m->persist_timer);
        m->event = sd_event_unref(m->event);
        free(m->state_load_error);
        settings_done(&m->settings);
        tf_paths_done(&m->paths);
}

/* Log the reason of a failed start to stderr and daemon-boot.err; returns the exit code. */
static int fail_start(Manager *m, const char *msg) {
        write_boot_error(m, msg);
        manager_free(m);
        return 1;
}

int main(int argc, char *argv[]) {
        log_set_program("taskferryd");
        static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'}, {}};
        int c;
        while ((c = getopt_long(argc, argv, "hV", opts, NULL)) >= 0) {
                if (c == 'h') {
                        help();
                        return 0;
                }
                if (c == 'V') {
                        printf("taskferryd %s\n", TASKFERRY_VERSION);
                        return 0;
                }
                return 2;
        }
        if (optind < argc) {
                fprintf(stderr, "taskferryd: unexpected argument: %s\n", argv[optind]);
                return 2;
        }
        /* No umask(0077) here: taskferry's own files get explicit modes (0600/0700),
         * while workers and `accept` must create files with the user's umask. */
        signal(SIGPIPE, SIG_IGN);
        /* every client connection and task socket is an fd: take the hard limit
         * (children get the original back, process-util.c) */
        int fl = fd_limit_raise();
        if (fl < 0) log_warning_errno(fl, "cannot raise the file descriptor limit");

        Manager mgr = {.listener.fd = -1};
        Manager *m = &mgr;
        int r = tf_paths_resolve(&m->paths);
        if (r < 0) {
                log_error_errno(r, "cannot resolve taskferry paths");
                return 1;
        }
        _cleanup_free_ char *err = NULL;
        r = settings_load(&m->settings, &err);
        if (r < 0) {
                fprintf(stderr, "error: %s\n", err ? err : strerror(-r));
                return fail_start(m, err ? err : strerror(-r));
        }
        r = create_state_dirs(m);
        if (r < 0) return fail_start(m, "cannot create the state or runtime directory");
        r = sd_event_default(&m->event);
        if (r < 0) {
                log_error_errno(r, "cannot create the event loop");
                return fail_start(m, "cannot create the event loop");
        }
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        sd_event_add_signal(m->event, NULL, SIGTERM, on_signal, m);
        sd_event_add_signal(m->event, NULL, SIGINT, on_signal, m);

        r = wait_init(m);
        if (r < 0) return fail_start(m, "out of memory");
        r = manager_load_tasks(m);
        if (r < 0) return fail_start(m, "cannot load tasks.json");
        /* nothing is written before we own the socket: a daemon that loses
         * the race to a running one must not put its older view of
         * tasks.json over that one's (the first flush follows the sweep) */
        r = server_listen(m);
        if (r < 0)
                return fail_start(m, r == -EADDRINUSE ? "taskferry daemon is already listening" : "cannot listen on the socket");
        /* boot sweeps (sweep.h): after the load, and only once we are the one
         * daemon on this socket (a second daemon's stale view of tasks.json
         * must not sweep what the first one just created) */
        r = manager_sweep(m);
        if (r < 0) log_warning_errno(r, "boot sweep failed");
        (void) manager_flush(m);
        /* tasks queued again at load start only once this daemon owns the socket */
        scheduler_kick(m);
        (void) sd_event_set_watchdog(m->event, true);
        sd_notifyf(false, "READY=1\nSTATUS=%zu tasks loaded\nMAINPID=%d", m->n_tasks, (int) getpid());

        r = sd_event_loop(m->event);
        sd_notify(false, "STOPPING=1");
        m->shutting_down = true;
        int k = manager_flush(m);
        if (k < 0) log_error_errno(k, "daemon shutdown failed: cannot flush tasks.json");
        manager_free(m);
        return r < 0 || k < 0 ? 1 : 0;
}
