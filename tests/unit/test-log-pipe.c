/* The shim's stdout → normalizer → log pipeline (src/shim/log-pipe.c) over a
 * real pipe: lines split across reads, CRLF and bytes kept, the partial last
 * line at EOF, stderr never gluing onto an event, a line over
 * LOG_PIPE_LINE_MAX cut with a marker, and a log kept to its budget, head
 * and tail. Read back with logparse, as
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
#include "launch-spec.h"
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

/* how many of the first n bytes of s, from the start, are c */
static size_t span_of(const char *s, char c, size_t n) {
        size_t i = 0;
        while (i < n && s[i] == c) i++;
        return i;
}

static bool endswith_str(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);
        return a >= b && memcmp(s + a - b, suffix, b) == 0;
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

/* A stdout line of LOG_PIPE_LINE_MAX + 100 bytes, its newline in a later
 * write: its first LOG_PIPE_LINE_MAX bytes are logged, the 100 others
 * dropped and a marker line says so; the next line is logged as it is. */
START_TEST(test_overlong_line_is_cut) {
        size_t big = LOG_PIPE_LINE_MAX + 100;
        _cleanup_free_ char *line = malloc(big + 1);
        ck_assert_ptr_nonnull(line);
        for (size_t i = 0; i < big; i++) line[i] = (char) ('a' + i % 26);
        line[big] = '\n';
        const char *chunks[] = { line, "\nafter\n" };
        size_t lens[] = { big, 7 };
        _cleanup_free_ char *path = pipe_through(chunks, lens, ELEMENTSOF(chunks), NULL);
        _cleanup_free_ char *m = message_of(path);
        ck_assert(memcmp(m, line, LOG_PIPE_LINE_MAX) == 0);
        ck_assert(endswith_str(m, "after\n"));
        ck_assert_uint_lt(strlen(m), LOG_PIPE_LINE_MAX + 16);
        /* 3 lines: the piece, the marker, "after" */
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        ck_assert_int_eq(read_file(path, (size_t) 64 << 20, &data, &len), 0);
        size_t lines = 0;
        for (size_t i = 0; i < len; i++) lines += data[i] == '\n';
        ck_assert_uint_eq(lines, 3);
        ck_assert_ptr_nonnull(strstr(data, "cut there: 100 bytes dropped]\n"));
}
END_TEST

/* A log_pipe of the shell executor with a budget, on a fresh log <name>.ndjson (*ret_path); its fd. */
static int budget_pipe(const char *name, uint64_t budget, log_pipe *lp, char **ret_path) {
        *ret_path = strdup_printf("%s/%s.ndjson", tmpdir, name);
        int log_fd = open(*ret_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        ck_assert_int_ge(log_fd, 0);
        ck_assert_int_eq(log_pipe_init(lp, executor_find("shell"), log_fd, "test"), 0);
        lp->budget = budget;
        return log_fd;
}

/* The same for stderr, raw: 3 lines of which the middle one has 2 MiB too
 * many, in writes of 64 KiB; and one left unterminated at the end. */
START_TEST(test_raw_line_is_cut) {
        _cleanup_free_ char *path = NULL;
        log_pipe lp;
        int log_fd = budget_pipe("raw-cut", (uint64_t) 1 << 30, &lp, &path);
        log_pipe_raw(&lp, "first\n", 6);
        char chunk[65536];
        memset(chunk, 'z', sizeof chunk);
        size_t total = LOG_PIPE_LINE_MAX + ((size_t) 2 << 20);
        for (size_t done = 0; done < total; done += sizeof chunk) log_pipe_raw(&lp, chunk, sizeof chunk);
        log_pipe_raw(&lp, "\nlast\nunterminated", 18);
        ck_assert_int_eq(lp.raw_line, 12);
        memset(chunk, 'y', sizeof chunk);
        for (size_t done = 0; done < total; done += sizeof chunk) log_pipe_raw(&lp, chunk, sizeof chunk);
        log_pipe_finish(&lp);
        log_pipe_done(&lp);
        close(log_fd);
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        ck_assert_int_eq(read_file(path, (size_t) 64 << 20, &data, &len), 0);
        ck_assert(startswith(data, "first\n"));
        const char *z = data + 6;
        /* one assertion per span, not per byte: each ck_assert costs a write to Check's pipe */
        ck_assert_uint_eq(span_of(z, 'z', LOG_PIPE_LINE_MAX), LOG_PIPE_LINE_MAX);
        _cleanup_free_ char *want = strdup_printf("\n[taskferry-shim: a line over %zu bytes without a newline was cut "
                                                  "there: %zu bytes dropped]\nlast\nunterminated",
                                                  (size_t) LOG_PIPE_LINE_MAX, total - LOG_PIPE_LINE_MAX);
        ck_assert(strncmp(z + LOG_PIPE_LINE_MAX, want, strlen(want)) == 0);
        const char *y = z + LOG_PIPE_LINE_MAX + strlen(want);
        ck_assert_uint_eq(span_of(y, 'y', LOG_PIPE_LINE_MAX - 12), LOG_PIPE_LINE_MAX - 12);
        /* cut at EOF too: the line held its bound, the rest is counted */
        _cleanup_free_ char *end = strdup_printf("cut there: %zu bytes dropped]\n", total - (LOG_PIPE_LINE_MAX - 12));
        ck_assert(endswith_str(data, end));
}
END_TEST

/* A log over its budget keeps its head and its tail, each of whole lines,
 * with one marker between them counting what was cut; it never holds much
 * more than its budget; the final message is there, intact, and the
 * result reads it. */
START_TEST(test_budget_keeps_head_and_tail) {
        _cleanup_free_ char *path = NULL;
        log_pipe lp;
        uint64_t budget = (uint64_t) 1 << 20;
        int log_fd = budget_pipe("budget", budget, &lp, &path);
        uint64_t written = 0;
        char line[128];
        uint64_t largest = 0;
        for (int i = 0; i < 100000; i++) {
                int n = snprintf(line, sizeof line, "line %d of the flood, with some words to fill it\n", i);
                log_pipe_raw(&lp, line, (size_t) n);
                written += (uint64_t) n;
                struct stat st;
                if (fstat(log_fd, &st) < 0) ck_abort_msg("fstat: %m");
                if ((uint64_t) st.st_size > largest) largest = (uint64_t) st.st_size;
        }
        ck_assert_uint_le(largest, budget + sizeof line);
        static const char fin[] = "{\"type\":\"text\",\"part\":{\"text\":\"THE FINAL MESSAGE\"}}\n";
        log_pipe_raw(&lp, fin, strlen(fin));
        log_pipe_finish(&lp);
        log_pipe_done(&lp);
        close(log_fd);
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        ck_assert_int_eq(read_file(path, (size_t) 8 << 20, &data, &len), 0);
        ck_assert(startswith(data, "line 0 of the flood"));
        ck_assert(endswith_str(data, fin));
        /* every line whole: a flood line, the one marker, or the final event */
        size_t markers = 0;
        unsigned long long cut = 0;
        for (char *l = data, *nl; (nl = memchr(l, '\n', len - (size_t) (l - data))); l = nl + 1) {
                *nl = 0;
                if (startswith(l, "[taskferry-shim: the log is over its budget of 1.0 MiB:")) {
                        markers++;
                        ck_assert_int_eq(strlen(l), LOG_PIPE_MARKER_BYTES - 1);
                        ck_assert_int_eq(sscanf(strchr(l, ':') + 1, " the log is over its budget of 1.0 MiB: %llu", &cut), 1);
                } else if (!startswith(l, "{\"type\"")) {
                        int k = -1;
                        ck_assert_msg(sscanf(l, "line %d of the flood", &k) == 1 && k >= 0, "a broken line: %s", l);
                        ck_assert(endswith_str(l, "to fill it"));
                }
        }
        ck_assert_uint_eq(markers, 1);
        /* what is there and what was cut is all that was written */
        ck_assert_uint_eq(len - LOG_PIPE_MARKER_BYTES + cut, written + strlen(fin));
}
END_TEST

/* At the smallest budget, a final line as long as a line may be, and the
 * lines after it, survive a flood before them: the tail the trim keeps
 * holds them whole. */
START_TEST(test_smallest_budget_keeps_a_longest_final_line) {
        _cleanup_free_ char *path = NULL;
        log_pipe lp;
        int log_fd = budget_pipe("budget-min", LAUNCH_LOG_BUDGET_MIN, &lp, &path);
        _cleanup_free_ char *chunk = malloc((size_t) 1 << 20);
        ck_assert_ptr_nonnull(chunk);
        /* a flood of 1 MiB lines past the budget */
        memset(chunk, 'f', ((size_t) 1 << 20) - 1);
        chunk[((size_t) 1 << 20) - 1] = '\n';
        for (uint64_t done = 0; done < LAUNCH_LOG_BUDGET_MIN + (LAUNCH_LOG_BUDGET_MIN / 2); done += (uint64_t) 1 << 20)
                log_pipe_raw(&lp, chunk, (size_t) 1 << 20);
        /* the final event: one line of the longest length kept whole */
        static const char head[] = "{\"type\":\"text\",\"part\":{\"text\":\"", tail[] = "\"}}\n";
        size_t body = LOG_PIPE_LINE_MAX - (sizeof head - 1) - (sizeof tail - 1);
        log_pipe_raw(&lp, head, sizeof head - 1);
        memset(chunk, 'M', (size_t) 1 << 20);
        for (size_t done = 0; done < body;) {
                size_t n = body - done > ((size_t) 1 << 20) ? (size_t) 1 << 20 : body - done;
                log_pipe_raw(&lp, chunk, n);
                done += n;
        }
        log_pipe_raw(&lp, tail, sizeof tail - 1);
        /* and lines after it: a few hundred KiB */
        for (int i = 0; i < 3000; i++) {
                char line[128];
                int n = snprintf(line, sizeof line, "line %d after the final event, with a few words\n", i);
                log_pipe_raw(&lp, line, (size_t) n);
        }
        log_pipe_finish(&lp);
        log_pipe_done(&lp);
        close(log_fd);
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        ck_assert_int_eq(read_file(path, (size_t) 256 << 20, &data, &len), 0);
        ck_assert_uint_le(len, LAUNCH_LOG_BUDGET_MIN + ((uint64_t) 1 << 20));
        const char *at = strstr(data, head);
        ck_assert_msg(at, "the final event is gone");
        ck_assert_uint_eq(span_of(at + sizeof head - 1, 'M', body), body);
        ck_assert(strncmp(at + sizeof head - 1 + body, tail, sizeof tail - 1) == 0);
        ck_assert(endswith_str(data, "line 2999 after the final event, with a few words\n"));
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
        test_overlong_line_is_cut, test_raw_line_is_cut, test_budget_keeps_head_and_tail,
        test_smallest_budget_keeps_a_longest_final_line, test_raw_and_trimmed)
