/* String vectors and environment arrays (see strv.h). */

#include "strv.h"

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

void strv_free(char **l) {
        if (!l) return;
        for (char **i = l; *i; i++) free(*i);
        free(l);
}

size_t strv_length(char *const *l) {
        size_t n = 0;
        if (l)
                while (l[n]) n++;
        return n;
}

int strv_consume(char ***l, char *s) {
        if (!s) return -ENOMEM;
        size_t n = strv_length(*l);
        char **nl = *l;
        /* grow geometrically: a realloc per push copied the list each time
         * (under AddressSanitizer always), O(n^2) for a list of n paths */
        if (!nl || malloc_usable_size(nl) < sizeof(char *) * (n + 2)) {
                size_t want = n + 2 < 8 ? 8 : 2 * (n + 2);
                nl = reallocarray(*l, want, sizeof(char *));
        }
        if (!nl) {
                free(s);
                return -ENOMEM;
        }
        nl[n] = s;
        nl[n + 1] = NULL;
        *l = nl;
        return 0;
}

int strv_push(char ***l, const char *s) { return strv_consume(l, strdup(s)); }

int strv_pushf(char ***l, const char *fmt, ...) {
        va_list ap;
        char *s = NULL;
        va_start(ap, fmt);
        int r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0) return -ENOMEM;
        return strv_consume(l, s);
}

bool strv_contains(char *const *l, const char *s) {
        if (!l) return false;
        for (; *l; l++)
                if (streq(*l, s)) return true;
        return false;
}

char **strv_copy(char *const *l) {
        char **n = calloc(strv_length(l) + 1, sizeof(char *));
        if (!n) return NULL;
        size_t i = 0;
        if (l)
                for (; l[i]; i++)
                        if (!(n[i] = strdup(l[i]))) {
                                strv_free(n);
                                return NULL;
                        }
        return n;
}

/* ---- environment arrays ---- */

const char *strv_env_get(char *const *env, const char *name) {
        size_t n = strlen(name);
        if (!env) return NULL;
        for (; *env; env++)
                if (strncmp(*env, name, n) == 0 && (*env)[n] == '=') return *env + n + 1;
        return NULL;
}

int strv_env_unset(char ***env, const char *name) {
        size_t n = strlen(name), j = 0;
        if (!*env) return 0;
        for (size_t i = 0; (*env)[i]; i++) {
                if (strncmp((*env)[i], name, n) == 0 && (*env)[i][n] == '=') {
                        free((*env)[i]);
                        continue;
                }
                (*env)[j++] = (*env)[i];
        }
        (*env)[j] = NULL;
        return 0;
}

int strv_env_set(char ***env, const char *name, const char *value) {
        strv_env_unset(env, name);
        return strv_pushf(env, "%s=%s", name, value);
}
