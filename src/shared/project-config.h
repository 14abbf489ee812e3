#pragma once
/* PLACEHOLDER: replaced by the toml helper's module at merge. */
#include <stdbool.h>
#include <stdint.h>
char *project_config_path(const char *dir);
typedef struct ProjectConfig {
        char *path;
        bool exists;
        char *check;
        uint64_t check_timeout_s;
        char **ro_bind;
        char **review_paths;
        char *warning;
} ProjectConfig;
int project_config_load(const char *dir, ProjectConfig *ret);
void project_config_done(ProjectConfig *c);
int project_binds_resolve(char *const *entries, const char *repo_root, const char *home, char *const *trusted,
                          char *const *protected_, char ***ret_binds, char **ret_warning);
