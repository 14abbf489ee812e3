/* The daemon core through the real binaries . A
 * dispatch is answered only once its record is durable, and tasks still
 * queued when the daemon dies are queued again, in order, by the next one. */

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

TF_WORLD_TEST_ENV(dispatch_refused_when_the_record_cannot_be_written, "TASKFERRY_DISABLE_SANDBOX=1") {
        tf_daemon_start(w);
        /* tasks.json turns into a non-empty directory: every write of the
         * store fails (a rename over it), for root as for anyone */
        char *tasks = strdup(tf_path(w->state, "tasks.json"));
        /* (a boot flush of the daemon may rename a new tasks.json in between: retry) */
        free(tf_shf(w, NULL, "for i in $(seq 50); do rm -f %s; mkdir -p %s/keep 2>/dev/null && break; sleep 0.1; done; "
                             "test -d %s/keep", tasks, tasks, tasks));
        char *marker = strdup_printf("%s/ran", w->repo_parent);
        char *prompt = strdup_printf("touch %s", marker);
        const char *d[] = {"dispatch", "--json", "--executor", "shell", "--directory", w->repo_parent, "--prompt", prompt, NULL};
        tf_run r = tf_cli(w, NULL, NULL, d);
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert_msg(strstr(r.out, "cannot record the task durably"), "%s", r.out);
        tf_run_done(&r);
        usleep(500 * 1000);
        ck_assert_msg(!tf_exists(marker), "the refused task ran");
        /* nothing left behind: no task, no output dir, no log */
        json_object *frame = tf_rpc(w, "task.list", "{}");
        ck_assert_str_eq(tf_jstr(tf_result(frame), "tasks"), "none found (this server process's lifetime)");
        json_object_put(frame);
        char *outputs = tf_shf(w, NULL, "ls -A %s/outputs 2>/dev/null | wc -l; ls -A %s/logs 2>/dev/null | wc -l", w->state,
                               w->state);
        ck_assert_str_eq(outputs, "0\n0");
        free(outputs);
        /* once the store can be written again, dispatch works */
        free(tf_shf(w, NULL, "rm -r %s", tasks));
        char *id = tf_shell_done(w, w->repo_parent, NULL, prompt, NULL);
        ck_assert(tf_exists(marker));
        free(id), free(prompt), free(marker), free(tasks);
}
END_TEST

TF_WORLD_TEST_ENV(queued_tasks_run_after_a_daemon_crash, "TASKFERRY_DISABLE_SANDBOX=1",
                  "TASKFERRY_MAX_CONCURRENT_TASKS=1") {
        char *order = strdup_printf("%s/order", w->repo_parent);
        char *p0 = strdup_printf("sleep 2; echo 0 >> %s", order);
        char *ids[4];
        ids[0] = tf_dispatch_shell(w, w->repo_parent, NULL, p0);
        for (int i = 1; i < 4; i++) {
                char *p = strdup_printf("echo %d >> %s", i, order);
                ids[i] = tf_dispatch_shell(w, w->repo_parent, NULL, p);
                free(p);
        }
        tf_daemon_stop(w, SIGKILL);
        /* the next CLI call starts a daemon; every task ends done, FIFO */
        for (int i = 0; i < 4; i++) {
                json_object *o = tf_wait_settled(w, ids[i]);
                ck_assert_msg(streq(tf_jstr(o, "status"), "done"), "task %d: %s", i, tf_jstr(o, "status"));
                json_object_put(o);
        }
        char *got = tf_read(order, NULL);
        ck_assert_str_eq(got, "0\n1\n2\n3\n");
        free(got);
        for (int i = 0; i < 4; i++) free(ids[i]);
        free(p0), free(order);
}
END_TEST

int main(void) {
        return tf_run_tests("daemon-core", "core", 300,
                            TF_TESTS(dispatch_refused_when_the_record_cannot_be_written, queued_tasks_run_after_a_daemon_crash));
}
