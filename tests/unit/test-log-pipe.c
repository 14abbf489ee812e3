/* The shim's stdout → normalizer → log pipeline (src/shim/log-pipe.c) over a
 * real pipe: lines split across reads, CRLF and bytes kept, the partial last
 * line at EOF, stderr never gluing onto an event, and a stdout "line" over
 * 64 MiB logged in pieces that lose nothing. Read back with logparse, as
 * task.result does: the shell executor's message is exactly its stdout. */

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "executor.h"
#include "fileio.h"
#include "fs-util.h"
#include "log-pipe.h"
#include "logparse.h"
#include "macro.h"
#include "string-util.h"
#include "unit.h"

static char *tmpdir;

static void setup(void) { tmpdir = tf_tmpdir_new("test-log-pipe"); }

static void teardown(void) { tmpdir = tf_tmpdir_free(tmpdir); }

/* Feed `chunks` (n of them) into a log_pipe of the shell executor, each as
 * its own fd read to its end — so a chunk boundary is always a read
 * boundary, as when a worker pauses between writes; stderr_text (if any) is
 * appended raw after the first chunk. Returns the log's path. */
static char *pipe_through(const char *const *chunks, const size_t *lens, size_t n, const char *stderr_text) {
        static unsigned counter;
        char *path = strdup_printf("%s/log-%u.ndjson", tmpdir, counter++);
        int log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        ck_assert_int_ge(log_fd, 0);
        log_pipe lp;
        ck_assert_int_eq(log_pipe_init(&lp, executor_find("shell"), log_fd, "test"), 0);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *cp = strdup_printf("%s/chunk-%u-%zu", tmpdir, counter, i);
                int fd = open(cp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq(loop_write(fd, chunks[i], lens[i]), 0);
                ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
                int r;
                while ((r = log_pipe_read(&lp, fd)) > 0)
                        ;
                ck_assert_int_eq(r, 0);
                close(fd);
                unlink(cp);
                if (i == 0 && stderr_text) log_pipe_raw(&lp, stderr_text, strlen(stderr_text));
        }
        log_pipe_finish(&lp);
        log_pipe_done(&lp);
        close(log_fd);
        return path;
}

static char *message_of(const char *path) {
        log_summary s = {0};
        ck_assert_int_eq(log_summarize_file(path, NULL, &s), 0);
        char *m = TAKE_PTR(s.message);
        log_summary_done(&s);
        return m;
}

START_TEST(test_split_reads_and_eof_partial) {
        const char *chunks[] = { "fir", "st line\r\nsec", "ond\n\nthird \xc3", "\xa9 partial" };
        size_t lens[ELEMENTSOF(chunks)];
        for (size_t i = 0; i < ELEMENTSOF(chunks); i++) lens[i] = strlen(chunks[i]);
        _cleanup_free_ char *path = pipe_through(chunks, lens, ELEMENTSOF(chunks), NULL);
        _cleanup_free_ char *m = message_of(path);
        /* every byte, the CR included; the last line without the '\n' it never had */
        ck_assert_str_eq(m, "first line\r\nsecond\n\nthird \xc3\xa9 partial");
        /* one canonical event per line: 4 stdout lines → 4 log lines */
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        ck_assert_int_eq(read_file(path, 1 << 20, &data, &len), 0);
        size_t lines = 0;
        for (size_t i = 0; i < len; i++) lines += data[i] == '\n';
        ck_assert_uint_eq(lines, 4);
}
END_TEST

/* stderr without a newline, then stdout: the event still starts its own line. */
START_TEST(test_stderr_never_glues) {
        const char *chunks[] = { "out one\n", "out two\n" };
        size_t lens[] = { 8, 8 };
        _cleanup_free_ char *path = pipe_through(chunks, lens, ELEMENTSOF(chunks), "stderr without newline");
        _cleanup_free_ char *m = message_of(path);
        ck_assert_str_eq(m, "out one\nout two\n");
        _cleanup_free_ char *data = NULL;
        ck_assert_int_eq(read_file(path, 1 << 20, &data, NULL), 0);
        ck_assert_ptr_nonnull(strstr(data, "stderr without newline\n{"));
}
END_TEST

/* A stdout line of 64 MiB + 100 bytes, its newline in a later write: one
 * 64 MiB piece, then the rest with its newline; the message is the line,
 * byte for byte. (A long line whose newline comes in the same read is
 * logged whole, as before.) */
START_TEST(test_overlong_line_in_pieces) {
        size_t big = ((size_t) 64 << 20) + 100;
        _cleanup_free_ char *line = malloc(big + 1);
        ck_assert_ptr_nonnull(line);
        for (size_t i = 0; i < big; i++) line[i] = (char) ('a' + i % 26);
        line[big] = '\n';
        const char *chunks[] = { line, "\nafter\n" };
        size_t lens[] = { big, 7 };
        _cleanup_free_ char *path = pipe_through(chunks, lens, ELEMENTSOF(chunks), NULL);
        _cleanup_free_ char *m = message_of(path);
        ck_assert_uint_eq(strlen(m), big + 1 + 6);
        ck_assert(memcmp(m, line, big + 1) == 0);
        ck_assert_str_eq(m + big + 1, "after\n");
        /* logged as 3 events: the 64 MiB piece, the rest of the line, "after" */
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        ck_assert_int_eq(read_file(path, (size_t) 256 << 20, &data, &len), 0);
        size_t lines = 0;
        for (size_t i = 0; i < len; i++) lines += data[i] == '\n';
        ck_assert_uint_eq(lines, 3);
}
END_TEST

/* The check executor: stdout byte for byte (no line split, no JSON), with
 * stderr interleaved as it comes; with max_bytes, the log keeps only its
 * tail, the newest bytes always there. */
START_TEST(test_raw_and_trimmed) {
        _cleanup_free_ char *path = strdup_printf("%s/check.log", tmpdir);
        int log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        ck_assert_int_ge(log_fd, 0);
        const executor *ex = executor_find_any("check");
        ck_assert_ptr_nonnull(ex);
        ck_assert_ptr_null(executor_find("check")); /* no dispatch can choose it */
        log_pipe lp;
        ck_assert_int_eq(log_pipe_init(&lp, ex, log_fd, "test"), 0);
        lp.max_bytes = 4096;
        _cleanup_free_ char *cp = strdup_printf("%s/chunk", tmpdir);
        int fd = open(cp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        static const char out[] = "no newline \x1b[2J {\"type\":\"x\"}";
        ck_assert_int_eq(loop_write(fd, out, strlen(out)), 0);
        ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
        int r;
        while ((r = log_pipe_read(&lp, fd)) > 0)
                ;
        ck_assert_int_eq(r, 0);
        log_pipe_raw(&lp, "|err|", 5);
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        ck_assert_int_eq(read_file(path, 1 << 20, &data, &len), 0);
        ck_assert_uint_eq(len, strlen(out) + 5);
        ck_assert(memcmp(data, out, strlen(out)) == 0 && memcmp(data + strlen(out), "|err|", 5) == 0);
        /* 1 MiB more: the file stays within twice the bound, ending with the last bytes written */
        char chunk[1000];
        for (int i = 0; i < 1100; i++) {
                memset(chunk, 'a' + i % 26, sizeof chunk);
                log_pipe_raw(&lp, chunk, sizeof chunk);
                struct stat st;
                ck_assert_int_eq(fstat(log_fd, &st), 0);
                ck_assert_int_le(st.st_size, 2 * 4096 + (off_t) sizeof chunk);
        }
        log_pipe_raw(&lp, "THE-END", 7);
        free(data);
        data = NULL;
        ck_assert_int_eq(read_file(path, 1 << 20, &data, &len), 0);
        ck_assert_uint_ge(len, 4096);
        ck_assert(memcmp(data + len - 7, "THE-END", 7) == 0);
        ck_assert_int_eq(data[len - 8], 'a' + 1099 % 26);
        log_pipe_finish(&lp);
        log_pipe_done(&lp);
        close(log_fd);
        close(fd);
}
END_TEST

TF_MAIN("log-pipe", "core", setup, teardown, 240, test_split_reads_and_eof_partial, test_stderr_never_glues,
        test_overlong_line_in_pieces, test_raw_and_trimmed)
