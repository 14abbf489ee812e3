/* Reading and writing whole files and fds (see fileio.h). */

#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "id-util.h"
#include "macro.h"
#include "path-util.h"
#include "string-util.h"

static int fsync_parent(const char *path) {
        if (!strchr(path, '/')) return 0;
        _cleanup_free_ char *dir = path_parent(path);
        if (!dir) return -ENOMEM;
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) return -errno;
        if (fsync(fd) < 0) return -errno;
        return 0;
}

int loop_write(int fd, const void *buf, size_t len) {
        const char *p = buf;
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR) continue;
                        return -errno;
                }
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode) {
        char u[37];
        int r = uuid4(u);
        if (r < 0) return r;
        _cleanup_free_ char *dir = strdup(path);
        if (!dir) return -ENOMEM;
        char *slash = strrchr(dir, '/');
        const char *base = slash ? slash + 1 : path;
        if (slash) slash[1] = 0;
        else dir[0] = 0;
        _cleanup_free_ char *tmp = strdup_printf("%s.%s-%.8s.tmp", dir, base, u);
        if (!tmp) return -ENOMEM;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0) return -errno;
        if (fchmod(fd, mode) < 0) goto fail;
        r = loop_write(fd, data, len);
        if (r < 0) {
                errno = -r;
                goto fail;
        }
        if (fsync(fd) < 0) goto fail;
        if (close(fd) < 0) {
                fd = -1;
                goto fail;
        }
        fd = -1;
        if (rename(tmp, path) < 0) goto fail;
        (void) fsync_parent(path);
        return 0;
fail:
        r = negative_errno();
        if (fd >= 0) close(fd);
        unlink(tmp);
        return r;
}

int read_fd(int fd, size_t max, char **ret, size_t *ret_len) {
        size_t cap = 4096, len = 0;
        /* room for one byte past max, to tell a file of max bytes from a
         * larger one; SIZE_MAX (no limit) must not wrap to 0 */
        size_t want = max < SIZE_MAX - 1 ? max + 1 : SIZE_MAX - 1;
        _cleanup_free_ char *buf = malloc(cap + 1);
        if (!buf) return -ENOMEM;
        for (;;) {
                if (len == cap) {
                        if (cap >= want) return -EFBIG;
                        if (cap > SIZE_MAX / 4) return -ENOMEM;
                        size_t ncap = cap * 2 > want ? want : cap * 2;
                        char *nb = realloc(buf, ncap + 1);
                        if (!nb) return -ENOMEM;
                        buf = nb;
                        cap = ncap;
                }
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0) {
                        if (errno == EINTR) continue;
                        return -errno;
                }
                if (n == 0) break;
                len += (size_t) n;
                if (len > max) return -EFBIG;
        }
        buf[len] = 0;
        if (ret_len) *ret_len = len;
        *ret = TAKE_PTR(buf);
        return 0;
}

int read_file(const char *path, size_t max, char **ret, size_t *ret_len) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) return -errno;
        return read_fd(fd, max, ret, ret_len);
}
