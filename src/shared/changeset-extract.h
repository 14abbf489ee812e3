#pragma once
/* Extraction with a base snapshot: the patch of the paths the overlay's
 * upper dir lists, and the first and last steps that both extractions
 * share. -errno on failure, with *reason set. */

#include <stddef.h>

#include "changeset-git.h"
#include "changeset-paths.h"

/* D and a->scratch_dir, resolved; the scratch dir must lie outside D (inside
 * it, the merged view would let the worker plant our git state). 0, or
 * -errno (*reason set). */
int extract_resolve(const changeset_extract_args *a, char **ret_dir, char **ret_scratch, char **reason);

/* The end of an extraction, in the host view: the changes inside a
 * repository shape (or below core.hooksPath, hooks_rel) left out of after
 * (rewritten in place: after_size bytes), then the patch before..after
 * written to a->patch_path (atomically, 0600) and the warnings handed over.
 * With check_scratch, a non-empty patch is written only if it applies to
 * before (checked with an index in that directory). 1 if the patch is
 * non-empty, 0 if empty, -errno (*reason set). */
int extract_finish(const changeset_extract_args *a, const git_ctx *g, const char *dir, const char *hooks_rel,
                   const char *before, char *after, size_t after_size, warnings *w, const char *check_scratch,
                   char **reason);

/* Extraction with a base snapshot (a->base_dir, its tree base_tree): only
 * the paths the upper dir lists, in the resolved D dir with the scratch dir
 * scratch. 1 non-empty patch, 0 empty, -EXDEV when the upper dir cannot be
 * read without the lower (an overlay.metacopy or overlay.redirect entry:
 * the caller compares whole trees), -errno (*reason set). */
int extract_touched(const changeset_extract_args *a, const char *dir, const char *scratch, const char *base_tree,
                    char **reason);
