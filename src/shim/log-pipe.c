#include "log-pipe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "strv.h"

#define READ_CHUNK 65536
/* A stdout "line" longer than this without a newline is logged in pieces of
 * this size (newline=false; LINE_BUFFER_SPLIT), so a worker cannot grow the
 * shim, which runs outside the sandbox, without bound. */
#define LINE_MAX_BYTES ((size_t) 64 << 20)

/* Keep the log to its tail (log_pipe.max_bytes): copy its last max_bytes
 * to its start and cut it there. Appends (O_APPEND) go on at the new end.
 * Through a second open of the file without O_APPEND (pwrite on an
 * O_APPEND descriptor appends on Linux). */
static void trim(log_pipe *p) {
        struct stat st;
        if (!p->max_bytes || fstat(p->log_fd, &st) < 0 || (uint64_t) st.st_size <= 2 * p->max_bytes) return;
        size_t keep = (size_t) p->max_bytes;
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", p->log_fd);
        _cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);
        _cleanup_free_ char *buf = fd >= 0 ? malloc(keep) : NULL;
        if (!buf || pread(fd, buf, keep, st.st_size - (off_t) keep) != (ssize_t) keep ||
            pwrite(fd, buf, keep, 0) != (ssize_t) keep || ftruncate(fd, (off_t) keep) < 0)
                log_warning_errno(-EIO, "task %s: cannot trim the log", p->task_id);
}

void log_pipe_raw(log_pipe *p, const char *data, size_t len) {
        if (len == 0) return;
        int r = loop_write(p->log_fd, data, len);
        if (r < 0) log_warning_errno(r, "task %s: cannot write stderr to the log", p->task_id);
        p->at_line_start = data[len - 1] == '\n';
        trim(p);
}

static void log_lines(log_pipe *p, char **lines) {
        for (size_t i = 0; lines && lines[i]; i++) {
                if (!p->at_line_start) {
                        (void) loop_write(p->log_fd, "\n", 1);
                        p->at_line_start = true;
                }
                struct iovec iov[2] = {{.iov_base = lines[i], .iov_len = strlen(lines[i])},
                                       {.iov_base = (char *) "\n", .iov_len = 1}};
                ssize_t n;
                while ((n = writev(p->log_fd, iov, 2)) < 0 && errno == EINTR)
                        ;
                if (n < 0) {
                        log_warning_errno(-errno, "task %s: cannot write to the log", p->task_id);
                        continue;
                }
                /* A short write (disk full, a signal): finish the line. */
                size_t done = (size_t) n;
                if (done < iov[0].iov_len) (void) loop_write(p->log_fd, lines[i] + done, iov[0].iov_len - done);
                if (done < iov[0].iov_len + 1) (void) loop_write(p->log_fd, "\n", 1);
        }
        trim(p);
}

static void emit_line(log_pipe *p, const char *line, size_t len, bool newline) {
        _cleanup_strv_free_ char **out = NULL;
        if (!p->norm) {
                _cleanup_free_ char *copy = strndup(line, len);
                char *one[] = {copy, NULL};
                if (copy) log_lines(p, one);
                return;
        }
        int r = p->exec->normalize_line(p->norm, line, len, newline, &out);
        if (r < 0) log_warning_errno(r, "task %s: cannot normalize a stdout line", p->task_id);
        log_lines(p, out);
}

int log_pipe_init(log_pipe *p, const executor *exec, int log_fd, const char *task_id) {
        *p = (log_pipe){.exec = exec, .log_fd = log_fd, .task_id = task_id, .at_line_start = true,
                        .lines = LINE_BUFFER_INIT(LINE_MAX_BYTES, LINE_BUFFER_SPLIT)};
        if (exec->normalizer_new && exec->normalize_line) {
                p->norm = exec->normalizer_new();
                if (!p->norm) log_warning("task %s: no memory for the %s normalizer; logging stdout verbatim",
                                          task_id, exec->id);
        }
        return 0;
}

/* Log every complete line held, and every LINE_MAX_BYTES piece of a longer
 * one; keep the partial rest. */
static void process_lines(log_pipe *p) {
        const char *line;
        size_t len;
        int k;
        while ((k = line_buffer_pop(&p->lines, &line, &len)) > 0) emit_line(p, line, len, k == LINE_BUFFER_LINE);
}

int log_pipe_read(log_pipe *p, int fd) {
        if (p->exec->raw_output) {
                char buf[READ_CHUNK];
                ssize_t n = read(fd, buf, sizeof buf);
                if (n < 0) return errno == EINTR || errno == EAGAIN ? 1 : -errno;
                if (n == 0) return 0;
                log_pipe_raw(p, buf, (size_t) n);
                return 1;
        }
        ssize_t k = line_buffer_read(&p->lines, fd, READ_CHUNK);
        if (k == -EINTR || k == -EAGAIN) return 1;
        if (k < 0) return (int) k;
        if (k == 0) return 0;
        process_lines(p);
        return 1;
}

void log_pipe_finish(log_pipe *p) {
        const char *line;
        size_t len;
        if (line_buffer_pop_rest(&p->lines, &line, &len) > 0) emit_line(p, line, len, false);
        if (p->norm && p->exec->normalize_finish) {
                _cleanup_strv_free_ char **out = NULL;
                if (p->exec->normalize_finish(p->norm, &out) < 0)
                        log_warning("task %s: the normalizer failed at the end of stdout", p->task_id);
                log_lines(p, out);
        }
}

void log_pipe_done(log_pipe *p) {
        if (p->norm && p->exec->normalizer_free) p->exec->normalizer_free(p->norm);
        p->norm = NULL;
        line_buffer_done(&p->lines);
}
