/* The methods and their params: one field table per method (protocol-params.h). */

#include "protocol-params.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "protocol-keys.h"
#include "protocol.h"
#include "string-util.h"
#include "strv.h"

static const char *const proto_method_table[_PROTO_METHOD_MAX] = {
        [PROTO_SYSTEM_HEALTH] = "system.health", [PROTO_TASK_DISPATCH] = "task.dispatch",
        [PROTO_TASK_CANCEL] = "task.cancel",     [PROTO_TASK_STATUS] = "task.status",
        [PROTO_TASK_WAIT] = "task.wait",         [PROTO_TASK_LIST] = "task.list",
        [PROTO_TASK_STATS] = "task.stats",       [PROTO_TASK_RESULT] = "task.result",
        [PROTO_TASK_TAIL] = "task.tail",         [PROTO_TASK_SUMMARY] = "task.summary",
        [PROTO_TASK_ADVISOR] = "task.advisor",   [PROTO_TASK_CONTEXT] = "task.context",
        [PROTO_TASK_ACCEPT] = "task.accept",     [PROTO_TASK_REJECT] = "task.reject",
        [PROTO_TASK_OUTPUT] = "task.output",     [PROTO_EVENT_SUBSCRIBE] = "event.subscribe",
};

const char *const protocol_methods[] = {
        "system.health", "task.dispatch", "task.cancel", "task.status",  "task.wait",   "task.list",
        "task.stats",    "task.result",   "task.tail",   "task.summary", "task.advisor", "task.context",
        "task.accept",   "task.reject",   "task.output", "event.subscribe", NULL,
};
_Static_assert(ELEMENTSOF(protocol_methods) == _PROTO_METHOD_MAX + 1, "one name per method");

const char *proto_method_to_string(ProtoMethod m) {
        return m >= 0 && m < _PROTO_METHOD_MAX ? proto_method_table[m] : NULL;
}

ProtoMethod proto_method_from_string(const char *s) {
        if (!s) return _PROTO_METHOD_INVALID;
        for (size_t i = 0; i < _PROTO_METHOD_MAX; i++)
                if (streq(proto_method_table[i], s)) return (ProtoMethod) i;
        return _PROTO_METHOD_INVALID;
}

bool proto_method_served(const char *method) { return proto_method_from_string(method) >= 0; }

/* ---- field types ---- */

typedef enum ParamType {
        P_STR,          /* non-empty string → const char * */
        P_ABS,          /* absolute path string → const char * */
        P_BOOL,         /* → bool */
        P_INT_POS,      /* safe integer > 0 → ProtoInt */
        P_INT_NONNEG,   /* safe integer >= 0 → ProtoInt */
        P_ENV,          /* object of non-empty, '='-free keys to strings → json_object * */
        P_STRS,         /* non-empty array of non-empty strings → char ** */
        P_EXECUTOR,     /* "opencode" | "pi" | "shell" → const char * */
        P_FIELDS,       /* non-empty array of result field names → char ** */
        P_MAX_WORDS,    /* safe integer 75..300 → ProtoInt */
        P_SUMMARY_MODE, /* "report" | "activity" → const char * */
        P_TAIL_CHARS,   /* safe integer 1..131072 (task.tail chars) → ProtoInt */
} ParamType;

static bool is_result_field(const char *name) {
        for (const char *const *rf = protocol_result_fields; *rf; rf++)
                if (streq(*rf, name)) return true;
        for (const char *const *rf = protocol_result_extra_fields; *rf; rf++)
                if (streq(*rf, name)) return true;
        return false;
}

static bool check_param(ParamType t, json_object *v) {
        int64_t i;
        if (!v) return false; /* JSON null counts as present and is rejected */
        switch (t) {
        case P_STR:
                return json_is_nonempty_string(v);
        case P_ABS:
                return json_is_nonempty_string(v) && json_object_get_string(v)[0] == '/';
        case P_BOOL:
                return json_object_is_type(v, json_type_boolean);
        case P_INT_POS:
                return json_safe_integer(v, &i) && i > 0;
        case P_INT_NONNEG:
                return json_safe_integer(v, &i) && i >= 0;
        case P_MAX_WORDS:
                return json_safe_integer(v, &i) && i >= 75 && i <= 300;
        case P_SUMMARY_MODE:
                return json_is_nonempty_string(v) &&
                       (streq(json_object_get_string(v), "report") || streq(json_object_get_string(v), "activity"));
        case P_TAIL_CHARS:
                return json_safe_integer(v, &i) && i >= 1 && i <= 131072;
        case P_ENV:
                if (!json_object_is_type(v, json_type_object)) return false;
                json_object_object_foreach(v, key, val) {
                        if (!*key || strchr(key, '=')) return false;
                        if (!val || !json_object_is_type(val, json_type_string) || json_string_has_nul(val)) return false;
                }
                return true;
        case P_STRS:
        case P_FIELDS: {
                if (!json_object_is_type(v, json_type_array)) return false;
                size_t n = json_object_array_length(v);
                if (n == 0) return false;
                for (size_t k = 0; k < n; k++) {
                        json_object *e = json_object_array_get_idx(v, k);
                        if (t == P_STRS && !json_is_nonempty_string(e)) return false;
                        if (t == P_FIELDS && (!json_is_nonempty_string(e) || !is_result_field(json_object_get_string(e))))
                                return false;
                }
                return true;
        }
        case P_EXECUTOR: {
                /* "pi\u0000x" reads "pi" as a C string: the NUL check first */
                if (!json_is_nonempty_string(v)) return false;
                const char *s = json_object_get_string(v);
                return streq(s, "opencode") || streq(s, "pi") || streq(s, "shell");
        }
        }
        return false;
}

/* ---- the tables ---- */

typedef struct ParamField {
        const char *name;
        ParamType type;
        bool required;
        size_t offset;  /* of the field in the method's struct */
        size_t given;   /* of a bool saying the param was given (0: none) */
} ParamField;

#define FIELD(name, type, required, st, member) {name, type, required, offsetof(st, member), 0}
#define FIELD_GIVEN(name, type, st, member, given) {name, type, false, offsetof(st, member), offsetof(st, given)}

static const ParamField dispatch_fields[] = {
        FIELD(PK_prompt, P_STR, true, ProtoDispatchParams, prompt),
        FIELD(PK_directory, P_ABS, true, ProtoDispatchParams, directory),
        FIELD(PK_model, P_STR, false, ProtoDispatchParams, model),
        FIELD(PK_variant, P_STR, false, ProtoDispatchParams, variant),
        FIELD(PK_sessionId, P_STR, false, ProtoDispatchParams, session_id),
        FIELD(PK_env, P_ENV, false, ProtoDispatchParams, env),
        FIELD(PK_finalMarker, P_STR, false, ProtoDispatchParams, final_marker),
        FIELD(PK_originSessionId, P_STR, false, ProtoDispatchParams, origin_session_id),
        FIELD_GIVEN(PK_noSandbox, P_BOOL, ProtoDispatchParams, no_sandbox, has_no_sandbox),
        FIELD_GIVEN(PK_noOverlay, P_BOOL, ProtoDispatchParams, no_overlay, has_no_overlay),
        FIELD(PK_allowedDirs, P_STRS, false, ProtoDispatchParams, allowed_dirs),
        FIELD(PK_rwBind, P_STRS, false, ProtoDispatchParams, rw_bind),
        FIELD(PK_roBind, P_STRS, false, ProtoDispatchParams, ro_bind),
        FIELD(PK_executor, P_EXECUTOR, false, ProtoDispatchParams, executor),
        FIELD(PK_class, P_STR, false, ProtoDispatchParams, class_name),
        FIELD(PK_parentTaskId, P_STR, false, ProtoDispatchParams, parent_task_id),
        FIELD(PK_diskMax, P_INT_POS, false, ProtoDispatchParams, disk_max),
        FIELD(PK_memoryMax, P_INT_POS, false, ProtoDispatchParams, memory_max),
        FIELD(PK_tasksMax, P_INT_POS, false, ProtoDispatchParams, tasks_max),
        FIELD(PK_job, P_STR, false, ProtoDispatchParams, job),
        FIELD(PK_network, P_STR, false, ProtoDispatchParams, network),
        FIELD(PK_allowHosts, P_STRS, false, ProtoDispatchParams, allow_hosts),
        FIELD(PK_allowSockets, P_STRS, false, ProtoDispatchParams, allow_sockets),
        {},
};
static const ParamField task_fields[] = {FIELD(PK_taskId, P_STR, true, ProtoTaskParams, task_id), {}};
static const ParamField cancel_fields[] = {
        FIELD(PK_taskId, P_STR, true, ProtoCancelParams, task_id),
        FIELD(PK_graceMs, P_INT_NONNEG, false, ProtoCancelParams, grace_ms),
        {},
};
static const ParamField wait_fields[] = {
        FIELD(PK_taskId, P_STR, true, ProtoWaitParams, task_id),
        FIELD(PK_timeoutMs, P_INT_NONNEG, false, ProtoWaitParams, timeout_ms),
        FIELD(PK_tailChars, P_INT_POS, false, ProtoWaitParams, tail_chars),
        {},
};
static const ParamField list_fields[] = {FIELD(PK_directory, P_ABS, false, ProtoListParams, directory), {}};
static const ParamField result_fields[] = {
        FIELD(PK_taskId, P_STR, true, ProtoResultParams, task_id),
        FIELD(PK_full, P_BOOL, false, ProtoResultParams, full),
        FIELD(PK_fields, P_FIELDS, false, ProtoResultParams, fields),
        {},
};
static const ParamField advisor_fields[] = {
        FIELD(PK_prompt, P_STR, true, ProtoAdvisorParams, prompt),
        FIELD(PK_directory, P_ABS, true, ProtoAdvisorParams, directory),
        FIELD(PK_model, P_STR, true, ProtoAdvisorParams, model),
        FIELD(PK_variant, P_STR, false, ProtoAdvisorParams, variant),
        FIELD(PK_sessionId, P_STR, false, ProtoAdvisorParams, session_id),
        FIELD(PK_timeoutMs, P_INT_NONNEG, false, ProtoAdvisorParams, timeout_ms),
        FIELD(PK_env, P_ENV, false, ProtoAdvisorParams, env),
        FIELD(PK_executor, P_EXECUTOR, false, ProtoAdvisorParams, executor),
        FIELD(PK_class, P_STR, false, ProtoAdvisorParams, class_name),
        FIELD(PK_parentTaskId, P_STR, false, ProtoAdvisorParams, parent_task_id),
        {},
};
static const ParamField accept_fields[] = {
        FIELD(PK_taskId, P_STR, true, ProtoAcceptParams, task_id),
        FIELD(PK_force, P_BOOL, false, ProtoAcceptParams, force),
        FIELD(PK_allowConfig, P_BOOL, false, ProtoAcceptParams, allow_config),
        {},
};
static const ParamField summary_fields[] = {
        FIELD(PK_taskId, P_STR, true, ProtoSummaryParams, task_id),
        FIELD(PK_maxWords, P_MAX_WORDS, false, ProtoSummaryParams, max_words),
        FIELD(PK_mode, P_SUMMARY_MODE, false, ProtoSummaryParams, mode),
        FIELD(PK_env, P_ENV, false, ProtoSummaryParams, env),
        {},
};
static const ParamField subscribe_fields[] = {
        FIELD(PK_all, P_BOOL, false, ProtoSubscribeParams, all),
        FIELD(PK_directory, P_ABS, false, ProtoSubscribeParams, directory),
        FIELD(PK_taskId, P_STR, false, ProtoSubscribeParams, task_id),
        FIELD(PK_summaries, P_BOOL, false, ProtoSubscribeParams, summaries),
        FIELD(PK_originSessionId, P_STR, false, ProtoSubscribeParams, origin_session_id),
        {},
};
static const ParamField tail_fields[] = {
        FIELD(PK_taskId, P_STR, true, ProtoTailParams, task_id),
        FIELD(PK_chars, P_TAIL_CHARS, false, ProtoTailParams, chars),
        {},
};
static const ParamField context_fields[] = {FIELD(PK_directory, P_ABS, true, ProtoContextParams, directory), {}};
static const ParamField output_fields[] = {
        FIELD(PK_taskId, P_STR, true, ProtoOutputParams, task_id),
        FIELD(PK_path, P_STR, false, ProtoOutputParams, path),
        FIELD(PK_maxOutputFileBytes, P_INT_POS, false, ProtoOutputParams, max_output_file_bytes),
        {},
};
static const ParamField no_fields[] = {{}};

static const ParamField *const method_fields[_PROTO_METHOD_MAX] = {
        [PROTO_SYSTEM_HEALTH] = no_fields,         [PROTO_TASK_DISPATCH] = dispatch_fields,
        [PROTO_TASK_CANCEL] = cancel_fields,       [PROTO_TASK_STATUS] = task_fields,
        [PROTO_TASK_WAIT] = wait_fields,           [PROTO_TASK_LIST] = list_fields,
        [PROTO_TASK_STATS] = no_fields,            [PROTO_TASK_RESULT] = result_fields,
        [PROTO_TASK_TAIL] = tail_fields,           [PROTO_TASK_SUMMARY] = summary_fields,
        [PROTO_TASK_ADVISOR] = advisor_fields,     [PROTO_TASK_CONTEXT] = context_fields,
        [PROTO_TASK_ACCEPT] = accept_fields,       [PROTO_TASK_REJECT] = task_fields,
        [PROTO_TASK_OUTPUT] = output_fields,       [PROTO_EVENT_SUBSCRIBE] = subscribe_fields,
};

const char *proto_params_task_id(ProtoMethod method, const ProtoParams *p) {
        const ParamField *f = method >= 0 && method < _PROTO_METHOD_MAX ? method_fields[method] : no_fields;
        for (; f->name; f++)
                if (streq(f->name, PK_taskId)) return *(const char *const *) ((const char *) p + f->offset);
        return NULL;
}

/* ---- parse ---- */

static int store(const ParamField *f, json_object *v, void *base) {
        char *at = (char *) base + f->offset;
        switch (f->type) {
        case P_STR:
        case P_ABS:
        case P_EXECUTOR:
        case P_SUMMARY_MODE: *(const char **) at = json_object_get_string(v); break;
        case P_BOOL: *(bool *) at = json_object_get_boolean(v); break;
        case P_INT_POS:
        case P_INT_NONNEG:
        case P_MAX_WORDS:
        case P_TAIL_CHARS: {
                ProtoInt *pi = (ProtoInt *) at;
                pi->set = json_safe_integer(v, &pi->value);
                break;
        }
        case P_ENV: *(json_object **) at = v; break;
        case P_STRS:
        case P_FIELDS: {
                char ***l = (char ***) at;
                for (size_t i = 0; i < json_object_array_length(v); i++) {
                        int r = strv_push(l, json_object_get_string(json_object_array_get_idx(v, i)));
                        if (r < 0) return r;
                }
                break;
        }
        }
        if (f->given) *(bool *) ((char *) base + f->given) = true;
        return 0;
}

void proto_params_done(ProtoMethod method, ProtoParams *p) {
        if (method < 0 || method >= _PROTO_METHOD_MAX) return;
        for (const ParamField *f = method_fields[method]; f->name; f++)
                if (f->type == P_STRS || f->type == P_FIELDS) {
                        char ***l = (char ***) ((char *) p + f->offset);
                        strv_free(*l);
                        *l = NULL;
                }
}

static int invalid(const char *id, ProtoMethod method, json_object **ret_error) {
        const char *name = proto_method_to_string(method);
        _cleanup_free_ char *msg = strdup_printf("invalid params for %s", name);
        _cleanup_free_ char *help = strdup_printf("Check the parameter names and types for %s", name);
        if (!msg || !help || !(*ret_error = proto_error(id, E_INVALID_PARAMS, msg, help, NULL))) return -ENOMEM;
        return -EINVAL;
}

int proto_params_parse(const char *id, ProtoMethod method, json_object *params, ProtoParams *ret,
                       json_object **ret_error) {
        memset(ret, 0, sizeof *ret);
        if (method < 0 || method >= _PROTO_METHOD_MAX || !json_is_object(params)) return invalid(id, method, ret_error);
        const ParamField *fields = method_fields[method];
        json_object_object_foreach(params, key, val) {
                const ParamField *f = fields;
                while (f->name && !streq(f->name, key)) f++;
                if (!f->name || !check_param(f->type, val)) return invalid(id, method, ret_error);
        }
        for (const ParamField *f = fields; f->name; f++)
                if (f->required && !json_object_object_get_ex(params, f->name, NULL)) return invalid(id, method, ret_error);
        json_object_object_foreach(params, k2, v2) {
                const ParamField *f = fields;
                while (!streq(f->name, k2)) f++;
                int r = store(f, v2, ret);
                if (r < 0) {
                        proto_params_done(method, ret);
                        return r;
                }
        }
        /* event.subscribe: all === true, or a directory, or a taskId */
        if (method == PROTO_EVENT_SUBSCRIBE && !ret->subscribe.all && !ret->subscribe.directory && !ret->subscribe.task_id) {
                proto_params_done(method, ret);
                return invalid(id, method, ret_error);
        }
        if (method == PROTO_TASK_SUMMARY && ret->summary.env && streq_ptr(ret->summary.mode, "activity")) {
                proto_params_done(method, ret);
                *ret_error = proto_error(id, E_INVALID_PARAMS, "task.summary does not accept env with mode \"activity\"",
                                         "Omit env, or use mode \"report\" so the spawned summary child can forward caller env",
                                         NULL);
                return *ret_error ? -EINVAL : -ENOMEM;
        }
        return 0;
}

int proto_validate_params(const char *id, const char *method, json_object *params, json_object **ret_error) {
        ProtoParams p;
        ProtoMethod mid = proto_method_from_string(method);
        int r = proto_params_parse(id, mid, params, &p, ret_error);
        if (r >= 0) proto_params_done(mid, &p);
        return r;
}
