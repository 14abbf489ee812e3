#pragma once
/* The method table (one row per protocol method: its handler and flags)
 * and its one dispatcher.
 *
 * A handler RETURNS its answer; it never replies itself:
 *   0               *ret_result holds the result (ownership passes);
 *   METHOD_DEFERRED the request was handed to a wait (wait.c) or a job whose
 *                   completion answers it through method_reply();
 *   < 0             *ret_error says why (one error type: code, message,
 *                   help); a handler that leaves it empty yields
 *                   REQUEST_FAILED with strerror of the return value.
 * method_dispatch() checks the method's flags, runs the handler and replies
 * exactly once (or not at all for METHOD_DEFERRED). */

#include <stddef.h>
#include <json-c/json.h>
#include <stdint.h>

#include "core/peer.h"

typedef struct Manager Manager;
typedef struct Request Request;
typedef struct Task Task;

#define METHOD_DEFERRED 1

/* One error: the wire's {code, message, help, detail}. Built either from
 * parts (detail = message) or from a handler's "error: ...\nhelp: ..." text
 * (message and help from its error: and help: lines, detail = the whole
 * text), as the original's responseError does. */
typedef struct MethodError {
        const char *code; /* E_* of protocol.h; NULL: unset */
        char *message, *help;
        char *text;       /* set instead of message/help for a text error */
} MethodError;

void method_error_done(MethodError *e);
/* Fill e; both return -EIO for `return method_fail(...)`. Text/parts are copied. */
int method_error(MethodError *e, const char *code, const char *message, const char *help);
int method_error_text(MethodError *e, const char *code, const char *text);
/* REQUEST_FAILED with text (the common case). */
int method_fail(MethodError *e, const char *text);
/* The wire frame of e for request id (a new object). */
json_object *method_error_frame(const MethodError *e, const char *id, int rc);

typedef enum MethodFlags {
        METHOD_STATE = 1 << 0, /* fails while tasks.json could not be read (the daemon runs, but
                                * no call that needs the tasks does until it is repaired) */
        METHOD_TASK = 1 << 1,  /* params.taskId names a task the caller may see: passed as t,
                                * else UNKNOWN_TASK (a sandboxed caller sees its own tree only) */
} MethodFlags;

typedef int (*method_handler)(Manager *m, Request *r, Task *t, json_object **ret_result, MethodError *ret_error);

typedef struct Method {
        const char *name;
        method_handler handler;
        unsigned flags;
} Method;

/* The table entry of name, NULL if none. */
const Method *method_find(const char *name);
/* The whole table, *ret_n entries in protocol_methods' order (protocol.h:
 * the two name the same methods, tests/unit/test-methods.c checks it). */
const Method *method_table(size_t *ret_n);

/* Run the method of r (flags, then handler) without replying: the return
 * value and outputs are the handler's, or the flags' error. Unknown method:
 * -EOPNOTSUPP with UNKNOWN_METHOD. */
int method_call(Manager *m, Request *r, json_object **ret_result, MethodError *ret_error);

/* Reply to r once from an outcome (rc, result, error) and free r; takes
 * ownership of result and clears error. The one place replies are built. */
void method_reply(Request *r, int rc, json_object *result, MethodError *error);

/* method_call + method_reply: the server's entry for every valid request. */
void method_dispatch(Manager *m, Request *r);

/* tasks.json could not be read at start: every state call fails with the
 * reason (store.h). 0, or -EIO with err. */
int method_check_state(Manager *m, MethodError *err);
/* The task params.taskId names, as the caller may see it; -ENOENT with
 * UNKNOWN_TASK. */
int method_lookup_task(Manager *m, Request *r, Task **ret, MethodError *err);
