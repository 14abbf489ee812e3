/* The readers of a task's canonical NDJSON log (what a worker's stdout
 * became; a hostile worker writes it): the result summary, the failure
 * classifier (whole file, line by line with the watchdog's kept
 * classifier, with each executor's prefixes), the boot-failure reader and
 * the narrations. Checked: the per-line classifier agrees with the one-shot
 * one; a reason is a non-empty string and a detail is capped; the summary's
 * strings are C strings (no embedded NUL counts beyond their length). */

#include <string.h>
#include <unistd.h>

#include "executor.h"
#include "fuzz.h"
#include "logparse.h"

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

        char *reason = NULL, *detail = NULL;
        r = log_classify_file(path, e->failure_prefix, e->structured_prefix, &reason, &detail);
        fuzz_check(r >= 0 || r == -ENOMEM);
        if (r > 0) check_reason(reason, detail);
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
