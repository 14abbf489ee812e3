#pragma once
/* CLI side of the daemon wire protocol — newline-framed JSON over the daemon's
 * AF_UNIX socket, requests matched to responses by id, event and shutdown
 * frames interleaved — checked as strictly as the original taskferry's client
 * checks it; and daemon auto-start. Blocking I/O: one CLI process, one
 * connection. Envelopes, frame classification and the health probe are
 * protocol.h's, shared with the daemon. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "cli-error.h"
#include "line-buffer.h"
#include "paths.h"
#include "protocol.h"

#define CLI_CLIENT_MAX_BUFFER_BYTES PROTOCOL_MAX_BUFFER_BYTES /* an unterminated remainder over this fails */
#define CLI_AUTOSTART_TIMEOUT_MS 5000
#define CLI_AUTOSTART_RETRY_MS 25

typedef struct cli_client {
        int fd;          /* connected AF_UNIX stream socket, -1 when closed */
        LineBuffer lines; /* received bytes not yet split into lines (at most CLI_CLIENT_MAX_BUFFER_BYTES) */
        bool restarting; /* a {"type":"shutdown","reason":"restart"} frame arrived */
        bool failed;     /* protocol failure or close: further calls fail */
        json_object *events; /* event frames read while waiting for a response (≤ CLI_CLIENT_MAX_QUEUED_EVENTS) */
        char *boot_err;  /* <runtime>/daemon-boot.err (cli_client_open), for a socket-activated daemon that
                            closes the connection because its start failed */
        uint64_t opened_ms; /* wall clock ms of cli_client_open's connect */
} cli_client;

#define CLI_CLIENT_MAX_QUEUED_EVENTS 1000 /* unread events; over this, a protocol failure */

#define CLI_CLIENT_INIT { .fd = -1, .lines = LINE_BUFFER_INIT(CLI_CLIENT_MAX_BUFFER_BYTES, 0) }

void cli_client_close(cli_client *c);

/* Connect to the AF_UNIX stream socket at path (CLOEXEC). 0 or -errno
 * (-ENOENT, -ECONNREFUSED, -ENAMETOOLONG, ...). */
int cli_client_connect(cli_client *c, const char *socket_path);

/* Send {"version":1,"id":<uuid4>,"method":method,"params":params} + "\n"
 * (params borrowed; NULL → {}) and wait for the response with that id,
 * skipping events, unknown ids and empty lines. Returns 0 and the result
 * (owned by the caller; may be NULL for a JSON null result). Failures set
 * err (exit 1) and return:
 *   -EBADMSG      error response: text = detail if it differs from message,
 *                 else "<message>\nhelp: <help>"; err->code = the code
 *   -EPROTO       invalid frame ("taskferry daemon sent an invalid frame") or
 *                 an unterminated remainder over 1 MiB
 *   -ECONNRESET   connection closed ("taskferry daemon connection closed", or
 *                 the restart text after a restart frame; "... connection is
 *                 closed" if the client had already failed); when the
 *                 daemon wrote daemon-boot.err since the connect (a
 *                 socket-activated daemon whose start failed), a second line
 *                 "daemon boot failed: <its text>"
 *   -ENOMEM */
int cli_client_call(cli_client *c, const char *method, json_object *params,
                    json_object **ret_result, cli_error *err);

/* The next event frame ({version,type,subscriptionId,event}; owned by the
 * caller): those queued during cli_client_call first, then from the socket,
 * waiting at most timeout_ms (< 0: forever). 1 with *ret_frame, 0 on
 * timeout or EINTR, < 0 as cli_client_call (closed, invalid frame). */
int cli_client_next_event(cli_client *c, int timeout_ms, json_object **ret_frame, cli_error *err);

/* Find the daemon binary: $TASKFERRY_DAEMON, <dir of /proc/self/exe>/taskferryd,
 * <that dir>/../libexec/taskferryd, TASKFERRY_INSTALL_LIBEXECDIR/taskferryd;
 * the first executable one. Returns 0 and a malloc'd path, -ENOENT, -ENOMEM. */
int cli_find_daemon(char **ret);

/* Connect to the daemon at p->socket_path. When the connect fails with
 * ENOENT/ECONNREFUSED and TASKFERRY_AUTO_START is not "0", start it:
 * (a) systemd user manager reachable and default socket path → StartUnit
 *     taskferry.socket on the user bus; else or on failure
 * (b) under an exclusive flock on <runtime>/daemon-start.lock: re-check
 *     health, remove daemon-boot.err, double-fork + setsid the daemon
 *     (stdin/stdout /dev/null, stderr → daemon-boot-stderr.log, env + the
 *     three resolved path variables), then poll connect every 25 ms for
 *     5000 ms while holding the lock.
 * Failures (exit 1): "connect <ERRNO> <path>" without auto-start, or
 * "error: taskferry daemon did not become ready within 5000ms: <last connect
 * error>" + "daemon boot failed: <daemon-boot.err>" | "booter subprocess
 * failed before startup: <stderr log>" + "help: check <runtime> permissions
 * and daemon startup diagnostics, then retry". Returns 0, -EIO (err set), -ENOMEM. */
int cli_client_open(cli_client *c, const tf_paths *p, cli_error *err);
