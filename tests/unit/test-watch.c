/* watch.h: the line each event prints as (toon and ndjson, time prefix,
 * colours) and `taskferry watch` streaming from a fake daemon
 * (cli-fixture.h): what it subscribes to, the events it keeps, --task-id's
 * end (an event, or a task settled before the subscription), Ctrl-C,
 * --flush-interval's batches, and a daemon that fails mid-stream. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli-fixture.h"
#include "json-util.h"
#include "unit.h"
#include "watch.h"
#include "macro.h"
#include "string-util.h"

static bool ends_with(const char *s, const char *suffix) {
        size_t n = strlen(s), m = strlen(suffix);
        return n >= m && streq(s + n - m, suffix);
}

#define T "\"occurredAt\":\"2026-11-30T13:35:06.026Z\""

/* ---- one line per event ---- */

static const struct {
        const char *event;
        bool ndjson, color;
        const char *want;
} lines[] = {
        {"{\"type\":\"task.state\",\"taskId\":\"oc_a\",\"status\":\"done\",\"previousStatus\":\"running\"," T "}", false,
         false, "13:35:06 oc_a running -> done"},
        {"{\"type\":\"task.state\",\"taskId\":\"oc_a\",\"status\":\"done\",\"previousStatus\":\"done\"," T "}", false,
         false, "13:35:06 oc_a done"},
        {"{\"type\":\"task.state\",\"taskId\":\"oc_a\",\"status\":\"queued\",\"previousStatus\":null," T "}", false,
         false, "13:35:06 oc_a queued"},
        /* toLocaleTimeString's midnight is 24 */
        {"{\"type\":\"task.state\",\"taskId\":\"oc_a\",\"status\":\"running\",\"occurredAt\":\"2026-11-30T00:05:01.000Z\"}",
         false, false, "24:05:01 oc_a running"},
        /* an unparseable time: no prefix */
        {"{\"type\":\"task.state\",\"taskId\":\"oc_a\",\"status\":\"running\",\"occurredAt\":\"yesterday\"}", false, false,
         "oc_a running"},
        {"{\"type\":\"task.state\",\"taskId\":\"oc_a\",\"status\":\"running\"}", false, false, "oc_a running"},
        /* activity: CR/LF runs are one space; none is the status */
        {"{\"type\":\"task.activity\",\"taskId\":\"oc_a\",\"status\":\"running\",\"activity\":\"editing\\r\\n\\nfiles\\r\"," T "}",
         false, false, "13:35:06 oc_a running: editing files "},
        {"{\"type\":\"task.activity\",\"taskId\":\"oc_a\",\"status\":\"running\",\"activity\":\"\"," T "}", false, false,
         "13:35:06 oc_a running: running"},
        {"{\"type\":\"task.activity\",\"taskId\":\"oc_a\",\"status\":\"running\",\"summaryFailed\":true,\"summaryError\":"
         "\"model down\"," T "}",
         false, false, "13:35:06 oc_a running: summary unavailable (model down)"},
        {"{\"type\":\"task.activity\",\"taskId\":\"oc_a\",\"status\":\"running\",\"summaryFailed\":true," T "}", false,
         false, "13:35:06 oc_a running: summary unavailable (unknown error)"},
        /* another type: its TOON */
        {"{\"type\":\"task.other\",\"taskId\":\"oc_a\",\"n\":1}", false, false, "type: task.other\ntaskId: oc_a\nn: 1"},
        /* ndjson: the event itself */
        {"{\"type\":\"task.state\",\"taskId\":\"oc_a\",\"status\":\"done\"}", true, false,
         "{\"type\":\"task.state\",\"taskId\":\"oc_a\",\"status\":\"done\"}"},
        /* colours on a terminal */
        {"{\"type\":\"task.state\",\"taskId\":\"oc_a\",\"status\":\"done\",\"previousStatus\":\"running\"}", false, true,
         "oc_a \033[33mrunning\033[0m -> \033[32mdone\033[0m"},
        {"{\"type\":\"task.state\",\"taskId\":\"oc_a\",\"status\":\"crashed\"}", false, true, "oc_a \033[31mcrashed\033[0m"},
        {"{\"type\":\"task.state\",\"taskId\":\"oc_a\",\"status\":\"cancelled\"}", false, true, "oc_a \033[31mcancelled\033[0m"},
        {"{\"type\":\"task.state\",\"taskId\":\"oc_a\",\"status\":\"queued\"}", false, true, "oc_a \033[33mqueued\033[0m"},
        {"{\"type\":\"task.state\",\"taskId\":\"oc_a\",\"status\":\"unknown\"}", false, true, "oc_a unknown"},
        {"{\"type\":\"task.activity\",\"taskId\":\"oc_a\",\"status\":\"done\",\"activity\":\"x\"}", false, true,
         "oc_a \033[32mdone\033[0m: x"},
        /* on a terminal the worker's text has its control bytes shown, ours stay */
        {"{\"type\":\"task.activity\",\"taskId\":\"oc_a\",\"status\":\"done\",\"activity\":\"a\\u001b]0;x\\u0007\\u001b[2Jb\\u009b\"}",
         false, true, "oc_a \033[32mdone\033[0m: a^[]0;x^G^[[2Jb<U+009B>"},
        {"{\"type\":\"task.activity\",\"taskId\":\"oc_a\",\"status\":\"done\",\"summaryFailed\":true,\"summaryError\":\"e\\u001b[1A\"}",
         false, true, "oc_a \033[32mdone\033[0m: summary unavailable (e^[[1A)"},
        /* not a terminal: as it came */
        {"{\"type\":\"task.activity\",\"taskId\":\"oc_a\",\"status\":\"done\",\"activity\":\"a\\u001b[2Jb\"}",
         false, false, "oc_a done: a\033[2Jb"},
        /* colour is never on ndjson */
        {"{\"type\":\"task.state\",\"status\":\"done\"}", true, true, "{\"type\":\"task.state\",\"status\":\"done\"}"},
};

START_TEST(format_line) {
        setenv("TZ", "UTC", 1);
        tzset();
        _cleanup_json_ json_object *ev = NULL;
        ck_assert_int_eq(json_parse_strict(lines[_i].event, strlen(lines[_i].event), &ev), 0);
        _cleanup_free_ char *got = watch_format_line(ev, lines[_i].ndjson, lines[_i].color);
        ck_assert_msg(streq_ptr(got, lines[_i].want), "[%s], want [%s]", strnull(got), lines[_i].want);
}
END_TEST

START_TEST(time_prefix) {
        setenv("TZ", "UTC", 1);
        tzset();
        _cleanup_free_ char *a = watch_time_prefix("2026-11-30T23:59:59.999Z");
        ck_assert_str_eq(a, "23:59:59");
        ck_assert_ptr_null(watch_time_prefix(NULL));
        ck_assert_ptr_null(watch_time_prefix(""));
        ck_assert_ptr_null(watch_time_prefix("13:35:06"));
        /* local time */
        setenv("TZ", "Asia/Kolkata", 1);
        tzset();
        _cleanup_free_ char *b = watch_time_prefix("2026-11-30T13:35:06.026Z");
        ck_assert_str_eq(b, "19:05:06");
        setenv("TZ", "UTC", 1);
        tzset();
}
END_TEST

/* An event of a type watch has no line for prints as TOON, which escapes
 * every control byte of the worker's text; so does ndjson. */
START_TEST(control_bytes_escaped_in_toon_and_ndjson) {
        const char *text = "{\"type\":\"task.other\",\"taskId\":\"oc_a\",\"message\":\"\\u001b]0;pwned\\u0007\\u001b[2J\\u009b1m\"}";
        _cleanup_json_ json_object *ev = NULL;
        ck_assert_int_eq(json_parse_strict(text, strlen(text), &ev), 0);
        _cleanup_free_ char *toon = watch_format_line(ev, false, false);
        _cleanup_free_ char *nd = watch_format_line(ev, true, false);
        for (const char *s = toon; *s; s++) ck_assert_msg((unsigned char) *s >= 0x20 || *s == '\n', "raw %#x in %s", *s, toon);
        ck_assert(!strstr(toon, "\xc2\x9b"));
        ck_assert_str_eq(toon, "type: task.other\ntaskId: oc_a\nmessage: \"\\u001b]0;pwned\\u0007\\u001b[2J\\u009b1m\"");
        for (const char *s = nd; *s; s++) ck_assert((unsigned char) *s >= 0x20);
}
END_TEST

/* ---- streaming ---- */

#define STATE(id, prev, status) \
        "{\"type\":\"task.state\",\"taskId\":\"" id "\",\"status\":\"" status "\",\"previousStatus\":" prev "," T "}"

START_TEST(task_id_ends_at_its_terminal_event) {
        cli_fake_rule rules[] = {
                {"event.subscribe",
                 FAKE_FRAMES(FAKE_SUBSCRIBED, FAKE_EVENT(STATE("oc_other", "null", "done")),
                             /* another subscription's event */
                             "{\"version\":1,\"type\":\"event\",\"subscriptionId\":\"other-sub\",\"event\":" STATE("oc_a", "null", "crashed") "}",
                             FAKE_EVENT(STATE("oc_a", "\"queued\"", "running")))},
                {"task.status", FAKE_FRAMES(FAKE_OK("{\"id\":\"oc_a\",\"status\":\"running\"}"),
                                            FAKE_EVENT(STATE("oc_a", "\"running\"", "done")),
                                            FAKE_EVENT(STATE("oc_a", "\"done\"", "unknown")))},
                {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_ok(&c, "watch", "--task-id", "oc_a", NULL);
        ck_assert(c.output_done);
        ck_assert_ptr_null(c.value);
        ck_assert_str_eq(c.out, "13:35:06 oc_a queued -> running\n13:35:06 oc_a running -> done\n");
        cli_fake_params_are("event.subscribe", "{\"taskId\":\"oc_a\"}");
        cli_fake_params_are("task.status", "{\"taskId\":\"oc_a\"}");
        cli_cmd_done(&c);
}
END_TEST

/* Settled before the subscription: a synthetic terminal event, at once. */
START_TEST(task_id_settled_already) {
        cli_fake_rule rules[] = {
                {"task.status", FAKE_FRAMES(FAKE_OK("{\"id\":\"oc_a\",\"status\":\"crashed\",\"directory\":\"/w\","
                                                    "\"originSessionId\":\"s1\"}"))},
                {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_ok(&c, "watch", "--task-id", "oc_a", "--format", "ndjson", "--summaries", NULL);
        cli_fake_params_are("event.subscribe", "{\"taskId\":\"oc_a\",\"summaries\":true}");
        _cleanup_json_ json_object *ev = NULL;
        ck_assert_msg(json_parse_strict(c.out, strlen(c.out) - 1, &ev) == 0, "%s", c.out);
        ck_assert(ends_with(c.out, "}\n"));
        const char *iso = json_get_string(ev, "occurredAt");
        ck_assert_ptr_nonnull(iso);
        _cleanup_free_ char *want = strdup_printf(
                "{\"type\":\"task.state\",\"taskId\":\"oc_a\",\"directory\":\"/w\",\"status\":\"crashed\","
                "\"previousStatus\":null,\"occurredAt\":\"%s\",\"activity\":null,\"outputWatermark\":null,"
                "\"originSessionId\":\"s1\"}",
                iso);
        ck_assert_str_eq(json_to_line(ev, NULL), want);
        cli_cmd_done(&c);
}
END_TEST

/* Without --task-id: every event of the subscription until Ctrl-C, exit 0. */
START_TEST(all_until_interrupted) {
        cli_fake_rule rules[] = {
                {"event.subscribe",
                 FAKE_FRAMES(FAKE_SUBSCRIBED, FAKE_EVENT(STATE("oc_a", "null", "queued")),
                             FAKE_EVENT("{\"type\":\"task.activity\",\"taskId\":\"oc_b\",\"status\":\"running\",\"activity\":\"reading\"," T "}"),
                             FAKE_EVENT(STATE("oc_a", "\"queued\"", "done")), "WAITOUT:3", "SIGNAL")},
                {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_ok(&c, "watch", "--all", "--summaries", NULL);
        ck_assert(c.output_done);
        ck_assert_str_eq(c.out, "13:35:06 oc_a queued\n13:35:06 oc_b running: reading\n13:35:06 oc_a queued -> done\n");
        cli_fake_params_are("event.subscribe", "{\"all\":true,\"summaries\":true}");
        ck_assert_uint_eq(cli_fake_count("task.status"), 0);
        cli_cmd_done(&c);
}
END_TEST

/* The default scope is the workspace of the cwd, --directory another. */
START_TEST(directory_scope) {
        cli_fake_rule rules[] = {{"event.subscribe", FAKE_FRAMES(FAKE_SUBSCRIBED, "SIGNAL")}, {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_ok(&c, "watch", NULL);
        _cleanup_json_ json_object *p = cli_fake_params("event.subscribe", -1);
        _cleanup_free_ char *work = tf_path(cli_fixture_dir, "work");
        ck_assert_str_eq(json_get_string(p, "directory"), work);
        ck_assert_int_eq(json_object_object_length(p), 1);
        cli_cmd_done(&c);
        /* --task-id with --directory: the directory is the scope */
        cli_fixture_interrupted = 0;
        _cleanup_free_ char *home = tf_path(cli_fixture_dir, "home");
        cli_fake_stop();
        cli_fake_rule rules2[] = {{"event.subscribe", FAKE_FRAMES(FAKE_SUBSCRIBED)},
                                  {"task.status", FAKE_FRAMES(FAKE_OK("{\"id\":\"oc_a\",\"status\":\"done\"}"))},
                                  {}};
        cli_fake_start(rules2);
        cli_cmd_run(&c, "watch", "--task-id", "oc_a", "--directory", home, NULL);
        ck_assert_int_eq(c.r, 0);
        _cleanup_json_ json_object *p2 = cli_fake_params("event.subscribe", -1);
        ck_assert_str_eq(json_get_string(p2, "directory"), home);
        ck_assert_ptr_null(json_get(p2, "taskId"));
        cli_cmd_done(&c);
}
END_TEST

/* A daemon that fails mid-stream: the lines so far stay printed, the
 * command fails (exit 1). */
static const cli_fake_failure stream_failures[] = {
        {"closes", FAKE_FRAMES(FAKE_SUBSCRIBED, FAKE_EVENT(STATE("oc_a", "null", "running")), "WAITOUT:1", "CLOSE"),
         -ECONNRESET, "taskferry daemon connection closed"},
        {"closes mid-line",
         FAKE_FRAMES(FAKE_SUBSCRIBED, FAKE_EVENT(STATE("oc_a", "null", "running")), "WAITOUT:1",
                     "RAW:{\"version\":1,\"type\":\"event\",\"subscr", "CLOSE"),
         -ECONNRESET, "taskferry daemon connection closed"},
        {"malformed event", FAKE_FRAMES(FAKE_SUBSCRIBED, FAKE_EVENT(STATE("oc_a", "null", "running")), "{\"version\":1,\"type\":"),
         -EPROTO, "taskferry daemon sent an invalid frame"},
        {"event without its keys",
         FAKE_FRAMES(FAKE_SUBSCRIBED, FAKE_EVENT(STATE("oc_a", "null", "running")), "{\"version\":1,\"type\":\"event\",\"event\":{}}"),
         -EPROTO, "taskferry daemon sent an invalid frame"},
        {"huge frame", FAKE_FRAMES(FAKE_SUBSCRIBED, FAKE_EVENT(STATE("oc_a", "null", "running")), "WAITOUT:1", "BIG"),
         -EPROTO, "taskferry daemon message exceeds 1048576 bytes"},
};

START_TEST(stream_failure) {
        cli_fake_rule rules[] = {{"event.subscribe", stream_failures[_i].frames}, {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_run(&c, "watch", "--all", NULL);
        ck_assert_msg(c.r == stream_failures[_i].r, "%s: %d %s", stream_failures[_i].name, c.r, strnull(c.err.text));
        ck_assert_str_eq(c.err.text, stream_failures[_i].error);
        ck_assert_int_eq(c.err.exit_code, 1);
        ck_assert(!c.output_done);
        ck_assert_str_eq(c.out, "13:35:06 oc_a running\n");
        cli_cmd_done(&c);
}
END_TEST

START_TEST(subscribe_refused) {
        cli_fake_rule rules[] = {
                {"event.subscribe", FAKE_FRAMES(FAKE_ERR("REQUEST_FAILED", "summary model is unavailable: x/y", "h",
                                                         "summary model is unavailable: x/y"))},
                {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_run(&c, "watch", "--all", "--summaries", NULL);
        cli_cmd_failed(&c, -EBADMSG, 1, "{\"error\":\"summary model is unavailable: x/y\",\"help\":\"h\"}");
        ck_assert_str_eq(c.out, "");
        cli_cmd_done(&c);
}
END_TEST

/* --flush-interval: one ndjson line per window with the events of it. */
START_TEST(flush_interval_ndjson) {
        cli_fake_rule rules[] = {
                {"event.subscribe",
                 FAKE_FRAMES(FAKE_SUBSCRIBED, FAKE_EVENT(STATE("oc_a", "null", "running")),
                             FAKE_EVENT(STATE("oc_a", "\"running\"", "done")), "WAITOUT:1", "SIGNAL")},
                {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_ok(&c, "watch", "--all", "--summaries", "--flush-interval", "200", "--format", "ndjson", NULL);
        ck_assert(ends_with(c.out, "\n"));
        ck_assert_ptr_eq(strchr(c.out, '\n'), c.out + strlen(c.out) - 1); /* one line */
        _cleanup_json_ json_object *line = NULL;
        ck_assert_int_eq(json_parse_strict(c.out, strlen(c.out) - 1, &line), 0);
        ck_assert_str_eq(json_get_string(line, "type"), "watch.flush");
        ck_assert_ptr_nonnull(json_get_string(line, "timestamp"));
        /* the latest event of the task only */
        ck_assert_str_eq(json_to_line(json_get_array(line, "events"), NULL), "[" STATE("oc_a", "\"running\"", "done") "]");
        cli_cmd_done(&c);
}
END_TEST

/* A window keeps the latest event of each task, the tasks in the order
 * they were first seen in it (watch.c's Buffer; the original's Map). */
START_TEST(flush_keeps_first_seen_order) {
        cli_fake_rule rules[] = {
                {"event.subscribe",
                 FAKE_FRAMES(FAKE_SUBSCRIBED, FAKE_EVENT(STATE("oc_a", "null", "queued")),
                             FAKE_EVENT(STATE("oc_b", "null", "queued")), FAKE_EVENT(STATE("oc_a", "\"queued\"", "running")),
                             "WAITOUT:2", "SIGNAL")},
                {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_ok(&c, "watch", "--all", "--summaries", "--flush-interval", "200", NULL);
        ck_assert_str_eq(c.out, "13:35:06 oc_a queued -> running\n13:35:06 oc_b queued\n");
        cli_cmd_done(&c);
}
END_TEST

/* Ctrl-C flushes what the window holds. With --task-id the terminal event
 * flushes the window first and ends the stream. */
START_TEST(flush_on_terminal_event) {
        cli_fake_rule rules[] = {
                {"event.subscribe", FAKE_FRAMES(FAKE_SUBSCRIBED)},
                {"task.status", FAKE_FRAMES(FAKE_OK("{\"id\":\"oc_a\",\"status\":\"running\"}"),
                                            FAKE_EVENT("{\"type\":\"task.activity\",\"taskId\":\"oc_a\",\"status\":\"running\",\"activity\":\"one\"}"),
                                            FAKE_EVENT("{\"type\":\"task.activity\",\"taskId\":\"oc_a\",\"status\":\"running\",\"activity\":\"two\"}"),
                                            FAKE_EVENT("{\"type\":\"task.state\",\"taskId\":\"oc_a\",\"status\":\"done\"}"))},
                {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_ok(&c, "watch", "--task-id", "oc_a", "--summaries", "--flush-interval", "1h", NULL);
        ck_assert_str_eq(c.out, "oc_a running: two\noc_a done\n");
        cli_cmd_done(&c);
}
END_TEST

START_TEST(flush_on_interrupt) {
        cli_fake_rule rules[] = {
                {"event.subscribe", FAKE_FRAMES(FAKE_SUBSCRIBED)},
                {"task.status", FAKE_FRAMES(FAKE_OK("{\"id\":\"oc_a\",\"status\":\"running\"}"),
                                            FAKE_EVENT("{\"type\":\"task.activity\",\"taskId\":\"oc_a\",\"status\":\"running\",\"activity\":\"one\"}"),
                                            /* the events are read with the status answer: the CLI
                                             * has them before this */
                                            "SLEEP:300", "SIGNAL")},
                {}};
        cli_fake_start(rules);
        cli_cmd c;
        cli_cmd_ok(&c, "watch", "--task-id", "oc_a", "--summaries", "--flush-interval", "1h", NULL);
        ck_assert_str_eq(c.out, "oc_a running: one\n");
        cli_cmd_done(&c);
}
END_TEST

int main(void) {
        Suite *s = suite_create("watch");
        TCase *f = tf_tcase(s, "format", NULL, NULL, 0, TF_TESTS(time_prefix, control_bytes_escaped_in_toon_and_ndjson));
        TF_LOOP(f, format_line, lines);
        TCase *st = tf_tcase(s, "stream", cli_fixture_setup, cli_fixture_teardown, 30,
                             TF_TESTS(task_id_ends_at_its_terminal_event, task_id_settled_already, all_until_interrupted,
                                      directory_scope, subscribe_refused, flush_interval_ndjson, flush_keeps_first_seen_order, flush_on_terminal_event,
                                      flush_on_interrupt));
        TF_LOOP(st, stream_failure, stream_failures);
        return tf_run_suite(s);
}
