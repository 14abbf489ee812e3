#pragma once
/* Who is calling (peer.c). */

#include <stdbool.h>
#include <sys/types.h>

typedef struct Manager Manager;
typedef struct Task Task;

/* peer.c: who is calling (a peer inside a task sandbox cannot accept,
 * reject or cancel tasks it did not start). */
typedef struct Caller {
        bool sandboxed;  /* the peer runs inside a task's process tree or another pid namespace */
        Task *task;      /* the task whose shim is an ancestor of the peer, if any */
} Caller;
/* The same for a process id (a D-Bus caller's, bus.c): by ancestry and pid
 * namespace only. pid <= 0: the user (callers must refuse an unknown pid
 * themselves). */
Caller caller_of_pid(Manager *m, pid_t pid);
/* A caller inside a sandbox sees its own task and the tasks it dispatched,
 * nothing else: other tasks' prompts, messages and pending diffs are none of
 * its business (review finding). */
bool caller_may_see(Caller who, Task *t);
/* May who decide on t: cancel or reject it (verb "cancel"/"reject": the user,
 * or the task whose worker dispatched t), accept it (the user only: landing
 * changes is the user's decision)? 0, or -EPERM with *reason (the refusal's
 * "error: ...\nhelp: ..." text). */
int caller_may_decide(Caller who, const Task *t, const char *verb, char **reason);

/* May who name path (a directory parameter such as task.context's or
 * event.subscribe's, resolved by the daemon on the host)? The user always;
 * a sandboxed caller only its task's directory or one under it, judged
 * lexically (absolute, no ".." component) so that the answer never tells
 * what exists on the host outside its sandbox. Check the resolved path
 * again with caller_may_name_directory(who, real). */
bool caller_may_name_directory(Caller who, const char *path);
