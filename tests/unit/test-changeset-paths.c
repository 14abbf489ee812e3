/* changeset-paths.c: a changeset's paths as git quotes them, the warnings
 * for the paths left out (kept, counted, handed over), and opening beneath
 * a directory without following a symlink. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "changeset-paths.h"
#include "fs-util.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"
#include "unit.h"

static void check_quote(const char *path, const char *want) {
        char *q = cs_quote_path(path);
        ck_assert_ptr_nonnull(q);
        ck_assert_str_eq(q, want);
        free(q);
}

START_TEST(quote_as_git_does) {
        check_quote("src/a.c", "src/a.c");
        check_quote("with space", "with space");
        check_quote("a\"b", "\"a\\\"b\"");
        check_quote("back\\slash", "\"back\\\\slash\"");
        check_quote("tab\there\n", "\"tab\\there\\n\"");
        /* an invisible code point shows (U+200C, ZERO WIDTH NON-JOINER) */
        check_quote(".g\xe2\x80\x8cit", "\".g\\342\\200\\214it\"");
        check_quote("\x01", "\"\\001\"");
}
END_TEST

START_TEST(warnings_keep_a_bounded_list) {
        warnings w = {};
        for (int i = 0; i < CHANGESET_WARNINGS_MAX + 50; i++) {
                char *p = strdup_printf("p%d", i);
                ck_assert_int_eq(warn_path(&w, p, "why"), 0);
                free(p);
        }
        ck_assert_uint_eq(w.total, CHANGESET_WARNINGS_MAX + 50);
        ck_assert_uint_eq(w.n_lines, CHANGESET_WARNINGS_MAX);
        char **l = NULL;
        ck_assert_int_eq(warnings_finish(&w, &l), 0);
        ck_assert_uint_eq(strv_length(l), CHANGESET_WARNINGS_MAX);
        ck_assert_str_eq(l[0], "p0: left out of the changeset: why");
        /* the last kept line gives way to the count of the rest */
        ck_assert_str_eq(l[CHANGESET_WARNINGS_MAX - 1], "and 51 more paths were left out of the changeset");
        strv_free(l);
        warnings_done(&w);
}
END_TEST

START_TEST(warnings_from_a_child_reply) {
        warnings w = {};
        ck_assert_int_eq(warn_path(&w, "mine", "ours"), 0);
        /* the child counted 5 but sent 2 (NUL-terminated, an empty entry skipped) */
        static const char reply[] = "a: left out of the changeset: x\0\0b: left out of the changeset: y";
        ck_assert_int_eq(warnings_add_reply(&w, reply, reply + sizeof reply, 5), 0);
        ck_assert_uint_eq(w.total, 6);
        ck_assert_uint_eq(w.n_lines, 3);
        char **l = NULL;
        ck_assert_int_eq(warnings_finish(&w, &l), 0);
        ck_assert_uint_eq(strv_length(l), 3);
        ck_assert_str_eq(l[0], "mine: left out of the changeset: ours");
        ck_assert_str_eq(l[1], "a: left out of the changeset: x");
        ck_assert_str_eq(l[2], "and 4 more paths were left out of the changeset");
        strv_free(l);
        warnings_done(&w);
}
END_TEST

START_TEST(no_warnings_no_list) {
        warnings w = {};
        char **l = (char **) 1;
        ck_assert_int_eq(warnings_finish(&w, &l), 0);
        ck_assert_ptr_null(l);
        warnings_done(&w);
}
END_TEST

START_TEST(open_beneath_follows_no_symlink) {
        const char *tmp = getenv("TASKFERRY_TEST_TMPDIR");
        char *top = strdup_printf("%s/tf-changeset-paths-XXXXXX", tmp && *tmp ? tmp : "/var/tmp");
        ck_assert_ptr_nonnull(mkdtemp(top));
        char *d = strdup_printf("%s/d", top), *f = strdup_printf("%s/d/f", top), *l = strdup_printf("%s/l", top);
        ck_assert_int_eq(mkdir(d, 0700), 0);
        int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(symlink("d", l), 0);
        int tfd = open(top, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(tfd, 0);

        fd = cs_open_beneath(tfd, "d/f", O_RDONLY);
        ck_assert_int_ge(fd, 0);
        close(fd);
        fd = cs_open_beneath(tfd, "", O_RDONLY | O_DIRECTORY); /* the directory itself */
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_lt(cs_open_beneath(tfd, "l/f", O_RDONLY), 0); /* through a symlink */
        ck_assert_int_lt(cs_open_beneath(tfd, "l", O_RDONLY | O_DIRECTORY), 0);
        ck_assert_int_lt(cs_open_beneath(tfd, "../", O_RDONLY | O_DIRECTORY), 0); /* out of it */
        ck_assert_int_eq(cs_open_beneath(tfd, "d/missing", O_RDONLY), -ENOENT);
        /* O_PATH on the symlink itself opens the link, not its target */
        fd = cs_open_beneath(tfd, "l", O_PATH);
        ck_assert_int_ge(fd, 0);
        struct stat st;
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert(S_ISLNK(st.st_mode));
        close(fd);

        close(tfd);
        ck_assert_int_eq(rm_rf(top), 0);
        free(d), free(f), free(l), free(top);
}
END_TEST

TF_MAIN("changeset-paths", "paths", NULL, NULL, 0, quote_as_git_does, warnings_keep_a_bounded_list,
        warnings_from_a_child_reply, no_warnings_no_list, open_beneath_follows_no_symlink)
