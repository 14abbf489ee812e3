/* Logging to stderr, with syslog priorities on the journal's stream (see
 * log.h). */

#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"

static const char *log_program = "taskferry";
/* -1: not looked at yet; 0: stderr is no journal stream; 1: it is */
static int log_journal = -1;

void log_set_program(const char *name) { log_program = name; }

int log_level_priority(const char *level) {
        static const struct {
                const char *name;
                int prio;
        } map[] = {{"error", 3}, {"warning", 4}, {"notice", 5}, {"info", 6}, {"debug", 7}};
        for (size_t i = 0; level && i < ELEMENTSOF(map); i++)
                if (streq(level, map[i].name)) return map[i].prio;
        return 6;
}

bool log_fd_is_journal_stream(int fd, const char *journal_stream) {
        if (isempty(journal_stream)) return false;
        unsigned long long dev, ino;
        int n = -1;
        if (sscanf(journal_stream, "%llu:%llu%n", &dev, &ino, &n) != 2 || n < 0 || journal_stream[n]) return false;
        struct stat st;
        if (fstat(fd, &st) < 0) return false;
        return (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino;
}

void log_reset_stream(void) { log_journal = -1; }

static bool log_to_journal(void) {
        if (log_journal < 0) log_journal = log_fd_is_journal_stream(STDERR_FILENO, getenv("JOURNAL_STREAM"));
        return log_journal > 0;
}

/* Write head + text to stderr in one go; on a journal stream every line
 * starts with "<prio>" (the stream transport reads it, SyslogLevelPrefix=).
 * indent: a formatted message (log_msg), whose arguments may carry text a
 * worker chose (a bind path, a model name): its lines after the first start
 * with two spaces, so none can pass for a line of its own ("taskferryd:
 * error: ..."), and control characters other than a tab are written as
 * \xNN (a CR would overwrite the head on a terminal). */
static void log_emit(int prio, const char *head, const char *text, bool indent) {
        bool journal = log_to_journal();
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f) {
                fprintf(stderr, "%s%s\n", head, text);
                return;
        }
        const char *s = text;
        bool first = true;
        do {
                const char *nl = strchr(s, '\n');
                size_t n = nl ? (size_t) (nl - s) : strlen(s);
                if (!first && !nl && n == 0) break; /* a trailing newline ends the text */
                if (journal) fprintf(f, "<%d>", prio);
                if (first) fputs(head, f);
                else if (indent) fputs("  ", f);
                for (size_t i = 0; i < n; i++) {
                        unsigned char c = (unsigned char) s[i];
                        if (indent && ((c < 0x20 && c != '\t') || c == 0x7f)) fprintf(f, "\\x%02x", c);
                        else fputc(c, f);
                }
                fputc('\n', f);
                first = false;
                s = nl ? nl + 1 : NULL;
        } while (s);
        if (fclose(f) != 0) return;
        fwrite(buf, 1, len, stderr);
        fflush(stderr);
}

static void log_vemit(const char *level, bool with_errno, int r, const char *fmt, va_list ap) {
        _cleanup_free_ char *msg = NULL, *head = NULL;
        if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
        if (asprintf(&head, "%s: %s: ", log_program, level) < 0) head = NULL;
        _cleanup_free_ char *full = NULL;
        if (with_errno && asprintf(&full, "%s: %s", strempty(msg), strerror(r < 0 ? -r : r)) < 0) full = NULL;
        log_emit(log_level_priority(level), strempty(head), with_errno ? strempty(full) : strempty(msg), true);
}

void log_msg(const char *level, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        log_vemit(level, false, 0, fmt, ap);
        va_end(ap);
}

int log_errno_msg(const char *level, int r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        log_vemit(level, true, r, fmt, ap);
        va_end(ap);
        return r;
}

void log_text(const char *level, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *msg = NULL;
        if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
        va_end(ap);
        log_emit(log_level_priority(level), "", strempty(msg), false);
}
