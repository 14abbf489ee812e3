#include "paths.h"

#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs-util.h"
#include "string-util.h"

static const char *env_nonempty(const char *name) {
        const char *v = getenv(name);
        return v && *v ? v : NULL;
}

static char *absolute(const char *p) {
        if (p[0] == '/') return strdup(p);
        char *cwd = getcwd(NULL, 0);
        if (!cwd) return NULL;
        char *r = strdup_printf("%s/%s", cwd, p);
        free(cwd);
        return r;
}

int tf_paths_resolve(tf_paths *p) {
        memset(p, 0, sizeof *p);
        const char *home = env_nonempty("HOME");
        if (!home) {
                struct passwd *pw = getpwuid(getuid());
                if (!pw || !pw->pw_dir) return -ENOENT;
                home = pw->pw_dir;
        }
        if (!(p->home = strdup(home))) goto oom;

        const char *v;
        if ((v = env_nonempty("TASKFERRY_STATE_DIR"))) p->state_dir = absolute(v);
        else if ((v = env_nonempty("XDG_STATE_HOME"))) p->state_dir = strdup_printf("%s/taskferry", v);
        else p->state_dir = strdup_printf("%s/.local/state/taskferry", home);
        if (!p->state_dir) goto oom;

        if ((v = env_nonempty("TASKFERRY_RUNTIME_DIR"))) p->runtime_dir = absolute(v);
        else if ((v = env_nonempty("XDG_RUNTIME_DIR"))) p->runtime_dir = strdup_printf("%s/taskferry", v);
        else {
                char run_user[64];
                snprintf(run_user, sizeof run_user, "/run/user/%u", (unsigned) getuid());
                if (is_dir(run_user)) p->runtime_dir = strdup_printf("%s/taskferry", run_user);
                else p->runtime_dir = strdup_printf("%s/run", p->state_dir);
        }
        if (!p->runtime_dir) goto oom;

        if ((v = env_nonempty("TASKFERRY_CACHE_DIR"))) p->cache_dir = absolute(v);
        else if ((v = env_nonempty("XDG_CACHE_HOME"))) p->cache_dir = strdup_printf("%s/taskferry", v);
        else p->cache_dir = strdup_printf("%s/.cache/taskferry", home);
        if (!p->cache_dir) goto oom;

        if ((v = env_nonempty("TASKFERRY_SOCKET_PATH"))) p->socket_path = absolute(v);
        else p->socket_path = strdup_printf("%s/daemon.sock", p->runtime_dir);
        if (!p->socket_path) goto oom;

        if ((v = env_nonempty("TASKFERRY_OVERLAY_TMP_DIR"))) p->overlay_tmp_root = absolute(v);
        /* real disk under the state dir, not the small runtime-dir tmpfs a
         * worker could fill; masked in every sandbox with the state dir */
        else p->overlay_tmp_root = strdup_printf("%s/overlays", p->state_dir);
        if (!p->overlay_tmp_root) goto oom;

        if ((v = env_nonempty("XDG_CONFIG_HOME"))) p->config_file = strdup_printf("%s/taskferry/config.json", v);
        else p->config_file = strdup_printf("%s/.config/taskferry/config.json", home);
        if (!p->config_file) goto oom;
        return 0;
oom:
        tf_paths_done(p);
        return -ENOMEM;
}

void tf_paths_done(tf_paths *p) {
        free(p->home);
        free(p->state_dir);
        free(p->runtime_dir);
        free(p->cache_dir);
        free(p->socket_path);
        free(p->overlay_tmp_root);
        free(p->config_file);
        memset(p, 0, sizeof *p);
}

char *tf_path_log(const tf_paths *p, const char *id) { return strdup_printf("%s/logs/%s.ndjson", p->state_dir, id); }
char *tf_path_output_dir(const tf_paths *p, const char *id) { return strdup_printf("%s/outputs/%s", p->state_dir, id); }
char *tf_path_task_dir(const tf_paths *p, const char *id) { return strdup_printf("%s/tasks/%s", p->state_dir, id); }
char *tf_path_check_dir(const tf_paths *p, const char *id) { return strdup_printf("%s/tasks/%s/check", p->state_dir, id); }
char *tf_path_diff(const tf_paths *p, const char *id) { return strdup_printf("%s/diffs/%s.patch", p->state_dir, id); }

char *tf_path_prompt(const tf_paths *p, const char *id) { return strdup_printf("%s/prompts/%s.prompt.txt", p->state_dir, id); }
char *tf_path_summary_snapshot(const tf_paths *p, const char *id) {
        return strdup_printf("%s/summaries/%s.json", p->state_dir, id);
}
char *tf_path_overlay_root(const tf_paths *p, const char *id) {
        return strdup_printf("%s/taskferry-cow-%s", p->overlay_tmp_root, id);
}
