/* user-bus.c: the daemon's one user-bus connection. Without a bus, opening
 * is no error and the reason is said in one wording per cause; with one (a
 * private dbus-daemon the suite starts, when it is installed) the connection
 * is there, opened once, and closed without a flush. */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/user-bus.h"
#include "daemon-fixture.h"
#include "unit.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

static Manager m;
static char *dir;

static void setup(void) {
        tf_manager_setup(&m, "test-user-bus");
        dir = m.paths.state_dir;
        unsetenv("DBUS_SESSION_BUS_ADDRESS");
        unsetenv("XDG_RUNTIME_DIR");
}

static void teardown(void) {
        user_bus_close(&m);
        tf_manager_teardown(&m);
}

static void assert_missing(const char *want) {
        ck_assert_int_eq(user_bus_open(&m), 0);
        ck_assert_ptr_null(user_bus(&m));
        char *why = user_bus_missing(&m);
        ck_assert_str_eq(why, want);
        free(why);
}

START_TEST(nothing_set) { assert_missing("no user bus: $DBUS_SESSION_BUS_ADDRESS and $XDG_RUNTIME_DIR unset"); }
END_TEST

START_TEST(no_socket_in_the_runtime_dir) {
        setenv("XDG_RUNTIME_DIR", dir, 1);
        assert_missing("no user bus: $DBUS_SESSION_BUS_ADDRESS unset and $XDG_RUNTIME_DIR/bus missing");
}
END_TEST

START_TEST(an_address_that_answers_nothing) {
        char *addr = strdup_printf("unix:path=%s/nobus", dir);
        setenv("DBUS_SESSION_BUS_ADDRESS", addr, 1);
        free(addr);
        assert_missing("no user bus at $DBUS_SESSION_BUS_ADDRESS: No such file or directory");
        /* a socket file nobody listens on */
        char *sock = tf_put(dir, "dead", "", 0);
        addr = strdup_printf("unix:path=%s", sock);
        setenv("DBUS_SESSION_BUS_ADDRESS", addr, 1);
        free(addr);
        free(sock);
        ck_assert_int_eq(user_bus_open(&m), 0);
        ck_assert_ptr_null(user_bus(&m));
        char *why = user_bus_missing(&m);
        ck_assert(strncmp(why, "no user bus at $DBUS_SESSION_BUS_ADDRESS: ", 42) == 0);
        free(why);
}
END_TEST

START_TEST(a_bus_that_answers) {
        pid_t pid = tf_dbus_daemon_start(dir);
        if (pid == 0) {
                fprintf(stderr, "%s: skipped: dbus-daemon is not installed\n", __func__);
                return;
        }
        ck_assert_int_eq(user_bus_open(&m), 0);
        sd_bus *b = user_bus(&m);
        ck_assert_ptr_nonnull(b);
        ck_assert_ptr_null(user_bus_missing(&m));
        ck_assert_ptr_eq(sd_bus_get_event(b), m.event);
        const char *desc = NULL;
        ck_assert_int_ge(sd_bus_get_description(b, &desc), 0);
        ck_assert_str_eq(desc, "taskferryd");
        /* opened once */
        ck_assert_int_eq(user_bus_open(&m), 0);
        ck_assert_ptr_eq(user_bus(&m), b);
        /* the bus going away costs the daemon nothing */
        ck_assert_int_eq(sd_bus_get_exit_on_disconnect(b), 0);
        user_bus_close(&m);
        ck_assert_ptr_null(user_bus(&m));
        user_bus_close(&m); /* twice: a no-op */
        sigkill_wait(pid);
}
END_TEST

TF_MAIN("user-bus", "user-bus", setup, teardown, 30, nothing_set, no_socket_in_the_runtime_dir,
        an_address_that_answers_nothing, a_bus_that_answers)
