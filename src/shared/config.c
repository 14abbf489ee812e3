/* config.json: its keys, loading, validation and precedence (see config.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "executor.h"
#include "fileio.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"

const ConfigKey config_keys[] = {
        { "maxConcurrentTasks", CONFIG_NUMBER, "TASKFERRY_MAX_CONCURRENT_TASKS" },
        { "maxDispatchesPerWindow", CONFIG_NUMBER, "TASKFERRY_MAX_DISPATCHES_PER_WINDOW" },
        { "dispatchWindowMs", CONFIG_NUMBER, "TASKFERRY_DISPATCH_WINDOW_MS" },
        { "noOutputTimeoutMs", CONFIG_NUMBER, "TASKFERRY_NO_OUTPUT_TIMEOUT_MS" },
        { "postOutputNoOutputTimeoutMs", CONFIG_NUMBER, "TASKFERRY_POST_OUTPUT_NO_OUTPUT_TIMEOUT_MS" },
        { "preOutputMaxMs", CONFIG_NUMBER, "TASKFERRY_PRE_OUTPUT_MAX_MS" },
        { "summaryModel", CONFIG_STRING, "TASKFERRY_SUMMARY_MODEL" },
        { "activitySummariesEnabled", CONFIG_BOOLEAN, "TASKFERRY_ACTIVITY_SUMMARIES" },
        { "summarizerTimeoutMs", CONFIG_NUMBER, "TASKFERRY_SUMMARIZER_TIMEOUT_MS" },
        { "activityMaxWords", CONFIG_NUMBER, "TASKFERRY_ACTIVITY_MAX_WORDS" },
        { "advisorSessionTtlMs", CONFIG_NUMBER, "TASKFERRY_ADVISOR_SESSION_TTL_MS" },
        { "watchdogGraceMs", CONFIG_NUMBER, "TASKFERRY_WATCHDOG_GRACE_MS" },
        { "lowerdirStaggerMs", CONFIG_NUMBER, "TASKFERRY_LOWERDIR_STAGGER_MS" },
        { "sandboxEnabled", CONFIG_BOOLEAN, "TASKFERRY_DISABLE_SANDBOX" },
        { "overlayEnabled", CONFIG_BOOLEAN, "TASKFERRY_DISABLE_OVERLAY" },
        { "allowedDirs", CONFIG_STRING, "TASKFERRY_ALLOWED_DIRS" },
        { "rwBind", CONFIG_STRING, "TASKFERRY_RW_BIND" },
        { "roBind", CONFIG_STRING, "TASKFERRY_RO_BIND" },
        { "envDenylist", CONFIG_STRING, "TASKFERRY_ENV_DENYLIST" },
        { "sandboxDenylist", CONFIG_STRING, "TASKFERRY_SANDBOX_DENYLIST" },
        { "waitDefaultTimeoutMs", CONFIG_NUMBER, "TASKFERRY_WAIT_DEFAULT_TIMEOUT_MS" },
        { "cancelGraceMs", CONFIG_NUMBER, "TASKFERRY_CANCEL_GRACE_MS" },
        { "defaultExecutor", CONFIG_STRING, "TASKFERRY_DEFAULT_EXECUTOR" },
        { "defaultVariant", CONFIG_STRING, "TASKFERRY_DEFAULT_VARIANT" },
        { "advisorContextChars", CONFIG_NUMBER, "TASKFERRY_ADVISOR_CONTEXT_CHARS" },
        { "envFile", CONFIG_STRING, "TASKFERRY_ENV_FILE" },
        { "profilingEnabled", CONFIG_BOOLEAN, "TASKFERRY_PROFILING_ENABLED" },
        { "providerLimits", CONFIG_OBJECT, "TASKFERRY_PROVIDER_LIMITS" },
        { "maxOutputFileBytes", CONFIG_NUMBER, "TASKFERRY_MAX_OUTPUT_FILE_BYTES" },
        /* taskferry's addition: parking a provider after a rate limit that
         * said when to retry (src/daemon/cooldown.h) */
        { "providerCooldownEnabled", CONFIG_BOOLEAN, "TASKFERRY_PROVIDER_COOLDOWN" },
        /* taskferry's additions: the limits of each worker's scope unit
         * (src/daemon/scope.h) */
        { "taskMemoryMax", CONFIG_STRING, "TASKFERRY_TASK_MEMORY_MAX" },
        { "taskTasksMax", CONFIG_NUMBER, "TASKFERRY_TASK_TASKS_MAX" },
        { "taskCpuWeight", CONFIG_NUMBER, "TASKFERRY_TASK_CPU_WEIGHT" },
        /* taskferry's addition: exit when idle after socket activation
         * (src/daemon/notify.h) */
        { "idleExitSec", CONFIG_NUMBER, "TASKFERRY_IDLE_EXIT_SEC" },
        /* taskferry's addition: the repositories whose .taskferry.toml may
         * bind paths outside themselves (src/shared/project-config.h) */
        { "trustedProjects", CONFIG_STRING_ARRAY, "TASKFERRY_TRUSTED_PROJECTS" },
        /* taskferry's addition: the workers' network, {"mode": "proxy" |
         * "none" | "host", "allowHosts": [...]} (src/shared/net-policy.h) */
        { "network", CONFIG_OBJECT, "TASKFERRY_ALLOW_HOSTS" },
        {}
};

static const char *const variant_levels[] = {
        "highest", "off", "minimal", "low", "medium", "high", "xhigh", "max", NULL
};

const ConfigKey *config_key_find(const char *name) {
        if (!name) return NULL;
        for (const ConfigKey *k = config_keys; k->name; k++)
                if (streq(k->name, name)) return k;
        return NULL;
}

const char *config_type_name(ConfigType t) {
        switch (t) {
        case CONFIG_NUMBER: return "number";
        case CONFIG_STRING: return "string";
        case CONFIG_BOOLEAN: return "boolean";
        case CONFIG_OBJECT: return "object";
        case CONFIG_STRING_ARRAY: return "string array";
        }
        return "value";
}

static bool has_type(json_object *v, ConfigType t) {
        switch (t) {
        case CONFIG_NUMBER: return json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double);
        case CONFIG_STRING: return json_object_is_type(v, json_type_string);
        case CONFIG_BOOLEAN: return json_object_is_type(v, json_type_boolean);
        case CONFIG_OBJECT: return json_is_object(v); /* typeof null is "object", but null is no limits table */
        case CONFIG_STRING_ARRAY: {
                if (!json_object_is_type(v, json_type_array)) return false;
                size_t n = json_object_array_length(v);
                for (size_t i = 0; i < n; i++)
                        if (!json_object_is_type(json_object_array_get_idx(v, i), json_type_string)) return false;
                return true;
        }
        }
        return false;
}

/* JSON.stringify of a value for the messages, shortened for a huge one. */
static char *value_text(json_object *v) {
        if (!v) return strdup("null");
        size_t len = 0;
        const char *s = json_to_line(v, &len);
        if (len > 200) return strdup_printf("%.*s…", 200, s);
        return strdup(s);
}

/* A safe integer value (int, or a double holding one). */
static bool safe_integer(json_object *v, double *ret) {
        if (!v) return false;
        if (json_object_is_type(v, json_type_int)) {
                int64_t i = json_object_get_int64(v);
                if (i > (int64_t) CONFIG_MAX_SAFE_INTEGER || i < -(int64_t) CONFIG_MAX_SAFE_INTEGER) return false;
                *ret = (double) i;
                return true;
        }
        if (!json_object_is_type(v, json_type_double)) return false;
        double d = json_object_get_double(v);
        if (!isfinite(d) || d != floor(d) || fabs(d) > CONFIG_MAX_SAFE_INTEGER) return false;
        *ret = d;
        return true;
}

static int validate_provider_limits(const char *path, json_object *pl, char ***ret_warnings, char **reason) {
        json_object_object_foreach(pl, provider, limits) {
                if (!json_is_object(limits))
                        return set_error(reason, -EINVAL,
                                    "error: config key \"providerLimits.%s\" in %s must be a JSON object\n"
                                    "help: use {\"maxConcurrentTasks\": N, \"maxDispatchesPerWindow\": N}",
                                    provider, path);
                json_object_object_foreach(limits, key, value) {
                        if (!streq(key, "maxConcurrentTasks") && !streq(key, "maxDispatchesPerWindow"))
                                return set_error(reason, -EINVAL,
                                            "error: unrecognized key \"providerLimits.%s.%s\" in %s\n"
                                            "help: recognized keys are: maxConcurrentTasks, maxDispatchesPerWindow",
                                            provider, key, path);
                        double d;
                        if (!safe_integer(value, &d) || d <= 0) {
                                _cleanup_free_ char *vt = value_text(value);
                                return set_error(reason, -EINVAL,
                                            "error: config key \"providerLimits.%s.%s\" in %s must be a positive integer (got %s)\n"
                                            "help: fix the value's type in %s",
                                            provider, key, path, strempty(vt), path);
                        }
                }
                if (json_object_object_length(limits) == 0 && ret_warnings &&
                    strv_pushf(ret_warnings,
                               "\"providerLimits.%s\" in %s sets no limits; this provider will be unlimited\n"
                               "help: set \"maxConcurrentTasks\" and/or \"maxDispatchesPerWindow\", or remove the entry entirely",
                               provider, path) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static char *trimmed(const char *s) {
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
        size_t n = strlen(s);
        while (n && strchr(" \t\n\r", s[n - 1])) n--;
        return strndup(s, n);
}

static int validate(const char *path, json_object *o, char ***ret_warnings, char **reason) {
        if (!json_is_object(o))
                return set_error(reason, -EINVAL,
                            "error: %s must be a JSON object\n"
                            "help: use a flat {\"key\": value, ...} object with the recognized config keys",
                            path);
        json_object_object_foreach(o, key, value) {
                const ConfigKey *k = config_key_find(key);
                if (!k) {
                        _cleanup_free_ char *list = NULL;
                        for (const ConfigKey *c = config_keys; c->name; c++) {
                                char *n = strdup_printf("%s%s%s", strempty(list), list ? ", " : "", c->name);
                                if (!n) return -ENOMEM;
                                free(list);
                                list = n;
                        }
                        return set_error(reason, -EINVAL,
                                    "error: unrecognized config key \"%s\" in %s\n"
                                    "help: recognized keys are: %s",
                                    key, path, list);
                }
                if (!has_type(value, k->type)) {
                        _cleanup_free_ char *vt = value_text(value);
                        return set_error(reason, -EINVAL,
                                    "error: config key \"%s\" in %s must be a %s (got %s)\n"
                                    "help: fix the value's type in %s",
                                    key, path, config_type_name(k->type), strempty(vt), path);
                }
                if (k->type == CONFIG_STRING && json_string_has_nul(value))
                        return set_error(reason, -EINVAL,
                                    "error: config key \"%s\" in %s must not contain a NUL character\n"
                                    "help: fix the value in %s",
                                    key, path, path);
                if (k->type == CONFIG_STRING_ARRAY) {
                        size_t n = json_object_array_length(value);
                        for (size_t i = 0; i < n; i++) {
                                json_object *e = json_object_array_get_idx(value, i);
                                if (json_string_has_nul(e) || json_object_get_string(e)[0] != '/')
                                        return set_error(reason, -EINVAL,
                                                    "error: config key \"%s\" in %s must hold absolute paths (entry %zu "
                                                    "does not)\n"
                                                    "help: fix the value in %s",
                                                    key, path, i + 1, path);
                        }
                }
        }
        const char *ex = json_get_string(o, "defaultExecutor");
        if (ex && !executor_find(ex)) {
                json_object *v = NULL;
                json_object_object_get_ex(o, "defaultExecutor", &v);
                _cleanup_free_ char *vs = value_text(v);
                return set_error(reason, -EINVAL,
                            "error: config key \"defaultExecutor\" in %s must be one of %s (got %s)\n"
                            "help: fix the value in %s",
                            path, executor_names(), strempty(vs), path);
        }
        json_object *variant = NULL;
        if (json_object_object_get_ex(o, "defaultVariant", &variant)) {
                _cleanup_free_ char *t = trimmed(json_object_get_string(variant));
                if (!t) return -ENOMEM;
                if (!strv_contains((char **) variant_levels, t)) {
                        _cleanup_free_ char *vs = value_text(variant);
                        return set_error(reason, -EINVAL,
                                    "error: config key \"defaultVariant\" in %s must be one of highest, off, minimal, low, "
                                    "medium, high, xhigh, max (got %s)\n"
                                    "help: fix the value in %s",
                                    path, strempty(vs), path);
                }
        }
        json_object *pl = NULL;
        if (json_object_object_get_ex(o, "providerLimits", &pl)) {
                int r = validate_provider_limits(path, pl, ret_warnings, reason);
                if (r < 0) return r;
        }
        return 0;
}

int config_parse(const char *path, const char *text, size_t len, json_object **ret, char ***ret_warnings,
                 char **reason) {
        *ret = NULL;
        *reason = NULL;
        if (len > CONFIG_FILE_MAX)
                return set_error(reason, -EINVAL,
                            "error: %s is larger than %d bytes\n"
                            "help: config.json is a small flat object; fix the file, or delete it to use built-in defaults",
                            path, CONFIG_FILE_MAX);
        if (memchr(text, 0, len))
                return set_error(reason, -EINVAL,
                            "error: could not parse %s: the file contains a NUL byte\n"
                            "help: fix the JSON syntax, or delete the file to use built-in defaults",
                            path);
        size_t ws = 0;
        while (ws < len && strchr(" \t\r\n", text[ws])) ws++;
        if (ws == len)
                return set_error(reason, -EINVAL,
                            "error: could not parse %s: unexpected end of JSON input\n"
                            "help: fix the JSON syntax, or delete the file to use built-in defaults",
                            path);
        json_tokener *tok = json_strict_tokener_new_depth(CONFIG_MAX_DEPTH);
        if (!tok) return -ENOMEM;
        json_object *o = NULL;
        enum json_tokener_error e;
        int r = json_parse_strict_ex(tok, text, len, &o, &e);
        json_tokener_free(tok);
        if (r < 0) {
                const char *what = e == json_tokener_success       ? "unexpected data after the JSON value"
                                   : e == json_tokener_error_depth ? "nested too deeply"
                                                                   : json_tokener_error_desc(e);
                return set_error(reason, -EINVAL,
                            "error: could not parse %s: %s\n"
                            "help: fix the JSON syntax, or delete the file to use built-in defaults",
                            path, what);
        }
        r = validate(path, o, ret_warnings, reason);
        if (r < 0) {
                json_object_put(o);
                return r;
        }
        *ret = o;
        return 0;
}

int config_load(const char *path, json_object **ret, char ***ret_warnings, char **reason) {
        *ret = NULL;
        *reason = NULL;
        /* O_NONBLOCK: a fifo planted at the path must not hang the start;
         * symlinks are followed (dotfile managers link config files), but
         * the target must be a regular file (a link to /dev/zero is not) */
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                if (errno == ENOENT) {
                        *ret = json_object_new_object();
                        return *ret ? 0 : -ENOMEM;
                }
                return set_error(reason, -EINVAL, "error: could not read %s: %s\nhelp: fix the file's permissions or type, or delete it to use built-in defaults",
                            path, strerror(errno));
        }
        struct stat st;
        if (fstat(fd, &st) < 0)
                return set_error(reason, -EINVAL, "error: could not read %s: %s\nhelp: fix the file, or delete it to use built-in defaults",
                            path, strerror(errno));
        if (!S_ISREG(st.st_mode))
                return set_error(reason, -EINVAL,
                            "error: could not read %s: not a regular file\n"
                            "help: config.json must be a regular file (or a symlink to one); delete it to use built-in defaults",
                            path);
        if (st.st_size > CONFIG_FILE_MAX)
                return set_error(reason, -EINVAL,
                            "error: %s is larger than %d bytes\n"
                            "help: config.json is a small flat object; fix the file, or delete it to use built-in defaults",
                            path, CONFIG_FILE_MAX);
        /* back to blocking reads of a regular file */
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0) (void) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = read_fd(fd, CONFIG_FILE_MAX, &text, &len);
        if (r == -EFBIG)
                return set_error(reason, -EINVAL,
                            "error: %s is larger than %d bytes\n"
                            "help: config.json is a small flat object; fix the file, or delete it to use built-in defaults",
                            path, CONFIG_FILE_MAX);
        if (r == -ENOMEM) return r;
        if (r < 0)
                return set_error(reason, -EINVAL, "error: could not read %s: %s\nhelp: fix the file, or delete it to use built-in defaults",
                            path, strerror(-r));
        return config_parse(path, text, len, ret, ret_warnings, reason);
}

double config_js_number(const char *s) {
        if (!s) return NAN;
        while (*s && strchr(" \t\n\r\v\f", *s)) s++;
        size_t len = strlen(s);
        while (len > 0 && strchr(" \t\n\r\v\f", s[len - 1])) len--;
        _cleanup_free_ char *t = strndup(s, len);
        if (!t) return NAN;
        if (len == 0) return 0;
        if (streq(t, "Infinity") || streq(t, "+Infinity")) return INFINITY;
        if (streq(t, "-Infinity")) return -INFINITY;
        if (len > 2 && t[0] == '0' && strchr("xXoObB", t[1])) {
                int base = (t[1] == 'x' || t[1] == 'X') ? 16 : (t[1] == 'o' || t[1] == 'O') ? 8 : 2;
                double v = 0;
                for (const char *p = t + 2; *p; p++) {
                        int d = hex_digit_value(*p);
                        if (d < 0 || d >= base) return NAN;
                        v = v * base + d;
                }
                return v;
        }
        /* [+-]? (digits [. digits?] | . digits) ([eE][+-]?digits)? */
        const char *p = t;
        if (*p == '+' || *p == '-') p++;
        bool mant = false;
        while (*p >= '0' && *p <= '9') p++, mant = true;
        if (*p == '.') {
                p++;
                while (*p >= '0' && *p <= '9') p++, mant = true;
        }
        if (!mant) return NAN;
        if (*p == 'e' || *p == 'E') {
                p++;
                if (*p == '+' || *p == '-') p++;
                if (!(*p >= '0' && *p <= '9')) return NAN;
                while (*p >= '0' && *p <= '9') p++;
        }
        if (*p) return NAN;
        return strtod(t, NULL);
}

static bool in_range(double d, ConfigRange range) {
        if (!isfinite(d) || d != floor(d) || d > CONFIG_MAX_SAFE_INTEGER) return false;
        return range == CONFIG_POSITIVE ? d > 0 : d >= 0;
}

uint64_t config_integer(json_object *cfg, const char *key, const char *env_value, ConfigRange range, uint64_t def) {
        if (env_value) {
                double d = config_js_number(env_value);
                if (in_range(d, range)) return (uint64_t) d;
        }
        json_object *v = NULL;
        double d;
        if (cfg && json_object_object_get_ex(cfg, key, &v) && safe_integer(v, &d) && in_range(d, range))
                return (uint64_t) d;
        return def;
}

bool config_boolean(json_object *cfg, const char *key, const char *env_value, bool env_means, bool def) {
        if (env_value) return env_means;
        json_object *v = NULL;
        if (cfg && json_object_object_get_ex(cfg, key, &v) && json_object_is_type(v, json_type_boolean))
                return json_object_get_boolean(v);
        return def;
}

int config_list_append(char ***l, const char *s) {
        if (!s) return 0;
        _cleanup_free_ char *copy = strdup(s);
        if (!copy) return -ENOMEM;
        for (char *tok = copy, *next; tok; tok = next) {
                next = strchr(tok, ',');
                if (next) *next++ = 0;
                while (*tok == ' ' || *tok == '\t') tok++;
                size_t n = strlen(tok);
                while (n && (tok[n - 1] == ' ' || tok[n - 1] == '\t')) tok[--n] = 0;
                if (n && !strv_contains(*l, tok) && strv_push(l, tok) < 0) return -ENOMEM;
        }
        return 0;
}

static bool config_positive_number(json_object *cfg, const char *key, double *ret) {
        json_object *v = NULL;
        if (!cfg || !json_object_object_get_ex(cfg, key, &v)) return false;
        if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double)) return false;
        double d = json_object_get_double(v);
        if (!isfinite(d) || d <= 0) return false;
        *ret = d;
        return true;
}

int config_wait_default_timeout(json_object *cfg, const char *env_value, double *ret_ms) {
        if (env_value && streq(env_value, "0")) return 0;
        if (env_value) {
                double v = config_js_number(env_value);
                if (isfinite(v) && v > 0) {
                        *ret_ms = v;
                        return 1;
                }
        }
        double c;
        if (config_positive_number(cfg, "waitDefaultTimeoutMs", &c)) {
                *ret_ms = c;
                return 1;
        }
        *ret_ms = CONFIG_DEFAULT_WAIT_TIMEOUT_MS;
        return 1;
}

double config_advisor_context_chars(json_object *cfg, const char *env_value) {
        if (env_value) {
                double v = config_js_number(env_value);
                if (isfinite(v) && v > 0) return v;
        }
        double c;
        if (config_positive_number(cfg, "advisorContextChars", &c)) return c;
        return CONFIG_DEFAULT_ADVISOR_CONTEXT_CHARS;
}
