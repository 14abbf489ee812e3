/* cooldown.c: reading a provider's retry hint from a worker's output, the
 * log scan the settlement runs, and the bounds a hostile worker meets. */

#include <check.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cooldown.h"
#include "daemon.h"
#include "json-util.h"
#include "unit.h"
#include "fileio.h"
#include "macro.h"
#include "string-util.h"

#define NOW 1796046955000ULL /* 2026-11-30T13:55:55.000Z */

static uint64_t hint(const char *text) {
        uint64_t ms = 0;
        int r = cooldown_parse_hint(text, strlen(text), NOW, &ms);
        ck_assert_int_ge(r, 0);
        return r > 0 ? ms : 0;
}

/* A text and the hint parsed from it (ms after NOW). */
typedef struct HintCase {
        const char *text;
        uint64_t ms;
} HintCase;

static const HintCase hint_cases[] = {
        {"Retry-After: 3", 3000},
        {"HTTP 429 Too Many Requests; retry-after=7", 7000},
        {"{\"retry-after\":\"1\",\"server\":\"mockllm/1.0\"}", 1000},
        {"retry_after: 2.5", 2500},
        {"\"retryAfter\": 12", 12000},
        {"retry-after-ms: 1500", 1500},
        {"\"retry_after_ms\":250", 250},
        {"rate_limit_exceeded: please retry after 60s", 60000},
        {"Retry after 2 minutes", 120000},
        {"Rate limit reached. Please try again in 20s.", 20000},
        {"Please try again in 1m30s", 90000},
        {"try again in 6ms", 6},
        {"Retry-After: Mon, 30 Nov 2026 13:56:05 GMT", 10000},
        {"usage limit reached, resets at 2026-11-30T14:55:55Z", 3600000},
        {"quota resets at 2026-11-30T13:56:00.500+00:00", 5500},
        {"x-ratelimit-reset-requests: 6m0s", 360000},
        {"\"resetsAt\":1796046965", 10000},
        {"reset in 45 seconds", 45000},
        /* retry-after wins over a reset time in the same text */
        {"retry-after: 2, x-ratelimit-reset-tokens: 10m", 2000},
};

START_TEST(hint_forms) {
        const char *text = hint_cases[_i].text;
        uint64_t want = hint_cases[_i].ms;
        ck_assert_msg(hint(text) == want, "%s: got %" PRIu64 ", want %" PRIu64, text, hint(text), want);
}
END_TEST

START_TEST(no_hint) {
        static const char *const none[] = {
                "429 Rate limit reached for mock-model (mockllm): please retry later.",
                "retry after a while",
                "connection reset by peer",
                "resets at 2026-11-30T13:00:00Z", /* already past */
                "Retry-After: Mon, 30 Nov 2026 13:00:00 GMT", /* past */
                "retry-afterwards 3",
                "try again in a few minutes",
                "",
        };
        for (size_t i = 0; i < ELEMENTSOF(none); i++) ck_assert_msg(hint(none[i]) == 0, "%s", none[i]);
}
END_TEST

/* A hostile worker cannot park a provider for longer than the cap. */
START_TEST(hint_is_capped) {
        ck_assert_uint_eq(hint("Retry-After: 99999999"), COOLDOWN_MAX_MS);
        ck_assert_uint_eq(hint("Retry-After: 999999999999999999999999999"), COOLDOWN_MAX_MS);
        ck_assert_uint_eq(hint("resets at 2099-01-01T00:00:00Z"), COOLDOWN_MAX_MS);
        ck_assert_uint_eq(hint("try again in 5d"), COOLDOWN_MAX_MS);
}
END_TEST

START_TEST(reasons_that_apply) {
        ck_assert(cooldown_reason_applies("rate_limited"));
        ck_assert(cooldown_reason_applies("pi_rate_limited"));
        ck_assert(cooldown_reason_applies("payment_required"));
        ck_assert(cooldown_reason_applies("pi_payment_required"));
        ck_assert(!cooldown_reason_applies("authentication_failed"));
        ck_assert(!cooldown_reason_applies("no_output_timeout_stalled"));
        ck_assert(!cooldown_reason_applies(NULL));
}
END_TEST

static char *tmpdir;

static void setup(void) { tmpdir = tf_tmpdir_new("tf-cooldown"); }

static void teardown(void) { tmpdir = tf_tmpdir_free(tmpdir); }

static int scan(const char *content, const char *prefix, uint64_t *ms) {
        char *p = strdup_printf("%s/log.ndjson", tmpdir);
        ck_assert_int_eq(write_file_atomic(p, content, strlen(content), 0600), 0);
        int r = cooldown_scan_log(p, prefix, prefix ? "pi" : "opencode", NOW, ms);
        free(p);
        return r;
}

/* The real OpenCode 429 (tests/fixtures/real): the retry-after header in
 * the error event. The real pi 429 states no time: no cooldown. */
START_TEST(scan_real_fixtures) {
        char *oc = NULL, *pi = NULL;
        ck_assert_int_ge(read_file(TASKFERRY_FIXTURES_DIR "/real/opencode-rate_limit.stdout.ndjson", 1 << 20, &oc, NULL), 0);
        ck_assert_int_ge(read_file(TASKFERRY_FIXTURES_DIR "/real/pi-rate_limit.stdout.ndjson", 1 << 22, &pi, NULL), 0);
        uint64_t ms = 0;
        ck_assert_int_eq(scan(oc, NULL, &ms), 1);
        ck_assert_uint_eq(ms, 1000);
        ck_assert_int_eq(scan(pi, "pi", &ms), 0);
        free(oc), free(pi);
}
END_TEST

START_TEST(scan_which_lines_count) {
        uint64_t ms = 0;
        /* a raw stderr failure line with the hint, and a header line of its own */
        ck_assert_int_eq(scan("{\"type\":\"text\",\"text\":\"hi\"}\n429 Too Many Requests, retry after 3s\n", NULL, &ms), 1);
        ck_assert_uint_eq(ms, 3000);
        ck_assert_int_eq(scan("HTTP/1.1 429 Too Many Requests\nRetry-After: 4\n", NULL, &ms), 1);
        ck_assert_uint_eq(ms, 4000);
        /* the last hint wins */
        ck_assert_int_eq(scan("rate limit: retry after 9s\nrate limit: retry after 2s\n", NULL, &ms), 1);
        ck_assert_uint_eq(ms, 2000);
        /* text events are never scanned; a line that is no rate-limit or
         * payment failure does not count (an auth failure, prose) */
        ck_assert_int_eq(scan("{\"type\":\"text\",\"text\":\"rate limit! Retry-After: 100\"}\n", NULL, &ms), 0);
        ck_assert_int_eq(scan("unauthorized: try again in 10s\n", NULL, &ms), 0);
        ck_assert_int_eq(scan("the build will retry after 30s\n", NULL, &ms), 0);
        /* a payment failure with a reset time */
        ck_assert_int_eq(scan("insufficient_quota: credits reset in 5 minutes\n", NULL, &ms), 1);
        ck_assert_uint_eq(ms, 300000);
        /* missing log */
        ck_assert_int_eq(cooldown_scan_log("/nonexistent/log", NULL, NULL, NOW, &ms), 0);
}
END_TEST

/* Only the end of a large log is read, its cut first line skipped. */
START_TEST(scan_reads_only_the_tail) {
        size_t big = COOLDOWN_SCAN_BYTES * 2;
        char *s = malloc(big + 200);
        ck_assert_ptr_nonnull(s);
        strcpy(s, "rate limit: retry after 50s\n"); /* beyond the tail window */
        size_t n = strlen(s);
        while (n < big) {
                memcpy(s + n, "{\"type\":\"text\",\"text\":\"x\"}\n", 27);
                n += 27;
        }
        s[n] = 0;
        uint64_t ms = 0;
        ck_assert_int_eq(scan(s, NULL, &ms), 0);
        strcat(s, "429 too many requests; retry after 7s\n");
        ck_assert_int_eq(scan(s, NULL, &ms), 1);
        ck_assert_uint_eq(ms, 7000);
        free(s);
}
END_TEST

int main(void) {
        Suite *s = suite_create("cooldown");
        TCase *tc = tf_tcase(s, "cooldown", setup, teardown, 0, TF_TESTS(no_hint, hint_is_capped, reasons_that_apply,
                scan_real_fixtures, scan_which_lines_count, scan_reads_only_the_tail));
        TF_LOOP(tc, hint_forms, hint_cases);
        return tf_run_suite(s);
}
