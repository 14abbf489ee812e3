#pragma once
/* Boot sweeps: what no task owns any more, removed once at daemon start,
 * after tasks.json is loaded and once this daemon owns the socket (a
 * second daemon's stale view of tasks.json must not sweep what the first
 * one just created).
 *
 *  - overlays: every `taskferry-cow-<id>` entry directly under the overlay
 *    tmp root (paths.h) and under every tmpRoot a record names is kept only
 *    if task <id> exists, its overlayDirs.root is that path and its
 *    changesetStatus is "pending" (or it is still queued/running);
 *    otherwise it goes (an unknown id, a settled task's leftover, a
 *    no-overlay snapshot root). A task whose overlay went, or whose
 *    recorded overlay no longer exists while nothing is pending, gets
 *    overlayDirs = null (SweepTable.overlay_released);
 *  - output dirs: every entry of <state>/outputs whose name is not a task id;
 *  - prompt files: <state>/prompts/<id>.prompt.txt of a task not queued or
 *    running.
 *  - task dirs: <state>/tasks/<id> of an unknown id; in a known task's dir
 *    its launch request (pending-launch.json, launch-options.h) unless the task is
 *    queued or running, and temp files of an interrupted write of one.
 *
 * Safety: nothing is followed (a symlink entry is unlinked, its target never
 * touched); an entry not owned by our uid, or with a mount point at or
 * below it (/proc/self/mountinfo: a crashed shim's overlay mount, which we
 * cannot unmount unprivileged), is skipped with a warning; removal never
 * crosses a filesystem boundary.
 *
 * Bounded: each doomed entry is only rename(2)d into a trash dir of its own
 * root (<root>/.taskferry-trash) on the loop; a detached grandchild empties
 * the trash dirs (also what an earlier, killed deleter left), so a huge
 * overlay never blocks the start. */

#include <stdbool.h>
#include <stddef.h>

#include "paths.h"

/* What the sweeps need to know of one task. Strings are borrowed and must
 * stay valid for the duration of sweep_run(). */
typedef struct SweepTask {
        const char *id;
        const char *status;           /* the record's status ("queued", "running", "done", ...) */
        const char *changeset_status; /* "none" | "pending" | "accepted" | "rejected" (NULL: "none") */
        const char *overlay_root;     /* overlayDirs.root; NULL when overlayDirs is null */
        const char *overlay_tmp_root; /* overlayDirs.tmpRoot; NULL when absent */
} SweepTask;

/* The task table as the sweeps see it. */
typedef struct SweepTable {
        size_t n_tasks;
        /* Fill *ret for task i (0 <= i < n_tasks). */
        void (*get)(void *userdata, size_t i, SweepTask *ret);
        /* Task i's overlay is gone: set its overlayDirs to null and persist. */
        void (*overlay_released)(void *userdata, size_t i);
        void *userdata;
} SweepTable;

/* Run the sweeps. Only call with a table that was loaded (never after a
 * tasks.json load error: every entry would look orphaned). Returns the
 * number of entries removed (moved to the trash), or -errno (-ENOMEM). */
int sweep_run(const tf_paths *p, const SweepTable *table);

/* Name of the trash dir inside each swept root. */
#define SWEEP_TRASH_NAME ".taskferry-trash"

typedef struct Manager Manager;
/* The daemon's adapter: sweep_run() over m's task table (skipped, with a
 * warning, when tasks.json could not be read). */
int manager_sweep(Manager *m);
