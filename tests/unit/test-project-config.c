/* project-config.c: the project file .taskferry.toml (every key and type,
 * each malformed kind giving the empty config and a warning that names the
 * file, the line and the key but never the value, the stat identity cache
 * against in-place edits, renames and deletes, FIFOs and symlinks, which
 * directory's file a dispatch reads in a real git repository) and the bind
 * policy of project_binds_resolve over a real directory tree. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "project-config.h"
#include "string-util.h"
#include "strv.h"
#include "unit.h"

static char *dir;

static void setup(void) { dir = tf_tmpdir_new("project-config"); }
static void teardown(void) { dir = tf_tmpdir_free(dir); }

/* Write text as dir/.taskferry.toml (replacing it), return its path. */
static char *put_config(const char *text) {
        _cleanup_free_ char *p = tf_path(dir, ".taskferry.toml");
        unlink(p);
        return tf_put(dir, ".taskferry.toml", text, strlen(text));
}

static void load_ok(const char *d, ProjectConfig *c) {
        ck_assert_int_eq(project_config_load(d, c), 0);
        ck_assert_ptr_nonnull(c->path);
}

static void assert_empty(const ProjectConfig *c) {
        ck_assert_ptr_null(c->check);
        ck_assert_uint_eq(c->check_timeout_s, 900);
        ck_assert_ptr_null(c->ro_bind);
        ck_assert_ptr_null(c->review_paths);
}

static bool ends_with(const char *s, const char *suffix) {
        size_t n = strlen(s), m = strlen(suffix);
        return n >= m && streq(s + n - m, suffix);
}

static void assert_strv(char **l, const char *const *want) {
        size_t n = 0;
        for (; want[n]; n++) {
                ck_assert_msg(l && l[n], "entry %zu missing, want %s", n, want[n]);
                ck_assert_str_eq(l[n], want[n]);
        }
        ck_assert_uint_eq(strv_length(l), n);
}

/* ---- keys ---- */

START_TEST(every_key) {
        _cleanup_free_ char *path = put_config(
                "# the gate\n"
                "check = \"make check && echo 'ok'\"\n"
                "check_timeout_seconds = 1_200\n"
                "read_only_paths = [\"/opt/docs\", \"shared\"]\n"
                "roBind = [\n  \"/srv/ref\", # reference\n  \"/opt/docs\",\n  \"/srv/ref\",\n]\n"
                "review_paths = ['.github/', '*.lock', 'ci/**/*.yml']\n");
        ProjectConfig c = {};
        load_ok(dir, &c);
        ck_assert_str_eq(c.path, path);
        ck_assert(c.exists);
        ck_assert_ptr_null(c.warning);
        ck_assert_str_eq(c.check, "make check && echo 'ok'");
        ck_assert_uint_eq(c.check_timeout_s, 1200);
        /* read_only_paths first, then roBind, each once, as written */
        assert_strv(c.ro_bind, (const char *const[]) {"/opt/docs", "shared", "/srv/ref", NULL});
        assert_strv(c.review_paths, (const char *const[]) {".github/", "*.lock", "ci/**/*.yml", NULL});
        project_config_done(&c);
        ck_assert_ptr_null(c.path);
}
END_TEST

/* the text in memory reads as the same file read from disk */
START_TEST(parse_text_as_load) {
        static const char *const texts[] = {
                "check = \"make\"\ncheck_timeout_seconds = 60\nroBind = [\"/opt/a\"]\nreview_paths = [\"x/\"]\n",
                "chek = \"make\"\n",
                "check = \"a\"\ncheck = \"b\"\n",
                "[table]\n",
                "",
        };
        for (size_t i = 0; i < ELEMENTSOF(texts); i++) {
                _cleanup_free_ char *path = put_config(texts[i]);
                ProjectConfig a = {}, b = {};
                load_ok(dir, &a);
                ck_assert_int_eq(project_config_parse(path, texts[i], strlen(texts[i]), &b), 0);
                ck_assert_str_eq(b.path, a.path);
                ck_assert(b.exists && a.exists);
                ck_assert_str_eq(strnull(b.check), strnull(a.check));
                ck_assert_uint_eq(b.check_timeout_s, a.check_timeout_s);
                ck_assert_str_eq(strnull(b.warning), strnull(a.warning));
                ck_assert_uint_eq(strv_length(b.ro_bind), strv_length(a.ro_bind));
                ck_assert_uint_eq(strv_length(b.review_paths), strv_length(a.review_paths));
                project_config_done(&a);
                project_config_done(&b);
        }
}
END_TEST

START_TEST(defaults_and_bounds) {
        /* no file */
        ProjectConfig c = {};
        load_ok(dir, &c);
        _cleanup_free_ char *want = tf_path(dir, ".taskferry.toml");
        ck_assert_str_eq(c.path, want);
        ck_assert(!c.exists);
        ck_assert_ptr_null(c.warning);
        assert_empty(&c);
        project_config_done(&c);

        /* comments only; an empty check and empty arrays are none */
        free(put_config("# nothing yet\n\n"));
        load_ok(dir, &c);
        ck_assert(c.exists);
        ck_assert_ptr_null(c.warning);
        assert_empty(&c);
        project_config_done(&c);
        free(put_config("check = ''\nroBind = []\nread_only_paths = []\nreview_paths = []\n"));
        load_ok(dir, &c);
        ck_assert_ptr_null(c.warning);
        assert_empty(&c);
        project_config_done(&c);

        /* the timeout's bounds */
        free(put_config("check_timeout_seconds = 1\n"));
        load_ok(dir, &c);
        ck_assert_uint_eq(c.check_timeout_s, 1);
        project_config_done(&c);
        free(put_config("check_timeout_seconds = 604800\n"));
        load_ok(dir, &c);
        ck_assert_ptr_null(c.warning);
        ck_assert_uint_eq(c.check_timeout_s, 604800);
        project_config_done(&c);
}
END_TEST

/* A project file, the line its warning names (0: none), what it says; each
 * holds a value with "SECRET" or 424242 in it, which the warning must not
 * repeat. */
static const struct {
        const char *text;
        unsigned line;
        const char *needle;
} malformed[] = {
        /* the four kinds */
        {"check = 'ok'\ncheck = \"SECRET\n", 2, "unterminated string"},
        {"check = 'SECRET'\n\n\n\nchek = \"SECRET\"\n", 5,
         "unknown key \"chek\" (known: check, check_timeout_seconds, roBind, read_only_paths, review_paths, allowHosts)"},
        {"check = 'SECRET'\ncheck_timeout_seconds = -424242\n", 2,
         "check_timeout_seconds must be a positive integer (at most 604800)"},
        {"# c\ncheck = [\"SECRET\"]\n", 2, "check must be a string"},
        /* and the rest */
        {"check = 424242\n", 1, "check must be a string"},
        {"check = true\n", 1, "check must be a string"},
        {"check_timeout_seconds = 0\n", 1, "check_timeout_seconds must be a positive integer"},
        {"check_timeout_seconds = 604801\n", 1, "check_timeout_seconds must be a positive integer (at most 604800)"},
        {"check_timeout_seconds = 9223372036854775807\n", 1, "check_timeout_seconds must be a positive integer"},
        {"check_timeout_seconds = '424242'\n", 1, "check_timeout_seconds must be a positive integer"},
        {"check_timeout_seconds = 424242.5\n", 1, "floats are not supported"},
        {"roBind = '/SECRET'\n", 1, "roBind must be an array of non-empty strings"},
        {"roBind = ['/a', 424242]\n", 1, "roBind must be an array of non-empty strings"},
        {"read_only_paths = ['']\n", 1, "read_only_paths must be an array of non-empty strings"},
        {"review_paths = '.SECRET/'\n", 1, "review_paths must be an array of non-empty patterns relative"},
        {"review_paths = ['/SECRET/']\n", 1, "review_paths must be an array of non-empty patterns relative"},
        {"review_paths = [424242]\n", 1, "review_paths must be an array"},
        {"check = 'SECRET'\n[tool]\nx = 1\n", 2, "tables are not supported"},
        {"check = { run = 'SECRET' }\n", 1, "inline tables are not supported"},
        {"Check = 'SECRET'\n", 1, "unknown key \"Check\""},
        {"check = 'SECRET'\ncheck = 'SECRET'\n", 2, "duplicate key check"},
        {"check = '\xff SECRET'\n", 1, "not valid UTF-8"},
        /* several: the first by line */
        {"check = 'SECRET'\nbogus = 1\ncheck_timeout_seconds = -1\n", 2, "unknown key \"bogus\""},
        {"check_timeout_seconds = -1\nbogus = 1\n", 1, "check_timeout_seconds must be"},
        {"check = 'SECRET'\nbogus = 1\n\ncheck_timeout_seconds = \"SECRET\n", 2, "unknown key \"bogus\""},
        {"check = \"SECRET\nbogus = 1\n", 1, "unterminated string"},
};

START_TEST(malformed_is_ignored_with_a_warning) {
        _cleanup_free_ char *path = put_config(malformed[_i].text);
        ProjectConfig c = {};
        load_ok(dir, &c);
        ck_assert(c.exists);
        ck_assert_msg(c.warning, "no warning for\n%s", malformed[_i].text);
        _cleanup_free_ char *head = malformed[_i].line ? strdup_printf("%s:%u: ", path, malformed[_i].line)
                                                       : strdup_printf("%s: ", path);
        ck_assert_msg(startswith(c.warning, head), "warning '%s' does not start with '%s'", c.warning, head);
        ck_assert_msg(strstr(c.warning, malformed[_i].needle), "warning '%s' lacks '%s'", c.warning, malformed[_i].needle);
        ck_assert_msg(ends_with(c.warning, "; the project file is ignored"), "%s", c.warning);
        ck_assert_msg(!strstr(c.warning, "SECRET") && !strstr(c.warning, "424242"), "the warning repeats a value: %s",
                      c.warning);
        /* the empty config, whatever the good lines said */
        assert_empty(&c);
        project_config_done(&c);
}
END_TEST

START_TEST(long_unknown_key_is_cut) {
        char key[300];
        memset(key, 'k', sizeof key - 1);
        key[sizeof key - 1] = 0;
        _cleanup_free_ char *text = strdup_printf("%s = 1\n", key);
        free(put_config(text));
        ProjectConfig c = {};
        load_ok(dir, &c);
        ck_assert_ptr_nonnull(c.warning);
        ck_assert_ptr_nonnull(strstr(c.warning, "unknown key \"kkkk"));
        ck_assert_ptr_null(strstr(c.warning, key));
        ck_assert_uint_lt(strlen(c.warning), strlen(dir) + 300);
        project_config_done(&c);
}
END_TEST

/* allowHosts: rules as written; one that is no rule makes the file the
 * empty config, naming its index, never its text */
START_TEST(allow_hosts) {
        free(put_config("allowHosts = [\"pypi.org\", \"*.example.com:8443\", \"10.0.0.1:5432\"]\n"));
        ProjectConfig c = {};
        load_ok(dir, &c);
        ck_assert_msg(!c.warning, "%s", c.warning);
        assert_strv(c.allow_hosts, (const char *const[]) {"pypi.org", "*.example.com:8443", "10.0.0.1:5432", NULL});
        project_config_done(&c);
        free(put_config("allowHosts = [\"pypi.org\", \"SECRET host\"]\n"));
        load_ok(dir, &c);
        ck_assert_msg(c.warning && strstr(c.warning, ":1: allowHosts entry 2 is no host rule"), "%s", strempty(c.warning));
        ck_assert(!strstr(c.warning, "SECRET"));
        ck_assert_ptr_null(c.allow_hosts);
        project_config_done(&c);
        free(put_config("allowHosts = \"pypi.org\"\n"));
        load_ok(dir, &c);
        ck_assert_msg(c.warning && strstr(c.warning, "allowHosts must be an array"), "%s", strempty(c.warning));
        project_config_done(&c);
}
END_TEST

/* an array key of more than PROJECT_CONFIG_MAX_ENTRIES entries makes the
 * file the empty config; exactly that many is read */
START_TEST(too_many_entries) {
        static const char *const keys[] = {"roBind", "read_only_paths", "review_paths"};
        for (size_t k = 0; k < ELEMENTSOF(keys); k++)
                for (int n = PROJECT_CONFIG_MAX_ENTRIES; n <= PROJECT_CONFIG_MAX_ENTRIES + 1; n++) {
                        _cleanup_free_ char *text = strdup_printf("check = \"make\"\n%s = [", keys[k]);
                        for (int i = 0; i < n; i++) {
                                char *t = strdup_printf("%s\"d%d\"%s", text, i, i + 1 < n ? ", " : "]\n");
                                free(text);
                                text = t;
                        }
                        free(put_config(text));
                        ProjectConfig c = {};
                        load_ok(dir, &c);
                        if (n == PROJECT_CONFIG_MAX_ENTRIES) {
                                ck_assert_msg(!c.warning, "%s", c.warning);
                                ck_assert_str_eq(c.check, "make");
                                ck_assert_uint_eq(strv_length(k == 2 ? c.review_paths : c.ro_bind), (size_t) n);
                        } else {
                                _cleanup_free_ char *want = strdup_printf("%s has more than %d entries", keys[k],
                                                                          PROJECT_CONFIG_MAX_ENTRIES);
                                ck_assert_msg(c.warning && strstr(c.warning, want), "%s", strempty(c.warning));
                                assert_empty(&c);
                        }
                        project_config_done(&c);
                }
}
END_TEST

/* ---- the file and its cache ---- */

static char *check_of(const char *d) {
        ProjectConfig c = {};
        load_ok(d, &c);
        char *s = c.warning ? strdup_printf("warning: %s", c.warning) : strdup(strempty(c.check));
        project_config_done(&c);
        return s;
}

/* mtime of path back to ts (atime too) */
static void set_mtime(const char *path, const struct timespec *ts) {
        struct timespec t[2] = {*ts, *ts};
        ck_assert_int_eq(utimensat(AT_FDCWD, path, t, 0), 0);
}

START_TEST(cache_sees_every_change) {
        _cleanup_free_ char *path = put_config("check = \"make aaaa\"\n");
        struct timespec old = {.tv_sec = 1000000000};
        set_mtime(path, &old);
        _cleanup_free_ char *a = check_of(dir);
        ck_assert_str_eq(a, "make aaaa");
        _cleanup_free_ char *a2 = check_of(dir);
        ck_assert_str_eq(a2, "make aaaa");

        /* in place, same size, mtime put back: the ctime moved (let the
         * clock tick past the first read's ctime first) */
        usleep(20000);
        int fd = open(path, O_WRONLY);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(pwrite(fd, "bbbb", 4, 14), 4);
        close(fd);
        set_mtime(path, &old);
        struct stat st;
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_mtim.tv_sec, old.tv_sec);
        ck_assert_int_eq(st.st_size, 20);
        _cleanup_free_ char *b = check_of(dir);
        ck_assert_str_eq(b, "make bbbb");

        /* replaced by a rename, same size and mtime */
        _cleanup_free_ char *tmp = tf_put(dir, "next.toml", "check = \"make cccc\"\n", 20);
        set_mtime(tmp, &old);
        ck_assert_int_eq(rename(tmp, path), 0);
        _cleanup_free_ char *c = check_of(dir);
        ck_assert_str_eq(c, "make cccc");

        /* a bad edit warns, the fix is seen */
        usleep(20000);
        fd = open(path, O_WRONLY | O_TRUNC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "chek = 1\n", 9), 9);
        close(fd);
        _cleanup_free_ char *w = check_of(dir);
        ck_assert(startswith(w, "warning: "));
        free(put_config("check = \"fixed\"\n"));
        _cleanup_free_ char *f = check_of(dir);
        ck_assert_str_eq(f, "fixed");

        /* deleted: the empty config, then a new file again */
        ck_assert_int_eq(unlink(path), 0);
        ProjectConfig e = {};
        load_ok(dir, &e);
        ck_assert(!e.exists);
        ck_assert_ptr_null(e.warning);
        assert_empty(&e);
        project_config_done(&e);
        free(put_config("check = \"make cccc\"\n"));
        _cleanup_free_ char *again = check_of(dir);
        ck_assert_str_eq(again, "make cccc");
}
END_TEST

START_TEST(not_a_regular_file) {
        _cleanup_free_ char *path = tf_path(dir, ".taskferry.toml");
        ProjectConfig c = {};

        /* a FIFO with no writer: refused at once, never read */
        ck_assert_int_eq(mkfifo(path, 0600), 0);
        alarm(10);
        load_ok(dir, &c);
        alarm(0);
        ck_assert(c.exists);
        ck_assert_ptr_nonnull(c.warning);
        ck_assert_ptr_nonnull(strstr(c.warning, "a FIFO, not a regular file"));
        assert_empty(&c);
        project_config_done(&c);
        ck_assert_int_eq(unlink(path), 0);

        /* a directory */
        tf_mkdirs(dir, ".taskferry.toml");
        load_ok(dir, &c);
        ck_assert(c.exists);
        ck_assert_ptr_nonnull(strstr(c.warning, "a directory, not a regular file"));
        project_config_done(&c);
        ck_assert_int_eq(rmdir(path), 0);

        /* a symlink out of the repository (to /etc/passwd, a real file) */
        ck_assert_int_eq(symlink("/etc/passwd", path), 0);
        load_ok(dir, &c);
        ck_assert(c.exists);
        ck_assert_ptr_nonnull(c.warning);
        _cleanup_free_ char *want = strdup_printf("%s: a symlink that leads outside the repository; the project file is ignored",
                                                  path);
        ck_assert_str_eq(c.warning, want);
        assert_empty(&c);
        project_config_done(&c);
        ck_assert_int_eq(unlink(path), 0);

        /* a symlink through a directory link out of it */
        _cleanup_free_ char *outside = tf_tmpdir_new("outside");
        _cleanup_free_ char *of = tf_put(outside, "t.toml", "check = 'out'\n", 14);
        _cleanup_free_ char *link_dir = tf_path(dir, "cfg");
        ck_assert_int_eq(symlink(outside, link_dir), 0);
        ck_assert_int_eq(symlink("cfg/t.toml", path), 0);
        load_ok(dir, &c);
        ck_assert_ptr_nonnull(c.warning);
        ck_assert_ptr_nonnull(strstr(c.warning, "leads outside the repository"));
        ck_assert_ptr_null(c.check);
        project_config_done(&c);
        ck_assert_int_eq(unlink(path), 0);
        outside = tf_tmpdir_free(outside);

        /* a symlink inside it is followed */
        _cleanup_free_ char *in = tf_put(dir, "config/taskferry.toml", "check = 'inside'\n", 17);
        ck_assert_int_eq(symlink("config/taskferry.toml", path), 0);
        load_ok(dir, &c);
        ck_assert_ptr_null(c.warning);
        ck_assert_str_eq(c.check, "inside");
        project_config_done(&c);
        ck_assert_int_eq(unlink(path), 0);

        /* a dangling symlink */
        ck_assert_int_eq(symlink("nowhere.toml", path), 0);
        load_ok(dir, &c);
        ck_assert(c.exists);
        ck_assert_ptr_nonnull(strstr(c.warning, "a symlink that leads nowhere"));
        project_config_done(&c);
        ck_assert_int_eq(unlink(path), 0);

        /* over 1 MiB (a comment: valid TOML but for its size) */
        size_t n = PROJECT_CONFIG_MAX_BYTES + 1;
        _cleanup_free_ char *big = malloc(n);
        ck_assert_ptr_nonnull(big);
        memset(big, ' ', n);
        big[0] = '#';
        tf_write_file(path, big, n, 0600);
        load_ok(dir, &c);
        ck_assert_ptr_nonnull(strstr(c.warning, "larger than 1048576 bytes"));
        project_config_done(&c);
        /* exactly 1 MiB is read */
        ck_assert_int_eq(truncate(path, PROJECT_CONFIG_MAX_BYTES), 0);
        load_ok(dir, &c);
        ck_assert_ptr_null(c.warning);
        project_config_done(&c);

        /* unreadable: a warning, not an error */
        if (geteuid() != 0) {
                ck_assert_int_eq(chmod(path, 0), 0);
                load_ok(dir, &c);
                ck_assert_ptr_nonnull(strstr(c.warning, "cannot read it: Permission denied"));
                project_config_done(&c);
        }
}
END_TEST

START_TEST(which_directory) {
        free(tf_sh(dir, "git init -q repo && mkdir -p repo/a/b plain/sub"));
        _cleanup_free_ char *repo = tf_path(dir, "repo"), *sub = tf_path(dir, "repo/a/b");
        _cleanup_free_ char *top_file = tf_put(repo, ".taskferry.toml", "check = 'top'\n", 14);
        /* a file in the subdirectory is not the project's */
        _cleanup_free_ char *sub_file = tf_put(sub, ".taskferry.toml", "check = 'sub'\n", 14);
        _cleanup_free_ char *p = project_config_path(sub);
        ck_assert_str_eq(p, top_file);
        ProjectConfig c = {};
        load_ok(sub, &c);
        ck_assert_str_eq(c.path, top_file);
        ck_assert_str_eq(c.check, "top");
        project_config_done(&c);

        /* a linked worktree reads its own top */
        free(tf_sh(repo, "git -c user.name=t -c user.email=t@t commit -q --allow-empty -m i && git worktree add -q ../wt"));
        _cleanup_free_ char *wt = tf_path(dir, "wt");
        _cleanup_free_ char *wt_file = tf_put(wt, ".taskferry.toml", "check = 'wt'\n", 13);
        _cleanup_free_ char *wsub = tf_path(wt, "a");
        tf_mkdirs(wt, "a");
        load_ok(wsub, &c);
        ck_assert_str_eq(c.path, wt_file);
        ck_assert_str_eq(c.check, "wt");
        project_config_done(&c);

        /* outside git: the directory's own file, never a parent's */
        _cleanup_free_ char *plain = tf_path(dir, "plain"), *psub = tf_path(dir, "plain/sub");
        _cleanup_free_ char *pf = tf_put(plain, ".taskferry.toml", "check = 'plain'\n", 16);
        free(p);
        p = project_config_path(plain);
        ck_assert_str_eq(p, pf);
        load_ok(plain, &c);
        ck_assert_str_eq(c.check, "plain");
        project_config_done(&c);
        load_ok(psub, &c);
        _cleanup_free_ char *psf = tf_path(psub, ".taskferry.toml");
        ck_assert_str_eq(c.path, psf);
        ck_assert(!c.exists);
        ck_assert_ptr_null(c.check);
        project_config_done(&c);
}
END_TEST

/* ---- the bind policy ---- */

/* dir/{repo/{docs,escape→../outside},outside,home/.ssh,state}: the world of
 * a bind case. */
static char *repo, *outside, *home, *ssh, *state;

static void binds_setup(void) {
        setup();
        tf_mkdirs(dir, "repo/docs/deep");
        tf_mkdirs(dir, "outside/ref");
        tf_mkdirs(dir, "home/.ssh");
        tf_mkdirs(dir, "home/src");
        tf_mkdirs(dir, "state");
        repo = tf_path(dir, "repo");
        outside = tf_path(dir, "outside");
        home = tf_path(dir, "home");
        ssh = tf_path(dir, "home/.ssh");
        state = tf_path(dir, "state");
        tf_symlink(dir, "outside", "repo/escape");
        tf_symlink(dir, "repo/docs", "repo/docs-link");
}

static void binds_teardown(void) {
        free(repo);
        free(outside);
        free(home);
        free(ssh);
        free(state);
        repo = outside = home = ssh = state = NULL;
        teardown();
}

/* project_binds_resolve(entries) with trust or not: the binds it mounts
 * (want_binds) and its warning (want_warning, NULL: none). */
static void binds_are(char **entries, bool trusted, const char *const *want_binds, const char *want_warning) {
        char *trust[] = {dir, NULL};
        char *protect[] = {ssh, state, NULL};
        char **binds = NULL;
        char *warning = NULL;
        ck_assert_int_eq(project_binds_resolve(entries, repo, home, trusted ? trust : NULL, protect, &binds, &warning), 0);
        assert_strv(binds, want_binds);
        if (want_warning) {
                ck_assert_ptr_nonnull(warning);
                ck_assert_str_eq(warning, want_warning);
        } else
                ck_assert_msg(!warning, "unexpected warning: %s", warning);
        strv_free(binds);
        free(warning);
}

START_TEST(binds_inside_and_outside) {
        _cleanup_free_ char *docs = tf_path(repo, "docs"), *deep = tf_path(repo, "docs/deep"),
                            *ref = tf_path(outside, "ref");
        /* inside the repository: mounted, relative ones against its root, "~" not expanded */
        tf_mkdirs(repo, "~/x");
        _cleanup_free_ char *tilde = tf_path(repo, "~/x");
        binds_are((char *[]) {docs, "docs/deep", "~/x", NULL}, false, (const char *const[]) {docs, deep, tilde, NULL}, NULL);
        /* two spellings of one path: mounted once */
        binds_are((char *[]) {"docs", docs, "docs-link", "./docs/../docs", NULL}, false, (const char *const[]) {docs, NULL},
                  NULL);

        /* outside: refused, unless the repository is trusted */
        _cleanup_free_ char *w = strdup_printf(
                ".taskferry.toml roBind: outside the repository, and the repository is not trusted, skipped: %s, /usr", ref);
        binds_are((char *[]) {ref, "docs", "/usr", NULL}, false, (const char *const[]) {docs, NULL}, w);
        binds_are((char *[]) {ref, "docs", "/usr", NULL}, true, (const char *const[]) {ref, docs, "/usr", NULL}, NULL);

        /* a symlink inside the repository pointing out of it is outside */
        free(w);
        w = strdup_printf(".taskferry.toml roBind: outside the repository, and the repository is not trusted, skipped: "
                          "escape, escape/ref");
        binds_are((char *[]) {"escape", "escape/ref", NULL}, false, (const char *const[]) {NULL}, w);
        binds_are((char *[]) {"escape/ref", NULL}, true, (const char *const[]) {ref, NULL}, NULL);

        /* missing: skipped */
        binds_are((char *[]) {"gone", "/nonexistent/taskferry", "docs", NULL}, false, (const char *const[]) {docs, NULL},
                  ".taskferry.toml roBind: not found on this host, skipped: gone, /nonexistent/taskferry");
        /* many skipped: the first 16 named, then a count */
        char *many[41];
        for (int i = 0; i < 40; i++) many[i] = strdup_printf("gone%d", i);
        many[40] = NULL;
        _cleanup_free_ char *mw = strdup(".taskferry.toml roBind: not found on this host, skipped: gone0");
        for (int i = 1; i < 16; i++) {
                char *t = strdup_printf("%s, gone%d", mw, i);
                free(mw);
                mw = t;
        }
        char *t = strdup_printf("%s and 24 more", mw);
        free(mw);
        mw = t;
        binds_are(many, false, (const char *const[]) {NULL}, mw);
        for (int i = 0; i < 40; i++) free(many[i]);
        /* none */
        binds_are(NULL, false, (const char *const[]) {NULL}, NULL);
        binds_are((char *[]) {NULL}, true, (const char *const[]) {NULL}, NULL);
}
END_TEST

START_TEST(binds_always_refused) {
        _cleanup_free_ char *src = tf_path(home, "src"), *key = tf_put(ssh, "id_ed25519", "k", 1);
        _cleanup_free_ char *sub_state = tf_path(state, "x");
        tf_mkdirs(state, "x");
        /* each refused trusted or not: /, home, an ancestor of home, the
         * repository and its ancestors, what overlaps a protected path */
        char *refused[] = {"/", home, dir, repo, ".", "..", ssh, key, state, sub_state, NULL};
        for (int t = 0; t < 2; t++) {
                for (char **e = refused; *e; e++) {
                        _cleanup_free_ char *w =
                                strdup_printf(".taskferry.toml roBind: overlaps a protected sandbox mount, skipped: %s", *e);
                        binds_are((char *[]) {*e, NULL}, t, (const char *const[]) {NULL}, w);
                }
        }
        /* a path holding a protected one (home's parent holds ~/.ssh and
         * state), and home itself spelled through the repository */
        char rel_home[PATH_MAX];
        snprintf(rel_home, sizeof rel_home, "../home");
        binds_are((char *[]) {rel_home, NULL}, true, (const char *const[]) {NULL},
                  ".taskferry.toml roBind: overlaps a protected sandbox mount, skipped: ../home");
        /* a sibling in home that overlaps nothing protected is fine when trusted */
        binds_are((char *[]) {src, NULL}, true, (const char *const[]) {src, NULL}, NULL);

        /* every reason at once, grouped, in the order missing, untrusted, protected */
        _cleanup_free_ char *docs = tf_path(repo, "docs");
        _cleanup_free_ char *w = strdup_printf(".taskferry.toml roBind: not found on this host, skipped: nope, /no/such; "
                                               "outside the repository, and the repository is not trusted, skipped: %s; "
                                               "overlaps a protected sandbox mount, skipped: /, %s",
                                               src, ssh);
        binds_are((char *[]) {"/", "nope", src, "docs", ssh, "/no/such", NULL}, false,
                  (const char *const[]) {docs, NULL}, w);
}
END_TEST

START_TEST(binds_trust_is_by_repository) {
        /* trust names the repository or a dir above it; a trusted sibling
         * does not make this one trusted */
        _cleanup_free_ char *ref = tf_path(outside, "ref");
        char **binds = NULL;
        char *warning = NULL;
        char *sibling[] = {outside, NULL};
        ck_assert_int_eq(project_binds_resolve((char *[]) {ref, NULL}, repo, home, sibling, NULL, &binds, &warning), 0);
        ck_assert_ptr_null(binds);
        ck_assert_ptr_nonnull(strstr(warning, "not trusted"));
        free(warning);
        char *exact[] = {"/nonexistent", repo, NULL};
        ck_assert_int_eq(project_binds_resolve((char *[]) {ref, NULL}, repo, home, exact, NULL, &binds, &warning), 0);
        assert_strv(binds, (const char *const[]) {ref, NULL});
        ck_assert_ptr_null(warning);
        strv_free(binds);
        /* a prefix that is not a parent dir is no trust ("/x/re" of "/x/repo") */
        _cleanup_free_ char *prefix = strndup(repo, strlen(repo) - 1);
        char *pre[] = {prefix, NULL};
        ck_assert_int_eq(project_binds_resolve((char *[]) {ref, NULL}, repo, home, pre, NULL, &binds, &warning), 0);
        ck_assert_ptr_null(binds);
        ck_assert_ptr_nonnull(warning);
        free(warning);
        /* no home given: only the other rules */
        ck_assert_int_eq(project_binds_resolve((char *[]) {"docs", NULL}, repo, NULL, NULL, NULL, &binds, &warning), 0);
        ck_assert_uint_eq(strv_length(binds), 1);
        ck_assert_ptr_null(warning);
        strv_free(binds);
}
END_TEST

int main(void) {
        Suite *s = suite_create("project-config");
        TCase *tc = tf_tcase(s, "file", setup, teardown, 30,
                             TF_TESTS(every_key, parse_text_as_load, defaults_and_bounds, long_unknown_key_is_cut, too_many_entries, allow_hosts, cache_sees_every_change,
                                      not_a_regular_file, which_directory));
        TF_LOOP(tc, malformed_is_ignored_with_a_warning, malformed);
        tf_tcase(s, "binds", binds_setup, binds_teardown, 30,
                 TF_TESTS(binds_inside_and_outside, binds_always_refused, binds_trust_is_by_repository));
        return tf_run_suite(s);
}
