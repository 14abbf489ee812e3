/* What the CLI resolves before it connects (cli-resolve.h). */
#include "cli-resolve.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli-args.h"
#include "config.h"
#include "paths.h"
#include "macro.h"
#include "string-util.h"
#include "workspace.h"

int cli_normalize_directory(const char *dir, char **ret, cli_error *err) {
        _cleanup_free_ char *resolved = realpath(dir, NULL);
        if (!resolved) {
                int e = errno;
                if (e == ENOMEM) return -ENOMEM;
                _cleanup_free_ char *help = strdup_printf("Use an existing directory path for --directory (%s)",
                                                          strerror(e));
                return cli_error_usage(err, help, "directory does not exist: %s", dir);
        }
        struct stat st;
        if (stat(resolved, &st) < 0 || !S_ISDIR(st.st_mode))
                return cli_error_usage(err, "Use --directory with a workspace directory, not a file",
                                       "path is not a directory: %s", dir);
        *ret = TAKE_PTR(resolved);
        return 0;
}

int cli_workspace_root(const char *dir, char **ret) {
        int r = workspace_root_find(dir, ret);
        if (r == 0) fprintf(stderr, "no git repository found for %s; using it directly\n", dir);
        return r < 0 ? r : 0;
}

int cli_read_prompt(int fd, const char *command, volatile sig_atomic_t *interrupted,
                    char **ret, size_t *ret_len, cli_error *err) {
        _cleanup_free_ char *help = strdup_printf(
                "Pipe a prompt into the command (e.g. `cat prompt.txt | taskferry %s --prompt -`), or pass --prompt \"<text>\" directly",
                command);
        if (!help) return -ENOMEM;
        if (isatty(fd)) return cli_error_usage(err, help, "--prompt - requires a piped stdin (no TTY input detected)");

        /* With SIGINT/SIGTERM blocked, ppoll() unblocks them atomically while
         * it waits: a signal that arrives before or during the wait always
         * ends it (no window between checking the flag and sleeping). */
        sigset_t block, saved;
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        sigaddset(&block, SIGTERM);
        if (interrupted) sigprocmask(SIG_BLOCK, &block, &saved);

        _cleanup_free_ char *buf = NULL;
        size_t len = 0, cap = 0;
        int r = 0;
        for (;;) {
                if (interrupted) {
                        if (*interrupted) {
                                r = cli_error_usage(err, help, "--prompt - aborted while waiting for stdin to close");
                                break;
                        }
                        struct pollfd pfd = { .fd = fd, .events = POLLIN };
                        if (ppoll(&pfd, 1, NULL, &saved) < 0) {
                                if (errno == EINTR) continue;
                                r = cli_error_usage(err, help, "--prompt - could not read stdin: %s", strerror(errno));
                                break;
                        }
                }
                if (cap - len < 65536) {
                        size_t ncap = cap ? cap * 2 : 65536;
                        char *nb = realloc(buf, ncap + 1);
                        if (!nb) {
                                r = -ENOMEM;
                                break;
                        }
                        buf = nb;
                        cap = ncap;
                }
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0) {
                        if (errno == EINTR) continue;
                        r = cli_error_usage(err, help, "--prompt - could not read stdin: %s", strerror(errno));
                        break;
                }
                if (n == 0) break;
                len += (size_t) n;
        }
        if (interrupted) sigprocmask(SIG_SETMASK, &saved, NULL);
        if (r < 0) return r;
        if (len > 0 && buf[len - 1] == '\n') {
                len--;
                if (len > 0 && buf[len - 1] == '\r') len--;
        }
        if (len == 0) return cli_error_usage(err, help, "--prompt - received empty stdin");
        buf[len] = 0;
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

int cli_load_config(json_object **ret, cli_error *err) {
        _cleanup_(tf_paths_done) tf_paths paths = {};
        int r = tf_paths_resolve(&paths);
        if (r < 0) return cli_error_fail(err, NULL, "cannot resolve taskferry paths: %s", strerror(-r));
        _cleanup_free_ char *text = NULL;
        r = config_load(paths.config_file, ret, NULL, &text);
        if (r == -ENOMEM) return r;
        if (r < 0) return cli_error_fail(err, NULL, "%s", strempty(text));
        return 0;
}

int cli_wait_default_timeout(const char *env_value, double *ret_ms) {
        return config_wait_default_timeout(NULL, env_value, ret_ms);
}
