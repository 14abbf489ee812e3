/* target-access.h: a dir above the target that the plan shows from the host
 * and the worker's uid may not enter is named, with its mode and the fix;
 * one the plan does not show (bwrap makes it) is not looked at. */

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-util.h"
#include "macro.h"
#include "string-util.h"
#include "target-access.h"
#include "unit.h"

START_TEST(closed_parent_named) {
        const char *dir = tf_suite_dir();
        _cleanup_free_ char *parent = strdup_printf("%s/closed", dir), *target = strdup_printf("%s/closed/repo", dir);
        ck_assert_int_eq(mkdir_p(target, 0755), 0);
        sandbox_mount *m = NULL;
        size_t n = 0;
        ck_assert_int_eq(sandbox_mounts_push(&m, &n, SANDBOX_MOUNT_RO_BIND, dir, dir, NULL, NULL, NULL), 0);
        ck_assert_int_eq(sandbox_mounts_push(&m, &n, SANDBOX_MOUNT_TARGET, NULL, target, NULL, NULL, NULL), 0);
        char *reason = NULL;
        ck_assert_int_eq(target_access_check(target, m, n, &reason), 0);
        ck_assert_ptr_null(reason);
        /* root is the owner of what it made: another owner closes it to a root worker */
        if (geteuid() == 0) ck_assert_int_eq(chown(parent, 65534, 65534), 0);
        ck_assert_int_eq(chmod(parent, geteuid() == 0 ? 0700 : 0600), 0);
        ck_assert_int_eq(target_access_check(target, m, n, &reason), -EACCES);
        ck_assert_ptr_nonnull(reason);
        ck_assert_msg(strstr(reason, parent) && strstr(reason, "help: ") && strstr(reason, "chmod o+x"), "%s", reason);
        free(reason);
        reason = NULL;
        /* not shown from the host (no mount above it): bwrap makes it, 0755 */
        ck_assert_int_eq(target_access_check(target, m + 1, 1, &reason), 0);
        ck_assert_int_eq(chmod(parent, 0755), 0);
        sandbox_mounts_free(m, n);
}
END_TEST

TF_MAIN("target-access", "target-access", NULL, NULL, 0, closed_parent_named)
