#include "landlock.h"

#include <errno.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Debian 12's kernel headers predate ABI 6: the pieces we use, from
 * include/uapi/linux/landlock.h. */
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif
#define TF_LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#define TF_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define TF_LANDLOCK_SCOPE_SIGNAL (1ULL << 1)

struct tf_landlock_ruleset_attr {
        uint64_t handled_access_fs;
        uint64_t handled_access_net;
        uint64_t scoped;
};

int landlock_scope_ipc(void) {
        long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, TF_LANDLOCK_CREATE_RULESET_VERSION);
        if (abi < 0) return errno == ENOSYS || errno == EOPNOTSUPP ? 0 : -errno;
        if (abi < 6) return 0;
        struct tf_landlock_ruleset_attr attr = {
                .scoped = TF_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | TF_LANDLOCK_SCOPE_SIGNAL,
        };
        long fd = syscall(__NR_landlock_create_ruleset, &attr, sizeof attr, 0);
        if (fd < 0) return -errno;
        int r = 0;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || syscall(__NR_landlock_restrict_self, (int) fd, 0) < 0)
                r = -errno;
        close((int) fd);
        return r < 0 ? r : 1;
}
