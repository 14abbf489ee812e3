#pragma once
/* A changeset's paths: how they are shown (quoted as git quotes them), how
 * they are opened (beneath a directory, never through a symlink), and the
 * warnings for the paths a changeset leaves out ("<path>: left out of the
 * changeset: <why>", at most CHANGESET_WARNINGS_MAX of them kept). */

#include <stddef.h>

#include "changeset.h"

/* A path as git prints it with core.quotePath (quote.c quote_c_style): as
 * is when it is plain printable ASCII without '"' and '\\', else in double
 * quotes with C escapes and every other byte (control, non-ASCII) in octal,
 * so invisible code points such as U+200C show. A new string; NULL: out of
 * memory. */
char *cs_quote_path(const char *p);

/* The inverse of cs_quote_path: s[0] == '"', a name git quoted (quote.c
 * quote_c_style: C escapes, octal bytes). A new string, with the bytes
 * consumed (both quotes included) in *ret_used when it is not NULL; NULL
 * when s is not a well-formed quoted name (no opening or closing quote, a
 * bad escape, an escaped NUL) or out of memory. */
char *cs_unquote_path(const char *s, size_t len, size_t *ret_used);

/* The warnings of one extraction: at most CHANGESET_WARNINGS_MAX lines kept,
 * all of them counted. */
typedef struct warnings {
        char **lines;
        size_t n_lines, total;
} warnings;

/* Free what w holds and zero it. */
void warnings_done(warnings *w);

/* Add "<quoted path>: left out of the changeset: <why>" to w. 0 or -ENOMEM. */
int warn_path(warnings *w, const char *path, const char *why);

/* The list handed to the caller (*ret, NULL-terminated, NULL for none; w
 * keeps nothing): the kept lines, the last one replaced by "and N more
 * paths were left out of the changeset" when there were more. 0 or
 * -ENOMEM. */
int warnings_finish(warnings *w, char ***ret);

/* Add a child's warnings to w: the NUL-terminated lines from p to end, of
 * the child_total it counted (the lines past CHANGESET_WARNINGS_MAX are
 * counted, not sent). 0 or -ENOMEM. */
int warnings_add_reply(warnings *w, const char *p, const char *end, size_t child_total);

/* Open rel (no leading '/'; "" is dirfd itself) beneath dirfd with flags
 * (O_NOFOLLOW and O_CLOEXEC added), following no symlink on the way and
 * never leaving dirfd (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS; a plain openat before Linux 5.6). The fd, or
 * -errno (-ELOOP or -EXDEV for a symlink or an escape on the way). */
int cs_open_beneath(int dirfd, const char *rel, int flags);
