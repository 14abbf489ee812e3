/* What a changeset is, end to end through the CLI and an
 * isolated daemon with real bwrap, overlayfs and git: the difference between
 * the directory as the worker found it and what it left, over the paths it
 * touched, merged 3-way on accept. The user keeps editing while the worker
 * runs; none of their work is lost, and an accept that cannot merge touches
 * nothing and names the paths. */

#include <check.h>
#include <sys/stat.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

static char *make_repo(tf_world *w) {
        return tf_repo_new(w, NULL,
                           "printf 'one\\n' > a.txt && mkdir dir && printf 'old\\n' > dir/old.txt && printf 'b\\n' > b.txt && "
                           "seq 1 20 > lines.txt");
}

/* The case that lost data once: the worker appends to a.txt and removes dir; meanwhile
 * the user appends to a.txt, creates dir/new.txt and edits dir/old.txt (and
 * b.txt, which the worker never touched). The diff holds only the worker's
 * paths and lines; accept refuses naming dir/old.txt (deleted by the worker,
 * changed by the user) with the tree untouched; once the user drops that
 * edit, accept keeps both lines of a.txt, dir/new.txt and b.txt. */
TF_WORLD_TEST(concurrent_user_edits_survive) {
        char *repo = make_repo(w);
        json_object *st = NULL;
        char *id = tf_shell_paused(w, repo, "set -e; printf 'worker\\n' >> a.txt; rm -rf dir; " TF_PAUSE,
                                   "printf 'user\\n' >> a.txt; printf 'mine\\n' > dir/new.txt; printf 'edited\\n' > dir/old.txt; "
                                   "printf 'B\\n' > b.txt",
                                   &st);
        ck_assert_str_eq(tf_jstr(st, "changesetStatus"), "pending");
        json_object_put(st);

        char *diff = tf_task_diff(w, id), *files = tf_diff_files(diff);
        ck_assert_msg(streq(files, "a.txt|dir/old.txt|"), "diff names %s:\n%s", files, diff);
        ck_assert_msg(strstr(diff, "+worker\n") && !strstr(diff, "user"), "%s", diff);

        char *before = tf_tree_snapshot(repo, false);
        tf_run r = tf_accept(w, id);
        ck_assert_msg(r.exit_code != 0, "accept of a conflicting changeset succeeded: %s", r.out);
        ck_assert_msg(strstr(r.out, "dir/old.txt") || strstr(r.err, "dir/old.txt"), "reason names no path: %s %s", r.out,
                      r.err);
        tf_run_done(&r);
        char *after = tf_tree_snapshot(repo, false);
        ck_assert_str_eq(after, before);
        char *cs = tf_changeset_status(w, id);
        ck_assert_str_eq(cs, "pending");

        /* the user gives up their edit of dir/old.txt: it merges */
        free(tf_shf(w, repo, "printf 'old\\n' > dir/old.txt"));
        tf_accept_ok(w, id);
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
}
END_TEST

/* A path the user changed while the worker ran, and that the worker never
 * touched, is absent from the diff: dir/new.txt inside the dir the worker
 * deleted, b.txt edited, lines.txt deleted. Accept then keeps all of it. */
TF_WORLD_TEST(untouched_user_paths_absent_from_diff) {
        char *repo = make_repo(w);
        json_object *st = NULL;
        char *id = tf_shell_paused(w, repo, "set -e; rm -rf dir; printf 'w\\n' > w.txt; " TF_PAUSE,
                                   "printf 'mine\\n' > dir/new.txt; printf 'B\\n' > b.txt; rm lines.txt", &st);
        ck_assert_str_eq(tf_jstr(st, "changesetStatus"), "pending");
        json_object_put(st);
        char *diff = tf_task_diff(w, id), *files = tf_diff_files(diff);
        ck_assert_msg(streq(files, "dir/old.txt|w.txt|"), "diff names %s:\n%s", files, diff);
        tf_accept_ok(w, id);
        char *state = tf_shf(w, repo, "cat dir/new.txt b.txt w.txt; test ! -e dir/old.txt && test ! -e lines.txt && echo ok");
        ck_assert_str_eq(state, "mine\nB\nw\nok");
        free(state), free(diff), free(files), free(id), free(repo);
}
END_TEST

/* `truncate -s 8G big.bin`: settles within seconds with a warning naming
 * the file; the rest of the changeset accepts. */
TF_WORLD_TEST_ENV(sparse_8g_file_is_left_out, "TASKFERRY_TASK_DISK_MAX=32G") {
        char *repo = make_repo(w);
        char *id = tf_shell_pending(w, repo, NULL, "set -e; truncate -s 8G big.bin; printf 'w\\n' >> a.txt", NULL);
        const char *sargv[] = {"status", id, "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, sargv);
        ck_assert_msg(strstr(r.out, "big.bin") && strstr(r.out, "left out"), "no warning names big.bin: %s", r.out);
        tf_run_done(&r);
        char *diff = tf_task_diff(w, id), *files = tf_diff_files(diff);
        ck_assert_str_eq(files, "a.txt|");
        tf_accept_ok(w, id);
        char *a = tf_read(tf_path(repo, "a.txt"), NULL);
        ck_assert_str_eq(a, "one\nw\n");
        ck_assert(!tf_exists(tf_path(repo, "big.bin")));
        free(a), free(diff), free(files), free(id), free(repo);
}
END_TEST

/* Two changesets from the same start, both changing line 2 of lines.txt
 * (and each adding a file of its own), accepted at the same time: one
 * applies, the other stays pending with git's reason, and the tree holds
 * exactly one of them. */
TF_WORLD_TEST(concurrent_accepts_one_file) {
        char *repo = make_repo(w);
        char *id1 = tf_dispatch_shell(w, repo, NULL, "set -e; sed -i 's/^2$/two-one/' lines.txt; echo 1 > one.txt");
        char *id2 = tf_dispatch_shell(w, repo, NULL, "set -e; sed -i 's/^2$/two-two/' lines.txt; echo 2 > two.txt");
        json_object *s1 = tf_wait_settled(w, id1), *s2 = tf_wait_settled(w, id2);
        ck_assert_str_eq(tf_jstr(s1, "changesetStatus"), "pending");
        ck_assert_str_eq(tf_jstr(s2, "changesetStatus"), "pending");
        json_object_put(s1), json_object_put(s2);
        char *o1 = strdup(tf_path(w->root, "accept1")), *o2 = strdup(tf_path(w->root, "accept2"));
        free(tf_shf(w, NULL, "'%s' accept %s --json > '%s' 2>&1 & '%s' accept %s --json > '%s' 2>&1 & wait; true",
                    tf_bin("taskferry"), id1, o1, tf_bin("taskferry"), id2, o2));
        char *c1 = tf_changeset_status(w, id1), *c2 = tf_changeset_status(w, id2);
        bool first = streq(c1, "accepted");
        ck_assert_msg(first != streq(c2, "accepted"), "statuses %s and %s", c1, c2);
        ck_assert_str_eq(first ? c2 : c1, "pending");
        char *out = tf_read(first ? o2 : o1, NULL);
        ck_assert_msg(strstr(out, "lines.txt"), "the refused accept names no path: %s", out);
        char *line2 = tf_shf(w, repo, "sed -n 2p lines.txt; ls one.txt two.txt 2>/dev/null; true");
        ck_assert_str_eq(line2, first ? "two-one\none.txt" : "two-two\ntwo.txt");
        free(line2), free(out), free(c1), free(c2), free(o1), free(o2), free(id1), free(id2), free(repo);
}
END_TEST

/* The base lives under the task's overlay root and goes with it. */
TF_WORLD_TEST(base_snapshot_under_overlay_root) {
        char *repo = make_repo(w);
        char *id = tf_shell_pending(w, repo, NULL,
                                    "set -e; printf 'w\\n' >> a.txt; test ! -e \"$TASKFERRY_STATE_DIR/overlays\" || true", NULL);
        char *tree = strdup_printf("%s/overlays/taskferry-cow-%s/base/tree", w->state, id);
        ck_assert_msg(tf_exists(tree), "no base at %s", tree);
        const char *rargv[] = {"reject", id, NULL};
        tf_run r = tf_cli(w, NULL, NULL, rargv);
        ck_assert_int_eq(r.exit_code, 0);
        tf_run_done(&r);
        ck_assert(!tf_exists(tree));
        free(tree), free(id), free(repo);
}
END_TEST

int main(void) {
        return tf_run_tests("changeset-merge", "main", 600,
                            TF_TESTS(concurrent_user_edits_survive, untouched_user_paths_absent_from_diff,
                                     sparse_8g_file_is_left_out, concurrent_accepts_one_file,
                                     base_snapshot_under_overlay_root));
}
