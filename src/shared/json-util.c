#include "json-util.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

json_tokener *json_strict_tokener_new_depth(int depth) {
        json_tokener *tok = json_tokener_new_ex(depth);
        if (!tok) return NULL;
        /* frames are UTF-8 JSON: invalid UTF-8 is a parse error. Trailing
         * characters are json-c's to allow and ours to refuse, so that a
         * complete value followed by more reads json_tokener_success. */
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8 | JSON_TOKENER_ALLOW_TRAILING_CHARS);
        return tok;
}

json_tokener *json_strict_tokener_new(void) { return json_strict_tokener_new_depth(64); }

/* Whether buf[i], a digit outside strings, starts a number's integer part
 * (after an optional '-'): not a later digit, nor one of a fraction or an
 * exponent ("1e-05" may have leading zeros there). */
static bool number_starts_at(const char *buf, size_t i) {
        if (i > 0 && buf[i - 1] == '-') i--;
        if (i == 0) return true;
        char p = buf[i - 1];
        return !((p >= '0' && p <= '9') || p == '.' || p == 'e' || p == 'E' || p == '+' || p == '-');
}

/* What json-c's strict mode accepts but JSON (RFC 8259, JSON.parse) does
 * not, in buf[0..len) of a value json-c parsed: outside strings, a character
 * that is no structural one, whitespace, a number's or a literal's (its
 * single-quoted keys, NaN, Infinity), a '.' without a digit before and
 * after it ("1.", "-.5") and a leading zero ("01"); inside strings, a raw
 * control character or a sequence that is not well-formed UTF-8 (json-c
 * lets overlong forms, surrogates and values past U+10FFFF through).
 * json_tokener_success when there is none. */
static enum json_tokener_error json_extension_check(const char *buf, size_t len) {
        /* the bytes allowed outside strings, as a table: this runs over every
         * line of every log, so no strchr per byte */
        static bool outside[256];
        static bool outside_ready;
        if (!outside_ready) {
                for (const char *p = "{}[],: \t\r\n0123456789+-.eEtrufalsn"; *p; p++) outside[(unsigned char) *p] = true;
                outside_ready = true;
        }
        bool in_string = false;
        for (size_t i = 0; i < len;) {
                unsigned char c = (unsigned char) buf[i];
                if (!in_string) {
                        if (c == '"') in_string = true;
                        else if (c == '.' && !(i + 1 < len && buf[i + 1] >= '0' && buf[i + 1] <= '9' && i > 0 &&
                                               buf[i - 1] >= '0' && buf[i - 1] <= '9'))
                                return json_tokener_error_parse_number;
                        else if (c == '0' && i + 1 < len && buf[i + 1] >= '0' && buf[i + 1] <= '9' &&
                                 number_starts_at(buf, i))
                                return json_tokener_error_parse_number; /* a leading zero: "01", "-00" */
                        else if (!outside[c])
                                return json_tokener_error_parse_unexpected;
                        i++;
                        continue;
                }
                if (c == '"') {
                        in_string = false;
                        i++;
                } else if (c == '\\')
                        i += 2; /* json-c checked the escape */
                else if (c < 0x20)
                        return json_tokener_error_parse_string;
                else if (c < 0x80)
                        i++; /* ASCII: nothing to decode */
                else {
                        Utf8Char u = utf8_decode(buf + i, len - i);
                        if (u.status != UTF8_VALID) return json_tokener_error_parse_utf8_string;
                        i += u.len;
                }
        }
        return json_tokener_success;
}

int json_parse_strict_ex(json_tokener *tok, const char *buf, size_t len, json_object **ret,
                         enum json_tokener_error *ret_error) {
        if (ret_error) *ret_error = json_tokener_error_size;
        if (len > INT_MAX) return -EBADMSG;
        json_tokener_reset(tok);
        json_object *obj = json_tokener_parse_ex(tok, buf, (int) len);
        enum json_tokener_error err = json_tokener_get_error(tok);
        size_t used = json_tokener_get_parse_end(tok);
        if (!obj && err == json_tokener_continue) {
                /* a bare number or literal at the end of input (JSON.parse("42")),
                 * or only whitespace: feed the terminating NUL so json-c
                 * finishes or reports it */
                obj = json_tokener_parse_ex(tok, "", 1);
                err = json_tokener_get_error(tok);
                used = len;
        }
        if (ret_error) *ret_error = err;
        if (err != json_tokener_success) {
                if (obj) json_object_put(obj);
                return -EBADMSG;
        }
        for (size_t i = used; i < len; i++)
                if (!strchr(" \t\r\n", buf[i])) {
                        json_object_put(obj);
                        return -EBADMSG;
                }
        err = json_extension_check(buf, used);
        if (ret_error) *ret_error = err;
        if (err != json_tokener_success) {
                json_object_put(obj);
                return -EBADMSG;
        }
        *ret = obj;
        return 0;
}

int json_parse_strict_with(json_tokener *tok, const char *buf, size_t len, json_object **ret) {
        if (memchr(buf, 0, len)) return -EBADMSG;
        return json_parse_strict_ex(tok, buf, len, ret, NULL);
}

int json_parse_strict(const char *buf, size_t len, json_object **ret) {
        if (memchr(buf, 0, len)) return -EBADMSG;
        json_tokener *tok = json_strict_tokener_new();
        if (!tok) return -ENOMEM;
        int r = json_parse_strict_with(tok, buf, len, ret);
        json_tokener_free(tok);
        return r;
}

const char *json_to_line(json_object *obj, size_t *ret_len) {
        size_t len = 0;
        const char *s = json_object_to_json_string_length(
                obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
        if (ret_len) *ret_len = len;
        return s;
}

char *js_number_format(double d, char buf[static 32]) {
        if (isnan(d) || isinf(d)) {
                strcpy(buf, "null");
                return buf;
        }
        if (d == 0) {
                strcpy(buf, "0");
                return buf;
        }
        /* Shortest precision that round-trips. */
        char tmp[40];
        int prec;
        for (prec = 1; prec <= 17; prec++) {
                snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
                if (strtod(tmp, NULL) == d) break;
        }
        /* tmp = [-]D.DDDDe[+-]XX ; split digits and exponent */
        bool neg = tmp[0] == '-';
        const char *p = tmp + (neg ? 1 : 0);
        char digits[32];
        size_t nd = 0;
        for (; *p && *p != 'e'; p++)
                if (*p != '.') digits[nd++] = *p;
        digits[nd] = 0;
        int exp10 = atoi(p + 1); /* value = 0.d1d2.. * 10^(exp10+1) */
        while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = 0;
        int n = exp10 + 1; /* JS spec: k = nd digits, n = position of decimal point */
        char *o = buf;
        if (neg) *o++ = '-';
        int k = (int) nd;
        if (k <= n && n <= 21) {
                memcpy(o, digits, (size_t) k);
                o += k;
                for (int i = 0; i < n - k; i++) *o++ = '0';
        } else if (0 < n && n <= 21) {
                memcpy(o, digits, (size_t) n);
                o += n;
                *o++ = '.';
                memcpy(o, digits + n, (size_t) (k - n));
                o += k - n;
        } else if (-6 < n && n <= 0) {
                *o++ = '0';
                *o++ = '.';
                for (int i = 0; i < -n; i++) *o++ = '0';
                memcpy(o, digits, (size_t) k);
                o += k;
        } else {
                *o++ = digits[0];
                if (k > 1) {
                        *o++ = '.';
                        memcpy(o, digits + 1, (size_t) (k - 1));
                        o += k - 1;
                }
                o += sprintf(o, "e%c%d", n - 1 >= 0 ? '+' : '-', abs(n - 1));
        }
        *o = 0;
        return buf;
}

json_object *json_new_number(double d) {
        if (fabs(d) < 9007199254740992.0 && d == (double) (int64_t) d) return json_object_new_int64((int64_t) d);
        char buf[32];
        return json_object_new_double_s(d, js_number_format(d, buf));
}

const char *json_get_string(json_object *obj, const char *key) {
        json_object *v;
        if (!obj || !json_object_object_get_ex(obj, key, &v) || !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

json_object *json_get(json_object *obj, const char *key) {
        json_object *v = NULL;
        return obj && json_object_object_get_ex(obj, key, &v) ? v : NULL;
}

json_object *json_get_object(json_object *obj, const char *key) {
        json_object *v;
        if (!obj || !json_object_object_get_ex(obj, key, &v) || !json_object_is_type(v, json_type_object))
                return NULL;
        return v;
}

json_object *json_get_array(json_object *obj, const char *key) {
        json_object *v;
        if (!obj || !json_object_object_get_ex(obj, key, &v) || !json_object_is_type(v, json_type_array))
                return NULL;
        return v;
}

bool json_get_bool(json_object *obj, const char *key, bool def) {
        json_object *v;
        if (!obj || !json_object_object_get_ex(obj, key, &v) || !json_object_is_type(v, json_type_boolean))
                return def;
        return json_object_get_boolean(v);
}

bool json_get_int64(json_object *obj, const char *key, int64_t *ret) {
        json_object *v;
        if (!obj || !json_object_object_get_ex(obj, key, &v)) return false;
        if (json_object_is_type(v, json_type_int)) {
                *ret = json_object_get_int64(v);
                return true;
        }
        if (json_object_is_type(v, json_type_double)) {
                double d = json_object_get_double(v);
                if (fabs(d) < 9007199254740992.0 && d == (double) (int64_t) d) {
                        *ret = (int64_t) d;
                        return true;
                }
        }
        return false;
}

int json_add(json_object *obj, const char *key, json_object *v) {
        return json_object_object_add(obj, key, v) < 0 ? -ENOMEM : 0;
}
int json_add_string(json_object *obj, const char *key, const char *s) {
        return json_add(obj, key, s ? json_object_new_string(s) : NULL);
}
int json_add_int(json_object *obj, const char *key, int64_t v) {
        return json_add(obj, key, json_object_new_int64(v));
}
int json_add_bool(json_object *obj, const char *key, bool v) {
        return json_add(obj, key, json_object_new_boolean(v));
}
int json_add_null(json_object *obj, const char *key) { return json_add(obj, key, NULL); }

bool json_string_has_nul(json_object *s) {
        if (!s || !json_object_is_type(s, json_type_string)) return false;
        return (size_t) json_object_get_string_len(s) != strlen(json_object_get_string(s));
}

bool json_is_object(json_object *v) { return v && json_object_is_type(v, json_type_object); }

json_object *json_copy(json_object *v) {
        json_object *out = NULL;
        if (!v) return NULL;
        if (json_object_deep_copy(v, &out, NULL) < 0) return NULL;
        return out;
}

bool json_safe_integer(json_object *v, int64_t *ret) {
        if (json_object_is_type(v, json_type_int)) {
                int64_t i = json_object_get_int64(v);
                if (i > 9007199254740991LL || i < -9007199254740991LL) return false;
                *ret = i;
                return true;
        }
        if (json_object_is_type(v, json_type_double)) {
                double d = json_object_get_double(v);
                if (!(fabs(d) <= 9007199254740991.0) || d != (double) (int64_t) d) return false; /* NaN too */
                *ret = (int64_t) d;
                return true;
        }
        return false;
}

bool json_is_nonempty_string(json_object *v) {
        return v && json_object_is_type(v, json_type_string) && json_object_get_string_len(v) > 0 &&
               !json_string_has_nul(v);
}
