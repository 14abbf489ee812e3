/* The readers of a task's canonical NDJSON log (what a worker's stdout
 * became; a hostile worker writes it): the result summary, the failure
 * classifier (whole file, line by line with the watchdog's kept
 * classifier, with each executor's prefixes), the boot-failure reader and
 * the narrations. Checked: the per-line classifier agrees with the one-shot
 * one; a reason is a non-empty string and a detail is capped; the summary's
 * strings are C strings (no embedded NUL counts beyond their length); the
 * summary and the classification with json_scan's fast paths are the ones
 * json-c alone makes. */

#include <string.h>
#include <unistd.h>

#include "executor.h"
#include "fuzz.h"
#include "json-util.h"
#include "logparse.h"

static bool str_eq(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

static const char *tokens_text(const log_summary *s) {
        return s->tokens ? json_object_to_json_string_ext(s->tokens, JSON_C_TO_STRING_PLAIN) : NULL;
}

/* The summary with the fast paths and with json-c alone: the same. */
static void check_fast_paths(const char *path) {
        log_summary fast = {}, slow = {};
        int r1 = log_summarize_file(path, "ses_initial", &fast);
        log_summarize_use_fast_paths(false);
        int r2 = log_summarize_file(path, "ses_initial", &slow);
        log_summarize_use_fast_paths(true);
        if (r1 == 0 && r2 == 0) {
                fuzz_check(str_eq(fast.message, slow.message) && str_eq(fast.narration, slow.narration));
                fuzz_check(str_eq(fast.session_id, slow.session_id));
                fuzz_check(str_eq(tokens_text(&fast), tokens_text(&slow)));
                fuzz_check(fast.has_cost == slow.has_cost && (!fast.has_cost || fast.cost == slow.cost ||
                                                              (fast.cost != fast.cost && slow.cost != slow.cost)));
                fuzz_check(fast.has_stop == slow.has_stop && fast.has_json_line == slow.has_json_line);
        }
        if (r1 == 0) log_summary_done(&fast);
        if (r2 == 0) log_summary_done(&slow);
}

typedef struct classify_state {
        LogClassifier *lc;
        const executor *e;
        unsigned lines;
} classify_state;

static void check_reason(const char *reason, const char *detail) {
        fuzz_check(reason && *reason);
        fuzz_check(detail);
}

static void classify_one(void *userdata, const char *line, size_t len, bool newline) {
        classify_state *st = userdata;
        char *reason = NULL, *detail = NULL, *reason2 = NULL, *detail2 = NULL;
        bool json = false;
        int r = log_classifier_line(st->lc, line, len, st->e->failure_prefix, st->e->structured_prefix, &json, &reason,
                                    &detail);
        if (r > 0) check_reason(reason, detail);
        /* the one-shot classifier compiles its patterns for every call: the
         * first lines only */
        if (st->lines++ < 4) {
                int r2 = log_classify_line(line, len, st->e->failure_prefix, st->e->structured_prefix, &reason2,
                                           &detail2);
                fuzz_check(r == r2);
                if (r > 0) fuzz_check(strcmp(reason, reason2) == 0 && strcmp(detail, detail2) == 0);
        }
        free(reason);
        free(detail);
        free(reason2);
        free(detail2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const ids[] = {"opencode", "pi", "shell"};
        const executor *e = executor_find(ids[fuzz_take_byte(&data, &size) % 3]);
        fuzz_check(e);
        int fd = fuzz_memfd(data, size);
        fuzz_check(fd >= 0);
        char path[32];
        fuzz_fd_path(fd, path);

        log_summary s = {};
        int r = log_summarize_file(path, "ses_initial", &s);
        fuzz_check(r == 0 || r == -ENOMEM);
        if (r == 0) {
                fuzz_check(s.message && s.narration);
                fuzz_check(s.session_id);
                log_summary_done(&s);
        }

        check_fast_paths(path);

        char *reason = NULL, *detail = NULL;
        r = log_classify_file(path, e->failure_prefix, e->structured_prefix, &reason, &detail);
        fuzz_check(r >= 0 || r == -ENOMEM);
        if (r > 0) check_reason(reason, detail);
        char *reason_slow = NULL, *detail_slow = NULL;
        log_summarize_use_fast_paths(false);
        int r_slow = log_classify_file(path, e->failure_prefix, e->structured_prefix, &reason_slow, &detail_slow);
        log_summarize_use_fast_paths(true);
        if (r >= 0 && r_slow >= 0) fuzz_check(r == r_slow && str_eq(reason, reason_slow) && str_eq(detail, detail_slow));
        free(reason_slow);
        free(detail_slow);
        free(reason);
        free(detail);

        classify_state st = {.e = e};
        fuzz_check(log_classifier_new(&st.lc) == 0);
        fuzz_lines(data, size, classify_one, &st);
        log_classifier_free(st.lc);

        detail = NULL;
        r = log_boot_failure(path, &detail);
        fuzz_check(r >= 0 || r == -ENOMEM);
        if (r > 0) fuzz_check(detail);
        free(detail);

        char *n = NULL;
        if (log_narration_parse((const char *) data, size, &n) == 0) {
                fuzz_check(n);
                free(n);
        }
        n = NULL;
        if (log_narration_parse_style((const char *) data, size, &log_narration_activity, &n) == 0) {
                fuzz_check(n);
                free(n);
        }
        (void) log_line_is_blank((const char *) data, size);
        close(fd);
        return 0;
}
