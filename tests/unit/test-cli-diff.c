/* `taskferry diff`'s patch filter (src/cli/cli-diff.h): byte-exact plain
 * output in any chunking, path limits by file headers (renames, quoted
 * names, directories), git's default colours, and a hostile patch whose
 * names and contents carry terminal escapes. The samples are what
 * `git diff-tree -p --binary -M` writes (the daemon's extraction). */
#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli-diff.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"

static const char PATCH[] =
        "diff --git a/src/main.c b/src/main.c\n"
        "index 1111111111111111111111111111111111111111..2222222222222222222222222222222222222222 100644\n"
        "--- a/src/main.c\n"
        "+++ b/src/main.c\n"
        "@@ -1,2 +1,2 @@ int main(void)\n"
        " keep\n"
        "-old line\n"
        "+new line \xff\xfe latin\n"
        "diff --git a/docs/old name.md b/docs/new name.md\n"
        "similarity index 100%\n"
        "rename from docs/old name.md\n"
        "rename to docs/new name.md\n"
        "diff --git a/blob.bin b/blob.bin\n"
        "new file mode 100644\n"
        "index 0000000000000000000000000000000000000000..3333333333333333333333333333333333333333\n"
        "GIT binary patch\n"
        "literal 5\n"
        "Mc${NkVPs+e00H0u2><{9\n"
        "\n"
        "literal 0\n"
        "HcmV?d00001\n"
        "\n"
        "diff --git a/srcx/other.c b/srcx/other.c\n"
        "deleted file mode 100644\n"
        "index 4444444444444444444444444444444444444444..0000000000000000000000000000000000000000\n"
        "--- a/srcx/other.c\n"
        "+++ /dev/null\n"
        "@@ -1 +0,0 @@\n"
        "-gone\n"
        "\\ No newline at end of file";

typedef struct out {
        char *buf;
        size_t len;
        int r;
} out;

/* Run the filter over data in chunks of `chunk` bytes (0: all at once). */
static out run(const char *data, size_t len, char *const *paths, bool color, size_t chunk) {
        out o = {};
        FILE *f = open_memstream(&o.buf, &o.len);
        ck_assert_ptr_nonnull(f);
        cli_diff_filter *flt = NULL;
        ck_assert_int_eq(cli_diff_filter_new(paths, color, f, &flt), 0);
        int r = 0;
        if (chunk == 0) chunk = len ? len : 1;
        for (size_t i = 0; r >= 0 && i < len; i += chunk)
                r = cli_diff_filter_feed(flt, data + i, len - i < chunk ? len - i : chunk);
        o.r = r < 0 ? r : cli_diff_filter_finish(flt);
        cli_diff_filter_free(flt);
        fclose(f);
        return o;
}

static size_t sections_in(const char *s, size_t len) {
        size_t n = 0;
        for (size_t i = 0; i + 11 <= len; i++)
                if ((i == 0 || s[i - 1] == '\n') && memcmp(s + i, "diff --git ", 11) == 0) n++;
        return n;
}

START_TEST(test_plain_is_byte_exact_in_any_chunking) {
        static const size_t chunks[] = {0, 1, 2, 3, 7, 15, 16, 17, 64};
        for (size_t k = 0; k < ELEMENTSOF(chunks); k++) {
                out o = run(PATCH, sizeof PATCH - 1, NULL, false, chunks[k]);
                ck_assert_int_eq(o.r, 4);
                ck_assert_uint_eq(o.len, sizeof PATCH - 1);
                ck_assert_msg(memcmp(o.buf, PATCH, o.len) == 0, "chunk %zu changed the patch", chunks[k]);
                free(o.buf);
        }
        /* text before the first file header is kept without a path limit */
        const char *pro = "prologue\nline\ndiff --git a/x b/x\n@@ -1 +1 @@\n-a\n+b\n";
        out o = run(pro, strlen(pro), NULL, false, 5);
        ck_assert_str_eq(o.buf, pro);
        ck_assert_int_eq(o.r, 1);
        free(o.buf);
}
END_TEST

/* the section of `name` cut out of PATCH: from its "diff --git" line to the next */
static char *section_of(const char *first_line) {
        const char *s = strstr(PATCH, first_line);
        ck_assert_ptr_nonnull(s);
        const char *e = strstr(s + 1, "\ndiff --git ");
        return e ? strndup(s, (size_t) (e - s) + 1) : strdup(s);
}

START_TEST(test_path_limits) {
        char *main_c = section_of("diff --git a/src/main.c");
        char *rename = section_of("diff --git a/docs/old name.md");
        char *blob = section_of("diff --git a/blob.bin");
        char *other = section_of("diff --git a/srcx/other.c");

        struct {
                const char *paths[4];
                char *expect[4];
        } cases[] = {
                {{"src/main.c"}, {main_c}},
                {{"src"}, {main_c}},                 /* a directory, not "srcx" */
                {{"./src/"}, {main_c}},
                {{"docs/old name.md"}, {rename}},    /* a rename by its old name */
                {{"docs/new name.md"}, {rename}},    /* and by its new one */
                {{"docs"}, {rename}},
                {{"blob.bin", "srcx/other.c"}, {blob, other}},
                {{"srcx/other.c/x"}, {NULL}},
                {{"nowhere"}, {NULL}},
        };
        for (size_t k = 0; k < ELEMENTSOF(cases); k++) {
                _cleanup_free_ char *want = strdup("");
                size_t n = 0;
                for (size_t j = 0; cases[k].expect[j]; j++, n++) {
                        char *t = strdup_printf("%s%s", want, cases[k].expect[j]);
                        free(want);
                        want = t;
                }
                for (size_t chunk = 0; chunk < 20; chunk += 9) {
                        out o = run(PATCH, sizeof PATCH - 1, (char **) cases[k].paths, false, chunk);
                        ck_assert_int_eq(o.r, (int) n);
                        ck_assert_msg(o.len == strlen(want) && memcmp(o.buf, want, o.len) == 0,
                                      "case %zu (%s): got [%.*s]", k, cases[k].paths[0], (int) o.len, o.buf);
                        ck_assert_uint_eq(sections_in(o.buf, o.len), n);
                        free(o.buf);
                }
        }
        /* "." and "" keep everything */
        char *all[] = {(char *) ".", NULL};
        out o = run(PATCH, sizeof PATCH - 1, all, false, 0);
        ck_assert_uint_eq(o.len, sizeof PATCH - 1);
        free(o.buf);
        /* a limit drops the text before the first header */
        const char *pro = "prologue\ndiff --git a/x b/x\n@@ -1 +1 @@\n-a\n+b\n";
        char *x[] = {(char *) "x", NULL};
        o = run(pro, strlen(pro), x, false, 0);
        ck_assert_str_eq(o.buf, pro + strlen("prologue\n"));
        free(o.buf);
        free(main_c);
        free(rename);
        free(blob);
        free(other);
}
END_TEST

/* cli_diff_header_names of header are exactly the names that follow
 * (NULL-terminated); a mismatch names the header. */
static void header_names_are(const char *header, ...) __attribute__((sentinel));
static void header_names_are(const char *header, ...) {
        _cleanup_strv_free_ char **names = cli_diff_header_names(header, strlen(header));
        size_t n = strv_length(names), i = 0;
        va_list ap;
        va_start(ap, header);
        for (const char *want; (want = va_arg(ap, const char *)); i++) {
                ck_assert_msg(i < n, "%s: %zu names, want more (%s)", header, n, want);
                ck_assert_msg(streq(names[i], want), "%s: name %zu is [%s], want [%s]", header, i, names[i], want);
        }
        va_end(ap);
        ck_assert_msg(n == i, "%s: %zu names, want %zu", header, n, i);
}

START_TEST(test_header_names) {
        header_names_are("diff --git \"a/tab\\there\" \"b/tab\\there\"\n"
                         "new file mode 100644\n"
                         "--- /dev/null\n"
                         "+++ \"b/tab\\there\"\n",
                         "tab\there", NULL);
        header_names_are("diff --git \"a/\\033[31mred\\303\\251\" \"b/\\033[31mred\\303\\251\"\n",
                         "\033[31mred\xc3\xa9", NULL);
        /* renames: both sides, from the rename lines; a name with " b/" in it */
        header_names_are("diff --git a/x b/y b/z b/w\nsimilarity index 90%\nrename from x b/y\nrename to z b/w\n",
                         "x b/y", "z b/w", NULL);
        /* the same name on both sides splits in the middle, spaces and all */
        header_names_are("diff --git a/a b c b/a b c\nold mode 100644\nnew mode 100755\n", "a b c", NULL);
        /* malformed quoting names nothing */
        header_names_are("diff --git \"a/unterminated\n--- \"a/x\\q\"\n", NULL);
        /* ... and a malformed second name of the "diff --git" line leaves the
         * other names (it made the list fail as if out of memory, so a
         * path-limited diff dropped the section: the fuzz target's finding) */
        header_names_are("diff --git \"a/x\" \"b/x\\q\"\n--- \"a/x\"\n+++ \"b/y\"\n", "x", "y", NULL);
        {
                char *const only_y[] = {(char *) "y", NULL};
                static const char patch[] = "diff --git \"a/x\" \"b/x\\q\"\n--- \"a/x\"\n+++ \"b/y\"\n@@ -1 +1 @@\n-a\n+b\n";
                out o = run(patch, strlen(patch), only_y, false, 0);
                ck_assert_int_eq(o.r, 1);
                ck_assert_str_eq(o.buf, patch);
                free(o.buf);
        }

        /* a path and a filter: whether the filter takes it */
        static const struct {
                const char *path, *filter;
                bool matches;
        } filters[] = {
                {"src/a.c", "src", true},      {"src/a.c", "src//", true}, {"src/a.c", "././src/a.c", true},
                {"srcx/a.c", "src", false},    {"src", "src/a.c", false},  {"anything", ".", true},
                {"anything", "", true},
        };
        for (size_t i = 0; i < ELEMENTSOF(filters); i++)
                ck_assert_msg(cli_diff_path_matches(filters[i].path, filters[i].filter) == filters[i].matches,
                              "%s ~ %s: want %d", filters[i].path, filters[i].filter, filters[i].matches);
}
END_TEST

START_TEST(test_colors_as_git) {
        const char *p = "diff --git a/f b/f\n"
                        "index 1..2 100644\n"
                        "--- a/f\n"
                        "+++ b/f\n"
                        "@@ -1,2 +1,2 @@ fn()\n"
                        " ctx\n"
                        "-old\n"
                        "+new\tTAB\n"
                        "\\ No newline at end of file\n";
        const char *want = "\033[1mdiff --git a/f b/f\033[m\n"
                           "\033[1mindex 1..2 100644\033[m\n"
                           "\033[1m--- a/f\033[m\n"
                           "\033[1m+++ b/f\033[m\n"
                           "\033[36m@@ -1,2 +1,2 @@\033[m fn()\n"
                           " ctx\n"
                           "\033[31m-old\033[m\n"
                           "\033[32m+new\tTAB\033[m\n"
                           "\\ No newline at end of file\n";
        for (size_t chunk = 0; chunk < 8; chunk++) {
                out o = run(p, strlen(p), NULL, true, chunk);
                ck_assert_int_eq(o.r, 1);
                ck_assert_str_eq(o.buf, want);
                free(o.buf);
        }
        /* no trailing newline: the colour is still closed */
        const char *nonl = "diff --git a/f b/f\n@@ -1 +1 @@\n+x";
        out o = run(nonl, strlen(nonl), NULL, true, 0);
        ck_assert_str_eq(o.buf, "\033[1mdiff --git a/f b/f\033[m\n\033[36m@@ -1 +1 @@\033[m\n\033[32m+x\033[m");
        free(o.buf);
}
END_TEST

/* Every ESC of the output must open one of the filter's own SGR sequences. */
static void assert_only_own_escapes(const char *s, size_t len) {
        static const char *const own[] = {CLI_DIFF_COLOR_META, CLI_DIFF_COLOR_FRAG, CLI_DIFF_COLOR_OLD,
                                          CLI_DIFF_COLOR_NEW, CLI_DIFF_COLOR_RESET};
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) s[i];
                if (c == '\033') {
                        bool ok = false;
                        for (size_t k = 0; k < ELEMENTSOF(own); k++)
                                if (len - i >= strlen(own[k]) && memcmp(s + i, own[k], strlen(own[k])) == 0) {
                                        i += strlen(own[k]) - 1;
                                        ok = true;
                                        break;
                                }
                        ck_assert_msg(ok, "raw ESC at %zu: [%.*s]", i, (int) (len - i > 20 ? 20 : len - i), s + i);
                        continue;
                }
                ck_assert_msg(c >= 0x20 || c == '\n' || c == '\t', "control byte 0x%02x at %zu", c, i);
                ck_assert_msg(c != 0x7F, "DEL at %zu", i);
                /* C1 controls in UTF-8 */
                ck_assert_msg(!(c == 0xC2 && i + 1 < len && (unsigned char) s[i + 1] >= 0x80 &&
                                (unsigned char) s[i + 1] <= 0x9F),
                              "C1 control at %zu", i);
        }
}

START_TEST(test_hostile_escapes) {
        /* a name git left raw (core.quotePath off keeps U+009B CSI), contents with
         * ESC sequences, CR, BS, BEL, DEL, a C1 CSI, stray high bytes and an OSC */
        const char p[] = "diff --git a/x\xc2\x9b" "2J b/x\xc2\x9b" "2J\n"
                         "--- a/x\xc2\x9b" "2J\n"
                         "+++ b/x\xc2\x9b" "2J\n"
                         "@@ -1 +1 @@ \033]0;title\007\n"
                         "-\033[2J\033[H cleared\r overwritten\b\n"
                         "+\x9b" "31m \x7f \xc2\xa9 \xc3\xa9 \xe2\x82\xac \xc2\n"
                         "+\033]8;;http://evil\033\\link\033]8;;\033\\\n";
        for (size_t chunk = 0; chunk < 6; chunk++) {
                out o = run(p, sizeof p - 1, NULL, true, chunk);
                ck_assert_int_eq(o.r, 1);
                assert_only_own_escapes(o.buf, o.len);
                ck_assert_msg(strstr(o.buf, "^[[2J^[[H cleared^M overwritten^H"), "%s", o.buf);
                ck_assert(strstr(o.buf, "x<U+009B>2J"));
                ck_assert(strstr(o.buf, "^[]0;title^G"));
                /* valid UTF-8 passes; a stray C1 byte and a cut lead byte are shown */
                ck_assert(strstr(o.buf, "<9B>31m ^? \xc2\xa9 \xc3\xa9 \xe2\x82\xac <C2>\033[m\n"));
                free(o.buf);
        }
        /* bytes that are not UTF-8: Latin-1, overlong forms (of CSI too),
         * surrogates, a sequence cut by the end of the line */
        const char q[] = "diff --git a/f b/f\n@@ -1 +1 @@\n"
                         "+caf\xe9 x \xc0\x9b \xe0\x82\x9b \xed\xa0\x80 \xf4\x90\x80\x80 \xf0\x9f\x98\x80 \xe2\x82\n";
        for (size_t chunk = 0; chunk < 4; chunk++) {
                out o = run(q, sizeof q - 1, NULL, true, chunk);
                ck_assert_msg(strstr(o.buf, "\033[32m+caf<E9> x <C0><9B> <E0><82><9B> <ED><A0><80> <F4><90><80><80> "
                                            "\xf0\x9f\x98\x80 <E2><82>\033[m\n"), "%s", o.buf);
                free(o.buf);
        }
        /* plain (a pipe) stays byte-exact even so */
        out o = run(p, sizeof p - 1, NULL, false, 3);
        ck_assert_uint_eq(o.len, sizeof p - 1);
        ck_assert(memcmp(o.buf, p, o.len) == 0);
        free(o.buf);
}
END_TEST

START_TEST(test_header_bound) {
        /* a file header that never ends is refused, not held without bound */
        size_t n = CLI_DIFF_HEADER_MAX + 100;
        char *p = malloc(n);
        ck_assert_ptr_nonnull(p);
        memcpy(p, "diff --git a/x b/x\n", 19);
        for (size_t i = 19; i < n; i++) p[i] = (i % 80 == 79) ? '\n' : 'y';
        out o = run(p, n, NULL, false, 4096);
        ck_assert_int_eq(o.r, -E2BIG);
        free(o.buf);
        /* while a huge hunk body streams */
        size_t m = 8u << 20;
        char *q = malloc(m);
        ck_assert_ptr_nonnull(q);
        const char *h = "diff --git a/x b/x\n@@ -1 +1,9999 @@\n";
        memcpy(q, h, strlen(h));
        for (size_t i = strlen(h); i < m; i++) q[i] = (i % 100 == 0) ? '+' : (i % 100 == 99) ? '\n' : 'z';
        q[strlen(h)] = '+';
        o = run(q, m, NULL, false, 65536);
        ck_assert_int_eq(o.r, 1);
        ck_assert_uint_eq(o.len, m);
        free(o.buf);
        free(p);
        free(q);
}
END_TEST

/* Escape mode without colour (a terminal with NO_COLOR or TERM=dumb). */
START_TEST(test_escape_without_colour) {
        static const char evil[] =
                "diff --git a/e.txt b/e.txt\n"
                "new file mode 100644\n"
                "--- /dev/null\n"
                "+++ b/e.txt\n"
                "@@ -0,0 +1,2 @@\n"
                "+a\033]0;x\007\033[2J\033[1Ab\tc\r\n"
                "+\xc2\x9b\xe9\x7f\xc3\xa9\n";
        static const char want[] =
                "diff --git a/e.txt b/e.txt\n"
                "new file mode 100644\n"
                "--- /dev/null\n"
                "+++ b/e.txt\n"
                "@@ -0,0 +1,2 @@\n"
                "+a^[]0;x^G^[[2J^[[1Ab\tc^M\n"
                "+<U+009B><E9>^?\xc3\xa9\n";
        static const size_t chunks[] = {0, 1, 2, 5, 16};
        for (size_t k = 0; k < ELEMENTSOF(chunks); k++) {
                char *buf = NULL;
                size_t len = 0;
                FILE *f = open_memstream(&buf, &len);
                cli_diff_filter *flt = NULL;
                ck_assert_int_eq(cli_diff_filter_new(NULL, false, f, &flt), 0);
                cli_diff_filter_set_escape(flt, true);
                int r = 0;
                size_t c = chunks[k] ? chunks[k] : sizeof evil - 1;
                for (size_t i = 0; r >= 0 && i < sizeof evil - 1; i += c)
                        r = cli_diff_filter_feed(flt, evil + i, (c < sizeof evil - 1 - i ? c : sizeof evil - 1 - i));
                ck_assert_int_eq(cli_diff_filter_finish(flt), 1);
                cli_diff_filter_free(flt);
                fclose(f);
                ck_assert_msg(len == sizeof want - 1 && memcmp(buf, want, len) == 0, "chunk %zu: %s", chunks[k], buf);
                free(buf);
        }
        /* set_escape(false) never turns colour mode's escaping off */
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        cli_diff_filter *flt = NULL;
        ck_assert_int_eq(cli_diff_filter_new(NULL, true, f, &flt), 0);
        cli_diff_filter_set_escape(flt, false);
        ck_assert_int_eq(cli_diff_filter_feed(flt, evil, sizeof evil - 1), 0);
        ck_assert_int_eq(cli_diff_filter_finish(flt), 1);
        cli_diff_filter_free(flt);
        fclose(f);
        ck_assert_ptr_nonnull(strstr(buf, "^[]0;x^G"));
        ck_assert_ptr_null(strstr(buf, "\033]"));
        free(buf);
}
END_TEST

START_TEST(test_escape_controls) {
        char *e = cli_escape_controls("a\033[2Jb\tc\nd\x07\x7f", 12);
        ck_assert_str_eq(e, "a^[[2Jb\tc\nd^G^?");
        free(e);
        static const char nul[] = "x\0y";
        e = cli_escape_controls(nul, 3);
        ck_assert_str_eq(e, "x^@y");
        free(e);
        /* C1 as UTF-8, raw C1 bytes, a truncated sequence, an overlong one; good UTF-8 kept */
        e = cli_escape_controls("\xc2\x85\x9b\xe2\x82\xc0\xafok\xe2\x82\xac", 12);
        ck_assert_str_eq(e, "<U+0085><9B><E2><82><C0><AF>ok\xe2\x82\xac");
        free(e);
        e = cli_escape_controls("", 0);
        ck_assert_str_eq(e, "");
        free(e);
        /* the worst growth: four bytes out per byte in */
        e = cli_escape_controls("\xff\xff\xff", 3);
        ck_assert_str_eq(e, "<FF><FF><FF>");
        free(e);
}
END_TEST

START_TEST(test_stat_marks) {
        char *paths[] = {(char *) ".claude/settings.json", (char *) ".claude/settings.json", (char *) "run.sh",
                         (char *) "\"q\\tx/.envrc\"", (char *) "very/long/path/to/some/deep/dir/.gitattributes",
                         (char *) "run.sh", NULL};
        char *classes[] = {(char *) "agent-config", (char *) "project", (char *) "executable", (char *) "envrc",
                           (char *) "git-attributes", (char *) "executable", NULL};
        static const char l1[] = " .claude/settings.json |    1 +\n";
        char *m = cli_diff_stat_marks(l1, sizeof l1 - 1, paths, classes);
        ck_assert_str_eq(m, "[agent-config, project]");
        free(m);
        m = cli_diff_stat_marks(" run.sh                |  Bin\n", 31, paths, classes);
        ck_assert_str_eq(m, "[executable]"); /* each class once */
        free(m);
        static const char q[] = " \"q\\tx/.envrc\" | 1 +";
        m = cli_diff_stat_marks(q, sizeof q - 1, paths, classes);
        ck_assert_str_eq(m, "[envrc]");
        free(m);
        static const char cut[] = " .../deep/dir/.gitattributes | 1 +\n";
        m = cli_diff_stat_marks(cut, sizeof cut - 1, paths, classes);
        ck_assert_str_eq(m, "[git-attributes]");
        free(m);
        /* lookalikes, the summary line, lines git did not write */
        static const char *const none[] = {" docs/.claude/settings.json | 1 +\n", " settings.json | 1 +\n",
                                           " xrun.sh | 1 +\n", " 3 files changed, 3 insertions(+)\n",
                                           "run.sh | 1 +\n", ""};
        for (size_t i = 0; i < ELEMENTSOF(none); i++) {
                m = cli_diff_stat_marks(none[i], strlen(none[i]), paths, classes);
                if (m) ck_abort_msg("%s: marked %s", none[i], m);
        }
        ck_assert_ptr_null(cli_diff_stat_marks(l1, sizeof l1 - 1, NULL, NULL));
        /* a bar at the very start: no name, and nothing read before the
         * line or past its end (the name's length was -1 and its first
         * bytes were read past the line: ASan's finding in the cli-diff fuzz
         * target; the line is exactly its bytes, in a buffer of its own) */
        static const char *const bare[] = {" | ", " |  |", "  | 1 +"};
        for (size_t i = 0; i < ELEMENTSOF(bare); i++) {
                size_t n = strlen(bare[i]);
                char *exact = malloc(n);
                ck_assert_ptr_nonnull(exact);
                memcpy(exact, bare[i], n);
                m = cli_diff_stat_marks(exact, n, paths, classes);
                if (m) ck_abort_msg("[%s]: marked %s", bare[i], m);
                free(exact);
        }
}
END_TEST

TF_MAIN("cli-diff", "filter", NULL, NULL, 120, test_plain_is_byte_exact_in_any_chunking, test_path_limits,
        test_header_names, test_colors_as_git, test_hostile_escapes, test_header_bound, test_escape_without_colour,
        test_escape_controls, test_stat_marks)
