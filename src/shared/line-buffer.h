#pragma once
/* One line buffer for every line-framed reader: the shim's stdout normalizer
 * (log-pipe.c), the log readers (logparse.c), the CLI's protocol client
 * (cli-client.c), and the daemon's connection reader and shim status pipe.
 *
 * Bytes go in (line_buffer_append, or line_buffer_read straight from an fd);
 * complete lines come out (line_buffer_pop), each without its '\n' and
 * otherwise byte for byte: a '\r' before the '\n' stays, NUL bytes inside a
 * line stay (lengths are explicit; never treat a line as a C string without
 * checking memchr(line, 0, len)). At EOF the partial last line, if any, is
 * handed out by line_buffer_pop_rest.
 *
 * Every buffer has a limit, max (bytes), and says what exceeding it means
 * (LineBufferFlags). Nothing is ever truncated silently: the reader either
 * gets an error it must act on, or a piece that says it is one.
 *   default                      a line may hold any number of bytes, but an
 *                                unterminated remainder (no '\n' yet) over
 *                                max bytes makes line_buffer_pop return
 *                                -ENOBUFS (the bytes stay). The caller fails
 *                                (the CLI: an unterminated remainder over
 *                                1 MiB is a protocol failure) or drops the
 *                                line with line_buffer_skip_line
 *                                (logparse). A complete
 *                                line already in the buffer is handed out
 *                                whatever its length.
 *   LINE_BUFFER_SPLIT            an unterminated remainder over max bytes is
 *                                handed out in pieces of exactly max bytes
 *                                (LINE_BUFFER_PIECE) — the shim logs such a
 *                                stdout "line" in pieces (log-pipe.h).
 *   LINE_BUFFER_LIMIT_BUFFERED   the limit is on everything held (complete
 *                                lines not yet popped included), checked when
 *                                bytes are appended: line_buffer_append and
 *                                line_buffer_read return -ENOBUFS when the
 *                                buffer would hold more than max bytes — the
 *                                daemon's connection reader (a connection
 *                                whose bytes not yet split into lines pass
 *                                1 MiB after a read gets REQUEST_TOO_LARGE)
 *                                and the shim status pipe (64 KiB). On
 *                                -ENOBUFS from
 *                                line_buffer_append nothing was appended.
 *
 * Costs: each byte is scanned for '\n' once, so a long line arriving in many
 * reads costs O(length); popped bytes are reclaimed by one memmove per
 * append, not per line. Memory: max plus one read, at most (the buffer
 * grows to the longest line it had to hold and keeps that capacity until
 * line_buffer_done). */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef enum LineBufferFlags {
        LINE_BUFFER_SPLIT = 1 << 0,
        LINE_BUFFER_LIMIT_BUFFERED = 1 << 1,
} LineBufferFlags;

/* line_buffer_pop results (> 0). */
enum {
        LINE_BUFFER_LINE = 1,  /* a complete line, its '\n' removed */
        LINE_BUFFER_PIECE = 2, /* LINE_BUFFER_SPLIT: the first max bytes of a longer, unterminated line */
};

typedef struct LineBuffer {
        char *data;
        size_t start;   /* first byte not yet handed out */
        size_t end;     /* one past the last byte held */
        size_t cap;
        size_t scanned; /* data[start..scanned) holds no '\n' */
        size_t max;
        LineBufferFlags flags;
        bool skipping;  /* dropping bytes up to and including the next '\n' */
} LineBuffer;

#define LINE_BUFFER_INIT(max_bytes, f) { .max = (max_bytes), .flags = (f) }

void line_buffer_init(LineBuffer *b, size_t max, LineBufferFlags flags);
/* Free the memory; the buffer may be initialized again. */
void line_buffer_done(LineBuffer *b);

/* Append len bytes. 0, -ENOMEM, or -ENOBUFS (LINE_BUFFER_LIMIT_BUFFERED
 * only: more than max bytes would be held; nothing appended). */
int line_buffer_append(LineBuffer *b, const void *data, size_t len);
/* One read(2) of at most `chunk` bytes (0 → 64 KiB) from fd into the buffer.
 * Returns the number of bytes read, 0 at EOF, or -errno from read(2)
 * (-EAGAIN, -EINTR included: the caller decides), -ENOMEM, or -ENOBUFS
 * (LINE_BUFFER_LIMIT_BUFFERED: the buffer now holds more than max bytes; the
 * bytes read stay in it). */
ssize_t line_buffer_read(LineBuffer *b, int fd, size_t chunk);

/* Hand out the next line: LINE_BUFFER_LINE (*ret_line NUL-terminated at
 * ret_len), LINE_BUFFER_PIECE (not NUL-terminated), 0 when no complete line
 * is held, or -ENOBUFS (see the flags above). *ret_line points into the
 * buffer and stays valid until the next call on b. */
int line_buffer_pop(LineBuffer *b, const char **ret_line, size_t *ret_len);
/* At EOF: hand out the partial last line (NUL-terminated), if any, and
 * empty the buffer. Returns 1 with a line (its length may exceed max: pop
 * first to apply the limit), or 0 when nothing is left. */
int line_buffer_pop_rest(LineBuffer *b, const char **ret_line, size_t *ret_len);
/* Drop the line being received (after -ENOBUFS from line_buffer_pop): the
 * bytes held and every byte appended from now on up to and including the
 * next '\n'. */
void line_buffer_skip_line(LineBuffer *b);

/* Bytes held, not yet handed out (skipped bytes excluded). */
size_t line_buffer_pending(const LineBuffer *b);
/* True while line_buffer_skip_line's line has not ended yet. */
bool line_buffer_skipping(const LineBuffer *b);
