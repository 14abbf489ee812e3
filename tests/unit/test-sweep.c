/* sweep.c: the boot sweeps over a task table the test builds, on real
 * directories: what each sweep removes and keeps, that nothing is followed,
 * that entries of another user or with a mount below them are left alone,
 * that removal is a rename into the trash emptied by a detached remover the
 * sweep does not wait for; and the daemon's adapter, which refuses to sweep
 * after tasks.json failed to load. */

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/manager.h"
#include "core/store.h"
#include "core/task.h"
#include "daemon-fixture.h"
#include "json-util.h"
#include "run/sweep.h"
#include "unit.h"
#include "fileio.h"
#include "fs-util.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "time-util.h"

/* <base>/state/{outputs,prompts,tasks}, <base>/overlays (the configured
 * overlay root), <base>/tmp2 (a root only a record names), <base>/precious
 * (outside every swept dir: what symlinks point at). */
static char *base;
static tf_paths paths;

static char *at(const char *rel) { return tf_path(base, rel); }

static void mkdirs(const char *rel) { tf_mkdirs(base, rel); }

/* A file (and the dirs above it). */
static void put(const char *rel, const char *content) {
        _cleanup_free_ char *p = at(rel);
        char *slash = strrchr(p, '/');
        *slash = 0;
        ck_assert_int_eq(mkdir_p(p, 0700), 0);
        *slash = '/';
        ck_assert_int_eq(write_file_atomic(p, content, strlen(content), 0600), 0);
}

static void symlink_at(const char *target_rel, const char *link_rel) { tf_symlink(base, target_rel, link_rel); }

static bool exists(const char *rel) {
        _cleanup_free_ char *p = at(rel);
        struct stat st;
        return lstat(p, &st) == 0;
}

static char *content(const char *rel) {
        _cleanup_free_ char *p = at(rel);
        char *data = NULL;
        size_t len = 0;
        ck_assert_int_ge(read_file(p, 1 << 20, &data, &len), 0);
        return data;
}

/* Each of names (dir/<name>, NULL-terminated) is still there, or gone. */
static void check_there(const char *dir, const char *const *names, bool there) {
        for (; *names; names++) {
                _cleanup_free_ char *rel = strdup_printf("%s/%s", dir, *names);
                ck_assert_msg(exists(rel) == there, "%s was %s", rel, there ? "removed" : "kept");
        }
}

/* Entries of the dir (".", ".." left out); -1 when it cannot be opened. */
static int n_entries(const char *rel) {
        _cleanup_free_ char *p = at(rel);
        DIR *d = opendir(p);
        if (!d) return -1;
        int n = 0;
        for (struct dirent *de; (de = readdir(d));)
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..")) n++;
        closedir(d);
        return n;
}

/* Every trash dir the sweeps may have made, emptied (20 s at most): the
 * remover is detached, nobody else waits for it. */
static const char *trashes[] = {"overlays/" SWEEP_TRASH_NAME, "tmp2/" SWEEP_TRASH_NAME,
                                "state/outputs/" SWEEP_TRASH_NAME, "state/prompts/" SWEEP_TRASH_NAME,
                                "state/tasks/" SWEEP_TRASH_NAME};

static void wait_trash_empty(const char *rel) {
        uint64_t end = mono_ms() + 20000;
        for (;;) {
                int n = n_entries(rel);
                if (n <= 0) return; /* empty, or none was made (or it is not a dir) */
                ck_assert_msg(mono_ms() < end, "%s still holds %d entries", rel, n);
                usleep(10 * 1000);
        }
}

static void setup(void) {
        base = tf_tmpdir_new("test-sweep");
        const char *dirs[] = {"state/outputs", "state/prompts", "state/tasks", "overlays", "tmp2", "precious"};
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) mkdirs(dirs[i]);
        put("precious/file", "keep me");
        paths = (tf_paths) {.state_dir = at("state"), .overlay_tmp_root = at("overlays")};
}

static void teardown(void) {
        for (size_t i = 0; i < ELEMENTSOF(trashes); i++) {
                struct stat st;
                _cleanup_free_ char *p = at(trashes[i]);
                if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) wait_trash_empty(trashes[i]);
        }
        base = tf_tmpdir_free(base);
        free(paths.state_dir);
        free(paths.overlay_tmp_root);
        paths = (tf_paths) {0};
}

/* ---- a task table of the test's ---- */

#define TASKS_MAX 16
typedef struct Table {
        SweepTask tasks[TASKS_MAX];
        char *owned[TASKS_MAX][2]; /* the overlay paths the entries point at */
        size_t n;
        bool released[TASKS_MAX];
} Table;

static void table_get(void *userdata, size_t i, SweepTask *ret) {
        Table *t = userdata;
        ck_assert_uint_lt(i, t->n);
        *ret = t->tasks[i];
}

static void table_released(void *userdata, size_t i) {
        Table *t = userdata;
        ck_assert_uint_lt(i, t->n);
        ck_assert_msg(!t->released[i], "overlay_released called twice for %s", t->tasks[i].id);
        t->released[i] = true;
}

/* Add a task; overlay_rel (under base) and tmp_root_rel may be NULL. Returns its index. */
static size_t add(Table *t, const char *id, const char *status, const char *cs, const char *overlay_rel,
                  const char *tmp_root_rel) {
        ck_assert_uint_lt(t->n, TASKS_MAX);
        size_t i = t->n++;
        t->owned[i][0] = overlay_rel ? at(overlay_rel) : NULL;
        t->owned[i][1] = tmp_root_rel ? at(tmp_root_rel) : NULL;
        t->tasks[i] = (SweepTask) {
                .id = id,
                .status = status,
                .changeset_status = cs,
                .overlay_root = t->owned[i][0],
                .overlay_tmp_root = t->owned[i][1],
        };
        return i;
}

static void table_done(Table *t) {
        for (size_t i = 0; i < t->n; i++) free(t->owned[i][0]), free(t->owned[i][1]);
}

static int sweep(Table *t) {
        SweepTable st = {.n_tasks = t->n, .get = table_get, .overlay_released = table_released, .userdata = t};
        return sweep_run(&paths, &st);
}

/* The sweep with the daemon's log (stderr) captured into *ret_log. */
static int sweep_logged(Table *t, char **ret_log) {
        _cleanup_free_ char *p = at("sweep.log");
        int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        fflush(stderr);
        int saved = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
        ck_assert_int_ge(saved, 0);
        ck_assert_int_eq(dup2(fd, STDERR_FILENO), STDERR_FILENO);
        log_reset_stream();
        int r = sweep(t);
        fflush(stderr);
        ck_assert_int_eq(dup2(saved, STDERR_FILENO), STDERR_FILENO);
        log_reset_stream();
        close(saved);
        close(fd);
        size_t len = 0;
        ck_assert_int_ge(read_file(p, 1 << 20, ret_log, &len), 0);
        (void) !write(STDERR_FILENO, *ret_log, len); /* still shown */
        ck_assert_int_eq(unlink(p), 0);
        return r;
}

/* The log has a line with each of the strings (a NULL-terminated list). */
static void check_logged(const char *log, const char *const *parts) {
        _cleanup_free_ char *copy = strdup(log);
        ck_assert_ptr_nonnull(copy);
        char *save = NULL;
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                bool all = true;
                for (const char *const *p = parts; *p && all; p++) all = strstr(line, *p) != NULL;
                if (all) return;
        }
        ck_abort_msg("no line with %s%s%s in the log:\n%s", parts[0], parts[1] ? " ... " : "", parts[1] ? parts[1] : "",
                     log);
}

/* An overlay root as the launch makes one, with a file in its upper dir. */
static void overlay_at(const char *rel) {
        _cleanup_free_ char *upper = strdup_printf("%s/upper/main", rel), *work = strdup_printf("%s/work/main", rel),
                            *file = strdup_printf("%s/upper/main/changed.txt", rel);
        mkdirs(upper);
        mkdirs(work);
        put(file, "a change");
}

/* ---- the overlay sweep ---- */

START_TEST(overlays) {
        Table t = {0};
        /* kept: a pending changeset's, a running and a queued task's, each
         * naming its entry as its overlay */
        size_t pend = add(&t, "pend", "done", "pending", "overlays/taskferry-cow-pend", "overlays");
        size_t run = add(&t, "run", "running", "none", "overlays/taskferry-cow-run", "overlays");
        size_t queue = add(&t, "queue", "queued", NULL, "overlays/taskferry-cow-queue", "overlays");
        /* removed, and the task's overlay released: settled tasks' leftovers */
        size_t acc = add(&t, "acc", "done", "accepted", "overlays/taskferry-cow-acc", "overlays");
        size_t rej = add(&t, "rej", "crashed", "rejected", "overlays/taskferry-cow-rej", "overlays");
        size_t none = add(&t, "none", "cancelled", "none", "overlays/taskferry-cow-none", "overlays");
        /* a pending task whose overlay is in another root (one only its record
         * names): that one is kept, an entry of its id here is not its own */
        size_t moved = add(&t, "moved", "done", "pending", "tmp2/taskferry-cow-moved", "tmp2");
        /* a pending task with no overlay recorded (a no-overlay snapshot root) */
        size_t bare = add(&t, "bare", "done", "pending", NULL, NULL);
        /* settled tasks whose overlay had gone before: released; a pending one
         * whose overlay is gone: not (its changeset is still to decide) */
        size_t gone = add(&t, "gone", "done", "accepted", "overlays/taskferry-cow-gone", "overlays");
        size_t pendgone = add(&t, "pendgone", "done", "pending", "overlays/taskferry-cow-pendgone", "overlays");
        const char *entries[] = {"pend", "run", "queue", "acc", "rej", "none", "moved", "bare", "ghost"};
        for (size_t i = 0; i < ELEMENTSOF(entries); i++) {
                _cleanup_free_ char *rel = strdup_printf("overlays/taskferry-cow-%s", entries[i]);
                overlay_at(rel);
        }
        overlay_at("tmp2/taskferry-cow-moved");
        overlay_at("tmp2/taskferry-cow-ghost2");
        /* not an overlay's name: never looked at */
        overlay_at("overlays/unrelated");
        overlay_at("overlays/taskferry-cowx");

        /* acc, rej, none, moved (here), bare, ghost; ghost2 in tmp2 */
        ck_assert_int_eq(sweep(&t), 7);
        const char *kept[] = {"taskferry-cow-pend/upper/main/changed.txt", "taskferry-cow-run/upper/main/changed.txt",
                              "taskferry-cow-queue/upper/main/changed.txt", "unrelated/upper/main/changed.txt",
                              "taskferry-cowx", NULL};
        check_there("overlays", kept, true);
        const char *removed[] = {"taskferry-cow-acc",   "taskferry-cow-rej",  "taskferry-cow-none",
                                 "taskferry-cow-moved", "taskferry-cow-bare", "taskferry-cow-ghost", NULL};
        check_there("overlays", removed, false);
        ck_assert(exists("tmp2/taskferry-cow-moved/upper/main/changed.txt"));
        ck_assert(!exists("tmp2/taskferry-cow-ghost2"));
        bool want_released[TASKS_MAX] = {0};
        want_released[acc] = want_released[rej] = want_released[none] = want_released[gone] = true;
        for (size_t i = 0; i < t.n; i++)
                ck_assert_msg(t.released[i] == want_released[i], "%s: overlay_released %s", t.tasks[i].id,
                              t.released[i] ? "called" : "not called");
        (void) pend, (void) run, (void) queue, (void) moved, (void) bare, (void) pendgone;
        /* moved, not deleted on the loop: the remover empties each root's trash */
        wait_trash_empty("overlays/" SWEEP_TRASH_NAME);
        wait_trash_empty("tmp2/" SWEEP_TRASH_NAME);
        table_done(&t);
}
END_TEST

/* ---- the state dir's sweeps ---- */

START_TEST(output_dirs) {
        Table t = {0};
        add(&t, "known", "done", "accepted", NULL, NULL);
        add(&t, "live", "running", "none", NULL, NULL);
        put("state/outputs/known/report.md", "kept forever");
        put("state/outputs/live/x", "x");
        put("state/outputs/ghost/report.md", "orphan");
        put("state/outputs/stray", "a file of no task");
        ck_assert_int_eq(sweep(&t), 2);
        ck_assert(exists("state/outputs/known/report.md"));
        ck_assert(exists("state/outputs/live/x"));
        ck_assert(!exists("state/outputs/ghost"));
        ck_assert(!exists("state/outputs/stray"));
        table_done(&t);
}
END_TEST

START_TEST(prompt_files) {
        Table t = {0};
        add(&t, "q", "queued", "none", NULL, NULL);
        add(&t, "r", "running", "none", NULL, NULL);
        add(&t, "d", "done", "none", NULL, NULL);
        add(&t, "u", "unknown", "pending", NULL, NULL);
        const char *files[] = {"q.prompt.txt", "r.prompt.txt", "d.prompt.txt", "u.prompt.txt", "ghost.prompt.txt",
                               "notes.txt",    ".prompt.txt",  "q.prompt.txt.bak"};
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                _cleanup_free_ char *rel = strdup_printf("state/prompts/%s", files[i]);
                put(rel, "the prompt");
        }
        ck_assert_int_eq(sweep(&t), 3);
        const char *kept[] = {"q.prompt.txt", "r.prompt.txt", "notes.txt", ".prompt.txt", "q.prompt.txt.bak", NULL};
        check_there("state/prompts", kept, true);
        const char *removed[] = {"d.prompt.txt", "u.prompt.txt", "ghost.prompt.txt", NULL};
        check_there("state/prompts", removed, false);
        table_done(&t);
}
END_TEST

START_TEST(task_dirs) {
        Table t = {0};
        add(&t, "q", "queued", "none", NULL, NULL);
        add(&t, "r", "running", "none", NULL, NULL);
        add(&t, "d", "done", "pending", NULL, NULL);
        put("state/tasks/q/pending-launch.json", "{}");
        put("state/tasks/q/.pending-launch.json-a1b2.tmp", "{");
        put("state/tasks/r/pending-launch.json", "{}");
        put("state/tasks/r/exit.json", "{}");
        put("state/tasks/d/pending-launch.json", "{}");
        put("state/tasks/d/.pending-launch.json-c3.tmp", "{");
        put("state/tasks/d/.pending-launch.json-c3", "not a temp file of one");
        put("state/tasks/d/launch.json", "{}");
        put("state/tasks/ghost/pending-launch.json", "{}");
        put("state/tasks/ghost/exit.json", "{}");
        /* ghost whole; q's temp file; d's launch request and temp file (a
         * running task keeps its request: its shim was never let go) */
        ck_assert_int_eq(sweep(&t), 4);
        ck_assert(!exists("state/tasks/ghost"));
        ck_assert(exists("state/tasks/q/pending-launch.json"));
        ck_assert(!exists("state/tasks/q/.pending-launch.json-a1b2.tmp"));
        ck_assert(exists("state/tasks/r/pending-launch.json"));
        ck_assert(exists("state/tasks/r/exit.json"));
        ck_assert(!exists("state/tasks/d/pending-launch.json"));
        ck_assert(!exists("state/tasks/d/.pending-launch.json-c3.tmp"));
        ck_assert(exists("state/tasks/d/.pending-launch.json-c3"));
        ck_assert(exists("state/tasks/d/launch.json"));
        table_done(&t);
}
END_TEST

/* ---- safety ---- */

START_TEST(symlinks_are_not_followed) {
        Table t = {0};
        add(&t, "known", "done", "none", NULL, NULL);
        put("precious/pending-launch.json", "{}");
        put("precious/.pending-launch.json-x.tmp", "{");
        symlink_at("precious", "overlays/taskferry-cow-ghost");
        symlink_at("precious", "state/outputs/ghost");
        symlink_at("precious/file", "state/prompts/ghost.prompt.txt");
        symlink_at("precious", "state/tasks/ghost");
        /* a known task's dir that is a symlink: what it points at is not its dir */
        symlink_at("precious", "state/tasks/known");
        ck_assert_int_eq(sweep(&t), 4);
        const char *links[] = {"overlays/taskferry-cow-ghost", "state/outputs/ghost", "state/prompts/ghost.prompt.txt",
                               "state/tasks/ghost", NULL};
        check_there(".", links, false);
        ck_assert(exists("state/tasks/known"));
        _cleanup_free_ char *c = content("precious/file");
        ck_assert_str_eq(c, "keep me");
        ck_assert(exists("precious/pending-launch.json"));
        ck_assert(exists("precious/.pending-launch.json-x.tmp"));
        ck_assert_int_eq(n_entries("precious"), 3);
        /* a link is unlinked, never moved: the trash holds nothing of precious */
        ck_assert_int_le(n_entries("overlays/" SWEEP_TRASH_NAME), 0);
        table_done(&t);
}
END_TEST

START_TEST(entries_of_another_user) {
        TF_ROOT_OR_SKIP("cannot make a file another user's");
        const uid_t other = 65534;
        Table t = {0};
        size_t left = add(&t, "left", "done", "accepted", "overlays/taskferry-cow-left", "overlays");
        overlay_at("overlays/taskferry-cow-ghost");
        overlay_at("overlays/taskferry-cow-left");
        put("state/outputs/ghost/x", "x");
        put("state/outputs/mine/x", "x");
        put("state/prompts/ghost.prompt.txt", "p");
        symlink_at("precious", "state/tasks/ghost");
        const char *theirs[] = {"overlays/taskferry-cow-ghost", "overlays/taskferry-cow-left", "state/outputs/ghost",
                                "state/prompts/ghost.prompt.txt", "state/tasks/ghost", NULL};
        for (const char *const *e = theirs; *e; e++) {
                _cleanup_free_ char *p = at(*e);
                ck_assert_int_eq(lchown(p, other, other), 0);
        }
        /* only ours goes; each of theirs is named in a warning */
        _cleanup_free_ char *log = NULL;
        ck_assert_int_eq(sweep_logged(&t, &log), 1);
        for (const char *const *e = theirs; *e; e++) {
                _cleanup_free_ char *p = at(*e);
                const char *parts[] = {"warning: boot sweep: not removing", p, "belongs to uid 65534, not to us", NULL};
                check_logged(log, parts);
        }
        ck_assert(!exists("state/outputs/mine"));
        check_there(".", theirs, true);
        ck_assert(exists("overlays/taskferry-cow-ghost/upper/main/changed.txt"));
        /* the settled task's overlay is still there: it is not released */
        ck_assert(!t.released[left]);
        table_done(&t);
}
END_TEST

/* Enter a mount namespace of our own (the mounts go with this test's
 * process) and mount a tmpfs on rel. false when this process cannot. */
static bool mount_tmpfs(const char *rel) {
        static bool own_ns;
        if (!own_ns) {
                if (geteuid() != 0) {
                        errno = EPERM;
                        return false;
                }
                if (unshare(CLONE_NEWNS) < 0) return false;
                if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) return false;
                own_ns = true;
        }
        _cleanup_free_ char *p = at(rel);
        return mount("tmpfs", p, "tmpfs", 0, "size=1m,mode=0700") == 0;
}

START_TEST(entries_with_a_mount_below) {
        Table t = {0};
        size_t left = add(&t, "left", "done", "rejected", "overlays/taskferry-cow-left", "overlays");
        overlay_at("overlays/taskferry-cow-ghost");
        overlay_at("overlays/taskferry-cow-left");
        mkdirs("overlays/taskferry-cow-at");
        overlay_at("overlays/taskferry-cow-free");
        mkdirs("state/outputs/ghost/deep/mnt");
        if (!mount_tmpfs("overlays/taskferry-cow-ghost/upper/main") || !mount_tmpfs("overlays/taskferry-cow-left/work") ||
            !mount_tmpfs("overlays/taskferry-cow-at") || !mount_tmpfs("state/outputs/ghost/deep/mnt")) {
                fprintf(stderr, "entries_with_a_mount_below: skipped (cannot mount a tmpfs here: %m)\n");
                table_done(&t);
                return;
        }
        put("overlays/taskferry-cow-at/inside", "on the tmpfs");
        /* only the one without a mount goes; each of the others is named
         * with its mount in a warning */
        _cleanup_free_ char *log = NULL;
        ck_assert_int_eq(sweep_logged(&t, &log), 1);
        const char *held[][2] = {{"overlays/taskferry-cow-ghost", "overlays/taskferry-cow-ghost/upper/main"},
                                 {"overlays/taskferry-cow-left", "overlays/taskferry-cow-left/work"},
                                 {"overlays/taskferry-cow-at", "overlays/taskferry-cow-at"},
                                 {"state/outputs/ghost", "state/outputs/ghost/deep/mnt"}};
        for (size_t i = 0; i < ELEMENTSOF(held); i++) {
                _cleanup_free_ char *entry = at(held[i][0]), *mnt = at(held[i][1]);
                _cleanup_free_ char *what = strdup_printf(" %s: %s is still mounted", entry, mnt);
                const char *parts[] = {"warning: boot sweep: not removing", what, NULL};
                check_logged(log, parts);
        }
        ck_assert(!exists("overlays/taskferry-cow-free"));
        ck_assert(exists("overlays/taskferry-cow-ghost/upper"));
        ck_assert(exists("overlays/taskferry-cow-ghost/work/main"));
        ck_assert(exists("overlays/taskferry-cow-left/upper/main/changed.txt"));
        ck_assert(exists("overlays/taskferry-cow-at/inside"));
        ck_assert(exists("state/outputs/ghost/deep/mnt"));
        ck_assert(!t.released[left]);
        const char *mnts[] = {"overlays/taskferry-cow-ghost/upper/main", "overlays/taskferry-cow-left/work",
                              "overlays/taskferry-cow-at", "state/outputs/ghost/deep/mnt"};
        for (size_t i = 0; i < ELEMENTSOF(mnts); i++) {
                _cleanup_free_ char *p = at(mnts[i]);
                ck_assert_int_eq(umount2(p, MNT_DETACH), 0);
        }
        table_done(&t);
}
END_TEST

/* The trash is a directory of ours or nothing is moved into it. */
START_TEST(trash_that_is_not_ours) {
        Table t = {0};
        overlay_at("overlays/taskferry-cow-ghost");
        symlink_at("precious", "overlays/" SWEEP_TRASH_NAME);
        ck_assert_int_eq(sweep(&t), 0);
        ck_assert(exists("overlays/taskferry-cow-ghost/upper/main/changed.txt"));
        ck_assert_int_eq(n_entries("precious"), 1);
        _cleanup_free_ char *p = at("overlays/" SWEEP_TRASH_NAME);
        ck_assert_int_eq(unlink(p), 0);
        table_done(&t);
}
END_TEST

/* The sweep only moves a doomed entry into its root's trash and returns; a
 * detached remover (nothing for the daemon to reap) empties the trash,
 * also of what a remover killed earlier left there, overlayfs's mode-000
 * work dir included. */
START_TEST(trash_remover_is_detached) {
        Table t = {0};
        /* enough files that removing them takes far longer than returning */
        enum { DIRS = 20, FILES = 1000 };
        for (int d = 0; d < DIRS; d++) {
                _cleanup_free_ char *rel = strdup_printf("overlays/taskferry-cow-big/upper/main/d%d", d);
                mkdirs(rel);
                _cleanup_free_ char *p = at(rel);
                _cleanup_close_ int dfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ck_assert_int_ge(dfd, 0);
                for (int f = 0; f < FILES; f++) {
                        char name[32];
                        snprintf(name, sizeof name, "f%d", f);
                        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                        ck_assert_int_ge(fd, 0);
                        close(fd);
                }
        }
        /* links inside the tree go themselves, their targets stay */
        symlink_at("precious", "overlays/taskferry-cow-big/upper/main/d0/dir-link");
        symlink_at("precious/file", "overlays/taskferry-cow-big/upper/main/file-link");
        mkdirs("overlays/taskferry-cow-big/work/main/work");
        _cleanup_free_ char *ww = at("overlays/taskferry-cow-big/work/main/work");
        ck_assert_int_eq(chmod(ww, 0), 0);
        put("overlays/" SWEEP_TRASH_NAME "/taskferry-cow-old-1234/upper/main/left", "a killed remover's leftover");

        ck_assert_int_eq(sweep(&t), 1);
        ck_assert(!exists("overlays/taskferry-cow-big"));
        /* returned before the remover was done: the moved entry is still in the trash */
        _cleanup_free_ char *trash = at("overlays/" SWEEP_TRASH_NAME);
        DIR *dir = opendir(trash);
        ck_assert_ptr_nonnull(dir);
        bool moved = false;
        for (struct dirent *de; (de = readdir(dir));) moved = moved || startswith(de->d_name, "taskferry-cow-big-");
        closedir(dir);
        ck_assert_msg(moved, "the sweep waited for the remover");
        /* and left no child of ours to reap */
        siginfo_t si;
        errno = 0;
        ck_assert_int_eq(waitid(P_ALL, 0, &si, WEXITED | WNOHANG), -1);
        ck_assert_int_eq(errno, ECHILD);
        wait_trash_empty("overlays/" SWEEP_TRASH_NAME);
        /* the trash dir itself stays */
        ck_assert_int_eq(n_entries("overlays/" SWEEP_TRASH_NAME), 0);
        _cleanup_free_ char *c = content("precious/file");
        ck_assert_str_eq(c, "keep me");
        ck_assert_int_eq(n_entries("precious"), 1);
        table_done(&t);
}
END_TEST

/* The remover never crosses into another filesystem: a mount inside what
 * is in the trash keeps its files. It empties the trash dirs one after the
 * other, the tasks dir's last: once that one is empty, it is done with the
 * overlays'. */
START_TEST(trash_remover_stays_on_its_filesystem) {
        Table t = {0};
        _cleanup_free_ char *left = at("overlays/" SWEEP_TRASH_NAME "/taskferry-cow-old-1");
        mkdirs("overlays/" SWEEP_TRASH_NAME "/taskferry-cow-old-1/upper/mnt");
        put("overlays/" SWEEP_TRASH_NAME "/taskferry-cow-old-1/upper/beside", "goes");
        if (!mount_tmpfs("overlays/" SWEEP_TRASH_NAME "/taskferry-cow-old-1/upper/mnt")) {
                fprintf(stderr, "trash_remover_stays_on_its_filesystem: skipped (cannot mount a tmpfs here: %m)\n");
                ck_assert_int_eq(rm_rf(left), 0);
                table_done(&t);
                return;
        }
        put("overlays/" SWEEP_TRASH_NAME "/taskferry-cow-old-1/upper/mnt/on-the-tmpfs", "stays");
        put("state/tasks/" SWEEP_TRASH_NAME "/last/file", "the last trash emptied");
        ck_assert_int_eq(sweep(&t), 0);
        wait_trash_empty("state/tasks/" SWEEP_TRASH_NAME);
        ck_assert(!exists("overlays/" SWEEP_TRASH_NAME "/taskferry-cow-old-1/upper/beside"));
        ck_assert(exists("overlays/" SWEEP_TRASH_NAME "/taskferry-cow-old-1/upper/mnt/on-the-tmpfs"));
        _cleanup_free_ char *mnt = at("overlays/" SWEEP_TRASH_NAME "/taskferry-cow-old-1/upper/mnt");
        ck_assert_int_eq(umount2(mnt, MNT_DETACH), 0);
        ck_assert_int_eq(rm_rf(left), 0);
        table_done(&t);
}
END_TEST

/* The remover of an unprivileged daemon: overlayfs leaves work/work at
 * mode 000, which only root could empty as it is. As root, the same sweep
 * as $TASKFERRY_TEST_USER (tools/test creates it; default taskferry-test). */
START_TEST(trash_remover_unprivileged) {
        TF_ROOT_OR_SKIP("trash_remover_is_detached ran unprivileged");
        const char *name = getenv("TASKFERRY_TEST_USER");
        struct passwd *pw = getpwnam(name && *name ? name : "taskferry-test");
        ck_assert_msg(pw, "as root this test needs an unprivileged user: set TASKFERRY_TEST_USER (tools/test creates "
                          "one) or create taskferry-test");
        mkdirs("u");
        _cleanup_free_ char *u = at("u");
        /* the user may enter (not list) the dirs above its own */
        ck_assert_int_eq(chmod(tf_suite_dir(), 0711), 0);
        ck_assert_int_eq(chmod(base, 0711), 0);
        ck_assert_int_eq(chown(u, pw->pw_uid, pw->pw_gid), 0);
        fflush(stderr);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                const char *fail = NULL;
                if (setgroups(0, NULL) < 0 || setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0)
                        fail = "cannot become the user";
                _cleanup_free_ char *root = strdup_printf("%s/overlays/taskferry-cow-ghost", u),
                                    *upper = strdup_printf("%s/upper/main", root),
                                    *uf = strdup_printf("%s/upper/main/f", root),
                                    *ww = strdup_printf("%s/work/main/work", root),
                                    *wf = strdup_printf("%s/work/main/work/#whiteout", root),
                                    *trash = strdup_printf("%s/overlays/" SWEEP_TRASH_NAME, u),
                                    *state = strdup_printf("%s/state", u), *ovl = strdup_printf("%s/overlays", u);
                /* work/work holds something and is mode 000 */
                if (!fail && (mkdir_p(upper, 0700) < 0 || write_file_atomic(uf, "x", 1, 0600) < 0 ||
                              mkdir_p(ww, 0700) < 0 || write_file_atomic(wf, "x", 1, 0600) < 0 || chmod(ww, 0) < 0 ||
                              mkdir_p(state, 0700) < 0))
                        fail = "cannot make the overlay";
                tf_paths up_paths = {.state_dir = state, .overlay_tmp_root = ovl};
                Table t = {0};
                SweepTable st = {.n_tasks = 0, .get = table_get, .overlay_released = table_released, .userdata = &t};
                if (!fail && sweep_run(&up_paths, &st) != 1) fail = "the sweep did not move the overlay";
                uint64_t end = mono_ms() + 20000;
                for (;;) {
                        if (fail) break;
                        DIR *d = opendir(trash);
                        int n = 0;
                        for (struct dirent *de; d && (de = readdir(d));)
                                n += !streq(de->d_name, ".") && !streq(de->d_name, "..");
                        if (d) closedir(d);
                        if (n == 0) break;
                        if (mono_ms() >= end) fail = "the trash was not emptied";
                        usleep(10 * 1000);
                }
                if (fail) fprintf(stderr, "trash_remover_unprivileged: %s\n", fail);
                _exit(fail ? 1 : 0);
        }
        int status = 0;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "as %s: see above", pw->pw_name);
        ck_assert(!exists("u/overlays/taskferry-cow-ghost"));
}
END_TEST

/* ---- the daemon's adapter ---- */

static Manager m;

static void put_tasks_json(const char *text) {
        _cleanup_free_ char *p = strdup_printf("%s/tasks.json", m.paths.state_dir);
        ck_assert_int_eq(write_file_atomic(p, text, strlen(text), 0600), 0);
}

static void manager_up(void) {
        tf_manager_setup(&m, "test-sweep");
        m.paths.overlay_tmp_root = strdup_printf("%s/overlays", m.paths.state_dir);
        const char *dirs[] = {"outputs/orphan", "outputs/k", "overlays/taskferry-cow-k/upper/main"};
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                _cleanup_free_ char *p = strdup_printf("%s/%s", m.paths.state_dir, dirs[i]);
                ck_assert_int_eq(mkdir_p(p, 0700), 0);
        }
}

static bool in_state(const char *rel) {
        _cleanup_free_ char *p = strdup_printf("%s/%s", m.paths.state_dir, rel);
        struct stat st;
        return lstat(p, &st) == 0;
}

static void manager_down(void) {
        _cleanup_free_ char *trash = strdup_printf("%s/overlays/" SWEEP_TRASH_NAME, m.paths.state_dir),
                            *otrash = strdup_printf("%s/outputs/" SWEEP_TRASH_NAME, m.paths.state_dir);
        const char *ts[] = {trash, otrash};
        for (size_t i = 0; i < ELEMENTSOF(ts); i++) {
                uint64_t end = mono_ms() + 20000;
                for (;;) {
                        DIR *d = opendir(ts[i]);
                        int n = 0;
                        for (struct dirent *de; d && (de = readdir(d));) n += de->d_name[0] != '.';
                        if (d) closedir(d);
                        if (n == 0) break;
                        ck_assert_msg(mono_ms() < end, "%s not emptied", ts[i]);
                        usleep(10 * 1000);
                }
        }
        free(m.paths.overlay_tmp_root);
        m.paths.overlay_tmp_root = NULL;
        tf_manager_teardown(&m);
}

/* After a failed load every entry would look orphaned: nothing is swept. */
START_TEST(manager_sweep_refuses_after_a_failed_load) {
        manager_up();
        put_tasks_json("[{\"id\":\"k\",");
        ck_assert_int_eq(manager_load_tasks(&m), 0);
        ck_assert_ptr_nonnull(m.store.load_error);
        ck_assert_int_eq(manager_sweep(&m), 0);
        ck_assert(in_state("outputs/orphan"));
        ck_assert(in_state("outputs/k"));
        ck_assert(in_state("overlays/taskferry-cow-k/upper/main"));
        manager_down();
}
END_TEST

/* The same dirs after a good load: the table decides, and a settled task
 * whose overlay went no longer names it (durably). */
START_TEST(manager_sweep_over_the_table) {
        manager_up();
        _cleanup_free_ char *text = strdup_printf(
                "[{\"id\":\"k\",\"directory\":\"/\",\"status\":\"done\",\"changesetStatus\":\"accepted\","
                "\"overlayDirs\":{\"root\":\"%s/taskferry-cow-k\",\"tmpRoot\":\"%s\"}}]",
                m.paths.overlay_tmp_root, m.paths.overlay_tmp_root);
        put_tasks_json(text);
        ck_assert_int_eq(manager_load_tasks(&m), 0);
        ck_assert_ptr_null(m.store.load_error);
        ck_assert_uint_eq(m.n_tasks, 1);
        ck_assert_int_eq(manager_sweep(&m), 2);
        ck_assert(!in_state("outputs/orphan"));
        ck_assert(in_state("outputs/k"));
        ck_assert(!in_state("overlays/taskferry-cow-k"));
        Task *k = m.tasks[0];
        ck_assert(task_record_has(&k->rec, TASK_KEY_overlay_dirs));
        ck_assert(!task_record_is_set(&k->rec, TASK_KEY_overlay_dirs));
        ck_assert(m.store.dirty);
        ck_assert_int_eq(manager_flush(&m), 0);
        _cleanup_free_ char *data = tf_durable_tasks_text(m.paths.state_dir);
        ck_assert_ptr_nonnull(strstr(data, "\"overlayDirs\": null"));
        manager_down();
}
END_TEST

TF_MAIN("sweep", "sweep", setup, teardown, 120, overlays, output_dirs, prompt_files, task_dirs,
        symlinks_are_not_followed, entries_of_another_user, entries_with_a_mount_below, trash_that_is_not_ours,
        trash_remover_is_detached, trash_remover_stays_on_its_filesystem, trash_remover_unprivileged,
        manager_sweep_refuses_after_a_failed_load, manager_sweep_over_the_table)
