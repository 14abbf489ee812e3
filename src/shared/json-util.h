#pragma once
/* json-c helpers: strict parsing, wire serialization and JavaScript-compatible
 * number formatting (the original is Node.js; TOON and the wire print numbers
 * the way JavaScript's Number#toString does). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

/* Parse exactly one JSON value from buf[0..len) (trailing whitespace allowed,
 * anything else → -EBADMSG). Rejects raw NUL bytes, invalid UTF-8 and depth
 * > 64. (An escaped \u0000 inside a string is valid JSON; see
 * json_string_has_nul.) */
int json_parse_strict(const char *buf, size_t len, json_object **ret);
/* The same with a tokener made once by json_strict_tokener_new (NULL on
 * -ENOMEM; free with json_tokener_free) and reset here for every value, for
 * readers that parse line after line. -EBADMSG as above. */
json_tokener *json_strict_tokener_new(void);
int json_parse_strict_with(json_tokener *tok, const char *buf, size_t len, json_object **ret);
/* A strict tokener (invalid UTF-8 is an error) that nests at most depth
 * deep; json_strict_tokener_new is this with 64. NULL on -ENOMEM. */
json_tokener *json_strict_tokener_new_depth(int depth);
/* The parse of json_parse_strict_with without its NUL check (a caller that
 * words its own errors checks first), for a reader that says why a value
 * is rejected: 0 and the value in *ret; -EBADMSG with json-c's error in
 * *ret_error (may be NULL): json_tokener_success when a complete value is
 * followed by more than whitespace, json_tokener_error_size when len
 * exceeds INT_MAX. */
int json_parse_strict_ex(json_tokener *tok, const char *buf, size_t len, json_object **ret,
                         enum json_tokener_error *ret_error);
/* What json-c's strict mode accepts but JSON (RFC 8259, JSON.parse) does
 * not, in buf[0..len) of a value json-c parsed: outside strings, a character
 * that is no structural one, whitespace, a number's or a literal's (its
 * single-quoted keys, NaN, Infinity), a '.' without a digit before and
 * after it ("1.", "-.5") and a leading zero ("01"); inside strings, a raw
 * control character or a sequence that is not well-formed UTF-8 (json-c
 * lets overlong forms, surrogates and values past U+10FFFF through).
 * json_tokener_success when there is none, else the
 * error json_parse_strict_ex reports for it. A reader that runs json-c
 * itself (one value of a longer text) checks the value's bytes with it. */
enum json_tokener_error json_extension_check(const char *buf, size_t len);
/* Serialize compactly without escaping '/', as JSON.stringify would.
 * Returns a string owned by obj (valid until obj changes or is freed). */
const char *json_to_line(json_object *obj, size_t *ret_len);
/* Shortest round-trip decimal form of d, JavaScript Number#toString rules
 * ("1e+21", "1e-7", "0.1", "-0" → "0"). buf >= 32 bytes. NaN/Inf → "null". */
char *js_number_format(double d, char buf[static 32]);
/* A JSON number that serializes with js_number_format (integers stay int64). */
json_object *json_new_number(double d);
/* obj[key] of any type, NULL when obj is NULL or the key is absent (a
 * borrowed reference). */
json_object *json_get(json_object *obj, const char *key);
/* Object lookups that return NULL when the key is absent or of another type. */
const char *json_get_string(json_object *obj, const char *key);
json_object *json_get_object(json_object *obj, const char *key);
json_object *json_get_array(json_object *obj, const char *key);
bool json_get_bool(json_object *obj, const char *key, bool def);
/* Integer value if key holds an int (or integral double); returns false otherwise. */
bool json_get_int64(json_object *obj, const char *key, int64_t *ret);
/* Add helpers that take ownership; NULL string → JSON null. */
int json_add_string(json_object *obj, const char *key, const char *s);
int json_add_int(json_object *obj, const char *key, int64_t v);
int json_add_bool(json_object *obj, const char *key, bool v);
int json_add_null(json_object *obj, const char *key);
int json_add(json_object *obj, const char *key, json_object *v);
/* True if a JSON string holds an embedded NUL (an escaped \u0000), which C
 * strings would silently cut short. */
bool json_string_has_nul(json_object *s);
/* A JSON number that is an integer within ±(2^53 - 1) (JavaScript's
 * Number.isSafeInteger; 1.0 counts): true and *ret. */
bool json_safe_integer(json_object *v, int64_t *ret);
/* A non-empty JSON string without an embedded NUL (a C string would cut it
 * short). */
bool json_is_nonempty_string(json_object *v);
/* True for a JSON object (not array, not null). */
bool json_is_object(json_object *v);
/* Deep copy (json_object_deep_copy wrapper that keeps our number serializer). */
json_object *json_copy(json_object *v);
