/* What the sandbox shows of the host's system roots while the host changes
 * under it (host-masks.h, run/host-watch.h, shim/mask-mount.h): sockets
 * bound and removed under /opt and /etc while tasks launch, a home under
 * /opt, a repository under a dir others may not enter.
 *
 * The fixtures live under /opt and /etc, so the cases need root to make
 * them; each then runs its world twice: with the daemon as root and, in a
 * child that switched to $TASKFERRY_TEST_USER (default taskferry-test), as
 * that user, the fixtures given to it. Without root the cases say so and
 * end. Whatever a case made under /opt and /etc is removed by the process
 * that made it after its worlds ended, failed or not. The suite is
 * RUN_SERIAL (tests/CMakeLists.txt): its sockets under /etc and /opt are
 * masked in every other suite's sandboxes too. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fs-util.h"
#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"

#define N_TASKS 20

static const char *test_user(void) {
        const char *u = getenv("TASKFERRY_TEST_USER");
        return u && *u ? u : "taskferry-test";
}

static bool need_root(const char *name) {
        if (geteuid() == 0) return true;
        fprintf(stderr, "%s: not root, cannot make fixtures under /opt and /etc; skipped\n", name);
        return false;
}

/* a tag unique to this run, for the fixtures' names */
static char *new_tag(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return strdup_printf("tf-host-%d-%ld", (int) getpid(), (long) (ts.tv_nsec / 1000));
}

/* Run part(arg) in a child: as root, or as the test user (ids, no groups,
 * the fixtures chowned to it before). Its exit status: 0 when part returned. */
static int run_part(bool as_user, void (*part)(void *), void *arg) {
        struct passwd *pw = as_user ? getpwnam(test_user()) : NULL;
        ck_assert_msg(!as_user || pw, "no user %s (tools/test creates it)", test_user());
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (pw && (setgroups(0, NULL) < 0 || setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) < 0 ||
                           setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) < 0))
                        _exit(3);
                part(arg);
                _exit(0);
        }
        int status = 0;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void assert_part(int status, bool as_user) {
        ck_assert_msg(status == 0, "the case's world %s failed (exit %d)", as_user ? "as the test user" : "as root",
                      status);
}

/* name_root and name_user: fn(false) and fn(true), each when we are root */
#define CASE_AS_ROOT_AND_USER(name, fn)                              \
        START_TEST(name##_root) {                                    \
                if (need_root(#name "_root")) fn(false);             \
        }                                                            \
        END_TEST                                                     \
        START_TEST(name##_user) {                                    \
                if (need_root(#name "_user")) fn(true);              \
        }                                                            \
        END_TEST

static void chown_to_user(const char *path) {
        struct passwd *pw = getpwnam(test_user());
        ck_assert_ptr_nonnull(pw);
        _cleanup_free_ char *cmd = strdup_printf("chown -R %u:%u '%s'", (unsigned) pw->pw_uid, (unsigned) pw->pw_gid, path);
        ck_assert_int_eq(system(cmd), 0);
}

/* ---- sockets bound and removed while tasks launch ---- */

typedef struct churn_case {
        char *dirs[2];   /* /opt/<tag>, /etc/<tag> */
        char *keep[2];   /* a socket in each that exists throughout */
} churn_case;

static int bind_socket(const char *path) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return -1;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof sa.sun_path) {
                close(fd);
                return -1;
        }
        memcpy(sa.sun_path, path, strlen(path) + 1);
        if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0 || chmod(path, 0777) < 0 || listen(fd, 4) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

/* Every 2 ms, in each dir: bind s<i>.sock and remove the one bound 8 rounds
 * before, so that each socket lives ~16 ms, about as long as a launch takes
 * from the mask list to the mount. Runs until killed. */
static pid_t churner_start(char *const dirs[2]) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid > 0) return pid;
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fds[2][8] = {{-1, -1, -1, -1, -1, -1, -1, -1}, {-1, -1, -1, -1, -1, -1, -1, -1}};
        for (unsigned i = 0;; i++) {
                for (int d = 0; d < 2; d++) {
                        char path[256];
                        snprintf(path, sizeof path, "%s/s%u.sock", dirs[d], i % 8);
                        if (fds[d][i % 8] >= 0) close(fds[d][i % 8]);
                        (void) unlink(path);
                        fds[d][i % 8] = bind_socket(path);
                }
                struct timespec ts = {0, 2000000};
                nanosleep(&ts, NULL);
        }
}

static void churn_part(void *arg) {
        churn_case *c = arg;
        tf_world *w = tf_world_new(NULL);
        _cleanup_free_ char *repo = tf_repo_new(w, NULL, NULL);
        tf_daemon_start(w);
        /* the test can fail: from the host, this user reaches both */
        _cleanup_free_ char *host = tf_shf(w, NULL, "%s/bin/tf-connect %s %s || true", w->fixtures, c->keep[0], c->keep[1]);
        ck_assert_msg(tf_count(host, " connected") == 2, "the host cannot reach the kept sockets: %s", host);
        /* a hostile worker tries to take the masks off first */
        _cleanup_free_ char *script = strdup_printf("umount %s %s 2>/dev/null; umount -l %s 2>/dev/null; tf-connect %s %s; "
                                                    "echo end",
                                                    c->keep[0], c->keep[1], c->keep[0], c->keep[0], c->keep[1]);
        char *ids[N_TASKS];
        for (int i = 0; i < N_TASKS; i++) ids[i] = tf_dispatch_shell(w, repo, NULL, script);
        for (int i = 0; i < N_TASKS; i++) {
                json_object *st = tf_wait_settled(w, ids[i]);
                tf_assert_status(st, ids[i], "done");
                json_object_put(st);
                _cleanup_free_ char *msg = tf_task_message(w, ids[i]);
                ck_assert_msg(msg && strstr(msg, "end"), "task %s: %s", ids[i], strnull(msg));
                ck_assert_msg(!strstr(msg, " connected"), "task %s reached a host socket: %s", ids[i], msg);
                ck_assert_msg(tf_count(msg, " refused") == 2, "task %s: %s", ids[i], msg);
                free(ids[i]);
        }
        tf_world_free(w);
}

/* A process binds and removes sockets under /opt and /etc every 2 ms while
 * 20 tasks launch: all 20 end done, and a socket that exists all along stays
 * unreachable from each of them. The kept sockets are made after the daemon
 * started (its watch sees them come). */
static void socket_churn_as(bool as_user) {
        _cleanup_free_ char *tag = new_tag();
        churn_case c = {
                .dirs = {strdup_printf("/opt/%s", tag), strdup_printf("/etc/%s", tag)},
        };
        for (int d = 0; d < 2; d++) {
                ck_assert_int_eq(mkdir_p(c.dirs[d], 0755), 0);
                c.keep[d] = strdup_printf("%s/keep.sock", c.dirs[d]);
        }
        pid_t churner = churner_start(c.dirs);
        int keep_fd[2];
        for (int d = 0; d < 2; d++) keep_fd[d] = tf_listen_unix(c.keep[d]);
        int status = run_part(as_user, churn_part, &c);
        (void) kill(churner, SIGKILL);
        (void) waitpid(churner, NULL, 0);
        for (int d = 0; d < 2; d++) {
                close(keep_fd[d]);
                (void) rm_rf(c.dirs[d]);
                free(c.dirs[d]), free(c.keep[d]);
        }
        assert_part(status, as_user);
}

CASE_AS_ROOT_AND_USER(socket_churn, socket_churn_as)

/* ---- a home under /opt ---- */

typedef struct home_case {
        char *home;
} home_case;

static void home_part(void *arg) {
        home_case *c = arg;
        tf_world *w = tf_world_new(NULL);
        _cleanup_free_ char *repo = tf_repo_new(w, NULL, NULL);
        tf_world_setenv(w, "HOME", c->home);
        tf_daemon_start(w);
        const char *script = "cat \"$HOME/.ssh/id_ed25519\" 2>&1; cat \"$HOME/notes.txt\" 2>&1; "
                             "cat \"$HOME/.gitconfig\"; echo \"home=$HOME\"; echo end";
        _cleanup_free_ char *msg = tf_shell_done_output(w, repo, NULL, script, NULL);
        ck_assert_msg(strstr(msg, "end"), "%s", msg);
        ck_assert_msg(!strstr(msg, "SECRET-SSH-KEY"), "~/.ssh of a home under /opt is readable: %s", msg);
        ck_assert_msg(!strstr(msg, "HOME-NOTES"), "a home under /opt is shown whole: %s", msg);
        /* the allow-list still shows git's config */
        ck_assert_msg(strstr(msg, "GITCONFIG-MARKER"), "~/.gitconfig is not shown: %s", msg);
        tf_world_free(w);
}

/* HOME=/opt/<x>: ~/.ssh stays masked, the rest of the home is hidden as
 * under /home; what the allow-list names (~/.gitconfig) shows. The files are
 * world-readable: the home's own masking must hide them, not the root
 * worker's private-file masks. */
static void home_under_opt_as(bool as_user) {
        _cleanup_free_ char *tag = new_tag();
        home_case c = {.home = strdup_printf("/opt/%s/home", tag)};
        _cleanup_free_ char *top = strdup_printf("/opt/%s", tag);
        _cleanup_free_ char *ssh = strdup_printf("%s/.ssh", c.home);
        ck_assert_int_eq(mkdir_p(ssh, 0755), 0);
        tf_write(tf_path(ssh, "id_ed25519"), "SECRET-SSH-KEY\n", 15, 0644);
        tf_write(tf_path(c.home, "notes.txt"), "HOME-NOTES\n", 11, 0644);
        tf_write(tf_path(c.home, ".gitconfig"), "# GITCONFIG-MARKER\n", 19, 0644);
        ck_assert_int_eq(chmod(c.home, 0755), 0);
        if (as_user) chown_to_user(c.home);
        int status = run_part(as_user, home_part, &c);
        (void) rm_rf(top);
        free(c.home);
        assert_part(status, as_user);
}

CASE_AS_ROOT_AND_USER(home_under_opt, home_under_opt_as)

/* ---- a repository under a dir others may not enter ---- */

typedef struct private_case {
        char *parent;    /* /opt/<tag>, 0700 */
        char *repo;      /* <parent>/repo */
        bool root_worker;
        bool foreign;    /* the parent belongs to another user than the daemon's */
} private_case;

static void private_part(void *arg) {
        private_case *c = arg;
        tf_world *w = tf_world_new(NULL);
        tf_daemon_start(w);
        const char *script = "cat f; ls -a ..; cat ../sibling-secret 2>&1; echo changed > g; echo end";
        json_object *st = NULL;
        _cleanup_free_ char *id = tf_shell_settled(w, c->repo, NULL, script, &st);
        if (c->foreign) {
                /* a root worker has no capability: another user's 0700 dir is
                 * closed to it, and the task says which and what to do */
                const char *err = tf_jstr(st, "spawnError");
                ck_assert_msg(err && strstr(err, c->parent) && strstr(err, "chmod o+x") && strstr(err, "0700"),
                              "no spawnError naming %s: %s", c->parent, json_object_to_json_string(st));
                json_object_put(st);
                tf_world_free(w);
                return;
        }
        tf_assert_status(st, id, "done");
        json_object_put(st);
        _cleanup_free_ char *msg = tf_task_message(w, id);
        ck_assert_msg(msg && strstr(msg, "base") && strstr(msg, "end"), "the worker did not see its repo: %s",
                      strnull(msg));
        ck_assert_msg(strstr(msg, "repo"), "the worker cannot list the repo's parent: %s", msg);
        /* what others could not reach beside the repo stays out of a root worker's sight */
        if (c->root_worker)
                ck_assert_msg(!strstr(msg, "SIBLING-CONTENT"), "a root worker reads inside a 0700 dir: %s", msg);
        _cleanup_free_ char *diff = tf_task_diff(w, id);
        ck_assert_msg(strstr(diff, "+changed"), "the change is not in the changeset: %s", diff);
        tf_world_free(w);
}

/* /opt/<tag> (0700) holding the repository and a world-readable sibling:
 * the task ends done, sees and changes its repository; a root worker cannot
 * read the sibling (its name shows, its content is /dev/null's). foreign: the parent belongs to the test user while
 * the daemon runs as root: the task fails with a spawnError naming the
 * parent and the fix. */
static void private_parent_as(bool as_user, bool foreign) {
        _cleanup_free_ char *tag = new_tag();
        private_case c = {.root_worker = !as_user, .foreign = foreign};
        c.parent = strdup_printf("/opt/%s", tag);
        c.repo = strdup_printf("%s/repo", c.parent);
        ck_assert_int_eq(mkdir_p(c.repo, 0755), 0);
        ck_assert_int_eq(chmod(c.parent, 0700), 0);
        tf_write(tf_path(c.parent, "sibling-secret"), "SIBLING-CONTENT\n", 16, 0644);
        _cleanup_free_ char *init = strdup_printf(
                "cd '%s' && git init -q && echo base > f && git add f && git -c user.name=T -c user.email=t@e.invalid "
                "commit -qm base",
                c.repo);
        ck_assert_int_eq(system(init), 0);
        if (as_user || foreign) chown_to_user(c.parent);
        int status = run_part(as_user, private_part, &c);
        (void) rm_rf(c.parent);
        free(c.parent), free(c.repo);
        assert_part(status, as_user);
}

static void private_parent_own(bool as_user) { private_parent_as(as_user, false); }
CASE_AS_ROOT_AND_USER(repo_under_private_parent, private_parent_own)

START_TEST(repo_under_foreign_private_parent) {
        if (need_root("repo_under_foreign_private_parent")) private_parent_as(false, true);
}
END_TEST

/* ---- red team: what the masks above miss ---- */

typedef struct xonly_case {
        char *dir;  /* /opt/<tag>/svc, 0711, root's */
        char *sock; /* <dir>/svc.sock, listening, 0777 */
} xonly_case;

static void xonly_part(void *arg) {
        xonly_case *c = arg;
        tf_world *w = tf_world_new(NULL);
        _cleanup_free_ char *repo = tf_repo_new(w, NULL, NULL);
        tf_daemon_start(w);
        /* from the host, this user reaches it by name */
        _cleanup_free_ char *host = tf_shf(w, NULL, "%s/bin/tf-connect %s || true", w->fixtures, c->sock);
        ck_assert_msg(tf_count(host, " connected") == 1, "the host cannot reach %s: %s", c->sock, host);
        _cleanup_free_ char *script = strdup_printf("tf-connect %s; echo end", c->sock);
        _cleanup_free_ char *msg = tf_shell_done_output(w, repo, NULL, script, NULL);
        ck_assert_msg(strstr(msg, "end"), "%s", msg);
        ck_assert_msg(!strstr(msg, " connected"), "the worker reached a host socket in a dir it may only enter: %s", msg);
        tf_world_free(w);
}

/* RED TEAM: a socket in a dir under /opt that the daemon's user may enter
 * but not list (0711, root's): the walks cannot read the dir, a worker
 * connects by the name. */
static void xonly_as(bool as_user) {
        _cleanup_free_ char *tag = new_tag();
        _cleanup_free_ char *top = strdup_printf("/opt/%s", tag);
        xonly_case c = {.dir = strdup_printf("%s/svc", top)};
        c.sock = strdup_printf("%s/svc.sock", c.dir);
        ck_assert_int_eq(mkdir_p(c.dir, 0755), 0);
        int fd = tf_listen_unix(c.sock);
        ck_assert_int_eq(chmod(c.sock, 0777), 0);
        ck_assert_int_eq(chmod(c.dir, 0711), 0);
        int status = run_part(as_user, xonly_part, &c);
        close(fd);
        (void) rm_rf(top);
        free(c.dir), free(c.sock);
        assert_part(status, as_user);
}

CASE_AS_ROOT_AND_USER(socket_in_enter_only_dir, xonly_as)

typedef struct link_home_case {
        char *link; /* HOME: a symlink outside the system roots */
        char *real; /* /opt/<tag>/home */
} link_home_case;

static void link_home_part(void *arg) {
        link_home_case *c = arg;
        tf_world *w = tf_world_new(NULL);
        _cleanup_free_ char *repo = tf_repo_new(w, NULL, NULL);
        tf_world_setenv(w, "HOME", c->link);
        tf_daemon_start(w);
        _cleanup_free_ char *script = strdup_printf("cat %s/.ssh/id_ed25519 2>&1; cat %s/notes.txt 2>&1; echo end", c->real,
                                                    c->real);
        _cleanup_free_ char *msg = tf_shell_done_output(w, repo, NULL, script, NULL);
        ck_assert_msg(strstr(msg, "end"), "%s", msg);
        ck_assert_msg(!strstr(msg, "SECRET-SSH-KEY"), "~/.ssh of a home linked to /opt is readable: %s", msg);
        ck_assert_msg(!strstr(msg, "HOME-NOTES"), "a home that is a symlink to /opt is shown whole: %s", msg);
        tf_world_free(w);
}

/* RED TEAM: HOME is a symlink (outside the system roots) to a dir under
 * /opt: the home's tmpfs goes over the link's path, which the sandbox does
 * not show anyway, while /opt shows the real dir whole. */
static void link_home_as(bool as_user) {
        _cleanup_free_ char *tag = new_tag();
        _cleanup_free_ char *top = strdup_printf("/opt/%s", tag);
        link_home_case c = {.real = strdup_printf("%s/home", top), .link = strdup_printf("/tmp/%s-home", tag)};
        _cleanup_free_ char *ssh = strdup_printf("%s/.ssh", c.real);
        ck_assert_int_eq(mkdir_p(ssh, 0755), 0);
        tf_write(tf_path(ssh, "id_ed25519"), "SECRET-SSH-KEY\n", 15, 0644);
        tf_write(tf_path(c.real, "notes.txt"), "HOME-NOTES\n", 11, 0644);
        ck_assert_int_eq(symlink(c.real, c.link), 0);
        if (as_user) chown_to_user(c.real);
        int status = run_part(as_user, link_home_part, &c);
        (void) unlink(c.link);
        (void) rm_rf(top);
        free(c.real), free(c.link);
        assert_part(status, as_user);
}

CASE_AS_ROOT_AND_USER(home_linked_to_opt, link_home_as)

/* RED TEAM: a worker's file name that is no UTF-8 (a byte 0xff) goes into
 * the changeset, the task's record, tasks.journal and, after a restart, the
 * table replayed from it: the task stays pending with its change, and a
 * task settled after it too (a record load refuses would stop the replay
 * there). */
static void non_utf8_part(void *arg) {
        (void) arg;
        tf_world *w = tf_world_new(NULL);
        _cleanup_free_ char *repo = tf_repo_new(w, NULL, NULL);
        tf_daemon_start(w);
        json_object *st = NULL;
        _cleanup_free_ char *id = tf_shell_settled(w, repo, NULL, "printf x > \"$(printf 'bad\\377name')\"; echo end", &st);
        _cleanup_free_ char *why = tf_status_why(st);
        fprintf(stderr, "non-utf8 name: %s\n", why);
        tf_assert_status(st, id, "done");
        ck_assert_msg(streq_ptr(tf_jstr(st, "changesetStatus"), "pending"), "the change is not pending: %s", why);
        json_object_put(st);
        _cleanup_free_ char *later = tf_shell_settled(w, repo, NULL, "echo later > later.txt; echo end", &st);
        json_object_put(st);
        tf_daemon_stop(w, SIGKILL);
        tf_daemon_start(w);
        st = tf_wait_settled(w, id);
        _cleanup_free_ char *why2 = tf_status_why(st);
        ck_assert_msg(streq_ptr(tf_jstr(st, "changesetStatus"), "pending"), "after a restart: %s", why2);
        json_object_put(st);
        st = tf_wait_settled(w, later);
        _cleanup_free_ char *why3 = tf_status_why(st);
        ck_assert_msg(streq_ptr(tf_jstr(st, "changesetStatus"), "pending"), "the later task after a restart: %s", why3);
        json_object_put(st);
        _cleanup_free_ char *log = tf_daemon_log(w);
        ck_assert_msg(!strstr(log, "damaged"), "the journal was damaged: %s", log);
        tf_world_free(w);
}

START_TEST(non_utf8_file_name) {
        ck_assert_int_eq(run_part(false, non_utf8_part, NULL), 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("sandbox-host");
        tf_add_tests(s, "host", 600,
                     TF_TESTS(socket_churn_root, socket_churn_user, home_under_opt_root, home_under_opt_user,
                              repo_under_private_parent_root, repo_under_private_parent_user,
                              repo_under_foreign_private_parent));
        tf_add_tests(s, "redteam", 600,
                     TF_TESTS(socket_in_enter_only_dir_root, socket_in_enter_only_dir_user, home_linked_to_opt_root,
                              home_linked_to_opt_user, non_utf8_file_name));
        return tf_run_suite(s);
}
