/* Git worktrees: a worker in a linked worktree can git add and git commit inside its
 * sandbox; those writes land in an overlay of the common dir, never in the
 * real gitdir; the main checkout's HEAD, index and config are never
 * writable; the changeset is the working-tree change, and accept lands it in
 * the worktree. Also a dispatch into a subdirectory of a repository. */

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"

TF_WORLD_TEST(commit_in_linked_worktree) {
        char *main_repo = tf_repo_new(w, "main", NULL), *wt = tf_worktree_add(w, main_repo, "wt", "feature");
        char *gitdir = strdup(tf_path(main_repo, ".git"));
        char *before_git = tf_tree_snapshot(gitdir, false);
        char *before_main = tf_tree_snapshot(main_repo, true);
        char *before_wt_head = tf_shf(w, wt, "git rev-parse HEAD");
        const char *script =
                "set -e; echo new > new.txt; echo changed > f; git add new.txt f; "
                "git commit -qm 'worker commit'; git log --oneline | wc -l; "
                "(echo '[core]' >> \"$(git rev-parse --git-common-dir)/config\") 2>/dev/null && echo config-writable; "
                "(echo x > \"$(git rev-parse --git-common-dir)/HEAD\") 2>/dev/null && echo head-writable; "
                "echo committed";
        json_object *st = NULL;
        char *id = tf_shell_settled(w, wt, NULL, script, &st);
        char *msg = tf_task_message(w, id);
        ck_assert_msg(streq(tf_jstr(st, "status"), "done"), "worker failed: %s / %s", json_to_line(st, NULL), msg);
        ck_assert_msg(strstr(msg, "2\ncommitted"), "commit inside the sandbox failed: %s", msg);
        ck_assert_msg(!strstr(msg, "config-writable") && !strstr(msg, "head-writable"),
                      "the main checkout's HEAD or config was writable: %s", msg);
        json_object_put(st);
        /* nothing reached the real gitdir, the main checkout or the worktree */
        char *after_git = tf_tree_snapshot(gitdir, false);
        ck_assert_str_eq(before_git, after_git);
        char *after_main = tf_tree_snapshot(main_repo, true);
        ck_assert_str_eq(before_main, after_main);
        char *after_wt_head = tf_shf(w, wt, "git rev-parse HEAD");
        ck_assert_str_eq(before_wt_head, after_wt_head);
        ck_assert(!tf_exists(tf_path(wt, "new.txt")));
        /* the changeset is the working-tree change; accept lands it in the worktree */
        tf_accept_ok(w, id);
        char *nt = tf_read(tf_path(wt, "new.txt"), NULL), *ft = tf_read(tf_path(wt, "f"), NULL);
        ck_assert_str_eq(nt, "new\n");
        ck_assert_str_eq(ft, "changed\n");
        free(nt), free(ft);
        free(msg), free(id), free(before_git), free(after_git), free(before_main), free(after_main);
        free(before_wt_head), free(after_wt_head), free(gitdir), free(wt), free(main_repo);
}
END_TEST

/* A dispatch into a subdirectory: git works in the sandbox (status, commit)
 * against an overlay of the repository's .git. */
TF_WORLD_TEST(commit_in_subdirectory) {
        char *repo = tf_repo_new(w, NULL, "mkdir sub && echo base > sub/f");
        char *sub = strdup(tf_path(repo, "sub"));
        char *gitdir = strdup(tf_path(repo, ".git"));
        char *before = tf_tree_snapshot(gitdir, false);
        const char *script = "set -e; echo more >> f; git commit -qam 'worker'; git log --oneline | wc -l; echo ok";
        json_object *st = NULL;
        char *id = tf_shell_settled(w, sub, NULL, script, &st);
        char *msg = tf_task_message(w, id);
        ck_assert_msg(streq(tf_jstr(st, "status"), "done") && strstr(msg, "2\nok"), "%s / %s", json_to_line(st, NULL), msg);
        ck_assert_str_eq(tf_jstr(st, "changesetStatus"), "pending");
        json_object_put(st);
        char *after = tf_tree_snapshot(gitdir, false);
        ck_assert_str_eq(before, after);
        free(after), free(before), free(msg), free(id), free(gitdir), free(sub), free(repo);
}
END_TEST

int main(void) {
        return tf_run_tests("worktree", "worktree", 120, TF_TESTS(commit_in_linked_worktree, commit_in_subdirectory));
}
