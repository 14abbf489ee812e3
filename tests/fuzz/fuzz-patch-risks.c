/* The patch reader of the changeset risk classifier (changeset-risk.h): the
 * "diff --git" sections a worker's changeset becomes, their extended
 * headers (modes, renames, copies, C-quoted names, "---"/"+++") and a
 * symlink's target in its hunk. The first byte picks the context: the
 * patch root (the repository's top or a subdirectory), the project's
 * review patterns or none, and a live directory holding symlinks at risky
 * names (".claude" onto a directory inside, links out) or none. Checked: a
 * read either fails with nothing kept or returns its count with at most
 * CHANGESET_RISKS_MAX entries, each a known class, a non-empty quoted path
 * and a detail that makes a line. */

#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "changeset-risk.h"
#include "fuzz.h"

static char live_dir[] = "/tmp/fuzz-patch-risks-XXXXXX";
static int live_fd = -1;

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        return remove(path);
}

static void live_remove(void) {
        (void) nftw(live_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_check(mkdtemp(live_dir));
        atexit(live_remove);
        live_fd = open(live_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        fuzz_check(live_fd >= 0);
        fuzz_check(mkdirat(live_fd, "tools", 0700) == 0 && mkdirat(live_fd, "tools/agent", 0700) == 0);
        fuzz_check(symlinkat("tools/agent", live_fd, ".claude") == 0);
        fuzz_check(symlinkat("../../etc/passwd", live_fd, "out") == 0);
        fuzz_check(symlinkat("/etc", live_fd, ".vscode") == 0);
        fuzz_check(symlinkat("a/b", live_fd, "inside") == 0);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint8_t sel = fuzz_take_byte(&data, &size);
        char *const patterns[] = {(char *) "build/", (char *) "*.lock", (char *) "/ci/**", NULL};
        int fd = fuzz_memfd(data, size);
        fuzz_check(fd >= 0);
        ChangesetRisks risks = {};
        int r = changeset_risks_read(fd, sel & 1 ? "sub/dir" : "", sel & 2 ? patterns : NULL, sel & 4 ? live_fd : -1,
                                     &risks);
        close(fd);
        if (r < 0) {
                fuzz_check(r == -EBADMSG || r == -ENOMEM);
                fuzz_check(risks.n == 0 && !risks.entries);
                return 0;
        }
        fuzz_check((size_t) r == risks.total || (risks.total > INT32_MAX && r == INT32_MAX));
        fuzz_check(risks.n <= risks.total && risks.n <= CHANGESET_RISKS_MAX);
        for (size_t i = 0; i < risks.n; i++) {
                const ChangesetRisk *e = &risks.entries[i];
                fuzz_check(risk_class_to_string(e->class));
                fuzz_check(e->path && *e->path && e->detail && *e->detail);
                char *l = changeset_risk_line(e);
                fuzz_check(l && !strchr(l, '\n'));
                free(l);
        }
        changeset_risks_done(&risks);
        return 0;
}
