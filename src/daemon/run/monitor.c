/* The monitor: a running task's shim, watched through its status pipe and a
 * pidfd; re-adoption of shims that outlived a daemon; signals to the worker
 * (monitor.h). */

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/pidfd.h>
#include <sys/wait.h>

#include "core/manager.h"
#include "core/store.h"
#include "core/task.h"
#include "disk-budget.h"
#include "json-util.h"
#include "launch-spec.h"
#include "run/monitor.h"
#include "run/scope.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

/* The status pipe holds a few short JSON lines (launch-spec.h launch_info) */
#define STATUS_PIPE_MAX_BYTES 65536

static void task_read_status_line(Task *t, const char *line, size_t len) {
        _cleanup_json_ json_object *o = NULL;
        launch_info li = {0};
        if (json_parse_strict(line, len, &o) < 0 || launch_info_from_json(o, &li) < 0) {
                log_warning("ignoring a malformed status line from the shim of %s", t->id);
                return;
        }
        if (li.worker_pid > 0) {
                task_set_int(t, TASK_KEY_pid, li.worker_pid);
                if (t->monitor) t->monitor->worker_started(t);
        }
        if (li.pre_dispatch_head) task_set_str(t, TASK_KEY_pre_dispatch_head, li.pre_dispatch_head);
        task_persist(t);
        launch_info_done(&li);
}

static void task_close_status(Task *t) {
        t->status_source = sd_event_source_disable_unref(t->status_source);
        t->status_fd = safe_close(t->status_fd);
        line_buffer_done(t->status_buf);
        free(t->status_buf);
        t->status_buf = NULL;
}

static int monitor_status_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Task *t = userdata;
        if (!t->status_buf) {
                if (!(t->status_buf = malloc(sizeof *t->status_buf))) goto close;
                line_buffer_init(t->status_buf, STATUS_PIPE_MAX_BYTES, LINE_BUFFER_LIMIT_BUFFERED);
        }
        for (;;) {
                char buf[4096];
                ssize_t n = read(fd, buf, sizeof buf);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0 && errno == EAGAIN) return 0;
                if (n <= 0) break;
                /* more than 64 KiB without a line end: the shim misbehaves, stop listening */
                if (line_buffer_append(t->status_buf, buf, (size_t) n) < 0) break;
                const char *line;
                size_t len;
                while (line_buffer_pop(t->status_buf, &line, &len) == LINE_BUFFER_LINE) task_read_status_line(t, line, len);
        }
close:
        task_close_status(t);
        return 0;
}

static void task_apply_exit_json(Task *t) {
        _cleanup_free_ char *task_dir = tf_path_task_dir(&t->m->paths, t->id);
        exit_info ei = {0};
        char iso[32];
        _cleanup_free_ char *reserve = task_dir ? strdup_printf("%s/%s", task_dir, DISK_RESERVE_NAME) : NULL;
        if (reserve) (void) unlink(reserve); /* left behind by a shim that was killed */
        if (!task_dir || exit_info_read(task_dir, &ei) < 0) {
                task_set_str(t, TASK_KEY_spawn_error, "taskferry-shim exited without reporting the worker's exit status");
                task_set_str(t, TASK_KEY_ended_at, format_iso(now_ms(), iso));
                return;
        }
        if (ei.has_exit_code) task_set_int(t, TASK_KEY_exit_code, ei.exit_code);
        task_set_str(t, TASK_KEY_signal, ei.signal);
        if (ei.spawn_error) task_set_str(t, TASK_KEY_spawn_error, ei.spawn_error);
        if (ei.stop_reason) {
                /* the shim stopped the worker itself: that is the reason, not
                 * whatever the killed worker logged */
                task_set_str(t, TASK_KEY_failure_reason, ei.stop_reason);
                task_set_str(t, TASK_KEY_failure_detail, ei.stop_detail);
        }
        task_set_str(t, TASK_KEY_ended_at, format_iso(ei.ended_at_ms ? ei.ended_at_ms : now_ms(), iso));
        exit_info_done(&ei);
}

static int monitor_shim_exit_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Task *t = userdata;
        siginfo_t si = {0};
        /* A re-adopted shim is not our child (ECHILD): the pidfd turning readable
         * is its exit. Our own child is reaped here. */
        if (waitid(P_PIDFD, (id_t) fd, &si, WEXITED | WNOHANG) < 0) {
                if (errno != ECHILD) return 0;
        } else if (si.si_pid == 0)
                return 0;
        t->shim_source = sd_event_source_disable_unref(t->shim_source);
        t->shim_pidfd = safe_close(t->shim_pidfd);
        t->shim_pid = 0; /* the pid may be reused: it no longer identifies this task's callers */
        t->kill_timer = sd_event_source_disable_unref(t->kill_timer);
        /* drain whatever the shim reported */
        if (t->status_fd >= 0) monitor_status_io(NULL, t->status_fd, EPOLLIN, t);
        task_close_status(t);
        task_apply_exit_json(t);
        const MonitorCallbacks *cb = TAKE_PTR(t->monitor);
        if (cb) cb->exited(t);
        return 0;
}

void monitor_watch_shim(Task *t, int status_fd, const MonitorCallbacks *cb) {
        Manager *m = t->m;
        t->monitor = cb;
        t->status_fd = status_fd;
        (void) fcntl(t->status_fd, F_SETFL, O_NONBLOCK);
        t->shim_pidfd = pidfd_open(t->shim_pid, 0);
        if (t->shim_pidfd < 0 ||
            sd_event_add_io(m->event, &t->shim_source, t->shim_pidfd, EPOLLIN, monitor_shim_exit_io, t) < 0) {
                log_error("cannot watch taskferry-shim of %s", t->id);
                kill(t->shim_pid, SIGKILL);
        }
        if (sd_event_add_io(m->event, &t->status_source, t->status_fd, EPOLLIN, monitor_status_io, t) < 0)
                task_close_status(t);
}

/* The base name of pid's executable into buf; false if pid is gone or not
 * ours to read. */
static bool pid_exe_base(pid_t pid, char *buf, size_t size, const char **ret) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/exe", (int) pid);
        ssize_t n = pid > 1 ? readlink(path, buf, size - 1) : -1;
        if (n <= 0) return false;
        buf[n] = 0;
        const char *base = strrchr(buf, '/');
        *ret = base ? base + 1 : buf;
        return true;
}

static bool pid_runs_shim(pid_t pid) {
        char exe[4096];
        const char *base;
        return pid_exe_base(pid, exe, sizeof exe, &base) && startswith(base, "taskferry-shim");
}

/* Does pid hold a launch spec (launch-spec.h: the memfd the daemon hands a
 * shim)? Another taskferryd (of another state dir, started by systemd or
 * setsid) runs the same binary and leads a session too; it holds none. */
static bool pid_holds_launch_spec(pid_t pid) {
        char dir[64];
        snprintf(dir, sizeof dir, "/proc/%d/fd", (int) pid);
        DIR *d = opendir(dir);
        if (!d) return false;
        bool found = false;
        for (struct dirent *de; !found && (de = readdir(d));) {
                if (de->d_name[0] == '.') continue;
                char link[PATH_MAX];
                ssize_t n = readlinkat(dirfd(d), de->d_name, link, sizeof link - 1);
                if (n <= 0) continue;
                link[n] = 0;
                found = startswith(link, "/memfd:" LAUNCH_SPEC_MEMFD_NAME " ");
        }
        closedir(d);
        return found;
}

/* Is pid a task's shim (pids are reused)? A taskferry-shim, or the child a
 * daemon forked for one and has not let go yet (launch.h launch_go): it
 * still runs the daemon's binary, leads a session of its own
 * (FORK_NEW_SESSION), is no child of this daemon and holds its launch spec.
 * Held by a daemon that died, it exits on its own (its hold pipe ends)
 * without running the shim. */
static bool pid_is_shim(pid_t pid) {
        char exe[4096];
        const char *base;
        if (!pid_exe_base(pid, exe, sizeof exe, &base)) return false;
        if (startswith(base, "taskferry-shim")) return true;
        if (!startswith(base, "taskferryd")) return false;
        pid_t ppid, session;
        if (proc_stat_ids(pid, &ppid, NULL, &session) < 0) return false;
        return session == pid && ppid != getpid() && pid_holds_launch_spec(pid);
}

bool monitor_pid_is_shim(pid_t pid) { return pid_is_shim(pid); }

int monitor_readopt(Task *t, const MonitorCallbacks *cb) {
        Manager *m = t->m;
        _cleanup_free_ char *task_dir = tf_path_task_dir(&m->paths, t->id);
        if (!task_dir) return MONITOR_READOPT_GONE;
        exit_info ei = {0};
        if (exit_info_read(task_dir, &ei) == 0) {
                exit_info_done(&ei);
                task_apply_exit_json(t);
                return MONITOR_READOPT_EXITED;
        }
        /* the shim's pid: from its launch.json, or, if the daemon died before the
         * shim wrote it, from the record (persisted right after the fork) */
        launch_info li = {0};
        pid_t shim = 0;
        int64_t recorded = 0;
        if (launch_info_read(task_dir, &li) == 0) {
                shim = li.shim_pid;
                launch_info_done(&li);
        } else if (task_record_get_int(&t->rec, TASK_KEY_shim_pid_recorded, &recorded))
                shim = (pid_t) recorded;
        if (!pid_is_shim(shim)) return MONITOR_READOPT_GONE;
        int pidfd = pidfd_open(shim, 0);
        if (pidfd < 0) return MONITOR_READOPT_GONE;
        t->shim_pid = shim;
        t->shim_pidfd = pidfd;
        if (sd_event_add_io(m->event, &t->shim_source, pidfd, EPOLLIN, monitor_shim_exit_io, t) < 0) {
                t->shim_pidfd = safe_close(t->shim_pidfd);
                t->shim_pid = 0;
                return MONITOR_READOPT_GONE;
        }
        t->monitor = cb;
        scope_readopt(t, shim); /* kill-by-unit keeps working after a restart */
        return MONITOR_READOPT_WATCHING;
}

int monitor_unlaunch(Task *t) {
        _cleanup_free_ char *task_dir = tf_path_task_dir(&t->m->paths, t->id);
        if (!task_dir) return -ENOMEM;
        /* the shim wrote these: it ran, whatever else says otherwise */
        _cleanup_free_ char *exit_path = strdup_printf("%s/%s", task_dir, EXIT_JSON_NAME);
        _cleanup_free_ char *launch_path = strdup_printf("%s/%s", task_dir, LAUNCH_JSON_NAME);
        if (!exit_path || !launch_path) return -ENOMEM;
        if (access(exit_path, F_OK) == 0 || access(launch_path, F_OK) == 0) return -EBUSY;
        int64_t recorded = 0;
        if (!task_record_get_int(&t->rec, TASK_KEY_shim_pid_recorded, &recorded) || recorded <= 1 ||
            recorded > INT32_MAX)
                return 0;
        pid_t pid = (pid_t) recorded;
        if (pid_runs_shim(pid)) return -EBUSY;
        if (!pid_is_shim(pid)) return 0;
        /* the held child of the daemon that died: it would exit at its pipe's
         * end anyway; it must not outlive this decision */
        int pidfd = pidfd_open(pid, 0);
        if (pidfd < 0) return 0;
        (void) pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
        safe_close(pidfd);
        return 0;
}

void monitor_stop_kill_timer(Task *t) { t->kill_timer = sd_event_source_disable_unref(t->kill_timer); }

int task_signal(Task *t, int sig) {
        int64_t pid = 0;
        if (task_record_get_int(&t->rec, TASK_KEY_pid, &pid) && pid > 0) {
                if (kill((pid_t) -pid, sig) == 0) return 0;
                if (errno == ESRCH) {
                        if (kill((pid_t) pid, sig) == 0 || errno == ESRCH) return 0;
                }
                return -errno;
        }
        if (t->shim_pid > 0) {
                /* the worker has not reported yet: the shim forwards to it */
                if (kill(t->shim_pid, sig) < 0 && errno != ESRCH) return -errno;
                return 0;
        }
        return -ESRCH;
}


static int kill_timer_cb(sd_event_source *s, uint64_t usec, void *userdata) {
        Task *t = userdata;
        t->kill_timer = sd_event_source_disable_unref(t->kill_timer);
        if (t->rec.status == TASK_RUNNING) (void) task_signal(t, SIGKILL);
        return 0;
}

int task_terminate(Task *t, uint64_t grace_ms) {
        t->kill_timer = sd_event_source_disable_unref(t->kill_timer);
        /* a task in its own scope: SIGTERM to every process of the cgroup
         * (KillUnit), setsid()ed ones too; the shim forwards it to the worker.
         * The SIGKILL after the grace goes to the worker's group, so that the
         * shim lives to write exit.json; what is left of the scope then is
         * killed when the shim exits (monitor_shim_exit_io). */
        int r = scope_kill(t, SIGTERM);
        if (r < 0) r = task_signal(t, SIGTERM);
        if (r < 0) return r;
        uint64_t now;
        sd_event_now(t->m->event, CLOCK_MONOTONIC, &now);
        (void) sd_event_add_time(t->m->event, &t->kill_timer, CLOCK_MONOTONIC, now + grace_ms * 1000ULL, 0,
                                 kill_timer_cb, t);
        return 0;
}
