/* bus.c: the D-Bus API on the daemon's user-bus connection. Without a bus,
 * bus_start is no error; on a private dbus-daemon (when installed) the
 * manager object's properties and ListTasks, a task object's properties and
 * CancelTask's refusal of an unknown id, asked by a second connection on the
 * same loop (the daemon answers from its loop, so every call is async and
 * the loop is driven until its reply, with a bound). Task ids are encoded
 * into object paths whatever bytes they hold. */

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "daemon-fixture.h"
#include "unit.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

static Manager m;
static char *busdir;
static pid_t bus_pid;

static void setup_none(void) {
        unsetenv("DBUS_SESSION_BUS_ADDRESS");
        unsetenv("XDG_RUNTIME_DIR");
        tf_daemon_setup(&m, "test-bus");
}

static void setup_bus(void) {
        busdir = tf_tmpdir_new("test-bus-dbus");
        unsetenv("XDG_RUNTIME_DIR");
        bus_pid = tf_dbus_daemon_start(busdir);
        if (!bus_pid) unsetenv("DBUS_SESSION_BUS_ADDRESS");
        tf_daemon_setup(&m, "test-bus");
}

static void teardown(void) {
        tf_daemon_teardown(&m);
        if (bus_pid) sigkill_wait(bus_pid);
        bus_pid = 0;
        busdir = tf_tmpdir_free(busdir);
}

START_TEST(no_bus_is_no_error) {
        ck_assert_ptr_null(m.user_bus);
        ck_assert_int_eq(bus_start(&m), 0);
        /* the observers still run without it */
        Task *t = tf_task(&m, "{\"id\":\"oc_a\",\"status\":\"queued\",\"changesetStatus\":\"none\",\"directory\":\"/w\"}");
        ck_assert_int_eq(task_transition(t, TASK_CANCELLED, CHANGESET_NONE), 1);
}
END_TEST

START_TEST(paths_encode_any_id) {
        static const char *const ids[] = {"oc_mx3b8o4p_7eeb1f07", "a/../b", "x y", "\xc3\xa9", "-", "_2f"};
        for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
                char *p = bus_task_path(ids[i]);
                ck_assert_ptr_nonnull(p);
                ck_assert(sd_bus_object_path_is_valid(p));
                char *back = NULL;
                ck_assert_int_gt(sd_bus_path_decode(p, BUS_TASK_PREFIX, &back), 0);
                ck_assert_str_eq(back, ids[i]);
                free(back);
                free(p);
        }
}
END_TEST

/* One async call's reply. */
typedef struct Reply {
        bool done;
        sd_bus_message *msg;
} Reply;

static int on_reply(sd_bus_message *msg, void *userdata, sd_bus_error *ret_error) {
        Reply *r = userdata;
        r->done = true;
        r->msg = sd_bus_message_ref(msg);
        return 0;
}

static sd_bus *client;
static const char *dest = BUS_NAME; /* where call() sends */

static sd_bus_message *call(const char *path, const char *iface, const char *member, const char *types, ...) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *req = NULL;
        ck_assert_int_ge(sd_bus_message_new_method_call(client, &req, dest, path, iface, member), 0);
        if (types) {
                va_list ap;
                va_start(ap, types);
                ck_assert_int_ge(sd_bus_message_appendv(req, types, ap), 0);
                va_end(ap);
        }
        Reply r = {0};
        ck_assert_int_ge(sd_bus_call_async(client, NULL, req, on_reply, &r, 5 * 1000 * 1000), 0);
        uint64_t end = mono_ms() + 5000;
        while (!r.done && mono_ms() < end) ck_assert_int_ge(sd_event_run(m.event, 20 * 1000), 0);
        ck_assert_msg(r.done, "%s.%s got no reply", iface, member);
        return r.msg;
}

static sd_bus_message *get(const char *path, const char *iface, const char *prop) {
        return call(path, "org.freedesktop.DBus.Properties", "Get", "ss", iface, prop);
}

START_TEST(the_api_on_a_private_bus) {
        if (!bus_pid) {
                fprintf(stderr, "%s: skipped: dbus-daemon is not installed\n", __func__);
                return;
        }
        ck_assert_ptr_nonnull(m.user_bus);
        tf_task(&m, "{\"id\":\"oc_a\",\"status\":\"running\",\"changesetStatus\":\"none\",\"directory\":\"/w\","
                    "\"model\":\"p/m\",\"prompt\":\"a secret prompt\"}");
        tf_task(&m, "{\"id\":\"oc_b\",\"status\":\"queued\",\"changesetStatus\":\"none\",\"directory\":\"/w\"}");
        tf_task(&m, "{\"id\":\"oc_s\",\"status\":\"running\",\"changesetStatus\":\"none\",\"summaryOf\":\"oc_a\","
                    "\"internal\":true}");
        ck_assert_int_eq(bus_start(&m), 0);
        ck_assert_int_ge(sd_bus_open_user(&client), 0);
        ck_assert_int_ge(sd_bus_attach_event(client, m.event, 0), 0);
        /* the name is taken asynchronously: wait for it */
        uint64_t end = mono_ms() + 5000;
        for (;;) {
                dest = "org.freedesktop.DBus";
                sd_bus_message *r = call("/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", "s", BUS_NAME);
                dest = BUS_NAME;
                int has = 0;
                ck_assert_int_ge(sd_bus_message_read(r, "b", &has), 0);
                sd_bus_message_unref(r);
                if (has || mono_ms() >= end) {
                        ck_assert(has);
                        break;
                }
        }
        /* the manager: visible tasks only */
        sd_bus_message *r = get(BUS_MANAGER_PATH, BUS_MANAGER_INTERFACE, "Tasks");
        ck_assert_msg(!sd_bus_message_is_method_error(r, NULL), "%s", sd_bus_message_get_error(r)->message);
        uint32_t u = 0;
        ck_assert_int_ge(sd_bus_message_read(r, "v", "u", &u), 0);
        ck_assert_uint_eq(u, 2);
        sd_bus_message_unref(r);
        r = get(BUS_MANAGER_PATH, BUS_MANAGER_INTERFACE, "RunningTasks");
        ck_assert_int_ge(sd_bus_message_read(r, "v", "u", &u), 0);
        ck_assert_uint_eq(u, 1);
        sd_bus_message_unref(r);
        /* ListTasks in table order */
        r = call(BUS_MANAGER_PATH, BUS_MANAGER_INTERFACE, "ListTasks", NULL);
        ck_assert_msg(!sd_bus_message_is_method_error(r, NULL), "%s", sd_bus_message_get_error(r)->message);
        ck_assert_int_ge(sd_bus_message_enter_container(r, 'a', "(sos)"), 0);
        const char *id, *path, *status;
        char got[256] = "";
        while (sd_bus_message_read(r, "(sos)", &id, &path, &status) > 0) {
                char *p = bus_task_path(id);
                ck_assert_str_eq(path, p);
                free(p);
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s=%s", *got ? "," : "", id, status);
        }
        ck_assert_str_eq(got, "oc_a=running,oc_b=queued");
        sd_bus_message_unref(r);
        /* a task's properties */
        char *pa = bus_task_path("oc_a");
        r = get(pa, BUS_TASK_INTERFACE, "Status");
        const char *s = NULL;
        ck_assert_int_ge(sd_bus_message_read(r, "v", "s", &s), 0);
        ck_assert_str_eq(s, "running");
        sd_bus_message_unref(r);
        r = get(pa, BUS_TASK_INTERFACE, "Model");
        ck_assert_int_ge(sd_bus_message_read(r, "v", "s", &s), 0);
        ck_assert_str_eq(s, "p/m");
        sd_bus_message_unref(r);
        /* never the prompt */
        r = get(pa, BUS_TASK_INTERFACE, "Prompt");
        ck_assert(sd_bus_message_is_method_error(r, NULL));
        sd_bus_message_unref(r);
        free(pa);
        /* an unknown id */
        r = call(BUS_MANAGER_PATH, BUS_MANAGER_INTERFACE, "CancelTask", "s", "oc_nope");
        ck_assert(sd_bus_message_is_method_error(r, "org.taskferry.Taskferry1.UnknownTask"));
        sd_bus_message_unref(r);
        ck_assert_int_eq(manager_find_task(&m, "oc_b")->rec.status, TASK_QUEUED);
        client = sd_bus_flush_close_unref(client);
}
END_TEST

int main(void) {
        Suite *s = suite_create("bus");
        tf_tcase(s, "none", setup_none, teardown, 30, TF_TESTS(no_bus_is_no_error, paths_encode_any_id));
        tf_tcase(s, "bus", setup_bus, teardown, 30, TF_TESTS(the_api_on_a_private_bus));
        return tf_run_suite(s);
}
