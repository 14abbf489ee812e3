#pragma once
/* The pager `taskferry diff` writes through when stdout is a terminal,
 * chosen and started as git does (git's pager.c): $GIT_PAGER, else $PAGER,
 * else "less -R" (git's core.pager is not read); an empty value or "cat"
 * means no pager. The pager runs as `/bin/sh -c <command>` with stdin a
 * pipe from us and stdout/stderr our terminal; LESS=FRX and LV=-c are set
 * for it when unset, so a short diff does not wait for a key press. */

#include <stdbool.h>
#include <sys/types.h>

typedef struct cli_pager {
        pid_t pid; /* 0: none */
        int fd;    /* write end of the pager's stdin, -1: none */
} cli_pager;

#define CLI_PAGER_INIT ((cli_pager) { .pid = 0, .fd = -1 })

/* The command to run, or NULL for none (borrowed from the environment or
 * a static string). */
const char *cli_pager_command(void);

/* Start `command`. -errno (pipe, fork), with *p left CLI_PAGER_INIT. */
int cli_pager_start(const char *command, cli_pager *p);

/* Close our end (EOF for the pager) and wait for it to exit. Returns its
 * exit status (0..255, 128+signal) or -errno; 0 if none was started. */
int cli_pager_finish(cli_pager *p);
