/* The readers of git's plumbing output (git-output.h): what git prints in
 * a repository a worker shaped (its paths and contents). The first byte
 * picks the reader: diff-tree raw records, apply --numstat entries, or a
 * cat-file --batch header per line. The input is given as run_command
 * hands output over: NUL-terminated at its length, in a buffer of exactly
 * that size (ASan sees a read past it). Checked: every record read lies
 * within the bytes, its path is non-empty and ends there, a reader moves
 * forward or stops; a header's oid is the one asked for. */

#include <string.h>

#include "fuzz.h"
#include "git-output.h"

static void cat_line(void *userdata, const char *line, size_t len, bool newline) {
        static const char *const oids[] = {"0123456789abcdef0123456789abcdef01234567",
                                           "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"};
        char *l = strndup(line, len);
        fuzz_check(l);
        for (size_t i = 0; i < 2; i++) {
                char type[32];
                uint64_t size = 0;
                int r = git_cat_header_parse(l, oids[i], type, &size);
                fuzz_check(r == 1 || r == 0 || r == -EBADMSG);
                if (r == 1) fuzz_check(strncmp(l, oids[i], strlen(oids[i])) == 0 && *type && strlen(type) < 32);
        }
        free(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint8_t which = fuzz_take_byte(&data, &size) % 3;
        char *out = fuzz_strndup(data, size); /* size + 1 bytes: the NUL run_command adds */
        const char *end = out + size, *p = out;
        if (which == 0) {
                GitRawRecord rec;
                int r;
                while ((r = git_raw_next(&p, end, &rec)) > 0) {
                        fuzz_check(p <= end && rec.path > out && rec.path < end && *rec.path);
                        fuzz_check(rec.path + strlen(rec.path) < end);
                        fuzz_check(strlen(rec.old_oid) == 40 || strlen(rec.old_oid) == 64);
                        fuzz_check(rec.old_mode <= 0777777 && rec.new_mode <= 0777777);
                }
                fuzz_check(r == 0 || r == -EBADMSG);
        } else if (which == 1) {
                GitNumstat e;
                int r;
                while ((r = git_numstat_next(&p, end, &e)) > 0) {
                        fuzz_check(p <= end && e.path > out && e.path < end && *e.path);
                        fuzz_check(e.path + strlen(e.path) < end);
                        if (e.old_path) fuzz_check(e.old_path > out && e.old_path < e.path && *e.old_path);
                        if (e.binary) fuzz_check(e.adds == 0 && e.dels == 0);
                }
                fuzz_check(r == 0 || r == -EBADMSG);
        } else
                fuzz_lines(data, size, cat_line, NULL);
        free(out);
        return 0;
}
