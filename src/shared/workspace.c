/* Git workspace roots without running git: see workspace.h. */

#include "workspace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gitdir.h"
#include "macro.h"
#include "path-util.h"

int workspace_root_find(const char *dir, char **ret) {
        git_dirs g = {0};
        int r = git_dirs_find(dir, &g);
        if (r < 0) return r;
        char *root;
        if (r == 0) {
                root = realpath(dir, NULL);
                if (!root) root = strdup(dir);
        } else if (strstr(g.common, "/.git/modules/"))
                root = strdup(g.top); /* a submodule: its own top level */
        else
                root = path_parent(g.common);
        git_dirs_done(&g);
        if (!root) return -ENOMEM;
        *ret = root;
        return r;
}

char *workspace_root(const char *dir) {
        char *root = NULL;
        return workspace_root_find(dir, &root) < 0 ? NULL : root;
}

bool same_workspace(const char *a, const char *b) {
        if (streq(a, b)) return true;
        _cleanup_free_ char *ra = workspace_root(a), *rb = workspace_root(b);
        return ra && rb && streq(ra, rb);
}
