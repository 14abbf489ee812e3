#include "agents-rig.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json-util.h"
#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

#define MOCK_SERVER TASKFERRY_FIXTURES_DIR "/model-server/model-server.js"

static const char *agents_dir(void) {
        const char *d = getenv("TASKFERRY_TEST_AGENTS_DIR");
        return d && *d ? d : "/opt/taskferry-test/agents";
}

/* version field of <agents dir>/node_modules/<pkg>/package.json, malloc'd or NULL */
static char *installed_version(const char *pkg) {
        _cleanup_free_ char *p = strdup_printf("%s/node_modules/%s/package.json", agents_dir(), pkg);
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        if (!p || read_file(p, 1 << 20, &data, &len) < 0) return NULL;
        _cleanup_json_ json_object *o = NULL;
        if (json_parse_strict(data, len, &o) < 0) return NULL;
        const char *v = json_get_string(o, "version");
        return v ? strdup(v) : NULL;
}

char *rig_agents_missing(void) {
        static const struct {
                const char *bin, *pkg, *version;
        } want[] = {
                {"pi", "@mariozechner/pi-coding-agent", RIG_PI_VERSION},
                {"opencode", "opencode-ai", RIG_OPENCODE_VERSION},
        };
        for (size_t i = 0; i < 2; i++) {
                _cleanup_free_ char *bin = strdup_printf("%s/bin/%s", agents_dir(), want[i].bin);
                _cleanup_free_ char *v = installed_version(want[i].pkg);
                if (access(bin, X_OK) < 0 || !v || !streq(v, want[i].version))
                        return strdup_printf(
                                "the real %s %s is not installed in %s (%s: %s; %s version %s): run tools/test "
                                "(as root) to install the pinned pi and OpenCode, or set TASKFERRY_TEST_AGENTS_DIR "
                                "to an npm prefix holding them",
                                want[i].bin, want[i].version, agents_dir(), bin,
                                access(bin, X_OK) < 0 ? strerror(errno) : "ok", want[i].pkg, v ? v : "none");
        }
        return NULL;
}

static int write_proc(const char *path, const char *text) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0) return -errno;
        size_t len = strlen(text);
        if (write(fd, text, len) != (ssize_t) len) return -errno;
        return 0;
}

static int loopback_up(void) {
        _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0) return -errno;
        struct ifreq ifr = {};
        snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
        if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) return -errno;
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) return -errno;
        return 0;
}

int rig_private_network(void) {
        if (geteuid() == 0) {
                if (unshare(CLONE_NEWNET) < 0) return -errno;
                return loopback_up();
        }
        uid_t uid = geteuid();
        gid_t gid = getegid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0) return -errno;
        char map[64];
        int r = write_proc("/proc/self/setgroups", "deny");
        if (r < 0 && r != -ENOENT) return r;
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned) uid, (unsigned) uid);
        if ((r = write_proc("/proc/self/uid_map", map)) < 0) return r;
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned) gid, (unsigned) gid);
        if ((r = write_proc("/proc/self/gid_map", map)) < 0) return r;
        return loopback_up();
}

const char *rig_model(bool anthropic) { return anthropic ? "mockant/mock-model" : "mockllm/mock-model"; }

static void start_mock(rig *r) {
        tf_world *w = r->w;
        _cleanup_free_ char *port_file = strdup_printf("%s/model-server.port", w->root);
        r->mock_log = strdup_printf("%s/model-requests.ndjson", w->root);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                /* a test killed by its timeout takes the server with it */
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                int devnull = open("/dev/null", O_RDWR);
                _cleanup_free_ char *logp = strdup_printf("%s/model-server.log", w->root);
                int logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
                dup2(devnull, 0);
                dup2(logfd >= 0 ? logfd : devnull, 1);
                dup2(logfd >= 0 ? logfd : devnull, 2);
                /* Retry-After: 0 keeps the CLIs' rate-limit retries short */
                char *argv[] = {(char *) "node",      (char *) MOCK_SERVER, (char *) "--port-file", port_file,
                                (char *) "--log",     r->mock_log,          (char *) "--retry-after", (char *) "0",
                                NULL};
                execvp("node", argv);
                _exit(127);
        }
        r->mock_pid = pid;
        for (int i = 0; i < 1000; i++) {
                _cleanup_free_ char *data = NULL;
                if (read_file(port_file, 64, &data, NULL) == 0 && (r->port = atoi(data)) > 0) {
                        printf("real-agents: model server on 127.0.0.1:%d (log %s)\n", r->port, r->mock_log);
                        fflush(stdout);
                        return;
                }
                int st;
                if (waitpid(pid, &st, WNOHANG) == pid) ck_abort_msg("the model server exited (status %d)", st);
                usleep(10000);
        }
        ck_abort_msg("the model server did not start");
}

static void write_text(const char *path, const char *text) { tf_write(path, text, strlen(text), 0600); }

static void mkdirs(const char *path) { ck_assert_msg(mkdir_p(path, 0700) >= 0, "mkdir %s", path); }

/* The one model of each mock provider, as pi's models.json and OpenCode's
 * opencode.json list it: $1/M input, $2/M output tokens. */
#define PI_MOCK_MODEL(name)                                                                                  \
        "\"models\":[{\"id\":\"mock-model\",\"name\":\"" name "\",\"reasoning\":false,\"input\":[\"text\"]," \
        "\"contextWindow\":128000,\"maxTokens\":4096,"                                                         \
        "\"cost\":{\"input\":1,\"output\":2,\"cacheRead\":0,\"cacheWrite\":0}}]"
#define OC_MOCK_MODEL(name)                                                                                  \
        "\"models\":{\"mock-model\":{\"name\":\"" name "\",\"tool_call\":true,\"cost\":{\"input\":1,\"output\":2}," \
        "\"limit\":{\"context\":128000,\"output\":4096}}}"

/* The user's ordinary config, as a user of pi and OpenCode would have it. */
static void write_user_config(rig *r) {
        tf_world *w = r->w;
        const char *h = w->home;
        _cleanup_free_ char *agent = strdup_printf("%s/.pi/agent", h);
        mkdirs(agent);
        _cleanup_free_ char *models = strdup_printf(
                "{\"providers\":{"
                "\"mockllm\":{\"baseUrl\":\"http://127.0.0.1:%d/v1\",\"api\":\"openai-completions\",\"apiKey\":\"k\","
                "\"compat\":{\"supportsDeveloperRole\":false,\"supportsReasoningEffort\":false,\"supportsStore\":false},"
                PI_MOCK_MODEL("Mock") "},"
                "\"mockant\":{\"baseUrl\":\"http://127.0.0.1:%d\",\"api\":\"anthropic-messages\",\"apiKey\":\"k\","
                PI_MOCK_MODEL("MockA") "}}}\n",
                r->port, r->port);
        write_text(tf_path(agent, "models.json"), models);
        /* short agent-level retry delays (default 2 s·2ⁿ) keep the rate-limit
         * case quick; retries stay on */
        write_text(tf_path(agent, "settings.json"),
                   "{\"enableInstallTelemetry\":false,\"quietStartup\":true,\"retry\":{\"baseDelayMs\":50}}\n");

        _cleanup_free_ char *oc = strdup_printf("%s/.config/opencode", h);
        _cleanup_free_ char *nm = strdup_printf("%s/node_modules", oc);
        mkdirs(nm);
        _cleanup_free_ char *ocjson = strdup_printf(
                "{\"$schema\":\"https://opencode.ai/config.json\",\"provider\":{"
                "\"mockllm\":{\"npm\":\"@ai-sdk/openai-compatible\",\"name\":\"Mock\","
                "\"options\":{\"baseURL\":\"http://127.0.0.1:%d/v1\",\"apiKey\":\"k\"},"
                OC_MOCK_MODEL("Mock") "},"
                "\"mockant\":{\"npm\":\"@ai-sdk/anthropic\",\"name\":\"MockA\","
                "\"options\":{\"baseURL\":\"http://127.0.0.1:%d/v1\",\"apiKey\":\"k\"},"
                OC_MOCK_MODEL("MockA") "}},"
                "\"enabled_providers\":[\"mockllm\",\"mockant\"],\"model\":\"mockllm/mock-model\","
                "\"small_model\":\"mockllm/mock-model\",\"autoupdate\":false,\"share\":\"disabled\"}\n",
                r->port, r->port);
        write_text(tf_path(oc, "opencode.json"), ocjson);
        /* what stops OpenCode's `npm install @opencode-ai/plugin` at start
         * (../shared/notes/real-agent-clis.md) */
        write_text(tf_path(oc, "package.json"),
                   "{\"name\":\"cfg\",\"private\":true,\"dependencies\":{\"@opencode-ai/plugin\":\"" RIG_OPENCODE_VERSION
                   "\"}}\n");
        write_text(tf_path(oc, "package-lock.json"),
                   "{\"name\":\"cfg\",\"lockfileVersion\":3,\"requires\":true,\"packages\":{\"\":{\"name\":\"cfg\","
                   "\"dependencies\":{\"@opencode-ai/plugin\":\"" RIG_OPENCODE_VERSION "\"}}}}\n");
        /* the rest of an ordinary home: OpenCode's data dir with a login, a cache
         * and a state dir */
        const char *dirs[] = {".local/share/opencode", ".cache", ".local/state"};
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *d = strdup_printf("%s/%s", h, dirs[i]);
                mkdirs(d);
        }
        _cleanup_free_ char *auth = strdup_printf("%s/.local/share/opencode/auth.json", h);
        write_text(auth, "{}\n");
}

static void make_repo(rig *r) {
        r->repo = strdup(tf_path(r->w->repo_parent, "repo"));
        _cleanup_free_ char *out = tf_shf(r->w, NULL,
                                          "set -e; mkdir -p %s && cd %s && git init -q && printf 'readme\\n' > README && "
                                          "git add -A && git commit -qm initial",
                                          r->repo, r->repo);
}

char *rig_user_dirs_snapshot(rig *r) {
        const char *dirs[] = {".pi/agent", ".config/opencode", ".local/share/opencode", ".cache", ".local/state"};
        char *all = strdup("");
        for (size_t i = 0; i < 5; i++) {
                _cleanup_free_ char *d = strdup_printf("%s/%s", r->w->home, dirs[i]);
                _cleanup_free_ char *snap = tf_tree_snapshot(d, false);
                /* every line names its tree: "~/.pi/agent: ./sessions d 755 …" */
                char *save = NULL;
                for (char *line = strtok_r(snap, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                        tf_appendf(&all, "~/%s: %s\n", dirs[i], line);
                }
        }
        return all;
}

/* A failed assertion ends a forked Check test at once: no rig_free, no
 * atexit handlers (see harness.c history). A reaper process, started once
 * the daemon runs, waits on a pipe only the test process holds; EOF without
 * rig_free's "done" byte means the test died, and the reaper stops the
 * world's daemon (its workers go with it) so a failed test leaves nothing
 * running. */
static void start_reaper(rig *r) {
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid_t daemon = r->w->daemon_pid;
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(p[1]);
                int devnull = open("/dev/null", O_RDWR);
                dup2(devnull, 0), dup2(devnull, 1), dup2(devnull, 2);
                setsid();
                char c = 0;
                ssize_t n;
                while ((n = read(p[0], &c, 1)) < 0 && errno == EINTR) {}
                if (n == 1 && c == 'd') _exit(0);
                if (daemon > 0 && kill(daemon, SIGTERM) == 0) {
                        for (int i = 0; i < 100 && kill(daemon, 0) == 0; i++) usleep(50000);
                        kill(daemon, SIGKILL);
                }
                _exit(0);
        }
        close(p[0]);
        r->reaper_fd = p[1];
        r->reaper_pid = pid;
}

rig *rig_new(void) { return rig_new_with(NULL); }

rig *rig_new_with(char *const extra_env[]) {
        _cleanup_free_ char *missing = rig_agents_missing();
        ck_assert_msg(!missing, "%s", missing);
        rig *r = calloc(1, sizeof *r);
        ck_assert_ptr_nonnull(r);
        r->reaper_fd = -1;
        r->w = tf_world_new(extra_env);
        r->agents_bin = strdup_printf("%s/bin", agents_dir());
        tf_world *w = r->w;
        /* the user's ordinary environment: the agents on PATH (not the fake
         * workers of tests/fixtures/bin), config under ~/.config, the CLIs'
         * own offline switches */
        _cleanup_free_ char *path = strdup_printf("%s:/usr/local/bin:/usr/bin:/bin", r->agents_bin);
        tf_world_setenv(w, "PATH", path);
        _cleanup_free_ char *cfg = strdup_printf("%s/.config", w->home);
        tf_world_setenv(w, "XDG_CONFIG_HOME", cfg);
        tf_world_setenv(w, "PI_OFFLINE", "1");
        tf_world_setenv(w, "OPENCODE_DISABLE_MODELS_FETCH", "1");
        tf_world_setenv(w, "OPENCODE_DISABLE_AUTOUPDATE", "1");
        tf_world_setenv(w, "OPENCODE_DISABLE_DEFAULT_PLUGINS", "1");
        tf_world_setenv(w, "OPENCODE_DISABLE_LSP_DOWNLOAD", "1");
        tf_world_setenv(w, "OPENCODE_DISABLE_SHARE", "1");
        start_mock(r);
        write_user_config(r);
        make_repo(r);
        r->user_dirs_before = rig_user_dirs_snapshot(r);
        tf_daemon_start(w);
        start_reaper(r);
        return r;
}

void rig_free(rig *r) {
        if (!r) return;
        if (r->reaper_fd >= 0) {
                /* a clean end: the reaper leaves everything to us */
                ssize_t n = write(r->reaper_fd, "d", 1);
                (void) n;
                close(r->reaper_fd);
                waitpid(r->reaper_pid, NULL, 0);
        }
        /* keep the daemon's and the server's logs of a failed test */
        if (getenv("TASKFERRY_TEST_KEEP")) {
                printf("real-agents: keeping %s\n", r->w->root);
                fflush(stdout);
        }
        if (r->mock_pid > 0) {
                kill(r->mock_pid, SIGTERM);
                waitpid(r->mock_pid, NULL, 0);
        }
        if (getenv("TASKFERRY_TEST_KEEP")) {
                pid_t pid = tf_daemon_pid(r->w);
                if (pid > 0) kill(pid, SIGTERM);
        } else
                tf_world_free(r->w);
        free(r->agents_bin), free(r->repo), free(r->mock_log), free(r->user_dirs_before);
        free(r);
}

char *rig_dispatch(rig *r, const char *executor, const char *model, const char *prompt, const char *const extra[]) {
        const char *argv[48] = {"--executor", executor, "--directory", r->repo, "--prompt", prompt};
        size_t n = 6;
        if (model) {
                argv[n++] = "--model";
                argv[n++] = model;
        }
        /* checks of the rig itself, never what the suite asserts: no sandbox,
         * or the sandbox with the user's executor dirs rw-bound (the manual
         * workaround of sharing the executor homes writable with the sandbox) */
        _cleanup_free_ char *binds = NULL;
        if (getenv("TASKFERRY_TEST_REAL_AGENTS_NO_SANDBOX")) argv[n++] = "--no-sandbox";
        else if (getenv("TASKFERRY_TEST_REAL_AGENTS_RW_BIND_HOMES")) {
                const char *h = r->w->home;
                binds = strdup_printf("%s/.pi/agent,%s/.config/opencode,%s/.local/share/opencode,%s/.cache,%s/.local/state",
                                      h, h, h, h, h);
                argv[n++] = "--rw-bind";
                argv[n++] = binds;
        }
        for (size_t i = 0; extra && extra[i] && n < 46; i++) argv[n++] = extra[i];
        argv[n] = NULL;
        return tf_dispatch(r->w, argv);
}

json_object *rig_result(rig *r, const char *id, bool diff) {
        const char *argv[] = {"result", id, "--json", diff ? "--diff" : NULL, NULL};
        tf_run run = tf_cli(r->w, NULL, NULL, argv);
        ck_assert_msg(run.exit_code == 0, "result %s: %s %s", id, run.out, run.err);
        json_object *o = tf_json(run.out);
        tf_run_done(&run);
        return o;
}

json_object *rig_requests(rig *r) {
        json_object *arr = json_object_new_array();
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        if (read_file(r->mock_log, (size_t) 1 << 28, &data, &len) < 0) return arr;
        char *save = NULL;
        for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                json_object *o = NULL;
                if (json_parse_strict(line, strlen(line), &o) == 0) json_object_array_add(arr, o);
        }
        return arr;
}

static bool request_matches(json_object *req, const char *kind, const char *needle) {
        if (kind && !streq_ptr(json_get_string(req, "kind"), kind)) return false;
        if (!needle) return true;
        json_object *body = NULL;
        json_object_object_get_ex(req, "body", &body);
        const char *text = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        return text && strstr(text, needle);
}

size_t rig_count_requests(rig *r, const char *kind, const char *needle) {
        _cleanup_json_ json_object *all = rig_requests(r);
        size_t n = 0;
        for (size_t i = 0; i < json_object_array_length(all); i++)
                if (request_matches(json_object_array_get_idx(all, i), kind, needle)) n++;
        return n;
}

json_object *rig_last_request(rig *r, const char *needle) {
        _cleanup_json_ json_object *all = rig_requests(r);
        for (size_t i = json_object_array_length(all); i > 0; i--) {
                json_object *req = json_object_array_get_idx(all, i - 1);
                if (request_matches(req, "main", needle)) return json_object_get(req);
        }
        return NULL;
}

static bool has_env_entry(pid_t pid, void *entry) { return tf_proc_has_env(pid, entry); }

size_t rig_task_processes(const char *task_id, pid_t *pids, size_t max) {
        _cleanup_free_ char *entry = strdup_printf("TASKFERRY_TASK_ID=%s", task_id);
        return tf_procs(has_env_entry, entry, pids, max);
}

static char *base64(const char *s) {
        static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t len = strlen(s);
        char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
        ck_assert_ptr_nonnull(out);
        for (size_t i = 0; i < len; i += 3) {
                unsigned v = (unsigned char) s[i] << 16;
                if (i + 1 < len) v |= (unsigned char) s[i + 1] << 8;
                if (i + 2 < len) v |= (unsigned char) s[i + 2];
                *o++ = tbl[(v >> 18) & 63];
                *o++ = tbl[(v >> 12) & 63];
                *o++ = i + 1 < len ? tbl[(v >> 6) & 63] : '=';
                *o++ = i + 2 < len ? tbl[v & 63] : '=';
        }
        *o = 0;
        return out;
}

char *rig_bash_prompt(const char *script) {
        _cleanup_free_ char *b = base64(script);
        return strdup_printf("scenario:bash script:%s Run the script with your bash tool and report its output.", b);
}
