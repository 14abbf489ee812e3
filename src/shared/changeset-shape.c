/* Repository shapes: directories git would take for a git directory
 * (changeset-shape.h).
 *
 * git's own path protections catch a ".git" in any spelling, but a
 * directory that merely holds HEAD with refs (or with commondir) is a
 * repository to git's discovery too, whatever its name: the worker could
 * plant one that the user's next git command in that directory would run
 * with (its config, its hooks). Those are ours to find: for extraction the
 * parent looks at the directories above every changed path, counting the
 * pieces of the after tree and what the host has there, and reverts the
 * changed paths inside any such directory in the index before writing the
 * after tree again; for apply the patch's paths are counted with what the
 * live tree holds. */
#include "changeset-shape.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "changeset-numstat.h"
#include "git-output.h"
#include "changeset-paths.h"
#include "macro.h"
#include "path-util.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"

enum {
        PIECE_HEAD = 1u << 0,
        PIECE_OBJECTS = 1u << 1,
        PIECE_REFS = 1u << 2,
        PIECE_COMMONDIR = 1u << 3,
};

/* GIT_DIR discovery (setup.c is_git_directory()) takes a directory that has
 * HEAD, plus objects and refs (or a commondir file that names where they
 * are). objects is not asked for when GIT_OBJECT_DIRECTORY is set in the
 * user's environment, so HEAD with refs is enough here. Entries of any type
 * count (an executable file passes its access(X_OK) test, a symlink may point
 * anywhere). */
static bool pieces_make_repository(unsigned m) {
        return (m & PIECE_HEAD) && (m & (PIECE_REFS | PIECE_COMMONDIR));
}

/* Which piece an entry name is, compared the way a case-insensitive file
 * system, NTFS (trailing dots and spaces) and HFS+ (code points it ignores,
 * utf8.c next_hfs_char()) would compare it. */
static unsigned piece_of(const char *name) {
        char norm[16];
        size_t n = 0;
        for (const unsigned char *s = (const unsigned char *) name; *s;) {
                if (s[0] == 0xe2 && s[1] == 0x80 && s[2] >= 0x8c && s[2] <= 0x8f) s += 3;        /* U+200C..U+200F */
                else if (s[0] == 0xe2 && s[1] == 0x80 && s[2] >= 0xaa && s[2] <= 0xae) s += 3;   /* U+202A..U+202E */
                else if (s[0] == 0xe2 && s[1] == 0x81 && s[2] >= 0xaa && s[2] <= 0xaf) s += 3;   /* U+206A..U+206F */
                else if (s[0] == 0xef && s[1] == 0xbb && s[2] == 0xbf) s += 3;                   /* U+FEFF */
                else {
                        if (n + 1 >= sizeof norm) return 0;
                        norm[n++] = (char) tolower(*s++);
                }
        }
        while (n > 0 && (norm[n - 1] == '.' || norm[n - 1] == ' ')) n--;
        norm[n] = 0;
        if (streq(norm, "head")) return PIECE_HEAD;
        if (streq(norm, "objects")) return PIECE_OBJECTS;
        if (streq(norm, "refs")) return PIECE_REFS;
        if (streq(norm, "commondir")) return PIECE_COMMONDIR;
        return 0;
}

/* The pieces that directory rel of D holds on the host (or live) file
 * system, untracked and ignored entries included. */
static unsigned host_pieces(int dir_fd, const char *rel) {
        int fd = cs_open_beneath(dir_fd, rel, O_RDONLY | O_DIRECTORY);
        if (fd < 0) return 0;
        DIR *d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return 0;
        }
        unsigned m = 0;
        for (struct dirent *de; (de = readdir(d));) m |= piece_of(de->d_name);
        closedir(d);
        return m;
}

typedef struct dir_mask {
        char *dir; /* "" for D itself, else "a/b" */
        unsigned mask;
} dir_mask;

static int dir_mask_cmp(const void *x, const void *y) {
        return strcmp(((const dir_mask *) x)->dir, ((const dir_mask *) y)->dir);
}

typedef struct dir_masks {
        dir_mask *e;
        size_t n;
} dir_masks;

static void dir_masks_done(dir_masks *l) {
        for (size_t i = 0; i < l->n; i++) free(l->e[i].dir);
        free(l->e);
        memset(l, 0, sizeof *l);
}

static int dir_masks_add(dir_masks *l, const char *dir, size_t len, unsigned mask) {
        dir_mask *n = realloc(l->e, (l->n + 1) * sizeof *l->e);
        if (!n) return -ENOMEM;
        l->e = n;
        if (!(l->e[l->n].dir = strndup(dir, len))) return -ENOMEM;
        l->e[l->n++].mask = mask;
        return 0;
}

/* Sort and merge equal dirs (masks or-ed). */
static void dir_masks_normalize(dir_masks *l) {
        if (l->n == 0) return;
        qsort(l->e, l->n, sizeof *l->e, dir_mask_cmp);
        size_t o = 0;
        for (size_t i = 1; i < l->n; i++) {
                if (streq(l->e[i].dir, l->e[o].dir)) {
                        l->e[o].mask |= l->e[i].mask;
                        free(l->e[i].dir);
                } else
                        l->e[++o] = l->e[i];
        }
        l->n = o + 1;
}

static dir_mask *dir_masks_find(const dir_masks *l, const char *dir) {
        dir_mask key = {.dir = (char *) dir};
        return l->n ? bsearch(&key, l->e, l->n, sizeof *l->e, dir_mask_cmp) : NULL;
}

/* The directories above every changed path: "", "a", "a/b" for "a/b/c". */
static int add_ancestors(dir_masks *l, const char *path) {
        int r = dir_masks_add(l, "", 0, 0);
        for (const char *p = path; r >= 0 && (p = strchr(p, '/')); p++) r = dir_masks_add(l, path, (size_t) (p - path), 0);
        return r;
}

typedef struct changed_entry {
        char *path;
        char old_mode[8];
        char old_oid[72];
        bool added; /* absent from the before tree */
} changed_entry;

/* The pieces among ls-tree's NUL-separated full paths, by parent directory. */
static int collect_pieces(dir_masks *l, const run_result *rr) {
        int r = 0;
        for (char *p = rr->out; r >= 0 && p < rr->out + rr->out_len; p += strlen(p) + 1) {
                const char *slash = strrchr(p, '/');
                unsigned m = piece_of(slash ? slash + 1 : p);
                if (m) r = dir_masks_add(l, p, slash ? (size_t) (slash - p) : 0, m);
        }
        return r;
}

static int collect_pieces_cb(void *userdata, const run_result *rr) {
        return collect_pieces(userdata, rr);
}

int drop_repository_shapes(const git_ctx *g, const char *dir, const char *hooks_rel, const char *before,
                           char *after, size_t after_size, warnings *w, char **reason) {
        run_result rr;
        char *dt_args[] = {(char *) "diff-tree", (char *) "-r", (char *) "-z", (char *) "--no-renames",
                           (char *) before, after, NULL};
        int r = git_ok(g, "/", LIST_MAX, &rr, reason, "diff-tree --raw", dt_args);
        if (r < 0) return r;
        changed_entry *ch = NULL;
        size_t n_ch = 0;
        _cleanup_(dir_masks_done) dir_masks cand = {}, after_pieces = {};
        GitRawRecord rec;
        for (const char *p = rr.out; r >= 0 && (r = git_raw_next(&p, rr.out + rr.out_len, &rec)) != 0;) {
                if (r < 0) {
                        r = -EIO;
                        break;
                }
                changed_entry *n = realloc(ch, (n_ch + 1) * sizeof *ch);
                if (!n) {
                        r = -ENOMEM;
                        break;
                }
                ch = n;
                changed_entry *e = &ch[n_ch];
                memset(e, 0, sizeof *e);
                if (!(e->path = strdup(rec.path))) {
                        r = -ENOMEM;
                        break;
                }
                snprintf(e->old_mode, sizeof e->old_mode, "%06o", rec.old_mode);
                snprintf(e->old_oid, sizeof e->old_oid, "%s", rec.old_oid);
                e->added = rec.old_mode == 0;
                n_ch++;
                r = add_ancestors(&cand, rec.path);
        }
        run_result_done(&rr);
        _cleanup_strv_free_ char **removals = NULL, **restores = NULL;
        bool dropped = false;
        if (r >= 0 && n_ch > 0) {
                dir_masks_normalize(&cand);
                /* the pieces in the after tree, in the candidate directories only
                 * (their entries: the top's, then "<dir>/" of each other one) */
                _cleanup_strv_free_ char **dirs = NULL;
                for (size_t i = 0; r >= 0 && i < cand.n; i++)
                        if (*cand.e[i].dir) r = strv_pushf(&dirs, "%s/", cand.e[i].dir);
                char *top_args[] = {(char *) "ls-tree", (char *) "-z", (char *) "--name-only", (char *) "--full-tree",
                                    after, NULL};
                /* -t: a directory that is also on the way to a deeper one is still listed */
                char *sub_prefix[] = {(char *) "--literal-pathspecs", (char *) "ls-tree", (char *) "-t", (char *) "-z",
                                      (char *) "--name-only", (char *) "--full-tree", after, NULL};
                if (r >= 0) r = git_ok(g, "/", LIST_MAX, &rr, reason, "ls-tree", top_args);
                if (r >= 0) {
                        r = collect_pieces(&after_pieces, &rr);
                        run_result_done(&rr);
                }
                if (r >= 0 && dirs)
                        r = git_batched(g, "/", LIST_MAX, "ls-tree", sub_prefix, dirs, false, 1, collect_pieces_cb,
                                        &after_pieces, reason);
                if (r >= 0) dir_masks_normalize(&after_pieces);
                _cleanup_close_ int dfd = r >= 0 ? open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
                if (r >= 0 && dfd < 0) r = -errno;
                for (size_t i = 0; r >= 0 && i < cand.n; i++) {
                        const dir_mask *am = dir_masks_find(&after_pieces, cand.e[i].dir);
                        cand.e[i].mask = (am ? am->mask : 0) | host_pieces(dfd, cand.e[i].dir);
                }
                for (size_t i = 0; r >= 0 && i < n_ch; i++) {
                        /* the outermost repository-shaped directory above it */
                        const dir_mask *dm = dir_masks_find(&cand, "");
                        const char *repo = dm && pieces_make_repository(dm->mask) ? dm->dir : NULL;
                        for (const char *sl = ch[i].path; r >= 0 && !repo && (sl = strchr(sl, '/')); sl++) {
                                _cleanup_free_ char *anc = strndup(ch[i].path, (size_t) (sl - ch[i].path));
                                if (!anc) r = -ENOMEM;
                                else if ((dm = dir_masks_find(&cand, anc)) && pieces_make_repository(dm->mask))
                                        repo = dm->dir;
                        }
                        bool hook = !repo && hooks_rel &&
                                    (!*hooks_rel || path_is_at_or_below(ch[i].path, hooks_rel));
                        if (r < 0 || (!repo && !hook)) continue;
                        _cleanup_free_ char *qdir = hook ? cs_quote_path(*hooks_rel ? hooks_rel : ".")
                                                    : *repo ? cs_quote_path(repo) : strdup("the target directory");
                        _cleanup_free_ char *why =
                                !qdir ? NULL
                                : hook ? strdup_printf("it is a hook: this repository's core.hooksPath is %s, so git "
                                                       "would run it on your next commit",
                                                       qdir)
                                       : strdup_printf("git would take %s%s for a repository (it holds "
                                                       "HEAD with refs, or with commondir)",
                                                       qdir, *repo ? "/" : "");
                        r = why ? warn_path(w, ch[i].path, why) : -ENOMEM;
                        if (r >= 0 && ch[i].added) r = strv_push(&removals, ch[i].path);
                        else if (r >= 0) {
                                r = strv_push(&restores, "--cacheinfo");
                                if (r >= 0) r = strv_pushf(&restores, "%s,%s,%s", ch[i].old_mode, ch[i].old_oid, ch[i].path);
                        }
                        dropped = true;
                }
        }
        for (size_t i = 0; i < n_ch; i++) free(ch[i].path);
        free(ch);
        if (r < 0 || !dropped) return r;
        /* removals first: a restored entry may need the place of a removed one */
        char *rm_prefix[] = {(char *) "update-index", (char *) "--force-remove", NULL};
        char *ci_prefix[] = {(char *) "update-index", (char *) "--add", NULL};
        const char *cwd = dir;
        if (removals)
                r = git_batched(g, cwd, 0, "update-index --force-remove", rm_prefix, removals, false, 1, NULL, NULL, reason);
        if (r >= 0 && restores)
                r = git_batched(g, cwd, 0, "update-index --cacheinfo", ci_prefix, restores, false, 2, NULL, NULL, reason);
        _cleanup_free_ char *tree = NULL;
        if (r >= 0) r = git_write_tree(g, dir, true, &tree, reason);
        if (r < 0) return r;
        if (strlen(tree) >= after_size) return -EIO;
        strcpy(after, tree);
        return 1;
}

int patch_plants_repository(const git_ctx *g, const char *patch, char **reason) {
        _cleanup_free_ char *err = NULL;
        _cleanup_strv_free_ char **paths = NULL;
        int r = patch_paths(g, g->work_tree, patch, &paths, &err);
        if (r < 0) {
                *reason = TAKE_PTR(err);
                return r;
        }
        _cleanup_(dir_masks_done) dir_masks dirs = {};
        for (size_t i = 0; r >= 0 && paths && paths[i]; i++) {
                const char *p = paths[i], *start = p;
                for (const char *sl;; start = sl + 1) {
                        sl = strchr(start, '/');
                        _cleanup_free_ char *comp = sl ? strndup(start, (size_t) (sl - start)) : strdup(start);
                        if (!comp) return -ENOMEM;
                        r = dir_masks_add(&dirs, p, start > p ? (size_t) (start - p - 1) : 0, piece_of(comp));
                        if (r < 0 || !sl) break;
                }
        }
        if (r < 0) return r;
        dir_masks_normalize(&dirs);
        _cleanup_close_ int dfd = open(g->work_tree, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) return -errno;
        for (size_t i = 0; i < dirs.n; i++) dirs.e[i].mask |= host_pieces(dfd, dirs.e[i].dir);
        for (size_t i = 0; i < dirs.n; i++) {
                if (!pieces_make_repository(dirs.e[i].mask)) continue;
                const char *d = dirs.e[i].dir;
                _cleanup_free_ char *q = *d ? cs_quote_path(d) : strdup("the target directory");
                *reason = q ? strdup_printf("the changeset would leave %s%s looking like a git repository to git (HEAD "
                                            "with refs, or with commondir) with its changes inside; "
                                            "not applied",
                                            q, *d ? "/" : "")
                         : NULL;
                return *reason ? 1 : -ENOMEM;
        }
        return 0;
}
