/* journald reports of task state changes (journal.h says the rules). */

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>

#include "systemd/journal.h"
#include "core/manager.h"
#include "core/task.h"
#include "json-util.h"
#include "protocol-keys.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"

static int add(char ***l, const char *field, const char *value) {
        if (!value) return 0;
        return strv_consume(l, strdup_printf("%s=%s", field, value));
}

static int add_str_key(char ***l, const char *field, const Task *t, TaskKey k) {
        json_object *v = task_record_is_set(&t->rec, k) ? task_record_get_json(&t->rec, k) : NULL;
        const char *s = v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
        int r = isempty(s) ? 0 : add(l, field, s);
        json_object_put(v);
        return r;
}

int journal_task_fields(const Task *t, int old_status, int old_changeset, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        const TaskRecord *rec = &t->rec;
        const char *status = task_status_to_string(rec->status);
        const char *cs = changeset_status_to_string(rec->changeset_status);
        const char *old_s = old_status >= 0 ? task_status_to_string((TaskStatus) old_status) : NULL;
        const char *old_c = old_changeset >= 0 ? changeset_status_to_string((ChangesetStatus) old_changeset) : NULL;
        bool status_moved = old_status < 0 || old_status != (int) rec->status;
        bool cs_only = !status_moved && old_changeset >= 0 && old_changeset != (int) rec->changeset_status;

        int64_t exit_code = 0;
        bool has_exit = task_record_get_int(rec, TASK_KEY_exit_code, &exit_code);
        const char *reason = task_record_is_set(rec, TASK_KEY_failure_reason) ? rec->failure_reason : NULL;

        _cleanup_free_ char *what = NULL;
        if (cs_only) what = strdup_printf("changeset %s → %s", strnull(old_c), strnull(cs));
        else if (!old_s) what = strdup(strnull(status));
        else what = strdup_printf("%s → %s", old_s, strnull(status));
        _cleanup_free_ char *extra = NULL;
        if (!cs_only && has_exit && !isempty(reason))
                extra = strdup_printf(" (exit %" PRId64 ", %s)", exit_code, reason);
        else if (!cs_only && has_exit)
                extra = strdup_printf(" (exit %" PRId64 ")", exit_code);
        else if (!cs_only && !isempty(reason))
                extra = strdup_printf(" (%s)", reason);
        if (!what) return -ENOMEM;
        _cleanup_free_ char *msg = strdup_printf("task %s: %s%s", t->id, what, strempty(extra));
        if (!msg) return -ENOMEM;

        bool warn = status_moved && (rec->status == TASK_CRASHED || rec->status == TASK_UNKNOWN);
        int r = add(&l, "MESSAGE_ID", JOURNAL_TASK_STATE_MESSAGE_ID);
        if (r >= 0) r = add(&l, "MESSAGE", msg);
        if (r >= 0) r = add(&l, "PRIORITY", warn ? "4" : "6");
        if (r >= 0) r = add(&l, "SYSLOG_IDENTIFIER", "taskferryd");
        if (r >= 0) r = add(&l, "TASKFERRY_TASK_ID", t->id);
        if (r >= 0) r = add(&l, "TASKFERRY_STATUS", status);
        if (r >= 0) r = add(&l, "TASKFERRY_CHANGESET", cs);
        if (r >= 0) r = add(&l, "TASKFERRY_OLD_STATUS", old_s);
        if (r >= 0) r = add(&l, "TASKFERRY_OLD_CHANGESET", old_c);
        if (r >= 0) r = add_str_key(&l, "TASKFERRY_EXECUTOR", t, TASK_KEY_executor_id);
        if (r >= 0) r = add_str_key(&l, "TASKFERRY_MODEL", t, TASK_KEY_model);
        if (r >= 0) r = add_str_key(&l, "TASKFERRY_UNIT", t, TASK_KEY_unit); /* the task's transient scope */
        if (r >= 0 && has_exit) {
                char buf[32];
                snprintf(buf, sizeof buf, "%" PRId64, exit_code);
                r = add(&l, "TASKFERRY_EXIT_CODE", buf);
        }
        if (r >= 0) r = add_str_key(&l, "TASKFERRY_SIGNAL", t, TASK_KEY_signal);
        if (r >= 0 && !isempty(reason)) r = add(&l, "TASKFERRY_FAILURE_REASON", reason);
        if (r >= 0) r = add_str_key(&l, "TASKFERRY_ROLE", t, TASK_KEY_role);
        if (r >= 0 && task_record_is_set(rec, TASK_KEY_internal) && rec->internal) r = add(&l, "TASKFERRY_INTERNAL", "1");
        if (r < 0) return r;
        *ret = TAKE_PTR(l);
        return 0;
}

int journal_check_fields(const Task *t, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        const char *status = strempty(t->rec.check_status);
        int64_t code = 0;
        bool has_code = task_record_get_int(&t->rec, TASK_KEY_check_exit_code, &code);
        char codebuf[32] = "";
        if (has_code) snprintf(codebuf, sizeof codebuf, "%" PRId64, code);
        _cleanup_free_ char *msg = has_code ? strdup_printf("task %s: check gate %s (exit %s)", t->id, status, codebuf)
                                            : strdup_printf("task %s: check gate %s", t->id, status);
        if (!msg) return -ENOMEM;
        bool warn = streq(status, "failed") || streq(status, "timeout") || streq(status, "interrupted");
        int r = add(&l, "MESSAGE_ID", JOURNAL_TASK_CHECK_MESSAGE_ID);
        if (r >= 0) r = add(&l, "MESSAGE", msg);
        if (r >= 0) r = add(&l, "PRIORITY", warn ? "4" : "6");
        if (r >= 0) r = add(&l, "SYSLOG_IDENTIFIER", "taskferryd");
        if (r >= 0) r = add(&l, "TASKFERRY_TASK_ID", t->id);
        if (r >= 0) r = add(&l, "TASKFERRY_CHECK_STATUS", status);
        if (r >= 0 && has_code) r = add(&l, "TASKFERRY_CHECK_EXIT_CODE", codebuf);
        if (r < 0) return r;
        *ret = TAKE_PTR(l);
        return 0;
}

/* The journal's state (Manager.journal): where entries go. */
typedef struct Journal {
        journal_sendv_fn send;
} Journal;

static void journal_send_fields(const Task *t, char **l) {
        Journal *jl = t->m ? t->m->journal : NULL;
        if (!jl || !l) return;
        size_t n = strv_length(l);
        struct iovec iov[32];
        if (n > ELEMENTSOF(iov)) n = ELEMENTSOF(iov);
        for (size_t i = 0; i < n; i++) iov[i] = (struct iovec) {.iov_base = l[i], .iov_len = strlen(l[i])};
        /* no journal (containers, CI): -ENOENT and the like, ignored */
        (void) jl->send(iov, (int) n);
}

static void journal_send(const Task *t, int old_status, int old_changeset) {
        _cleanup_strv_free_ char **l = NULL;
        if (journal_task_fields(t, old_status, old_changeset, &l) >= 0) journal_send_fields(t, l);
}

static void journal_checked(Task *t, void *userdata) {
        _cleanup_strv_free_ char **l = NULL;
        if (journal_check_fields(t, &l) >= 0) journal_send_fields(t, l);
}

static void journal_observer(Task *t, TaskStatus old_status, ChangesetStatus old_cs, void *userdata) {
        journal_send(t, (int) old_status, (int) old_cs);
}

/* a new task's first "queued": no old values */
static void journal_added(Task *t, void *userdata) { journal_send(t, -1, -1); }

int journal_init(Manager *m) {
        if (m->journal) return 0;
        m->journal = calloc(1, sizeof(Journal));
        if (!m->journal) return -ENOMEM;
        m->journal->send = sd_journal_sendv;
        int r = manager_add_observer(
                m, &(TaskObserver) {.added = journal_added, .transitioned = journal_observer, .checked = journal_checked});
        if (r < 0) journal_free(m);
        return r;
}

void journal_set_sender(Manager *m, journal_sendv_fn send) {
        if (m->journal) m->journal->send = send ? send : sd_journal_sendv;
}

void journal_free(Manager *m) {
        free(m->journal);
        m->journal = NULL;
}
