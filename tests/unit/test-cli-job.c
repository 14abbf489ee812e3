/* cli-job.h: `taskferry job run` and `job list` over real job files and a
 * fake daemon (cli-fixture.h): the file checks (name, missing, not a
 * regular file, too large, malformed) and their texts, the prompt_file
 * rules (no symlink, no device, one newline stripped, not empty, no NUL),
 * the dispatch a job makes and what it prints (never the prompt), and the
 * list rows (no user manager here: the fixture has no bus). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli-fixture.h"
#include "cli-job.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"

#define JOB_HELP "see taskferry-jobs(5) for what a job file holds"

static char *jobs;  /* <config>/taskferry/jobs */
static char *home;

static void setup(void) {
        cli_fixture_setup();
        jobs = tf_path(cli_fixture_dir, "config/taskferry/jobs");
        home = tf_path(cli_fixture_dir, "home");
        tf_mkdirs(cli_fixture_dir, "config/taskferry/jobs");
}

static void teardown(void) {
        free(jobs);
        free(home);
        cli_fixture_teardown();
}

static char *put_job(const char *name, const char *text) {
        _cleanup_free_ char *rel = strdup_printf("config/taskferry/jobs/%s.toml", name);
        return tf_put(cli_fixture_dir, rel, text, strlen(text));
}

/* cli_job_load fails with r and exactly this text. */
static void load_fails(const char *name, int r, const char *text) {
        job_spec j = {};
        cli_error e = {};
        ck_assert_int_eq(cli_job_load(jobs, name, home, &j, &e), r);
        ck_assert_msg(streq_ptr(e.text, text), "[%s], want [%s]", strnull(e.text), text);
        ck_assert_int_eq(e.exit_code, r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE);
        job_spec_done(&j);
        cli_error_done(&e);
}

START_TEST(jobs_dir) {
        tf_paths p = {.config_file = (char *) "/x/y/config.json"};
        _cleanup_free_ char *d = cli_jobs_dir(&p);
        ck_assert_str_eq(d, "/x/y/jobs");
        tf_paths none = {};
        ck_assert_ptr_null(cli_jobs_dir(&none));
}
END_TEST

START_TEST(invalid_names_are_usage_errors) {
        static const char *const bad[] = {"", "../x", "a/b", ".hidden", "-x", "sp ace"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                job_spec j = {};
                cli_error e = {};
                ck_assert_int_eq(cli_job_load(jobs, bad[i], home, &j, &e), -EINVAL);
                _cleanup_free_ char *want = strdup_printf("invalid job name: \"%s\"", bad[i]);
                ck_assert_str_eq(e.text, want);
                ck_assert_str_eq(e.help, "A job name is the file name of ${XDG_CONFIG_HOME:-~/.config}/taskferry/jobs/"
                                         "<name>.toml without .toml: 1 to 200 of A-Z a-z 0-9 _ . -, not starting with a "
                                         "dot or a dash");
                ck_assert_int_eq(e.exit_code, CLI_EXIT_USAGE);
                cli_error_done(&e);
        }
}
END_TEST

START_TEST(job_file_problems) {
        _cleanup_free_ char *missing = strdup_printf("%s/gone.toml", jobs);
        _cleanup_free_ char *t1 = strdup_printf("error: no job gone: %s does not exist\nhelp: write it (" JOB_HELP
                                                "), or run taskferry job list", missing);
        load_fails("gone", -EIO, t1);

        tf_mkdirs(cli_fixture_dir, "config/taskferry/jobs/adir.toml");
        _cleanup_free_ char *t2 = strdup_printf("error: job file %s/adir.toml is a directory, not a file\nhelp: " JOB_HELP, jobs);
        load_fails("adir", -EIO, t2);

        /* a fifo never blocks the read */
        _cleanup_free_ char *fifo = strdup_printf("%s/pipe.toml", jobs);
        ck_assert_int_eq(mkfifo(fifo, 0600), 0);
        _cleanup_free_ char *t3 = strdup_printf("error: job file %s is not a regular file\nhelp: " JOB_HELP, fifo);
        load_fails("pipe", -EIO, t3);

        size_t n = JOB_FILE_MAX_BYTES + 1;
        _cleanup_free_ char *big = malloc(n + 1);
        memset(big, '#', n);
        big[n] = 0;
        _cleanup_free_ char *bigf = put_job("big", big);
        _cleanup_free_ char *t4 = strdup_printf("error: job file %s is larger than 1 MiB\nhelp: " JOB_HELP, bigf);
        load_fails("big", -EIO, t4);

        /* malformed: the file and the line, never the value */
        _cleanup_free_ char *bad = put_job("bad", "directory = \"/tmp\"\nprompt = SECRET-PROMPT\n");
        job_spec j = {};
        cli_error e = {};
        ck_assert_int_eq(cli_job_load(jobs, "bad", home, &j, &e), -EIO);
        _cleanup_free_ char *prefix = strdup_printf("error: %s:2: ", bad);
        ck_assert_msg(startswith(e.text, prefix), "%s", e.text);
        ck_assert(strstr(e.text, "\nhelp: " JOB_HELP));
        ck_assert(!strstr(e.text, "SECRET"));
        cli_error_done(&e);
        job_spec_done(&j);

        /* a missing key has no line */
        _cleanup_free_ char *nodir = put_job("nodir", "prompt = \"p\"\n");
        ck_assert_int_eq(cli_job_load(jobs, "nodir", home, &j, &e), -EIO);
        _cleanup_free_ char *prefix2 = strdup_printf("error: %s: ", nodir);
        ck_assert_msg(startswith(e.text, prefix2) && (e.text[strlen(prefix2)] < '0' || e.text[strlen(prefix2)] > '9'), "%s",
                      e.text);
        cli_error_done(&e);
        job_spec_done(&j);
}
END_TEST

/* The prompt_file a job names, read as `--prompt -` reads stdin. */
START_TEST(prompt_file_rules) {
        _cleanup_free_ char *file = strdup_printf("%s/demo.toml", jobs);
        job_spec j = {.prompt_file_line = 3};
        char *text = NULL;
        size_t len = 0;
        cli_error e = {};

        j.prompt_file = tf_put(cli_fixture_dir, "p/crlf.txt", "do it\r\n", 7);
        ck_assert_int_eq(cli_job_read_prompt_file(&j, file, &text, &len, &e), 0);
        ck_assert_str_eq(text, "do it");
        ck_assert_uint_eq(len, 5);
        free(text);
        free(j.prompt_file);
        /* only one newline goes */
        j.prompt_file = tf_put(cli_fixture_dir, "p/two.txt", "a\n\n", 3);
        ck_assert_int_eq(cli_job_read_prompt_file(&j, file, &text, &len, &e), 0);
        ck_assert_uint_eq(len, 2);
        free(text);
        free(j.prompt_file);

        static const struct {
                const char *what, *content; /* content NULL: made below */
                size_t len;
                const char *why;
        } bad[] = {
                {"empty", "\n", 1, "is empty"},
                {"nul", "a\0b", 3, "holds a NUL byte"},
                {"link", NULL, 0, "is a symbolic link (a prompt_file must be the file itself)"},
                {"device", NULL, 0, "is not a regular file"},
                {"missing", NULL, 0, "does not exist"},
                {"dir", NULL, 0, "is a directory, not a file"},
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *rel = strdup_printf("p/%s", bad[i].what);
                if (bad[i].content) j.prompt_file = tf_put(cli_fixture_dir, rel, bad[i].content, bad[i].len);
                else if (streq(bad[i].what, "link")) {
                        _cleanup_free_ char *secret = tf_put(cli_fixture_dir, "home/.ssh/id_ed25519", "KEY", 3);
                        j.prompt_file = tf_path(cli_fixture_dir, rel);
                        ck_assert_int_eq(symlink(secret, j.prompt_file), 0);
                } else if (streq(bad[i].what, "device"))
                        j.prompt_file = strdup("/dev/zero");
                else if (streq(bad[i].what, "dir")) {
                        tf_mkdirs(cli_fixture_dir, rel);
                        j.prompt_file = tf_path(cli_fixture_dir, rel);
                } else
                        j.prompt_file = tf_path(cli_fixture_dir, rel);
                text = NULL;
                ck_assert_int_eq(cli_job_read_prompt_file(&j, file, &text, &len, &e), -EIO);
                ck_assert_ptr_null(text);
                _cleanup_free_ char *want = strdup_printf("error: %s:3: prompt_file %s %s\nhelp: " JOB_HELP, file,
                                                          j.prompt_file, bad[i].why);
                ck_assert_str_eq(e.text, want);
                ck_assert(!strstr(e.text, "KEY"));
                cli_error_done(&e);
                free(j.prompt_file);
        }
        j.prompt_file = NULL;
}
END_TEST

/* job run: one dispatch with the job's keys and `job`, printed without
 * the prompt. */
START_TEST(run_dispatches_the_job) {
        cli_fake_rule rules[] = {
                {"task.dispatch", FAKE_FRAMES(FAKE_OK("{\"id\":\"oc_j\",\"status\":\"queued\",\"promptPreview\":\"secret "
                                                      "prompt\",\"promptTotalChars\":300,\"next\":\"n\"}"))},
                {}};
        cli_fake_start(rules);
        tf_mkdirs(cli_fixture_dir, "repo/sub");
        _cleanup_free_ char *real = tf_path(cli_fixture_dir, "repo/sub");
        tf_symlink(cli_fixture_dir, "repo/sub", "link");
        _cleanup_free_ char *prompt = tf_put(cli_fixture_dir, "config/taskferry/jobs/demo.prompt", "secret prompt\n", 14);
        _cleanup_free_ char *text = strdup_printf("directory = \"%s/link\"\nprompt_file = \"demo.prompt\"\nmodel = \"p/m\"\n"
                                                  "executor = \"opencode\"\nrw_bind = [\"~/cache\"]\n",
                                                  cli_fixture_dir);
        _cleanup_free_ char *f = put_job("demo", text);
        cli_cmd c;
        cli_cmd_ok(&c, "job", "run", "demo", NULL);
        cli_cmd_value_is(&c, "{\"id\":\"oc_j\",\"status\":\"queued\",\"next\":\"n\"}");
        ck_assert_str_eq(json_get_string(c.raw, "promptPreview"), "secret prompt");
        _cleanup_json_ json_object *p = cli_fake_params("task.dispatch", -1);
        ck_assert_str_eq(json_get_string(p, "prompt"), "secret prompt");
        ck_assert_str_eq(json_get_string(p, "directory"), real);
        ck_assert_str_eq(json_get_string(p, "model"), "p/m");
        ck_assert_str_eq(json_get_string(p, "executor"), "opencode");
        ck_assert_str_eq(json_get_string(p, "job"), "demo");
        _cleanup_free_ char *bind = strdup_printf("[\"%s/cache\"]", home);
        ck_assert_str_eq(json_to_line(json_get_array(p, "rwBind"), NULL), bind);
        ck_assert_ptr_nonnull(json_get_object(p, "env"));
        ck_assert(!strstr(c.out, "secret") && !strstr(c.errout, "secret"));
        cli_cmd_done(&c);
}
END_TEST

START_TEST(run_errors_name_the_file) {
        cli_fake_rule rules[] = {
                {"task.dispatch", FAKE_FRAMES(FAKE_ERR("REQUEST_FAILED", "--model is required", "pass --model",
                                                       "error: --model is required\\nhelp: pass --model"))},
                {}};
        cli_fake_start(rules);
        _cleanup_free_ char *text = strdup_printf("directory = \"%s/work\"\nprompt = \"p\"\nexecutor = \"pi\"\n", cli_fixture_dir);
        _cleanup_free_ char *f = put_job("nomodel", text);
        cli_cmd c;
        cli_cmd_run(&c, "job", "run", "nomodel", NULL);
        _cleanup_free_ char *want = strdup_printf("error: %s: missing key model (its executor pi needs one)\nhelp: add model = "
                                                  "\"<provider/model>\", or executor = \"shell\"; " JOB_HELP, f);
        ck_assert_int_lt(c.r, 0);
        ck_assert_str_eq(c.err.text, want);
        ck_assert_int_eq(c.err.exit_code, CLI_EXIT_FAILURE);
        cli_cmd_done(&c);

        _cleanup_free_ char *t2 = strdup_printf("directory = \"%s/nowhere\"\nprompt = \"p\"\n", cli_fixture_dir);
        _cleanup_free_ char *f2 = put_job("nodir", t2);
        cli_cmd_run(&c, "job", "run", "nodir", NULL);
        _cleanup_free_ char *want2 = strdup_printf("error: %s: directory %s/nowhere does not exist\nhelp: " JOB_HELP, f2,
                                                   cli_fixture_dir);
        ck_assert_str_eq(c.err.text, want2);
        cli_cmd_done(&c);
        ck_assert_uint_eq(cli_fake_count("task.dispatch"), 1);
}
END_TEST

START_TEST(list_without_jobs) {
        rmdir(jobs);
        cli_cmd c;
        cli_cmd_run(&c, "job", "list", NULL);
        _cleanup_free_ char *want = strdup_printf("{\"jobsDir\":\"%s\",\"jobs\":\"none found in %s\"}", jobs, jobs);
        cli_cmd_value_is(&c, want);
        cli_cmd_done(&c);
}
END_TEST

START_TEST(list_rows) {
        cli_fake_rule rules[] = {
                {"task.list", FAKE_FRAMES(FAKE_OK("{\"counts\":{},\"tasks\":[{\"id\":\"oc_2\",\"status\":\"running\"},"
                                                  "{\"id\":\"oc_1\",\"status\":\"done\",\"job\":\"b\"},"
                                                  "{\"id\":\"oc_0\",\"status\":\"crashed\",\"job\":\"b\"}]}"))},
                {}};
        cli_fake_start(rules);
        _cleanup_free_ char *fb = put_job("b", "directory = \"/srv/b\"\nprompt = \"p\"\nexecutor = \"shell\"\n");
        _cleanup_free_ char *fa = put_job("a", "directory = \"/srv/a\"\nprompt = \"p\"\n");
        _cleanup_free_ char *fc = put_job("c", "directory = 5\n");
        _cleanup_free_ char *other = tf_put(cli_fixture_dir, "config/taskferry/jobs/notes.txt", "x", 1);
        _cleanup_free_ char *hidden = tf_put(cli_fixture_dir, "config/taskferry/jobs/.h.toml", "x", 1);
        cli_cmd c;
        cli_cmd_ok(&c, "job", "list", NULL);
        json_object *rows = json_get_array(c.value, "jobs");
        ck_assert_int_eq(json_object_array_length(rows), 3);
        ck_assert_str_eq(json_to_line(json_object_array_get_idx(rows, 0), NULL),
                         "{\"name\":\"a\",\"directory\":\"/srv/a\",\"executor\":null,\"timer\":\"(no user manager)\","
                         "\"nextRun\":null,\"lastTask\":null,\"lastStatus\":null}");
        ck_assert_str_eq(json_to_line(json_object_array_get_idx(rows, 1), NULL),
                         "{\"name\":\"b\",\"directory\":\"/srv/b\",\"executor\":\"shell\",\"timer\":\"(no user manager)\","
                         "\"nextRun\":null,\"lastTask\":\"oc_1\",\"lastStatus\":\"done\"}");
        json_object *broken = json_object_array_get_idx(rows, 2);
        ck_assert_str_eq(json_get_string(broken, "name"), "c");
        _cleanup_free_ char *prefix = strdup_printf("%s:1: ", fc);
        ck_assert_msg(startswith(json_get_string(broken, "error"), prefix), "%s", json_get_string(broken, "error"));
        ck_assert_int_eq(json_object_object_length(broken), 2);
        cli_fake_params_are("task.list", "{}");
        cli_cmd_done(&c);
}
END_TEST

int main(void) {
        Suite *s = suite_create("cli-job");
        tf_tcase(s, "job", setup, teardown, 30,
                 TF_TESTS(jobs_dir, invalid_names_are_usage_errors, job_file_problems, prompt_file_rules,
                          run_dispatches_the_job, run_errors_name_the_file, list_without_jobs, list_rows));
        return tf_run_suite(s);
}
