#pragma once
/* Timer-job files (docs/taskferry-jobs.5.md; DESIGN.md "systemd integration":
 * Timers): $XDG_CONFIG_HOME/taskferry/jobs/<name>.toml, read by
 * `taskferry job run <name>` and `taskferry job list`.
 *
 * Two layers, both pure (no I/O):
 * - job_toml_parse: a strict subset of TOML v1.0 (https://toml.io/en/v1.0.0):
 *   `#` comments, blank lines, `key = value` with a bare key, values
 *   "basic strings" (escapes \b \t \n \f \r \" \\ \uXXXX \UXXXXXXXX),
 *   'literal strings', """multi-line basic""" (a newline right after the
 *   opening quotes trimmed, line-ending backslash) and '''multi-line
 *   literal''' strings, arrays of strings (across lines, comments inside,
 *   trailing comma) and true/false. Everything else TOML has is refused
 *   with a message rather than misread: tables, quoted and dotted keys,
 *   numbers, dates, inline tables, nested arrays. A duplicate key is an
 *   error (TOML says so). The text must be UTF-8 without control
 *   characters but tab and newline (CRLF or LF) outside escapes; \u0000 is
 *   refused (a prompt travels as a C string).
 * - job_spec_from_toml: the job keys over that table (directory, executor,
 *   model, prompt | prompt_file, variant, rw_bind, ro_bind); an unknown key
 *   is an error.
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

/* Parse text[0..len) (it need not be NUL-terminated). On success returns 0
 * and *ret_table: a new JSON object of key → value (string — with its exact
 * bytes —, boolean, or array of strings) in file order, and *ret_lines:
 * key → the 1-based line of its key (int). On a malformed text returns
 * -EINVAL with *ret_line (1-based) and *reason set (the sentence for the
 * user, set exactly when the return is -EINVAL; the caller frees it);
 * -ENOMEM. */
int job_toml_parse(const char *text, size_t len, json_object **ret_table, json_object **ret_lines,
                   unsigned *ret_line, char **reason);

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
} job_spec;

void job_spec_done(job_spec *j);

/* The job of a parsed table (job_toml_parse). home: $HOME for "~/";
 * base_dir: the job file's directory (absolute), for a relative
 * prompt_file. Rules: directory required, absolute or "~/..."; exactly one
 * of prompt and prompt_file; prompt non-empty; executor, model, variant
 * non-empty strings, executor a known executor; rw_bind and ro_bind arrays
 * of absolute (or "~/") paths, [] meaning none; any other key is an error.
 * Returns 0; -EINVAL with *ret_line (0: no line, e.g. a missing key) and
 * *reason set (as job_toml_parse); -ENOMEM. */
int job_spec_from_toml(json_object *table, json_object *lines, const char *home, const char *base_dir,
                       job_spec *ret, unsigned *ret_line, char **reason);

/* job_toml_parse + job_spec_from_toml. */
int job_spec_parse(const char *text, size_t len, const char *home, const char *base_dir, job_spec *ret,
                   unsigned *ret_line, char **reason);
