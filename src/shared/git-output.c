/* The readers of git's plumbing output (git-output.h). */
#include "git-output.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "macro.h"

/* The NUL-terminated field at s, within [s, end): its length, or -1 when
 * no NUL ends it there. */
static ssize_t field_len(const char *s, const char *end) {
        const char *nul = s < end ? memchr(s, 0, (size_t) (end - s)) : NULL;
        return nul ? nul - s : -1;
}

/* Six octal digits. */
static bool read_mode(const char *s, unsigned *ret) {
        unsigned v = 0;
        for (int i = 0; i < 6; i++) {
                if (s[i] < '0' || s[i] > '7') return false;
                v = v * 8 + (unsigned) (s[i] - '0');
        }
        *ret = v;
        return true;
}

/* 40 or 64 lower-case hex digits followed by `stop`: their count, else 0. */
static size_t read_oid(const char *s, char stop, char ret[static GIT_OID_HEX_MAX + 1]) {
        size_t n = strspn(s, "0123456789abcdef");
        if ((n != 40 && n != 64) || s[n] != stop) return 0;
        memcpy(ret, s, n);
        ret[n] = 0;
        return n;
}

int git_raw_next(const char **p, const char *end, GitRawRecord *ret) {
        const char *s = *p;
        if (s >= end) return 0;
        ssize_t hl = field_len(s, end);
        if (hl < 0 || s[0] != ':') return -EBADMSG;
        GitRawRecord r = {};
        /* ":" mode " " mode " " */
        if (hl < 15 || !read_mode(s + 1, &r.old_mode) || s[7] != ' ' || !read_mode(s + 8, &r.new_mode) || s[14] != ' ')
                return -EBADMSG;
        const char *q = s + 15;
        size_t n = read_oid(q, ' ', r.old_oid);
        if (!n) return -EBADMSG;
        q += n + 1;
        n = read_oid(q, ' ', r.new_oid);
        if (!n) return -EBADMSG;
        q += n + 1;
        if (*q < 'A' || *q > 'Z') return -EBADMSG;
        r.status = *q++;
        q += strspn(q, "0123456789");
        if (q != s + hl) return -EBADMSG;
        const char *path = s + hl + 1;
        ssize_t pl = field_len(path, end);
        if (pl <= 0) return -EBADMSG;
        r.path = path;
        *ret = r;
        *p = path + pl + 1;
        return 1;
}

/* A count: decimal digits, saturated at UINT_MAX. */
static bool read_count(const char *s, size_t n, unsigned *ret) {
        if (n == 0) return false;
        unsigned long long v = 0;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9') return false;
                v = v * 10 + (unsigned) (s[i] - '0');
                if (v > UINT_MAX) v = UINT_MAX;
        }
        *ret = (unsigned) v;
        return true;
}

int git_numstat_next(const char **p, const char *end, GitNumstat *ret) {
        const char *s = *p;
        if (s >= end) return 0;
        const char *t1 = memchr(s, '\t', (size_t) (end - s));
        const char *t2 = t1 ? memchr(t1 + 1, '\t', (size_t) (end - t1 - 1)) : NULL;
        if (!t2 || memchr(s, 0, (size_t) (t2 - s))) return -EBADMSG;
        GitNumstat r = {};
        size_t an = (size_t) (t1 - s), dn = (size_t) (t2 - t1 - 1);
        if (an == 1 && dn == 1 && s[0] == '-' && t1[1] == '-') r.binary = true;
        else if (!read_count(s, an, &r.adds) || !read_count(t1 + 1, dn, &r.dels))
                return -EBADMSG;
        const char *name = t2 + 1;
        ssize_t nl = field_len(name, end);
        if (nl < 0) return -EBADMSG;
        if (nl > 0) {
                r.path = name;
                *p = name + nl + 1;
        } else {
                const char *old = name + 1;
                ssize_t ol = field_len(old, end);
                if (ol <= 0) return -EBADMSG;
                const char *nw = old + ol + 1;
                ssize_t wl = field_len(nw, end);
                if (wl <= 0) return -EBADMSG;
                r.old_path = old;
                r.path = nw;
                *p = nw + wl + 1;
        }
        *ret = r;
        return 1;
}

int git_cat_header_parse(const char *line, const char *oid, char ret_type[static 32], uint64_t *ret_size) {
        size_t olen = strlen(oid);
        if (olen == 0 || strncmp(line, oid, olen) != 0 || line[olen] != ' ') return -EBADMSG;
        const char *rest = line + olen + 1;
        if (streq(rest, "missing") || streq(rest, "ambiguous")) return 0;
        size_t tl = strspn(rest, "abcdefghijklmnopqrstuvwxyz");
        if (tl == 0 || tl > 31 || rest[tl] != ' ') return -EBADMSG;
        const char *num = rest + tl + 1;
        size_t nl = strspn(num, "0123456789");
        if (nl == 0 || num[nl] || (nl > 1 && num[0] == '0')) return -EBADMSG;
        uint64_t v = 0;
        for (size_t i = 0; i < nl; i++) {
                if (v > (UINT64_MAX - (uint64_t) (num[i] - '0')) / 10) return -EBADMSG;
                v = v * 10 + (uint64_t) (num[i] - '0');
        }
        memcpy(ret_type, rest, tl);
        ret_type[tl] = 0;
        *ret_size = v;
        return 1;
}
