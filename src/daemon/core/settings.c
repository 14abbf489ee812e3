/* The daemon's settings, resolved once at start (settings.h). */
#include "core/settings.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "disk-budget.h"
#include "launch-spec.h"
#include "executor.h"
#include "json-util.h"
#include "macro.h"
#include "net-policy.h"
#include "taskferry-config.h"
#include "log.h"
#include "path-util.h"
#include "string-util.h"
#include "strv.h"

extern char **environ;

static const char *const variant_levels[] = {
        "highest", "off", "minimal", "low", "medium", "high", "xhigh", "max", NULL
};

static const char *config_string(json_object *cfg, const char *key) {
        return cfg ? json_get_string(cfg, key) : NULL;
}

static char *trim_dup(const char *s) {
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
        size_t n = strlen(s);
        while (n && strchr(" \t\n\r", s[n - 1])) n--;
        return strndup(s, n);
}

static int provider_limits_push(Settings *s, const char *provider, uint64_t conc, uint64_t per_window) {
        /* a provider named twice: the later entry wins, as a JSON object's would */
        for (size_t i = 0; i < s->n_provider_limits; i++)
                if (streq(s->provider_limits[i].provider, provider)) {
                        s->provider_limits[i].max_concurrent_tasks = conc;
                        s->provider_limits[i].max_dispatches_per_window = per_window;
                        return 0;
                }
        ProviderLimit *n = reallocarray(s->provider_limits, s->n_provider_limits + 1, sizeof *n);
        if (!n) return -ENOMEM;
        s->provider_limits = n;
        char *p = strdup(provider);
        if (!p) return -ENOMEM;
        n[s->n_provider_limits++] = (ProviderLimit) {
                .provider = p, .max_concurrent_tasks = conc, .max_dispatches_per_window = per_window
        };
        return 0;
}

/* A positive decimal integer field of the env grammar. */
static bool parse_limit(const char *s, uint64_t *ret) {
        if (!*s) return false;
        uint64_t v = 0;
        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9') return false;
                if (v > (UINT64_C(9007199254740991) - (uint64_t) (*p - '0')) / 10) return false;
                v = v * 10 + (uint64_t) (*p - '0');
        }
        if (v == 0) return false;
        *ret = v;
        return true;
}

/* TASKFERRY_PROVIDER_LIMITS: provider:maxConcurrent[:maxDispatchesPerWindow], comma-separated;
 * a malformed entry fails the start. */
static int provider_limits_from_env(Settings *s, const char *v, char **reason) {
        static const char help[] = "help: use provider:maxConcurrentTasks[:maxDispatchesPerWindow], comma-separated";
        _cleanup_strv_free_ char **entries = NULL;
        if (config_list_append(&entries, v) < 0) return -ENOMEM;
        for (char **e = entries; e && *e; e++) {
                _cleanup_free_ char *copy = strdup(*e);
                if (!copy) return -ENOMEM;
                char *provider = copy, *conc = strchr(copy, ':'), *win = NULL;
                if (!conc)
                        return set_error(reason, -EINVAL, "error: malformed TASKFERRY_PROVIDER_LIMITS entry \"%s\": missing :maxConcurrentTasks\n%s",
                                    *e, help);
                *conc++ = 0;
                win = strchr(conc, ':');
                if (win) *win++ = 0;
                if (win && strchr(win, ':'))
                        return set_error(reason, -EINVAL, "error: malformed TASKFERRY_PROVIDER_LIMITS entry \"%s\": too many fields\n%s", *e, help);
                _cleanup_free_ char *name = trim_dup(provider);
                if (!name) return -ENOMEM;
                if (!*name)
                        return set_error(reason, -EINVAL, "error: malformed TASKFERRY_PROVIDER_LIMITS entry \"%s\": empty provider\n%s", *e, help);
                uint64_t c = 0, w = 0;
                _cleanup_free_ char *cs = trim_dup(conc), *ws = win ? trim_dup(win) : NULL;
                if (!cs || (win && !ws)) return -ENOMEM;
                if (!parse_limit(cs, &c))
                        return set_error(reason, -EINVAL,
                                    "error: malformed TASKFERRY_PROVIDER_LIMITS entry \"%s\": maxConcurrentTasks must be a positive integer\n%s",
                                    *e, help);
                if (win && !parse_limit(ws, &w))
                        return set_error(reason, -EINVAL,
                                    "error: malformed TASKFERRY_PROVIDER_LIMITS entry \"%s\": maxDispatchesPerWindow must be a positive integer\n%s",
                                    *e, help);
                int r = provider_limits_push(s, name, c, w);
                if (r < 0) return r;
        }
        return 0;
}

static int provider_limits_from_config(Settings *s, json_object *pl) {
        json_object_object_foreach(pl, provider, limits) {
                int64_t c = 0, w = 0;
                /* config_load validated these: positive safe integers or absent */
                (void) json_get_int64(limits, "maxConcurrentTasks", &c);
                (void) json_get_int64(limits, "maxDispatchesPerWindow", &w);
                int r = provider_limits_push(s, provider, c > 0 ? (uint64_t) c : 0, w > 0 ? (uint64_t) w : 0);
                if (r < 0) return r;
        }
        return 0;
}

/* A comma-list setting whose env var replaces the config's when set. */
static int list_env_replaces(char ***l, json_object *cfg, const char *key, const char *env_value) {
        return config_list_append(l, env_value ? env_value : config_string(cfg, key));
}

/* A positive number of the config or the environment as uint64, saturated:
 * "1e30" is more than any count, never a cast out of range. */
static uint64_t u64_saturated(double v) {
        if (!(v > 0)) return 0;
        return v >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t) v;
}

int settings_resolve(Settings *s, json_object *cfg, char *const *envp, char ***ret_warnings, char **reason) {
#define ENV(name) strv_env_get(envp, name)
#define INT(key, env, range, def) config_integer(cfg, key, ENV(env), range, def)
        int r;
        *reason = NULL;

        s->max_concurrent_tasks = INT("maxConcurrentTasks", "TASKFERRY_MAX_CONCURRENT_TASKS", CONFIG_POSITIVE, 4);
        s->max_dispatches_per_window =
                INT("maxDispatchesPerWindow", "TASKFERRY_MAX_DISPATCHES_PER_WINDOW", CONFIG_POSITIVE, 2);
        s->dispatch_window_ms = INT("dispatchWindowMs", "TASKFERRY_DISPATCH_WINDOW_MS", CONFIG_POSITIVE, 5000);
        s->no_output_timeout_ms = INT("noOutputTimeoutMs", "TASKFERRY_NO_OUTPUT_TIMEOUT_MS", CONFIG_POSITIVE, 256000);
        s->post_output_no_output_timeout_ms = INT("postOutputNoOutputTimeoutMs",
                                                  "TASKFERRY_POST_OUTPUT_NO_OUTPUT_TIMEOUT_MS", CONFIG_POSITIVE, 400000);
        s->pre_output_max_ms = INT("preOutputMaxMs", "TASKFERRY_PRE_OUTPUT_MAX_MS", CONFIG_POSITIVE, 1024000);

        /* `??`: a set env var wins even when empty */
        const char *sm = ENV("TASKFERRY_SUMMARY_MODEL");
        if (!sm) sm = config_string(cfg, "summaryModel");
        s->summary_model = strdup(sm ? sm : "opencode/mimo-v2.5-free");
        if (!s->summary_model) return -ENOMEM;

        const char *as = ENV("TASKFERRY_ACTIVITY_SUMMARIES");
        s->activity_summaries_enabled = config_boolean(cfg, "activitySummariesEnabled", as, !streq_ptr(as, "0"), true);
        s->summarizer_timeout_ms =
                INT("summarizerTimeoutMs", "TASKFERRY_SUMMARIZER_TIMEOUT_MS", CONFIG_NONNEGATIVE, 360000);
        s->activity_max_words = INT("activityMaxWords", "TASKFERRY_ACTIVITY_MAX_WORDS", CONFIG_POSITIVE, 75);
        /* env only (no config key) */
        s->watchdog_poll_ms = config_integer(NULL, NULL, ENV("TASKFERRY_WATCHDOG_POLL_MS"), CONFIG_POSITIVE, 2000);
        s->advisor_session_ttl_ms =
                INT("advisorSessionTtlMs", "TASKFERRY_ADVISOR_SESSION_TTL_MS", CONFIG_POSITIVE, 1800000);
        s->watchdog_grace_ms = INT("watchdogGraceMs", "TASKFERRY_WATCHDOG_GRACE_MS", CONFIG_POSITIVE, 5000);
        s->lowerdir_stagger_ms = INT("lowerdirStaggerMs", "TASKFERRY_LOWERDIR_STAGGER_MS", CONFIG_NONNEGATIVE, 3000);

        const char *ds = ENV("TASKFERRY_DISABLE_SANDBOX"), *dov = ENV("TASKFERRY_DISABLE_OVERLAY");
        s->sandbox_enabled = config_boolean(cfg, "sandboxEnabled", ds, !(streq_ptr(ds, "1") || streq_ptr(ds, "true")), true);
        s->overlay_enabled =
                config_boolean(cfg, "overlayEnabled", dov, !(streq_ptr(dov, "1") || streq_ptr(dov, "true")), true);

        /* unions, every layer adding to the last: env TASKFERRY_RW_BIND, config rwBind,
         * TASKFERRY_ALLOWED_DIRS, config allowedDirs */
        const char *ad_env = ENV("TASKFERRY_ALLOWED_DIRS"), *ad_cfg = config_string(cfg, "allowedDirs");
        if (config_list_append(&s->allowed_dirs, ad_env) < 0 || config_list_append(&s->allowed_dirs, ad_cfg) < 0 ||
            config_list_append(&s->rw_bind, ENV("TASKFERRY_RW_BIND")) < 0 ||
            config_list_append(&s->rw_bind, config_string(cfg, "rwBind")) < 0 ||
            config_list_append(&s->rw_bind, ad_env) < 0 || config_list_append(&s->rw_bind, ad_cfg) < 0 ||
            config_list_append(&s->ro_bind, ENV("TASKFERRY_RO_BIND")) < 0 ||
            config_list_append(&s->ro_bind, config_string(cfg, "roBind")) < 0)
                return -ENOMEM;
        /* trusted repositories: env (comma list) ∪ config (array); relative
         * env entries are dropped (config.c refuses them in the file) */
        _cleanup_strv_free_ char **trusted = NULL;
        if (config_list_append(&trusted, ENV("TASKFERRY_TRUSTED_PROJECTS")) < 0) return -ENOMEM;
        json_object *tp = NULL;
        if (cfg && json_object_object_get_ex(cfg, "trustedProjects", &tp) && json_object_is_type(tp, json_type_array))
                for (size_t i = 0; i < json_object_array_length(tp); i++) {
                        const char *e = json_object_get_string(json_object_array_get_idx(tp, i));
                        if (e && !strv_contains(trusted, e) && strv_push(&trusted, e) < 0) return -ENOMEM;
                }
        for (char **t = trusted; t && *t; t++) {
                if ((*t)[0] == '/') {
                        if (strv_push(&s->trusted_projects, *t) < 0) return -ENOMEM;
                } else if (ret_warnings &&
                           strv_pushf(ret_warnings, "TASKFERRY_TRUSTED_PROJECTS entry %s is not an absolute path; ignored",
                                      *t) < 0)
                        return -ENOMEM;
        }
        /* the network: mode env over config; hosts env ∪ config, each a rule */
        json_object *net = NULL;
        if (cfg) (void) json_object_object_get_ex(cfg, "network", &net);
        const char *nm = ENV("TASKFERRY_NETWORK");
        if (!nm && json_is_object(net)) nm = json_get_string(net, "mode");
        s->net_mode = nm ? net_mode_from_string(nm) : NET_MODE_PROXY;
        if (s->net_mode < 0) {
                if (ret_warnings && strv_pushf(ret_warnings, "network mode \"%s\" is not one of proxy, none, host; "
                                                             "using proxy", nm) < 0)
                        return -ENOMEM;
                s->net_mode = NET_MODE_PROXY;
        }
        _cleanup_strv_free_ char **hosts = NULL;
        _cleanup_free_ char *he = ENV("TASKFERRY_ALLOW_HOSTS") ? strdup(ENV("TASKFERRY_ALLOW_HOSTS")) : NULL;
        for (char *c = he; c && *c; c++)
                if (*c == ' ' || *c == '\t' || *c == '\n') *c = ',';
        if (config_list_append(&hosts, he) < 0) return -ENOMEM;
        json_object *ah = json_is_object(net) ? json_get_array(net, "allowHosts") : NULL;
        for (size_t i = 0; ah && i < json_object_array_length(ah); i++) {
                const char *e = json_object_get_string(json_object_array_get_idx(ah, i));
                if (e && strv_push(&hosts, e) < 0) return -ENOMEM;
        }
        for (char **h = hosts; h && *h; h++) {
                if (isempty(*h) || strv_contains(s->allow_hosts, *h)) continue;
                NetRule rule = {0};
                const char *why = NULL;
                int k = net_rule_parse(*h, &rule, &why);
                net_rule_done(&rule);
                if (k == -ENOMEM) return k;
                if (k < 0) {
                        if (ret_warnings && strv_pushf(ret_warnings, "allowed host %s: %s; ignored", *h, strempty(why)) < 0)
                                return -ENOMEM;
                        continue;
                }
                if (strv_push(&s->allow_hosts, *h) < 0) return -ENOMEM;
        }
        if ((ad_env || ad_cfg) && ret_warnings &&
            strv_push(ret_warnings,
                      "TASKFERRY_ALLOWED_DIRS / config allowedDirs is deprecated; use TASKFERRY_RW_BIND / rwBind "
                      "(same behavior). It will be removed in the next major release.") < 0)
                return -ENOMEM;
        if (list_env_replaces(&s->env_denylist, cfg, "envDenylist", ENV("TASKFERRY_ENV_DENYLIST")) < 0 ||
            list_env_replaces(&s->sandbox_denylist, cfg, "sandboxDenylist", ENV("TASKFERRY_SANDBOX_DENYLIST")) < 0)
                return -ENOMEM;

        double wait_ms = 0;
        s->wait_default_timeout_ms = config_wait_default_timeout(cfg, ENV("TASKFERRY_WAIT_DEFAULT_TIMEOUT_MS"), &wait_ms) > 0
                                             ? u64_saturated(wait_ms)
                                             : 0;
        s->cancel_grace_ms = INT("cancelGraceMs", "TASKFERRY_CANCEL_GRACE_MS", CONFIG_POSITIVE, 5000);

        /* `||`: an empty env var falls through to the config */
        const char *ex = ENV("TASKFERRY_DEFAULT_EXECUTOR");
        if (isempty(ex)) ex = config_string(cfg, "defaultExecutor");
        s->default_executor = strdup(ex ? ex : "pi");
        if (!s->default_executor) return -ENOMEM;
        if (!executor_find(s->default_executor)) return set_error(reason, -EINVAL, "unknown executor: %s", s->default_executor);

        const char *var = ENV("TASKFERRY_DEFAULT_VARIANT");
        if (!var) var = config_string(cfg, "defaultVariant");
        s->default_variant = trim_dup(var ? var : "highest");
        if (!s->default_variant) return -ENOMEM;
        if (!strv_contains((char **) variant_levels, s->default_variant))
                return set_error(reason, -EINVAL,
                            "defaultVariant must be one of highest, off, minimal, low, medium, high, xhigh, max (got \"%s\")",
                            s->default_variant);

        s->advisor_context_chars =
                u64_saturated(config_advisor_context_chars(cfg, ENV("TASKFERRY_ADVISOR_CONTEXT_CHARS")));

        const char *ef = ENV("TASKFERRY_ENV_FILE");
        if (!ef) ef = config_string(cfg, "envFile");
        if (!isempty(ef) && !(s->env_file = strdup(ef))) return -ENOMEM;

        const char *pe = ENV("TASKFERRY_PROFILING_ENABLED");
        s->profiling_enabled =
                config_boolean(cfg, "profilingEnabled", pe, streq_ptr(pe, "1") || streq_ptr(pe, "true"), false);

        const char *pc = ENV("TASKFERRY_PROVIDER_COOLDOWN");
        s->provider_cooldown_enabled = config_boolean(cfg, "providerCooldownEnabled", pc,
                                                      !(streq_ptr(pc, "0") || streq_ptr(pc, "false")), true);

        const char *pl = ENV("TASKFERRY_PROVIDER_LIMITS");
        json_object *pl_cfg = cfg ? json_get_object(cfg, "providerLimits") : NULL;
        if (pl) r = provider_limits_from_env(s, pl, reason);
        else r = pl_cfg ? provider_limits_from_config(s, pl_cfg) : 0;
        if (r < 0) return r;

        /* int>0 falls back; a valid value over the wire budget is a start error */
        const char *mo_env = ENV("TASKFERRY_MAX_OUTPUT_FILE_BYTES");
        s->max_output_file_bytes = INT("maxOutputFileBytes", "TASKFERRY_MAX_OUTPUT_FILE_BYTES", CONFIG_POSITIVE, 524288);
        if (s->max_output_file_bytes > CONFIG_MAX_OUTPUT_FILE_BYTES_LIMIT)
                return set_error(reason, -EINVAL,
                            "error: maxOutputFileBytes must not exceed %" PRIu64 " (got %" PRIu64 " from %s)\n"
                            "help: the daemon's response limit is 1 MiB; use a value from 1 through %" PRIu64,
                            CONFIG_MAX_OUTPUT_FILE_BYTES_LIMIT, s->max_output_file_bytes,
                            config_integer(NULL, NULL, mo_env, CONFIG_POSITIVE, 0) ? "TASKFERRY_MAX_OUTPUT_FILE_BYTES"
                                                                                   : "config.json",
                            CONFIG_MAX_OUTPUT_FILE_BYTES_LIMIT);

        /* the scope of each worker (scope.h): taskferry's additions */
        const char *mm = ENV("TASKFERRY_TASK_MEMORY_MAX");
        const char *mm_from = "TASKFERRY_TASK_MEMORY_MAX";
        if (isempty(mm)) mm = config_string(cfg, "taskMemoryMax"), mm_from = "config taskMemoryMax";
        if (!isempty(mm)) {
                if (disk_size_parse(mm, &s->task_memory_max) < 0)
                        return set_error(reason, -EINVAL,
                                    "error: %s must be a positive size in bytes, optionally with a K, M, G or T "
                                    "suffix (got \"%s\")\nhelp: e.g. 4G or 512M",
                                    mm_from, mm);
        } else {
                long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
                s->task_memory_max = pages > 0 && psize > 0 ? (uint64_t) pages * (uint64_t) psize / 2 : UINT64_C(4) << 30;
        }
        s->task_tasks_max = INT("taskTasksMax", "TASKFERRY_TASK_TASKS_MAX", CONFIG_POSITIVE, 4096);
        s->task_cpu_weight = INT("taskCpuWeight", "TASKFERRY_TASK_CPU_WEIGHT", CONFIG_POSITIVE, 100);
        if (s->task_cpu_weight > 10000)
                return set_error(reason, -EINVAL,
                            "error: the task CPU weight must be from 1 through 10000 (got %" PRIu64 ")\n"
                            "help: set TASKFERRY_TASK_CPU_WEIGHT or taskCpuWeight as systemd's CPUWeight=; 100 is "
                            "the default weight",
                            s->task_cpu_weight);
        /* taskferry's addition (notify.h): 0 never; only ever used when socket-activated */
        s->idle_exit_sec = INT("idleExitSec", "TASKFERRY_IDLE_EXIT_SEC", CONFIG_NONNEGATIVE, SETTINGS_DEFAULT_IDLE_EXIT_SEC);

        /* env-only settings of this port */
        if (config_list_append(&s->home_allow, ENV("TASKFERRY_SANDBOX_HOME_ALLOW")) < 0) return -ENOMEM;
        /* the log's budget (log-pipe.h in the shim) */
        const char *lm = ENV("TASKFERRY_TASK_LOG_MAX");
        s->task_log_max = SETTINGS_DEFAULT_TASK_LOG_MAX;
        if (!isempty(lm) && (disk_size_parse(lm, &s->task_log_max) < 0 || s->task_log_max < LAUNCH_LOG_BUDGET_MIN))
                return set_error(reason, -EINVAL,
                            "error: TASKFERRY_TASK_LOG_MAX must be a size of at least 64M, optionally with a K, M, G "
                            "or T suffix (got \"%s\")\nhelp: e.g. 256M (the default); the log keeps a quarter of "
                            "it as its tail, which must hold the worker's final lines",
                            lm);
        const char *dm = ENV("TASKFERRY_TASK_DISK_MAX");
        if (!isempty(dm) && disk_size_parse(dm, &s->task_disk_max) < 0)
                return set_error(reason, -EINVAL,
                            "TASKFERRY_TASK_DISK_MAX must be a positive size in bytes, optionally "
                            "with a K, M, G or T suffix (got \"%s\")",
                            dm);
        return 0;
#undef INT
#undef ENV
}

int settings_resolve_shim(Settings *s, char *const *envp, char **reason) {
        const char *env = strv_env_get(envp, "TASKFERRY_SHIM");
        if (!isempty(env)) {
                s->shim_path = strdup(env);
                return s->shim_path ? 0 : -ENOMEM;
        }
        _cleanup_free_ char *dir = NULL;
        if (self_exe_dir(&dir) >= 0) {
                _cleanup_free_ char *p = strdup_printf("%s/taskferry-shim", dir);
                if (p && access(p, X_OK) == 0) {
                        s->shim_path = TAKE_PTR(p);
                        return 0;
                }
        }
        _cleanup_free_ char *p = strdup(TASKFERRY_INSTALL_LIBEXECDIR "/taskferry-shim");
        if (p && access(p, X_OK) == 0) {
                s->shim_path = TAKE_PTR(p);
                return 0;
        }
        *reason = strdup("cannot find taskferry-shim next to taskferryd or in " TASKFERRY_INSTALL_LIBEXECDIR);
        return -ENOENT;
}

int settings_load(Settings *s, const char *config_path, char **reason) {
        _cleanup_json_ json_object *cfg = NULL;
        _cleanup_strv_free_ char **warnings = NULL;
        int r = 0;
        if (config_path) r = config_load(config_path, &cfg, &warnings, reason);
        if (r >= 0) r = settings_resolve(s, cfg, environ, &warnings, reason);
        for (char **w = warnings; w && *w; w++) log_text("warning", "warning: %s", *w);
        if (r < 0) return r;
        return settings_resolve_shim(s, environ, reason);
}

void settings_done(Settings *s) {
        free(s->summary_model);
        strv_free(s->allowed_dirs);
        strv_free(s->rw_bind);
        strv_free(s->ro_bind);
        strv_free(s->trusted_projects);
        strv_free(s->allow_hosts);
        strv_free(s->env_denylist);
        strv_free(s->sandbox_denylist);
        free(s->default_executor);
        free(s->default_variant);
        free(s->env_file);
        for (size_t i = 0; i < s->n_provider_limits; i++) free(s->provider_limits[i].provider);
        free(s->provider_limits);
        strv_free(s->home_allow);
        free(s->shim_path);
        *s = (Settings) {};
}

const ProviderLimit *settings_provider_limit(const Settings *s, const char *model) {
        if (!model) return NULL;
        const char *slash = strchr(model, '/');
        size_t n = slash ? (size_t) (slash - model) : strlen(model);
        for (size_t i = 0; i < s->n_provider_limits; i++)
                if (strlen(s->provider_limits[i].provider) == n && strncmp(s->provider_limits[i].provider, model, n) == 0)
                        return &s->provider_limits[i];
        return NULL;
}
