/* UTF-8: the one decoder and what is built on it (see utf8.h). */

#include "utf8.h"

#include <stdlib.h>
#include <string.h>

static Utf8Char utf8_broken(Utf8Status status) {
        return (Utf8Char) {.cp = UTF8_REPLACEMENT_CHARACTER, .len = 1, .status = status};
}

/* Can s[0..have) (a lead byte and have - 1 continuation bytes, fewer than
 * the lead announces) still begin a well-formed sequence? The lead must be
 * C2..F4, and its second byte must keep the value in range: E0 A0.., not
 * E0 80.. (overlong); ED ..9F, not ED A0.. (a surrogate); F0 90.. (overlong
 * below); F4 ..8F (above U+10FFFF beyond). */
static bool utf8_prefix_can_be_valid(const unsigned char *s, size_t have) {
        unsigned char c = s[0];
        if (c < 0xC2 || c > 0xF4) return false;
        if (have < 2) return true;
        switch (c) {
        case 0xE0: return s[1] >= 0xA0;
        case 0xED: return s[1] <= 0x9F;
        case 0xF0: return s[1] >= 0x90;
        case 0xF4: return s[1] <= 0x8F;
        default: return true;
        }
}

Utf8Char utf8_decode(const char *str, size_t len) {
        const unsigned char *s = (const unsigned char *) str;
        if (len == 0) return (Utf8Char) {.cp = UTF8_REPLACEMENT_CHARACTER, .len = 0, .status = UTF8_TRUNCATED};
        unsigned char c = s[0];
        if (c < 0x80) return (Utf8Char) {.cp = c, .len = 1, .status = UTF8_VALID};

        /* the lead byte says the length: 110xxxxx 2, 1110xxxx 3, 11110xxx 4 */
        size_t n;
        uint32_t v, min;
        if ((c & 0xE0) == 0xC0) n = 2, v = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) n = 3, v = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) n = 4, v = c & 0x07, min = 0x10000;
        else return utf8_broken(UTF8_INVALID); /* a continuation byte, or F8..FF */

        size_t have = len < n ? len : n;
        for (size_t i = 1; i < have; i++) {
                if ((s[i] & 0xC0) != 0x80) return utf8_broken(UTF8_INVALID);
                v = (v << 6) | (s[i] & 0x3F);
        }
        if (have < n) return utf8_broken(utf8_prefix_can_be_valid(s, have) ? UTF8_TRUNCATED : UTF8_INVALID);

        Utf8Status status = v < min                       ? UTF8_OVERLONG
                            : v >= 0xD800 && v <= 0xDFFF  ? UTF8_SURROGATE
                            : v > 0x10FFFF                ? UTF8_TOO_BIG
                                                          : UTF8_VALID;
        return (Utf8Char) {.cp = v, .len = (uint8_t) n, .status = status};
}

/* UTF-16 units of what utf8_decode read: 2 above U+FFFF (TOO_BIG values
 * too), else 1. */
static size_t utf16_units(Utf8Char u) { return u.cp >= 0x10000 ? 2 : 1; }

size_t utf8_utf16_length(const char *s, size_t len) {
        size_t units = 0;
        for (size_t i = 0; i < len;) {
                Utf8Char u = utf8_decode(s + i, len - i);
                units += utf16_units(u);
                i += u.len;
        }
        return units;
}

size_t utf8_codepoints(const char *s, size_t len) {
        size_t n = 0;
        for (size_t i = 0; i < len; n++) i += utf8_decode(s + i, len - i).len;
        return n;
}

size_t utf8_tail_offset(const char *s, size_t len, size_t n) {
        size_t total = utf8_codepoints(s, len);
        if (total <= n) return 0;
        size_t skip = total - n, i = 0;
        while (skip-- > 0 && i < len) i += utf8_decode(s + i, len - i).len;
        return i;
}

size_t utf8_prefix_utf16(const char *s, size_t len, size_t units) {
        size_t i = 0, u = 0;
        while (i < len) {
                Utf8Char c = utf8_decode(s + i, len - i);
                size_t w = utf16_units(c);
                if (u + w > units) break;
                u += w;
                i += c.len;
        }
        return i;
}

size_t utf8_encode(uint32_t cp, char out[4]) {
        if (cp < 0x80) {
                out[0] = (char) cp;
                return 1;
        }
        if (cp < 0x800) {
                out[0] = (char) (0xC0 | (cp >> 6));
                out[1] = (char) (0x80 | (cp & 0x3F));
                return 2;
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
        if (cp < 0x10000) {
                out[0] = (char) (0xE0 | (cp >> 12));
                out[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
                out[2] = (char) (0x80 | (cp & 0x3F));
                return 3;
        }
        if (cp > 0x10FFFF) return 0;
        out[0] = (char) (0xF0 | (cp >> 18));
        out[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char) (0x80 | (cp & 0x3F));
        return 4;
}

char *utf8_sanitize(const char *s, size_t len) { return utf8_sanitize_n(s, len, NULL); }

char *utf8_sanitize_n(const char *s, size_t len, size_t *ret_len) {
        /* at worst every byte becomes the 3 bytes of U+FFFD */
        char *out = malloc(len * 3 + 1), *o = out;
        if (!out) return NULL;
        for (size_t i = 0; i < len;) {
                Utf8Char u = utf8_decode(s + i, len - i);
                if (u.status == UTF8_VALID) {
                        memcpy(o, s + i, u.len);
                        o += u.len;
                } else {
                        memcpy(o, UTF8_REPLACEMENT_CHARACTER_STR, 3);
                        o += 3;
                }
                i += u.len;
        }
        *o = 0;
        if (ret_len) *ret_len = (size_t) (o - out);
        return out;
}
