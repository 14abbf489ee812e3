#pragma once
/* The files of a changeset that can make the host run code later: agent and
 * editor configuration that runs commands when a tool opens the repository,
 * a direnv file, git attributes and submodules, hook managers, CI
 * workflows, files the worker made executable, symlinks that leave the
 * repository, and the paths a project asks to review (review_paths).
 *
 * Read from the patch itself (git's format, as changeset_extract writes it:
 * "diff --git" sections with their mode, rename and copy lines, C-quoted
 * names, a symlink's target as its content), streamed line by line, never
 * by running git: what is classified is what an accept applies. Used at
 * settlement (changesetWarnings, changesetRisks), by task.accept (which
 * refuses such a changeset unless allowConfig), and by `taskferry diff
 * --stat` (a marker after each such file). */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>

typedef enum RiskClass {
        RISK_AGENT_CONFIG,  /* .claude/ .codex/ .opencode/ .pi/ .cursor/ (any depth), opencode.json[c], .mcp.json */
        RISK_EDITOR_CONFIG, /* .vscode/{tasks,settings,launch,extensions}.json, .idea/ */
        RISK_ENVRC,         /* .envrc */
        RISK_GIT_ATTRIBUTES, /* .gitattributes */
        RISK_GIT_MODULES,   /* .gitmodules */
        RISK_HOOK_MANAGER,  /* .husky/, .pre-commit-config.yaml, lefthook{,-local}.y[a]ml and their dot forms */
        RISK_CI_WORKFLOW,   /* .github/workflows/ and .gitlab-ci.yml at the top of the repository */
        RISK_EXECUTABLE,    /* a file whose executable bit the changeset sets */
        RISK_SYMLINK_OUT,   /* a symlink added or changed whose target leaves the repository */
        RISK_PROJECT,       /* matched by one of the project's review_paths */
        RISK_TASKFERRY_CONFIG, /* .taskferry.toml at the top of the repository */
        _RISK_CLASS_MAX,
        _RISK_CLASS_INVALID = -EINVAL,
} RiskClass;

/* "agent-config", "editor-config", "envrc", "git-attributes", "git-modules",
 * "hook-manager", "ci-workflow", "executable", "symlink-out", "project";
 * NULL for anything else. */
const char *risk_class_to_string(RiskClass c);
/* The inverse; _RISK_CLASS_INVALID for an unknown name or NULL. */
RiskClass risk_class_from_string(const char *s);
/* What a file of class c does on the host, one phrase ("agent
 * configuration: can run commands when an agent starts in this
 * repository"); NULL for an invalid class. */
const char *risk_class_description(RiskClass c);

/* The class of a path by its name alone (repo_path: relative to the top of
 * the repository, no leading '/'): the first of agent-config,
 * editor-config, envrc, git-attributes, git-modules, hook-manager,
 * ci-workflow that it falls under, names compared ASCII-case-insensitively
 * (a case-insensitive filesystem opens ".Claude/settings.json" as
 * ".claude/settings.json"), or _RISK_CLASS_INVALID when none. A directory
 * name counts as itself too (".claude" alone: a symlink there is the whole
 * directory). ci-workflow only at the top of the repository (where CI
 * reads it); the others at any depth (a tool may be started in any
 * subdirectory). Pure. */
RiskClass risk_class_of_path(const char *repo_path);

/* Does a symlink at repo_path (relative to the top of the repository) with
 * this target leave the repository: an absolute target, an empty one, or
 * a relative one that, resolved lexically from the link's own directory,
 * climbs above the top ("a/l" -> "../../x")? Pure. */
bool risk_symlink_leaves(const char *repo_path, const char *target);

/* The first of patterns (NULL-terminated, may be NULL) that repo_path
 * matches, or NULL. A pattern is fnmatch(3)'d against the whole path
 * relative to the top of the repository (flags 0: '*' also matches '/'; a
 * leading '/' is dropped); one ending in '/' matches a path lying below a
 * directory the rest matches ("build/" matches "build/a/b"). Pure. */
const char *risk_match_pattern(const char *repo_path, char *const *patterns);

typedef struct ChangesetRisk {
        RiskClass class;
        char *path;   /* the new name relative to the patch root (D), quoted as git quotes it (cs_quote_path) */
        char *detail; /* what it does: the class's description, with the link target or the pattern */
} ChangesetRisk;

/* At most this many entries are kept; all are counted. */
#define CHANGESET_RISKS_MAX 256

typedef struct ChangesetRisks {
        ChangesetRisk *entries; /* n of them */
        size_t n;
        size_t total; /* every risk found; > n when some were not kept */
} ChangesetRisks;

void changeset_risks_done(ChangesetRisks *r);

/* Classify a patch read from fd (to its end; the fd is not closed). prefix:
 * the patch root relative to the top of its repository ("" or NULL when the
 * patch root is the top, else "a/b/" or "a/b"): the patch names paths
 * relative to the directory it was extracted from (changeset_extract diffs
 * the trees of D), the rules are relative to the repository. patterns:
 * extra patterns (risk_match_pattern; NULL: none); they only add. live_fd:
 * the directory the patch applies to, or -1: a rename or copy that carries
 * no mode (similarity 100%) of a symlink there is classified from the
 * link's target (read beneath live_fd, no symlink followed on the way).
 * Deleted files raise nothing; a rename or copy counts by its new name;
 * one path may have several classes (one entry each).
 * The file is read in bounded memory whatever its size (lines over 64 KiB
 * are read in pieces; a symlink target over PATH_MAX counts as leaving).
 * Returns the number of risks found (ret->total, >= 0) with *ret filled,
 * -EBADMSG for what is not a git patch (text before the first "diff
 * --git", a section with no name, a malformed quoted name or mode, a
 * header line over 64 KiB), -errno from read(2), -ENOMEM; *ret is empty
 * on failure. */
int changeset_risks_read(int fd, const char *prefix, char *const *patterns, int live_fd, ChangesetRisks *ret);

/* changeset_risks_read of the file patch_path, for the patch of directory
 * (the target dir D, on the host): the prefix is D relative to the top of
 * the git work tree holding it (the .git entries read without running
 * git, gitdir.h; "" when D is in none), D is live_fd. Same returns, and
 * -errno from open(2). */
int changeset_risks_classify(const char *patch_path, const char *directory, char *const *patterns,
                             ChangesetRisks *ret);

/* "<class>: <path>: <detail>", the line of changesetWarnings; NULL on ENOMEM. */
char *changeset_risk_line(const ChangesetRisk *e);

/* Settlement: classify the patch of directory and add what it found to an
 * extraction's result o: one changeset_risk_line per risk appended to the
 * array o[PK_warnings] (made when absent; a last line says how many more
 * when past CHANGESET_RISKS_MAX), and o[PK_changesetRisks] = [{path,
 * class}, ...]. Nothing is added when there is no risk. 0 or -errno (o
 * then unchanged but for what was added before the failure). */
int changeset_risks_annotate(json_object *o, const char *patch_path, const char *directory, char *const *patterns);

/* The refusal of an accept: when the patch has risks, 1 with *ret_text =
 * "error: the changeset of task <id> changes files that can run code on
 * this machine later; nothing was applied\n  <class>: <path>\n...\nhelp:
 * ..."; 0 when it has none (*ret_text NULL); -errno (-EBADMSG for a patch
 * the classifier cannot read: then the accept must refuse as well). */
int changeset_risks_refusal(const char *task_id, const char *patch_path, const char *directory,
                            char *const *patterns, char **ret_text);
