/* Report summaries (summary.h). */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/jobs.h"
#include "core/manager.h"
#include "protocol-keys.h"
#include "core/task-table.h"
#include "core/task.h"
#include "features/summary.h"
#include "run/launch.h"
#include "run/lifecycle.h"
#include "run/network.h"
#include "json-util.h"
#include "logparse.h"
#include "paths.h"
#include "process-util.h"
#include "id-util.h"
#include "log.h"
#include "macro.h"
#include "path-util.h"
#include "string-util.h"
#include "strv.h"
#include "time-util.h"
#include "utf8.h"

typedef struct SummarySource {
        char *source_id;
        char *session_id;
        uint64_t watermark;
} SummarySource;

typedef struct SummaryState {
        SummarySource *v;
        size_t n;
        char *models_fingerprint; /* of the cached listing (holds key values: memory only) */
        char *models_output;
        uint64_t models_expire_ms;
} SummaryState;

/* ---- pure pieces ---- */

/* Byte length of the first n code points of s. */
static size_t utf8_head_bytes(const char *s, size_t len, size_t n) {
        size_t total = utf8_codepoints(s, len);
        if (total <= n) return len;
        return utf8_tail_offset(s, len, total - n);
}

static int read_range(int fd, uint64_t off, size_t len, char **ret) {
        char *buf = malloc(len + 1);
        if (!buf) return -ENOMEM;
        size_t got = 0;
        while (got < len) {
                ssize_t k = pread(fd, buf + got, len - got, (off_t) (off + got));
                if (k < 0 && errno == EINTR) continue;
                if (k <= 0) break;
                got += (size_t) k;
        }
        buf[got] = 0;
        *ret = buf;
        return (int) got;
}

static int join2(char **acc, const char *part) {
        if (isempty(part)) return 0;
        char *n = isempty(*acc) ? strdup(part) : strdup_printf("%s\n\n%s", *acc, part);
        if (!n) return -ENOMEM;
        free(*acc);
        *acc = n;
        return 0;
}

int summary_excerpt(const char *log_path, char **ret_narration, uint64_t *ret_log_bytes, uint64_t *ret_input_bytes) {
        *ret_log_bytes = *ret_input_bytes = 0;
        _cleanup_close_ int fd = open(log_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                *ret_narration = strdup("");
                return *ret_narration ? 0 : -ENOMEM;
        }
        uint64_t size = (uint64_t) st.st_size;
        bool whole = size <= SUMMARY_INPUT_BYTES;
        size_t first = whole ? (size_t) size : SUMMARY_INPUT_BYTES / 2;
        size_t last = whole ? 0 : SUMMARY_INPUT_BYTES - SUMMARY_INPUT_BYTES / 2;
        _cleanup_free_ char *a = NULL, *b = NULL, *na = NULL, *nb = NULL;
        int ga = read_range(fd, 0, first, &a);
        if (ga < 0) return ga;
        int r = log_narration_parse(a, (size_t) ga, &na);
        if (r < 0) return r;
        _cleanup_free_ char *out = strdup(na);
        if (!out) return -ENOMEM;
        uint64_t input = (uint64_t) ga;
        if (last) {
                int gb = read_range(fd, size - last, last, &b);
                if (gb < 0) return gb;
                if ((r = log_narration_parse(b, (size_t) gb, &nb)) < 0) return r;
                _cleanup_free_ char *omit =
                        strdup_printf("[%llu bytes omitted from source log]", (unsigned long long) (size - first - last));
                if (!omit || join2(&out, omit) < 0 || join2(&out, nb) < 0) return -ENOMEM;
                input += (uint64_t) gb;
        }
        *ret_log_bytes = size;
        *ret_input_bytes = input;
        *ret_narration = TAKE_PTR(out);
        return 0;
}

int summary_delta(const char *log_path, uint64_t from, char **ret_narration, uint64_t *ret_log_bytes,
                  uint64_t *ret_input_bytes) {
        *ret_log_bytes = *ret_input_bytes = 0;
        _cleanup_close_ int fd = open(log_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                *ret_narration = strdup("");
                return *ret_narration ? 0 : -ENOMEM;
        }
        uint64_t size = (uint64_t) st.st_size;
        *ret_log_bytes = size;
        if (size <= from) {
                *ret_narration = strdup("");
                return *ret_narration ? 0 : -ENOMEM;
        }
        uint64_t want = size - from;
        if (want > SUMMARY_DELTA_READ_MAX) want = SUMMARY_DELTA_READ_MAX;
        _cleanup_free_ char *buf = NULL, *n = NULL;
        int got = read_range(fd, from, (size_t) want, &buf);
        if (got < 0) return got;
        int r = log_narration_parse(buf, (size_t) got, &n);
        if (r < 0) return r;
        size_t keep = utf8_head_bytes(n, strlen(n), SUMMARY_DELTA_MAX_CHARS);
        n[keep] = 0;
        *ret_input_bytes = (uint64_t) got;
        *ret_narration = TAKE_PTR(n);
        return 0;
}

char *summary_snapshot_json(const char *id, const char *status, const char *prompt_preview, const char *captured_at,
                            const char *narration, const char *previous_summary, bool is_delta) {
        _cleanup_json_ json_object *o = json_object_new_object(), *src = json_object_new_object();
        if (!o || !src) return NULL;
        json_add_string(src, PK_id, id);
        json_add_string(src, PK_status, status);
        json_add_string(src, PK_promptPreview, prompt_preview);
        json_add_string(src, PK_capturedAt, captured_at);
        json_add(o, "source", TAKE_PTR(src));
        json_add_string(o, PK_narration, narration);
        if (!isempty(previous_summary)) json_add_string(o, "previous_summary", previous_summary);
        if (is_delta) json_add_bool(o, "narration_is_delta", true);
        const char *s = json_object_to_json_string_ext(
                o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
        return s ? strdup(s) : NULL;
}

int summary_snapshot_write(const char *path, const char *data) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) return -errno;
        /* the umask could only narrow 0600; make sure nothing widened it */
        if (fchmod(fd, 0600) < 0) return -errno;
        size_t len = strlen(data), off = 0;
        while (off < len) {
                ssize_t k = write(fd, data + off, len - off);
                if (k < 0 && errno == EINTR) continue;
                if (k < 0) return -errno;
                off += (size_t) k;
        }
        return 0;
}

bool summary_models_list_has(const char *listing, const char *model) {
        if (!listing || !model) return false;
        for (const char *p = listing; *p;) {
                size_t n = strcspn(p, "\n");
                const char *a = p, *b = p + n;
                while (a < b && strchr(" \t\r\v\f", *a)) a++;
                while (b > a && strchr(" \t\r\v\f", b[-1])) b--;
                if ((size_t) (b - a) == strlen(model) && strncmp(a, model, (size_t) (b - a)) == 0) return true;
                p += n;
                if (*p) p++;
        }
        return false;
}

static bool fingerprint_name(const char *e, size_t n) {
        static const char *const exact[] = {"OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "OPENCODE_CONFIG_CONTENT",
                                            "OPENCODE_AUTH_CONTENT", "OPENCODE_MODELS_PATH", "OPENCODE_MODELS_URL",
                                            "PI_CODING_AGENT_DIR"};
        for (size_t i = 0; i < ELEMENTSOF(exact); i++)
                if (strlen(exact[i]) == n && strncmp(e, exact[i], n) == 0) return true;
        return (n >= 8 && strncmp(e + n - 8, "_API_KEY", 8) == 0) || (n >= 9 && strncmp(e + n - 9, "_BASE_URL", 9) == 0);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *) a, *(char *const *) b); }

char *summary_env_fingerprint(char *const *env) {
        _cleanup_strv_free_ char **sel = NULL;
        for (char *const *e = env; e && *e; e++) {
                const char *eq = strchr(*e, '=');
                if (eq && fingerprint_name(*e, (size_t) (eq - *e)) && strv_push(&sel, *e) < 0) return NULL;
        }
        size_t n = strv_length(sel);
        if (n) qsort(sel, n, sizeof(char *), cmp_str);
        char *out = strdup("");
        for (size_t i = 0; out && i < n; i++) {
                char *x = strdup_printf("%s%s%s", out, i ? "\n" : "", sel[i]);
                free(out);
                out = x;
        }
        return out;
}

/* ---- state ---- */

static SummaryState *state(Manager *m) { return m->summary; }

static SummarySource *source_find(Manager *m, const char *id) {
        SummaryState *st = state(m);
        for (size_t i = 0; st && i < st->n; i++)
                if (streq(st->v[i].source_id, id)) return &st->v[i];
        return NULL;
}

static void source_clear(Manager *m, const char *id) {
        SummarySource *s = source_find(m, id);
        if (!s) return;
        SummaryState *st = state(m);
        free(s->source_id);
        free(s->session_id);
        *s = st->v[--st->n];
}

static int source_set(Manager *m, const char *id, const char *session, uint64_t watermark) {
        SummaryState *st = state(m);
        SummarySource *s = source_find(m, id);
        if (!s) {
                if (st->n >= SUMMARY_STATE_MAX) source_clear(m, st->v[0].source_id);
                SummarySource *v = realloc(st->v, (st->n + 1) * sizeof *v);
                if (!v) return -ENOMEM;
                st->v = v;
                s = &st->v[st->n];
                *s = (SummarySource) {.source_id = strdup(id)};
                if (!s->source_id) return -ENOMEM;
                st->n++;
        }
        char *c = strdup(session);
        if (!c) return -ENOMEM;
        free(s->session_id);
        s->session_id = c;
        s->watermark = watermark;
        return 0;
}


/* A summary task's end: a done summary with a session id becomes its
 * source's session, watermark = the source log's size now (the next summary
 * continues that session with only what was written since); the snapshot
 * goes. */
static void on_task(Task *t, TaskStatus old_status, ChangesetStatus old_cs, void *userdata) {
        Manager *m = userdata;
        json_object *of = t->rec.summary_of;
        if (t->kind != TASK_KIND_SUMMARY || !of || task_is_active(t) || !state(m)) return;
        _cleanup_free_ char *snap = tf_path_summary_snapshot(&m->paths, t->id);
        if (snap) (void) unlink(snap);
        const char *src = json_get_string(of, PK_sourceTaskId);
        Task *s = src ? manager_find_task(m, src) : NULL;
        if (t->rec.status != TASK_DONE || !t->rec.session_id || !s) return;
        struct stat st;
        uint64_t size = s->rec.log_path && stat(s->rec.log_path, &st) == 0 ? (uint64_t) st.st_size : 0;
        if (source_set(m, src, t->rec.session_id, size) < 0) log_warning("out of memory recording a summary session");
}

int summary_init(Manager *m) {
        m->summary = calloc(1, sizeof(SummaryState));
        if (!m->summary) return -ENOMEM;
        return manager_add_task_observer(m, on_task, m);
}

void summary_free(Manager *m) {
        SummaryState *st = state(m);
        if (!st) return;
        for (size_t i = 0; i < st->n; i++) {
                free(st->v[i].source_id);
                free(st->v[i].session_id);
        }
        free(st->v);
        free(st->models_fingerprint);
        free(st->models_output);
        free(st);
        m->summary = NULL;
}

/* ---- `opencode models`, in the job ---- */

/* The listing `opencode models` prints, into *ret: 0, or -errno with
 * *reason (the modelsError the answer reports; the caller frees it) set but
 * for -ENOMEM. */
static int list_models(char *const *env, char **ret, char **reason) {
        _cleanup_free_ char *exe = NULL;
        int r = find_executable("opencode", strv_env_get(env, "PATH"), &exe);
        if (r < 0) {
                *reason = strdup("spawn opencode ENOENT");
                return r;
        }
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) {
                r = -errno;
                *reason = strdup(strerror(-r));
                return r;
        }
        pid_t pid;
        /* stdin and stderr /dev/null, stdout the pipe */
        const int stdio[3] = {-1, p[1], -1};
        r = safe_fork_full("opencode-models", stdio, NULL, 0,
                           FORK_RESET_SIGNALS | FORK_REARRANGE_STDIO | FORK_CLOSE_ALL_FDS | FORK_DEATHSIG_SIGKILL |
                                   FORK_NEW_PROCESS_GROUP | FORK_RLIMIT_NOFILE_SAFE,
                           &pid);
        if (r < 0) {
                close(p[0]), close(p[1]);
                *reason = strdup(strerror(-r));
                return r;
        }
        if (r == 0) {
                char *argv[] = {(char *) "opencode", (char *) "models", NULL};
                execve(exe, argv, (char **) env);
                _exit(127);
        }
        close(p[1]);
        size_t cap = 4096, len = 0;
        char *buf = malloc(cap);
        uint64_t deadline = now_ms() + SUMMARY_MODELS_TIMEOUT_MS;
        bool timed_out = false;
        while (buf) {
                uint64_t now = now_ms();
                if (now >= deadline) {
                        timed_out = true;
                        break;
                }
                struct pollfd pfd = {.fd = p[0], .events = POLLIN};
                int k = poll(&pfd, 1, (int) (deadline - now));
                if (k < 0 && errno == EINTR) continue;
                if (k <= 0) continue;
                if (len + 4096 > cap) {
                        if (cap >= SUMMARY_MODELS_OUTPUT_MAX) break;
                        char *nb = realloc(buf, cap * 2);
                        if (!nb) {
                                free(buf);
                                buf = NULL;
                                break;
                        }
                        buf = nb;
                        cap *= 2;
                }
                ssize_t n = read(p[0], buf + len, cap - len - 1);
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) break;
                len += (size_t) n;
        }
        close(p[0]);
        (void) kill(-pid, SIGKILL);
        siginfo_t si = {.si_code = CLD_KILLED, .si_status = SIGKILL};
        (void) wait_for_terminate(pid, &si);
        if (!buf) return -ENOMEM;
        buf[len] = 0;
        int code = wait_status_to_exit_code(&si);
        if (timed_out || code != 0) {
                *reason = timed_out ? strdup("opencode models timed out after 10000ms")
                                       : strdup_printf("opencode models exited with status %d", code);
                free(buf);
                return -EIO;
        }
        *ret = buf;
        return 0;
}

/* ---- a report summary ---- */

typedef struct SummaryJob {
        Manager *m;
        Task *source;
        char *id, *snapshot, *captured_at, *status, *session_id, *preview, *log_path;
        char *dispatched_by;    /* the sandboxed caller's task: it may see (wait for, read) its summary */
        uint64_t watermark;
        char **env;             /* the summary child's env (models listing) */
        char *fingerprint;
        bool list_models;       /* the cached listing does not serve this env */
        int64_t max_words;
        json_object *caller_env; /* the env param (the summary child's caller env), or NULL */
        bool prompt_fallback;   /* empty narration → "Task prompt: ..." (else: no summary task) */
        summary_done_fn done;
        void *userdata;
} SummaryJob;

static void summary_job_free(SummaryJob *j) {
        if (!j) return;
        free(j->id);
        free(j->snapshot);
        free(j->captured_at);
        free(j->status);
        free(j->session_id);
        free(j->preview);
        free(j->log_path);
        free(j->dispatched_by);
        strv_free(j->env);
        free(j->fingerprint);
        json_object_put(j->caller_env);
        free(j);
}

static json_object *summary_job_run(void *userdata, int *error) {
        SummaryJob *j = userdata;
        json_object *o = json_object_new_object();
        if (!o) return NULL;
        _cleanup_free_ char *narration = NULL;
        uint64_t log_bytes = 0, input = 0;
        bool delta = j->session_id && j->watermark > 0;
        struct stat st;
        uint64_t size = j->log_path && stat(j->log_path, &st) == 0 ? (uint64_t) st.st_size : 0;
        delta = delta && size > j->watermark;
        int r = delta ? summary_delta(j->log_path, j->watermark, &narration, &log_bytes, &input)
                      : summary_excerpt(strempty(j->log_path), &narration, &log_bytes, &input);
        if (r < 0) {
                *error = r;
                json_object_put(o);
                return NULL;
        }
        json_add_int(o, PK_sourceLogBytes, (int64_t) log_bytes);
        json_add_int(o, PK_summaryInputBytes, (int64_t) input);
        if (isempty(narration) && j->prompt_fallback) {
                free(narration);
                narration = strdup_printf("Task prompt: %s", j->preview ? j->preview : "No model output observed yet.");
                if (!narration) {
                        *error = -ENOMEM;
                        json_object_put(o);
                        return NULL;
                }
        }
        if (isempty(narration)) {
                json_add_bool(o, "empty", true);
                return o;
        }
        if (j->list_models) {
                _cleanup_free_ char *out = NULL, *why = NULL;
                r = list_models(j->env, &out, &why);
                if (r < 0) json_add_string(o, "modelsError", why ? why : strerror(-r));
                else json_add_string(o, "models", out);
        }
        _cleanup_free_ char *doc = summary_snapshot_json(j->source->id, j->status, j->preview, j->captured_at, narration,
                                                         NULL, delta);
        if (!doc) {
                *error = -ENOMEM;
                json_object_put(o);
                return NULL;
        }
        r = summary_snapshot_write(j->snapshot, doc);
        if (r < 0) json_add_string(o, "writeError", strerror(-r));
        return o;
}

/* Tell whoever asked, then free the job. */
static void job_finish(SummaryJob *j, SummaryOutcome *o) {
        o->source = j->source;
        o->source_status = j->status;
        o->captured_at = j->captured_at;
        j->done(j->m, o, j->userdata);
        summary_job_free(j);
}

static void job_fail(SummaryJob *j, const char *text) {
        SummaryOutcome o = {.error = text ? text : "error: out of memory"};
        job_finish(j, &o);
}

/* The internal task that writes the summary: its record and launch options. */
static int summary_task_new(SummaryJob *j, json_object *res, Task **ret, char **reason) {
        Manager *m = j->m;
        _cleanup_free_ char *dir_path = strdup_printf("%s/summaries", m->paths.state_dir);
        _cleanup_free_ char *dir = dir_path ? realpath(dir_path, NULL) : NULL;
        _cleanup_json_ json_object *of = json_object_new_object();
        if (!dir || !of) return set_error(reason, -ENOMEM, "error: out of memory");
        json_add_string(of, PK_sourceStatus, j->status);
        json_add_string(of, PK_capturedAt, j->captured_at);
        json_add_int(of, PK_maxWords, j->max_words);
        json_add_string(of, PK_sourceTaskId, j->source->id);
        json_add(of, PK_sourceLogBytes, json_object_get(json_get(res, PK_sourceLogBytes)));
        json_add(of, PK_summaryInputBytes, json_object_get(json_get(res, PK_summaryInputBytes)));
        LaunchOptions lo = {.summary_session_id = j->session_id};
        /* a summary a worker asked for reads text that worker controls (its
         * log): it gets no more network than that worker (run/network.h) */
        Task *req = j->dispatched_by ? manager_find_task(m, j->dispatched_by) : NULL;
        _cleanup_json_ json_object *network = NULL;
        _cleanup_free_ char *network_warning = NULL, *nreason = NULL;
        if (req) {
                NetworkRequest nrq = {.executor_id = "opencode", .model = m->settings.summary_model};
                int k = network_decide(m, &nrq, req, &network, &network_warning, &nreason);
                if (k < 0) return set_error(reason, k, "%s", nreason ? nreason : "error: out of memory");
        }
        TaskSpec spec = {
                .kind = TASK_KIND_SUMMARY,
                .id = j->id,
                .directory = dir,
                .prompt = SUMMARY_TASK_PROMPT,
                .model = m->settings.summary_model,
                .executor_id = "opencode",
                .started_at = j->captured_at,
                .summary_of = of,
                .dispatched_by = j->dispatched_by,
                .launch = &lo,
                .caller_env = j->caller_env,
                .network = network,
                .network_warning = network_warning,
        };
        return task_new(m, &spec, ret, reason);
}

static void summary_job_done(Manager *m, void *userdata, json_object *res, int error) {
        SummaryJob *j = userdata;
        SummaryState *st = state(m);
        if (!res) {
                _cleanup_free_ char *text = strdup_printf("error: could not read the task log: %s",
                                                          strerror(error < 0 ? -error : EIO));
                return job_fail(j, text);
        }
        if (json_get_bool(res, "empty", false)) {
                SummaryOutcome o = {.empty = true};
                return job_finish(j, &o);
        }
        const char *models = json_get_string(res, "models");
        if (models) {
                free(st->models_fingerprint);
                free(st->models_output);
                st->models_fingerprint = strdup(j->fingerprint);
                st->models_output = strdup(models);
                st->models_expire_ms = now_ms() + SUMMARY_MODELS_TTL_MS;
        }
        const char *why = json_get_string(res, "modelsError");
        const char *listing = models ? models : st->models_output;
        _cleanup_free_ char *text = NULL;
        if (why)
                text = strdup_printf("error: could not list available OpenCode models: %s\nhelp: verify that opencode is "
                                     "installed and authenticated, then retry taskferry summary",
                                     why);
        else if (!summary_models_list_has(listing, m->settings.summary_model))
                text = strdup_printf("error: summary model is unavailable: %s\nhelp: set TASKFERRY_SUMMARY_MODEL to an "
                                     "installed model, then retry taskferry summary",
                                     m->settings.summary_model);
        else if (json_get_string(res, "writeError"))
                text = strdup_printf("error: cannot write the summary snapshot %s: %s", j->snapshot,
                                     json_get_string(res, "writeError"));
        if (text) {
                if (!json_get_string(res, "writeError")) (void) unlink(j->snapshot);
                return job_fail(j, text);
        }
        Task *t = NULL;
        _cleanup_free_ char *reason = NULL;
        if (summary_task_new(j, res, &t, &reason) < 0) {
                (void) unlink(j->snapshot);
                return job_fail(j, reason);
        }
        SummaryOutcome o = {
                .task = t,
                .source_log_bytes = json_get(res, PK_sourceLogBytes),
                .summary_input_bytes = json_get(res, PK_summaryInputBytes),
        };
        job_finish(j, &o);
}

/* The summary child's env as the models listing sees it: the layers of
 * every worker's (launch.h launch_env_layers: the env file, the daemon's,
 * the caller's), then what a summary child drops (OpenCode's config
 * variables, TASKFERRY_OUTPUT_DIR) and TASKFERRY_CHILD=1. */
static int summary_env(Manager *m, json_object *caller, char ***ret) {
        _cleanup_strv_free_ char **env = NULL;
        if (launch_env_layers(m, caller, &env) < 0) return -ENOMEM;
        static const char *const drop[] = {"OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "OPENCODE_CONFIG_CONTENT",
                                           "TASKFERRY_OUTPUT_DIR"};
        for (size_t i = 0; i < ELEMENTSOF(drop); i++) (void) strv_env_unset(&env, drop[i]);
        if (strv_env_set(&env, "TASKFERRY_CHILD", "1") < 0) return -ENOMEM;
        *ret = TAKE_PTR(env);
        return 0;
}

/* A summary job for source: its id, snapshot path, the cached session and
 * watermark, the child's env (env_param: the caller's env, may be NULL).
 * -ENOMEM. */
static int summary_job_new(Manager *m, Task *source, json_object *env_param, const char *dispatched_by, SummaryJob **ret) {
        SummaryJob *j = calloc(1, sizeof *j);
        if (!j) return -ENOMEM;
        if (dispatched_by && !(j->dispatched_by = strdup(dispatched_by))) {
                free(j);
                return -ENOMEM;
        }
        j->m = m;
        j->source = source;
        j->max_words = 200;
        j->caller_env = env_param ? json_object_get(env_param) : NULL;
        char iso[32];
        j->id = task_id_new();
        j->snapshot = j->id ? tf_path_summary_snapshot(&m->paths, j->id) : NULL;
        j->captured_at = strdup(format_iso(now_ms(), iso));
        j->status = strdup(strempty(task_status_to_string(source->rec.status)));
        j->preview = source->rec.prompt_preview ? strdup(source->rec.prompt_preview) : NULL;
        j->log_path = source->rec.log_path ? strdup(source->rec.log_path) : NULL;
        SummarySource *ss = source_find(m, source->id);
        /* the cached session and watermark; a watermark past the log's end (a
         * truncated log) clears both */
        struct stat st;
        uint64_t size = source->rec.log_path && stat(source->rec.log_path, &st) == 0 ? (uint64_t) st.st_size : 0;
        if (ss && ss->watermark > size) {
                source_clear(m, source->id);
                ss = NULL;
        }
        if (ss) {
                j->session_id = strdup(ss->session_id);
                j->watermark = ss->watermark;
        }
        int k = summary_env(m, env_param, &j->env);
        j->fingerprint = k >= 0 ? summary_env_fingerprint(j->env) : NULL;
        if (!j->id || !j->snapshot || !j->captured_at || !j->status || !j->fingerprint || (ss && !j->session_id)) {
                summary_job_free(j);
                return -ENOMEM;
        }
        SummaryState *sst = state(m);
        j->list_models = !sst->models_output || !streq_ptr(sst->models_fingerprint, j->fingerprint) ||
                         now_ms() >= sst->models_expire_ms;
        *ret = j;
        return 0;
}

int summary_request(Manager *m, const SummaryRequest *req, summary_done_fn done, void *userdata) {
        SummaryJob *j = NULL;
        int r = summary_job_new(m, req->source, req->env, req->dispatched_by, &j);
        if (r < 0) return r;
        j->max_words = (int64_t) req->max_words;
        j->prompt_fallback = req->prompt_fallback;
        j->done = done;
        j->userdata = userdata;
        r = job_start_retrying(m, summary_job_run, summary_job_done, j);
        if (r < 0) summary_job_free(j);
        return r;
}

unsigned summary_live_for(Manager *m, const char *dispatched_by) {
        unsigned live = 0;
        for (size_t i = 0; i < m->n_tasks; i++) {
                Task *o = m->tasks[i];
                if (o->kind == TASK_KIND_SUMMARY && task_is_active(o) && streq_ptr(o->rec.dispatched_by, dispatched_by))
                        live++;
        }
        return live;
}
