/* Clocks and ISO-8601 time stamps (see time-util.h). */

#include "time-util.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "macro.h"

uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

uint64_t mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

char *format_iso(uint64_t ms, char buf[static 32]) {
        time_t t = (time_t) (ms / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
        snprintf(buf, 32, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", (tm.tm_year + 1900) % 10000, (tm.tm_mon + 1) % 100,
                 tm.tm_mday % 100, tm.tm_hour % 100, tm.tm_min % 100, tm.tm_sec % 100, (unsigned) (ms % 1000));
        return buf;
}

int parse_iso(const char *s, uint64_t *ret_ms) {
        struct tm tm = {0};
        unsigned msec = 0;
        int n = 0;
        if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%3uZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &msec, &n) != 7 || s[n] != 0)
                return -EINVAL;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        time_t t = timegm(&tm);
        if (t < 0) return -EINVAL; /* -1 is timegm's error; before the epoch has no unsigned ms */
        uint64_t ms = (uint64_t) t * 1000 + msec;
        /* sscanf takes signs, blanks and short fields, timegm normalizes
         * month 13 or February 30: only what formats back to s is that form */
        char buf[32];
        if (!streq(format_iso(ms, buf), s)) return -EINVAL;
        *ret_ms = ms;
        return 0;
}
