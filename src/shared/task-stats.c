/* doctor --stats aggregation (see task-stats.h). */
#include "task-stats.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "protocol-keys.h"
#include "time-util.h"

#define DAY_MS (24ULL * 60 * 60 * 1000)
#define BACKLOG_MAX 20

static const char *const named_statuses[] = {PK_queued, PK_running, PK_done, PK_crashed, PK_cancelled, PK_unknown};

typedef struct Row {
        const char *id, *status, *model, *started_at, *reason;
        json_object *model_json; /* the row's model value as given (may be NULL) */
        bool has_time;
        uint64_t time_ms;
} Row;

typedef struct Counts {
        unsigned n[6]; /* named_statuses order */
        unsigned other, total;
} Counts;

static int status_index(const char *s) {
        for (size_t i = 0; i < ELEMENTSOF(named_statuses); i++)
                if (streq_ptr(s, named_statuses[i])) return (int) i;
        return -1;
}

static void count_row(Counts *c, const Row *r) {
        int i = status_index(r->status);
        if (i >= 0) c->n[i]++;
        else c->other++;
        c->total++;
}

static unsigned settled_of(const Counts *c) {
        /* total - queued - running - cancelled - unknown */
        return c->total - c->n[0] - c->n[1] - c->n[4] - c->n[5];
}

static json_object *rate_or_null(unsigned num, unsigned den) {
        return den > 0 ? json_new_number((double) num / (double) den) : NULL;
}

static json_object *mix_object(const Counts *c) {
        json_object *o = json_object_new_object();
        if (!o) return NULL;
        for (size_t i = 0; i < ELEMENTSOF(named_statuses); i++) json_add_int(o, named_statuses[i], c->n[i]);
        json_add_int(o, PK_other, c->other);
        json_add_int(o, PK_total, c->total);
        return o;
}

typedef struct Tally {
        const char *key;
        unsigned count;
} Tally;

static int tally_cmp(const void *a, const void *b) {
        const Tally *x = a, *y = b;
        if (x->count != y->count) return x->count > y->count ? -1 : 1;
        return strcmp(x->key, y->key);
}

/* Crashed rows' reasons of rows[] (those with sel[i] when sel is given), sorted. */
static Tally *reason_tally(const Row *rows, size_t n, const char *model, size_t *ret_n) {
        Tally *t = calloc(n + 1, sizeof *t);
        size_t k = 0;
        if (!t) return NULL;
        for (size_t i = 0; i < n; i++) {
                const Row *r = &rows[i];
                if (model && !streq(r->model, model)) continue;
                if (!streq_ptr(r->status, "crashed") || isempty(r->reason)) continue;
                size_t j = 0;
                while (j < k && !streq(t[j].key, r->reason)) j++;
                if (j == k) t[k++].key = r->reason;
                t[j].count++;
        }
        qsort(t, k, sizeof *t, tally_cmp);
        *ret_n = k;
        return t;
}

typedef struct ModelGroup {
        const char *model; /* "" = missing */
        Counts c;
} ModelGroup;

static int group_cmp(const void *a, const void *b) {
        const ModelGroup *x = a, *y = b;
        if (x->c.total != y->c.total) return x->c.total > y->c.total ? -1 : 1;
        bool xm = !*x->model, ym = !*y->model;
        if (xm || ym) return xm == ym ? 0 : (xm ? 1 : -1);
        return strcmp(x->model, y->model);
}

static int row_started_desc(const void *a, const void *b) {
        const Row *x = *(const Row *const *) a, *y = *(const Row *const *) b;
        return -strcmp(strempty(x->started_at), strempty(y->started_at));
}

static json_object *crash_window(const Row *rows, size_t n, uint64_t lo, uint64_t hi, bool has_hi, unsigned *ret_settled,
                                 json_object **ret_rate) {
        Counts c = {0};
        for (size_t i = 0; i < n; i++) {
                const Row *r = &rows[i];
                if (!r->has_time || r->time_ms < lo || (has_hi && r->time_ms >= hi)) continue;
                count_row(&c, r);
        }
        unsigned settled = settled_of(&c);
        *ret_settled = settled;
        *ret_rate = rate_or_null(c.n[3], settled);
        json_object *o = json_object_new_object();
        if (!o) return NULL;
        json_add(o, PK_crashRate, *ret_rate ? json_object_get(*ret_rate) : NULL);
        json_add_int(o, PK_settled, settled);
        return o;
}

json_object *task_stats_compute(json_object *rows_json, uint64_t now) {
        size_t n = rows_json && json_object_is_type(rows_json, json_type_array) ? json_object_array_length(rows_json) : 0;
        _cleanup_free_ Row *rows = calloc(n + 1, sizeof *rows);
        _cleanup_free_ ModelGroup *groups = calloc(n + 1, sizeof *groups);
        _cleanup_free_ Row **unknown = calloc(n + 1, sizeof *unknown);
        if (!rows || !groups || !unknown) return NULL;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                json_object *o = json_object_array_get_idx(rows_json, i);
                if (!json_is_object(o)) continue;
                Row *r = &rows[k++];
                r->id = json_get_string(o, PK_id);
                r->status = json_get_string(o, PK_status);
                r->model = strempty(json_get_string(o, PK_model));
                json_object_object_get_ex(o, PK_model, &r->model_json);
                r->started_at = json_get_string(o, PK_startedAt);
                r->reason = json_get_string(o, PK_failureReason);
                r->has_time = r->started_at && parse_iso(r->started_at, &r->time_ms) >= 0;
        }
        n = k;

        _cleanup_json_ json_object *out = json_object_new_object();
        if (!out) return NULL;

        /* byModel */
        size_t ng = 0;
        for (size_t i = 0; i < n; i++) {
                size_t g = 0;
                while (g < ng && !streq(groups[g].model, rows[i].model)) g++;
                if (g == ng) groups[ng++].model = rows[i].model;
                count_row(&groups[g].c, &rows[i]);
        }
        qsort(groups, ng, sizeof *groups, group_cmp);
        json_object *by_model = json_object_new_array();
        if (!by_model || json_add(out, PK_byModel, by_model) < 0) return NULL;
        for (size_t g = 0; g < ng; g++) {
                const Counts *c = &groups[g].c;
                unsigned settled = settled_of(c);
                json_object *o = json_object_new_object();
                if (!o || json_object_array_add(by_model, o) < 0) return NULL;
                json_add_string(o, PK_model, groups[g].model);
                json_add_int(o, PK_dispatches, c->total);
                json_add_int(o, PK_done, c->n[2]);
                json_add_int(o, PK_crashed, c->n[3]);
                json_add_int(o, PK_cancelled, c->n[4]);
                json_add_int(o, PK_unknown, c->n[5]);
                json_add(o, PK_doneRate, rate_or_null(c->n[2], settled));
                json_add(o, PK_crashRate, rate_or_null(c->n[3], settled));
                size_t nt = 0;
                _cleanup_free_ Tally *t = reason_tally(rows, n, groups[g].model, &nt);
                if (!t) return NULL;
                json_add_string(o, PK_dominantFailureReason, nt ? t[0].key : NULL);
        }

        /* failureReasons */
        size_t nt = 0;
        _cleanup_free_ Tally *t = reason_tally(rows, n, NULL, &nt);
        json_object *reasons = json_object_new_array();
        if (!t || !reasons || json_add(out, PK_failureReasons, reasons) < 0) return NULL;
        for (size_t i = 0; i < nt; i++) {
                json_object *o = json_object_new_object();
                if (!o || json_object_array_add(reasons, o) < 0) return NULL;
                json_add_string(o, PK_reason, t[i].key);
                json_add_int(o, PK_count, t[i].count);
        }

        /* unknownBacklog */
        size_t nu = 0;
        for (size_t i = 0; i < n; i++)
                if (streq_ptr(rows[i].status, "unknown")) unknown[nu++] = &rows[i];
        qsort(unknown, nu, sizeof *unknown, row_started_desc);
        json_object *backlog = json_object_new_object(), *btasks = json_object_new_array();
        if (!backlog || !btasks || json_add(out, PK_unknownBacklog, backlog) < 0) {
                json_object_put(btasks);
                return NULL;
        }
        json_add_int(backlog, PK_total, (int64_t) nu);
        json_add(backlog, PK_tasks, btasks);
        for (size_t i = 0; i < nu && i < BACKLOG_MAX; i++) {
                json_object *o = json_object_new_object();
                if (!o || json_object_array_add(btasks, o) < 0) return NULL;
                json_add_string(o, PK_id, unknown[i]->id);
                json_add(o, PK_model, unknown[i]->model_json ? json_object_get(unknown[i]->model_json) : NULL);
                json_add_string(o, PK_startedAt, unknown[i]->started_at);
        }

        char iso[32];
        json_add_string(out, PK_computedAt, format_iso(now, iso));

        /* statusMix */
        Counts overall = {0}, day = {0}, week = {0};
        for (size_t i = 0; i < n; i++) {
                count_row(&overall, &rows[i]);
                if (rows[i].has_time && rows[i].time_ms >= (now > DAY_MS ? now - DAY_MS : 0)) count_row(&day, &rows[i]);
                if (rows[i].has_time && rows[i].time_ms >= (now > 7 * DAY_MS ? now - 7 * DAY_MS : 0)) count_row(&week, &rows[i]);
        }
        json_object *mix = json_object_new_object();
        if (!mix || json_add(out, PK_statusMix, mix) < 0) return NULL;
        json_add(mix, PK_overall, mix_object(&overall));
        json_add(mix, PK_last24h, mix_object(&day));
        json_add(mix, PK_last7d, mix_object(&week));

        /* trend */
        json_object *trend = json_object_new_object();
        if (!trend || json_add(out, PK_trend, trend) < 0) return NULL;
        json_add_string(trend, PK_window, "24h");
        unsigned cur_settled, prev_settled;
        json_object *cur_rate, *prev_rate;
        uint64_t day_ago = now > DAY_MS ? now - DAY_MS : 0, two_days = now > 2 * DAY_MS ? now - 2 * DAY_MS : 0;
        json_add(trend, PK_current, crash_window(rows, n, day_ago, 0, false, &cur_settled, &cur_rate));
        json_add(trend, PK_previous, crash_window(rows, n, two_days, day_ago, true, &prev_settled, &prev_rate));
        const char *direction = "unknown";
        if (cur_settled > 0 && prev_settled > 0 && cur_rate && prev_rate) {
                double a = json_object_get_double(cur_rate), b = json_object_get_double(prev_rate);
                direction = a > b ? "worsening" : a < b ? "improving" : "flat";
        }
        json_object_put(cur_rate);
        json_object_put(prev_rate);
        json_add_string(trend, PK_direction, direction);
        return TAKE_PTR(out);
}

char *task_stats_rate_text(double rate, char buf[static 32]) {
        /* toFixed(1) rounds the exact binary value like printf does, except
         * that an exact tie goes up (printf: to even) */
        double pct = rate * 100.0, t = pct * 10.0;
        if (t >= 0 && t == floor(t) + 0.5) pct = (floor(t) + 1.0) / 10.0;
        snprintf(buf, 32, "%.1f%%", pct);
        return buf;
}

static json_object *rate_string(json_object *v) {
        if (!v || json_object_is_type(v, json_type_null)) return NULL;
        if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)) return json_object_get(v);
        char buf[32];
        return json_object_new_string(task_stats_rate_text(json_object_get_double(v), buf));
}

static void replace_rate(json_object *o, const char *key) {
        json_object *v = NULL;
        if (!json_is_object(o) || !json_object_object_get_ex(o, key, &v)) return;
        json_object_object_add(o, key, rate_string(v));
}

json_object *task_stats_format_rates(json_object *stats) {
        json_object *o = json_copy(stats);
        if (!o) return NULL;
        json_object *by = json_get_array(o, PK_byModel);
        for (size_t i = 0; by && i < json_object_array_length(by); i++) {
                json_object *row = json_object_array_get_idx(by, i);
                replace_rate(row, PK_doneRate);
                replace_rate(row, PK_crashRate);
        }
        json_object *trend = json_get_object(o, PK_trend);
        replace_rate(json_get_object(trend, PK_current), PK_crashRate);
        replace_rate(json_get_object(trend, PK_previous), PK_crashRate);
        return o;
}
