/* Creating, removing and testing directories (see fs-util.h). */

#include "fs-util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"

int mkdir_p(const char *path, mode_t mode) {
        if (!*path) return -ENOENT; /* as mkdir(""); the walk below starts past the first byte */
        _cleanup_free_ char *p = strdup(path);
        if (!p) return -ENOMEM;
        size_t n = strlen(p);
        while (n > 1 && p[n - 1] == '/') p[--n] = 0;
        for (char *s = p + 1; *s; s++) {
                if (*s != '/') continue;
                *s = 0;
                if (mkdir(p, mode) < 0 && errno != EEXIST) return -errno;
                *s = '/';
        }
        if (mkdir(p, mode) < 0) {
                if (errno != EEXIST) return -errno;
                if (!is_dir(p)) return -ENOTDIR;
        }
        return 0;
}

int mkdir_p_chmod(const char *path, mode_t mode) {
        int r = mkdir_p(path, mode);
        if (r < 0) return r;
        if (chmod(path, mode) < 0) return -errno;
        return 0;
}

static int rm_rf_at(int dfd, const char *name) {
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode)) {
                if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT) return -errno;
                return 0;
        }
        if ((st.st_mode & 0700) != 0700) (void) fchmodat(dfd, name, (st.st_mode & 07777) | 0700, 0);
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }
        int r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, "..")) continue;
                int k = rm_rf_at(dirfd(d), de->d_name);
                if (k < 0 && r == 0) r = k;
        }
        closedir(d);
        if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0) r = -errno;
        return r;
}

int rm_rf(const char *path) { return rm_rf_at(AT_FDCWD, path); }

bool is_dir(const char *path) {
        struct stat st;
        return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}
