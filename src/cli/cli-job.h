#pragma once
/* `taskferry job run <name>` and `taskferry job list` (docs/taskferry-jobs.5.md;
 * DESIGN.md "systemd integration": Timers). A job is a dispatch described
 * by ${XDG_CONFIG_HOME:-~/.config}/taskferry/jobs/<name>.toml (job-file.h);
 * taskferry-job@<name>.service runs `job run`, from systemd's minimal
 * environment, and taskferry-job@<name>.timer starts that service. */

#include <json-c/json.h>

#include "cli-error.h"
#include "commands.h"
#include "job-file.h"

/* <dir of paths->config_file>/jobs, i.e. ${XDG_CONFIG_HOME:-~/.config}/taskferry/jobs
 * (the config file's directory). malloc'd; NULL on ENOMEM. */
char *cli_jobs_dir(const tf_paths *paths);

/* Read <jobs_dir>/<name>.toml and parse it (job-file.h), with home for
 * "~/". The file must be a regular file (opened O_NONBLOCK: a fifo there
 * never blocks) of at most JOB_FILE_MAX_BYTES. Errors, operational (exit
 * 1) and naming the file and its line, never a value: missing, unreadable,
 * not a regular file, too large, malformed (-EIO, err set); -ENOMEM.
 * The name must be valid (job_name_is_valid): -EINVAL otherwise, usage
 * error. */
int cli_job_load(const char *jobs_dir, const char *name, const char *home, job_spec *ret, cli_error *err);

/* Read a job's prompt_file as `--prompt -` reads stdin: a regular file
 * (O_NONBLOCK, so a fifo never blocks; /dev/zero and other devices are
 * refused) of at most JOB_FILE_MAX_BYTES, one trailing "\n" or "\r\n"
 * stripped, neither empty nor holding a NUL byte. Errors name job_file and
 * the prompt_file line: -EIO with err set; -ENOMEM. */
int cli_job_read_prompt_file(const job_spec *j, const char *job_file, char **ret, size_t *ret_len, cli_error *err);

/* The `job` command: ctx->args->words is {"run", <name>} or {"list"}.
 * run: cli_dispatch() of the job with `job: <name>`; *ret_raw (--json) is
 * the daemon's dispatch result, *ret_value the same without promptPreview
 * and promptTotalChars (under systemd, stdout is the journal, which never
 * gets a prompt). list: {jobsDir,
 * jobs: rows {name, directory, executor, timer, nextRun, lastTask,
 * lastStatus} sorted by name (a file that does not parse: {name, error}),
 * or the string "none found in <dir>"}; timer is "<ActiveState>
 * (<UnitFileState>)" of taskferry-job@<name>.timer on the user manager
 * ("not installed" if its LoadState is not loaded; "(no user manager)"
 * without one), nextRun its NextElapseUSecRealtime (ISO-8601 or null), and
 * lastTask/lastStatus the newest task of task.list (all workspaces) whose
 * `job` is the name, or null. The `run` of job's row in cli-verbs.c
 * (cli_verb_run_fn). */
int cli_run_job(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err);
