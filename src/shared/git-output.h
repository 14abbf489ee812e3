#pragma once
/* The readers of git's plumbing output: each takes the bytes a git command
 * wrote to stdout, as run_command captured them (NUL-terminated at their
 * length: a reader may rely on that byte, never on one past it), and reads
 * one record at a time, strictly: a record that is not what that command
 * writes is -EBADMSG, never a guess. Pure: no I/O. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest object id as hex (SHA-256), without its NUL. */
#define GIT_OID_HEX_MAX 64

/* One record of `git diff-tree -r -z --no-renames <a> <b>` (raw format,
 * git-diff-tree(1) "RAW OUTPUT FORMAT"):
 * ":<old mode> <new mode> <old oid> <new oid> <status>\0<path>\0". */
typedef struct GitRawRecord {
        unsigned old_mode, new_mode;            /* six octal digits each; 0: no such entry on that side */
        char old_oid[GIT_OID_HEX_MAX + 1];      /* 40 or 64 lower-case hex digits */
        char new_oid[GIT_OID_HEX_MAX + 1];
        char status;                            /* 'A', 'D', 'M', 'T', 'U', 'X' (a score after it is skipped) */
        const char *path;                       /* into the buffer: non-empty, NUL-terminated there */
} GitRawRecord;

/* The record at *p (end: one past the output's last byte). 1 with *ret and
 * *p moved past the record; 0 when *p == end (no more); -EBADMSG when what
 * is at *p is not such a record (*p unchanged). */
int git_raw_next(const char **p, const char *end, GitRawRecord *ret);

/* One entry of `git apply --numstat -z`: "<adds>\t<dels>\t<path>\0", or
 * "<adds>\t<dels>\t\0<old path>\0<new path>\0" for a rename or copy. adds
 * and dels are decimal counts, or "-" for a binary file. */
typedef struct GitNumstat {
        bool binary;             /* "-" "-" */
        unsigned adds, dels;     /* saturated at UINT_MAX; 0 for a binary file */
        const char *old_path;    /* into the buffer; NULL unless a rename or copy */
        const char *path;        /* into the buffer: the (new) path, non-empty */
} GitNumstat;

/* The entry at *p, as git_raw_next. */
int git_numstat_next(const char **p, const char *end, GitNumstat *ret);

/* The header line `git cat-file --batch` answers a request for oid with
 * (git-cat-file(1) "BATCH OUTPUT"), without its '\n': "<oid> <type>
 * <size>" (1 with *ret_type, at most 31 bytes, and *ret_size), or "<oid>
 * missing" / "<oid> ambiguous" (0). -EBADMSG for anything else, another
 * oid included. */
int git_cat_header_parse(const char *line, const char *oid, char ret_type[static 32], uint64_t *ret_size);
