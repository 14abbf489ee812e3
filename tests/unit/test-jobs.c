/* jobs.c: forked blocking work. A job's JSON result reaches its callback
 * through the event loop (never inside job_start), whole however large; a
 * child that fails, dies or writes no JSON is an error, not a result; many
 * jobs each answer once with their own userdata; the child holds no fd of the
 * daemon's but the result pipe; a start that fails for lack of fds is retried
 * until it starts; jobs_free forgets jobs without calling back. */

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon-fixture.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

static Manager m;

static void setup(void) { tf_manager_setup(&m, "test-jobs"); }
static void teardown(void) { tf_manager_teardown(&m); }

/* What a job's callback heard. */
typedef struct Outcome {
        unsigned calls;
        int error;
        json_object *result; /* a ref of the result */
        int arg;             /* the job's own argument (its userdata) */
} Outcome;

static void record(Manager *mm, void *userdata, json_object *result, int error) {
        ck_assert_ptr_eq(mm, &m);
        Outcome *o = userdata;
        o->calls++;
        o->error = error;
        json_object_put(o->result);
        o->result = json_object_get(result);
}

/* o[key] as an int, -1 when absent. */
static int64_t int_of(json_object *o, const char *key) {
        int64_t v = -1;
        return json_get_int64(o, key, &v) ? v : -1;
}

/* Run the loop until o was called back, for at most ms. */
static void run_until_called(Outcome *o, unsigned n, uint64_t ms) {
        uint64_t end = mono_ms() + ms;
        while (o->calls < n && mono_ms() < end) ck_assert_int_ge(sd_event_run(m.event, 20 * 1000), 0);
        ck_assert_msg(o->calls >= n, "called back %u times in %llu ms, wanted %u", o->calls, (unsigned long long) ms, n);
}

static json_object *run_echo(void *userdata, int *error) {
        Outcome *o = userdata;
        json_object *r = json_object_new_object();
        json_object_object_add(r, "arg", json_object_new_int(o->arg));
        json_object_object_add(r, "pid", json_object_new_int(getpid()));
        return r;
}

START_TEST(result_reaches_its_callback_through_the_loop) {
        Outcome o = {.arg = 42};
        ck_assert_int_eq(job_start(&m, run_echo, record, &o), 0);
        /* never called back inside job_start */
        ck_assert_uint_eq(o.calls, 0);
        ck_assert_ptr_nonnull(m.jobs);
        run_until_called(&o, 1, 10000);
        ck_assert_uint_eq(o.calls, 1);
        ck_assert_int_eq(o.error, 0);
        ck_assert_int_eq(int_of(o.result, "arg"), 42);
        /* it ran in another process */
        ck_assert_int_gt(int_of(o.result, "pid"), 0);
        ck_assert_int_ne(int_of(o.result, "pid"), getpid());
        ck_assert_ptr_null(m.jobs);
        json_object_put(o.result);
        /* and once only */
        tf_run_pending(&m);
        ck_assert_uint_eq(o.calls, 1);
}
END_TEST

static json_object *run_big(void *userdata, int *error) {
        size_t n = 3 * 1024 * 1024; /* far past a pipe's buffer and the first read's 64 KiB */
        char *s = malloc(n + 1);
        if (!s) return NULL;
        for (size_t i = 0; i < n; i++) s[i] = (char) ('a' + i % 26);
        s[n] = 0;
        json_object *r = json_object_new_object();
        json_object_object_add(r, "s", json_object_new_string_len(s, (int) n));
        free(s);
        return r;
}

START_TEST(large_result_arrives_whole) {
        Outcome o = {0};
        ck_assert_int_eq(job_start(&m, run_big, record, &o), 0);
        run_until_called(&o, 1, 20000);
        ck_assert_int_eq(o.error, 0);
        const char *s = json_get_string(o.result, "s");
        ck_assert_ptr_nonnull(s);
        ck_assert_uint_eq(strlen(s), 3 * 1024 * 1024);
        for (size_t i = 0; i < 3 * 1024 * 1024; i += 4093) ck_assert_int_eq(s[i], 'a' + i % 26);
        json_object_put(o.result);
}
END_TEST

static json_object *run_nothing(void *userdata, int *error) { return NULL; }
static json_object *run_error(void *userdata, int *error) {
        *error = -EIO;
        return NULL;
}
static json_object *run_exit2(void *userdata, int *error) { _exit(2); }
static json_object *run_killed(void *userdata, int *error) {
        /* half a result, then death by a signal */
        (void) !write(3, "{\"partial\":", 11);
        raise(SIGKILL);
        return NULL;
}
static json_object *run_not_json(void *userdata, int *error) {
        (void) !write(3, "not json\n", 9);
        return NULL;
}
static json_object *run_trailing(void *userdata, int *error) {
        (void) !write(3, "{\"a\":1} {\"b\":2}", 15);
        return NULL;
}
static json_object *run_error_with_result(void *userdata, int *error) {
        /* a result wins over an error set beside it */
        *error = -EIO;
        return json_object_new_string("kept");
}

static const struct {
        const char *name;
        job_run_fn run;
        int error;
        bool has_result;
} ends[] = {
        {"no result", run_nothing, 0, false},
        {"error, no result", run_error, -ECHILD, false},
        {"exit 2", run_exit2, -ECHILD, false},
        {"killed mid-result", run_killed, -ECHILD, false},
        {"not JSON", run_not_json, -EBADMSG, false},
        {"two documents", run_trailing, -EBADMSG, false},
        {"error beside a result", run_error_with_result, 0, true},
};

START_TEST(a_child_that_fails_is_an_error) {
        Outcome o = {0};
        ck_assert_int_eq(job_start(&m, ends[_i].run, record, &o), 0);
        run_until_called(&o, 1, 10000);
        ck_assert_msg(o.error == ends[_i].error, "%s: error %d, wanted %d", ends[_i].name, o.error, ends[_i].error);
        ck_assert_msg((o.result != NULL) == ends[_i].has_result, "%s: result %s", ends[_i].name,
                      o.result ? json_object_to_json_string(o.result) : "NULL");
        ck_assert_ptr_null(m.jobs);
        json_object_put(o.result);
}
END_TEST

/* Run the loop until each of o[0..n) was called back, for at most ms; each
 * must have answered once, without error, with its own argument. */
static void assert_each_answered_once(Outcome *o, int n, uint64_t ms) {
        uint64_t end = mono_ms() + ms;
        for (;;) {
                unsigned done = 0;
                for (int i = 0; i < n; i++) done += o[i].calls;
                if (done == (unsigned) n || mono_ms() >= end) break;
                ck_assert_int_ge(sd_event_run(m.event, 20 * 1000), 0);
        }
        for (int i = 0; i < n; i++) {
                ck_assert_uint_eq(o[i].calls, 1);
                ck_assert_int_eq(o[i].error, 0);
                ck_assert_int_eq(int_of(o[i].result, "arg"), o[i].arg);
                json_object_put(o[i].result);
        }
}

START_TEST(many_jobs_each_answer_once) {
        enum { N = 40 };
        Outcome o[N];
        for (int i = 0; i < N; i++) {
                o[i] = (Outcome) {.arg = i};
                ck_assert_int_eq(job_start(&m, run_echo, record, &o[i]), 0);
        }
        assert_each_answered_once(o, N, 20000);
        ck_assert_ptr_null(m.jobs);
}
END_TEST

/* The fds the child has open but stdio and the pipe (fd 3). */
static json_object *run_list_fds(void *userdata, int *error) {
        json_object *fds = json_object_new_array();
        for (int fd = 0; fd < 1024; fd++)
                if (fcntl(fd, F_GETFD) >= 0 && fd > 3) json_object_array_add(fds, json_object_new_int(fd));
        return fds;
}

START_TEST(the_child_holds_no_fd_of_the_daemon) {
        /* a client connection, inheritable */
        int keep = open("/dev/null", O_RDONLY);
        ck_assert_int_ge(keep, 0);
        Outcome o = {0};
        ck_assert_int_eq(job_start(&m, run_list_fds, record, &o), 0);
        run_until_called(&o, 1, 10000);
        ck_assert_int_eq(o.error, 0);
        ck_assert_msg(json_object_array_length(o.result) == 0, "the child held %s",
                      json_object_to_json_string(o.result));
        json_object_put(o.result);
        close(keep);
}
END_TEST

/* A callback that starts the next job: a job finishing makes room for more. */
typedef struct Chain {
        unsigned left, calls;
} Chain;
static json_object *run_chain(void *userdata, int *error) { return json_object_new_int(1); }
static void chain_done(Manager *mm, void *userdata, json_object *result, int error) {
        Chain *c = userdata;
        ck_assert_int_eq(error, 0);
        c->calls++;
        if (c->left > 0) {
                c->left--;
                ck_assert_int_eq(job_start(mm, run_chain, chain_done, c), 0);
        }
}

START_TEST(a_callback_may_start_another_job) {
        Chain c = {.left = 4};
        ck_assert_int_eq(job_start(&m, run_chain, chain_done, &c), 0);
        uint64_t end = mono_ms() + 20000;
        while (c.calls < 5 && mono_ms() < end) ck_assert_int_ge(sd_event_run(m.event, 20 * 1000), 0);
        ck_assert_uint_eq(c.calls, 5);
        ck_assert_ptr_null(m.jobs);
}
END_TEST

START_TEST(jobs_free_forgets_without_calling_back) {
        Outcome o[3] = {{.arg = 0}, {.arg = 1}, {.arg = 2}};
        pid_t pids[3];
        for (int i = 0; i < 3; i++) {
                ck_assert_int_eq(job_start(&m, run_echo, record, &o[i]), 0);
                pids[i] = m.jobs->pid;
        }
        jobs_free(&m);
        ck_assert_ptr_null(m.jobs);
        /* the children end on their own; their ends reach nobody */
        for (int i = 0; i < 3; i++) ck_assert_int_eq(wait_for_terminate(pids[i], NULL), 0);
        tf_run_pending(&m);
        for (int i = 0; i < 3; i++) ck_assert_uint_eq(o[i].calls, 0);
}
END_TEST

/* Fill the fd table but one slot: a pipe (two fds) cannot be made. */
static int fill_fds(int *fds, size_t cap, struct rlimit *old) {
        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, old), 0);
        struct rlimit low = {.rlim_cur = 256, .rlim_max = old->rlim_max};
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
        int n = 0;
        for (;;) {
                ck_assert_int_lt(n, (int) cap);
                int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (fd < 0) break;
                fds[n++] = fd;
        }
        ck_assert_int_gt(n, 0);
        close(fds[--n]);
        return n;
}

static void unfill_fds(int *fds, int n, const struct rlimit *old) {
        for (int i = 0; i < n; i++) close(fds[i]);
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, old), 0);
}

START_TEST(out_of_fds_is_retried_until_it_starts) {
        /* the loop's monotonic timer exists before the fds run out */
        tf_run_loop_ms(&m, 1);
        int fds[256];
        struct rlimit old;
        int n = fill_fds(fds, ELEMENTSOF(fds), &old);
        Outcome plain = {0}, retried = {.arg = 7};
        /* a plain start says so */
        ck_assert_int_eq(job_start(&m, run_echo, record, &plain), -EMFILE);
        ck_assert_ptr_null(m.jobs);
        /* a retrying one is deferred, not skipped */
        int r = job_start_retrying(&m, run_echo, record, &retried);
        unfill_fds(fds, n, &old);
        ck_assert_int_eq(r, 0);
        ck_assert_ptr_nonnull(m.jobs);
        ck_assert_uint_eq(retried.calls, 0);
        run_until_called(&retried, 1, 10000);
        ck_assert_int_eq(retried.error, 0);
        ck_assert_int_eq(int_of(retried.result, "arg"), 7);
        json_object_put(retried.result);
        ck_assert_uint_eq(plain.calls, 0);
        ck_assert_ptr_null(m.jobs);
}
END_TEST

START_TEST(a_deferred_job_is_forgotten_at_shutdown) {
        tf_run_loop_ms(&m, 1);
        int fds[256];
        struct rlimit old;
        int n = fill_fds(fds, ELEMENTSOF(fds), &old);
        Outcome o = {0};
        int r = job_start_retrying(&m, run_echo, record, &o);
        unfill_fds(fds, n, &old);
        ck_assert_int_eq(r, 0);
        jobs_free(&m);
        ck_assert_ptr_null(m.jobs);
        tf_run_loop_ms(&m, 1200); /* past the retry's second: nothing fires */
        ck_assert_uint_eq(o.calls, 0);
}
END_TEST

/* Jobs in m's list: the ones running (waiting ones are not in it). */
static unsigned running_jobs(void) {
        unsigned n = 0;
        for (Job *j = m.jobs; j; j = j->next) n++;
        return n;
}

static unsigned most_running;

static void record_running(Manager *mm, void *userdata, json_object *result, int error) {
        unsigned n = running_jobs();
        if (n > most_running) most_running = n;
        record(mm, userdata, result, error);
}

static json_object *run_slow_echo(void *userdata, int *error) {
        usleep(50 * 1000);
        return run_echo(userdata, error);
}

/* A flood of queries (a client's result, tail, output): at most
 * JOB_QUERIES_MAX run at once, the rest wait and each still answers once,
 * with its own result; a job that must happen (job_start) does not wait
 * behind them. */
START_TEST(queries_past_the_cap_wait_their_turn) {
        enum { N = JOB_QUERIES_MAX * 3 };
        Outcome o[N], must = {.arg = -7};
        most_running = 0;
        for (int i = 0; i < N; i++) {
                o[i] = (Outcome) {.arg = i};
                ck_assert_int_eq(job_start_query(&m, run_slow_echo, record_running, &o[i]), 0);
        }
        ck_assert_uint_eq(running_jobs(), JOB_QUERIES_MAX);
        ck_assert_int_eq(job_start(&m, run_echo, record, &must), 0);
        ck_assert_uint_eq(running_jobs(), JOB_QUERIES_MAX + 1);
        run_until_called(&must, 1, 10000);
        ck_assert_int_eq(int_of(must.result, "arg"), -7);
        json_object_put(must.result);
        assert_each_answered_once(o, N, 30000);
        ck_assert_uint_le(most_running, JOB_QUERIES_MAX + 1);
        ck_assert_ptr_null(m.jobs);
}
END_TEST

/* Waiting queries are forgotten at shutdown like running jobs, never called back. */
START_TEST(waiting_queries_are_forgotten_at_shutdown) {
        enum { N = JOB_QUERIES_MAX + 4 };
        Outcome o[N];
        for (int i = 0; i < N; i++) {
                o[i] = (Outcome) {.arg = i};
                ck_assert_int_eq(job_start_query(&m, run_slow_echo, record, &o[i]), 0);
        }
        jobs_free(&m);
        ck_assert_ptr_null(m.jobs);
        tf_run_loop_ms(&m, 300);
        for (int i = 0; i < N; i++) ck_assert_uint_eq(o[i].calls, 0);
        /* and the cap counts from zero again */
        Outcome again = {.arg = 1};
        ck_assert_int_eq(job_start_query(&m, run_echo, record, &again), 0);
        ck_assert_uint_eq(running_jobs(), 1);
        run_until_called(&again, 1, 10000);
        json_object_put(again.result);
}
END_TEST

int main(void) {
        Suite *s = suite_create("jobs");
        tf_tcase(s, "results", setup, teardown, 60,
                 TF_TESTS(result_reaches_its_callback_through_the_loop, large_result_arrives_whole,
                          many_jobs_each_answer_once, the_child_holds_no_fd_of_the_daemon,
                          a_callback_may_start_another_job, jobs_free_forgets_without_calling_back));
        TCase *tc = tf_tcase(s, "failures", setup, teardown, 60, NULL);
        TF_LOOP(tc, a_child_that_fails_is_an_error, ends);
        tf_tcase(s, "retry", setup, teardown, 60,
                 TF_TESTS(out_of_fds_is_retried_until_it_starts, a_deferred_job_is_forgotten_at_shutdown));
        tf_tcase(s, "queries", setup, teardown, 60,
                 TF_TESTS(queries_past_the_cap_wait_their_turn, waiting_queries_are_forgotten_at_shutdown));
        return tf_run_suite(s);
}
