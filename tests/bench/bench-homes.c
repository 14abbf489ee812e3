/* Benchmark: the per-task cost of the sandbox a launch builds (figures only;
 * never a pass/fail timing):
 *   - sandbox_plan_build: the mount list (stats the system roots, the home
 *     allow-list, the masks),
 *   - executor_home_plan for pi and OpenCode (reads the user's agent/config
 *     dirs),
 *   - creating the homes as the shim does (mkdir -p of every dir) and
 *     releasing them (executor_home_release),
 * against a fake home with a pi agent dir of N extensions and an OpenCode
 * config dir. Usage: bench-homes [iterations, default 2000] */

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "run/executor-home.h"
#include "host-masks.h"
#include "sandbox-plan.h"
#include "fileio.h"
#include "fs-util.h"
#include "string-util.h"
#include "strv.h"

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void put(const char *root, const char *rel) {
        char *p = strdup_printf("%s/%s", root, rel);
        char *d = strdup(p);
        *strrchr(d, '/') = 0;
        (void) mkdir_p(d, 0700);
        (void) write_file_atomic(p, "{}", 2, 0600);
        free(p), free(d);
}

int main(int argc, char **argv) {
        int n = argc > 1 ? atoi(argv[1]) : 2000;
        if (n <= 0) n = 2000;
        char root[] = "/var/tmp/tf-bench-homes-XXXXXX";
        if (!mkdtemp(root)) return 1;
        char *home = strdup_printf("%s/home", root), *cache = strdup_printf("%s/cache", root);
        static const char *const files[] = {".pi/agent/auth.json", ".pi/agent/models.json", ".pi/agent/settings.json",
                                            ".pi/agent/extensions/a.ts", ".local/share/opencode/auth.json",
                                            ".config/opencode/opencode.json", ".gitconfig", ".local/bin/pi",
                                            ".ssh/id_ed25519", ".netrc", "work/repo/f"};
        for (size_t i = 0; i < sizeof files / sizeof *files; i++) put(home, files[i]);
        char *dir = strdup_printf("%s/work/repo", home), *state = strdup_printf("%s/state", root);
        char **deny = NULL;
        if (sandbox_deny_list(home, state, NULL, &deny) < 0) return 1;
        char *structural[] = {cache, NULL};
        char *env[] = {NULL};

        double t0 = now_s();
        size_t mounts = 0;
        for (int i = 0; i < n; i++) {
                sandbox_mount *m = NULL;
                size_t k = 0;
                sandbox_plan_args a = {.home = home, .directory = dir, .deny = deny, .structural = structural};
                if (sandbox_plan_build(&a, &m, &k, NULL) < 0) return 1;
                mounts = k;
                sandbox_mounts_free(m, k);
        }
        double plan_us = (now_s() - t0) / n * 1e6;

        /* a whole walk of /etc and /opt for what the sandbox masks (host-masks.h):
         * the daemon's host watch keeps it current; a shim walks only without one */
        int scans = n / 100 > 0 ? n / 100 : 1, found = 0;
        bool partial = false;
        double ts = now_s();
        for (int i = 0; i < scans; i++) {
                HostMaskList l = {0};
                if (host_masks_scan(HOST_MASKS_SCAN_MAX, geteuid() == 0, &l) < 0) return 1;
                found = (int) l.n;
                partial = l.partial;
                host_mask_list_done(&l);
        }
        double scan_ms = (now_s() - ts) / scans * 1e3;

        static const char *const exes[] = {"pi", "opencode"};
        for (size_t e = 0; e < 2; e++) {
                double tp = 0, tc = 0, tr = 0;
                size_t dirs = 0, hm = 0;
                for (int i = 0; i < n; i++) {
                        char id[32];
                        snprintf(id, sizeof id, "oc_bench_%08d", i);
                        executor_home h = {0};
                        executor_home_args a = {.executor = exes[e], .task_id = id, .cache_dir = cache, .home = home,
                                                .env = env, .deny = deny};
                        double s = now_s();
                        if (executor_home_plan(&a, &h) < 0) return 1;
                        double s1 = now_s();
                        for (char **d = h.dirs; d && *d; d++) (void) mkdir_p(*d, 0700);
                        double s2 = now_s();
                        (void) executor_home_release(h.root);
                        (void) rm_rf(h.root);
                        double s3 = now_s();
                        tp += s1 - s, tc += s2 - s1, tr += s3 - s2;
                        dirs = strv_length(h.dirs), hm = h.n_mounts;
                        executor_home_done(&h);
                }
                printf("%-8s home: plan %6.1f us, create %6.1f us (%zu dirs), release+remove %6.1f us; %zu mounts\n",
                       exes[e], tp / n * 1e6, tc / n * 1e6, dirs, tr / n * 1e6, hm);
        }
        printf("sandbox plan: %6.1f us per launch (%zu mounts), %d iterations\n", plan_us, mounts, n);
        printf("whole walk of /etc and /opt (a shim without the daemon's host watch): %6.2f ms, %d entries to mask%s, %d runs\n", scan_ms,
               found, partial ? " (entry cap hit)" : "", scans);
        strv_free(deny);
        (void) rm_rf(root);
        free(home), free(cache), free(dir), free(state);
        return 0;
}
