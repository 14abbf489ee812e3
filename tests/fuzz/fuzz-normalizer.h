#pragma once
/* One NDJSON normalizer under fuzz (fuzz-executor-pi.c,
 * fuzz-executor-opencode.c): the input is a worker CLI's stdout, split into
 * lines as the shim's log pipe splits it (the last line may lack its
 * newline), each line through normalize_line, then normalize_finish.
 * Checked: every canonical line it writes holds no newline (one line of the
 * log each: a worker must not forge log lines) and no NUL byte; a line
 * that is not JSON passes through as it was; the log it makes reads back
 * through the result summary and the failure classifier. */

#include <string.h>
#include <unistd.h>

#include "executor.h"
#include "fuzz.h"
#include "json-util.h"
#include "logparse.h"
#include "strv.h"

typedef struct normalize_run {
        const executor *e;
        normalizer *n;
        char **out;   /* every canonical line, in order */
} normalize_run;

static void normalize_one(void *userdata, const char *line, size_t len, bool newline) {
        normalize_run *run = userdata;
        size_t before = strv_length(run->out);
        int r = run->e->normalize_line(run->n, line, len, newline, &run->out);
        fuzz_check(r == 0 || r == -ENOMEM);
        size_t after = strv_length(run->out);
        json_object *j = NULL;
        bool is_json = json_parse_strict(line, len, &j) == 0;
        json_object_put(j);
        if (!is_json && !log_line_is_blank(line, len) && !memchr(line, 0, len)) {
                /* not JSON: verbatim, one line */
                fuzz_check(after == before + 1);
                fuzz_check(strlen(run->out[before]) == len && memcmp(run->out[before], line, len) == 0);
        }
}

static inline int fuzz_normalizer(const char *id, const uint8_t *data, size_t size) {
        normalize_run run = {.e = executor_find(id)};
        fuzz_check(run.e);
        run.n = run.e->normalizer_new();
        fuzz_check(run.n);
        fuzz_lines(data, size, normalize_one, &run);
        if (run.e->normalize_finish) fuzz_check(run.e->normalize_finish(run.n, &run.out) == 0);
        run.e->normalizer_free(run.n);

        /* the log as the shim writes it: each canonical line and its '\n' */
        size_t total = 0;
        for (char **l = run.out; l && *l; l++) {
                fuzz_check(!strchr(*l, '\n'));
                total += strlen(*l) + 1;
        }
        char *log = malloc(total + 1), *p = log;
        fuzz_check(log);
        for (char **l = run.out; l && *l; l++) {
                size_t n = strlen(*l);
                memcpy(p, *l, n);
                p[n] = '\n';
                p += n + 1;
        }
        int fd = fuzz_memfd(log, total);
        fuzz_check(fd >= 0);
        char path[32];
        fuzz_fd_path(fd, path);
        log_summary s = {};
        int r = log_summarize_file(path, NULL, &s);
        fuzz_check(r == 0 || r == -ENOMEM);
        if (r == 0) log_summary_done(&s);
        char *reason = NULL, *detail = NULL;
        r = log_classify_file(path, run.e->failure_prefix, run.e->structured_prefix, &reason, &detail);
        fuzz_check(r >= 0 || r == -ENOMEM);
        if (r > 0) fuzz_check(reason && *reason && detail);
        free(reason);
        free(detail);
        close(fd);
        free(log);
        strv_free(run.out);
        return 0;
}
