/* Benchmark: how fast the pieces on a task's hot paths process a worker's
 * output. Prints figures; asserts nothing about time (speed goals live here,
 * never in tests).
 *   - the pi normalizer (the shim runs it on every stdout line),
 *   - log_summarize_file (task.result, settlement),
 *   - log_classify_file (settlement).
 * Usage: bench-logparse [MiB of log, default 64] */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "executor.h"
#include "logparse.h"
#include "util.h"

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
        double mib = argc > 1 ? atof(argv[1]) : 64;
        if (mib <= 0) mib = 64;
        const executor *pi = executor_find("pi");
        if (!pi) return 1;
        const char *delta = "{\"type\":\"message_update\",\"assistantMessageEvent\":{\"type\":\"text_delta\",\"contentIndex\":0,"
                            "\"delta\":\"Some streamed words of an answer, about a line long.\"},\"message\":{\"role\":"
                            "\"assistant\",\"responseId\":\"chatcmpl-bench-0001\"}}";
        const char *end = "{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"stopReason\":\"stop\","
                          "\"responseId\":\"chatcmpl-bench-0001\",\"usage\":{\"input\":100,\"output\":5,\"cacheRead\":0,"
                          "\"cacheWrite\":0,\"totalTokens\":105,\"cost\":{\"total\":0.00011}}}}";
        char path[] = "/var/tmp/tf-bench-XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0) return 1;
        size_t target = (size_t) (mib * 1024 * 1024), written = 0, lines = 0;
        normalizer *n = pi->normalizer_new();
        double t0 = now_s();
        while (written < target) {
                char **out = NULL;
                const char *in = (lines % 100 == 99) ? end : delta;
                pi->normalize_line(n, in, strlen(in), true, &out);
                for (char **l = out; l && *l; l++) {
                        size_t len = strlen(*l);
                        loop_write(fd, *l, len);
                        loop_write(fd, "\n", 1);
                        written += len + 1;
                }
                strv_free(out);
                lines++;
        }
        double t1 = now_s();
        pi->normalizer_free(n);
        close(fd);
        printf("pi normalizer:      %8.1f MiB of log in %.3f s  = %7.1f MiB/s (%zu input lines, %.0f lines/s)\n",
               (double) written / 1048576, t1 - t0, (double) written / 1048576 / (t1 - t0), lines,
               (double) lines / (t1 - t0));

        log_summary s = {0};
        t0 = now_s();
        int r = log_summarize_file(path, NULL, &s);
        t1 = now_s();
        printf("log_summarize_file: %8.1f MiB in %.3f s = %7.1f MiB/s (r=%d, message %zu bytes)\n",
               (double) written / 1048576, t1 - t0, (double) written / 1048576 / (t1 - t0), r,
               s.message ? strlen(s.message) : 0);
        log_summary_done(&s);

        char *reason = NULL, *detail = NULL;
        t0 = now_s();
        r = log_classify_file(path, pi->failure_prefix, pi->structured_prefix, &reason, &detail);
        t1 = now_s();
        printf("log_classify_file:  %8.1f MiB in %.3f s = %7.1f MiB/s (r=%d)\n", (double) written / 1048576, t1 - t0,
               (double) written / 1048576 / (t1 - t0), r);
        free(reason);
        free(detail);
        unlink(path);
        return 0;
}
