/* The one TOML reader: a strict TOML v1.0 subset (toml.h). */
#include "toml.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "string-util.h"
#include "utf8.h"

typedef struct parser {
        const char *s;
        size_t len, pos;
        unsigned line;
        unsigned err_line;
        char *err_msg;
        bool oom;
} parser;

static int fail(parser *p, unsigned line, const char *fmt, ...) _printf_(3, 4);
static int fail(parser *p, unsigned line, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *m = NULL;
        if (vasprintf(&m, fmt, ap) < 0) m = NULL;
        va_end(ap);
        if (!m) {
                p->oom = true;
                return -ENOMEM;
        }
        free(p->err_msg);
        p->err_msg = m;
        p->err_line = line;
        return -EINVAL;
}

static int peek(const parser *p) {
        return p->pos < p->len ? (unsigned char) p->s[p->pos] : -1;
}

static int peek_at(const parser *p, size_t off) {
        return p->pos + off < p->len ? (unsigned char) p->s[p->pos + off] : -1;
}

/* Bytes of a newline at the current position: 1 (LF), 2 (CRLF), 0. */
static size_t newline_len(const parser *p) {
        if (peek(p) == '\n') return 1;
        if (peek(p) == '\r' && peek_at(p, 1) == '\n') return 2;
        return 0;
}

static void skip_newline(parser *p, size_t n) {
        p->pos += n;
        p->line++;
}

static void skip_ws(parser *p) {
        while (peek(p) == ' ' || peek(p) == '\t') p->pos++;
}

/* A control character TOML does not allow raw (tab is allowed). */
static bool is_bad_control(int c) {
        return (c >= 0 && c < 0x20 && c != '\t') || c == 0x7f;
}

/* `# ...` to the end of the line (the newline not consumed). */
static int skip_comment(parser *p) {
        if (peek(p) != '#') return 0;
        while (p->pos < p->len && !newline_len(p)) {
                if (is_bad_control(peek(p))) return fail(p, p->line, "control character in a comment");
                p->pos++;
        }
        return 0;
}

/* After a value: blanks, a comment, then a newline or the end. */
static int expect_eol(parser *p) {
        skip_ws(p);
        int r = skip_comment(p);
        if (r < 0) return r;
        if (p->pos >= p->len) return 0;
        size_t n = newline_len(p);
        if (!n) return fail(p, p->line, "expected the end of the line after the value");
        skip_newline(p, n);
        return 0;
}

/* Blanks, comments and newlines (inside an array). */
static int skip_ws_comments_newlines(parser *p) {
        for (;;) {
                skip_ws(p);
                int r = skip_comment(p);
                if (r < 0) return r;
                size_t n = newline_len(p);
                if (!n) return 0;
                skip_newline(p, n);
        }
}

/* The first invalid UTF-8 sequence (RFC 3629: no overlongs, surrogates or
 * code points past U+10FFFF): its offset, or len if the text is valid. */
static size_t utf8_invalid_at(const unsigned char *s, size_t len) {
        for (size_t i = 0; i < len;) {
                Utf8Char c = utf8_decode((const char *) s + i, len - i);
                if (c.status != UTF8_VALID) return i;
                i += c.len;
        }
        return len;
}

/* A growing byte buffer for a string value. */
typedef struct sbuf {
        char *data;
        size_t len, cap;
} sbuf;

static int sbuf_put(parser *p, sbuf *b, const char *data, size_t n) {
        if (b->len + n + 1 > b->cap) {
                size_t cap = b->cap ? b->cap : 64;
                while (b->len + n + 1 > cap) cap *= 2;
                char *d = realloc(b->data, cap);
                if (!d) {
                        p->oom = true;
                        return -ENOMEM;
                }
                b->data = d;
                b->cap = cap;
        }
        memcpy(b->data + b->len, data, n);
        b->len += n;
        b->data[b->len] = 0;
        return 0;
}

static void sbuf_done(sbuf *b) {
        free(b->data);
}

static int sbuf_putc(parser *p, sbuf *b, char c) {
        return sbuf_put(p, b, &c, 1);
}

/* After a backslash (consumed): one escape of a basic string. */
static int parse_escape(parser *p, sbuf *b) {
        int c = peek(p);
        const char *simple = NULL;
        switch (c) {
        case 'b': simple = "\b"; break;
        case 't': simple = "\t"; break;
        case 'n': simple = "\n"; break;
        case 'f': simple = "\f"; break;
        case 'r': simple = "\r"; break;
        case '"': simple = "\""; break;
        case '\\': simple = "\\"; break;
        }
        if (simple) {
                p->pos++;
                return sbuf_put(p, b, simple, 1);
        }
        if (c != 'u' && c != 'U') return fail(p, p->line, "invalid escape sequence in a string");
        size_t digits = c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t k = 1; k <= digits; k++) {
                int h = hex_digit_value(peek_at(p, k));
                if (h < 0) return fail(p, p->line, "\\%c needs %zu hex digits", c, digits);
                cp = (cp << 4) | (uint32_t) h;
        }
        p->pos += 1 + digits;
        if (cp == 0) return fail(p, p->line, "\\u0000 (NUL) is not allowed in a string");
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return fail(p, p->line, "escape sequence names no Unicode scalar value");
        char out[4];
        size_t n = utf8_encode(cp, out); /* a scalar value: never 0 */
        return sbuf_put(p, b, out, n);
}

/* Is the backslash at the current position a line-ending backslash (only
 * blanks between it and a newline)? */
static bool line_ending_backslash(const parser *p) {
        size_t off = 1;
        while (peek_at(p, off) == ' ' || peek_at(p, off) == '\t') off++;
        return peek_at(p, off) == '\n' || (peek_at(p, off) == '\r' && peek_at(p, off + 1) == '\n');
}

/* A string of any of the four kinds, at its opening quote. */
static int parse_string(parser *p, json_object **ret) {
        char q = (char) peek(p);
        bool basic = q == '"';
        bool multi = peek_at(p, 1) == q && peek_at(p, 2) == q;
        unsigned start_line = p->line;
        _cleanup_(sbuf_done) sbuf b = {};
        int r;

        p->pos += multi ? 3 : 1;
        if (multi) {
                /* a newline right after the opening delimiter is trimmed */
                size_t n = newline_len(p);
                if (n) skip_newline(p, n);
        }
        for (;;) {
                int c = peek(p);
                if (c < 0)
                        return fail(p, start_line, multi ? "unterminated multi-line string" : "unterminated string");
                if (c == q) {
                        if (!multi) {
                                p->pos++;
                                break;
                        }
                        size_t run = 0;
                        while (peek_at(p, run) == q) run++;
                        if (run >= 3) {
                                /* up to two quotes of the content may touch the closing ones */
                                if (run > 5) return fail(p, p->line, "too many quotes at the end of a multi-line string");
                                for (size_t k = 0; k < run - 3; k++)
                                        if ((r = sbuf_putc(p, &b, q)) < 0) return r;
                                p->pos += run;
                                break;
                        }
                        for (size_t k = 0; k < run; k++)
                                if ((r = sbuf_putc(p, &b, q)) < 0) return r;
                        p->pos += run;
                        continue;
                }
                size_t nl = newline_len(p);
                if (nl) {
                        if (!multi) return fail(p, start_line, "unterminated string");
                        skip_newline(p, nl);
                        if ((r = sbuf_putc(p, &b, '\n')) < 0) return r;
                        continue;
                }
                if (is_bad_control(c))
                        return fail(p, p->line, basic ? "control character in a string (use an escape sequence)"
                                                      : "control character in a literal string");
                if (c == '\\' && basic) {
                        if (multi && line_ending_backslash(p)) {
                                /* trimmed along with all blanks and newlines that follow */
                                p->pos++;
                                for (;;) {
                                        skip_ws(p);
                                        size_t n = newline_len(p);
                                        if (!n) break;
                                        skip_newline(p, n);
                                }
                                continue;
                        }
                        p->pos++;
                        if ((r = parse_escape(p, &b)) < 0) return r;
                        continue;
                }
                if ((r = sbuf_putc(p, &b, (char) c)) < 0) return r;
                p->pos++;
        }
        json_object *s = json_object_new_string_len(b.data ? b.data : "", (int) b.len);
        if (!s) {
                p->oom = true;
                return -ENOMEM;
        }
        *ret = s;
        return 0;
}

static bool is_bare_key_char(int c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static bool is_number_char(int c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
               c == '+' || c == '.' || c == ':';
}

/* Could the value at the current position be meant as a number (a digit,
 * a sign, inf or nan)? */
static bool looks_numeric(const parser *p) {
        int c = peek(p);
        if ((c >= '0' && c <= '9') || c == '+' || c == '-') return true;
        return p->pos + 3 <= p->len && (memcmp(p->s + p->pos, "inf", 3) == 0 || memcmp(p->s + p->pos, "nan", 3) == 0) &&
               !is_bare_key_char(peek_at(p, 3));
}

/* A decimal integer (TOML's dec-int) at the current position, stored as
 * int64; the other number forms are refused by name. No message repeats
 * the token. */
static int parse_number(parser *p, json_object **ret) {
        size_t start = p->pos, end = start;
        while (end < p->len && is_number_char((unsigned char) p->s[end])) end++;
        const char *t = p->s + start;
        size_t n = end - start, i = 0;
        bool negative = false;
        if (n > 0 && (t[0] == '+' || t[0] == '-')) {
                negative = t[0] == '-';
                i = 1;
        }
        const char *body = t + i;
        size_t bn = n - i;
        if ((bn == 3 && (memcmp(body, "inf", 3) == 0 || memcmp(body, "nan", 3) == 0)))
                return fail(p, p->line, "floats are not supported: use an integer");
        if (bn == 0 || body[0] < '0' || body[0] > '9')
                return fail(p, p->line, "unsupported value: only strings, integers, arrays and true/false are supported");
        if (bn > 1 && body[0] == '0' && (body[1] == 'x' || body[1] == 'o' || body[1] == 'b'))
                return fail(p, p->line, "hexadecimal, octal and binary integers are not supported: write it in decimal");
        /* a time has a colon; an exponent may have a sign, a date has dashes */
        if (memchr(body, ':', bn)) return fail(p, p->line, "dates and times are not supported");
        if (memchr(body, '.', bn) || memchr(body, 'e', bn) || memchr(body, 'E', bn))
                return fail(p, p->line, "floats are not supported: use an integer");
        if (memchr(body, '-', bn) || memchr(body, 'T', bn))
                return fail(p, p->line, "dates and times are not supported");
        uint64_t limit = negative ? (uint64_t) INT64_MAX + 1 : (uint64_t) INT64_MAX, v = 0;
        bool overflow = false;
        for (size_t k = 0; k < bn; k++) {
                char c = body[k];
                if (c == '_') {
                        if (k == 0 || k + 1 == bn || body[k - 1] == '_' || body[k + 1] < '0' || body[k + 1] > '9')
                                return fail(p, p->line, "an underscore in an integer must stand between two digits");
                        continue;
                }
                if (c < '0' || c > '9')
                        return fail(p, p->line, "unsupported value: only strings, integers, arrays and true/false are supported");
                unsigned d = (unsigned) (c - '0');
                if (v > (limit - d) / 10) overflow = true;
                else v = v * 10 + d;
        }
        if (bn > 1 && body[0] == '0') return fail(p, p->line, "leading zeros are not allowed in an integer");
        if (overflow)
                return fail(p, p->line, "integer out of range (from -9223372036854775808 to 9223372036854775807)");
        int64_t value = negative ? (v == (uint64_t) INT64_MAX + 1 ? INT64_MIN : -(int64_t) v) : (int64_t) v;
        *ret = json_object_new_int64(value);
        if (!*ret) {
                p->oom = true;
                return -ENOMEM;
        }
        p->pos = end;
        return 0;
}

static int parse_array(parser *p, json_object **ret) {
        unsigned start_line = p->line;
        _cleanup_json_ json_object *arr = json_object_new_array();
        if (!arr) {
                p->oom = true;
                return -ENOMEM;
        }
        p->pos++; /* [ */
        int r;
        for (;;) {
                if ((r = skip_ws_comments_newlines(p)) < 0) return r;
                int c = peek(p);
                if (c < 0) return fail(p, start_line, "unterminated array");
                if (c == ']') {
                        p->pos++;
                        break;
                }
                if (c == '[') return fail(p, p->line, "nested arrays are not supported");
                json_object *s = NULL;
                if (c == '"' || c == '\'') r = parse_string(p, &s);
                else if (looks_numeric(p)) r = parse_number(p, &s);
                else return fail(p, p->line, "array elements must be strings or integers");
                if (r < 0) return r;
                if (json_object_array_add(arr, s) < 0) {
                        json_object_put(s);
                        p->oom = true;
                        return -ENOMEM;
                }
                if ((r = skip_ws_comments_newlines(p)) < 0) return r;
                c = peek(p);
                if (c == ',') {
                        p->pos++;
                        continue;
                }
                if (c == ']') {
                        p->pos++;
                        break;
                }
                if (c < 0) return fail(p, start_line, "unterminated array");
                return fail(p, p->line, "expected , or ] in an array");
        }
        *ret = TAKE_PTR(arr);
        return 0;
}

static int parse_value(parser *p, json_object **ret) {
        int c = peek(p);
        if (c == '"' || c == '\'') return parse_string(p, ret);
        if (c == '[') return parse_array(p, ret);
        for (int b = 0; b < 2; b++) {
                const char *word = b ? "true" : "false";
                size_t n = strlen(word);
                if (p->pos + n <= p->len && memcmp(p->s + p->pos, word, n) == 0 && !is_bare_key_char(peek_at(p, n))) {
                        p->pos += n;
                        *ret = json_object_new_boolean(b);
                        if (!*ret) {
                                p->oom = true;
                                return -ENOMEM;
                        }
                        return 0;
                }
        }
        if (c < 0 || newline_len(p) || c == '#') return fail(p, p->line, "missing value after =");
        if (c == '{') return fail(p, p->line, "inline tables are not supported");
        if (looks_numeric(p)) return parse_number(p, ret);
        return fail(p, p->line, "unsupported value: only strings, integers, arrays and true/false are supported");
}

int toml_parse(const char *text, size_t len, json_object **ret_table, json_object **ret_lines, unsigned *ret_line,
               char **reason) {
        parser p = { .s = text, .len = len, .line = 1 };
        _cleanup_json_ json_object *table = json_object_new_object(), *lines = json_object_new_object();
        int r = 0;
        if (!table || !lines) return -ENOMEM;

        size_t bad = utf8_invalid_at((const unsigned char *) text, len);
        if (bad < len) {
                unsigned line = 1;
                for (size_t i = 0; i < bad; i++)
                        if (text[i] == '\n') line++;
                r = fail(&p, line, "not valid UTF-8");
                goto out;
        }

        while (p.pos < p.len) {
                skip_ws(&p);
                int c = peek(&p);
                if (c < 0) break;
                size_t nl = newline_len(&p);
                if (nl) {
                        skip_newline(&p, nl);
                        continue;
                }
                if (c == '#') {
                        if ((r = skip_comment(&p)) < 0 || (r = expect_eol(&p)) < 0) goto out;
                        continue;
                }
                if (c == '[') {
                        r = fail(&p, p.line, "tables are not supported: the file is a list of key = value lines");
                        goto out;
                }
                if (c == '"' || c == '\'') {
                        r = fail(&p, p.line, "quoted keys are not supported");
                        goto out;
                }
                size_t start = p.pos;
                while (is_bare_key_char(peek(&p))) p.pos++;
                if (p.pos == start) {
                        r = fail(&p, p.line, "expected a key");
                        goto out;
                }
                unsigned key_line = p.line;
                _cleanup_free_ char *key = strndup(text + start, p.pos - start);
                if (!key) {
                        r = -ENOMEM;
                        goto out;
                }
                skip_ws(&p);
                if (peek(&p) == '.') {
                        r = fail(&p, p.line, "dotted keys are not supported");
                        goto out;
                }
                if (peek(&p) != '=') {
                        r = fail(&p, p.line, "expected = after the key %s", key);
                        goto out;
                }
                p.pos++;
                skip_ws(&p);
                json_object *v = NULL;
                if ((r = parse_value(&p, &v)) < 0) goto out;
                if (json_object_object_get_ex(table, key, NULL)) {
                        json_object_put(v);
                        r = fail(&p, key_line, "duplicate key %s", key);
                        goto out;
                }
                if (json_object_object_add(table, key, v) < 0) {
                        json_object_put(v);
                        r = -ENOMEM;
                        goto out;
                }
                if (json_add_int(lines, key, key_line) < 0) {
                        r = -ENOMEM;
                        goto out;
                }
                if ((r = expect_eol(&p)) < 0) goto out;
        }
out:
        if (p.oom || r == -ENOMEM) {
                free(p.err_msg);
                return -ENOMEM;
        }
        if (r < 0) {
                *ret_line = p.err_line;
                *reason = p.err_msg;
                return -EINVAL;
        }
        *ret_table = TAKE_PTR(table);
        *ret_lines = TAKE_PTR(lines);
        return 0;
}

