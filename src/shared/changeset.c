/* Changesets: extract the worker's overlay changes as a binary-safe git patch,
 * apply it to the live tree without ever leaving it half applied, and
 * summarize it (spec sandbox-changeset-env.md §5, DESIGN.md "Deliberate
 * differences", fixes for §11 D7 and D8).
 *
 * What a changeset is (issue 6)
 * -----------------------------
 * The difference between D as the worker found it and what it left, over the
 * paths it touched. The shim takes the base (changeset_snapshot) on the host
 * just before the worker starts, into <overlay root>/base; extraction then
 * reads only the overlay's upper dir, and accept merges 3-way with that base.
 * See "Base snapshots, extraction over the touched paths, 3-way accept" below.
 * Everything said here about the private repository, attributes, nested
 * repositories, refused paths, repository shapes and hooks holds for both
 * paths; what follows describes the whole-tree comparison, which still runs
 * when a task has no base (records from before, a snapshot that failed).
 *
 * How extraction works without a base (changeset_extract)
 * -------------------------------------------------------
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
 * nothing in memory before writing); a write that still fails partway (a
 * read-only directory, a full disk) is undone from the live contents of the
 * patch's paths, staged in a private index just before the apply. If the check fails, a 3-way merge is tried
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
#include <sched.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include <sys/xattr.h>

#include "disk-budget.h"
#include "git-cat.h"
#include "overlay.h"
#include "process-util.h"
#include "util.h"

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

/* Add a child's warnings to w: the NUL-terminated lines from p to end, of
 * the child_total it counted (the lines past CHANGESET_WARNINGS_MAX are
 * counted, not sent). */
static int warnings_add_reply(warnings *w, const char *p, const char *end, size_t child_total) {
        size_t received = 0;
        for (; p < end; p += strlen(p) + 1) {
                if (!*p) continue;
                int r = warnings_add_line(w, strdup(p));
                if (r < 0) return r;
                received++;
        }
        if (child_total > received) w->total += child_total - received;
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
        char *base_objects; /* the task's base snapshot object store, also an alternate (NULL: none) */
        char *home;         /* a nonexistent HOME, so no user file is read by default */
        char **env;         /* built from the above */
} git_ctx;

static void git_ctx_done(git_ctx *g) {
        free(g->git_dir);
        free(g->work_tree);
        free(g->index_file);
        free(g->alternates);
        free(g->base_objects);
        free(g->home);
        strv_free(g->env);
        memset(g, 0, sizeof *g);
}

/* "PATH=" ours, or the usual directories when we have none. */
static int env_push_path(char ***env) {
        const char *path = getenv("PATH");
        return strv_pushf(env, "PATH=%s", isempty(path) ? "/usr/local/bin:/usr/bin:/bin" : path);
}

/* The environment of every git run against g (g->env): nothing of ours but
 * PATH, no system or global config, no user file (HOME is g->home), git's
 * own prompts and pager off, and g's directories; with no git_dir it is the
 * environment for a git outside any repository. */
static int git_ctx_build_env(git_ctx *g) {
        _cleanup_strv_free_ char **env = NULL;
        int r = env_push_path(&env);
        if (r >= 0) r = strv_pushf(&env, "HOME=%s", g->home);
        if (r >= 0) r = strv_push(&env, "LC_ALL=C");
        if (r >= 0) r = strv_push(&env, "GIT_CONFIG_NOSYSTEM=1");
        if (r >= 0) r = strv_push(&env, "GIT_CONFIG_GLOBAL=/dev/null");
        if (r >= 0) r = strv_push(&env, "GIT_ATTR_NOSYSTEM=1");
        if (r >= 0) r = strv_push(&env, "GIT_CEILING_DIRECTORIES=/");
        if (r >= 0) r = strv_push(&env, "GIT_TERMINAL_PROMPT=0");
        if (r >= 0) r = strv_push(&env, "GIT_NO_REPLACE_OBJECTS=1");
        if (r >= 0) r = strv_push(&env, "GIT_PAGER=cat");
        if (r >= 0 && g->git_dir) r = strv_pushf(&env, "GIT_DIR=%s", g->git_dir);
        if (r >= 0 && g->work_tree) r = strv_pushf(&env, "GIT_WORK_TREE=%s", g->work_tree);
        if (r >= 0 && g->index_file) r = strv_pushf(&env, "GIT_INDEX_FILE=%s", g->index_file);
        if (r >= 0 && (g->alternates || g->base_objects)) {
                _cleanup_free_ char *q = g->alternates ? quote_alternate(g->alternates) : strdup("");
                _cleanup_free_ char *qb = g->base_objects ? quote_alternate(g->base_objects) : strdup("");
                r = q && qb ? strv_pushf(&env, "GIT_ALTERNATE_OBJECT_DIRECTORIES=%s%s%s", qb, *qb && *q ? ":" : "", q)
                            : -ENOMEM;
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

/* g0's repository, objects and HOME with an index of its own (index_file)
 * and, with_work_tree, g0's work tree (else none), its environment built:
 * a second index over the same private repository. 0 or -errno. */
static int git_ctx_copy(const git_ctx *g0, const char *index_file, bool with_work_tree, git_ctx *g) {
        if (!(g->git_dir = strdup(g0->git_dir)) || !(g->home = strdup(g0->home)) ||
            !(g->index_file = strdup(index_file)) || (with_work_tree && !(g->work_tree = strdup(g0->work_tree))) ||
            (g0->alternates && !(g->alternates = strdup(g0->alternates))) ||
            (g0->base_objects && !(g->base_objects = strdup(g0->base_objects))))
                return -ENOMEM;
        return git_ctx_build_env(g);
}

/* "<the directory of g's index>/name": a file beside g's other scratch state. */
static char *git_ctx_scratch_path(const git_ctx *g, const char *name) {
        const char *sl = g->index_file ? strrchr(g->index_file, '/') : NULL;
        return sl ? strdup_printf("%.*s/%s", (int) (sl - g->index_file), g->index_file, name) : NULL;
}

/* Where a scratch repository's alternates and exclude rules come from. */
typedef struct scratch_repo {
        const char *work_tree; /* GIT_WORK_TREE (NULL: none) */
        const char *objects;   /* the real repository's object store: an alternate when it is a directory (NULL: none) */
        const char *base_objects; /* a base snapshot's object store, an alternate too (NULL: none) */
        const char *excludes;  /* the text of info/exclude (NULL: empty) */
        size_t excludes_len;
} scratch_repo;

/* The private repository T of one job, in scratch (a private directory the
 * caller made and removes): T = <scratch>/git, created here, with the index
 * <scratch>/index and HOME <scratch>/home (never created, so git reads no
 * user file), and g's environment built. 0, or -errno (*err set when a
 * file could not be made). */
static int git_ctx_scratch(git_ctx *g, const char *scratch, const scratch_repo *o, char **err) {
        g->git_dir = path_join(scratch, "git");
        g->index_file = path_join(scratch, "index");
        g->home = path_join(scratch, "home");
        if (!g->git_dir || !g->index_file || !g->home) return -ENOMEM;
        if (o->work_tree && !(g->work_tree = strdup(o->work_tree))) return -ENOMEM;
        if (o->objects && is_dir(o->objects) && !(g->alternates = strdup(o->objects))) return -ENOMEM;
        if (o->base_objects && !(g->base_objects = strdup(o->base_objects))) return -ENOMEM;
        int r = private_repo_create(g->git_dir);
        if (r < 0) {
                *err = strdup_printf("cannot create the private git directory in %s: %s", scratch, strerror(-r));
                return r;
        }
        if (o->excludes) {
                _cleanup_free_ char *exclude_path = path_join(g->git_dir, "info/exclude");
                if (!exclude_path) return -ENOMEM;
                if ((r = write_small_file(exclude_path, o->excludes, o->excludes_len)) < 0) {
                        *err = strdup_printf("cannot prepare %s: %s", scratch, strerror(-r));
                        return r;
                }
        }
        return git_ctx_build_env(g);
}

/* The bind sources that hide a nested .git (a directory or a file) in a
 * view: <scratch>/empty-dir (mode 0500) and <scratch>/empty-file. 0, or
 * -errno (*err set). */
static int hiders_create(const char *scratch, char **ret_dir, char **ret_file, char **err) {
        _cleanup_free_ char *d = path_join(scratch, "empty-dir"), *f = path_join(scratch, "empty-file");
        if (!d || !f) return -ENOMEM;
        int r = mkdir(d, 0500) < 0 ? -errno : write_small_file(f, "", 0);
        if (r < 0) {
                *err = strdup_printf("cannot prepare %s: %s", scratch, strerror(-r));
                return r;
        }
        *ret_dir = TAKE_PTR(d);
        *ret_file = TAKE_PTR(f);
        return 0;
}

/* "<pre_head>", or "<pre_head>:<prefix>" for a subdirectory of the work
 * tree (prefix "a/b/" as rev-parse --show-prefix prints it): the tree of D
 * at dispatch. */
static int base_treeish(const char *pre_head, const char *prefix, char **ret) {
        _cleanup_free_ char *p = strdup(strempty(prefix));
        if (!p) return -ENOMEM;
        size_t n = strlen(p);
        while (n > 0 && p[n - 1] == '/') p[--n] = 0;
        *ret = n ? strdup_printf("%s:%s", pre_head, p) : strdup(pre_head);
        return *ret ? 0 : -ENOMEM;
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

/* Run git and read the one object id it prints: 0 with it in *ret, -errno
 * (*err set; "git <what> printed no <noun>" when it printed none). */
static int git_oid(const git_ctx *g, const char *cwd, const char *what, char *const *args, const char *noun, char **ret,
                   char **err) {
        run_result rr;
        int r = git_ok(g, cwd, SMALL_MAX, &rr, err, what, args);
        if (r < 0) return r;
        strip_trailing_space(rr.out);
        if (!is_hex_oid(rr.out)) {
                *err = strdup_printf("git %s printed no %s", what, noun);
                run_result_done(&rr);
                return -EIO;
        }
        *ret = strdup(rr.out);
        run_result_done(&rr);
        return *ret ? 0 : -ENOMEM;
}

static int git_line(const git_ctx *g, const char *cwd, char **err, const char *what, char *const *args, char **ret) {
        return git_oid(g, cwd, what, args, "object id", ret, err);
}

/* `git read-tree <tree>` into g's index, run in cwd: 0, -errno (*err set, naming it what). */
static int git_read_tree(const git_ctx *g, const char *cwd, const char *tree, const char *what, char **err) {
        char *args[] = {(char *) "read-tree", (char *) tree, NULL};
        run_result rr;
        int r = git_ok(g, cwd, 0, &rr, err, what, args);
        if (r >= 0) run_result_done(&rr);
        return r;
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
        const char *home = getenv("HOME"), *xdg = getenv("XDG_CONFIG_HOME");
        int r = env_push_path(&env);
        if (r >= 0 && home) r = strv_pushf(&env, "HOME=%s", home);
        if (r >= 0 && xdg) r = strv_pushf(&env, "XDG_CONFIG_HOME=%s", xdg);
        if (r >= 0) r = strv_push(&env, "LC_ALL=C");
        if (r >= 0) r = strv_push(&env, "GIT_TERMINAL_PROMPT=0");
        if (r < 0) return r;
        *ret = TAKE_PTR(env);
        return 0;
}

/* Ask git (host view, read-only) for a path of dir's repository:
 * `rev-parse --path-format=absolute <what> [<arg>]` (--git-common-dir;
 * --git-path index). 1 with the path in *ret, 0 when dir is in no repository
 * (git printed no absolute path), -errno. */
static int host_git_path(const char *dir, const char *what, const char *arg, char **ret) {
        _cleanup_strv_free_ char **env = NULL;
        int r = host_env(&env);
        if (r < 0) return r;
        char *argv[] = {(char *) "git", (char *) "-c", (char *) "core.fsmonitor=false", (char *) "-C", (char *) dir,
                        (char *) "rev-parse", (char *) "--path-format=absolute", (char *) what, (char *) arg, NULL};
        run_result rr;
        if ((r = run_command(argv, env, "/", SMALL_MAX, -1, &rr)) < 0) return r;
        r = 0;
        if (rr.exit_code == 0 && rr.out && rr.out[0] == '/') {
                strip_trailing_space(rr.out);
                r = (*ret = strdup(rr.out)) ? 1 : -ENOMEM;
        }
        run_result_done(&rr);
        return r;
}

/* `git -C dir config --path --get <key>` in the host view: 0 with the value
 * in *ret (NULL when it is unset or empty), -errno. */
static int host_config_path(char **env, const char *dir, const char *key, char **ret) {
        char *argv[] = {(char *) "git", (char *) "-C", (char *) dir, (char *) "config", (char *) "--path",
                        (char *) "--get", (char *) key, NULL};
        run_result rr;
        int r = run_command(argv, env, "/", SMALL_MAX, -1, &rr);
        if (r < 0) return r;
        *ret = NULL;
        if (rr.exit_code == 0) {
                strip_trailing_space(rr.out);
                if (*rr.out && !(*ret = strdup(rr.out))) r = -ENOMEM;
        }
        run_result_done(&rr);
        return r;
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
                _cleanup_free_ char *hooks = NULL;
                if ((r = host_config_path(env, dir, "core.hooksPath", &hooks)) < 0) return r;
                _cleanup_free_ char *abs = !hooks ? NULL : hooks[0] == '/' ? strdup(hooks) : path_join(ri->toplevel, hooks);
                _cleanup_free_ char *real = abs ? realpath(abs, NULL) : NULL;
                const char *h = real ? real : abs;
                if (h && path_is_at_or_below(h, dir)) {
                        const char *rel = h + strlen(dir);
                        while (*rel == '/') rel++;
                        if (!(ri->hooks_rel = strdup(rel))) return -ENOMEM;
                }
        }

        /* The user's excludes file (gitignore(5)): core.excludesFile, else
         * $XDG_CONFIG_HOME/git/ignore or ~/.config/git/ignore. */
        _cleanup_free_ char *excludes_file = NULL;
        if ((r = host_config_path(env, dir, "core.excludesFile", &excludes_file)) < 0) return r;
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
        uint64_t file_max;         /* snapshot: untracked files larger than this stay out of the base (0: no bound) */
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

/* Snapshot: tracked files now larger than c->file_max (a dirty file made
 * huge: `truncate -s 8G`) keep their index version in the base instead of
 * being hashed before the worker starts; a changeset never carries them
 * anyway. They are marked assume-unchanged in the private index, so
 * `add -A` does not read them. One lstat per tracked file, as `git status`. */
static int keep_large_tracked(extract_child *c, char **err) {
        run_result rr;
        char *ls_args[] = {(char *) "ls-files", (char *) "-z", (char *) "--cached", NULL};
        int r = git_ok(c->g, c->a->directory, LIST_MAX, &rr, err, "ls-files --cached", ls_args);
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
                           NULL, err);
}

/* `git add <args>` with --ignore-errors among them: a path git refuses
 * (verify_path(): .git in any spelling its NTFS/HFS protections know, an
 * unreadable file) is skipped, not fatal: exit status 1. 0 with
 * *ret_add_err = git's stderr when it refused any (NULL when it refused
 * none), -errno (*err set, naming the command what). */
static int git_add_tolerant(const git_ctx *g, const char *cwd, char *const *args, const char *what, char **ret_add_err,
                            char **err) {
        run_result rr;
        int r = run_git_argv(g, cwd, 0, &rr, args);
        if (r < 0 || (rr.exit_code != 0 && rr.exit_code != 1)) {
                *err = git_failure(what, r, &rr);
                if (r >= 0) run_result_done(&rr);
                return r < 0 ? r : -EIO;
        }
        *ret_add_err = NULL;
        if (rr.exit_code == 1 && !(*ret_add_err = strdup(strempty(rr.err)))) r = -ENOMEM;
        run_result_done(&rr);
        return r;
}

/* The gitlinks `git add` made (links: the nested repositories it found)
 * flattened: each nested .git hidden in this view and the links dropped
 * from the index, so that the next add records the files themselves. A
 * link seen in an earlier round (tried, which this extends) could not be
 * flattened: -ENOTSUP. 0, or -errno (*err set). */
static int flatten_gitlinks(extract_child *c, char **links, char ***tried, char **err) {
        int r;
        for (size_t i = 0; links[i]; i++) {
                if (strv_contains(*tried, links[i])) {
                        *err = strdup_printf("cannot record the contents of nested repository %s", links[i]);
                        return -ENOTSUP;
                }
                if ((r = strv_push(tried, links[i])) < 0) return r;
                if ((r = hide_nested_git(c, links[i], err)) < 0) return r;
        }
        return index_force_remove(c, links, err);
}

/* `git add -A` of the current view, with every nested repository flattened
 * into plain files (see the top of this file). */
static int add_all_flattened(extract_child *c, const char *view, char **err) {
        _cleanup_strv_free_ char **tried_gitlinks = NULL;
        if (c->file_max) {
                int r = keep_large_tracked(c, err);
                if (r < 0) return r;
        }
        for (unsigned round = 0; round < FLATTEN_ROUNDS_MAX; round++) {
                /* Untracked nested repositories are listed as "dir/". */
                char *ls_args[] = {(char *) "ls-files", (char *) "-o", (char *) "-z", (char *) "--exclude-standard", NULL};
                run_result rr;
                int r = git_ok(c->g, c->a->directory, LIST_MAX, &rr, err, "ls-files -o", ls_args);
                if (r < 0) return r;
                int hidden = 0;
                _cleanup_close_ int dfd = c->file_max ? open(c->a->directory, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
                _cleanup_free_ char *exclude_path = c->file_max ? path_join(c->g->git_dir, "info/exclude") : NULL;
                for (char *p = rr.out; p < rr.out + rr.out_len && r >= 0; p += strlen(p) + 1) {
                        size_t n = strlen(p);
                        struct stat st;
                        if (n > 0 && p[n - 1] != '/' && dfd >= 0 && exclude_path &&
                            fstatat(dfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
                            (uint64_t) st.st_size > c->file_max) {
                                /* not hashed into the base: a changeset never carries it anyway */
                                _cleanup_free_ char *pat = exclude_pattern_for(p);
                                if (pat) r = append_file(exclude_path, pat, strlen(pat));
                                continue;
                        }
                        if (n == 0 || p[n - 1] != '/') continue;
                        r = hide_nested_git(c, p, err);
                        if (r > 0) hidden++;
                }
                run_result_done(&rr);
                if (r < 0) return r;
                if (hidden > 0) continue;

                char *add_args[] = {(char *) "add", (char *) "-A", (char *) "--ignore-errors",
                                    (char *) "--no-warn-embedded-repo", NULL};
                _cleanup_free_ char *what = strdup_printf("add -A (%s)", view), *add_err = NULL;
                if (!what) return -ENOMEM;
                if ((r = git_add_tolerant(c->g, c->a->directory, add_args, what, &add_err, err)) < 0) return r;

                _cleanup_strv_free_ char **links = NULL;
                if ((r = index_gitlinks(c, &links, err)) < 0) return r;
                if (!links) return c->refused ? refused_collect(c, add_err, c->refused, err) : 0;
                if ((r = flatten_gitlinks(c, links, &tried_gitlinks, err)) < 0) return r;
        }
        *err = strdup_printf("nested repositories deeper than %d levels", FLATTEN_ROUNDS_MAX);
        return -ELOOP;
}

/* `git write-tree [--missing-ok]` of g's index, run in cwd: 0 with the tree id in *ret_oid, -errno (*err set). */
static int write_tree(const git_ctx *g, const char *cwd, bool missing_ok, char **ret_oid, char **err) {
        char *args[] = {(char *) "write-tree", missing_ok ? (char *) "--missing-ok" : NULL, NULL};
        return git_oid(g, cwd, "write-tree", args, "tree id", ret_oid, err);
}

/* Phase A: the host view. */
static int child_before(extract_child *c, char **ret_tree, char **err) {
        run_result rr;
        int r;
        if (c->base_treeish) {
                _cleanup_free_ char *spec = strdup_printf("%s^{tree}", c->base_treeish);
                if (!spec) return -ENOMEM;
                char *rp_args[] = {(char *) "rev-parse", (char *) "--verify", (char *) "-q", spec, NULL};
                r = run_git_argv(c->g, "/", SMALL_MAX, &rr, rp_args);
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
        if ((r = write_tree(c->g, c->a->directory, false, ret_tree, err)) < 0) return r;

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

/* Mount the task's overlay on D (lower D, a->upper and a->work) in this
 * mount namespace. The mount can fail with EBUSY for a moment while the
 * task's own overlay is still being torn down: it is retried after 100, 300
 * and 900 ms. A final EBUSY's message always says "Device or resource busy"
 * (libmount words it its own way), so that the failure reads as the busy
 * race it is. 0, or -errno with *err set. */
static int overlay_mount_retry(const changeset_extract_args *a, char **err) {
        static const unsigned backoff_ms[] = {100, 300, 900};
        for (size_t attempt = 0;; attempt++) {
                _cleanup_free_ char *merr = NULL;
                int r = overlay_mount(a->directory, a->upper, a->work, a->directory, true, &merr);
                if (r >= 0) return 0;
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
}

/* Phase B: the merged view. */
static int child_after(extract_child *c, char **ret_tree, char **err) {
        int r = overlay_mount_retry(c->a, err);
        if (r < 0) return r;
        /* New view: the earlier hides are covered by the overlay. */
        strv_free(c->hidden);
        c->hidden = NULL;
        free(c->g->alternates);
        c->g->alternates = NULL;
        if ((r = git_ctx_build_env(c->g)) < 0) return r;
        if ((r = add_all_flattened(c, "merged view", err)) < 0) return r;
        return write_tree(c->g, c->a->directory, true, ret_tree, err);
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

/* Fork fn(userdata, out_fd) in a child that dies with us (and run_command's
 * git with it), and read what it writes: "O<text>" or "E<error>". name is
 * the child's for safe_fork; what names it in our errors ("the git
 * process"). 0 with the reply (NUL-terminated) in *ret_reply, -EIO with *err
 * set when the child failed or said "E", -errno. */
typedef void (*child_fn)(void *userdata, int out_fd);
static int run_child(const char *name, const char *what, child_fn fn, void *userdata, char **ret_reply, size_t *ret_len,
                     char **err) {
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
                if (reply[0] == 'E') *err = strdup(reply + 1);
                else if (si.si_code != CLD_EXITED)
                        *err = strdup_printf("%s was killed by %s", what, strnull(signal_to_name(si.si_status)));
                else
                        *err = strdup_printf("%s failed", what);
                return -EIO;
        }
        *ret_reply = TAKE_PTR(reply);
        if (ret_len) *ret_len = len;
        return 0;
}

/* A view child's last words, read by run_child and warnings_add_reply:
 * "O<trees> <warnings counted>\n" then the kept warnings, each
 * NUL-terminated (they are quoted: no NUL, no newline); or "E<error>" when
 * r < 0. Exits 0, or 1 with the error. */
static _Noreturn void child_reply(int out_fd, int r, const char *trees, const warnings *w, const char *err) {
        _cleanup_free_ char *msg = r >= 0 ? strdup_printf("O%s %zu\n", trees, w->total)
                                          : strdup_printf("E%s", err ? err : "out of memory");
        if (msg) (void) loop_write(out_fd, msg, strlen(msg));
        for (size_t i = 0; r >= 0 && w->lines && w->lines[i]; i++)
                (void) loop_write(out_fd, w->lines[i], strlen(w->lines[i]) + 1);
        _exit(r >= 0 ? 0 : 1);
}

static _Noreturn void child_main(void *userdata, int out_fd) {
        extract_child *c = userdata;
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
        _cleanup_free_ char *trees = r >= 0 ? strdup_printf("%s %s", before, after) : NULL;
        if (r >= 0 && !trees) r = -ENOMEM;
        child_reply(out_fd, r, trees, &c->w, err);
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

/* Leave out of the after tree every change inside a directory that git
 * would take for a repository once the patch is applied: its pieces are
 * counted from the after tree and from what the host has there (ignored
 * and untracked entries, empty directories). A changed path in such a
 * directory goes back to its before state in the index (removed, or its
 * old entry restored) and the tree is written again. Reverting only removes
 * pieces that the host does not have, so one pass leaves no repository made
 * of the worker's changes. */
static int drop_repository_shapes(const git_ctx *g, const char *dir, const char *hooks_rel, const char *before,
                                  char *after, size_t after_size, warnings *w, char **err) {
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
                if (r >= 0) r = git_ok(g, "/", LIST_MAX, &rr, err, "ls-tree", top_args);
                if (r >= 0) {
                        r = collect_pieces(&after_pieces, &rr);
                        run_result_done(&rr);
                }
                if (r >= 0 && dirs)
                        r = git_batched(g, "/", LIST_MAX, "ls-tree", sub_prefix, dirs, false, 1, collect_pieces_cb,
                                        &after_pieces, err);
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
                        _cleanup_free_ char *qdir = hook ? quote_path(*hooks_rel ? hooks_rel : ".")
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
        const char *cwd = dir;
        if (removals)
                r = git_batched(g, cwd, 0, "update-index --force-remove", rm_prefix, removals, false, 1, NULL, NULL, err);
        if (r >= 0 && restores)
                r = git_batched(g, cwd, 0, "update-index --cacheinfo", ci_prefix, restores, false, 2, NULL, NULL, err);
        _cleanup_free_ char *tree = NULL;
        if (r >= 0) r = write_tree(g, dir, true, &tree, err);
        if (r < 0) return r;
        if (strlen(tree) >= after_size) return -EIO;
        strcpy(after, tree);
        return 1;
}

static int patch_applies_to_tree(const git_ctx *g0, const char *scratch, const char *tree, const char *patch, char **why);

/* The end of an extraction, in the host view: the changes inside a
 * repository shape (or below core.hooksPath, hooks_rel) left out of after
 * (rewritten in place: after_size bytes), then the patch before..after
 * written to a->patch_path (atomically, 0600) and the warnings handed over.
 * With check_scratch, a non-empty patch is written only if it applies to
 * before (checked with an index in that directory). 1 if the patch is
 * non-empty, 0 if empty, -errno (*err set). */
static int extract_finish(const changeset_extract_args *a, const git_ctx *g, const char *dir, const char *hooks_rel,
                          const char *before, char *after, size_t after_size, warnings *w, const char *check_scratch,
                          char **err) {
        int r = drop_repository_shapes(g, dir, hooks_rel, before, after, after_size, w, err);
        if (r < 0) return r;
        run_result rr = {};
        bool diffed = false;
        if (!streq(before, after)) {
                if ((r = diff_trees(g, before, after, &rr, err)) < 0) return r;
                diffed = rr.out_len > 0;
                if (!diffed) run_result_done(&rr);
        }
        if (diffed && check_scratch) {
                /* pending only if it applies to its own base */
                _cleanup_free_ char *patch_tmp = path_join(check_scratch, "patch"), *why = NULL;
                r = patch_tmp ? write_small_file(patch_tmp, rr.out, rr.out_len) : -ENOMEM;
                if (r >= 0) r = patch_applies_to_tree(g, check_scratch, before, patch_tmp, &why);
                if (r <= 0) {
                        run_result_done(&rr);
                        *err = r == 0 ? strdup_printf("the patch does not apply to its own base: %s", strempty(why))
                                      : why ? TAKE_PTR(why) : strdup(strerror(-r));
                        return r == 0 ? -EIO : r;
                }
        }
        r = write_file_atomic(a->patch_path, diffed ? rr.out : "", diffed ? rr.out_len : 0, 0600);
        if (diffed) run_result_done(&rr);
        if (r < 0) {
                *err = strdup_printf("cannot write %s: %s", a->patch_path, strerror(-r));
                return r;
        }
        if (a->ret_warnings && (r = warnings_finish(w, a->ret_warnings)) < 0) return r;
        return diffed ? 1 : 0;
}

/* D and a->scratch_dir, resolved; the scratch dir must lie outside D (inside
 * it, the merged view would let the worker plant our git state). 0, or
 * -errno (*err set). */
static int extract_resolve(const changeset_extract_args *a, char **ret_dir, char **ret_scratch, char **err) {
        _cleanup_free_ char *dir = realpath(a->directory, NULL), *scratch = realpath(a->scratch_dir, NULL);
        if (!dir || !scratch) {
                int r = -errno;
                *err = strdup_printf("cannot resolve %s: %s", dir ? a->scratch_dir : a->directory, strerror(errno));
                return r;
        }
        if (path_is_at_or_below(scratch, dir)) {
                *err = strdup_printf("the scratch directory %s lies inside the target directory", scratch);
                return -EINVAL;
        }
        *ret_dir = TAKE_PTR(dir);
        *ret_scratch = TAKE_PTR(scratch);
        return 0;
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
        _cleanup_free_ char *dir = NULL, *scratch = NULL;
        int r = extract_resolve(a, &dir, &scratch, err);
        if (r < 0) return r;

        _cleanup_(repo_info_done) repo_info ri = {};
        r = repo_info_gather(dir, &ri);
        if (r < 0) {
                *err = strdup_printf("cannot run git: %s", strerror(-r));
                return r;
        }
        _cleanup_free_ char *base = NULL, *objects = NULL, *empty_dir = NULL, *empty_file = NULL;
        if (a->pre_head && (r = base_treeish(a->pre_head, ri.prefix, &base)) < 0) return r;
        if (ri.common_dir && !(objects = path_join(ri.common_dir, "objects"))) return -ENOMEM;
        _cleanup_(git_ctx_done) git_ctx g = {};
        scratch_repo o = {.work_tree = dir, .objects = objects, .excludes = strempty(ri.excludes),
                          .excludes_len = strlen(strempty(ri.excludes))};
        if ((r = git_ctx_scratch(&g, scratch, &o, err)) < 0 || (r = hiders_create(scratch, &empty_dir, &empty_file, err)) < 0)
                return r;

        extract_child c = {.a = a, .g = &g, .base_treeish = base, .empty_dir = empty_dir, .empty_file = empty_file,
                           .host_fd = -1};
        /* The child works on the canonical D. */
        changeset_extract_args ca = *a;
        ca.directory = dir;
        c.a = &ca;
        _cleanup_free_ char *reply = NULL;
        size_t reply_len = 0;
        if ((r = run_child("changeset-extract", "the extraction process", child_main, &c, &reply, &reply_len, err)) < 0)
                return r;
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
        if ((r = warnings_add_reply(&w, nl + 1, reply + reply_len, child_total)) < 0) return r;
        return extract_finish(a, &g, dir, ri.hooks_rel, before, after, sizeof after, &w, NULL, err);
}

static char *base_tree_read(const char *base_dir);
static int extract_touched(const changeset_extract_args *a, const char *dir, const char *scratch, const char *base_tree,
                           char **err);

/* A scratch dir of this attempt's own: <root>/scratch.<pid>, after removing
 * what earlier attempts left (a killed daemon's job may still run: it never
 * shares our dir, and its patch, were it to finish, has the same bytes). */
static int scratch_begin(const char *root, char **ret) {
        _cleanup_free_ char *mine = strdup_printf("%s/scratch.%d", root, (int) getpid());
        if (!mine) return -ENOMEM;
        DIR *d = opendir(root);
        if (!d) return -errno;
        for (struct dirent *de; (de = readdir(d));) {
                if (!streq(de->d_name, "scratch") && !startswith(de->d_name, "scratch.")) continue;
                _cleanup_free_ char *p = path_join(root, de->d_name);
                if (p) (void) rm_rf(p);
        }
        closedir(d);
        if (mkdir(mine, 0700) < 0) return -errno;
        *ret = TAKE_PTR(mine);
        return 0;
}

/* The base path needs git >= 2.38 (merge-tree --write-tree; --pathspec-from-file
 * of add and rm is 2.26). Older git: the whole-tree comparison and plain apply. */
static bool git_has_merge_tree(void) {
        static int cached = -1;
        if (cached >= 0) return cached;
        char *argv[] = {(char *) "git", (char *) "--version", NULL};
        run_result rr;
        unsigned major = 0, minor = 0;
        if (run_command(argv, NULL, "/", SMALL_MAX, -1, &rr) >= 0) {
                if (rr.exit_code == 0 && rr.out) (void) sscanf(rr.out, "git version %u.%u", &major, &minor);
                run_result_done(&rr);
        }
        cached = major > 2 || (major == 2 && minor >= 38);
        return cached;
}

static int extract_dispatch(const changeset_extract_args *a, char **err) {
        if (!a || isempty(a->directory) || isempty(a->upper) || isempty(a->work) || isempty(a->patch_path) ||
            a->directory[0] != '/' || (isempty(a->scratch_dir) && isempty(a->overlay_root))) {
                *err = strdup("invalid arguments");
                return -EINVAL;
        }
        _cleanup_free_ char *own = NULL;
        changeset_extract_args b = *a;
        int r;
        if (isempty(a->scratch_dir)) {
                if ((r = scratch_begin(a->overlay_root, &own)) < 0) {
                        *err = strdup_printf("cannot create a scratch dir in %s: %s", a->overlay_root, strerror(-r));
                        return r;
                }
                b.scratch_dir = own;
        }
        _cleanup_free_ char *base_tree = git_has_merge_tree() ? base_tree_read(a->base_dir) : NULL;
        if (!base_tree) r = extract_impl(&b, err);
        else {
                _cleanup_free_ char *dir = NULL, *scratch = NULL;
                if ((r = extract_resolve(&b, &dir, &scratch, err)) >= 0 &&
                    (r = extract_touched(&b, dir, scratch, base_tree, err)) == -EXDEV) {
                        /* the upper dir needs the lower to be read: compare whole trees, in a clean scratch */
                        _cleanup_free_ char *again = strdup_printf("%s/full", scratch);
                        if (!again) r = -ENOMEM;
                        else if (mkdir(again, 0700) < 0) r = -errno;
                        else {
                                b.scratch_dir = again;
                                r = extract_impl(&b, err);
                        }
                }
        }
        if (own) (void) rm_rf(own);
        return r;
}

int changeset_extract(const changeset_extract_args *a, char **ret_error) {
        _cleanup_free_ char *err = NULL;
        if (a && a->ret_warnings) *a->ret_warnings = NULL;
        int r = extract_dispatch(a, &err);
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

/* The paths of a patch, each once, sorted (strcmp): collected in O(1) per
 * path, sorted and deduplicated once by path_list_finish() (a search per
 * insert made a 10,000-file patch cost 50 million string compares). */
typedef struct path_list {
        char **paths; /* NULL-terminated */
        size_t n, allocated;
        int r;
} path_list;

static void path_list_add(path_list *pl, const char *path) {
        if (pl->r < 0) return;
        if (pl->n + 2 > pl->allocated) {
                size_t na = pl->allocated ? 2 * pl->allocated : 64;
                char **np = reallocarray(pl->paths, na, sizeof *np);
                if (!np) {
                        pl->r = -ENOMEM;
                        return;
                }
                pl->paths = np;
                pl->allocated = na;
        }
        if (!(pl->paths[pl->n] = strdup(path))) {
                pl->r = -ENOMEM;
                return;
        }
        pl->paths[++pl->n] = NULL;
}

static void collect_paths(void *userdata, const char *adds, const char *dels, const char *old_path,
                          const char *new_path) {
        path_list *pl = userdata;
        if (old_path) path_list_add(pl, old_path);
        path_list_add(pl, new_path);
}

static int strp_cmp(const void *a, const void *b) { return strcmp(*(char *const *) a, *(char *const *) b); }

static void path_list_finish(path_list *pl) {
        if (pl->n == 0) return;
        qsort(pl->paths, pl->n, sizeof *pl->paths, strp_cmp);
        size_t k = 1;
        for (size_t i = 1; i < pl->n; i++) {
                if (streq(pl->paths[i], pl->paths[k - 1])) free(pl->paths[i]);
                else pl->paths[k++] = pl->paths[i];
        }
        pl->paths[k] = NULL;
        pl->n = k;
}

/* The paths a patch touches (both sides of a rename), each once, sorted
 * (strcmp): `git apply --numstat -z` run with g in cwd. 0 with *ret
 * (NULL-terminated; NULL when none), -errno (*err set when git failed). */
static int patch_paths(const git_ctx *g, const char *cwd, const char *patch, char ***ret, char **err) {
        char *args[] = {(char *) "apply", (char *) "--numstat", (char *) "-z", (char *) patch, NULL};
        run_result rr;
        int r = git_ok(g, cwd, LIST_MAX, &rr, err, "apply --numstat", args);
        if (r < 0) return r;
        path_list pl = {};
        numstat_parse(rr.out, rr.out_len, collect_paths, &pl);
        path_list_finish(&pl);
        run_result_done(&rr);
        if (pl.r < 0) {
                strv_free(pl.paths);
                return pl.r;
        }
        *ret = pl.paths;
        return 0;
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
        _cleanup_strv_free_ char **paths = NULL, **ui = NULL;
        _cleanup_free_ char *err = NULL, *t0 = NULL, *t1 = NULL, *ap_err = NULL;
        run_result rr;

        /* Preimage blobs can only come from the live repository's objects. */
        _cleanup_free_ char *common = NULL;
        int r = host_git_path(g->work_tree, "--git-common-dir", NULL, &common);
        if (r <= 0) return r; /* 0: not a repository, no base to merge with */
        if (!(g->alternates = path_join(common, "objects"))) return -ENOMEM;
        if ((r = git_ctx_build_env(g)) < 0) return r;

        r = patch_paths(g, g->work_tree, patch, &paths, &err);
        if (r >= 0) {
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
                r = write_tree(g, g->work_tree, true, &t0, &err);
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
                        r = write_tree(g, g->work_tree, true, &t1, &err);
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

static int write_specs(const char *path, char **a, char **b);

static int collect_nul_paths(void *userdata, const run_result *rr) {
        char ***l = userdata;
        int r = 0;
        for (char *p = rr->out; r >= 0 && p < rr->out + rr->out_len; p += strlen(p) + 1)
                if (*p) r = strv_push(l, p);
        return r;
}

/* The live contents of the paths `patch` touches, staged into a private
 * index (<dir of g->index_file>/<index_name>) over start_tree (NULL: an
 * empty index), as a tree in *ret. Only paths the live tree has (no
 * symlink followed) or the index holds are named, so no pathspec fails. */
static int stage_patch_paths(const git_ctx *g0, const char *index_name, const char *start_tree, const char *patch,
                             char **ret, char **err) {
        _cleanup_(git_ctx_done) git_ctx g = {};
        _cleanup_free_ char *index = git_ctx_scratch_path(g0, index_name);
        _cleanup_free_ char *spec = index ? strdup_printf("%s.spec", index) : NULL;
        _cleanup_free_ char *pf = spec ? strdup_printf("--pathspec-from-file=%s", spec) : NULL;
        if (!pf) return -ENOMEM;
        int r = git_ctx_copy(g0, index, true, &g);
        if (r < 0) return r;
        (void) unlink(g.index_file);
        _cleanup_strv_free_ char **paths = NULL, **literal = NULL, **indexed = NULL, **specs = NULL;
        if ((r = patch_paths(&g, g.work_tree, patch, &paths, err)) < 0) return r;
        if (start_tree && (r = git_read_tree(&g, "/", start_tree, "read-tree", err)) < 0) return r;
        for (size_t i = 0; paths && paths[i]; i++)
                if ((r = strv_pushf(&literal, ":(literal)%s", paths[i])) < 0) return r;
        if (start_tree && literal) {
                char *ls_prefix[] = {(char *) "ls-files", (char *) "-z", (char *) "--cached", NULL};
                if ((r = git_batched(&g, g.work_tree, LIST_MAX, "ls-files", ls_prefix, literal, false, 1,
                                     collect_nul_paths, &indexed, err)) < 0)
                        return r;
        }
        _cleanup_close_ int dfd = open(g.work_tree, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) return -errno;
        size_t n_indexed = strv_length(indexed);
        if (n_indexed > 0) qsort(indexed, n_indexed, sizeof *indexed, strp_cmp);
        for (size_t i = 0; paths && paths[i]; i++) {
                int fd = open_beneath(dfd, paths[i], O_PATH);
                bool keep = fd >= 0 ||
                            (n_indexed > 0 && bsearch(&paths[i], indexed, n_indexed, sizeof *indexed, strp_cmp));
                if (fd >= 0) safe_close(fd);
                if (keep && (r = strv_push(&specs, literal[i])) < 0) return r;
        }
        if (specs) {
                if ((r = write_specs(spec, specs, NULL)) < 0) return r;
                char *add_args[] = {(char *) "add", (char *) "-A", (char *) "-f", (char *) "--ignore-errors",
                                    (char *) "--no-warn-embedded-repo", (char *) "--pathspec-file-nul", pf, NULL};
                _cleanup_free_ char *add_err = NULL;
                if ((r = git_add_tolerant(&g, g.work_tree, add_args, "add -A (live paths)", &add_err, err)) < 0) return r;
        }
        r = git_line(&g, "/", err, "write-tree", (char *[]) {(char *) "write-tree", NULL}, ret);
        (void) unlink(g.index_file);
        return r;
}

/* `git apply --check` only: 1 it applies, 0 not (*reason), -errno. */
static int apply_check_only(const git_ctx *g, const char *patch, char **reason) {
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
        return 1;
}

/* `git apply --check`, then `git apply`. The check does not see every way
 * a write can fail (a read-only directory, a full disk): if the apply
 * fails after it, what it wrote is put back (the live contents of the
 * touched paths were staged first), so the tree is never left half
 * applied. 1 applied, 0 not (tree as it was, *reason set), -errno (only
 * when restoring failed too: *reason says so). */
static int apply_check_then_apply(const git_ctx *g, const char *patch, char **reason) {
        run_result rr;
        int r = apply_check_only(g, patch, reason);
        if (r <= 0) return r;
        _cleanup_free_ char *before = NULL, *serr = NULL;
        if ((r = stage_patch_paths(g, "before-apply-index", NULL, patch, &before, &serr)) < 0) {
                *reason = strdup_printf("cannot record the live files before applying: %s", serr ? serr : strerror(-r));
                return r;
        }
        char *apply_args[] = {(char *) "apply", (char *) patch, NULL};
        _cleanup_free_ char *aerr = NULL;
        r = git_ok(g, g->work_tree, 0, &rr, &aerr, "apply (after a successful --check)", apply_args);
        if (r >= 0) {
                run_result_done(&rr);
                return 1;
        }
        /* roll back: what the live tree has at those paths now, back to `before` */
        _cleanup_free_ char *now = NULL, *back = NULL, *rerr = NULL;
        int k = stage_patch_paths(g, "after-apply-index", before, patch, &now, &rerr);
        if (k >= 0 && !streq(now, before)) {
                back = git_ctx_scratch_path(g, "rollback.patch");
                if (!back) k = -ENOMEM;
                if (k >= 0) k = diff_trees(g, now, before, &rr, &rerr);
                if (k >= 0) {
                        k = write_small_file(back, rr.out, rr.out_len);
                        run_result_done(&rr);
                }
                char *back_args[] = {(char *) "apply", back, NULL};
                if (k >= 0 && (k = git_ok(g, g->work_tree, 0, &rr, &rerr, "apply (rolling back)", back_args)) >= 0)
                        run_result_done(&rr);
        }
        if (k >= 0) {
                *reason = strdup_printf("%s; the files it had written were restored, nothing was applied", strempty(aerr));
                return 0;
        }
        *reason = strdup_printf("%s; restoring the files it had written failed (%s): the tree is partly applied",
                                strempty(aerr), rerr ? rerr : strerror(-k));
        return r;
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
        _cleanup_free_ char *err = NULL;
        _cleanup_strv_free_ char **paths = NULL;
        int r = patch_paths(g, g->work_tree, patch, &paths, &err);
        if (r < 0) {
                *why = TAKE_PTR(err);
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

/* The live directory and the patch of an apply, resolved: 1 with both in
 * *ret_dir and *ret_patch, 0 when the patch is empty (an empty changeset:
 * nothing to do), -errno with *reason set. */
static int apply_open(const char *directory, const char *patch_path, char **ret_dir, char **ret_patch, char **reason) {
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
        if (st.st_size == 0) return 0;
        *ret_dir = TAKE_PTR(dir);
        *ret_patch = TAKE_PTR(patch);
        return 1;
}

/* A private scratch directory for one apply, under $TMPDIR (default /tmp),
 * that the caller removes: 0, or -errno with *reason set. */
static int apply_scratch(char **ret, char **reason) {
        const char *tmp = getenv("TMPDIR");
        _cleanup_free_ char *scratch = strdup_printf("%s/taskferry-apply-XXXXXX", isempty(tmp) ? "/tmp" : tmp);
        if (!scratch) return -ENOMEM;
        if (!mkdtemp(scratch)) {
                int r = -errno;
                *reason = strdup_printf("cannot create a scratch directory: %s", strerror(errno));
                return r;
        }
        *ret = TAKE_PTR(scratch);
        return 0;
}

/* check_applied: only answer whether the tree already holds the patch. */
static int apply_impl(const char *directory, const char *patch_path, bool check_applied, char **reason) {
        if (isempty(directory) || isempty(patch_path)) {
                *reason = strdup("invalid arguments");
                return -EINVAL;
        }
        _cleanup_free_ char *dir = NULL, *patch = NULL, *scratch = NULL;
        int r = apply_open(directory, patch_path, &dir, &patch, reason);
        if (r <= 0) return r < 0 ? r : check_applied ? 0 : 1;
        if ((r = apply_scratch(&scratch, reason)) < 0) return r;
        _cleanup_(git_ctx_done) git_ctx g = {};
        _cleanup_free_ char *rebased = path_join(scratch, "rebased.patch");
        if (!rebased) r = -ENOMEM;
        else if ((r = git_ctx_scratch(&g, scratch, &(scratch_repo) {.work_tree = dir}, reason)) >= 0 && check_applied)
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
        if (patch) {
                /* Outside any repository: no config, attributes or discovery. */
                _cleanup_(git_ctx_done) git_ctx g = {.home = strdup("/nonexistent")};
                r = g.home ? git_ctx_build_env(&g) : -ENOMEM;
                char *args[] = {(char *) "apply", (char *) "--numstat", (char *) "-z", patch, NULL};
                run_result rr;
                if (r >= 0) r = run_git_argv(&g, "/", LIST_MAX, &rr, args);
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

/* ======================================================================== */
/* Base snapshots, extraction over the touched paths, 3-way accept.
 *
 * The base (changeset_snapshot, run by the shim on the host just before the
 * worker starts): phase A of the old extraction (host view: `add -A`,
 * nested repositories flattened, ignored paths pinned) run once, at launch,
 * from a copy of the repository's index so that its stat data spares
 * re-hashing unchanged files. The child maps our uid to itself in its user
 * namespace (not to root), so owners match the index's stat data. Its tree
 * id, exclude rules and private object store go to <overlay root>/base.
 *
 * Extraction with a base (extract_touched): the overlay's upper dir lists
 * every path the worker touched: regular files and symlinks (complete copies:
 * the overlay runs without metacopy), whiteouts (char device 0:0: deleted),
 * opaque directories (trusted. or user.overlay.opaque = "y": the lower's
 * contents are hidden) and directories that merge with the lower's. The
 * child reads the base tree into a private index (host view, real objects
 * as alternates), mounts the overlay, and updates only those paths:
 * `rm --cached` for whiteouts, `add -A` of files, symlinks, and of opaque or
 * new directories as a whole (minus what is left out), by pathspec file
 * with :(literal) magic. Cost: the bytes the worker wrote, plus reading the
 * base tree. The patch is `diff-tree base result`; it is stored only if it
 * applies to its own base (`apply --cached --check` on a scratch index
 * holding the base tree).
 *
 * Accept (changeset_apply_3way): R = base + patch (apply --cached in a
 * private index), O = base with the touched paths (diff-tree base R) taken
 * from the live directory, M = `merge-tree --write-tree` of commits O and R
 * whose only common ancestor is a commit of the base. Conflicts: nothing is
 * written. Otherwise the patch O -> M (touched paths only) is checked
 * against the live tree and applied (apply_check_then_apply). */

#define BASE_TREE_NAME "tree"
#define BASE_EXCLUDE_NAME "exclude"
#define BASE_GIT_NAME "git"
#define TOUCHED_ROUNDS_MAX 16

uint64_t changeset_file_max(void) {
        const char *v = getenv("TASKFERRY_CHANGESET_FILE_MAX");
        uint64_t n;
        if (!isempty(v) && disk_size_parse(v, &n) >= 0 && n > 0) return n;
        return CHANGESET_FILE_MAX_DEFAULT;
}

char *changeset_base_dir(const char *overlay_root) {
        return overlay_root ? path_join(overlay_root, "base") : NULL;
}

/* The base tree id in base_dir, or NULL (none, unreadable, malformed). */
static char *base_tree_read(const char *base_dir) {
        if (isempty(base_dir)) return NULL;
        _cleanup_free_ char *p = path_join(base_dir, BASE_TREE_NAME), *data = NULL;
        if (!p || read_file(p, 256, &data, NULL) < 0) return NULL;
        strip_trailing_space(data);
        return is_hex_oid(data) ? TAKE_PTR(data) : NULL;
}

/* "<base_dir>/git/objects": the base's private object store. */
static char *base_objects_dir(const char *base_dir) {
        return strdup_printf("%s/%s/objects", base_dir, BASE_GIT_NAME);
}

static int write_proc(const char *path, const char *data) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0) return -errno;
        return loop_write(fd, data, strlen(data));
}

/* A user + mount namespace where our uid and gid map to themselves (file
 * owners read as on the host, so the index's stat data stays valid); the
 * process keeps its capabilities there until it execs. */
static int userns_enter_identity(void) {
        uid_t u = getuid();
        gid_t g = getgid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) return -errno;
        char map[64];
        int r = write_proc("/proc/self/setgroups", "deny");
        if (r < 0 && r != -ENOENT) return r;
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned) u, (unsigned) u);
        if ((r = write_proc("/proc/self/uid_map", map)) < 0) return r;
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned) g, (unsigned) g);
        if ((r = write_proc("/proc/self/gid_map", map)) < 0) return r;
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) return -errno;
        return 0;
}

static int copy_file_keep_mtime(const char *from, const char *to) {
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

/* ---- the snapshot ---- */

typedef struct snapshot_child {
        extract_child c;
        const char *index_copy; /* the repository's index, or NULL */
        const char *exclude_text;
} snapshot_child;

static int snapshot_reset(snapshot_child *s) {
        _cleanup_free_ char *ex = path_join(s->c.g->git_dir, "info/exclude");
        if (!ex) return -ENOMEM;
        (void) unlink(s->c.g->index_file);
        return write_small_file(ex, s->exclude_text, strlen(s->exclude_text));
}

static _Noreturn void snapshot_child_main(void *userdata, int out_fd) {
        snapshot_child *s = userdata;
        extract_child *c = &s->c;
        _cleanup_free_ char *err = NULL, *tree = NULL;
        int r = userns_enter_identity();
        if (r < 0) err = strdup_printf("cannot enter a user namespace: %s", strerror(-r));
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (r >= 0 && s->index_copy) {
                /* from the repository's index: its stat data spares re-hashing */
                const char *keep = c->base_treeish;
                c->base_treeish = NULL;
                r = copy_file_keep_mtime(s->index_copy, c->g->index_file);
                if (r >= 0) r = child_before(c, &tree, &err);
                c->base_treeish = keep;
                if (r < 0) {
                        /* a split, sparse or otherwise unusable index: from the tree then */
                        free(err);
                        err = NULL;
                        strv_free(c->hidden);
                        c->hidden = NULL;
                        r = snapshot_reset(s);
                        if (r >= 0) r = 1;
                }
        }
        if (r > 0 || (r >= 0 && !tree)) r = child_before(c, &tree, &err);
        if (r < 0 && !err) err = strdup(strerror(-r));
        _cleanup_free_ char *msg = r >= 0 ? strdup_printf("O%s", tree) : strdup_printf("E%s", err ? err : "out of memory");
        if (msg) (void) loop_write(out_fd, msg, strlen(msg));
        _exit(r >= 0 ? 0 : 1);
}

/* The index file of the work tree whose top is dir, or NULL. */
static char *repo_index_path(const char *dir) {
        _cleanup_free_ char *p = NULL;
        struct stat st;
        if (host_git_path(dir, "--git-path", "index", &p) <= 0 || stat(p, &st) < 0 || !S_ISREG(st.st_mode)) return NULL;
        return TAKE_PTR(p);
}

static int snapshot_impl(const char *directory, const char *pre_head, const char *base_dir, char **err) {
        if (isempty(directory) || directory[0] != '/' || isempty(base_dir)) {
                *err = strdup("invalid arguments");
                return -EINVAL;
        }
        if (pre_head && !is_hex_oid(pre_head)) {
                *err = strdup("the pre-dispatch HEAD is not an object id");
                return -EINVAL;
        }
        _cleanup_free_ char *dir = realpath(directory, NULL);
        if (!dir) {
                int r = -errno;
                *err = strdup_printf("cannot resolve %s: %s", directory, strerror(errno));
                return r;
        }
        if (access(base_dir, F_OK) == 0) {
                *err = strdup_printf("%s already exists", base_dir);
                return -EEXIST;
        }
        _cleanup_free_ char *tmp = strdup_printf("%s.tmp.%d", base_dir, (int) getpid());
        if (!tmp) return -ENOMEM;
        (void) rm_rf(tmp);
        if (mkdir(tmp, 0700) < 0) {
                int r = -errno;
                *err = strdup_printf("cannot create %s: %s", tmp, strerror(errno));
                return r;
        }
        _cleanup_free_ char *real_tmp = realpath(tmp, NULL);
        if (!real_tmp || path_is_at_or_below(real_tmp, dir)) {
                (void) rm_rf(tmp);
                *err = strdup_printf("the snapshot directory %s lies inside the target directory", tmp);
                return -EINVAL;
        }

        /* every owned variable is declared before the first goto fail: a jump
         * past a _cleanup_ declaration would free an indeterminate pointer */
        _cleanup_free_ char *base = NULL, *index_copy = NULL, *empty_dir = NULL, *empty_file = NULL,
                            *exclude_path = NULL, *tree_path = NULL, *base_exclude = NULL, *reply = NULL,
                            *line = NULL, *ex = NULL, *objects = NULL;
        _cleanup_(git_ctx_done) git_ctx g = {};
        _cleanup_(repo_info_done) repo_info ri = {};
        int r = repo_info_gather(dir, &ri);
        if (r < 0) {
                *err = strdup_printf("cannot run git: %s", strerror(-r));
                goto fail;
        }
        if (pre_head && (r = base_treeish(pre_head, ri.prefix, &base)) < 0) goto fail;
        /* The index is relative to the top of the work tree: only usable there. */
        if (ri.toplevel && isempty(ri.prefix)) index_copy = repo_index_path(dir);

        /* tmp becomes the base: its scratch repository is the base's BASE_GIT_NAME */
        tree_path = path_join(tmp, BASE_TREE_NAME);
        base_exclude = path_join(tmp, BASE_EXCLUDE_NAME);
        if (!tree_path || !base_exclude || (ri.common_dir && !(objects = path_join(ri.common_dir, "objects")))) {
                r = -ENOMEM;
                goto fail;
        }
        scratch_repo o = {.work_tree = dir, .objects = objects, .excludes = strempty(ri.excludes),
                          .excludes_len = strlen(strempty(ri.excludes))};
        if ((r = git_ctx_scratch(&g, tmp, &o, err)) < 0 || (r = hiders_create(tmp, &empty_dir, &empty_file, err)) < 0)
                goto fail;
        if (!(exclude_path = path_join(g.git_dir, "info/exclude"))) {
                r = -ENOMEM;
                goto fail;
        }

        changeset_extract_args fake = {.directory = dir};
        snapshot_child s = {
                .c = {.a = &fake, .g = &g, .base_treeish = base, .empty_dir = empty_dir, .empty_file = empty_file,
                      .host_fd = -1, .file_max = changeset_file_max()},
                .index_copy = index_copy,
                .exclude_text = strempty(ri.excludes),
        };
        if ((r = run_child("changeset-snapshot", "the git process", snapshot_child_main, &s, &reply, NULL, err)) < 0) goto fail;
        if (!is_hex_oid(reply + 1)) {
                *err = strdup("the snapshot process returned no tree");
                r = -EIO;
                goto fail;
        }
        line = strdup_printf("%s\n", reply + 1);
        size_t ex_len = 0;
        if (!line) {
                r = -ENOMEM;
                goto fail;
        }
        if ((r = read_file(exclude_path, LIST_MAX, &ex, &ex_len)) < 0 ||
            (r = write_file_atomic(base_exclude, ex, ex_len, 0600)) < 0 ||
            (r = write_file_atomic(tree_path, line, strlen(line), 0600)) < 0) {
                *err = strdup_printf("cannot write the snapshot: %s", strerror(-r));
                goto fail;
        }
        (void) unlink(g.index_file);
        (void) rmdir(empty_dir);
        (void) unlink(empty_file);
        if (rename(tmp, base_dir) < 0) {
                r = -errno;
                *err = strdup_printf("cannot rename %s to %s: %s", tmp, base_dir, strerror(errno));
                goto fail;
        }
        return 0;
fail:
        (void) rm_rf(tmp);
        return r < 0 ? r : -EIO;
}

int changeset_snapshot(const char *directory, const char *pre_head, const char *base_dir, char **ret_error) {
        _cleanup_free_ char *err = NULL;
        int r = git_has_merge_tree() ? snapshot_impl(directory, pre_head, base_dir, &err)
                                     : (err = strdup("git 2.38 or later is needed for a base (merge-tree --write-tree)"),
                                        -ENOTSUP);
        if (r >= 0) return 0;
        if (ret_error)
                *ret_error = strdup_printf("cannot take the base snapshot of %s: %s", strnull(directory),
                                           err ? err : strerror(-r));
        return r;
}

/* ---- the touched paths (the upper dir) ---- */

typedef struct touched {
        char **rm;      /* :(literal)<path> for whiteouts: paths deleted */
        char **add;     /* :(literal)<path> for files, symlinks, opaque and new dirs */
        char **exclude; /* :(exclude,literal)<path> left out inside an added dir */
        char **dotgit;  /* .git entries the worker made (nested repositories to hide) */
        size_t n;       /* entries seen */
} touched;

static void touched_done(touched *t) {
        strv_free(t->rm);
        strv_free(t->add);
        strv_free(t->exclude);
        strv_free(t->dotgit);
        memset(t, 0, sizeof *t);
}

static bool dir_is_opaque(int dirfd, const char *rel) {
        _cleanup_close_ int fd = openat(dirfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return false;
        static const char *const names[] = {"trusted.overlay.opaque", "user.overlay.opaque"};
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                char v[4] = "";
                ssize_t n = fgetxattr(fd, names[i], v, sizeof v);
                if (n == 1 && v[0] == 'y') return true;
        }
        return false;
}

/* Does the entry carry an overlay.metacopy (a file whose data is still the
 * lower's) or overlay.redirect (a renamed directory) xattr? Then the upper
 * dir alone does not say what changed (overlayfs(5): metacopy, redirect_dir,
 * which the userxattr mounts we make never use, but a kernel's defaults may
 * for other mounts): the caller falls back to the whole-tree comparison. */
static bool entry_needs_lower(int dirfd, const char *rel, const struct stat *st) {
        if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) return false;
        char proc[64];
        _cleanup_close_ int fd = openat(dirfd, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return false;
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        static const char *const names[] = {"trusted.overlay.metacopy", "user.overlay.metacopy",
                                            "trusted.overlay.redirect", "user.overlay.redirect"};
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (getxattr(proc, names[i], NULL, 0) >= 0) return true;
        return false;
}

static const char *special_kind(mode_t m) {
        if (S_ISFIFO(m)) return "a named pipe";
        if (S_ISSOCK(m)) return "a socket";
        if (S_ISCHR(m)) return "a character device";
        if (S_ISBLK(m)) return "a block device";
        return "a special file";
}

/* Walk the upper dir below rel ("" = top). in_added: rel is covered by an
 * added directory pathspec (only exclusions and .git entries matter then). */
static int touched_walk(int upper_fd, int lower_fd, const char *rel, bool in_added, unsigned depth, uint64_t file_max,
                        touched *t, warnings *w) {
        if (depth > DOTGIT_DEPTH_MAX) return -ELOOP;
        int fd = openat(upper_fd, *rel ? rel : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }
        int r = 0;
        for (struct dirent *de; r >= 0 && (errno = 0, de = readdir(d));) {
                if (streq(de->d_name, ".") || streq(de->d_name, "..")) continue;
                _cleanup_free_ char *path = *rel ? strdup_printf("%s/%s", rel, de->d_name) : strdup(de->d_name);
                if (!path) {
                        r = -ENOMEM;
                        break;
                }
                /* Longer than a path git (or any relative lookup) can use: left
                 * out, with what lies below it, instead of failing the whole
                 * extraction (a worker could otherwise lose every change it made
                 * with one deep directory). */
                if (strlen(path) >= PATH_MAX - 1) {
                        r = warn_path(w, path, "its path is longer than PATH_MAX");
                        if (r >= 0 && in_added) r = strv_pushf(&t->exclude, ":(exclude,literal)%s", path);
                        continue;
                }
                struct stat st;
                if (fstatat(upper_fd, path, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = -errno;
                        break;
                }
                t->n++;
                if (entry_needs_lower(upper_fd, path, &st)) {
                        r = -EXDEV;
                        break;
                }
                bool whiteout = S_ISCHR(st.st_mode) && st.st_rdev == 0;
                if (streq(de->d_name, ".git")) {
                        /* git never records a .git; a non-whiteout one is hidden in the merged view */
                        if (!whiteout) r = strv_consume(&t->dotgit, TAKE_PTR(path));
                        continue;
                }
                if (whiteout) {
                        /* literal: a deleted "*" or "a[1].txt" names that path alone */
                        if (!in_added) r = strv_pushf(&t->rm, ":(literal)%s", path);
                        continue;
                }
                if (S_ISDIR(st.st_mode)) {
                        struct stat lst;
                        bool lower_dir = fstatat(lower_fd, path, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(lst.st_mode);
                        bool whole = !in_added && (!lower_dir || dir_is_opaque(upper_fd, path));
                        if (depth + 1 > DOTGIT_DEPTH_MAX) {
                                /* the walk's bound (one open directory per level) */
                                char why[96];
                                snprintf(why, sizeof why, "it is nested deeper than %d directories", DOTGIT_DEPTH_MAX);
                                r = warn_path(w, path, why);
                                if (r >= 0 && in_added) r = strv_pushf(&t->exclude, ":(exclude,literal)%s", path);
                                continue;
                        }
                        if (whole) r = strv_pushf(&t->add, ":(literal)%s", path);
                        if (r >= 0) r = touched_walk(upper_fd, lower_fd, path, in_added || whole, depth + 1, file_max, t, w);
                        continue;
                }
                char why[200] = "";
                if (S_ISREG(st.st_mode) && (uint64_t) st.st_size > file_max) {
                        char a[32], b[32];
                        snprintf(why, sizeof why,
                                 "it is %s, over the %s bound for one file (TASKFERRY_CHANGESET_FILE_MAX)",
                                 disk_size_format((uint64_t) st.st_size, a), disk_size_format(file_max, b));
                } else if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
                        snprintf(why, sizeof why, "it is %s, which a patch cannot represent", special_kind(st.st_mode));
                if (*why) {
                        r = warn_path(w, path, why);
                        if (r >= 0 && in_added) r = strv_pushf(&t->exclude, ":(exclude,literal)%s", path);
                        continue;
                }
                if (!in_added) r = strv_pushf(&t->add, ":(literal)%s", path);
        }
        if (r >= 0 && errno != 0) r = -errno;
        closedir(d);
        return r;
}

/* Write a NUL-separated pathspec file. */
static int write_specs(const char *path, char **a, char **b) {
        size_t size = 0;
        _cleanup_free_ char *buf = NULL;
        FILE *f = open_memstream(&buf, &size);
        if (!f) return -ENOMEM;
        for (size_t i = 0; a && a[i]; i++) fwrite(a[i], 1, strlen(a[i]) + 1, f);
        for (size_t i = 0; b && b[i]; i++) fwrite(b[i], 1, strlen(b[i]) + 1, f);
        if (fclose(f) != 0) return -ENOMEM;
        return write_small_file(path, buf ? buf : "", size);
}

typedef struct touched_child {
        extract_child c;
        const char *base_tree;
        touched *t;
        const char *rm_spec, *add_spec; /* pathspec files */
        const char *host_objects;       /* empty dir: the host's object store is bound here */
        const char *check_index;        /* where the base index is copied */
} touched_child;

/* Hide every .git in the merged view that lies in a directory above a touched
 * path (a pre-existing nested repository, a submodule) or that the worker made. */
static int hide_touched_nested(touched_child *tc, char **err) {
        extract_child *c = &tc->c;
        char **lists[] = {tc->t->rm, tc->t->add};
        int r = 0;
        for (size_t k = 0; k < ELEMENTSOF(lists); k++)
                for (size_t i = 0; r >= 0 && lists[k] && lists[k][i]; i++) {
                        const char *p = lists[k][i];
                        if (startswith(p, ":(literal)")) p += strlen(":(literal)");
                        for (const char *sl = p; r >= 0 && (sl = strchr(sl, '/')); sl++) {
                                _cleanup_free_ char *anc = strndup(p, (size_t) (sl - p + 1));
                                r = anc ? hide_nested_git(c, anc, err) : -ENOMEM;
                        }
                }
        for (size_t i = 0; r >= 0 && tc->t->dotgit && tc->t->dotgit[i]; i++) {
                _cleanup_free_ char *parent = strdup(tc->t->dotgit[i]);
                if (!parent) return -ENOMEM;
                char *sl = strrchr(parent, '/');
                if (sl) sl[1] = 0;
                else parent[0] = 0;
                if (*parent) r = hide_nested_git(c, parent, err);
        }
        return r < 0 ? r : 0;
}

static int warn_refused_touched(touched_child *tc, const char *add_err, char **err) {
        extract_child *c = &tc->c;
        _cleanup_strv_free_ char **specs = NULL, **refused = NULL;
        for (size_t i = 0; tc->t->add && tc->t->add[i]; i++)
                if (strv_push(&specs, tc->t->add[i]) < 0) return -ENOMEM;
        for (size_t i = 0; tc->t->exclude && tc->t->exclude[i]; i++)
                if (strv_push(&specs, tc->t->exclude[i]) < 0) return -ENOMEM;
        if (!specs) return 0;
        char *ls_prefix[] = {(char *) "-c", (char *) "core.quotePath=false", (char *) "ls-files", (char *) "-o",
                             (char *) "--exclude-standard", (char *) "--", NULL};
        char *df_prefix[] = {(char *) "-c", (char *) "core.quotePath=false", (char *) "diff-files", (char *) "--name-only",
                             (char *) "--no-ext-diff", (char *) "--", NULL};
        /* exclusions must go with every batch: one run (the list is the upper dir's, small) */
        int r = git_batched(c->g, c->a->directory, LIST_MAX, "ls-files -o", ls_prefix, specs, true, SIZE_MAX / 2,
                            collect_ignored, &refused, err);
        if (r >= 0)
                r = git_batched(c->g, c->a->directory, LIST_MAX, "diff-files", df_prefix, specs, true, SIZE_MAX / 2,
                                collect_ignored, &refused, err);
        refused_list l = {.add_err = (char *) add_err};
        for (size_t i = 0; r >= 0 && refused && refused[i]; i++) {
                if (i > 0 && strv_contains(refused + i + 1, refused[i])) continue;
                r = refused_warn_one(&c->w, &l, refused[i], "");
        }
        return r;
}

/* Gitlink entries (mode 160000) under the added paths: only there can `git add` have made one. */
static int collect_gitlinks(void *userdata, const run_result *rr) {
        char ***l = userdata;
        int r = 0;
        for (char *p = rr->out; r >= 0 && p < rr->out + rr->out_len; p += strlen(p) + 1) {
                char *tab = strchr(p, '\t');
                if (tab && startswith(p, "160000 ")) r = strv_push(l, tab + 1);
        }
        return r;
}

static int touched_gitlinks(touched_child *tc, char ***ret, char **err) {
        char *prefix[] = {(char *) "ls-files", (char *) "-s", (char *) "-z", NULL};
        return git_batched(tc->c.g, tc->c.a->directory, LIST_MAX, "ls-files -s", prefix, tc->t->add, false, 1,
                           collect_gitlinks, ret, err);
}

static int add_touched(touched_child *tc, char **err) {
        extract_child *c = &tc->c;
        run_result rr;
        int r;
        if (tc->t->rm) {
                char *rm_args[] = {(char *) "rm", (char *) "--cached", (char *) "-r", (char *) "-f", (char *) "-q",
                                   (char *) "--ignore-unmatch", (char *) "--pathspec-file-nul", NULL, NULL};
                _cleanup_free_ char *pf = strdup_printf("--pathspec-from-file=%s", tc->rm_spec);
                if (!pf) return -ENOMEM;
                rm_args[7] = pf;
                if ((r = git_ok(c->g, c->a->directory, 0, &rr, err, "rm --cached", rm_args)) < 0) return r;
                run_result_done(&rr);
        }
        if (!tc->t->add) return 0;
        _cleanup_strv_free_ char **tried = NULL;
        _cleanup_free_ char *pf = strdup_printf("--pathspec-from-file=%s", tc->add_spec);
        if (!pf) return -ENOMEM;
        for (unsigned round = 0; round < TOUCHED_ROUNDS_MAX; round++) {
                char *add_args[] = {(char *) "add", (char *) "-A", (char *) "--ignore-errors", (char *) "--no-warn-embedded-repo",
                                    (char *) "--pathspec-file-nul", pf, NULL};
                _cleanup_free_ char *add_err = NULL;
                r = git_add_tolerant(c->g, c->a->directory, add_args, "add -A (merged view, touched paths)", &add_err, err);
                if (r < 0) return r;
                _cleanup_strv_free_ char **links = NULL;
                if ((r = touched_gitlinks(tc, &links, err)) < 0) return r;
                if (!links) return add_err ? warn_refused_touched(tc, add_err, err) : 0;
                if ((r = flatten_gitlinks(c, links, &tried, err)) < 0) return r;
        }
        *err = strdup_printf("nested repositories deeper than %d levels", TOUCHED_ROUNDS_MAX);
        return -ELOOP;
}

static _Noreturn void touched_child_main(void *userdata, int out_fd) {
        touched_child *tc = userdata;
        extract_child *c = &tc->c;
        const changeset_extract_args *a = c->a;
        _cleanup_free_ char *err = NULL, *after = NULL;
        int r = userns_enter_as_root(getuid(), getgid());
        if (r < 0) err = strdup_printf("cannot enter a user namespace: %s", strerror(-r));
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (r >= 0 && (c->host_fd = open(a->directory, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) r = -errno;
        /* host view: the base tree's objects are in the base store or the real repository */
        if (r >= 0) r = git_read_tree(c->g, a->directory, tc->base_tree, "read-tree (base)", &err);
        /* the base index, for the parent's "applies to its own base" check */
        if (r >= 0 && tc->check_index && copy_file_keep_mtime(c->g->index_file, tc->check_index) < 0)
                (void) unlink(tc->check_index);
        /* The real object store as the host has it, at a private path: once the
         * overlay is on D, D/.git/objects is the worker's, this bind is not. With
         * it, the base's trees stay reachable and write-tree rewrites none. */
        bool host_objects = false;
        if (r >= 0 && c->g->alternates && tc->host_objects &&
            mount(c->g->alternates, tc->host_objects, NULL, MS_BIND | MS_REC, NULL) >= 0) {
                (void) mount(NULL, tc->host_objects, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL);
                host_objects = true;
        }
        if (r >= 0) r = overlay_mount_retry(a, &err);
        if (r >= 0) {
                /* merged view: D/.git/objects is the worker's now; the base store and
                 * the host's objects through the private bind stay */
                free(c->g->alternates);
                c->g->alternates = NULL;
                if (host_objects && !(c->g->alternates = strdup(tc->host_objects))) r = -ENOMEM;
                if (r >= 0) r = git_ctx_build_env(c->g);
        }
        if (r >= 0) r = hide_touched_nested(tc, &err);
        if (r >= 0) r = add_touched(tc, &err);
        if (r >= 0) r = write_tree(c->g, c->a->directory, true, &after, &err);
        if (r >= 0) r = dotgit_warn(c, &err);
        if (r < 0 && !err) err = strdup(strerror(-r));
        child_reply(out_fd, r, after, &c->w, err);
}

/* Does the patch apply to tree (a scratch index of g's)? 1 yes, 0 no (*why = git's reason), -errno. */
static int patch_applies_to_tree(const git_ctx *g0, const char *scratch, const char *tree, const char *patch, char **why) {
        _cleanup_(git_ctx_done) git_ctx g = {};
        _cleanup_free_ char *index = path_join(scratch, "check-index");
        int r = index ? git_ctx_copy(g0, index, false, &g) : -ENOMEM;
        if (r < 0) return r;
        run_result rr;
        /* the child left a copy of the base index there (else read the tree) */
        if (access(g.index_file, F_OK) < 0 && (r = git_read_tree(&g, "/", tree, "read-tree", why)) < 0) return r;
        char *ap_args[] = {(char *) "apply", (char *) "--cached", (char *) "--check", (char *) patch, NULL};
        if ((r = run_git_argv(&g, "/", 0, &rr, ap_args)) < 0) {
                *why = git_failure("apply --cached --check", r, &rr);
                return r;
        }
        r = rr.exit_code == 0;
        if (!r) *why = trimmed(*rr.err ? rr.err : "git apply --check failed");
        run_result_done(&rr);
        (void) unlink(g.index_file);
        return r;
}

/* Extraction with a base snapshot: only the paths the upper dir lists. */
static int extract_touched(const changeset_extract_args *a, const char *dir, const char *scratch, const char *base_tree,
                           char **err) {
        _cleanup_(repo_info_done) repo_info ri = {};
        int r = repo_info_gather(dir, &ri);
        if (r < 0) {
                *err = strdup_printf("cannot run git: %s", strerror(-r));
                return r;
        }
        _cleanup_(git_ctx_done) git_ctx g = {};
        _cleanup_free_ char *empty_dir = NULL, *empty_file = NULL, *ex = NULL, *objects = NULL;
        _cleanup_free_ char *rm_spec = path_join(scratch, "rm.spec"), *add_spec = path_join(scratch, "add.spec");
        _cleanup_free_ char *base_exclude = path_join(a->base_dir, BASE_EXCLUDE_NAME);
        _cleanup_free_ char *base_objects = base_objects_dir(a->base_dir);
        _cleanup_free_ char *host_objects = path_join(scratch, "host-objects"), *check_index = path_join(scratch, "check-index");
        if (!rm_spec || !add_spec || !base_exclude || !base_objects || !host_objects || !check_index ||
            (ri.common_dir && !(objects = path_join(ri.common_dir, "objects"))))
                return -ENOMEM;
        if (mkdir(host_objects, 0700) < 0) return -errno;
        size_t ex_len = 0;
        if ((r = read_file(base_exclude, LIST_MAX, &ex, &ex_len)) < 0) {
                *err = strdup_printf("cannot prepare %s: %s", scratch, strerror(-r));
                return r;
        }
        scratch_repo o = {.work_tree = dir, .objects = objects, .base_objects = base_objects, .excludes = ex,
                          .excludes_len = ex_len};
        if ((r = git_ctx_scratch(&g, scratch, &o, err)) < 0 || (r = hiders_create(scratch, &empty_dir, &empty_file, err)) < 0)
                return r;

        /* what the worker touched */
        _cleanup_(touched_done) touched t = {};
        _cleanup_(warnings_done) warnings w = {};
        uint64_t file_max = a->file_max ? a->file_max : changeset_file_max();
        {
                _cleanup_close_ int ufd = open(a->upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                _cleanup_close_ int lfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (ufd < 0 || lfd < 0) {
                        r = -errno;
                        *err = strdup_printf("cannot open %s: %s", ufd < 0 ? a->upper : dir, strerror(errno));
                        return r;
                }
                if ((r = touched_walk(ufd, lfd, "", false, 0, file_max, &t, &w)) == -EXDEV)
                        return -EXDEV; /* metacopy or redirect: the caller compares whole trees */
                if (r < 0) {
                        *err = strdup_printf("cannot read the overlay's upper dir %s: %s", a->upper, strerror(-r));
                        return r;
                }
        }
        if ((r = write_specs(rm_spec, t.rm, NULL)) < 0 || (r = write_specs(add_spec, t.add, t.exclude)) < 0) return r;

        char after[80] = "";
        if (!t.rm && !t.add) {
                snprintf(after, sizeof after, "%s", base_tree);
        } else {
                changeset_extract_args ca = *a;
                ca.directory = dir;
                touched_child tc = {
                        .c = {.a = &ca, .g = &g, .empty_dir = empty_dir, .empty_file = empty_file, .host_fd = -1},
                        .base_tree = base_tree,
                        .t = &t,
                        .rm_spec = rm_spec,
                        .add_spec = add_spec,
                        .host_objects = host_objects,
                        .check_index = check_index,
                };
                _cleanup_free_ char *reply = NULL;
                size_t reply_len = 0;
                if ((r = run_child("changeset-extract", "the git process", touched_child_main, &tc, &reply, &reply_len, err)) < 0) return r;
                size_t child_total = 0;
                char *nl = strchr(reply, '\n');
                if (!nl || sscanf(reply + 1, "%79s %zu", after, &child_total) != 2 || !is_hex_oid(after)) {
                        *err = strdup("the extraction process returned no tree");
                        return -EIO;
                }
                if ((r = warnings_add_reply(&w, nl + 1, reply + reply_len, child_total)) < 0) return r;
        }
        return extract_finish(a, &g, dir, ri.hooks_rel, base_tree, after, sizeof after, &w, scratch, err);
}

/* ---- accept: 3-way merge with the base ---- */

static int commit_tree(const git_ctx *g, const char *tree, const char *parent, char **ret, char **err) {
        char *args[] = {(char *) "commit-tree", (char *) tree, (char *) "-m", (char *) "taskferry",
                        parent ? (char *) "-p" : NULL, (char *) parent, NULL};
        return git_line(g, "/", err, "commit-tree", args, ret);
}


/* One conflicted path of merge-tree: the blobs of stages 1 (base), 2 (ours), 3 (theirs). */
typedef struct conflict_entry {
        char *path;
        char mode[3][8];
        char oid[3][72];
} conflict_entry;

/* A blob into memory (at most PATCH_MAX bytes) through cat, one batch
 * process for many (git-cat.h), opened on first use with g's environment. */
static int cat_blob(const git_ctx *g, git_cat **cat, const char *oid, char **ret, size_t *ret_len) {
        _cleanup_free_ char *err = NULL;
        if (!*cat) {
                int r = git_cat_open(g->env, cat, &err);
                if (r < 0) return r;
        }
        int r = git_cat_blob(*cat, oid, PATCH_MAX, ret, ret_len, &err);
        return r == -ENOENT || r == -EINVAL ? -EIO : r;
}

/* Both sides only appended whole lines to the end of the base's file (the
 * user's line and the worker's line after the same last line): keep both,
 * ours first. Anything else stays a conflict. Returns 1 with the merged
 * blob's id, 0 if not such a case, -errno. */
static int merge_appends(const git_ctx *g, git_cat **cat, const char *scratch, const conflict_entry *e, char **ret_oid) {
        for (int k = 0; k < 3; k++)
                if (!*e->oid[k] || !streq(e->mode[k], e->mode[0]) ||
                    (!streq(e->mode[k], "100644") && !streq(e->mode[k], "100755")))
                        return 0;
        _cleanup_free_ char *b = NULL, *o = NULL, *t = NULL;
        size_t bl = 0, ol = 0, tl = 0;
        int r;
        if ((r = cat_blob(g, cat, e->oid[0], &b, &bl)) < 0 || (r = cat_blob(g, cat, e->oid[1], &o, &ol)) < 0 ||
            (r = cat_blob(g, cat, e->oid[2], &t, &tl)) < 0)
                return r;
        if (bl > 0 && b[bl - 1] != '\n') return 0;
        if (ol <= bl || tl <= bl || memcmp(o, b, bl) != 0 || memcmp(t, b, bl) != 0) return 0;
        if (o[ol - 1] != '\n' || memchr(o, 0, ol) || memchr(t, 0, tl)) return 0; /* whole lines of text only */
        if (ol - bl >= tl - bl && memcmp(o + ol - (tl - bl), t + bl, tl - bl) == 0) {
                /* ours ends with their lines already (an accept that landed): ours, so it never lands twice */
                *ret_oid = strdup(e->oid[1]);
                return *ret_oid ? 1 : -ENOMEM;
        }
        _cleanup_free_ char *path = path_join(scratch, "union.blob");
        if (!path) return -ENOMEM;
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) return -errno;
        if ((r = loop_write(fd, o, ol)) < 0 || (r = loop_write(fd, t + bl, tl - bl)) < 0) return r;
        _cleanup_free_ char *err = NULL;
        char *args[] = {(char *) "hash-object", (char *) "-w", (char *) "--no-filters", path, NULL};
        return git_line(g, "/", &err, "hash-object", args, ret_oid) < 0 ? -EIO : 1;
}

/* Resolve what merge_appends can; *ret_conflicts lists the rest (NULL: none
 * left, *tree replaced by the resolved tree). */
static int resolve_appends(const git_ctx *g0, const char *scratch, char *p, char *end, char **tree, char ***ret_conflicts,
                           char **err) {
        conflict_entry *ce = NULL;
        size_t n = 0;
        int r = 0;
        for (; p < end; p += strlen(p) + 1) {
                char mode[8], oid[72];
                int stage = 0;
                char *tab = strchr(p, '\t');
                if (!tab || sscanf(p, "%7s %71s %d", mode, oid, &stage) != 3 || stage < 1 || stage > 3) continue;
                const char *path = tab + 1;
                if (n == 0 || !streq(ce[n - 1].path, path)) {
                        conflict_entry *nc = realloc(ce, (n + 1) * sizeof *ce);
                        if (!nc) {
                                r = -ENOMEM;
                                break;
                        }
                        ce = nc;
                        memset(&ce[n], 0, sizeof *ce);
                        if (!(ce[n].path = strdup(path))) {
                                r = -ENOMEM;
                                break;
                        }
                        n++;
                }
                snprintf(ce[n - 1].mode[stage - 1], sizeof ce->mode[0], "%s", mode);
                snprintf(ce[n - 1].oid[stage - 1], sizeof ce->oid[0], "%s", oid);
        }
        _cleanup_strv_free_ char **left = NULL, **infos = NULL;
        _cleanup_(git_cat_closep) git_cat *cat = NULL;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                _cleanup_free_ char *oid = NULL;
                int k = merge_appends(g0, &cat, scratch, &ce[i], &oid);
                if (k < 0) r = k;
                else if (k == 0) r = strv_push(&left, ce[i].path);
                else {
                        r = strv_push(&infos, "--cacheinfo");
                        if (r >= 0) r = strv_pushf(&infos, "%s,%s,%s", ce[i].mode[1], oid, ce[i].path);
                }
        }
        if (n == 0 && r >= 0) r = strv_push(&left, "(merge-tree reported a conflict without paths)");
        for (size_t i = 0; i < n; i++) free(ce[i].path);
        free(ce);
        if (r < 0) return r;
        if (left) {
                *ret_conflicts = TAKE_PTR(left);
                return 0;
        }
        /* every conflict resolved: the merged tree with those blobs */
        _cleanup_(git_ctx_done) git_ctx g = {};
        _cleanup_free_ char *index = path_join(scratch, "union-index");
        if ((r = index ? git_ctx_copy(g0, index, false, &g) : -ENOMEM) < 0) return r;
        if ((r = git_read_tree(&g, "/", *tree, "read-tree", err)) < 0) return r;
        char *ui_prefix[] = {(char *) "update-index", (char *) "--add", NULL};
        if ((r = git_batched(&g, "/", 0, "update-index --cacheinfo", ui_prefix, infos, false, 2, NULL, NULL, err)) < 0)
                return r;
        _cleanup_free_ char *t = NULL;
        if ((r = git_line(&g, "/", err, "write-tree", (char *[]) {(char *) "write-tree", NULL}, &t)) < 0) return r;
        free(*tree);
        *tree = TAKE_PTR(t);
        return 0;
}

/* 2: the live tree already holds every change; 1: *ret_patch written (live -> merged);
 * 0: conflicts or no merge (*why set); -errno. */
static int merge_3way(git_ctx *g, const char *scratch, const char *base_tree, const char *patch, const char *merged_patch,
                      char **ret_tree_o, char **ret_tree_m, char ***ret_touched, char **why) {
        _cleanup_free_ char *err = NULL, *tree_r = NULL, *tree_o = NULL, *c_b = NULL, *c_o = NULL, *c_r = NULL, *tree_m = NULL;
        _cleanup_strv_free_ char **specs = NULL;
        run_result rr;
        const char *dir = g->work_tree;
        int r;
        /* theirs: the base plus the patch */
        {
                if ((r = git_read_tree(g, "/", base_tree, "read-tree (base)", &err)) < 0) goto fail;
                char *ap_args[] = {(char *) "apply", (char *) "--cached", (char *) patch, NULL};
                if ((r = run_git_argv(g, "/", 0, &rr, ap_args)) < 0) goto fail;
                if (rr.exit_code != 0) {
                        _cleanup_free_ char *e = trimmed(rr.err);
                        run_result_done(&rr);
                        *why = strdup_printf("the changeset does not apply to its own base: %s", strempty(e));
                        return 0;
                }
                run_result_done(&rr);
                if ((r = git_line(g, "/", &err, "write-tree", (char *[]) {(char *) "write-tree", NULL}, &tree_r)) < 0)
                        goto fail;
        }
        /* the touched paths */
        {
                char *dt_args[] = {(char *) "diff-tree", (char *) "-r", (char *) "-z", (char *) "--no-renames",
                                   (char *) base_tree, tree_r, NULL};
                if ((r = git_ok(g, "/", LIST_MAX, &rr, &err, "diff-tree --raw", dt_args)) < 0) goto fail;
                _cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (dfd < 0) r = -errno;
                for (char *p = rr.out; r >= 0 && p < rr.out + rr.out_len;) {
                        char *path = p + strlen(p) + 1;
                        if (*p != ':' || path >= rr.out + rr.out_len) break;
                        bool in_base = p[1] != '0' || strspn(p + 1, "0") < 6;
                        int fd = in_base ? -1 : open_beneath(dfd, path, O_PATH);
                        /* a path only the worker added counts if the live tree has it too */
                        if (in_base || fd >= 0) r = strv_pushf(&specs, ":(literal)%s", path);
                        if (fd >= 0) safe_close(fd);
                        if (r >= 0 && ret_touched) r = strv_push(ret_touched, path);
                        p = path + strlen(path) + 1;
                }
                run_result_done(&rr);
                if (r < 0) goto fail;
        }
        if (streq(tree_r, base_tree)) return 2;
        /* ours: the base with the touched paths as the live tree has them */
        {
                if ((r = git_read_tree(g, "/", base_tree, "read-tree (base)", &err)) < 0) goto fail;
                if (specs) {
                        _cleanup_free_ char *spec_path = path_join(scratch, "live.spec");
                        _cleanup_free_ char *pf = spec_path ? strdup_printf("--pathspec-from-file=%s", spec_path) : NULL;
                        if (!pf) return -ENOMEM;
                        if ((r = write_specs(spec_path, specs, NULL)) < 0) goto fail;
                        char *add_args[] = {(char *) "add", (char *) "-A", (char *) "-f", (char *) "--ignore-errors",
                                            (char *) "--no-warn-embedded-repo", (char *) "--pathspec-file-nul", pf, NULL};
                        if ((r = run_git_argv(g, dir, 0, &rr, add_args)) < 0) goto fail;
                        if (rr.exit_code != 0) {
                                _cleanup_free_ char *e = trimmed(rr.err);
                                run_result_done(&rr);
                                *why = strdup_printf("cannot read the live files the changeset touches: %s", strempty(e));
                                return 0;
                        }
                        run_result_done(&rr);
                }
                if ((r = git_line(g, "/", &err, "write-tree", (char *[]) {(char *) "write-tree", NULL}, &tree_o)) < 0)
                        goto fail;
        }
        if ((r = commit_tree(g, base_tree, NULL, &c_b, &err)) < 0 || (r = commit_tree(g, tree_o, c_b, &c_o, &err)) < 0 ||
            (r = commit_tree(g, tree_r, c_b, &c_r, &err)) < 0)
                goto fail;
        char *mt_args[] = {(char *) "merge-tree", (char *) "--write-tree", (char *) "-z", (char *) "--no-messages",
                           c_o, c_r, NULL};
        if ((r = run_git_argv(g, "/", LIST_MAX, &rr, mt_args)) < 0) goto fail;
        if (rr.exit_code == 129) {
                /* a git before 2.38 has no merge-tree --write-tree */
                run_result_done(&rr);
                return -ENOTSUP;
        }
        if (rr.exit_code != 0 && rr.exit_code != 1) {
                err = git_failure("merge-tree", 0, &rr);
                run_result_done(&rr);
                r = -EIO;
                goto fail;
        }
        tree_m = strdup(rr.out);
        if (!tree_m) {
                run_result_done(&rr);
                return -ENOMEM;
        }
        strip_trailing_space(tree_m);
        if (rr.exit_code == 1) {
                /* "<tree>\0" then "<mode> <oid> <stage>\t<path>\0" per conflicted stage */
                _cleanup_strv_free_ char **conflicts = NULL;
                r = resolve_appends(g, scratch, rr.out + strlen(rr.out) + 1, rr.out + rr.out_len, &tree_m, &conflicts,
                                    &err);
                run_result_done(&rr);
                if (r < 0) goto fail;
                if (conflicts) {
                        size_t size = 0;
                        _cleanup_free_ char *list = NULL;
                        FILE *f = open_memstream(&list, &size);
                        if (!f) return -ENOMEM;
                        for (size_t i = 0; conflicts[i]; i++) {
                                _cleanup_free_ char *q = quote_path(conflicts[i]);
                                fprintf(f, "%s%s", i ? ", " : "", q ? q : conflicts[i]);
                        }
                        fclose(f);
                        *why = strdup_printf("the changeset conflicts with changes made in %s since the task started: "
                                             "%s; nothing was applied",
                                             dir, list ? list : "");
                        return 0;
                }
        } else
                run_result_done(&rr);
        if (!is_hex_oid(tree_m)) {
                err = strdup("git merge-tree printed no tree id");
                r = -EIO;
                goto fail;
        }
        if (streq(tree_m, tree_o)) return 2;
        if ((r = diff_trees(g, tree_o, tree_m, &rr, &err)) < 0) goto fail;
        r = write_small_file(merged_patch, rr.out, rr.out_len);
        run_result_done(&rr);
        if (r < 0) return r;
        if (ret_tree_o) *ret_tree_o = TAKE_PTR(tree_o);
        if (ret_tree_m) *ret_tree_m = TAKE_PTR(tree_m);
        return 1;
fail:
        if (r == -ENOMEM) return r;
        *why = strdup_printf("3-way merge not possible: %s", err ? err : strerror(-r));
        return r;
}

/* ---- accept: the write-out into the live tree ----
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

/* `diff-tree -r -z --no-renames` raw records: ":om nm ooid noid S\0path\0". */
static int wo_parse(char *p, char *end, wo_list *l) {
        while (p < end) {
                char *path = p + strlen(p) + 1;
                if (*p != ':' || path >= end) return -EBADMSG;
                unsigned om = 0, nm = 0;
                char ooid[72], noid[72], status = 0;
                if (sscanf(p, ":%o %o %71s %71s %c", &om, &nm, ooid, noid, &status) != 5) return -EBADMSG;
                wo_entry *ne = realloc(l->e, (l->n + 1) * sizeof *ne);
                if (!ne) return -ENOMEM;
                l->e = ne;
                wo_entry *e = &l->e[l->n];
                memset(e, 0, sizeof *e);
                if (!(e->path = strdup(path))) return -ENOMEM;
                l->n++;
                e->mode = status == 'D' ? 0 : nm;
                snprintf(e->oid, sizeof e->oid, "%s", noid);
                p = path + strlen(path) + 1;
        }
        return 0;
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
                int fd = open_beneath(cur, comp, O_RDONLY | O_DIRECTORY);
                if (fd == -ENOENT && create) {
                        if (mkdirat(cur, comp, 0777) < 0 && errno != EEXIST) {
                                int r = -errno;
                                safe_close(cur);
                                return r;
                        }
                        fd = open_beneath(cur, comp, O_RDONLY | O_DIRECTORY);
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
 * same change deletes first). Returns 1 ok, 0 refused (*why), -errno. */
static int wo_check(int top, const wo_list *l, char **why) {
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
                        _cleanup_free_ char *q = quote_path(e->path);
                        *why = strdup_printf("%s %s", q ? q : e->path, what);
                        return *why ? 0 : -ENOMEM;
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
                        int r = cat_blob(g, cat, e->oid, &target, &len);
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

/* Delete path and the directories that leaves empty (as git apply does). */
static int wo_delete(int top, const char *path) {
        const char *name;
        int dfd = wo_open_parent(top, path, false, &name);
        if (dfd == -ENOENT) return 0;
        if (dfd < 0) return dfd;
        int r = unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
        if (r >= 0 && fsync(dfd) < 0) r = -errno;
        safe_close(dfd);
        if (r < 0) return r;
        _cleanup_free_ char *dir = strdup(path);
        if (!dir) return -ENOMEM;
        for (char *sl; (sl = strrchr(dir, '/'));) {
                *sl = 0;
                int pfd = wo_open_parent(top, dir, false, &name);
                if (pfd < 0) break;
                bool gone = unlinkat(pfd, name, AT_REMOVEDIR) == 0;
                if (gone) (void) fsync(pfd);
                safe_close(pfd);
                if (!gone) break;
        }
        return 0;
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
                int fd = *dir ? open_beneath(top, dir, O_RDONLY | O_DIRECTORY) : fcntl(top, F_DUPFD_CLOEXEC, 3);
                if (fd < 0) continue;
                wo_sweep_dir(fd);
                safe_close(fd);
        }
}

/* Write the live tree from tree_o to tree_m (see above). cs_paths: the
 * changeset's paths, whose directories are swept of dead temp files too.
 * Returns 1 written, 0 refused before anything was written (*why), -errno
 * (*why set; what was written so far is whole, and a re-run finishes it). */
static int write_out(const git_ctx *g, const char *tree_o, const char *tree_m, char *const *cs_paths, char **why) {
        _cleanup_free_ char *err = NULL;
        _cleanup_(wo_list_done) wo_list l = {};
        run_result rr;
        char *dt_args[] = {(char *) "diff-tree", (char *) "-r", (char *) "-z", (char *) "--no-renames", (char *) tree_o,
                           (char *) tree_m, NULL};
        int r = git_ok(g, "/", LIST_MAX, &rr, &err, "diff-tree --raw", dt_args);
        if (r < 0) {
                *why = TAKE_PTR(err);
                return r;
        }
        r = wo_parse(rr.out, rr.out + rr.out_len, &l);
        run_result_done(&rr);
        if (r < 0) {
                *why = strdup_printf("cannot read git diff-tree's output: %s", strerror(-r));
                return r;
        }
        _cleanup_close_ int top = open(g->work_tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (top < 0) {
                r = -errno;
                *why = strdup_printf("cannot open %s: %s", g->work_tree, strerror(errno));
                return r;
        }
        if ((r = wo_check(top, &l, why)) <= 0) return r;
        wo_sweep(top, cs_paths, &l);
        /* deletions first (deepest first), so a file can replace a directory and back */
        for (size_t i = l.n; i-- > 0;) {
                if (l.e[i].mode != 0) continue;
                if ((r = wo_delete(top, l.e[i].path)) < 0) {
                        _cleanup_free_ char *q = quote_path(l.e[i].path);
                        *why = strdup_printf("cannot delete %s: %s", q ? q : l.e[i].path, strerror(-r));
                        return r;
                }
        }
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
                        _cleanup_free_ char *q = quote_path(l.e[bad].path);
                        *why = strdup_printf("cannot write %s: %s", q ? q : l.e[bad].path, strerror(-r));
                        return r;
                }
        }
        if (cur_fd >= 0 && (r = wo_batch_flush(batch, cur_fd, &l, &bad)) < 0) {
                _cleanup_free_ char *q = quote_path(l.e[bad].path);
                *why = strdup_printf("cannot write %s: %s", q ? q : l.e[bad].path, strerror(-r));
                return r;
        }
        if (cur_fd >= 0 && fsync(cur_fd) < 0) {
                r = -errno;
                *why = strdup_printf("cannot sync %s/%s: %s", g->work_tree, strempty(cur_dir), strerror(errno));
                return r;
        }
        return 1;
}

/* check_only: 1 if the live tree holds every change already, else 0. */
/* write_out() failed midway (a read-only directory, a full disk: what
 * `git apply --check` cannot see): every file it wrote is whole, but the
 * tree is partly applied. Put the changeset's paths back to tree_o (the live
 * tree as the merge read it) with the same crash-safe writer. 0 with *reason
 * saying the files were restored and nothing was applied; else the original
 * error r with *reason saying the tree is partly applied (a retry of the
 * accept finishes it: the files already written merge cleanly). */
static int write_out_rollback(const git_ctx *g, const char *tree_o, const char *merged, char *const *cs_paths, int r,
                              char **reason) {
        _cleanup_free_ char *werr = TAKE_PTR(*reason), *now = NULL, *rerr = NULL;
        int k = stage_patch_paths(g, "after-write-index", tree_o, merged, &now, &rerr);
        if (k >= 0 && !streq(now, tree_o)) {
                k = write_out(g, now, tree_o, cs_paths, &rerr);
                if (k == 0) k = -EIO; /* refused: nothing restored */
        }
        if (k >= 0) {
                *reason = strdup_printf("%s; the files it had written were restored, nothing was applied",
                                        strempty(werr));
                return 0;
        }
        *reason = strdup_printf("%s; restoring the files it had written failed (%s): the tree is partly applied "
                                "(accepting again finishes it)",
                                strempty(werr), rerr ? rerr : strerror(-k));
        return r;
}

static int apply_3way_impl(const char *directory, const char *patch_path, const char *base_tree, const char *base_dir,
                           bool check_only, char **reason) {
        _cleanup_free_ char *dir = NULL, *patch = NULL, *scratch = NULL;
        int r = apply_open(directory, patch_path, &dir, &patch, reason);
        if (r <= 0) return r < 0 ? r : check_only ? 0 : 1;
        /* One merge-and-apply at a time per directory (an advisory lock on
         * the directory itself: nothing is written for it, and it goes with
         * the process): a second accept merges with what the first wrote. */
        _cleanup_close_ int lock_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (lock_fd < 0 || flock(lock_fd, LOCK_EX) < 0) {
                r = -errno;
                *reason = strdup_printf("cannot lock %s: %s", dir, strerror(errno));
                return r;
        }
        if ((r = apply_scratch(&scratch, reason)) < 0) return r;
        _cleanup_(git_ctx_done) git_ctx g = {};
        _cleanup_free_ char *merged = path_join(scratch, "merged.patch"), *base_objects = base_objects_dir(base_dir);
        _cleanup_free_ char *common = NULL, *objects = NULL;
        if (!merged || !base_objects) r = -ENOMEM;
        /* the live repository's objects (never the worker's: the overlay is not mounted here) */
        else if ((r = host_git_path(dir, "--git-common-dir", NULL, &common)) > 0 &&
                 !(objects = path_join(common, "objects")))
                r = -ENOMEM;
        if (r >= 0) {
                scratch_repo o = {.work_tree = dir, .objects = objects, .base_objects = base_objects};
                r = git_ctx_scratch(&g, scratch, &o, reason);
        }
        /* commits for merge-tree: fixed identity and dates (same bytes every time) */
        static const char *const ident[] = {"GIT_AUTHOR_NAME=taskferry", "GIT_AUTHOR_EMAIL=taskferry@localhost",
                                            "GIT_AUTHOR_DATE=@0 +0000", "GIT_COMMITTER_NAME=taskferry",
                                            "GIT_COMMITTER_EMAIL=taskferry@localhost", "GIT_COMMITTER_DATE=@0 +0000"};
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(ident); i++) r = strv_push(&g.env, ident[i]);
        if (r >= 0) {
                _cleanup_free_ char *why = NULL, *tree_o = NULL, *tree_m = NULL;
                _cleanup_strv_free_ char **cs_paths = NULL;
                int m = merge_3way(&g, scratch, base_tree, patch, merged, &tree_o, &tree_m, &cs_paths, &why);
                if (m == -ENOTSUP) {
                        /* no 3-way merge with this git: the patch's own check-then-apply */
                        (void) rm_rf(scratch);
                        if (check_only) return changeset_is_applied(directory, patch_path);
                        return apply_impl(directory, patch_path, false, reason);
                }
                if (check_only) r = m == 2;
                else if (m == 2) r = 1;
                else if (m == 1) {
                        r = patch_plants_repository(&g, merged, reason);
                        if (r > 0) r = 0;
                        else if (r == 0) {
                                /* git judges the paths as before; then our crash-safe write-out */
                                r = apply_check_only(&g, merged, reason);
                                bool rolled_back = false;
                                if (r > 0) r = write_out(&g, tree_o, tree_m, cs_paths, reason);
                                if (r < 0) {
                                        r = write_out_rollback(&g, tree_o, merged, cs_paths, r, reason);
                                        rolled_back = true;
                                }
                                if (r == 0 && !rolled_back) {
                                        _cleanup_free_ char *e = TAKE_PTR(*reason);
                                        *reason = strdup_printf("the live tree changed while the changeset was being "
                                                                "merged: %s; nothing was applied",
                                                                strempty(e));
                                }
                        }
                } else {
                        r = m;
                        *reason = TAKE_PTR(why);
                }
        }
        (void) rm_rf(scratch);
        return r;
}

int changeset_apply_3way(const char *directory, const char *patch_path, const char *base_dir, char **ret_reason) {
        _cleanup_free_ char *base_tree = git_has_merge_tree() ? base_tree_read(base_dir) : NULL;
        if (!base_tree) return changeset_apply(directory, patch_path, ret_reason);
        _cleanup_free_ char *reason = NULL;
        int r = isempty(directory) || isempty(patch_path) ? -EINVAL
                                                           : apply_3way_impl(directory, patch_path, base_tree, base_dir, false, &reason);
        if (r < 0 && !reason) reason = strdup(strerror(-r));
        if (ret_reason) *ret_reason = r > 0 ? NULL : TAKE_PTR(reason);
        return r;
}

int changeset_is_applied_3way(const char *directory, const char *patch_path, const char *base_dir) {
        _cleanup_free_ char *base_tree = git_has_merge_tree() ? base_tree_read(base_dir) : NULL;
        if (!base_tree) return changeset_is_applied(directory, patch_path);
        _cleanup_free_ char *reason = NULL;
        if (isempty(directory) || isempty(patch_path)) return -EINVAL;
        return apply_3way_impl(directory, patch_path, base_tree, base_dir, true, &reason);
}
