#include "sandbox.h"

#include "util.h"

static int push_many(char ***l, const char *const *items, size_t n) {
        for (size_t i = 0; i < n; i++) {
                int r = strv_push(l, items[i]);
                if (r < 0) return r;
        }
        return 0;
}

#define PUSH(...)                                                                    \
        do {                                                                         \
                const char *const _items_[] = {__VA_ARGS__};                         \
                int _r_ = push_many(&argv, _items_, ELEMENTSOF(_items_));            \
                if (_r_ < 0) return _r_;                                             \
        } while (0)

int sandbox_build_argv(const char *bwrap_path, const char *directory, const launch_sandbox *sb,
                       overlay_method method, int prompt_fd, char *const worker_argv[], char ***ret) {
        _cleanup_strv_free_ char **argv = NULL;
        int r;
        bool overlay = sb->overlay != NULL;

        PUSH(bwrap_path, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp");

        if (overlay && method == OVERLAY_METHOD_BWRAP)
                PUSH("--overlay-src", sb->overlay->lower, "--overlay", sb->overlay->upper, sb->overlay->work,
                     directory);
        else
                PUSH("--bind", directory, directory);

        /* The masks come after the target: bwrap mounts in order, and a target
         * that contains a masked dir (a dispatch into $HOME holds ~/.ssh) must
         * not bring it back. The binds below re-expose single paths on purpose. */
        for (size_t i = 0; sb->tmpfs && sb->tmpfs[i]; i++) PUSH("--tmpfs", sb->tmpfs[i]);

        if (sb->socket_path) PUSH("--bind", sb->socket_path, sb->socket_path);
        for (size_t i = 0; sb->rw_binds && sb->rw_binds[i]; i++) PUSH("--bind", sb->rw_binds[i], sb->rw_binds[i]);
        for (size_t i = 0; sb->ro_binds && sb->ro_binds[i]; i++)
                PUSH("--ro-bind", sb->ro_binds[i], sb->ro_binds[i]);
        if (prompt_fd >= 0) {
                PUSH("--ro-bind-data");
                if ((r = strv_pushf(&argv, "%d", prompt_fd)) < 0) return r;
                PUSH(SANDBOX_PROMPT_PATH);
        }

        PUSH("--unshare-all");
        if (sb->share_net) PUSH("--share-net");
        PUSH("--die-with-parent");

        if (overlay && method == OVERLAY_METHOD_USERNS) {
                PUSH("--uid");
                if ((r = strv_pushf(&argv, "%u", (unsigned) sb->uid)) < 0) return r;
                PUSH("--gid");
                if ((r = strv_pushf(&argv, "%u", (unsigned) sb->gid)) < 0) return r;
        }
        PUSH("--chdir", directory, "--");
        for (size_t i = 0; worker_argv && worker_argv[i]; i++) PUSH(worker_argv[i]);

        *ret = TAKE_PTR(argv);
        return 0;
}
