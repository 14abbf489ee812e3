#pragma once
/* Integration-test harness: an isolated taskferry world in a temp dir (state,
 * runtime, cache, home, config), the real binaries from the build tree, a raw
 * socket client and helpers to run the CLI and shell snippets.
 *
 * Temp dirs live under $TASKFERRY_TEST_TMPDIR or /var/tmp, never /tmp: bwrap
 * gives every sandbox a private /tmp. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <json-c/json.h>

typedef struct tf_world {
        char *root;        /* temp root R */
        char *state, *run, *cache, *home, *cfg, *repo_parent;
        char *socket;
        char *fixtures;    /* R/fixtures: copy of tests/fixtures (visible inside sandboxes) */
        char **env;        /* environment for CLI/daemon calls */
        pid_t daemon_pid;  /* when started by tf_daemon_start */
} tf_world;

/* Run a Check suite (forking mode) and return the exit status for main(). */
#include <check.h>
int tf_run_suite(Suite *s);

/* Create a world. Extra "NAME=value" entries in extra_env (NULL-terminated,
 * may be NULL) are added to the environment. Aborts the test on failure. */
tf_world *tf_world_new(char *const extra_env[]);
/* Stop any daemon of the world (SIGTERM via its health pid), remove R. */
void tf_world_free(tf_world *w);
/* Set/replace one environment variable of the world. */
void tf_world_setenv(tf_world *w, const char *name, const char *value);

/* Paths of the built binaries. */
const char *tf_bin(const char *name); /* "taskferry", "taskferryd", "taskferry-shim" */

typedef struct tf_run {
        int exit_code;   /* -1 if killed */
        char *out;       /* stdout */
        char *err;       /* stderr */
} tf_run;
void tf_run_done(tf_run *r);

/* Run the CLI with argv (NULL-terminated, without argv[0]) in cwd (NULL → R),
 * stdin_data piped in if non-NULL. */
tf_run tf_cli(tf_world *w, const char *cwd, const char *stdin_data, const char *const argv[]);
/* Run `sh -c script` in cwd with the world's environment. Asserts exit 0 unless allow_fail. */
tf_run tf_sh(tf_world *w, const char *cwd, const char *script, bool allow_fail);
/* printf-style sh -c that must succeed; returns trimmed stdout (malloc'd). */
char *tf_shf(tf_world *w, const char *cwd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Start taskferryd directly (no CLI) and wait until the socket answers. */
void tf_daemon_start(tf_world *w);
/* PID of the running daemon per system.health, or -1. */
pid_t tf_daemon_pid(tf_world *w);

/* Raw socket client. */
int tf_connect(tf_world *w);                       /* asserts success */
void tf_send(int fd, const char *line);            /* writes line + "\n" */
/* Read one line (without '\n'), waiting at most timeout_ms; NULL on EOF/timeout. */
char *tf_recv_line(int fd, int timeout_ms);
/* One request on a fresh connection; returns the parsed response frame. */
json_object *tf_rpc(tf_world *w, const char *method, const char *params_json);
/* The "result" of a successful tf_rpc (asserts ok:true); owned by frame. */
json_object *tf_result(json_object *frame);

/* Parse JSON text; asserts. */
json_object *tf_json(const char *text);
const char *tf_jstr(json_object *o, const char *key);

/* "<dir>/<name>" in one of 8 rotating static buffers (no free needed). */
const char *tf_path(const char *dir, const char *name);

/* Files. */
char *tf_read(const char *path, size_t *len);      /* asserts; NUL-terminated */
void tf_write(const char *path, const char *data, size_t len, mode_t mode);
bool tf_exists(const char *path);
/* Snapshot of a directory tree (paths, modes, sizes, content hashes, symlink
 * targets), `.git` included unless skip_git: equal strings ⇔ equal trees. */
char *tf_tree_snapshot(const char *dir, bool skip_git);

/* Poll until pred(w, arg) is true or timeout_ms passes; returns pred's last value. */
bool tf_wait_until(bool (*pred)(tf_world *, void *), tf_world *w, void *arg, int timeout_ms);

/* Dispatch through the CLI with --json and return the task id (asserts). */
char *tf_dispatch(tf_world *w, const char *const extra_argv[]);
/* The task's result message (a shell worker's stdout), via `result --json`; malloc'd. */
char *tf_task_message(tf_world *w, const char *id);
/* A listening Unix stream socket at path (mode 0777, any old file there
 * removed), for probes that a sandbox must not reach; returns its fd. */
int tf_listen_unix(const char *path);
/* `taskferry wait <id> --json` until settled; returns the parsed status. */
json_object *tf_wait_settled(tf_world *w, const char *id);

/* A private D-Bus session bus (dbus-daemon --session) in <root>/bus, for the
 * D-Bus API suites: tf_bus_start() starts it and points the world's
 * DBUS_SESSION_BUS_ADDRESS at it (fails the test when dbus-daemon is
 * missing); tf_bus_stop() ends it (SIGTERM, reaped) and frees the fields. */
typedef struct tf_bus {
        pid_t pid;
        char *socket;  /* <root>/bus/socket */
        char *address; /* what dbus-daemon printed */
} tf_bus;
tf_bus tf_bus_start(tf_world *w);
void tf_bus_stop(tf_bus *b);

/* Fake socket activation, as systemd does it for taskferry.socket:
 * tf_activation_socket() binds and listens on the world's socket (0600);
 * tf_daemon_start_activated() starts taskferryd with that fd as fd 3,
 * LISTEN_FDS=1 and LISTEN_PID (its output in <root>/daemon.log), sets
 * w->daemon_pid and waits for nothing; tf_wait_exit() waits up to ms for pid
 * to exit and gives its wait status, or -1 if it still runs. */
int tf_activation_socket(tf_world *w);
pid_t tf_daemon_start_activated(tf_world *w, int lfd);
int tf_wait_exit(pid_t pid, int ms);

/* A python3 client a worker runs: sends each argv[1:] (a JSON request
 * without version/id) on one connection to $TASKFERRY_SOCKET_PATH and
 * prints each reply on a line ("EOF" if the daemon closes first). */
extern const char *const tf_peer_py;
