#pragma once
/* The daemon's settings: read once at start from the environment (main.c),
 * then only read. */

#include <stdbool.h>
#include <stdint.h>

/* One entry of providerLimits (spec lifecycle.md §5): 0 = unlimited. */
typedef struct ProviderLimit {
        char *provider;
        uint64_t max_concurrent_tasks;
        uint64_t max_dispatches_per_window;
} ProviderLimit;

/* ---- settings read once at start (spec protocol-cli.md §3.2/§3.3, env part) ---- */
typedef struct Settings {
        unsigned max_concurrent;      /* TASKFERRY_MAX_CONCURRENT_TASKS, default 4 */
        uint64_t cancel_grace_ms;     /* TASKFERRY_CANCEL_GRACE_MS, default 5000 */
        bool sandbox_enabled;         /* !TASKFERRY_DISABLE_SANDBOX */
        bool overlay_enabled;         /* !TASKFERRY_DISABLE_OVERLAY */
        char *default_executor;       /* TASKFERRY_DEFAULT_EXECUTOR || "pi" */
        char *default_variant;        /* TASKFERRY_DEFAULT_VARIANT || "highest" */
        char **env_denylist;          /* TASKFERRY_ENV_DENYLIST */
        char **sandbox_denylist;      /* TASKFERRY_SANDBOX_DENYLIST (extra deny dirs or files) */
        char **rw_bind, **ro_bind;    /* TASKFERRY_RW_BIND / TASKFERRY_RO_BIND: unioned with each dispatch's (spec §2.4) */
        char **home_allow;            /* TASKFERRY_SANDBOX_HOME_ALLOW: more home entries a sandbox sees read-only */
        char *shim_path;              /* resolved taskferry-shim */
        uint64_t task_disk_max;       /* TASKFERRY_TASK_DISK_MAX (disk_size_parse), 0: the default rule
                                         of disk-budget.h */
        /* the scheduler (lifecycle.md §5; scheduler.c) */
        uint64_t max_dispatches_per_window; /* TASKFERRY_MAX_DISPATCHES_PER_WINDOW, default 2 */
        uint64_t dispatch_window_ms;        /* TASKFERRY_DISPATCH_WINDOW_MS, default 5000 */
        uint64_t lowerdir_stagger_ms;       /* TASKFERRY_LOWERDIR_STAGGER_MS, default 3000, 0 disables */
        ProviderLimit *provider_limits;     /* TASKFERRY_PROVIDER_LIMITS (provider_limits_parse) */
        size_t n_provider_limits;
        bool provider_cooldown_enabled;     /* TASKFERRY_PROVIDER_COOLDOWN / providerCooldownEnabled, default
                                               true; "0"/"false" disables (cooldown.h) */
} Settings;
