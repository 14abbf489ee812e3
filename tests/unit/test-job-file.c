/* job-file.c: the timer-job names and the job keys over the TOML subset
 * (docs/taskferry-jobs.5.md): every accepted form, every rejection, and
 * that no error message repeats a value (a prompt is a secret). The TOML
 * reader itself has its own suite (test-toml.c). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "job-file.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"
#include "strv.h"

/* ---- helpers ---- */

static void spec_ok(const char *text, job_spec *j) {
        unsigned line = 0;
        char *msg = NULL;
        int r = job_spec_parse(text, strlen(text), "/home/u", "/home/u/.config/taskferry/jobs", j, &line, &msg);
        ck_assert_msg(r == 0, "job failed (line %u): %s\n---\n%s", line, msg ? msg : "?", text);
}

static void spec_fails(const char *text, unsigned want_line, const char *needle) {
        job_spec j = {};
        unsigned line = 99;
        char *msg = NULL;
        int r = job_spec_parse(text, strlen(text), "/home/u", "/home/u/.config/taskferry/jobs", &j, &line, &msg);
        ck_assert_msg(r == -EINVAL, "job did not fail (r=%d)\n---\n%s", r, text);
        ck_assert_ptr_nonnull(msg);
        ck_assert_msg(strstr(msg, needle), "message '%s' lacks '%s'\n---\n%s", msg, needle, text);
        ck_assert_msg(line == want_line, "error on line %u, expected %u (%s)\n---\n%s", line, want_line, msg, text);
        ck_assert_msg(!strstr(msg, "SECRET"), "the message repeats a value: %s", msg);
        ck_assert_ptr_null(j.directory);
        free(msg);
}

/* ---- names ---- */

START_TEST(names) {
        ck_assert(job_name_is_valid("demo"));
        ck_assert(job_name_is_valid("nightly-review_2.x"));
        ck_assert(job_name_is_valid("a.b"));
        ck_assert(!job_name_is_valid(""));
        ck_assert(!job_name_is_valid(NULL));
        ck_assert(!job_name_is_valid("."));
        ck_assert(!job_name_is_valid(".."));
        ck_assert(!job_name_is_valid(".hidden"));
        ck_assert(!job_name_is_valid("-x"));
        ck_assert(job_name_is_valid("x-"));
        ck_assert(!job_name_is_valid("../x"));
        ck_assert(!job_name_is_valid("a/b"));
        ck_assert(!job_name_is_valid("a b"));
        ck_assert(!job_name_is_valid("a\\x2d"));
        ck_assert(!job_name_is_valid("a@b"));
        ck_assert(!job_name_is_valid("ä"));
        char long_name[JOB_NAME_MAX + 2];
        memset(long_name, 'a', sizeof long_name);
        long_name[JOB_NAME_MAX] = 0;
        ck_assert(job_name_is_valid(long_name));
        long_name[JOB_NAME_MAX] = 'a';
        long_name[JOB_NAME_MAX + 1] = 0;
        ck_assert(!job_name_is_valid(long_name));
}
END_TEST

/* ---- the job keys ---- */

START_TEST(job_all_keys) {
        job_spec j = {};
        spec_ok("# a nightly review\n"
                "directory = \"~/src/app\"\n"
                "executor = \"pi\"\n"
                "model = \"openai/gpt-5.6-sol\"\n"
                "variant = 'high'\n"
                "prompt = \"\"\"\nReview the last day's commits.\n\"\"\"\n"
                "rw_bind = [\"~/.cache/app\", \"/srv/data\"]\n"
                "ro_bind = [\n  \"/usr/share/doc\",\n]\n"
                "network = \"proxy\"\n"
                "allow_hosts = [\"pypi.org\", \"*.github.com:443\"]\n",
                &j);
        ck_assert_str_eq(j.network, "proxy");
        ck_assert_int_eq(strv_length(j.allow_hosts), 2);
        ck_assert_str_eq(j.allow_hosts[1], "*.github.com:443");
        ck_assert_str_eq(j.directory, "/home/u/src/app");
        ck_assert_str_eq(j.executor, "pi");
        ck_assert_str_eq(j.model, "openai/gpt-5.6-sol");
        ck_assert_str_eq(j.variant, "high");
        ck_assert_str_eq(j.prompt, "Review the last day's commits.\n");
        ck_assert_ptr_null(j.prompt_file);
        ck_assert_int_eq(strv_length(j.rw_bind), 2);
        ck_assert_str_eq(j.rw_bind[0], "/home/u/.cache/app");
        ck_assert_str_eq(j.rw_bind[1], "/srv/data");
        ck_assert_int_eq(strv_length(j.ro_bind), 1);
        ck_assert_str_eq(j.ro_bind[0], "/usr/share/doc");
        job_spec_done(&j);
}
END_TEST

START_TEST(job_minimal_and_prompt_file) {
        job_spec j = {};
        spec_ok("directory = '/srv/repo'\nprompt = 'echo hi > new.txt'\n", &j);
        ck_assert_str_eq(j.directory, "/srv/repo");
        ck_assert_ptr_null(j.executor);
        ck_assert_ptr_null(j.model);
        ck_assert_ptr_null(j.variant);
        ck_assert_ptr_null(j.rw_bind);
        ck_assert_ptr_null(j.ro_bind);
        ck_assert_str_eq(j.prompt, "echo hi > new.txt");
        job_spec_done(&j);
        /* relative to the job file's directory */
        spec_ok("directory = '~'\n\nprompt_file = 'prompts/nightly.md'\nrw_bind = []\n", &j);
        ck_assert_str_eq(j.directory, "/home/u");
        ck_assert_str_eq(j.prompt_file, "/home/u/.config/taskferry/jobs/prompts/nightly.md");
        ck_assert_uint_eq(j.prompt_file_line, 3);
        ck_assert_ptr_null(j.prompt);
        ck_assert_ptr_null(j.rw_bind);
        job_spec_done(&j);
        spec_ok("directory = '/r'\nprompt_file = '~/p.txt'\n", &j);
        ck_assert_str_eq(j.prompt_file, "/home/u/p.txt");
        job_spec_done(&j);
        spec_ok("directory = '/r'\nprompt_file = '/etc/p.txt'\n", &j);
        ck_assert_str_eq(j.prompt_file, "/etc/p.txt");
        job_spec_done(&j);
        /* every executor of the table */
        spec_ok("directory = '/r'\nprompt = 'x'\nexecutor = 'shell'\n", &j);
        ck_assert_str_eq(j.executor, "shell");
        job_spec_done(&j);
        spec_ok("directory = '/r'\nprompt = 'x'\nexecutor = 'opencode'\n", &j);
        job_spec_done(&j);
}
END_TEST

/* A job file, the line its error names (0: none) and what the message
 * says. */
static const struct {
        const char *text;
        unsigned line;
        const char *needle;
} job_rejections_cases[] = {
        {"directory = '/r'\nprompt = 'SECRET'\nschedule = 'daily'\n", 3, "unknown key schedule"},
        {"directory = '/r'\nprompt = 'SECRET'\nschedule = 'daily'\n", 3, "a job has: directory, executor"},
        {"directory = '/r'\nprompt = 'SECRET'\nrwBind = ['/x']\n", 3, "unknown key rwBind"},
        {"prompt = 'SECRET'\n", 0, "missing key directory"},
        {"directory = '/r'\n", 0, "missing key prompt"},
        {"directory = '/r'\nprompt = 'SECRET'\nprompt_file = 'p'\n", 3, "exclude each other"},
        {"directory = '/r'\nprompt_file = 'p'\nprompt = 'SECRET'\n", 3, "exclude each other"},
        {"directory = 'src/app'\nprompt = 'SECRET'\n", 1, "directory must be an absolute path"},
        {"directory = '~other/x'\nprompt = 'SECRET'\n", 1, "directory must be an absolute path"},
        {"directory = ''\nprompt = 'SECRET'\n", 1, "directory must not be empty"},
        {"directory = ['/r']\nprompt = 'SECRET'\n", 1, "directory must be a string"},
        {"directory = true\nprompt = 'SECRET'\n", 1, "directory must be a string"},
        {"directory = '/r'\nprompt = ''\n", 2, "prompt must not be empty"},
        {"directory = '/r'\nprompt = ['SECRET']\n", 2, "prompt must be a string"},
        {"directory = '/r'\nprompt = 'SECRET'\nexecutor = 'claude'\n", 3,
         "executor must be one of opencode, pi, shell"},
        {"directory = '/r'\nprompt = 'SECRET'\nmodel = ''\n", 3, "model must not be empty"},
        {"directory = '/r'\nprompt = 'SECRET'\nvariant = false\n", 3, "variant must be a string"},
        /* integers parse (toml.h) but no job key takes one */
        {"directory = 42\nprompt = 'SECRET'\n", 1, "directory must be a string"},
        {"directory = '/r'\nprompt = -7\n", 2, "prompt must be a string"},
        {"directory = '/r'\nprompt = 'SECRET'\nmodel = 1_000\n", 3, "model must be a string"},
        {"directory = '/r'\nprompt = 'SECRET'\nrw_bind = 7\n", 3, "rw_bind must be an array of paths"},
        {"directory = '/r'\nprompt = 'SECRET'\nro_bind = ['/x', 42]\n", 3, "ro_bind entries must be absolute"},
        {"directory = '/r'\nprompt = 'SECRET'\nrw_bind = '/x'\n", 3, "rw_bind must be an array of paths"},
        {"directory = '/r'\nprompt = 'SECRET'\nro_bind = ['rel/x']\n", 3, "ro_bind entries must be absolute paths"},
        {"directory = '/r'\nprompt = 'SECRET'\nro_bind = ['']\n", 3, "ro_bind entries must be absolute"},
        {"directory = '/r'\nprompt_file = '~nobody/p'\n", 2, "prompt_file must be a path"},
        {"directory = '/r'\nprompt = 'SECRET'\nnetwork = 'open'\n", 3, "network must be one of proxy, none, host"},
        {"directory = '/r'\nprompt = 'SECRET'\nallow_hosts = 'pypi.org'\n", 3, "allow_hosts must be an array of hosts"},
        {"directory = '/r'\nprompt = 'SECRET'\nallow_hosts = ['a.b', 7]\n", 3, "allow_hosts must be an array of hosts"},
        /* a TOML error comes through with its line */
        {"directory = '/r'\nprompt = \"SECRET\n", 2, "unterminated string"},
};

START_TEST(job_rejections) {
        spec_fails(job_rejections_cases[_i].text, job_rejections_cases[_i].line, job_rejections_cases[_i].needle);
}
END_TEST

START_TEST(job_home_required_for_tilde) {
        job_spec j = {};
        unsigned line = 0;
        char *msg = NULL;
        const char *text = "directory = '~/x'\nprompt = 'p'\n";
        ck_assert_int_eq(job_spec_parse(text, strlen(text), NULL, "/b", &j, &line, &msg), -EINVAL);
        ck_assert_uint_eq(line, 1);
        free(msg);
        msg = NULL;
        ck_assert_int_eq(job_spec_parse(text, strlen(text), "relative", "/b", &j, &line, &msg), -EINVAL);
        free(msg);
}
END_TEST

int main(void) {
        Suite *s = suite_create("job-file");
        tf_tcase(s, "names", NULL, NULL, 0, TF_TESTS(names));
        TCase *tj = tf_tcase(s, "job", NULL, NULL, 0, TF_TESTS(job_all_keys, job_minimal_and_prompt_file,
                job_home_required_for_tilde));
        TF_LOOP(tj, job_rejections, job_rejections_cases);
        return tf_run_suite(s);
}
