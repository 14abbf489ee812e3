/* Durable state and lifecycle through the real daemon: tasks survive a
 * restart, unreadable state is never overwritten, cancel kills the whole
 * process group, the concurrency cap queues, and a worker that dies mid-line
 * loses nothing it printed. */

#include <check.h>
#include <signal.h>
#include <sys/wait.h>

#include "harness.h"
#include "json-util.h"
#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

TF_WORLD_TEST_ENV(tasks_survive_restart, "TASKFERRY_DISABLE_SANDBOX=1") {
        char *done_id = tf_dispatch_shell(w, w->repo_parent, NULL, "echo persisted");
        json_object_put(tf_wait_settled(w, done_id));
        char *run_id = tf_dispatch_shell(w, w->repo_parent, NULL, "sleep 60");
        tf_daemon_stop(w, SIGTERM);
        /* the next CLI call starts a new daemon that knows both tasks */
        const char *res[] = {"result", done_id, "--json", NULL};
        json_object *o = tf_cli_json(w, res, 0);
        ck_assert_str_eq(tf_jstr(o, "status"), "done");
        ck_assert_str_eq(tf_jstr(o, "message"), "persisted\n");
        json_object_put(o);
        /* the running worker's shim outlived the daemon: re-adopted, still running */
        const char *st[] = {"status", run_id, "--json", NULL};
        o = tf_cli_json(w, st, 0);
        ck_assert_str_eq(tf_jstr(o, "status"), "running");
        json_object_put(o);
        const char *list[] = {"list", "--all", "--json", NULL};
        o = tf_cli_json(w, list, 0);
        int64_t n = -1;
        json_get_int64(json_get_object(o, "counts"), "running", &n);
        ck_assert_int_eq(n, 1);
        json_get_int64(json_get_object(o, "counts"), "done", &n);
        ck_assert_int_eq(n, 1);
        json_object_put(o);
        /* and the new daemon can still cancel it and sees it end */
        const char *c[] = {"cancel", run_id, "--grace-ms", "200", "--json", NULL};
        json_object_put(tf_cli_json(w, c, 0));
        o = tf_wait_settled(w, run_id);
        ck_assert_str_eq(tf_jstr(o, "status"), "cancelled");
        json_object_put(o);
        free(done_id), free(run_id);
}
END_TEST

/* A sandboxed worker that finishes while the daemon is dead (SIGKILL) is
 * settled from the exit status its shim recorded, and its changeset is
 * extracted: nothing is lost. */
TF_WORLD_TEST(worker_finishing_while_daemon_is_dead_is_settled) {
        char *repo = tf_repo_new(w, NULL, "echo a > a");
        char *id = tf_dispatch_shell(w, repo, NULL, "sleep 2; echo late > late.txt; echo finished");
        pid_t pid = tf_daemon_pid(w);
        ck_assert_int_gt(pid, 0);
        kill(pid, SIGKILL);
        sleep(3);
        json_object *st = tf_wait_settled(w, id);
        ck_assert_str_eq(tf_jstr(st, "status"), "done");
        ck_assert_str_eq(tf_jstr(st, "changesetStatus"), "pending");
        json_object_put(st);
        const char *res[] = {"result", id, "--json", NULL};
        json_object *o = tf_cli_json(w, res, 0);
        ck_assert_str_eq(tf_jstr(o, "message"), "finished\n");
        ck_assert_msg(strstr(strempty(tf_jstr(o, "diff")), "+late"), "diff: %s", tf_jstr(o, "diff"));
        json_object_put(o);
        const char *acc[] = {"accept", id, "--json", NULL};
        json_object_put(tf_cli_json(w, acc, 0));
        char *late = tf_read(tf_path(repo, "late.txt"), NULL);
        ck_assert_str_eq(late, "late\n");
        free(late), free(id), free(repo);
}
END_TEST

/* A daemon that dies in the middle of an accept, after the patch landed but
 * before it recorded the decision: the next accept must see that the tree
 * already holds the change and not apply it a second time (review: a hunk
 * whose context repeats in the file applied twice). */
TF_WORLD_TEST(interrupted_accept_is_not_applied_twice) {
        char *repo = tf_repo_new(w, NULL,
                                 "printf 'top\\nx\\ny\\nA\\nB\\nC\\nD\\nE\\nF\\nmid\\nA\\nB\\nC\\nD\\nE\\nF\\nbottom\\nz\\nw\\n' > f.txt");
        char *id = tf_dispatch_shell(w, repo, NULL, "sed -i '0,/^C$/{/^C$/a NEW\n}' f.txt");
        json_object_put(tf_wait_settled(w, id));
        /* what the dying daemon's accept job had done: the patch landed, the
         * decision was not recorded, the record says an accept had begun */
        char *patch = strdup_printf("%s/diffs/%s.patch", w->state, id);
        free(tf_shf(w, repo, "git apply %s && grep -c NEW f.txt", patch));
        tf_daemon_stop(w, SIGTERM);
        char *tasks = strdup(tf_path(w->state, "tasks.json"));
        free(tf_shf(w, NULL,
                    "sed -i 's/\"changesetStatus\": \"pending\"/\"acceptStartedAt\": \"2026-01-01T00:00:00.000Z\", "
                    "\"changesetStatus\": \"pending\"/' %s && grep -q acceptStartedAt %s",
                    tasks, tasks));
        const char *acc[] = {"accept", id, "--json", NULL};
        json_object *o = tf_cli_json(w, acc, 0);
        ck_assert(json_get_bool(o, "applied", false));
        ck_assert_str_eq(tf_jstr(o, "changesetStatus"), "accepted");
        json_object_put(o);
        char *count = tf_shf(w, repo, "grep -c NEW f.txt");
        ck_assert_str_eq(count, "1");
        free(count), free(tasks), free(patch), free(id), free(repo);
}
END_TEST

TF_WORLD_TEST(unreadable_state_is_never_overwritten) {
        ck_assert_int_eq(mkdir_p(w->state, 0700), 0);
        const char *garbage = "[{\"id\": \"oc_x\", truncated";
        tf_write(tf_path(w->state, "tasks.json"), garbage, strlen(garbage), 0600);
        const char *list[] = {"list", "--all", NULL};
        tf_run r = tf_cli(w, NULL, NULL, list);
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert_msg(strstr(r.out, "could not read persisted task state"), "%s", r.out);
        tf_run_done(&r);
        const char *d[] = {"dispatch", "--executor", "shell", "--directory", w->repo_parent, "--prompt", "true", NULL};
        r = tf_cli(w, NULL, NULL, d);
        ck_assert_int_eq(r.exit_code, 1);
        tf_run_done(&r);
        tf_daemon_stop(w, SIGTERM);
        char *after = tf_read(tf_path(w->state, "tasks.json"), NULL);
        ck_assert_str_eq(after, garbage);
        free(after);
}
END_TEST

static bool group_gone(tf_world *w, void *arg) {
        pid_t pgid = *(pid_t *) arg;
        return kill(-pgid, 0) < 0 && errno == ESRCH;
}

TF_WORLD_TEST(cancel_kills_the_process_group) {
        /* a grandchild that ignores nothing, and a worker that traps TERM */
        char *id = tf_dispatch_shell(w, w->repo_parent, NULL, "sleep 300 & trap '' TERM; echo started; while :; do sleep 0.1; done");
        json_object *st = NULL;
        int64_t pid = 0;
        for (int i = 0; i < 500 && pid <= 0; i++) {
                const char *s[] = {"status", id, "--full", "--json", NULL};
                st = tf_cli_json(w, s, 0);
                json_get_int64(st, "pid", &pid);
                json_object_put(st);
                if (pid <= 0) usleep(20000);
        }
        ck_assert_int_gt(pid, 0);
        const char *c[] = {"cancel", id, "--grace-ms", "500", "--json", NULL};
        json_object *o = tf_cli_json(w, c, 0);
        char *note = strdup_printf("SIGTERM sent to process group %lld; escalates to SIGKILL after 500ms if it hasn't exited",
                                   (long long) pid);
        ck_assert_str_eq(tf_jstr(o, "note"), note);
        free(note);
        json_object_put(o);
        st = tf_wait_settled(w, id);
        ck_assert_str_eq(tf_jstr(st, "status"), "cancelled");
        ck_assert(json_get_bool(st, "cancelRequested", false));
        json_object_put(st);
        pid_t pg = (pid_t) pid;
        ck_assert(tf_wait_until(group_gone, w, &pg, 10000));
        /* cancelling again is an idempotent no-op */
        o = tf_cli_json(w, c, 0);
        ck_assert_str_eq(tf_jstr(o, "note"), "task is already cancelled; nothing to cancel");
        json_object_put(o);
        free(id);
}
END_TEST

TF_WORLD_TEST_ENV(concurrency_cap_queues_and_queued_cancel, "TASKFERRY_MAX_CONCURRENT_TASKS=1",
                  "TASKFERRY_DISABLE_SANDBOX=1") {
        char *a = tf_dispatch_shell(w, w->repo_parent, NULL, "sleep 1; echo one");
        json_object *o = tf_cli_json(w, (const char *const[]){"dispatch", "--json", "--executor", "shell", "--directory",
                                                               w->repo_parent, "--prompt", "echo two", NULL},
                                     0);
        ck_assert_str_eq(tf_jstr(o, "status"), "queued");
        char *b = strdup(tf_jstr(o, "id"));
        char *next = strdup_printf("Task is queued; run taskferry wait or taskferry status with task id \"%s\" to check when it starts", b);
        ck_assert_str_eq(tf_jstr(o, "next"), next);
        free(next);
        json_object_put(o);
        char *c = tf_dispatch_shell(w, w->repo_parent, NULL, "echo two");
        const char *cancel[] = {"cancel", c, "--json", NULL};
        o = tf_cli_json(w, cancel, 0);
        ck_assert_str_eq(tf_jstr(o, "status"), "cancelled");
        ck_assert_str_eq(tf_jstr(o, "note"), "queued task cancelled before launch");
        json_object_put(o);
        json_object *sb = tf_wait_settled(w, b);
        ck_assert_str_eq(tf_jstr(sb, "status"), "done");
        json_object_put(sb);
        json_object *sa = tf_wait_settled(w, a);
        ck_assert_str_eq(tf_jstr(sa, "status"), "done");
        /* b started only after a ended */
        ck_assert_str_le(tf_jstr(sa, "endedAt"), tf_jstr(sb = tf_wait_settled(w, b), "endedAt"));
        json_object_put(sa);
        json_object_put(sb);
        json_object *sc = tf_wait_settled(w, c);
        ck_assert_str_eq(tf_jstr(sc, "status"), "cancelled");
        ck_assert_ptr_null(json_get_object(sc, "pid"));
        json_object_put(sc);
        free(a), free(b), free(c);
}
END_TEST

TF_WORLD_TEST(worker_dying_mid_line_keeps_output) {
        char *id = tf_dispatch_shell(w, w->repo_parent, NULL, "echo first line; printf 'half a li'; kill -KILL $$");
        json_object *st = tf_wait_settled(w, id);
        ck_assert_str_eq(tf_jstr(st, "status"), "crashed");
        /* bwrap reports a worker killed by signal N as exit status 128+N */
        int64_t code = 0;
        bool has_code = json_get_int64(st, "exitCode", &code);
        ck_assert_msg(streq(strempty(tf_jstr(st, "signal")), "SIGKILL") || (has_code && code == 128 + SIGKILL),
                      "%s", json_to_line(st, NULL));
        json_object_put(st);
        const char *res[] = {"result", id, "--json", NULL};
        json_object *o = tf_cli_json(w, res, 0);
        ck_assert_str_eq(tf_jstr(o, "message"), "first line\nhalf a li");
        json_object_put(o);
        free(id);
}
END_TEST

/* stderr reaches the log byte for byte, but a stderr write without a newline
 * cannot glue itself onto the next stdout event and lose it. */
TF_WORLD_TEST(stderr_without_newline_keeps_events_intact) {
        char *id = tf_dispatch_shell(w, w->repo_parent, NULL, "printf 'warning: no newline' >&2; sleep 0.2; echo 'the real answer'");
        json_object *st = tf_wait_settled(w, id);
        ck_assert_str_eq(tf_jstr(st, "status"), "done");
        json_object_put(st);
        const char *res[] = {"result", id, "--json", NULL};
        json_object *o = tf_cli_json(w, res, 0);
        ck_assert_str_eq(tf_jstr(o, "message"), "the real answer\n");
        json_object_put(o);
        char *path = strdup_printf("%s/logs/%s.ndjson", w->state, id);
        char *log = tf_read(path, NULL);
        ck_assert_msg(strstr(log, "warning: no newline\n{\"type\":\"text\""), "log: %s", log);
        free(log), free(path), free(id);
}
END_TEST

TF_WORLD_TEST(nonzero_exit_and_stderr_boot_failure) {
        char *id = tf_dispatch_shell(w, w->repo_parent, NULL, "echo 'Error: could not load config' >&2; exit 3");
        json_object *st = tf_wait_settled(w, id);
        ck_assert_str_eq(tf_jstr(st, "status"), "crashed");
        int64_t code = 0;
        json_get_int64(st, "exitCode", &code);
        ck_assert_int_eq(code, 3);
        ck_assert_str_eq(strempty(tf_jstr(st, "failureReason")), "shell_boot_failure");
        ck_assert_str_eq(strempty(tf_jstr(st, "failureDetail")), "Error: could not load config");
        json_object_put(st);
        free(id);
}
END_TEST

int main(void) {
        return tf_run_tests("daemon-state", "state", 300,
                            TF_TESTS(tasks_survive_restart, worker_finishing_while_daemon_is_dead_is_settled,
                                     unreadable_state_is_never_overwritten, interrupted_accept_is_not_applied_twice,
                                     cancel_kills_the_process_group, concurrency_cap_queues_and_queued_cancel,
                                     worker_dying_mid_line_keeps_output, nonzero_exit_and_stderr_boot_failure,
                                     stderr_without_newline_keeps_events_intact));
}
