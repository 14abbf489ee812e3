/* `taskferry list` and the workspace view (`taskferry` alone) through the
 * real daemon: acceptance scenarios L1 (empty list) and L2 (rows, order,
 * counts, the 30-row cap and its hint, --limit, --all, --directory), the
 * workspace view, and the changeset column of both (the wire row's changesetStatus, the CLI's changeset). */

#include <check.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

static tf_run cli_in(tf_world *w, const char *cwd, const char *const argv[]) {
        return tf_cli(w, cwd, NULL, argv);
}

static json_object *json_in(tf_world *w, const char *cwd, const char *const argv[]) {
        tf_run r = cli_in(w, cwd, argv);
        ck_assert_msg(r.exit_code == 0, "%s: %s %s", argv[0], r.out, r.err);
        json_object *o = tf_json(r.out);
        tf_run_done(&r);
        return o;
}

/* A settled shell task: sandboxed with an overlay, or unsandboxed without one. */
static char *settled_task(tf_world *w, const char *repo, const char *script, bool overlay) {
        const char *direct[] = {"--no-overlay", "--no-sandbox", NULL};
        return tf_shell_settled(w, repo, overlay ? NULL : direct, script, NULL);
}

static const char *const ROW_KEYS[] = {"id", "status", "model", "startedAt", "directory", "failureReason",
                                       "changesetStatus", NULL};

TF_WORLD_TEST(empty_list_and_home) {
        char *repo = tf_repo_new(w, NULL, "echo base > f.txt");
        /* L1 */
        const char *all[] = {"list", "--all", "--json", NULL};
        json_object *o = json_in(w, NULL, all);
        ck_assert_str_eq(tf_jstr(o, "tasks"), "none found (this server process's lifetime)");
        ck_assert_str_eq(json_to_line(json_get_object(o, "counts"), NULL),
                         "{\"queued\":0,\"running\":0,\"done\":0,\"crashed\":0,\"cancelled\":0,\"unknown\":0}");
        json_object_put(o);
        const char *here[] = {"list", "--json", NULL};
        o = json_in(w, repo, here);
        ck_assert_str_eq(tf_jstr(o, "tasks"), "none found in this workspace");
        json_object_put(o);
        const char *list[] = {"list", NULL};
        tf_run r = cli_in(w, repo, list);
        ck_assert_msg(strstr(r.out, "tasks: none found in this workspace"), "%s", r.out);
        tf_run_done(&r);
        /* the workspace view without tasks */
        const char *home[] = {NULL};
        r = cli_in(w, repo, home);
        ck_assert_int_eq(r.exit_code, 0);
        _cleanup_free_ char *head = strdup_printf("workspace: %s\nbin: %s\n", repo, tf_bin("taskferry"));
        ck_assert_msg(startswith(r.out, head), "%s", r.out);
        ck_assert_msg(strstr(r.out, "description: \"Manage background tasks that run pi, OpenCode or a shell command in the current workspace.\"\n") &&
                      strstr(r.out, "tasks: none found in this workspace\n") &&
                      strstr(r.out, "next[2]: \"Run taskferry dispatch --prompt \\\"<text>\\\" to start a task\",Run taskferry list --all to inspect every workspace"),
                      "%s", r.out);
        tf_run_done(&r);
        free(repo);
}
END_TEST

START_TEST(rows_caps_scopes_and_changeset_column) {
        tf_world *w = tf_world_new((char *const[]) {"TASKFERRY_MAX_CONCURRENT_TASKS=8",
                                                    "TASKFERRY_MAX_DISPATCHES_PER_WINDOW=1000",
                                                    "TASKFERRY_LOWERDIR_STAGGER_MS=0", NULL});
        char *a = tf_repo_new(w, "a", "echo base > f.txt");
        char *b = tf_repo_new(w, "b", "echo base > f.txt");
        enum { N = 32 };
        char *ids[N + 1];
        for (size_t i = 0; i < N; i++) ids[i] = settled_task(w, a, i == 0 ? "exit 3" : "true", false);
        /* the newest in a: a changeset waiting for a decision */
        ids[N] = settled_task(w, a, "echo changed > f.txt", true);
        char *other = settled_task(w, b, "true", false);

        /* L2 on the wire: the spec's row keys in order, then changesetStatus; newest first */
        const char *here[] = {"list", "--json", NULL};
        json_object *o = json_in(w, a, here);
        json_object *rows = json_get_array(o, "tasks");
        ck_assert_uint_eq(json_object_array_length(rows), N + 1);
        const char *prev = NULL;
        for (size_t i = 0; i <= N; i++) {
                json_object *row = json_object_array_get_idx(rows, i);
                tf_assert_keys(row, ROW_KEYS);
                ck_assert_str_eq(tf_jstr(row, "directory"), a);
                const char *started = tf_jstr(row, "startedAt");
                if (prev) ck_assert_msg(strcmp(prev, started) >= 0, "not newest first: %s then %s", prev, started);
                prev = started;
        }
        json_object *first = json_object_array_get_idx(rows, 0), *last = json_object_array_get_idx(rows, N);
        ck_assert_str_eq(tf_jstr(first, "id"), ids[N]);
        ck_assert_str_eq(tf_jstr(first, "changesetStatus"), "pending");
        ck_assert_str_eq(tf_jstr(last, "id"), ids[0]);
        ck_assert_str_eq(tf_jstr(last, "status"), "crashed");
        ck_assert_str_eq(tf_jstr(last, "changesetStatus"), "none");
        ck_assert_str_eq(json_to_line(json_get_object(o, "counts"), NULL),
                         "{\"queued\":0,\"running\":0,\"done\":32,\"crashed\":1,\"cancelled\":0,\"unknown\":0}");
        json_object_put(o);

        /* the CLI: 30 rows and the reveal hint, the changeset column */
        const char *list[] = {"list", NULL};
        tf_run r = cli_in(w, a, list);
        _cleanup_free_ char *newest = strdup_printf("\n  %s,done,null,", ids[N]);
        ck_assert_msg(strstr(r.out, "tasks[30]:\n") || strstr(r.out, "tasks[30]{"), "%s", r.out);
        ck_assert_msg(strstr(r.out, "tasks[30]{id,status,model,startedAt,changeset}:") && strstr(r.out, newest) &&
                      strstr(r.out, ",pending\n") && strstr(r.out, ",none\n") &&
                      strstr(r.out, "next[1]: Run taskferry list --limit 33 for all 33 tasks"),
                      "%s", r.out);
        ck_assert_ptr_null(strstr(r.out, ids[0])); /* the oldest is past the cut */
        tf_run_done(&r);
        const char *limit[] = {"list", "--limit", "40", NULL};
        r = cli_in(w, a, limit);
        ck_assert_msg(strstr(r.out, "tasks[33]{id,status,model,startedAt,changeset}:") && !strstr(r.out, "next"), "%s", r.out);
        _cleanup_free_ char *crashed = strdup_printf("\n  %s,crashed,null,", ids[0]);
        ck_assert_msg(strstr(r.out, crashed), "%s", r.out);
        tf_run_done(&r);

        /* scopes: --all sees both workspaces, --directory the other one */
        const char *all[] = {"list", "--all", "--json", NULL};
        o = json_in(w, a, all);
        ck_assert_uint_eq(json_object_array_length(json_get_array(o, "tasks")), N + 2);
        json_object_put(o);
        const char *dir_b[] = {"list", "--directory", b, "--json", NULL};
        o = json_in(w, a, dir_b);
        rows = json_get_array(o, "tasks");
        ck_assert_uint_eq(json_object_array_length(rows), 1);
        ck_assert_str_eq(tf_jstr(json_object_array_get_idx(rows, 0), "id"), other);
        json_object_put(o);

        /* the workspace view: the same rows, the cap hint and the diff hint */
        const char *home[] = {NULL};
        r = cli_in(w, a, home);
        ck_assert_int_eq(r.exit_code, 0);
        ck_assert_msg(strstr(r.out, "tasks[30]{id,status,model,startedAt,changeset}:") && strstr(r.out, newest) &&
                      strstr(r.out, "\nnext[5]: Run taskferry status <id> for activity,Run taskferry wait <id> to wait for settlement,"
                                    "Run taskferry result <id> for the final answer,"
                                    "\"Run taskferry diff <id> to review a pending changeset, then taskferry accept <id> or taskferry reject <id>\","
                                    "Run taskferry list --limit 33 for all 33 tasks"),
                      "%s", r.out);
        tf_run_done(&r);
        /* decided: no diff hint any more */
        const char *rej[] = {"reject", ids[N], NULL};
        r = cli_in(w, a, rej);
        ck_assert_int_eq(r.exit_code, 0);
        tf_run_done(&r);
        r = cli_in(w, a, home);
        ck_assert_msg(strstr(r.out, ",rejected\n") && !strstr(r.out, "taskferry diff") && strstr(r.out, "next[4]"), "%s", r.out);
        tf_run_done(&r);

        for (size_t i = 0; i <= N; i++) free(ids[i]);
        free(other);
        free(a);
        free(b);
        tf_world_free(w);
}
END_TEST

int main(void) {
        return tf_run_tests("list-home", "list-home", 600, TF_TESTS(empty_list_and_home, rows_caps_scopes_and_changeset_column));
}
