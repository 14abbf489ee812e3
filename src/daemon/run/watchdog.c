/* The watchdog: a running task's log read as it grows, classified line by
 * line, and its silence measured (watchdog.h). Owns Task.watchdog. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "executor.h"
#include "logparse.h"
#include "macro.h"
#include "core/manager.h"
#include "core/task.h"
#include "log.h"
#include "string-util.h"
#include "time-util.h"
#include "run/watchdog.h"

/* ---- the watcher, no loop ---- */

int watch_state_init(WatchState *w, uint64_t now_ms) {
        *w = (WatchState) { .armed_at = now_ms, .last_activity = now_ms };
        return log_classifier_new(&w->cls);
}

void watch_state_done(WatchState *w) {
        free(w->carry);
        log_classifier_free(w->cls);
        *w = (WatchState) {};
}

static void watch_reset_read(WatchState *w) {
        w->bytes_read = 0;
        w->carry_len = 0;
        w->skipping = false;
}

/* Append p[0..n) (no '\n' in it) to the carry, or drop it while skipping
 * an over-long line. -ENOMEM. */
static int carry_append(WatchState *w, const char *p, size_t n) {
        if (w->skipping || n == 0) return 0;
        if (w->carry_len + n > WATCHDOG_LINE_MAX) {
                w->skipping = true;
                w->carry_len = 0;
                return 0;
        }
        char *c = realloc(w->carry, w->carry_len + n);
        if (!c) return -ENOMEM;
        memcpy(c + w->carry_len, p, n);
        w->carry = c;
        w->carry_len += n;
        return 0;
}

/* Classify one line; 1 on a hit (reason/detail set), 0, -ENOMEM. Sets
 * *json_seen when the line parsed as JSON. */
static int classify(WatchState *w, const char *line, size_t len, const char *prefix, const char *structured_prefix,
                    bool *json_seen, char **ret_reason, char **ret_detail) {
        bool is_json = false;
        int r = log_classifier_line(w->cls, line, len, prefix, structured_prefix, &is_json, ret_reason, ret_detail);
        if (is_json) *json_seen = true;
        return r;
}

static bool starts_with_brace(const char *s, size_t len) {
        size_t i = 0;
        while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n' || s[i] == '\v' || s[i] == '\f'))
                i++;
        return i < len && s[i] == '{';
}

/* Read what the log grew by since the last tick and classify its lines:
 * 1 on a hit, 0, -ENOMEM. */
static int watch_read(WatchState *w, const char *path, const char *prefix, const char *structured_prefix,
                      uint64_t now_ms, char **ret_reason, char **ret_detail) {
        /* the log lives in the state dir, out of every sandbox's reach; still,
         * never follow a link or block on a FIFO there */
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) {
                if (errno == ENOENT) return 0; /* not created yet: the next tick */
                /* the daemon out of descriptors or memory is not the log's
                 * fault (nor the worker's): the next tick reads it */
                if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == EINTR || errno == EAGAIN) return 0;
                *ret_reason = strdup("watchdog_log_read_error");
                *ret_detail = strdup_printf("%s: %s", path, strerror(errno));
                return *ret_reason && *ret_detail ? 1 : -ENOMEM;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) return 0; /* stat failed: skip this read */
        if (!S_ISREG(st.st_mode)) {
                *ret_reason = strdup("watchdog_log_read_error");
                *ret_detail = strdup_printf("%s: not a regular file", path);
                return *ret_reason && *ret_detail ? 1 : -ENOMEM;
        }
        uint64_t size = (uint64_t) st.st_size;
        if (size < w->bytes_read) {
                /* the shim cut the log's middle to keep it to its budget
                 * (log-pipe.h): what is left was read before it moved, so the
                 * read goes on at the new end, a line cut there skipped; the
                 * cut itself means the worker wrote */
                watch_reset_read(w);
                w->bytes_read = size;
                char last = '\n';
                if (size > 0 && pread(fd, &last, 1, (off_t) size - 1) != 1) last = '\n';
                w->skipping = last != '\n';
                w->last_activity = now_ms;
                return 0;
        }
        if (size == w->bytes_read) return 0;
        size_t want = size - w->bytes_read > WATCHDOG_READ_MAX ? WATCHDOG_READ_MAX : (size_t) (size - w->bytes_read);
        _cleanup_free_ char *buf = malloc(want);
        if (!buf) return -ENOMEM;
        size_t got = 0;
        while (got < want) {
                ssize_t n = pread(fd, buf + got, want - got, (off_t) (w->bytes_read + got));
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) {
                        *ret_reason = strdup("watchdog_log_read_error");
                        *ret_detail = strdup_printf("%s: %s", path, strerror(errno));
                        return *ret_reason && *ret_detail ? 1 : -ENOMEM;
                }
                if (n == 0) break;
                got += (size_t) n;
        }
        if (got == 0) return 0;
        w->bytes_read += got;
        w->last_activity = now_ms; /* any new byte is activity, JSON or not, complete or not */

        bool json_seen = false;
        int r = 0;
        const char *p = buf, *end = buf + got;
        while (p < end && r == 0) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                if (!nl) break;
                if (w->skipping) {
                        w->skipping = false; /* the over-long line ends here, dropped */
                } else if (w->carry_len > 0) {
                        int k = carry_append(w, p, (size_t) (nl - p));
                        if (k < 0) return k;
                        if (!w->skipping)
                                r = classify(w, w->carry, w->carry_len, prefix, structured_prefix, &json_seen,
                                             ret_reason, ret_detail);
                        w->skipping = false;
                        w->carry_len = 0;
                } else if ((size_t) (nl - p) <= WATCHDOG_LINE_MAX)
                        r = classify(w, p, (size_t) (nl - p), prefix, structured_prefix, &json_seen, ret_reason,
                                     ret_detail);
                p = nl + 1;
        }
        if (r != 0) return r; /* a hit ends the tick (or -ENOMEM) */
        if (p < end) {
                int k = carry_append(w, p, (size_t) (end - p));
                if (k < 0) return k;
        }
        /* a carry that cannot be the start of a JSON event is classified
         * too (a raw stderr line without its '\n' yet) — up to
         * WATCHDOG_CARRY_CLASSIFY_MAX: a worker adding one byte a tick to an
         * endless line must not cost a scan of all of it every tick (the
         * line is classified whole when it ends) */
        if (w->carry_len > 0 && w->carry_len <= WATCHDOG_CARRY_CLASSIFY_MAX && !w->skipping &&
            !starts_with_brace(w->carry, w->carry_len)) {
                bool ignored = false;
                r = classify(w, w->carry, w->carry_len, prefix, structured_prefix, &ignored, ret_reason, ret_detail);
                if (r != 0) return r;
        }
        if (json_seen) w->output_seen = true; /* the budget becomes the post-output one */
        return 0;
}

int watch_tick(WatchState *w, const char *path, const WatchdogLimits *lim, const char *prefix,
               const char *structured_prefix, uint64_t now_ms, char **ret_reason, char **ret_detail) {
        _cleanup_free_ char *reason = NULL, *detail = NULL;
        int r = watch_read(w, path, prefix, structured_prefix, now_ms, &reason, &detail);
        if (r < 0) return r;
        if (r == 0 && !w->output_seen && now_ms - w->armed_at >= lim->pre_output_max_ms) {
                /* the pre-output ceiling: no JSON line since armed, however
                 * much raw output */
                reason = strdup("no_output_timeout_dead_spawn");
                detail = strdup_printf("no parseable event within %" PRIu64
                                       "ms despite continued raw log growth (pre-output ceiling)",
                                       lim->pre_output_max_ms);
                r = 1;
        }
        uint64_t budget = w->output_seen ? lim->post_output_ms : lim->no_output_ms;
        if (r == 0 && now_ms - w->last_activity >= budget) {
                /* silence longer than the budget of its phase */
                reason = strdup(w->output_seen ? "no_output_timeout_stalled" : "no_output_timeout_dead_spawn");
                detail = strdup_printf("no output for %" PRIu64 "ms (%s timeout)", budget,
                                       w->output_seen ? "post-output" : "pre-output");
                r = 1;
        }
        if (r == 0) return 0;
        if (!reason || !detail) return -ENOMEM;
        *ret_reason = TAKE_PTR(reason);
        *ret_detail = TAKE_PTR(detail);
        return 1;
}

/* ---- the daemon's watchdog ---- */

typedef struct Watchdog {
        Task *t;
        sd_event_source *timer;
        WatchState st;
        watchdog_fire_fn fire;
} Watchdog;

static uint64_t loop_now_ms(Manager *m) {
        uint64_t now = 0;
        (void) sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        return now / 1000ULL;
}

static WatchdogLimits manager_limits(const Manager *m) {
        return (WatchdogLimits) {
                .no_output_ms = m->settings.no_output_timeout_ms,
                .post_output_ms = m->settings.post_output_no_output_timeout_ms,
                .pre_output_max_ms = m->settings.pre_output_max_ms,
        };
}

static int watchdog_tick_cb(sd_event_source *s, uint64_t usec, void *userdata) {
        Watchdog *wd = userdata;
        Task *t = wd->t;
        Manager *m = t->m;
        if (t->rec.status != TASK_RUNNING || !t->rec.log_path) {
                /* a task no longer running needs no watch */
                watchdog_stop(t);
                return 0;
        }
        const executor *ex = executor_find(strempty(t->rec.executor_id));
        WatchdogLimits lim = manager_limits(m);
        /* the loop's now, not the time the tick was due: a late tick (a busy
         * loop) measures the silence it actually saw, and the next one is a
         * full interval away instead of a burst catching up */
        uint64_t now = loop_now_ms(m);
        _cleanup_free_ char *reason = NULL, *detail = NULL;
        int r = watch_tick(&wd->st, t->rec.log_path, &lim, ex ? ex->failure_prefix : NULL,
                           ex ? ex->structured_prefix : NULL, now, &reason, &detail);
        if (r < 0) log_warning("watchdog of %s: %s; trying again next tick", t->id, strerror(-r));
        if (r > 0) {
                watchdog_fire_fn fire = wd->fire;
                watchdog_stop(t); /* wd is gone */
                fire(t, reason, detail);
                return 0;
        }
        (void) sd_event_source_set_time(s, now * 1000ULL + m->settings.watchdog_poll_ms * 1000ULL);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
        return 0;
}

void watchdog_start(Task *t, watchdog_fire_fn fire) {
        Manager *m = t->m;
        if (t->watchdog) return;
        Watchdog *wd = calloc(1, sizeof *wd);
        if (!wd) {
                log_error("cannot start the watchdog of %s: out of memory", t->id);
                return;
        }
        wd->t = t;
        wd->fire = fire;
        uint64_t now = loop_now_ms(m);
        uint64_t poll_us = m->settings.watchdog_poll_ms * 1000ULL;
        /* the tick may come up to a tenth of the interval late, never more
         * (sd-event's default slack is 250 ms) */
        uint64_t accuracy = poll_us / 10 ? poll_us / 10 : 1;
        if (watch_state_init(&wd->st, now) < 0 ||
            sd_event_add_time(m->event, &wd->timer, CLOCK_MONOTONIC, now * 1000ULL + poll_us, accuracy,
                              watchdog_tick_cb, wd) < 0) {
                log_error("cannot start the watchdog of %s", t->id);
                watch_state_done(&wd->st);
                free(wd);
                return;
        }
        t->watchdog = wd;
}

void watchdog_stop(Task *t) {
        Watchdog *wd = t->watchdog;
        if (!wd) return;
        t->watchdog = NULL;
        wd->timer = sd_event_source_disable_unref(wd->timer);
        watch_state_done(&wd->st);
        free(wd);
}
