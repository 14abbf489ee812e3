#pragma once
/* The worker's stdout → executor normalizer → log pipeline of the shim
 * (executor.h): stdout is split into lines of any length, every line (with
 * its newline flag) goes through the executor's normalize_line, and each
 * resulting log line is appended to the log with a
 * single writev(2) of "<line>\n" (of a line over LOG_PIPE_LINE_MAX only its
 * first LOG_PIPE_LINE_MAX bytes are passed, with newline=false, then a
 * marker line; a partial last line at EOF is passed with newline=false). The worker's stderr is appended raw,
 * byte for byte (log_pipe_raw), but a canonical line always starts on a line
 * of its own: if stderr left the log mid-line, a '\n' is written first, so a
 * stderr write without a newline can never glue itself onto an event and
 * make it unparseable. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "executor.h"
#include "line-buffer.h"

/* A line (stdout before normalizing, or the raw stream of stderr) longer
 * than this without a newline keeps its first LOG_PIPE_LINE_MAX bytes; the
 * rest up to its newline is dropped, and a marker line says how much. The
 * shim's buffer, outside the sandbox, never holds more. */
#define LOG_PIPE_LINE_MAX ((size_t) 8 << 20)
/* The fixed width of the marker line between a log's head and its tail. */
#define LOG_PIPE_MARKER_BYTES 160

typedef struct log_pipe {
        const executor *exec;
        normalizer *norm;    /* NULL if the normalizer could not be allocated: lines go verbatim */
        int log_fd;          /* borrowed, O_APPEND */
        const char *task_id; /* borrowed, for warnings only */
        LineBuffer lines;    /* stdout not yet logged: max LOG_PIPE_LINE_MAX, LINE_BUFFER_SPLIT */
        bool at_line_start;  /* the log's last byte is '\n' (or the log is empty) */
        uint64_t max_bytes;  /* 0, or the log is kept to its last max_bytes..2*max_bytes bytes: once it
                              * holds more than twice that, its last max_bytes move to its start (a
                              * check's output, of which only the tail is read) */
        uint64_t budget;     /* 0, or the log is kept to budget bytes (a worker's log, launch spec
                              * logBudget): once it holds more, its first quarter (to a line's end), a
                              * marker line of LOG_PIPE_MARKER_BYTES, and its newest quarter (from a line's
                              * start) stay; the marker, rewritten in place, counts the bytes cut. Lines are
                              * cut at LOG_PIPE_LINE_MAX only with a budget (a check's output stays
                              * byte for byte) */
        uint64_t head_end;   /* with budget: where the head ends once the log was first cut, else 0 */
        uint64_t cut_bytes;  /* with budget: bytes cut out of the middle so far */
        bool line_cutting, raw_cutting; /* a stdout line / the stderr line in progress was cut */
        uint64_t line_dropped, raw_dropped; /* ... and so many of its bytes dropped */
        size_t raw_line;     /* bytes of the raw line in progress */
} log_pipe;

/* Set up for one worker. Does not take log_fd. Returns 0 (a failed
 * normalizer allocation degrades to verbatim lines with a warning). */
int log_pipe_init(log_pipe *p, const executor *exec, int log_fd, const char *task_id);
/* Read once from fd (non-blocking or ready) and log every complete line.
 * Returns 1 if more may come, 0 at EOF, -errno on a read error or -ENOMEM. */
int log_pipe_read(log_pipe *p, int fd);
/* Append bytes the worker wrote to stderr, unmodified. */
void log_pipe_raw(log_pipe *p, const char *data, size_t len);
/* End of stdout (EOF, or the drain deadline passed): log a trailing partial
 * line with newline=false, then the normalizer's normalize_finish output. */
void log_pipe_finish(log_pipe *p);
/* Free the buffer and the normalizer. */
void log_pipe_done(log_pipe *p);
