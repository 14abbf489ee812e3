/* protocol.c: envelopes, validation order, param specs, result shapes, error
 * frames and the client's frame checks. */

#include <check.h>

#include "json-util.h"
#include "macro.h"
#include "protocol.h"
#include "string-util.h"
#include "unit.h"

static const char *err_code(json_object *frame) { return json_get_string(json_get_object(frame, "error"), "code"); }

static json_object *parse_error(const char *line) {
        proto_request r;
        json_object *err = NULL;
        int k = proto_parse_request(line, strlen(line), &r, &err);
        ck_assert_msg(k < 0, "expected an error for %s", line);
        ck_assert_ptr_nonnull(err);
        return err;
}

/* line is refused with code (a mismatch names the line); the error frame,
 * for the caller's other checks. */
static json_object *refused_with(const char *line, const char *code) {
        json_object *e = parse_error(line);
        ck_assert_msg(streq_ptr(err_code(e), code), "%s: %s, want %s", line, strnull(err_code(e)), code);
        return e;
}

static void refused(const char *line, const char *code) { json_object_put(refused_with(line, code)); }

START_TEST(envelopes_have_exact_key_order) {
        json_object *ok = proto_success("abc", json_object_new_object());
        ck_assert_str_eq(json_to_line(ok, NULL), "{\"version\":1,\"ok\":true,\"id\":\"abc\",\"result\":{}}");
        json_object_put(ok);
        json_object *e = proto_error(NULL, "X", "m", "h", NULL);
        ck_assert_str_eq(json_to_line(e, NULL),
                         "{\"version\":1,\"ok\":false,\"error\":{\"code\":\"X\",\"message\":\"m\",\"help\":\"h\",\"detail\":\"m\"},\"id\":null}");
        json_object_put(e);
        json_object *s = proto_shutdown("restart");
        ck_assert_str_eq(json_to_line(s, NULL), "{\"version\":1,\"type\":\"shutdown\",\"reason\":\"restart\"}");
        json_object_put(s);
        json_object *ev = proto_event("sub", json_object_new_object());
        ck_assert_str_eq(json_to_line(ev, NULL), "{\"version\":1,\"type\":\"event\",\"subscriptionId\":\"sub\",\"event\":{}}");
        json_object_put(ev);
}
END_TEST

START_TEST(error_from_text_maps_like_response_error) {
        json_object *e = proto_error_from_text("i", "UNKNOWN_TASK",
                                               "error: unknown task id: zzz\nhelp: run taskferry list to see valid task ids");
        json_object *o = json_get_object(e, "error");
        ck_assert_str_eq(json_get_string(o, "message"), "unknown task id: zzz");
        ck_assert_str_eq(json_get_string(o, "help"), "run taskferry list to see valid task ids");
        ck_assert_str_eq(json_get_string(o, "detail"),
                         "error: unknown task id: zzz\nhelp: run taskferry list to see valid task ids");
        json_object_put(e);
        e = proto_error_from_text("i", "REQUEST_FAILED", "plain failure\nsecond");
        o = json_get_object(e, "error");
        ck_assert_str_eq(json_get_string(o, "message"), "plain failure");
        ck_assert_str_eq(json_get_string(o, "help"), "Retry the request or inspect the daemon logs");
        json_object_put(e);
}
END_TEST

START_TEST(validation_order_and_codes) {
        json_object *e = refused_with("{nope", "MALFORMED_JSON");
        ck_assert_ptr_null(json_get_string(e, "id"));
        json_object_put(e);
        refused("{\"version\":1,\"id\":\"x\",\"method\":\"system.health\",\"params\":{}} trailing", "MALFORMED_JSON");
        refused("\"str\"", "INVALID_REQUEST");
        e = refused_with("{\"version\":1,\"id\":\"x\",\"method\":\"\",\"params\":{}}", "INVALID_REQUEST");
        ck_assert_str_eq(json_get_string(e, "id"), "x");
        json_object_put(e);
        e = refused_with("{\"version\":1.5,\"id\":\"x\",\"method\":\"m\",\"params\":{}}", "UNSUPPORTED_VERSION");
        ck_assert_str_eq(json_get_string(json_get_object(e, "error"), "message"), "unsupported protocol version: 1.5");
        json_object_put(e);
        e = parse_error("{\"version\":null,\"id\":\"x\",\"method\":\"m\",\"params\":{}}");
        ck_assert_str_eq(json_get_string(json_get_object(e, "error"), "message"), "unsupported protocol version: null");
        json_object_put(e);
        e = refused_with("{\"version\":1,\"id\":\"x\",\"method\":\"task.Advisor\",\"params\":{}}", "UNKNOWN_METHOD");
        ck_assert_str_eq(json_get_string(json_get_object(e, "error"), "help"),
                         "Use one of: system.health, task.dispatch, task.cancel, task.status, task.wait, task.list, "
                         "task.stats, task.result, task.tail, task.summary, task.advisor, task.context, task.accept, "
                         "task.reject, task.output, event.subscribe");
        json_object_put(e);
        /* the help is the one list: all 16 methods, served or not yet */
        e = refused_with("{\"version\":1,\"id\":\"x\",\"method\":\"task.bogus\",\"params\":{}}", "UNKNOWN_METHOD");
        _cleanup_free_ char *want = strdup("Use one of: ");
        size_t n_methods = 0;
        for (const char *const *m = protocol_methods; *m; m++, n_methods++) {
                char *nw = strdup_printf("%s%s%s", want, m == protocol_methods ? "" : ", ", *m);
                free(want);
                want = nw;
        }
        ck_assert_uint_eq(n_methods, 16);
        ck_assert_str_eq(json_get_string(json_get_object(e, "error"), "help"), want);
        for (const char *const *m = protocol_methods; *m; m++) ck_assert_msg(proto_method_served(*m), "%s", *m);
        ck_assert(!proto_method_served("task.bogus"));
        ck_assert(!proto_method_served(NULL));
        json_object_put(e);
        /* event.subscribe: all === true, or a directory, or a taskId */
        static const char *const bad_sub[] = {"{}", "{\"all\":false}", "{\"summaries\":true}", "{\"all\":null}",
                                             "{\"directory\":\"rel\"}", "{\"taskId\":\"\"}", "{\"internal\":true}",
                                             "{\"all\":true,\"role\":\"x\"}"};
        for (size_t i = 0; i < ELEMENTSOF(bad_sub); i++) {
                char *line = strdup_printf("{\"version\":1,\"id\":\"x\",\"method\":\"event.subscribe\",\"params\":%s}", bad_sub[i]);
                refused(line, "INVALID_PARAMS");
                free(line);
        }
        /* task.summary: env with mode activity has its own message */
        e = refused_with("{\"version\":1,\"id\":\"x\",\"method\":\"task.summary\",\"params\":{\"taskId\":\"t\","
                         "\"mode\":\"activity\",\"env\":{}}}",
                         "INVALID_PARAMS");
        ck_assert_str_eq(json_get_string(json_get_object(e, "error"), "message"),
                         "task.summary does not accept env with mode \"activity\"");
        json_object_put(e);
        refused("{\"version\":1,\"id\":\"x\",\"method\":\"task.summary\",\"params\":{\"taskId\":\"t\","
                "\"maxWords\":74}}",
                "INVALID_PARAMS");
        /* diskMax: a positive integer of bytes */
        const char *bad_disk[] = {"0", "-1", "\"50M\"", "1.5", "9007199254740992", "null"};
        for (size_t i = 0; i < ELEMENTSOF(bad_disk); i++) {
                char *req = strdup_printf("{\"version\":1,\"id\":\"x\",\"method\":\"task.dispatch\",\"params\":"
                                          "{\"prompt\":\"p\",\"directory\":\"/x\",\"diskMax\":%s}}",
                                          bad_disk[i]);
                refused(req, "INVALID_PARAMS");
                free(req);
        }
        e = refused_with("{\"version\":1,\"id\":\"x\",\"method\":\"task.status\",\"params\":{\"taskId\":null}}", "INVALID_PARAMS");
        ck_assert_str_eq(json_get_string(json_get_object(e, "error"), "help"),
                         "Check the parameter names and types for task.status");
        json_object_put(e);
}
END_TEST

/* The views' params: chars is 1..131072, a path holding NUL is no
 * string a C reader could open, context needs an absolute directory, stats
 * takes nothing. */
START_TEST(view_params_refused) {
        const char *bad[] = {
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.tail\",\"params\":{\"taskId\":\"t\",\"chars\":131073}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.tail\",\"params\":{\"taskId\":\"t\",\"chars\":0}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.tail\",\"params\":{\"taskId\":\"t\",\"chars\":1.5}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.tail\",\"params\":{\"taskId\":\"t\",\"chars\":null}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.output\",\"params\":{\"taskId\":\"t\",\"path\":\"a\\u0000b\"}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.output\",\"params\":{\"taskId\":\"t\",\"path\":\"\"}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.output\",\"params\":{\"taskId\":\"t\",\"maxOutputFileBytes\":0}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.context\",\"params\":{}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.context\",\"params\":{\"directory\":\"rel\"}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.stats\",\"params\":{\"all\":true}}",
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) refused(bad[i], "INVALID_PARAMS");
}
END_TEST

START_TEST(valid_requests) {
        const char *ok[] = {
                "{\"version\":1,\"id\":\"a\",\"method\":\"system.health\",\"params\":{}}",
                "{\"params\":{},\"method\":\"system.health\",\"id\":\"a\",\"version\":1.0}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.dispatch\",\"params\":{\"prompt\":\"p\",\"directory\":\"/x\","
                "\"env\":{\"EMPTY\":\"\"},\"executor\":\"shell\",\"originSessionId\":\"s\",\"rwBind\":[\"/a\"]}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.result\",\"params\":{\"taskId\":\"t\",\"fields\":[\"failureDetail\",\"outputDir\"],\"full\":true}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.wait\",\"params\":{\"taskId\":\"t\",\"timeoutMs\":0,\"tailChars\":6}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.list\",\"params\":{}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.cancel\",\"params\":{\"taskId\":\"t\",\"graceMs\":0}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.dispatch\",\"params\":{\"prompt\":\"p\",\"directory\":\"/x\","
                "\"diskMax\":52428800}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.tail\",\"params\":{\"taskId\":\"t\",\"chars\":131072}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.tail\",\"params\":{\"taskId\":\"t\",\"chars\":1}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.output\",\"params\":{\"taskId\":\"t\",\"path\":\"a/b\","
                "\"maxOutputFileBytes\":2000000}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.context\",\"params\":{\"directory\":\"/x\"}}",
                "{\"version\":1,\"id\":\"a\",\"method\":\"task.stats\",\"params\":{}}",
        };
        for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
                proto_request r;
                json_object *err = NULL;
                int k = proto_parse_request(ok[i], strlen(ok[i]), &r, &err);
                ck_assert_msg(k == 0, "rejected: %s -> %s", ok[i], err ? json_to_line(err, NULL) : "");
                ck_assert_str_eq(r.id, "a");
                proto_request_done(&r);
        }
}
END_TEST

START_TEST(client_frame_classification) {
        static const struct { const char *frame; proto_frame_kind kind; } cases[] = {
                { "{\"version\":1,\"ok\":true,\"id\":\"a\",\"result\":{}}", PROTO_FRAME_RESPONSE_OK },
                { "{\"result\":null,\"id\":\"a\",\"ok\":true,\"version\":1}", PROTO_FRAME_RESPONSE_OK },
                { "{\"version\":1,\"ok\":false,\"error\":{\"code\":\"C\",\"message\":\"m\",\"help\":\"h\",\"detail\":\"d\"},\"id\":\"a\"}", PROTO_FRAME_RESPONSE_ERROR },
                { "{\"version\":1,\"type\":\"event\",\"subscriptionId\":\"s\",\"event\":{}}", PROTO_FRAME_EVENT },
                { "{\"version\":1,\"type\":\"shutdown\",\"reason\":\"restart\"}", PROTO_FRAME_SHUTDOWN },
                { "{\"version\":1,\"type\":\"shutdown\"}", PROTO_FRAME_SHUTDOWN },
                /* violations */
                { "[]", PROTO_FRAME_INVALID },
                { "\"x\"", PROTO_FRAME_INVALID },
                { "{\"version\":2,\"ok\":true,\"id\":\"a\",\"result\":{}}", PROTO_FRAME_INVALID },
                { "{\"version\":\"1\",\"ok\":true,\"id\":\"a\",\"result\":{}}", PROTO_FRAME_INVALID },
                { "{\"ok\":true,\"id\":\"a\",\"result\":{}}", PROTO_FRAME_INVALID },
                { "{\"version\":1,\"ok\":true,\"id\":\"a\",\"result\":{},\"extra\":1}", PROTO_FRAME_INVALID },
                { "{\"version\":1,\"ok\":true,\"id\":\"a\"}", PROTO_FRAME_INVALID },
                { "{\"version\":1,\"ok\":true,\"id\":7,\"result\":{}}", PROTO_FRAME_INVALID },
                { "{\"version\":1,\"ok\":\"true\",\"id\":\"a\",\"result\":{}}", PROTO_FRAME_INVALID },
                { "{\"version\":1,\"id\":\"a\",\"error\":{\"code\":\"C\",\"message\":\"m\",\"help\":\"h\",\"detail\":\"d\"}}", PROTO_FRAME_INVALID },
                /* an id-null error frame kills the connection */
                { "{\"version\":1,\"ok\":false,\"error\":{\"code\":\"C\",\"message\":\"m\",\"help\":\"h\",\"detail\":\"d\"},\"id\":null}", PROTO_FRAME_INVALID },
                { "{\"version\":1,\"ok\":false,\"error\":{\"code\":\"C\",\"message\":\"m\",\"help\":\"h\"},\"id\":\"a\"}", PROTO_FRAME_INVALID },
                { "{\"version\":1,\"ok\":false,\"error\":{\"code\":\"C\",\"message\":\"m\",\"help\":\"h\",\"detail\":1},\"id\":\"a\"}", PROTO_FRAME_INVALID },
                { "{\"version\":1,\"ok\":false,\"error\":{\"code\":\"C\",\"message\":\"m\",\"help\":\"h\",\"detail\":\"d\",\"x\":\"y\"},\"id\":\"a\"}", PROTO_FRAME_INVALID },
                { "{\"version\":1,\"ok\":false,\"error\":\"boom\",\"id\":\"a\"}", PROTO_FRAME_INVALID },
                { "{\"version\":1,\"type\":\"event\",\"event\":{}}", PROTO_FRAME_INVALID },
                { "{\"version\":1,\"type\":\"event\",\"subscriptionId\":\"\",\"event\":{}}", PROTO_FRAME_INVALID },
                { "{\"version\":1,\"type\":\"event\",\"subscriptionId\":\"s\",\"event\":[]}", PROTO_FRAME_INVALID },
                { "{\"version\":1,\"type\":\"event\",\"subscriptionId\":\"s\",\"event\":{},\"id\":\"a\"}", PROTO_FRAME_INVALID },
                /* 1.0 is the number 1 (JavaScript) */
                { "{\"version\":1.0,\"ok\":true,\"id\":\"a\",\"result\":{}}", PROTO_FRAME_RESPONSE_OK },
                /* ok must agree with the payload key */
                { "{\"version\":1,\"ok\":false,\"id\":\"a\",\"result\":{}}", PROTO_FRAME_INVALID },
                { "{\"version\":1,\"ok\":true,\"error\":{\"code\":\"C\",\"message\":\"m\",\"help\":\"h\",\"detail\":\"d\"},\"id\":\"a\"}", PROTO_FRAME_INVALID },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                json_object *v = NULL;
                ck_assert_int_eq(json_parse_strict(cases[i].frame, strlen(cases[i].frame), &v), 0);
                ck_assert_msg(proto_classify_frame(v) == cases[i].kind, "%s", cases[i].frame);
                json_object_put(v);
        }
}
END_TEST

START_TEST(nul_and_invalid_utf8_are_rejected) {
        refused("{\"version\":1,\"id\":\"a\\u0000b\",\"method\":\"system.health\",\"params\":{}}", "INVALID_REQUEST");
        refused("{\"version\":1,\"id\":\"a\",\"method\":\"system.health\\u0000\",\"params\":{}}", "INVALID_REQUEST");
        refused("{\"version\":1,\"id\":\"a\",\"method\":\"task.dispatch\",\"params\":{\"prompt\":\"echo a\\u0000b\",\"directory\":\"/x\"}}", "INVALID_PARAMS");
        refused("{\"version\":1,\"id\":\"a\",\"method\":\"task.dispatch\",\"params\":{\"prompt\":\"p\",\"directory\":\"/x\",\"env\":{\"K\":\"v\\u0000w\"}}}", "INVALID_PARAMS");
        refused("{\"version\":1,\"id\":\"\xff\",\"method\":\"system.health\",\"params\":{}}", "MALFORMED_JSON");
        refused("{\"version\":1,\"id\":\"a\",\"method\":\"task.dispatch\",\"params\":{\"prompt\":\"\xc3\x28\",\"directory\":\"/x\"}}", "MALFORMED_JSON");
        /* valid multi-byte UTF-8 is fine */
        const char *ok = "{\"version\":1,\"id\":\"\xc3\xa9\xe2\x9c\x93\",\"method\":\"system.health\",\"params\":{}}";
        proto_request r;
        json_object *err = NULL;
        ck_assert_int_eq(proto_parse_request(ok, strlen(ok), &r, &err), 0);
        proto_request_done(&r);
}
END_TEST

TF_MAIN("protocol", "core", NULL, NULL, 0, envelopes_have_exact_key_order, error_from_text_maps_like_response_error,
        validation_order_and_codes, valid_requests, view_params_refused, client_frame_classification,
        nul_and_invalid_utf8_are_rejected)
