/* Boot sweeps (sweep.h). */

#include "core/launch-options.h"
#include "process-util.h"
#include "run/sweep.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "id-util.h"
#include "log.h"
#include "macro.h"
#include "path-util.h"
#include "string-util.h"
#include "strv.h"

#define OVERLAY_PREFIX "taskferry-cow-"
#define PROMPT_SUFFIX ".prompt.txt"

typedef struct Sweep {
        const tf_paths *paths;
        const SweepTable *table;
        SweepTask *tasks;   /* n_tasks entries, in table order */
        size_t *by_id;      /* indices into tasks, sorted by id */
        char **mounts;      /* mount points of our mount namespace */
        char **trash;       /* trash dirs to empty */
        int removed;
} Sweep;

static Sweep *sort_ctx;
static int cmp_by_id(const void *a, const void *b) {
        return strcmp(sort_ctx->tasks[*(const size_t *) a].id, sort_ctx->tasks[*(const size_t *) b].id);
}

/* Index of the task with this id, or -1. */
static ssize_t find_task(Sweep *s, const char *id) {
        size_t lo = 0, hi = s->table->n_tasks;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(s->tasks[s->by_id[mid]].id, id);
                if (c == 0) return (ssize_t) s->by_id[mid];
                if (c < 0) lo = mid + 1;
                else hi = mid;
        }
        return -1;
}

static bool task_active(const SweepTask *t) {
        return streq_ptr(t->status, "queued") || streq_ptr(t->status, "running");
}
static bool task_holds_overlay(const SweepTask *t) {
        return task_active(t) || streq_ptr(t->changeset_status, "pending");
}

/* Mount points from /proc/self/mountinfo (field 5, octal escapes undone). */
static int mounts_load(char ***ret) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f) return -errno;
        _cleanup_strv_free_ char **l = NULL;
        char *line = NULL;
        size_t cap = 0;
        while (getline(&line, &cap, f) > 0) {
                char *field = line;
                for (int i = 0; i < 4 && field; i++) {
                        field = strchr(field, ' ');
                        if (field) field++;
                }
                if (!field) continue;
                char *end = strchr(field, ' ');
                if (end) *end = 0;
                char *o = field;
                for (char *p = field; *p; p++) {
                        if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' &&
                            p[3] <= '7') {
                                *o++ = (char) ((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
                                p += 3;
                        } else
                                *o++ = *p;
                }
                *o = 0;
                if (strv_push(&l, field) < 0) {
                        free(line);
                        return -ENOMEM;
                }
        }
        free(line);
        *ret = TAKE_PTR(l);
        return 0;
}

static const char *mount_at_or_below(Sweep *s, const char *path) {
        for (char **m = s->mounts; m && *m; m++)
                if (path_is_at_or_below(*m, path)) return *m;
        return NULL;
}

/* Take root/name out of the way: a symlink or other non-directory is
 * unlinked, a directory is renamed into <root>/.taskferry-trash (emptied
 * later, off the loop). Refused with a warning for an entry that is not
 * ours or has a mount on or below it. 1 removed, 0 skipped, -errno. */
static int take_away(Sweep *s, const char *root, int root_fd, const char *name, const char *what) {
        struct stat st;
        if (fstatat(root_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) return errno == ENOENT ? 0 : -errno;
        _cleanup_free_ char *path = strdup_printf("%s/%s", root, name);
        if (!path) return -ENOMEM;
        if (st.st_uid != geteuid()) {
                log_warning("boot sweep: not removing %s %s: it belongs to uid %u, not to us", what, path,
                            (unsigned) st.st_uid);
                return 0;
        }
        if (!S_ISDIR(st.st_mode)) {
                /* a symlink goes itself; its target is never touched */
                if (unlinkat(root_fd, name, 0) < 0 && errno != ENOENT) return -errno;
                log_info("boot sweep: removed %s %s", what, path);
                return 1;
        }
        const char *mnt = mount_at_or_below(s, path);
        if (mnt) {
                log_warning("boot sweep: not removing %s %s: %s is still mounted (a crashed sandbox?); unmount it "
                            "and restart the daemon",
                            what, path, mnt);
                return 0;
        }
        if (mkdirat(root_fd, SWEEP_TRASH_NAME, 0700) < 0 && errno != EEXIST) return -errno;
        struct stat tst;
        if (fstatat(root_fd, SWEEP_TRASH_NAME, &tst, AT_SYMLINK_NOFOLLOW) < 0) return -errno;
        if (!S_ISDIR(tst.st_mode) || tst.st_uid != geteuid()) {
                log_warning("boot sweep: %s/%s is not a directory of ours; not removing %s", root, SWEEP_TRASH_NAME,
                            path);
                return 0;
        }
        char uuid[37];
        int r = uuid4(uuid);
        if (r < 0) return r;
        _cleanup_free_ char *dest = strdup_printf(SWEEP_TRASH_NAME "/%s-%s", name, uuid);
        if (!dest) return -ENOMEM;
        if (renameat(root_fd, name, root_fd, dest) < 0) {
                r = -errno;
                log_warning_errno(r, "boot sweep: cannot move %s %s to the trash", what, path);
                return 0;
        }
        log_info("boot sweep: removed %s %s", what, path);
        return 1;
}

static int remember_trash(Sweep *s, const char *root) {
        _cleanup_free_ char *t = strdup_printf("%s/%s", root, SWEEP_TRASH_NAME);
        if (!t) return -ENOMEM;
        if (strv_contains(s->trash, t)) return 0;
        return strv_consume(&s->trash, TAKE_PTR(t));
}

typedef int (*entry_fn)(Sweep *s, const char *root, int root_fd, const char *name);

/* Call fn for every entry of root (resolved; missing or unreadable roots are
 * skipped). */
static int sweep_dir(Sweep *s, const char *root_in, entry_fn fn) {
        _cleanup_free_ char *root = realpath(root_in, NULL);
        if (!root) return 0;
        _cleanup_close_ int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return 0;
        int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (dfd < 0) return -errno;
        DIR *d = fdopendir(dfd);
        if (!d) {
                close(dfd);
                return -errno;
        }
        _cleanup_strv_free_ char **names = NULL;
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..") && !streq(de->d_name, SWEEP_TRASH_NAME) &&
                    (r = strv_push(&names, de->d_name)) < 0)
                        break;
        closedir(d);
        if (r < 0) return r;
        for (char **n = names; n && *n; n++) {
                int k = fn(s, root, fd, *n);
                if (k == -ENOMEM) return k;
                if (k < 0) log_warning_errno(k, "boot sweep: cannot remove %s/%s", root, *n);
                if (k > 0) s->removed++;
        }
        return remember_trash(s, root);
}

static int overlay_entry(Sweep *s, const char *root, int root_fd, const char *name) {
        if (!startswith(name, OVERLAY_PREFIX)) return 0;
        ssize_t i = find_task(s, name + strlen(OVERLAY_PREFIX));
        if (i >= 0 && task_holds_overlay(&s->tasks[i]) && s->tasks[i].overlay_root) {
                _cleanup_free_ char *path = strdup_printf("%s/%s", root, name);
                _cleanup_free_ char *owned = realpath(s->tasks[i].overlay_root, NULL);
                if (!path) return -ENOMEM;
                if (owned && streq(owned, path)) return 0;
        }
        return take_away(s, root, root_fd, name, "overlay");
}

static int output_entry(Sweep *s, const char *root, int root_fd, const char *name) {
        if (find_task(s, name) >= 0) return 0;
        return take_away(s, root, root_fd, name, "output dir");
}

static int prompt_entry(Sweep *s, const char *root, int root_fd, const char *name) {
        size_t n = strlen(name), k = strlen(PROMPT_SUFFIX);
        if (n <= k || !streq(name + n - k, PROMPT_SUFFIX)) return 0;
        _cleanup_free_ char *id = strndup(name, n - k);
        if (!id) return -ENOMEM;
        ssize_t i = find_task(s, id);
        if (i >= 0 && task_active(&s->tasks[i])) return 0;
        return take_away(s, root, root_fd, name, "prompt file");
}

/* <state>/tasks/<id>: a task dir of no known task goes whole; a known
 * task's launch request (pending-launch.json: the caller's env, launch-options.h)
 * goes unless the task is still queued or running (a running task's request
 * says its shim was never let go); a temp file of an interrupted write of it
 * always goes (nothing writes one before the loop runs). */
static int task_dir_entry(Sweep *s, const char *root, int root_fd, const char *name) {
        ssize_t i = find_task(s, name);
        if (i < 0) return take_away(s, root, root_fd, name, "task dir");
        bool keep_request = task_active(&s->tasks[i]);
        _cleanup_close_ int fd = openat(root_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return 0;
        int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (!d) {
                safe_close(dfd);
                return 0;
        }
        _cleanup_strv_free_ char **doomed = NULL;
        int r = 0;
        for (struct dirent *de; r >= 0 && (de = readdir(d));) {
                size_t len = strlen(de->d_name);
                bool tmp = startswith(de->d_name, "." LAUNCH_REQUEST_FILE "-") && len > 4 &&
                           streq(de->d_name + len - 4, ".tmp");
                if ((tmp || (!keep_request && streq(de->d_name, LAUNCH_REQUEST_FILE)))) r = strv_push(&doomed, de->d_name);
        }
        closedir(d);
        if (r < 0) return r;
        for (char **n = doomed; n && *n; n++) {
                if (unlinkat(fd, *n, 0) < 0) {
                        if (errno != ENOENT) log_warning_errno(-errno, "boot sweep: cannot remove %s/%s/%s", root, name, *n);
                        continue;
                }
                log_info("boot sweep: removed %s/%s/%s", root, name, *n);
                s->removed++;
        }
        return 0;
}

/* Remove dfd/name without following symlinks or leaving filesystem dev. */
static void rm_tree_at(int dfd, const char *name, dev_t dev) {
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) return;
        if (st.st_dev != dev) return; /* a mount point: never cross it */
        if (!S_ISDIR(st.st_mode)) {
                (void) unlinkat(dfd, name, 0);
                return;
        }
        /* overlayfs leaves work/work at mode 000 */
        if ((st.st_mode & 0700) != 0700) (void) fchmodat(dfd, name, (st.st_mode & 07777) | 0700, 0);
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return;
        }
        struct dirent *de;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..")) rm_tree_at(dirfd(d), de->d_name, dev);
        closedir(d);
        (void) unlinkat(dfd, name, AT_REMOVEDIR);
}

static void empty_trash(char *const *trash) {
        for (char *const *t = trash; t && *t; t++) {
                int fd = open(*t, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0) continue;
                struct stat st;
                DIR *d = fstat(fd, &st) == 0 ? fdopendir(fd) : NULL;
                if (!d) {
                        close(fd);
                        continue;
                }
                struct dirent *de;
                while ((de = readdir(d)))
                        if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                                rm_tree_at(dirfd(d), de->d_name, st.st_dev);
                closedir(d);
        }
}

static bool trash_has_entries(const char *t) {
        DIR *d = opendir(t);
        if (!d) return false;
        struct dirent *de;
        bool any = false;
        while (!any && (de = readdir(d))) any = !streq(de->d_name, ".") && !streq(de->d_name, "..");
        closedir(d);
        return any;
}

/* Empty the trash in a detached grandchild (reparented to init or the
 * service's subreaper; nothing to reap for the daemon) holding no fd of the
 * daemon's, its stdio /dev/null. */
static void empty_trash_detached(char *const *trash) {
        bool any = false;
        for (char *const *t = trash; t && *t && !any; t++) any = trash_has_entries(*t);
        if (!any) return;
        fflush(stderr);
        /* no stdio either (a pipe someone waits on for EOF) */
        int r = safe_fork_full("taskferryd-trash", NULL, NULL, 0,
                               FORK_DETACH | FORK_NEW_SESSION | FORK_REARRANGE_STDIO | FORK_CLOSE_ALL_FDS | FORK_RESET_SIGNALS,
                               NULL);
        if (r < 0) {
                log_warning_errno(r, "boot sweep: cannot fork the trash remover; the trash stays until the next start");
                return;
        }
        if (r == 0) {
                empty_trash(trash);
                _exit(0);
        }
}

int sweep_run(const tf_paths *p, const SweepTable *table) {
        /* owned variables first: every goto out below jumps past nothing */
        _cleanup_strv_free_ char **roots = NULL;
        _cleanup_free_ char *outputs = NULL, *prompts = NULL, *task_dirs = NULL;
        Sweep s = {.paths = p, .table = table};
        size_t n = table->n_tasks;
        s.tasks = calloc(n + 1, sizeof *s.tasks);
        s.by_id = calloc(n + 1, sizeof *s.by_id);
        int r = -ENOMEM;
        if (!s.tasks || !s.by_id) goto out;
        for (size_t i = 0; i < n; i++) {
                table->get(table->userdata, i, &s.tasks[i]);
                s.by_id[i] = i;
        }
        sort_ctx = &s;
        qsort(s.by_id, n, sizeof *s.by_id, cmp_by_id);
        sort_ctx = NULL;
        r = mounts_load(&s.mounts);
        if (r < 0) {
                /* without the mount table, removing anything could cross into a mount */
                log_warning_errno(r, "boot sweep skipped: cannot read /proc/self/mountinfo");
                r = 0;
                goto out;
        }

        /* overlays: the configured root, then every root a record names */
        if ((r = strv_push(&roots, p->overlay_tmp_root)) < 0) goto out;
        for (size_t i = 0; i < n; i++) {
                const char *tr = s.tasks[i].overlay_tmp_root;
                if (tr && tr[0] == '/' && !strv_contains(roots, tr) && (r = strv_push(&roots, tr)) < 0) goto out;
        }
        for (char **root = roots; *root; root++)
                if ((r = sweep_dir(&s, *root, overlay_entry)) < 0) goto out;
        /* a settled task whose overlay is gone (now or before) no longer names it */
        for (size_t i = 0; i < n; i++) {
                SweepTask *t = &s.tasks[i];
                struct stat st;
                if (t->overlay_root && !task_holds_overlay(t) && lstat(t->overlay_root, &st) < 0 && errno == ENOENT)
                        table->overlay_released(table->userdata, i);
        }
        outputs = strdup_printf("%s/outputs", p->state_dir);
        prompts = strdup_printf("%s/prompts", p->state_dir);
        if (!outputs || !prompts) {
                r = -ENOMEM;
                goto out;
        }
        if ((r = sweep_dir(&s, outputs, output_entry)) < 0) goto out;
        if ((r = sweep_dir(&s, prompts, prompt_entry)) < 0) goto out;
        task_dirs = strdup_printf("%s/tasks", p->state_dir);
        if (!task_dirs) {
                r = -ENOMEM;
                goto out;
        }
        if ((r = sweep_dir(&s, task_dirs, task_dir_entry)) < 0) goto out;
        empty_trash_detached(s.trash);
        r = s.removed;
out:
        strv_free(s.mounts);
        strv_free(s.trash);
        free(s.tasks);
        free(s.by_id);
        return r;
}

/* ---- the adapter to the task table (task.h): the one place here that
 * knows Task ---- */

#include "core/manager.h"
#include "core/store.h"
#include "core/task.h"
#include "json-util.h"
#include "protocol-keys.h"

static void manager_sweep_get(void *userdata, size_t i, SweepTask *ret) {
        Task *t = ((Manager *) userdata)->tasks[i];
        json_object *od = json_object_is_type(t->rec.overlay_dirs, json_type_object) ? t->rec.overlay_dirs : NULL;
        *ret = (SweepTask){
                .id = t->id,
                .status = task_status_to_string(t->rec.status),
                .changeset_status = changeset_status_to_string(t->rec.changeset_status),
                .overlay_root = od ? json_get_string(od, PK_root) : NULL,
                .overlay_tmp_root = od ? json_get_string(od, PK_tmpRoot) : NULL,
        };
}

static void manager_sweep_released(void *userdata, size_t i) {
        Task *t = ((Manager *) userdata)->tasks[i];
        (void) task_set_null(t, TASK_KEY_overlay_dirs);
        task_persist(t);
}

int manager_sweep(Manager *m) {
        if (m->store.load_error) {
                log_warning("boot sweep skipped: tasks.json could not be read");
                return 0;
        }
        SweepTable table = {.n_tasks = m->n_tasks, .get = manager_sweep_get,
                            .overlay_released = manager_sweep_released, .userdata = m};
        return sweep_run(&m->paths, &table);
}
