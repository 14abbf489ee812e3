/* Pager for `taskferry diff` (see cli-pager.h). */
#include "cli-pager.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"

const char *cli_pager_command(void) {
        const char *p = getenv("GIT_PAGER");
        if (!p) p = getenv("PAGER");
        if (!p) p = "less -R";
        /* git: an empty pager or "cat" is no pager */
        if (!*p || streq(p, "cat")) return NULL;
        return p;
}

int cli_pager_start(const char *command, cli_pager *p) {
        *p = CLI_PAGER_INIT;
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) < 0) return -errno;
        pid_t pid = fork();
        if (pid < 0) {
                int e = errno;
                close(fds[0]);
                close(fds[1]);
                return -e;
        }
        if (pid == 0) {
                if (dup2(fds[0], STDIN_FILENO) < 0) _exit(127);
                /* git's defaults for less and lv, unless the user set their own */
                setenv("LESS", "FRX", 0);
                setenv("LV", "-c", 0);
                signal(SIGPIPE, SIG_DFL);
                signal(SIGINT, SIG_DFL);
                signal(SIGTERM, SIG_DFL);
                execl("/bin/sh", "sh", "-c", command, (char *) NULL);
                _exit(127);
        }
        close(fds[0]);
        p->pid = pid;
        p->fd = fds[1];
        return 0;
}

int cli_pager_finish(cli_pager *p) {
        if (p->fd >= 0) p->fd = safe_close(p->fd);
        if (p->pid <= 0) return 0;
        int status;
        for (;;) {
                if (waitpid(p->pid, &status, 0) >= 0) break;
                if (errno != EINTR) {
                        int e = errno;
                        p->pid = 0;
                        return -e;
                }
        }
        p->pid = 0;
        if (WIFEXITED(status)) return WEXITSTATUS(status);
        return 128 + WTERMSIG(status);
}
