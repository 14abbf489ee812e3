/* cgroup v2 files of the calling process's own cgroup (cgroup-util.h). */
#include "cgroup-util.h"

#include <errno.h>
#include <string.h>

#include "fileio.h"
#include "macro.h"
#include "string-util.h"

int cgroup_memory_events_oom_kills(const char *text, uint64_t *ret) {
        if (!text) return -ENOENT;
        for (const char *line = text; *line;) {
                const char *end = strchrnul(line, '\n');
                if ((size_t) (end - line) > 9 && strncmp(line, "oom_kill ", 9) == 0) {
                        const char *p = line + 9;
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

int cgroup_self_oom_kills(uint64_t *ret) {
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = read_file("/proc/self/cgroup", 65536, &data, &len);
        if (r < 0) return r;
        const char *path = NULL;
        for (char *line = data, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next) *next++ = 0;
                if (startswith(line, "0::")) path = line + 3;
        }
        /* the root cgroup has no memory.events */
        if (!path || path[0] != '/' || !path[1] || strstr(path, "/..")) return -ENOENT;
        _cleanup_free_ char *file = strdup_printf("/sys/fs/cgroup%s/memory.events", path);
        if (!file) return -ENOMEM;
        _cleanup_free_ char *ev = NULL;
        r = read_file(file, 65536, &ev, &len);
        if (r < 0) return r;
        return cgroup_memory_events_oom_kills(ev, ret);
}
