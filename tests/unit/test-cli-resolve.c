/* Client-side resolution: directory validation, git workspace root (with
 * real git), `--prompt -` stdin. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli-resolve.h"
#include "unit.h"
#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

static char *tmp_root;

static void setup(void) { tmp_root = tf_tmpdir_new("test-cli-resolve"); }

static void teardown(void) { tmp_root = tf_tmpdir_free(tmp_root); }

/* A shell command (printf-style) run in the test's dir. */
#define sh(...) free(tf_sh(tmp_root, __VA_ARGS__))

START_TEST(test_normalize_existing_and_relative) {
        _cleanup_free_ char *sub = strdup_printf("%s/a/b", tmp_root);
        ck_assert_int_ge(mkdir_p(sub, 0755), 0);
        _cleanup_free_ char *link = strdup_printf("%s/link", tmp_root);
        ck_assert_int_eq(symlink(sub, link), 0);

        cli_error err = {};
        _cleanup_free_ char *r1 = NULL, *r2 = NULL, *r3 = NULL;
        ck_assert_int_eq(cli_normalize_directory(link, &r1, &err), 0);
        ck_assert_str_eq(r1, sub);
        _cleanup_free_ char *dotted = strdup_printf("%s/a/../a/b/", tmp_root);
        ck_assert_int_eq(cli_normalize_directory(dotted, &r2, &err), 0);
        ck_assert_str_eq(r2, sub);
        ck_assert_int_eq(chdir(tmp_root), 0);
        ck_assert_int_eq(cli_normalize_directory("a/b", &r3, &err), 0);
        ck_assert_str_eq(r3, sub);
        ck_assert_int_eq(err.exit_code, 0);
}
END_TEST

START_TEST(test_normalize_missing_directory) {
        _cleanup_free_ char *missing = strdup_printf("%s/nope/deeper", tmp_root);
        cli_error err = {};
        char *r = NULL;
        ck_assert_int_eq(cli_normalize_directory(missing, &r, &err), -EINVAL);
        ck_assert_ptr_null(r);
        ck_assert_int_eq(err.exit_code, CLI_EXIT_USAGE);
        _cleanup_free_ char *want = strdup_printf("directory does not exist: %s", missing);
        ck_assert_str_eq(err.text, want);
        _cleanup_free_ char *help = strdup("Use an existing directory path for --directory (No such file or directory)");
        ck_assert_str_eq(err.help, help);
        cli_error_done(&err);

        /* relative names are reported as given */
        ck_assert_int_eq(chdir(tmp_root), 0);
        ck_assert_int_eq(cli_normalize_directory("ghost", &r, &err), -EINVAL);
        ck_assert_str_eq(err.text, "directory does not exist: ghost");
        cli_error_done(&err);
}
END_TEST

START_TEST(test_normalize_file_is_not_directory) {
        _cleanup_free_ char *file = strdup_printf("%s/f.txt", tmp_root);
        ck_assert_int_eq(write_file_atomic(file, "x", 1, 0644), 0);
        cli_error err = {};
        char *r = NULL;
        ck_assert_int_eq(cli_normalize_directory(file, &r, &err), -EINVAL);
        ck_assert_int_eq(err.exit_code, CLI_EXIT_USAGE);
        _cleanup_free_ char *want = strdup_printf("path is not a directory: %s", file);
        ck_assert_str_eq(err.text, want);
        ck_assert_str_eq(err.help, "Use --directory with a workspace directory, not a file");
        cli_error_done(&err);

        /* a path through a file */
        _cleanup_free_ char *through = strdup_printf("%s/f.txt/x", tmp_root);
        ck_assert_int_eq(cli_normalize_directory(through, &r, &err), -EINVAL);
        ck_assert(startswith(err.text, "directory does not exist: "));
        ck_assert_str_eq(err.help, "Use an existing directory path for --directory (Not a directory)");
        cli_error_done(&err);
}
END_TEST

/* cli_workspace_root of <tmp_root>/rel succeeds with <tmp_root>/want_rel. */
static void root_is(const char *rel, const char *want_rel) {
        _cleanup_free_ char *dir = strdup_printf("%s/%s", tmp_root, rel);
        _cleanup_free_ char *want = strdup_printf("%s/%s", tmp_root, want_rel);
        _cleanup_free_ char *r = NULL;
        ck_assert_int_eq(cli_workspace_root(dir, &r), 0);
        ck_assert_str_eq(r, want);
}

START_TEST(test_workspace_root_repo_and_subdir) {
        sh("git init -q repo && mkdir -p repo/src/deep");
        root_is("repo", "repo");
        root_is("repo/src/deep", "repo");
}
END_TEST

START_TEST(test_workspace_root_linked_worktree) {
        sh("git init -q repo && git -C repo -c user.email=t@t -c user.name=t commit -q --allow-empty -m init && "
           "git -C repo worktree add -q ../wt && git -C repo worktree add -q .worktrees/nested");
        root_is("wt", "repo");
        root_is("repo/.worktrees/nested", "repo");
}
END_TEST

START_TEST(test_workspace_root_submodule) {
        sh("git init -q sub && git -C sub -c user.email=t@t -c user.name=t commit -q --allow-empty -m s && "
           "git init -q super && git -C super -c user.email=t@t -c user.name=t commit -q --allow-empty -m s && "
           "git -C super -c protocol.file.allow=always submodule add -q \"$PWD/sub\" mods/sub");
        root_is("super/mods/sub", "super/mods/sub");
}
END_TEST

START_TEST(test_workspace_root_no_repo) {
        _cleanup_free_ char *plain = strdup_printf("%s/plain", tmp_root);
        ck_assert_int_ge(mkdir_p(plain, 0755), 0);
        /* GIT_CEILING_DIRECTORIES keeps git from finding a repo above the temp dir */
        setenv("GIT_CEILING_DIRECTORIES", tmp_root, 1);
        root_is("plain", "plain");
}
END_TEST

/* Feed `data` through a pipe and read it back as --prompt -. */
static int read_prompt_from(const char *data, size_t len, char **ret, size_t *ret_len, cli_error *err) {
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        ck_assert_int_eq(write(p[1], data, len), (ssize_t) len);
        close(p[1]);
        int r = cli_read_prompt(p[0], "dispatch", NULL, ret, ret_len, err);
        close(p[0]);
        return r;
}

START_TEST(test_prompt_from_stdin) {
        static const struct { const char *in; size_t in_len; const char *out; size_t out_len; } cases[] = {
                { "hello\n", 6, "hello", 5 },
                { "a\r\n", 3, "a", 1 },
                { "a\n\n", 3, "a\n", 2 },
                { "no newline", 10, "no newline", 10 },
                { "  spaced  \n", 11, "  spaced  ", 10 },
                { "a\0b\n", 4, "a\0b", 3 },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                cli_error err = {};
                _cleanup_free_ char *p = NULL;
                size_t len = 0;
                ck_assert_int_eq(read_prompt_from(cases[i].in, cases[i].in_len, &p, &len, &err), 0);
                ck_assert_uint_eq(len, cases[i].out_len);
                ck_assert(memcmp(p, cases[i].out, len) == 0);
                ck_assert_int_eq(p[len], 0);
        }
        /* a large prompt (beyond one read buffer) */
        size_t big = 300000;
        _cleanup_free_ char *data = malloc(big + 1);
        memset(data, 'x', big);
        data[big] = '\n';
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        pid_t pid = fork();
        if (pid == 0) {
                close(p[0]);
                ssize_t n = write(p[1], data, big + 1);
                _exit(n == (ssize_t) (big + 1) ? 0 : 1);
        }
        close(p[1]);
        cli_error err = {};
        _cleanup_free_ char *out = NULL;
        size_t len = 0;
        ck_assert_int_eq(cli_read_prompt(p[0], "dispatch", NULL, &out, &len, &err), 0);
        close(p[0]);
        ck_assert_uint_eq(len, big);
}
END_TEST

START_TEST(test_prompt_empty_stdin) {
        static const char *const empties[] = { "", "\n", "\r\n" };
        for (size_t i = 0; i < ELEMENTSOF(empties); i++) {
                cli_error err = {};
                char *p = NULL;
                size_t len;
                ck_assert_int_eq(read_prompt_from(empties[i], strlen(empties[i]), &p, &len, &err), -EINVAL);
                ck_assert_int_eq(err.exit_code, CLI_EXIT_USAGE);
                ck_assert_str_eq(err.text, "--prompt - received empty stdin");
                ck_assert_str_eq(err.help, "Pipe a prompt into the command (e.g. `cat prompt.txt | taskferry dispatch --prompt -`), or pass --prompt \"<text>\" directly");
                cli_error_done(&err);
        }
}
END_TEST

START_TEST(test_prompt_tty_rejected) {
        int master = posix_openpt(O_RDWR | O_NOCTTY);
        ck_assert_int_ge(master, 0);
        ck_assert_int_eq(grantpt(master), 0);
        ck_assert_int_eq(unlockpt(master), 0);
        int tty = open(ptsname(master), O_RDWR | O_NOCTTY);
        ck_assert_int_ge(tty, 0);
        cli_error err = {};
        char *p = NULL;
        size_t len;
        ck_assert_int_eq(cli_read_prompt(tty, "dispatch", NULL, &p, &len, &err), -EINVAL);
        ck_assert_str_eq(err.text, "--prompt - requires a piped stdin (no TTY input detected)");
        cli_error_done(&err);
        close(tty);
        close(master);
}
END_TEST

static volatile sig_atomic_t alarm_fired;
static void on_alarm(int sig) {
        (void) sig;
        alarm_fired = 1;
}

START_TEST(test_prompt_interrupted) {
        /* The write end stays open, so read() blocks until the signal. */
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        ck_assert_int_eq(write(p[1], "partial", 7), 7);
        struct sigaction sa = { .sa_handler = on_alarm }; /* no SA_RESTART */
        sigemptyset(&sa.sa_mask);
        ck_assert_int_eq(sigaction(SIGALRM, &sa, NULL), 0);
        alarm(1);
        cli_error err = {};
        char *out = NULL;
        size_t len;
        ck_assert_int_eq(cli_read_prompt(p[0], "dispatch", &alarm_fired, &out, &len, &err), -EINVAL);
        ck_assert(alarm_fired);
        ck_assert_str_eq(err.text, "--prompt - aborted while waiting for stdin to close");
        cli_error_done(&err);
        close(p[0]);
        close(p[1]);
}
END_TEST

static volatile sig_atomic_t int_seen;
static void on_int(int sig) {
        (void) sig;
        int_seen = 1;
}

START_TEST(test_prompt_interrupt_pending_before_wait) {
        /* A Ctrl-C that lands before the wait starts (while the CLI was still
         * resolving the directory) must abort, not be lost: the write end
         * stays open, so without the check this would block forever. */
        struct sigaction sa = { .sa_handler = on_int, .sa_flags = SA_RESETHAND };
        sigemptyset(&sa.sa_mask);
        ck_assert_int_eq(sigaction(SIGINT, &sa, NULL), 0);
        ck_assert_int_eq(raise(SIGINT), 0);
        ck_assert(int_seen);
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        cli_error err = {};
        char *out = NULL;
        size_t len;
        ck_assert_int_eq(cli_read_prompt(p[0], "dispatch", &int_seen, &out, &len, &err), -EINVAL);
        ck_assert_str_eq(err.text, "--prompt - aborted while waiting for stdin to close");
        cli_error_done(&err);
        /* the signal mask is restored */
        sigset_t now;
        ck_assert_int_eq(sigprocmask(SIG_BLOCK, NULL, &now), 0);
        ck_assert(!sigismember(&now, SIGINT));
        ck_assert(!sigismember(&now, SIGTERM));
        close(p[0]);
        close(p[1]);
}
END_TEST

TF_MAIN("cli-resolve", "resolve", setup, teardown, 60, test_normalize_existing_and_relative,
        test_normalize_missing_directory, test_normalize_file_is_not_directory, test_workspace_root_repo_and_subdir,
        test_workspace_root_linked_worktree, test_workspace_root_submodule, test_workspace_root_no_repo,
        test_prompt_from_stdin, test_prompt_empty_stdin, test_prompt_tty_rejected, test_prompt_interrupted,
        test_prompt_interrupt_pending_before_wait)
