/* Git workspace roots (spec protocol-cli.md §1.9, lifecycle.md §7.4) without
 * running git on the event loop: the same answer as
 * `dirname(git rev-parse --git-common-dir)`, read from the .git entries. */

#include <limits.h>
#include <sys/stat.h>

#include "workspace.h"

#include <stdlib.h>
#include <string.h>
#include "util.h"

static char *dirname_dup(const char *p) {
        char *d = strdup(p);
        if (!d) return NULL;
        char *s = strrchr(d, '/');
        if (s == d) s[1] = 0;
        else if (s) *s = 0;
        return d;
}

static char *resolve_against(const char *base, const char *p) {
        _cleanup_free_ char *joined = p[0] == '/' ? strdup(p) : strdup_printf("%s/%s", base, p);
        if (!joined) return NULL;
        char *real = realpath(joined, NULL);
        return real ? real : TAKE_PTR(joined);
}

/* Contents of a small file with trailing whitespace removed. */
static char *read_trimmed(const char *path) {
        char *data = NULL;
        if (read_file(path, 8192, &data, NULL) < 0) return NULL;
        size_t n = strlen(data);
        while (n && (data[n - 1] == '\n' || data[n - 1] == '\r' || data[n - 1] == ' ')) data[--n] = 0;
        return data;
}

static char *root_from_gitfile(const char *top, const char *gitfile) {
        _cleanup_free_ char *content = read_trimmed(gitfile);
        if (!content || !startswith(content, "gitdir:")) return NULL;
        const char *g = content + 7;
        while (*g == ' ') g++;
        _cleanup_free_ char *gitdir = resolve_against(top, g);
        if (!gitdir) return NULL;
        if (strstr(gitdir, "/.git/modules/")) return strdup(top); /* submodule: its own top level */
        _cleanup_free_ char *cd_file = strdup_printf("%s/commondir", gitdir);
        _cleanup_free_ char *cd = cd_file ? read_trimmed(cd_file) : NULL;
        if (cd) {
                _cleanup_free_ char *common = resolve_against(gitdir, cd);
                return common ? dirname_dup(common) : NULL;
        }
        return strdup(top);
}

char *workspace_root(const char *dir) {
        char *real = realpath(dir, NULL);
        _cleanup_free_ char *cur = real ? real : strdup(dir);
        if (!cur) return NULL;
        _cleanup_free_ char *probe = strdup(cur);
        while (probe) {
                _cleanup_free_ char *git = strdup_printf("%s%s.git", probe, streq(probe, "/") ? "" : "/");
                struct stat st;
                if (git && lstat(git, &st) == 0) {
                        if (S_ISDIR(st.st_mode)) return strdup(probe);
                        if (S_ISREG(st.st_mode)) {
                                char *r = root_from_gitfile(probe, git);
                                if (r) return r;
                        }
                }
                if (streq(probe, "/")) break;
                char *parent = dirname_dup(probe);
                free(probe);
                probe = parent;
        }
        return TAKE_PTR(cur);
}

bool same_workspace(const char *a, const char *b) {
        if (streq(a, b)) return true;
        _cleanup_free_ char *ra = workspace_root(a), *rb = workspace_root(b);
        return ra && rb && streq(ra, rb);
}
