/* host-watch.h: the host masks kept current by inotify, over a root of the
 * suite's own (real sockets, dirs, modes, renames), without a loop (the
 * snapshot walks what the loop's slices would) and on a real sd-event loop
 * (the slices, then a launch's snapshot). */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
#include "path-util.h"
#include "run/host-watch.h"
#include "string-util.h"
#include "unit.h"

static char *root;

static char *at(const char *rel) { return strdup_printf("%s/%s", root, rel); }

static int sock_at(const char *rel) {
        _cleanup_free_ char *p = at(rel);
        return tf_bind_unix(p);
}

static void mkdir_at(const char *rel) {
        _cleanup_free_ char *p = at(rel);
        ck_assert_int_eq(mkdir_p(p, 0755), 0);
}

/* the kind snapshot s lists for rel, or -1 */
static int kind_of(const HostMaskList *l, const char *rel) {
        _cleanup_free_ char *p = at(rel);
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->items[i].path, p)) return (int) l->items[i].kind;
        return -1;
}

static void snap(HostWatch *hw, HostMaskList *l) {
        host_mask_list_done(l);
        ck_assert_int_eq(host_watch_snapshot(hw, l), 1);
}

static void setup(void) {
        root = strdup_printf("%s/root", tf_suite_dir());
        (void) rm_rf(root);
        ck_assert_int_eq(mkdir_p(root, 0755), 0);
}

static void teardown(void) {
        (void) rm_rf(root);
        free(root);
}

START_TEST(sockets_come_and_go) {
        mkdir_at("a/b");
        int s1 = sock_at("a/b/one.sock");
        const char *roots[] = {root, NULL};
        HostWatch *hw = NULL;
        ck_assert_int_eq(host_watch_new(NULL, roots, false, &hw), 0);
        HostMaskList l = {0};
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "a/b/one.sock"), HOST_MASK_SOCKET);
        ck_assert_uint_eq(l.n, 1);
        /* made after the walk: in the next snapshot */
        int s2 = sock_at("a/two.sock");
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "a/two.sock"), HOST_MASK_SOCKET);
        /* removed: out */
        _cleanup_free_ char *p1 = at("a/b/one.sock");
        ck_assert_int_eq(unlink(p1), 0);
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "a/b/one.sock"), -1);
        /* a new dir, with a socket made in it at once */
        mkdir_at("a/c/d");
        int s3 = sock_at("a/c/d/three.sock");
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "a/c/d/three.sock"), HOST_MASK_SOCKET);
        /* a dir moved: its sockets under the new path only */
        _cleanup_free_ char *from = at("a/c"), *to = at("moved");
        ck_assert_int_eq(rename(from, to), 0);
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "a/c/d/three.sock"), -1);
        ck_assert_int_eq(kind_of(&l, "moved/d/three.sock"), HOST_MASK_SOCKET);
        /* and still watched there */
        int s4 = sock_at("moved/d/four.sock");
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "moved/d/four.sock"), HOST_MASK_SOCKET);
        /* a whole tree removed */
        ck_assert_int_eq(rm_rf(to), 0);
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "moved/d/four.sock"), -1);
        ck_assert_uint_eq(l.n, 1);
        host_mask_list_done(&l);
        host_watch_free(hw);
        close(s1), close(s2), close(s3), close(s4);
}
END_TEST

START_TEST(private_files_by_mode) {
        mkdir_at("etc/ssl/private");
        _cleanup_free_ char *priv = at("etc/ssl/private"), *shadow = at("etc/shadow"), *pub = at("etc/hosts");
        ck_assert_int_eq(chmod(priv, 0700), 0);
        ck_assert_int_eq(write_file_atomic(shadow, "x", 1, 0600), 0);
        ck_assert_int_eq(write_file_atomic(pub, "x", 1, 0644), 0);
        const char *roots[] = {root, NULL};
        HostWatch *hw = NULL;
        ck_assert_int_eq(host_watch_new(NULL, roots, true, &hw), 0);
        HostMaskList l = {0};
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "etc/ssl/private"), HOST_MASK_PRIVATE_DIR);
        ck_assert_int_eq(kind_of(&l, "etc/shadow"), HOST_MASK_PRIVATE_FILE);
        ck_assert_int_eq(kind_of(&l, "etc/hosts"), -1);
        /* a mode change either way */
        ck_assert_int_eq(chmod(pub, 0600), 0);
        ck_assert_int_eq(chmod(shadow, 0644), 0);
        ck_assert_int_eq(chmod(priv, 0755), 0);
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "etc/hosts"), HOST_MASK_PRIVATE_FILE);
        ck_assert_int_eq(kind_of(&l, "etc/shadow"), -1);
        ck_assert_int_eq(kind_of(&l, "etc/ssl/private"), -1);
        /* without private_files: none of them */
        HostWatch *hw2 = NULL;
        ck_assert_int_eq(host_watch_new(NULL, roots, false, &hw2), 0);
        snap(hw2, &l);
        ck_assert_uint_eq(l.n, 0);
        host_mask_list_done(&l);
        host_watch_free(hw);
        host_watch_free(hw2);
}
END_TEST

/* a root that is absent at the start and made later: the watch walks again */
START_TEST(root_appears) {
        _cleanup_free_ char *later = at("later");
        const char *roots[] = {later, NULL};
        HostWatch *hw = NULL;
        ck_assert_int_eq(host_watch_new(NULL, roots, false, &hw), 0);
        HostMaskList l = {0};
        snap(hw, &l);
        ck_assert_uint_eq(l.n, 0);
        mkdir_at("later");
        int s = sock_at("later/x.sock");
        /* the first snapshot after it came cannot tell (the walk starts again) ... */
        ck_assert_int_eq(host_watch_snapshot(hw, &l), 1);
        host_mask_list_done(&l);
        ck_assert_int_eq(host_watch_snapshot(hw, &l), 1);
        ck_assert_int_eq(kind_of(&l, "later/x.sock"), HOST_MASK_SOCKET);
        host_mask_list_done(&l);
        host_watch_free(hw);
        close(s);
}
END_TEST

/* a mount under a root: inotify does not see into it, the mount table does */
START_TEST(mount_under_root) {
        TF_ROOT_OR_SKIP("mounting a tmpfs needs root");
        ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
        ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
        mkdir_at("mnt");
        const char *roots[] = {root, NULL};
        HostWatch *hw = NULL;
        ck_assert_int_eq(host_watch_new(NULL, roots, false, &hw), 0);
        HostMaskList l = {0};
        snap(hw, &l);
        ck_assert_uint_eq(l.n, 0);
        _cleanup_free_ char *mnt = at("mnt");
        ck_assert_int_eq(mount("tmpfs", mnt, "tmpfs", 0, NULL), 0);
        int s = sock_at("mnt/inside.sock");
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "mnt/inside.sock"), HOST_MASK_SOCKET);
        /* and watched in the new mount from then on */
        int s2 = sock_at("mnt/later.sock");
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "mnt/later.sock"), HOST_MASK_SOCKET);
        host_mask_list_done(&l);
        host_watch_free(hw);
        close(s), close(s2);
        ck_assert_int_eq(umount2(mnt, MNT_DETACH), 0);
}
END_TEST

static int quit_when_ready(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) usec;
        HostWatch *hw = userdata;
        if (host_watch_ready(hw)) return sd_event_exit(sd_event_source_get_event(s), 0);
        return sd_event_source_set_time_relative(s, 1000) < 0 ? -EIO : sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

/* on a loop: not ready until the slices walked the tree; then current */
START_TEST(walks_on_the_loop) {
        for (int i = 0; i < 600; i++) {
                _cleanup_free_ char *d = strdup_printf("t/d%d", i);
                mkdir_at(d);
        }
        int s = sock_at("t/d599/deep.sock");
        sd_event *e = NULL;
        ck_assert_int_ge(sd_event_new(&e), 0);
        const char *roots[] = {root, NULL};
        HostWatch *hw = NULL;
        ck_assert_int_eq(host_watch_new(e, roots, false, &hw), 0);
        ck_assert(!host_watch_ready(hw));
        HostMaskList l = {0};
        ck_assert_int_eq(host_watch_snapshot(hw, &l), 0);
        sd_event_source *t = NULL;
        ck_assert_int_ge(sd_event_add_time_relative(e, &t, CLOCK_MONOTONIC, 1000, 0, quit_when_ready, hw), 0);
        ck_assert_int_ge(sd_event_loop(e), 0);
        ck_assert(host_watch_ready(hw));
        ck_assert_int_eq(host_watch_snapshot(hw, &l), 1);
        ck_assert_int_eq(kind_of(&l, "t/d599/deep.sock"), HOST_MASK_SOCKET);
        host_mask_list_done(&l);
        int s2 = sock_at("t/d3/later.sock");
        ck_assert_int_eq(host_watch_snapshot(hw, &l), 1);
        ck_assert_int_eq(kind_of(&l, "t/d3/later.sock"), HOST_MASK_SOCKET);
        host_mask_list_done(&l);
        sd_event_source_unref(t);
        host_watch_free(hw);
        sd_event_unref(e);
        close(s), close(s2);
}
END_TEST


/* RED TEAM (shows a hole): two dirs swapped with renameat2(RENAME_EXCHANGE).
 * The kernel queues MOVED_FROM a, MOVED_TO b, MOVED_FROM b, MOVED_TO a; the
 * handler pushes b for a walk on MOVED_TO b and then drops that very walk
 * on MOVED_FROM b, so the socket that now lies under b (it was a's) is
 * forgotten, and its old watch removed: never masked again until a
 * restart. */
START_TEST(dirs_exchanged) {
        mkdir_at("a");
        mkdir_at("b");
        int s1 = sock_at("a/one.sock");
        const char *roots[] = {root, NULL};
        HostWatch *hw = NULL;
        ck_assert_int_eq(host_watch_new(NULL, roots, false, &hw), 0);
        HostMaskList l = {0};
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "a/one.sock"), HOST_MASK_SOCKET);
        _cleanup_free_ char *a = at("a"), *b = at("b");
        ck_assert_int_eq(renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE), 0);
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "a/one.sock"), -1);
        ck_assert_msg(kind_of(&l, "b/one.sock") == HOST_MASK_SOCKET, "the socket swapped to b/one.sock is not masked");
        /* and the dir is still watched there */
        int s2 = sock_at("b/two.sock");
        snap(hw, &l);
        ck_assert_msg(kind_of(&l, "b/two.sock") == HOST_MASK_SOCKET, "a socket made in the swapped dir is not masked");
        /* a socket swapped with a plain file the same way */
        _cleanup_free_ char *plain = at("plain"), *sockp = at("b/two.sock"), *moved = at("plain");
        ck_assert_int_eq(write_file_atomic(plain, "x", 1, 0644), 0);
        ck_assert_int_eq(renameat2(AT_FDCWD, sockp, AT_FDCWD, plain, RENAME_EXCHANGE), 0);
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "b/two.sock"), -1);
        ck_assert_msg(kind_of(&l, "plain") == HOST_MASK_SOCKET, "the socket swapped with a file is not masked");
        host_mask_list_done(&l);
        host_watch_free(hw);
        close(s1), close(s2);
}
END_TEST

/* RED TEAM: a dir renamed over an existing (empty) watched dir, whose old
 * inode may stay alive for a while (held open here). */
START_TEST(dir_renamed_over_watched_one) {
        mkdir_at("old");
        mkdir_at("new/sub");
        int s1 = sock_at("new/sub/one.sock");
        _cleanup_free_ char *oldp = at("old"), *newp = at("new");
        _cleanup_close_ int hold = open(oldp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(hold, 0);
        const char *roots[] = {root, NULL};
        HostWatch *hw = NULL;
        ck_assert_int_eq(host_watch_new(NULL, roots, false, &hw), 0);
        HostMaskList l = {0};
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "new/sub/one.sock"), HOST_MASK_SOCKET);
        ck_assert_int_eq(rename(newp, oldp), 0);
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "new/sub/one.sock"), -1);
        ck_assert_int_eq(kind_of(&l, "old/sub/one.sock"), HOST_MASK_SOCKET);
        int s2 = sock_at("old/sub/two.sock");
        int s3 = sock_at("old/three.sock");
        snap(hw, &l);
        ck_assert_int_eq(kind_of(&l, "old/sub/two.sock"), HOST_MASK_SOCKET);
        ck_assert_int_eq(kind_of(&l, "old/three.sock"), HOST_MASK_SOCKET);
        host_mask_list_done(&l);
        host_watch_free(hw);
        close(s1), close(s2), close(s3);
}
END_TEST

/* RED TEAM (shows a hole): a socket whose path is longer than PATH_MAX.
 * inotify_add_watch and open by path fail with ENAMETOOLONG, which the
 * walk takes for "gone": the socket is not listed, yet bwrap's recursive
 * bind shows it and a worker reaches it by chdir(2) and a relative
 * connect(2). The shim's own walk (openat) lists it. */
START_TEST(socket_past_path_max) {
        char name[201];
        memset(name, 'd', 200);
        name[200] = 0;
        _cleanup_free_ char *deep = strdup(root);
        ck_assert_ptr_nonnull(deep);
        _cleanup_close_ int dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dfd, 0);
        for (int i = 0; i < 24; i++) {
                ck_assert_int_eq(mkdirat(dfd, name, 0755), 0);
                int nfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                ck_assert_int_ge(nfd, 0);
                close(dfd);
                dfd = nfd;
                char *d = strdup_printf("%s/%s", deep, name);
                free(deep);
                deep = d;
        }
        ck_assert_uint_gt(strlen(deep), 4096);
        /* bind the socket there by a relative name */
        _cleanup_close_ int cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_eq(fchdir(dfd), 0);
        int s = tf_bind_unix("deep.sock");
        ck_assert_int_ge(s, 0);
        ck_assert_int_eq(fchdir(cwd), 0);
        const char *roots[] = {root, NULL};
        HostWatch *hw = NULL;
        ck_assert_int_eq(host_watch_new(NULL, roots, false, &hw), 0);
        HostMaskList l = {0};
        /* listed, or the watch says it cannot tell (the shim then walks) */
        int r = host_watch_snapshot(hw, &l);
        ck_assert_int_ge(r, 0);
        bool listed = r == 0;
        for (size_t i = 0; r > 0 && i < l.n; i++) listed |= strstr(l.items[i].path, "deep.sock") != NULL;
        host_mask_list_done(&l);
        host_watch_free(hw);
        close(s);
        /* rm_rf by path cannot reach it either: take it down level by level */
        for (int i = 0; i < 24; i++) {
                int up = openat(dfd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                (void) unlinkat(dfd, "deep.sock", 0);
                close(dfd);
                dfd = up;
                ck_assert_int_eq(unlinkat(dfd, name, AT_REMOVEDIR), 0);
        }
        ck_assert_msg(listed, "a socket past PATH_MAX under a root is neither listed nor the launch failed");
}
END_TEST

/* RED TEAM (shows a hole): a daemon that is not root, and a dir under a
 * root that it may enter but not list (0711, like a service's runtime dir).
 * Neither the watch nor the shim's walk can read it, so nothing in it is
 * masked, yet a worker of the same uid connects to a socket in it whose
 * name it knows (connect needs only search permission on the dirs). The
 * dir, or the socket, must be in the list. */
START_TEST(socket_in_dir_others_may_only_enter) {
        TF_ROOT_OR_SKIP("a dir of another owner needs root");
        char tmpl[] = "/tmp/tf-rt-xonly-XXXXXX";
        ck_assert_ptr_nonnull(mkdtemp(tmpl));
        ck_assert_int_eq(chmod(tmpl, 0755), 0);
        _cleanup_free_ char *svc = strdup_printf("%s/svc", tmpl), *sp = strdup_printf("%s/svc/svc.sock", tmpl);
        ck_assert_int_eq(mkdir(svc, 0755), 0);
        int s = tf_bind_unix(sp);
        ck_assert_int_eq(chmod(sp, 0666), 0);
        ck_assert_int_eq(chmod(svc, 0711), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                        _exit(3);
                /* the worker's view: it can reach the socket */
                int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                struct sockaddr_un sa = {.sun_family = AF_UNIX};
                snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sp);
                /* bound, not listening: refused, not denied */
                if (connect(c, (struct sockaddr *) &sa, sizeof sa) < 0 && errno != ECONNREFUSED) _exit(4);
                const char *roots[] = {tmpl, NULL};
                HostWatch *hw = NULL;
                if (host_watch_new(NULL, roots, false, &hw) < 0) _exit(5);
                HostMaskList l = {0};
                if (host_watch_snapshot(hw, &l) != 1) _exit(6);
                bool covered = false;
                for (size_t i = 0; i < l.n; i++) covered |= path_is_at_or_below(sp, l.items[i].path);
                _exit(covered ? 0 : 1);
        }
        int status = 0;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        close(s);
        ck_assert_int_eq(unlink(sp), 0);
        ck_assert_int_eq(rmdir(svc), 0);
        ck_assert_int_eq(rmdir(tmpl), 0);
        ck_assert(WIFEXITED(status));
        ck_assert_msg(WEXITSTATUS(status) != 4, "the unprivileged user cannot reach the socket: no hole to show");
        ck_assert_msg(WEXITSTATUS(status) == 0,
                      "a socket in a dir the daemon may enter but not list is not masked (child exit %d)",
                      WEXITSTATUS(status));
}
END_TEST

int main(void) {
        Suite *s = suite_create("host-watch");
        tf_tcase(s, "watch", setup, teardown, 0,
                 TF_TESTS(sockets_come_and_go, private_files_by_mode, root_appears, mount_under_root, walks_on_the_loop, dirs_exchanged,
                          dir_renamed_over_watched_one, socket_past_path_max,
                          socket_in_dir_others_may_only_enter));
        return tf_run_suite(s);
}
