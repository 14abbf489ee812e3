#pragma once
/* taskferry CLI argument grammar. Pure logic: no I/O, no daemon.
 *
 * argv[0] picks the verb (cli-verbs.h): none → "home" (the workspace view);
 * --help/-h → the top help and --version/-V → "version" (either with
 * anything after it: usage error "unexpected argument: <a>"); a name of the
 * original taskferry's MCP tools (taskferry_*) or `poll` → a usage error
 * naming the command that replaced it; any other word that is not a command
 * → "unknown command: <c>".
 *
 * After the command: --help/-h anywhere asks for the command's help (its
 * required-argument rules are skipped; unknown flags still fail). A bare
 * word is what the verb's `positional` says. A flag is `--name value` or
 * `--name=value`: a value must be non-empty and is never a token starting
 * with "--" (single-dash values such as `--prompt -` are fine); a boolean
 * takes none; a repeated flag, a single-dash token and a flag the command
 * does not take are usage errors. Usage errors carry the command's
 * "Valid flags for <cmd>: ..." help, except a bad value, whose help says
 * what the flag takes. --json is taken out first, wherever it stands. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "cli-error.h"
#include "cli-verbs.h"

#define CLI_MAX_TIMEOUT_MS INT64_C(2147483647)
#define CLI_MAX_SAFE_INTEGER INT64_C(9007199254740991) /* JavaScript's Number.MAX_SAFE_INTEGER */

typedef struct cli_args {
        const cli_verb *verb; /* the table's row: a command's, or the hidden "home" or "version" */
        const char *command;  /* verb->name */
        bool help;           /* --help/-h: print cli_help_object(command) */
        bool json;           /* --json anywhere: print JSON instead of TOON */
        char *task_id;       /* positional task id or NULL */
        char **words;        /* job's bare words: the action (run, list), then the name */
        json_object *options; /* parsed flags by option key (camelCase), in argv order:
                                 strings, int64s (integers and durations in ms),
                                 true (booleans), string arrays (comma lists, fields) */
        char **warnings;     /* stderr warnings to print (without "warning: " already
                                included), e.g. the --allowed-dirs deprecation */
} cli_args;

void cli_args_done(cli_args *a);

/* Parse argv (WITHOUT the program name) into *ret. Every "--json" token is
 * removed first and sets ret->json. On a usage error returns -EINVAL with
 * err set (exit code 2; message and help as the original taskferry's). -ENOMEM. */
int cli_args_parse(char *const *argv, size_t argc, cli_args *ret, cli_error *err);

/* Option accessors (NULL/false/def when unset). */
const char *cli_args_string(const cli_args *a, const char *key);
bool cli_args_bool(const cli_args *a, const char *key);
bool cli_args_int(const cli_args *a, const char *key, int64_t *ret);
bool cli_args_has(const cli_args *a, const char *key);

/* A duration: "N" ms, or "N" + s|m|h; must not exceed 2147483647 ms (about
 * 24 days, the longest timer JavaScript keeps). On error returns -EINVAL
 * with a usage error naming `flag`. */
int cli_parse_duration(const char *value, const char *flag, int64_t *ret_ms, cli_error *err);

/* An integer: digits only (leading zeros fine) within [min, max]. Errors:
 * "<flag> must be an integer"; out of range with min != 1 "<flag> must be
 * from <min> through <max>", with min 1 "<flag> must be a positive integer"
 * (0) or "... from 1 through <max>"; help "Use <flag> with a number from
 * <min> through <max>". */
int cli_parse_integer(const char *value, const char *flag, int64_t min, int64_t max,
                      int64_t *ret, cli_error *err);

/* JavaScript Number(s) for the env settings the CLI reads as the original
 * did: trimmed, "" → 0, decimal with optional exponent, 0x/0o/0b integers,
 * ±Infinity; anything else → NaN. */
double cli_js_number(const char *s);
