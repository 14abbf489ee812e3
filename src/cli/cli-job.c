/* `taskferry job run` / `taskferry job list` (cli-job.h). */
#include "cli-job.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json-util.h"
#include "libsystemd-dl.h"
#include "protocol-keys.h"
#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"
#include "time-util.h"

#define JOB_HELP "see taskferry-jobs(5) for what a job file holds"
#define JOB_NAME_HELP \
        "A job name is the file name of ${XDG_CONFIG_HOME:-~/.config}/taskferry/jobs/<name>.toml without .toml: " \
        "1 to 200 of A-Z a-z 0-9 _ . -, not starting with a dot or a dash"

char *cli_jobs_dir(const tf_paths *paths) {
        const char *cfg = paths->config_file;
        const char *slash = cfg ? strrchr(cfg, '/') : NULL;
        if (!slash) return NULL;
        return strdup_printf("%.*s/jobs", (int) (slash - cfg), cfg);
}

/* Open path for reading if it is a regular file: O_NONBLOCK, so that a
 * fifo (or a device) there returns at once and is refused instead of
 * blocking the read. extra_flags: O_NOFOLLOW for a file that must not be a
 * symlink (-ELOOP). Returns the fd, -EISDIR/-ENODEV (not regular: a
 * directory / anything else), -EFBIG (over max), -errno. */
static int open_regular(const char *path, int extra_flags, size_t max) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | extra_flags);
        if (fd < 0) return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0) return -errno;
        if (S_ISDIR(st.st_mode)) return -EISDIR;
        if (!S_ISREG(st.st_mode)) return -ENODEV;
        if ((uint64_t) st.st_size > max) return -EFBIG;
        return TAKE_FD(fd);
}

static const char *open_error_text(int r) {
        switch (r) {
        case -ENOENT: return "does not exist";
        case -EISDIR: return "is a directory, not a file";
        case -ENODEV: return "is not a regular file";
        case -EFBIG: return "is larger than 1 MiB";
        case -ELOOP: return "is a symbolic link (a prompt_file must be the file itself)";
        default: return strerror(-r);
        }
}

/* Read a regular file into a NUL-terminated buffer (read_fd caps a file
 * that grows after the fstat). */
static int read_regular(const char *path, int extra_flags, char **ret, size_t *ret_len) {
        _cleanup_close_ int fd = open_regular(path, extra_flags, JOB_FILE_MAX_BYTES);
        if (fd < 0) return fd;
        return read_fd(fd, JOB_FILE_MAX_BYTES, ret, ret_len);
}

int cli_job_load(const char *jobs_dir, const char *name, const char *home, job_spec *ret, cli_error *err) {
        if (!job_name_is_valid(name)) return cli_error_usage(err, JOB_NAME_HELP, "invalid job name: \"%s\"", name);
        _cleanup_free_ char *file = strdup_printf("%s/%s.toml", jobs_dir, name);
        if (!file) return -ENOMEM;
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = read_regular(file, 0, &text, &len);
        if (r == -ENOMEM) return r;
        if (r == -ENOENT)
                return cli_error_fail(err, NULL, "error: no job %s: %s does not exist\n"
                                      "help: write it (%s), or run taskferry job list", name, file, JOB_HELP);
        if (r < 0) return cli_error_fail(err, NULL, "error: job file %s %s\nhelp: %s", file, open_error_text(r), JOB_HELP);
        unsigned line = 0;
        _cleanup_free_ char *msg = NULL;
        r = job_spec_parse(text, len, home, jobs_dir, ret, &line, &msg);
        if (r == -ENOMEM) return r;
        if (r < 0) {
                if (line > 0) return cli_error_fail(err, NULL, "error: %s:%u: %s\nhelp: %s", file, line, msg, JOB_HELP);
                return cli_error_fail(err, NULL, "error: %s: %s\nhelp: %s", file, msg, JOB_HELP);
        }
        return 0;
}

int cli_job_read_prompt_file(const job_spec *j, const char *job_file, char **ret, size_t *ret_len, cli_error *err) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        /* not through a symlink: a prompt file often sits in a directory the
         * user binds rw into workers, and a worker that swaps it for a link
         * to the env file (or ~/.ssh/id_*) would get that file as the next
         * run's prompt, read on the host by an unattended timer */
        int r = read_regular(j->prompt_file, O_NOFOLLOW, &text, &len);
        if (r == -ENOMEM) return r;
        if (r < 0)
                return cli_error_fail(err, NULL, "error: %s:%u: prompt_file %s %s\nhelp: %s", job_file, j->prompt_file_line,
                                      j->prompt_file, open_error_text(r), JOB_HELP);
        /* as `--prompt -` (cli_read_prompt): one trailing newline stripped */
        if (len > 0 && text[len - 1] == '\n') text[--len] = 0;
        if (len > 0 && text[len - 1] == '\r') text[--len] = 0;
        if (len == 0)
                return cli_error_fail(err, NULL, "error: %s:%u: prompt_file %s is empty\nhelp: %s", job_file,
                                      j->prompt_file_line, j->prompt_file, JOB_HELP);
        if (memchr(text, 0, len))
                return cli_error_fail(err, NULL, "error: %s:%u: prompt_file %s holds a NUL byte\nhelp: %s", job_file,
                                      j->prompt_file_line, j->prompt_file, JOB_HELP);
        *ret_len = len;
        *ret = TAKE_PTR(text);
        return 0;
}

static int ensure_paths(cli_context *ctx, cli_error *err) {
        if (ctx->paths.home) return 0;
        int r = tf_paths_resolve(&ctx->paths);
        if (r < 0) return cli_error_fail(err, NULL, "cannot resolve taskferry paths: %s", strerror(-r));
        return 0;
}

static json_object *string_list(char **l) {
        json_object *arr = json_object_new_array();
        for (; arr && l && *l; l++)
                if (json_object_array_add(arr, json_object_new_string(*l)) < 0) {
                        json_object_put(arr);
                        return NULL;
                }
        return arr;
}

static int job_run(cli_context *ctx, const char *name, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        int r = ensure_paths(ctx, err);
        if (r < 0) return r;
        _cleanup_free_ char *dir = cli_jobs_dir(&ctx->paths);
        if (!dir) return -ENOMEM;
        _cleanup_(job_spec_done) job_spec j = {};
        r = cli_job_load(dir, name, ctx->paths.home, &j, err);
        if (r < 0) return r;
        _cleanup_free_ char *file = strdup_printf("%s/%s.toml", dir, name);
        if (!file) return -ENOMEM;

        _cleanup_free_ char *prompt_buf = NULL;
        size_t prompt_len = 0;
        if (j.prompt_file) {
                r = cli_job_read_prompt_file(&j, file, &prompt_buf, &prompt_len, err);
                if (r < 0) return r;
        }
        const char *prompt = prompt_buf ? prompt_buf : j.prompt;
        if (!prompt_buf) prompt_len = strlen(prompt);

        /* the directory as `dispatch --directory` sends it: its realpath, which must be a directory */
        _cleanup_free_ char *real = realpath(j.directory, NULL);
        if (!real)
                return cli_error_fail(err, NULL, "error: %s: directory %s %s%s\nhelp: %s", file, j.directory,
                                      errno == ENOENT ? "does not exist" : "cannot be resolved: ",
                                      errno == ENOENT ? "" : strerror(errno), JOB_HELP);
        if (!is_dir(real))
                return cli_error_fail(err, NULL, "error: %s: directory %s is not a directory\nhelp: %s", file,
                                      j.directory, JOB_HELP);

        /* the keys as the dispatch flags' option keys (cli-args.c) */
        _cleanup_json_ json_object *options = json_object_new_object();
        if (!options) return -ENOMEM;
        if ((j.model && json_add_string(options, PK_model, j.model) < 0) ||
            (j.variant && json_add_string(options, PK_variant, j.variant) < 0) ||
            (j.executor && json_add_string(options, PK_executor, j.executor) < 0) ||
            (j.rw_bind && json_add(options, PK_rwBind, string_list(j.rw_bind)) < 0) ||
            (j.ro_bind && json_add(options, PK_roBind, string_list(j.ro_bind)) < 0) ||
            (j.network && json_add_string(options, PK_network, j.network) < 0) ||
            (j.allow_hosts && json_add(options, PK_allowHosts, string_list(j.allow_hosts)) < 0))
                return -ENOMEM;
        r = cli_dispatch(ctx, options, real, prompt, prompt_len, name, ret_raw, err);
        /* the daemon decides that the executor needs a model (cli_dispatch
         * makes that dispatch's usage error); for a job it is the job file's
         * error: name the file and the key, exit 1 (taskferry-jobs(5)) */
        if (r < 0 && err->exit_code == CLI_EXIT_USAGE && err->text &&
            (startswith(err->text, "error: --model is required\n") || streq(err->text, "--model is required"))) {
                cli_error_done(err);
                return cli_error_fail(err, NULL,
                                      "error: %s: missing key model (its executor%s%s needs one)\n"
                                      "help: add model = \"<provider/model>\", or executor = \"shell\"; %s",
                                      file, j.executor ? " " : "", j.executor ? j.executor : "", JOB_HELP);
        }
        if (r < 0) return r;
        /* what dispatch prints, but not the prompt: under systemd stdout is
         * the journal, where a prompt must never go (--json prints the
         * daemon's result whole) */
        json_object *v = json_object_new_object();
        if (!v) return -ENOMEM;
        json_object_object_foreach(*ret_raw, key, val) {
                if (streq(key, PK_promptPreview) || streq(key, PK_promptTotalChars)) continue;
                if (json_add(v, key, val ? json_object_get(val) : NULL) < 0) {
                        json_object_put(v);
                        return -ENOMEM;
                }
        }
        *ret_value = v;
        return 0;
}

/* ---- job list ---- */

static sd_bus *user_bus(void) {
        if (dlopen_libsystemd() < 0) return NULL;
        sd_bus *bus = NULL;
        if (sym_sd_bus_open_user(&bus) < 0) return NULL;
        return bus;
}

/* taskferry-job@<name>.timer on the user manager: *ret_text (malloc'd) and
 * *ret_next (µs since the epoch; 0 = none). -errno when the manager does
 * not answer. */
static int timer_state(sd_bus *bus, const char *name, char **ret_text, uint64_t *ret_next) {
        static const char *const dest = "org.freedesktop.systemd1";
        _cleanup_free_ char *unit = strdup_printf("taskferry-job@%s.timer", name);
        if (!unit) return -ENOMEM;
        _cleanup_free_ char *path = NULL;
        int r = sym_sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit, &path);
        if (r < 0) return r;
        char *load = NULL, *active = NULL, *file_state = NULL;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        r = sym_sd_bus_get_property_string(bus, dest, path, "org.freedesktop.systemd1.Unit", "LoadState", &e, &load);
        sym_sd_bus_error_free(&e);
        if (r < 0) return r;
        _cleanup_free_ char *load_state = load;
        if (!streq(load_state, "loaded")) {
                *ret_text = strdup("not installed");
                *ret_next = 0;
                return *ret_text ? 0 : -ENOMEM;
        }
        r = sym_sd_bus_get_property_string(bus, dest, path, "org.freedesktop.systemd1.Unit", "ActiveState", &e, &active);
        sym_sd_bus_error_free(&e);
        if (r < 0) return r;
        _cleanup_free_ char *active_state = active;
        r = sym_sd_bus_get_property_string(bus, dest, path, "org.freedesktop.systemd1.Unit", "UnitFileState", &e,
                                           &file_state);
        sym_sd_bus_error_free(&e);
        if (r < 0) return r;
        _cleanup_free_ char *unit_file_state = file_state;
        uint64_t next = 0;
        r = sym_sd_bus_get_property_trivial(bus, dest, path, "org.freedesktop.systemd1.Timer",
                                            "NextElapseUSecRealtime", &e, 't', &next);
        sym_sd_bus_error_free(&e);
        if (r < 0) next = 0;
        *ret_text = isempty(unit_file_state) ? strdup(active_state)
                                             : strdup_printf("%s (%s)", active_state, unit_file_state);
        *ret_next = next == UINT64_MAX ? 0 : next;
        return *ret_text ? 0 : -ENOMEM;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The names of the job files in dir, sorted; NULL and 0 for none (or no dir). */
static int job_names(const char *dir, char ***ret) {
        *ret = NULL;
        DIR *d = opendir(dir);
        if (!d) return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
        _cleanup_strv_free_ char **names = NULL;
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d))) {
                size_t n = strlen(de->d_name);
                if (n <= 5 || !streq(de->d_name + n - 5, ".toml")) continue;
                _cleanup_free_ char *name = strndup(de->d_name, n - 5);
                if (!name) {
                        r = -ENOMEM;
                        break;
                }
                if (!job_name_is_valid(name)) continue;
                if ((r = strv_consume(&names, TAKE_PTR(name))) < 0) break;
        }
        closedir(d);
        if (r < 0) return r;
        if (names) qsort(names, strv_length(names), sizeof *names, cmp_str);
        *ret = TAKE_PTR(names);
        return 0;
}

static int job_list(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        int r = ensure_paths(ctx, err);
        if (r < 0) return r;
        _cleanup_free_ char *dir = cli_jobs_dir(&ctx->paths);
        if (!dir) return -ENOMEM;
        _cleanup_strv_free_ char **names = NULL;
        r = job_names(dir, &names);
        if (r == -ENOMEM) return r;
        if (r < 0) return cli_error_fail(err, NULL, "error: cannot read %s: %s", dir, strerror(-r));

        _cleanup_json_ json_object *out = json_object_new_object();
        if (!out || json_add_string(out, "jobsDir", dir) < 0) return -ENOMEM;
        if (!names) {
                _cleanup_free_ char *none = strdup_printf("none found in %s", dir);
                if (!none || json_add_string(out, "jobs", none) < 0) return -ENOMEM;
                *ret_raw = json_object_get(out);
                *ret_value = TAKE_PTR(out);
                return 0;
        }

        /* the last task of each: the newest rows of every workspace */
        _cleanup_json_ json_object *params = json_object_new_object(), *list = NULL;
        if (!params) return -ENOMEM;
        r = cli_call(ctx, "task.list", params, &list, err);
        if (r < 0) return r;
        json_object *tasks = json_get_array(list, PK_tasks);

        sd_bus *bus = user_bus();
        bool manager = bus != NULL;
        json_object *rows = json_object_new_array();
        if (!rows || json_add(out, "jobs", rows) < 0) {
                if (bus) sym_sd_bus_flush_close_unref(bus);
                return -ENOMEM;
        }
        r = 0;
        for (char **n = names; *n && r >= 0; n++) {
                json_object *row = json_object_new_object();
                if (!row || json_object_array_add(rows, row) < 0 || json_add_string(row, "name", *n) < 0) {
                        json_object_put(row);
                        r = -ENOMEM;
                        break;
                }
                _cleanup_(job_spec_done) job_spec j = {};
                cli_error jerr = {};
                int k = cli_job_load(dir, *n, ctx->paths.home, &j, &jerr);
                if (k < 0) {
                        _cleanup_json_ json_object *ev = k == -ENOMEM ? NULL : cli_error_value(&jerr);
                        cli_error_done(&jerr);
                        if (!ev || json_add_string(row, PK_error, json_get_string(ev, PK_error)) < 0) r = -ENOMEM;
                        continue;
                }
                _cleanup_free_ char *timer = NULL;
                uint64_t next = 0;
                if (manager && timer_state(bus, *n, &timer, &next) < 0) {
                        /* a bus without systemd on it (or none that answers) */
                        free(timer);
                        timer = NULL;
                        manager = false;
                }
                const char *last = NULL, *last_status = NULL;
                for (size_t i = 0; tasks && i < json_object_array_length(tasks); i++) {
                        json_object *t = json_object_array_get_idx(tasks, i);
                        if (streq_ptr(json_get_string(t, PK_job), *n)) {
                                last = json_get_string(t, PK_id);
                                last_status = json_get_string(t, PK_status);
                                break;
                        }
                }
                char iso[32];
                if (json_add_string(row, PK_directory, j.directory) < 0 ||
                    json_add_string(row, PK_executor, j.executor) < 0 ||
                    json_add_string(row, "timer", manager && timer ? timer : "(no user manager)") < 0 ||
                    json_add_string(row, "nextRun", manager && next ? format_iso(next / 1000, iso) : NULL) < 0 ||
                    json_add_string(row, "lastTask", last) < 0 || json_add_string(row, "lastStatus", last_status) < 0)
                        r = -ENOMEM;
        }
        if (bus) sym_sd_bus_flush_close_unref(bus);
        if (r < 0) return r;
        *ret_raw = json_object_get(out);
        *ret_value = TAKE_PTR(out);
        return 0;
}

int cli_run_job(cli_context *ctx, json_object **ret_value, json_object **ret_raw, cli_error *err) {
        char **w = ctx->args->words;
        if (w && streq(w[0], "run") && w[1]) return job_run(ctx, w[1], ret_value, ret_raw, err);
        if (w && streq(w[0], "list")) return job_list(ctx, ret_value, ret_raw, err);
        return cli_error_usage(err, NULL, "job needs an action: run <name> or list");
}
