/* Kill -9 soak: N dispatches into one repository,
 * each worker editing its own file, the daemon killed (SIGKILL) at random
 * points — right after a dispatch (spawn), while workers run, while they
 * settle (extraction), during accepts — and started again by the next CLI
 * call. Every acknowledged dispatch must end settled with exactly its
 * changeset; after accepting them all (more kills), every edit is in the tree
 * exactly once, no pending changeset lost its overlay on the way, and no
 * process or mount of the world is left behind.
 *
 * TASKFERRY_SOAK_N (default 200; 80 in a sanitizer build, where a settlement
 * costs about 5x and 200 would take over 4 minutes on 2 cores) sets N, TASKFERRY_SOAK_SEED the seed of the
 * kill schedule (printed, so a failing run can be replayed);
 * TASKFERRY_SOAK_KILLS=0 runs the same load without kills (a baseline that
 * tells a crash bug from a plain one).
 *
 * The long soak (tools/soak) adds two loads: TASKFERRY_SOAK_FLOOD=K makes
 * every K-th worker print TASKFERRY_SOAK_FLOOD_MIB (default 32) MiB to its
 * stderr before its edit, and TASKFERRY_SOAK_FULL_DISK=1 fills the
 * filesystem of the world (only a small one, under 8 GiB: tools/soak gives
 * it a tmpfs) for 20 dispatches from a third of the way on. A dispatch
 * refused while the disk is full is not acknowledged; every acknowledged
 * one must still settle with exactly its changeset. Every 100 dispatches the
 * daemon's RSS and open fds are sampled and printed: after the first
 * hundred they must stay flat (the fds within 16 of the first sample, the
 * RSS within 8 MiB plus 4 KiB per task of it). */

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"


static unsigned rng_state;
static unsigned rnd(unsigned n) { /* xorshift32, [0, n) */
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 17;
        rng_state ^= rng_state << 5;
        return n ? rng_state % n : 0;
}

static unsigned kills;
static bool kills_enabled = true;

/* SIGKILL the world's daemon (if one runs) after delay_ms. */
static void kill_daemon(tf_world *w, unsigned delay_ms, const char *when) {
        if (!kills_enabled) return;
        if (delay_ms) usleep(delay_ms * 1000);
        pid_t pid = tf_daemon_pid(w);
        if (pid <= 0) return;
        kill(pid, SIGKILL);
        for (int i = 0; i < 500 && tf_pid_running(pid); i++) {
                if (w->daemon_pid == pid) waitpid(pid, NULL, WNOHANG);
                usleep(10000);
        }
        kills++;
        fprintf(stderr, "soak: kill -9 #%u (%s, +%ums)\n", kills, when, delay_ms);
}

static json_object *cli_json(tf_world *w, const char *const argv[], int *ret_exit) {
        tf_run r = tf_cli(w, NULL, NULL, argv);
        *ret_exit = r.exit_code;
        json_object *o = NULL;
        if (json_parse_strict(r.out, strlen(r.out), &o) < 0) o = NULL;
        if (!o) fprintf(stderr, "soak: %s: exit %d, not JSON: %s %s\n", argv[0], r.exit_code, r.out, r.err);
        tf_run_done(&r);
        return o;
}

/* Exactly one file, f-<i>.txt, gaining exactly the line edit-<i>. */
static void check_diff(int i, const char *diff) {
        ck_assert_msg(diff, "task %d: no diff", i);
        char *hdr = strdup_printf("diff --git a/f-%03d.txt b/f-%03d.txt\n", i, i);
        char *add = strdup_printf("\n+edit-%03d\n", i);
        int files = 0, plus = 0, minus = 0;
        for (const char *p = diff; p && *p;) {
                const char *nl = strchr(p, '\n');
                size_t n = nl ? (size_t) (nl - p) : strlen(p);
                if (n >= 11 && strncmp(p, "diff --git ", 11) == 0) files++;
                else if (n >= 1 && p[0] == '+' && !(n >= 3 && strncmp(p, "+++", 3) == 0)) plus++;
                else if (n >= 1 && p[0] == '-' && !(n >= 3 && strncmp(p, "---", 3) == 0)) minus++;
                p = nl ? nl + 1 : NULL;
        }
        ck_assert_msg(strstr(diff, hdr) && strstr(diff, add) && files == 1 && plus == 1 && minus == 0,
                      "task %d: not its exact changeset:\n%s", i, diff);
        free(hdr), free(add);
}

typedef struct world_search {
        tf_world *w;
        char *needle; /* TASKFERRY_STATE_DIR=<the world's> */
        char *found; /* "pid(cmdline) " each */
} world_search;

static bool of_world(pid_t pid, void *arg) {
        world_search *ws = arg;
        _cleanup_free_ char *env = tf_proc_read(pid, "environ", '\n', NULL);
        _cleanup_free_ char *cmd = tf_proc_read(pid, "cmdline", ' ', NULL);
        if (!(env && strstr(env, ws->needle)) && !(cmd && strstr(cmd, ws->w->root))) return false;
        tf_appendf(&ws->found, "%d(%s) ", (int) pid, cmd ? cmd : "?");
        return true;
}

/* Pids whose environment names this world's state dir (daemon, shims, jobs,
 * workers all inherit it), or whose command line names the world. */
static char *world_processes(tf_world *w) {
        world_search ws = {w, strdup_printf("TASKFERRY_STATE_DIR=%s", w->state), strdup("")};
        tf_procs(of_world, &ws, NULL, 0);
        free(ws.needle);
        return ws.found;
}

static bool no_world_processes(tf_world *w, void *arg) {
        char *p = world_processes(w);
        bool none = !*p;
        free(p);
        return none;
}

#if defined(__SANITIZE_ADDRESS__)
#define SOAK_DEFAULT_N 80
#else
#define SOAK_DEFAULT_N 200
#endif

static int env_int(const char *name, int def) {
        const char *v = getenv(name);
        return v && atoi(v) > 0 ? atoi(v) : def;
}

/* the daemon's resident set (KiB) and open fds, or false when none runs */
static bool daemon_sample(tf_world *w, long *ret_rss_kib, int *ret_fds) {
        pid_t pid = tf_daemon_pid(w);
        if (pid <= 0) return false;
        _cleanup_free_ char *status = tf_proc_read(pid, "status", '\n', NULL);
        const char *rss = status ? strstr(status, "VmRSS:") : NULL;
        if (!rss) return false;
        *ret_rss_kib = strtol(rss + 6, NULL, 10);
        _cleanup_free_ char *dir = strdup_printf("/proc/%d/fd", (int) pid);
        DIR *d = opendir(dir);
        if (!d) return false;
        int n = 0;
        for (struct dirent *de; (de = readdir(d));)
                if (de->d_name[0] != '.') n++;
        closedir(d);
        *ret_fds = n;
        return true;
}

/* Fill the filesystem holding path (a file there taking all its free
 * space): the file's fd, or -1 when that filesystem is 8 GiB or more,
 * which no test fills. */
static int disk_fill(const char *dir) {
        struct statvfs sv;
        ck_assert_int_eq(statvfs(dir, &sv), 0);
        if ((uint64_t) sv.f_blocks * sv.f_frsize >= (8ULL << 30)) {
                fprintf(stderr, "soak: %s is on a filesystem of 8 GiB or more: not filling it\n", dir);
                return -1;
        }
        _cleanup_free_ char *path = strdup_printf("%s/soak-disk-fill", dir);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        static char block[1 << 20];
        while (write(fd, block, sizeof block) > 0)
                ;
        /* the last partial blocks */
        while (write(fd, block, 4096) > 0)
                ;
        fprintf(stderr, "soak: %s is full\n", dir);
        return fd;
}

static void disk_free(const char *dir, int fd) {
        if (fd < 0) return;
        _cleanup_free_ char *path = strdup_printf("%s/soak-disk-fill", dir);
        ck_assert_int_eq(unlink(path), 0);
        close(fd);
        fprintf(stderr, "soak: %s has room again\n", dir);
}

START_TEST(kill9_soak) {
        const char *ns = getenv("TASKFERRY_SOAK_N");
        int n = ns && atoi(ns) > 0 ? atoi(ns) : SOAK_DEFAULT_N;
        const char *ss = getenv("TASKFERRY_SOAK_SEED");
        rng_state = ss && *ss ? (unsigned) strtoul(ss, NULL, 0) : (unsigned) (now_ms() ^ (uint64_t) getpid());
        if (!rng_state) rng_state = 1;
        const char *ks = getenv("TASKFERRY_SOAK_KILLS");
        kills_enabled = !(ks && streq(ks, "0"));
        int flood = env_int("TASKFERRY_SOAK_FLOOD", 0), flood_mib = env_int("TASKFERRY_SOAK_FLOOD_MIB", 32);
        const char *fd_env = getenv("TASKFERRY_SOAK_FULL_DISK");
        bool full_disk = fd_env && streq(fd_env, "1");
        fprintf(stderr, "soak: N=%d TASKFERRY_SOAK_SEED=%u%s%s%s\n", n, rng_state, kills_enabled ? "" : " (no kills)",
                flood ? ", log floods" : "", full_disk ? ", a full disk for a while" : "");
        uint64_t t0 = mono_ms();
        tf_world *w = tf_world_new(NULL);
        _cleanup_free_ char *files = strdup_printf("for i in $(seq -f %%03g 0 %d); do echo base-$i > f-$i.txt; done", n - 1);
        char *repo = tf_repo_new(w, NULL, files);

        /* 1. dispatch, killing the daemon now and then: right after the
         * dispatch (the spawn), or a little later (run, extraction) */
        char **ids = calloc((size_t) n, sizeof *ids);
        int acked = 0, fill_fd = -1, n_samples = 0, failed_on_full_disk = 0;
        long first_rss = 0;
        int first_fds = 0;
        for (int i = 0; i < n; i++) {
                if (full_disk && i == n / 3) fill_fd = disk_fill(w->root);
                if (full_disk && i == n / 3 + 20) {
                        disk_free(w->root, fill_fd);
                        fill_fd = -1;
                }
                _cleanup_free_ char *noise = flood && i % flood == flood - 1
                                                     ? strdup_printf("yes 'a line of log flood' | head -c %dM >&2; ", flood_mib)
                                                     : strdup("");
                char *prompt = strdup_printf("set -e; %ssleep 0.%u; echo edit-%03d >> f-%03d.txt; echo done-%03d", noise,
                                             rnd(5), i, i, i);
                const char *d[] = {"dispatch", "--json", "--executor", "shell", "--directory", repo, "--prompt", prompt, NULL};
                int code;
                json_object *o = cli_json(w, d, &code);
                if (code == 0 && o && json_get_string(o, "id")) {
                        ids[i] = strdup(json_get_string(o, "id"));
                        acked++;
                }
                json_object_put(o);
                free(prompt);
                unsigned k = rnd(20);
                if (k == 0) kill_daemon(w, 0, "spawn");
                else if (k == 1) kill_daemon(w, 100 + rnd(400), "run");
                else if (k == 2) kill_daemon(w, 400 + rnd(600), "settle");
                long rss;
                int fds;
                if (i % 100 == 99 && daemon_sample(w, &rss, &fds)) {
                        fprintf(stderr, "soak: after %d dispatches: daemon RSS %ld KiB, %d fds\n", i + 1, rss, fds);
                        if (n_samples++ == 0) {
                                first_rss = rss;
                                first_fds = fds;
                        } else {
                                ck_assert_msg(fds <= first_fds + 16, "fds grew: %d, first %d", fds, first_fds);
                                ck_assert_msg(rss <= first_rss + 8192 + 4 * (i + 1), "RSS grew: %ld KiB, first %ld KiB",
                                              rss, first_rss);
                        }
                }
        }
        disk_free(w->root, fill_fd);
        fprintf(stderr, "soak: %d of %d dispatches acknowledged, %u kills, %.1fs\n", acked, n, kills,
                (double) (mono_ms() - t0) / 1000);

        /* 2. every acknowledged dispatch settles with exactly its changeset;
         * some waits start with a kill (extraction in flight) */
        for (int i = 0; i < n; i++) {
                if (!ids[i]) continue;
                if (rnd(25) == 0) kill_daemon(w, rnd(300), "settle");
                const char *wt[] = {"wait", ids[i], "--json", "--timeout", "180s", NULL};
                int code;
                json_object *o = cli_json(w, wt, &code);
                ck_assert_msg(o, "task %d (%s): wait failed", i, ids[i]);
                const char *status = strempty(json_get_string(o, "status"));
                const char *why = strempty(json_get_string(o, "failureDetail"));
                const char *spawn = strempty(json_get_string(o, "spawnError"));
                if (full_disk && (streq(status, "failed") || streq(status, "crashed")) &&
                    (strstr(why, "No space left") || strstr(spawn, "No space left") ||
                     streq_ptr(json_get_string(o, "failureReason"), "disk_quota_exceeded"))) {
                        /* it ran while the disk was full: it may fail, but loudly */
                        fprintf(stderr, "soak: task %d ended %s while the disk was full: %s\n", i, status,
                                json_to_line(o, NULL));
                        if (streq_ptr(json_get_string(o, "changesetStatus"), "pending")) {
                                const char *rj[] = {"reject", ids[i], "--json", NULL};
                                int rc;
                                json_object_put(cli_json(w, rj, &rc));
                                ck_assert_msg(rc == 0, "task %d: its changeset could not be rejected", i);
                        }
                        free(ids[i]);
                        ids[i] = NULL;
                        failed_on_full_disk++;
                        json_object_put(o);
                        continue;
                }
                ck_assert_msg(streq(status, "done") &&
                                      streq(strempty(json_get_string(o, "changesetStatus")), "pending"),
                              "task %d (%s) did not settle with a pending changeset: %s", i, ids[i], json_to_line(o, NULL));
                json_object_put(o);
        }
        for (int i = 0; i < n; i++) {
                if (!ids[i]) continue;
                const char *res[] = {"result", ids[i], "--json", NULL};
                int code;
                json_object *o = cli_json(w, res, &code);
                ck_assert_msg(o && code == 0, "task %d: result failed", i);
                char *msg = strdup_printf("done-%03d\n", i);
                ck_assert_msg(streq(strempty(json_get_string(o, "message")), msg), "task %d: message %s", i,
                              json_get_string(o, "message"));
                free(msg);
                check_diff(i, json_get_string(o, "diff"));
                json_object_put(o);
                /* its overlay is still there */
                const char *st[] = {"status", ids[i], "--full", "--json", NULL};
                o = cli_json(w, st, &code);
                const char *root = json_get_string(json_get_object(o, "overlayDirs"), "root");
                ck_assert_msg(root && tf_exists(root), "task %d: the pending changeset's overlay is gone: %s", i,
                              json_to_line(o, NULL));
                json_object_put(o);
        }
        fprintf(stderr, "soak: all settled and checked, %u kills, %d failed on the full disk, %.1fs\n", kills,
                failed_on_full_disk, (double) (mono_ms() - t0) / 1000);

        /* 3. accept them all, in a random order, killing the daemon during
         * some accepts; an accept that died is retried until decided */
        int *order = calloc((size_t) n, sizeof *order);
        for (int i = 0; i < n; i++) order[i] = i;
        for (int i = n - 1; i > 0; i--) {
                int j = (int) rnd((unsigned) i + 1), t = order[i];
                order[i] = order[j];
                order[j] = t;
        }
        for (int k = 0; k < n; k++) {
                int i = order[k];
                if (!ids[i]) continue;
                if (rnd(8) == 0) {
                        pid_t c = fork();
                        ck_assert_int_ge(c, 0);
                        if (c == 0) {
                                const char *acc[] = {"accept", ids[i], "--json", NULL};
                                tf_run r = tf_cli(w, NULL, NULL, acc);
                                _exit(r.exit_code == 0 ? 0 : 1);
                        }
                        kill_daemon(w, rnd(150), "accept");
                        waitpid(c, NULL, 0);
                }
                bool decided = false;
                for (int attempt = 0; attempt < 10 && !decided; attempt++) {
                        const char *acc[] = {"accept", ids[i], "--json", NULL};
                        int code;
                        json_object *o = cli_json(w, acc, &code);
                        decided = code == 0 && o && streq_ptr(json_get_string(o, "changesetStatus"), "accepted") &&
                                  json_get_bool(o, "applied", false);
                        if (!decided) fprintf(stderr, "soak: accept of %d answered (exit %d): %s\n", i, code,
                                              o ? json_to_line(o, NULL) : "?");
                        json_object_put(o);
                        if (decided) break;
                        /* refused: an accept that a kill interrupted may have been recorded */
                        const char *st[] = {"status", ids[i], "--json", NULL};
                        o = cli_json(w, st, &code);
                        const char *cs = o ? json_get_string(o, "changesetStatus") : NULL;
                        ck_assert_msg(cs && !streq(cs, "rejected"), "task %d: %s", i, o ? json_to_line(o, NULL) : "?");
                        decided = streq(cs, "accepted");
                        if (!decided) fprintf(stderr, "soak: accept of %d not decided yet: %s\n", i, json_to_line(o, NULL));
                        json_object_put(o);
                }
                ck_assert_msg(decided, "task %d (%s) could not be accepted", i, ids[i]);
        }
        fprintf(stderr, "soak: all accepted, %u kills, %.1fs\n", kills, (double) (mono_ms() - t0) / 1000);

        /* 4. every edit exactly once */
        for (int i = 0; i < n; i++) {
                char *f = strdup_printf("%s/f-%03d.txt", repo, i);
                char *data = tf_read(f, NULL);
                char *base = strdup_printf("base-%03d\n", i), *edited = strdup_printf("base-%03d\nedit-%03d\n", i, i);
                if (ids[i]) ck_assert_msg(streq(data, edited), "f-%03d.txt after accept: %s", i, data);
                else ck_assert_msg(streq(data, edited) || streq(data, base), "f-%03d.txt: %s", i, data);
                free(f), free(data), free(base), free(edited);
        }
        char *extra = tf_shf(w, repo, "git status --porcelain | grep -v '^ M f-[0-9]*.txt$' || true");
        ck_assert_msg(!*extra, "unexpected changes in the repository: %s", extra);
        free(extra);

        /* 5. nothing left behind: a clean stop, then no process of the world
         * and no mount under it; a last start sweeps no overlay of them */
        const char *list[] = {"list", "--all", "--json", NULL};
        int code;
        json_object_put(cli_json(w, list, &code));
        pid_t pid = tf_daemon_pid(w);
        ck_assert_int_gt(pid, 0);
        kill(pid, SIGTERM);
        for (int i = 0; i < 1000 && tf_pid_running(pid); i++) usleep(10000);
        ck_assert_msg(tf_wait_until(no_world_processes, w, NULL, 10000), "processes left behind: %s", world_processes(w));
        char *mounts = tf_shf(w, NULL, "grep -F %s /proc/self/mountinfo || true", w->root);
        ck_assert_msg(!*mounts, "mounts left behind: %s", mounts);
        free(mounts);
        char *ovl = tf_shf(w, NULL, "ls -A %s/overlays 2>/dev/null | grep '^taskferry-cow-' || true", w->state);
        ck_assert_msg(!*ovl, "overlays of accepted changesets left behind: %s", ovl);
        free(ovl);
        fprintf(stderr, "soak: done: N=%d, %d acknowledged, %u kills, %.1fs\n", n, acked, kills,
                (double) (mono_ms() - t0) / 1000);
        for (int i = 0; i < n; i++) free(ids[i]);
        free(ids), free(order), free(repo);
        tf_world_free(w);
}
END_TEST

int main(void) { return tf_run_tests("soak", "soak", 900, TF_TESTS(kill9_soak)); }
