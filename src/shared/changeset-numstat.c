/* A patch's paths and line counts, from `git apply --numstat -z`
 * (changeset-numstat.h). */
#include "changeset-numstat.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "changeset.h"
#include "git-output.h"
#include "macro.h"
#include "process-util.h"
#include "strv.h"

/* Each entry of `git apply --numstat -z` output to cb (git-output.h reads
 * them); a malformed entry ends the list. */
typedef void (*numstat_cb)(void *userdata, const GitNumstat *e);
static void numstat_parse(const char *out, size_t len, numstat_cb cb, void *userdata) {
        GitNumstat e;
        for (const char *p = out; git_numstat_next(&p, out + len, &e) > 0;) cb(userdata, &e);
}

/* The paths of a patch, each once, sorted (strcmp): collected in O(1) per
 * path, sorted and deduplicated once by path_list_finish() (a search per
 * insert made a 10,000-file patch cost 50 million string compares). */
typedef struct path_list {
        char **paths; /* NULL-terminated */
        size_t n, allocated;
        int r;
} path_list;

static void path_list_add(path_list *pl, const char *path) {
        if (pl->r < 0) return;
        if (pl->n + 2 > pl->allocated) {
                size_t na = pl->allocated ? 2 * pl->allocated : 64;
                char **np = reallocarray(pl->paths, na, sizeof *np);
                if (!np) {
                        pl->r = -ENOMEM;
                        return;
                }
                pl->paths = np;
                pl->allocated = na;
        }
        if (!(pl->paths[pl->n] = strdup(path))) {
                pl->r = -ENOMEM;
                return;
        }
        pl->paths[++pl->n] = NULL;
}

static void collect_paths(void *userdata, const GitNumstat *e) {
        path_list *pl = userdata;
        if (e->old_path) path_list_add(pl, e->old_path);
        path_list_add(pl, e->path);
}

static void path_list_finish(path_list *pl) {
        if (pl->n == 0) return;
        qsort(pl->paths, pl->n, sizeof *pl->paths, cs_strp_cmp);
        size_t k = 1;
        for (size_t i = 1; i < pl->n; i++) {
                if (streq(pl->paths[i], pl->paths[k - 1])) free(pl->paths[i]);
                else pl->paths[k++] = pl->paths[i];
        }
        pl->paths[k] = NULL;
        pl->n = k;
}

int patch_paths(const git_ctx *g, const char *cwd, const char *patch, char ***ret, char **reason) {
        char *args[] = {(char *) "apply", (char *) "--numstat", (char *) "-z", (char *) patch, NULL};
        run_result rr;
        int r = git_ok(g, cwd, LIST_MAX, &rr, reason, "apply --numstat", args);
        if (r < 0) return r;
        path_list pl = {};
        numstat_parse(rr.out, rr.out_len, collect_paths, &pl);
        path_list_finish(&pl);
        run_result_done(&rr);
        if (pl.r < 0) {
                strv_free(pl.paths);
                return pl.r;
        }
        *ret = pl.paths;
        return 0;
}

typedef struct numstat_sum {
        unsigned files, additions, deletions;
} numstat_sum;

static unsigned sat_add(unsigned a, unsigned b) {
        return a > UINT_MAX - b ? UINT_MAX : a + b;
}

static void sum_numstat(void *userdata, const GitNumstat *e) {
        numstat_sum *s = userdata;
        s->files = sat_add(s->files, 1);
        s->additions = sat_add(s->additions, e->adds);
        s->deletions = sat_add(s->deletions, e->dels);
}

int changeset_numstat(const char *patch_path, unsigned *files, unsigned *additions, unsigned *deletions) {
        numstat_sum s = {};
        int r = 0;
        _cleanup_free_ char *patch = patch_path ? realpath(patch_path, NULL) : NULL;
        if (patch) {
                /* Outside any repository: no config, attributes or discovery. */
                _cleanup_(git_ctx_done) git_ctx g = {.home = strdup("/nonexistent")};
                r = g.home ? git_ctx_build_env(&g) : -ENOMEM;
                char *args[] = {(char *) "apply", (char *) "--numstat", (char *) "-z", patch, NULL};
                run_result rr;
                if (r >= 0) r = run_git_argv(&g, "/", LIST_MAX, &rr, args);
                if (r >= 0) {
                        if (rr.exit_code == 0) numstat_parse(rr.out, rr.out_len, sum_numstat, &s);
                        run_result_done(&rr);
                }
                if (r == -EFBIG) r = 0;
        }
        if (files) *files = s.files;
        if (additions) *additions = s.additions;
        if (deletions) *deletions = s.deletions;
        return r < 0 ? r : 0;
}
