#pragma once
/* The env file: a .env-style file whose variables are the lowest of the three
 * layers of a worker's environment (env file < the daemon's own environment <
 * the caller's, merged at spawn by launch.c). Path: TASKFERRY_ENV_FILE if
 * defined ("" disables and does not fall through), else config envFile
 * (Settings.env_file). Loaded once at start, where any failure aborts the
 * start; then watched through inotify on its parent directory, filtered by
 * name, debounced 100 ms, and replaced as a whole on each good reload; a
 * failed reload keeps the last good values.
 *
 * The values are secrets: no function here logs, returns in an error
 * message, or writes anywhere a value (or a line of the file); error
 * messages name the path, a line number and the rule only. */

#include <sys/stat.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct Manager Manager;

/* Bytes an env file may hold; a larger one is an error. */
#define ENV_FILE_MAX ((size_t) 1 << 20)
/* The debounce of a reload after the last inotify event, µs. */
#define ENV_FILE_DEBOUNCE_USEC (100 * 1000)

/* Parse the text of an env file (the original's grammar): split on \r?\n;
 * each line trimmed as JavaScript's String.prototype.trim() does (Unicode
 * white space, U+FEFF and U+00A0 included); empty and '#' lines skipped;
 * one literal "export " prefix dropped; split at the first '='; the name
 * trimmed and ^[A-Za-z_][A-Za-z0-9_]*$; the value trimmed, then one layer of
 * matching '"' or '\'' stripped (inside '"' only \" and \\ are unescaped);
 * no inline comments; the last duplicate wins. Invalid UTF-8 reads as
 * U+FFFD (what the original's UTF-8 reader sees); a NUL byte is an error.
 * *ret: strv of "NAME=value", each name once, in first-seen order.
 * Errors: -EBADMSG with *reason "error: <path>:<line>: <rule>\nhelp: ..."
 * (a sentence for the user, set exactly when the return is negative but for
 * -ENOMEM; the caller frees it). path is only used in the message. */
int env_file_parse(const char *path, const char *text, size_t len, char ***ret, char **reason);

/* Open path (symlinks followed; O_NONBLOCK so a fifo cannot hang the
 * daemon), check it on the open fd — a regular file, no group or other
 * permission bit ((mode & 077) == 0; ownership is not checked), at most
 * ENV_FILE_MAX bytes — read and parse it. *ret_st (may be NULL): the fstat
 * of what was read. Errors: -ENOENT, -EACCES (group/other bits), -EISDIR /
 * -EINVAL (not a regular file), -EFBIG, -EBADMSG (grammar), other -errno
 * of open/read, each with *reason ("error: ...\nhelp: ...", the caller
 * frees it); -ENOMEM (*reason untouched). */
int env_file_load(const char *path, char ***ret, struct stat *ret_st, char **reason);

/* At start (main.c, after settings_load): load Settings.env_file if set and
 * start watching its directory (a watch that cannot be set up is a warning:
 * live updates off). 0 (no file configured, or loaded); < 0 with
 * *reason: the start must fail. */
int env_file_init(Manager *m, char **reason);
/* The current variables ("NAME=value" strv, never NULL; the last good
 * load), valid until the next turn of the event loop. */
char *const *env_file_vars(Manager *m);
/* Stop the watch, free the values. */
void env_file_free(Manager *m);
