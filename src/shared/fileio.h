#pragma once
/* Reading and writing whole files and fds. Sizes are in bytes; errors are
 * -errno. */

#include <stddef.h>
#include <sys/types.h>

/* write(2) all of buf[0..len) to fd, retrying on EINTR and short writes. */
int loop_write(int fd, const void *buf, size_t len);
/* Write data to path atomically: a temp file in the same directory
 * (".<name>-<8 hex>.tmp", created O_EXCL with `mode`, then fchmod'ed to it
 * past the umask), write, fsync, rename over path, fsync the directory
 * (best effort). The temp file is removed on failure. */
int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode);
/* Read fd from its current offset to EOF (at most max bytes; -EFBIG if
 * larger). *ret is NUL-terminated (malloc'd); ret_len may be NULL. */
int read_fd(int fd, size_t max, char **ret, size_t *ret_len);
/* Read a whole file the same way. */
int read_file(const char *path, size_t max, char **ret, size_t *ret_len);
