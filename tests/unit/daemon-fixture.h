#pragma once
/* A Manager for the daemon's unit suites: its own sd-event loop and state
 * dir, the observers every daemon registers first (the task table's, the
 * store's), a server without a socket, and the fakes the suites drive it
 * with: tasks from records, connections on socketpairs, and requests as
 * the server makes them. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon.h"

/* m zeroed, with an event loop, paths.state_dir a new dir (tf_tmpdir_new)
 * $TASKFERRY_TEST_TMPDIR (default /var/tmp)/<name>-XXXXXX (runtime_dir and
 * cache_dir inside it, not created), the server's state (no socket), the
 * task table's and the store's observers. */
void tf_manager_setup(Manager *m, const char *name);
/* Undo it: every task and job freed, the observers, the store, the
 * scheduler, the server's state, the loop; the dir removed. */
void tf_manager_teardown(Manager *m);

/* A whole daemon on m, as main.c sets one up (daemon.h daemon_setup: every
 * module, every observer), over a new dir <tmp>/<name>-XXXXXX holding its
 * home, state (with its subdirs), runtime and cache dirs, the settings of an
 * absent config.json and this environment; no socket, no load. */
void tf_daemon_setup(Manager *m, const char *name);
/* daemon_free, and the dir removed. */
void tf_daemon_teardown(Manager *m);

/* A task from its tasks.json record, in m's table (fails the case when the
 * record is not one). */
Task *tf_task(Manager *m, const char *json);
/* The same from printf arguments. */
Task *tf_taskf(Manager *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A connection on one end of a socketpair (n_ref: refs, the test's; the
 * request each tf_request makes adds one), the other end in *ret_peer. */
Connection *tf_connection_new(Manager *m, unsigned refs, int *ret_peer);
/* Free it (its subscriptions and buffers) and close the peer's end. */
void tf_connection_free(Connection *c, int peer);

/* A connection on a socketpair (tf_connection_new) and the peer end the
 * test reads its frames from. */
typedef struct TfPeer {
        Connection *conn;
        int fd;
} TfPeer;
TfPeer tf_peer_new(Manager *m, unsigned refs);
/* tf_connection_free of both. */
void tf_peer_free(TfPeer *p);

/* Every frame the peer end fd has received so far (read until it would
 * block), each line parsed, as a JSON array (fails the case on a line that
 * is not JSON). */
json_object *tf_frames(int fd);
/* The one frame fd has received (fails the case unless exactly one): a new
 * ref. */
json_object *tf_one_frame(int fd);

/* A request parsed from line (a whole frame, without '\n') on c, counted
 * on the user's socket's budget as the server would: waits (wait = true)
 * or active requests. */
Request *tf_request(Manager *m, Connection *c, const char *line, bool wait);

/* Dispatch line (a whole request frame) from peer as the server would
 * (method_dispatch of a tf_request, not a wait) and run m's loop until the
 * peer has received a frame, for at most ms; that one frame (fails the case
 * unless exactly one came): a new ref. */
json_object *tf_call_frame(Manager *m, const TfPeer *peer, const char *line, uint64_t ms);

/* Run m's loop for ms (its events dispatched as they come). */
void tf_run_loop_ms(Manager *m, uint64_t ms);
/* Run one iteration that dispatches what is pending now (a deferred tick). */
void tf_run_pending(Manager *m);

/* A private dbus-daemon (a session bus, killed with the test) listening on
 * <dir>/bus, its address exported as $DBUS_SESSION_BUS_ADDRESS; its pid, or
 * 0 when /usr/bin/dbus-daemon is not installed. */
pid_t tf_dbus_daemon_start(const char *dir);

/* The daemon's env file: <home>/env written (0600) with text and loaded
 * as main.c loads it (env_file_init; fails the case when it refuses). */
void tf_use_env_file(Manager *m, const char *text);
