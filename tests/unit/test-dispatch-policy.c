/* dispatch-policy.c: what a dispatch may ask for, before anything is made.
 * Every function of api/dispatch-policy.h against real paths in a temp dir
 * (the checks resolve symlinks), with params parsed the way the server
 * parses a request's; each refusal's text compared whole, because the
 * daemon answers with it and clients match it. */

#include <check.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/dispatch-policy.h"
#include "json-util.h"
#include "protocol-params.h"
#include "unit.h"
#include "fileio.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"

/* <base>/s/state, r/run, c/cache, o/overlays: taskferry's own dirs, each in
 * a parent of its own so that a directory can contain exactly one of them;
 * <base>/proj/sub, the project; <base>/d/secret, a deny-listed dir. */
static char *base;
static tf_paths paths;

static char *at(const char *rel) { return tf_path(base, rel); }

static void mkdirs(const char *rel) { tf_mkdirs(base, rel); }

static void symlink_at(const char *target_rel, const char *link_rel) { tf_symlink(base, target_rel, link_rel); }

static void setup(void) {
        /* resolved (tf_tmpdir_new's is): the checks compare resolved paths */
        base = tf_tmpdir_new("test-dispatch-policy");
        const char *dirs[] = {"s/state", "r/run", "c/cache", "o/overlays", "proj/sub", "d/secret/inner", "other"};
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) mkdirs(dirs[i]);
        paths = (tf_paths) {
                .state_dir = at("s/state"),
                .runtime_dir = at("r/run"),
                .cache_dir = at("c/cache"),
                .overlay_tmp_root = at("o/overlays"),
        };
}

static void teardown(void) {
        base = tf_tmpdir_free(base);
        free(paths.state_dir);
        free(paths.runtime_dir);
        free(paths.cache_dir);
        free(paths.overlay_tmp_root);
        paths = (tf_paths) {0};
}

/* A task.dispatch's params as the server parses them from the request's
 * params object (JSON text); the object stays alive with them. */
typedef struct Params {
        json_object *json;
        ProtoParams pp;
} Params;

static Params *params_parse(const char *text) {
        Params *p = calloc(1, sizeof *p);
        ck_assert_ptr_nonnull(p);
        ck_assert_msg(json_parse_strict(text, strlen(text), &p->json) == 0, "not JSON: %s", text);
        json_object *err = NULL;
        int r = proto_params_parse("r1", PROTO_TASK_DISPATCH, p->json, &p->pp, &err);
        ck_assert_msg(r == 0, "params refused: %s: %s", text, err ? json_object_to_json_string(err) : "?");
        return p;
}

/* The params of a dispatch into the project with extra keys (a JSON
 * object's members without braces, printf-style; "" for none). */
static Params *params(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static Params *params(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *extra = NULL;
        ck_assert_int_ge(vasprintf(&extra, fmt, ap), 0);
        va_end(ap);
        _cleanup_free_ char *proj = at("proj");
        _cleanup_free_ char *text =
                strdup_printf("{\"prompt\":\"p\",\"directory\":\"%s\"%s%s}", proj, *extra ? "," : "", extra);
        free(extra);
        return params_parse(text);
}

static void params_free(Params *p) {
        proto_params_done(PROTO_TASK_DISPATCH, &p->pp);
        json_object_put(p->json);
        free(p);
}

/* r is the refusal `want_r` with exactly the text `want`. */
static void check_refused(int r, char **reason, int want_r, const char *want) {
        ck_assert_int_eq(r, want_r);
        ck_assert_ptr_nonnull(*reason);
        ck_assert_str_eq(*reason, want);
        free(*reason);
        *reason = NULL;
}

/* ---- the dispatch directory ---- */

static int check_dir(char *const *deny, const char *directory, char **reason) {
        return dispatch_check_directory(&paths, deny, directory, reason);
}

/* check_dir(deny, <base>/rel) accepts it. */
static void check_accepted(char *const *deny, const char *rel, char **reason) {
        _cleanup_free_ char *dir = at(rel);
        ck_assert_int_eq(check_dir(deny, dir, reason), 0);
}

/* check_dir(deny, dir) refuses dir as inside mask, which every sandbox
 * masks. */
static void check_masked(char *const *deny, const char *dir, const char *mask, char **reason) {
        _cleanup_free_ char *want = strdup_printf(
                "error: directory %s is inside %s, which is masked in every sandbox\nhelp: dispatch into a project "
                "directory",
                dir, mask);
        check_refused(check_dir(deny, dir, reason), reason, -EPERM, want);
}

/* check_dir(NULL, dir) refuses dir as overlapping own, taskferry's own dir
 * called name. */
static void check_overlaps(const char *dir, const char *name, const char *own, char **reason) {
        _cleanup_free_ char *want = strdup_printf(
                "error: directory %s overlaps %s (%s)\nhelp: dispatch into a project directory that "
                "neither contains nor lies inside taskferry's own directories",
                dir, name, own);
        check_refused(check_dir(NULL, dir, reason), reason, -EPERM, want);
}

START_TEST(directory_masked_roots) {
        char *reason = NULL;
        const char *roots[] = {"/run/user", "/run/dbus"};
        for (size_t i = 0; i < ELEMENTSOF(roots); i++) {
                _cleanup_free_ char *inside = strdup_printf("%s/1000/proj", roots[i]);
                check_masked(NULL, inside, roots[i], &reason);
                /* the root itself is inside it */
                check_masked(NULL, roots[i], roots[i], &reason);
        }
        /* a sibling sharing the name's prefix is not inside it, nor is /run */
        ck_assert_int_eq(check_dir(NULL, "/run/username/proj", &reason), 0);
        ck_assert_int_eq(check_dir(NULL, "/run/dbusx", &reason), 0);
        ck_assert_int_eq(check_dir(NULL, "/run", &reason), 0);
        ck_assert_ptr_null(reason);
}
END_TEST

START_TEST(directory_own_dirs) {
        struct {
                const char *dir, *parent, *name;
        } own[] = {
                {"s/state", "s", "the state dir"},
                {"r/run", "r", "the runtime dir"},
                {"c/cache", "c", "the cache dir"},
                {"o/overlays", "o", "the overlay dir"},
        };
        char *reason = NULL;
        for (size_t i = 0; i < ELEMENTSOF(own); i++) {
                _cleanup_free_ char *d = at(own[i].dir);
                _cleanup_free_ char *inside = strdup_printf("%s/tasks/x", d);
                _cleanup_free_ char *parent = at(own[i].parent);
                /* equal to it, inside it, containing it: each overlaps */
                const char *cases[] = {d, inside, parent};
                for (size_t k = 0; k < ELEMENTSOF(cases); k++) {
                        check_overlaps(cases[k], own[i].name, d, &reason);
                }
        }
        /* the project, beside them all, is fine */
        check_accepted(NULL, "proj", &reason);
        /* an own dir taskferry does not have (NULL) is no obstacle */
        free(paths.overlay_tmp_root);
        paths.overlay_tmp_root = NULL;
        check_accepted(NULL, "o", &reason);
        ck_assert_ptr_null(reason);
}
END_TEST

/* An own dir named through a symlink is the directory it resolves to. */
START_TEST(directory_own_dir_through_a_symlink) {
        symlink_at("c/cache", "cachelink");
        free(paths.cache_dir);
        paths.cache_dir = at("cachelink");
        _cleanup_free_ char *real = at("c/cache");
        _cleanup_free_ char *inside = at("c/cache/pi-data");
        char *reason = NULL;
        check_overlaps(inside, "the cache dir", real, &reason);
}
END_TEST

START_TEST(directory_deny_list) {
        _cleanup_free_ char *secret = at("d/secret");
        _cleanup_free_ char *missing = at("d/missing");
        char *deny[] = {missing, secret, NULL};
        char *reason = NULL;
        _cleanup_free_ char *inner = at("d/secret/inner");
        const char *refused[] = {secret, inner};
        for (size_t i = 0; i < ELEMENTSOF(refused); i++) check_masked(deny, refused[i], secret, &reason);
        /* containing one is fine: the mask is applied over the target inside the sandbox */
        check_accepted(deny, "d", &reason);
        /* a deny entry that is no directory masks no directory target */
        check_accepted(deny, "d/missing/x", &reason);
        ck_assert_ptr_null(reason);
}
END_TEST

/* A deny entry that is a symlink masks what it resolves to. */
START_TEST(directory_deny_entry_through_a_symlink) {
        symlink_at("d/secret", "secretlink");
        _cleanup_free_ char *link = at("secretlink");
        _cleanup_free_ char *secret = at("d/secret");
        _cleanup_free_ char *inner = at("d/secret/inner");
        char *deny[] = {link, NULL};
        char *reason = NULL;
        check_masked(deny, inner, secret, &reason);
}
END_TEST

/* ---- the binds ---- */

static const char *bind_keys[] = {"rwBind", "allowedDirs", "roBind"};

START_TEST(binds_relative_entry) {
        _cleanup_free_ char *proj = at("proj");
        char *reason = NULL;
        for (size_t k = 0; k < ELEMENTSOF(bind_keys); k++) {
                Params *p = params("\"%s\":[\"/usr\",\"rel/dir\"]", bind_keys[k]);
                _cleanup_free_ char *want = strdup_printf(
                        "error: %s entry rel/dir is not an absolute path\nhelp: pass absolute paths", bind_keys[k]);
                check_refused(dispatch_check_binds(&paths, &p->pp.dispatch, proj, &reason), &reason, -EINVAL, want);
                params_free(p);
        }
}
END_TEST

START_TEST(binds_overlapping_protected_dirs) {
        _cleanup_free_ char *proj = at("proj");
        struct {
                const char *dir, *parent, *name;
        } prot[] = {
                {"proj", ".", "the dispatch directory"}, /* its parent holds everything: it meets this one first */
                {"s/state", "s", "the state dir"},
                {"r/run", "r", "the runtime dir"},
                {"c/cache", "c", "the cache dir"},
                {"o/overlays", "o", "the overlay dir"},
        };
        char *reason = NULL;
        for (size_t k = 0; k < ELEMENTSOF(bind_keys); k++)
                for (size_t i = 0; i < ELEMENTSOF(prot); i++) {
                        _cleanup_free_ char *d = at(prot[i].dir);
                        _cleanup_free_ char *inside = strdup_printf("%s/deeper", d);
                        _cleanup_free_ char *parent = streq(prot[i].parent, ".") ? strdup(base) : at(prot[i].parent);
                        const char *cases[] = {d, inside, parent};
                        for (size_t c = 0; c < ELEMENTSOF(cases); c++) {
                                Params *p = params("\"%s\":[\"/usr\",\"%s\"]", bind_keys[k], cases[c]);
                                _cleanup_free_ char *want = strdup_printf(
                                        "error: %s entry %s overlaps %s (%s); the sandbox would no longer gate the "
                                        "worker's writes\nhelp: bind a path outside %s",
                                        bind_keys[k], cases[c], prot[i].name, d, d);
                                check_refused(dispatch_check_binds(&paths, &p->pp.dispatch, proj, &reason), &reason,
                                              -EPERM, want);
                                params_free(p);
                        }
                }
        /* binds beside them all are fine, in every list at once */
        _cleanup_free_ char *other = at("other");
        Params *p = params("\"rwBind\":[\"%s\"],\"allowedDirs\":[\"/usr\"],\"roBind\":[\"%s/nope\"]", other, other);
        ck_assert_int_eq(dispatch_check_binds(&paths, &p->pp.dispatch, proj, &reason), 0);
        ck_assert_ptr_null(reason);
        params_free(p);
}
END_TEST

/* A bind is compared by what it resolves to: a symlink into the state dir
 * is the state dir, and the text names the resolved path. */
START_TEST(binds_symlink_into_the_state_dir) {
        mkdirs("s/state/tasks");
        symlink_at("s/state/tasks", "other/innocent");
        _cleanup_free_ char *proj = at("proj"), *link = at("other/innocent"), *real = at("s/state/tasks");
        char *reason = NULL;
        for (size_t k = 0; k < ELEMENTSOF(bind_keys); k++) {
                Params *p = params("\"%s\":[\"%s\"]", bind_keys[k], link);
                _cleanup_free_ char *want = strdup_printf(
                        "error: %s entry %s overlaps the state dir (%s); the sandbox would no longer gate the "
                        "worker's writes\nhelp: bind a path outside %s",
                        bind_keys[k], real, paths.state_dir, paths.state_dir);
                check_refused(dispatch_check_binds(&paths, &p->pp.dispatch, proj, &reason), &reason, -EPERM, want);
                params_free(p);
        }
}
END_TEST

/* The own dirs are directories, whatever path names them: a state dir
 * reached through a symlink (a symlinked $HOME) is refused by its real
 * path too. */
START_TEST(binds_state_dir_named_through_a_symlink) {
        symlink_at("s/state", "statelink");
        free(paths.state_dir);
        paths.state_dir = at("statelink");
        _cleanup_free_ char *proj = at("proj"), *real = at("s/state"), *inside = at("s/state/tasks.json");
        Params *p = params("\"rwBind\":[\"%s\"]", inside);
        _cleanup_free_ char *want = strdup_printf(
                "error: rwBind entry %s overlaps the state dir (%s); the sandbox would no longer gate the worker's "
                "writes\nhelp: bind a path outside %s",
                inside, real, real);
        char *reason = NULL;
        check_refused(dispatch_check_binds(&paths, &p->pp.dispatch, proj, &reason), &reason, -EPERM, want);
        params_free(p);
}
END_TEST

/* ---- the bind warnings ---- */

START_TEST(bind_warnings_inside_and_containing) {
        _cleanup_free_ char *secret = at("d/secret"), *inner = at("d/secret/inner"), *d = at("d"),
                            *other = at("other");
        _cleanup_free_ char *unrelated = at("nowhere");
        /* an entry meeting several deny-listed dirs is warned about once, for the first */
        char *deny[] = {unrelated, secret, inner, NULL};
        Params *p = params("\"rwBind\":[\"%s\",\"%s\"],\"allowedDirs\":[\"%s\"],\"roBind\":[\"%s\",\"%s\"]", inner,
                           other, d, secret, d);
        char **warnings = NULL, **log = NULL;
        ck_assert_int_eq(dispatch_bind_warnings(deny, &p->pp.dispatch, &warnings, &log), 0);
        /* one per entry that meets a deny-listed dir, in list order: rwBind, allowedDirs, roBind */
        ck_assert_uint_eq(strv_length(warnings), 4);
        _cleanup_free_ char *w0 = strdup_printf("warning: %s is inside the deny-listed %s; it is bound read-write "
                                                "anyway, because you asked for it -- the worker can read it",
                                                inner, secret);
        _cleanup_free_ char *w1 = strdup_printf(
                "warning: %s contains the deny-listed %s; it stays masked inside the sandbox (bound read-write)", d,
                secret);
        /* the deny-listed dir itself is inside it */
        _cleanup_free_ char *w2 = strdup_printf("warning: %s is inside the deny-listed %s; it is bound read-only "
                                                "anyway, because you asked for it -- the worker can read it",
                                                secret, secret);
        _cleanup_free_ char *w3 = strdup_printf(
                "warning: %s contains the deny-listed %s; it stays masked inside the sandbox (bound read-only)", d,
                secret);
        ck_assert_str_eq(warnings[0], w0);
        ck_assert_str_eq(warnings[1], w1);
        ck_assert_str_eq(warnings[2], w2);
        ck_assert_str_eq(warnings[3], w3);
        /* the daemon logs only what exposes something the deny list hides, without the prefix */
        ck_assert_uint_eq(strv_length(log), 2);
        ck_assert_str_eq(log[0], w0 + strlen("warning: "));
        ck_assert_str_eq(log[1], w2 + strlen("warning: "));
        strv_free(warnings);
        strv_free(log);
        params_free(p);
}
END_TEST

START_TEST(bind_warnings_none) {
        _cleanup_free_ char *secret = at("d/secret"), *other = at("other");
        char *deny[] = {secret, NULL};
        Params *p = params("\"rwBind\":[\"%s\"],\"roBind\":[\"/usr\"]", other);
        char **warnings = (char **) 1, **log = (char **) 1;
        ck_assert_int_eq(dispatch_bind_warnings(deny, &p->pp.dispatch, &warnings, &log), 0);
        ck_assert_ptr_null(warnings);
        ck_assert_ptr_null(log);
        params_free(p);
        /* nor without binds */
        p = params("%s", "");
        warnings = log = (char **) 1;
        ck_assert_int_eq(dispatch_bind_warnings(deny, &p->pp.dispatch, &warnings, &log), 0);
        ck_assert_ptr_null(warnings);
        ck_assert_ptr_null(log);
        params_free(p);
}
END_TEST

/* A bind that resolves into a deny-listed dir is warned about by its
 * resolved path. */
START_TEST(bind_warnings_symlink) {
        symlink_at("d/secret/inner", "other/alias");
        _cleanup_free_ char *secret = at("d/secret"), *alias = at("other/alias"), *inner = at("d/secret/inner");
        char *deny[] = {secret, NULL};
        Params *p = params("\"roBind\":[\"%s\"]", alias);
        char **warnings = NULL, **log = NULL;
        ck_assert_int_eq(dispatch_bind_warnings(deny, &p->pp.dispatch, &warnings, &log), 0);
        _cleanup_free_ char *want = strdup_printf("warning: %s is inside the deny-listed %s; it is bound read-only "
                                                  "anyway, because you asked for it -- the worker can read it",
                                                  inner, secret);
        ck_assert_uint_eq(strv_length(warnings), 1);
        ck_assert_str_eq(warnings[0], want);
        ck_assert_uint_eq(strv_length(log), 1);
        strv_free(warnings);
        strv_free(log);
        params_free(p);
}
END_TEST

/* ---- a sandboxed caller's directory ---- */

static char *nested_outside_text(const char *target, const char *given) {
        return strdup_printf("error: a task running in a sandbox can dispatch only into its own directory %s or a "
                             "directory under it, not %s\nhelp: pass %s or one of its subdirectories, without .. "
                             "components; dispatch from outside the sandbox to reach other directories",
                             target, given, target);
}

static char *nested_missing_text(const char *target, const char *given) {
        return strdup_printf("error: %s is not a directory under this task's own directory %s outside the sandbox "
                             "(directories the task created and symlinks it made exist only in its overlay; a symlink "
                             "may not lead out of %s)\nhelp: dispatch into a directory that already exists under %s, "
                             "or from outside the sandbox",
                             given, target, target, target);
}

/* Each of given (NULL-terminated) refused with text(target, given), nothing returned. */
static void check_nested_refused(const char *target, const char *const *given,
                                 char *(*text)(const char *target, const char *given)) {
        for (; *given; given++) {
                char *ret = NULL, *reason = NULL;
                _cleanup_free_ char *want = text(target, *given);
                check_refused(dispatch_nested_directory(target, *given, &ret, &reason), &reason, -EPERM, want);
                ck_assert_ptr_null(ret);
        }
}

START_TEST(nested_refused_lexically) {
        _cleanup_free_ char *target = at("proj");
        _cleanup_free_ char *up = strdup_printf("%s/../other", target);
        /* `..` is refused, not resolved: this one would resolve back inside */
        _cleanup_free_ char *up_in = strdup_printf("%s/sub/..", target);
        _cleanup_free_ char *elsewhere = at("other");
        /* a sibling whose name starts with the target's */
        _cleanup_free_ char *sibling = strdup_printf("%s-evil", target);
        /* relative: not the target's path without its leading slash either */
        const char *cases[] = {up, up_in, elsewhere, sibling, "proj/sub", target + 1, "/", NULL};
        mkdirs("proj-evil");
        check_nested_refused(target, cases, nested_outside_text);
}
END_TEST

START_TEST(nested_refused_on_the_host) {
        _cleanup_free_ char *target = at("proj");
        /* a symlink leading out, one to a dir inside that leads out again, a
         * directory that does not exist (the worker's overlay only), a file */
        symlink_at("other", "proj/out");
        symlink_at("proj/out", "proj/sub/twice");
        _cleanup_free_ char *file = at("proj/file");
        ck_assert_int_eq(write_file_atomic(file, "x", 1, 0600), 0);
        _cleanup_free_ char *out = at("proj/out"), *twice = at("proj/sub/twice"), *missing = at("proj/nope"),
                            *below_out = at("proj/out/x");
        const char *cases[] = {out, twice, missing, file, below_out, NULL};
        check_nested_refused(target, cases, nested_missing_text);
}
END_TEST

START_TEST(nested_accepted_with_the_realpath) {
        _cleanup_free_ char *target = at("proj"), *sub = at("proj/sub");
        symlink_at("proj/sub", "proj/alias");
        struct {
                char *given;
                const char *want;
        } cases[] = {
                {strdup(target), target},
                {strdup_printf("%s/", target), target},
                {strdup_printf("%s/.", target), target},
                {strdup(sub), sub},
                {strdup_printf("%s//sub/./", target), sub},
                {strdup_printf("/%s/./sub//", target), sub},
                /* a symlink that stays inside: the directory it names */
                {strdup_printf("%s/alias", target), sub},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *ret = NULL, *reason = NULL;
                ck_assert_ptr_nonnull(cases[i].given);
                ck_assert_msg(dispatch_nested_directory(target, cases[i].given, &ret, &reason) == 0, "%s: %s",
                              cases[i].given, reason);
                ck_assert_ptr_null(reason);
                ck_assert_str_eq(ret, cases[i].want);
                free(ret);
                free(cases[i].given);
        }
}
END_TEST

/* ---- the final marker ---- */

START_TEST(marker_costly) {
        const char *costly[] = {"a{2}", "x{1,3}y", "(((a{255}){255}){255})", "(a)\\1", "(a)(b)\\2", "\\9",
                                "\\\\\\1" /* an escaped backslash, then \1 */};
        for (size_t i = 0; i < ELEMENTSOF(costly); i++)
                ck_assert_msg(dispatch_marker_is_costly(costly[i]), "%s should be costly", costly[i]);
        const char *cheap[] = {"^DONE$",  "Status: (DONE|BLOCKED)", "\\\\1" /* a backslash, then 1 */, "\\0",
                               "a\\.b+", "\\{",                     "trailing\\",                      ""};
        for (size_t i = 0; i < ELEMENTSOF(cheap); i++)
                ck_assert_msg(!dispatch_marker_is_costly(cheap[i]), "%s should not be costly", cheap[i]);
}
END_TEST

START_TEST(marker_check) {
        const char *refused_text =
                "error: a task running in a sandbox cannot dispatch with a --require-final-marker that uses a "
                "back-reference (\\1 to \\9) or an interval ({m,n})\nhelp: match the marker without them";
        char *reason = NULL;
        /* none at all */
        ck_assert_int_eq(dispatch_check_marker(NULL, true, &reason), 0);
        /* costly from a sandboxed caller */
        check_refused(dispatch_check_marker("(((a{255}){255}){255})", true, &reason), &reason, -EPERM, refused_text);
        check_refused(dispatch_check_marker("(x)\\1", true, &reason), &reason, -EPERM, refused_text);
        /* the user may use both */
        ck_assert_int_eq(dispatch_check_marker("^DONE{1,2}$", false, &reason), 0);
        ck_assert_int_eq(dispatch_check_marker("(x)\\1", false, &reason), 0);
        /* a cheap one from the sandbox, an escaped backslash before a digit included */
        ck_assert_int_eq(dispatch_check_marker("^Status: DONE$", true, &reason), 0);
        ck_assert_int_eq(dispatch_check_marker("\\\\1", true, &reason), 0);
        ck_assert_ptr_null(reason);
        /* invalid text, from anyone, with regerror's reason */
        const struct {
                const char *re, *why;
        } invalid[] = {
                {"(", "Unmatched ( or \\("},
                {"[a", "Unmatched [, [^, [:, [., or [="},
                {"a\\", "Trailing backslash"},
        };
        for (size_t i = 0; i < ELEMENTSOF(invalid); i++)
                for (int sandboxed = 0; sandboxed <= 1; sandboxed++) {
                        _cleanup_free_ char *want = strdup_printf(
                                "error: --require-final-marker is not a valid regular expression: %s\nhelp: pass a "
                                "valid regular expression",
                                invalid[i].why);
                        check_refused(dispatch_check_marker(invalid[i].re, sandboxed, &reason), &reason, -EINVAL, want);
                }
}
END_TEST

/* ---- the scope limits ---- */

START_TEST(limits) {
        char *reason = NULL;
        Params *p = params("\"memoryMax\":8388607");
        check_refused(dispatch_check_limits(&p->pp.dispatch, NULL, &reason), &reason, -EINVAL,
                      "error: memoryMax must be at least 8388608 bytes (8M) (got 8388607)\nhelp: the shim, bwrap and "
                      "the worker need that much; use --memory-max with a larger value");
        params_free(p);
        p = params("\"tasksMax\":7");
        check_refused(dispatch_check_limits(&p->pp.dispatch, NULL, &reason), &reason, -EINVAL,
                      "error: tasksMax must be at least 8 (got 7)\nhelp: the shim, bwrap and the worker need that "
                      "much; use --tasks-max with a larger value");
        params_free(p);
        /* the minimum itself, and the user's without a ceiling */
        p = params("\"memoryMax\":8388608,\"tasksMax\":8");
        ck_assert_int_eq(dispatch_check_limits(&p->pp.dispatch, NULL, &reason), 0);
        params_free(p);
        p = params("\"memoryMax\":1099511627776,\"tasksMax\":100000");
        ck_assert_int_eq(dispatch_check_limits(&p->pp.dispatch, NULL, &reason), 0);
        params_free(p);
        ck_assert_ptr_null(reason);

        DispatchParent parent = {.id = "tp_parent", .memory_max = 100 << 20, .tasks_max = 64};
        p = params("\"memoryMax\":%d", (100 << 20) + 1);
        check_refused(dispatch_check_limits(&p->pp.dispatch, &parent, &reason), &reason, -EPERM,
                      "error: memoryMax 104857601 exceeds the limit of the dispatching task tp_parent (104857600)\n"
                      "help: a nested dispatch cannot raise a limit above its own; omit --memory-max to inherit it");
        params_free(p);
        p = params("\"tasksMax\":65");
        check_refused(dispatch_check_limits(&p->pp.dispatch, &parent, &reason), &reason, -EPERM,
                      "error: tasksMax 65 exceeds the limit of the dispatching task tp_parent (64)\n"
                      "help: a nested dispatch cannot raise a limit above its own; omit --tasks-max to inherit it");
        params_free(p);
        /* below the minimum is that refusal, also under a parent */
        p = params("\"tasksMax\":1");
        ck_assert_int_eq(dispatch_check_limits(&p->pp.dispatch, &parent, &reason), -EINVAL);
        ck_assert_ptr_nonnull(strstr(reason, "error: tasksMax must be at least 8 (got 1)"));
        free(reason), reason = NULL;
        params_free(p);
        /* equal to the parent's, or not asked for */
        p = params("\"memoryMax\":%d,\"tasksMax\":64", 100 << 20);
        ck_assert_int_eq(dispatch_check_limits(&p->pp.dispatch, &parent, &reason), 0);
        params_free(p);
        p = params("%s", "");
        ck_assert_int_eq(dispatch_check_limits(&p->pp.dispatch, &parent, &reason), 0);
        params_free(p);
        /* a parent without limits of its own caps nothing */
        DispatchParent unlimited = {.id = "tp_free"};
        p = params("\"memoryMax\":1099511627776,\"tasksMax\":100000");
        ck_assert_int_eq(dispatch_check_limits(&p->pp.dispatch, &unlimited, &reason), 0);
        params_free(p);
        ck_assert_ptr_null(reason);
}
END_TEST

/* ---- a sandboxed caller's widening, and its job ---- */

START_TEST(sandboxed_widening) {
        const struct {
                const char *param, *key;
        } widening[] = {
                {"\"noSandbox\":true", "noSandbox"},
                {"\"noOverlay\":true", "noOverlay"},
                {"\"rwBind\":[\"/usr\"]", "rwBind"},
                {"\"roBind\":[\"/usr\"]", "roBind"},
                {"\"allowedDirs\":[\"/usr\"]", "allowedDirs"},
        };
        char *reason = NULL;
        for (size_t i = 0; i < ELEMENTSOF(widening); i++) {
                Params *p = params("%s", widening[i].param);
                _cleanup_free_ char *want = strdup_printf(
                        "error: a task running in a sandbox cannot dispatch with %s\nhelp: nested tasks run sandboxed "
                        "on an overlay with no extra binds; dispatch from outside the sandbox to widen them",
                        widening[i].key);
                check_refused(dispatch_check_sandboxed(&p->pp.dispatch, &reason), &reason, -EPERM, want);
                params_free(p);
        }
        /* asking for false widens nothing */
        Params *p = params("\"noSandbox\":false,\"noOverlay\":false,\"model\":\"a/b\",\"finalMarker\":\"x\"");
        ck_assert_int_eq(dispatch_check_sandboxed(&p->pp.dispatch, &reason), 0);
        ck_assert_ptr_null(reason);
        params_free(p);
}
END_TEST

START_TEST(nested_job) {
        char *reason = NULL;
        Params *p = params("\"job\":\"nightly\"");
        check_refused(dispatch_check_nested_job(&p->pp.dispatch, &reason), &reason, -EPERM,
                      "error: a task cannot dispatch as a timer job\nhelp: Dispatch without the job param");
        params_free(p);
        p = params("%s", "");
        ck_assert_int_eq(dispatch_check_nested_job(&p->pp.dispatch, &reason), 0);
        ck_assert_ptr_null(reason);
        params_free(p);
}
END_TEST

/* ---- the variant ---- */

START_TEST(variant_per_executor) {
        const struct {
                const char *executor, *requested, *want; /* want NULL: no variant */
        } cases[] = {
                {"shell", "highest", NULL}, {"shell", "low", NULL},
                /* pi: "highest" and "max" are pi's highest level */
                {"pi", "highest", "xhigh"}, {"pi", "max", "xhigh"},   {"pi", "low", "low"}, {"pi", "medium", "medium"},
                /* OpenCode: "highest" needs a ranking it does not have; the rest as asked */
                {"opencode", "highest", NULL}, {"opencode", "max", "max"}, {"opencode", "high", "high"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *v = dispatch_resolve_variant(cases[i].executor, cases[i].requested);
                if (!cases[i].want)
                        ck_assert_msg(!v, "%s %s: got %s", cases[i].executor, cases[i].requested, v);
                else {
                        ck_assert_msg(v, "%s %s: got none", cases[i].executor, cases[i].requested);
                        ck_assert_str_eq(v, cases[i].want);
                }
        }
}
END_TEST

TF_MAIN("dispatch-policy", "dispatch-policy", setup, teardown, 0, directory_masked_roots, directory_own_dirs,
        directory_own_dir_through_a_symlink, directory_deny_list, directory_deny_entry_through_a_symlink,
        binds_relative_entry, binds_overlapping_protected_dirs, binds_symlink_into_the_state_dir,
        binds_state_dir_named_through_a_symlink, bind_warnings_inside_and_containing, bind_warnings_none,
        bind_warnings_symlink, nested_refused_lexically, nested_refused_on_the_host, nested_accepted_with_the_realpath,
        marker_costly, marker_check, limits, sandboxed_widening, nested_job, variant_per_executor)
