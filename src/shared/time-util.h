#pragma once
/* Clocks in milliseconds, and the ISO-8601 time stamps of the task records
 * and the wire. */

#include <stdint.h>

/* Wall clock, milliseconds since the epoch. */
uint64_t now_ms(void);
/* Monotonic clock, milliseconds. */
uint64_t mono_ms(void);
/* Format epoch milliseconds as ISO-8601 UTC with milliseconds and Z
 * ("2026-11-30T13:35:06.026Z"), JavaScript's Date#toISOString. Returns buf,
 * which holds >= 32 bytes. */
char *format_iso(uint64_t ms, char buf[static 32]);
/* Parse exactly that format back into epoch milliseconds; -EINVAL if s does
 * not match it. */
int parse_iso(const char *s, uint64_t *ret_ms);
