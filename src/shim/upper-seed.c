/* Seeding overlay upper dirs from a parent task's (upper-seed.h). */
#include "upper-seed.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

/* Remove what dir holds, keeping dir itself (its mode is the merged view's
 * top directory's). Best effort: what cannot be removed stays. */
static void empty_dir(const char *dir) {
        DIR *d = opendir(dir);
        if (!d) return;
        for (struct dirent *de; (de = readdir(d));) {
                if (streq(de->d_name, ".") || streq(de->d_name, "..")) continue;
                _cleanup_free_ char *p = strdup_printf("%s/%s", dir, de->d_name);
                if (p) (void) rm_rf(p);
        }
        closedir(d);
}

static int copy_one(const sandbox_seed *e, char **reason) {
        _cleanup_free_ char *from = strdup_printf("%s/.", e->src);
        if (!from) return -ENOMEM;
        if (!is_dir(e->src) || !is_dir(e->dest)) {
                *reason = strdup_printf("cannot seed %s from %s: %s is not a directory", e->dest, e->src,
                                        is_dir(e->src) ? e->dest : e->src);
                return -ENOTDIR;
        }
        /* -a: devices (whiteouts), xattrs (opaque dirs), modes, times, symlinks as such */
        char *argv[] = {(char *) "cp", (char *) "-a", (char *) "--no-dereference", (char *) "--reflink=auto", from,
                        (char *) e->dest, NULL};
        run_result rr;
        int r = run_command(argv, NULL, NULL, 65536, -1, &rr);
        if (r < 0) {
                *reason = strdup_printf("cannot run cp to seed %s from %s: %s", e->dest, e->src, strerror(-r));
                return r;
        }
        if (rr.exit_code != 0) {
                _cleanup_free_ char *err = rr.err ? strdup(rr.err) : NULL;
                if (err) {
                        size_t len = strlen(err);
                        while (len > 0 && strchr(" \t\r\n", err[len - 1])) err[--len] = 0;
                }
                *reason = strdup_printf("copying %s into %s failed (cp exited with status %d): %s", e->src, e->dest,
                                        rr.exit_code, strempty(err));
                r = -EIO;
        }
        run_result_done(&rr);
        return r;
}

int upper_seeds_copy(const sandbox_seed *seeds, size_t n, char **reason) {
        for (size_t i = 0; i < n; i++) {
                int r = copy_one(&seeds[i], reason);
                if (r >= 0) continue;
                for (size_t k = 0; k <= i; k++)
                        if (is_dir(seeds[k].dest)) empty_dir(seeds[k].dest);
                return r;
        }
        return 0;
}
