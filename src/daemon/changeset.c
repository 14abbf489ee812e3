/* Changesets: extract the worker's overlay changes as a binary-safe git patch,
 * apply it to the live tree without ever leaving it half applied, and
 * summarize it (spec sandbox-changeset-env.md §5, DESIGN.md "Deliberate
 * differences", fixes for §11 D7 and D8).
 *
 * How extraction works (changeset_extract)
 * ----------------------------------------
 * Every git command runs against a PRIVATE repository T = <scratch>/git that we
 * create ourselves (HEAD, objects/, refs/, a fixed config, info/attributes,
 * info/exclude), with GIT_DIR=T, GIT_WORK_TREE=D, GIT_INDEX_FILE=<scratch>/index,
 * GIT_CONFIG_NOSYSTEM=1, GIT_CONFIG_GLOBAL=/dev/null and a minimal environment.
 * Git therefore never reads D/.git (which, in the merged view, the worker
 * controls: config with core.fsmonitor, filter drivers, diff.external,
 * textconv, hooks) and no user/system config can name a program either. The
 * only worker-controlled inputs git reads are the work tree's files, its
 * .gitignore files and its .gitattributes; T/info/attributes has the highest
 * attribute precedence and resets every content-converting attribute (text,
 * eol, ident, filter, working-tree-encoding) so blobs are the exact bytes of
 * the files, and resets diff/merge to "unspecified" so no driver is looked up.
 *
 * One forked child enters a new user + mount namespace (overlay.h), so both
 * views are seen with the same identity (file owners map the same way; this
 * keeps index stat data valid between the two views, so only files whose stat
 * data changed are re-hashed in the merged view):
 *   A. host view (no overlay yet), with GIT_ALTERNATE_OBJECT_DIRECTORIES = the
 *      real repository's object store (so blobs already there are not copied):
 *      read-tree <pre_head>[:<prefix>] when it resolves (keeps tracked files
 *      that .gitignore would hide), then `add -A` -> index B = D's working tree
 *      as the host sees it, including pre-existing untracked files and
 *      uncommitted edits; write-tree -> tree_before. Then every path that is
 *      ignored in this view is pinned into T/info/exclude, so a worker that
 *      deletes .gitignore cannot make pre-existing ignored files (node_modules,
 *      .env) appear as "added".
 *   B. mount the overlay (lower D, the task's upper/work) on D, drop the
 *      alternates (in this view D/.git/objects is worker-controlled and we
 *      only need to hash new content into T/objects), `add -A` on the same
 *      index -> the merged view; write-tree --missing-ok -> tree_after.
 * The parent then runs `git diff-tree -p --binary --full-index` of the two
 * trees (with the alternates, host view) and writes the bytes as they are.
 * A commit the worker made is flattened (only working trees are compared) and
 * pre-existing untracked files / dirty edits cancel out (they are in both
 * trees). The same mechanism works for non-git directories (no base tree) and
 * for a subdirectory of a repository (the private work tree is D itself, so
 * patch paths are relative to D).
 *
 * Nested repositories: `git add` records a directory that contains a .git as
 * a gitlink and never looks inside, so edits in a submodule checkout, in a
 * repository the worker cloned, or in repositories below a non-git D would be
 * lost (and `git apply` cannot apply gitlinks to a work tree). In our private
 * mount namespace we hide each nested .git under an empty bind mount, so git
 * sees a plain directory; the changeset then carries the files themselves.
 *
 * Paths left out (issue 5 items 11, 13; changeset.h): git's own path
 * protections stay on (core.protectNTFS/protectHFS in the private config), so
 * git is the judge of which names could stand for .git. `add --ignore-errors`
 * skips what it refuses, and what is still untracked-and-not-ignored after
 * it (or tracked and not updated) is what git refused, in that view; the
 * child compares the two views' lists (stat data) to warn only about paths
 * the worker touched. A .git the worker created is found in the overlay's
 * upper dir (git itself never lists one). Repository shapes (HEAD + refs
 * (+ objects), or HEAD + commondir: setup.c is_git_directory()) are ours to find:
 * the parent looks at the directories above every changed path, counting
 * the pieces of the after tree and what the host has there, and reverts the
 * changed paths inside any such directory in the index before writing the
 * after tree again.
 *
 * Ignore rules: the work tree's .gitignore files, the user's excludes file
 * (core.excludesFile or $XDG_CONFIG_HOME/git/ignore), the repository's
 * info/exclude and, for a subdirectory dispatch, the .gitignore files of the
 * directories between the repository top and D (git would not read those with
 * D as the work tree). Patterns that are anchored to another directory than D
 * (contain a '/' before the end) cannot be re-rooted and are left out for a
 * subdirectory dispatch.
 *
 * Apply (changeset_apply) uses the same kind of private repository with the
 * live directory as work tree, so paths are relative to D even inside a larger
 * repository, and no attribute conversion or repository config applies.
 * `git apply --check` first, then `git apply` (which itself applies all or
 * nothing in memory before writing). If the check fails, a 3-way merge is tried
 * in a scratch index only (never in the live tree): the touched paths of the
 * live tree are staged into a private index, `git apply --cached --3way` runs
 * there, and only a conflict-free result is turned into a new patch against
 * the live contents, which then goes through the same check-then-apply. The
 * preimage blobs for that merge come from the live repository's objects, so
 * it helps where the worker's base was committed content; otherwise the
 * check's failure is reported. Nothing is ever staged in the live index.
 *
 * Known limits of the patch format: empty directories are not represented
 * (git apply removes a directory a deletion leaves empty), and ownership and
 * permission bits other than the executable bit are not carried. */
#include "changeset.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "overlay.h"
#include "process-util.h"
#include "util.h"

#define EMPTY_TREE_OID "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
/* The original's extraction buffer (spec §5.8: maxBuffer 200 MiB, #358). */
#define PATCH_MAX ((size_t) 200 << 20)
#define LIST_MAX ((size_t) 256 << 20)
#define SMALL_MAX ((size_t) 1 << 20)
/* Nested repositories inside nested repositories... give up after this many rounds. */
#define FLATTEN_ROUNDS_MAX 64
/* Bytes of path arguments per git command line when a list of paths is passed
 * as arguments (run_command gives git no stdin); far below ARG_MAX. */
#define ARGS_BATCH_BYTES ((size_t) 256 << 10)

/* Our private repository's configuration. Nothing here names a program. */
static const char private_config[] =
        "[core]\n"
        "\trepositoryformatversion = 0\n"
        "\tbare = false\n"
        "\tfilemode = true\n"
        "\tsymlinks = true\n"
        "\tignorecase = false\n"
        "\tprecomposeunicode = false\n"
        "\tautocrlf = false\n"
        "\tsafecrlf = false\n"
        "\tfsmonitor = false\n"
        "\thooksPath = /dev/null\n"
        "\tuntrackedCache = false\n"
        "\tsplitIndex = false\n"
        "\tsparseCheckout = false\n"
        "\tprotectNTFS = true\n"
        "\tprotectHFS = true\n"
        "\tlogAllRefUpdates = false\n"
        "\tcheckStat = default\n"
        "[index]\n"
        "\tsparse = false\n"
        "[gc]\n"
        "\tauto = 0\n"
        "[advice]\n"
        "\taddEmbeddedRepo = false\n"
        "[apply]\n"
        "\twhitespace = nowarn\n";

/* Highest attribute precedence (gitattributes(5)): store and write exact
 * bytes, and look up no diff or merge driver. */
static const char private_attributes[] =
        "* -text -crlf -eol -ident -filter -working-tree-encoding !diff !merge !whitespace\n";

/* ------------------------------------------------------------------------ */
/* small helpers */

static char *path_join(const char *a, const char *b) {
        return strdup_printf("%s/%s", a, b);
}

static void strip_trailing_space(char *s) {
        size_t n = s ? strlen(s) : 0;
        while (n > 0 && isspace((unsigned char) s[n - 1])) s[--n] = 0;
}

static bool is_hex_oid(const char *s) {
        size_t n = strlen(s);
        if (n != 40 && n != 64) return false;
        for (size_t i = 0; i < n; i++)
                if (!isxdigit((unsigned char) s[i]) || isupper((unsigned char) s[i])) return false;
        return true;
}

static int write_small_file(const char *path, const char *data, size_t len) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) return -errno;
        return loop_write(fd, data, len);
}

static int append_file(const char *path, const char *data, size_t len) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) return -errno;
        return loop_write(fd, data, len);
}

/* GIT_ALTERNATE_OBJECT_DIRECTORIES is colon-separated; an entry that starts
 * with a double quote is C-quoted (git-config(1)/git(1), "ENVIRONMENT"). */
static char *quote_alternate(const char *p) {
        if (!strpbrk(p, ":\"\\\n")) return strdup(p);
        size_t n = strlen(p);
        char *q = malloc(n * 4 + 3), *o = q;
        if (!q) return NULL;
        *o++ = '"';
        for (const unsigned char *s = (const unsigned char *) p; *s; s++) {
                if (*s == '"' || *s == '\\') {
                        *o++ = '\\';
                        *o++ = (char) *s;
                } else if (*s == '\n') {
                        *o++ = '\\';
                        *o++ = 'n';
                } else
                        *o++ = (char) *s;
        }
        *o++ = '"';
        *o = 0;
        return q;
}

/* A path as git prints it with core.quotePath (quote.c quote_c_style): as
 * is when it is plain printable ASCII without '"' and '\\', else in double
 * quotes with C escapes and every other byte (control, non-ASCII) in octal,
 * so invisible code points such as U+200C show. */
static char *quote_path(const char *p) {
        bool plain = true;
        for (const unsigned char *s = (const unsigned char *) p; *s; s++)
                if (*s < 0x20 || *s >= 0x7f || *s == '"' || *s == '\\') plain = false;
        if (plain) return strdup(p);
        char *q = malloc(strlen(p) * 4 + 3), *o = q;
        if (!q) return NULL;
        *o++ = '"';
        for (const unsigned char *s = (const unsigned char *) p; *s; s++) {
                char e = 0;
                switch (*s) {
                case '\a': e = 'a'; break;
                case '\b': e = 'b'; break;
                case '\t': e = 't'; break;
                case '\n': e = 'n'; break;
                case '\v': e = 'v'; break;
                case '\f': e = 'f'; break;
                case '\r': e = 'r'; break;
                case '"': e = '"'; break;
                case '\\': e = '\\'; break;
                }
                if (e) {
                        *o++ = '\\';
                        *o++ = e;
                } else if (*s < 0x20 || *s >= 0x7f)
                        o += sprintf(o, "\\%03o", *s);
                else
                        *o++ = (char) *s;
        }
        *o++ = '"';
        *o = 0;
        return q;
}

/* The warnings of one extraction: at most CHANGESET_WARNINGS_MAX lines kept,
 * all of them counted. */
typedef struct warnings {
        char **lines;
        size_t n_lines, total;
} warnings;

static void warnings_done(warnings *w) {
        strv_free(w->lines);
        memset(w, 0, sizeof *w);
}

static int warnings_add_line(warnings *w, char *line) {
        if (!line) return -ENOMEM;
        w->total++;
        if (w->n_lines >= CHANGESET_WARNINGS_MAX) {
                free(line);
                return 0;
        }
        int r = strv_consume(&w->lines, line);
        if (r >= 0) w->n_lines++;
        return r;
}

/* "<quoted path>: left out of the changeset: <why>" */
static int warn_path(warnings *w, const char *path, const char *why) {
        _cleanup_free_ char *q = quote_path(path);
        if (!q) return -ENOMEM;
        return warnings_add_line(w, strdup_printf("%s: left out of the changeset: %s", q, why));
}

/* The list handed to the caller: the kept lines, the last one replaced by a
 * count when there were more. */
static int warnings_finish(warnings *w, char ***ret) {
        if (w->total > w->n_lines && w->n_lines > 0) {
                size_t shown = w->n_lines - 1;
                free(w->lines[shown]);
                w->lines[shown] = strdup_printf("and %zu more paths were left out of the changeset", w->total - shown);
                if (!w->lines[shown]) return -ENOMEM;
        }
        *ret = TAKE_PTR(w->lines);
        w->n_lines = w->total = 0;
        return 0;
}

/* Open rel (no leading '/') beneath dirfd without following any symlink. */
static int open_beneath(int dirfd, const char *rel, int flags) {
        struct open_how how = {
                .flags = (uint64_t) (flags | O_NOFOLLOW | O_CLOEXEC),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        int fd = (int) syscall(SYS_openat2, dirfd, *rel ? rel : ".", &how, sizeof how);
        if (fd < 0 && errno == ENOSYS) /* before Linux 5.6 */
                fd = openat(dirfd, *rel ? rel : ".", flags | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* ------------------------------------------------------------------------ */
/* the private repository and how git is run against it */

typedef struct git_ctx {
        char *git_dir;      /* T */
        char *work_tree;    /* D (NULL: none) */
        char *index_file;   /* private index (NULL: none) */
        char *alternates;   /* real object store (NULL: none) */
        char *home;         /* a nonexistent HOME, so no user file is read by default */
        char **env;         /* built from the above */
} git_ctx;

static void git_ctx_done(git_ctx *g) {
        free(g->git_dir);
        free(g->work_tree);
        free(g->index_file);
        free(g->alternates);
        free(g->home);
        strv_free(g->env);
        memset(g, 0, sizeof *g);
}

static int git_ctx_build_env(git_ctx *g) {
        _cleanup_strv_free_ char **env = NULL;
        const char *path = getenv("PATH");
        int r = strv_pushf(&env, "PATH=%s", isempty(path) ? "/usr/local/bin:/usr/bin:/bin" : path);
        if (r >= 0) r = strv_pushf(&env, "HOME=%s", g->home);
        if (r >= 0) r = strv_push(&env, "LC_ALL=C");
        if (r >= 0) r = strv_push(&env, "GIT_CONFIG_NOSYSTEM=1");
        if (r >= 0) r = strv_push(&env, "GIT_CONFIG_GLOBAL=/dev/null");
        if (r >= 0) r = strv_push(&env, "GIT_ATTR_NOSYSTEM=1");
        if (r >= 0) r = strv_push(&env, "GIT_CEILING_DIRECTORIES=/");
        if (r >= 0) r = strv_push(&env, "GIT_TERMINAL_PROMPT=0");
        if (r >= 0) r = strv_push(&env, "GIT_NO_REPLACE_OBJECTS=1");
        if (r >= 0) r = strv_push(&env, "GIT_PAGER=cat");
        if (r >= 0) r = strv_pushf(&env, "GIT_DIR=%s", g->git_dir);
        if (r >= 0 && g->work_tree) r = strv_pushf(&env, "GIT_WORK_TREE=%s", g->work_tree);
        if (r >= 0 && g->index_file) r = strv_pushf(&env, "GIT_INDEX_FILE=%s", g->index_file);
        if (r >= 0 && g->alternates) {
                _cleanup_free_ char *q = quote_alternate(g->alternates);
                r = q ? strv_pushf(&env, "GIT_ALTERNATE_OBJECT_DIRECTORIES=%s", q) : -ENOMEM;
        }
        if (r < 0) return r;
        strv_free(g->env);
        g->env = TAKE_PTR(env);
        return 0;
}

/* Create the private repository at g->git_dir (which must not exist yet). */
static int private_repo_create(const char *git_dir) {
        static const char *const dirs[] = {"", "/objects", "/refs", "/refs/heads", "/refs/tags", "/info"};
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                _cleanup_free_ char *p = strdup_printf("%s%s", git_dir, dirs[i]);
                if (!p) return -ENOMEM;
                if (mkdir(p, 0700) < 0) return -errno;
        }
        const struct { const char *name, *data; } files[] = {
                {"HEAD", "ref: refs/heads/taskferry\n"},
                {"config", private_config},
                {"info/attributes", private_attributes},
                {"info/exclude", ""},
        };
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                _cleanup_free_ char *p = path_join(git_dir, files[i].name);
                if (!p) return -ENOMEM;
                int r = write_small_file(p, files[i].data, strlen(files[i].data));
                if (r < 0) return r;
        }
        return 0;
}

/* Run `git -c core.fsmonitor=false -c core.hooksPath=/dev/null <args...>`. */
static int run_git_argv(const git_ctx *g, const char *cwd, size_t max_out, run_result *rr, char *const *args) {
        _cleanup_strv_free_ char **argv = NULL;
        int r = strv_push(&argv, "git");
        if (r >= 0) r = strv_push(&argv, "-c");
        if (r >= 0) r = strv_push(&argv, "core.fsmonitor=false");
        if (r >= 0) r = strv_push(&argv, "-c");
        if (r >= 0) r = strv_push(&argv, "core.hooksPath=/dev/null");
        for (size_t i = 0; r >= 0 && args[i]; i++) r = strv_push(&argv, args[i]);
        if (r < 0) return r;
        return run_command(argv, g->env, cwd ? cwd : "/", max_out, -1, rr);
}

static int run_git(const git_ctx *g, const char *cwd, size_t max_out, run_result *rr, ...) {
        const char *args[32];
        size_t n = 0;
        va_list ap;
        va_start(ap, rr);
        for (const char *a; (a = va_arg(ap, const char *)); ) {
                if (n + 1 >= ELEMENTSOF(args)) {
                        va_end(ap);
                        return -E2BIG;
                }
                args[n++] = a;
        }
        va_end(ap);
        args[n] = NULL;
        return run_git_argv(g, cwd, max_out, rr, (char *const *) args);
}

/* "git <what> exited with status N: <stderr>" (or the spawn error). */
static char *git_failure(const char *what, int r, const run_result *rr) {
        if (r < 0) {
                if (r == -EFBIG) return strdup_printf("git %s: output too large", what);
                return strdup_printf("could not run git %s: %s", what, strerror(-r));
        }
        _cleanup_free_ char *err = strdup(strempty(rr->err));
        if (!err) return NULL;
        strip_trailing_space(err);
        if (rr->exit_code < 0)
                return strdup_printf("git %s killed by signal %s%s%s", what, strnull(signal_to_name(rr->signal)),
                                     *err ? ": " : "", err);
        return strdup_printf("git %s exited with status %d%s%s", what, rr->exit_code, *err ? ": " : "", err);
}

/* Run git and require exit 0; on failure *err describes it. Output kept in rr. */
static int git_ok(const git_ctx *g, const char *cwd, size_t max_out, run_result *rr, char **err, const char *what,
                  char *const *args) {
        int r = run_git_argv(g, cwd, max_out, rr, args);
        if (r >= 0 && rr->exit_code == 0) return 0;
        *err = git_failure(what, r, rr);
        if (r >= 0) run_result_done(rr);
        return r < 0 ? r : -EIO;
}

/* Run `git <prefix...> [--] <args...>` in as many runs as it takes to keep
 * each command line below ARGS_BATCH_BYTES of args, never splitting a group
 * of `group` consecutive args; group 1 means the args are paths and follow
 * "--". Exit 0 and, if ok_exit_1, exit 1 are success. cb (may be NULL) sees
 * each run's output; a negative return stops. */
typedef int (*batch_cb)(void *userdata, const run_result *rr);
static int git_batched(const git_ctx *g, const char *cwd, size_t max_out, const char *what, char *const *prefix,
                       char *const *args, bool ok_exit_1, size_t group, batch_cb cb, void *userdata, char **err) {
        size_t i = 0, n = strv_length(args);
        while (i < n) {
                _cleanup_strv_free_ char **argv = NULL;
                int r = 0;
                for (size_t k = 0; r >= 0 && prefix[k]; k++) r = strv_push(&argv, prefix[k]);
                if (r >= 0 && group == 1) r = strv_push(&argv, "--");
                for (size_t bytes = 0; r >= 0 && i < n;) {
                        size_t len = 0;
                        for (size_t k = i; k < i + group && k < n; k++) len += strlen(args[k]) + 1;
                        if (bytes > 0 && bytes + len > ARGS_BATCH_BYTES) break;
                        for (size_t k = i; r >= 0 && k < i + group && k < n; k++) r = strv_push(&argv, args[k]);
                        bytes += len;
                        i += group;
                }
                if (r < 0) return r;
                run_result rr;
                r = run_git_argv(g, cwd, max_out, &rr, argv);
                if (r < 0 || !(rr.exit_code == 0 || (ok_exit_1 && rr.exit_code == 1))) {
                        *err = git_failure(what, r, &rr);
                        if (r >= 0) run_result_done(&rr);
                        return r < 0 ? r : -EIO;
                }
                r = cb ? cb(userdata, &rr) : 0;
                run_result_done(&rr);
                if (r < 0) return r;
        }
        return 0;
}

/* ------------------------------------------------------------------------ */
/* exclude rules */

/* Keep an exclude line for a work tree rooted at a subdirectory: only
 * patterns that match at any depth (no '/' except a trailing one). */
static bool exclude_line_is_unanchored(const char *line, size_t len) {
        if (len > 0 && line[0] == '!') line++, len--;
        while (len > 0 && line[len - 1] == '/') len--;
        return memchr(line, '/', len) == NULL;
}

/* Append the lines of file `path` to f, all of them or (subdir) only the
 * unanchored ones. A missing or unreadable file adds nothing. */
static void exclude_collect(FILE *f, const char *path, bool only_unanchored) {
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        if (read_file(path, SMALL_MAX, &data, &len) < 0) return;
        for (char *line = data, *end; line < data + len; line = end + 1) {
                end = memchr(line, '\n', (size_t) (data + len - line));
                if (!end) end = data + len;
                size_t n = (size_t) (end - line);
                if (n == 0 || line[0] == '#') continue;
                if (only_unanchored && !exclude_line_is_unanchored(line, n)) continue;
                fwrite(line, 1, n, f);
                fputc('\n', f);
        }
}

/* One gitignore pattern that matches exactly `path` (relative to the work
 * tree; a trailing '/' = directory): anchored with a leading '/', every
 * wildcard and special character escaped. NULL if the path cannot be written
 * as a pattern (newline). */
static char *exclude_pattern_for(const char *path) {
        if (strchr(path, '\n') || strchr(path, '\r')) return NULL;
        size_t n = strlen(path);
        char *p = malloc(2 * n + 3), *o = p;
        if (!p) return NULL;
        *o++ = '/';
        for (const char *s = path; *s; s++) {
                if (strchr("\\*?[]!# \t", *s)) *o++ = '\\';
                *o++ = *s;
        }
        *o++ = '\n';
        *o = 0;
        return p;
}

/* ------------------------------------------------------------------------ */
/* what the parent learns about D in the host view */

typedef struct repo_info {
        char *common_dir; /* absolute; NULL if D is not in a repository */
        char *toplevel;   /* absolute */
        char *prefix;     /* D relative to toplevel, "" or "a/b/" */
        char *excludes;   /* the initial T/info/exclude text */
        char *hooks_rel;  /* core.hooksPath when it lies inside D: relative to D ("" = D itself), else NULL */
} repo_info;

static void repo_info_done(repo_info *ri) {
        free(ri->common_dir);
        free(ri->toplevel);
        free(ri->prefix);
        free(ri->excludes);
        free(ri->hooks_rel);
        memset(ri, 0, sizeof *ri);
}

/* Environment for the two read-only git calls on the user's own repository
 * in the host view: the user's config applies (as for any git command they
 * run), but nothing from the caller's GIT_* variables. */
static int host_env(char ***ret) {
        _cleanup_strv_free_ char **env = NULL;
        const char *path = getenv("PATH"), *home = getenv("HOME"), *xdg = getenv("XDG_CONFIG_HOME");
        int r = strv_pushf(&env, "PATH=%s", isempty(path) ? "/usr/local/bin:/usr/bin:/bin" : path);
        if (r >= 0 && home) r = strv_pushf(&env, "HOME=%s", home);
        if (r >= 0 && xdg) r = strv_pushf(&env, "XDG_CONFIG_HOME=%s", xdg);
        if (r >= 0) r = strv_push(&env, "LC_ALL=C");
        if (r >= 0) r = strv_push(&env, "GIT_TERMINAL_PROMPT=0");
        if (r < 0) return r;
        *ret = TAKE_PTR(env);
        return 0;
}

/* Ask git (host view, read-only) where D's repository is, and assemble the
 * ignore rules that do not live in D's work tree. Not being in a repository
 * is not an error. */
static int repo_info_gather(const char *dir, repo_info *ri) {
        _cleanup_strv_free_ char **env = NULL;
        int r = host_env(&env);
        if (r < 0) return r;

        char *rp_argv[] = {(char *) "git", (char *) "-c", (char *) "core.fsmonitor=false",
                           (char *) "-C", (char *) dir, (char *) "rev-parse", (char *) "--path-format=absolute",
                           (char *) "--git-common-dir", (char *) "--show-toplevel", (char *) "--show-prefix", NULL};
        run_result rr;
        r = run_command(rp_argv, env, "/", SMALL_MAX, -1, &rr);
        if (r < 0) return r;
        if (rr.exit_code == 0) {
                char *save = NULL;
                char *l1 = strtok_r(rr.out, "\n", &save);
                char *l2 = strtok_r(NULL, "\n", &save);
                char *l3 = strtok_r(NULL, "\n", &save);
                if (l1 && l2 && l1[0] == '/' && l2[0] == '/') {
                        ri->common_dir = strdup(l1);
                        ri->toplevel = strdup(l2);
                        ri->prefix = strdup(l3 ? l3 : "");
                        if (!ri->common_dir || !ri->toplevel || !ri->prefix) r = -ENOMEM;
                }
        }
        run_result_done(&rr);
        if (r < 0) return r;
        bool subdir = !isempty(ri->prefix);

        /* A core.hooksPath inside the work tree (husky, .githooks): files the
         * worker changes there would run on the user's next git command. The
         * host's config, read before the worker's view exists; a relative
         * value is relative to the top of the work tree (githooks(5)). */
        if (ri->toplevel) {
                char *hp_argv[] = {(char *) "git", (char *) "-C", (char *) dir, (char *) "config", (char *) "--path",
                                   (char *) "--get", (char *) "core.hooksPath", NULL};
                r = run_command(hp_argv, env, "/", SMALL_MAX, -1, &rr);
                if (r < 0) return r;
                if (rr.exit_code == 0) {
                        strip_trailing_space(rr.out);
                        _cleanup_free_ char *abs = !*rr.out ? NULL
                                                   : rr.out[0] == '/' ? strdup(rr.out)
                                                                      : path_join(ri->toplevel, rr.out);
                        _cleanup_free_ char *real = abs ? realpath(abs, NULL) : NULL;
                        const char *h = real ? real : abs;
                        if (h && path_is_at_or_below(h, dir)) {
                                const char *rel = h + strlen(dir);
                                while (*rel == '/') rel++;
                                if (!(ri->hooks_rel = strdup(rel))) r = -ENOMEM;
                        }
                }
                run_result_done(&rr);
                if (r < 0) return r;
        }

        /* The user's excludes file (gitignore(5)): core.excludesFile, else
         * $XDG_CONFIG_HOME/git/ignore or ~/.config/git/ignore. */
        _cleanup_free_ char *excludes_file = NULL;
        char *cf_argv[] = {(char *) "git", (char *) "-C", (char *) dir, (char *) "config", (char *) "--path",
                           (char *) "--get", (char *) "core.excludesFile", NULL};
        r = run_command(cf_argv, env, "/", SMALL_MAX, -1, &rr);
        if (r < 0) return r;
        if (rr.exit_code == 0) {
                strip_trailing_space(rr.out);
                if (*rr.out && !(excludes_file = strdup(rr.out))) r = -ENOMEM;
        }
        run_result_done(&rr);
        if (r < 0) return r;
        if (!excludes_file) {
                const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
                if (!isempty(xdg)) excludes_file = strdup_printf("%s/git/ignore", xdg);
                else if (!isempty(home)) excludes_file = strdup_printf("%s/.config/git/ignore", home);
        }

        size_t size = 0;
        _cleanup_fclose_ FILE *f = open_memstream(&ri->excludes, &size);
        if (!f) return -ENOMEM;
        if (excludes_file) exclude_collect(f, excludes_file, subdir);
        if (ri->common_dir) {
                _cleanup_free_ char *p = path_join(ri->common_dir, "info/exclude");
                if (!p) return -ENOMEM;
                exclude_collect(f, p, subdir);
        }
        /* .gitignore files above D inside the repository: toplevel, then
         * toplevel/<prefix up to each '/'>; D's own is read by git itself. */
        if (subdir) {
                _cleanup_free_ char *rel = strdup(ri->prefix);
                if (!rel) return -ENOMEM;
                size_t n = strlen(rel);
                while (n > 0 && rel[n - 1] == '/') rel[--n] = 0;
                _cleanup_free_ char *top = path_join(ri->toplevel, ".gitignore");
                if (!top) return -ENOMEM;
                exclude_collect(f, top, true);
                for (size_t i = 0; i < n; i++) {
                        if (rel[i] != '/') continue;
                        _cleanup_free_ char *p = strdup_printf("%s/%.*s/.gitignore", ri->toplevel, (int) i, rel);
                        if (!p) return -ENOMEM;
                        exclude_collect(f, p, true);
                }
        }
        if (fflush(f) != 0 || ferror(f)) return -ENOMEM;
        return 0;
}

/* ------------------------------------------------------------------------ */
/* the child: both views inside one user + mount namespace */

/* Paths that `git add --ignore-errors` left out of one view, with their
 * stat data in that view (to tell a path the worker touched from one it
 * left alone) and git's reason. */
typedef struct refused_path {
        char *path;
        bool exists;
        struct stat st;
} refused_path;

typedef struct refused_list {
        refused_path *e;
        size_t n, allocated;
        char *add_err; /* the stderr of that `git add`, for the reasons */
} refused_list;

static void refused_list_done(refused_list *l) {
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

typedef struct extract_child {
        const changeset_extract_args *a;
        git_ctx *g;
        const char *base_treeish;  /* "<pre_head>" or "<pre_head>:<prefix>", or NULL */
        const char *empty_dir;     /* bind source hiding a nested .git directory */
        const char *empty_file;    /* bind source hiding a nested .git file or symlink */
        char **hidden;             /* nested .git paths hidden in the current view */
        refused_list *refused;     /* where add_all_flattened records what git refused (NULL: nowhere) */
        int host_fd;               /* O_PATH fd of D in the host view, opened before the overlay */
        warnings w;                /* what the child reports besides the trees */
        const char *hooks_rel;     /* repo_info.hooks_rel: changed paths below it are left out */
} extract_child;

/* Hide <D>/<rel>.git (rel ends in '/', or is "" for the top) under an empty
 * bind mount. Resolution stays beneath D and follows no symlink (the entry
 * itself may be a symlink: the mount covers the link). Returns 1 if hidden,
 * 0 if there is nothing to hide, -errno on failure. */
static int hide_nested_git(extract_child *c, const char *rel, char **err) {
        _cleanup_free_ char *relgit = strdup_printf("%s%s.git", rel, (*rel && rel[strlen(rel) - 1] != '/') ? "/" : "");
        if (!relgit) return -ENOMEM;
        if (strv_contains(c->hidden, relgit)) return 0;
        _cleanup_close_ int dfd = open(c->a->directory, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) return -errno;
        struct open_how how = {
                .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        _cleanup_close_ int fd = (int) syscall(SYS_openat2, dfd, relgit, &how, sizeof how);
        if (fd < 0 && errno == ENOSYS) /* before Linux 5.6 */
                fd = openat(dfd, relgit, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT || errno == ENOTDIR) return 0;
                int r = -errno;
                *err = strdup_printf("cannot open nested repository %s: %s", relgit, strerror(errno));
                return r;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) return -errno;
        char target[64];
        snprintf(target, sizeof target, "/proc/self/fd/%d", fd);
        if (mount(S_ISDIR(st.st_mode) ? c->empty_dir : c->empty_file, target, NULL, MS_BIND, NULL) < 0) {
                int r = -errno;
                *err = strdup_printf("cannot hide nested repository %s: %s", relgit, strerror(errno));
                return r;
        }
        int r = strv_consume(&c->hidden, TAKE_PTR(relgit));
        return r < 0 ? r : 1;
}

/* Gitlink entries (mode 160000) of the index, as paths. */
static int index_gitlinks(extract_child *c, char ***ret, char **err) {
        char *args[] = {(char *) "ls-files", (char *) "-s", (char *) "-z", NULL};
        run_result rr;
        int r = git_ok(c->g, c->a->directory, LIST_MAX, &rr, err, "ls-files -s", args);
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

static int index_force_remove(extract_child *c, char **paths, char **err) {
        _cleanup_strv_free_ char **args = NULL;
        int r = strv_push(&args, "update-index");
        if (r >= 0) r = strv_push(&args, "--force-remove");
        if (r >= 0) r = strv_push(&args, "--");
        for (size_t i = 0; r >= 0 && paths[i]; i++) r = strv_push(&args, paths[i]);
        if (r < 0) return r;
        run_result rr;
        r = git_ok(c->g, c->a->directory, 0, &rr, err, "update-index --force-remove", args);
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
                _cleanup_free_ char *clean = quote_path(line);
                return clean ? strdup_printf("git could not record it: %s", clean) : NULL;
        }
        return strdup("git could not record it");
}

/* After the last `add --ignore-errors` of a view: what git left out, i.e.
 * the untracked files that are still not ignored and the tracked ones whose
 * index entry could not be updated. */
static int refused_collect(extract_child *c, const char *add_err, refused_list *out, char **err) {
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
                int r = git_ok(c->g, c->a->directory, LIST_MAX, &rr, err, what[k], argvs[k]);
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

/* Warn about a refused path (git's reason looked up only while warnings are
 * still kept: the search is linear in git's stderr). */
static int refused_warn_one(warnings *w, const refused_list *l, const char *path, const char *prefix) {
        if (w->n_lines >= CHANGESET_WARNINGS_MAX) return warn_path(w, path, "");
        _cleanup_free_ char *reason = refused_reason(l->add_err, path);
        _cleanup_free_ char *why = reason ? strdup_printf("%s%s", prefix, reason) : NULL;
        return why ? warn_path(w, path, why) : -ENOMEM;
}

/* Warnings for what git refused in the merged view, leaving out the paths
 * that were refused in the host view as well and that the worker left alone
 * (same type, size, mtime and ctime: a copy-up or any write changes ctime). */
static int refused_warn(extract_child *c, const refused_list *host, const refused_list *merged) {
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

/* `git add -A` of the current view, with every nested repository flattened
 * into plain files (see the top of this file). */
static int add_all_flattened(extract_child *c, const char *view, char **err) {
        _cleanup_strv_free_ char **tried_gitlinks = NULL;
        for (unsigned round = 0; round < FLATTEN_ROUNDS_MAX; round++) {
                /* Untracked nested repositories are listed as "dir/". */
                char *ls_args[] = {(char *) "ls-files", (char *) "-o", (char *) "-z", (char *) "--exclude-standard", NULL};
                run_result rr;
                int r = git_ok(c->g, c->a->directory, LIST_MAX, &rr, err, "ls-files -o", ls_args);
                if (r < 0) return r;
                int hidden = 0;
                for (char *p = rr.out; p < rr.out + rr.out_len && r >= 0; p += strlen(p) + 1) {
                        size_t n = strlen(p);
                        if (n == 0 || p[n - 1] != '/') continue;
                        r = hide_nested_git(c, p, err);
                        if (r > 0) hidden++;
                }
                run_result_done(&rr);
                if (r < 0) return r;
                if (hidden > 0) continue;

                /* A path git refuses (verify_path(): .git in any spelling
                 * its NTFS/HFS protections know, an unreadable file) is
                 * skipped, not fatal: exit status 1. */
                char *add_args[] = {(char *) "add", (char *) "-A", (char *) "--ignore-errors",
                                    (char *) "--no-warn-embedded-repo", NULL};
                _cleanup_free_ char *what = strdup_printf("add -A (%s)", view);
                if (!what) return -ENOMEM;
                r = run_git_argv(c->g, c->a->directory, 0, &rr, add_args);
                if (r < 0 || (rr.exit_code != 0 && rr.exit_code != 1)) {
                        *err = git_failure(what, r, &rr);
                        if (r >= 0) run_result_done(&rr);
                        return r < 0 ? r : -EIO;
                }
                _cleanup_free_ char *add_err = rr.exit_code == 1 ? strdup(strempty(rr.err)) : NULL;
                run_result_done(&rr);

                _cleanup_strv_free_ char **links = NULL;
                if ((r = index_gitlinks(c, &links, err)) < 0) return r;
                if (!links) return c->refused ? refused_collect(c, add_err, c->refused, err) : 0;
                for (size_t i = 0; links[i]; i++) {
                        if (strv_contains(tried_gitlinks, links[i])) {
                                *err = strdup_printf("cannot record the contents of nested repository %s", links[i]);
                                return -ENOTSUP;
                        }
                        if ((r = strv_push(&tried_gitlinks, links[i])) < 0) return r;
                        if ((r = hide_nested_git(c, links[i], err)) < 0) return r;
                }
                if ((r = index_force_remove(c, links, err)) < 0) return r;
        }
        *err = strdup_printf("nested repositories deeper than %d levels", FLATTEN_ROUNDS_MAX);
        return -ELOOP;
}

static int write_tree(extract_child *c, bool missing_ok, char **ret_oid, char **err) {
        char *args[] = {(char *) "write-tree", missing_ok ? (char *) "--missing-ok" : NULL, NULL};
        run_result rr;
        int r = git_ok(c->g, c->a->directory, SMALL_MAX, &rr, err, "write-tree", args);
        if (r < 0) return r;
        strip_trailing_space(rr.out);
        if (!is_hex_oid(rr.out)) {
                *err = strdup_printf("git write-tree printed no tree id");
                run_result_done(&rr);
                return -EIO;
        }
        *ret_oid = strdup(rr.out);
        run_result_done(&rr);
        return *ret_oid ? 0 : -ENOMEM;
}

/* Phase A: the host view. */
static int child_before(extract_child *c, char **ret_tree, char **err) {
        run_result rr;
        int r;
        if (c->base_treeish) {
                _cleanup_free_ char *spec = strdup_printf("%s^{tree}", c->base_treeish);
                if (!spec) return -ENOMEM;
                r = run_git(c->g, "/", SMALL_MAX, &rr, "rev-parse", "--verify", "-q", spec, NULL);
                if (r < 0) {
                        *err = git_failure("rev-parse", r, &rr);
                        return r;
                }
                /* An unreachable base only costs us tracked-but-ignored files:
                 * start from an empty index then. */
                bool ok = rr.exit_code == 0;
                strip_trailing_space(rr.out);
                _cleanup_free_ char *tree = ok ? strdup(rr.out) : NULL;
                run_result_done(&rr);
                if (ok && tree && is_hex_oid(tree)) {
                        /* A base that holds a path git's protections refuse
                         * (committed where they were off) does not read:
                         * start from an empty index then, too. */
                        char *args[] = {(char *) "read-tree", tree, NULL};
                        if ((r = run_git_argv(c->g, c->a->directory, 0, &rr, args)) < 0) {
                                *err = git_failure("read-tree", r, &rr);
                                return r;
                        }
                        ok = rr.exit_code == 0;
                        run_result_done(&rr);
                }
                if (ok && tree && is_hex_oid(tree)) {
                        _cleanup_strv_free_ char **links = NULL;
                        if ((r = index_gitlinks(c, &links, err)) < 0) return r;
                        if (links && (r = index_force_remove(c, links, err)) < 0) return r;
                }
        }
        if ((r = add_all_flattened(c, "host view", err)) < 0) return r;
        if ((r = write_tree(c, false, ret_tree, err)) < 0) return r;

        /* Pin everything that is ignored in this view. */
        char *ign_args[] = {(char *) "ls-files", (char *) "-z", (char *) "-o", (char *) "-i", (char *) "--exclude-standard",
                            (char *) "--directory", NULL};
        if ((r = git_ok(c->g, c->a->directory, LIST_MAX, &rr, err, "ls-files --ignored", ign_args)) < 0) return r;
        _cleanup_free_ char *exclude_path = path_join(c->g->git_dir, "info/exclude");
        if (!exclude_path) r = -ENOMEM;
        for (char *p = rr.out; r >= 0 && p < rr.out + rr.out_len; p += strlen(p) + 1) {
                if (!*p) continue;
                _cleanup_free_ char *pat = exclude_pattern_for(p);
                if (pat) r = append_file(exclude_path, pat, strlen(pat));
        }
        run_result_done(&rr);
        if (r < 0 && !*err) *err = strdup_printf("cannot write the private exclude file: %s", strerror(-r));
        return r;
}

/* Phase B: the merged view. */
static int child_after(extract_child *c, char **ret_tree, char **err) {
        const changeset_extract_args *a = c->a;
        /* The overlay mount can transiently fail with EBUSY while the task's
         * own mount is torn down (spec §4.6): retry after 100, 300, 900 ms. */
        static const unsigned backoff_ms[] = {100, 300, 900};
        int r;
        for (size_t attempt = 0;; attempt++) {
                _cleanup_free_ char *merr = NULL;
                r = overlay_mount(a->directory, a->upper, a->work, a->directory, true, &merr);
                if (r >= 0) break;
                if (r != -EBUSY || attempt >= ELEMENTSOF(backoff_ms)) {
                        const char *m = merr ? merr : strerror(-r);
                        if (r == -EBUSY && !strstr(m, "Device or resource busy"))
                                *err = strdup_printf("%s: Device or resource busy", m);
                        else if (merr)
                                *err = TAKE_PTR(merr);
                        else
                                *err = strdup_printf("overlay mount on %s failed: %s", a->directory, strerror(-r));
                        return r;
                }
                struct timespec ts = {.tv_sec = backoff_ms[attempt] / 1000,
                                      .tv_nsec = (long) (backoff_ms[attempt] % 1000) * 1000000L};
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
        }
        /* New view: the earlier hides are covered by the overlay. */
        strv_free(c->hidden);
        c->hidden = NULL;
        free(c->g->alternates);
        c->g->alternates = NULL;
        if ((r = git_ctx_build_env(c->g)) < 0) return r;
        if ((r = add_all_flattened(c, "merged view", err)) < 0) return r;
        return write_tree(c, true, ret_tree, err);
}

/* Collect below dirfd (upper-dir path rel, "" at the top) every entry named
 * .git that is not a whiteout and that the host view of D does not have. */
#define DOTGIT_DEPTH_MAX 256
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
                        int hfd = open_beneath(host_fd, path, O_PATH);
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

/* `check-ignore` without --stdin cannot NUL-terminate: one line per ignored
 * path, raw with core.quotePath off unless the path holds a control
 * character, '"' or '\\' (then it is quoted and matches no path of ours:
 * such a path counts as not ignored, which only costs a warning). */
static int collect_ignored(void *userdata, const run_result *rr) {
        char ***ignored = userdata;
        int r = 0;
        for (char *p = rr->out, *nl; r >= 0 && p < rr->out + rr->out_len; p = nl + 1) {
                nl = memchr(p, '\n', (size_t) (rr->out + rr->out_len - p));
                if (!nl) nl = rr->out + rr->out_len;
                if (nl > p) r = strv_consume(ignored, strndup(p, (size_t) (nl - p)));
        }
        return r;
}

/* Warnings for the .git files and directories the worker created (the
 * overlay's upper dir holds everything it wrote), unless they lie in what
 * the merged view ignores. git never records them. */
static int dotgit_warn(extract_child *c, char **err) {
        _cleanup_close_ int ufd = open(c->a->upper, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (ufd < 0) return -errno;
        _cleanup_strv_free_ char **planted = NULL, **ignored = NULL;
        int r = dotgit_collect(ufd, "", c->host_fd, 0, &planted);
        if (r < 0 || !planted) return r;
        char *ci_args[] = {(char *) "-c", (char *) "core.quotePath=false", (char *) "check-ignore", NULL};
        r = git_batched(c->g, c->a->directory, LIST_MAX, "check-ignore", ci_args, planted, true, 1, collect_ignored,
                        &ignored, err);
        for (size_t i = 0; r >= 0 && planted[i]; i++)
                if (!strv_contains(ignored, planted[i]))
                        r = warn_path(&c->w, planted[i],
                                      "a .git file or directory makes git take its directory for a repository; "
                                      "git never records one (the files beside it are kept)");
        return r;
}

static _Noreturn void child_main(extract_child *c, int out_fd) {
        _cleanup_free_ char *err = NULL, *before = NULL, *after = NULL;
        _cleanup_(refused_list_done) refused_list host = {}, merged = {};
        int r = userns_enter_as_root(getuid(), getgid());
        if (r < 0) err = strdup_printf("cannot enter a user namespace: %s", strerror(-r));
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL); /* a credential change may have cleared it */
        if (r >= 0 && (c->host_fd = open(c->a->directory, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) r = -errno;
        c->refused = &host;
        if (r >= 0) r = child_before(c, &before, &err);
        c->refused = &merged;
        if (r >= 0) r = child_after(c, &after, &err);
        if (r >= 0) r = refused_warn(c, &host, &merged);
        if (r >= 0) r = dotgit_warn(c, &err);
        if (r < 0 && !err) err = strdup(strerror(-r));
        /* "O<before> <after> <warnings counted>\n" then the kept warnings,
         * each NUL-terminated (they are quoted: no NUL, no newline) */
        _cleanup_free_ char *msg = r >= 0 ? strdup_printf("O%s %s %zu\n", before, after, c->w.total)
                                          : strdup_printf("E%s", err ? err : "out of memory");
        if (msg) (void) loop_write(out_fd, msg, strlen(msg));
        for (size_t i = 0; r >= 0 && c->w.lines && c->w.lines[i]; i++)
                (void) loop_write(out_fd, c->w.lines[i], strlen(c->w.lines[i]) + 1);
        _exit(r >= 0 ? 0 : 1);
}

/* ------------------------------------------------------------------------ */
/* extraction: the parent side */


static int diff_trees(const git_ctx *g, const char *before, const char *after, run_result *rr, char **err) {
        char *args[] = {(char *) "diff-tree", (char *) "-r", (char *) "-p", (char *) "--binary", (char *) "--full-index",
                        (char *) "-M", (char *) "--no-color", (char *) "--no-ext-diff", (char *) "--no-textconv",
                        (char *) "--src-prefix=a/", (char *) "--dst-prefix=b/", (char *) before, (char *) after, NULL};
        int r = git_ok(g, "/", PATCH_MAX, rr, err, "diff-tree", args);
        if (r == -EFBIG) {
                free(*err);
                *err = strdup_printf("the patch is larger than %zu MiB", PATCH_MAX >> 20);
        }
        return r;
}

/* ------------------------------------------------------------------------ */
/* repository shapes: directories git would take for a git directory */

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
        int fd = open_beneath(dir_fd, rel, O_RDONLY | O_DIRECTORY);
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

/* Leave out of the after tree every change inside a directory that git
 * would take for a repository once the patch is applied: its pieces are
 * counted from the after tree and from what the host has there (ignored
 * and untracked entries, empty directories). A changed path in such a
 * directory goes back to its before state in the index (removed, or its
 * old entry restored) and the tree is written again. Reverting only removes
 * pieces that the host does not have, so one pass leaves no repository made
 * of the worker's changes. */
static int drop_repository_shapes(extract_child *c, const char *before, char *after, size_t after_size, warnings *w,
                                  char **err) {
        git_ctx *g = c->g;
        run_result rr;
        char *dt_args[] = {(char *) "diff-tree", (char *) "-r", (char *) "-z", (char *) "--no-renames",
                           (char *) before, after, NULL};
        int r = git_ok(g, "/", LIST_MAX, &rr, err, "diff-tree --raw", dt_args);
        if (r < 0) return r;
        changed_entry *ch = NULL;
        size_t n_ch = 0;
        _cleanup_(dir_masks_done) dir_masks cand = {}, after_pieces = {};
        /* ":<old mode> <new mode> <old oid> <new oid> <status>\0<path>\0" */
        for (char *p = rr.out; r >= 0 && p < rr.out + rr.out_len;) {
                char *path = p + strlen(p) + 1;
                if (*p != ':' || path >= rr.out + rr.out_len) break;
                changed_entry *n = realloc(ch, (n_ch + 1) * sizeof *ch);
                if (!n) {
                        r = -ENOMEM;
                        break;
                }
                ch = n;
                changed_entry *e = &ch[n_ch];
                memset(e, 0, sizeof *e);
                if (sscanf(p + 1, "%7s %*s %71s", e->old_mode, e->old_oid) != 2 || !(e->path = strdup(path))) {
                        r = e->old_mode[0] ? -ENOMEM : -EIO;
                        break;
                }
                e->added = strspn(e->old_mode, "0") == strlen(e->old_mode);
                n_ch++;
                r = add_ancestors(&cand, path);
                p = path + strlen(path) + 1;
        }
        run_result_done(&rr);
        _cleanup_strv_free_ char **removals = NULL, **restores = NULL;
        bool dropped = false;
        if (r >= 0 && n_ch > 0) {
                dir_masks_normalize(&cand);
                /* the pieces in the after tree */
                char *lt_args[] = {(char *) "ls-tree", (char *) "-r", (char *) "-t", (char *) "-z", (char *) "--name-only",
                                   (char *) "--full-tree", after, NULL};
                r = git_ok(g, "/", LIST_MAX, &rr, err, "ls-tree", lt_args);
                if (r >= 0) {
                        for (char *p = rr.out; r >= 0 && p < rr.out + rr.out_len; p += strlen(p) + 1) {
                                const char *slash = strrchr(p, '/');
                                unsigned m = piece_of(slash ? slash + 1 : p);
                                if (m) r = dir_masks_add(&after_pieces, p, slash ? (size_t) (slash - p) : 0, m);
                        }
                        run_result_done(&rr);
                        dir_masks_normalize(&after_pieces);
                }
                _cleanup_close_ int dfd = r >= 0 ? open(c->a->directory, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
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
                        bool hook = !repo && c->hooks_rel &&
                                    (!*c->hooks_rel || path_is_at_or_below(ch[i].path, c->hooks_rel));
                        if (r < 0 || (!repo && !hook)) continue;
                        _cleanup_free_ char *qdir = hook ? quote_path(*c->hooks_rel ? c->hooks_rel : ".")
                                                    : *repo ? quote_path(repo) : strdup("the target directory");
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
        const char *cwd = c->a->directory;
        if (removals)
                r = git_batched(g, cwd, 0, "update-index --force-remove", rm_prefix, removals, false, 1, NULL, NULL, err);
        if (r >= 0 && restores)
                r = git_batched(g, cwd, 0, "update-index --cacheinfo", ci_prefix, restores, false, 2, NULL, NULL, err);
        _cleanup_free_ char *tree = NULL;
        if (r >= 0) r = write_tree(c, true, &tree, err);
        if (r < 0) return r;
        if (strlen(tree) >= after_size) return -EIO;
        strcpy(after, tree);
        return 1;
}

static int extract_impl(const changeset_extract_args *a, char **err) {
        if (!a || isempty(a->directory) || isempty(a->upper) || isempty(a->work) || isempty(a->scratch_dir) ||
            isempty(a->patch_path) || a->directory[0] != '/') {
                *err = strdup("invalid arguments");
                return -EINVAL;
        }
        if (a->pre_head && !is_hex_oid(a->pre_head)) {
                *err = strdup("the pre-dispatch HEAD is not an object id");
                return -EINVAL;
        }
        _cleanup_free_ char *dir = realpath(a->directory, NULL);
        _cleanup_free_ char *scratch = realpath(a->scratch_dir, NULL);
        if (!dir || !scratch) {
                int r = -errno;
                *err = strdup_printf("cannot resolve %s: %s", dir ? a->scratch_dir : a->directory, strerror(errno));
                return r;
        }
        /* Inside D, the merged view would let the worker plant our git state. */
        if (path_is_at_or_below(scratch, dir)) {
                *err = strdup_printf("the scratch directory %s lies inside the target directory", scratch);
                return -EINVAL;
        }

        _cleanup_(repo_info_done) repo_info ri = {};
        int r = repo_info_gather(dir, &ri);
        if (r < 0) {
                *err = strdup_printf("cannot run git: %s", strerror(-r));
                return r;
        }
        _cleanup_free_ char *base = NULL;
        if (a->pre_head) {
                _cleanup_free_ char *prefix = strdup(strempty(ri.prefix));
                if (!prefix) return -ENOMEM;
                size_t n = strlen(prefix);
                while (n > 0 && prefix[n - 1] == '/') prefix[--n] = 0;
                base = n ? strdup_printf("%s:%s", a->pre_head, prefix) : strdup(a->pre_head);
                if (!base) return -ENOMEM;
        }

        _cleanup_(git_ctx_done) git_ctx g = {};
        g.git_dir = path_join(scratch, "git");
        g.work_tree = strdup(dir);
        g.index_file = path_join(scratch, "index");
        g.home = path_join(scratch, "home");
        _cleanup_free_ char *empty_dir = path_join(scratch, "empty-dir");
        _cleanup_free_ char *empty_file = path_join(scratch, "empty-file");
        _cleanup_free_ char *exclude_path = NULL;
        if (!g.git_dir || !g.work_tree || !g.index_file || !g.home || !empty_dir || !empty_file) return -ENOMEM;
        if (ri.common_dir) {
                g.alternates = path_join(ri.common_dir, "objects");
                if (!g.alternates) return -ENOMEM;
                if (!is_dir(g.alternates)) {
                        free(g.alternates);
                        g.alternates = NULL;
                }
        }
        if ((r = private_repo_create(g.git_dir)) < 0) {
                *err = strdup_printf("cannot create the private git directory in %s: %s", scratch, strerror(-r));
                return r;
        }
        exclude_path = path_join(g.git_dir, "info/exclude");
        if (!exclude_path) return -ENOMEM;
        if ((r = write_small_file(exclude_path, strempty(ri.excludes), strlen(strempty(ri.excludes)))) < 0 ||
            (mkdir(empty_dir, 0500) < 0 && (r = -errno)) || (r = write_small_file(empty_file, "", 0)) < 0) {
                *err = strdup_printf("cannot prepare %s: %s", scratch, strerror(-r));
                return r;
        }
        if ((r = git_ctx_build_env(&g)) < 0) return r;

        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) < 0) return -errno;
        /* dies with the job that forked it (run_command's git with it) */
        pid_t pid;
        r = safe_fork("changeset-extract", FORK_DEATHSIG_SIGKILL, &pid);
        if (r < 0) {
                safe_close(pfd[0]), safe_close(pfd[1]);
                return r;
        }
        if (r == 0) {
                safe_close(pfd[0]);
                extract_child c = {.a = a, .g = &g, .base_treeish = base, .empty_dir = empty_dir, .empty_file = empty_file,
                                   .host_fd = -1};
                /* The child works on the canonical D. */
                changeset_extract_args ca = *a;
                ca.directory = dir;
                c.a = &ca;
                child_main(&c, pfd[1]);
        }
        safe_close(pfd[1]);
        _cleanup_free_ char *reply = NULL;
        size_t reply_len = 0;
        r = read_fd(pfd[0], SIZE_MAX - 1, &reply, &reply_len);
        safe_close(pfd[0]);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR) {
                        if (r >= 0) r = -errno;
                        break;
                }
        if (r < 0) return r;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || reply[0] != 'O') {
                if (reply[0] == 'E') *err = strdup(reply + 1);
                else if (WIFSIGNALED(status))
                        *err = strdup_printf("the extraction process was killed by %s",
                                             strnull(signal_to_name(WTERMSIG(status))));
                else
                        *err = strdup("the extraction process failed");
                return -EIO;
        }
        char before[80] = "", after[80] = "";
        size_t child_total = 0;
        char *nl = strchr(reply, '\n');
        if (!nl || sscanf(reply + 1, "%79s %79s %zu", before, after, &child_total) != 3 || !is_hex_oid(before) ||
            !is_hex_oid(after)) {
                *err = strdup("the extraction process returned no trees");
                return -EIO;
        }
        /* The child's warnings, then ours. */
        _cleanup_(warnings_done) warnings w = {};
        for (char *p = nl + 1; p < reply + reply_len; p += strlen(p) + 1)
                if (*p && (r = warnings_add_line(&w, strdup(p))) < 0) return r;
        w.total = child_total > w.total ? child_total : w.total;
        changeset_extract_args pa = *a;
        pa.directory = dir;
        extract_child pc = {.a = &pa, .g = &g, .host_fd = -1, .hooks_rel = ri.hooks_rel};
        if ((r = drop_repository_shapes(&pc, before, after, sizeof after, &w, err)) < 0) return r;

        run_result rr = {};
        bool diffed = false;
        if (!streq(before, after)) {
                if ((r = diff_trees(&g, before, after, &rr, err)) < 0) return r;
                diffed = true;
        }
        r = write_file_atomic(a->patch_path, diffed ? rr.out : "", diffed ? rr.out_len : 0, 0600);
        size_t len = diffed ? rr.out_len : 0;
        if (diffed) run_result_done(&rr);
        if (r < 0) {
                *err = strdup_printf("cannot write %s: %s", a->patch_path, strerror(-r));
                return r;
        }
        if (a->ret_warnings && (r = warnings_finish(&w, a->ret_warnings)) < 0) return r;
        return len > 0 ? 1 : 0;
}

int changeset_extract(const changeset_extract_args *a, char **ret_error) {
        _cleanup_free_ char *err = NULL;
        if (a && a->ret_warnings) *a->ret_warnings = NULL;
        int r = extract_impl(a, &err);
        if (r >= 0) return r;
        if (ret_error)
                *ret_error = strdup_printf("git diff extraction failed for %s: %s",
                                           a && a->directory ? a->directory : "(null)", err ? err : strerror(-r));
        return r;
}

/* ------------------------------------------------------------------------ */
/* apply */

/* Parse `git apply --numstat -z` output: entries "A\tD\tpath\0" or, for a
 * rename/copy, "A\tD\t\0old\0new\0". Calls cb for each entry. */
typedef void (*numstat_cb)(void *userdata, const char *adds, const char *dels, const char *old_path,
                           const char *new_path);
static void numstat_parse(char *out, size_t len, numstat_cb cb, void *userdata) {
        char *p = out, *end = out + len;
        while (p < end) {
                char *t1 = memchr(p, '\t', (size_t) (end - p));
                if (!t1) break;
                char *t2 = memchr(t1 + 1, '\t', (size_t) (end - t1 - 1));
                if (!t2) break;
                *t1 = *t2 = 0;
                const char *adds = p, *dels = t1 + 1;
                char *name = t2 + 1;
                if (name >= end) break;
                if (*name) {
                        cb(userdata, adds, dels, NULL, name);
                        p = name + strlen(name) + 1;
                } else {
                        char *old = name + 1;
                        if (old >= end) break;
                        char *nw = old + strlen(old) + 1;
                        if (nw >= end) break;
                        cb(userdata, adds, dels, old, nw);
                        p = nw + strlen(nw) + 1;
                }
        }
}

typedef struct path_list {
        char **paths;
        int r;
} path_list;

static void collect_paths(void *userdata, const char *adds, const char *dels, const char *old_path,
                          const char *new_path) {
        path_list *pl = userdata;
        if (pl->r >= 0 && old_path && !strv_contains(pl->paths, old_path)) pl->r = strv_push(&pl->paths, old_path);
        if (pl->r >= 0 && !strv_contains(pl->paths, new_path)) pl->r = strv_push(&pl->paths, new_path);
}

static char *trimmed(const char *s) {
        char *t = strdup(strempty(s));
        if (t) strip_trailing_space(t);
        return t;
}

/* 3-way merge in a private index only. On success writes the rebased patch
 * (live contents -> merged result) to rebased_path and returns 1, or returns 2
 * when the merge result equals the live contents; returns 0 (with *why set
 * when there is something to say) when no clean merge exists; -errno on
 * other failures. */
static int three_way_rebase(git_ctx *g, const char *patch, const char *rebased_path, char **why) {
        _cleanup_strv_free_ char **env = NULL, **paths = NULL, **ui = NULL;
        _cleanup_free_ char *err = NULL, *t0 = NULL, *t1 = NULL, *ap_err = NULL;
        extract_child c = {.g = g};
        changeset_extract_args fake = {.directory = g->work_tree};
        c.a = &fake;
        run_result rr;

        /* Preimage blobs can only come from the live repository's objects. */
        int r = host_env(&env);
        if (r < 0) return r;
        char *rp_argv[] = {(char *) "git", (char *) "-c", (char *) "core.fsmonitor=false", (char *) "-C",
                           g->work_tree, (char *) "rev-parse", (char *) "--path-format=absolute",
                           (char *) "--git-common-dir", NULL};
        r = run_command(rp_argv, env, "/", SMALL_MAX, -1, &rr);
        if (r < 0) return r;
        if (rr.exit_code != 0 || rr.out[0] != '/') {
                run_result_done(&rr);
                return 0; /* not a repository: no base to merge with */
        }
        strip_trailing_space(rr.out);
        g->alternates = path_join(rr.out, "objects");
        run_result_done(&rr);
        if (!g->alternates) return -ENOMEM;
        if ((r = git_ctx_build_env(g)) < 0) return r;

        char *ns_args[] = {(char *) "apply", (char *) "--numstat", (char *) "-z", (char *) patch, NULL};
        r = git_ok(g, g->work_tree, LIST_MAX, &rr, &err, "apply --numstat", ns_args);
        if (r >= 0) {
                path_list pl = {};
                numstat_parse(rr.out, rr.out_len, collect_paths, &pl);
                run_result_done(&rr);
                paths = pl.paths;
                if (pl.r < 0) return pl.r;
                if (!paths) return 0;

                /* Stage the live contents of exactly the touched paths. */
                r = strv_push(&ui, "update-index");
                if (r >= 0) r = strv_push(&ui, "--add");
                if (r >= 0) r = strv_push(&ui, "--remove");
                if (r >= 0) r = strv_push(&ui, "--");
                for (size_t i = 0; r >= 0 && paths[i]; i++) r = strv_push(&ui, paths[i]);
                if (r < 0) return r;
                r = git_ok(g, g->work_tree, 0, &rr, &err, "update-index", ui);
        }
        if (r >= 0) {
                run_result_done(&rr);
                r = write_tree(&c, true, &t0, &err);
        }
        if (r >= 0) {
                char *ap_args[] = {(char *) "apply", (char *) "--cached", (char *) "--3way", (char *) patch, NULL};
                r = run_git_argv(g, g->work_tree, 0, &rr, ap_args);
                if (r < 0) return r;
                bool applied = rr.exit_code == 0;
                ap_err = trimmed(rr.err);
                run_result_done(&rr);
                char *lu_args[] = {(char *) "ls-files", (char *) "-u", (char *) "-z", NULL};
                r = git_ok(g, g->work_tree, LIST_MAX, &rr, &err, "ls-files -u", lu_args);
                if (r >= 0) {
                        bool conflicts = rr.out_len > 0;
                        run_result_done(&rr);
                        if (!applied || conflicts) {
                                *why = strdup_printf("3-way merge %s%s%s", conflicts ? "has conflicts" : "failed",
                                                     !isempty(ap_err) ? ": " : "", strempty(ap_err));
                                return 0;
                        }
                        r = write_tree(&c, true, &t1, &err);
                }
        }
        if (r >= 0 && streq(t0, t1)) return 2; /* the live tree already has these changes */
        if (r >= 0) r = diff_trees(g, t0, t1, &rr, &err);
        if (r >= 0) {
                r = write_small_file(rebased_path, rr.out, rr.out_len);
                run_result_done(&rr);
                return r < 0 ? r : 1;
        }
        if (r == -ENOMEM) return r;
        *why = strdup_printf("3-way merge not possible: %s", err ? err : strerror(-r));
        return 0;
}

static int apply_check_then_apply(const git_ctx *g, const char *patch, char **reason) {
        run_result rr;
        char *check_args[] = {(char *) "apply", (char *) "--check", (char *) patch, NULL};
        int r = run_git_argv(g, g->work_tree, 0, &rr, check_args);
        if (r < 0) {
                *reason = git_failure("apply --check", r, &rr);
                return r;
        }
        if (rr.exit_code != 0) {
                *reason = trimmed(*rr.err ? rr.err : "git apply --check failed");
                run_result_done(&rr);
                return 0;
        }
        run_result_done(&rr);
        char *apply_args[] = {(char *) "apply", (char *) patch, NULL};
        r = git_ok(g, g->work_tree, 0, &rr, reason, "apply (after a successful --check)", apply_args);
        if (r < 0) return r;
        run_result_done(&rr);
        return 1;
}

/* Does the live tree already hold the patch: does its reverse apply cleanly? */
static int reverse_applies(const git_ctx *g, const char *patch, char **reason) {
        run_result rr;
        char *args[] = {(char *) "apply", (char *) "-R", (char *) "--check", (char *) patch, NULL};
        int r = run_git_argv(g, g->work_tree, 0, &rr, args);
        if (r < 0) {
                *reason = git_failure("apply -R --check", r, &rr);
                return r;
        }
        r = rr.exit_code == 0 ? 1 : 0;
        run_result_done(&rr);
        return r;
}

/* Would the patch leave a directory of the live tree that git takes for a
 * repository with one of the patch's paths inside it? The pieces are those
 * the live tree has (untracked, ignored and empty entries too) and those the
 * patch's paths would create (a deleted one still counts: erring on the safe
 * side). Returns 1 with *why set, 0 if not, -errno. */
static int patch_plants_repository(const git_ctx *g, const char *patch, char **why) {
        run_result rr;
        _cleanup_free_ char *err = NULL;
        char *ns_args[] = {(char *) "apply", (char *) "--numstat", (char *) "-z", (char *) patch, NULL};
        int r = git_ok(g, g->work_tree, LIST_MAX, &rr, &err, "apply --numstat", ns_args);
        if (r < 0) {
                *why = TAKE_PTR(err);
                return r;
        }
        path_list pl = {};
        numstat_parse(rr.out, rr.out_len, collect_paths, &pl);
        run_result_done(&rr);
        _cleanup_strv_free_ char **paths = pl.paths;
        if (pl.r < 0) return pl.r;
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
                _cleanup_free_ char *q = *d ? quote_path(d) : strdup("the target directory");
                *why = q ? strdup_printf("the changeset would leave %s%s looking like a git repository to git (HEAD "
                                         "with refs, or with commondir) with its changes inside; "
                                         "not applied",
                                         q, *d ? "/" : "")
                         : NULL;
                return *why ? 1 : -ENOMEM;
        }
        return 0;
}

/* check_applied: only answer whether the tree already holds the patch. */
static int apply_impl(const char *directory, const char *patch_path, bool check_applied, char **reason) {
        if (isempty(directory) || isempty(patch_path)) {
                *reason = strdup("invalid arguments");
                return -EINVAL;
        }
        _cleanup_free_ char *dir = realpath(directory, NULL);
        if (!dir || !is_dir(dir)) {
                int r = dir ? -ENOTDIR : -errno;
                *reason = strdup_printf("cannot use %s: %s", directory, strerror(-r));
                return r;
        }
        _cleanup_free_ char *patch = realpath(patch_path, NULL);
        struct stat st;
        if (!patch || stat(patch, &st) < 0) {
                int r = -errno;
                *reason = strdup_printf("cannot read the patch %s: %s", patch_path, strerror(errno));
                return r;
        }
        if (st.st_size == 0) return check_applied ? 0 : 1; /* an empty changeset: nothing to do */

        const char *tmp = getenv("TMPDIR");
        _cleanup_free_ char *scratch = strdup_printf("%s/taskferry-apply-XXXXXX", isempty(tmp) ? "/tmp" : tmp);
        if (!scratch) return -ENOMEM;
        if (!mkdtemp(scratch)) {
                int r = -errno;
                *reason = strdup_printf("cannot create a scratch directory: %s", strerror(errno));
                return r;
        }
        _cleanup_(git_ctx_done) git_ctx g = {};
        g.git_dir = path_join(scratch, "git");
        g.work_tree = strdup(dir);
        g.index_file = path_join(scratch, "index");
        g.home = path_join(scratch, "home");
        _cleanup_free_ char *rebased = path_join(scratch, "rebased.patch");
        int r;
        if (!g.git_dir || !g.work_tree || !g.index_file || !g.home || !rebased) r = -ENOMEM;
        else if ((r = private_repo_create(g.git_dir)) < 0)
                *reason = strdup_printf("cannot create a private git directory: %s", strerror(-r));
        else if ((r = git_ctx_build_env(&g)) >= 0 && check_applied)
                r = reverse_applies(&g, patch, reason);
        else if (r >= 0 && (r = patch_plants_repository(&g, patch, reason)) != 0)
                r = r > 0 ? 0 : r;
        else if (r >= 0) {
                r = apply_check_then_apply(&g, patch, reason);
                if (r == 0) {
                        /* The plain patch does not fit the live tree: try a
                         * 3-way merge away from it. */
                        _cleanup_free_ char *why = NULL, *check_reason = TAKE_PTR(*reason);
                        int r3 = three_way_rebase(&g, patch, rebased, &why);
                        if (r3 == 2)
                                r = 1;
                        else if (r3 == 1) {
                                r = apply_check_then_apply(&g, rebased, reason);
                                if (r == 0) {
                                        _cleanup_free_ char *second = TAKE_PTR(*reason);
                                        *reason = strdup_printf("%s\n3-way merged patch did not apply: %s",
                                                                strempty(check_reason), strempty(second));
                                }
                        } else if (r3 < 0 && !why)
                                why = strdup_printf("3-way merge not possible: %s", strerror(-r3));
                        /* r3 <= 0: the patch does not apply; the tree is untouched. */
                        if (r == 0 && !*reason)
                                *reason = why ? strdup_printf("%s\n%s", strempty(check_reason), why)
                                              : TAKE_PTR(check_reason);
                }
        }
        (void) rm_rf(scratch);
        return r;
}

int changeset_is_applied(const char *directory, const char *patch_path) {
        _cleanup_free_ char *reason = NULL;
        return apply_impl(directory, patch_path, true, &reason);
}

int changeset_apply(const char *directory, const char *patch_path, char **ret_reason) {
        _cleanup_free_ char *reason = NULL;
        int r = apply_impl(directory, patch_path, false, &reason);
        if (r < 0 && !reason) reason = strdup(strerror(-r));
        if (ret_reason) *ret_reason = r > 0 ? NULL : TAKE_PTR(reason);
        return r;
}

/* ------------------------------------------------------------------------ */
/* numstat */

typedef struct numstat_sum {
        unsigned files, additions, deletions;
} numstat_sum;

static bool parse_count(const char *s, unsigned *ret) {
        if (!*s) return false;
        unsigned long long v = 0;
        for (; *s; s++) {
                if (*s < '0' || *s > '9') return false;
                v = v * 10 + (unsigned) (*s - '0');
                if (v > UINT_MAX) v = UINT_MAX;
        }
        *ret = (unsigned) v;
        return true;
}

static unsigned sat_add(unsigned a, unsigned b) {
        return a > UINT_MAX - b ? UINT_MAX : a + b;
}

static void sum_numstat(void *userdata, const char *adds, const char *dels, const char *old_path,
                        const char *new_path) {
        numstat_sum *s = userdata;
        unsigned a, d;
        if (parse_count(adds, &a) && parse_count(dels, &d)) {
                s->files = sat_add(s->files, 1);
                s->additions = sat_add(s->additions, a);
                s->deletions = sat_add(s->deletions, d);
        } else if (streq(adds, "-") && streq(dels, "-"))
                s->files = sat_add(s->files, 1); /* binary */
}

int changeset_numstat(const char *patch_path, unsigned *files, unsigned *additions, unsigned *deletions) {
        numstat_sum s = {};
        int r = 0;
        _cleanup_free_ char *patch = patch_path ? realpath(patch_path, NULL) : NULL;
        _cleanup_strv_free_ char **env = NULL;
        const char *path = getenv("PATH");
        if (patch) {
                /* Outside any repository: no config, attributes or discovery. */
                r = strv_pushf(&env, "PATH=%s", isempty(path) ? "/usr/local/bin:/usr/bin:/bin" : path);
                if (r >= 0) r = strv_push(&env, "HOME=/nonexistent");
                if (r >= 0) r = strv_push(&env, "LC_ALL=C");
                if (r >= 0) r = strv_push(&env, "GIT_CONFIG_NOSYSTEM=1");
                if (r >= 0) r = strv_push(&env, "GIT_CONFIG_GLOBAL=/dev/null");
                if (r >= 0) r = strv_push(&env, "GIT_CEILING_DIRECTORIES=/");
                char *argv[] = {(char *) "git", (char *) "apply", (char *) "--numstat", (char *) "-z", patch, NULL};
                run_result rr;
                if (r >= 0) r = run_command(argv, env, "/", LIST_MAX, -1, &rr);
                if (r >= 0) {
                        if (rr.exit_code == 0) numstat_parse(rr.out, rr.out_len, sum_numstat, &s);
                        run_result_done(&rr);
                }
                if (r == -EFBIG) r = 0;
        }
        if (files) *files = s.files;
        if (additions) *additions = s.additions;
        if (deletions) *deletions = s.deletions;
        return r < 0 ? r : 0;
}
