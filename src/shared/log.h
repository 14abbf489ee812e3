#pragma once
/* Logging to stderr (journald picks stderr up when a program runs as a
 * unit): "<program>: <level>: <message>" lines. Never pass a prompt, a log
 * line or an environment value to these.
 *
 * Priorities (sd-daemon(3), systemd.exec(5) "$JOURNAL_STREAM"): when stderr
 * is the journal's stream (JOURNAL_STREAM="<dev>:<ino>" names fd 2, checked
 * once per process), every line written by the log functions starts with
 * "<N>", the syslog priority of its level (error 3, warning 4, notice 5,
 * info 6, debug 7); journald's stream transport strips it and files the line
 * under that PRIORITY (SyslogLevelPrefix=, on by default). On a terminal, a
 * pipe or a file the lines are unchanged. */

#include <stdbool.h>

#include "macro.h"

/* A formatted message at level ("error", "warning", "info", ...). Its
 * lines after the first start with two spaces, and control characters but
 * a tab are written as \xNN: text inside the message (a path, a model name a
 * worker chose) can never pass for a line of its own. */
void log_msg(const char *level, const char *fmt, ...) _printf_(2, 3);
/* The same with ": <strerror(-r)>" appended; returns r (a -errno). */
int log_errno_msg(const char *level, int r, const char *fmt, ...) _printf_(3, 4);
#define log_info(...) log_msg("info", __VA_ARGS__)
#define log_warning(...) log_msg("warning", __VA_ARGS__)
#define log_error(...) log_msg("error", __VA_ARGS__)
/* Print "<prefix>: msg: strerror(-r)" and return r (which must be < 0). */
#define log_error_errno(r, ...) log_errno_msg("error", (r), __VA_ARGS__)
#define log_warning_errno(r, ...) log_errno_msg("warning", (r), __VA_ARGS__)
/* Set the program name printed by log_msg(); default "taskferry". */
void log_set_program(const char *name);
/* Like log_msg, without the "<program>: <level>: " head and without the
 * indenting and escaping: the text as is (the CLI's multi-line
 * "error: ...\nhelp: ..." texts). */
void log_text(const char *level, const char *fmt, ...) _printf_(2, 3);
/* The syslog priority of level; an unknown level or NULL is 6 (info). */
int log_level_priority(const char *level);
/* Does fd refer to the stream journal_stream ("<dev>:<ino>", decimal) names?
 * false for NULL, "" or a malformed value. */
bool log_fd_is_journal_stream(int fd, const char *journal_stream);
/* Forget the cached answer for stderr (after redirecting it; tests). */
void log_reset_stream(void);
