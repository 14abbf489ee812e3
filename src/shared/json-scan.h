#pragma once
/* A validating scan of one JSON text that builds nothing: it says whether
 * buf is one JSON value as RFC 8259 (and JavaScript's JSON.parse) defines
 * it, surrounded by optional JSON whitespace, and for a top-level object
 * where the values of a few named keys are. It is the fast path of readers
 * that look at most lines of a long log only to learn that they are JSON
 * and what two or three top-level keys hold; everything else goes to
 * json-c.
 *
 * Units: offsets and lengths in bytes. Keys are compared byte for byte
 * with their raw (undecoded) text; a top-level key written with an escape
 * makes the scan say JSON_SCAN_UNSURE, because it might decode to one of
 * the named keys. */

#include <stdbool.h>
#include <stddef.h>

/* the deepest nesting the scan follows (the top-level value is depth 1, a
 * value inside a container one deeper than it, scalars included); a value
 * deeper makes it JSON_SCAN_TOO_DEEP. The same bound as a
 * json-c tokener made with this depth, which accepts exactly as deep. The
 * scan uses no recursion: one bit of stack a level. */
#define JSON_SCAN_DEPTH_MAX 4096
/* the most keys one scan looks for */
#define JSON_SCAN_KEYS_MAX 4

typedef enum JsonScanResult {
        JSON_SCAN_INVALID = 0, /* not one JSON value */
        JSON_SCAN_VALID = 1,   /* one JSON value; the keys' spans are set */
        JSON_SCAN_UNSURE = 2,  /* an escaped top-level key: ask a full parser */
        JSON_SCAN_TOO_DEEP = 3, /* all valid up to a value deeper than JSON_SCAN_DEPTH_MAX:
                                 * a parser with that depth bound refuses it as well */
} JsonScanResult;

typedef enum JsonScanType {
        JSON_SCAN_NONE,   /* the key is absent (or the value is no object) */
        JSON_SCAN_STRING,
        JSON_SCAN_NUMBER,
        JSON_SCAN_OBJECT,
        JSON_SCAN_ARRAY,
        JSON_SCAN_TRUE,
        JSON_SCAN_FALSE,
        JSON_SCAN_NULL,
} JsonScanType;

typedef struct JsonScanValue {
        JsonScanType type;
        /* STRING: the bytes between the quotes, as written (escapes not
         * decoded) and whether any escape is among them; other types: the
         * value's whole text */
        size_t offset, len;
        bool escaped;
} JsonScanValue;

/* Scan buf[0..len). keys: NULL-terminated, at most JSON_SCAN_KEYS_MAX,
 * written without escapes. ret_top: the top-level value's type; values[i]:
 * the last occurrence of keys[i] in a top-level object (JSON.parse keeps
 * the last of duplicates), JSON_SCAN_NONE when absent. */
JsonScanResult json_scan(const char *buf, size_t len, const char *const *keys, JsonScanType *ret_top,
                         JsonScanValue values[]);

/* One member of a top-level object: its key's bytes between the quotes as
 * written (offset into the scanned buffer), whether an escape is among
 * them, and its value as json_scan gives a named key's. */
typedef struct JsonScanMember {
        size_t key_offset, key_len;
        bool key_escaped;
        JsonScanValue value;
} JsonScanMember;
/* Called for each member of the top-level object in order, as the scan
 * reaches it: before the scan knows the whole is valid, so act on what it
 * saw only on JSON_SCAN_VALID. false stops the scan (JSON_SCAN_UNSURE). */
typedef bool (*JsonScanMemberFn)(const JsonScanMember *m, void *userdata);
/* Scan buf[0..len) as json_scan, reporting every top-level member to fn
 * instead of looking for named keys (an escaped key is reported, not
 * unsure). */
JsonScanResult json_scan_members(const char *buf, size_t len, JsonScanMemberFn fn, void *userdata);
