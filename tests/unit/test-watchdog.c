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
#include "run/watchdog.h"

static const WatchdogLimits lim = {.no_output_ms = 500, .post_output_ms = 1500, .pre_output_max_ms = 1200};

static char *dir, *log_path;
/* the case's watcher, started at 0 ms */
static WatchState w;

static void setup(void) {
        dir = tf_tmpdir_new("tf-watchdog");
        log_path = tf_path(dir, "log.ndjson");
        ck_assert_int_eq(watch_state_init(&w, 0), 0);
}

static void teardown(void) {
        watch_state_done(&w);
        free(log_path);
        dir = tf_tmpdir_free(dir);
}

/* A new watcher started at start_ms, over a log not written yet. */
static void restart(uint64_t start_ms) {
        watch_state_done(&w);
        (void) unlink(log_path);
        ck_assert_int_eq(watch_state_init(&w, start_ms), 0);
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

static hit tick(const char *prefix, uint64_t now) {
        hit h = {0};
        h.r = watch_tick(&w, log_path, &lim, prefix, prefix ? prefix : "opencode", now, &h.reason, &h.detail);
        ck_assert_int_ge(h.r, 0);
        return h;
}

static void hit_done(hit *h) {
        free(h->reason);
        free(h->detail);
}

static void assert_hit(const char *prefix, uint64_t now, const char *reason, const char *detail) {
        hit h = tick(prefix, now);
        ck_assert_msg(h.r == 1, "no hit at %llu ms, want %s", (unsigned long long) now, reason);
        ck_assert_str_eq(h.reason, reason);
        if (detail) ck_assert_str_eq(h.detail, detail);
        hit_done(&h);
}

static void assert_alive(const char *prefix, uint64_t now) {
        hit h = tick(prefix, now);
        ck_assert_msg(h.r == 0, "hit at %llu ms: %s (%s)", (unsigned long long) now, h.reason, h.detail);
        hit_done(&h);
}

START_TEST(dead_spawn_without_a_log) {
        restart(1000);
        assert_alive(NULL, 1000);
        assert_alive(NULL, 1499); /* ENOENT: retried, no error */
        assert_hit(NULL, 1500, "no_output_timeout_dead_spawn", "no output for 500ms (pre-output timeout)");
}
END_TEST

START_TEST(raw_noise_resets_the_clock_until_the_ceiling) {
        uint64_t now = 0;
        for (; now < 1100; now += 100) {
                APPEND("noise on stderr\n");
                assert_alive(NULL, now);
        }
        ck_assert(!w.output_seen);
        APPEND("noise\n");
        assert_hit(NULL, 1200, "no_output_timeout_dead_spawn",
                   "no parseable event within 1200ms despite continued raw log growth (pre-output ceiling)");
}
END_TEST

START_TEST(silence_after_noise_fires) {
        APPEND("noise\n");
        assert_alive(NULL, 300);
        assert_alive(NULL, 799);
        assert_hit(NULL, 800, "no_output_timeout_dead_spawn", "no output for 500ms (pre-output timeout)");
}
END_TEST

START_TEST(first_json_line_switches_to_the_post_output_budget) {
        APPEND("{\"type\":\"step_start\"}\n");
        assert_alive(NULL, 100);
        ck_assert(w.output_seen);
        /* past the pre-output budget and the ceiling: neither applies now */
        assert_alive(NULL, 1599);
        assert_hit(NULL, 1600, "no_output_timeout_stalled", "no output for 1500ms (post-output timeout)");
}
END_TEST

/* A JSON fragment in the carry is activity but not parseable (it is not a
 * complete line); the line completing it is. */
START_TEST(partial_json_is_activity_not_output) {
        APPEND("{\"type\":\"step_");
        assert_alive(NULL, 400);
        ck_assert(!w.output_seen);
        assert_alive(NULL, 899);
        APPEND("start\"}\n");
        assert_alive(NULL, 900);
        ck_assert(w.output_seen);
        ck_assert_uint_eq(w.carry_len, 0);
}
END_TEST

/* One byte per tick, no newline, forever: alive (any new byte counts). */
START_TEST(one_byte_per_tick_stays_alive) {
        APPEND("{\"type\":\"step_start\"}\n");
        assert_alive(NULL, 10);
        uint64_t now = 10;
        for (int i = 0; i < 200; i++) {
                now += 1499;
                APPEND(".");
                assert_alive(NULL, now);
        }
        ck_assert_uint_eq(w.carry_len, 200);
        /* and then silence: stalled */
        assert_hit(NULL, now + 1500, "no_output_timeout_stalled", NULL);
}
END_TEST

START_TEST(error_events_and_raw_lines_are_classified) {
        /* text events are never scanned */
        APPEND("{\"type\":\"text\",\"part\":{\"text\":\"429 rate limit quota billing unauthorized\"}}\n");
        assert_alive(NULL, 50);
        /* an error event split across two writes is classified once complete */
        APPEND("{\"type\":\"error\",\"message\":\"rate_limit_exceeded: ");
        assert_alive(NULL, 100);
        APPEND("please retry after 60s\"}\n");
        assert_hit(NULL, 150, "rate_limited", "rate_limit_exceeded: please retry after 60s");

        restart(0);
        /* pi's prefix; the unmatched structured form */
        APPEND("{\"type\":\"error\",\"error\":{\"name\":\"pi_error\",\"data\":{\"message\":\"boom\"}}}\n");
        assert_hit("pi", 50, "pi_pi_error", "boom");
}
END_TEST

START_TEST(raw_carry_is_classified_json_carry_is_not) {
        /* a raw stderr line without its '\n' yet */
        APPEND("Error: 402 Payment Required");
        assert_hit("pi", 50, "pi_payment_required", "Error: 402 Payment Required");

        restart(0);
        /* a JSON-looking carry waits for its end */
        APPEND("  {\"type\":\"error\",\"message\":\"rate limit");
        assert_alive(NULL, 50);
        APPEND("\"}\n");
        assert_hit(NULL, 100, "rate_limited", "rate limit");
}
END_TEST

/* A long carry is not rescanned every tick; its line is classified when it ends. */
START_TEST(long_carry_is_classified_when_its_line_ends) {
        size_t n = WATCHDOG_CARRY_CLASSIFY_MAX + 1;
        char *buf = malloc(n);
        memset(buf, 'x', n);
        append(buf, n);
        free(buf);
        APPEND(" rate limit");
        assert_alive(NULL, 50);
        APPEND(" reached\n");
        assert_hit(NULL, 100, "rate_limited", NULL);
}
END_TEST

START_TEST(false_positives) {
        APPEND("401 tests passed, 0 failed\n");
        APPEND("{\"type\":\"tool_use\",\"part\":{\"state\":{\"output\":\"HTTP 429 Too Many Requests\"}}}\n");
        assert_alive(NULL, 50);
}
END_TEST

/* Each tick reads only what was appended since the last one, at most
 * WATCHDOG_READ_MAX; a shorter file (truncated, replaced) starts over. */
START_TEST(incremental_reads_and_truncation) {
        size_t big = WATCHDOG_READ_MAX + 4096;
        char *buf = malloc(big);
        memset(buf, 'x', big);
        for (size_t i = 99; i < big; i += 100) buf[i] = '\n';
        append(buf, big);
        free(buf);
        assert_alive(NULL, 10);
        ck_assert_uint_eq(w.bytes_read, WATCHDOG_READ_MAX);
        assert_alive(NULL, 20);
        ck_assert_uint_eq(w.bytes_read, big);
        assert_alive(NULL, 30); /* no growth: nothing read */
        ck_assert_uint_eq(w.bytes_read, big);
        /* shrunk: the shim cut the log's middle to its budget (log-pipe.h);
         * the read goes on at the new end, the line cut there skipped */
        ck_assert_int_eq(truncate(log_path, 1000), 0);
        APPEND("tail of a cut line");
        assert_alive(NULL, 40);
        ck_assert_uint_eq(w.bytes_read, 1000 + 18);
        ck_assert(w.skipping);
        APPEND(" and its end\n{\"type\":\"error\",\"message\":\"quota\"}\n");
        assert_hit(NULL, 50, "rate_limited", "quota");
}
END_TEST

/* A line longer than WATCHDOG_LINE_MAX is not held: dropped up to its '\n',
 * its bytes still activity; the next line is classified. */
START_TEST(over_long_line_is_dropped) {
        size_t chunk = (size_t) 1 << 20;
        char *buf = malloc(chunk);
        memset(buf, 'y', chunk);
        APPEND("{\"type\":\"step_start\"}\n"); /* the post-output budget: 1.5 s */
        uint64_t now = 0;
        for (size_t done = 0; done <= WATCHDOG_LINE_MAX + chunk; done += chunk) {
                append(buf, chunk);
                now += 400;
                assert_alive(NULL, now);
                ck_assert_uint_le(w.carry_len, WATCHDOG_LINE_MAX);
        }
        free(buf);
        ck_assert(w.skipping);
        APPEND("rate limit?\nToo Many Requests\n");
        assert_hit(NULL, now + 100, "rate_limited", "Too Many Requests");
}
END_TEST

START_TEST(read_error) {
        ck_assert_int_eq(mkdir(log_path, 0700), 0);
        hit h = tick(NULL, 10);
        ck_assert_int_eq(h.r, 1);
        ck_assert_str_eq(h.reason, "watchdog_log_read_error");
        ck_assert_ptr_nonnull(strstr(h.detail, "not a regular file"));
        hit_done(&h);
        rmdir(log_path);
        /* a symlink is never followed */
        ck_assert_int_eq(symlink("/etc/passwd", log_path), 0);
        assert_hit(NULL, 20, "watchdog_log_read_error", NULL);
}
END_TEST

/* The daemon out of descriptors is not a log read error: the tick is
 * skipped, the next one reads what it missed. */
START_TEST(out_of_fds_is_retried) {
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
        assert_alive(NULL, 100);
        ck_assert_uint_eq(w.bytes_read, 0);
        for (size_t i = 0; i < n; i++) close(fds[i]);
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &saved), 0);
        assert_alive(NULL, 200);
        ck_assert(w.output_seen);
}
END_TEST

TF_MAIN("watchdog", "watch", setup, teardown, 60, dead_spawn_without_a_log,
        raw_noise_resets_the_clock_until_the_ceiling, silence_after_noise_fires,
        first_json_line_switches_to_the_post_output_budget, partial_json_is_activity_not_output,
        one_byte_per_tick_stays_alive, error_events_and_raw_lines_are_classified,
        raw_carry_is_classified_json_carry_is_not, false_positives, long_carry_is_classified_when_its_line_ends,
        incremental_reads_and_truncation, over_long_line_is_dropped, read_error, out_of_fds_is_retried)
