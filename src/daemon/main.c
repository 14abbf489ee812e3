/* taskferryd: the per-user daemon (taskferryd(8)). Its start: the settings,
 * the state dirs, the env file, every module (daemon.c), tasks.json, the
 * socket, then what the loaded tasks still need (coldplug), the bus name,
 * the boot sweeps and READY=1; then the loop until SIGTERM, SIGINT or idle
 * exit, and tasks.json flushed on the way out. */

#include <getopt.h>
#include <signal.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>

#include "core/env-file.h"
#include "core/manager.h"
#include "core/scheduler.h"
#include "core/settings.h"
#include "core/store.h"
#include "daemon.h"
#include "process-util.h"
#include "run/lifecycle.h"
#include "run/sweep.h"
#include "api/server.h"
#include "systemd/bus.h"
#include "systemd/notify.h"
#include "taskferry-config.h"
#include "fileio.h"
#include "fs-util.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"

/* Leave the reason of a failed start in <runtime>/daemon-boot.err, where the
 * CLI's auto-start looks for why no daemon came up. */
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
        const char *subs[] = {"", "/logs", "/prompts", "/outputs", "/tasks", "/diffs", "/summaries"};
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


/* Log the reason of a failed start to stderr and daemon-boot.err; returns the exit code. */
static int fail_start(Manager *m, const char *msg) {
        write_boot_error(m, msg);
        daemon_free(m);
        return 1;
}

/* A configuration the user must fix (config.json, the env file): the reason
 * on stderr (the journal under systemd) and in daemon-boot.err, and exit
 * EXIT_CONFIG, which taskferry.service's RestartPreventExitStatus= keeps
 * systemd from retrying: a broken file does not heal by itself. */
#define EXIT_CONFIG 78 /* sysexits.h EX_CONFIG; systemd.exec(5) "Process exit codes" */
static int fail_config(Manager *m, int r, const char *err) {
        const char *msg = err ? err : strerror(-r);
        log_text("error", "%s%s", startswith(msg, "error: ") ? "" : "error: ", msg);
        fail_start(m, msg);
        return EXIT_CONFIG;
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

        Manager mgr = {};
        Manager *m = &mgr;
        int r = tf_paths_resolve(&m->paths);
        if (r < 0) {
                log_error_errno(r, "cannot resolve taskferry paths");
                return 1;
        }
        _cleanup_free_ char *err = NULL;
        /* config.json once per start (no reload while running): a malformed
         * file fails the start loudly, on stderr and in daemon-boot.err */
        r = settings_load(&m->settings, m->paths.config_file, &err);
        if (r < 0) return fail_config(m, r, err);
        r = create_state_dirs(m);
        if (r < 0) return fail_start(m, "cannot create the state or runtime directory");
        r = sd_event_default(&m->event);
        if (r < 0) {
                log_error_errno(r, "cannot create the event loop");
                return fail_start(m, "cannot create the event loop");
        }
        /* the env file: loaded once here, any failure fails the start as
         * loudly as a malformed config.json; then watched */
        r = env_file_init(m, &err);
        if (r < 0) return fail_config(m, r, err);
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        sd_event_add_signal(m->event, NULL, SIGTERM, on_signal, m);
        sd_event_add_signal(m->event, NULL, SIGINT, on_signal, m);

        r = daemon_setup(m);
        if (r < 0) return fail_start(m, "out of memory");
        r = manager_load_tasks(m);
        if (r < 0) return fail_start(m, "cannot load tasks.json");
        /* nothing is written, and no loaded task is touched, before we own
         * the socket: a daemon that loses the race to a running one must not
         * put its older view of tasks.json over that one's */
        r = server_listen(m);
        if (r < 0)
                return fail_start(m, r == -EADDRINUSE ? "taskferry daemon is already listening" : "cannot listen on the socket");
        /* what each loaded task still needs: its shim watched again, queued
         * again, or unknown (lifecycle.h) */
        task_coldplug(m);
        /* the bus name only once we are the one daemon (bus.h; no bus: one warning) */
        (void) bus_start(m);
        /* boot sweeps (sweep.h): after the load, and only once we are the one
         * daemon on this socket (a second daemon's stale view of tasks.json
         * must not sweep what the first one just created) */
        r = manager_sweep(m);
        if (r < 0) log_warning_errno(r, "boot sweep failed");
        (void) manager_flush(m);
        /* tasks queued again at coldplug start only once this daemon owns the socket */
        scheduler_kick(m);
        /* READY=1, STATUS=, the watchdog, idle exit (notify.h) */
        (void) notify_ready(m);

        r = sd_event_loop(m->event);
        notify_stopping(m);
        m->shutting_down = true;
        /* every change durable, then tasks.json whole again (store.h) */
        int k = manager_flush_final(m);
        if (k < 0) log_error_errno(k, "daemon shutdown failed: cannot flush tasks.json");
        daemon_free(m);
        return r < 0 || k < 0 ? 1 : 0;
}
