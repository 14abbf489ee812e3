/* task.tail, task.output, task.context (views.h). */
#include "api/views.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/jobs.h"
#include "json-util.h"
#include "logparse.h"
#include "core/manager.h"
#include "api/outputs.h"
#include "core/peer.h"
#include "protocol-keys.h"
#include "protocol.h"
#include "api/server.h"
#include "core/task.h"
#include "core/task-table.h"
#include "api/task-views.h"
#include "macro.h"
#include "string-util.h"
#include "utf8.h"

/* ---- task.tail ---- */

/* The part.text of a canonical text event, NULL if line is not one. */
static char *text_of_line(json_tokener *tok, const char *line, size_t len, bool *ret_json) {
        json_object *o = NULL;
        if (json_parse_strict_with(tok, line, len, &o) < 0) return NULL;
        *ret_json = true;
        char *text = NULL;
        if (streq_ptr(json_get_string(o, "type"), "text")) {
                json_object *part = json_get_object(o, "part"), *v = NULL;
                if (part && json_object_object_get_ex(part, "text", &v) && json_object_is_type(v, json_type_string) &&
                    json_object_get_string_len(v) > 0)
                        text = strndup(json_object_get_string(v), (size_t) json_object_get_string_len(v));
        }
        json_object_put(o);
        return text;
}

int tail_text_of_log(const char *path, bool crashed, char **ret_text) {
        *ret_text = NULL;
        if (!path) return 0;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) return errno == ENOENT ? 0 : -errno;
        struct stat st;
        if (fstat(fd, &st) < 0) return -errno;
        if (!S_ISREG(st.st_mode)) return 0;
        off_t start = st.st_size > TAIL_SCAN_BYTES ? st.st_size - TAIL_SCAN_BYTES : 0;
        _cleanup_free_ char *buf = malloc(TAIL_SCAN_BYTES + 1);
        if (!buf) return -ENOMEM;
        size_t len = 0;
        while (len < TAIL_SCAN_BYTES) {
                ssize_t n = pread(fd, buf + len, TAIL_SCAN_BYTES - len, start + (off_t) len);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) return -errno;
                if (n == 0) break;
                len += (size_t) n;
        }
        buf[len] = 0;
        json_tokener *tok = json_strict_tokener_new();
        if (!tok) return -ENOMEM;
        bool any_json = false;
        char *text = NULL;
        /* backwards, line by line */
        size_t end = len;
        while (end > 0 && !text) {
                size_t s = end;
                while (s > 0 && buf[s - 1] != '\n') s--;
                if (end > s) text = text_of_line(tok, buf + s, end - s, &any_json);
                end = s > 0 ? s - 1 : 0;
        }
        json_tokener_free(tok);
        if (text) {
                *ret_text = text;
                return 1;
        }
        if (!crashed || any_json) return 0;
        /* the raw window without its blank lines */
        char *out = malloc(len + 1);
        if (!out) return -ENOMEM;
        size_t o = 0;
        for (size_t i = 0; i < len;) {
                const char *nl = memchr(buf + i, '\n', len - i);
                size_t n = nl ? (size_t) (nl - (buf + i)) : len - i;
                if (!log_line_is_blank(buf + i, n)) {
                        if (o > 0) out[o++] = '\n';
                        memcpy(out + o, buf + i, n);
                        o += n;
                }
                i += n + 1;
        }
        out[o] = 0;
        if (o == 0) {
                free(out);
                return 0;
        }
        *ret_text = out;
        return 1;
}

typedef struct TailJob {
        Request *r;
        Task *t;
        uint64_t chars;
} TailJob;

static json_object *tail_job_run(void *userdata, int *error) {
        TailJob *j = userdata;
        _cleanup_free_ char *text = NULL;
        int k = tail_text_of_log(j->t->rec.log_path, j->t->rec.status == TASK_CRASHED, &text);
        if (k < 0) {
                *error = k;
                return NULL;
        }
        json_object *o = json_object_new_object();
        if (!o) return NULL;
        if (k == 0) return o; /* nothing */
        size_t len = strlen(text), total = utf8_codepoints(text, len);
        size_t off = utf8_tail_offset(text, len, j->chars);
        _cleanup_free_ char *clean = utf8_sanitize(text + off, len - off);
        json_add_string(o, PK_text, clean ? clean : "");
        json_add_int(o, PK_textTotalChars, (int64_t) total);
        json_add_bool(o, PK_truncated, total > j->chars);
        return o;
}

static void tail_job_done(Manager *m, void *userdata, json_object *res, int error) {
        TailJob *j = userdata;
        Request *r = j->r;
        Task *t = j->t;
        free(j);
        if (!res) {
                MethodError e = {0};
                _cleanup_free_ char *text = strdup_printf("error: could not read the log of task %s: %s\nhelp: retry "
                                                          "taskferry tail %s",
                                                          t->id, strerror(error < 0 ? -error : EIO), t->id);
                int k = method_fail(&e, text);
                return method_reply(r, k, NULL, &e);
        }
        json_object *o = json_object_new_object();
        json_add_string(o, PK_taskId, t->id);
        json_add_string(o, PK_status, task_status_to_string(t->rec.status));
        json_object *text = NULL;
        if (json_object_object_get_ex(res, PK_text, &text)) {
                json_add(o, PK_text, json_object_get(text));
                json_object *v = NULL;
                json_object_object_get_ex(res, PK_textTotalChars, &v);
                json_add(o, PK_textTotalChars, json_object_get(v));
                json_object_object_get_ex(res, PK_truncated, &v);
                json_add(o, PK_truncated, json_object_get(v));
        } else {
                json_add_string(o, PK_text, "none observed yet");
                json_add_int(o, PK_textTotalChars, 0);
                json_add_bool(o, PK_truncated, false);
                _cleanup_free_ char *help = strdup_printf("Run taskferry wait with task id \"%s\" to wait for task output", t->id);
                json_add_string(o, PK_help, help);
        }
        method_reply(r, 0, o, NULL);
}

int method_tail(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err) {
        const ProtoInt *given = &r->req.p.tail.chars;
        int64_t chars = given->set ? given->value : TAIL_CHARS_DEFAULT;
        if (chars < 1 || chars > TAIL_CHARS_MAX) /* the params check refuses these already */
                return method_error(err, E_INVALID_PARAMS, "invalid params for task.tail",
                                    "Check the parameter names and types for task.tail");
        TailJob *j = calloc(1, sizeof *j);
        if (!j) return method_fail(err, "error: out of memory");
        *j = (TailJob) {.r = r, .t = t, .chars = (uint64_t) chars};
        if (job_start_query(m, tail_job_run, tail_job_done, j) < 0) {
                free(j);
                return method_fail(err, "error: cannot start the tail job\nhelp: retry the request");
        }
        return METHOD_DEFERRED;
}

/* ---- task.output ---- */

typedef struct OutputJob {
        Request *r;
        Task *t;
        char *path; /* NULL: listing */
        uint64_t max;
} OutputJob;

static void output_job_free(OutputJob *j) {
        free(j->path);
        free(j);
}

static json_object *output_job_run(void *userdata, int *error) {
        OutputJob *j = userdata;
        json_object *o = json_object_new_object(), *v = NULL;
        if (!o) return NULL;
        int k;
        if (j->path) {
                k = output_read(j->t->rec.output_dir, j->path, j->max, &v);
                if (k >= 0) json_add_int(o, "read", k);
                if (v) json_add(o, PK_file, v);
        } else {
                k = output_list(j->t->rec.output_dir, &v);
                if (v) json_add(o, "listing", v);
        }
        if (k < 0) {
                json_object_put(o);
                *error = k;
                return NULL;
        }
        return o;
}

/* Bytes of the success frame of result as the server would write it, newline
 * included, estimated with a 36-character id (a request id is a UUID: a
 * shorter guess let real replies overflow the budget). */
static size_t frame_bytes(json_object *result) {
        json_object *frame = proto_success("00000000-0000-4000-8000-000000000000", json_object_get(result));
        size_t len = 0;
        if (!frame) return SIZE_MAX;
        json_to_line(frame, &len);
        json_object_put(frame);
        return len + 1;
}

static json_object *output_result(Task *t) {
        json_object *o = json_object_new_object();
        if (!o) return NULL;
        json_add_string(o, PK_taskId, t->id);
        task_copy_key(o, t, TASK_KEY_output_dir);
        return o;
}

static void output_fail(Request *r, const char *code, const char *text) {
        MethodError e = {0};
        int k = method_error_text(&e, code, text ? text : "error: out of memory");
        method_reply(r, k, NULL, &e);
}

/* Keep dropping the last entry until the listing's frame fits. */
static int fit_listing(json_object *o) {
        json_object *files = json_get_array(o, PK_files);
        size_t bytes = frame_bytes(o);
        if (bytes <= PROTOCOL_MAX_BUFFER_BYTES) return 0;
        size_t n = files ? json_object_array_length(files) : 0;
        while (n > 0 && bytes > PROTOCOL_MAX_BUFFER_BYTES) {
                json_object *last = json_object_array_get_idx(files, n - 1);
                size_t len = 0;
                json_to_line(last, &len);
                int64_t size = 0;
                json_get_int64(last, PK_size, &size);
                json_object_array_del_idx(files, n - 1, 1);
                n--;
                bytes -= len + (n > 0 ? 1 : 0);
                int64_t total_bytes = 0;
                json_get_int64(o, PK_bytes, &total_bytes);
                json_add_int(o, PK_bytes, total_bytes - size);
                json_add_int(o, PK_total, (int64_t) n);
                json_add_bool(o, PK_truncated, true);
                if (bytes <= PROTOCOL_MAX_BUFFER_BYTES) bytes = frame_bytes(o); /* exact, once it seems to fit */
        }
        return bytes <= PROTOCOL_MAX_BUFFER_BYTES ? 0 : -E2BIG;
}

static void output_job_done(Manager *m, void *userdata, json_object *res, int error) {
        OutputJob *j = userdata;
        Request *r = j->r;
        Task *t = j->t;
        _cleanup_free_ char *path = TAKE_PTR(j->path);
        uint64_t max = j->max;
        output_job_free(j);
        if (!res) {
                _cleanup_free_ char *text = strdup_printf("error: could not read the output directory of task %s: %s\n"
                                                          "help: inspect %s on disk",
                                                          t->id, strerror(error < 0 ? -error : EIO),
                                                          strempty(t->rec.output_dir));
                return output_fail(r, E_REQUEST_FAILED, text);
        }
        _cleanup_json_ json_object *o = output_result(t);
        if (!o) return output_fail(r, E_REQUEST_FAILED, NULL);
        if (!path) {
                json_object *listing = json_get_object(res, "listing");
                json_object_object_foreach(listing, key, val) json_add(o, key, json_object_get(val));
                if (fit_listing(o) < 0) {
                        _cleanup_free_ char *text = strdup_printf(
                                "error: the output listing of task %s would exceed daemon response limit %d bytes\n"
                                "help: inspect %s on disk",
                                t->id, PROTOCOL_MAX_BUFFER_BYTES, strempty(t->rec.output_dir));
                        return output_fail(r, E_REQUEST_FAILED, text);
                }
                return method_reply(r, 0, TAKE_PTR(o), NULL);
        }
        int64_t k = -1;
        json_get_int64(res, "read", &k);
        if (k == OUTPUT_READ_ESCAPES) {
                _cleanup_free_ char *text = strdup_printf(
                        "error: --path \"%s\" escapes the task's output directory\nhelp: pass a relative path like "
                        "\"deliverable.txt\" or \"subdir/notes.md\"",
                        path);
                return output_fail(r, E_REQUEST_FAILED, text);
        }
        if (k == OUTPUT_READ_NOT_FOUND) {
                _cleanup_free_ char *text = strdup_printf(
                        "error: output file not found: \"%s\" for task %s\nhelp: run taskferry output %s to list the "
                        "files it wrote",
                        path, t->id, t->id);
                return output_fail(r, E_OUTPUT_NOT_FOUND, text);
        }
        json_add(o, PK_files, json_object_new_array());
        json_add_int(o, PK_bytes, 0);
        json_add_int(o, PK_total, 0);
        json_add_bool(o, PK_truncated, false);
        json_object *file = json_get_object(res, PK_file);
        json_add(o, PK_file, json_object_get(file));
        size_t bytes = frame_bytes(o);
        if (bytes > PROTOCOL_MAX_BUFFER_BYTES) {
                _cleanup_free_ char *text = strdup_printf(
                        "error: output file \"%s\" of task %s would exceed daemon response limit %d bytes once "
                        "JSON-encoded (%zu bytes with --max-output-file-bytes %" PRIu64 ")\n"
                        "help: read it on disk at %s/%s, or pass --max-output-file-bytes %u or less (that always fits) "
                        "to have it reported as too_large",
                        path, t->id, PROTOCOL_MAX_BUFFER_BYTES, bytes, max, strempty(t->rec.output_dir), path,
                        OUTPUT_FILE_MAX_SAFE);
                return output_fail(r, E_REQUEST_FAILED, text);
        }
        method_reply(r, 0, TAKE_PTR(o), NULL);
}

int method_output(Manager *m, Request *r, Task *t, json_object **ret, MethodError *err) {
        const ProtoOutputParams *p = &r->req.p.output;
        const char *path = p->path;
        int64_t max = (int64_t) m->settings.max_output_file_bytes;
        if (max <= 0) max = OUTPUT_FILE_MAX_DEFAULT;
        if (p->max_output_file_bytes.set) max = p->max_output_file_bytes.value;
        if (p->max_output_file_bytes.set && max > (int64_t) OUTPUT_FILE_MAX_LIMIT) {
                _cleanup_free_ char *text = strdup_printf(
                        "error: --max-output-file-bytes %" PRId64 " exceeds daemon response limit %u bytes\n"
                        "help: pass --max-output-file-bytes %u or less; %u or less always fits once JSON-encoded",
                        max, OUTPUT_FILE_MAX_LIMIT, OUTPUT_FILE_MAX_LIMIT, OUTPUT_FILE_MAX_SAFE);
                return method_fail(err, text);
        }
        if (path && !t->rec.output_dir) {
                _cleanup_free_ char *text = strdup_printf(
                        "error: task %s has no output directory\nhelp: tasks dispatched before output directories "
                        "existed have none; run taskferry result %s for its final message",
                        t->id, t->id);
                return method_error_text(err, E_NO_OUTPUT_DIR, text);
        }
        OutputJob *j = calloc(1, sizeof *j);
        if (!j) return method_fail(err, "error: out of memory");
        *j = (OutputJob) {.r = r, .t = t, .max = (uint64_t) max};
        if (path && !(j->path = strdup(path))) {
                output_job_free(j);
                return method_fail(err, "error: out of memory");
        }
        if (job_start_query(m, output_job_run, output_job_done, j) < 0) {
                output_job_free(j);
                return method_fail(err, "error: cannot start the output job\nhelp: retry the request");
        }
        return METHOD_DEFERRED;
}

/* ---- task.context ---- */

int method_context(Manager *m, Request *r, Task *target, json_object **ret, MethodError *err) {
        const char *directory = r->req.p.context.directory;
        Caller who = caller_of(m, r->conn);
        _cleanup_free_ char *real = directory && caller_may_name_directory(who, directory) ? realpath(directory, NULL) : NULL;
        if (who.sandboxed && (!real || !caller_may_name_directory(who, real))) {
                /* the same answer whatever exists on the host (peer.h) */
                _cleanup_free_ char *text = strdup_printf(
                        "error: a task running in a sandbox can read the context only of its own directory %s or an "
                        "existing directory under it, not %s\nhelp: pass %s; read other workspaces from outside the sandbox",
                        who.task ? strempty(who.task->rec.directory) : "", strempty(directory),
                        who.task ? strempty(who.task->rec.directory) : "");
                return method_fail(err, text);
        }
        if (!real) {
                _cleanup_free_ char *text = strdup_printf("error: directory does not exist: %s\nhelp: pass an existing "
                                                          "workspace directory (%s)",
                                                          strempty(directory), strerror(errno));
                return method_fail(err, text);
        }
        _cleanup_json_ json_object *list =
                manager_list(m, real, who.sandboxed ? (who.task ? who.task->id : "") : NULL);
        if (!list) return -ENOMEM;
        json_object *o = json_object_new_object(), *tasks = json_object_new_array();
        if (!o || !tasks) {
                json_object_put(o);
                json_object_put(tasks);
                return -ENOMEM;
        }
        json_add_string(o, PK_directory, real);
        json_add(o, PK_tasks, tasks);
        json_object *rows = json_get_array(list, PK_tasks);
        for (size_t i = 0; rows && i < json_object_array_length(rows); i++) {
                Task *t = manager_find_task(m, json_get_string(json_object_array_get_idx(rows, i), PK_id));
                json_object *d = t ? task_status_detail(t) : NULL;
                if (d) json_object_array_add(tasks, d);
        }
        json_object *counts = json_get_object(list, PK_counts);
        json_add(o, PK_counts, json_object_get(counts));
        *ret = o;
        return 0;
}
