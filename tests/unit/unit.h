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
 * is not NULL, and a timeout of timeout_s seconds when it is > 0, else
 * TF_TCASE_TIMEOUT_S (Check's own default, 4 s, is too short for a suite
 * under ASan beside seven others on two cores: a timeout there is no
 * verdict on the code). */
#define TF_TCASE_TIMEOUT_S 60
TCase *tf_tcase(Suite *s, const char *name, void (*setup)(void), void (*teardown)(void), int timeout_s,
                const TTest *const *tests);

/* test added to tc once for each row of the array rows (the row's index is
 * the test's _i). */
#define TF_LOOP(tc, test, rows) tcase_add_loop_test(tc, test, 0, (int) (sizeof(rows) / sizeof((rows)[0])))

/* main() of a suite of one case: suite_name's case case_name, its fixture and
 * timeout as tf_tcase takes them, then its tests (START_TEST names), run by
 * tf_run_suite. */
#define TF_MAIN(suite_name, case_name, setup, teardown, timeout_s, ...)                                  \
        int main(void) {                                                                               \
                Suite *tf_suite_ = suite_create(suite_name);                                           \
                tf_tcase(tf_suite_, case_name, setup, teardown, timeout_s, TF_TESTS(__VA_ARGS__));     \
                return tf_run_suite(tf_suite_);                                                        \
        }

/* True as root; else says on stderr that the test (func: its __func__,
 * START_TEST's <name>_fn) is skipped and why. */
bool tf_root_or_say(const char *func, const char *why);
/* The rest of the running test is skipped unless it runs as root (a mount,
 * a chown, another user): TF_ROOT_OR_SKIP("mounting a tmpfs needs root"). */
#define TF_ROOT_OR_SKIP(why)                                                                                   \
        do {                                                                                                   \
                if (!tf_root_or_say(__func__, why)) return;                                                    \
        } while (0)

/* A new dir $TASKFERRY_TEST_TMPDIR (default /var/tmp)/<prefix>-XXXXXX, mode
 * 0700: under tf_run_suite inside the suite's dir. The canonical path,
 * malloc'd. */
char *tf_tmpdir_new(const char *prefix);
/* Remove dir and everything below it (rm_rf; failing the case when that
 * fails), free the string; NULL is a no-op. Returns NULL, for
 * "dir = tf_tmpdir_free(dir)". */
char *tf_tmpdir_free(char *dir);

/* dir/rel, malloc'd. */
char *tf_path(const char *dir, const char *rel);
/* mkdir -p dir/rel, mode 0700 for what it makes. */
void tf_mkdirs(const char *dir, const char *rel);
/* A symlink dir/link_rel pointing at dir/target_rel (an absolute target). */
void tf_symlink(const char *dir, const char *target_rel, const char *link_rel);
/* A file of len bytes at path, mode (past the umask), written whole; the
 * dirs above it must exist. */
void tf_write_file(const char *path, const void *data, size_t len, mode_t mode);
/* A Unix stream socket bound at path (not listening); its fd. */
int tf_bind_unix(const char *path);
/* A file of len bytes at dir/rel, mode 0600, the dirs between made (0700).
 * Its path, malloc'd. */
char *tf_put(const char *dir, const char *rel, const void *data, size_t len);
/* The whole file at path (at most 64 MiB), NUL-terminated, malloc'd; ""
 * when it does not exist and missing_ok. */
char *tf_read_file(const char *path, bool missing_ok);

/* The shell command made from fmt run as sh -ec in cwd (NULL: ours),
 * stdin /dev/null; fails the case (naming the command and its stderr)
 * unless it exits 0. Its stdout (at most 1 MiB) without trailing newlines,
 * malloc'd. */
char *tf_sh(const char *cwd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct executor;
/* text fed to e's normalizer line by line as the shim feeds it (every line,
 * a trailing fragment with newline=false, then normalize_finish): the lines
 * it wrote, NULL-terminated (none: an empty strv), malloc'd. */
char **tf_normalize(const struct executor *e, const char *text, size_t len);

/* argv is exactly the NULL-terminated strings that follow (the last
 * argument is NULL); a mismatch says the index, what is there and what was
 * wanted. */
void tf_assert_argv(char **argv, ...) __attribute__((sentinel));
