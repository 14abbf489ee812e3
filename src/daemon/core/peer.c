/* Identifying callers that run inside a task. A peer connecting from inside a
 * task sandbox cannot accept, reject or cancel tasks it did not start (the
 * original's sandboxes could reach its socket, since a read-only mount does
 * not stop connect(), and decide on any task). A task that may dispatch gets a
 * socket of its own bound into its sandbox (server.h), so the daemon must tell
 * such peers apart, on any socket: by process ancestry (every sandboxed
 * process descends from its task's shim: bwrap's pid namespace keeps orphans
 * inside, reaped by its init) and by pid namespace (a peer in another pid
 * namespace is inside some sandbox even if its task is unknown, e.g. after a
 * daemon restart). */

#include <fcntl.h>
#include <sys/stat.h>

#include "core/manager.h"
#include "core/peer.h"
#include "core/task.h"
#include "macro.h"
#include "path-util.h"
#include "process-util.h"
#include "string-util.h"

/* Parent pid (process-util.h proc_stat_ids), -1 if it cannot be read. */
static pid_t parent_of(pid_t pid) {
        pid_t ppid;
        return proc_stat_ids(pid, &ppid, NULL, NULL) < 0 ? -1 : ppid;
}

static bool other_pid_namespace(pid_t pid) {
        char path[64];
        struct stat a, b;
        snprintf(path, sizeof path, "/proc/%d/ns/pid", (int) pid);
        if (stat(path, &a) < 0 || stat("/proc/self/ns/pid", &b) < 0) return false;
        return a.st_ino != b.st_ino || a.st_dev != b.st_dev;
}

Caller caller_of_pid(Manager *m, pid_t pid) {
        Caller who = {0};
        if (pid <= 0) return who;
        who.sandboxed = other_pid_namespace(pid);
        pid_t p = pid;
        for (int depth = 0; p > 1 && depth < 256; depth++) {
                for (size_t i = 0; i < m->n_tasks; i++) {
                        Task *t = m->tasks[i];
                        if (t->shim_pid > 0 && t->shim_pid == p) {
                                who.sandboxed = true;
                                who.task = t;
                                return who;
                        }
                }
                p = parent_of(p);
        }
        return who;
}

bool caller_may_name_directory(Caller who, const char *path) {
        if (!who.sandboxed) return true;
        if (!who.task || !who.task->rec.directory || !path || path[0] != '/') return false;
        for (const char *p = path; *p;) {
                while (*p == '/') p++;
                size_t len = strcspn(p, "/");
                if (len == 2 && p[0] == '.' && p[1] == '.') return false;
                p += len;
        }
        return path_is_at_or_below(path, who.task->rec.directory);
}

bool caller_may_see(Caller who, Task *t) {
        if (!who.sandboxed) return true;
        if (!who.task) return false;
        return t == who.task || streq_ptr(t->rec.dispatched_by, who.task->id);
}

int caller_may_decide(Caller who, const Task *t, const char *verb, char **reason) {
        if (!who.sandboxed) return 0;
        if (streq(verb, "accept"))
                return set_error(reason, -EPERM,
                                 "error: a task running in a sandbox cannot accept changesets\nhelp: read the diff "
                                 "(taskferry result %s --diff) and run taskferry accept %s from outside the sandbox",
                                 t->id, t->id);
        if (who.task && streq_ptr(t->rec.dispatched_by, who.task->id)) return 0;
        return set_error(reason, -EPERM,
                         "error: a task running in a sandbox can only %s tasks it dispatched itself, and %s was not "
                         "dispatched by it\nhelp: run taskferry %s %s from outside the sandbox",
                         verb, t->id, verb, t->id);
}
