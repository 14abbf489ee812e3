/* strv.c: string vectors (NULL the empty one) and environment arrays:
 * lengths, pushes that copy or take ownership, deep copies, NAME=value
 * lookups that match the whole name, set and unset of every entry of it. */

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "strv.h"
#include "unit.h"

START_TEST(empty_vector_is_null) {
        ck_assert_uint_eq(strv_length(NULL), 0);
        ck_assert(!strv_contains(NULL, "x"));
        strv_free(NULL);
        char **c = strv_copy(NULL);
        ck_assert_ptr_nonnull(c);
        ck_assert_ptr_null(c[0]);
        ck_assert_uint_eq(strv_length(c), 0);
        strv_free(c);
        char *empty[] = {NULL};
        ck_assert_uint_eq(strv_length(empty), 0);
}
END_TEST

START_TEST(push_copies_consume_owns) {
        _cleanup_strv_free_ char **l = NULL;
        char buf[] = "abc";
        ck_assert_int_eq(strv_push(&l, buf), 0);
        buf[0] = 'X'; /* a copy was pushed */
        ck_assert_int_eq(strv_push(&l, ""), 0);
        char *owned = strdup("mine");
        ck_assert_int_eq(strv_consume(&l, owned), 0);
        ck_assert_ptr_eq(l[2], owned);
        ck_assert_int_eq(strv_pushf(&l, "%s=%d", "n", 5), 0);
        tf_assert_argv(l, "abc", "", "mine", "n=5", NULL);
        ck_assert_uint_eq(strv_length(l), 4);
        /* NULL is the strdup that failed: -ENOMEM, l unchanged */
        ck_assert_int_eq(strv_consume(&l, NULL), -ENOMEM);
        ck_assert_uint_eq(strv_length(l), 4);
        ck_assert(strv_contains(l, ""));
        ck_assert(strv_contains(l, "mine"));
        ck_assert(!strv_contains(l, "min"));
        ck_assert(!strv_contains(l, "Xbc"));
}
END_TEST

START_TEST(many_pushes) {
        /* the geometric growth keeps every entry and the terminator */
        _cleanup_strv_free_ char **l = NULL;
        for (int i = 0; i < 5000; i++) ck_assert_int_eq(strv_pushf(&l, "%d", i), 0);
        ck_assert_uint_eq(strv_length(l), 5000);
        for (int i = 0; i < 5000; i += 499) {
                char want[16];
                snprintf(want, sizeof want, "%d", i);
                ck_assert_str_eq(l[i], want);
        }
        ck_assert_ptr_null(l[5000]);
        _cleanup_strv_free_ char **c = strv_copy(l);
        ck_assert_uint_eq(strv_length(c), 5000);
        ck_assert_ptr_ne(c[5], l[5]);
        ck_assert_str_eq(c[4999], "4999");
}
END_TEST

START_TEST(copy_is_deep) {
        char a[] = "one", b[] = "two";
        char *src[] = {a, b, NULL};
        _cleanup_strv_free_ char **c = strv_copy(src);
        a[0] = 'X';
        tf_assert_argv(c, "one", "two", NULL);
}
END_TEST

START_TEST(env_get_matches_whole_names) {
        char *env[] = {"PATHX=1", "PATH=/bin", "P=", "PATH=/second", "=odd", "NOEQ", NULL};
        ck_assert_str_eq(strv_env_get(env, "PATH"), "/bin"); /* the first */
        ck_assert_str_eq(strv_env_get(env, "PATHX"), "1");
        ck_assert_str_eq(strv_env_get(env, "P"), "");
        ck_assert_ptr_null(strv_env_get(env, "PAT"));
        ck_assert_ptr_null(strv_env_get(env, "NOEQ"));
        ck_assert_ptr_null(strv_env_get(env, "path"));
        ck_assert_ptr_null(strv_env_get(NULL, "PATH"));
        /* the value is borrowed from env */
        ck_assert_ptr_eq(strv_env_get(env, "PATH"), env[1] + 5);
}
END_TEST

START_TEST(env_set_and_unset) {
        _cleanup_strv_free_ char **env = NULL;
        ck_assert_int_eq(strv_env_unset(&env, "X"), 0); /* on the empty vector */
        ck_assert_int_eq(strv_env_set(&env, "A", "1"), 0);
        ck_assert_int_eq(strv_push(&env, "B=2"), 0);
        ck_assert_int_eq(strv_push(&env, "A=dup"), 0);
        ck_assert_int_eq(strv_push(&env, "AB=3"), 0);
        /* every A= goes, the new one is appended; AB stays */
        ck_assert_int_eq(strv_env_set(&env, "A", "x=y"), 0);
        tf_assert_argv(env, "B=2", "AB=3", "A=x=y", NULL);
        ck_assert_str_eq(strv_env_get(env, "A"), "x=y");
        ck_assert_int_eq(strv_env_set(&env, "E", ""), 0);
        ck_assert_str_eq(strv_env_get(env, "E"), "");
        ck_assert_int_eq(strv_env_unset(&env, "A"), 0);
        ck_assert_int_eq(strv_env_unset(&env, "nope"), 0);
        tf_assert_argv(env, "B=2", "AB=3", "E=", NULL);
        ck_assert_int_eq(strv_env_unset(&env, "B"), 0);
        ck_assert_int_eq(strv_env_unset(&env, "AB"), 0);
        ck_assert_int_eq(strv_env_unset(&env, "E"), 0);
        ck_assert_uint_eq(strv_length(env), 0);
        ck_assert_ptr_nonnull(env); /* an emptied array, still terminated */
        ck_assert_int_eq(strv_env_set(&env, "Z", "9"), 0);
        tf_assert_argv(env, "Z=9", NULL);
}
END_TEST

TF_MAIN("strv", "strv", NULL, NULL, 0, empty_vector_is_null, push_copies_consume_owns, many_pushes, copy_is_deep,
        env_get_matches_whole_names, env_set_and_unset)
