#pragma once
/* Path strings and the executables found along $PATH. Errors are -errno. */

#include <stdbool.h>

/* The directory part of p as a new string: "/a/b" → "/a", "/a" → "/",
 * "/" → "/", and a path without a slash is returned as is (p's own parent
 * is not known). Trailing slashes are not stripped first ("/a/" → "/a").
 * malloc'd, NULL on ENOMEM. */
char *path_parent(const char *p);
/* Does path equal dir or lie below it? Plain string test on absolute,
 * canonical paths ("/" contains everything; "/a" does not contain "/ab"). */
bool path_is_at_or_below(const char *path, const char *dir);
/* Is one of a and b at or below the other (same rules)? */
bool paths_overlap(const char *a, const char *b);
/* Resolve `name` against path_env (a colon list; NULL → getenv("PATH"), or
 * "/usr/local/bin:/usr/bin:/bin" when unset) to a regular file we may
 * execute; *ret malloc'd. A name with a slash is checked as is (access X_OK:
 * its -errno). -ENOENT when no entry has it. */
int find_executable(const char *name, const char *path_env, char **ret);
/* Directory of the running executable (/proc/self/exe), malloc'd. */
int self_exe_dir(char **ret);
