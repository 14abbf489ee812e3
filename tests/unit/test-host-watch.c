/* host-watch.h: the host masks kept current by inotify, over a root of the
 * suite's own (real sockets, dirs, modes, renames), without a loop (the
 * snapshot walks what the loop's slices would) and on a real sd-event loop
 * (the slices, then a launch's snapshot). */

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
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

int main(void) {
        Suite *s = suite_create("host-watch");
        tf_tcase(s, "watch", setup, teardown, 0,
                 TF_TESTS(sockets_come_and_go, private_files_by_mode, root_appears, mount_under_root, walks_on_the_loop));
        return tf_run_suite(s);
}
