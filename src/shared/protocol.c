#include "protocol.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "json-util.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"

const char *const protocol_result_fields[] = {
        "message",       "narration",      "tokens",          "cost",          "sessionId",
        "exitCode",      "signal",         "spawnError",      "failureReason", "failureDetail",
        "logPath",       "outputDir",      "incomplete",      "finalMarker",   "finalStatus",
        "class",         "diff",           "diffStat",        "changesetError", "checkStatus",
        "checkCommand",  "checkExitCode",  "checkOutputTail", "checkStartedAt", "checkEndedAt",
        "checkOverride", "parentTaskId",   "projectConfigWarning", NULL,
};

const char *const protocol_result_extra_fields[] = {"changesetStatus", "diffPath", NULL};

typedef enum ptype {
        P_STR,    /* non-empty string */
        P_ABS,    /* absolute path string */
        P_BOOL,
        P_INT_POS,  /* safe integer > 0 */
        P_INT_NONNEG, /* safe integer >= 0 */
        P_ENV,    /* object of non-empty, '='-free keys to strings */
        P_STRS,   /* non-empty array of non-empty strings */
        P_EXECUTOR, /* "opencode" | "pi" | "shell" */
        P_FIELDS, /* non-empty array of RESULT_FIELDS */
        P_MAX_WORDS, /* safe integer 75..300 */
        P_SUMMARY_MODE, /* "report" | "activity" */
        P_TAIL_CHARS, /* safe integer 1..131072 (task.tail's chars) */
} ptype;

typedef struct pspec {
        const char *name;
        ptype type;
        bool required;
} pspec;

typedef struct method_spec {
        const char *method;
        const pspec *params;
} method_spec;

static const pspec health_params[] = {{NULL, 0, 0}};
static const pspec dispatch_params[] = {
        {"prompt", P_STR, true},       {"directory", P_ABS, true},    {"model", P_STR, false},
        {"variant", P_STR, false},     {"sessionId", P_STR, false},   {"env", P_ENV, false},
        {"finalMarker", P_STR, false}, {"originSessionId", P_STR, false}, {"noSandbox", P_BOOL, false},
        {"noOverlay", P_BOOL, false},  {"allowedDirs", P_STRS, false}, {"rwBind", P_STRS, false},
        {"roBind", P_STRS, false},     {"executor", P_EXECUTOR, false}, {"class", P_STR, false},
        {"parentTaskId", P_STR, false}, {"diskMax", P_INT_POS, false},
        {"memoryMax", P_INT_POS, false}, {"tasksMax", P_INT_POS, false},
        {"job", P_STR, false}, /* the timer job it comes from (`taskferry job run`): an addition */
        {NULL, 0, 0},
};
static const pspec cancel_params[] = {{"taskId", P_STR, true}, {"graceMs", P_INT_NONNEG, false}, {NULL, 0, 0}};
static const pspec status_params[] = {{"taskId", P_STR, true}, {NULL, 0, 0}};
static const pspec wait_params[] = {
        {"taskId", P_STR, true}, {"timeoutMs", P_INT_NONNEG, false}, {"tailChars", P_INT_POS, false}, {NULL, 0, 0}};
static const pspec list_params[] = {{"directory", P_ABS, false}, {NULL, 0, 0}};
static const pspec result_params[] = {
        {"taskId", P_STR, true}, {"full", P_BOOL, false}, {"fields", P_FIELDS, false}, {NULL, 0, 0}};
static const pspec advisor_params[] = {
        {"prompt", P_STR, true},          {"directory", P_ABS, true},     {"model", P_STR, true},
        {"variant", P_STR, false},        {"sessionId", P_STR, false},    {"timeoutMs", P_INT_NONNEG, false},
        {"env", P_ENV, false},            {"executor", P_EXECUTOR, false}, {"class", P_STR, false},
        {"parentTaskId", P_STR, false},   {NULL, 0, 0}};
static const pspec accept_params[] = {{"taskId", P_STR, true}, {"force", P_BOOL, false}, {NULL, 0, 0}};
static const pspec reject_params[] = {{"taskId", P_STR, true}, {NULL, 0, 0}};
static const pspec summary_params[] = {{"taskId", P_STR, true}, {"maxWords", P_MAX_WORDS, false},
                                       {"mode", P_SUMMARY_MODE, false}, {"env", P_ENV, false}, {NULL, 0, 0}};
static const pspec subscribe_params[] = {
        {"all", P_BOOL, false},     {"directory", P_ABS, false},       {"taskId", P_STR, false},
        {"summaries", P_BOOL, false}, {"originSessionId", P_STR, false}, {NULL, 0, 0}};
static const pspec stats_params[] = {{NULL, 0, 0}};
static const pspec tail_params[] = {{"taskId", P_STR, true}, {"chars", P_TAIL_CHARS, false}, {NULL, 0, 0}};
static const pspec context_params[] = {{"directory", P_ABS, true}, {NULL, 0, 0}};
static const pspec output_params[] = {
        {"taskId", P_STR, true}, {"path", P_STR, false}, {"maxOutputFileBytes", P_INT_POS, false}, {NULL, 0, 0}};

/* The one list of methods: the protocol's 16, in the order the
 * UNKNOWN_METHOD help lists them (15 RPC methods, then event.subscribe),
 * each with its params. A method whose params are NULL is not served yet:
 * the wire treats it as unknown (UNKNOWN_METHOD) until its lane adds its
 * params and its row in the daemon's table (src/daemon/methods.c). */
#define PROTOCOL_METHODS(X)                                                                                \
        X("system.health", health_params) X("task.dispatch", dispatch_params) X("task.cancel", cancel_params) \
        X("task.status", status_params) X("task.wait", wait_params) X("task.list", list_params)            \
        X("task.stats", stats_params) X("task.result", result_params) X("task.tail", tail_params)            \
        X("task.summary", summary_params) X("task.advisor", advisor_params) X("task.context", context_params) \
        X("task.accept", accept_params) X("task.reject", reject_params) X("task.output", output_params)      \
        X("event.subscribe", subscribe_params)
#define METHOD_SPEC(name, params) {name, params},
#define METHOD_NAME(name, params) name,
static const method_spec method_specs[] = {PROTOCOL_METHODS(METHOD_SPEC)};
const char *const protocol_methods[] = {PROTOCOL_METHODS(METHOD_NAME) NULL};

void proto_request_done(proto_request *r) {
        if (r->frame) json_object_put(r->frame);
        memset(r, 0, sizeof *r);
}

json_object *proto_success(const char *id, json_object *result) {
        json_object *o = json_object_new_object();
        if (!o) {
                json_object_put(result);
                return NULL;
        }
        json_add_int(o, "version", PROTOCOL_VERSION);
        json_add_bool(o, "ok", true);
        json_add_string(o, "id", id);
        json_add(o, "result", result);
        return o;
}

json_object *proto_error(const char *id, const char *code, const char *message, const char *help,
                         const char *detail) {
        json_object *o = json_object_new_object(), *e = json_object_new_object();
        if (!o || !e) {
                json_object_put(o);
                json_object_put(e);
                return NULL;
        }
        json_add_string(e, "code", code);
        json_add_string(e, "message", strempty(message));
        json_add_string(e, "help", strempty(help));
        json_add_string(e, "detail", detail ? detail : strempty(message));
        json_add_int(o, "version", PROTOCOL_VERSION);
        json_add_bool(o, "ok", false);
        json_add(o, "error", e);
        json_add_string(o, "id", id);
        return o;
}

json_object *proto_event(const char *subscription_id, json_object *event) {
        json_object *o = json_object_new_object();
        if (!o) {
                json_object_put(event);
                return NULL;
        }
        json_add_int(o, "version", PROTOCOL_VERSION);
        json_add_string(o, "type", "event");
        json_add_string(o, "subscriptionId", subscription_id);
        json_add(o, "event", event);
        return o;
}

json_object *proto_shutdown(const char *reason) {
        json_object *o = json_object_new_object();
        if (!o) return NULL;
        json_add_int(o, "version", PROTOCOL_VERSION);
        json_add_string(o, "type", "shutdown");
        json_add_string(o, "reason", reason);
        return o;
}

/* First line of text starting with `prefix` (prefix stripped, trimmed), malloc'd, or NULL. */
static char *find_prefixed_line(const char *text, const char *prefix) {
        size_t plen = strlen(prefix);
        for (const char *p = text; p && *p;) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t) (nl - p) : strlen(p);
                if (len >= plen && strncmp(p, prefix, plen) == 0) {
                        const char *s = p + plen;
                        size_t n = len - plen;
                        while (n && (*s == ' ' || *s == '\t')) s++, n--;
                        while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
                        return strndup(s, n);
                }
                p = nl ? nl + 1 : NULL;
        }
        return NULL;
}

json_object *proto_error_from_text(const char *id, const char *code, const char *text) {
        _cleanup_free_ char *message = find_prefixed_line(text, "error:");
        if (!message) {
                const char *nl = strchr(text, '\n');
                message = nl ? strndup(text, (size_t) (nl - text)) : strdup(text);
        }
        _cleanup_free_ char *help = find_prefixed_line(text, "help:");
        return proto_error(id, code, message ? message : "", help ? help : "Retry the request or inspect the daemon logs",
                           text);
}

static bool is_safe_integer(json_object *v, int64_t *ret) {
        if (json_object_is_type(v, json_type_int)) {
                int64_t i = json_object_get_int64(v);
                if (i > 9007199254740991LL || i < -9007199254740991LL) return false;
                *ret = i;
                return true;
        }
        if (json_object_is_type(v, json_type_double)) {
                double d = json_object_get_double(v);
                if (!(fabs(d) <= 9007199254740991.0) || d != (double) (int64_t) d) return false; /* NaN too */
                *ret = (int64_t) d;
                return true;
        }
        return false;
}

/* A non-empty string without embedded NUL (C strings would cut it short). */
static bool is_nonempty_string(json_object *v) {
        return v && json_object_is_type(v, json_type_string) && json_object_get_string_len(v) > 0 &&
               !json_string_has_nul(v);
}

static bool check_param(ptype t, json_object *v) {
        int64_t i;
        if (!v) return false; /* JSON null counts as present and is rejected */
        switch (t) {
        case P_STR:
                return is_nonempty_string(v);
        case P_ABS:
                return is_nonempty_string(v) && json_object_get_string(v)[0] == '/';
        case P_BOOL:
                return json_object_is_type(v, json_type_boolean);
        case P_INT_POS:
                return is_safe_integer(v, &i) && i > 0;
        case P_INT_NONNEG:
                return is_safe_integer(v, &i) && i >= 0;
        case P_MAX_WORDS:
                return is_safe_integer(v, &i) && i >= 75 && i <= 300;
        case P_SUMMARY_MODE:
                return is_nonempty_string(v) &&
                       (streq(json_object_get_string(v), "report") || streq(json_object_get_string(v), "activity"));
        case P_TAIL_CHARS:
                return is_safe_integer(v, &i) && i >= 1 && i <= 131072;
        case P_ENV:
                if (!json_object_is_type(v, json_type_object)) return false;
                json_object_object_foreach(v, key, val) {
                        if (!*key || strchr(key, '=')) return false;
                        if (!val || !json_object_is_type(val, json_type_string) || json_string_has_nul(val)) return false;
                }
                return true;
        case P_STRS: {
                if (!json_object_is_type(v, json_type_array)) return false;
                size_t n = json_object_array_length(v);
                if (n == 0) return false;
                for (size_t k = 0; k < n; k++)
                        if (!is_nonempty_string(json_object_array_get_idx(v, k))) return false;
                return true;
        }
        case P_EXECUTOR: {
                if (!json_object_is_type(v, json_type_string)) return false;
                const char *s = json_object_get_string(v);
                return streq(s, "opencode") || streq(s, "pi") || streq(s, "shell");
        }
        case P_FIELDS: {
                if (!json_object_is_type(v, json_type_array)) return false;
                size_t n = json_object_array_length(v);
                if (n == 0) return false;
                for (size_t k = 0; k < n; k++) {
                        json_object *f = json_object_array_get_idx(v, k);
                        if (!f || !json_object_is_type(f, json_type_string)) return false;
                        bool found = false;
                        for (const char *const *rf = protocol_result_fields; *rf; rf++)
                                if (streq(*rf, json_object_get_string(f))) found = true;
                        for (const char *const *rf = protocol_result_extra_fields; *rf; rf++)
                                if (streq(*rf, json_object_get_string(f))) found = true;
                        if (!found) return false;
                }
                return true;
        }
        }
        return false;
}

static const method_spec *find_method(const char *method) {
        for (size_t i = 0; i < ELEMENTSOF(method_specs); i++)
                if (method_specs[i].params && streq(method_specs[i].method, method)) return &method_specs[i];
        return NULL;
}

bool proto_method_served(const char *method) {
        return method && find_method(method);
}

int proto_validate_params(const char *id, const char *method, json_object *params, json_object **ret_error) {
        const method_spec *m = find_method(method);
        bool ok = m != NULL;
        if (ok) {
                json_object_object_foreach(params, key, val) {
                        const pspec *p = m->params;
                        while (p->name && !streq(p->name, key)) p++;
                        if (!p->name || !check_param(p->type, val)) {
                                ok = false;
                                break;
                        }
                }
                for (const pspec *p = m->params; ok && p->name; p++)
                        if (p->required && !json_object_object_get_ex(params, p->name, NULL)) ok = false;
                /* event.subscribe needs all === true, or a directory, or a taskId */
                if (ok && streq(method, "event.subscribe"))
                        ok = json_get_bool(params, "all", false) || json_object_object_get_ex(params, "directory", NULL) ||
                             json_object_object_get_ex(params, "taskId", NULL);
        }
        if (ok && streq(method, "task.summary") && json_object_object_get_ex(params, "env", NULL) &&
            streq_ptr(json_get_string(params, "mode"), "activity")) {
                *ret_error = proto_error(id, E_INVALID_PARAMS, "task.summary does not accept env with mode \"activity\"",
                                         "Omit env, or use mode \"report\" so the spawned summary child can forward caller env",
                                         NULL);
                return -EINVAL;
        }
        if (ok) return 0;
        _cleanup_free_ char *msg = strdup_printf("invalid params for %s", method);
        _cleanup_free_ char *help = strdup_printf("Check the parameter names and types for %s", method);
        *ret_error = proto_error(id, E_INVALID_PARAMS, msg, help, NULL);
        return -EINVAL;
}

/* JavaScript String(v) for the UNSUPPORTED_VERSION message. */
static char *js_string_of(json_object *v) {
        if (!v) return strdup("null");
        switch (json_object_get_type(v)) {
        case json_type_string:
                return strdup(json_object_get_string(v));
        case json_type_boolean:
                return strdup(json_object_get_boolean(v) ? "true" : "false");
        case json_type_int:
                return strdup_printf("%" PRId64, json_object_get_int64(v));
        case json_type_double: {
                char buf[32];
                return strdup(js_number_format(json_object_get_double(v), buf));
        }
        case json_type_array: {
                /* Array#toString joins elements with "," */
                char *out = strdup("");
                for (size_t i = 0; out && i < json_object_array_length(v); i++) {
                        _cleanup_free_ char *e = js_string_of(json_object_array_get_idx(v, i));
                        char *n = strdup_printf("%s%s%s", out, i ? "," : "", e ? e : "");
                        free(out);
                        out = n;
                }
                return out;
        }
        default:
                return strdup("[object Object]");
        }
}

int proto_parse_request(const char *line, size_t len, proto_request *ret, json_object **ret_error) {
        json_object *frame = NULL;
        memset(ret, 0, sizeof *ret);
        *ret_error = NULL;
        if (json_parse_strict(line, len, &frame) < 0) {
                *ret_error = proto_error(NULL, E_MALFORMED_JSON, "request is not valid JSON",
                                         "Send one JSON request object followed by a newline", NULL);
                return *ret_error ? -EBADMSG : -ENOMEM;
        }
        json_object *id = NULL, *method = NULL, *params = NULL, *version = NULL;
        bool ok = json_is_object(frame);
        bool has_version = false;
        if (ok) {
                json_object_object_foreach(frame, key, val) {
                        if (streq(key, "version")) has_version = true, version = val;
                        else if (streq(key, "id")) id = val;
                        else if (streq(key, "method")) method = val;
                        else if (streq(key, "params")) params = val;
                        else ok = false;
                }
        }
        const char *id_str = id && json_object_is_type(id, json_type_string) ? json_object_get_string(id) : NULL;
        if (!ok || !has_version || !is_nonempty_string(id) || !is_nonempty_string(method) || !json_is_object(params)) {
                *ret_error = proto_error(id_str, E_INVALID_REQUEST, "request must contain version, id, method, and params",
                                         "Use `{ version: 1, id: \"request-id\", method: \"system.health\", params: {} }`",
                                         NULL);
                json_object_put(frame);
                return *ret_error ? -EBADMSG : -ENOMEM;
        }
        int64_t v;
        if (!version || !(json_object_is_type(version, json_type_int) || json_object_is_type(version, json_type_double)) ||
            !is_safe_integer(version, &v) || v != PROTOCOL_VERSION) {
                _cleanup_free_ char *vs = js_string_of(version);
                _cleanup_free_ char *msg = strdup_printf("unsupported protocol version: %s", strempty(vs));
                *ret_error = proto_error(id_str, E_UNSUPPORTED_VERSION, msg, "Use protocol version 1", NULL);
                json_object_put(frame);
                return *ret_error ? -EBADMSG : -ENOMEM;
        }
        const char *m = json_object_get_string(method);
        if (!find_method(m)) {
                _cleanup_free_ char *msg = strdup_printf("unknown method: %s", m);
                _cleanup_free_ char *list = strdup("");
                for (const char *const *p = protocol_methods; list && *p; p++) {
                        char *n = strdup_printf("%s%s%s", list, p == protocol_methods ? "" : ", ", *p);
                        free(list);
                        list = n;
                }
                _cleanup_free_ char *help = strdup_printf("Use one of: %s", strempty(list));
                *ret_error = proto_error(id_str, E_UNKNOWN_METHOD, msg, help, NULL);
                json_object_put(frame);
                return *ret_error ? -EBADMSG : -ENOMEM;
        }
        if (proto_validate_params(id_str, m, params, ret_error) < 0) {
                json_object_put(frame);
                return *ret_error ? -EBADMSG : -ENOMEM;
        }
        ret->frame = frame;
        ret->id = id_str;
        ret->method = m;
        ret->params = params;
        return 0;
}

/* True if obj is an object with exactly the given keys (any order). */
static bool has_exact_keys(json_object *obj, const char *const *keys) {
        if (!json_is_object(obj)) return false;
        size_t n = 0;
        for (; keys[n]; n++)
                if (!json_object_object_get_ex(obj, keys[n], NULL)) return false;
        return (size_t) json_object_object_length(obj) == n;
}

static bool is_string(json_object *v) {
        return v && json_object_is_type(v, json_type_string);
}

proto_frame_kind proto_classify_frame(json_object *frame) {
        if (!json_is_object(frame)) return PROTO_FRAME_INVALID;
        json_object *version = NULL, *type = NULL, *ok = NULL, *id = NULL;
        json_object_object_get_ex(frame, "version", &version);
        int64_t v;
        if (!version || !is_safe_integer(version, &v) || v != PROTOCOL_VERSION) return PROTO_FRAME_INVALID;
        json_object_object_get_ex(frame, "type", &type);
        if (is_string(type) && streq(json_object_get_string(type), "shutdown")) return PROTO_FRAME_SHUTDOWN;
        if (is_string(type) && streq(json_object_get_string(type), "event")) {
                static const char *const keys[] = {"version", "type", "subscriptionId", "event", NULL};
                json_object *sid = NULL, *event = NULL;
                json_object_object_get_ex(frame, "subscriptionId", &sid);
                json_object_object_get_ex(frame, "event", &event);
                if (!has_exact_keys(frame, keys) || !is_string(sid) || json_object_get_string_len(sid) == 0 ||
                    !json_is_object(event))
                        return PROTO_FRAME_INVALID;
                return PROTO_FRAME_EVENT;
        }
        json_object_object_get_ex(frame, "ok", &ok);
        json_object_object_get_ex(frame, "id", &id);
        if (!ok || !json_object_is_type(ok, json_type_boolean) || !is_string(id)) return PROTO_FRAME_INVALID;
        if (json_object_get_boolean(ok)) {
                static const char *const keys[] = {"version", "id", "ok", "result", NULL};
                return has_exact_keys(frame, keys) ? PROTO_FRAME_RESPONSE_OK : PROTO_FRAME_INVALID;
        }
        static const char *const keys[] = {"version", "id", "ok", "error", NULL};
        static const char *const error_keys[] = {"code", "message", "help", "detail", NULL};
        json_object *error = NULL;
        json_object_object_get_ex(frame, "error", &error);
        if (!has_exact_keys(frame, keys) || !has_exact_keys(error, error_keys)) return PROTO_FRAME_INVALID;
        for (size_t i = 0; error_keys[i]; i++) {
                json_object *e = NULL;
                json_object_object_get_ex(error, error_keys[i], &e);
                if (!is_string(e)) return PROTO_FRAME_INVALID;
        }
        return PROTO_FRAME_RESPONSE_ERROR;
}

json_object *proto_request_new(const char *id, const char *method, json_object *params) {
        _cleanup_json_ json_object *req = json_object_new_object();
        if (!req) return NULL;
        if (json_add_int(req, "version", PROTOCOL_VERSION) < 0 || json_add_string(req, "id", id) < 0 ||
            json_add_string(req, "method", method) < 0 ||
            json_add(req, "params", params ? json_object_get(params) : json_object_new_object()) < 0)
                return NULL;
        return TAKE_PTR(req);
}

int proto_health_probe(const char *path, int timeout_ms) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof sa.sun_path) return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return -errno;
        int r;
        do r = connect(fd, (struct sockaddr *) &sa, sizeof sa);
        while (r < 0 && errno == EINTR);
        if (r < 0) return -errno;

        _cleanup_json_ json_object *req = proto_request_new(PROTOCOL_HEALTH_PROBE_ID, "system.health", NULL);
        if (!req) return -ENOMEM;
        size_t len;
        const char *line = json_to_line(req, &len);
        _cleanup_free_ char *out = strdup_printf("%s\n", line);
        if (!out) return -ENOMEM;
        for (size_t off = 0; off < len + 1;) {
                ssize_t n = send(fd, out + off, len + 1 - off, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) return 0; /* it took the connection, then closed it */
                off += (size_t) n;
        }

        /* the first line of the answer, at most MAX_BUFFER_BYTES */
        _cleanup_free_ char *buf = NULL;
        size_t have = 0, cap = 0;
        char *nl = NULL;
        uint64_t deadline = mono_ms() + (uint64_t) (timeout_ms > 0 ? timeout_ms : 0);
        while (!nl) {
                uint64_t now = mono_ms();
                if (now >= deadline || have >= PROTOCOL_MAX_BUFFER_BYTES) return 0;
                struct pollfd p = {.fd = fd, .events = POLLIN};
                r = poll(&p, 1, (int) (deadline - now));
                if (r < 0 && errno == EINTR) continue;
                if (r <= 0) return 0;
                if (cap - have < 4096) {
                        size_t ncap = cap ? cap * 2 : 4096;
                        char *nb = realloc(buf, ncap);
                        if (!nb) return -ENOMEM;
                        buf = nb;
                        cap = ncap;
                }
                ssize_t n = recv(fd, buf + have, cap - have, 0);
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) return 0;
                nl = memchr(buf + have, '\n', (size_t) n);
                have += (size_t) n;
        }
        _cleanup_json_ json_object *msg = NULL;
        if (json_parse_strict(buf, (size_t) (nl - buf), &msg) < 0) return 0;
        int64_t v;
        return json_get_int64(msg, "version", &v) && v == PROTOCOL_VERSION &&
               streq_ptr(json_get_string(msg, "id"), PROTOCOL_HEALTH_PROBE_ID) && json_get_bool(msg, "ok", false) &&
               json_get_bool(json_get_object(msg, "result"), "healthy", false);
}
