#pragma once
/* Where taskferry keeps its files: each path from its environment variable
 * (an empty one counts as unset) or the XDG default, as the fields below
 * say. */

typedef struct tf_paths {
        char *home;             /* $HOME or the passwd entry */
        char *state_dir;        /* $TASKFERRY_STATE_DIR || ${XDG_STATE_HOME:-~/.local/state}/taskferry */
        char *runtime_dir;      /* $TASKFERRY_RUNTIME_DIR || $XDG_RUNTIME_DIR/taskferry ||
                                   /run/user/<uid>/taskferry (if /run/user/<uid> is a dir) || <state>/run */
        char *cache_dir;        /* $TASKFERRY_CACHE_DIR || ${XDG_CACHE_HOME:-~/.cache}/taskferry */
        char *socket_path;      /* $TASKFERRY_SOCKET_PATH || <runtime>/daemon.sock */
        char *overlay_tmp_root; /* $TASKFERRY_OVERLAY_TMP_DIR || <state>/overlays (was <runtime>/overlay:
                                   records keep their own overlayDirs.tmpRoot) */
        char *config_file;      /* ${XDG_CONFIG_HOME:-~/.config}/taskferry/config.json */
} tf_paths;

/* Resolve every path from the environment. Empty variables count as unset.
 * Relative overrides are made absolute against the cwd. -ENOMEM, -ENOENT (no home). */
int tf_paths_resolve(tf_paths *p);
void tf_paths_done(tf_paths *p);

/* Per-task paths under the state dir (malloc'd; NULL on ENOMEM). */
char *tf_path_log(const tf_paths *p, const char *task_id);        /* <state>/logs/<id>.ndjson */
char *tf_path_output_dir(const tf_paths *p, const char *task_id); /* <state>/outputs/<id> */
char *tf_path_task_dir(const tf_paths *p, const char *task_id);   /* <state>/tasks/<id> */
char *tf_path_check_dir(const tf_paths *p, const char *task_id);  /* <state>/tasks/<id>/check: a check gate's run */
char *tf_path_diff(const tf_paths *p, const char *task_id);       /* <state>/diffs/<id>.patch */
char *tf_path_prompt(const tf_paths *p, const char *task_id);     /* <state>/prompts/<id>.prompt.txt */
char *tf_path_summary_snapshot(const tf_paths *p, const char *task_id); /* <state>/summaries/<id>.json */
char *tf_path_overlay_root(const tf_paths *p, const char *task_id); /* <overlayTmpRoot>/taskferry-cow-<id> */
