#pragma once
/* Git workspace roots (spec protocol-cli.md §1.9, lifecycle.md §7.4),
 * computed from the filesystem only (no git process): the parent of the
 * common git dir; a submodule's own top; dir itself when not in a
 * repository. */

#include <stdbool.h>

/* The workspace root of dir, malloc'd; NULL on ENOMEM. */
char *workspace_root(const char *dir);
/* a == b, or both have the same workspace root. */
bool same_workspace(const char *a, const char *b);
