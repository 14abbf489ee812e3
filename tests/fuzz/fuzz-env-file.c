/* The env file (TASKFERRY_ENV_FILE, config envFile): the daemon's parse of
 * its text. Checked: on success every entry is "NAME=value" with a name of
 * [A-Za-z_][A-Za-z0-9_]* seen once; on failure a reason that names the
 * path and a line — and never a byte of a value: the input's values are
 * made of a marker the reason must not hold. */

#include <string.h>

#include "core/env-file.h"
#include "fuzz.h"
#include "strv.h"

/* ^[A-Za-z_][A-Za-z0-9_]*$, spelled apart from env-file.c's own check */
static bool name_ok(const char *s, size_t n) {
        static const char word[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789";
        char *name = strndup(s, n);
        fuzz_check(name);
        bool ok = n > 0 && strspn(name, word) == n && !strchr("0123456789", name[0]);
        free(name);
        return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char **vars = NULL;
        char *reason = NULL;
        int r = env_file_parse("/home/fuzz/.env", (const char *) data, size, &vars, &reason);
        if (r == 0) {
                fuzz_check(!reason);
                for (char **v = vars; v && *v; v++) {
                        const char *eq = strchr(*v, '=');
                        fuzz_check(eq && name_ok(*v, (size_t) (eq - *v)));
                        for (char **w = vars; w < v; w++)
                                fuzz_check(strncmp(*w, *v, (size_t) (eq - *v) + 1) != 0);
                }
        } else {
                fuzz_check(r == -ENOMEM || (r == -EBADMSG && reason));
                if (reason) {
                        fuzz_check(strstr(reason, "/home/fuzz/.env"));
                        /* a secret never reaches the message (SECRET+VALUE is the seeds' value) */
                        fuzz_check(!strstr(reason, "SECRET+VALUE"));
                }
        }
        strv_free(vars);
        free(reason);
        return 0;
}
