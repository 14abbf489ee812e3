#pragma once
/* The daemon's one connection to the user bus (user-bus.c), on its event
 * loop: the transient scopes (scope.h) and the D-Bus API (bus.h) share it.
 * Opened once at start; none (no user bus: a container, CI, a plain root
 * shell) is no error: each user says so once, in the one wording below.
 * Owns Manager.user_bus and Manager.user_bus_error. */

#include <systemd/sd-bus.h>

typedef struct Manager Manager;

/* Connect (sd_bus_open_user: $DBUS_SESSION_BUS_ADDRESS, else
 * $XDG_RUNTIME_DIR/bus), described "taskferryd", not exiting on a
 * disconnect, attached to m->event. Always 0: without a bus,
 * Manager.user_bus stays NULL and Manager.user_bus_error says why. */
int user_bus_open(Manager *m);
/* The connection, NULL when there is none. */
sd_bus *user_bus(Manager *m);
/* Why there is none, in words (NULL when there is one): "no user bus:
 * $DBUS_SESSION_BUS_ADDRESS and $XDG_RUNTIME_DIR unset", "no user bus at
 * $DBUS_SESSION_BUS_ADDRESS: <error>", ... malloc'd. */
char *user_bus_missing(Manager *m);
/* Close it without a flush (the daemon is going away, and a flush waits
 * without bound for a bus that does not read). */
void user_bus_close(Manager *m);
