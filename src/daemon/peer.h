#pragma once
/* Who is calling (peer.c). */

#include <stdbool.h>

typedef struct Manager Manager;
typedef struct Connection Connection;
typedef struct Task Task;

/* peer.c: who is calling (DESIGN.md: a peer inside a task sandbox cannot
 * accept, reject or cancel tasks it did not start). */
typedef struct Caller {
        bool sandboxed;  /* the peer runs inside a task's process tree or another pid namespace */
        Task *task;      /* the task whose shim is an ancestor of the peer, if any */
} Caller;
Caller caller_of(Manager *m, Connection *c);
