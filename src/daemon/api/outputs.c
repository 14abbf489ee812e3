/* A task's output dir: listing and reading one file (outputs.h). */
#include "api/outputs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "json-util.h"
#include "protocol-keys.h"
#include "macro.h"
#include "string-util.h"
#include "utf8.h"

/* Open rel beneath dirfd; symlinks resolve only while they stay beneath it.
 * -EXDEV (or -ELOOP) for a path that would leave it. */
static int open_beneath_follow(int dirfd, const char *rel, int flags) {
        struct open_how how = {
                /* openat2 refuses O_PATH with any flag but these */
                .flags = (uint64_t) (flags | O_CLOEXEC | ((flags & O_PATH) ? 0 : O_NOCTTY)),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        int fd = (int) syscall(SYS_openat2, dirfd, *rel ? rel : ".", &how, sizeof how);
        if (fd >= 0) return fd;
        /* before Linux 5.6 (ENOSYS) there is no race-free way: fail closed */
        return -errno;
}

/* ---- listing ---- */

typedef struct Entry {
        char *path;
        uint64_t size;
} Entry;

typedef struct Frame {
        int fd;
        char *rel; /* "" for the root */
        unsigned depth;
} Frame;

typedef struct Walk {
        int root;
        Entry *files;
        size_t n_files;
        uint64_t bytes;
        unsigned visited_dirs;
        unsigned examined;
        bool truncated;
        Frame *stack;
        size_t n_stack, cap_stack;
} Walk;

static bool should_stop(const Walk *w) {
        return w->n_files >= OUTPUT_LIST_FILES_MAX || w->bytes >= OUTPUT_LIST_BYTES_MAX ||
               w->visited_dirs >= OUTPUT_LIST_DIRS_MAX;
}

static int entry_cmp(const void *a, const void *b) {
        return strcmp(((const Entry *) a)->path, ((const Entry *) b)->path);
}

static char *join_rel(const char *dir, const char *name) {
        return *dir ? strdup_printf("%s/%s", dir, name) : strdup(name);
}

/* Fold one entry of the directory in frame f. 1 = stop this listing. */
static int visit_entry(Walk *w, const Frame *f, int dfd, const char *name) {
        if (streq(name, "node_modules") || streq(name, ".git")) return 0;
        if (should_stop(w) || ++w->examined > OUTPUT_LIST_ENTRIES_MAX) {
                w->truncated = true;
                return 1;
        }
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) return 0; /* vanished */
        _cleanup_free_ char *rel = join_rel(f->rel, name);
        if (!rel) return -ENOMEM;
        uint64_t size;
        if (S_ISLNK(st.st_mode)) {
                /* listed only if it resolves beneath the root to a regular file */
                _cleanup_close_ int fd = open_beneath_follow(w->root, rel, O_PATH);
                struct stat target;
                if (fd < 0 || fstat(fd, &target) < 0 || !S_ISREG(target.st_mode)) return 0;
                size = (uint64_t) target.st_size;
        } else if (S_ISDIR(st.st_mode)) {
                /* visited plus pinned (each holds an fd): more than the cap
                 * could never all be visited, and a wide tree would
                 * otherwise pin an fd per subdirectory */
                if (w->visited_dirs + w->n_stack >= OUTPUT_LIST_DIRS_MAX) {
                        w->truncated = true;
                        return 1;
                }
                if (f->depth + 1 > OUTPUT_LIST_DEPTH_MAX) {
                        w->truncated = true;
                        return 1;
                }
                /* pinned now: a dir swapped for a symlink after readdir is refused here */
                int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0) return 0;
                if (w->n_stack == w->cap_stack) {
                        size_t cap = w->cap_stack ? w->cap_stack * 2 : 16;
                        Frame *s = realloc(w->stack, cap * sizeof *s);
                        if (!s) {
                                close(fd);
                                return -ENOMEM;
                        }
                        w->stack = s;
                        w->cap_stack = cap;
                }
                w->stack[w->n_stack++] = (Frame) {.fd = fd, .rel = TAKE_PTR(rel), .depth = f->depth + 1};
                return 0;
        } else if (S_ISREG(st.st_mode))
                size = (uint64_t) st.st_size;
        else
                return 0; /* FIFO, socket, device */
        if (w->bytes + size > OUTPUT_LIST_BYTES_MAX) {
                w->truncated = true;
                return 1;
        }
        Entry *e = realloc(w->files, (w->n_files + 1) * sizeof *e);
        if (!e) return -ENOMEM;
        w->files = e;
        w->files[w->n_files++] = (Entry) {.path = TAKE_PTR(rel), .size = size};
        w->bytes += size;
        return 0;
}

static int visit_frame(Walk *w) {
        if (should_stop(w)) {
                w->truncated = true;
                return 1;
        }
        Frame f = w->stack[--w->n_stack];
        w->visited_dirs++;
        int dup = f.fd == w->root ? fcntl(f.fd, F_DUPFD_CLOEXEC, 3) : f.fd;
        DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
        int r = 0;
        if (!d) {
                if (dup >= 0) close(dup);
        } else {
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (streq(de->d_name, ".") || streq(de->d_name, "..")) continue;
                        r = visit_entry(w, &f, dirfd(d), de->d_name);
                        if (r != 0) break;
                }
                closedir(d);
        }
        free(f.rel);
        return r;
}

static json_object *empty_listing(void) {
        json_object *o = json_object_new_object();
        if (!o) return NULL;
        json_add(o, PK_files, json_object_new_array());
        json_add_int(o, PK_bytes, 0);
        json_add_int(o, PK_total, 0);
        json_add_bool(o, PK_truncated, false);
        return o;
}

int output_list(const char *dir, json_object **ret) {
        *ret = NULL;
        int root = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
        if (root < 0) {
                if (dir && errno != ENOENT && errno != ENOTDIR && errno != ELOOP) return -errno;
                *ret = empty_listing();
                return *ret ? 0 : -ENOMEM;
        }
        Walk w = {.root = root};
        w.stack = calloc(16, sizeof *w.stack);
        int r = w.stack ? 0 : -ENOMEM;
        if (r == 0) {
                w.cap_stack = 16;
                w.stack[w.n_stack++] = (Frame) {.fd = root, .rel = strdup(""), .depth = 0};
                if (!w.stack[0].rel) r = -ENOMEM;
        }
        while (r == 0 && w.n_stack > 0 && !w.truncated) {
                r = visit_frame(&w);
                if (r > 0) r = 0;
        }
        for (size_t i = 0; i < w.n_stack; i++) {
                if (w.stack[i].fd != root) close(w.stack[i].fd);
                free(w.stack[i].rel);
        }
        free(w.stack);
        close(root);
        json_object *o = NULL, *files = NULL;
        if (r == 0) {
                if (w.n_files > 1) qsort(w.files, w.n_files, sizeof *w.files, entry_cmp);
                o = json_object_new_object();
                files = json_object_new_array();
                if (!o || !files) r = -ENOMEM;
        }
        for (size_t i = 0; r == 0 && i < w.n_files; i++) {
                json_object *e = json_object_new_object();
                if (!e || json_object_array_add(files, e) < 0) {
                        json_object_put(e);
                        r = -ENOMEM;
                        break;
                }
                json_add_string(e, PK_path, w.files[i].path);
                json_add_int(e, PK_size, (int64_t) w.files[i].size);
        }
        if (r == 0) {
                json_add(o, PK_files, TAKE_PTR(files));
                json_add_int(o, PK_bytes, (int64_t) w.bytes);
                json_add_int(o, PK_total, (int64_t) w.n_files);
                json_add_bool(o, PK_truncated, w.truncated);
                *ret = TAKE_PTR(o);
        }
        json_object_put(files);
        json_object_put(o);
        for (size_t i = 0; i < w.n_files; i++) free(w.files[i].path);
        free(w.files);
        return r;
}

/* ---- reading one file ---- */

/* path.resolve(dir, rel) stays in dir? On success *ret is rel with `.`, `..`
 * and empty components folded ("" = the dir itself). */
static int fold_rel(const char *rel, char **ret) {
        if (rel[0] == '/') return -EXDEV;
        size_t len = strlen(rel);
        _cleanup_free_ char *out = malloc(len + 1);
        if (!out) return -ENOMEM;
        size_t o = 0;
        for (const char *p = rel; *p;) {
                const char *e = strchrnul(p, '/');
                size_t n = (size_t) (e - p);
                if (n == 0 || (n == 1 && p[0] == '.')) {
                        /* nothing */
                } else if (n == 2 && p[0] == '.' && p[1] == '.') {
                        if (o == 0) return -EXDEV;
                        while (o > 0 && out[o - 1] != '/') o--;
                        if (o > 0) o--; /* the '/' before the dropped component */
                } else {
                        if (o > 0) out[o++] = '/';
                        memcpy(out + o, p, n);
                        o += n;
                }
                p = *e ? e + 1 : e;
        }
        out[o] = 0;
        *ret = TAKE_PTR(out);
        return 0;
}

static json_object *file_object(json_object *content, uint64_t size, bool truncated, const char *error) {
        json_object *o = json_object_new_object();
        if (!o) {
                json_object_put(content);
                return NULL;
        }
        json_add(o, PK_content, content);
        json_add_int(o, PK_size, (int64_t) size);
        json_add_bool(o, PK_truncated, truncated);
        if (error) json_add_string(o, PK_error, error);
        return o;
}

int output_read(const char *dir, const char *rel, uint64_t max, json_object **ret_file) {
        *ret_file = NULL;
        _cleanup_free_ char *folded = NULL;
        int r = fold_rel(rel, &folded);
        if (r == -EXDEV) return OUTPUT_READ_ESCAPES;
        if (r < 0) return r;
        _cleanup_close_ int root = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0) return OUTPUT_READ_NOT_FOUND;
        _cleanup_close_ int fd = open_beneath_follow(root, folded, O_RDONLY | O_NONBLOCK);
        if (fd == -EXDEV || fd == -ELOOP) return OUTPUT_READ_ESCAPES;
        if (fd == -ENOENT || fd == -ENOTDIR) return OUTPUT_READ_NOT_FOUND;
        if (fd == -ENXIO || fd == -EOPNOTSUPP || fd == -ENODEV) /* a socket, a FIFO opened for writing, a device */
                return (*ret_file = file_object(NULL, 0, false, "not_a_file")) ? OUTPUT_READ_OK : -ENOMEM;
        if (fd < 0) return fd;
        struct stat st;
        if (fstat(fd, &st) < 0) return -errno;
        if (!S_ISREG(st.st_mode))
                return (*ret_file = file_object(NULL, (uint64_t) st.st_size, false, "not_a_file")) ? OUTPUT_READ_OK : -ENOMEM;
        if ((uint64_t) st.st_size > max)
                return (*ret_file = file_object(NULL, (uint64_t) st.st_size, true, "too_large")) ? OUTPUT_READ_OK : -ENOMEM;
        /* read at most max + 1 bytes through the fd: the file may grow meanwhile */
        _cleanup_free_ char *buf = malloc(max + 1);
        if (!buf) return -ENOMEM;
        uint64_t got = 0;
        while (got < max + 1) {
                ssize_t n = pread(fd, buf + got, (size_t) (max + 1 - got), (off_t) got);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) return -errno;
                if (n == 0) break;
                got += (uint64_t) n;
        }
        if (got > max) return (*ret_file = file_object(NULL, got, true, "too_large")) ? OUTPUT_READ_OK : -ENOMEM;
        size_t clean_len = 0;
        _cleanup_free_ char *clean = utf8_sanitize_n(buf, (size_t) got, &clean_len);
        if (!clean) return -ENOMEM;
        json_object *content = json_object_new_string_len(clean, (int) clean_len);
        if (!content) return -ENOMEM;
        *ret_file = file_object(content, got, false, NULL);
        return *ret_file ? OUTPUT_READ_OK : -ENOMEM;
}
