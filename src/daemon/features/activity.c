/* Activity: what a task is doing, in one line (activity.h says the rules). */

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "features/activity.h"
#include "core/jobs.h"
#include "core/manager.h"
#include "protocol-keys.h"
#include "features/summary.h"
#include "core/task.h"
#include "core/task-table.h"
#include "json-util.h"
#include "logparse.h"
#include "utf8.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

#define FFFD "\xEF\xBF\xBD"

/* ---- text ---- */

char *activity_snapshot(const char *head, size_t head_len, const char *tail, size_t tail_len) {
        _cleanup_free_ char *h = utf8_sanitize(head, head_len);
        if (!h) return NULL;
        if (!tail) return TAKE_PTR(h);
        _cleanup_free_ char *t = utf8_sanitize(tail, tail_len);
        if (!t) return NULL;
        size_t hl = strlen(h);
        if (hl >= 3 && memcmp(h + hl - 3, FFFD, 3) == 0) h[hl - 3] = 0;
        const char *tp = startswith(t, FFFD) ? t + 3 : t;
        return strdup_printf("%s\n%s", h, tp);
}

int activity_read_snapshot(const char *path, char **ret, uint64_t *ret_size) {
        *ret = NULL;
        *ret_size = 0;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) {
                if (errno != ENOENT) return -errno;
                *ret = strdup("");
                return *ret ? 0 : -ENOMEM;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) return -errno;
        if (!S_ISREG(st.st_mode)) return -EBADF;
        uint64_t size = (uint64_t) st.st_size;
        size_t head_len = size <= ACTIVITY_SNAPSHOT_MAX ? (size_t) size : ACTIVITY_SNAPSHOT_HALF;
        _cleanup_free_ char *head = malloc(head_len + 1), *tail = NULL;
        if (!head) return -ENOMEM;
        ssize_t n = pread(fd, head, head_len, 0);
        if (n < 0) return -errno;
        head_len = (size_t) n;
        size_t tail_len = 0;
        if (size > ACTIVITY_SNAPSHOT_MAX) {
                tail = malloc(ACTIVITY_SNAPSHOT_HALF + 1);
                if (!tail) return -ENOMEM;
                n = pread(fd, tail, ACTIVITY_SNAPSHOT_HALF, (off_t) (size - ACTIVITY_SNAPSHOT_HALF));
                if (n < 0) return -errno;
                tail_len = (size_t) n;
        }
        *ret = activity_snapshot(head, head_len, tail, tail_len);
        if (!*ret) return -ENOMEM;
        *ret_size = size;
        return 0;
}

char *activity_narration(const char *snapshot) {
        char *out = NULL;
        if (log_narration_parse_style(snapshot, strlen(snapshot), &log_narration_activity, &out) < 0) return NULL;
        /* the first 4000 code points */
        size_t o = strlen(out), cps = utf8_codepoints(out, o);
        if (cps > ACTIVITY_MAX_CODEPOINTS) out[utf8_tail_offset(out, o, cps - ACTIVITY_MAX_CODEPOINTS)] = 0;
        return out;
}

/* Byte length of the code point at p (NUL-terminated; 1 for a byte that
 * starts none). */
static size_t seq_len(const char *p) {
        size_t l = utf8_decode(p, strnlen(p, 4)).len;
        return l ? l : 1;
}

/* JavaScript's \s beyond ASCII: U+00A0, U+1680, U+2000–U+200A, U+2028,
 * U+2029, U+202F, U+205F, U+3000, U+FEFF. Its byte length, 0 if none. */
static size_t unicode_space(const unsigned char *s) {
        if (s[0] == 0xC2 && s[1] == 0xA0) return 2;
        if (s[0] == 0xE1 && s[1] == 0x9A && s[2] == 0x80) return 3;
        if (s[0] == 0xE2 && s[1] == 0x80 && ((s[2] >= 0x80 && s[2] <= 0x8A) || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF))
                return 3;
        if (s[0] == 0xE2 && s[1] == 0x81 && s[2] == 0x9F) return 3;
        if (s[0] == 0xE3 && s[1] == 0x80 && s[2] == 0x80) return 3;
        if (s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF) return 3;
        return 0;
}

char *activity_sanitize(const char *in) {
        _cleanup_free_ char *s = utf8_sanitize(in, strlen(in));
        if (!s) return NULL;
        size_t len = strlen(s);
        char *out = malloc(len + 1);
        if (!out) return NULL;
        size_t o = 0, cps = 0;
        bool pending_space = false;
        const unsigned char *p = (const unsigned char *) s;
        while (*p && cps < ACTIVITY_MAX_CODEPOINTS) {
                if (p[0] == 0x1B && p[1] == '[') {
                        /* CSI: ESC [ parameter bytes 0x30–0x3F, intermediates 0x20–0x2F, a final 0x40–0x7E */
                        const unsigned char *q = p + 2;
                        while (*q >= 0x30 && *q <= 0x3F) q++;
                        while (*q >= 0x20 && *q <= 0x2F) q++;
                        if (*q >= 0x40 && *q <= 0x7E) {
                                p = q + 1;
                                continue;
                        }
                }
                size_t sp = unicode_space(p);
                if (*p < 32 || *p == 127 || *p == ' ' || sp) {
                        pending_space = o > 0;
                        p += sp ? sp : 1;
                        continue;
                }
                if (pending_space) {
                        out[o++] = ' ';
                        cps++;
                        pending_space = false;
                        if (cps >= ACTIVITY_MAX_CODEPOINTS) break;
                }
                size_t l = seq_len((const char *) p);
                for (size_t i = 0; i < l && p[i]; i++) out[o++] = (char) p[i];
                p += l;
                cps++;
        }
        out[o] = 0;
        return out;
}

char *activity_local(Task *t, uint64_t *ret_watermark) {
        *ret_watermark = 0;
        _cleanup_free_ char *snap = NULL, *narration = NULL;
        if (t->rec.log_path && activity_read_snapshot(t->rec.log_path, &snap, ret_watermark) >= 0 && snap)
                narration = activity_narration(snap);
        const char *src = !isempty(narration) ? narration : !isempty(t->rec.prompt_preview) ? t->rec.prompt_preview
                                                                                        : strempty(t->rec.prompt);
        char *a = activity_sanitize(src);
        if (a && !*a) {
                free(a);
                a = strdup_printf("Task %s", task_status_to_string(t->rec.status));
        }
        return a;
}

/* ---- the summary model check ---- */

typedef struct ModelWaiter {
        activity_model_fn done;
        void *userdata;
        struct ModelWaiter *next;
} ModelWaiter;

/* A model-backed activity summary under way: a report summary of source
 * (summary.c) whose result message becomes the "true" variant of a
 * task.activity event. */
typedef struct PendingSummary {
        struct PendingSummary *next;
        char *source_id;
        char *summary_id;        /* NULL until summary_request has queued the task */
        uint64_t watermark;      /* the source log's size when scheduled */
        int status;              /* the source's TaskStatus when scheduled */
        uint64_t started_ms;     /* monotonic */
        bool rerun;              /* the source changed status meanwhile: summarize again when this one ends */
} PendingSummary;

typedef struct Activity {
        Manager *m;
        const ActivitySink *sink; /* where task.activity events go (events.c), NULL: nowhere */
        PendingSummary *pending;
        sd_event_source *timer;
        /* the model check */
        int model_available;     /* 1 yes, 0 no, -1 unknown */
        uint64_t model_checked_ms;
        bool model_checking;
        ModelWaiter *waiters;
} Activity;

static bool sink_want_summaries(Manager *m) {
        Activity *a = m->activity;
        return a && a->sink && a->sink->want_summaries(m);
}

static unsigned sink_subscribers(Manager *m) {
        Activity *a = m->activity;
        return a && a->sink ? a->sink->subscribers(m) : 0;
}

static uint64_t sink_next_sequence(Manager *m) {
        Activity *a = m->activity;
        return a && a->sink ? a->sink->next_sequence(m) : 0;
}

static void sink_broadcast(Manager *m, Task *t, json_object *ev) {
        Activity *a = m->activity;
        if (a && a->sink) a->sink->broadcast(m, t, ev);
}

static json_object *model_check_run(void *userdata, int *error) {
        const char *model = userdata;
        /* 10 s: the job's child dies of SIGALRM, opencode with it (PDEATHSIG) */
        alarm(ACTIVITY_MODEL_CHECK_TIMEOUT_S);
        char *argv[] = {(char *) "opencode", (char *) "models", NULL};
        run_result rr = {0};
        int r = run_command(argv, NULL, NULL, 4 * 1024 * 1024, -1, &rr);
        bool found = false;
        if (r >= 0 && rr.exit_code == 0 && rr.out) {
                char *save = NULL;
                for (char *line = strtok_r(rr.out, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save)) {
                        while (*line == ' ' || *line == '\t' || *line == '\r') line++;
                        size_t l = strlen(line);
                        while (l && (line[l - 1] == ' ' || line[l - 1] == '\t' || line[l - 1] == '\r')) line[--l] = 0;
                        found = streq(line, model);
                }
        }
        run_result_done(&rr);
        json_object *o = json_object_new_object();
        json_add_bool(o, "available", found);
        return o;
}

static void model_check_done(Manager *m, void *userdata, json_object *result, int error) {
        Activity *a = m->activity;
        if (!a) return;
        a->model_checking = false;
        a->model_available = json_get_bool(result, "available", false) ? 1 : 0;
        a->model_checked_ms = mono_ms();
        ModelWaiter *w = a->waiters;
        a->waiters = NULL;
        while (w) {
                ModelWaiter *next = w->next;
                w->done(m, w->userdata, a->model_available, m->settings.summary_model);
                free(w);
                w = next;
        }
}

int activity_model_check(Manager *m, activity_model_fn done, void *userdata) {
        Activity *a = m->activity;
        if (!a) return -ENODEV;
        if (a->model_available >= 0 && mono_ms() - a->model_checked_ms < ACTIVITY_MODEL_CACHE_MS) {
                done(m, userdata, a->model_available, m->settings.summary_model);
                return 0;
        }
        ModelWaiter *w = calloc(1, sizeof *w);
        if (!w) return -ENOMEM;
        *w = (ModelWaiter) {done, userdata, a->waiters};
        a->waiters = w;
        if (a->model_checking) return 0; /* coalesced */
        int r = job_start(m, model_check_run, model_check_done, m->settings.summary_model);
        if (r < 0) {
                a->waiters = w->next;
                free(w);
                return r;
        }
        a->model_checking = true;
        return 0;
}

/* ---- refreshes and task.activity events ---- */

static bool summaries_on(Manager *m) {
        return m->settings.activity_summaries_enabled && sink_want_summaries(m);
}

static json_object *variant(bool include_summary, const char *activity, uint64_t watermark, const char *error) {
        json_object *v = json_object_new_object();
        if (!v) return NULL;
        json_add_bool(v, PK_includeSummary, include_summary);
        if (error) {
                json_add_bool(v, PK_summaryFailed, true);
                json_add_string(v, PK_summaryError, error);
        } else {
                json_add_string(v, PK_activity, activity);
                json_add_int(v, PK_outputWatermark, (int64_t) watermark);
        }
        return v;
}

static void pending_free(PendingSummary *p) {
        if (!p) return;
        free(p->source_id);
        free(p->summary_id);
        free(p);
}

static PendingSummary *pending_for_source(Activity *a, const char *id) {
        for (PendingSummary *p = a->pending; p; p = p->next)
                if (streq(p->source_id, id)) return p;
        return NULL;
}

static void summarize(Manager *m, Task *t, uint64_t watermark);

static void pending_remove(Activity *a, PendingSummary *p) {
        for (PendingSummary **pp = &a->pending; *pp; pp = &(*pp)->next)
                if (*pp == p) {
                        *pp = p->next;
                        pending_free(p);
                        return;
                }
}

/* The task.activity event of source t with only the "true" variant (the
 * model-backed one): text, or summaryFailed with error. Dropped when it was
 * scheduled while running and the status changed since: a summary of the
 * running task must not arrive after its final state. */
static void emit_summary_variant(Manager *m, PendingSummary *p, const char *text, const char *error) {
        Task *t = manager_find_task(m, p->source_id);
        if (!t || (p->status == (int) TASK_RUNNING && (int) t->rec.status != p->status)) return;
        _cleanup_json_ json_object *ev = json_object_new_object();
        json_object *variants = json_object_new_object();
        if (!ev || !variants) {
                json_object_put(variants);
                return;
        }
        json_add(variants, "true", variant(true, text, p->watermark, text ? NULL : (error ? error : "unknown error")));
        char iso[32];
        json_add_int(ev, PK_sequence, (int64_t) sink_next_sequence(m));
        json_add_string(ev, PK_type, "task.activity");
        json_add_string(ev, PK_taskId, t->id);
        json_add_string(ev, PK_directory, t->rec.directory);
        json_add_string(ev, PK_originSessionId, t->rec.origin_session_id);
        json_add_string(ev, PK_status, task_status_to_string((TaskStatus) p->status));
        json_add_null(ev, PK_previousStatus);
        json_add_string(ev, PK_occurredAt, format_iso(now_ms(), iso));
        json_add(ev, PK_activityVariants, variants);
        sink_broadcast(m, t, ev);
}

/* p is done with; a summary the source outran (it changed status while p
 * ran, so p's event was dropped) is started again for the source as it is
 * now. */
static void pending_finish(Manager *m, PendingSummary *p) {
        Activity *a = m->activity;
        bool rerun = p->rerun;
        _cleanup_free_ char *id = rerun ? strdup(p->source_id) : NULL;
        uint64_t watermark = p->watermark;
        pending_remove(a, p);
        Task *t = id ? manager_find_task(m, id) : NULL;
        if (t && summaries_on(m)) summarize(m, t, watermark);
}

/* summary_request's answer: the summary task is queued, or it failed. */
static void on_summary_started(Manager *m, const SummaryOutcome *o, void *userdata) {
        Activity *a = m->activity;
        PendingSummary *p = userdata;
        if (!a) return;
        if (!o->task) {
                /* the first line of "error: ...\nhelp: ..." */
                const char *e = o->error ? o->error : o->empty ? "no model text observed yet" : "the summary could not be started";
                if (startswith(e, "error: ")) e += strlen("error: ");
                _cleanup_free_ char *line = strndup(e, strcspn(e, "\n"));
                emit_summary_variant(m, p, NULL, line ? line : e);
                pending_finish(m, p);
                return;
        }
        p->summary_id = strdup(o->task->id);
        if (!p->summary_id) pending_remove(a, p);
}

/* A summary task settled: its result message is the activity summary. */
static void summary_settled(Manager *m, Task *st) {
        Activity *a = m->activity;
        if (!a) return;
        for (PendingSummary *p = a->pending; p; p = p->next) {
                if (!streq_ptr(p->summary_id, st->id)) continue;
                log_summary ls = {0};
                _cleanup_free_ char *error = NULL;
                if (st->rec.status != TASK_DONE)
                        error = strdup_printf("summary task %s ended %s%s%s", st->id, task_status_to_string(st->rec.status),
                                              st->rec.failure_detail ? ": " : "", strempty(st->rec.failure_detail));
                else if (log_summarize_file(st->rec.log_path, NULL, &ls) < 0 || isempty(ls.message))
                        error = strdup_printf("summary task %s gave no text", st->id);
                if (error) emit_summary_variant(m, p, NULL, error);
                else {
                        /* the first 4000 code points, sanitized like the local text */
                        _cleanup_free_ char *text = activity_sanitize(ls.message);
                        emit_summary_variant(m, p, text, text ? NULL : "out of memory");
                }
                log_summary_done(&ls);
                pending_finish(m, p);
                return;
        }
}

/* Start the model-backed summary of t unless one is under way. */
static void summarize(Manager *m, Task *t, uint64_t watermark) {
        Activity *a = m->activity;
        if (!a) return;
        PendingSummary *q = pending_for_source(a, t->id);
        if (q) {
                /* one at a time per task; a newer status gets its own after it */
                if (q->status != (int) t->rec.status) {
                        q->rerun = true;
                        q->watermark = watermark;
                }
                return;
        }
        PendingSummary *p = calloc(1, sizeof *p);
        if (!p || !(p->source_id = strdup(t->id))) {
                pending_free(p);
                return;
        }
        p->watermark = watermark;
        p->status = (int) t->rec.status;
        p->started_ms = mono_ms();
        p->next = a->pending;
        a->pending = p;
        SummaryRequest req = {.source = t, .max_words = m->settings.activity_max_words, .prompt_fallback = true};
        int r = summary_request(m, &req, on_summary_started, p);
        if (r < 0) {
                emit_summary_variant(m, p, NULL, "the summary could not be started");
                pending_remove(a, p);
        }
}

/* Summaries not settled within ACTIVITY_SUMMARY_POLL_MS (45 s) are reported
 * failed; the summary task itself runs on. */
static void expire_pending(Manager *m) {
        Activity *a = m->activity;
        uint64_t now = mono_ms();
        for (PendingSummary *p = a ? a->pending : NULL, *next; p; p = next) {
                next = p->next;
                if (now - p->started_ms < ACTIVITY_SUMMARY_POLL_MS) continue;
                emit_summary_variant(m, p, NULL, "the activity summary did not finish within 45 s");
                pending_finish(m, p);
        }
}

void activity_refresh(Manager *m, Task *t, bool forced) {
        if (task_kind_info(t->kind)->internal || sink_subscribers(m) == 0) return;
        uint64_t now = mono_ms();
        struct stat st;
        uint64_t size = t->rec.log_path && stat(t->rec.log_path, &st) == 0 ? (uint64_t) st.st_size : 0;
        if (!forced) {
                if (t->rec.status == TASK_RUNNING && size < t->activity_watermark + ACTIVITY_MIN_GROWTH) return;
                if (t->activity_at_ms && now - t->activity_at_ms < m->settings.summarizer_timeout_ms) return;
        }
        bool with_summary = summaries_on(m);
        /* cache key [id, status, watermark, summaryModel, maxWords, includeSummary]:
         * the id, model and maxWords are fixed per task and daemon */
        if (t->activity_key_set && t->activity_key_status == (int) t->rec.status && t->activity_watermark == size &&
            t->activity_key_summary == with_summary)
                return;
        uint64_t watermark = 0;
        _cleanup_free_ char *local = activity_local(t, &watermark);
        if (!local) return;
        t->activity_key_set = true;
        t->activity_key_status = (int) t->rec.status;
        t->activity_key_summary = with_summary;
        t->activity_watermark = watermark;
        t->activity_at_ms = now;

        char iso[32];
        format_iso(now_ms(), iso);
        _cleanup_json_ json_object *ev = json_object_new_object();
        json_object *variants = json_object_new_object();
        if (!ev || !variants) {
                json_object_put(variants);
                return;
        }
        json_add(variants, "false", variant(false, local, watermark, NULL));
        if (with_summary)
                /* the "true" variant follows in its own event once the
                 * model-backed summary is written (summary_settled) */
                summarize(m, t, watermark);
        else
                /* summaries off (TASKFERRY_ACTIVITY_SUMMARIES=0): a summaries
                 * subscriber gets the local text, marked as such */
                json_add(variants, "true", variant(false, local, watermark, NULL));
        json_add_int(ev, PK_sequence, (int64_t) sink_next_sequence(m));
        json_add_string(ev, PK_type, "task.activity");
        json_add_string(ev, PK_taskId, t->id);
        json_add_string(ev, PK_directory, t->rec.directory);
        json_add_string(ev, PK_originSessionId, t->rec.origin_session_id);
        json_add_string(ev, PK_status, task_status_to_string(t->rec.status));
        json_add_null(ev, PK_previousStatus);
        json_add_string(ev, PK_occurredAt, iso);
        json_add(ev, PK_activityVariants, variants);
        sink_broadcast(m, t, ev);
}

void activity_task_transition(Task *t, TaskStatus old_status) {
        Manager *m = t->m;
        TaskStatus s = t->rec.status;
        /* forced: spawn, settlement (a queued cancel is one) */
        if (task_kind_info(t->kind)->internal) {
                if (t->kind == TASK_KIND_SUMMARY && !task_is_active(t)) summary_settled(m, t);
                return;
        }
        if ((old_status == TASK_QUEUED && s == TASK_RUNNING) || !task_is_active(t)) activity_refresh(m, t, true);
}

static int tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        expire_pending(m);
        if (sink_subscribers(m) > 0)
                for (size_t i = 0; i < m->n_tasks; i++)
                        if (m->tasks[i]->rec.status == TASK_RUNNING) activity_refresh(m, m->tasks[i], false);
        sd_event_source_set_time_relative(s, m->settings.watchdog_poll_ms * 1000);
        return 0;
}

int activity_init(Manager *m) {
        if (m->activity) return 0;
        Activity *a = calloc(1, sizeof *a);
        if (!a) return -ENOMEM;
        a->m = m;
        a->model_available = -1;
        m->activity = a;
        if (m->event) {
                uint64_t poll = m->settings.watchdog_poll_ms ? m->settings.watchdog_poll_ms : 2000;
                int r = sd_event_add_time_relative(m->event, &a->timer, CLOCK_MONOTONIC, poll * 1000, 0, tick, m);
                if (r < 0) return r;
                sd_event_source_set_enabled(a->timer, SD_EVENT_ON);
        }
        return 0;
}

void activity_free(Manager *m) {
        Activity *a = m->activity;
        if (!a) return;
        a->timer = sd_event_source_disable_unref(a->timer);
        while (a->pending) {
                PendingSummary *p = a->pending;
                a->pending = p->next;
                pending_free(p);
        }
        while (a->waiters) {
                ModelWaiter *w = a->waiters;
                a->waiters = w->next;
                free(w);
        }
        free(a);
        m->activity = NULL;
}

/* ---- task.summary {mode:"activity"} ---- */

json_object *activity_summary_result(Task *t) {
        uint64_t watermark = 0;
        _cleanup_free_ char *local = activity_local(t, &watermark);
        if (!local) return NULL;
        json_object *o = json_object_new_object();
        if (!o) return NULL;
        json_add_string(o, PK_sourceTaskId, t->id);
        json_add_string(o, PK_sourceStatus, task_status_to_string(t->rec.status));
        json_add_string(o, PK_activity, local);
        json_add_int(o, PK_outputWatermark, (int64_t) watermark);
        return o;
}

void activity_set_sink(Manager *m, const ActivitySink *sink) {
        if (m->activity) m->activity->sink = sink;
}
