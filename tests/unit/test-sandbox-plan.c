/* sandbox_plan_build (sandbox-plan.h): the sandbox's root comes from an
 * allow-list, host sockets are absent, masks sit on top of user binds, file
 * secrets are masked, taskferry's own re-exposures come last. Built against
 * a fake home under $TASKFERRY_TEST_TMPDIR with real files, dirs, symlinks
 * and a listening Unix socket. */

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
#include "sandbox-plan.h"
#include "string-util.h"
#include "strv.h"
#include "unit.h"

static char *root, *home;

static char *at(const char *rel) { return strdup_printf("%s/%s", home, rel); }

static void mkfile(const char *rel) {
        _cleanup_free_ char *p = at(rel);
        _cleanup_free_ char *dir = strdup(p);
        *strrchr(dir, '/') = 0;
        ck_assert_int_eq(mkdir_p(dir, 0700), 0);
        ck_assert_int_eq(write_file_atomic(p, "x", 1, 0600), 0);
}

static void mkdirr(const char *rel) {
        _cleanup_free_ char *p = at(rel);
        ck_assert_int_eq(mkdir_p(p, 0700), 0);
}

static int listener(const char *path) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        ck_assert_uint_lt(strlen(path), sizeof sa.sun_path);
        strcpy(sa.sun_path, path);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        ck_assert_int_eq(listen(fd, 1), 0);
        return fd;
}

static void setup(void) {
        root = tf_tmpdir_new("tf-plan");
        home = strdup_printf("%s/home", root);
        mkdirr(".ssh");
        mkfile(".ssh/id_ed25519");
        mkfile(".netrc");
        mkfile(".git-credentials");
        mkfile(".docker/config.json");
        mkfile(".kube/config");
        mkfile(".config/gh/hosts.yml");
        mkfile(".config/other/ok");
        mkfile(".gitconfig");
        mkfile(".local/bin/tool");
        mkfile(".local/share/app/data");
        mkdirr(".docker/desktop");
        mkdirr("work/repo");
        mkfile("work/repo/.netrc");
}

static void teardown(void) {
        root = tf_tmpdir_free(root);
        free(home);
}

static ssize_t find(const sandbox_mount *m, size_t n, sandbox_mount_op op, const char *dest) {
        for (size_t i = 0; i < n; i++)
                if (m[i].op == op && m[i].dest && streq(m[i].dest, dest)) return (ssize_t) i;
        return -1;
}

typedef struct built {
        sandbox_mount *m;
        size_t n;
        char **warnings;
} built;

static built build(char **rw, char **ro, char **extra_deny) {
        _cleanup_strv_free_ char **deny = NULL;
        _cleanup_free_ char *state = at(".local/state/taskferry");
        ck_assert_int_eq(mkdir_p(state, 0700), 0);
        ck_assert_int_eq(sandbox_deny_list(home, state, extra_deny, &deny), 0);
        _cleanup_free_ char *cache = at(".cache/taskferry"), *out = at(".local/state/taskferry/outputs/oc_1");
        ck_assert_int_eq(mkdir_p(cache, 0700), 0);
        char *structural[] = {cache, "/run/user", NULL};
        sandbox_mount tail[] = {{.op = SANDBOX_MOUNT_BIND, .src = out, .dest = out}};
        _cleanup_free_ char *dir = at("work/repo");
        sandbox_plan_args a = {.home = home, .directory = dir, .rw_binds = rw, .ro_binds = ro, .deny = deny,
                               .structural = structural, .tail = tail, .n_tail = 1};
        built b = {0};
        ck_assert_int_eq(sandbox_plan_build(&a, &b.m, &b.n, &b.warnings), 0);
        return b;
}

static void built_done(built *b) {
        sandbox_mounts_free(b->m, b->n);
        strv_free(b->warnings);
}

static bool visible(const built *b, const char *p) { return sandbox_plan_path_visible(b->m, b->n, p); }

START_TEST(test_root_from_allow_list) {
        built b = build(NULL, NULL, NULL);
        ck_assert_int_ge(find(b.m, b.n, SANDBOX_MOUNT_RO_BIND_TRY, "/usr"), 0);
        ck_assert_int_ge(find(b.m, b.n, SANDBOX_MOUNT_TMPFS, "/var/tmp"), 0);
        ck_assert_int_ge(find(b.m, b.n, SANDBOX_MOUNT_TMPFS, "/run"), 0);
        ck_assert_int_ge(find(b.m, b.n, SANDBOX_MOUNT_TMPFS, home), 0);
        ck_assert_int_ge(find(b.m, b.n, SANDBOX_MOUNT_TMPFS, "/dev/shm"), 0);
        for (size_t i = 0; i < b.n; i++) {
                ck_assert_msg(!b.m[i].src || !streq(b.m[i].src, "/"), "the host's / is bound");
                ck_assert_msg(!b.m[i].dest || !streq(b.m[i].dest, "/var") || b.m[i].op == SANDBOX_MOUNT_DIR,
                              "/var comes from the host");
        }
        /* system dirs and toolchains yes; the rest of the home, /run, /var/tmp no */
        ck_assert(visible(&b, "/usr/bin/env"));
        ck_assert(visible(&b, "/bin/sh"));
        _cleanup_free_ char *tool = at(".local/bin/tool"), *gitconfig = at(".gitconfig"), *share = at(".local/share/app/data");
        _cleanup_free_ char *sock = at(".docker/desktop/docker.sock"), *ssh = at(".ssh/id_ed25519"), *repo = at("work/repo/x");
        ck_assert(visible(&b, tool));
        ck_assert(visible(&b, gitconfig));
        ck_assert(visible(&b, repo));
        ck_assert(!visible(&b, share));
        ck_assert(!visible(&b, sock));
        ck_assert(!visible(&b, ssh));
        ck_assert(!visible(&b, "/run/docker.sock"));
        ck_assert(!visible(&b, "/var/run/docker.sock"));
        ck_assert(!visible(&b, "/var/tmp/x.sock"));
        ck_assert(!visible(&b, "/var/lib/docker"));
        /* the re-exposure comes last */
        ck_assert_int_eq(b.m[b.n - 1].op, SANDBOX_MOUNT_BIND);
        ck_assert(strstr(b.m[b.n - 1].dest, "outputs/oc_1"));
        built_done(&b);
}
END_TEST

/* A socket inside an allow-listed dir is never bound on its own: an entry is
 * bound only when it is a dir or a regular file. */
START_TEST(test_allow_list_skips_sockets) {
        _cleanup_free_ char *gc = at(".gitconfig");
        ck_assert_int_eq(unlink(gc), 0);
        int fd = listener(gc);
        built b = build(NULL, NULL, NULL);
        ck_assert_int_lt(find(b.m, b.n, SANDBOX_MOUNT_RO_BIND, gc), 0);
        ck_assert(!visible(&b, gc));
        built_done(&b);
        close(fd);
}
END_TEST

/* --ro-bind ~/.config leaves ~/.config/gh masked: masks come after binds. */
START_TEST(test_binds_never_unmask) {
        _cleanup_free_ char *config = at(".config"), *gh = at(".config/gh"), *hosts = at(".config/gh/hosts.yml"),
                            *other = at(".config/other/ok");
        char *ro[] = {config, NULL};
        built b = build(NULL, ro, NULL);
        ssize_t bind = find(b.m, b.n, SANDBOX_MOUNT_RO_BIND, config), mask = find(b.m, b.n, SANDBOX_MOUNT_TMPFS, gh);
        ck_assert_int_ge(bind, 0);
        ck_assert_int_gt(mask, bind);
        ck_assert(!visible(&b, hosts));
        ck_assert(visible(&b, other));
        ck_assert_ptr_null(b.warnings);
        built_done(&b);

        /* the same with the whole home bound read-write: every default secret stays masked */
        char *rw[] = {home, NULL};
        b = build(rw, NULL, NULL);
        static const char *const secrets[] = {".ssh/id_ed25519", ".netrc", ".git-credentials", ".docker/config.json",
                                              ".kube/config", ".config/gh/hosts.yml"};
        for (size_t i = 0; i < ELEMENTSOF(secrets); i++) {
                _cleanup_free_ char *p = at(secrets[i]);
                ck_assert_msg(!visible(&b, p), "%s is visible", secrets[i]);
        }
        _cleanup_free_ char *netrc = at(".netrc");
        ck_assert_int_ge(find(b.m, b.n, SANDBOX_MOUNT_MASK_FILE, netrc), 0);
        built_done(&b);
}
END_TEST

/* Binding a deny-listed path itself is the user's explicit call: it is
 * bound on top of its mask, with a warning. */
START_TEST(test_explicit_deny_bind_warns) {
        _cleanup_free_ char *ssh = at(".ssh"), *key = at(".ssh/id_ed25519");
        char *ro[] = {home, ssh, NULL};
        built b = build(NULL, ro, NULL);
        ssize_t mask = find(b.m, b.n, SANDBOX_MOUNT_TMPFS, ssh);
        ck_assert_int_ge(mask, 0);
        ssize_t last_bind = -1;
        for (size_t i = 0; i < b.n; i++)
                if (b.m[i].op == SANDBOX_MOUNT_RO_BIND && streq(b.m[i].dest, ssh)) last_bind = (ssize_t) i;
        ck_assert_int_gt(last_bind, mask);
        ck_assert(visible(&b, key));
        ck_assert_ptr_nonnull(b.warnings);
        ck_assert(strstr(b.warnings[0], ssh));
        built_done(&b);
}
END_TEST

/* TASKFERRY_SANDBOX_DENYLIST takes files as well as dirs, relative to home
 * or absolute; a symlinked secret is masked where it points. */
START_TEST(test_extra_deny_and_symlinks) {
        mkfile("secrets/token");
        mkfile("real-aws/credentials");
        _cleanup_free_ char *aws = at(".aws"), *real_aws = at("real-aws"), *cred = at("real-aws/credentials");
        ck_assert_int_eq(symlink(real_aws, aws), 0);
        _cleanup_free_ char *abs_tok = at("secrets/token");
        char *extra[] = {abs_tok, (char *) ".local/share/app", NULL};
        char *rw[] = {home, NULL};
        built b = build(rw, NULL, extra);
        ck_assert_int_ge(find(b.m, b.n, SANDBOX_MOUNT_MASK_FILE, abs_tok), 0);
        _cleanup_free_ char *app = at(".local/share/app"), *data = at(".local/share/app/data");
        ck_assert_int_ge(find(b.m, b.n, SANDBOX_MOUNT_TMPFS, app), 0);
        ck_assert(!visible(&b, data));
        ck_assert(!visible(&b, cred));
        built_done(&b);

        _cleanup_strv_free_ char **deny = NULL;
        _cleanup_free_ char *state = at("st");
        ck_assert_int_eq(sandbox_deny_list(home, state, extra, &deny), 0);
        ck_assert_str_eq(deny[0], state);
        ck_assert(strv_contains(deny, aws));
        ck_assert(strv_contains(deny, real_aws)); /* resolved too */
        ck_assert(strv_contains(deny, app));
}
END_TEST

/* A home that a system root shows (HOME=/opt/x; here /usr/share, which
 * exists everywhere): an empty tmpfs over it, not a dir that leaves the
 * host's entries showing — while its allow-listed entries and a target in
 * it show. */
START_TEST(test_home_under_system_root) {
        const char *h = "/usr/share";
        _cleanup_strv_free_ char **deny = NULL;
        ck_assert_int_eq(sandbox_deny_list(h, NULL, NULL, &deny), 0);
        char *allow[] = {(char *) "doc", NULL};
        sandbox_plan_args a = {.home = h, .directory = "/usr/share/misc", .home_allow = allow, .deny = deny};
        sandbox_mount *m = NULL;
        size_t n = 0;
        ck_assert_int_eq(sandbox_plan_build(&a, &m, &n, NULL), 0);
        ck_assert_int_ge(find(m, n, SANDBOX_MOUNT_TMPFS, h), 0);
        ck_assert_int_lt(find(m, n, SANDBOX_MOUNT_DIR, h), 0);
        ck_assert(!sandbox_plan_path_visible(m, n, "/usr/share/.ssh/id_ed25519"));
        ck_assert(!sandbox_plan_path_visible(m, n, "/usr/share/zoneinfo"));
        ck_assert(sandbox_plan_path_visible(m, n, "/usr/share/doc"));
        ck_assert(sandbox_plan_path_visible(m, n, "/usr/share/misc/x"));
        ck_assert(sandbox_plan_path_visible(m, n, "/usr/bin/env"));
        sandbox_mounts_free(m, n);
        /* HOME=/usr: the system's tools stay, the deny-list is masked */
        _cleanup_strv_free_ char **deny2 = NULL;
        char *extra[] = {(char *) "bin/env", NULL};
        ck_assert_int_eq(sandbox_deny_list("/usr", NULL, extra, &deny2), 0);
        sandbox_plan_args a2 = {.home = "/usr", .directory = "/usr/share/misc", .deny = deny2};
        ck_assert_int_eq(sandbox_plan_build(&a2, &m, &n, NULL), 0);
        ck_assert_int_lt(find(m, n, SANDBOX_MOUNT_TMPFS, "/usr"), 0);
        ck_assert(sandbox_plan_path_visible(m, n, "/usr/bin/sh"));
        ck_assert(!sandbox_plan_path_visible(m, n, "/usr/bin/env"));
        sandbox_mounts_free(m, n);
}
END_TEST

TF_MAIN("sandbox-plan", "plan", setup, teardown, 0, test_root_from_allow_list, test_allow_list_skips_sockets,
        test_binds_never_unmask, test_explicit_deny_bind_warns, test_extra_deny_and_symlinks,
        test_home_under_system_root)
