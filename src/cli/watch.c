/* taskferry watch (watch.h). */
#include "watch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli-diff.h"
#include "cli-resolve.h"
#include "commands.h"
#include "json-util.h"
#include "protocol-keys.h"
#include "toon.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"

static bool terminal_status(const char *s) {
        return s && (streq(s, "done") || streq(s, "crashed") || streq(s, "cancelled") || streq(s, "unknown"));
}

char *watch_time_prefix(const char *iso) {
        uint64_t ms;
        if (!iso || parse_iso(iso, &ms) < 0) return NULL;
        time_t t = (time_t) (ms / 1000);
        struct tm tm;
        if (!localtime_r(&t, &tm)) return NULL;
        /* toLocaleTimeString("en-US", {hour12: false}): midnight is 24 */
        return strdup_printf("%02d:%02d:%02d", tm.tm_hour == 0 ? 24 : tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static const char *status_color(const char *s) {
        if (streq_ptr(s, "done")) return "\033[32m";
        if (streq_ptr(s, "crashed") || streq_ptr(s, "cancelled")) return "\033[31m";
        if (streq_ptr(s, "running") || streq_ptr(s, "queued")) return "\033[33m";
        return NULL;
}

/* CR/LF runs → one space. */
static char *one_line(const char *s) {
        char *out = malloc(strlen(s) + 1);
        if (!out) return NULL;
        size_t o = 0;
        for (const char *p = s; *p; p++) {
                if (*p == '\r' || *p == '\n') {
                        while (p[1] == '\r' || p[1] == '\n') p++;
                        out[o++] = ' ';
                } else
                        out[o++] = *p;
        }
        out[o] = 0;
        return out;
}

char *watch_format_line(json_object *event, bool ndjson, bool color) {
        if (ndjson) {
                size_t len;
                const char *s = json_to_line(event, &len);
                return s ? strdup(s) : NULL;
        }
        const char *type = json_get_string(event, PK_type);
        const char *task_id = json_get_string(event, PK_taskId);
        const char *status = json_get_string(event, PK_status);
        _cleanup_free_ char *time = watch_time_prefix(json_get_string(event, PK_occurredAt));
        const char *c = color ? status_color(status) : NULL;
        _cleanup_free_ char *st = c ? strdup_printf("%s%s\033[0m", c, strempty(status)) : strdup(strempty(status));
        if (!st) return NULL;
        _cleanup_free_ char *body = NULL;
        if (streq_ptr(type, "task.state")) {
                const char *prev = json_get_string(event, PK_previousStatus);
                if (prev && !streq_ptr(prev, status)) {
                        const char *pc = color ? status_color(prev) : NULL;
                        _cleanup_free_ char *ps = pc ? strdup_printf("%s%s\033[0m", pc, prev) : strdup(prev);
                        body = strdup_printf("%s %s -> %s", strempty(task_id), strempty(ps), st);
                } else
                        body = strdup_printf("%s %s", strempty(task_id), st);
        } else if (streq_ptr(type, "task.activity")) {
                /* the worker's text: a terminal (color) sees its control bytes escaped */
                if (json_get_bool(event, PK_summaryFailed, false)) {
                        const char *e = json_get_string(event, PK_summaryError);
                        _cleanup_free_ char *esc = color && e ? cli_escape_controls(e, strlen(e)) : NULL;
                        if (color && e && !esc) return NULL;
                        body = strdup_printf("%s %s: summary unavailable (%s)", strempty(task_id), st,
                                             esc ? esc : e ? e : "unknown error");
                } else {
                        _cleanup_free_ char *a = one_line(strempty(json_get_string(event, PK_activity)));
                        if (!a) return NULL;
                        if (color) {
                                char *esc = cli_escape_controls(a, strlen(a));
                                free(a);
                                if (!(a = esc)) return NULL;
                        }
                        body = strdup_printf("%s %s: %s", strempty(task_id), st, *a ? a : strempty(status));
                }
        } else
                return toon_encode(event);
        if (!body) return NULL;
        return time ? strdup_printf("%s %s", time, body) : TAKE_PTR(body);
}

static int print_line(json_object *event, bool ndjson, bool color) {
        _cleanup_free_ char *line = watch_format_line(event, ndjson, color);
        if (!line) return -ENOMEM;
        printf("%s\n", line);
        fflush(stdout);
        return 0;
}

/* --flush-interval: the latest event per task, in first-seen order. */
typedef struct Buffer {
        json_object *by_task; /* taskId → event (insertion order kept by json-c) */
} Buffer;

static int buffer_flush(Buffer *b, bool ndjson, bool color) {
        if (!b->by_task || json_object_object_length(b->by_task) == 0) return 0;
        int r = 0;
        if (ndjson) {
                char iso[32];
                format_iso(now_ms(), iso);
                _cleanup_json_ json_object *o = json_object_new_object();
                json_object *arr = json_object_new_array();
                if (!o || !arr) {
                        json_object_put(arr);
                        return -ENOMEM;
                }
                json_object_object_foreach(b->by_task, k, v) {
                        (void) k;
                        json_object_array_add(arr, json_object_get(v));
                }
                json_add_string(o, PK_type, "watch.flush");
                json_add_string(o, "timestamp", iso);
                json_add(o, "events", arr);
                size_t len;
                printf("%s\n", json_to_line(o, &len));
                fflush(stdout);
        } else {
                json_object_object_foreach(b->by_task, k, v) {
                        (void) k;
                        if ((r = print_line(v, false, color)) < 0) break;
                }
        }
        json_object_put(b->by_task);
        b->by_task = NULL;
        return r;
}

static int buffer_add(Buffer *b, json_object *event) {
        if (!b->by_task && !(b->by_task = json_object_new_object())) return -ENOMEM;
        const char *id = json_get_string(event, PK_taskId);
        /* a task seen before keeps its place: json-c replaces an existing
         * key's value where it stands */
        return json_object_object_add(b->by_task, id ? id : "", json_object_get(event)) < 0 ? -ENOMEM : 0;
}

/* Subscribe, then print events until the end (see watch.h). */
static int watch_stream(cli_context *ctx, cli_error *err) {
        const cli_args *a = ctx->args;
        const char *task_id = cli_args_string(a, PK_taskId);
        bool ndjson = streq_ptr(cli_args_string(a, "format"), "ndjson");
        bool color = isatty(STDOUT_FILENO);
        int64_t flush_ms = 0;
        bool buffered = cli_args_int(a, "flushIntervalMs", &flush_ms) && flush_ms > 0;

        _cleanup_json_ json_object *params = json_object_new_object();
        if (!params) return -ENOMEM;
        int r;
        if (cli_args_bool(a, PK_all)) r = json_add_bool(params, PK_all, true);
        else if (task_id && !cli_args_string(a, PK_directory)) r = json_add_string(params, PK_taskId, task_id);
        else {
                _cleanup_free_ char *dir = NULL;
                r = cli_workspace_directory(a, &dir, err);
                if (r < 0) return r;
                r = json_add_string(params, PK_directory, dir);
        }
        if (r < 0) return -ENOMEM;
        if (cli_args_bool(a, PK_summaries) && json_add_bool(params, PK_summaries, true) < 0) return -ENOMEM;

        _cleanup_json_ json_object *sub = NULL;
        r = cli_call(ctx, "event.subscribe", params, &sub, err);
        if (r < 0) return r;
        const char *sub_id = json_get_string(sub, PK_subscriptionId);

        if (task_id) {
                /* after subscribing (no event is missed between): settled already? */
                _cleanup_json_ json_object *sp = json_object_new_object(), *st = NULL;
                if (!sp || json_add_string(sp, PK_taskId, task_id) < 0) return -ENOMEM;
                r = cli_call(ctx, "task.status", sp, &st, err);
                if (r < 0) return r;
                if (terminal_status(json_get_string(st, PK_status))) {
                        char iso[32];
                        format_iso(now_ms(), iso);
                        _cleanup_json_ json_object *ev = json_object_new_object();
                        if (!ev) return -ENOMEM;
                        json_add_string(ev, PK_type, "task.state");
                        json_add_string(ev, PK_taskId, task_id);
                        json_add_string(ev, PK_directory, json_get_string(st, PK_directory));
                        json_add_string(ev, PK_status, json_get_string(st, PK_status));
                        json_add_null(ev, PK_previousStatus);
                        json_add_string(ev, PK_occurredAt, iso);
                        json_add_null(ev, PK_activity);
                        json_add_null(ev, PK_outputWatermark);
                        json_add_string(ev, PK_originSessionId, json_get_string(st, PK_originSessionId));
                        return print_line(ev, ndjson, color);
                }
        }

        Buffer buf = {0};
        uint64_t next_flush = buffered ? mono_ms() + (uint64_t) flush_ms : 0;
        for (;;) {
                if (*ctx->interrupted) {
                        r = buffer_flush(&buf, ndjson, color);
                        return r < 0 ? r : 0; /* Ctrl-C ends watch: exit 0 */
                }
                int timeout = 200;
                if (buffered) {
                        uint64_t now = mono_ms();
                        if (now >= next_flush) {
                                if ((r = buffer_flush(&buf, ndjson, color)) < 0) return r;
                                next_flush = now + (uint64_t) flush_ms;
                        }
                        uint64_t left = next_flush > now ? next_flush - now : 0;
                        if (left < (uint64_t) timeout) timeout = (int) left;
                }
                _cleanup_json_ json_object *frame = NULL;
                r = cli_client_next_event(&ctx->client, timeout, &frame, err);
                if (r < 0) {
                        json_object_put(buf.by_task);
                        return r;
                }
                if (r == 0) continue;
                if (!streq_ptr(json_get_string(frame, PK_subscriptionId), sub_id)) continue;
                json_object *ev = json_get_object(frame, PK_event);
                if (!ev) continue;
                if (task_id && !streq_ptr(json_get_string(ev, PK_taskId), task_id)) continue;
                bool last = task_id && terminal_status(json_get_string(ev, PK_status));
                if (buffered && !last) {
                        if ((r = buffer_add(&buf, ev)) < 0) return r;
                        continue;
                }
                if (last && (r = buffer_flush(&buf, ndjson, color)) < 0) return r;
                if ((r = print_line(ev, ndjson, color)) < 0) return r;
                if (last) return 0;
        }
}

int cli_run_watch(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        /* the events are the output, printed as they come: no value */
        (void) ret_value;
        (void) ret_raw;
        int r = watch_stream(ctx, err);
        if (r >= 0) ctx->output_done = true;
        return r;
}
