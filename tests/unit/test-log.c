/* The log functions of log.h: plain lines on a terminal, pipe or
 * file; "<N>"-prefixed lines, one per line of the message, when stderr is
 * the journal's stream ($JOURNAL_STREAM, systemd.exec(5)). stderr is
 * redirected to a file here. */

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "unit.h"

static char *dir, *path;
static int saved_stderr = -1;

static void setup(void) {
        dir = tf_tmpdir_new("test-log");
        path = tf_path(dir, "stderr");
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        fflush(stderr);
        saved_stderr = dup(STDERR_FILENO);
        ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
        close(fd);
        unsetenv("JOURNAL_STREAM");
        log_reset_stream();
        log_set_program("taskferryd");
}

static void teardown(void) {
        fflush(stderr);
        dup2(saved_stderr, STDERR_FILENO);
        close(saved_stderr);
        free(path);
        dir = tf_tmpdir_free(dir);
        unsetenv("JOURNAL_STREAM");
        log_reset_stream();
}

static char *written(void) {
        fflush(stderr);
        char *data = NULL;
        ck_assert_int_eq(read_file(path, 1 << 20, &data, NULL), 0);
        return data;
}

/* JOURNAL_STREAM naming stderr's file (offset: added to the inode, to name another) */
static void set_stream(long offset) {
        struct stat st;
        ck_assert_int_eq(fstat(STDERR_FILENO, &st), 0);
        _cleanup_free_ char *v = strdup_printf("%llu:%llu", (unsigned long long) st.st_dev,
                                               (unsigned long long) st.st_ino + (unsigned long long) offset);
        setenv("JOURNAL_STREAM", v, 1);
        log_reset_stream();
}

static void log_all(void) {
        log_error("bad %d", 1);
        log_warning("two\nlines");
        log_info("fine");
        log_error_errno(-ENOENT, "cannot open %s", "x");
        log_text("error", "error: it failed\nhelp: do this");
        log_msg("notice", "n");
        log_msg("debug", "d");
}

START_TEST(plain_without_journal_stream) {
        log_all();
        _cleanup_free_ char *s = written();
        ck_assert_str_eq(s, "taskferryd: error: bad 1\n"
                            "taskferryd: warning: two\n  lines\n"
                            "taskferryd: info: fine\n"
                            "taskferryd: error: cannot open x: No such file or directory\n"
                            "error: it failed\nhelp: do this\n"
                            "taskferryd: notice: n\n"
                            "taskferryd: debug: d\n");
}
END_TEST

START_TEST(prefixed_on_the_journal_stream) {
        set_stream(0);
        log_all();
        _cleanup_free_ char *s = written();
        ck_assert_str_eq(s, "<3>taskferryd: error: bad 1\n"
                            "<4>taskferryd: warning: two\n<4>  lines\n"
                            "<6>taskferryd: info: fine\n"
                            "<3>taskferryd: error: cannot open x: No such file or directory\n"
                            "<3>error: it failed\n<3>help: do this\n"
                            "<5>taskferryd: notice: n\n"
                            "<7>taskferryd: debug: d\n");
}
END_TEST

/* an inherited JOURNAL_STREAM of another stream (a child whose stderr was
 * redirected) or a malformed one changes nothing */
START_TEST(other_or_malformed_stream_is_plain) {
        set_stream(1);
        log_warning("w");
        const char *bad[] = {"", "garbage", "12", "1:2:3", "1:2x", ":"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                setenv("JOURNAL_STREAM", bad[i], 1);
                log_reset_stream();
                log_info("i%zu", i);
        }
        _cleanup_free_ char *s = written();
        ck_assert_str_eq(s, "taskferryd: warning: w\ntaskferryd: info: i0\ntaskferryd: info: i1\ntaskferryd: info: i2\n"
                            "taskferryd: info: i3\ntaskferryd: info: i4\ntaskferryd: info: i5\n");
}
END_TEST

START_TEST(fd_matching_and_priorities) {
        struct stat st;
        ck_assert_int_eq(fstat(STDERR_FILENO, &st), 0);
        _cleanup_free_ char *v = strdup_printf("%llu:%llu", (unsigned long long) st.st_dev, (unsigned long long) st.st_ino);
        ck_assert(log_fd_is_journal_stream(STDERR_FILENO, v));
        ck_assert(!log_fd_is_journal_stream(STDERR_FILENO, NULL));
        ck_assert(!log_fd_is_journal_stream(-1, v));
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        ck_assert(!log_fd_is_journal_stream(null, v));
        close(null);
        ck_assert_int_eq(log_level_priority("error"), 3);
        ck_assert_int_eq(log_level_priority("warning"), 4);
        ck_assert_int_eq(log_level_priority("notice"), 5);
        ck_assert_int_eq(log_level_priority("info"), 6);
        ck_assert_int_eq(log_level_priority("debug"), 7);
        ck_assert_int_eq(log_level_priority("whatever"), 6);
        ck_assert_int_eq(log_level_priority(NULL), 6);
}
END_TEST

TF_MAIN("log", "log", setup, teardown, 0, plain_without_journal_stream, prefixed_on_the_journal_stream,
        other_or_malformed_stream_is_plain, fd_matching_and_priorities)
