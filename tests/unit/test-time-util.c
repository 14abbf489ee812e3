/* time-util.c: the clocks in milliseconds and the ISO-8601 stamps of the
 * wire (Date#toISOString): formatting, and parsing exactly that form back. */

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "time-util.h"
#include "unit.h"

START_TEST(clocks) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t wall = now_ms();
        ck_assert_uint_ge(wall, (uint64_t) ts.tv_sec * 1000);
        ck_assert_uint_le(wall, (uint64_t) ts.tv_sec * 1000 + 5000);
        uint64_t a = mono_ms();
        struct timespec nap = {0, 20 * 1000 * 1000};
        nanosleep(&nap, NULL);
        uint64_t b = mono_ms();
        ck_assert_uint_ge(b - a, 19);
        ck_assert_uint_lt(b - a, 5000);
}
END_TEST

static const struct {
        uint64_t ms;
        const char *iso;
} stamps[] = {
        {0, "1970-01-01T00:00:00.000Z"},
        {1, "1970-01-01T00:00:00.001Z"},
        {999, "1970-01-01T00:00:00.999Z"},
        {1000, "1970-01-01T00:00:01.000Z"},
        {1796045706026ULL, "2026-11-30T13:35:06.026Z"},
        {951782400000ULL, "2000-02-29T00:00:00.000Z"},
        {253402300799999ULL, "9999-12-31T23:59:59.999Z"},
};

START_TEST(format_and_parse_round_trip) {
        char buf[32];
        memset(buf, 'x', sizeof buf);
        ck_assert_ptr_eq(format_iso(stamps[_i].ms, buf), buf);
        ck_assert_str_eq(buf, stamps[_i].iso);
        uint64_t back = 42;
        ck_assert_int_eq(parse_iso(stamps[_i].iso, &back), 0);
        ck_assert_uint_eq(back, stamps[_i].ms);
}
END_TEST

START_TEST(now_round_trips) {
        char buf[32];
        uint64_t now = now_ms(), back = 0;
        format_iso(now, buf);
        ck_assert_uint_eq(strlen(buf), 24);
        ck_assert_int_eq(parse_iso(buf, &back), 0);
        ck_assert_uint_eq(back, now);
}
END_TEST

static const char *const not_iso[] = {
        "",
        "2026-11-30",
        "2026-11-30T13:35:06Z",       /* no milliseconds */
        "2026-11-30T13:35:06.026",    /* no Z */
        "2026-11-30T13:35:06.026Zx",
        "2026-11-30T13:35:06.026+00:00",
        "2026-11-30 13:35:06.026Z",
        "garbage",
        /* sscanf's %d would take these; the form has fixed widths, no sign,
         * no blanks, and only dates that exist */
        "2026-1-30T13:35:06.026Z",
        "2026-11-30T1:35:06.026Z",
        "2026-11-30T13:35:06.26Z",
        " 2026-11-30T13:35:06.026Z",
        "+2026-11-30T13:35:06.026Z",
        "2026-+1-30T13:35:06.026Z",
        "2026-11-30T13:35:06.-26Z",
        "2026-13-01T00:00:00.000Z",
        "2026-02-30T00:00:00.000Z",
        "2026-11-30T24:00:00.000Z",
        "2026-11-30T13:60:00.000Z",
        "1969-12-31T23:59:58.000Z",   /* before the epoch: no unsigned ms */
        "1960-01-01T00:00:00.000Z",
};

START_TEST(parse_refuses) {
        uint64_t v = 7;
        ck_assert_msg(parse_iso(not_iso[_i], &v) == -EINVAL, "accepted %s", not_iso[_i]);
        ck_assert_uint_eq(v, 7);
}
END_TEST

int main(void) {
        Suite *s = suite_create("time-util");
        TCase *tc = tf_tcase(s, "time", NULL, NULL, 0, TF_TESTS(clocks, now_round_trips));
        TF_LOOP(tc, format_and_parse_round_trip, stamps);
        TF_LOOP(tc, parse_refuses, not_iso);
        return tf_run_suite(s);
}
