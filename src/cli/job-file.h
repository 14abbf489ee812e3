#pragma once
/* Timer-job files (docs/taskferry-jobs.5.md; DESIGN.md "systemd integration":
 * Timers): $XDG_CONFIG_HOME/taskferry/jobs/<name>.toml, read by
 * `taskferry job run <name>` and `taskferry job list`.
 *
 * Both pure (no I/O): job_spec_from_toml reads the job keys (directory,
 * executor, model, prompt | prompt_file, variant, rw_bind, ro_bind) over a
 * table toml_parse (src/shared/toml.h, the strict TOML subset) made; an
 * unknown key or a value of another type (an integer where a string is
 * wanted) is an error.
 *
 * Error messages name a line and what is wrong, never the text of a value
 * (a prompt is a secret: CONTRIBUTING.md "Rules"). */

#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>

/* A job file larger than this is refused (bytes); also the limit of a
 * prompt_file: a prompt travels in one protocol request, and the daemon
 * drops a connection whose request is over 1 MiB. */
#define JOB_FILE_MAX_BYTES (1024 * 1024)
/* A job name: what a unit instance name (%i) can carry as a file name
 * component. */
#define JOB_NAME_MAX 200

/* Is name a job name: 1..JOB_NAME_MAX of [A-Za-z0-9_.-] (so no slash),
 * not starting with a dot (no ".", "..", hidden files) nor a dash (it
 * would read as a flag). */
bool job_name_is_valid(const char *name);

/* A parsed job. Strings are NUL-terminated; NULL: not set. */
typedef struct job_spec {
        char *directory;         /* absolute; "~/" expanded (not realpath'd) */
        char *executor;          /* one of executor_names() (src/shared/executor.h) */
        char *model;
        char *variant;
        char *prompt;            /* inline prompt; exactly one of prompt, prompt_file is set */
        char *prompt_file;       /* absolute: "~/" expanded, relative ones against the job file's dir */
        unsigned prompt_file_line;
        char **rw_bind, **ro_bind; /* absolute paths ("~/" expanded); NULL: none */
        char *network;           /* "proxy" | "none" | "host" (dispatch --network); NULL: the default */
        char **allow_hosts;      /* dispatch --allow-host entries, as written; NULL: none */
} job_spec;

void job_spec_done(job_spec *j);

/* The job of a parsed table (toml_parse). home: $HOME for "~/";
 * base_dir: the job file's directory (absolute), for a relative
 * prompt_file. Rules: directory required, absolute or "~/..."; exactly one
 * of prompt and prompt_file; prompt non-empty; executor, model, variant
 * non-empty strings, executor a known executor; rw_bind and ro_bind arrays
 * of absolute (or "~/") paths, [] meaning none; network one of proxy, none,
 * host; allow_hosts an array of non-empty strings (hosts, as --allow-host
 * takes them; the daemon checks them); any other key is an error.
 * Returns 0; -EINVAL with *ret_line (0: no line, e.g. a missing key) and
 * *reason set (as toml_parse); -ENOMEM. */
int job_spec_from_toml(json_object *table, json_object *lines, const char *home, const char *base_dir,
                       job_spec *ret, unsigned *ret_line, char **reason);

/* toml_parse + job_spec_from_toml. */
int job_spec_parse(const char *text, size_t len, const char *home, const char *base_dir, job_spec *ret,
                   unsigned *ret_line, char **reason);
