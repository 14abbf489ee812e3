#pragma once
/* The methods of protocol v1 and their params: one field table per method, which both validates a request's params and
 * parses them into the method's typed struct, so that a handler reads
 * fields, never JSON keys. */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>

/* The 16 methods, in the order the UNKNOWN_METHOD help lists them (15 RPC
 * methods, then event.subscribe). */
typedef enum ProtoMethod {
        PROTO_SYSTEM_HEALTH,
        PROTO_TASK_DISPATCH,
        PROTO_TASK_CANCEL,
        PROTO_TASK_STATUS,
        PROTO_TASK_WAIT,
        PROTO_TASK_LIST,
        PROTO_TASK_STATS,
        PROTO_TASK_RESULT,
        PROTO_TASK_TAIL,
        PROTO_TASK_SUMMARY,
        PROTO_TASK_ADVISOR,
        PROTO_TASK_CONTEXT,
        PROTO_TASK_ACCEPT,
        PROTO_TASK_REJECT,
        PROTO_TASK_OUTPUT,
        PROTO_EVENT_SUBSCRIBE,
        _PROTO_METHOD_MAX,
        _PROTO_METHOD_INVALID = -EINVAL,
} ProtoMethod;

/* "task.dispatch" ... ; NULL / -EINVAL outside the table. */
const char *proto_method_to_string(ProtoMethod m);
ProtoMethod proto_method_from_string(const char *s);

/* An integer param: set when the request has it (then within its range). */
typedef struct ProtoInt {
        bool set;
        int64_t value;
} ProtoInt;

/* Strings and objects are borrowed from the request's params (valid while
 * the request is); string arrays (char **, NULL-terminated) are owned. A
 * param the request does not have is NULL, false, or unset. */

typedef struct ProtoDispatchParams {
        const char *prompt, *directory, *model, *variant, *session_id;
        json_object *env;                /* an object of strings */
        const char *final_marker, *origin_session_id;
        bool no_sandbox, no_overlay;
        bool has_no_sandbox, has_no_overlay; /* given at all (false too) */
        char **allowed_dirs, **rw_bind, **ro_bind;
        const char *executor;            /* "opencode" | "pi" | "shell" */
        const char *class_name, *parent_task_id;
        ProtoInt disk_max;               /* bytes, > 0 */
        ProtoInt memory_max;             /* bytes, > 0 */
        ProtoInt tasks_max;              /* > 0 */
        const char *job;                 /* the timer job it comes from (`taskferry job run`): an addition */
        const char *network;             /* "proxy" | "none" | "host" (checked by the daemon): an addition */
        char **allow_hosts;              /* hosts the task's egress proxy allows (net-policy.h rules) */
        char **allow_sockets;            /* host unix sockets bound into the sandbox (absolute paths) */
} ProtoDispatchParams;

/* task.status, task.reject: the task only */
typedef struct ProtoTaskParams {
        const char *task_id;
} ProtoTaskParams;

typedef struct ProtoCancelParams {
        const char *task_id;
        ProtoInt grace_ms;               /* >= 0 */
} ProtoCancelParams;

typedef struct ProtoWaitParams {
        const char *task_id;
        ProtoInt timeout_ms;             /* >= 0 */
        ProtoInt tail_chars;             /* > 0 */
} ProtoWaitParams;

typedef struct ProtoListParams {
        const char *directory;           /* absolute */
} ProtoListParams;

typedef struct ProtoResultParams {
        const char *task_id;
        bool full;
        char **fields;                   /* names of protocol_result_fields (or the extra ones) */
} ProtoResultParams;

typedef struct ProtoAdvisorParams {
        const char *prompt, *directory, *model, *variant, *session_id;
        ProtoInt timeout_ms;             /* >= 0 */
        json_object *env;
        const char *executor, *class_name, *parent_task_id;
} ProtoAdvisorParams;

typedef struct ProtoAcceptParams {
        const char *task_id;
        bool force;
        bool allow_config; /* land files that can run code on the host later (changeset-risk.h) */
} ProtoAcceptParams;

typedef struct ProtoSummaryParams {
        const char *task_id;
        ProtoInt max_words;              /* 75..300 */
        const char *mode;                /* "report" | "activity" */
        json_object *env;
} ProtoSummaryParams;

typedef struct ProtoSubscribeParams {
        bool all;
        const char *directory;           /* absolute */
        const char *task_id;
        bool summaries;
        const char *origin_session_id;
} ProtoSubscribeParams;

typedef struct ProtoTailParams {
        const char *task_id;
        ProtoInt chars;                  /* 1..131072 */
} ProtoTailParams;

typedef struct ProtoContextParams {
        const char *directory;           /* absolute */
} ProtoContextParams;

typedef struct ProtoOutputParams {
        const char *task_id;
        const char *path;
        ProtoInt max_output_file_bytes;  /* > 0 */
} ProtoOutputParams;

/* The params of one request, as its method reads them. */
typedef union ProtoParams {
        ProtoDispatchParams dispatch;
        ProtoTaskParams task;            /* status, reject */
        ProtoCancelParams cancel;
        ProtoWaitParams wait;
        ProtoListParams list;
        ProtoResultParams result;
        ProtoAdvisorParams advisor;
        ProtoAcceptParams accept;
        ProtoSummaryParams summary;
        ProtoSubscribeParams subscribe;
        ProtoTailParams tail;
        ProtoContextParams context;
        ProtoOutputParams output;
} ProtoParams;

/* The taskId param of method's params, NULL for a method without one. */
const char *proto_params_task_id(ProtoMethod method, const ProtoParams *p);

/* Check params against method's table (every key known and of its type,
 * JSON null refused, the required ones present, and the methods' own rules:
 * event.subscribe names all, a directory or a taskId; task.summary takes no
 * env with mode "activity") and fill *ret (zeroed first). 0; -EINVAL with *ret_error (the
 * INVALID_PARAMS error frame for request id); -ENOMEM. */
int proto_params_parse(const char *id, ProtoMethod method, json_object *params, ProtoParams *ret,
                       json_object **ret_error);
/* Free what proto_params_parse allocated (the string arrays). */
void proto_params_done(ProtoMethod method, ProtoParams *p);
