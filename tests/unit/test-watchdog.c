/* The watcher (watchdog.h WatchState) over a real log
 * file, driven with its own clock: budgets, the pre-output ceiling, what
 * counts as activity and as parseable, classification of complete lines and
 * of the carry, incremental reads, truncation, over-long lines, errors. */

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "unit.h"
#include "util.h"
#include "run/watchdog.h"

static const WatchdogLimits lim = {.no_output_ms = 500, .post_output_ms = 1500, .pre_output_max_ms = 1200};

static char *dir, *log_path;

static void setup(void) {
        dir = tf_tmpdir_new("tf-watchdog");
        log_path = tf_path(dir, "log.ndjson");
}

static void teardown(void) {
        free(log_path);
        dir = tf_tmpdir_free(dir);
}

static void append(const char *s, size_t n) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, s, n), (ssize_t) n);
        close(fd);
}
#define APPEND(s) append(s, strlen(s))

typedef struct hit {
        int r;
        char *reason, *detail;
} hit;

static hit tick(WatchState *w, const char *prefix, uint64_t now) {
        hit h = {0};
        h.r = watch_tick(w, log_path, &lim, prefix, prefix ? prefix : "opencode", now, &h.reason, &h.detail);
        ck_assert_int_ge(h.r, 0);
        return h;
}

static void hit_done(hit *h) {
        free(h->reason);
        free(h->detail);
}

static void assert_hit(WatchState *w, const char *prefix, uint64_t now, const char *reason, const char *detail) {
        hit h = tick(w, prefix, now);
        ck_assert_msg(h.r == 1, "no hit at %llu ms, want %s", (unsigned long long) now, reason);
        ck_assert_str_eq(h.reason, reason);
        if (detail) ck_assert_str_eq(h.detail, detail);
        hit_done(&h);
}

static void assert_alive(WatchState *w, const char *prefix, uint64_t now) {
        hit h = tick(w, prefix, now);
        ck_assert_msg(h.r == 0, "hit at %llu ms: %s (%s)", (unsigned long long) now, h.reason, h.detail);
        hit_done(&h);
}

START_TEST(dead_spawn_without_a_log) {
        WatchState w;
        ck_assert_int_eq(watch_state_init(&w, 1000), 0);
        assert_alive(&w, NULL, 1000);
        assert_alive(&w, NULL, 1499); /* ENOENT: retried, no error */
        assert_hit(&w, NULL, 1500, "no_output_timeout_dead_spawn", "no output for 500ms (pre-output timeout)");
        watch_state_done(&w);
}
END_TEST

START_TEST(raw_noise_resets_the_clock_until_the_ceiling) {
        WatchState w;
        ck_assert_int_eq(watch_state_init(&w, 0), 0);
        uint64_t now = 0;
        for (; now < 1100; now += 100) {
                APPEND("noise on stderr\n");
                assert_alive(&w, NULL, now);
        }
        ck_assert(!w.output_seen);
        APPEND("noise\n");
        assert_hit(&w, NULL, 1200, "no_output_timeout_dead_spawn",
                   "no parseable event within 1200ms despite continued raw log growth (pre-output ceiling)");
        watch_state_done(&w);
}
END_TEST

START_TEST(silence_after_noise_fires) {
        WatchState w;
        ck_assert_int_eq(watch_state_init(&w, 0), 0);
        APPEND("noise\n");
        assert_alive(&w, NULL, 300);
        assert_alive(&w, NULL, 799);
        assert_hit(&w, NULL, 800, "no_output_timeout_dead_spawn", "no output for 500ms (pre-output timeout)");
        watch_state_done(&w);
}
END_TEST

START_TEST(first_json_line_switches_to_the_post_output_budget) {
        WatchState w;
        ck_assert_int_eq(watch_state_init(&w, 0), 0);
        APPEND("{\"type\":\"step_start\"}\n");
        assert_alive(&w, NULL, 100);
        ck_assert(w.output_seen);
        /* past the pre-output budget and the ceiling: neither applies now */
        assert_alive(&w, NULL, 1599);
        assert_hit(&w, NULL, 1600, "no_output_timeout_stalled", "no output for 1500ms (post-output timeout)");
        watch_state_done(&w);
}
END_TEST

/* A JSON fragment in the carry is activity but not parseable (it is not a
 * complete line); the line completing it is. */
START_TEST(partial_json_is_activity_not_output) {
        WatchState w;
        ck_assert_int_eq(watch_state_init(&w, 0), 0);
        APPEND("{\"type\":\"step_");
        assert_alive(&w, NULL, 400);
        ck_assert(!w.output_seen);
        assert_alive(&w, NULL, 899);
        APPEND("start\"}\n");
        assert_alive(&w, NULL, 900);
        ck_assert(w.output_seen);
        ck_assert_uint_eq(w.carry_len, 0);
        watch_state_done(&w);
}
END_TEST

/* One byte per tick, no newline, forever: alive (any new byte counts). */
START_TEST(one_byte_per_tick_stays_alive) {
        WatchState w;
        ck_assert_int_eq(watch_state_init(&w, 0), 0);
        APPEND("{\"type\":\"step_start\"}\n");
        assert_alive(&w, NULL, 10);
        uint64_t now = 10;
        for (int i = 0; i < 200; i++) {
                now += 1499;
                APPEND(".");
                assert_alive(&w, NULL, now);
        }
        ck_assert_uint_eq(w.carry_len, 200);
        /* and then silence: stalled */
        assert_hit(&w, NULL, now + 1500, "no_output_timeout_stalled", NULL);
        watch_state_done(&w);
}
END_TEST

START_TEST(error_events_and_raw_lines_are_classified) {
        WatchState w;
        ck_assert_int_eq(watch_state_init(&w, 0), 0);
        /* text events are never scanned */
        APPEND("{\"type\":\"text\",\"part\":{\"text\":\"429 rate limit quota billing unauthorized\"}}\n");
        assert_alive(&w, NULL, 50);
        /* an error event split across two writes is classified once complete */
        APPEND("{\"type\":\"error\",\"message\":\"rate_limit_exceeded: ");
        assert_alive(&w, NULL, 100);
        APPEND("please retry after 60s\"}\n");
        assert_hit(&w, NULL, 150, "rate_limited", "rate_limit_exceeded: please retry after 60s");
        watch_state_done(&w);
        unlink(log_path);

        ck_assert_int_eq(watch_state_init(&w, 0), 0);
        /* pi's prefix; the unmatched structured form */
        APPEND("{\"type\":\"error\",\"error\":{\"name\":\"pi_error\",\"data\":{\"message\":\"boom\"}}}\n");
        assert_hit(&w, "pi", 50, "pi_pi_error", "boom");
        watch_state_done(&w);
}
END_TEST

START_TEST(raw_carry_is_classified_json_carry_is_not) {
        WatchState w;
        ck_assert_int_eq(watch_state_init(&w, 0), 0);
        /* a raw stderr line without its '\n' yet */
        APPEND("Error: 402 Payment Required");
        assert_hit(&w, "pi", 50, "pi_payment_required", "Error: 402 Payment Required");
        watch_state_done(&w);
        unlink(log_path);

        ck_assert_int_eq(watch_state_init(&w, 0), 0);
        /* a JSON-looking carry waits for its end */
        APPEND("  {\"type\":\"error\",\"message\":\"rate limit");
        assert_alive(&w, NULL, 50);
        APPEND("\"}\n");
        assert_hit(&w, NULL, 100, "rate_limited", "rate limit");
        watch_state_done(&w);
}
END_TEST

/* A long carry is not rescanned every tick; its line is classified when it ends. */
START_TEST(long_carry_is_classified_when_its_line_ends) {
        WatchState w;
        ck_assert_int_eq(watch_state_init(&w, 0), 0);
        size_t n = WATCHDOG_CARRY_CLASSIFY_MAX + 1;
        char *buf = malloc(n);
        memset(buf, 'x', n);
        append(buf, n);
        free(buf);
        APPEND(" rate limit");
        assert_alive(&w, NULL, 50);
        APPEND(" reached\n");
        hit h = tick(&w, NULL, 100);
        ck_assert_int_eq(h.r, 1);
        ck_assert_str_eq(h.reason, "rate_limited");
        hit_done(&h);
        watch_state_done(&w);
}
END_TEST

START_TEST(false_positives) {
        WatchState w;
        ck_assert_int_eq(watch_state_init(&w, 0), 0);
        APPEND("401 tests passed, 0 failed\n");
        APPEND("{\"type\":\"tool_use\",\"part\":{\"state\":{\"output\":\"HTTP 429 Too Many Requests\"}}}\n");
        assert_alive(&w, NULL, 50);
        watch_state_done(&w);
}
END_TEST

/* Each tick reads only what was appended since the last one, at most
 * WATCHDOG_READ_MAX; a shorter file (truncated, replaced) starts over. */
START_TEST(incremental_reads_and_truncation) {
        WatchState w;
        ck_assert_int_eq(watch_state_init(&w, 0), 0);
        size_t big = WATCHDOG_READ_MAX + 4096;
        char *buf = malloc(big);
        memset(buf, 'x', big);
        for (size_t i = 99; i < big; i += 100) buf[i] = '\n';
        append(buf, big);
        free(buf);
        assert_alive(&w, NULL, 10);
        ck_assert_uint_eq(w.bytes_read, WATCHDOG_READ_MAX);
        assert_alive(&w, NULL, 20);
        ck_assert_uint_eq(w.bytes_read, big);
        assert_alive(&w, NULL, 30); /* no growth: nothing read */
        ck_assert_uint_eq(w.bytes_read, big);
        ck_assert_int_eq(truncate(log_path, 0), 0);
        APPEND("{\"type\":\"error\",\"message\":\"quota\"}\n");
        assert_hit(&w, NULL, 40, "rate_limited", "quota");
        watch_state_done(&w);
}
END_TEST

/* A line longer than WATCHDOG_LINE_MAX is not held: dropped up to its '\n',
 * its bytes still activity; the next line is classified. */
START_TEST(over_long_line_is_dropped) {
        WatchState w;
        ck_assert_int_eq(watch_state_init(&w, 0), 0);
        size_t chunk = (size_t) 1 << 20;
        char *buf = malloc(chunk);
        memset(buf, 'y', chunk);
        APPEND("{\"type\":\"step_start\"}\n"); /* the post-output budget: 1.5 s */
        uint64_t now = 0;
        for (size_t done = 0; done <= WATCHDOG_LINE_MAX + chunk; done += chunk) {
                append(buf, chunk);
                now += 400;
                assert_alive(&w, NULL, now);
                ck_assert_uint_le(w.carry_len, WATCHDOG_LINE_MAX);
        }
        free(buf);
        ck_assert(w.skipping);
        APPEND("rate limit?\nToo Many Requests\n");
        assert_hit(&w, NULL, now + 100, "rate_limited", "Too Many Requests");
        watch_state_done(&w);
}
END_TEST

START_TEST(read_error) {
        WatchState w;
        ck_assert_int_eq(watch_state_init(&w, 0), 0);
        ck_assert_int_eq(mkdir(log_path, 0700), 0);
        hit h = tick(&w, NULL, 10);
        ck_assert_int_eq(h.r, 1);
        ck_assert_str_eq(h.reason, "watchdog_log_read_error");
        ck_assert_ptr_nonnull(strstr(h.detail, "not a regular file"));
        hit_done(&h);
        rmdir(log_path);
        /* a symlink is never followed */
        ck_assert_int_eq(symlink("/etc/passwd", log_path), 0);
        h = tick(&w, NULL, 20);
        ck_assert_int_eq(h.r, 1);
        ck_assert_str_eq(h.reason, "watchdog_log_read_error");
        hit_done(&h);
        watch_state_done(&w);
}
END_TEST

/* The daemon out of descriptors is not a log read error: the tick is
 * skipped, the next one reads what it missed. */
START_TEST(out_of_fds_is_retried) {
        WatchState w;
        ck_assert_int_eq(watch_state_init(&w, 0), 0);
        APPEND("{\"type\":\"step_start\"}\n");
        struct rlimit saved, low;
        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
        int fds[4096];
        size_t n = 0;
        low = saved;
        low.rlim_cur = 64;
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
        for (int fd; n < ELEMENTSOF(fds) && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fds[n++] = fd;
        ck_assert_int_eq(errno, EMFILE);
        assert_alive(&w, NULL, 100);
        ck_assert_uint_eq(w.bytes_read, 0);
        for (size_t i = 0; i < n; i++) close(fds[i]);
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &saved), 0);
        assert_alive(&w, NULL, 200);
        ck_assert(w.output_seen);
        watch_state_done(&w);
}
END_TEST

TF_MAIN("watchdog", "watch", setup, teardown, 60, dead_spawn_without_a_log,
        raw_noise_resets_the_clock_until_the_ceiling, silence_after_noise_fires,
        first_json_line_switches_to_the_post_output_budget, partial_json_is_activity_not_output,
        one_byte_per_tick_stays_alive, error_events_and_raw_lines_are_classified,
        raw_carry_is_classified_json_carry_is_not, false_positives, long_carry_is_classified_when_its_line_ends,
        incremental_reads_and_truncation, over_long_line_is_dropped, read_error, out_of_fds_is_retried)
