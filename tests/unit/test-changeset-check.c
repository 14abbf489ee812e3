/* changeset_check_3way and changeset_live_head (changeset.h): the dry run
 * of an accept a settlement uses when HEAD moved while the worker ran, and
 * the reader of the HEAD it compares. The patches are made by git diff
 * straight from a real repository, with a real base snapshot; no overlay
 * (test-changeset covers extraction). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "changeset.h"
#include "macro.h"
#include "string-util.h"
#include "unit.h"

#define GIT "git -c user.name=t -c user.email=t@localhost -c commit.gpgsign=false"

typedef struct repo {
        char *top;   /* the suite's temp dir for this case */
        char *dir;   /* top/D: the repository */
        char *base;  /* top/base: the base snapshot, taken at HEAD */
        char *patch; /* top/patch: the worker's change, against the base */
} repo;

static void repo_done(repo *r) {
        free(r->dir);
        free(r->base);
        free(r->patch);
        r->top = tf_tmpdir_free(r->top);
}

/* D with a.txt (three lines) and b.txt committed, the base taken, and the
 * patch of `worker` (a shell command run in D) written, D put back. */
static void repo_init(repo *r, const char *worker, bool with_base) {
        r->top = tf_tmpdir_new("check");
        r->dir = tf_path(r->top, "D");
        r->base = with_base ? tf_path(r->top, "base") : NULL;
        r->patch = tf_path(r->top, "patch");
        free(tf_sh(NULL,
                   "mkdir '%s' && cd '%s' && git init -q && printf 'one\\ntwo\\nthree\\n' > a.txt && "
                   "printf 'b\\n' > b.txt && git add -A && " GIT " commit -qm init",
                   r->dir, r->dir));
        if (with_base) {
                _cleanup_free_ char *head = tf_sh(r->dir, "git rev-parse HEAD"), *err = NULL;
                ck_assert_msg(changeset_snapshot(r->dir, head, r->base, &err) == 0, "%s", strnull(err));
        }
        free(tf_sh(r->dir, "%s && git add -A && git diff --cached --binary --full-index > '%s' && "
                           "git reset -q --hard && git clean -qfd",
                   worker, r->patch));
}

/* Every byte of D that a write could change: the work tree's files, the
 * index and HEAD (read without git, which would refresh the index). */
static char *tree_hash(const repo *r) {
        return tf_sh(r->dir, "find . -path ./.git/objects -prune -o -path ./.git/logs -prune -o -type f -print0 | "
                             "LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum");
}

static int check(const repo *r, char **reason) {
        return changeset_check_3way(r->dir, r->patch, r->base, reason);
}

/* The user committed an unrelated change: the changeset still merges, and
 * the dry run wrote nothing; the accept then lands it. A bug that wrote in
 * check mode changes the hash; one that judged from HEAD's tree alone
 * fails the accept. */
static void clean_merge(bool with_base) {
        _cleanup_(repo_done) repo r = {};
        repo_init(&r, "printf 'one\\nTWO\\nthree\\n' > a.txt && printf 'new\\n' > c.txt", with_base);
        free(tf_sh(r.dir, "printf 'b2\\n' > b.txt && " GIT " commit -qam user"));
        _cleanup_free_ char *before = tree_hash(&r), *reason = NULL;
        ck_assert_msg(check(&r, &reason) == 1, "%s", strnull(reason));
        ck_assert_ptr_null(reason);
        _cleanup_free_ char *after = tree_hash(&r);
        ck_assert_str_eq(before, after);
        ck_assert_msg(changeset_apply_3way(r.dir, r.patch, r.base, &reason) == 1, "%s", strnull(reason));
        _cleanup_free_ char *a = tf_sh(r.dir, "cat a.txt c.txt b.txt");
        ck_assert_str_eq(a, "one\nTWO\nthree\nnew\nb2");
}

START_TEST(test_clean_with_base) {
        clean_merge(true);
}
END_TEST

START_TEST(test_clean_without_base) {
        clean_merge(false);
}
END_TEST

/* The user committed a change to the same line: 0, the reason names the
 * path (and only it), does not claim an apply happened, and the tree is
 * byte-identical; the accept refuses the same way. */
START_TEST(test_conflict_names_paths) {
        _cleanup_(repo_done) repo r = {};
        repo_init(&r, "printf 'one\\nWORKER\\nthree\\n' > a.txt && printf 'w\\n' > 'sp ace.txt'", true);
        free(tf_sh(r.dir, "printf 'one\\nUSER\\nthree\\n' > a.txt && printf 'u\\n' > 'sp ace.txt' && git add -A && "
                          GIT " commit -qm user"));
        _cleanup_free_ char *before = tree_hash(&r), *reason = NULL, *areason = NULL;
        int k = check(&r, &reason);
        ck_assert_msg(k == 0, "k=%d %s", k, strnull(reason));
        ck_assert_msg(reason && strstr(reason, "a.txt") && strstr(reason, "sp ace.txt") && !strstr(reason, "b.txt"),
                      "%s", strnull(reason));
        ck_assert_msg(!strstr(reason, "nothing was applied"), "%s", reason);
        _cleanup_free_ char *after = tree_hash(&r);
        ck_assert_str_eq(before, after);
        ck_assert_int_eq(changeset_apply_3way(r.dir, r.patch, r.base, &areason), 0);
        ck_assert_msg(areason && strstr(areason, "a.txt"), "%s", strnull(areason));
        _cleanup_free_ char *after2 = tree_hash(&r);
        ck_assert_str_eq(before, after2);
}
END_TEST

/* Without a base the plain check-then-apply judges: a conflicting line is 0
 * with git's reason, the tree untouched. */
START_TEST(test_conflict_without_base) {
        _cleanup_(repo_done) repo r = {};
        repo_init(&r, "printf 'one\\nWORKER\\nthree\\n' > a.txt", false);
        free(tf_sh(r.dir, "printf 'one\\nUSER\\nthree\\n' > a.txt && " GIT " commit -qam user"));
        _cleanup_free_ char *before = tree_hash(&r), *reason = NULL;
        ck_assert_int_eq(check(&r, &reason), 0);
        ck_assert_msg(reason && strstr(reason, "a.txt"), "%s", strnull(reason));
        _cleanup_free_ char *after = tree_hash(&r);
        ck_assert_str_eq(before, after);
}
END_TEST

/* The user committed the worker's very change (HEAD moved onto it): the
 * accept has nothing to do, so it would apply: 1. */
START_TEST(test_already_applied) {
        _cleanup_(repo_done) repo r = {};
        repo_init(&r, "printf 'one\\nTWO\\nthree\\n' > a.txt", true);
        free(tf_sh(r.dir, "printf 'one\\nTWO\\nthree\\n' > a.txt && " GIT " commit -qam same"));
        _cleanup_free_ char *reason = NULL;
        ck_assert_msg(check(&r, &reason) == 1, "%s", strnull(reason));
}
END_TEST

/* An empty patch (no changes) would apply; a missing directory or patch is
 * -errno with a reason; NULL arguments are refused, never dereferenced. */
START_TEST(test_errors) {
        _cleanup_(repo_done) repo r = {};
        repo_init(&r, "true", true);
        _cleanup_free_ char *reason = NULL;
        ck_assert_int_eq(check(&r, &reason), 1); /* the patch of `true` is empty */
        _cleanup_free_ char *missing = tf_path(r.top, "nope");
        int k = changeset_check_3way(missing, r.patch, r.base, &reason);
        ck_assert_int_eq(k, -ENOENT);
        ck_assert_ptr_nonnull(reason);
        free(reason);
        reason = NULL;
        k = changeset_check_3way(r.dir, missing, r.base, &reason);
        ck_assert_int_eq(k, -ENOENT);
        ck_assert_msg(reason && strstr(reason, "nope"), "%s", strnull(reason));
        free(reason);
        reason = NULL;
        ck_assert_int_lt(changeset_check_3way(NULL, r.patch, r.base, &reason), 0);
        free(reason);
        reason = NULL;
        ck_assert_int_lt(changeset_check_3way(r.dir, NULL, NULL, &reason), 0);
}
END_TEST

/* A patch that does not apply to its own base (garbage, or a hunk the base
 * never had): 0, nothing written. */
START_TEST(test_patch_not_of_its_base) {
        _cleanup_(repo_done) repo r = {};
        repo_init(&r, "printf 'one\\nTWO\\nthree\\n' > a.txt", true);
        free(tf_sh(NULL, "sed -i 's/^-two$/-zwei/' '%s'", r.patch));
        _cleanup_free_ char *before = tree_hash(&r), *reason = NULL;
        int k = check(&r, &reason);
        ck_assert_msg(k == 0, "k=%d %s", k, strnull(reason));
        ck_assert_ptr_nonnull(reason);
        _cleanup_free_ char *after = tree_hash(&r);
        ck_assert_str_eq(before, after);
}
END_TEST

/* HEAD as rev-parse says it; an unborn HEAD is the empty tree (what the shim
 * records); a directory in no repository, or none at all, cannot be told. */
START_TEST(test_live_head) {
        _cleanup_(repo_done) repo r = {};
        repo_init(&r, "true", false);
        _cleanup_free_ char *want = tf_sh(r.dir, "git rev-parse HEAD"), *got = NULL;
        ck_assert_int_eq(changeset_live_head(r.dir, &got), 1);
        ck_assert_str_eq(got, want);
        free(got);
        got = NULL;
        free(tf_sh(r.dir, GIT " commit -q --allow-empty -m again"));
        ck_assert_int_eq(changeset_live_head(r.dir, &got), 1);
        ck_assert_str_ne(got, want);
        free(got);
        got = NULL;
        _cleanup_free_ char *unborn = tf_path(r.top, "U"), *plain = tf_path(r.top, "plain");
        free(tf_sh(NULL, "mkdir '%s' '%s' && git -C '%s' init -q", unborn, plain, unborn));
        ck_assert_int_eq(changeset_live_head(unborn, &got), 1);
        ck_assert_str_eq(got, "4b825dc642cb6eb9a060e54bf8d69288fbee4904");
        free(got);
        got = NULL;
        ck_assert_int_eq(changeset_live_head(plain, &got), 0);
        ck_assert_ptr_null(got);
        _cleanup_free_ char *missing = tf_path(r.top, "missing");
        ck_assert_int_eq(changeset_live_head(missing, &got), 0);
        ck_assert_int_eq(changeset_live_head(NULL, &got), 0);
        ck_assert_ptr_null(got);
}
END_TEST

TF_MAIN("changeset-check", "check", NULL, NULL, 0, test_clean_with_base, test_clean_without_base,
        test_conflict_names_paths, test_conflict_without_base, test_already_applied, test_errors,
        test_patch_not_of_its_base, test_live_head)
