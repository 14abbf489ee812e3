/* libsystemd loaded on first use: see libsystemd-dl.h. */
#include "libsystemd-dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>

#include "macro.h"

__typeof__(sd_bus_open_user) *sym_sd_bus_open_user;
__typeof__(sd_bus_call_method) *sym_sd_bus_call_method;
__typeof__(sd_bus_error_free) *sym_sd_bus_error_free;
__typeof__(sd_bus_message_unref) *sym_sd_bus_message_unref;
__typeof__(sd_bus_flush_close_unref) *sym_sd_bus_flush_close_unref;
__typeof__(sd_bus_path_encode) *sym_sd_bus_path_encode;
__typeof__(sd_bus_get_property_string) *sym_sd_bus_get_property_string;
__typeof__(sd_bus_get_property_trivial) *sym_sd_bus_get_property_trivial;

/* The optional dependency, for packagers (`readelf -n taskferry`): an ELF
 * note of owner "FDO", type 0x407c0c0a, whose payload is a JSON array of
 * {feature, description, priority, soname[]} (the freedesktop "ELF dlopen
 * metadata" format that systemd's packages use). */
#define DLOPEN_NOTE_JSON                                                                                \
        "[{\"feature\":\"auto-start\",\"description\":\"Start taskferry.socket through the systemd user " \
        "manager; show timer jobs' timers\",\"priority\":\"recommended\",\"soname\":[\"" LIBSYSTEMD_SONAME "\"]}]"
#define ALIGN4(n) (((n) + 3) & ~(size_t) 3)
__attribute__((used, section(".note.dlopen"), aligned(4))) static const struct {
        uint32_t n_namesz, n_descsz, n_type;
        char name[4];
        char desc[ALIGN4(sizeof DLOPEN_NOTE_JSON)];
} dlopen_note = {
        .n_namesz = 4,
        .n_descsz = ALIGN4(sizeof DLOPEN_NOTE_JSON),
        .n_type = 0x407c0c0a,
        .name = "FDO",
        .desc = DLOPEN_NOTE_JSON,
};

static void *libsystemd;

/* Resolve one symbol into *fn. */
static int resolve(void *dl, void **fn, const char *name) {
        *fn = dlsym(dl, name);
        return *fn ? 0 : -ELIBBAD;
}

int dlopen_libsystemd(void) {
        if (libsystemd) return 0;
        void *dl = dlopen(LIBSYSTEMD_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (!dl) return -EOPNOTSUPP;
        void *fns[8];
        int r = 0;
        if (r >= 0) r = resolve(dl, &fns[0], "sd_bus_open_user");
        if (r >= 0) r = resolve(dl, &fns[1], "sd_bus_call_method");
        if (r >= 0) r = resolve(dl, &fns[2], "sd_bus_error_free");
        if (r >= 0) r = resolve(dl, &fns[3], "sd_bus_message_unref");
        if (r >= 0) r = resolve(dl, &fns[4], "sd_bus_flush_close_unref");
        if (r >= 0) r = resolve(dl, &fns[5], "sd_bus_path_encode");
        if (r >= 0) r = resolve(dl, &fns[6], "sd_bus_get_property_string");
        if (r >= 0) r = resolve(dl, &fns[7], "sd_bus_get_property_trivial");
        if (r < 0) {
                dlclose(dl);
                return r;
        }
        /* POSIX: a function pointer may be converted from dlsym()'s void * */
        sym_sd_bus_open_user = (__typeof__(sym_sd_bus_open_user)) fns[0];
        sym_sd_bus_call_method = (__typeof__(sym_sd_bus_call_method)) fns[1];
        sym_sd_bus_error_free = (__typeof__(sym_sd_bus_error_free)) fns[2];
        sym_sd_bus_message_unref = (__typeof__(sym_sd_bus_message_unref)) fns[3];
        sym_sd_bus_flush_close_unref = (__typeof__(sym_sd_bus_flush_close_unref)) fns[4];
        sym_sd_bus_path_encode = (__typeof__(sym_sd_bus_path_encode)) fns[5];
        sym_sd_bus_get_property_string = (__typeof__(sym_sd_bus_get_property_string)) fns[6];
        sym_sd_bus_get_property_trivial = (__typeof__(sym_sd_bus_get_property_trivial)) fns[7];
        libsystemd = dl;
        return 1;
}
