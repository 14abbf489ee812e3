#pragma once
/* A task's output dir, read for task.output. Blocking file-system work:
 * called in a forked job (views.c), never on the daemon's loop.
 *
 * The dir is writable by the task's worker, which is hostile: everything
 * below goes through fds. The root is opened O_NOFOLLOW|O_DIRECTORY; a file
 * is opened with openat2(RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS|RESOLVE_NO_XDEV)
 * relative to that fd, O_NONBLOCK, so the kernel refuses (atomically, no
 * window between a check and the read) every path that leaves the dir: an
 * absolute symlink, `..` above the root, a symlinked parent that points out.
 * A symlink that stays inside resolves (a listing shows such a link to a
 * regular file, with the target's size). What was opened is then fstat'ed
 * and read through that same fd: a file swapped in after the open is never
 * read. A FIFO opens without blocking (O_NONBLOCK)
 * and is reported not_a_file, like a socket or a device. */

#include <stdint.h>
#include <json-c/json.h>

#define OUTPUT_FILE_MAX_DEFAULT 524288u   /* TASKFERRY_MAX_OUTPUT_FILE_BYTES default, 512 KiB */
#define OUTPUT_FILE_MAX_LIMIT 1048576u    /* a larger setting or maxOutputFileBytes is refused */
#define OUTPUT_FILE_MAX_SAFE 174080u      /* floor((1 MiB - 4096) / 6): always fits once JSON-encoded */
#define OUTPUT_LIST_FILES_MAX 256
#define OUTPUT_LIST_DIRS_MAX 256
#define OUTPUT_LIST_DEPTH_MAX 32
#define OUTPUT_LIST_BYTES_MAX (8u * 1024 * 1024)
/* Directory entries looked at in one listing (taskferry's addition: entries
 * that are skipped — dangling links, FIFOs, node_modules — count to none of
 * the caps above, so a worker could otherwise make a listing read
 * millions). */
#define OUTPUT_LIST_ENTRIES_MAX 65536

/* Listing of dir: {files:[{path,size}] sorted by path (byte order), bytes,
 * total, truncated}. dir NULL, missing or not a real directory → the empty
 * listing. Skips node_modules and .git, never enters a symlinked dir, lists a
 * symlink only if it resolves beneath the root to a regular file (with the
 * target's size); FIFOs, sockets, devices and dangling links are skipped.
 * Caps above (the 8 MiB check includes the candidate file); a cap hit sets
 * truncated. 0 with *ret set; -ENOMEM; -errno of opening the root other
 * than ENOENT/ENOTDIR/ELOOP. */
int output_list(const char *dir, json_object **ret);

typedef enum OutputReadError {
        OUTPUT_READ_OK,
        OUTPUT_READ_ESCAPES,   /* rel leaves the dir (absolute, `..` above it, a link out) */
        OUTPUT_READ_NOT_FOUND, /* rel (or the dir) does not exist */
} OutputReadError;

/* Read dir/rel, at most max bytes. OUTPUT_READ_OK: *ret_file =
 * {content, size, truncated} or {content:null, size, truncated:true,
 * error:"too_large"} / {content:null, size, truncated:false,
 * error:"not_a_file"}; content is the bytes as UTF-8 (invalid sequences →
 * U+FFFD). The other two leave *ret_file NULL. rel is checked as
 * path.resolve(dir, rel) would be (textual `.`/`..` folding first: `a/../b`
 * is b; anything above the root, or absolute, escapes). Returns the
 * OutputReadError (≥ 0) or -ENOMEM / -errno of an unexpected failure. */
int output_read(const char *dir, const char *rel, uint64_t max, json_object **ret_file);
