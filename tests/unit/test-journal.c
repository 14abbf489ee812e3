/* journal.c alone (journal.h): the fields of a task state change's journal
 * entry, for every kind of move, and never a prompt, a detail, a log line
 * or an environment value. In-process: a Manager with tasks from records. */

#include <check.h>
#include <stdlib.h>
#include <unistd.h>

#include "systemd/journal.h"
#include "daemon-fixture.h"
#include "json-util.h"
#include "core/manager.h"
#include "core/store.h"
#include "core/task.h"
#include "core/task-table.h"
#include "api/task-views.h"
#include "unit.h"
#include "macro.h"
#include "strv.h"

static Manager m;

static void setup(void) { tf_manager_setup(&m, "test-journal"); }

static void teardown(void) { tf_manager_teardown(&m); }

static Task *add_task(const char *json) { return tf_task(&m, json); }

/* The value of FIELD in l, NULL if absent; asserts it is there at most once. */
static const char *field(char **l, const char *name) {
        const char *found = NULL;
        size_t n = strlen(name);
        for (char **i = l; i && *i; i++)
                if (strncmp(*i, name, n) == 0 && (*i)[n] == '=') {
                        ck_assert_msg(!found, "%s twice", name);
                        found = *i + n + 1;
                }
        return found;
}

static char **fields(Task *t, int old_s, int old_cs) {
        char **l = NULL;
        ck_assert_int_eq(journal_task_fields(t, old_s, old_cs, &l), 0);
        ck_assert_ptr_nonnull(l);
        return l;
}

/* every field name is one of journal.h's list */
static void assert_known_fields(char **l) {
        static const char *const known[] = {
                "MESSAGE_ID", "MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "TASKFERRY_TASK_ID", "TASKFERRY_STATUS",
                "TASKFERRY_CHANGESET", "TASKFERRY_OLD_STATUS", "TASKFERRY_OLD_CHANGESET", "TASKFERRY_EXECUTOR",
                "TASKFERRY_MODEL", "TASKFERRY_UNIT", "TASKFERRY_EXIT_CODE", "TASKFERRY_SIGNAL",
                "TASKFERRY_FAILURE_REASON", "TASKFERRY_ROLE", "TASKFERRY_INTERNAL",
        };
        for (char **i = l; *i; i++) {
                const char *eq = strchr(*i, '=');
                ck_assert_ptr_nonnull(eq);
                bool ok = false;
                for (size_t k = 0; k < ELEMENTSOF(known) && !ok; k++)
                        ok = strlen(known[k]) == (size_t) (eq - *i) && strncmp(*i, known[k], (size_t) (eq - *i)) == 0;
                ck_assert_msg(ok, "unexpected field %s", *i);
        }
}

START_TEST(queued_to_running) {
        Task *t = add_task("{\"id\":\"oc_a_1\",\"directory\":\"/w\",\"prompt\":\"p\",\"status\":\"running\","
                           "\"model\":\"openai/gpt-5\",\"executorId\":\"pi\",\"exitCode\":null,"
                           "\"failureReason\":null,\"changesetStatus\":\"none\"}");
        _cleanup_strv_free_ char **l = fields(t, TASK_QUEUED, CHANGESET_NONE);
        assert_known_fields(l);
        ck_assert_str_eq(field(l, "MESSAGE_ID"), JOURNAL_TASK_STATE_MESSAGE_ID);
        ck_assert_str_eq(field(l, "MESSAGE"), "task oc_a_1: queued → running");
        ck_assert_str_eq(field(l, "PRIORITY"), "6");
        ck_assert_str_eq(field(l, "SYSLOG_IDENTIFIER"), "taskferryd");
        ck_assert_str_eq(field(l, "TASKFERRY_TASK_ID"), "oc_a_1");
        ck_assert_str_eq(field(l, "TASKFERRY_STATUS"), "running");
        ck_assert_str_eq(field(l, "TASKFERRY_OLD_STATUS"), "queued");
        ck_assert_str_eq(field(l, "TASKFERRY_CHANGESET"), "none");
        ck_assert_str_eq(field(l, "TASKFERRY_OLD_CHANGESET"), "none");
        ck_assert_str_eq(field(l, "TASKFERRY_EXECUTOR"), "pi");
        ck_assert_str_eq(field(l, "TASKFERRY_MODEL"), "openai/gpt-5");
        /* null or absent keys send no field */
        ck_assert_ptr_null(field(l, "TASKFERRY_EXIT_CODE"));
        ck_assert_ptr_null(field(l, "TASKFERRY_FAILURE_REASON"));
        ck_assert_ptr_null(field(l, "TASKFERRY_UNIT"));
        ck_assert_ptr_null(field(l, "TASKFERRY_SIGNAL"));
        ck_assert_ptr_null(field(l, "TASKFERRY_INTERNAL"));
        /* the message id is a 128-bit id in systemd's format */
        ck_assert_uint_eq(strlen(JOURNAL_TASK_STATE_MESSAGE_ID), 32);
        ck_assert_uint_eq(strspn(JOURNAL_TASK_STATE_MESSAGE_ID, "0123456789abcdef"), 32);
}
END_TEST

START_TEST(done_with_every_field) {
        Task *t = add_task("{\"id\":\"oc_b_2\",\"directory\":\"/w\",\"role\":\"worker\",\"status\":\"done\","
                           "\"model\":\"anthropic/claude\",\"executorId\":\"opencode\",\"exitCode\":0,"
                           "\"signal\":null,\"changesetStatus\":\"pending\","
                           "\"unit\":\"taskferry-task-oc_b_2.scope\"}");
        _cleanup_strv_free_ char **l = fields(t, TASK_RUNNING, CHANGESET_NONE);
        assert_known_fields(l);
        ck_assert_str_eq(field(l, "MESSAGE"), "task oc_b_2: running → done (exit 0)");
        ck_assert_str_eq(field(l, "PRIORITY"), "6");
        ck_assert_str_eq(field(l, "TASKFERRY_STATUS"), "done");
        ck_assert_str_eq(field(l, "TASKFERRY_CHANGESET"), "pending");
        ck_assert_str_eq(field(l, "TASKFERRY_OLD_CHANGESET"), "none");
        ck_assert_str_eq(field(l, "TASKFERRY_EXECUTOR"), "opencode");
        ck_assert_str_eq(field(l, "TASKFERRY_MODEL"), "anthropic/claude");
        ck_assert_str_eq(field(l, "TASKFERRY_UNIT"), "taskferry-task-oc_b_2.scope");
        ck_assert_str_eq(field(l, "TASKFERRY_EXIT_CODE"), "0");
        ck_assert_str_eq(field(l, "TASKFERRY_ROLE"), "worker");
}
END_TEST

START_TEST(crashed_is_a_warning) {
        Task *t = add_task("{\"id\":\"oc_c_3\",\"directory\":\"/w\",\"status\":\"crashed\",\"exitCode\":137,"
                           "\"signal\":\"SIGKILL\",\"failureReason\":\"oom_killed\","
                           "\"failureDetail\":\"memory.max 64M reached\",\"changesetStatus\":\"none\"}");
        _cleanup_strv_free_ char **l = fields(t, TASK_RUNNING, CHANGESET_NONE);
        assert_known_fields(l);
        ck_assert_str_eq(field(l, "MESSAGE"), "task oc_c_3: running → crashed (exit 137, oom_killed)");
        ck_assert_str_eq(field(l, "PRIORITY"), "4");
        ck_assert_str_eq(field(l, "TASKFERRY_FAILURE_REASON"), "oom_killed");
        ck_assert_str_eq(field(l, "TASKFERRY_EXIT_CODE"), "137");
        ck_assert_str_eq(field(l, "TASKFERRY_SIGNAL"), "SIGKILL");
        /* the detail is free text (it may quote the log): never sent */
        for (char **i = l; *i; i++) ck_assert_ptr_null(strstr(*i, "memory.max"));

        Task *u = add_task("{\"id\":\"oc_c_4\",\"directory\":\"/w\",\"status\":\"unknown\",\"changesetStatus\":\"none\"}");
        _cleanup_strv_free_ char **lu = fields(u, TASK_RUNNING, CHANGESET_NONE);
        ck_assert_str_eq(field(lu, "PRIORITY"), "4");
        ck_assert_str_eq(field(lu, "MESSAGE"), "task oc_c_4: running → unknown");

        Task *c = add_task("{\"id\":\"oc_c_5\",\"directory\":\"/w\",\"status\":\"cancelled\",\"changesetStatus\":\"none\"}");
        _cleanup_strv_free_ char **lc = fields(c, TASK_QUEUED, CHANGESET_NONE);
        ck_assert_str_eq(field(lc, "PRIORITY"), "6");
}
END_TEST

START_TEST(new_task_has_no_old_values) {
        Task *t = add_task("{\"id\":\"oc_d_6\",\"directory\":\"/w\",\"status\":\"queued\",\"executorId\":\"shell\","
                           "\"changesetStatus\":\"none\",\"internal\":true}");
        _cleanup_strv_free_ char **l = fields(t, -1, -1);
        assert_known_fields(l);
        ck_assert_str_eq(field(l, "MESSAGE"), "task oc_d_6: queued");
        ck_assert_str_eq(field(l, "TASKFERRY_STATUS"), "queued");
        ck_assert_ptr_null(field(l, "TASKFERRY_OLD_STATUS"));
        ck_assert_ptr_null(field(l, "TASKFERRY_OLD_CHANGESET"));
        ck_assert_ptr_null(field(l, "TASKFERRY_MODEL"));
        ck_assert_str_eq(field(l, "TASKFERRY_INTERNAL"), "1");
}
END_TEST

START_TEST(changeset_move) {
        Task *t = add_task("{\"id\":\"oc_e_7\",\"directory\":\"/w\",\"status\":\"done\",\"exitCode\":0,"
                           "\"changesetStatus\":\"accepted\"}");
        _cleanup_strv_free_ char **l = fields(t, TASK_DONE, CHANGESET_PENDING);
        ck_assert_str_eq(field(l, "MESSAGE"), "task oc_e_7: changeset pending → accepted");
        ck_assert_str_eq(field(l, "TASKFERRY_CHANGESET"), "accepted");
        ck_assert_str_eq(field(l, "TASKFERRY_OLD_CHANGESET"), "pending");
        ck_assert_str_eq(field(l, "TASKFERRY_OLD_STATUS"), "done");
        ck_assert_str_eq(field(l, "TASKFERRY_STATUS"), "done");
        ck_assert_str_eq(field(l, "PRIORITY"), "6");
}
END_TEST

START_TEST(never_a_secret) {
        Task *t = add_task("{\"id\":\"oc_f_8\",\"directory\":\"/w\",\"prompt\":\"SECRET-PROMPT fix it\","
                           "\"promptPreview\":\"SECRET-PROMPT\",\"status\":\"crashed\",\"model\":\"m\","
                           "\"executorId\":\"pi\",\"exitCode\":1,\"failureReason\":\"provider_error\","
                           "\"failureDetail\":\"SECRET-LOGLINE 401 unauthorized\","
                           "\"finalMarker\":\"SECRET-MARKER\",\"checkOutputTail\":\"SECRET-CHECK\","
                           "\"checkCommand\":\"SECRET-CMD\",\"spawnError\":\"SECRET-SPAWN\","
                           "\"changesetError\":\"SECRET-CSERR\",\"changesetStatus\":\"none\"}");
        const char *env = "{\"OPENAI_API_KEY\":\"sk-live-123\",\"TOKEN\":\"SECRET-ENV\"}";
        ck_assert_int_eq(json_parse_strict(env, strlen(env), &t->caller_env), 0);
        _cleanup_strv_free_ char **l = fields(t, TASK_RUNNING, CHANGESET_NONE);
        assert_known_fields(l);
        for (char **i = l; *i; i++) {
                ck_assert_msg(!strstr(*i, "SECRET"), "secret in %s", *i);
                ck_assert_msg(!strstr(*i, "sk-live"), "env value in %s", *i);
        }
        ck_assert_str_eq(field(l, "TASKFERRY_FAILURE_REASON"), "provider_error");
}
END_TEST

static int n_seen;
static void count_observer(Task *t, TaskStatus old_status, ChangesetStatus old_cs, void *userdata) { n_seen++; }

/* the observer sends (to a journal or, without one, nowhere) and the
 * transition carries on to the observers after it */
/* A check gate's entry: its status and exit code, a warning for a verdict
 * that blocks accept; never the command or its output. */
START_TEST(check_gate_entry) {
        Task *t = add_task("{\"id\":\"oc_j_9\",\"directory\":\"/r\",\"status\":\"done\",\"changesetStatus\":\"pending\","
                           "\"checkStatus\":\"failed\",\"checkCommand\":\"make SECRET_CMD\",\"checkExitCode\":2,"
                           "\"checkOutputTail\":\"token=SECRET_OUT\"}");
        _cleanup_strv_free_ char **l = NULL;
        ck_assert_int_eq(journal_check_fields(t, &l), 0);
        ck_assert_str_eq(field(l, "MESSAGE_ID"), JOURNAL_TASK_CHECK_MESSAGE_ID);
        ck_assert_str_eq(field(l, "MESSAGE"), "task oc_j_9: check gate failed (exit 2)");
        ck_assert_str_eq(field(l, "PRIORITY"), "4");
        ck_assert_str_eq(field(l, "TASKFERRY_TASK_ID"), "oc_j_9");
        ck_assert_str_eq(field(l, "TASKFERRY_CHECK_STATUS"), "failed");
        ck_assert_str_eq(field(l, "TASKFERRY_CHECK_EXIT_CODE"), "2");
        for (char **i = l; *i; i++) ck_assert_msg(!strstr(*i, "SECRET"), "%s", *i);
        Task *p = add_task("{\"id\":\"oc_j_8\",\"directory\":\"/r\",\"status\":\"done\",\"changesetStatus\":\"pending\","
                           "\"checkStatus\":\"running\",\"checkCommand\":\"x\"}");
        _cleanup_strv_free_ char **l2 = NULL;
        ck_assert_int_eq(journal_check_fields(p, &l2), 0);
        ck_assert_str_eq(field(l2, "MESSAGE"), "task oc_j_8: check gate running");
        ck_assert_str_eq(field(l2, "PRIORITY"), "6");
        ck_assert_ptr_null(field(l2, "TASKFERRY_CHECK_EXIT_CODE"));
}
END_TEST

START_TEST(observer_is_quiet_without_a_journal) {
        ck_assert_int_eq(journal_init(&m), 0);
        ck_assert_int_eq(manager_add_task_observer(&m, count_observer, NULL), 0);
        Task *t = add_task("{\"id\":\"oc_g_9\",\"directory\":\"/w\",\"status\":\"queued\",\"changesetStatus\":\"none\"}");
        task_announce_added(t);
        n_seen = 0;
        ck_assert_int_eq(task_transition(t, TASK_RUNNING, CHANGESET_NONE), 1);
        ck_assert_int_eq(n_seen, 1);
}
END_TEST

TF_MAIN("journal", "fields", setup, teardown, 0, check_gate_entry, queued_to_running, done_with_every_field, crashed_is_a_warning,
        new_task_has_no_old_values, changeset_move, never_a_secret, observer_is_quiet_without_a_journal)
