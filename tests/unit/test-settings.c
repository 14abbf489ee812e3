/* settings.c: env > config > default for every config.json key, with the
 * parsing rules of each (settings.h). */

#include <check.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "json-util.h"
#include "core/settings.h"
#include "unit.h"
#include "fileio.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"

static json_object *cfg_of(const char *text) {
        json_object *o = NULL;
        ck_assert_int_eq(json_parse_strict(text, strlen(text), &o), 0);
        return o;
}

/* Resolve with cfg text (NULL: none) and a NULL-terminated env list (NULL:
 * an empty one). */
static int resolve(Settings *s, const char *cfg_text, char *const *env, char ***warnings, char **err) {
        _cleanup_json_ json_object *cfg = cfg_text ? cfg_of(cfg_text) : NULL;
        *s = (Settings) {};
        return settings_resolve(s, cfg, env ? env : (char *const[]) {NULL}, warnings, err);
}

/* The same, which must succeed (a failure names the config and the first
 * env entry); the caller settings_done()s *s. */
static void resolved(Settings *s, const char *cfg_text, char *const *env) {
        _cleanup_free_ char *err = NULL;
        int r = resolve(s, cfg_text, env, NULL, &err);
        ck_assert_msg(r == 0, "%s, %s: %d %s", strnull(cfg_text), env ? strnull(env[0]) : "(no env)", r, strnull(err));
}

/* Resolving with cfg_text (NULL: none) and env stops the start (-EINVAL)
 * with a message holding want. */
static void refused(const char *cfg_text, char *const *env, const char *want) {
        Settings s;
        _cleanup_free_ char *err = NULL;
        ck_assert_int_eq(resolve(&s, cfg_text, env, NULL, &err), -EINVAL);
        ck_assert_msg(err && strstr(err, want), "%s, %s: %s, want %s", strnull(cfg_text), strnull(env[0]), strnull(err),
                      want);
        settings_done(&s);
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

/* Every numeric config key: its env variable, its Settings field (a
 * uint64_t), its default, and whether an empty env value counts (as Number
 * 0) rather than falling back to the config. */
static const struct {
        const char *key, *env;
        size_t off;
        uint64_t def;
        bool nonneg;
} number_keys[] = {
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

/* Settings s's field of number_keys[i]. */
static uint64_t number_field(const Settings *s, size_t i) {
        return *(const uint64_t *) ((const char *) s + number_keys[i].off);
}

/* the scope limits (scope.h): env > config > default, sizes as
 * disk_size_parse reads them, a bad size or CPU weight stops the start */
START_TEST(scope_limits) {
        Settings s;
        _cleanup_free_ char *err = NULL;
        char *none[] = {NULL};
        resolved(&s, NULL, NULL);
        long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
        ck_assert_uint_eq(s.task_memory_max, (uint64_t) pages * (uint64_t) psize / 2);
        ck_assert_uint_eq(s.task_tasks_max, 4096);
        ck_assert_uint_eq(s.task_cpu_weight, 100);
        settings_done(&s);
        const char *cfg = "{\"taskMemoryMax\": \"3G\", \"taskTasksMax\": 64, \"taskCpuWeight\": 20}";
        resolved(&s, cfg, NULL);
        ck_assert_uint_eq(s.task_memory_max, UINT64_C(3) << 30);
        ck_assert_uint_eq(s.task_tasks_max, 64);
        ck_assert_uint_eq(s.task_cpu_weight, 20);
        settings_done(&s);
        char *env[] = {"TASKFERRY_TASK_MEMORY_MAX=512M", "TASKFERRY_TASK_TASKS_MAX=100", "TASKFERRY_TASK_CPU_WEIGHT=300",
                       NULL};
        resolved(&s, cfg, env);
        ck_assert_uint_eq(s.task_memory_max, UINT64_C(512) << 20);
        ck_assert_uint_eq(s.task_tasks_max, 100);
        ck_assert_uint_eq(s.task_cpu_weight, 300);
        settings_done(&s);
        char *bad_mem[] = {"TASKFERRY_TASK_MEMORY_MAX=8X", NULL};
        refused(NULL, bad_mem, "TASKFERRY_TASK_MEMORY_MAX must be a positive size");
        refused("{\"taskMemoryMax\": \"0\"}", none, "config taskMemoryMax");
        char *bad_w[] = {"TASKFERRY_TASK_CPU_WEIGHT=10001", NULL};
        refused(NULL, bad_w, "CPU weight must be from 1 through 10000");
        /* the log's budget: 256M, a size of at least 1M from the environment */
        resolved(&s, NULL, NULL);
        ck_assert_uint_eq(s.task_log_max, UINT64_C(256) << 20);
        settings_done(&s);
        char *log_env[] = {"TASKFERRY_TASK_LOG_MAX=64M", NULL};
        resolved(&s, NULL, log_env);
        ck_assert_uint_eq(s.task_log_max, UINT64_C(64) << 20);
        settings_done(&s);
        char *bad_log[] = {"TASKFERRY_TASK_LOG_MAX=63M", NULL};
        refused(NULL, bad_log, "TASKFERRY_TASK_LOG_MAX must be a size of at least 64M");
        char *bad_log2[] = {"TASKFERRY_TASK_LOG_MAX=lots", NULL};
        refused(NULL, bad_log2, "TASKFERRY_TASK_LOG_MAX must be a size of at least 64M");
}
END_TEST

START_TEST(defaults) {
        Settings s;
        _cleanup_free_ char *err = NULL;
        char *env[] = {NULL};
        resolved(&s, NULL, env);
        /* the numbers' defaults: number_keys */
        for (size_t i = 0; i < ELEMENTSOF(number_keys); i++)
                ck_assert_msg(number_field(&s, i) == number_keys[i].def, "%s: %" PRIu64 ", want %" PRIu64,
                              number_keys[i].key, number_field(&s, i), number_keys[i].def);
        ck_assert_str_eq(s.summary_model, "opencode/mimo-v2.5-free");
        ck_assert(s.activity_summaries_enabled);
        ck_assert(s.sandbox_enabled);
        ck_assert(s.overlay_enabled);
        ck_assert_ptr_null(s.allowed_dirs);
        ck_assert_ptr_null(s.rw_bind);
        ck_assert_ptr_null(s.ro_bind);
        ck_assert_ptr_null(s.trusted_projects);
        ck_assert_ptr_null(s.env_denylist);
        ck_assert_ptr_null(s.sandbox_denylist);
        ck_assert_uint_eq(s.wait_default_timeout_ms, 900000);
        ck_assert_str_eq(s.default_executor, "pi");
        ck_assert_str_eq(s.default_variant, "highest");
        ck_assert_uint_eq(s.advisor_context_chars, 120000);
        ck_assert_ptr_null(s.env_file);
        ck_assert(!s.profiling_enabled);
        ck_assert_uint_eq(s.n_provider_limits, 0);
        ck_assert_uint_eq(s.task_disk_max, 0);
        settings_done(&s);
}
END_TEST

/* Each numeric key: config sets it, env overrides it, an invalid env falls
 * back to the config, a type-valid but unusable config falls back to the
 * default. */
START_TEST(every_number_env_over_config_over_default) {
        const char *key = number_keys[_i].key, *env = number_keys[_i].env;
        ck_assert_ptr_nonnull(config_key_find(key));
        ck_assert_str_eq(config_key_find(key)->env, env);
        Settings s;
        _cleanup_free_ char *cfg = strdup_printf("{\"%s\": 77}", key);
        _cleanup_free_ char *bad_cfg = strdup_printf("{\"%s\": 1.5}", key);
        _cleanup_free_ char *env_ok = strdup_printf("%s=1e3", env);
        _cleanup_free_ char *env_bad = strdup_printf("%s=12abc", env);
        _cleanup_free_ char *env_empty = strdup_printf("%s=", env);
        char *ok[] = {env_ok, NULL}, *bad[] = {env_bad, NULL}, *empty[] = {env_empty, NULL};
        resolved(&s, cfg, NULL);
        ck_assert_msg(number_field(&s, _i) == 77, "%s from config", key);
        settings_done(&s);
        resolved(&s, cfg, ok);
        ck_assert_msg(number_field(&s, _i) == 1000, "%s from env", key);
        settings_done(&s);
        resolved(&s, cfg, bad);
        ck_assert_msg(number_field(&s, _i) == 77, "%s: invalid env falls back to config", key);
        settings_done(&s);
        resolved(&s, bad_cfg, bad);
        ck_assert_msg(number_field(&s, _i) == number_keys[_i].def, "%s: invalid both → default", key);
        settings_done(&s);
        resolved(&s, cfg, empty);
        ck_assert_msg(number_field(&s, _i) == (number_keys[_i].nonneg ? 0 : 77), "%s: env \"\" is Number 0", key);
        settings_done(&s);
}
END_TEST

/* The four booleans resolved from cfg_text and env. */
static void booleans_are(const char *cfg_text, char *const *env, bool sandbox, bool overlay, bool activity,
                         bool profiling) {
        Settings s;
        resolved(&s, cfg_text, env);
        ck_assert_msg(s.sandbox_enabled == sandbox && s.overlay_enabled == overlay &&
                              s.activity_summaries_enabled == activity && s.profiling_enabled == profiling,
                      "%s, %s: sandbox %d overlay %d activity %d profiling %d", cfg_text, env ? env[0] : "(no env)",
                      s.sandbox_enabled, s.overlay_enabled, s.activity_summaries_enabled, s.profiling_enabled);
        settings_done(&s);
}

START_TEST(booleans) {
        static const char cfg_off[] = "{\"sandboxEnabled\": false, \"overlayEnabled\": false,"
                                      " \"activitySummariesEnabled\": false, \"profilingEnabled\": true}";
        booleans_are(cfg_off, NULL, false, false, false, true);
        /* any set env value decides: "0" re-enables the sandbox the config disabled */
        char *zero[] = {"TASKFERRY_DISABLE_SANDBOX=0", "TASKFERRY_DISABLE_OVERLAY=no", "TASKFERRY_ACTIVITY_SUMMARIES=1",
                        "TASKFERRY_PROFILING_ENABLED=yes", NULL};
        booleans_are(cfg_off, zero, true, true, true, false);
        char *on[] = {"TASKFERRY_DISABLE_SANDBOX=1", "TASKFERRY_DISABLE_OVERLAY=true", "TASKFERRY_ACTIVITY_SUMMARIES=0",
                      "TASKFERRY_PROFILING_ENABLED=true", NULL};
        booleans_are("{\"sandboxEnabled\": true}", on, false, false, false, true);
        /* no TASKFERRY_DISABLE_OVERLAY: the config's */
        char *empty[] = {"TASKFERRY_DISABLE_SANDBOX=", "TASKFERRY_ACTIVITY_SUMMARIES=", "TASKFERRY_PROFILING_ENABLED=1", NULL};
        booleans_are(cfg_off, empty, true, false, true, true);
}
END_TEST

/* The strings resolved from cfg_text and env: summaryModel,
 * defaultExecutor, defaultVariant (NULL: not checked), envFile (NULL:
 * none). */
static void strings_are(const char *cfg_text, char *const *env, const char *model, const char *executor,
                        const char *variant, const char *env_file) {
        Settings s;
        resolved(&s, cfg_text, env);
        const char *what = env ? env[0] : "(no env)";
        ck_assert_msg(streq(s.summary_model, model), "%s: summaryModel %s, want %s", what, s.summary_model, model);
        ck_assert_msg(streq(s.default_executor, executor), "%s: defaultExecutor %s, want %s", what, s.default_executor,
                      executor);
        if (variant)
                ck_assert_msg(streq(s.default_variant, variant), "%s: defaultVariant %s, want %s", what,
                              s.default_variant, variant);
        ck_assert_msg(streq_ptr(s.env_file, env_file), "%s: envFile %s, want %s", what, strnull(s.env_file),
                      strnull(env_file));
        settings_done(&s);
}

START_TEST(strings) {
        static const char cfg[] = "{\"summaryModel\": \"cfg/model\", \"defaultExecutor\": \"opencode\","
                                  " \"defaultVariant\": \" low \", \"envFile\": \"/cfg/env\"}";
        strings_are(cfg, NULL, "cfg/model", "opencode", "low", "/cfg/env");
        /* summaryModel `??` (empty taken); defaultExecutor `||` (empty → config);
         * envFile "" disables without falling through */
        char *empty[] = {"TASKFERRY_SUMMARY_MODEL=", "TASKFERRY_DEFAULT_EXECUTOR=", "TASKFERRY_ENV_FILE=", NULL};
        strings_are(cfg, empty, "", "opencode", NULL, NULL);
        char *set[] = {"TASKFERRY_SUMMARY_MODEL=env/m", "TASKFERRY_DEFAULT_EXECUTOR=shell",
                       "TASKFERRY_DEFAULT_VARIANT=max ", "TASKFERRY_ENV_FILE=/env/file", NULL};
        strings_are(cfg, set, "env/m", "shell", "max", "/env/file");
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
        refused("{\"defaultVariant\": \"low\"}", var,
                "defaultVariant must be one of highest, off, minimal, low, medium, high, xhigh, max");
        char *mo[] = {"TASKFERRY_MAX_OUTPUT_FILE_BYTES=1048577", NULL};
        refused(NULL, mo, "maxOutputFileBytes must not exceed 1048576");
        char *none[] = {NULL};
        refused("{\"maxOutputFileBytes\": 2000000}", none, "maxOutputFileBytes must not exceed 1048576");
        resolved(&s, "{\"maxOutputFileBytes\": 1048576}", NULL);
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

START_TEST(trusted_projects_union) {
        Settings s;
        char *err = NULL;
        _cleanup_strv_free_ char **warnings = NULL;
        char *env[] = {"TASKFERRY_TRUSTED_PROJECTS=/e1, rel/x ,/shared,", NULL};
        ck_assert_int_eq(resolve(&s, "{\"trustedProjects\": [\"/shared\", \"/c1\"]}", env, &warnings, &err), 0);
        /* env first, then the file, each once; a relative env entry dropped, said */
        assert_list(s.trusted_projects, (const char *const[]) {"/e1", "/shared", "/c1", NULL});
        ck_assert_uint_eq(strv_length(warnings), 1);
        ck_assert_str_eq(warnings[0], "TASKFERRY_TRUSTED_PROJECTS entry rel/x is not an absolute path; ignored");
        settings_done(&s);
        ck_assert_ptr_null(s.trusted_projects);
        strv_free(warnings), warnings = NULL;
        char *none[] = {NULL};
        ck_assert_int_eq(resolve(&s, "{\"trustedProjects\": []}", none, &warnings, &err), 0);
        ck_assert_ptr_null(s.trusted_projects);
        ck_assert_ptr_null(warnings);
        settings_done(&s);
}
END_TEST

START_TEST(provider_limits) {
        Settings s;
        char *err = NULL;
        static const char cfg[] = "{\"providerLimits\": {\"zai\": {\"maxConcurrentTasks\": 1, \"maxDispatchesPerWindow\": 3},"
                                  " \"openai\": {\"maxDispatchesPerWindow\": 2}}}";
        resolved(&s, cfg, NULL);
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
        resolved(&s, cfg, env);
        ck_assert_uint_eq(s.n_provider_limits, 2);
        ck_assert_ptr_null(settings_provider_limit(&s, "openai/gpt"));
        ck_assert_uint_eq(settings_provider_limit(&s, "anthropic/x")->max_dispatches_per_window, 5);
        ck_assert_uint_eq(settings_provider_limit(&s, "zai/x")->max_concurrent_tasks, 4);
        ck_assert_uint_eq(settings_provider_limit(&s, "zai/x")->max_dispatches_per_window, 0);
        settings_done(&s);
        /* "" clears */
        char *clear[] = {"TASKFERRY_PROVIDER_LIMITS=", NULL};
        resolved(&s, cfg, clear);
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
        resolved(&s, "{\"waitDefaultTimeoutMs\": 0, \"advisorContextChars\": 900}", NULL);
        ck_assert_uint_eq(s.wait_default_timeout_ms, 900000); /* config 0 ignored */
        ck_assert_uint_eq(s.advisor_context_chars, 900);
        settings_done(&s);
        char *env[] = {"TASKFERRY_WAIT_DEFAULT_TIMEOUT_MS=0", "TASKFERRY_ADVISOR_CONTEXT_CHARS=50", NULL};
        resolved(&s, "{\"waitDefaultTimeoutMs\": 10}", env);
        ck_assert_uint_eq(s.wait_default_timeout_ms, 0); /* env "0": no timeout */
        ck_assert_uint_eq(s.advisor_context_chars, 50);
        settings_done(&s);
        /* past 2^64: saturated, never a conversion out of range (UBSan's
         * finding in the config fuzz target) */
        char *huge[] = {"TASKFERRY_WAIT_DEFAULT_TIMEOUT_MS=1e30", "TASKFERRY_ADVISOR_CONTEXT_CHARS=0x1ECF033333333333333333", NULL};
        resolved(&s, NULL, huge);
        ck_assert_uint_eq(s.wait_default_timeout_ms, UINT64_MAX);
        ck_assert_uint_eq(s.advisor_context_chars, UINT64_MAX);
        settings_done(&s);
        resolved(&s, "{\"waitDefaultTimeoutMs\": 1e300, \"advisorContextChars\": 1e300}", NULL);
        ck_assert_uint_eq(s.wait_default_timeout_ms, UINT64_MAX);
        ck_assert_uint_eq(s.advisor_context_chars, UINT64_MAX);
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

int main(void) {
        Suite *s = suite_create("settings");
        TCase *tc = tf_tcase(s, "settings", NULL, NULL, 0, TF_TESTS(defaults, booleans, strings, start_errors,
                lists_union_and_replace, trusted_projects_union, provider_limits, scope_limits, cli_side_keys,
                load_reads_the_file_once_and_fails_loudly));
        TF_LOOP(tc, every_number_env_over_config_over_default, number_keys);
        return tf_run_suite(s);
}
