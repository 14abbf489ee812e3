#pragma once
/* CLI error values: every CLI failure is
 * printed on stdout as {error, help}; usage errors exit 2, all others 1. */

#include <stdarg.h>
#include <json-c/json.h>

#include "macro.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAILURE 1
#define CLI_EXIT_USAGE 2

typedef struct cli_error {
        char *text;    /* error text; may carry "error:"/"help:" lines (cli_error_value) */
        char *help;    /* explicit help (a UsageError's own help) or NULL */
        char *code;    /* the daemon's error code (UNKNOWN_TASK, ...) for RPC errors, else NULL */
        int exit_code; /* CLI_EXIT_USAGE or CLI_EXIT_FAILURE; 0 = no error set */
} cli_error;

void cli_error_done(cli_error *e);

/* Set a usage error (exit 2) with message and help (help may be NULL: then
 * "Run `taskferry --help` for usage"). Replaces any earlier error.
 * Always returns -EINVAL (so callers can `return cli_error_usage(...)`). */
int cli_error_usage(cli_error *e, const char *help, const char *fmt, ...) _printf_(3, 4);

/* Set an operational error (exit 1) from text (may hold "error:"/"help:"
 * lines) and an optional daemon code. Always returns -EIO. */
int cli_error_fail(cli_error *e, const char *code, const char *fmt, ...) _printf_(3, 4);

/* The printed error object {error, help}, as the original's errorValue builds
 * it: error = the first line starting "error:" (prefix stripped, trimmed) with
 * all lines that start with neither "error:" nor "help:" appended after "\n";
 * without such a line the first line (or "taskferry request failed" if empty),
 * no folding. help = e->help, else the first non-empty "help:" line, else
 * "Retry the command or run `taskferry --help`". NULL on ENOMEM. */
json_object *cli_error_value(const cli_error *e);
