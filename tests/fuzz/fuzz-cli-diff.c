/* `taskferry diff`: the streaming filter over a task's patch (cli-diff.h),
 * the header-name reader and the --stat markers. The patch is the worker's
 * (names and contents). The first byte picks the mode (plain, colour,
 * escape-only), whether paths are kept, and the size of the chunks fed.
 * Checked: plain mode without paths writes the patch byte for byte; colour
 * and escape modes let no control byte, C1 control or invalid UTF-8 reach
 * the terminal but their own SGR sequences, TAB and newline; the same
 * escaping of arbitrary bytes (cli_escape_controls); the header names and
 * stat markers read without failing. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-diff.h"
#include "fuzz.h"
#include "strv.h"
#include "utf8.h"

/* Does out[0..len) hold nothing raw but TAB, newline and our SGR sequences? */
static bool terminal_safe(const char *out, size_t len, bool sgr_allowed) {
        static const char *const sgr[] = {CLI_DIFF_COLOR_META, CLI_DIFF_COLOR_FRAG, CLI_DIFF_COLOR_OLD,
                                          CLI_DIFF_COLOR_NEW, CLI_DIFF_COLOR_RESET};
        for (size_t i = 0; i < len;) {
                unsigned char c = (unsigned char) out[i];
                if (c == 0x1b) {
                        bool ok = false;
                        for (size_t k = 0; sgr_allowed && k < sizeof sgr / sizeof *sgr; k++) {
                                size_t n = strlen(sgr[k]);
                                if (i + n <= len && !memcmp(out + i, sgr[k], n)) {
                                        i += n;
                                        ok = true;
                                        break;
                                }
                        }
                        if (!ok) return false;
                        continue;
                }
                if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) return false;
                Utf8Char u = utf8_decode(out + i, len - i);
                if (u.status != UTF8_VALID || u.len == 0) return false;
                if (u.cp >= 0x80 && u.cp <= 0x9f) return false;
                i += u.len;
        }
        return true;
}

static void stat_line(void *userdata, const char *line, size_t len, bool newline) {
        char *const paths[] = {(char *) "src/a.c", (char *) ".claude/settings.json", (char *) "a b", NULL};
        char *const classes[] = {(char *) "executable", (char *) "agent-config", (char *) "project", NULL};
        char *m = cli_diff_stat_marks(line, len, paths, classes);
        if (m) fuzz_check(m[0] == '[');
        free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint8_t sel = fuzz_take_byte(&data, &size);
        int mode = sel % 3; /* 0 plain, 1 colour, 2 escape */
        bool with_paths = sel & 4;
        size_t chunk = (size_t) (sel >> 3) * 97 + 1;
        char *const paths[] = {(char *) "src", (char *) "./docs/", (char *) "a b", NULL};

        char *buf = NULL;
        size_t blen = 0;
        FILE *out = open_memstream(&buf, &blen);
        fuzz_check(out);
        cli_diff_filter *f = NULL;
        fuzz_check(cli_diff_filter_new(with_paths ? paths : NULL, mode == 1, out, &f) == 0);
        if (mode == 2) cli_diff_filter_set_escape(f, true);
        int r = 0;
        for (size_t off = 0; r >= 0 && off < size; off += chunk)
                r = cli_diff_filter_feed(f, (const char *) data + off, size - off < chunk ? size - off : chunk);
        fuzz_check(r >= 0 || r == -E2BIG);
        if (r >= 0) r = cli_diff_filter_finish(f);
        cli_diff_filter_free(f);
        fclose(out);
        if (r >= 0) {
                if (mode == 0 && !with_paths) fuzz_check(blen == size && !memcmp(buf, data, size));
                if (mode != 0) fuzz_check(terminal_safe(buf, blen, mode == 1));
        }
        free(buf);

        char *esc = cli_escape_controls((const char *) data, size);
        fuzz_check(esc && terminal_safe(esc, strlen(esc), false));
        free(esc);

        char **names = cli_diff_header_names((const char *) data, size);
        fuzz_check(names);
        for (char **n = names; *n; n++) (void) cli_diff_path_matches(*n, "src");
        strv_free(names);
        fuzz_lines(data, size, stat_line, NULL);
        return 0;
}
