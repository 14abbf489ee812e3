/* The checks of a dispatch (dispatch-policy.h). */

#include <inttypes.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/dispatch-policy.h"
#include "executor.h"
#include "protocol-keys.h"
#include "fs-util.h"
#include "macro.h"
#include "path-util.h"
#include "string-util.h"
#include "strv.h"

/* What a path resolves to (itself when it does not exist). */
static char *canonical(const char *p) {
        char *real = realpath(p, NULL);
        return real ? real : strdup(p);
}

int dispatch_check_directory(const tf_paths *paths, char *const *deny, const char *directory, char **reason) {
        const char *own[] = {paths->state_dir, paths->runtime_dir, paths->cache_dir, paths->overlay_tmp_root};
        const char *own_names[] = {"the state dir", "the runtime dir", "the cache dir", "the overlay dir"};
        /* masked in every sandbox (launch.c build_masks): a target inside would vanish */
        const char *masked_roots[] = {"/run/user", "/run/dbus"};
        for (size_t i = 0; i < ELEMENTSOF(masked_roots); i++)
                if (path_is_at_or_below(directory, masked_roots[i]))
                        return set_error(reason, -EPERM,
                                         "error: directory %s is inside %s, which is masked in every sandbox\nhelp: "
                                         "dispatch into a project directory",
                                         directory, masked_roots[i]);
        for (size_t i = 0; i < ELEMENTSOF(own); i++) {
                if (!own[i]) continue;
                _cleanup_free_ char *c = canonical(own[i]);
                if (c && paths_overlap(directory, c))
                        return set_error(reason, -EPERM,
                                         "error: directory %s overlaps %s (%s)\nhelp: dispatch into a project "
                                         "directory that neither contains nor lies inside taskferry's own directories",
                                         directory, own_names[i], c);
        }
        for (char *const *d = deny; d && *d; d++) {
                if (!is_dir(*d)) continue; /* a file mask cannot hide a directory target */
                _cleanup_free_ char *c = canonical(*d);
                if (c && path_is_at_or_below(directory, c))
                        return set_error(reason, -EPERM,
                                         "error: directory %s is inside %s, which is masked in every sandbox\nhelp: "
                                         "dispatch into a project directory",
                                         directory, c);
        }
        return 0;
}

int dispatch_check_sockets(const tf_paths *paths, char *const *sockets, char ***ret, char **reason) {
        const char *own[] = {paths->state_dir, paths->runtime_dir, paths->cache_dir, paths->overlay_tmp_root};
        _cleanup_strv_free_ char **l = NULL;
        for (char *const *e = sockets; e && *e; e++) {
                if ((*e)[0] != '/')
                        return set_error(reason, -EINVAL,
                                         "error: --allow-socket %s is not an absolute path\nhelp: give the socket's "
                                         "absolute path (for example \"$SSH_AUTH_SOCK\")",
                                         *e);
                _cleanup_free_ char *real = realpath(*e, NULL);
                struct stat st;
                if (!real || stat(real, &st) < 0 || !S_ISSOCK(st.st_mode))
                        return set_error(reason, -EINVAL,
                                         "error: --allow-socket %s is not a unix socket on this host\nhelp: give the "
                                         "path of a listening unix socket (ssh-agent, gpg-agent)",
                                         *e);
                for (size_t i = 0; i < ELEMENTSOF(own); i++) {
                        _cleanup_free_ char *c = own[i] ? canonical(own[i]) : NULL;
                        if (c && path_is_at_or_below(real, c))
                                return set_error(reason, -EPERM,
                                                 "error: --allow-socket %s lies in taskferry's own directories\nhelp: "
                                                 "a worker reaches the daemon through its task socket only",
                                                 *e);
                }
                if (!strv_contains(l, real) && strv_push(&l, real) < 0) return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

/* The three bind lists of a dispatch, by the name the wire gives them. */
typedef struct BindList {
        const char *name;
        char *const *paths;
        bool read_only;
} BindList;

static void bind_lists(const ProtoDispatchParams *p, BindList ret[static 3]) {
        ret[0] = (BindList) {PK_rwBind, p->rw_bind, false};
        ret[1] = (BindList) {PK_allowedDirs, p->allowed_dirs, false};
        ret[2] = (BindList) {PK_roBind, p->ro_bind, true};
}

int dispatch_check_binds(const tf_paths *paths, const ProtoDispatchParams *p, const char *directory, char **reason) {
        const char *protected_[] = {directory, paths->state_dir, paths->runtime_dir, paths->cache_dir,
                                    paths->overlay_tmp_root};
        const char *names[] = {"the dispatch directory", "the state dir", "the runtime dir", "the cache dir",
                               "the overlay dir"};
        BindList lists[3];
        bind_lists(p, lists);
        for (size_t k = 0; k < ELEMENTSOF(lists); k++)
                for (char *const *given = lists[k].paths; given && *given; given++) {
                        if ((*given)[0] != '/')
                                return set_error(reason, -EINVAL,
                                                 "error: %s entry %s is not an absolute path\nhelp: pass absolute paths",
                                                 lists[k].name, *given);
                        /* compare what the path resolves to: a symlink into the state dir is the state dir */
                        _cleanup_free_ char *c = canonical(*given);
                        if (!c) return set_error(reason, -ENOMEM, "error: out of memory");
                        for (size_t j = 0; j < ELEMENTSOF(protected_); j++) {
                                if (!protected_[j]) continue;
                                /* and what each own dir resolves to: a state dir named through a
                                 * symlink (a symlinked home) is still the state dir */
                                _cleanup_free_ char *pc = canonical(protected_[j]);
                                if (!pc) return set_error(reason, -ENOMEM, "error: out of memory");
                                if (paths_overlap(c, pc))
                                        return set_error(reason, -EPERM,
                                                         "error: %s entry %s overlaps %s (%s); the sandbox would no "
                                                         "longer gate the worker's writes\nhelp: bind a path outside %s",
                                                         lists[k].name, c, names[j], pc, pc);
                        }
                }
        return 0;
}

int dispatch_bind_warnings(char *const *deny, const ProtoDispatchParams *p, char ***ret_warnings, char ***ret_log) {
        _cleanup_strv_free_ char **warnings = NULL, **log = NULL;
        BindList lists[3];
        bind_lists(p, lists);
        for (size_t k = 0; k < ELEMENTSOF(lists); k++)
                for (char *const *given = lists[k].paths; given && *given; given++) {
                        _cleanup_free_ char *c = canonical(*given);
                        for (char *const *d = deny; c && d && *d; d++) {
                                if (!path_is_at_or_below(c, *d) && !path_is_at_or_below(*d, c)) continue;
                                bool inside = path_is_at_or_below(c, *d);
                                _cleanup_free_ char *text = strdup_printf(
                                        inside ? "warning: %s is inside the deny-listed %s; it is bound %s anyway, "
                                                 "because you asked for it -- the worker can read it"
                                               : "warning: %s contains the deny-listed %s; it stays masked inside "
                                                 "the sandbox (bound %s)",
                                        c, *d, lists[k].read_only ? "read-only" : "read-write");
                                if (!text || strv_push(&warnings, text) < 0 ||
                                    (inside && strv_push(&log, text + strlen("warning: ")) < 0))
                                        return -ENOMEM;
                                break;
                        }
                }
        *ret_warnings = TAKE_PTR(warnings);
        *ret_log = TAKE_PTR(log);
        return 0;
}

int dispatch_nested_directory(const char *target, const char *given, char **ret, char **reason) {
        _cleanup_free_ char *norm = calloc(1, strlen(given) + 2);
        if (!norm) return set_error(reason, -ENOMEM, "error: out of memory");
        bool dotdot = given[0] != '/';
        size_t n = 0;
        for (const char *p = given; *p && !dotdot;) {
                while (*p == '/') p++;
                size_t len = strcspn(p, "/");
                if (len == 0 || (len == 1 && p[0] == '.')) {
                        p += len;
                        continue;
                }
                if (len == 2 && p[0] == '.' && p[1] == '.') dotdot = true;
                norm[n++] = '/';
                memcpy(norm + n, p, len);
                n += len;
                p += len;
        }
        if (n == 0) norm[n++] = '/';
        norm[n] = 0;
        if (dotdot || !path_is_at_or_below(norm, target))
                return set_error(reason, -EPERM,
                                 "error: a task running in a sandbox can dispatch only into its own directory %s or a "
                                 "directory under it, not %s\nhelp: pass %s or one of its subdirectories, without .. "
                                 "components; dispatch from outside the sandbox to reach other directories",
                                 target, given, target);
        _cleanup_free_ char *real = realpath(norm, NULL);
        if (!real || !path_is_at_or_below(real, target) || !is_dir(real))
                return set_error(reason, -EPERM,
                                 "error: %s is not a directory under this task's own directory %s outside the sandbox "
                                 "(directories the task created and symlinks it made exist only in its overlay; a "
                                 "symlink may not lead out of %s)\nhelp: dispatch into a directory that already exists "
                                 "under %s, or from outside the sandbox",
                                 given, target, target, target);
        *ret = TAKE_PTR(real);
        return 0;
}

bool dispatch_marker_is_costly(const char *re) {
        for (const char *p = re; *p; p++) {
                if (*p == '{') return true;
                if (*p != '\\') continue;
                if (p[1] >= '1' && p[1] <= '9') return true;
                if (p[1]) p++;
        }
        return false;
}

int dispatch_check_marker(const char *re, bool sandboxed, char **reason) {
        if (!re) return 0;
        if (sandboxed && dispatch_marker_is_costly(re))
                return set_error(reason, -EPERM,
                                 "error: a task running in a sandbox cannot dispatch with a --require-final-marker "
                                 "that uses a back-reference (\\1 to \\9) or an interval ({m,n})\nhelp: match the "
                                 "marker without them");
        regex_t compiled;
        int rc = regcomp(&compiled, re, REG_EXTENDED | REG_NEWLINE | REG_NOSUB);
        if (rc != 0) {
                char buf[256];
                regerror(rc, &compiled, buf, sizeof buf);
                return set_error(reason, -EINVAL,
                                 "error: --require-final-marker is not a valid regular expression: %s\nhelp: pass a "
                                 "valid regular expression",
                                 buf);
        }
        regfree(&compiled);
        return 0;
}

int dispatch_check_limits(const ProtoDispatchParams *p, const DispatchParent *parent, char **reason) {
        const struct {
                const char *param, *flag;
                const ProtoInt *asked;
                int64_t own, min;
        } lim[] = {
                {PK_memoryMax, "--memory-max", &p->memory_max, parent ? parent->memory_max : 0,
                 (int64_t) DISPATCH_MEMORY_MAX_MIN},
                {PK_tasksMax, "--tasks-max", &p->tasks_max, parent ? parent->tasks_max : 0, DISPATCH_TASKS_MAX_MIN},
        };
        for (size_t i = 0; i < ELEMENTSOF(lim); i++) {
                if (!lim[i].asked->set) continue;
                int64_t v = lim[i].asked->value;
                if (v < lim[i].min)
                        return set_error(reason, -EINVAL,
                                         "error: %s must be at least %" PRId64 "%s (got %" PRId64 ")\nhelp: the shim, "
                                         "bwrap and the worker need that much; use %s with a larger value",
                                         lim[i].param, lim[i].min, i == 0 ? " bytes (8M)" : "", v, lim[i].flag);
                if (parent && lim[i].own > 0 && v > lim[i].own)
                        return set_error(reason, -EPERM,
                                         "error: %s %" PRId64 " exceeds the limit of the dispatching task %s (%" PRId64
                                         ")\nhelp: a nested dispatch cannot raise a limit above its own; omit %s to "
                                         "inherit it",
                                         lim[i].param, v, parent->id, lim[i].own, lim[i].flag);
        }
        return 0;
}

int dispatch_check_sandboxed(const ProtoDispatchParams *p, char **reason) {
        const struct {
                const char *name;
                bool asked;
        } widening[] = {
                {PK_noSandbox, p->has_no_sandbox && p->no_sandbox}, {PK_noOverlay, p->has_no_overlay && p->no_overlay},
                {PK_rwBind, p->rw_bind != NULL},                    {PK_roBind, p->ro_bind != NULL},
                {PK_allowedDirs, p->allowed_dirs != NULL},          {PK_allowSockets, p->allow_sockets != NULL},
        };
        for (size_t i = 0; i < ELEMENTSOF(widening); i++)
                if (widening[i].asked)
                        return set_error(reason, -EPERM,
                                         "error: a task running in a sandbox cannot dispatch with %s\nhelp: nested tasks "
                                         "run sandboxed on an overlay with no extra binds; dispatch from outside the "
                                         "sandbox to widen them",
                                         widening[i].name);
        return 0;
}

int dispatch_check_nested_job(const ProtoDispatchParams *p, char **reason) {
        if (!p->job) return 0;
        return set_error(reason, -EPERM, "error: a task cannot dispatch as a timer job\nhelp: Dispatch without the job param");
}

char *dispatch_resolve_variant(const char *executor_id, const char *requested) {
        if (streq(executor_id, "shell")) return NULL;
        if (streq(executor_id, "pi")) return strdup(executor_pi_thinking_level(requested));
        /* opencode: "highest" is ranked from the variants cache; without one, no flag */
        return streq(requested, "highest") ? NULL : strdup(requested);
}
