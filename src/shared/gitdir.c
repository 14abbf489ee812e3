#include "gitdir.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
#include "path-util.h"
#include "string-util.h"

void git_dirs_done(git_dirs *d) {
        free(d->top);
        free(d->gitdir);
        free(d->common);
        *d = (git_dirs){0};
}

static char *read_trimmed(const char *path) {
        char *data = NULL;
        if (read_file(path, 8192, &data, NULL) < 0) return NULL;
        size_t n = strlen(data);
        while (n && strchr("\n\r \t", data[n - 1])) data[--n] = 0;
        return data;
}

/* realpath of p, relative ones against base */
static char *resolve_against(const char *base, const char *p) {
        _cleanup_free_ char *joined = p[0] == '/' ? strdup(p) : strdup_printf("%s/%s", base, p);
        return joined ? realpath(joined, NULL) : NULL;
}

int git_dirs_find(const char *dir, git_dirs *ret) {
        *ret = (git_dirs){0};
        _cleanup_free_ char *probe = realpath(dir, NULL);
        if (!probe) return 0;
        for (;;) {
                _cleanup_free_ char *git = strdup_printf("%s%s.git", probe, streq(probe, "/") ? "" : "/");
                if (!git) return -ENOMEM;
                struct stat st;
                if (lstat(git, &st) == 0) {
                        _cleanup_free_ char *g = NULL;
                        if (S_ISDIR(st.st_mode)) g = realpath(git, NULL);
                        else if (S_ISREG(st.st_mode)) {
                                _cleanup_free_ char *content = read_trimmed(git);
                                if (content && startswith(content, "gitdir:")) {
                                        const char *p = content + 7;
                                        while (*p == ' ') p++;
                                        g = resolve_against(probe, p);
                                }
                        }
                        if (g && is_dir(g)) {
                                _cleanup_free_ char *cd_file = strdup_printf("%s/commondir", g);
                                _cleanup_free_ char *cd = cd_file ? read_trimmed(cd_file) : NULL;
                                char *common = cd ? resolve_against(g, cd) : strdup(g);
                                if (!common) return -ENOMEM;
                                ret->top = TAKE_PTR(probe);
                                ret->gitdir = TAKE_PTR(g);
                                ret->common = common;
                                return 1;
                        }
                }
                if (streq(probe, "/")) return 0;
                char *up = path_parent(probe);
                if (!up) return -ENOMEM;
                free(probe);
                probe = up;
        }
}
