#pragma once
/* Reading many blobs through one `git cat-file --batch` (git-cat-file(1),
 * "BATCH OUTPUT"): one process for a whole write-out instead of one
 * `git cat-file blob <oid>` per file. A changeset of 10,000 files spawned
 * 10,000 gits in the accept (about 6 ms each, much more from a process
 * under AddressSanitizer, whose fork copies a huge page table); a batch
 * reads each blob in about what it costs to copy it.
 *
 * The blob's bytes are exactly those `git cat-file blob <oid>` prints (no
 * filter, textconv or conversion: --batch applies none). The process runs
 * `git -c core.fsmonitor=false -c core.hooksPath=/dev/null cat-file --batch`
 * with envp (the caller's private GIT_DIR, alternates and so on), stdin and
 * stdout connected to us, stderr kept in memory for error messages; it gets
 * SIGKILL should the caller die (PR_SET_PDEATHSIG). Blocking: for the shim,
 * helpers and forked jobs, never the daemon's event loop. Not thread-safe;
 * one request at a time. */

#include <stddef.h>
#include <stdint.h>

typedef struct git_cat git_cat;

/* Start the batch process. 0, or -errno with *reason (may be NULL: not
 * wanted) saying why: a sentence, set exactly when the return is negative
 * but for -ENOMEM; the caller frees it. */
int git_cat_open(char *const envp[], git_cat **ret, char **reason);

/* Copy blob oid (hex, 40 or 64 digits) to fd. 0; -ENOENT the object is
 * missing, -EINVAL it is not a blob or oid is not an object id (the reader
 * stays usable after both); -EFBIG it is larger than max bytes (0: no bound;
 * nothing written, the reader stays usable); -EIO git failed or died
 * (then only: *reason, when reason is not NULL, is git's stderr; the caller
 * frees it; the reader is unusable then);
 * another -errno from writing to fd (the reader is unusable then: the
 * rest of the blob was not read). */
int git_cat_blob_to_fd(git_cat *c, const char *oid, int fd, uint64_t max, char **reason);

/* The same into memory: *ret (NUL-terminated, free()d by the caller) and
 * *ret_len. max as above (0: no bound). */
int git_cat_blob(git_cat *c, const char *oid, uint64_t max, char **ret, size_t *ret_len, char **reason);

/* Stop the process (close its stdin, wait for it) and free c. NULL is a no-op. */
void git_cat_close(git_cat *c);
static inline void git_cat_closep(git_cat **c) { git_cat_close(*c); }
