#include "overlay.h"

#include <fcntl.h>
#include <libmount.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "fs-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"

bool bwrap_help_has_overlay(const char *help_text) {
        return help_text && strstr(help_text, "--overlay-src") != NULL;
}

int bwrap_probe_overlay(const char *bwrap_path, overlay_method *ret) {
        char *argv[] = {(char *) bwrap_path, (char *) "--help", NULL};
        run_result rr;
        int r = run_command(argv, NULL, NULL, 1 << 20, -1, &rr);
        if (r < 0) return r;
        bool has = bwrap_help_has_overlay(rr.out) || bwrap_help_has_overlay(rr.err);
        run_result_done(&rr);
        *ret = has ? OVERLAY_METHOD_BWRAP : OVERLAY_METHOD_USERNS;
        return 0;
}

static int write_proc_file(const char *path, const char *content) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0) return -errno;
        size_t len = strlen(content);
        ssize_t n = write(fd, content, len);
        if (n < 0) return -errno;
        if ((size_t) n != len) return -EIO;
        return 0;
}

int userns_enter_as_root(uid_t outer_uid, gid_t outer_gid) {
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) return -errno;
        char map[64];
        int r = write_proc_file("/proc/self/setgroups", "deny");
        if (r < 0 && r != -ENOENT) return r;
        snprintf(map, sizeof map, "0 %u 1\n", (unsigned) outer_uid);
        if ((r = write_proc_file("/proc/self/uid_map", map)) < 0) return r;
        snprintf(map, sizeof map, "0 %u 1\n", (unsigned) outer_gid);
        if ((r = write_proc_file("/proc/self/gid_map", map)) < 0) return r;
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) return -errno;
        return 0;
}

/* The mount of overlay_mount(), its -errno; *reason (may be NULL) set when
 * the mount itself failed, with libmount's words. */
static int mount_overlay_fds(const char *lower, const char *lower_top, const char *upper, const char *work,
                             const char *target, bool userxattr, char **reason) {
        _cleanup_close_ int lfd = open(lower, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (lfd < 0) return -errno;
        _cleanup_close_ int tfd = lower_top ? open(lower_top, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
        if (lower_top && tfd < 0) return -errno;
        /* lowerdir lists the layers top first */
        char top[48] = "";
        if (tfd >= 0) snprintf(top, sizeof top, "/proc/self/fd/%d:", tfd);
        _cleanup_close_ int ufd = open(upper, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (ufd < 0) return -errno;
        _cleanup_close_ int wfd = open(work, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (wfd < 0) return -errno;
        _cleanup_free_ char *opts = strdup_printf(
                "lowerdir=%s/proc/self/fd/%d,upperdir=/proc/self/fd/%d,workdir=/proc/self/fd/%d%s", top, lfd,
                ufd, wfd, userxattr ? ",userxattr" : "");
        if (!opts) return -ENOMEM;

        struct libmnt_context *cxt = mnt_new_context();
        if (!cxt) return -ENOMEM;
        int r = mnt_context_disable_mtab(cxt, 1);
        if (r == 0) r = mnt_context_disable_helpers(cxt, 1);
        if (r == 0) r = mnt_context_set_fstype(cxt, "overlay");
        if (r == 0) r = mnt_context_set_source(cxt, "overlay");
        if (r == 0) r = mnt_context_set_target(cxt, target);
        if (r == 0) r = mnt_context_set_options(cxt, opts);
        if (r == 0) r = mnt_context_mount(cxt);
        if (r != 0 || mnt_context_get_status(cxt) != 1) {
                char buf[BUFSIZ] = "";
                int rc = mnt_context_get_excode(cxt, r, buf, sizeof buf);
                int syserr = mnt_context_get_syscall_errno(cxt);
                if (reason) *reason = strdup_printf("overlay mount on %s failed: %s", target,
                                                    *buf ? buf : strerror(syserr ? syserr : EIO));
                (void) rc;
                mnt_free_context(cxt);
                return syserr > 0 ? -syserr : (r < 0 ? r : -EIO);
        }
        mnt_free_context(cxt);
        return 0;
}

int overlay_mount(const char *lower, const char *upper, const char *work, const char *target,
                  bool userxattr, char **reason) {
        return overlay_mount_layers(lower, NULL, upper, work, target, userxattr, reason);
}

int overlay_mount_layers(const char *lower, const char *lower_top, const char *upper, const char *work,
                         const char *target, bool userxattr, char **reason) {
        _cleanup_free_ char *text = NULL;
        int r = mount_overlay_fds(lower, lower_top, upper, work, target, userxattr, &text);
        if (r >= 0) return r;
        if (!text && r != -ENOMEM) text = strdup_printf("overlay mount on %s failed: %s", target, strerror(-r));
        if (reason) *reason = TAKE_PTR(text);
        return r;
}

int overlay_dirs_create(const char *tmp_root, const char *root) {
        int r = mkdir_p(tmp_root, 0700);
        if (r < 0) return r;
        if (mkdir(root, 0700) < 0) return -errno;
        const char *subs[] = {"upper/main", "work/main"};
        for (size_t i = 0; i < ELEMENTSOF(subs); i++) {
                _cleanup_free_ char *p = strdup_printf("%s/%s", root, subs[i]);
                if (!p) return -ENOMEM;
                if ((r = mkdir_p(p, 0700)) < 0) return r;
        }
        return 0;
}

int overlay_dirs_remove(const char *tmp_root, const char *root, const char *id) {
        size_t n = strlen(tmp_root);
        while (n > 1 && tmp_root[n - 1] == '/') n--;
        if (strncmp(root, tmp_root, n) != 0 || root[n] != '/') return -EPERM;
        const char *base = root + n + 1;
        if (strchr(base, '/') || !startswith(base, "taskferry-cow-") || strstr(base, ".."))
                return -EPERM;
        if (id && !streq(base + strlen("taskferry-cow-"), id)) return -EPERM;
        return rm_rf(root);
}
