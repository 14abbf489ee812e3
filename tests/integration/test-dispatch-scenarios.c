/* Dispatch scenarios (D1, D2, D4, D5, D11,
 * D13, D14) through the real CLI and daemon, with the fake `pi`/`opencode`
 * of tests/fixtures/bin recording their argv (FAKE_ARGV_FILE). Expectations
 * are the executors' rules (argv, prompt augmentation, large prompts,
 * variants). The sandbox is disabled where it is not the point, so the
 * suite stays fast; D13's "inside the sandbox" wording runs one sandboxed
 * dispatch.
 *
 * Where this project deliberately departs from the spec, the tests follow
 * the project: a prompt never travels in argv (common rule: secrets never
 * go to argv), so every worker gets it attached (unsandboxed: the 0600
 * state/prompts/<id>.prompt.txt; sandboxed: a memfd) with the fixed
 * instruction sentence, whatever its size; pi's "highest" is --thinking
 * xhigh; a missing --model is a usage error, exit 2, and a bad final marker
 * "is not a valid regular expression". */

#include <check.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

static char *const nosandbox_env[] = {"TASKFERRY_DISABLE_SANDBOX=1", NULL};
static const char *const sentence = "Follow the instructions in the attached prompt file exactly.";

/* What the fake worker runs first: copy the attached prompt file (opencode
 * `-f F`, pi `@F`) and its mode into the record dir. */
static char *prompt_probe(const char *rec) {
        return strdup_printf("f=$(grep -A1 -x -- -f \"$FAKE_ARGV_FILE\" | tail -n1); "
                             "case \"$f\" in /*) ;; *) f=$(grep '^@/' \"$FAKE_ARGV_FILE\" | tail -n1 | cut -c2-);; esac; "
                             "stat -c %%a \"$f\" > %s/mode.txt; cat \"$f\" > %s/prompt.txt",
                             rec, rec);
}

typedef struct world {
        tf_world *w;
        char *repo, *rec, *argv_file;
} world;

static world world_new(char *const env[]) {
        world x = {.w = tf_world_new(env)};
        x.repo = tf_repo_new(x.w, NULL, "echo one > f");
        /* a dir the worker may write even when sandboxed (a daemon-wide --rw-bind) */
        x.rec = tf_record_dir(x.w, &x.argv_file);
        char *probe = prompt_probe(x.rec);
        tf_world_setenv(x.w, "FAKE_SCRIPT", probe);
        free(probe);
        return x;
}

static void world_free(world *x) {
        tf_world_free(x->w);
        free(x->repo), free(x->rec), free(x->argv_file);
}

/* `dispatch --json` with argv; returns the parsed reply (asserts exit 0). */
static json_object *dispatch(world *x, const char *const extra[]) {
        const char *argv[64] = {"dispatch", "--json", "--directory", x->repo};
        size_t n = 4;
        for (size_t i = 0; extra[i] && n < 62; i++) argv[n++] = extra[i];
        argv[n] = NULL;
        tf_run r = tf_cli(x->w, NULL, NULL, argv);
        ck_assert_msg(r.exit_code == 0, "dispatch failed (%d): %s %s", r.exit_code, r.out, r.err);
        json_object *o = tf_json(r.out);
        tf_run_done(&r);
        return o;
}

/* Dispatch, wait until settled, return the recorded argv file's text. */
static char *run_recorded(world *x, const char *const extra[], char **ret_id) {
        tf_write(x->argv_file, "", 0, 0666);
        json_object *o = dispatch(x, extra);
        char *id = strdup(tf_jstr(o, "id"));
        json_object_put(o);
        json_object_put(tf_wait_settled(x->w, id));
        char *text = tf_read(x->argv_file, NULL);
        if (ret_id) *ret_id = id;
        else free(id);
        return text;
}

static char *output_dir(world *x, const char *id) { return strdup_printf("%s/outputs/%s", x->w->state, id); }
static char *prompt_file(world *x, const char *id) { return strdup_printf("%s/prompts/%s.prompt.txt", x->w->state, id); }
/* the prompt the worker read, as recorded by prompt_probe */
static char *worker_prompt(world *x) { return tf_read(tf_path(x->rec, "prompt.txt"), NULL); }

static void assert_eq_text(const char *got, const char *want) {
        ck_assert_msg(streq(got, want), "got\n---\n%s\n---\nwant\n---\n%s\n---", got, want);
}

/* argv of an unsandboxed opencode worker: middle = the flags after -m M */
static void assert_opencode_argv(world *x, const char *id, const char *model, const char *middle) {
        char *text = tf_read(x->argv_file, NULL), *file = prompt_file(x, id);
        char *want = strdup_printf("opencode\nrun\n--dir\n%s\n--auto\n--format\njson\n-m\n%s\n%s-f\n%s\n--\n%s\n",
                                   x->repo, model, middle, file, sentence);
        assert_eq_text(text, want);
        free(text), free(file), free(want);
}

/* argv of an unsandboxed pi worker: head = the flags before -p */
static void assert_pi_argv(world *x, const char *id, const char *head) {
        char *text = tf_read(x->argv_file, NULL), *file = prompt_file(x, id);
        char *want = strdup_printf("pi\n%s-p\n%s\n@%s\n", head, sentence, file);
        assert_eq_text(text, want);
        free(text), free(file), free(want);
}

static void assert_prompt_starts(world *x, const char *user_prompt) {
        char *got = worker_prompt(x);
        char *want = strdup_printf("%s\n\n## Persistent output dir\n", user_prompt);
        ck_assert_msg(strncmp(got, want, strlen(want)) == 0, "worker prompt\n---\n%s\n---", got);
        free(got), free(want);
}


/* D1: opencode argv, model passed whole, --variant verbatim; a session id
 * puts --continue --session after -m; cwd is the directory and the worker
 * leads its own process group; the reply says running and next, status
 * has the pid while it runs. */
START_TEST(d1_opencode_argv_and_process) {
        world x = world_new(nosandbox_env);
        char *proc = strdup(tf_path(x.rec, "proc.txt"));
        char *probe = prompt_probe(x.rec);
        char *script = strdup_printf("%s; echo \"$PPID $(awk '{print $5}' /proc/$PPID/stat) $(pwd -P)\" > %s.tmp; "
                                     "mv %s.tmp %s; sleep 2",
                                     probe, proc, proc, proc);
        tf_world_setenv(x.w, "FAKE_SCRIPT", script);
        const char *a[] = {"--executor", "opencode", "--model", "opencode-go/minimax-m3", "--variant", "max",
                           "--prompt", "Fix the bug", NULL};
        json_object *o = dispatch(&x, a);
        ck_assert_str_eq(tf_jstr(o, "status"), "running");
        ck_assert_msg(strstr(strempty(tf_jstr(o, "next")), "taskferry wait or taskferry status"), "%s",
                      json_to_line(o, NULL));
        char *id = strdup(tf_jstr(o, "id"));
        json_object_put(o);
        for (int i = 0; i < 500 && !tf_exists(proc); i++) usleep(20000);
        ck_assert_msg(tf_exists(proc), "worker did not start");
        /* the daemon learns the worker's pid from the shim's status pipe,
         * and the worker may run before the daemon has read it: the status
         * has it a moment later, while the worker still runs */
        json_object *st = NULL;
        int64_t pid = 0;
        for (int i = 0; i < 100; i++) {
                json_object_put(st);
                st = tf_status_full(x.w, id);
                if (!streq_ptr(tf_jstr(st, "status"), "running") || (json_get_int64(st, "pid", &pid) && pid > 0)) break;
                usleep(10000);
        }
        ck_assert_str_eq(tf_jstr(st, "status"), "running");
        ck_assert_msg(json_get_int64(st, "pid", &pid) && pid > 0, "%s", json_to_line(st, NULL));
        json_object_put(st);
        json_object_put(tf_wait_settled(x.w, id));

        assert_opencode_argv(&x, id, "opencode-go/minimax-m3", "--variant\nmax\n");
        assert_prompt_starts(&x, "Fix the bug");

        char *p = tf_read(proc, NULL);
        long wpid = 0, pgid = 0;
        char cwd[4096] = "";
        ck_assert_msg(sscanf(p, "%ld %ld %4095s", &wpid, &pgid, cwd) == 3, "proc: %s", p);
        ck_assert_msg(wpid == pgid, "worker pid %ld pgid %ld", wpid, pgid);
        _cleanup_free_ char *real = realpath(x.repo, NULL);
        ck_assert_str_eq(cwd, real);
        free(p), free(id);

        /* resume: --continue --session right after -m */
        tf_world_setenv(x.w, "FAKE_SCRIPT", probe);
        const char *b[] = {"--executor", "opencode", "--model", "opencode-go/minimax-m3", "--variant", "max",
                           "--session-id", "ses_S1", "--prompt", "Go on", NULL};
        char *text = run_recorded(&x, b, &id);
        free(text);
        assert_opencode_argv(&x, id, "opencode-go/minimax-m3", "--continue\n--session\nses_S1\n--variant\nmax\n");
        assert_prompt_starts(&x, "Go on");
        free(id), free(script), free(proc), free(probe);
        world_free(&x);
}
END_TEST

/* D1: pi argv; provider split at the first '/', no --provider without a
 * slash; pi is the default executor. */
START_TEST(d1_pi_argv_and_default_executor) {
        world x = world_new(nosandbox_env);
        char *id = NULL;
        const char *a[] = {"--executor", "pi", "--model", "minimax/MiniMax-M2.7", "--variant", "high", "--prompt",
                           "Fix it", NULL};
        free(run_recorded(&x, a, &id));
        assert_pi_argv(&x, id, "--provider\nminimax\n--model\nMiniMax-M2.7\n--mode\njson\n--thinking\nhigh\n");
        assert_prompt_starts(&x, "Fix it");
        free(id);

        const char *b[] = {"--model", "openrouter/~anthropic/x", "--variant", "low", "--prompt", "P2", NULL};
        free(run_recorded(&x, b, &id));
        assert_pi_argv(&x, id, "--provider\nopenrouter\n--model\n~anthropic/x\n--mode\njson\n--thinking\nlow\n");
        json_object *st = tf_status_full(x.w, id);
        ck_assert_str_eq(strempty(tf_jstr(st, "executorId")), "pi");
        json_object_put(st);
        free(id);

        const char *c[] = {"--model", "MiniMax-M2.7", "--variant", "medium", "--prompt", "P3", NULL};
        free(run_recorded(&x, c, &id));
        assert_pi_argv(&x, id, "--model\nMiniMax-M2.7\n--mode\njson\n--thinking\nmedium\n");
        assert_prompt_starts(&x, "P3");
        free(id);
        world_free(&x);
}
END_TEST

static tf_run cli_dispatch(world *x, const char *const extra[]) {
        const char *argv[64] = {"dispatch", "--json"};
        size_t n = 2;
        for (size_t i = 0; extra[i] && n < 62; i++) argv[n++] = extra[i];
        argv[n] = NULL;
        return tf_cli(x->w, NULL, NULL, argv);
}

/* D2: validation errors, exit codes, and nothing left behind. */
START_TEST(d2_validation) {
        world x = world_new(nosandbox_env);
        tf_daemon_start(x.w);
        const char *outputs = tf_path(x.w->state, "outputs");
        size_t before = tf_count_entries(outputs);

        const char *a[] = {"--directory", x.repo, "--prompt", "p", NULL};
        tf_run r = cli_dispatch(&x, a);
        /* exit 2: a usage error, as for every other bad argument (the original exited 1) */
        ck_assert_msg(r.exit_code == 2, "no model: exit %d %s %s", r.exit_code, r.out, r.err);
        ck_assert_msg(strstr(r.err, "--model is required") || strstr(r.out, "--model is required"), "%s %s", r.out,
                      r.err);
        tf_run_done(&r);
        ck_assert_uint_eq(tf_count_entries(outputs), before);

        const char *missing = tf_path(x.w->root, "no-such-dir");
        char *missing_s = strdup(missing);
        const char *b[] = {"--model", "m/x", "--directory", missing_s, "--prompt", "p", NULL};
        r = cli_dispatch(&x, b);
        char *want = strdup_printf("directory does not exist: %s", missing_s);
        ck_assert_msg(r.exit_code == 2, "missing dir: exit %d %s %s", r.exit_code, r.out, r.err);
        ck_assert_msg(strstr(r.err, want) || strstr(r.out, want), "%s %s", r.out, r.err);
        tf_run_done(&r);
        free(want), free(missing_s);
        ck_assert_uint_eq(tf_count_entries(outputs), before);

        const char *c[] = {"--executor", "bogus", "--model", "m/x", "--directory", x.repo, "--prompt", "p", NULL};
        r = cli_dispatch(&x, c);
        ck_assert_msg(r.exit_code == 2, "bogus executor: exit %d %s %s", r.exit_code, r.out, r.err);
        tf_run_done(&r);

        const char *d[] = {"--require-final-marker", "(unclosed", "--model", "m/x", "--directory", x.repo, "--prompt",
                           "p", NULL};
        r = cli_dispatch(&x, d);
        ck_assert_msg(r.exit_code == 2, "bad marker: exit %d %s %s", r.exit_code, r.out, r.err);
        tf_run_done(&r);
        ck_assert_uint_eq(tf_count_entries(outputs), before);

        /* the RPC path; "regular expression", not the Node-ism "RegExp" */
        json_object *params = json_object_new_object();
        json_object_object_add(params, "prompt", json_object_new_string("p"));
        json_object_object_add(params, "directory", json_object_new_string(x.repo));
        json_object_object_add(params, "model", json_object_new_string("m/x"));
        json_object_object_add(params, "finalMarker", json_object_new_string("(unclosed"));
        json_object *f = tf_rpc(x.w, "task.dispatch", json_to_line(params, NULL));
        json_object *e = json_get_object(f, "error");
        ck_assert_msg(!json_get_bool(f, "ok", true) && e && strstr(strempty(json_get_string(e, "message")),
                                                                     "--require-final-marker is not a valid regular expression"),
                      "%s", json_to_line(f, NULL));
        json_object_put(f);
        json_object_put(params);
        ck_assert_uint_eq(tf_count_entries(outputs), before);

        f = tf_rpc(x.w, "task.dispatch", "{\"prompt\":\"p\",\"directory\":\"work/repo\",\"model\":\"m/x\"}");
        e = json_get_object(f, "error");
        ck_assert_msg(e && streq(strempty(json_get_string(e, "code")), "INVALID_PARAMS"), "%s", json_to_line(f, NULL));
        json_object_put(f);
        ck_assert_uint_eq(tf_count_entries(outputs), before);
        world_free(&x);
}
END_TEST

/* D4: previews of long prompts, in the reply and in status. */
START_TEST(d4_prompt_preview) {
        world x = world_new(nosandbox_env);
        char long_prompt[501];
        for (int i = 0; i < 500; i++) long_prompt[i] = (char) ('a' + i % 26);
        long_prompt[500] = 0;
        const char *a[] = {"--model", "m/x", "--prompt", long_prompt, NULL};
        json_object *o = dispatch(&x, a);
        char *want = strdup_printf("%.200s\xE2\x80\xA6", long_prompt);
        int64_t total = 0;
        ck_assert_str_eq(strempty(tf_jstr(o, "promptPreview")), want);
        ck_assert_msg(json_get_int64(o, "promptTotalChars", &total) && total == 500, "%s", json_to_line(o, NULL));
        char *id = strdup(tf_jstr(o, "id"));
        json_object_put(o);
        json_object_put(tf_wait_settled(x.w, id));
        json_object *st = tf_status_full(x.w, id);
        total = 0;
        ck_assert_str_eq(strempty(tf_jstr(st, "promptPreview")), want);
        ck_assert_msg(json_get_int64(st, "promptTotalChars", &total) && total == 500, "%s", json_to_line(st, NULL));
        json_object_put(st);
        free(id), free(want);
        want = NULL;

        /* the boundary: 200 units verbatim, 201 cut */
        long_prompt[200] = 0;
        const char *e[] = {"--model", "m/x", "--prompt", long_prompt, NULL};
        o = dispatch(&x, e);
        ck_assert_str_eq(strempty(tf_jstr(o, "promptPreview")), long_prompt);
        ck_assert_msg(!json_object_object_get_ex(o, "promptTotalChars", NULL), "%s", json_to_line(o, NULL));
        json_object_put(tf_wait_settled(x.w, tf_jstr(o, "id")));
        json_object_put(o);
        long_prompt[200] = 'x';
        long_prompt[201] = 0;
        o = dispatch(&x, e);
        want = strdup_printf("%.200s\xE2\x80\xA6", long_prompt);
        ck_assert_str_eq(strempty(tf_jstr(o, "promptPreview")), want);
        total = 0;
        ck_assert_msg(json_get_int64(o, "promptTotalChars", &total) && total == 201, "%s", json_to_line(o, NULL));
        json_object_put(tf_wait_settled(x.w, tf_jstr(o, "id")));
        json_object_put(o);
        free(want);

        const char *b[] = {"--model", "m/x", "--prompt", "short prompt", NULL};
        o = dispatch(&x, b);
        ck_assert_str_eq(strempty(tf_jstr(o, "promptPreview")), "short prompt");
        ck_assert_msg(!json_object_object_get_ex(o, "promptTotalChars", NULL), "%s", json_to_line(o, NULL));
        id = strdup(tf_jstr(o, "id"));
        json_object_put(o);
        json_object_put(tf_wait_settled(x.w, id));
        st = tf_status_full(x.w, id);
        ck_assert_str_eq(strempty(tf_jstr(st, "promptPreview")), "short prompt");
        ck_assert_msg(!json_object_object_get_ex(st, "promptTotalChars", NULL), "%s", json_to_line(st, NULL));
        json_object_put(st);
        free(id);
        world_free(&x);
}
END_TEST

/* D5: a prompt over 96 KiB: the worker gets the 0600
 * state/prompts/<id>.prompt.txt (prompt + output-dir block) attached; the
 * raw prompt is never in argv; the file is gone after exit. */
static char *big_prompt(size_t n) {
        char *s = malloc(n + 1);
        ck_assert_ptr_nonnull(s);
        for (size_t i = 0; i < n; i++) s[i] = (char) ('A' + i % 23);
        memcpy(s, "BIGPROMPT-", 10);
        s[n] = 0;
        return s;
}

static void large_prompt_case(const char *executor) {
        world x = world_new(nosandbox_env);
        char *prompt = big_prompt(96 * 1024 + 1);
        /* one argument up to 128 KiB passes execve, so the CLI takes it whole */
        const char *argv[] = {"dispatch", "--json", "--executor", executor, "--model", "m/x", "--directory", x.repo,
                              "--prompt", prompt, NULL};
        tf_run r = tf_cli(x.w, NULL, NULL, argv);
        ck_assert_msg(r.exit_code == 0, "dispatch (%d): %s %s", r.exit_code, r.out, r.err);
        json_object *o = tf_json(r.out);
        char *id = strdup(tf_jstr(o, "id"));
        json_object_put(o);
        tf_run_done(&r);
        json_object *st = tf_wait_settled(x.w, id);
        ck_assert_msg(streq(tf_jstr(st, "status"), "done"), "%s", json_to_line(st, NULL));
        json_object_put(st);

        char *text = tf_read(x.argv_file, NULL);
        ck_assert_msg(!strstr(text, "BIGPROMPT-"), "raw prompt in argv");
        free(text);
        if (streq(executor, "opencode")) assert_opencode_argv(&x, id, "m/x", "");
        else assert_pi_argv(&x, id, "--provider\nm\n--model\nx\n--mode\njson\n--thinking\nxhigh\n");
        char *m = tf_read(tf_path(x.rec, "mode.txt"), NULL);
        ck_assert_str_eq(m, "600\n");
        free(m);
        char *c = worker_prompt(&x);
        char *out = output_dir(&x, id);
        ck_assert_msg(strncmp(c, prompt, strlen(prompt)) == 0, "file does not start with the prompt");
        ck_assert_msg(strstr(c + strlen(prompt), "\n\n## Persistent output dir\n") && strstr(c, out),
                      "no output-dir block in the file");
        free(c), free(out);
        char *file = prompt_file(&x, id);
        ck_assert_msg(!tf_exists(file), "%s left after exit", file);
        free(file), free(id), free(prompt);
        world_free(&x);
}

/* D5: the prompt file is also gone after a spawn failure: a `pi` whose
 * interpreter does not exist passes the (unsandboxed) PATH preflight, the
 * shim writes the prompt file, then execve fails. */
START_TEST(d5_prompt_file_gone_after_spawn_failure) {
        world x = world_new(nosandbox_env);
        char *bad = strdup(tf_path(x.w->root, "badbin"));
        ck_assert_int_eq(mkdir(bad, 0755), 0);
        tf_write(tf_path(bad, "pi"), "#!/nonexistent-interpreter\n", 27, 0755);
        char *path = strdup_printf("%s:%s/bin:/usr/local/bin:/usr/bin:/bin", bad, x.w->fixtures);
        tf_world_setenv(x.w, "PATH", path);
        char *prompt = big_prompt(96 * 1024 + 1);
        const char *a[] = {"--executor", "pi", "--model", "m/x", "--prompt", prompt, NULL};
        json_object *o = dispatch(&x, a);
        char *id = strdup(tf_jstr(o, "id"));
        json_object_put(o);
        json_object *st = tf_wait_settled(x.w, id);
        ck_assert_msg(!isempty(tf_jstr(st, "spawnError")), "%s", json_to_line(st, NULL));
        json_object_put(st);
        char *file = prompt_file(&x, id);
        ck_assert_msg(!tf_exists(file), "%s left after a spawn failure", file);
        char *left = tf_shf(x.w, NULL, "ls -A %s/prompts", x.w->state);
        ck_assert_msg(isempty(left), "prompts/ holds: %s", left);
        free(left), free(file), free(id), free(prompt), free(path), free(bad);
        world_free(&x);
}
END_TEST

START_TEST(d5_large_prompt_opencode) { large_prompt_case("opencode"); }
END_TEST

START_TEST(d5_large_prompt_pi) { large_prompt_case("pi"); }
END_TEST

/* D11: --class and --parent-task tags. */
START_TEST(d11_class_and_parent) {
        world x = world_new(nosandbox_env);
        const char *a[] = {"--model", "m/x", "--class", "implementer", "--parent-task", "task-X", "--prompt", "p", NULL};
        json_object *o = dispatch(&x, a);
        ck_assert_str_eq(strempty(tf_jstr(o, "class")), "implementer");
        char *id = strdup(tf_jstr(o, "id"));
        json_object_put(o);
        json_object_put(tf_wait_settled(x.w, id));
        json_object *st = tf_status_full(x.w, id);
        ck_assert_str_eq(strempty(tf_jstr(st, "class")), "implementer");
        ck_assert_str_eq(strempty(tf_jstr(st, "parentTaskId")), "task-X");
        json_object_put(st);
        free(id);

        const char *b[] = {"--model", "m/x", "--prompt", "p", NULL};
        o = dispatch(&x, b);
        ck_assert_msg(!json_object_object_get_ex(o, "class", NULL), "%s", json_to_line(o, NULL));
        id = strdup(tf_jstr(o, "id"));
        json_object_put(o);
        json_object_put(tf_wait_settled(x.w, id));
        st = tf_status_full(x.w, id);
        ck_assert_msg(!json_object_object_get_ex(st, "class", NULL), "%s", json_to_line(st, NULL));
        json_object_put(st);
        free(id);
        world_free(&x);
}
END_TEST

static void assert_output_block(const char *text, const char *out_dir, bool sandboxed) {
        const char *block = strstr(text, "\n\n## Persistent output dir\n");
        ck_assert_msg(block, "no output-dir block:\n%s", text);
        ck_assert_msg(strstr(block, out_dir), "block does not name %s:\n%s", out_dir, block);
        ck_assert_msg(strstr(block, "TASKFERRY_OUTPUT_DIR"), "block does not name TASKFERRY_OUTPUT_DIR:\n%s", block);
        ck_assert_msg(!!strstr(block, "inside the sandbox") == sandboxed, "sandboxed=%d:\n%s", sandboxed, block);
}

/* D13: the worker's prompt is the user prompt plus the output-dir block;
 * "inside the sandbox" only when sandboxed. */
START_TEST(d13_prompt_augmentation) {
        world x = world_new(nosandbox_env);
        const char *a[] = {"--executor", "opencode", "--model", "m/x", "--prompt", "Do the thing", NULL};
        char *id = NULL;
        free(run_recorded(&x, a, &id));
        char *out = output_dir(&x, id);
        char *text = worker_prompt(&x);
        ck_assert_msg(startswith(text, "Do the thing\n\n## Persistent output dir\n"), "%s", text);
        assert_output_block(text, out, false);
        free(text), free(out), free(id);
        world_free(&x);

        /* sandboxed (the default) */
        x = world_new(NULL);
        const char *b[] = {"--executor", "pi", "--model", "m/x", "--prompt", "Do the thing", NULL};
        free(run_recorded(&x, b, &id));
        out = output_dir(&x, id);
        text = worker_prompt(&x);
        ck_assert_msg(startswith(text, "Do the thing\n\n## Persistent output dir\n"), "%s", text);
        assert_output_block(text, out, true);
        free(text), free(out), free(id);
        world_free(&x);
}
END_TEST

/* D14: variant defaults. pi's "highest" is pi's highest accepted level,
 * xhigh (pi has no `max`); opencode without a
 * variants cache gets no flag; TASKFERRY_DEFAULT_VARIANT passes verbatim;
 * an invalid one keeps the daemon from starting. */
START_TEST(d14_variant_defaults) {
        static const struct {
                const char *variant; /* TASKFERRY_DEFAULT_VARIANT (NULL: unset) */
                const char *pi_thinking, *opencode_flags;
        } defaults[] = {
                {NULL, "xhigh", ""},
                {"low", "low", "--variant\nlow\n"},
        };
        const char *a[] = {"--executor", "pi", "--model", "m/x", "--prompt", "p", NULL};
        const char *b[] = {"--executor", "opencode", "--model", "m/x", "--prompt", "p", NULL};
        for (size_t i = 0; i < ELEMENTSOF(defaults); i++) {
                _cleanup_free_ char *variant =
                        defaults[i].variant ? strdup_printf("TASKFERRY_DEFAULT_VARIANT=%s", defaults[i].variant) : NULL;
                char *const env[] = {(char *) "TASKFERRY_DISABLE_SANDBOX=1", variant, NULL};
                world x = world_new(env);
                char *id = NULL;
                free(run_recorded(&x, a, &id));
                _cleanup_free_ char *pi_argv =
                        strdup_printf("--provider\nm\n--model\nx\n--mode\njson\n--thinking\n%s\n", defaults[i].pi_thinking);
                assert_pi_argv(&x, id, pi_argv);
                free(id);
                free(run_recorded(&x, b, &id));
                assert_opencode_argv(&x, id, "m/x", defaults[i].opencode_flags);
                free(id);
                world_free(&x);
        }

        char *const bad_env[] = {"TASKFERRY_DISABLE_SANDBOX=1", "TASKFERRY_DEFAULT_VARIANT=extreme", NULL};
        world x = world_new(bad_env);
        char *cmd = strdup_printf("timeout 20 %s; echo \"rc=$?\"", tf_bin("taskferryd"));
        tf_run r = tf_sh(x.w, NULL, cmd, true);
        ck_assert_msg(strstr(r.out, "rc=") && !strstr(r.out, "rc=0") && !strstr(r.out, "rc=124"), "%s %s", r.out,
                      r.err);
        ck_assert_msg(tf_daemon_pid(x.w) < 0, "a daemon answers");
        tf_run_done(&r);
        free(cmd);
        world_free(&x);
}
END_TEST

int main(void) {
        return tf_run_tests("dispatch-scenarios", "dispatch", 120,
                            TF_TESTS(d1_opencode_argv_and_process, d1_pi_argv_and_default_executor, d2_validation,
                                     d4_prompt_preview, d5_large_prompt_opencode, d5_large_prompt_pi,
                                     d5_prompt_file_gone_after_spawn_failure, d11_class_and_parent, d13_prompt_augmentation,
                                     d14_variant_defaults));
}
