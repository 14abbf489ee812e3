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
        int guard;         /* the world's guard (world-teardown.h) */
} tf_world;

/* Run a Check suite (forking mode) and return the exit status for main(). */
#include <check.h>
int tf_run_suite(Suite *s);

/* Create a world. Extra "NAME=value" entries in extra_env (NULL-terminated,
 * may be NULL) are added to the environment. Aborts the test on failure.
 * Its guard (world-teardown.h) ends the world's processes and removes R
 * when the case ends without tf_world_free (a failed assertion, a timeout). */
tf_world *tf_world_new(char *const extra_env[]);
/* Stop any daemon of the world (SIGTERM via its health pid, up to 5 s), kill
 * whatever of the world still runs (a daemon that did not stop, the shims
 * and workers of tasks still running), remove R. */
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
/* `taskferry wait <id> --json` until settled; returns the parsed status.
 * The failure message of a wait that fails or does not settle names the
 * status as far as it is known (tf_status_why), at the caller's line. */
#define tf_wait_settled(w, id) tf_wait_settled_at(__FILE__, __LINE__, (w), (id))
json_object *tf_wait_settled_at(const char *file, int line, tf_world *w, const char *id);
/* What a task's status (of `wait`/`status --json`, or its tasks.json
 * record) says about how it ended, for a failure message: "status S,
 * failureReason R, failureDetail D, spawnError E", and a sentence naming the
 * cause when it is one known to come from outside the test (a file under
 * /etc or /opt that the sandbox masks, removed by another process during
 * the launch). malloc'd. */
char *tf_status_why(json_object *status);
/* Assert that the settled status of task id is want ("done", "crashed",
 * ...); the failure message, at the caller's line, says tf_status_why(). */
#define tf_assert_status(status, id, want) tf_assert_status_at(__FILE__, __LINE__, (status), (id), (want))
void tf_assert_status_at(const char *file, int line, json_object *status, const char *id, const char *want);

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

/* ---- suites ----
 * A suite's tests as one NULL-terminated list: TF_TESTS(a, b, c) names the
 * START_TEST cases. tf_add_tests() adds one TCase `tcase` with that timeout
 * (seconds) holding them to s; tf_run_tests() builds a suite of one such
 * TCase and runs it (tf_run_suite's exit status). */
#define TF_TESTS(...) ((const TTest *const[]){__VA_ARGS__, NULL})
TCase *tf_add_tests(Suite *s, const char *tcase, int timeout_s, const TTest *const tests[]);
int tf_run_tests(const char *suite, const char *tcase, int timeout_s, const TTest *const tests[]);

/* ---- repositories ----
 * tf_repo_new(): a git repository with one commit at dir (relative: under
 * the world's repo_parent; NULL: "repo") holding what the shell snippet
 * `files` writes, run in it (NULL: `echo base > f`). The commit's author
 * is the world's (GIT_AUTHOR_*). Asserts; returns the path (malloc'd).
 * tf_worktree_add(): `git worktree add` of repo at dir (relative: under
 * repo_parent) on a new branch (NULL: git's default, the dir's name);
 * returns the worktree's path (malloc'd). */
char *tf_repo_new(tf_world *w, const char *dir, const char *files);
char *tf_worktree_add(tf_world *w, const char *repo, const char *dir, const char *branch);

/* ---- dispatching a worker ----
 * `taskferry dispatch --executor executor [--model model] --directory dir
 * [extra...] --prompt prompt` (model NULL: none; extra NULL-terminated, may
 * be NULL; at most 16 entries): the task's id (malloc'd).
 * tf_worker_settled() waits until it settled too, the settled status in
 * *ret_status (the caller puts it) when ret_status is non-NULL. */
char *tf_dispatch_worker(tf_world *w, const char *executor, const char *model, const char *dir, const char *const extra[],
                         const char *prompt);
char *tf_worker_settled(tf_world *w, const char *executor, const char *model, const char *dir, const char *const extra[],
                        const char *prompt, json_object **ret_status);

/* ---- shell tasks ----
 * `taskferry dispatch --executor shell --directory dir [extra...] --prompt
 * script` (extra NULL-terminated, may be NULL; at most 16 entries):
 * tf_dispatch_shell() returns the task's id; tf_shell_settled() waits
 * until it settled too and gives its settled status in *ret_status (the
 * caller puts it) when ret_status is non-NULL; tf_shell_output() returns
 * the task's result message (its stdout) instead of the id;
 * tf_shell_done() asserts the task ended "done" (the failure message says
 * its whole status: failureReason, failureDetail, spawnError), and returns
 * its id; tf_shell_done_output() its message; tf_shell_pending() asserts
 * it left a pending changeset (changesetStatus "pending"), and returns its
 * id. All malloc'd. */
char *tf_dispatch_shell(tf_world *w, const char *dir, const char *const extra[], const char *script);
char *tf_shell_settled(tf_world *w, const char *dir, const char *const extra[], const char *script,
                       json_object **ret_status);
char *tf_shell_output(tf_world *w, const char *dir, const char *const extra[], const char *script,
                      json_object **ret_status);
char *tf_shell_done(tf_world *w, const char *dir, const char *const extra[], const char *script, json_object **ret_status);
char *tf_shell_done_output(tf_world *w, const char *dir, const char *const extra[], const char *script,
                           json_object **ret_status);
char *tf_shell_pending(tf_world *w, const char *dir, const char *const extra[], const char *script,
                       json_object **ret_status);

/* ---- reading a task ----
 * tf_cli_json(): the CLI with argv (cwd R) must exit want_exit; its stdout
 * parsed as JSON (new reference). tf_status_full(): `status <id> --full
 * --json` (exit 0). tf_task_diff(): the "diff" of `result <id> --diff
 * --json` ("" when there is none; malloc'd). tf_changeset_status(): the
 * changesetStatus of `status <id> --json` ("" when absent; malloc'd).
 * tf_durable_tasks(): the durable task state on disk now, tasks.json with
 * tasks.journal replayed over it (state_journal_read_json: what the next
 * daemon loads), as one array (new reference; NULL without a state dir).
 * tf_task_record(): the record of id in it (new reference; NULL when
 * missing).
 * tf_status_rpc(): the result of task.status over the socket (new
 * reference; asserts ok). tf_status_is(): whether that result's status is
 * want; tf_wait_status(): polls it until it is, at most timeout_ms, and
 * says whether it became so. */
json_object *tf_cli_json(tf_world *w, const char *const argv[], int want_exit);
json_object *tf_status_full(tf_world *w, const char *id);
char *tf_task_diff(tf_world *w, const char *id);
char *tf_changeset_status(tf_world *w, const char *id);
json_object *tf_durable_tasks(tf_world *w);
json_object *tf_task_record(tf_world *w, const char *id);
json_object *tf_status_rpc(tf_world *w, const char *id);
bool tf_status_is(tf_world *w, const char *id, const char *want);
bool tf_wait_status(tf_world *w, const char *id, const char *want, int timeout_ms);
/* Poll the task's checkStatus (the check gate) until it is one of any[]
 * (NULL-terminated), at most timeout_ms; its status --full (new reference).
 * The case fails when it never is, showing the status and the gate's
 * checkOutputTail (no status field). */
json_object *tf_wait_check(tf_world *w, const char *id, const char *const *any, int timeout_ms);
/* `accept <id> --json`: the run (the caller checks and frees it);
 * tf_accept_ok() asserts it exits 0. */
tf_run tf_accept(tf_world *w, const char *id);
void tf_accept_ok(tf_world *w, const char *id);
/* A changeset with files that can run code on the host later
 * (changeset-risk.h): a plain accept is refused (exit 1, naming
 * --allow-config) with the tree at dir untouched, then `accept
 * --allow-config` lands it. */
void tf_accept_reviewed_ok(tf_world *w, const char *id, const char *dir);

/* ---- text ----
 * tf_diff_files(): the paths of a git diff's "diff --git" headers, each
 * followed by '|' ("a.txt|dir/b|"; a path git quotes stays quoted,
 * without its "a/": "\"q\\tx\"|"); malloc'd. tf_value_after(): the rest of the line
 * after the first `key` in text (malloc'd), NULL if key is absent: the id
 * a worker printed as "child=<id>". tf_count(): occurrences of needle in
 * s (NULL s: 0). tf_unescape(): the CLI's output with \" \\ and \n undone,
 * for plain matching (malloc'd). */
char *tf_diff_files(const char *diff);
char *tf_value_after(const char *text, const char *key);
size_t tf_count(const char *s, const char *needle);
char *tf_unescape(const char *out);
/* Each line of text (up to its last newline or its end) parsed as JSON,
 * in order: a JSON array (new reference). Asserts every line is JSON. */
json_object *tf_json_lines(const char *text);

/* ---- the task's output dir ----
 * tf_output_path(): <state>/outputs/<id>/<name> in a rotating static
 * buffer (as tf_path). tf_output_read(): that file's content, at most
 * 1 GiB (asserts it exists; malloc'd); tf_output_try_read(): NULL when it
 * does not.
 * tf_output_touch(): an empty file there (what a waiting worker polls
 * for). tf_output_line(): polls until that file holds a whole first line
 * (at most timeout_ms; asserts), which it returns without its newline: the
 * id of a nested task a worker wrote there (malloc'd). tf_wait_output():
 * polls until the file exists, at most timeout_ms; whether it does.
 * TF_WAIT_GO is a worker's shell loop that waits for
 * "go" there (tf_go() writes it); TF_PAUSE prints "worker-finished" first,
 * which tf_wait_log() waits for in the task's log (at most 30 s; asserts). */
const char *tf_output_path(tf_world *w, const char *id, const char *name);
char *tf_output_read(tf_world *w, const char *id, const char *name);
char *tf_output_try_read(tf_world *w, const char *id, const char *name);
void tf_output_touch(tf_world *w, const char *id, const char *name);
char *tf_output_line(tf_world *w, const char *id, const char *name, int timeout_ms);
bool tf_wait_output(tf_world *w, const char *id, const char *name, int timeout_ms);
#define TF_WAIT_GO "while [ ! -e \"$TASKFERRY_OUTPUT_DIR/go\" ]; do sleep 0.05; done"
#define TF_PAUSE "echo worker-finished; " TF_WAIT_GO
void tf_go(tf_world *w, const char *id);
void tf_wait_log(tf_world *w, const char *id, const char *marker);

/* ---- the daemon and processes ----
 * tf_daemon_stop(): sends sig to the daemon that answers (asserts one
 * does) and waits until it is gone (at most 10 s; asserts). tf_daemon_log():
 * R/daemon.log ("" when missing; malloc'd). tf_pid_running(): whether pid
 * runs (a zombie counts as gone). tf_rpcf(): tf_rpc() with printf-style
 * params. */
void tf_daemon_stop(tf_world *w, int sig);
char *tf_daemon_log(tf_world *w);
bool tf_pid_running(pid_t pid);
json_object *tf_rpcf(tf_world *w, const char *method, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- fake workers and their helpers ----
 * tf_fake_fixture(): <fixtures>/<name>.stdout.ndjson holding stdout_text
 * (and <name>.exit holding exit_code when it is >= 0), what the fake pi
 * and opencode replay with FAKE_FIXTURE=<prefix>; returns that prefix
 * (malloc'd). tf_write_peer(): tf_peer_py as <fixtures>/peer.py; its path
 * (malloc'd). tf_put(): a 0600 file at path, its missing parents made
 * (0700). tf_count_entries(): the entries of dir but . and .. (0 when dir
 * is missing). tf_shared_dir(): R/<name>, mode 0777, a dir a worker bound in
 * writes as whoever it runs as; malloc'd. tf_record_dir(): such a dir
 * R/rec every worker may write (the daemon's TASKFERRY_RW_BIND), for fake
 * workers to record what they saw; with ret_argv_file, also the empty
 * <rec>/argv.txt the fake workers write their argv into (FAKE_ARGV_FILE).
 * Set before the daemon starts. Both malloc'd. */
char *tf_fake_fixture(tf_world *w, const char *name, const char *stdout_text, int exit_code);
char *tf_write_peer(tf_world *w);
void tf_put(const char *path, const char *content);
size_t tf_count_entries(const char *dir);
char *tf_shared_dir(tf_world *w, const char *name);
char *tf_record_dir(tf_world *w, char **ret_argv_file);

/* ---- the CLI as systemd runs it ----
 * `taskferry <args>` (a shell word list) as the user manager runs a job's
 * unit: `env -i` with HOME, PATH and the world's runtime dir, no
 * auto-start, extra_env ("NAME=value ...", may be "") added, ASAN_OPTIONS
 * passed on; killed after timeout_s. Never asserts. */
tf_run tf_cli_minimal(tf_world *w, int timeout_s, const char *extra_env, const char *args);

/* ---- the daemon's D-Bus API (with tf_bus_start) ----
 * Its bus name, manager object and interfaces; tf_bus_name_up(): a
 * tf_wait_until() predicate, whether the manager answers on the world's
 * bus (busctl --user); tf_bus_task_path(): a task's object path, the id
 * encoded as sd_bus_path_encode(3) does ([A-Za-z0-9] kept, every other
 * byte _xx), written out here independently of the daemon; malloc'd. */
#define TF_BUS_NAME "org.taskferry.Taskferry1"
#define TF_BUS_MPATH "/org/taskferry/Taskferry1"
#define TF_BUS_MIFACE "org.taskferry.Taskferry1.Manager"
#define TF_BUS_TIFACE "org.taskferry.Taskferry1.Task"
bool tf_bus_name_up(tf_world *w, void *unused);
char *tf_bus_task_path(const char *id);

/* ---- a worker paused while the user works ----
 * tf_shell_paused(): dispatches the shell script in dir (it prints
 * "worker-finished" and waits for "go": TF_PAUSE), waits for that line in
 * its log, runs `meanwhile` (sh -c in dir, must succeed) — what the user
 * does while the worker is done but its sandbox still up — then lets it go
 * and waits until it settled; the id (malloc'd), the settled status in
 * *ret_status (the caller puts it). */
char *tf_shell_paused(tf_world *w, const char *dir, const char *script, const char *meanwhile, json_object **ret_status);

/* ---- a test in a world of its own ----
 * TF_WORLD_TEST(name) { body } END_TEST is START_TEST(name) whose body runs
 * with w, a world made for it by tf_world_new(NULL) and tf_world_free()d
 * when the body returns (early returns included; a failing assertion ends
 * the test there, as in any test). TF_WORLD_TEST_ENV(name, "NAME=value",
 * ...) makes the world with those variables (tf_world_new's extra_env).
 * The body must not free or replace w. */
#define TF_WORLD_TEST(name) TF_WORLD_TEST_(name, NULL)
#define TF_WORLD_TEST_ENV(name, ...) TF_WORLD_TEST_(name, ((char *const[]){__VA_ARGS__, NULL}))
#define TF_WORLD_TEST_(name, env)                             \
        static void name##_in_world(tf_world *w);             \
        START_TEST(name) {                                    \
                tf_world *world_ = tf_world_new(env);         \
                name##_in_world(world_);                      \
                tf_world_free(world_);                        \
        }                                                     \
        END_TEST                                              \
        static void name##_in_world(tf_world *w)

/* ---- processes, from /proc ----
 * tf_procs(): the processes but the caller for which match(pid, arg) is
 * true, in /proc's order: their count, the first max of them stored in
 * pids (NULL with max 0: only the count). tf_proc_read(): /proc/<pid>/<name>
 * ("environ", "cmdline", "stat", at most 4 MiB), each NUL byte in it made
 * sep unless sep is 0 (malloc'd, NUL-terminated; the length in *ret_len
 * when non-NULL); NULL when the process or the file is gone.
 * tf_proc_has_env(): whether pid's environment holds exactly the entry
 * "NAME=value". tf_proc_stat(): pid's parent, process group and session
 * from /proc/<pid>/stat (out pointers may be NULL; the comm field may hold
 * spaces and parentheses); false when pid is gone. */
size_t tf_procs(bool (*match)(pid_t pid, void *arg), void *arg, pid_t *pids, size_t max);
char *tf_proc_read(pid_t pid, const char *name, char sep, size_t *ret_len);
bool tf_proc_has_env(pid_t pid, const char *entry);
bool tf_proc_stat(pid_t pid, pid_t *ret_ppid, pid_t *ret_pgrp, pid_t *ret_sid);

/* ---- the daemon's env file ----
 * tf_env_file(): text as the env file at its documented place,
 * ~/.config/taskferry/env (mode 0600, the dir made 0700; text NULL: no
 * file there), and the world's TASKFERRY_ENV_FILE naming it (for a daemon
 * started after); the path (malloc'd). */
char *tf_env_file(tf_world *w, const char *text);

/* ---- C programs a test builds ----
 * tf_cc(): the C source code as R/<name>.c, compiled with cc to out (a
 * shared library, -shared -fPIC, when shared), mode 0755; asserts. */
void tf_cc(tf_world *w, const char *name, const char *code, const char *out, bool shared);

/* ---- a test with a world and its user bus ----
 * TF_BUS_TEST(name) { body } END_TEST: as TF_WORLD_TEST, with the world's
 * user bus (tf_bus_start) started before the body, given to it as b, and
 * stopped once the world is freed; TF_BUS_TEST_ENV(name, "NAME=value", ...)
 * makes the world with those variables. */
#define TF_BUS_TEST(name) TF_BUS_TEST_(name, NULL)
#define TF_BUS_TEST_ENV(name, ...) TF_BUS_TEST_(name, ((char *const[]){__VA_ARGS__, NULL}))
#define TF_BUS_TEST_(name, env)                                       \
        static void name##_on_bus(tf_world *w, const tf_bus *b);      \
        START_TEST(name) {                                            \
                tf_world *world_ = tf_world_new(env);                 \
                tf_bus bus_ = tf_bus_start(world_);                   \
                name##_on_bus(world_, &bus_);                         \
                tf_world_free(world_);                                \
                tf_bus_stop(&bus_);                                   \
        }                                                             \
        END_TEST                                                      \
        static void name##_on_bus(tf_world *w, const tf_bus *b)

/* ---- figures (the benchmarks) ----
 * tf_clock_ms(): CLOCK_MONOTONIC in milliseconds, with the fraction.
 * tf_sort_ms(): v[0..n) sorted ascending, in place. tf_median(): the
 * median of the sorted v[0..n) (n > 0; even n: the mean of the middle
 * two). */
double tf_clock_ms(void);
void tf_sort_ms(double *v, size_t n);
double tf_median(const double *sorted, size_t n);

/* ---- building strings ----
 * tf_appendf(): *s (malloc'd, or NULL: "") replaced by itself followed by
 * fmt and its arguments, formatted (asserts). */
void tf_appendf(char **s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- JSON objects ----
 * tf_assert_keys(): o's keys are keys (NULL-terminated), all of them and
 * in that order, or the test fails naming the first that differs and
 * printing o. */
void tf_assert_keys(json_object *o, const char *const keys[]);
