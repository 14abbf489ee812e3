/* Random ids: UUID v4 and task ids (see id-util.h). */

#include "id-util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "macro.h"
#include "string-util.h"
#include "time-util.h"

int uuid4(char out[static 37]) {
        uint8_t b[16];
        size_t got = 0;
        while (got < sizeof b) {
                ssize_t n = getrandom(b + got, sizeof b - got, 0);
                if (n < 0) {
                        if (errno == EINTR) continue;
                        return -errno;
                }
                got += (size_t) n;
        }
        b[6] = (b[6] & 0x0F) | 0x40;
        b[8] = (b[8] & 0x3F) | 0x80;
        snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                 b[13], b[14], b[15]);
        return 0;
}

char *task_id_new(void) {
        char u[37], b36[16], rev[16];
        if (uuid4(u) < 0) return NULL;
        uint64_t ms = now_ms();
        size_t n = 0;
        do {
                rev[n++] = "0123456789abcdefghijklmnopqrstuvwxyz"[ms % 36];
                ms /= 36;
        } while (ms && n < sizeof rev);
        for (size_t i = 0; i < n; i++) b36[i] = rev[n - 1 - i];
        b36[n] = 0;
        return strdup_printf("oc_%s_%.8s", b36, u);
}

bool task_id_is_valid(const char *s) {
        if (!s || !*s || strlen(s) > 64) return false;
        if (streq(s, ".") || streq(s, "..")) return false;
        for (const char *p = s; *p; p++)
                if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') ||
                      ('0' <= *p && *p <= '9') || *p == '_' || *p == '-'))
                        return false;
        return true;
}
