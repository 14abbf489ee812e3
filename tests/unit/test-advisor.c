/* advisor.c's pure parts (advisor.h): session resolution with
 * its TTL and owners, the session map's bound, the error-text rewrite, and
 * the two answer shapes with their keys in order. */

#include <check.h>
#include <stdlib.h>

#include "features/advisor.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"

static void keys_are(json_object *o, const char *const *keys) {
        size_t k = 0;
        json_object_object_foreach(o, key, val) {
                (void) val;
                ck_assert_msg(keys[k] && streq(key, keys[k]), "key %zu is %s in %s", k, key, json_to_line(o, NULL));
                k++;
        }
        ck_assert_ptr_null(keys[k]);
}

START_TEST(resolve_fresh_expired_unknown) {
        AdvisorSessions s = {0};
        AdvisorResolved r;
        /* no id: fresh session, no reset */
        ck_assert_int_eq(advisor_sessions_resolve(&s, NULL, NULL, 1000, 100, &r), 0);
        ck_assert(!r.reset && !r.session_id && !r.previous_session_id);
        advisor_resolved_done(&r);
        ck_assert_int_eq(advisor_sessions_resolve(&s, "", NULL, 1000, 100, &r), 0);
        ck_assert(!r.reset);
        advisor_resolved_done(&r);
        /* never seen */
        ck_assert_int_eq(advisor_sessions_resolve(&s, "ses_a", NULL, 1000, 100, &r), 0);
        ck_assert(r.reset && !r.session_id);
        ck_assert_str_eq(r.previous_session_id, "ses_a");
        advisor_resolved_done(&r);
        ck_assert_int_eq(advisor_sessions_touch(&s, "ses_a", NULL, 1000), 0);
        /* within the TTL, up to and including it */
        ck_assert_int_eq(advisor_sessions_resolve(&s, "ses_a", NULL, 1100, 100, &r), 0);
        ck_assert(!r.reset);
        ck_assert_str_eq(r.session_id, "ses_a");
        ck_assert_ptr_null(r.previous_session_id);
        advisor_resolved_done(&r);
        /* one ms past it */
        ck_assert_int_eq(advisor_sessions_resolve(&s, "ses_a", NULL, 1101, 100, &r), 0);
        ck_assert(r.reset);
        ck_assert_str_eq(r.previous_session_id, "ses_a");
        advisor_resolved_done(&r);
        /* a touch refreshes it */
        ck_assert_int_eq(advisor_sessions_touch(&s, "ses_a", NULL, 1101), 0);
        ck_assert_int_eq(advisor_sessions_resolve(&s, "ses_a", NULL, 1201, 100, &r), 0);
        ck_assert(!r.reset);
        advisor_resolved_done(&r);
        /* a clock behind the last use never counts as fresh */
        ck_assert_int_eq(advisor_sessions_resolve(&s, "ses_a", NULL, 50, 100, &r), 0);
        ck_assert(r.reset);
        advisor_resolved_done(&r);
        ck_assert_uint_eq(s.n, 1);
        advisor_sessions_done(&s);
}
END_TEST

START_TEST(owners) {
        AdvisorSessions s = {0};
        AdvisorResolved r;
        ck_assert_int_eq(advisor_sessions_touch(&s, "ses_user", NULL, 10), 0);
        ck_assert_int_eq(advisor_sessions_touch(&s, "ses_task", "oc_t1", 10), 0);
        /* the user resumes every session */
        ck_assert_int_eq(advisor_sessions_resolve(&s, "ses_task", NULL, 20, 100, &r), 0);
        ck_assert(!r.reset);
        advisor_resolved_done(&r);
        /* a task only its own */
        ck_assert_int_eq(advisor_sessions_resolve(&s, "ses_task", "oc_t1", 20, 100, &r), 0);
        ck_assert(!r.reset);
        advisor_resolved_done(&r);
        ck_assert_int_eq(advisor_sessions_resolve(&s, "ses_task", "oc_t2", 20, 100, &r), 0);
        ck_assert(r.reset);
        advisor_resolved_done(&r);
        ck_assert_int_eq(advisor_sessions_resolve(&s, "ses_user", "oc_t1", 20, 100, &r), 0);
        ck_assert(r.reset);
        ck_assert_str_eq(r.previous_session_id, "ses_user");
        advisor_resolved_done(&r);
        /* another task's touch neither takes nor refreshes it */
        ck_assert_int_eq(advisor_sessions_touch(&s, "ses_task", "oc_t2", 200), 0);
        ck_assert_int_eq(advisor_sessions_resolve(&s, "ses_task", "oc_t2", 201, 100, &r), 0);
        ck_assert(r.reset);
        advisor_resolved_done(&r);
        ck_assert_int_eq(advisor_sessions_resolve(&s, "ses_task", "oc_t1", 201, 100, &r), 0);
        ck_assert(r.reset); /* expired: the foreign touch did not refresh it */
        advisor_resolved_done(&r);
        advisor_sessions_done(&s);
}
END_TEST

START_TEST(map_is_bounded) {
        AdvisorSessions s = {0};
        char id[32];
        for (unsigned i = 0; i < ADVISOR_SESSIONS_MAX + 10; i++) {
                snprintf(id, sizeof id, "ses_%u", i);
                ck_assert_int_eq(advisor_sessions_touch(&s, id, NULL, 1000 + i), 0);
        }
        ck_assert_uint_eq(s.n, ADVISOR_SESSIONS_MAX);
        AdvisorResolved r;
        /* the least recently used went first; the newest stay */
        ck_assert_int_eq(advisor_sessions_resolve(&s, "ses_0", NULL, 100000, 1000000, &r), 0);
        ck_assert(r.reset);
        advisor_resolved_done(&r);
        snprintf(id, sizeof id, "ses_%u", ADVISOR_SESSIONS_MAX + 9);
        ck_assert_int_eq(advisor_sessions_resolve(&s, id, NULL, 100000, 1000000, &r), 0);
        ck_assert(!r.reset);
        advisor_resolved_done(&r);
        advisor_sessions_done(&s);
}
END_TEST

START_TEST(error_text_names_advisor) {
        char *t = advisor_error_text("error: x\nhelp: run taskferry dispatch again, or taskferry dispatch --help");
        ck_assert_str_eq(t, "error: x\nhelp: run taskferry advisor again, or taskferry advisor --help");
        free(t);
        t = advisor_error_text("nothing to change");
        ck_assert_str_eq(t, "nothing to change");
        free(t);
        ck_assert_ptr_null(advisor_error_text(NULL));
}
END_TEST

START_TEST(answer_shapes) {
        AdvisorResolved fresh = {0}, reset = {.reset = true, .previous_session_id = (char *) "ses_old"};
        json_object *o = advisor_active_answer("oc_1", "running", "ses_1", &fresh);
        static const char *const active[] = {"status", "task_id", "session_id", "session_reset", "note", NULL};
        keys_are(o, active);
        ck_assert_str_eq(json_get_string(o, "note"),
                         "still running; call taskferry wait or taskferry advisor again with session_id \"ses_1\" to continue");
        json_object_put(o);
        o = advisor_active_answer("oc_1", "queued", NULL, &reset);
        static const char *const active_reset[] = {"status", "task_id", "session_id", "session_reset",
                                                   "previous_session_id", "note", NULL};
        keys_are(o, active_reset);
        json_object *sid = NULL;
        ck_assert(json_object_object_get_ex(o, "session_id", &sid) && sid == NULL);
        ck_assert_str_eq(json_get_string(o, "note"),
                         "still queued; call taskferry wait with task id \"oc_1\" to continue (no session_id yet)");
        json_object_put(o);

        json_object *tokens = json_object_new_object(), *cost = json_new_number(0.5), *code = json_object_new_int(1);
        o = advisor_settled_answer("oc_1", "done", "ses_1", &fresh, "ok", tokens, cost, code, NULL, NULL);
        static const char *const done[] = {"status", "task_id", "session_id", "session_reset", "message", "tokens", "cost", NULL};
        keys_are(o, done);
        json_object_put(o);
        o = advisor_settled_answer("oc_1", "crashed", NULL, &reset, "", tokens, cost, code, NULL, NULL);
        static const char *const crashed[] = {"status", "task_id", "session_id", "session_reset", "previous_session_id",
                                              "message", "exitCode", "signal", "spawnError", NULL};
        keys_are(o, crashed);
        int64_t c = 0;
        ck_assert(json_get_int64(o, "exitCode", &c) && c == 1);
        json_object_put(o);
        json_object_put(tokens), json_object_put(cost), json_object_put(code);
}
END_TEST

TF_MAIN("advisor", "core", NULL, NULL, 0, resolve_fresh_expired_unknown, owners, map_is_bounded,
        error_text_names_advisor, answer_shapes)
