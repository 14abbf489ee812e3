/* taskferry-shim: the per-task monitor (the role conmon plays for podman).
 * It, not the daemon, owns the worker's log and exit status, so a worker
 * survives a daemon restart and the restarted daemon re-adopts it.
 *
 *   taskferry-shim --spec-fd 3 --status-fd 4
 *
 * Reads the launch spec (launch-spec.h) from the spec fd, starts the worker
 * (through bwrap when sandboxed, after mounting the overlay itself when bwrap
 * cannot), writes <taskDir>/launch.json and the same object as one line on the
 * status fd, forwards SIGTERM/SIGINT/SIGHUP to the worker's process group,
 * normalizes the worker's stdout into the log (log-pipe.h) while its stderr
 * goes to the log raw, and finally writes <taskDir>/exit.json.
 *
 * Exit status: 0 once exit.json is written (also for a worker that could not
 * be started: exit.json then holds a spawnError); 1 if exit.json could not be
 * written; 2 for a usage error. On a spawn error no launch.json is written and
 * the status fd is closed without a line, after exit.json exists. */

#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>

#include "cgroup-util.h"
#include "changeset.h"
#include "disk-watch.h"
#include "executor.h"
#include "fileio.h"
#include "fs-util.h"
#include "json-util.h"
#include "landlock.h"
#include "limit-watch.h"
#include "launch-spec.h"
#include "log-pipe.h"
#include "log.h"
#include "mask-mount.h"
#include "macro.h"
#include "egress-proxy.h"
#include "netns.h"
#include "overlay.h"
#include "path-util.h"
#include "process-util.h"
#include "sandbox-plan.h"
#include "sandbox.h"
#include "target-access.h"
#include "upper-seed.h"
#include "signal-util.h"
#include "string-util.h"
#include "strv.h"
#include "time-util.h"

#define EMPTY_TREE_SHA "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
#define DRAIN_AFTER_EXIT_MS 2000
/* how long the sandbox's tmpfs mounts are looked for after the worker's start */
#define TMPFS_LOOK_MS 10000
/* ... every 5 ms at first, then on the disk watch's clock */
#define TMPFS_EAGER_MS 1000

/* Write end of the self-pipe the signal handler reports into. The only
 * global: a signal handler cannot be handed a context. */
static int signal_pipe_w = -1;

static void on_signal(int sig) {
        int saved = errno;
        unsigned char b = (unsigned char) sig;
        (void) !write(signal_pipe_w, &b, 1);
        errno = saved;
}

typedef struct shim {
        launch_spec *spec;
        const executor *exec;
        int status_fd;
        int log_fd;
        int signal_fd; /* read end of the self-pipe */

        bool have_overlay_method;
        overlay_method method;
        char *pre_dispatch_head;

        int prompt_fd;           /* sandboxed: memfd holding the prompt */
        int args_fd;             /* sandboxed: memfd holding bwrap's options (--args) */
        const char *prompt_path; /* path the worker reads the prompt from */

        char **argv;             /* what we execve (bwrap ... -- worker, or the worker) */
        char *exe;               /* resolved argv[0] */

        pid_t worker;
        bool reaped;
        siginfo_t wait_info;     /* the reaped worker's (wait_for_terminate) */
        uint64_t ended_at;

        disk_watch disk;         /* armed when the spec has a disk budget */
        limit_watch limits;      /* the task's memory and tasks limits where no scope holds them */
        bool tmpfs_watched;      /* the sandbox's tmpfs mounts joined the disk watch (or were given up on) */
        uint64_t tmpfs_deadline; /* mono_ms() until which they are looked for */
        const char *stop_reason; /* set once the disk or limit watch stopped the worker */
        char *stop_detail;       /* with stop_reason: why */
        uint64_t kill_at;        /* mono_ms() of the SIGKILL after the stop's SIGTERM */
        uint64_t oom_base;       /* the cgroup's oom_kill count before the worker started */
        bool oom_base_known;

        int net_sock[2];         /* network mode proxy: the worker child sends the proxy's listener over [1] */
        pid_t proxy;             /* the egress proxy (egress-proxy.h), 0: none */
        MaskSet masks;           /* the host masks the worker child mounts (mask-mount.h) */

        int times_fd;            /* SHIM_TIMES_ENV set: <taskDir>/SHIM_TIMES_NAME, else -1 */
        uint64_t started_us;     /* CLOCK_MONOTONIC at main(), microseconds */
} shim;

/* Timing points of a launch, for tests/bench/bench-launch: with
 * TASKFERRY_SHIM_TIMES=1 in the shim's environment (the daemon's), the shim
 * writes one line "<step> <CLOCK_MONOTONIC in microseconds>" per step into
 * <taskDir>/launch-times, the worker child too (before it execs bwrap).
 * Unset, the only cost is one getenv. */
#define SHIM_TIMES_ENV "TASKFERRY_SHIM_TIMES"
#define SHIM_TIMES_NAME "launch-times"

static uint64_t mono_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static void shim_mark(shim *s, const char *step) {
        if (s->times_fd >= 0) dprintf(s->times_fd, "%s %" PRIu64 "\n", step, mono_us());
}

static void shim_times_open(shim *s) {
        if (!getenv(SHIM_TIMES_ENV)) return;
        _cleanup_free_ char *path = strdup_printf("%s/%s", s->spec->task_dir, SHIM_TIMES_NAME);
        if (!path) return;
        s->times_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (s->times_fd >= 0) dprintf(s->times_fd, "shim-start %" PRIu64 "\n", s->started_us);
}

static void shim_done(shim *s) {
        launch_spec_free(s->spec);
        safe_close(s->status_fd);
        safe_close(s->log_fd);
        safe_close(s->signal_fd);
        safe_close(s->prompt_fd);
        safe_close(s->args_fd);
        free(s->pre_dispatch_head);
        strv_free(s->argv);
        free(s->exe);
        free(s->stop_detail);
        limit_watch_done(&s->limits);
        disk_watch_done(&s->disk);
        safe_close(s->net_sock[0]);
        safe_close(s->net_sock[1]);
        if (s->proxy > 0) egress_proxy_stop(s->proxy);
        safe_close(s->times_fd);
        mask_set_done(&s->masks);
}

/* The proxy settings a worker sees: in mode proxy the task's proxy (and
 * only the sandbox's own loopback goes direct), in mode none none at all
 * (the daemon's own proxy variables would only fail slowly); mode host
 * keeps the environment as it is. -ENOMEM. */
static int net_env_apply(char ***env, NetMode mode) {
        static const char *const vars[] = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"};
        static const char *const no[] = {"NO_PROXY", "no_proxy"};
        if (mode == NET_MODE_HOST) return 0;
        char url[64];
        snprintf(url, sizeof url, "http://%s:%d", NET_PROXY_ADDRESS, NET_PROXY_PORT);
        int r;
        for (size_t i = 0; i < ELEMENTSOF(vars); i++)
                if ((r = mode == NET_MODE_PROXY ? strv_env_set(env, vars[i], url) : strv_env_unset(env, vars[i])) < 0)
                        return r;
        for (size_t i = 0; i < ELEMENTSOF(no); i++)
                if ((r = mode == NET_MODE_PROXY ? strv_env_set(env, no[i], "localhost,127.0.0.1,::1")
                                                : strv_env_unset(env, no[i])) < 0)
                        return r;
        return 0;
}

/* ---- exit.json / launch.json ---- */

static int write_json_file(const char *dir, const char *name, json_object *j) {
        _cleanup_free_ char *path = strdup_printf("%s/%s", dir, name);
        if (!path) return -ENOMEM;
        size_t len;
        const char *text = json_to_line(j, &len);
        if (!text) return -ENOMEM;
        _cleanup_free_ char *data = malloc(len + 1);
        if (!data) return -ENOMEM;
        memcpy(data, text, len);
        data[len] = '\n';
        return write_file_atomic(path, data, len + 1, 0600);
}

static int write_exit_json(shim *s, const char *spawn_error) {
        exit_info ei = {.ended_at_ms = s->ended_at ? s->ended_at : now_ms()};
        char sigbuf[16];
        if (!spawn_error && s->reaped) {
                if (s->wait_info.si_code == CLD_EXITED) {
                        ei.has_exit_code = true;
                        ei.exit_code = s->wait_info.si_status;
                } else if (s->wait_info.si_code == CLD_KILLED || s->wait_info.si_code == CLD_DUMPED) {
                        int sig = s->wait_info.si_status;
                        const char *name = signal_to_name(sig);
                        if (!name) {
                                snprintf(sigbuf, sizeof sigbuf, "SIG%d", sig);
                                name = sigbuf;
                        }
                        ei.signal = (char *) name;
                }
        }
        ei.spawn_error = (char *) spawn_error;
        if (s->stop_reason) {
                ei.stop_reason = (char *) s->stop_reason;
                ei.stop_detail = s->stop_detail;
        }
        /* the kernel's OOM kills in our cgroup (the task's scope unit) while
         * the worker ran: read here, while the cgroup still exists */
        uint64_t ooms = 0;
        if (s->oom_base_known && cgroup_self_oom_kills(&ooms) >= 0 && ooms > s->oom_base)
                ei.oom_kills = (int64_t) (ooms - s->oom_base);
        /* the space set aside at start is what exit.json is written into when a
         * worker filled the disk */
        disk_reserve_release(s->spec->task_dir);
        _cleanup_json_ json_object *j = NULL;
        int r = exit_info_to_json(&ei, &j);
        if (r < 0) return r;
        return write_json_file(s->spec->task_dir, EXIT_JSON_NAME, j);
}

/* The worker could not be started: record why and finish. */
static int fail_spawn(shim *s, const char *fmt, ...) _printf_(2, 3);
static int fail_spawn(shim *s, const char *fmt, ...) {
        va_list ap;
        _cleanup_free_ char *msg = NULL;
        va_start(ap, fmt);
        int k = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (k < 0) msg = NULL;
        const char *text = msg ? msg : "taskferry-shim: out of memory";
        log_error("task %s: %s", s->spec->task_id, text);
        int r = write_exit_json(s, text);
        if (r < 0) {
                log_error_errno(r, "cannot write %s/%s", s->spec->task_dir, EXIT_JSON_NAME);
                return EXIT_FAILURE;
        }
        return EXIT_SUCCESS;
}

/* ---- preparation ---- */

/* The task's executor homes (executor-home.h): create the dirs, copy the
 * seeds (a resumed session), on the host before bwrap runs. */
static int prepare_homes(const launch_sandbox *sb) {
        for (char **d = sb->dirs; d && *d; d++) {
                int r = mkdir_p(*d, 0700);
                if (r < 0) return r;
        }
        for (size_t i = 0; i < sb->n_seeds; i++) {
                _cleanup_free_ char *from = strdup_printf("%s/.", sb->seeds[i].src);
                if (!from) return -ENOMEM;
                int r = mkdir_p(sb->seeds[i].dest, 0700);
                if (r < 0) return r;
                /* -a keeps modes and times; --no-dereference: a symlink stays one */
                char *argv[] = {(char *) "cp", (char *) "-a", (char *) "--no-dereference", from,
                                (char *) sb->seeds[i].dest, NULL};
                run_result rr;
                r = run_command(argv, NULL, NULL, 0, -1, &rr);
                if (r < 0) return r;
                int code = rr.exit_code;
                if (code != 0) log_warning("copying the resumed session from %s failed: %s", sb->seeds[i].src,
                                           rr.err ? rr.err : "");
                run_result_done(&rr);
        }
        return 0;
}

static void strip_trailing_ws(char *s) {
        size_t n = strlen(s);
        while (n > 0 && strchr(" \t\r\n", s[n - 1])) s[--n] = 0;
}

/* The target's HEAD before the worker runs, read on the host: `git
 * rev-parse HEAD`; an unborn HEAD of a repository is the empty tree; NULL
 * when dir is in no repository (or git is missing). A subdirectory of a
 * repository is a git target. */
static int capture_head(const char *dir, char **ret) {
        char *head_argv[] = {(char *) "git", (char *) "-c", (char *) "core.fsmonitor=false", (char *) "-C",
                             (char *) dir, (char *) "rev-parse", (char *) "--verify", (char *) "-q",
                             (char *) "HEAD", NULL};
        run_result rr;
        *ret = NULL;
        int r = run_command(head_argv, NULL, NULL, 4096, -1, &rr);
        if (r < 0) return 0; /* git missing: not a git target */
        if (rr.exit_code == 0 && rr.out) {
                strip_trailing_ws(rr.out);
                if (*rr.out) {
                        *ret = strdup(rr.out);
                        run_result_done(&rr);
                        return *ret ? 0 : -ENOMEM;
                }
        }
        run_result_done(&rr);
        char *gitdir_argv[] = {(char *) "git", (char *) "-c", (char *) "core.fsmonitor=false", (char *) "-C",
                               (char *) dir, (char *) "rev-parse", (char *) "--git-dir", NULL};
        r = run_command(gitdir_argv, NULL, NULL, 65536, -1, &rr);
        if (r < 0) return 0;
        bool is_git = rr.exit_code == 0;
        run_result_done(&rr);
        if (is_git && !(*ret = strdup(EMPTY_TREE_SHA))) return -ENOMEM;
        return 0;
}

/* The changeset's base (changeset.h): D as the worker will first see it, at
 * <overlay root>/base (the root holds upper/main). Without one, extraction
 * compares whole trees as before, so a failure is only a warning. */
static void take_base_snapshot(shim *s, const launch_overlay *ov) {
        _cleanup_free_ char *root = strdup(ov->upper), *base = NULL, *err = NULL;
        char *sl = root ? strrchr(root, '/') : NULL;
        if (sl) *sl = 0, sl = strrchr(root, '/');
        if (!sl) return;
        *sl = 0;
        base = changeset_base_dir(root);
        if (base && changeset_snapshot(s->spec->directory, s->pre_dispatch_head, base, &err) < 0)
                dprintf(s->log_fd, "taskferry-shim: warning: %s\n", err ? err : "cannot take the base snapshot");
}

static int write_prompt_file(const char *path, const char *prompt) {
        _cleanup_free_ char *parent = strdup(path);
        if (!parent) return -ENOMEM;
        char *slash = strrchr(parent, '/');
        if (slash && slash != parent) {
                *slash = 0;
                int r = mkdir_p(parent, 0700);
                if (r < 0) return r;
        }
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) return -errno;
        if (fchmod(fd, 0600) < 0) return -errno;
        return loop_write(fd, prompt, strlen(prompt));
}

/* A sealed memfd holding len bytes of data, read from its start. */
static int sealed_memfd(const char *name, const void *data, size_t len) {
        _cleanup_close_ int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0) return -errno;
        int r = loop_write(fd, data, len);
        if (r < 0) return r;
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) return -errno;
        if (lseek(fd, 0, SEEK_SET) < 0) return -errno;
        return TAKE_FD(fd);
}

static int prompt_memfd(const char *prompt) { return sealed_memfd("taskferry-prompt", prompt, strlen(prompt)); }

/* bwrap runs on the host before any namespace exists, so nothing the caller
 * controls may reach its own environment: a caller-forwarded LD_PRELOAD,
 * LD_LIBRARY_PATH or GCONV_PATH would run code on the host. bwrap is therefore
 * exec'd with an empty environment, and the worker's environment travels as
 * `--clearenv --setenv NAME VALUE...` among its options, which bwrap reads
 * from a memfd (`--args FD`, bwrap(1)): values never appear on a command line
 * either. Rewrites s->argv to {bwrap, "--args", "<fd>", "--", worker argv...}:
 * bwrap takes the command itself only from its real argv, and the worker argv
 * holds no secret (the prompt is passed as a file). */
static int bwrap_args_through_memfd(shim *s) {
        size_t sep = 0;
        while (s->argv[sep] && !streq(s->argv[sep], "--")) sep++;
        if (!s->argv[sep]) return -EINVAL;
        size_t cap = 4096, len = 0;
        _cleanup_free_ char *buf = malloc(cap);
        if (!buf) return -ENOMEM;
#define APPEND(str)                                                                 \
        do {                                                                        \
                size_t _n_ = strlen(str) + 1;                                       \
                if (len + _n_ > cap) {                                              \
                        while (len + _n_ > cap) cap *= 2;                           \
                        char *_b_ = realloc(buf, cap);                              \
                        if (!_b_) return -ENOMEM;                                   \
                        buf = _b_;                                                  \
                }                                                                   \
                memcpy(buf + len, (str), _n_);                                      \
                len += _n_;                                                         \
        } while (0)
        for (size_t i = 1; i < sep; i++) APPEND(s->argv[i]);
        APPEND("--clearenv");
        for (char **e = s->spec->env; e && *e; e++) {
                const char *eq = strchr(*e, '=');
                if (!eq || eq == *e) continue;
                _cleanup_free_ char *name = strndup(*e, (size_t) (eq - *e));
                if (!name) return -ENOMEM;
                APPEND("--setenv");
                APPEND(name);
                APPEND(eq + 1);
        }
#undef APPEND
        int fd = sealed_memfd("taskferry-bwrap-args", buf, len);
        if (fd < 0) return fd;
        char **argv = NULL;
        int r = strv_push(&argv, s->argv[0]);
        if (r >= 0) r = strv_push(&argv, "--args");
        if (r >= 0) r = strv_pushf(&argv, "%d", fd);
        for (size_t i = sep; r >= 0 && s->argv[i]; i++) r = strv_push(&argv, s->argv[i]);
        if (r < 0) {
                strv_free(argv);
                close(fd);
                return -ENOMEM;
        }
        strv_free(s->argv);
        s->argv = argv;
        s->args_fd = fd;
        return 0;
}

/* ---- the worker child ---- */

static _Noreturn void child_fail(int err_fd, const char *fmt, ...) _printf_(2, 3);
static _Noreturn void child_fail(int err_fd, const char *fmt, ...) {
        va_list ap;
        char buf[4096];
        va_start(ap, fmt);
        int n = vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        if (n > 0) (void) loop_write(err_fd, buf, (size_t) n < sizeof buf ? (size_t) n : sizeof buf - 1);
        _exit(127);
}

static _Noreturn void run_worker(shim *s, pid_t shim_pid, int out_w, int err_w, int stderr_w) {
        /* safe_fork reset every signal's disposition and the mask (handlers
         * are reset by execve, but ignored signals and the mask would be
         * inherited) and made the worker a process group leader */
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull < 0) child_fail(err_w, "open /dev/null: %s", strerror(errno));
        if (dup2(devnull, STDIN_FILENO) < 0 || dup2(out_w, STDOUT_FILENO) < 0 ||
            dup2(stderr_w, STDERR_FILENO) < 0)
                child_fail(err_w, "dup2: %s", strerror(errno));

        launch_sandbox *sb = s->spec->sandbox;
        const char *dir = s->spec->directory;
        int lr = limit_watch_enter_cgroup(&s->limits);
        if (lr < 0) child_fail(err_w, "cannot enter the task's cgroup %s: %s", s->limits.cgroup, strerror(-lr));
        if (sb && sandbox_needs_userns(sb, s->method)) {
                int r = userns_enter_as_root(getuid(), getgid());
                if (r < 0)
                        child_fail(err_w, "cannot enter a user namespace to %s: %s",
                                   sb->own_userns ? "set up the sandbox's network and masks" : "mount the overlay",
                                   strerror(-r));
                shim_mark(s, "userns");
                char *err = NULL;
                if (sb->overlay && s->method == OVERLAY_METHOD_USERNS) {
                        r = overlay_mount_layers(sb->overlay->lower, sb->overlay->lower_top, sb->overlay->upper,
                                                 sb->overlay->work, dir, true, &err);
                        if (r < 0) {
                                if (err) child_fail(err_w, "%s", err);
                                child_fail(err_w, "overlay mount on %s failed: %s", dir, strerror(-r));
                        }
                        free(err);
                        err = NULL;
                        shim_mark(s, "overlay-mount");
                }
                /* the extra overlays (an executor's config dir) at their stage dirs,
                 * which bwrap then binds where they belong (sandbox.h) */
                for (size_t i = 0; i < sb->n_mounts && s->method == OVERLAY_METHOD_USERNS; i++) {
                        const sandbox_mount *m = &sb->mounts[i];
                        if (m->op != SANDBOX_MOUNT_OVERLAY) continue;
                        r = overlay_mount(m->src, m->upper, m->work, m->stage, true, &err);
                        if (r < 0) {
                                if (err) child_fail(err_w, "%s", err);
                                child_fail(err_w, "overlay mount on %s failed: %s", m->stage, strerror(-r));
                        }
                        free(err);
                        err = NULL;
                }
        }
        if (sb && s->masks.n > 0) {
                /* the host masks, where they are now (mask-mount.h); root
                 * without a user namespace makes a mount namespace of its own */
                if (!sandbox_needs_userns(sb, s->method) &&
                    (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0))
                        child_fail(err_w, "cannot make a mount namespace for the sandbox's masks: %s", strerror(errno));
                char *err = NULL;
                int r = mask_set_mount(&s->masks, &err);
                if (r < 0) child_fail(err_w, "%s", err ? err : strerror(-r));
                shim_mark(s, "masks-mount");
        }
        if (sb && sb->net.mode != NET_MODE_HOST) {
                /* a namespace with only lo (netns.h); in mode proxy the
                 * proxy's listener is made in it and handed to the shim */
                int r = netns_enter();
                if (r < 0) child_fail(err_w, "cannot make the sandbox's network namespace: %s", strerror(-r));
                if (sb->net.mode == NET_MODE_PROXY) {
                        int lfd = netns_proxy_listen();
                        if (lfd < 0)
                                child_fail(err_w, "cannot listen for the egress proxy at %s:%d: %s", NET_PROXY_ADDRESS,
                                           NET_PROXY_PORT, strerror(-lfd));
                        r = fd_send(s->net_sock[1], lfd);
                        if (r < 0) child_fail(err_w, "cannot hand the egress proxy its listener: %s", strerror(-r));
                        close(lfd);
                        /* the user's loopback services the policy names, in rule order */
                        for (size_t i = 0; i < sb->net.n_rules; i++) {
                                if (!netns_rule_is_forward(&sb->net.rules[i])) continue;
                                int ffd = netns_forward_listen(&sb->net.rules[i]);
                                if (ffd < 0)
                                        dprintf(STDERR_FILENO, "taskferry-shim: warning: cannot forward %s:%u into the "
                                                               "sandbox: %s\n",
                                                sb->net.rules[i].host, sb->net.rules[i].port, strerror(-ffd));
                                r = fd_send(s->net_sock[1], ffd);
                                if (r < 0) child_fail(err_w, "cannot hand the egress proxy a forward: %s", strerror(-r));
                                safe_close(ffd);
                        }
                }
                s->net_sock[1] = safe_close(s->net_sock[1]);
        }
        if (sb && sb->own_ipc) {
                int r = limit_watch_enter_ipc(&s->limits, STDERR_FILENO);
                if (r < 0) child_fail(err_w, "cannot make the sandbox's IPC namespace: %s", strerror(-r));
        }
        if (chdir(dir) < 0) child_fail(err_w, "cannot change to directory %s: %s", dir, strerror(errno));
        if (sb) {
                /* the host's abstract sockets and processes stay out of reach (landlock.h) */
                int r = landlock_scope_ipc();
                if (r == -EPERM)
                        /* a seccomp filter around us (a container) forbids Landlock: the
                         * mounts still confine the worker; say what is left open */
                        dprintf(STDERR_FILENO, "taskferry-shim: warning: Landlock is not permitted here; the host's "
                                               "abstract unix sockets stay reachable from this sandbox\n");
                else if (r < 0)
                        child_fail(err_w, "cannot scope the sandbox with Landlock: %s", strerror(-r));
        }

        if (s->prompt_fd >= 0 && fcntl(s->prompt_fd, F_SETFD, 0) < 0)
                child_fail(err_w, "cannot pass the prompt to bwrap: %s", strerror(errno));
        if (s->args_fd >= 0 && fcntl(s->args_fd, F_SETFD, 0) < 0)
                child_fail(err_w, "cannot pass the arguments to bwrap: %s", strerror(errno));

        /* last: in the worker's own user namespace, whose count of processes
         * holds only the sandbox's (task-limits.h) */
        lr = limit_watch_set_rlimits(&s->limits);
        if (lr < 0) child_fail(err_w, "cannot set the worker's resource limits: %s", strerror(-lr));

        /* a shim killed while this child set the sandbox up (a restarted
         * daemon stopping an old check gate) must not leave a sandbox
         * behind: bwrap's --die-with-parent only holds from its own start,
         * and entering a user namespace cleared any death signal set before.
         * So it is set here, after the last change of credentials, and the
         * shim checked to be still there. */
        if (sb) {
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                        child_fail(err_w, "cannot tie the sandbox to the shim: %s", strerror(errno));
                if (getppid() != shim_pid) _exit(127);
        }

        /* bwrap gets an empty environment: the worker's travels in its options */
        char *no_env[] = {NULL};
        shim_mark(s, "exec");
        execve(s->exe, s->argv, s->args_fd >= 0 ? no_env : s->spec->env);
        int e = errno;
        const char *name = strerrorname_np(e);
        child_fail(err_w, "spawn %s %s", s->argv[0], name ? name : strerror(e));
}

/* Read the error pipe to EOF: empty means execve succeeded. */
static int read_child_error(int fd, char **ret) {
        char buf[4096];
        size_t len = 0;
        for (;;) {
                ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
                if (n < 0) {
                        if (errno == EINTR) continue;
                        return -errno;
                }
                if (n == 0 || (len += (size_t) n) >= sizeof buf - 1) break;
        }
        buf[len] = 0;
        *ret = NULL;
        if (len > 0 && !(*ret = strdup(buf))) return -ENOMEM;
        return 0;
}

/* ---- the monitor loop ---- */

static void forward_signal(shim *s, int sig) {
        if (s->worker <= 0 || s->reaped) return;
        if (kill(-s->worker, sig) < 0 && errno == ESRCH) (void) kill(s->worker, sig);
}

static void try_reap(shim *s) {
        if (s->reaped || s->worker <= 0) return;
        if (s->spec->sandbox) {
                /* bwrap is gone, but not yet reaped, so its group's id is not
                 * free for reuse: what is left in that group is a sandbox init
                 * whose setup outlived bwrap (it sets its death signal only
                 * after that setup), and it goes now */
                siginfo_t si = {0};
                if (waitid(P_PID, (id_t) s->worker, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid != s->worker)
                        return;
                (void) kill(-s->worker, SIGKILL);
        }
        if (wait_for_terminate_nohang(s->worker, &s->wait_info) > 0) {
                s->reaped = true;
                s->ended_at = now_ms();
        }
}

/* Handle the bytes the signal handler wrote. */
static void drain_signals(shim *s) {
        unsigned char b[64];
        ssize_t n;
        while ((n = read(s->signal_fd, b, sizeof b)) > 0)
                for (ssize_t i = 0; i < n; i++)
                        if (b[i] == SIGTERM || b[i] == SIGINT || b[i] == SIGHUP) forward_signal(s, b[i]);
        try_reap(s);
}

/* The sandbox's tmpfs mounts join the disk watch once bwrap made them: the
 * sandbox's first process (proc_sandbox_pid) has the sandbox's root, which
 * shows them from here. */
static void tmpfs_watch(shim *s) {
        launch_sandbox *sb = s->spec->sandbox;
        if (s->tmpfs_watched || !sb || !s->spec->disk || s->reaped) return;
        pid_t inner = proc_sandbox_pid(s->worker);
        if (inner <= 0) {
                if (mono_ms() < s->tmpfs_deadline) return;
                /* never made (bwrap failed), or not ours to see: stop looking, and say so */
                dprintf(s->log_fd, "taskferry-shim: warning: cannot see the sandbox's tmpfs mounts; their use does "
                                   "not count in the disk budget (each holds at most %llu bytes)\n",
                        (unsigned long long) sb->tmp_size);
                s->tmpfs_watched = true;
                return;
        }
        char root[64];
        snprintf(root, sizeof root, "/proc/%d/root", (int) inner);
        _cleanup_strv_free_ char **dests = NULL;
        if (strv_push(&dests, "/tmp") < 0) return;
        for (size_t i = 0; i < sb->n_mounts; i++)
                if (sb->mounts[i].op == SANDBOX_MOUNT_TMPFS && strv_push(&dests, sb->mounts[i].dest) < 0) return;
        if (disk_watch_set_tmpfs(&s->disk, root, dests) >= 0) s->tmpfs_watched = true;
}

/* The disk watch (disk-watch.h): stop the worker like a cancel does, SIGTERM
 * to its process group now and SIGKILL after the grace. */
static void disk_check(shim *s) {
        uint64_t now = mono_ms();
        tmpfs_watch(s);
        if (s->kill_at && now >= s->kill_at) {
                s->kill_at = 0;
                forward_signal(s, SIGKILL);
        }
        if (s->stop_reason || s->reaped || !s->spec->disk) return;
        _cleanup_free_ char *detail = NULL;
        if (disk_watch_check(&s->disk, now, &detail) <= 0) return;
        log_warning("task %s: stopping the worker: %s", s->spec->task_id, detail);
        s->stop_reason = "disk_quota_exceeded";
        s->stop_detail = TAKE_PTR(detail);
        forward_signal(s, SIGTERM);
        s->kill_at = now + s->spec->disk->grace_ms;
        if (!s->kill_at) s->kill_at = 1;
}

/* The limit watch (limit-watch.h): a worker at a limit is killed at once,
 * no grace: a fork bomb or a runaway allocation uses it to grow. */
static void limits_check(shim *s) {
        if (s->stop_reason || s->reaped) return;
        const char *reason = NULL;
        _cleanup_free_ char *detail = NULL;
        if (limit_watch_check(&s->limits, mono_ms(), &reason, &detail) <= 0) return;
        log_warning("task %s: stopping the worker: %s", s->spec->task_id, detail);
        s->stop_reason = reason;
        s->stop_detail = TAKE_PTR(detail);
        forward_signal(s, SIGKILL);
}

static int disk_timeout(shim *s, int timeout) {
        uint64_t now = mono_ms();
        int t = s->spec->disk && !s->reaped ? disk_watch_timeout(&s->disk, now) : -1;
        if (s->kill_at && !s->reaped) {
                int k = s->kill_at > now ? (int) (s->kill_at - now) : 0;
                if (t < 0 || k < t) t = k;
        }
        if (t >= 0 && (timeout < 0 || t < timeout)) timeout = t;
        int l = s->reaped ? -1 : limit_watch_timeout(&s->limits, now);
        if (l >= 0 && (timeout < 0 || l < timeout)) timeout = l;
        /* the sandbox's tmpfs mounts are looked for at once: a worker fills
         * one in a fraction of the filesystem clock */
        if (s->spec->sandbox && s->spec->disk && !s->tmpfs_watched && !s->reaped &&
            now + TMPFS_LOOK_MS < s->tmpfs_deadline + TMPFS_EAGER_MS && (timeout < 0 || timeout > 5))
                timeout = 5;
        return timeout;
}

/* Takes out_r and err_r (the read ends of the worker's stdout and stderr)
 * and closes them. */
static void monitor(shim *s, int out_r, int err_r) {
        log_pipe lp;
        (void) log_pipe_init(&lp, s->exec, s->log_fd, s->spec->task_id);
        if (s->spec->check) lp.max_bytes = s->spec->log_max_bytes;
        else lp.budget = s->spec->log_budget;
        bool out_open = true, err_open = true;
        uint64_t deadline = 0;
        if (s->spec->disk) disk_watch_init(&s->disk, s->spec->disk->max_bytes, s->spec->disk->paths, mono_ms());

        for (;;) {
                if (s->reaped && !out_open && !err_open) break;
                if (s->reaped && !deadline) deadline = mono_ms() + DRAIN_AFTER_EXIT_MS;
                int timeout = -1;
                if (deadline) {
                        uint64_t now = mono_ms();
                        if (now >= deadline) break; /* a grandchild still holds stdout: stop waiting */
                        timeout = (int) (deadline - now);
                }
                timeout = disk_timeout(s, timeout);
                struct pollfd p[3] = {{.fd = s->signal_fd, .events = POLLIN},
                                      {.fd = out_open ? out_r : -1, .events = POLLIN},
                                      {.fd = err_open ? err_r : -1, .events = POLLIN}};
                if (poll(p, 3, timeout) < 0) {
                        if (errno == EINTR) continue;
                        log_error_errno(-errno, "poll");
                        break;
                }
                if (p[0].revents) drain_signals(s);
                if (p[1].revents) {
                        int r = log_pipe_read(&lp, out_r);
                        if (r <= 0) {
                                if (r < 0)
                                        log_warning_errno(r, "task %s: reading the worker's stdout", s->spec->task_id);
                                /* closed at once, so a worker still writing gets EPIPE instead of blocking */
                                out_r = safe_close(out_r);
                                out_open = false;
                        }
                }
                if (p[2].revents) {
                        char buf[65536];
                        ssize_t n = read(err_r, buf, sizeof buf);
                        if (n > 0)
                                log_pipe_raw(&lp, buf, (size_t) n);
                        else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                                err_r = safe_close(err_r);
                                err_open = false;
                        }
                }
                try_reap(s);
                disk_check(s);
                limits_check(s);
        }
        /* a worker that outran the walks (wrote past its budget and ended
         * between two of them) is judged by a last one */
        if (s->spec->disk && !s->stop_reason) {
                _cleanup_free_ char *detail = NULL;
                if (disk_watch_final(&s->disk, &detail) > 0) {
                        log_warning("task %s: the worker ended past its disk budget: %s", s->spec->task_id, detail);
                        s->stop_reason = "disk_quota_exceeded";
                        s->stop_detail = TAKE_PTR(detail);
                }
        }
        disk_watch_done(&s->disk);
        safe_close(out_r);
        safe_close(err_r);
        log_pipe_finish(&lp);
        log_pipe_done(&lp);
}

/* ---- main flow ---- */

static int start_and_monitor(shim *s) {
        launch_spec *spec = s->spec;
        launch_sandbox *sb = spec->sandbox;
        int r;

        _cleanup_free_ char *log_parent = strdup(spec->log_path);
        if (!log_parent) return fail_spawn(s, "out of memory");
        char *slash = strrchr(log_parent, '/');
        if (slash && slash != log_parent) {
                *slash = 0;
                (void) mkdir_p(log_parent, 0700);
        }
        s->log_fd = open(spec->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
        if (s->log_fd < 0) return fail_spawn(s, "cannot open log %s: %s", spec->log_path, strerror(errno));
        if (fchmod(s->log_fd, 0600) < 0)
                return fail_spawn(s, "cannot chmod log %s: %s", spec->log_path, strerror(errno));

        s->exec = executor_find_any(spec->executor);
        if (!s->exec) return fail_spawn(s, "unknown executor \"%s\"", spec->executor);

        const char *path_env = strv_env_get(spec->env, "PATH");
        if (!path_env) path_env = "/usr/local/bin:/usr/bin:/bin";
        _cleanup_free_ char *bwrap = NULL;
        if (sb) {
                r = find_executable("bwrap", path_env, &bwrap);
                if (r < 0)
                        return fail_spawn(s, "bwrap is required for sandboxing but was not found on PATH; "
                                             "install bubblewrap or dispatch with --no-sandbox");
                if (sandbox_has_overlays(sb)) {
                        r = bwrap_probe_overlay(bwrap, &s->method);
                        if (r < 0) return fail_spawn(s, "cannot run %s --help: %s", bwrap, strerror(-r));
                        s->have_overlay_method = true;
                }
        }

        if (sb) {
                struct statvfs sv;
                if (statvfs("/proc/sys", &sv) == 0 && (sv.f_flag & ST_RDONLY)) {
                        sb->userns_allowed = true;
                        dprintf(s->log_fd, "taskferry-shim: warning: /proc/sys is read-only here (a container?), so "
                                           "the sandbox cannot forbid nested user namespaces\n");
                }
                r = prepare_homes(sb);
                if (r < 0) return fail_spawn(s, "cannot prepare the task's executor homes: %s", strerror(-r));
                /* a parent task's result, into the still empty upper dirs (upper-seed.h) */
                _cleanup_free_ char *seed_err = NULL;
                r = upper_seeds_copy(sb->upper_seeds, sb->n_upper_seeds, &seed_err);
                if (r < 0)
                        return fail_spawn(s, "cannot start from the parent task's changes: %s",
                                          seed_err ? seed_err : strerror(-r));
                shim_mark(s, "homes");
        }

        r = capture_head(spec->directory, &s->pre_dispatch_head);
        if (r < 0) return fail_spawn(s, "cannot read HEAD of %s: %s", spec->directory, strerror(-r));
        shim_mark(s, "head");
        /* a check runs over a changeset already extracted: its base stays */
        if (sb && sb->overlay && !spec->check) {
                take_base_snapshot(s, sb->overlay);
                shim_mark(s, "base-snapshot");
        }

        if (sb) {
                s->prompt_fd = prompt_memfd(spec->prompt);
                if (s->prompt_fd < 0)
                        return fail_spawn(s, "cannot create the prompt memfd: %s", strerror(-s->prompt_fd));
                s->prompt_path = SANDBOX_PROMPT_PATH;
        } else {
                if (!spec->prompt_file)
                        return fail_spawn(s, "the launch spec has no promptFile for an unsandboxed worker");
                r = write_prompt_file(spec->prompt_file, spec->prompt);
                if (r < 0)
                        return fail_spawn(s, "cannot write prompt file %s: %s", spec->prompt_file, strerror(-r));
                s->prompt_path = spec->prompt_file;
        }

        executor_launch el = {
                .model = spec->model,
                .variant = spec->variant,
                .session_id = spec->session_id,
                .directory = spec->directory,
                .prompt = spec->prompt,
                .prompt_file = s->prompt_path,
                .attachment = spec->attachment,
        };
        _cleanup_strv_free_ char **worker_argv = NULL;
        r = s->exec->build_argv(&el, &worker_argv);
        if (r < 0 || !worker_argv || !worker_argv[0])
                return fail_spawn(s, "cannot build the %s command line: %s", spec->executor,
                                  strerror(r < 0 ? -r : EINVAL));

        _cleanup_free_ char *limits_note = NULL;
        r = limit_watch_prepare(&s->limits, spec->limits, spec->task_id, NULL,
                                &limits_note);
        if (r < 0) return fail_spawn(s, "cannot set up the worker's resource limits: %s", strerror(-r));
        if (limits_note)
                dprintf(s->log_fd, "taskferry-shim: warning: %s; the limits hold as rlimits instead\n", limits_note);
        /* without a sandbox there is no user namespace of the worker's own */
        if (!sb) s->limits.no_nproc = true;
        s->limits.sandboxed = sb != NULL;

        if (sb) {
                /* no host socket under the read-only system roots, no file a root
                 * worker should not read there (mask-mount.h): what the daemon
                 * knows of them, else a walk of our own */
                HostMaskList scanned = {0};
                const HostMaskList *hm = &sb->host_masks;
                if (!sb->have_host_masks) {
                        r = host_masks_scan(HOST_MASKS_SCAN_MAX, geteuid() == 0, &scanned);
                        if (r < 0) return fail_spawn(s, "cannot scan the system dirs for sockets: %s", strerror(-r));
                        hm = &scanned;
                }
                if (hm->partial)
                        dprintf(s->log_fd, "taskferry-shim: warning: /etc and /opt hold more than %d entries; the "
                                           "sandbox masks only the Unix sockets among the first of them\n",
                                HOST_MASKS_SCAN_MAX);
                sandbox_mount *argv_masks = NULL;
                size_t n_argv_masks = 0;
                r = mask_set_build(hm, sb->mounts, sb->n_mounts, spec->directory,
                                   sb->overlay && s->method == OVERLAY_METHOD_BWRAP, &s->masks, &argv_masks,
                                   &n_argv_masks);
                host_mask_list_done(&scanned);
                for (size_t i = 0; r >= 0 && i < n_argv_masks; i++)
                        r = sandbox_mounts_push(&sb->mounts, &sb->n_mounts, argv_masks[i].op, NULL, argv_masks[i].dest,
                                                NULL, NULL, NULL);
                sandbox_mounts_free(argv_masks, n_argv_masks);
                if (r < 0) return fail_spawn(s, "cannot plan the sandbox's masks: %s", strerror(-r));
                _cleanup_free_ char *access_err = NULL;
                r = target_access_check(spec->directory, sb->mounts, sb->n_mounts, &access_err);
                if (r < 0) return fail_spawn(s, "%s", access_err ? access_err : strerror(-r));
                shim_mark(s, "masks");
                /* unprivileged and no overlay to mount: a user namespace of
                 * our own only to make the network namespace or mount the
                 * masks in */
                if ((sb->net.mode != NET_MODE_HOST || s->masks.n > 0) && geteuid() != 0 &&
                    !sandbox_needs_userns(sb, s->method))
                        sb->own_userns = true;
                /* and one for RLIMIT_NPROC to count only the sandbox's processes (task-limits.h) */
                if (limit_watch_needs_userns(&s->limits) && !sandbox_needs_userns(sb, s->method)) sb->own_userns = true;
                /* and an IPC namespace whose shared memory the memory limit
                 * caps, where there are the rights to make one */
                sb->own_ipc = limit_watch_wants_ipc(&s->limits) && (geteuid() == 0 || sandbox_needs_userns(sb, s->method));
                r = net_env_apply(&spec->env, sb->net.mode);
                if (r < 0) return fail_spawn(s, "cannot set the worker's proxy environment: %s", strerror(-r));
                if (sb->net.mode == NET_MODE_PROXY && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s->net_sock) < 0)
                        return fail_spawn(s, "cannot create the egress proxy's socket pair: %s", strerror(errno));
                r = sandbox_build_argv(bwrap, spec->directory, sb, s->method, s->prompt_fd, worker_argv, &s->argv);
                if (r < 0) return fail_spawn(s, "cannot build the bwrap command line: %s", strerror(-r));
                r = bwrap_args_through_memfd(s);
                if (r < 0) return fail_spawn(s, "cannot pass the arguments to bwrap: %s", strerror(-r));
                s->exe = TAKE_PTR(bwrap);
                shim_mark(s, "argv");
        } else {
                r = find_executable(worker_argv[0], path_env, &s->exe);
                if (r < 0) {
                        const char *name = strerrorname_np(-r);
                        return fail_spawn(s, "spawn %s %s", worker_argv[0], name ? name : strerror(-r));
                }
                s->argv = TAKE_PTR(worker_argv);
        }

        int outp[2], errp[2], stderrp[2];
        if (pipe2(outp, O_CLOEXEC) < 0) return fail_spawn(s, "cannot create a pipe: %s", strerror(errno));
        if (pipe2(errp, O_CLOEXEC) < 0) {
                int e = errno;
                close(outp[0]);
                close(outp[1]);
                return fail_spawn(s, "cannot create a pipe: %s", strerror(e));
        }
        if (pipe2(stderrp, O_CLOEXEC) < 0) {
                int e = errno;
                close(outp[0]), close(outp[1]), close(errp[0]), close(errp[1]);
                return fail_spawn(s, "cannot create a pipe: %s", strerror(e));
        }
        _cleanup_close_ int out_r = outp[0];
        _cleanup_close_ int serr_r = stderrp[0];
        if (spec->disk) (void) disk_reserve_create(spec->task_dir);
        uint64_t started_at = now_ms();
        s->oom_base_known = cgroup_self_oom_kills(&s->oom_base) >= 0;
        /* the worker leads its own process group (the shim signals the
         * group); a sandbox's death signal is set right before the exec of
         * bwrap (run_worker) */
        pid_t pid, shim_pid = getpid();
        r = safe_fork("taskferry-shim-worker", FORK_RESET_SIGNALS | FORK_NEW_PROCESS_GROUP, &pid);
        if (r < 0) {
                close(outp[1]);
                close(errp[0]);
                close(errp[1]);
                close(stderrp[1]);
                return fail_spawn(s, "cannot fork the worker: %s", strerror(-r));
        }
        if (r == 0) {
                close(outp[0]);
                close(errp[0]);
                close(stderrp[0]);
                run_worker(s, shim_pid, outp[1], errp[1], stderrp[1]);
        }
        s->worker = pid;
        (void) setpgid(pid, pid); /* also done by the child; whichever runs first wins the race */
        limit_watch_start(&s->limits, pid, mono_ms());
        s->tmpfs_deadline = mono_ms() + TMPFS_LOOK_MS;
        close(outp[1]);
        close(errp[1]);
        close(stderrp[1]);
        if (s->net_sock[0] >= 0) {
                /* the listener made in the sandbox's namespace (netns.h); none
                 * means the child failed first, and its error pipe says why */
                s->net_sock[1] = safe_close(s->net_sock[1]);
                int lfd = -1;
                r = fd_recv(s->net_sock[0], &lfd);
                /* then one message per forward (netns.h), a listener or none */
                EgressForward fw[NET_POLICY_MAX_RULES];
                size_t n_fw = 0;
                for (size_t i = 0; r >= 0 && i < sb->net.n_rules; i++) {
                        if (!netns_rule_is_forward(&sb->net.rules[i])) continue;
                        int ffd = -1;
                        int k = fd_recv(s->net_sock[0], &ffd);
                        if (k == -ENOENT) continue;
                        if (k < 0) break;
                        fw[n_fw++] = (EgressForward) {.listen_fd = ffd, .rule = &sb->net.rules[i]};
                }
                s->net_sock[0] = safe_close(s->net_sock[0]);
                if (r >= 0) {
                        _cleanup_free_ char *stats = strdup_printf("%s/%s", spec->task_dir, NETWORK_JSON_NAME);
                        EgressConfig ec = {
                                .listen_fd = lfd,
                                .policy = &sb->net,
                                .stats_path = stats,
                                .task_id = spec->task_id,
                                .forwards = fw,
                                .n_forwards = n_fw,
                        };
                        r = stats ? egress_proxy_spawn(&ec, &s->proxy) : -ENOMEM;
                        if (r < 0) {
                                if (!stats) {
                                        safe_close(lfd);
                                        for (size_t i = 0; i < n_fw; i++) safe_close(fw[i].listen_fd);
                                }
                                (void) kill(pid, SIGKILL);
                                (void) wait_for_terminate(pid, NULL);
                                s->worker = 0;
                                close(errp[0]);
                                return fail_spawn(s, "cannot start the egress proxy: %s", strerror(-r));
                        }
                }
        }
        _cleanup_free_ char *child_error = NULL;
        r = read_child_error(errp[0], &child_error);
        close(errp[0]);
        if (r < 0 || child_error) {
                (void) wait_for_terminate(pid, NULL);
                s->worker = 0;
                return fail_spawn(s, "%s", child_error ? child_error : "cannot read the worker's start status");
        }
        s->prompt_fd = safe_close(s->prompt_fd);
        s->args_fd = safe_close(s->args_fd);
        (void) fcntl(out_r, F_SETFL, O_NONBLOCK);
        (void) fcntl(serr_r, F_SETFL, O_NONBLOCK);

        launch_info li = {
                .shim_pid = getpid(),
                .worker_pid = pid,
                .pre_dispatch_head = s->pre_dispatch_head,
                .overlay_method = !s->have_overlay_method ? NULL
                                  : s->method == OVERLAY_METHOD_BWRAP ? (char *) "bwrap"
                                                                      : (char *) "userns",
                .started_at_ms = started_at,
        };
        _cleanup_json_ json_object *lj = NULL;
        r = launch_info_to_json(&li, &lj);
        if (r >= 0) {
                r = write_json_file(spec->task_dir, LAUNCH_JSON_NAME, lj);
                if (r < 0) log_error_errno(r, "task %s: cannot write %s", spec->task_id, LAUNCH_JSON_NAME);
                size_t len;
                const char *line = json_to_line(lj, &len);
                if (s->status_fd >= 0 && line) {
                        if (loop_write(s->status_fd, line, len) < 0 || loop_write(s->status_fd, "\n", 1) < 0)
                                log_warning("task %s: cannot write the status line", spec->task_id);
                }
        } else
                log_error_errno(r, "task %s: cannot build %s", spec->task_id, LAUNCH_JSON_NAME);
        s->status_fd = safe_close(s->status_fd);

        monitor(s, TAKE_FD(out_r), TAKE_FD(serr_r));

        if (!s->reaped) {
                /* Only reached if poll failed: wait for the worker regardless.
                 * A wait that fails too leaves no status: exit.json then says
                 * exit code 0. */
                if (wait_for_terminate(pid, &s->wait_info) < 0) s->wait_info = (siginfo_t) {.si_code = CLD_EXITED};
                s->reaped = true;
                s->ended_at = now_ms();
        }
        /* a worker that failed at a limit says so, whatever it logged */
        if (!s->stop_reason) {
                const char *reason = NULL;
                _cleanup_free_ char *detail = NULL;
                if (limit_watch_final(&s->limits, spec->log_path, &reason, &detail) > 0) {
                        s->stop_reason = reason;
                        s->stop_detail = TAKE_PTR(detail);
                }
        }
        limit_watch_done(&s->limits);
        /* the proxy's last stats are written before the daemon hears of the end */
        if (s->proxy > 0) {
                egress_proxy_stop(s->proxy);
                s->proxy = 0;
        }
        r = write_exit_json(s, NULL);
        if (r < 0) {
                log_error_errno(r, "task %s: cannot write %s/%s", spec->task_id, spec->task_dir, EXIT_JSON_NAME);
                return EXIT_FAILURE;
        }
        return EXIT_SUCCESS;
}

static int parse_fd(const char *s, int *ret) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < 0 || v > INT_MAX) return -EINVAL;
        *ret = (int) v;
        return 0;
}

static void usage(FILE *f) {
        fputs("Usage: taskferry-shim --spec-fd FD --status-fd FD\n"
              "Start one taskferry worker from the launch spec on FD (internal; run by taskferryd).\n",
              f);
}

static int parse_args(int argc, char *argv[], int *spec_fd, int *status_fd) {
        enum { ARG_SPEC_FD = 0x100, ARG_STATUS_FD };
        static const struct option options[] = {
                {"spec-fd", required_argument, NULL, ARG_SPEC_FD},
                {"status-fd", required_argument, NULL, ARG_STATUS_FD},
                {"help", no_argument, NULL, 'h'},
                {},
        };
        *spec_fd = *status_fd = -1;
        opterr = 0;
        int c;
        while ((c = getopt_long(argc, argv, "+h", options, NULL)) >= 0) {
                switch (c) {
                case ARG_SPEC_FD:
                case ARG_STATUS_FD: {
                        int *target = c == ARG_SPEC_FD ? spec_fd : status_fd;
                        int fd;
                        if (*target >= 0 || parse_fd(optarg, &fd) < 0) {
                                log_error("invalid or repeated %s", c == ARG_SPEC_FD ? "--spec-fd" : "--status-fd");
                                return -EINVAL;
                        }
                        *target = fd;
                        break;
                }
                case 'h':
                        usage(stdout);
                        return 0;
                case ':':
                        log_error("option %s needs a value", argv[optind - 1]);
                        return -EINVAL;
                default:
                        log_error("unknown option %s", argv[optind - 1]);
                        return -EINVAL;
                }
        }
        if (optind < argc) {
                log_error("unexpected argument %s", argv[optind]);
                return -EINVAL;
        }
        if (*spec_fd < 0 || *status_fd < 0) {
                log_error("--spec-fd and --status-fd are required");
                return -EINVAL;
        }
        if (*spec_fd == *status_fd || *spec_fd <= STDERR_FILENO || *status_fd <= STDERR_FILENO) {
                log_error("--spec-fd and --status-fd must be distinct fds above 2");
                return -EINVAL;
        }
        return 1;
}

/* Make sure fds 0-2 are open, so no pipe we create lands there. */
static void ensure_std_fds(void) {
        for (int fd = 0; fd <= STDERR_FILENO; fd++)
                if (fcntl(fd, F_GETFD) < 0) {
                        int n = open("/dev/null", O_RDWR);
                        if (n >= 0 && n != fd) {
                                dup2(n, fd);
                                close(n);
                        }
                }
}

static int setup_signals(shim *s) {
        int p[2];
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) return -errno;
        s->signal_fd = p[0];
        signal_pipe_w = p[1];
        struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
        sigemptyset(&sa.sa_mask);
        const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGCHLD};
        for (size_t i = 0; i < ELEMENTSOF(sigs); i++)
                if (sigaction(sigs[i], &sa, NULL) < 0) return -errno;
        struct sigaction ign = {.sa_handler = SIG_IGN};
        (void) sigaction(SIGPIPE, &ign, NULL);
        /* The daemon's mask (sd-event blocks the signals it handles) would
         * keep our handlers from running. */
        sigset_t empty;
        sigemptyset(&empty);
        if (sigprocmask(SIG_SETMASK, &empty, NULL) < 0) return -errno;
        return 0;
}

int main(int argc, char *argv[]) {
        log_set_program("taskferry-shim");
        ensure_std_fds();

        int spec_fd, status_fd;
        int r = parse_args(argc, argv, &spec_fd, &status_fd);
        if (r <= 0) return r < 0 ? 2 : EXIT_SUCCESS;

        if (fcntl(spec_fd, F_GETFD) < 0 || fcntl(status_fd, F_GETFD) < 0) {
                log_error("--spec-fd %d or --status-fd %d is not an open file descriptor", spec_fd, status_fd);
                return 2;
        }

        /* Nothing the daemon handed us may reach the worker. */
        (void) close_range(3, UINT_MAX, CLOSE_RANGE_CLOEXEC);

        shim s = {.status_fd = status_fd, .log_fd = -1, .signal_fd = -1, .prompt_fd = -1, .args_fd = -1, .net_sock = {-1, -1},
                  .times_fd = -1, .started_us = mono_us(), .limits = {.sandbox_proc_fd = -1}};
        if ((r = setup_signals(&s)) < 0) {
                log_error_errno(r, "cannot set up signal handling");
                shim_done(&s);
                return EXIT_FAILURE;
        }

        r = launch_spec_read_fd(spec_fd, &s.spec);
        close(spec_fd);
        if (r < 0) {
                log_error_errno(r, "cannot read the launch spec from fd %d", spec_fd);
                shim_done(&s);
                return EXIT_FAILURE;
        }

        r = mkdir_p_chmod(s.spec->task_dir, 0700);
        if (r < 0) {
                log_error_errno(r, "cannot create task directory %s", s.spec->task_dir);
                shim_done(&s);
                return EXIT_FAILURE;
        }

        shim_times_open(&s);
        shim_mark(&s, "spec-read");
        r = start_and_monitor(&s);
        shim_done(&s);
        safe_close(signal_pipe_w);
        return r;
}
