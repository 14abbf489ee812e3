/* Ending a test world (world-teardown.h). */
#include "world-teardown.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fileio.h"
#include "fs-util.h"
#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "path-util.h"
#include "process-util.h"
#include "state-journal.h"
#include "string-util.h"
#include "strv.h"
#include "time-util.h"

/* the target of /proc/<pid>/<name> at or below root */
static bool link_below(const char *pid, const char *name, const char *root) {
        char p[300], target[PATH_MAX];
        snprintf(p, sizeof p, "/proc/%s/%s", pid, name);
        ssize_t n = readlink(p, target, sizeof target - 1);
        if (n <= 0) return false;
        target[n] = 0;
        return path_is_at_or_below(target, root);
}

/* Does process pid (a /proc entry's name) name root? */
static bool names_root(const char *pid, const char *root) {
        if (link_below(pid, "cwd", root) || link_below(pid, "exe", root)) return true;
        char p[300];
        snprintf(p, sizeof p, "/proc/%s/environ", pid);
        _cleanup_free_ char *env = NULL;
        size_t len = 0;
        if (read_file(p, (size_t) 4 << 20, &env, &len) < 0) return false;
        for (size_t off = 0; off < len; off += strlen(env + off) + 1) {
                const char *eq = strchr(env + off, '=');
                if (eq && path_is_at_or_below(eq + 1, root)) return true;
        }
        return false;
}

static void append_name(char **names, const char *pid) {
        if (!*names) return;
        char p[300], comm[64] = "?";
        snprintf(p, sizeof p, "/proc/%s/comm", pid);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                ssize_t n = read(fd, comm, sizeof comm - 1);
                comm[n > 0 ? n : 0] = 0;
                comm[strcspn(comm, "\n")] = 0;
        }
        char *more = strdup_printf("%s%s%s[%s]", *names, **names ? " " : "", comm, pid);
        free(*names);
        *names = more;
}

int tf_world_kill_all(const char *root, char **ret_names) {
        _cleanup_free_ char *names = ret_names ? strdup("") : NULL;
        int killed = 0;
        pid_t self = getpid();
        /* a process forked while we scan is caught by the next round */
        for (int round = 0; round < 50; round++) {
                DIR *d = opendir("/proc");
                if (!d) break;
                int found = 0;
                struct dirent *de;
                while ((de = readdir(d))) {
                        char *end = NULL;
                        long pid = strtol(de->d_name, &end, 10);
                        if (!end || *end || pid <= 0 || pid == self || !names_root(de->d_name, root)) continue;
                        /* its name before it dies; a zombie names nothing any more */
                        if (ret_names) append_name(&names, de->d_name);
                        if (kill((pid_t) pid, SIGKILL) == 0) found++;
                }
                closedir(d);
                killed += found;
                if (found == 0) break;
                usleep(100 * 1000);
        }
        if (ret_names) *ret_names = TAKE_PTR(names);
        return killed;
}

int tf_world_remove(const char *root) {
        /* mount points at or below root, field 5 of mountinfo (octal escapes
         * for space, tab, newline and backslash) */
        _cleanup_free_ char *info = NULL;
        _cleanup_strv_free_ char **points = NULL;
        if (read_file("/proc/self/mountinfo", (size_t) 16 << 20, &info, NULL) == 0) {
                char *save = NULL;
                for (char *line = strtok_r(info, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                        char *f = line;
                        for (int i = 0; i < 4 && f; i++) f = strchr(f, ' ') ? strchr(f, ' ') + 1 : NULL;
                        if (!f) continue;
                        size_t n = strcspn(f, " ");
                        _cleanup_free_ char *mp = malloc(n + 1);
                        if (!mp) return -ENOMEM;
                        size_t k = 0;
                        for (size_t i = 0; i < n; i++) {
                                if (f[i] == '\\' && i + 3 < n && f[i + 1] >= '0' && f[i + 1] <= '3') {
                                        mp[k++] = (char) ((f[i + 1] - '0') * 64 + (f[i + 2] - '0') * 8 + (f[i + 3] - '0'));
                                        i += 3;
                                } else
                                        mp[k++] = f[i];
                        }
                        mp[k] = 0;
                        if (path_is_at_or_below(mp, root) && strv_push(&points, mp) < 0) return -ENOMEM;
                }
        }
        /* mountinfo lists a mount after the one it sits on: undo from the end */
        for (size_t i = strv_length(points); i > 0; i--) (void) umount2(points[i - 1], MNT_DETACH);
        return rm_rf(root);
}

/* task.status of id from the world's daemon while it still runs (tasks.json
 * is written behind the daemon's state): its result (new reference) or
 * NULL. At most about 2 s. */
static json_object *live_status(const char *root, const char *id) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if ((size_t) snprintf(sa.sun_path, sizeof sa.sun_path, "%s/run/daemon.sock", root) >= sizeof sa.sun_path)
                return NULL;
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) return NULL;
        _cleanup_json_ json_object *params = json_object_new_object();
        if (!params || json_add_string(params, "taskId", id) < 0) return NULL;
        _cleanup_free_ char *req = strdup_printf("{\"version\":1,\"id\":\"guard\",\"method\":\"task.status\","
                                                 "\"params\":%s}\n",
                                                 json_to_line(params, NULL));
        if (!req || send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t) strlen(req)) return NULL;
        char buf[65536];
        size_t len = 0;
        uint64_t end = mono_ms() + 2000;
        while (len < sizeof buf - 1 && !memchr(buf, '\n', len)) {
                uint64_t now = mono_ms();
                struct pollfd p = {.fd = fd, .events = POLLIN};
                if (now >= end || poll(&p, 1, (int) (end - now)) <= 0) return NULL;
                ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
                if (n <= 0) return NULL;
                len += (size_t) n;
        }
        char *nl = memchr(buf, '\n', len);
        if (!nl) return NULL;
        json_object *frame = NULL, *res = NULL;
        if (json_parse_strict(buf, (size_t) (nl - buf), &frame) < 0) return NULL;
        if (json_object_object_get_ex(frame, "result", &res)) json_object_get(res);
        json_object_put(frame);
        return res;
}

/* The world's tasks that ended other than done (as its daemon, or else its
 * durable state, tasks.json with its journal, says), one line each (tf_status_why), and how many still ran
 * or waited: why a case failed is often there, whatever its assertion
 * printed. Before the kill: the daemon answers. */
static void report_tasks(FILE *out, const char *root) {
        _cleanup_free_ char *path = strdup_printf("%s/state", root);
        _cleanup_close_ int dfd = path ? open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        json_object *arr = NULL;
        if (dfd < 0 || state_journal_read_json(dfd, &arr) < 0) return;
        size_t n = json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
        size_t shown = 0, more = 0, active = 0;
        for (size_t i = 0; i < n; i++) {
                json_object *rec = json_object_array_get_idx(arr, i);
                const char *st = json_get_string(rec, "status");
                if (streq_ptr(st, "done")) continue;
                /* a live answer only for those the record does not show
                 * settled: a soak's world holds hundreds */
                _cleanup_json_ json_object *live = NULL;
                if (!st || streq(st, "running") || streq(st, "queued")) {
                        live = live_status(root, strempty(json_get_string(rec, "id")));
                        if (live) rec = live;
                        st = json_get_string(rec, "status");
                }
                if (streq_ptr(st, "done")) continue;
                if (!st || streq(st, "running") || streq(st, "queued")) {
                        active++;
                        continue;
                }
                if (shown++ >= 10) {
                        more++;
                        continue;
                }
                _cleanup_free_ char *why = tf_status_why(rec);
                fprintf(out, "harness:   task %s: %s\n", strempty(json_get_string(rec, "id")), why);
        }
        if (more) fprintf(out, "harness:   and %zu more task(s) that did not end done\n", more);
        if (active) fprintf(out, "harness:   %zu task(s) still queued or running\n", active);
        json_object_put(arr);
}

/* The guard process: waits for a byte (the world was freed) or the pipe's
 * end (the case's process is gone). */
__attribute__((noreturn)) static void guard_run(const char *root, int fd, bool keep) {
        char c;
        ssize_t n;
        do
                n = read(fd, &c, 1);
        while (n < 0 && errno == EINTR);
        if (n == 1) _exit(EXIT_SUCCESS);
        /* the report in one write: guards of other cases may speak at once */
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        if (!out) out = stderr;
        fprintf(out,
                "harness: the test case ended without freeing its world %s (a failed assertion or a timeout ends "
                "the case at once)\n",
                root);
        report_tasks(out, root);
        _cleanup_free_ char *names = NULL;
        int killed = tf_world_kill_all(root, &names);
        fprintf(out, "harness:   killed %d of its processes%s%s\n", killed, killed ? ": " : "", strempty(names));
        int r = keep ? 0 : tf_world_remove(root);
        fprintf(out, "harness:   %s%s\n",
                keep ? "kept the world (TASKFERRY_TEST_KEEP)" : r < 0 ? "could not remove it: " : "removed it",
                keep || r >= 0 ? "" : strerror(-r));
        if (out != stderr && fclose(out) == 0) (void) loop_write(STDERR_FILENO, text, len);
        _exit(EXIT_SUCCESS);
}

int tf_guard_start(const char *root) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) return -errno;
        bool keep = getenv("TASKFERRY_TEST_KEEP");
        /* its own session: Check kills the case's process group after the
         * case; detached: no test waits for it or reaps it by accident;
         * stdin and stdout on /dev/null, stderr the case's (the note goes to
         * the test's output), no other fd (not the write ends of other
         * worlds' guards, nor Check's or ctest's pipes) */
        int stdio[3] = {-1, -1, STDERR_FILENO};
        int keep_fds[] = {p[0]};
        pid_t pid;
        int r = safe_fork_full("tf-world-guard", stdio, keep_fds, ELEMENTSOF(keep_fds),
                               FORK_RESET_SIGNALS | FORK_CLOSE_ALL_FDS | FORK_NEW_SESSION | FORK_REARRANGE_STDIO |
                                       FORK_DETACH,
                               &pid);
        if (r < 0) {
                close(p[0]), close(p[1]);
                return r;
        }
        if (r == 0) guard_run(root, p[0], keep);
        close(p[0]);
        return p[1];
}

void tf_guard_release(int fd) {
        if (fd < 0) return;
        ssize_t n;
        do
                n = write(fd, "d", 1);
        while (n < 0 && errno == EINTR);
        close(fd);
}
