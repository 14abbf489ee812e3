#pragma once
/* String vectors: NULL-terminated arrays of malloc'd strings, NULL being the
 * empty vector; and environment arrays, string vectors of "NAME=value"
 * entries (environ(7)). Errors are -ENOMEM. */

#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

/* Free every string and the array; NULL is a no-op. */
void strv_free(char **l);
static inline void strv_freep(char ***l) { strv_free(*l); }
#define _cleanup_strv_free_ _cleanup_(strv_freep)

/* Number of entries (0 for NULL). */
size_t strv_length(char *const *l);
/* Append a copy of s; *l may be NULL. -ENOMEM. */
int strv_push(char ***l, const char *s);
/* Append s, taking ownership (freed on failure; NULL s is -ENOMEM, for
 * strv_consume(&l, strdup(x))). */
int strv_consume(char ***l, char *s);
/* Append a printf-formatted string. -ENOMEM. */
int strv_pushf(char ***l, const char *fmt, ...) _printf_(2, 3);
bool strv_contains(char *const *l, const char *s);
/* A deep copy (NULL l: an empty vector); NULL on ENOMEM. */
char **strv_copy(char *const *l);

/* The value of the first NAME=value entry of env, NULL if none (or env is
 * NULL). Borrowed from env. */
const char *strv_env_get(char *const *env, const char *name);
/* Set or replace NAME=value (every earlier NAME= entry goes; the new one is
 * appended). -ENOMEM. */
int strv_env_set(char ***env, const char *name, const char *value);
/* Remove every NAME= entry. Always 0. */
int strv_env_unset(char ***env, const char *name);
