/* Provider cooldown: parking a provider after it said when to retry
 * (cooldown.h). Owns Manager.cooldowns/n_cooldowns. */

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/cooldown.h"
#include "executor.h"
#include "logparse.h"
#include "core/manager.h"
#include "protocol-keys.h"
#include "core/scheduler.h"
#include "core/task.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "time-util.h"

static bool ends_with(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);
        return a >= b && streq(s + a - b, suffix);
}

bool cooldown_reason_applies(const char *r) {
        return r && (ends_with(r, "rate_limited") || ends_with(r, "payment_required"));
}

/* ---- parsing a retry hint ---- */

static bool is_alpha(char c) { return c >= 'a' && c <= 'z'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static size_t skip_sep(const char *s, size_t i, size_t n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '"' || s[i] == '\'' || s[i] == ':' || s[i] == '=' ||
                         s[i] == '\\'))
                i++;
        return i;
}

/* digits [. digits]; true and *v if at least one digit */
static bool parse_number(const char *s, size_t *i, size_t n, double *v) {
        size_t j = *i;
        double x = 0;
        bool any = false;
        while (j < n && is_digit(s[j]) && j - *i < 18) x = x * 10 + (s[j++] - '0'), any = true;
        if (!any) return false;
        if (j + 1 < n && s[j] == '.' && is_digit(s[j + 1])) {
                j++;
                double f = 0.1;
                while (j < n && is_digit(s[j])) x += f * (s[j++] - '0'), f /= 10;
        }
        *v = x;
        *i = j;
        return true;
}

/* a unit word right after a number (one blank allowed): ms factor */
static bool parse_unit(const char *s, size_t *i, size_t n, double *mult) {
        static const struct {
                const char *w;
                double ms;
        } units[] = {
                {"ms", 1},        {"msec", 1},      {"msecs", 1},   {"millisecond", 1}, {"milliseconds", 1},
                {"s", 1000},      {"sec", 1000},    {"secs", 1000}, {"second", 1000},   {"seconds", 1000},
                {"m", 60000},     {"min", 60000},   {"mins", 60000}, {"minute", 60000}, {"minutes", 60000},
                {"h", 3600000},   {"hr", 3600000},  {"hrs", 3600000}, {"hour", 3600000}, {"hours", 3600000},
                {"d", 86400000},  {"day", 86400000}, {"days", 86400000},
        };
        size_t j = *i;
        if (j < n && s[j] == ' ') j++;
        size_t w = j;
        while (j < n && is_alpha(s[j])) j++;
        if (j == w) return false;
        for (size_t k = 0; k < ELEMENTSOF(units); k++)
                if (strlen(units[k].w) == j - w && strncmp(s + w, units[k].w, j - w) == 0) {
                        *mult = units[k].ms;
                        *i = j;
                        return true;
                }
        return false;
}

/* "20s", "1m30s", "2 minutes 5 seconds", or (bare_seconds) "20" */
static bool parse_duration(const char *s, size_t *i, size_t n, bool bare_seconds, double *ret_ms) {
        size_t j = *i;
        double total = 0;
        bool any = false;
        for (;;) {
                size_t k = j;
                double v, mult;
                if (!parse_number(s, &k, n, &v)) break;
                if (!parse_unit(s, &k, n, &mult)) {
                        if (!any && bare_seconds) {
                                total = v * 1000;
                                any = true;
                                j = k;
                        }
                        break;
                }
                total += v * mult;
                any = true;
                j = k;
                if (j < n && s[j] == ' ') j++; /* "1h 5m" */
        }
        if (!any) return false;
        *i = j;
        *ret_ms = total;
        return true;
}

static bool parse_fixed(const char *s, size_t n, size_t at, size_t digits, int *ret) {
        int v = 0;
        for (size_t k = 0; k < digits; k++) {
                if (at + k >= n || !is_digit(s[at + k])) return false;
                v = v * 10 + (s[at + k] - '0');
        }
        *ret = v;
        return true;
}

/* YYYY-MM-DD[t ]HH:MM[:SS[.fff]][z|±HH[:]MM] (no zone: UTC) → epoch ms */
static bool parse_iso8601(const char *s, size_t i, size_t n, double *ret_ms) {
        int Y, M, D, h, mi, sec = 0;
        if (!parse_fixed(s, n, i, 4, &Y) || i + 4 >= n || s[i + 4] != '-' || !parse_fixed(s, n, i + 5, 2, &M) ||
            i + 7 >= n || s[i + 7] != '-' || !parse_fixed(s, n, i + 8, 2, &D) || i + 10 >= n ||
            (s[i + 10] != 't' && s[i + 10] != ' ') || !parse_fixed(s, n, i + 11, 2, &h) || i + 13 >= n ||
            s[i + 13] != ':' || !parse_fixed(s, n, i + 14, 2, &mi))
                return false;
        size_t j = i + 16;
        double frac = 0;
        if (j < n && s[j] == ':' && parse_fixed(s, n, j + 1, 2, &sec)) {
                j += 3;
                if (j + 1 < n && s[j] == '.' && is_digit(s[j + 1])) {
                        j++;
                        double f = 0.1;
                        while (j < n && is_digit(s[j])) frac += f * (s[j++] - '0'), f /= 10;
                }
        }
        long off = 0;
        if (j < n && (s[j] == '+' || s[j] == '-')) {
                int oh, om = 0;
                if (parse_fixed(s, n, j + 1, 2, &oh)) {
                        size_t k = j + 3;
                        if (k < n && s[k] == ':') k++;
                        (void) parse_fixed(s, n, k, 2, &om);
                        off = (s[j] == '+' ? 1 : -1) * (oh * 3600L + om * 60L);
                }
        }
        if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || mi > 59 || sec > 60) return false;
        struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = mi, .tm_sec = sec};
        time_t t = timegm(&tm);
        if (t == (time_t) -1) return false;
        *ret_ms = ((double) t - (double) off + frac) * 1000.0;
        return true;
}

/* "wed, 21 oct 2026 07:28:00 gmt" (RFC 9110 IMF-fixdate) → epoch ms */
static bool parse_http_date(const char *s, size_t i, size_t n, double *ret_ms) {
        static const char *const mon[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                          "jul", "aug", "sep", "oct", "nov", "dec"};
        size_t j = i;
        while (j < n && is_alpha(s[j])) j++;
        if (j - i != 3 || j + 1 >= n || s[j] != ',' || s[j + 1] != ' ') return false;
        j += 2;
        int D, Y, h, mi, sec, M = -1;
        if (!parse_fixed(s, n, j, 2, &D) || j + 2 >= n || s[j + 2] != ' ' || j + 6 >= n) return false;
        for (int k = 0; k < 12; k++)
                if (strncmp(s + j + 3, mon[k], 3) == 0) M = k;
        if (M < 0 || s[j + 6] != ' ' || !parse_fixed(s, n, j + 7, 4, &Y) || j + 11 >= n || s[j + 11] != ' ' ||
            !parse_fixed(s, n, j + 12, 2, &h) || !parse_fixed(s, n, j + 15, 2, &mi) || !parse_fixed(s, n, j + 18, 2, &sec))
                return false;
        struct tm tm = {.tm_year = Y - 1900, .tm_mon = M, .tm_mday = D, .tm_hour = h, .tm_min = mi, .tm_sec = sec};
        time_t t = timegm(&tm);
        if (t == (time_t) -1) return false;
        *ret_ms = (double) t * 1000.0;
        return true;
}

/* an absolute epoch ms → ms from now (false if not in the future) */
static bool until(double at_ms, uint64_t now_real_ms, double *ret) {
        if (at_ms <= (double) now_real_ms) return false;
        *ret = at_ms - (double) now_real_ms;
        return true;
}

static bool after_retry_after(const char *s, size_t j, size_t n, uint64_t now, double *ret) {
        bool ms = false;
        if (j < n && (s[j] == '-' || s[j] == '_') && j + 2 < n && s[j + 1] == 'm' && s[j + 2] == 's') ms = true, j += 3;
        else if (j + 1 < n && s[j] == 'm' && s[j + 1] == 's') ms = true, j += 2;
        if (j < n && is_alpha(s[j])) return false; /* "retry-afterwards" */
        j = skip_sep(s, j, n);
        double v;
        if (ms) {
                if (!parse_number(s, &j, n, &v)) return false;
                *ret = v;
                return true;
        }
        if (parse_http_date(s, j, n, &v)) return until(v, now, ret);
        return parse_duration(s, &j, n, true, ret);
}

static bool after_reset(const char *s, size_t j, size_t n, uint64_t now, double *ret) {
        if (j < n && s[j] == 's') j++;
        while (j < n && (is_alpha(s[j]) || s[j] == '-' || s[j] == '_')) j++; /* header suffix: -requests, _at */
        j = skip_sep(s, j, n);
        if (j + 2 < n && (strncmp(s + j, "at ", 3) == 0 || strncmp(s + j, "in ", 3) == 0 || strncmp(s + j, "on ", 3) == 0))
                j += 3;
        while (j < n && s[j] == ' ') j++;
        double v;
        if (parse_iso8601(s, j, n, &v)) return until(v, now, ret);
        size_t digits = 0;
        while (j + digits < n && is_digit(s[j + digits])) digits++;
        if (digits == 10 || digits == 13) {
                size_t k = j + digits;
                if (k >= n || !is_alpha(s[k])) {
                        double e = 0;
                        for (size_t d = 0; d < digits; d++) e = e * 10 + (s[j + d] - '0');
                        return until(digits == 10 ? e * 1000 : e, now, ret);
                }
        }
        return parse_duration(s, &j, n, true, ret);
}

int cooldown_parse_hint(const char *text, size_t len, uint64_t now_real_ms, uint64_t *ret_ms) {
        if (!text || len == 0) return 0;
        _cleanup_free_ char *s = malloc(len + 1);
        if (!s) return -ENOMEM;
        for (size_t i = 0; i < len; i++) s[i] = text[i] ? (char) tolower((unsigned char) text[i]) : ' ';
        s[len] = 0;
        size_t n = len;
        double best[3] = {-1, -1, -1};
        for (const char *p = s; (p = strstr(p, "retry")); p += 5) {
                size_t j = (size_t) (p - s) + 5;
                double v;
                if (j < n && (s[j] == '-' || s[j] == '_' || s[j] == ' ')) j++;
                if (j + 5 <= n && strncmp(s + j, "after", 5) == 0) {
                        if (after_retry_after(s, j + 5, n, now_real_ms, &v) && v > best[0]) best[0] = v;
                } else if (j + 2 <= n && strncmp(s + j, "in", 2) == 0 && (j + 2 == n || !is_alpha(s[j + 2]))) {
                        size_t k = j + 2;
                        while (k < n && s[k] == ' ') k++;
                        if (parse_duration(s, &k, n, true, &v) && v > best[1]) best[1] = v;
                }
        }
        for (const char *p = s; (p = strstr(p, "try again in")); p += 12) {
                size_t k = (size_t) (p - s) + 12;
                double v;
                while (k < n && s[k] == ' ') k++;
                if (parse_duration(s, &k, n, true, &v) && v > best[1]) best[1] = v;
        }
        for (const char *p = s; (p = strstr(p, "reset")); p += 5) {
                double v;
                if (after_reset(s, (size_t) (p - s) + 5, n, now_real_ms, &v) && v > best[2]) best[2] = v;
        }
        for (size_t k = 0; k < ELEMENTSOF(best); k++)
                if (best[k] > 0) {
                        double c = best[k] > (double) COOLDOWN_MAX_MS ? (double) COOLDOWN_MAX_MS : best[k];
                        *ret_ms = (uint64_t) (c + 0.999);
                        return 1;
                }
        return 0;
}

/* ---- scanning a log ---- */

static bool has_hint_word(const char *line, size_t len) {
        static const char *const words[] = {"retry", "try again", "reset"};
        for (size_t i = 0; i < ELEMENTSOF(words); i++) {
                size_t w = strlen(words[i]);
                for (size_t k = 0; k + w <= len; k++)
                        if (strncasecmp(line + k, words[i], w) == 0) return true;
        }
        return false;
}

/* a raw line that is only a Retry-After header: "Retry-After: 3" */
static bool is_retry_header(const char *line, size_t len) {
        size_t i = 0;
        while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
        if (i < len && (line[i] == '{' || line[i] == '[')) return false;
        return len - i >= 11 && strncasecmp(line + i, "retry-after", 11) == 0;
}

int cooldown_scan_log(const char *path, const char *prefix, const char *structured_prefix, uint64_t now_real_ms,
                      uint64_t *ret_ms) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) return errno == ENOENT ? 0 : -errno;
        struct stat st;
        if (fstat(fd, &st) < 0) return -errno;
        if (!S_ISREG(st.st_mode)) return 0;
        off_t start = st.st_size > (off_t) COOLDOWN_SCAN_BYTES ? st.st_size - (off_t) COOLDOWN_SCAN_BYTES : 0;
        _cleanup_free_ char *buf = malloc(COOLDOWN_SCAN_BYTES + 1);
        if (!buf) return -ENOMEM;
        size_t got = 0;
        while (got < COOLDOWN_SCAN_BYTES) {
                ssize_t k = pread(fd, buf + got, COOLDOWN_SCAN_BYTES - got, start + (off_t) got);
                if (k < 0 && errno == EINTR) continue;
                if (k < 0) return -errno;
                if (k == 0) break;
                got += (size_t) k;
        }
        buf[got] = 0;
        size_t i = 0;
        if (start > 0) { /* the first line is cut */
                while (i < got && buf[i] != '\n') i++;
                i++;
        }
        bool found = false;
        uint64_t last = 0;
        while (i < got) {
                size_t e = i;
                while (e < got && buf[e] != '\n') e++;
                const char *line = buf + i;
                size_t len = e - i;
                i = e + 1;
                if (len == 0 || !has_hint_word(line, len)) continue;
                bool relevant = is_retry_header(line, len);
                if (!relevant) {
                        _cleanup_free_ char *reason = NULL;
                        int r = log_classify_line(line, len, prefix, structured_prefix, &reason, NULL);
                        if (r < 0) return r;
                        relevant = r > 0 && cooldown_reason_applies(reason);
                }
                if (!relevant) continue;
                uint64_t ms;
                int r = cooldown_parse_hint(line, len, now_real_ms, &ms);
                if (r < 0) return r;
                if (r > 0) found = true, last = ms;
        }
        if (found) *ret_ms = last;
        return found;
}

/* ---- settlement glue ---- */

void cooldown_settle_scan(Task *t, json_object *res) {
        if (!res || !t->m->settings.provider_cooldown_enabled || t->rec.dispatched_by || !t->rec.log_path) return;
        const char *reason = t->rec.failure_reason ? t->rec.failure_reason : json_get_string(res, PK_failureReason);
        if (!cooldown_reason_applies(reason)) return;
        const executor *ex = executor_find(strempty(t->rec.executor_id));
        uint64_t ms = 0;
        if (cooldown_scan_log(t->rec.log_path, ex ? ex->failure_prefix : NULL, ex ? ex->structured_prefix : NULL,
                              now_ms(), &ms) > 0)
                json_add_int(res, "retryAfterMs", (int64_t) ms);
}

void cooldown_settle_apply(Task *t, json_object *res) {
        int64_t ms = 0;
        if (!res || !t->m->settings.provider_cooldown_enabled || t->rec.dispatched_by ||
            !cooldown_reason_applies(t->rec.failure_reason) || !json_get_int64(res, "retryAfterMs", &ms) || ms <= 0)
                return;
        size_t len = scheduler_provider_key_len(t->rec.model);
        _cleanup_free_ char *key = strndup(t->rec.model ? t->rec.model : "", len);
        if (!key || cooldown_start(t->m, key, (uint64_t) ms, t->rec.failure_reason, t->id) < 0)
                log_error("cannot start the cooldown after task %s: out of memory", t->id);
}

/* ---- the table ---- */

static void cooldown_done(ProviderCooldown *c) {
        free(c->provider);
        free(c->reason);
        free(c->task_id);
}

static void prune_expired(Manager *m, uint64_t now) {
        size_t k = 0;
        for (size_t i = 0; i < m->n_cooldowns; i++) {
                if (m->cooldowns[i].until_mono > now) m->cooldowns[k++] = m->cooldowns[i];
                else cooldown_done(&m->cooldowns[i]);
        }
        m->n_cooldowns = k;
}

int cooldown_start(Manager *m, const char *provider, uint64_t ms, const char *reason, const char *task_id) {
        if (ms > COOLDOWN_MAX_MS) ms = COOLDOWN_MAX_MS;
        uint64_t now = mono_ms();
        prune_expired(m, now);
        ProviderCooldown *c = NULL;
        for (size_t i = 0; i < m->n_cooldowns && !c; i++)
                if (streq(m->cooldowns[i].provider, provider)) c = &m->cooldowns[i];
        if (c && c->until_mono >= now + ms) return 0;
        _cleanup_free_ char *r = reason ? strdup(reason) : NULL, *id = task_id ? strdup(task_id) : NULL;
        if ((reason && !r) || (task_id && !id)) return -ENOMEM;
        if (!c) {
                char *p = strdup(provider);
                ProviderCooldown *n = p ? reallocarray(m->cooldowns, m->n_cooldowns + 1, sizeof *n) : NULL;
                if (!n) {
                        free(p);
                        return -ENOMEM;
                }
                m->cooldowns = n;
                c = &n[m->n_cooldowns++];
                *c = (ProviderCooldown) {.provider = p};
        }
        free(c->reason);
        free(c->task_id);
        c->reason = TAKE_PTR(r);
        c->task_id = TAKE_PTR(id);
        c->until_mono = now + ms;
        c->until_real = now_ms() + ms;
        char iso[32];
        log_info("provider %s cools down until %s (%" PRIu64 " ms) after task %s failed %s", *provider ? provider : "(no model)",
                 format_iso(c->until_real, iso), ms, strnull(c->task_id), strnull(c->reason));
        return 0;
}

const ProviderCooldown *cooldown_find(Manager *m, const char *provider, uint64_t now_mono) {
        for (size_t i = 0; i < m->n_cooldowns; i++)
                if (streq(m->cooldowns[i].provider, provider) && m->cooldowns[i].until_mono > now_mono)
                        return &m->cooldowns[i];
        return NULL;
}

json_object *cooldown_snapshot(Manager *m) {
        uint64_t now = mono_ms();
        prune_expired(m, now);
        _cleanup_json_ json_object *a = json_object_new_array();
        if (!a) return NULL;
        for (size_t i = 0; i < m->n_cooldowns; i++) {
                ProviderCooldown *c = &m->cooldowns[i];
                char iso[32];
                json_object *o = json_object_new_object();
                if (!o || json_object_array_add(a, o) < 0) {
                        json_object_put(o);
                        return NULL;
                }
                if (json_add_string(o, PK_provider, c->provider) < 0 ||
                    json_add_string(o, PK_until, format_iso(c->until_real, iso)) < 0 ||
                    json_add_int(o, PK_remainingMs, (int64_t) (c->until_mono - now)) < 0 ||
                    json_add_string(o, PK_reason, c->reason) < 0 || json_add_string(o, PK_taskId, c->task_id) < 0)
                        return NULL;
        }
        return TAKE_PTR(a);
}

void cooldowns_free(Manager *m) {
        for (size_t i = 0; i < m->n_cooldowns; i++) cooldown_done(&m->cooldowns[i]);
        free(m->cooldowns);
        m->cooldowns = NULL;
        m->n_cooldowns = 0;
}
