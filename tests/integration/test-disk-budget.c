/* A worker cannot fill the host's disks: overlay upper and
 * work dirs live on real disk under the state dir; a worker past its disk
 * budget (--disk-max) or on a filesystem below its free-space floor is
 * stopped and its task crashes with failureReason "disk_quota_exceeded";
 * what it wrote stays extractable or is discarded cleanly, and a full
 * state-dir filesystem never blocks the next dispatch or another task's
 * settlement. Real daemon, shim, bwrap, overlayfs and git; `shell` workers. */

#include <check.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

#include "harness.h"
#include "json-util.h"
#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

static char *make_repo(tf_world *w) { return tf_repo_new(w, NULL, "printf 'base\\n' > base.txt"); }

/* The persisted record of a task, once tasks.json shows it settled. */
typedef struct rec_arg {
        const char *id;
        json_object *rec;
} rec_arg;

static bool record_settled(tf_world *w, void *arg) {
        rec_arg *a = arg;
        json_object *rec = tf_task_record(w, a->id);
        const char *st = json_get_string(rec, "status");
        if (!st || streq(st, "running") || streq(st, "queued")) {
                json_object_put(rec);
                return false;
        }
        json_object_put(a->rec);
        a->rec = rec;
        return true;
}

static json_object *settled_record(tf_world *w, const char *id) {
        json_object_put(tf_wait_settled(w, id));
        rec_arg a = {.id = id};
        ck_assert_msg(tf_wait_until(record_settled, w, &a, 10000), "task %s never settled in tasks.json", id);
        return a.rec;
}

/* A task writing text to file in repo: done, a pending changeset whose
 * accept lands the file. */
static void next_dispatch_lands(tf_world *w, const char *repo, const char *text, const char *file) {
        _cleanup_free_ char *script = strdup_printf("echo %s > %s", text, file);
        _cleanup_free_ char *id = tf_dispatch_shell(w, repo, NULL, script);
        json_object *rec = settled_record(w, id);
        ck_assert_str_eq(tf_jstr(rec, "status"), "done");
        ck_assert_str_eq(tf_jstr(rec, "changesetStatus"), "pending");
        json_object_put(rec);
        tf_accept_ok(w, id);
        ck_assert(tf_exists(tf_path(repo, file)));
}

static void check_disk_stop(json_object *rec, const char *budget_text) {
        ck_assert_str_eq(tf_jstr(rec, "status"), "crashed");
        ck_assert_str_eq(strempty(tf_jstr(rec, "failureReason")), "disk_quota_exceeded");
        const char *detail = strempty(tf_jstr(rec, "failureDetail"));
        ck_assert_msg(strstr(detail, budget_text), "detail does not name the budget: %s", detail);
}

/* Dense writes past --disk-max 50M: stopped near the budget, the task
 * crashes with disk_quota_exceeded, and what it wrote so far is a pending
 * changeset that accepts. */
TF_WORLD_TEST(disk_max_stops_dense_writer) {
        char *repo = make_repo(w);
        const char *budget50[] = {"--disk-max", "50M", NULL};
        char *id = tf_dispatch_shell(w, repo, budget50,
                                     "i=0; while [ $i -lt 200 ]; do head -c 1048576 /dev/zero > f$i; i=$((i+1)); sleep 0.05; done; "
                                     "echo finished");
        json_object *rec = settled_record(w, id);
        check_disk_stop(rec, "budget of 50.0 MiB");
        ck_assert_msg(strstr(strempty(tf_jstr(rec, "failureDetail")), "MiB in "), "%s", tf_jstr(rec, "failureDetail"));
        int64_t budget = 0;
        ck_assert(json_get_int64(rec, "diskMaxBytes", &budget));
        ck_assert_int_eq(budget, 50LL << 20);
        ck_assert_str_eq(tf_jstr(rec, "changesetStatus"), "pending");
        ck_assert_ptr_nonnull(tf_jstr(rec, "diffPath"));
        /* the overlay lives on real disk under the state dir */
        json_object *od = json_get_object(rec, "overlayDirs");
        ck_assert_ptr_nonnull(od);
        char *prefix = strdup_printf("%s/overlays/taskferry-cow-", w->state);
        ck_assert_msg(startswith(strempty(json_get_string(od, "root")), prefix), "%s", json_get_string(od, "root"));
        free(prefix);
        json_object_put(rec);
        char *reserve = strdup_printf("%s/tasks/%s/disk-reserve", w->state, id);
        ck_assert(!tf_exists(reserve)); /* released for exit.json */
        free(reserve);
        tf_accept_ok(w, id);
        /* stopped well before the 200 files: the budget, not the script, ended it */
        char *n = tf_shf(w, repo, "ls f* | wc -l");
        ck_assert_msg(atoi(n) >= 40 && atoi(n) < 120, "%s files landed", n);
        free(n);
        free(id), free(repo);
}
END_TEST

/* The executor homes and a git common dir's overlay count too: a worker
 * cannot park its bytes in $UV_CACHE_DIR or in git objects instead. */
TF_WORLD_TEST(disk_max_counts_homes_and_gitdir) {
        char *main_repo = tf_repo_new(w, "main", "echo b > f"), *wt = tf_worktree_add(w, main_repo, "wt", "x");
        static const char *const scripts[] = {
                "i=0; while [ $i -lt 200 ]; do head -c 1048576 /dev/urandom > \"$UV_CACHE_DIR/f$i\"; i=$((i+1)); "
                "sleep 0.05; done; echo finished",
                "i=0; while [ $i -lt 200 ]; do head -c 1048576 /dev/urandom | git hash-object -w --stdin >/dev/null; "
                "i=$((i+1)); sleep 0.05; done; echo finished",
        };
        for (size_t k = 0; k < 2; k++) {
                const char *budget30[] = {"--disk-max", "30M", NULL};
                char *id = tf_dispatch_shell(w, wt, budget30, scripts[k]);
                json_object *rec = settled_record(w, id);
                check_disk_stop(rec, "budget of 30.0 MiB");
                json_object_put(rec);
                free(id);
        }
        free(main_repo), free(wt);
}
END_TEST

/* A sparse giant counts its apparent size: stopped, and since extracting
 * 8 GiB of holes would take the settlement hostage, the changeset is
 * discarded cleanly (rejected, no overlay left). */
TF_WORLD_TEST(disk_max_stops_sparse_giant) {
        char *repo = make_repo(w);
        const char *budget50[] = {"--disk-max", "50M", NULL};
        uint64_t t0 = mono_ms();
        char *id = tf_dispatch_shell(w, repo, budget50, "echo kept > small.txt; truncate -s 8G big.bin && sleep 60");
        json_object *rec = settled_record(w, id);
        ck_assert_msg(mono_ms() - t0 < 40000, "the sparse writer was not stopped");
        check_disk_stop(rec, "budget of 50.0 MiB");
        ck_assert_msg(strstr(strempty(tf_jstr(rec, "failureDetail")), "GiB"), "%s", tf_jstr(rec, "failureDetail"));
        ck_assert_str_eq(tf_jstr(rec, "changesetStatus"), "rejected");
        ck_assert_msg(strstr(strempty(tf_jstr(rec, "changesetError")), "discarded"), "%s", tf_jstr(rec, "changesetError"));
        ck_assert(json_get_object(rec, "overlayDirs") == NULL);
        json_object_put(rec);
        char *left = tf_shf(w, NULL, "ls -A %s/overlays | grep -c taskferry-cow- || true", w->state);
        ck_assert_str_eq(left, "0");
        free(left);
        ck_assert(!tf_exists(tf_path(repo, "big.bin")));
        free(id), free(repo);
}
END_TEST

static bool is_root(void) { return geteuid() == 0; }

/* Mount a small tmpfs at dir, in a mount namespace of this test's own (the
 * daemon the CLI starts inherits it), so a failing test never leaves a
 * mount on the host. Root only. */
static void mount_small_tmpfs(const char *dir, const char *options) {
        ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
        ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
        ck_assert_int_eq(mkdir_p(dir, 0700), 0);
        ck_assert_msg(mount("tmpfs", dir, "tmpfs", 0, options) == 0, "mount tmpfs on %s: %m", dir);
}

/* Stop the world's daemon and take the tmpfs away again. */
static void unmount_small_tmpfs(tf_world *w, const char *dir) {
        pid_t pid = tf_daemon_pid(w);
        if (pid > 0) kill(pid, SIGTERM);
        for (int i = 0; i < 500 && pid > 0 && kill(pid, 0) == 0; i++) usleep(10000);
        ck_assert_int_eq(umount2(dir, MNT_DETACH), 0);
}

/* 3,000 empty files from one worker: its own extraction works and later
 * dispatches keep working. As root the runtime dir is a small tmpfs (2,000
 * inodes, like a crowded /run/user), where the overlay used to live. */
TF_WORLD_TEST(many_empty_files_extract) {
        bool mounted = false;
        if (is_root()) {
                mount_small_tmpfs(w->run, "size=8m,nr_inodes=2000,mode=0700");
                mounted = true;
        } else
                fprintf(stderr, "many_empty_files_extract: not root, the runtime dir stays on the test's disk\n");
        char *repo = make_repo(w);
        char *id = tf_dispatch_shell(w, repo, NULL,
                                     "mkdir scratch && cd scratch && i=0; while [ $i -lt 3000 ]; do : > e$i; i=$((i+1)); done; "
                                     "echo made");
        json_object *rec = settled_record(w, id);
        ck_assert_str_eq(tf_jstr(rec, "status"), "done");
        ck_assert_msg(tf_jstr(rec, "changesetError") == NULL, "%s", tf_jstr(rec, "changesetError"));
        ck_assert_str_eq(tf_jstr(rec, "changesetStatus"), "pending");
        json_object *od = json_get_object(rec, "overlayDirs");
        char *prefix = strdup_printf("%s/overlays/", w->state);
        ck_assert_msg(od && startswith(strempty(json_get_string(od, "root")), prefix), "overlay root %s",
                      od ? json_get_string(od, "root") : "none");
        free(prefix);
        json_object_put(rec);
        tf_accept_ok(w, id);
        char *n = tf_shf(w, repo, "ls scratch | wc -l");
        ck_assert_str_eq(n, "3000");
        free(n);
        /* and the next dispatch works */
        next_dispatch_lands(w, repo, "next", "next.txt");
        if (mounted) unmount_small_tmpfs(w, w->run);
        free(id), free(repo);
}
END_TEST

/* A worker creating files until a small state-dir filesystem is full: it is
 * stopped (disk_quota_exceeded) and settles; another task running meanwhile
 * settles with its changeset, and the next dispatch works. Needs a mount, so
 * root only. */
START_TEST(full_state_fs_blocks_nobody) {
        if (!is_root()) {
                fprintf(stderr, "full_state_fs_blocks_nobody: SKIPPED: mounting a small filesystem for the state "
                                "dir needs root\n");
                return;
        }
        tf_world *w = tf_world_new(NULL);
        mount_small_tmpfs(w->state, "size=64m,mode=0700");
        char *repo = make_repo(w);
        /* B: writes its change, then waits for a go file in its output dir */
        char *id_b = tf_dispatch_shell(w, repo, NULL,
                                       "echo from-b > b.txt; touch \"$TASKFERRY_OUTPUT_DIR/started\"; "
                                       "while [ ! -e \"$TASKFERRY_OUTPUT_DIR/go\" ]; do sleep 0.1; done; echo b-done");
        ck_assert(tf_wait_output(w, id_b, "started", 60000));
        /* its shim holds space for its exit.json */
        char *reserve_b = strdup_printf("%s/tasks/%s/disk-reserve", w->state, id_b);
        ck_assert(tf_exists(reserve_b));
        /* A: fills the filesystem (its budget is larger than the filesystem) */
        const char *budget1g[] = {"--disk-max", "1G", NULL};
        char *id_a = tf_dispatch_shell(w, repo, budget1g,
                                       "i=0; while head -c 1048576 /dev/zero > f$i; do i=$((i+1)); done; sleep 60");
        json_object *rec = settled_record(w, id_a);
        check_disk_stop(rec, "floor");
        /* settled cleanly: either a pending changeset or discarded without a
         * trace; and without anyone rejecting it, the filesystem has room again */
        char *cs = strdup(strempty(tf_jstr(rec, "changesetStatus")));
        ck_assert_msg(streq(cs, "pending") || streq(cs, "rejected"), "%s", cs);
        if (streq(cs, "rejected")) ck_assert(json_get_object(rec, "overlayDirs") == NULL);
        json_object_put(rec);
        struct statvfs sv;
        ck_assert_int_eq(statvfs(w->state, &sv), 0);
        ck_assert_msg((uint64_t) sv.f_bavail * sv.f_frsize > (32u << 20), "the state fs stayed full: %llu bytes free",
                      (unsigned long long) sv.f_bavail * sv.f_frsize);
        /* B settles with its changeset */
        tf_go(w, id_b);
        rec = settled_record(w, id_b);
        ck_assert_str_eq(tf_jstr(rec, "status"), "done");
        ck_assert_str_eq(tf_jstr(rec, "changesetStatus"), "pending");
        json_object_put(rec);
        ck_assert(!tf_exists(reserve_b));
        free(reserve_b);
        tf_accept_ok(w, id_b);
        char *b = tf_shf(w, repo, "cat b.txt");
        ck_assert_str_eq(b, "from-b");
        free(b);
        /* and the next dispatch */
        next_dispatch_lands(w, repo, "from-c", "c.txt");
        ck_assert(!tf_exists(tf_path(repo, "f0")));
        if (streq(cs, "pending")) {
                const char *rj[] = {"reject", id_a, NULL};
                tf_run r = tf_cli(w, NULL, NULL, rj);
                ck_assert_msg(r.exit_code == 0, "reject: %s %s", r.out, r.err);
                tf_run_done(&r);
        }
        free(cs);

        unmount_small_tmpfs(w, w->state);
        free(id_a), free(id_b), free(repo);
        tf_world_free(w);
}
END_TEST

/* The setting: TASKFERRY_TASK_DISK_MAX is the default budget. */
TF_WORLD_TEST_ENV(setting_sets_default_budget, "TASKFERRY_TASK_DISK_MAX=20M") {
        char *repo = make_repo(w);
        char *id = tf_dispatch_shell(w, repo, NULL,
                                     "i=0; while [ $i -lt 100 ]; do head -c 1048576 /dev/zero > f$i; i=$((i+1)); sleep 0.05; done");
        json_object *rec = settled_record(w, id);
        check_disk_stop(rec, "budget of 20.0 MiB");
        json_object_put(rec);
        free(id), free(repo);
}
END_TEST

/* Records made while overlays lived elsewhere (the old default,
 * <runtime>/overlay, here forced with TASKFERRY_OVERLAY_TMP_DIR) keep working
 * after the daemon restarts with the new default: accept and reject use the
 * recorded tmpRoot, and new tasks go under <state>/overlays. */
TF_WORLD_TEST(legacy_overlay_location_still_works) {
        char *legacy = strdup_printf("%s/overlay", w->run);
        tf_world_setenv(w, "TASKFERRY_OVERLAY_TMP_DIR", legacy);
        char *repo = make_repo(w);
        char *id1 = tf_dispatch_shell(w, repo, NULL, "echo one > one.txt");
        char *id2 = tf_dispatch_shell(w, repo, NULL, "echo two > two.txt");
        char *roots[2];
        char *ids[2] = {id1, id2};
        for (int i = 0; i < 2; i++) {
                json_object *rec = settled_record(w, ids[i]);
                ck_assert_str_eq(tf_jstr(rec, "changesetStatus"), "pending");
                json_object *od = json_get_object(rec, "overlayDirs");
                ck_assert_str_eq(strempty(json_get_string(od, "tmpRoot")), legacy);
                roots[i] = strdup(json_get_string(od, "root"));
                ck_assert(tf_exists(roots[i]));
                json_object_put(rec);
        }
        /* restart with the default location */
        tf_daemon_stop(w, SIGTERM);
        tf_world_setenv(w, "TASKFERRY_OVERLAY_TMP_DIR", "");
        /* the new location is masked inside the sandbox, like the state dir */
        char *probe = strdup_printf("if [ -e %s/overlays ]; then echo visible; else echo hidden; fi > three.txt", w->state);
        char *id3 = tf_dispatch_shell(w, repo, NULL, probe);
        json_object *rec = settled_record(w, id3);
        char *prefix = strdup_printf("%s/overlays/taskferry-cow-", w->state);
        ck_assert_msg(startswith(strempty(json_get_string(json_get_object(rec, "overlayDirs"), "root")), prefix), "%s",
                      json_get_string(json_get_object(rec, "overlayDirs"), "root"));
        json_object_put(rec);
        free(prefix);
        /* the old records still accept and reject, and leave nothing behind */
        ck_assert(tf_exists(roots[0]) && tf_exists(roots[1]));
        tf_accept_ok(w, id1);
        ck_assert(tf_exists(tf_path(repo, "one.txt")));
        ck_assert(!tf_exists(roots[0]));
        const char *rj[] = {"reject", id2, NULL};
        tf_run r = tf_cli(w, NULL, NULL, rj);
        ck_assert_msg(r.exit_code == 0, "reject: %s %s", r.out, r.err);
        tf_run_done(&r);
        ck_assert(!tf_exists(roots[1]));
        ck_assert(!tf_exists(tf_path(repo, "two.txt")));
        tf_accept_ok(w, id3);
        char *seen = tf_shf(w, repo, "cat three.txt");
        ck_assert_str_eq(seen, "hidden");
        free(seen), free(probe);
        free(roots[0]), free(roots[1]), free(id1), free(id2), free(id3), free(legacy), free(repo);
}
END_TEST

/* A worker cannot widen its nested tasks' budget past the default: a nested
 * dispatch with --disk-max 1T gets min(10 GiB, 1/4 of the filesystem). */
TF_WORLD_TEST(nested_dispatch_cannot_raise_budget) {
        char *repo = make_repo(w);
        char *script = strdup_printf("child=$(taskferry dispatch --executor shell --disk-max 1T --directory %s "
                                     "--prompt true | sed -n 's/^id: //p'); echo child=$child",
                                     repo);
        char *id = tf_dispatch_shell(w, repo, NULL, script);
        json_object *rec = settled_record(w, id);
        ck_assert_str_eq(tf_jstr(rec, "status"), "done");
        json_object_put(rec);
        char *msg = tf_task_message(w, id);
        ck_assert_msg(strstr(msg, "child=oc_"), "nested dispatch failed: %s", msg);
        char *child = tf_value_after(msg, "child=");
        free(msg);
        rec = settled_record(w, child);
        struct statvfs sv;
        ck_assert_int_eq(statvfs(w->state, &sv), 0);
        uint64_t fs = (uint64_t) sv.f_blocks * sv.f_frsize;
        uint64_t want = fs / 4 < (10ULL << 30) ? fs / 4 : 10ULL << 30;
        int64_t got = 0;
        ck_assert(json_get_int64(rec, "diskMaxBytes", &got));
        ck_assert_int_eq(got, (int64_t) want);
        json_object_put(rec);
        /* the user, outside every sandbox, may ask for more */
        const char *budget1t[] = {"--disk-max", "1T", NULL};
        char *id2 = tf_dispatch_shell(w, repo, budget1t, "true");
        rec = settled_record(w, id2);
        ck_assert(json_get_int64(rec, "diskMaxBytes", &got));
        ck_assert_int_eq(got, 1LL << 40);
        json_object_put(rec);
        free(child), free(id), free(id2), free(script), free(repo);
}
END_TEST

int main(void) {
        return tf_run_tests("disk-budget", "main", 600,
                            TF_TESTS(disk_max_stops_dense_writer, disk_max_counts_homes_and_gitdir, disk_max_stops_sparse_giant,
                                     many_empty_files_extract, full_state_fs_blocks_nobody, setting_sets_default_budget,
                                     legacy_overlay_location_still_works, nested_dispatch_cannot_raise_budget));
}
