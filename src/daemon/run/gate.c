/* The check gate: the project's check over a settled changeset (gate.h). */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/pidfd.h>
#include <sys/wait.h>

#include "core/manager.h"
#include "core/store.h"
#include "core/task.h"
#include "fileio.h"
#include "fs-util.h"
#include "json-util.h"
#include "launch-spec.h"
#include "log.h"
#include "macro.h"
#include "process-util.h"
#include "project-config.h"
#include "protocol-keys.h"
#include "run/gate.h"
#include "run/launch.h"
#include "run/monitor.h"
#include "run/scope.h"
#include "string-util.h"
#include "time-util.h"
#include "utf8.h"

static const char *const check_status_table[_CHECK_STATUS_MAX] = {
        [CHECK_NONE] = "none",       [CHECK_RUNNING] = "running", [CHECK_PASSED] = "passed",
        [CHECK_FAILED] = "failed",   [CHECK_TIMEOUT] = "timeout", [CHECK_INTERRUPTED] = "interrupted",
};

const char *check_status_to_string(CheckStatus s) {
        return s >= 0 && s < _CHECK_STATUS_MAX ? check_status_table[s] : NULL;
}

CheckStatus check_status_from_string(const char *s) {
        for (int i = 0; s && i < _CHECK_STATUS_MAX; i++)
                if (streq(s, check_status_table[i])) return (CheckStatus) i;
        return _CHECK_STATUS_INVALID;
}

CheckStatus task_check_status(const Task *t) {
        CheckStatus s = check_status_from_string(t->rec.check_status);
        return s < 0 ? CHECK_NONE : s;
}

bool check_status_blocks(CheckStatus s) {
        return s == CHECK_RUNNING || s == CHECK_FAILED || s == CHECK_TIMEOUT || s == CHECK_INTERRUPTED;
}

/* One caller of gate_stop waiting for the gate's exit. */
typedef struct GateWaiter {
        void (*done)(Task *t, void *userdata);
        void *userdata;
        struct GateWaiter *next;
} GateWaiter;

/* A running gate: its shim, watched through a pidfd. */
typedef struct Gate {
        pid_t pid;
        int pidfd;
        int status_fd;               /* the shim's status pipe, read end: held so its one line never blocks it */
        sd_event_source *exit_source;
        sd_event_source *timeout;    /* check_timeout_seconds */
        sd_event_source *kill_timer; /* SIGKILL after the grace, then giving up */
        bool timed_out, stopping, killed;
        GateWaiter *waiters;
} Gate;

bool gate_running(const Task *t) { return t->gate != NULL; }

/* ---- pure helpers ---- */

char *check_output_tail(const char *buf, size_t len, unsigned lines) {
        if (len > 0 && buf[len - 1] == '\n') len--;
        size_t start = 0;
        unsigned seen = 0;
        for (size_t i = len; i > 0; i--)
                if (buf[i - 1] == '\n' && ++seen == lines) {
                        start = i;
                        break;
                }
        /* a NUL would end the recorded string there: the bytes after it
         * (the failure a check prints last) would never be shown */
        size_t n = len - start, o = 0;
        _cleanup_free_ char *copy = malloc(n * 3 + 1);
        if (!copy) return NULL;
        for (size_t i = start; i < len; i++)
                if (buf[i]) copy[o++] = buf[i];
                else o = stpcpy(copy + o, UTF8_REPLACEMENT_CHARACTER_STR) - copy;
        return utf8_sanitize(copy, o);
}

/* s with every control character but \n (and \t) as \xNN, each line
 * indented by indent spaces. */
static char *indent_escaped(const char *s, unsigned indent) {
        size_t n = strlen(s);
        _cleanup_free_ char *out = malloc(n * 4 + (n + 1) * indent + 1);
        if (!out) return NULL;
        size_t o = 0;
        bool at_start = true;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) s[i];
                if (at_start) {
                        memset(out + o, ' ', indent);
                        o += indent;
                        at_start = false;
                }
                if (c == '\n') {
                        out[o++] = '\n';
                        at_start = true;
                } else if ((c < 0x20 && c != '\t') || c == 0x7f)
                        o += (size_t) sprintf(out + o, "\\x%02x", c);
                else if (c == 0xc2 && i + 1 < n && (unsigned char) s[i + 1] >= 0x80 && (unsigned char) s[i + 1] <= 0x9f)
                        o += (size_t) sprintf(out + o, "\\x%02x", (unsigned char) s[++i]); /* a C1 control */
                else
                        out[o++] = (char) c;
        }
        out[o] = 0;
        return TAKE_PTR(out);
}

/* A value for a suggested command line: as it is when it needs no quotes,
 * else POSIX single-quoted. */
static char *shell_word(const char *s) {
        bool plain = *s != 0;
        for (const char *p = s; *p && plain; p++)
                plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                        strchr("_-./:@%+=,", *p);
        if (plain) return strdup(s);
        size_t n = strlen(s);
        char *out = malloc(n * 4 + 3), *o = out;
        if (!out) return NULL;
        *o++ = '\'';
        for (const char *p = s; *p; p++)
                if (*p == '\'') o = stpcpy(o, "'\\''");
                else *o++ = *p;
        *o++ = '\'';
        *o = 0;
        return out;
}

char *check_refusal_text(const Task *t) {
        CheckStatus s = task_check_status(t);
        const char *status = check_status_to_string(s);
        _cleanup_free_ char *cmd = indent_escaped(strempty(t->rec.check_command), 0);
        if (!cmd) return NULL;
        if (s == CHECK_RUNNING)
                return strdup_printf("error: check gate still running for task %s (command: %s (from .taskferry.toml))\n"
                                     "help: wait for its verdict (taskferry status %s shows checkStatus), or run "
                                     "\"taskferry accept %s --force\" to stop it and land the changeset unverified",
                                     t->id, cmd, t->id, t->id);
        int64_t code = 0;
        _cleanup_free_ char *exit_line = NULL;
        if (s == CHECK_TIMEOUT) exit_line = strdup("exit: timed out (check_timeout_seconds in .taskferry.toml)");
        else if (s == CHECK_INTERRUPTED)
                exit_line = strdup("exit: interrupted: the daemon stopped while the check ran; it runs again when the "
                                   "daemon next starts and the task's overlay is still there");
        else if (task_record_get_int(&t->rec, TASK_KEY_check_exit_code, &code))
                exit_line = strdup_printf("exit: %" PRId64, code);
        else
                exit_line = strdup("exit: none (killed by a signal, or it could not start)");
        _cleanup_free_ char *tail = t->rec.check_output_tail && *t->rec.check_output_tail
                                            ? indent_escaped(t->rec.check_output_tail, 4)
                                            : strdup("    (no output)");
        const char *sid = t->rec.session_id;
        _cleanup_free_ char *w_sid = sid ? shell_word(sid) : NULL, *w_dir = shell_word(strempty(t->rec.directory)),
                            *w_model = shell_word(t->rec.model ? t->rec.model : "<model>");
        _cleanup_free_ char *resume =
                sid ? strdup_printf("taskferry dispatch --session-id %s --parent-task %s --prompt \"Fix: check gate %s. "
                                    "See taskferry result %s --fields checkOutputTail\"",
                                    strempty(w_sid), t->id, status, t->id)
                    : strdup_printf("taskferry dispatch --directory %s --model %s --parent-task %s --prompt \"Fix: check "
                                    "gate %s for task %s. See taskferry result %s --fields checkOutputTail\"",
                                    strempty(w_dir), strempty(w_model), t->id, status, t->id, t->id);
        if (!exit_line || !tail || !resume) return NULL;
        return strdup_printf("error: check gate %s for task %s; the changeset was not accepted\n"
                             "  command: %s (from .taskferry.toml)\n"
                             "  %s\n"
                             "  output (last %u lines at most):\n%s\n"
                             "  fix forward (resume the worker on top of this changeset):\n"
                             "    %s\n"
                             "help: the changeset is still pending: fix forward with the dispatch above, or, only after "
                             "verifying the change yourself, land it anyway with \"taskferry accept %s --force\" "
                             "(\"taskferry reject %s\" drops it)",
                             status, t->id, cmd, exit_line, CHECK_TAIL_LINES, tail, resume, t->id, t->id);
}

/* ---- the run ---- */

static void gate_set_now(Task *t, TaskKey k) {
        char iso[32];
        (void) task_set_str(t, k, format_iso(now_ms(), iso));
}

static void gate_release(Task *t, bool answer) {
        Gate *g = t->gate;
        if (!g) return;
        t->gate = NULL;
        g->exit_source = sd_event_source_disable_unref(g->exit_source);
        g->timeout = sd_event_source_disable_unref(g->timeout);
        g->kill_timer = sd_event_source_disable_unref(g->kill_timer);
        g->pidfd = safe_close(g->pidfd);
        g->status_fd = safe_close(g->status_fd);
        for (GateWaiter *w = g->waiters, *next; w; w = next) {
                next = w->next;
                if (answer) w->done(t, w->userdata);
                free(w);
        }
        free(g);
}

/* The verdict of an ended gate (the changeset still pending). */
static void gate_record(Task *t, CheckStatus s, const int64_t *exit_code, const char *tail) {
        (void) task_set_str(t, TASK_KEY_check_status, check_status_to_string(s));
        if (exit_code) (void) task_set_int(t, TASK_KEY_check_exit_code, *exit_code);
        else (void) task_set_null(t, TASK_KEY_check_exit_code);
        if (tail) (void) task_set_str(t, TASK_KEY_check_output_tail, tail);
        else (void) task_set_null(t, TASK_KEY_check_output_tail);
        gate_set_now(t, TASK_KEY_check_ended_at);
        (void) task_set_null(t, TASK_KEY_check_gate_pid);
        task_persist(t);
        task_announce_checked(t);
}

/* The check's scratch upper and work dirs (launch_prepare_check): what it
 * built is nobody's once its verdict is read. */
static void gate_scratch_remove(Task *t) {
        json_object *od = t->rec.overlay_dirs;
        const char *root = od ? json_get_string(od, PK_root) : NULL;
        if (!root) return;
        static const char *const parts[] = {"upper/check", "work/check"};
        for (size_t i = 0; i < ELEMENTSOF(parts); i++) {
                _cleanup_free_ char *p = strdup_printf("%s/%s", root, parts[i]);
                int r = p ? rm_rf(p) : -ENOMEM;
                if (r < 0 && r != -ENOENT) log_warning_errno(r, "task %s: cannot remove the check's %s", t->id, parts[i]);
        }
}

static void gate_ended(Task *t) {
        Manager *m = t->m;
        Gate *g = t->gate;
        _cleanup_free_ char *dir = tf_path_check_dir(&m->paths, t->id);
        _cleanup_free_ char *log = dir ? strdup_printf("%s/output.log", dir) : NULL;
        exit_info ei = {0};
        bool have_exit = dir && exit_info_read(dir, &ei) >= 0;
        /* the shim keeps the log to about twice CHECK_OUTPUT_MAX_BYTES; the
         * verdict reads its last CHECK_OUTPUT_MAX_BYTES */
        _cleanup_free_ char *out = NULL;
        size_t len = 0;
        if (log) {
                _cleanup_close_ int fd = open(log, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                off_t size = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
                if (size > (off_t) CHECK_OUTPUT_MAX_BYTES) (void) lseek(fd, size - CHECK_OUTPUT_MAX_BYTES, SEEK_SET);
                else if (fd >= 0) (void) lseek(fd, 0, SEEK_SET);
                if (fd >= 0) (void) read_fd(fd, CHECK_OUTPUT_MAX_BYTES, &out, &len);
        }
        _cleanup_free_ char *tail = NULL;
        CheckStatus s;
        int64_t code = 0;
        const int64_t *codep = NULL;
        if (have_exit && ei.spawn_error) {
                s = CHECK_FAILED;
                tail = strdup_printf("spawn error: %s", ei.spawn_error);
        } else {
                if (g->timed_out) s = CHECK_TIMEOUT;
                else if (have_exit && ei.has_exit_code && ei.exit_code == 0 && !ei.signal && !ei.stop_reason)
                        s = CHECK_PASSED;
                else s = CHECK_FAILED;
                if (have_exit && ei.has_exit_code && !ei.signal) {
                        code = ei.exit_code;
                        codep = &code;
                }
                tail = check_output_tail(out ? out : "", len, CHECK_TAIL_LINES);
                /* stopped by the shim (its disk budget): the last line says so */
                if (tail && have_exit && ei.stop_reason) {
                        char *n = strdup_printf("%s%staskferry: the check was stopped: %s", tail,
                                                *tail && tail[strlen(tail) - 1] != '\n' ? "\n" : "",
                                                ei.stop_detail ? ei.stop_detail : ei.stop_reason);
                        if (n) free(tail), tail = n;
                }
        }
        exit_info_done(&ei);
        gate_scratch_remove(t);
        /* a changeset decided meanwhile (a reject stopped the gate) keeps
         * the fields as they were */
        if (t->rec.changeset_status == CHANGESET_PENDING) {
                gate_record(t, s, codep, tail);
                log_info("task %s: check gate %s", t->id, check_status_to_string(s));
        }
        gate_release(t, true);
}

static int gate_exit_io(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        Task *t = userdata;
        siginfo_t si = {0};
        /* a shim of an earlier daemon is not our child (ECHILD); ours is reaped here */
        if (waitid(P_PIDFD, (id_t) fd, &si, WEXITED | WNOHANG) < 0) {
                if (errno != ECHILD) return 0;
        } else if (si.si_pid == 0)
                return 0;
        gate_ended(t);
        return 0;
}

/* SIGKILL to a gate's shim and, first, to the process groups its children
 * lead: bwrap's group holds the sandbox's init, which sets its own death
 * signal only once its setup is done, so a shim killed during that setup
 * would otherwise leave the check running. */
static void gate_kill_shim(pid_t pid) {
        (void) kill_children_and_groups(pid, SIGKILL);
        (void) kill(pid, SIGKILL);
}

/* SIGTERM or SIGKILL to everything of the gate: its scope (every process of
 * it), else the shim (it forwards SIGTERM to the check's process group). */
static void gate_signal(Task *t, int sig) {
        Gate *g = t->gate;
        int r = scope_kill(t, sig);
        if (sig == SIGKILL)
                gate_kill_shim(g->pid);
        else if (r < 0)
                (void) kill(g->pid, sig);
}

static int gate_kill_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        Task *t = userdata;
        Gate *g = t->gate;
        g->kill_timer = sd_event_source_disable_unref(g->kill_timer);
        if (!g->killed) {
                g->killed = true;
                log_warning("task %s: its check did not stop after SIGTERM; SIGKILL", t->id);
                gate_signal(t, SIGKILL);
                (void) sd_event_add_time_relative(t->m->event, &g->kill_timer, CLOCK_MONOTONIC,
                                                  (uint64_t) CHECK_KILL_GRACE_MS * 1000, 0, gate_kill_timer, t);
                return 0;
        }
        /* it outlived SIGKILL (a process stuck in the kernel): stop waiting */
        log_warning("task %s: its check has not exited 5 s after SIGKILL; no longer waiting for it", t->id);
        gate_ended(t);
        return 0;
}

static void gate_terminate(Task *t) {
        Gate *g = t->gate;
        if (g->kill_timer) return;
        gate_signal(t, SIGTERM);
        (void) sd_event_add_time_relative(t->m->event, &g->kill_timer, CLOCK_MONOTONIC,
                                          (uint64_t) CHECK_KILL_GRACE_MS * 1000, 0, gate_kill_timer, t);
}

static int gate_timeout(sd_event_source *es, uint64_t usec, void *userdata) {
        Task *t = userdata;
        Gate *g = t->gate;
        g->timeout = sd_event_source_disable_unref(g->timeout);
        g->timed_out = true;
        log_info("task %s: its check ran out of time; SIGTERM", t->id);
        gate_terminate(t);
        return 0;
}

int gate_stop(Task *t, void (*done)(Task *t, void *userdata), void *userdata) {
        Gate *g = t->gate;
        if (!g) return 0;
        GateWaiter *w = calloc(1, sizeof *w);
        if (!w) return -ENOMEM;
        *w = (GateWaiter) {.done = done, .userdata = userdata, .next = g->waiters};
        g->waiters = w;
        g->stopping = true;
        gate_terminate(t);
        return 1;
}

/* A gate that could not start: failed at once, its reason as the tail. */
static void gate_fail_start(Task *t, const char *why) {
        _cleanup_free_ char *tail = strdup_printf("spawn error: %s", why);
        gate_record(t, CHECK_FAILED, NULL, tail ? tail : "spawn error");
        log_warning("task %s: its check gate could not start: %s", t->id, why);
}

int gate_start(Task *t) {
        Manager *m = t->m;
        if (t->gate || task_kind_info(t->kind)->never_lands || !t->rec.pre_dispatch_head ||
            t->rec.changeset_status != CHANGESET_PENDING || !t->rec.overlay_dirs || !t->rec.diff_path)
                return 0;
        ProjectConfig cfg = {0};
        if (project_config_load(t->rec.directory, &cfg) < 0) return 0;
        if (cfg.warning) {
                (void) task_set_str(t, TASK_KEY_project_config_warning, cfg.warning);
                task_persist(t);
        }
        if (!cfg.check || cfg.warning) {
                project_config_done(&cfg);
                return 0;
        }
        (void) task_set_str(t, TASK_KEY_check_command, cfg.check);
        (void) task_set_null(t, TASK_KEY_check_exit_code);
        (void) task_set_null(t, TASK_KEY_check_output_tail);
        gate_set_now(t, TASK_KEY_check_started_at);
        (void) task_set_null(t, TASK_KEY_check_ended_at);
        (void) task_set_null(t, TASK_KEY_check_gate_pid);
        (void) task_set_str(t, TASK_KEY_check_status, check_status_to_string(CHECK_RUNNING));
        uint64_t timeout_s = cfg.check_timeout_s ? cfg.check_timeout_s : 900;
        _cleanup_(launch_plan_done) LaunchPlan plan = LAUNCH_PLAN_INIT;
        _cleanup_free_ char *why = NULL;
        int r = launch_prepare_check(t, cfg.check, &plan, &why);
        project_config_done(&cfg);
        LaunchedShim shim = {.pid = 0, .status_fd = -1, .hold_fd = -1};
        if (r >= 0) r = launch_spawn(t, &plan, &shim, &why);
        if (r < 0) {
                gate_fail_start(t, why ? why : strerror(-r));
                return 1;
        }
        Gate *g = calloc(1, sizeof *g);
        int pidfd = pidfd_open(shim.pid, 0);
        if (!g || pidfd < 0 ||
            sd_event_add_io(m->event, &g->exit_source, pidfd, EPOLLIN, gate_exit_io, t) < 0) {
                /* never let a gate run that nothing watches */
                safe_close(shim.hold_fd); /* the held child exits on EOF, running nothing */
                sigkill_wait(shim.pid);
                safe_close(shim.status_fd);
                safe_close(pidfd);
                free(g);
                gate_fail_start(t, "cannot watch taskferry-shim");
                return 1;
        }
        g->pid = shim.pid;
        g->pidfd = pidfd;
        g->status_fd = shim.status_fd;
        t->gate = g;
        (void) sd_event_add_time_relative(m->event, &g->timeout, CLOCK_MONOTONIC, timeout_s * 1000 * 1000, 0,
                                          gate_timeout, t);
        /* durable before the check may run: a daemon killed from here on
         * leaves a record whose coldplug finds and ends this gate */
        (void) task_set_int(t, TASK_KEY_check_gate_pid, shim.pid);
        int k = manager_flush_now(m);
        if (k < 0) log_warning_errno(k, "cannot flush tasks.json after starting the check of %s", t->id);
        task_announce_checked(t);
        ScopeLimits limits;
        scope_limits_for(t, &limits);
        scope_start(t, shim.pid, shim.hold_fd, &limits);
        log_info("task %s: check gate started (shim pid %d)", t->id, (int) shim.pid);
        return 1;
}

void gate_coldplug(Task *t) {
        if (task_check_status(t) != CHECK_RUNNING) return;
        /* what still runs of the earlier daemon's gate goes: its verdict
         * would be read by nobody, and the gate starts over */
        int64_t pid = 0;
        if (task_record_get_int(&t->rec, TASK_KEY_check_gate_pid, &pid) && pid > 1 && monitor_pid_is_shim((pid_t) pid)) {
                (void) scope_kill(t, SIGKILL);
                gate_kill_shim((pid_t) pid);
        }
        (void) task_set_str(t, TASK_KEY_check_status, check_status_to_string(CHECK_INTERRUPTED));
        (void) task_set_null(t, TASK_KEY_check_gate_pid);
        gate_set_now(t, TASK_KEY_check_ended_at);
        task_persist(t);
        task_announce_checked(t);
        log_info("task %s: its check gate was interrupted by a daemon restart", t->id);
        json_object *od = t->rec.overlay_dirs;
        const char *upper = od ? json_get_string(od, PK_upperDir) : NULL;
        if (t->rec.changeset_status == CHANGESET_PENDING && upper && is_dir(upper)) (void) gate_start(t);
}

void gate_free(Task *t) { gate_release(t, false); }
