/* Timer jobs end to end (docs/taskferry-jobs.5.md): a real
 * daemon, real bwrap, overlayfs and git. `taskferry job run <name>` from a
 * minimal environment (what systemd gives taskferry-job@<name>.service:
 * `env -i` with HOME, PATH and the runtime dir) dispatches the job file's
 * task as an ordinary one — directory, executor, prompt, changeset held —
 * marked with its job; prompt_file; the errors (unknown key, malformed file,
 * bad names, missing file) name the file and line and never the prompt;
 * a prompt_file or job file that is a fifo, /dev/zero, a directory or too
 * big is refused at once; `job list` shows the jobs, their timer (no user
 * manager here) and their last task. */

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"
#include "utf8.h"

static tf_world *w;

static void setup(void) {
        w = tf_world_new(NULL);
        tf_daemon_start(w);
        /* in the env of every later CLI call of the world, not the daemon's:
         * a worker that sees it got a caller env that was not minimal */
        tf_world_setenv(w, "TF_JOB_CALLER_MARK", "set");
}

static void teardown(void) {
        tf_world_free(w);
        w = NULL;
}

/* A git repository at dir (relative: under the world's repo_parent) with one commit; its path. */
static char *make_repo(const char *dir) { return tf_repo_new(w, dir, "echo base > README"); }

/* ~/.config/taskferry/jobs (the default: the minimal env has no XDG_CONFIG_HOME) */
static char *home_jobs_dir(void) {
        char *d = strdup_printf("%s/.config/taskferry/jobs", w->home);
        char *out = tf_shf(w, NULL, "mkdir -p '%s'", d);
        free(out);
        return d;
}

static void write_job(const char *dir, const char *name, const char *text) {
        _cleanup_free_ char *p = strdup_printf("%s/%s.toml", dir, name);
        tf_write(p, text, strlen(text), 0600);
}

/* `taskferry <args>` as systemd's user manager would run it: env -i with
 * HOME, PATH and where the daemon listens (the world's runtime dir stands
 * for $XDG_RUNTIME_DIR/taskferry), nothing else — no provider keys, no
 * XDG_CONFIG_HOME, no bus; never auto-starting a daemon; at most 30 s. */
static tf_run minimal_cli(const char *args) { return tf_cli_minimal(w, 30, "", args); }

/* The number of tasks the daemon knows. */
static int task_count(void) {
        json_object *f = tf_rpc(w, "task.list", "{}");
        json_object *c = json_get_object(tf_result(f), "counts");
        int n = 0;
        json_object_object_foreach(c, k, v) {
                (void) k;
                n += json_object_get_int(v);
        }
        json_object_put(f);
        return n;
}

/* `taskferry diff <id>` (the pending patch) */
static char *diff_of(const char *id) {
        const char *argv[] = {"diff", id, NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        ck_assert_msg(r.exit_code == 0, "diff failed: %s", r.out);
        free(r.err);
        return r.out;
}

/* ---- job run ---- */

START_TEST(run_from_minimal_env_is_an_ordinary_task) {
        _cleanup_free_ char *repo = make_repo(tf_path(w->home, "repo"));
        _cleanup_free_ char *jobs = home_jobs_dir();
        write_job(jobs, "demo",
                  "# the demo job\n"
                  "directory = \"~/repo\"\n"
                  "executor = \"shell\"\n"
                  "prompt = \"printf 'from the job\\\\n' > job.txt; "
                  "if [ -n \\\"$TF_JOB_CALLER_MARK\\\" ]; then echo not-minimal > env.txt; fi\"\n");
        int before = task_count();
        tf_run r = minimal_cli("job run demo --json");
        ck_assert_msg(r.exit_code == 0, "job run failed (%d): %s %s", r.exit_code, r.out, r.err);
        json_object *res = tf_json(r.out);
        tf_run_done(&r);
        /* what dispatch prints: the TaskSummary and its next hint */
        const char *id = tf_jstr(res, "id");
        ck_assert_ptr_nonnull(id);
        _cleanup_free_ char *task = strdup(id);
        ck_assert_str_eq(tf_jstr(res, "directory"), repo);
        ck_assert_str_eq(tf_jstr(res, "job"), "demo");
        ck_assert_ptr_nonnull(tf_jstr(res, "next"));
        json_object_put(res);
        ck_assert_int_eq(task_count(), before + 1);

        json_object *st = tf_wait_settled(w, task);
        ck_assert_str_eq(tf_jstr(st, "status"), "done");
        json_object_put(st);
        st = tf_status_full(w, task);
        ck_assert_str_eq(tf_jstr(st, "directory"), repo);
        ck_assert_str_eq(tf_jstr(st, "executorId"), "shell");
        ck_assert_str_eq(tf_jstr(st, "job"), "demo");
        ck_assert_str_eq(tf_jstr(st, "changesetStatus"), "pending");
        ck_assert(startswith(tf_jstr(st, "promptPreview"), "printf 'from the job\\n' > job.txt;"));
        json_object_put(st);
        /* held for the user: the repo is untouched, the patch has the file */
        ck_assert(!tf_exists(tf_path(repo, "job.txt")));
        _cleanup_free_ char *patch = diff_of(task);
        ck_assert_msg(strstr(patch, "+++ b/job.txt") && strstr(patch, "+from the job"), "patch: %s", patch);
        ck_assert_msg(!strstr(patch, "env.txt"), "the job's caller env was not minimal: %s", patch);

        /* the lean status names the job too */
        const char *argv[] = {"status", task, NULL};
        tf_run s = tf_cli(w, NULL, NULL, argv);
        ck_assert_msg(strstr(s.out, "\njob: demo\n"), "status: %s", s.out);
        tf_run_done(&s);
}
END_TEST

START_TEST(run_with_xdg_config_home_and_toon_output) {
        _cleanup_free_ char *repo = make_repo("repo");
        /* the world's env has XDG_CONFIG_HOME=<cfg> */
        _cleanup_free_ char *jobs = strdup_printf("%s/taskferry/jobs", w->cfg);
        free(tf_shf(w, NULL, "mkdir -p '%s'", jobs));
        _cleanup_free_ char *text =
                strdup_printf("directory = '%s'\nexecutor = 'shell'\nprompt = ': SECRET prompt text'\n", repo);
        write_job(jobs, "cfg-job", text);
        const char *argv[] = {"job", "run", "cfg-job", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        ck_assert_msg(r.exit_code == 0, "job run failed (%d): %s", r.exit_code, r.out);
        /* TOON, as dispatch prints it */
        ck_assert_msg(startswith(r.out, "id: oc_") && strstr(r.out, "\njob: cfg-job\n"), "out: %s", r.out);
        /* but not the prompt (under systemd this is the journal) */
        ck_assert_msg(!strstr(r.out, "SECRET") && !strstr(r.err, "SECRET"), "the prompt is printed: %s", r.out);
        ck_assert_msg(!strstr(r.out, "promptPreview"), "out: %s", r.out);
        tf_run_done(&r);
        /* the minimal env (no XDG_CONFIG_HOME) looks under ~/.config: no such job there */
        tf_run m = minimal_cli("job run cfg-job");
        ck_assert_int_eq(m.exit_code, 1);
        ck_assert_msg(strstr(m.out, "no job cfg-job"), "out: %s", m.out);
        tf_run_done(&m);
}
END_TEST

START_TEST(prompt_file_and_multi_line_prompt) {
        _cleanup_free_ char *repo = make_repo("repo");
        _cleanup_free_ char *jobs = home_jobs_dir();
        free(tf_shf(w, NULL, "mkdir -p '%s/prompts'", jobs));
        /* a multi-line script from a file relative to the job file; the one
         * trailing newline is stripped, as `--prompt -` does */
        const char script[] = "set -e\nprintf 'one\\n' > a.txt\nprintf 'two\\n' > b.txt\n";
        tf_write(tf_path(jobs, "prompts/nightly.sh"), script, strlen(script), 0600);
        _cleanup_free_ char *text =
                strdup_printf("directory = '%s'\nexecutor = 'shell'\nprompt_file = 'prompts/nightly.sh'\n", repo);
        write_job(jobs, "nightly", text);
        tf_run r = minimal_cli("job run nightly --json");
        ck_assert_msg(r.exit_code == 0, "job run failed (%d): %s %s", r.exit_code, r.out, r.err);
        json_object *res = tf_json(r.out);
        _cleanup_free_ char *t1 = strdup(tf_jstr(res, "id"));
        ck_assert_str_eq(tf_jstr(res, "promptPreview"), "set -e\nprintf 'one\\n' > a.txt\nprintf 'two\\n' > b.txt");
        json_object_put(res);
        tf_run_done(&r);

        /* an inline multi-line basic string with escapes */
        _cleanup_free_ char *text2 = strdup_printf("directory = '%s'\nexecutor = 'shell'\n"
                                                   "prompt = \"\"\"\nprintf 'caf\\u00e9\\n' > c.txt\n"
                                                   "printf \"tab\\there\\n\" > d.txt\"\"\"\n",
                                                   repo);
        write_job(jobs, "inline", text2);
        r = minimal_cli("job run inline --json");
        ck_assert_msg(r.exit_code == 0, "job run failed (%d): %s %s", r.exit_code, r.out, r.err);
        res = tf_json(r.out);
        _cleanup_free_ char *t2 = strdup(tf_jstr(res, "id"));
        json_object_put(res);
        tf_run_done(&r);

        json_object *st = tf_wait_settled(w, t1);
        ck_assert_str_eq(tf_jstr(st, "status"), "done");
        json_object_put(st);
        _cleanup_free_ char *p1 = diff_of(t1);
        ck_assert_msg(strstr(p1, "+one") && strstr(p1, "+two"), "patch: %s", p1);
        st = tf_wait_settled(w, t2);
        ck_assert_str_eq(tf_jstr(st, "status"), "done");
        json_object_put(st);
        _cleanup_free_ char *p2 = diff_of(t2);
        ck_assert_msg(strstr(p2, "+café") && strstr(p2, "+tab\there"), "patch: %s", p2);
}
END_TEST

/* Exit code and stdout of a failing run; asserts the prompt never shows. */
static void expect_run_error(const char *args, int code, const char *needle) {
        tf_run r = minimal_cli(args);
        ck_assert_msg(r.exit_code == code, "%s: exit %d, expected %d: %s %s", args, r.exit_code, code, r.out, r.err);
        ck_assert_msg(strstr(r.out, needle), "%s: '%s' not in: %s", args, needle, r.out);
        ck_assert_msg(!strstr(r.out, "SECRET") && !strstr(r.err, "SECRET"), "%s: the prompt leaked: %s %s", args, r.out,
                      r.err);
        tf_run_done(&r);
}

START_TEST(errors_name_file_and_line_never_the_prompt) {
        _cleanup_free_ char *repo = make_repo("repo");
        _cleanup_free_ char *jobs = home_jobs_dir();
        _cleanup_free_ char *unknown =
                strdup_printf("directory = '%s'\nprompt = 'SECRET prompt'\nschedule = 'daily'\n", repo);
        write_job(jobs, "unknown", unknown);
        _cleanup_free_ char *malformed = strdup_printf("directory = '%s'\n\nprompt = \"SECRET prompt\n", repo);
        write_job(jobs, "malformed", malformed);
        write_job(jobs, "table", "[job]\nprompt = 'SECRET'\n");
        write_job(jobs, "nodir", "directory = '/nonexistent/taskferry-job-dir'\nprompt = 'SECRET'\n");
        _cleanup_free_ char *badexec = strdup_printf("directory = '%s'\nprompt = 'SECRET'\nexecutor = 'claude'\n", repo);
        write_job(jobs, "badexec", badexec);
        _cleanup_free_ char *nofile = strdup_printf("directory = '%s'\nprompt_file = 'missing.txt'\n", repo);
        write_job(jobs, "nofile", nofile);
        int before = task_count();

        /* each message names the file (under jobs, put in for %1$s) and the line */
        static const struct {
                const char *args;
                int exit;
                const char *message;
        } errors[] = {
                {"job run unknown", 1, "%1$s/unknown.toml:3: unknown key schedule"},
                {"job run malformed", 1, "%1$s/malformed.toml:3: unterminated string"},
                {"job run table", 1, "%1$s/table.toml:1: tables are not supported"},
                {"job run nodir", 1, "nodir.toml: directory /nonexistent/taskferry-job-dir does not exist"},
                {"job run badexec", 1, "%1$s/badexec.toml:3: executor must be one of opencode, pi, shell"},
                {"job run nofile", 1, "%1$s/nofile.toml:2: prompt_file %1$s/missing.txt does not exist"},
                {"job run nope", 1, "no job nope: %1$s/nope.toml does not exist"},
                /* names: a unit instance name (%i) becomes a file name component */
                {"job run ../unknown", 2, "invalid job name: \\\"../unknown\\\""},
                {"job run a/b", 2, "invalid job name"},
                {"job run ''", 2, "invalid job name"},
                {"job run .hidden", 2, "invalid job name"},
                {"job run", 2, "job name is required"},
                {"job", 2, "job needs an action"},
        };
        for (size_t i = 0; i < ELEMENTSOF(errors); i++) {
                _cleanup_free_ char *f = strdup_printf(errors[i].message, jobs);
                expect_run_error(errors[i].args, errors[i].exit, f);
        }
        /* none of them dispatched anything */
        ck_assert_int_eq(task_count(), before);
}
END_TEST

/* A job file without a key its job needs names the file and the key, exit 1
 * (a job error), not dispatch's bare usage error "--model is required". */
START_TEST(missing_model_or_directory_names_the_key) {
        _cleanup_free_ char *repo = make_repo("repo");
        _cleanup_free_ char *jobs = home_jobs_dir();
        _cleanup_free_ char *nomodel = strdup_printf("directory = '%s'\nprompt = 'SECRET prompt'\n", repo);
        write_job(jobs, "nomodel", nomodel);
        _cleanup_free_ char *nomodel_pi =
                strdup_printf("directory = '%s'\nprompt = 'SECRET prompt'\nexecutor = 'pi'\n", repo);
        write_job(jobs, "nomodelpi", nomodel_pi);
        write_job(jobs, "nodirectory", "prompt = 'SECRET prompt'\nexecutor = 'shell'\n");
        int before = task_count();

        _cleanup_free_ char *f = strdup_printf("%s/nomodel.toml: missing key model", jobs);
        expect_run_error("job run nomodel", 1, f);
        free(f);
        f = strdup_printf("%s/nomodelpi.toml: missing key model", jobs);
        expect_run_error("job run nomodelpi", 1, f);
        free(f);
        f = strdup_printf("%s/nodirectory.toml: missing key directory", jobs);
        expect_run_error("job run nodirectory", 1, f);
        ck_assert_int_eq(task_count(), before);
}
END_TEST

/* A hostile or careless file where a job or prompt file belongs: refused at
 * once, nothing read into memory beyond the cap. */
START_TEST(hostile_files_never_hang_or_blow_memory) {
        _cleanup_free_ char *repo = make_repo("repo");
        _cleanup_free_ char *jobs = home_jobs_dir();
        _cleanup_free_ char *fifo = strdup_printf("%s/prompt.fifo", jobs);
        ck_assert_int_eq(mkfifo(fifo, 0600), 0);
        _cleanup_free_ char *big = strdup_printf("%s/big.txt", jobs);
        free(tf_shf(w, NULL, "head -c 1048577 /dev/zero | tr '\\0' a > '%s'", big));
        const char *cases[][2] = {
                { "fifo", "prompt.fifo" }, { "zero", "/dev/zero" }, { "dir", "/" }, { "big", "big.txt" },
        };
        const char *want[] = { "is not a regular file", "is not a regular file", "is a directory", "is larger than 1 MiB" };
        int before = task_count();
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *text =
                        strdup_printf("directory = '%s'\nexecutor = 'shell'\nprompt_file = '%s'\n", repo, cases[i][1]);
                write_job(jobs, cases[i][0], text);
                _cleanup_free_ char *args = strdup_printf("job run %s", cases[i][0]);
                uint64_t t0 = mono_ms();
                expect_run_error(args, 1, want[i]);
                ck_assert_msg(mono_ms() - t0 < 10000, "%s took %llu ms", cases[i][0],
                              (unsigned long long) (mono_ms() - t0));
        }
        /* the job file itself a fifo, /dev/zero (a symlink to it), too big */
        _cleanup_free_ char *jf = strdup_printf("%s/fifojob.toml", jobs);
        ck_assert_int_eq(mkfifo(jf, 0600), 0);
        expect_run_error("job run fifojob", 1, "fifojob.toml is not a regular file");
        _cleanup_free_ char *zj = strdup_printf("%s/zerojob.toml", jobs);
        ck_assert_int_eq(symlink("/dev/zero", zj), 0);
        expect_run_error("job run zerojob", 1, "zerojob.toml is not a regular file");
        _cleanup_free_ char *bj = strdup_printf("%s/bigjob.toml", jobs);
        free(tf_shf(w, NULL, "cp '%s' '%s'", big, bj));
        expect_run_error("job run bigjob", 1, "bigjob.toml is larger than 1 MiB");
        ck_assert_int_eq(task_count(), before);

        /* job list reads every file there, the fifo and /dev/zero included,
         * and still answers */
        tf_run r = minimal_cli("job list --json");
        ck_assert_msg(r.exit_code == 0, "job list failed (%d): %s %s", r.exit_code, r.out, r.err);
        json_object *o = tf_json(r.out);
        json_object *rows = json_get_array(o, "jobs");
        ck_assert_ptr_nonnull(rows);
        bool saw_fifo = false;
        for (size_t i = 0; i < json_object_array_length(rows); i++) {
                json_object *row = json_object_array_get_idx(rows, i);
                if (streq(tf_jstr(row, "name"), "fifojob")) {
                        saw_fifo = true;
                        ck_assert(strstr(tf_jstr(row, "error"), "is not a regular file"));
                }
        }
        ck_assert(saw_fifo);
        json_object_put(o);
        tf_run_done(&r);
}
END_TEST

/* ---- job list ---- */

START_TEST(list_shows_jobs_timers_and_last_task) {
        _cleanup_free_ char *repo = make_repo("repo");
        _cleanup_free_ char *jobs = home_jobs_dir();
        tf_run r = minimal_cli("job list --json");
        ck_assert_msg(r.exit_code == 0, "job list failed (%d): %s", r.exit_code, r.out);
        json_object *o = tf_json(r.out);
        ck_assert_str_eq(tf_jstr(o, "jobsDir"), jobs);
        _cleanup_free_ char *none = strdup_printf("none found in %s", jobs);
        ck_assert_str_eq(tf_jstr(o, "jobs"), none);
        json_object_put(o);
        tf_run_done(&r);

        _cleanup_free_ char *demo = strdup_printf("directory = '%s'\nexecutor = 'shell'\nprompt = 'echo SECRET'\n", repo);
        write_job(jobs, "demo", demo);
        _cleanup_free_ char *other = strdup_printf("directory = '%s'\nprompt = 'SECRET'\nmodel = 'p/m'\n", repo);
        write_job(jobs, "other", other);
        write_job(jobs, "broken", "directory = '/x'\nprompt = 'SECRET\n");
        write_job(jobs, "not a job", "directory = '/x'\nprompt = 'p'\n"); /* no valid name: not listed */
        tf_write(tf_path(jobs, "README"), "x", 1, 0600);

        /* two runs of demo, and an ordinary dispatch after them */
        char *ids[2];
        for (int i = 0; i < 2; i++) {
                r = minimal_cli("job run demo --json");
                ck_assert_msg(r.exit_code == 0, "job run failed: %s", r.out);
                o = tf_json(r.out);
                ids[i] = strdup(tf_jstr(o, "id"));
                json_object_put(o);
                tf_run_done(&r);
                json_object_put(tf_wait_settled(w, ids[i]));
                usleep(5000); /* distinct startedAt */
        }
        _cleanup_free_ char *plain = tf_shell_settled(w, repo, NULL, "true", NULL);

        r = minimal_cli("job list --json");
        ck_assert_msg(r.exit_code == 0, "job list failed (%d): %s", r.exit_code, r.out);
        ck_assert_msg(!strstr(r.out, "SECRET"), "job list shows a prompt: %s", r.out);
        o = tf_json(r.out);
        tf_run_done(&r);
        json_object *rows = json_get_array(o, "jobs");
        ck_assert_int_eq(json_object_array_length(rows), 3);
        /* sorted by name: broken, demo, other */
        json_object *b = json_object_array_get_idx(rows, 0), *d = json_object_array_get_idx(rows, 1),
                    *x = json_object_array_get_idx(rows, 2);
        ck_assert_str_eq(tf_jstr(b, "name"), "broken");
        ck_assert(strstr(tf_jstr(b, "error"), "broken.toml:2: unterminated string"));
        ck_assert_str_eq(tf_jstr(d, "name"), "demo");
        ck_assert_str_eq(tf_jstr(d, "directory"), repo);
        ck_assert_str_eq(tf_jstr(d, "executor"), "shell");
        ck_assert_str_eq(tf_jstr(d, "timer"), "(no user manager)");
        ck_assert(json_object_object_get_ex(d, "nextRun", NULL) && !json_get_string(d, "nextRun"));
        ck_assert_str_eq(tf_jstr(d, "lastTask"), ids[1]);
        ck_assert_str_eq(tf_jstr(d, "lastStatus"), "done");
        ck_assert_str_eq(tf_jstr(x, "name"), "other");
        ck_assert(json_object_object_get_ex(x, "executor", NULL) && !json_get_string(x, "executor"));
        ck_assert(json_object_object_get_ex(x, "lastTask", NULL) && !json_get_string(x, "lastTask"));
        json_object_put(o);

        /* TOON: the timer column, "(no user manager)" here */
        r = minimal_cli("job list");
        ck_assert_int_eq(r.exit_code, 0);
        ck_assert_msg(strstr(r.out, "timer: (no user manager)"), "out: %s", r.out);
        _cleanup_free_ char *last = strdup_printf("lastTask: %s", ids[1]);
        ck_assert_msg(strstr(r.out, last), "out: %s", r.out);
        tf_run_done(&r);

        /* a session bus without systemd on it is no user manager either */
        _cleanup_free_ char *bus_pid = tf_shf(w, NULL, "dbus-daemon --session --fork --print-pid "
                                                       "--address=unix:path='%s/bus'", w->root);
        _cleanup_free_ char *bus_env = strdup_printf("DBUS_SESSION_BUS_ADDRESS=unix:path=%s/bus", w->root);
        r = tf_cli_minimal(w, 30, bus_env, "job list --json");
        kill((pid_t) atoi(bus_pid), SIGTERM);
        ck_assert_msg(r.exit_code == 0, "job list failed (%d): %s", r.exit_code, r.out);
        ck_assert_msg(strstr(r.out, "\"timer\":\"(no user manager)\""), "out: %s", r.out);
        tf_run_done(&r);

        /* the job travels on the task: in task.list rows (only when set) and
         * in tasks.json, so a restarted daemon still knows it */
        json_object *f = tf_rpc(w, "task.list", "{}");
        json_object *tasks = json_get_array(tf_result(f), "tasks");
        for (size_t i = 0; i < json_object_array_length(tasks); i++) {
                json_object *t = json_object_array_get_idx(tasks, i);
                if (streq(tf_jstr(t, "id"), plain)) ck_assert(!json_object_object_get_ex(t, "job", NULL));
                else ck_assert_str_eq(tf_jstr(t, "job"), "demo");
        }
        json_object_put(f);
        pid_t pid = tf_daemon_pid(w);
        ck_assert_int_gt(pid, 0);
        kill(pid, SIGTERM);
        ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
        tf_daemon_start(w);
        json_object *st = tf_status_full(w, ids[0]);
        ck_assert_str_eq(tf_jstr(st, "job"), "demo");
        json_object_put(st);
        st = tf_status_full(w, plain);
        ck_assert(!json_object_object_get_ex(st, "job", NULL));
        json_object_put(st);
        free(ids[0]);
        free(ids[1]);
}
END_TEST

/* The dispatch param: an optional non-empty string (protocol addition). */
START_TEST(dispatch_param_job_is_validated) {
        _cleanup_free_ char *repo = make_repo("repo");
        const char *bad[] = { "5", "\"\"", "null", "[\"x\"]" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *params = strdup_printf(
                        "{\"prompt\":\"true\",\"directory\":\"%s\",\"executor\":\"shell\",\"job\":%s}", repo, bad[i]);
                json_object *f = tf_rpc(w, "task.dispatch", params);
                ck_assert_msg(!json_get_bool(f, "ok", true), "job %s accepted", bad[i]);
                ck_assert_str_eq(json_get_string(json_get_object(f, "error"), "code"), "INVALID_PARAMS");
                json_object_put(f);
        }
}
END_TEST

/* A worker may dispatch through its task socket, but never as a timer job:
 * `job list` trusts the mark. */
START_TEST(a_worker_cannot_dispatch_as_a_job) {
        _cleanup_free_ char *repo = make_repo("repo");
        _cleanup_free_ char *py = tf_write_peer(w);
        _cleanup_free_ char *with_job = strdup_printf(
                "{\"method\":\"task.dispatch\",\"params\":{\"prompt\":\"true\",\"directory\":\"%s\","
                "\"executor\":\"shell\",\"job\":\"demo\"}}",
                repo);
        _cleanup_free_ char *without = strdup_printf(
                "{\"method\":\"task.dispatch\",\"params\":{\"prompt\":\"true\",\"directory\":\"%s\","
                "\"executor\":\"shell\"}}",
                repo);
        _cleanup_free_ char *script = strdup_printf("python3 '%s' '%s' '%s' > \"$TASKFERRY_OUTPUT_DIR/r.txt\" 2>&1; true", py,
                                                    with_job, without);
        _cleanup_free_ char *id = tf_shell_settled(w, repo, NULL, script, NULL);
        _cleanup_free_ char *replies = tf_output_read(w, id, "r.txt");
        char *nl = strchr(replies, '\n');
        ck_assert_msg(nl, "replies: %s", replies);
        *nl = 0;
        json_object *r1 = tf_json(replies), *r2 = tf_json(nl + 1);
        ck_assert_msg(!json_get_bool(r1, "ok", true), "a worker dispatched as a job: %s", replies);
        ck_assert_str_eq(json_get_string(json_get_object(r1, "error"), "message"), "a task cannot dispatch as a timer job");
        /* the same dispatch without the mark goes through */
        ck_assert_msg(json_get_bool(r2, "ok", false), "reply: %s", nl + 1);
        json_object_put(r1);
        json_object_put(r2);
}
END_TEST

int main(void) {
        Suite *s = suite_create("jobs");
        TCase *tc = tf_add_tests(s, "jobs", 300,
                                 TF_TESTS(run_from_minimal_env_is_an_ordinary_task, run_with_xdg_config_home_and_toon_output,
                                          prompt_file_and_multi_line_prompt, errors_name_file_and_line_never_the_prompt,
                                          missing_model_or_directory_names_the_key, hostile_files_never_hang_or_blow_memory,
                                          list_shows_jobs_timers_and_last_task, dispatch_param_job_is_validated,
                                          a_worker_cannot_dispatch_as_a_job));
        tcase_add_checked_fixture(tc, setup, teardown);
        return tf_run_suite(s);
}
