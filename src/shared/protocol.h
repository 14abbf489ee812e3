#pragma once
/* Daemon wire protocol v1: UTF-8 JSON frames, one per '\n'-ended line,
 * every frame of both directions carrying "version": 1; envelopes with
 * exact key sets in a fixed key order (key order is part of the contract:
 * TOON prints keys as they come); request validation in a fixed order
 * (proto_parse_request: the first failing step names the error); and the
 * per-method parameter specs. */

#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>

#include "protocol-params.h"

#define PROTOCOL_VERSION 1
/* The most bytes a connection may hold that are not yet split into lines:
 * the daemon answers REQUEST_TOO_LARGE past it (checked before splitting),
 * a client fails on an unterminated rest larger than it. */
#define PROTOCOL_MAX_BUFFER_BYTES (1024 * 1024)
/* 256 *active* requests daemon-wide on the user's socket (one more gets
 * SERVER_BUSY; docs/taskferryd.8.md "Limits"); parked task.wait requests
 * have a budget of their own, so waits can never starve health, status, list
 * or cancel. */
#define PROTOCOL_MAX_IN_FLIGHT 256
#define PROTOCOL_MAX_WAITS 1024
/* Per task socket (the socket bound into one sandbox): at most this many open
 * connections (one more gets a SERVER_BUSY error frame with id null and is
 * closed) and requests in flight, task.wait included (one more gets
 * SERVER_BUSY). Task sockets do not draw on the two budgets above. */
#define PROTOCOL_TASK_SOCKET_MAX_CONNECTIONS 16
#define PROTOCOL_TASK_SOCKET_MAX_REQUESTS 32

/* Error codes: the "code" of an error frame. */
#define E_MALFORMED_JSON "MALFORMED_JSON"
#define E_INVALID_REQUEST "INVALID_REQUEST"
#define E_UNSUPPORTED_VERSION "UNSUPPORTED_VERSION"
#define E_UNKNOWN_METHOD "UNKNOWN_METHOD"
#define E_INVALID_PARAMS "INVALID_PARAMS"
#define E_SERVER_BUSY "SERVER_BUSY"
#define E_REQUEST_TOO_LARGE "REQUEST_TOO_LARGE"
#define E_RESPONSE_TOO_LARGE "RESPONSE_TOO_LARGE"
#define E_UNKNOWN_TASK "UNKNOWN_TASK"
#define E_OUTPUT_NOT_FOUND "OUTPUT_NOT_FOUND" /* task.output: path not found in the output dir */
#define E_NO_OUTPUT_DIR "NO_OUTPUT_DIR"       /* task.output path on a task with no outputDir */
#define E_REQUEST_FAILED "REQUEST_FAILED"
/* task.accept without allowConfig of a changeset holding files that can run
 * code on the host later (changeset-risk.h); the text lists them */
#define E_CHANGESET_RISKS "CHANGESET_RISKS"

/* The 28 fields task.result's "fields" may name, in the order the CLI's
 * help lists them; NULL-terminated. */
extern const char *const protocol_result_fields[];
/* task.result fields beyond those 28 (additions; the CLI's --fields does
 * not offer them): "changesetStatus", "diffPath", "changesetRisks" and
 * "directory" (the task record's values), which `taskferry diff` reads. */
extern const char *const protocol_result_extra_fields[];

/* The 16 methods, in the order the UNKNOWN_METHOD help lists them
 * (15 RPC methods, then event.subscribe); NULL-terminated. */
extern const char *const protocol_methods[];
/* True for a method of protocol_methods whose params this build validates,
 * i.e. one the daemon serves (its table names the same set, in the same
 * order: tests/unit/test-methods.c); the others answer UNKNOWN_METHOD. */
bool proto_method_served(const char *method);

typedef struct proto_request {
        json_object *frame;  /* the whole parsed request (owned) */
        const char *id;      /* borrowed from frame */
        const char *method;  /* borrowed from frame */
        ProtoMethod method_id;
        json_object *params; /* borrowed from frame */
        ProtoParams p;       /* params, typed (protocol-params.h; freed with the request) */
} proto_request;

void proto_request_done(proto_request *r);

/* Validate one received line (without '\n') as a request, in this order:
 * JSON (MALFORMED_JSON, id null); the envelope: an object of exactly
 * version, id, method and params, id and method non-empty strings, params an
 * object (INVALID_REQUEST, the id echoed when it is a string); version 1
 * (UNSUPPORTED_VERSION); a known method (UNKNOWN_METHOD); its params
 * (INVALID_PARAMS, proto_validate_params). The in-flight budget is the
 * server's check after these. Returns 0 and fills *ret on success. On a
 * protocol error returns -EBADMSG and sets *ret_error to the complete error
 * frame to send. -ENOMEM. */
int proto_parse_request(const char *line, size_t len, proto_request *ret, json_object **ret_error);

/* Check params against the method's field table (protocol-params.h) without
 * keeping them: no unknown key; every required one present and valid; an
 * optional one valid when present (a JSON null counts as present, and is
 * invalid). Returns 0 if valid, else -EINVAL with *ret_error set to the
 * INVALID_PARAMS frame. */
int proto_validate_params(const char *id, const char *method, json_object *params, json_object **ret_error);

/* Frame builders. Each returns a new object (NULL on ENOMEM); `result`
 * ownership is taken. id NULL → JSON null. detail NULL → message. */
json_object *proto_success(const char *id, json_object *result);
json_object *proto_error(const char *id, const char *code, const char *message, const char *help,
                         const char *detail);
json_object *proto_event(const char *subscription_id, json_object *event);
json_object *proto_shutdown(const char *reason);

/* Build an error frame from an "error: <message>\nhelp: <help>" style text
 * (how a handler's failure text reaches the wire): message = first line starting
 * "error:" (prefix stripped) else the first line; help = first "help:" line
 * else "Retry the request or inspect the daemon logs"; detail = the text. */
json_object *proto_error_from_text(const char *id, const char *code, const char *text);

/* Frame types a client can receive. */
typedef enum proto_frame_kind {
        PROTO_FRAME_INVALID,
        PROTO_FRAME_RESPONSE_OK,    /* exactly {version,id,ok:true,result}, string id */
        PROTO_FRAME_RESPONSE_ERROR, /* exactly {version,id,ok:false,error}, string id, error exactly
                                       {code,message,help,detail}, all strings */
        PROTO_FRAME_EVENT,          /* exactly {version,type:"event",subscriptionId,event}, a
                                       non-empty string subscriptionId and an object event */
        PROTO_FRAME_SHUTDOWN,       /* version 1, type "shutdown" (other keys not checked) */
} proto_frame_kind;
/* Classify a received frame with the reference client's exact checks:
 * version is the number 1 (1.0 too: JavaScript's 1 === 1.0); anything else
 * is PROTO_FRAME_INVALID, a protocol failure for the client (so an error
 * frame with id null ends a client's connection). */
proto_frame_kind proto_classify_frame(json_object *frame);

/* The request envelope {"version":1,"id":id,"method":method,"params":params},
 * key order as the reference client sends it. params is borrowed
 * (a reference is taken); NULL → {}. NULL on ENOMEM. */
json_object *proto_request_new(const char *id, const char *method, json_object *params);

/* The health probe (of the CLI's auto-start, and of the daemon's socket
 * bind before it takes the path), blocking: connect to the
 * AF_UNIX stream socket at path, send system.health with id
 * PROTOCOL_HEALTH_PROBE_ID and read the first line within timeout_ms.
 * Returns 1 when that line is {version 1, id "health-check", ok true,
 * result.healthy true}; 0 when the socket accepted the connection but did not
 * answer so in time (another listener, a stuck or unhealthy daemon); -errno
 * when connect failed (-ENOENT, -ECONNREFUSED, -ENOTSOCK, -ENAMETOOLONG, ...)
 * or -ENOMEM. The CLI's auto-start asks "is a daemon there?"; the daemon's
 * socket bind asks "is the path taken, and by whom?". */
#define PROTOCOL_HEALTH_PROBE_ID "health-check"
int proto_health_probe(const char *path, int timeout_ms);
