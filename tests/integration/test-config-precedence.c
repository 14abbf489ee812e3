/* config.json through the real daemon and CLI: scenarios K1 (location), K2
 * (validation), K4 (booleans), K5 (lists), the precedence (env > config >
 * default, read once per daemon start) and the CLI's wait default timeout. Fake workers are `shell` tasks; the
 * sandbox ones run under real bwrap, as root and unprivileged. */

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"

static char *config_path(tf_world *w) {
        return strdup_printf("%s/taskferry/config.json", w->cfg);
}

static void write_config(tf_world *w, const char *text) {
        _cleanup_free_ char *dir = strdup_printf("%s/taskferry", w->cfg);
        ck_assert_int_eq(mkdir_p(dir, 0700), 0);
        _cleanup_free_ char *p = config_path(w);
        unlink(p);
        tf_write(p, text, strlen(text), 0600);
}

/* Stop the world's daemon, if one runs (each start reads config.json once). */
static void daemon_stop(tf_world *w) {
        if (tf_daemon_pid(w) > 0) tf_daemon_stop(w, SIGTERM);
}

/* Two dispatches: the first holds 1.5 s; returns the order file's lines,
 * "a0 a1 b0" when they ran one after another, "a0 b0 a1" when together. */
static char *two_dispatch_order(tf_world *w) {
        _cleanup_free_ char *order = strdup_printf("%s/order", w->repo_parent);
        unlink(order);
        _cleanup_free_ char *pa = strdup_printf("echo a0 >> %s; sleep 1.5; echo a1 >> %s", order, order);
        _cleanup_free_ char *pb = strdup_printf("echo b0 >> %s", order);
        const char *nosandbox[] = {"--no-sandbox", NULL};
        _cleanup_free_ char *a = tf_dispatch_shell(w, w->repo_parent, nosandbox, pa);
        /* b only after a has started, so "together" is unambiguous */
        for (int i = 0; i < 1000 && !tf_exists(order); i++) usleep(10000);
        _cleanup_free_ char *b = tf_dispatch_shell(w, w->repo_parent, nosandbox, pb);
        json_object_put(tf_wait_settled(w, a));
        json_object_put(tf_wait_settled(w, b));
        char *got = tf_read(order, NULL);
        for (char *p = got; *p; p++)
                if (*p == '\n') *p = ' ';
        size_t n = strlen(got);
        if (n && got[n - 1] == ' ') got[n - 1] = 0;
        return got;
}

/* scenario: maxConcurrentTasks:1 in config.json makes two dispatches run one
 * after another; without it (default 4) they overlap; env beats config; a
 * type-valid but unusable value (0) falls back to the default */
START_TEST(max_concurrent_tasks_from_config) {
        static const struct {
                const char *config; /* written before the step (NULL: left as it is) */
                const char *env;    /* TASKFERRY_MAX_CONCURRENT_TASKS (NULL: unset) */
                const char *order;
        } steps[] = {
                {NULL, NULL, "a0 b0 a1"}, /* the default (4): together */
                {"{\"maxConcurrentTasks\": 1}", NULL, "a0 a1 b0"},
                {NULL, "2", "a0 b0 a1"},   /* env > config */
                {NULL, "1.5", "a0 a1 b0"}, /* an invalid env value falls back to the config, not the default */
                {"{\"maxConcurrentTasks\": 0}", NULL, "a0 b0 a1"}, /* 0 passes validation, falls back to 4 */
        };
        tf_world *w = tf_world_new(NULL);
        for (size_t i = 0; i < ELEMENTSOF(steps); i++) {
                if (steps[i].config) write_config(w, steps[i].config);
                if (steps[i].env) tf_world_setenv(w, "TASKFERRY_MAX_CONCURRENT_TASKS", steps[i].env);
                else strv_env_unset(&w->env, "TASKFERRY_MAX_CONCURRENT_TASKS");
                char *got = two_dispatch_order(w);
                ck_assert_msg(streq(got, steps[i].order), "step %zu: ran %s, want %s", i, got, steps[i].order);
                free(got);
                daemon_stop(w);
        }
        tf_world_free(w);
}
END_TEST

/* config.json is read once per daemon start: an edit while it runs changes
 * nothing until the next start */
TF_WORLD_TEST(read_once_per_start) {
        write_config(w, "{\"defaultExecutor\": \"shell\"}");
        const char *d[] = {"--no-sandbox", "--directory", w->repo_parent, "--prompt", "echo from-default-executor", NULL};
        char *id = tf_dispatch(w, d);
        json_object *st = tf_wait_settled(w, id);
        ck_assert_str_eq(tf_jstr(st, "status"), "done");
        json_object_put(st);
        char *msg = tf_task_message(w, id);
        ck_assert_str_eq(msg, "from-default-executor\n");
        free(msg), free(id);
        /* broken now, but this daemon read it at its start */
        write_config(w, "{\"defaultExecutor\": ");
        id = tf_dispatch(w, d);
        json_object_put(tf_wait_settled(w, id));
        free(id);
        daemon_stop(w);
        const char *l[] = {"list", NULL};
        tf_run r = tf_cli(w, NULL, NULL, l);
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert_msg(strstr(r.out, "could not parse"), "%s", r.out);
        tf_run_done(&r);
}
END_TEST

/* K1: $XDG_CONFIG_HOME/taskferry/config.json, else ~/.config/...; missing = defaults */
START_TEST(k1_location) {
        tf_world *w = tf_world_new(NULL);
        const char *d[] = {"--no-sandbox", "--directory", w->repo_parent, "--prompt", "echo hi", "--json", NULL};
        /* missing: defaults (pi, which needs a model) */
        const char *argv[] = {"dispatch", "--no-sandbox", "--directory", w->repo_parent, "--prompt", "echo hi", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        ck_assert_int_eq(r.exit_code, 2); /* a usage error */
        ck_assert_msg(strstr(r.out, "--model is required"), "%s", r.out);
        tf_run_done(&r);
        daemon_stop(w);
        /* ~/.config is used when XDG_CONFIG_HOME is unset or empty */
        _cleanup_free_ char *home_cfg = strdup_printf("%s/.config/taskferry", w->home);
        ck_assert_int_eq(mkdir_p(home_cfg, 0700), 0);
        tf_write(tf_path(home_cfg, "config.json"), "{\"defaultExecutor\": \"shell\"}", 28, 0600);
        write_config(w, "{\"defaultExecutor\": \"pi\"}");
        const char *empties[] = {NULL, ""};
        for (size_t i = 0; i < ELEMENTSOF(empties); i++) {
                if (empties[i]) tf_world_setenv(w, "XDG_CONFIG_HOME", empties[i]);
                else strv_env_unset(&w->env, "XDG_CONFIG_HOME");
                char *id = tf_dispatch(w, d);
                json_object *st = tf_wait_settled(w, id);
                ck_assert_str_eq(tf_jstr(st, "status"), "done");
                json_object_put(st);
                free(id);
                daemon_stop(w);
        }
        /* and $XDG_CONFIG_HOME's file wins over ~/.config's when set */
        tf_world_setenv(w, "XDG_CONFIG_HOME", w->cfg);
        r = tf_cli(w, NULL, NULL, argv);
        ck_assert_int_eq(r.exit_code, 2);
        ck_assert_msg(strstr(r.out, "--model is required"), "%s", r.out);
        tf_run_done(&r);
        tf_world_free(w);
}
END_TEST

/* K2: each refuses the daemon's start: CLI exit 1, the text in daemon-boot.err */
START_TEST(k2_validation_refuses_start) {
        static const struct {
                const char *config, *want;
        } cases[] = {
                {"{\"maxConcurrentTasks\": 1,", "could not parse "},
                {"[]", "must be a JSON object"},
                {"{\"x\": 1}", "unrecognized config key \"x\" in "},
                {"{\"__proto__\": {}}", "unrecognized config key \"__proto__\""},
                {"{\"maxConcurrentTasks\": \"4\"}", "must be a number (got \"4\")"},
                {"{\"sandboxEnabled\": \"false\"}", "must be a boolean"},
                {"{\"overlayEnabled\": \"true\"}", "must be a boolean"},
                {"{\"activitySummariesEnabled\": 0}", "must be a boolean"},
                {"{\"rwBind\": [\"/x\"]}", "\"rwBind\""},
                {"{\"roBind\": [\"/x\"]}", "must be a string"},
                {"{\"envDenylist\": [\"A\"]}", "must be a string"},
                {"{\"sandboxDenylist\": [\"/x\"]}", "must be a string"},
                {"{\"allowedDirs\": [\"/x\"]}", "must be a string"},
                {"{\"providerLimits\": \"zai:1\"}", "\"providerLimits\""},
                {"{\"providerLimits\": {\"zai\": {\"limit\": 1}}}", "unrecognized key \"providerLimits.zai.limit\""},
                {"{\"providerLimits\": {\"zai\": {\"maxConcurrentTasks\": 0}}}", "must be a positive integer (got 0)"},
                {"{\"defaultVariant\": \"ultra\"}", "must be one of highest, off, minimal, low, medium, high, xhigh, max"},
                {"{\"defaultExecutor\": \"claude\"}", "\"defaultExecutor\""},
                {"{\"maxOutputFileBytes\": 1048577}", "maxOutputFileBytes must not exceed 1048576"},
        };
        tf_world *w = tf_world_new(NULL);
        _cleanup_free_ char *boot_err = strdup_printf("%s/daemon-boot.err", w->run);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                write_config(w, cases[i].config);
                const char *l[] = {"list", NULL};
                tf_run r = tf_cli(w, NULL, NULL, l);
                ck_assert_msg(r.exit_code == 1, "%s: exit %d: %s", cases[i].config, r.exit_code, r.out);
                _cleanup_free_ char *out = tf_unescape(r.out);
                ck_assert_msg(strstr(out, cases[i].want), "%s: %s", cases[i].config, out);
                ck_assert_msg(strstr(out, "daemon boot failed"), "%s: %s", cases[i].config, out);
                char *e = tf_read(boot_err, NULL);
                ck_assert_msg(strstr(e, cases[i].want), "%s: boot.err %s", cases[i].config, e);
                free(e);
                tf_run_done(&r);
                ck_assert_int_lt(tf_daemon_pid(w), 0);
        }
        /* the unknown-key help lists all 29 keys */
        write_config(w, "{\"bogus\": 1}");
        const char *l[] = {"list", NULL};
        tf_run r = tf_cli(w, NULL, NULL, l);
        ck_assert_msg(strstr(r.out, "recognized keys are: maxConcurrentTasks, maxDispatchesPerWindow"), "%s", r.out);
        ck_assert_msg(strstr(r.out, "providerLimits, maxOutputFileBytes"), "%s", r.out);
        tf_run_done(&r);
        /* a bad env value refuses the start even with a valid file */
        write_config(w, "{\"providerLimits\": {\"zai\": {\"maxConcurrentTasks\": 2}}}");
        static const struct {
                const char *name, *value, *want;
        } envs[] = {
                {"TASKFERRY_PROVIDER_LIMITS", "zai:two", "malformed TASKFERRY_PROVIDER_LIMITS entry \"zai:two\""},
                {"TASKFERRY_DEFAULT_EXECUTOR", "claude", "unknown executor: claude"},
                {"TASKFERRY_DEFAULT_VARIANT", "ultra", "defaultVariant must be one of"},
                {"TASKFERRY_MAX_OUTPUT_FILE_BYTES", "2000000", "maxOutputFileBytes must not exceed 1048576"},
        };
        for (size_t i = 0; i < ELEMENTSOF(envs); i++) {
                tf_world_setenv(w, envs[i].name, envs[i].value);
                r = tf_cli(w, NULL, NULL, l);
                _cleanup_free_ char *out = tf_unescape(r.out);
                ck_assert_msg(r.exit_code == 1 && strstr(out, envs[i].want), "%s=%s: %d %s", envs[i].name,
                              envs[i].value, r.exit_code, out);
                tf_run_done(&r);
                strv_env_unset(&w->env, envs[i].name);
        }
        /* valid again: starts */
        r = tf_cli(w, NULL, NULL, l);
        ck_assert_msg(r.exit_code == 0, "%s", r.out);
        tf_run_done(&r);
        tf_world_free(w);
}
END_TEST

/* Attacker-shaped config.json: a clear refusal within seconds, never a hang */
TF_WORLD_TEST(hostile_config_files) {
        _cleanup_free_ char *dir = strdup_printf("%s/taskferry", w->cfg);
        _cleanup_free_ char *p = config_path(w);
        ck_assert_int_eq(mkdir_p(dir, 0700), 0);
        const char *l[] = {"list", NULL};
        for (int k = 0; k < 4; k++) {
                unlink(p);
                const char *want = "not a regular file";
                if (k == 0) ck_assert_int_eq(symlink("/dev/zero", p), 0);
                else if (k == 1) ck_assert_int_eq(mkfifo(p, 0600), 0);
                else if (k == 2) {
                        free(tf_shf(w, NULL, "truncate -s 8G %s", p));
                        want = "is larger than 1048576 bytes";
                } else {
                        free(tf_shf(w, NULL, "printf '{\"summaryModel\": \"a\\000b\"}' > %s", p));
                        want = "NUL byte";
                }
                time_t t0 = time(NULL);
                tf_run r = tf_cli(w, NULL, NULL, l);
                ck_assert_msg(r.exit_code == 1 && strstr(r.out, want), "case %d: %d %s", k, r.exit_code, r.out);
                ck_assert_int_lt(time(NULL) - t0, 10);
                tf_run_done(&r);
        }
        unlink(p);
}
END_TEST

/* wait's default timeout: env "0" → none, env → it, config → it (0 ignored);
 * a malformed config.json breaks wait too */
START_TEST(wait_default_timeout_from_config) {
        tf_world *w = tf_world_new(NULL);
        const char *nosandbox[] = {"--no-sandbox", NULL};
        char *id = tf_dispatch_shell(w, w->repo_parent, nosandbox, "sleep 30");
        const char *wa[] = {"wait", id, "--json", NULL};
        write_config(w, "{\"waitDefaultTimeoutMs\": 300}");
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        tf_run r = tf_cli(w, NULL, NULL, wa);
        clock_gettime(CLOCK_MONOTONIC, &b);
        ck_assert_msg(r.exit_code == 0, "%s", r.out);
        json_object *o = tf_json(r.out);
        ck_assert(json_get_bool(o, "timedOut", false) || strstr(r.out, "wait timed out"));
        json_object_put(o);
        tf_run_done(&r);
        double took = (double) (b.tv_sec - a.tv_sec) + (double) (b.tv_nsec - a.tv_nsec) / 1e9;
        ck_assert_msg(took < 10, "wait took %.1f s with a 300 ms default", took);
        /* env beats config */
        tf_world_setenv(w, "TASKFERRY_WAIT_DEFAULT_TIMEOUT_MS", "200");
        write_config(w, "{\"waitDefaultTimeoutMs\": 600000}");
        clock_gettime(CLOCK_MONOTONIC, &a);
        r = tf_cli(w, NULL, NULL, wa);
        clock_gettime(CLOCK_MONOTONIC, &b);
        ck_assert_msg(r.exit_code == 0 && strstr(r.out, "timedOut"), "%s", r.out);
        tf_run_done(&r);
        took = (double) (b.tv_sec - a.tv_sec) + (double) (b.tv_nsec - a.tv_nsec) / 1e9;
        ck_assert_msg(took < 10, "wait took %.1f s with env 200 ms", took);
        strv_env_unset(&w->env, "TASKFERRY_WAIT_DEFAULT_TIMEOUT_MS");
        /* malformed: wait fails with the config's error, exit 1 */
        write_config(w, "{\"waitDefaultTimeoutMs\": \"300\"}");
        r = tf_cli(w, NULL, NULL, wa);
        ck_assert_msg(r.exit_code == 1 && strstr(r.out, "must be a number"), "%d %s", r.exit_code, r.out);
        tf_run_done(&r);
        /* --timeout needs no config */
        const char *wt[] = {"wait", id, "--json", "--timeout", "100", NULL};
        r = tf_cli(w, NULL, NULL, wt);
        ck_assert_msg(r.exit_code == 0 && strstr(r.out, "timedOut"), "%s", r.out);
        tf_run_done(&r);
        unlink(tf_path(w->cfg, "taskferry/config.json"));
        const char *c[] = {"cancel", id, "--grace-ms", "100", NULL};
        r = tf_cli(w, NULL, NULL, c);
        tf_run_done(&r);
        free(id);
        tf_world_free(w);
}
END_TEST

/* cancelGraceMs from config.json, env over it */
TF_WORLD_TEST(cancel_grace_from_config) {
        write_config(w, "{\"cancelGraceMs\": 1234}");
        for (int k = 0; k < 2; k++) {
                const char *nosandbox[] = {"--no-sandbox", NULL};
                char *id = tf_dispatch_shell(w, w->repo_parent, nosandbox, "sleep 30");
                for (int i = 0; i < 200; i++) {
                        const char *s[] = {"status", id, "--json", NULL};
                        tf_run r = tf_cli(w, NULL, NULL, s);
                        bool running = strstr(r.out, "\"running\"") && !strstr(r.out, "\"pid\":null");
                        tf_run_done(&r);
                        if (running) break;
                        usleep(20000);
                }
                const char *c[] = {"cancel", id, "--json", NULL};
                tf_run r = tf_cli(w, NULL, NULL, c);
                const char *want = k == 0 ? "after 1234ms" : "after 4321ms";
                ck_assert_msg(r.exit_code == 0 && strstr(r.out, want), "%s", r.out);
                tf_run_done(&r);
                json_object_put(tf_wait_settled(w, id));
                free(id);
                daemon_stop(w);
                tf_world_setenv(w, "TASKFERRY_CANCEL_GRACE_MS", "4321");
        }
}
END_TEST

/* K4: TASKFERRY_DISABLE_SANDBOX=1|true disables whatever the config says,
 * any other value enables; same for TASKFERRY_DISABLE_OVERLAY */
START_TEST(k4_booleans) {
        tf_world *w = tf_world_new(NULL);
        char *repo = tf_repo_new(w, NULL, NULL);
        /* a host file outside every bind is hidden from a sandboxed worker */
        _cleanup_free_ char *host = strdup(tf_path(w->root, "k4-probe"));
        tf_write(host, "x\n", 2, 0644);
        _cleanup_free_ char *probe = strdup_printf("test -e %s && echo unsandboxed || echo sandboxed", host);
        static const struct {
                const char *config, *env, *want;
        } sandbox[] = {
                {"{}", NULL, "sandboxed\n"},
                {"{\"sandboxEnabled\": false}", NULL, "unsandboxed\n"},
                {"{\"sandboxEnabled\": false}", "0", "sandboxed\n"},
                {"{\"sandboxEnabled\": false}", "no", "sandboxed\n"},
                {"{\"sandboxEnabled\": true}", "1", "unsandboxed\n"},
                {"{\"sandboxEnabled\": true}", "true", "unsandboxed\n"},
        };
        for (size_t i = 0; i < ELEMENTSOF(sandbox); i++) {
                write_config(w, sandbox[i].config);
                if (sandbox[i].env) tf_world_setenv(w, "TASKFERRY_DISABLE_SANDBOX", sandbox[i].env);
                else strv_env_unset(&w->env, "TASKFERRY_DISABLE_SANDBOX");
                char *msg = tf_shell_done_output(w, repo, NULL, probe, NULL);
                ck_assert_msg(streq(msg, sandbox[i].want), "%s env %s: %s", sandbox[i].config,
                              strempty(sandbox[i].env), msg);
                free(msg);
                daemon_stop(w);
        }
        strv_env_unset(&w->env, "TASKFERRY_DISABLE_SANDBOX");
        /* overlay: with it the worker's write waits for accept; without it lands */
        static const struct {
                const char *config, *env;
                bool lands;
        } overlay[] = {
                {"{\"overlayEnabled\": false}", NULL, true},
                {"{\"overlayEnabled\": false}", "0", false},
                {"{\"overlayEnabled\": true}", "true", true},
                {"{}", NULL, false},
        };
        for (size_t i = 0; i < ELEMENTSOF(overlay); i++) {
                write_config(w, overlay[i].config);
                if (overlay[i].env) tf_world_setenv(w, "TASKFERRY_DISABLE_OVERLAY", overlay[i].env);
                else strv_env_unset(&w->env, "TASKFERRY_DISABLE_OVERLAY");
                _cleanup_free_ char *name = strdup_printf("written-%zu", i);
                _cleanup_free_ char *script = strdup_printf("echo x > %s", name);
                json_object *st = NULL;
                free(tf_shell_done_output(w, repo, NULL, script, &st));
                bool lands = tf_exists(tf_path(repo, name));
                ck_assert_msg(lands == overlay[i].lands, "%s env %s: landed %d", overlay[i].config,
                              strempty(overlay[i].env), lands);
                if (!lands) {
                        const char *id = tf_jstr(st, "id");
                        const char *rj[] = {"reject", id, NULL};
                        tf_run r = tf_cli(w, NULL, NULL, rj);
                        tf_run_done(&r);
                }
                json_object_put(st);
                daemon_stop(w);
        }
        free(repo);
        tf_world_free(w);
}
END_TEST

/* K5: rw/ro binds union across flag, env and config; the deny-lists' env
 * replaces the config's */
TF_WORLD_TEST(k5_lists) {
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *names[] = {"rw-flag", "rw-env", "rw-cfg", "rw-alias-env", "rw-alias-cfg", "ro-cfg", "ro-env"};
        char *dirs[ELEMENTSOF(names)];
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                dirs[i] = strdup(tf_path(w->root, names[i]));
                ck_assert_int_eq(mkdir(dirs[i], 0777), 0);
                chmod(dirs[i], 0777);
                tf_write(tf_path(dirs[i], "seen"), "yes\n", 4, 0644);
        }
        _cleanup_free_ char *cfg = strdup_printf("{\"rwBind\": \"%s\", \"allowedDirs\": \"%s\", \"roBind\": \"%s\","
                                                 " \"envDenylist\": \"TF_K5_A\"}",
                                                 dirs[2], dirs[4], dirs[5]);
        write_config(w, cfg);
        tf_world_setenv(w, "TASKFERRY_RW_BIND", dirs[1]);
        tf_world_setenv(w, "TASKFERRY_ALLOWED_DIRS", dirs[3]);
        _cleanup_free_ char *ro_env = strdup_printf("%s,%s", strv_env_get(w->env, "TASKFERRY_RO_BIND"), dirs[6]);
        tf_world_setenv(w, "TASKFERRY_RO_BIND", ro_env);
        tf_world_setenv(w, "TF_K5_A", "a-value");
        tf_world_setenv(w, "TF_K5_B", "b-value");
        _cleanup_free_ char *script = NULL;
        {
                _cleanup_free_ char *s = strdup("");
                for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                        char *n = strdup_printf("%s(cat %s/seen >/dev/null 2>&1 && echo read-%s || echo noread-%s); "
                                                "(echo w > %s/w 2>/dev/null && echo write-%s || echo nowrite-%s); ",
                                                s, dirs[i], names[i], names[i], dirs[i], names[i], names[i]);
                        free(s);
                        s = n;
                }
                script = strdup_printf("%secho A=${TF_K5_A:-unset} B=${TF_K5_B:-unset}", s);
        }
        const char *flag[] = {"--rw-bind", dirs[0], NULL};
        _cleanup_free_ char *got = tf_shell_done_output(w, repo, flag, script, NULL);
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                bool ro = startswith(names[i], "ro-");
                _cleanup_free_ char *r = strdup_printf("read-%s\n", names[i]);
                _cleanup_free_ char *wr = strdup_printf("%swrite-%s\n", ro ? "no" : "", names[i]);
                ck_assert_msg(strstr(got, r), "%s not readable: %s", names[i], got);
                ck_assert_msg(strstr(got, wr), "%s: wanted %s in %s", names[i], wr, got);
                ck_assert_msg(tf_exists(tf_path(dirs[i], "w")) == !ro, "%s write on the host", names[i]);
        }
        /* config envDenylist strips A */
        ck_assert_msg(strstr(got, "A=unset B=b-value"), "%s", got);
        daemon_stop(w);
        /* env TASKFERRY_ENV_DENYLIST replaces the config's: B stripped, A kept */
        tf_world_setenv(w, "TASKFERRY_ENV_DENYLIST", "TF_K5_B");
        char *again = tf_shell_done_output(w, repo, NULL, "echo A=${TF_K5_A:-unset} B=${TF_K5_B:-unset}", NULL);
        ck_assert_str_eq(again, "A=a-value B=unset\n");
        free(again);
        daemon_stop(w);
        /* and set but empty: nothing stripped */
        tf_world_setenv(w, "TASKFERRY_ENV_DENYLIST", "");
        again = tf_shell_done_output(w, repo, NULL, "echo A=${TF_K5_A:-unset} B=${TF_K5_B:-unset}", NULL);
        ck_assert_str_eq(again, "A=a-value B=b-value\n");
        free(again);
        for (size_t i = 0; i < ELEMENTSOF(names); i++) free(dirs[i]);
        free(repo);
}
END_TEST

/* K5: TASKFERRY_PROVIDER_LIMITS replaces config providerLimits when set
 * ("" clears): a malformed config entry stops mattering once env is set */
TF_WORLD_TEST(k5_provider_limits_env_replaces) {
        const char *l[] = {"list", NULL};
        write_config(w, "{\"providerLimits\": {\"zai\": {\"maxConcurrentTasks\": 1}}}");
        tf_world_setenv(w, "TASKFERRY_PROVIDER_LIMITS", "");
        tf_run r = tf_cli(w, NULL, NULL, l);
        ck_assert_msg(r.exit_code == 0, "%s", r.out);
        tf_run_done(&r);
        daemon_stop(w);
        tf_world_setenv(w, "TASKFERRY_PROVIDER_LIMITS", "zai:1:2,openai:3");
        r = tf_cli(w, NULL, NULL, l);
        ck_assert_msg(r.exit_code == 0, "%s", r.out);
        tf_run_done(&r);
        daemon_stop(w);
        tf_world_setenv(w, "TASKFERRY_PROVIDER_LIMITS", "zai:1,openai");
        r = tf_cli(w, NULL, NULL, l);
        _cleanup_free_ char *out = tf_unescape(r.out);
        ck_assert_msg(r.exit_code == 1 && strstr(out, "malformed TASKFERRY_PROVIDER_LIMITS entry \"openai\""), "%s", out);
        tf_run_done(&r);
}
END_TEST

int main(void) {
        return tf_run_tests("config-precedence", "config", 300,
                            TF_TESTS(max_concurrent_tasks_from_config, read_once_per_start, k1_location,
                                     k2_validation_refuses_start, hostile_config_files, wait_default_timeout_from_config,
                                     cancel_grace_from_config, k4_booleans, k5_lists, k5_provider_limits_env_replaces));
}
