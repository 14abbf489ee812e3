#pragma once
/* A patch's paths and line counts, read with `git apply --numstat -z`
 * (changeset_numstat() of changeset.h is the counts). */

#include "changeset-git.h"

/* The paths a patch touches (both sides of a rename), each once, sorted
 * (strcmp): `git apply --numstat -z` run with g in cwd. 0 with *ret
 * (NULL-terminated; NULL when none), -errno (*reason set when git failed). */
int patch_paths(const git_ctx *g, const char *cwd, const char *patch, char ***ret, char **reason);
