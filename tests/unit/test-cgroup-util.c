/* cgroup-util.c: the oom_kill counter of a memory.events text (the line
 * found whole, its value strict), and of the calling process's own cgroup. */

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "cgroup-util.h"
#include "fileio.h"
#include "macro.h"
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

int main(void) {
        Suite *s = suite_create("cgroup-util");
        TCase *tc = tf_tcase(s, "cgroup", NULL, NULL, 0, TF_TESTS(memory_events_null, own_cgroup));
        TF_LOOP(tc, memory_events_table, events);
        return tf_run_suite(s);
}
