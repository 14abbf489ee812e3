/* Changesets (changeset.h): extraction from a real overlayfs mounted in a user
 * namespace, apply, numstat, all with the real git. Each scenario builds the
 * state the way a worker leaves it: the target directory D is mounted as an
 * overlay in a forked child (like the shim does), the "worker" edits it there,
 * and we keep a copy of the merged view to compare the applied result with. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "changeset.h"
#include "overlay.h"
#include "fileio.h"
#include "fs-util.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"
#include "utf8.h"

/* ------------------------------------------------------------------------ */
/* helpers (scenarios return NULL or a failure message, so that they can also
 * run in a child as the unprivileged user) */

static char *fail_msg(int line, const char *expr, const char *fmt, ...) _printf_(3, 4);
static char *fail_msg(int line, const char *expr, const char *fmt, ...) {
        char *extra = NULL;
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&extra, fmt, ap) < 0) extra = NULL;
        va_end(ap);
        const char *x = extra ? extra + strspn(extra, " ") : "";
        char *m = strdup_printf("line %d: %s%s%s", line, expr, *x ? ": " : "", x);
        free(extra);
        return m;
}
#define REQUIRE(cond, ...)                                                     \
        do {                                                                   \
                if (!(cond)) return fail_msg(__LINE__, #cond, " " __VA_ARGS__); \
        } while (0)

static int sh(const char *fmt, ...) _printf_(1, 2);
static int sh(const char *fmt, ...) {
        char *cmd = NULL;
        va_list ap;
        va_start(ap, fmt);
        int n = vasprintf(&cmd, fmt, ap);
        va_end(ap);
        if (n < 0) return -1;
        int st = system(cmd);
        free(cmd);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Output of a shell command, trailing whitespace removed. */
static char *capture(const char *fmt, ...) _printf_(1, 2);
static char *capture(const char *fmt, ...) {
        char *cmd = NULL;
        va_list ap;
        va_start(ap, fmt);
        int n = vasprintf(&cmd, fmt, ap);
        va_end(ap);
        if (n < 0) return NULL;
        FILE *f = popen(cmd, "r");
        free(cmd);
        if (!f) return NULL;
        char buf[4096];
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        pclose(f);
        buf[len] = 0;
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' ')) buf[--len] = 0;
        return strdup(buf);
}

static int put(const char *path, const void *data, size_t len) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) return -errno;
        ssize_t n = write(fd, data, len);
        close(fd);
        return n == (ssize_t) len ? 0 : -EIO;
}

static char *slurp(const char *path, size_t *len) {
        char *data = NULL;
        size_t l = 0;
        if (read_file(path, 64 << 20, &data, &l) < 0) return NULL;
        if (len) *len = l;
        return data;
}

static bool contains(const char *hay, size_t len, const char *needle) {
        return memmem(hay, len, needle, strlen(needle)) != NULL;
}

static bool dir_is_empty(const char *path) {
        DIR *d = opendir(path);
        if (!d) return false;
        struct dirent *de;
        bool empty = true;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..")) empty = false;
        closedir(d);
        return empty;
}

/* Mount the overlay on dir in a child (new user + mount namespace, as the
 * shim does) and run the worker's script there with cwd = dir. */
static int run_worker_plain(const char *dir, const char *upper, const char *work, const char *script) {
        pid_t pid = fork();
        if (pid < 0) return -errno;
        if (pid == 0) {
                char *err = NULL;
                if (userns_enter_as_root(getuid(), getgid()) < 0) _exit(90);
                if (overlay_mount(dir, upper, work, dir, true, &err) < 0) {
                        fprintf(stderr, "worker overlay: %s\n", err ? err : "?");
                        _exit(91);
                }
                if (chdir(dir) < 0) _exit(92);
                execl("/bin/sh", "sh", "-ec", script, (char *) NULL);
                _exit(93);
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR) return -errno;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ------------------------------------------------------------------------ */
/* base mode: the same scenarios through the base snapshot (changeset_snapshot
 * before the worker, extraction over the touched paths, 3-way accept). In
 * this mode run_worker takes the snapshot first, at <fixture>/base (beside
 * upper/), as the shim does; extract/apply/is_applied below pass it on. */

static bool g_with_base;

static void with_base_setup(void) {
        g_with_base = true;
}

static char *base_dir_for_upper(const char *upper) {
        const char *sl = strrchr(upper, '/');
        if (!sl) return NULL;
        return strdup_printf("%.*s/base", (int) (sl - upper), upper);
}

/* What the shim does before the worker starts: HEAD (or the empty tree), then the snapshot. */
static int take_base(const char *dir, const char *upper, char **ret_err) {
        _cleanup_free_ char *base = base_dir_for_upper(upper);
        if (!base) return -ENOMEM;
        if (access(base, F_OK) == 0) return 0;
        char *head = capture("git -C '%s' rev-parse --verify -q HEAD 2>/dev/null || "
                             "{ git -C '%s' rev-parse --git-dir >/dev/null 2>&1 && "
                             "echo 4b825dc642cb6eb9a060e54bf8d69288fbee4904; }",
                             dir, dir);
        int r = changeset_snapshot(dir, head && *head ? head : NULL, base, ret_err);
        free(head);
        return r;
}

static int run_worker_plain(const char *dir, const char *upper, const char *work, const char *script);
static int run_worker(const char *dir, const char *upper, const char *work, const char *script) {
        if (g_with_base) {
                char *err = NULL;
                int r = take_base(dir, upper, &err);
                if (r < 0) {
                        fprintf(stderr, "snapshot: %s\n", strnull(err));
                        free(err);
                        return 94;
                }
        }
        return run_worker_plain(dir, upper, work, script);
}

static int extract_maybe_base(const changeset_extract_args *a, char **err) {
        changeset_extract_args b = *a;
        _cleanup_free_ char *base = g_with_base && a->upper ? base_dir_for_upper(a->upper) : NULL;
        b.base_dir = base;
        return changeset_extract(&b, err);
}

static char *g_last_base; /* the base of the last extraction in base mode */

static int apply_maybe_base(const char *dir, const char *patch, char **reason) {
        if (!g_with_base || !g_last_base) return changeset_apply(dir, patch, reason);
        return changeset_apply_3way(dir, patch, g_last_base, reason);
}

static int is_applied_maybe_base(const char *dir, const char *patch) {
        if (!g_with_base || !g_last_base) return changeset_is_applied(dir, patch);
        return changeset_is_applied_3way(dir, patch, g_last_base);
}

static int extract_tracking(const changeset_extract_args *a, char **err) {
        if (g_with_base && a && a->upper) {
                free(g_last_base);
                g_last_base = base_dir_for_upper(a->upper);
        }
        return extract_maybe_base(a, err);
}

#define changeset_extract(a, e) extract_tracking(a, e)
#define changeset_apply(d, p, r) apply_maybe_base(d, p, r)
#define changeset_is_applied(d, p) is_applied_maybe_base(d, p)

/* Record every entry of dir (path, type, mode, size, link target) and the
 * content hash of every file, to prove later that nothing changed. */
static int snapshot(const char *dir, const char *out) {
        return sh("cd '%s' && find . -printf '%%p %%y %%m %%s %%l\\n' | LC_ALL=C sort > '%s.list' && "
                  "find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum > '%s.sum'",
                  dir, out, out);
}
static bool snapshots_equal(const char *a, const char *b) {
        return sh("cmp -s '%s.list' '%s.list' && cmp -s '%s.sum' '%s.sum'", a, b, a, b) == 0;
}

/* The "diff --git a/X b/Y" headers of a patch, as "X -> Y" lines, sorted. */
static char *patch_headers(const char *patch_path) {
        return capture("grep -a '^diff --git ' '%s' | sed 's/^diff --git a\\/\\(.*\\) b\\/\\(.*\\)$/\\1 -> \\2/' | "
                       "LC_ALL=C sort | tr '\\n' '|'",
                       patch_path);
}

typedef struct fixture {
        char *base, *dir, *upper, *work, *scratch, *patch, *expected, *markers;
} fixture;

static void fixture_done(fixture *f) {
        free(f->base), free(f->dir), free(f->upper), free(f->work), free(f->scratch), free(f->patch);
        free(f->expected), free(f->markers);
}

/* base/{D or dir_rel, upper, work, scratch, markers}; patch at base/patch.diff. */
static int fixture_init(fixture *f, const char *base, const char *dir_rel) {
        memset(f, 0, sizeof *f);
        f->base = strdup(base);
        f->dir = strdup_printf("%s/%s", base, dir_rel);
        f->upper = strdup_printf("%s/upper", base);
        f->work = strdup_printf("%s/work", base);
        f->scratch = strdup_printf("%s/scratch", base);
        f->patch = strdup_printf("%s/patch.diff", base);
        f->expected = strdup_printf("%s/expected", base);
        f->markers = strdup_printf("%s/markers", base);
        if (!f->base || !f->dir || !f->upper || !f->work || !f->scratch || !f->patch || !f->expected || !f->markers)
                return -ENOMEM;
        const char *dirs[] = {f->dir, f->upper, f->work, f->scratch, f->markers};
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                int r = mkdir_p(dirs[i], 0755);
                if (r < 0) return r;
        }
        return 0;
}

static char *make_base(void) {
        char tmpl[] = "/var/tmp/tf-changeset-XXXXXX";
        if (!mkdtemp(tmpl)) return NULL;
        return strdup(tmpl);
}

#define GIT "git -c user.name=t -c user.email=t@example.invalid -c init.defaultBranch=main -c advice.addEmbeddedRepo=false"

/* ------------------------------------------------------------------------ */
/* the main round trip: a git repository with pre-existing dirty state, a
 * worker that edits, commits and plants hostile repository config */

static char *scenario_roundtrip(const char *base) {
        _cleanup_(fixture_done) fixture f;
        REQUIRE(fixture_init(&f, base, "D") >= 0);

        /* A program that records it was run: hostile config points here. */
        _cleanup_free_ char *evil = strdup_printf("%s/evil.sh", base);
        _cleanup_free_ char *evil_src = strdup_printf("#!/bin/sh\necho \"$0 $*\" >> '%s/ran'\nexit 0\n", f.markers);
        REQUIRE(put(evil, evil_src, strlen(evil_src)) == 0 && chmod(evil, 0755) == 0);
        REQUIRE(sh("mkdir -p '%s/hooks' && for h in post-index-change pre-commit post-commit; do "
                   "cp '%s' '%s/hooks/'$h; done", base, evil, base) == 0);

        /* Bytes the worker will write: NUL and 0xff, CRLF with non-UTF-8. */
        static const char bin_new[] = "\0\377\376bin\0\n\0";
        static const char bin_mod_old[] = "binary\0old\377";
        static const char bin_mod_new[] = "binary\0new\377\0";
        static const char crlf[] = "x\r\ny\377\r\n";
        _cleanup_free_ char *p1 = strdup_printf("%s/src-bin.dat", base);
        _cleanup_free_ char *p2 = strdup_printf("%s/src-bin-mod-old.dat", base);
        _cleanup_free_ char *p3 = strdup_printf("%s/src-bin-mod-new.dat", base);
        _cleanup_free_ char *p4 = strdup_printf("%s/src-crlf.txt", base);
        REQUIRE(put(p1, bin_new, sizeof bin_new - 1) == 0 && put(p2, bin_mod_old, sizeof bin_mod_old - 1) == 0 &&
                put(p3, bin_mod_new, sizeof bin_mod_new - 1) == 0 && put(p4, crlf, sizeof crlf - 1) == 0);

        /* The host repository: a commit, then pre-existing untracked files,
         * an uncommitted edit, ignored files and an embedded repository. */
        REQUIRE(sh("set -e; cd '%s'; " GIT " init -q .; "
                   "printf 'hello\\n' > a.txt; printf 'old\\n' > del.txt; printf 'keep\\n' > keep.txt; "
                   "printf '1\\n2\\n3\\n4\\n5\\n6\\n7\\n8\\n9\\n' > lines.txt; "
                   "printf 'node_modules/\\n*.log\\n' > .gitignore; cp '%s' bin-mod.dat; "
                   "mkdir -p dir/sub; printf 'deep\\n' > dir/sub/deep.txt; "
                   "printf 'rename me\\nline2\\nline3\\nline4\\n' > ren-src.txt; "
                   GIT " add -A; " GIT " commit -qm init; "
                   "printf 'untracked\\n' > pre-untracked.txt; printf 'dirty\\n' >> a.txt; "
                   "printf 'ignored\\n' > pre.log; mkdir -p node_modules/old; echo x > node_modules/old/i.js; "
                   "mkdir -p tools/sub; cd tools/sub; " GIT " init -q .; echo s > s.txt; " GIT " add s.txt; "
                   GIT " commit -qm s",
                   f.dir, p2) == 0);
        _cleanup_free_ char *pre_head = capture("git -C '%s' rev-parse HEAD", f.dir);
        REQUIRE(pre_head && strlen(pre_head) == 40);
        _cleanup_free_ char *snap0 = strdup_printf("%s/host0", base);
        REQUIRE(snapshot(f.dir, snap0) == 0);

        /* The worker. */
        _cleanup_free_ char *script = strdup_printf(
                "printf 'new\\n' >> a.txt; rm del.txt; printf 'add\\n' > added.txt; "
                "cp '%s' bin.dat; cp '%s' bin-mod.dat; cp '%s' crlf.txt; "
                "sed -i 's/^5$/five/' lines.txt; mv ren-src.txt ren-dst.txt; printf 'line5\\n' >> ren-dst.txt; "
                "rm -rf dir; chmod 755 keep.txt; ln -s a.txt link-to-a; "
                "mkdir -p node_modules/pkg; echo j > node_modules/pkg/index.js; echo log > new.log; "
                "echo S >> tools/sub/s.txt; "
                "mkdir -p vendor/lib; (cd vendor/lib; " GIT " init -q .; echo l > lib.txt; " GIT " add .; "
                GIT " commit -qm l; git config core.fsmonitor '%s'); "
                GIT " add -A --no-warn-embedded-repo; " GIT " commit -qm 'worker commit'; "
                /* hostile repository config and attributes, after the worker's own git runs */
                "git config core.fsmonitor '%s'; git config core.hooksPath '%s/hooks'; "
                "git config filter.evil.clean '%s'; git config filter.evil.smudge '%s'; "
                "git config filter.evil.required true; git config diff.external '%s'; "
                "git config diff.evil.textconv '%s'; git config core.pager '%s'; "
                "printf '* filter=evil diff=evil\\n*.txt text eol=crlf ident working-tree-encoding=UTF-16\\n' "
                "> .gitattributes; "
                "cp -a . '%s'",
                p1, p3, p4, evil, evil, base, evil, evil, evil, evil, evil, f.expected);
        int wr = run_worker(f.dir, f.upper, f.work, script);
        REQUIRE(wr == 0, "worker exited %d", wr);
        REQUIRE(dir_is_empty(f.markers), "the worker setup itself ran the hostile config");

        /* The host's D is untouched by the worker (working tree, index, HEAD, refs). */
        _cleanup_free_ char *snap1 = strdup_printf("%s/host1", base);
        REQUIRE(snapshot(f.dir, snap1) == 0);
        REQUIRE(snapshots_equal(snap0, snap1));

        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = pre_head,
                                    .scratch_dir = f.scratch, .patch_path = f.patch};
        _cleanup_free_ char *err = NULL;
        int r = changeset_extract(&a, &err);
        REQUIRE(r == 1, "r=%d err=%s", r, strnull(err));
        REQUIRE(err == NULL);
        REQUIRE(dir_is_empty(f.markers), "hostile config ran during extraction");
        _cleanup_free_ char *snap2 = strdup_printf("%s/host2", base);
        REQUIRE(snapshot(f.dir, snap2) == 0);
        REQUIRE(snapshots_equal(snap0, snap2), "extraction changed the host's D");

        struct stat st;
        REQUIRE(stat(f.patch, &st) == 0 && (st.st_mode & 07777) == 0600, "mode %o", st.st_mode & 07777);
        size_t plen = 0;
        _cleanup_free_ char *patch = slurp(f.patch, &plen);
        REQUIRE(patch && plen > 0);
        /* Exactly the worker's changes (flattened commit, nested repositories as files). */
        _cleanup_free_ char *headers = patch_headers(f.patch);
        const char *want = ".gitattributes -> .gitattributes|a.txt -> a.txt|added.txt -> added.txt|"
                           "bin-mod.dat -> bin-mod.dat|bin.dat -> bin.dat|crlf.txt -> crlf.txt|del.txt -> del.txt|"
                           "dir/sub/deep.txt -> dir/sub/deep.txt|keep.txt -> keep.txt|lines.txt -> lines.txt|"
                           "link-to-a -> link-to-a|ren-src.txt -> ren-dst.txt|tools/sub/s.txt -> tools/sub/s.txt|"
                           "vendor/lib/lib.txt -> vendor/lib/lib.txt|";
        REQUIRE(headers && streq(headers, want), "\n got %s\nwant %s", strnull(headers), want);
        REQUIRE(contains(patch, plen, "GIT binary patch"));
        REQUIRE(contains(patch, plen, "\n+new\n"));
        REQUIRE(!contains(patch, plen, "+dirty"), "the pre-existing edit leaked into the patch");
        REQUIRE(!contains(patch, plen, "pre-untracked"));
        REQUIRE(!contains(patch, plen, "node_modules") && !contains(patch, plen, ".log"));
        REQUIRE(!contains(patch, plen, ".git/") && !contains(patch, plen, "Subproject"));
        REQUIRE(contains(patch, plen, "old mode 100644\nnew mode 100755"));
        REQUIRE(contains(patch, plen, "new file mode 120000"));
        REQUIRE(contains(patch, plen, "\n+y\377\r\n"), "non-UTF-8 CRLF text must be kept byte for byte");
        /* --full-index: 40-hex index lines */
        REQUIRE(contains(patch, plen, "index 0000000000000000000000000000000000000000.."));

        unsigned files = 0, adds = 0, dels = 0;
        REQUIRE(changeset_numstat(f.patch, &files, &adds, &dels) == 0);
        REQUIRE(files == 14 && adds == 11 && dels == 3, "files=%u adds=%u dels=%u", files, adds, dels);

        /* Accept: every changed file becomes what the worker left. */
        REQUIRE(changeset_is_applied(f.dir, f.patch) == 0, "a patch not yet applied reads as applied");
        _cleanup_free_ char *reason = NULL;
        r = changeset_apply(f.dir, f.patch, &reason);
        REQUIRE(r == 1, "r=%d reason=%s", r, strnull(reason));
        REQUIRE(reason == NULL);
        /* an accept interrupted after the apply is recognised, so it never lands twice */
        REQUIRE(changeset_is_applied(f.dir, f.patch) == 1, "an applied patch does not read as applied");
        REQUIRE(dir_is_empty(f.markers), "hostile attributes ran during apply");
        REQUIRE(sh("diff -r -x .git -x node_modules -x '*.log' '%s' '%s' >&2", f.expected, f.dir) == 0,
                "applied tree differs from the merged view");
        REQUIRE(sh("cmp -s '%s/bin.dat' '%s' && cmp -s '%s/bin-mod.dat' '%s' && cmp -s '%s/crlf.txt' '%s'", f.dir,
                   p1, f.dir, p3, f.dir, p4) == 0);
        /* Other files alone: pre-existing state, ignored files, the host's .git. */
        REQUIRE(sh("cd '%s' && test \"$(cat pre.log)\" = ignored && test ! -e new.log && "
                   "test ! -e node_modules/pkg && test -e node_modules/old/i.js && "
                   "test \"$(cat pre-untracked.txt)\" = untracked && test ! -e del.txt && test ! -e dir && "
                   "test \"$(readlink link-to-a)\" = a.txt && test -x keep.txt && test -d tools/sub/.git && "
                   "test ! -e vendor/lib/.git && test \"$(git rev-parse HEAD)\" = '%s'",
                   f.dir, pre_head) == 0);
        _cleanup_free_ char *idx0 = capture("grep ' ./.git/index$' '%s.sum'", snap0);
        _cleanup_free_ char *idx1 = capture("cd '%s' && sha256sum ./.git/index", f.dir);
        REQUIRE(idx0 && idx1 && streq(idx0, idx1), "apply must not stage anything in the live index");
        return NULL;
}

START_TEST(test_roundtrip_git) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_free_ char *msg = scenario_roundtrip(base);
        ck_assert_msg(msg == NULL, "%s", msg);
        rm_rf(base);
}
END_TEST

/* The same round trip as an unprivileged user: $TASKFERRY_TEST_USER (tools/test
 * creates it and runs every suite as that user too), else taskferry-test. Run as a
 * non-root user, the plain round trip above already is the unprivileged case. */
START_TEST(test_roundtrip_unprivileged) {
        if (getuid() != 0) {
                fprintf(stderr, "not root: test_roundtrip already ran unprivileged\n");
                return;
        }
        const char *user = getenv("TASKFERRY_TEST_USER");
        struct passwd *pw = getpwnam(user && *user ? user : "taskferry-test");
        ck_assert_msg(pw != NULL, "as root this test needs an unprivileged user: set TASKFERRY_TEST_USER "
                                  "(tools/test creates one) or create the user taskferry-test");
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        ck_assert_int_eq(chown(base, pw->pw_uid, pw->pw_gid), 0);
        int pfd[2];
        ck_assert_int_eq(pipe(pfd), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(pfd[0]);
                char *msg = NULL;
                /* A process that changed its credentials is not dumpable, so
                 * its /proc/self/uid_map would stay root's: make it like a
                 * process that user started (runuser/login do the same by exec). */
                if (setgroups(0, NULL) < 0 || setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0 ||
                    prctl(PR_SET_DUMPABLE, 1) < 0)
                        msg = strdup("cannot become the unprivileged user");
                else if (getuid() == 0 || geteuid() == 0)
                        msg = strdup("still root");
                else {
                        setenv("HOME", base, 1);
                        setenv("USER", pw->pw_name, 1);
                        unsetenv("XDG_CONFIG_HOME");
                        msg = scenario_roundtrip(base);
                }
                if (msg) (void) !write(pfd[1], msg, strlen(msg));
                _exit(msg ? 1 : 0);
        }
        close(pfd[1]);
        char buf[4096] = "";
        size_t len = 0;
        ssize_t n;
        while ((n = read(pfd[0], buf + len, sizeof buf - 1 - len)) > 0) len += (size_t) n;
        buf[len] = 0;
        close(pfd[0]);
        int st = 0;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "as the unprivileged user: %s", buf);
        rm_rf(base);
}
END_TEST

/* ------------------------------------------------------------------------ */

START_TEST(test_empty_changeset) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        ck_assert_int_eq(sh("set -e; cd '%s'; " GIT " init -q .; echo a > a.txt; echo '*.o' > .gitignore; "
                            GIT " add -A; " GIT " commit -qm init; echo pre > untracked.txt",
                            f.dir), 0);
        _cleanup_free_ char *head = capture("git -C '%s' rev-parse HEAD", f.dir);
        /* The worker only reads, writes an ignored file, and commits nothing new. */
        ck_assert_int_eq(run_worker(f.dir, f.upper, f.work, "cat a.txt >/dev/null; echo obj > x.o; git status >/dev/null"), 0);
        /* A stale patch from an earlier run must be replaced by the empty one. */
        ck_assert_int_eq(put(f.patch, "stale", 5), 0);
        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = head,
                                    .scratch_dir = f.scratch, .patch_path = f.patch};
        _cleanup_free_ char *err = NULL;
        ck_assert_int_eq(changeset_extract(&a, &err), 0);
        ck_assert_ptr_null(err);
        struct stat st;
        ck_assert_int_eq(stat(f.patch, &st), 0);
        ck_assert_int_eq(st.st_size, 0);
        unsigned files = 9, adds = 9, dels = 9;
        changeset_numstat(f.patch, &files, &adds, &dels);
        ck_assert_uint_eq(files, 0);
        ck_assert_uint_eq(adds, 0);
        ck_assert_uint_eq(dels, 0);
        _cleanup_free_ char *reason = NULL;
        ck_assert_int_eq(changeset_apply(f.dir, f.patch, &reason), 1);
        rm_rf(base);
}
END_TEST

/* A plain directory (no git at all), including nested repositories in it:
 * nothing may be lost, deletions of files and whole directories included. */
START_TEST(test_roundtrip_nongit) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        ck_assert_int_eq(sh("set -e; cd '%s'; echo one > f1; mkdir -p sub gone/deeper redo; echo two > sub/f2; "
                            "echo g > gone/g1; echo g > gone/deeper/g2; echo r > redo/r1; echo '#!/bin/sh' > run.sh; "
                            "mkdir -p repo; cd repo; " GIT " init -q .; echo r > r.txt; " GIT " add .; "
                            GIT " commit -qm r",
                            f.dir), 0);
        _cleanup_free_ char *snap0 = strdup_printf("%s/host0", base);
        ck_assert_int_eq(snapshot(f.dir, snap0), 0);
        _cleanup_free_ char *script = strdup_printf(
                "echo changed >> f1; rm sub/f2; rm -rf gone; rm -rf redo; mkdir redo; echo n > redo/new; "
                "mkdir -p newdir/x; printf 'z\\0z' > newdir/x/bin; chmod +x run.sh; ln -s f1 lnk; "
                "echo R >> repo/r.txt; cp -a . '%s'",
                f.expected);
        ck_assert_int_eq(run_worker(f.dir, f.upper, f.work, script), 0);

        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = NULL,
                                    .scratch_dir = f.scratch, .patch_path = f.patch};
        _cleanup_free_ char *err = NULL;
        int r = changeset_extract(&a, &err);
        ck_assert_msg(r == 1, "r=%d err=%s", r, strnull(err));
        _cleanup_free_ char *snap1 = strdup_printf("%s/host1", base);
        ck_assert_int_eq(snapshot(f.dir, snap1), 0);
        ck_assert(snapshots_equal(snap0, snap1));
        _cleanup_free_ char *headers = patch_headers(f.patch);
        ck_assert_str_eq(headers, "f1 -> f1|gone/deeper/g2 -> gone/deeper/g2|gone/g1 -> gone/g1|lnk -> lnk|"
                                  "newdir/x/bin -> newdir/x/bin|redo/new -> redo/new|redo/r1 -> redo/r1|"
                                  "repo/r.txt -> repo/r.txt|run.sh -> run.sh|sub/f2 -> sub/f2|");

        _cleanup_free_ char *reason = NULL;
        r = changeset_apply(f.dir, f.patch, &reason);
        ck_assert_msg(r == 1, "r=%d reason=%s", r, strnull(reason));
        /* A git patch has no empty directories: deleting sub/f2 leaves none. */
        ck_assert_int_eq(sh("rmdir '%s/sub' && diff -r -x .git '%s' '%s' >&2", f.expected, f.expected, f.dir), 0);
        ck_assert_int_eq(sh("cd '%s' && test ! -e gone && test ! -e redo/r1 && test ! -e sub/f2 && test -x run.sh && "
                            "test -d repo/.git && test \"$(readlink lnk)\" = f1",
                            f.dir), 0);
        rm_rf(base);
}
END_TEST

/* Dispatch into a subdirectory of a repository: patch paths are relative
 * to D, ignore rules of the directories above D apply, and apply writes
 * under D, never at the repository top. */
START_TEST(test_roundtrip_subdir) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "R/pkg"), 0);
        _cleanup_free_ char *top = strdup_printf("%s/R", base);
        ck_assert_int_eq(sh("set -e; cd '%s'; " GIT " init -q .; printf 'node_modules/\\n/pkg/only-top-anchored\\n' "
                            "> .gitignore; echo top > file.txt; echo top > other.txt; "
                            "echo pkg > pkg/file.txt; echo pkg > pkg/other.txt; " GIT " add -A; " GIT " commit -qm i",
                            top), 0);
        _cleanup_free_ char *head = capture("git -C '%s' rev-parse HEAD", top);
        _cleanup_free_ char *script = strdup_printf(
                "echo more >> file.txt; echo new > new.txt; rm other.txt; mkdir -p node_modules/m; "
                "echo m > node_modules/m/i.js; cp -a . '%s'",
                f.expected);
        ck_assert_int_eq(run_worker(f.dir, f.upper, f.work, script), 0);
        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = head,
                                    .scratch_dir = f.scratch, .patch_path = f.patch};
        _cleanup_free_ char *err = NULL;
        int r = changeset_extract(&a, &err);
        ck_assert_msg(r == 1, "r=%d err=%s", r, strnull(err));
        _cleanup_free_ char *headers = patch_headers(f.patch);
        ck_assert_str_eq(headers, "file.txt -> file.txt|new.txt -> new.txt|other.txt -> other.txt|");

        _cleanup_free_ char *idx0 = capture("sha256sum < '%s/.git/index'", top);
        _cleanup_free_ char *reason = NULL;
        r = changeset_apply(f.dir, f.patch, &reason);
        ck_assert_msg(r == 1, "r=%d reason=%s", r, strnull(reason));
        ck_assert_int_eq(sh("diff -r -x node_modules '%s' '%s' >&2", f.expected, f.dir), 0);
        ck_assert_int_eq(sh("cd '%s' && test \"$(cat file.txt)\" = top && test \"$(cat other.txt)\" = top && "
                            "test ! -e new.txt && test ! -e pkg/node_modules && test -e pkg/new.txt",
                            top), 0);
        _cleanup_free_ char *idx1 = capture("sha256sum < '%s/.git/index'", top);
        ck_assert_str_eq(idx0, idx1);
        rm_rf(base);
}
END_TEST

/* A repository with lines.txt; the worker changes line 5 (and adds a file). */
static void conflict_setup(fixture *f, const char *base, char **ret_head) {
        ck_assert_int_ge(fixture_init(f, base, "D"), 0);
        ck_assert_int_eq(sh("set -e; cd '%s'; " GIT " init -q .; printf '1\\n2\\n3\\n4\\n5\\n6\\n7\\n8\\n9\\n' > lines.txt; "
                            GIT " add -A; " GIT " commit -qm i",
                            f->dir), 0);
        *ret_head = capture("git -C '%s' rev-parse HEAD", f->dir);
        ck_assert_int_eq(run_worker(f->dir, f->upper, f->work, "sed -i 's/^5$/five/' lines.txt; echo n > added.txt"), 0);
        changeset_extract_args a = {.directory = f->dir, .upper = f->upper, .work = f->work, .pre_head = *ret_head,
                                    .scratch_dir = f->scratch, .patch_path = f->patch};
        _cleanup_free_ char *err = NULL;
        ck_assert_int_eq(changeset_extract(&a, &err), 1);
}

/* The live file changed in the same place after extraction: nothing is
 * applied (not even the unrelated added file), and git's reason is returned. */
START_TEST(test_apply_conflict_leaves_tree_untouched) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        _cleanup_free_ char *head = NULL;
        conflict_setup(&f, base, &head);
        ck_assert_int_eq(sh("cd '%s' && sed -i 's/^5$/FIVE/' lines.txt", f.dir), 0);
        _cleanup_free_ char *snap0 = strdup_printf("%s/host0", base);
        ck_assert_int_eq(snapshot(f.dir, snap0), 0);
        _cleanup_free_ char *reason = NULL;
        ck_assert_int_eq(changeset_apply(f.dir, f.patch, &reason), 0);
        ck_assert_ptr_nonnull(reason);
        ck_assert_msg(strstr(reason, "lines.txt"), "reason: %s", reason);
        _cleanup_free_ char *snap1 = strdup_printf("%s/host1", base);
        ck_assert_int_eq(snapshot(f.dir, snap1), 0);
        ck_assert(snapshots_equal(snap0, snap1));
        _cleanup_free_ char *added = strdup_printf("%s/added.txt", f.dir);
        ck_assert_int_eq(access(added, F_OK), -1);

        /* A file the patch adds that now exists on the host: also refused whole. */
        ck_assert_int_eq(sh("cd '%s' && git checkout -q lines.txt && echo mine > added.txt", f.dir), 0);
        ck_assert_int_eq(snapshot(f.dir, snap0), 0);
        free(reason);
        reason = NULL;
        ck_assert_int_eq(changeset_apply(f.dir, f.patch, &reason), 0);
        ck_assert_msg(reason && strstr(reason, "added.txt"), "reason: %s", strnull(reason));
        ck_assert_int_eq(snapshot(f.dir, snap1), 0);
        ck_assert(snapshots_equal(snap0, snap1));
        rm_rf(base);
}
END_TEST

/* The live file changed next to the worker's hunk (its context no longer
 * matches): the 3-way merge in a scratch index succeeds and both edits land;
 * the live index is not touched. */
START_TEST(test_apply_three_way_clean) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        _cleanup_free_ char *head = NULL;
        conflict_setup(&f, base, &head);
        ck_assert_int_eq(sh("cd '%s' && sed -i 's/^7$/seven/' lines.txt", f.dir), 0);
        _cleanup_free_ char *idx0 = capture("sha256sum < '%s/.git/index'", f.dir);
        _cleanup_free_ char *reason = NULL;
        int r = changeset_apply(f.dir, f.patch, &reason);
        ck_assert_msg(r == 1, "r=%d reason=%s", r, strnull(reason));
        _cleanup_free_ char *lines = capture("tr '\\n' ' ' < '%s/lines.txt'", f.dir);
        ck_assert_str_eq(lines, "1 2 3 4 five 6 seven 8 9");
        _cleanup_free_ char *added = capture("cat '%s/added.txt'", f.dir);
        ck_assert_str_eq(added, "n");
        _cleanup_free_ char *idx1 = capture("sha256sum < '%s/.git/index'", f.dir);
        ck_assert_str_eq(idx0, idx1);
        rm_rf(base);
}
END_TEST

START_TEST(test_extract_errors) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        /* scratch inside D: the merged view would let the worker plant our git state */
        _cleanup_free_ char *inner = strdup_printf("%s/scratch", f.dir);
        ck_assert_int_ge(mkdir_p(inner, 0700), 0);
        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = NULL,
                                    .scratch_dir = inner, .patch_path = f.patch};
        _cleanup_free_ char *err = NULL;
        ck_assert_int_eq(changeset_extract(&a, &err), -EINVAL);
        ck_assert_ptr_nonnull(err);
        _cleanup_free_ char *prefix = strdup_printf("git diff extraction failed for %s: ", f.dir);
        ck_assert_msg(startswith(err, prefix), "%s", err);

        /* a broken overlay (work dir missing) is an error, never an empty changeset */
        free(err);
        err = NULL;
        a.scratch_dir = f.scratch;
        a.work = "/nonexistent/work";
        ck_assert_int_lt(changeset_extract(&a, &err), 0);
        ck_assert_msg(err && startswith(err, prefix), "%s", strnull(err));
        ck_assert_int_eq(access(f.patch, F_OK), -1);

        /* an argument that would reach git's command line as an option */
        free(err);
        err = NULL;
        a.work = f.work;
        a.pre_head = "--output=/tmp/x";
        ck_assert_int_eq(changeset_extract(&a, &err), -EINVAL);
        rm_rf(base);
}
END_TEST

START_TEST(test_numstat_failure_is_zero) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_free_ char *p = strdup_printf("%s/garbage.diff", base);
        ck_assert_int_eq(put(p, "not a patch\n", 12), 0);
        unsigned files = 7, adds = 7, dels = 7;
        changeset_numstat(p, &files, &adds, &dels);
        ck_assert_uint_eq(files + adds + dels, 0);
        files = adds = dels = 7;
        changeset_numstat("/nonexistent/patch", &files, &adds, &dels);
        ck_assert_uint_eq(files + adds + dels, 0);
        rm_rf(base);
}
END_TEST

/* A worker that deletes .gitignore cannot pull the host's pre-existing
 * ignored files (secrets, dependency trees) into the changeset. */
START_TEST(test_preexisting_ignored_stays_out) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        ck_assert_int_eq(sh("set -e; cd '%s'; " GIT " init -q .; printf '*.env\\ndeps/\\n' > .gitignore; echo a > a.txt; "
                            GIT " add -A; " GIT " commit -qm i; echo SECRET=1 > .env; mkdir deps; echo d > deps/d.js",
                            f.dir), 0);
        _cleanup_free_ char *head = capture("git -C '%s' rev-parse HEAD", f.dir);
        ck_assert_int_eq(run_worker(f.dir, f.upper, f.work, "rm .gitignore; echo b > b.txt; echo SECRET=2 > .env"), 0);
        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = head,
                                    .scratch_dir = f.scratch, .patch_path = f.patch};
        _cleanup_free_ char *err = NULL;
        int r = changeset_extract(&a, &err);
        ck_assert_msg(r == 1, "r=%d err=%s", r, strnull(err));
        _cleanup_free_ char *headers = patch_headers(f.patch);
        ck_assert_str_eq(headers, ".gitignore -> .gitignore|b.txt -> b.txt|");
        size_t plen = 0;
        _cleanup_free_ char *patch = slurp(f.patch, &plen);
        ck_assert(patch && !contains(patch, plen, "SECRET"));
        rm_rf(base);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* paths left out of the changeset (names git refuses, bare-repository parts) */

/* The warning that names path (C-quoted as the warnings quote it), or NULL. */
static const char *warning_for(char **warnings, const char *quoted_path) {
        size_t n = strlen(quoted_path);
        for (size_t i = 0; warnings && warnings[i]; i++)
                if (strncmp(warnings[i], quoted_path, n) == 0 && startswith(warnings[i] + n, ": left out of the changeset"))
                        return warnings[i];
        return NULL;
}

static char *warnings_joined(char **warnings) {
        char *s = strdup("");
        for (size_t i = 0; s && warnings && warnings[i]; i++) {
                char *n = strdup_printf("%s\n  %s", s, warnings[i]);
                free(s);
                s = n;
        }
        return s;
}

/* A program that leaves a mark when it runs; hostile config points at it. */
static char *make_marker_program(const fixture *f) {
        char *prog = strdup_printf("%s/mark.sh", f->base);
        char *src = strdup_printf("#!/bin/sh\necho \"ran in $PWD\" >> '%s/ran'\nexit 0\n", f->markers);
        bool ok = prog && src && put(prog, src, strlen(src)) == 0 && chmod(prog, 0755) == 0;
        free(src);
        if (!ok) {
                free(prog);
                return NULL;
        }
        return prog;
}

/* `git status` (and `git log`) in each directory, as the user would run them
 * after an accept, with the machine's config out of the way. */
static int git_status_everywhere(const char *dir, const char *const *subdirs) {
        for (size_t i = 0; subdirs[i]; i++)
                (void) sh("cd '%s/%s' 2>/dev/null && git status >/dev/null 2>&1; "
                          "cd '%s/%s' 2>/dev/null && git log -1 >/dev/null 2>&1; true",
                          dir, subdirs[i], dir, subdirs[i]);
        return 0;
}

/* Paths git refuses (its NTFS/HFS and .git protections): each is left out with
 * a warning that names it, and so is a tracked file git cannot record (a
 * FIFO now); the rest extracts and applies, a pre-existing refused path the
 * worker left alone raises no warning. */
START_TEST(test_refused_paths_left_out) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        ck_assert_int_eq(sh("set -e; cd '%s'; " GIT " init -q .; echo a > a.txt; mkdir -p src/lib; echo f > src/lib/f.c; "
                            GIT " add -A; " GIT " commit -qm i; mkdir git~1; echo pre > git~1/pre",
                            f.dir), 0);
        _cleanup_free_ char *head = capture("git -C '%s' rev-parse HEAD", f.dir);
        /* .g<U+200C>it and .Git<U+FEFF> (HFS+ ignores both code points), .git.
         * and "git~1" (NTFS), ".git " with a trailing space, .GIT, a
         * .gitmodules symlink. */
        const char *script =
                "set -e; echo more >> a.txt; mkdir -p .GIT/hooks; echo x > .GIT/x; "
                "printf '#!/bin/sh\\n' > .GIT/hooks/pre-commit; "
                "mkdir .git. \"$(printf '.g\\342\\200\\214it')\" \"$(printf '.Git\\357\\273\\277')\" 'src/.git '; "
                "echo c > .git./config; echo c > \"$(printf '.g\\342\\200\\214it')/config\"; "
                "echo c > \"$(printf '.Git\\357\\273\\277')/HEAD\"; echo c > 'src/.git /config'; "
                "echo c > git~1/config; mkdir -p src/lib/GIT~1; echo c > src/lib/GIT~1/HEAD; "
                "ln -s /etc/passwd .gitmodules; echo ok > src/lib/ok.txt; rm src/lib/f.c; mkfifo src/lib/f.c";
        ck_assert_int_eq(run_worker(f.dir, f.upper, f.work, script), 0);
        _cleanup_strv_free_ char **warnings = NULL;
        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = head,
                                    .scratch_dir = f.scratch, .patch_path = f.patch, .ret_warnings = &warnings};
        _cleanup_free_ char *err = NULL;
        int r = changeset_extract(&a, &err);
        ck_assert_msg(r == 1, "r=%d err=%s", r, strnull(err));
        _cleanup_free_ char *headers = patch_headers(f.patch);
        ck_assert_str_eq(headers, "a.txt -> a.txt|src/lib/ok.txt -> src/lib/ok.txt|");
        _cleanup_free_ char *all = warnings_joined(warnings);
        static const char *const refused[] = {
                ".GIT/x", ".GIT/hooks/pre-commit", ".git./config", "\".g\\342\\200\\214it/config\"",
                "\".Git\\357\\273\\277/HEAD\"", "src/.git /config", "git~1/config", "src/lib/GIT~1/HEAD", ".gitmodules",
        };
        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                const char *wr = warning_for(warnings, refused[i]);
                ck_assert_msg(wr, "no warning names %s:%s", refused[i], all);
                ck_assert_msg(strstr(wr, "git refuses"), "%s", wr);
        }
        /* a tracked file turned into a FIFO: git cannot record it either */
        const char *fifo = warning_for(warnings, "src/lib/f.c");
        /* (with a base the upper dir says what it is before git is asked) */
        ck_assert_msg(fifo && (g_with_base ? strstr(fifo, "named pipe") != NULL
                                           : strstr(fifo, "git could not record it: ") &&
                                                     strstr(fifo, "can only add regular files")),
                      "%s", all);
        ck_assert_msg(strv_length(warnings) == ELEMENTSOF(refused) + 1, "unexpected warnings:%s", all);
        ck_assert_msg(!warning_for(warnings, "git~1/pre"), "a pre-existing path raised a warning:%s", all);

        _cleanup_free_ char *reason = NULL;
        r = changeset_apply(f.dir, f.patch, &reason);
        ck_assert_msg(r == 1, "r=%d reason=%s", r, strnull(reason));
        ck_assert_int_eq(sh("cd '%s' && test \"$(cat a.txt)\" = \"$(printf 'a\\nmore')\" && test -e src/lib/ok.txt && "
                            "test ! -e .GIT && test ! -e .git. && test ! -e .gitmodules && test ! -e git~1/config && "
                            "test ! -e \"$(printf '.g\\342\\200\\214it')\" && test ! -e 'src/.git ' && "
                            "test ! -e src/lib/GIT~1 && test \"$(cat git~1/pre)\" = pre && test \"$(cat src/lib/f.c)\" = f",
                            f.dir), 0);
        rm_rf(base);
}
END_TEST

/* Warnings are capped: a worker that creates many refused paths gets
 * CHANGESET_WARNINGS_MAX lines, the last one counting the rest. */
START_TEST(test_warnings_are_capped) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        ck_assert_int_eq(sh("set -e; cd '%s'; echo a > a.txt", f.dir), 0);
        ck_assert_int_eq(run_worker(f.dir, f.upper, f.work,
                                    "mkdir .GIT; i=0; while [ $i -lt 3000 ]; do : > .GIT/f$i; i=$((i+1)); done; "
                                    "echo b > b.txt"),
                         0);
        _cleanup_strv_free_ char **warnings = NULL;
        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = NULL,
                                    .scratch_dir = f.scratch, .patch_path = f.patch, .ret_warnings = &warnings};
        _cleanup_free_ char *err = NULL;
        int r = changeset_extract(&a, &err);
        ck_assert_msg(r == 1, "r=%d err=%s", r, strnull(err));
        _cleanup_free_ char *headers = patch_headers(f.patch);
        ck_assert_str_eq(headers, "b.txt -> b.txt|");
        ck_assert_uint_eq(strv_length(warnings), CHANGESET_WARNINGS_MAX);
        ck_assert_str_eq(warnings[CHANGESET_WARNINGS_MAX - 1],
                         "and 2901 more paths were left out of the changeset");
        ck_assert_msg(startswith(warnings[0], ".GIT/f") && strstr(warnings[0], "git refuses"), "%s", warnings[0]);
        rm_rf(base);
}
END_TEST

/* A worker plants bare repositories whose config would run a program on the
 * user's next `git status`: a fresh one (src/), one completed with pieces the
 * host already has (pkg/: refs tracked, objects ignored), one made of files
 * (bin/: objects and refs as executables), and a linked-worktree git dir
 * (wt/: HEAD + commondir), HEAD + refs alone (ho/). Everything in them is
 * left out with a warning; the rest lands; afterwards `git status` anywhere
 * runs nothing. */
START_TEST(test_bare_repository_shapes_left_out) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        _cleanup_free_ char *mark = make_marker_program(&f);
        ck_assert_ptr_nonnull(mark);
        ck_assert_int_eq(sh("set -e; cd '%s'; " GIT " init -q .; echo a > a.txt; mkdir -p src/lib pkg/refs wt; "
                            "echo f > src/lib/f.c; echo r > pkg/refs/README; echo w > wt/w.txt; "
                            "printf 'objects/\\n' > pkg/.gitignore; " GIT " add -A; " GIT " commit -qm i; "
                            "mkdir -p pkg/objects/info; echo o > pkg/objects/info/o",
                            f.dir), 0);
        _cleanup_free_ char *head = capture("git -C '%s' rev-parse HEAD", f.dir);
        _cleanup_free_ char *script = strdup_printf(
                "set -e; echo more >> a.txt; echo ok > ok.txt; "
                "cfg='[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tworktree = ..\\n\\tfsmonitor = %s\\n'; "
                "printf 'ref: refs/heads/main\\n' > src/HEAD; mkdir -p src/objects/info src/refs/heads; "
                "echo > src/objects/info/keep; echo > src/refs/heads/keep; printf \"$cfg\" > src/config; "
                "printf 'ref: refs/heads/main\\n' > pkg/HEAD; printf \"$cfg\" > pkg/config; "
                "mkdir bin; printf 'ref: refs/heads/main\\n' > bin/HEAD; printf '#!/bin/sh\\n' > bin/objects; "
                "printf '#!/bin/sh\\n' > bin/refs; chmod +x bin/objects bin/refs; printf \"$cfg\" > bin/config; "
                "printf 'ref: refs/heads/main\\n' > wt/HEAD; echo ../.git > wt/commondir; "
                "printf '[core]\\n\\tfsmonitor = %s\\n' > wt/config.worktree; "
                /* HEAD and refs without objects: enough where GIT_OBJECT_DIRECTORY is set */
                "mkdir -p ho/refs/heads; printf 'ref: refs/heads/main\\n' > ho/HEAD; echo > ho/refs/heads/keep; "
                /* changes to tracked files inside them go back, too */
                "echo changed >> pkg/refs/README; rm wt/w.txt",
                mark, mark);
        ck_assert_int_eq(run_worker(f.dir, f.upper, f.work, script), 0);
        /* the planted shapes would work: git status in a copy of the merged
         * view runs the program (the upper dir's whiteout cannot be copied
         * unprivileged, and need not be) */
        ck_assert_int_eq(sh("mkdir -p '%s/probe' && cp -a '%s/.' '%s/probe/' && { cp -a '%s/.' '%s/probe/' 2>/dev/null; "
                            "true; } && cd '%s/probe/src/lib' && git status >/dev/null 2>&1; test -s '%s/ran'",
                            base, f.dir, base, f.upper, base, base, f.markers), 0);
        ck_assert_int_eq(sh("rm -rf '%s/probe' '%s/ran'", base, f.markers), 0);

        _cleanup_strv_free_ char **warnings = NULL;
        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = head,
                                    .scratch_dir = f.scratch, .patch_path = f.patch, .ret_warnings = &warnings};
        _cleanup_free_ char *err = NULL;
        int r = changeset_extract(&a, &err);
        ck_assert_msg(r == 1, "r=%d err=%s", r, strnull(err));
        ck_assert_msg(dir_is_empty(f.markers), "extraction ran the planted config");
        _cleanup_free_ char *headers = patch_headers(f.patch);
        ck_assert_str_eq(headers, "a.txt -> a.txt|ok.txt -> ok.txt|");
        _cleanup_free_ char *all = warnings_joined(warnings);
        static const char *const planted[] = {
                "src/HEAD", "src/objects/info/keep", "src/refs/heads/keep", "src/config", "pkg/HEAD", "pkg/config",
                "bin/HEAD", "bin/objects", "bin/refs", "bin/config", "wt/HEAD", "wt/commondir", "wt/config.worktree",
                "pkg/refs/README", "wt/w.txt", "ho/HEAD", "ho/refs/heads/keep",
        };
        for (size_t i = 0; i < ELEMENTSOF(planted); i++) {
                const char *wr = warning_for(warnings, planted[i]);
                ck_assert_msg(wr, "no warning names %s:%s", planted[i], all);
                ck_assert_msg(strstr(wr, "repository"), "%s", wr);
        }
        ck_assert_msg(strv_length(warnings) == ELEMENTSOF(planted), "unexpected warnings:%s", all);

        _cleanup_free_ char *reason = NULL;
        r = changeset_apply(f.dir, f.patch, &reason);
        ck_assert_msg(r == 1, "r=%d reason=%s", r, strnull(reason));
        ck_assert_int_eq(sh("cd '%s' && test \"$(cat a.txt)\" = \"$(printf 'a\\nmore')\" && test -e ok.txt && "
                            "test ! -e src/HEAD && test ! -e src/objects && test ! -e src/refs && test ! -e src/config && "
                            "test ! -e pkg/HEAD && test ! -e pkg/config && test ! -e bin && test ! -e wt/HEAD && "
                            "test ! -e wt/commondir && test ! -e wt/config.worktree && test \"$(cat pkg/refs/README)\" = r && "
                            "test \"$(cat wt/w.txt)\" = w && test ! -e ho",
                            f.dir), 0);
        static const char *const where[] = {".", "src", "src/lib", "pkg", "pkg/refs", "bin", "wt", NULL};
        git_status_everywhere(f.dir, where);
        ck_assert_msg(dir_is_empty(f.markers), "git status ran a planted program after the accept");
        rm_rf(base);
}
END_TEST

/* A worker plants a .git file (a gitdir: pointer to a bare repository it also
 * planted) and a .git directory (a repository it created): the .git entries
 * and the repository they point to are left out with warnings; the files
 * beside the new repository are kept; no warning for the host's own .git and
 * for a nested repository in an ignored directory. */
START_TEST(test_planted_dotgit_left_out) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        _cleanup_free_ char *mark = make_marker_program(&f);
        ck_assert_ptr_nonnull(mark);
        ck_assert_int_eq(sh("set -e; cd '%s'; " GIT " init -q .; echo a > a.txt; mkdir -p src/lib; echo f > src/lib/f.c; "
                            "echo 'deps/' > .gitignore; " GIT " add -A; " GIT " commit -qm i",
                            f.dir), 0);
        _cleanup_free_ char *head = capture("git -C '%s' rev-parse HEAD", f.dir);
        _cleanup_free_ char *script = strdup_printf(
                "set -e; echo more >> a.txt; "
                "mkdir -p evil/objects evil/refs/heads; printf 'ref: refs/heads/main\\n' > evil/HEAD; "
                "echo > evil/objects/keep; echo > evil/refs/heads/keep; "
                "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = %s\\n' > evil/config; "
                "printf 'gitdir: ../../evil\\n' > src/lib/.git; "
                "mkdir -p vendor/new && cd vendor/new && " GIT " init -q . && echo v > v.txt && "
                GIT " add v.txt && " GIT " commit -qm v && git config core.fsmonitor '%s' && cd ../.. && "
                "mkdir -p deps/d && cd deps/d && " GIT " init -q . && cd ../.. && " GIT " add -A && " GIT " commit -qm w",
                mark, mark);
        ck_assert_int_eq(run_worker(f.dir, f.upper, f.work, script), 0);

        _cleanup_strv_free_ char **warnings = NULL;
        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = head,
                                    .scratch_dir = f.scratch, .patch_path = f.patch, .ret_warnings = &warnings};
        _cleanup_free_ char *err = NULL;
        int r = changeset_extract(&a, &err);
        ck_assert_msg(r == 1, "r=%d err=%s", r, strnull(err));
        _cleanup_free_ char *headers = patch_headers(f.patch);
        ck_assert_str_eq(headers, "a.txt -> a.txt|vendor/new/v.txt -> vendor/new/v.txt|");
        _cleanup_free_ char *all = warnings_joined(warnings);
        static const char *const left_out[] = {"src/lib/.git", "vendor/new/.git", "evil/HEAD", "evil/config",
                                               "evil/objects/keep", "evil/refs/heads/keep"};
        for (size_t i = 0; i < ELEMENTSOF(left_out); i++)
                ck_assert_msg(warning_for(warnings, left_out[i]), "no warning names %s:%s", left_out[i], all);
        ck_assert_msg(strv_length(warnings) == ELEMENTSOF(left_out), "unexpected warnings:%s", all);

        _cleanup_free_ char *reason = NULL;
        r = changeset_apply(f.dir, f.patch, &reason);
        ck_assert_msg(r == 1, "r=%d reason=%s", r, strnull(reason));
        ck_assert_int_eq(sh("cd '%s' && test -e vendor/new/v.txt && test ! -e vendor/new/.git && test ! -e src/lib/.git && "
                            "test ! -e evil && test ! -e deps",
                            f.dir), 0);
        static const char *const where[] = {".", "src", "src/lib", "vendor/new", NULL};
        git_status_everywhere(f.dir, where);
        ck_assert_msg(dir_is_empty(f.markers), "git status ran a planted program after the accept");
        rm_rf(base);
}
END_TEST

/* A patch whose HEAD and config are harmless when extracted becomes a
 * repository if the live tree gains objects/ and refs/ before the accept:
 * the apply refuses it and leaves the tree untouched. */
START_TEST(test_apply_refuses_to_complete_a_repository) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        _cleanup_free_ char *mark = make_marker_program(&f);
        ck_assert_ptr_nonnull(mark);
        ck_assert_int_eq(sh("set -e; cd '%s'; " GIT " init -q .; echo a > a.txt; mkdir -p src/lib; echo f > src/lib/f.c; "
                            GIT " add -A; " GIT " commit -qm i",
                            f.dir), 0);
        _cleanup_free_ char *head = capture("git -C '%s' rev-parse HEAD", f.dir);
        _cleanup_free_ char *script = strdup_printf(
                "set -e; echo more >> a.txt; printf 'ref: refs/heads/main\\n' > src/HEAD; "
                "printf '[core]\\n\\tbare = false\\n\\tworktree = ..\\n\\tfsmonitor = %s\\n' > src/config",
                mark);
        ck_assert_int_eq(run_worker(f.dir, f.upper, f.work, script), 0);
        _cleanup_strv_free_ char **warnings = NULL;
        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = head,
                                    .scratch_dir = f.scratch, .patch_path = f.patch, .ret_warnings = &warnings};
        _cleanup_free_ char *err = NULL;
        ck_assert_int_eq(changeset_extract(&a, &err), 1);
        ck_assert_ptr_null(warnings);
        _cleanup_free_ char *headers = patch_headers(f.patch);
        ck_assert_str_eq(headers, "a.txt -> a.txt|src/HEAD -> src/HEAD|src/config -> src/config|");

        /* the live tree gets the missing pieces (empty directories: never in a patch) */
        ck_assert_int_eq(sh("mkdir '%s/src/objects' '%s/src/refs'", f.dir, f.dir), 0);
        _cleanup_free_ char *snap0 = strdup_printf("%s/host0", base);
        ck_assert_int_eq(snapshot(f.dir, snap0), 0);
        _cleanup_free_ char *reason = NULL;
        int r = changeset_apply(f.dir, f.patch, &reason);
        ck_assert_msg(r == 0, "r=%d reason=%s", r, strnull(reason));
        ck_assert_msg(reason && strstr(reason, "src/") && strstr(reason, "repository"), "%s", strnull(reason));
        _cleanup_free_ char *snap1 = strdup_printf("%s/host1", base);
        ck_assert_int_eq(snapshot(f.dir, snap1), 0);
        ck_assert(snapshots_equal(snap0, snap1));
        static const char *const where[] = {".", "src", "src/lib", NULL};
        git_status_everywhere(f.dir, where);
        ck_assert_msg(dir_is_empty(f.markers), "git status ran a planted program");

        /* without them it applies */
        ck_assert_int_eq(sh("rmdir '%s/src/objects' '%s/src/refs'", f.dir, f.dir), 0);
        free(reason);
        reason = NULL;
        r = changeset_apply(f.dir, f.patch, &reason);
        ck_assert_msg(r == 1, "r=%d reason=%s", r, strnull(reason));
        rm_rf(base);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* the base snapshot: the tree as the worker found it */

/* The repository of the data-loss case: a.txt, dir/old.txt, plus 40 lines to edit at both ends. */
static int make_issue_repo(fixture *f) {
        return sh("set -e; cd '%s'; " GIT " init -q .; printf 'one\\n' > a.txt; mkdir dir; printf 'old\\n' > dir/old.txt; "
                  "seq 1 40 > lines.txt; printf 'b\\n' > b.txt; " GIT " add -A; " GIT " commit -qm init",
                  f->dir);
}

static char *head_of(const char *dir) {
        return capture("git -C '%s' rev-parse HEAD", dir);
}

/* The data loss a base prevents: the user edits while the worker runs. With the
 * base, the user's edits are not the worker "undoing" them: a.txt merges,
 * dir/new.txt (never seen by the worker) is absent from the diff, and the
 * worker's deletion of dir/old.txt, which the user changed, is a conflict
 * that leaves the tree untouched. */
START_TEST(test_base_concurrent_user_edits) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        ck_assert_int_eq(make_issue_repo(&f), 0);
        _cleanup_free_ char *head = head_of(f.dir), *bdir = base_dir_for_upper(f.upper), *err = NULL;
        ck_assert_msg(changeset_snapshot(f.dir, head, bdir, &err) == 0, "%s", strnull(err));
        ck_assert_int_eq(run_worker_plain(f.dir, f.upper, f.work, "printf 'worker\\n' >> a.txt; rm -rf dir"), 0);
        /* the user, meanwhile, on the live tree */
        ck_assert_int_eq(sh("cd '%s' && printf 'user\\n' >> a.txt && printf 'mine\\n' > dir/new.txt && "
                            "printf 'edited\\n' > dir/old.txt && printf 'B\\n' > b.txt",
                            f.dir), 0);
        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = head,
                                    .scratch_dir = f.scratch, .patch_path = f.patch, .base_dir = bdir};
        ck_assert_msg(changeset_extract(&a, &err) == 1, "%s", strnull(err));
        _cleanup_free_ char *headers = patch_headers(f.patch);
        /* only what the worker touched: not dir/new.txt, not b.txt, and not the user's line */
        ck_assert_str_eq(headers, "a.txt -> a.txt|dir/old.txt -> dir/old.txt|");
        size_t plen = 0;
        _cleanup_free_ char *patch = slurp(f.patch, &plen);
        ck_assert(contains(patch, plen, "\n+worker\n") && !contains(patch, plen, "user"));
        ck_assert(contains(patch, plen, "\n-old\n"));

        /* accept: a conflict on dir/old.txt (deleted by the worker, changed by the user) */
        _cleanup_free_ char *snap0 = strdup_printf("%s/host0", base), *snap1 = strdup_printf("%s/host1", base);
        ck_assert_int_eq(snapshot(f.dir, snap0), 0);
        _cleanup_free_ char *reason = NULL;
        int r = changeset_apply_3way(f.dir, f.patch, bdir, &reason);
        ck_assert_msg(r == 0, "r=%d reason=%s", r, strnull(reason));
        ck_assert_msg(reason && strstr(reason, "dir/old.txt") && !strstr(reason, "a.txt"), "%s", strnull(reason));
        ck_assert_int_eq(snapshot(f.dir, snap1), 0);
        ck_assert_msg(snapshots_equal(snap0, snap1), "a refused accept changed the tree");
        ck_assert_int_eq(changeset_is_applied_3way(f.dir, f.patch, bdir), 0);

        /* the user takes back the edit of dir/old.txt: now it merges, and everything of theirs survives */
        ck_assert_int_eq(sh("printf 'old\\n' > '%s/dir/old.txt'", f.dir), 0);
        free(reason);
        reason = NULL;
        r = changeset_apply_3way(f.dir, f.patch, bdir, &reason);
        ck_assert_msg(r == 1, "r=%d reason=%s", r, strnull(reason));
        ck_assert_int_eq(sh("cd '%s' && test \"$(cat a.txt)\" = \"$(printf 'one\\nuser\\nworker')\" || "
                            "test \"$(cat a.txt)\" = \"$(printf 'one\\nworker\\nuser')\"",
                            f.dir), 0);
        ck_assert_int_eq(sh("cd '%s' && test ! -e dir/old.txt && test \"$(cat dir/new.txt)\" = mine && "
                            "test \"$(cat b.txt)\" = B && git diff --cached --quiet",
                            f.dir), 0);
        ck_assert_int_eq(changeset_is_applied_3way(f.dir, f.patch, bdir), 1);
        /* an interrupted accept re-run changes nothing */
        ck_assert_int_eq(snapshot(f.dir, snap0), 0);
        r = changeset_apply_3way(f.dir, f.patch, bdir, &reason);
        ck_assert_int_eq(r, 1);
        ck_assert_int_eq(snapshot(f.dir, snap1), 0);
        ck_assert(snapshots_equal(snap0, snap1));
        rm_rf(base);
}
END_TEST

/* Without a base (today's extraction) the same scenario loses the user's
 * work: kept to show what the base is for. */
START_TEST(test_without_base_user_edits_look_undone) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        ck_assert_int_eq(make_issue_repo(&f), 0);
        _cleanup_free_ char *head = head_of(f.dir), *err = NULL;
        ck_assert_int_eq(run_worker_plain(f.dir, f.upper, f.work, "printf 'worker\\n' >> a.txt; rm -rf dir"), 0);
        ck_assert_int_eq(sh("cd '%s' && printf 'mine\\n' > dir/new.txt", f.dir), 0);
        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = head,
                                    .scratch_dir = f.scratch, .patch_path = f.patch};
        ck_assert_msg(changeset_extract(&a, &err) == 1, "%s", strnull(err));
        _cleanup_free_ char *headers = patch_headers(f.patch);
        ck_assert_msg(headers && strstr(headers, "dir/new.txt"), "%s", strnull(headers));
        rm_rf(base);
}
END_TEST

/* A worker's `truncate -s 8G big.bin` (sparse): left out with a warning
 * naming it, without reading it; the rest extracts and applies. A fifo and a
 * socket cannot be represented: left out too. */
START_TEST(test_base_huge_sparse_and_special_files) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        ck_assert_int_eq(make_issue_repo(&f), 0);
        _cleanup_free_ char *head = head_of(f.dir), *bdir = base_dir_for_upper(f.upper), *err = NULL;
        ck_assert_msg(changeset_snapshot(f.dir, head, bdir, &err) == 0, "%s", strnull(err));
        ck_assert_int_eq(run_worker_plain(f.dir, f.upper, f.work,
                                          "truncate -s 8G big.bin; printf 'w\\n' >> a.txt; mkfifo pipe; "
                                          "mkdir newdir; truncate -s 2G newdir/huge.img; echo n > newdir/n.txt; "
                                          "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")' "
                                          "2>/dev/null || true"),
                         0);
        _cleanup_strv_free_ char **warnings = NULL;
        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = head,
                                    .scratch_dir = f.scratch, .patch_path = f.patch, .base_dir = bdir,
                                    .ret_warnings = &warnings};
        ck_assert_msg(changeset_extract(&a, &err) == 1, "%s", strnull(err));
        _cleanup_free_ char *headers = patch_headers(f.patch);
        ck_assert_str_eq(headers, "a.txt -> a.txt|newdir/n.txt -> newdir/n.txt|");
        _cleanup_free_ char *all = warnings_joined(warnings);
        ck_assert_msg(warning_for(warnings, "big.bin") && strstr(all, "8.0 GiB"), "%s", all);
        ck_assert_msg(warning_for(warnings, "newdir/huge.img"), "%s", all);
        ck_assert_msg(warning_for(warnings, "pipe") && strstr(all, "named pipe"), "%s", all);
        _cleanup_free_ char *reason = NULL;
        int r = changeset_apply_3way(f.dir, f.patch, bdir, &reason);
        ck_assert_msg(r == 1, "r=%d reason=%s", r, strnull(reason));
        ck_assert_int_eq(sh("cd '%s' && test ! -e big.bin && test ! -e pipe && test \"$(tail -1 a.txt)\" = w", f.dir), 0);

        /* the bound is a setting */
        setenv("TASKFERRY_CHANGESET_FILE_MAX", "1K", 1);
        ck_assert_uint_eq(changeset_file_max(), 1024);
        setenv("TASKFERRY_CHANGESET_FILE_MAX", "junk", 1);
        ck_assert_uint_eq(changeset_file_max(), CHANGESET_FILE_MAX_DEFAULT);
        unsetenv("TASKFERRY_CHANGESET_FILE_MAX");
        rm_rf(base);
}
END_TEST

/* Per-attempt scratch dirs: a killed attempt's is removed, no two attempts
 * share one, and a re-run writes the same bytes. */
START_TEST(test_base_extraction_is_idempotent) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        ck_assert_int_eq(make_issue_repo(&f), 0);
        _cleanup_free_ char *head = head_of(f.dir), *bdir = base_dir_for_upper(f.upper), *err = NULL;
        ck_assert_msg(changeset_snapshot(f.dir, head, bdir, &err) == 0, "%s", strnull(err));
        /* a second snapshot never replaces the first */
        ck_assert_int_eq(changeset_snapshot(f.dir, head, bdir, NULL), -EEXIST);
        ck_assert_int_eq(run_worker_plain(f.dir, f.upper, f.work,
                                          "sed -i 's/^20$/twenty/' lines.txt; printf 'x\\0y' > bin.dat; rm b.txt"),
                         0);
        /* what a killed attempt left: a scratch dir with a stale lock */
        ck_assert_int_eq(sh("mkdir -p '%s/scratch.1/git' && touch '%s/scratch.1/index.lock' && mkdir -p '%s/scratch'",
                            base, base, base), 0);
        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = head,
                                    .overlay_root = base, .patch_path = f.patch, .base_dir = bdir};
        ck_assert_msg(changeset_extract(&a, &err) == 1, "%s", strnull(err));
        ck_assert_int_eq(sh("cd '%s' && ! ls -d scratch* 2>/dev/null | grep -q .", base), 0);
        _cleanup_free_ char *first = strdup_printf("%s/first.patch", base);
        ck_assert_int_eq(sh("cp '%s' '%s'", f.patch, first), 0);
        ck_assert_int_eq(changeset_extract(&a, &err), 1);
        ck_assert_int_eq(sh("cmp '%s' '%s'", f.patch, first), 0);
        _cleanup_free_ char *headers = patch_headers(f.patch);
        ck_assert_str_eq(headers, "b.txt -> b.txt|bin.dat -> bin.dat|lines.txt -> lines.txt|");
        rm_rf(base);
}
END_TEST

/* Two changesets from one base touching one file, accepted one after the
 * other: edits far apart merge; the same line conflicts and the second stays
 * unapplied with git's reason, the tree as the first accept left it. */
START_TEST(test_base_two_accepts_one_file) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f1;
        _cleanup_(fixture_done) fixture f2;
        _cleanup_(fixture_done) fixture f3;
        ck_assert_int_ge(fixture_init(&f1, base, "D"), 0);
        _cleanup_free_ char *b2 = strdup_printf("%s/t2", base), *b3 = strdup_printf("%s/t3", base);
        ck_assert_int_ge(fixture_init(&f2, b2, "../D"), 0);
        ck_assert_int_ge(fixture_init(&f3, b3, "../D"), 0);
        ck_assert_int_eq(make_issue_repo(&f1), 0);
        _cleanup_free_ char *head = head_of(f1.dir), *err = NULL;
        fixture *fs[] = {&f1, &f2, &f3};
        const char *scripts[] = {"sed -i 's/^2$/two/' lines.txt", "sed -i 's/^39$/thirty-nine/' lines.txt",
                                 "sed -i 's/^2$/TWO/' lines.txt"};
        char *bd[3] = {NULL, NULL, NULL};
        for (size_t i = 0; i < 3; i++) {
                bd[i] = base_dir_for_upper(fs[i]->upper);
                ck_assert_msg(changeset_snapshot(f1.dir, head, bd[i], &err) == 0, "%s", strnull(err));
                ck_assert_int_eq(run_worker_plain(f1.dir, fs[i]->upper, fs[i]->work, scripts[i]), 0);
                changeset_extract_args a = {.directory = f1.dir, .upper = fs[i]->upper, .work = fs[i]->work,
                                            .pre_head = head, .scratch_dir = fs[i]->scratch,
                                            .patch_path = fs[i]->patch, .base_dir = bd[i]};
                ck_assert_msg(changeset_extract(&a, &err) == 1, "%s", strnull(err));
        }
        _cleanup_free_ char *reason = NULL;
        ck_assert_int_eq(changeset_apply_3way(f1.dir, f1.patch, bd[0], &reason), 1);
        ck_assert_msg(changeset_apply_3way(f1.dir, f2.patch, bd[1], &reason) == 1, "%s", strnull(reason));
        ck_assert_int_eq(sh("cd '%s' && sed -n 2p lines.txt | grep -qx two && sed -n 39p lines.txt | grep -qx thirty-nine",
                            f1.dir), 0);
        _cleanup_free_ char *snap0 = strdup_printf("%s/host0", base), *snap1 = strdup_printf("%s/host1", base);
        ck_assert_int_eq(snapshot(f1.dir, snap0), 0);
        int r = changeset_apply_3way(f1.dir, f3.patch, bd[2], &reason);
        ck_assert_msg(r == 0, "r=%d %s", r, strnull(reason));
        ck_assert_msg(reason && strstr(reason, "lines.txt"), "%s", strnull(reason));
        ck_assert_int_eq(snapshot(f1.dir, snap1), 0);
        ck_assert(snapshots_equal(snap0, snap1));
        for (size_t i = 0; i < 3; i++) free(bd[i]);
        rm_rf(base);
}
END_TEST

/* The snapshot starts from the repository's index: unchanged files are not
 * re-hashed, and dirty and untracked files are part of the base (so they
 * never show up as the worker's), but for untracked files over the size
 * bound. */
START_TEST(test_base_snapshot_contents) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        ck_assert_int_eq(make_issue_repo(&f), 0);
        ck_assert_int_eq(sh("cd '%s' && printf 'dirty\\n' >> a.txt && printf u > untracked.txt && "
                            "printf '*.o\\n' > .gitignore && printf o > x.o && truncate -s 2M huge.img",
                            f.dir), 0);
        /* an untracked file over the bound is not hashed into the base */
        setenv("TASKFERRY_CHANGESET_FILE_MAX", "1M", 1);
        _cleanup_free_ char *head = head_of(f.dir), *bdir = base_dir_for_upper(f.upper), *err = NULL;
        ck_assert_msg(changeset_snapshot(f.dir, head, bdir, &err) == 0, "%s", strnull(err));
        unsetenv("TASKFERRY_CHANGESET_FILE_MAX");
        _cleanup_free_ char *tree = capture("cat '%s/tree'", bdir);
        _cleanup_free_ char *ls = capture("GIT_DIR='%s/git' GIT_ALTERNATE_OBJECT_DIRECTORIES='%s/.git/objects' "
                                          "git ls-tree -r --name-only %s | tr '\\n' ' '",
                                          bdir, f.dir, tree);
        ck_assert_str_eq(ls, ".gitignore a.txt b.txt dir/old.txt lines.txt untracked.txt");
        _cleanup_free_ char *a_txt = capture("GIT_DIR='%s/git' GIT_ALTERNATE_OBJECT_DIRECTORIES='%s/.git/objects' "
                                             "git cat-file blob %s:a.txt",
                                             bdir, f.dir, tree);
        ck_assert_str_eq(a_txt, "one\ndirty");
        /* the temp dir is gone; the base is private */
        struct stat st;
        ck_assert_int_eq(stat(bdir, &st), 0);
        ck_assert_uint_eq(st.st_mode & 077, 0);
        ck_assert_int_eq(sh("ls -d '%s'.tmp.* 2>/dev/null | grep -q .", bdir), 1);
        rm_rf(base);
}
END_TEST

/* An upper dir entry that needs its lower to be read (overlay.metacopy, or
 * overlay.redirect on a renamed directory, which other mounts than ours may
 * make): extraction falls back to the whole-tree comparison, which reads the
 * merged view. (The fallback shows: dir/new.txt, made by the user in a dir
 * the worker removed, is compared too.) */
START_TEST(test_base_metacopy_falls_back) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        ck_assert_int_eq(make_issue_repo(&f), 0);
        _cleanup_free_ char *head = head_of(f.dir), *bdir = base_dir_for_upper(f.upper), *err = NULL;
        ck_assert_msg(changeset_snapshot(f.dir, head, bdir, &err) == 0, "%s", strnull(err));
        ck_assert_int_eq(run_worker_plain(f.dir, f.upper, f.work, "printf 'w\\n' >> a.txt; rm -rf dir"), 0);
        ck_assert_int_eq(sh("printf 'mine\\n' > '%s/dir/new.txt'", f.dir), 0);
        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = head,
                                    .overlay_root = base, .patch_path = f.patch, .base_dir = bdir};
        ck_assert_msg(changeset_extract(&a, &err) == 1, "%s", strnull(err));
        _cleanup_free_ char *headers = patch_headers(f.patch);
        ck_assert_str_eq(headers, "a.txt -> a.txt|dir/old.txt -> dir/old.txt|");
        if (sh("python3 -c 'import os,sys; os.setxattr(sys.argv[1], \"user.overlay.metacopy\", b\"\")' '%s/a.txt'",
               f.upper) != 0) {
                fprintf(stderr, "no user xattrs on %s: fallback not tested\n", f.upper);
                rm_rf(base);
                return;
        }
        ck_assert_msg(changeset_extract(&a, &err) == 1, "%s", strnull(err));
        free(headers);
        headers = patch_headers(f.patch);
        /* (what a.txt is now is the kernel's reading of the metacopy marker: the merged view decides) */
        ck_assert_msg(strstr(headers, "dir/new.txt -> dir/new.txt|dir/old.txt -> dir/old.txt|"), "%s", headers);
        rm_rf(base);
}
END_TEST

/* TASKFERRY_CHANGESET_FILE_MAX: a size, and 0 or garbage falls back to the default */
START_TEST(test_file_max_setting) {
        unsetenv("TASKFERRY_CHANGESET_FILE_MAX");
        ck_assert_uint_eq(changeset_file_max(), CHANGESET_FILE_MAX_DEFAULT);
        setenv("TASKFERRY_CHANGESET_FILE_MAX", "4096", 1);
        ck_assert_uint_eq(changeset_file_max(), 4096);
        setenv("TASKFERRY_CHANGESET_FILE_MAX", "2M", 1);
        ck_assert_uint_eq(changeset_file_max(), (uint64_t) 2 << 20);
        setenv("TASKFERRY_CHANGESET_FILE_MAX", "0", 1);
        ck_assert_uint_eq(changeset_file_max(), CHANGESET_FILE_MAX_DEFAULT);
        setenv("TASKFERRY_CHANGESET_FILE_MAX", "lots", 1);
        ck_assert_uint_eq(changeset_file_max(), CHANGESET_FILE_MAX_DEFAULT);
        unsetenv("TASKFERRY_CHANGESET_FILE_MAX");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* a crash during the accept's write-out */

/* The tree's entries but .git (path, type, mode, size, link target) and the
 * content hashes of its files, one string. */
/* Every entry's path, type and mode, each file's and symlink's size and
 * target, each file's contents. Not a directory's size: ext4 never shrinks a
 * directory, so one that held more temp files at once (a killed accept's and
 * the re-run's) stays larger with the same entries. */
static char *tree_state(const char *dir) {
        return capture("cd '%s' && { find . -path ./.git -prune -o \\( -type d -printf '%%p %%y %%m\\n' \\) -o "
                       "-printf '%%p %%y %%m %%s %%l\\n' | LC_ALL=C sort; "
                       "find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum; } | "
                       "sha256sum",
                       dir);
}

static long long now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The daemon (and with it the accept job and its git, PDEATHSIG) is killed
 * at a random moment of an accept of ~300 files; the next accept must finish
 * it: every file exactly as an uninterrupted accept leaves it (none missing,
 * empty or partial, no line appended twice), no temp file left behind, and
 * `git status` the same. Seeded by TASKFERRY_TEST_SEED, else the time; the
 * seed is printed. */
START_TEST(test_base_accept_killed_midway_converges) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        ck_assert_int_eq(sh("set -e; cd '%s'; " GIT " init -q .; for i in $(seq -w 0 299); do seq 1 400 | sed \"s/^/$i /\" "
                            "> f-$i.txt; done; mkdir -p old/sub; echo gone > old/sub/x.txt; " GIT " add -A; "
                            GIT " commit -qm init",
                            f.dir), 0);
        _cleanup_free_ char *head = head_of(f.dir), *bdir = base_dir_for_upper(f.upper), *err = NULL;
        ck_assert_msg(changeset_snapshot(f.dir, head, bdir, &err) == 0, "%s", strnull(err));
        /* appends, edits, rewrites, deletions, mode changes, new dirs, a symlink */
        ck_assert_int_eq(run_worker_plain(f.dir, f.upper, f.work,
                                          "for i in $(seq -w 0 299); do case $((1$i % 4)) in "
                                          "0) echo \"worker $i\" >> f-$i.txt;; "
                                          "1) sed -i 's/^\\(.*\\) 7$/\\1 seven/' f-$i.txt;; "
                                          "2) seq 1 900 > f-$i.txt;; "
                                          "3) if [ $((1$i % 20)) = 3 ]; then rm f-$i.txt; else chmod +x f-$i.txt; fi;; "
                                          "esac; done; mkdir -p new/sub; for i in $(seq 1 20); do seq $i 300 > new/sub/n-$i; "
                                          "done; ln -s ../f-001.txt new/link; rm -r old"),
                         0);
        /* the user, meanwhile, appends to some of the files the worker appends to */
        ck_assert_int_eq(sh("cd '%s' && for i in $(seq -w 0 8 299); do echo \"user $i\" >> f-$i.txt; done", f.dir), 0);
        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = head,
                                    .scratch_dir = f.scratch, .patch_path = f.patch, .base_dir = bdir};
        ck_assert_msg(changeset_extract(&a, &err) == 1, "%s", strnull(err));
        unsigned files = 0, adds = 0, dels = 0;
        ck_assert_int_eq(changeset_numstat(f.patch, &files, &adds, &dels), 0);
        ck_assert_uint_ge(files, 300);

        /* what an uninterrupted accept leaves */
        _cleanup_free_ char *d0 = strdup_printf("%s/D0", base), *ref = strdup_printf("%s/Dref", base);
        ck_assert_int_eq(sh("cp -a '%s' '%s' && cp -a '%s' '%s'", f.dir, d0, f.dir, ref), 0);
        _cleanup_free_ char *reason = NULL;
        long long t0 = now_us();
        ck_assert_msg(changeset_apply_3way(ref, f.patch, bdir, &reason) == 1, "%s", strnull(reason));
        long long total = now_us() - t0;
        _cleanup_free_ char *want = tree_state(ref);
        _cleanup_free_ char *want_status = capture("git -C '%s' status --porcelain | sha256sum", ref);
        ck_assert_int_eq(sh("cd '%s' && test \"$(grep -c '^worker 000$' f-000.txt)\" = 1 && "
                            "test \"$(grep -c '^user 000$' f-000.txt)\" = 1 && test ! -e f-003.txt && test -x f-007.txt",
                            ref), 0);

        const char *seed_env = getenv("TASKFERRY_TEST_SEED");
        unsigned seed = seed_env && *seed_env ? (unsigned) strtoul(seed_env, NULL, 10) : (unsigned) time(NULL);
        fprintf(stderr, "accept-killed-midway: seed %u (TASKFERRY_TEST_SEED), uninterrupted accept %lld us\n", seed, total);
        srand(seed);
#if defined(__SANITIZE_ADDRESS__)
        const int rounds = 4; /* each 300-file accept is ~10x slower under ASan */
#else
        const int rounds = 20;
#endif
        int interrupted = 0, midway = 0;
        for (int i = 0; i < rounds; i++) {
                ck_assert_int_eq(sh("rm -rf '%s' && cp -a '%s' '%s'", f.dir, d0, f.dir), 0);
                /* increasing delays over the whole accept, the later half (where the writing is) more densely */
                double u = (double) rand() / RAND_MAX;
                long long delay = (long long) ((double) total * (0.25 + 0.85 * ((double) i + u) / rounds));
                pid_t pid = fork();
                ck_assert_int_ge(pid, 0);
                if (pid == 0) {
                        char *why = NULL;
                        int r = changeset_apply_3way(f.dir, f.patch, bdir, &why);
                        _exit(r == 1 ? 0 : 1);
                }
                usleep((useconds_t) delay);
                (void) kill(pid, SIGKILL);
                int st = 0;
                ck_assert_int_eq(waitpid(pid, &st, 0), pid);
                bool killed = WIFSIGNALED(st);
                interrupted += killed;
                if (!killed) ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "round %d: the accept failed", i);
                /* its git commands die with it (PDEATHSIG); give them a moment */
                usleep(20000);
                if (killed) {
                        _cleanup_free_ char *mid = tree_state(f.dir), *before = tree_state(d0);
                        midway += !streq(mid, before) && !streq(mid, want);
                }
                free(reason);
                reason = NULL;
                int r = changeset_apply_3way(f.dir, f.patch, bdir, &reason);
                ck_assert_msg(r == 1, "seed %u round %d (killed after %lld us: %s): re-run accept r=%d: %s", seed, i,
                              delay, killed ? "yes" : "finished first", r, strnull(reason));
                _cleanup_free_ char *got = tree_state(f.dir);
                /* on a mismatch: contents, then types, modes and sizes (what diff -r does not compare) */
                _cleanup_free_ char *diff =
                        streq(got, want)
                                ? NULL
                                : capture("{ diff -r -x .git '%s' '%s'; for d in '%s' '%s'; do (cd \"$d\" && find . -path "
                                          "./.git -prune -o \\( -type d -printf '%%p %%y %%m\\n' \\) -o -printf "
                                          "'%%p %%y %%m %%s %%l\\n' | LC_ALL=C sort) > \"$d.list\"; done; "
                                          "diff '%s.list' '%s.list'; } 2>&1 | head -c 1500",
                                          ref, f.dir, ref, f.dir, ref, f.dir);
                ck_assert_msg(streq(got, want), "seed %u round %d: the tree differs from an uninterrupted accept: %s",
                              seed, i, diff);
                _cleanup_free_ char *left = capture("find '%s' -path '%s/.git' -prune -o -name '.*.tf-*' -print", f.dir,
                                                    f.dir);
                ck_assert_msg(isempty(left), "seed %u round %d: temp files left: %s", seed, i, left);
                _cleanup_free_ char *status = capture("git -C '%s' status --porcelain | sha256sum", f.dir);
                _cleanup_free_ char *sdiff = streq(status, want_status) ? NULL
                                             : capture("cd '%s' && git -C '%s' status --porcelain > s1; git -C '%s' "
                                                       "status --porcelain > s2; diff s1 s2 | head -c 1500",
                                                       base, ref, f.dir);
                ck_assert_msg(streq(status, want_status), "seed %u round %d: git status differs: %s", seed, i, sdiff);
                ck_assert_int_eq(changeset_is_applied_3way(f.dir, f.patch, bdir), 1);
        }
        fprintf(stderr, "accept-killed-midway: %d of %d accepts killed, %d of them in the middle of writing\n",
                interrupted, rounds, midway);
        rm_rf(base);
}
END_TEST

/* An accept killed between a deletion and the pruning of the directories it
 * emptied leaves them; the next accept no longer sees that deletion, and
 * must still end where an uninterrupted one does: whether other writes are
 * left (a merge to write out) or none (the live tree already merged). */
START_TEST(test_base_accept_prunes_what_a_killed_one_emptied) {
        _cleanup_free_ char *base = make_base();
        ck_assert_ptr_nonnull(base);
        _cleanup_(fixture_done) fixture f;
        ck_assert_int_ge(fixture_init(&f, base, "D"), 0);
        ck_assert_int_eq(sh("set -e; cd '%s'; " GIT " init -q .; seq 1 9 > a.txt; mkdir -p old/sub keep; "
                            "echo gone > old/sub/x.txt; echo stays > keep/y.txt; " GIT " add -A; " GIT " commit -qm init",
                            f.dir), 0);
        _cleanup_free_ char *head = head_of(f.dir), *bdir = base_dir_for_upper(f.upper), *err = NULL;
        ck_assert_msg(changeset_snapshot(f.dir, head, bdir, &err) == 0, "%s", strnull(err));
        ck_assert_int_eq(run_worker_plain(f.dir, f.upper, f.work, "rm -r old; echo 10 >> a.txt"), 0);
        changeset_extract_args a = {.directory = f.dir, .upper = f.upper, .work = f.work, .pre_head = head,
                                    .scratch_dir = f.scratch, .patch_path = f.patch, .base_dir = bdir};
        ck_assert_msg(changeset_extract(&a, &err) == 1, "%s", strnull(err));
        _cleanup_free_ char *d0 = strdup_printf("%s/D0", base), *ref = strdup_printf("%s/Dref", base);
        ck_assert_int_eq(sh("cp -a '%s' '%s' && cp -a '%s' '%s'", f.dir, d0, f.dir, ref), 0);
        _cleanup_free_ char *reason = NULL;
        ck_assert_msg(changeset_apply_3way(ref, f.patch, bdir, &reason) == 1, "%s", strnull(reason));
        ck_assert_int_eq(sh("test ! -e '%s/old' && test -d '%s/keep'", ref, ref), 0);
        _cleanup_free_ char *want = tree_state(ref);
        const struct {
                const char *what, *from, *then;
        } cases[] = {
                {"killed after the unlink, the append still to write", d0, "rm '%s/old/sub/x.txt'"},
                {"killed after the last write, before the pruning", ref, "mkdir -p '%s/old/sub'"},
                {"killed between the two prunings, the append still to write", d0,
                 "rm -r '%s/old/sub'"},
                {"killed after the last write, between the two prunings", ref, "mkdir -p '%s/old'"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                ck_assert_int_eq(sh("rm -rf '%s' && cp -a '%s' '%s'", f.dir, cases[i].from, f.dir), 0);
                _cleanup_free_ char *cmd = strdup_printf(cases[i].then, f.dir);
                ck_assert_int_eq(sh("%s", cmd), 0);
                free(reason);
                reason = NULL;
                int r = changeset_apply_3way(f.dir, f.patch, bdir, &reason);
                ck_assert_msg(r == 1, "%s: r=%d %s", cases[i].what, r, strnull(reason));
                _cleanup_free_ char *got = tree_state(f.dir), *ls = capture("cd '%s' && find . -path ./.git -prune -o -print | sort", f.dir);
                ck_assert_msg(streq(got, want), "%s: the tree differs from an uninterrupted accept:\n%s", cases[i].what, ls);
        }
        rm_rf(base);
}
END_TEST

static Suite *changeset_suite(void) {
        Suite *s = suite_create("changeset");
        TCase *tc = tcase_create("changeset");
        tcase_set_timeout(tc, 240);
        tcase_add_test(tc, test_file_max_setting);
        tcase_add_test(tc, test_roundtrip_git);
        tcase_add_test(tc, test_roundtrip_unprivileged);
        tcase_add_test(tc, test_empty_changeset);
        tcase_add_test(tc, test_roundtrip_nongit);
        tcase_add_test(tc, test_roundtrip_subdir);
        tcase_add_test(tc, test_preexisting_ignored_stays_out);
        tcase_add_test(tc, test_apply_conflict_leaves_tree_untouched);
        tcase_add_test(tc, test_apply_three_way_clean);
        tcase_add_test(tc, test_extract_errors);
        tcase_add_test(tc, test_numstat_failure_is_zero);
        tcase_add_test(tc, test_refused_paths_left_out);
        tcase_add_test(tc, test_warnings_are_capped);
        tcase_add_test(tc, test_bare_repository_shapes_left_out);
        tcase_add_test(tc, test_planted_dotgit_left_out);
        tcase_add_test(tc, test_apply_refuses_to_complete_a_repository);
        tcase_add_test(tc, test_without_base_user_edits_look_undone);
        suite_add_tcase(s, tc);

        /* the same scenarios through the base snapshot, and its own */
        TCase *tb = tcase_create("changeset-base");
        tcase_set_timeout(tb, 900);
        tcase_add_checked_fixture(tb, with_base_setup, NULL);
        tcase_add_test(tb, test_roundtrip_git);
        tcase_add_test(tb, test_roundtrip_unprivileged);
        tcase_add_test(tb, test_empty_changeset);
        tcase_add_test(tb, test_roundtrip_nongit);
        tcase_add_test(tb, test_roundtrip_subdir);
        tcase_add_test(tb, test_preexisting_ignored_stays_out);
        tcase_add_test(tb, test_apply_conflict_leaves_tree_untouched);
        tcase_add_test(tb, test_apply_three_way_clean);
        tcase_add_test(tb, test_refused_paths_left_out);
        tcase_add_test(tb, test_warnings_are_capped);
        tcase_add_test(tb, test_bare_repository_shapes_left_out);
        tcase_add_test(tb, test_planted_dotgit_left_out);
        tcase_add_test(tb, test_apply_refuses_to_complete_a_repository);
        tcase_add_test(tb, test_base_concurrent_user_edits);
        tcase_add_test(tb, test_base_huge_sparse_and_special_files);
        tcase_add_test(tb, test_base_extraction_is_idempotent);
        tcase_add_test(tb, test_base_two_accepts_one_file);
        tcase_add_test(tb, test_base_snapshot_contents);
        tcase_add_test(tb, test_base_metacopy_falls_back);
        tcase_add_test(tb, test_base_accept_killed_midway_converges);
        tcase_add_test(tb, test_base_accept_prunes_what_a_killed_one_emptied);
        suite_add_tcase(s, tb);
        return s;
}

int main(void) {
        /* The test's own git commands must not depend on the machine's config. */
        setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
        setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
        /* the accepts' scratch dirs ($TMPDIR/taskferry-apply-*) in a dir of
         * the suite's own: the accepts it kills on purpose leave theirs, and
         * they go with it, not into the machine's /tmp */
        char tmpdir[] = "/var/tmp/tf-changeset-tmp-XXXXXX";
        if (!mkdtemp(tmpdir) || chmod(tmpdir, 01777) < 0) return EXIT_FAILURE;
        setenv("TMPDIR", tmpdir, 1);
        SRunner *sr = srunner_create(changeset_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        (void) rm_rf(tmpdir);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
