/* TOON output of arbitrary records: the input, parsed as JSON, is encoded
 * as the CLI prints it (toon_encode), and read back by the TOON reader
 * below, written for this check from the format's rules (indent 2,
 * delimiter ',', no key folding: key: value lines, nested objects one level
 * deeper, key[N]: a,b inline primitive arrays, key[N]{f,g}: tabular rows,
 * key[N]: with "- " list items, "- key: v" objects as list items with their
 * other fields one level deeper than the dash and the first field's nested
 * lines two levels deeper, quoted strings with \\ \" \n \r \t \uXXXX).
 * Checked: what the reader gets back equals the input (numbers by value,
 * objects by key and value), and the text holds no raw control byte but
 * the newlines between lines. */

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>

#include "fuzz.h"
#include "json-util.h"
#include "toon.h"

typedef struct toon_line {
        int indent;      /* leading spaces */
        const char *s;   /* the rest of the line */
        size_t len;
} toon_line;

typedef struct toon_reader {
        toon_line *l;
        size_t n, i;
} toon_reader;

#define bad(what)                                                                      \
        do {                                                                           \
                fprintf(stderr, "TOON reader: %s (line %zu)\n", what, rd->i + 1);      \
                abort();                                                               \
        } while (0)

/* A quoted string at s (s[0] == '"'): its decoded bytes into a new json
 * string; *used = bytes consumed. */
static json_object *read_quoted(toon_reader *rd, const char *s, size_t len, size_t *used) {
        char *out = malloc(len + 1);
        fuzz_check(out);
        size_t o = 0, i = 1;
        for (;;) {
                if (i >= len) bad("unterminated quoted string");
                char c = s[i++];
                if (c == '"') break;
                if (c != '\\') {
                        out[o++] = c;
                        continue;
                }
                if (i >= len) bad("dangling backslash");
                c = s[i++];
                switch (c) {
                case '\\': out[o++] = '\\'; break;
                case '"': out[o++] = '"'; break;
                case 'n': out[o++] = '\n'; break;
                case 'r': out[o++] = '\r'; break;
                case 't': out[o++] = '\t'; break;
                case 'u': {
                        if (i + 4 > len) bad("short \\u escape");
                        char hex[5] = {s[i], s[i + 1], s[i + 2], s[i + 3], 0};
                        char *end;
                        unsigned long cp = strtoul(hex, &end, 16);
                        if (*end) bad("bad \\u escape");
                        i += 4;
                        if (cp < 0x80) out[o++] = (char) cp;
                        else if (cp <= 0x9f) out[o++] = (char) 0xC2, out[o++] = (char) cp;
                        else bad("\\u escape of a code point the encoder writes raw");
                        break;
                }
                default: bad("unknown escape");
                }
        }
        *used = i;
        json_object *j = json_object_new_string_len(out, (int) o);
        free(out);
        return j;
}

/* The numbers the encoder leaves unquoted: /^-?\d+(\.\d+)?(e[+-]?\d+)?$/i */
static bool numeric_like(const char *s, size_t n) {
        size_t i = 0;
#define DIGITS()                                                    \
        do {                                                        \
                if (i >= n || s[i] < '0' || s[i] > '9') return false; \
                while (i < n && s[i] >= '0' && s[i] <= '9') i++;    \
        } while (0)
        if (i < n && s[i] == '-') i++;
        DIGITS();
        if (i < n && s[i] == '.') {
                i++;
                DIGITS();
        }
        if (i < n && (s[i] == 'e' || s[i] == 'E')) {
                i++;
                if (i < n && (s[i] == '+' || s[i] == '-')) i++;
                DIGITS();
        }
#undef DIGITS
        return i == n;
}

/* One primitive token (the whole of s[0..len)). *ret NULL for null. */
static json_object *read_primitive(toon_reader *rd, const char *s, size_t len) {
        if (len > 0 && s[0] == '"') {
                size_t used;
                json_object *j = read_quoted(rd, s, len, &used);
                if (used != len) bad("text after a quoted value");
                return j;
        }
        if (len == 4 && !memcmp(s, "null", 4)) return NULL;
        if (len == 4 && !memcmp(s, "true", 4)) return json_object_new_boolean(1);
        if (len == 5 && !memcmp(s, "false", 5)) return json_object_new_boolean(0);
        if (len == 0) bad("empty unquoted value");
        char *t = strndup(s, len);
        fuzz_check(t);
        json_object *j;
        if (numeric_like(t, len)) {
                bool integral = !strpbrk(t, ".eE");
                char *end;
                errno = 0;
                long long v = integral ? strtoll(t, &end, 10) : 0;
                if (integral && errno == 0 && !*end) j = json_object_new_int64(v);
                else if (integral && t[0] != '-' && (errno = 0, strtoull(t, &end, 10), errno == 0 && !*end))
                        j = json_object_new_uint64(strtoull(t, NULL, 10));
                else j = json_object_new_double(strtod(t, NULL));
        } else
                j = json_object_new_string_len(t, (int) len);
        free(t);
        return j;
}

/* The end of the token at s (a quoted string, or up to the delimiter). */
static size_t token_end(toon_reader *rd, const char *s, size_t len, char delim) {
        if (len > 0 && s[0] == '"') {
                size_t used;
                json_object_put(read_quoted(rd, s, len, &used));
                return used;
        }
        const char *d = memchr(s, delim, len);
        return d ? (size_t) (d - s) : len;
}

/* n comma-separated primitives making up all of s[0..len) */
static json_object *read_values(toon_reader *rd, const char *s, size_t len, size_t n) {
        json_object *a = json_object_new_array();
        size_t i = 0;
        for (size_t k = 0; k < n; k++) {
                size_t e = i + token_end(rd, s + i, len - i, ',');
                json_object_array_add(a, read_primitive(rd, s + i, e - i));
                i = e;
                if (k + 1 < n) {
                        if (i >= len || s[i] != ',') bad("fewer values than the header says");
                        i++;
                }
        }
        if (i != len) bad("more values than the header says");
        return a;
}

/* A key at s: 1 with the key and *used (what follows is ':' or '['), or 0
 * when s is no key (a primitive). */
static int read_key(toon_reader *rd, const char *s, size_t len, char **ret, size_t *used) {
        size_t e;
        if (len > 0 && s[0] == '"') {
                json_object *k = read_quoted(rd, s, len, &e);
                if (e >= len || (s[e] != ':' && s[e] != '[')) {
                        json_object_put(k);
                        return 0;
                }
                *ret = strdup(json_object_get_string(k));
                json_object_put(k);
        } else {
                e = 0;
                while (e < len && s[e] != ':' && s[e] != '[') e++;
                if (e == len) return 0;
                *ret = strndup(s, e);
        }
        fuzz_check(*ret);
        *used = e;
        return 1;
}

static json_object *read_object(toon_reader *rd, int depth, json_object *into);
static json_object *read_list_item(toon_reader *rd, int depth);

/* After a key (or none): "[N]{fields}:...", "[N]: a,b", "[N]:", ": []",
 * ": v" or ":". depth: the line's; child: where nested lines start. */
static json_object *read_after_key(toon_reader *rd, const char *s, size_t len, int depth, int child) {
        if (len >= 1 && s[0] == '[') {
                char *end;
                unsigned long long n = strtoull(s + 1, &end, 10);
                size_t i = (size_t) (end - s);
                if (end == s + 1 || i >= len || s[i] != ']') bad("bad array header");
                i++;
                json_object *fields = NULL;
                if (i < len && s[i] == '{') {
                        fields = json_object_new_array();
                        i++;
                        for (;;) {
                                char *k = NULL;
                                size_t e;
                                if (i < len && s[i] == '"') {
                                        json_object *q = read_quoted(rd, s + i, len - i, &e);
                                        json_object_array_add(fields, q);
                                } else {
                                        e = 0;
                                        while (i + e < len && s[i + e] != ',' && s[i + e] != '}') e++;
                                        k = strndup(s + i, e);
                                        json_object_array_add(fields, json_object_new_string(k));
                                        free(k);
                                }
                                i += e;
                                if (i >= len) bad("unterminated field list");
                                if (s[i] == '}') break;
                                if (s[i] != ',') bad("bad field list");
                                i++;
                        }
                        i++;
                }
                if (i >= len || s[i] != ':') bad("array header without ':'");
                i++;
                if (fields) {
                        if (i != len) bad("text after a tabular header");
                        json_object *a = json_object_new_array();
                        size_t nf = json_object_array_length(fields);
                        for (unsigned long long r = 0; r < n; r++) {
                                rd->i++;
                                if (rd->i >= rd->n || rd->l[rd->i].indent != child * 2) bad("missing tabular row");
                                json_object *vals = read_values(rd, rd->l[rd->i].s, rd->l[rd->i].len, nf);
                                json_object *row = json_object_new_object();
                                for (size_t f = 0; f < nf; f++)
                                        json_object_object_add(row, json_object_get_string(json_object_array_get_idx(fields, f)),
                                                               json_object_get(json_object_array_get_idx(vals, f)));
                                json_object_put(vals);
                                json_object_array_add(a, row);
                        }
                        json_object_put(fields);
                        return a;
                }
                if (i < len) {
                        if (s[i] != ' ') bad("inline values without a space");
                        return read_values(rd, s + i + 1, len - i - 1, n);
                }
                json_object *a = json_object_new_array();
                for (unsigned long long r = 0; r < n; r++) {
                        rd->i++;
                        if (rd->i >= rd->n || rd->l[rd->i].indent != child * 2) bad("missing list item");
                        json_object_array_add(a, read_list_item(rd, child));
                }
                return a;
        }
        if (len == 4 && !memcmp(s, ": []", 4)) return json_object_new_array();
        if (len >= 2 && s[0] == ':' && s[1] == ' ') return read_primitive(rd, s + 2, len - 2);
        if (len == 1 && s[0] == ':') {
                rd->i++;
                json_object *o = read_object(rd, child, json_object_new_object());
                rd->i--;
                return o;
        }
        bad("bad text after a key");
}

/* One "key..." line at rd->i into o. */
static void read_field(toon_reader *rd, json_object *o, int depth, int child, const char *s, size_t len) {
        char *key = NULL;
        size_t used;
        if (!read_key(rd, s, len, &key, &used)) bad("a line of an object without a key");
        json_object *v = read_after_key(rd, s + used, len - used, depth, child);
        json_object_object_add(o, key, v);
        free(key);
}

/* The lines at depth from rd->i on, into `into`; rd->i ends at the first
 * line not part of it. */
static json_object *read_object(toon_reader *rd, int depth, json_object *into) {
        while (rd->i < rd->n && rd->l[rd->i].indent >= depth * 2) {
                toon_line *l = &rd->l[rd->i];
                if (l->indent != depth * 2) bad("a line deeper than its object");
                read_field(rd, into, depth, depth + 1, l->s, l->len);
                rd->i++;
        }
        return into;
}

static json_object *read_list_item(toon_reader *rd, int depth) {
        toon_line *l = &rd->l[rd->i];
        if (l->len == 1 && l->s[0] == '-') return json_object_new_object();
        if (l->len < 2 || l->s[0] != '-' || l->s[1] != ' ') bad("a list item without \"- \"");
        const char *s = l->s + 2;
        size_t len = l->len - 2;
        if (len > 0 && s[0] == '[') return read_after_key(rd, s, len, depth, depth + 1);
        char *key = NULL;
        size_t used;
        if (!read_key(rd, s, len, &key, &used)) return read_primitive(rd, s, len);
        free(key);
        json_object *o = json_object_new_object();
        read_field(rd, o, depth, depth + 2, s, len);
        rd->i++;
        read_object(rd, depth + 1, o);
        rd->i--;
        return o;
}

static json_object *toon_read(const char *text) {
        toon_reader r = {};
        toon_reader *rd = &r;
        size_t cap = 0;
        for (const char *p = text; *p || p == text;) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t) (nl - p) : strlen(p);
                if (r.n == cap) {
                        cap = cap ? cap * 2 : 16;
                        r.l = realloc(r.l, cap * sizeof *r.l);
                        fuzz_check(r.l);
                }
                size_t ind = 0;
                while (ind < len && p[ind] == ' ') ind++;
                r.l[r.n++] = (toon_line) {.indent = (int) ind, .s = p + ind, .len = len - ind};
                if (!nl) break;
                p = nl + 1;
        }
        json_object *v;
        toon_line *first = &r.l[0];
        if (r.n == 1 && first->len == 0) { /* root {} */
                v = json_object_new_object();
                r.i++;
        } else if (r.n == 1 && first->len == 2 && !memcmp(first->s, "[]", 2)) {
                v = json_object_new_array();
                r.i++;
        } else if (first->len > 0 && first->s[0] == '[') {
                v = read_after_key(rd, first->s, first->len, 0, 1);
                r.i++;
        } else {
                char *key = NULL;
                size_t used;
                if (r.n == 1 && !read_key(rd, first->s, first->len, &key, &used)) {
                        v = read_primitive(rd, first->s, first->len);
                        r.i++;
                } else {
                        free(key);
                        v = read_object(rd, 0, json_object_new_object());
                }
        }
        if (r.i != r.n) bad("lines after the value");
        free(r.l);
        return v;
}

static bool same(json_object *a, json_object *b) {
        json_type ta = a ? json_object_get_type(a) : json_type_null, tb = b ? json_object_get_type(b) : json_type_null;
        /* JSON.stringify and TOON write a number that is not finite (1e400) as null */
        if (ta == json_type_double && !isfinite(json_object_get_double(a))) return tb == json_type_null;
        bool na = ta == json_type_int || ta == json_type_double, nb = tb == json_type_int || tb == json_type_double;
        if (na && nb) {
                /* an integer json-c holds as uint64 (2^63 and above) by its unsigned value */
                if (ta == json_type_int && tb == json_type_int)
                        return json_object_get_int64(a) == json_object_get_int64(b) &&
                               json_object_get_uint64(a) == json_object_get_uint64(b);
                return json_object_get_double(a) == json_object_get_double(b);
        }
        if (ta != tb) return false;
        switch (ta) {
        case json_type_null: return true;
        case json_type_boolean: return !json_object_get_boolean(a) == !json_object_get_boolean(b);
        case json_type_string:
                return json_object_get_string_len(a) == json_object_get_string_len(b) &&
                       !memcmp(json_object_get_string(a), json_object_get_string(b), (size_t) json_object_get_string_len(a));
        case json_type_array: {
                size_t n = json_object_array_length(a);
                if (n != json_object_array_length(b)) return false;
                for (size_t i = 0; i < n; i++)
                        if (!same(json_object_array_get_idx(a, i), json_object_array_get_idx(b, i))) return false;
                return true;
        }
        case json_type_object: {
                if (json_object_object_length(a) != json_object_object_length(b)) return false;
                json_object_object_foreach(a, k, v) {
                        json_object *w;
                        if (!json_object_object_get_ex(b, k, &w) || !same(v, w)) return false;
                }
                return true;
        }
        default: return false;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        json_object *in = NULL;
        if (json_parse_strict((const char *) data, size, &in) < 0) return 0;
        char *text = toon_encode(in);
        fuzz_check(text);
        for (const unsigned char *p = (const unsigned char *) text; *p; p++) fuzz_check(*p >= 0x20 || *p == '\n');
        json_object *back = toon_read(text);
        if (!same(in, back)) {
                fprintf(stderr, "TOON round trip differs\n--- JSON in:\n%s\n--- TOON:\n%s\n--- read back:\n%s\n",
                        json_to_line(in, NULL), text, back ? json_to_line(back, NULL) : "null");
                abort();
        }
        json_object_put(back);
        json_object_put(in);
        free(text);
        return 0;
}
