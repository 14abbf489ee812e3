/* Formatted and quoted strings (see string-util.h). */

#include "string-util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int set_error(char **reason, int r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *s = NULL;
        int n = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (n < 0) return -ENOMEM;
        free(*reason);
        *reason = s;
        return r;
}

char *strdup_printf(const char *fmt, ...) {
        va_list ap;
        char *s = NULL;
        va_start(ap, fmt);
        int r = vasprintf(&s, fmt, ap);
        va_end(ap);
        return r < 0 ? NULL : s;
}

char *shell_quote(const char *s) {
        size_t n = 3;
        for (const char *p = s; *p; p++) n += *p == '\'' ? 4 : 1;
        char *out = malloc(n), *o = out;
        if (!out) return NULL;
        *o++ = '\'';
        for (const char *p = s; *p; p++) {
                if (*p == '\'') {
                        memcpy(o, "'\\''", 4);
                        o += 4;
                } else
                        *o++ = *p;
        }
        *o++ = '\'';
        *o = 0;
        return out;
}

int hex_digit_value(int c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -EINVAL;
}
