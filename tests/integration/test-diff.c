/* `taskferry diff` end to end: a real daemon, real bwrap,
 * overlayfs and git, a shell worker that is hostile in what it writes (file
 * names and contents with terminal escapes, non-UTF-8 bytes, a patch over
 * the 1 MiB frame cap). On a pipe the output is the daemon's patch byte for
 * byte and applies with `git apply` in a copy of the repo; in a pseudo
 * terminal it is coloured, escaped and goes through the pager PAGER (or
 * GIT_PAGER) names; --stat; path limits; the errors of tasks without a
 * pending patch; the changeset column of list and the home view. */

#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "strv.h"
#include "utf8.h"

#define ESC_NAME "esc\033[31mname.txt"

static char *make_repo(tf_world *w) {
        return tf_repo_new(w, NULL,
                           "printf 'line one\\nline two\\n' > tracked.txt && printf 'doomed\\n' > doomed.txt && "
                           "mkdir -p sub && printf 'nested\\n' > sub/file.txt && printf 'other\\n' > sub/other.txt");
}

/* The worker: ordinary edits, a Latin-1 file, and a file whose name and
 * content carry escape sequences (clear screen, set title, CR overwrite). */
static const char WORKER[] =
        "set -e; printf 'line one\\nline 2\\nline three\\n' > tracked.txt; printf 'brand new\\n' > added.txt; "
        "rm doomed.txt; printf 'changed nested\\n' > sub/file.txt; printf 'changed other\\n' > sub/other.txt; "
        "printf 'caf\\351 latin1\\n' > latin1.txt; "
        "printf 'evil \\033[2J\\033]0;pwned\\007 text\\rfake\\n' > \"$(printf 'esc\\033[31mname.txt')\"";

static char *dispatch_settled(tf_world *w, const char *repo, const char *script, bool overlay) {
        const char *no_overlay[] = {"--no-overlay", NULL};
        return tf_shell_done(w, repo, overlay ? NULL : no_overlay, script, NULL);
}

static char *patch_path(tf_world *w, const char *id) {
        return strdup_printf("%s/diffs/%s.patch", w->state, id);
}

/* `taskferry diff <args>` with stdout to a file; returns its exit status. */
static int diff_to_file(tf_world *w, const char *args, const char *file) {
        _cleanup_free_ char *cmd = strdup_printf("'%s' diff %s > '%s'", tf_bin("taskferry"), args, file);
        tf_run r = tf_sh(w, NULL, cmd, true);
        int code = r.exit_code;
        tf_run_done(&r);
        return code;
}

static bool file_eq(const char *a, const char *b) {
        size_t la = 0, lb = 0;
        char *da = tf_read(a, &la), *db = tf_read(b, &lb);
        bool eq = la == lb && memcmp(da, db, la) == 0;
        free(da);
        free(db);
        return eq;
}

static size_t count_sections(const char *s) {
        size_t n = 0;
        for (const char *p = s; (p = strstr(p, "diff --git ")); p++)
                if (p == s || p[-1] == '\n') n++;
        return n;
}

TF_WORLD_TEST(pipe_output_applies_byte_exact) {
        char *repo = make_repo(w);
        char *id = dispatch_settled(w, repo, WORKER, true);
        char *patch = patch_path(w, id);
        const char *out = tf_path(w->root, "out.patch");
        ck_assert_int_eq(diff_to_file(w, id, out), 0);
        ck_assert_msg(file_eq(out, patch), "taskferry diff on a pipe differs from the daemon's patch");
        /* plain: the hostile bytes are there raw, as git apply needs them */
        char *text = tf_read(out, NULL);
        ck_assert_ptr_null(strstr(text, "\033[1m"));
        ck_assert_ptr_nonnull(strstr(text, "+evil \033[2J"));
        ck_assert_ptr_nonnull(strstr(text, "+caf\351 latin1"));
        free(text);

        /* it applies in a copy of the repo, through a file and through a pipe */
        char *res = tf_shf(w, w->root,
                           "set -e; cp -a '%s' copy1 && cd copy1 && git apply --check ../out.patch && git apply ../out.patch && "
                           "cat tracked.txt added.txt sub/file.txt && test ! -e doomed.txt && "
                           "printf 'caf\\351 latin1\\n' | cmp - latin1.txt && "
                           "printf 'evil \\033[2J\\033]0;pwned\\007 text\\rfake\\n' | cmp - \"$(printf 'esc\\033[31mname.txt')\" && "
                           "echo same",
                           repo);
        ck_assert_str_eq(res, "line one\nline 2\nline three\nbrand new\nchanged nested\nsame");
        free(res);
        res = tf_shf(w, w->root, "set -e; cp -a '%s' copy2 && cd copy2 && '%s' diff %s | git apply --check && echo ok",
                     repo, tf_bin("taskferry"), id);
        ck_assert_str_eq(res, "ok");
        free(res);
        free(patch);
        free(id);
        free(repo);
}
END_TEST

TF_WORLD_TEST(stat_and_path_limits) {
        char *repo = make_repo(w);
        char *id = dispatch_settled(w, repo, WORKER, true);
        char *patch = patch_path(w, id);

        /* --stat: what git apply --stat says of the patch; names quoted by git */
        const char *stat = tf_path(w->root, "stat.txt");
        _cleanup_free_ char *args = strdup_printf("%s --stat", id);
        ck_assert_int_eq(diff_to_file(w, args, stat), 0);
        char *want = tf_shf(w, "/", "git apply --stat '%s'", patch);
        char *got = tf_read(stat, NULL);
        size_t gl = strlen(got);
        while (gl && (got[gl - 1] == '\n' || got[gl - 1] == ' ')) got[--gl] = 0;
        ck_assert_str_eq(got, want);
        ck_assert_msg(strstr(got, "\"esc\\033[31mname.txt\""), "%s", got);
        ck_assert_ptr_null(strchr(got, '\033'));
        ck_assert_ptr_nonnull(strstr(got, " 7 files changed"));
        free(want);
        free(got);

        /* path limits: directories and files, checked against the file headers */
        const char *lim = tf_path(w->root, "lim.patch");
        free(args);
        args = strdup_printf("%s -- sub tracked.txt", id);
        ck_assert_int_eq(diff_to_file(w, args, lim), 0);
        char *text = tf_read(lim, NULL);
        ck_assert_uint_eq(count_sections(text), 3);
        ck_assert_ptr_nonnull(strstr(text, "diff --git a/sub/file.txt b/sub/file.txt\n"));
        ck_assert_ptr_nonnull(strstr(text, "diff --git a/sub/other.txt b/sub/other.txt\n"));
        ck_assert_ptr_nonnull(strstr(text, "diff --git a/tracked.txt b/tracked.txt\n"));
        ck_assert_ptr_null(strstr(text, "added.txt"));
        free(text);
        char *res = tf_shf(w, w->root, "set -e; cp -a '%s' copy && cd copy && git apply ../lim.patch && "
                                       "cat sub/file.txt tracked.txt && test -e doomed.txt && test ! -e added.txt && echo ok",
                           repo);
        ck_assert_str_eq(res, "changed nested\nline one\nline 2\nline three\nok");
        free(res);

        free(args);
        args = strdup_printf("%s -- ./sub/file.txt", id);
        ck_assert_int_eq(diff_to_file(w, args, lim), 0);
        text = tf_read(lim, NULL);
        ck_assert_uint_eq(count_sections(text), 1);
        free(text);
        /* a hostile name, as the user types it, matches its git-quoted header */
        free(args);
        args = strdup_printf("%s -- \"$(printf 'esc\\033[31mname.txt')\"", id);
        ck_assert_int_eq(diff_to_file(w, args, lim), 0);
        text = tf_read(lim, NULL);
        ck_assert_uint_eq(count_sections(text), 1);
        ck_assert_ptr_nonnull(strstr(text, "+evil \033[2J"));
        free(text);
        /* --stat of a part */
        free(args);
        args = strdup_printf("%s --stat -- sub", id);
        ck_assert_int_eq(diff_to_file(w, args, lim), 0);
        text = tf_read(lim, NULL);
        ck_assert_msg(strstr(text, "sub/file.txt") && strstr(text, " 2 files changed") && !strstr(text, "tracked"), "%s", text);
        free(text);
        /* nothing matches: an error, exit 1 */
        const char *argv[] = {"diff", id, "--", "nowhere", NULL};
        tf_run r = tf_cli(w, NULL, NULL, argv);
        ck_assert_int_eq(r.exit_code, 1);
        _cleanup_free_ char *msg = strdup_printf("error: no file of task %s's changeset matches the given paths\n"
                                                 "help: Run taskferry diff %s --stat to list its files\n", id, id);
        ck_assert_str_eq(r.out, msg);
        tf_run_done(&r);

        free(patch);
        free(id);
        free(repo);
}
END_TEST

/* ---- in a pseudo terminal ---- */

/* Run the CLI with stdout, stdin and stderr a pty; extra: "NAME=value" to
 * set, "NAME" to unset. Returns the exit status, *ret_out what the pty got. */
static int run_pty(tf_world *w, const char *const extra[], const char *const args[], char **ret_out) {
        int master = -1;
        struct winsize ws = {.ws_row = 40, .ws_col = 120};
        pid_t pid = forkpty(&master, NULL, NULL, &ws);
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                char **env = strv_copy(w->env);
                strv_env_unset(&env, "GIT_PAGER");
                strv_env_unset(&env, "PAGER");
                strv_env_unset(&env, "NO_COLOR");
                strv_env_unset(&env, "LESS");
                strv_env_set(&env, "TERM", "xterm");
                for (size_t i = 0; extra && extra[i]; i++) {
                        const char *eq = strchr(extra[i], '=');
                        if (!eq) {
                                strv_env_unset(&env, extra[i]);
                                continue;
                        }
                        char *name = strndup(extra[i], (size_t) (eq - extra[i]));
                        strv_env_set(&env, name, eq + 1);
                        free(name);
                }
                char **argv = NULL;
                strv_push(&argv, tf_bin("taskferry"));
                for (size_t i = 0; args[i]; i++) strv_push(&argv, args[i]);
                if (chdir(w->root) < 0) _exit(126);
                execve(argv[0], argv, env);
                _exit(127);
        }
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        for (;;) {
                struct pollfd p = {.fd = master, .events = POLLIN};
                int k = poll(&p, 1, 120000);
                ck_assert_msg(k > 0, "the CLI in the pty hung");
                char chunk[65536];
                ssize_t n = read(master, chunk, sizeof chunk);
                if (n <= 0) break; /* EIO: the last holder of the pty's other side is gone */
                fwrite(chunk, 1, (size_t) n, f);
        }
        fclose(f);
        close(master);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        *ret_out = buf;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A pager that records its stdin (and $LESS) to <file> and <file>.less. */
static char *pager_cmd(tf_world *w, const char *record) {
        const char *script = tf_path(w->root, "pager.sh");
        if (!tf_exists(script)) {
                const char *text = "#!/bin/sh\nprintf '%s' \"$LESS\" > \"$1.less\"\ncat > \"$1\"\necho pager-done\n";
                tf_write(script, text, strlen(text), 0755);
        }
        return strdup_printf("%s %s", script, tf_path(w->root, record));
}

/* Every ESC must start one of git's default diff colours or the reset. */
static void assert_only_colour_escapes(const char *s, size_t len) {
        static const char *const own[] = {"\033[1m", "\033[36m", "\033[31m", "\033[32m", "\033[m"};
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) s[i];
                if (c == '\033') {
                        bool ok = false;
                        for (size_t k = 0; k < ELEMENTSOF(own) && !ok; k++)
                                if (len - i >= strlen(own[k]) && memcmp(s + i, own[k], strlen(own[k])) == 0) {
                                        i += strlen(own[k]) - 1;
                                        ok = true;
                                }
                        ck_assert_msg(ok, "raw ESC reached the terminal at %zu: [%.*s]", i,
                                      (int) (len - i > 24 ? 24 : len - i), s + i);
                } else
                        ck_assert_msg(c >= 0x20 || c == '\n' || c == '\t' || c == '\r', "control 0x%02x at %zu", c, i);
        }
}

TF_WORLD_TEST(tty_coloured_through_pager) {
        char *repo = make_repo(w);
        char *id = dispatch_settled(w, repo, WORKER, true);
        char *patch = patch_path(w, id);
        const char *args[] = {"diff", id, NULL};

        /* PAGER: the coloured, escaped patch goes to it, nothing to the terminal itself */
        _cleanup_free_ char *pager = pager_cmd(w, "rec1");
        _cleanup_free_ char *pager_env = strdup_printf("PAGER=%s", pager);
        const char *env1[] = {pager_env, NULL};
        char *tty = NULL;
        ck_assert_int_eq(run_pty(w, env1, args, &tty), 0);
        ck_assert_msg(strstr(tty, "pager-done") && !strstr(tty, "diff --git"), "%s", tty);
        free(tty);
        size_t len = 0;
        char *rec = tf_read(tf_path(w->root, "rec1"), &len);
        ck_assert_msg(strstr(rec, "\033[1mdiff --git a/tracked.txt b/tracked.txt\033[m\n"), "%s", rec);
        ck_assert_ptr_nonnull(strstr(rec, "\033[31m-line two\033[m\n"));
        ck_assert_ptr_nonnull(strstr(rec, "\033[32m+line 2\033[m\n"));
        ck_assert_ptr_nonnull(strstr(rec, "\033[36m@@ -1,2 +1,3 @@\033[m\n"));
        /* git quoted the hostile name; the filter escaped the hostile content */
        ck_assert_ptr_nonnull(strstr(rec, "\033[1mdiff --git \"a/esc\\033[31mname.txt\" \"b/esc\\033[31mname.txt\"\033[m\n"));
        ck_assert_msg(strstr(rec, "\033[32m+evil ^[[2J^[]0;pwned^G text^Mfake\033[m\n"), "%s", rec);
        ck_assert_ptr_nonnull(strstr(rec, "\033[32m+caf<E9> latin1\033[m\n"));
        assert_only_colour_escapes(rec, len);
        free(rec);
        rec = tf_read(tf_path(w->root, "rec1.less"), NULL);
        ck_assert_str_eq(rec, "FRX"); /* as git sets it */
        free(rec);

        /* GIT_PAGER wins over PAGER; a LESS of the user's own stays */
        _cleanup_free_ char *gp = pager_cmd(w, "rec2");
        _cleanup_free_ char *gp_env = strdup_printf("GIT_PAGER=%s", gp);
        _cleanup_free_ char *p3 = pager_cmd(w, "rec3");
        _cleanup_free_ char *p3_env = strdup_printf("PAGER=%s", p3);
        const char *env2[] = {gp_env, p3_env, "LESS=-S", NULL};
        ck_assert_int_eq(run_pty(w, env2, args, &tty), 0);
        free(tty);
        ck_assert(tf_exists(tf_path(w->root, "rec2")));
        ck_assert(!tf_exists(tf_path(w->root, "rec3")));
        rec = tf_read(tf_path(w->root, "rec2.less"), NULL);
        ck_assert_str_eq(rec, "-S");
        free(rec);

        /* PAGER=cat is no pager: coloured and escaped straight to the terminal */
        const char *env3[] = {"PAGER=cat", NULL};
        ck_assert_int_eq(run_pty(w, env3, args, &tty), 0);
        ck_assert_msg(strstr(tty, "\033[32m+line 2\033[m"), "%s", tty);
        ck_assert_ptr_nonnull(strstr(tty, "+evil ^[[2J^[]0;pwned^G text^Mfake"));
        assert_only_colour_escapes(tty, strlen(tty));
        free(tty);
        const char *env3b[] = {"GIT_PAGER=", "PAGER=/nonexistent/pager", NULL}; /* empty GIT_PAGER: none either */
        ck_assert_int_eq(run_pty(w, env3b, args, &tty), 0);
        ck_assert_ptr_nonnull(strstr(tty, "\033[32m+line 2\033[m"));
        free(tty);

        /* NO_COLOR: still paged, uncoloured, and still escaped (a terminal never
         * gets the worker's bytes raw) */
        _cleanup_free_ char *p4 = pager_cmd(w, "rec4");
        _cleanup_free_ char *p4_env = strdup_printf("PAGER=%s", p4);
        const char *env4[] = {p4_env, "NO_COLOR=1", NULL};
        ck_assert_int_eq(run_pty(w, env4, args, &tty), 0);
        free(tty);
        rec = tf_read(tf_path(w->root, "rec4"), &len);
        ck_assert_msg(strstr(rec, "\n+evil ^[[2J^[]0;pwned^G text^Mfake\n"), "%s", rec);
        ck_assert_ptr_nonnull(strstr(rec, "\ndiff --git a/tracked.txt b/tracked.txt\n"));
        ck_assert_ptr_null(strchr(rec, '\033'));
        assert_only_colour_escapes(rec, len);
        free(rec);

        /* --stat through the pager, uncoloured */
        _cleanup_free_ char *p5 = pager_cmd(w, "rec5");
        _cleanup_free_ char *p5_env = strdup_printf("PAGER=%s", p5);
        const char *env5[] = {p5_env, NULL};
        const char *stat_args[] = {"diff", id, "--stat", NULL};
        ck_assert_int_eq(run_pty(w, env5, stat_args, &tty), 0);
        free(tty);
        rec = tf_read(tf_path(w->root, "rec5"), NULL);
        ck_assert_msg(strstr(rec, " 7 files changed") && !strchr(rec, '\033'), "%s", rec);
        free(rec);

        /* a pager that quits at once (q in less) ends the diff quietly */
        const char *env6[] = {"PAGER=true", NULL};
        ck_assert_int_eq(run_pty(w, env6, args, &tty), 0);
        ck_assert_msg(!strstr(tty, "error"), "%s", tty);
        free(tty);

        free(patch);
        free(id);
        free(repo);
}
END_TEST

/* A patch over the protocol's 1 MiB frame cap: result --diff cannot carry
 * it, diff streams it, to a pipe and through the pager. */
TF_WORLD_TEST(huge_patch_streams) {
        char *repo = make_repo(w);
        char *id = dispatch_settled(w, repo, "set -e; seq 1 400000 | sed 's/$/ some text to make it long/' > big.txt", true);
        char *patch = patch_path(w, id);
        struct stat st;
        ck_assert_int_eq(stat(patch, &st), 0);
        ck_assert_int_gt(st.st_size, 4 << 20);

        const char *rargv[] = {"result", id, "--diff", NULL};
        tf_run r = tf_cli(w, NULL, NULL, rargv);
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert_ptr_nonnull(strstr(r.out, "exceeds the daemon's response size cap"));
        tf_run_done(&r);

        const char *out = tf_path(w->root, "big.patch");
        ck_assert_int_eq(diff_to_file(w, id, out), 0);
        ck_assert(file_eq(out, patch));
        char *res = tf_shf(w, w->root, "set -e; cp -a '%s' copy && cd copy && '%s' diff %s | git apply && wc -l < big.txt",
                           repo, tf_bin("taskferry"), id);
        ck_assert_str_eq(res, "400000");
        free(res);

        _cleanup_free_ char *pager = pager_cmd(w, "bigrec");
        _cleanup_free_ char *pager_env = strdup_printf("PAGER=%s", pager);
        const char *env[] = {pager_env, "NO_COLOR=1", NULL};
        const char *args[] = {"diff", id, NULL};
        char *tty = NULL;
        ck_assert_int_eq(run_pty(w, env, args, &tty), 0);
        free(tty);
        ck_assert(file_eq(tf_path(w->root, "bigrec"), patch));
        free(patch);
        free(id);
        free(repo);
}
END_TEST

static tf_run cli2(tf_world *w, const char *cwd, const char *a, const char *b) {
        const char *argv[] = {a, b, NULL};
        return tf_cli(w, cwd, NULL, argv);
}

TF_WORLD_TEST(errors_and_changeset_column) {
        char *repo = make_repo(w);
        /* a running task: nothing extracted yet */
        char *id = tf_dispatch_shell(w, repo, NULL, "echo x > f.txt; " TF_WAIT_GO);
        ck_assert(tf_wait_status(w, id, "running", 60000));
        tf_run r = cli2(w, NULL, "diff", id);
        ck_assert_int_eq(r.exit_code, 1);
        _cleanup_free_ char *want = strdup_printf("error: task %s is still running; its changeset is not extracted yet\n"
                                                  "help: \"Run taskferry wait %s, then taskferry diff %s\"\n", id, id, id);
        ck_assert_str_eq(r.out, want);
        tf_run_done(&r);
        r = cli2(w, NULL, "status", id);
        ck_assert_msg(strstr(r.out, "\nchangeset: not extracted yet\n") && !strstr(r.out, "changesetStatus"), "%s", r.out);
        tf_run_done(&r);
        const char *sj[] = {"status", id, "--json", NULL};
        r = tf_cli(w, NULL, NULL, sj);
        ck_assert_ptr_nonnull(strstr(r.out, "\"changesetStatus\":\"pending\"")); /* the wire value stays */
        tf_run_done(&r);
        r = cli2(w, repo, "list", NULL);
        _cleanup_free_ char *row = strdup_printf("%s,running,", id);
        ck_assert_msg(strstr(r.out, "{id,status,model,startedAt,changeset}:") && strstr(r.out, row) &&
                      strstr(r.out, ",not extracted yet\n"), "%s", r.out);
        tf_run_done(&r);

        tf_go(w, id);
        json_object_put(tf_wait_settled(w, id));
        r = cli2(w, repo, "list", NULL);
        ck_assert_msg(strstr(r.out, ",pending\n") || strstr(r.out, ",pending"), "%s", r.out);
        tf_run_done(&r);
        /* the home view: the column and the hint at diff */
        const char *none[] = {NULL};
        r = tf_cli(w, repo, NULL, none);
        ck_assert_msg(strstr(r.out, "{id,status,model,startedAt,changeset}:") &&
                      strstr(r.out, "Run taskferry diff <id> to review a pending changeset"), "%s", r.out);
        tf_run_done(&r);
        r = cli2(w, NULL, "diff", id);
        ck_assert_int_eq(r.exit_code, 0);
        ck_assert_ptr_nonnull(strstr(r.out, "diff --git a/f.txt b/f.txt\nnew file mode 100644\n"));
        tf_run_done(&r);

        /* rejected */
        r = cli2(w, NULL, "reject", id);
        ck_assert_int_eq(r.exit_code, 0);
        tf_run_done(&r);
        r = cli2(w, NULL, "diff", id);
        ck_assert_int_eq(r.exit_code, 1);
        free(want);
        want = strdup_printf("error: \"task %s has no pending changeset (changesetStatus: rejected)\"\n"
                             "help: \"its changeset was discarded (taskferry reject, or a conflict at extraction)\"\n", id);
        ck_assert_str_eq(r.out, want);
        tf_run_done(&r);
        r = cli2(w, repo, "list", NULL);
        ck_assert_msg(strstr(r.out, ",rejected"), "%s", r.out);
        tf_run_done(&r);

        /* no changes: accepted at extraction; no overlay: none */
        char *quiet = dispatch_settled(w, repo, "true", true);
        r = cli2(w, NULL, "diff", quiet);
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert_msg(strstr(r.out, "has no pending changeset (changesetStatus: accepted)"), "%s", r.out);
        tf_run_done(&r);
        char *direct = dispatch_settled(w, repo, "true", false);
        r = cli2(w, NULL, "diff", direct);
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert_msg(strstr(r.out, "has no pending changeset (changesetStatus: none)"), "%s", r.out);
        tf_run_done(&r);
        const char *jargv[] = {"diff", direct, "--json", NULL};
        r = tf_cli(w, NULL, NULL, jargv);
        ck_assert_int_eq(r.exit_code, 1);
        json_object *e = tf_json(r.out);
        ck_assert_ptr_nonnull(strstr(tf_jstr(e, "error"), "changesetStatus: none"));
        json_object_put(e);
        tf_run_done(&r);
        r = cli2(w, NULL, "diff", "oc_nosuch_12345678");
        ck_assert_int_eq(r.exit_code, 1);
        ck_assert_ptr_nonnull(strstr(r.out, "unknown task id: oc_nosuch_12345678"));
        tf_run_done(&r);

        free(quiet);
        free(direct);
        free(id);
        free(repo);
}
END_TEST

/* A worker (hostile, in its sandbox, on its own task socket) asks for another
 * task's patch path through the new result fields and tries the state dir's
 * patch file directly: it gets an unknown task and no file. */
TF_WORLD_TEST(worker_cannot_reach_another_tasks_patch) {
        char *repo = make_repo(w);
        char *victim = dispatch_settled(w, repo, "printf 'secret change\\n' > tracked.txt", true);
        char *patch = patch_path(w, victim);
        ck_assert(tf_exists(patch));
        _cleanup_free_ char *script = strdup_printf(
                "taskferry-test-peer call task.result '{\"taskId\":\"%s\",\"fields\":[\"diffPath\",\"changesetStatus\",\"diff\"]}' "
                "> $TASKFERRY_OUTPUT_DIR/other.txt; "
                "taskferry-test-peer call task.result \"{\\\"taskId\\\":\\\"$TASKFERRY_TASK_ID\\\",\\\"fields\\\":[\\\"diffPath\\\"]}\" "
                "> $TASKFERRY_OUTPUT_DIR/own.txt; "
                "cat '%s' > $TASKFERRY_OUTPUT_DIR/read.txt 2>&1; echo finished",
                victim, patch);
        char *attacker = dispatch_settled(w, repo, script, true);
        char *other = tf_output_read(w, attacker, "other.txt");
        ck_assert_msg(strstr(other, "\"code\":\"UNKNOWN_TASK\"") && !strstr(other, "diffs/") && !strstr(other, "secret"),
                      "%s", other);
        free(other);
        char *own = tf_output_read(w, attacker, "own.txt");
        /* its own task is still running: nothing extracted, no path */
        ck_assert_msg(strstr(own, "\"diffPath\":null"), "%s", own);
        free(own);
        char *read = tf_output_read(w, attacker, "read.txt");
        ck_assert_msg(!strstr(read, "secret change"), "the worker read another task's patch: %s", read);
        free(read);
        free(attacker);
        free(patch);
        free(victim);
        free(repo);
}
END_TEST

int main(void) {
        return tf_run_tests("diff", "diff", 300,
                            TF_TESTS(pipe_output_applies_byte_exact, stat_and_path_limits, tty_coloured_through_pager,
                                     huge_patch_streams, errors_and_changeset_column, worker_cannot_reach_another_tasks_patch));
}
