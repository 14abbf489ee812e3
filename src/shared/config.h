#pragma once
/* config.json: the one table of its keys, loading and validation, and the
 * precedence both programs apply to a setting: its environment variable when
 * set and valid, else the config file's value when valid, else the default
 * (an invalid value falls through, it is no error). The daemon resolves
 * every daemon-side key in src/daemon/settings.c; the CLI resolves
 * waitDefaultTimeoutMs and advisorContextChars through the helpers below. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

/* The largest config.json read (bytes); a bigger file is an error, never a
 * partial read. */
#define CONFIG_FILE_MAX (1024 * 1024)
/* Nesting allowed in config.json (the format is flat plus providerLimits'
 * two levels); deeper is a parse error. */
#define CONFIG_MAX_DEPTH 8
/* The most bytes of one output file a task.output may return, as the
 * request's maxOutputFileBytes and as the configured one (1 MiB, the wire's
 * frame budget). */
#define CONFIG_MAX_OUTPUT_FILE_BYTES_LIMIT UINT64_C(1048576)
#define CONFIG_MAX_SAFE_INTEGER 9007199254740991.0

typedef enum ConfigType {
        CONFIG_NUMBER,
        CONFIG_STRING,
        CONFIG_BOOLEAN,
        CONFIG_OBJECT,
        CONFIG_STRING_ARRAY, /* a JSON array of strings */
} ConfigType;

typedef struct ConfigKey {
        const char *name; /* config.json key, e.g. "maxConcurrentTasks" */
        ConfigType type;  /* the JSON type validation requires */
        const char *env;  /* the environment variable that sets it */
} ConfigKey;

/* The original's 29 keys in its order (the order the unknown-key help
 * lists them in), then taskferry's additions (providerCooldownEnabled;
 * taskMemoryMax, taskTasksMax, taskCpuWeight; idleExitSec; trustedProjects),
 * terminated by {NULL}. */
extern const ConfigKey config_keys[];
#define CONFIG_N_KEYS 36
/* The table entry of a key, NULL if the key is not one of the table's. */
const ConfigKey *config_key_find(const char *name);
/* "number", "string", "boolean", "object" (the typeof the errors name),
 * "string array". */
const char *config_type_name(ConfigType t);

/* Read and validate the config file at path: a missing file (ENOENT,
 * a dangling symlink included) is {}. The file is opened non-blocking (a
 * fifo never blocks), must be a regular file (a symlink to one is fine, a
 * device or fifo is not), at most CONFIG_FILE_MAX bytes, UTF-8 JSON without
 * NUL bytes, nested at most CONFIG_MAX_DEPTH deep. Then exactly the
 * original's checks: an object; only the keys of config_keys; each of its
 * type (numbers are only type-checked: 0, -1 and 1.5 pass, and fall back to
 * the default where they are used); no string holding an escaped NUL;
 * trustedProjects an array of absolute paths;
 * defaultExecutor a known
 * executor; defaultVariant (trimmed) a known level; providerLimits an object
 * of objects with only positive-integer maxConcurrentTasks and
 * maxDispatchesPerWindow.
 * Returns 0 with *ret the validated object (owned by the caller). On any
 * failure returns -EINVAL with *reason set to the text the daemon's boot
 * error and the CLI show: "error: <message>\nhelp: <help>" (a sentence for
 * the user, set exactly when the return is negative, NULL on success and
 * with -ENOMEM; the caller frees it).
 * Warnings (an empty providerLimits entry) are appended to *ret_warnings
 * when ret_warnings is non-NULL, each without the "warning: " prefix. */
int config_load(const char *path, json_object **ret, char ***ret_warnings, char **reason);
/* The same validation over text already in memory (len bytes). */
int config_parse(const char *path, const char *text, size_t len, json_object **ret, char ***ret_warnings,
                 char **reason);

/* JavaScript Number(s), what an environment variable of a numeric setting
 * is read with: trimmed, "" → 0, decimal with optional fraction and exponent
 * ("1e3" → 1000), 0x/0o/0b integers, ±Infinity; anything else (and NULL) →
 * NaN. */
double config_js_number(const char *s);

typedef enum ConfigRange {
        CONFIG_POSITIVE,    /* safe integer > 0 ("int>0") */
        CONFIG_NONNEGATIVE, /* safe integer >= 0 ("int≥0") */
} ConfigRange;

/* An integer setting: env_value if it is set and Number(env_value) is a
 * safe integer in range ("" is 0: valid for CONFIG_NONNEGATIVE), else the
 * config's value of key if it is a safe integer in range, else def. cfg may
 * be NULL. Returns the chosen value. */
uint64_t config_integer(json_object *cfg, const char *key, const char *env_value, ConfigRange range, uint64_t def);

/* A boolean setting whose env var wins whenever it is set, whatever its
 * value: env_means when env_value is non-NULL; otherwise the config's
 * boolean, else def. What a set env var means differs per key (some
 * disable, some enable), so the caller says it (env_means). */
bool config_boolean(json_object *cfg, const char *key, const char *env_value, bool env_means, bool def);

/* A comma list, the form of every list setting: split on ',', trim spaces
 * and tabs, drop empties, deduplicate keeping the first occurrence;
 * appended to *l. NULL s appends nothing. 0 or -ENOMEM. */
int config_list_append(char ***l, const char *s);

/* waitDefaultTimeoutMs for the CLI's `wait` and `summary --wait` without a
 * --timeout (a malformed config.json therefore breaks them too):
 * env "0" → 0 (send no timeoutMs: wait forever); env a positive finite
 * Number → it; else config's positive number → it (0 ignored); else 900000.
 * Returns 1 with *ret_ms set when a timeout is to be sent, 0 for none. */
int config_wait_default_timeout(json_object *cfg, const char *env_value, double *ret_ms);
#define CONFIG_DEFAULT_WAIT_TIMEOUT_MS 900000.0

/* advisorContextChars for the CLI: env a positive finite Number, else
 * config's positive finite number, else 120000. */
double config_advisor_context_chars(json_object *cfg, const char *env_value);
#define CONFIG_DEFAULT_ADVISOR_CONTEXT_CHARS 120000.0
