/* Method handlers (spec protocol-cli.md §1.6–§1.8, lifecycle.md §2, §4, §7,
 * sandbox-changeset-env.md §5.6–§5.7). Each returns its result or error to
 * the dispatcher (methods.c), or hands the request to a wait or a forked job
 * (METHOD_DEFERRED) whose completion answers through method_reply(). */

#include <fcntl.h>
#include <inttypes.h>
#include <regex.h>
#include <signal.h>
#include <sys/stat.h>

#include "systemd/bus.h"
#include "run/change.h"
#include "core/cooldown.h"
#include "api/events.h"
#include "changeset.h"
#include "core/jobs.h"
#include "systemd/journal.h"
#include "run/launch.h"
#include "core/manager.h"
#include "api/methods.h"
#include "run/monitor.h"
#include "systemd/notify.h"
#include "core/peer.h"
#include "core/scheduler.h"
#include "run/scope.h"
#include "api/server.h"
#include "core/settings.h"
#include "core/store.h"
#include "core/task.h"
#include "core/tasks.h"
#include "api/wait.h"
#include "run/executor-home.h"
#include "executor.h"
#include "json-util.h"
#include "logparse.h"
#include "overlay.h"
#include "sandbox-plan.h"
#include "util.h"
#include "workspace.h"

#define NARRATION_PREVIEW_UNITS 2000

static int unknown_task(MethodError *err, const char *id) {
        _cleanup_free_ char *text =
                strdup_printf("error: unknown task id: %s\nhelp: run taskferry list to see valid task ids", id);
        method_error_text(err, E_UNKNOWN_TASK, text ? text : "error: unknown task id");
        return -ENOENT;
}

/* tasks.json could not be read at start (lifecycle.md §1.4): every state
 * call fails with the reason. */
int method_check_state(Manager *m, MethodError *err) {
        if (!m->state_load_error) return 0;
        _cleanup_free_ char *text = strdup_printf(
                "error: could not read persisted task state: %s\nhelp: repair %s/tasks.json before using taskferry",
                m->state_load_error, m->paths.state_dir);
        return method_fail(err, text ? text : "error: could not read persisted task state");
}

/* A completion (a job's or a timer's) that failed. */
static void complete_failed(Request *r, const char *text) {
        MethodError e = {0};
        method_reply(r, method_fail(&e, text), NULL, &e);
}

/* ---- system.health ---- */
int method_health(Manager *m, Request *r, Task *target, json_object **ret, MethodError *err) {
        json_object *o = json_object_new_object();
        json_add_bool(o, "healthy", true);
        json_add_int(o, "pid", getpid());
        json_add_int(o, "version", PROTOCOL_VERSION);
        /* exactly these three (acceptance P1): whether the scope limits are
         * enforced is in task.stats (stats.c) */
        *ret = o;
        return 0;
}

/* ---- task.dispatch ---- */

/* Does a overlap b: equal, ancestor or descendant (root-aware). */
static char *canonical(const char *p) {
        char *real = realpath(p, NULL);
        return real ? real : strdup(p);
}

/* The dispatch directory may not be, contain or lie inside the daemon's own
 * dirs (the worker would see or change task state, other tasks' overlays and
 * logs, or its own overlay's upper dir), nor lie inside a deny-listed dir. A
 * directory that contains a deny-listed dir is fine: the mask is applied over
 * the target inside the sandbox. */
static char *check_directory(Manager *m, const char *directory) {
        const char *own[] = {m->paths.state_dir, m->paths.runtime_dir, m->paths.cache_dir, m->paths.overlay_tmp_root};
        const char *own_names[] = {"the state dir", "the runtime dir", "the cache dir", "the overlay dir"};
        /* masked in every sandbox (launch.c build_masks): a target inside would vanish */
        const char *masked_roots[] = {"/run/user", "/run/dbus"};
        for (size_t i = 0; i < ELEMENTSOF(masked_roots); i++) {
                if (path_is_at_or_below(directory, masked_roots[i]))
                        return strdup_printf("error: directory %s is inside %s, which is masked in every sandbox\nhelp: "
                                             "dispatch into a project directory",
                                             directory, masked_roots[i]);
        }
        for (size_t i = 0; i < ELEMENTSOF(own); i++) {
                _cleanup_free_ char *c = canonical(own[i]);
                if (c && paths_overlap(directory, c))
                        return strdup_printf("error: directory %s overlaps %s (%s)\nhelp: dispatch into a project "
                                             "directory that neither contains nor lies inside taskferry's own directories",
                                             directory, own_names[i], c);
        }
        _cleanup_strv_free_ char **deny = NULL;
        if (sandbox_deny_list(m->paths.home, NULL, m->settings.sandbox_denylist, &deny) < 0)
                return strdup("error: out of memory");
        for (char **d = deny; *d; d++) {
                if (!is_dir(*d)) continue; /* a file mask cannot hide a directory target */
                _cleanup_free_ char *c = canonical(*d);
                if (c && path_is_at_or_below(directory, c))
                        return strdup_printf("error: directory %s is inside %s, which is masked in every sandbox\nhelp: "
                                             "dispatch into a project directory",
                                             directory, c);
        }
        return NULL;
}

/* DESIGN.md: a bind that overlaps the target or covers a masked path is refused. */
static char *check_binds(Manager *m, json_object *params, const char *directory) {
        static const char *const keys[] = {"rwBind", "allowedDirs", "roBind"};
        const char *protected_[] = {directory, m->paths.state_dir, m->paths.runtime_dir, m->paths.cache_dir,
                                    m->paths.overlay_tmp_root};
        const char *names[] = {"the dispatch directory", "the state dir", "the runtime dir", "the cache dir",
                               "the overlay dir"};
        for (size_t k = 0; k < ELEMENTSOF(keys); k++) {
                json_object *arr = json_get_array(params, keys[k]);
                for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
                        const char *given = json_object_get_string(json_object_array_get_idx(arr, i));
                        if (given[0] != '/')
                                return strdup_printf("error: %s entry %s is not an absolute path\nhelp: pass absolute paths",
                                                     keys[k], given);
                        /* compare what the path resolves to: a symlink into the state dir is the state dir */
                        _cleanup_free_ char *p = canonical(given);
                        if (!p) return strdup("error: out of memory");
                        for (size_t j = 0; j < ELEMENTSOF(protected_); j++)
                                if (paths_overlap(p, protected_[j]))
                                        return strdup_printf(
                                                "error: %s entry %s overlaps %s (%s); the sandbox would no longer gate "
                                                "the worker's writes\nhelp: bind a path outside %s",
                                                keys[k], p, names[j], protected_[j], protected_[j]);
                }
        }
        return NULL;
}

/* Binding a deny-listed path (or something inside one) is the user's
 * explicit call (spec §2.4): it is bound, and the dispatch says so loudly. */
static int bind_warnings(Manager *m, json_object *params, json_object **ret) {
        _cleanup_strv_free_ char **deny = NULL;
        int r = sandbox_deny_list(m->paths.home, NULL, m->settings.sandbox_denylist, &deny);
        if (r < 0) return r;
        _cleanup_json_ json_object *w = json_object_new_array();
        if (!w) return -ENOMEM;
        static const char *const keys[] = {"rwBind", "allowedDirs", "roBind"};
        for (size_t k = 0; k < ELEMENTSOF(keys); k++) {
                json_object *arr = json_get_array(params, keys[k]);
                for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
                        _cleanup_free_ char *p = canonical(json_object_get_string(json_object_array_get_idx(arr, i)));
                        for (char **d = deny; p && *d; d++) {
                                if (!path_is_at_or_below(p, *d) && !path_is_at_or_below(*d, p)) continue;
                                bool inside = path_is_at_or_below(p, *d);
                                char *text = strdup_printf(
                                        inside ? "warning: %s is inside the deny-listed %s; it is bound %s anyway, "
                                                 "because you asked for it -- the worker can read it"
                                               : "warning: %s contains the deny-listed %s; it stays masked inside "
                                                 "the sandbox (bound %s)",
                                        p, *d, k == 2 ? "read-only" : "read-write");
                                if (!text || json_object_array_add(w, json_object_new_string(text)) < 0) {
                                        free(text);
                                        return -ENOMEM;
                                }
                                if (inside) log_warning("%s", text + strlen("warning: "));
                                free(text);
                                break;
                        }
                }
        }
        *ret = json_object_array_length(w) ? TAKE_PTR(w) : NULL;
        return 0;
}

static int create_output_dir(const char *path) {
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) return -ELOOP;
        int r = mkdir_p(path, 0700);
        if (r < 0) return r;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return -errno;
        if (fchmod(fd, 0700) < 0) return -errno;
        return 0;
}

static Task *find_session_task(Manager *m, const char *session_id, const char *executor_id) {
        Task *best = NULL;
        for (size_t i = 0; i < m->n_tasks; i++) {
                Task *t = m->tasks[i];
                if (!streq_ptr(t->rec.session_id, session_id)) continue;
                if (executor_id && !streq_ptr(t->rec.executor_id, executor_id)) continue;
                if (!best || strcmp(strempty(t->rec.started_at), strempty(best->rec.started_at)) > 0) best = t;
        }
        return best;
}

static char *resolve_variant(const char *executor_id, const char *requested) {
        if (streq(executor_id, "shell")) return NULL;
        if (streq(executor_id, "pi")) return strdup(executor_pi_thinking_level(requested));
        /* opencode: "highest" is ranked from the variants cache; without one, no flag */
        return streq(requested, "highest") ? NULL : strdup(requested);
}

/* Nested dispatch stays inside the caller's view (issue 5 item 7). A caller
 * inside a task's sandbox may dispatch only into its own target directory or
 * a directory under it. The path it sends is one it sees in its sandbox,
 * where the target is mounted at its host path over an overlay the worker
 * writes: a `..` or a symlink it made there names something else on the host.
 * So the path must lie under the target lexically, `..` refused rather than
 * resolved; then its host realpath must exist and still lie under the target
 * (a committed symlink pointing out is refused too). A directory that exists
 * only in the worker's overlay does not exist on the host: refused. Nothing is
 * looked up outside the target, so a refusal says nothing about other host
 * paths. Returns the error text, or NULL and the host directory in *ret. */
static char *nested_directory(Task *caller, const char *given, char **ret) {
        const char *target = strempty(caller->rec.directory);
        _cleanup_free_ char *norm = calloc(1, strlen(given) + 2);
        if (!norm) return strdup("error: out of memory");
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
                return strdup_printf("error: a task running in a sandbox can dispatch only into its own directory %s or a "
                                     "directory under it, not %s\nhelp: pass %s or one of its subdirectories, without .. "
                                     "components; dispatch from outside the sandbox to reach other directories",
                                     target, given, target);
        _cleanup_free_ char *real = realpath(norm, NULL);
        if (!real || !path_is_at_or_below(real, target) || !is_dir(real))
                return strdup_printf("error: %s is not a directory under this task's own directory %s outside the sandbox "
                                     "(directories the task created and symlinks it made exist only in its overlay; a "
                                     "symlink may not lead out of %s)\nhelp: dispatch into a directory that already exists "
                                     "under %s, or from outside the sandbox",
                                     given, target, target, target);
        *ret = TAKE_PTR(real);
        return NULL;
}

/* Is a final marker too costly to take from a worker? glibc's regcomp(3)
 * expands interval expressions ((((a{255}){255}){255}) takes seconds and
 * GiBs, in the daemon's loop), and regexec(3) matches back-references
 * (\1..\9) by backtracking, polynomial in the text with the number of
 * groups: the settlement job would never finish with a worker's message. */
static bool marker_is_costly(const char *re) {
        for (const char *p = re; *p; p++) {
                if (*p == '{') return true;
                if (*p != '\\') continue;
                if (p[1] >= '1' && p[1] <= '9') return true;
                if (p[1]) p++;
        }
        return false;
}

/* Live (queued or running) tasks a dispatch tree may hold below its
 * top-level task: a worker's nested tasks would otherwise queue in front of
 * the user's without end, each with a socket that dispatches more. */
#define NESTED_TASKS_MAX 16

static Task *dispatch_root(Manager *m, Task *t) {
        for (unsigned depth = 0; depth < 256; depth++) {
                const char *by = t->rec.dispatched_by;
                Task *p = by ? manager_find_task(m, by) : NULL;
                if (!p) break;
                t = p;
        }
        return t;
}

static unsigned live_nested_tasks(Manager *m, Task *root) {
        unsigned n = 0;
        for (size_t i = 0; i < m->n_tasks; i++) {
                Task *o = m->tasks[i];
                if (o != root && o->rec.dispatched_by && task_is_active(o) && dispatch_root(m, o) == root) n++;
        }
        return n;
}

int method_dispatch_task(Manager *m, Request *r, Task *target, json_object **ret, MethodError *err) {
        return dispatch_create(m, r, "dispatch", NULL, ret, err);
}

/* The scope limits a dispatch asks for (memoryMax bytes, tasksMax; scope.h):
 * enough for the shim, bwrap and a worker, and for a worker's nested
 * dispatch no more than its own (each task has a scope of its own, so a
 * nested task above its parent's limit would be a way out of it). NULL or
 * the error text. */
#define SCOPE_MEMORY_MAX_MIN (UINT64_C(8) << 20)
#define SCOPE_TASKS_MAX_MIN 8
static char *check_scope_limits(Caller who, json_object *p) {
        static const struct {
                const char *param, *flag;
                TaskKey key;
                int64_t min;
        } lim[] = {
                {"memoryMax", "--memory-max", TASK_KEY_memory_max, (int64_t) SCOPE_MEMORY_MAX_MIN},
                {"tasksMax", "--tasks-max", TASK_KEY_tasks_max, SCOPE_TASKS_MAX_MIN},
        };
        for (size_t i = 0; i < ELEMENTSOF(lim); i++) {
                int64_t v = 0, own = 0;
                if (!json_get_int64(p, lim[i].param, &v)) continue;
                if (v < lim[i].min)
                        return strdup_printf("error: %s must be at least %" PRId64 "%s (got %" PRId64 ")\nhelp: the "
                                             "shim, bwrap and the worker need that much; use %s with a larger value",
                                             lim[i].param, lim[i].min, i == 0 ? " bytes (8M)" : "", v, lim[i].flag);
                if (who.task && task_record_get_int(&who.task->rec, lim[i].key, &own) && own > 0 && v > own)
                        return strdup_printf("error: %s %" PRId64 " exceeds the limit of the dispatching task %s "
                                             "(%" PRId64 ")\nhelp: a nested dispatch cannot raise a limit above its "
                                             "own; omit %s to inherit it",
                                             lim[i].param, v, who.task->id, own, lim[i].flag);
        }
        return NULL;
}

int dispatch_create(Manager *m, Request *r, const char *role, Task **ret_task, json_object **ret, MethodError *err) {
        json_object *p = r->req.params;
        const char *dir_param = json_get_string(p, "directory");
        Caller who = caller_of(m, r->conn);
        _cleanup_free_ char *directory = NULL;
        if (who.task) {
                if (live_nested_tasks(m, dispatch_root(m, who.task)) >= NESTED_TASKS_MAX) {
                        _cleanup_free_ char *help = strdup_printf(
                                "Wait for a nested task to finish; a task and the tasks dispatched from it may have at "
                                "most %d nested tasks queued or running",
                                NESTED_TASKS_MAX);
                        return method_error(err, E_SERVER_BUSY, "this task has too many nested tasks queued or running",
                                                   help ? help : "");
                }
                _cleanup_free_ char *nested_err = nested_directory(who.task, dir_param, &directory);
                if (nested_err) return method_fail(err, nested_err);
                /* a worker's dispatch is never a timer job's (`job list` trusts the mark) */
                if (json_get_string(p, "job"))
                        return method_fail(err, "error: a task cannot dispatch as a timer job\n"
                                                "help: Dispatch without the job param");
        }
        _cleanup_free_ char *limit_err = check_scope_limits(who, p);
        if (limit_err) return method_fail(err, limit_err);
        if (!who.task)
                directory = realpath(dir_param, NULL);
        if (!directory || !is_dir(directory)) {
                _cleanup_free_ char *text = strdup_printf(
                        "error: directory does not exist: %s\nhelp: Use an existing directory path for --directory", dir_param);
                return method_fail(err, text);
        }
        const char *executor_id = json_get_string(p, "executor");
        const char *session_id = json_get_string(p, "sessionId");
        Task *prior = session_id ? find_session_task(m, session_id, executor_id) : NULL;
        /* a sandboxed caller inherits nothing from a session it may not see */
        if (prior && !caller_may_see(who, prior)) prior = NULL;
        if (!executor_id) executor_id = prior ? prior->rec.executor_id : m->settings.default_executor;
        const executor *ex = executor_find(strempty(executor_id));
        if (!ex) {
                _cleanup_free_ char *text = strdup_printf("error: unknown executor: %s\nhelp: use one of %s",
                                                          strempty(executor_id), executor_names());
                return method_fail(err, text);
        }
        const char *model = json_get_string(p, "model");
        if (!model && prior) model = prior->rec.model;
        if (!model && ex->needs_model) {
                if (session_id) {
                        _cleanup_free_ char *text = strdup_printf(
                                "error: no task found for session id \"%s\" to inherit a model from\nhelp: pass --model",
                                session_id);
                        return method_fail(err, text);
                }
                return method_fail(err, "error: --model is required\nhelp: pass --model <provider/model>, or use "
                                        "--executor shell for a plain command");
        }
        const char *marker = json_get_string(p, "finalMarker");
        if (who.sandboxed && marker && marker_is_costly(marker))
                return method_fail(err, "error: a task running in a sandbox cannot dispatch with a --require-final-marker "
                                       "that uses a back-reference (\\1 to \\9) or an interval ({m,n})\nhelp: match the "
                                       "marker without them");
        if (marker) {
                regex_t re;
                int rc = regcomp(&re, marker, REG_EXTENDED | REG_NEWLINE | REG_NOSUB);
                if (rc != 0) {
                        char buf[256];
                        regerror(rc, &re, buf, sizeof buf);
                        _cleanup_free_ char *text = strdup_printf(
                                "error: --require-final-marker is not a valid regular expression: %s\nhelp: pass a valid regular expression", buf);
                        return method_fail(err, text);
                }
                regfree(&re);
        }
        _cleanup_free_ char *dir_err = check_directory(m, directory);
        if (dir_err) return method_fail(err, dir_err);
        /* a sandboxed caller's binds are refused before they are looked at:
         * resolving and warning about each entry of a 1 MiB list would let a
         * worker write thousands of lines into the daemon's log */
        if (who.sandboxed) {
                static const char *const widening[] = {"noSandbox", "noOverlay", "rwBind", "roBind", "allowedDirs"};
                for (size_t i = 0; i < ELEMENTSOF(widening); i++) {
                        json_object *v = NULL;
                        if (!json_object_object_get_ex(p, widening[i], &v)) continue;
                        if (json_object_is_type(v, json_type_boolean) && !json_object_get_boolean(v)) continue;
                        _cleanup_free_ char *text = strdup_printf(
                                "error: a task running in a sandbox cannot dispatch with %s\nhelp: nested tasks run "
                                "sandboxed on an overlay with no extra binds; dispatch from outside the sandbox to widen them",
                                widening[i]);
                        return method_fail(err, text);
                }
        }
        _cleanup_free_ char *bind_err = check_binds(m, p, directory);
        if (bind_err) return method_fail(err, bind_err);
        _cleanup_json_ json_object *warnings = NULL;
        if (bind_warnings(m, p, &warnings) < 0) return method_fail(err, "error: out of memory");

        _cleanup_free_ char *id = task_id_new();
        _cleanup_free_ char *log_path = id ? tf_path_log(&m->paths, id) : NULL;
        _cleanup_free_ char *out_dir = id ? tf_path_output_dir(&m->paths, id) : NULL;
        if (!id || !log_path || !out_dir) return method_fail(err, "error: out of memory");
        int k = create_output_dir(out_dir);
        if (k < 0) {
                _cleanup_free_ char *text = strdup_printf("error: cannot create task output directory %s: %s", out_dir,
                                                          k == -ELOOP ? "task output directory is a symlink" : strerror(-k));
                return method_fail(err, text);
        }
        const char *user_prompt = json_get_string(p, "prompt");
        _cleanup_free_ char *prompt = NULL;
        bool sandboxed = m->settings.sandbox_enabled && !json_get_bool(p, "noSandbox", false);
        if (streq(ex->id, "shell"))
                prompt = strdup(user_prompt); /* a shell script must run exactly as given */
        else
                prompt = strdup_printf("%s\n\n## Persistent output dir\nWrite any files you want to keep beyond this task "
                                       "(reports, logs, artifacts) to %s (also available as $TASKFERRY_OUTPUT_DIR)%s. "
                                       "They survive after the task ends; retrieve them with `taskferry output %s`.",
                                       user_prompt, out_dir, sandboxed ? " inside the sandbox" : "", id);
        const char *requested_variant = json_get_string(p, "variant");
        if (!requested_variant && prior) requested_variant = prior->rec.variant;
        if (!requested_variant) requested_variant = m->settings.default_variant;
        _cleanup_free_ char *variant = resolve_variant(ex->id, requested_variant);

        size_t plen = strlen(user_prompt), units = utf8_utf16_length(user_prompt, plen);
        _cleanup_free_ char *preview = NULL;
        if (units > 200) {
                size_t cut = utf8_prefix_utf16(user_prompt, plen, 200);
                preview = strdup_printf("%.*s\xE2\x80\xA6", (int) cut, user_prompt);
        } else
                preview = strdup(user_prompt);
        char iso[32];
        format_iso(now_ms(), iso);

        /* the record, key by key in tasks.json's order (lifecycle.md §1.2) */
        Task *t = task_create(m, id);
        if (!t) {
                (void) rmdir(out_dir);
                return method_fail(err, "error: out of memory");
        }
        int rk = 0;
#define SET(x) do { if (rk >= 0) rk = (x); } while (0)
        SET(task_set_str(t, TASK_KEY_directory, directory));
        SET(task_set_str(t, TASK_KEY_log_path, log_path));
        SET(task_set_str(t, TASK_KEY_role, role));
        SET(task_set_str(t, TASK_KEY_prompt, prompt));
        SET(task_init_status(t, TASK_QUEUED));
        SET(task_set_str(t, TASK_KEY_model, model));
        SET(task_set_str(t, TASK_KEY_executor_id, ex->id));
        SET(task_set_str(t, TASK_KEY_variant, variant));
        SET(task_set_str(t, TASK_KEY_session_id, session_id));
        SET(task_set_str(t, TASK_KEY_origin_session_id, json_get_string(p, "originSessionId")));
        SET(task_set_null(t, TASK_KEY_pid));
        SET(task_set_str(t, TASK_KEY_started_at, iso));
        SET(task_set_null(t, TASK_KEY_ended_at));
        SET(task_set_null(t, TASK_KEY_exit_code));
        SET(task_set_null(t, TASK_KEY_signal));
        SET(task_set_str(t, TASK_KEY_prompt_preview, preview));
        SET(units > 200 ? task_set_int(t, TASK_KEY_prompt_total_chars, (int64_t) units)
                        : task_set_null(t, TASK_KEY_prompt_total_chars));
        SET(task_set_null(t, TASK_KEY_spawn_error));
        SET(task_set_bool(t, TASK_KEY_cancel_requested, false));
        SET(task_set_bool(t, TASK_KEY_internal, false));
        SET(task_set_null(t, TASK_KEY_failure_reason));
        SET(task_set_null(t, TASK_KEY_failure_detail));
        SET(task_set_bool(t, TASK_KEY_incomplete, false));
        SET(task_set_str(t, TASK_KEY_final_marker, marker));
        SET(task_set_null(t, TASK_KEY_final_status));
        SET(task_set_str(t, TASK_KEY_class_name, json_get_string(p, "class")));
        SET(task_init_changeset(t, CHANGESET_NONE));
        SET(task_set_null(t, TASK_KEY_diff_path));
        SET(task_set_null(t, TASK_KEY_overlay_dirs));
        SET(task_set_null(t, TASK_KEY_pre_dispatch_head));
        SET(task_set_null(t, TASK_KEY_changeset_error));
        SET(task_set_str(t, TASK_KEY_parent_task_id, json_get_string(p, "parentTaskId")));
        SET(task_set_str(t, TASK_KEY_check_status, "none"));
        static const TaskKey check_nulls[] = {TASK_KEY_check_command, TASK_KEY_check_exit_code, TASK_KEY_check_output_tail,
                                              TASK_KEY_check_started_at, TASK_KEY_check_ended_at};
        for (size_t i = 0; i < ELEMENTSOF(check_nulls); i++) SET(task_set_null(t, check_nulls[i]));
        SET(task_set_bool(t, TASK_KEY_check_override, false));
        SET(task_set_null(t, TASK_KEY_project_config_warning));
        SET(task_set_null(t, TASK_KEY_check_gate_pid));
        SET(task_set_str(t, TASK_KEY_output_dir, out_dir));
        /* the task whose worker dispatched this one (it may cancel or reject it) */
        SET(task_set_str(t, TASK_KEY_dispatched_by, who.task ? who.task->id : NULL));
        /* the timer job it comes from (`taskferry job run`; never a worker's,
         * refused above); only when given */
        if (json_get_string(p, "job")) SET(task_set_str(t, TASK_KEY_job, json_get_string(p, "job")));
#undef SET
        if (rk < 0) {
                manager_remove_task(m, t);
                (void) rmdir(out_dir);
                return method_fail(err, "error: out of memory");
        }
        /* launch options and the caller's env: on the Task, and in its launch
         * request file (launch_request_save) until it launches or settles */
        json_object *lp = json_object_new_object();
        json_add_bool(lp, "noSandbox", json_get_bool(p, "noSandbox", false));
        json_add_bool(lp, "noOverlay", json_get_bool(p, "noOverlay", false));
        json_object *rw = json_object_new_array();
        static const char *const rw_keys[] = {"rwBind", "allowedDirs"};
        for (size_t kk = 0; kk < ELEMENTSOF(rw_keys); kk++) {
                json_object *a = json_get_array(p, rw_keys[kk]);
                for (size_t i = 0; a && i < json_object_array_length(a); i++)
                        json_object_array_add(rw, json_object_get(json_object_array_get_idx(a, i)));
        }
        json_add(lp, "rwBind", rw);
        json_add(lp, "roBind", json_object_get(json_get_array(p, "roBind")));
        int64_t disk_max;
        if (json_get_int64(p, "diskMax", &disk_max)) json_add(lp, "diskMax", json_object_new_int64(disk_max));
        static const char *const scope_params[] = {"memoryMax", "tasksMax"}; /* scope.h */
        for (size_t i = 0; i < ELEMENTSOF(scope_params); i++) {
                int64_t v;
                if (json_get_int64(p, scope_params[i], &v)) json_add(lp, scope_params[i], json_object_new_int64(v));
        }

        json_object *env = json_get_object(p, "env");
        t->caller_env = env ? json_object_get(env) : NULL;
        t->launch = lp;
        if (json_get_bool(p, "noOverlay", false) || !m->settings.overlay_enabled)
                if (sandboxed)
                        log_warning("overlay disabled -- writes of task %s land directly on %s, not gated by accept/reject",
                                    id, directory);
        /* The id we hand out must survive a crash right after the reply: the
         * record is durable before anything runs, or the dispatch fails and
         * leaves nothing behind (issue 6 item 5). */
        _cleanup_free_ char *task_dir = tf_path_task_dir(&m->paths, id);
        if (!task_dir) {
                manager_remove_task(m, t);
                (void) rmdir(out_dir);
                return method_fail(err, "error: out of memory");
        }
        /* what it needs to launch after a restart, durable first (a crash
         * before the record is flushed leaves an orphan the boot sweep takes) */
        int fk = launch_request_save(t);
        if (fk < 0) log_error_errno(fk, "cannot record the launch request of task %s; dispatch refused", id);
        else {
                task_persist(t);
                fk = manager_flush(m);
                if (fk < 0) log_error_errno(fk, "cannot record task %s in tasks.json; dispatch refused", id);
        }
        if (fk < 0) {
                launch_request_drop(t);
                (void) rmdir(task_dir);
                manager_remove_task(m, t);
                (void) rmdir(out_dir);
                _cleanup_free_ char *text = strdup_printf(
                        "error: cannot record the task durably in %s/tasks.json: %s\nhelp: make the state directory "
                        "writable and free some space on its file system, then dispatch again",
                        m->paths.state_dir, strerror(-fk));
                return method_fail(err, text);
        }
        events_task_added(m, t); /* its first task.state: queued */
        bus_task_added(m, t);
        journal_task_added(t);
        notify_status_changed(m);
        scheduler_enqueue(m, t);
        scheduler_kick(m);

        json_object *res = task_summary(t);
        _cleanup_free_ char *next =
                t->rec.status == TASK_QUEUED
                        ? strdup_printf("Task is queued; run taskferry wait or taskferry status with task id \"%s\" to check when it starts", id)
                        : strdup_printf("Run taskferry wait or taskferry status with task id \"%s\" to check progress", id);
        json_add_string(res, "next", next);
        if (warnings) json_add(res, "warnings", TAKE_PTR(warnings));
        *ret = res;
        if (ret_task) *ret_task = t;
        return 0;
}

int method_lookup_task(Manager *m, Request *r, Task **ret, MethodError *err) {
        const char *id = json_get_string(r->req.params, "taskId");
        Task *t = id ? manager_find_task(m, id) : NULL;
        if (!t) return unknown_task(err, strempty(id));
        if (!caller_may_see(caller_of(m, r->conn), t)) return unknown_task(err, t->id);
        *ret = t;
        return 0;
}

/* ---- task.status ---- */
int method_status(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err) {
        *ret = task_status_detail(t);
        return *ret ? 0 : -ENOMEM;
}

/* ---- task.list ---- */
int method_list(Manager *m, Request *r, Task *target, json_object **ret, MethodError *err) {
        Caller who = caller_of(m, r->conn);
        *ret = manager_list(m, json_get_string(r->req.params, "directory"),
                            who.sandboxed ? (who.task ? who.task->id : "") : NULL);
        if (*ret && !who.sandboxed) { /* active provider cooldowns (cooldown.h), only when there are any */
                json_object *cd = cooldown_snapshot(m);
                if (cd && json_object_array_length(cd) > 0) json_add(*ret, "cooldowns", cd);
                else json_object_put(cd);
        }
        return *ret ? 0 : -ENOMEM;
}

int method_wait(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err) {
        int64_t timeout = -1, tail = 0;
        json_get_int64(r->req.params, "timeoutMs", &timeout);
        json_get_int64(r->req.params, "tailChars", &tail);
        wait_park(r, t, timeout, tail > 0 ? (uint64_t) tail : 0);
        return METHOD_DEFERRED; /* wait.c answers it */
}

/* ---- task.result ---- */

static bool fields_include(json_object *fields, const char *name) {
        if (!fields) return true;
        for (size_t i = 0; i < json_object_array_length(fields); i++)
                if (streq(json_object_get_string(json_object_array_get_idx(fields, i)), name)) return true;
        return false;
}


typedef struct ResultJob {
        Request *r;
        Task *t;
} ResultJob;

static int64_t file_size(const char *path) {
        struct stat st;
        return stat(path, &st) == 0 ? (int64_t) st.st_size : -1;
}

/* Runs in the forked child: reads the log and the patch (spec lifecycle.md §4.2–§4.3). */
static json_object *result_job_run(void *userdata, int *error) {
        ResultJob *rj = userdata;
        Task *t = rj->t;
        json_object *params = rj->r->req.params;
        json_object *fields = json_get_array(params, "fields");
        bool full = json_get_bool(params, "full", false);
        log_summary s = {0};
        int r = log_summarize_file(t->rec.log_path, t->rec.session_id, &s);
        if (r < 0 && r != -ENOENT) {
                *error = r;
                return NULL;
        }
        json_object *o = json_object_new_object();
        json_add_string(o, "taskId", t->id);
        task_copy_key(o, t, TASK_KEY_status);
        static const TaskKey head[] = {TASK_KEY_exit_code, TASK_KEY_signal, TASK_KEY_spawn_error, TASK_KEY_failure_reason,
                                       TASK_KEY_failure_detail};
        for (size_t i = 0; i < ELEMENTSOF(head); i++) task_copy_key(o, t, head[i]);
        const char *diff_path = t->rec.diff_path;
        /* a patch that alone exceeds the frame budget is never read: the
         * answer could not be sent, and the daemon would hold all of it */
        if (diff_path && fields_include(fields, "diff") && file_size(diff_path) > PROTOCOL_MAX_BUFFER_BYTES) {
                json_object_put(o);
                o = json_object_new_object();
                json_add_bool(o, "responseTooLarge", true);
                log_summary_done(&s);
                return o;
        }
        json_object *diff = NULL, *stat = NULL;
        if (diff_path && (fields_include(fields, "diff") || fields_include(fields, "diffStat"))) {
                _cleanup_free_ char *data = NULL;
                size_t len = 0;
                if (read_file(diff_path, (size_t) 1 << 30, &data, &len) >= 0) {
                        _cleanup_free_ char *clean = utf8_sanitize(data, len);
                        diff = clean ? json_object_new_string(clean) : NULL;
                        unsigned files = 0, adds = 0, dels = 0;
                        changeset_numstat(diff_path, &files, &adds, &dels);
                        stat = json_object_new_object();
                        json_add_int(stat, "files", files);
                        json_add_int(stat, "additions", adds);
                        json_add_int(stat, "deletions", dels);
                }
        }
        json_add(o, "diff", diff);
        json_add(o, "diffStat", stat);
        task_copy_key(o, t, TASK_KEY_changeset_error);
        if (t->rec.changeset_warnings) task_copy_key(o, t, TASK_KEY_changeset_warnings);
        if (t->rec.head_drift_from) {
                task_copy_key(o, t, TASK_KEY_head_drift_from);
                task_copy_key(o, t, TASK_KEY_head_drift_to);
                task_copy_key(o, t, TASK_KEY_head_drift_recovered);
        }
        bool incomplete = t->rec.incomplete;
        if (incomplete) json_add_bool(o, "incomplete", true);
        static const TaskKey opt[] = {TASK_KEY_final_marker, TASK_KEY_final_status, TASK_KEY_class_name,
                                      TASK_KEY_parent_task_id, TASK_KEY_project_config_warning};
        for (size_t i = 0; i < ELEMENTSOF(opt); i++)
                if (task_record_is_set(&t->rec, opt[i])) task_copy_key(o, t, opt[i]);
        const char *check = t->rec.check_status;
        if (check && !streq(check, "none")) {
                static const TaskKey ck[] = {TASK_KEY_check_status, TASK_KEY_check_command, TASK_KEY_check_exit_code,
                                             TASK_KEY_check_started_at, TASK_KEY_check_ended_at};
                for (size_t i = 0; i < ELEMENTSOF(ck); i++) task_copy_key(o, t, ck[i]);
                if (t->rec.check_override) json_add_bool(o, "checkOverride", true);
                if (fields_include(fields, "checkOutputTail")) task_copy_key(o, t, TASK_KEY_check_output_tail);
        }
        json_add_string(o, "sessionId", s.session_id ? s.session_id : t->rec.session_id);
        json_add(o, "tokens", s.tokens ? json_object_get(s.tokens) : NULL);
        json_add(o, "cost", s.has_cost ? json_new_number(s.cost) : NULL);
        json_add_string(o, "message", s.message ? s.message : "");
        const char *narr = s.narration ? s.narration : "";
        size_t nlen = strlen(narr), units = utf8_utf16_length(narr, nlen);
        bool truncated = !full && units > NARRATION_PREVIEW_UNITS;
        if (truncated) {
                size_t cut = utf8_prefix_utf16(narr, nlen, NARRATION_PREVIEW_UNITS);
                _cleanup_free_ char *n = strdup_printf("%.*s\xE2\x80\xA6", (int) cut, narr);
                json_add_string(o, "narration", n);
        } else
                json_add_string(o, "narration", narr);
        json_add_int(o, "narrationTotalChars", (int64_t) units);
        json_add_bool(o, "narrationTruncated", truncated);
        if (incomplete) {
                _cleanup_free_ char *why = NULL;
                const char *marker = t->rec.final_marker;
                if (marker) {
                        json_object *q = json_object_new_string(marker);
                        why = strdup_printf("(--require-final-marker %s did not match)", json_to_line(q, NULL));
                        json_object_put(q);
                } else
                        why = strdup("(empty message)");
                _cleanup_free_ char *next = strdup_printf(
                        "Task %s exited cleanly but produced no usable final output %s; treat as incomplete", t->id, why);
                json_add_string(o, "next", next);
        } else if (truncated) {
                _cleanup_free_ char *next = strdup_printf(
                        "Run taskferry result with full: true on task id \"%s\" to see the complete narration", t->id);
                json_add_string(o, "next", next);
        }
        task_copy_key(o, t, TASK_KEY_log_path);
        task_copy_key(o, t, TASK_KEY_output_dir);
        log_summary_done(&s);
        if (!fields) return o;
        json_object *proj = json_object_new_object();
        json_add_string(proj, "taskId", t->id);
        task_copy_key(proj, t, TASK_KEY_status);
        for (size_t i = 0; i < json_object_array_length(fields); i++) {
                const char *f = json_object_get_string(json_object_array_get_idx(fields, i));
                json_object *v = NULL;
                if (json_object_object_get_ex(o, f, &v)) v = json_object_get(v);
                else v = task_record_get_json_by_name(&t->rec, f); /* fields not in the detail shape come from the record */
                json_object_object_add(proj, f, v);
        }
        json_object_put(o);
        return proj;
}

static void result_job_done(Manager *m, void *userdata, json_object *res, int error) {
        ResultJob *rj = userdata;
        Request *r = rj->r;
        free(rj);
        if (!res) {
                _cleanup_free_ char *text = strdup_printf("error: could not read the task log: %s",
                                                          strerror(error < 0 ? -error : EIO));
                return complete_failed(r, text);
        }
        if (json_get_bool(res, "responseTooLarge", false)) {
                /* the same answer connection_send_frame gives a frame over budget */
                _cleanup_free_ char *msg = strdup_printf("daemon response for this request exceeds %d bytes",
                                                         PROTOCOL_MAX_BUFFER_BYTES);
                MethodError e = {0};
                int k = method_error(&e, E_RESPONSE_TOO_LARGE, msg ? msg : "response too large",
                                     "Narrow the request (e.g. pass --directory), or use a method that "
                                     "summarizes server-side if one exists");
                return method_reply(r, k, NULL, &e);
        }
        method_reply(r, 0, json_object_get(res), NULL);
}

int method_result(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err) {
        json_object *fields = json_get_array(r->req.params, "fields");
        if (fields && json_get_bool(r->req.params, "full", false) && !fields_include(fields, "narration"))
                return method_fail(err, "error: full requires narration in fields\nhelp: add narration to fields or drop full");
        if (task_is_active(t) || t->settling) {
                const char *status = t->settling ? "running" : strempty(task_status_to_string(t->rec.status));
                json_object *o = json_object_new_object();
                json_add_string(o, "taskId", t->id);
                json_add_string(o, "status", status);
                _cleanup_free_ char *msg = strdup_printf("task is still %s; poll taskferry status first", status);
                if (!fields) json_add_string(o, "message", msg);
                else
                        for (size_t i = 0; i < json_object_array_length(fields); i++) {
                                const char *f = json_object_get_string(json_object_array_get_idx(fields, i));
                                if (streq(f, "message")) json_add_string(o, f, msg);
                                else json_add_null(o, f);
                        }
                return *ret = o, 0;
        }
        ResultJob *rj = calloc(1, sizeof *rj);
        if (!rj) return method_fail(err, "error: out of memory");
        rj->r = r;
        rj->t = t;
        int k = job_start(m, result_job_run, result_job_done, rj);
        if (k < 0) {
                free(rj);
                return method_fail(err, "error: cannot start the result job");
        }
        return METHOD_DEFERRED; /* result_job_done answers it */
}

/* ---- task.cancel ---- */

/* A caller inside a sandbox may cancel or reject only the tasks its own task
 * dispatched, and may never accept (landing changes is the user's decision).
 * 0, or -EIO with the refusal in err. */
static int caller_may_decide_as(Caller who, Task *t, const char *verb, MethodError *err) {
        if (!who.sandboxed) return 0;
        _cleanup_free_ char *text = NULL;
        if (streq(verb, "accept"))
                text = strdup_printf("error: a task running in a sandbox cannot accept changesets\nhelp: read the diff "
                                     "(taskferry result %s --diff) and run taskferry accept %s from outside the sandbox",
                                     t->id, t->id);
        else if (who.task && streq_ptr(t->rec.dispatched_by, who.task->id))
                return 0;
        else
                text = strdup_printf("error: a task running in a sandbox can only %s tasks it dispatched itself, and %s "
                                     "was not dispatched by it\nhelp: run taskferry %s %s from outside the sandbox",
                                     verb, t->id, verb, t->id);
        return method_fail(err, text ? text : "error: refused");
}

static int caller_may_decide(Manager *m, Request *r, Task *t, const char *verb, MethodError *err) {
        return caller_may_decide_as(caller_of(m, r->conn), t, verb, err);
}

/* A cancel reaches the tasks the cancelled task's worker dispatched, and
 * theirs: a worker cannot go on through a nested task after its user
 * stopped it (a security review finding). Queued ones are cancelled before
 * launch, running ones get SIGTERM and, after grace ms, SIGKILL. */
static void cancel_dispatched(Manager *m, Task *parent, int64_t grace, unsigned depth) {
        if (depth > 64) return;
        char iso[32];
        for (size_t i = 0; i < m->n_tasks; i++) {
                Task *c = m->tasks[i];
                if (c == parent || !streq_ptr(c->rec.dispatched_by, parent->id)) continue;
                if (c->rec.status == TASK_QUEUED) {
                        scheduler_remove(m, c);
                        task_set_str(c, TASK_KEY_ended_at, format_iso(now_ms(), iso));
                        launch_request_drop(c);
                        (void) task_transition(c, TASK_CANCELLED, c->rec.changeset_status);
                } else if (c->rec.status == TASK_RUNNING && !c->rec.cancel_requested) {
                        task_set_bool(c, TASK_KEY_cancel_requested, true);
                        (void) task_terminate(c, (uint64_t) grace);
                        task_persist(c);
                }
                cancel_dispatched(m, c, grace, depth + 1);
        }
}

int method_cancel(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err) {
        int64_t grace = (int64_t) m->settings.cancel_grace_ms;
        json_get_int64(r->req.params, "graceMs", &grace);
        return task_cancel(m, caller_of(m, r->conn), t, grace, ret, err);
}

int task_cancel(Manager *m, Caller who, Task *t, int64_t grace, json_object **ret, MethodError *err) {
        int d = caller_may_decide_as(who, t, "cancel", err);
        if (d < 0) return d;
        cancel_dispatched(m, t, grace, 0);
        const char *status = strempty(task_status_to_string(t->rec.status));
        char iso[32];
        if (t->rec.status == TASK_QUEUED) {
                scheduler_remove(m, t);
                task_set_str(t, TASK_KEY_ended_at, format_iso(now_ms(), iso));
                launch_request_drop(t);
                (void) task_transition(t, TASK_CANCELLED, t->rec.changeset_status);
                json_object *o = task_summary(t);
                json_add_string(o, "note", "queued task cancelled before launch");
                return *ret = o, 0;
        }
        if (t->rec.status != TASK_RUNNING) {
                json_object *o = task_summary(t);
                _cleanup_free_ char *note = strdup_printf("task is already %s; nothing to cancel", status);
                json_add_string(o, "note", note);
                return *ret = o, 0;
        }
        int64_t pid = 0;
        bool has_pid = task_record_get_int(&t->rec, TASK_KEY_pid, &pid);
        if (!has_pid && t->shim_pid <= 0) {
                _cleanup_free_ char *text = strdup_printf("error: task %s has no pid on record", t->id);
                return method_fail(err, text);
        }
        task_set_bool(t, TASK_KEY_cancel_requested, true);
        int k = task_terminate(t, (uint64_t) grace);
        if (k < 0) {
                _cleanup_free_ char *text = strdup_printf("error: cannot signal task %s: %s", t->id, strerror(-k));
                return method_fail(err, text);
        }
        task_persist(t);
        json_object *o = task_summary(t);
        _cleanup_free_ char *note = strdup_printf(
                "SIGTERM sent to process group %" PRId64 "; escalates to SIGKILL after %" PRId64 "ms if it hasn't exited",
                has_pid ? pid : (int64_t) t->shim_pid, grace);
        json_add_string(o, "note", note);
        *ret = o;
        return 0;
}

/* ---- task.accept / task.reject: the decision itself is change.c's ---- */

/* change.h change_done_fn: answer the request (or drop it at shutdown). */
static void change_answer(void *userdata, int rc, json_object *result, MethodError *err) {
        Request *r = userdata;
        if (rc == -ECANCELED) return request_free(r);
        method_reply(r, rc, result, err);
}

static int change(Manager *m, Request *r, Task *t, bool accept, MethodError *err) {
        int d = caller_may_decide(m, r, t, accept ? "accept" : "reject", err);
        if (d < 0) return d;
        d = change_start(m, t, accept, change_answer, r, err);
        if (d < 0) return d;
        return METHOD_DEFERRED; /* change_answer answers it */
}

int method_accept(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err) {
        return change(m, r, t, true, err);
}

int method_reject(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err) {
        return change(m, r, t, false, err);
}
