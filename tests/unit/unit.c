/* What every unit suite shares (unit.h). */

#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "executor.h"
#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

static char *suite_dir;

const char *tf_suite_dir(void) { return suite_dir; }

static const char *tmp_base(void) {
        const char *base = getenv("TASKFERRY_TEST_TMPDIR");
        return isempty(base) ? "/var/tmp" : base;
}

static int run(Suite *s, bool forked) {
        _cleanup_free_ char *tmpl = strdup_printf("%s/%s-XXXXXX", tmp_base(), program_invocation_short_name);
        if (!tmpl || !mkdtemp(tmpl) || !(suite_dir = realpath(tmpl, NULL)) ||
            setenv("TASKFERRY_TEST_TMPDIR", suite_dir, 1) < 0) {
                fprintf(stderr, "%s: cannot make the suite's dir under %s: %m\n", program_invocation_short_name,
                        tmp_base());
                return EXIT_FAILURE;
        }
        SRunner *sr = srunner_create(s);
        if (!forked) srunner_set_fork_status(sr, CK_NOFORK);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        const char *keep = getenv("TASKFERRY_TEST_KEEP");
        if (!isempty(keep) && !streq(keep, "0"))
                fprintf(stderr, "%s: kept %s\n", program_invocation_short_name, suite_dir);
        else
                (void) rm_rf(suite_dir);
        free(suite_dir);
        suite_dir = NULL;
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

int tf_run_suite(Suite *s) { return run(s, true); }

int tf_run_suite_nofork(Suite *s) { return run(s, false); }

TCase *tf_tcase(Suite *s, const char *name, void (*setup)(void), void (*teardown)(void), int timeout_s,
                const TTest *const *tests) {
        TCase *tc = tcase_create(name);
        if (setup) tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, timeout_s > 0 ? timeout_s : TF_TCASE_TIMEOUT_S);
        for (; tests && *tests; tests++) tcase_add_test(tc, *tests);
        suite_add_tcase(s, tc);
        return tc;
}

bool tf_root_or_say(const char *func, const char *why) {
        if (geteuid() == 0) return true;
        size_t n = strlen(func);
        if (n > 3 && streq(func + n - 3, "_fn")) n -= 3;
        fprintf(stderr, "%.*s: skipped (not root: %s)\n", (int) n, func, why);
        return false;
}

char *tf_tmpdir_new(const char *prefix) {
        _cleanup_free_ char *tmpl = strdup_printf("%s/%s-XXXXXX", tmp_base(), prefix);
        ck_assert_ptr_nonnull(tmpl);
        ck_assert_msg(mkdtemp(tmpl), "mkdtemp %s: %s", tmpl, strerror(errno));
        char *dir = realpath(tmpl, NULL);
        ck_assert_msg(dir, "realpath %s: %s", tmpl, strerror(errno));
        return dir;
}

char *tf_tmpdir_free(char *dir) {
        if (!dir) return NULL;
        int r = rm_rf(dir);
        ck_assert_msg(r >= 0, "rm -rf %s: %s", dir, strerror(-r));
        free(dir);
        return NULL;
}

char *tf_path(const char *dir, const char *rel) {
        char *p = strdup_printf("%s/%s", dir, rel);
        ck_assert_ptr_nonnull(p);
        return p;
}

void tf_mkdirs(const char *dir, const char *rel) {
        _cleanup_free_ char *p = tf_path(dir, rel);
        int r = mkdir_p(p, 0700);
        ck_assert_msg(r >= 0, "mkdir -p %s: %s", p, strerror(-r));
}

void tf_symlink(const char *dir, const char *target_rel, const char *link_rel) {
        _cleanup_free_ char *t = tf_path(dir, target_rel), *l = tf_path(dir, link_rel);
        ck_assert_msg(symlink(t, l) == 0, "symlink %s → %s: %s", l, t, strerror(errno));
}

void tf_write_file(const char *path, const void *data, size_t len, mode_t mode) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        ck_assert_msg(loop_write(fd, data, len) == 0, "write %s", path);
        ck_assert_msg(fchmod(fd, mode) == 0, "chmod %s: %s", path, strerror(errno));
}

char *tf_put(const char *dir, const char *rel, const void *data, size_t len) {
        char *p = tf_path(dir, rel);
        char *slash = strrchr(p, '/');
        if (slash - p > (ptrdiff_t) strlen(dir)) {
                *slash = 0;
                ck_assert_msg(mkdir_p(p, 0700) == 0, "mkdir -p %s", p);
                *slash = '/';
        }
        tf_write_file(p, data, len, 0600);
        return p;
}

char *tf_read_file(const char *path, bool missing_ok) {
        char *data = NULL;
        int r = read_file(path, 64 << 20, &data, NULL);
        if (r == -ENOENT && missing_ok) {
                data = strdup("");
                ck_assert_ptr_nonnull(data);
                return data;
        }
        ck_assert_msg(r >= 0, "read %s: %s", path, strerror(-r));
        return data;
}

char *tf_sh(const char *cwd, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *cmd = NULL;
        int k = vasprintf(&cmd, fmt, ap);
        va_end(ap);
        ck_assert_int_ge(k, 0);
        char *argv[] = {(char *) "sh", (char *) "-ec", cmd, NULL};
        run_result r = {0};
        ck_assert_int_eq(run_command(argv, NULL, cwd, 1 << 20, -1, &r), 0);
        ck_assert_msg(r.exit_code == 0, "%s failed (%d): %s", cmd, r.exit_code, strnull(r.err));
        char *out = r.out ? strndup(r.out, r.out_len) : strdup("");
        run_result_done(&r);
        ck_assert_ptr_nonnull(out);
        for (size_t n = strlen(out); n > 0 && out[n - 1] == '\n'; n--) out[n - 1] = 0;
        return out;
}

char **tf_normalize(const executor *e, const char *text, size_t len) {
        normalizer *n = e->normalizer_new();
        ck_assert_ptr_nonnull(n);
        char **out = NULL;
        const char *p = text, *end = text + len;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t l = nl ? (size_t) (nl - p) : (size_t) (end - p);
                ck_assert_int_ge(e->normalize_line(n, p, l, nl != NULL, &out), 0);
                p = nl ? nl + 1 : end;
        }
        if (e->normalize_finish) ck_assert_int_ge(e->normalize_finish(n, &out), 0);
        e->normalizer_free(n);
        if (!out) out = calloc(1, sizeof(char *));
        ck_assert_ptr_nonnull(out);
        return out;
}

void tf_assert_argv(char **argv, ...) {
        va_list ap;
        va_start(ap, argv);
        size_t i = 0;
        for (const char *want; (want = va_arg(ap, const char *)); i++) {
                ck_assert_msg(argv[i], "argv too short: missing [%zu] %s", i, want);
                ck_assert_msg(streq(argv[i], want), "argv[%zu] is \"%s\", want \"%s\"", i, argv[i], want);
        }
        va_end(ap);
        ck_assert_msg(!argv[i], "argv too long: extra [%zu] %s", i, argv[i]);
}

int tf_bind_unix(const char *path) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        ck_assert_uint_lt(strlen(path), sizeof sa.sun_path);
        strcpy(sa.sun_path, path);
        ck_assert_msg(bind(fd, (struct sockaddr *) &sa, sizeof sa) == 0, "bind %s: %s", path, strerror(errno));
        return fd;
}
