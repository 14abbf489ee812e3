/* A hostile worker against the daemon core: the base snapshot the
 * shim takes, extraction over the touched paths of the upper dir, the 3-way
 * accept into the user's live tree, and the method table behind the task
 * socket. Each case is one way out tried; a case that passes guards a hole
 * staying shut. A case that still escapes carries an OPEN comment naming
 * where the fix belongs and runs only with TASKFERRY_TEST_OPEN_ATTACKS=1.
 * Runs as whoever runs the suite (root and an unprivileged user). */

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "utf8.h"

static char *make_repo(tf_world *w) {
        return tf_repo_new(w, NULL, "printf 'one\\n' > a.txt && mkdir dir && printf 'old\\n' > dir/old.txt && printf 'b\\n' > b.txt");
}

static void assert_pending(json_object *st) {
        ck_assert_msg(streq_ptr(json_get_string(st, "changesetStatus"), "pending") &&
                              !json_get_string(st, "changesetError"),
                      "not a clean pending changeset: %s", json_to_line(st, NULL));
}

/* A shell task in repo that left a clean pending changeset; its id. */
static char *pending(tf_world *w, const char *repo, const char *script) {
        json_object *st = NULL;
        char *id = tf_shell_pending(w, repo, NULL, script, &st);
        assert_pending(st);
        json_object_put(st);
        return id;
}

/* The same for a worker paused (TF_PAUSE) while the user runs meanwhile in repo. */
static char *pending_paused(tf_world *w, const char *repo, const char *script, const char *meanwhile) {
        json_object *st = NULL;
        char *id = tf_shell_paused(w, repo, script, meanwhile, &st);
        assert_pending(st);
        json_object_put(st);
        return id;
}

/* The task's diff (malloc'd), asserting the paths it changes (as tf_diff_files gives them). */
static char *diff_names(tf_world *w, const char *id, const char *want) {
        char *diff = tf_task_diff(w, id);
        _cleanup_free_ char *files = tf_diff_files(diff);
        ck_assert_msg(streq(files, want), "the diff names %s, want %s:\n%s", files, want, diff);
        return diff;
}

/* The round trip of most attacks below: a world with the repo (`setup` run
 * in it first, when given), a worker script that leaves a clean pending
 * changeset of exactly `names`, the accept, and then the shell command
 * `after`, run in the repo, prints want. */
typedef struct round_trip {
        const char *setup, *script, *names, *after, *want;
} round_trip;

static void accept_round_trip(const round_trip *t) {
        tf_world *w = tf_world_new(NULL);
        char *repo = make_repo(w);
        if (t->setup) free(tf_shf(w, repo, "%s", t->setup));
        char *id = pending(w, repo, t->script);
        free(diff_names(w, id, t->names));
        tf_accept_ok(w, id);
        char *got = tf_shf(w, repo, "%s", t->after);
        ck_assert_str_eq(got, t->want);
        free(got), free(id), free(repo);
        tf_world_free(w);
}

static char *status_text(tf_world *w, const char *id) {
        const char *argv[] = {"status", id, "--full", "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        ck_assert_int_eq(r.exit_code, 0);
        char *s = strdup(r.out);
        tf_run_done(&r);
        return s;
}

/* ---- 1. accept by 3-way merge into the live tree ---- */

/* Attack: a deletion's path is a pathspec. The worker deletes "a[1].txt"
 * and "b?.txt" (names the user's repo has); were the whiteouts' paths
 * passed to `git rm --cached` as plain pathspecs, the glob would also take
 * a1.txt and bb.txt, which the worker never touched: the diff would
 * delete them and accept would remove them from the user's tree. */
START_TEST(whiteout_name_is_not_a_glob) {
        accept_round_trip(&(round_trip){
                .setup = "set -e; for f in 'a[1].txt' a1.txt 'b?.txt' bb.txt 'c*' cat ':(glob)**' '*'; do echo \"$f\" > \"$f\"; "
                         "done; git add -A && git -c user.email=u@x -c user.name=u commit -qm globs",
                .script = "set -e; rm -f 'a[1].txt' 'b?.txt' 'c*' ':(glob)**' '*'",
                .names = "*|:(glob)**|a[1].txt|b?.txt|c*|",
                .after = "ls -A | LC_ALL=C sort | tr '\\n' ' '",
                .want = ".git a.txt a1.txt b.txt bb.txt cat dir"});
}
END_TEST

/* Attack: names that are options, pathspec magic, quotes, newlines, bytes
 * that are not UTF-8. Accept must write exactly those names (and only in
 * the task's directory). */
TF_WORLD_TEST(odd_names_round_trip) {
        char *repo = make_repo(w);
        const char *script =
                "set -e; for f in -rf --help ':(top)evil' ':!a.txt' ':x' 'q\"uote' \"s'q\" 'sp ace' 'back\\slash' "
                "'-d'; do printf '%s\\n' \"$f\" > ./\"$f\"; done; "
                "printf 'nl\\n' > \"$(printf 'new\\nline')\"; printf 'ff\\n' > \"$(printf '\\377\\376')\"; "
                "mkdir -p ./--git-dir=x && echo z > ./--git-dir=x/y";
        char *id = pending(w, repo, script);
        char *before_outside = tf_tree_snapshot(w->repo_parent, false);
        tf_accept_ok(w, id);
        char *got = tf_shf(w, repo,
                           "for f in -rf --help ':(top)evil' ':!a.txt' ':x' 'q\"uote' \"s'q\" 'sp ace' 'back\\slash' -d "
                           "--git-dir=x/y; do cat ./\"$f\"; done; cat \"$(printf 'new\\nline')\" \"$(printf '\\377\\376')\"; "
                           "cat a.txt; ls -A | wc -l; git status --porcelain | wc -l");
        ck_assert_str_eq(got, "-rf\n--help\n:(top)evil\n:!a.txt\n:x\nq\"uote\ns'q\nsp ace\nback\\slash\n-d\nz\nnl\nff\n"
                              "one\n18\n13");
        /* nothing appeared next to the repository */
        char *after_outside = tf_tree_snapshot(w->repo_parent, false);
        ck_assert(!strstr(after_outside, "./evil") && !strstr(after_outside, "./x "));
        free(before_outside), free(after_outside), free(got), free(id), free(repo);
}
END_TEST

/* Attack: while the worker runs, the user turns dir into a symlink to a
 * directory outside the repository (or it was always one: a monorepo link).
 * The worker edits dir/old.txt and adds dir/new.txt. Accept must not write
 * through the link: it refuses (tree untouched) and the outside dir stays. */
TF_WORLD_TEST(accept_never_writes_through_user_symlink) {
        char *repo = make_repo(w);
        char *outside = strdup(tf_path(w->repo_parent, "outside"));
        free(tf_shf(w, NULL, "mkdir -p %s && printf 'theirs\\n' > %s/old.txt", outside, outside));
        char *id = pending_paused(w, repo,
                                  "set -e; printf 'w\\n' >> dir/old.txt; printf 'n\\n' > dir/new.txt; printf 'w\\n' >> a.txt; "
                                  TF_PAUSE,
                                  "rm -rf dir && ln -s ../outside dir");
        char *before = tf_tree_snapshot(w->repo_parent, false);
        tf_run r = tf_accept(w, id);
        char *after = tf_tree_snapshot(w->repo_parent, false);
        ck_assert_msg(r.exit_code != 0, "accept wrote through the user's symlink: %s", r.out);
        tf_run_done(&r);
        ck_assert_str_eq(after, before);
        ck_assert(!tf_exists(tf_path(outside, "new.txt")));
        char *o = tf_read(tf_path(outside, "old.txt"), NULL);
        ck_assert_str_eq(o, "theirs\n");
        free(o), free(before), free(after), free(id), free(outside), free(repo);
}
END_TEST

/* Attack: the worker plants symlinks (dir -> outside, a link to ~/.ssh),
 * then a second task writes "through" them. The first accept lands the
 * links (the diff shows them); the second task's writes land in the
 * sandbox's view only, and its accept replaces the link by a directory
 * instead of following it. Nothing outside the repository changes. */
TF_WORLD_TEST(planted_symlinks_are_never_followed) {
        char *repo = make_repo(w);
        char *outside = strdup(tf_path(w->repo_parent, "outside"));
        free(tf_shf(w, NULL, "mkdir -p %s %s/.ssh && echo key > %s/.ssh/authorized_keys", outside, w->home, w->home));
        char *s1 = strdup_printf("set -e; rm -rf dir; ln -s %s dir; ln -s %s/.ssh ssh", outside, w->home);
        char *id = pending(w, repo, s1);
        char *diff = tf_task_diff(w, id);
        ck_assert_msg(strstr(diff, "new file mode 120000") && strstr(diff, "+++ b/ssh"), "%s", diff);
        tf_accept_reviewed_ok(w, id, repo); /* two symlinks out of the repository */
        char *home_before = tf_tree_snapshot(w->home, false), *out_before = tf_tree_snapshot(outside, false);
        const char *s2 = "echo pwn > dir/x 2>/dev/null; echo pwn >> ssh/authorized_keys 2>/dev/null; "
                         "rm dir ssh; mkdir dir ssh; echo mine > dir/x; echo mine > ssh/authorized_keys; true";
        char *id2 = pending(w, repo, s2);
        tf_accept_ok(w, id2);
        char *home_after = tf_tree_snapshot(w->home, false), *out_after = tf_tree_snapshot(outside, false);
        ck_assert_str_eq(home_after, home_before);
        ck_assert_str_eq(out_after, out_before);
        char *got = tf_shf(w, repo, "test -d dir && test ! -L dir && test ! -L ssh && cat dir/x ssh/authorized_keys");
        ck_assert_str_eq(got, "mine\nmine");
        free(got), free(home_before), free(home_after), free(out_before), free(out_after), free(diff), free(id), free(id2);
        free(s1), free(outside), free(repo);
}
END_TEST

/* Attack: an accept that fails while writing (a read-only directory of
 * the user's, a full disk the worker's bulk caused). `git apply --check`
 * passes, then the write of ro/x.txt fails after a.txt was written: the
 * tree must not be left half applied. A read-only bind mount as root (root
 * ignores modes), a 0555 directory otherwise. */
TF_WORLD_TEST(accept_failing_midway_is_rolled_back) {
        char *repo = make_repo(w);
        free(tf_shf(w, repo, "mkdir ro && echo x > ro/x.txt && git add ro && git -c user.email=u@x -c user.name=u "
                             "commit -qm ro"));
        char *id = pending(w, repo, "set -e; printf 'w\\n' >> a.txt; printf 'w\\n' >> ro/x.txt; printf 'w\\n' >> b.txt");
        char *ro = strdup(tf_path(repo, "ro"));
        bool root = geteuid() == 0;
        if (root) free(tf_shf(w, NULL, "mount --bind %s %s && mount -o remount,bind,ro %s", ro, ro, ro));
        else ck_assert_int_eq(chmod(ro, 0555), 0);
        char *before = tf_tree_snapshot(repo, false);
        tf_run r = tf_accept(w, id);
        char *after = tf_tree_snapshot(repo, false);
        if (root) free(tf_shf(w, NULL, "umount %s", ro));
        else (void) chmod(ro, 0755);
        ck_assert_msg(r.exit_code != 0, "accept into a read-only dir succeeded: %s", r.out);
        if (!streq(after, before)) {
                char *a = tf_read(tf_path(repo, "a.txt"), NULL);
                ck_abort_msg("a failed accept left the tree half applied (a.txt: %s): %.400s %.400s", a, r.out, r.err);
        }
        ck_assert_msg(strstr(r.out, "restored") || strstr(r.err, "restored"), "%s %s", r.out, r.err);
        tf_run_done(&r);
        char *cs = tf_changeset_status(w, id);
        ck_assert_str_eq(cs, "pending");
        /* writable again: it lands whole */
        tf_accept_ok(w, id);
        char *got = tf_shf(w, repo, "cat a.txt ro/x.txt b.txt");
        ck_assert_str_eq(got, "one\nw\nx\nw\nb\nw");
        free(got), free(cs), free(before), free(after), free(ro), free(id), free(repo);
}
END_TEST

/* Attack: .git, .git/hooks, a nested .git, a .gitmodules symlink written by
 * the worker. None of it is in the diff; accept leaves the user's .git as
 * it was; .gitattributes (a regular file) is an ordinary change and runs no
 * filter on accept. */
TF_WORLD_TEST(worker_git_metadata_never_lands) {
        char *repo = make_repo(w);
        char *marker = strdup(tf_path(w->root, "ran"));
        char *script = strdup_printf(
                "set -e; printf '#!/bin/sh\\necho hook >> %s\\n' > .git/hooks/post-checkout; chmod +x .git/hooks/post-checkout; "
                "printf '[core]\\n\\tfsmonitor = touch %s\\n[filter \"x\"]\\n\\tclean = touch %s\\n\\tsmudge = touch %s\\n' "
                ">> .git/config; mkdir -p sub/.git/hooks && echo x > sub/.git/HEAD && echo y > sub/file; "
                "ln -s /etc/passwd .gitmodules; printf '* filter=x diff=x merge=x\\n' > .gitattributes; "
                "printf 'w\\n' >> a.txt",
                marker, marker, marker, marker);
        char *git_before = tf_tree_snapshot(tf_path(repo, ".git"), false);
        char *id = pending(w, repo, script);
        char *diff = diff_names(w, id, ".gitattributes|a.txt|sub/file|");
        tf_accept_reviewed_ok(w, id, repo); /* a .gitattributes */
        /* the index accept leaves is the user's (nothing staged); .git otherwise untouched */
        char *git_after = tf_tree_snapshot(tf_path(repo, ".git"), false);
        ck_assert_str_eq(git_after, git_before);
        ck_assert_msg(!tf_exists(marker), "a worker-planted program ran during extraction or accept");
        free(git_before), free(git_after), free(diff), free(id), free(script), free(marker), free(repo);
}
END_TEST

/* Attack: type swaps. The worker turns the file a.txt into a directory and
 * the directory dir into a file, while the user adds dir/user.txt (a file
 * the worker never saw). The user's file must survive: accept either
 * refuses with the tree untouched or keeps dir/user.txt. */
TF_WORLD_TEST(file_dir_swaps_keep_user_files) {
        char *repo = make_repo(w);
        char *id = pending_paused(w, repo,
                                  "set -e; rm a.txt; mkdir a.txt; echo in > a.txt/inner; rm -rf dir; echo file > dir; " TF_PAUSE,
                                  "printf 'mine\\n' > dir/user.txt");
        char *diff = diff_names(w, id, "a.txt|a.txt/inner|dir|dir/old.txt|");
        char *before = tf_tree_snapshot(repo, false);
        tf_run r = tf_accept(w, id);
        if (r.exit_code != 0) {
                char *after = tf_tree_snapshot(repo, false);
                ck_assert_str_eq(after, before);
                free(after);
        }
        tf_run_done(&r);
        char *u = tf_read(tf_path(repo, "dir/user.txt"), NULL);
        ck_assert_str_eq(u, "mine\n");
        /* once the user moves it away, the swap lands */
        free(tf_shf(w, repo, "mv dir/user.txt user.txt"));
        tf_accept_ok(w, id);
        char *got = tf_shf(w, repo, "cat a.txt/inner dir user.txt");
        ck_assert_str_eq(got, "in\nfile\nmine");
        free(got), free(u), free(before), free(diff), free(id), free(repo);
}
END_TEST

/* Attack: the worker replaces the directory dir (where the user adds
 * dir/user.txt meanwhile) by a symlink to ~/.ssh. Accept must neither
 * lose the user's file nor write into ~/.ssh: it refuses with the tree
 * untouched (or keeps dir/user.txt); with the file moved away the link
 * lands as the diff shows it, and ~/.ssh never changes. */
TF_WORLD_TEST(symlink_replacing_user_directory) {
        char *repo = make_repo(w);
        free(tf_shf(w, NULL, "mkdir -p %s/.ssh && echo key > %s/.ssh/authorized_keys", w->home, w->home));
        char *script = strdup_printf("set -e; rm -rf dir; ln -s %s/.ssh dir; " TF_PAUSE, w->home);
        char *id = pending_paused(w, repo, script, "printf 'mine\\n' > dir/user.txt");
        char *ssh_before = tf_tree_snapshot(tf_path(w->home, ".ssh"), false), *before = tf_tree_snapshot(repo, false);
        /* a symlink out of the repository: refused until reviewed */
        const char *argv[] = {"accept", id, "--allow-config", "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        if (r.exit_code != 0) {
                char *after = tf_tree_snapshot(repo, false);
                ck_assert_str_eq(after, before);
                free(after);
        }
        tf_run_done(&r);
        char *u = tf_read(tf_path(repo, "dir/user.txt"), NULL);
        ck_assert_str_eq(u, "mine\n");
        free(tf_shf(w, repo, "mv dir/user.txt user.txt"));
        tf_accept_reviewed_ok(w, id, repo);
        char *ssh_after = tf_tree_snapshot(tf_path(w->home, ".ssh"), false);
        ck_assert_str_eq(ssh_after, ssh_before);
        char *got = tf_shf(w, repo, "readlink dir; cat user.txt");
        char *want = strdup_printf("%s/.ssh\nmine", w->home);
        ck_assert_str_eq(got, want);
        free(want), free(got), free(u), free(ssh_before), free(ssh_after), free(before), free(script), free(id), free(repo);
}
END_TEST

/* Attack: the worker deletes everything it can see, including a file the
 * user created after the task started (the overlay's lower is the live
 * tree, so the worker sees it) and an ignored file. Only the files of the
 * base are deleted; the user's late file and the ignored one survive. */
TF_WORLD_TEST(whiteouts_of_files_the_base_lacks) {
        char *repo = make_repo(w);
        free(tf_shf(w, repo, "echo .env > .gitignore && echo SECRET > .env && git add .gitignore && "
                             "git -c user.email=u@x -c user.name=u commit -qm ignore"));
        char *id = pending_paused(w, repo,
                                  "set -e; " TF_PAUSE "; ls > \"$TASKFERRY_OUTPUT_DIR/seen\"; "
                                  "rm -rf ./* .env .gitignore; echo gone > gone.txt",
                                  "printf 'late\\n' > late.txt");
        char *diff = diff_names(w, id, ".gitignore|a.txt|b.txt|dir/old.txt|gone.txt|");
        tf_accept_ok(w, id);
        char *got = tf_shf(w, repo, "cat late.txt .env gone.txt; ls -A | LC_ALL=C sort | tr '\\n' ' '");
        ck_assert_str_eq(got, "late\nSECRET\ngone\n.env .git gone.txt late.txt");
        free(got), free(diff), free(id), free(repo);
}
END_TEST

/* A directory the worker removes and makes again is opaque in the upper
 * dir: its old files are gone, whichever xattr namespace the sandbox's
 * overlay wrote the mark in (trusted. for a root daemon, user. otherwise). */
START_TEST(recreated_directory_drops_old_files) {
        accept_round_trip(&(round_trip){.script = "set -e; rm -rf dir; mkdir dir; printf 'n\\n' > dir/n.txt",
                                        .names = "dir/n.txt|dir/old.txt|",
                                        .after = "ls dir",
                                        .want = "n.txt"});
}
END_TEST

/* Attack: overlay xattrs. A worker that could set user.overlay.opaque on a
 * directory would make extraction take the base's files in it as deleted;
 * user.overlay.redirect / metacopy would send it the long way (whole
 * trees). Through the merged view overlayfs escapes them (stored as
 * user.overlay.overlay.*, Linux 6.7+) or refuses them; the upper dir holds
 * none as overlayfs reads them and the diff holds only the real changes. */
TF_WORLD_TEST(overlay_xattrs_from_the_worker) {
        char *repo = make_repo(w);
        free(tf_shf(w, repo, "mkdir keep && echo k > keep/k.txt && git add keep && git -c user.email=u@x -c user.name=u "
                             "commit -qm keep"));
        const char *script =
                "printf 'w\\n' >> dir/old.txt; printf 'n\\n' > dir/n.txt; "
                "python3 -c 'import os\n"
                "for p, n, v in ((\"dir\", \"user.overlay.opaque\", b\"y\"), (\"dir\", \"trusted.overlay.opaque\", b\"y\"),\n"
                "    (\"keep\", \"user.overlay.opaque\", b\"y\"),\n"
                "    (\"dir/old.txt\", \"user.overlay.metacopy\", b\"\"), (\"dir/n.txt\", \"user.overlay.redirect\", b\"/a.txt\"),\n"
                "    (\"dir\", \"user.overlay.redirect\", b\"/\"), (\"b.txt\", \"user.overlay.whiteout\", b\"y\")):\n"
                "    try:\n"
                "        os.setxattr(p, n, v); print(\"set\", p, n)\n"
                "    except OSError as e:\n"
                "        print(\"refused\", p, n, e.errno)\n' > \"$TASKFERRY_OUTPUT_DIR/xattrs\" 2>&1; true";
        char *id = pending(w, repo, script);
        /* the opaque mark alone (no metacopy or redirect to send extraction the long way) */
        char *id0 = pending(w, repo, "rm -rf dir2; mkdir dir2; printf 'w\\n' >> dir/old.txt; python3 -c 'import os; "
                                     "os.setxattr(\"keep\", \"user.overlay.opaque\", b\"y\")' 2>/dev/null; true");
        free(diff_names(w, id0, "dir/old.txt|")), free(id0);
        char *xattrs = tf_output_read(w, id, "xattrs");
        char *diff = tf_task_diff(w, id), *files = tf_diff_files(diff);
        ck_assert_msg(streq(files, "dir/n.txt|dir/old.txt|"), "diff names %s (xattrs: %s):\n%s", files, xattrs, diff);
        ck_assert_msg(strstr(diff, "+w\n") && !strstr(diff, "deleted file"), "%s", diff);
        /* the upper dir holds none of them as overlayfs reads them (a kernel that
         * escapes them stores user.overlay.overlay.*; an older one refuses) */
        char *up = strdup_printf("%s/overlays/taskferry-cow-%s/upper/main", w->state, id);
        char *x = tf_shf(w, up, "python3 -c 'import os\nfor r, ds, fs in os.walk(\".\"):\n    for n in ds + fs:\n"
                                "        p = os.path.join(r, n); print(p, os.listxattr(p, follow_symlinks=False))'");
        ck_assert_msg(!strstr(x, "'user.overlay.opaque'") && !strstr(x, "'user.overlay.metacopy'") &&
                              !strstr(x, "'user.overlay.redirect'") && !strstr(x, "'user.overlay.whiteout'"),
                      "the worker's xattrs reached the upper dir as overlay xattrs: %s", x);
        free(x), free(up);
        free(xattrs), free(diff), free(files), free(id), free(repo);
}
END_TEST

/* ---- 2. the base snapshot ---- */

/* Attack: the user's repository names programs in its config (fsmonitor,
 * a filter and diff driver for every path, a pager, hooks for index
 * changes), with an index git wrote with an untracked cache and a split
 * index, a gitlink and a sparse entry. Neither the base snapshot, the
 * extraction nor the accept runs any of them, and the changeset is right. */
TF_WORLD_TEST(snapshot_runs_no_repository_program) {
        char *repo = make_repo(w);
        char *marker = strdup(tf_path(w->root, "ran"));
        char *mark = strdup(tf_path(w->root, "mark.sh"));
        free(tf_shf(w, repo,
                    "set -e; printf '#!/bin/sh\\necho \"$0 $*\" >> %s\\ncat\\n' > %s; chmod +x %s; "
                    "git update-index --untracked-cache --split-index; git status >/dev/null; "
                    "git config core.fsmonitor %s; git config filter.x.clean %s; git config filter.x.smudge %s; "
                    "git config filter.x.process %s; git config diff.x.command %s; git config diff.x.textconv %s; "
                    "git config diff.external %s; git config core.pager %s; git config merge.x.driver %s; "
                    "mkdir -p hooks; for h in post-index-change post-checkout pre-commit post-merge reference-transaction; "
                    "do cp %s hooks/$h; done; git config core.hooksPath \"$PWD/hooks\"; "
                    "printf '* filter=x diff=x merge=x\\n' > .gitattributes; "
                    "echo u > untracked.txt",
                    marker, mark, mark, mark, mark, mark, mark, mark, mark, mark, mark, mark, mark));
        (void) unlink(marker);
        char *id = pending(w, repo, "set -e; printf 'w\\n' >> a.txt; printf 'w\\n' >> untracked.txt");
        char *diff = diff_names(w, id, "a.txt|untracked.txt|");
        ck_assert_msg(strstr(diff, "+w\n"), "%s", diff);
        tf_accept_ok(w, id);
        if (tf_exists(marker)) {
                char *ran = tf_read(marker, NULL);
                ck_abort_msg("a program named by the repository's config ran: %s", ran);
        }
        char *a = tf_read(tf_path(repo, "a.txt"), NULL);
        ck_assert_str_eq(a, "one\nw\n");
        free(a), free(diff), free(id), free(mark), free(marker), free(repo);
}
END_TEST

/* Attack: the directory's .git is a file pointing at another repository
 * (whose index, objects and config then serve the snapshot). The base is
 * the directory's own content, nothing of the other repository's tree
 * shows in the diff, and accept writes into the directory alone. */
TF_WORLD_TEST(dotgit_file_points_elsewhere) {
        char *repo = make_repo(w);
        char *other = strdup(tf_path(w->repo_parent, "other"));
        free(tf_shf(w, NULL,
                    "set -e; mkdir -p %s && cd %s && git init -q && echo SECRET-OTHER > secret.txt && echo o > a.txt && "
                    "git add -A && git -c user.email=u@x -c user.name=u commit -qm other && cd %s && rm -rf .git && "
                    "printf 'gitdir: %s/.git\n' > .git",
                    other, other, repo, other));
        char *other_before = tf_tree_snapshot(other, false);
        char *id = tf_shell_pending(w, repo, NULL, "set -e; printf 'w\\n' >> a.txt; echo n > new.txt", NULL);
        char *diff = tf_task_diff(w, id);
        ck_assert_msg(!strstr(diff, "SECRET-OTHER") && !strstr(diff, "secret.txt"), "%s", diff);
        ck_assert_msg(strstr(diff, "+w\n") && strstr(diff, "+n\n"), "%s", diff);
        tf_accept_ok(w, id);
        char *other_after = tf_tree_snapshot(other, false);
        ck_assert_str_eq(other_after, other_before);
        char *got = tf_shf(w, repo, "cat a.txt new.txt; test ! -e secret.txt && echo ok");
        ck_assert_str_eq(got, "one\nw\nn\nok");
        free(got), free(other_before), free(other_after), free(diff), free(id), free(other), free(repo);
}
END_TEST

/* Attack: the user's tree holds a fifo (untracked) and a socket when the
 * snapshot runs: were the snapshot to open them it would hang the shim
 * before the worker ever starts. */
TF_WORLD_TEST(snapshot_over_fifo_does_not_hang) {
        char *repo = make_repo(w);
        free(tf_shf(w, repo, "mkfifo pipe && python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind(\"sock\")'"));
        char *id = pending(w, repo, "printf 'w\\n' >> a.txt");
        char *diff = diff_names(w, id, "a.txt|");
        free(diff), free(id), free(repo);
}
END_TEST

/* Attack: the user's tree holds a tracked file made huge (a sparse 8 GiB
 * file, dirty) when the task starts. Hashing it into the base would stall
 * the shim before the worker starts (97 s once); it is left at its
 * index version in the base, and the task settles in seconds. */
TF_WORLD_TEST_ENV(snapshot_over_huge_dirty_file, "TASKFERRY_TASK_DISK_MAX=32G") {
        char *repo = make_repo(w);
        free(tf_shf(w, repo, "echo small > big.bin && git add big.bin && git -c user.email=u@x -c user.name=u commit -qm big "
                             "&& truncate -s 8G big.bin"));
        char *id = pending(w, repo, "printf 'w\\n' >> a.txt");
        char *diff = diff_names(w, id, "a.txt|");
        tf_accept_ok(w, id);
        struct stat sb;
        ck_assert(stat(tf_path(repo, "big.bin"), &sb) == 0 && sb.st_size == ((off_t) 8 << 30));
        free(diff), free(id), free(repo);
}
END_TEST

/* Attack: a sparse checkout (dir/ not checked out: skip-worktree entries,
 * absent from the tree). The worker, which never sees dir/old.txt, writes
 * one; another file is edited. Accept lands the worker's file or refuses
 * naming it, with the tree untouched; nothing is lost silently. */
TF_WORLD_TEST(sparse_checkout_base) {
        char *repo = make_repo(w);
        free(tf_shf(w, repo, "git sparse-checkout set --no-cone '/*' '!/dir/' 2>&1 && test ! -e dir/old.txt"));
        char *id = pending(w, repo, "set -e; test ! -e dir/old.txt; mkdir -p dir; printf 'new\\n' > dir/old.txt; "
                                    "printf 'w\\n' >> a.txt");
        char *diff = tf_task_diff(w, id);
        ck_assert_msg(strstr(diff, "+new\n") && strstr(diff, "+w\n"), "%s", diff);
        char *before = tf_tree_snapshot(repo, false);
        tf_run r = tf_accept(w, id);
        if (r.exit_code == 0) {
                char *got = tf_shf(w, repo, "cat dir/old.txt a.txt");
                ck_assert_str_eq(got, "new\none\nw");
                free(got);
        } else {
                char *after = tf_tree_snapshot(repo, false);
                ck_assert_str_eq(after, before);
                ck_assert_msg(strstr(r.out, "dir/old.txt") || strstr(r.err, "dir/old.txt"), "%s %s", r.out, r.err);
                if (getenv("TF_ATTACK_DEBUG")) fprintf(stderr, "sparse accept refused: %s %s\n", r.out, r.err);
                free(after);
        }
        tf_run_done(&r);
        free(before), free(diff), free(id), free(repo);
}
END_TEST

/* Attack: the base lives under the task's overlay root; a worker that could
 * write it would choose what the diff is computed against (hide a change
 * from the user, or make accept "merge" the user's files away). The
 * sandbox masks the overlay root: the worker can neither see nor write it. */
TF_WORLD_TEST(worker_cannot_reach_its_base) {
        char *repo = make_repo(w);
        char *script = strdup_printf(
                "b=%s/overlays/taskferry-cow-$TASKFERRY_TASK_ID/base; "
                "{ ls \"$b\"; cat \"$b/tree\"; echo 4b825dc642cb6eb9a060e54bf8d69288fbee4904 > \"$b/tree\"; "
                "ls %s/overlays; } > \"$TASKFERRY_OUTPUT_DIR/probe\" 2>&1; printf 'w\\n' >> a.txt; true",
                w->state, w->state);
        char *id = pending(w, repo, script);
        char *probe = tf_output_read(w, id, "probe");
        ck_assert_msg(!strstr(probe, "exclude\n") && !strstr(probe, "tree\n"), "the worker saw its base: %s", probe);
        char *tree = strdup_printf("%s/overlays/taskferry-cow-%s/base/tree", w->state, id);
        char *t = tf_read(tree, NULL);
        ck_assert_msg(!strstr(t, "4b825dc642cb6eb9a060e54bf8d69288fbee4904"), "the worker rewrote its base");
        char *diff = diff_names(w, id, "a.txt|");
        free(t), free(tree), free(probe), free(diff), free(id), free(script), free(repo);
}
END_TEST

/* ---- 3. extraction ---- */

/* Attack: files at the size bound, a sparse file, a fifo, a socket, a hard
 * link, a symlink to a secret. Under the bound extracts, over it is left
 * out with a warning, special files are left out without being opened, and
 * settlement stays quick. */
TF_WORLD_TEST_ENV(file_max_and_special_files, "TASKFERRY_CHANGESET_FILE_MAX=4096", "TASKFERRY_TASK_DISK_MAX=32G") {
        char *repo = make_repo(w);
        const char *script =
                "set -e; head -c 4096 /dev/zero | tr '\\0' u > under; head -c 4097 /dev/zero | tr '\\0' o > over; "
                "truncate -s 8G sparse; mkfifo fifo; python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); "
                "s.bind(\"sock\")'; ln a.txt hard; ln -s /etc/shadow shadow; printf 'w\\n' >> a.txt";
        char *id = pending(w, repo, script);
        char *s = status_text(w, id);
        static const char *const out[] = {"\"over: left out", "\"sparse: left out", "\"fifo: left out",
                                          "\"sock: left out"};
        for (size_t i = 0; i < ELEMENTSOF(out); i++) ck_assert_msg(strstr(s, out[i]), "no warning %s: %s", out[i], s);
        ck_assert_msg(!strstr(s, "\"under: left out"), "%s", s);
        char *diff = diff_names(w, id, "a.txt|hard|shadow|under|");
        ck_assert_msg(!strstr(diff, "root:"), "the diff holds /etc/shadow's content");
        tf_accept_reviewed_ok(w, id, repo); /* a symlink to /etc/shadow */
        char *got = tf_shf(w, repo, "wc -c < under; cat hard; readlink shadow; ls over sparse fifo sock 2>&1 | wc -l");
        ck_assert_str_eq(got, "4096\none\nw\n/etc/shadow\n4"); /* hard shares a.txt's inode */
        free(got), free(s), free(diff), free(id), free(repo);
}
END_TEST

/* Attack: depth and width. A directory chain deeper than any walk bound,
 * a path longer than PATH_MAX, 10k files. Settlement must end (no hang, no
 * crash of the job); what git can represent is kept and accepts, the rest
 * is left out with a warning, and the ordinary edit is never lost. */
TF_WORLD_TEST(deep_and_wide_trees) {
        char *repo = make_repo(w);
        const char *script =
                "set -e; printf 'w\\n' >> a.txt; mkdir wide; (cd wide && seq 1 10000 | xargs touch); "
                "python3 -c 'import os\n"
                "os.chdir(\"dir\")\n"
                "for i in range(300):\n"
                "    os.mkdir(\"d\"); os.chdir(\"d\")\n"
                "open(\"leaf\", \"w\").write(\"deep\\n\")\n'; "
                "python3 -c 'import os\n"
                "os.mkdir(\"long\"); os.chdir(\"long\")\n"
                "for i in range(40):\n"
                "    n = \"x\" * 200; os.mkdir(n); os.chdir(n)\n"
                "open(\"leaf\", \"w\").write(\"long\\n\")\n'";
        json_object *st = NULL;
        char *id = tf_shell_done(w, repo, NULL, script, &st);
        ck_assert_msg(streq_ptr(json_get_string(st, "changesetStatus"), "pending"), "%s", json_to_line(st, NULL));
        /* before the fix: "cannot read the overlay's upper dir: File name too long", every change lost */
        ck_assert_msg(!json_get_string(st, "changesetError"), "extraction failed: %s", json_to_line(st, NULL));
        json_object_put(st);
        char *s = status_text(w, id);
        ck_assert_msg(strstr(s, "longer than PATH_MAX") && strstr(s, "nested deeper than"), "no warnings: %s", s);
        /* 10k new files: past the response cap, read the patch itself */
        char *pp = strdup_printf("%s/diffs/%s.patch", w->state, id);
        char *diff = tf_read(pp, NULL);
        ck_assert_msg(strstr(diff, "+w\n") && !strstr(diff, "+long\n") && !strstr(diff, "+deep\n"), "the patch keeps a "
                      "path over the bounds");
        free(diff), free(pp), free(s);
        tf_accept_ok(w, id);
        char *got = tf_shf(w, repo, "cat a.txt; ls wide | wc -l");
        ck_assert_str_eq(got, "one\nw\n10000");
        free(got), free(id), free(repo);
}
END_TEST

/* ---- 4. the daemon through the task socket ---- */

/* A python3 client the worker runs: sends the lines of $REQS (one JSON per
 * line, all in one write: pipelined), reads replies until every id was
 * answered or 10 s passed, prints "id count" per reply id and each reply. */
#define PEER_PY                                                                                                        \
        "import json, os, socket, sys, time\n"                                                                        \
        "s = socket.socket(socket.AF_UNIX); s.connect(os.environ['TASKFERRY_SOCKET_PATH'])\n"                        \
        "reqs = open(sys.argv[1], 'rb').read()\n"                                                                     \
        "want = int(sys.argv[2])\n"                                                                                   \
        "s.sendall(reqs)\n"                                                                                           \
        "buf = b''; seen = {}; s.settimeout(1.0); end = time.time() + 10\n"                                           \
        "while time.time() < end and sum(seen.values()) < want:\n"                                                   \
        "    try:\n"                                                                                                  \
        "        d = s.recv(1 << 20)\n"                                                                               \
        "    except socket.timeout:\n"                                                                                \
        "        continue\n"                                                                                          \
        "    if not d: break\n"                                                                                       \
        "    buf += d\n"                                                                                              \
        "    while b'\\n' in buf:\n"                                                                                  \
        "        line, buf = buf.split(b'\\n', 1)\n"                                                                  \
        "        try: f = json.loads(line)\n"                                                                         \
        "        except Exception: print('BADFRAME', line[:200]); continue\n"                                         \
        "        i = f.get('id'); seen[i] = seen.get(i, 0) + 1\n"                                                     \
        "        print('REPLY', json.dumps(f)[:300])\n"                                                               \
        "time.sleep(1)\n"                                                                                             \
        "s.settimeout(0.5)\n"                                                                                         \
        "try:\n"                                                                                                      \
        "    while True:\n"                                                                                           \
        "        d = s.recv(1 << 20)\n"                                                                               \
        "        if not d: break\n"                                                                                   \
        "        for line in d.split(b'\\n'):\n"                                                                      \
        "            if line.strip():\n"                                                                              \
        "                f = json.loads(line); i = f.get('id'); seen[i] = seen.get(i, 0) + 1\n"                       \
        "except Exception: pass\n"                                                                                    \
        "for i, n in sorted(seen.items(), key=lambda x: str(x[0])): print('COUNT', i, n)\n"

static char *write_peer(tf_world *w, const char *reqs) {
        char *py = strdup(tf_path(w->fixtures, "peer.py"));
        tf_write(py, PEER_PY, strlen(PEER_PY), 0644);
        tf_write(tf_path(w->fixtures, "reqs"), reqs, strlen(reqs), 0644);
        return py;
}

static int count_of(const char *out, const char *id) {
        char *key = strdup_printf("COUNT %s ", id);
        const char *p = strstr(out, key);
        int n = p ? atoi(p + strlen(key)) : 0;
        free(key);
        return n;
}

/* Attack: pipelined requests with odd method names (NUL, newline escapes,
 * very long), unknown fields, huge params, a wait on its own task with no
 * timeout and one with timeout 0, accept of its own task, requests with
 * the same id. Every request gets exactly one reply, the daemon lives on,
 * and another task's changeset is neither accepted, rejected nor cancelled. */
TF_WORLD_TEST(pipelined_hostile_requests) {
        char *repo = make_repo(w);
        /* the user's pending task, which the worker must not decide */
        char *victim = pending(w, repo, "printf 'v\\n' >> b.txt");
        _cleanup_free_ char *big = malloc(700001);
        memset(big, 'x', 700000);
        big[700000] = 0;
        char *reqs = strdup_printf(
                "{\"version\":1,\"id\":\"r1\",\"method\":\"task.status\",\"params\":{\"taskId\":\"SELF\"}}\n"
                "{\"version\":1,\"id\":\"r2\",\"method\":\"task.status\\u0000x\",\"params\":{}}\n"
                "{\"version\":1,\"id\":\"r3\",\"method\":\"task.\\nstatus\",\"params\":{}}\n"
                "{\"version\":1,\"id\":\"r4\",\"method\":\"%s\",\"params\":{}}\n"
                "{\"version\":1,\"id\":\"r5\",\"method\":\"task.status\",\"params\":{\"taskId\":\"SELF\",\"bogus\":[1,{\"a\":null}]},"
                "\"extra\":true}\n"
                "{\"version\":1,\"id\":\"r6\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"SELF\",\"timeoutMs\":0}}\n"
                "{\"version\":1,\"id\":\"r7\",\"method\":\"task.accept\",\"params\":{\"taskId\":\"%s\",\"force\":true}}\n"
                "{\"version\":1,\"id\":\"r8\",\"method\":\"task.reject\",\"params\":{\"taskId\":\"%s\"}}\n"
                "{\"version\":1,\"id\":\"r9\",\"method\":\"task.cancel\",\"params\":{\"taskId\":\"%s\"}}\n"
                "{\"version\":1,\"id\":\"r10\",\"method\":\"task.accept\",\"params\":{\"taskId\":\"SELF\"}}\n"
                "{\"version\":1,\"id\":\"r11\",\"method\":\"task.list\",\"params\":{\"directory\":\"%s\"}}\n"
                "{\"version\":1,\"id\":\"r12\",\"method\":\"task.result\",\"params\":{\"taskId\":\"%s\",\"fields\":[\"diff\"]}}\n"
                "{\"version\":1,\"id\":\"r13\",\"method\":\"task.status\",\"params\":{\"taskId\":\"SELF\",\"pad\":\"%s\"}}\n"
                "{\"version\":1,\"id\":\"r14\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"SELF\",\"timeoutMs\":-5}}\n"
                "{\"version\":1,\"id\":\"r15\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"SELF\",\"timeoutMs\":300,\"tailChars\":"
                "99999999999}}\n"
                "{\"version\":1,\"id\":\"r16\",\"method\":\"task.status\",\"params\":{\"taskId\":[\"SELF\"]}}\n"
                "{\"version\":1,\"id\":\"r17\",\"method\":\"task.status\",\"params\":\"SELF\"}\n"
                "{\"version\":1,\"id\":\"r17\",\"method\":\"system.health\",\"params\":{}}\n"
                "{\"version\":1,\"id\":\"r18\",\"method\":\"task.dispatch\",\"params\":{\"prompt\":\"true\",\"executor\":\"shell\","
                "\"directory\":\"/\"}}\n",
                big, victim, victim, victim, repo, victim, big);
        char *py = write_peer(w, reqs);
        /* SELF: the worker's own id */
        char *script = strdup_printf("sed \"s/SELF/$TASKFERRY_TASK_ID/g\" %s > /tmp/reqs; python3 %s /tmp/reqs 19 2>&1; "
                                     "echo peer-done",
                                     tf_path(w->fixtures, "reqs"), py);
        char *id = tf_shell_settled(w, repo, NULL, script, NULL);
        char *msg = tf_task_message(w, id);
        ck_assert_msg(strstr(msg, "peer-done"), "%s", msg);
        if (getenv("TF_ATTACK_DEBUG")) fprintf(stderr, "%s\n", msg);
        static const char *const once[] = {"r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10",
                                           "r11", "r12", "r13", "r15", "r16", "r18"};
        for (size_t i = 0; i < ELEMENTSOF(once); i++)
                ck_assert_msg(count_of(msg, once[i]) == 1, "%s answered %d times:\n%s", once[i], count_of(msg, once[i]),
                              msg);
        /* r14: a negative timeout waits like no timeout; it ends with the connection */
        ck_assert_msg(count_of(msg, "r14") <= 1, "%s", msg);
        ck_assert_msg(count_of(msg, "r17") == 2, "%s", msg);
        ck_assert_msg(!strstr(msg, "BADFRAME"), "%s", msg);
        char *cs = tf_changeset_status(w, victim);
        ck_assert_str_eq(cs, "pending");
        ck_assert(tf_daemon_pid(w) > 0);
        free(cs), free(msg), free(script), free(py), free(reqs), free(id), free(victim), free(repo);
}
END_TEST

/* Attack: a worker parks waits on its own task (no timeout) and on its
 * nested task, then exits while they are parked, and a nested task waits
 * on its parent. The daemon must drop them with the connections (no reply
 * to a freed request, no crash), settle both tasks, and answer after. */
TF_WORLD_TEST(waits_on_self_and_parent) {
        char *repo = make_repo(w);
        const char *reqs = "{\"version\":1,\"id\":\"w1\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"SELF\"}}\n"
                           "{\"version\":1,\"id\":\"w2\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"PARENT\"}}\n"
                           "{\"version\":1,\"id\":\"w3\",\"method\":\"task.status\",\"params\":{\"taskId\":\"PARENT\"}}\n";
        char *py = write_peer(w, reqs);
        char *child = strdup_printf("sed \"s/SELF/$TASKFERRY_TASK_ID/g; s/PARENT/$P/g\" %s > /tmp/r; "
                                    "python3 %s /tmp/r 1 & sleep 2; echo child-out",
                                    tf_path(w->fixtures, "reqs"), py);
        char *cq = shell_quote(child);
        char *script = strdup_printf(
                "c=$(P=$TASKFERRY_TASK_ID taskferry dispatch --executor shell --prompt %s | sed -n 's/^id: //p'); "
                "sed \"s/SELF/$TASKFERRY_TASK_ID/g; s/PARENT/$c/g\" %s > /tmp/r; "
                "python3 %s /tmp/r 1 > /dev/null 2>&1 & sleep 1; taskferry wait $c > /dev/null; echo parent-out child=$c",
                cq, tf_path(w->fixtures, "reqs"), py);
        char *id = tf_shell_done(w, repo, NULL, script, NULL);
        char *msg = tf_task_message(w, id);
        ck_assert_msg(strstr(msg, "parent-out child=oc_"), "%s", msg);
        char *cid = tf_value_after(msg, "child=");
        json_object *cst = tf_wait_settled(w, cid);
        ck_assert_msg(streq_ptr(json_get_string(cst, "status"), "done"), "%s", json_to_line(cst, NULL));
        json_object_put(cst);
        char *cmsg = tf_task_message(w, cid);
        /* the child sees no parent: its status and wait answer UNKNOWN_TASK */
        ck_assert_msg(strstr(cmsg, "UNKNOWN_TASK") && strstr(cmsg, "child-out"), "%s", cmsg);
        ck_assert(tf_daemon_pid(w) > 0);
        json_object *h = tf_rpc(w, "system.health", "{}");
        ck_assert(json_get_object(h, "result"));
        json_object_put(h);
        free(cmsg), free(cid), free(msg), free(id), free(script), free(cq), free(child), free(py), free(repo);
}
END_TEST

/* TF_ATTACK_ONLY=<case>: run that case alone (while working on one). */
static void add(Suite *s, const char *tcase, int timeout_s, const TTest *const tests[]) {
        const char *only = getenv("TF_ATTACK_ONLY");
        size_t total = 0, n = 0;
        while (tests[total]) total++;
        const TTest *picked[total + 1];
        for (size_t i = 0; i < total; i++)
                if (!only || streq(only, tests[i]->name)) picked[n++] = tests[i];
        picked[n] = NULL;
        tf_add_tests(s, tcase, timeout_s, picked);
}

int main(void) {
        Suite *s = suite_create("attack-core");
        add(s, "main", 600,
            TF_TESTS(whiteout_name_is_not_a_glob, odd_names_round_trip, accept_never_writes_through_user_symlink,
                     planted_symlinks_are_never_followed, worker_git_metadata_never_lands,
                     accept_failing_midway_is_rolled_back, file_dir_swaps_keep_user_files, symlink_replacing_user_directory,
                     whiteouts_of_files_the_base_lacks, recreated_directory_drops_old_files, overlay_xattrs_from_the_worker,
                     snapshot_runs_no_repository_program, snapshot_over_fifo_does_not_hang, dotgit_file_points_elsewhere,
                     snapshot_over_huge_dirty_file, sparse_checkout_base, worker_cannot_reach_its_base,
                     file_max_and_special_files, pipelined_hostile_requests, waits_on_self_and_parent));
        /* 10k files extracted and accepted one by one, each fsynced: minutes
         * under the sanitizers on a busy disk */
        add(s, "wide", 1500, TF_TESTS(deep_and_wide_trees));
        return tf_run_suite(s);
}
