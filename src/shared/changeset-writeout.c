/* The write-out of an accept: the live tree written from ours to the merged
 * result, one path at a time, each atomically (changeset-writeout.h).
 *
 * `git apply` writes a changed file by unlinking it and creating it anew, all
 * removals of a patch first: an accept killed with its daemon (PDEATHSIG)
 * left files missing or empty, and the next accept saw a conflict forever.
 * Once the merged tree M is known, we write the live tree ourselves, from
 * ours O (the live contents, as merged) to M, one path at a time, each
 * atomically: the new content goes into a temp file in the target's own
 * directory (WO_TEMP_TAG below), is fsynced and renamed over the target
 * (a batch of temps of one directory at a time: all written, then each
 * fsynced, then each renamed; wo_batch below), so
 * a crash leaves every file old or new, never partial. A re-run after a crash
 * converges: what was written already equals theirs (the merge sees the same
 * change on both sides, an append that landed is not appended again:
 * merge_appends), the rest is written then. Temp files a killed write-out left
 * are removed by the next accept in every directory it touches.
 *
 * Path safety: the paths come from a worker-made changeset. `git apply
 * --check` of the O->M patch has judged them as before (git's verify_path,
 * nothing "beyond a symbolic link"); we check every path again before writing
 * any (no "."/".." or .git component, no empty component, only regular files
 * and symlinks) and every directory is opened one component at a time with
 * openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS), so a
 * symlink of the live tree is never followed, whatever changed since. */
#include "changeset-writeout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "changeset-git.h"
#include "changeset-paths.h"
#include "git-cat.h"
#include "git-output.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"

#define WO_TEMP_TAG ".tf-"

typedef struct wo_entry {
        char *path;
        unsigned mode; /* new mode, octal as git prints it: 0100644, 0100755, 0120000; 0 deleted */
        char oid[72];  /* new blob */
} wo_entry;

typedef struct wo_list {
        wo_entry *e;
        size_t n;
} wo_list;

static void wo_list_done(wo_list *l) {
        for (size_t i = 0; i < l->n; i++) free(l->e[i].path);
        free(l->e);
        memset(l, 0, sizeof *l);
}

/* `diff-tree -r -z --no-renames` raw records (git-output.h). */
static int wo_parse(const char *p, const char *end, wo_list *l) {
        GitRawRecord rec;
        int r;
        while ((r = git_raw_next(&p, end, &rec)) > 0) {
                wo_entry *ne = realloc(l->e, (l->n + 1) * sizeof *ne);
                if (!ne) return -ENOMEM;
                l->e = ne;
                wo_entry *e = &l->e[l->n];
                memset(e, 0, sizeof *e);
                if (!(e->path = strdup(rec.path))) return -ENOMEM;
                l->n++;
                e->mode = rec.status == 'D' ? 0 : rec.new_mode;
                snprintf(e->oid, sizeof e->oid, "%s", rec.new_oid);
        }
        return r;
}

/* A path we are willing to write: relative, no empty, ".", ".." or .git
 * component (git's own rules, verify_path(), are stricter and have run). */
static bool wo_path_ok(const char *path) {
        if (!*path || *path == '/') return false;
        for (const char *c = path;;) {
                size_t len = strcspn(c, "/");
                if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.') ||
                    (len == 4 && strncasecmp(c, ".git", 4) == 0))
                        return false;
                if (!c[len]) return true;
                c += len + 1;
        }
}

/* Is name one of our temp files ".<name>.tf-<pid>-<n>"? Its pid then. */
static bool wo_temp_name(const char *name, pid_t *ret_pid) {
        if (name[0] != '.') return false;
        const char *t = NULL;
        for (const char *s = name; (s = strstr(s, WO_TEMP_TAG)); s++) t = s;
        if (!t || t == name) return false;
        const char *p = t + strlen(WO_TEMP_TAG);
        size_t a = strspn(p, "0123456789");
        if (a == 0 || a > 10 || p[a] != '-') return false;
        size_t b = strspn(p + a + 1, "0123456789");
        if (b == 0 || p[a + 1 + b]) return false;
        *ret_pid = (pid_t) strtol(p, NULL, 10);
        return *ret_pid > 0;
}

/* A temp name for name: ".<name>.tf-<pid>-<n>", the name cut to stay
 * below NAME_MAX (wo_temp_name reads it back). NULL: out of memory. */
static char *wo_temp_name_make(const char *name, unsigned n) {
        char sfx[48];
        snprintf(sfx, sizeof sfx, WO_TEMP_TAG "%d-%u", (int) getpid(), n);
        int keep = (int) strnlen(name, NAME_MAX);
        if ((size_t) keep + strlen(sfx) + 2 > NAME_MAX) keep = NAME_MAX - (int) strlen(sfx) - 2;
        return strdup_printf(".%.*s.%s", keep, name, sfx + 1);
}

/* Remove the temp files of dead write-outs in dirfd (regular files and
 * symlinks named as ours whose process is gone). */
static void wo_sweep_dir(int dirfd) {
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) return;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return;
        }
        for (struct dirent *de; (de = readdir(d));) {
                pid_t pid;
                if (!wo_temp_name(de->d_name, &pid)) continue;
                if (pid == getpid() || kill(pid, 0) == 0 || errno == EPERM) continue;
                struct stat st;
                if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)))
                        continue;
                (void) unlinkat(dirfd, de->d_name, 0);
        }
        closedir(d);
}

/* Open the directory of path (beneath top, one component at a time, never
 * through a symlink), creating missing ones when create. *ret_name points
 * at the last component. -ELOOP: a symlink (or /proc magic link) on the way;
 * -ENOTDIR: a non-directory there; -ENOENT: missing and !create. */
static int wo_open_parent(int top, const char *path, bool create, const char **ret_name) {
        int cur = fcntl(top, F_DUPFD_CLOEXEC, 3);
        if (cur < 0) return -errno;
        const char *c = path;
        for (;;) {
                size_t len = strcspn(c, "/");
                if (!c[len]) break;
                _cleanup_free_ char *comp = strndup(c, len);
                if (!comp) {
                        safe_close(cur);
                        return -ENOMEM;
                }
                int fd = cs_open_beneath(cur, comp, O_RDONLY | O_DIRECTORY);
                if (fd == -ENOENT && create) {
                        if (mkdirat(cur, comp, 0777) < 0 && errno != EEXIST) {
                                int r = -errno;
                                safe_close(cur);
                                return r;
                        }
                        fd = cs_open_beneath(cur, comp, O_RDONLY | O_DIRECTORY);
                }
                safe_close(cur);
                if (fd < 0) return fd == -EXDEV ? -ELOOP : fd;
                cur = fd;
                c += len + 1;
        }
        *ret_name = c;
        return cur;
}

/* Every path before anything is written: what may be written, and no symlink
 * or non-directory of the live tree in a parent position (but for one the
 * same change deletes first). Returns 1 ok, 0 refused (*reason), -errno. */
static int wo_check(int top, const wo_list *l, char **reason) {
        for (size_t i = 0; i < l->n; i++) {
                const wo_entry *e = &l->e[i];
                const char *what = NULL;
                if (!wo_path_ok(e->path)) what = "is not a path the changeset may write";
                else if (e->mode != 0 && e->mode != 0100644 && e->mode != 0100755 && e->mode != 0120000)
                        what = "is not a regular file or a symlink";
                else {
                        const char *name;
                        int fd = wo_open_parent(top, e->path, false, &name);
                        if (fd >= 0) safe_close(fd);
                        else if (fd == -ELOOP) what = "is beyond a symbolic link";
                        else if (fd == -ENOTDIR) {
                                /* fine if the change deletes that file first */
                                bool deleted = false;
                                for (size_t j = 0; j < l->n && !deleted; j++) {
                                        size_t len = strlen(l->e[j].path);
                                        deleted = l->e[j].mode == 0 && strncmp(e->path, l->e[j].path, len) == 0 &&
                                                  e->path[len] == '/';
                                }
                                if (!deleted) what = "is beyond a file that is not a directory";
                        } else if (fd != -ENOENT)
                                return fd;
                }
                if (what) {
                        _cleanup_free_ char *q = cs_quote_path(e->path);
                        *reason = strdup_printf("%s %s", q ? q : e->path, what);
                        return *reason ? 0 : -ENOMEM;
                }
        }
        return 1;
}

/* Write one blob to a new temp file (or symlink) in dirfd; *ret_tmp its
 * name, *ret_fd the open file, not synced yet (-1 for a symlink). */
static int wo_write_temp(const git_ctx *g, git_cat **cat, int dirfd, const char *name, const wo_entry *e, char **ret_tmp,
                         int *ret_fd) {
        static unsigned counter;
        for (unsigned tries = 0; tries < 100; tries++) {
                _cleanup_free_ char *tmp = wo_temp_name_make(name, counter++);
                if (!tmp) return -ENOMEM;
                if (e->mode == 0120000) {
                        _cleanup_free_ char *target = NULL;
                        size_t len = 0;
                        int r = git_blob_read(g, cat, e->oid, &target, &len);
                        if (r < 0) return r;
                        if (len == 0 || memchr(target, 0, len)) return -EINVAL;
                        if (symlinkat(target, dirfd, tmp) < 0) {
                                if (errno == EEXIST) continue;
                                return -errno;
                        }
                        *ret_tmp = TAKE_PTR(tmp);
                        *ret_fd = -1;
                        return 0;
                }
                /* An unnamed file (O_TMPFILE) where the filesystem has them:
                 * it gets its temp name only just before its rename
                 * (wo_batch_flush), so a write-out killed while it writes and
                 * syncs a batch leaves nothing behind in the user's tree. */
                mode_t mode = e->mode == 0100755 ? 0777 : 0666;
                bool unnamed = true;
                _cleanup_close_ int fd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
                if (fd < 0) {
                        unnamed = false;
                        fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
                }
                if (fd < 0) {
                        if (errno == EEXIST) continue;
                        return -errno;
                }
                int r = *cat ? 0 : git_cat_open(g->env, cat, NULL);
                if (r >= 0) r = git_cat_blob_to_fd(*cat, e->oid, fd, 0, NULL);
                if (r == -ENOENT || r == -EINVAL) r = -EIO;
                if (r < 0) {
                        if (!unnamed) (void) unlinkat(dirfd, tmp, 0);
                        return r;
                }
                *ret_tmp = unnamed ? NULL : TAKE_PTR(tmp);
                *ret_fd = TAKE_FD(fd);
                return 0;
        }
        return -EEXIST;
}

/* Temp files written in one directory and not yet renamed into place: each
 * is fsynced, then each renamed, a batch at a time. One fsync after another
 * costs a journal commit for the first and little for the rest (their
 * metadata went in the same commit), where fsync-then-rename per file paid
 * a commit per file (about 1 ms: seconds for 10,000 files). */
#define WO_BATCH_FILES 256

#define WO_BATCH_BYTES ((uint64_t) 64 << 20)

typedef struct wo_batch {
        size_t n;
        uint64_t bytes;
        struct {
                char *tmp;
                int fd;     /* -1: a symlink (nothing to sync) */
                size_t idx; /* its wo_list entry */
        } e[WO_BATCH_FILES];
} wo_batch;

/* Give the synced unnamed file fd (O_TMPFILE) its temp name in dirfd,
 * ".<name>.tf-<pid>-<n>" as wo_write_temp names them (linkat through
 * /proc/self/fd: AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH); *ret_tmp the
 * name. */
static int wo_link_unnamed(int dirfd, int fd, const char *name, char **ret_tmp) {
        static unsigned counter = 1u << 31; /* apart from wo_write_temp's; EEXIST retries */
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        for (unsigned tries = 0; tries < 100; tries++) {
                _cleanup_free_ char *tmp = wo_temp_name_make(name, counter++);
                if (!tmp) return -ENOMEM;
                if (linkat(AT_FDCWD, proc, dirfd, tmp, AT_SYMLINK_FOLLOW) < 0) {
                        if (errno == EEXIST) continue;
                        return -errno;
                }
                *ret_tmp = TAKE_PTR(tmp);
                return 0;
        }
        return -EEXIST;
}

/* Drop every temp of the batch (after a failure). */
static void wo_batch_discard(wo_batch *b, int dirfd) {
        for (size_t i = 0; i < b->n; i++) {
                safe_close(b->e[i].fd);
                if (dirfd >= 0 && b->e[i].tmp) (void) unlinkat(dirfd, b->e[i].tmp, 0);
                free(b->e[i].tmp);
        }
        b->n = 0;
        b->bytes = 0;
}

/* Sync every temp of the batch, then rename each over its target. On
 * failure *ret_idx names the entry and the batch's remaining temps are gone. */
static int wo_batch_flush(wo_batch *b, int dirfd, const wo_list *l, size_t *ret_idx) {
        for (size_t i = 0; i < b->n; i++) {
                if (b->e[i].fd >= 0 && fsync(b->e[i].fd) < 0) {
                        int r = -errno;
                        *ret_idx = b->e[i].idx;
                        wo_batch_discard(b, dirfd);
                        return r;
                }
                /* an unnamed temp keeps its fd until it is linked */
                if (b->e[i].tmp) b->e[i].fd = safe_close(b->e[i].fd);
        }
        for (size_t i = 0; i < b->n; i++) {
                const char *path = l->e[b->e[i].idx].path, *sl = strrchr(path, '/');
                int r = b->e[i].tmp ? 0 : wo_link_unnamed(dirfd, b->e[i].fd, sl ? sl + 1 : path, &b->e[i].tmp);
                b->e[i].fd = safe_close(b->e[i].fd);
                if (r >= 0 && renameat(dirfd, b->e[i].tmp, dirfd, sl ? sl + 1 : path) < 0) r = -errno;
                if (r < 0) {
                        *ret_idx = b->e[i].idx;
                        /* the renamed ones are in place; the rest go */
                        for (size_t k = 0; k < i; k++) {
                                free(b->e[k].tmp);
                                b->e[k].tmp = NULL;
                        }
                        memmove(b->e, b->e + i, (b->n - i) * sizeof b->e[0]);
                        b->n -= i;
                        wo_batch_discard(b, dirfd);
                        return r;
                }
                free(b->e[i].tmp);
                b->e[i].tmp = NULL;
        }
        b->n = 0;
        b->bytes = 0;
        return 0;
}

static void wo_batch_freep(wo_batch **b) {
        if (!*b) return;
        wo_batch_discard(*b, -1);
        free(*b);
}

/* Remove the directories above path (beneath top) that are empty, deepest
 * first, as git apply does after a deletion; stops at the first that is
 * neither empty nor gone (a killed accept may have removed the deeper ones
 * already: the walk goes on above them). */
static void wo_prune_parents(int top, const char *path) {
        _cleanup_free_ char *dir = strdup(path);
        if (!dir) return;
        for (char *sl; (sl = strrchr(dir, '/'));) {
                *sl = 0;
                const char *name;
                int pfd = wo_open_parent(top, dir, false, &name);
                if (pfd == -ENOENT) continue; /* its parent is gone too */
                if (pfd < 0) break;
                int r = unlinkat(pfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
                if (r == 0) (void) fsync(pfd);
                safe_close(pfd);
                if (r < 0 && r != -ENOENT) break;
        }
}

/* Delete path and the directories that leaves empty. */
static int wo_delete(int top, const char *path) {
        const char *name;
        int dfd = wo_open_parent(top, path, false, &name);
        if (dfd == -ENOENT) return 0;
        if (dfd < 0) return dfd;
        int r = unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
        if (r >= 0 && fsync(dfd) < 0) r = -errno;
        safe_close(dfd);
        if (r < 0) return r;
        wo_prune_parents(top, path);
        return 0;
}

/* For a path of the changeset that the live tree does not have: its empty
 * parent directories go. An accept killed between a deletion and the pruning
 * of the directories it emptied leaves them; its re-run no longer sees the
 * deletion (the file is gone from ours), and would otherwise end with empty
 * directories an uninterrupted accept does not leave. Every write-out does
 * it, so a first run and a re-run end alike. */
static void wo_prune_absent(int top, char *const *paths) {
        for (size_t i = 0; paths && paths[i]; i++) {
                const char *name;
                int dfd = wo_open_parent(top, paths[i], false, &name);
                if (dfd < 0 && dfd != -ENOENT) continue;
                struct stat st;
                /* a missing parent: absent too (a killed accept pruned part
                 * of the way up) */
                bool absent = dfd == -ENOENT || (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
                safe_close(dfd);
                if (absent) wo_prune_parents(top, paths[i]);
        }
}

/* Sweep our dead temp files from the directories of paths (those that exist). */
static void wo_sweep(int top, char *const *paths, const wo_list *l) {
        _cleanup_strv_free_ char **seen = NULL;
        size_t n_paths = strv_length((char **) paths);
        for (size_t i = 0; i < n_paths + l->n; i++) {
                const char *p = i < n_paths ? paths[i] : l->e[i - n_paths].path;
                const char *sl = strrchr(p, '/');
                _cleanup_free_ char *dir = sl ? strndup(p, (size_t) (sl - p)) : strdup("");
                if (!dir || strv_contains(seen, dir)) continue;
                if (strv_push(&seen, dir) < 0) return;
                int fd = *dir ? cs_open_beneath(top, dir, O_RDONLY | O_DIRECTORY) : fcntl(top, F_DUPFD_CLOEXEC, 3);
                if (fd < 0) continue;
                wo_sweep_dir(fd);
                safe_close(fd);
        }
}

int write_out(const git_ctx *g, const char *tree_o, const char *tree_m, char *const *cs_paths, char **reason) {
        _cleanup_free_ char *err = NULL;
        _cleanup_(wo_list_done) wo_list l = {};
        run_result rr;
        char *dt_args[] = {(char *) "diff-tree", (char *) "-r", (char *) "-z", (char *) "--no-renames", (char *) tree_o,
                           (char *) tree_m, NULL};
        int r = git_ok(g, "/", LIST_MAX, &rr, &err, "diff-tree --raw", dt_args);
        if (r < 0) {
                *reason = TAKE_PTR(err);
                return r;
        }
        r = wo_parse(rr.out, rr.out + rr.out_len, &l);
        run_result_done(&rr);
        if (r < 0) {
                *reason = strdup_printf("cannot read git diff-tree's output: %s", strerror(-r));
                return r;
        }
        _cleanup_close_ int top = open(g->work_tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (top < 0) {
                r = -errno;
                *reason = strdup_printf("cannot open %s: %s", g->work_tree, strerror(errno));
                return r;
        }
        if ((r = wo_check(top, &l, reason)) <= 0) return r;
        wo_sweep(top, cs_paths, &l);
        /* deletions first (deepest first), so a file can replace a directory and back */
        for (size_t i = l.n; i-- > 0;) {
                if (l.e[i].mode != 0) continue;
                if ((r = wo_delete(top, l.e[i].path)) < 0) {
                        _cleanup_free_ char *q = cs_quote_path(l.e[i].path);
                        *reason = strdup_printf("cannot delete %s: %s", q ? q : l.e[i].path, strerror(-r));
                        return r;
                }
        }
        wo_prune_absent(top, cs_paths);
        _cleanup_free_ char *cur_dir = NULL;
        _cleanup_close_ int cur_fd = -1;
        _cleanup_(git_cat_closep) git_cat *cat = NULL;
        _cleanup_(wo_batch_freep) wo_batch *batch = calloc(1, sizeof *batch);
        if (!batch) return -ENOMEM;
        size_t bad = 0;
        for (size_t i = 0; i < l.n; i++) {
                const wo_entry *e = &l.e[i];
                if (e->mode == 0) continue;
                const char *sl = strrchr(e->path, '/');
                size_t dlen = sl ? (size_t) (sl - e->path) : 0;
                const char *name = sl ? sl + 1 : e->path;
                bad = i;
                if (!cur_dir || strlen(cur_dir) != dlen || strncmp(cur_dir, e->path, dlen) != 0) {
                        if (cur_fd >= 0 && (r = wo_batch_flush(batch, cur_fd, &l, &bad)) >= 0 && fsync(cur_fd) < 0) {
                                r = -errno;
                                bad = i;
                        }
                        cur_fd = safe_close(cur_fd);
                        free(cur_dir);
                        cur_dir = strndup(e->path, dlen);
                        if (!cur_dir) return -ENOMEM;
                        const char *n2;
                        if (r >= 0) r = cur_fd = wo_open_parent(top, e->path, true, &n2);
                }
                _cleanup_free_ char *tmp = NULL;
                int tmp_fd = -1;
                if (r >= 0) r = wo_write_temp(g, &cat, cur_fd, name, e, &tmp, &tmp_fd);
                if (r >= 0) {
                        struct stat st;
                        batch->e[batch->n].tmp = TAKE_PTR(tmp);
                        batch->e[batch->n].fd = tmp_fd;
                        batch->e[batch->n].idx = i;
                        batch->n++;
                        if (tmp_fd >= 0 && fstat(tmp_fd, &st) == 0) batch->bytes += (uint64_t) st.st_size;
                        if (batch->n == WO_BATCH_FILES || batch->bytes >= WO_BATCH_BYTES)
                                r = wo_batch_flush(batch, cur_fd, &l, &bad);
                }
                if (r < 0) {
                        wo_batch_discard(batch, cur_fd);
                        _cleanup_free_ char *q = cs_quote_path(l.e[bad].path);
                        *reason = strdup_printf("cannot write %s: %s", q ? q : l.e[bad].path, strerror(-r));
                        return r;
                }
        }
        if (cur_fd >= 0 && (r = wo_batch_flush(batch, cur_fd, &l, &bad)) < 0) {
                _cleanup_free_ char *q = cs_quote_path(l.e[bad].path);
                *reason = strdup_printf("cannot write %s: %s", q ? q : l.e[bad].path, strerror(-r));
                return r;
        }
        if (cur_fd >= 0 && fsync(cur_fd) < 0) {
                r = -errno;
                *reason = strdup_printf("cannot sync %s/%s: %s", g->work_tree, strempty(cur_dir), strerror(errno));
                return r;
        }
        return 1;
}

void write_out_prune(const git_ctx *g, char *const *cs_paths) {
        _cleanup_close_ int top = open(g->work_tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (top >= 0) wo_prune_absent(top, cs_paths);
}
