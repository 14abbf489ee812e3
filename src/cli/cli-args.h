#pragma once
/* taskferry CLI argument grammar (spec protocol-cli.md §2.2 grammar, §2.3
 * flags and cross-flag rules, §2.4 durations, §2.10 help objects). Pure
 * logic: no I/O, no daemon. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "cli-error.h"

/* The top help's and the workspace view's description (§2.8, §2.10; says
 * what taskferry runs: pi, OpenCode or a shell command). */
#define CLI_DESCRIPTION "Manage background tasks that run pi, OpenCode or a shell command in the current workspace."

#define CLI_MAX_TIMEOUT_MS INT64_C(2147483647)
#define CLI_MAX_SAFE_INTEGER INT64_C(9007199254740991)

typedef struct cli_option_help {
        const char *label; /* e.g. "--timeout <duration>"; also the "Valid flags" entry */
        const char *text;
} cli_option_help;

typedef struct cli_command_spec {
        const char *name;
        const char *usage;
        const char *description;
        const cli_option_help *options; /* terminated by {NULL, NULL} */
        const char *const *examples;    /* NULL-terminated */
        bool takes_task_id;             /* accepts the positional task id */
} cli_command_spec;

/* The one command table: the spec's 17 commands in help order (§2.10) plus
 * `diff` and `job`, terminated by {NULL}. The top help lists those of them this build
 * implements (cli_command_implemented, commands.h); the man page documents
 * the same set (tests/unit/test-cli-help.c). */
extern const cli_command_spec cli_commands[];
/* "dispatch, cancel, ..." : the implemented commands of the table, in its
 * order (malloc'd; NULL on ENOMEM). */
char *cli_available_commands(void);
/* Lookup by name; NULL if unknown. */
const cli_command_spec *cli_command_find(const char *name);


typedef struct cli_args {
        const char *command; /* static: "home" (no command), "version", or a cli_commands name */
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
 * err set (exit code 2, message and help exactly as §2.2/§2.3). -ENOMEM. */
int cli_args_parse(char *const *argv, size_t argc, cli_args *ret, cli_error *err);

/* Option accessors (NULL/false/def when unset). */
const char *cli_args_string(const cli_args *a, const char *key);
bool cli_args_bool(const cli_args *a, const char *key);
bool cli_args_int(const cli_args *a, const char *key, int64_t *ret);
bool cli_args_has(const cli_args *a, const char *key);

/* §2.4 duration: "N" ms, or "N" + s|m|h; must not exceed 2147483647 ms.
 * On error returns -EINVAL with a usage error naming `flag`. */
int cli_parse_duration(const char *value, const char *flag, int64_t *ret_ms, cli_error *err);

/* §2.3 integer: /^\d+$/ within [min, max]; errors as the spec's table. */
int cli_parse_integer(const char *value, const char *flag, int64_t min, int64_t max,
                      int64_t *ret, cli_error *err);

/* JavaScript Number(s) for the env settings the CLI reads (§3.3): trimmed,
 * "" → 0, decimal with optional exponent, 0x/0o/0b integers, ±Infinity;
 * anything else → NaN. */
double cli_js_number(const char *s);

/* Help objects (§2.10). command NULL, "home" or unknown → the top help
 * {command:"taskferry", usage, description, commands, options, examples};
 * else {command, usage, description, options:{label:text}, examples}.
 * NULL on ENOMEM. */
json_object *cli_help_object(const char *command);

/* The usage-error help line for `command` (§2.2): "Valid flags for <cmd>:
 * <labels or none>. Run `taskferry <cmd> --help` for details", or
 * "Run `taskferry --help` for usage" if command is unknown. malloc'd. */
char *cli_valid_flags_help(const char *command);
