/* The private repository of a changeset job and how git runs against it
 * (changeset-git.h). */
#include "changeset-git.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "macro.h"
#include "fileio.h"
#include "fs-util.h"
#include "process-util.h"
#include "signal-util.h"
#include "string-util.h"
#include "strv.h"

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

char *cs_path_join(const char *a, const char *b) {
        return strdup_printf("%s/%s", a, b);
}

void cs_strip_trailing_space(char *s) {
        size_t n = s ? strlen(s) : 0;
        while (n > 0 && isspace((unsigned char) s[n - 1])) s[--n] = 0;
}

char *cs_trimmed(const char *s) {
        char *t = strdup(strempty(s));
        if (t) cs_strip_trailing_space(t);
        return t;
}

bool cs_is_oid(const char *s) {
        size_t n = strlen(s);
        if (n != 40 && n != 64) return false;
        for (size_t i = 0; i < n; i++)
                if (!isxdigit((unsigned char) s[i]) || isupper((unsigned char) s[i])) return false;
        return true;
}

int cs_write_small_file(const char *path, const char *data, size_t len) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) return -errno;
        return loop_write(fd, data, len);
}

int cs_append_file(const char *path, const char *data, size_t len) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) return -errno;
        return loop_write(fd, data, len);
}

int cs_write_specs(const char *path, char **a, char **b) {
        size_t size = 0;
        _cleanup_free_ char *buf = NULL;
        FILE *f = open_memstream(&buf, &size);
        if (!f) return -ENOMEM;
        for (size_t i = 0; a && a[i]; i++) fwrite(a[i], 1, strlen(a[i]) + 1, f);
        for (size_t i = 0; b && b[i]; i++) fwrite(b[i], 1, strlen(b[i]) + 1, f);
        if (fclose(f) != 0) return -ENOMEM;
        return cs_write_small_file(path, buf ? buf : "", size);
}

int cs_strp_cmp(const void *a, const void *b) { return strcmp(*(char *const *) a, *(char *const *) b); }

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

void git_ctx_done(git_ctx *g) {
        free(g->git_dir);
        free(g->work_tree);
        free(g->index_file);
        free(g->alternates);
        free(g->base_objects);
        free(g->home);
        strv_free(g->env);
        memset(g, 0, sizeof *g);
}

int git_env_push_path(char ***env) {
        const char *path = getenv("PATH");
        return strv_pushf(env, "PATH=%s", isempty(path) ? "/usr/local/bin:/usr/bin:/bin" : path);
}

int git_ctx_build_env(git_ctx *g) {
        _cleanup_strv_free_ char **env = NULL;
        int r = git_env_push_path(&env);
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
                _cleanup_free_ char *p = cs_path_join(git_dir, files[i].name);
                if (!p) return -ENOMEM;
                int r = cs_write_small_file(p, files[i].data, strlen(files[i].data));
                if (r < 0) return r;
        }
        return 0;
}

int git_ctx_copy(const git_ctx *g0, const char *index_file, bool with_work_tree, git_ctx *g) {
        if (!(g->git_dir = strdup(g0->git_dir)) || !(g->home = strdup(g0->home)) ||
            !(g->index_file = strdup(index_file)) || (with_work_tree && !(g->work_tree = strdup(g0->work_tree))) ||
            (g0->alternates && !(g->alternates = strdup(g0->alternates))) ||
            (g0->base_objects && !(g->base_objects = strdup(g0->base_objects))))
                return -ENOMEM;
        return git_ctx_build_env(g);
}

char *git_ctx_scratch_path(const git_ctx *g, const char *name) {
        const char *sl = g->index_file ? strrchr(g->index_file, '/') : NULL;
        return sl ? strdup_printf("%.*s/%s", (int) (sl - g->index_file), g->index_file, name) : NULL;
}

int git_ctx_scratch(git_ctx *g, const char *scratch, const scratch_repo *o, char **reason) {
        g->git_dir = cs_path_join(scratch, SCRATCH_GIT_NAME);
        g->index_file = cs_path_join(scratch, "index");
        g->home = cs_path_join(scratch, "home");
        if (!g->git_dir || !g->index_file || !g->home) return -ENOMEM;
        if (o->work_tree && !(g->work_tree = strdup(o->work_tree))) return -ENOMEM;
        if (o->objects && is_dir(o->objects) && !(g->alternates = strdup(o->objects))) return -ENOMEM;
        if (o->base_objects && !(g->base_objects = strdup(o->base_objects))) return -ENOMEM;
        int r = private_repo_create(g->git_dir);
        if (r < 0) {
                *reason = strdup_printf("cannot create the private git directory in %s: %s", scratch, strerror(-r));
                return r;
        }
        if (o->excludes) {
                _cleanup_free_ char *exclude_path = cs_path_join(g->git_dir, "info/exclude");
                if (!exclude_path) return -ENOMEM;
                if ((r = cs_write_small_file(exclude_path, o->excludes, o->excludes_len)) < 0) {
                        *reason = strdup_printf("cannot prepare %s: %s", scratch, strerror(-r));
                        return r;
                }
        }
        return git_ctx_build_env(g);
}

int run_git_argv(const git_ctx *g, const char *cwd, size_t max_out, run_result *rr, char *const *args) {
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

char *git_failure(const char *what, int r, const run_result *rr) {
        if (r < 0) {
                if (r == -EFBIG) return strdup_printf("git %s: output too large", what);
                return strdup_printf("could not run git %s: %s", what, strerror(-r));
        }
        _cleanup_free_ char *err = strdup(strempty(rr->err));
        if (!err) return NULL;
        cs_strip_trailing_space(err);
        if (rr->exit_code < 0)
                return strdup_printf("git %s killed by signal %s%s%s", what, strnull(signal_to_name(rr->signal)),
                                     *err ? ": " : "", err);
        return strdup_printf("git %s exited with status %d%s%s", what, rr->exit_code, *err ? ": " : "", err);
}

int git_ok(const git_ctx *g, const char *cwd, size_t max_out, run_result *rr, char **reason, const char *what,
           char *const *args) {
        int r = run_git_argv(g, cwd, max_out, rr, args);
        if (r >= 0 && rr->exit_code == 0) return 0;
        *reason = git_failure(what, r, rr);
        if (r >= 0) run_result_done(rr);
        return r < 0 ? r : -EIO;
}

int git_batched(const git_ctx *g, const char *cwd, size_t max_out, const char *what, char *const *prefix,
                char *const *args, bool ok_exit_1, size_t group, batch_cb cb, void *userdata, char **reason) {
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
                        *reason = git_failure(what, r, &rr);
                        if (r >= 0) run_result_done(&rr);
                        return r < 0 ? r : -EIO;
                }
                r = cb ? cb(userdata, &rr) : 0;
                run_result_done(&rr);
                if (r < 0) return r;
        }
        return 0;
}

int git_collect_lines(void *userdata, const run_result *rr) {
        char ***ignored = userdata;
        int r = 0;
        for (char *p = rr->out, *nl; r >= 0 && p < rr->out + rr->out_len; p = nl + 1) {
                nl = memchr(p, '\n', (size_t) (rr->out + rr->out_len - p));
                if (!nl) nl = rr->out + rr->out_len;
                if (nl > p) r = strv_consume(ignored, strndup(p, (size_t) (nl - p)));
        }
        return r;
}

int git_collect_nul_paths(void *userdata, const run_result *rr) {
        char ***l = userdata;
        int r = 0;
        for (char *p = rr->out; r >= 0 && p < rr->out + rr->out_len; p += strlen(p) + 1)
                if (*p) r = strv_push(l, p);
        return r;
}

/* Run git and read the one object id it prints: 0 with it in *ret, -errno
 * (*reason set; "git <what> printed no <noun>" when it printed none). */
static int git_oid(const git_ctx *g, const char *cwd, const char *what, char *const *args, const char *noun, char **ret,
                   char **reason) {
        run_result rr;
        int r = git_ok(g, cwd, SMALL_MAX, &rr, reason, what, args);
        if (r < 0) return r;
        cs_strip_trailing_space(rr.out);
        if (!cs_is_oid(rr.out)) {
                *reason = strdup_printf("git %s printed no %s", what, noun);
                run_result_done(&rr);
                return -EIO;
        }
        *ret = strdup(rr.out);
        run_result_done(&rr);
        return *ret ? 0 : -ENOMEM;
}

int git_line(const git_ctx *g, const char *cwd, char **reason, const char *what, char *const *args, char **ret) {
        return git_oid(g, cwd, what, args, "object id", ret, reason);
}

int git_read_tree(const git_ctx *g, const char *cwd, const char *tree, const char *what, char **reason) {
        char *args[] = {(char *) "read-tree", (char *) tree, NULL};
        run_result rr;
        int r = git_ok(g, cwd, 0, &rr, reason, what, args);
        if (r >= 0) run_result_done(&rr);
        return r;
}

int git_write_tree(const git_ctx *g, const char *cwd, bool missing_ok, char **ret_oid, char **reason) {
        char *args[] = {(char *) "write-tree", missing_ok ? (char *) "--missing-ok" : NULL, NULL};
        return git_oid(g, cwd, "write-tree", args, "tree id", ret_oid, reason);
}

int git_diff_trees(const git_ctx *g, const char *before, const char *after, run_result *rr, char **reason) {
        char *args[] = {(char *) "diff-tree", (char *) "-r", (char *) "-p", (char *) "--binary", (char *) "--full-index",
                        (char *) "-M", (char *) "--no-color", (char *) "--no-ext-diff", (char *) "--no-textconv",
                        (char *) "--src-prefix=a/", (char *) "--dst-prefix=b/", (char *) before, (char *) after, NULL};
        int r = git_ok(g, "/", PATCH_MAX, rr, reason, "diff-tree", args);
        if (r == -EFBIG) {
                free(*reason);
                *reason = strdup_printf("the patch is larger than %zu MiB", PATCH_MAX >> 20);
        }
        return r;
}

int git_try(const git_ctx *g, const char *cwd, char *const *args, char **ret_err) {
        run_result rr;
        int r = run_git_argv(g, cwd, 0, &rr, args);
        if (r < 0) return r;
        r = rr.exit_code == 0;
        *ret_err = cs_trimmed(rr.err);
        run_result_done(&rr);
        return *ret_err ? r : -ENOMEM;
}

int git_apply_check(const git_ctx *g, const char *cwd, bool cached, const char *patch, char **reason) {
        const char *what = cached ? "apply --cached --check" : "apply --check";
        char *args[] = {(char *) "apply", (char *) "--check", cached ? (char *) "--cached" : (char *) patch,
                        cached ? (char *) patch : NULL, NULL};
        run_result rr;
        int r = run_git_argv(g, cwd, 0, &rr, args);
        if (r < 0) {
                *reason = git_failure(what, r, &rr);
                return r;
        }
        r = rr.exit_code == 0;
        if (!r) *reason = cs_trimmed(*rr.err ? rr.err : "git apply --check failed");
        run_result_done(&rr);
        return r;
}

int git_add_tolerant(const git_ctx *g, const char *cwd, char *const *args, const char *what, char **ret_add_err,
                     char **reason) {
        run_result rr;
        int r = run_git_argv(g, cwd, 0, &rr, args);
        if (r < 0 || (rr.exit_code != 0 && rr.exit_code != 1)) {
                *reason = git_failure(what, r, &rr);
                if (r >= 0) run_result_done(&rr);
                return r < 0 ? r : -EIO;
        }
        *ret_add_err = NULL;
        if (rr.exit_code == 1 && !(*ret_add_err = strdup(strempty(rr.err)))) r = -ENOMEM;
        run_result_done(&rr);
        return r;
}

int git_blob_read(const git_ctx *g, git_cat **cat, const char *oid, char **ret, size_t *ret_len) {
        _cleanup_free_ char *err = NULL;
        if (!*cat) {
                int r = git_cat_open(g->env, cat, &err);
                if (r < 0) return r;
        }
        int r = git_cat_blob(*cat, oid, PATCH_MAX, ret, ret_len, &err);
        return r == -ENOENT || r == -EINVAL ? -EIO : r;
}

bool git_has_merge_tree(void) {
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
