#pragma once
/* A view of D, indexed by a child in a user + mount namespace: the host view
 * (D as it is) or the merged view (the task's overlay mounted on D). The
 * child builds an index of what it sees in the private repository (git_ctx)
 * with every nested repository flattened into its files, notes what git
 * refused to record, and reports back over a pipe; the parent reads the
 * reply with view_child_run. -errno on failure, with *reason set where a
 * function takes it. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "changeset-git.h"
#include "changeset-paths.h"

/* Directories deeper than this are not walked (one open directory per level). */
#define DOTGIT_DEPTH_MAX 256

/* Paths that `git add --ignore-errors` left out of one view, with their
 * stat data in that view (to tell a path the worker touched from one it
 * left alone) and git's reason. */
typedef struct refused_path {
        char *path;
        bool exists;
        struct stat st;
} refused_path;

/* What git refused in one view. */
typedef struct refused_list {
        refused_path *e;
        size_t n, allocated;
        char *add_err; /* the stderr of that `git add`, for the reasons */
} refused_list;

/* Free what l holds and zero it. */
void refused_list_done(refused_list *l);

/* The state of one view child (whole-tree extraction, snapshot, touched-path
 * extraction): what it reads and the warnings it sends back. */
typedef struct view_child {
        const changeset_extract_args *a; /* directory (D, resolved), upper, work */
        git_ctx *g;
        const char *base_treeish;  /* "<pre_head>" or "<pre_head>:<prefix>", or NULL */
        const char *empty_dir;     /* bind source hiding a nested .git directory */
        const char *empty_file;    /* bind source hiding a nested .git file or symlink */
        char **hidden;             /* nested .git paths hidden in the current view */
        refused_list *refused;     /* where add_all_flattened records what git refused (NULL: nowhere) */
        int host_fd;               /* O_PATH fd of D in the host view, opened before the overlay */
        warnings w;                /* what the child reports besides the trees */
        uint64_t file_max;         /* snapshot: untracked files larger than this stay out of the base (0: no bound) */
} view_child;

/* The bind sources that hide a nested .git (a directory or a file) in a
 * view: <scratch>/empty-dir (mode 0500) and <scratch>/empty-file, made
 * here. 0, or -errno (*reason set). */
int hiders_create(const char *scratch, char **ret_dir, char **ret_file, char **reason);

/* Hide <D>/<rel>.git (rel ends in '/', or is "" for the top) under an empty
 * bind mount. Resolution stays beneath D and follows no symlink (the entry
 * itself may be a symlink: the mount covers the link). Returns 1 if hidden,
 * 0 if there is nothing to hide, -errno on failure. */
int hide_nested_git(view_child *c, const char *rel, char **reason);

/* Warn about a refused path of l, git's reason after prefix (the reason is
 * looked up only while warnings are still kept: the search is linear in
 * git's stderr). 0 or -ENOMEM. */
int refused_warn_one(warnings *w, const refused_list *l, const char *path, const char *prefix);

/* Warnings (into c->w) for what git refused in the merged view, leaving out
 * the paths that were refused in the host view as well and that the worker
 * left alone (same type, size, mtime and ctime: a copy-up or any write
 * changes ctime), and for the refused paths the worker deleted. 0 or
 * -errno. */
int refused_warn(view_child *c, const refused_list *host, const refused_list *merged);

/* The gitlinks `git add` made (links: the nested repositories it found)
 * flattened: each nested .git hidden in this view and the links dropped
 * from the index, so that the next add records the files themselves. A
 * link seen in an earlier round (tried, which this extends) could not be
 * flattened: -ENOTSUP. 0, or -errno (*reason set). */
int flatten_gitlinks(view_child *c, char **links, char ***tried, char **reason);

/* `git add -A` of the current view into c->g's index, with every nested
 * repository flattened into plain files (view is named in errors: "host
 * view"). With c->file_max, files larger than that stay out (tracked ones
 * keep their index entry). What git refused goes to c->refused. 0, or
 * -errno (*reason set). */
int add_all_flattened(view_child *c, const char *view, char **reason);

/* The host view (no overlay yet) as a tree: the index read from
 * c->base_treeish when it resolves (keeping tracked files that .gitignore
 * would hide; an empty index otherwise), then `add -A` with nested
 * repositories flattened; every path ignored in this view is then pinned
 * into T/info/exclude, so a worker that deletes .gitignore cannot make
 * pre-existing ignored files (node_modules, .env) appear as added. 0 with
 * the tree id in *ret_tree, -errno (*reason set). */
int view_host_tree(view_child *c, char **ret_tree, char **reason);

/* Mount the task's overlay on D (lower D, a->upper and a->work) in this
 * mount namespace. The mount can fail with EBUSY for a moment while the
 * task's own overlay is still being torn down: it is retried after 100, 300
 * and 900 ms. A final EBUSY's message always says "Device or resource busy"
 * (libmount words it its own way), so that the failure reads as the busy
 * race it is. 0, or -errno with *reason set. */
int view_mount_overlay(const changeset_extract_args *a, char **reason);

/* Warnings (into c->w) for the .git files and directories the worker
 * created (the overlay's upper dir holds everything it wrote), unless they
 * lie in what the merged view ignores: git never records one. Run in the
 * merged view. 0, or -errno (*reason set). */
int dotgit_warn(view_child *c, char **reason);

/* Fork fn(userdata, out_fd) in a child that dies with us (and run_command's
 * git with it), and read what it writes: "O<text>" or "E<error>". name is
 * the child's for safe_fork; what names it in our errors ("the git
 * process"). 0 with the reply (NUL-terminated, its length in *ret_len when
 * ret_len is not NULL) in *ret_reply, -EIO with *reason set when the child
 * failed or said "E", -errno. */
typedef void (*view_child_fn)(void *userdata, int out_fd);
int view_child_run(const char *name, const char *what, view_child_fn fn, void *userdata, char **ret_reply, size_t *ret_len,
                   char **reason);

/* A view child's last words on out_fd, read by view_child_run and
 * warnings_add_reply: "O<trees> <warnings counted>\n" then w's kept
 * warnings, each NUL-terminated (they are quoted: no NUL, no newline); or
 * "E<err>" when r < 0. Exits 0, or 1 after an error. */
_Noreturn void view_child_reply(int out_fd, int r, const char *trees, const warnings *w, const char *err);

/* Copy the regular file from to to (created 0600, no symlink followed),
 * keeping its modification time: git's racy-entry test compares an index's
 * entries with the index file's own mtime. 0 or -errno. */
int index_copy_keep_mtime(const char *from, const char *to);
