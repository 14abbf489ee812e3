/* Path strings and executables along $PATH (see path-util.h). */

#include "path-util.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "string-util.h"

char *path_parent(const char *p) {
        char *d = strdup(p);
        if (!d) return NULL;
        char *s = strrchr(d, '/');
        if (s == d) s[1] = 0;
        else if (s) *s = 0;
        return d;
}

bool path_is_at_or_below(const char *path, const char *dir) {
        size_t n = strlen(dir);
        if (n == 1 && dir[0] == '/') return true;
        return strncmp(path, dir, n) == 0 && (path[n] == 0 || path[n] == '/');
}

bool paths_overlap(const char *a, const char *b) { return path_is_at_or_below(a, b) || path_is_at_or_below(b, a); }

int find_executable(const char *name, const char *path_env, char **ret) {
        if (strchr(name, '/')) {
                if (access(name, X_OK) < 0) return -errno;
                *ret = strdup(name);
                return *ret ? 0 : -ENOMEM;
        }
        if (!path_env) path_env = getenv("PATH");
        if (!path_env) path_env = "/usr/local/bin:/usr/bin:/bin";
        _cleanup_free_ char *copy = strdup(path_env);
        if (!copy) return -ENOMEM;
        char *save = NULL;
        for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
                if (!*dir) continue;
                _cleanup_free_ char *p = strdup_printf("%s/%s", dir, name);
                if (!p) return -ENOMEM;
                struct stat st;
                if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0) {
                        *ret = TAKE_PTR(p);
                        return 0;
                }
        }
        return -ENOENT;
}

int self_exe_dir(char **ret) {
        char buf[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
        if (n < 0) return -errno;
        buf[n] = 0;
        char *slash = strrchr(buf, '/');
        if (!slash) return -EINVAL;
        *slash = 0;
        *ret = strdup(buf);
        return *ret ? 0 : -ENOMEM;
}
