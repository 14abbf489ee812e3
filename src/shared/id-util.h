#pragma once
/* Random ids: UUID v4 and the task ids made of one. */

#include <stdbool.h>

/* A random UUID v4 (getrandom(2)), lowercase, 36 chars + NUL. 0, or -errno
 * from getrandom. */
int uuid4(char out[static 37]);
/* A new task id: "oc_", the wall clock in milliseconds in base 36, "_", then
 * the first 8 hex digits of a UUID v4 ("oc_mrutsm8i_764c0067"). Every kind of
 * task, whatever its executor, has an id of this one form. malloc'd, NULL on
 * ENOMEM or when no random bytes could be had. */
char *task_id_new(void);
/* Does s look like a task id, safe to use as a path component: 1..64
 * characters of [A-Za-z0-9_-], neither "." nor ".."? */
bool task_id_is_valid(const char *s);
