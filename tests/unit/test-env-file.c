/* env-file.c: the grammar of an env file (env-file.h) and the
 * file checks (mode, type, size, NUL), with error messages that never echo
 * a line's content. The reload and the layers run through the real daemon
 * in tests/integration/test-env-file.c. */

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "core/env-file.h"
#include "unit.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"

#define P "/x/env"

/* Parse text; asserts success; returns the strv. */
static char **ok(const char *text) {
        char **v = NULL, *err = NULL;
        int r = env_file_parse(P, text, strlen(text), &v, &err);
        ck_assert_msg(r == 0, "parse of [%s] failed: %s", text, err ? err : "?");
        ck_assert_ptr_null(err);
        ck_assert_ptr_nonnull(v);
        return v;
}

/* The value of name after parsing text (asserts it is there). */
static void value_is(const char *text, const char *name, const char *want) {
        char **v = ok(text);
        const char *got = strv_env_get(v, name);
        ck_assert_msg(got, "%s missing after [%s]", name, text);
        ck_assert_msg(streq(got, want), "[%s]: %s=[%s], want [%s]", text, name, got, want);
        strv_free(v);
}

/* text parses to n variables. */
static void n_vars_is(const char *text, size_t n) {
        char **v = ok(text);
        ck_assert_msg(strv_length(v) == n, "[%s]: %zu variables, want %zu", text, strv_length(v), n);
        strv_free(v);
}

/* Parsing text fails with -EBADMSG, a message naming path and line
 * `line` and containing want — and none of the secret's bytes. */
static void bad(const char *text, size_t len, size_t line, const char *want, const char *secret) {
        char **v = NULL, *err = NULL;
        int r = env_file_parse(P, text, len, &v, &err);
        ck_assert_msg(r == -EBADMSG, "[%s] parsed (%d)", text, r);
        ck_assert_ptr_null(v);
        ck_assert_ptr_nonnull(err);
        _cleanup_free_ char *where = strdup_printf("env file " P ":%zu: ", line);
        ck_assert_msg(strstr(err, where), "[%s]: %s (want %s)", text, err, where);
        ck_assert_msg(strstr(err, want), "[%s]: %s (want %s)", text, err, want);
        if (secret) ck_assert_msg(!strstr(err, secret), "[%s]: the message echoes the content: %s", text, err);
        free(err);
}

START_TEST(basics) {
        char **v = ok("A=1\nB=two words\n\n# comment\n   # indented comment\nC=\n");
        ck_assert_uint_eq(strv_length(v), 3);
        ck_assert_str_eq(strv_env_get(v, "A"), "1");
        ck_assert_str_eq(strv_env_get(v, "B"), "two words");
        ck_assert_str_eq(strv_env_get(v, "C"), "");
        strv_free(v);
        /* empty text, only comments, only blank lines */
        n_vars_is("", 0);
        n_vars_is("\n\r\n  \n#x=1\n", 0);
        /* a BOM before a comment: the line is a comment */
        n_vars_is("\xEF\xBB\xBF# c\nB=2\n", 1);
        /* the last duplicate wins, each name once */
        v = ok("K=first\nK=second\nL=1\nK=third\n");
        ck_assert_uint_eq(strv_length(v), 2);
        ck_assert_str_eq(strv_env_get(v, "K"), "third");
        strv_free(v);
        /* \r\n line ends; no final newline */
        v = ok("A=1\r\nB=2\r\nC=3");
        ck_assert_str_eq(strv_env_get(v, "A"), "1");
        ck_assert_str_eq(strv_env_get(v, "B"), "2");
        ck_assert_str_eq(strv_env_get(v, "C"), "3");
        strv_free(v);
}
END_TEST

/* A text and the value of name after parsing it. */
typedef struct ValueCase {
        const char *text, *name, *value;
} ValueCase;

static const ValueCase value_cases[] = {
        /* split at the first '=', no inline comments */
        {"URL=https://x/?a=b&c=d", "URL", "https://x/?a=b&c=d"},
        {"A==", "A", "="},
        {"A=x # not a comment", "A", "x # not a comment"},
        {"A=#", "A", "#"},
        {"A=  interior   spaces  ", "A", "interior   spaces"},
        /* the name is trimmed, the value too */
        {"  NAME \t =\t value\t ", "NAME", "value"},
        /* a lone \r inside a line is content; at the edge JS trim strips it */
        {"A=x\ry", "A", "x\ry"},
        {"A=x\r\r\n", "A", "x"},
        /* Unicode trimmed as JavaScript trims: BOM at the start of the file,
         * NBSP around name and value, the Zs spaces and LS/PS at the edges */
        {"\xEF\xBB\xBF" "A=1\n", "A", "1"},
        {"\xC2\xA0" "A" "\xC2\xA0" "=" "\xC2\xA0" "v" "\xC2\xA0", "A", "v"},
        {"\xE2\x80\x83" "A=v" "\xE3\x80\x80", "A", "v"},
        {"A=v" "\xE2\x80\xA8" "\xE2\x80\xA9" "\xE2\x80\xAF" "\xE2\x81\x9F" "\xE1\x9A\x80" "\x0B\x0C", "A", "v"},
        /* interior Unicode spaces stay */
        {"A=a" "\xC2\xA0" "b", "A", "a\xC2\xA0" "b"},
        /* U+0085 (NEL) and U+200B are no JS white space: content */
        {"A=v" "\xC2\x85", "A", "v\xC2\x85"},
        {"A=" "\xE2\x80\x8B" "v", "A", "\xE2\x80\x8B" "v"},
        /* invalid UTF-8 reads as U+FFFD, as the original's reader sees it */
        {"A=\xFF", "A", "\xEF\xBF\xBD"},
        /* non-ASCII values pass */
        {"A=pässwörd", "A", "pässwörd"},
        /* the export prefix */
        {"export A=1", "A", "1"},
        {"export    A=1", "A", "1"},
        {"  export A=1", "A", "1"},
        /* "export" as a name of its own */
        {"export=1", "export", "1"},
        /* names */
        {"_=1", "_", "1"},
        {"a_B9=1", "a_B9", "1"},
        {"exportX=1", "exportX", "1"},
        /* quotes */
        {"A=\"quoted value\"", "A", "quoted value"},
        {"A='single'", "A", "single"},
        {"A=\"\"", "A", ""},
        {"A=''", "A", ""},
        {"A=\"  inner spaces  \"", "A", "  inner spaces  "},
        /* double quotes unescape \" and \\ only; \n stays two chars */
        {"A=\"a\\\"b\"", "A", "a\"b"},
        {"A=\"a\\\\b\"", "A", "a\\b"},
        {"A=\"a\\nb\"", "A", "a\\nb"},
        {"A=\"a\\tb\\$c\"", "A", "a\\tb\\$c"},
        /* one left-to-right pass: \\\" is \ then " */
        {"A=\"\\\\\\\"\"", "A", "\\\""},
        {"A=\"\\\"", "A", "\\"},
        /* single quotes are literal */
        {"A='a\\\"b\\\\c'", "A", "a\\\"b\\\\c"},
        {"A='it\"s'", "A", "it\"s"},
        /* one layer stripped; an inner quote stays */
        {"A=\"a\"b\"", "A", "a\"b"},
        {"A=\"'x'\"", "A", "'x'"},
        {"A='\"x\"'", "A", "\"x\""},
        /* a quote in the middle of an unquoted value is content */
        {"A=a\"b", "A", "a\"b"},
        {"A=a'", "A", "a'"},
        /* no interpolation */
        {"A=\"${HOME}\"", "A", "${HOME}"},
        {"A=$HOME", "A", "$HOME"},
};

START_TEST(values) { value_is(value_cases[_i].text, value_cases[_i].name, value_cases[_i].value); }
END_TEST

/* A text that does not parse, the line its error names, what the message
 * says and a secret it must not echo (NULL: none). */
static const struct {
        const char *text;
        size_t line;
        const char *want, *secret;
} bad_cases[] = {
        /* the export prefix is "export" and one ASCII space, nothing else */
        {"export\xC2\xA0" "A=1", 1, "invalid variable name", NULL},
        /* invalid names */
        {"export\tX=1", 1, "invalid variable name", NULL},
        {"A=1\nexport =1\n", 2, "invalid variable name", NULL},
        {"1A=x", 1, "invalid variable name", NULL},
        {"A-B=x", 1, "invalid variable name", NULL},
        {"A B=x", 1, "invalid variable name", NULL},
        {"=value", 1, "invalid variable name", NULL},
        {"exportA B=1", 1, "invalid variable name", NULL},
        {"NÄME=1", 1, "invalid variable name", NULL},
        /* `export` alone is a line without '=' */
        {"export", 1, "no '='", NULL},
        /* unterminated quotes */
        {"A=\"a\" # c", 1, "unterminated double-quoted value", "# c"},
        {"A=\"sekrit", 1, "unterminated double-quoted value", "sekrit"},
        {"A=\"", 1, "unterminated double-quoted value", NULL},
        {"A='sekrit", 1, "unterminated single-quoted value", "sekrit"},
        {"A='", 1, "unterminated single-quoted value", NULL},
        {"A='x\"", 1, "unterminated single-quoted value", NULL},
        {"OK=1\n\nB=\"multi\nline\"\n", 3, "unterminated double-quoted value", "multi"},
};

START_TEST(refusals) {
        const char *text = bad_cases[_i].text;
        bad(text, strlen(text), bad_cases[_i].line, bad_cases[_i].want, bad_cases[_i].secret);
}
END_TEST

START_TEST(errors_name_the_line_never_the_content) {
        const char *secret = "sk-live-0123456789abcdef";
        _cleanup_free_ char *t1 = strdup_printf("A=1\n# x\n%s\n", secret);
        bad(t1, strlen(t1), 3, "expected NAME=value", secret);
        _cleanup_free_ char *t2 = strdup_printf("%s-KEY=v\n", secret);
        bad(t2, strlen(t2), 1, "invalid variable name", secret);
        _cleanup_free_ char *t3 = strdup_printf("K=\"%s\n", secret);
        bad(t3, strlen(t3), 1, "unterminated", secret);
        /* a NUL byte: the line named, the content not */
        static const char nul[] = "A=1\nB=sk-live\0tail\n";
        bad(nul, sizeof nul - 1, 2, "NUL byte", "sk-live");
        /* the help says what a line looks like */
        char **v = NULL, *err = NULL;
        ck_assert_int_eq(env_file_parse(P, "nope", 4, &v, &err), -EBADMSG);
        ck_assert_msg(strstr(err, "\nhelp: "), "%s", err);
        ck_assert(startswith(err, "error: "));
        free(err);
}
END_TEST

/* ---- env_file_load: the file's checks ---- */

/* A new file (whatever mode the one before had) of mode. */
static void write_mode(const char *path, const char *text, mode_t mode) {
        unlink(path);
        tf_write_file(path, text, strlen(text), mode);
}

static int load(const char *path, char ***v, char **err) {
        *v = NULL;
        *err = NULL;
        return env_file_load(path, v, NULL, err);
}

START_TEST(load_checks) {
        char *d = tf_tmpdir_new("tf-envfile");
        _cleanup_free_ char *f = strdup_printf("%s/env", d);
        char **v, *err;
        /* missing: the help names both knobs */
        ck_assert_int_eq(load(f, &v, &err), -ENOENT);
        ck_assert_msg(strstr(err, "not found") && strstr(err, "TASKFERRY_ENV_FILE") && strstr(err, "envFile"), "%s", err);
        free(err);
        /* modes with no group/other bit pass */
        const mode_t good[] = {0400, 0600, 0700, 0200};
        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                if (good[i] == 0200 && geteuid() != 0) continue; /* unreadable to its owner */
                write_mode(f, "K=sekrit\n", good[i]);
                ck_assert_msg(load(f, &v, &err) == 0, "%o: %s", good[i], err);
                ck_assert_str_eq(strv_env_get(v, "K"), "sekrit");
                strv_free(v);
        }
        /* any group/other bit refuses, with the octal mode and chmod 600 */
        const mode_t badm[] = {0644, 0640, 0604, 0610, 0601, 0620, 0602, 0666};
        for (size_t i = 0; i < ELEMENTSOF(badm); i++) {
                write_mode(f, "K=sekrit\n", badm[i]);
                ck_assert_int_eq(load(f, &v, &err), -EACCES);
                _cleanup_free_ char *m = strdup_printf("(mode %04o)", badm[i]);
                ck_assert_msg(strstr(err, "readable by group or other") && strstr(err, m) && strstr(err, "chmod 600"),
                              "%o: %s", badm[i], err);
                ck_assert(!strstr(err, "sekrit"));
                free(err);
        }
        /* stat follows a symlink: the target's mode counts, not the link's */
        _cleanup_free_ char *target = strdup_printf("%s/target", d), *link = strdup_printf("%s/link", d);
        write_mode(target, "L=1\n", 0600);
        ck_assert_int_eq(symlink(target, link), 0);
        ck_assert_int_eq(load(link, &v, &err), 0);
        ck_assert_str_eq(strv_env_get(v, "L"), "1");
        strv_free(v);
        ck_assert_int_eq(chmod(target, 0644), 0);
        ck_assert_int_eq(load(link, &v, &err), -EACCES);
        free(err);
        /* not a regular file: a directory, a fifo (without hanging), /dev/zero */
        ck_assert_int_eq(load(d, &v, &err), -EISDIR);
        ck_assert_msg(strstr(err, "not a regular file"), "%s", err);
        free(err);
        _cleanup_free_ char *fifo = strdup_printf("%s/fifo", d);
        ck_assert_int_eq(mkfifo(fifo, 0600), 0);
        ck_assert_int_eq(load(fifo, &v, &err), -EINVAL);
        free(err);
        ck_assert_int_eq(load("/dev/zero", &v, &err), -EINVAL);
        free(err);
        /* larger than the cap */
        unlink(f);
        ck_assert_int_eq(truncate(target, 0), 0);
        ck_assert_int_eq(chmod(target, 0600), 0);
        ck_assert_int_eq(truncate(target, (off_t) ENV_FILE_MAX + 1), 0);
        ck_assert_int_eq(load(target, &v, &err), -EFBIG);
        ck_assert_msg(strstr(err, "larger than"), "%s", err);
        free(err);
        /* at the cap: fine (one long comment line) */
        ck_assert_int_eq(truncate(target, 0), 0);
        {
                _cleanup_free_ char *big = malloc(ENV_FILE_MAX + 1);
                memset(big, 'x', ENV_FILE_MAX);
                big[0] = '#';
                big[ENV_FILE_MAX] = 0;
                write_mode(target, big, 0600);
                ck_assert_int_eq(load(target, &v, &err), 0);
                strv_free(v);
        }
        /* a malformed line: path and line number */
        write_mode(f, "A=1\nB\n", 0600);
        ck_assert_int_eq(load(f, &v, &err), -EBADMSG);
        _cleanup_free_ char *where = strdup_printf("%s:2:", f);
        ck_assert_msg(strstr(err, where), "%s", err);
        free(err);
        /* unreadable (not as root, who reads anything) */
        if (geteuid() != 0) {
                write_mode(f, "A=1\n", 0000);
                ck_assert_int_eq(load(f, &v, &err), -EACCES);
                ck_assert_msg(strstr(err, "cannot open"), "%s", err);
                free(err);
        }
        tf_tmpdir_free(d);
}
END_TEST

int main(void) {
        Suite *s = suite_create("env-file");
        TCase *tc = tf_tcase(s, "env-file", NULL, NULL, 0,
                             TF_TESTS(basics, errors_name_the_line_never_the_content, load_checks));
        TF_LOOP(tc, values, value_cases);
        TF_LOOP(tc, refusals, bad_cases);
        return tf_run_suite(s);
}
