/* The advisor (scenarios A1, A2, A4)
 * through the CLI and the real daemon, with real bwrap and overlayfs and the
 * fake `opencode` (tests/fixtures/bin) in place of the model: the answer's
 * two shapes, sessions and their TTL, the overlay it requires, its
 * changeset that never lands, its sandbox without the daemon's socket, and
 * the CLI's context sources. */

#include <check.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

static const char *const answer_fixture =
        "{\"type\":\"step_start\",\"sessionID\":\"ses_fxA\",\"part\":{\"type\":\"step-start\",\"messageID\":\"msg_a1\"}}\n"
        "{\"type\":\"text\",\"sessionID\":\"ses_fxA\",\"part\":{\"messageID\":\"msg_a1\",\"type\":\"text\",\"text\":\"Checked README.md.\"}}\n"
        "{\"type\":\"text\",\"sessionID\":\"ses_fxA\",\"part\":{\"messageID\":\"msg_a1\",\"type\":\"text\",\"text\":\" The answer is PONG.\"}}\n"
        "{\"type\":\"step_finish\",\"sessionID\":\"ses_fxA\",\"part\":{\"messageID\":\"msg_a1\",\"type\":\"step-finish\",\"reason\":\"stop\","
        "\"tokens\":{\"total\":1210,\"input\":1100,\"output\":100,\"reasoning\":10,\"cache\":{\"write\":0,\"read\":512}},\"cost\":0.0012}}\n";

static char *make_repo(tf_world *w) { return tf_repo_new(w, NULL, "printf 'one\\n' > tracked.txt"); }

/* `taskferry advisor <args> --json` in cwd; the parsed answer (asserts exit `want_exit`). */
static json_object *advisor(tf_world *w, const char *cwd, int want_exit, const char *const extra[]) {
        const char *argv[32] = {"advisor", "--json", "--executor", "opencode"};
        size_t n = 4;
        for (size_t i = 0; extra[i] && n < 30; i++) argv[n++] = extra[i];
        argv[n] = NULL;
        tf_run r = tf_cli(w, cwd, NULL, argv);
        ck_assert_msg(r.exit_code == want_exit, "advisor exit %d (want %d): %s %s", r.exit_code, want_exit, r.out, r.err);
        json_object *o = tf_json(r.out);
        tf_run_done(&r);
        return o;
}

static size_t count_lines_with(const char *path, const char *s) {
        size_t len = 0, n = 0;
        char *data = tf_read(path, &len);
        for (char *line = data; line && *line;) {
                char *nl = strchr(line, '\n');
                if (nl) *nl = 0;
                if (streq(line, s)) n++;
                line = nl ? nl + 1 : NULL;
        }
        free(data);
        return n;
}

/* A1: done answer; the advisor's writes never land; sessions resume. */
TF_WORLD_TEST(inline_advisor_done_and_session) {
        char *repo = make_repo(w);
        char *before = tf_tree_snapshot(repo, false);
        char *fx = tf_fake_fixture(w, "adv-answer", answer_fixture, 0);
        /* a dir the worker may write (a daemon-wide --rw-bind) for its argv */
        char *argv_file = NULL, *rec = tf_record_dir(w, &argv_file);
        tf_world_setenv(w, "FAKE_FIXTURE", fx);
        /* an advisor that writes: the write stays in its overlay */
        tf_world_setenv(w, "FAKE_SCRIPT", "echo advisor-was-here > tracked.txt && echo new > added.txt");
        const char *a1[] = {"--model", "mock/model", "--prompt", "Is this plan sound?", NULL};
        json_object *o = advisor(w, repo, 0, a1);
        ck_assert_str_eq(tf_jstr(o, "status"), "done");
        ck_assert_str_eq(tf_jstr(o, "message"), "Checked README.md. The answer is PONG.");
        ck_assert_str_eq(tf_jstr(o, "session_id"), "ses_fxA");
        ck_assert(!json_get_bool(o, "session_reset", true));
        ck_assert(!json_object_object_get_ex(o, "previous_session_id", NULL));
        json_object *tokens = json_get_object(o, "tokens");
        int64_t in = 0;
        ck_assert(tokens && json_get_int64(tokens, "input", &in) && in == 1100);
        json_object *cost = NULL;
        ck_assert_msg(json_object_object_get_ex(o, "cost", &cost) && json_object_get_double(cost) == 0.0012, "%s",
                      json_to_line(o, NULL));
        ck_assert(!json_object_object_get_ex(o, "exitCode", NULL));
        /* snake_case keys in the spec's order */
        const char *keys[] = {"status", "task_id", "session_id", "session_reset", "message", "tokens", "cost", NULL};
        tf_assert_keys(o, keys);
        char *id = strdup(tf_jstr(o, "task_id"));
        json_object_put(o);

        json_object *st = tf_status_full(w, id);
        ck_assert_str_eq(tf_jstr(st, "role"), "advisor");
        ck_assert_str_eq(tf_jstr(st, "changesetStatus"), "rejected");
        ck_assert(json_get_object(st, "overlayDirs") == NULL);
        json_object_put(st);
        char *after = tf_tree_snapshot(repo, false);
        ck_assert_str_eq(after, before);
        /* it cannot be accepted */
        const char *acc[] = {"accept", id, "--json", NULL};
        tf_run ar = tf_cli(w, NULL, NULL, acc);
        ck_assert_int_eq(ar.exit_code, 1);
        tf_run_done(&ar);
        char *again = tf_tree_snapshot(repo, false);
        ck_assert_str_eq(again, before);

        /* a session answered within the TTL resumes: --continue --session */
        tf_world_setenv(w, "FAKE_SCRIPT", "true");
        const char *a2[] = {"--model", "mock/model", "--prompt", "And now?", "--session-id", "ses_fxA", NULL};
        o = advisor(w, repo, 0, a2);
        ck_assert_str_eq(tf_jstr(o, "status"), "done");
        ck_assert(!json_get_bool(o, "session_reset", true));
        json_object_put(o);
        ck_assert_uint_eq(count_lines_with(argv_file, "--continue"), 1);
        ck_assert_uint_eq(count_lines_with(argv_file, "ses_fxA"), 1);
        /* a session never answered here: a fresh one, reported */
        const char *a3[] = {"--model", "mock/model", "--prompt", "Again?", "--session-id", "ses_never_seen", NULL};
        o = advisor(w, repo, 0, a3);
        ck_assert(json_get_bool(o, "session_reset", false));
        ck_assert_str_eq(tf_jstr(o, "previous_session_id"), "ses_never_seen");
        json_object_put(o);
        ck_assert_uint_eq(count_lines_with(argv_file, "ses_never_seen"), 0);
        ck_assert_uint_eq(count_lines_with(argv_file, "--continue"), 1);

        free(id), free(before), free(after), free(again), free(fx), free(argv_file), free(rec), free(repo);
}
END_TEST

/* A session past TASKFERRY_ADVISOR_SESSION_TTL_MS is reset. */
TF_WORLD_TEST_ENV(session_ttl_expires, "TASKFERRY_ADVISOR_SESSION_TTL_MS=300") {
        char *repo = make_repo(w);
        char *fx = tf_fake_fixture(w, "adv-answer", answer_fixture, 0);
        tf_world_setenv(w, "FAKE_FIXTURE", fx);
        const char *a1[] = {"--model", "mock/model", "--prompt", "q", NULL};
        json_object_put(advisor(w, repo, 0, a1));
        usleep(600 * 1000);
        const char *a2[] = {"--model", "mock/model", "--prompt", "q", "--session-id", "ses_fxA", NULL};
        json_object *o = advisor(w, repo, 0, a2);
        ck_assert(json_get_bool(o, "session_reset", false));
        ck_assert_str_eq(tf_jstr(o, "previous_session_id"), "ses_fxA");
        json_object_put(o);
        free(fx), free(repo);
}
END_TEST

/* A2: still running after timeoutMs: with and without a session id yet; and queued. */
TF_WORLD_TEST_ENV(timeout_shapes, "TASKFERRY_MAX_CONCURRENT_TASKS=1") {
        char *repo = make_repo(w);
        char *fx = tf_fake_fixture(w, "adv-answer", answer_fixture, 0);
        tf_world_setenv(w, "FAKE_FIXTURE", fx);
        char *go = strdup(tf_path(w->fixtures, "go"));
        char *script = strdup_printf("while [ ! -e %s ]; do sleep 0.05; done", go);
        tf_world_setenv(w, "FAKE_SCRIPT", script);
        const char *a1[] = {"--model", "mock/model", "--prompt", "q", "--timeout", "1500", NULL};
        json_object *o = advisor(w, repo, 0, a1);
        ck_assert_str_eq(tf_jstr(o, "status"), "running");
        ck_assert_ptr_null(tf_jstr(o, "session_id"));
        ck_assert(json_object_object_get_ex(o, "session_id", NULL));
        char *first = strdup(tf_jstr(o, "task_id"));
        char *want = strdup_printf("still running; call taskferry wait with task id \"%s\" to continue (no session_id yet)", first);
        ck_assert_str_eq(tf_jstr(o, "note"), want);
        ck_assert(!json_object_object_get_ex(o, "message", NULL));
        json_object_put(o);

        /* the slot is taken: the next one is still queued */
        const char *a2[] = {"--model", "mock/model", "--prompt", "q", "--timeout", "300", NULL};
        o = advisor(w, repo, 0, a2);
        ck_assert_str_eq(tf_jstr(o, "status"), "queued");
        ck_assert(strstr(tf_jstr(o, "note"), "still queued") != NULL);
        char *second = strdup(tf_jstr(o, "task_id"));
        json_object_put(o);
        tf_write(go, "", 0, 0644);
        json_object_put(tf_wait_settled(w, first));
        json_object_put(tf_wait_settled(w, second));
        unlink(go);

        /* a session id in the log already: the note says how to continue it */
        char *script2 = strdup_printf(
                "printf '%%s\\n' '{\"type\":\"step_start\",\"sessionID\":\"ses_slow\",\"part\":{\"type\":\"step-start\"}}'; "
                "while [ ! -e %s ]; do sleep 0.05; done",
                go);
        tf_world_setenv(w, "FAKE_SCRIPT", script2);
        const char *a3[] = {"--model", "mock/model", "--prompt", "q", "--timeout", "2500", NULL};
        o = advisor(w, repo, 0, a3);
        ck_assert_str_eq(tf_jstr(o, "status"), "running");
        ck_assert_str_eq(strempty(tf_jstr(o, "session_id")), "ses_slow");
        ck_assert_str_eq(tf_jstr(o, "note"), "still running; call taskferry wait or taskferry advisor again with "
                                             "session_id \"ses_slow\" to continue");
        char *third = strdup(tf_jstr(o, "task_id"));
        json_object_put(o);
        tf_write(go, "", 0, 0644);
        json_object_put(tf_wait_settled(w, third));
        /* the session id an answer carried is remembered: it resumes */
        tf_world_setenv(w, "FAKE_SCRIPT", "true");
        const char *a4[] = {"--model", "mock/model", "--prompt", "q", "--session-id", "ses_slow", NULL};
        o = advisor(w, repo, 0, a4);
        ck_assert(!json_get_bool(o, "session_reset", true));
        json_object_put(o);

        free(first), free(second), free(third), free(want), free(script), free(script2), free(go), free(fx), free(repo);
}
END_TEST

/* A4: a crash is data, not an RPC error; the CLI's usage errors. */
TF_WORLD_TEST(crash_is_data) {
        char *repo = make_repo(w);
        char *fx = tf_fake_fixture(w, "adv-crash", "", 1);
        tf_world_setenv(w, "FAKE_FIXTURE", fx);
        const char *a1[] = {"--model", "mock/model", "--prompt", "q", NULL};
        json_object *o = advisor(w, repo, 0, a1);
        ck_assert_str_eq(tf_jstr(o, "status"), "crashed");
        int64_t code = 0;
        ck_assert(json_get_int64(o, "exitCode", &code) && code == 1);
        ck_assert(json_object_object_get_ex(o, "signal", NULL));
        ck_assert(json_object_object_get_ex(o, "spawnError", NULL));
        ck_assert(!json_object_object_get_ex(o, "tokens", NULL));
        ck_assert_str_eq(tf_jstr(o, "message"), "");
        json_object_put(o);

        const char *nomodel[] = {"--prompt", "q", NULL};
        o = advisor(w, repo, 2, nomodel);
        ck_assert_str_eq(tf_jstr(o, "error"), "--model is required");
        json_object_put(o);
        /* no context source and no --prompt */
        tf_world_setenv(w, "CLAUDE_CODE_SESSION_ID", "");
        tf_world_setenv(w, "TASKFERRY_TASK_ID", "");
        const char *noctx[] = {"--model", "mock/model", NULL};
        o = advisor(w, repo, 2, noctx);
        ck_assert_str_eq(tf_jstr(o, "error"), "advisor needs context or an explicit --prompt: no context source found");
        json_object_put(o);
        free(fx), free(repo);
}
END_TEST

/* Without the sandbox or the overlay an advisor fails closed. */
START_TEST(overlay_is_mandatory) {
        static const char *const envs[] = {"TASKFERRY_DISABLE_OVERLAY=1", "TASKFERRY_DISABLE_SANDBOX=1"};
        static const char *const want[] = {"advisor dispatch requires overlay-gated writes, but overlay is disabled",
                                           "advisor dispatch requires overlay-gated writes, but the sandbox is unavailable"};
        for (size_t i = 0; i < 2; i++) {
                char *const env[] = {(char *) envs[i], NULL};
                tf_world *w = tf_world_new(env);
                char *repo = make_repo(w);
                char *before = tf_tree_snapshot(repo, false);
                char *marker = strdup(tf_path(w->fixtures, "ran"));
                char *script = strdup_printf("touch %s; echo x > tracked.txt", marker);
                tf_world_setenv(w, "FAKE_SCRIPT", script);
                const char *a1[] = {"--model", "mock/model", "--prompt", "q", NULL};
                json_object *o = advisor(w, repo, 0, a1);
                ck_assert_str_eq(tf_jstr(o, "status"), "crashed");
                ck_assert_msg(startswith(strempty(tf_jstr(o, "spawnError")), want[i]), "spawnError: %s",
                              tf_jstr(o, "spawnError"));
                json_object_put(o);
                ck_assert(!tf_exists(marker));
                char *after = tf_tree_snapshot(repo, false);
                ck_assert_str_eq(after, before);
                free(after), free(before), free(marker), free(script), free(repo);
                tf_world_free(w);
        }
}
END_TEST

/* Attack: an advisor's worker looks for a way to the daemon: no task socket,
 * TASKFERRY_SOCKET_PATH unset, the user's socket masked. */
TF_WORLD_TEST(attack_advisor_reaches_no_socket) {
        char *repo = make_repo(w);
        char *fx = tf_fake_fixture(w, "adv-answer", answer_fixture, 0);
        tf_world_setenv(w, "FAKE_FIXTURE", fx);
        char *script = strdup_printf(
                "python3 - <<'PY' > \"$TASKFERRY_OUTPUT_DIR/probe.txt\" 2>&1\n"
                "import os, socket, glob\n"
                "print('env', os.environ.get('TASKFERRY_SOCKET_PATH', 'unset'), os.environ.get('TASKFERRY_AUTO_START'))\n"
                "paths = ['%s', '%s/task-sockets'] + glob.glob('%s/*') + glob.glob('%s/task-sockets/*')\n"
                "for p in paths:\n"
                "    s = socket.socket(socket.AF_UNIX)\n"
                "    try:\n"
                "        s.connect(p); print('CONNECTED', p)\n"
                "    except OSError as e:\n"
                "        print('refused', p, e.errno)\n"
                "PY\n"
                "taskferry list --json >> \"$TASKFERRY_OUTPUT_DIR/probe.txt\" 2>&1; echo rc=$? >> \"$TASKFERRY_OUTPUT_DIR/probe.txt\"",
                w->socket, w->run, w->run, w->run);
        tf_world_setenv(w, "FAKE_SCRIPT", script);
        /* a dispatch running beside it has a task socket the advisor must not find either */
        char *go = strdup(tf_path(w->fixtures, "go"));
        char *wait_script = strdup_printf("while [ ! -e %s ]; do sleep 0.05; done", go);
        char *other = tf_dispatch_shell(w, repo, NULL, wait_script);
        const char *a1[] = {"--model", "mock/model", "--prompt", "q", NULL};
        json_object *o = advisor(w, repo, 0, a1);
        ck_assert_str_eq(tf_jstr(o, "status"), "done");
        char *data = tf_output_read(w, tf_jstr(o, "task_id"), "probe.txt");
        json_object_put(o);
        ck_assert_msg(strstr(data, "env unset 0") != NULL, "probe: %s", data);
        ck_assert_msg(strstr(data, "CONNECTED") == NULL, "the advisor reached a socket: %s", data);
        ck_assert_msg(strstr(data, "rc=0") == NULL, "taskferry list worked from the advisor: %s", data);
        tf_write(go, "", 0, 0644);
        json_object_put(tf_wait_settled(w, other));
        free(data), free(other), free(go), free(wait_script), free(script), free(fx), free(repo);
}
END_TEST

/* Attack: a worker calls task.advisor through its own task socket to get a
 * session it did not make resumed, and to advise outside its directory. */
TF_WORLD_TEST(attack_worker_calls_advisor) {
        char *repo = make_repo(w);
        char *other = strdup(tf_path(w->repo_parent, "other"));
        free(tf_shf(w, NULL, "mkdir -p %s", other));
        char *fx = tf_fake_fixture(w, "adv-answer", answer_fixture, 0);
        tf_world_setenv(w, "FAKE_FIXTURE", fx);
        /* the user's advisor session ses_fxA exists */
        const char *a1[] = {"--model", "mock/model", "--prompt", "q", NULL};
        json_object_put(advisor(w, repo, 0, a1));
        /* a worker (shell task in repo) asks for it, and for another directory */
        char *script = strdup_printf(
                "cd %s && export TASKFERRY_TASK_ID=; taskferry advisor --json --executor opencode --model mock/model --prompt q --session-id ses_fxA "
                "> \"$TASKFERRY_OUTPUT_DIR/a.json\" 2>&1; "
                "taskferry advisor --json --executor opencode --model mock/model --prompt q --directory %s "
                "> \"$TASKFERRY_OUTPUT_DIR/b.json\" 2>&1; true",
                repo, w->fixtures);
        char *id = tf_shell_settled(w, repo, NULL, script, NULL);
        char *da = tf_output_read(w, id, "a.json"), *db = tf_output_read(w, id, "b.json");
        json_object *oa = tf_json(da);
        ck_assert_msg(json_get_bool(oa, "session_reset", false), "a worker resumed the user's session: %s", da);
        ck_assert_str_eq(tf_jstr(oa, "previous_session_id"), "ses_fxA");
        json_object_put(oa);
        ck_assert_msg(strstr(db, "can dispatch only into its own directory") != NULL, "b: %s", db);
        free(da), free(db), free(id), free(script), free(fx), free(other), free(repo);
}
END_TEST

/* The CLI's context sources: the Claude Code transcript tail, else the
 * calling task's tail; the prompt layout. The prompt the worker got is read
 * back from inside its sandbox. */
TF_WORLD_TEST(context_from_claude_transcript) {
        char *repo = make_repo(w);
        char *fx = tf_fake_fixture(w, "adv-answer", answer_fixture, 0);
        tf_world_setenv(w, "FAKE_FIXTURE", fx);
        tf_world_setenv(w, "FAKE_SCRIPT", "cat /tmp/.taskferry-prompt > \"$TASKFERRY_OUTPUT_DIR/prompt.txt\"");
        char *slug = strdup(repo);
        for (char *p = slug; *p; p++)
                if (*p == '/') *p = '-';
        char *dir = strdup_printf("%s/.claude/projects/%s", w->home, slug);
        free(tf_shf(w, NULL, "mkdir -p %s", dir));
        char *tr = strdup_printf("%s/sess-1.jsonl", dir);
        const char *transcript =
                "\xEF\xBB\xBF{\"type\":\"user\",\"message\":{\"content\":\"Fix the parser\"}}\n"
                "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"thinking\",\"thinking\":\"hmm\"},"
                "{\"type\":\"text\",\"text\":\"Reading src/parser.c\"},{\"type\":\"text\",\"text\":\"then editing\"}]}}\n"
                "{\"type\":\"tool_result\",\"message\":{\"content\":\"noise\"}}\n"
                "not json\n"
                "{\"type\":\"assistant\",\"message\":{\"content\":\"D\xC3\xA9j\xC3\xA0 fini\"}}\n";
        tf_write(tr, transcript, strlen(transcript), 0600);
        tf_world_setenv(w, "CLAUDE_CODE_SESSION_ID", "sess-1");
        tf_world_setenv(w, "TASKFERRY_ADVISOR_CONTEXT_CHARS", "40");
        const char *a1[] = {"--model", "mock/model", "--prompt", "Review it", NULL};
        json_object *o = advisor(w, repo, 0, a1);
        char *prompt = tf_output_read(w, tf_jstr(o, "task_id"), "prompt.txt");
        json_object_put(o);
        /* the full text: "user: Fix the parser\n\nassistant: Reading src/parser.c\nthen editing\n\nassistant: Déjà fini";
         * its last 40 code points */
        const char *ctx = "ser.c\nthen editing\n\nassistant: D\xC3\xA9j\xC3\xA0 fini";
        char *block = strdup_printf("\n--- attached context (claude-session, 40 chars) ---\n%s\n---", ctx);
        ck_assert_msg(startswith(prompt, "Review it\n"), "prompt: %s", prompt);
        ck_assert_msg(strstr(prompt, block) != NULL, "prompt: %s", prompt);
        /* the output-dir block the daemon appends follows the context */
        ck_assert_msg(strstr(prompt, "---\n\n## Persistent output dir") != NULL, "prompt: %s", prompt);
        free(prompt), free(block);

        /* an unreadable transcript is a usage error, even with --prompt */
        tf_world_setenv(w, "CLAUDE_CODE_SESSION_ID", "missing");
        o = advisor(w, repo, 2, a1);
        ck_assert(startswith(tf_jstr(o, "error"), "advisor could not read the Claude session transcript at "));
        json_object_put(o);
        free(tr), free(dir), free(slug), free(fx), free(repo);
}
END_TEST

int main(void) {
        return tf_run_tests("advisor", "advisor", 300,
                            TF_TESTS(inline_advisor_done_and_session, session_ttl_expires, timeout_shapes, crash_is_data,
                                     overlay_is_mandatory, attack_advisor_reaches_no_socket, attack_worker_calls_advisor,
                                     context_from_claude_transcript));
}
