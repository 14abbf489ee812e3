/* Attacks on issue 7's channels (task.summary, task.advisor, event.subscribe,
 * task.tail/output, taskferry diff) by a hostile worker through its own task
 * socket (peer.h). Each test is one attack; those that once found a hole say
 * so. The fake `opencode` (tests/fixtures/bin) stands in for the model. */

#include <check.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "util.h"

static char *make_repo(tf_world *w) {
        char *repo = strdup(tf_path(w->repo_parent, "repo"));
        free(tf_shf(w, NULL, "mkdir -p %s && cd %s && git init -q && echo base > f && git add f && git commit -qm base",
                    repo, repo));
        return repo;
}

static char *output_file(tf_world *w, const char *id, const char *name) {
        size_t len = 0;
        return tf_read(tf_path(tf_path(tf_path(w->state, "outputs"), id), name), &len);
}

/* Hole found (fixed in summary.c): `taskferry summary` sends the caller's
 * whole env, and the daemon ran the summary-model check (`opencode models`)
 * outside every sandbox with it. A worker summarizing its own task with
 * LD_PRELOAD pointing at a library ran that library as the user, unsandboxed.
 * A sandboxed caller's env now reaches neither the check nor the summary task. */
START_TEST(summary_env_runs_nothing_outside_the_sandbox) {
        tf_world *w = tf_world_new(NULL);
        char *repo = make_repo(w);
        /* the library a worker would build: it records where it ran */
        char *src = strdup(tf_path(w->root, "evil.c"));
        const char *code = "#include <fcntl.h>\n#include <stdlib.h>\n#include <unistd.h>\n"
                           "__attribute__((constructor)) static void pwn(void) {\n"
                           "        const char *p = getenv(\"PWN_MARK\");\n"
                           "        int fd = p ? open(p, O_WRONLY | O_CREAT | O_APPEND, 0666) : -1;\n"
                           "        if (fd >= 0) { (void) !write(fd, \"ran\\n\", 4); close(fd); }\n}\n";
        tf_write(src, code, strlen(code), 0644);
        char *so = strdup(tf_path(w->root, "evil.so"));
        free(tf_shf(w, NULL, "cc -shared -fPIC -o %s %s && chmod 0755 %s", so, src, so));
        char *mark = strdup(tf_path(w->root, "pwned"));
        char *script = strdup_printf(
                "export FAKE_SCRIPT=; O=\"$TASKFERRY_OUTPUT_DIR\"; "
                "printf '%%s\\n' '{\"type\":\"text\",\"part\":{\"type\":\"text\",\"messageID\":\"x\",\"text\":\"own words\"}}'; "
                "sleep 0.3; touch %s.worker 2>/dev/null; "
                "LD_PRELOAD=%s PWN_MARK=%s taskferry summary \"$TASKFERRY_TASK_ID\" --json > \"$O/own.json\" 2>/dev/null; "
                "sid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[\"summaryTask\"][\"id\"])' \"$O/own.json\"); "
                "taskferry wait \"$sid\" >/dev/null 2>&1; true",
                mark, so, mark);
        tf_world_setenv(w, "FAKE_FIXTURE", "");
        tf_world_setenv(w, "FAKE_SCRIPT", script);
        const char *d[] = {"--executor", "opencode", "--model", "mock/model", "--directory", repo, "--prompt", "p", NULL};
        char *id = tf_dispatch(w, d);
        json_object_put(tf_wait_settled(w, id));
        char *own = output_file(w, id, "own.json");
        json_object *oo = tf_json(own);
        ck_assert_msg(json_get_object(oo, "summaryTask") != NULL, "own: %s", own);
        json_object_put(oo);
        /* the sandbox cannot write there itself: a mark is code run outside */
        char *worker_mark = strdup_printf("%s.worker", mark);
        ck_assert(!tf_exists(worker_mark));
        ck_assert_msg(!tf_exists(mark), "the worker's LD_PRELOAD ran outside the sandbox");
        free(worker_mark), free(own), free(id), free(script), free(mark), free(so), free(src), free(repo);
        tf_world_free(w);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("attack-lifecycle");
        TCase *tc = tcase_create("attack-lifecycle");
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, summary_env_runs_nothing_outside_the_sandbox);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) { return tf_run_suite(suite()); }
