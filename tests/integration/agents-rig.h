#pragma once
/* The rig of the real-agents suite and benchmark: an isolated taskferry world
 * (harness.h) whose HOME holds the user's ordinary pi and OpenCode config
 * pointing at a scripted model server on 127.0.0.1
 * (tests/fixtures/model-server/model-server.js), the real pi 0.73.1 and
 * OpenCode 1.18.33 from $TASKFERRY_TEST_AGENTS_DIR (default
 * /opt/taskferry-test/agents, installed by tools/test) on the daemon's PATH,
 * and a git repository to work in. Default taskferry settings: sandboxed,
 * overlay on, no binds. */

#include <stdbool.h>
#include <sys/types.h>
#include <json-c/json.h>

#include "harness.h"

#define RIG_PI_VERSION "0.73.1"
#define RIG_OPENCODE_VERSION "1.18.33"

typedef struct rig {
        tf_world *w;
        char *agents_bin;  /* <agents dir>/bin */
        char *repo;        /* R/work/repo, a git repository with one commit */
        char *mock_log;    /* R/model-requests.ndjson */
        pid_t mock_pid;
        int port;
        char *user_dirs_before; /* snapshot of the user's real executor dirs */
        int reaper_fd;     /* write end of the reaper's pipe (start_reaper) */
        pid_t reaper_pid;
} rig;

/* NULL if pi and opencode of the pinned versions are installed, else a
 * malloc'd message saying what is missing and to run tools/test. */
char *rig_agents_missing(void);

/* Run the calling process (before any test forks) in a private network
 * namespace with only `lo` up: as root unshare(CLONE_NEWNET); otherwise a new
 * user namespace mapping the caller's uid/gid to themselves plus a network
 * namespace. Returns 0, or -errno when the machine does not allow it (the
 * caller records that and goes on). */
int rig_private_network(void);

/* A world with the model server running, the user's config written and the
 * daemon started. Aborts the test on failure. */
rig *rig_new(void);
/* The same with extra "NAME=value" settings (NULL-terminated, may be NULL)
 * in the daemon's environment, e.g. the watchdog's timeouts. */
rig *rig_new_with(char *const extra_env[]);
/* Stop the daemon and the model server, remove the world. */
void rig_free(rig *r);

/* The user's real executor dirs (~/.pi/agent, ~/.config/opencode,
 * ~/.local/share/opencode, ~/.cache, ~/.local/state) as a snapshot string:
 * equal strings ⇔ byte-identical trees. */
char *rig_user_dirs_snapshot(rig *r);

/* "mockllm/mock-model" (OpenAI chat completions) or, anthropic,
 * "mockant/mock-model" (Anthropic messages). */
const char *rig_model(bool anthropic);

/* Dispatch executor ("pi"/"opencode") with model and prompt on the rig's
 * repo, default settings, plus extra argv (NULL-terminated, may be NULL).
 * Returns the task id (malloc'd). */
char *rig_dispatch(rig *r, const char *executor, const char *model, const char *prompt, const char *const extra[]);

/* `taskferry result <id> --json [--diff]`, parsed. */
json_object *rig_result(rig *r, const char *id, bool diff);

/* The model server's request log: an array of request objects
 * {seq,t,method,path,kind,scenario,body}. Never NULL. */
json_object *rig_requests(rig *r);
/* Number of requests of that kind ("main", "title") whose JSON body contains
 * needle (NULL: any). */
size_t rig_count_requests(rig *r, const char *kind, const char *needle);
/* The last "main" request whose body contains needle; a new reference or NULL. */
json_object *rig_last_request(rig *r, const char *needle);

/* PIDs of live processes whose environment holds TASKFERRY_TASK_ID=<id>
 * (the sandbox, the CLI and everything it started); count returned, up to
 * max pids stored. */
size_t rig_task_processes(const char *task_id, pid_t *pids, size_t max);

/* A prompt that makes the model run script with the CLI's own bash tool and
 * answer with its output (scenario "bash"); malloc'd. */
char *rig_bash_prompt(const char *script);

/* ---- a test on a rig of its own ----
 * RIG_TEST(name) { body } END_TEST: a loop test (tcase_add_loop_test) whose
 * body runs with _i, the loop index; ex, the executor rig_executor() names
 * for it; and r, a rig_new() made for it and rig_free()d when the body
 * returns. The body must not free r. */
static inline const char *rig_executor(int loop_index) { return loop_index % 2 ? "opencode" : "pi"; }
#define RIG_TEST(name)                                                 \
        static void name##_on_rig(rig *r, const char *ex, int _i);     \
        START_TEST(name) {                                             \
                rig *rig_ = rig_new();                                 \
                name##_on_rig(rig_, rig_executor(_i), _i);             \
                rig_free(rig_);                                        \
        }                                                              \
        END_TEST                                                       \
        static void name##_on_rig(rig *r, const char *ex, int _i)
