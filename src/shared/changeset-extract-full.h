#pragma once
/* Extraction without a base snapshot: the whole tree of D as the host sees
 * it against the merged view. It still runs where a task has no base
 * (records from before bases, a snapshot that failed, a git before 2.38) and
 * where the upper dir alone does not say what changed. */

#include "changeset.h"

/* Extraction without a base: the whole tree of D in the host view against
 * the merged view (see the top of changeset-extract-full.c). 1 non-empty
 * patch, 0 empty, -errno (*reason set). */
int extract_full(const changeset_extract_args *a, char **reason);
