/* string-util.c: strdup_printf, set_error (the loaders' error exit) and
 * POSIX shell single-quoting, checked by running what it quotes through sh. */

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "string-util.h"
#include "unit.h"

START_TEST(printf_formats) {
        _cleanup_free_ char *a = strdup_printf("%s-%d-%05.1f", "x", -3, 2.25);
        ck_assert_str_eq(a, "x--3-002.2");
        _cleanup_free_ char *e = strdup_printf("%s", "");
        ck_assert_str_eq(e, "");
        /* a huge result is made whole */
        _cleanup_free_ char *h = strdup_printf("%*s|", 1 << 20, "z");
        ck_assert_uint_eq(strlen(h), (1 << 20) + 1);
        ck_assert_int_eq(h[(1 << 20) - 1], 'z');
        ck_assert_int_eq(h[0], ' ');
        /* bytes pass through as they are (no UTF-8 check) */
        _cleanup_free_ char *b = strdup_printf("%s", "\xff\xc0\x80");
        ck_assert_str_eq(b, "\xff\xc0\x80");
}
END_TEST

START_TEST(set_error_replaces_and_returns_r) {
        char *err = NULL;
        ck_assert_int_eq(set_error(&err, -EINVAL, "bad %s", "key"), -EINVAL);
        ck_assert_str_eq(err, "bad key");
        /* a second message frees the first (LeakSanitizer) */
        ck_assert_int_eq(set_error(&err, -ERANGE, "%d too big", 7), -ERANGE);
        ck_assert_str_eq(err, "7 too big");
        /* whatever r is, it comes back */
        ck_assert_int_eq(set_error(&err, -ENOENT, "gone"), -ENOENT);
        ck_assert_int_eq(set_error(&err, 0, "%s", ""), 0);
        ck_assert_str_eq(err, "");
        free(err);
}
END_TEST

static const struct {
        const char *in, *out;
} quotes[] = {
        {"", "''"},
        {"abc", "'abc'"},
        {"it's", "'it'\\''s'"},
        {"'", "''\\'''"},
        {"''", "''\\'''\\'''"},
        {"a b\tc\nd", "'a b\tc\nd'"},
        {"$HOME `x` $(y) \\ \" * ?", "'$HOME `x` $(y) \\ \" * ?'"},
        {"-n", "'-n'"},
        {"\xc3\xa9\xff", "'\xc3\xa9\xff'"},
};

START_TEST(shell_quote_table) {
        _cleanup_free_ char *q = shell_quote(quotes[_i].in);
        ck_assert_str_eq(q, quotes[_i].out);
}
END_TEST

START_TEST(shell_quote_round_trips_through_sh) {
        /* what sh makes of the quoted word is the original string */
        const char *hostile[] = {"it's", "'", "a'b'c", "$(touch /var/tmp/never) `id`", "x\ny", "  lead", "\\'", "*"};
        for (size_t i = 0; i < ELEMENTSOF(hostile); i++) {
                _cleanup_free_ char *q = shell_quote(hostile[i]);
                _cleanup_free_ char *out = tf_sh(NULL, "printf '%%s|' %s", q);
                _cleanup_free_ char *want = strdup_printf("%s|", hostile[i]);
                ck_assert_str_eq(out, want);
        }
}
END_TEST

int main(void) {
        Suite *s = suite_create("string-util");
        TCase *tc = tf_tcase(s, "strings", NULL, NULL, 0,
                             TF_TESTS(printf_formats, set_error_replaces_and_returns_r,
                                      shell_quote_round_trips_through_sh));
        TF_LOOP(tc, shell_quote_table, quotes);
        return tf_run_suite(s);
}
