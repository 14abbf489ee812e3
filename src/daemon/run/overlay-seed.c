/* Fix-forward from a parent task's pending result (overlay-seed.h). */
#include "run/overlay-seed.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/manager.h"
#include "core/task-table.h"
#include "fs-util.h"
#include "json-util.h"
#include "macro.h"
#include "path-util.h"
#include "protocol-keys.h"
#include "string-util.h"
#include "workspace.h"

/* The parent t names, when its result can seed t (overlay-seed.h), else NULL. */
static Task *seed_parent(Task *t) {
        const char *pid = t->rec.parent_task_id;
        Task *p = pid ? manager_find_task(t->m, pid) : NULL;
        if (!p || p == t) return NULL;
        /* a task a worker dispatched may start only from what that worker
         * may see: its own task's changes or those of the tasks it
         * dispatched (a task id is no key to another task's unreviewed work) */
        const char *by = t->rec.dispatched_by;
        if (by && !streq(p->id, by) && !streq_ptr(p->rec.dispatched_by, by)) return NULL;
        if (!streq_ptr(task_kind_info(p->kind)->role, "dispatch") || task_kind_info(p->kind)->never_lands) return NULL;
        if (p->rec.changeset_status != CHANGESET_PENDING || !task_is_settled(p) || p->busy || p->settling) return NULL;
        json_object *od = p->rec.overlay_dirs;
        const char *upper = od ? json_get_string(od, PK_upperDir) : NULL;
        if (!upper || !is_dir(upper) || !p->rec.directory || !t->rec.directory) return NULL;
        if (!same_workspace(p->rec.directory, t->rec.directory) ||
            !path_is_at_or_below(t->rec.directory, p->rec.directory))
                return NULL;
        return p;
}

/* The parent's upper dir for t's directory: its upper dir, or the part of
 * it under t's directory when that lies below the parent's (a real
 * directory there, reached through no symlink: else the parent changed
 * nothing under it). NULL: none. */
static char *parent_upper_for(const Task *p, const Task *t) {
        const char *upper = json_get_string(p->rec.overlay_dirs, PK_upperDir);
        const char *rel = t->rec.directory + strlen(p->rec.directory);
        while (*rel == '/') rel++;
        _cleanup_free_ char *src = *rel ? strdup_printf("%s/%s", upper, rel) : strdup(upper);
        if (!src) return NULL;
        _cleanup_free_ char *canon = realpath(src, NULL);
        struct stat st;
        if (!canon || !streq(canon, src) || lstat(src, &st) < 0 || !S_ISDIR(st.st_mode)) return NULL;
        return TAKE_PTR(src);
}

int overlay_seed_choose(Task *t, json_object *od) {
        Task *p = seed_parent(t);
        if (!p) return 0;
        int r = json_add_string(od, PK_seededFrom, p->id);
        return r < 0 ? r : 1;
}

/* Append copies of (src, dest) to *seeds. */
static int seed_push(sandbox_seed **seeds, size_t *n, const char *src, const char *dest) {
        sandbox_seed *ns = realloc(*seeds, (*n + 1) * sizeof *ns);
        if (!ns) return -ENOMEM;
        *seeds = ns;
        ns[*n] = (sandbox_seed){.src = strdup(src), .dest = strdup(dest)};
        (*n)++;
        return ns[*n - 1].src && ns[*n - 1].dest ? 0 : -ENOMEM;
}

void overlay_seeds_free(sandbox_seed *seeds, size_t n) {
        for (size_t i = 0; seeds && i < n; i++) {
                free(seeds[i].src);
                free(seeds[i].dest);
        }
        free(seeds);
}

int overlay_seed_spec(Task *t, sandbox_seed **ret, size_t *n) {
        *ret = NULL;
        *n = 0;
        json_object *od = t->rec.overlay_dirs;
        const char *from = od ? json_get_string(od, PK_seededFrom) : NULL;
        Task *p = from ? seed_parent(t) : NULL;
        if (!p || !streq(p->id, from)) return 0;
        sandbox_seed *seeds = NULL;
        size_t k = 0;
        int r = 0;
        _cleanup_free_ char *src = parent_upper_for(p, t);
        const char *dest = json_get_string(od, PK_upperDir);
        if (src && dest) r = seed_push(&seeds, &k, src, dest);
        /* git's common dir outside the target: its upper, by the path it overlays */
        json_object *mine = json_get_array(od, PK_rwBinds), *theirs = json_get_array(p->rec.overlay_dirs, PK_rwBinds);
        for (size_t i = 0; r >= 0 && mine && theirs && i < json_object_array_length(mine); i++) {
                json_object *e = json_object_array_get_idx(mine, i);
                for (size_t j = 0; j < json_object_array_length(theirs); j++) {
                        json_object *f = json_object_array_get_idx(theirs, j);
                        const char *pu = json_get_string(f, PK_upperDir), *mu = json_get_string(e, PK_upperDir);
                        if (!streq_ptr(json_get_string(e, PK_path), json_get_string(f, PK_path)) || !pu || !mu ||
                            !is_dir(pu))
                                continue;
                        r = seed_push(&seeds, &k, pu, mu);
                        break;
                }
        }
        if (r < 0) {
                overlay_seeds_free(seeds, k);
                return r;
        }
        *ret = seeds;
        *n = k;
        return 0;
}
