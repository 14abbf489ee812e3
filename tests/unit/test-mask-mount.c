/* mask-mount.h: which host masks a launch mounts, given its plan (sockets
 * everywhere the plan shows them but where the plan itself mounts; private
 * entries only where the system roots alone show them; nothing below a
 * masked dir; sockets in a target bwrap mounts go to its options), and
 * their mount in a mount namespace of the case's own (a path gone by then
 * skipped, the rest read-only, nosuid, nodev). */

#include <check.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
#include "mask-mount.h"
#include "overlay.h"
#include "string-util.h"
#include "unit.h"

static void push(sandbox_mount **m, size_t *n, sandbox_mount_op op, const char *src, const char *dest) {
        ck_assert_int_eq(sandbox_mounts_push(m, n, op, src, dest, NULL, NULL, NULL), 0);
}

static int find(const MaskSet *s, const char *path) {
        for (size_t i = 0; i < s->n; i++)
                if (streq(s->items[i].path, path)) return s->items[i].dir;
        return -1;
}

/* the paths need not exist: only the private dir above the target is read */
START_TEST(selection) {
        sandbox_mount *m = NULL;
        size_t n = 0;
        push(&m, &n, SANDBOX_MOUNT_RO_BIND, "/etc", "/etc");
        push(&m, &n, SANDBOX_MOUNT_RO_BIND, "/opt", "/opt");
        push(&m, &n, SANDBOX_MOUNT_TARGET, NULL, "/opt/tf-nx/repo");
        push(&m, &n, SANDBOX_MOUNT_TMPFS, NULL, "/opt/tf-state");
        push(&m, &n, SANDBOX_MOUNT_BIND, "/opt/tf-state/t.sock", "/opt/tf-state/t.sock");
        push(&m, &n, SANDBOX_MOUNT_BIND, "/opt/allowed.sock", "/opt/allowed.sock");
        HostMaskList hm = {0};
        const struct {
                const char *path;
                HostMaskKind kind;
        } in[] = {
                {"/etc/a.sock", HOST_MASK_SOCKET},
                {"/opt/tf-state/other.sock", HOST_MASK_SOCKET},     /* hidden by the plan */
                {"/opt/tf-state/t.sock", HOST_MASK_SOCKET},         /* the plan binds it */
                {"/opt/allowed.sock", HOST_MASK_SOCKET},            /* --allow-socket */
                {"/opt/tf-nx/repo/dev.sock", HOST_MASK_SOCKET},     /* in the target */
                {"/etc/shadow", HOST_MASK_PRIVATE_FILE},
                {"/opt/tf-nx/repo/secret", HOST_MASK_PRIVATE_FILE}, /* the target's own */
                {"/etc/ssl/private", HOST_MASK_PRIVATE_DIR},
                {"/etc/ssl/private/key", HOST_MASK_PRIVATE_FILE},   /* under a masked dir */
                {"/etc/ssl/private/x.sock", HOST_MASK_SOCKET},
                {"/opt/tf-nx", HOST_MASK_PRIVATE_DIR},              /* above the target: kept open */
        };
        for (size_t i = 0; i < ELEMENTSOF(in); i++) ck_assert_int_eq(host_mask_list_set(&hm, in[i].path, in[i].kind), 0);
        MaskSet s = {0};
        sandbox_mount *am = NULL;
        size_t n_am = 0;
        ck_assert_int_eq(mask_set_build(&hm, m, n, "/opt/tf-nx/repo", false, &s, &am, &n_am), 0);
        ck_assert_int_eq(find(&s, "/etc/a.sock"), 0);
        ck_assert_int_eq(find(&s, "/opt/tf-state/other.sock"), -1);
        ck_assert_int_eq(find(&s, "/opt/tf-state/t.sock"), -1);
        ck_assert_int_eq(find(&s, "/opt/allowed.sock"), -1);
        ck_assert_int_eq(find(&s, "/opt/tf-nx/repo/dev.sock"), 0);
        ck_assert_int_eq(find(&s, "/etc/shadow"), 0);
        ck_assert_int_eq(find(&s, "/opt/tf-nx/repo/secret"), -1);
        ck_assert_int_eq(find(&s, "/etc/ssl/private"), 1);
        ck_assert_int_eq(find(&s, "/etc/ssl/private/key"), -1);
        ck_assert_int_eq(find(&s, "/etc/ssl/private/x.sock"), -1);
        ck_assert_int_eq(find(&s, "/opt/tf-nx"), -1);
        ck_assert_uint_eq(s.n, 4);
        ck_assert_uint_eq(n_am, 0);
        mask_set_done(&s);
        /* bwrap's own overlay: the target's socket goes to its options */
        ck_assert_int_eq(mask_set_build(&hm, m, n, "/opt/tf-nx/repo", true, &s, &am, &n_am), 0);
        ck_assert_int_eq(find(&s, "/opt/tf-nx/repo/dev.sock"), -1);
        ck_assert_uint_eq(n_am, 1);
        ck_assert_int_eq(am[0].op, SANDBOX_MOUNT_MASK_FILE);
        ck_assert_str_eq(am[0].dest, "/opt/tf-nx/repo/dev.sock");
        mask_set_done(&s);
        sandbox_mounts_free(am, n_am);
        sandbox_mounts_free(m, n);
        host_mask_list_done(&hm);
}
END_TEST

/* in a child with a mount namespace of its own: the masks of what is there,
 * none of what is gone or changed kind, each read-only */
START_TEST(mount_what_is_there) {
        const char *dir = tf_suite_dir();
        _cleanup_free_ char *sock = strdup_printf("%s/s.sock", dir), *gone = strdup_printf("%s/gone.sock", dir),
                            *priv = strdup_printf("%s/priv", dir), *now_dir = strdup_printf("%s/now-a-dir", dir),
                            *inside = strdup_printf("%s/priv/f", dir);
        int fd = tf_bind_unix(sock);
        ck_assert_int_eq(mkdir_p(priv, 0700), 0);
        ck_assert_int_eq(write_file_atomic(inside, "x", 1, 0600), 0);
        ck_assert_int_eq(mkdir_p(now_dir, 0700), 0);
        MaskSet s = {0};
        MaskMount items[] = {{sock, false}, {gone, false}, {priv, true}, {now_dir, false}};
        s.items = items;
        s.n = ELEMENTSOF(items);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (geteuid() == 0 ? unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0
                                   : userns_enter_as_root(getuid(), getgid()) < 0)
                        _exit(10);
                char *err = NULL;
                int r = mask_set_mount(&s, &err);
                if (r != 2) _exit(11);
                struct stat st;
                if (lstat(sock, &st) < 0 || !S_ISCHR(st.st_mode)) _exit(12);
                if (access(inside, F_OK) == 0) _exit(13);
                struct statvfs sv;
                if (statvfs(priv, &sv) < 0 || !(sv.f_flag & ST_RDONLY) || !(sv.f_flag & ST_NODEV)) _exit(14);
                if (statvfs(sock, &sv) < 0 || !(sv.f_flag & ST_RDONLY)) _exit(15);
                if (lstat(now_dir, &st) < 0 || !S_ISDIR(st.st_mode)) _exit(16);
                _exit(0);
        }
        int status = 0;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child step %d failed", WEXITSTATUS(status));
        /* nothing of it outside */
        struct stat st;
        ck_assert_int_eq(lstat(sock, &st), 0);
        ck_assert(S_ISSOCK(st.st_mode));
        ck_assert_int_eq(access(inside, F_OK), 0);
        close(fd);
}
END_TEST

TF_MAIN("mask-mount", "mask-mount", NULL, NULL, 0, selection, mount_what_is_there)
