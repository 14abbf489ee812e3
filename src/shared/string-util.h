#pragma once
/* Formatted and quoted strings, and the value of a hex digit. */

#include "macro.h"

/* asprintf that returns the string (malloc'd), NULL on ENOMEM. */
char *strdup_printf(const char *fmt, ...) _printf_(1, 2);
/* Put a formatted message into *reason (freeing what it held) and return
 * r, a -errno; -ENOMEM when the message cannot be made. The loaders'
 * "this input is wrong" exit (config.c, settings.c, env-file.c). */
int set_error(char **reason, int r, const char *fmt, ...) _printf_(3, 4);
/* POSIX shell single-quoting: it's → 'it'\''s'. malloc'd, NULL on ENOMEM. */
char *shell_quote(const char *s);
/* The value (0..15) of hex digit c, either case; -EINVAL for any other byte. */
int hex_digit_value(int c);
