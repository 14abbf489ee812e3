/* The files of a changeset that can make the host run code later
 * (changeset-risk.h). */
#include "changeset-risk.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "changeset-paths.h"
#include "gitdir.h"
#include "json-util.h"
#include "line-buffer.h"
#include "macro.h"
#include "protocol-keys.h"
#include "string-util.h"
#include "strv.h"

static const char *const risk_class_table[_RISK_CLASS_MAX] = {
        [RISK_AGENT_CONFIG] = "agent-config",   [RISK_EDITOR_CONFIG] = "editor-config",
        [RISK_ENVRC] = "envrc",                 [RISK_GIT_ATTRIBUTES] = "git-attributes",
        [RISK_GIT_MODULES] = "git-modules",     [RISK_HOOK_MANAGER] = "hook-manager",
        [RISK_CI_WORKFLOW] = "ci-workflow",     [RISK_EXECUTABLE] = "executable",
        [RISK_SYMLINK_OUT] = "symlink-out",     [RISK_PROJECT] = "project",
        [RISK_TASKFERRY_CONFIG] = "taskferry-config",
};

static const char *const risk_description_table[_RISK_CLASS_MAX] = {
        [RISK_AGENT_CONFIG] = "agent configuration: can run commands when an agent starts in this repository",
        [RISK_EDITOR_CONFIG] = "editor configuration: can run tasks or commands when the folder is opened in the editor",
        [RISK_ENVRC] = "direnv file: runs in your shell when you enter the directory",
        [RISK_GIT_ATTRIBUTES] = "git attributes: can name filter, diff and merge drivers that git runs on checkout, diff and merge",
        [RISK_GIT_MODULES] = "submodule configuration: its URLs are fetched (an ext:: URL runs a command) by git submodule update",
        [RISK_HOOK_MANAGER] = "git hook manager configuration: its hooks run on commit or push once installed",
        [RISK_CI_WORKFLOW] = "CI workflow: runs on the CI, with the repository's secrets, once pushed",
        [RISK_EXECUTABLE] = "made executable: runs as a program when started by path",
        [RISK_SYMLINK_OUT] = "symlink that leaves the repository: reads and writes through it reach a file outside",
        [RISK_PROJECT] = "listed in the project's review_paths",
        [RISK_TASKFERRY_CONFIG] = ("taskferry project file: changes the check that judges later changesets, the "
                                   "sandbox's read-only binds and the paths that need review"),
};

const char *risk_class_to_string(RiskClass c) {
        return c >= 0 && c < _RISK_CLASS_MAX ? risk_class_table[c] : NULL;
}

RiskClass risk_class_from_string(const char *s) {
        if (!s) return _RISK_CLASS_INVALID;
        for (int c = 0; c < _RISK_CLASS_MAX; c++)
                if (streq(s, risk_class_table[c])) return (RiskClass) c;
        return _RISK_CLASS_INVALID;
}

const char *risk_class_description(RiskClass c) {
        return c >= 0 && c < _RISK_CLASS_MAX ? risk_description_table[c] : NULL;
}

/* ---- names ---- */

/* Component [s, s+n) equals name, ASCII case ignored. */
static bool comp_is(const char *s, size_t n, const char *name) {
        return strlen(name) == n && strncasecmp(s, name, n) == 0;
}

static bool comp_in(const char *s, size_t n, const char *const *names) {
        for (; *names; names++)
                if (comp_is(s, n, *names)) return true;
        return false;
}

RiskClass risk_class_of_path(const char *repo_path) {
        static const char *const agent_dirs[] = {".claude", ".codex", ".opencode", ".pi", ".cursor", NULL};
        static const char *const agent_files[] = {"opencode.json", "opencode.jsonc", ".mcp.json", NULL};
        static const char *const vscode_files[] = {"tasks.json", "settings.json", "launch.json", "extensions.json", NULL};
        static const char *const hook_files[] = {".pre-commit-config.yaml", "lefthook.yml", "lefthook.yaml",
                                                 ".lefthook.yml", ".lefthook.yaml", "lefthook-local.yml",
                                                 "lefthook-local.yaml", ".lefthook-local.yml",
                                                 ".lefthook-local.yaml", NULL};
        RiskClass found = _RISK_CLASS_INVALID;
        const char *p = repo_path;
        while (*p == '/') p++;
        /* walk the components; the earliest class in the enum order wins */
        for (size_t depth = 0; *p; depth++) {
                const char *slash = strchr(p, '/');
                size_t n = slash ? (size_t) (slash - p) : strlen(p);
                const char *next = slash ? slash + 1 : p + n;
                while (*next == '/') next++;
                bool last = !*next;
                RiskClass c = _RISK_CLASS_INVALID;
                if (comp_in(p, n, agent_dirs) || (last && comp_in(p, n, agent_files))) c = RISK_AGENT_CONFIG;
                else if (comp_is(p, n, ".idea")) c = RISK_EDITOR_CONFIG;
                else if (comp_is(p, n, ".vscode")) {
                        /* the directory itself, or one of the files that run things */
                        if (last) c = RISK_EDITOR_CONFIG;
                        else {
                                const char *s2 = strchr(next, '/');
                                if (!s2 && comp_in(next, strlen(next), vscode_files)) c = RISK_EDITOR_CONFIG;
                        }
                } else if (last && comp_is(p, n, ".envrc")) c = RISK_ENVRC;
                else if (last && comp_is(p, n, ".gitattributes")) c = RISK_GIT_ATTRIBUTES;
                else if (last && comp_is(p, n, ".gitmodules")) c = RISK_GIT_MODULES;
                else if (comp_is(p, n, ".husky") || (last && comp_in(p, n, hook_files))) c = RISK_HOOK_MANAGER;
                else if (depth == 0 && last && comp_is(p, n, ".gitlab-ci.yml")) c = RISK_CI_WORKFLOW;
                else if (depth == 0 && last && comp_is(p, n, ".taskferry.toml")) c = RISK_TASKFERRY_CONFIG;
                else if (depth == 0 && comp_is(p, n, ".github")) {
                        /* .github itself (a symlink there holds workflows/), .github/workflows[/...] */
                        if (last) c = RISK_CI_WORKFLOW;
                        else {
                                const char *s2 = strchr(next, '/');
                                size_t n2 = s2 ? (size_t) (s2 - next) : strlen(next);
                                if (comp_is(next, n2, "workflows")) c = RISK_CI_WORKFLOW;
                        }
                }
                if (c >= 0 && (found < 0 || c < found)) found = c;
                p = next;
        }
        return found;
}

bool risk_symlink_leaves(const char *repo_path, const char *target) {
        if (isempty(target) || target[0] == '/') return true;
        /* the depth of the link's directory below the top */
        long depth = 0;
        const char *slash = strrchr(repo_path, '/');
        for (const char *p = repo_path; slash && p < slash;) {
                while (p < slash && *p == '/') p++;
                if (p >= slash) break;
                const char *e = memchr(p, '/', (size_t) (slash - p));
                size_t n = e ? (size_t) (e - p) : (size_t) (slash - p);
                if (n == 2 && p[0] == '.' && p[1] == '.') depth--;
                else if (!(n == 1 && p[0] == '.')) depth++;
                p += n;
        }
        for (const char *p = target; *p;) {
                while (*p == '/') p++;
                if (!*p) break;
                const char *e = strchr(p, '/');
                size_t n = e ? (size_t) (e - p) : strlen(p);
                if (n == 2 && p[0] == '.' && p[1] == '.') {
                        if (--depth < 0) return true;
                } else if (!(n == 1 && p[0] == '.'))
                        depth++;
                p += n;
        }
        return false;
}

const char *risk_match_pattern(const char *repo_path, char *const *patterns) {
        for (char *const *pp = patterns; pp && *pp; pp++) {
                const char *pat = *pp;
                while (*pat == '/') pat++;
                size_t n = strlen(pat);
                if (n == 0) continue;
                if (pat[n - 1] != '/') {
                        if (fnmatch(pat, repo_path, 0) == 0) return *pp;
                        continue;
                }
                /* "dir/": every directory above the path's last component */
                _cleanup_free_ char *dirpat = strndup(pat, n - 1);
                _cleanup_free_ char *path = strdup(repo_path);
                if (!dirpat || !path) continue;
                for (char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
                        *s = 0;
                        bool m = fnmatch(dirpat, path, 0) == 0;
                        *s = '/';
                        if (m) return *pp;
                }
        }
        return NULL;
}

/* ---- the list ---- */

void changeset_risks_done(ChangesetRisks *r) {
        for (size_t i = 0; i < r->n; i++) {
                free(r->entries[i].path);
                free(r->entries[i].detail);
        }
        free(r->entries);
        memset(r, 0, sizeof *r);
}

/* Add an entry (path: the name relative to the patch root, unquoted;
 * detail: taken over, NULL = the class's description). */
static int risks_add(ChangesetRisks *r, RiskClass c, const char *path, char *detail) {
        _cleanup_free_ char *d = detail;
        r->total++;
        if (r->n >= CHANGESET_RISKS_MAX) return 0;
        if (r->n % 16 == 0) {
                ChangesetRisk *ne = reallocarray(r->entries, r->n + 16, sizeof *ne);
                if (!ne) return -ENOMEM;
                r->entries = ne;
        }
        ChangesetRisk *e = &r->entries[r->n];
        e->class = c;
        e->path = cs_quote_path(path);
        e->detail = d ? TAKE_PTR(d) : strdup(risk_class_description(c));
        if (!e->path || !e->detail) {
                free(e->path);
                free(e->detail);
                return -ENOMEM;
        }
        r->n++;
        return 0;
}

/* ---- the patch ---- */

#define LINE_MAX_BYTES ((size_t) 64 << 10)

typedef enum section_part {
        PART_NONE,   /* before the first "diff --git" */
        PART_HEADER, /* a file's extended header */
        PART_BODY,   /* its hunks or binary data */
} section_part;

/* What one "diff --git" section says about its file. */
typedef struct section {
        char *git_name;   /* from the "diff --git" line when it splits unambiguously (b/ side) */
        char *minus_name; /* "--- " (NULL for /dev/null) */
        char *plus_name;  /* "+++ " */
        char *from_name;  /* rename from / copy from */
        char *to_name;    /* rename to / copy to */
        bool plus_null;   /* "+++ /dev/null" */
        bool deleted;     /* "deleted file mode" */
        bool added;       /* "new file mode" */
        unsigned old_mode, new_mode, index_mode; /* 0: not given */
        bool in_hunk;
        /* the '+' lines of a hunk, joined by '\n': a symlink's target */
        char target[PATH_MAX + 1];
        size_t target_len;
        unsigned target_lines;
        bool target_long; /* over PATH_MAX bytes: counted as leaving */
        bool binary;
} section;

static void section_reset(section *s) {
        free(s->git_name);
        free(s->minus_name);
        free(s->plus_name);
        free(s->from_name);
        free(s->to_name);
        s->git_name = s->minus_name = s->plus_name = s->from_name = s->to_name = NULL;
        s->plus_null = s->deleted = s->added = s->in_hunk = s->target_long = s->binary = false;
        s->old_mode = s->new_mode = s->index_mode = 0;
        s->target_len = 0;
        s->target_lines = 0;
}

/* A symlink the live tree already has at a risky name, onto a path inside
 * the repository: a changed path at or below its target is that risky
 * file, written through the link. */
typedef struct link_alias {
        char link[64];          /* the risky name, relative to the dispatch directory */
        char target[PATH_MAX];  /* where it leads, relative to the dispatch directory, normalized */
} link_alias;

#define LINK_ALIASES_MAX 32

typedef struct reader {
        const char *prefix; /* "" or "a/b/" */
        char *const *patterns;
        int live_fd;
        link_alias aliases[LINK_ALIASES_MAX];
        size_t n_aliases;
        section_part part;
        section s;
        bool continuing; /* the line being read is the rest of a LINE_BUFFER_PIECE */
        bool piece_plus; /* ... and it began with '+' in a symlink hunk */
        ChangesetRisks *out;
} reader;

static bool has_prefix(const char *s, size_t len, const char *p) {
        size_t n = strlen(p);
        return len >= n && memcmp(s, p, n) == 0;
}

/* A mode: exactly six octal digits. */
static int parse_mode(const char *s, size_t len, unsigned *ret) {
        if (len != 6) return -EBADMSG;
        unsigned v = 0;
        for (size_t i = 0; i < 6; i++) {
                if (s[i] < '0' || s[i] > '7') return -EBADMSG;
                v = v * 8 + (unsigned) (s[i] - '0');
        }
        *ret = v;
        return 0;
}

/* A name as a "---"/"+++"/"rename to" line writes it, the strip prefix
 * ("a/", "b/") removed when present. -EBADMSG for a malformed quoted name
 * or a NUL, -ENOMEM. */
static int line_name(const char *s, size_t len, const char *strip, char **ret) {
        char *n;
        if (memchr(s, 0, len)) return -EBADMSG;
        if (len > 0 && s[0] == '"') {
                size_t used = 0;
                n = cs_unquote_path(s, len, &used);
                if (!n) return -EBADMSG;
        } else {
                const char *tab = memchr(s, '\t', len);
                if (tab) len = (size_t) (tab - s);
                n = strndup(s, len);
                if (!n) return -ENOMEM;
        }
        if (strip && startswith(n, strip)) memmove(n, n + strlen(strip), strlen(n) - strlen(strip) + 1);
        if (!*n) {
                free(n);
                return -EBADMSG;
        }
        *ret = n;
        return 0;
}

/* "diff --git a/N b/N": the name when both sides are the same (unquoted),
 * or the b/ side of two quoted names; NULL when it does not split. */
static int git_line_name(const char *s, size_t len, char **ret) {
        *ret = NULL;
        if (memchr(s, 0, len)) return -EBADMSG;
        if (len > 0 && s[0] == '"') {
                size_t used = 0;
                _cleanup_free_ char *a = cs_unquote_path(s, len, &used);
                if (!a) return -EBADMSG;
                if (!(used + 1 < len && s[used] == ' ')) return 0;
                return line_name(s + used + 1, len - used - 1, "b/", ret);
        }
        if (len < 5 || (len - 5) % 2 != 0) return 0;
        size_t n = (len - 5) / 2;
        if (!has_prefix(s, len, "a/") || s[2 + n] != ' ' || memcmp(s + 3 + n, "b/", 2) != 0 ||
            memcmp(s + 2, s + 5 + n, n) != 0)
                return 0;
        *ret = strndup(s + 2, n);
        return *ret ? 0 : -ENOMEM;
}

/* The target of a symlink whose mode a rename or copy did not carry, read
 * from the live directory (the link the patch moves). 1 with the target, 0
 * when from is not a symlink there (or cannot be read), -ENOMEM. */
static int live_link_target(int live_fd, const char *from, char *buf, size_t size) {
        if (live_fd < 0) return 0;
        _cleanup_free_ char *dir = strdup(from);
        if (!dir) return -ENOMEM;
        char *slash = strrchr(dir, '/');
        const char *base = slash ? slash + 1 : dir;
        if (slash) *slash = 0;
        _cleanup_close_ int dfd = cs_open_beneath(live_fd, slash ? dir : "", O_PATH | O_DIRECTORY);
        if (dfd < 0) return 0;
        ssize_t n = readlinkat(dfd, base, buf, size - 1);
        if (n < 0) return 0;
        buf[n] = 0;
        return 1;
}

/* The risky names a committed symlink could stand at, relative to the
 * dispatch directory (the usual top-level ones). */
static const char *const alias_candidates[] = {
        ".claude", ".codex", ".opencode", ".pi", ".cursor", ".idea", ".vscode", ".vscode/tasks.json",
        ".vscode/settings.json", ".vscode/launch.json", ".vscode/extensions.json", "opencode.json",
        "opencode.jsonc", ".mcp.json", ".envrc", ".gitattributes", ".gitmodules", ".husky",
        ".pre-commit-config.yaml", "lefthook.yml", "lefthook.yaml", ".gitlab-ci.yml", ".taskferry.toml",
        ".github", ".github/workflows", NULL,
};

/* Normalize "dir/target" lexically (no "." or ".." left) into buf; false
 * when it climbs out of the directory (or is absolute). */
static bool alias_normalize(const char *link, const char *target, char *buf, size_t size) {
        if (target[0] == '/') return false;
        char joined[PATH_MAX * 2];
        const char *slash = strrchr(link, '/');
        int n = snprintf(joined, sizeof joined, "%.*s%s%s", slash ? (int) (slash - link) : 0, link, slash ? "/" : "",
                         target);
        if (n < 0 || (size_t) n >= sizeof joined) return false;
        size_t len = 0;
        buf[0] = 0;
        for (char *save = NULL, *c = strtok_r(joined, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                if (streq(c, ".")) continue;
                if (streq(c, "..")) {
                        if (len == 0) return false;
                        char *up = strrchr(buf, '/');
                        len = up ? (size_t) (up - buf) : 0;
                        buf[len] = 0;
                        continue;
                }
                size_t cl = strlen(c);
                if (len + (len ? 1 : 0) + cl + 1 > size) return false;
                if (len) buf[len++] = '/';
                memcpy(buf + len, c, cl + 1);
                len += cl;
        }
        return len > 0;
}

/* The live tree's symlinks at risky names that lead inside it. */
static void aliases_scan(reader *rd) {
        if (rd->live_fd < 0) return;
        for (const char *const *c = alias_candidates; *c && rd->n_aliases < LINK_ALIASES_MAX; c++) {
                char target[PATH_MAX + 1];
                if (live_link_target(rd->live_fd, *c, target, sizeof target) <= 0) continue;
                link_alias *a = &rd->aliases[rd->n_aliases];
                if (!alias_normalize(*c, target, a->target, sizeof a->target)) continue;
                snprintf(a->link, sizeof a->link, "%s", *c);
                rd->n_aliases++;
        }
}

/* name written through a committed symlink at a risky name: its class as
 * that name (risk_class_of_path of the aliased path), with the alias in
 * *ret_link; -1 when none. */
static RiskClass alias_class(const reader *rd, const char *name, const char **ret_link) {
        for (size_t i = 0; i < rd->n_aliases; i++) {
                const link_alias *a = &rd->aliases[i];
                size_t tl = strlen(a->target);
                if (strncmp(name, a->target, tl) != 0 || (name[tl] != 0 && name[tl] != '/')) continue;
                _cleanup_free_ char *aliased = strdup_printf("%s%s%s", rd->prefix, a->link, name + tl);
                RiskClass c = aliased ? risk_class_of_path(aliased) : _RISK_CLASS_INVALID;
                if (c >= 0) {
                        *ret_link = a->link;
                        return c;
                }
        }
        return _RISK_CLASS_INVALID;
}

/* The section is complete: what does it add? */
static int section_end(reader *rd) {
        section *s = &rd->s;
        if (rd->part == PART_NONE) return 0;
        rd->part = PART_NONE;
        if (s->deleted || s->plus_null) return 0;
        const char *name = s->to_name ? s->to_name : s->plus_name ? s->plus_name : s->git_name;
        if (!name) return -EBADMSG;
        _cleanup_free_ char *repo = strdup_printf("%s%s", rd->prefix, name);
        if (!repo) return -ENOMEM;
        int r;
        RiskClass c = risk_class_of_path(repo);
        if (c >= 0 && (r = risks_add(rd->out, c, name, NULL)) < 0) return r;
        /* the same file under another name: a risky one the user committed as a symlink onto it */
        const char *via = NULL;
        RiskClass ac = c < 0 ? alias_class(rd, name, &via) : _RISK_CLASS_INVALID;
        if (ac >= 0) {
                _cleanup_free_ char *q = cs_quote_path(via);
                char *detail = q ? strdup_printf("%s (reached through the committed symlink %s)",
                                                 risk_class_description(ac), q)
                                 : NULL;
                if (!detail) return -ENOMEM;
                if ((r = risks_add(rd->out, ac, name, detail)) < 0) return r;
        }

        unsigned mode = s->new_mode ? s->new_mode : s->index_mode;
        if (mode == 0100755 && (s->added || (s->old_mode && s->old_mode != 0100755)) &&
            (r = risks_add(rd->out, RISK_EXECUTABLE, name, NULL)) < 0)
                return r;

        bool link = mode == 0120000;
        char live[PATH_MAX + 1];
        const char *target = NULL;
        bool unknown = false;
        if (link) {
                if (s->binary || s->target_long) unknown = true;
                else if (s->target_lines > 0) {
                        s->target[s->target_len] = 0;
                        target = s->target;
                } else if (s->from_name) {
                        /* a changed mode-less rename: the content is the old link's */
                        r = live_link_target(rd->live_fd, s->from_name, live, sizeof live);
                        if (r < 0) return r;
                        if (r > 0) target = live;
                        else unknown = true;
                } else
                        unknown = true; /* a mode change to a link carries no target */
        } else if (mode == 0 && s->from_name) {
                r = live_link_target(rd->live_fd, s->from_name, live, sizeof live);
                if (r < 0) return r;
                if (r > 0) target = live, link = true;
        }
        if (link && (unknown || risk_symlink_leaves(repo, target))) {
                _cleanup_free_ char *q = target ? cs_quote_path(target) : NULL;
                if (target && !q) return -ENOMEM;
                char *detail = q ? strdup_printf("symlink to %s, outside the repository: reads and writes through it "
                                                 "reach a file outside",
                                                 q)
                                 : strdup("symlink whose target the patch does not show: counted as leaving the repository");
                if (!detail) return -ENOMEM;
                if ((r = risks_add(rd->out, RISK_SYMLINK_OUT, name, detail)) < 0) return r;
        }
        const char *pat = risk_match_pattern(repo, rd->patterns);
        if (pat) {
                _cleanup_free_ char *q = cs_quote_path(pat);
                char *detail = q ? strdup_printf("listed in the project's review_paths (%s)", q) : NULL;
                if (!detail) return -ENOMEM;
                if ((r = risks_add(rd->out, RISK_PROJECT, name, detail)) < 0) return r;
        }
        return 0;
}

/* One header line (complete, without its '\n'). */
static int header_line(reader *rd, const char *l, size_t n) {
        section *s = &rd->s;
        static const struct {
                const char *prefix;
                int kind;
        } kinds[] = {
                {"old mode ", 0},        {"new mode ", 1},       {"deleted file mode ", 2}, {"new file mode ", 3},
                {"rename from ", 4},     {"copy from ", 4},      {"rename to ", 5},         {"copy to ", 5},
                {"--- ", 6},             {"+++ ", 7},            {"index ", 8},
        };
        for (size_t k = 0; k < ELEMENTSOF(kinds); k++) {
                size_t pl = strlen(kinds[k].prefix);
                if (!has_prefix(l, n, kinds[k].prefix)) continue;
                const char *v = l + pl;
                size_t vn = n - pl;
                char **slot = NULL;
                const char *strip = NULL;
                switch (kinds[k].kind) {
                case 0: return parse_mode(v, vn, &s->old_mode);
                case 1: return parse_mode(v, vn, &s->new_mode);
                case 2: s->deleted = true; return parse_mode(v, vn, &s->old_mode);
                case 3: s->added = true; return parse_mode(v, vn, &s->new_mode);
                case 4: slot = &s->from_name; break;
                case 5: slot = &s->to_name; break;
                case 6:
                        if (vn == 9 && memcmp(v, "/dev/null", 9) == 0) return 0;
                        slot = &s->minus_name, strip = "a/";
                        break;
                case 7:
                        if (vn == 9 && memcmp(v, "/dev/null", 9) == 0) {
                                s->plus_null = true;
                                return 0;
                        }
                        slot = &s->plus_name, strip = "b/";
                        break;
                case 8: {
                        /* "index <a>..<b> <mode>" when the mode did not change */
                        const char *sp = memchr(v, ' ', vn);
                        if (!sp) return 0;
                        return parse_mode(sp + 1, vn - (size_t) (sp + 1 - v), &s->index_mode);
                }
                }
                free(*slot);
                *slot = NULL;
                return line_name(v, vn, strip, slot);
        }
        return 0; /* similarity, dissimilarity and the rest say nothing we use */
}

static void target_add(section *s, const char *p, size_t n, bool new_line) {
        if (s->target_long) return;
        size_t need = n + (new_line && s->target_lines > 0 ? 1 : 0);
        if (s->target_len + need > PATH_MAX) {
                s->target_long = true;
                return;
        }
        if (new_line && s->target_lines > 0) s->target[s->target_len++] = '\n';
        memcpy(s->target + s->target_len, p, n);
        s->target_len += n;
        if (new_line) s->target_lines++;
}

static bool section_is_link(const section *s) {
        return (s->new_mode ? s->new_mode : s->index_mode) == 0120000;
}

/* One line, or the first piece of a long one (piece: more follows). */
static int patch_line(reader *rd, const char *l, size_t n, bool piece) {
        int r;
        if (has_prefix(l, n, "diff --git ")) {
                if (piece || n > LINE_MAX_BYTES) return -EBADMSG;
                if ((r = section_end(rd)) < 0) return r;
                section_reset(&rd->s);
                rd->part = PART_HEADER;
                return git_line_name(l + 11, n - 11, &rd->s.git_name);
        }
        switch (rd->part) {
        case PART_NONE:
                return -EBADMSG; /* our patches start with their first section */
        case PART_HEADER:
                if (has_prefix(l, n, "@@")) {
                        rd->part = PART_BODY;
                        rd->s.in_hunk = true;
                        return 0;
                }
                if (has_prefix(l, n, "GIT binary patch") || has_prefix(l, n, "Binary files ")) {
                        rd->part = PART_BODY;
                        rd->s.binary = true;
                        return 0;
                }
                if (piece || n > LINE_MAX_BYTES) return -EBADMSG;
                return header_line(rd, l, n);
        case PART_BODY:
                if (rd->s.in_hunk && section_is_link(&rd->s) && n > 0 && l[0] == '+') {
                        target_add(&rd->s, l + 1, n - 1, true);
                        rd->piece_plus = piece;
                }
                return 0;
        }
        return 0;
}

int changeset_risks_read(int fd, const char *prefix, char *const *patterns, int live_fd, ChangesetRisks *ret) {
        _cleanup_free_ char *pfx = NULL;
        if (!isempty(prefix)) {
                size_t n = strlen(prefix);
                pfx = prefix[n - 1] == '/' ? strdup(prefix) : strdup_printf("%s/", prefix);
                if (!pfx) return -ENOMEM;
        }
        ChangesetRisks out = {};
        reader rd = {.prefix = pfx ? pfx : "", .patterns = patterns, .live_fd = live_fd, .out = &out};
        aliases_scan(&rd);
        LineBuffer b = LINE_BUFFER_INIT(LINE_MAX_BYTES, LINE_BUFFER_SPLIT);
        int r = 0;
        bool eof = false;
        while (r >= 0 && !eof) {
                ssize_t k = line_buffer_read(&b, fd, 0);
                if (k == -EINTR) continue;
                if (k < 0) {
                        r = (int) k;
                        break;
                }
                eof = k == 0;
                for (;;) {
                        const char *l;
                        size_t n;
                        int p = line_buffer_pop(&b, &l, &n);
                        if (p == 0 && eof) p = line_buffer_pop_rest(&b, &l, &n);
                        if (p < 0) {
                                r = p;
                                break;
                        }
                        if (p == 0) break;
                        bool piece = p == LINE_BUFFER_PIECE;
                        if (rd.continuing) {
                                /* the rest of a long line: only a symlink target needs it */
                                if (rd.piece_plus) target_add(&rd.s, l, n, false);
                                if (!piece) rd.continuing = rd.piece_plus = false;
                                continue;
                        }
                        rd.piece_plus = false;
                        r = patch_line(&rd, l, n, piece);
                        if (r < 0) break;
                        rd.continuing = piece;
                }
        }
        if (r >= 0) r = section_end(&rd);
        section_reset(&rd.s);
        line_buffer_done(&b);
        if (r < 0) {
                changeset_risks_done(&out);
                return r;
        }
        *ret = out;
        return out.total > INT_MAX ? INT_MAX : (int) out.total;
}

/* D relative to the top of the git work tree holding it: "" or "a/b/". */
static int directory_prefix(const char *directory, char **ret) {
        _cleanup_free_ char *real = realpath(directory, NULL);
        if (!real) return -errno;
        git_dirs d = {};
        int r = git_dirs_find(real, &d);
        if (r < 0) return r;
        _cleanup_free_ char *top = r > 0 ? realpath(d.top, NULL) : NULL;
        git_dirs_done(&d);
        const char *rest = "";
        if (top) {
                size_t n = strlen(top);
                if (streq(top, "/")) rest = real + 1;
                else if (strncmp(real, top, n) == 0 && (real[n] == '/' || real[n] == 0)) rest = real + n + (real[n] == '/');
        }
        *ret = *rest ? strdup_printf("%s/", rest) : strdup("");
        return *ret ? 0 : -ENOMEM;
}

int changeset_risks_classify(const char *patch_path, const char *directory, char *const *patterns,
                             ChangesetRisks *ret) {
        _cleanup_free_ char *prefix = NULL;
        int r = directory_prefix(directory, &prefix);
        if (r < 0) return r;
        _cleanup_close_ int fd = open(patch_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) return -errno;
        _cleanup_close_ int live = open(directory, O_PATH | O_DIRECTORY | O_CLOEXEC);
        return changeset_risks_read(fd, prefix, patterns, live, ret);
}

char *changeset_risk_line(const ChangesetRisk *e) {
        return strdup_printf("%s: %s: %s", strempty(risk_class_to_string(e->class)), e->path, e->detail);
}

int changeset_risks_annotate(json_object *o, const char *patch_path, const char *directory, char *const *patterns) {
        _cleanup_(changeset_risks_done) ChangesetRisks risks = {};
        int r = changeset_risks_classify(patch_path, directory, patterns, &risks);
        if (r <= 0) return r;
        json_object *lines = json_get_array(o, PK_warnings);
        if (!lines) {
                lines = json_object_new_array();
                if (!lines || json_add(o, PK_warnings, lines) < 0) return -ENOMEM;
        }
        json_object *list = json_object_new_array();
        if (!list || json_add(o, PK_changesetRisks, list) < 0) return -ENOMEM;
        for (size_t i = 0; i < risks.n; i++) {
                _cleanup_free_ char *line = changeset_risk_line(&risks.entries[i]);
                json_object *e = json_object_new_object();
                if (!line || !e || json_object_array_add(lines, json_object_new_string(line)) < 0 ||
                    json_object_array_add(list, e) < 0) {
                        json_object_put(e);
                        return -ENOMEM;
                }
                if (json_add_string(e, PK_path, risks.entries[i].path) < 0 ||
                    json_add_string(e, PK_class, risk_class_to_string(risks.entries[i].class)) < 0)
                        return -ENOMEM;
        }
        if (risks.total > risks.n) {
                _cleanup_free_ char *more = strdup_printf("and %zu more files that can run code on this machine later",
                                                          risks.total - risks.n);
                if (!more || json_object_array_add(lines, json_object_new_string(more)) < 0) return -ENOMEM;
        }
        return 0;
}

int changeset_risks_refusal(const char *task_id, const char *patch_path, const char *directory,
                            char *const *patterns, char **ret_text) {
        *ret_text = NULL;
        _cleanup_(changeset_risks_done) ChangesetRisks risks = {};
        int r = changeset_risks_classify(patch_path, directory, patterns, &risks);
        if (r <= 0) return r;
        _cleanup_free_ char *text = strdup_printf(
                "error: the changeset of task %s changes files that can run code on this machine later; nothing was applied\n",
                task_id);
        for (size_t i = 0; text && i < risks.n; i++) {
                char *t = strdup_printf("%s  %s: %s\n", text, strempty(risk_class_to_string(risks.entries[i].class)),
                                        risks.entries[i].path);
                free(text);
                text = t;
        }
        if (text && risks.total > risks.n) {
                char *t = strdup_printf("%s  and %zu more\n", text, risks.total - risks.n);
                free(text);
                text = t;
        }
        if (text) {
                char *t = strdup_printf("%shelp: read them first (taskferry diff %s), then run \"taskferry accept %s "
                                        "--allow-config\" to land them, or \"taskferry reject %s\"",
                                        text, task_id, task_id, task_id);
                free(text);
                text = t;
        }
        if (!text) return -ENOMEM;
        *ret_text = TAKE_PTR(text);
        return 1;
}
