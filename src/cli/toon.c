/* TOON encoder, byte for byte what @toon-format/toon 2.3.1 prints with
 * indent 2, delimiter ',' and no key folding (toon.h). */
#include "toon.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "utf8.h"

#define TOON_INDENT 2

typedef struct toon_writer {
        FILE *f;
        bool first; /* no line written yet */
} toon_writer;

static bool is_primitive(json_object *v) {
        return !v || (!json_object_is_type(v, json_type_object) && !json_object_is_type(v, json_type_array));
}

static bool is_object(json_object *v) {
        return v && json_object_is_type(v, json_type_object);
}

static bool is_array(json_object *v) {
        return v && json_object_is_type(v, json_type_array);
}

/* Start a new output line at `depth` (newline between lines, none at the end). */
static void line_start(toon_writer *w, int depth) {
        if (!w->first) fputc('\n', w->f);
        w->first = false;
        for (int i = 0; i < depth * TOON_INDENT; i++) fputc(' ', w->f);
}

/* The code point at s (len bytes left) and its byte length (the text is
 * valid UTF-8: it came from JSON). */
static size_t decode_at(const unsigned char *s, size_t len, uint32_t *cp) {
        Utf8Char c = utf8_decode((const char *) s, len);
        *cp = c.cp;
        return c.len ? c.len : 1;
}

/* White space as JavaScript's String#trim removes it (WhiteSpace + LineTerminator). */
static bool js_is_space(uint32_t cp) {
        switch (cp) {
        case 0x09: case 0x0a: case 0x0b: case 0x0c: case 0x0d: case 0x20:
        case 0xa0: case 0x1680: case 0x2028: case 0x2029: case 0x202f:
        case 0x205f: case 0x3000: case 0xfeff:
                return true;
        default:
                return cp >= 0x2000 && cp <= 0x200a;
        }
}

static bool has_js_edge_space(const char *s, size_t len) {
        uint32_t cp;
        decode_at((const unsigned char *) s, len, &cp);
        if (js_is_space(cp)) return true;
        /* the last code point: the one of the last 1..4 bytes that decodes to exactly the rest */
        for (size_t k = 1; k <= 4 && k <= len; k++) {
                Utf8Char c = utf8_decode(s + len - k, k);
                if (c.status == UTF8_VALID && c.len == k) return js_is_space(c.cp);
        }
        return js_is_space((unsigned char) s[len - 1]);
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* /^-?\d+(\.\d+)?(e[+-]?\d+)?$/i or /^0\d+$/ */
static bool is_numeric_like(const char *s) {
        const char *p = s;
        if (*p == '-') p++;
        if (!is_digit(*p)) return false;
        while (is_digit(*p)) p++;
        if (*p == '.') {
                p++;
                if (!is_digit(*p)) return false;
                while (is_digit(*p)) p++;
        }
        if (*p == 'e' || *p == 'E') {
                p++;
                if (*p == '+' || *p == '-') p++;
                if (!is_digit(*p)) return false;
                while (is_digit(*p)) p++;
        }
        return *p == 0;
}

static bool string_is_safe_unquoted(const char *s, size_t len) {
        if (len == 0) return false;
        if (strlen(s) != len) return false; /* embedded NUL: a control char */
        if (has_js_edge_space(s, len)) return false;
        if (streq(s, "true") || streq(s, "false") || streq(s, "null")) return false;
        if (is_numeric_like(s)) return false;
        if (s[0] == '-') return false;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) s[i];
                if (c < 0x20) return false;
                if (c == 0xC2 && i + 1 < len && (unsigned char) s[i + 1] <= 0x9F) return false; /* C1 (U+0080..U+009F) */
                if (strchr(":\"\\[]{},", c)) return false;
        }
        return true;
}

static void write_quoted(FILE *f, const char *s, size_t len) {
        fputc('"', f);
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) s[i];
                switch (c) {
                case '\\': fputs("\\\\", f); break;
                case '"': fputs("\\\"", f); break;
                case '\n': fputs("\\n", f); break;
                case '\r': fputs("\\r", f); break;
                case '\t': fputs("\\t", f); break;
                default:
                        if (c < 0x20) fprintf(f, "\\u%04x", c);
                        else if (c == 0xC2 && i + 1 < len && (unsigned char) s[i + 1] >= 0x80 &&
                                 (unsigned char) s[i + 1] <= 0x9F) {
                                /* a C1 control in UTF-8 (U+009B is CSI to some terminals): escaped like C0 */
                                fprintf(f, "\\u%04x", (unsigned char) s[i + 1]);
                                i++;
                        } else
                                fputc(c, f);
                }
        }
        fputc('"', f);
}

static void write_string_value(FILE *f, const char *s, size_t len) {
        if (string_is_safe_unquoted(s, len)) fwrite(s, 1, len, f);
        else write_quoted(f, s, len);
}

static bool key_is_safe_unquoted(const char *k) {
        if (!((k[0] >= 'A' && k[0] <= 'Z') || (k[0] >= 'a' && k[0] <= 'z') || k[0] == '_')) return false;
        for (const char *p = k + 1; *p; p++)
                if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || is_digit(*p) || *p == '_' || *p == '.'))
                        return false;
        return true;
}

static void write_key(FILE *f, const char *k) {
        if (key_is_safe_unquoted(k)) fputs(k, f);
        else write_quoted(f, k, strlen(k));
}

static void write_primitive(FILE *f, json_object *v) {
        if (!v) {
                fputs("null", f);
                return;
        }
        switch (json_object_get_type(v)) {
        case json_type_boolean:
                fputs(json_object_get_boolean(v) ? "true" : "false", f);
                break;
        case json_type_int: {
                /* json-c holds an integer of 2^63 and above (up to 2^64-1) as
                 * uint64, whose int64 reading is capped at 2^63-1 */
                int64_t i = json_object_get_int64(v);
                uint64_t u = json_object_get_uint64(v);
                if (i == INT64_MAX && u > (uint64_t) INT64_MAX) fprintf(f, "%" PRIu64, u);
                else fprintf(f, "%" PRId64, i);
                break;
        }
        case json_type_double: {
                char buf[32];
                fputs(js_number_format(json_object_get_double(v), buf), f);
                break;
        }
        case json_type_string:
                write_string_value(f, json_object_get_string(v), (size_t) json_object_get_string_len(v));
                break;
        default:
                fputs("null", f);
        }
}

static bool array_all(json_object *a, bool (*pred)(json_object *)) {
        size_t n = json_object_array_length(a);
        for (size_t i = 0; i < n; i++)
                if (!pred(json_object_array_get_idx(a, i))) return false;
        return true;
}

static bool is_primitive_array(json_object *v) {
        return is_array(v) && array_all(v, is_primitive);
}

/* Header "key[N]" + optional "{f1,f2}" + ":" (key NULL → "[N]..."). */
static void write_header(FILE *f, const char *key, size_t n, json_object *fields_from) {
        if (key) write_key(f, key);
        fprintf(f, "[%zu]", n);
        if (fields_from) {
                fputc('{', f);
                bool first = true;
                json_object_object_foreach(fields_from, k, val) {
                        (void) val;
                        if (!first) fputc(',', f);
                        first = false;
                        write_key(f, k);
                }
                fputc('}', f);
        }
        fputc(':', f);
}

/* "[N]: a,b,c" (or "[0]:" for no values) after an optional key. */
static void write_inline_primitive_array(FILE *f, const char *key, json_object *a) {
        size_t n = json_object_array_length(a);
        write_header(f, key, n, NULL);
        if (n == 0) return;
        fputc(' ', f);
        for (size_t i = 0; i < n; i++) {
                if (i) fputc(',', f);
                write_primitive(f, json_object_array_get_idx(a, i));
        }
}

/* Tabular arrays: every element an object with the first row's (non-empty)
 * key set, and every value primitive. Returns the first row (whose key
 * order is the header) or NULL. */
static json_object *tabular_header(json_object *a) {
        size_t n = json_object_array_length(a);
        if (n == 0) return NULL;
        json_object *first = json_object_array_get_idx(a, 0);
        if (!is_object(first)) return NULL;
        int nkeys = json_object_object_length(first);
        if (nkeys == 0) return NULL;
        for (size_t i = 0; i < n; i++) {
                json_object *row = json_object_array_get_idx(a, i);
                if (!is_object(row) || json_object_object_length(row) != nkeys) return NULL;
                json_object_object_foreach(first, k, unused) {
                        (void) unused;
                        json_object *cell;
                        if (!json_object_object_get_ex(row, k, &cell)) return NULL;
                        if (!is_primitive(cell)) return NULL;
                }
        }
        return first;
}

static void write_tabular_rows(toon_writer *w, json_object *a, json_object *header, int depth) {
        size_t n = json_object_array_length(a);
        for (size_t i = 0; i < n; i++) {
                json_object *row = json_object_array_get_idx(a, i);
                line_start(w, depth);
                bool first = true;
                json_object_object_foreach(header, k, unused) {
                        (void) unused;
                        json_object *cell = NULL;
                        json_object_object_get_ex(row, k, &cell);
                        if (!first) fputc(',', w->f);
                        first = false;
                        write_primitive(w->f, cell);
                }
        }
}

static void encode_object_lines(toon_writer *w, json_object *obj, int depth);
static void encode_list_item(toon_writer *w, json_object *v, int depth);

static void encode_array(toon_writer *w, const char *key, json_object *a, int depth) {
        size_t n = json_object_array_length(a);
        if (n == 0) {
                line_start(w, depth);
                if (key) {
                        write_key(w->f, key);
                        fputs(": []", w->f);
                } else
                        fputs("[]", w->f);
                return;
        }
        if (array_all(a, is_primitive)) {
                line_start(w, depth);
                write_inline_primitive_array(w->f, key, a);
                return;
        }
        if (array_all(a, is_primitive_array)) {
                line_start(w, depth);
                write_header(w->f, key, n, NULL);
                for (size_t i = 0; i < n; i++) {
                        line_start(w, depth + 1);
                        fputs("- ", w->f);
                        write_inline_primitive_array(w->f, NULL, json_object_array_get_idx(a, i));
                }
                return;
        }
        if (array_all(a, is_object)) {
                json_object *header = tabular_header(a);
                if (header) {
                        line_start(w, depth);
                        write_header(w->f, key, n, header);
                        write_tabular_rows(w, a, header, depth + 1);
                        return;
                }
        }
        line_start(w, depth);
        write_header(w->f, key, n, NULL);
        for (size_t i = 0; i < n; i++) encode_list_item(w, json_object_array_get_idx(a, i), depth + 1);
}

static void encode_key_value(toon_writer *w, const char *key, json_object *v, int depth) {
        if (is_primitive(v)) {
                line_start(w, depth);
                write_key(w->f, key);
                fputs(": ", w->f);
                write_primitive(w->f, v);
        } else if (is_array(v)) {
                encode_array(w, key, v, depth);
        } else {
                line_start(w, depth);
                write_key(w->f, key);
                fputc(':', w->f);
                encode_object_lines(w, v, depth + 1);
        }
}

static void encode_object_lines(toon_writer *w, json_object *obj, int depth) {
        json_object_object_foreach(obj, k, v) encode_key_value(w, k, v, depth);
}

/* Encode the fields of obj after the first one at depth. */
static void encode_rest_fields(toon_writer *w, json_object *obj, int depth) {
        bool first = true;
        json_object_object_foreach(obj, k, v) {
                if (first) {
                        first = false;
                        continue;
                }
                encode_key_value(w, k, v, depth);
        }
}

static void encode_object_as_list_item(toon_writer *w, json_object *obj, int depth) {
        if (json_object_object_length(obj) == 0) {
                line_start(w, depth);
                fputc('-', w->f);
                return;
        }
        struct json_object_iterator it = json_object_iter_begin(obj);
        const char *k = json_object_iter_peek_name(&it);
        json_object *v = json_object_iter_peek_value(&it);

        if (is_primitive(v)) {
                line_start(w, depth);
                fputs("- ", w->f);
                write_key(w->f, k);
                fputs(": ", w->f);
                write_primitive(w->f, v);
        } else if (is_array(v)) {
                size_t n = json_object_array_length(v);
                json_object *header = NULL;
                if (n > 0 && array_all(v, is_object)) header = tabular_header(v);
                line_start(w, depth);
                fputs("- ", w->f);
                if (n == 0) {
                        write_key(w->f, k);
                        fputs(": []", w->f);
                } else if (header) {
                        write_header(w->f, k, n, header);
                        write_tabular_rows(w, v, header, depth + 2);
                } else if (array_all(v, is_primitive)) {
                        write_inline_primitive_array(w->f, k, v);
                } else {
                        write_header(w->f, k, n, NULL);
                        for (size_t i = 0; i < n; i++)
                                encode_list_item(w, json_object_array_get_idx(v, i), depth + 2);
                }
        } else {
                line_start(w, depth);
                fputs("- ", w->f);
                write_key(w->f, k);
                fputc(':', w->f);
                encode_object_lines(w, v, depth + 2);
        }
        encode_rest_fields(w, obj, depth + 1);
}

static void encode_list_item(toon_writer *w, json_object *v, int depth) {
        if (is_primitive(v)) {
                line_start(w, depth);
                fputs("- ", w->f);
                write_primitive(w->f, v);
        } else if (is_array(v)) {
                size_t n = json_object_array_length(v);
                if (array_all(v, is_primitive)) {
                        line_start(w, depth);
                        fputs("- ", w->f);
                        write_inline_primitive_array(w->f, NULL, v);
                } else {
                        line_start(w, depth);
                        fputs("- ", w->f);
                        write_header(w->f, NULL, n, NULL);
                        for (size_t i = 0; i < n; i++)
                                encode_list_item(w, json_object_array_get_idx(v, i), depth + 1);
                }
        } else
                encode_object_as_list_item(w, v, depth);
}

char *toon_encode(json_object *v) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        if (!f) return NULL;
        toon_writer w = { .f = f, .first = true };
        if (is_primitive(v)) {
                write_primitive(f, v);
        } else if (is_array(v)) {
                encode_array(&w, NULL, v, 0);
        } else {
                encode_object_lines(&w, v, 0);
        }
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        if (!buf) return strdup("");
        return buf;
}
