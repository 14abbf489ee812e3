#pragma once
/* Parked task.wait requests (wait.c). */

#include <stdint.h>
#include <json-c/json.h>

#include "api/methods.h"

typedef struct Manager Manager;
typedef struct Connection Connection;
typedef struct Request Request;
typedef struct Task Task;

/* wait.c: the only owner of parked task.wait requests. */
/* Register the waiters' task observer: the last observer of a manager, so
 * that a waiter hears of a task's end once everything else has. */
int wait_init(Manager *m);
/* Answer r now if t is final and settled, else park it on t until then or
 * for timeout ms (< 0: no timeout); tail_chars > 0 adds the output tail to a
 * timed-out answer. Replies exactly once. */
void wait_park(Request *r, Task *t, int64_t timeout, uint64_t tail_chars);
/* Unlink r from its task and connection (it stays unanswered). */
void wait_detach(Request *r);
/* Drop every parked wait of a dead connection / of a task (daemon shutdown)
 * without answering. */
void wait_drop_connection(Connection *c);
void wait_drop_task(Task *t);
/* task.wait (methods.h). */
int method_wait(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err);
