/* workspace.c: the git-free workspace root (the root subscriptions and list
 * filters use) against real git repositories, each case checked against
 * both the path it must be and what git's own formula says
 * (dirname(realpath(git rev-parse --git-common-dir)), --show-toplevel in a
 * submodule). */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "unit.h"
#include "workspace.h"

static char *tmp_root;

static void setup(void) { tmp_root = tf_tmpdir_new("test-workspace"); }

static void teardown(void) { tmp_root = tf_tmpdir_free(tmp_root); }

/* A shell command run in the test's dir. */
#define sh(cmd) free(tf_sh(tmp_root, "%s", cmd))

static char *git(const char *dir, const char *arg) {
        char *argv[] = { "git", "-C", (char *) dir, "rev-parse", (char *) arg, NULL };
        run_result r = {};
        ck_assert_int_eq(run_command(argv, NULL, NULL, 1 << 16, -1, &r), 0);
        char *out = NULL;
        if (r.exit_code == 0 && r.out) {
                size_t n = r.out_len;
                while (n && (r.out[n - 1] == '\n' || r.out[n - 1] == '\r')) n--;
                out = strndup(r.out, n);
        }
        run_result_done(&r);
        return out;
}

/* The spec's formula, with git itself. */
static char *git_root(const char *dir) {
        _cleanup_free_ char *common = git(dir, "--git-common-dir");
        if (!common) return realpath(dir, NULL);
        _cleanup_free_ char *joined = common[0] == '/' ? strdup(common) : strdup_printf("%s/%s", dir, common);
        _cleanup_free_ char *real = realpath(joined, NULL);
        ck_assert_ptr_nonnull(real);
        if (strstr(real, "/.git/modules/")) return git(dir, "--show-toplevel");
        char *slash = strrchr(real, '/');
        ck_assert_ptr_nonnull(slash);
        return strndup(real, slash == real ? 1 : (size_t) (slash - real));
}

/* workspace_root(dir) is want (relative to tmp_root), and git agrees. */
static void expect_root(const char *dir, const char *want, int want_found) {
        _cleanup_free_ char *d = strdup_printf("%s/%s", tmp_root, dir);
        _cleanup_free_ char *w = strdup_printf("%s%s%s", tmp_root, *want ? "/" : "", want);
        _cleanup_free_ char *root = NULL;
        ck_assert_int_eq(workspace_root_find(d, &root), want_found);
        ck_assert_str_eq(root, w);
        _cleanup_free_ char *root2 = workspace_root(d);
        ck_assert_str_eq(root2, w);
        _cleanup_free_ char *g = git_root(d);
        ck_assert_msg(streq_ptr(g, w), "git says %s for %s, want %s", strnull(g), d, w);
}

#define COMMIT "-c user.email=t@t -c user.name=t commit -q --allow-empty -m init"

START_TEST(plain_directory) {
        sh("mkdir -p plain/sub");
        /* git must not find a repository above the temp dir either */
        setenv("GIT_CEILING_DIRECTORIES", tmp_root, 1);
        expect_root("plain/sub", "plain/sub", 0);
        expect_root("plain", "plain", 0);
        /* a path that does not exist is its own root */
        _cleanup_free_ char *gone = strdup_printf("%s/gone", tmp_root);
        _cleanup_free_ char *r = NULL;
        ck_assert_int_eq(workspace_root_find(gone, &r), 0);
        ck_assert_str_eq(r, gone);
}
END_TEST

START_TEST(repository_and_subdirectory) {
        sh("git init -q repo && mkdir -p repo/src/deep && ln -s repo/src link");
        expect_root("repo", "repo", 1);
        expect_root("repo/src/deep", "repo", 1);
        /* through a symlink: the real path's root */
        expect_root("link", "repo", 1);
}
END_TEST

START_TEST(linked_worktree) {
        sh("git init -q repo && git -C repo " COMMIT " && "
           "git -C repo worktree add -q ../wt && git -C repo worktree add -q .worktrees/nested && mkdir wt/sub");
        expect_root("wt", "repo", 1);
        expect_root("wt/sub", "repo", 1);
        expect_root("repo/.worktrees/nested", "repo", 1);
}
END_TEST

START_TEST(submodule) {
        sh("git init -q sub && git -C sub " COMMIT " && git init -q super && git -C super " COMMIT " && "
           "git -C super -c protocol.file.allow=always submodule add -q \"$PWD/sub\" mods/sub 2>/dev/null && "
           "mkdir -p super/mods/sub/inner");
        expect_root("super/mods/sub", "super/mods/sub", 1);
        expect_root("super/mods/sub/inner", "super/mods/sub", 1);
        expect_root("super/mods", "super", 1);
}
END_TEST

/* A .git file naming a git dir elsewhere (git init --separate-git-dir): the
 * root is the parent of that git dir, as git's common dir says. */
START_TEST(git_file_pointing_elsewhere) {
        sh("mkdir store && git init -q --separate-git-dir store/proj.git work && mkdir work/sub");
        expect_root("work", "store", 1);
        expect_root("work/sub", "store", 1);
        /* a .git file that names nothing is no repository */
        sh("mkdir -p broken/sub && echo 'gitdir: ../nowhere' > broken/.git");
        setenv("GIT_CEILING_DIRECTORIES", tmp_root, 1);
        _cleanup_free_ char *b = strdup_printf("%s/broken/sub", tmp_root), *r = NULL;
        ck_assert_int_eq(workspace_root_find(b, &r), 0);
        ck_assert_str_eq(r, b);
}
END_TEST

START_TEST(same_workspace_matches_roots) {
        sh("git init -q repo && git -C repo " COMMIT " && git -C repo worktree add -q ../wt && mkdir -p repo/a other");
        _cleanup_free_ char *repo = strdup_printf("%s/repo", tmp_root), *a = strdup_printf("%s/repo/a", tmp_root),
                            *wt = strdup_printf("%s/wt", tmp_root), *other = strdup_printf("%s/other", tmp_root);
        setenv("GIT_CEILING_DIRECTORIES", tmp_root, 1);
        ck_assert(same_workspace(a, wt));
        ck_assert(same_workspace(repo, a));
        ck_assert(same_workspace(other, other));
        ck_assert(!same_workspace(other, repo));
        ck_assert(!same_workspace(wt, other));
}
END_TEST

TF_MAIN("workspace", "root", setup, teardown, 60, plain_directory, repository_and_subdirectory, linked_worktree,
        submodule, git_file_pointing_elsewhere, same_workspace_matches_roots)
