/* line-buffer.[ch]: lines split across reads, bytes preserved (CRLF, NUL),
 * each overflow mode (error, skip, split into pieces, limit on what is held),
 * the partial last line at EOF, and reading straight from a pipe. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "line-buffer.h"
#include "unit.h"

/* Pop one line and check its kind and bytes. */
static void expect(LineBuffer *b, int kind, const char *bytes, size_t len) {
        const char *l = NULL;
        size_t n = 0;
        int r = line_buffer_pop(b, &l, &n);
        ck_assert_msg(r == kind, "pop: %d, want %d [%.*s]", r, kind, (int) len, bytes);
        ck_assert_msg(n == len && memcmp(l, bytes, len) == 0, "popped [%.*s], want [%.*s]", (int) n, l, (int) len, bytes);
        if (kind == LINE_BUFFER_LINE) ck_assert_int_eq(l[len], 0);
}

/* Append s (strlen bytes), which must fit. */
static void append(LineBuffer *b, const char *s) {
        int r = line_buffer_append(b, s, strlen(s));
        ck_assert_msg(r == 0, "append [%s]: %d", s, r);
}

/* Pop one complete line: s. */
static void expect_line(LineBuffer *b, const char *s) { expect(b, LINE_BUFFER_LINE, s, strlen(s)); }

static void expect_none(LineBuffer *b) {
        const char *l;
        size_t n;
        ck_assert_int_eq(line_buffer_pop(b, &l, &n), 0);
}

/* The next pop refuses an over-long line (-ENOBUFS). */
static void expect_overlong(LineBuffer *b) {
        const char *l;
        size_t n;
        ck_assert_int_eq(line_buffer_pop(b, &l, &n), -ENOBUFS);
}

/* At EOF the partial last line is bytes (len of them; NULL: there is
 * none), NUL-terminated. */
static void expect_rest(LineBuffer *b, const char *bytes, size_t len) {
        const char *l;
        size_t n;
        int r = line_buffer_pop_rest(b, &l, &n);
        ck_assert_msg(r == (bytes ? 1 : 0), "pop_rest: %d, want [%.*s]", r, (int) len, bytes ? bytes : "");
        if (!bytes) return;
        ck_assert_msg(n == len && memcmp(l, bytes, len) == 0, "rest [%.*s], want [%.*s]", (int) n, l, (int) len, bytes);
        ck_assert_int_eq(l[n], 0);
}

START_TEST(test_split_across_appends) {
        LineBuffer b = LINE_BUFFER_INIT(1024, 0);
        append(&b, "hel");
        expect_none(&b);
        append(&b, "lo\nwor");
        expect_line(&b, "hello");
        expect_none(&b);
        append(&b, "ld\n\n");
        append(&b, "x\ny\nz");
        expect_line(&b, "world");
        expect_line(&b, "");
        expect_line(&b, "x");
        expect_line(&b, "y");
        expect_none(&b);
        ck_assert_uint_eq(line_buffer_pending(&b), 1);
        line_buffer_done(&b);
}
END_TEST

/* One byte at a time over many lines: the reclaiming memmove keeps lines intact. */
START_TEST(test_byte_by_byte) {
        LineBuffer b = LINE_BUFFER_INIT(64, 0);
        char want[64];
        for (int i = 0; i < 2000; i++) {
                int n = snprintf(want, sizeof want, "line %d of many", i);
                for (int k = 0; k < n; k++) {
                        ck_assert_int_eq(line_buffer_append(&b, want + k, 1), 0);
                        expect_none(&b);
                }
                append(&b, "\n");
                expect(&b, LINE_BUFFER_LINE, want, (size_t) n);
        }
        ck_assert_uint_le(b.cap, 4096);
        line_buffer_done(&b);
}
END_TEST

START_TEST(test_bytes_preserved) {
        LineBuffer b = LINE_BUFFER_INIT(1024, 0);
        static const char in[] = "crlf\r\nnul\0in\0line\n\r\n\xff\xfe bytes\n";
        ck_assert_int_eq(line_buffer_append(&b, in, sizeof in - 1), 0);
        expect_line(&b, "crlf\r");
        expect(&b, LINE_BUFFER_LINE, "nul\0in\0line", 11);
        expect_line(&b, "\r");
        expect(&b, LINE_BUFFER_LINE, "\xff\xfe bytes", 8);
        expect_none(&b);
        line_buffer_done(&b);
}
END_TEST

START_TEST(test_eof_partial) {
        LineBuffer b = LINE_BUFFER_INIT(1024, 0);
        expect_rest(&b, NULL, 0); /* nothing ever appended */
        ck_assert_int_eq(line_buffer_append(&b, "a\npartial\0tail", 14), 0);
        expect_line(&b, "a");
        expect_none(&b);
        expect_rest(&b, "partial\0tail", 12);
        expect_rest(&b, NULL, 0);
        /* a log ending in '\n' has no partial line */
        append(&b, "b\n");
        expect_line(&b, "b");
        expect_rest(&b, NULL, 0);
        line_buffer_done(&b);
}
END_TEST

/* Default: an unterminated remainder over max is an error, the bytes stay;
 * a line of exactly max bytes is fine; a complete longer line already held is
 * handed out. */
START_TEST(test_overlong_error) {
        LineBuffer b = LINE_BUFFER_INIT(8, 0);
        append(&b, "12345678");
        expect_none(&b);
        append(&b, "\n");
        expect_line(&b, "12345678");
        append(&b, "123456789");
        expect_overlong(&b);
        expect_overlong(&b);
        ck_assert_uint_eq(line_buffer_pending(&b), 9);
        line_buffer_done(&b);

        line_buffer_init(&b, 8, 0);
        append(&b, "0123456789abcdef\nok\n");
        expect_line(&b, "0123456789abcdef");
        expect_line(&b, "ok");
        line_buffer_done(&b);
}
END_TEST

/* Skipping an over-long line drops it through its '\n', across appends. */
START_TEST(test_overlong_skip) {
        LineBuffer b = LINE_BUFFER_INIT(4, 0);
        append(&b, "toolong");
        expect_overlong(&b);
        line_buffer_skip_line(&b);
        ck_assert(line_buffer_skipping(&b));
        ck_assert_uint_eq(line_buffer_pending(&b), 0);
        append(&b, "still more");
        expect_none(&b);
        append(&b, "end\nnext\nla");
        ck_assert(!line_buffer_skipping(&b));
        expect_line(&b, "next");
        append(&b, "stXX");
        expect_overlong(&b);
        line_buffer_skip_line(&b);
        /* EOF while skipping: the dropped line is not handed out */
        expect_rest(&b, NULL, 0);
        line_buffer_done(&b);

        /* the line ends inside what is already held */
        line_buffer_init(&b, 4, 0);
        append(&b, "abcdef");
        expect_overlong(&b);
        append(&b, "g\nhi\n");
        line_buffer_skip_line(&b);
        ck_assert(!line_buffer_skipping(&b));
        expect_line(&b, "hi");
        line_buffer_done(&b);
}
END_TEST

/* LINE_BUFFER_SPLIT: pieces of exactly max bytes, then the line's end. */
START_TEST(test_overlong_split) {
        LineBuffer b = LINE_BUFFER_INIT(4, LINE_BUFFER_SPLIT);
        append(&b, "abcd");
        expect_none(&b); /* exactly max: may still end here */
        append(&b, "efghij");
        expect(&b, LINE_BUFFER_PIECE, "abcd", 4);
        expect(&b, LINE_BUFFER_PIECE, "efgh", 4);
        expect_none(&b);
        append(&b, "\nxyz");
        expect_line(&b, "ij");
        expect_none(&b);
        expect_rest(&b, "xyz", 3);
        line_buffer_done(&b);
}
END_TEST

/* LINE_BUFFER_LIMIT_BUFFERED: the limit is on everything held, at append. */
START_TEST(test_limit_buffered) {
        LineBuffer b = LINE_BUFFER_INIT(10, LINE_BUFFER_LIMIT_BUFFERED);
        append(&b, "a\nb\nc\nd\n");
        ck_assert_int_eq(line_buffer_append(&b, "e\nf", 3), -ENOBUFS); /* 11 > 10, nothing appended */
        ck_assert_uint_eq(line_buffer_pending(&b), 8);
        append(&b, "e\n"); /* exactly 10 */
        expect_line(&b, "a");
        append(&b, "f\n"); /* popped bytes no longer count */
        expect_line(&b, "b");
        expect_line(&b, "c");
        expect_line(&b, "d");
        expect_line(&b, "e");
        expect_line(&b, "f");
        expect_none(&b);
        line_buffer_done(&b);
}
END_TEST

START_TEST(test_read_fd) {
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
        LineBuffer b = LINE_BUFFER_INIT(1 << 20, 0);
        ck_assert_int_eq(line_buffer_read(&b, p[0], 0), -EAGAIN);
        ck_assert_int_eq(write(p[1], "one\r\ntw", 7), 7);
        ck_assert_int_eq(line_buffer_read(&b, p[0], 3), 3); /* chunk bounds the read */
        expect_none(&b);
        ck_assert_int_eq(line_buffer_read(&b, p[0], 0), 4);
        expect_line(&b, "one\r");
        expect_none(&b);
        ck_assert_int_eq(write(p[1], "o\n", 2), 2);
        close(p[1]);
        ck_assert_int_eq(line_buffer_read(&b, p[0], 0), 2);
        expect_line(&b, "two");
        ck_assert_int_eq(line_buffer_read(&b, p[0], 0), 0);
        close(p[0]);
        line_buffer_done(&b);

        /* LIMIT_BUFFERED through read: the bytes stay, the caller is told */
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        line_buffer_init(&b, 4, LINE_BUFFER_LIMIT_BUFFERED);
        ck_assert_int_eq(write(p[1], "abcdef", 6), 6);
        ck_assert_int_eq(line_buffer_read(&b, p[0], 0), -ENOBUFS);
        ck_assert_uint_eq(line_buffer_pending(&b), 6);
        close(p[0]);
        close(p[1]);
        line_buffer_done(&b);
}
END_TEST

/* A long line arriving in many small appends is scanned once: this would
 * take minutes if every append rescanned the whole remainder. */
START_TEST(test_long_line_linear) {
        LineBuffer b = LINE_BUFFER_INIT((size_t) 64 << 20, 0);
        char chunk[512];
        memset(chunk, 'x', sizeof chunk);
        size_t total = 0;
        for (int i = 0; i < 65536; i++) {
                ck_assert_int_eq(line_buffer_append(&b, chunk, sizeof chunk), 0);
                total += sizeof chunk;
                expect_none(&b);
        }
        append(&b, "\n");
        const char *l;
        size_t n;
        ck_assert_int_eq(line_buffer_pop(&b, &l, &n), LINE_BUFFER_LINE);
        ck_assert_uint_eq(n, total);
        line_buffer_done(&b);
}
END_TEST

TF_MAIN("line-buffer", "core", NULL, NULL, 60, test_split_across_appends, test_byte_by_byte, test_bytes_preserved,
        test_eof_partial, test_overlong_error, test_overlong_skip, test_overlong_split, test_limit_buffered,
        test_read_fd, test_long_line_linear)
