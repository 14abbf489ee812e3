/* taskferry CLI argument grammar (cli-args.h): the flags, their values, and
 * the walk over argv that the verb table (cli-verbs.h) steers. */
#include "cli-args.h"

#include <errno.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "disk-budget.h"
#include "json-util.h"
#include "protocol-keys.h"
#include "protocol.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"

/* ---- flags: a flag's grammar; which commands take it is the verb table's ---- */

typedef enum flag_kind {
        FLAG_BOOL,
        FLAG_STRING,
        FLAG_INTEGER,
        FLAG_DURATION,
        FLAG_PATH_LIST,
        FLAG_FIELDS,
        FLAG_CHOICE, /* one of the choices the command's help shows for it */
        FLAG_REGEX,
        FLAG_SIZE,
} flag_kind;

typedef struct flag_spec {
        const char *name;
        const char *key;      /* its key in cli_args.options (camelCase, as the daemon's params) */
        flag_kind kind;
        int64_t min, max;     /* FLAG_INTEGER */
        const char *hint;     /* FLAG_SIZE, FLAG_REGEX: the help of a bad value */
        bool choices_listed;  /* FLAG_CHOICE: hint "Use <f> with one of: a, b", not "Use <f> a or <f> b" */
        const char *warning;  /* printed on stderr when given (a deprecated name) */
        bool repeatable;      /* FLAG_PATH_LIST: each use adds to the list (else a second use is an error) */
} flag_spec;

#define FLAG(n, k, kind_, ...) { .name = (n), .key = (k), .kind = (kind_), __VA_ARGS__ }

static const flag_spec flags[] = {
        FLAG("--prompt", PK_prompt, FLAG_STRING),
        FLAG("--directory", PK_directory, FLAG_STRING),
        FLAG("--model", PK_model, FLAG_STRING),
        FLAG("--variant", PK_variant, FLAG_STRING),
        FLAG("--session-id", PK_sessionId, FLAG_STRING),
        FLAG("--require-final-marker", PK_finalMarker, FLAG_REGEX,
             .hint = "Use --require-final-marker with a pattern that compiles as a POSIX extended regular expression"),
        FLAG("--rw-bind", PK_rwBind, FLAG_PATH_LIST),
        FLAG("--ro-bind", PK_roBind, FLAG_PATH_LIST),
        FLAG("--allowed-dirs", PK_allowedDirs, FLAG_PATH_LIST,
             .warning = "--allowed-dirs is deprecated; use --rw-bind (same behavior). It will be removed in the next major release."),
        FLAG("--executor", PK_executor, FLAG_CHOICE),
        FLAG("--network", PK_network, FLAG_CHOICE),
        FLAG("--allow-host", PK_allowHosts, FLAG_PATH_LIST, .repeatable = true),
        FLAG("--allow-socket", PK_allowSockets, FLAG_PATH_LIST, .repeatable = true),
        FLAG("--class", PK_class, FLAG_STRING),
        FLAG("--parent-task", PK_parentTaskId, FLAG_STRING),
        FLAG("--grace-ms", PK_graceMs, FLAG_INTEGER, .min = 0, .max = CLI_MAX_SAFE_INTEGER),
        FLAG("--disk-max", PK_diskMax, FLAG_SIZE,
             .hint = "Use --disk-max with bytes or a size with a K, M, G or T suffix (e.g. 50M, 2G), from 1 byte through "
                     "9007199254740991 bytes"),
        FLAG("--memory-max", PK_memoryMax, FLAG_SIZE,
             .hint = "Use --memory-max with bytes or a size with a K, M, G or T suffix (e.g. 512M, 4G), at least 8M"),
        FLAG("--tasks-max", PK_tasksMax, FLAG_INTEGER, .min = 8, .max = 4194304),
        FLAG("--timeout", PK_timeoutMs, FLAG_DURATION),
        FLAG("--tail-chars", PK_tailChars, FLAG_INTEGER, .min = 1, .max = 65536),
        FLAG("--chars", PK_chars, FLAG_INTEGER, .min = 1, .max = 131072),
        FLAG("--path", PK_path, FLAG_STRING),
        FLAG("--max-output-file-bytes", PK_maxOutputFileBytes, FLAG_INTEGER, .min = 1, .max = CLI_MAX_SAFE_INTEGER),
        FLAG("--mode", PK_mode, FLAG_CHOICE),
        FLAG("--max-words", PK_maxWords, FLAG_INTEGER, .min = 75, .max = 300),
        FLAG("--fields", PK_fields, FLAG_FIELDS),
        FLAG("--limit", "limit", FLAG_INTEGER, .min = 1, .max = CLI_MAX_SAFE_INTEGER),
        FLAG("--format", "format", FLAG_CHOICE, .choices_listed = true),
        FLAG("--task-id", PK_taskId, FLAG_STRING),
        FLAG("--flush-interval", "flushIntervalMs", FLAG_DURATION),
        FLAG("--full", PK_full, FLAG_BOOL),
        FLAG("--all", PK_all, FLAG_BOOL),
        FLAG("--wait", "wait", FLAG_BOOL),
        FLAG("--summaries", PK_summaries, FLAG_BOOL),
        FLAG("--summarize", "summarize", FLAG_BOOL),
        FLAG("--summarize-context", "summarizeContext", FLAG_BOOL),
        FLAG("--stats", "stats", FLAG_BOOL),
        FLAG("--no-sandbox", PK_noSandbox, FLAG_BOOL),
        FLAG("--no-overlay", PK_noOverlay, FLAG_BOOL),
        FLAG("--force", PK_force, FLAG_BOOL),
        FLAG("--allow-config", PK_allowConfig, FLAG_BOOL),
        FLAG("--diff", PK_diff, FLAG_BOOL),
        FLAG("--stat", "stat", FLAG_BOOL),
        {}
};

/* Retired flag names, each with the hint at what replaced it. target: the
 * flag the hint points at; when set, the hint is only given if the command
 * takes that flag (else the name is just unknown). A command that takes
 * the name itself (watch's --task-id) is not told it is retired. */
typedef struct migration_flag {
        const char *name;
        const char *hint;
        const char *target;
} migration_flag;

static const migration_flag migration_flags[] = {
        { "--task-id", "--task-id was replaced by the positional task id; use `taskferry status <id>`", NULL },
        { "--timeout_ms", "--timeout_ms was renamed; use --timeout", "--timeout" },
        { "--timeout-ms", "--timeout-ms was renamed; use --timeout", "--timeout" },
        { "--tail_chars", "--tail_chars was renamed; use --tail-chars", NULL },
        { "--max_words", "--max_words was renamed; use --max-words", NULL },
        { "--session_id", "--session_id was renamed; use --session-id", NULL },
        { "--style", "--style was renamed; use --mode", NULL },
        { "--rw-dirs", "--rw-dirs was renamed; use --rw-bind", "--rw-bind" },
        { "--ro-dirs", "--ro-dirs was renamed; use --ro-bind", "--ro-bind" },
        {}
};

static const flag_spec *flag_find(const char *name) {
        for (const flag_spec *f = flags; f->name; f++)
                if (streq(f->name, name)) return f;
        return NULL;
}

/* ---- value coercers ---- */

static bool all_digits(const char *s) {
        if (!*s) return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9') return false;
        return true;
}

int cli_parse_integer(const char *value, const char *flag, int64_t min, int64_t max,
                      int64_t *ret, cli_error *err) {
        _cleanup_free_ char *help = strdup_printf("Use %s with a number from %" PRId64 " through %" PRId64,
                                                  flag, min, max);
        if (!all_digits(value)) return cli_error_usage(err, help, "%s must be an integer", flag);
        double d = strtod(value, NULL); /* Number(value): correctly rounded */
        bool safe = d <= (double) CLI_MAX_SAFE_INTEGER;
        if (!safe || d < (double) min || d > (double) max) {
                if (min != 1) return cli_error_usage(err, help, "%s must be from %" PRId64 " through %" PRId64, flag, min, max);
                if (d < 1) return cli_error_usage(err, help, "%s must be a positive integer", flag);
                return cli_error_usage(err, help, "%s must be a positive integer from 1 through %" PRId64, flag, max);
        }
        *ret = (int64_t) d;
        return 0;
}

int cli_parse_duration(const char *value, const char *flag, int64_t *ret_ms, cli_error *err) {
        _cleanup_free_ char *help = strdup_printf(
                "Use %s with milliseconds (e.g. 10000) or a duration string (e.g. 30s, 5m, 1h); values must not exceed 2147483647 milliseconds (about 24 days)",
                flag);
        if (all_digits(value)) {
                double ms = strtod(value, NULL);
                if (ms > (double) CLI_MAX_SAFE_INTEGER)
                        return cli_error_usage(err, help, "%s is not a valid integer", flag);
                if (ms > (double) CLI_MAX_TIMEOUT_MS)
                        return cli_error_usage(err, help, "%s must not exceed 2147483647 milliseconds (about 24 days)", flag);
                *ret_ms = (int64_t) ms;
                return 0;
        }
        size_t len = strlen(value);
        double unit = 0;
        if (len >= 2) {
                switch (value[len - 1]) {
                case 's': unit = 1000; break;
                case 'm': unit = 60000; break;
                case 'h': unit = 3600000; break;
                }
        }
        _cleanup_free_ char *digits = unit > 0 ? strndup(value, len - 1) : NULL;
        if (!digits || !all_digits(digits))
                return cli_error_usage(err, help, "%s must be milliseconds or a duration like 30s, 5m, 1h", flag);
        double ms = strtod(digits, NULL) * unit;
        if (ms > (double) CLI_MAX_TIMEOUT_MS)
                return cli_error_usage(err, help, "%s must not exceed 2147483647 milliseconds (about 24 days)", flag);
        *ret_ms = (int64_t) ms;
        return 0;
}

double cli_js_number(const char *s) {
        return config_js_number(s);
}

static int parse_path_list(const char *value, const char *flag, json_object **ret, cli_error *err) {
        _cleanup_json_ json_object *arr = json_object_new_array();
        if (!arr) return -ENOMEM;
        for (const char *p = value; ; ) {
                const char *comma = strchr(p, ',');
                size_t len = comma ? (size_t) (comma - p) : strlen(p);
                const char *s = p;
                while (len > 0 && strchr(" \t\n\r\v\f", *s)) s++, len--;
                while (len > 0 && strchr(" \t\n\r\v\f", s[len - 1])) len--;
                if (len > 0 && json_object_array_add(arr, json_object_new_string_len(s, (int) len)) < 0)
                        return -ENOMEM;
                if (!comma) break;
                p = comma + 1;
        }
        if (json_object_array_length(arr) == 0) {
                _cleanup_free_ char *help = strdup_printf("Use %s with one or more comma-separated paths", flag);
                return cli_error_usage(err, help, "%s must contain at least one path", flag);
        }
        *ret = TAKE_PTR(arr);
        return 0;
}

static int parse_fields(const char *value, json_object **ret, cli_error *err) {
        json_object *list = NULL;
        int r = parse_path_list(value, "--fields", &list, err);
        bool ok = r >= 0;
        if (r == -ENOMEM) return r;
        if (ok) {
                for (size_t i = 0; ok && i < json_object_array_length(list); i++) {
                        const char *f = json_object_get_string(json_object_array_get_idx(list, i));
                        ok = strv_contains((char **) protocol_result_fields, f);
                }
        }
        if (!ok) {
                json_object_put(list);
                char *buf = NULL;
                size_t size = 0;
                FILE *f = open_memstream(&buf, &size);
                if (!f) return -ENOMEM;
                fputs("Use one of: ", f);
                for (size_t i = 0; protocol_result_fields[i]; i++) fprintf(f, "%s%s", i ? ", " : "", protocol_result_fields[i]);
                if (fclose(f) != 0) {
                        free(buf);
                        return -ENOMEM;
                }
                _cleanup_free_ char *help = buf;
                return cli_error_usage(err, help, "--fields must contain one or more supported result fields");
        }
        *ret = list;
        return 0;
}

/* FLAG_CHOICE: the value must be one of the choices that v's help shows for
 * the flag ("--format toon|ndjson", "--executor <opencode|pi|shell>"). */
static int parse_choice(const cli_verb *v, const flag_spec *f, const char *value, cli_error *err) {
        const char *arg = cli_verb_argument(v, f->name);
        size_t len = arg ? strlen(arg) : 0;
        if (len >= 2 && arg[0] == '<' && arg[len - 1] == '>') {
                arg++;
                len -= 2;
        }
        _cleanup_free_ char *choices = strndup(strempty(arg), len);
        if (!choices) return -ENOMEM;
        for (char *c = choices, *end; c; c = end ? end + 1 : NULL) {
                end = strchr(c, '|');
                size_t n = end ? (size_t) (end - c) : strlen(c);
                if (strlen(value) == n && strncmp(c, value, n) == 0) return 0;
        }

        char *list = NULL, *hint = NULL;
        size_t ls = 0, hs = 0;
        FILE *lf = open_memstream(&list, &ls), *hf = open_memstream(&hint, &hs);
        if (!lf || !hf) {
                if (lf) fclose(lf);
                if (hf) fclose(hf);
                free(list);
                free(hint);
                return -ENOMEM;
        }
        if (f->choices_listed) fprintf(hf, "Use %s with one of: ", f->name);
        else fputs("Use", hf);
        size_t i = 0;
        for (char *c = strtok(choices, "|"); c; c = strtok(NULL, "|"), i++) {
                fprintf(lf, "%s%s", i ? ", " : "", c);
                if (f->choices_listed) fprintf(hf, "%s%s", i ? ", " : "", c);
                else fprintf(hf, "%s %s %s", i ? " or" : "", f->name, c);
        }
        fclose(lf);
        fclose(hf);
        _cleanup_free_ char *l = list, *h = hint;
        return cli_error_usage(err, h, "%s must be one of %s", f->name, l);
}

static int parse_regex(const flag_spec *f, const char *value, cli_error *err) {
        regex_t re;
        int rc = regcomp(&re, value, REG_EXTENDED | REG_NOSUB | REG_NEWLINE);
        if (rc == 0) {
                regfree(&re);
                return 0;
        }
        char msg[256];
        regerror(rc, &re, msg, sizeof msg);
        return cli_error_usage(err, f->hint, "%s is not a valid regular expression: %s", f->name, msg);
}

/* ---- parser ---- */

void cli_args_done(cli_args *a) {
        free(a->task_id);
        strv_free(a->words);
        json_object_put(a->options);
        strv_free(a->warnings);
        *a = (cli_args) {};
}

/* The original taskferry's MCP tool names, each with the command that took
 * its place. echo_args: the help repeats the arguments given; id_arg: the
 * first argument, when there is one, stands in for <id>. */
typedef struct mcp_tool {
        const char *name;
        const char *use;
        bool echo_args;
        bool id_arg;
} mcp_tool;

static const mcp_tool mcp_tools[] = {
        { .name = "taskferry_dispatch", .use = "taskferry dispatch --prompt \"<text>\"", .echo_args = true },
        { .name = "taskferry_cancel", .use = "taskferry cancel <id>" },
        { .name = "taskferry_poll", .use = "taskferry wait", .id_arg = true },
        { .name = "taskferry_advisor", .use = "taskferry advisor --prompt \"<text>\" --model <id>" },
        { .name = "taskferry_status", .use = "taskferry status <id>" },
        { .name = "taskferry_tail", .use = "taskferry tail <id>" },
        { .name = "taskferry_summary", .use = "taskferry summary <id>" },
        { .name = "taskferry_result", .use = "taskferry result <id>" },
        { .name = "taskferry_list", .use = "taskferry list" },
        {}
};

static int migration_error(const char *name, char *const *rest, size_t nrest, cli_error *err) {
        const mcp_tool *t = mcp_tools;
        while (t->name && !streq(t->name, name)) t++;
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        if (!f) return -ENOMEM;
        if (!t->name) fputs("Run `taskferry --help` for the AXI CLI commands", f);
        else {
                fprintf(f, "Use: %s", t->use);
                if (t->id_arg) fprintf(f, " %s", nrest > 0 && rest[0][0] ? rest[0] : "<id>");
                if (t->echo_args && nrest > 0) {
                        fputs(" (received", f);
                        for (size_t i = 0; i < nrest; i++) fprintf(f, " %s", rest[i]);
                        fputc(')', f);
                }
        }
        if (fclose(f) != 0) {
                free(buf);
                return -ENOMEM;
        }
        _cleanup_free_ char *help = buf;
        return cli_error_usage(err, help, "%s is an MCP tool name and is no longer a command", name);
}

static int set_option(json_object *options, const char *key, json_object *value, const cli_verb *v, cli_error *err) {
        if (json_object_object_get_ex(options, key, NULL)) {
                json_object_put(value);
                return cli_usage_error(err, v, "duplicate flag %s", key);
        }
        if (json_object_object_add(options, key, value) < 0) {
                json_object_put(value);
                return -ENOMEM;
        }
        return 0;
}

/* The value of a flag that takes one: "--f=value", or the next token. */
static int flag_value(const cli_verb *v, const char *name, const char *inline_value, char *const *argv, size_t argc,
                      size_t *i, const char **ret, cli_error *err) {
        if (inline_value) {
                if (!*inline_value) return cli_usage_error(err, v, "%s requires a non-empty value", name);
                *ret = inline_value;
                return 0;
        }
        if (*i + 1 >= argc || startswith(argv[*i + 1], "--")) return cli_usage_error(err, v, "%s requires a value", name);
        *ret = argv[++*i];
        if (!**ret) return cli_usage_error(err, v, "%s requires a non-empty value", name);
        return 0;
}

/* The option value of flag f given as `value` (a new reference), or a usage
 * error carrying the coercer's own help. */
static int flag_parse_value(cli_args *a, const flag_spec *f, const char *value, json_object **ret, cli_error *err) {
        int64_t n;
        int r = 0;
        *ret = NULL;
        switch (f->kind) {
        case FLAG_STRING:
                *ret = json_object_new_string(value);
                break;
        case FLAG_INTEGER:
                r = cli_parse_integer(value, f->name, f->min, f->max, &n, err);
                if (r >= 0) *ret = json_object_new_int64(n);
                break;
        case FLAG_DURATION:
                r = cli_parse_duration(value, f->name, &n, err);
                if (r >= 0) *ret = json_object_new_int64(n);
                break;
        case FLAG_PATH_LIST:
                r = parse_path_list(value, f->name, ret, err);
                break;
        case FLAG_FIELDS:
                r = parse_fields(value, ret, err);
                break;
        case FLAG_CHOICE:
                r = parse_choice(a->verb, f, value, err);
                if (r >= 0) *ret = json_object_new_string(value);
                break;
        case FLAG_REGEX:
                r = parse_regex(f, value, err);
                if (r >= 0) *ret = json_object_new_string(value);
                break;
        case FLAG_SIZE: {
                uint64_t bytes;
                r = disk_size_parse(value, &bytes);
                if (r < 0)
                        r = cli_error_usage(err, f->hint,
                                            r == -ERANGE ? "%s must be a positive size within 9007199254740991 bytes"
                                                         : "%s must be a size such as 4096, 50M or 2G",
                                            f->name);
                else *ret = json_object_new_int64((int64_t) bytes);
                break;
        }
        case FLAG_BOOL:
                *ret = json_object_new_boolean(true);
                break;
        }
        if (r < 0) return r;
        if (!*ret) return -ENOMEM;
        if (f->warning && strv_push(&a->warnings, f->warning) < 0) {
                json_object_put(*ret);
                *ret = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* One "--..." token at argv[*i] (a value taken from the next token moves *i on). */
static int parse_flag(cli_args *a, const char *token, char *const *argv, size_t argc, size_t *i, cli_error *err) {
        const cli_verb *v = a->verb;
        const char *eq = strchr(token, '=');
        _cleanup_free_ char *name = eq ? strndup(token, (size_t) (eq - token)) : strdup(token);
        if (!name) return -ENOMEM;
        const char *inline_value = eq ? eq + 1 : NULL;

        for (const migration_flag *m = migration_flags; m->name; m++) {
                if (!streq(m->name, name)) continue;
                if (cli_verb_accepts(v, name)) break;
                if (m->target && !cli_verb_accepts(v, m->target))
                        return cli_usage_error(err, v, "unknown flag %s for `%s`", name, v->name);
                return cli_error_usage(err, m->hint, "unknown flag %s for `%s`", name, v->name);
        }

        const flag_spec *f = flag_find(name);
        if (!f || !cli_verb_accepts(v, name)) return cli_usage_error(err, v, "unknown flag %s for `%s`", name, v->name);

        const char *value = NULL;
        if (f->kind == FLAG_BOOL) {
                if (inline_value) return cli_usage_error(err, v, "%s does not take a value", name);
        } else {
                int r = flag_value(v, name, inline_value, argv, argc, i, &value, err);
                if (r < 0) return r;
        }
        json_object *o;
        int r = flag_parse_value(a, f, value, &o, err);
        if (r < 0) return r;
        json_object *prior = NULL;
        if (f->repeatable && json_object_object_get_ex(a->options, f->key, &prior)) {
                for (size_t k = 0; k < json_object_array_length(o); k++)
                        if (json_object_array_add(prior, json_object_get(json_object_array_get_idx(o, k))) < 0) {
                                json_object_put(o);
                                return -ENOMEM;
                        }
                json_object_put(o);
                return 0;
        }
        return set_option(a->options, f->key, o, v, err);
}

/* diff's "-- <path>...": everything after "--" is a path limit, as git's pathspecs. */
static int parse_paths(cli_args *a, char *const *argv, size_t argc, cli_error *err) {
        json_object *paths = json_object_new_array();
        if (!paths) return -ENOMEM;
        for (size_t i = 0; i < argc; i++)
                if (json_object_array_add(paths, json_object_new_string(argv[i])) < 0) {
                        json_object_put(paths);
                        return -ENOMEM;
                }
        return set_option(a->options, "paths", paths, a->verb, err);
}

/* A bare token: the verb's positional grammar says what it is. */
static int parse_word(cli_args *a, const char *token, cli_error *err) {
        switch (a->verb->positional) {
        case CLI_POSITIONAL_WORDS:
                if (strv_length(a->words) >= 2) break;
                return strv_push(&a->words, token) < 0 ? -ENOMEM : 0;
        case CLI_POSITIONAL_TASK_ID:
                if (a->task_id) break;
                a->task_id = strdup(token);
                return a->task_id ? 0 : -ENOMEM;
        case CLI_POSITIONAL_NONE:
                break;
        }
        return cli_usage_error(err, a->verb, "unexpected argument: %s", token);
}

/* argv[0] when it is not a command word: what the original taskferry made of it. */
static int parse_first(cli_args *a, char *const *argv, size_t argc, cli_error *err) {
        if (argc == 0) {
                a->verb = cli_verb_hidden("home");
                return 0;
        }
        bool help = streq(argv[0], "--help") || streq(argv[0], "-h");
        if (help || streq(argv[0], "--version") || streq(argv[0], "-V")) {
                if (argc > 1) return cli_error_usage(err, NULL, "unexpected argument: %s", argv[1]);
                a->verb = cli_verb_hidden(help ? "home" : "version");
                a->help = help;
                return 0;
        }
        if (startswith(argv[0], "taskferry_")) return migration_error(argv[0], argv + 1, argc - 1, err);
        if (streq(argv[0], "poll")) return cli_error_usage(err, "Use `taskferry wait <id>`", "poll was renamed to wait");
        return cli_error_usage(err, "Run `taskferry --help` to see available commands", "unknown command: %s", argv[0]);
}

int cli_args_parse(char *const *argv_in, size_t argc_in, cli_args *ret, cli_error *err) {
        _cleanup_(cli_args_done) cli_args a = {};
        _cleanup_free_ char **argv = calloc(argc_in + 1, sizeof(char *));
        if (!argv) return -ENOMEM;
        size_t argc = 0;
        for (size_t i = 0; i < argc_in; i++) {
                if (streq(argv_in[i], "--json")) a.json = true;
                else argv[argc++] = argv_in[i];
        }
        a.options = json_object_new_object();
        if (!a.options) return -ENOMEM;

        a.verb = argc > 0 ? cli_verb_find(argv[0]) : NULL;
        if (!a.verb) {
                int r = parse_first(&a, argv, argc, err);
                if (r < 0) return r;
                a.command = a.verb->name;
                goto done;
        }
        a.command = a.verb->name;

        for (size_t i = 1; i < argc; i++) {
                const char *token = argv[i];
                int r;
                if (streq(token, "--help") || streq(token, "-h")) {
                        a.help = true;
                        continue;
                }
                if (streq(token, "--") && cli_verb_accepts(a.verb, "--")) {
                        r = parse_paths(&a, argv + i + 1, argc - i - 1, err);
                        if (r < 0) return r;
                        break;
                }
                if (token[0] != '-') r = parse_word(&a, token, err);
                else if (!startswith(token, "--"))
                        r = cli_usage_error(err, a.verb, "unknown flag %s for `%s`", token, a.command);
                else r = parse_flag(&a, token, argv, argc, &i, err);
                if (r < 0) return r;
        }

        if (!a.help && a.verb->positional == CLI_POSITIONAL_TASK_ID && isempty(a.task_id))
                return cli_usage_error(err, a.verb, "task id is required");
        if (a.verb->check) {
                int r = a.verb->check(&a, err);
                if (r < 0) return r;
        }
done:
        *ret = a;
        a = (cli_args) {};
        return 0;
}

const char *cli_args_string(const cli_args *a, const char *key) {
        return json_get_string(a->options, key);
}

bool cli_args_bool(const cli_args *a, const char *key) {
        return json_get_bool(a->options, key, false);
}

bool cli_args_int(const cli_args *a, const char *key, int64_t *ret) {
        return json_get_int64(a->options, key, ret);
}

bool cli_args_has(const cli_args *a, const char *key) {
        return a->options && json_object_object_get_ex(a->options, key, NULL);
}
