#pragma once
/* The socket server (server.c): listeners, connections, line framing and the
 * requests they carry. Owns Manager.server, Listener, Connection, Request (but
 * wait.c writes a parked Request's next_waiter, conn_next/conn_prev, timer,
 * wait_task and tail_chars, and Connection.waiting), TaskSocket and
 * Task.socket/sock_connections/sock_requests. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "core/peer.h"
#include "line-buffer.h"
#include "protocol.h"

typedef struct Manager Manager;
typedef struct Connection Connection;
typedef struct Request Request;
typedef struct Task Task;
typedef struct TaskSocket TaskSocket;

/* ---- the socket server ---- */
/* One listening socket: the user's (origin NULL) or a task's own. Every
 * listener pauses the same way when the daemon is out of fds (EMFILE/ENFILE:
 * stop polling it for 250 ms, one warning a minute daemon-wide) instead of
 * spinning on a socket that stays readable. */
typedef struct Listener {
        Manager *m;
        Task *origin;            /* NULL: the user's socket */
        int fd;
        sd_event_source *io;
        sd_event_source *retry;  /* armed while accepting is paused */
} Listener;

/* The server's state (Manager.server). */
typedef struct Server {
        Listener listener;             /* the user's socket */
        bool self_bound;               /* bound by us, not passed by systemd (unlinked at exit) */
        uint64_t accept_warned_ms;     /* monotonic ms of the last "cannot accept" warning */
        Connection *connections;
        unsigned in_flight;            /* active requests on the user's socket (cap PROTOCOL_MAX_IN_FLIGHT) */
        unsigned waits;                /* task.wait requests on the user's socket (cap PROTOCOL_MAX_WAITS) */
} Server;

/* A task's own socket (Task.socket), bound into its sandbox. */
struct TaskSocket {
        Listener listener;
        char *path;                    /* <runtime>/task-sockets/<id>.sock */
};

struct Connection {
        Manager *m;
        unsigned n_ref;
        int fd;
        pid_t peer_pid;    /* SO_PEERCRED at accept time (0 if unknown) */
        Task *origin;      /* accepted on this task's own socket: the caller runs inside its sandbox */
        uid_t peer_uid;
        sd_event_source *io;
        LineBuffer in;     /* inbound bytes, LINE_BUFFER_LIMIT_BUFFERED at PROTOCOL_MAX_BUFFER_BYTES */
        char *out;         /* pending outbound bytes */
        size_t out_len, out_off, out_cap;
        bool closing;      /* close once out is flushed */
        bool dead;         /* fd closed; replies are dropped */
        Request *waiting;  /* task.wait requests parked on this connection */
        Connection *next, *prev;
};

/* One request that passed validation; answered exactly once with
 * request_reply_* (possibly later, from a callback). */
struct Request {
        Manager *m;
        Connection *conn;  /* ref held */
        proto_request req;
        Request *next_waiter; /* list link while waiting on a task */
        Request *conn_next, *conn_prev; /* the connection's list of waiting requests */
        sd_event_source *timer;
        Task *wait_task;
        uint64_t tail_chars;  /* task.wait tailChars (0: none) */
        /* the budget the request draws on until it is freed (docs/taskferryd.8.md
         * "Limits"): its task socket's, else the daemon-wide waits or active one */
        Task *budget_task;
        bool budget_wait;
};

/* server.c */
/* Create m->server (no socket yet). 0, -ENOMEM. */
int server_init(Manager *m);
/* Free it (after server_close). */
void server_free(Manager *m);
/* Take the socket from systemd (sd_listen_fds(3), checked with
 * sd_is_socket_unix(3)) or bind <runtime>/daemon.sock under a flock with the
 * stale-socket rules. -EADDRINUSE if a live listener owns the path. */
int server_listen(Manager *m);
/* Stop accepting on the user's socket (idle exit, notify.h): its fd stays
 * open until server_close, new clients wait in its backlog. */
void server_stop_accepting(Manager *m);
/* Send {"type":"shutdown","reason":reason} to every client (best effort,
 * ≤ 200 ms each), close them and the listener, unlink a self-bound socket. */
void server_close(Manager *m, const char *reason);
/* Answer a request exactly once; each takes ownership of `result` and frees r.
 * Frames over the 1 MiB outbound budget degrade to RESPONSE_TOO_LARGE. */
void request_reply_result(Request *r, json_object *result);
void request_reply_error(Request *r, const char *code, const char *message, const char *help);
/* Reply with an error frame built from "error: ...\nhelp: ..." text
 * (MethodError's text form, methods.h). */
void request_reply_error_text(Request *r, const char *code, const char *text);
/* Answer with a ready frame (a success or error envelope); frees r. */
void request_reply_frame(Request *r, json_object *frame);
/* Queue an event frame on c within the outbound budget: an event that
 * does not fit becomes the id-null "event dropped" frame, and the connection
 * is closed when even that does not fit. Never blocks. 0 sent, 1 dropped
 * (degraded), -EPIPE the connection is closed. */
int connection_send_event(Connection *c, json_object *frame);
/* Drop a request without answering (its connection died); frees r. */
void request_free(Request *r);
/* Listen on a socket of task t's own (<runtime>/task-sockets/<id>.sock, 0600)
 * and tag its connections with t; they draw on t's own budgets
 * (PROTOCOL_TASK_SOCKET_MAX_*), never on the daemon-wide ones. -errno. */
int task_socket_open(Task *t);
/* Who is calling on c (peer.h): a connection on a task's own socket is that
 * task's (the socket a connection arrived on names its task: a peer pid can
 * vanish or be reused, a socket cannot lie); else by the peer's pid. */
Caller caller_of(Manager *m, Connection *c);
/* Is any client connected (on the user's socket or a task's)? */
bool server_has_connections(const Manager *m);
/* The path of t's socket, NULL while it has none. */
const char *task_socket_path(const Task *t);
/* Stop listening on t's socket, remove it and close the connections it accepted. */
void task_socket_close(Task *t);
