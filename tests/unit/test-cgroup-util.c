/* cgroup-util.c: the oom_kill counter of a memory.events text (the line
 * found whole, its value strict), and of the calling process's own cgroup;
 * keyed counters, the "0::" path, and the delegated parent of a fake tree. */

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup-util.h"
#include "fileio.h"
#include "macro.h"
#include "string-util.h"
#include "unit.h"

static const struct {
        const char *text;
        int r;
        uint64_t value;
} events[] = {
        {"low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\noom_group_kill 0\n", 0, 2},
        {"oom_kill 0", 0, 0},                       /* the last line without '\n' */
        {"oom_kill 18446744073709551615\n", 0, UINT64_MAX},
        {"oom_kill 18446744073709551616\n", -EINVAL, 0}, /* past uint64 */
        {"oom_kill 18446744073709551620\n", -EINVAL, 0},
        {"oom_group_kill 5\noom_kill 7\n", 0, 7},   /* a longer key is not it */
        {"oom_kill 1\noom_kill 9\n", 0, 1},         /* the first */
        {"oom_kill x\n", -EINVAL, 0},
        {"oom_kill -1\n", -EINVAL, 0},
        {"oom_kill 3 \n", -EINVAL, 0},
        {"oom_kill 3x\n", -EINVAL, 0},
        {"oom_kill  3\n", -EINVAL, 0},
        {"oom_kill \n", -ENOENT, 0},                /* no value: no such line */
        {"oom_kill\n", -ENOENT, 0},
        {" oom_kill 3\n", -ENOENT, 0},
        {"xoom_kill 3\n", -ENOENT, 0},
        {"", -ENOENT, 0},
        {"\n\n", -ENOENT, 0},
        {"max 3\noom 1\n", -ENOENT, 0},
};

START_TEST(memory_events_table) {
        uint64_t v = 12345;
        ck_assert_int_eq(cgroup_memory_events_oom_kills(events[_i].text, &v), events[_i].r);
        ck_assert_uint_eq(v, events[_i].r == 0 ? events[_i].value : 12345);
}
END_TEST

START_TEST(memory_events_null) {
        uint64_t v = 1;
        ck_assert_int_eq(cgroup_memory_events_oom_kills(NULL, &v), -ENOENT);
        ck_assert_uint_eq(v, 1);
}
END_TEST

START_TEST(own_cgroup) {
        /* what the kernel says of ours: a counter where our cgroup v2 has a
         * memory controller, -ENOENT where there is none; nothing else */
        uint64_t v = UINT64_MAX;
        int r = cgroup_self_oom_kills(&v);
        ck_assert_msg(r == 0 || r == -ENOENT, "cgroup_self_oom_kills: %d", r);
        _cleanup_free_ char *cg = NULL;
        ck_assert_int_eq(read_file("/proc/self/cgroup", 65536, &cg, NULL), 0);
        if (r == 0) {
                ck_assert_ptr_nonnull(strstr(cg, "0::/"));
                ck_assert_uint_ne(v, UINT64_MAX);
        }
}
END_TEST

START_TEST(keyed_counters) {
        uint64_t v = 0;
        ck_assert_int_eq(cgroup_keyed_counter("max 3\n", "max", &v), 0);
        ck_assert_uint_eq(v, 3);
        ck_assert_int_eq(cgroup_keyed_counter("max.imposed 1\nmax 4\n", "max", &v), 0); /* the key whole */
        ck_assert_uint_eq(v, 4);
        ck_assert_int_eq(cgroup_keyed_counter("low 0\n", "max", &v), -ENOENT);
        ck_assert_int_eq(cgroup_keyed_counter("max x\n", "max", &v), -EINVAL);
        ck_assert_int_eq(cgroup_keyed_counter(NULL, "max", &v), -ENOENT);
}
END_TEST

START_TEST(self_path) {
        _cleanup_free_ char *p = NULL, *q = NULL, *r = NULL;
        ck_assert_int_eq(cgroup_self_path("4:memory:/x\n0::/user.slice/a.scope\n", &p), 0);
        ck_assert_str_eq(p, "/user.slice/a.scope");
        ck_assert_int_eq(cgroup_self_path("0::/", &q), 0);
        ck_assert_str_eq(q, "/");
        ck_assert_int_eq(cgroup_self_path("1:name=systemd:/\n", &r), -ENOENT);
        char *x = NULL;
        ck_assert_int_eq(cgroup_self_path("0::relative\n", &x), -EINVAL);
        ck_assert_int_eq(cgroup_self_path("0::/a/../b\n", &x), -EINVAL);
        ck_assert_int_eq(cgroup_self_path(NULL, &x), -ENOENT);
        ck_assert_ptr_null(x);
}
END_TEST

static void put(const char *dir, const char *name, const char *text) {
        _cleanup_free_ char *p = strdup_printf("%s/%s", dir, name);
        ck_assert_int_eq(write_file_atomic(p, text, strlen(text), 0644), 0);
}

/* A fake cgroup v2 tree: which parent a task's own cgroup may go under. */
START_TEST(delegated_parent) {
        char *root = tf_tmpdir_new("tf-cgroup");
        _cleanup_free_ char *a = strdup_printf("%s/a", root), *b = strdup_printf("%s/a/b", root);
        ck_assert_int_eq(mkdir(a, 0755), 0);
        ck_assert_int_eq(mkdir(b, 0755), 0);
        put(a, "cgroup.controllers", "cpu memory pids\n");
        put(a, "cgroup.subtree_control", "memory pids\n");
        put(a, "cgroup.procs", "");
        char *dir = NULL, *why = NULL;
        /* in /a/b: its parent /a */
        ck_assert_int_eq(cgroup_delegated_parent(root, "/a/b", &dir, &why), 0);
        ck_assert_str_eq(dir, a);
        ck_assert_ptr_null(why);
        free(dir);
        /* in /a: the root has no controllers here */
        ck_assert_int_eq(cgroup_delegated_parent(root, "/a", &dir, &why), -ENOENT);
        ck_assert_ptr_null(dir);
        ck_assert_msg(strstr(why, "has no memory and pids controllers"), "%s", why);
        free(why);
        /* pids not enabled for the children */
        put(a, "cgroup.subtree_control", "memory\n");
        ck_assert_int_eq(cgroup_delegated_parent(root, "/a/b", &dir, &why), -ENOENT);
        ck_assert_msg(strstr(why, "does not enable memory and pids"), "%s", why);
        free(why);
        put(a, "cgroup.controllers", "memory\n");
        ck_assert_int_eq(cgroup_delegated_parent(root, "/a/b", &dir, &why), -ENOENT);
        ck_assert_msg(strstr(why, "has no memory and pids controllers"), "%s", why);
        free(why);
        /* not ours to write (root may write anything) */
        put(a, "cgroup.controllers", "memory pids\n");
        put(a, "cgroup.subtree_control", "pids memory\n");
        if (geteuid() != 0) {
                ck_assert_int_eq(chmod(a, 0555), 0);
                ck_assert_int_eq(cgroup_delegated_parent(root, "/a/b", &dir, &why), -ENOENT);
                ck_assert_msg(strstr(why, "is not delegated"), "%s", why);
                free(why);
                ck_assert_int_eq(chmod(a, 0755), 0);
        }
        ck_assert_int_eq(cgroup_delegated_parent(root, "/a/b", &dir, &why), 0);
        free(dir);
        /* no hierarchy, no cgroup */
        ck_assert_int_eq(cgroup_delegated_parent(NULL, "/a/b", &dir, &why), -ENOENT);
        ck_assert_msg(strstr(why, "no cgroup v2"), "%s", why);
        free(why);
        ck_assert_int_eq(cgroup_delegated_parent(root, NULL, &dir, &why), -ENOENT);
        free(why);
        ck_assert_str_eq(cgroup_v2_root("/x"), "/x");
        tf_tmpdir_free(root);
}
END_TEST

int main(void) {
        Suite *s = suite_create("cgroup-util");
        TCase *tc = tf_tcase(s, "cgroup", NULL, NULL, 0, TF_TESTS(memory_events_null, own_cgroup, keyed_counters,
                                                                      self_path, delegated_parent));
        TF_LOOP(tc, memory_events_table, events);
        return tf_run_suite(s);
}
