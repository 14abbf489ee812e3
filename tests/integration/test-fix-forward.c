/* HEAD drift at settlement and fix-forward from a parent task's pending
 * changeset, end to end through the CLI and an isolated daemon with real
 * bwrap, overlayfs and git.
 *
 * Drift: the user commits while the worker runs; the settlement records
 * where HEAD moved and whether the changeset still merges into the live
 * tree (headDriftRecovered), and keeps it pending either way; an accept of
 * one that conflicts refuses naming the path, the tree byte-identical.
 *
 * Fix-forward: `dispatch --parent-task P` starts the new worker from P's
 * pending result (its writes, its deletions, its replaced directories);
 * accepting the child lands P's changes and the child's once and
 * supersedes P (rejected, its overlay gone). */

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"

static char *make_repo(tf_world *w) {
        return tf_repo_new(w, NULL,
                           "printf 'one\\n' > a.txt && printf 'b\\n' > b.txt && mkdir dir && printf 'old\\n' > dir/old.txt && "
                           "seq 1 20 > lines.txt");
}

/* The status of task id as `status --json` prints it (lean; the caller puts it). */
static json_object *status_of(tf_world *w, const char *id) {
        const char *argv[] = {"status", id, "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        ck_assert_msg(r.exit_code == 0, "status %s: %s", id, r.err);
        json_object *o = tf_json(r.out);
        tf_run_done(&r);
        return o;
}

/* The drift of task id as `list` shows it: its --json row carries
 * headDriftFrom and headDriftRecovered; the lean output's row a marker
 * in its headDrift column (merges, conflicts, unknown). The marker, or NULL when the
 * row has no drift (malloc'd). */
static char *list_marker(tf_world *w, const char *repo, const char *id) {
        const char *argv[] = {"list", "--json", NULL};
        tf_run r = tf_cli(w, repo, NULL, argv);
        ck_assert_msg(r.exit_code == 0, "list: %s", r.err);
        json_object *o = tf_json(r.out);
        tf_run_done(&r);
        json_object *tasks = json_get_array(o, "tasks");
        bool raw = false;
        for (size_t i = 0; tasks && i < json_object_array_length(tasks); i++) {
                json_object *row = json_object_array_get_idx(tasks, i);
                if (streq_ptr(json_get_string(row, "id"), id)) raw = json_get_string(row, "headDriftFrom") != NULL;
        }
        json_object_put(o);
        const char *lean[] = {"list", NULL};
        r = tf_cli(w, repo, NULL, lean);
        ck_assert_msg(r.exit_code == 0, "list: %s", r.err);
        static const char *const marks[] = {"merges", "conflicts", "unknown"};
        char *mark = NULL;
        /* a TOON table: a header naming headDrift, then the task's row ending in its marker */
        const char *row = strstr(r.out, "headDrift}") ? strstr(r.out, id) : NULL;
        size_t len = row ? strcspn(row, "\n") : 0;
        for (size_t i = 0; row && !mark && i < ELEMENTSOF(marks); i++) {
                size_t ml = strlen(marks[i]);
                if (len > ml && row[len - ml - 1] == ',' && strncmp(row + len - ml, marks[i], ml) == 0)
                        mark = strdup(marks[i]);
        }
        ck_assert_msg(raw == (mark != NULL), "list --json row drift %d, lean list: %s", raw, r.out);
        tf_run_done(&r);
        return mark;
}

#define GIT_COMMIT "git -c commit.gpgsign=false commit -q"

/* The user commits an unrelated change while the worker runs: drift from
 * the old HEAD to the new one, recovered; accept lands the worker's change
 * beside the user's commit. */
TF_WORLD_TEST(drift_recovered) {
        char *repo = make_repo(w);
        char *pre = tf_shf(w, repo, "git rev-parse HEAD");
        json_object *st = NULL;
        char *id = tf_shell_paused(w, repo, "set -e; printf 'worker\\n' >> a.txt; " TF_PAUSE,
                                   "printf 'B\\n' > b.txt && " GIT_COMMIT " -am user", &st);
        json_object_put(st);
        char *now = tf_shf(w, repo, "git rev-parse HEAD");
        json_object *s = status_of(w, id);
        ck_assert_str_eq(tf_jstr(s, "changesetStatus"), "pending");
        ck_assert_str_eq(tf_jstr(s, "headDriftFrom"), pre);
        ck_assert_str_eq(tf_jstr(s, "headDriftTo"), now);
        json_object *rec = json_get(s, "headDriftRecovered");
        ck_assert_msg(rec && json_object_is_type(rec, json_type_boolean) && json_object_get_boolean(rec),
                      "headDriftRecovered: %s", json_object_to_json_string(s));
        ck_assert_ptr_null(json_get_string(s, "changesetError"));
        json_object_put(s);
        char *mark = list_marker(w, repo, id);
        ck_assert_msg(streq_ptr(mark, "merges"), "list marker %s", strnull(mark));
        tf_accept_ok(w, id);
        char *state = tf_shf(w, repo, "cat a.txt b.txt; git diff --cached --name-only");
        ck_assert_str_eq(state, "one\nworker\nB");
        free(state), free(mark), free(now), free(pre), free(id), free(repo);
}
END_TEST

/* A no-drift settlement records nothing of it. */
TF_WORLD_TEST(no_drift_no_fields) {
        char *repo = make_repo(w);
        char *id = tf_shell_pending(w, repo, NULL, "set -e; printf 'worker\\n' >> a.txt", NULL);
        json_object *s = status_of(w, id);
        ck_assert_msg(!json_get(s, "headDriftFrom") && !json_get(s, "headDriftRecovered"), "%s",
                      json_object_to_json_string(s));
        json_object_put(s);
        char *mark = list_marker(w, repo, id);
        ck_assert_ptr_null(mark);
        free(id), free(repo);
}
END_TEST

/* The user commits a change to the very line the worker changed: not
 * recovered, changesetError names the path and both heads, the changeset
 * stays pending; accept exits 1 and the tree (.git included) is
 * byte-identical. */
TF_WORLD_TEST(drift_conflict) {
        char *repo = make_repo(w);
        json_object *st = NULL;
        char *id = tf_shell_paused(w, repo, "set -e; sed -i 's/^2$/worker/' lines.txt; " TF_PAUSE,
                                   "sed -i 's/^2$/user/' lines.txt && " GIT_COMMIT " -am user", &st);
        json_object_put(st);
        json_object *s = status_of(w, id);
        ck_assert_str_eq(tf_jstr(s, "changesetStatus"), "pending");
        json_object *rec = json_get(s, "headDriftRecovered");
        ck_assert_msg(rec && json_object_is_type(rec, json_type_boolean) && !json_object_get_boolean(rec), "%s",
                      json_object_to_json_string(s));
        const char *cerr = tf_jstr(s, "changesetError");
        ck_assert_msg(cerr && strstr(cerr, "lines.txt") && strstr(cerr, "HEAD moved from") && !strstr(cerr, "a.txt"),
                      "changesetError: %s", strnull(cerr));
        json_object_put(s);
        char *mark = list_marker(w, repo, id);
        ck_assert_msg(streq_ptr(mark, "conflicts"), "list marker %s", strnull(mark));
        char *before = tf_tree_snapshot(repo, false);
        tf_run r = tf_accept(w, id);
        ck_assert_msg(r.exit_code == 1, "accept exit %d: %s %s", r.exit_code, r.out, r.err);
        ck_assert_msg(strstr(r.out, "lines.txt") || strstr(r.err, "lines.txt"), "%s %s", r.out, r.err);
        tf_run_done(&r);
        char *after = tf_tree_snapshot(repo, false), *cs = tf_changeset_status(w, id);
        ck_assert_str_eq(after, before);
        ck_assert_str_eq(cs, "pending");
        free(cs), free(after), free(before), free(mark), free(id), free(repo);
}
END_TEST

/* The parent writes a.txt, deletes b.txt and replaces dir (an opaque dir in
 * its upper: dir/old.txt gone, dir/new.txt there); the child, dispatched
 * with --parent-task, sees all of it, and writes c.txt. */
static const char parent_script[] = "set -e; printf 'parent\\n' > a.txt; rm b.txt; rm -rf dir; mkdir dir; "
                                    "printf 'new\\n' > dir/new.txt";
static const char child_script[] = "set -e; cat a.txt; test ! -e b.txt && echo no-b; test ! -e dir/old.txt && echo no-old; "
                                   "cat dir/new.txt; printf 'child\\n' > c.txt";

static char *dispatch_child(tf_world *w, const char *repo, const char *parent) {
        const char *const extra[] = {"--parent-task", parent, "--session-id", "fix-forward", NULL};
        return tf_shell_pending(w, repo, extra, child_script, NULL);
}

static void assert_landed(tf_world *w, const char *repo) {
        char *state = tf_shf(w, repo, "cat a.txt c.txt dir/new.txt; test ! -e b.txt && test ! -e dir/old.txt && echo gone");
        ck_assert_str_eq(state, "parent\nchild\nnew\ngone");
        free(state);
}

TF_WORLD_TEST(child_starts_from_parent) {
        char *repo = make_repo(w);
        char *p = tf_shell_pending(w, repo, NULL, parent_script, NULL);
        json_object *ps = status_of(w, p);
        char *proot = strdup(json_get_string(json_get_object(ps, "overlayDirs"), "root")
                                     ? json_get_string(json_get_object(ps, "overlayDirs"), "root")
                                     : "");
        json_object_put(ps);
        char *c = dispatch_child(w, repo, p);
        char *msg = tf_task_message(w, c);
        ck_assert_msg(strstr(msg, "parent\nno-b\nno-old\nnew"), "the child saw: %s", msg);
        /* the live tree is untouched until an accept */
        char *live = tf_shf(w, repo, "cat a.txt b.txt");
        ck_assert_str_eq(live, "one\nb");
        /* the child's diff holds the parent's changes and its own, each once */
        char *diff = tf_task_diff(w, c), *files = tf_diff_files(diff);
        ck_assert_msg(streq(files, "a.txt|b.txt|c.txt|dir/new.txt|dir/old.txt|"), "child diff: %s\n%s", files, diff);
        tf_accept_ok(w, c);
        assert_landed(w, repo);
        /* the parent is superseded: rejected, its reason naming the child, its overlay gone */
        char *pcs = tf_changeset_status(w, p);
        ck_assert_str_eq(pcs, "rejected");
        json_object *s = status_of(w, p);
        const char *why = tf_jstr(s, "changesetError");
        ck_assert_msg(why && strstr(why, "superseded by") && strstr(why, c), "parent's changesetError: %s", strnull(why));
        json_object_put(s);
        /* the reject's overlay removal runs as a job: wait for it */
        for (int i = 0; i < 200 && *proot && tf_exists(proot); i++) free(tf_shf(w, NULL, "sleep 0.05"));
        ck_assert_msg(*proot && !tf_exists(proot), "the parent's overlay %s is still there", proot);
        free(pcs), free(diff), free(files), free(live), free(msg), free(c), free(proot), free(p), free(repo);
}
END_TEST

/* The parent accepted first, then the child: the child's copy of the
 * parent's changes merges as already there; its own change lands once. */
TF_WORLD_TEST(parent_accepted_then_child) {
        char *repo = make_repo(w);
        char *p = tf_shell_pending(w, repo, NULL, parent_script, NULL);
        char *c = dispatch_child(w, repo, p);
        tf_accept_ok(w, p);
        tf_accept_ok(w, c);
        assert_landed(w, repo);
        char *pcs = tf_changeset_status(w, p);
        ck_assert_str_eq(pcs, "accepted");
        free(pcs), free(c), free(p), free(repo);
}
END_TEST

/* A parent that cannot seed (another repository's task; an unknown id)
 * seeds nothing: the dispatch goes on from the live tree, and the parent
 * stays pending after the child's accept. */
TF_WORLD_TEST(ineligible_parent_seeds_nothing) {
        char *repo = make_repo(w);
        char *other = tf_repo_new(w, "other", "printf 'one\\n' > a.txt");
        char *p = tf_shell_pending(w, other, NULL, "set -e; printf 'parent\\n' > a.txt", NULL);
        const char *const extra[] = {"--parent-task", p, "--session-id", "x", NULL};
        char *c = tf_shell_pending(w, repo, extra, "set -e; cat a.txt; printf 'child\\n' > c.txt", NULL);
        char *msg = tf_task_message(w, c);
        ck_assert_msg(strstr(msg, "one") && !strstr(msg, "parent"), "the child saw: %s", msg);
        const char *const extra2[] = {"--parent-task", "oc_nosuchtask", "--session-id", "y", NULL};
        char *c2 = tf_shell_pending(w, repo, extra2, "set -e; cat b.txt; printf 'x\\n' > d.txt", NULL);
        char *msg2 = tf_task_message(w, c2);
        ck_assert_msg(strstr(msg2, "b"), "the child saw: %s", msg2);
        tf_accept_ok(w, c);
        char *pcs = tf_changeset_status(w, p);
        ck_assert_str_eq(pcs, "pending");
        free(pcs), free(msg2), free(c2), free(msg), free(c), free(p), free(other), free(repo);
}
END_TEST

int main(void) {
        return tf_run_tests("fix-forward", "main", 600,
                            TF_TESTS(drift_recovered, no_drift_no_fields, drift_conflict, child_starts_from_parent,
                                     parent_accepted_then_child, ineligible_parent_seeds_nothing));
}
