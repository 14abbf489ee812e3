/* doctor --stats aggregation (task-stats.h). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "task-stats.h"
#include "time-util.h"
#include "unit.h"

#define HOUR (3600ULL * 1000)

static uint64_t now;

static json_object *row(const char *id, const char *status, const char *model, uint64_t ago, const char *reason) {
        json_object *o = json_object_new_object();
        char iso[32];
        json_add_string(o, "id", id);
        json_add_string(o, "status", status);
        json_add_string(o, "model", model);
        json_add_string(o, "startedAt", format_iso(now - ago, iso));
        json_add_string(o, "directory", "/w");
        json_add_string(o, "failureReason", reason);
        return o;
}

START_TEST(aggregates_as_the_spec_says) {
        ck_assert_int_eq(parse_iso("2026-12-01T12:00:00.000Z", &now), 0);
        json_object *rows = json_object_new_array();
        /* model a: 2 done, 1 crashed (rate_limited), 1 cancelled, 1 unknown → settled 3 */
        json_object_array_add(rows, row("a1", "done", "p/a", 1 * HOUR, NULL));
        json_object_array_add(rows, row("a2", "done", "p/a", 30 * HOUR, NULL));
        json_object_array_add(rows, row("a3", "crashed", "p/a", 2 * HOUR, "rate_limited"));
        json_object_array_add(rows, row("a4", "cancelled", "p/a", 3 * HOUR, NULL));
        json_object_array_add(rows, row("a5", "unknown", "p/a", 200 * HOUR, NULL));
        /* model b: 2 crashed (timeout, auth) 1 running; ties broken by name */
        json_object_array_add(rows, row("b1", "crashed", "p/b", 26 * HOUR, "timeout"));
        json_object_array_add(rows, row("b2", "crashed", "p/b", 27 * HOUR, "auth"));
        json_object_array_add(rows, row("b3", "running", "p/b", 0, NULL));
        /* no model and a status of no bucket: counted as other, and settled */
        json_object_array_add(rows, row("c1", "weird", NULL, 5 * HOUR, NULL));
        json_object *s = task_stats_compute(rows, now);
        ck_assert_ptr_nonnull(s);
        const char *expect =
                "{\"byModel\":["
                "{\"model\":\"p/a\",\"dispatches\":5,\"done\":2,\"crashed\":1,\"cancelled\":1,\"unknown\":1,"
                "\"doneRate\":0.6666666666666666,\"crashRate\":0.3333333333333333,\"dominantFailureReason\":\"rate_limited\"},"
                "{\"model\":\"p/b\",\"dispatches\":3,\"done\":0,\"crashed\":2,\"cancelled\":0,\"unknown\":0,"
                "\"doneRate\":0,\"crashRate\":1,\"dominantFailureReason\":\"auth\"},"
                "{\"model\":\"\",\"dispatches\":1,\"done\":0,\"crashed\":0,\"cancelled\":0,\"unknown\":0,"
                "\"doneRate\":0,\"crashRate\":0,\"dominantFailureReason\":null}],"
                "\"failureReasons\":[{\"reason\":\"auth\",\"count\":1},{\"reason\":\"rate_limited\",\"count\":1},"
                "{\"reason\":\"timeout\",\"count\":1}],"
                "\"unknownBacklog\":{\"total\":1,\"tasks\":[{\"id\":\"a5\",\"model\":\"p/a\",\"startedAt\":\"2026-11-23T04:00:00.000Z\"}]},"
                "\"computedAt\":\"2026-12-01T12:00:00.000Z\","
                "\"statusMix\":{"
                "\"overall\":{\"queued\":0,\"running\":1,\"done\":2,\"crashed\":3,\"cancelled\":1,\"unknown\":1,\"other\":1,\"total\":9},"
                "\"last24h\":{\"queued\":0,\"running\":1,\"done\":1,\"crashed\":1,\"cancelled\":1,\"unknown\":0,\"other\":1,\"total\":5},"
                "\"last7d\":{\"queued\":0,\"running\":1,\"done\":2,\"crashed\":3,\"cancelled\":1,\"unknown\":0,\"other\":1,\"total\":8}},"
                "\"trend\":{\"window\":\"24h\",\"current\":{\"crashRate\":0.3333333333333333,\"settled\":3},"
                "\"previous\":{\"crashRate\":0.6666666666666666,\"settled\":3},\"direction\":\"improving\"}}";
        ck_assert_str_eq(json_to_line(s, NULL), expect);
        json_object *f = task_stats_format_rates(s);
        json_object *a = json_object_array_get_idx(json_get_array(f, "byModel"), 0);
        ck_assert_str_eq(json_get_string(a, "doneRate"), "66.7%");
        ck_assert_str_eq(json_get_string(a, "crashRate"), "33.3%");
        ck_assert_str_eq(json_get_string(json_get_object(json_get_object(f, "trend"), "previous"), "crashRate"), "66.7%");
        json_object_put(f);
        json_object_put(s);
        json_object_put(rows);
}
END_TEST

START_TEST(empty_and_nulls) {
        ck_assert_int_eq(parse_iso("2026-12-01T12:00:00.000Z", &now), 0);
        json_object *rows = json_object_new_array();
        json_object *s = task_stats_compute(rows, now);
        ck_assert_str_eq(json_to_line(s, NULL),
                         "{\"byModel\":[],\"failureReasons\":[],\"unknownBacklog\":{\"total\":0,\"tasks\":[]},"
                         "\"computedAt\":\"2026-12-01T12:00:00.000Z\",\"statusMix\":{"
                         "\"overall\":{\"queued\":0,\"running\":0,\"done\":0,\"crashed\":0,\"cancelled\":0,\"unknown\":0,\"other\":0,\"total\":0},"
                         "\"last24h\":{\"queued\":0,\"running\":0,\"done\":0,\"crashed\":0,\"cancelled\":0,\"unknown\":0,\"other\":0,\"total\":0},"
                         "\"last7d\":{\"queued\":0,\"running\":0,\"done\":0,\"crashed\":0,\"cancelled\":0,\"unknown\":0,\"other\":0,\"total\":0}},"
                         "\"trend\":{\"window\":\"24h\",\"current\":{\"crashRate\":null,\"settled\":0},"
                         "\"previous\":{\"crashRate\":null,\"settled\":0},\"direction\":\"unknown\"}}");
        json_object *f = task_stats_format_rates(s);
        ck_assert_str_eq(json_to_line(json_get_object(f, "trend"), NULL),
                         "{\"window\":\"24h\",\"current\":{\"crashRate\":null,\"settled\":0},"
                         "\"previous\":{\"crashRate\":null,\"settled\":0},\"direction\":\"unknown\"}");
        json_object_put(f);
        json_object_put(s);
        json_object_put(rows);
        char buf[32];
        ck_assert_str_eq(task_stats_rate_text(0.125, buf), "12.5%");
        ck_assert_str_eq(task_stats_rate_text(1, buf), "100.0%");
        ck_assert_str_eq(task_stats_rate_text(0, buf), "0.0%");
        ck_assert_str_eq(task_stats_rate_text(1.0 / 3, buf), "33.3%");
        ck_assert_str_eq(task_stats_rate_text(0.0005, buf), "0.1%");
}
END_TEST

TF_MAIN("task-stats", "core", NULL, NULL, 0, aggregates_as_the_spec_says, empty_and_nulls)
