/* protocol-params.c: the method names and each method's field table, which
 * both validates a request's params (every key known and of its type, JSON
 * null refused, the required ones present, the methods' own rules) and fills
 * the typed struct a handler reads (spec protocol-cli.md, the methods'
 * params). */

#include <check.h>
#include <errno.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "protocol-params.h"
#include "protocol.h"
#include "unit.h"

static json_object *json(const char *text) {
        json_object *o = NULL;
        ck_assert_msg(json_parse_strict(text, strlen(text), &o) == 0, "not JSON: %s", text);
        return o;
}

/* params (JSON text) of method parse; 0 or the error (an INVALID_PARAMS
 * frame for id "r7" is then checked). The parsed params stay in *p, their
 * JSON in *ret_json (the caller frees both). */
static int parse(ProtoMethod m, const char *text, ProtoParams *p, json_object **ret_json) {
        json_object *params = json(text), *err = NULL;
        int r = proto_params_parse("r7", m, params, p, &err);
        if (r < 0) {
                ck_assert_int_eq(r, -EINVAL);
                ck_assert_ptr_nonnull(err);
                ck_assert_int_eq(json_get_bool(err, "ok", true), false);
                ck_assert_str_eq(json_get_string(err, "id"), "r7");
                ck_assert_str_eq(json_get_string(json_get_object(err, "error"), "code"), E_INVALID_PARAMS);
                json_object_put(err);
        } else
                ck_assert_ptr_null(err);
        *ret_json = params;
        return r;
}

static void accepted(ProtoMethod m, const char *text) {
        ProtoParams p;
        json_object *j;
        ck_assert_msg(parse(m, text, &p, &j) == 0, "%s refused %s", proto_method_to_string(m), text);
        proto_params_done(m, &p);
        json_object_put(j);
}

static void refused(ProtoMethod m, const char *text) {
        ProtoParams p;
        json_object *j;
        memset(&p, 0x5a, sizeof p);
        ck_assert_msg(parse(m, text, &p, &j) == -EINVAL, "%s accepted %s", proto_method_to_string(m), text);
        /* a refusal owns nothing: done after it is safe (and a no-op) */
        proto_params_done(m, &p);
        json_object_put(j);
}

START_TEST(method_names_round_trip) {
        ck_assert_int_eq(_PROTO_METHOD_MAX, 16);
        for (int m = 0; m < _PROTO_METHOD_MAX; m++) {
                const char *s = proto_method_to_string((ProtoMethod) m);
                ck_assert_ptr_nonnull(s);
                /* the enum's order is protocol_methods' order (UNKNOWN_METHOD's help) */
                ck_assert_str_eq(s, protocol_methods[m]);
                ck_assert_int_eq(proto_method_from_string(s), m);
        }
        ck_assert_ptr_null(protocol_methods[_PROTO_METHOD_MAX]);
        ck_assert_str_eq(proto_method_to_string(PROTO_TASK_DISPATCH), "task.dispatch");
        ck_assert_str_eq(proto_method_to_string(PROTO_EVENT_SUBSCRIBE), "event.subscribe");
        ck_assert_ptr_null(proto_method_to_string(_PROTO_METHOD_MAX));
        ck_assert_ptr_null(proto_method_to_string(_PROTO_METHOD_INVALID));
        ck_assert_ptr_null(proto_method_to_string((ProtoMethod) -1));
        const char *bad[] = {"", "task", "task.", "TASK.DISPATCH", "task.dispatch ", " task.dispatch",
                             "task.dispatchx", "task_dispatch", "event.subscribe\n", "task.bogus"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ck_assert_msg(proto_method_from_string(bad[i]) == _PROTO_METHOD_INVALID, "%s", bad[i]);
        ck_assert_int_eq(proto_method_from_string(NULL), -EINVAL);
}
END_TEST

START_TEST(dispatch_fills_every_field) {
        ProtoParams p;
        json_object *j;
        ck_assert_int_eq(parse(PROTO_TASK_DISPATCH,
                               "{\"prompt\":\"do it\",\"directory\":\"/w/repo\",\"model\":\"a/b\",\"variant\":\"high\","
                               "\"sessionId\":\"s1\",\"env\":{\"K\":\"v\",\"E\":\"\"},\"finalMarker\":\"DONE\","
                               "\"originSessionId\":\"o1\",\"noSandbox\":false,\"noOverlay\":true,"
                               "\"allowedDirs\":[\"/a\",\"/b\"],\"rwBind\":[\"/rw\"],\"roBind\":[\"/ro\",\"x\"],"
                               "\"executor\":\"pi\",\"class\":\"fast\",\"parentTaskId\":\"oc_1\","
                               "\"diskMax\":1048576,\"memoryMax\":2.0,\"tasksMax\":9007199254740991,\"job\":\"nightly\"}",
                               &p, &j),
                         0);
        ProtoDispatchParams *d = &p.dispatch;
        ck_assert_str_eq(d->prompt, "do it");
        /* strings are borrowed from the params */
        ck_assert_ptr_eq(d->prompt, json_get_string(j, "prompt"));
        ck_assert_str_eq(d->directory, "/w/repo");
        ck_assert_str_eq(d->model, "a/b");
        ck_assert_str_eq(d->variant, "high");
        ck_assert_str_eq(d->session_id, "s1");
        ck_assert_ptr_eq(d->env, json_get(j, "env"));
        ck_assert_str_eq(d->final_marker, "DONE");
        ck_assert_str_eq(d->origin_session_id, "o1");
        ck_assert(!d->no_sandbox);
        ck_assert(d->has_no_sandbox); /* given, though false */
        ck_assert(d->no_overlay);
        ck_assert(d->has_no_overlay);
        tf_assert_argv(d->allowed_dirs, "/a", "/b", NULL);
        tf_assert_argv(d->rw_bind, "/rw", NULL);
        tf_assert_argv(d->ro_bind, "/ro", "x", NULL);
        /* arrays are owned copies */
        ck_assert_ptr_ne(d->allowed_dirs[0], json_object_get_string(json_object_array_get_idx(json_get(j, "allowedDirs"), 0)));
        ck_assert_str_eq(d->executor, "pi");
        ck_assert_str_eq(d->class_name, "fast");
        ck_assert_str_eq(d->parent_task_id, "oc_1");
        ck_assert(d->disk_max.set);
        ck_assert_int_eq(d->disk_max.value, 1048576);
        ck_assert(d->memory_max.set); /* an integral double counts */
        ck_assert_int_eq(d->memory_max.value, 2);
        ck_assert(d->tasks_max.set);
        ck_assert_int_eq(d->tasks_max.value, 9007199254740991LL);
        ck_assert_str_eq(d->job, "nightly");
        ck_assert_ptr_null(proto_params_task_id(PROTO_TASK_DISPATCH, &p));
        proto_params_done(PROTO_TASK_DISPATCH, &p);
        ck_assert_ptr_null(d->allowed_dirs);
        ck_assert_ptr_null(d->rw_bind);
        ck_assert_ptr_null(d->ro_bind);
        /* done twice is harmless */
        proto_params_done(PROTO_TASK_DISPATCH, &p);
        json_object_put(j);
}
END_TEST

START_TEST(absent_params_are_unset) {
        ProtoParams p;
        json_object *j;
        ck_assert_int_eq(parse(PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/\"}", &p, &j), 0);
        ck_assert_ptr_null(p.dispatch.model);
        ck_assert_ptr_null(p.dispatch.env);
        ck_assert(!p.dispatch.has_no_sandbox);
        ck_assert(!p.dispatch.has_no_overlay);
        ck_assert_ptr_null(p.dispatch.allowed_dirs);
        ck_assert(!p.dispatch.disk_max.set);
        ck_assert_int_eq(p.dispatch.disk_max.value, 0);
        ck_assert_ptr_null(p.dispatch.executor);
        proto_params_done(PROTO_TASK_DISPATCH, &p);
        json_object_put(j);
}
END_TEST

/* Refused values of each field type, each with the rest of the params
 * valid (so that this field is the reason). */
static const struct {
        ProtoMethod m;
        const char *params;
} refusals[] = {
        /* required fields */
        {PROTO_TASK_DISPATCH, "{}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\"}"},
        {PROTO_TASK_DISPATCH, "{\"directory\":\"/d\"}"},
        {PROTO_TASK_ADVISOR, "{\"prompt\":\"p\",\"directory\":\"/d\"}"}, /* model is required there */
        {PROTO_TASK_STATUS, "{}"},
        {PROTO_TASK_CONTEXT, "{}"},
        /* an unknown key, also one differing in case only */
        {PROTO_TASK_STATUS, "{\"taskId\":\"t\",\"bogus\":1}"},
        {PROTO_TASK_STATUS, "{\"taskid\":\"t\"}"},
        {PROTO_SYSTEM_HEALTH, "{\"x\":1}"},
        {PROTO_TASK_STATS, "{\"all\":true}"},
        /* P_STR: null, empty, embedded NUL, another type */
        {PROTO_TASK_STATUS, "{\"taskId\":null}"},
        {PROTO_TASK_STATUS, "{\"taskId\":\"\"}"},
        {PROTO_TASK_STATUS, "{\"taskId\":\"a\\u0000b\"}"},
        {PROTO_TASK_STATUS, "{\"taskId\":7}"},
        {PROTO_TASK_STATUS, "{\"taskId\":[\"t\"]}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"model\":null}"},
        /* P_ABS */
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"rel\"}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"./d\"}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"\"}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\\u0000x\"}"},
        {PROTO_TASK_LIST, "{\"directory\":\"~/x\"}"},
        /* P_BOOL: no truthy numbers or strings */
        {PROTO_TASK_ACCEPT, "{\"taskId\":\"t\",\"force\":1}"},
        {PROTO_TASK_ACCEPT, "{\"taskId\":\"t\",\"force\":\"true\"}"},
        {PROTO_TASK_ACCEPT, "{\"taskId\":\"t\",\"force\":null}"},
        /* P_INT_POS */
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"diskMax\":0}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"diskMax\":-1}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"diskMax\":1.5}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"diskMax\":\"10\"}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"memoryMax\":9007199254740992}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"tasksMax\":1e300}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"tasksMax\":18446744073709551615}"},
        {PROTO_TASK_OUTPUT, "{\"taskId\":\"t\",\"maxOutputFileBytes\":0}"},
        {PROTO_TASK_WAIT, "{\"taskId\":\"t\",\"tailChars\":0}"},
        /* P_INT_NONNEG */
        {PROTO_TASK_CANCEL, "{\"taskId\":\"t\",\"graceMs\":-1}"},
        {PROTO_TASK_WAIT, "{\"taskId\":\"t\",\"timeoutMs\":0.5}"},
        {PROTO_TASK_ADVISOR, "{\"prompt\":\"p\",\"directory\":\"/d\",\"model\":\"m\",\"timeoutMs\":-5}"},
        /* P_ENV */
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"env\":[]}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"env\":\"K=v\"}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"env\":{\"\":\"v\"}}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"env\":{\"A=B\":\"v\"}}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"env\":{\"K\":1}}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"env\":{\"K\":null}}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"env\":{\"K\":\"a\\u0000b\"}}"},
        {PROTO_TASK_SUMMARY, "{\"taskId\":\"t\",\"env\":{\"K\":true}}"},
        /* P_STRS */
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"allowedDirs\":[]}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"allowedDirs\":\"/a\"}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"rwBind\":[\"/a\",\"\"]}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"rwBind\":[\"/a\",null]}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"roBind\":[1]}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"roBind\":[\"/a\\u0000/b\"]}"},
        /* P_EXECUTOR: exactly the three ids */
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"executor\":\"bash\"}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"executor\":\"PI\"}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"executor\":\"\"}"},
        {PROTO_TASK_ADVISOR, "{\"prompt\":\"p\",\"directory\":\"/d\",\"model\":\"m\",\"executor\":1}"},
        /* the C string of "pi\u0000x" reads "pi": the id is more than that */
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"executor\":\"pi\\u0000x\"}"},
        {PROTO_TASK_ADVISOR, "{\"prompt\":\"p\",\"directory\":\"/d\",\"model\":\"m\",\"executor\":\"shell\\u0000\"}"},
        /* P_FIELDS */
        {PROTO_TASK_RESULT, "{\"taskId\":\"t\",\"fields\":[]}"},
        {PROTO_TASK_RESULT, "{\"taskId\":\"t\",\"fields\":[\"nope\"]}"},
        {PROTO_TASK_RESULT, "{\"taskId\":\"t\",\"fields\":[\"message\",\"status\"]}"},
        {PROTO_TASK_RESULT, "{\"taskId\":\"t\",\"fields\":[null]}"},
        {PROTO_TASK_RESULT, "{\"taskId\":\"t\",\"fields\":[\"message\\u0000x\"]}"},
        {PROTO_TASK_RESULT, "{\"taskId\":\"t\",\"fields\":\"status\"}"},
        /* P_MAX_WORDS 75..300 */
        {PROTO_TASK_SUMMARY, "{\"taskId\":\"t\",\"maxWords\":74}"},
        {PROTO_TASK_SUMMARY, "{\"taskId\":\"t\",\"maxWords\":301}"},
        {PROTO_TASK_SUMMARY, "{\"taskId\":\"t\",\"maxWords\":100.5}"},
        /* P_SUMMARY_MODE */
        {PROTO_TASK_SUMMARY, "{\"taskId\":\"t\",\"mode\":\"Report\"}"},
        {PROTO_TASK_SUMMARY, "{\"taskId\":\"t\",\"mode\":\"\"}"},
        {PROTO_TASK_SUMMARY, "{\"taskId\":\"t\",\"mode\":\"report\\u0000\"}"},
        /* P_TAIL_CHARS 1..131072 */
        {PROTO_TASK_TAIL, "{\"taskId\":\"t\",\"chars\":0}"},
        {PROTO_TASK_TAIL, "{\"taskId\":\"t\",\"chars\":131073}"},
        /* event.subscribe: all (true), a directory or a taskId */
        {PROTO_EVENT_SUBSCRIBE, "{}"},
        {PROTO_EVENT_SUBSCRIBE, "{\"all\":false}"},
        {PROTO_EVENT_SUBSCRIBE, "{\"summaries\":true,\"originSessionId\":\"o\"}"},
        {PROTO_EVENT_SUBSCRIBE, "{\"directory\":\"relative\"}"},
        /* params that are no object */
        {PROTO_TASK_STATUS, "[]"},
        {PROTO_TASK_STATUS, "\"taskId\""},
        {PROTO_SYSTEM_HEALTH, "null"},
};

START_TEST(refusals_table) {
        refused(refusals[_i].m, refusals[_i].params);
}
END_TEST

static const struct {
        ProtoMethod m;
        const char *params;
} acceptances[] = {
        {PROTO_SYSTEM_HEALTH, "{}"},
        {PROTO_TASK_STATS, "{}"},
        {PROTO_TASK_LIST, "{}"},
        {PROTO_TASK_LIST, "{\"directory\":\"/\"}"},
        {PROTO_TASK_CANCEL, "{\"taskId\":\"t\",\"graceMs\":0}"},
        {PROTO_TASK_WAIT, "{\"taskId\":\"t\",\"timeoutMs\":0,\"tailChars\":1}"},
        {PROTO_TASK_SUMMARY, "{\"taskId\":\"t\",\"maxWords\":75}"},
        {PROTO_TASK_SUMMARY, "{\"taskId\":\"t\",\"maxWords\":300,\"mode\":\"activity\"}"},
        {PROTO_TASK_SUMMARY, "{\"taskId\":\"t\",\"mode\":\"report\",\"env\":{\"K\":\"v\"}}"},
        {PROTO_TASK_SUMMARY, "{\"taskId\":\"t\",\"env\":{}}"},
        {PROTO_TASK_TAIL, "{\"taskId\":\"t\",\"chars\":1}"},
        {PROTO_TASK_TAIL, "{\"taskId\":\"t\",\"chars\":131072}"},
        {PROTO_TASK_RESULT, "{\"taskId\":\"t\",\"full\":true,\"fields\":[\"changesetStatus\",\"diffPath\"]}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"executor\":\"opencode\"}"},
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"p\",\"directory\":\"/d\",\"executor\":\"shell\"}"},
        /* any bytes of valid UTF-8, however long the key's value */
        {PROTO_TASK_DISPATCH, "{\"prompt\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\",\"directory\":\"/d,:\\\\ x\"}"},
        {PROTO_EVENT_SUBSCRIBE, "{\"all\":true}"},
        {PROTO_EVENT_SUBSCRIBE, "{\"directory\":\"/w\",\"summaries\":false}"},
        {PROTO_EVENT_SUBSCRIBE, "{\"taskId\":\"t\",\"all\":false}"},
        {PROTO_TASK_OUTPUT, "{\"taskId\":\"t\",\"path\":\"../x\",\"maxOutputFileBytes\":1}"},
        {PROTO_TASK_CONTEXT, "{\"directory\":\"/x\"}"},
        {PROTO_TASK_REJECT, "{\"taskId\":\"t\"}"},
};

START_TEST(acceptances_table) {
        accepted(acceptances[_i].m, acceptances[_i].params);
}
END_TEST

START_TEST(every_result_field_is_accepted) {
        for (const char *const *f = protocol_result_fields; *f; f++) {
                _cleanup_free_ char *text = NULL;
                ck_assert_int_ge(asprintf(&text, "{\"taskId\":\"t\",\"fields\":[\"%s\"]}", *f), 0);
                ProtoParams p;
                json_object *j;
                ck_assert_msg(parse(PROTO_TASK_RESULT, text, &p, &j) == 0, "%s", *f);
                tf_assert_argv(p.result.fields, *f, NULL);
                proto_params_done(PROTO_TASK_RESULT, &p);
                ck_assert_ptr_null(p.result.fields);
                json_object_put(j);
        }
}
END_TEST

START_TEST(summary_env_with_activity_has_its_own_message) {
        json_object *params = json("{\"taskId\":\"t\",\"mode\":\"activity\",\"env\":{\"K\":\"v\"}}"), *err = NULL;
        ProtoParams p;
        ck_assert_int_eq(proto_params_parse("r9", PROTO_TASK_SUMMARY, params, &p, &err), -EINVAL);
        json_object *e = json_get_object(err, "error");
        ck_assert_str_eq(json_get_string(e, "code"), E_INVALID_PARAMS);
        ck_assert_str_eq(json_get_string(e, "message"), "task.summary does not accept env with mode \"activity\"");
        json_object_put(err);
        json_object_put(params);
}
END_TEST

START_TEST(invalid_message_names_the_method) {
        json_object *params = json("{\"taskId\":\"\"}"), *err = NULL;
        ProtoParams p;
        ck_assert_int_eq(proto_params_parse(NULL, PROTO_TASK_WAIT, params, &p, &err), -EINVAL);
        json_object *e = json_get_object(err, "error");
        ck_assert_str_eq(json_get_string(e, "message"), "invalid params for task.wait");
        ck_assert_str_eq(json_get_string(e, "help"), "Check the parameter names and types for task.wait");
        /* a request without an id is answered with id null */
        ck_assert(json_object_object_get_ex(err, "id", NULL));
        ck_assert_ptr_null(json_get(err, "id"));
        json_object_put(err);
        /* a NULL params object and a method outside the table are refused too */
        err = NULL;
        ck_assert_int_eq(proto_params_parse("r", PROTO_TASK_STATUS, NULL, &p, &err), -EINVAL);
        ck_assert_ptr_nonnull(err);
        json_object_put(err);
        err = NULL;
        ck_assert_int_eq(proto_params_parse("r", _PROTO_METHOD_MAX, params, &p, &err), -EINVAL);
        ck_assert_ptr_nonnull(err);
        json_object_put(err);
        json_object_put(params);
}
END_TEST

START_TEST(task_id_of_each_method) {
        static const struct {
                ProtoMethod m;
                const char *params;
        } with[] = {
                {PROTO_TASK_CANCEL, "{\"taskId\":\"a1\"}"},   {PROTO_TASK_STATUS, "{\"taskId\":\"a1\"}"},
                {PROTO_TASK_WAIT, "{\"taskId\":\"a1\"}"},     {PROTO_TASK_RESULT, "{\"taskId\":\"a1\"}"},
                {PROTO_TASK_TAIL, "{\"taskId\":\"a1\"}"},     {PROTO_TASK_SUMMARY, "{\"taskId\":\"a1\"}"},
                {PROTO_TASK_ACCEPT, "{\"taskId\":\"a1\"}"},   {PROTO_TASK_REJECT, "{\"taskId\":\"a1\"}"},
                {PROTO_TASK_OUTPUT, "{\"taskId\":\"a1\"}"},   {PROTO_EVENT_SUBSCRIBE, "{\"taskId\":\"a1\"}"},
        };
        for (size_t i = 0; i < ELEMENTSOF(with); i++) {
                ProtoParams p;
                json_object *j;
                ck_assert_int_eq(parse(with[i].m, with[i].params, &p, &j), 0);
                ck_assert_msg(streq_ptr(proto_params_task_id(with[i].m, &p), "a1"), "%s",
                              proto_method_to_string(with[i].m));
                proto_params_done(with[i].m, &p);
                json_object_put(j);
        }
        /* event.subscribe without one: NULL */
        ProtoParams p;
        json_object *j;
        ck_assert_int_eq(parse(PROTO_EVENT_SUBSCRIBE, "{\"all\":true}", &p, &j), 0);
        ck_assert_ptr_null(proto_params_task_id(PROTO_EVENT_SUBSCRIBE, &p));
        json_object_put(j);
        /* methods without a taskId param */
        ProtoMethod none[] = {PROTO_SYSTEM_HEALTH, PROTO_TASK_DISPATCH, PROTO_TASK_LIST, PROTO_TASK_STATS,
                              PROTO_TASK_ADVISOR, PROTO_TASK_CONTEXT, _PROTO_METHOD_MAX, _PROTO_METHOD_INVALID};
        memset(&p, 0x5a, sizeof p);
        for (size_t i = 0; i < ELEMENTSOF(none); i++) ck_assert_ptr_null(proto_params_task_id(none[i], &p));
        /* done on a method outside the table touches nothing */
        proto_params_done(_PROTO_METHOD_INVALID, &p);
        proto_params_done(_PROTO_METHOD_MAX, &p);
}
END_TEST

START_TEST(validate_by_name) {
        json_object *params = json("{\"taskId\":\"t\"}"), *err = NULL;
        ck_assert_int_eq(proto_validate_params("1", "task.status", params, &err), 0);
        ck_assert_ptr_null(err);
        ck_assert_int_eq(proto_validate_params("1", "system.health", params, &err), -EINVAL);
        ck_assert_ptr_nonnull(err);
        json_object_put(err);
        json_object_put(params);
        /* string arrays are freed after validation (LeakSanitizer) */
        params = json("{\"prompt\":\"p\",\"directory\":\"/d\",\"rwBind\":[\"/a\",\"/b\"]}");
        ck_assert_int_eq(proto_validate_params("1", "task.dispatch", params, &err), 0);
        json_object_put(params);
}
END_TEST

int main(void) {
        Suite *s = suite_create("protocol-params");
        TCase *tc = tf_tcase(s, "params", NULL, NULL, 0,
                             TF_TESTS(method_names_round_trip, dispatch_fills_every_field, absent_params_are_unset,
                                      every_result_field_is_accepted, summary_env_with_activity_has_its_own_message,
                                      invalid_message_names_the_method, task_id_of_each_method, validate_by_name));
        TF_LOOP(tc, refusals_table, refusals);
        TF_LOOP(tc, acceptances_table, acceptances);
        return tf_run_suite(s);
}
