/* The OpenCode executor: `opencode run --format json`. Its stdout already
 * is the canonical log format, so the
 * normalizer is the identity: each JSON line is re-serialized. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "executor.h"
#include "json-util.h"
#include "logparse.h"
#include "macro.h"
#include "strv.h"

#define PROMPT_FILE_INSTRUCTION "Follow the instructions in the attached prompt file exactly."

struct normalizer {
        int unused;
};

/* opencode run --dir <dir> --auto --format json -m <model>
 *   [--continue --session <id>] [--variant <v>]
 *   (-f <promptFile> -- <instruction> | -- <prompt>) */
/* A report summary: opencode run --dir <dir> --pure --format json -m <model>
 *   -f <snapshot> [--continue --session <id>] -- <summary instruction>
 * (never --auto, never --variant) */
static int opencode_summary_argv(const executor_launch *l, char ***ret_argv) {
        if (isempty(l->prompt)) return -EINVAL;
        _cleanup_strv_free_ char **argv = NULL;
        int r = 0;
        const char *fixed[] = { "opencode", "run", "--dir", l->directory, "--pure", "--format", "json", "-m", l->model,
                                "-f", l->attachment };
        for (size_t i = 0; i < ELEMENTSOF(fixed) && r >= 0; i++) r = strv_push(&argv, fixed[i]);
        if (r >= 0 && l->session_id) {
                r = strv_push(&argv, "--continue");
                if (r >= 0) r = strv_push(&argv, "--session");
                if (r >= 0) r = strv_push(&argv, l->session_id);
        }
        if (r >= 0) r = strv_push(&argv, "--");
        if (r >= 0) r = strv_push(&argv, l->prompt);
        if (r < 0) return r;
        *ret_argv = TAKE_PTR(argv);
        return 0;
}

static int opencode_build_argv(const executor_launch *l, char ***ret_argv) {
        if (!l || isempty(l->directory) || isempty(l->model) || (!l->prompt_file && !l->prompt)) return -EINVAL;
        if (l->attachment) return opencode_summary_argv(l, ret_argv);

        _cleanup_strv_free_ char **argv = NULL;
        int r = 0;
        const char *fixed[] = { "opencode", "run", "--dir", l->directory, "--auto", "--format", "json", "-m", l->model };
        for (size_t i = 0; i < ELEMENTSOF(fixed) && r >= 0; i++) r = strv_push(&argv, fixed[i]);
        if (r >= 0 && l->session_id) {
                r = strv_push(&argv, "--continue");
                if (r >= 0) r = strv_push(&argv, "--session");
                if (r >= 0) r = strv_push(&argv, l->session_id);
        }
        if (r >= 0 && l->variant) {
                r = strv_push(&argv, "--variant");
                if (r >= 0) r = strv_push(&argv, l->variant);
        }
        if (r >= 0 && l->prompt_file) {
                r = strv_push(&argv, "-f");
                if (r >= 0) r = strv_push(&argv, l->prompt_file);
        }
        if (r >= 0) r = strv_push(&argv, "--");
        if (r >= 0) r = strv_push(&argv, l->prompt_file ? PROMPT_FILE_INSTRUCTION : l->prompt);
        if (r < 0) return r;
        *ret_argv = TAKE_PTR(argv);
        return 0;
}

static normalizer *opencode_normalizer_new(void) { return calloc(1, sizeof(normalizer)); }

static void opencode_normalizer_free(normalizer *n) { free(n); }

static int opencode_normalize_line(normalizer *n, const char *line, size_t len, bool newline, char ***out) {
        if (log_line_is_blank(line, len)) return 0;

        _cleanup_json_ json_object *evt = NULL;
        if (json_parse_strict(line, len, &evt) < 0) {
                /* Not JSON: written verbatim. */
                char *copy = strndup(line, len);
                return strv_consume(out, copy);
        }
        if (!evt) return 0; /* a JSON null normalizes to "nothing written" */
        const char *s = json_to_line(evt, NULL);
        if (!s) return -ENOMEM;
        return strv_push(out, s);
}

const executor executor_opencode = {
        .id = "opencode",
        .failure_prefix = NULL,
        .structured_prefix = "opencode",
        .boot_failure_reason = "boot_failure",
        .needs_model = true,
        .build_argv = opencode_build_argv,
        .normalizer_new = opencode_normalizer_new,
        .normalizer_free = opencode_normalizer_free,
        .normalize_line = opencode_normalize_line,
        .normalize_finish = NULL,
};
