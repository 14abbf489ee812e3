#pragma once
/* The processes `taskferry diff` writes through: a child reading a pipe
 * from us on its stdin — the pager, when stdout is a terminal, and `git
 * apply --stat` for --stat.
 *
 * The pager is chosen and started as git does (git's pager.c): $GIT_PAGER,
 * else $PAGER, else "less -R" (git's core.pager is not read); an empty value
 * or "cat" means no pager. It runs as `/bin/sh -c <command>` with stdin a
 * pipe from us and stdout/stderr our terminal; LESS=FRX and LV=-c are set
 * for it when unset, so a short diff does not wait for a key press. */

#include <stdbool.h>
#include <sys/types.h>

typedef struct cli_pager {
        pid_t pid; /* 0: none */
        int fd;    /* write end of the child's stdin, -1: none */
} cli_pager;

#define CLI_PAGER_INIT ((cli_pager) { .pid = 0, .fd = -1 })

/* Fork a child (safe_fork; `name` for its setup errors) whose stdin is the
 * read end of a new pipe and whose stdout is out_fd (stderr stays ours),
 * every signal back to its default (diff ignores SIGPIPE while it writes).
 * In the parent 1, with p->pid and p->fd (the write end, O_CLOEXEC); in the
 * child 0, for it to exec; -errno (pipe, fork), with *p left CLI_PAGER_INIT. */
int cli_pager_fork(const char *name, int out_fd, cli_pager *p);

/* The command to run, or NULL for none (borrowed from the environment or
 * a static string). */
const char *cli_pager_command(void);

/* Start the pager `command` on our stdout. -errno (pipe, fork), with *p
 * left CLI_PAGER_INIT. */
int cli_pager_start(const char *command, cli_pager *p);

/* Close our end (EOF for the child) and wait for it to exit. Returns its
 * exit status (0..255, 128+signal) or -errno; 0 if none was started. */
int cli_pager_finish(cli_pager *p);
