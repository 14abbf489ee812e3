/* The children `taskferry diff` writes through (see cli-pager.h). */
#include "cli-pager.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "process-util.h"

int cli_pager_fork(const char *name, int out_fd, cli_pager *p) {
        *p = CLI_PAGER_INIT;
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) < 0) return -errno;
        const int stdio[3] = {fds[0], out_fd, STDERR_FILENO};
        pid_t pid;
        int r = safe_fork_full(name, stdio, NULL, 0, FORK_RESET_SIGNALS | FORK_REARRANGE_STDIO, &pid);
        if (r < 0) {
                close(fds[0]);
                close(fds[1]);
                return r;
        }
        if (r == 0) return 0;
        close(fds[0]);
        p->pid = pid;
        p->fd = fds[1];
        return 1;
}

const char *cli_pager_command(void) {
        const char *p = getenv("GIT_PAGER");
        if (!p) p = getenv("PAGER");
        if (!p) p = "less -R";
        /* git: an empty pager or "cat" is no pager */
        if (!*p || streq(p, "cat")) return NULL;
        return p;
}

int cli_pager_start(const char *command, cli_pager *p) {
        int r = cli_pager_fork("pager", STDOUT_FILENO, p);
        if (r != 0) return r < 0 ? r : 0;
        /* git's defaults for less and lv, unless the user set their own */
        setenv("LESS", "FRX", 0);
        setenv("LV", "-c", 0);
        execl("/bin/sh", "sh", "-c", command, (char *) NULL);
        _exit(127);
}

int cli_pager_finish(cli_pager *p) {
        if (p->fd >= 0) p->fd = safe_close(p->fd);
        if (p->pid <= 0) return 0;
        siginfo_t si;
        int r = wait_for_terminate(p->pid, &si);
        p->pid = 0;
        return r < 0 ? r : wait_status_to_exit_code(&si);
}
