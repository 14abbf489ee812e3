/* A view of D, indexed by a child in a user + mount namespace
 * (changeset-view.h).
 *
 * Nested repositories: `git add` records a directory that contains a .git as
 * a gitlink and never looks inside, so edits in a submodule checkout, in a
 * repository the worker cloned, or in repositories below a non-git D would be
 * lost (and `git apply` cannot apply gitlinks to a work tree). In our private
 * mount namespace we hide each nested .git under an empty bind mount, so git
 * sees a plain directory; the changeset then carries the files themselves.
 *
 * Paths git refuses: git's own path protections stay on
 * (core.protectNTFS/protectHFS in the private config), so git is the judge
 * of which names could stand for .git. `add --ignore-errors` skips what it
 * refuses, and what is still untracked-and-not-ignored after it (or tracked
 * and not updated) is what git refused, in that view; comparing the two
 * views' lists (stat data) warns only about paths the worker touched. A .git
 * the worker created is found in the overlay's upper dir (git itself never
 * lists one). */
#include "changeset-view.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "changeset-repo.h"
#include "macro.h"
#include "overlay.h"
#include "process-util.h"
#include "fileio.h"
#include "signal-util.h"
#include "string-util.h"
#include "strv.h"

/* Nested repositories inside nested repositories... give up after this many rounds. */
#define FLATTEN_ROUNDS_MAX 64

void refused_list_done(refused_list *l) {
        for (size_t i = 0; i < l->n; i++) free(l->e[i].path);
        free(l->e);
        free(l->add_err);
        memset(l, 0, sizeof *l);
}

static const refused_path *refused_find(const refused_list *l, const char *path) {
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->e[i].path, path)) return &l->e[i];
        return NULL;
}

int hiders_create(const char *scratch, char **ret_dir, char **ret_file, char **reason) {
        _cleanup_free_ char *d = cs_path_join(scratch, "empty-dir"), *f = cs_path_join(scratch, "empty-file");
        if (!d || !f) return -ENOMEM;
        int r = mkdir(d, 0500) < 0 ? -errno : cs_write_small_file(f, "", 0);
        if (r < 0) {
                *reason = strdup_printf("cannot prepare %s: %s", scratch, strerror(-r));
                return r;
        }
        *ret_dir = TAKE_PTR(d);
        *ret_file = TAKE_PTR(f);
        return 0;
}

int hide_nested_git(view_child *c, const char *rel, char **reason) {
        _cleanup_free_ char *relgit = strdup_printf("%s%s.git", rel, (*rel && rel[strlen(rel) - 1] != '/') ? "/" : "");
        if (!relgit) return -ENOMEM;
        if (strv_contains(c->hidden, relgit)) return 0;
        _cleanup_close_ int dfd = open(c->a->directory, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) return -errno;
        _cleanup_close_ int fd = cs_open_beneath(dfd, relgit, O_PATH);
        if (fd < 0) {
                if (fd == -ENOENT || fd == -ENOTDIR) return 0;
                *reason = strdup_printf("cannot open nested repository %s: %s", relgit, strerror(-fd));
                return fd;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) return -errno;
        char target[64];
        snprintf(target, sizeof target, "/proc/self/fd/%d", fd);
        if (mount(S_ISDIR(st.st_mode) ? c->empty_dir : c->empty_file, target, NULL, MS_BIND, NULL) < 0) {
                int r = -errno;
                *reason = strdup_printf("cannot hide nested repository %s: %s", relgit, strerror(errno));
                return r;
        }
        int r = strv_consume(&c->hidden, TAKE_PTR(relgit));
        return r < 0 ? r : 1;
}

/* Gitlink entries (mode 160000) of the index, as paths. */
static int index_gitlinks(view_child *c, char ***ret, char **reason) {
        char *args[] = {(char *) "ls-files", (char *) "-s", (char *) "-z", NULL};
        run_result rr;
        int r = git_ok(c->g, c->a->directory, LIST_MAX, &rr, reason, "ls-files -s", args);
        if (r < 0) return r;
        _cleanup_strv_free_ char **l = NULL;
        for (char *p = rr.out; p < rr.out + rr.out_len; p += strlen(p) + 1) {
                char *tab = strchr(p, '\t');
                if (tab && startswith(p, "160000 ") && (r = strv_push(&l, tab + 1)) < 0) break;
        }
        run_result_done(&rr);
        if (r < 0) return r;
        *ret = TAKE_PTR(l);
        return 0;
}

static int index_force_remove(view_child *c, char **paths, char **reason) {
        _cleanup_strv_free_ char **args = NULL;
        int r = strv_push(&args, "update-index");
        if (r >= 0) r = strv_push(&args, "--force-remove");
        if (r >= 0) r = strv_push(&args, "--");
        for (size_t i = 0; r >= 0 && paths[i]; i++) r = strv_push(&args, paths[i]);
        if (r < 0) return r;
        run_result rr;
        r = git_ok(c->g, c->a->directory, 0, &rr, reason, "update-index --force-remove", args);
        if (r >= 0) run_result_done(&rr);
        return r;
}

/* git's reason for refusing path, from the stderr of `add --ignore-errors`
 * (which names it in quotes, as is). */
static char *refused_reason(const char *add_err, const char *path) {
        _cleanup_free_ char *invalid = strdup_printf("invalid path '%s'\n", path);
        _cleanup_free_ char *quoted = strdup_printf("'%s'", path);
        if (!invalid || !quoted) return NULL;
        if (add_err && strstr(add_err, invalid))
                return strdup("git refuses this path (it names .git or .gitmodules in a spelling that NTFS, HFS+ "
                              "or a case-insensitive file system reads as one)");
        /* "error: <path>: can only add regular files, ..." or "... '<path>' ..." */
        _cleanup_free_ char *lead = strdup_printf("error: %s: ", path);
        if (!lead) return NULL;
        const char *hit = NULL;
        if (add_err && startswith(add_err, lead)) hit = add_err;
        else if (add_err) {
                _cleanup_free_ char *nl_lead = strdup_printf("\n%s", lead);
                if (!nl_lead) return NULL;
                hit = strstr(add_err, nl_lead);
                if (hit) hit++;
        }
        if (!hit && add_err) hit = strstr(add_err, quoted);
        if (hit) {
                const char *start = hit, *end = strchr(hit, '\n');
                while (start > add_err && start[-1] != '\n') start--;
                if (!end) end = hit + strlen(hit);
                if (startswith(start, "error: ")) start += strlen("error: ");
                _cleanup_free_ char *line = strndup(start, (size_t) (end - start));
                if (!line) return NULL;
                /* the line names the path raw; keep the warning printable */
                _cleanup_free_ char *clean = cs_quote_path(line);
                return clean ? strdup_printf("git could not record it: %s", clean) : NULL;
        }
        return strdup("git could not record it");
}

/* After the last `add --ignore-errors` of a view: what git left out, i.e.
 * the untracked files that are still not ignored and the tracked ones whose
 * index entry could not be updated. */
static int refused_collect(view_child *c, const char *add_err, refused_list *out, char **reason) {
        static const char *const what[] = {"ls-files -o", "diff-files"};
        char *ls_args[] = {(char *) "ls-files", (char *) "-o", (char *) "-z", (char *) "--exclude-standard", NULL};
        char *df_args[] = {(char *) "diff-files", (char *) "-z", (char *) "--name-only", (char *) "--no-ext-diff", NULL};
        char **argvs[] = {ls_args, df_args};
        if (!add_err) return 0; /* git add exited 0: it refused nothing */
        free(out->add_err);
        if (!(out->add_err = strdup(add_err))) return -ENOMEM;
        _cleanup_close_ int dfd = open(c->a->directory, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) return -errno;
        for (size_t k = 0; k < ELEMENTSOF(argvs); k++) {
                run_result rr;
                int r = git_ok(c->g, c->a->directory, LIST_MAX, &rr, reason, what[k], argvs[k]);
                if (r < 0) return r;
                for (char *p = rr.out; r >= 0 && p < rr.out + rr.out_len; p += strlen(p) + 1) {
                        if (!*p) continue;
                        if (out->n == out->allocated) {
                                size_t na = out->allocated ? 2 * out->allocated : 16;
                                refused_path *n = reallocarray(out->e, na, sizeof *out->e);
                                if (!n) {
                                        r = -ENOMEM;
                                        break;
                                }
                                out->e = n;
                                out->allocated = na;
                        }
                        refused_path *e = &out->e[out->n];
                        memset(e, 0, sizeof *e);
                        if (!(e->path = strdup(p))) {
                                r = -ENOMEM;
                                break;
                        }
                        e->exists = fstatat(dfd, p, &e->st, AT_SYMLINK_NOFOLLOW) >= 0;
                        out->n++;
                }
                run_result_done(&rr);
                if (r < 0) return r;
        }
        return 0;
}

int refused_warn_one(warnings *w, const refused_list *l, const char *path, const char *prefix) {
        if (w->n_lines >= CHANGESET_WARNINGS_MAX) return warn_path(w, path, "");
        _cleanup_free_ char *reason = refused_reason(l->add_err, path);
        _cleanup_free_ char *why = reason ? strdup_printf("%s%s", prefix, reason) : NULL;
        return why ? warn_path(w, path, why) : -ENOMEM;
}

int refused_warn(view_child *c, const refused_list *host, const refused_list *merged) {
        int r = 0;
        for (size_t i = 0; r >= 0 && i < merged->n; i++) {
                const refused_path *m = &merged->e[i], *h = refused_find(host, m->path);
                if (h && h->exists == m->exists &&
                    (!m->exists || (h->st.st_mode == m->st.st_mode && h->st.st_size == m->st.st_size &&
                                    h->st.st_mtim.tv_sec == m->st.st_mtim.tv_sec &&
                                    h->st.st_mtim.tv_nsec == m->st.st_mtim.tv_nsec &&
                                    h->st.st_ctim.tv_sec == m->st.st_ctim.tv_sec &&
                                    h->st.st_ctim.tv_nsec == m->st.st_ctim.tv_nsec)))
                        continue;
                r = refused_warn_one(&c->w, merged, m->path, "");
        }
        /* refused in the host view and gone now: the worker deleted it */
        _cleanup_close_ int dfd = open(c->a->directory, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) return r < 0 ? r : -errno;
        for (size_t i = 0; r >= 0 && i < host->n; i++) {
                const refused_path *h = &host->e[i];
                struct stat st;
                if (refused_find(merged, h->path) || fstatat(dfd, h->path, &st, AT_SYMLINK_NOFOLLOW) >= 0) continue;
                r = refused_warn_one(&c->w, host, h->path, "its deletion is not carried: ");
        }
        return r;
}

/* Snapshot: tracked files now larger than c->file_max (a dirty file made
 * huge: `truncate -s 8G`) keep their index version in the base instead of
 * being hashed before the worker starts; a changeset never carries them
 * anyway. They are marked assume-unchanged in the private index, so
 * `add -A` does not read them. One lstat per tracked file, as `git status`. */
static int keep_large_tracked(view_child *c, char **reason) {
        run_result rr;
        char *ls_args[] = {(char *) "ls-files", (char *) "-z", (char *) "--cached", NULL};
        int r = git_ok(c->g, c->a->directory, LIST_MAX, &rr, reason, "ls-files --cached", ls_args);
        if (r < 0) return r;
        _cleanup_strv_free_ char **large = NULL;
        _cleanup_close_ int dfd = open(c->a->directory, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) r = -errno;
        for (char *p = rr.out; r >= 0 && p < rr.out + rr.out_len; p += strlen(p) + 1) {
                struct stat st;
                if (*p && fstatat(dfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
                    (uint64_t) st.st_size > c->file_max && (!large || !strv_contains(large, p)))
                        r = strv_push(&large, p);
        }
        run_result_done(&rr);
        if (r < 0 || !large) return r;
        char *prefix[] = {(char *) "update-index", (char *) "--assume-unchanged", NULL};
        return git_batched(c->g, c->a->directory, 0, "update-index --assume-unchanged", prefix, large, false, 1, NULL,
                           NULL, reason);
}

int flatten_gitlinks(view_child *c, char **links, char ***tried, char **reason) {
        int r;
        for (size_t i = 0; links[i]; i++) {
                if (strv_contains(*tried, links[i])) {
                        *reason = strdup_printf("cannot record the contents of nested repository %s", links[i]);
                        return -ENOTSUP;
                }
                if ((r = strv_push(tried, links[i])) < 0) return r;
                if ((r = hide_nested_git(c, links[i], reason)) < 0) return r;
        }
        return index_force_remove(c, links, reason);
}

int add_all_flattened(view_child *c, const char *view, char **reason) {
        _cleanup_strv_free_ char **tried_gitlinks = NULL;
        if (c->file_max) {
                int r = keep_large_tracked(c, reason);
                if (r < 0) return r;
        }
        for (unsigned round = 0; round < FLATTEN_ROUNDS_MAX; round++) {
                /* Untracked nested repositories are listed as "dir/". */
                char *ls_args[] = {(char *) "ls-files", (char *) "-o", (char *) "-z", (char *) "--exclude-standard", NULL};
                run_result rr;
                int r = git_ok(c->g, c->a->directory, LIST_MAX, &rr, reason, "ls-files -o", ls_args);
                if (r < 0) return r;
                int hidden = 0;
                _cleanup_close_ int dfd = c->file_max ? open(c->a->directory, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
                _cleanup_free_ char *exclude_path = c->file_max ? cs_path_join(c->g->git_dir, "info/exclude") : NULL;
                for (char *p = rr.out; p < rr.out + rr.out_len && r >= 0; p += strlen(p) + 1) {
                        size_t n = strlen(p);
                        struct stat st;
                        if (n > 0 && p[n - 1] != '/' && dfd >= 0 && exclude_path &&
                            fstatat(dfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
                            (uint64_t) st.st_size > c->file_max) {
                                /* not hashed into the base: a changeset never carries it anyway */
                                _cleanup_free_ char *pat = exclude_pattern_for(p);
                                if (pat) r = cs_append_file(exclude_path, pat, strlen(pat));
                                continue;
                        }
                        if (n == 0 || p[n - 1] != '/') continue;
                        r = hide_nested_git(c, p, reason);
                        if (r > 0) hidden++;
                }
                run_result_done(&rr);
                if (r < 0) return r;
                if (hidden > 0) continue;

                char *add_args[] = {(char *) "add", (char *) "-A", (char *) "--ignore-errors",
                                    (char *) "--no-warn-embedded-repo", NULL};
                _cleanup_free_ char *what = strdup_printf("add -A (%s)", view), *add_err = NULL;
                if (!what) return -ENOMEM;
                if ((r = git_add_tolerant(c->g, c->a->directory, add_args, what, &add_err, reason)) < 0) return r;

                _cleanup_strv_free_ char **links = NULL;
                if ((r = index_gitlinks(c, &links, reason)) < 0) return r;
                if (!links) return c->refused ? refused_collect(c, add_err, c->refused, reason) : 0;
                if ((r = flatten_gitlinks(c, links, &tried_gitlinks, reason)) < 0) return r;
        }
        *reason = strdup_printf("nested repositories deeper than %d levels", FLATTEN_ROUNDS_MAX);
        return -ELOOP;
}

int view_host_tree(view_child *c, char **ret_tree, char **reason) {
        run_result rr;
        int r;
        if (c->base_treeish) {
                _cleanup_free_ char *spec = strdup_printf("%s^{tree}", c->base_treeish);
                if (!spec) return -ENOMEM;
                char *rp_args[] = {(char *) "rev-parse", (char *) "--verify", (char *) "-q", spec, NULL};
                r = run_git_argv(c->g, "/", SMALL_MAX, &rr, rp_args);
                if (r < 0) {
                        *reason = git_failure("rev-parse", r, &rr);
                        return r;
                }
                /* An unreachable base only costs us tracked-but-ignored files:
                 * start from an empty index then. */
                bool ok = rr.exit_code == 0;
                cs_strip_trailing_space(rr.out);
                _cleanup_free_ char *tree = ok ? strdup(rr.out) : NULL;
                run_result_done(&rr);
                if (ok && tree && cs_is_oid(tree)) {
                        /* A base that holds a path git's protections refuse
                         * (committed where they were off) does not read:
                         * start from an empty index then, too. */
                        char *args[] = {(char *) "read-tree", tree, NULL};
                        if ((r = run_git_argv(c->g, c->a->directory, 0, &rr, args)) < 0) {
                                *reason = git_failure("read-tree", r, &rr);
                                return r;
                        }
                        ok = rr.exit_code == 0;
                        run_result_done(&rr);
                }
                if (ok && tree && cs_is_oid(tree)) {
                        _cleanup_strv_free_ char **links = NULL;
                        if ((r = index_gitlinks(c, &links, reason)) < 0) return r;
                        if (links && (r = index_force_remove(c, links, reason)) < 0) return r;
                }
        }
        if ((r = add_all_flattened(c, "host view", reason)) < 0) return r;
        if ((r = git_write_tree(c->g, c->a->directory, false, ret_tree, reason)) < 0) return r;

        /* Pin everything that is ignored in this view. */
        char *ign_args[] = {(char *) "ls-files", (char *) "-z", (char *) "-o", (char *) "-i", (char *) "--exclude-standard",
                            (char *) "--directory", NULL};
        if ((r = git_ok(c->g, c->a->directory, LIST_MAX, &rr, reason, "ls-files --ignored", ign_args)) < 0) return r;
        _cleanup_free_ char *exclude_path = cs_path_join(c->g->git_dir, "info/exclude");
        if (!exclude_path) r = -ENOMEM;
        for (char *p = rr.out; r >= 0 && p < rr.out + rr.out_len; p += strlen(p) + 1) {
                if (!*p) continue;
                _cleanup_free_ char *pat = exclude_pattern_for(p);
                if (pat) r = cs_append_file(exclude_path, pat, strlen(pat));
        }
        run_result_done(&rr);
        if (r < 0 && !*reason) *reason = strdup_printf("cannot write the private exclude file: %s", strerror(-r));
        return r;
}

int view_mount_overlay(const changeset_extract_args *a, char **reason) {
        static const unsigned backoff_ms[] = {100, 300, 900};
        for (size_t attempt = 0;; attempt++) {
                _cleanup_free_ char *merr = NULL;
                int r = overlay_mount(a->directory, a->upper, a->work, a->directory, true, &merr);
                if (r >= 0) return 0;
                if (r != -EBUSY || attempt >= ELEMENTSOF(backoff_ms)) {
                        const char *m = merr ? merr : strerror(-r);
                        if (r == -EBUSY && !strstr(m, "Device or resource busy"))
                                *reason = strdup_printf("%s: Device or resource busy", m);
                        else if (merr)
                                *reason = TAKE_PTR(merr);
                        else
                                *reason = strdup_printf("overlay mount on %s failed: %s", a->directory, strerror(-r));
                        return r;
                }
                struct timespec ts = {.tv_sec = backoff_ms[attempt] / 1000,
                                      .tv_nsec = (long) (backoff_ms[attempt] % 1000) * 1000000L};
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
        }
}

/* Collect below dirfd (upper-dir path rel, "" at the top) every entry named
 * .git that is not a whiteout and that the host view of D does not have. */
static int dotgit_collect(int dirfd, const char *rel, int host_fd, unsigned depth, char ***out) {
        if (depth > DOTGIT_DEPTH_MAX) return 0;
        int fd = openat(dirfd, *rel ? rel : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? 0 : -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }
        int r = 0;
        for (struct dirent *de; r >= 0 && (de = readdir(d));) {
                if (streq(de->d_name, ".") || streq(de->d_name, "..")) continue;
                _cleanup_free_ char *path = *rel ? strdup_printf("%s/%s", rel, de->d_name) : strdup(de->d_name);
                if (!path) {
                        r = -ENOMEM;
                        break;
                }
                struct stat st;
                if (fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
                if (streq(de->d_name, ".git")) {
                        if (S_ISCHR(st.st_mode) && st.st_rdev == 0) continue; /* a whiteout: deleted */
                        int hfd = cs_open_beneath(host_fd, path, O_PATH);
                        if (hfd >= 0) {
                                safe_close(hfd);
                                continue; /* the host has it: not planted */
                        }
                        r = strv_consume(out, TAKE_PTR(path));
                } else if (S_ISDIR(st.st_mode))
                        r = dotgit_collect(dirfd, path, host_fd, depth + 1, out);
        }
        closedir(d);
        return r;
}

int dotgit_warn(view_child *c, char **reason) {
        _cleanup_close_ int ufd = open(c->a->upper, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (ufd < 0) return -errno;
        _cleanup_strv_free_ char **planted = NULL, **ignored = NULL;
        int r = dotgit_collect(ufd, "", c->host_fd, 0, &planted);
        if (r < 0 || !planted) return r;
        char *ci_args[] = {(char *) "-c", (char *) "core.quotePath=false", (char *) "check-ignore", NULL};
        r = git_batched(c->g, c->a->directory, LIST_MAX, "check-ignore", ci_args, planted, true, 1, git_collect_lines,
                        &ignored, reason);
        for (size_t i = 0; r >= 0 && planted[i]; i++)
                if (!strv_contains(ignored, planted[i]))
                        r = warn_path(&c->w, planted[i],
                                      "a .git file or directory makes git take its directory for a repository; "
                                      "git never records one (the files beside it are kept)");
        return r;
}

int view_child_run(const char *name, const char *what, view_child_fn fn, void *userdata, char **ret_reply, size_t *ret_len,
                   char **reason) {
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) < 0) return -errno;
        pid_t pid;
        int r = safe_fork(name, FORK_DEATHSIG_SIGKILL, &pid);
        if (r < 0) {
                safe_close(pfd[0]), safe_close(pfd[1]);
                return r;
        }
        if (r == 0) {
                safe_close(pfd[0]);
                fn(userdata, pfd[1]);
                _exit(1);
        }
        safe_close(pfd[1]);
        _cleanup_free_ char *reply = NULL;
        size_t len = 0;
        r = read_fd(pfd[0], SIZE_MAX - 1, &reply, &len);
        safe_close(pfd[0]);
        if (r < 0) {
                sigkill_wait(pid);
                return r;
        }
        siginfo_t si;
        if ((r = wait_for_terminate(pid, &si)) < 0) return r;
        if (si.si_code != CLD_EXITED || si.si_status != 0 || reply[0] != 'O') {
                if (reply[0] == 'E') *reason = strdup(reply + 1);
                else if (si.si_code != CLD_EXITED)
                        *reason = strdup_printf("%s was killed by %s", what, strnull(signal_to_name(si.si_status)));
                else
                        *reason = strdup_printf("%s failed", what);
                return -EIO;
        }
        *ret_reply = TAKE_PTR(reply);
        if (ret_len) *ret_len = len;
        return 0;
}

_Noreturn void view_child_reply(int out_fd, int r, const char *trees, const warnings *w, const char *err) {
        _cleanup_free_ char *msg = r >= 0 ? strdup_printf("O%s %zu\n", trees, w->total)
                                          : strdup_printf("E%s", err ? err : "out of memory");
        if (msg) (void) loop_write(out_fd, msg, strlen(msg));
        for (size_t i = 0; r >= 0 && w->lines && w->lines[i]; i++)
                (void) loop_write(out_fd, w->lines[i], strlen(w->lines[i]) + 1);
        _exit(r >= 0 ? 0 : 1);
}

int index_copy_keep_mtime(const char *from, const char *to) {
        _cleanup_close_ int in = open(from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (in < 0) return -errno;
        struct stat st;
        if (fstat(in, &st) < 0) return -errno;
        if (!S_ISREG(st.st_mode)) return -EINVAL;
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = read_fd(in, (size_t) 2 << 30, &data, &len);
        if (r < 0) return r;
        _cleanup_close_ int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0) return -errno;
        if ((r = loop_write(out, data, len)) < 0) return r;
        /* git's racy-entry test compares entry mtimes with the index file's */
        struct timespec ts[2] = {st.st_atim, st.st_mtim};
        return futimens(out, ts) < 0 ? -errno : 0;
}
