#include "launch-spec.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "disk-budget.h"
#include "fileio.h"
#include "id-util.h"
#include "json-util.h"
#include "macro.h"
#include "net-policy.h"
#include "string-util.h"
#include "strv.h"
#include "task-limits.h"
#include "time-util.h"

#define LAUNCH_SPEC_MAX_BYTES ((size_t) 256 << 20)
#define STATUS_FILE_MAX_BYTES ((size_t) 1 << 20)

/* ---- serialization ---- */

static json_object *strv_to_json(char *const *l) {
        json_object *a = json_object_new_array();
        if (!a) return NULL;
        for (size_t i = 0; l && l[i]; i++) {
                json_object *s = json_object_new_string(l[i]);
                if (!s || json_object_array_add(a, s) < 0) {
                        json_object_put(s);
                        json_object_put(a);
                        return NULL;
                }
        }
        return a;
}

/* Add a string (or null) and fail on allocation failure. */
static int add_str(json_object *o, const char *key, const char *s) {
        json_object *v = NULL;
        if (s && !(v = json_object_new_string(s))) return -ENOMEM;
        return json_add(o, key, v);
}

static int add_obj(json_object *o, const char *key, json_object *v) {
        if (!v) return -ENOMEM;
        return json_add(o, key, v);
}

bool sandbox_mount_op_shows_host(sandbox_mount_op op) {
        return op == SANDBOX_MOUNT_RO_BIND || op == SANDBOX_MOUNT_RO_BIND_TRY || op == SANDBOX_MOUNT_BIND ||
               op == SANDBOX_MOUNT_OVERLAY || op == SANDBOX_MOUNT_TARGET;
}

static const char *const mount_op_table[_SANDBOX_MOUNT_OP_MAX] = {
        [SANDBOX_MOUNT_RO_BIND] = "ro-bind", [SANDBOX_MOUNT_BIND] = "bind",
        [SANDBOX_MOUNT_TMPFS] = "tmpfs",     [SANDBOX_MOUNT_DIR] = "dir",
        [SANDBOX_MOUNT_SYMLINK] = "symlink", [SANDBOX_MOUNT_MASK_FILE] = "mask-file",
        [SANDBOX_MOUNT_OVERLAY] = "overlay", [SANDBOX_MOUNT_TARGET] = "target",
        [SANDBOX_MOUNT_RO_BIND_TRY] = "ro-bind-try",
};

const char *sandbox_mount_op_to_string(sandbox_mount_op op) {
        return op >= 0 && op < _SANDBOX_MOUNT_OP_MAX ? mount_op_table[op] : NULL;
}

sandbox_mount_op sandbox_mount_op_from_string(const char *s) {
        for (int i = 0; s && i < _SANDBOX_MOUNT_OP_MAX; i++)
                if (streq(s, mount_op_table[i])) return (sandbox_mount_op) i;
        return _SANDBOX_MOUNT_OP_INVALID;
}

void sandbox_mounts_free(sandbox_mount *m, size_t n) {
        for (size_t i = 0; m && i < n; i++) {
                free(m[i].src);
                free(m[i].dest);
                free(m[i].upper);
                free(m[i].work);
                free(m[i].stage);
        }
        free(m);
}

static int strdup_null(const char *s, char **ret) {
        *ret = NULL;
        if (!s) return 0;
        return (*ret = strdup(s)) ? 0 : -ENOMEM;
}

int sandbox_mounts_push(sandbox_mount **m, size_t *n, sandbox_mount_op op, const char *src, const char *dest,
                        const char *upper, const char *work, const char *stage) {
        sandbox_mount *nm = realloc(*m, (*n + 1) * sizeof **m);
        if (!nm) return -ENOMEM;
        *m = nm;
        sandbox_mount e = {.op = op};
        if (strdup_null(src, &e.src) < 0 || strdup_null(dest, &e.dest) < 0 || strdup_null(upper, &e.upper) < 0 ||
            strdup_null(work, &e.work) < 0 || strdup_null(stage, &e.stage) < 0) {
                free(e.src), free(e.dest), free(e.upper), free(e.work), free(e.stage);
                return -ENOMEM;
        }
        nm[(*n)++] = e;
        return 0;
}

/* o[key] = [{"src", "dest"}, ...] of the n seeds. */
static int seeds_to_json(json_object *o, const char *key, const sandbox_seed *seeds, size_t n) {
        _cleanup_json_ json_object *a = json_object_new_array();
        if (!a) return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_new_object();
                if (!e || json_object_array_add(a, e) < 0) {
                        json_object_put(e);
                        return -ENOMEM;
                }
                int r;
                if ((r = add_str(e, "src", seeds[i].src)) < 0 || (r = add_str(e, "dest", seeds[i].dest)) < 0) return r;
        }
        return json_add(o, key, TAKE_PTR(a));
}

static int sandbox_to_json(const launch_sandbox *sb, json_object **ret) {
        _cleanup_json_ json_object *o = json_object_new_object();
        int r;
        if (!o) return -ENOMEM;
        if ((r = add_obj(o, "uid", json_object_new_int64(sb->uid))) < 0) return r;
        if ((r = add_obj(o, "gid", json_object_new_int64(sb->gid))) < 0) return r;
        _cleanup_json_ json_object *mounts = json_object_new_array();
        if (!mounts) return -ENOMEM;
        for (size_t i = 0; i < sb->n_mounts; i++) {
                const sandbox_mount *e = &sb->mounts[i];
                json_object *m = json_object_new_object();
                if (!m || json_object_array_add(mounts, m) < 0) {
                        json_object_put(m);
                        return -ENOMEM;
                }
                if ((r = add_str(m, "op", sandbox_mount_op_to_string(e->op))) < 0 ||
                    (r = add_str(m, "src", e->src)) < 0 || (r = add_str(m, "dest", e->dest)) < 0 ||
                    (r = add_str(m, "upper", e->upper)) < 0 || (r = add_str(m, "work", e->work)) < 0 ||
                    (r = add_str(m, "stage", e->stage)) < 0)
                        return r;
        }
        if ((r = json_add(o, "mounts", TAKE_PTR(mounts))) < 0) return r;
        if ((r = add_obj(o, "dirs", strv_to_json(sb->dirs))) < 0) return r;
        if ((r = seeds_to_json(o, "seeds", sb->seeds, sb->n_seeds)) < 0) return r;
        /* optional: only a launch seeded from a parent task's result has them */
        if (sb->n_upper_seeds > 0 && (r = seeds_to_json(o, "upperSeeds", sb->upper_seeds, sb->n_upper_seeds)) < 0)
                return r;
        if (sb->overlay) {
                _cleanup_json_ json_object *ov = json_object_new_object();
                if (!ov) return -ENOMEM;
                if ((r = add_str(ov, "lower", sb->overlay->lower)) < 0) return r;
                if ((r = add_str(ov, "upper", sb->overlay->upper)) < 0) return r;
                if ((r = add_str(ov, "work", sb->overlay->work)) < 0) return r;
                if (sb->overlay->lower_top && (r = add_str(ov, "lowerTop", sb->overlay->lower_top)) < 0) return r;
                if ((r = json_add(o, "overlay", TAKE_PTR(ov))) < 0) return r;
        } else if ((r = json_add_null(o, "overlay")) < 0)
                return r;
        if ((r = add_obj(o, "shareNet", json_object_new_boolean(sb->net.mode == NET_MODE_HOST))) < 0) return r;
        json_object *net = NULL;
        if ((r = net_policy_to_json(&sb->net, &net)) < 0) return r;
        if ((r = json_add(o, "network", net)) < 0) return r;
        if (sb->tmp_size && (r = add_obj(o, "tmpSize", json_object_new_int64((int64_t) sb->tmp_size))) < 0) return r;
        if (sb->have_host_masks) {
                _cleanup_json_ json_object *hm = json_object_new_array();
                if (!hm) return -ENOMEM;
                for (size_t i = 0; i < sb->host_masks.n; i++) {
                        json_object *e = json_object_new_object();
                        if (!e || json_object_array_add(hm, e) < 0) {
                                json_object_put(e);
                                return -ENOMEM;
                        }
                        if ((r = add_str(e, "path", sb->host_masks.items[i].path)) < 0 ||
                            (r = add_str(e, "kind", host_mask_kind_to_string(sb->host_masks.items[i].kind))) < 0)
                                return r;
                }
                if ((r = json_add(o, "hostMasks", TAKE_PTR(hm))) < 0) return r;
        }
        *ret = TAKE_PTR(o);
        return 0;
}

int launch_spec_to_json(const launch_spec *s, json_object **ret) {
        _cleanup_json_ json_object *o = json_object_new_object();
        int r;
        if (!o) return -ENOMEM;
        if ((r = add_str(o, "taskId", s->task_id)) < 0) return r;
        if ((r = add_str(o, "executor", s->executor)) < 0) return r;
        if ((r = add_str(o, "model", s->model)) < 0) return r;
        if ((r = add_str(o, "variant", s->variant)) < 0) return r;
        if ((r = add_str(o, "sessionId", s->session_id)) < 0) return r;
        if ((r = add_str(o, "prompt", s->prompt)) < 0) return r;
        if ((r = add_str(o, "directory", s->directory)) < 0) return r;
        if ((r = add_obj(o, "env", strv_to_json(s->env))) < 0) return r;
        if ((r = add_str(o, "logPath", s->log_path)) < 0) return r;
        if ((r = add_str(o, "taskDir", s->task_dir)) < 0) return r;
        if ((r = add_str(o, "promptFile", s->prompt_file)) < 0) return r;
        if (s->sandbox) {
                json_object *sb = NULL;
                if ((r = sandbox_to_json(s->sandbox, &sb)) < 0) return r;
                if ((r = json_add(o, "sandbox", sb)) < 0) return r;
        } else if ((r = json_add_null(o, "sandbox")) < 0)
                return r;
        if (s->disk) {
                _cleanup_json_ json_object *d = json_object_new_object();
                if (!d) return -ENOMEM;
                if ((r = add_obj(d, "maxBytes", json_object_new_int64((int64_t) s->disk->max_bytes))) < 0) return r;
                if ((r = add_obj(d, "graceMs", json_object_new_int64((int64_t) s->disk->grace_ms))) < 0) return r;
                if ((r = add_obj(d, "paths", strv_to_json(s->disk->paths))) < 0) return r;
                if ((r = json_add(o, "disk", TAKE_PTR(d))) < 0) return r;
        } else if ((r = json_add_null(o, "disk")) < 0)
                return r;
        if (s->attachment && (r = add_str(o, "attachment", s->attachment)) < 0) return r;
        if (s->check) {
                if ((r = json_add(o, "check", json_object_new_boolean(true))) < 0) return r;
                if ((r = add_obj(o, "logMaxBytes", json_object_new_int64((int64_t) s->log_max_bytes))) < 0) return r;
        }
        if (s->log_budget && (r = add_obj(o, "logBudget", json_object_new_int64((int64_t) s->log_budget))) < 0) return r;
        if (s->limits) {
                _cleanup_json_ json_object *l = json_object_new_object();
                if (!l) return -ENOMEM;
                if ((r = add_obj(l, "memoryMax", json_object_new_int64((int64_t) s->limits->memory_max))) < 0) return r;
                if ((r = add_obj(l, "tasksMax", json_object_new_int64((int64_t) s->limits->tasks_max))) < 0) return r;
                if ((r = json_add(o, "limits", TAKE_PTR(l))) < 0) return r;
        }
        *ret = TAKE_PTR(o);
        return 0;
}

/* ---- strict parsing ---- */

/* Refuse any key of o that is not in allowed[]; require the first n_required
 * keys of allowed[] (the rest are optional: fields added later, so a document
 * from an older writer still parses). */
static int check_keys_opt(json_object *o, const char *const *allowed, size_t n, size_t n_required) {
        if (!json_is_object(o)) return -EBADMSG;
        json_object_object_foreach(o, key, val) {
                (void) val;
                bool known = false;
                for (size_t i = 0; i < n && !known; i++) known = streq(key, allowed[i]);
                if (!known) return -EBADMSG;
        }
        for (size_t i = 0; i < n_required; i++)
                if (!json_object_object_get_ex(o, allowed[i], NULL)) return -EBADMSG;
        return 0;
}

static int check_keys(json_object *o, const char *const *allowed, size_t n) {
        return check_keys_opt(o, allowed, n, n);
}

static bool str_ok(json_object *v) {
        return json_object_is_type(v, json_type_string) &&
               strlen(json_object_get_string(v)) == (size_t) json_object_get_string_len(v);
}

/* key must hold a string (nullable: or null). *ret = copy or NULL. */
static int get_str(json_object *o, const char *key, bool nullable, bool absolute, char **ret) {
        json_object *v = NULL;
        (void) json_object_object_get_ex(o, key, &v);
        if (!v) {
                if (!nullable) return -EBADMSG;
                *ret = NULL;
                return 0;
        }
        if (!str_ok(v)) return -EBADMSG;
        const char *s = json_object_get_string(v);
        if (absolute && s[0] != '/') return -EBADMSG;
        char *c = strdup(s);
        if (!c) return -ENOMEM;
        free(*ret);
        *ret = c;
        return 0;
}

static int get_strv(json_object *o, const char *key, bool absolute, bool env, char ***ret) {
        json_object *a = NULL;
        (void) json_object_object_get_ex(o, key, &a);
        if (!a || !json_object_is_type(a, json_type_array)) return -EBADMSG;
        _cleanup_strv_free_ char **l = calloc(1, sizeof(char *));
        if (!l) return -ENOMEM;
        size_t n = json_object_array_length(a);
        for (size_t i = 0; i < n; i++) {
                json_object *v = json_object_array_get_idx(a, i);
                if (!v || !str_ok(v)) return -EBADMSG;
                const char *s = json_object_get_string(v);
                if (absolute && s[0] != '/') return -EBADMSG;
                if (env) {
                        const char *eq = strchr(s, '=');
                        if (!eq || eq == s) return -EBADMSG;
                }
                int r = strv_push(&l, s);
                if (r < 0) return r;
        }
        strv_free(*ret);
        *ret = TAKE_PTR(l);
        return 0;
}

static int get_id(json_object *o, const char *key, uint32_t *ret) {
        json_object *v = NULL;
        (void) json_object_object_get_ex(o, key, &v);
        if (!v || !json_object_is_type(v, json_type_int)) return -EBADMSG;
        int64_t x = json_object_get_int64(v);
        if (x < 0 || x >= (int64_t) UINT32_MAX) return -EBADMSG;
        *ret = (uint32_t) x;
        return 0;
}

static void launch_overlay_free(launch_overlay *o) {
        if (!o) return;
        free(o->lower);
        free(o->upper);
        free(o->work);
        free(o->lower_top);
        free(o);
}

static void seeds_free(sandbox_seed *seeds, size_t n) {
        for (size_t i = 0; seeds && i < n; i++) {
                free(seeds[i].src);
                free(seeds[i].dest);
        }
        free(seeds);
}

static void launch_sandbox_free(launch_sandbox *sb) {
        if (!sb) return;
        sandbox_mounts_free(sb->mounts, sb->n_mounts);
        strv_free(sb->dirs);
        seeds_free(sb->seeds, sb->n_seeds);
        seeds_free(sb->upper_seeds, sb->n_upper_seeds);
        launch_overlay_free(sb->overlay);
        net_policy_done(&sb->net);
        host_mask_list_done(&sb->host_masks);
        free(sb);
}

void launch_spec_free(launch_spec *s) {
        if (!s) return;
        free(s->task_id);
        free(s->executor);
        free(s->model);
        free(s->variant);
        free(s->session_id);
        free(s->prompt);
        free(s->directory);
        strv_free(s->env);
        free(s->log_path);
        free(s->task_dir);
        free(s->prompt_file);
        free(s->attachment);
        launch_sandbox_free(s->sandbox);
        free(s->limits);
        if (s->disk) {
                strv_free(s->disk->paths);
                free(s->disk);
        }
        free(s);
}

static inline void launch_spec_freep(launch_spec **s) { launch_spec_free(*s); }
static inline void launch_sandbox_freep(launch_sandbox **s) { launch_sandbox_free(*s); }
static inline void launch_overlay_freep(launch_overlay **o) { launch_overlay_free(*o); }

/* One mount: every key present; which ones may be null depends on op. */
static int mount_from_json(json_object *j, launch_sandbox *sb) {
        static const char *const keys[] = {"op", "src", "dest", "upper", "work", "stage"};
        int r = check_keys(j, keys, ELEMENTSOF(keys));
        if (r < 0) return r;
        _cleanup_free_ char *op = NULL, *src = NULL, *dest = NULL, *upper = NULL, *work = NULL, *stage = NULL;
        if ((r = get_str(j, "op", false, false, &op)) < 0) return r;
        sandbox_mount_op o = sandbox_mount_op_from_string(op);
        if (o < 0) return -EBADMSG;
        bool overlay = o == SANDBOX_MOUNT_OVERLAY;
        bool has_src = o == SANDBOX_MOUNT_RO_BIND || o == SANDBOX_MOUNT_RO_BIND_TRY || o == SANDBOX_MOUNT_BIND ||
                       o == SANDBOX_MOUNT_SYMLINK || overlay;
        /* a symlink's target may be relative ("usr/bin"); every other path is absolute */
        if ((r = get_str(j, "src", !has_src, o != SANDBOX_MOUNT_SYMLINK, &src)) < 0) return r;
        if (!has_src && src) return -EBADMSG;
        if ((r = get_str(j, "dest", false, true, &dest)) < 0) return r;
        if ((r = get_str(j, "upper", !overlay, true, &upper)) < 0) return r;
        if ((r = get_str(j, "work", !overlay, true, &work)) < 0) return r;
        if ((r = get_str(j, "stage", !overlay, true, &stage)) < 0) return r;
        if (!overlay && (upper || work || stage)) return -EBADMSG;
        return sandbox_mounts_push(&sb->mounts, &sb->n_mounts, o, src, dest, upper, work, stage);
}

static int get_u64(json_object *o, const char *key, uint64_t min, uint64_t max, uint64_t *ret) {
        json_object *v = NULL;
        (void) json_object_object_get_ex(o, key, &v);
        if (!v || !json_object_is_type(v, json_type_int)) return -EBADMSG;
        int64_t x = json_object_get_int64(v);
        if (x < 0 || (uint64_t) x < min || (uint64_t) x > max) return -EBADMSG;
        *ret = (uint64_t) x;
        return 0;
}

static int disk_from_json(json_object *j, launch_disk **ret) {
        static const char *const keys[] = {"maxBytes", "graceMs", "paths"};
        int r = check_keys(j, keys, ELEMENTSOF(keys));
        if (r < 0) return r;
        launch_disk *d = calloc(1, sizeof *d);
        if (!d) return -ENOMEM;
        if ((r = get_u64(j, "maxBytes", 1, (uint64_t) 9007199254740991ULL, &d->max_bytes)) < 0 ||
            (r = get_u64(j, "graceMs", 0, (uint64_t) 9007199254740991ULL, &d->grace_ms)) < 0 ||
            (r = get_strv(j, "paths", true, false, &d->paths)) < 0) {
                strv_free(d->paths);
                free(d);
                return r;
        }
        *ret = d;
        return 0;
}

/* [{"src": "/abs", "dest": "/abs"}, ...] (a NULL a: not an array) into *seeds, *n. */
static int seeds_from_json(json_object *a, sandbox_seed **seeds, size_t *n) {
        if (!a) return -EBADMSG;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i);
                static const char *const skeys[] = {"src", "dest"};
                int r = check_keys(e, skeys, ELEMENTSOF(skeys));
                if (r < 0) return r;
                sandbox_seed *ns = realloc(*seeds, (*n + 1) * sizeof *ns);
                if (!ns) return -ENOMEM;
                *seeds = ns;
                ns[*n] = (sandbox_seed){0};
                (*n)++;
                if ((r = get_str(e, "src", false, true, &ns[*n - 1].src)) < 0) return r;
                if ((r = get_str(e, "dest", false, true, &ns[*n - 1].dest)) < 0) return r;
        }
        return 0;
}

/* An optional integer key in [min, max]: absent leaves *ret 0. */
static int get_size_opt(json_object *o, const char *key, uint64_t min, uint64_t max, uint64_t *ret) {
        json_object *v = NULL;
        *ret = 0;
        if (!json_object_object_get_ex(o, key, &v)) return 0;
        if (!json_object_is_type(v, json_type_int)) return -EBADMSG;
        int64_t x = json_object_get_int64(v);
        if (x < 0 || (uint64_t) x < min || (uint64_t) x > max) return -EBADMSG;
        *ret = (uint64_t) x;
        return 0;
}

/* "hostMasks": absolute paths, each once, each of a known kind */
static int host_masks_from_json(json_object *j, launch_sandbox *sb) {
        json_object *a = json_get_array(j, "hostMasks");
        if (!a) return -EBADMSG;
        sb->have_host_masks = true;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i);
                static const char *const keys[] = {"path", "kind"};
                int r = check_keys(e, keys, ELEMENTSOF(keys));
                if (r < 0) return r;
                _cleanup_free_ char *path = NULL, *kind = NULL;
                if ((r = get_str(e, "path", false, true, &path)) < 0 || (r = get_str(e, "kind", false, false, &kind)) < 0)
                        return r;
                HostMaskKind k = host_mask_kind_from_string(kind);
                if (k < 0) return -EBADMSG;
                size_t n0 = sb->host_masks.n;
                if ((r = host_mask_list_set(&sb->host_masks, path, k)) < 0) return r;
                if (sb->host_masks.n == n0) return -EBADMSG; /* twice */
        }
        return 0;
}

static int sandbox_from_json(json_object *j, launch_sandbox **ret) {
        static const char *const keys[] = {"uid",      "gid",        "mounts",  "dirs",     "seeds",
                                           "overlay",  "shareNet",   "upperSeeds", "network", "hostMasks", "tmpSize"};
        /* "upperSeeds", "network", "hostMasks" and "tmpSize" are optional */
        int r = check_keys_opt(j, keys, ELEMENTSOF(keys), ELEMENTSOF(keys) - 4);
        if (r < 0) return r;
        _cleanup_(launch_sandbox_freep) launch_sandbox *sb = calloc(1, sizeof *sb);
        if (!sb) return -ENOMEM;
        uint32_t id;
        if ((r = get_id(j, "uid", &id)) < 0) return r;
        sb->uid = (uid_t) id;
        if ((r = get_id(j, "gid", &id)) < 0) return r;
        sb->gid = (gid_t) id;
        json_object *a = json_get_array(j, "mounts");
        if (!a) return -EBADMSG;
        for (size_t i = 0; i < json_object_array_length(a); i++)
                if ((r = mount_from_json(json_object_array_get_idx(a, i), sb)) < 0) return r;
        if ((r = get_strv(j, "dirs", true, false, &sb->dirs)) < 0) return r;
        if ((r = seeds_from_json(json_get_array(j, "seeds"), &sb->seeds, &sb->n_seeds)) < 0) return r;
        if (json_object_object_get_ex(j, "upperSeeds", NULL) &&
            (r = seeds_from_json(json_get_array(j, "upperSeeds"), &sb->upper_seeds, &sb->n_upper_seeds)) < 0)
                return r;
        json_object *ov = NULL;
        (void) json_object_object_get_ex(j, "overlay", &ov);
        if (ov) {
                /* "lowerTop" is optional: only a check's overlay has one */
                static const char *const okeys[] = {"lower", "upper", "work", "lowerTop"};
                if ((r = check_keys_opt(ov, okeys, ELEMENTSOF(okeys), 3)) < 0) return r;
                _cleanup_(launch_overlay_freep) launch_overlay *o = calloc(1, sizeof *o);
                if (!o) return -ENOMEM;
                if ((r = get_str(ov, "lower", false, true, &o->lower)) < 0) return r;
                if ((r = get_str(ov, "upper", false, true, &o->upper)) < 0) return r;
                if ((r = get_str(ov, "work", false, true, &o->work)) < 0) return r;
                if ((r = get_str(ov, "lowerTop", true, true, &o->lower_top)) < 0) return r;
                sb->overlay = TAKE_PTR(o);
        }
        json_object *sn = NULL;
        (void) json_object_object_get_ex(j, "shareNet", &sn);
        if (!sn || !json_object_is_type(sn, json_type_boolean)) return -EBADMSG;
        sb->share_net = json_object_get_boolean(sn);
        json_object *net = NULL;
        if (json_object_object_get_ex(j, "network", &net)) {
                if ((r = net_policy_from_json(net, &sb->net)) < 0) return r == -ENOMEM ? r : -EBADMSG;
                if ((sb->net.mode == NET_MODE_HOST) != sb->share_net) return -EBADMSG;
        } else
                sb->net.mode = sb->share_net ? NET_MODE_HOST : NET_MODE_NONE;
        if ((r = get_size_opt(j, "tmpSize", 1, DISK_SIZE_MAX, &sb->tmp_size)) < 0) return r;
        if (json_object_object_get_ex(j, "hostMasks", NULL) && (r = host_masks_from_json(j, sb)) < 0) return r;
        *ret = TAKE_PTR(sb);
        return 0;
}

int launch_spec_from_json(json_object *j, launch_spec **ret) {
        static const char *const keys[] = {"taskId", "executor", "model",   "variant",    "sessionId", "prompt",
                                           "directory", "env",   "logPath", "taskDir", "promptFile", "sandbox",
                                           "disk", "attachment", "check", "logMaxBytes", "logBudget", "limits"};
        /* "disk" is optional: a spec from an older daemon has none; "attachment" only a summary has;
         * "check" and "logMaxBytes" only a check gate's; "logBudget" and "limits" an older daemon's
         * spec has not */
        int r = check_keys_opt(j, keys, ELEMENTSOF(keys), ELEMENTSOF(keys) - 6);
        if (r < 0) return r;
        _cleanup_(launch_spec_freep) launch_spec *s = calloc(1, sizeof *s);
        if (!s) return -ENOMEM;
        if ((r = get_str(j, "taskId", false, false, &s->task_id)) < 0) return r;
        if (!task_id_is_valid(s->task_id)) return -EBADMSG;
        if ((r = get_str(j, "executor", false, false, &s->executor)) < 0) return r;
        if (isempty(s->executor)) return -EBADMSG;
        if ((r = get_str(j, "model", true, false, &s->model)) < 0) return r;
        if ((r = get_str(j, "variant", true, false, &s->variant)) < 0) return r;
        if ((r = get_str(j, "sessionId", true, false, &s->session_id)) < 0) return r;
        if ((r = get_str(j, "prompt", false, false, &s->prompt)) < 0) return r;
        if ((r = get_str(j, "directory", false, true, &s->directory)) < 0) return r;
        if ((r = get_strv(j, "env", false, true, &s->env)) < 0) return r;
        if ((r = get_str(j, "logPath", false, true, &s->log_path)) < 0) return r;
        if ((r = get_str(j, "taskDir", false, true, &s->task_dir)) < 0) return r;
        if ((r = get_str(j, "promptFile", true, true, &s->prompt_file)) < 0) return r;
        json_object *sb = NULL;
        (void) json_object_object_get_ex(j, "sandbox", &sb);
        if (sb && (r = sandbox_from_json(sb, &s->sandbox)) < 0) return r;
        json_object *dk = NULL;
        (void) json_object_object_get_ex(j, "disk", &dk);
        if (dk && (r = disk_from_json(dk, &s->disk)) < 0) return r;
        if ((r = get_str(j, "attachment", true, true, &s->attachment)) < 0) return r;
        json_object *ck = NULL, *lm = NULL;
        (void) json_object_object_get_ex(j, "check", &ck);
        (void) json_object_object_get_ex(j, "logMaxBytes", &lm);
        if (!ck != !lm) return -EBADMSG;
        if (ck) {
                if (!json_object_is_type(ck, json_type_boolean) || !json_object_get_boolean(ck) ||
                    !json_object_is_type(lm, json_type_int))
                        return -EBADMSG;
                int64_t v = json_object_get_int64(lm);
                if (v < 4096 || v > ((int64_t) 1 << 30)) return -EBADMSG;
                s->check = true;
                s->log_max_bytes = (uint64_t) v;
        }
        if ((r = get_size_opt(j, "logBudget", LAUNCH_LOG_BUDGET_MIN, DISK_SIZE_MAX, &s->log_budget)) < 0) return r;
        json_object *lim = NULL;
        if (json_object_object_get_ex(j, "limits", &lim)) {
                static const char *const lkeys[] = {"memoryMax", "tasksMax"};
                if ((r = check_keys(lim, lkeys, ELEMENTSOF(lkeys))) < 0) return r;
                if (!(s->limits = calloc(1, sizeof *s->limits))) return -ENOMEM;
                if ((r = get_size_opt(lim, "memoryMax", 0, DISK_SIZE_MAX, &s->limits->memory_max)) < 0) return r;
                if ((r = get_size_opt(lim, "tasksMax", 0, DISK_SIZE_MAX, &s->limits->tasks_max)) < 0) return r;
        }
        *ret = TAKE_PTR(s);
        return 0;
}

/* ---- memfd transport ---- */

int launch_spec_to_memfd(const launch_spec *s) {
        _cleanup_json_ json_object *j = NULL;
        int r = launch_spec_to_json(s, &j);
        if (r < 0) return r;
        size_t len;
        const char *text = json_to_line(j, &len);
        if (!text) return -ENOMEM;
        _cleanup_close_ int fd = memfd_create(LAUNCH_SPEC_MEMFD_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0) return -errno;
        if ((r = loop_write(fd, text, len)) < 0) return r;
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) return -errno;
        if (lseek(fd, 0, SEEK_SET) < 0) return -errno;
        return TAKE_FD(fd);
}

int launch_spec_read_fd(int fd, launch_spec **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        /* a memfd is read from its start; a pipe cannot seek and needs not */
        if (lseek(fd, 0, SEEK_SET) < 0 && errno != ESPIPE) return -errno;
        int r = read_fd(fd, LAUNCH_SPEC_MAX_BYTES, &buf, &len);
        if (r < 0) return r;
        _cleanup_json_ json_object *j = NULL;
        if ((r = json_parse_strict(buf, len, &j)) < 0) return r;
        return launch_spec_from_json(j, ret);
}

/* ---- launch.json / exit.json ---- */

static int add_iso(json_object *o, const char *key, uint64_t ms) {
        char buf[32];
        return add_str(o, key, format_iso(ms, buf));
}

int launch_info_to_json(const launch_info *i, json_object **ret) {
        _cleanup_json_ json_object *o = json_object_new_object();
        int r;
        if (!o) return -ENOMEM;
        if ((r = add_obj(o, "shimPid", json_object_new_int64(i->shim_pid))) < 0) return r;
        if ((r = add_obj(o, "workerPid", json_object_new_int64(i->worker_pid))) < 0) return r;
        if ((r = add_str(o, "preDispatchHead", i->pre_dispatch_head)) < 0) return r;
        if ((r = add_str(o, "overlayMethod", i->overlay_method)) < 0) return r;
        if ((r = add_iso(o, "startedAt", i->started_at_ms)) < 0) return r;
        *ret = TAKE_PTR(o);
        return 0;
}

static int get_pid(json_object *o, const char *key, pid_t *ret) {
        json_object *v = NULL;
        (void) json_object_object_get_ex(o, key, &v);
        if (!v || !json_object_is_type(v, json_type_int)) return -EBADMSG;
        int64_t x = json_object_get_int64(v);
        if (x <= 0 || x > INT32_MAX) return -EBADMSG;
        *ret = (pid_t) x;
        return 0;
}

static int get_iso(json_object *o, const char *key, uint64_t *ret) {
        _cleanup_free_ char *s = NULL;
        int r = get_str(o, key, false, false, &s);
        if (r < 0) return r;
        return parse_iso(s, ret) < 0 ? -EBADMSG : 0;
}

void launch_info_done(launch_info *i) {
        free(i->pre_dispatch_head);
        free(i->overlay_method);
        i->pre_dispatch_head = i->overlay_method = NULL;
}

int launch_info_from_json(json_object *j, launch_info *ret) {
        static const char *const keys[] = {"shimPid", "workerPid", "preDispatchHead", "overlayMethod", "startedAt"};
        launch_info i = {0};
        int r = check_keys(j, keys, ELEMENTSOF(keys));
        if (r >= 0) r = get_pid(j, "shimPid", &i.shim_pid);
        if (r >= 0) r = get_pid(j, "workerPid", &i.worker_pid);
        if (r >= 0) r = get_str(j, "preDispatchHead", true, false, &i.pre_dispatch_head);
        if (r >= 0) r = get_str(j, "overlayMethod", true, false, &i.overlay_method);
        if (r >= 0 && i.overlay_method && !streq(i.overlay_method, "bwrap") && !streq(i.overlay_method, "userns"))
                r = -EBADMSG;
        if (r >= 0) r = get_iso(j, "startedAt", &i.started_at_ms);
        if (r < 0) {
                launch_info_done(&i);
                return r;
        }
        *ret = i;
        return 0;
}

int exit_info_to_json(const exit_info *i, json_object **ret) {
        _cleanup_json_ json_object *o = json_object_new_object();
        int r;
        if (!o) return -ENOMEM;
        if (i->has_exit_code) r = add_obj(o, "exitCode", json_object_new_int64(i->exit_code));
        else r = json_add_null(o, "exitCode");
        if (r < 0) return r;
        if ((r = add_str(o, "signal", i->signal)) < 0) return r;
        if ((r = add_str(o, "spawnError", i->spawn_error)) < 0) return r;
        if ((r = add_iso(o, "endedAt", i->ended_at_ms)) < 0) return r;
        if (i->stop_reason) {
                if ((r = add_str(o, "stopReason", i->stop_reason)) < 0) return r;
                if ((r = add_str(o, "stopDetail", i->stop_detail)) < 0) return r;
        }
        if (i->oom_kills > 0 && (r = add_obj(o, "oomKills", json_object_new_int64(i->oom_kills))) < 0) return r;
        *ret = TAKE_PTR(o);
        return 0;
}

void exit_info_done(exit_info *i) {
        free(i->signal);
        free(i->spawn_error);
        free(i->stop_reason);
        free(i->stop_detail);
        i->signal = i->spawn_error = i->stop_reason = i->stop_detail = NULL;
}

int exit_info_from_json(json_object *j, exit_info *ret) {
        static const char *const keys[] = {"exitCode", "signal", "spawnError", "endedAt", "stopReason", "stopDetail",
                                           "oomKills"};
        exit_info i = {0};
        /* stopReason/stopDetail are optional (absent in an older shim's exit.json) */
        int r = check_keys_opt(j, keys, ELEMENTSOF(keys), 4);
        if (r >= 0) {
                json_object *v = NULL;
                (void) json_object_object_get_ex(j, "exitCode", &v);
                if (v) {
                        if (!json_object_is_type(v, json_type_int)) r = -EBADMSG;
                        else {
                                int64_t x = json_object_get_int64(v);
                                if (x < 0 || x > 255) r = -EBADMSG;
                                i.has_exit_code = true;
                                i.exit_code = (int) x;
                        }
                }
        }
        if (r >= 0) r = get_str(j, "signal", true, false, &i.signal);
        if (r >= 0) r = get_str(j, "spawnError", true, false, &i.spawn_error);
        if (r >= 0) r = get_iso(j, "endedAt", &i.ended_at_ms);
        if (r >= 0) r = get_str(j, "stopReason", true, false, &i.stop_reason);
        if (r >= 0) r = get_str(j, "stopDetail", true, false, &i.stop_detail);
        if (r >= 0 && i.stop_reason && !streq(i.stop_reason, "disk_quota_exceeded") &&
            !streq(i.stop_reason, TASK_LIMITS_MEMORY_REASON) && !streq(i.stop_reason, TASK_LIMITS_TASKS_REASON))
                r = -EBADMSG;
        json_object *ok = NULL;
        if (r >= 0 && json_object_object_get_ex(j, "oomKills", &ok)) {
                if (!json_object_is_type(ok, json_type_int) || json_object_get_int64(ok) < 0) r = -EBADMSG;
                else i.oom_kills = json_object_get_int64(ok);
        }
        if (r < 0) {
                exit_info_done(&i);
                return r;
        }
        *ret = i;
        return 0;
}

static int read_status_file(const char *task_dir, const char *name, json_object **ret) {
        _cleanup_free_ char *path = strdup_printf("%s/%s", task_dir, name);
        if (!path) return -ENOMEM;
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r = read_file(path, STATUS_FILE_MAX_BYTES, &buf, &len);
        if (r < 0) return r;
        return json_parse_strict(buf, len, ret);
}

int launch_info_read(const char *task_dir, launch_info *ret) {
        _cleanup_json_ json_object *j = NULL;
        int r = read_status_file(task_dir, LAUNCH_JSON_NAME, &j);
        if (r < 0) return r;
        return launch_info_from_json(j, ret);
}

int exit_info_read(const char *task_dir, exit_info *ret) {
        _cleanup_json_ json_object *j = NULL;
        int r = read_status_file(task_dir, EXIT_JSON_NAME, &j);
        if (r < 0) return r;
        return exit_info_from_json(j, ret);
}
