/* What a changeset is (issue 6 item 4), end to end through the CLI and an
 * isolated daemon with real bwrap, overlayfs and git: the difference between
 * the directory as the worker found it and what it left, over the paths it
 * touched, merged 3-way on accept. The user keeps editing while the worker
 * runs; none of their work is lost, and an accept that cannot merge touches
 * nothing and names the paths. */

#include <check.h>
#include <sys/stat.h>

#include "harness.h"
#include "json-util.h"
#include "util.h"

static char *make_repo(tf_world *w) {
        char *repo = strdup(tf_path(w->repo_parent, "repo"));
        free(tf_shf(w, NULL,
                    "set -e; mkdir -p %s && cd %s && git init -q && printf 'one\\n' > a.txt && mkdir dir && "
                    "printf 'old\\n' > dir/old.txt && printf 'b\\n' > b.txt && seq 1 20 > lines.txt && "
                    "git add -A && git -c user.email=u@x -c user.name=u commit -qm initial",
                    repo, repo));
        return repo;
}

/* Wait until the worker's log has `marker` (the worker then waits for "go"). */
static void wait_for_log(tf_world *w, const char *id, const char *marker) {
        char *log = strdup_printf("%s/logs/%s.ndjson", w->state, id);
        bool seen = false;
        for (int i = 0; i < 1500 && !seen; i++) {
                char *data = NULL;
                size_t len = 0;
                if (read_file(log, 1 << 20, &data, &len) == 0 && strstr(data, marker)) seen = true;
                free(data);
                if (!seen) usleep(20000);
        }
        free(log);
        ck_assert_msg(seen, "the worker never printed %s", marker);
}

static void go(tf_world *w, const char *id) {
        char *p = strdup_printf("%s/outputs/%s/go", w->state, id);
        tf_write(p, "", 0, 0600);
        free(p);
}

#define WAIT_GO "echo worker-finished; while [ ! -e \"$TASKFERRY_OUTPUT_DIR/go\" ]; do sleep 0.05; done"

static char *diff_of(tf_world *w, const char *id) {
        const char *argv[] = {"result", id, "--diff", "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        ck_assert_msg(r.exit_code == 0, "result failed: %s %s", r.out, r.err);
        json_object *res = tf_json(r.out);
        const char *d = tf_jstr(res, "diff");
        char *diff = strdup(d ? d : "");
        json_object_put(res);
        tf_run_done(&r);
        return diff;
}

/* The "diff --git" headers of a diff, "a|b|" */
static char *diff_files(const char *diff) {
        char *out = strdup("");
        for (const char *p = diff; (p = strstr(p, "diff --git a/")); p++) {
                const char *s = p + strlen("diff --git a/"), *e = strstr(s, " b/");
                if (!e) break;
                char *n = strdup_printf("%s%.*s|", out, (int) (e - s), s);
                free(out);
                out = n;
        }
        return out;
}

static tf_run accept(tf_world *w, const char *id) {
        const char *argv[] = {"accept", id, "--json", NULL};
        return tf_cli(w, NULL, NULL, argv);
}

static char *cs_status(tf_world *w, const char *id) {
        const char *argv[] = {"status", id, "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        ck_assert_int_eq(r.exit_code, 0);
        json_object *o = tf_json(r.out);
        char *s = strdup(strempty(tf_jstr(o, "changesetStatus")));
        json_object_put(o);
        tf_run_done(&r);
        return s;
}

/* The case: the worker appends to a.txt and removes dir; meanwhile
 * the user appends to a.txt, creates dir/new.txt and edits dir/old.txt (and
 * b.txt, which the worker never touched). The diff holds only the worker's
 * paths and lines; accept refuses naming dir/old.txt (deleted by the worker,
 * changed by the user) with the tree untouched; once the user drops that
 * edit, accept keeps both lines of a.txt, dir/new.txt and b.txt. */
START_TEST(concurrent_user_edits_survive) {
        tf_world *w = tf_world_new(NULL);
        char *repo = make_repo(w);
        const char *argv[] = {"--executor", "shell", "--directory", repo, "--prompt",
                              "set -e; printf 'worker\\n' >> a.txt; rm -rf dir; " WAIT_GO, NULL};
        char *id = tf_dispatch(w, argv);
        wait_for_log(w, id, "worker-finished");
        free(tf_shf(w, repo, "printf 'user\\n' >> a.txt; printf 'mine\\n' > dir/new.txt; printf 'edited\\n' > dir/old.txt; "
                             "printf 'B\\n' > b.txt"));
        go(w, id);
        json_object *st = tf_wait_settled(w, id);
        ck_assert_str_eq(tf_jstr(st, "changesetStatus"), "pending");
        json_object_put(st);

        char *diff = diff_of(w, id), *files = diff_files(diff);
        ck_assert_msg(streq(files, "a.txt|dir/old.txt|"), "diff names %s:\n%s", files, diff);
        ck_assert_msg(strstr(diff, "+worker\n") && !strstr(diff, "user"), "%s", diff);

        char *before = tf_tree_snapshot(repo, false);
        tf_run r = accept(w, id);
        ck_assert_msg(r.exit_code != 0, "accept of a conflicting changeset succeeded: %s", r.out);
        ck_assert_msg(strstr(r.out, "dir/old.txt") || strstr(r.err, "dir/old.txt"), "reason names no path: %s %s", r.out,
                      r.err);
        tf_run_done(&r);
        char *after = tf_tree_snapshot(repo, false);
        ck_assert_str_eq(after, before);
        char *cs = cs_status(w, id);
        ck_assert_str_eq(cs, "pending");

        /* the user gives up their edit of dir/old.txt: it merges */
        free(tf_shf(w, repo, "printf 'old\\n' > dir/old.txt"));
        r = accept(w, id);
        ck_assert_msg(r.exit_code == 0, "accept failed: %s %s", r.out, r.err);
        tf_run_done(&r);
        char *a = tf_read(tf_path(repo, "a.txt"), NULL);
        ck_assert_msg(streq(a, "one\nuser\nworker\n"), "a.txt: %s", a);
        char *n = tf_read(tf_path(repo, "dir/new.txt"), NULL), *b = tf_read(tf_path(repo, "b.txt"), NULL);
        ck_assert_str_eq(n, "mine\n");
        ck_assert_str_eq(b, "B\n");
        ck_assert(!tf_exists(tf_path(repo, "dir/old.txt")));
        /* nothing staged in the user's index */
        char *staged = tf_shf(w, repo, "git diff --cached --name-only");
        ck_assert_str_eq(staged, "");
        free(staged), free(a), free(n), free(b), free(cs), free(before), free(after), free(diff), free(files);
        free(id), free(repo);
        tf_world_free(w);
}
END_TEST

/* A path the user changed while the worker ran, and that the worker never
 * touched, is absent from the diff: dir/new.txt inside the dir the worker
 * deleted, b.txt edited, lines.txt deleted. Accept then keeps all of it. */
START_TEST(untouched_user_paths_absent_from_diff) {
        tf_world *w = tf_world_new(NULL);
        char *repo = make_repo(w);
        const char *argv[] = {"--executor", "shell", "--directory", repo, "--prompt",
                              "set -e; rm -rf dir; printf 'w\\n' > w.txt; " WAIT_GO, NULL};
        char *id = tf_dispatch(w, argv);
        wait_for_log(w, id, "worker-finished");
        free(tf_shf(w, repo, "printf 'mine\\n' > dir/new.txt; printf 'B\\n' > b.txt; rm lines.txt"));
        go(w, id);
        json_object *st = tf_wait_settled(w, id);
        ck_assert_str_eq(tf_jstr(st, "changesetStatus"), "pending");
        json_object_put(st);
        char *diff = diff_of(w, id), *files = diff_files(diff);
        ck_assert_msg(streq(files, "dir/old.txt|w.txt|"), "diff names %s:\n%s", files, diff);
        tf_run r = accept(w, id);
        ck_assert_msg(r.exit_code == 0, "accept failed: %s %s", r.out, r.err);
        tf_run_done(&r);
        char *state = tf_shf(w, repo, "cat dir/new.txt b.txt w.txt; test ! -e dir/old.txt && test ! -e lines.txt && echo ok");
        ck_assert_str_eq(state, "mine\nB\nw\nok");
        free(state), free(diff), free(files), free(id), free(repo);
        tf_world_free(w);
}
END_TEST

/* `truncate -s 8G big.bin`: settles within seconds with a warning naming
 * the file; the rest of the changeset accepts. */
START_TEST(sparse_8g_file_is_left_out) {
        char *env[] = {(char *) "TASKFERRY_TASK_DISK_MAX=32G", NULL};
        tf_world *w = tf_world_new(env);
        char *repo = make_repo(w);
        const char *argv[] = {"--executor", "shell", "--directory", repo, "--prompt",
                              "set -e; truncate -s 8G big.bin; printf 'w\\n' >> a.txt", NULL};
        char *id = tf_dispatch(w, argv);
        json_object *st = tf_wait_settled(w, id);
        ck_assert_str_eq(tf_jstr(st, "changesetStatus"), "pending");
        json_object_put(st);
        const char *sargv[] = {"status", id, "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, sargv);
        ck_assert_msg(strstr(r.out, "big.bin") && strstr(r.out, "left out"), "no warning names big.bin: %s", r.out);
        tf_run_done(&r);
        char *diff = diff_of(w, id), *files = diff_files(diff);
        ck_assert_str_eq(files, "a.txt|");
        r = accept(w, id);
        ck_assert_msg(r.exit_code == 0, "accept failed: %s %s", r.out, r.err);
        tf_run_done(&r);
        char *a = tf_read(tf_path(repo, "a.txt"), NULL);
        ck_assert_str_eq(a, "one\nw\n");
        ck_assert(!tf_exists(tf_path(repo, "big.bin")));
        free(a), free(diff), free(files), free(id), free(repo);
        tf_world_free(w);
}
END_TEST

/* Two changesets from the same start, both changing line 2 of lines.txt
 * (and each adding a file of its own), accepted at the same time: one
 * applies, the other stays pending with git's reason, and the tree holds
 * exactly one of them. */
START_TEST(concurrent_accepts_one_file) {
        tf_world *w = tf_world_new(NULL);
        char *repo = make_repo(w);
        const char *a1[] = {"--executor", "shell", "--directory", repo, "--prompt",
                            "set -e; sed -i 's/^2$/two-one/' lines.txt; echo 1 > one.txt", NULL};
        const char *a2[] = {"--executor", "shell", "--directory", repo, "--prompt",
                            "set -e; sed -i 's/^2$/two-two/' lines.txt; echo 2 > two.txt", NULL};
        char *id1 = tf_dispatch(w, a1), *id2 = tf_dispatch(w, a2);
        json_object *s1 = tf_wait_settled(w, id1), *s2 = tf_wait_settled(w, id2);
        ck_assert_str_eq(tf_jstr(s1, "changesetStatus"), "pending");
        ck_assert_str_eq(tf_jstr(s2, "changesetStatus"), "pending");
        json_object_put(s1), json_object_put(s2);
        char *o1 = strdup(tf_path(w->root, "accept1")), *o2 = strdup(tf_path(w->root, "accept2"));
        free(tf_shf(w, NULL, "'%s' accept %s --json > '%s' 2>&1 & '%s' accept %s --json > '%s' 2>&1 & wait; true",
                    tf_bin("taskferry"), id1, o1, tf_bin("taskferry"), id2, o2));
        char *c1 = cs_status(w, id1), *c2 = cs_status(w, id2);
        bool first = streq(c1, "accepted");
        ck_assert_msg(first != streq(c2, "accepted"), "statuses %s and %s", c1, c2);
        ck_assert_str_eq(first ? c2 : c1, "pending");
        char *out = tf_read(first ? o2 : o1, NULL);
        ck_assert_msg(strstr(out, "lines.txt"), "the refused accept names no path: %s", out);
        char *line2 = tf_shf(w, repo, "sed -n 2p lines.txt; ls one.txt two.txt 2>/dev/null; true");
        ck_assert_str_eq(line2, first ? "two-one\none.txt" : "two-two\ntwo.txt");
        free(line2), free(out), free(c1), free(c2), free(o1), free(o2), free(id1), free(id2), free(repo);
        tf_world_free(w);
}
END_TEST

/* The base lives under the task's overlay root and goes with it. */
START_TEST(base_snapshot_under_overlay_root) {
        tf_world *w = tf_world_new(NULL);
        char *repo = make_repo(w);
        const char *argv[] = {"--executor", "shell", "--directory", repo, "--prompt",
                              "set -e; printf 'w\\n' >> a.txt; test ! -e \"$TASKFERRY_STATE_DIR/overlays\" || true", NULL};
        char *id = tf_dispatch(w, argv);
        json_object *st = tf_wait_settled(w, id);
        ck_assert_str_eq(tf_jstr(st, "changesetStatus"), "pending");
        json_object_put(st);
        char *tree = strdup_printf("%s/overlays/taskferry-cow-%s/base/tree", w->state, id);
        ck_assert_msg(tf_exists(tree), "no base at %s", tree);
        const char *rargv[] = {"reject", id, NULL};
        tf_run r = tf_cli(w, NULL, NULL, rargv);
        ck_assert_int_eq(r.exit_code, 0);
        tf_run_done(&r);
        ck_assert(!tf_exists(tree));
        free(tree), free(id), free(repo);
        tf_world_free(w);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("changeset-merge");
        TCase *tc = tcase_create("main");
        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, concurrent_user_edits_survive);
        tcase_add_test(tc, untouched_user_paths_absent_from_diff);
        tcase_add_test(tc, sparse_8g_file_is_left_out);
        tcase_add_test(tc, concurrent_accepts_one_file);
        tcase_add_test(tc, base_snapshot_under_overlay_root);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) { return tf_run_suite(suite()); }
