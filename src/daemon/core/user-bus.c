/* The daemon's one user-bus connection (user-bus.h). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/manager.h"
#include "core/user-bus.h"
#include "macro.h"
#include "string-util.h"

int user_bus_open(Manager *m) {
        if (m->user_bus) return 0;
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r = sd_bus_open_user_with_description(&bus, "taskferryd");
        /* a lost bus costs the scopes and the API, never the daemon */
        if (r >= 0) r = sd_bus_set_exit_on_disconnect(bus, false);
        if (r >= 0) r = sd_bus_attach_event(bus, m->event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0) {
                m->user_bus_error = r;
                return 0;
        }
        m->user_bus = TAKE_PTR(bus);
        m->user_bus_error = 0;
        return 0;
}

sd_bus *user_bus(Manager *m) { return m->user_bus; }

char *user_bus_missing(Manager *m) {
        if (m->user_bus) return NULL;
        int r = m->user_bus_error ? m->user_bus_error : -ENOTCONN;
        const char *addr = getenv("DBUS_SESSION_BUS_ADDRESS");
        if (r == -ENOMEDIUM) return strdup("no user bus: $DBUS_SESSION_BUS_ADDRESS and $XDG_RUNTIME_DIR unset");
        if (!isempty(addr)) return strdup_printf("no user bus at $DBUS_SESSION_BUS_ADDRESS: %s", strerror(-r));
        if (r == -ENOENT) return strdup("no user bus: $DBUS_SESSION_BUS_ADDRESS unset and $XDG_RUNTIME_DIR/bus missing");
        return strdup_printf("no user bus: $DBUS_SESSION_BUS_ADDRESS unset and $XDG_RUNTIME_DIR/bus: %s", strerror(-r));
}

void user_bus_close(Manager *m) {
        if (!m->user_bus) return;
        (void) sd_bus_detach_event(m->user_bus);
        m->user_bus = sd_bus_close_unref(m->user_bus);
}
