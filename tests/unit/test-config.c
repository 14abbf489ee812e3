/* config.c: config.json's table, loading and validation, and the precedence
 * helpers (env > config > default). */

#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "fileio.h"
#include "fs-util.h"
#include "js-number-cases.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"
#include "unit.h"

static char *tmpdir;

static json_object *tf_cfg(const char *text) {
        json_object *o = NULL;
        ck_assert_int_eq(json_parse_strict(text, strlen(text), &o), 0);
        return o;
}

static void setup(void) { tmpdir = tf_tmpdir_new("test-config"); }

static void teardown(void) { tmpdir = tf_tmpdir_free(tmpdir); }

static char *write_config(const char *text, size_t len) {
        char *p = strdup_printf("%s/config.json", tmpdir);
        unlink(p);
        ck_assert_int_eq(write_file_atomic(p, text, len, 0600), 0);
        return p;
}

/* Load text as config.json: returns the rc, *ret_error the message. */
static int load_text(const char *text, json_object **ret, char **ret_error) {
        _cleanup_free_ char *p = write_config(text, strlen(text));
        return config_load(p, ret, NULL, ret_error);
}

static void assert_error(const char *text, const char *want) {
        json_object *o = NULL;
        _cleanup_free_ char *e = NULL;
        ck_assert_int_eq(load_text(text, &o, &e), -EINVAL);
        ck_assert_ptr_null(o);
        ck_assert_ptr_nonnull(e);
        if (!strstr(e, want)) ck_abort_msg("error for %s is \"%s\", wanted \"%s\"", text, e, want);
        ck_assert(startswith(e, "error: "));
        ck_assert_ptr_nonnull(strstr(e, "\nhelp: "));
}

START_TEST(table_has_the_29_keys_in_spec_order) {
        static const char *const spec[] = {
                "maxConcurrentTasks", "maxDispatchesPerWindow", "dispatchWindowMs", "noOutputTimeoutMs",
                "postOutputNoOutputTimeoutMs", "preOutputMaxMs", "summaryModel", "activitySummariesEnabled",
                "summarizerTimeoutMs", "activityMaxWords", "advisorSessionTtlMs", "watchdogGraceMs",
                "lowerdirStaggerMs", "sandboxEnabled", "overlayEnabled", "allowedDirs", "rwBind", "roBind",
                "envDenylist", "sandboxDenylist", "waitDefaultTimeoutMs", "cancelGraceMs", "defaultExecutor",
                "defaultVariant", "advisorContextChars", "envFile", "profilingEnabled", "providerLimits",
                "maxOutputFileBytes", "providerCooldownEnabled", "taskMemoryMax", "taskTasksMax", "taskCpuWeight",
                "idleExitSec", "trustedProjects", "network",
        };
        size_t n = 0;
        for (; config_keys[n].name; n++) {
                ck_assert_uint_lt(n, ELEMENTSOF(spec));
                ck_assert_str_eq(config_keys[n].name, spec[n]);
                ck_assert(startswith(config_keys[n].env, "TASKFERRY_"));
                ck_assert_ptr_eq(config_key_find(spec[n]), &config_keys[n]);
        }
        ck_assert_uint_eq(n, CONFIG_N_KEYS);
        ck_assert_uint_eq(n, ELEMENTSOF(spec));
        ck_assert_int_eq(config_key_find("providerLimits")->type, CONFIG_OBJECT);
        ck_assert_int_eq(config_key_find("sandboxEnabled")->type, CONFIG_BOOLEAN);
        ck_assert_str_eq(config_key_find("sandboxEnabled")->env, "TASKFERRY_DISABLE_SANDBOX");
        ck_assert_int_eq(config_key_find("rwBind")->type, CONFIG_STRING);
        ck_assert_int_eq(config_key_find("trustedProjects")->type, CONFIG_STRING_ARRAY);
        ck_assert_ptr_null(config_key_find("__proto__"));
        ck_assert_ptr_null(config_key_find(NULL));
}
END_TEST

START_TEST(missing_file_is_empty_object) {
        json_object *o = NULL;
        _cleanup_free_ char *e = NULL;
        _cleanup_free_ char *p = strdup_printf("%s/nope/config.json", tmpdir);
        ck_assert_int_eq(config_load(p, &o, NULL, &e), 0);
        ck_assert(json_is_object(o));
        ck_assert_int_eq(json_object_object_length(o), 0);
        json_object_put(o);
        /* a dangling symlink is a missing file too */
        _cleanup_free_ char *l = strdup_printf("%s/config.json", tmpdir);
        ck_assert_int_eq(symlink(p, l), 0);
        ck_assert_int_eq(config_load(l, &o, NULL, &e), 0);
        ck_assert_int_eq(json_object_object_length(o), 0);
        json_object_put(o);
}
END_TEST

START_TEST(valid_file_keeps_values) {
        json_object *o = NULL;
        _cleanup_free_ char *e = NULL;
        ck_assert_int_eq(load_text("{\"maxConcurrentTasks\": 1, \"rwBind\": \"/a,/b\", \"sandboxEnabled\": false,"
                                   " \"defaultVariant\": \" high \", \"providerLimits\": {\"zai\": {\"maxConcurrentTasks\": 2}},"
                                   " \"maxConcurrentTasks\": 0.5, \"dispatchWindowMs\": -1}\n",
                                   &o, &e),
                         0);
        ck_assert_ptr_null(e);
        /* numbers are only type-checked: 0.5 and -1 pass (and fall back at use) */
        ck_assert_uint_eq(config_integer(o, "maxConcurrentTasks", NULL, CONFIG_POSITIVE, 4), 4);
        ck_assert_uint_eq(config_integer(o, "dispatchWindowMs", NULL, CONFIG_POSITIVE, 5000), 5000);
        ck_assert_str_eq(json_get_string(o, "rwBind"), "/a,/b");
        json_object_put(o);
}
END_TEST

START_TEST(validation_errors_say_what) {
        const char *p = "config.json";
        (void) p;
        assert_error("{", "could not parse ");
        assert_error("", "could not parse ");
        assert_error("{\"a\":1} x", "could not parse ");
        assert_error("[]", "must be a JSON object");
        assert_error("null", "must be a JSON object");
        assert_error("\"x\"", "must be a JSON object");
        assert_error("{\"x\": 1}", "unrecognized config key \"x\" in ");
        assert_error("{\"__proto__\": {}}", "unrecognized config key \"__proto__\"");
        assert_error("{\"maxConcurrentTasks\": \"4\"}", "config key \"maxConcurrentTasks\" in ");
        assert_error("{\"maxConcurrentTasks\": \"4\"}", "must be a number (got \"4\")");
        assert_error("{\"sandboxEnabled\": \"false\"}", "must be a boolean (got \"false\")");
        assert_error("{\"overlayEnabled\": 0}", "must be a boolean (got 0)");
        assert_error("{\"rwBind\": [\"/a\"]}", "\"rwBind\" in ");
        assert_error("{\"rwBind\": [\"/a\"]}", "must be a string (got [\"/a\"])");
        assert_error("{\"envDenylist\": [\"A\"]}", "must be a string");
        assert_error("{\"sandboxDenylist\": null}", "must be a string (got null)");
        assert_error("{\"providerLimits\": []}", "must be a object");
        assert_error("{\"providerLimits\": null}", "must be a object (got null)");
        assert_error("{\"providerLimits\": {\"zai\": 3}}", "\"providerLimits.zai\" in ");
        assert_error("{\"providerLimits\": {\"zai\": {\"max\": 3}}}", "unrecognized key \"providerLimits.zai.max\"");
        assert_error("{\"providerLimits\": {\"zai\": {\"maxConcurrentTasks\": 0}}}", "must be a positive integer (got 0)");
        assert_error("{\"providerLimits\": {\"zai\": {\"maxDispatchesPerWindow\": 1.5}}}", "must be a positive integer");
        assert_error("{\"providerLimits\": {\"zai\": {\"maxConcurrentTasks\": \"2\"}}}", "must be a positive integer");
        assert_error("{\"defaultVariant\": \"huge\"}",
                     "must be one of highest, off, minimal, low, medium, high, xhigh, max (got \"huge\")");
        assert_error("{\"defaultExecutor\": \"claude\"}", "\"defaultExecutor\" in ");
        assert_error("{\"defaultExecutor\": \"claude\"}", "must be one of opencode, pi, shell (got \"claude\")");
        assert_error("{\"summaryModel\": \"a\\u0000b\"}", "must not contain a NUL");
        assert_error("{\"trustedProjects\": \"/a\"}", "must be a string array (got \"/a\")");
        assert_error("{\"trustedProjects\": [\"/a\", 1]}", "must be a string array");
        assert_error("{\"trustedProjects\": null}", "must be a string array (got null)");
        assert_error("{\"trustedProjects\": [\"/a\", \"rel/b\"]}",
                     "config key \"trustedProjects\" in ");
        assert_error("{\"trustedProjects\": [\"/a\", \"rel/b\"]}", "must hold absolute paths (entry 2 does not)");
        assert_error("{\"trustedProjects\": [\"\"]}", "must hold absolute paths (entry 1 does not)");
        assert_error("{\"trustedProjects\": [\"/a\\u0000b\"]}", "must hold absolute paths");
}
END_TEST

START_TEST(unknown_key_help_lists_all_29_keys) {
        json_object *o = NULL;
        _cleanup_free_ char *e = NULL;
        ck_assert_int_eq(load_text("{\"bogus\": true}", &o, &e), -EINVAL);
        const char *help = strstr(e, "\nhelp: recognized keys are: ");
        ck_assert_ptr_nonnull(help);
        for (const ConfigKey *k = config_keys; k->name; k++) {
                _cleanup_free_ char *needle = strdup_printf(" %s", k->name);
                ck_assert_msg(strstr(help, needle), "help lacks %s: %s", k->name, help);
        }
        size_t el = strlen(e), sl = strlen("providerCooldownEnabled, taskMemoryMax, taskTasksMax, taskCpuWeight, idleExitSec, trustedProjects, network");
        ck_assert(el > sl && streq(e + el - sl, "providerCooldownEnabled, taskMemoryMax, taskTasksMax, taskCpuWeight, idleExitSec, trustedProjects, network"));
}
END_TEST

START_TEST(empty_provider_entry_warns) {
        json_object *o = NULL;
        _cleanup_free_ char *e = NULL;
        _cleanup_strv_free_ char **w = NULL;
        _cleanup_free_ char *p = write_config("{\"providerLimits\": {\"zai\": {}}}", 31);
        ck_assert_int_eq(config_load(p, &o, &w, &e), 0);
        ck_assert_uint_eq(strv_length(w), 1);
        ck_assert_ptr_nonnull(strstr(w[0], "\"providerLimits.zai\""));
        ck_assert_ptr_nonnull(strstr(w[0], "sets no limits"));
        json_object_put(o);
}
END_TEST

/* Hostile files: each a clear error, never a hang or a crash. The load runs
 * in a child under alarm() so a blocking open or read fails the test. */
static int load_bounded(const char *path, char **ret_error) {
        int pfd[2];
        ck_assert_int_eq(pipe(pfd), 0);
        pid_t pid;
        int k = safe_fork("config_load", 0, &pid);
        ck_assert_int_ge(k, 0);
        if (k == 0) {
                close(pfd[0]);
                alarm(10);
                json_object *o = NULL;
                char *e = NULL;
                int r = config_load(path, &o, NULL, &e);
                dprintf(pfd[1], "%d\n%s", r, e ? e : "");
                _exit(0);
        }
        close(pfd[1]);
        _cleanup_free_ char *out = NULL;
        ck_assert_int_eq(read_fd(pfd[0], 1 << 20, &out, NULL), 0);
        close(pfd[0]);
        ck_assert_msg(wait_for_terminate_and_check("config_load", pid, 0) == 0, "config_load hung or crashed on %s",
                      path);
        char *nl = strchr(out, '\n');
        ck_assert_ptr_nonnull(nl);
        *ret_error = strdup(nl + 1);
        return atoi(out);
}

START_TEST(hostile_files_fail_clearly) {
        _cleanup_free_ char *p = strdup_printf("%s/config.json", tmpdir);
        char *e = NULL;

        ck_assert_int_eq(symlink("/dev/zero", p), 0);
        ck_assert_int_eq(load_bounded(p, &e), -EINVAL);
        ck_assert_msg(strstr(e, "not a regular file"), "%s", e);
        free(e);
        unlink(p);

        ck_assert_int_eq(mkfifo(p, 0600), 0);
        ck_assert_int_eq(load_bounded(p, &e), -EINVAL);
        ck_assert_msg(strstr(e, "not a regular file"), "%s", e);
        free(e);
        unlink(p);

        ck_assert_int_eq(mkdir(p, 0700), 0);
        ck_assert_int_eq(load_bounded(p, &e), -EINVAL);
        ck_assert_msg(strstr(e, "not a regular file") || strstr(e, "could not read"), "%s", e);
        free(e);
        rmdir(p);

        /* huge: a sparse file far over the cap */
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, (off_t) 1 << 32), 0);
        close(fd);
        ck_assert_int_eq(load_bounded(p, &e), -EINVAL);
        ck_assert_msg(strstr(e, "is larger than 1048576 bytes"), "%s", e);
        free(e);
        unlink(p);

        /* just over the cap, and valid JSON all the same (whitespace) */
        _cleanup_free_ char *big = malloc(CONFIG_FILE_MAX + 2);
        memset(big, ' ', CONFIG_FILE_MAX + 1);
        big[0] = '{';
        big[CONFIG_FILE_MAX] = '}';
        _cleanup_free_ char *q = write_config(big, CONFIG_FILE_MAX + 1);
        ck_assert_int_eq(load_bounded(q, &e), -EINVAL);
        ck_assert_msg(strstr(e, "is larger than"), "%s", e);
        free(e);

        /* deeply nested */
        size_t depth = 100000;
        _cleanup_free_ char *nest = malloc(2 * depth + 32);
        size_t n = 0;
        n += (size_t) sprintf(nest, "{\"providerLimits\":");
        for (size_t i = 0; i < depth; i++) nest[n++] = '[';
        for (size_t i = 0; i < depth; i++) nest[n++] = ']';
        nest[n++] = '}';
        q = (free(q), write_config(nest, n));
        ck_assert_int_eq(load_bounded(q, &e), -EINVAL);
        ck_assert_msg(strstr(e, "could not parse") && strstr(e, "nested too deeply"), "%s", e);
        free(e);

        /* NUL bytes */
        static const char nul[] = "{\"summaryModel\": \"a\0b\"}";
        q = (free(q), write_config(nul, sizeof nul - 1));
        ck_assert_int_eq(load_bounded(q, &e), -EINVAL);
        ck_assert_msg(strstr(e, "NUL byte"), "%s", e);
        free(e);

        /* invalid UTF-8 */
        q = (free(q), write_config("{\"summaryModel\": \"\xff\"}", 21));
        ck_assert_int_eq(load_bounded(q, &e), -EINVAL);
        ck_assert_msg(strstr(e, "could not parse"), "%s", e);
        free(e);

        /* unreadable (root reads everything: only meaningful unprivileged) */
        if (geteuid() != 0) {
                q = (free(q), write_config("{}", 2));
                ck_assert_int_eq(chmod(q, 0), 0);
                ck_assert_int_eq(load_bounded(q, &e), -EINVAL);
                ck_assert_msg(strstr(e, "could not read"), "%s", e);
                free(e);
        }
}
END_TEST

START_TEST(js_number_rules) { js_number_check(config_js_number, _i); }
END_TEST

START_TEST(integer_precedence) {
        json_object *cfg = tf_cfg("{\"a\": 7, \"z\": 0, \"f\": 2.5, \"neg\": -3, \"huge\": 1e300}");
        /* env > config > default */
        ck_assert_uint_eq(config_integer(cfg, "a", "3", CONFIG_POSITIVE, 4), 3);
        ck_assert_uint_eq(config_integer(cfg, "a", NULL, CONFIG_POSITIVE, 4), 7);
        ck_assert_uint_eq(config_integer(cfg, "missing", NULL, CONFIG_POSITIVE, 4), 4);
        ck_assert_uint_eq(config_integer(NULL, "a", NULL, CONFIG_POSITIVE, 4), 4);
        /* invalid env falls back to config, then default (never an error) */
        ck_assert_uint_eq(config_integer(cfg, "a", "abc", CONFIG_POSITIVE, 4), 7);
        ck_assert_uint_eq(config_integer(cfg, "a", "1.5", CONFIG_POSITIVE, 4), 7);
        ck_assert_uint_eq(config_integer(cfg, "a", "-2", CONFIG_POSITIVE, 4), 7);
        ck_assert_uint_eq(config_integer(cfg, "missing", "abc", CONFIG_POSITIVE, 4), 4);
        ck_assert_uint_eq(config_integer(cfg, "a", "1e3", CONFIG_POSITIVE, 4), 1000);
        ck_assert_uint_eq(config_integer(cfg, "a", "1e100", CONFIG_POSITIVE, 4), 7);
        /* "" → 0: invalid for int>0, a valid 0 for int≥0 */
        ck_assert_uint_eq(config_integer(cfg, "a", "", CONFIG_POSITIVE, 4), 7);
        ck_assert_uint_eq(config_integer(cfg, "a", "", CONFIG_NONNEGATIVE, 4), 0);
        ck_assert_uint_eq(config_integer(cfg, "a", "0", CONFIG_NONNEGATIVE, 4), 0);
        /* config values that are only type-valid fall back */
        ck_assert_uint_eq(config_integer(cfg, "z", NULL, CONFIG_POSITIVE, 4), 4);
        ck_assert_uint_eq(config_integer(cfg, "z", NULL, CONFIG_NONNEGATIVE, 4), 0);
        ck_assert_uint_eq(config_integer(cfg, "f", NULL, CONFIG_POSITIVE, 4), 4);
        ck_assert_uint_eq(config_integer(cfg, "neg", NULL, CONFIG_NONNEGATIVE, 4), 4);
        ck_assert_uint_eq(config_integer(cfg, "huge", NULL, CONFIG_POSITIVE, 4), 4);
        json_object_put(cfg);
}
END_TEST

START_TEST(boolean_precedence) {
        json_object *cfg = tf_cfg("{\"on\": true, \"off\": false}");
        ck_assert(!config_boolean(cfg, "on", "x", false, true));
        ck_assert(config_boolean(cfg, "off", "", true, false));
        ck_assert(config_boolean(cfg, "on", NULL, false, false));
        ck_assert(!config_boolean(cfg, "off", NULL, true, true));
        ck_assert(config_boolean(cfg, "missing", NULL, false, true));
        json_object_put(cfg);
}
END_TEST

START_TEST(lists_split_trim_dedupe) {
        _cleanup_strv_free_ char **l = NULL;
        ck_assert_int_eq(config_list_append(&l, " /a , ,/b,\t/a,"), 0);
        ck_assert_int_eq(config_list_append(&l, "/c,/b"), 0);
        ck_assert_int_eq(config_list_append(&l, NULL), 0);
        ck_assert_uint_eq(strv_length(l), 3);
        ck_assert_str_eq(l[0], "/a");
        ck_assert_str_eq(l[1], "/b");
        ck_assert_str_eq(l[2], "/c");
        _cleanup_strv_free_ char **e = NULL;
        ck_assert_int_eq(config_list_append(&e, " , "), 0);
        ck_assert_ptr_null(e);
}
END_TEST

START_TEST(wait_default_timeout_chain) {
        json_object *cfg = tf_cfg("{\"waitDefaultTimeoutMs\": 1234}");
        json_object *zero = tf_cfg("{\"waitDefaultTimeoutMs\": 0}");
        double ms = -1;
        ck_assert_int_eq(config_wait_default_timeout(cfg, "0", &ms), 0);          /* env "0": forever */
        ck_assert_int_eq(config_wait_default_timeout(cfg, "500", &ms), 1);
        ck_assert(ms == 500);
        ck_assert_int_eq(config_wait_default_timeout(cfg, "1e3", &ms), 1);
        ck_assert(ms == 1000);
        ck_assert_int_eq(config_wait_default_timeout(cfg, "abc", &ms), 1);        /* invalid env → config */
        ck_assert(ms == 1234);
        ck_assert_int_eq(config_wait_default_timeout(cfg, "", &ms), 1);           /* "" → 0, not "0" */
        ck_assert(ms == 1234);
        ck_assert_int_eq(config_wait_default_timeout(cfg, NULL, &ms), 1);
        ck_assert(ms == 1234);
        ck_assert_int_eq(config_wait_default_timeout(zero, NULL, &ms), 1);        /* config 0 ignored */
        ck_assert(ms == 900000);
        ck_assert_int_eq(config_wait_default_timeout(NULL, NULL, &ms), 1);
        ck_assert(ms == 900000);
        json_object_put(cfg);
        json_object_put(zero);
}
END_TEST

START_TEST(advisor_context_chars_chain) {
        json_object *cfg = tf_cfg("{\"advisorContextChars\": 5000}");
        ck_assert(config_advisor_context_chars(cfg, "700") == 700);
        ck_assert(config_advisor_context_chars(cfg, "nope") == 5000);
        ck_assert(config_advisor_context_chars(cfg, "-1") == 5000);
        ck_assert(config_advisor_context_chars(cfg, NULL) == 5000);
        ck_assert(config_advisor_context_chars(NULL, NULL) == 120000);
        json_object_put(cfg);
}
END_TEST

int main(void) {
        Suite *s = suite_create("config");
        TCase *tc = tf_tcase(s, "config", setup, teardown, 60, TF_TESTS(table_has_the_29_keys_in_spec_order,
                missing_file_is_empty_object, valid_file_keeps_values, validation_errors_say_what,
                unknown_key_help_lists_all_29_keys, empty_provider_entry_warns, hostile_files_fail_clearly,
                integer_precedence, boolean_precedence, lists_split_trim_dedupe, wait_default_timeout_chain,
                advisor_context_chars_chain));
        TF_LOOP(tc, js_number_rules, js_number_cases);
        return tf_run_suite(s);
}
