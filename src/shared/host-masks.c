#include "host-masks.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "path-util.h"
#include "string-util.h"

static const char *const kind_table[_HOST_MASK_KIND_MAX] = {
        [HOST_MASK_SOCKET] = "socket",
        [HOST_MASK_PRIVATE_FILE] = "private-file",
        [HOST_MASK_PRIVATE_DIR] = "private-dir",
};

const char *host_mask_kind_to_string(HostMaskKind k) {
        return k >= 0 && k < _HOST_MASK_KIND_MAX ? kind_table[k] : NULL;
}

HostMaskKind host_mask_kind_from_string(const char *s) {
        for (int i = 0; s && i < _HOST_MASK_KIND_MAX; i++)
                if (streq(s, kind_table[i])) return (HostMaskKind) i;
        return _HOST_MASK_KIND_INVALID;
}

void host_mask_list_done(HostMaskList *l) {
        for (size_t i = 0; l->items && i < l->n; i++) free(l->items[i].path);
        free(l->items);
        *l = (HostMaskList) {0};
}

/* the index of path, or where it would go (*found says which) */
static size_t find(const HostMaskList *l, const char *path, bool *found) {
        size_t lo = 0, hi = l->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(l->items[mid].path, path);
                if (c == 0) {
                        *found = true;
                        return mid;
                }
                if (c < 0) lo = mid + 1;
                else hi = mid;
        }
        *found = false;
        return lo;
}

int host_mask_list_set(HostMaskList *l, const char *path, HostMaskKind kind) {
        bool found;
        size_t i = find(l, path, &found);
        if (found) {
                l->items[i].kind = kind;
                return 0;
        }
        char *p = strdup(path);
        if (!p) return -ENOMEM;
        HostMask *items = realloc(l->items, (l->n + 1) * sizeof *items);
        if (!items) {
                free(p);
                return -ENOMEM;
        }
        l->items = items;
        memmove(&items[i + 1], &items[i], (l->n - i) * sizeof *items);
        items[i] = (HostMask) {.path = p, .kind = kind};
        l->n++;
        return 0;
}

size_t host_mask_list_remove(HostMaskList *l, const char *path, bool below) {
        size_t k = 0, gone = 0;
        for (size_t i = 0; i < l->n; i++) {
                bool drop = streq(l->items[i].path, path) || (below && path_is_at_or_below(l->items[i].path, path));
                if (drop) {
                        free(l->items[i].path);
                        gone++;
                } else
                        l->items[k++] = l->items[i];
        }
        l->n = k;
        return gone;
}

int host_mask_list_copy(const HostMaskList *src, HostMaskList *dst) {
        *dst = (HostMaskList) {.partial = src->partial};
        if (src->n == 0) return 0;
        dst->items = calloc(src->n, sizeof *dst->items);
        if (!dst->items) return -ENOMEM;
        for (size_t i = 0; i < src->n; i++) {
                dst->items[i].kind = src->items[i].kind;
                if (!(dst->items[i].path = strdup(src->items[i].path))) {
                        dst->n = i;
                        host_mask_list_done(dst);
                        return -ENOMEM;
                }
        }
        dst->n = src->n;
        return 0;
}

HostMaskKind host_mask_classify(const struct stat *st, bool private_files) {
        if (S_ISSOCK(st->st_mode)) return HOST_MASK_SOCKET;
        if (!private_files) return _HOST_MASK_KIND_INVALID;
        if (S_ISREG(st->st_mode) && !(st->st_mode & S_IROTH)) return HOST_MASK_PRIVATE_FILE;
        if (S_ISDIR(st->st_mode) && (st->st_mode & (S_IROTH | S_IXOTH)) != (S_IROTH | S_IXOTH))
                return HOST_MASK_PRIVATE_DIR;
        return _HOST_MASK_KIND_INVALID;
}

bool host_mask_needs_stat(unsigned char d_type, bool private_files) {
        return d_type == DT_UNKNOWN || (private_files && (d_type == DT_REG || d_type == DT_DIR));
}

typedef struct walk {
        HostMaskList *l;
        bool private_files;
        size_t left;
} walk;

static int walk_dir(walk *w, int dfd, const char *path, int depth) {
        DIR *d = fdopendir(dfd);
        if (!d) {
                close(dfd);
                return 0;
        }
        int r = 0;
        struct dirent *de;
        while (r >= 0 && (de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, "..")) continue;
                if (w->left == 0) {
                        w->l->partial = true;
                        break;
                }
                w->left--;
                bool is_dir = de->d_type == DT_DIR;
                HostMaskKind k = de->d_type == DT_SOCK ? HOST_MASK_SOCKET : _HOST_MASK_KIND_INVALID;
                if (host_mask_needs_stat(de->d_type, w->private_files)) {
                        struct stat st;
                        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
                        k = host_mask_classify(&st, w->private_files);
                        is_dir = S_ISDIR(st.st_mode);
                }
                if (k < 0 && !is_dir) continue;
                _cleanup_free_ char *child = strdup_printf("%s/%s", path, de->d_name);
                if (!child) {
                        r = -ENOMEM;
                        break;
                }
                if (k >= 0 && (r = host_mask_list_set(w->l, child, k)) < 0) break;
                if (!is_dir || depth >= HOST_MASKS_DEPTH_MAX) continue;
                int cfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (cfd >= 0) r = walk_dir(w, cfd, child, depth + 1);
                /* ours to enter but not to list (0711): a worker of our uid
                 * reaches a socket in it by its name, so the whole dir is
                 * masked */
                else if (errno == EACCES && !w->private_files && faccessat(dirfd(d), de->d_name, X_OK, 0) == 0)
                        r = host_mask_list_set(w->l, child, HOST_MASK_PRIVATE_DIR);
        }
        closedir(d);
        return r;
}

int host_masks_scan(size_t max_entries, bool private_files, HostMaskList *ret) {
        static const char *const roots[] = {HOST_MASKS_ROOTS};
        HostMaskList l = {0};
        walk w = {.l = &l, .private_files = private_files, .left = max_entries};
        int r = 0;
        for (size_t i = 0; i < ELEMENTSOF(roots) && r >= 0; i++) {
                int fd = open(roots[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0) continue;
                r = walk_dir(&w, fd, roots[i], 0);
        }
        if (r < 0) {
                host_mask_list_done(&l);
                return r;
        }
        *ret = l;
        return 0;
}
