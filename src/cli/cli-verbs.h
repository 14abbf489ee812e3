#pragma once
/* The CLI's verbs: one row per command, in the order the top help lists
 * them. A row is everything the CLI knows of a command, and every place
 * that needs to know reads it from here:
 *   - the parser (cli-args.c): which argv[0] is a command, which flags it
 *     takes (the first word of each option label), what its bare words are,
 *     and its cross-flag rules (`check`);
 *   - the dispatch (main.c): `run`, or the not-built-yet error without one;
 *   - `--help`: the top help (the "home" row's texts and the commands that
 *     have a `run`) and each command's help object;
 *   - the man page check (tests/unit/test-cli-help.c): docs/taskferry.1.md
 *     documents exactly the commands with a `run`, and says "Needs no
 *     daemon" exactly for those without CLI_VERB_DAEMON;
 *   - the bash completion (taskferry.bash-completion), which asks
 *     `taskferry --help` and `taskferry <command> --help`: the commands,
 *     each command's option labels, and its usage — `<id>` completes task
 *     ids, a usage of alternatives `taskferry <command> <word> ...` completes
 *     those words (test-cli-help runs the script against this table).
 * Modelled on systemd's verbs.h (a Verb is a name, its argument counts,
 * flags and dispatch function). */

#include <stdbool.h>
#include <json-c/json.h>

#include "cli-error.h"

typedef struct cli_args cli_args;       /* cli-args.h */
typedef struct cli_context cli_context; /* commands.h */

/* The top help's and the workspace view's description: what taskferry runs. */
#define CLI_DESCRIPTION "Manage background tasks that run pi, OpenCode or a shell command in the current workspace."

typedef struct cli_option_help {
        /* "--timeout <duration>": the flag (the first word, which the parser
         * accepts for the command), then its argument as the help shows it;
         * for a flag of fixed choices the argument lists them, a|b|c
         * (optionally within <>), which is what the parser accepts. Also the
         * "Valid flags" entry of the command's usage errors. */
        const char *label;
        const char *text;
} cli_option_help;

typedef enum cli_verb_flags {
        /* talks to the daemon (cli_call connects, auto-starting it, on the
         * first call); cli_call refuses a command without it */
        CLI_VERB_DAEMON = 1 << 0,
        /* not a command word: "home" (no arguments) and "version"
         * (--version); cli_verb_find never returns it, help never lists it */
        CLI_VERB_HIDDEN = 1 << 1,
} cli_verb_flags;

/* What a command's bare (not flag) words are. */
typedef enum cli_verb_positional {
        CLI_POSITIONAL_NONE,    /* none: a bare word is "unexpected argument" */
        CLI_POSITIONAL_TASK_ID, /* one task id, required unless --help (usage: "<id>") */
        CLI_POSITIONAL_WORDS,   /* up to two words into cli_args.words (job's action and name),
                                   judged by the row's check */
} cli_verb_positional;

/* The command itself. On success 0 with *ret_value (what TOON prints: the
 * projection) and *ret_raw (what --json prints: the daemon's result, or the
 * same value for a local command), both owned by the caller and either
 * possibly NULL; a command that wrote its output itself (diff, watch) sets
 * ctx->output_done. On failure < 0 with err set; *ret_raw may still be set
 * (accept's applied:false result, which --json prints). -ENOMEM. */
typedef int (*cli_verb_run_fn)(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);

/* The command's cross-flag rules, after the whole command line is parsed
 * (a->help says whether --help was given: most rules are skipped then).
 * 0, or -EINVAL with a usage error in err (cli_usage_error). */
typedef int (*cli_verb_check_fn)(const cli_args *a, cli_error *err);

typedef struct cli_verb {
        const char *name;                /* the command word (for a CLI_VERB_HIDDEN row, cli_args.command) */
        cli_verb_run_fn run;             /* NULL: a command this build does not have yet */
        cli_verb_flags flags;
        cli_verb_positional positional;
        cli_verb_check_fn check;         /* NULL: none */
        const char *usage;
        const char *description;
        const cli_option_help *options;  /* help order; terminated by {NULL, NULL} */
        const char *const *examples;     /* NULL-terminated */
} cli_verb;

/* The table, terminated by a row whose name is NULL: the "home" and
 * "version" rows, then the command words in help order (the original
 * taskferry's 17 commands, `diff` after `result`, `job` last). */
extern const cli_verb cli_verbs[];

/* The command word `name`'s row; NULL if it is none (hidden rows included). */
const cli_verb *cli_verb_find(const char *name);
/* The hidden row `name` ("home", "version"); NULL if there is none. */
const cli_verb *cli_verb_hidden(const char *name);

/* Whether v takes `flag` ("--timeout"; "--" for diff's path limit). */
bool cli_verb_accepts(const cli_verb *v, const char *flag);
/* The argument v's help shows for `flag`: "toon|ndjson" of "--format
 * toon|ndjson" (borrowed from the table); NULL if v does not take the flag
 * or shows none. */
const char *cli_verb_argument(const cli_verb *v, const char *flag);

/* "dispatch, cancel, ...": the commands that have a `run`, in table order
 * (malloc'd; NULL on ENOMEM). */
char *cli_available_commands(void);

/* Help objects. command NULL, "home" or not a command word → the top help
 * {command:"taskferry", usage, description, commands, options, examples}
 * (commands: those with a `run`); else {command, usage, description,
 * options:{label:text}, examples}. NULL on ENOMEM. */
json_object *cli_help_object(const char *command);

/* The usage-error help line for `command`: "Valid flags for <cmd>: <labels
 * or none>. Run `taskferry <cmd> --help` for details", or "Run `taskferry
 * --help` for usage" if command is not a command word. malloc'd. */
char *cli_valid_flags_help(const char *command);

/* A usage error (exit 2) with v's Valid-flags help (v NULL: "Run
 * `taskferry --help` for usage"). Always returns -EINVAL. */
int cli_usage_error(cli_error *err, const cli_verb *v, const char *fmt, ...) _printf_(3, 4);
