#pragma once
/* libsystemd for the CLI, loaded on first use with dlopen(3) (the way systemd
 * itself loads its optional libraries): only auto-start's StartUnit call on the
 * user manager (cli-client.c: a daemon-backed command whose connect fails
 * starts taskferry.socket first) needs sd-bus, and resolving libsystemd and its
 * dependencies at exec was most of what a `taskferry status` cost. The CLI
 * binary does not link libsystemd (NEEDED has no libsystemd.so.0;
 * tests/CMakeLists.txt checks it); a `.note.dlopen` ELF note names the library
 * for packagers (the freedesktop ELF dlopen metadata format). Not installed →
 * auto-start falls back to spawning the daemon itself. */

#include <systemd/sd-bus.h>

#define LIBSYSTEMD_SONAME "libsystemd.so.0"

/* The functions used, valid once dlopen_libsystemd() returned >= 0. */
extern __typeof__(sd_bus_open_user) *sym_sd_bus_open_user;
extern __typeof__(sd_bus_call_method) *sym_sd_bus_call_method;
extern __typeof__(sd_bus_error_free) *sym_sd_bus_error_free;
extern __typeof__(sd_bus_message_unref) *sym_sd_bus_message_unref;
extern __typeof__(sd_bus_flush_close_unref) *sym_sd_bus_flush_close_unref;
extern __typeof__(sd_bus_path_encode) *sym_sd_bus_path_encode;
extern __typeof__(sd_bus_get_property_string) *sym_sd_bus_get_property_string;
extern __typeof__(sd_bus_get_property_trivial) *sym_sd_bus_get_property_trivial;

/* Load libsystemd.so.0 and resolve every sym_* above (once per process; the
 * library then stays loaded, as a linked one would). Returns 1 when it loaded
 * it now, 0 when it already was, -EOPNOTSUPP when the library is not
 * installed, -ELIBBAD when it lacks a symbol (the sym_* stay NULL). */
int dlopen_libsystemd(void);
