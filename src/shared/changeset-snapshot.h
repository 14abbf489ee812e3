#pragma once
/* The base snapshot of a changeset (changeset_snapshot(), changeset.h): D
 * as it was when the worker started, in <overlay root>/base:
 *   BASE_TREE_NAME     "<tree id>\n"
 *   BASE_EXCLUDE_NAME  the ignore rules in effect then
 *   BASE_GIT_NAME/     a private repository whose objects/ hold what the real
 *                      repository's object store lacks
 * Extraction with a base and the 3-way accept read it. */

#include "changeset-git.h"

#define BASE_TREE_NAME "tree"
#define BASE_EXCLUDE_NAME "exclude"
#define BASE_GIT_NAME SCRATCH_GIT_NAME

/* The base tree id in base_dir, or NULL (none, unreadable, malformed). */
char *base_tree_read(const char *base_dir);

/* "<base_dir>/git/objects": the base's private object store. */
char *base_objects_dir(const char *base_dir);

/* changeset_snapshot() once git is known to be recent enough: 0, or -errno
 * with *reason set. */
int snapshot_take(const char *directory, const char *pre_head, const char *base_dir, char **reason);
