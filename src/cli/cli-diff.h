#pragma once
/* `taskferry diff`: a streaming filter over a task's pending patch (the
 * `git diff-tree -p --binary` output the daemon extracts when a task settles) that
 * limits it to some paths and, for a terminal, colours it as git does.
 *
 * Input is fed in chunks of any size; nothing but the current file's
 * extended header (the lines from "diff --git" up to its first hunk, at most
 * CLI_DIFF_HEADER_MAX bytes) is held, so a huge patch streams through.
 *
 * Plain mode (a pipe): the bytes of every kept file section are written
 * unchanged, so `taskferry diff <id> | git apply` applies byte for byte.
 * Colour mode (a terminal): git's default diff colours (color.diff.meta
 * bold, frag cyan, old red, new green, context plain), one SGR sequence at
 * the start of a coloured line and "\033[m" before its newline. The patch is
 * written by a hostile worker (file names and contents): in colour mode
 * every C0 control but TAB (ESC, CR, BS, ...) and DEL are shown in caret
 * notation ("^[", "^?"), C1 controls (U+0080..U+009F) as "<U+009B>", and
 * bytes that are not part of valid UTF-8 as "<E9>", so no sequence of the patch reaches
 * the terminal raw whatever pager (or none) shows it. git quotes control
 * bytes in names itself but writes contents raw and relies on `less -R`;
 * `PAGER=cat` would then let them through, so this is stricter than git. */

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define CLI_DIFF_HEADER_MAX ((size_t) 1 << 20)

#define CLI_DIFF_COLOR_META "\033[1m"
#define CLI_DIFF_COLOR_FRAG "\033[36m"
#define CLI_DIFF_COLOR_OLD "\033[31m"
#define CLI_DIFF_COLOR_NEW "\033[32m"
#define CLI_DIFF_COLOR_RESET "\033[m"

typedef struct cli_diff_filter cli_diff_filter;

/* paths: NULL or a NULL-terminated list of paths relative to the patch root
 * ("src", "src/", "./src/a.c"; "." or "" keeps everything); a file section
 * is kept when one of its names (old or new side, renames included) is a
 * listed path or lies below one. Without paths everything, any text before
 * the first "diff --git" included, is kept. Output goes to `out` (not
 * owned). -ENOMEM. */
int cli_diff_filter_new(char *const *paths, bool color, FILE *out, cli_diff_filter **ret);
/* Escape mode without colour: control bytes, C1 controls and bytes that
 * are not UTF-8 shown as colour mode shows them ("^[", "<U+009B>", "<E9>"),
 * no SGR sequence added; `taskferry diff` sets it whenever stdout is a
 * terminal, whatever NO_COLOR and TERM say (only a pipe gets the patch
 * byte for byte). Colour mode always escapes. */
void cli_diff_filter_set_escape(cli_diff_filter *f, bool escape);
/* Feed the next chunk. -E2BIG if one file's extended header exceeds
 * CLI_DIFF_HEADER_MAX, -EPIPE/-errno if writing fails, -ENOMEM. */
int cli_diff_filter_feed(cli_diff_filter *f, const char *data, size_t len);
/* End of input: writes what is still held and flushes `out`. Returns the
 * number of file sections kept (>= 0) or a negative errno as above. */
int cli_diff_filter_finish(cli_diff_filter *f);
cli_diff_filter *cli_diff_filter_free(cli_diff_filter *f);
static inline void cli_diff_filter_freep(cli_diff_filter **f) { cli_diff_filter_free(*f); }

/* The names one "diff --git" extended header holds (a/ and b/ prefixes and
 * git's C quoting removed; "/dev/null" skipped): from the "diff --git" line
 * when it can be split unambiguously, "--- "/"+++ ", "rename from/to" and
 * "copy from/to". header: the header lines, '\n'-terminated. Returns a new
 * NULL-terminated list (possibly empty), NULL on ENOMEM. */
char **cli_diff_header_names(const char *header, size_t len);

/* Does `name` equal `path` or lie below it ("." / "" match all)? path is
 * normalized first: leading "./" and trailing "/" removed. */
bool cli_diff_path_matches(const char *name, const char *path);

/* The n bytes at s with the same escaping (TAB and newline kept), as a
 * new NUL-terminated string (an embedded NUL shows as "^@"); NULL on
 * ENOMEM. For worker text the CLI prints to a terminal outside a patch
 * (watch's activity lines, accept's list of risky paths). */
char *cli_escape_controls(const char *s, size_t n);

/* The marker of one `git apply --stat` line (len bytes, its '\n' included
 * or not): when the name it shows (quoted as git quotes it, or cut to
 * "..." and its tail) is one of paths, "[<class>, ...]" with the class at
 * the same index of classes for every such entry (each class once), a new
 * string; NULL when no entry matches (or on ENOMEM). The summary line and
 * lines without " | " match nothing. */
char *cli_diff_stat_marks(const char *line, size_t len, char *const *paths, char *const *classes);

/* Is `out` a place for colour: a terminal, NO_COLOR unset or empty, TERM
 * not "dumb" (git's color.ui=auto plus https://no-color.org). */
bool cli_diff_want_color(int fd);
