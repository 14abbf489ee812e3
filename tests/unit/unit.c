/* What every unit suite shares (unit.h). */

#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
#include "string-util.h"

static char *suite_dir;

const char *tf_suite_dir(void) { return suite_dir; }

static const char *tmp_base(void) {
        const char *base = getenv("TASKFERRY_TEST_TMPDIR");
        return isempty(base) ? "/var/tmp" : base;
}

static int run(Suite *s, bool fork) {
        _cleanup_free_ char *tmpl = strdup_printf("%s/%s-XXXXXX", tmp_base(), program_invocation_short_name);
        if (!tmpl || !mkdtemp(tmpl) || !(suite_dir = realpath(tmpl, NULL)) ||
            setenv("TASKFERRY_TEST_TMPDIR", suite_dir, 1) < 0) {
                fprintf(stderr, "%s: cannot make the suite's dir under %s: %m\n", program_invocation_short_name,
                        tmp_base());
                return EXIT_FAILURE;
        }
        SRunner *sr = srunner_create(s);
        if (!fork) srunner_set_fork_status(sr, CK_NOFORK);
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
        if (timeout_s > 0) tcase_set_timeout(tc, timeout_s);
        for (; tests && *tests; tests++) tcase_add_test(tc, *tests);
        suite_add_tcase(s, tc);
        return tc;
}
