/* The shim's side of a task's limits (limit-watch.h). */
#include "limit-watch.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "cgroup-util.h"
#include "disk-budget.h"
#include "fileio.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"

/* how much of the log's end limit_watch_final reads */
#define FINAL_TAIL_BYTES 65536
/* how long limit_watch_done waits for the cgroup to empty */
#define CGROUP_EMPTY_WAIT_MS 2000

static int write_knob(const char *dir, const char *name, const char *text) {
        _cleanup_free_ char *p = strdup_printf("%s/%s", dir, name);
        if (!p) return -ENOMEM;
        _cleanup_close_ int fd = open(p, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) return -errno;
        return loop_write(fd, text, strlen(text));
}

static int read_knob(const char *dir, const char *name, char **ret) {
        _cleanup_free_ char *p = strdup_printf("%s/%s", dir, name);
        if (!p) return -ENOMEM;
        size_t len;
        return read_file(p, 65536, ret, &len);
}

static bool has_suffix(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);
        return a >= b && streq(s + a - b, suffix);
}

/* Is the shim already in the task's systemd scope (run/scope.h's name)? */
static bool in_task_scope(const char *task_id) {
        _cleanup_free_ char *data = NULL, *self = NULL;
        size_t len;
        if (read_file("/proc/self/cgroup", 65536, &data, &len) < 0 || cgroup_self_path(data, &self) < 0) return false;
        _cleanup_free_ char *unit = strdup_printf("/taskferry-task-%s.scope", task_id);
        return unit && has_suffix(self, unit);
}

static int make_cgroup(limit_watch *w, const char *parent, const char *task_id, char **ret_note) {
        _cleanup_free_ char *dir = strdup_printf("%s/taskferry-%u-%s", parent, (unsigned) geteuid(), task_id);
        if (!dir) return -ENOMEM;
        if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
                *ret_note = strdup_printf("cannot make the cgroup %s: %s", dir, strerror(errno));
                return *ret_note ? -EIO : -ENOMEM;
        }
        char num[32];
        int r = 0;
        if (w->memory_max) {
                snprintf(num, sizeof num, "%llu", (unsigned long long) w->memory_max);
                r = write_knob(dir, "memory.max", num);
                /* no swap to grow into past memory.max (absent without swap accounting) */
                if (r >= 0) (void) write_knob(dir, "memory.swap.max", "0");
        }
        if (r >= 0 && w->tasks_max) {
                snprintf(num, sizeof num, "%llu", (unsigned long long) w->tasks_max);
                r = write_knob(dir, "pids.max", num);
        }
        if (r < 0) {
                (void) rmdir(dir);
                *ret_note = strdup_printf("cannot set the limits of the cgroup %s: %s", dir, strerror(-r));
                return *ret_note ? -EIO : -ENOMEM;
        }
        w->cgroup = TAKE_PTR(dir);
        return 0;
}

int limit_watch_prepare(limit_watch *w, const launch_limits *l, const char *task_id, const char *cgroup_root,
                        char **ret_note) {
        *w = (limit_watch) {.mode = _TASK_LIMITS_MODE_INVALID, .root = geteuid() == 0, .sandbox_proc_fd = -1};
        *ret_note = NULL;
        if (!l || (!l->memory_max && !l->tasks_max)) return 0;
        w->memory_max = l->memory_max;
        w->tasks_max = l->tasks_max;
        if (in_task_scope(task_id)) {
                w->mode = TASK_LIMITS_SCOPE;
                return 0;
        }
        TaskLimitsProbe p;
        int r = task_limits_probe(cgroup_root, &p);
        if (r < 0) return r;
        w->mode = TASK_LIMITS_RLIMIT;
        if (p.mode == TASK_LIMITS_CGROUP) {
                r = make_cgroup(w, p.parent, task_id, ret_note);
                if (r >= 0) w->mode = TASK_LIMITS_CGROUP;
        }
        task_limits_probe_done(&p);
        return r == -ENOMEM ? r : 0;
}

bool limit_watch_needs_userns(const limit_watch *w) {
        return w->mode == TASK_LIMITS_RLIMIT && !w->root && !w->no_nproc && w->tasks_max;
}

int limit_watch_enter_cgroup(const limit_watch *w) {
        return w->mode == TASK_LIMITS_CGROUP ? write_knob(w->cgroup, "cgroup.procs", "0") : 0;
}

bool limit_watch_wants_ipc(const limit_watch *w) { return w->mode == TASK_LIMITS_RLIMIT && w->memory_max; }

int limit_watch_enter_ipc(const limit_watch *w, int stderr_fd) {
        if (!limit_watch_wants_ipc(w)) return 0;
        if (unshare(CLONE_NEWIPC) < 0) return -errno;
        uint64_t page = (uint64_t) sysconf(_SC_PAGESIZE);
        char max[32], pages[32];
        snprintf(max, sizeof max, "%llu", (unsigned long long) w->memory_max);
        snprintf(pages, sizeof pages, "%llu", (unsigned long long) (w->memory_max / page));
        static const char *const names[] = {"shmmax", "shmall", "shm_rmid_forced"};
        const char *values[] = {max, pages, "1"};
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                int r = write_knob("/proc/sys/kernel", names[i], values[i]);
                if (r < 0)
                        dprintf(stderr_fd, "taskferry-shim: warning: cannot set kernel.%s of the sandbox's IPC "
                                           "namespace: %s; its SysV shared memory is not bounded by the memory limit\n",
                                names[i], strerror(-r));
        }
        return 0;
}

int limit_watch_set_rlimits(const limit_watch *w) {
        if (w->mode != TASK_LIMITS_RLIMIT) return 0;
        if (w->tasks_max && !w->root && !w->no_nproc) {
                struct rlimit rl = {.rlim_cur = w->tasks_max, .rlim_max = w->tasks_max};
                if (setrlimit(RLIMIT_NPROC, &rl) < 0) return -errno;
        }
        return 0;
}

void limit_watch_start(limit_watch *w, pid_t worker, uint64_t now) {
        w->worker = worker;
        w->next_ms = now;
}

int limit_watch_timeout(const limit_watch *w, uint64_t now) {
        if (w->tripped || w->worker <= 0 || (w->mode != TASK_LIMITS_CGROUP && w->mode != TASK_LIMITS_RLIMIT)) return -1;
        return w->next_ms <= now ? 0 : (int) (w->next_ms - now);
}

/* ---- the process tree ---- */

typedef struct proc_entry {
        pid_t pid, ppid;
        uint64_t threads, rss_pages;
        bool in;
} proc_entry;

/* /proc/<pid>/stat: after the last ')': state ppid ... field 20 num_threads, field 24 rss */
static int read_stat(int proc_fd, const char *name, proc_entry *e) {
        char path[64], buf[1024];
        snprintf(path, sizeof path, "%s/stat", name);
        _cleanup_close_ int fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) return -errno;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        if (n <= 0) return -EIO;
        buf[n] = 0;
        char *p = strrchr(buf, ')');
        if (!p) return -EIO;
        /* p+2: field 3 (state) */
        unsigned long long f[24] = {0};
        int field = 3;
        for (char *t = p + 2; *t && field <= 24;) {
                char *end;
                if (field == 3) {
                        t++;
                } else {
                        f[field - 1] = strtoull(t, &end, 10);
                        t = end;
                }
                while (*t == ' ') t++;
                field++;
        }
        e->pid = (pid_t) atoi(name);
        e->ppid = (pid_t) f[3];
        e->threads = f[19];
        e->rss_pages = f[23];
        return 0;
}

static int cmp_pid(const void *a, const void *b) {
        pid_t x = ((const proc_entry *) a)->pid, y = ((const proc_entry *) b)->pid;
        return x < y ? -1 : x > y;
}

static proc_entry *find_entry(proc_entry *v, size_t n, pid_t pid) {
        proc_entry key = {.pid = pid};
        return bsearch(&key, v, n, sizeof *v, cmp_pid);
}

/* Read every process of the procfs at proc_fd into *ret (at most max, then
 * the count goes on without reading). Returns the number of processes. */
static ssize_t read_procs(int proc_fd, size_t max, proc_entry **ret, size_t *ret_n) {
        DIR *d = fdopendir(dup(proc_fd));
        if (!d) return -errno;
        rewinddir(d);
        size_t n = 0, cap = 64, count = 0;
        proc_entry *v = malloc(cap * sizeof *v);
        if (!v) {
                closedir(d);
                return -ENOMEM;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!isdigit((unsigned char) de->d_name[0])) continue;
                count++;
                if (n >= max) continue;
                if (n == cap) {
                        proc_entry *nv = realloc(v, 2 * cap * sizeof *v);
                        if (!nv) continue;
                        v = nv;
                        cap *= 2;
                }
                if (read_stat(proc_fd, de->d_name, &v[n]) >= 0) v[n++].in = false;
        }
        closedir(d);
        *ret = v;
        *ret_n = n;
        return (ssize_t) count;
}

static void sum_in(const proc_entry *v, size_t n, uint64_t *ret_tasks, uint64_t *ret_rss) {
        uint64_t tasks = 0, rss = 0, page = (uint64_t) sysconf(_SC_PAGESIZE);
        for (size_t i = 0; i < n; i++)
                if (v[i].in) {
                        tasks += v[i].threads ? v[i].threads : 1;
                        rss += v[i].rss_pages * page;
                }
        *ret_tasks = tasks;
        *ret_rss = rss;
}

/* The bytes held by the memfds the marked processes have open, each file
 * once: a memfd written to and never mapped is no process's resident memory,
 * and no tmpfs size bounds it. One mapped as well counts in both. */
static uint64_t memfd_bytes(int proc_fd, const proc_entry *v, size_t n) {
        struct { dev_t dev; ino_t ino; } seen[256];
        size_t n_seen = 0;
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++) {
                if (!v[i].in) continue;
                char path[64];
                snprintf(path, sizeof path, "%d/fd", (int) v[i].pid);
                int dfd = openat(proc_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dfd < 0) continue;
                DIR *d = fdopendir(dfd);
                if (!d) {
                        close(dfd);
                        continue;
                }
                for (struct dirent *de; (de = readdir(d));) {
                        if (!isdigit((unsigned char) de->d_name[0])) continue;
                        char target[32];
                        ssize_t k = readlinkat(dfd, de->d_name, target, sizeof target - 1);
                        if (k < 7) continue;
                        target[k] = 0;
                        struct stat st;
                        if (!startswith(target, "/memfd:") || fstatat(dfd, de->d_name, &st, 0) < 0) continue;
                        bool dup = false;
                        for (size_t j = 0; j < n_seen && !dup; j++)
                                dup = seen[j].dev == st.st_dev && seen[j].ino == st.st_ino;
                        if (dup) continue;
                        if (n_seen < ELEMENTSOF(seen)) seen[n_seen++] = (typeof(seen[0])) {st.st_dev, st.st_ino};
                        total += (uint64_t) st.st_blocks * 512;
                }
                closedir(d);
        }
        return total;
}

int proc_tree_measure(pid_t pid, size_t max_procs, uint64_t *ret_tasks, uint64_t *ret_rss) {
        _cleanup_close_ int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (proc_fd < 0) return -errno;
        proc_entry *v = NULL;
        size_t n = 0;
        ssize_t k = read_procs(proc_fd, SIZE_MAX, &v, &n);
        if (k < 0) return (int) k;
        qsort(v, n, sizeof *v, cmp_pid);
        proc_entry *top = find_entry(v, n, pid);
        if (!top) {
                free(v);
                return -ENOENT;
        }
        /* a process is in the tree when a parent up its chain is pid; each
         * chain is climbed once, what it finds marked on the way down (the
         * array is sorted, so a climb is a binary search a step) */
        enum { UNKNOWN, IN, OUT };
        uint8_t *state = calloc(n ? n : 1, 1);
        size_t *chain = malloc((n ? n : 1) * sizeof *chain);
        if (!state || !chain) {
                free(state), free(chain), free(v);
                return -ENOMEM;
        }
        state[top - v] = IN;
        size_t marked = 0;
        for (size_t i = 0; i < n && marked < max_procs; i++) {
                size_t depth = 0, at = i;
                uint8_t found = UNKNOWN;
                while (found == UNKNOWN) {
                        if (state[at] != UNKNOWN) {
                                found = state[at];
                                break;
                        }
                        chain[depth++] = at;
                        proc_entry *up = v[at].ppid > 0 && v[at].ppid != v[at].pid ? find_entry(v, n, v[at].ppid) : NULL;
                        if (!up || depth >= n) {
                                found = OUT;
                                break;
                        }
                        at = (size_t) (up - v);
                }
                for (size_t c = 0; c < depth; c++) state[chain[c]] = found;
                if (found == IN) marked++;
        }
        for (size_t i = 0; i < n; i++) v[i].in = state[i] == IN;
        sum_in(v, n, ret_tasks, ret_rss);
        *ret_rss += memfd_bytes(proc_fd, v, n);
        free(state);
        free(chain);
        free(v);
        return 0;
}

/* The sandbox's own procfs (bwrap's --proc /proc, of its pid namespace)
 * lists exactly the sandbox's processes: counting its entries is cheap, and
 * only when they are fewer than the limit are their stats read. */
static int sandbox_measure(int proc_fd, uint64_t tasks_max, uint64_t *ret_tasks, uint64_t *ret_rss) {
        proc_entry *v = NULL;
        size_t n = 0;
        size_t max = tasks_max ? (size_t) tasks_max : SIZE_MAX;
        ssize_t count = read_procs(proc_fd, max, &v, &n);
        if (count < 0) return (int) count;
        for (size_t i = 0; i < n; i++) v[i].in = true;
        sum_in(v, n, ret_tasks, ret_rss);
        *ret_rss += memfd_bytes(proc_fd, v, n);
        if ((uint64_t) count > *ret_tasks) *ret_tasks = (uint64_t) count;
        free(v);
        return 0;
}

pid_t proc_sandbox_pid(pid_t worker) {
        pid_t init = proc_first_child(worker);
        pid_t cmd = init > 0 ? proc_first_child(init) : init;
        if (cmd <= 0) return cmd;
        char root[64];
        snprintf(root, sizeof root, "/proc/%d/root", (int) cmd);
        struct stat a, b;
        if (stat(root, &a) < 0 || stat("/", &b) < 0) return -errno;
        return a.st_dev == b.st_dev && a.st_ino == b.st_ino ? -ENOENT : cmd;
}

pid_t proc_first_child(pid_t parent) {
        _cleanup_close_ int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (proc_fd < 0) return -errno;
        DIR *d = fdopendir(dup(proc_fd));
        if (!d) return -errno;
        pid_t found = -ENOENT;
        struct dirent *de;
        while ((de = readdir(d)))
                if (isdigit((unsigned char) de->d_name[0])) {
                        proc_entry e;
                        if (read_stat(proc_fd, de->d_name, &e) >= 0 && e.ppid == parent) {
                                found = e.pid;
                                break;
                        }
                }
        closedir(d);
        return found;
}

/* ---- checks ---- */

static int trip(limit_watch *w, const char *reason, char *detail, const char **ret_reason, char **ret_detail) {
        if (!detail) return -ENOMEM;
        w->tripped = true;
        *ret_reason = reason;
        *ret_detail = detail;
        return 1;
}

static int check_cgroup(limit_watch *w, const char **ret_reason, char **ret_detail) {
        char a[32];
        _cleanup_free_ char *mev = NULL, *pev = NULL;
        uint64_t v = 0;
        if (read_knob(w->cgroup, "memory.events", &mev) >= 0 && cgroup_keyed_counter(mev, "oom_kill", &v) >= 0 && v > 0)
                return trip(w, TASK_LIMITS_MEMORY_REASON,
                            strdup_printf("the kernel's OOM killer stopped a process of the worker at its memory limit "
                                          "of %s (memory.max of the cgroup %s)",
                                          disk_size_format(w->memory_max, a), w->cgroup),
                            ret_reason, ret_detail);
        if (read_knob(w->cgroup, "pids.events", &pev) >= 0 && cgroup_keyed_counter(pev, "max", &v) >= 0 && v > 0)
                return trip(w, TASK_LIMITS_TASKS_REASON,
                            strdup_printf("the worker reached its limit of %llu processes and threads: the kernel "
                                          "refused %llu fork%s (pids.max of the cgroup %s)",
                                          (unsigned long long) w->tasks_max, (unsigned long long) v, v == 1 ? "" : "s",
                                          w->cgroup),
                            ret_reason, ret_detail);
        return 0;
}

/* The sandbox's procfs, once bwrap made it (-1 until then, or without a sandbox). */
static void find_sandbox_proc(limit_watch *w) {
        if (w->sandbox_proc_fd >= 0 || !w->sandboxed) return;
        pid_t cmd = proc_sandbox_pid(w->worker);
        if (cmd <= 0) return;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/root/proc", (int) cmd);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct statfs sf;
        struct stat a, b;
        /* a procfs of its own: not ours, which lists the host's processes */
        if (fd < 0 || fstatfs(fd, &sf) < 0 || sf.f_type != PROC_SUPER_MAGIC || fstat(fd, &a) < 0 ||
            stat("/proc", &b) < 0 || a.st_dev == b.st_dev)
                return;
        w->sandbox_proc_fd = TAKE_FD(fd);
}

static int check_tree(limit_watch *w, const char **ret_reason, char **ret_detail) {
        char a[32], b[32];
        uint64_t tasks = 0, rss = 0;
        size_t max = w->tasks_max ? (size_t) w->tasks_max * 4 + 256 : 65536;
        find_sandbox_proc(w);
        int r = w->sandbox_proc_fd >= 0 ? sandbox_measure(w->sandbox_proc_fd, w->tasks_max, &tasks, &rss)
                                        : proc_tree_measure(w->worker, max, &tasks, &rss);
        if (r < 0) return 0;
        /* bwrap itself, outside its sandbox's pid namespace, counts too (in
         * the user namespace RLIMIT_NPROC counts in) */
        if (w->sandbox_proc_fd >= 0) tasks++;
        if (tasks > w->peak_tasks) w->peak_tasks = tasks;
        if (rss > w->peak_rss) w->peak_rss = rss;
        /* where RLIMIT_NPROC binds, the kernel refuses the fork that would
         * pass it, and the one forking is not counted yet: one short is at it */
        uint64_t at = w->tasks_max && !w->root && !w->no_nproc && w->tasks_max > 1 ? w->tasks_max - 1 : w->tasks_max;
        if (w->tasks_max && tasks >= at)
                return trip(w, TASK_LIMITS_TASKS_REASON,
                            strdup_printf("the worker reached its limit of %llu processes and threads (%llu counted%s)",
                                          (unsigned long long) w->tasks_max, (unsigned long long) tasks,
                                          w->root ? "; root is exempt from RLIMIT_NPROC, taskferry's count stopped it"
                                                  : ", RLIMIT_NPROC"),
                            ret_reason, ret_detail);
        if (w->memory_max && rss > w->memory_max)
                return trip(w, TASK_LIMITS_MEMORY_REASON,
                            strdup_printf("the worker's processes held %s of memory, over its memory limit of %s",
                                          disk_size_format(rss, a), disk_size_format(w->memory_max, b)),
                            ret_reason, ret_detail);
        return 0;
}

int limit_watch_check(limit_watch *w, uint64_t now, const char **ret_reason, char **ret_detail) {
        *ret_reason = NULL;
        *ret_detail = NULL;
        if (limit_watch_timeout(w, now) != 0) return 0;
        uint64_t t0 = mono_ms();
        int r = w->mode == TASK_LIMITS_CGROUP ? check_cgroup(w, ret_reason, ret_detail) : check_tree(w, ret_reason, ret_detail);
        /* a scan of many processes is not repeated at once */
        uint64_t took = mono_ms() - t0, iv = took * 10;
        if (iv < TASK_LIMITS_WATCH_MS) iv = TASK_LIMITS_WATCH_MS;
        if (iv > TASK_LIMITS_WATCH_MAX_MS) iv = TASK_LIMITS_WATCH_MAX_MS;
        /* where the count is the only bound on processes (root, no cgroup),
         * it keeps its pace whatever it costs: a fork bomb doubles between
         * two counts; the sandbox's own procfs keeps each count cheap */
        if (w->mode == TASK_LIMITS_RLIMIT && w->root && w->tasks_max) iv = TASK_LIMITS_WATCH_ROOT_MS;
        w->next_ms = now + iv;
        return r;
}

static bool mem_case_find(const char *hay, size_t n, const char *needle) {
        size_t k = strlen(needle);
        for (size_t i = 0; i + k <= n; i++)
                if (strncasecmp(hay + i, needle, k) == 0) return true;
        return false;
}

int limit_watch_final(limit_watch *w, const char *log_path, const char **ret_reason, char **ret_detail) {
        *ret_reason = NULL;
        *ret_detail = NULL;
        bool nproc = w->tasks_max && !w->root && !w->no_nproc;
        if (w->tripped || w->mode == TASK_LIMITS_CGROUP) {
                /* the kernel's count is exact: look once more */
                return w->tripped || w->mode != TASK_LIMITS_CGROUP ? 0 : check_cgroup(w, ret_reason, ret_detail);
        }
        if (w->mode != TASK_LIMITS_RLIMIT || !nproc) return 0;
        _cleanup_close_ int log_fd = open(log_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
        struct stat st;
        if (log_fd < 0 || fstat(log_fd, &st) < 0) return 0;
        off_t from = st.st_size > FINAL_TAIL_BYTES ? st.st_size - FINAL_TAIL_BYTES : 0;
        _cleanup_free_ char *buf = malloc(FINAL_TAIL_BYTES);
        if (!buf) return -ENOMEM;
        ssize_t n = pread(log_fd, buf, FINAL_TAIL_BYTES, from);
        if (n <= 0) return 0;
        static const char *const forks[] = {"Cannot fork", "fork: Resource temporarily unavailable", "fork failed",
                                            "Resource temporarily unavailable"};
        for (size_t i = 0; nproc && i < ELEMENTSOF(forks); i++)
                if (mem_case_find(buf, (size_t) n, forks[i]))
                        return trip(w, TASK_LIMITS_TASKS_REASON,
                                    strdup_printf("a fork of the worker failed at its limit of %llu processes and "
                                                  "threads (RLIMIT_NPROC; the log says \"%s\"; %llu counted at most)",
                                                  (unsigned long long) w->tasks_max, forks[i],
                                                  (unsigned long long) w->peak_tasks),
                                    ret_reason, ret_detail);
        return 0;
}

void limit_watch_done(limit_watch *w) {
        w->sandbox_proc_fd = safe_close(w->sandbox_proc_fd);
        if (w->cgroup) {
                /* what is left of the worker (a daemonized grandchild) goes with it */
                if (write_knob(w->cgroup, "cgroup.kill", "1") < 0) {
                        _cleanup_free_ char *procs = NULL;
                        if (read_knob(w->cgroup, "cgroup.procs", &procs) >= 0)
                                for (char *p = procs; *p;) {
                                        pid_t pid = (pid_t) strtol(p, &p, 10);
                                        if (pid > 0) (void) kill(pid, SIGKILL);
                                        while (*p == '\n') p++;
                                        if (pid <= 0) break;
                                }
                }
                uint64_t until = mono_ms() + CGROUP_EMPTY_WAIT_MS;
                while (rmdir(w->cgroup) < 0 && errno == EBUSY && mono_ms() < until) usleep(10000);
                free(w->cgroup);
                w->cgroup = NULL;
        }
}
