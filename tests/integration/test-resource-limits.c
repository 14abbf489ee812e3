/* Per-task resource limits (taskferryd(8) "RESOURCE
 * LIMITS") where no systemd user manager runs — the integration tests' and
 * CI's host: the limits are validated, recorded on the task and capped for
 * a nested dispatch, the worker runs in its process group (no `unit`), and
 * system.health / `taskferry doctor` say which limits hold instead (a
 * cgroup of the task's own, or rlimits and taskferry's count,
 * task-limits.h); hostile workers meet them. The scope itself is the e2e
 * case tests/e2e/cases/20-scope.sh. */

#include <check.h>
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"
#include "fileio.h"

/* a world whose user bus cannot exist: no manager, whatever the host has */
static tf_world *world_without_manager(void) {
        tf_world *w = tf_world_new(NULL);
        char *bus = strdup_printf("unix:path=%s/no-such-bus", w->root);
        tf_world_setenv(w, "DBUS_SESSION_BUS_ADDRESS", bus);
        free(bus);
        return w;
}

static int64_t jint(json_object *o, const char *key) {
        int64_t v = -1;
        ck_assert_msg(json_get_int64(o, key, &v), "no integer %s in %s", key, json_to_line(o, NULL));
        return v;
}

START_TEST(no_manager_runs_in_a_process_group_and_says_so) {
        tf_world *w = world_without_manager();
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *limits[] = {"--memory-max", "64M", "--tasks-max", "100", NULL};
        char *id = tf_shell_done(w, repo, limits, "echo hi > out.txt", NULL);
        json_object *o = tf_status_full(w, id);
        ck_assert_int_eq(jint(o, "memoryMax"), 64 << 20);
        ck_assert_int_eq(jint(o, "tasksMax"), 100);
        json_object *unit = NULL;
        ck_assert_msg(!json_object_object_get_ex(o, "unit", &unit) || !unit, "a unit without a manager: %s",
                      json_to_line(o, NULL));
        json_object_put(o);

        json_object *hf = tf_rpc(w, "task.stats", "{}"), *h = tf_result(hf);
        json_object *rl = json_get_object(h, "resourceLimits");
        ck_assert_ptr_nonnull(rl);
        ck_assert(!json_get_bool(rl, "enforced", true));
        ck_assert_ptr_nonnull(tf_jstr(rl, "reason"));
        ck_assert_int_eq(jint(rl, "tasksMax"), 4096);
        ck_assert_int_eq(jint(rl, "cpuWeight"), 100);
        ck_assert_int_gt(jint(rl, "memoryMax"), 0);
        ck_assert_str_eq(tf_jstr(rl, "slice"), "taskferry.slice");
        json_object_put(hf);

        const char *doc[] = {"doctor", NULL};
        tf_run dr = tf_cli(w, NULL, NULL, doc);
        ck_assert_int_eq(dr.exit_code, 0);
        ck_assert_msg(strstr(dr.out, "resource limits are not held by a systemd scope"), "doctor: %s", dr.out);
        tf_run_done(&dr);
        free(id);
        free(repo);
        tf_world_free(w);
}
END_TEST

/* settings: TASKFERRY_TASK_* env beats config.json, which beats the default */
START_TEST(settings_from_env_and_config) {
        tf_world *w = world_without_manager();
        free(tf_shf(w, NULL, "mkdir -p %s/taskferry && printf '{\"taskMemoryMax\": \"2G\", \"taskTasksMax\": 77, "
                             "\"taskCpuWeight\": 40}' > %s/taskferry/config.json",
                    w->cfg, w->cfg));
        tf_world_setenv(w, "TASKFERRY_TASK_TASKS_MAX", "99");
        char *repo = tf_repo_new(w, NULL, NULL);
        char *id = tf_shell_settled(w, repo, NULL, "true", NULL);
        json_object *o = tf_status_full(w, id);
        ck_assert_int_eq(jint(o, "memoryMax"), INT64_C(2) << 30);
        ck_assert_int_eq(jint(o, "tasksMax"), 99);
        json_object_put(o);
        json_object *hf = tf_rpc(w, "task.stats", "{}"), *h = tf_result(hf);
        json_object *rl = json_get_object(h, "resourceLimits");
        ck_assert_int_eq(jint(rl, "cpuWeight"), 40);
        ck_assert_int_eq(jint(rl, "memoryHigh"), (INT64_C(2) << 30) / 10 * 9);
        json_object_put(hf);
        free(id);
        free(repo);
        tf_world_free(w);
}
END_TEST

START_TEST(malformed_memory_setting_fails_the_start) {
        tf_world *w = world_without_manager();
        tf_world_setenv(w, "TASKFERRY_TASK_MEMORY_MAX", "lots");
        const char *l[] = {"list", NULL};
        tf_run r = tf_cli(w, NULL, NULL, l);
        ck_assert_int_ne(r.exit_code, 0);
        ck_assert_msg(strstr(r.out, "TASKFERRY_TASK_MEMORY_MAX must be a positive size") ||
                              strstr(r.err, "TASKFERRY_TASK_MEMORY_MAX must be a positive size"),
                      "%s %s", r.out, r.err);
        tf_run_done(&r);
        tf_world_free(w);
}
END_TEST

START_TEST(limits_are_validated) {
        tf_world *w = world_without_manager();
        char *repo = tf_repo_new(w, NULL, NULL);
        /* on the command line: the minimum, a size, a count */
        static const struct {
                const char *flag, *value;
                int exit_code; /* -1: any failure */
                const char *said;
        } refused[] = {
                {"--memory-max", "1M", -1, "memoryMax must be at least"},
                {"--memory-max", "lots", 2, "--memory-max"},
                {"--tasks-max", "2", 2, "--tasks-max"},
        };
        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                const char *argv[] = {"dispatch", "--executor", "shell", "--directory", repo, "--prompt", "true",
                                      refused[i].flag, refused[i].value, NULL};
                tf_run r = tf_cli(w, NULL, NULL, argv);
                ck_assert_msg(refused[i].exit_code < 0 ? r.exit_code != 0 : r.exit_code == refused[i].exit_code,
                              "%s %s: exit %d", refused[i].flag, refused[i].value, r.exit_code);
                ck_assert_msg(strstr(r.out, refused[i].said) || strstr(r.err, refused[i].said), "%s %s", r.out, r.err);
                tf_run_done(&r);
        }
        /* over the protocol: a positive integer, and the minimum */
        char *p = strdup_printf("{\"prompt\":\"true\",\"directory\":\"%s\",\"executor\":\"shell\",\"tasksMax\":-3}", repo);
        json_object *f = tf_rpc(w, "task.dispatch", p);
        ck_assert_ptr_nonnull(json_get_object(f, "error"));
        json_object_put(f);
        free(p);
        p = strdup_printf("{\"prompt\":\"true\",\"directory\":\"%s\",\"executor\":\"shell\",\"tasksMax\":3}", repo);
        f = tf_rpc(w, "task.dispatch", p);
        json_object *e = json_get_object(f, "error");
        ck_assert_ptr_nonnull(e);
        ck_assert_msg(strstr(strempty(tf_jstr(e, "message")), "tasksMax must be at least 8"), "%s", json_to_line(f, NULL));
        json_object_put(f);
        free(p);
        free(repo);
        tf_world_free(w);
}
END_TEST

/* A hostile worker cannot dispatch its way out of its limits: asking for
 * more is refused, and without flags its nested task inherits its limits. */
START_TEST(nested_dispatch_cannot_raise_a_limit) {
        tf_world *w = world_without_manager();
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *script =
                "taskferry dispatch --executor shell --directory . --prompt true --memory-max 1G >err1 2>&1; "
                "echo more-memory=$?; sed 's/^/err1: /' err1; rm -f err1; "
                "taskferry dispatch --executor shell --directory . --prompt true --tasks-max 500 >err2 2>&1; "
                "echo more-tasks=$?; sed 's/^/err2: /' err2; rm -f err2; "
                "child=$(taskferry dispatch --executor shell --directory . --prompt true | sed -n 's/^id: //p'); "
                "echo child=$child; "
                "less=$(taskferry dispatch --executor shell --directory . --prompt true --memory-max 32M | sed -n 's/^id: //p'); "
                "echo less=$less";
        const char *limits[] = {"--memory-max", "64M", "--tasks-max", "200", NULL};
        char *msg = tf_shell_done_output(w, repo, limits, script, NULL);
        ck_assert_msg(strstr(msg, "more-memory=1\n") && strstr(msg, "more-tasks=1\n"), "worker output: %s", msg);
        ck_assert_msg(strstr(msg, "exceeds the limit of the dispatching task"), "worker output: %s", msg);
        static const struct {
                const char *tag;
                int64_t mem, tasks;
        } kids[] = {{"child=", 64 << 20, 200}, {"less=", 32 << 20, 200}};
        for (size_t i = 0; i < 2; i++) {
                char *kid = tf_value_after(msg, kids[i].tag);
                ck_assert_msg(kid && startswith(kid, "oc_"), "worker output: %s", msg);
                json_object_put(tf_wait_settled(w, kid));
                json_object *ks = tf_status_full(w, kid);
                ck_assert_int_eq(jint(ks, "memoryMax"), kids[i].mem);
                ck_assert_int_eq(jint(ks, "tasksMax"), kids[i].tasks);
                json_object_put(ks);
                free(kid);
        }
        free(msg);
        free(repo);
        tf_world_free(w);
}
END_TEST

/* ---- hostile workers: every resource bounded without a user manager ----
 * Sized so that a limit that fails cannot take this shared machine: the
 * task gets 256 MiB and 64 processes; the fork flood stops at 1,500; the
 * allocation is 4 GiB. Each case prints what it measured. */

#define HOSTILE_MEM "256M"
#define HOSTILE_TASKS "64"

static uint64_t host_processes(void) {
        DIR *d = opendir("/proc");
        ck_assert_ptr_nonnull(d);
        uint64_t n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_name[0] >= '0' && de->d_name[0] <= '9') n++;
        closedir(d);
        return n;
}

static uint64_t host_mem_available(void) {
        char *m = tf_read("/proc/meminfo", NULL);
        const char *p = strstr(m, "MemAvailable:");
        ck_assert_ptr_nonnull(p);
        uint64_t kib = strtoull(p + 13, NULL, 10);
        free(m);
        return kib << 10;
}

/* The processes that still carry the task's id in their environment (the
 * worker's, the user's own: /proc/<pid>/environ of others cannot be read). */
static unsigned task_leftovers(const char *id) {
        DIR *d = opendir("/proc");
        ck_assert_ptr_nonnull(d);
        _cleanup_free_ char *needle = strdup_printf("TASKFERRY_TASK_ID=%s", id);
        unsigned n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
                _cleanup_free_ char *path = strdup_printf("/proc/%s/environ", de->d_name);
                _cleanup_free_ char *env = NULL;
                size_t len = 0;
                if (read_file(path, 1 << 20, &env, &len) < 0) continue;
                for (size_t i = 0; i + strlen(needle) <= len; i += strlen(env + i) + 1)
                        if (strcmp(env + i, needle) == 0) n++;
        }
        closedir(d);
        return n;
}

/* Run script as a hostile shell worker with the small limits; it must end
 * crashed with reason, its detail naming what: returns its status. The
 * host's process count and available memory are where they were. */
static json_object *hostile(tf_world *w, const char *repo, const char *const extra[], const char *script,
                            const char *reason, const char *names, const char *what) {
        uint64_t procs0 = host_processes(), mem0 = host_mem_available();
        uint64_t t0 = now_ms();
        json_object *st = NULL;
        char *id = tf_shell_settled(w, repo, extra, script, &st);
        uint64_t took = now_ms() - t0;
        tf_assert_status(st, id, "crashed");
        const char *r = tf_jstr(st, "failureReason"), *detail = tf_jstr(st, "failureDetail");
        _cleanup_free_ char *why = tf_status_why(st);
        ck_assert_msg(streq_ptr(r, reason), "%s: %s", what, why);
        ck_assert_msg(detail && strstr(detail, names), "%s: the detail does not name %s: %s", what, names, why);
        unsigned left = task_leftovers(id);
        /* a shared machine: other work comes and goes (the worker's 1,500
         * or 4 GiB would stay); what is not back within 15 s is a leak */
        uint64_t procs1 = host_processes(), mem1 = host_mem_available();
        for (int i = 0; i < 150 && (procs1 >= procs0 + 200 || mem1 + (UINT64_C(1) << 30) <= mem0); i++) {
                usleep(100 * 1000);
                procs1 = host_processes();
                mem1 = host_mem_available();
        }
        fprintf(stderr,
                "%s: crashed %s in %llu ms (%s); host processes %llu -> %llu, MemAvailable %llu MiB -> %llu MiB, %u "
                "left of the task\n",
                what, r, (unsigned long long) took, detail, (unsigned long long) procs0, (unsigned long long) procs1,
                (unsigned long long) (mem0 >> 20), (unsigned long long) (mem1 >> 20), left);
        ck_assert_msg(left == 0, "%s: %u processes of the task are left", what, left);
        ck_assert_msg(procs1 < procs0 + 200, "%s: %llu processes on the host, %llu before", what,
                      (unsigned long long) procs1, (unsigned long long) procs0);
        ck_assert_msg(mem1 + (UINT64_C(1) << 30) > mem0, "%s: %llu MiB available, %llu MiB before", what,
                      (unsigned long long) (mem1 >> 20), (unsigned long long) (mem0 >> 20));
        free(id);
        return st;
}

/* What dispatch says of a task's limits here (the words of task-limits.h). */
static char *task_limits_said(tf_world *w, const char *repo) {
        const char *argv[] = {"dispatch", "--executor", "shell", "--directory", repo, "--prompt", "true",
                              "--memory-max", HOSTILE_MEM, "--tasks-max", HOSTILE_TASKS, "--json", NULL};
        json_object *d = tf_cli_json(w, argv, 0);
        char *said = strdup(strempty(tf_jstr(d, "limits")));
        json_object_put(tf_wait_settled(w, tf_jstr(d, "id")));
        json_object_put(d);
        return said;
}

/* A fork flood of 1,500 processes and an allocation of 4 GiB, at once and
 * little by little: each ends the task at its limit. */
START_TEST(hostile_forks_and_memory_end_the_task) {
        tf_world *w = world_without_manager();
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *limits[] = {"--memory-max", HOSTILE_MEM, "--tasks-max", HOSTILE_TASKS, NULL};
        json_object_put(hostile(w, repo, limits,
                                "i=0; while [ $i -lt 1500 ]; do sleep 600 & i=$((i+1)); done; wait",
                                "tasks_limit_exceeded", "64 processes", "fork flood"));
        /* an exponential bomb only where the kernel holds the count (as root
         * without a cgroup only taskferry's count does, and a bomb on a
         * loaded machine can outrun it: not on this shared one) */
        _cleanup_free_ char *said = task_limits_said(w, repo);
        if (!strstr(said, "counted by taskferry every 100 ms (processes every"))
                json_object_put(hostile(w, repo, limits, "f() { f & f & wait; }; f", "tasks_limit_exceeded",
                                        "64 processes", "fork bomb"));
        else
                fprintf(stderr, "fork bomb: not run: only taskferry's count bounds root's processes here\n");
        json_object_put(hostile(w, repo, limits, "perl -e '$x = \"x\" x (4 * 1024**3); print length $x'",
                                "memory_limit_exceeded", "256.0 MiB", "4 GiB at once"));
        json_object_put(hostile(w, repo, limits,
                                "perl -e 'my @a; for (1..256) { push @a, \"y\" x (16 << 20) }; print scalar @a'",
                                "memory_limit_exceeded", "256.0 MiB", "4 GiB by 16 MiB"));
        free(repo);
        tf_world_free(w);
}
END_TEST

/* 4 GB into /tmp (and /var/tmp): a tmpfs is memory; it holds at most the
 * smaller of the disk budget and the memory limit, and its use counts in
 * the disk budget: the task ends disk_quota_exceeded. */
START_TEST(hostile_tmp_fill_is_over_the_disk_budget) {
        tf_world *w = world_without_manager();
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *limits[] = {"--memory-max", HOSTILE_MEM, "--tasks-max", HOSTILE_TASKS, "--disk-max", "128M", NULL};
        static const char *const dirs[] = {"/tmp", "/var/tmp"};
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                _cleanup_free_ char *script = strdup_printf("head -c 4000000000 /dev/zero > %s/fill", dirs[i]);
                _cleanup_free_ char *what = strdup_printf("4 GB into %s", dirs[i]);
                json_object *st = hostile(w, repo, limits, script, "disk_quota_exceeded", dirs[i], what);
                json_object_put(st);
        }
        free(repo);
        tf_world_free(w);
}
END_TEST

/* A 5 GiB log flood (3 GiB without a newline, then 2 GiB of lines) is
 * kept to its budget (TASKFERRY_TASK_LOG_MAX, 256 MiB by default), counted
 * in the disk budget; `result` answers with the final message intact. */
START_TEST(hostile_log_flood_is_capped) {
        tf_world *w = world_without_manager();
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *script = "head -c 3221225472 /dev/zero | tr '\\0' x >&2; "
                             "yes 'a line of the flood, and more words to fill it up' | head -c 2147483648 >&2; "
                             "echo THE-FINAL-MESSAGE";
        uint64_t t0 = now_ms();
        json_object *st = NULL;
        char *id = tf_shell_settled(w, repo, NULL, script, &st);
        uint64_t ran = now_ms() - t0;
        tf_assert_status(st, id, "done");
        const char *log = tf_jstr(st, "logPath");
        ck_assert_ptr_nonnull(log);
        struct stat sb;
        ck_assert_int_eq(stat(log, &sb), 0);
        ck_assert_msg((uint64_t) sb.st_size <= (UINT64_C(256) << 20) + (UINT64_C(8) << 20), "the log holds %lld bytes",
                      (long long) sb.st_size);
        uint64_t t1 = now_ms();
        char *msg = tf_task_message(w, id);
        uint64_t took = now_ms() - t1;
        ck_assert_str_eq(msg, "THE-FINAL-MESSAGE\n");
        _cleanup_free_ char *text = tf_shf(w, NULL, "grep -c 'taskferry-shim: the log is over its budget' '%s'; "
                                                    "grep -c 'taskferry-shim: a line over' '%s'", log, log);
        fprintf(stderr, "log flood: 5 GiB written in %llu ms; the log holds %.1f MiB; result answered in %llu ms; "
                        "markers (budget, line cut): %s\n",
                (unsigned long long) ran, (double) sb.st_size / 1048576.0, (unsigned long long) took, text);
        ck_assert_msg(startswith(text, "1\n1"), "markers: %s", text);
        free(msg);
        json_object_put(st);
        free(id);
        free(repo);
        tf_world_free(w);
}
END_TEST

/* dispatch's reply, status and doctor say which limits hold, in words. */
START_TEST(limits_are_said_in_words) {
        tf_world *w = world_without_manager();
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *argv[] = {"dispatch", "--executor", "shell", "--directory", repo, "--prompt", "true",
                              "--memory-max", HOSTILE_MEM, "--tasks-max", HOSTILE_TASKS, "--json", NULL};
        json_object *d = tf_cli_json(w, argv, 0);
        _cleanup_free_ char *said = strdup(strempty(tf_jstr(d, "limits")));
        ck_assert_msg(strstr(said, "memory 256.0 MiB") && strstr(said, "64 processes and threads"), "%s",
                      json_to_line(d, NULL));
        bool root = geteuid() == 0;
        ck_assert_msg(strstr(said, "counted by taskferry") || strstr(said, "memory.max"), "%s", said);
        if (strstr(said, "counted by taskferry"))
                ck_assert_msg(root ? strstr(said, "root is exempt from RLIMIT_NPROC") != NULL
                                   : strstr(said, "held by the kernel (RLIMIT_NPROC in its own user namespace)") != NULL,
                              "%s", said);
        fprintf(stderr, "limits (%s): %s\n", root ? "root" : "unprivileged", said);
        char *id = strdup(tf_jstr(d, "id"));
        json_object_put(d);
        json_object_put(tf_wait_settled(w, id));
        json_object *o = tf_status_full(w, id);
        ck_assert_str_eq(strempty(tf_jstr(o, "limits")), said);
        json_object_put(o);
        const char *doc[] = {"doctor", NULL};
        tf_run dr = tf_cli(w, NULL, NULL, doc);
        ck_assert_int_eq(dr.exit_code, 0);
        ck_assert_msg(strstr(dr.out, "they hold as: ") && strstr(dr.out, "processes and threads"), "doctor: %s", dr.out);
        tf_run_done(&dr);
        free(id);
        free(repo);
        tf_world_free(w);
}
END_TEST

/* The sandbox's other in-memory places. bwrap's /dev is a tmpfs without a
 * size (half the RAM), /dev/shm a dir on it, and so is bwrap's root (where
 * /run, /var and a home outside the system roots would be dirs): what a
 * worker wrote there would be memory that neither the disk budget nor the
 * memory count sees (tmpfs pages are no process's resident memory). 300 MB
 * into each, one at a time and removed at once, with a disk budget of 128M
 * and 256M of memory: each write must fail or end the task. */
START_TEST(hostile_fill_of_unsized_tmpfs) {
        tf_world *w = world_without_manager();
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *limits[] = {"--memory-max", HOSTILE_MEM, "--tasks-max", HOSTILE_TASKS, "--disk-max", "128M", NULL};
        static const char *const places[] = {"/dev/shm", "/dev", "/run", "/var", "/"};
        _cleanup_free_ char *holes = strdup("");
        for (size_t i = 0; i < ELEMENTSOF(places); i++) {
                _cleanup_free_ char *script = strdup_printf(
                        "d=%s; df -k \"$d\" | tail -1; if head -c 300000000 /dev/zero > \"$d/fill\" 2>/dev/null; then "
                        "echo \"wrote 300 MB into $d\"; fi; rm -f \"$d/fill\"; echo end",
                        places[i]);
                json_object *st = NULL;
                char *id = tf_shell_settled(w, repo, limits, script, &st);
                const char *status = tf_jstr(st, "status");
                _cleanup_free_ char *msg = streq_ptr(status, "done") ? tf_task_message(w, id) : NULL;
                fprintf(stderr, "%s: %s %s\n", places[i], strnull(status), strnull(msg));
                if (msg && strstr(msg, "wrote 300 MB")) {
                        char *h = strdup_printf("%s %s", holes, places[i]);
                        free(holes);
                        holes = h;
                }
                json_object_put(st);
                free(id);
        }
        free(repo);
        tf_world_free(w);
        ck_assert_msg(!*holes, "300 MB of memory into each of%s, over the 128M disk budget and the 256M memory limit",
                      holes);
}
END_TEST

/* Memory that is no process's resident memory. Without a cgroup, the
 * memory limit is the shim's count of the sandbox's memory; pages of a
 * memfd the worker writes to (never mapped) or of a SysV segment it
 * detached are memory all the same: the count adds open memfds, and the
 * sandbox's own IPC namespace caps SysV shared memory at the limit. 600 MiB
 * each with --memory-max 256M: the task must end memory_limit_exceeded or
 * its allocation be refused (its last line says "refused"), never "held",
 * and never anything else (a probe that did not run proves nothing). */
START_TEST(hostile_memory_outside_rss) {
        tf_world *w = world_without_manager();
        char *repo = tf_repo_new(w, NULL, NULL);
        const char *limits[] = {"--memory-max", HOSTILE_MEM, "--tasks-max", HOSTILE_TASKS, NULL};
        static const char *const scripts[] = {
                "python3 -c 'import os, time\n"
                "fd = os.memfd_create(\"x\")\n"
                "try:\n"
                "    for i in range(600): os.write(fd, b\"m\" * (1 << 20))\n"
                "except OSError as e:\n"
                "    print(\"refused:\", e, flush=True); raise SystemExit(0)\n"
                "print(\"held 600 MiB in a memfd\", flush=True)\n"
                "time.sleep(1)'",
                "perl -e 'use IPC::SysV qw(IPC_PRIVATE IPC_CREAT S_IRWXU IPC_RMID); $| = 1; "
                "my $id = shmget(IPC_PRIVATE, 600 << 20, IPC_CREAT | S_IRWXU); "
                "defined $id or do { print \"refused: shmget: $!\\n\"; exit 0 }; "
                "for my $i (0 .. 599) { shmwrite($id, \"s\" x (1 << 20), $i << 20, 1 << 20) "
                "or do { print \"refused: shmwrite: $!\\n\"; shmctl($id, IPC_RMID, 0); exit 0 } } "
                "print \"held 600 MiB in a SysV segment\\n\"; sleep 1; shmctl($id, IPC_RMID, 0)'",
        };
        _cleanup_free_ char *holes = strdup("");
        for (size_t i = 0; i < ELEMENTSOF(scripts); i++) {
                json_object *st = NULL;
                char *id = tf_shell_settled(w, repo, limits, scripts[i], &st);
                const char *status = tf_jstr(st, "status");
                const char *reason = tf_jstr(st, "failureReason");
                _cleanup_free_ char *msg = streq_ptr(status, "done") ? tf_task_message(w, id) : NULL;
                _cleanup_free_ char *why = tf_status_why(st);
                fprintf(stderr, "memory outside rss %zu: %s %s %s\n", i, strnull(status), strnull(msg), why);
                bool bounded = streq_ptr(reason, "memory_limit_exceeded") || (msg && startswith(msg, "refused"));
                if (!bounded) {
                        char *h = strdup_printf("%s [%zu: %s %s %s]", holes, i, strnull(status), strnull(msg), why);
                        free(holes);
                        holes = h;
                }
                json_object_put(st);
                free(id);
        }
        free(repo);
        tf_world_free(w);
        ck_assert_msg(!*holes, "600 MiB asked for past a 256M memory limit, not refused nor stopped:%s", holes);
}
END_TEST

int main(void) {
        Suite *s = suite_create("resource-limits");
        tf_add_tests(s, "no-manager", 240,
                     TF_TESTS(no_manager_runs_in_a_process_group_and_says_so, settings_from_env_and_config,
                              malformed_memory_setting_fails_the_start, limits_are_validated,
                              nested_dispatch_cannot_raise_a_limit, limits_are_said_in_words,
                              hostile_forks_and_memory_end_the_task, hostile_tmp_fill_is_over_the_disk_budget,
                              hostile_log_flood_is_capped));
        tf_add_tests(s, "memory-places", 240, TF_TESTS(hostile_fill_of_unsized_tmpfs, hostile_memory_outside_rss));
        return tf_run_suite(s);
}
