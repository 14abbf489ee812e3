#include "sandbox.h"

#include "macro.h"
#include "strv.h"

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

/* --tmpfs dest, after --size when the spec sizes the sandbox's tmpfs
 * mounts (bwrap applies --size to the next --tmpfs). */
static int push_tmpfs(char ***l, const launch_sandbox *sb, const char *dest) {
        int r;
        if (sb->tmp_size) {
                if ((r = strv_push(l, "--size")) < 0 || (r = strv_pushf(l, "%llu", (unsigned long long) sb->tmp_size)) < 0)
                        return r;
        }
        if ((r = strv_push(l, "--tmpfs")) < 0) return r;
        return strv_push(l, dest);
}

static int push_mount(char ***l, const char *directory, const launch_sandbox *sb, const sandbox_mount *m,
                      overlay_method method) {
        char **argv = *l;
        int r = 0;
#define EMIT(...)                                                                    \
        do {                                                                         \
                const char *const _items_[] = {__VA_ARGS__};                         \
                r = push_many(&argv, _items_, ELEMENTSOF(_items_));                  \
        } while (0)
        bool need_src = m->op == SANDBOX_MOUNT_RO_BIND || m->op == SANDBOX_MOUNT_RO_BIND_TRY || m->op == SANDBOX_MOUNT_BIND ||
                        m->op == SANDBOX_MOUNT_SYMLINK || m->op == SANDBOX_MOUNT_OVERLAY;
        if (!m->dest || (need_src && !m->src)) return -EINVAL;
        switch (m->op) {
        case SANDBOX_MOUNT_RO_BIND: EMIT("--ro-bind", m->src, m->dest); break;
        case SANDBOX_MOUNT_RO_BIND_TRY: EMIT("--ro-bind-try", m->src, m->dest); break;
        case SANDBOX_MOUNT_BIND: EMIT("--bind", m->src, m->dest); break;
        case SANDBOX_MOUNT_TMPFS: r = push_tmpfs(&argv, sb, m->dest); break;
        case SANDBOX_MOUNT_DIR: EMIT("--dir", m->dest); break;
        case SANDBOX_MOUNT_SYMLINK: EMIT("--symlink", m->src, m->dest); break;
        case SANDBOX_MOUNT_MASK_FILE: EMIT("--ro-bind", "/dev/null", m->dest); break;
        case SANDBOX_MOUNT_OVERLAY:
                if (!m->upper || !m->work || !m->stage) return -EINVAL;
                if (method == OVERLAY_METHOD_BWRAP)
                        EMIT("--overlay-src", m->src, "--overlay", m->upper, m->work, m->dest);
                else
                        EMIT("--bind", m->stage, m->dest);
                break;
        case SANDBOX_MOUNT_TARGET:
                /* bwrap stacks its --overlay-src layers in the order given, the last on top */
                if (sb->overlay && method == OVERLAY_METHOD_BWRAP && sb->overlay->lower_top)
                        EMIT("--overlay-src", sb->overlay->lower, "--overlay-src", sb->overlay->lower_top, "--overlay",
                             sb->overlay->upper, sb->overlay->work, directory);
                else if (sb->overlay && method == OVERLAY_METHOD_BWRAP)
                        EMIT("--overlay-src", sb->overlay->lower, "--overlay", sb->overlay->upper, sb->overlay->work,
                             directory);
                else
                        EMIT("--bind", directory, directory);
                break;
        default: return -EINVAL;
        }
#undef EMIT
        *l = argv;
        return r;
}

bool sandbox_has_overlays(const launch_sandbox *sb) {
        if (sb->overlay) return true;
        for (size_t i = 0; i < sb->n_mounts; i++)
                if (sb->mounts[i].op == SANDBOX_MOUNT_OVERLAY) return true;
        return false;
}

bool sandbox_needs_userns(const launch_sandbox *sb, overlay_method method) {
        return (method == OVERLAY_METHOD_USERNS && sandbox_has_overlays(sb)) || sb->own_userns;
}

int sandbox_build_argv(const char *bwrap_path, const char *directory, const launch_sandbox *sb,
                       overlay_method method, int prompt_fd, char *const worker_argv[], char ***ret) {
        _cleanup_strv_free_ char **argv = NULL;
        int r;

        PUSH(bwrap_path, "--proc", "/proc", "--dev", "/dev");
        if ((r = push_tmpfs(&argv, sb, "/tmp")) < 0) return r;
        for (size_t i = 0; i < sb->n_mounts; i++)
                if ((r = push_mount(&argv, directory, sb, &sb->mounts[i], method)) < 0) return r;
        if (prompt_fd >= 0) {
                PUSH("--ro-bind-data");
                if ((r = strv_pushf(&argv, "%d", prompt_fd)) < 0) return r;
                PUSH(SANDBOX_PROMPT_PATH);
        }

        /* bwrap's root and /dev are tmpfs mounts it cannot size: nothing is
         * written there but into the sized tmpfs mounts above (sandbox-plan.h) */
        PUSH("--remount-ro", "/", "--remount-ro", "/dev");
        /* --unshare-all but the IPC namespace, where the shim made it */
        if (sb->own_ipc)
                PUSH("--unshare-user", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try");
        else
                PUSH("--unshare-all", "--unshare-user");
        if (!sb->userns_allowed) PUSH("--disable-userns");
        /* the network namespace is the shim's (or the host's in mode host): bwrap keeps it */
        PUSH("--share-net");
        PUSH("--die-with-parent", "--cap-drop", "ALL");

        if (sandbox_needs_userns(sb, method)) {
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
