/* Durability through the real daemon and CLI: the boot sweeps
 * (orphaned and settled overlays, orphaned output dirs, what they must never
 * touch), a dispatch that cannot be made durable (read-only state dir, full
 * disk) leaving nothing behind, tasks queued across a kill -9, and two
 * concurrent accepts into one file.
 *
 * The read-only and full-disk cases need a mount namespace of their own:
 * as root the test unshares one; unprivileged it enters a user + mount
 * namespace in which it is root (overlay.h); where neither is possible they
 * are skipped with a message. */

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "harness.h"
#include "json-util.h"
#include "overlay.h"
#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "utf8.h"

/* ---- helpers ---- */

static char *mkid(int n) { return strdup_printf("oc_mtest%03d_%08x", n, 0xabc00000u + (unsigned) n); }

/* A settled dispatch record as tasks.json holds it, with
 * an overlay at `overlay` (NULL: overlayDirs null). */
static json_object *record(tf_world *w, const char *id, const char *status, const char *cs, const char *overlay) {
        json_object *r = json_object_new_object();
        json_add_string(r, "id", id);
        json_add_string(r, "directory", w->repo_parent);
        char *log = strdup_printf("%s/logs/%s.ndjson", w->state, id);
        json_add_string(r, "logPath", log);
        free(log);
        json_add_string(r, "role", "dispatch");
        json_add_string(r, "prompt", "true");
        json_add_string(r, "status", status);
        json_add_string(r, "model", "shell");
        json_add_string(r, "executorId", "shell");
        json_add_string(r, "startedAt", "2026-01-01T00:00:00.000Z");
        json_add_string(r, "endedAt", "2026-01-01T00:00:01.000Z");
        json_add_int(r, "exitCode", 0);
        json_add_string(r, "promptPreview", "true");
        json_add_string(r, "changesetStatus", cs);
        json_add_string(r, "checkStatus", "none");
        if (overlay) {
                json_object *od = json_object_new_object();
                char *up = strdup_printf("%s/upper/main", overlay), *wk = strdup_printf("%s/work/main", overlay);
                char *tmp = strdup(overlay);
                *strrchr(tmp, '/') = 0;
                json_add_string(od, "root", overlay);
                json_add_string(od, "upperDir", up);
                json_add_string(od, "workDir", wk);
                json_add_string(od, "tmpRoot", tmp);
                json_add(od, "rwBinds", json_object_new_array());
                json_add(od, "rwFileBinds", json_object_new_array());
                json_add(r, "overlayDirs", od);
                free(up), free(wk), free(tmp);
        } else
                json_add_null(r, "overlayDirs");
        char *out = strdup_printf("%s/outputs/%s", w->state, id);
        json_add_string(r, "outputDir", out);
        free(out);
        return r;
}

static void write_tasks(tf_world *w, json_object *arr) {
        ck_assert_int_eq(mkdir_p(w->state, 0700), 0);
        const char *s = json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PRETTY);
        tf_write(tf_path(w->state, "tasks.json"), s, strlen(s), 0600);
}

static bool overlay_dirs_null(json_object *rec) {
        json_object *v = NULL;
        return json_object_object_get_ex(rec, "overlayDirs", &v) && v == NULL;
}

/* An overlay root as overlayfs leaves it: upper/main with the worker's file,
 * work/work at mode 000. */
static void fake_overlay(const char *root) {
        char *p = strdup_printf("%s/upper/main/sub", root);
        ck_assert_int_eq(mkdir_p(p, 0700), 0);
        tf_write(tf_path(p, "edit.txt"), "worker\n", 7, 0600);
        free(p);
        p = strdup_printf("%s/work/work", root);
        ck_assert_int_eq(mkdir_p(p, 0700), 0);
        ck_assert_int_eq(chmod(p, 0), 0);
        free(p);
}


/* The sweep's trash dir under root is empty (or absent): the background
 * remover finished. */
/* The boot sweeps run after listen: a test polls for their effect. */
static bool path_gone(tf_world *w, void *arg) {
        (void) w;
        return !tf_exists((const char *) arg);
}

static bool trash_empty(tf_world *w, void *arg) {
        char *t = strdup_printf("%s/.taskferry-trash", (const char *) arg);
        char *cmd = strdup_printf("[ ! -d %s ] || [ -z \"$(ls -A %s)\" ]", t, t);
        tf_run r = tf_sh(w, NULL, cmd, true);
        bool ok = r.exit_code == 0;
        tf_run_done(&r);
        free(cmd), free(t);
        return ok;
}


/* ---- boot sweeps ---- */

/* The boot's overlay sweep: an overlay with no task, and the leftover
 * overlays of an accepted and a rejected task, go (their overlayDirs persisted as null); the overlay
 * of a pending changeset stays, as do entries without the prefix; a symlink
 * planted under the root is removed without following it. */
TF_WORLD_TEST(sweep_overlays) {
        char *ovl = strdup_printf("%s/overlays", w->state);
        char *idp = mkid(1), *ida = mkid(2), *idr = mkid(3), *ido = mkid(4), *idl = mkid(5);
        char *rp = strdup_printf("%s/taskferry-cow-%s", ovl, idp), *ra = strdup_printf("%s/taskferry-cow-%s", ovl, ida),
             *rr = strdup_printf("%s/taskferry-cow-%s", ovl, idr), *ro = strdup_printf("%s/taskferry-cow-%s", ovl, ido),
             *rl = strdup_printf("%s/taskferry-cow-%s", ovl, idl), *other = strdup_printf("%s/not-an-overlay", ovl),
             *outside = strdup_printf("%s/outside", w->root);
        fake_overlay(rp), fake_overlay(ra), fake_overlay(rr), fake_overlay(ro);
        ck_assert_int_eq(mkdir_p(other, 0700), 0);
        ck_assert_int_eq(mkdir_p(outside, 0700), 0);
        tf_write(tf_path(outside, "precious"), "keep\n", 5, 0600);
        ck_assert_int_eq(symlink(outside, rl), 0);
        json_object *arr = json_object_new_array();
        json_object_array_add(arr, record(w, idp, "done", "pending", rp));
        json_object_array_add(arr, record(w, ida, "done", "accepted", ra));
        json_object_array_add(arr, record(w, idr, "crashed", "rejected", rr));
        write_tasks(w, arr);
        json_object_put(arr);

        tf_daemon_start(w);
        ck_assert_int_gt(tf_daemon_pid(w), 0); /* answered: the sweep (before the loop) is done */
        ck_assert_msg(!tf_exists(ro), "orphaned overlay %s survived the boot sweep", ro);
        ck_assert_msg(!tf_exists(ra), "the accepted task's overlay survived the boot sweep");
        ck_assert_msg(!tf_exists(rr), "the rejected task's overlay survived the boot sweep");
        ck_assert_msg(!tf_exists(rl), "the planted symlink survived the boot sweep");
        ck_assert_msg(tf_wait_until(trash_empty, w, ovl, 10000), "the sweep's trash under %s was never emptied", ovl);
        ck_assert_msg(tf_exists(tf_path(rp, "upper/main/sub/edit.txt")), "the pending changeset's overlay was deleted");
        ck_assert(tf_exists(other));
        char *precious = tf_read(tf_path(outside, "precious"), NULL);
        ck_assert_str_eq(precious, "keep\n");
        free(precious);
        /* persisted: the settled tasks no longer name their overlay, the pending one does */
        json_object *rec = tf_task_record(w, ida);
        ck_assert_msg(rec && overlay_dirs_null(rec), "accepted task keeps overlayDirs: %s", json_to_line(rec, NULL));
        json_object_put(rec);
        rec = tf_task_record(w, idr);
        ck_assert_msg(rec && overlay_dirs_null(rec), "rejected task keeps overlayDirs: %s", json_to_line(rec, NULL));
        json_object_put(rec);
        rec = tf_task_record(w, idp);
        ck_assert_str_eq(strempty(json_get_string(json_get_object(rec, "overlayDirs"), "root")), rp);
        ck_assert_str_eq(strempty(json_get_string(rec, "changesetStatus")), "pending");
        json_object_put(rec);
        /* and the daemon says the same */
        json_object *o = tf_status_full(w, ida);
        ck_assert_ptr_null(json_get_object(o, "overlayDirs"));
        json_object_put(o);
        free(idp), free(ida), free(idr), free(ido), free(idl);
        free(rp), free(ra), free(rr), free(ro), free(rl), free(other), free(outside), free(ovl);
}
END_TEST

/* The boot's output-dir sweep: an output dir whose name is no task id goes; a
 * known task's output dir stays; a symlink there goes without its target
 * being touched. */
TF_WORLD_TEST(sweep_output_dirs) {
        char *outs = strdup_printf("%s/outputs", w->state);
        char *idk = mkid(11), *ido = mkid(12);
        char *known = strdup_printf("%s/%s", outs, idk), *orphan = strdup_printf("%s/%s", outs, ido),
             *deep = strdup_printf("%s/%s/a/b/c", outs, ido), *link = strdup_printf("%s/stray-link", outs),
             *outside = strdup_printf("%s/outside", w->root);
        ck_assert_int_eq(mkdir_p(known, 0700), 0);
        tf_write(tf_path(known, "report.md"), "report\n", 7, 0600);
        ck_assert_int_eq(mkdir_p(deep, 0700), 0);
        tf_write(tf_path(deep, "f"), "x", 1, 0600);
        ck_assert_int_eq(chmod(deep, 0500), 0); /* not writable: the sweep copes */
        ck_assert_int_eq(mkdir_p(outside, 0700), 0);
        tf_write(tf_path(outside, "precious"), "keep\n", 5, 0600);
        ck_assert_int_eq(symlink(outside, link), 0);
        json_object *arr = json_object_new_array();
        json_object_array_add(arr, record(w, idk, "done", "none", NULL));
        write_tasks(w, arr);
        json_object_put(arr);

        tf_daemon_start(w);
        ck_assert_int_gt(tf_daemon_pid(w), 0);
        ck_assert_msg(!tf_exists(orphan), "orphaned output dir %s survived the boot sweep", orphan);
        ck_assert(!tf_exists(link));
        ck_assert(tf_wait_until(trash_empty, w, outs, 10000));
        char *s = tf_read(tf_path(known, "report.md"), NULL);
        ck_assert_str_eq(s, "report\n");
        free(s);
        s = tf_read(tf_path(outside, "precious"), NULL);
        ck_assert_str_eq(s, "keep\n");
        free(s);
        /* the known task is still there, naming its output dir */
        const char *st[] = {"status", idk, "--json", NULL};
        json_object *o = tf_cli_json(w, st, 0);
        ck_assert_str_eq(strempty(tf_jstr(o, "outputDir")), known);
        json_object_put(o);
        free(idk), free(ido), free(known), free(orphan), free(deep), free(link), free(outside), free(outs);
}
END_TEST

/* A tasks.json the daemon cannot read makes every entry look orphaned: the
 * sweeps must not run at all then. */
TF_WORLD_TEST(sweep_skipped_when_state_unreadable) {
        char *id = mkid(21);
        char *ov = strdup_printf("%s/overlays/taskferry-cow-%s", w->state, id), *out = strdup_printf("%s/outputs/%s", w->state, id);
        fake_overlay(ov);
        ck_assert_int_eq(mkdir_p(out, 0700), 0);
        const char *garbage = "[{\"id\": \"oc_x\", truncated";
        tf_write(tf_path(w->state, "tasks.json"), garbage, strlen(garbage), 0600);
        tf_daemon_start(w);
        ck_assert_int_gt(tf_daemon_pid(w), 0);
        ck_assert_msg(tf_exists(tf_path(ov, "upper/main/sub/edit.txt")), "swept an overlay though tasks.json is unreadable");
        ck_assert_msg(tf_exists(out), "swept an output dir though tasks.json is unreadable");
        free(id), free(ov), free(out);
}
END_TEST

/* The real thing: a reject flips changesetStatus to "rejected" durably
 * before its job removes the overlay; a daemon killed in between leaves a
 * real overlayfs upper/work (whiteouts, work/work at 000) owned by a
 * rejected task. The next start removes it and persists overlayDirs null. */
TF_WORLD_TEST(sweep_overlay_of_interrupted_reject) {
        char *repo = tf_repo_new(w, NULL, "mkdir d && echo a > a && echo x > d/x");
        char *id = tf_shell_pending(w, repo, NULL, "rm a; rm -r d; mkdir -p n/m; echo new > n/m/f", NULL);
        json_object *rec = tf_status_full(w, id);
        char *root = strdup(strempty(json_get_string(json_get_object(rec, "overlayDirs"), "root")));
        json_object_put(rec);
        ck_assert_msg(tf_exists(root), "no overlay at %s", root);
        /* a clean stop: the settled record is on disk (a settlement is only
         * persisted by the 250 ms debounce), then what the killed reject left */
        tf_daemon_stop(w, SIGTERM);
        char *tasks = strdup(tf_path(w->state, "tasks.json"));
        free(tf_shf(w, NULL, "sed -i 's/\"changesetStatus\": \"pending\"/\"changesetStatus\": \"rejected\"/' %s && "
                             "grep -q '\"rejected\"' %s",
                    tasks, tasks));
        tf_daemon_start(w);
        ck_assert_int_gt(tf_daemon_pid(w), 0);
        ck_assert_msg(!tf_exists(root), "the rejected task's overlay %s survived the boot sweep", root);
        char *ovl = strdup_printf("%s/overlays", w->state);
        ck_assert_msg(tf_wait_until(trash_empty, w, ovl, 20000), "the trash under %s was never emptied", ovl);
        rec = tf_task_record(w, id);
        ck_assert_msg(rec && overlay_dirs_null(rec), "overlayDirs kept: %s", json_to_line(rec, NULL));
        json_object_put(rec);
        /* the live tree never saw any of it */
        ck_assert(tf_exists(tf_path(repo, "a")) && tf_exists(tf_path(repo, "d/x")) && !tf_exists(tf_path(repo, "n")));
        free(ovl), free(tasks), free(root), free(id), free(repo);
}
END_TEST

/* A second taskferryd started while one runs (a racing auto-start, a user
 * typing it) loads a tasks.json that may lag the first one's memory: it must
 * not sweep the output dir or overlay of a dispatch the first has not
 * flushed yet. It finds the socket taken and exits without sweeping. */
TF_WORLD_TEST(second_daemon_does_not_sweep) {
        json_object *empty = json_object_new_array();
        write_tasks(w, empty);
        json_object_put(empty);
        tf_daemon_start(w);
        ck_assert_int_gt(tf_daemon_pid(w), 0);
        char *id = mkid(41);
        char *ov = strdup_printf("%s/overlays/taskferry-cow-%s", w->state, id), *out = strdup_printf("%s/outputs/%s", w->state, id);
        fake_overlay(ov);
        ck_assert_int_eq(mkdir_p(out, 0700), 0);
        char *argv[] = {(char *) tf_bin("taskferryd"), NULL};
        run_result rr;
        ck_assert_int_eq(run_command(argv, w->env, w->root, 1 << 20, -1, &rr), 0);
        ck_assert_msg(rr.exit_code != 0, "a second daemon started: %s", rr.err);
        run_result_done(&rr);
        ck_assert_msg(tf_exists(ov) && tf_exists(out), "a second daemon swept the first one's fresh dirs");
        /* the one daemon's next start does sweep them */
        tf_daemon_stop(w, SIGTERM);
        tf_daemon_start(w);
        ck_assert_int_gt(tf_daemon_pid(w), 0);
        ck_assert(!tf_exists(ov) && !tf_exists(out));
        free(id), free(ov), free(out);
}
END_TEST

/* A mount of our own namespace (as root), or of a user + mount namespace in
 * which we are root (unprivileged). Returns false (and says why) where
 * neither is possible. The namespace lasts as long as this test process and
 * its children. */
static bool enter_private_mount_ns(void) {
        if (geteuid() == 0) {
                if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
                        fprintf(stderr, "SKIP: cannot unshare a mount namespace: %m\n");
                        return false;
                }
                return true;
        }
        int r = userns_enter_as_root(getuid(), getgid());
        if (r < 0) {
                fprintf(stderr, "SKIP: no unprivileged user + mount namespace here (%s)\n", strerror(-r));
                return false;
        }
        return true;
}

/* A crashed sandbox can leave a mount on an overlay dir; unprivileged we
 * cannot unmount it, and removing through it would delete what it shows: the
 * sweep skips that overlay with a warning, and its record keeps overlayDirs
 * so the next start retries. */
TF_WORLD_TEST(sweep_skips_mounted_overlay) {
        if (!enter_private_mount_ns()) return;
        char *id = mkid(31), *ido = mkid(32);
        char *ov = strdup_printf("%s/overlays/taskferry-cow-%s", w->state, id);
        char *orphan = strdup_printf("%s/overlays/taskferry-cow-%s", w->state, ido);
        fake_overlay(ov), fake_overlay(orphan);
        char *mnt = strdup_printf("%s/upper/main/sub", ov);
        ck_assert_msg(mount("tmpfs", mnt, "tmpfs", 0, "size=1m,mode=0700") == 0, "mount tmpfs: %m");
        tf_write(tf_path(mnt, "in-mount.txt"), "mounted\n", 8, 0600);
        json_object *arr = json_object_new_array();
        json_object_array_add(arr, record(w, id, "done", "accepted", ov));
        write_tasks(w, arr);
        json_object_put(arr);

        tf_daemon_start(w);
        ck_assert_int_gt(tf_daemon_pid(w), 0);
        ck_assert(!tf_exists(orphan)); /* the unmounted orphan is swept */
        ck_assert_msg(tf_exists(tf_path(mnt, "in-mount.txt")), "the sweep deleted files through a mount");
        ck_assert(tf_exists(ov));
        char *log = tf_daemon_log(w);
        ck_assert_msg(strstr(log, "still mounted"), "no warning about the mounted overlay: %s", log);
        free(log);
        json_object *rec = tf_task_record(w, id);
        ck_assert_msg(json_get_object(rec, "overlayDirs"), "overlayDirs dropped for an overlay still on disk");
        json_object_put(rec);
        tf_daemon_stop(w, SIGTERM);
        ck_assert_int_eq(umount2(mnt, MNT_DETACH), 0);
        free(id), free(ido), free(ov), free(orphan), free(mnt);
}
END_TEST

/* ---- dispatch must be durable before it is acknowledged ---- */

/* Names in dir, sorted, one a line ("" if dir is missing). */
static char *names_in(tf_world *w, const char *dir) {
        char *q = shell_quote(dir);
        char *s = tf_shf(w, NULL, "ls -A %s 2>/dev/null | LC_ALL=C sort; true", q);
        free(q);
        return s;
}

typedef struct Leftovers {
        char *outputs, *overlays, *logs, *tasks, *prompts, *sockets;
} Leftovers;

static void leftovers_take(tf_world *w, Leftovers *l) {
        l->outputs = names_in(w, tf_path(w->state, "outputs"));
        l->overlays = names_in(w, tf_path(w->state, "overlays"));
        l->logs = names_in(w, tf_path(w->state, "logs"));
        l->tasks = names_in(w, tf_path(w->state, "tasks"));
        l->prompts = names_in(w, tf_path(w->state, "prompts"));
        l->sockets = names_in(w, tf_path(w->run, "task-sockets"));
}

static void leftovers_done(Leftovers *l) {
        free(l->outputs), free(l->overlays), free(l->logs), free(l->tasks), free(l->prompts), free(l->sockets);
}

static void leftovers_same(tf_world *w, Leftovers *before) {
        Leftovers now;
        leftovers_take(w, &now);
        ck_assert_msg(streq(before->outputs, now.outputs), "output dir left behind: [%s] -> [%s]", before->outputs, now.outputs);
        ck_assert_msg(streq(before->overlays, now.overlays), "overlay left behind: [%s] -> [%s]", before->overlays, now.overlays);
        ck_assert_msg(streq(before->logs, now.logs), "log left behind: [%s] -> [%s]", before->logs, now.logs);
        ck_assert_msg(streq(before->tasks, now.tasks), "task dir left behind: [%s] -> [%s]", before->tasks, now.tasks);
        ck_assert_msg(streq(before->prompts, now.prompts), "prompt left behind: [%s] -> [%s]", before->prompts, now.prompts);
        ck_assert_msg(streq(before->sockets, now.sockets), "task socket left behind: [%s] -> [%s]", before->sockets, now.sockets);
        leftovers_done(&now);
}

static int64_t count_of(tf_world *w, const char *status) {
        const char *list[] = {"list", "--all", "--json", NULL};
        json_object *o = tf_cli_json(w, list, 0);
        int64_t n = -1;
        json_get_int64(json_get_object(o, "counts"), status, &n);
        json_object_put(o);
        return n;
}

static int64_t count_all(tf_world *w) {
        static const char *const st[] = {"queued", "running", "done", "crashed", "cancelled", "unknown"};
        int64_t n = 0;
        for (size_t i = 0; i < ELEMENTSOF(st); i++) n += count_of(w, st[i]);
        return n;
}

/* The undurable dispatch: with the state dir unwritable (how = "ro") or its
 * filesystem full (how = "full"), dispatch answers an error, the worker never
 * runs, nothing is left on disk, and a daemon restarted after the disk is
 * writable again knows nothing of it. First, in the same setting, a dispatch
 * while the disk is fine proves the worker and its marker work. */
static void undurable_dispatch(const char *how) {
        tf_world *w = tf_world_new(NULL);
        if (!enter_private_mount_ns()) {
                tf_world_free(w);
                return;
        }
        bool full = streq(how, "full");
        if (full) {
                ck_assert_int_eq(mkdir_p(w->state, 0700), 0);
                ck_assert_msg(mount("tmpfs", w->state, "tmpfs", 0, "size=8m,mode=0700") == 0, "mount tmpfs: %m");
        }
        char *repo = tf_repo_new(w, NULL, "echo base > f.txt");
        char *marks = tf_shared_dir(w, "marks");
        char *ok_mark = strdup(tf_path(marks, "ok")), *bad_mark = strdup(tf_path(marks, "ran"));
        char *ok_prompt = strdup_printf("touch %s; echo ok > ok.txt", ok_mark);
        char *bad_prompt = strdup_printf("touch %s; echo bad > bad.txt", bad_mark);
        const char *d_ok[] = {"--rw-bind", marks, NULL};
        char *id_ok = tf_dispatch_shell(w, repo, d_ok, ok_prompt);
        json_object *st = tf_wait_settled(w, id_ok);
        ck_assert_str_eq(tf_jstr(st, "status"), "done");
        json_object_put(st);
        ck_assert_msg(tf_exists(ok_mark), "the worker's marker does not work in this setting");
        Leftovers before;
        leftovers_take(w, &before);

        if (full) {
                /* fill the filesystem up */
                tf_run r = tf_sh(w, NULL, "dd if=/dev/zero of=\"$TASKFERRY_STATE_DIR/fill\" bs=64k 2>/dev/null; df -k \"$TASKFERRY_STATE_DIR\"", true);
                ck_assert_msg(strstr(r.out, " 0 ") || strstr(r.out, "100%"), "the tmpfs is not full: %s", r.out);
                tf_run_done(&r);
        } else {
                ck_assert_msg(mount(w->state, w->state, NULL, MS_BIND, NULL) == 0, "bind: %m");
                ck_assert_msg(mount(NULL, w->state, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) == 0, "remount ro: %m");
        }
        const char *d_bad[] = {"dispatch", "--json", "--executor", "shell", "--directory", repo, "--rw-bind", marks,
                               "--prompt", bad_prompt, NULL};
        tf_run r = tf_cli(w, NULL, NULL, d_bad);
        ck_assert_msg(r.exit_code != 0, "dispatch with the state dir %s was acknowledged: %s",
                      full ? "on a full disk" : "read-only", r.out);
        /* a clear error names the cause */
        const char *cause = strerror(full ? ENOSPC : EROFS);
        ck_assert_msg(strstr(r.out, cause) || strstr(r.err, cause), "the error does not say \"%s\": %s %s", cause, r.out,
                      r.err);
        tf_run_done(&r);
        usleep(2000 * 1000);
        ck_assert_msg(!tf_exists(bad_mark), "the worker of a failed dispatch ran");
        leftovers_same(w, &before);

        /* disk fine again; a graceful stop would flush a record still in memory */
        if (full) ck_assert_int_eq(unlink(tf_path(w->state, "fill")), 0);
        else ck_assert_int_eq(umount2(w->state, MNT_DETACH), 0);
        tf_daemon_stop(w, SIGTERM);
        tf_daemon_start(w);
        ck_assert_int_eq(count_all(w), 1);
        usleep(1000 * 1000);
        ck_assert_msg(!tf_exists(bad_mark), "the worker of a failed dispatch ran after the restart");
        ck_assert_msg(!tf_exists(tf_path(repo, "bad.txt")), "the failed dispatch touched the repository");
        leftovers_same(w, &before);
        leftovers_done(&before);
        free(repo), free(marks), free(ok_mark), free(bad_mark), free(ok_prompt), free(bad_prompt), free(id_ok);
        tf_world_free(w);
}

START_TEST(dispatch_fails_on_read_only_state) { undurable_dispatch("ro"); }
END_TEST

START_TEST(dispatch_fails_on_full_disk) { undurable_dispatch("full"); }
END_TEST

/* ---- queued across a restart ---- */

static bool n_running(tf_world *w, void *arg) { return count_of(w, "running") == *(int64_t *) arg; }

/* Tasks queued when the daemon dies are queued again after the restart, in
 * order (not made "unknown", as running ones once were). */
TF_WORLD_TEST_ENV(queued_across_kill9, "TASKFERRY_MAX_CONCURRENT_TASKS=4") {
        char *repo = tf_repo_new(w, NULL, "echo base > f.txt");
        char *release = strdup(tf_path(w->fixtures, "release"));
        char *ids[6];
        for (int i = 0; i < 6; i++) {
                char *prompt = strdup_printf("while [ ! -e %s ]; do sleep 0.1; done; echo %d > out-%d.txt; echo finished-%d",
                                             release, i, i, i);
                ids[i] = tf_dispatch_shell(w, repo, NULL, prompt);
                free(prompt);
        }
        int64_t four = 4;
        ck_assert_msg(tf_wait_until(n_running, w, &four, 30000), "4 workers never ran");
        ck_assert_int_eq(count_of(w, "queued"), 2);
        tf_daemon_stop(w, SIGKILL);
        /* the next CLI call starts a new daemon */
        ck_assert_int_eq(count_all(w), 6);
        tf_write(release, "", 0, 0644);
        for (int i = 0; i < 6; i++) {
                json_object *st = tf_wait_settled(w, ids[i]);
                ck_assert_msg(streq(strempty(tf_jstr(st, "status")), "done"), "task %d (%s) after the restart: %s", i,
                              ids[i], json_to_line(st, NULL));
                ck_assert_str_eq(strempty(tf_jstr(st, "changesetStatus")), "pending");
                json_object_put(st);
                const char *res[] = {"result", ids[i], "--json", NULL};
                json_object *o = tf_cli_json(w, res, 0);
                char *want = strdup_printf("+%d", i), *msg = strdup_printf("finished-%d\n", i);
                ck_assert_str_eq(strempty(tf_jstr(o, "message")), msg);
                ck_assert_msg(strstr(strempty(tf_jstr(o, "diff")), want), "diff of %d: %s", i, tf_jstr(o, "diff"));
                free(want), free(msg);
                json_object_put(o);
                free(ids[i]);
        }
        free(repo), free(release);
}
END_TEST

/* `status <id> --full --json` once settled (new reference). */
static json_object *settled_status(tf_world *w, const char *id) {
        json_object_put(tf_wait_settled(w, id));
        return tf_status_full(w, id);
}

/* Does any file under dir hold needle? (grep -r; "" if none) */
static char *files_holding(tf_world *w, const char *dir, const char *needle) {
        char *qd = shell_quote(dir), *qn = shell_quote(needle);
        char *s = tf_shf(w, NULL, "grep -rlF -- %s %s 2>/dev/null; true", qn, qd);
        free(qd), free(qn);
        return s;
}

/* A queued task survives a kill -9 whole: after the
 * restart it runs with its own launch options (--ro-bind, --no-overlay) and
 * the caller's environment (a secret the restarted daemon's own environment
 * holds a different value of), exactly as if nothing had happened. The
 * request file holding the env is 0600 in a 0700 dir while queued and gone
 * once the task launched; the secret appears in no file of the state dir,
 * nor in the daemon's log. */
TF_WORLD_TEST_ENV(queued_keeps_env_and_binds_across_kill9, "TASKFERRY_MAX_CONCURRENT_TASKS=1") {
        char *repo = tf_repo_new(w, NULL, "echo base > f.txt");
        char *release = strdup(tf_path(w->fixtures, "release-env"));
        char *ro = strdup(tf_path(w->root, "ro-data"));
        ck_assert_int_eq(mkdir_p(ro, 0755), 0);
        ck_assert_int_eq(chmod(ro, 0755), 0);
        tf_write(tf_path(ro, "seen.txt"), "ro-content\n", 11, 0644);
        const char *secret = "sk-test-8f3a1c9e7b2d4f60a5e1";
        tf_daemon_start(w); /* the daemon's own env has no TF_TEST_SECRET */

        char *pa = strdup_printf("while [ ! -e %s ]; do sleep 0.1; done", release);
        char *a = tf_dispatch_shell(w, repo, NULL, pa);
        ck_assert(tf_wait_status(w, a, "running", 30000));
        char *pb = strdup_printf("printf '%%s\\n' \"$TF_TEST_SECRET\" > env.txt; cat %s/seen.txt > ro.txt; "
                                 "if touch %s/probe 2>/dev/null; then echo writable; else echo read-only; fi > bind.txt",
                                 ro, ro);
        tf_world_setenv(w, "TF_TEST_SECRET", secret); /* the caller's env (the CLI forwards all of it) */
        const char *db[] = {"--no-overlay", "--ro-bind", ro, NULL};
        char *b = tf_dispatch_shell(w, repo, db, pb);
        tf_world_setenv(w, "TF_TEST_SECRET", "the-daemons-own-value");
        ck_assert(tf_status_is(w, b, "queued"));

        /* while queued: the request file, private */
        char *tdir = strdup_printf("%s/tasks/%s", w->state, b);
        char *req = strdup_printf("%s/pending-launch.json", tdir);
        struct stat st;
        ck_assert_msg(stat(req, &st) == 0, "no launch request file %s", req);
        ck_assert_msg((st.st_mode & 07777) == 0600, "launch request mode %o", st.st_mode & 07777);
        ck_assert_int_eq(st.st_uid, geteuid());
        ck_assert(stat(tdir, &st) == 0 && (st.st_mode & 07777) == 0700);
        ck_assert(stat(w->state, &st) == 0 && (st.st_mode & 0077) == 0);
        char *data = tf_read(req, NULL);
        ck_assert_msg(strstr(data, secret), "the request does not hold the caller's env");
        free(data);
        data = tf_read(tf_path(w->state, "tasks.json"), NULL);
        ck_assert_msg(!strstr(data, secret), "the secret is in tasks.json");
        free(data);
        char *a_req = strdup_printf("%s/tasks/%s/pending-launch.json", w->state, a);
        ck_assert_msg(!tf_exists(a_req), "the launched task's request file is still there");

        tf_daemon_stop(w, SIGKILL);
        tf_daemon_start(w); /* its environment says TF_TEST_SECRET=the-daemons-own-value */
        ck_assert(tf_status_is(w, b, "queued"));
        tf_write(release, "", 0, 0644);
        json_object *sb = settled_status(w, b);
        ck_assert_msg(streq(strempty(tf_jstr(sb, "status")), "done"), "after the restart: %s", json_to_line(sb, NULL));
        /* --no-overlay: the worker wrote the target itself, nothing pending */
        ck_assert_msg(!streq_ptr(tf_jstr(sb, "changesetStatus"), "pending"), "%s", json_to_line(sb, NULL));
        json_object_put(sb);
        char *want_env = strdup_printf("%s\n", secret);
        char *got = tf_read(tf_path(repo, "env.txt"), NULL);
        ck_assert_msg(streq(got, want_env), "the requeued worker saw TF_TEST_SECRET=%s", got);
        free(got);
        got = tf_read(tf_path(repo, "ro.txt"), NULL);
        ck_assert_msg(streq(got, "ro-content\n"), "the --ro-bind dir was not bound: ro.txt=%s", got);
        free(got);
        got = tf_read(tf_path(repo, "bind.txt"), NULL);
        ck_assert_msg(streq(got, "read-only\n"), "the --ro-bind dir was %s", got);
        free(got);
        ck_assert(!tf_exists(tf_path(ro, "probe")));
        json_object *sa = tf_wait_settled(w, a);
        ck_assert_str_eq(strempty(tf_jstr(sa, "status")), "done");
        json_object_put(sa);

        /* gone once launched; the secret nowhere in the state dir or the logs */
        ck_assert_msg(!tf_exists(req), "the launch request outlived the launch");
        char *where = files_holding(w, w->state, secret);
        ck_assert_msg(!*where, "the secret is in %s", where);
        free(where);
        where = files_holding(w, w->run, secret);
        ck_assert_msg(!*where, "the secret is in %s", where);
        free(where);
        char *log = tf_daemon_log(w);
        ck_assert_msg(!strstr(log, secret), "the secret is in the daemon's log");
        free(log);
        free(want_env), free(a_req), free(tdir), free(req), free(pa), free(pb), free(a), free(b);
        free(repo), free(release), free(ro);
}
END_TEST

/* The request file's lifetime: a queued task cancelled takes it along; an
 * orphaned one (a task no longer queued, a task dir of no task, a temp file
 * of an interrupted write) is swept at the next start; a queued task whose
 * request is missing crashes with a reason instead of running without it. */
TF_WORLD_TEST_ENV(launch_request_lifetime, "TASKFERRY_MAX_CONCURRENT_TASKS=1") {
        char *repo = tf_repo_new(w, NULL, "echo base > f.txt");
        char *release = strdup(tf_path(w->fixtures, "release-life"));
        char *marks = tf_shared_dir(w, "marks");
        tf_daemon_start(w);
        char *pa = strdup_printf("while [ ! -e %s ]; do sleep 0.1; done", release);
        char *a = tf_dispatch_shell(w, repo, NULL, pa);
        ck_assert(tf_wait_status(w, a, "running", 30000));
        char *pq = strdup_printf("touch %s/ran-q", marks), *pl = strdup_printf("touch %s/ran-l", marks);
        const char *bind[] = {"--rw-bind", marks, NULL};
        char *c = tf_dispatch_shell(w, repo, bind, pq), *q = tf_dispatch_shell(w, repo, bind, pq);
        char *l = tf_dispatch_shell(w, repo, bind, pl);
        char *req_c = strdup_printf("%s/tasks/%s/pending-launch.json", w->state, c);
        char *req_q = strdup_printf("%s/tasks/%s/pending-launch.json", w->state, q);
        char *req_l = strdup_printf("%s/tasks/%s/pending-launch.json", w->state, l);
        ck_assert(tf_exists(req_c) && tf_exists(req_q) && tf_exists(req_l));
        const char *cc[] = {"cancel", c, "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, cc);
        ck_assert_int_eq(r.exit_code, 0);
        tf_run_done(&r);
        ck_assert_msg(!tf_exists(req_c), "a cancelled task's request file stayed");

        tf_daemon_stop(w, SIGKILL);
        /* orphans as a crash can leave them */
        char *a_dir = strdup_printf("%s/tasks/%s", w->state, a);
        tf_write(tf_path(a_dir, "pending-launch.json"), "{}", 2, 0600);
        tf_write(tf_path(a_dir, ".pending-launch.json-0123abcd.tmp"), "{", 1, 0600);
        char *stray = strdup_printf("%s/tasks/oc_stray_00000000", w->state);
        ck_assert_int_eq(mkdir_p(stray, 0700), 0);
        tf_write(tf_path(stray, "pending-launch.json"), "{}", 2, 0600);
        ck_assert_int_eq(unlink(req_l), 0); /* l lost its request */
        tf_daemon_start(w);
        ck_assert_msg(tf_wait_until(path_gone, w, (void *) tf_path(a_dir, "pending-launch.json"), 30000),
                      "a running task's stale request survived the sweep");
        ck_assert_msg(tf_wait_until(path_gone, w, (void *) tf_path(a_dir, ".pending-launch.json-0123abcd.tmp"), 30000),
                      "a temp request survived the sweep");
        ck_assert_msg(tf_wait_until(path_gone, w, stray, 30000), "a task dir of no task survived the sweep");
        ck_assert_msg(tf_exists(req_q), "a queued task's request was swept");
        json_object *sl = settled_status(w, l);
        ck_assert_msg(streq(strempty(tf_jstr(sl, "status")), "crashed") && strstr(strempty(tf_jstr(sl, "spawnError")), "dispatch it again"),
                      "a queued task without its request: %s", json_to_line(sl, NULL));
        json_object_put(sl);
        tf_write(release, "", 0, 0644);
        json_object *sq = tf_wait_settled(w, q);
        ck_assert_str_eq(strempty(tf_jstr(sq, "status")), "done");
        json_object_put(sq);
        ck_assert(tf_exists(tf_path(marks, "ran-q")));
        ck_assert_msg(!tf_exists(tf_path(marks, "ran-l")), "a task without its launch request ran");
        ck_assert(!tf_exists(req_q));
        free(a_dir), free(stray), free(req_c), free(req_q), free(req_l), free(pq), free(pl), free(pa);
        free(a), free(c), free(q), free(l), free(marks), free(release), free(repo);
}
END_TEST

/* FIFO by dispatch time across a restart:
 * with a cap of 1, B and C queued behind A when the daemon is killed; A
 * finishes while no daemon runs; D is dispatched by the call that starts the
 * next daemon. They run A, B, C, D. */
TF_WORLD_TEST_ENV(queued_order_across_kill9, "TASKFERRY_MAX_CONCURRENT_TASKS=1") {
        char *repo = tf_repo_new(w, NULL, "echo base > f.txt");
        char *release = strdup(tf_path(w->fixtures, "release-order"));
        char *marks = tf_shared_dir(w, "marks");
        char *order = strdup(tf_path(marks, "order"));
        char *ids[4];
        for (int i = 0; i < 4; i++) {
                if (i == 3) {
                        tf_daemon_stop(w, SIGKILL);
                        tf_write(release, "", 0, 0644);
                        usleep(500 * 1000); /* A's worker ends while no daemon runs */
                }
                char *p = strdup_printf("%s echo %c >> %s", i == 0 ? "while [ ! -e " : "", 'A' + i, order);
                if (i == 0) {
                        free(p);
                        p = strdup_printf("while [ ! -e %s ]; do sleep 0.1; done; echo A >> %s", release, order);
                }
                const char *bind[] = {"--rw-bind", marks, NULL};
                ids[i] = tf_dispatch_shell(w, repo, bind, p);
                free(p);
                if (i == 0) ck_assert(tf_wait_status(w, ids[0], "running", 30000));
        }
        for (int i = 0; i < 4; i++) {
                json_object *st = tf_wait_settled(w, ids[i]);
                ck_assert_msg(streq(strempty(tf_jstr(st, "status")), "done"), "%c: %s", 'A' + i, json_to_line(st, NULL));
                json_object_put(st);
                free(ids[i]);
        }
        char *got = tf_read(order, NULL);
        ck_assert_msg(streq(got, "A\nB\nC\nD\n"), "ran in the order %s", got);
        free(got), free(order), free(marks), free(release), free(repo);
}
END_TEST

/* ---- settlement across a crash ---- */

static bool child_of(pid_t pid, void *parent) {
        pid_t ppid;
        return tf_proc_stat(pid, &ppid, NULL, NULL) && ppid == *(pid_t *) parent;
}

/* The daemon's descendants (children, theirs, ...), from /proc: their
 * count, at most max of them in out. */
static size_t descendants_of(pid_t root, pid_t *out, size_t max) {
        size_t n = 0;
        pid_t parent = root;
        for (size_t next = 0;; parent = out[next++]) {
                size_t k = tf_procs(child_of, &parent, out + n, max - n);
                n += k < max - n ? k : max - n;
                if (next == n || n == max) break;
        }
        return n;
}

static bool dir_has_prefix(const char *dir, const char *prefix) {
        DIR *d = opendir(dir);
        if (!d) return false;
        bool any = false;
        for (struct dirent *de; !any && (de = readdir(d));) any = startswith(de->d_name, prefix);
        closedir(d);
        return any;
}

/* kill -9 of the daemon while its settlement job extracts a changeset of
 * many files: the job and everything it forked
 * (git) die with the daemon, so nothing writes the scratch dir or the patch
 * after it; the next daemon re-settles from exit.json and the changeset is
 * exact, with no changesetError. */
TF_WORLD_TEST(kill9_during_extraction) {
        char *repo = tf_repo_new(w, NULL, "echo base > f.txt");
        const int N = 4000;
        tf_daemon_start(w);
        pid_t daemon = tf_daemon_pid(w);
        char *prompt = strdup_printf("mkdir -p many && i=0; while [ $i -lt %d ]; do echo \"line $i\" > many/f$i.txt; "
                                     "i=$((i+1)); done; echo edited > f.txt",
                                     N);
        char *id = tf_dispatch_shell(w, repo, NULL, prompt);
        char *root = strdup_printf("%s/overlays/taskferry-cow-%s", w->state, id);
        bool seen = false;
        for (int i = 0; i < 60000 && !seen; i++) {
                seen = dir_has_prefix(root, "scratch.");
                if (!seen) usleep(2000);
        }
        ck_assert_msg(seen, "the extraction never started in %s", root);
        pid_t kids[64];
        size_t nk = descendants_of(daemon, kids, ELEMENTSOF(kids));
        kill(daemon, SIGKILL);
        waitpid(daemon, NULL, 0);
        ck_assert_msg(nk > 0, "no settlement job under the daemon");
        /* its job and the job's git die with it (no writer survives); a
         * shim (re-adoptable) is not among them: its worker has exited */
        for (size_t i = 0; i < nk; i++) {
                bool gone = false;
                for (int k = 0; k < 300 && !gone; k++) {
                        gone = !tf_pid_running(kids[i]);
                        if (!gone) usleep(10000);
                }
                char comm[64] = "?";
                char *cp = strdup_printf("/proc/%d/comm", (int) kids[i]);
                FILE *f = fopen(cp, "re");
                if (f) {
                        if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
                        fclose(f);
                }
                free(cp);
                ck_assert_msg(gone, "process %d (%s) of the killed daemon still runs", (int) kids[i], comm);
        }
        json_object *rec = tf_task_record(w, id);
        ck_assert_msg(streq(strempty(json_get_string(rec, "status")), "running"), "settled before the kill: %s",
                      json_to_line(rec, NULL));
        json_object_put(rec);

        tf_daemon_start(w);
        json_object *st = settled_status(w, id);
        ck_assert_msg(streq(strempty(tf_jstr(st, "status")), "done") &&
                              streq(strempty(tf_jstr(st, "changesetStatus")), "pending") && !tf_jstr(st, "changesetError"),
                      "re-settled: %s", json_to_line(st, NULL));
        json_object_put(st);
        ck_assert_msg(!dir_has_prefix(root, "scratch"), "a scratch dir is left in %s", root);
        tf_accept_ok(w, id);
        /* exactly the worker's files: the same tree written again outside
         * the repository, compared byte for byte (a cat per file cost 4000
         * forks of the shell) */
        char *expect = strdup(tf_path(w->root, "expect-many"));
        char *check = tf_shf(w, repo,
                             "mkdir '%s' && i=0; while [ $i -lt %d ]; do echo \"line $i\" > '%s'/f$i.txt; i=$((i+1)); done; "
                             "d=$(diff -rq many '%s' 2>&1 | head -5); echo ${d:-same} $(ls many | wc -l) $(cat f.txt)",
                             expect, N, expect, expect);
        char *want = strdup_printf("same %d edited", N);
        ck_assert_msg(streq(check, want), "after accept: %s, want %s", check, want);
        free(expect);
        free(check), free(want), free(root), free(id), free(prompt), free(repo);
}
END_TEST

/* The crash point after a no-change extraction: the job wrote the empty
 * patch and removed the overlay, and the daemon died before its 250 ms
 * debounced flush recorded the settlement. On disk: the launch-time record
 * (running, pending, overlayDirs naming the removed overlay), exit.json,
 * the empty patch. The next daemon settles it as a never-interrupted one
 * would have: done, changeset accepted (empty), no changesetError. */
TF_WORLD_TEST(crash_after_empty_extraction) {
        char *repo = tf_repo_new(w, NULL, "echo base > f.txt");
        char *release = strdup(tf_path(w->fixtures, "release-empty"));
        char *prompt = strdup_printf("while [ ! -e %s ]; do sleep 0.1; done; echo no changes", release);
        char *id = tf_dispatch_shell(w, repo, NULL, prompt);
        ck_assert(tf_wait_status(w, id, "running", 30000));
        usleep(500 * 1000); /* the post-spawn flush (shimPid) is on disk */
        json_object *at_launch = tf_task_record(w, id);
        ck_assert_str_eq(strempty(json_get_string(at_launch, "status")), "running");
        const char *root = json_get_string(json_get_object(at_launch, "overlayDirs"), "root");
        ck_assert_msg(root && tf_exists(root), "no overlay at launch: %s", json_to_line(at_launch, NULL));
        tf_write(release, "", 0, 0644);
        json_object *st = settled_status(w, id);
        ck_assert_msg(streq(strempty(tf_jstr(st, "changesetStatus")), "accepted") && !tf_exists(root),
                      "a no-change task: %s", json_to_line(st, NULL));
        json_object_put(st);
        tf_daemon_stop(w, SIGTERM);
        char *patch = strdup_printf("%s/diffs/%s.patch", w->state, id);
        size_t plen = 1;
        free(tf_read(patch, &plen));
        ck_assert_int_eq(plen, 0);
        json_object *arr = json_object_new_array();
        json_object_array_add(arr, json_object_get(at_launch));
        write_tasks(w, arr);
        json_object_put(arr);

        tf_daemon_start(w);
        st = settled_status(w, id);
        ck_assert_msg(streq(strempty(tf_jstr(st, "status")), "done") &&
                              streq(strempty(tf_jstr(st, "changesetStatus")), "accepted") &&
                              !tf_jstr(st, "changesetError") && !json_get_object(st, "overlayDirs"),
                      "re-settled: %s", json_to_line(st, NULL));
        json_object_put(st);
        json_object_put(at_launch);
        free(patch), free(id), free(prompt), free(release), free(repo);
}
END_TEST

/* ---- concurrent accepts ---- */

/* Two changesets that both rewrite f.txt (and each edit 1000 files and add
 * one of its own), accepted at the same moment on two connections: one
 * applies, the other stays pending with git's reason naming f.txt, and the
 * tree holds exactly one of them, whole. Ten rounds. The 1000 edits widen
 * the window in which an unserialized second apply reads f.txt before the
 * first writes it (both would apply, the tree a mix of the two). */
TF_WORLD_TEST(concurrent_accepts_one_file) {
        char *repo = tf_repo_new(w, NULL, "echo base > f.txt");
        free(tf_shf(w, repo, "mkdir x y && i=0; while [ $i -lt 1000 ]; do echo x > x/$i; echo y > y/$i; i=$((i+1)); done; "
                             "git add -A && git commit -qm many"));
        for (int round = 0; round < 10; round++) {
                char *pa = strdup_printf("echo A%d > f.txt; for f in x/*; do echo A%d >> $f; done; echo a > za%d.txt", round,
                                         round, round);
                char *pb = strdup_printf("echo B%d > f.txt; for f in y/*; do echo B%d >> $f; done; echo b > zb%d.txt", round,
                                         round, round);
                char *a = tf_dispatch_shell(w, repo, NULL, pa), *b = tf_dispatch_shell(w, repo, NULL, pb);
                json_object *sa = tf_wait_settled(w, a), *sb = tf_wait_settled(w, b);
                ck_assert_msg(streq(strempty(tf_jstr(sa, "changesetStatus")), "pending") &&
                                      streq(strempty(tf_jstr(sb, "changesetStatus")), "pending"),
                              "round %d: both must be pending: %s | %s", round, json_to_line(sa, NULL), json_to_line(sb, NULL));
                json_object_put(sa), json_object_put(sb);
                int fa = tf_connect(w), fb = tf_connect(w);
                char *la = strdup_printf("{\"version\":1,\"id\":\"a\",\"method\":\"task.accept\",\"params\":{\"taskId\":\"%s\"}}", a);
                char *lb = strdup_printf("{\"version\":1,\"id\":\"b\",\"method\":\"task.accept\",\"params\":{\"taskId\":\"%s\"}}", b);
                tf_send(fa, la);
                tf_send(fb, lb);
                char *ra = tf_recv_line(fa, 300000), *rb = tf_recv_line(fb, 300000);
                ck_assert_ptr_nonnull(ra);
                ck_assert_ptr_nonnull(rb);
                close(fa), close(fb);
                json_object *oa = tf_json(ra), *ob = tf_json(rb);
                bool app_a = json_get_bool(oa, "ok", false) && json_get_bool(json_get_object(oa, "result"), "applied", false);
                bool app_b = json_get_bool(ob, "ok", false) && json_get_bool(json_get_object(ob, "result"), "applied", false);
                ck_assert_msg(app_a != app_b, "round %d: exactly one accept must apply: %s | %s", round, ra, rb);
                json_object *loser = app_a ? ob : oa;
                const char *lid = app_a ? b : a, *wid = app_a ? a : b;
                /* git's reason names the file */
                const char *reason = json_get_bool(loser, "ok", false)
                                             ? json_get_string(json_get_object(loser, "result"), "reason")
                                             : json_get_string(json_get_object(loser, "error"), "message");
                ck_assert_msg(reason && strstr(reason, "f.txt"), "round %d: no reason naming f.txt: %s", round,
                              app_a ? rb : ra);
                ck_assert_msg(!strstr(reason, "already being accepted"), "round %d: refused as busy, not by git: %s",
                              round, reason);
                char *cs = tf_changeset_status(w, lid);
                ck_assert_str_eq(cs, "pending");
                free(cs);
                /* the tree: exactly the winner's change, whole */
                char *f = tf_read(tf_path(repo, "f.txt"), NULL);
                char *want = strdup_printf("%c%d\n", app_a ? 'A' : 'B', round);
                ck_assert_msg(streq(f, want), "round %d: f.txt is %s, want %s", round, f, want);
                char *mine = strdup_printf("z%c%d.txt", app_a ? 'a' : 'b', round),
                     *theirs = strdup_printf("z%c%d.txt", app_a ? 'b' : 'a', round);
                ck_assert_msg(tf_exists(tf_path(repo, mine)), "round %d: half applied: %s missing", round, mine);
                ck_assert_msg(!tf_exists(tf_path(repo, theirs)), "round %d: the refused changeset's %s landed", round, theirs);
                char *edits = tf_shf(w, repo, "echo $(grep -L %c%d %s/* | wc -l) $(grep -l %c%d %s/* | wc -l)",
                                     app_a ? 'A' : 'B', round, app_a ? "x" : "y", app_a ? 'B' : 'A', round,
                                     app_a ? "y" : "x");
                ck_assert_msg(streq(edits, "0 0"), "round %d: edits missing / the refused ones landed: %s", round, edits);
                free(edits);
                char *rej = tf_shf(w, repo, "find . -name '*.rej' -o -name '*.orig' | head -1; git diff --name-only --diff-filter=U");
                ck_assert_msg(!*rej, "round %d: leftovers of a failed apply: %s", round, rej);
                free(rej);
                /* settle the round: the winner's change is the new base */
                free(tf_shf(w, repo, "git add -A && git commit -qm round"));
                const char *rj[] = {"reject", lid, "--json", NULL};
                tf_run r = tf_cli(w, NULL, NULL, rj);
                ck_assert_int_eq(r.exit_code, 0);
                tf_run_done(&r);
                (void) wid;
                free(f), free(want), free(mine), free(theirs);
                json_object_put(oa), json_object_put(ob);
                free(ra), free(rb), free(la), free(lb), free(pa), free(pb), free(a), free(b);
        }
        free(repo);
}
END_TEST

/* A daemon killed after a task's "running" was durable but before its shim
 * was let go (its request still on disk, the forked child still waiting on
 * its hold pipe) ran nothing of it: the next daemon removes the overlay of
 * that launch and queues the task again, and it runs once. The record is
 * written as such a daemon leaves it: running, changeset pending, the
 * overlay, a recorded shim pid that runs no shim. */
TF_WORLD_TEST_ENV(running_never_let_go_runs_once, "TASKFERRY_MAX_CONCURRENT_TASKS=1") {
        char *repo = tf_repo_new(w, NULL, "echo base > f.txt");
        char *release = strdup(tf_path(w->fixtures, "release-unl"));
        char *marks = tf_shared_dir(w, "marks");
        tf_daemon_start(w);
        char *pa = strdup_printf("while [ ! -e %s ]; do sleep 0.1; done", release);
        char *a = tf_dispatch_shell(w, repo, NULL, pa);
        ck_assert(tf_wait_status(w, a, "running", 30000));
        char *pb = strdup_printf("echo ran >> %s/ran-b", marks);
        const char *bind[] = {"--rw-bind", marks, NULL};
        char *b = tf_dispatch_shell(w, repo, bind, pb);
        ck_assert(tf_status_is(w, b, "queued"));
        tf_daemon_stop(w, SIGKILL);

        char *cow = strdup(tf_path(w->root, "cow"));
        char *root = strdup_printf("%s/taskferry-cow-%s", cow, b);
        ck_assert_int_eq(mkdir_p(tf_path(root, "upper/main"), 0700), 0);
        char *tasks_path = strdup(tf_path(w->state, "tasks.json"));
        char *data = tf_read(tasks_path, NULL);
        json_object *tasks = json_tokener_parse(data);
        ck_assert_ptr_nonnull(tasks);
        bool found = false;
        for (size_t i = 0; i < json_object_array_length(tasks); i++) {
                json_object *t = json_object_array_get_idx(tasks, i);
                if (!streq(strempty(tf_jstr(t, "id")), b)) continue;
                json_object_object_add(t, "status", json_object_new_string("running"));
                json_object_object_add(t, "changesetStatus", json_object_new_string("pending"));
                json_object_object_add(t, "shimPid", json_object_new_int(getpid()));
                json_object *od = json_object_new_object();
                json_object_object_add(od, "tmpRoot", json_object_new_string(cow));
                json_object_object_add(od, "root", json_object_new_string(root));
                json_object_object_add(t, "overlayDirs", od);
                found = true;
        }
        ck_assert(found);
        const char *out = json_object_to_json_string_ext(tasks, JSON_C_TO_STRING_PLAIN);
        tf_write(tasks_path, out, strlen(out), 0600);
        json_object_put(tasks);

        tf_daemon_start(w);
        ck_assert_msg(tf_status_is(w, b, "queued"), "a running task that ran nothing is not queued again");
        ck_assert_msg(!tf_exists(root), "the overlay of the unfinished launch is still there");
        tf_write(release, "", 0, 0644);
        json_object *sb = settled_status(w, b);
        ck_assert_msg(streq(strempty(tf_jstr(sb, "status")), "done"), "requeued: %s", json_to_line(sb, NULL));
        json_object_put(sb);
        char *ran = tf_read(tf_path(marks, "ran-b"), NULL);
        ck_assert_msg(streq(ran, "ran\n"), "the requeued task ran %s", ran);
        char *log = tf_daemon_log(w);
        ck_assert_msg(strstr(log, "queued again"), "the daemon's log does not say it queued the task again");
        json_object_put(tf_wait_settled(w, a));
        free(log), free(ran), free(data), free(tasks_path), free(root), free(cow);
        free(pa), free(pb), free(a), free(b), free(repo), free(release), free(marks);
}
END_TEST

int main(void) {
        Suite *s = suite_create("durability");
        tf_add_tests(s, "sweeps", 120,
                     TF_TESTS(sweep_overlays, sweep_output_dirs, sweep_skipped_when_state_unreadable,
                              sweep_skips_mounted_overlay, second_daemon_does_not_sweep, sweep_overlay_of_interrupted_reject));
        tf_add_tests(s, "settle", 600, TF_TESTS(kill9_during_extraction, crash_after_empty_extraction));
        tf_add_tests(s, "accepts", 900, TF_TESTS(concurrent_accepts_one_file));
        tf_add_tests(s, "durable", 300,
                     TF_TESTS(dispatch_fails_on_read_only_state, dispatch_fails_on_full_disk, queued_across_kill9,
                              queued_keeps_env_and_binds_across_kill9, launch_request_lifetime, queued_order_across_kill9,
                              running_never_let_go_runs_once));
        return tf_run_suite(s);
}
