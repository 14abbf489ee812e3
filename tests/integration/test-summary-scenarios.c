/* Report summaries (scenario A5) through the CLI and the real daemon: the internal OpenCode task with
 * --pure and the private snapshot attachment, the reply, empty narration,
 * the summary model check, continuity (session + delta) across summaries of
 * one task, and what a worker may summarize. The fake `opencode`
 * (tests/fixtures/bin) stands in for the model. */

#include <check.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"

static const char *const source_fixture =
        "{\"type\":\"step_start\",\"sessionID\":\"ses_fxB\",\"part\":{\"type\":\"step-start\",\"messageID\":\"msg_b1\"}}\n"
        "{\"type\":\"text\",\"sessionID\":\"ses_fxB\",\"part\":{\"type\":\"text\",\"messageID\":\"msg_b1\",\"text\":\"I'll run the failing test first.\"}}\n"
        "{\"type\":\"tool_use\",\"sessionID\":\"ses_fxB\",\"part\":{\"type\":\"tool\",\"messageID\":\"msg_b1\",\"tool\":\"bash\",\"state\":{\"input\":{\"command\":\"npm test\"},\"output\":\"1 failing\"}}}\n"
        "{\"type\":\"text\",\"sessionID\":\"ses_fxB\",\"part\":{\"type\":\"text\",\"messageID\":\"msg_b3\",\"text\":\"Fixed CRLF handling.\"}}\n"
        "{\"type\":\"step_finish\",\"sessionID\":\"ses_fxB\",\"part\":{\"type\":\"step-finish\",\"messageID\":\"msg_b3\",\"reason\":\"stop\",\"cost\":0.0003}}\n";

static const char *const summary_fixture =
        "{\"type\":\"text\",\"sessionID\":\"ses_sum1\",\"part\":{\"type\":\"text\",\"messageID\":\"m1\",\"text\":\"Blocked on nothing; next it commits.\"}}\n"
        "{\"type\":\"step_finish\",\"sessionID\":\"ses_sum1\",\"part\":{\"type\":\"step-finish\",\"messageID\":\"m1\",\"reason\":\"stop\"}}\n";

typedef struct world {
        tf_world *w;
        char *repo, *rec;
} world;

static world world_new(char *const env[]) {
        world x = {.w = tf_world_new(env)};
        x.repo = tf_repo_new(x.w, NULL, "echo one > f");
        /* a dir the summary worker may write (a daemon-wide --rw-bind) for its probes */
        x.rec = tf_record_dir(x.w, NULL);
        return x;
}

static void world_free(world *x) {
        tf_world_free(x->w);
        free(x->repo), free(x->rec);
}

static char *source_task(world *x, const char *fx_text) {
        char *fx = tf_fake_fixture(x->w, "source", fx_text, -1);
        tf_world_setenv(x->w, "FAKE_FIXTURE", fx);
        tf_world_setenv(x->w, "FAKE_SCRIPT", "true");
        char *id = tf_worker_settled(x->w, "opencode", "mock/model", x->repo, NULL, "Fix the parser", NULL);
        free(fx);
        return id;
}

static json_object *summary(tf_world *w, const char *id, int want_exit) {
        const char *argv[] = {"summary", id, "--json", NULL};
        return tf_cli_json(w, argv, want_exit);
}

static char *read_rec(world *x, const char *name) {
        size_t len = 0;
        return tf_read(tf_path(x->rec, name), &len);
}

static size_t n_tasks(tf_world *w) {
        const char *argv[] = {"list", "--all", "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        json_object *o = tf_json(r.out);
        json_object *t = json_get_array(o, "tasks");
        size_t n = t ? json_object_array_length(t) : 0;
        json_object_put(o);
        tf_run_done(&r);
        return n;
}

START_TEST(report_summary_spawn_and_continuity) {
        world x = world_new(NULL);
        tf_world *w = x.w;
        char *src = source_task(&x, source_fixture);
        char *fx = tf_fake_fixture(w, "summary", summary_fixture, -1);
        char *argv_file = strdup(tf_path(x.rec, "argv.txt"));
        tf_write(argv_file, "", 0, 0666);
        tf_world_setenv(w, "FAKE_FIXTURE", fx);
        tf_world_setenv(w, "FAKE_ARGV_FILE", argv_file);
        char *probe = strdup_printf(
                "cd %s/summaries && ls -A > %s/ls.txt; for f in *.json; do stat -c %%a \"$f\" >> %s/mode.txt; "
                "cat \"$f\" > %s/snap.json; done; ls -A %s > %s/state.txt 2>&1; "
                "env | grep -c '^TASKFERRY_TASK_ID=' > %s/taskid.txt; "
                "[ -z \"${TASKFERRY_SOCKET_PATH:-}\" ] && echo nosocket > %s/socket.txt; true",
                w->state, x.rec, x.rec, x.rec, w->state, x.rec, x.rec, x.rec);
        tf_world_setenv(w, "FAKE_SCRIPT", probe);

        json_object *o = summary(w, src, 0);
        /* the reply, keys in the spec's order */
        const char *keys[] = {"sourceStatus", "capturedAt", "sourceTaskId", "sourceLogBytes", "summaryInputBytes",
                              "summaryTask", "next", NULL};
        tf_assert_keys(o, keys);
        ck_assert_str_eq(tf_jstr(o, "sourceStatus"), "done");
        ck_assert_str_eq(tf_jstr(o, "sourceTaskId"), src);
        char *log = strdup_printf("%s/logs/%s.ndjson", w->state, src);
        struct stat st;
        ck_assert_int_eq(stat(log, &st), 0);
        int64_t lb = 0, ib = 0;
        ck_assert(json_get_int64(o, "sourceLogBytes", &lb) && lb == st.st_size);
        ck_assert(json_get_int64(o, "summaryInputBytes", &ib) && ib == st.st_size);
        json_object *stask = json_get_object(o, "summaryTask");
        char *sid = strdup(tf_jstr(stask, "id"));
        ck_assert_str_eq(tf_jstr(stask, "model"), "opencode/mimo-v2.5-free");
        char *next = strdup_printf("Run taskferry wait with task id \"%s\", then taskferry result with task id \"%s\"", sid, sid);
        ck_assert_str_eq(tf_jstr(o, "next"), next);
        json_object_put(o);

        json_object *done = tf_wait_settled(w, sid);
        ck_assert_msg(streq(tf_jstr(done, "status"), "done"), "%s", json_to_line(done, NULL));
        json_object_put(done);
        char *msg = tf_task_message(w, sid);
        ck_assert_str_eq(msg, "Blocked on nothing; next it commits.");

        /* argv: OpenCode's argv for a summary, the snapshot by path only */
        char *snap_path = strdup_printf("%s/summaries/%s.json", w->state, sid);
        char *want = strdup_printf("opencode\nrun\n--dir\n%s/summaries\n--pure\n--format\njson\n-m\nopencode/mimo-v2.5-free\n"
                                   "-f\n%s\n--\n",
                                   w->state, snap_path);
        char *got = read_rec(&x, "argv.txt");
        ck_assert_msg(startswith(got, want), "argv: %s", got);
        ck_assert(strstr(got, "--auto") == NULL && strstr(got, "--variant") == NULL);
        ck_assert_msg(strstr(got, "failing test") == NULL, "the transcript is on the command line: %s", got);
        /* the sandbox shows the snapshot alone, 0600, and no other state */
        char *ls = read_rec(&x, "ls.txt"), *mode = read_rec(&x, "mode.txt"), *state_ls = read_rec(&x, "state.txt");
        char *want_ls = strdup_printf("%s.json\n", sid);
        ck_assert_str_eq(ls, want_ls);
        ck_assert_str_eq(mode, "600\n");
        ck_assert_str_eq(state_ls, "summaries\n");
        char *tid = read_rec(&x, "taskid.txt"), *sock = read_rec(&x, "socket.txt");
        ck_assert_str_eq(tid, "0\n");
        ck_assert_str_eq(sock, "nosocket\n");
        /* the snapshot: 2-space JSON, the narration with tool lines */
        char *snap = read_rec(&x, "snap.json");
        ck_assert_msg(startswith(snap, "{\n  \"source\": {\n    \"id\": "), "snapshot: %s", snap);
        json_object *sj = tf_json(snap);
        ck_assert_str_eq(tf_jstr(json_get_object(sj, "source"), "id"), src);
        ck_assert_str_eq(tf_jstr(json_get_object(sj, "source"), "status"), "done");
        ck_assert_str_eq(tf_jstr(json_get_object(sj, "source"), "promptPreview"), "Fix the parser");
        ck_assert_str_eq(tf_jstr(sj, "narration"),
                         "I'll run the failing test first.\n\n[tool:bash] {\"command\":\"npm test\"} -> 1 failing\n\n"
                         "Fixed CRLF handling.");
        ck_assert(!json_object_object_get_ex(sj, "narration_is_delta", NULL));
        json_object_put(sj);
        /* deleted at settlement */
        ck_assert(!tf_exists(snap_path));
        /* the internal task */
        const char *sargv[] = {"status", sid, "--full", "--json", NULL};
        tf_run sr = tf_cli(w, NULL, NULL, sargv);
        json_object *so = tf_json(sr.out);
        json_object *of = json_get_object(so, "summaryOf");
        ck_assert(of != NULL);
        ck_assert_str_eq(tf_jstr(of, "sourceTaskId"), src);
        int64_t mw = 0;
        ck_assert(json_get_int64(of, "maxWords", &mw) && mw == 200);
        ck_assert_str_eq(tf_jstr(so, "promptPreview"), "Summarize the attached task transcript.");
        json_object_put(so);
        tf_run_done(&sr);

        /* continuity: the source log grows; the next summary continues the
         * session with only the new narration */
        const char *more = "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"messageID\":\"msg_c\",\"text\":\"Now committing.\"}}\n";
        free(tf_shf(w, NULL, "printf '%%s\\n' '%.*s' >> %s", (int) strlen(more) - 1, more, log));
        tf_write(argv_file, "", 0, 0666);
        o = summary(w, src, 0);
        char *sid2 = strdup(tf_jstr(json_get_object(o, "summaryTask"), "id"));
        json_object_put(o);
        json_object_put(tf_wait_settled(w, sid2));
        free(got);
        got = read_rec(&x, "argv.txt");
        ck_assert_msg(strstr(got, "\n--continue\n--session\nses_sum1\n--\n") != NULL, "argv: %s", got);
        free(snap);
        snap = read_rec(&x, "snap.json");
        sj = tf_json(snap);
        ck_assert_str_eq(tf_jstr(sj, "narration"), "Now committing.");
        ck_assert(json_get_bool(sj, "narration_is_delta", false));
        json_object_put(sj);

        free(sid2), free(snap), free(tid), free(sock), free(ls), free(mode), free(state_ls), free(want_ls), free(got),
                free(want), free(snap_path), free(msg), free(next), free(sid), free(log), free(probe), free(argv_file),
                free(fx), free(src);
        world_free(&x);
}
END_TEST

/* A5 at T0 (no sandbox): the same argv, the worker reads the snapshot where
 * it lies, and the snapshot goes at settlement. */
START_TEST(report_summary_unsandboxed) {
        char *const env[] = {(char *) "TASKFERRY_DISABLE_SANDBOX=1", NULL};
        world x = world_new(env);
        tf_world *w = x.w;
        char *src = source_task(&x, source_fixture);
        char *fx = tf_fake_fixture(w, "summary", summary_fixture, -1);
        char *argv_file = strdup(tf_path(x.rec, "argv.txt"));
        tf_world_setenv(w, "FAKE_FIXTURE", fx);
        tf_world_setenv(w, "FAKE_ARGV_FILE", argv_file);
        char *probe = strdup_printf("for f in %s/summaries/*.json; do cat \"$f\" > %s/snap.json; done", w->state, x.rec);
        tf_world_setenv(w, "FAKE_SCRIPT", probe);
        json_object *o = summary(w, src, 0);
        char *sid = strdup(tf_jstr(json_get_object(o, "summaryTask"), "id"));
        json_object_put(o);
        json_object *done = tf_wait_settled(w, sid);
        ck_assert_str_eq(tf_jstr(done, "status"), "done");
        json_object_put(done);
        char *snap_path = strdup_printf("%s/summaries/%s.json", w->state, sid);
        char *want = strdup_printf("opencode\nrun\n--dir\n%s/summaries\n--pure\n--format\njson\n-m\nopencode/mimo-v2.5-free\n"
                                   "-f\n%s\n--\n",
                                   w->state, snap_path);
        char *got = read_rec(&x, "argv.txt");
        ck_assert_msg(startswith(got, want), "argv: %s", got);
        char *snap = read_rec(&x, "snap.json");
        json_object *sj = tf_json(snap);
        ck_assert_str_eq(tf_jstr(json_get_object(sj, "source"), "id"), src);
        json_object_put(sj);
        ck_assert(!tf_exists(snap_path));
        free(snap), free(got), free(want), free(snap_path), free(sid), free(probe), free(argv_file), free(fx), free(src);
        world_free(&x);
}
END_TEST

START_TEST(no_text_and_unavailable_model) {
        world x = world_new(NULL);
        tf_world *w = x.w;
        /* a source with no model text: no child */
        char *src = source_task(&x, "");
        size_t before = n_tasks(w);
        json_object *o = summary(w, src, 0);
        ck_assert_str_eq(tf_jstr(o, "summary"), "no model text observed yet");
        char *help = strdup_printf("Run taskferry tail with task id \"%s\" after the task emits output", src);
        ck_assert_str_eq(tf_jstr(o, "help"), help);
        ck_assert_str_eq(tf_jstr(o, "sourceTaskId"), src);
        json_object_put(o);
        ck_assert_uint_eq(n_tasks(w), before);

        /* the summary model is not listed: nothing is created */
        char *src2 = source_task(&x, source_fixture);
        tf_world_setenv(w, "FAKE_MODELS", "other/model,more/model");
        before = n_tasks(w);
        o = summary(w, src2, 1);
        ck_assert_str_eq(tf_jstr(o, "error"), "summary model is unavailable: opencode/mimo-v2.5-free");
        json_object_put(o);
        ck_assert_uint_eq(n_tasks(w), before);
        DIR *d = opendir(tf_path(w->state, "summaries"));
        ck_assert_ptr_nonnull(d);
        struct dirent *de;
        while ((de = readdir(d))) ck_assert_msg(de->d_name[0] == '.', "left behind: %s", de->d_name);
        closedir(d);
        struct stat st;
        ck_assert_int_eq(stat(tf_path(w->state, "summaries"), &st), 0);
        ck_assert_int_eq(st.st_mode & 0777, 0700);

        /* maxWords is checked (75..300) with the params (acceptance P4: INVALID_PARAMS) */
        char *params = strdup_printf("{\"taskId\":\"%s\",\"maxWords\":50}", src2);
        json_object *f = tf_rpc(w, "task.summary", params);
        ck_assert(!json_get_bool(f, "ok", true));
        ck_assert_str_eq(tf_jstr(json_get_object(f, "error"), "code"), "INVALID_PARAMS");
        json_object_put(f);
        free(params), free(help), free(src), free(src2);
        world_free(&x);
}
END_TEST

START_TEST(summary_model_setting) {
        char *const env[] = {(char *) "TASKFERRY_SUMMARY_MODEL=prov/summarizer", NULL};
        world x = world_new(env);
        tf_world *w = x.w;
        char *src = source_task(&x, source_fixture);
        tf_world_setenv(w, "FAKE_MODELS", "prov/summarizer");
        json_object *o = summary(w, src, 0);
        ck_assert_str_eq(tf_jstr(json_get_object(o, "summaryTask"), "model"), "prov/summarizer");
        json_object_put(tf_wait_settled(w, tf_jstr(json_get_object(o, "summaryTask"), "id")));
        json_object_put(o);
        free(src);
        world_free(&x);
}
END_TEST

/* The env file's values reach the summary-model check as they reach the
 * summary child itself: a model that `opencode models` lists only with a
 * variable the env file alone holds is found (it once looked at the
 * daemon's and the caller's env only, and answered "unavailable"). */
START_TEST(summary_models_see_the_env_file) {
        world x = world_new(NULL);
        tf_world *w = x.w;
        char *envfile = strdup(tf_path(w->root, "daemon.env"));
        tf_write(envfile, "FAKE_MODELS=prov/from-env-file\n", strlen("FAKE_MODELS=prov/from-env-file\n"), 0600);
        tf_world_setenv(w, "TASKFERRY_ENV_FILE", envfile);
        tf_world_setenv(w, "TASKFERRY_SUMMARY_MODEL", "prov/from-env-file");
        char *src = source_task(&x, source_fixture);
        json_object *o = summary(w, src, 0);
        ck_assert_str_eq(tf_jstr(json_get_object(o, "summaryTask"), "model"), "prov/from-env-file");
        json_object_put(tf_wait_settled(w, tf_jstr(json_get_object(o, "summaryTask"), "id")));
        json_object_put(o);
        free(src), free(envfile);
        world_free(&x);
}
END_TEST

/* Attack: a worker summarizes through its own task socket. It may summarize
 * its own task (its own log), never another task of the user's: the answer
 * is UNKNOWN_TASK, as for an id that does not exist (peer.h). */
START_TEST(attack_worker_summarizes_other_task) {
        world x = world_new(NULL);
        tf_world *w = x.w;
        /* A summary task runs with the daemon's environment, never the
         * asking worker's: what keeps the worker's summaries live while it
         * asks for more is the daemon's FAKE_SCRIPT, which holds every
         * summary while <rec>/hold exists (the worker makes it before its
         * six requests and removes it after). Without the hold they finish
         * in a moment, and one could end before the fifth request. */
        char *hold = strdup_printf("while [ -e %s/hold ]; do sleep 0.1; done", x.rec);
        tf_world_setenv(w, "FAKE_SCRIPT", hold);
        tf_daemon_start(w);
        char *secret = source_task(&x, source_fixture);
        char *script = strdup_printf(
                "export FAKE_SCRIPT=; O=\"$TASKFERRY_OUTPUT_DIR\"; "
                "taskferry summary %s --json > \"$O/other.json\" 2>&1; "
                "printf '%%s\\n' '{\"type\":\"text\",\"part\":{\"type\":\"text\",\"messageID\":\"x\",\"text\":\"own words\"}}'; "
                "sleep 0.3; taskferry summary \"$TASKFERRY_TASK_ID\" --json > \"$O/own.json\" 2>&1; "
                "sid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[\"summaryTask\"][\"id\"])' \"$O/own.json\"); "
                "taskferry wait \"$sid\" --json > \"$O/own-wait.json\" 2>&1; "
                "touch %s/hold; "
                "for i in 1 2 3 4 5 6; do taskferry summary \"$TASKFERRY_TASK_ID\" --json >> \"$O/spam.txt\" 2>&1; done; "
                "rm -f %s/hold",
                secret, x.rec, x.rec);
        tf_world_setenv(w, "FAKE_FIXTURE", "");
        tf_world_setenv(w, "FAKE_SCRIPT", script);
        char *id = tf_worker_settled(w, "opencode", "mock/model", x.repo, NULL, "p", NULL);
        char *other = tf_output_read(w, id, "other.json");
        char *own = tf_output_read(w, id, "own.json");
        char *unknown = strdup_printf("unknown task id: %s", secret);
        ck_assert_msg(strstr(other, unknown) != NULL, "other: %s", other);
        ck_assert_msg(strstr(other, "failing test") == NULL, "other: %s", other);
        json_object *oo = tf_json(own);
        ck_assert_msg(json_get_object(oo, "summaryTask") != NULL, "own: %s", own);
        json_object_put(oo);
        /* the worker may wait for the summary it asked for */
        char *own_wait = tf_output_read(w, id, "own-wait.json");
        json_object *ow = tf_json(own_wait);
        ck_assert_msg(streq(strempty(tf_jstr(ow, "status")), "done"), "own wait: %s", own_wait);
        json_object_put(ow);
        /* and holds at most SUMMARY_NESTED_MAX (4) live ones */
        char *spam = tf_output_read(w, id, "spam.txt");
        ck_assert_msg(strstr(spam, "this task has too many summaries queued or running") != NULL, "spam: %s", spam);
        size_t made = tf_count(spam, "\"summaryTask\"");
        ck_assert_msg(made == 4, "%zu summaries made: %s", made, spam);
        free(spam), free(own_wait);
        free(unknown), free(own), free(other), free(id), free(script), free(secret), free(hold);
        world_free(&x);
}
END_TEST

int main(void) {
        return tf_run_tests("summary", "summary", 300,
                            TF_TESTS(report_summary_spawn_and_continuity, report_summary_unsandboxed,
                                     no_text_and_unavailable_model, summary_model_setting,
                                     summary_models_see_the_env_file,
                                     attack_worker_summarizes_other_task));
}
