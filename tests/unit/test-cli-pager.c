/* cli-pager.h: which pager `taskferry diff` runs (git's rule: $GIT_PAGER,
 * $PAGER, "less -R"; empty or "cat" is none) and the children it writes
 * through: stdin a pipe from us, stdout where we say, the dispositions
 * reset, LESS/LV defaults, exit status as a shell reports it, and a reader
 * that goes away early. Whether diff uses a pager at all (not on a pipe) is
 * test-commands'. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli-pager.h"
#include "unit.h"
#include "fileio.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

static char *dir;

static void setup(void) {
        dir = tf_tmpdir_new("test-cli-pager");
        unsetenv("GIT_PAGER");
        unsetenv("PAGER");
        unsetenv("LESS");
        unsetenv("LV");
}

static void teardown(void) {
        dir = tf_tmpdir_free(dir);
}

/* ---- the choice ---- */

static const struct {
        const char *git_pager, *pager; /* NULL: unset */
        const char *want;              /* NULL: no pager */
} choices[] = {
        {NULL, NULL, "less -R"},
        {NULL, "more", "more"},
        {"most", "more", "most"},
        {"most", NULL, "most"},
        {NULL, "", NULL},
        {NULL, "cat", NULL},
        {"", "more", NULL},    /* an empty GIT_PAGER is "no pager", not "look further" */
        {"cat", "more", NULL},
        {NULL, "cat -v", "cat -v"}, /* only the exact word cat means none */
        {NULL, "less -R; echo hi", "less -R; echo hi"}, /* a shell command, as git runs it */
};

START_TEST(command_choice) {
        if (choices[_i].git_pager) setenv("GIT_PAGER", choices[_i].git_pager, 1);
        if (choices[_i].pager) setenv("PAGER", choices[_i].pager, 1);
        const char *got = cli_pager_command();
        ck_assert_msg(streq_ptr(got, choices[_i].want), "GIT_PAGER=%s PAGER=%s: [%s], want [%s]",
                      strnull(choices[_i].git_pager), strnull(choices[_i].pager), strnull(got), strnull(choices[_i].want));
}
END_TEST

/* ---- the pager ---- */

/* Run `command` as the pager with our stdout on a file, feed it input, and
 * finish it: its exit status; *ret_out what it wrote. The write errors are
 * ignored (a pager may quit early); SIGPIPE is ignored, as diff ignores it. */
static int run_pager(const char *command, const char *input, size_t input_len, char **ret_out) {
        signal(SIGPIPE, SIG_IGN);
        _cleanup_free_ char *path = tf_path(dir, "pager.out");
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        fflush(stdout);
        _cleanup_close_ int saved = dup(STDOUT_FILENO);
        ck_assert_int_ge(saved, 0);
        ck_assert_int_ge(dup2(fd, STDOUT_FILENO), 0);
        cli_pager p = CLI_PAGER_INIT;
        int r = cli_pager_start(command, &p);
        ck_assert_int_ge(dup2(saved, STDOUT_FILENO), 0);
        ck_assert_int_ge(r, 0);
        ck_assert_int_gt(p.pid, 0);
        ck_assert_int_ge(p.fd, 0);
        /* our end is not inherited by what we start next */
        ck_assert(fcntl(p.fd, F_GETFD) & FD_CLOEXEC);
        size_t done = 0;
        while (done < input_len) {
                ssize_t n = write(p.fd, input + done, input_len - done);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) {
                        ck_assert_int_eq(errno, EPIPE);
                        break;
                }
                done += (size_t) n;
        }
        int status = cli_pager_finish(&p);
        ck_assert_int_eq(p.fd, -1);
        ck_assert_int_eq(p.pid, 0);
        /* finished twice: nothing left to wait for */
        ck_assert_int_eq(cli_pager_finish(&p), 0);
        if (ret_out) *ret_out = tf_read_file(path, false);
        return status;
}

START_TEST(pager_reads_our_pipe_and_writes_our_stdout) {
        _cleanup_free_ char *out = NULL;
        /* cat ends only at EOF: a write end left open in the child would hang here */
        ck_assert_int_eq(run_pager("cat", "hello\nworld\n", 12, &out), 0);
        ck_assert_str_eq(out, "hello\nworld\n");
        free(out);
        out = NULL;
        /* a shell command, as git runs it */
        ck_assert_int_eq(run_pager("tr a-z A-Z | sed 's/^/> /'", "ab\ncd\n", 6, &out), 0);
        ck_assert_str_eq(out, "> AB\n> CD\n");
}
END_TEST

START_TEST(less_and_lv_defaults) {
        _cleanup_free_ char *out = NULL;
        ck_assert_int_eq(run_pager("printf '%s|%s' \"$LESS\" \"$LV\"", "", 0, &out), 0);
        ck_assert_str_eq(out, "FRX|-c");
        /* set in the child only */
        ck_assert_ptr_null(getenv("LESS"));
        ck_assert_ptr_null(getenv("LV"));
        free(out);
        out = NULL;
        /* the user's own values are kept */
        setenv("LESS", "-S", 1);
        setenv("LV", "-z", 1);
        ck_assert_int_eq(run_pager("printf '%s|%s' \"$LESS\" \"$LV\"", "", 0, &out), 0);
        ck_assert_str_eq(out, "-S|-z");
}
END_TEST

START_TEST(exit_status_as_a_shell_reports_it) {
        ck_assert_int_eq(run_pager("exit 3", NULL, 0, NULL), 3);
        ck_assert_int_eq(run_pager("kill -TERM $$", NULL, 0, NULL), 128 + SIGTERM);
        /* a pager that is not installed: sh's 127 */
        ck_assert_int_eq(run_pager("taskferry-no-such-pager-xyz 2>/dev/null", "x", 1, NULL), 127);
        /* no pager started: nothing to wait for */
        cli_pager none = CLI_PAGER_INIT;
        ck_assert_int_eq(cli_pager_finish(&none), 0);
}
END_TEST

/* A pager the user quits before the end (q in less): our writes fail with
 * EPIPE (SIGPIPE ignored), its status is its own. */
START_TEST(pager_that_quits_early) {
        size_t n = 1 << 20; /* past any pipe buffer */
        _cleanup_free_ char *big = malloc(n);
        ck_assert_ptr_nonnull(big);
        memset(big, 'x', n);
        _cleanup_free_ char *out = NULL;
        ck_assert_int_eq(run_pager("head -c 5", big, n, &out), 0);
        ck_assert_str_eq(out, "xxxxx");
        /* one that never reads at all */
        ck_assert_int_eq(run_pager("exit 0", big, n, NULL), 0);
}
END_TEST

/* diff ignores SIGPIPE (and main catches SIGINT): the pager gets every
 * disposition back to its default and an empty mask. */
START_TEST(pager_gets_default_dispositions) {
        signal(SIGINT, SIG_IGN);
        sigset_t block;
        sigemptyset(&block);
        sigaddset(&block, SIGTERM);
        ck_assert_int_eq(sigprocmask(SIG_BLOCK, &block, NULL), 0);
        _cleanup_free_ char *out = NULL;
        ck_assert_int_eq(run_pager("exec grep -E '^Sig(Ign|Blk):' /proc/self/status", "", 0, &out), 0);
        ck_assert_str_eq(out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}
END_TEST

/* cli_pager_fork (git apply --stat): stdout is out_fd, stdin our pipe,
 * stderr stays ours. */
START_TEST(fork_with_own_stdout) {
        _cleanup_free_ char *out_path = tf_path(dir, "child.out");
        _cleanup_free_ char *err_path = tf_path(dir, "child.err");
        _cleanup_close_ int out_fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        _cleanup_close_ int err_fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(out_fd, 0);
        ck_assert_int_ge(err_fd, 0);
        fflush(stderr);
        _cleanup_close_ int saved_err = dup(STDERR_FILENO);
        ck_assert_int_ge(dup2(err_fd, STDERR_FILENO), 0);
        cli_pager p = CLI_PAGER_INIT;
        int r = cli_pager_fork("test child", out_fd, &p);
        if (r == 0) {
                /* the child execs (our write end closes with it): stdin's
                 * byte count onto stdout, a word on stderr */
                execl("/bin/sh", "sh", "-c", "printf '%s bytes\\n' $(wc -c); echo child stderr >&2; exit 7", (char *) NULL);
                _exit(127);
        }
        ck_assert_int_ge(dup2(saved_err, STDERR_FILENO), 0);
        ck_assert_int_eq(r, 1);
        ck_assert_int_eq(write(p.fd, "abcdef", 6), 6);
        ck_assert_int_eq(cli_pager_finish(&p), 7);
        _cleanup_free_ char *out = tf_read_file(out_path, false);
        _cleanup_free_ char *err = tf_read_file(err_path, false);
        ck_assert_str_eq(out, "6 bytes\n");
        ck_assert_str_eq(err, "child stderr\n");
}
END_TEST

int main(void) {
        Suite *s = suite_create("cli-pager");
        TCase *tc = tf_tcase(s, "pager", setup, teardown, 30,
                             TF_TESTS(pager_reads_our_pipe_and_writes_our_stdout, less_and_lv_defaults,
                                      exit_status_as_a_shell_reports_it, pager_that_quits_early,
                                      pager_gets_default_dispositions, fork_with_own_stdout));
        TF_LOOP(tc, command_choice, choices);
        return tf_run_suite(s);
}
