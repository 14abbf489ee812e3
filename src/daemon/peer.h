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

/* May who name path (a directory parameter such as task.context's or
 * event.subscribe's, resolved by the daemon on the host)? The user always;
 * a sandboxed caller only its task's directory or one under it, judged
 * lexically (absolute, no ".." component) so that the answer never tells
 * what exists on the host outside its sandbox. Check the resolved path
 * again with caller_may_name_directory(who, real). */
bool caller_may_name_directory(Caller who, const char *path);
