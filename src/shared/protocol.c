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
#include "protocol-keys.h"
#include "string-util.h"
#include "time-util.h"

const char *const protocol_result_fields[] = {
        PK_message,       PK_narration,     PK_tokens,          PK_cost,           PK_sessionId,
        PK_exitCode,      PK_signal,        PK_spawnError,      PK_failureReason,  PK_failureDetail,
        PK_logPath,       PK_outputDir,     PK_incomplete,      PK_finalMarker,    PK_finalStatus,
        PK_class,         PK_diff,          PK_diffStat,        PK_changesetError, PK_checkStatus,
        PK_checkCommand,  PK_checkExitCode, PK_checkOutputTail, PK_checkStartedAt, PK_checkEndedAt,
        PK_checkOverride, PK_parentTaskId,  PK_projectConfigWarning, NULL,
};

const char *const protocol_result_extra_fields[] = {PK_changesetStatus, PK_diffPath, PK_changesetRisks, PK_directory, NULL};

void proto_request_done(proto_request *r) {
        if (r->frame) proto_params_done(r->method_id, &r->p);
        if (r->frame) json_object_put(r->frame);
        memset(r, 0, sizeof *r);
}

json_object *proto_success(const char *id, json_object *result) {
        json_object *o = json_object_new_object();
        if (!o) {
                json_object_put(result);
                return NULL;
        }
        json_add_int(o, PK_version, PROTOCOL_VERSION);
        json_add_bool(o, PK_ok, true);
        json_add_string(o, PK_id, id);
        json_add(o, PK_result, result);
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
        json_add_string(e, PK_code, code);
        json_add_string(e, PK_message, strempty(message));
        json_add_string(e, PK_help, strempty(help));
        json_add_string(e, PK_detail, detail ? detail : strempty(message));
        json_add_int(o, PK_version, PROTOCOL_VERSION);
        json_add_bool(o, PK_ok, false);
        json_add(o, PK_error, e);
        json_add_string(o, PK_id, id);
        return o;
}

json_object *proto_event(const char *subscription_id, json_object *event) {
        json_object *o = json_object_new_object();
        if (!o) {
                json_object_put(event);
                return NULL;
        }
        json_add_int(o, PK_version, PROTOCOL_VERSION);
        json_add_string(o, PK_type, "event");
        json_add_string(o, PK_subscriptionId, subscription_id);
        json_add(o, PK_event, event);
        return o;
}

json_object *proto_shutdown(const char *reason) {
        json_object *o = json_object_new_object();
        if (!o) return NULL;
        json_add_int(o, PK_version, PROTOCOL_VERSION);
        json_add_string(o, PK_type, "shutdown");
        json_add_string(o, PK_reason, reason);
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
                        if (streq(key, PK_version)) has_version = true, version = val;
                        else if (streq(key, PK_id)) id = val;
                        else if (streq(key, PK_method)) method = val;
                        else if (streq(key, PK_params)) params = val;
                        else ok = false;
                }
        }
        const char *id_str = id && json_object_is_type(id, json_type_string) ? json_object_get_string(id) : NULL;
        if (!ok || !has_version || !json_is_nonempty_string(id) || !json_is_nonempty_string(method) || !json_is_object(params)) {
                *ret_error = proto_error(id_str, E_INVALID_REQUEST, "request must contain version, id, method, and params",
                                         "Use `{ version: 1, id: \"request-id\", method: \"system.health\", params: {} }`",
                                         NULL);
                json_object_put(frame);
                return *ret_error ? -EBADMSG : -ENOMEM;
        }
        int64_t v;
        if (!version || !(json_object_is_type(version, json_type_int) || json_object_is_type(version, json_type_double)) ||
            !json_safe_integer(version, &v) || v != PROTOCOL_VERSION) {
                _cleanup_free_ char *vs = js_string_of(version);
                _cleanup_free_ char *msg = strdup_printf("unsupported protocol version: %s", strempty(vs));
                *ret_error = proto_error(id_str, E_UNSUPPORTED_VERSION, msg, "Use protocol version 1", NULL);
                json_object_put(frame);
                return *ret_error ? -EBADMSG : -ENOMEM;
        }
        const char *m = json_object_get_string(method);
        ProtoMethod mid = proto_method_from_string(m);
        if (mid < 0) {
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
        int r = proto_params_parse(id_str, mid, params, &ret->p, ret_error);
        if (r < 0) {
                json_object_put(frame);
                if (r == -ENOMEM) return r;
                return *ret_error ? -EBADMSG : -ENOMEM;
        }
        ret->frame = frame;
        ret->id = id_str;
        ret->method = m;
        ret->method_id = mid;
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
        json_object_object_get_ex(frame, PK_version, &version);
        int64_t v;
        if (!version || !json_safe_integer(version, &v) || v != PROTOCOL_VERSION) return PROTO_FRAME_INVALID;
        json_object_object_get_ex(frame, PK_type, &type);
        if (is_string(type) && streq(json_object_get_string(type), "shutdown")) return PROTO_FRAME_SHUTDOWN;
        if (is_string(type) && streq(json_object_get_string(type), "event")) {
                static const char *const keys[] = {PK_version, PK_type, PK_subscriptionId, PK_event, NULL};
                json_object *sid = NULL, *event = NULL;
                json_object_object_get_ex(frame, PK_subscriptionId, &sid);
                json_object_object_get_ex(frame, PK_event, &event);
                if (!has_exact_keys(frame, keys) || !is_string(sid) || json_object_get_string_len(sid) == 0 ||
                    !json_is_object(event))
                        return PROTO_FRAME_INVALID;
                return PROTO_FRAME_EVENT;
        }
        json_object_object_get_ex(frame, PK_ok, &ok);
        json_object_object_get_ex(frame, PK_id, &id);
        if (!ok || !json_object_is_type(ok, json_type_boolean) || !is_string(id)) return PROTO_FRAME_INVALID;
        if (json_object_get_boolean(ok)) {
                static const char *const keys[] = {PK_version, PK_id, PK_ok, PK_result, NULL};
                return has_exact_keys(frame, keys) ? PROTO_FRAME_RESPONSE_OK : PROTO_FRAME_INVALID;
        }
        static const char *const keys[] = {PK_version, PK_id, PK_ok, PK_error, NULL};
        static const char *const error_keys[] = {PK_code, PK_message, PK_help, PK_detail, NULL};
        json_object *error = NULL;
        json_object_object_get_ex(frame, PK_error, &error);
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
        if (json_add_int(req, PK_version, PROTOCOL_VERSION) < 0 || json_add_string(req, PK_id, id) < 0 ||
            json_add_string(req, PK_method, method) < 0 ||
            json_add(req, PK_params, params ? json_object_get(params) : json_object_new_object()) < 0)
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
        return json_get_int64(msg, PK_version, &v) && v == PROTOCOL_VERSION &&
               streq_ptr(json_get_string(msg, PK_id), PROTOCOL_HEALTH_PROBE_ID) && json_get_bool(msg, PK_ok, false) &&
               json_get_bool(json_get_object(msg, PK_result), PK_healthy, false);
}
