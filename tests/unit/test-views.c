/* The views' file-system readers (outputs.h, views.h tail_text_of_log)
 * against real directories a hostile worker could have built. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json-util.h"
#include "api/outputs.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"
#include "api/views.h"

static char *tmp;

static void setup(void) { tmp = tf_tmpdir_new("test-views"); }

static void teardown(void) { tmp = tf_tmpdir_free(tmp); }

static const char *P(const char *rel) {
        static char buf[8][4096];
        static int i;
        i = (i + 1) % 8;
        snprintf(buf[i], sizeof buf[i], "%s/%s", tmp, rel);
        return buf[i];
}

static void put(const char *rel, const char *data, size_t len) { tf_write_file(P(rel), data, len, 0600); }

static char *paths_of(json_object *listing) {
        json_object *files = json_get_array(listing, "files");
        char *s = strdup("");
        for (size_t i = 0; files && i < json_object_array_length(files); i++) {
                json_object *f = json_object_array_get_idx(files, i);
                int64_t size = -1;
                json_get_int64(f, "size", &size);
                char *n = strdup_printf("%s%s=%lld|", s, json_get_string(f, "path"), (long long) size);
                free(s);
                s = n;
        }
        return s;
}

START_TEST(listing_skips_what_is_not_a_deliverable) {
        ck_assert_int_eq(mkdir(P("out"), 0700), 0);
        put("out/deliverable.txt", "hello", 5);
        ck_assert_int_eq(mkdir(P("out/subdir"), 0700), 0);
        put("out/subdir/more.txt", "ab", 2);
        ck_assert_int_eq(mkdir(P("out/node_modules"), 0700), 0);
        put("out/node_modules/x.js", "x", 1);
        ck_assert_int_eq(mkdir(P("out/.git"), 0700), 0);
        put("out/.git/HEAD", "x", 1);
        put("secret", "outside", 7);
        ck_assert_int_eq(symlink(P("secret"), P("out/link-out")), 0);
        ck_assert_int_eq(symlink("deliverable.txt", P("out/link-in")), 0);
        ck_assert_int_eq(symlink(".", P("out/self")), 0); /* a loop if entered */
        ck_assert_int_eq(symlink(tmp, P("out/dir-out")), 0);
        ck_assert_int_eq(symlink("nowhere", P("out/dangling")), 0);
        ck_assert_int_eq(mkfifo(P("out/fifo"), 0600), 0);
        json_object *l = NULL;
        ck_assert_int_eq(output_list(P("out"), &l), 0);
        char *s = paths_of(l);
        ck_assert_str_eq(s, "deliverable.txt=5|link-in=5|subdir/more.txt=2|");
        ck_assert(!json_get_bool(l, "truncated", true));
        int64_t bytes = 0, total = 0;
        json_get_int64(l, "bytes", &bytes);
        json_get_int64(l, "total", &total);
        ck_assert_int_eq(bytes, 12);
        ck_assert_int_eq(total, 3);
        free(s);
        json_object_put(l);
        /* a missing dir or a symlinked root: the empty listing */
        ck_assert_int_eq(symlink(P("out"), P("root-link")), 0);
        ck_assert_int_eq(output_list(P("root-link"), &l), 0);
        ck_assert_str_eq(json_to_line(l, NULL), "{\"files\":[],\"bytes\":0,\"total\":0,\"truncated\":false}");
        json_object_put(l);
        ck_assert_int_eq(output_list(P("missing"), &l), 0);
        ck_assert_str_eq(json_to_line(l, NULL), "{\"files\":[],\"bytes\":0,\"total\":0,\"truncated\":false}");
        json_object_put(l);
}
END_TEST

START_TEST(listing_caps) {
        ck_assert_int_eq(mkdir(P("out"), 0700), 0);
        for (int i = 0; i < 300; i++) {
                char name[64];
                snprintf(name, sizeof name, "out/f%03d", i);
                put(name, "", 0);
        }
        json_object *l = NULL;
        ck_assert_int_eq(output_list(P("out"), &l), 0);
        ck_assert_int_eq(json_object_array_length(json_get_array(l, "files")), OUTPUT_LIST_FILES_MAX);
        ck_assert(json_get_bool(l, "truncated", false));
        json_object_put(l);
        /* depth 33 */
        char rel[4096] = "deep";
        ck_assert_int_eq(mkdir(P(rel), 0700), 0);
        for (int i = 0; i < 34; i++) {
                strcat(rel, "/d");
                ck_assert_int_eq(mkdir(P(rel), 0700), 0);
        }
        ck_assert_int_eq(output_list(P("deep"), &l), 0);
        ck_assert(json_get_bool(l, "truncated", false));
        json_object_put(l);
        /* one file over 8 MiB truncates alone */
        ck_assert_int_eq(mkdir(P("big"), 0700), 0);
        int fd = open(P("big/huge"), O_WRONLY | O_CREAT, 0600);
        ck_assert_int_eq(ftruncate(fd, 9 << 20), 0);
        close(fd);
        ck_assert_int_eq(output_list(P("big"), &l), 0);
        ck_assert(json_get_bool(l, "truncated", false));
        ck_assert_int_eq(json_object_array_length(json_get_array(l, "files")), 0);
        json_object_put(l);
        /* entries that count to no listing cap are bounded too (OUTPUT_LIST_ENTRIES_MAX) */
        ck_assert_int_eq(mkdir(P("many"), 0700), 0);
        for (int i = 0; i < OUTPUT_LIST_ENTRIES_MAX + 10; i++) {
                char name[64];
                snprintf(name, sizeof name, "many/l%06d", i);
                ck_assert_int_eq(symlink("nowhere", P(name)), 0);
        }
        ck_assert_int_eq(output_list(P("many"), &l), 0);
        ck_assert(json_get_bool(l, "truncated", false));
        json_object_put(l);
}
END_TEST

static int read_rel(const char *rel, uint64_t max, json_object **f) { return output_read(P("out"), rel, max, f); }

START_TEST(read_refuses_every_way_out) {
        ck_assert_int_eq(mkdir(P("out"), 0700), 0);
        ck_assert_int_eq(mkdir(P("out/sub"), 0700), 0);
        put("out/sub/a.txt", "inside", 6);
        put("secret", "outside", 7);
        ck_assert_int_eq(symlink(P("secret"), P("out/abs-link")), 0);
        ck_assert_int_eq(symlink("../secret", P("out/rel-link")), 0);
        ck_assert_int_eq(symlink(tmp, P("out/parent-link")), 0);
        ck_assert_int_eq(symlink("sub/a.txt", P("out/in-link")), 0);
        ck_assert_int_eq(symlink("sub", P("out/sub-link")), 0);
        json_object *f = NULL;
        const char *const out[] = {"../secret", "/etc/passwd", P("out/sub/a.txt"), "sub/../../secret",
                                          "abs-link", "rel-link", "parent-link/secret", "..", "sub/../.."};
        for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
                ck_assert_msg(read_rel(out[i], 1024, &f) == OUTPUT_READ_ESCAPES, "%s not refused", out[i]);
                ck_assert_ptr_null(f);
        }
        /* inside stays inside, through links that stay inside too */
        static const char *const in[] = {"sub/a.txt", "./sub//a.txt", "sub/../sub/a.txt", "in-link", "sub-link/a.txt"};
        for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
                ck_assert_msg(read_rel(in[i], 1024, &f) == OUTPUT_READ_OK, "%s refused", in[i]);
                ck_assert_str_eq(json_to_line(f, NULL), "{\"content\":\"inside\",\"size\":6,\"truncated\":false}");
                json_object_put(f);
        }
        ck_assert_int_eq(read_rel("nope.txt", 1024, &f), OUTPUT_READ_NOT_FOUND);
        ck_assert_int_eq(read_rel("sub/a.txt/x", 1024, &f), OUTPUT_READ_NOT_FOUND);
        ck_assert_int_eq(output_read(P("missing"), "a", 1024, &f), OUTPUT_READ_NOT_FOUND);
        /* a very long path is refused or not found, never a crash */
        char *longp = malloc(70000);
        memset(longp, 'a', 69999);
        longp[69999] = 0;
        int k = read_rel(longp, 1024, &f);
        ck_assert_msg(k == OUTPUT_READ_NOT_FOUND || k == -ENAMETOOLONG, "long path: %d", k);
        free(longp);
}
END_TEST

START_TEST(read_non_files_and_sizes) {
        ck_assert_int_eq(mkdir(P("out"), 0700), 0);
        ck_assert_int_eq(mkfifo(P("out/fifo"), 0600), 0);
        json_object *f = NULL;
        alarm(10); /* a FIFO must not block */
        ck_assert_int_eq(read_rel("fifo", 1024, &f), OUTPUT_READ_OK);
        alarm(0);
        ck_assert_str_eq(json_get_string(f, "error"), "not_a_file");
        json_object_put(f);
        ck_assert_int_eq(read_rel(".", 1024, &f), OUTPUT_READ_OK);
        ck_assert_str_eq(json_get_string(f, "error"), "not_a_file");
        json_object_put(f);
        put("out/ten", "0123456789", 10);
        ck_assert_int_eq(read_rel("ten", 9, &f), OUTPUT_READ_OK);
        ck_assert_str_eq(json_to_line(f, NULL), "{\"content\":null,\"size\":10,\"truncated\":true,\"error\":\"too_large\"}");
        json_object_put(f);
        ck_assert_int_eq(read_rel("ten", 10, &f), OUTPUT_READ_OK);
        ck_assert_str_eq(json_get_string(f, "content"), "0123456789");
        json_object_put(f);
        /* NUL and invalid UTF-8 survive as JSON text */
        put("out/bin", "a\0b\xff", 4);
        ck_assert_int_eq(read_rel("bin", 10, &f), OUTPUT_READ_OK);
        ck_assert_str_eq(json_to_line(f, NULL), "{\"content\":\"a\\u0000b\xef\xbf\xbd\",\"size\":4,\"truncated\":false}");
        json_object_put(f);
}
END_TEST

static void log_put(const char *text) { put("log", text, strlen(text)); }

START_TEST(tail_takes_the_last_text_event) {
        char *t = NULL;
        ck_assert_int_eq(tail_text_of_log(P("none"), true, &t), 0);
        log_put("{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"first\",\"messageID\":\"m\"}}\n"
                "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"h\\u00e9llo \\ud83d\\ude00\",\"messageID\":\"m\"}}\n"
                "{\"type\":\"step_finish\",\"part\":{\"type\":\"step-finish\",\"reason\":\"stop\"}}\n"
                "stderr noise\n");
        ck_assert_int_eq(tail_text_of_log(P("log"), false, &t), 1);
        ck_assert_str_eq(t, "h\xc3\xa9llo \xf0\x9f\x98\x80");
        free(t);
        /* no text event: nothing, unless crashed with no JSON line at all */
        log_put("{\"type\":\"step_start\"}\nboom\n");
        ck_assert_int_eq(tail_text_of_log(P("log"), true, &t), 0);
        log_put("line one\n\n   \nerror: it broke\n");
        ck_assert_int_eq(tail_text_of_log(P("log"), false, &t), 0);
        ck_assert_int_eq(tail_text_of_log(P("log"), true, &t), 1);
        ck_assert_str_eq(t, "line one\nerror: it broke");
        free(t);
}
END_TEST

START_TEST(tail_reads_only_the_last_mib) {
        /* a text event 2 MiB back is not found; one in the last MiB is */
        size_t n = 3u << 20;
        char *big = malloc(n + 200);
        const char *ev = "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"old\",\"messageID\":\"m\"}}\n";
        strcpy(big, ev);
        size_t o = strlen(ev);
        for (; o < n; o++) big[o] = (o % 100) ? 'x' : '\n';
        big[o++] = '\n';
        put("log", big, o);
        char *t = NULL;
        ck_assert_int_eq(tail_text_of_log(P("log"), false, &t), 0);
        free(big);
}
END_TEST

TF_MAIN("views", "core", setup, teardown, 120, listing_skips_what_is_not_a_deliverable, listing_caps,
        read_refuses_every_way_out, read_non_files_and_sizes, tail_takes_the_last_text_event,
        tail_reads_only_the_last_mib)
