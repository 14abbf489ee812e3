#pragma once
/* UTF-8 (RFC 3629): the one decoder, utf8_decode, its encoder, utf8_encode,
 * and what is counted, cut and cleaned with them. Every reader of UTF-8 bytes in taskferry decodes
 * through utf8_decode, each with its own word on what to do with a sequence
 * that is not well formed.
 *
 * Units: lengths and offsets are in bytes unless the name says code points
 * or UTF-16 units (what JavaScript's String#length counts: 2 for a code
 * point above U+FFFF, 1 for any other; the original is Node.js, and the
 * limits of the wire are counted that way). No function here fails but the
 * allocating ones (NULL on ENOMEM). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UTF8_REPLACEMENT_CHARACTER 0xFFFDu
#define UTF8_REPLACEMENT_CHARACTER_STR "\xEF\xBF\xBD"

typedef enum Utf8Status {
        UTF8_VALID,     /* a well-formed sequence */
        /* The lead byte and as many continuation bytes (10xxxxxx) as it
         * announces, but a value no well-formed sequence carries: */
        UTF8_OVERLONG,  /* longer than the code point needs (C0 80 for U+0000) */
        UTF8_SURROGATE, /* U+D800..U+DFFF (ED A0 80 ..), reserved for UTF-16 */
        UTF8_TOO_BIG,   /* above U+10FFFF: F4 90 80 80 .., and the leads F5..F7 */
        /* No sequence: */
        UTF8_TRUNCATED, /* the bytes end inside a sequence that can still be
                         * well formed (E2 82 of E2 82 AC) */
        UTF8_INVALID,   /* a byte that starts no sequence (80..BF, F8..FF), a
                         * lead byte followed by a byte that is no continuation
                         * byte, or the bytes end inside a sequence that can
                         * no longer be well formed (C0, E0 80, ED A0, F4 90) */
} Utf8Status;

typedef struct Utf8Char {
        /* VALID: the code point; OVERLONG, SURROGATE, TOO_BIG: the value its
         * bits carry (up to 0x1FFFFF); TRUNCATED, INVALID: U+FFFD */
        uint32_t cp;
        /* bytes taken: the sequence's length (1..4) but for TRUNCATED and
         * INVALID, which take 1 (the first byte; decode again after it), and
         * for an empty input (TRUNCATED, 0) */
        uint8_t len;
        Utf8Status status;
} Utf8Char;

/* Decode the one code point that starts at s[0..len). */
Utf8Char utf8_decode(const char *s, size_t len);

/* Encode code point cp (at most U+10FFFF, not a surrogate) into out: its
 * length in bytes (1..4); 0, and nothing written, for a value no
 * well-formed sequence carries. */
size_t utf8_encode(uint32_t cp, char out[4]);

/* Length of s[0..len) in UTF-16 units. A sequence that is not well formed
 * counts as what its value would be (OVERLONG, SURROGATE: 1, TOO_BIG: 2);
 * a TRUNCATED or INVALID byte as 1 unit. */
size_t utf8_utf16_length(const char *s, size_t len);
/* Number of code points in s[0..len), counted as utf8_utf16_length reads
 * them (a sequence that is not well formed is one; a TRUNCATED or INVALID
 * byte is one). */
size_t utf8_codepoints(const char *s, size_t len);
/* Byte offset of the first byte of the last n code points of s[0..len)
 * (counted as utf8_codepoints does); 0 when s holds no more than n. */
size_t utf8_tail_offset(const char *s, size_t len, size_t n);
/* Byte length of the longest prefix of s[0..len) that holds at most `units`
 * UTF-16 units (counted as utf8_utf16_length does; never ends inside a
 * sequence). */
size_t utf8_prefix_utf16(const char *s, size_t len, size_t units);

/* Copy of s[0..len) with every sequence that is not well formed replaced by
 * U+FFFD: one for each OVERLONG, SURROGATE or TOO_BIG sequence as a whole,
 * one for each TRUNCATED or INVALID byte. NUL-terminated, malloc'd; NULL on
 * ENOMEM. */
char *utf8_sanitize(const char *s, size_t len);
/* The same, with the result's length in bytes in *ret_len (may be NULL; the
 * result may hold NUL bytes). */
char *utf8_sanitize_n(const char *s, size_t len, size_t *ret_len);
