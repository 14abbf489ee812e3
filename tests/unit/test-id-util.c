/* id-util.c: UUID v4 (version and variant bits, lowercase, random), task
 * ids ("oc_" base-36 wall clock "_" 8 hex) and the path-safe id check. */

#include <check.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "id-util.h"
#include "macro.h"
#include "strv.h"
#include "time-util.h"
#include "unit.h"

static void assert_uuid4(const char *u) {
        ck_assert_uint_eq(strlen(u), 36);
        for (size_t i = 0; i < 36; i++) {
                if (i == 8 || i == 13 || i == 18 || i == 23) {
                        ck_assert_int_eq(u[i], '-');
                        continue;
                }
                ck_assert_msg(isdigit((unsigned char) u[i]) || (u[i] >= 'a' && u[i] <= 'f'), "%s", u);
        }
        ck_assert_int_eq(u[14], '4');                   /* version 4 */
        ck_assert_ptr_nonnull(strchr("89ab", u[19]));   /* variant 10xx */
}

START_TEST(uuid4_shape_and_randomness) {
        _cleanup_strv_free_ char **seen = NULL;
        for (int i = 0; i < 500; i++) {
                char u[37];
                memset(u, 'Z', sizeof u);
                ck_assert_int_eq(uuid4(u), 0);
                assert_uuid4(u);
                ck_assert_msg(!strv_contains(seen, u), "repeated %s", u);
                ck_assert_int_eq(strv_push(&seen, u), 0);
        }
}
END_TEST

/* base 36 of the text s, as task_id_new writes it */
static uint64_t base36(const char *s, size_t n) {
        uint64_t v = 0;
        for (size_t i = 0; i < n; i++) {
                const char *d = strchr("0123456789abcdefghijklmnopqrstuvwxyz", s[i]);
                ck_assert_ptr_nonnull(d);
                v = v * 36 + (uint64_t) (d - "0123456789abcdefghijklmnopqrstuvwxyz");
        }
        return v;
}

START_TEST(task_id_shape) {
        uint64_t before = now_ms();
        _cleanup_free_ char *id = task_id_new();
        uint64_t after = now_ms();
        ck_assert_ptr_nonnull(id);
        ck_assert(strncmp(id, "oc_", 3) == 0);
        const char *us = strchr(id + 3, '_');
        ck_assert_ptr_nonnull(us);
        uint64_t ms = base36(id + 3, (size_t) (us - id - 3));
        ck_assert_uint_ge(ms, before);
        ck_assert_uint_le(ms, after);
        ck_assert_uint_eq(strlen(us + 1), 8);
        for (const char *p = us + 1; *p; p++) ck_assert(isxdigit((unsigned char) *p) && !isupper((unsigned char) *p));
        ck_assert(task_id_is_valid(id));
        _cleanup_free_ char *other = task_id_new();
        ck_assert_str_ne(id, other);
}
END_TEST

static const struct {
        const char *s;
        bool valid;
} ids[] = {
        {"oc_mrutsm8i_764c0067", true},
        {"a", true},
        {"A-Z_0-9", true},
        {"-", true},
        {"_", true},
        {"...", false},
        {".", false},
        {"..", false},
        {"", false},
        {"a/b", false},
        {"../x", false},
        {"a b", false},
        {"a.b", false},
        {"\xc3\xa9", false},
        {"a\n", false},
        {"oc_1*", false},
        {"1234567890123456789012345678901234567890123456789012345678901234", true},  /* 64 */
        {"12345678901234567890123456789012345678901234567890123456789012345", false}, /* 65 */
};

START_TEST(task_id_validity) {
        ck_assert_msg(task_id_is_valid(ids[_i].s) == ids[_i].valid, "%s", ids[_i].s);
}
END_TEST

START_TEST(task_id_validity_null_and_huge) {
        ck_assert(!task_id_is_valid(NULL));
        char *huge = malloc(1 << 20);
        memset(huge, 'a', (1 << 20) - 1);
        huge[(1 << 20) - 1] = 0;
        ck_assert(!task_id_is_valid(huge));
        free(huge);
}
END_TEST

int main(void) {
        Suite *s = suite_create("id-util");
        TCase *tc = tf_tcase(s, "ids", NULL, NULL, 0,
                             TF_TESTS(uuid4_shape_and_randomness, task_id_shape, task_id_validity_null_and_huge));
        TF_LOOP(tc, task_id_validity, ids);
        return tf_run_suite(s);
}
