/* settings.c: env > config > default for every config.json key, with the
 * parsing rules of each (settings.h). */

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "json-util.h"
#include "core/settings.h"
#include "unit.h"
#include "util.h"

static json_object *cfg_of(const char *text) {
        json_object *o = NULL;
        ck_assert_int_eq(json_parse_strict(text, strlen(text), &o), 0);
        return o;
}

/* Resolve with cfg text (NULL: none) and a NULL-terminated env list. */
static int resolve(Settings *s, const char *cfg_text, char *const *env, char ***warnings, char **err) {
        _cleanup_json_ json_object *cfg = cfg_text ? cfg_of(cfg_text) : NULL;
        *s = (Settings) {};
        return settings_resolve(s, cfg, env, warnings, err);
}

static void assert_list(char **l, const char *const *want) {
        size_t n = 0;
        for (; want[n]; n++) {
                ck_assert_ptr_nonnull(l);
                ck_assert_ptr_nonnull(l[n]);
                ck_assert_str_eq(l[n], want[n]);
        }
        ck_assert(!l || !l[n]);
}

/* the scope limits (scope.h): env > config > default, sizes as
 * disk_size_parse reads them, a bad size or CPU weight stops the start */
START_TEST(scope_limits) {
        Settings s;
        _cleanup_free_ char *err = NULL;
        char *none[] = {NULL};
        ck_assert_int_eq(resolve(&s, NULL, none, NULL, &err), 0);
        long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
        ck_assert_uint_eq(s.task_memory_max, (uint64_t) pages * (uint64_t) psize / 2);
        ck_assert_uint_eq(s.task_tasks_max, 4096);
        ck_assert_uint_eq(s.task_cpu_weight, 100);
        settings_done(&s);
        const char *cfg = "{\"taskMemoryMax\": \"3G\", \"taskTasksMax\": 64, \"taskCpuWeight\": 20}";
        ck_assert_int_eq(resolve(&s, cfg, none, NULL, &err), 0);
        ck_assert_uint_eq(s.task_memory_max, UINT64_C(3) << 30);
        ck_assert_uint_eq(s.task_tasks_max, 64);
        ck_assert_uint_eq(s.task_cpu_weight, 20);
        settings_done(&s);
        char *env[] = {"TASKFERRY_TASK_MEMORY_MAX=512M", "TASKFERRY_TASK_TASKS_MAX=100", "TASKFERRY_TASK_CPU_WEIGHT=300",
                       NULL};
        ck_assert_int_eq(resolve(&s, cfg, env, NULL, &err), 0);
        ck_assert_uint_eq(s.task_memory_max, UINT64_C(512) << 20);
        ck_assert_uint_eq(s.task_tasks_max, 100);
        ck_assert_uint_eq(s.task_cpu_weight, 300);
        settings_done(&s);
        char *bad_mem[] = {"TASKFERRY_TASK_MEMORY_MAX=8X", NULL};
        ck_assert_int_eq(resolve(&s, NULL, bad_mem, NULL, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "TASKFERRY_TASK_MEMORY_MAX must be a positive size"));
        settings_done(&s);
        free(err);
        err = NULL;
        ck_assert_int_eq(resolve(&s, "{\"taskMemoryMax\": \"0\"}", none, NULL, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "config taskMemoryMax"));
        settings_done(&s);
        free(err);
        err = NULL;
        char *bad_w[] = {"TASKFERRY_TASK_CPU_WEIGHT=10001", NULL};
        ck_assert_int_eq(resolve(&s, NULL, bad_w, NULL, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "CPU weight must be from 1 through 10000"));
        settings_done(&s);
}
END_TEST

START_TEST(defaults) {
        Settings s;
        _cleanup_free_ char *err = NULL;
        char *env[] = {NULL};
        ck_assert_int_eq(resolve(&s, NULL, env, NULL, &err), 0);
        ck_assert_uint_eq(s.max_concurrent_tasks, 4);
        ck_assert_uint_eq(s.max_dispatches_per_window, 2);
        ck_assert_uint_eq(s.dispatch_window_ms, 5000);
        ck_assert_uint_eq(s.no_output_timeout_ms, 256000);
        ck_assert_uint_eq(s.post_output_no_output_timeout_ms, 400000);
        ck_assert_uint_eq(s.pre_output_max_ms, 1024000);
        ck_assert_str_eq(s.summary_model, "opencode/mimo-v2.5-free");
        ck_assert(s.activity_summaries_enabled);
        ck_assert_uint_eq(s.summarizer_timeout_ms, 360000);
        ck_assert_uint_eq(s.activity_max_words, 75);
        ck_assert_uint_eq(s.advisor_session_ttl_ms, 1800000);
        ck_assert_uint_eq(s.watchdog_grace_ms, 5000);
        ck_assert_uint_eq(s.lowerdir_stagger_ms, 3000);
        ck_assert_uint_eq(s.idle_exit_sec, 300);
        ck_assert(s.sandbox_enabled);
        ck_assert(s.overlay_enabled);
        ck_assert_ptr_null(s.allowed_dirs);
        ck_assert_ptr_null(s.rw_bind);
        ck_assert_ptr_null(s.ro_bind);
        ck_assert_ptr_null(s.env_denylist);
        ck_assert_ptr_null(s.sandbox_denylist);
        ck_assert_uint_eq(s.wait_default_timeout_ms, 900000);
        ck_assert_uint_eq(s.cancel_grace_ms, 5000);
        ck_assert_str_eq(s.default_executor, "pi");
        ck_assert_str_eq(s.default_variant, "highest");
        ck_assert_uint_eq(s.advisor_context_chars, 120000);
        ck_assert_ptr_null(s.env_file);
        ck_assert(!s.profiling_enabled);
        ck_assert_uint_eq(s.n_provider_limits, 0);
        ck_assert_uint_eq(s.max_output_file_bytes, 524288);
        ck_assert_uint_eq(s.task_disk_max, 0);
        settings_done(&s);
}
END_TEST

/* Every numeric key: config sets it, env overrides it, an invalid env falls
 * back to the config, a type-valid but unusable config falls back to the
 * default. */
START_TEST(every_number_env_over_config_over_default) {
        static const struct {
                const char *key, *env;
                size_t off;
                uint64_t def;
                bool nonneg;
        } keys[] = {
#define K(key, env, field, def, nonneg) {key, env, offsetof(Settings, field), def, nonneg}
                K("maxConcurrentTasks", "TASKFERRY_MAX_CONCURRENT_TASKS", max_concurrent_tasks, 4, false),
                K("maxDispatchesPerWindow", "TASKFERRY_MAX_DISPATCHES_PER_WINDOW", max_dispatches_per_window, 2, false),
                K("dispatchWindowMs", "TASKFERRY_DISPATCH_WINDOW_MS", dispatch_window_ms, 5000, false),
                K("noOutputTimeoutMs", "TASKFERRY_NO_OUTPUT_TIMEOUT_MS", no_output_timeout_ms, 256000, false),
                K("postOutputNoOutputTimeoutMs", "TASKFERRY_POST_OUTPUT_NO_OUTPUT_TIMEOUT_MS",
                  post_output_no_output_timeout_ms, 400000, false),
                K("preOutputMaxMs", "TASKFERRY_PRE_OUTPUT_MAX_MS", pre_output_max_ms, 1024000, false),
                K("summarizerTimeoutMs", "TASKFERRY_SUMMARIZER_TIMEOUT_MS", summarizer_timeout_ms, 360000, true),
                K("activityMaxWords", "TASKFERRY_ACTIVITY_MAX_WORDS", activity_max_words, 75, false),
                K("advisorSessionTtlMs", "TASKFERRY_ADVISOR_SESSION_TTL_MS", advisor_session_ttl_ms, 1800000, false),
                K("watchdogGraceMs", "TASKFERRY_WATCHDOG_GRACE_MS", watchdog_grace_ms, 5000, false),
                K("lowerdirStaggerMs", "TASKFERRY_LOWERDIR_STAGGER_MS", lowerdir_stagger_ms, 3000, true),
                K("cancelGraceMs", "TASKFERRY_CANCEL_GRACE_MS", cancel_grace_ms, 5000, false),
                K("maxOutputFileBytes", "TASKFERRY_MAX_OUTPUT_FILE_BYTES", max_output_file_bytes, 524288, false),
                K("idleExitSec", "TASKFERRY_IDLE_EXIT_SEC", idle_exit_sec, 300, true),
#undef K
        };
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                ck_assert_ptr_nonnull(config_key_find(keys[i].key));
                ck_assert_str_eq(config_key_find(keys[i].key)->env, keys[i].env);
                Settings s;
                _cleanup_free_ char *cfg = strdup_printf("{\"%s\": 77}", keys[i].key);
                _cleanup_free_ char *bad_cfg = strdup_printf("{\"%s\": 1.5}", keys[i].key);
                _cleanup_free_ char *env_ok = strdup_printf("%s=1e3", keys[i].env);
                _cleanup_free_ char *env_bad = strdup_printf("%s=12abc", keys[i].env);
                _cleanup_free_ char *env_empty = strdup_printf("%s=", keys[i].env);
                char *none[] = {NULL}, *ok[] = {env_ok, NULL}, *bad[] = {env_bad, NULL}, *empty[] = {env_empty, NULL};
                char *err = NULL;
#define FIELD(s) (*(uint64_t *) ((char *) &(s) + keys[i].off))
                ck_assert_int_eq(resolve(&s, cfg, none, NULL, &err), 0);
                ck_assert_msg(FIELD(s) == 77, "%s from config", keys[i].key);
                settings_done(&s);
                ck_assert_int_eq(resolve(&s, cfg, ok, NULL, &err), 0);
                ck_assert_msg(FIELD(s) == 1000, "%s from env", keys[i].key);
                settings_done(&s);
                ck_assert_int_eq(resolve(&s, cfg, bad, NULL, &err), 0);
                ck_assert_msg(FIELD(s) == 77, "%s: invalid env falls back to config", keys[i].key);
                settings_done(&s);
                ck_assert_int_eq(resolve(&s, bad_cfg, bad, NULL, &err), 0);
                ck_assert_msg(FIELD(s) == keys[i].def, "%s: invalid both → default", keys[i].key);
                settings_done(&s);
                ck_assert_int_eq(resolve(&s, cfg, empty, NULL, &err), 0);
                ck_assert_msg(FIELD(s) == (keys[i].nonneg ? 0 : 77), "%s: env \"\" is Number 0", keys[i].key);
                settings_done(&s);
#undef FIELD
        }
}
END_TEST

START_TEST(booleans) {
        Settings s;
        char *err = NULL;
        static const char cfg_off[] = "{\"sandboxEnabled\": false, \"overlayEnabled\": false,"
                                      " \"activitySummariesEnabled\": false, \"profilingEnabled\": true}";
        char *none[] = {NULL};
        ck_assert_int_eq(resolve(&s, cfg_off, none, NULL, &err), 0);
        ck_assert(!s.sandbox_enabled && !s.overlay_enabled && !s.activity_summaries_enabled && s.profiling_enabled);
        settings_done(&s);
        /* any set env value decides: "0" re-enables the sandbox the config disabled */
        char *zero[] = {"TASKFERRY_DISABLE_SANDBOX=0", "TASKFERRY_DISABLE_OVERLAY=no", "TASKFERRY_ACTIVITY_SUMMARIES=1",
                        "TASKFERRY_PROFILING_ENABLED=yes", NULL};
        ck_assert_int_eq(resolve(&s, cfg_off, zero, NULL, &err), 0);
        ck_assert(s.sandbox_enabled && s.overlay_enabled && s.activity_summaries_enabled && !s.profiling_enabled);
        settings_done(&s);
        char *on[] = {"TASKFERRY_DISABLE_SANDBOX=1", "TASKFERRY_DISABLE_OVERLAY=true", "TASKFERRY_ACTIVITY_SUMMARIES=0",
                      "TASKFERRY_PROFILING_ENABLED=true", NULL};
        ck_assert_int_eq(resolve(&s, "{\"sandboxEnabled\": true}", on, NULL, &err), 0);
        ck_assert(!s.sandbox_enabled && !s.overlay_enabled && !s.activity_summaries_enabled && s.profiling_enabled);
        settings_done(&s);
        char *empty[] = {"TASKFERRY_DISABLE_SANDBOX=", "TASKFERRY_ACTIVITY_SUMMARIES=", "TASKFERRY_PROFILING_ENABLED=1", NULL};
        ck_assert_int_eq(resolve(&s, cfg_off, empty, NULL, &err), 0);
        ck_assert(s.sandbox_enabled && s.activity_summaries_enabled && s.profiling_enabled);
        ck_assert(!s.overlay_enabled); /* no env: the config's */
        settings_done(&s);
}
END_TEST

START_TEST(strings) {
        Settings s;
        char *err = NULL;
        static const char cfg[] = "{\"summaryModel\": \"cfg/model\", \"defaultExecutor\": \"opencode\","
                                  " \"defaultVariant\": \" low \", \"envFile\": \"/cfg/env\"}";
        char *none[] = {NULL};
        ck_assert_int_eq(resolve(&s, cfg, none, NULL, &err), 0);
        ck_assert_str_eq(s.summary_model, "cfg/model");
        ck_assert_str_eq(s.default_executor, "opencode");
        ck_assert_str_eq(s.default_variant, "low");
        ck_assert_str_eq(s.env_file, "/cfg/env");
        settings_done(&s);
        /* summaryModel `??` (empty taken); defaultExecutor `||` (empty → config);
         * envFile "" disables without falling through */
        char *empty[] = {"TASKFERRY_SUMMARY_MODEL=", "TASKFERRY_DEFAULT_EXECUTOR=", "TASKFERRY_ENV_FILE=", NULL};
        ck_assert_int_eq(resolve(&s, cfg, empty, NULL, &err), 0);
        ck_assert_str_eq(s.summary_model, "");
        ck_assert_str_eq(s.default_executor, "opencode");
        ck_assert_ptr_null(s.env_file);
        settings_done(&s);
        char *set[] = {"TASKFERRY_SUMMARY_MODEL=env/m", "TASKFERRY_DEFAULT_EXECUTOR=shell",
                       "TASKFERRY_DEFAULT_VARIANT=max ", "TASKFERRY_ENV_FILE=/env/file", NULL};
        ck_assert_int_eq(resolve(&s, cfg, set, NULL, &err), 0);
        ck_assert_str_eq(s.summary_model, "env/m");
        ck_assert_str_eq(s.default_executor, "shell");
        ck_assert_str_eq(s.default_variant, "max");
        ck_assert_str_eq(s.env_file, "/env/file");
        settings_done(&s);
}
END_TEST

START_TEST(start_errors) {
        Settings s;
        char *err = NULL;
        char *ex[] = {"TASKFERRY_DEFAULT_EXECUTOR=claude", NULL};
        ck_assert_int_eq(resolve(&s, NULL, ex, NULL, &err), -EINVAL);
        ck_assert_str_eq(err, "unknown executor: claude");
        free(err), err = NULL;
        settings_done(&s);
        char *var[] = {"TASKFERRY_DEFAULT_VARIANT=extreme", NULL};
        ck_assert_int_eq(resolve(&s, "{\"defaultVariant\": \"low\"}", var, NULL, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "defaultVariant must be one of highest, off, minimal, low, medium, high, xhigh, max"));
        free(err), err = NULL;
        settings_done(&s);
        char *mo[] = {"TASKFERRY_MAX_OUTPUT_FILE_BYTES=1048577", NULL};
        ck_assert_int_eq(resolve(&s, NULL, mo, NULL, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "maxOutputFileBytes must not exceed 1048576"));
        free(err), err = NULL;
        settings_done(&s);
        char *none[] = {NULL};
        ck_assert_int_eq(resolve(&s, "{\"maxOutputFileBytes\": 2000000}", none, NULL, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "maxOutputFileBytes must not exceed 1048576"));
        free(err), err = NULL;
        settings_done(&s);
        ck_assert_int_eq(resolve(&s, "{\"maxOutputFileBytes\": 1048576}", none, NULL, &err), 0);
        ck_assert_uint_eq(s.max_output_file_bytes, 1048576);
        settings_done(&s);
}
END_TEST

START_TEST(lists_union_and_replace) {
        Settings s;
        char *err = NULL;
        _cleanup_strv_free_ char **warnings = NULL;
        static const char cfg[] = "{\"rwBind\": \"/c1, /shared\", \"allowedDirs\": \"/ca\", \"roBind\": \"/r2\","
                                  " \"envDenylist\": \"CFG_A,CFG_B\", \"sandboxDenylist\": \"/cfg/deny\"}";
        char *env[] = {"TASKFERRY_RW_BIND=/e1,/shared", "TASKFERRY_ALLOWED_DIRS=/ea", "TASKFERRY_RO_BIND=/r1",
                       "TASKFERRY_ENV_DENYLIST=ENV_A", "TASKFERRY_SANDBOX_DENYLIST=", NULL};
        ck_assert_int_eq(resolve(&s, cfg, env, &warnings, &err), 0);
        assert_list(s.rw_bind, (const char *const[]) {"/e1", "/shared", "/c1", "/ea", "/ca", NULL});
        assert_list(s.allowed_dirs, (const char *const[]) {"/ea", "/ca", NULL});
        assert_list(s.ro_bind, (const char *const[]) {"/r1", "/r2", NULL});
        assert_list(s.env_denylist, (const char *const[]) {"ENV_A", NULL});
        ck_assert_ptr_null(s.sandbox_denylist); /* env set (empty) replaces the config's */
        ck_assert_uint_eq(strv_length(warnings), 1);
        ck_assert_ptr_nonnull(strstr(warnings[0], "deprecated"));
        settings_done(&s);
        strv_free(warnings), warnings = NULL;
        char *none[] = {NULL};
        ck_assert_int_eq(resolve(&s, "{\"envDenylist\": \"CFG_A\", \"rwBind\": \"/x\"}", none, &warnings, &err), 0);
        assert_list(s.env_denylist, (const char *const[]) {"CFG_A", NULL});
        assert_list(s.rw_bind, (const char *const[]) {"/x", NULL});
        ck_assert_ptr_null(warnings); /* no allowedDirs anywhere: no deprecation notice */
        settings_done(&s);
}
END_TEST

START_TEST(provider_limits) {
        Settings s;
        char *err = NULL;
        static const char cfg[] = "{\"providerLimits\": {\"zai\": {\"maxConcurrentTasks\": 1, \"maxDispatchesPerWindow\": 3},"
                                  " \"openai\": {\"maxDispatchesPerWindow\": 2}}}";
        char *none[] = {NULL};
        ck_assert_int_eq(resolve(&s, cfg, none, NULL, &err), 0);
        ck_assert_uint_eq(s.n_provider_limits, 2);
        const ProviderLimit *z = settings_provider_limit(&s, "zai/glm-5");
        ck_assert_ptr_nonnull(z);
        ck_assert_uint_eq(z->max_concurrent_tasks, 1);
        ck_assert_uint_eq(z->max_dispatches_per_window, 3);
        const ProviderLimit *o = settings_provider_limit(&s, "openai/gpt");
        ck_assert_uint_eq(o->max_concurrent_tasks, 0);
        ck_assert_uint_eq(o->max_dispatches_per_window, 2);
        ck_assert_ptr_null(settings_provider_limit(&s, "zaix/m"));
        ck_assert_ptr_null(settings_provider_limit(&s, NULL));
        settings_done(&s);
        /* env replaces wholesale */
        char *env[] = {"TASKFERRY_PROVIDER_LIMITS= anthropic:2:5 , zai:4", NULL};
        ck_assert_int_eq(resolve(&s, cfg, env, NULL, &err), 0);
        ck_assert_uint_eq(s.n_provider_limits, 2);
        ck_assert_ptr_null(settings_provider_limit(&s, "openai/gpt"));
        ck_assert_uint_eq(settings_provider_limit(&s, "anthropic/x")->max_dispatches_per_window, 5);
        ck_assert_uint_eq(settings_provider_limit(&s, "zai/x")->max_concurrent_tasks, 4);
        ck_assert_uint_eq(settings_provider_limit(&s, "zai/x")->max_dispatches_per_window, 0);
        settings_done(&s);
        /* "" clears */
        char *clear[] = {"TASKFERRY_PROVIDER_LIMITS=", NULL};
        ck_assert_int_eq(resolve(&s, cfg, clear, NULL, &err), 0);
        ck_assert_uint_eq(s.n_provider_limits, 0);
        settings_done(&s);
        static const char *const bad[] = {"zai", "zai:", "zai:0", "zai:x", ":2", "zai:2:0", "zai:2:3:4", "zai:-1", "zai:1.5"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *e = strdup_printf("TASKFERRY_PROVIDER_LIMITS=ok:1,%s", bad[i]);
                char *benv[] = {e, NULL};
                ck_assert_int_eq(resolve(&s, NULL, benv, NULL, &err), -EINVAL);
                _cleanup_free_ char *want = strdup_printf("error: malformed TASKFERRY_PROVIDER_LIMITS entry \"%s\"", bad[i]);
                ck_assert_msg(startswith(err, want), "%s: %s", bad[i], err);
                ck_assert_ptr_nonnull(strstr(err, "\nhelp: use provider:maxConcurrentTasks[:maxDispatchesPerWindow], comma-separated"));
                free(err), err = NULL;
                settings_done(&s);
        }
}
END_TEST

START_TEST(cli_side_keys) {
        Settings s;
        char *err = NULL;
        char *none[] = {NULL};
        ck_assert_int_eq(resolve(&s, "{\"waitDefaultTimeoutMs\": 0, \"advisorContextChars\": 900}", none, NULL, &err), 0);
        ck_assert_uint_eq(s.wait_default_timeout_ms, 900000); /* config 0 ignored */
        ck_assert_uint_eq(s.advisor_context_chars, 900);
        settings_done(&s);
        char *env[] = {"TASKFERRY_WAIT_DEFAULT_TIMEOUT_MS=0", "TASKFERRY_ADVISOR_CONTEXT_CHARS=50", NULL};
        ck_assert_int_eq(resolve(&s, "{\"waitDefaultTimeoutMs\": 10}", env, NULL, &err), 0);
        ck_assert_uint_eq(s.wait_default_timeout_ms, 0); /* env "0": no timeout */
        ck_assert_uint_eq(s.advisor_context_chars, 50);
        settings_done(&s);
}
END_TEST

START_TEST(load_reads_the_file_once_and_fails_loudly) {
        char *dir = tf_tmpdir_new("test-settings");
        _cleanup_free_ char *p = strdup_printf("%s/config.json", dir);
        static const char good[] = "{\"maxConcurrentTasks\": 2, \"cancelGraceMs\": 9}";
        static const char bad[] = "{\"maxConcurrentTasks\": \"2\"}";
        ck_assert_int_eq(write_file_atomic(p, good, strlen(good), 0600), 0);
        unsetenv("TASKFERRY_MAX_CONCURRENT_TASKS");
        unsetenv("TASKFERRY_CANCEL_GRACE_MS");
        setenv("TASKFERRY_SHIM", "/nonexistent/shim", 1);
        Settings s = {};
        char *err = NULL;
        int r = settings_load(&s, p, &err);
        ck_assert_msg(r == 0, "%d %s", r, strempty(err));
        ck_assert_uint_eq(s.max_concurrent_tasks, 2);
        ck_assert_uint_eq(s.cancel_grace_ms, 9);
        ck_assert_str_eq(s.shim_path, "/nonexistent/shim");
        settings_done(&s);
        ck_assert_int_eq(write_file_atomic(p, bad, strlen(bad), 0600), 0);
        ck_assert_int_eq(settings_load(&s, p, &err), -EINVAL);
        ck_assert(startswith(err, "error: config key \"maxConcurrentTasks\" in "));
        free(err);
        settings_done(&s);
        tf_tmpdir_free(dir);
}
END_TEST

TF_MAIN("settings", "settings", NULL, NULL, 0, defaults, every_number_env_over_config_over_default, booleans, strings,
        start_errors, lists_union_and_replace, provider_limits, scope_limits, cli_side_keys,
        load_reads_the_file_once_and_fails_loudly)
