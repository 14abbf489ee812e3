/* Timer-job files: the job keys over the TOML subset of toml.h (job-file.h). */
#include "job-file.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor.h"
#include "json-util.h"
#include "macro.h"
#include "log.h"
#include "string-util.h"
#include "strv.h"
#include "net-policy.h"
#include "toml.h"

bool job_name_is_valid(const char *name) {
        if (!name || !*name || name[0] == '.' || name[0] == '-') return false;
        size_t n = 0;
        for (const char *p = name; *p; p++, n++) {
                char c = *p;
                bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                          c == '.' || c == '-';
                if (!ok || n >= JOB_NAME_MAX) return false;
        }
        return true;
}

/* ---- the job keys ---- */

void job_spec_done(job_spec *j) {
        free(j->directory);
        free(j->executor);
        free(j->model);
        free(j->variant);
        free(j->prompt);
        free(j->prompt_file);
        strv_free(j->rw_bind);
        strv_free(j->ro_bind);
        free(j->network);
        strv_free(j->allow_hosts);
        *j = (job_spec) {};
}

typedef enum job_key_kind { KEY_STRING, KEY_PATH_LIST, KEY_STRING_LIST } job_key_kind;

static const struct {
        const char *name;
        job_key_kind kind;
} job_keys[] = {
        { "directory", KEY_STRING }, { "executor", KEY_STRING }, { "model", KEY_STRING },
        { "prompt", KEY_STRING },    { "prompt_file", KEY_STRING }, { "variant", KEY_STRING },
        { "rw_bind", KEY_PATH_LIST }, { "ro_bind", KEY_PATH_LIST },
        { "network", KEY_STRING },    { "allow_hosts", KEY_STRING_LIST },
};
#define JOB_KEY_NAMES "directory, executor, model, prompt, prompt_file, variant, rw_bind, ro_bind, network, allow_hosts"

typedef struct spec_error {
        unsigned line;
        char *msg;
} spec_error;

static int spec_fail(spec_error *e, unsigned line, const char *fmt, ...) _printf_(3, 4);
static int spec_fail(spec_error *e, unsigned line, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *m = NULL;
        if (vasprintf(&m, fmt, ap) < 0) m = NULL;
        va_end(ap);
        if (!m) return -ENOMEM;
        free(e->msg);
        e->msg = m;
        e->line = line;
        return -EINVAL;
}

/* "/abs" as is, "~" and "~/x" under home, others relative to base (NULL:
 * refused). Returns 1 and a malloc'd path, 0 if refused, -ENOMEM. */
static int expand_path(const char *v, const char *home, const char *base, char **ret) {
        char *p;
        if (v[0] == '/') p = strdup(v);
        else if (streq(v, "~") || startswith(v, "~/")) {
                if (isempty(home) || home[0] != '/') return 0;
                p = strdup_printf("%s%s", home, v + 1);
        } else if (base && v[0] != '~')
                p = strdup_printf("%s/%s", base, v);
        else
                return 0;
        if (!p) return -ENOMEM;
        *ret = p;
        return 1;
}

int job_spec_from_toml(json_object *table, json_object *lines, const char *home, const char *base_dir,
                       job_spec *ret, unsigned *ret_line, char **reason) {
        _cleanup_(job_spec_done) job_spec j = {};
        spec_error e = {};
        unsigned prompt_line = 0, prompt_file_line = 0;
        int r = 0;

        json_object_object_foreach(table, key, value) {
                int64_t l = 0;
                (void) json_get_int64(lines, key, &l);
                unsigned line = (unsigned) l;
                size_t k;
                for (k = 0; k < ELEMENTSOF(job_keys); k++)
                        if (streq(job_keys[k].name, key)) break;
                if (k == ELEMENTSOF(job_keys)) {
                        r = spec_fail(&e, line, "unknown key %s (a job has: " JOB_KEY_NAMES ")", key);
                        goto out;
                }
                if (job_keys[k].kind == KEY_STRING_LIST) {
                        /* hosts, checked by the daemon as --allow-host's are */
                        size_t n = json_object_is_type(value, json_type_array) ? json_object_array_length(value) : 0;
                        for (size_t i = 0; i < n && r >= 0; i++) {
                                json_object *entry = json_object_array_get_idx(value, i);
                                if (!json_is_nonempty_string(entry)) break;
                                r = strv_push(&j.allow_hosts, json_object_get_string(entry));
                        }
                        if (r < 0) goto out;
                        if (!json_object_is_type(value, json_type_array) || strv_length(j.allow_hosts) != n) {
                                r = spec_fail(&e, line, "%s must be an array of hosts, e.g. %s = [\"pypi.org\"]", key, key);
                                goto out;
                        }
                        continue;
                }
                if (job_keys[k].kind == KEY_PATH_LIST) {
                        if (!json_object_is_type(value, json_type_array)) {
                                r = spec_fail(&e, line, "%s must be an array of paths, e.g. %s = [\"/path\"]", key, key);
                                goto out;
                        }
                        char ***list = streq(key, "rw_bind") ? &j.rw_bind : &j.ro_bind;
                        /* sized at once: strv_consume per entry counts the list
                         * each time, O(n^2) (200,000 entries in 1 MiB: 20 s) */
                        size_t n = json_object_array_length(value), o = 0;
                        if (n == 0) continue;
                        *list = calloc(n + 1, sizeof(char *));
                        if (!*list) {
                                r = -ENOMEM;
                                goto out;
                        }
                        for (size_t i = 0; i < n; i++) {
                                json_object *entry = json_object_array_get_idx(value, i);
                                /* an integer entry would read as its digits */
                                const char *s = json_object_is_type(entry, json_type_string) ? json_object_get_string(entry) : NULL;
                                char *path = NULL;
                                r = isempty(s) ? 0 : expand_path(s, home, NULL, &path);
                                if (r < 0) goto out;
                                if (r == 0) {
                                        r = spec_fail(&e, line, "%s entries must be absolute paths or start with ~/", key);
                                        goto out;
                                }
                                (*list)[o++] = path;
                        }
                        continue;
                }
                if (!json_object_is_type(value, json_type_string)) {
                        r = spec_fail(&e, line, "%s must be a string", key);
                        goto out;
                }
                const char *s = json_object_get_string(value);
                if (isempty(s)) {
                        r = spec_fail(&e, line, "%s must not be empty", key);
                        goto out;
                }
                char **field = NULL;
                if (streq(key, "directory")) {
                        r = expand_path(s, home, NULL, &j.directory);
                        if (r < 0) goto out;
                        if (r == 0) {
                                r = spec_fail(&e, line, "directory must be an absolute path or start with ~/");
                                goto out;
                        }
                        continue;
                }
                if (streq(key, "prompt_file")) {
                        r = expand_path(s, home, base_dir, &j.prompt_file);
                        if (r < 0) goto out;
                        if (r == 0) {
                                r = spec_fail(&e, line, "prompt_file must be a path (absolute, ~/..., or relative to the job file)");
                                goto out;
                        }
                        prompt_file_line = j.prompt_file_line = line;
                        continue;
                }
                if (streq(key, "executor")) {
                        if (!executor_find(s)) {
                                r = spec_fail(&e, line, "executor must be one of %s", executor_names());
                                goto out;
                        }
                        field = &j.executor;
                } else if (streq(key, "network")) {
                        if (net_mode_from_string(s) < 0) {
                                r = spec_fail(&e, line, "network must be one of proxy, none, host");
                                goto out;
                        }
                        field = &j.network;
                } else if (streq(key, "model")) field = &j.model;
                else if (streq(key, "variant")) field = &j.variant;
                else {
                        field = &j.prompt;
                        prompt_line = line;
                }
                *field = strdup(s);
                if (!*field) {
                        r = -ENOMEM;
                        goto out;
                }
        }
        if (j.prompt && j.prompt_file) {
                r = spec_fail(&e, prompt_line > prompt_file_line ? prompt_line : prompt_file_line,
                              "prompt and prompt_file exclude each other: set one of them");
                goto out;
        }
        if (!j.directory) {
                r = spec_fail(&e, 0, "missing key directory (the directory the task runs in)");
                goto out;
        }
        if (!j.prompt && !j.prompt_file) {
                r = spec_fail(&e, 0, "missing key prompt (or prompt_file)");
                goto out;
        }
out:
        if (r == -ENOMEM) {
                free(e.msg);
                return -ENOMEM;
        }
        if (r < 0) {
                *ret_line = e.line;
                *reason = e.msg;
                return -EINVAL;
        }
        *ret = j;
        j = (job_spec) {};
        return 0;
}

int job_spec_parse(const char *text, size_t len, const char *home, const char *base_dir, job_spec *ret,
                   unsigned *ret_line, char **reason) {
        _cleanup_json_ json_object *table = NULL, *lines = NULL;
        int r = toml_parse(text, len, &table, &lines, ret_line, reason);
        if (r < 0) return r;
        return job_spec_from_toml(table, lines, home, base_dir, ret, ret_line, reason);
}
