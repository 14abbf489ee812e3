/* utf8.h: the one decoder, one code point at a time (its length, whether it
 * is well formed — overlong forms, surrogates, values past U+10FFFF,
 * truncated sequences — and its value), and the counters, cutters and the
 * sanitizer built on it. */

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "utf8.h"

/* utf8_decode of the bytes of literal s (its length without the NUL). */
#define DECODE(s) utf8_decode((s), sizeof(s) - 1)

static void assert_decodes(Utf8Char u, Utf8Status status, uint32_t cp, unsigned len) {
        ck_assert_int_eq(u.status, status);
        ck_assert_uint_eq(u.cp, cp);
        ck_assert_uint_eq(u.len, len);
}

START_TEST(decode_well_formed) {
        assert_decodes(DECODE("A"), UTF8_VALID, 'A', 1);
        assert_decodes(utf8_decode("\0", 1), UTF8_VALID, 0, 1);
        assert_decodes(DECODE("\x7F"), UTF8_VALID, 0x7F, 1);
        assert_decodes(DECODE("\xC2\x80"), UTF8_VALID, 0x80, 2);
        assert_decodes(DECODE("\xC3\xA9"), UTF8_VALID, 0xE9, 2); /* é */
        assert_decodes(DECODE("\xDF\xBF"), UTF8_VALID, 0x7FF, 2);
        assert_decodes(DECODE("\xE0\xA0\x80"), UTF8_VALID, 0x800, 3);
        assert_decodes(DECODE("\xE2\x82\xAC"), UTF8_VALID, 0x20AC, 3); /* € */
        assert_decodes(DECODE("\xED\x9F\xBF"), UTF8_VALID, 0xD7FF, 3);
        assert_decodes(DECODE("\xEE\x80\x80"), UTF8_VALID, 0xE000, 3);
        assert_decodes(DECODE("\xEF\xBF\xBD"), UTF8_VALID, 0xFFFD, 3);
        assert_decodes(DECODE("\xEF\xBF\xBF"), UTF8_VALID, 0xFFFF, 3);
        assert_decodes(DECODE("\xF0\x90\x80\x80"), UTF8_VALID, 0x10000, 4);
        assert_decodes(DECODE("\xF0\x9F\x98\x80"), UTF8_VALID, 0x1F600, 4); /* 😀 */
        assert_decodes(DECODE("\xF4\x8F\xBF\xBF"), UTF8_VALID, 0x10FFFF, 4);
}
END_TEST

START_TEST(decode_reads_one_code_point) {
        /* the bytes after the sequence are not looked at */
        assert_decodes(DECODE("Ab"), UTF8_VALID, 'A', 1);
        assert_decodes(DECODE("\xC3\xA9\xC3\xA9"), UTF8_VALID, 0xE9, 2);
        assert_decodes(DECODE("\xE2\x82\xAC\xFF"), UTF8_VALID, 0x20AC, 3);
        assert_decodes(DECODE("\xF0\x9F\x98\x80\x80"), UTF8_VALID, 0x1F600, 4);
}
END_TEST

START_TEST(decode_overlong) {
        /* a whole sequence, with the value its bits carry */
        assert_decodes(DECODE("\xC0\x80"), UTF8_OVERLONG, 0, 2);
        assert_decodes(DECODE("\xC1\xBF"), UTF8_OVERLONG, 0x7F, 2);
        assert_decodes(DECODE("\xE0\x80\x80"), UTF8_OVERLONG, 0, 3);
        assert_decodes(DECODE("\xE0\x9F\xBF"), UTF8_OVERLONG, 0x7FF, 3);
        assert_decodes(DECODE("\xF0\x80\x80\x80"), UTF8_OVERLONG, 0, 4);
        assert_decodes(DECODE("\xF0\x8F\xBF\xBF"), UTF8_OVERLONG, 0xFFFF, 4);
}
END_TEST

START_TEST(decode_surrogate) {
        assert_decodes(DECODE("\xED\xA0\x80"), UTF8_SURROGATE, 0xD800, 3);
        assert_decodes(DECODE("\xED\xAF\xBF"), UTF8_SURROGATE, 0xDBFF, 3);
        assert_decodes(DECODE("\xED\xB0\x80"), UTF8_SURROGATE, 0xDC00, 3);
        assert_decodes(DECODE("\xED\xBF\xBF"), UTF8_SURROGATE, 0xDFFF, 3);
}
END_TEST

START_TEST(decode_too_big) {
        assert_decodes(DECODE("\xF4\x90\x80\x80"), UTF8_TOO_BIG, 0x110000, 4);
        assert_decodes(DECODE("\xF5\x80\x80\x80"), UTF8_TOO_BIG, 0x140000, 4);
        assert_decodes(DECODE("\xF7\xBF\xBF\xBF"), UTF8_TOO_BIG, 0x1FFFFF, 4);
}
END_TEST

START_TEST(decode_truncated) {
        /* each a proper prefix of a well-formed sequence: one byte taken */
        assert_decodes(DECODE("\xC2"), UTF8_TRUNCATED, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xDF"), UTF8_TRUNCATED, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xE2"), UTF8_TRUNCATED, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xE2\x82"), UTF8_TRUNCATED, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xE0\xA0"), UTF8_TRUNCATED, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xED\x9F"), UTF8_TRUNCATED, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xF0"), UTF8_TRUNCATED, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xF0\x9F"), UTF8_TRUNCATED, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xF0\x9F\x98"), UTF8_TRUNCATED, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xF4\x8F\xBF"), UTF8_TRUNCATED, UTF8_REPLACEMENT_CHARACTER, 1);
        /* nothing at all */
        assert_decodes(utf8_decode("", 0), UTF8_TRUNCATED, UTF8_REPLACEMENT_CHARACTER, 0);
}
END_TEST

START_TEST(decode_invalid) {
        /* bytes no sequence starts with */
        for (unsigned c = 0x80; c <= 0xBF; c++) {
                char b = (char) c;
                assert_decodes(utf8_decode(&b, 1), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
        }
        for (unsigned c = 0xF8; c <= 0xFF; c++) {
                char b[4] = {(char) c, (char) 0x80, (char) 0x80, (char) 0x80};
                assert_decodes(utf8_decode(b, 4), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
        }
        /* a lead byte followed by one that is no continuation byte */
        assert_decodes(DECODE("\xC3" "A"), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xC3\xC3\xA9"), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xE2\x82" "A"), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xF0\x9F\x98" "A"), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xE2\xFF\x80"), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
        /* cut short where it can no longer be well formed */
        assert_decodes(DECODE("\xC0"), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xC1"), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xE0\x80"), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xE0\x9F"), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xED\xA0"), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xF0\x8F"), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xF4\x90"), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xF4\x90\x80"), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xF5"), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
        assert_decodes(DECODE("\xF5\x80\x80"), UTF8_INVALID, UTF8_REPLACEMENT_CHARACTER, 1);
}
END_TEST

/* Every 2-byte input: VALID exactly for ASCII and C2..DF 80..BF, and a
 * status never takes more bytes than there are. (The loops of this and the
 * next test check without ck_assert, whose bookkeeping for a million calls
 * outlasts the test timeout.) */
START_TEST(decode_every_two_bytes) {
        for (unsigned i = 0; i < 0x10000; i++) {
                char b[2] = {(char) (i >> 8), (char) (i & 0xFF)};
                unsigned c0 = i >> 8, c1 = i & 0xFF;
                Utf8Char u = utf8_decode(b, 2);
                bool want = c0 < 0x80 || (c0 >= 0xC2 && c0 <= 0xDF && c1 >= 0x80 && c1 <= 0xBF);
                if ((u.status == UTF8_VALID) != want || u.len < 1 || u.len > 2 ||
                    (u.status == UTF8_VALID && u.len == 2 && u.cp != (((c0 & 0x1F) << 6) | (c1 & 0x3F))))
                        ck_abort_msg("%02X %02X: status %d, cp %X, len %u", c0, c1, u.status, (unsigned) u.cp, u.len);
        }
}
END_TEST

/* What decodes as VALID round-trips: every code point but the surrogates,
 * encoded by hand, decodes to itself with the length its range has. */
START_TEST(decode_every_code_point) {
        for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
                if (cp >= 0xD800 && cp <= 0xDFFF) continue;
                unsigned char b[4];
                unsigned n;
                if (cp < 0x80) b[0] = (unsigned char) cp, n = 1;
                else if (cp < 0x800) b[0] = 0xC0 | (cp >> 6), b[1] = 0x80 | (cp & 0x3F), n = 2;
                else if (cp < 0x10000)
                        b[0] = 0xE0 | (cp >> 12), b[1] = 0x80 | ((cp >> 6) & 0x3F), b[2] = 0x80 | (cp & 0x3F), n = 3;
                else
                        b[0] = 0xF0 | (cp >> 18), b[1] = 0x80 | ((cp >> 12) & 0x3F), b[2] = 0x80 | ((cp >> 6) & 0x3F),
                        b[3] = 0x80 | (cp & 0x3F), n = 4;
                Utf8Char u = utf8_decode((const char *) b, n);
                if (u.status != UTF8_VALID || u.cp != cp || u.len != n)
                        ck_abort_msg("U+%04X: status %d, cp %X, len %u", (unsigned) cp, u.status, (unsigned) u.cp, u.len);
                /* every proper prefix of a multi-byte one is TRUNCATED */
                for (unsigned k = 1; k < n; k++)
                        if (utf8_decode((const char *) b, k).status != UTF8_TRUNCATED)
                                ck_abort_msg("U+%04X: its first %u bytes are not TRUNCATED", (unsigned) cp, k);
        }
}
END_TEST

START_TEST(counts) {
        /* a 😀 is one code point and two UTF-16 units */
        const char s[] = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
        ck_assert_uint_eq(utf8_codepoints(s, sizeof s - 1), 4);
        ck_assert_uint_eq(utf8_utf16_length(s, sizeof s - 1), 5);
        ck_assert_uint_eq(utf8_codepoints("", 0), 0);
        ck_assert_uint_eq(utf8_utf16_length("", 0), 0);
        /* a byte that starts no sequence counts as one of each */
        ck_assert_uint_eq(utf8_codepoints("\x80\xFF" "a", 3), 3);
        ck_assert_uint_eq(utf8_utf16_length("\x80\xFF" "a", 3), 3);
        /* a truncated sequence: each of its bytes */
        ck_assert_uint_eq(utf8_codepoints("\xF0\x9F\x98", 3), 3);
        ck_assert_uint_eq(utf8_utf16_length("\xF0\x9F\x98", 3), 3);
        /* overlong, surrogate and too big ones count as their value */
        ck_assert_uint_eq(utf8_codepoints("\xC0\x80\xED\xA0\x80\xF4\x90\x80\x80", 9), 3);
        ck_assert_uint_eq(utf8_utf16_length("\xC0\x80\xED\xA0\x80\xF4\x90\x80\x80", 9), 4);
}
END_TEST

START_TEST(tail_and_prefix) {
        const char s[] = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"; /* a é € 😀: offsets 0 1 3 6 */
        size_t len = sizeof s - 1;
        ck_assert_uint_eq(utf8_tail_offset(s, len, 0), len);
        ck_assert_uint_eq(utf8_tail_offset(s, len, 1), 6);
        ck_assert_uint_eq(utf8_tail_offset(s, len, 2), 3);
        ck_assert_uint_eq(utf8_tail_offset(s, len, 3), 1);
        ck_assert_uint_eq(utf8_tail_offset(s, len, 4), 0);
        ck_assert_uint_eq(utf8_tail_offset(s, len, 100), 0);
        /* never inside a code point: the 😀 needs both of its units */
        ck_assert_uint_eq(utf8_prefix_utf16(s, len, 0), 0);
        ck_assert_uint_eq(utf8_prefix_utf16(s, len, 1), 1);
        ck_assert_uint_eq(utf8_prefix_utf16(s, len, 2), 3);
        ck_assert_uint_eq(utf8_prefix_utf16(s, len, 3), 6);
        ck_assert_uint_eq(utf8_prefix_utf16(s, len, 4), 6);
        ck_assert_uint_eq(utf8_prefix_utf16(s, len, 5), len);
        ck_assert_uint_eq(utf8_prefix_utf16(s, len, 99), len);
        /* invalid bytes are one unit each */
        ck_assert_uint_eq(utf8_prefix_utf16("\xFF\xFF" "a", 3, 2), 2);
}
END_TEST

static void assert_sanitizes(const char *in, size_t len, const char *want, size_t want_len) {
        size_t n = 12345;
        char *out = utf8_sanitize_n(in, len, &n);
        ck_assert_ptr_nonnull(out);
        ck_assert_uint_eq(n, want_len);
        ck_assert_mem_eq(out, want, want_len);
        ck_assert_int_eq(out[n], 0);
        free(out);
}
#define SANITIZES(in, want) assert_sanitizes((in), sizeof(in) - 1, (want), sizeof(want) - 1)
#define R UTF8_REPLACEMENT_CHARACTER_STR

START_TEST(sanitize) {
        SANITIZES("", "");
        SANITIZES("plain text", "plain text");
        SANITIZES("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
        SANITIZES("nul\0inside", "nul\0inside");
        /* one U+FFFD per byte that starts no sequence */
        SANITIZES("a\x80" "b\xFF" "c", "a" R "b" R "c");
        SANITIZES("\xE2\x82", R R);
        SANITIZES("\xE2\x82" "A", R R "A");
        /* one per overlong, surrogate or too big sequence as a whole */
        SANITIZES("\xC0\x80", R);
        SANITIZES("x\xE0\x80\x80y", "x" R "y");
        SANITIZES("\xED\xA0\x80\xED\xB0\x80", R R);
        SANITIZES("\xF4\x90\x80\x80", R);
        SANITIZES("\xF5\x80\x80\x80", R);
        char *s = utf8_sanitize("\xC3", 1);
        ck_assert_str_eq(s, R);
        free(s);
}
END_TEST

/* Every code point encodes to the bytes that decode back to it; a
 * surrogate or a value past U+10FFFF encodes to nothing. */
START_TEST(encode_round_trips) {
        char out[4];
        for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
                size_t n = utf8_encode(cp, out);
                if (cp >= 0xD800 && cp <= 0xDFFF) {
                        ck_assert_uint_eq(n, 0);
                        continue;
                }
                ck_assert_uint_eq(n, cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4);
                Utf8Char u = utf8_decode(out, n);
                ck_assert_msg(u.status == UTF8_VALID && u.cp == cp && u.len == n, "U+%04X", (unsigned) cp);
        }
        ck_assert_uint_eq(utf8_encode(0x110000, out), 0);
        ck_assert_uint_eq(utf8_encode(UINT32_MAX, out), 0);
        ck_assert_uint_eq(utf8_encode(0xE9, out), 2);
        ck_assert_int_eq(memcmp(out, "\xc3\xa9", 2), 0);
}
END_TEST

TF_MAIN("utf8", "utf8", NULL, NULL, 0, decode_well_formed, decode_reads_one_code_point, decode_overlong,
        decode_surrogate, decode_too_big, decode_truncated, decode_invalid, decode_every_two_bytes,
        decode_every_code_point, counts, tail_and_prefix, sanitize, encode_round_trips)
