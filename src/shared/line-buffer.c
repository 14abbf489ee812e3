/* A byte buffer split into lines; see line-buffer.h for the contract. */

#include "line-buffer.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_CHUNK ((size_t) 64 * 1024)

void line_buffer_init(LineBuffer *b, size_t max, LineBufferFlags flags) {
        assert(b);
        *b = (LineBuffer) { .max = max, .flags = flags };
}

void line_buffer_done(LineBuffer *b) {
        if (!b) return;
        free(b->data);
        *b = (LineBuffer) { .max = b->max, .flags = b->flags };
}

size_t line_buffer_pending(const LineBuffer *b) { return b->end - b->start; }

bool line_buffer_skipping(const LineBuffer *b) { return b->skipping; }

/* Make room for `want` more bytes after end (plus the NUL that pop writes). */
static int reserve(LineBuffer *b, size_t want) {
        if (b->start > 0 && b->cap - b->end < want + 1) {
                /* reclaim what was handed out: one move per append */
                size_t n = b->end - b->start;
                memmove(b->data, b->data + b->start, n);
                b->scanned -= b->start;
                b->end = n;
                b->start = 0;
        }
        if (b->cap - b->end >= want + 1) return 0;
        size_t need = b->end + want + 1;
        if (need < want) return -ENOMEM;
        size_t ncap = b->cap ? b->cap : 4096;
        while (ncap < need) {
                if (ncap > SIZE_MAX / 2) return -ENOMEM;
                ncap *= 2;
        }
        char *nd = realloc(b->data, ncap);
        if (!nd) return -ENOMEM;
        b->data = nd;
        b->cap = ncap;
        return 0;
}

/* While skipping: drop data[start..end) up to and including a '\n'. */
static void skip_held(LineBuffer *b) {
        if (!b->skipping) return;
        char *nl = memchr(b->data + b->start, '\n', b->end - b->start);
        if (!nl) {
                b->start = b->scanned = b->end = 0;
                return;
        }
        b->start = b->scanned = (size_t) (nl - b->data) + 1;
        b->skipping = false;
}

int line_buffer_append(LineBuffer *b, const void *data, size_t len) {
        assert(b);
        if (len == 0) return 0;
        if (b->skipping) {
                const char *nl = memchr(data, '\n', len);
                if (!nl) return 0;
                b->skipping = false;
                size_t used = (size_t) (nl - (const char *) data) + 1;
                data = nl + 1;
                len -= used;
                if (len == 0) return 0;
        }
        if ((b->flags & LINE_BUFFER_LIMIT_BUFFERED) && line_buffer_pending(b) + len > b->max) return -ENOBUFS;
        int r = reserve(b, len);
        if (r < 0) return r;
        memcpy(b->data + b->end, data, len);
        b->end += len;
        return 0;
}

ssize_t line_buffer_read(LineBuffer *b, int fd, size_t chunk) {
        assert(b);
        if (chunk == 0) chunk = DEFAULT_CHUNK;
        int r = reserve(b, chunk);
        if (r < 0) return r;
        ssize_t n = read(fd, b->data + b->end, chunk);
        if (n < 0) return -errno;
        b->end += (size_t) n;
        skip_held(b);
        if ((b->flags & LINE_BUFFER_LIMIT_BUFFERED) && line_buffer_pending(b) > b->max) return -ENOBUFS;
        return n;
}

int line_buffer_pop(LineBuffer *b, const char **ret_line, size_t *ret_len) {
        assert(b && ret_line && ret_len);
        if (b->skipping) return 0;
        if (b->scanned < b->start) b->scanned = b->start;
        char *nl = b->scanned < b->end ? memchr(b->data + b->scanned, '\n', b->end - b->scanned) : NULL;
        if (nl) {
                size_t len = (size_t) (nl - (b->data + b->start));
                *nl = 0;
                *ret_line = b->data + b->start;
                *ret_len = len;
                b->start = b->scanned = (size_t) (nl - b->data) + 1;
                return LINE_BUFFER_LINE;
        }
        b->scanned = b->end;
        size_t held = b->end - b->start;
        if (held <= b->max) return 0;
        if (!(b->flags & LINE_BUFFER_SPLIT)) return -ENOBUFS;
        *ret_line = b->data + b->start;
        *ret_len = b->max;
        b->start += b->max;
        return LINE_BUFFER_PIECE;
}

int line_buffer_pop_rest(LineBuffer *b, const char **ret_line, size_t *ret_len) {
        assert(b && ret_line && ret_len);
        if (b->skipping || b->end == b->start) {
                b->start = b->end = b->scanned = 0;
                b->skipping = false;
                return 0;
        }
        /* pop's NUL went at most at end, and reserve keeps a byte past end */
        b->data[b->end] = 0;
        *ret_line = b->data + b->start;
        *ret_len = b->end - b->start;
        b->start = b->end = b->scanned = 0;
        return 1;
}

void line_buffer_skip_line(LineBuffer *b) {
        assert(b);
        b->skipping = true;
        skip_held(b);
}
