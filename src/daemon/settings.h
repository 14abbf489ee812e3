#pragma once
/* The daemon's settings: read once at start from the environment (main.c),
 * then only read. */

#include <stdbool.h>
#include <stdint.h>

/* ---- settings read once at start (spec protocol-cli.md §3.2/§3.3, env part) ---- */
typedef struct Settings {
        unsigned max_concurrent;      /* TASKFERRY_MAX_CONCURRENT_TASKS, default 4 */
        uint64_t cancel_grace_ms;     /* TASKFERRY_CANCEL_GRACE_MS, default 5000 */
        /* watchdog (lifecycle.md §6.1), all ms: */
        uint64_t no_output_timeout_ms;             /* TASKFERRY_NO_OUTPUT_TIMEOUT_MS, default 256000 */
        uint64_t post_output_no_output_timeout_ms; /* TASKFERRY_POST_OUTPUT_NO_OUTPUT_TIMEOUT_MS, default 400000 */
        uint64_t pre_output_max_ms;                /* TASKFERRY_PRE_OUTPUT_MAX_MS, default 1024000 (fixed, §10) */
        uint64_t watchdog_poll_ms;                 /* TASKFERRY_WATCHDOG_POLL_MS (env only), default 2000 */
        uint64_t watchdog_grace_ms;                /* TASKFERRY_WATCHDOG_GRACE_MS, default 5000 */
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
} Settings;
