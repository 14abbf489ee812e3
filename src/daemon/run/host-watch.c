/* The host masks kept current by inotify (host-watch.h). */

#include "run/host-watch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/manager.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "path-util.h"
#include "string-util.h"
#include "strv.h"

#define WATCH_MASK                                                                                    \
        (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | \
         IN_DONT_FOLLOW | IN_EXCL_UNLINK)

struct HostWatch {
        sd_event *event;
        char **roots;
        bool private_files;
        int fd;                  /* inotify */
        sd_event_source *io;     /* its events, read as they come */
        sd_event_source *walker; /* the walk's slices (idle priority) */
        int mnt_fd;              /* /proc/self/mountinfo, POLLPRI on a change */
        sd_event_source *mnt_io;
        char *mounts_under;      /* the mount points under the roots, last seen */
        char **dirs;             /* by watch descriptor: the watched dir's path */
        size_t n_dirs;
        char **pending;          /* dirs to watch and read, in order, those before pending_head done */
        size_t pending_head;
        bool *root_present;      /* by root: it was a dir when the walk started */
        HostMaskList masks;
        size_t entries;          /* entries the walk has seen */
        bool broken;             /* a watch could not be added, or too many entries: for good */
        bool restart;            /* walk again from the start */
};

static int restart(HostWatch *hw);
static inline void host_watch_freep(HostWatch **p) { host_watch_free(*p); }

static void pending_clear(HostWatch *hw) {
        strv_free(hw->pending);
        hw->pending = NULL;
        hw->pending_head = 0;
}

static bool pending_empty(const HostWatch *hw) { return !hw->pending || !hw->pending[hw->pending_head]; }

static int pending_push(HostWatch *hw, const char *dir) {
        int r = strv_push(&hw->pending, dir);
        if (r >= 0 && hw->walker) (void) sd_event_source_set_enabled(hw->walker, SD_EVENT_ON);
        return r;
}

static void dirs_clear(HostWatch *hw) {
        for (size_t i = 0; i < hw->n_dirs; i++) free(hw->dirs[i]);
        free(hw->dirs);
        hw->dirs = NULL;
        hw->n_dirs = 0;
}

static int dirs_set(HostWatch *hw, int wd, const char *path) {
        if ((size_t) wd >= hw->n_dirs) {
                size_t n = (size_t) wd + 64;
                char **d = realloc(hw->dirs, n * sizeof *d);
                if (!d) return -ENOMEM;
                memset(d + hw->n_dirs, 0, (n - hw->n_dirs) * sizeof *d);
                hw->dirs = d;
                hw->n_dirs = n;
        }
        char *p = strdup(path);
        if (!p) return -ENOMEM;
        free(hw->dirs[wd]);
        hw->dirs[wd] = p;
        return 0;
}

static void set_broken(HostWatch *hw, const char *why) {
        if (hw->broken) return;
        hw->broken = true;
        pending_clear(hw);
        log_warning("the sandbox's masks of /etc and /opt are not watched (%s): every launch walks them", why);
}

/* the entry at path (its lstat st) into the list: its kind, or out */
static int note(HostWatch *hw, const char *path, const struct stat *st) {
        HostMaskKind k = host_mask_classify(st, hw->private_files);
        if (k < 0) {
                host_mask_list_remove(&hw->masks, path, false);
                return 0;
        }
        return host_mask_list_set(&hw->masks, path, k);
}

/* watch dir, then read it: what is made after the watch is an event, what
 * was there before is read */
static int walk_dir(HostWatch *hw, const char *dir) {
        uint32_t mask = WATCH_MASK | (hw->private_files ? IN_ATTRIB : 0);
        int wd = inotify_add_watch(hw->fd, dir, mask);
        if (wd < 0) {
                if (errno == ENOSPC || errno == ENOMEM) {
                        set_broken(hw, "fs.inotify.max_user_watches reached");
                        return 0;
                }
                /* not gone: out of reach by path, yet a worker reaches it by
                 * chdir and a relative name; the shim's walk lists it */
                if (errno == ENAMETOOLONG) {
                        set_broken(hw, "a dir's path is longer than PATH_MAX");
                        return 0;
                }
                /* ours to enter but not to list (0711): a worker of our uid
                 * reaches a socket in it by its name, so the whole dir is
                 * masked */
                if (errno == EACCES && !hw->private_files && access(dir, X_OK) == 0)
                        return host_mask_list_set(&hw->masks, dir, HOST_MASK_PRIVATE_DIR);
                return 0; /* gone, or not ours to reach */
        }
        int r = dirs_set(hw, wd, dir);
        if (r < 0) return r;
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return 0;
        DIR *d = fdopendir(fd);
        if (!d) return 0;
        TAKE_FD(fd);
        struct dirent *de;
        while (r >= 0 && (de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, "..")) continue;
                if (++hw->entries > HOST_MASKS_SCAN_MAX) {
                        set_broken(hw, "more entries than a walk visits");
                        break;
                }
                bool is_dir = de->d_type == DT_DIR;
                if (de->d_type != DT_SOCK && !is_dir && !host_mask_needs_stat(de->d_type, hw->private_files)) continue;
                _cleanup_free_ char *child = strdup_printf("%s/%s", dir, de->d_name);
                if (!child) {
                        r = -ENOMEM;
                        break;
                }
                struct stat st;
                if (host_mask_needs_stat(de->d_type, hw->private_files) || de->d_type == DT_SOCK) {
                        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
                        is_dir = S_ISDIR(st.st_mode);
                        if ((r = note(hw, child, &st)) < 0) break;
                }
                if (is_dir) r = strv_push(&hw->pending, child);
        }
        closedir(d);
        return r;
}

/* walk up to max pending dirs; whether none is left */
static int walk_some(HostWatch *hw, size_t max) {
        for (size_t i = 0; i < max && !hw->broken && !pending_empty(hw); i++) {
                /* the walked ones stay in the strv (freed with it) */
                const char *dir = hw->pending[hw->pending_head++];
                int r = walk_dir(hw, dir);
                if (r < 0) return r;
        }
        if (pending_empty(hw)) pending_clear(hw);
        return pending_empty(hw);
}

/* forget dir and everything under it: its entries, watches and pending walks */
static void forget_tree(HostWatch *hw, const char *dir) {
        host_mask_list_remove(&hw->masks, dir, true);
        for (size_t i = 0; i < hw->n_dirs; i++)
                if (hw->dirs[i] && path_is_at_or_below(hw->dirs[i], dir)) {
                        (void) inotify_rm_watch(hw->fd, (int) i);
                        free(hw->dirs[i]);
                        hw->dirs[i] = NULL;
                }
        size_t k = hw->pending_head;
        for (size_t i = hw->pending_head; hw->pending && hw->pending[i]; i++) {
                if (path_is_at_or_below(hw->pending[i], dir)) free(hw->pending[i]);
                else hw->pending[k++] = hw->pending[i];
        }
        if (hw->pending) hw->pending[k] = NULL;
}

static bool is_root(const HostWatch *hw, const char *dir) { return strv_contains(hw->roots, dir); }

static int handle_event(HostWatch *hw, const struct inotify_event *ev) {
        if (ev->mask & IN_Q_OVERFLOW) {
                hw->restart = true;
                return 0;
        }
        if (ev->wd < 0 || (size_t) ev->wd >= hw->n_dirs || !hw->dirs[ev->wd]) return 0;
        const char *dir = hw->dirs[ev->wd];
        if (ev->mask & IN_IGNORED) {
                if (is_root(hw, dir)) hw->restart = true;
                free(hw->dirs[ev->wd]);
                hw->dirs[ev->wd] = NULL;
                return 0;
        }
        if (ev->len == 0 || !ev->name[0]) {
                /* the dir itself: a root gone or moved, or its mode */
                if ((ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) && is_root(hw, dir)) hw->restart = true;
                struct stat st;
                if ((ev->mask & IN_ATTRIB) && !is_root(hw, dir) && lstat(dir, &st) == 0) return note(hw, dir, &st);
                return 0;
        }
        _cleanup_free_ char *child = strdup_printf("%s/%s", dir, ev->name);
        if (!child) return -ENOMEM;
        bool gone = ev->mask & (IN_DELETE | IN_MOVED_FROM);
        if (gone) {
                if (ev->mask & IN_ISDIR) forget_tree(hw, child);
                else host_mask_list_remove(&hw->masks, child, false);
        }
        if (!(ev->mask & (IN_CREATE | IN_MOVED_TO | IN_ATTRIB)) && !gone) return 0;
        struct stat st;
        if (lstat(child, &st) < 0) {
                host_mask_list_remove(&hw->masks, child, false);
                return 0;
        }
        /* still there after it went: another entry took the name (an
         * exchange of two, or one moved over it later in the queue), which
         * is read as if it had just arrived */
        int r = note(hw, child, &st);
        if (r >= 0 && S_ISDIR(st.st_mode) && (gone || (ev->mask & (IN_CREATE | IN_MOVED_TO)))) {
                /* a dir moved in keeps any watch it had under its old path */
                if (ev->mask & IN_MOVED_TO) forget_tree(hw, child);
                if ((r = note(hw, child, &st)) >= 0) r = pending_push(hw, child);
        }
        return r;
}

/* read every queued event */
static int drain(HostWatch *hw) {
        _Alignas(struct inotify_event) char buf[65536];
        for (;;) {
                ssize_t n = read(hw->fd, buf, sizeof buf);
                if (n < 0) {
                        if (errno == EINTR) continue;
                        if (errno == EAGAIN) break;
                        return -errno;
                }
                if (n == 0) break;
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *) p;
                        int r = handle_event(hw, ev);
                        if (r < 0) return r;
                        p += sizeof *ev + ev->len;
                }
        }
        return 0;
}

/* the lines of mountinfo whose mount point lies under a root, joined */
static int mounts_under_roots(const HostWatch *hw, char **ret) {
        _cleanup_free_ char *text = NULL;
        if (hw->mnt_fd < 0 || lseek(hw->mnt_fd, 0, SEEK_SET) < 0) return -EBADF;
        int r = read_fd(hw->mnt_fd, 16 << 20, &text, NULL);
        if (r < 0) return r;
        _cleanup_free_ char *out = strdup("");
        if (!out) return -ENOMEM;
        for (char *line = text, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next) *next++ = 0;
                /* "id parent major:minor root mountpoint ..." */
                char *f = line;
                for (int i = 0; i < 4 && f; i++) f = strchr(f, ' '), f = f ? f + 1 : NULL;
                if (!f) continue;
                char *end = strchr(f, ' ');
                if (end) *end = 0;
                bool under = false;
                for (char **root = hw->roots; *root && !under; root++) under = path_is_at_or_below(f, *root);
                if (!under) continue;
                char *o = strdup_printf("%s%s\n", out, f);
                if (!o) return -ENOMEM;
                free(out);
                out = o;
        }
        *ret = TAKE_PTR(out);
        return 0;
}

/* a mount under a root came or went: inotify cannot see into it. A change
 * shows once, to the first poll of the fd: the loop's epoll may have taken
 * it already (the source is then pending), or our own poll takes it now;
 * known says the caller knows of one. */
static int check_mounts(HostWatch *hw, bool known) {
        if (hw->mnt_fd < 0) return 0;
        if (!known && !(hw->mnt_io && sd_event_source_get_pending(hw->mnt_io) > 0)) {
                struct pollfd p = {.fd = hw->mnt_fd, .events = POLLPRI};
                if (poll(&p, 1, 0) <= 0 || !(p.revents & (POLLPRI | POLLERR))) return 0;
        }
        _cleanup_free_ char *now = NULL;
        int r = mounts_under_roots(hw, &now);
        if (r < 0) return r == -ENOMEM ? r : 0;
        if (!streq_ptr(now, hw->mounts_under)) hw->restart = true;
        free(hw->mounts_under);
        hw->mounts_under = TAKE_PTR(now);
        return 0;
}

/* a root that is there now but was not when the walk started, or the other way round */
static bool roots_changed(const HostWatch *hw) {
        for (size_t i = 0; hw->roots[i]; i++) {
                struct stat st;
                bool present = lstat(hw->roots[i], &st) == 0 && S_ISDIR(st.st_mode);
                if (present != hw->root_present[i]) return true;
        }
        return false;
}

static int update(HostWatch *hw) {
        int r = drain(hw);
        if (r >= 0) r = check_mounts(hw, false);
        if (r >= 0 && (hw->restart || roots_changed(hw))) r = restart(hw);
        return r;
}

static int on_inotify(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        (void) s, (void) fd, (void) revents;
        HostWatch *hw = userdata;
        if (update(hw) < 0) set_broken(hw, "out of memory");
        return 0;
}

static int on_mounts(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        (void) s, (void) fd, (void) revents;
        HostWatch *hw = userdata;
        if (check_mounts(hw, true) < 0 || (hw->restart && restart(hw) < 0)) set_broken(hw, "out of memory");
        return 0;
}

static int on_walk(sd_event_source *s, void *userdata) {
        HostWatch *hw = userdata;
        int r = walk_some(hw, HOST_WATCH_SLICE_DIRS);
        if (r < 0) set_broken(hw, "out of memory");
        if (r != 0) (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
        return 0;
}

static int restart(HostWatch *hw) {
        hw->restart = false;
        if (hw->broken) return 0;
        hw->io = sd_event_source_disable_unref(hw->io);
        safe_close(hw->fd);
        dirs_clear(hw);
        pending_clear(hw);
        host_mask_list_done(&hw->masks);
        hw->entries = 0;
        hw->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (hw->fd < 0) {
                set_broken(hw, strerror(errno));
                return 0;
        }
        if (hw->event && sd_event_add_io(hw->event, &hw->io, hw->fd, EPOLLIN, on_inotify, hw) < 0) return -ENOMEM;
        free(hw->mounts_under);
        hw->mounts_under = NULL;
        if (hw->mnt_fd >= 0) {
                /* reading it clears the change notice */
                int r = mounts_under_roots(hw, &hw->mounts_under);
                if (r == -ENOMEM) return r;
        }
        for (size_t i = 0; hw->roots[i]; i++) {
                struct stat st;
                hw->root_present[i] = lstat(hw->roots[i], &st) == 0 && S_ISDIR(st.st_mode);
                if (hw->root_present[i] && strv_push(&hw->pending, hw->roots[i]) < 0) return -ENOMEM;
        }
        if (hw->walker) (void) sd_event_source_set_enabled(hw->walker, SD_EVENT_ON);
        return 0;
}

int host_watch_new(sd_event *e, const char *const *roots, bool private_files, HostWatch **ret) {
        static const char *const defaults[] = {HOST_MASKS_ROOTS, NULL};
        _cleanup_(host_watch_freep) HostWatch *hw = calloc(1, sizeof *hw);
        if (!hw) return -ENOMEM;
        hw->fd = hw->mnt_fd = -1;
        hw->private_files = private_files;
        hw->event = e ? sd_event_ref(e) : NULL;
        for (const char *const *r = roots ? roots : defaults; *r; r++)
                if (strv_push(&hw->roots, *r) < 0) return -ENOMEM;
        if (!hw->roots && !(hw->roots = calloc(1, sizeof(char *)))) return -ENOMEM;
        hw->root_present = calloc(strv_length(hw->roots) + 1, sizeof(bool));
        if (!hw->root_present) return -ENOMEM;
        hw->mnt_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
        if (e && hw->mnt_fd >= 0 && sd_event_add_io(e, &hw->mnt_io, hw->mnt_fd, EPOLLPRI, on_mounts, hw) < 0)
                return -ENOMEM;
        if (e) {
                if (sd_event_add_defer(e, &hw->walker, on_walk, hw) < 0) return -ENOMEM;
                (void) sd_event_source_set_priority(hw->walker, SD_EVENT_PRIORITY_IDLE);
        }
        int r = restart(hw);
        if (r < 0) return r;
        if (hw->broken) return -EIO;
        *ret = TAKE_PTR(hw);
        return 0;
}

HostWatch *host_watch_free(HostWatch *hw) {
        if (!hw) return NULL;
        sd_event_source_disable_unref(hw->io);
        sd_event_source_disable_unref(hw->walker);
        sd_event_source_disable_unref(hw->mnt_io);
        safe_close(hw->fd);
        safe_close(hw->mnt_fd);
        free(hw->mounts_under);
        dirs_clear(hw);
        pending_clear(hw);
        free(hw->root_present);
        strv_free(hw->roots);
        host_mask_list_done(&hw->masks);
        sd_event_unref(hw->event);
        free(hw);
        return NULL;
}

bool host_watch_ready(const HostWatch *hw) { return hw && !hw->broken && pending_empty(hw); }

int host_watch_snapshot(HostWatch *hw, HostMaskList *ret) {
        if (!hw || hw->broken) return 0;
        int r = update(hw);
        if (r < 0) return r;
        if (!hw->event) {
                /* no loop to walk on (tests): the whole walk now */
                while ((r = walk_some(hw, SIZE_MAX)) == 0) {}
                if (r < 0) return r;
        }
        /* the few dirs made since the last launch; a whole walk is the walker's */
        if (hw->broken || (r = walk_some(hw, HOST_WATCH_LAUNCH_DIRS)) <= 0) return r < 0 ? r : 0;
        if (hw->broken) return 0;
        return host_mask_list_copy(&hw->masks, ret) < 0 ? -ENOMEM : 1;
}

void host_watch_setup(Manager *m) {
        int r = host_watch_new(m->event, NULL, geteuid() == 0, &m->host_watch);
        if (r < 0) log_warning_errno(r, "cannot watch /etc and /opt for the sandbox's masks; every launch walks them");
}

void host_watch_teardown(Manager *m) { m->host_watch = host_watch_free(m->host_watch); }
