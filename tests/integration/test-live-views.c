/* The live views through the real daemon and CLI with fake workers:
 * the R scenarios (results, tail) and the O ones (output dir), the L parts
 * about tail/output/context/doctor/init, and a hostile worker using
 * its own task socket to read what is not its own. Runs as whoever runs the
 * suite (root and an unprivileged user). */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

/* ---- helpers ---- */

typedef struct cli_out {
        int rc;
        json_object *o; /* --json output parsed (NULL if not JSON or toon) */
        char *text;     /* stdout */
} cli_out;

static void cli_out_done(cli_out *c) {
        json_object_put(c->o);
        free(c->text);
        *c = (cli_out) {0};
}

/* Run the CLI in cwd (NULL: the world's root), with --json unless toon. */
static cli_out cli(tf_world *w, const char *cwd, bool toon, const char *const argv[]) {
        const char *full[64];
        size_t n = 0;
        for (size_t i = 0; argv[i] && n < 60; i++) full[n++] = argv[i];
        if (!toon) full[n++] = "--json";
        full[n] = NULL;
        tf_run r = tf_cli(w, cwd, NULL, full);
        cli_out c = {.rc = r.exit_code, .text = strdup(r.out)};
        if (!toon && json_parse_strict(r.out, strlen(r.out), &c.o) < 0) c.o = NULL;
        tf_run_done(&r);
        return c;
}

static char *fixture_task(tf_world *w, const char *executor, const char *fixture) {
        char *f = strdup_printf("%s/synthetic/%s", w->fixtures, fixture);
        tf_world_setenv(w, "FAKE_FIXTURE", f);
        const char *argv[] = {"--executor", executor, "--model", "mockllm/mock-model", "--directory", w->repo_parent,
                              "--prompt", "go", NULL};
        char *id = tf_dispatch(w, argv);
        tf_world_setenv(w, "FAKE_FIXTURE", "");
        free(f);
        return id;
}

static char *settle(tf_world *w, const char *id) {
        json_object *st = tf_wait_settled(w, id);
        char *s = strdup(strempty(tf_jstr(st, "status")));
        json_object_put(st);
        return s;
}

static void assert_settles(tf_world *w, const char *id, const char *want) {
        char *s = settle(w, id);
        ck_assert_msg(streq(s, want), "task %s is %s, want %s", id, s, want);
        free(s);
}

static char *outdir(tf_world *w, const char *id) { return strdup_printf("%s/outputs/%s", w->state, id); }

static const char *code_of(json_object *frame) {
        if (json_get_bool(frame, "ok", false)) return "ok";
        return strempty(json_get_string(json_get_object(frame, "error"), "code"));
}

static const char *message_of(json_object *frame) {
        return strempty(json_get_string(json_get_object(frame, "error"), "message"));
}

static const char *help_of(json_object *frame) {
        return strempty(json_get_string(json_get_object(frame, "error"), "help"));
}


/* ---- R: results, tail, status ---- */

TF_WORLD_TEST(results_and_tail_of_worker_streams) {
        /* R1 message vs narration */
        char *b = fixture_task(w, "opencode", "oc-b");
        assert_settles(w, b, "done");
        json_object *f = tf_rpcf(w, "task.result", "{\"taskId\":\"%s\"}", b);
        json_object *r = tf_result(f);
        const char *msg = "Fixed CRLF handling in src/parser.js; the parser test passes.";
        ck_assert_str_eq(tf_jstr(r, "message"), msg);
        char *narr = strdup_printf("I'll run the failing test first.\n\n%s", msg);
        ck_assert_str_eq(tf_jstr(r, "narration"), narr);
        int64_t n = 0;
        ck_assert(json_get_int64(r, "narrationTotalChars", &n));
        ck_assert_int_eq(n, (int64_t) strlen(narr));
        ck_assert(!json_get_bool(r, "narrationTruncated", true));
        ck_assert_str_eq(tf_jstr(r, "sessionId"), "ses_fxB");
        ck_assert_str_eq(json_to_line(json_get_object(r, "tokens"), NULL),
                         "{\"total\":2100,\"input\":1900,\"output\":170,\"reasoning\":30,\"cache\":{\"write\":0,\"read\":1000}}");
        json_object_put(f);
        free(narr);

        /* tail is the last text event, its last `chars` code points */
        const char *t6[] = {"tail", b, "--chars", "6", NULL};
        cli_out c = cli(w, NULL, false, t6);
        ck_assert_int_eq(c.rc, 0);
        char *want = strdup_printf("{\"taskId\":\"%s\",\"status\":\"done\",\"text\":\"asses.\",\"textTotalChars\":%zu,"
                                   "\"truncated\":true}",
                                   b, strlen(msg));
        ck_assert_str_eq(json_to_line(c.o, NULL), want);
        free(want);
        cli_out_done(&c);
        const char *tall[] = {"tail", b, NULL};
        c = cli(w, NULL, false, tall);
        ck_assert_str_eq(tf_jstr(c.o, "text"), msg);
        ck_assert(!json_get_bool(c.o, "truncated", true));
        cli_out_done(&c);
        /* chars bounds: the CLI's and the wire's */
        const char *tbig[] = {"tail", b, "--chars", "131073", NULL};
        c = cli(w, NULL, false, tbig);
        ck_assert_int_eq(c.rc, 2);
        cli_out_done(&c);
        json_object *e = tf_rpcf(w, "task.tail", "{\"taskId\":\"%s\",\"chars\":131073}", b);
        ck_assert_str_eq(code_of(e), "INVALID_PARAMS");
        json_object_put(e);
        e = tf_rpcf(w, "task.tail", "{\"taskId\":\"%s\",\"chars\":131072}", b);
        ck_assert_str_eq(code_of(e), "ok");
        json_object_put(e);
        e = tf_rpcf(w, "task.tail", "{\"taskId\":\"oc_nope_12345678\"}");
        ck_assert_str_eq(code_of(e), "UNKNOWN_TASK");
        json_object_put(e);

        /* code points, not bytes or UTF-16 units */
        char *u = tf_dispatch_shell(w, w->repo_parent, NULL, "printf 'h\\303\\251llo \\360\\237\\230\\200\\n'");
        assert_settles(w, u, "done");
        /* (a shell task's text events are its stdout lines, newline included) */
        const char *tu[] = {"tail", u, "--chars", "4", NULL};
        c = cli(w, NULL, false, tu);
        ck_assert_str_eq(tf_jstr(c.o, "text"), "o \xf0\x9f\x98\x80\n");
        ck_assert(json_get_int64(c.o, "textTotalChars", &n));
        ck_assert_int_eq(n, 8);
        cli_out_done(&c);

        /* nothing observed */
        char *q = tf_dispatch_shell(w, w->repo_parent, NULL, "true");
        assert_settles(w, q, "done");
        const char *tq[] = {"tail", q, NULL};
        c = cli(w, NULL, false, tq);
        want = strdup_printf("{\"taskId\":\"%s\",\"status\":\"done\",\"text\":\"none observed yet\",\"textTotalChars\":0,"
                             "\"truncated\":false,\"help\":\"Run taskferry wait with task id \\\"%s\\\" to wait for task output\"}",
                             q, q);
        ck_assert_str_eq(json_to_line(c.o, NULL), want);
        free(want);
        cli_out_done(&c);

        /* OC-E boot failure: the raw capture, blank lines dropped */
        char *oe = fixture_task(w, "opencode", "oc-e");
        assert_settles(w, oe, "crashed");
        const char *te[] = {"tail", oe, NULL};
        c = cli(w, NULL, false, te);
        const char *text = tf_jstr(c.o, "text");
        ck_assert_msg(text && strstr(text, "Error: Extension \"/x/y.js\" error") && strstr(text, "Warning: No models match") &&
                              !strstr(text, "\n\n"),
                      "%s", c.text);
        cli_out_done(&c);

        /* R2 fallback: crashed with text but no stop → the last message's text;
         * a missing log → "" */
        char *oc = fixture_task(w, "opencode", "oc-c");
        assert_settles(w, oc, "crashed");
        char *m = tf_task_message(w, oc);
        ck_assert_str_eq(m, "Reading the config");
        free(m);
        /* the tail of a crashed task with JSON lines is its last text, not the raw log */
        const char *tc[] = {"tail", oc, NULL};
        c = cli(w, NULL, false, tc);
        ck_assert_str_eq(tf_jstr(c.o, "text"), "Reading the config");
        cli_out_done(&c);
        char *oclog = strdup_printf("%s/logs/%s.ndjson", w->state, oc);
        ck_assert_int_eq(unlink(oclog), 0);
        free(oclog);
        f = tf_rpcf(w, "task.result", "{\"taskId\":\"%s\"}", oc);
        r = tf_result(f);
        ck_assert_str_eq(tf_jstr(r, "message"), "");
        ck_assert_str_eq(tf_jstr(r, "narration"), "");
        json_object_put(f);

        /* R8 pi normalization */
        char *pa = fixture_task(w, "pi", "pi-a");
        assert_settles(w, pa, "done");
        m = tf_task_message(w, pa);
        ck_assert_str_eq(m, "PONG\nStatus: DONE");
        free(m);
        char *logp = strdup_printf("%s/logs/%s.ndjson", w->state, pa);
        char *log = tf_read(logp, NULL);
        ck_assert_msg(strstr(log, "{\"sessionID\":\"019f90ea-1234-70e0-98dc-6847db316eb4\"}") &&
                              strstr(log, "\"messageID\":\"resp-a1\"") && strstr(log, "\"type\":\"step_finish\""),
                      "%s", log);
        free(log), free(logp);
        const char *tp[] = {"tail", pa, NULL};
        c = cli(w, NULL, false, tp);
        ck_assert_str_eq(tf_jstr(c.o, "text"), "NG\nStatus: DONE"); /* one delta */
        cli_out_done(&c);

        /* R7 finalStatus, kept across a restart */
        char *oa = fixture_task(w, "opencode", "oc-a");
        assert_settles(w, oa, "done");
        f = tf_rpcf(w, "task.result", "{\"taskId\":\"%s\"}", oa);
        ck_assert_str_eq(strempty(tf_jstr(tf_result(f), "finalStatus")), "DONE");
        json_object_put(f);
        tf_daemon_stop(w, SIGTERM);
        const char *sa[] = {"status", oa, "--full", NULL}; /* auto-starts a new daemon */
        c = cli(w, NULL, false, sa);
        ck_assert_msg(c.rc == 0 && streq_ptr(tf_jstr(c.o, "finalStatus"), "DONE"), "%s", c.text);
        cli_out_done(&c);
        free(b), free(u), free(q), free(oe), free(oc), free(pa), free(oa);
}
END_TEST

/* R4 a running task, R5 projections, R11 log activity, R10 diffStat */
TF_WORLD_TEST_ENV(running_projections_and_log_activity, "TASKFERRY_MAX_CONCURRENT_TASKS=1") {
        char *repo = tf_repo_new(w, NULL, "printf 'one\\n' > a.txt");
        char *run = tf_dispatch_shell(w, repo, NULL,
                                      "echo started; printf 'one\\ntwo\\n' > a.txt; printf 'x\\n' > new.txt; " TF_WAIT_GO
                                      "; echo finished");
        char *queued = tf_dispatch_shell(w, repo, NULL, "echo second");
        /* wait until the first one runs and printed */
        json_object *st = NULL;
        for (int i = 0; i < 600; i++) {
                json_object *f = tf_rpcf(w, "task.status", "{\"taskId\":\"%s\"}", run);
                bool ev = json_get_bool(tf_result(f), "logHasEvent", false);
                json_object_put(f);
                if (ev) break;
                usleep(50000);
        }
        /* R11: the queued task has no log yet */
        json_object *f = tf_rpcf(w, "task.status", "{\"taskId\":\"%s\"}", queued);
        st = tf_result(f);
        ck_assert_str_eq(tf_jstr(st, "status"), "queued");
        int64_t bytes = -1;
        ck_assert(json_get_int64(st, "logBytesWritten", &bytes));
        ck_assert_int_eq(bytes, 0);
        json_object *lw = NULL;
        ck_assert(json_object_object_get_ex(st, "logLastWriteAt", &lw) && lw == NULL);
        ck_assert(!json_get_bool(st, "logHasEvent", true));
        json_object_put(f);
        /* R4 */
        f = tf_rpcf(w, "task.result", "{\"taskId\":\"%s\"}", run);
        char *still = strdup_printf("{\"taskId\":\"%s\",\"status\":\"running\",\"message\":\"task is still running; "
                                    "poll taskferry status first\"}",
                                    run);
        ck_assert_str_eq(json_to_line(tf_result(f), NULL), still);
        free(still);
        json_object_put(f);
        const char *ft[] = {"result", run, "--fields", "tokens", NULL};
        cli_out c = cli(w, NULL, false, ft);
        char *want = strdup_printf("{\"taskId\":\"%s\",\"status\":\"running\",\"tokens\":null}", run);
        ck_assert_str_eq(json_to_line(c.o, NULL), want);
        free(want);
        cli_out_done(&c);
        /* a running task's tail is its latest line so far */
        const char *tr[] = {"tail", run, NULL};
        c = cli(w, NULL, false, tr);
        ck_assert_str_eq(tf_jstr(c.o, "status"), "running");
        ck_assert_str_eq(tf_jstr(c.o, "text"), "started\n");
        cli_out_done(&c);
        tf_go(w, run);
        assert_settles(w, run, "done");
        assert_settles(w, queued, "done");
        /* R5 */
        const char *fm[] = {"result", run, "--fields", "message", NULL};
        c = cli(w, NULL, false, fm);
        want = strdup_printf("{\"taskId\":\"%s\",\"status\":\"done\",\"message\":\"started\\nfinished\\n\"}", run);
        ck_assert_str_eq(json_to_line(c.o, NULL), want);
        free(want);
        cli_out_done(&c);
        const char *fb[] = {"result", run, "--fields", "bogus", NULL};
        c = cli(w, NULL, true, fb);
        ck_assert_msg(c.rc == 2 && strstr(c.text, "failureDetail"), "%s", c.text);
        cli_out_done(&c);
        json_object *e = tf_rpcf(w, "task.result", "{\"taskId\":\"%s\",\"fields\":[\"message\"],\"full\":true}", run);
        ck_assert_msg(strstr(message_of(e), "full requires narration"), "%s", json_to_line(e, NULL));
        json_object_put(e);
        const char *ff[] = {"result", run, "--full", "--fields", "message", NULL};
        c = cli(w, NULL, true, ff);
        ck_assert_msg(c.rc == 2 && strstr(c.text, "--full requires narration in --fields"), "%s", c.text);
        cli_out_done(&c);
        const char *df[] = {"result", run, "--diff", "--fields", "message", NULL};
        c = cli(w, NULL, true, df);
        ck_assert_int_eq(c.rc, 2);
        cli_out_done(&c);
        const char *dfu[] = {"result", run, "--diff", "--full", NULL};
        c = cli(w, NULL, true, dfu);
        ck_assert_int_eq(c.rc, 2);
        cli_out_done(&c);
        /* R10 diffStat from the stored patch */
        const char *ds[] = {"result", run, "--fields", "diffStat", NULL};
        c = cli(w, NULL, false, ds);
        ck_assert_str_eq(json_to_line(json_get_object(c.o, "diffStat"), NULL), "{\"files\":2,\"additions\":2,\"deletions\":0}");
        cli_out_done(&c);
        /* R11: once a line parsed */
        f = tf_rpcf(w, "task.status", "{\"taskId\":\"%s\"}", queued);
        ck_assert(json_get_bool(tf_result(f), "logHasEvent", false));
        json_object_put(f);
        free(run), free(queued), free(repo);
}
END_TEST

/* ---- O: the output dir ---- */

static char *listing_paths(json_object *o) {
        json_object *files = json_get_array(o, "files");
        char *s = strdup("");
        for (size_t i = 0; files && i < json_object_array_length(files); i++) {
                json_object *e = json_object_array_get_idx(files, i);
                int64_t size = -1;
                json_get_int64(e, "size", &size);
                tf_appendf(&s, "%s=%lld|", json_get_string(e, "path"), (long long) size);
        }
        return s;
}

static int content_len(json_object *o) {
        json_object *v = NULL;
        if (!json_object_object_get_ex(json_get_object(o, "file"), "content", &v) || !v) return -1;
        return json_object_get_string_len(v);
}

static cli_out output_of(tf_world *w, const char *id, const char *path, const char *max) {
        const char *argv[8] = {"output", id};
        size_t n = 2;
        if (path) argv[n++] = "--path", argv[n++] = path;
        if (max) argv[n++] = "--max-output-file-bytes", argv[n++] = max;
        argv[n] = NULL;
        return cli(w, NULL, false, argv);
}

TF_WORLD_TEST(output_dir_allocation_and_listing) {
        /* O1: there, 0700, before the worker starts; named everywhere */
        const char *dargv[] = {"dispatch", "--executor", "shell", "--directory", w->repo_parent, "--prompt",
                               "stat -c %a \"$TASKFERRY_OUTPUT_DIR\"; echo deliverable > \"$TASKFERRY_OUTPUT_DIR/deliverable.txt\"; "
                               "mkdir \"$TASKFERRY_OUTPUT_DIR/subdir\"; printf more > \"$TASKFERRY_OUTPUT_DIR/subdir/more.txt\"",
                               NULL};
        cli_out d = cli(w, NULL, false, dargv);
        ck_assert_int_eq(d.rc, 0);
        char *id = strdup(tf_jstr(d.o, "id"));
        char *dir = outdir(w, id);
        ck_assert_str_eq(strempty(tf_jstr(d.o, "outputDir")), dir);
        cli_out_done(&d);
        assert_settles(w, id, "done");
        char *m = tf_task_message(w, id);
        ck_assert_str_eq(m, "700\n");
        free(m);
        struct stat st;
        ck_assert_int_eq(stat(dir, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0700);
        const char *ls[] = {"status", id, NULL};
        cli_out c = cli(w, NULL, true, ls);
        char *line = strdup_printf("outputDir: %s", dir);
        ck_assert_msg(strstr(c.text, line), "%s", c.text);
        free(line);
        cli_out_done(&c);
        const char *rf[] = {"result", id, "--fields", "outputDir", NULL};
        c = cli(w, NULL, false, rf);
        ck_assert_str_eq(strempty(tf_jstr(c.o, "outputDir")), dir);
        cli_out_done(&c);
        const char *rr[] = {"result", id, NULL};
        c = cli(w, NULL, false, rr);
        ck_assert_str_eq(strempty(tf_jstr(c.o, "outputDir")), dir);
        cli_out_done(&c);

        /* O2 */
        c = output_of(w, id, NULL, NULL);
        char *want = strdup_printf("{\"taskId\":\"%s\",\"outputDir\":\"%s\",\"files\":[{\"path\":\"deliverable.txt\",\"size\":12},"
                                   "{\"path\":\"subdir/more.txt\",\"size\":4}],\"bytes\":16,\"total\":2,\"truncated\":false}",
                                   id, dir);
        ck_assert_str_eq(json_to_line(c.o, NULL), want);
        free(want);
        cli_out_done(&c);
        c = output_of(w, id, "subdir/more.txt", NULL);
        want = strdup_printf("{\"taskId\":\"%s\",\"outputDir\":\"%s\",\"files\":[],\"bytes\":0,\"total\":0,\"truncated\":false,"
                             "\"file\":{\"content\":\"more\",\"size\":4,\"truncated\":false}}",
                             id, dir);
        ck_assert_str_eq(json_to_line(c.o, NULL), want);
        free(want);
        cli_out_done(&c);
        /* after crashed and cancelled too; empty → [] */
        char *cr = tf_dispatch_shell(w, w->repo_parent, NULL, "echo x > \"$TASKFERRY_OUTPUT_DIR/c.txt\"; exit 3");
        assert_settles(w, cr, "crashed");
        c = output_of(w, cr, NULL, NULL);
        char *p = listing_paths(c.o);
        ck_assert_str_eq(p, "c.txt=2|");
        free(p);
        cli_out_done(&c);
        char *ca = tf_dispatch_shell(w, w->repo_parent, NULL, "echo y > \"$TASKFERRY_OUTPUT_DIR/k.txt\"; echo ready; exec sleep 60");
        for (int i = 0; i < 600; i++) {
                char *cd = outdir(w, ca);
                bool there = tf_exists(tf_path(cd, "k.txt"));
                free(cd);
                if (there) break;
                usleep(50000);
        }
        const char *cancel[] = {"cancel", ca, "--grace-ms", "200", NULL};
        c = cli(w, NULL, false, cancel);
        ck_assert_int_eq(c.rc, 0);
        cli_out_done(&c);
        assert_settles(w, ca, "cancelled");
        c = output_of(w, ca, NULL, NULL);
        p = listing_paths(c.o);
        ck_assert_str_eq(p, "k.txt=2|");
        free(p);
        cli_out_done(&c);
        char *em = tf_dispatch_shell(w, w->repo_parent, NULL, "true");
        assert_settles(w, em, "done");
        c = output_of(w, em, NULL, NULL);
        ck_assert_str_eq(json_to_line(json_get_array(c.o, "files"), NULL), "[]");
        int64_t bytes = -1;
        json_get_int64(c.o, "bytes", &bytes);
        ck_assert_int_eq(bytes, 0);
        cli_out_done(&c);

        /* OUTPUT_NOT_FOUND, escapes */
        json_object *e = tf_rpcf(w, "task.output", "{\"taskId\":\"%s\",\"path\":\"nope.txt\"}", id);
        ck_assert_str_eq(code_of(e), "OUTPUT_NOT_FOUND");
        want = strdup_printf("output file not found: \"nope.txt\" for task %s", id);
        ck_assert_str_eq(message_of(e), want);
        free(want);
        json_object_put(e);
        static const char *const escapes[] = {"../../tasks.json", "/etc/passwd", "subdir/../../x", ".."};
        for (size_t i = 0; i < ELEMENTSOF(escapes); i++) {
                e = tf_rpcf(w, "task.output", "{\"taskId\":\"%s\",\"path\":\"%s\"}", id, escapes[i]);
                want = strdup_printf("--path \"%s\" escapes the task's output directory", escapes[i]);
                ck_assert_msg(streq(code_of(e), "REQUEST_FAILED") && streq(message_of(e), want), "%s: %s", escapes[i],
                              json_to_line(e, NULL));
                ck_assert_str_eq(help_of(e), "pass a relative path like \"deliverable.txt\" or \"subdir/notes.md\"");
                free(want);
                json_object_put(e);
        }
        const char *esc_cli[] = {"output", id, "--path", "../../tasks.json", NULL};
        c = cli(w, NULL, true, esc_cli);
        ck_assert_msg(c.rc == 1 && strstr(c.text, "escapes the task's output directory"), "%s", c.text);
        cli_out_done(&c);

        /* NO_OUTPUT_DIR: a record from before output dirs (outputDir null) */
        tf_daemon_stop(w, SIGTERM);
        free(tf_shf(w, NULL,
                    "python3 -c 'import json,sys; p=sys.argv[1]; t=json.load(open(p)); "
                    "[r.__setitem__(\"outputDir\", None) for r in t if r[\"id\"]==sys.argv[2]]; "
                    "json.dump(t, open(p,\"w\"), indent=2)' %s/tasks.json %s",
                    w->state, em));
        c = output_of(w, em, NULL, NULL); /* auto-starts */
        want = strdup_printf("{\"taskId\":\"%s\",\"outputDir\":null,\"files\":[],\"bytes\":0,\"total\":0,\"truncated\":false}", em);
        ck_assert_str_eq(json_to_line(c.o, NULL), want);
        free(want);
        cli_out_done(&c);
        e = tf_rpcf(w, "task.output", "{\"taskId\":\"%s\",\"path\":\"a.txt\"}", em);
        ck_assert_str_eq(code_of(e), "NO_OUTPUT_DIR");
        json_object_put(e);
        free(id), free(dir), free(cr), free(ca), free(em);
}
END_TEST

/* O4 hostile content, O5 the wire budget */
TF_WORLD_TEST(output_dir_hostile_content_and_budget) {
        char *id = tf_dispatch_shell(w, w->repo_parent, NULL, "true");
        assert_settles(w, id, "done");
        char *dir = outdir(w, id);
        char *secret = strdup(tf_path(w->root, "secret.txt"));
        tf_write(secret, "outside", 7, 0600);
        free(tf_shf(w, dir,
                    "set -e; echo in > inside.txt; mkdir -p node_modules/pkg .git sub; echo x > node_modules/pkg/i.js; "
                    "echo x > .git/HEAD; ln -s . self; ln -s .. up; ln -s %s link-out; ln -s inside.txt link-in; "
                    "ln -s ../../tasks.json state-link; ln -s /nonexistent dangling; mkfifo fifo; "
                    "ln -s %s sub/dir-out; head -c 614400 /dev/zero | tr '\\000' b > big.bin",
                    secret, w->root));
        cli_out c = output_of(w, id, NULL, NULL);
        ck_assert_int_eq(c.rc, 0);
        char *p = listing_paths(c.o);
        ck_assert_str_eq(p, "big.bin=614400|inside.txt=3|link-in=3|");
        free(p);
        ck_assert(!json_get_bool(c.o, "truncated", true));
        cli_out_done(&c);
        static const char *const out[] = {"link-out", "state-link", "up/tasks.json", "sub/dir-out/secret.txt",
                                          "self/../../tasks.json"};
        for (size_t i = 0; i < ELEMENTSOF(out); i++) {
                json_object *e = tf_rpcf(w, "task.output", "{\"taskId\":\"%s\",\"path\":\"%s\"}", id, out[i]);
                ck_assert_msg(strstr(message_of(e), "escapes the task's output directory"), "%s: %s", out[i],
                              json_to_line(e, NULL));
                json_object_put(e);
        }
        c = output_of(w, id, "link-in", NULL);
        ck_assert_str_eq(tf_jstr(json_get_object(c.o, "file"), "content"), "in\n");
        cli_out_done(&c);
        /* a FIFO does not hang the daemon */
        uint64_t t0 = mono_ms();
        c = output_of(w, id, "fifo", NULL);
        ck_assert_str_eq(json_to_line(json_get_object(c.o, "file"), NULL),
                         "{\"content\":null,\"size\":0,\"truncated\":false,\"error\":\"not_a_file\"}");
        ck_assert_uint_lt(mono_ms() - t0, 10000);
        cli_out_done(&c);
        c = output_of(w, id, "big.bin", NULL);
        ck_assert_str_eq(json_to_line(json_get_object(c.o, "file"), NULL),
                         "{\"content\":null,\"size\":614400,\"truncated\":true,\"error\":\"too_large\"}");
        cli_out_done(&c);
        c = output_of(w, id, "big.bin", "1048576");
        ck_assert_int_eq(content_len(c.o),
                         614400);
        cli_out_done(&c);

        /* O5: 300 KiB of \x01 fits the read cap but not the wire */
        free(tf_shf(w, dir, "head -c 307200 /dev/zero | tr '\\000' '\\001' > heavy.bin; head -c 307200 /dev/zero | "
                             "tr '\\000' a > ascii.txt"));
        const char *hv[] = {"output", id, "--path", "heavy.bin", "--max-output-file-bytes", "524288", NULL};
        c = cli(w, NULL, true, hv);
        ck_assert_msg(c.rc == 1 && strstr(c.text, "would exceed daemon response limit") &&
                              strstr(c.text, "--max-output-file-bytes") && strstr(c.text, "174080") &&
                              !strstr(c.text, "daemon response for this request exceeds"),
                      "%s", c.text);
        cli_out_done(&c);
        c = output_of(w, id, "ascii.txt", "524288");
        ck_assert_int_eq(c.rc, 0);
        ck_assert_int_eq(content_len(c.o),
                         307200);
        cli_out_done(&c);
        c = output_of(w, id, "heavy.bin", "174080");
        ck_assert_str_eq(strempty(tf_jstr(json_get_object(c.o, "file"), "error")), "too_large");
        cli_out_done(&c);
        const char *over[] = {"output", id, "--path", "ascii.txt", "--max-output-file-bytes", "1048577", NULL};
        c = cli(w, NULL, true, over);
        ck_assert_msg(c.rc == 1 && strstr(c.text, "exceeds daemon response limit") && strstr(c.text, "--max-output-file-bytes"),
                      "%s", c.text);
        cli_out_done(&c);

        /* a listing of control-character names is cut to fit, never RESPONSE_TOO_LARGE */
        char *id2 = tf_dispatch_shell(w, w->repo_parent, NULL, "true");
        assert_settles(w, id2, "done");
        char *dir2 = outdir(w, id2);
        int fd = open(dir2, O_RDONLY | O_DIRECTORY);
        ck_assert_int_ge(fd, 0);
        char name[256];
        memset(name, '\x01', 255);
        name[255] = 0;
        for (int depth = 0; depth < 30; depth++) {
                ck_assert_int_eq(mkdirat(fd, name, 0700), 0);
                int sub = openat(fd, name, O_RDONLY | O_DIRECTORY);
                ck_assert_int_ge(sub, 0);
                close(fd);
                fd = sub;
        }
        for (int i = 0; i < 200; i++) {
                snprintf(name + 240, 15, "%d", i);
                int f = openat(fd, name, O_WRONLY | O_CREAT, 0600);
                ck_assert_int_ge(f, 0);
                close(f);
        }
        close(fd);
        c = output_of(w, id2, NULL, NULL);
        ck_assert_msg(c.rc == 0, "%.300s", c.text);
        size_t shipped = json_object_array_length(json_get_array(c.o, "files"));
        ck_assert_msg(shipped > 0 && shipped < 200, "%zu", shipped);
        ck_assert(json_get_bool(c.o, "truncated", false));
        int64_t total = -1;
        json_get_int64(c.o, "total", &total);
        ck_assert_int_eq(total, (int64_t) shipped);
        cli_out_done(&c);
        free(tf_shf(w, NULL, "rm -rf %s", dir2));

        /* caps: 256 entries */
        free(tf_shf(w, dir, "mkdir many && cd many && for i in $(seq 300); do : > f$i; done"));
        c = output_of(w, id, NULL, NULL);
        ck_assert_int_eq(json_object_array_length(json_get_array(c.o, "files")), 256);
        ck_assert(json_get_bool(c.o, "truncated", false));
        cli_out_done(&c);
        free(id), free(dir), free(secret), free(id2), free(dir2);
}
END_TEST

TF_WORLD_TEST(max_output_file_bytes_setting) {
        /* > 1 MiB: the daemon refuses to start */
        char *script = strdup_printf("TASKFERRY_MAX_OUTPUT_FILE_BYTES=1048577 timeout 20 %s", tf_bin("taskferryd"));
        tf_run r = tf_sh(w, NULL, script, true);
        ck_assert_msg(r.exit_code != 0 && r.exit_code != 124 && strstr(r.err, "TASKFERRY_MAX_OUTPUT_FILE_BYTES") &&
                              strstr(r.err, "must not exceed 1048576"),
                      "%d %s", r.exit_code, r.err);
        tf_run_done(&r);
        free(script);
        /* a smaller one is the default cap */
        tf_world_setenv(w, "TASKFERRY_MAX_OUTPUT_FILE_BYTES", "4");
        char *id = tf_dispatch_shell(w, w->repo_parent, NULL, "printf 12345 > \"$TASKFERRY_OUTPUT_DIR/five\"; printf 1234 > \"$TASKFERRY_OUTPUT_DIR/four\"");
        assert_settles(w, id, "done");
        cli_out c = output_of(w, id, "five", NULL);
        ck_assert_str_eq(strempty(tf_jstr(json_get_object(c.o, "file"), "error")), "too_large");
        cli_out_done(&c);
        c = output_of(w, id, "four", NULL);
        ck_assert_str_eq(strempty(tf_jstr(json_get_object(c.o, "file"), "content")), "1234");
        cli_out_done(&c);
        c = output_of(w, id, "five", "5");
        ck_assert_str_eq(strempty(tf_jstr(json_get_object(c.o, "file"), "content")), "12345");
        cli_out_done(&c);
        free(id);
}
END_TEST

/* ---- a hostile worker through its own task socket ---- */

TF_WORLD_TEST(worker_reads_only_its_own) {
        char *a = tf_dispatch_shell(w, w->repo_parent, NULL, "echo topsecret > \"$TASKFERRY_OUTPUT_DIR/s.txt\"; echo a-secret-narration");
        assert_settles(w, a, "done");
        /* a raw frame with a NUL in the path, sent on the worker's own socket */
        char *py = strdup(tf_path(w->fixtures, "nul-path.py"));
        const char *pysrc =
                "import os, socket\n"
                "s = socket.socket(socket.AF_UNIX); s.connect(os.environ['TASKFERRY_SOCKET_PATH'])\n"
                "tid = os.environ['TASKFERRY_TASK_ID']\n"
                "s.sendall(('{\"version\":1,\"id\":\"n\",\"method\":\"task.output\",\"params\":{\"taskId\":\"%s\","
                "\"path\":\"s.txt\\\\u0000x\"}}\\n' % tid).encode())\n"
                "print(s.makefile().readline().strip())\n";
        tf_write(py, pysrc, strlen(pysrc), 0644);
        char *script = strdup_printf(
                "O=$TASKFERRY_OUTPUT_DIR; A=%s; me=$TASKFERRY_TASK_ID\n"
                "taskferry tail $A --json > $O/tail-a; echo $? >> $O/tail-a\n"
                "taskferry output $A --json > $O/out-a; echo $? >> $O/out-a\n"
                "taskferry output $A --path s.txt --json > $O/read-a; echo $? >> $O/read-a\n"
                "taskferry context --directory %s --json > $O/context\n"
                "taskferry doctor --stats --json > $O/stats\n"
                "taskferry output $me --path ../$A/s.txt --json > $O/dotdot; echo $? >> $O/dotdot\n"
                "taskferry output $me --path ../../tasks.json --json > $O/state; echo $? >> $O/state\n"
                "ln -s ../$A/s.txt $O/l-a; taskferry output $me --path l-a --json > $O/link-a\n"
                "mkdir $O/d; ln -s ../../$A $O/d/x; taskferry output $me --path d/x/s.txt --json > $O/parent-a\n"
                "mkfifo $O/fifo; taskferry output $me --path fifo --json > $O/fifo.out\n"
                "head -c 2000000 /dev/zero > $O/huge; taskferry output $me --path huge --json > $O/huge.out\n"
                "taskferry output $me --path huge --max-output-file-bytes 2000000 --json > $O/huge-max; echo $? >> $O/huge-max\n"
                "p=$(head -c 70000 /dev/zero | tr '\\000' a); taskferry output $me --path \"$p\" --json > $O/long; echo $? >> $O/long\n"
                "python3 %s > $O/nul\n"
                "taskferry output $me --json > $O/own; taskferry tail $me --json > $O/own-tail\n"
                "echo worker-done\n",
                a, w->repo_parent, py);
        char *b = tf_dispatch_shell(w, w->repo_parent, NULL, script);
        assert_settles(w, b, "done");
        char *m = tf_task_message(w, b);
        ck_assert_msg(strstr(m, "worker-done"), "%s", m);
        free(m);
        /* another task is as if it did not exist */
        static const char *const unknown[] = {"tail-a", "out-a", "read-a"};
        for (size_t i = 0; i < ELEMENTSOF(unknown); i++) {
                char *t = tf_output_read(w, b, unknown[i]);
                ck_assert_msg(strstr(t, "unknown task id") && !strstr(t, "topsecret") && !strstr(t, "a-secret-narration") &&
                                      strstr(t, "\n1\n"),
                              "%s: %s", unknown[i], t);
                free(t);
        }
        char *t = tf_output_read(w, b, "context");
        json_object *ctx = tf_json(t);
        json_object *rows = json_get_array(ctx, "tasks");
        ck_assert_msg(rows && json_object_array_length(rows) == 1 &&
                              streq_ptr(json_get_string(json_object_array_get_idx(rows, 0), "id"), b),
                      "%s", t);
        free(t);
        json_object_put(ctx);
        t = tf_output_read(w, b, "stats");
        json_object *stats = tf_json(t);
        json_object *row = json_object_array_get_idx(json_get_array(stats, "byModel"), 0);
        int64_t n = 0;
        json_get_int64(row, "dispatches", &n);
        ck_assert_msg(json_object_array_length(json_get_array(stats, "byModel")) == 1 && n == 1, "%s", t);
        free(t);
        json_object_put(stats);
        /* every path out is refused, by the kernel at the open */
        static const char *const esc[] = {"dotdot", "state", "link-a", "parent-a"};
        for (size_t i = 0; i < ELEMENTSOF(esc); i++) {
                t = tf_output_read(w, b, esc[i]);
                ck_assert_msg(strstr(t, "escapes the task's output directory") && !strstr(t, "topsecret") &&
                                      !strstr(t, "\"id\""),
                              "%s: %s", esc[i], t);
                free(t);
        }
        /* the rest: each answer as the worker wrote it down; "own": what it
         * may read, its own */
        static const struct {
                const char *file, *has, *also, *never; /* also, never: NULL for none */
        } answers[] = {
                {"fifo.out", "\"error\":\"not_a_file\"", NULL, NULL},
                {"huge.out", "\"content\":null,\"size\":2000000,\"truncated\":true,\"error\":\"too_large\"", NULL, NULL},
                {"huge-max", "exceeds daemon response limit", "\n1\n", NULL},
                {"long", "\n1\n", NULL, "\"content\""},
                {"nul", "\"code\":\"INVALID_PARAMS\"", NULL, NULL},
                {"own", "\"path\":\"fifo.out\"", NULL, NULL},
        };
        for (size_t i = 0; i < ELEMENTSOF(answers); i++) {
                t = tf_output_read(w, b, answers[i].file);
                ck_assert_msg(strstr(t, answers[i].has) && (!answers[i].also || strstr(t, answers[i].also)) &&
                                      !(answers[i].never && strstr(t, answers[i].never)),
                              "%s: %s", answers[i].file, t);
                free(t);
        }
        ck_assert(tf_daemon_pid(w) > 0);
        free(a), free(b), free(script), free(py);
}
END_TEST

/* The worker swaps a file and a parent dir for links out while the user
 * reads them: every answer is the safe file, an escape or not found. */
TF_WORLD_TEST(symlink_swap_race) {
        char *id = tf_dispatch_shell(w, w->repo_parent, NULL,
                                     "cd \"$TASKFERRY_OUTPUT_DIR\"; mkdir real; echo safe > real/tasks.json; echo safe > f; "
                                     "while [ ! -e go ]; do "
                                     "ln -sfn ../../tasks.json f.l; mv -T f.l f; echo safe > f.s; mv -T f.s f; "
                                     "ln -sfn ../.. d.l; mv -T d.l d; ln -sfn real d.l; mv -T d.l d; "
                                     "done; echo swapped");
        char *dir = outdir(w, id);
        for (int i = 0; i < 600 && !tf_exists(tf_path(dir, "d")); i++) usleep(50000);
        ck_assert(tf_exists(tf_path(dir, "f")));
        int safe = 0, refused = 0;
        for (int i = 0; i < 150; i++) {
                const char *path = (i & 1) ? "d/tasks.json" : "f";
                json_object *e = tf_rpcf(w, "task.output", "{\"taskId\":\"%s\",\"path\":\"%s\"}", id, path);
                const char *code = code_of(e);
                if (streq(code, "ok")) {
                        json_object *file = json_get_object(tf_result(e), "file");
                        const char *content = json_get_string(file, "content");
                        ck_assert_msg(!content || streq(content, "safe\n"), "read through a swapped link: %.200s",
                                      json_to_line(e, NULL));
                        if (content) safe++;
                } else {
                        ck_assert_msg(streq(code, "OUTPUT_NOT_FOUND") || strstr(message_of(e), "escapes"), "%s",
                                      json_to_line(e, NULL));
                        refused++;
                }
                json_object_put(e);
        }
        tf_go(w, id);
        assert_settles(w, id, "done");
        ck_assert_int_gt(safe, 0);
        fprintf(stderr, "swap race: %d safe reads, %d refused\n", safe, refused);
        free(id), free(dir);
}
END_TEST

/* ---- context, doctor, init (L) ---- */

TF_WORLD_TEST(context_lists_the_workspace) {
        char *repo = tf_repo_new(w, NULL, "printf 'one\\n' > a.txt");
        char *other = strdup(tf_path(w->repo_parent, "other"));
        char *empty = strdup(tf_path(w->repo_parent, "empty"));
        free(tf_shf(w, NULL, "mkdir -p %s/sub %s %s", repo, other, empty));
        char *t1 = tf_dispatch_shell(w, repo, NULL, "echo one");
        char *t2 = tf_dispatch_shell(w, tf_path(repo, "sub"), NULL, "echo two; exit 4");
        char *t3 = tf_dispatch_shell(w, other, NULL, "echo three");
        assert_settles(w, t1, "done");
        assert_settles(w, t2, "crashed");
        assert_settles(w, t3, "done");
        json_object *f = tf_rpcf(w, "task.context", "{\"directory\":\"%s/sub/..\"}", repo);
        json_object *r = tf_result(f);
        ck_assert_str_eq(tf_jstr(r, "directory"), repo);
        json_object *rows = json_get_array(r, "tasks");
        ck_assert_int_eq(json_object_array_length(rows), 2);
        for (size_t i = 0; i < 2; i++) {
                json_object *row = json_object_array_get_idx(rows, i);
                int64_t b = -1;
                ck_assert(json_get_int64(row, "logBytesWritten", &b) && b > 0);
                ck_assert(json_get_bool(row, "logHasEvent", false));
                ck_assert(!streq(tf_jstr(row, "id"), t3));
                json_object *od = NULL;
                ck_assert(json_object_object_get_ex(row, "promptPreview", &od)); /* full status objects */
        }
        ck_assert_str_eq(json_to_line(json_get_object(r, "counts"), NULL),
                         "{\"queued\":0,\"running\":0,\"done\":1,\"crashed\":1,\"cancelled\":0,\"unknown\":0}");
        json_object_put(f);
        f = tf_rpcf(w, "task.context", "{\"directory\":\"%s\"}", empty);
        ck_assert_str_eq(json_to_line(json_get_array(tf_result(f), "tasks"), NULL), "[]");
        json_object_put(f);
        f = tf_rpcf(w, "task.context", "{\"directory\":\"%s/missing\"}", empty);
        ck_assert_str_eq(code_of(f), "REQUEST_FAILED");
        json_object_put(f);

        /* CLI: projectContext, in the workspace of the cwd */
        const char *ctx[] = {"context", NULL};
        cli_out c = cli(w, tf_path(repo, "sub"), true, ctx);
        ck_assert_int_eq(c.rc, 0);
        char *head = strdup_printf("directory: %s\ncounts:\n", repo);
        ck_assert_msg(startswith(c.text, head) && strstr(c.text, "tasks[2]") && strstr(c.text, t1) &&
                              !strstr(c.text, t3) && !strstr(c.text, "logPath"),
                      "%s", c.text);
        free(head);
        cli_out_done(&c);
        const char *hook[] = {"context", "--format", "claude-hook", NULL};
        c = cli(w, repo, true, hook);
        ck_assert_msg(startswith(c.text, "hookSpecificOutput:\n  hookEventName: SessionStart\n  additionalContext: \"directory: ") &&
                              strstr(c.text, t1),
                      "%s", c.text);
        cli_out_done(&c);
        const char *codex[] = {"context", "--format", "codex-hook", NULL};
        c = cli(w, repo, true, codex);
        ck_assert_msg(startswith(c.text, "additionalContext: \"directory: "), "%s", c.text);
        cli_out_done(&c);
        const char *ctxe[] = {"context", "--directory", empty, NULL};
        c = cli(w, NULL, true, ctxe);
        ck_assert_msg(strstr(c.text, "tasks: none found in this workspace"), "%s", c.text);
        cli_out_done(&c);
        /* 12 tasks: the CLI shows 10 and says how to see all */
        for (int i = 0; i < 10; i++) {
                char *x = tf_dispatch_shell(w, repo, NULL, "true");
                assert_settles(w, x, "done");
                free(x);
        }
        c = cli(w, repo, true, ctx);
        ck_assert_msg(strstr(c.text, "tasks[10]") && strstr(c.text, "Run taskferry list --limit 12 for all 12 tasks"), "%s",
                      c.text);
        cli_out_done(&c);
        free(repo), free(other), free(empty), free(t1), free(t2), free(t3);
}
END_TEST

/* A daemon of the original's older versions: no task.stats. */
static pid_t fake_old_daemon(const char *socket_path, const char *list_result) {
        int lfd = tf_listen_unix(socket_path);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid > 0) {
                close(lfd);
                return pid;
        }
        alarm(120);
        for (;;) {
                int c = accept(lfd, NULL, NULL);
                if (c < 0) continue;
                FILE *in = fdopen(c, "r+");
                char *line = NULL;
                size_t cap = 0;
                while (getline(&line, &cap, in) > 0) {
                        json_object *req = NULL;
                        if (json_parse_strict(line, strlen(line), &req) < 0) break;
                        const char *id = json_get_string(req, "id"), *method = json_get_string(req, "method");
                        char *reply;
                        if (streq_ptr(method, "task.stats"))
                                reply = strdup_printf("{\"version\":1,\"ok\":false,\"error\":{\"code\":\"UNKNOWN_METHOD\","
                                                      "\"message\":\"unknown method: task.stats\",\"help\":\"Use one of: x\","
                                                      "\"detail\":\"unknown method: task.stats\"},\"id\":\"%s\"}",
                                                      id);
                        else if (streq_ptr(method, "task.list"))
                                reply = strdup_printf("{\"version\":1,\"ok\":true,\"id\":\"%s\",\"result\":%s}", id, list_result);
                        else
                                reply = strdup_printf("{\"version\":1,\"ok\":true,\"id\":\"%s\",\"result\":{\"healthy\":true,"
                                                      "\"pid\":%d,\"version\":1}}",
                                                      id, (int) getpid());
                        fprintf(in, "%s\n", reply);
                        fflush(in);
                        free(reply);
                        json_object_put(req);
                }
                free(line);
                fclose(in);
        }
}

TF_WORLD_TEST(doctor_and_stats) {
        char *ids[4];
        for (int i = 0; i < 4; i++) {
                ids[i] = tf_dispatch_shell(w, w->repo_parent, NULL, i == 3 ? "exit 5" : "echo ok");
                assert_settles(w, ids[i], i == 3 ? "crashed" : "done");
        }
        const char *sj[] = {"doctor", "--stats", NULL};
        cli_out c = cli(w, NULL, false, sj);
        ck_assert_int_eq(c.rc, 0);
        json_object *row = json_object_array_get_idx(json_get_array(c.o, "byModel"), 0);
        int64_t n = 0;
        json_get_int64(row, "dispatches", &n);
        ck_assert_int_eq(n, 4);
        json_object *v = NULL;
        ck_assert(json_object_object_get_ex(row, "doneRate", &v) && json_object_get_double(v) == 0.75);
        ck_assert_str_eq(tf_jstr(json_get_object(c.o, "trend"), "direction"), "unknown");
        json_object *mix = json_get_object(json_get_object(c.o, "statusMix"), "last24h");
        json_get_int64(mix, "total", &n);
        ck_assert_int_eq(n, 4);
        cli_out_done(&c);
        c = cli(w, NULL, true, sj);
        ck_assert_msg(strstr(c.text, ",4,3,1,0,0,75.0%,25.0%,") && strstr(c.text, "  current:\n    crashRate: 25.0%\n"),
                      "%s", c.text);
        cli_out_done(&c);
        const char *sf[] = {"doctor", "--stats", "--full", NULL};
        c = cli(w, NULL, true, sf);
        ck_assert_msg(c.rc == 2 && strstr(c.text, "--stats cannot be combined with --full"), "%s", c.text);
        cli_out_done(&c);
        /* doctor, doctor --full */
        const char *dj[] = {"doctor", NULL};
        c = cli(w, NULL, false, dj);
        ck_assert_int_eq(c.rc, 0);
        ck_assert(json_get_bool(c.o, "healthy", false));
        ck_assert_ptr_null(json_get_string(c.o, "cliVersion"));
        json_object *integ = json_get_object(c.o, "integrations");
        ck_assert_str_eq(json_to_line(json_get_object(integ, "claude"), NULL),
                         "{\"installed\":false,\"reason\":\"claude CLI not found\"}");
        ck_assert_str_eq(json_to_line(json_get_object(json_get_object(integ, "playwrightMcpIsolation"), "opencode"), NULL),
                         "{\"checked\":false,\"reason\":\"no opencode config with a playwright MCP entry found\"}");
        ck_assert_str_eq(json_to_line(json_get_object(json_get_object(integ, "playwrightMcpIsolation"), "claudeCode"), NULL),
                         "{\"checked\":false,\"reason\":\"~/.claude.json not found\"}");
        cli_out_done(&c);
        const char *df[] = {"doctor", "--full", NULL};
        c = cli(w, NULL, false, df);
        ck_assert_str_eq(strempty(json_get_string(c.o, "cliVersion")), "2.0.0");
        ck_assert(json_get_int64(c.o, "protocolVersion", &n) && n == 1);
        cli_out_done(&c);
        /* an opencode config whose Playwright MCP is not isolated */
        free(tf_shf(w, NULL, "mkdir -p %s/opencode && printf '%%s' '{ // comment\n \"mcp\": {\"playwright\": {\"command\": "
                             "[\"npx\", \"@playwright/mcp\"]}}}' > %s/opencode/opencode.jsonc",
                    w->cfg, w->cfg));
        c = cli(w, NULL, false, dj);
        char *want = strdup_printf("{\"checked\":true,\"path\":\"%s/opencode/opencode.jsonc\",\"isolated\":false}", w->cfg);
        ck_assert_str_eq(json_to_line(json_get_object(json_get_object(json_get_object(c.o, "integrations"),
                                                                      "playwrightMcpIsolation"),
                                                      "opencode"),
                                      NULL),
                         want);
        free(want);
        ck_assert(json_get_array(c.o, "warnings") != NULL);
        cli_out_done(&c);

        /* doctor --stats against a daemon without task.stats: task.list aggregated here */
        tf_world *old = tf_world_new(NULL);
        ck_assert_int_eq(mkdir(old->run, 0700), 0);
        char iso[32];
        format_iso(now_ms() - 3600 * 1000, iso);
        char *list = strdup_printf(
                "{\"counts\":{\"queued\":0,\"running\":0,\"done\":1,\"crashed\":2,\"cancelled\":0,\"unknown\":0},\"tasks\":["
                "{\"id\":\"oc_a_1\",\"status\":\"crashed\",\"model\":\"p/m\",\"startedAt\":\"%s\",\"directory\":\"/w\",\"failureReason\":\"rate_limited\"},"
                "{\"id\":\"oc_a_2\",\"status\":\"crashed\",\"model\":\"p/m\",\"startedAt\":\"%s\",\"directory\":\"/w\",\"failureReason\":\"rate_limited\"},"
                "{\"id\":\"oc_a_3\",\"status\":\"done\",\"model\":\"p/m\",\"startedAt\":\"%s\",\"directory\":\"/w\",\"failureReason\":null}]}",
                iso, iso, iso);
        pid_t fake = fake_old_daemon(old->socket, list);
        c = cli(old, NULL, true, sj);
        ck_assert_msg(c.rc == 0 && strstr(c.text, "  p/m,3,1,2,0,0,33.3%,66.7%,rate_limited\n") &&
                              strstr(c.text, "failureReasons[1]{reason,count}:\n  rate_limited,2\n") &&
                              strstr(c.text, "    crashRate: 66.7%\n"),
                      "%s", c.text);
        cli_out_done(&c);
        kill(fake, SIGKILL);
        waitpid(fake, NULL, 0);
        free(list);
        tf_world_free(old);
        for (int i = 0; i < 4; i++) free(ids[i]);
}
END_TEST

TF_WORLD_TEST(init_scaffolds_once) {
        char *go = strdup(tf_path(w->repo_parent, "goproj"));
        free(tf_shf(w, NULL, "mkdir -p %s && echo 'module x' > %s/go.mod", go, go));
        const char *init[] = {"init", NULL};
        cli_out c = cli(w, go, true, init);
        char *path = strdup_printf("%s/.taskferry.toml", go);
        char *head = strdup_printf("Detected check command: go vet ./... && go test ./...\nNo TTY to confirm -- writing "
                                   ".taskferry.toml with a commented fill-in instead. Edit \"check\" in %s to enable the gate.\n",
                                   path);
        ck_assert_msg(c.rc == 0 && startswith(c.text, head) && strstr(c.text, "written: true\ncheckCommand: null"), "%s",
                      c.text);
        free(head);
        cli_out_done(&c);
        char *text = tf_read(path, NULL);
        ck_assert_msg(strstr(text, "\n# check = \"go vet ./... && go test ./...\"\n") && !strstr(text, "\ncheck ="), "%s", text);
        struct stat st;
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_mode & 0777, 0644);
        /* never overwrites */
        c = cli(w, go, false, init);
        char *want = strdup_printf("{\"path\":\"%s\",\"written\":false,\"checkCommand\":null,\"reason\":\"%s already exists -- "
                                   "taskferry init never overwrites it\"}",
                                   path, path);
        ck_assert_str_eq(json_to_line(c.o, NULL), want);
        free(want);
        cli_out_done(&c);
        char *again = tf_read(path, NULL);
        ck_assert_str_eq(again, text);
        free(again), free(text), free(path);
        /* a symlink there (even dangling) is not followed */
        char *ln = strdup(tf_path(w->repo_parent, "linked"));
        free(tf_shf(w, NULL, "mkdir -p %s && ln -s %s/victim %s/.taskferry.toml", ln, w->root, ln));
        c = cli(w, ln, false, init);
        ck_assert(!json_get_bool(c.o, "written", true));
        cli_out_done(&c);
        ck_assert(!tf_exists(tf_path(w->root, "victim")));
        /* package.json scripts; nothing detected */
        char *npm = strdup(tf_path(w->repo_parent, "npm"));
        free(tf_shf(w, NULL, "mkdir -p %s && echo '{\"scripts\":{\"test\":\"t\",\"lint\":\"l\"}}' > %s/package.json", npm, npm));
        c = cli(w, npm, true, init);
        ck_assert_msg(startswith(c.text, "Detected check command: npm run lint && npm run test\n"), "%s", c.text);
        cli_out_done(&c);
        char *none = strdup(tf_path(w->repo_parent, "none"));
        free(tf_shf(w, NULL, "mkdir -p %s", none));
        c = cli(w, none, false, init);
        path = strdup_printf("%s/.taskferry.toml", none);
        want = strdup_printf("{\"path\":\"%s\",\"written\":true,\"checkCommand\":null}", path);
        ck_assert_str_eq(json_to_line(c.o, NULL), want);
        cli_out_done(&c);
        text = tf_read(path, NULL);
        ck_assert_msg(strstr(text, "# check = \"npm run check\"  -- fill this in"), "%s", text);
        /* on a TTY it asks; "n" writes the fill-in, anything else the command */
        char *tty = strdup(tf_path(w->repo_parent, "tty"));
        char *tty2 = strdup(tf_path(w->repo_parent, "tty2"));
        free(tf_shf(w, NULL, "mkdir -p %s %s && touch %s/Cargo.toml %s/Cargo.toml", tty, tty2, tty, tty2));
        char *cmd = strdup_printf("printf 'y\\n' | script -qec '%s init' /dev/null", tf_bin("taskferry"));
        tf_run tr = tf_sh(w, tty, cmd, true);
        free(cmd);
        ck_assert_msg(strstr(tr.out, "Detected check command: cargo clippy -- -D warnings && cargo test\r\n"
                                     "Write .taskferry.toml with this command? [Y/n] ") &&
                              strstr(tr.out, "checkCommand: cargo clippy"),
                      "%s", tr.out);
        tf_run_done(&tr);
        char *ttext = tf_read(tf_path(tty, ".taskferry.toml"), NULL);
        ck_assert_msg(strstr(ttext, "\ncheck = \"cargo clippy -- -D warnings && cargo test\"\n"), "%s", ttext);
        free(ttext);
        cmd = strdup_printf("printf 'no\\n' | script -qec '%s init' /dev/null", tf_bin("taskferry"));
        tr = tf_sh(w, tty2, cmd, true);
        free(cmd);
        ck_assert_msg(strstr(tr.out, "checkCommand: null"), "%s", tr.out);
        tf_run_done(&tr);
        ttext = tf_read(tf_path(tty2, ".taskferry.toml"), NULL);
        ck_assert_msg(strstr(ttext, "# check = \"npm run check\"  -- fill this in"), "%s", ttext);
        free(ttext), free(tty), free(tty2);
        /* init needs no daemon */
        ck_assert_int_lt(tf_daemon_pid(w), 0);
        free(text), free(path), free(want), free(go), free(ln), free(npm), free(none);
}
END_TEST

int main(void) {
        return tf_run_tests("views", "views", 600,
                            TF_TESTS(results_and_tail_of_worker_streams, running_projections_and_log_activity,
                                     output_dir_allocation_and_listing, output_dir_hostile_content_and_budget,
                                     max_output_file_bytes_setting, worker_reads_only_its_own, symlink_swap_race,
                                     context_lists_the_workspace, doctor_and_stats, init_scaffolds_once));
}
