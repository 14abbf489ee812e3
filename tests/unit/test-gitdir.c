/* gitdir.c: the .git entry at a dir or above it, read without git, checked
 * against what real git says (git rev-parse --absolute-git-dir and
 * --git-common-dir) for a repository, a subdirectory, a linked worktree, a
 * submodule-style gitdir file; and what is no work tree. */

#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gitdir.h"
#include "macro.h"
#include "unit.h"

static char *dir;

static void setup(void) { dir = tf_tmpdir_new("gitdir"); }
static void teardown(void) { dir = tf_tmpdir_free(dir); }

/* git_dirs_find(at) agrees with git run in at */
static void agrees_with_git(const char *at, const char *top) {
        git_dirs d;
        ck_assert_int_eq(git_dirs_find(at, &d), 1);
        _cleanup_free_ char *g = tf_sh(at, "git rev-parse --absolute-git-dir");
        _cleanup_free_ char *c = tf_sh(at, "cd \"$(git rev-parse --git-common-dir)\" && pwd -P");
        _cleanup_free_ char *t = realpath(top, NULL);
        ck_assert_str_eq(d.gitdir, g);
        ck_assert_str_eq(d.common, c);
        ck_assert_str_eq(d.top, t);
        git_dirs_done(&d);
        ck_assert_ptr_null(d.top);
        ck_assert_ptr_null(d.gitdir);
        ck_assert_ptr_null(d.common);
}

START_TEST(plain_repository_and_subdirs) {
        free(tf_sh(dir, "git init -q repo && mkdir -p repo/a/b"));
        _cleanup_free_ char *repo = tf_path(dir, "repo"), *sub = tf_path(dir, "repo/a/b");
        agrees_with_git(repo, repo);
        agrees_with_git(sub, repo);
        /* through a symlink and with .. in the path: canonical answers */
        tf_symlink(dir, "repo/a", "alias");
        _cleanup_free_ char *alias = tf_path(dir, "alias/b"), *dots = tf_path(dir, "repo/a/../a/b");
        agrees_with_git(alias, repo);
        agrees_with_git(dots, repo);
}
END_TEST

START_TEST(linked_worktree) {
        free(tf_sh(dir, "git init -q main && cd main && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m i"
                        " && git worktree add -q ../wt"));
        _cleanup_free_ char *wt = tf_path(dir, "wt"), *main_ = tf_path(dir, "main");
        agrees_with_git(wt, wt);
        git_dirs d;
        ck_assert_int_eq(git_dirs_find(wt, &d), 1);
        ck_assert_str_ne(d.gitdir, d.common); /* .git/worktrees/wt vs .git */
        _cleanup_free_ char *want = tf_path(main_, ".git");
        ck_assert_str_eq(d.common, want);
        git_dirs_done(&d);
}
END_TEST

START_TEST(gitdir_file_relative_and_absolute) {
        /* a .git file with a relative gitdir resolves against its own dir */
        free(tf_sh(dir, "mkdir store && git init -q --separate-git-dir=store/g.git work && mkdir -p work/deep"));
        _cleanup_free_ char *work = tf_path(dir, "work"), *deep = tf_path(dir, "work/deep");
        agrees_with_git(deep, work);
        free(tf_sh(dir, "printf 'gitdir: ../store/g.git\\n' > work/.git"));
        agrees_with_git(deep, work);
        /* spaces after the colon and trailing blanks are trimmed */
        free(tf_sh(dir, "printf 'gitdir:    ../store/g.git \\r\\n\\t' > work/.git"));
        git_dirs d;
        ck_assert_int_eq(git_dirs_find(deep, &d), 1);
        _cleanup_free_ char *g = tf_path(dir, "store/g.git");
        ck_assert_str_eq(d.gitdir, g);
        ck_assert_str_eq(d.common, g);
        git_dirs_done(&d);
}
END_TEST

START_TEST(broken_entries_are_passed_over) {
        /* an outer repository; inner dirs whose .git entries lead nowhere */
        free(tf_sh(dir, "git init -q outer && mkdir -p outer/a outer/b outer/c"));
        free(tf_sh(dir, "printf 'gitdir: /nonexistent/x\\n' > outer/a/.git"));
        free(tf_sh(dir, "printf 'not a gitdir line\\n' > outer/b/.git"));
        free(tf_sh(dir, "ln -s /nonexistent outer/c/.git"));
        _cleanup_free_ char *outer = tf_path(dir, "outer");
        const char *subs[] = {"outer/a", "outer/b", "outer/c"};
        for (size_t i = 0; i < ELEMENTSOF(subs); i++) {
                _cleanup_free_ char *p = tf_path(dir, subs[i]);
                git_dirs d;
                ck_assert_int_eq(git_dirs_find(p, &d), 1);
                ck_assert_str_eq(d.top, outer);
                git_dirs_done(&d);
        }
}
END_TEST

START_TEST(no_work_tree) {
        tf_mkdirs(dir, "plain/x");
        _cleanup_free_ char *p = tf_path(dir, "plain/x"), *missing = tf_path(dir, "missing");
        git_dirs d = {(char *) 0x1, (char *) 0x1, (char *) 0x1};
        /* the suite's dir under /var/tmp is in no repository */
        ck_assert_int_eq(git_dirs_find(p, &d), 0);
        ck_assert_ptr_null(d.top);
        ck_assert_ptr_null(d.gitdir);
        ck_assert_ptr_null(d.common);
        ck_assert_int_eq(git_dirs_find(missing, &d), 0);
        ck_assert_int_eq(git_dirs_find("", &d), 0);
        /* a file is no dir to start from, but its directory is looked at */
        free(tf_sh(dir, "git init -q r && touch r/f"));
        _cleanup_free_ char *f = tf_path(dir, "r/f");
        int r = git_dirs_find(f, &d);
        ck_assert_int_ge(r, 0);
        git_dirs_done(&d);
}
END_TEST

TF_MAIN("gitdir", "gitdir", setup, teardown, 0, plain_repository_and_subdirs, linked_worktree,
        gitdir_file_relative_and_absolute, broken_entries_are_passed_over, no_work_tree)
