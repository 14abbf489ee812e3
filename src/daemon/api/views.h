#pragma once
/* Live views of one task or one workspace: task.tail, task.output (reading
 * outputs.h in a job) and task.context. Handlers of the method table
 * (methods.h): they return a result or a MethodError, or defer to a forked
 * job that answers through method_reply.
 *
 * A caller inside a task sandbox (peer.h): tail and output are METHOD_TASK
 * methods, so it reaches only its own task and the tasks it dispatched (any
 * other id is UNKNOWN_TASK, as if it did not exist); task.context lists the
 * same visible set, as task.list does. What it may read is therefore what its
 * own tree wrote: its log tail and its output dir, never another task's. */

#include <stdbool.h>
#include <json-c/json.h>

#include "api/methods.h"

#define TAIL_CHARS_DEFAULT 1000
#define TAIL_CHARS_MAX 131072
#define TAIL_SCAN_BYTES (1024 * 1024) /* the last 1 MiB of the log is read */

/* The text task.tail shows for the log at path: the part.text of the
 * last `text` event in the last 1 MiB of the log; if there is none, the task
 * crashed and no line of that window parses as JSON, the raw window with
 * blank lines removed. 1 with *ret_text (malloc'd, may be "") if something
 * was found, 0 if nothing (a missing log too), -ENOMEM / -errno. */
int tail_text_of_log(const char *path, bool crashed, char **ret_text);

int method_tail(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err);
int method_output(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err);
int method_context(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err);
