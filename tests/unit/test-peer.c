/* peer.c: who a caller is. A process below a task's shim is that task,
 * sandboxed; one in another pid namespace is sandboxed even with no task
 * known; the user is everyone else. What a sandboxed caller may see (its own
 * task and those it dispatched), decide (cancel/reject what it dispatched,
 * never accept) and name as a directory (its task's, lexically). */

#include <check.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "daemon-fixture.h"
#include "unit.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

static Manager m;

static void setup(void) { tf_manager_setup(&m, "test-peer"); }
static void teardown(void) { tf_manager_teardown(&m); }

static Task *task(const char *id, const char *directory, const char *dispatched_by) {
        if (dispatched_by)
                return tf_taskf(&m,
                                "{\"id\":\"%s\",\"directory\":\"%s\",\"status\":\"running\",\"changesetStatus\":"
                                "\"none\",\"dispatchedBy\":\"%s\"}",
                                id, directory, dispatched_by);
        return tf_taskf(&m, "{\"id\":\"%s\",\"directory\":\"%s\",\"status\":\"running\",\"changesetStatus\":\"none\"}", id,
                        directory);
}

/* A "shim": a child that forks a "worker" and a "grandchild" under it, all
 * pausing; their pids. Killed by kill_tree. */
typedef struct Tree {
        pid_t shim, worker, grandchild;
} Tree;

static Tree tree_new(void) {
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        Tree t = {0};
        int r = safe_fork_full("tf-shim", NULL, &p[1], 1, FORK_DEATHSIG_SIGKILL, &t.shim);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                pid_t w, g = 0;
                int k = safe_fork("tf-worker", FORK_DEATHSIG_SIGKILL, &w);
                if (k < 0) _exit(1);
                if (k == 0) {
                        int j = safe_fork("tf-grandchild", FORK_DEATHSIG_SIGKILL, &g);
                        if (j < 0) _exit(1);
                        if (j == 0)
                                for (;;) pause();
                        pid_t pair[2] = {getpid(), g};
                        if (write(p[1], pair, sizeof pair) != sizeof pair) _exit(1);
                        for (;;) pause();
                }
                for (;;) pause();
        }
        close(p[1]);
        pid_t pair[2];
        ck_assert_int_eq(read(p[0], pair, sizeof pair), (ssize_t) sizeof pair);
        close(p[0]);
        t.worker = pair[0];
        t.grandchild = pair[1];
        return t;
}

static void tree_free(Tree *t) {
        /* the shim's death kills the worker (its death signal), whose death
         * kills the grandchild; each is reaped by its own parent or init */
        sigkill_wait(t->shim);
}

START_TEST(the_user) {
        Task *t = task("oc_a", "/w/repo", NULL);
        Caller who = caller_of_pid(&m, 0);
        ck_assert(!who.sandboxed);
        ck_assert_ptr_null(who.task);
        who = caller_of_pid(&m, -5);
        ck_assert(!who.sandboxed);
        /* this very process (same pid namespace, below no shim) */
        t->shim_pid = getpid() == 1 ? 2 : 1; /* pid 1 is never a shim match: the walk stops there */
        who = caller_of_pid(&m, getpid());
        ck_assert(!who.sandboxed);
        ck_assert_ptr_null(who.task);
        /* a pid that names no process: the user (callers refuse those themselves) */
        who = caller_of_pid(&m, 0x3fffffff);
        ck_assert(!who.sandboxed);
        ck_assert_ptr_null(who.task);
}
END_TEST

START_TEST(below_a_shim_is_its_task) {
        Tree tr = tree_new(), other = tree_new();
        task("oc_first", "/w/one", NULL);
        Task *t = task("oc_mine", "/w/repo", NULL);
        Task *u = task("oc_other", "/w/two", NULL);
        t->shim_pid = tr.shim;
        u->shim_pid = other.shim;
        pid_t who_pids[] = {tr.shim, tr.worker, tr.grandchild};
        for (size_t i = 0; i < ELEMENTSOF(who_pids); i++) {
                Caller who = caller_of_pid(&m, who_pids[i]);
                ck_assert_msg(who.sandboxed, "pid %d is not sandboxed", (int) who_pids[i]);
                ck_assert_ptr_eq(who.task, t);
        }
        ck_assert_ptr_eq(caller_of_pid(&m, other.grandchild).task, u);
        /* the daemon itself, the shims' parent, is the user */
        ck_assert(!caller_of_pid(&m, getpid()).sandboxed);
        /* a task that lost its shim (shim_pid 0) claims nobody */
        t->shim_pid = 0;
        Caller who = caller_of_pid(&m, tr.worker);
        ck_assert(!who.sandboxed);
        ck_assert_ptr_null(who.task);
        tree_free(&tr);
        tree_free(&other);
}
END_TEST

START_TEST(another_pid_namespace_is_sandboxed) {
        TF_ROOT_OR_SKIP("a new pid namespace needs root");
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        pid_t mid;
        int r = safe_fork_full("tf-ns", NULL, &p[1], 1, FORK_DEATHSIG_SIGKILL, &mid);
        ck_assert_int_ge(r, 0);
        if (r == 0) {
                if (unshare(CLONE_NEWPID) < 0) _exit(1);
                pid_t inner;
                int k = safe_fork("tf-ns-init", FORK_DEATHSIG_SIGKILL, &inner);
                if (k < 0) _exit(1);
                if (k == 0)
                        for (;;) pause();
                /* inner is its pid as we (the outer namespace) see it */
                if (write(p[1], &inner, sizeof inner) != sizeof inner) _exit(1);
                for (;;) pause();
        }
        close(p[1]);
        pid_t inner;
        ck_assert_int_eq(read(p[0], &inner, sizeof inner), (ssize_t) sizeof inner);
        close(p[0]);
        task("oc_a", "/w/repo", NULL);
        Caller who = caller_of_pid(&m, inner);
        ck_assert(who.sandboxed);
        ck_assert_ptr_null(who.task); /* sandboxed, but no task of ours: it sees nothing */
        ck_assert(!caller_may_see(who, m.tasks[0]));
        ck_assert(!caller_may_name_directory(who, "/w/repo"));
        sigkill_wait(mid);
}
END_TEST

START_TEST(what_a_sandboxed_caller_may_see) {
        Task *me = task("oc_me", "/w/repo", NULL);
        Task *child = task("oc_child", "/w/repo", "oc_me");
        Task *grandchild = task("oc_gc", "/w/repo", "oc_child");
        Task *sibling = task("oc_sib", "/w/repo", NULL);
        Task *cousin = task("oc_cousin", "/w/repo", "oc_sib");
        Caller user = {0}, inside = {.sandboxed = true, .task = me}, lost = {.sandboxed = true};
        Task *all[] = {me, child, grandchild, sibling, cousin};
        for (size_t i = 0; i < ELEMENTSOF(all); i++) {
                ck_assert(caller_may_see(user, all[i]));
                ck_assert(!caller_may_see(lost, all[i]));
        }
        ck_assert(caller_may_see(inside, me));
        ck_assert(caller_may_see(inside, child));
        ck_assert(!caller_may_see(inside, grandchild)); /* one level: what it dispatched itself */
        ck_assert(!caller_may_see(inside, sibling));
        ck_assert(!caller_may_see(inside, cousin));
        /* the user's own child sees itself, not its parent */
        ck_assert(!caller_may_see((Caller) {.sandboxed = true, .task = child}, me));
}
END_TEST

static void assert_decides(Caller who, const Task *t, const char *verb, const char *want) {
        char *reason = NULL;
        int r = caller_may_decide(who, t, verb, &reason);
        if (!want) {
                ck_assert_msg(r == 0, "%s %s refused: %s", verb, t->id, reason ? reason : "?");
                ck_assert_ptr_null(reason);
                return;
        }
        ck_assert_int_eq(r, -EPERM);
        ck_assert_ptr_nonnull(reason);
        ck_assert_str_eq(reason, want);
        free(reason);
}

/* What a sandboxed task is told when it accepts oc_child. */
#define NO_ACCEPT_OF_CHILD                                                                                     \
        "error: a task running in a sandbox cannot accept changesets\nhelp: read the diff (taskferry result "   \
        "oc_child --diff) and run taskferry accept oc_child from outside the sandbox"

/* who (a sandboxed task) may not verb t, a task it did not dispatch. */
static void assert_not_dispatched(Caller who, const Task *t, const char *verb) {
        char *want = strdup_printf("error: a task running in a sandbox can only %s tasks it dispatched itself, and %s "
                                   "was not dispatched by it\nhelp: run taskferry %s %s from outside the sandbox",
                                   verb, t->id, verb, t->id);
        assert_decides(who, t, verb, want);
        free(want);
}

START_TEST(what_a_sandboxed_caller_may_decide) {
        Task *me = task("oc_me", "/w/repo", NULL);
        Task *child = task("oc_child", "/w/repo", "oc_me");
        Task *sibling = task("oc_sib", "/w/repo", NULL);
        Caller user = {0}, inside = {.sandboxed = true, .task = me}, lost = {.sandboxed = true};
        static const char *const verbs[] = {"cancel", "reject", "accept"};
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++) {
                assert_decides(user, me, verbs[i], NULL);
                assert_decides(user, sibling, verbs[i], NULL);
        }
        assert_decides(inside, child, "cancel", NULL);
        assert_decides(inside, child, "reject", NULL);
        /* landing changes is the user's, even for its own child */
        assert_decides(inside, child, "accept", NO_ACCEPT_OF_CHILD);
        assert_not_dispatched(inside, sibling, "cancel");
        /* nor itself: it did not dispatch itself */
        assert_not_dispatched(inside, me, "reject");
        assert_not_dispatched(lost, child, "cancel");
        assert_decides(lost, child, "accept", NO_ACCEPT_OF_CHILD);
}
END_TEST

static const struct {
        const char *path;
        bool ok;
} names[] = {
        {"/w/repo", true},
        {"/w/repo/", true},
        {"/w/repo/sub/dir", true},
        {"/w/repo//sub", true},
        {"/w/repo/./sub", true},
        {"/w/repo2", false},           /* a sibling sharing the prefix */
        {"/w/rep", false},
        {"/w", false},
        {"/", false},
        {"/etc", false},
        {"/w/repo/..", false},
        {"/w/repo/../repo", false},    /* inside, but ".." is refused outright */
        {"/w/repo/a/../../etc", false},
        {"/w/repo/..hidden", true},    /* a name, not ".." */
        {"/w/repo/...", true},
        {"w/repo", false},             /* relative */
        {"", false},
        {"./w/repo", false},
};

START_TEST(what_a_sandboxed_caller_may_name) {
        Task *me = task("oc_me", "/w/repo", NULL);
        Caller inside = {.sandboxed = true, .task = me};
        ck_assert_msg(caller_may_name_directory(inside, names[_i].path) == names[_i].ok, "%s: wanted %s",
                      names[_i].path, names[_i].ok ? "named" : "refused");
        /* the user may name anything, and a caller with no task nothing */
        ck_assert(caller_may_name_directory((Caller) {0}, names[_i].path));
        ck_assert(!caller_may_name_directory((Caller) {.sandboxed = true}, names[_i].path));
}
END_TEST

START_TEST(no_directory_names_nothing) {
        Task *bare = tf_task(&m, "{\"id\":\"oc_bare\",\"status\":\"running\",\"changesetStatus\":\"none\"}");
        Caller inside = {.sandboxed = true, .task = bare};
        ck_assert(!caller_may_name_directory(inside, "/"));
        ck_assert(!caller_may_name_directory(inside, NULL));
        ck_assert(caller_may_name_directory((Caller) {0}, NULL));
}
END_TEST

int main(void) {
        Suite *s = suite_create("peer");
        tf_tcase(s, "who", setup, teardown, 30,
                 TF_TESTS(the_user, below_a_shim_is_its_task, another_pid_namespace_is_sandboxed));
        TCase *tc = tf_tcase(s, "may", setup, teardown, 30,
                             TF_TESTS(what_a_sandboxed_caller_may_see, what_a_sandboxed_caller_may_decide,
                                      no_directory_names_nothing));
        TF_LOOP(tc, what_a_sandboxed_caller_may_name, names);
        return tf_run_suite(s);
}
