/* changeset-risk.h: which files of a patch can make the host run code
 * later, read from patches real git writes (C-quoted and UTF-8 names,
 * modes, symlinks, renames), from hand-made hostile ones, and from a huge
 * one streamed through a pipe. */

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "changeset-risk.h"
#include "json-util.h"
#include "macro.h"
#include "protocol-keys.h"
#include "unit.h"

static char *tmp;

static void setup(void) {
        tmp = tf_tmpdir_new("risk");
}

static void teardown(void) {
        tmp = tf_tmpdir_free(tmp);
}

/* Classify text as a patch (written to a file). Returns the read's result. */
static int classify_text(const char *text, size_t len, const char *prefix, char *const *patterns,
                         ChangesetRisks *ret) {
        _cleanup_free_ char *p = tf_put(tmp, "x.patch", text, len);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        int r = changeset_risks_read(fd, prefix, patterns, -1, ret);
        close(fd);
        return r;
}

/* Does ret hold an entry of class c for the (quoted) path? */
static bool has_risk(const ChangesetRisks *r, RiskClass c, const char *path) {
        for (size_t i = 0; i < r->n; i++)
                if (r->entries[i].class == c && streq(r->entries[i].path, path)) return true;
        return false;
}

static bool path_listed(const ChangesetRisks *r, const char *path) {
        for (size_t i = 0; i < r->n; i++)
                if (streq(r->entries[i].path, path)) return true;
        return false;
}

START_TEST(class_names) {
        for (int c = 0; c < _RISK_CLASS_MAX; c++) {
                const char *s = risk_class_to_string((RiskClass) c);
                ck_assert_ptr_nonnull(s);
                ck_assert_int_eq(risk_class_from_string(s), c);
                ck_assert_ptr_nonnull(risk_class_description((RiskClass) c));
        }
        ck_assert_str_eq(risk_class_to_string(RISK_AGENT_CONFIG), "agent-config");
        ck_assert_str_eq(risk_class_to_string(RISK_SYMLINK_OUT), "symlink-out");
        ck_assert_ptr_null(risk_class_to_string(_RISK_CLASS_MAX));
        ck_assert_ptr_null(risk_class_to_string(_RISK_CLASS_INVALID));
        ck_assert_ptr_null(risk_class_description(_RISK_CLASS_MAX));
        ck_assert_int_eq(risk_class_from_string("Agent-Config"), _RISK_CLASS_INVALID);
        ck_assert_int_eq(risk_class_from_string(""), _RISK_CLASS_INVALID);
        ck_assert_int_eq(risk_class_from_string(NULL), _RISK_CLASS_INVALID);
}
END_TEST

static const struct {
        const char *path;
        RiskClass class;
} path_rows[] = {
        {".claude/settings.json", RISK_AGENT_CONFIG},
        {".claude/settings.local.json", RISK_AGENT_CONFIG},
        {".claude", RISK_AGENT_CONFIG},
        {"sub/dir/.claude/commands/x.md", RISK_AGENT_CONFIG},
        {".CLAUDE/Settings.json", RISK_AGENT_CONFIG},
        {".codex/config.toml", RISK_AGENT_CONFIG},
        {".opencode/plugin/x.ts", RISK_AGENT_CONFIG},
        {".pi/settings.json", RISK_AGENT_CONFIG},
        {".cursor/rules", RISK_AGENT_CONFIG},
        {"opencode.json", RISK_AGENT_CONFIG},
        {"pkg/OpenCode.JSONC", RISK_AGENT_CONFIG},
        {".mcp.json", RISK_AGENT_CONFIG},
        {".vscode/tasks.json", RISK_EDITOR_CONFIG},
        {".vscode/settings.json", RISK_EDITOR_CONFIG},
        {".vscode/launch.json", RISK_EDITOR_CONFIG},
        {"a/.VSCode/Extensions.json", RISK_EDITOR_CONFIG},
        {".vscode", RISK_EDITOR_CONFIG},
        {".idea/workspace.xml", RISK_EDITOR_CONFIG},
        {"x/.idea/runConfigurations/a.xml", RISK_EDITOR_CONFIG},
        {".envrc", RISK_ENVRC},
        {".taskferry.toml", RISK_TASKFERRY_CONFIG},
        {".TaskFerry.TOML", RISK_TASKFERRY_CONFIG},
        {"deep/er/.ENVRC", RISK_ENVRC},
        {".gitattributes", RISK_GIT_ATTRIBUTES},
        {"src/.gitattributes", RISK_GIT_ATTRIBUTES},
        {".gitmodules", RISK_GIT_MODULES},
        {".husky/pre-commit", RISK_HOOK_MANAGER},
        {".pre-commit-config.yaml", RISK_HOOK_MANAGER},
        {"lefthook.yml", RISK_HOOK_MANAGER},
        {"lefthook.yaml", RISK_HOOK_MANAGER},
        {".lefthook.yml", RISK_HOOK_MANAGER},
        {"lefthook-local.yml", RISK_HOOK_MANAGER},
        {".github/workflows/ci.yml", RISK_CI_WORKFLOW},
        {".GitHub/Workflows/x/y.yaml", RISK_CI_WORKFLOW},
        {".github/workflows", RISK_CI_WORKFLOW},
        {".github", RISK_CI_WORKFLOW},
        {".gitlab-ci.yml", RISK_CI_WORKFLOW},
        /* the earliest class wins */
        {".claude/.envrc", RISK_AGENT_CONFIG},
        {".husky/.gitattributes", RISK_GIT_ATTRIBUTES},
        /* harmless lookalikes */
        {"docs/.claude.md", _RISK_CLASS_INVALID},
        {"sub/.taskferry.toml", _RISK_CLASS_INVALID},
        {"claude/settings.json", _RISK_CLASS_INVALID},
        {"CLAUDE.md", _RISK_CLASS_INVALID},
        {"x.claude/settings.json", _RISK_CLASS_INVALID},
        {"a/.vscode/other.json", _RISK_CLASS_INVALID},
        {".vscode/tasks.json/x", _RISK_CLASS_INVALID},
        {".vscode/sub/tasks.json", _RISK_CLASS_INVALID},
        {"vscode/tasks.json", _RISK_CLASS_INVALID},
        {".envrc.example", _RISK_CLASS_INVALID},
        {".env.local", _RISK_CLASS_INVALID},
        {".envrc/readme", _RISK_CLASS_INVALID},
        {"gitattributes", _RISK_CLASS_INVALID},
        {"opencode.json.bak", _RISK_CLASS_INVALID},
        {"opencode.json/x", _RISK_CLASS_INVALID},
        {"sub/.github/workflows/ci.yml", _RISK_CLASS_INVALID},
        {"sub/.gitlab-ci.yml", _RISK_CLASS_INVALID},
        {".github/ISSUE_TEMPLATE/bug.md", _RISK_CLASS_INVALID},
        {".github/workflowsx/a", _RISK_CLASS_INVALID},
        {"husky/pre-commit", _RISK_CLASS_INVALID},
        {"src/main.c", _RISK_CLASS_INVALID},
        {"", _RISK_CLASS_INVALID},
};

START_TEST(path_class) {
        RiskClass got = risk_class_of_path(path_rows[_i].path);
        if (got != path_rows[_i].class)
                ck_abort_msg("%s: got %s, want %s", path_rows[_i].path, strnull(risk_class_to_string(got)),
                             strnull(risk_class_to_string(path_rows[_i].class)));
}
END_TEST

START_TEST(symlink_leaves) {
        ck_assert(risk_symlink_leaves("l", "/etc/shadow"));
        ck_assert(risk_symlink_leaves("a/b/l", "/"));
        ck_assert(risk_symlink_leaves("l", ""));
        ck_assert(risk_symlink_leaves("l", ".."));
        ck_assert(risk_symlink_leaves("l", "../x"));
        ck_assert(risk_symlink_leaves("a/l", "../../outside"));
        ck_assert(risk_symlink_leaves("a/b/l", "../../../x"));
        ck_assert(risk_symlink_leaves("a/l", "x/../../.."));
        /* out and back in still leaves on the way (a lexical walk) */
        ck_assert(risk_symlink_leaves("l", "../repo/x"));
        ck_assert(risk_symlink_leaves("a/l", "./.././../x"));
        /* inside */
        ck_assert(!risk_symlink_leaves("l", "x"));
        ck_assert(!risk_symlink_leaves("l", "."));
        ck_assert(!risk_symlink_leaves("a/l", ".."));
        ck_assert(!risk_symlink_leaves("a/b/l", "../../x"));
        ck_assert(!risk_symlink_leaves("a/l", "b/../../c"));
        ck_assert(!risk_symlink_leaves("a//b/l", "..//..//x"));
        ck_assert(!risk_symlink_leaves("l", "x/y/../z"));
}
END_TEST

START_TEST(review_patterns) {
        char *pats[] = {(char *) "secrets/*.yml", (char *) "/tools/", (char *) "*.sh", NULL};
        ck_assert_str_eq(strnull(risk_match_pattern("secrets/a.yml", pats)), "secrets/*.yml");
        ck_assert_str_eq(strnull(risk_match_pattern("tools/a", pats)), "/tools/");
        ck_assert_str_eq(strnull(risk_match_pattern("tools/x/y/z", pats)), "/tools/");
        ck_assert_str_eq(strnull(risk_match_pattern("deep/dir/run.sh", pats)), "*.sh");
        ck_assert_ptr_null(risk_match_pattern("tools", pats)); /* the directory's own name is no file below it */
        ck_assert_ptr_null(risk_match_pattern("xtools/a", pats));
        ck_assert_ptr_null(risk_match_pattern("secrets/a.yaml", pats));
        ck_assert_ptr_null(risk_match_pattern("a", NULL));
        char *dirpat[] = {(char *) "gen-*/", (char *) "", NULL};
        ck_assert_ptr_nonnull(risk_match_pattern("gen-x/out.c", dirpat));
        ck_assert_ptr_nonnull(risk_match_pattern("gen-x/a/b", dirpat));
        ck_assert_ptr_null(risk_match_pattern("src/gen-x", dirpat));
        ck_assert_ptr_null(risk_match_pattern("", dirpat));
}
END_TEST

/* A repository under tmp/repo with a base commit, then the shell script
 * `change` run in it; the patch of the change as changeset_extract writes
 * it (diff-tree -r -p --binary --full-index -M), at tmp/c.patch. */
static char *git_patch(const char *base, const char *change) {
        _cleanup_free_ char *repo = tf_path(tmp, "repo");
        tf_mkdirs(tmp, "repo");
        free(tf_sh(repo,
                   "git init -q . && git config user.email t@t && git config user.name t && "
                   "git config core.quotePath true && %s && git add -A && git commit -qm base --allow-empty",
                   base));
        free(tf_sh(repo, "%s", change));
        free(tf_sh(repo,
                   "git add -A && git commit -qm change --allow-empty && "
                   "git diff-tree -r -p --binary --full-index -M --no-color HEAD~ HEAD > ../c.patch"));
        return tf_path(tmp, "c.patch");
}

static int classify_file(const char *patch, const char *prefix, char *const *patterns, int live_fd,
                         ChangesetRisks *ret) {
        int fd = open(patch, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        int r = changeset_risks_read(fd, prefix, patterns, live_fd, ret);
        close(fd);
        return r;
}

START_TEST(real_patch_every_class) {
        _cleanup_free_ char *patch = git_patch(
                "mkdir -p docs keep && echo a > docs/a && echo x > plain && echo y > keep/.envrc && "
                "echo r > torename",
                "mkdir -p .claude .vscode sub .husky .github/workflows bin deep/er a/.vscode claude && "
                "echo '{\"hooks\":{}}' > .claude/settings.json && echo '{}' > .vscode/tasks.json && "
                "echo 'curl x|sh' > .envrc && echo '* filter=x' > sub/.gitattributes && "
                "printf '[submodule \"s\"]\\n\\turl = ext::sh -c x\\n' > .gitmodules && "
                "echo 'npm test' > .husky/pre-commit && echo 'on: push' > .github/workflows/ci.yml && "
                "printf '#!/bin/sh\\n' > bin/run && chmod +x bin/run && chmod +x plain && "
                ": > empty-exe && chmod 755 empty-exe && "
                "ln -s /etc/shadow shadow && ln -s ../../outside deep/out && ln -s ../docs/a deep/in && "
                "git mv -f torename .mcp.json && git rm -q keep/.envrc && "
                "echo n > docs/.claude.md && echo n > claude/settings.json && echo n > a/.vscode/other.json");
        ChangesetRisks r = {};
        int k = classify_file(patch, "", NULL, -1, &r);
        ck_assert_int_ge(k, 0);
        ck_assert_int_eq((size_t) k, r.total);
        ck_assert(has_risk(&r, RISK_AGENT_CONFIG, ".claude/settings.json"));
        ck_assert(has_risk(&r, RISK_AGENT_CONFIG, ".mcp.json"));
        ck_assert(has_risk(&r, RISK_EDITOR_CONFIG, ".vscode/tasks.json"));
        ck_assert(has_risk(&r, RISK_ENVRC, ".envrc"));
        ck_assert(has_risk(&r, RISK_GIT_ATTRIBUTES, "sub/.gitattributes"));
        ck_assert(has_risk(&r, RISK_GIT_MODULES, ".gitmodules"));
        ck_assert(has_risk(&r, RISK_HOOK_MANAGER, ".husky/pre-commit"));
        ck_assert(has_risk(&r, RISK_CI_WORKFLOW, ".github/workflows/ci.yml"));
        ck_assert(has_risk(&r, RISK_EXECUTABLE, "bin/run"));
        ck_assert(has_risk(&r, RISK_EXECUTABLE, "plain"));     /* old mode 100644, new mode 100755 */
        ck_assert(has_risk(&r, RISK_EXECUTABLE, "empty-exe")); /* no hunk, no ---/+++ */
        ck_assert(has_risk(&r, RISK_SYMLINK_OUT, "shadow"));
        ck_assert(has_risk(&r, RISK_SYMLINK_OUT, "deep/out"));
        /* fine or harmless: an inner link, a deletion, lookalikes, the rename's old name */
        ck_assert(!path_listed(&r, "deep/in"));
        ck_assert(!path_listed(&r, "keep/.envrc"));
        ck_assert(!path_listed(&r, "docs/.claude.md"));
        ck_assert(!path_listed(&r, "claude/settings.json"));
        ck_assert(!path_listed(&r, "a/.vscode/other.json"));
        ck_assert(!path_listed(&r, "torename"));
        ck_assert_uint_eq(r.total, 13);
        ck_assert_uint_eq(r.n, 13);
        for (size_t i = 0; i < r.n; i++)
                if (r.entries[i].class == RISK_SYMLINK_OUT && streq(r.entries[i].path, "shadow"))
                        ck_assert_ptr_nonnull(strstr(r.entries[i].detail, "/etc/shadow"));
        changeset_risks_done(&r);
}
END_TEST

START_TEST(real_patch_quoted_names) {
        _cleanup_free_ char *patch = git_patch(
                "true",
                "mkdir -p 'sp ace/.claude' \"$(printf 'ta\\tb')\" \"$(printf '\\303\\251t\\303\\251')\" && "
                "echo x > 'sp ace/.claude/a b.json' && echo x > \"$(printf 'ta\\tb')/.envrc\" && "
                "echo x > \"$(printf '\\303\\251t\\303\\251')/.gitattributes\" && "
                "echo x > 'q\"uote.sh' && chmod +x 'q\"uote.sh' && ln -s \"$(printf '/etc/\\033]0;x\\007')\" esc");
        ChangesetRisks r = {};
        ck_assert_int_eq(classify_file(patch, NULL, NULL, -1, &r), 5);
        ck_assert(has_risk(&r, RISK_AGENT_CONFIG, "sp ace/.claude/a b.json"));
        ck_assert(has_risk(&r, RISK_ENVRC, "\"ta\\tb/.envrc\""));
        ck_assert(has_risk(&r, RISK_GIT_ATTRIBUTES, "\"\\303\\251t\\303\\251/.gitattributes\""));
        ck_assert(has_risk(&r, RISK_EXECUTABLE, "\"q\\\"uote.sh\""));
        ck_assert(has_risk(&r, RISK_SYMLINK_OUT, "esc"));
        /* the target is shown quoted: no raw control byte in what is recorded */
        for (size_t i = 0; i < r.n; i++) {
                ck_assert_ptr_null(strchr(r.entries[i].detail, '\033'));
                ck_assert_ptr_null(strchr(r.entries[i].path, '\t'));
        }
        changeset_risks_done(&r);
}
END_TEST

START_TEST(real_patch_prefix_and_patterns) {
        /* the patch of subdirectory sub of the repository: names relative to sub */
        _cleanup_free_ char *patch = git_patch(
                "mkdir -p sub && echo a > sub/a",
                "mkdir -p sub/.github/workflows sub/tools && echo x > sub/.github/workflows/ci.yml && "
                "ln -s ../a sub/up && echo t > sub/tools/gen");
        /* rewrite as sub's own patch: diff-tree of the two sub trees */
        _cleanup_free_ char *repo = tf_path(tmp, "repo");
        free(tf_sh(repo, "git diff-tree -r -p --binary --full-index -M --no-color HEAD~:sub HEAD:sub > ../c.patch"));
        ChangesetRisks r = {};
        /* as the top of its own repository: a workflow, and a link that leaves */
        ck_assert_int_eq(classify_file(patch, "", NULL, -1, &r), 2);
        ck_assert(has_risk(&r, RISK_CI_WORKFLOW, ".github/workflows/ci.yml"));
        ck_assert(has_risk(&r, RISK_SYMLINK_OUT, "up"));
        changeset_risks_done(&r);
        /* as sub/ of the repository: neither; a pattern on the repository's paths */
        char *pats[] = {(char *) "sub/tools/", NULL};
        ck_assert_int_eq(classify_file(patch, "sub", pats, -1, &r), 1);
        ck_assert(has_risk(&r, RISK_PROJECT, "tools/gen"));
        ck_assert_ptr_nonnull(strstr(r.entries[0].detail, "sub/tools/"));
        changeset_risks_done(&r);
        char *deeper[] = {(char *) "sub/tools/gen", NULL};
        ck_assert_int_eq(classify_file(patch, "x/sub/", deeper, -1, &r), 0);
        ck_assert_uint_eq(r.n, 0);
}
END_TEST

START_TEST(rename_of_symlink) {
        /* a pure rename carries no mode: the link is read in the live directory */
        _cleanup_free_ char *patch = git_patch("mkdir -p a/b && ln -s ../../x a/b/l && ln -s ../../../y a/b/far && ln -s x top",
                                               "git mv a/b/l l && git mv a/b/far a/far && git mv top a/top");
        _cleanup_free_ char *repo = tf_path(tmp, "repo");
        free(tf_sh(repo, "git checkout -q HEAD~")); /* the live tree the patch applies to */
        int live = open(repo, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(live, 0);
        ChangesetRisks r = {};
        ck_assert_int_eq(classify_file(patch, "", NULL, live, &r), 2);
        ck_assert(has_risk(&r, RISK_SYMLINK_OUT, "l"));
        ck_assert(has_risk(&r, RISK_SYMLINK_OUT, "a/far"));
        changeset_risks_done(&r);
        /* without the live directory, nothing says they are links */
        ck_assert_int_eq(classify_file(patch, "", NULL, -1, &r), 0);
        close(live);
}
END_TEST

/* A symlink the live tree has at a risky name makes a change below its
 * target that risky file; one that leaves the directory, or a plain path
 * beside the target, does not */
START_TEST(committed_symlink_aliases) {
        _cleanup_free_ char *patch = git_patch(
                "mkdir -p tools/agent ide .vscode other && echo '{}' > tools/agent/README && ln -s tools/agent .claude && "
                "echo '{}' > ide/tasks.json && ln -s ../ide/tasks.json .vscode/tasks.json && ln -s ../../etc .husky",
                "echo x > tools/agent/settings.json && echo y > ide/tasks.json && echo z > tools/agentx && "
                "echo w > other/f");
        _cleanup_free_ char *repo = tf_path(tmp, "repo");
        int live = open(repo, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(live, 0);
        ChangesetRisks r = {};
        ck_assert_int_eq(classify_file(patch, "", NULL, live, &r), 2);
        ck_assert(has_risk(&r, RISK_AGENT_CONFIG, "tools/agent/settings.json"));
        ck_assert(has_risk(&r, RISK_EDITOR_CONFIG, "ide/tasks.json"));
        bool named = false;
        for (size_t i = 0; i < r.n; i++) named |= strstr(r.entries[i].detail, "committed symlink .claude") != NULL;
        ck_assert(named);
        changeset_risks_done(&r);
        /* no live tree: nothing to follow */
        ck_assert_int_eq(classify_file(patch, "", NULL, -1, &r), 0);
        close(live);
}
END_TEST

START_TEST(symlink_hunks) {
        /* a changed target: only the new side counts */
        static const char changed[] =
                "diff --git a/l b/l\n"
                "index 1111111111111111111111111111111111111111..2222222222222222222222222222222222222222 120000\n"
                "--- a/l\n+++ b/l\n@@ -1 +1 @@\n-/etc/shadow\n\\ No newline at end of file\n+inside\n"
                "\\ No newline at end of file\n";
        ChangesetRisks r = {};
        ck_assert_int_eq(classify_text(changed, sizeof changed - 1, "", NULL, &r), 0);
        static const char out[] =
                "diff --git a/l b/l\n"
                "index 1111111111111111111111111111111111111111..2222222222222222222222222222222222222222 120000\n"
                "--- a/l\n+++ b/l\n@@ -1 +1 @@\n-inside\n\\ No newline at end of file\n+/etc/shadow\n"
                "\\ No newline at end of file\n";
        ck_assert_int_eq(classify_text(out, sizeof out - 1, "", NULL, &r), 1);
        ck_assert(has_risk(&r, RISK_SYMLINK_OUT, "l"));
        changeset_risks_done(&r);
        /* a deleted link, and a plain file whose content looks like a path */
        static const char harmless[] =
                "diff --git a/l b/l\ndeleted file mode 120000\n"
                "index 1111111111111111111111111111111111111111..0000000000000000000000000000000000000000\n"
                "--- a/l\n+++ /dev/null\n@@ -1 +0,0 @@\n-/etc/shadow\n\\ No newline at end of file\n"
                "diff --git a/f b/f\nnew file mode 100644\n"
                "index 0000000000000000000000000000000000000000..2222222222222222222222222222222222222222\n"
                "--- /dev/null\n+++ b/f\n@@ -0,0 +1 @@\n+/etc/shadow\n";
        ck_assert_int_eq(classify_text(harmless, sizeof harmless - 1, "", NULL, &r), 0);
        /* a link section with a binary body: its target is unknown, counted as leaving */
        static const char binary[] =
                "diff --git a/l b/l\nnew file mode 120000\n"
                "index 0000000000000000000000000000000000000000..2222222222222222222222222222222222222222\n"
                "GIT binary patch\nliteral 3\nKcmZ>A$N&HU\n\nliteral 0\nHcmV?d00001\n\n";
        ck_assert_int_eq(classify_text(binary, sizeof binary - 1, "", NULL, &r), 1);
        ck_assert(has_risk(&r, RISK_SYMLINK_OUT, "l"));
        changeset_risks_done(&r);
}
END_TEST

START_TEST(malformed) {
        static const char *const bad[] = {
                "hello\n",
                "\n",
                "diff --git a/x b/y z\nindex 1..2\n",                                  /* no name anywhere */
                "diff --git a/x b/x\n+++ \"b/unterminated\n",                          /* bad quoting */
                "diff --git a/x b/x\n+++ \"b/\\q\"\n",                                 /* bad escape */
                "diff --git a/x b/x\n+++ \"b/\\000\"\n",                               /* escaped NUL */
                "diff --git a/x b/x\nnew file mode 10075x\n",                          /* bad mode */
                "diff --git a/x b/x\nold mode 100644\nnew mode 1007555\n",             /* bad mode */
                "diff --git a/x b/x\nrename to \n",                                    /* empty name */
                "diff --git \"a/x\" \"b/\\9\"\n",                                      /* bad quoted diff line */
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                ChangesetRisks r = {.n = 7};
                int k = classify_text(bad[i], strlen(bad[i]), "", NULL, &r);
                if (k != -EBADMSG) ck_abort_msg("case %zu: %d", i, k);
                ck_assert_ptr_null(r.entries); /* untouched on failure */
        }
        /* a NUL inside a header line */
        static const char nul[] = "diff --git a/x b/x\n+++ b/a\0b\n";
        ChangesetRisks r = {};
        ck_assert_int_eq(classify_text(nul, sizeof nul - 1, "", NULL, &r), -EBADMSG);
        /* a header line over 64 KiB */
        size_t big = (size_t) 70 << 10;
        char *s = malloc(big + 64);
        int n = sprintf(s, "diff --git a/x b/x\nrename to ");
        memset(s + n, 'a', big);
        strcpy(s + n + big, "\n");
        ck_assert_int_eq(classify_text(s, strlen(s), "", NULL, &r), -EBADMSG);
        free(s);
        /* empty input: no sections, no risk */
        ck_assert_int_eq(classify_text("", 0, "", NULL, &r), 0);
        /* a last line without its newline still counts */
        static const char tail[] = "diff --git a/.envrc b/.envrc\nnew file mode 100644";
        ck_assert_int_eq(classify_text(tail, sizeof tail - 1, "", NULL, &r), 1);
        changeset_risks_done(&r);
        /* a directory is no patch: read(2) fails */
        int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_eq(changeset_risks_read(fd, "", NULL, -1, &r), -EISDIR);
        close(fd);
}
END_TEST

/* Write a patch of n_exec new executables, one huge file and a link whose
 * target is a line of 8 MiB into fd, then exit. */
static void write_huge(int fd, unsigned n_exec, size_t body_mib) {
        FILE *f = fdopen(fd, "w");
        for (unsigned i = 0; i < n_exec; i++)
                fprintf(f, "diff --git a/e%u b/e%u\nnew file mode 100755\nindex 0000000..e69de29\n", i, i);
        fputs("diff --git a/big b/big\nnew file mode 100644\n--- /dev/null\n+++ b/big\n@@ -0,0 +1,1 @@\n", f);
        static char line[1 << 16];
        memset(line, 'x', sizeof line);
        line[0] = '+';
        line[sizeof line - 1] = '\n';
        for (size_t i = 0; i < body_mib * 16; i++) fwrite(line, 1, sizeof line, f);
        fputs("diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+", f);
        for (size_t i = 0; i < 8 * 16; i++) fwrite(line + 1, 1, sizeof line - 2, f);
        fputs("\n\\ No newline at end of file\n", f);
        fclose(f);
        _exit(0);
}

START_TEST(huge_patch_streams) {
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(p[0]);
                write_huge(p[1], 1000, 96);
        }
        close(p[1]);
        struct rusage before, after;
        ck_assert_int_eq(getrusage(RUSAGE_SELF, &before), 0);
        ChangesetRisks r = {};
        int k = changeset_risks_read(p[0], "", NULL, -1, &r);
        ck_assert_int_eq(getrusage(RUSAGE_SELF, &after), 0);
        close(p[0]);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_int_eq(k, 1001);
        ck_assert_uint_eq(r.total, 1001);
        ck_assert_uint_eq(r.n, CHANGESET_RISKS_MAX);
        ck_assert(has_risk(&r, RISK_EXECUTABLE, "e0"));
        changeset_risks_done(&r);
        /* 104 MiB read through a pipe: the reader held a line buffer, not the patch */
        long grown_kib = after.ru_maxrss - before.ru_maxrss;
        if (grown_kib > 24 * 1024) ck_abort_msg("max RSS grew by %ld KiB", grown_kib);
}
END_TEST

START_TEST(the_long_link_leaves) {
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(p[0]);
                write_huge(p[1], 0, 0);
        }
        close(p[1]);
        ChangesetRisks r = {};
        ck_assert_int_eq(changeset_risks_read(p[0], "", NULL, -1, &r), 1);
        close(p[0]);
        ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
        ck_assert(has_risk(&r, RISK_SYMLINK_OUT, "l"));
        changeset_risks_done(&r);
}
END_TEST

START_TEST(annotate_and_refusal) {
        _cleanup_free_ char *repo = tf_path(tmp, "repo");
        _cleanup_free_ char *patch = git_patch("mkdir -p sub && echo a > sub/a",
                                               "echo x > sub/.envrc && echo y > sub/b");
        free(tf_sh(repo, "git diff-tree -r -p --binary --full-index -M --no-color HEAD~:sub HEAD:sub > ../c.patch"));
        _cleanup_free_ char *sub = tf_path(repo, "sub");
        json_object *o = json_object_new_object();
        json_object *w = json_object_new_array();
        json_object_array_add(w, json_object_new_string("x: left out of the changeset: why"));
        json_add(o, PK_warnings, w);
        ck_assert_int_eq(changeset_risks_annotate(o, patch, sub, NULL), 0);
        ck_assert_int_eq(json_object_array_length(w), 2);
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(w, 1)),
                         "envrc: .envrc: direnv file: runs in your shell when you enter the directory");
        json_object *risks = json_get_array(o, PK_changesetRisks);
        ck_assert_ptr_nonnull(risks);
        ck_assert_int_eq(json_object_array_length(risks), 1);
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(risks, 0), PK_path), ".envrc");
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(risks, 0), PK_class), "envrc");
        json_object_put(o);

        char *text = NULL;
        ck_assert_int_eq(changeset_risks_refusal("t1", patch, sub, NULL, &text), 1);
        ck_assert_str_eq(text, "error: the changeset of task t1 changes files that can run code on this machine later; "
                               "nothing was applied\n  envrc: .envrc\nhelp: read them first (taskferry diff t1), then "
                               "run \"taskferry accept t1 --allow-config\" to land them, or \"taskferry reject t1\"");
        free(text);

        /* the prefix comes from the .git entry above D: sub's workflow is no workflow */
        free(tf_sh(repo, "git checkout -q HEAD~ && mkdir -p sub/.github/workflows && echo x > sub/.github/workflows/a.yml && "
                         "git add -A && git commit -qm w && "
                         "git diff-tree -r -p --binary --full-index --no-color HEAD~:sub HEAD:sub > ../c.patch"));
        ck_assert_int_eq(changeset_risks_refusal("t1", patch, sub, NULL, &text), 0);
        ck_assert_ptr_null(text);
        o = json_object_new_object();
        ck_assert_int_eq(changeset_risks_annotate(o, patch, sub, NULL), 0);
        ck_assert_ptr_null(json_get(o, PK_warnings));
        ck_assert_ptr_null(json_get(o, PK_changesetRisks));
        json_object_put(o);
        /* but at the top of a directory in no repository it is */
        _cleanup_free_ char *plain = tf_path(tmp, "plain");
        tf_mkdirs(tmp, "plain");
        ck_assert_int_eq(changeset_risks_refusal("t1", patch, plain, NULL, &text), 1);
        ck_assert_ptr_nonnull(strstr(text, "  ci-workflow: .github/workflows/a.yml\n"));
        free(text);
        text = NULL;
        ck_assert_int_eq(changeset_risks_refusal("t1", "/nonexistent/p", plain, NULL, &text), -ENOENT);
        ck_assert_ptr_null(text);
        ck_assert_int_eq(changeset_risks_refusal("t1", patch, "/nonexistent/d", NULL, &text), -ENOENT);
}
END_TEST

int main(void) {
        Suite *s = suite_create("changeset-risk");
        TCase *tc = tf_tcase(s, "pure", NULL, NULL, 0, TF_TESTS(class_names, symlink_leaves, review_patterns));
        TF_LOOP(tc, path_class, path_rows);
        tf_tcase(s, "patches", setup, teardown, 0,
                 TF_TESTS(real_patch_every_class, real_patch_quoted_names, real_patch_prefix_and_patterns,
                          rename_of_symlink, committed_symlink_aliases, symlink_hunks, malformed, huge_patch_streams, the_long_link_leaves,
                          annotate_and_refusal));
        return tf_run_suite(s);
}
