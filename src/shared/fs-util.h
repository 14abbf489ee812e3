#pragma once
/* Creating, removing and testing directories. Errors are -errno. */

#include <stdbool.h>
#include <sys/types.h>

/* mkdir -p with `mode` for every created component (as the umask lets it);
 * -ENOTDIR when path exists and is no directory. */
int mkdir_p(const char *path, mode_t mode);
/* mkdir -p, then chmod the last component to `mode`: whatever the umask,
 * and also when it existed before. */
int mkdir_p_chmod(const char *path, mode_t mode);
/* Recursively remove path, making directories writable first (overlayfs work
 * dirs end up mode 000). A missing path is success. Does not follow
 * symlinks. The first error is returned; the other entries of a directory
 * are still removed after it. */
int rm_rf(const char *path);
/* True if path is a directory (follows symlinks). */
bool is_dir(const char *path);
