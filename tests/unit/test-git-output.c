/* git-output.h: the readers of git's plumbing output, over what the real git
 * writes (diff-tree -r -z raw records of every status, apply --numstat -z
 * with a rename and a binary file, cat-file --batch headers) and over the
 * malformed and truncated records a reader must refuse without reading past
 * the bytes it was given. */
#include <check.h>
#include <limits.h>
#include <string.h>

#include "git-output.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "unit.h"

static char *repo;

static void setup(void) {
        repo = tf_tmpdir_new("tf-git-output");
        free(tf_sh(repo, "git init -q . && git config user.email t@t && git config user.name t && "
                         "printf 'a\\nb\\n' > keep && printf 'x\\n' > gone && printf 'm\\n' > mode && "
                         "printf 'r\\nr\\nr\\nr\\n' > old-name && git add -A && git commit -qm one && "
                         "printf 'a\\nB\\nc\\n' > keep && rm gone && chmod +x mode && printf 'new\\n' > 'sp ace' && "
                         "ln -s keep link && git mv old-name new-name && printf '\\0\\1\\2' > bin && "
                         "git add -A && git commit -qm two"));
}

static void teardown(void) { repo = tf_tmpdir_free(repo); }

/* git argv... in repo; its stdout as run_command captured it */
static void git_out(run_result *rr, char *const *argv) {
        ck_assert_int_eq(run_command(argv, NULL, repo, 1 << 20, -1, rr), 0);
        ck_assert_msg(rr->exit_code == 0, "git failed: %s", rr->err);
}

START_TEST(raw_records_of_real_git) {
        run_result rr;
        git_out(&rr, (char *[]) {(char *) "git", (char *) "diff-tree", (char *) "-r", (char *) "-z", (char *) "--no-renames",
                                 (char *) "HEAD~", (char *) "HEAD", NULL});
        static const struct {
                const char *path;
                char status;
                unsigned old_mode, new_mode;
        } want[] = {
                {"bin", 'A', 0, 0100644},       {"gone", 'D', 0100644, 0},    {"keep", 'M', 0100644, 0100644},
                {"link", 'A', 0, 0120000},      {"mode", 'M', 0100644, 0100755}, {"new-name", 'A', 0, 0100644},
                {"old-name", 'D', 0100644, 0},  {"sp ace", 'A', 0, 0100644},
        };
        const char *p = rr.out;
        GitRawRecord rec;
        for (size_t i = 0; i < ELEMENTSOF(want); i++) {
                ck_assert_int_eq(git_raw_next(&p, rr.out + rr.out_len, &rec), 1);
                ck_assert_str_eq(rec.path, want[i].path);
                ck_assert_int_eq(rec.status, want[i].status);
                ck_assert_uint_eq(rec.old_mode, want[i].old_mode);
                ck_assert_uint_eq(rec.new_mode, want[i].new_mode);
                ck_assert_uint_eq(strlen(rec.old_oid), 40);
                ck_assert_uint_eq(strlen(rec.new_oid), 40);
                ck_assert(want[i].old_mode || strspn(rec.old_oid, "0") == 40);
        }
        ck_assert_int_eq(git_raw_next(&p, rr.out + rr.out_len, &rec), 0);
        run_result_done(&rr);
}
END_TEST

START_TEST(raw_records_malformed) {
        static const char oid[] = "0123456789abcdef0123456789abcdef01234567";
        _cleanup_free_ char *good = strdup_printf(":100644 100644 %s %s M", oid, oid);
        static const char *const bad_headers[] = {
                "100644 100644 x y M", ":10064 100644 a b M", ":100648 100644 a b M", ":100644 100644 abc abc M",
                ":100644 100644 " "0123456789ABCDEF0123456789abcdef01234567 0123456789abcdef0123456789abcdef01234567 M",
                ":100644 100644 0123456789abcdef0123456789abcdef01234567 0123456789abcdef0123456789abcdef01234567 m",
                ":100644 100644 0123456789abcdef0123456789abcdef01234567 0123456789abcdef0123456789abcdef01234567 M x",
                ":", "",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad_headers); i++) {
                char buf[256];
                size_t n = (size_t) snprintf(buf, sizeof buf, "%s%cpath%c", bad_headers[i], 0, 0);
                const char *p = buf;
                GitRawRecord rec;
                ck_assert_msg(git_raw_next(&p, buf + n, &rec) == -EBADMSG, "accepted: %s", bad_headers[i]);
                ck_assert_ptr_eq(p, buf);
        }
        /* a score after the status is git's (C75, R100); an empty path or one
         * not ended within the bytes given is refused */
        char buf[256];
        size_t n = (size_t) snprintf(buf, sizeof buf, "%s75%cpath%c", good, 0, 0);
        const char *p = buf;
        GitRawRecord rec;
        ck_assert_int_eq(git_raw_next(&p, buf + n, &rec), 1);
        ck_assert_str_eq(rec.path, "path");
        n = (size_t) snprintf(buf, sizeof buf, "%s%c%c", good, 0, 0);
        p = buf;
        ck_assert_int_eq(git_raw_next(&p, buf + n, &rec), -EBADMSG);
        n = (size_t) snprintf(buf, sizeof buf, "%s%cpath", good, 0);
        p = buf;
        ck_assert_int_eq(git_raw_next(&p, buf + n, &rec), -EBADMSG);
        p = buf;
        ck_assert_int_eq(git_raw_next(&p, buf + strlen(good), &rec), -EBADMSG); /* the header's NUL is past the end */
}
END_TEST

START_TEST(numstat_of_real_git) {
        /* `git diff --numstat -z` writes the records `git apply --numstat -z`
         * does, and a rename in the two-path form */
        run_result rr;
        git_out(&rr, (char *[]) {(char *) "git", (char *) "diff", (char *) "-M", (char *) "--numstat", (char *) "-z",
                                 (char *) "HEAD~", (char *) "HEAD", NULL});
        const char *p = rr.out;
        GitNumstat e;
        bool saw_rename = false, saw_binary = false, saw_keep = false;
        int r;
        while ((r = git_numstat_next(&p, rr.out + rr.out_len, &e)) > 0) {
                if (e.old_path) {
                        ck_assert_str_eq(e.old_path, "old-name");
                        ck_assert_str_eq(e.path, "new-name");
                        saw_rename = true;
                }
                if (streq(e.path, "bin")) saw_binary = e.binary;
                if (streq(e.path, "keep")) {
                        ck_assert_uint_eq(e.adds, 2);
                        ck_assert_uint_eq(e.dels, 1);
                        saw_keep = true;
                }
        }
        ck_assert_int_eq(r, 0);
        ck_assert(saw_rename && saw_binary && saw_keep);
        run_result_done(&rr);

        static const char *const bad[] = {"1\t2\tpath", "1\t2", "x\t2\tp", "-\t2\tp", "1\t2\t\0old", "1\t\t\0a\0b", "\t1\tp"};
        static const size_t bad_len[] = {8, 3, 5, 5, 8, 7, 4}; /* without their last NUL */
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                p = bad[i];
                ck_assert_msg(git_numstat_next(&p, bad[i] + bad_len[i], &e) == -EBADMSG, "accepted entry %zu", i);
        }
        static const char big[] = "99999999999\t0\tp";
        p = big;
        ck_assert_int_eq(git_numstat_next(&p, big + sizeof big, &e), 1);
        ck_assert_uint_eq(e.adds, UINT_MAX);
}
END_TEST

START_TEST(cat_headers) {
        static const char oid[] = "0123456789abcdef0123456789abcdef01234567";
        char type[32];
        uint64_t size = 7;
        _cleanup_free_ char *line = tf_sh(repo, "echo HEAD:keep | git cat-file --batch-check");
        _cleanup_free_ char *keep = tf_sh(repo, "git rev-parse HEAD:keep");
        ck_assert_int_eq(git_cat_header_parse(line, keep, type, &size), 1);
        ck_assert_str_eq(type, "blob");
        ck_assert_uint_eq(size, 6);
        _cleanup_free_ char *missing = tf_sh(repo, "echo %s | git cat-file --batch-check", oid);
        ck_assert_int_eq(git_cat_header_parse(missing, oid, type, &size), 0);
        _cleanup_free_ char *hdr = strdup_printf("%s blob 18446744073709551615", oid);
        ck_assert_int_eq(git_cat_header_parse(hdr, oid, type, &size), 1);
        ck_assert_uint_eq(size, UINT64_MAX);
        static const char *const bad[] = {
                " blob 1", "blob", "blob 18446744073709551616", "blob -1", "blob 01", "blob 1 x", "Blob 1",
                "averyveryveryveryverylongtypename 1", "blob  1", "",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *l = strdup_printf("%s %s", oid, bad[i]);
                ck_assert_msg(git_cat_header_parse(l, oid, type, &size) == -EBADMSG, "accepted: %s", l);
        }
        _cleanup_free_ char *other = strdup_printf("%s blob 1", keep);
        ck_assert_int_eq(git_cat_header_parse(other, oid, type, &size), -EBADMSG);
}
END_TEST

int main(void) {
        Suite *s = suite_create("git-output");
        tf_tcase(s, "readers", setup, teardown, 60,
                 TF_TESTS(raw_records_of_real_git, raw_records_malformed, numstat_of_real_git, cat_headers));
        return tf_run_suite(s);
}
