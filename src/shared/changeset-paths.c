/* A changeset's paths: quoted as git quotes them, opened beneath a
 * directory, and the warnings for those left out (changeset-paths.h). */
#include "changeset-paths.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macro.h"
#include "string-util.h"
#include "strv.h"

char *cs_quote_path(const char *p) {
        bool plain = true;
        for (const unsigned char *s = (const unsigned char *) p; *s; s++)
                if (*s < 0x20 || *s >= 0x7f || *s == '"' || *s == '\\') plain = false;
        if (plain) return strdup(p);
        char *q = malloc(strlen(p) * 4 + 3), *o = q;
        if (!q) return NULL;
        *o++ = '"';
        for (const unsigned char *s = (const unsigned char *) p; *s; s++) {
                char e = 0;
                switch (*s) {
                case '\a': e = 'a'; break;
                case '\b': e = 'b'; break;
                case '\t': e = 't'; break;
                case '\n': e = 'n'; break;
                case '\v': e = 'v'; break;
                case '\f': e = 'f'; break;
                case '\r': e = 'r'; break;
                case '"': e = '"'; break;
                case '\\': e = '\\'; break;
                }
                if (e) {
                        *o++ = '\\';
                        *o++ = e;
                } else if (*s < 0x20 || *s >= 0x7f)
                        o += sprintf(o, "\\%03o", *s);
                else
                        *o++ = (char) *s;
        }
        *o++ = '"';
        *o = 0;
        return q;
}

char *cs_unquote_path(const char *s, size_t len, size_t *ret_used) {
        if (len == 0 || s[0] != '"') return NULL;
        _cleanup_free_ char *out = malloc(len + 1);
        if (!out) return NULL;
        size_t o = 0;
        for (size_t i = 1; i < len; i++) {
                char c = s[i];
                if (c == '"') {
                        out[o] = 0;
                        if (ret_used) *ret_used = i + 1;
                        return TAKE_PTR(out);
                }
                if (c != '\\') {
                        out[o++] = c;
                        continue;
                }
                if (++i >= len) return NULL;
                c = s[i];
                switch (c) {
                case 'a': out[o++] = '\a'; break;
                case 'b': out[o++] = '\b'; break;
                case 't': out[o++] = '\t'; break;
                case 'n': out[o++] = '\n'; break;
                case 'v': out[o++] = '\v'; break;
                case 'f': out[o++] = '\f'; break;
                case 'r': out[o++] = '\r'; break;
                case '"': case '\\': out[o++] = c; break;
                default:
                        if (c >= '0' && c <= '3' && i + 2 < len && s[i + 1] >= '0' && s[i + 1] <= '7' &&
                            s[i + 2] >= '0' && s[i + 2] <= '7') {
                                char v = (char) (((c - '0') << 6) | ((s[i + 1] - '0') << 3) | (s[i + 2] - '0'));
                                if (v == 0) return NULL;
                                out[o++] = v;
                                i += 2;
                        } else
                                return NULL;
                }
        }
        return NULL; /* unterminated */
}

void warnings_done(warnings *w) {
        strv_free(w->lines);
        memset(w, 0, sizeof *w);
}

/* Count line (which w takes over; NULL: out of memory, -ENOMEM) and keep it
 * while fewer than CHANGESET_WARNINGS_MAX are kept. 0 or -ENOMEM. */
static int warnings_add_line(warnings *w, char *line) {
        if (!line) return -ENOMEM;
        w->total++;
        if (w->n_lines >= CHANGESET_WARNINGS_MAX) {
                free(line);
                return 0;
        }
        int r = strv_consume(&w->lines, line);
        if (r >= 0) w->n_lines++;
        return r;
}

int warn_path(warnings *w, const char *path, const char *why) {
        _cleanup_free_ char *q = cs_quote_path(path);
        if (!q) return -ENOMEM;
        return warnings_add_line(w, strdup_printf("%s: left out of the changeset: %s", q, why));
}

int warnings_finish(warnings *w, char ***ret) {
        if (w->total > w->n_lines && w->n_lines > 0) {
                size_t shown = w->n_lines - 1;
                free(w->lines[shown]);
                w->lines[shown] = strdup_printf("and %zu more paths were left out of the changeset", w->total - shown);
                if (!w->lines[shown]) return -ENOMEM;
        }
        *ret = TAKE_PTR(w->lines);
        w->n_lines = w->total = 0;
        return 0;
}

int warnings_add_reply(warnings *w, const char *p, const char *end, size_t child_total) {
        size_t received = 0;
        for (; p < end; p += strlen(p) + 1) {
                if (!*p) continue;
                int r = warnings_add_line(w, strdup(p));
                if (r < 0) return r;
                received++;
        }
        if (child_total > received) w->total += child_total - received;
        return 0;
}

int cs_open_beneath(int dirfd, const char *rel, int flags) {
        struct open_how how = {
                .flags = (uint64_t) (flags | O_NOFOLLOW | O_CLOEXEC),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        int fd = (int) syscall(SYS_openat2, dirfd, *rel ? rel : ".", &how, sizeof how);
        if (fd < 0 && errno == ENOSYS) /* before Linux 5.6 */
                fd = openat(dirfd, *rel ? rel : ".", flags | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}
