/* outputs.c: a task's output dir as its hostile worker left it. The listing
 * (sorted, skipping node_modules/.git, FIFOs and links that leave the dir,
 * capped) and one file's read: a path that leaves the dir by `..`, an
 * absolute path or a symlink is refused as escaping; a missing one is not
 * found; a FIFO, socket or directory is not_a_file; a file over the limit is
 * too_large; invalid UTF-8 comes back as U+FFFD. */

#include <check.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "api/outputs.h"
#include "daemon-fixture.h"
#include "json-util.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"

static char *top, *out;

static void setup(void) {
        top = tf_tmpdir_new("test-outputs");
        out = tf_path(top, "out");
        tf_mkdirs(top, "out");
}
static void teardown(void) {
        free(out);
        top = tf_tmpdir_free(top);
}

static char *listing_paths(json_object *l) {
        json_object *files = json_get_array(l, "files");
        char *s = strdup("");
        for (size_t i = 0; files && i < json_object_array_length(files); i++) {
                json_object *f = json_object_array_get_idx(files, i);
                char *n = strdup_printf("%s%s%s=%lld", s, *s ? "," : "", json_get_string(f, "path"),
                                        (long long) json_object_get_int64(json_get(f, "size")));
                free(s);
                s = n;
        }
        return s;
}

START_TEST(listing_skips_what_it_must) {
        free(tf_put(out, "b.txt", "bb", 2));
        free(tf_put(out, "a/z.txt", "z", 1));
        free(tf_put(out, "a/B.txt", "BBB", 3));
        free(tf_put(out, "node_modules/x.js", "x", 1));
        free(tf_put(out, ".git/HEAD", "ref", 3));
        free(tf_put(top, "secret", "password", 8));
        char *p = tf_path(out, "fifo");
        ck_assert_int_eq(mkfifo(p, 0600), 0);
        free(p);
        tf_symlink(top, "secret", "out/leak");          /* out of the dir: skipped */
        p = tf_path(out, "inside"); /* a relative link that stays inside: listed with the target's size */
        ck_assert_int_eq(symlink("a/../b.txt", p), 0);
        free(p);
        tf_symlink(top, "out/b.txt", "out/abs-inside"); /* absolute: refused like any absolute link */
        tf_symlink(top, "nothing", "out/dangling");
        tf_symlink(top, "out/a", "out/dirlink");        /* never entered */
        json_object *l = NULL;
        ck_assert_int_eq(output_list(out, &l), 0);
        char *got = listing_paths(l);
        ck_assert_str_eq(got, "a/B.txt=3,a/z.txt=1,b.txt=2,inside=2");
        ck_assert_int_eq(json_object_get_int64(json_get(l, "bytes")), 8);
        ck_assert_int_eq(json_object_get_int64(json_get(l, "total")), 4);
        ck_assert(!json_get_bool(l, "truncated", true));
        free(got);
        json_object_put(l);
}
END_TEST

START_TEST(listing_of_nothing_is_empty) {
        const char *dirs[] = {NULL, "/nonexistent/out", "FILE", "LINK"};
        char *file = tf_put(top, "file", "x", 1);
        tf_symlink(top, "out", "link");
        free(tf_put(out, "x", "x", 1));
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                char *d = !dirs[i] ? NULL : streq(dirs[i], "FILE") ? strdup(file)
                                         : streq(dirs[i], "LINK") ? tf_path(top, "link")
                                                                   : strdup(dirs[i]);
                json_object *l = NULL;
                ck_assert_int_eq(output_list(d, &l), 0);
                ck_assert_uint_eq(json_object_array_length(json_get_array(l, "files")), 0);
                ck_assert_int_eq(json_object_get_int64(json_get(l, "total")), 0);
                json_object_put(l);
                free(d);
        }
        free(file);
}
END_TEST

START_TEST(listing_caps) {
        char rel[32];
        for (int i = 0; i < OUTPUT_LIST_FILES_MAX + 10; i++) {
                snprintf(rel, sizeof rel, "f%04d", i);
                free(tf_put(out, rel, "x", 1));
        }
        json_object *l = NULL;
        ck_assert_int_eq(output_list(out, &l), 0);
        ck_assert_uint_eq(json_object_array_length(json_get_array(l, "files")), OUTPUT_LIST_FILES_MAX);
        ck_assert(json_get_bool(l, "truncated", false));
        json_object_put(l);
}
END_TEST

START_TEST(listing_depth_cap) {
        char rel[4 * (OUTPUT_LIST_DEPTH_MAX + 4) + 8] = "";
        for (int i = 0; i < OUTPUT_LIST_DEPTH_MAX + 3; i++) strcat(rel, "d/");
        strcat(rel, "deep");
        free(tf_put(out, rel, "x", 1));
        free(tf_put(out, "top", "x", 1));
        json_object *l = NULL;
        ck_assert_int_eq(output_list(out, &l), 0);
        char *got = listing_paths(l);
        ck_assert_str_eq(got, "top=1");
        ck_assert(json_get_bool(l, "truncated", false));
        free(got);
        json_object_put(l);
}
END_TEST

static const struct {
        const char *rel;
        int want;
} escapes[] = {
        {"../secret", OUTPUT_READ_ESCAPES},
        {"a/../../secret", OUTPUT_READ_ESCAPES},
        {"..", OUTPUT_READ_ESCAPES},
        {"/etc/passwd", OUTPUT_READ_ESCAPES},
        {"leak", OUTPUT_READ_ESCAPES},          /* an absolute symlink out */
        {"rel-leak", OUTPUT_READ_ESCAPES},      /* a relative one out */
        {"outdir/secret", OUTPUT_READ_ESCAPES}, /* a symlinked parent out */
        {"proc/self/root/etc/passwd", OUTPUT_READ_ESCAPES},
        {"missing", OUTPUT_READ_NOT_FOUND},
        {"a.txt/x", OUTPUT_READ_NOT_FOUND},
        {"a/../a.txt", OUTPUT_READ_OK},
        {"./a.txt", OUTPUT_READ_OK},
        {"sub//../a.txt", OUTPUT_READ_OK},
        {"inside", OUTPUT_READ_OK},
        {"abs-inside", OUTPUT_READ_ESCAPES},
};

START_TEST(reads_that_leave_the_dir_are_refused) {
        free(tf_put(top, "secret", "password", 8));
        free(tf_put(out, "a.txt", "hello", 5));
        tf_mkdirs(out, "sub");
        tf_symlink(top, "secret", "out/leak");
        char *p = tf_path(out, "rel-leak");
        ck_assert_int_eq(symlink("../secret", p), 0);
        free(p);
        tf_symlink(top, "", "out/outdir");
        p = tf_path(out, "proc");
        ck_assert_int_eq(symlink("/proc", p), 0);
        free(p);
        p = tf_path(out, "inside");
        ck_assert_int_eq(symlink("sub/../a.txt", p), 0);
        free(p);
        tf_symlink(top, "out/a.txt", "out/abs-inside");
        json_object *f = NULL;
        int r = output_read(out, escapes[_i].rel, OUTPUT_FILE_MAX_DEFAULT, &f);
        ck_assert_msg(r == escapes[_i].want, "%s: %d, wanted %d", escapes[_i].rel, r, escapes[_i].want);
        if (r == OUTPUT_READ_OK) {
                ck_assert_str_eq(json_get_string(f, "content"), "hello");
                ck_assert_int_eq(json_object_get_int64(json_get(f, "size")), 5);
                ck_assert(!json_get_bool(f, "truncated", true));
        } else
                ck_assert_ptr_null(f);
        json_object_put(f);
}
END_TEST

START_TEST(what_is_not_a_file) {
        char *p = tf_path(out, "fifo");
        ck_assert_int_eq(mkfifo(p, 0600), 0);
        free(p);
        tf_mkdirs(out, "dir");
        /* a listening socket */
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        p = tf_path(out, "sock");
        ck_assert_uint_lt(strlen(p), sizeof sa.sun_path);
        strcpy(sa.sun_path, p);
        ck_assert_int_eq(bind(s, (struct sockaddr *) &sa, sizeof sa), 0);
        free(p);
        const char *rels[] = {"fifo", "dir", "sock", "", "."};
        for (size_t i = 0; i < ELEMENTSOF(rels); i++) {
                json_object *f = NULL;
                ck_assert_int_eq(output_read(out, rels[i], 100, &f), OUTPUT_READ_OK); /* and no hang on the FIFO */
                ck_assert_msg(streq_ptr(json_get_string(f, "error"), "not_a_file"), "%s: %s", rels[i],
                              json_object_to_json_string(f));
                ck_assert(json_object_is_type(json_get(f, "content"), json_type_null));
                json_object_put(f);
        }
        close(s);
}
END_TEST

START_TEST(too_large_and_bad_utf8) {
        free(tf_put(out, "ten", "0123456789", 10));
        json_object *f = NULL;
        ck_assert_int_eq(output_read(out, "ten", 10, &f), OUTPUT_READ_OK);
        ck_assert_str_eq(json_get_string(f, "content"), "0123456789");
        json_object_put(f);
        ck_assert_int_eq(output_read(out, "ten", 9, &f), OUTPUT_READ_OK);
        ck_assert(json_object_is_type(json_get(f, "content"), json_type_null));
        ck_assert_str_eq(json_get_string(f, "error"), "too_large");
        ck_assert(json_get_bool(f, "truncated", false));
        ck_assert_int_eq(json_object_get_int64(json_get(f, "size")), 10);
        json_object_put(f);
        free(tf_put(out, "bad", "a\xff\xfe" "b\xc3", 5));
        ck_assert_int_eq(output_read(out, "bad", 100, &f), OUTPUT_READ_OK);
        ck_assert_str_eq(json_get_string(f, "content"), "a\xef\xbf\xbd\xef\xbf\xbd" "b\xef\xbf\xbd");
        ck_assert_int_eq(json_object_get_int64(json_get(f, "size")), 5);
        json_object_put(f);
        /* a missing dir */
        ck_assert_int_eq(output_read("/nonexistent/out", "ten", 100, &f), OUTPUT_READ_NOT_FOUND);
        ck_assert_ptr_null(f);
}
END_TEST

int main(void) {
        Suite *s = suite_create("outputs");
        TCase *tc = tf_tcase(s, "outputs", setup, teardown, 60,
                             TF_TESTS(listing_skips_what_it_must, listing_of_nothing_is_empty, listing_caps,
                                      listing_depth_cap, what_is_not_a_file, too_large_and_bad_utf8));
        TF_LOOP(tc, reads_that_leave_the_dir_are_refused, escapes);
        return tf_run_suite(s);
}
