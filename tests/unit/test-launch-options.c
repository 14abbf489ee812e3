/* core/launch-options.c: the typed launch options (a deep copy, the request
 * file's "launch" object both ways) and the launch request file of a queued
 * task: its mode and dir, what of the caller's env goes to disk (nothing the
 * env file already holds), its load and its refusals, its drop. A whole
 * daemon (daemon.h) on its own dirs; tasks from records. */

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/env-file.h"
#include "core/launch-options.h"
#include "daemon-fixture.h"
#include "fileio.h"
#include "fs-util.h"
#include "json-util.h"
#include "paths.h"
#include "string-util.h"
#include "strv.h"
#include "unit.h"

static Manager m;

static void setup(void) { tf_daemon_setup(&m, "test-launch-options"); }
static void teardown(void) { tf_daemon_teardown(&m); }

/* The compact text of o (not taken). */
static char *text_of(json_object *o) {
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        ck_assert_ptr_nonnull(s);
        return strdup(s);
}

static void assert_to_json(const LaunchOptions *o, bool summary, const char *want) {
        json_object *j = launch_options_to_json(o, summary);
        ck_assert_ptr_nonnull(j);
        char *got = text_of(j);
        ck_assert_str_eq(got, want);
        free(got);
        json_object_put(j);
}

static LaunchOptions from_text(const char *text) {
        json_object *o = NULL;
        ck_assert_int_eq(json_parse_strict(text, strlen(text), &o), 0);
        LaunchOptions lo;
        ck_assert_int_eq(launch_options_from_json(o, &lo), 0);
        json_object_put(o);
        return lo;
}

static void assert_strv(char **l, char *const *want) {
        size_t n = strv_length((char **) want);
        ck_assert_uint_eq(strv_length(l), n);
        for (size_t i = 0; i < n; i++) ck_assert_str_eq(l[i], want[i]);
}

/* ---- the options ---- */

START_TEST(copy_is_deep) {
        char *rw[] = {"/a", "/b c", NULL}, *ro[] = {"/r", NULL};
        LaunchOptions o = {.no_sandbox = true,
                           .no_overlay = true,
                           .rw_bind = strv_copy(rw),
                           .ro_bind = strv_copy(ro),
                           .ro_bind_given = true,
                           .disk_max = 1 << 20,
                           .memory_max = 2 << 20,
                           .tasks_max = 7,
                           .summary_session_id = strdup("ses_1")};
        LaunchOptions c;
        ck_assert_int_eq(launch_options_copy(&o, &c), 0);
        /* nothing shared: the copy's lists and strings are its own */
        ck_assert_ptr_ne(c.rw_bind, o.rw_bind);
        ck_assert_ptr_ne(c.rw_bind[0], o.rw_bind[0]);
        ck_assert_ptr_ne(c.ro_bind, o.ro_bind);
        ck_assert_ptr_ne(c.ro_bind[0], o.ro_bind[0]);
        ck_assert_ptr_ne(c.summary_session_id, o.summary_session_id);
        launch_options_done(&o);
        /* and it outlives the original (ASan reads freed memory otherwise) */
        ck_assert(c.no_sandbox && c.no_overlay && c.ro_bind_given);
        assert_strv(c.rw_bind, rw);
        assert_strv(c.ro_bind, ro);
        ck_assert_int_eq(c.disk_max, 1 << 20);
        ck_assert_int_eq(c.memory_max, 2 << 20);
        ck_assert_int_eq(c.tasks_max, 7);
        ck_assert_str_eq(c.summary_session_id, "ses_1");
        launch_options_done(&c);
        /* done leaves it empty */
        ck_assert_ptr_null(c.rw_bind);
        ck_assert_ptr_null(c.summary_session_id);
        ck_assert(!c.no_sandbox && !c.ro_bind_given);

        /* an empty one copies to an empty one: no list made from nothing */
        LaunchOptions e = {0}, ce;
        memset(&ce, 0xa5, sizeof ce); /* what the copy must overwrite */
        ck_assert_int_eq(launch_options_copy(&e, &ce), 0);
        ck_assert_ptr_null(ce.rw_bind);
        ck_assert_ptr_null(ce.ro_bind);
        ck_assert_ptr_null(ce.summary_session_id);
        ck_assert(!ce.no_sandbox && !ce.ro_bind_given);
        launch_options_done(&ce);
}
END_TEST

START_TEST(to_json_exact_keys) {
        /* a summary: only its session, when it has one */
        LaunchOptions s = {.no_sandbox = true, .disk_max = 5, .summary_session_id = (char *) "ses_9"};
        assert_to_json(&s, true, "{\"summarySessionId\":\"ses_9\"}");
        s.summary_session_id = NULL;
        assert_to_json(&s, true, "{}");

        /* any other task: the flags and rwBind always, roBind null when not
         * given, no numbers when not given (nor a summary session) */
        LaunchOptions d = {.summary_session_id = (char *) "ses_9"};
        assert_to_json(&d, false, "{\"noSandbox\":false,\"noOverlay\":false,\"rwBind\":[],\"roBind\":null}");
        /* roBind given empty is [] (not null) */
        d.ro_bind_given = true;
        assert_to_json(&d, false, "{\"noSandbox\":false,\"noOverlay\":false,\"rwBind\":[],\"roBind\":[]}");
        char *rw[] = {"/a", "/b", NULL}, *ro[] = {"/r", NULL};
        LaunchOptions f = {.no_sandbox = true, .no_overlay = true, .rw_bind = rw, .ro_bind = ro, .ro_bind_given = true,
                           .disk_max = 1024, .memory_max = 2048, .tasks_max = 3};
        assert_to_json(&f, false,
                       "{\"noSandbox\":true,\"noOverlay\":true,\"rwBind\":[\"/a\",\"/b\"],\"roBind\":[\"/r\"],"
                       "\"diskMax\":1024,\"memoryMax\":2048,\"tasksMax\":3}");
        /* each number on its own */
        LaunchOptions one = {.memory_max = 9};
        assert_to_json(&one, false,
                       "{\"noSandbox\":false,\"noOverlay\":false,\"rwBind\":[],\"roBind\":null,\"memoryMax\":9}");
        /* ro_bind without ro_bind_given is not given */
        LaunchOptions stray = {.ro_bind = ro};
        assert_to_json(&stray, false, "{\"noSandbox\":false,\"noOverlay\":false,\"rwBind\":[],\"roBind\":null}");
}
END_TEST

/* What to_json wrote, from_json reads back as it was. */
static void assert_round_trip(const LaunchOptions *o, bool summary) {
        json_object *j = launch_options_to_json(o, summary);
        ck_assert_ptr_nonnull(j);
        LaunchOptions back;
        ck_assert_int_eq(launch_options_from_json(j, &back), 0);
        json_object_put(j);
        if (summary) {
                ck_assert_str_eq(strnull(back.summary_session_id), strnull(o->summary_session_id));
                ck_assert(!back.no_sandbox && !back.no_overlay && !back.ro_bind_given);
                ck_assert_ptr_null(back.rw_bind);
        } else {
                ck_assert_int_eq(back.no_sandbox, o->no_sandbox);
                ck_assert_int_eq(back.no_overlay, o->no_overlay);
                ck_assert_int_eq(back.ro_bind_given, o->ro_bind_given);
                assert_strv(back.rw_bind, o->rw_bind ? o->rw_bind : (char *[]) {NULL});
                assert_strv(back.ro_bind, o->ro_bind_given && o->ro_bind ? o->ro_bind : (char *[]) {NULL});
                ck_assert_int_eq(back.disk_max, o->disk_max);
                ck_assert_int_eq(back.memory_max, o->memory_max);
                ck_assert_int_eq(back.tasks_max, o->tasks_max);
                ck_assert_ptr_null(back.summary_session_id);
        }
        launch_options_done(&back);
}

START_TEST(round_trip) {
        assert_round_trip(&(LaunchOptions) {.summary_session_id = (char *) "ses_x"}, true);
        assert_round_trip(&(LaunchOptions) {0}, true);
        assert_round_trip(&(LaunchOptions) {0}, false);
        char *rw[] = {"/a", "/with \"quote\"", "/ü", NULL}, *ro[] = {"/r", NULL};
        assert_round_trip(&(LaunchOptions) {.no_sandbox = true, .rw_bind = rw, .ro_bind = ro, .ro_bind_given = true,
                                            .disk_max = INT64_C(1) << 40, .tasks_max = 1},
                          false);
        assert_round_trip(&(LaunchOptions) {.no_overlay = true, .ro_bind_given = true, .memory_max = 12345}, false);
}
END_TEST

START_TEST(from_json_ignores_other_types) {
        LaunchOptions lo = from_text("{\"noSandbox\":\"yes\",\"noOverlay\":1,\"rwBind\":\"/a\",\"roBind\":{\"x\":1},"
                                     "\"diskMax\":\"5\",\"memoryMax\":true,\"tasksMax\":null,\"summarySessionId\":3}");
        ck_assert(!lo.no_sandbox && !lo.no_overlay);
        ck_assert_ptr_null(lo.rw_bind);
        ck_assert_ptr_null(lo.ro_bind);
        ck_assert(!lo.ro_bind_given); /* an object is no roBind */
        ck_assert_int_eq(lo.disk_max, 0);
        ck_assert_int_eq(lo.memory_max, 0);
        ck_assert_int_eq(lo.tasks_max, 0);
        ck_assert_ptr_null(lo.summary_session_id);
        launch_options_done(&lo);

        /* inside a list only the strings count */
        lo = from_text("{\"rwBind\":[1,\"/a\",null,[\"/x\"],\"/b\"],\"roBind\":[false]}");
        assert_strv(lo.rw_bind, (char *[]) {"/a", "/b", NULL});
        ck_assert(lo.ro_bind_given); /* an array, if of nothing usable */
        ck_assert_uint_eq(strv_length(lo.ro_bind), 0);
        launch_options_done(&lo);

        /* unknown keys are no trouble; absent keys keep their defaults */
        lo = from_text("{\"other\":1}");
        ck_assert(!lo.no_sandbox && !lo.ro_bind_given);
        ck_assert_ptr_null(lo.rw_bind);
        launch_options_done(&lo);
}
END_TEST

START_TEST(from_json_refuses_a_non_object) {
        const char *bad[] = {"[]", "\"x\"", "1", "null", "true"};
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                json_object *o = NULL;
                ck_assert_int_eq(json_parse_strict(bad[i], strlen(bad[i]), &o), 0);
                LaunchOptions lo;
                memset(&lo, 0xa5, sizeof lo);
                ck_assert_int_eq(launch_options_from_json(o, &lo), -EBADMSG);
                /* ret is left empty, safe to free */
                ck_assert_ptr_null(lo.rw_bind);
                ck_assert_ptr_null(lo.summary_session_id);
                launch_options_done(&lo);
                json_object_put(o);
        }
}
END_TEST

/* ---- the request file ---- */

static Task *dispatch_task(const char *id) {
        return tf_taskf(&m, "{\"id\":\"%s\",\"status\":\"queued\",\"changesetStatus\":\"none\"}", id);
}

static char *request_path(const char *id) {
        char *d = tf_path_task_dir(&m.paths, id);
        char *p = strdup_printf("%s/%s", d, LAUNCH_REQUEST_FILE);
        free(d);
        return p;
}

static json_object *json_of(const char *text) {
        json_object *o = NULL;
        ck_assert_msg(json_parse_strict(text, strlen(text), &o) == 0, "not JSON: %s", text);
        return o;
}

START_TEST(save_writes_launch_and_env) {
        tf_use_env_file(&m, "SECRET=s3cret\nOTHER=file\n");
        Task *t = dispatch_task("oc_save");
        char *rw[] = {"/a", NULL};
        t->launch = (LaunchOptions) {.no_overlay = true, .rw_bind = strv_copy(rw), .disk_max = 100};
        /* SECRET as the env file has it (a worker's nested dispatch forwards
         * what it got), OTHER with a value of the caller's own, PLAIN the env
         * file does not know, NUM not a string */
        t->caller_env = json_of("{\"SECRET\":\"s3cret\",\"OTHER\":\"mine\",\"PLAIN\":\"p\",\"NUM\":1}");
        char *dir = tf_path_task_dir(&m.paths, t->id);
        ck_assert_int_eq(access(dir, F_OK), -1); /* save makes the dir */
        ck_assert_int_eq(launch_request_save(t), 0);
        struct stat st;
        ck_assert_int_eq(stat(dir, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0700);
        char *path = request_path(t->id);
        ck_assert_int_eq(lstat(path, &st), 0);
        ck_assert(S_ISREG(st.st_mode));
        ck_assert_int_eq(st.st_mode & 07777, 0600);
        char *data = tf_read_file(path, false);
        /* the env file's value never reaches the disk */
        ck_assert_ptr_null(strstr(data, "s3cret"));
        json_object *o = json_of(data);
        ck_assert_uint_eq(json_object_object_length(o), 2);
        char *launch = text_of(json_get_object(o, "launch"));
        ck_assert_str_eq(launch, "{\"noSandbox\":false,\"noOverlay\":true,\"rwBind\":[\"/a\"],\"roBind\":null,"
                                 "\"diskMax\":100}");
        char *env = text_of(json_get_object(o, "env"));
        ck_assert_str_eq(env, "{\"OTHER\":\"mine\",\"PLAIN\":\"p\",\"NUM\":1}");
        /* the task in memory keeps its whole caller env */
        ck_assert_str_eq(json_get_string(t->caller_env, "SECRET"), "s3cret");
        ck_assert_uint_eq(json_object_object_length(t->caller_env), 4);
        ck_assert(launch_request_exists(t));

        /* no caller env: "env": null; a second save replaces the first */
        json_object_put(t->caller_env);
        t->caller_env = NULL;
        ck_assert_int_eq(launch_request_save(t), 0);
        free(data);
        data = tf_read_file(path, false);
        json_object_put(o);
        o = json_of(data);
        json_object *e = (json_object *) 1;
        ck_assert(json_object_object_get_ex(o, "env", &e));
        ck_assert_ptr_null(e);
        ck_assert_int_eq(lstat(path, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0600);
        json_object_put(o);
        free(launch), free(env), free(data), free(path), free(dir);
}
END_TEST

/* A summary's request holds only its summary options. */
START_TEST(save_summary) {
        char *summaries = strdup_printf("%s/summaries", m.paths.state_dir);
        Task *t = tf_taskf(&m,
                           "{\"id\":\"oc_summary_2\",\"summaryOf\":{\"sourceTaskId\":\"oc_x\"},\"status\":\"queued\","
                           "\"directory\":\"%s\",\"internal\":true}",
                           summaries);
        free(summaries);
        ck_assert_int_eq(t->kind, TASK_KIND_SUMMARY);
        t->launch.summary_session_id = strdup("ses_s");
        t->launch.no_sandbox = true;
        ck_assert_int_eq(launch_request_save(t), 0);
        char *path = request_path(t->id), *data = tf_read_file(path, false);
        ck_assert_str_eq(data, "{\"launch\":{\"summarySessionId\":\"ses_s\"},\"env\":null}");
        /* and its load gives it back */
        launch_options_done(&t->launch);
        ck_assert_int_eq(launch_request_load(t), 0);
        ck_assert_str_eq(t->launch.summary_session_id, "ses_s");
        ck_assert_ptr_null(t->caller_env);
        free(path), free(data);
}
END_TEST

/* save fails with -errno where the dir cannot be made (a file in its way). */
START_TEST(save_fails_where_no_dir) {
        Task *t = dispatch_task("oc_blocked");
        char *dir = tf_path_task_dir(&m.paths, t->id);
        tf_write_file(dir, "x", 1, 0600);
        ck_assert_int_lt(launch_request_save(t), 0);
        free(dir);
}
END_TEST

static void write_request(const char *id, const char *text) {
        char *dir = tf_path_task_dir(&m.paths, id);
        ck_assert_int_eq(mkdir_p_chmod(dir, 0700), 0);
        free(dir);
        char *p = request_path(id);
        tf_write_file(p, text, strlen(text), 0600);
        free(p);
}

START_TEST(load_fills_the_task) {
        Task *t = dispatch_task("oc_load");
        /* what the task held before is replaced, not leaked (ASan) */
        t->launch.rw_bind = strv_copy((char *[]) {"/old", NULL});
        t->caller_env = json_of("{\"OLD\":\"1\"}");
        write_request(t->id, "{\"launch\":{\"noSandbox\":true,\"noOverlay\":false,\"rwBind\":[\"/x\"],\"roBind\":[],"
                             "\"tasksMax\":4},\"env\":{\"K\":\"v\"}}");
        ck_assert_int_eq(launch_request_load(t), 0);
        ck_assert(t->launch.no_sandbox);
        ck_assert(!t->launch.no_overlay);
        assert_strv(t->launch.rw_bind, (char *[]) {"/x", NULL});
        ck_assert(t->launch.ro_bind_given);
        ck_assert_int_eq(t->launch.tasks_max, 4);
        ck_assert_int_eq(t->launch.disk_max, 0);
        ck_assert_uint_eq(json_object_object_length(t->caller_env), 1);
        ck_assert_str_eq(json_get_string(t->caller_env, "K"), "v");
        /* env null: no caller env */
        write_request(t->id, "{\"launch\":{},\"env\":null}");
        ck_assert_int_eq(launch_request_load(t), 0);
        ck_assert_ptr_null(t->caller_env);
        ck_assert(!t->launch.no_sandbox);
        ck_assert_ptr_null(t->launch.rw_bind);
}
END_TEST

START_TEST(load_refuses) {
        Task *t = dispatch_task("oc_bad");
        /* none there: its dir missing, then the file */
        ck_assert_int_eq(launch_request_load(t), -ENOENT);
        char *dir = tf_path_task_dir(&m.paths, t->id);
        ck_assert_int_eq(mkdir_p_chmod(dir, 0700), 0);
        ck_assert_int_eq(launch_request_load(t), -ENOENT);
        const char *bad[] = {
                "",                                          /* empty */
                "garbage",                                   /* no JSON */
                "{\"launch\":{},\"env\":nu",                 /* truncated */
                "{\"launch\":{}",                            /* truncated */
                "{\"launch\":{},\"env\":null} trailing",     /* more after it */
                "[]",                                        /* no object */
                "null",
                "{\"env\":null}",                            /* no launch */
                "{\"launch\":{}}",                           /* no env */
                "{\"launch\":null,\"env\":null}",            /* launch no object */
                "{\"launch\":[],\"env\":null}",
                "{\"launch\":{},\"env\":[]}",                /* env neither object nor null */
                "{\"launch\":{},\"env\":\"K=v\"}",
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                write_request(t->id, bad[i]);
                ck_assert_msg(launch_request_load(t) == -EBADMSG, "loaded: %s", bad[i]);
                ck_assert_ptr_null(t->caller_env);
        }
        /* a NUL byte inside the file */
        char *p = request_path(t->id);
        static const char nul[] = "{\"launch\":{},\"env\":{\"K\":\"a\0b\"}}";
        tf_write_file(p, nul, sizeof nul - 1, 0600);
        ck_assert_int_eq(launch_request_load(t), -EBADMSG);
        free(p), free(dir);
}
END_TEST

START_TEST(drop_frees_and_removes) {
        Task *t = dispatch_task("oc_drop");
        t->launch.rw_bind = strv_copy((char *[]) {"/a", NULL});
        t->launch.summary_session_id = strdup("s");
        t->launch.no_sandbox = true;
        t->caller_env = json_of("{\"K\":\"v\"}");
        ck_assert_int_eq(launch_request_save(t), 0);
        ck_assert(launch_request_exists(t));
        launch_request_drop(t);
        ck_assert(!launch_request_exists(t));
        char *p = request_path(t->id);
        ck_assert_int_eq(access(p, F_OK), -1);
        ck_assert_int_eq(errno, ENOENT);
        ck_assert_ptr_null(t->caller_env);
        ck_assert_ptr_null(t->launch.rw_bind);
        ck_assert_ptr_null(t->launch.summary_session_id);
        ck_assert(!t->launch.no_sandbox);
        /* again, with nothing there (no file, then no dir): fine */
        launch_request_drop(t);
        char *dir = tf_path_task_dir(&m.paths, t->id);
        ck_assert_int_eq(rmdir(dir), 0);
        launch_request_drop(t);
        ck_assert(!launch_request_exists(t));
        /* the task dir's other files stay */
        ck_assert_int_eq(mkdir_p_chmod(dir, 0700), 0);
        char *other = tf_put(dir, "exit.json", "{}", 2);
        ck_assert_int_eq(launch_request_save(t), 0);
        launch_request_drop(t);
        ck_assert_int_eq(access(other, F_OK), 0);
        free(other), free(dir), free(p);
}
END_TEST

START_TEST(exists_when_it_cannot_be_told) {
        Task *t = dispatch_task("oc_exists");
        ck_assert(!launch_request_exists(t)); /* no dir */
        write_request(t->id, "{}");
        ck_assert(launch_request_exists(t)); /* any file, whatever it holds */
        char *p = request_path(t->id), *dir = tf_path_task_dir(&m.paths, t->id);
        ck_assert_int_eq(unlink(p), 0);
        ck_assert(!launch_request_exists(t));
        /* a dangling symlink is there (lstat, not stat) */
        ck_assert_int_eq(symlink("/nonexistent", p), 0);
        ck_assert(launch_request_exists(t));
        ck_assert_int_eq(unlink(p), 0);
        /* a task dir that cannot be looked into (a symlink loop: ELOOP, even
         * for root): it cannot be told, so it counts as there */
        ck_assert_int_eq(rmdir(dir), 0);
        ck_assert_int_eq(symlink(dir, dir), 0);
        ck_assert(launch_request_exists(t));
        ck_assert_int_eq(unlink(dir), 0);
        /* and an unreadable one, where permissions hold (not for root) */
        if (geteuid() != 0) {
                ck_assert_int_eq(mkdir(dir, 0700), 0);
                ck_assert_int_eq(chmod(dir, 0), 0);
                ck_assert(launch_request_exists(t));
                ck_assert_int_eq(chmod(dir, 0700), 0);
        }
        free(p), free(dir);
}
END_TEST

TF_MAIN("launch-options", "launch-options", setup, teardown, 60, copy_is_deep, to_json_exact_keys, round_trip,
        from_json_ignores_other_types, from_json_refuses_a_non_object, save_writes_launch_and_env, save_summary,
        save_fails_where_no_dir, load_fills_the_task, load_refuses, drop_frees_and_removes,
        exists_when_it_cannot_be_told)
