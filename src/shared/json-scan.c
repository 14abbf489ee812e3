#include "json-scan.h"

#include <string.h>
#include <sys/types.h>

#include "utf8.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

typedef struct Scanner {
        const unsigned char *base, *p, *end;
        bool unsure;   /* an escaped top-level key */
        bool too_deep; /* a container deeper than JSON_SCAN_DEPTH_MAX */
} Scanner;

/* a byte's class inside a string */
enum { STR_PLAIN = 0, STR_QUOTE, STR_BACKSLASH, STR_CONTROL, STR_HIGH };

static unsigned char string_class[256];
static bool string_class_ready;

static void string_class_init(void) {
        if (string_class_ready) return;
        for (unsigned c = 0; c < 0x20; c++) string_class[c] = STR_CONTROL;
        string_class['"'] = STR_QUOTE;
        string_class['\\'] = STR_BACKSLASH;
        for (unsigned c = 0x80; c < 0x100; c++) string_class[c] = STR_HIGH;
        string_class_ready = true;
}

static void skip_ws(Scanner *s) {
        while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

static bool is_hex(unsigned char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Past the bytes from p that need no look (printable ASCII but '"' and
 * '\\'): where the first that does is, or end. */
static const unsigned char *skip_plain(const unsigned char *p, const unsigned char *end) {
#if defined(__SSE2__)
        const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
        while (end - p >= 16) {
                __m128i v = _mm_loadu_si128((const __m128i *) p);
                /* a signed compare: below 0x20, and every byte from 0x80 */
                __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                               _mm_cmplt_epi8(v, space));
                int m = _mm_movemask_epi8(special);
                if (m != 0) return p + __builtin_ctz((unsigned) m);
                p += 16;
        }
#endif
        while (p < end && string_class[*p] == STR_PLAIN) p++;
        return p;
}

/* At the opening quote: past the closing one. false when no JSON string. */
static bool scan_string(Scanner *s, bool *ret_escaped) {
        bool escaped = false;
        s->p++;
        while ((s->p = skip_plain(s->p, s->end)) < s->end) {
                unsigned char c = *s->p;
                switch (string_class[c]) {
                case STR_PLAIN:
                        s->p++;
                        break;
                case STR_QUOTE:
                        s->p++;
                        if (ret_escaped) *ret_escaped = escaped;
                        return true;
                case STR_BACKSLASH:
                        escaped = true;
                        if (s->end - s->p < 2) return false;
                        c = s->p[1];
                        if (c == 'u') {
                                if (s->end - s->p < 6) return false;
                                for (int i = 2; i < 6; i++)
                                        if (!is_hex(s->p[i])) return false;
                                s->p += 6;
                        } else if (strchr("\"\\/bfnrt", c) && c != 0)
                                s->p += 2;
                        else
                                return false;
                        break;
                case STR_CONTROL:
                        return false;
                default: {
                        Utf8Char u = utf8_decode((const char *) s->p, (size_t) (s->end - s->p));
                        if (u.status != UTF8_VALID) return false;
                        s->p += u.len;
                }
                }
        }
        return false;
}

static bool scan_digits(Scanner *s) {
        const unsigned char *start = s->p;
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9') s->p++;
        return s->p > start;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool scan_number(Scanner *s) {
        if (s->p < s->end && *s->p == '-') s->p++;
        if (s->p >= s->end) return false;
        if (*s->p == '0')
                s->p++;
        else if (!scan_digits(s))
                return false;
        if (s->p < s->end && *s->p == '.') {
                s->p++;
                if (!scan_digits(s)) return false;
        }
        if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
                s->p++;
                if (s->p < s->end && (*s->p == '+' || *s->p == '-')) s->p++;
                if (!scan_digits(s)) return false;
        }
        return true;
}

static bool scan_literal(Scanner *s, const char *word) {
        size_t n = strlen(word);
        if ((size_t) (s->end - s->p) < n || memcmp(s->p, word, n) != 0) return false;
        s->p += n;
        return true;
}

typedef struct TopKeys {
        const char *const *keys;
        size_t key_len[JSON_SCAN_KEYS_MAX];
        size_t n_keys;
        JsonScanValue *values;
        JsonScanMemberFn fn; /* instead of keys: every member */
        void *userdata;
} TopKeys;

/* A scalar at p: its type, and whether it is well-formed. */
static bool scan_scalar(Scanner *s, JsonScanType *ret_type) {
        if (s->p >= s->end) return false;
        switch (*s->p) {
        case '"':
                *ret_type = JSON_SCAN_STRING;
                return scan_string(s, NULL);
        case 't':
                *ret_type = JSON_SCAN_TRUE;
                return scan_literal(s, "true");
        case 'f':
                *ret_type = JSON_SCAN_FALSE;
                return scan_literal(s, "false");
        case 'n':
                *ret_type = JSON_SCAN_NULL;
                return scan_literal(s, "null");
        default:
                *ret_type = JSON_SCAN_NUMBER;
                return scan_number(s);
        }
}

/* At a member's key (after '{' or ','): past the key, its ':' and the
 * whitespace before the value. */
static bool scan_member_key(Scanner *s) {
        if (s->p >= s->end || *s->p != '"') return false;
        if (!scan_string(s, NULL)) return false;
        skip_ws(s);
        if (s->p >= s->end || *s->p != ':') return false;
        s->p++;
        skip_ws(s);
        return true;
}

/* One value whose first byte is at p, at nesting depth `depth` (the
 * top-level value is depth 1; a member's or element's value is one deeper
 * than its container, whatever its type, as json-c counts), without
 * recursion: the containers open
 * inside it are a stack of one bit each (1: object, 0: array), at most
 * JSON_SCAN_DEPTH_MAX deep, so a line of any nesting costs no more stack
 * than a flat one. */
static bool scan_nested(Scanner *s, int depth, JsonScanType *ret_type) {
        if (s->p >= s->end) return false;
        if (depth > JSON_SCAN_DEPTH_MAX) {
                s->too_deep = true;
                return false;
        }
        if (*s->p != '{' && *s->p != '[') return scan_scalar(s, ret_type);
        *ret_type = *s->p == '{' ? JSON_SCAN_OBJECT : JSON_SCAN_ARRAY;
        unsigned char is_object[JSON_SCAN_DEPTH_MAX / 8 + 1];
        int n = 0; /* containers open */
        for (;;) {
                /* at a value, of depth depth + n: deeper than the bound is
                 * too deep, a scalar as well as a container */
                if (s->p >= s->end) return false;
                if (depth + n > JSON_SCAN_DEPTH_MAX) {
                        s->too_deep = true;
                        return false;
                }
                if (*s->p == '{' || *s->p == '[') {
                        bool obj = *s->p == '{';
                        if (obj)
                                is_object[n / 8] |= (unsigned char) (1u << (n % 8));
                        else
                                is_object[n / 8] &= (unsigned char) ~(1u << (n % 8));
                        n++;
                        s->p++;
                        skip_ws(s);
                        if (s->p >= s->end) return false;
                        if (*s->p != (obj ? '}' : ']')) {
                                if (obj && !scan_member_key(s)) return false;
                                continue;
                        }
                        s->p++;
                        n--;
                } else {
                        JsonScanType type;
                        if (!scan_scalar(s, &type)) return false;
                }
                /* after a value: close what ends here, up to the next value */
                for (;;) {
                        if (n == 0) return true;
                        skip_ws(s);
                        if (s->p >= s->end) return false;
                        bool obj = is_object[(n - 1) / 8] & (1u << ((n - 1) % 8));
                        if (*s->p == (obj ? '}' : ']')) {
                                s->p++;
                                n--;
                                continue;
                        }
                        if (*s->p != ',') return false;
                        s->p++;
                        skip_ws(s);
                        if (obj && !scan_member_key(s)) return false;
                        break;
                }
        }
}

/* The top-level object, at '{': its members' values through scan_nested,
 * noting the values of the keys in top. */
static bool scan_top_object(Scanner *s, TopKeys *top) {
        s->p++;
        skip_ws(s);
        if (s->p < s->end && *s->p == '}') {
                s->p++;
                return true;
        }
        for (;;) {
                if (s->p >= s->end || *s->p != '"') return false;
                const unsigned char *key = s->p + 1;
                bool key_escaped;
                if (!scan_string(s, &key_escaped)) return false;
                size_t key_len = (size_t) (s->p - 1 - key);
                ssize_t which = -1;
                if (key_escaped && top->n_keys > 0) s->unsure = true;
                for (size_t i = 0; i < top->n_keys; i++)
                        if (top->key_len[i] == key_len && memcmp(top->keys[i], key, key_len) == 0) which = (ssize_t) i;
                skip_ws(s);
                if (s->p >= s->end || *s->p != ':') return false;
                s->p++;
                skip_ws(s);
                const unsigned char *vstart = s->p;
                JsonScanType type;
                if (!scan_nested(s, 2, &type)) return false;
                if (which >= 0 || top->fn) {
                        JsonScanValue value = {.type = type, .offset = (size_t) (vstart - s->base),
                                               .len = (size_t) (s->p - vstart)};
                        if (type == JSON_SCAN_STRING) {
                                value.offset++;
                                value.len -= 2;
                                value.escaped = memchr(vstart + 1, '\\', value.len) != NULL;
                        }
                        if (which >= 0) top->values[which] = value;
                        if (top->fn) {
                                JsonScanMember m = {.key_offset = (size_t) (key - s->base), .key_len = key_len,
                                                    .key_escaped = key_escaped, .value = value};
                                if (!top->fn(&m, top->userdata)) {
                                        s->unsure = true;
                                        return false;
                                }
                        }
                }
                skip_ws(s);
                if (s->p >= s->end) return false;
                if (*s->p == '}') {
                        s->p++;
                        return true;
                }
                if (*s->p != ',') return false;
                s->p++;
                skip_ws(s);
        }
}

static JsonScanResult scan_top(const char *buf, size_t len, TopKeys *top, JsonScanType *ret_top) {
        string_class_init();
        Scanner s = {.base = (const unsigned char *) buf, .p = (const unsigned char *) buf,
                     .end = (const unsigned char *) buf + len};
        skip_ws(&s);
        JsonScanType type = JSON_SCAN_NONE;
        bool ok;
        if (s.p < s.end && *s.p == '{') {
                type = JSON_SCAN_OBJECT;
                ok = scan_top_object(&s, top);
        } else
                ok = scan_nested(&s, 1, &type);
        if (s.too_deep) return JSON_SCAN_TOO_DEEP;
        if (s.unsure) return JSON_SCAN_UNSURE;
        if (!ok) return JSON_SCAN_INVALID;
        skip_ws(&s);
        if (s.p != s.end) return JSON_SCAN_INVALID;
        if (ret_top) *ret_top = type;
        return JSON_SCAN_VALID;
}

JsonScanResult json_scan(const char *buf, size_t len, const char *const *keys, JsonScanType *ret_top,
                         JsonScanValue values[]) {
        TopKeys top = {.keys = keys, .values = values};
        while (keys && keys[top.n_keys] && top.n_keys < JSON_SCAN_KEYS_MAX) {
                values[top.n_keys] = (JsonScanValue) {.type = JSON_SCAN_NONE};
                top.key_len[top.n_keys] = strlen(keys[top.n_keys]);
                top.n_keys++;
        }
        return scan_top(buf, len, &top, ret_top);
}

JsonScanResult json_scan_members(const char *buf, size_t len, JsonScanMemberFn fn, void *userdata) {
        TopKeys top = {.fn = fn, .userdata = userdata};
        return scan_top(buf, len, &top, NULL);
}
