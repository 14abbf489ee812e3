/* One `git cat-file --batch` for many blobs (see git-cat.h). */
#include "git-cat.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <signal.h>
#include <unistd.h>

#include "fileio.h"
#include "git-output.h"
#include "macro.h"
#include "path-util.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"

#define HEADER_MAX 256
#define STDERR_KEEP 4096

struct git_cat {
        pid_t pid;
        int in_fd;  /* our end of its stdin (a socket: a dead git is EPIPE, never SIGPIPE) */
        int out_fd; /* its stdout */
        int err_fd; /* a memfd: its stderr */
        bool broken;
        size_t pos, len;
        char buf[65536];
};

static char *stderr_text(git_cat *c) {
        char b[STDERR_KEEP + 1];
        ssize_t n = c->err_fd >= 0 ? pread(c->err_fd, b, STDERR_KEEP, 0) : -1;
        if (n < 0) n = 0;
        b[n] = 0;
        while (n > 0 && (b[n - 1] == '\n' || b[n - 1] == ' ')) b[--n] = 0;
        return strdup_printf("git cat-file --batch failed%s%s", n > 0 ? ": " : "", b);
}

static int fail(git_cat *c, char **reason) {
        c->broken = true;
        if (reason && !*reason) *reason = stderr_text(c);
        return -EIO;
}

int git_cat_open(char *const envp[], git_cat **ret, char **reason) {
        _cleanup_free_ char *exe = NULL;
        int r = find_executable("git", envp ? strv_env_get(envp, "PATH") : NULL, &exe);
        if (r < 0) {
                if (reason) *reason = strdup_printf("cannot find git: %s", strerror(-r));
                return r;
        }
        git_cat *c = calloc(1, sizeof *c);
        if (!c) return -ENOMEM;
        c->pid = -1;
        c->in_fd = c->out_fd = c->err_fd = -1;
        int in[2] = {-1, -1}, out[2] = {-1, -1};
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
            (c->err_fd = memfd_create("git-cat-stderr", MFD_CLOEXEC)) < 0) {
                r = -errno;
                safe_close(in[0]), safe_close(in[1]), safe_close(out[0]), safe_close(out[1]);
                git_cat_close(c);
                if (reason) *reason = strdup_printf("cannot start git cat-file --batch: %s", strerror(-r));
                return r;
        }
        char *argv[] = {(char *) "git", (char *) "-c", (char *) "core.fsmonitor=false", (char *) "-c",
                        (char *) "core.hooksPath=/dev/null", (char *) "cat-file", (char *) "--batch", NULL};
        pid_t pid;
        r = safe_fork("git", FORK_DEATHSIG_SIGKILL | FORK_RESET_SIGNALS, &pid);
        if (r == 0) {
                if (dup2(in[1], 0) < 0 || dup2(out[1], 1) < 0 || dup2(c->err_fd, 2) < 0 || chdir("/") < 0) _exit(127);
                execve(exe, argv, envp ? envp : environ);
                dprintf(2, "exec %s: %s\n", exe, strerror(errno));
                _exit(127);
        }
        safe_close(in[1]);
        safe_close(out[1]);
        c->in_fd = in[0];
        c->out_fd = out[0];
        if (r < 0) {
                git_cat_close(c);
                if (reason) *reason = strdup_printf("cannot start git cat-file --batch: %s", strerror(-r));
                return r;
        }
        c->pid = pid;
        *ret = c;
        return 0;
}

/* Refill the buffer when it is empty: >0 bytes available, 0 EOF, -errno. */
static ssize_t fill(git_cat *c) {
        if (c->pos < c->len) return (ssize_t) (c->len - c->pos);
        c->pos = c->len = 0;
        for (;;) {
                ssize_t n = read(c->out_fd, c->buf, sizeof c->buf);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) return -errno;
                c->len = (size_t) n;
                return n;
        }
}

static int read_header(git_cat *c, char line[static HEADER_MAX]) {
        size_t n = 0;
        for (;;) {
                ssize_t k = fill(c);
                if (k <= 0) return -EIO;
                while (c->pos < c->len) {
                        char ch = c->buf[c->pos++];
                        if (ch == '\n') {
                                line[n] = 0;
                                return 0;
                        }
                        if (n + 1 >= HEADER_MAX) return -EIO;
                        line[n++] = ch;
                }
        }
}

/* Pass size bytes of content (then git's closing LF) to sink, or drop them (fd < 0, buf NULL). */
static int body(git_cat *c, uint64_t size, int fd, char *buf) {
        uint64_t left = size;
        int werr = 0;
        while (left > 0) {
                ssize_t k = fill(c);
                if (k <= 0) return -EIO;
                size_t take = (uint64_t) k < left ? (size_t) k : (size_t) left;
                if (buf) memcpy(buf + (size - left), c->buf + c->pos, take);
                else if (fd >= 0 && !werr) werr = loop_write(fd, c->buf + c->pos, take);
                c->pos += take;
                left -= take;
                if (werr) return werr; /* the rest stays unread: the caller marks c broken */
        }
        ssize_t k = fill(c);
        if (k <= 0 || c->buf[c->pos] != '\n') return -EIO;
        c->pos++;
        return 0;
}

static bool oid_ok(const char *oid) {
        size_t n = strspn(oid, "0123456789abcdef");
        return (n == 40 || n == 64) && !oid[n];
}

/* Send the request and read its header: 1 with *ret_size (a blob), or -errno
 * after the answer was consumed (the reader stays usable), or fail(). */
static int request(git_cat *c, const char *oid, uint64_t max, uint64_t *ret_size, char **reason) {
        if (c->broken) return -EIO;
        if (!oid_ok(oid)) return -EINVAL;
        char req[80];
        int len = snprintf(req, sizeof req, "%s\n", oid);
        for (int off = 0; off < len;) {
                ssize_t n = send(c->in_fd, req + off, (size_t) (len - off), MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) return fail(c, reason);
                off += (int) n;
        }
        char line[HEADER_MAX], type[32];
        if (read_header(c, line) < 0) return fail(c, reason);
        uint64_t size = 0;
        int h = git_cat_header_parse(line, oid, type, &size);
        if (h < 0) return fail(c, reason);
        if (h == 0) return -ENOENT;
        int r = !streq(type, "blob") ? -EINVAL : (max > 0 && size > max) ? -EFBIG : 1;
        if (r < 0) {
                /* not wanted: read past it */
                if (body(c, size, -1, NULL) < 0) return fail(c, reason);
                return r;
        }
        *ret_size = size;
        return 1;
}

int git_cat_blob_to_fd(git_cat *c, const char *oid, int fd, uint64_t max, char **reason) {
        uint64_t size = 0;
        int r = request(c, oid, max, &size, reason);
        if (r < 0) return r;
        r = body(c, size, fd, NULL);
        if (r == -EIO) return fail(c, reason);
        if (r < 0) c->broken = true;
        return r;
}

int git_cat_blob(git_cat *c, const char *oid, uint64_t max, char **ret, size_t *ret_len, char **reason) {
        uint64_t size = 0;
        int r = request(c, oid, max, &size, reason);
        if (r < 0) return r;
        if (size >= SIZE_MAX) return fail(c, reason);
        char *buf = malloc((size_t) size + 1);
        if (!buf) {
                c->broken = true;
                return -ENOMEM;
        }
        if (body(c, size, -1, buf) < 0) {
                free(buf);
                return fail(c, reason);
        }
        buf[size] = 0;
        *ret = buf;
        *ret_len = (size_t) size;
        return 0;
}

void git_cat_close(git_cat *c) {
        if (!c) return;
        safe_close(c->in_fd);
        safe_close(c->out_fd);
        if (c->pid > 0) {
                /* EOF on its stdin ends it; a broken one may still be writing */
                if (c->broken) (void) kill(c->pid, SIGKILL);
                (void) wait_for_terminate(c->pid, NULL);
        }
        safe_close(c->err_fd);
        free(c);
}
