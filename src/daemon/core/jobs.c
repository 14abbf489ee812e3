/* Forked jobs: blocking work (reading logs, git, overlay mounts, removing
 * trees) runs in a child process forked from the daemon; the child writes one
 * JSON document to a pipe and exits. The loop watches the pipe and the child's
 * pidfd and calls back once both are done. The daemon is single-threaded, so
 * fork() is safe; the child closes every inherited fd but the pipe so that
 * client connections and the listening socket are not held open by it. */

#include <fcntl.h>
#include <signal.h>
#include <sys/pidfd.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "core/jobs.h"
#include "core/manager.h"
#include "json-util.h"
#include "process-util.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"

#ifndef CLOSE_RANGE_UNSHARE
#include <linux/close_range.h>
#endif

#define JOB_RETRY_USEC (1000 * 1000ULL)

static void job_unlink(Job *j) {
        Manager *m = j->m;
        if (j->prev) j->prev->next = j->next;
        else if (m->jobs == j) m->jobs = j->next;
        if (j->next) j->next->prev = j->prev;
}

static void job_free(Job *j) {
        j->retry_source = sd_event_source_disable_unref(j->retry_source);
        j->pid_source = sd_event_source_disable_unref(j->pid_source);
        j->pipe_source = sd_event_source_disable_unref(j->pipe_source);
        j->pidfd = safe_close(j->pidfd);
        j->pipe_fd = safe_close(j->pipe_fd);
        free(j->buf);
        free(j);
}

static int job_spawn(Manager *m, job_run_fn run, job_done_fn done, void *userdata, bool query);

/* Start the waiting queries while there is room; one that cannot start
 * hears its error. */
static void jobs_start_waiting(Manager *m) {
        while (m->jobs_waiting && m->n_query_jobs < JOB_QUERIES_MAX) {
                Job *w = m->jobs_waiting;
                m->jobs_waiting = w->next;
                if (!m->jobs_waiting) m->jobs_waiting_tail = NULL;
                job_done_fn done = w->done;
                void *ud = w->userdata;
                int r = job_spawn(m, w->run, done, ud, true);
                free(w);
                if (r < 0) done(m, ud, NULL, r);
        }
}

static void job_maybe_finish(Job *j) {
        if (!j->exited || !j->eof) return;
        job_unlink(j);
        if (j->query) j->m->n_query_jobs--;
        json_object *result = NULL;
        int error = 0;
        if (!WIFEXITED(j->status) || WEXITSTATUS(j->status) != 0) error = -ECHILD;
        else if (j->len > 0) {
                if (json_parse_strict(j->buf, j->len, &result) < 0) error = -EBADMSG;
        }
        job_done_fn done = j->done;
        void *ud = j->userdata;
        Manager *m = j->m;
        job_free(j);
        done(m, ud, result, error);
        json_object_put(result);
        jobs_start_waiting(m);
}

static int job_pipe_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Job *j = userdata;
        for (;;) {
                if (j->len + 65536 > j->cap) {
                        size_t ncap = j->cap ? j->cap * 2 : 65536;
                        while (ncap < j->len + 65536) ncap *= 2;
                        char *nb = realloc(j->buf, ncap);
                        if (!nb) break;
                        j->buf = nb;
                        j->cap = ncap;
                }
                ssize_t n = read(fd, j->buf + j->len, j->cap - j->len - 1);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0 && errno == EAGAIN) return 0;
                if (n <= 0) {
                        j->eof = true;
                        j->pipe_source = sd_event_source_disable_unref(j->pipe_source);
                        job_maybe_finish(j);
                        return 0;
                }
                j->len += (size_t) n;
                j->buf[j->len] = 0;
        }
        return 0;
}

static int job_pid_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Job *j = userdata;
        siginfo_t si = {0};
        if (waitid(P_PIDFD, (id_t) fd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0) return 0;
        j->exited = true;
        j->status = si.si_code == CLD_EXITED ? W_EXITCODE(si.si_status, 0) : si.si_status;
        j->pid_source = sd_event_source_disable_unref(j->pid_source);
        job_maybe_finish(j);
        return 0;
}

static int job_spawn(Manager *m, job_run_fn run, job_done_fn done, void *userdata, bool query) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) return -errno;
        fflush(stdout);
        fflush(stderr);
        /* a job never outlives its daemon (the next one redoes the work:
         * settlement from exit.json, an interrupted accept is checked before
         * it is applied again); it keeps stdin/out/err and the result pipe only */
        pid_t pid;
        int r = safe_fork_full("taskferryd-job", NULL, &p[1], 1,
                               FORK_DEATHSIG_SIGKILL | FORK_RESET_SIGNALS | FORK_CLOSE_ALL_FDS | FORK_RLIMIT_NOFILE_SAFE,
                               &pid);
        if (r < 0) {
                close(p[0]);
                close(p[1]);
                return r;
        }
        if (r == 0) {
                if (p[1] != 3) {
                        if (dup2(p[1], 3) < 0) _exit(3);
                        close(p[1]);
                }
                int error = 0;
                json_object *res = run(userdata, &error);
                if (error < 0 && !res) _exit(1);
                if (res) {
                        size_t len;
                        const char *s = json_to_line(res, &len);
                        if (loop_write(3, s, len) < 0) _exit(4);
                }
                _exit(0);
        }
        close(p[1]);
        Job *j = calloc(1, sizeof *j);
        if (!j) {
                close(p[0]);
                sigkill_wait(pid);
                return -ENOMEM;
        }
        j->m = m;
        j->pid = pid;
        j->pipe_fd = p[0];
        j->done = done;
        j->userdata = userdata;
        j->pidfd = pidfd_open(pid, 0);
        r = j->pidfd < 0 ? -errno : 0;
        if (r == 0) r = fcntl(j->pipe_fd, F_SETFL, O_NONBLOCK) < 0 ? -errno : 0;
        if (r == 0) r = sd_event_add_io(m->event, &j->pipe_source, j->pipe_fd, EPOLLIN, job_pipe_io, j);
        if (r == 0) r = sd_event_add_io(m->event, &j->pid_source, j->pidfd, EPOLLIN, job_pid_io, j);
        if (r < 0) {
                sigkill_wait(pid);
                job_free(j);
                return r;
        }
        j->query = query;
        if (query) m->n_query_jobs++;
        j->next = m->jobs;
        if (m->jobs) m->jobs->prev = j;
        m->jobs = j;
        return 0;
}

int job_start(Manager *m, job_run_fn run, job_done_fn done, void *userdata) {
        return job_spawn(m, run, done, userdata, false);
}

int job_start_query(Manager *m, job_run_fn run, job_done_fn done, void *userdata) {
        if (m->n_query_jobs < JOB_QUERIES_MAX && !m->jobs_waiting) return job_spawn(m, run, done, userdata, true);
        Job *w = calloc(1, sizeof *w);
        if (!w) return -ENOMEM;
        *w = (Job) {.m = m, .pidfd = -1, .pipe_fd = -1, .run = run, .done = done, .userdata = userdata, .query = true};
        if (m->jobs_waiting_tail)
                m->jobs_waiting_tail->next = w;
        else
                m->jobs_waiting = w;
        m->jobs_waiting_tail = w;
        return 0;
}

/* ---- starting a job that must not be skipped ---- */

static bool job_error_is_transient(int r) {
        return r == -EMFILE || r == -ENFILE || r == -EAGAIN || r == -ENOMEM;
}

static int job_retry_cb(sd_event_source *s, uint64_t usec, void *userdata) {
        Job *j = userdata;
        Manager *m = j->m;
        int r = job_start(m, j->run, j->done, j->userdata);
        if (r >= 0 || !job_error_is_transient(r)) {
                if (r >= 0) log_info("started a deferred job after %u attempts", j->attempts);
                job_unlink(j);
                job_done_fn done = j->done;
                void *ud = j->userdata;
                job_free(j);
                if (r < 0) done(m, ud, NULL, r);
                return 0;
        }
        j->attempts++;
        uint64_t now;
        sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        sd_event_source_set_time(s, now + JOB_RETRY_USEC);
        sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

int job_start_retrying(Manager *m, job_run_fn run, job_done_fn done, void *userdata) {
        int r = job_start(m, run, done, userdata);
        if (r >= 0 || !job_error_is_transient(r)) return r;
        Job *j = calloc(1, sizeof *j);
        if (!j) return r;
        j->m = m;
        j->pidfd = j->pipe_fd = -1;
        j->run = run;
        j->done = done;
        j->userdata = userdata;
        j->attempts = 1;
        uint64_t now;
        sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        int k = sd_event_add_time(m->event, &j->retry_source, CLOCK_MONOTONIC, now + JOB_RETRY_USEC, 0, job_retry_cb, j);
        if (k < 0) {
                free(j);
                return r;
        }
        log_warning_errno(r, "cannot start a job now; retrying every %d ms until it starts", (int) (JOB_RETRY_USEC / 1000));
        j->next = m->jobs;
        if (m->jobs) m->jobs->prev = j;
        m->jobs = j;
        return 0;
}

void jobs_free(Manager *m) {
        while (m->jobs) {
                Job *j = m->jobs;
                job_unlink(j);
                job_free(j);
        }
        while (m->jobs_waiting) {
                Job *w = m->jobs_waiting;
                m->jobs_waiting = w->next;
                free(w);
        }
        m->jobs_waiting_tail = NULL;
        m->n_query_jobs = 0;
}
