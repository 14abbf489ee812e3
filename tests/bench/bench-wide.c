/* Benchmark: a wide change, the way a worker that generates or vendors a tree
 * makes one: N new files in one new directory (default 10000), plus an edit
 * of a tracked file, in a small repository. Figures only, never a pass/fail
 * timing (integration/test-attack-core's deep_and_wide_trees is the test).
 *
 * Takes the base snapshot as the shim does, lets a "worker" write the files
 * in a real overlay (user + mount namespace, as the shim mounts it), then
 * times each step the daemon takes for the task:
 *   - changeset_extract (settle: the patch of the upper dir's paths),
 *   - changeset_numstat (the counts `status` shows),
 *   - changeset_apply_3way (accept: the 3-way merge and the write-out of
 *     every file into the live tree, each atomically and fsynced),
 *   - changeset_is_applied_3way after it (an interrupted accept's check).
 * Usage: bench-wide [files, default 10000] [bytes per file, default 0] [new|edit, default new]
 * "edit": the N files are tracked in the repository already (dir x/) and
 * the worker appends a line to each (the accept then reads N live files). */

#include <errno.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
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
        int n = argc > 1 ? atoi(argv[1]) : 10000;
        int bytes = argc > 2 ? atoi(argv[2]) : 0;
        if (n < 1) n = 1;
        if (bytes < 0) bytes = 0;
        bool edit = argc > 3 && strcmp(argv[3], "edit") == 0;
        setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
        setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
        const char *tmp = getenv("TASKFERRY_TEST_TMPDIR");
        char *root = strdup_printf("%s/tf-bench-wide-XXXXXX", tmp && *tmp ? tmp : "/var/tmp");
        if (!mkdtemp(root)) return 1;
        char *dir = strdup_printf("%s/repo", root), *upper = strdup_printf("%s/upper", root),
             *work = strdup_printf("%s/work", root), *base = strdup_printf("%s/base", root),
             *patch = strdup_printf("%s/patch", root);
        if (mkdir_p(dir, 0755) < 0 || mkdir_p(upper, 0755) < 0 || mkdir_p(work, 0755) < 0) return 1;

        char *cmd = strdup_printf("cd '%s' && git -c init.defaultBranch=main init -q && printf 'one\\n' > a.txt && "
                                  "mkdir dir && echo x > dir/x && git add -A && "
                                  "git -c user.name=b -c user.email=b@x commit -qm init",
                                  dir);
        if (sh(cmd) != 0) return 1;
        free(cmd);
        if (edit) {
                cmd = strdup_printf("cd '%s' && mkdir x && cd x && seq 1 %d | xargs touch && cd .. && git add -A && "
                                    "git -c user.name=b -c user.email=b@x commit -qm x",
                                    dir, n);
                if (sh(cmd) != 0) return 1;
                free(cmd);
        }

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

        /* distinct contents when bytes > 0 (one blob per file), else all empty */
        char *script = edit ? strdup_printf("printf 'w\\n' >> a.txt; for f in x/*; do echo w >> $f; done") : bytes > 0 ? strdup_printf("printf 'w\\n' >> a.txt; mkdir wide; cd wide; i=0; "
                                                 "while [ $i -lt %d ]; do head -c %d /dev/zero | tr '\\0' x > f$i; "
                                                 "echo $i >> f$i; i=$((i+1)); done",
                                                 n, bytes)
                                 : strdup_printf("printf 'w\\n' >> a.txt; mkdir wide; cd wide; seq 1 %d | xargs touch", n);
        s = now_s();
        if (worker(dir, upper, work, script) != 0) return 1;
        double worker_s = now_s() - s;

        changeset_extract_args a = {.directory = dir, .upper = upper, .work = work, .pre_head = head,
                                    .overlay_root = root, .base_dir = base, .patch_path = patch};
        s = now_s();
        if (changeset_extract(&a, &err) != 1) {
                fprintf(stderr, "extract: %s\n", err);
                return 1;
        }
        double extract_s = now_s() - s;

        unsigned files = 0;
        s = now_s();
        changeset_numstat(patch, &files, NULL, NULL);
        double numstat_s = now_s() - s;

        char *reason = NULL;
        s = now_s();
        int r = changeset_apply_3way(dir, patch, base, &reason);
        double accept_s = now_s() - s;
        if (r != 1) {
                fprintf(stderr, "accept: %d %s\n", r, strnull(reason));
                return 1;
        }
        s = now_s();
        r = changeset_is_applied_3way(dir, patch, base);
        double applied_s = now_s() - s;
        if (r != 1) {
                fprintf(stderr, "is_applied after accept: %d\n", r);
                return 1;
        }

        if (edit) printf("change: a line appended to %d tracked files + 1 edit; patch: %u files\n", n, files);
        else printf("change: %d new files of %d bytes + 1 edit; patch: %u files\n", n, bytes, files);
        printf("snapshot (before the worker):  %8.3f s\n", snap_s);
        printf("worker (writes the files):     %8.3f s\n", worker_s);
        printf("extraction:                    %8.3f s  (%.0f us/file)\n", extract_s, extract_s / n * 1e6);
        printf("numstat:                       %8.3f s\n", numstat_s);
        printf("accept (3-way + write-out):    %8.3f s  (%.0f us/file)\n", accept_s, accept_s / n * 1e6);
        printf("is-applied check after it:     %8.3f s\n", applied_s);
        if (!getenv("BENCH_KEEP")) (void) rm_rf(root);
        else printf("kept %s\n", root);
        return 0;
}
