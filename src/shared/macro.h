#pragma once
/* Cleanup helpers and small macros, modelled on systemd's macro.h.
 * Conventions (DESIGN.md "C conventions"): functions return 0/positive on
 * success and -errno on failure. */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <json-c/json.h>

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _pure_ __attribute__((pure))
#define _warn_unused_result_ __attribute__((warn_unused_result))

static inline void freep(void *p) { free(*(void **) p); }
static inline void closep(int *fd) {
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}
static inline void fclosep(FILE **f) { if (*f) fclose(*f); }
static inline void json_object_putp(json_object **j) { if (*j) json_object_put(*j); }
void strv_free(char **l);
static inline void strv_freep(char ***l) { strv_free(*l); }

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_json_ _cleanup_(json_object_putp)
#define _cleanup_strv_free_ _cleanup_(strv_freep)

/* Take ownership away from a cleanup variable. */
#define TAKE_PTR(p) ({ __typeof__(p) _p_ = (p); (p) = NULL; _p_; })
#define TAKE_FD(fd) ({ int _fd_ = (fd); (fd) = -1; _fd_; })

static inline bool streq(const char *a, const char *b) { return strcmp(a, b) == 0; }
static inline bool streq_ptr(const char *a, const char *b) {
        if (!a || !b) return a == b;
        return strcmp(a, b) == 0;
}
static inline bool isempty(const char *s) { return !s || !*s; }
static inline const char *strempty(const char *s) { return s ? s : ""; }
static inline const char *strnull(const char *s) { return s ? s : "(null)"; }
static inline bool startswith(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Close an fd and return -1, for "fd = safe_close(fd)". */
static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                close(fd);
                errno = saved;
        }
        return -1;
}

/* Logging to stderr (journald picks stderr up when run as a unit). Never
 * pass a prompt, log line or environment value to these. */
void log_msg(const char *level, const char *fmt, ...) _printf_(2, 3);
int log_errno_msg(const char *level, int r, const char *fmt, ...) _printf_(3, 4);
#define log_info(...) log_msg("info", __VA_ARGS__)
#define log_warning(...) log_msg("warning", __VA_ARGS__)
#define log_error(...) log_msg("error", __VA_ARGS__)
/* Print "<prefix>: msg: strerror(-r)" and return r (which must be < 0). */
#define log_error_errno(r, ...) log_errno_msg("error", (r), __VA_ARGS__)
#define log_warning_errno(r, ...) log_errno_msg("warning", (r), __VA_ARGS__)
/* Set the program name printed by log_msg(); default "taskferry". */
void log_set_program(const char *name);
/* Like log_msg, without the "<program>: <level>: " head: the text as is
 * (multi-line "error: ...\nhelp: ..." texts of the spec). */
void log_text(const char *level, const char *fmt, ...) _printf_(2, 3);
/* Priorities (sd-daemon(3), systemd.exec(5) "$JOURNAL_STREAM"): when stderr
 * is the journal's stream (JOURNAL_STREAM="<dev>:<ino>" names fd 2, checked
 * once per process), every line written by the log functions starts with
 * "<N>", the syslog priority of its level (error 3, warning 4, notice 5,
 * info 6, debug 7); journald's stream transport strips it and files the line
 * under that PRIORITY (SyslogLevelPrefix=, on by default). On a terminal, a
 * pipe or a file the lines are unchanged. */
int log_level_priority(const char *level); /* unknown level: 6 (info) */
/* Does fd refer to the stream journal_stream ("<dev>:<ino>", decimal) names?
 * false for NULL, "" or a malformed value. */
bool log_fd_is_journal_stream(int fd, const char *journal_stream);
/* Forget the cached answer for stderr (after redirecting it; tests). */
void log_reset_stream(void);

/* errno as a negative value, never 0 (for "return -errno" after a failed libc call). */
static inline int negative_errno(void) { return errno > 0 ? -errno : -EIO; }
