/* Launch options and the launch request file (launch-options.h). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/env-file.h"
#include "core/launch-options.h"
#include "core/manager.h"
#include "core/task.h"
#include "json-util.h"
#include "paths.h"
#include "protocol-keys.h"
#include "fileio.h"
#include "fs-util.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"

void launch_options_done(LaunchOptions *o) {
        strv_free(o->rw_bind);
        strv_free(o->ro_bind);
        free(o->summary_session_id);
        strv_free(o->allow_sockets);
        *o = (LaunchOptions) {0};
}

int launch_options_copy(const LaunchOptions *o, LaunchOptions *ret) {
        *ret = *o;
        ret->rw_bind = ret->ro_bind = NULL;
        ret->summary_session_id = NULL;
        ret->allow_sockets = NULL;
        if ((o->rw_bind && !(ret->rw_bind = strv_copy(o->rw_bind))) ||
            (o->allow_sockets && !(ret->allow_sockets = strv_copy(o->allow_sockets))) ||
            (o->ro_bind && !(ret->ro_bind = strv_copy(o->ro_bind))) ||
            (o->summary_session_id && !(ret->summary_session_id = strdup(o->summary_session_id)))) {
                launch_options_done(ret);
                return -ENOMEM;
        }
        return 0;
}

static json_object *strv_to_json(char *const *l) {
        json_object *a = json_object_new_array();
        for (char *const *s = l; a && s && *s; s++)
                if (json_object_array_add(a, json_object_new_string(*s)) < 0) {
                        json_object_put(a);
                        return NULL;
                }
        return a;
}

json_object *launch_options_to_json(const LaunchOptions *o, bool summary) {
        _cleanup_json_ json_object *j = json_object_new_object();
        if (!j) return NULL;
        if (summary) {
                if (o->summary_session_id && json_add_string(j, PK_summarySessionId, o->summary_session_id) < 0) return NULL;
                return TAKE_PTR(j);
        }
        json_object *rw = strv_to_json(o->rw_bind), *ro = o->ro_bind_given ? strv_to_json(o->ro_bind) : NULL;
        if (json_add_bool(j, PK_noSandbox, o->no_sandbox) < 0 || json_add_bool(j, PK_noOverlay, o->no_overlay) < 0 ||
            !rw || json_add(j, PK_rwBind, rw) < 0 || (o->ro_bind_given && !ro) || json_add(j, PK_roBind, ro) < 0)
                return NULL;
        const struct {
                const char *key;
                int64_t v;
        } nums[] = {{PK_diskMax, o->disk_max}, {PK_memoryMax, o->memory_max}, {PK_tasksMax, o->tasks_max}};
        for (size_t i = 0; i < ELEMENTSOF(nums); i++)
                if (nums[i].v != 0 && json_add_int(j, nums[i].key, nums[i].v) < 0) return NULL;
        if (o->allow_sockets) {
                json_object *as = strv_to_json(o->allow_sockets);
                if (!as || json_add(j, PK_allowSockets, as) < 0) return NULL;
        }
        return TAKE_PTR(j);
}

/* The strings of a JSON array (other entries left out). */
static int strv_from_json(json_object *a, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        for (size_t i = 0; a && i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i);
                if (!json_object_is_type(e, json_type_string)) continue;
                int r = strv_push(&l, json_object_get_string(e));
                if (r < 0) return r;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

int launch_options_from_json(json_object *o, LaunchOptions *ret) {
        *ret = (LaunchOptions) {0};
        if (!json_is_object(o)) return -EBADMSG;
        LaunchOptions lo = {
                .no_sandbox = json_get_bool(o, PK_noSandbox, false),
                .no_overlay = json_get_bool(o, PK_noOverlay, false),
                .ro_bind_given = json_get_array(o, PK_roBind) != NULL,
        };
        (void) json_get_int64(o, PK_diskMax, &lo.disk_max);
        (void) json_get_int64(o, PK_memoryMax, &lo.memory_max);
        (void) json_get_int64(o, PK_tasksMax, &lo.tasks_max);
        const char *sid = json_get_string(o, PK_summarySessionId);
        if ((sid && !(lo.summary_session_id = strdup(sid))) || strv_from_json(json_get_array(o, PK_rwBind), &lo.rw_bind) < 0 ||
            strv_from_json(json_get_array(o, PK_roBind), &lo.ro_bind) < 0 ||
            strv_from_json(json_get_array(o, PK_allowSockets), &lo.allow_sockets) < 0) {
                launch_options_done(&lo);
                return -ENOMEM;
        }
        *ret = lo;
        return 0;
}

/* ---- the launch request ---- */

static char *launch_request_path(Task *t) {
        _cleanup_free_ char *dir = tf_path_task_dir(&t->m->paths, t->id);
        return dir ? strdup_printf("%s/" LAUNCH_REQUEST_FILE, dir) : NULL;
}

int launch_request_save(Task *t) {
        _cleanup_free_ char *dir = tf_path_task_dir(&t->m->paths, t->id);
        _cleanup_free_ char *path = launch_request_path(t);
        if (!dir || !path) return -ENOMEM;
        int r = mkdir_p_chmod(dir, 0700);
        if (r < 0) return r;
        /* no env-file value goes to disk (env-file.h): a caller's entry equal
         * to the env file's (a worker's nested dispatch forwards the env it
         * got) is left out of the file — the env file supplies it at spawn —
         * while the task in memory keeps its whole caller env */
        _cleanup_json_ json_object *env = NULL;
        if (t->caller_env) {
                if (!(env = json_object_new_object())) return -ENOMEM;
                char *const *file = env_file_vars(t->m);
                json_object_object_foreach(t->caller_env, key, val) {
                        const char *fv = strv_env_get(file, key);
                        if (fv && json_object_is_type(val, json_type_string) && streq(fv, json_object_get_string(val)))
                                continue;
                        if (json_add(env, key, json_object_get(val)) < 0) return -ENOMEM;
                }
        }
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object *launch = launch_options_to_json(&t->launch, t->kind == TASK_KIND_SUMMARY);
        if (!o || !launch || json_add(o, PK_launch, launch) < 0 || json_add(o, PK_env, json_object_get(env)) < 0)
                return -ENOMEM;
        size_t len = 0;
        const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
        if (!s) return -ENOMEM;
        return write_file_atomic(path, s, len, 0600);
}

int launch_request_load(Task *t) {
        _cleanup_free_ char *path = launch_request_path(t);
        if (!path) return -ENOMEM;
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = read_file(path, (size_t) 64 << 20, &data, &len);
        if (r < 0) return r;
        _cleanup_json_ json_object *o = NULL;
        if (json_parse_strict(data, len, &o) < 0 || !json_is_object(o)) return -EBADMSG;
        json_object *lp = json_get_object(o, PK_launch), *env = NULL;
        if (!lp || !json_object_object_get_ex(o, PK_env, &env) || (env && !json_is_object(env))) return -EBADMSG;
        LaunchOptions lo;
        r = launch_options_from_json(lp, &lo);
        if (r < 0) return r;
        launch_options_done(&t->launch);
        t->launch = lo;
        json_object_put(t->caller_env);
        t->caller_env = env ? json_object_get(env) : NULL;
        return 0;
}

bool launch_request_exists(Task *t) {
        _cleanup_free_ char *path = launch_request_path(t);
        struct stat st;
        /* unknown (no memory, an I/O error) counts as there: the caller then
         * looks closer instead of assuming the launch went ahead */
        if (!path) return true;
        return lstat(path, &st) == 0 || errno != ENOENT;
}

void launch_request_drop(Task *t) {
        launch_options_done(&t->launch);
        json_object_put(t->caller_env);
        t->caller_env = NULL;
        _cleanup_free_ char *path = launch_request_path(t);
        if (path && unlink(path) < 0 && errno != ENOENT) log_warning_errno(-errno, "cannot remove %s", path);
}
