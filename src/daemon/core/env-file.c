/* The env file: grammar, checks, load at start, live reload (env-file.h). */

#include <fcntl.h>
#include <stdarg.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <systemd/sd-event.h>

#include "core/env-file.h"
#include "core/manager.h"
#include "core/settings.h"
#include "utf8.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"

struct EnvFile {
        char *path;                /* as configured */
        char *dir, *name;          /* its parent directory and last component (the watch's filter) */
        char **vars;               /* the last good load ("NAME=value"), never NULL once loaded */
        sd_event_source *watch;    /* inotify on dir, NULL if it could not be set up */
        sd_event_source *debounce; /* the reload timer, armed by each event */
};

/* ---- the grammar ---- */

/* JavaScript's WhiteSpace and LineTerminator code points (ECMA-262), what
 * String.prototype.trim() strips: TAB VT FF SP NBSP ZWNBSP(BOM), the Zs
 * category, LF CR LS PS. */
static bool js_space(unsigned long cp) {
        switch (cp) {
        case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0xA0: case 0x1680:
        case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000: case 0xFEFF:
                return true;
        default:
                return cp >= 0x2000 && cp <= 0x200A;
        }
}

/* Bytes of the white-space code point at s[0..n), 0 if none (valid UTF-8:
 * the text was sanitized). */
static size_t space_at(const unsigned char *s, size_t n) {
        Utf8Char c = utf8_decode((const char *) s, n);
        return c.status == UTF8_VALID && js_space(c.cp) ? c.len : 0;
}

/* Bytes of the white-space code point ending at s[n-1], 0 if none: the
 * one of the last 1..3 bytes that decodes to exactly the rest. */
static size_t space_before(const unsigned char *s, size_t n) {
        for (size_t k = 1; k <= 3 && k <= n; k++) {
                Utf8Char c = utf8_decode((const char *) s + n - k, k);
                if (c.status == UTF8_VALID && c.len == k) return js_space(c.cp) ? k : 0;
        }
        return 0;
}

static void trim_start(const char *s, size_t *b, size_t e) {
        size_t k;
        while (*b < e && (k = space_at((const unsigned char *) s + *b, e - *b)) > 0) *b += k;
}

static void trim(const char *s, size_t *b, size_t *e) {
        trim_start(s, b, *e);
        size_t k;
        while (*e > *b && (k = space_before((const unsigned char *) s + *b, *e - *b)) > 0) *e -= k;
}

static bool valid_name(const char *s, size_t n) {
        if (n == 0 || !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z'))) return false;
        for (size_t i = 1; i < n; i++)
                if (!(s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
                      (s[i] >= '0' && s[i] <= '9')))
                        return false;
        return true;
}

#define LINE_HELP "help: each line is NAME=value (or export NAME=value); a # comment is a line of its own"

int env_file_parse(const char *path, const char *raw, size_t raw_len, char ***ret, char **reason) {
        *ret = NULL;
        if (memchr(raw, 0, raw_len)) {
                size_t line = 1;
                for (const char *p = raw; *p; p++) line += *p == '\n';
                return set_error(reason, -EBADMSG, "error: env file %s:%zu: the line contains a NUL byte\n%s", path, line, LINE_HELP);
        }
        size_t len = 0;
        _cleanup_free_ char *s = utf8_sanitize_n(raw, raw_len, &len);
        if (!s) return -ENOMEM;
        _cleanup_strv_free_ char **vars = calloc(1, sizeof(char *));
        if (!vars) return -ENOMEM;
        size_t lineno = 0;
        for (size_t pos = 0; pos <= len; lineno++) {
                const char *nl = memchr(s + pos, '\n', len - pos);
                size_t b = pos, e = nl ? (size_t) (nl - s) : len;
                pos = nl ? e + 1 : len + 1;
                /* split on \r?\n: the \r before a \n belongs to the separator */
                if (nl && e > b && s[e - 1] == '\r') e--;
                trim(s, &b, &e);
                if (b == e || s[b] == '#') continue;
                if (e - b >= 7 && memcmp(s + b, "export ", 7) == 0) {
                        b += 7;
                        trim_start(s, &b, e);
                }
                const char *eq = memchr(s + b, '=', e - b);
                if (!eq)
                        return set_error(reason, -EBADMSG, "error: env file %s:%zu: expected NAME=value (no '=')\n%s", path, lineno + 1,
                                    LINE_HELP);
                size_t nb = b, ne = (size_t) (eq - s), vb = ne + 1, ve = e;
                trim(s, &nb, &ne);
                trim(s, &vb, &ve);
                if (!valid_name(s + nb, ne - nb))
                        return set_error(reason, -EBADMSG,
                                    "error: env file %s:%zu: invalid variable name (it must match "
                                    "[A-Za-z_][A-Za-z0-9_]*)\n%s",
                                    path, lineno + 1, LINE_HELP);
                char q = vb < ve ? s[vb] : 0;
                if (q == '"' || q == '\'') {
                        if (ve - vb < 2 || s[ve - 1] != q)
                                return set_error(reason, -EBADMSG,
                                            "error: env file %s:%zu: unterminated %s-quoted value\n"
                                            "help: a quoted value ends with its quote; nothing may follow it (there are "
                                            "no inline comments)",
                                            path, lineno + 1, q == '"' ? "double" : "single");
                        vb++, ve--;
                }
                _cleanup_free_ char *name = strndup(s + nb, ne - nb), *value = malloc(ve - vb + 1);
                if (!name || !value) return -ENOMEM;
                size_t o = 0;
                for (size_t i = vb; i < ve; i++) {
                        /* inside double quotes, \" and \\ only (one left-to-right pass) */
                        if (q == '"' && s[i] == '\\' && i + 1 < ve && (s[i + 1] == '"' || s[i + 1] == '\\')) i++;
                        value[o++] = s[i];
                }
                value[o] = 0;
                if (strv_env_set(&vars, name, value) < 0) return -ENOMEM;
        }
        *ret = TAKE_PTR(vars);
        return 0;
}

/* ---- the file ---- */

#define PATH_HELP "help: fix TASKFERRY_ENV_FILE or config.json's envFile, or unset it (TASKFERRY_ENV_FILE= disables)"

int env_file_load(const char *path, char ***ret, struct stat *ret_st, char **reason) {
        *ret = NULL;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                int r = negative_errno();
                if (r == -ENOENT) {
                        set_error(reason, -EBADMSG, "error: env file %s not found\n%s", path, PATH_HELP);
                        return -ENOENT;
                }
                set_error(reason, -EBADMSG, "error: cannot open the env file %s: %s\n%s", path, strerror(-r), PATH_HELP);
                return r;
        }
        /* on the fd, not the path: what is checked is what is read (a rename
         * between a stat and the open cannot slip another file in) */
        struct stat st;
        if (fstat(fd, &st) < 0) {
                int r = negative_errno();
                set_error(reason, -EBADMSG, "error: cannot stat the env file %s: %s", path, strerror(-r));
                return r;
        }
        if (!S_ISREG(st.st_mode)) {
                set_error(reason, -EBADMSG, "error: env file %s is not a regular file\n%s", path, PATH_HELP);
                return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
        }
        if (st.st_mode & 077) {
                set_error(reason, -EBADMSG,
                     "error: env file %s is readable by group or other (mode %04o)\n"
                     "help: it may hold secrets: chmod 600 %s",
                     path, (unsigned) (st.st_mode & 07777), path);
                return -EACCES;
        }
        if ((uint64_t) st.st_size > ENV_FILE_MAX) {
                set_error(reason, -EBADMSG, "error: env file %s is larger than %zu bytes\n%s", path, ENV_FILE_MAX, PATH_HELP);
                return -EFBIG;
        }
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0) (void) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = read_fd(fd, ENV_FILE_MAX, &text, &len);
        if (r == -EFBIG) {
                set_error(reason, -EBADMSG, "error: env file %s is larger than %zu bytes\n%s", path, ENV_FILE_MAX, PATH_HELP);
                return r;
        }
        if (r == -ENOMEM) return r;
        if (r < 0) {
                set_error(reason, -EBADMSG, "error: cannot read the env file %s: %s", path, strerror(-r));
                return r;
        }
        r = env_file_parse(path, text, len, ret, reason);
        /* the text held secrets: do not leave them in freed memory */
        explicit_bzero(text, len);
        if (r < 0) return r;
        if (ret_st) *ret_st = st;
        return 0;
}

/* ---- the manager's env file ---- */

static void vars_free(char **l) {
        for (char **e = l; e && *e; e++) explicit_bzero(*e, strlen(*e));
        strv_free(l);
}

static bool same_file_state(const struct stat *a, const struct stat *b) {
        return a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
               a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static void schedule_reload(Manager *m) {
        struct EnvFile *ef = m->env_file;
        if (!ef->debounce) return;
        /* each event resets the timer: the reload runs once the writes settle */
        (void) sd_event_source_set_time_relative(ef->debounce, ENV_FILE_DEBOUNCE_USEC);
        (void) sd_event_source_set_enabled(ef->debounce, SD_EVENT_ONESHOT);
}

/* The reload: stat, load (with its checks), stat; a change between the two
 * stats is a write still under way (a torn in-place write): try again after
 * the debounce. A good load replaces the values as a whole; a failed one
 * keeps the last good values, with a warning that names no value. */
static int on_debounce(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        struct EnvFile *ef = m->env_file;
        struct stat before, after;
        _cleanup_free_ char *err = NULL;
        char **vars = NULL;
        int r;
        if (stat(ef->path, &before) < 0) {
                r = negative_errno();
                if (r == -ENOENT)
                        log_warning("env file reload failed: env file %s not found; keeping the previous values",
                                    ef->path);
                else
                        log_warning("env file reload failed: cannot stat the env file %s: %s; keeping the previous values",
                                    ef->path, strerror(-r));
                return 0;
        }
        r = env_file_load(ef->path, &vars, NULL, &err);
        if (r == -ENOMEM) {
                log_warning("env file reload failed: out of memory; keeping the previous values");
                return 0;
        }
        if (r < 0) {
                /* the first line of the message: path, line number and rule, never content */
                const char *msg = err ? err : strerror(-r);
                if (startswith(msg, "error: ")) msg += 7;
                size_t n = strcspn(msg, "\n");
                log_warning("env file reload failed: %.*s; keeping the previous values", (int) n, msg);
                return 0;
        }
        if (stat(ef->path, &after) < 0 || !same_file_state(&before, &after)) {
                vars_free(vars);
                schedule_reload(m);
                return 0;
        }
        vars_free(ef->vars);
        ef->vars = vars;
        log_info("env file %s reloaded (%zu variables)", ef->path, strv_length(vars));
        return 0;
}

static int on_inotify(sd_event_source *s, const struct inotify_event *ev, void *userdata) {
        Manager *m = userdata;
        struct EnvFile *ef = m->env_file;
        /* events for other names are ignored; one without a name (the
         * directory itself, a queue overflow) still reloads */
        if (ev->len > 0 && !streq(ev->name, ef->name)) return 0;
        schedule_reload(m);
        return 0;
}

static int watch_start(Manager *m) {
        struct EnvFile *ef = m->env_file;
        int r = sd_event_add_time_relative(m->event, &ef->debounce, CLOCK_MONOTONIC, ENV_FILE_DEBOUNCE_USEC, 0,
                                           on_debounce, m);
        if (r < 0) return r;
        r = sd_event_source_set_enabled(ef->debounce, SD_EVENT_OFF);
        if (r < 0) return r;
        /* the directory, not the file: a rename over the file (temp + rename)
         * replaces the inode a watch on the file would hold */
        uint32_t mask = IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                        IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
        return sd_event_add_inotify(m->event, &ef->watch, ef->dir, mask, on_inotify, m);
}

static int split_path(struct EnvFile *ef) {
        const char *slash = strrchr(ef->path, '/');
        if (!slash) {
                ef->dir = strdup(".");
                ef->name = strdup(ef->path);
        } else {
                ef->dir = slash == ef->path ? strdup("/") : strndup(ef->path, (size_t) (slash - ef->path));
                ef->name = strdup(slash + 1);
        }
        return ef->dir && ef->name ? 0 : -ENOMEM;
}

int env_file_init(Manager *m, char **reason) {
        const char *path = m->settings.env_file;
        if (isempty(path)) return 0;
        struct EnvFile *ef = calloc(1, sizeof *ef);
        if (!ef) return -ENOMEM;
        m->env_file = ef;
        ef->path = strdup(path);
        if (!ef->path || split_path(ef) < 0) return -ENOMEM;
        int r = env_file_load(ef->path, &ef->vars, NULL, reason);
        if (r < 0) return r;
        if (!m->event) return 0;
        r = watch_start(m);
        if (r < 0) {
                log_warning_errno(r, "cannot watch %s for changes to the env file; live updates are off (restart the "
                                     "daemon after editing it)",
                                  ef->dir);
                ef->watch = sd_event_source_disable_unref(ef->watch);
                ef->debounce = sd_event_source_disable_unref(ef->debounce);
        }
        return 0;
}

char *const *env_file_vars(Manager *m) {
        static char *const none[] = {NULL};
        return m->env_file && m->env_file->vars ? m->env_file->vars : none;
}

void env_file_free(Manager *m) {
        struct EnvFile *ef = m->env_file;
        if (!ef) return;
        sd_event_source_disable_unref(ef->watch);
        sd_event_source_disable_unref(ef->debounce);
        vars_free(ef->vars);
        free(ef->path), free(ef->dir), free(ef->name);
        free(ef);
        m->env_file = NULL;
}
