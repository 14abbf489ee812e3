#pragma once
/* Forked jobs (jobs.c): blocking work (git, logs, mounts) runs in a child
 * watched through a pidfd; its JSON result comes back on a pipe. Owns Job
 * and Manager.jobs. */

#include <stdbool.h>
#include <sys/types.h>
#include <json-c/json.h>
#include <systemd/sd-event.h>

typedef struct Manager Manager;
typedef struct Job Job;

typedef void (*job_done_fn)(Manager *m, void *userdata, json_object *result, int error);
/* Runs in the forked child; returns a JSON result (may be NULL) or sets *error. */
typedef json_object *(*job_run_fn)(void *userdata, int *error);

struct Job {
        Manager *m;
        pid_t pid;
        int pidfd;
        int pipe_fd;
        sd_event_source *pid_source, *pipe_source;
        char *buf;
        size_t len, cap;
        bool exited, eof;
        int status;
        job_done_fn done;
        void *userdata;
        /* job_start_retrying: a start deferred for lack of resources */
        job_run_fn run;
        sd_event_source *retry_source;
        unsigned attempts;
        bool query;      /* job_start_query's: counted in Manager.n_query_jobs while it runs */
        Job *next, *prev; /* Manager.jobs (running or deferred); Manager.jobs_waiting (next only) */
};

/* The most query jobs (job_start_query) that run at once. */
#define JOB_QUERIES_MAX 16

/* Fork a child that runs run(userdata) (blocking work: git, logs, mounts),
 * writes its JSON result to a pipe and exits; done() is called on the loop
 * with the parsed result (or NULL and -ECHILD/-EBADMSG) once the child exited
 * and the pipe hit EOF. The child keeps only stdio and the pipe. -errno. */
int job_start(Manager *m, job_run_fn run, job_done_fn done, void *userdata);
/* As job_start, but a start that fails for lack of resources (EMFILE, ENFILE,
 * EAGAIN, ENOMEM: fds, processes, memory) is retried every second until it
 * starts, so work that must happen (a settlement) is deferred, never skipped.
 * If the daemon stops first, done() is never called (a task left running is
 * settled from its exit.json at the next start, task_coldplug). 0 once started
 * or deferred; other errors as job_start. */
int job_start_retrying(Manager *m, job_run_fn run, job_done_fn done, void *userdata);
/* As job_start, for work a client asked for and only waits on (reading a
 * log for result, tail or output): at most JOB_QUERIES_MAX of them run at
 * once, so a flood of requests cannot fork the daemon without bound; the
 * rest wait, in order, and start as running ones end (done() is called as
 * for any job). Jobs started with job_start never wait behind them. 0 once
 * started or waiting; -errno of a start that fails while there is room. */
int job_start_query(Manager *m, job_run_fn run, job_done_fn done, void *userdata);
/* Shutdown: forget every job, running or waiting, without calling its
 * done() (the children are not killed; a settlement reruns at the next
 * start). */
void jobs_free(Manager *m);

/* fd_limit_raise/fd_limit_restore and safe_fork: process-util.h (src/shared) */
