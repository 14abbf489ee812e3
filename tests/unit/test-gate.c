/* The check gate's pure parts (src/daemon/run/gate.h): its status table,
 * which verdicts block accept, the output tail kept on the record, and the
 * text accept answers with when the gate blocks it — what ran, how it
 * ended, the tail with the worker's control bytes made visible, and the
 * fix-forward command. */

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "core/task.h"
#include "json-util.h"
#include "macro.h"
#include "run/gate.h"
#include "string-util.h"
#include "unit.h"

START_TEST(test_status_table) {
        for (int i = 0; i < _CHECK_STATUS_MAX; i++)
                ck_assert_int_eq(check_status_from_string(check_status_to_string((CheckStatus) i)), i);
        ck_assert_int_eq(check_status_from_string("passd"), _CHECK_STATUS_INVALID);
        ck_assert_int_eq(check_status_from_string(NULL), _CHECK_STATUS_INVALID);
        ck_assert_ptr_null(check_status_to_string(_CHECK_STATUS_MAX));
        ck_assert(!check_status_blocks(CHECK_NONE));
        ck_assert(!check_status_blocks(CHECK_PASSED));
        ck_assert(check_status_blocks(CHECK_RUNNING));
        ck_assert(check_status_blocks(CHECK_FAILED));
        ck_assert(check_status_blocks(CHECK_TIMEOUT));
        ck_assert(check_status_blocks(CHECK_INTERRUPTED));
}
END_TEST

static char *tail_of(const char *s, unsigned n) { return check_output_tail(s, strlen(s), n); }

START_TEST(test_output_tail) {
        _cleanup_free_ char *a = tail_of("1\n2\n3\n", 2), *b = tail_of("1\n2\n3", 2), *c = tail_of("1\n2\n", 40),
                            *d = tail_of("", 40), *e = tail_of("\n", 40), *f = tail_of("x\n\n\n", 2);
        ck_assert_str_eq(a, "2\n3");
        ck_assert_str_eq(b, "2\n3");
        ck_assert_str_eq(c, "1\n2");
        ck_assert_str_eq(d, "");
        ck_assert_str_eq(e, "");
        ck_assert_str_eq(f, "\n");
        /* the front of a trimmed log may start inside a character */
        _cleanup_free_ char *g = check_output_tail("\x98\x83 ok\n", 6, 40);
        ck_assert_str_eq(g, "\xEF\xBF\xBD\xEF\xBF\xBD ok");
        /* a NUL would end the recorded string there, hiding what follows */
        _cleanup_free_ char *z = check_output_tail("a\0b\nc\0\n", 7, 40);
        ck_assert_str_eq(z, "a\xEF\xBF\xBD" "b\nc\xEF\xBF\xBD");
        /* 50 lines: the last 40 */
        _cleanup_free_ char *big = NULL;
        for (int i = 1; i <= 50; i++) {
                char *n = strdup_printf("%s%d\n", big ? big : "", i);
                free(big);
                big = n;
        }
        _cleanup_free_ char *h = tail_of(big, CHECK_TAIL_LINES);
        ck_assert(startswith(h, "11\n12\n"));
        ck_assert_str_eq(h + strlen(h) - 3, "\n50");
}
END_TEST

static Task *task_of(const char *json) {
        _cleanup_json_ json_object *o = NULL;
        ck_assert_int_eq(json_parse_strict(json, strlen(json), &o), 0);
        Task *t = NULL;
        ck_assert_int_eq(task_from_json(o, &t), 0);
        return t;
}

START_TEST(test_refusal_text) {
        Task *t = task_of("{\"id\":\"oc_a_1\",\"directory\":\"/r e\",\"role\":\"dispatch\",\"status\":\"done\","
                          "\"model\":\"p/m\",\"sessionId\":\"ses_1\",\"changesetStatus\":\"pending\","
                          "\"checkStatus\":\"failed\",\"checkCommand\":\"make check\",\"checkExitCode\":2,"
                          "\"checkOutputTail\":\"ok\\n\\u001b]0;owned\\u0007\\u001b[2J\\u009b1A\"}");
        _cleanup_free_ char *m = check_refusal_text(t);
        ck_assert(strstr(m, "error: check gate failed for task oc_a_1"));
        ck_assert(strstr(m, "command: make check (from .taskferry.toml)"));
        ck_assert(strstr(m, "exit: 2\n"));
        ck_assert(strstr(m, "    ok\n    \\x1b]0;owned\\x07\\x1b[2J\\x9b1A\n"));
        ck_assert(!strchr(m, 0x1b) && !strchr(m, 0x07) && !strstr(m, "\xc2\x9b"));
        ck_assert(strstr(m, "taskferry dispatch --session-id ses_1 --parent-task oc_a_1"));
        ck_assert(strstr(m, "taskferry accept oc_a_1 --force"));
        task_free(t);

        /* no session: the directory (quoted) and model name the fresh dispatch */
        t = task_of("{\"id\":\"oc_a_2\",\"directory\":\"/r e/it's\",\"role\":\"dispatch\",\"status\":\"done\","
                    "\"model\":\"p/m\",\"changesetStatus\":\"pending\",\"checkStatus\":\"timeout\","
                    "\"checkCommand\":\"sleep 9\"}");
        free(m);
        m = check_refusal_text(t);
        ck_assert(strstr(m, "exit: timed out"));
        ck_assert(strstr(m, "(no output)"));
        ck_assert(strstr(m, "taskferry dispatch --directory '/r e/it'\\''s' --model p/m --parent-task oc_a_2"));
        task_free(t);

        t = task_of("{\"id\":\"oc_a_3\",\"directory\":\"/r\",\"status\":\"done\",\"changesetStatus\":\"pending\","
                    "\"checkStatus\":\"running\",\"checkCommand\":\"x\"}");
        free(m);
        m = check_refusal_text(t);
        ck_assert(startswith(m, "error: check gate still running for task oc_a_3"));
        task_free(t);
        t = task_of("{\"id\":\"oc_a_4\",\"directory\":\"/r\",\"status\":\"done\",\"changesetStatus\":\"pending\","
                    "\"checkStatus\":\"interrupted\",\"checkCommand\":\"x\"}");
        free(m);
        m = check_refusal_text(t);
        ck_assert(strstr(m, "exit: interrupted"));
        ck_assert(strstr(m, "runs again when the daemon next starts"));
        task_free(t);
}
END_TEST

TF_MAIN("gate", "pure", NULL, NULL, 30, test_status_table, test_output_tail, test_refusal_text)
