/* The project file .taskferry.toml and its bind policy (project-config.h). */
#include "project-config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "gitdir.h"
#include "json-util.h"
#include "macro.h"
#include "path-util.h"
#include "string-util.h"
#include "strv.h"
#include "net-policy.h"
#include "toml.h"

#define PROJECT_FILE ".taskferry.toml"
#define KNOWN_KEYS "check, check_timeout_seconds, roBind, read_only_paths, review_paths, allowHosts"
#define IGNORED "the project file is ignored"
/* the most bytes of an unknown key a warning shows */
#define KEY_SHOWN_MAX 64
/* the skipped roBind entries a warning names per reason */
#define SKIPPED_SHOWN_MAX 16
/* paths the cache remembers; the oldest goes first */
#define CACHE_MAX 64

char *project_config_path(const char *dir) {
        git_dirs g = {};
        int r = git_dirs_find(dir, &g);
        if (r < 0) return NULL;
        const char *top = r > 0 ? g.top : dir;
        char *p = strdup_printf("%s%s" PROJECT_FILE, top, streq(top, "/") ? "" : "/");
        git_dirs_done(&g);
        return p;
}

void project_config_done(ProjectConfig *c) {
        free(c->path);
        free(c->check);
        strv_free(c->ro_bind);
        strv_free(c->review_paths);
        strv_free(c->allow_hosts);
        free(c->warning);
        *c = (ProjectConfig) {};
}

/* ---- the keys ---- */

/* The parsed values of a file: everything of a ProjectConfig but its path
 * and exists. */
typedef struct parsed {
        char *check;
        uint64_t timeout_s;
        char **ro_bind, **review_paths, **allow_hosts;
        char *warning;
} parsed;

static void parsed_done(parsed *p) {
        free(p->check);
        strv_free(p->ro_bind);
        strv_free(p->review_paths);
        strv_free(p->allow_hosts);
        free(p->warning);
        *p = (parsed) {};
}

static int parsed_copy(const parsed *p, parsed *ret) {
        *ret = (parsed) { .timeout_s = p->timeout_s };
        if ((p->check && !(ret->check = strdup(p->check))) || (p->ro_bind && !(ret->ro_bind = strv_copy(p->ro_bind))) ||
            (p->review_paths && !(ret->review_paths = strv_copy(p->review_paths))) ||
            (p->allow_hosts && !(ret->allow_hosts = strv_copy(p->allow_hosts))) ||
            (p->warning && !(ret->warning = strdup(p->warning)))) {
                parsed_done(ret);
                return -ENOMEM;
        }
        return 0;
}

/* The empty config with the warning "<path>[:<line>]: <what>; ignored". */
static int parsed_warn(parsed *p, const char *path, unsigned line, const char *fmt, ...) _printf_(4, 5);
static int parsed_warn(parsed *p, const char *path, unsigned line, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *what = NULL;
        if (vasprintf(&what, fmt, ap) < 0) what = NULL;
        va_end(ap);
        if (!what) return -ENOMEM;
        parsed_done(p);
        p->timeout_s = PROJECT_CONFIG_DEFAULT_CHECK_TIMEOUT_S;
        p->warning = line ? strdup_printf("%s:%u: %s; " IGNORED, path, line, what)
                          : strdup_printf("%s: %s; " IGNORED, path, what);
        free(what);
        return p->warning ? 0 : -ENOMEM;
}

/* Append each string of an array to *l unless already there. 1: done, 0:
 * an entry is no string or is empty (or, with relative_only, starts with
 * "/"), -E2BIG: more than PROJECT_CONFIG_MAX_ENTRIES entries, -ENOMEM. */
static int add_strings(char ***l, json_object *arr, bool relative_only) {
        size_t n = json_object_array_length(arr);
        if (n > PROJECT_CONFIG_MAX_ENTRIES) return -E2BIG;
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(arr, i);
                if (!json_object_is_type(e, json_type_string)) return 0;
                const char *s = json_object_get_string(e);
                if (isempty(s) || (relative_only && s[0] == '/')) return 0;
                if (strv_contains(*l, s)) continue;
                if (strv_push(l, s) < 0) return -ENOMEM;
        }
        return 1;
}

/* Validate the table in file order (so the first error is the first by
 * line). Returns 0 with *p filled or warned, -ENOMEM. */
static int parse_table(json_object *table, json_object *lines, const char *path, parsed *p) {
        _cleanup_strv_free_ char **ro = NULL, **rb = NULL;
        *p = (parsed) { .timeout_s = PROJECT_CONFIG_DEFAULT_CHECK_TIMEOUT_S };
        json_object_object_foreach(table, key, value) {
                int64_t l = 0;
                (void) json_get_int64(lines, key, &l);
                unsigned line = (unsigned) l;
                if (streq(key, "check")) {
                        if (!json_object_is_type(value, json_type_string))
                                return parsed_warn(p, path, line, "check must be a string");
                        const char *s = json_object_get_string(value);
                        free(p->check);
                        p->check = NULL;
                        if (!isempty(s) && !(p->check = strdup(s))) return -ENOMEM;
                } else if (streq(key, "check_timeout_seconds")) {
                        int64_t v = json_object_is_type(value, json_type_int) ? json_object_get_int64(value) : 0;
                        if (v <= 0 || (uint64_t) v > PROJECT_CONFIG_MAX_CHECK_TIMEOUT_S)
                                return parsed_warn(p, path, line,
                                                   "check_timeout_seconds must be a positive integer (at most %" PRIu64 ")",
                                                   PROJECT_CONFIG_MAX_CHECK_TIMEOUT_S);
                        p->timeout_s = (uint64_t) v;
                } else if (streq(key, "roBind") || streq(key, "read_only_paths") || streq(key, "review_paths")) {
                        bool review = streq(key, "review_paths");
                        int r = json_object_is_type(value, json_type_array)
                                        ? add_strings(review ? &p->review_paths : streq(key, "roBind") ? &rb : &ro, value,
                                                      review)
                                        : 0;
                        if (r == -E2BIG)
                                return parsed_warn(p, path, line, "%s has more than %d entries", key,
                                                   PROJECT_CONFIG_MAX_ENTRIES);
                        if (r < 0) return r;
                        if (r == 0)
                                return parsed_warn(p, path, line,
                                                   review ? "review_paths must be an array of non-empty patterns relative "
                                                            "to the repository root"
                                                          : "%s must be an array of non-empty strings (paths)",
                                                   key);
                } else if (streq(key, "allowHosts")) {
                        int r = json_object_is_type(value, json_type_array) ? add_strings(&p->allow_hosts, value, false) : 0;
                        if (r == -E2BIG)
                                return parsed_warn(p, path, line, "allowHosts has more than %d entries",
                                                   PROJECT_CONFIG_MAX_ENTRIES);
                        if (r < 0) return r;
                        if (r == 0) return parsed_warn(p, path, line, "allowHosts must be an array of non-empty strings");
                        size_t i = 0;
                        for (char **h = p->allow_hosts; h && *h; h++, i++) {
                                NetRule rule = {0};
                                const char *why = NULL;
                                int k = net_rule_parse(*h, &rule, &why);
                                net_rule_done(&rule);
                                if (k == -ENOMEM) return k;
                                /* the entry's index, not its text: a warning never echoes a value */
                                if (k < 0)
                                        return parsed_warn(p, path, line, "allowHosts entry %zu is no host rule: %s", i + 1,
                                                           strempty(why));
                        }
                } else {
                        size_t n = strlen(key);
                        return parsed_warn(p, path, line, "unknown key \"%.*s%s\" (known: " KNOWN_KEYS ")",
                                           (int) (n > KEY_SHOWN_MAX ? KEY_SHOWN_MAX : n), key,
                                           n > KEY_SHOWN_MAX ? "…" : "");
                }
        }
        /* read_only_paths first, then roBind, each path once */
        for (char **e = rb; e && *e; e++)
                if (!strv_contains(ro, *e) && strv_push(&ro, *e) < 0) return -ENOMEM;
        p->ro_bind = TAKE_PTR(ro);
        return 0;
}

/* Offset of the start of 1-based line `line` in text (len if past it). */
static size_t line_start(const char *text, size_t len, unsigned line) {
        size_t off = 0;
        for (unsigned l = 1; l < line && off < len; off++)
                if (text[off] == '\n') l++;
        return off;
}

static int parse_text(const char *text, size_t len, const char *path, parsed *p) {
        _cleanup_json_ json_object *table = NULL, *lines = NULL;
        unsigned line = 0;
        _cleanup_free_ char *reason = NULL;
        int r = toml_parse(text, len, &table, &lines, &line, &reason);
        if (r == -ENOMEM) return r;
        if (r >= 0) return parse_table(table, lines, path, p);
        /* a key error on an earlier line comes first: the lines before the
         * syntax error, when they parse alone, are checked as they stand */
        if (line > 1) {
                _cleanup_json_ json_object *t2 = NULL, *l2 = NULL;
                unsigned line2 = 0;
                _cleanup_free_ char *reason2 = NULL;
                r = toml_parse(text, line_start(text, len, line), &t2, &l2, &line2, &reason2);
                if (r == -ENOMEM) return r;
                if (r >= 0) {
                        r = parse_table(t2, l2, path, p);
                        if (r < 0 || p->warning) return r;
                        parsed_done(p);
                }
        }
        return parsed_warn(p, path, line, "%s", reason ? reason : "not valid TOML");
}

/* ---- reading, with the cache ---- */

typedef struct cache_entry {
        char *path;     /* the project file asked for */
        char *resolved; /* the file read (a symlink's target) */
        struct stat st; /* its identity when read */
        parsed value;
} cache_entry;

static cache_entry cache[CACHE_MAX];
static size_t cache_n;

static bool same_identity(const struct stat *a, const struct stat *b) {
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
               a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
               a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec &&
               a->st_mode == b->st_mode;
}

static cache_entry *cache_find(const char *path) {
        for (size_t i = 0; i < cache_n; i++)
                if (streq(cache[i].path, path)) return &cache[i];
        return NULL;
}

static void cache_entry_done(cache_entry *e) {
        free(e->path);
        free(e->resolved);
        parsed_done(&e->value);
        *e = (cache_entry) {};
}

static void cache_drop(const char *path) {
        cache_entry *e = cache_find(path);
        if (!e) return;
        cache_entry_done(e);
        size_t i = (size_t) (e - cache);
        memmove(&cache[i], &cache[i + 1], (cache_n - i - 1) * sizeof cache[0]);
        cache[--cache_n] = (cache_entry) {};
}

/* Remember value for path (a copy); a failure to remember is no error. */
static void cache_store(const char *path, const char *resolved, const struct stat *st, const parsed *value) {
        cache_drop(path);
        if (cache_n == CACHE_MAX) cache_drop(cache[0].path);
        cache_entry e = { .path = strdup(path), .resolved = strdup(resolved), .st = *st };
        if (!e.path || !e.resolved || parsed_copy(value, &e.value) < 0) {
                free(e.path);
                free(e.resolved);
                return;
        }
        cache[cache_n++] = e;
}

/* Is the file open as fd still inside root? (a component of the path
 * swapped for a symlink between the check and the open would lead
 * elsewhere) */
static bool fd_inside(int fd, const char *root) {
        char link[64], target[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n < 0) return true; /* no /proc: the realpath check stands */
        target[n] = 0;
        return path_is_at_or_below(target, root);
}

static const char *type_name(mode_t m) {
        if (S_ISDIR(m)) return "a directory";
        if (S_ISFIFO(m)) return "a FIFO";
        if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
        if (S_ISSOCK(m)) return "a socket";
        return "not a regular file";
}

/* Read path into *p (values or a warning). *ret_exists: is there an entry
 * at path. 0, -ENOMEM. */
static int load(const char *path, bool *ret_exists, parsed *p) {
        *ret_exists = false;
        *p = (parsed) { .timeout_s = PROJECT_CONFIG_DEFAULT_CHECK_TIMEOUT_S };
        struct stat lst;
        if (lstat(path, &lst) < 0) {
                if (errno == ENOENT || errno == ENOTDIR) {
                        cache_drop(path);
                        return 0;
                }
                return parsed_warn(p, path, 0, "cannot read it: %s", strerror(errno));
        }
        *ret_exists = true;
        _cleanup_free_ char *dir = path_parent(path);
        if (!dir) return -ENOMEM;
        _cleanup_free_ char *root = realpath(dir, NULL);
        if (!root) return parsed_warn(p, path, 0, "cannot read it: %s", strerror(errno));
        _cleanup_free_ char *resolved = NULL;
        if (S_ISLNK(lst.st_mode)) {
                resolved = realpath(path, NULL);
                if (!resolved)
                        return errno == ENOMEM ? -ENOMEM
                                               : parsed_warn(p, path, 0, "a symlink that leads nowhere (%s)", strerror(errno));
                if (!path_is_at_or_below(resolved, root))
                        return parsed_warn(p, path, 0, "a symlink that leads outside the repository");
        } else {
                const char *base = strrchr(path, '/');
                resolved = strdup_printf("%s%s%s", root, streq(root, "/") ? "" : "/", base ? base + 1 : path);
                if (!resolved) return -ENOMEM;
        }
        /* the type before any open: a FIFO or device is never opened */
        struct stat st;
        if (lstat(resolved, &st) < 0) return parsed_warn(p, path, 0, "cannot read it: %s", strerror(errno));
        if (!S_ISREG(st.st_mode)) return parsed_warn(p, path, 0, "%s, not a regular file", type_name(st.st_mode));
        if (st.st_size > PROJECT_CONFIG_MAX_BYTES)
                return parsed_warn(p, path, 0, "larger than %d bytes", PROJECT_CONFIG_MAX_BYTES);

        cache_entry *e = cache_find(path);
        if (e && streq(e->resolved, resolved) && same_identity(&e->st, &st)) return parsed_copy(&e->value, p);

        _cleanup_close_ int fd = open(resolved, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) return parsed_warn(p, path, 0, "cannot read it: %s", strerror(errno));
        if (fstat(fd, &st) < 0) return parsed_warn(p, path, 0, "cannot read it: %s", strerror(errno));
        if (!S_ISREG(st.st_mode)) return parsed_warn(p, path, 0, "%s, not a regular file", type_name(st.st_mode));
        if (!fd_inside(fd, root)) return parsed_warn(p, path, 0, "a symlink that leads outside the repository");
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0) (void) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = read_fd(fd, PROJECT_CONFIG_MAX_BYTES, &text, &len);
        if (r == -ENOMEM) return r;
        if (r == -EFBIG) return parsed_warn(p, path, 0, "larger than %d bytes", PROJECT_CONFIG_MAX_BYTES);
        if (r < 0) return parsed_warn(p, path, 0, "cannot read it: %s", strerror(-r));
        r = parse_text(text, len, path, p);
        if (r < 0) return r;
        cache_store(path, resolved, &st, p);
        return 0;
}

/* The config of path (taken) from what was read of it (taken), or the
 * error r (then both are freed). */
static int config_of(char *path, bool exists, parsed *p, int r, ProjectConfig *ret) {
        if (r < 0) {
                free(path);
                parsed_done(p);
                return r;
        }
        *ret = (ProjectConfig) {
                .path = path,
                .exists = exists,
                .check = p->check,
                .check_timeout_s = p->timeout_s,
                .ro_bind = p->ro_bind,
                .review_paths = p->review_paths,
                .allow_hosts = p->allow_hosts,
                .warning = p->warning,
        };
        return 0;
}

int project_config_load(const char *dir, ProjectConfig *ret) {
        *ret = (ProjectConfig) {};
        char *path = project_config_path(dir);
        if (!path) return -ENOMEM;
        bool exists = false;
        parsed p = {};
        int r = load(path, &exists, &p);
        return config_of(path, exists, &p, r, ret);
}

int project_config_parse(const char *path, const char *text, size_t len, ProjectConfig *ret) {
        *ret = (ProjectConfig) {};
        char *copy = strdup(path);
        if (!copy) return -ENOMEM;
        parsed p = {};
        int r = parse_text(text, len, path, &p);
        return config_of(copy, true, &p, r, ret);
}

/* ---- the bind policy ---- */

enum {
        SKIP_MISSING,
        SKIP_UNTRUSTED,
        SKIP_PROTECTED,
        _SKIP_MAX,
};

static const char *const skip_reason[_SKIP_MAX] = {
        [SKIP_MISSING] = "not found on this host",
        [SKIP_UNTRUSTED] = "outside the repository, and the repository is not trusted",
        [SKIP_PROTECTED] = "overlaps a protected sandbox mount",
};

typedef char **skip_lists[_SKIP_MAX];

static void skip_lists_free(skip_lists *l) {
        for (int k = 0; k < _SKIP_MAX; k++) strv_free((*l)[k]);
}

/* Which reason skips the resolved path, or -1: mount it. */
static int judge(const char *resolved, const char *root, const char *home, char *const *trusted, char *const *protected_) {
        if (streq(resolved, "/")) return SKIP_PROTECTED;
        if (home && path_is_at_or_below(home, resolved)) return SKIP_PROTECTED;
        if (path_is_at_or_below(root, resolved)) return SKIP_PROTECTED;
        for (char *const *p = protected_; p && *p; p++)
                if (paths_overlap(resolved, *p)) return SKIP_PROTECTED;
        if (path_is_at_or_below(resolved, root)) return -1;
        for (char *const *t = trusted; t && *t; t++)
                if (path_is_at_or_below(root, *t)) return -1;
        return SKIP_UNTRUSTED;
}

int project_binds_resolve(char *const *entries, const char *repo_root, const char *home, char *const *trusted,
                          char *const *protected_, char ***ret_binds, char **ret_warning) {
        *ret_binds = NULL;
        *ret_warning = NULL;
        _cleanup_strv_free_ char **binds = NULL;
        _cleanup_(skip_lists_free) skip_lists skipped = {};
        _cleanup_free_ char *root = realpath(repo_root, NULL);
        if (!root && !(root = strdup(repo_root))) return -ENOMEM;
        _cleanup_free_ char *home_real = isempty(home) ? NULL : realpath(home, NULL);
        if (!home_real && !isempty(home) && !(home_real = strdup(home))) return -ENOMEM;

        for (char *const *e = entries; e && *e; e++) {
                if (isempty(*e)) continue;
                _cleanup_free_ char *abs = (*e)[0] == '/' ? strdup(*e) : strdup_printf("%s/%s", repo_root, *e);
                if (!abs) return -ENOMEM;
                _cleanup_free_ char *resolved = realpath(abs, NULL);
                int why;
                if (!resolved) {
                        if (errno == ENOMEM) return -ENOMEM;
                        why = SKIP_MISSING;
                } else {
                        why = judge(resolved, root, home_real, trusted, protected_);
                        /* the caller's own spelling of home counts too */
                        if (why < 0 && home && !isempty(home) && path_is_at_or_below(home, resolved)) why = SKIP_PROTECTED;
                }
                if (why < 0) {
                        if (!strv_contains(binds, resolved) && strv_push(&binds, resolved) < 0) return -ENOMEM;
                } else if (!strv_contains(skipped[why], *e) && strv_push(&skipped[why], *e) < 0)
                        return -ENOMEM;
        }

        _cleanup_free_ char *w = NULL;
        for (int k = 0; k < _SKIP_MAX; k++) {
                if (!skipped[k]) continue;
                _cleanup_free_ char *list = NULL;
                size_t shown = 0, total = strv_length(skipped[k]);
                for (char **s = skipped[k]; *s && shown < SKIPPED_SHOWN_MAX; s++, shown++) {
                        char *n = strdup_printf("%s%s%s", strempty(list), list ? ", " : "", *s);
                        if (!n) return -ENOMEM;
                        free(list);
                        list = n;
                }
                if (total > shown) {
                        char *n = strdup_printf("%s and %zu more", list, total - shown);
                        if (!n) return -ENOMEM;
                        free(list);
                        list = n;
                }
                char *n = strdup_printf("%s%s%s, skipped: %s", w ? w : ".taskferry.toml roBind: ", w ? "; " : "",
                                        skip_reason[k], list);
                if (!n) return -ENOMEM;
                free(w);
                w = n;
        }
        *ret_binds = TAKE_PTR(binds);
        *ret_warning = TAKE_PTR(w);
        return 0;
}
