/* Reading canonical NDJSON task logs: result parsing (session id, tokens,
 * cost, the final message and the narration), the per-line failure
 * classifier and boot-failure detection (see logparse.h).
 *
 * Logs can be large (a chatty worker easily writes 100 MB), so every reader
 * here streams the file through one line buffer (line-buffer.h) in 64 KiB
 * reads and never holds the whole log in memory: what it holds is the
 * longest line, bounded by LOG_LINE_MAX, plus what the caller asked for
 * (the texts of the messages, for the result). One json-c tokener parses
 * every line of a file (json_parse_strict_with), and messages are found by
 * a hash of their ids, so the cost is linear in the log's size. */

#include "logparse.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <locale.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json-scan.h"
#include "json-util.h"
#include "line-buffer.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "utf8.h"

#define DETAIL_MAX_UNITS 500
#define BOOT_TAIL_BYTES (64 * 1024)

/* ---- small helpers ---- */

/* Byte length of the JavaScript whitespace character (String#trim's: the
 * ASCII ones, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F,
 * U+205F, U+3000, U+FEFF) at s[0..len), or 0. */
static size_t js_space_len(const char *s, size_t len) {
        if (len == 0) return 0;
        switch (s[0]) {
        case '\t': case '\n': case '\v': case '\f': case '\r': case ' ':
                return 1;
        }
        Utf8Char u = utf8_decode(s, len);
        if (u.status != UTF8_VALID) return 0;
        switch (u.cp) {
        case 0x00A0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000: case 0xFEFF:
                return u.len;
        }
        return u.cp >= 0x2000 && u.cp <= 0x200A ? u.len : 0;
}

bool log_line_is_blank(const char *s, size_t len) {
        size_t i = 0;
        while (i < len) {
                size_t n = js_space_len(s + i, len - i);
                if (n == 0) return false;
                i += n;
        }
        return true;
}

static char *detail_cap_n(const char *s, size_t len) {
        if (utf8_utf16_length(s, len) <= DETAIL_MAX_UNITS) return strndup(s, len);
        size_t n = utf8_prefix_utf16(s, len, DETAIL_MAX_UNITS - 1);
        char *out = malloc(n + sizeof("…"));
        if (!out) return NULL;
        memcpy(out, s, n);
        memcpy(out + n, "…", sizeof("…"));
        return out;
}

char *failure_detail_cap(const char *s) {
        if (!s) return NULL;
        return detail_cap_n(s, strlen(s));
}

/* Length of the terminal escape sequence at s[0..len) (ESC [ params final,
 * ESC ] ... BEL/ST, or ESC + one byte), 0 if s does not start with ESC. */
static size_t escape_len(const char *s, size_t len) {
        if (len == 0 || s[0] != '\033') return 0;
        if (len == 1) return 1;
        size_t i = 2;
        if (s[1] == '[') {
                /* CSI: parameter and intermediate bytes 0x20–0x3F, final byte 0x40–0x7E */
                while (i < len && (unsigned char) s[i] >= 0x20 && (unsigned char) s[i] <= 0x3F) i++;
                return i < len && (unsigned char) s[i] >= 0x40 && (unsigned char) s[i] <= 0x7E ? i + 1 : i;
        }
        if (s[1] == ']') {
                /* OSC: up to BEL or ESC \ */
                for (; i < len; i++) {
                        if (s[i] == '\a') return i + 1;
                        if (s[i] == '\033' && i + 1 < len && s[i + 1] == '\\') return i + 2;
                }
                return len;
        }
        return 2;
}

/* s[0..len) without terminal escape sequences (OpenCode colours its
 * `Error:` lines), malloc'd and NUL-terminated; its length in *ret_len. */
static char *strip_escapes(const char *s, size_t len, size_t *ret_len) {
        char *out = malloc(len + 1);
        if (!out) return NULL;
        size_t o = 0;
        for (size_t i = 0; i < len;) {
                size_t e = escape_len(s + i, len - i);
                if (e > 0) {
                        i += e;
                        continue;
                }
                out[o++] = s[i++];
        }
        out[o] = 0;
        *ret_len = o;
        return out;
}

/* The one reader of every function here: lines of the log at path, in order,
 * each without its '\n'; a trailing fragment without '\n' is a line too.
 * A line longer than LOG_LINE_MAX — the shim writes none (log-pipe.h: stdout
 * is logged in 64 MiB pieces); only the worker's raw stderr can hold one —
 * is dropped with a warning naming its size, never cut short and parsed. */
#define LOG_LINE_MAX ((size_t) 128 << 20)
/* How deep a log line's JSON may nest: JSON.parse, the original's reader,
 * has no limit, json-c's default tokener stops at 63 levels, and a worker
 * decides what its events hold. json-c's stack costs 32 bytes a level. */
#define LOG_JSON_DEPTH_MAX 4096
/* json_scan follows exactly as deep: a line it finds too deep is one the
 * tokener refuses, so it is not JSON without being built */
_Static_assert(JSON_SCAN_DEPTH_MAX == LOG_JSON_DEPTH_MAX, "json_scan and the log's tokener must agree on depth");
#define LOG_READ_CHUNK ((size_t) 64 << 10)

typedef struct log_reader {
        int fd;
        const char *path;
        LineBuffer lb;
        json_tokener *tok;
        bool eof;
} log_reader;

/* 0 and a reader, -ENOENT for a missing log, -errno, -ENOMEM. */
static int log_reader_open(log_reader *r, const char *path) {
        *r = (log_reader) { .fd = -1, .path = path };
        line_buffer_init(&r->lb, LOG_LINE_MAX, 0);
        r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (r->fd < 0) return -errno;
        r->tok = json_strict_tokener_new_depth(LOG_JSON_DEPTH_MAX);
        if (!r->tok) {
                r->fd = safe_close(r->fd);
                return -ENOMEM;
        }
        return 0;
}

static void log_reader_close(log_reader *r) {
        r->fd = safe_close(r->fd);
        line_buffer_done(&r->lb);
        if (r->tok) json_tokener_free(r->tok);
        r->tok = NULL;
}

/* Next line: 1 with *ret_line (valid until the next call), 0 at the end,
 * -errno on a read error, -ENOMEM. */
static int log_reader_next(log_reader *r, const char **ret_line, size_t *ret_len) {
        for (;;) {
                int k = line_buffer_pop(&r->lb, ret_line, ret_len);
                if (k == LINE_BUFFER_LINE) return 1;
                if (k == -ENOBUFS) {
                        log_warning("%s: a line over %zu bytes: skipped", r->path, LOG_LINE_MAX);
                        line_buffer_skip_line(&r->lb);
                        continue;
                }
                if (r->eof) return line_buffer_pop_rest(&r->lb, ret_line, ret_len);
                ssize_t n = line_buffer_read(&r->lb, r->fd, LOG_READ_CHUNK);
                if (n == -EINTR) continue;
                if (n < 0) return (int) n;
                if (n == 0) r->eof = true;
        }
}

static bool scan_is(const char *line, const JsonScanValue *v, const char *word) {
        return v->type == JSON_SCAN_STRING && !v->escaped && v->len == strlen(word) &&
               memcmp(line + v->offset, word, v->len) == 0;
}

/* Whether the readers may settle a line with json_scan alone (tests turn it
 * off to compare them with json-c). */
static bool summarize_fast_paths = true;

void log_summarize_use_fast_paths(bool on) { summarize_fast_paths = on; }

/* What json_scan can say of a line for the classifier without json-c:
 * 1 and *ret_json when it settles it (not JSON, or JSON that is no "error"
 * event: nothing to classify as JSON), 0 when json-c must build it. */
static int classify_scan(const char *line, size_t len, bool *ret_json) {
        static const char *const keys[] = {"type", NULL};
        JsonScanValue v[1];
        JsonScanType top = JSON_SCAN_NONE;
        switch (json_scan(line, len, keys, &top, v)) {
        case JSON_SCAN_INVALID:
        case JSON_SCAN_TOO_DEEP:
                *ret_json = false;
                return 1;
        case JSON_SCAN_VALID:
                if (top == JSON_SCAN_OBJECT && v[0].type == JSON_SCAN_STRING &&
                    (v[0].escaped || scan_is(line, &v[0], "error")))
                        return 0;
                *ret_json = true;
                return 1;
        default:
                return 0;
        }
}

/* Parse one line strictly, with the reader's tokener when there is one. */
static int parse_line(json_tokener *tok, const char *line, size_t len, json_object **ret) {
        return tok ? json_parse_strict_with(tok, line, len, ret) : json_parse_strict(line, len, ret);
}

static bool json_is_number(json_object *v) {
        return v && (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double));
}

/* ---- classifier ----
 * A non-JSON line is tested against the buckets below in their order, the
 * first match wins; a JSON line is a failure only when its type is "error"
 * (its message, else the whole event, tested the same way; with no match
 * its reason is named after its error.name); text events are never
 * scanned. */

static const struct {
        const char *name;
        const char *pattern;
} buckets[] = {
        /* POSIX ERE; "\s" inside a bracket is not an escape in POSIX, hence
         * [:space:]. "\b" is a GNU extension that glibc's regcomp accepts. */
        { "payment_required",
          "insufficient_quota|payment.?required|\\bbilling\\b|status(.?code)?\"?[:[:space:]=]+402\\b" },
        /* beyond the original's patterns: OpenAI's "Incorrect API key
         * provided", Anthropic's "authentication_error" body and JSON
         * "statusCode":401, as the real pi and OpenCode report them */
        { "authentication_failed",
          "unauthorized|(invalid|incorrect).api.?key|authentication.?(failed|error)|"
          "status(.?code)?\"?[:[:space:]=]+401\\b|no api key" },
        { "rate_limited",
          "rate.?limit|usage.?limit|too many requests|\\b429\\b|\\bquota\\b" },
};

/* The bucket regexes, compiled on first use: most log lines are JSON events
 * that are not errors and never need them. */
typedef struct classifier {
        regex_t re[ELEMENTSOF(buckets)];
        size_t n_compiled;
        bool ready;
        locale_t c_locale;
} classifier;

/* All regex work happens in the C locale so that case folding and "\b" word
 * characters are ASCII-only, as in a JavaScript /i regex without /u, however
 * the calling program set its locale. */
static void classifier_done(classifier *c) {
        if (c->c_locale) {
                locale_t old = uselocale(c->c_locale);
                for (size_t i = 0; i < c->n_compiled; i++) regfree(&c->re[i]);
                uselocale(old);
                freelocale(c->c_locale);
        }
        *c = (classifier) {};
}

static int classifier_ensure(classifier *c) {
        if (c->ready) return 0;
        classifier_done(c);
        c->c_locale = newlocale(LC_ALL_MASK, "C", (locale_t) 0);
        if (!c->c_locale) return -ENOMEM;
        locale_t old = uselocale(c->c_locale);
        int r = 0;
        for (size_t i = 0; i < ELEMENTSOF(buckets); i++) {
                /* REG_NEWLINE: "." does not match '\n', as in JavaScript. */
                if (regcomp(&c->re[i], buckets[i].pattern, REG_EXTENDED | REG_ICASE | REG_NOSUB | REG_NEWLINE) != 0) {
                        r = -ENOMEM;
                        break;
                }
                c->n_compiled++;
        }
        uselocale(old);
        if (r < 0) {
                classifier_done(c);
                return r;
        }
        c->ready = true;
        return 0;
}

/* Index of the first bucket whose patterns match text[0..len), -1 if none, or -ENOMEM. */
static int classifier_match(classifier *c, const char *text, size_t len, int *ret_bucket) {
        int r = classifier_ensure(c);
        if (r < 0) return r;
        locale_t old = uselocale(c->c_locale);
        int hit = -1;
        for (size_t i = 0; i < c->n_compiled && hit < 0; i++) {
                regmatch_t m = { .rm_so = 0, .rm_eo = (regoff_t) len };
                if (regexec(&c->re[i], text, 1, &m, REG_STARTEND) == 0) hit = (int) i;
        }
        uselocale(old);
        *ret_bucket = hit;
        return 0;
}

static char *bucket_for(const char *prefix, const char *bucket) {
        return prefix ? strdup_printf("%s_%s", prefix, bucket) : strdup(bucket);
}

/* "<structured_prefix>_<name>" with runs of non-[A-Za-z0-9] → "_", lowercased. */
static char *structured_reason(const char *structured_prefix, const char *name) {
        size_t plen = structured_prefix ? strlen(structured_prefix) + 1 : 0;
        char *out = malloc(plen + strlen(name) + 1);
        if (!out) return NULL;
        char *o = out;
        if (structured_prefix) o = stpcpy(stpcpy(o, structured_prefix), "_");
        bool in_run = false;
        for (const char *p = name; *p; p++) {
                char ch = *p;
                bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
                if (alnum) {
                        *o++ = (ch >= 'A' && ch <= 'Z') ? (char) (ch - 'A' + 'a') : ch;
                        in_run = false;
                } else if (!in_run) {
                        *o++ = '_';
                        in_run = true;
                }
        }
        *o = 0;
        return out;
}

static int classify_with(classifier *c, json_tokener *tok, const char *line, size_t len, const char *prefix,
                         const char *structured_prefix, bool *ret_json, char **ret_reason, char **ret_detail) {
        _cleanup_json_ json_object *evt = NULL;
        _cleanup_free_ char *reason = NULL, *detail = NULL;

        bool is_json;
        if (!summarize_fast_paths || classify_scan(line, len, &is_json) == 0)
                is_json = parse_line(tok, line, len, &evt) >= 0;
        else if (is_json) {
                if (ret_json) *ret_json = true;
                return 0; /* JSON, no error event */
        }
        if (ret_json) *ret_json = is_json;
        if (!is_json) {
                /* Not JSON: raw stderr, plain-text worker output, matched
                 * and reported without its terminal colour codes. */
                size_t plen = 0;
                _cleanup_free_ char *plain = strip_escapes(line, len, &plen);
                if (!plain) return -ENOMEM;
                int b, r = classifier_match(c, plain, plen, &b);
                if (r < 0) return r;
                if (b < 0) return 0;
                reason = bucket_for(prefix, buckets[b].name);
                detail = detail_cap_n(plain, plen);
        } else {
                /* JSON: only type:"error" events are failures; text events
                 * and everything else are never scanned. */
                if (!json_is_object(evt) || !streq_ptr(json_get_string(evt, "type"), "error")) return 0;
                const char *text;
                size_t text_len;
                json_object *m;
                bool serialized = false;
                if (json_object_object_get_ex(evt, "message", &m) && json_object_is_type(m, json_type_string)) {
                        text = json_object_get_string(m);
                        text_len = (size_t) json_object_get_string_len(m);
                } else {
                        text = json_to_line(evt, &text_len);
                        serialized = true;
                }
                if (!text) return -ENOMEM;

                int b, r = classifier_match(c, text, text_len, &b);
                if (r < 0) return r;
                json_object *error = json_get_object(evt, "error");
                const char *dmsg = json_get_string(json_get_object(error, "data"), "message");
                if (b >= 0) {
                        reason = bucket_for(prefix, buckets[b].name);
                        /* The event's message; when it has none, the provider's
                         * own message (error.data.message) rather than the
                         * serialized event that was scanned (OpenCode's
                         * APIError has no top-level message). */
                        detail = serialized && !isempty(dmsg) ? failure_detail_cap(dmsg) : detail_cap_n(text, text_len);
                } else {
                        const char *name = json_get_string(error, "name");
                        reason = structured_reason(structured_prefix, isempty(name) ? "error" : name);
                        detail = dmsg ? failure_detail_cap(dmsg) : detail_cap_n(text, text_len);
                }
        }
        if (!reason || !detail) return -ENOMEM;
        if (ret_reason) *ret_reason = TAKE_PTR(reason);
        if (ret_detail) *ret_detail = TAKE_PTR(detail);
        return 1;
}

int log_classify_line(const char *line, size_t len, const char *prefix, const char *structured_prefix,
                      char **ret_reason, char **ret_detail) {
        /* the log's depth bound, as every reader of it has */
        json_tokener *tok = json_strict_tokener_new_depth(LOG_JSON_DEPTH_MAX);
        if (!tok) return -ENOMEM;
        classifier c = {};
        int r = classify_with(&c, tok, line, len, prefix, structured_prefix, NULL, ret_reason, ret_detail);
        classifier_done(&c);
        json_tokener_free(tok);
        return r;
}

struct LogClassifier {
        classifier c;
        json_tokener *tok;
};

int log_classifier_new(LogClassifier **ret) {
        LogClassifier *lc = calloc(1, sizeof *lc);
        if (!lc) return -ENOMEM;
        lc->tok = json_strict_tokener_new_depth(LOG_JSON_DEPTH_MAX);
        if (!lc->tok) {
                free(lc);
                return -ENOMEM;
        }
        *ret = lc;
        return 0;
}

LogClassifier *log_classifier_free(LogClassifier *lc) {
        if (!lc) return NULL;
        classifier_done(&lc->c);
        json_tokener_free(lc->tok);
        free(lc);
        return NULL;
}

int log_classifier_line(LogClassifier *lc, const char *line, size_t len, const char *prefix,
                        const char *structured_prefix, bool *ret_json, char **ret_reason, char **ret_detail) {
        return classify_with(&lc->c, lc->tok, line, len, prefix, structured_prefix, ret_json, ret_reason, ret_detail);
}

int log_classify_file(const char *path, const char *prefix, const char *structured_prefix,
                      char **ret_reason, char **ret_detail) {
        log_reader lr;
        int r = log_reader_open(&lr, path);
        if (r < 0) {
                log_reader_close(&lr);
                return r == -ENOENT ? 0 : r;
        }

        classifier c = {};
        for (;;) {
                const char *line;
                size_t n;
                r = log_reader_next(&lr, &line, &n);
                if (r <= 0) break;
                r = classify_with(&c, lr.tok, line, n, prefix, structured_prefix, NULL, ret_reason, ret_detail);
                if (r != 0) break;
        }
        classifier_done(&c);
        log_reader_close(&lr);
        return r;
}

/* ---- boot failure: a worker that crashed with a nonzero exit before it
 * wrote any JSON line (see log_boot_failure) ---- */

static bool line_parses_as_json(json_tokener *tok, const char *line, size_t len) {
        if (summarize_fast_paths) {
                JsonScanResult k = json_scan(line, len, NULL, NULL, NULL);
                if (k != JSON_SCAN_UNSURE) return k == JSON_SCAN_VALID;
        }
        json_object *o = NULL;
        if (parse_line(tok, line, len, &o) < 0) return false;
        json_object_put(o);
        return true;
}

/* /^error\b[:\s]/i — "error" followed by ':' or JavaScript whitespace (the
 * word boundary always holds before such a character). */
static bool is_error_line(const char *s, size_t len) {
        /* leading colour codes (OpenCode's "\033[91m\033[1mError: \033[0m…") */
        for (size_t e; (e = escape_len(s, len)) > 0;) s += e, len -= e;
        if (len < 6 || strncasecmp(s, "error", 5) != 0) return false;
        return s[5] == ':' || js_space_len(s + 5, len - 5) > 0;
}

/* How telling a boot-failure line is: 2 an "error:" line, 1 a line naming
 * an errno (EROFS: ..., ENOENT, "Read-only file system") — the cause, where
 * the runtime's own banner (Bun v1.3.14 ...) is printed last — else 0. */
static int telling_rank(const char *s, size_t len) {
        if (is_error_line(s, len)) return 2;
        static const char *const causes[] = {"EROFS", "ENOENT", "EACCES", "EPERM", "ENOSPC", "Read-only file system",
                                             "No such file or directory", "Permission denied"};
        for (size_t i = 0; i < ELEMENTSOF(causes); i++)
                if (memmem(s, len, causes[i], strlen(causes[i]))) return 1;
        return 0;
}

static int boot_failure_pass1(log_reader *lr) {
        /* Pass 1: any parseable line anywhere in the log is evidence the worker started. */
        for (;;) {
                const char *line;
                size_t n;
                int r = log_reader_next(lr, &line, &n);
                if (r <= 0) return r;
                if (line_parses_as_json(lr->tok, line, n)) return 1;
        }
}

int log_boot_failure(const char *path, char **ret_detail) {
        log_reader lr;
        int r = log_reader_open(&lr, path);
        if (r >= 0) r = boot_failure_pass1(&lr);
        _cleanup_close_ int fd = TAKE_FD(lr.fd);
        log_reader_close(&lr);
        if (r != 0) return r == -ENOENT || r > 0 ? 0 : r;

        /* Pass 2: the last 64 KiB. */
        struct stat st;
        if (fstat(fd, &st) < 0) return -errno;
        off_t size = st.st_size;
        off_t start = size > BOOT_TAIL_BYTES ? size - BOOT_TAIL_BYTES : 0;
        size_t want = (size_t) (size - start);
        _cleanup_free_ char *tail = malloc(want + 1);
        if (!tail) return -ENOMEM;
        size_t got = 0;
        while (got < want) {
                ssize_t k = pread(fd, tail + got, want - got, start + (off_t) got);
                if (k < 0) {
                        if (errno == EINTR) continue;
                        return -errno;
                }
                if (k == 0) break;
                got += (size_t) k;
        }
        tail[got] = 0;

        const char *p = tail, *end = tail + got;
        if (start > 0) {
                /* The first line is partial: drop it. */
                const char *nl = memchr(p, '\n', got);
                p = nl ? nl + 1 : end;
        }
        _cleanup_free_ char *best = NULL;
        size_t best_len = 0;
        int best_rank = -1;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t l = nl ? (size_t) (nl - p) : (size_t) (end - p);
                if (!log_line_is_blank(p, l) && !line_parses_as_json(NULL, p, l)) {
                        size_t cl;
                        char *clean = strip_escapes(p, l, &cl);
                        if (!clean) return -ENOMEM;
                        int rank = log_line_is_blank(clean, cl) ? -1 : telling_rank(clean, cl);
                        if (rank >= 0 && rank >= best_rank) {
                                free(best);
                                best = clean;
                                best_len = cl;
                                best_rank = rank;
                        } else
                                free(clean);
                }
                p = nl ? nl + 1 : end;
        }
        if (!best) return 0;
        char *detail = detail_cap_n(best, best_len);
        if (!detail) return -ENOMEM;
        if (ret_detail)
                *ret_detail = detail;
        else
                free(detail);
        return 1;
}

/* ---- result parsing: one pass over the log (see log_summarize_file) ---- */

/* One message's text parts, keyed like a JavaScript Map key: "s:<string>"
 * for a string messageID, "j:<json>" for any other JSON value, NULL for a
 * missing one (undefined is its own key). Messages stay in first-seen order
 * (the narration's order); an open-addressing hash of their keys finds one
 * in O(1) — a long worker's log has tens of thousands of messages, and a
 * linear scan per text event made the result quadratic in them. */
typedef struct message_texts {
        char *key;
        size_t key_len;
        uint64_t hash;
        char *text;
        size_t len, cap;
} message_texts;

#define NO_MESSAGE SIZE_MAX

typedef struct summarizer {
        message_texts *msgs;
        size_t n_msgs, cap_msgs;
        size_t *slots;    /* index into msgs, NO_MESSAGE when free; n_slots a power of two */
        size_t n_slots;
        size_t last_hit;  /* NO_MESSAGE or the message of the last text event */
        bool any_text;
        bool final_set;   /* finalMessageId is neither undefined nor null */
        char *final_key;
        size_t final_key_len;
        char *keybuf;     /* scratch for the key of the current event */
        size_t keybuf_cap;
        char *fast_text;  /* scratch for summarize_fast's decoded text */
        size_t fast_text_cap;
        JsonScanMember *members; /* scratch for the members of a step's tokens */
        size_t members_cap;
        char *member_key;        /* scratch for one of their keys */
        size_t member_key_cap;
        struct key_slot *key_set; /* KEY_SET_SLOTS slots: the keys a wide step's tokens are checked against */
        uint32_t key_set_gen;     /* a slot of another generation is free */
} summarizer;

#define SUMMARIZER_INIT { .last_hit = NO_MESSAGE }

static void summarizer_done(summarizer *s) {
        for (size_t i = 0; i < s->n_msgs; i++) {
                free(s->msgs[i].key);
                free(s->msgs[i].text);
        }
        free(s->msgs);
        free(s->slots);
        free(s->final_key);
        free(s->keybuf);
        free(s->fast_text);
        free(s->members);
        free(s->member_key);
        free(s->key_set);
}

/* FNV-1a 64 over the key bytes; the undefined key (NULL) has its own hash. */
static uint64_t key_hash(const char *key, size_t len) {
        if (!key) return 0x9e3779b97f4a7c15ULL;
        uint64_t h = 0xcbf29ce484222325ULL;
        for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char) key[i]) * 0x100000001b3ULL;
        return h;
}

static bool key_eq(const message_texts *m, const char *key, size_t len, uint64_t hash) {
        if (!m->key || !key) return !m->key && !key;
        return m->hash == hash && m->key_len == len && memcmp(m->key, key, len) == 0;
}

/* Key of the messageID member of part (see message_texts) into s->keybuf;
 * *ret NULL = undefined. The key is valid until the next call. */
static int message_key(summarizer *s, json_object *part, const char **ret, size_t *ret_len) {
        json_object *v;
        *ret = NULL;
        *ret_len = 0;
        if (!json_object_object_get_ex(part, "messageID", &v)) return 0;
        const char *body;
        size_t n;
        char tag;
        if (v && json_object_is_type(v, json_type_string)) {
                tag = 's';
                body = json_object_get_string(v);
                n = (size_t) json_object_get_string_len(v);
        } else {
                tag = 'j';
                body = v ? json_to_line(v, &n) : "null";
                if (!body) return -ENOMEM;
                if (!v) n = 4;
                else if (!memchr(body, 0, n)) n = strlen(body); /* as "%s" printed it */
        }
        if (n + 3 > s->keybuf_cap) {
                size_t nc = s->keybuf_cap ? s->keybuf_cap : 64;
                while (nc < n + 3) nc *= 2;
                char *nb = realloc(s->keybuf, nc);
                if (!nb) return -ENOMEM;
                s->keybuf = nb;
                s->keybuf_cap = nc;
        }
        s->keybuf[0] = tag;
        s->keybuf[1] = ':';
        memcpy(s->keybuf + 2, body, n);
        s->keybuf[n + 2] = 0;
        /* a key is a C string (the original strdup'ed it): a string id with
         * an escaped NUL ends there */
        *ret = s->keybuf;
        *ret_len = strlen(s->keybuf);
        return 0;
}

static size_t summarizer_find(summarizer *s, const char *key, size_t len, uint64_t hash) {
        if (s->last_hit != NO_MESSAGE && key_eq(&s->msgs[s->last_hit], key, len, hash)) return s->last_hit;
        if (s->n_slots == 0) return NO_MESSAGE;
        for (size_t i = (size_t) hash & (s->n_slots - 1);; i = (i + 1) & (s->n_slots - 1)) {
                size_t k = s->slots[i];
                if (k == NO_MESSAGE) return NO_MESSAGE;
                if (key_eq(&s->msgs[k], key, len, hash)) return k;
        }
}

static void slots_insert(size_t *slots, size_t n_slots, uint64_t hash, size_t idx) {
        size_t i = (size_t) hash & (n_slots - 1);
        while (slots[i] != NO_MESSAGE) i = (i + 1) & (n_slots - 1);
        slots[i] = idx;
}

/* Keep the table at most half full. */
static int slots_grow(summarizer *s) {
        if ((s->n_msgs + 1) * 2 <= s->n_slots) return 0;
        size_t n = s->n_slots ? s->n_slots * 2 : 64;
        size_t *slots = malloc(n * sizeof(*slots));
        if (!slots) return -ENOMEM;
        for (size_t i = 0; i < n; i++) slots[i] = NO_MESSAGE;
        for (size_t k = 0; k < s->n_msgs; k++) slots_insert(slots, n, s->msgs[k].hash, k);
        free(s->slots);
        s->slots = slots;
        s->n_slots = n;
        return 0;
}

static int summarizer_add_text(summarizer *s, const char *key, size_t key_len, const char *text, size_t len) {
        uint64_t hash = key_hash(key, key_len);
        size_t idx = summarizer_find(s, key, key_len, hash);
        if (idx == NO_MESSAGE) {
                if (s->n_msgs == s->cap_msgs) {
                        size_t nc = s->cap_msgs ? s->cap_msgs * 2 : 8;
                        message_texts *nm = realloc(s->msgs, nc * sizeof(*nm));
                        if (!nm) return -ENOMEM;
                        s->msgs = nm;
                        s->cap_msgs = nc;
                }
                if (slots_grow(s) < 0) return -ENOMEM;
                char *kc = NULL;
                if (key && !(kc = strndup(key, key_len))) return -ENOMEM;
                idx = s->n_msgs++;
                s->msgs[idx] = (message_texts) { .key = kc, .key_len = key_len, .hash = hash };
                slots_insert(s->slots, s->n_slots, hash, idx);
        }
        message_texts *m = &s->msgs[idx];
        if (m->len + len + 1 > m->cap) {
                /* the first part exactly (most messages are one or few
                 * parts), then doubling */
                size_t nc = m->cap ? m->cap * 2 : len + 1;
                while (nc < m->len + len + 1) nc *= 2;
                char *nt = realloc(m->text, nc);
                if (!nt) return -ENOMEM;
                m->text = nt;
                m->cap = nc;
        }
        memcpy(m->text + m->len, text, len);
        m->len += len;
        m->text[m->len] = 0;

        s->last_hit = idx;
        s->any_text = true;
        return 0;
}

static double number_or_zero(json_object *v) { return json_is_number(v) ? json_object_get_double(v) : 0; }

/* x + y as a new JSON number; a missing or non-number side counts as 0.
 * Integers stay exact int64; anything else is a double (JavaScript "+"). */
static json_object *add_numbers(json_object *x, json_object *y) {
        bool xi = !json_is_number(x) || json_object_is_type(x, json_type_int);
        bool yi = !json_is_number(y) || json_object_is_type(y, json_type_int);
        if (xi && yi)
                return json_object_new_int64((json_is_number(x) ? json_object_get_int64(x) : 0) +
                                             (json_is_number(y) ? json_object_get_int64(y) : 0));
        return json_new_number(number_or_zero(x) + number_or_zero(y));
}

/* The most members a sum of tokens (or its cache) holds: a provider
 * reports a handful; a worker that invents a new one on every step would
 * grow the sum, and the result that carries it, with its log. Members past
 * the bound are left out. */
#define TOKENS_MEMBERS_MAX 64

/* In *o (an object of ours), each member of b set: replacing a member of
 * that name in place, else appended while o has fewer than
 * TOKENS_MEMBERS_MAX. What {...a, ...b} makes, at the cost of b's members
 * only: a log of many steps never copies the sum again. */
static int object_assign(json_object *o, json_object *b) {
        if (!json_is_object(b)) return 0;
        json_object_object_foreach(b, k, v) {
                if (json_object_object_length(o) >= TOKENS_MEMBERS_MAX && !json_object_object_get_ex(o, k, NULL))
                        continue;
                if (json_object_object_add(o, k, json_object_get(v)) < 0) return -ENOMEM;
        }
        return 0;
}

static const char *const sum_fields[] = { "total", "input", "output", "reasoning" };

/* The rest of tokens_add, given the sums it computed (NULL: the field is
 * no number on either side; taken from sums[] as they are set). */
static int tokens_merge(json_object **acc, json_object *t, json_object **sums, size_t n_sums) {
        json_object *a = *acc;
        json_object *ac = json_get(a, "cache"), *tc = json_get(t, "cache");
        _cleanup_json_ json_object *cache = NULL;
        if (json_is_object(ac) || json_is_object(tc)) {
                /* write and read are always present in a summed cache. */
                _cleanup_json_ json_object *w = add_numbers(json_get(ac, "write"), json_get(tc, "write"));
                _cleanup_json_ json_object *r = add_numbers(json_get(ac, "read"), json_get(tc, "read"));
                cache = json_is_object(ac) ? json_object_get(ac) : json_object_new_object();
                if (!w || !r || !cache || object_assign(cache, tc) < 0 || json_add(cache, "write", TAKE_PTR(w)) < 0 ||
                    json_add(cache, "read", TAKE_PTR(r)) < 0)
                        return -ENOMEM;
        }
        if (!json_is_object(a)) {
                /* a first value that was no object spreads to nothing */
                if (!(a = json_object_new_object())) return -ENOMEM;
                json_object_put(*acc);
                *acc = a;
        }
        if (object_assign(a, t) < 0) return -ENOMEM;
        for (size_t i = 0; i < n_sums; i++)
                if (sums[i] && json_add(a, sum_fields[i], TAKE_PTR(sums[i])) < 0) return -ENOMEM;
        if (cache && json_add(a, "cache", TAKE_PTR(cache)) < 0) return -ENOMEM;
        return 0;
}

/* tokens = sum(tokens, t): the first step_finish's tokens are taken as they
 * are; later ones merge into them ({...tokens, ...t}), summing total,
 * input, output and reasoning (a missing value counts 0 beside a number)
 * and cache.write and cache.read when either side has a cache
 * ({...tokens.cache, ...t.cache}). *acc is the summary's own: it and its
 * cache are changed in place, so a step costs its own members, never the
 * sum's. */
static int tokens_add(json_object **acc, json_object *t) {
        if (!*acc) {
                /* the first one is taken as-is (within the bound) */
                if (!json_is_object(t) || json_object_object_length(t) <= TOKENS_MEMBERS_MAX) {
                        *acc = json_object_get(t);
                        return 0;
                }
                if (!(*acc = json_object_new_object())) return -ENOMEM;
                return object_assign(*acc, t);
        }
        if (!json_is_object(t)) return 0;
        json_object *a = *acc;
        /* the sums first: the members they read are replaced below */
        json_object *sums[ELEMENTSOF(sum_fields)] = {};
        int r = 0;
        for (size_t i = 0; i < ELEMENTSOF(sum_fields) && r == 0; i++) {
                json_object *av = json_get(a, sum_fields[i]), *tv = json_get(t, sum_fields[i]);
                if ((json_is_number(av) || json_is_number(tv)) && !(sums[i] = add_numbers(av, tv))) r = -ENOMEM;
        }
        if (r == 0) r = tokens_merge(acc, t, sums, ELEMENTSOF(sum_fields));
        for (size_t i = 0; i < ELEMENTSOF(sum_fields); i++) json_object_put(sums[i]);
        return r;
}

static int summarize_event(summarizer *s, log_summary *ret, json_object *evt) {
        int r;
        const char *sid = json_get_string(evt, "sessionID");
        if (!isempty(sid)) {
                char *c = strdup(sid);
                if (!c) return -ENOMEM;
                free(ret->session_id);
                ret->session_id = c;
        }
        const char *type = json_get_string(evt, "type");
        if (!type) return 0;
        json_object *part = json_get_object(evt, "part");
        if (!part) return 0;

        if (streq(type, "text")) {
                json_object *t;
                if (!json_object_object_get_ex(part, "text", &t) || !t || !json_object_is_type(t, json_type_string))
                        return 0;
                const char *key;
                size_t key_len;
                r = message_key(s, part, &key, &key_len);
                if (r < 0) return r;
                return summarizer_add_text(s, key, key_len, json_object_get_string(t),
                                           (size_t) json_object_get_string_len(t));
        }
        if (streq(type, "step_finish")) {
                json_object *tokens = json_get(part, "tokens");
                if (tokens) {
                        r = tokens_add(&ret->tokens, tokens);
                        if (r < 0) return r;
                }
                json_object *cost = json_get(part, "cost");
                if (json_is_number(cost)) {
                        ret->cost = (ret->has_cost ? ret->cost : 0) + json_object_get_double(cost);
                        ret->has_cost = true;
                }
                if (streq_ptr(json_get_string(part, "reason"), "stop")) {
                        ret->has_stop = true;
                        const char *key;
                        size_t key_len;
                        r = message_key(s, part, &key, &key_len);
                        if (r < 0) return r;
                        char *copy = key ? strndup(key, key_len) : NULL;
                        if (key && !copy) return -ENOMEM;
                        free(s->final_key);
                        /* finalMessageId ?? lastSeen: undefined and null fall back. */
                        s->final_set = key && !streq(key, "j:null");
                        s->final_key = copy;
                        s->final_key_len = key_len;
                }
        }
        return 0;
}

static int summarizer_finish(summarizer *s, log_summary *ret) {
        /* message */
        size_t idx = NO_MESSAGE;
        if (s->final_set)
                idx = summarizer_find(s, s->final_key, s->final_key_len, key_hash(s->final_key, s->final_key_len));
        else if (s->any_text)
                idx = s->last_hit; /* the last text event's message */
        message_texts *m = idx != NO_MESSAGE ? &s->msgs[idx] : NULL;
        ret->message = m && m->text ? strndup(m->text, m->len) : strdup("");
        if (!ret->message) return -ENOMEM;

        /* narration: every message's text in first-seen order, "\n\n"-joined.
         * The first message's buffer is grown into the narration and every
         * other part is freed once appended, so the text is held about once. */
        size_t total = 0;
        for (size_t i = 0; i < s->n_msgs; i++) total += s->msgs[i].len + 2;
        char *n = s->n_msgs > 0 ? TAKE_PTR(s->msgs[0].text) : NULL;
        char *grown = realloc(n, total + 1);
        if (!grown) {
                free(n);
                return -ENOMEM;
        }
        n = grown;
        size_t pos = s->n_msgs > 0 ? s->msgs[0].len : 0;
        for (size_t i = 1; i < s->n_msgs; i++) {
                memcpy(n + pos, "\n\n", 2);
                pos += 2;
                if (s->msgs[i].len) memcpy(n + pos, s->msgs[i].text, s->msgs[i].len);
                pos += s->msgs[i].len;
                free(s->msgs[i].text);
                s->msgs[i].text = NULL;
        }
        n[pos] = 0;
        ret->narration = n;
        return 0;
}

void log_summary_done(log_summary *s) {
        if (!s) return;
        free(s->session_id);
        json_object_put(s->tokens);
        free(s->message);
        free(s->narration);
        *s = (log_summary) {};
}

/* ---- the fast path for the commonest line ----
 * Most of a long log is text events exactly as the pi and shell normalizers
 * write them (json-c's serialization, keys in this order):
 *   {"type":"text","part":{"type":"text","text":"…","messageID":"…"}}
 * Such a line is matched byte by byte here, without building a json-c tree
 * (for a log of text deltas json-c's allocations were most of the cost).
 * Anything else — another shape, key order or extra key, a \u escape of
 * U+0000 or of a surrogate, a control character or DEL, bytes that are not
 * strict UTF-8 (RFC 3629), any trailing byte but JSON whitespace — goes to
 * json-c. A line accepted here is valid strict JSON that json-c parses to
 * exactly these two strings, and summarize_event would do exactly what
 * this does with it (test-logparse's differential test holds each boundary
 * against json-c). */

/* Decode the JSON string whose body starts at *pp (after its opening quote)
 * into out[*out_len...] (out has room for end - *pp bytes: decoding never
 * grows). On success *pp is past the closing quote and returns true; false
 * when the string is outside the subset above. */
static bool fast_string(const char **pp, const char *end, char *out, size_t *out_len) {
        const unsigned char *p = (const unsigned char *) *pp, *e = (const unsigned char *) end;
        size_t o = *out_len;
        while (p < e) {
                unsigned char c = *p;
                if (c == '"') {
                        *pp = (const char *) p + 1;
                        *out_len = o;
                        return true;
                }
                if (c == '\\') {
                        if (++p >= e) return false;
                        switch (*p) {
                        case '"': out[o++] = '"'; break;
                        case '\\': out[o++] = '\\'; break;
                        case '/': out[o++] = '/'; break;
                        case 'b': out[o++] = '\b'; break;
                        case 'f': out[o++] = '\f'; break;
                        case 'n': out[o++] = '\n'; break;
                        case 'r': out[o++] = '\r'; break;
                        case 't': out[o++] = '\t'; break;
                        case 'u': {
                                /* a code point of the BMP but U+0000 (a NUL json-c keeps, which no
                                 * typed string holds) and a surrogate (json-c pairs them or puts
                                 * U+FFFD, its rules): 6 bytes become at most 3 */
                                uint32_t cp = 0;
                                if (e - p < 5) return false;
                                for (int i = 1; i <= 4; i++) {
                                        int d = hex_digit_value(p[i]);
                                        if (d < 0) return false;
                                        cp = cp << 4 | (uint32_t) d;
                                }
                                if (cp == 0) return false;
                                size_t n = utf8_encode(cp, out + o);
                                if (n == 0) return false;
                                o += n;
                                p += 4;
                                break;
                        }
                        default: return false; /* invalid */
                        }
                        p++;
                } else if (c < 0x80) {
                        if (c < 0x20 || c == 0x7F) return false;
                        out[o++] = (char) c;
                        p++;
                } else {
                        Utf8Char u = utf8_decode((const char *) p, (size_t) (e - p));
                        if (u.status != UTF8_VALID) return false;
                        memcpy(out + o, p, u.len);
                        o += u.len;
                        p += u.len;
                }
        }
        return false;
}

/* Room for n bytes in *buf (of *cap bytes). */
static int scratch_reserve(char **buf, size_t *cap, size_t n) {
        if (*cap >= n) return 0;
        char *nb = realloc(*buf, n);
        if (!nb) return -ENOMEM;
        *buf = nb;
        *cap = n;
        return 0;
}

/* 1 if line was such a text event and is summarized, 0 if json-c must
 * look at it, -ENOMEM. */
static int summarize_fast(summarizer *s, const char *line, size_t len) {
        static const char head[] = "{\"type\":\"text\",\"part\":{\"type\":\"text\",\"text\":\"";
        static const char mid[] = ",\"messageID\":\"";
        const size_t hl = sizeof head - 1, ml = sizeof mid - 1;
        if (len < hl || memcmp(line, head, hl) != 0) return 0;
        const char *p = line + hl, *end = line + len;
        if (scratch_reserve(&s->fast_text, &s->fast_text_cap, len + 1) < 0 ||
            scratch_reserve(&s->keybuf, &s->keybuf_cap, len + 3) < 0)
                return -ENOMEM;
        size_t text_len = 0, key_len = 2;
        if (!fast_string(&p, end, s->fast_text, &text_len)) return 0;
        if ((size_t) (end - p) < ml || memcmp(p, mid, ml) != 0) return 0;
        p += ml;
        memcpy(s->keybuf, "s:", 2);
        if (!fast_string(&p, end, s->keybuf, &key_len)) return 0;
        if (end - p < 2 || p[0] != '}' || p[1] != '}') return 0;
        for (p += 2; p < end; p++)
                if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') return 0;
        s->keybuf[key_len] = 0;
        int r = summarizer_add_text(s, s->keybuf, key_len, s->fast_text, text_len);
        return r < 0 ? r : 1;
}

/* A JSON number's text as json-c reads it (int64 or double) into *ret;
 * false for a text it might read otherwise (a long integer). */
static bool scan_number_value(const char *text, size_t len, double *ret) {
        char buf[64];
        if (len >= sizeof buf) return false;
        memcpy(buf, text, len);
        buf[len] = 0;
        if (!memchr(text, '.', len) && !memchr(text, 'e', len) && !memchr(text, 'E', len)) {
                if (len > 15) return false;
                *ret = (double) strtoll(buf, NULL, 10);
                return true;
        }
        *ret = strtod(buf, NULL);
        return true;
}

/* A JSON number's text that json-c reads as an int64 of the same value
 * (digits only, at most 18 of them, no "-0") into *ret; false for any
 * other, which json-c must read. */
static bool scan_int_value(const char *text, size_t len, int64_t *ret) {
        size_t i = len > 0 && text[0] == '-';
        if (len == i || len - i > 18) return false;
        if (len - i > 1 && text[i] == '0') return false;
        if (i && len == 2 && text[1] == '0') return false;
        int64_t v = 0;
        for (size_t k = i; k < len; k++) {
                if (text[k] < '0' || text[k] > '9') return false;
                v = v * 10 + (text[k] - '0');
        }
        *ret = i ? -v : v;
        return true;
}

typedef struct member_list {
        summarizer *s;
        size_t n;
        bool escaped, nomem;
} member_list;

static bool member_collect(const JsonScanMember *m, void *userdata) {
        member_list *ml = userdata;
        if (m->key_escaped) {
                ml->escaped = true;
                return false;
        }
        summarizer *s = ml->s;
        if (ml->n == s->members_cap) {
                size_t nc = s->members_cap ? s->members_cap * 2 : 16;
                JsonScanMember *nm = reallocarray(s->members, nc, sizeof *nm);
                if (!nm) {
                        ml->nomem = true;
                        return false;
                }
                s->members = nm;
                s->members_cap = nc;
        }
        s->members[ml->n++] = *m;
        return true;
}

static bool is_sum_member(const char *key, size_t len) {
        if (len == 5 && memcmp(key, "cache", 5) == 0) return true;
        for (size_t i = 0; i < ELEMENTSOF(sum_fields); i++)
                if (strlen(sum_fields[i]) == len && memcmp(key, sum_fields[i], len) == 0) return true;
        return false;
}

/* The keys of the sum and of a step's tokens built so far, by their bytes,
 * for a step of many members: one hash and one compare a member instead of
 * two json-c lookups of a copied key. The sum and the step each hold at
 * most TOKENS_MEMBERS_MAX members and the summed ones: the slots stay
 * under a third full. */
#define KEY_SET_SLOTS 512
#define KEY_SET_MIN_MEMBERS 32 /* fewer members: json-c's lookups are as cheap */
typedef struct key_slot {
        const char *key;
        size_t len;
        uint32_t gen;
} key_slot;

static bool key_set_find(summarizer *s, const char *key, size_t len, bool add) {
        uint64_t h = key_hash(key, len);
        for (size_t i = 0; i < KEY_SET_SLOTS; i++) {
                key_slot *k = &s->key_set[(h + i) & (KEY_SET_SLOTS - 1)];
                if (k->gen != s->key_set_gen) {
                        if (add) *k = (key_slot) {.key = key, .len = len, .gen = s->key_set_gen};
                        return false;
                }
                if (k->len == len && memcmp(k->key, key, len) == 0) return true;
        }
        return false; /* full: never, at most a third of the slots are used */
}

/* A member's key as a C string, in the summarizer's scratch; NULL on ENOMEM. */
static const char *member_key_copy(summarizer *s, const char *raw, size_t len) {
        if (scratch_reserve(&s->member_key, &s->member_key_cap, len + 1) < 0) return NULL;
        memcpy(s->member_key, raw, len);
        s->member_key[len] = 0;
        return s->member_key;
}

/* A fresh key set holding the sum's keys; -ENOMEM. */
static int key_set_begin(summarizer *s, json_object *acc) {
        if (!s->key_set && !(s->key_set = calloc(KEY_SET_SLOTS, sizeof *s->key_set))) return -ENOMEM;
        if (++s->key_set_gen == 0) {
                /* wrapped: every slot is free again */
                memset(s->key_set, 0, KEY_SET_SLOTS * sizeof *s->key_set);
                s->key_set_gen = 1;
        }
        json_object_object_foreach(acc, key, val) {
                (void) val;
                (void) key_set_find(s, key, strlen(key), true);
        }
        return 0;
}

/* The tokens of a later step (the sum exists and is an object), at p: the
 * members tokens_add would use, built alone (every member the sum already
 * has, the summed ones and the cache, new ones while the sum has room, in
 * their order; a repeated key as json-c keeps it), so that a step of
 * thousands of members costs a scan and the few it takes. p holds an
 * object. 1 and *ret, 0 if json-c must build them (an escaped key),
 * -ENOMEM. */
static int tokens_scan(summarizer *s, json_tokener *tok, json_object *acc, const char *p, size_t len,
                       json_object **ret) {
        *ret = NULL;
        member_list ml = {.s = s};
        JsonScanResult k = json_scan_members(p, len, member_collect, &ml);
        if (ml.nomem) return -ENOMEM;
        if (k != JSON_SCAN_VALID || ml.escaped) return 0;
        _cleanup_json_ json_object *t = json_object_new_object();
        if (!t) return -ENOMEM;
        size_t have = (size_t) json_object_object_length(acc);
        size_t room = have < TOKENS_MEMBERS_MAX ? TOKENS_MEMBERS_MAX - have : 0, taken = 0;
        bool wide = ml.n >= KEY_SET_MIN_MEMBERS && have <= TOKENS_MEMBERS_MAX + ELEMENTSOF(sum_fields) + 1;
        if (wide && key_set_begin(s, acc) < 0) return -ENOMEM;
        for (size_t i = 0; i < ml.n; i++) {
                const JsonScanMember *m = &s->members[i];
                const char *raw = p + m->key_offset, *key = NULL;
                bool known;
                if (wide)
                        known = key_set_find(s, raw, m->key_len, false);
                else {
                        if (!(key = member_key_copy(s, raw, m->key_len))) return -ENOMEM;
                        known = json_object_object_get_ex(acc, key, NULL) || json_object_object_get_ex(t, key, NULL);
                }
                if (!known) {
                        /* new to the sum: object_assign takes it while there is room */
                        if (taken < room)
                                taken++;
                        else if (!is_sum_member(raw, m->key_len))
                                continue;
                        if (wide) (void) key_set_find(s, raw, m->key_len, true);
                }
                /* a wide step copies only the keys it takes */
                if (!key && !(key = member_key_copy(s, raw, m->key_len))) return -ENOMEM;
                const JsonScanValue *v = &m->value;
                bool str = v->type == JSON_SCAN_STRING;
                json_object *value = NULL;
                int64_t iv;
                if (v->type == JSON_SCAN_NUMBER && scan_int_value(p + v->offset, v->len, &iv)) {
                        /* what json-c's tokener makes of it, without its per-call locale */
                        if (!(value = json_object_new_int64(iv))) return -ENOMEM;
                } else if (json_parse_strict_with(tok, p + v->offset - str, v->len + 2 * str, &value) < 0)
                        return 0;
                if (json_object_object_add(t, key, value) < 0) {
                        json_object_put(value);
                        return -ENOMEM;
                }
        }
        *ret = TAKE_PTR(t);
        return 1;
}

/* A step_finish event whose part (at line + part->offset) json_scan can
 * read: its tokens (parsed alone), cost, reason and messageID, as
 * summarize_event takes them. 1 if summarized, 0 if json-c must look at
 * the line (nothing was changed then), -errno. */
static int summarize_step_scan(summarizer *s, json_tokener *tok, log_summary *ret, const char *line,
                               const JsonScanValue *part) {
        enum { TOKENS, COST, REASON, MID };
        static const char *const keys[] = {"tokens", "cost", "reason", "messageID", NULL};
        JsonScanValue v[4];
        const char *p = line + part->offset;
        if (json_scan(p, part->len, keys, NULL, v) != JSON_SCAN_VALID) return 0;
        double cost = 0;
        if (v[COST].type == JSON_SCAN_NUMBER && !scan_number_value(p + v[COST].offset, v[COST].len, &cost)) return 0;
        if (v[REASON].type == JSON_SCAN_STRING && v[REASON].escaped) return 0;
        bool stop = scan_is(p, &v[REASON], "stop");
        if (stop && v[MID].type != JSON_SCAN_NONE && (v[MID].type != JSON_SCAN_STRING || v[MID].escaped)) return 0;
        _cleanup_json_ json_object *tokens = NULL;
        if (v[TOKENS].type == JSON_SCAN_OBJECT && json_is_object(ret->tokens)) {
                /* a later step: only the members the sum takes are built */
                int r = tokens_scan(s, tok, ret->tokens, p + v[TOKENS].offset, v[TOKENS].len, &tokens);
                if (r <= 0) return r;
        } else if (v[TOKENS].type != JSON_SCAN_NONE && v[TOKENS].type != JSON_SCAN_NULL &&
                   parse_line(tok, p + v[TOKENS].offset - (v[TOKENS].type == JSON_SCAN_STRING),
                              v[TOKENS].len + 2 * (v[TOKENS].type == JSON_SCAN_STRING), &tokens) < 0)
                return 0;

        if (tokens) {
                int r = tokens_add(&ret->tokens, tokens);
                if (r < 0) return r;
        }
        if (v[COST].type == JSON_SCAN_NUMBER) {
                ret->cost = (ret->has_cost ? ret->cost : 0) + cost;
                ret->has_cost = true;
        }
        if (stop) {
                ret->has_stop = true;
                char *copy = NULL;
                size_t key_len = 0;
                if (v[MID].type == JSON_SCAN_STRING) {
                        key_len = v[MID].len + 2;
                        copy = strdup_printf("s:%.*s", (int) v[MID].len, p + v[MID].offset);
                        if (!copy) return -ENOMEM;
                }
                free(s->final_key);
                s->final_set = copy != NULL;
                s->final_key = copy;
                s->final_key_len = key_len;
        }
        return 1;
}

/* A text event whose part json_scan can read, as summarize_event takes it.
 * 1 if summarized, 0 if json-c must look at the line (nothing was changed
 * then), -ENOMEM. */
static int summarize_text_scan(summarizer *s, const char *line, const JsonScanValue *part) {
        enum { TEXT, MID };
        static const char *const keys[] = {"text", "messageID", NULL};
        JsonScanValue v[2];
        const char *p = line + part->offset;
        if (json_scan(p, part->len, keys, NULL, v) != JSON_SCAN_VALID) return 0;
        if (v[TEXT].type != JSON_SCAN_STRING) return 1; /* no text: nothing to take */
        if (v[MID].type != JSON_SCAN_NONE && (v[MID].type != JSON_SCAN_STRING || v[MID].escaped)) return 0;
        const char *text = p + v[TEXT].offset;
        size_t text_len = v[TEXT].len;
        if (v[TEXT].escaped) {
                if (scratch_reserve(&s->fast_text, &s->fast_text_cap, text_len + 1) < 0) return -ENOMEM;
                const char *q = text;
                size_t n = 0;
                if (!fast_string(&q, text + text_len + 1, s->fast_text, &n)) return 0;
                text = s->fast_text;
                text_len = n;
        }
        const char *key = NULL;
        size_t key_len = 0;
        if (v[MID].type == JSON_SCAN_STRING) {
                if (scratch_reserve(&s->keybuf, &s->keybuf_cap, v[MID].len + 3) < 0) return -ENOMEM;
                memcpy(s->keybuf, "s:", 2);
                memcpy(s->keybuf + 2, p + v[MID].offset, v[MID].len);
                key_len = v[MID].len + 2;
                s->keybuf[key_len] = 0;
                key = s->keybuf;
        }
        int r = summarizer_add_text(s, key, key_len, text, text_len);
        return r < 0 ? r : 1;
}

/* Most lines of a long log are events summarize_event takes nothing from
 * but their sessionID (tool calls, step starts, errors), or step ends:
 * json_scan validates such a line and finds its top-level keys without
 * building it. 1 if the line is settled (not JSON, or summarized), 0 if
 * json-c must look at it (nothing was changed then), -errno. */
static int summarize_scan(summarizer *s, json_tokener *tok, const char *line, size_t len, log_summary *out) {
        enum { SID, TYPE, PART };
        static const char *const keys[] = {"sessionID", "type", "part", NULL};
        JsonScanValue v[3];
        JsonScanType top;
        JsonScanResult k = json_scan(line, len, keys, &top, v);
        if (k == JSON_SCAN_INVALID || k == JSON_SCAN_TOO_DEEP) return 1; /* not JSON: skipped, as by summarize_stream */
        if (k != JSON_SCAN_VALID) return 0;
        bool step = false, text = false;
        if (top == JSON_SCAN_OBJECT) {
                if (v[SID].type == JSON_SCAN_STRING && v[SID].escaped) return 0;
                if (v[TYPE].type == JSON_SCAN_STRING && v[PART].type == JSON_SCAN_OBJECT) {
                        if (v[TYPE].escaped) return 0;
                        step = scan_is(line, &v[TYPE], "step_finish");
                        text = scan_is(line, &v[TYPE], "text");
                }
        }
        char *sid = NULL;
        if (top == JSON_SCAN_OBJECT && v[SID].type == JSON_SCAN_STRING && v[SID].len > 0 &&
            !(sid = strndup(line + v[SID].offset, v[SID].len)))
                return -ENOMEM;
        if (step || text) {
                int r = step ? summarize_step_scan(s, tok, out, line, &v[PART])
                             : summarize_text_scan(s, line, &v[PART]);
                if (r <= 0) {
                        free(sid);
                        return r;
                }
        }
        if (sid) {
                free(out->session_id);
                out->session_id = sid;
        }
        out->has_json_line = true;
        return 1;
}


static int summarize_stream(log_reader *lr, summarizer *s, log_summary *out) {
        for (;;) {
                const char *line;
                size_t n;
                int r = log_reader_next(lr, &line, &n);
                if (r <= 0) return r;
                if (summarize_fast_paths) {
                        r = summarize_fast(s, line, n);
                        if (r < 0) return r;
                        if (r > 0) {
                                out->has_json_line = true;
                                continue;
                        }
                        r = summarize_scan(s, lr->tok, line, n, out);
                        if (r < 0) return r;
                        if (r > 0) continue;
                }
                json_object *evt = NULL;
                if (json_parse_strict_with(lr->tok, line, n, &evt) < 0) continue; /* not JSON: skipped */
                out->has_json_line = true;
                r = json_is_object(evt) ? summarize_event(s, out, evt) : 0;
                json_object_put(evt);
                if (r < 0) return r;
        }
}

int log_summarize_file(const char *path, const char *initial_session_id, log_summary *ret) {
        log_reader lr;
        int r = log_reader_open(&lr, path);
        if (r < 0 && r != -ENOENT) {
                log_reader_close(&lr);
                return r;
        }
        bool present = r >= 0;

        log_summary out = {};
        summarizer s = SUMMARIZER_INIT;
        r = 0;
        if (initial_session_id && !(out.session_id = strdup(initial_session_id))) r = -ENOMEM;
        if (r >= 0 && present) r = summarize_stream(&lr, &s, &out);
        log_reader_close(&lr);
        if (r >= 0) r = summarizer_finish(&s, &out);
        summarizer_done(&s);
        if (r < 0) {
                log_summary_done(&out);
                return r;
        }
        *ret = out;
        return 0;
}

/* ---- activity / summary narration (see log_narration_parse) ---- */

#define NARRATION_TOOL_UNITS 500

const LogNarrationStyle log_narration_summary = {.unnamed_tool = "unknown", .empty_tool_is_unnamed = true};
const LogNarrationStyle log_narration_activity = {.unnamed_tool = "undefined", .empty_tool_is_unnamed = false};

/* s cut to NARRATION_TOOL_UNITS UTF-16 units + "…[truncated]" (JS truncateForNarration). */
static char *narration_truncate(const char *s) {
        size_t len = strlen(s);
        if (utf8_utf16_length(s, len) <= NARRATION_TOOL_UNITS) return strdup(s);
        size_t cut = utf8_prefix_utf16(s, len, NARRATION_TOOL_UNITS);
        return strdup_printf("%.*s\xE2\x80\xA6[truncated]", (int) cut, s);
}

typedef struct NarrationEntry {
        char *mid;      /* text entry: its message id; NULL: a tool line */
        char *text;     /* tool line, or the message's texts so far */
        size_t len;     /* bytes of text */
} NarrationEntry;

typedef struct Narration {
        NarrationEntry *v;
        size_t n;
} Narration;

static void narration_done(Narration *na) {
        for (size_t i = 0; i < na->n; i++) {
                free(na->v[i].mid);
                free(na->v[i].text);
        }
        free(na->v);
}

/* A new entry at the end (text and mid taken over, freed on -ENOMEM). */
static int narration_push(Narration *na, char *mid, char *text) {
        NarrationEntry *nv = text ? realloc(na->v, (na->n + 1) * sizeof *nv) : NULL;
        if (!nv) {
                free(mid);
                free(text);
                return -ENOMEM;
        }
        na->v = nv;
        na->v[na->n++] = (NarrationEntry) {.mid = mid, .text = text, .len = strlen(text)};
        return 0;
}

static int narration_text(Narration *na, json_object *part, json_object *tv) {
        const char *mid = json_get_string(part, "messageID");
        if (!mid) mid = "__unknown_message__";
        NarrationEntry *e = NULL;
        for (size_t i = 0; i < na->n && !e; i++)
                if (na->v[i].mid && streq(na->v[i].mid, mid)) e = &na->v[i];
        if (!e) {
                char *m = strdup(mid);
                int r = m ? narration_push(na, m, strdup("")) : -ENOMEM;
                if (r < 0) return r;
                e = &na->v[na->n - 1];
        }
        size_t tl = (size_t) json_object_get_string_len(tv);
        char *nt = realloc(e->text, e->len + tl + 1);
        if (!nt) return -ENOMEM;
        memcpy(nt + e->len, json_object_get_string(tv), tl);
        e->len += tl;
        nt[e->len] = 0;
        e->text = nt;
        return 0;
}

static int narration_tool(Narration *na, json_object *part, const LogNarrationStyle *style) {
        json_object *st = json_get_object(part, "state");
        json_object *in = json_get(st, "input"), *out = json_get(st, "output");
        const char *input = in && json_object_is_type(in, json_type_string) ? json_object_get_string(in)
                            : in                                           ? json_to_line(in, NULL)
                                                                           : "{}";
        const char *tool = json_get_string(part, "tool");
        if (!tool || (style->empty_tool_is_unnamed && !*tool)) tool = style->unnamed_tool;
        _cleanup_free_ char *ti = narration_truncate(input ? input : "{}");
        const char *os = out && json_object_is_type(out, json_type_string) ? json_object_get_string(out) : NULL;
        _cleanup_free_ char *to = os && *os ? narration_truncate(os) : NULL;
        if (!ti || (os && *os && !to)) return -ENOMEM;
        return narration_push(na, NULL,
                              to ? strdup_printf("[tool:%s] %s -> %s", tool, ti, to) : strdup_printf("[tool:%s] %s", tool, ti));
}

int log_narration_parse_style(const char *data, size_t len, const LogNarrationStyle *style, char **ret) {
        _cleanup_free_ char *clean = utf8_sanitize(data, len);
        if (!clean) return -ENOMEM;
        json_tokener *tok = json_strict_tokener_new_depth(LOG_JSON_DEPTH_MAX);
        if (!tok) return -ENOMEM;
        Narration na = {};
        int r = 0;
        for (char *line = clean; line && *line && r >= 0;) {
                char *nl = strchr(line, '\n');
                size_t ll = nl ? (size_t) (nl - line) : strlen(line);
                json_object *evt = NULL;
                if (ll > 0 && json_parse_strict_with(tok, line, ll, &evt) >= 0 && json_is_object(evt)) {
                        const char *type = json_get_string(evt, "type");
                        json_object *part = json_get_object(evt, "part");
                        json_object *tv = json_get(part, "text");
                        if (streq_ptr(type, "text") && tv && json_object_is_type(tv, json_type_string))
                                r = narration_text(&na, part, tv);
                        else if (streq_ptr(type, "tool_use") && part && streq_ptr(json_get_string(part, "type"), "tool"))
                                r = narration_tool(&na, part, style);
                }
                json_object_put(evt);
                line = nl ? nl + 1 : NULL;
        }
        json_tokener_free(tok);
        size_t total = 1;
        for (size_t i = 0; i < na.n; i++) total += na.v[i].len + 2;
        char *out = r >= 0 ? malloc(total) : NULL;
        if (r >= 0 && !out) r = -ENOMEM;
        if (r < 0) {
                narration_done(&na);
                return r;
        }
        size_t o = 0;
        for (size_t i = 0; i < na.n; i++) {
                if (i) out[o++] = '\n', out[o++] = '\n';
                memcpy(out + o, na.v[i].text, na.v[i].len);
                o += na.v[i].len;
        }
        out[o] = 0;
        narration_done(&na);
        *ret = out;
        return 0;
}

int log_narration_parse(const char *data, size_t len, char **ret) {
        return log_narration_parse_style(data, len, &log_narration_summary, ret);
}
