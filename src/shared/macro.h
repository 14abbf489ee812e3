#pragma once
/* Cleanup helpers and small macros, modelled on systemd's macro.h.
 * Conventions: functions return 0/positive on success and -errno on
 * failure. */

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

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_json_ _cleanup_(json_object_putp)

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

/* errno as a negative value, never 0 (for "return -errno" after a failed libc call). */
static inline int negative_errno(void) { return errno > 0 ? -errno : -EIO; }
