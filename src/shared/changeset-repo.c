/* The user's repository as the host's git sees it: where D's repository is,
 * the ignore rules that do not live in D's work tree, a core.hooksPath inside
 * D (changeset-repo.h).
 *
 * Ignore rules: the work tree's .gitignore files, the user's excludes file
 * (core.excludesFile or $XDG_CONFIG_HOME/git/ignore), the repository's
 * info/exclude and, for a subdirectory dispatch, the .gitignore files of the
 * directories between the repository top and D (git would not read those with
 * D as the work tree). Patterns that are anchored to another directory than D
 * (contain a '/' before the end) cannot be re-rooted and are left out for a
 * subdirectory dispatch. */
#include "changeset-repo.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "changeset-git.h"
#include "macro.h"
#include "fileio.h"
#include "path-util.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"

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

char *exclude_pattern_for(const char *path) {
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

void repo_info_done(repo_info *ri) {
        free(ri->common_dir);
        free(ri->toplevel);
        free(ri->prefix);
        free(ri->excludes);
        free(ri->hooks_rel);
        memset(ri, 0, sizeof *ri);
}

/* Environment for the read-only git calls on the user's own repository
 * in the host view: the user's config applies (as for any git command they
 * run), but nothing from the caller's GIT_* variables. */
static int host_env(char ***ret) {
        _cleanup_strv_free_ char **env = NULL;
        const char *home = getenv("HOME"), *xdg = getenv("XDG_CONFIG_HOME");
        int r = git_env_push_path(&env);
        if (r >= 0 && home) r = strv_pushf(&env, "HOME=%s", home);
        if (r >= 0 && xdg) r = strv_pushf(&env, "XDG_CONFIG_HOME=%s", xdg);
        if (r >= 0) r = strv_push(&env, "LC_ALL=C");
        if (r >= 0) r = strv_push(&env, "GIT_TERMINAL_PROMPT=0");
        if (r < 0) return r;
        *ret = TAKE_PTR(env);
        return 0;
}

int host_git_path(const char *dir, const char *what, const char *arg, char **ret) {
        _cleanup_strv_free_ char **env = NULL;
        int r = host_env(&env);
        if (r < 0) return r;
        char *argv[] = {(char *) "git", (char *) "-c", (char *) "core.fsmonitor=false", (char *) "-C", (char *) dir,
                        (char *) "rev-parse", (char *) "--path-format=absolute", (char *) what, (char *) arg, NULL};
        run_result rr;
        if ((r = run_command(argv, env, "/", SMALL_MAX, -1, &rr)) < 0) return r;
        r = 0;
        if (rr.exit_code == 0 && rr.out && rr.out[0] == '/') {
                cs_strip_trailing_space(rr.out);
                r = (*ret = strdup(rr.out)) ? 1 : -ENOMEM;
        }
        run_result_done(&rr);
        return r;
}

int host_git_head(const char *dir, char **ret) {
        _cleanup_strv_free_ char **env = NULL;
        if (host_env(&env) < 0) return -ENOMEM;
        char *argv[] = {(char *) "git", (char *) "-c", (char *) "core.fsmonitor=false", (char *) "-C", (char *) dir,
                        (char *) "rev-parse", (char *) "--verify", (char *) "-q", (char *) "HEAD", NULL};
        run_result rr;
        if (run_command(argv, env, "/", SMALL_MAX, -1, &rr) < 0) return 0;
        int r = 0;
        if (rr.exit_code == 0 && rr.out) {
                cs_strip_trailing_space(rr.out);
                if (cs_is_oid(rr.out)) r = (*ret = strdup(rr.out)) ? 1 : -ENOMEM;
        }
        run_result_done(&rr);
        if (r != 0) return r;
        /* an unborn HEAD: a repository all the same */
        _cleanup_free_ char *common = NULL;
        if (host_git_path(dir, "--git-common-dir", NULL, &common) <= 0) return 0;
        return (*ret = strdup("4b825dc642cb6eb9a060e54bf8d69288fbee4904")) ? 1 : -ENOMEM;
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
                cs_strip_trailing_space(rr.out);
                if (*rr.out && !(*ret = strdup(rr.out))) r = -ENOMEM;
        }
        run_result_done(&rr);
        return r;
}

int repo_info_gather(const char *dir, repo_info *ri) {
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
                _cleanup_free_ char *abs = !hooks ? NULL : hooks[0] == '/' ? strdup(hooks) : cs_path_join(ri->toplevel, hooks);
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
                _cleanup_free_ char *p = cs_path_join(ri->common_dir, "info/exclude");
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
                _cleanup_free_ char *top = cs_path_join(ri->toplevel, ".gitignore");
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

char *host_index_path(const char *dir) {
        _cleanup_free_ char *p = NULL;
        struct stat st;
        if (host_git_path(dir, "--git-path", "index", &p) <= 0 || stat(p, &st) < 0 || !S_ISREG(st.st_mode)) return NULL;
        return TAKE_PTR(p);
}

int base_treeish(const char *pre_head, const char *prefix, char **ret) {
        _cleanup_free_ char *p = strdup(strempty(prefix));
        if (!p) return -ENOMEM;
        size_t n = strlen(p);
        while (n > 0 && p[n - 1] == '/') p[--n] = 0;
        *ret = n ? strdup_printf("%s:%s", pre_head, p) : strdup(pre_head);
        return *ret ? 0 : -ENOMEM;
}
