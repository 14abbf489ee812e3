#pragma once
/* What the suites of the CLI's daemon-backed commands (commands.c, watch.c,
 * cli-job.c, cli-views.c) share: an isolated environment, a fake daemon and
 * a command run in this process with its output captured.
 *
 * cli_fixture_setup makes the case's dir (<suite dir>/cli-XXXXXX) and
 * points every path of taskferry there: TASKFERRY_STATE_DIR, _RUNTIME_DIR,
 * _SOCKET_PATH (<dir>/run/daemon.sock), _CACHE_DIR, HOME (<dir>/home),
 * XDG_CONFIG_HOME (<dir>/config); TASKFERRY_AUTO_START=0 and a
 * TASKFERRY_DAEMON that does not exist, so nothing ever starts a real
 * daemon; no user bus; TZ=UTC; the cwd <dir>/work. The variables a command
 * reads from its caller (CLAUDE_CODE_SESSION_ID, TASKFERRY_TASK_ID, the
 * wait default, the pagers) are unset.
 *
 * The fake daemon listens on the socket path and answers each request line
 * from a script: for the n-th request of a method its n-th rule of that
 * method (the last one again once they run out); a method without rules is
 * answered {"method": <m>, "params": <the params>} (system.health:
 * {healthy, pid, version}). Every request line is logged, so a case checks
 * what the command sent. A rule's frames are written in order, "@ID@"
 * replaced by the request's id, each followed by "\n", except these:
 *   "CLOSE"        close the connection (the next one is served afresh)
 *   "RAW:<bytes>"  <bytes> without the newline (a frame cut mid-line)
 *   "BIG"          1.1 MiB of "x" without a newline
 *   "SLEEP:<ms>"   pause
 *   "SIGNAL"       SIGUSR1 to the case's process: sets cli_fixture_interrupted,
 *                  what the CLI's SIGINT handler sets
 *   "WAITOUT:<n>"  wait (at most 10 s) until the captured stdout of the
 *                  running command has n lines */

#include <signal.h>
#include <stdbool.h>
#include <json-c/json.h>

#include "cli-error.h"

/* Frames, as C string literals. */
#define FAKE_OK(result) "{\"version\":1,\"ok\":true,\"id\":\"@ID@\",\"result\":" result "}"
#define FAKE_ERR(code, message, help, detail)                                                                      \
        "{\"version\":1,\"ok\":false,\"error\":{\"code\":\"" code "\",\"message\":\"" message "\",\"help\":\"" help \
        "\",\"detail\":\"" detail "\"},\"id\":\"@ID@\"}"
#define FAKE_SUB_ID "0b6a9c3e-1d2f-4a5b-8c7d-9e0f1a2b3c4d"
#define FAKE_SUBSCRIBED FAKE_OK("{\"subscriptionId\":\"" FAKE_SUB_ID "\"}")
#define FAKE_EVENT(event) "{\"version\":1,\"type\":\"event\",\"subscriptionId\":\"" FAKE_SUB_ID "\",\"event\":" event "}"

#define FAKE_FRAMES(...) ((const char *const[]) {__VA_ARGS__, NULL})

typedef struct cli_fake_rule {
        const char *method;
        const char *const *frames; /* FAKE_FRAMES(...) */
} cli_fake_rule;

/* A row of a table of daemons failing a command: its name, the frames of
 * its one rule, what the command returns and its error (the printed object
 * or the text, as the suite checks it). */
typedef struct cli_fake_failure {
        const char *name;
        const char *const *frames; /* FAKE_FRAMES(...) */
        int r;
        const char *error;
} cli_fake_failure;

/* The case's dir (canonical), set by cli_fixture_setup. */
extern char *cli_fixture_dir;
/* What the "SIGNAL" frame sets; the ctx->interrupted of cli_cmd_run. */
extern volatile sig_atomic_t cli_fixture_interrupted;

void cli_fixture_setup(void);
/* Stop the fake daemon, remove the dir. */
void cli_fixture_teardown(void);

/* Start the fake daemon with rules (terminated by {NULL}; NULL: none). It
 * listens when this returns. One per case. */
void cli_fake_start(const cli_fake_rule *rules);
/* Stop it (its socket removed), so that another can start. */
void cli_fake_stop(void);
/* The params of the n-th (0-based; -1: the last) logged request of method;
 * NULL when there is none. A new reference. */
json_object *cli_fake_params(const char *method, int n);
/* How many requests of method were logged. */
unsigned cli_fake_count(const char *method);
/* The last request of method had exactly these params (JSON text). */
void cli_fake_params_are(const char *method, const char *json);

/* A command run in this process: cli_args_parse of its arguments, then its
 * row's `run` with a fresh cli_context (argv0 "taskferry"), stdin
 * /dev/null (or cli_cmd_stdin_fd when >= 0), stdout and stderr captured. */
typedef struct cli_cmd {
        int r;                 /* what `run` returned */
        json_object *value, *raw;
        cli_error err;
        char *out, *errout;    /* what it wrote to stdout and stderr */
        bool output_done;
} cli_cmd;

extern int cli_cmd_stdin_fd;

/* Run the command of the NULL-terminated arguments (which must parse). */
void cli_cmd_run(cli_cmd *c, ...) __attribute__((sentinel));
/* The same, and the command succeeded (returned 0; fails the case with its
 * error's text otherwise). */
void cli_cmd_ok(cli_cmd *c, ...) __attribute__((sentinel));
void cli_cmd_done(cli_cmd *c);
/* c failed with r, exit code exit_code and exactly this printed error
 * object ({error, help} as one JSON line). */
void cli_cmd_failed(const cli_cmd *c, int r, int exit_code, const char *value_json);
/* c succeeded; its value as one JSON line is want. */
void cli_cmd_value_is(const cli_cmd *c, const char *want);

/* A new pty (both ends O_CLOEXEC, neither our controlling terminal): its
 * master, the slave end in *ret_slave. */
int cli_open_pty(int *ret_slave);
