#pragma once
/* The daemon's settings: read once at start (settings.c) from the
 * environment the daemon inherited and config.json (src/shared/config.h),
 * then only read. One field per config.json key, named as the key in
 * snake_case, then the settings only the environment sets. A scalar
 * resolves env > config > default, an env or config value that does not
 * parse falling back silently to the next; a set boolean env var always
 * wins; list settings are comma lists (see each field). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

/* One providerLimits entry: the provider is a model's prefix before the
 * first '/'. A limit of 0 is unset (no limit of that kind). */
typedef struct ProviderLimit {
        char *provider;
        uint64_t max_concurrent_tasks;
        uint64_t max_dispatches_per_window;
} ProviderLimit;

#define SETTINGS_DEFAULT_IDLE_EXIT_SEC 300
#define SETTINGS_DEFAULT_TASK_LOG_MAX ((uint64_t) 256 << 20)

typedef struct Settings {
        /* ---- the config.json keys (env var; default; rule) ---- */
        uint64_t max_concurrent_tasks;             /* TASKFERRY_MAX_CONCURRENT_TASKS; 4; int>0 */
        uint64_t max_dispatches_per_window;        /* TASKFERRY_MAX_DISPATCHES_PER_WINDOW; 2; int>0 */
        uint64_t dispatch_window_ms;               /* TASKFERRY_DISPATCH_WINDOW_MS; 5000; int>0 */
        uint64_t no_output_timeout_ms;             /* TASKFERRY_NO_OUTPUT_TIMEOUT_MS; 256000; int>0 */
        uint64_t post_output_no_output_timeout_ms; /* TASKFERRY_POST_OUTPUT_NO_OUTPUT_TIMEOUT_MS; 400000; int>0 */
        uint64_t pre_output_max_ms;                /* TASKFERRY_PRE_OUTPUT_MAX_MS; 1024000 (fixed, not derived
                                                      from no_output_timeout_ms); int>0 */
        char *summary_model;                       /* TASKFERRY_SUMMARY_MODEL (set, even "", wins);
                                                      "opencode/mimo-v2.5-free" */
        bool activity_summaries_enabled;           /* TASKFERRY_ACTIVITY_SUMMARIES: "0" off, other set on; true */
        uint64_t summarizer_timeout_ms;            /* TASKFERRY_SUMMARIZER_TIMEOUT_MS; 360000; int≥0 */
        uint64_t activity_max_words;               /* TASKFERRY_ACTIVITY_MAX_WORDS; 75; int>0 */
        uint64_t advisor_session_ttl_ms;           /* TASKFERRY_ADVISOR_SESSION_TTL_MS; 1800000; int>0 */
        uint64_t watchdog_grace_ms;                /* TASKFERRY_WATCHDOG_GRACE_MS; 5000; int>0 */
        uint64_t lowerdir_stagger_ms;              /* TASKFERRY_LOWERDIR_STAGGER_MS; 3000; int≥0, 0 disables */
        bool sandbox_enabled;                      /* !TASKFERRY_DISABLE_SANDBOX ("1"/"true" disable, other set
                                                      enables); true */
        bool overlay_enabled;                      /* !TASKFERRY_DISABLE_OVERLAY, same; true */
        char **allowed_dirs;                       /* TASKFERRY_ALLOWED_DIRS ∪ config allowedDirs (deprecated alias,
                                                      already merged into rw_bind; kept for diagnostics) */
        char **rw_bind;                            /* TASKFERRY_RW_BIND ∪ config rwBind ∪ allowed_dirs; unioned with
                                                      each dispatch's rwBind */
        char **ro_bind;                            /* TASKFERRY_RO_BIND ∪ config roBind */
        char **trusted_projects;                   /* TASKFERRY_TRUSTED_PROJECTS (comma list; relative entries
                                                      dropped with a warning) ∪ config trustedProjects (absolute
                                                      paths), as written, not realpath'd: the repositories whose
                                                      .taskferry.toml roBind may reach outside them
                                                      (project-config.h) */
        int net_mode;                              /* NetMode (net-policy.h): TASKFERRY_NETWORK, else config
                                                      network.mode, else proxy; a bad value is proxy, warned */
        char **allow_hosts;                        /* TASKFERRY_ALLOW_HOSTS (comma or space list) ∪ config
                                                      network.allowHosts: the hosts every task's proxy allows
                                                      (net_rule_parse; bad entries dropped with a warning) */
        char **env_denylist;                       /* TASKFERRY_ENV_DENYLIST if set (replaces), else config */
        char **sandbox_denylist;                   /* TASKFERRY_SANDBOX_DENYLIST if set (replaces), else config
                                                      (extra deny dirs or files beside the fixed list) */
        uint64_t wait_default_timeout_ms;          /* TASKFERRY_WAIT_DEFAULT_TIMEOUT_MS; 900000; the CLI's (config.h
                                                      config_wait_default_timeout); 0: env "0", wait forever */
        uint64_t cancel_grace_ms;                  /* TASKFERRY_CANCEL_GRACE_MS; 5000; int>0 */
        char *default_executor;                    /* TASKFERRY_DEFAULT_EXECUTOR ("" → config); "pi"; a known
                                                      executor, else start error `unknown executor: <v>` */
        char *default_variant;                     /* TASKFERRY_DEFAULT_VARIANT (trimmed); "highest"; a known level,
                                                      else start error */
        uint64_t advisor_context_chars;            /* TASKFERRY_ADVISOR_CONTEXT_CHARS; 120000; the CLI's (config.h
                                                      config_advisor_context_chars) */
        char *env_file;                            /* TASKFERRY_ENV_FILE (set "" → NULL: disabled, config not
                                                      consulted), else config envFile; NULL: none. The path only:
                                                      env-file.h loads and watches it */
        bool profiling_enabled;                    /* TASKFERRY_PROFILING_ENABLED: "1"/"true" on, other set off;
                                                      false */
        ProviderLimit *provider_limits;            /* TASKFERRY_PROVIDER_LIMITS if set (replaces; "" clears), else
                                                      config providerLimits */
        size_t n_provider_limits;
        bool provider_cooldown_enabled;            /* TASKFERRY_PROVIDER_COOLDOWN: "0"/"false" off, other set on;
                                                      config providerCooldownEnabled (taskferry's addition, cooldown.h);
                                                      true */
        uint64_t max_output_file_bytes;            /* TASKFERRY_MAX_OUTPUT_FILE_BYTES; 524288; int>0, > 1048576 is a
                                                      start error */
        /* taskferry's additions: the limits of each worker's scope unit (scope.h) */
        uint64_t task_memory_max;                  /* TASKFERRY_TASK_MEMORY_MAX / config taskMemoryMax (a size:
                                                      bytes or K/M/G/T, disk_size_parse); half the physical memory;
                                                      malformed is a start error. MemoryHigh is 90% of it */
        uint64_t task_tasks_max;                   /* TASKFERRY_TASK_TASKS_MAX / taskTasksMax; 4096; int>0 */
        uint64_t task_cpu_weight;                  /* TASKFERRY_TASK_CPU_WEIGHT / taskCpuWeight; 100; 1..10000, else
                                                      a start error */
        uint64_t idle_exit_sec;                    /* TASKFERRY_IDLE_EXIT_SEC; config idleExitSec (taskferry's
                                                      addition, notify.h); SETTINGS_DEFAULT_IDLE_EXIT_SEC; int≥0, 0
                                                      never; used only when socket-activated */

        /* ---- env-only settings of this port (not in config.json) ---- */
        char **home_allow;                         /* TASKFERRY_SANDBOX_HOME_ALLOW: more home entries a sandbox sees
                                                      read-only */
        char *shim_path;                           /* resolved taskferry-shim (TASKFERRY_SHIM, next to taskferryd,
                                                      or the libexec dir) */
        uint64_t task_disk_max;                    /* TASKFERRY_TASK_DISK_MAX (disk_size_parse), 0: the default
                                                      rule of disk-budget.h */
        uint64_t task_log_max;                     /* TASKFERRY_TASK_LOG_MAX (a size, disk_size_parse);
                                                      SETTINGS_DEFAULT_TASK_LOG_MAX; at least LAUNCH_LOG_BUDGET_MIN,
                                                      else a start error: each log's budget, its head and tail
                                                      kept (log-pipe.h in the shim) */
        uint64_t watchdog_poll_ms;                 /* TASKFERRY_WATCHDOG_POLL_MS (env only); 2000; int>0 */
} Settings;

/* Resolve every setting from envp (NULL-terminated "NAME=value", usually
 * environ) and cfg (config.json as config_load() returned it; NULL = {}),
 * env > config > default. Deprecation and similar notices go to
 * *ret_warnings (without the "warning: " prefix; may be NULL). The shim
 * path is not resolved here (settings_resolve_shim).
 * Returns 0, -ENOMEM, or -EINVAL with *reason (the caller frees it; NULL on
 * success and with -ENOMEM) the start error
 * ("error: ...\nhelp: ..." or a one-line message) for: an unknown
 * TASKFERRY_DEFAULT_EXECUTOR, a defaultVariant outside the levels, a
 * malformed TASKFERRY_PROVIDER_LIMITS entry, maxOutputFileBytes > 1048576,
 * a bad TASKFERRY_TASK_DISK_MAX, TASKFERRY_TASK_MEMORY_MAX, task log budget or CPU weight. On failure *s holds what was resolved;
 * settings_done() frees it either way. */
int settings_resolve(Settings *s, json_object *cfg, char *const *envp, char ***ret_warnings, char **reason);

/* Find taskferry-shim into s->shim_path (TASKFERRY_SHIM, next to the
 * running binary, then the install libexec dir). 0, or -ENOENT with *reason
 * the sentence for the user (the caller frees it). */
int settings_resolve_shim(Settings *s, char *const *envp, char **reason);

/* The daemon's start: load config.json at config_path (config_load), then
 * settings_resolve and settings_resolve_shim with the process environment;
 * warnings are printed to stderr as "warning: ...". Errors as above (a
 * config error's text is config_load's). */
int settings_load(Settings *s, const char *config_path, char **reason);

void settings_done(Settings *s);

/* The providerLimits entry of a model ("prov/model" → "prov"; a model with
 * no '/' is its own provider), NULL if none. */
const ProviderLimit *settings_provider_limit(const Settings *s, const char *model);
