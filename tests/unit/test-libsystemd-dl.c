/* libsystemd-dl.c: the CLI's lazily loaded libsystemd (auto-start's StartUnit). */
#include <check.h>
#include <dlfcn.h>
#include <stdlib.h>

#include "libsystemd-dl.h"
#include "unit.h"

START_TEST(loads_once_and_resolves_every_symbol) {
        /* nothing is resolved before the first use */
        ck_assert_ptr_null(sym_sd_bus_open_user);
        ck_assert_int_eq(dlopen_libsystemd(), 1);
        ck_assert_int_eq(dlopen_libsystemd(), 0);
        ck_assert_ptr_nonnull(sym_sd_bus_open_user);
        ck_assert_ptr_nonnull(sym_sd_bus_call_method);
        ck_assert_ptr_nonnull(sym_sd_bus_error_free);
        ck_assert_ptr_nonnull(sym_sd_bus_message_unref);
        ck_assert_ptr_nonnull(sym_sd_bus_flush_close_unref);
        ck_assert_ptr_nonnull(sym_sd_bus_path_encode);
        ck_assert_ptr_nonnull(sym_sd_bus_get_property_string);
        ck_assert_ptr_nonnull(sym_sd_bus_get_property_trivial);
        /* the very functions of the installed library */
        void *dl = dlopen(LIBSYSTEMD_SONAME, RTLD_NOW | RTLD_NOLOAD);
        ck_assert_ptr_nonnull(dl);
        ck_assert_ptr_eq((void *) sym_sd_bus_call_method, dlsym(dl, "sd_bus_call_method"));
        ck_assert_ptr_eq((void *) sym_sd_bus_get_property_trivial, dlsym(dl, "sd_bus_get_property_trivial"));
        dlclose(dl);
        /* and callable */
        ck_assert_ptr_null(sym_sd_bus_message_unref(NULL));
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sym_sd_bus_error_free(&e);
        /* systemd's unit object paths: sd_bus_path_encode of the unit name */
        char *path = NULL;
        ck_assert_int_ge(sym_sd_bus_path_encode("/org/freedesktop/systemd1/unit", "taskferry-job@demo.timer", &path), 0);
        ck_assert_str_eq(path, "/org/freedesktop/systemd1/unit/taskferry_2djob_40demo_2etimer");
        free(path);
}
END_TEST

int main(void) {
        Suite *s = suite_create("libsystemd-dl");
        tf_tcase(s, "dlopen", NULL, NULL, 0, TF_TESTS(loads_once_and_resolves_every_symbol));
        /* one process: the load-once state is the point */
        return tf_run_suite_nofork(s);
}
