/* CLI error values (cli-error.h). */
#include "cli-error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "protocol-keys.h"
#include "macro.h"
#include "process-util.h"

void cli_error_done(cli_error *e) {
        free(e->text);
        free(e->help);
        free(e->code);
        *e = (cli_error) {};
}

static void cli_error_vset(cli_error *e, int exit_code, const char *code, const char *help,
                           const char *fmt, va_list ap) {
        cli_error_done(e);
        if (vasprintf(&e->text, fmt, ap) < 0) e->text = NULL;
        e->help = help ? strdup(help) : NULL;
        e->code = code ? strdup(code) : NULL;
        e->exit_code = exit_code;
}

int cli_error_usage(cli_error *e, const char *help, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        cli_error_vset(e, CLI_EXIT_USAGE, NULL, help ? help : "Run `taskferry --help` for usage", fmt, ap);
        va_end(ap);
        return -EINVAL;
}

int cli_error_fail(cli_error *e, const char *code, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        cli_error_vset(e, CLI_EXIT_FAILURE, code, NULL, fmt, ap);
        va_end(ap);
        return -EIO;
}

/* JavaScript String#trim on a byte range (ASCII white space is all the
 * error texts carry). */
static void trim_range(const char **s, size_t *len) {
        while (*len > 0 && strchr(" \t\n\r\v\f", (*s)[0])) (*s)++, (*len)--;
        while (*len > 0 && strchr(" \t\n\r\v\f", (*s)[*len - 1])) (*len)--;
}

/* First line starting with prefix whose remainder is non-empty after
 * trimming (JS `.find(Boolean)`); malloc'd or NULL. */
static char *find_prefixed_line(const char *text, const char *prefix) {
        size_t plen = strlen(prefix);
        for (const char *line = text; line; ) {
                const char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t) (nl - line) : strlen(line);
                if (len >= plen && strncmp(line, prefix, plen) == 0) {
                        const char *v = line + plen;
                        size_t vlen = len - plen;
                        trim_range(&v, &vlen);
                        if (vlen > 0) return strndup(v, vlen);
                }
                line = nl ? nl + 1 : NULL;
        }
        return NULL;
}

json_object *cli_error_value(const cli_error *e) {
        const char *text = e->text ? e->text : "";
        _cleanup_free_ char *error_line = find_prefixed_line(text, "error:");
        _cleanup_free_ char *help_line = find_prefixed_line(text, "help:");
        _cleanup_free_ char *message = NULL;

        if (error_line) {
                char *buf = NULL;
                size_t size = 0;
                FILE *f = open_memstream(&buf, &size);
                if (!f) return NULL;
                fputs(error_line, f);
                for (const char *line = text; line; ) {
                        const char *nl = strchr(line, '\n');
                        size_t len = nl ? (size_t) (nl - line) : strlen(line);
                        if (!startswith(line, "error:") && !startswith(line, "help:")) {
                                fputc('\n', f);
                                fwrite(line, 1, len, f);
                        }
                        line = nl ? nl + 1 : NULL;
                }
                if (fclose(f) != 0) {
                        free(buf);
                        return NULL;
                }
                message = buf;
        } else {
                const char *nl = strchr(text, '\n');
                size_t len = nl ? (size_t) (nl - text) : strlen(text);
                message = len ? strndup(text, len) : strdup("taskferry request failed");
        }
        if (!message) return NULL;

        const char *help = e->help ? e->help
                : help_line ? help_line
                : "Retry the command or run `taskferry --help`";
        json_object *v = json_object_new_object();
        if (!v) return NULL;
        if (json_add_string(v, PK_error, message) < 0 || json_add_string(v, PK_help, help) < 0) {
                json_object_put(v);
                return NULL;
        }
        return v;
}
