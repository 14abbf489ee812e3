#include "log-pipe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "disk-budget.h"
#include "launch-spec.h"

_Static_assert(LAUNCH_LOG_BUDGET_MIN >= 8 * (uint64_t) LOG_PIPE_LINE_MAX,
               "the smallest log budget keeps a tail that holds the longest line and more");
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "strv.h"

#define READ_CHUNK 65536
/* the copies of a trim move this much at a time */
#define TRIM_CHUNK ((size_t) 1 << 20)

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

/* The marker between the head and the tail: fixed width, so that each trim
 * rewrites its count in place. */
static int format_budget_marker(const log_pipe *p, char buf[static LOG_PIPE_MARKER_BYTES + 1]) {
        char sz[32];
        int n = snprintf(buf, LOG_PIPE_MARKER_BYTES + 1,
                         "[taskferry-shim: the log is over its budget of %s: %20llu bytes cut here, between its head "
                         "and its tail]",
                         disk_size_format(p->budget, sz), (unsigned long long) p->cut_bytes);
        if (n < 0 || n >= LOG_PIPE_MARKER_BYTES) return -EINVAL;
        memset(buf + n, ' ', LOG_PIPE_MARKER_BYTES - 1 - (size_t) n);
        buf[LOG_PIPE_MARKER_BYTES - 1] = '\n';
        buf[LOG_PIPE_MARKER_BYTES] = 0;
        return 0;
}

/* Copy len bytes from src to dst (dst < src) within fd, a chunk at a time. */
static int copy_down(int fd, off_t src, off_t dst, uint64_t len) {
        _cleanup_free_ char *buf = malloc(TRIM_CHUNK);
        if (!buf) return -ENOMEM;
        for (uint64_t done = 0; done < len;) {
                size_t want = len - done > TRIM_CHUNK ? TRIM_CHUNK : (size_t) (len - done);
                ssize_t n = pread(fd, buf, want, src + (off_t) done);
                if (n <= 0) return n < 0 ? -errno : -EIO;
                int r = 0;
                if (pwrite(fd, buf, (size_t) n, dst + (off_t) done) != n) r = -EIO;
                if (r < 0) return r;
                done += (uint64_t) n;
        }
        return 0;
}

/* Offset just after the first '\n' at or after from (within one chunk),
 * else from itself. */
static off_t next_line_start(int fd, off_t from, off_t end) {
        _cleanup_free_ char *buf = malloc(TRIM_CHUNK);
        if (!buf) return from;
        size_t want = end - from > (off_t) TRIM_CHUNK ? TRIM_CHUNK : (size_t) (end - from);
        ssize_t n = pread(fd, buf, want, from);
        char *nl = n > 0 ? memchr(buf, '\n', (size_t) n) : NULL;
        return nl ? from + (nl - buf) + 1 : from;
}

/* Offset just after the last '\n' before at (within one chunk), else at. */
static off_t prev_line_end(int fd, off_t at) {
        _cleanup_free_ char *buf = malloc(TRIM_CHUNK);
        if (!buf) return at;
        off_t from = at > (off_t) TRIM_CHUNK ? at - (off_t) TRIM_CHUNK : 0;
        ssize_t n = pread(fd, buf, (size_t) (at - from), from);
        char *nl = n > 0 ? memrchr(buf, '\n', (size_t) n) : NULL;
        return nl ? from + (nl - buf) + 1 : at;
}

/* Keep the log to its budget (log_pipe.budget): once it holds more, the
 * first quarter stays (the head: how the worker started), a marker line
 * follows, and then the newest quarter (the tail: how it ended), each cut
 * at line boundaries; the middle goes. The file then holds about half its
 * budget and grows again. */
static void trim_budget(log_pipe *p) {
        struct stat st;
        if (!p->budget || fstat(p->log_fd, &st) < 0 || (uint64_t) st.st_size <= p->budget) return;
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", p->log_fd);
        _cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);
        char marker[LOG_PIPE_MARKER_BYTES + 1];
        if (fd < 0) {
                log_warning_errno(-errno, "task %s: cannot keep the log to its budget", p->task_id);
                return;
        }
        int r = 0;
        off_t size = st.st_size;
        bool first = !p->head_end;
        if (first) {
                off_t head = prev_line_end(fd, (off_t) (p->budget / 4));
                /* a head without a newline in its last chunk ends mid-line: the marker starts a line */
                if (head == (off_t) (p->budget / 4) && pwrite(fd, "\n", 1, head) == 1) head++;
                p->head_end = (uint64_t) head;
        }
        off_t keep_from = next_line_start(fd, size - (off_t) (p->budget / 4), size);
        off_t dst = (off_t) p->head_end + LOG_PIPE_MARKER_BYTES;
        if (keep_from <= dst) return; /* nothing to cut yet */
        /* the first cut writes the marker over the middle's start too */
        p->cut_bytes += (uint64_t) (keep_from - dst) + (first ? LOG_PIPE_MARKER_BYTES : 0);
        r = copy_down(fd, keep_from, dst, (uint64_t) (size - keep_from));
        if (r >= 0) r = format_budget_marker(p, marker);
        if (r >= 0 && pwrite(fd, marker, LOG_PIPE_MARKER_BYTES, (off_t) p->head_end) != LOG_PIPE_MARKER_BYTES) r = -EIO;
        if (r >= 0 && ftruncate(fd, dst + (size - keep_from)) < 0) r = -errno;
        if (r < 0) log_warning_errno(r, "task %s: cannot keep the log to its budget", p->task_id);
}

static void keep_bounded(log_pipe *p) {
        trim(p);
        trim_budget(p);
}

static void write_cut_marker(log_pipe *p, uint64_t dropped) {
        char line[160];
        int n = snprintf(line, sizeof line,
                         "%s[taskferry-shim: a line over %zu bytes without a newline was cut there: %llu bytes "
                         "dropped]\n",
                         p->at_line_start ? "" : "\n", (size_t) LOG_PIPE_LINE_MAX, (unsigned long long) dropped);
        if (n > 0) (void) loop_write(p->log_fd, line, (size_t) n);
        p->at_line_start = true;
}

static void raw_write(log_pipe *p, const char *data, size_t len) {
        if (len == 0) return;
        int r = loop_write(p->log_fd, data, len);
        if (r < 0) log_warning_errno(r, "task %s: cannot write stderr to the log", p->task_id);
        p->at_line_start = data[len - 1] == '\n';
}

void log_pipe_raw(log_pipe *p, const char *data, size_t len) {
        if (len == 0) return;
        if (!p->budget) {
                /* a check's output: byte for byte, its tail kept */
                raw_write(p, data, len);
                return keep_bounded(p);
        }
        /* the raw line in progress is cut at LOG_PIPE_LINE_MAX; what is kept
         * goes out in one write per call, not one per line */
        const char *out = data;
        while (len > 0) {
                const char *nl = memchr(data, '\n', len);
                size_t seg = nl ? (size_t) (nl - data) + 1 : len;
                size_t body = nl ? seg - 1 : seg;
                if (!p->raw_cutting && p->raw_line + body > LOG_PIPE_LINE_MAX) {
                        size_t room = LOG_PIPE_LINE_MAX - p->raw_line;
                        raw_write(p, out, (size_t) (data - out) + room);
                        p->raw_cutting = true;
                        p->raw_dropped = body - room;
                } else if (p->raw_cutting)
                        p->raw_dropped += body;
                if (nl) {
                        if (p->raw_cutting) {
                                write_cut_marker(p, p->raw_dropped);
                                out = nl + 1;
                        }
                        p->raw_cutting = false;
                        p->raw_dropped = 0;
                        p->raw_line = 0;
                } else if (!p->raw_cutting)
                        p->raw_line += seg;
                data += seg;
                len -= seg;
                if (p->raw_cutting) out = data;
        }
        raw_write(p, out, (size_t) (data - out));
        keep_bounded(p);
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
        keep_bounded(p);
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
                        .lines = LINE_BUFFER_INIT(LOG_PIPE_LINE_MAX, LINE_BUFFER_SPLIT)};
        if (exec->normalizer_new && exec->normalize_line) {
                p->norm = exec->normalizer_new();
                if (!p->norm) log_warning("task %s: no memory for the %s normalizer; logging stdout verbatim",
                                          task_id, exec->id);
        }
        return 0;
}

/* Log every complete line held; of a longer one its first
 * LOG_PIPE_LINE_MAX bytes, then a marker once it ends; keep the partial
 * rest. */
static void process_lines(log_pipe *p) {
        const char *line;
        size_t len;
        int k;
        while ((k = line_buffer_pop(&p->lines, &line, &len)) > 0) {
                if (p->line_cutting) {
                        /* the rest of a line already cut */
                        p->line_dropped += len;
                        if (k == LINE_BUFFER_LINE) {
                                write_cut_marker(p, p->line_dropped);
                                p->line_cutting = false;
                                p->line_dropped = 0;
                        }
                        continue;
                }
                emit_line(p, line, len, k == LINE_BUFFER_LINE);
                if (k == LINE_BUFFER_PIECE) p->line_cutting = true;
        }
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
        if (line_buffer_pop_rest(&p->lines, &line, &len) > 0) {
                if (p->line_cutting) p->line_dropped += len;
                else emit_line(p, line, len, false);
        }
        if (p->line_cutting) write_cut_marker(p, p->line_dropped);
        if (p->raw_cutting) write_cut_marker(p, p->raw_dropped);
        p->line_cutting = p->raw_cutting = false;
        p->line_dropped = p->raw_dropped = 0;
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
