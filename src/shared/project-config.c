/* PLACEHOLDER: replaced by the toml helper's module at merge. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include "project-config.h"
#include "fileio.h"
#include "string-util.h"
#include "strv.h"
char *project_config_path(const char *dir) { return strdup_printf("%s/.taskferry.toml", dir); }
int project_config_load(const char *dir, ProjectConfig *ret) {
        *ret = (ProjectConfig) {.path = project_config_path(dir), .check_timeout_s = 900};
        char *data = NULL; size_t len = 0;
        if (read_file(ret->path, 1 << 20, &data, &len) < 0) return 0;
        ret->exists = true;
        char *c = strstr(data, "check = \"");
        if (c) { c += 9; char *e = strchr(c, '"'); if (e) ret->check = strndup(c, (size_t)(e - c)); }
        char *t = strstr(data, "check_timeout_seconds = ");
        if (t) ret->check_timeout_s = strtoull(t + 24, NULL, 10);
        free(data);
        return 0;
}
void project_config_done(ProjectConfig *c) {
        free(c->path); free(c->check); strv_free(c->ro_bind); strv_free(c->review_paths); free(c->warning);
        *c = (ProjectConfig) {0};
}
int project_binds_resolve(char *const *entries, const char *repo_root, const char *home, char *const *trusted,
                          char *const *protected_, char ***ret_binds, char **ret_warning) {
        (void) entries; (void) repo_root; (void) home; (void) trusted; (void) protected_;
        *ret_binds = NULL; *ret_warning = NULL; return 0;
}
