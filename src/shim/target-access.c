#include "target-access.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "macro.h"
#include "sandbox-plan.h"
#include "string-util.h"

static bool in_groups(gid_t g) {
        if (g == getegid()) return true;
        gid_t groups[256];
        int n = getgroups((int) ELEMENTSOF(groups), groups);
        for (int i = 0; i < n; i++)
                if (groups[i] == g) return true;
        return false;
}

/* may the worker (our ids, no capability) search dir st? */
static bool may_enter(const char *path, const struct stat *st) {
        mode_t bit = st->st_uid == geteuid() ? S_IXUSR : in_groups(st->st_gid) ? S_IXGRP : S_IXOTH;
        if (st->st_mode & bit) return true;
        /* an ACL may grant what the bits deny */
        return getxattr(path, "system.posix_acl_access", NULL, 0) >= 0;
}

int target_access_check(const char *directory, const sandbox_mount *m, size_t n, char **reason) {
        _cleanup_free_ char *p = strdup(directory);
        if (!p) return -ENOMEM;
        /* each dir above the target, top down */
        for (char *slash = strchr(p + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
                *slash = 0;
                struct stat st;
                bool shown = sandbox_plan_path_visible(m, n, p);
                if (shown && stat(p, &st) == 0 && S_ISDIR(st.st_mode) && !may_enter(p, &st)) {
                        return set_error(reason, -EACCES,
                                         "error: the sandbox cannot show %s: %s above it (mode %04o, owner uid %u, "
                                         "group %u) does not let uid %u enter, and a sandboxed worker has no "
                                         "capability to override that\nhelp: let it enter (chmod o+x %s, or a group "
                                         "of uid %u), keep the repository under a directory it may enter, or "
                                         "dispatch with --no-sandbox",
                                         directory, p, (unsigned) (st.st_mode & 07777), (unsigned) st.st_uid,
                                         (unsigned) st.st_gid, (unsigned) geteuid(), p,
                                         (unsigned) geteuid());
                }
                *slash = '/';
        }
        return 0;
}
