/* Benchmark: changeset extraction cost against `git status` (goal:
 * 10 edits in a 50,000-file repo settle within 3x the time of git status;
 * figures only, never a pass/fail timing).
 *
 * Builds a git repository of N files (default 50000, in directories of 100;
 * committed and packed, as a repository of that size is),
 * takes the base snapshot as the shim does before a worker starts, lets a
 * "worker" edit 10 files in a real overlay (user + mount namespace, as the
 * shim mounts it), then times:
 *   - git status in the repository (warm, best of 3),
 *   - changeset_snapshot (once per task, before the worker starts),
 *   - changeset_extract with the base (only the upper dir's paths),
 *   - changeset_extract without a base (the whole-tree comparison it replaces).
 * Usage: bench-extract [files, default 50000] */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "changeset.h"
#include "overlay.h"
#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static int sh(const char *cmd) {
        int st = system(cmd);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int worker(const char *dir, const char *upper, const char *work, const char *script) {
        pid_t pid = fork();
        if (pid < 0) return -errno;
        if (pid == 0) {
                char *err = NULL;
                if (userns_enter_as_root(getuid(), getgid()) < 0) _exit(90);
                if (overlay_mount(dir, upper, work, dir, true, &err) < 0) _exit(91);
                if (chdir(dir) < 0) _exit(92);
                execl("/bin/sh", "sh", "-ec", script, (char *) NULL);
                _exit(93);
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR) return -errno;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv) {
        int n = argc > 1 ? atoi(argv[1]) : 50000;
        if (n < 100) n = 100;
        setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
        setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
        const char *tmp = getenv("TASKFERRY_TEST_TMPDIR");
        char *root = strdup_printf("%s/tf-bench-extract-XXXXXX", tmp && *tmp ? tmp : "/var/tmp");
        if (!mkdtemp(root)) return 1;
        char *dir = strdup_printf("%s/repo", root), *upper = strdup_printf("%s/upper", root),
             *work = strdup_printf("%s/work", root), *base = strdup_printf("%s/base", root),
             *patch = strdup_printf("%s/patch", root), *patch_old = strdup_printf("%s/patch-old", root);
        if (mkdir_p(dir, 0755) < 0 || mkdir_p(upper, 0755) < 0 || mkdir_p(work, 0755) < 0) return 1;

        double t0 = now_s();
        for (int i = 0; i < n; i++) {
                char *p = strdup_printf("%s/d%03d/f%05d.txt", dir, i / 100, i);
                char *d = strdup(p);
                *strrchr(d, '/') = 0;
                if (i % 100 == 0) (void) mkdir_p(d, 0755);
                FILE *f = fopen(p, "we");
                if (!f) return 1;
                fprintf(f, "file %d\nline two\nline three\n", i);
                if (fclose(f) != 0) return 1;
                free(p), free(d);
        }
        char *cmd = strdup_printf("cd '%s' && git -c init.defaultBranch=main init -q && git add -A && "
                                  "git -c gc.auto=0 -c user.name=b -c user.email=b@x commit -qm init && git gc -q",
                                  dir);
        if (sh(cmd) != 0) return 1;
        free(cmd);
        fprintf(stderr, "created %d files in %.1f s\n", n, now_s() - t0);

        /* warm cache, best of 3 */
        cmd = strdup_printf("cd '%s' && git status --porcelain >/dev/null", dir);
        double status_s = 1e9;
        for (int i = 0; i < 4; i++) {
                double s = now_s();
                if (sh(cmd) != 0) return 1;
                if (i > 0 && now_s() - s < status_s) status_s = now_s() - s;
        }
        free(cmd);

        run_result rr;
        char *head_argv[] = {(char *) "git", (char *) "-C", dir, (char *) "rev-parse", (char *) "HEAD", NULL};
        if (run_command(head_argv, NULL, NULL, 4096, -1, &rr) < 0 || rr.exit_code != 0) return 1;
        rr.out[strcspn(rr.out, "\n")] = 0;
        char *head = strdup(rr.out);
        run_result_done(&rr);

        char *err = NULL;
        double s = now_s();
        if (changeset_snapshot(dir, head, base, &err) < 0) {
                fprintf(stderr, "snapshot: %s\n", err);
                return 1;
        }
        double snap_s = now_s() - s;

        /* 10 files spread over the tree */
        char *script = NULL;
        {
                size_t size = 0;
                FILE *f = open_memstream(&script, &size);
                for (int i = 0; i < 10; i++) fprintf(f, "echo edited >> d%03d/f%05d.txt; ", (n / 10 * i + 7) / 100, n / 10 * i + 7);
                fclose(f);
        }
        if (worker(dir, upper, work, script) != 0) return 1;

        changeset_extract_args a = {.directory = dir, .upper = upper, .work = work, .pre_head = head,
                                    .overlay_root = root, .base_dir = base, .patch_path = patch};
        double best_new = 1e9;
        for (int i = 0; i < 3; i++) {
                s = now_s();
                if (changeset_extract(&a, &err) != 1) {
                        fprintf(stderr, "extract: %s\n", err);
                        return 1;
                }
                if (now_s() - s < best_new) best_new = now_s() - s;
        }
        unsigned files = 0;
        changeset_numstat(patch, &files, NULL, NULL);
        changeset_extract_args b = a;
        b.base_dir = NULL;
        b.patch_path = patch_old;
        s = now_s();
        if (changeset_extract(&b, &err) != 1) {
                fprintf(stderr, "extract (no base): %s\n", err);
                return 1;
        }
        double old_s = now_s() - s;

        printf("repository: %d files, %u edited\n", n, files);
        printf("git status:                  %8.3f s\n", status_s);
        printf("snapshot (before the worker): %7.3f s  (%.1fx git status)\n", snap_s, snap_s / status_s);
        printf("extraction with the base:    %8.3f s  (%.1fx git status; goal <= 3x)\n", best_new, best_new / status_s);
        printf("extraction without a base:   %8.3f s  (%.1fx git status; the old whole-tree comparison)\n", old_s,
               old_s / status_s);
        if (!getenv("BENCH_KEEP")) (void) rm_rf(root);
        else printf("kept %s\n", root);
        return 0;
}
