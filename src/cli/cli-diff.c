/* `taskferry diff` patch filter and colourer (see cli-diff.h). */
#include "cli-diff.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "changeset-paths.h"
#include "macro.h"
#include "utf8.h"
#include "string-util.h"
#include "strv.h"

/* enough line start to tell every line kind apart: "GIT binary patch" */
#define PREFIX_MAX 16

typedef enum section {
        SEC_PROLOGUE, /* before the first "diff --git" */
        SEC_HEADER,   /* a file's extended header, buffered */
        SEC_BODY,     /* its hunks or binary data, streamed */
} section;

typedef enum line_kind {
        LINE_PLAIN,
        LINE_META,
        LINE_FRAG,
        LINE_OLD,
        LINE_NEW,
} line_kind;

struct cli_diff_filter {
        char **paths;
        bool color;
        bool escape; /* control bytes shown visibly (always with colour) */
        FILE *out;

        section sec;
        bool keep; /* the current section (or the prologue) is written */
        int kept;

        char *hdr;
        size_t hdr_len;

        /* the current line */
        bool collecting; /* still gathering its first bytes into prefix */
        char prefix[PREFIX_MAX];
        size_t prefix_len;
        line_kind kind;
        bool to_header;  /* this line belongs to the buffered header */
        bool colored;    /* an SGR sequence is open on this line */
        unsigned frag_at; /* FRAG: '@' seen so far, to end the colour after "@@ ... @@" */

        /* colour-mode escaping: the bytes so far of a UTF-8 sequence that
         * can still be well formed (utf8_decode says UTF8_TRUNCATED) */
        unsigned char held[4];
        unsigned held_len;
};

static bool has_prefix(const char *s, size_t len, const char *p) {
        size_t n = strlen(p);
        return len >= n && memcmp(s, p, n) == 0;
}

int cli_diff_filter_new(char *const *paths, bool color, FILE *out, cli_diff_filter **ret) {
        cli_diff_filter *f = calloc(1, sizeof *f);
        if (!f) return -ENOMEM;
        if (paths && paths[0]) {
                f->paths = strv_copy(paths);
                if (!f->paths) {
                        free(f);
                        return -ENOMEM;
                }
        }
        f->color = color;
        f->escape = color;
        f->out = out;
        f->sec = SEC_PROLOGUE;
        f->keep = !f->paths;
        f->collecting = true;
        *ret = f;
        return 0;
}

cli_diff_filter *cli_diff_filter_free(cli_diff_filter *f) {
        if (!f) return NULL;
        strv_free(f->paths);
        free(f->hdr);
        free(f);
        return NULL;
}

void cli_diff_filter_set_escape(cli_diff_filter *f, bool escape) {
        f->escape = escape || f->color;
}

/* ---- output ---- */

static int out_error(cli_diff_filter *f) {
        int e = errno;
        return -(e > 0 ? e : EIO);
}

static int emit(cli_diff_filter *f, const void *p, size_t n) {
        if (n > 0 && fwrite(p, 1, n, f->out) != n) return out_error(f);
        return 0;
}

static int emit_str(cli_diff_filter *f, const char *s) {
        return emit(f, s, strlen(s));
}

static int emit_hex(cli_diff_filter *f, unsigned char c) {
        char buf[8];
        int n = snprintf(buf, sizeof buf, "<%02X>", c);
        return emit(f, buf, (size_t) n);
}

/* The held bytes of a sequence that broke off: none was UTF-8. */
static int flush_held(cli_diff_filter *f) {
        int r = 0;
        for (unsigned i = 0; r >= 0 && i < f->held_len; i++) r = emit_hex(f, f->held[i]);
        f->held_len = 0;
        return r;
}

static int emit_escaped_fresh(cli_diff_filter *f, unsigned char c) {
        if ((c < 0x20 && c != '\t') || c == 0x7F) {
                char buf[2] = {'^', c == 0x7F ? '?' : (char) (c + 0x40)};
                return emit(f, buf, 2);
        }
        if (c < 0x80) return emit(f, &c, 1);
        /* a stray continuation byte, C0/C1, F5..FF: no sequence starts here */
        if (utf8_decode((const char *) &c, 1).status != UTF8_TRUNCATED) return emit_hex(f, c);
        f->held[0] = c;
        f->held_len = 1;
        return 0;
}

/* One byte of a line's content in colour mode (never '\n'). A held
 * sequence that c does not continue into a well-formed one (no overlong
 * form, surrogate or code point past U+10FFFF) is written as hex, and c
 * starts afresh. */
static int emit_escaped(cli_diff_filter *f, unsigned char c) {
        if (f->held_len > 0) {
                f->held[f->held_len] = c;
                Utf8Char u = utf8_decode((const char *) f->held, f->held_len + 1);
                if (u.status == UTF8_TRUNCATED) {
                        f->held_len++;
                        return 0;
                }
                if (u.status != UTF8_VALID) {
                        int r = flush_held(f);
                        if (r < 0) return r;
                        return emit_escaped_fresh(f, c);
                }
                f->held_len = 0;
                if (u.cp >= 0x80 && u.cp <= 0x9F) {
                        /* U+0080..U+009F: C1 controls (U+009B is CSI) */
                        char buf[16];
                        int k = snprintf(buf, sizeof buf, "<U+%04X>", (unsigned) u.cp);
                        return emit(f, buf, (size_t) k);
                }
                return emit(f, f->held, u.len);
        }
        return emit_escaped_fresh(f, c);
}

static int end_escaped_line(cli_diff_filter *f) {
        return flush_held(f);
}

static const char *kind_color(line_kind k) {
        switch (k) {
        case LINE_META: return CLI_DIFF_COLOR_META;
        case LINE_FRAG: return CLI_DIFF_COLOR_FRAG;
        case LINE_OLD: return CLI_DIFF_COLOR_OLD;
        case LINE_NEW: return CLI_DIFF_COLOR_NEW;
        default: return NULL;
        }
}

/* Start writing a line of kind k. */
static int line_begin(cli_diff_filter *f, line_kind k) {
        f->kind = k;
        f->frag_at = 0;
        f->colored = false;
        const char *c = f->color ? kind_color(k) : NULL;
        if (!c) return 0;
        f->colored = true;
        return emit_str(f, c);
}

/* One byte of the current (kept, written) line; '\n' ends it. */
static int line_byte(cli_diff_filter *f, unsigned char c) {
        int r;
        if (!f->escape) return emit(f, &c, 1);
        if (c == '\n') {
                r = end_escaped_line(f);
                if (r >= 0 && f->colored) r = emit_str(f, CLI_DIFF_COLOR_RESET);
                f->colored = false;
                if (r >= 0) r = emit(f, "\n", 1);
                return r;
        }
        r = emit_escaped(f, c);
        /* git colours "@@ -a,b +c,d @@" and leaves the function context plain */
        if (r >= 0 && f->kind == LINE_FRAG && f->colored) {
                f->frag_at = c == '@' ? f->frag_at + 1 : (f->frag_at >= 2 && f->frag_at < 4 ? f->frag_at : 0);
                if (f->frag_at >= 4) {
                        r = end_escaped_line(f);
                        if (r >= 0) r = emit_str(f, CLI_DIFF_COLOR_RESET);
                        f->colored = false;
                }
        }
        return r;
}

/* End of input inside a line without '\n': close its colour. */
static int line_abort(cli_diff_filter *f) {
        if (!f->escape) return 0;
        int r = end_escaped_line(f);
        if (r >= 0 && f->colored) r = emit_str(f, CLI_DIFF_COLOR_RESET);
        f->colored = false;
        return r;
}

/* ---- names ---- */

/* A name as the rest of a "---"/"+++"/"rename from" line writes it. */
static char *line_name(const char *s, size_t len) {
        if (len > 0 && s[0] == '"') return cs_unquote_path(s, len, NULL);
        const char *tab = memchr(s, '\t', len);
        if (tab) len = (size_t) (tab - s);
        return strndup(s, len);
}

static int push_name(char ***names, char *name, const char *strip) {
        if (!name) return -ENOMEM;
        if (streq(name, "/dev/null")) {
                free(name);
                return 0;
        }
        if (strip && startswith(name, strip)) memmove(name, name + strlen(strip), strlen(name) - strlen(strip) + 1);
        if (strv_contains(*names, name)) {
                free(name);
                return 0;
        }
        return strv_consume(names, name);
}

/* "diff --git a/N b/N", unquoted and the same name on both sides, or both quoted. */
static int git_line_names(char ***names, const char *s, size_t len) {
        if (len > 0 && s[0] == '"') {
                size_t used = 0;
                char *a = cs_unquote_path(s, len, &used);
                if (!a) return 0; /* malformed: the other lines name it */
                int r = push_name(names, a, "a/");
                if (r < 0) return r;
                if (used + 1 < len && s[used] == ' ' && s[used + 1] == '"') {
                        char *b = cs_unquote_path(s + used + 1, len - used - 1, NULL);
                        if (!b) return 0; /* malformed too: the other lines name it */
                        return push_name(names, b, "b/");
                }
                return 0;
        }
        if (len < 5 || (len - 5) % 2 != 0) return 0;
        size_t n = (len - 5) / 2;
        if (!has_prefix(s, len, "a/") || s[2 + n] != ' ' || memcmp(s + 3 + n, "b/", 2) != 0 ||
            memcmp(s + 2, s + 5 + n, n) != 0)
                return 0;
        return push_name(names, strndup(s + 2, n), NULL);
}

char **cli_diff_header_names(const char *header, size_t len) {
        _cleanup_strv_free_ char **names = calloc(1, sizeof(char *));
        if (!names) return NULL;
        static const struct {
                const char *prefix;
                const char *strip;
        } kinds[] = {
                {"--- ", "a/"}, {"+++ ", "b/"}, {"rename from ", NULL}, {"rename to ", NULL},
                {"copy from ", NULL}, {"copy to ", NULL},
        };
        for (size_t pos = 0; pos < len;) {
                const char *line = header + pos;
                const char *nl = memchr(line, '\n', len - pos);
                size_t l = nl ? (size_t) (nl - line) : len - pos;
                pos += l + (nl ? 1 : 0);
                int r = 0;
                if (has_prefix(line, l, "diff --git "))
                        r = git_line_names(&names, line + 11, l - 11);
                else
                        for (size_t k = 0; k < ELEMENTSOF(kinds); k++) {
                                size_t pl = strlen(kinds[k].prefix);
                                if (!has_prefix(line, l, kinds[k].prefix)) continue;
                                char *name = line_name(line + pl, l - pl);
                                /* a malformed quoted name names nothing */
                                if (name || !(l > pl && line[pl] == '"')) r = push_name(&names, name, kinds[k].strip);
                                break;
                        }
                if (r < 0) return NULL;
        }
        return TAKE_PTR(names);
}

bool cli_diff_path_matches(const char *name, const char *path) {
        while (startswith(path, "./")) {
                path += 2;
                while (*path == '/') path++;
        }
        size_t n = strlen(path);
        while (n > 0 && path[n - 1] == '/') n--;
        if (n == 0 || (n == 1 && path[0] == '.')) return true;
        return strncmp(name, path, n) == 0 && (name[n] == 0 || name[n] == '/');
}

static bool section_wanted(cli_diff_filter *f) {
        if (!f->paths) return true;
        _cleanup_strv_free_ char **names = cli_diff_header_names(f->hdr, f->hdr_len);
        if (!names) return false;
        for (char **n = names; *n; n++)
                for (char **p = f->paths; *p; p++)
                        if (cli_diff_path_matches(*n, *p)) return true;
        return false;
}

/* ---- sections ---- */

static int hdr_append(cli_diff_filter *f, const char *p, size_t n) {
        if (f->hdr_len + n > CLI_DIFF_HEADER_MAX) return -E2BIG;
        if (!f->hdr) {
                f->hdr = malloc(CLI_DIFF_HEADER_MAX);
                if (!f->hdr) return -ENOMEM;
        }
        memcpy(f->hdr + f->hdr_len, p, n);
        f->hdr_len += n;
        return 0;
}

/* The buffered header is complete: decide the section, write the header. */
static int header_end(cli_diff_filter *f) {
        f->keep = section_wanted(f);
        f->sec = SEC_BODY;
        if (f->keep) f->kept++;
        if (!f->keep) {
                f->hdr_len = 0;
                return 0;
        }
        int r = 0;
        if (!f->escape) r = emit(f, f->hdr, f->hdr_len);
        else
                for (size_t pos = 0; r >= 0 && pos < f->hdr_len;) {
                        const char *line = f->hdr + pos;
                        const char *nl = memchr(line, '\n', f->hdr_len - pos);
                        size_t l = nl ? (size_t) (nl - line) + 1 : f->hdr_len - pos;
                        pos += l;
                        r = line_begin(f, LINE_META);
                        for (size_t i = 0; r >= 0 && i < l; i++) r = line_byte(f, (unsigned char) line[i]);
                        if (r >= 0 && !nl) r = line_abort(f);
                }
        f->hdr_len = 0;
        return r;
}

/* The first bytes of a line are in prefix (all of it if it ended): route it. */
static int line_decide(cli_diff_filter *f) {
        const char *p = f->prefix;
        size_t n = f->prefix_len;
        int r = 0;
        if (has_prefix(p, n, "diff --git ")) {
                if (f->sec == SEC_HEADER) r = header_end(f);
                if (r < 0) return r;
                f->sec = SEC_HEADER;
                f->hdr_len = 0;
                f->to_header = true;
                return 0;
        }
        if (f->sec == SEC_HEADER) {
                if (!has_prefix(p, n, "@@") && !has_prefix(p, n, "GIT binary patch") &&
                    !has_prefix(p, n, "Binary files ")) {
                        f->to_header = true;
                        return 0;
                }
                r = header_end(f);
                if (r < 0) return r;
        }
        f->to_header = false;
        if (!f->keep) return 0;
        line_kind k = LINE_PLAIN;
        if (f->sec == SEC_BODY) {
                if (has_prefix(p, n, "@@")) k = LINE_FRAG;
                else if (n > 0 && p[0] == '+') k = LINE_NEW;
                else if (n > 0 && p[0] == '-') k = LINE_OLD;
        }
        return line_begin(f, k);
}

/* A byte of the current line after its kind is known. */
static int route_byte(cli_diff_filter *f, unsigned char c) {
        if (f->to_header) return hdr_append(f, (const char *) &c, 1);
        if (!f->keep) return 0;
        return line_byte(f, c);
}

static int flush_prefix(cli_diff_filter *f) {
        int r = line_decide(f);
        if (r < 0) return r;
        f->collecting = false;
        if (f->to_header) return hdr_append(f, f->prefix, f->prefix_len);
        for (size_t i = 0; r >= 0 && i < f->prefix_len; i++) r = route_byte(f, (unsigned char) f->prefix[i]);
        return r;
}

int cli_diff_filter_feed(cli_diff_filter *f, const char *data, size_t len) {
        int r = 0;
        for (size_t i = 0; r >= 0 && i < len; i++) {
                unsigned char c = (unsigned char) data[i];
                if (f->collecting) {
                        f->prefix[f->prefix_len++] = (char) c;
                        if (c == '\n' || f->prefix_len == PREFIX_MAX) {
                                r = flush_prefix(f);
                                if (c == '\n') f->collecting = true, f->prefix_len = 0;
                        }
                        continue;
                }
                if (f->to_header || !f->keep || f->escape) {
                        r = route_byte(f, c);
                } else {
                        /* plain and kept: the rest of the line in one write */
                        const char *nl = memchr(data + i, '\n', len - i);
                        size_t end = nl ? (size_t) (nl - data) : len - 1;
                        r = emit(f, data + i, end - i + 1);
                        i = end;
                        c = (unsigned char) data[i];
                }
                if (c == '\n') f->collecting = true, f->prefix_len = 0;
        }
        return r;
}

int cli_diff_filter_finish(cli_diff_filter *f) {
        int r = 0;
        if (f->collecting && f->prefix_len > 0) r = flush_prefix(f);
        bool mid_line = !f->collecting || f->prefix_len > 0;
        if (r >= 0 && f->sec == SEC_HEADER) r = header_end(f);
        else if (r >= 0 && mid_line && f->keep && !f->to_header) r = line_abort(f);
        f->collecting = true;
        f->prefix_len = 0;
        if (r >= 0 && fflush(f->out) != 0) r = out_error(f);
        return r < 0 ? r : f->kept;
}

char *cli_escape_controls(const char *s, size_t n) {
        /* at most "<U+009F>" (8 bytes) per 2 input bytes, "<E9>" (4) per byte */
        char *out = malloc(n * 4 + 1), *o = out;
        if (!out) return NULL;
        for (size_t i = 0; i < n;) {
                unsigned char c = (unsigned char) s[i];
                if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F) {
                        *o++ = '^';
                        *o++ = c == 0x7F ? '?' : (char) (c + 0x40);
                        i++;
                        continue;
                }
                if (c < 0x80) {
                        *o++ = (char) c;
                        i++;
                        continue;
                }
                Utf8Char u = utf8_decode(s + i, n - i);
                if (u.status != UTF8_VALID) {
                        o += sprintf(o, "<%02X>", c);
                        i++;
                } else if (u.cp <= 0x9F) {
                        o += sprintf(o, "<U+%04X>", (unsigned) u.cp);
                        i += u.len;
                } else {
                        memcpy(o, s + i, u.len);
                        o += u.len;
                        i += u.len;
                }
        }
        *o = 0;
        return out;
}

char *cli_diff_stat_marks(const char *line, size_t len, char *const *paths, char *const *classes) {
        /* " <name padded> | <counts>": the name as git wrote it, padding cut */
        const char *bar = NULL;
        for (const char *p = line; p + 3 <= line + len; p++)
                if (p[0] == ' ' && p[1] == '|' && p[2] == ' ') bar = p;
        /* the bar after the name's first byte: " | ..." names nothing */
        if (!bar || bar <= line || line[0] != ' ') return NULL;
        const char *name = line + 1, *end = bar;
        while (end > name && end[-1] == ' ') end--;
        size_t n = (size_t) (end - name);
        if (n == 0) return NULL;
        /* a long name is cut to "..." and its tail */
        bool cut = n > 3 && memcmp(name, "...", 3) == 0;
        char *marks = NULL;
        for (size_t i = 0; paths && paths[i] && classes && classes[i]; i++) {
                size_t pl = strlen(paths[i]);
                bool match = (pl == n && memcmp(paths[i], name, n) == 0) ||
                             (cut && pl >= n - 3 && memcmp(paths[i] + pl - (n - 3), name + 3, n - 3) == 0);
                if (!match) continue;
                if (marks && strstr(marks, classes[i])) continue; /* listed by both the patch and the record */
                char *m = marks ? strdup_printf("%.*s, %s]", (int) (strlen(marks) - 1), marks, classes[i])
                                : strdup_printf("[%s]", classes[i]);
                free(marks);
                if (!(marks = m)) return NULL;
        }
        return marks;
}

bool cli_diff_want_color(int fd) {
        if (!isatty(fd)) return false;
        if (!isempty(getenv("NO_COLOR"))) return false;
        const char *term = getenv("TERM");
        return !streq_ptr(term, "dumb");
}
