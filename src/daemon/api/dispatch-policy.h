#pragma once
/* What a dispatch may ask for (dispatch-policy.c): the checks task.dispatch
 * and task.advisor make of their params and of who asks, before anything is
 * created. Each is a function of its inputs only (the daemon's own dirs, the
 * deny list, the caller's task, the params; the file system is read to
 * resolve paths), returning 0, or -EPERM/-EINVAL with *reason: the
 * "error: ...\nhelp: ..." text the caller is answered with. */

#include <stdbool.h>
#include <stdint.h>

#include "paths.h"
#include "protocol-params.h"

/* The dispatch directory (absolute, resolved) may not be, contain or lie
 * inside taskferry's own dirs (the worker would see or change task state,
 * other tasks' overlays and logs, or its own overlay's upper dir), nor lie
 * inside a dir every sandbox masks (/run/user, /run/dbus, a deny-listed
 * directory of deny). A directory that contains a deny-listed dir is fine:
 * the mask is applied over the target inside the sandbox. */
int dispatch_check_directory(const tf_paths *paths, char *const *deny, const char *directory, char **reason);

/* Every bind (rwBind, allowedDirs, roBind) is absolute and, resolved, overlaps
 * neither the dispatch directory nor taskferry's own dirs, resolved too (a
 * state dir named through a symlink is the directory it names): the sandbox
 * would no longer gate the worker's writes. */
int dispatch_check_binds(const tf_paths *paths, const ProtoDispatchParams *p, const char *directory, char **reason);

/* The host unix sockets a dispatch binds into its sandbox (allowSockets):
 * each absolute, resolving to a socket, outside taskferry's own dirs (the
 * daemon's socket stays the task socket's alone). *ret: the resolved paths,
 * each once (NULL: none). 0, -EINVAL/-EPERM with *reason, -ENOMEM. */
int dispatch_check_sockets(const tf_paths *paths, char *const *sockets, char ***ret, char **reason);

/* Binding a deny-listed path (or something inside one) is the user's
 * explicit call: it is bound, and the dispatch says so. *ret_warnings: the
 * "warning: ..." texts for the reply (NULL: none); *ret_log: those the
 * daemon also logs (a bind that exposes what the deny list hides). 0,
 * -ENOMEM. */
int dispatch_bind_warnings(char *const *deny, const ProtoDispatchParams *p, char ***ret_warnings, char ***ret_log);

/* A caller inside a task's sandbox may dispatch only into its own target
 * directory or a directory under it. The path it sends is one it sees in its
 * sandbox, where the target is mounted at its host path over an overlay the
 * worker writes: a `..` or a symlink it made there names something else on
 * the host. So the path must lie under the target lexically, `..` refused
 * rather than resolved; then its host realpath must exist and still lie
 * under the target (a committed symlink pointing out is refused too). A
 * directory that exists only in the worker's overlay does not exist on the
 * host: refused. Nothing is looked up outside the target, so a refusal says
 * nothing about other host paths. 0 and the host directory in *ret. */
int dispatch_nested_directory(const char *target, const char *given, char **ret, char **reason);

/* Is a final marker too costly to take from a worker? glibc's regcomp(3)
 * expands interval expressions ((((a{255}){255}){255}) takes seconds and
 * GiBs, in the daemon's loop), and regexec(3) matches back-references
 * (\1..\9) by backtracking, polynomial in the text with the number of
 * groups: the settlement job would never finish with a worker's message. */
bool dispatch_marker_is_costly(const char *re);
/* A final marker compiles as an extended regex; from a sandboxed caller it
 * is not costly. */
int dispatch_check_marker(const char *re, bool sandboxed, char **reason);

/* The scope limits a dispatch asks for (memoryMax bytes, tasksMax; scope.h):
 * enough for the shim, bwrap and a worker, and for a worker's nested
 * dispatch no more than its own (each task has a scope of its own, so a
 * nested task above its parent's limit would be a way out of it). parent:
 * the dispatching task's id and its limits (0: none), or NULL for the user. */
#define DISPATCH_MEMORY_MAX_MIN (UINT64_C(8) << 20)
#define DISPATCH_TASKS_MAX_MIN 8
typedef struct DispatchParent {
        const char *id;
        int64_t memory_max, tasks_max;
} DispatchParent;
int dispatch_check_limits(const ProtoDispatchParams *p, const DispatchParent *parent, char **reason);

/* A sandboxed caller's dispatch runs sandboxed on an overlay with no extra
 * binds: it may not ask for noSandbox, noOverlay (false is fine), rwBind,
 * roBind, allowedDirs or allowSockets. Its binds are refused before
 * they are looked at: resolving and warning about each entry of a 1 MiB list
 * would let a worker write thousands of lines into the daemon's log. */
int dispatch_check_sandboxed(const ProtoDispatchParams *p, char **reason);
/* A worker's dispatch is never a timer job's (`job list` trusts the mark). */
int dispatch_check_nested_job(const ProtoDispatchParams *p, char **reason);

/* The variant an executor gets for a requested one (malloc'd; NULL: none,
 * the shell has none, and OpenCode's "highest" needs a ranking it does not
 * have yet). */
char *dispatch_resolve_variant(const char *executor_id, const char *requested);

/* Live (queued or running) tasks a dispatch tree may hold below its
 * top-level task: a worker's nested tasks would otherwise queue in front of
 * the user's without end, each with a socket that dispatches more. */
#define NESTED_TASKS_MAX 16
