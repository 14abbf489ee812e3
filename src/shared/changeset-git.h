#pragma once
/* The private repository T of a changeset job and how git runs against it.
 *
 * Every git command runs against a PRIVATE repository T = <scratch>/git that
 * we create ourselves (HEAD, objects/, refs/, a fixed config,
 * info/attributes, info/exclude), with GIT_DIR=T, GIT_WORK_TREE=D,
 * GIT_INDEX_FILE=<scratch>/index, GIT_CONFIG_NOSYSTEM=1,
 * GIT_CONFIG_GLOBAL=/dev/null and a minimal environment. Git therefore never
 * reads D/.git (which, in the merged view, the worker controls: config with
 * core.fsmonitor, filter drivers, diff.external, textconv, hooks) and no
 * user/system config can name a program either. The only worker-controlled
 * inputs git reads are the work tree's files, its .gitignore files and its
 * .gitattributes; T/info/attributes has the highest attribute precedence and
 * resets every content-converting attribute (text, eol, ident, filter,
 * working-tree-encoding) so blobs are the exact bytes of the files, and
 * resets diff/merge to "unspecified" so no driver is looked up. Objects the
 * real repository (or a base snapshot) already holds are reached as
 * alternates, never copied.
 *
 * Everything here blocks on git. Errors are -errno. A function of the
 * changeset modules that takes char **reason puts a one-line sentence for the
 * user there ("git <what> exited with status N: <stderr>"; the caller frees
 * it) only with a negative return, or with the refusal its comment names (a
 * patch that does not apply: 0); never with success. Where a bare -errno has
 * nothing to add (-ENOMEM, a failed open of a path the user never named) it
 * is left NULL, and the entry points of changeset.h, which always set theirs
 * on a negative return, say strerror(-r). */

#include <stdbool.h>
#include <stddef.h>

#include "git-cat.h"
#include "process-util.h"

/* The largest patch an extraction or a merge produces (the bound the
 * original's extraction had): 200 MiB. */
#define PATCH_MAX ((size_t) 200 << 20)
/* The largest listing read from git (ls-files, diff-tree --raw, ...). */
#define LIST_MAX ((size_t) 256 << 20)
/* The largest one-line answer read from git (an object id, a path). */
#define SMALL_MAX ((size_t) 1 << 20)
/* The name of T in its scratch dir (a base snapshot keeps it: BASE_GIT_NAME). */
#define SCRATCH_GIT_NAME "git"

/* "<a>/<b>", NULL: out of memory. */
char *cs_path_join(const char *a, const char *b);
/* Cut the white space off the end of s (may be NULL). */
void cs_strip_trailing_space(char *s);
/* A copy of s (NULL: "") without its trailing white space; NULL: out of memory. */
char *cs_trimmed(const char *s);
/* Is s an object id as git prints it (40 or 64 lower-case hex digits)? */
bool cs_is_oid(const char *s);
/* Write len bytes of data to path (created 0600 or truncated, no symlink
 * followed): 0 or -errno. */
int cs_write_small_file(const char *path, const char *data, size_t len);
/* Append len bytes of data to path (created 0600, no symlink followed): 0 or -errno. */
int cs_append_file(const char *path, const char *data, size_t len);
/* Write a NUL-separated pathspec file. */
int cs_write_specs(const char *path, char **a, char **b);
/* qsort/bsearch comparator of two char * (strcmp). */
int cs_strp_cmp(const void *a, const void *b);

/* How git is run for one job: T, the work tree, the index, the alternates. */
typedef struct git_ctx {
        char *git_dir;      /* T */
        char *work_tree;    /* D (NULL: none) */
        char *index_file;   /* private index (NULL: none) */
        char *alternates;   /* real object store (NULL: none) */
        char *base_objects; /* the task's base snapshot object store, also an alternate (NULL: none) */
        char *home;         /* a nonexistent HOME, so no user file is read by default */
        char **env;         /* built from the above */
} git_ctx;

/* Free what g holds and zero it. */
void git_ctx_done(git_ctx *g);

/* Push "PATH=<ours>" (the usual directories when we have none) onto *env:
 * 0 or -ENOMEM. */
int git_env_push_path(char ***env);

/* (Re)build g->env, the environment of every git run against g: nothing of
 * ours but PATH, no system or global config, no user file (HOME is g->home),
 * git's prompts, pager and replace refs off, and g's directories (the
 * alternates C-quoted as GIT_ALTERNATE_OBJECT_DIRECTORIES wants them); with
 * no git_dir it is the environment of a git outside any repository. Call it
 * again after changing a field. 0 or -ENOMEM. */
int git_ctx_build_env(git_ctx *g);

/* g0's repository, objects and HOME with an index of its own (index_file)
 * and, with_work_tree, g0's work tree (else none), its environment built:
 * a second index over the same private repository. 0 or -errno. */
int git_ctx_copy(const git_ctx *g0, const char *index_file, bool with_work_tree, git_ctx *g);

/* "<the directory of g's index>/name": a file beside g's other scratch state. */
char *git_ctx_scratch_path(const git_ctx *g, const char *name);

/* Where a scratch repository's work tree, alternates and exclude rules come from. */
typedef struct scratch_repo {
        const char *work_tree; /* GIT_WORK_TREE (NULL: none) */
        const char *objects;   /* the real repository's object store: an alternate when it is a directory (NULL: none) */
        const char *base_objects; /* a base snapshot's object store, an alternate too (NULL: none) */
        const char *excludes;  /* the text of info/exclude (NULL: empty) */
        size_t excludes_len;
} scratch_repo;

/* The private repository T of one job, in scratch (a private directory the
 * caller made and removes): T = <scratch>/SCRATCH_GIT_NAME, created here
 * with o's exclude rules, the index <scratch>/index and HOME <scratch>/home
 * (never created, so git reads no user file), and g's environment built.
 * Every job that runs git (extraction, snapshot, apply, merge) starts here.
 * 0, or -errno (*reason set when a file could not be made). */
int git_ctx_scratch(git_ctx *g, const char *scratch, const scratch_repo *o, char **reason);

/* Run `git -c core.fsmonitor=false -c core.hooksPath=/dev/null <args...>`
 * with g's environment in cwd (NULL: "/"), stdout captured in rr up to
 * max_out bytes (run_command(), util.h): 0 when git ran (rr->exit_code says
 * how it ended; free rr with run_result_done), -errno when it could not. */
int run_git_argv(const git_ctx *g, const char *cwd, size_t max_out, run_result *rr, char *const *args);

/* "git <what> exited with status N: <stderr>" for a git that ran (r >= 0),
 * or the reason it could not run (r < 0): a new string, NULL when out of
 * memory. */
char *git_failure(const char *what, int r, const run_result *rr);

/* run_git_argv, and exit 0 required: 0 with the output in rr (free it with
 * run_result_done), -EIO for another exit or -errno, *reason set then (rr
 * already freed). */
int git_ok(const git_ctx *g, const char *cwd, size_t max_out, run_result *rr, char **reason, const char *what,
           char *const *args);

/* Run `git <prefix...> [--] <args...>` in as many runs as it takes to keep
 * each command line below ARGS_BATCH_BYTES of args, never splitting a group
 * of `group` consecutive args; group 1 means the args are paths and follow
 * "--". Exit 0 and, if ok_exit_1, exit 1 are success. cb (may be NULL) sees
 * each run's output; a negative return stops. */
typedef int (*batch_cb)(void *userdata, const run_result *rr);
int git_batched(const git_ctx *g, const char *cwd, size_t max_out, const char *what, char *const *prefix,
                char *const *args, bool ok_exit_1, size_t group, batch_cb cb, void *userdata, char **reason);

/* A batch_cb: the lines of git's output, pushed onto the strv userdata
 * points to. For the listings that cannot be NUL-terminated: `check-ignore`
 * without --stdin prints one line per ignored path, raw with core.quotePath
 * off unless the path holds a control character, '"' or '\\' (then it is
 * quoted and matches no path of ours: such a path counts as not ignored,
 * which only costs a warning). */
int git_collect_lines(void *userdata, const run_result *rr);

/* A batch_cb: the NUL-separated paths of git's output, pushed onto the
 * strv userdata points to. */
int git_collect_nul_paths(void *userdata, const run_result *rr);

/* Run git and read the one object id it prints (commit-tree, hash-object,
 * write-tree): 0 with it in *ret, -errno (*reason set). */
int git_line(const git_ctx *g, const char *cwd, char **reason, const char *what, char *const *args, char **ret);

/* `git read-tree <tree>` into g's index, run in cwd: 0, -errno (*reason set, naming it what). */
int git_read_tree(const git_ctx *g, const char *cwd, const char *tree, const char *what, char **reason);

/* `git write-tree [--missing-ok]` of g's index, run in cwd: 0 with the tree id in *ret_oid, -errno (*reason set). */
int git_write_tree(const git_ctx *g, const char *cwd, bool missing_ok, char **ret_oid, char **reason);

/* `git diff-tree -p --binary --full-index -M` of before..after (tree ids),
 * with a/ and b/ prefixes and no colour, external diff or textconv: the
 * patch in rr->out (at most PATCH_MAX bytes). 0, or -errno (*reason set). */
int git_diff_trees(const git_ctx *g, const char *before, const char *after, run_result *rr, char **reason);

/* Run git (as run_git_argv, stdout not kept) where another exit than 0 is
 * an answer, not a failure: 1 exit 0, 0 another exit, with git's stderr
 * (trimmed, whatever the exit) in *ret_err either way; -errno when git could
 * not run. */
int git_try(const git_ctx *g, const char *cwd, char *const *args, char **ret_err);

/* `git apply --check [--cached] <patch>` with g in cwd (--cached: against
 * g's index, else against its work tree): 1 the patch applies, 0 it does
 * not (*reason = git's reason), -errno (*reason set). */
int git_apply_check(const git_ctx *g, const char *cwd, bool cached, const char *patch, char **reason);

/* `git add <args>` with --ignore-errors among them: a path git refuses
 * (verify_path(): .git in any spelling its NTFS/HFS protections know, an
 * unreadable file) is skipped, not fatal: exit status 1. 0 with
 * *ret_add_err = git's stderr when it refused any (NULL when it refused
 * none), -errno (*reason set, naming the command what). */
int git_add_tolerant(const git_ctx *g, const char *cwd, char *const *args, const char *what, char **ret_add_err,
                     char **reason);

/* A blob into memory (at most PATCH_MAX bytes) through *cat, one batch
 * process for many (git-cat.h), opened on first use with g's environment
 * (the caller closes it). 0 with the bytes in *ret and *ret_len, -EIO for a
 * missing or malformed object, -errno. */
int git_blob_read(const git_ctx *g, git_cat **cat, const char *oid, char **ret, size_t *ret_len);

/* Can this git take and use a base snapshot? That needs git >= 2.38
 * (merge-tree --write-tree; --pathspec-from-file of add and rm is 2.26);
 * with an older git changesets take the whole-tree comparison and the plain
 * apply. Asked once per process. */
bool git_has_merge_tree(void);
