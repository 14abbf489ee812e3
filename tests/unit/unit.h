#pragma once
/* What every unit suite shares: running a suite over a temp dir of its own,
 * the dirs and files its cases make in it, and the checks several suites
 * spell alike. Every helper that can fail fails the running case (Check's
 * ck_assert) rather than return an error. Sizes are in bytes. */

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Run every case of s, each in its own process (unless CK_FORK=no), with
 * Check's normal report, and free the runner (and s). First it makes the
 * suite's dir, $TASKFERRY_TEST_TMPDIR (default /var/tmp)/<program>-XXXXXX,
 * mode 0700, and exports it as TASKFERRY_TEST_TMPDIR to the cases; after the
 * last case it removes it, so that a failing case, which exits without its
 * teardown, leaves nothing behind (TASKFERRY_TEST_KEEP=1 keeps it and says
 * where). Returns EXIT_SUCCESS when every case passed, EXIT_FAILURE when one
 * did not or the dir could not be made: main's exit code. */
int tf_run_suite(Suite *s);
/* The same with every case in this one process (CK_NOFORK): for the suite
 * whose state across cases is the point. */
int tf_run_suite_nofork(Suite *s);
/* The suite's dir while tf_run_suite runs (canonical), NULL before. */
const char *tf_suite_dir(void);

/* The tests of a case, in order, for tf_tcase: TF_TESTS(a, b, c) (each a
 * START_TEST name). */
#define TF_TESTS(...) ((const TTest *const[]) {__VA_ARGS__, NULL})

/* A new case named name, already added to s, holding tests (TF_TESTS, or
 * NULL for none yet); with setup/teardown as its checked fixture when setup
 * is not NULL, and a timeout of timeout_s seconds when it is > 0 (else
 * Check's default). */
TCase *tf_tcase(Suite *s, const char *name, void (*setup)(void), void (*teardown)(void), int timeout_s,
                const TTest *const *tests);

/* main() of a suite of one case: suite_name's case case_name, its fixture and
 * timeout as tf_tcase takes them, then its tests (START_TEST names), run by
 * tf_run_suite. */
#define TF_MAIN(suite_name, case_name, setup, teardown, timeout_s, ...)                                  \
        int main(void) {                                                                               \
                Suite *tf_suite_ = suite_create(suite_name);                                           \
                tf_tcase(tf_suite_, case_name, setup, teardown, timeout_s, TF_TESTS(__VA_ARGS__));     \
                return tf_run_suite(tf_suite_);                                                        \
        }
