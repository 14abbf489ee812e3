#include "util.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "process-util.h"

extern char **environ;

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

/* ---- strv ---- */

void strv_free(char **l) {
        if (!l) return;
        for (char **i = l; *i; i++) free(*i);
        free(l);
}

size_t strv_length(char *const *l) {
        size_t n = 0;
        if (l)
                while (l[n]) n++;
        return n;
}

int strv_consume(char ***l, char *s) {
        if (!s) return -ENOMEM;
        size_t n = strv_length(*l);
        char **nl = *l;
        /* grow geometrically: a realloc per push copied the list each time
         * (under AddressSanitizer always), O(n^2) for a list of n paths */
        if (!nl || malloc_usable_size(nl) < sizeof(char *) * (n + 2)) {
                size_t want = n + 2 < 8 ? 8 : 2 * (n + 2);
                nl = reallocarray(*l, want, sizeof(char *));
        }
        if (!nl) {
                free(s);
                return -ENOMEM;
        }
        nl[n] = s;
        nl[n + 1] = NULL;
        *l = nl;
        return 0;
}

int strv_push(char ***l, const char *s) { return strv_consume(l, strdup(s)); }

int strv_pushf(char ***l, const char *fmt, ...) {
        va_list ap;
        char *s = NULL;
        va_start(ap, fmt);
        int r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0) return -ENOMEM;
        return strv_consume(l, s);
}

bool strv_contains(char *const *l, const char *s) {
        if (!l) return false;
        for (; *l; l++)
                if (streq(*l, s)) return true;
        return false;
}

char **strv_copy(char *const *l) {
        char **n = calloc(strv_length(l) + 1, sizeof(char *));
        if (!n) return NULL;
        size_t i = 0;
        if (l)
                for (; l[i]; i++)
                        if (!(n[i] = strdup(l[i]))) {
                                strv_free(n);
                                return NULL;
                        }
        return n;
}

/* ---- strings ---- */

int set_error(char **ret_error, int r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *s = NULL;
        int n = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (n < 0) return -ENOMEM;
        free(*ret_error);
        *ret_error = s;
        return r;
}

char *strdup_printf(const char *fmt, ...) {
        va_list ap;
        char *s = NULL;
        va_start(ap, fmt);
        int r = vasprintf(&s, fmt, ap);
        va_end(ap);
        return r < 0 ? NULL : s;
}

char *shell_quote(const char *s) {
        size_t n = 3;
        for (const char *p = s; *p; p++) n += *p == '\'' ? 4 : 1;
        char *out = malloc(n), *o = out;
        if (!out) return NULL;
        *o++ = '\'';
        for (const char *p = s; *p; p++) {
                if (*p == '\'') {
                        memcpy(o, "'\\''", 4);
                        o += 4;
                } else
                        *o++ = *p;
        }
        *o++ = '\'';
        *o = 0;
        return out;
}

/* Decode one UTF-8 sequence; returns its byte length (>=1) and the code point
 * in *cp, or 1 with *cp = -1 for an invalid byte. */
static size_t utf8_next(const unsigned char *s, size_t len, long *cp) {
        unsigned char c = s[0];
        size_t n;
        long v;
        if (c < 0x80) { *cp = c; return 1; }
        else if ((c & 0xE0) == 0xC0) { n = 2; v = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { n = 3; v = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { n = 4; v = c & 0x07; }
        else { *cp = -1; return 1; }
        if (n > len) { *cp = -1; return 1; }
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xC0) != 0x80) { *cp = -1; return 1; }
                v = (v << 6) | (s[i] & 0x3F);
        }
        *cp = v;
        return n;
}

size_t utf8_utf16_length(const char *s, size_t len) {
        size_t units = 0;
        for (size_t i = 0; i < len;) {
                long cp;
                i += utf8_next((const unsigned char *) s + i, len - i, &cp);
                units += cp >= 0x10000 ? 2 : 1;
        }
        return units;
}

size_t utf8_codepoints(const char *s, size_t len) {
        size_t n = 0;
        for (size_t i = 0; i < len; n++) {
                long cp;
                i += utf8_next((const unsigned char *) s + i, len - i, &cp);
        }
        return n;
}

size_t utf8_tail_offset(const char *s, size_t len, size_t n) {
        size_t total = utf8_codepoints(s, len);
        if (total <= n) return 0;
        size_t skip = total - n, i = 0;
        while (skip-- > 0 && i < len) {
                long cp;
                i += utf8_next((const unsigned char *) s + i, len - i, &cp);
        }
        return i;
}

char *utf8_sanitize(const char *s, size_t len) { return utf8_sanitize_n(s, len, NULL); }

char *utf8_sanitize_n(const char *s, size_t len, size_t *ret_len) {
        char *out = malloc(len * 3 + 1), *o = out;
        if (!out) return NULL;
        for (size_t i = 0; i < len;) {
                long cp;
                size_t n = utf8_next((const unsigned char *) s + i, len - i, &cp);
                bool bad = cp < 0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF ||
                           (n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
                if (bad) {
                        memcpy(o, "\xEF\xBF\xBD", 3);
                        o += 3;
                        i += cp < 0 ? 1 : n;
                } else {
                        memcpy(o, s + i, n);
                        o += n;
                        i += n;
                }
        }
        *o = 0;
        if (ret_len) *ret_len = (size_t) (o - out);
        return out;
}

size_t utf8_prefix_utf16(const char *s, size_t len, size_t units) {
        size_t i = 0, u = 0;
        while (i < len) {
                long cp;
                size_t n = utf8_next((const unsigned char *) s + i, len - i, &cp);
                size_t w = cp >= 0x10000 ? 2 : 1;
                if (u + w > units) break;
                u += w;
                i += n;
        }
        return i;
}

/* ---- time ---- */

uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

uint64_t mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

char *format_iso(uint64_t ms, char buf[static 32]) {
        time_t t = (time_t) (ms / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
        snprintf(buf, 32, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", (tm.tm_year + 1900) % 10000, (tm.tm_mon + 1) % 100,
                 tm.tm_mday % 100, tm.tm_hour % 100, tm.tm_min % 100, tm.tm_sec % 100, (unsigned) (ms % 1000));
        return buf;
}

int parse_iso(const char *s, uint64_t *ret_ms) {
        struct tm tm = {0};
        unsigned msec = 0;
        int n = 0;
        if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%3uZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &msec, &n) != 7 || s[n] != 0)
                return -EINVAL;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        time_t t = timegm(&tm);
        if (t == (time_t) -1) return -EINVAL;
        *ret_ms = (uint64_t) t * 1000 + msec;
        return 0;
}

/* ---- ids ---- */

int uuid4(char out[static 37]) {
        uint8_t b[16];
        size_t got = 0;
        while (got < sizeof b) {
                ssize_t n = getrandom(b + got, sizeof b - got, 0);
                if (n < 0) {
                        if (errno == EINTR) continue;
                        return -errno;
                }
                got += (size_t) n;
        }
        b[6] = (b[6] & 0x0F) | 0x40;
        b[8] = (b[8] & 0x3F) | 0x80;
        snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                 b[13], b[14], b[15]);
        return 0;
}

char *task_id_new(void) {
        char u[37], b36[16], rev[16];
        if (uuid4(u) < 0) return NULL;
        uint64_t ms = now_ms();
        size_t n = 0;
        do {
                rev[n++] = "0123456789abcdefghijklmnopqrstuvwxyz"[ms % 36];
                ms /= 36;
        } while (ms && n < sizeof rev);
        for (size_t i = 0; i < n; i++) b36[i] = rev[n - 1 - i];
        b36[n] = 0;
        return strdup_printf("oc_%s_%.8s", b36, u);
}

bool task_id_is_valid(const char *s) {
        if (!s || !*s || strlen(s) > 64) return false;
        if (streq(s, ".") || streq(s, "..")) return false;
        for (const char *p = s; *p; p++)
                if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') ||
                      ('0' <= *p && *p <= '9') || *p == '_' || *p == '-'))
                        return false;
        return true;
}

/* ---- files ---- */

static int fsync_parent(const char *path) {
        _cleanup_free_ char *dir = strdup(path);
        if (!dir) return -ENOMEM;
        char *slash = strrchr(dir, '/');
        if (!slash) return 0;
        if (slash == dir) slash[1] = 0;
        else *slash = 0;
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) return -errno;
        if (fsync(fd) < 0) return -errno;
        return 0;
}

int loop_write(int fd, const void *buf, size_t len) {
        const char *p = buf;
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR) continue;
                        return -errno;
                }
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode) {
        char u[37];
        int r = uuid4(u);
        if (r < 0) return r;
        _cleanup_free_ char *dir = strdup(path);
        if (!dir) return -ENOMEM;
        char *slash = strrchr(dir, '/');
        const char *base = slash ? slash + 1 : path;
        if (slash) slash[1] = 0;
        else dir[0] = 0;
        _cleanup_free_ char *tmp = strdup_printf("%s.%s-%.8s.tmp", dir, base, u);
        if (!tmp) return -ENOMEM;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0) return -errno;
        if (fchmod(fd, mode) < 0) goto fail;
        r = loop_write(fd, data, len);
        if (r < 0) {
                errno = -r;
                goto fail;
        }
        if (fsync(fd) < 0) goto fail;
        if (close(fd) < 0) {
                fd = -1;
                goto fail;
        }
        fd = -1;
        if (rename(tmp, path) < 0) goto fail;
        (void) fsync_parent(path);
        return 0;
fail:
        r = negative_errno();
        if (fd >= 0) close(fd);
        unlink(tmp);
        return r;
}

int read_fd(int fd, size_t max, char **ret, size_t *ret_len) {
        size_t cap = 4096, len = 0;
        _cleanup_free_ char *buf = malloc(cap + 1);
        if (!buf) return -ENOMEM;
        for (;;) {
                if (len == cap) {
                        if (cap >= max + 1) return -EFBIG;
                        size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
                        char *nb = realloc(buf, ncap + 1);
                        if (!nb) return -ENOMEM;
                        buf = nb;
                        cap = ncap;
                }
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0) {
                        if (errno == EINTR) continue;
                        return -errno;
                }
                if (n == 0) break;
                len += (size_t) n;
                if (len > max) return -EFBIG;
        }
        buf[len] = 0;
        if (ret_len) *ret_len = len;
        *ret = TAKE_PTR(buf);
        return 0;
}

int read_file(const char *path, size_t max, char **ret, size_t *ret_len) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) return -errno;
        return read_fd(fd, max, ret, ret_len);
}

int mkdir_p(const char *path, mode_t mode) {
        _cleanup_free_ char *p = strdup(path);
        if (!p) return -ENOMEM;
        size_t n = strlen(p);
        while (n > 1 && p[n - 1] == '/') p[--n] = 0;
        for (char *s = p + 1; *s; s++) {
                if (*s != '/') continue;
                *s = 0;
                if (mkdir(p, mode) < 0 && errno != EEXIST) return -errno;
                *s = '/';
        }
        if (mkdir(p, mode) < 0) {
                if (errno != EEXIST) return -errno;
                if (!is_dir(p)) return -ENOTDIR;
        }
        return 0;
}

int mkdir_p_chmod(const char *path, mode_t mode) {
        int r = mkdir_p(path, mode);
        if (r < 0) return r;
        if (chmod(path, mode) < 0) return -errno;
        return 0;
}

static int rm_rf_at(int dfd, const char *name) {
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode)) {
                if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT) return -errno;
                return 0;
        }
        if ((st.st_mode & 0700) != 0700) (void) fchmodat(dfd, name, (st.st_mode & 07777) | 0700, 0);
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }
        int r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, "..")) continue;
                int k = rm_rf_at(dirfd(d), de->d_name);
                if (k < 0 && r == 0) r = k;
        }
        closedir(d);
        if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0) r = -errno;
        return r;
}

int rm_rf(const char *path) { return rm_rf_at(AT_FDCWD, path); }

bool path_is_at_or_below(const char *path, const char *dir) {
        size_t n = strlen(dir);
        if (n == 1 && dir[0] == '/') return true;
        return strncmp(path, dir, n) == 0 && (path[n] == 0 || path[n] == '/');
}

bool paths_overlap(const char *a, const char *b) { return path_is_at_or_below(a, b) || path_is_at_or_below(b, a); }

bool is_dir(const char *path) {
        struct stat st;
        return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int find_executable(const char *name, const char *path_env, char **ret) {
        if (strchr(name, '/')) {
                if (access(name, X_OK) < 0) return -errno;
                *ret = strdup(name);
                return *ret ? 0 : -ENOMEM;
        }
        if (!path_env) path_env = getenv("PATH");
        if (!path_env) path_env = "/usr/local/bin:/usr/bin:/bin";
        _cleanup_free_ char *copy = strdup(path_env);
        if (!copy) return -ENOMEM;
        char *save = NULL;
        for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
                if (!*dir) continue;
                _cleanup_free_ char *p = strdup_printf("%s/%s", dir, name);
                if (!p) return -ENOMEM;
                struct stat st;
                if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0) {
                        *ret = TAKE_PTR(p);
                        return 0;
                }
        }
        return -ENOENT;
}

int self_exe_dir(char **ret) {
        char buf[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
        if (n < 0) return -errno;
        buf[n] = 0;
        char *slash = strrchr(buf, '/');
        if (!slash) return -EINVAL;
        *slash = 0;
        *ret = strdup(buf);
        return *ret ? 0 : -ENOMEM;
}

/* ---- child processes ---- */

void run_result_done(run_result *r) {
        free(r->out);
        free(r->err);
        r->out = r->err = NULL;
}

static int append_buf(char **buf, size_t *len, size_t *cap, const char *data, size_t n) {
        if (*len + n + 1 > *cap) {
                size_t ncap = (*cap ? *cap : 4096);
                while (ncap < *len + n + 1) ncap *= 2;
                char *nb = realloc(*buf, ncap);
                if (!nb) return -ENOMEM;
                *buf = nb;
                *cap = ncap;
        }
        memcpy(*buf + *len, data, n);
        *len += n;
        (*buf)[*len] = 0;
        return 0;
}

int run_command(char *const argv[], char *const envp[], const char *cwd, size_t max_out,
                int stdout_fd, run_result *res) {
        int outp[2] = {-1, -1}, errp[2] = {-1, -1};
        memset(res, 0, sizeof *res);
        _cleanup_free_ char *exe = NULL;
        int r = find_executable(argv[0], envp ? strv_env_get(envp, "PATH") : NULL, &exe);
        if (r < 0) return r;
        if (pipe2(errp, O_CLOEXEC) < 0) return -errno;
        bool capture = stdout_fd < 0 && max_out > 0;
        if (capture && pipe2(outp, O_CLOEXEC) < 0) {
                r = -errno;
                close(errp[0]);
                close(errp[1]);
                return r;
        }
        /* the caller waits for it: it never outlives the caller (a daemon job
         * killed with its daemon takes its git along) */
        pid_t pid;
        r = safe_fork(argv[0], FORK_DEATHSIG_SIGKILL | FORK_RESET_SIGNALS, &pid);
        if (r < 0) {
                safe_close(outp[0]), safe_close(outp[1]), safe_close(errp[0]), safe_close(errp[1]);
                return r;
        }
        if (r == 0) {
                int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (devnull < 0) _exit(127);
                dup2(devnull, 0);
                if (stdout_fd >= 0) dup2(stdout_fd, 1);
                else if (capture) dup2(outp[1], 1);
                else dup2(devnull, 1);
                dup2(errp[1], 2);
                if (cwd && chdir(cwd) < 0) {
                        dprintf(2, "chdir %s: %s\n", cwd, strerror(errno));
                        _exit(127);
                }
                execve(exe, argv, envp ? envp : environ);
                dprintf(2, "exec %s: %s\n", exe, strerror(errno));
                _exit(127);
        }
        safe_close(outp[1]);
        safe_close(errp[1]);
        size_t olen = 0, ocap = 0, elen = 0, ecap = 0;
        char *obuf = NULL, *ebuf = NULL;
        bool too_big = false;
        struct pollfd pfd[2] = {{.fd = capture ? outp[0] : -1, .events = POLLIN},
                                {.fd = errp[0], .events = POLLIN}};
        int open_fds = capture ? 2 : 1;
        char chunk[65536];
        while (open_fds > 0) {
                if (poll(pfd, 2, -1) < 0) {
                        if (errno == EINTR) continue;
                        break;
                }
                for (int i = 0; i < 2; i++) {
                        if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                        ssize_t n = read(pfd[i].fd, chunk, sizeof chunk);
                        if (n < 0 && errno == EINTR) continue;
                        if (n <= 0) {
                                close(pfd[i].fd);
                                pfd[i].fd = -1;
                                open_fds--;
                                continue;
                        }
                        if (i == 0) {
                                if (olen + (size_t) n > max_out) too_big = true;
                                else if (append_buf(&obuf, &olen, &ocap, chunk, (size_t) n) < 0) too_big = true;
                        } else if (elen < 65536)
                                (void) append_buf(&ebuf, &elen, &ecap, chunk, (size_t) n);
                }
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (WIFEXITED(status)) {
                res->exit_code = WEXITSTATUS(status);
                res->signal = 0;
        } else {
                res->exit_code = -1;
                res->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        }
        if (capture && !obuf) obuf = strdup("");
        if (!ebuf) ebuf = strdup("");
        res->out = obuf;
        res->out_len = olen;
        res->err = ebuf;
        res->err_len = elen;
        if (too_big) {
                run_result_done(res);
                return -EFBIG;
        }
        return 0;
}

const char *strv_env_get(char *const *env, const char *name) {
        size_t n = strlen(name);
        if (!env) return NULL;
        for (; *env; env++)
                if (strncmp(*env, name, n) == 0 && (*env)[n] == '=') return *env + n + 1;
        return NULL;
}

int strv_env_unset(char ***env, const char *name) {
        size_t n = strlen(name), j = 0;
        if (!*env) return 0;
        for (size_t i = 0; (*env)[i]; i++) {
                if (strncmp((*env)[i], name, n) == 0 && (*env)[i][n] == '=') {
                        free((*env)[i]);
                        continue;
                }
                (*env)[j++] = (*env)[i];
        }
        (*env)[j] = NULL;
        return 0;
}

int strv_env_set(char ***env, const char *name, const char *value) {
        strv_env_unset(env, name);
        return strv_pushf(env, "%s=%s", name, value);
}

const char *signal_to_name(int sig) {
        static const struct { int sig; const char *name; } table[] = {
                {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
                {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
                {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
                {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGCHLD, "SIGCHLD"},
                {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"}, {SIGTTIN, "SIGTTIN"},
                {SIGTTOU, "SIGTTOU"}, {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (table[i].sig == sig) return table[i].name;
        return NULL;
}
