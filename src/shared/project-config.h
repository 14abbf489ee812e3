#pragma once
/* The project file, `.taskferry.toml` at the top of a repository's work
 * tree (docs/taskferry-project.5.md): its check gate command and timeout,
 * the read-only binds the repository asks of the worker sandbox, and the
 * extra paths a reviewer must confirm; and the policy of which of those
 * binds the sandbox mounts. The repository is untrusted (a cloned repository
 * must not widen its own sandbox): a malformed file is ignored whole, with a
 * warning that names the file, the line and the key and never a value.
 * Read with toml_parse (toml.h). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest project file read (bytes); a bigger one is ignored. */
#define PROJECT_CONFIG_MAX_BYTES (1024 * 1024)
#define PROJECT_CONFIG_DEFAULT_CHECK_TIMEOUT_S UINT64_C(900)
#define PROJECT_CONFIG_MAX_CHECK_TIMEOUT_S UINT64_C(604800)
/* the most entries one array key (roBind, read_only_paths, review_paths,
 * allowHosts) may
 * hold; a longer one is an error like any other (the file is ignored) */
#define PROJECT_CONFIG_MAX_ENTRIES 1024

/* where the project file of a dispatch lives: the top of the git work tree
 * holding dir (a subdirectory dispatch reads the repository root's file),
 * else dir itself. malloc'd "<that>/.taskferry.toml", NULL on ENOMEM. */
char *project_config_path(const char *dir);

typedef struct ProjectConfig {
        char *path;              /* the file read (malloc'd), always set on return 0 */
        bool exists;             /* the file exists */
        char *check;             /* the check command, NULL when none (absent or "") */
        uint64_t check_timeout_s;/* check_timeout_seconds, 1..86400*7, default 900 */
        char **ro_bind;          /* strv: read_only_paths entries first, then roBind, deduplicated, as written; NULL: none */
        char **review_paths;     /* strv: review_paths patterns (see below); NULL: none */
        char **allow_hosts;      /* strv: allowHosts rules as written (net-policy.h); NULL: none */
        char *warning;           /* NULL, or the projectConfigWarning text (see below) */
} ProjectConfig;

/* Read dir's project file fresh: a stat identity cache (st_dev, st_ino,
 * st_size, st_mtim, st_ctim) per path, so an unchanged file is not parsed
 * again and any change is seen. A missing file (ENOENT/ENOTDIR) is the empty
 * config with exists=false. Bad TOML, an unknown key, a wrong type, a value
 * out of range, a file over 1 MiB, a file that is not a regular file (a
 * symlink is followed only if it stays inside the repository; a FIFO or
 * device is refused without opening it for read-blocking: open
 * O_NONBLOCK|O_NOFOLLOW... then fstat) → the EMPTY config (check NULL,
 * timeout 900, no binds, no review paths) with warning set. Returns 0, or
 * -ENOMEM (any other I/O error is a warning, not an error).
 *
 * Keys (anything else, tables included, is an error):
 *   check                  string; "" = none
 *   check_timeout_seconds  integer, 1..604800
 *   roBind                 array of strings (paths; see project_binds_resolve)
 *   read_only_paths        deprecated array of strings, unioned with roBind
 *                          (its entries first)
 *   review_paths           array of strings: fnmatch(3) patterns relative to
 *                          the repository root (not starting with "/"), a
 *                          trailing "/" meaning that directory and all below
 *                          it; extra paths whose changes a reviewer must
 *                          confirm before accept, added to the built-in list
 *                          (they can never remove one of it)
 *   allowHosts             array of strings: hosts the repository asks its
 *                          tasks' egress proxy to allow (net_rule_parse
 *                          rules; one that does not parse is an error); they
 *                          apply only for a repository the user trusts
 *                          (trustedProjects, as for roBind outside it)
 * The warning: "<path>:<line>: <what is wrong>; the project file is ignored"
 * (or "<path>: ..." when no line is at fault), the first error in line order
 * only, e.g. `/r/.taskferry.toml:5: unknown key "chek" (known: check,
 * check_timeout_seconds, roBind, read_only_paths, review_paths, allowHosts); the project
 * file is ignored`. The cache is per process, bounded, and not thread-safe
 * (the daemon's event loop and the CLI are single-threaded). */
int project_config_load(const char *dir, ProjectConfig *ret);
void project_config_done(ProjectConfig *c);
/* The same rules over a file's text already in memory (len bytes; path names
 * it in the warning), without the cache: *ret as project_config_load fills
 * it for an existing file (exists true, path a copy of path); the size
 * limit (PROJECT_CONFIG_MAX_BYTES) is the caller's. 0, -ENOMEM. */
int project_config_parse(const char *path, const char *text, size_t len, ProjectConfig *ret);

/* Which of the project's ro binds the sandbox mounts. Each entry: a relative
 * one ("~" included: it is not expanded) is taken against repo_root, then
 * realpath'd (missing → skipped, "not found on this host"). Inside repo_root
 * (below it) → mounted. Outside it → mounted only when repo_root is at or
 * below one of trusted[] (the user's config.json trustedProjects list,
 * realpath'd by the caller), else skipped ("outside the repository, and the
 * repository is not trusted"). Always refused, trusted or not ("overlaps a
 * protected sandbox mount"): "/", an entry that is home or an ancestor of
 * home, repo_root itself or an ancestor of it (it would show the target's
 * real files over the overlay), an entry that equals, contains or lies
 * inside any of protected_[] (taskferry's own dirs and the deny-list:
 * ~/.ssh and the like). entries, trusted and protected_ may be NULL (none);
 * home NULL or "": no home check. *ret_binds: the absolute resolved paths to
 * ro-bind, deduplicated, in entry order (NULL: none); *ret_warning: NULL, or
 * one line ".taskferry.toml roBind: <reason>, skipped: a, b; <reason>,
 * skipped: c" grouping entries (as written) by reason, the reasons in the
 * order above, each naming its first 16 entries and then "and N more"
 * (paths are names, not secrets: they may be shown). 0,
 * -ENOMEM. */
int project_binds_resolve(char *const *entries, const char *repo_root, const char *home, char *const *trusted,
                          char *const *protected_, char ***ret_binds, char **ret_warning);
