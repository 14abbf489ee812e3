/* cgroup v2 files of the calling process's own cgroup (cgroup-util.h). */
#include "cgroup-util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "string-util.h"

static bool access_child(const char *dir, const char *name) {
        _cleanup_free_ char *p = strdup_printf("%s/%s", dir, name);
        return p && access(p, W_OK) == 0;
}

/* Write text to an existing file (a cgroup knob): no O_CREAT. */
static int write_string_to(const char *path, const char *text) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) return -errno;
        return loop_write(fd, text, strlen(text));
}

int cgroup_keyed_counter(const char *text, const char *key, uint64_t *ret) {
        if (!text || !key) return -ENOENT;
        size_t kl = strlen(key);
        for (const char *line = text; *line;) {
                const char *end = strchrnul(line, '\n');
                if ((size_t) (end - line) > kl + 1 && strncmp(line, key, kl) == 0 && line[kl] == ' ') {
                        const char *p = line + kl + 1;
                        if (*p < '0' || *p > '9') return -EINVAL;
                        uint64_t v = 0;
                        for (; p < end && *p >= '0' && *p <= '9'; p++) {
                                uint64_t d = (uint64_t) (*p - '0');
                                if (v > (UINT64_MAX - d) / 10) return -EINVAL;
                                v = v * 10 + d;
                        }
                        if (p != end) return -EINVAL;
                        *ret = v;
                        return 0;
                }
                line = *end ? end + 1 : end;
        }
        return -ENOENT;
}

int cgroup_memory_events_oom_kills(const char *text, uint64_t *ret) {
        return cgroup_keyed_counter(text, "oom_kill", ret);
}

int cgroup_self_path(const char *text, char **ret) {
        if (!text) return -ENOENT;
        for (const char *line = text; *line;) {
                const char *end = strchrnul(line, '\n');
                if (startswith(line, "0::") && end - line > 3) {
                        _cleanup_free_ char *p = strndup(line + 3, (size_t) (end - line - 3));
                        if (!p) return -ENOMEM;
                        if (p[0] != '/' || strstr(p, "/..") || strchr(p, '\n')) return -EINVAL;
                        *ret = TAKE_PTR(p);
                        return 0;
                }
                line = *end ? end + 1 : end;
        }
        return -ENOENT;
}

int cgroup_self_oom_kills(uint64_t *ret) {
        _cleanup_free_ char *data = NULL, *path = NULL;
        size_t len = 0;
        int r = read_file("/proc/self/cgroup", 65536, &data, &len);
        if (r < 0) return r;
        r = cgroup_self_path(data, &path);
        if (r < 0) return r == -EINVAL ? -ENOENT : r;
        /* the root cgroup has no memory.events */
        if (!path[1]) return -ENOENT;
        _cleanup_free_ char *file = strdup_printf("/sys/fs/cgroup%s/memory.events", path);
        if (!file) return -ENOMEM;
        _cleanup_free_ char *ev = NULL;
        r = read_file(file, 65536, &ev, &len);
        if (r < 0) return r;
        return cgroup_memory_events_oom_kills(ev, ret);
}

const char *cgroup_v2_root(const char *root_override) {
        if (root_override) return root_override;
        static const char *const cands[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
        for (size_t i = 0; i < ELEMENTSOF(cands); i++) {
                struct statfs sf;
                if (statfs(cands[i], &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC) return cands[i];
        }
        return NULL;
}

/* Does the space-separated word list hold both memory and pids? */
static bool has_memory_and_pids(const char *list) {
        bool mem = false, pids = false;
        for (const char *p = list; p && *p;) {
                p += strspn(p, " \t\n");
                size_t n = strcspn(p, " \t\n");
                if (n == 6 && strncmp(p, "memory", 6) == 0) mem = true;
                if (n == 4 && strncmp(p, "pids", 4) == 0) pids = true;
                p += n;
        }
        return mem && pids;
}

static int read_small(const char *dir, const char *name, char **ret) {
        _cleanup_free_ char *p = strdup_printf("%s/%s", dir, name);
        if (!p) return -ENOMEM;
        size_t len;
        return read_file(p, 65536, ret, &len);
}

int cgroup_delegated_parent(const char *root, const char *self_rel, char **ret, char **ret_why) {
        *ret = NULL;
        *ret_why = NULL;
        if (!root) return (*ret_why = strdup("no cgroup v2 hierarchy is mounted")) ? -ENOENT : -ENOMEM;
        if (!self_rel || self_rel[0] != '/')
                return (*ret_why = strdup("the process is in no cgroup v2")) ? -ENOENT : -ENOMEM;
        bool at_root = !self_rel[1];
        _cleanup_free_ char *rel = strdup(self_rel);
        if (!rel) return -ENOMEM;
        if (!at_root) {
                char *sl = strrchr(rel, '/');
                sl[sl == rel ? 1 : 0] = 0;
        }
        _cleanup_free_ char *dir = strdup_printf("%s%s", root, streq(rel, "/") ? "" : rel);
        if (!dir) return -ENOMEM;
        _cleanup_free_ char *ctl = NULL, *sub = NULL;
        int r = read_small(dir, "cgroup.controllers", &ctl);
        if (r == -ENOMEM) return r;
        if (r < 0 || !has_memory_and_pids(ctl)) {
                *ret_why = strdup_printf("the cgroup v2 %s has no memory and pids controllers", dir);
                return *ret_why ? -ENOENT : -ENOMEM;
        }
        if (access(dir, W_OK) < 0 || !access_child(dir, "cgroup.procs")) {
                *ret_why = strdup_printf("the cgroup v2 %s is not delegated to this user", dir);
                return *ret_why ? -ENOENT : -ENOMEM;
        }
        r = read_small(dir, "cgroup.subtree_control", &sub);
        if (r == -ENOMEM) return r;
        if (r >= 0 && !has_memory_and_pids(sub) && at_root) {
                _cleanup_free_ char *p = strdup_printf("%s/cgroup.subtree_control", dir);
                if (!p) return -ENOMEM;
                (void) write_string_to(p, "+memory +pids");
                free(sub);
                sub = NULL;
                r = read_small(dir, "cgroup.subtree_control", &sub);
        }
        if (r < 0 || !has_memory_and_pids(sub)) {
                *ret_why = strdup_printf("the cgroup v2 %s does not enable memory and pids for its children", dir);
                return *ret_why ? -ENOENT : -ENOMEM;
        }
        *ret = TAKE_PTR(dir);
        return 0;
}
