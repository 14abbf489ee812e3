#pragma once
/* What the libFuzzer targets of tests/fuzz share: the input as a C string or
 * as a file, a line splitter, and an invariant check that aborts (libFuzzer
 * then saves the input as a crash). Every target defines
 * LLVMFuzzerTestOneInput; a target must not leak, keep state between inputs
 * other than caches the code itself keeps, or write outside its own memfds
 * (a reader of a directory: one scratch directory of its own, made once,
 * rewritten per input and removed at exit). */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant of the parser under test: abort with where and what. */
#define fuzz_check(cond)                                                                            \
        do {                                                                                        \
                if (!(cond)) {                                                                      \
                        fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond); \
                        abort();                                                                    \
                }                                                                                   \
        } while (0)

/* The input as a NUL-terminated copy (it may hold NUL bytes before the
 * end: the length is size). Aborts on ENOMEM: a fuzz input is small. */
static inline char *fuzz_strndup(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);
        if (!s) abort();
        if (size) memcpy(s, data, size);
        s[size] = 0;
        return s;
}

/* The input as a file: a memfd holding it, offset 0 (its path for code
 * that opens one: fuzz_fd_path). -errno. */
static inline int fuzz_memfd(const void *data, size_t size) {
        int fd = memfd_create("fuzz-input", MFD_CLOEXEC);
        if (fd < 0) return -errno;
        for (size_t off = 0; off < size;) {
                ssize_t n = write(fd, (const char *) data + off, size - off);
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) {
                        close(fd);
                        return -EIO;
                }
                off += (size_t) n;
        }
        if (lseek(fd, 0, SEEK_SET) < 0) {
                close(fd);
                return -errno;
        }
        return fd;
}

/* "/proc/self/fd/<fd>": opening it opens the memfd afresh (offset 0). */
static inline void fuzz_fd_path(int fd, char buf[static 32]) {
        snprintf(buf, 32, "/proc/self/fd/%d", fd);
}

/* Split data[0..size) on '\n': fn(userdata, line, len, newline) for each
 * line, newline false only for a last line without one. */
static inline void fuzz_lines(const uint8_t *data, size_t size,
                              void (*fn)(void *userdata, const char *line, size_t len, bool newline), void *userdata) {
        const char *p = (const char *) data, *end = p + size;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t len = nl ? (size_t) (nl - p) : (size_t) (end - p);
                fn(userdata, p, len, nl != NULL);
                p += len + (nl ? 1 : 0);
        }
}

/* Take the first byte of the input as a selector (0 when empty). */
static inline uint8_t fuzz_take_byte(const uint8_t **data, size_t *size) {
        if (*size == 0) return 0;
        uint8_t b = **data;
        (*data)++;
        (*size)--;
        return b;
}
