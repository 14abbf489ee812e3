/* What the CLI prints of the daemon's results (cli-project.h). */
#include "cli-project.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-args.h"
#include "json-util.h"
#include "protocol-keys.h"
#include "macro.h"
#include "string-util.h"

bool cli_json_truthy(json_object *v) {
        if (!v) return false;
        switch (json_object_get_type(v)) {
        case json_type_null: return false;
        case json_type_boolean: return json_object_get_boolean(v);
        case json_type_int: return json_object_get_int64(v) != 0;
        case json_type_double: {
                double d = json_object_get_double(v);
                return d != 0 && !isnan(d);
        }
        case json_type_string: return json_object_get_string_len(v) > 0;
        default: return true;
        }
}

static json_object *get(json_object *o, const char *key) {
        json_object *v = NULL;
        if (o && json_object_is_type(o, json_type_object)) json_object_object_get_ex(o, key, &v);
        return v;
}

static bool has(json_object *o, const char *key) {
        return o && json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, key, NULL);
}

/* Copy o[key] into out[key] (missing → null, as JS undefined prints). */
static int copy_key(json_object *out, json_object *o, const char *key) {
        json_object *v = get(o, key);
        return json_add(out, key, v ? json_object_get(v) : NULL);
}

/* String(o[key]) as a JavaScript template literal renders it: a missing
 * key is "undefined", null is "null". */
static char *js_string_key(json_object *o, const char *key) {
        if (!has(o, key)) return strdup("undefined");
        json_object *v = get(o, key);
        if (!v) return strdup("null");
        switch (json_object_get_type(v)) {
        case json_type_string: return strdup(json_object_get_string(v));
        case json_type_int: return strdup_printf("%" PRId64, json_object_get_int64(v));
        case json_type_double: {
                char buf[32];
                return strdup(js_number_format(json_object_get_double(v), buf));
        }
        case json_type_boolean: return strdup(json_object_get_boolean(v) ? "true" : "false");
        case json_type_object: return strdup("[object Object]");
        default: return strdup(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
        }
}

json_object *cli_lean_status(json_object *detail, bool full) {
        if (full) {
                _cleanup_json_ json_object *out = json_object_new_object();
                if (!out) return NULL;
                json_object_object_foreach(detail, k, v) {
                        json_object *nv;
                        if (streq(k, PK_overlayDirs) && v && json_object_is_type(v, json_type_object)) {
                                nv = json_object_new_object();
                                if (!nv || copy_key(nv, v, PK_root) < 0 || copy_key(nv, v, PK_tmpRoot) < 0) {
                                        json_object_put(nv);
                                        return NULL;
                                }
                        } else
                                nv = v ? json_object_get(v) : NULL;
                        if (json_add(out, k, nv) < 0) return NULL;
                }
                return TAKE_PTR(out);
        }

        _cleanup_json_ json_object *lean = json_object_new_object();
        if (!lean) return NULL;
        const char *status = json_get_string(detail, PK_status);
        bool active = streq_ptr(status, "running") || streq_ptr(status, "queued");

        if (copy_key(lean, detail, PK_id) < 0 || copy_key(lean, detail, PK_status) < 0 ||
            copy_key(lean, detail, PK_startedAt) < 0)
                return NULL;
        if (!active && (copy_key(lean, detail, PK_exitCode) < 0 || copy_key(lean, detail, PK_signal) < 0))
                return NULL;
        /* the timer job it came from (`taskferry job run`, additive) */
        if (cli_json_truthy(get(detail, PK_job)) && copy_key(lean, detail, PK_job) < 0) return NULL;
        /* a queued task's place and why it waits (scheduler.h, additive) */
        static const char *const queue_keys[] = {PK_queuePosition, PK_queueProvider, PK_queuedReason, PK_cooldownUntil};
        for (size_t i = 0; i < ELEMENTSOF(queue_keys); i++)
                if (get(detail, queue_keys[i]) && copy_key(lean, detail, queue_keys[i]) < 0) return NULL;
        /* a live task's "pending" only means it has an overlay: nothing is extracted
         * yet, nothing can be accepted */
        if (streq_ptr(json_get_string(detail, PK_changesetStatus), "pending") &&
            (active ? json_add_string(lean, "changeset", CLI_CHANGESET_NOT_EXTRACTED)
                    : json_add_string(lean, PK_changesetStatus, "pending")) < 0)
                return NULL;
        if (cli_json_truthy(get(detail, PK_changesetError)) && copy_key(lean, detail, PK_changesetError) < 0)
                return NULL;
        if (cli_json_truthy(get(detail, PK_changesetWarnings)) && copy_key(lean, detail, PK_changesetWarnings) < 0)
                return NULL;
        /* HEAD moved while the worker ran; headDriftRecovered null: not told */
        if (cli_json_truthy(get(detail, PK_headDriftFrom)) &&
            (copy_key(lean, detail, PK_headDriftFrom) < 0 || copy_key(lean, detail, PK_headDriftTo) < 0 ||
             copy_key(lean, detail, PK_headDriftRecovered) < 0))
                return NULL;
        if (cli_json_truthy(get(detail, PK_changesetRisks)) && copy_key(lean, detail, PK_changesetRisks) < 0)
                return NULL;
        json_object *check = get(detail, PK_checkStatus);
        if (check && !(json_object_is_type(check, json_type_string) && streq(json_object_get_string(check), "none"))) {
                if (copy_key(lean, detail, PK_checkStatus) < 0 || copy_key(lean, detail, PK_checkCommand) < 0 ||
                    copy_key(lean, detail, PK_checkExitCode) < 0 || copy_key(lean, detail, PK_checkStartedAt) < 0 ||
                    copy_key(lean, detail, PK_checkEndedAt) < 0)
                        return NULL;
                if (json_get_bool(detail, PK_checkOverride, false) && json_add_bool(lean, PK_checkOverride, true) < 0)
                        return NULL;
        }
        if (cli_json_truthy(get(detail, PK_projectConfigWarning)) && copy_key(lean, detail, PK_projectConfigWarning) < 0)
                return NULL;
        if (cli_json_truthy(get(detail, PK_outputDir)) && copy_key(lean, detail, PK_outputDir) < 0)
                return NULL;
        if (has(detail, PK_logBytesWritten) &&
            (copy_key(lean, detail, PK_logBytesWritten) < 0 || copy_key(lean, detail, PK_logLastWriteAt) < 0 ||
             copy_key(lean, detail, PK_logHasEvent) < 0))
                return NULL;
        if (has(detail, PK_outputTail) &&
            (copy_key(lean, detail, PK_outputTail) < 0 || copy_key(lean, detail, PK_outputTailTotalChars) < 0 ||
             copy_key(lean, detail, PK_outputTailTruncated) < 0))
                return NULL;
        if (cli_json_truthy(get(detail, PK_timedOut)) &&
            json_add_string(lean, PK_note, "wait timed out; the task may still be running. Run taskferry wait again to keep waiting, or pass --timeout to set a longer cap") < 0)
                return NULL;

        _cleanup_free_ char *id_s = js_string_key(detail, PK_id);
        _cleanup_free_ char *next = NULL;
        if (active)
                next = strdup_printf("Run taskferry wait or taskferry status with task id \"%s\" to check progress; pass --full for directory/model/log path details", id_s);
        else if (streq_ptr(status, "crashed") && cli_json_truthy(get(detail, PK_sessionId))) {
                _cleanup_free_ char *sid = js_string_key(detail, PK_sessionId);
                _cleanup_free_ char *dir = js_string_key(detail, PK_directory);
                _cleanup_free_ char *qsid = sid ? shell_quote(sid) : NULL;
                _cleanup_free_ char *qdir = dir ? shell_quote(dir) : NULL;
                if (!qsid || !qdir) return NULL;
                next = strdup_printf("Session %s may be salvageable; resume with taskferry dispatch --session-id %s --directory %s --prompt \"<continuation prompt>\"",
                                     qsid, qsid, qdir);
        } else
                next = strdup_printf("Run taskferry result with task id \"%s\" to see the final message; pass --full here for directory/model/log path details", id_s);
        if (!next || json_add_string(lean, PK_next, next) < 0) return NULL;
        return TAKE_PTR(lean);
}

json_object *cli_lean_result(json_object *detail, bool full, bool raw) {
        if (full || raw) return json_copy(detail);

        _cleanup_free_ char *task_id = js_string_key(detail, PK_taskId);
        _cleanup_free_ char *next = NULL;
        if (!has(detail, PK_narrationTotalChars))
                next = strdup_printf("Run taskferry wait with task id \"%s\" to block until the task settles, then re-run taskferry result", task_id);
        else {
                _cleanup_free_ char *n = js_string_key(detail, PK_narrationTotalChars);
                next = n ? strdup_printf("Run taskferry result --full or --fields narration with task id \"%s\" to see intermediate step narration (%s chars total)", task_id, n) : NULL;
        }
        if (!next) return NULL;

        _cleanup_json_ json_object *out = json_object_new_object();
        if (!out) return NULL;
        bool placed = false;
        json_object_object_foreach(detail, k, v) {
                if (streq(k, PK_narration) || streq(k, PK_narrationTruncated)) continue;
                if (streq(k, PK_next)) {
                        if (json_add_string(out, PK_next, next) < 0) return NULL;
                        placed = true;
                        continue;
                }
                if (json_add(out, k, v ? json_object_get(v) : NULL) < 0) return NULL;
        }
        if (!placed && json_add_string(out, PK_next, next) < 0) return NULL;
        return TAKE_PTR(out);
}

const char *cli_changeset_text(const char *status, const char *changeset_status) {
        if (!changeset_status || streq(changeset_status, "none")) return "none";
        if (streq(changeset_status, "pending") && (streq_ptr(status, "running") || streq_ptr(status, "queued")))
                return CLI_CHANGESET_NOT_EXTRACTED;
        return changeset_status;
}

static json_object *list_row(json_object *row) {
        _cleanup_json_ json_object *out = json_object_new_object();
        if (!out) return NULL;
        if (copy_key(out, row, PK_id) < 0 || copy_key(out, row, PK_status) < 0 || copy_key(out, row, PK_model) < 0 ||
            copy_key(out, row, PK_startedAt) < 0)
                return NULL;
        if (has(row, PK_changesetStatus) &&
            json_add_string(out, "changeset", cli_changeset_text(json_get_string(row, PK_status),
                                                                  json_get_string(row, PK_changesetStatus))) < 0)
                return NULL;
        /* the check gate's verdict, once there is one */
        const char *check = json_get_string(row, PK_checkStatus);
        if (check && !streq(check, "none") && json_add_string(out, "check", check) < 0) return NULL;
        if (cli_json_truthy(get(row, PK_failureReason)) && copy_key(out, row, PK_failureReason) < 0) return NULL;
        /* the drift marker: HEAD moved while the worker ran, and whether the
         * changeset still merges into the live tree ("unknown": not told) */
        if (cli_json_truthy(get(row, PK_headDriftFrom))) {
                json_object *rec = get(row, PK_headDriftRecovered);
                const char *mark = !rec || !json_object_is_type(rec, json_type_boolean) ? "unknown"
                                   : json_object_get_boolean(rec)                     ? "merges"
                                                                                      : "conflicts";
                if (json_add_string(out, "headDrift", mark) < 0) return NULL;
        }
        /* how many files of a pending changeset can run code on the host (changeset-risk.h) */
        json_object *risks = json_get_array(row, PK_changesetRisks);
        if (risks && json_object_array_length(risks) > 0 &&
            streq_ptr(json_get_string(row, PK_changesetStatus), "pending") &&
            json_add_int(out, "risks", (int64_t) json_object_array_length(risks)) < 0)
                return NULL;
        return TAKE_PTR(out);
}

/* Rows projected and cut to limit (limit <= 0: all); "none found" for []. */
static json_object *project_rows(json_object *tasks, int64_t limit) {
        if (!tasks || !json_object_is_type(tasks, json_type_array))
                return tasks ? json_object_get(tasks) : NULL;
        size_t n = json_object_array_length(tasks);
        if (n == 0) return json_object_new_string("none found in this workspace");
        size_t keep = (limit > 0 && (uint64_t) limit < n) ? (size_t) limit : n;
        _cleanup_json_ json_object *rows = json_object_new_array();
        if (!rows) return NULL;
        for (size_t i = 0; i < keep; i++) {
                json_object *r = list_row(json_object_array_get_idx(tasks, i));
                if (!r || json_object_array_add(rows, r) < 0) {
                        json_object_put(r);
                        return NULL;
                }
        }
        return TAKE_PTR(rows);
}

/* Sum of the numeric values in counts. */
static double counts_total(json_object *counts) {
        double total = 0;
        if (!counts || !json_object_is_type(counts, json_type_object)) return 0;
        json_object_object_foreach(counts, k, v) {
                (void) k;
                if (v && (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)))
                        total += json_object_get_double(v);
        }
        return total;
}

json_object *cli_project_list(json_object *value, int64_t limit) {
        _cleanup_json_ json_object *out = json_object_new_object();
        if (!out) return NULL;
        if (cli_json_truthy(get(value, PK_directory)) && copy_key(out, value, PK_directory) < 0) return NULL;
        if (copy_key(out, value, PK_counts) < 0) return NULL;
        if (get(value, PK_cooldowns) && copy_key(out, value, PK_cooldowns) < 0) return NULL; /* cooldown.h */
        json_object *tasks = get(value, PK_tasks);
        json_object *rows = project_rows(tasks, limit);
        if ((!rows && tasks) || json_add(out, PK_tasks, rows) < 0) return NULL;

        if (tasks && json_object_is_type(tasks, json_type_array) && json_object_array_length(tasks) > 0) {
                size_t shipped = json_object_array_length(tasks);
                double total = counts_total(get(value, PK_counts));
                _cleanup_free_ char *hint = NULL;
                if (total > (double) shipped) {
                        char buf[32];
                        hint = strdup_printf("Showing the newest %zu of %s tasks (server-capped); pass --directory to narrow further",
                                             shipped, js_number_format(total, buf));
                } else if (limit > 0 && (uint64_t) limit < shipped)
                        hint = strdup_printf("Run taskferry list --limit %zu for all %zu tasks", shipped, shipped);
                if (hint) {
                        json_object *next = json_object_new_array();
                        if (!next || json_object_array_add(next, json_object_new_string(hint)) < 0 ||
                            json_add(out, PK_next, next) < 0)
                                return NULL;
                }
        }
        return TAKE_PTR(out);
}

json_object *cli_home_view(json_object *value, const char *workspace, const char *bin, const char *home) {
        _cleanup_json_ json_object *out = json_object_new_object();
        if (!out) return NULL;
        _cleanup_free_ char *shown = NULL;
        size_t hl = home ? strlen(home) : 0;
        if (hl > 0 && streq(bin, home)) shown = strdup("~");
        else if (hl > 0 && strncmp(bin, home, hl) == 0 && bin[hl] == '/') shown = strdup_printf("~%s", bin + hl);
        else shown = strdup(bin);
        if (!shown) return NULL;

        json_object *tasks = get(value, PK_tasks);
        json_object *rows = project_rows(tasks, CLI_DEFAULT_LIST_LIMIT);
        if (tasks && !rows) return NULL;
        size_t total_rows = tasks && json_object_is_type(tasks, json_type_array) ? json_object_array_length(tasks) : 0;

        if (json_add_string(out, "workspace", workspace) < 0 || json_add_string(out, "bin", shown) < 0 ||
            json_add_string(out, "description", CLI_DESCRIPTION) < 0 ||
            copy_key(out, value, PK_counts) < 0 || json_add(out, PK_tasks, rows) < 0)
                return NULL;
        json_object *next = json_object_new_array();
        if (!next || json_add(out, PK_next, next) < 0) return NULL;
        if (total_rows > 0) {
                json_object_array_add(next, json_object_new_string("Run taskferry status <id> for activity"));
                json_object_array_add(next, json_object_new_string("Run taskferry wait <id> to wait for settlement"));
                json_object_array_add(next, json_object_new_string("Run taskferry result <id> for the final answer"));
                bool pending = false;
                for (size_t i = 0; i < total_rows; i++) {
                        json_object *row = json_object_array_get_idx(tasks, i);
                        if (streq(cli_changeset_text(json_get_string(row, PK_status), json_get_string(row, PK_changesetStatus)),
                                  "pending"))
                                pending = true;
                }
                if (pending)
                        json_object_array_add(next, json_object_new_string(
                                "Run taskferry diff <id> to review a pending changeset, then taskferry accept <id> or taskferry reject <id>"));
        } else {
                json_object_array_add(next, json_object_new_string("Run taskferry dispatch --prompt \"<text>\" to start a task"));
                json_object_array_add(next, json_object_new_string("Run taskferry list --all to inspect every workspace"));
        }
        if (total_rows > CLI_DEFAULT_LIST_LIMIT) {
                _cleanup_free_ char *hint = strdup_printf("Run taskferry list --limit %zu for all %zu tasks", total_rows, total_rows);
                if (!hint || json_object_array_add(next, json_object_new_string(hint)) < 0) return NULL;
        }
        return TAKE_PTR(out);
}

char *cli_accept_failure_text(const char *task_id, const char *reason) {
        const char *r = isempty(reason) ? "the target directory rejected the patch" : reason;
        size_t len = strlen(r);
        while (len > 0 && strchr(" \t\n\r\v\f", *r)) r++, len--;
        while (len > 0 && strchr(" \t\n\r\v\f", r[len - 1])) len--;

        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        if (!f) return NULL;
        fprintf(f, "error: changeset for task %s failed to apply\n", task_id);
        bool first = true;
        for (const char *line = r; ; ) {
                const char *nl = memchr(line, '\n', len - (size_t) (line - r));
                size_t l = nl ? (size_t) (nl - line) : len - (size_t) (line - r);
                fprintf(f, "%s%.*s\n", first ? "  reason: " : "  ", (int) l, line);
                first = false;
                if (!nl) break;
                line = nl + 1;
        }
        fprintf(f, "help: the task is still pending -- resolve the reported conflict in the target directory, then retry \"taskferry accept %s\", or discard the changeset with \"taskferry reject %s\"",
                task_id, task_id);
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}
