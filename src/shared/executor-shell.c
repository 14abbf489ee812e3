/* The shell executor (taskferry's addition; not in the original): the prompt
 * is a POSIX shell script. `sh <promptFile>` (or `sh -c <prompt>`). Every
 * stdout line, blank or not, JSON or not, becomes a canonical text event of
 * message "shell", so the task's result message is exactly the script's
 * stdout. No step_finish is written. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "executor.h"
#include "json-util.h"
#include "macro.h"
#include "strv.h"
#include "utf8.h"

#define SHELL_MESSAGE_ID "shell"

struct normalizer {
        int unused;
};

static int shell_build_argv(const executor_launch *l, char ***ret_argv) {
        if (!l || (!l->prompt_file && !l->prompt)) return -EINVAL;
        _cleanup_strv_free_ char **argv = NULL;
        int r = strv_push(&argv, "sh");
        if (r >= 0 && l->prompt_file)
                r = strv_push(&argv, l->prompt_file);
        else if (r >= 0) {
                r = strv_push(&argv, "-c");
                if (r >= 0) r = strv_push(&argv, l->prompt);
        }
        if (r < 0) return r;
        *ret_argv = TAKE_PTR(argv);
        return 0;
}

static normalizer *shell_normalizer_new(void) { return calloc(1, sizeof(normalizer)); }

static void shell_normalizer_free(normalizer *n) { free(n); }

/* Copy s[0..len) replacing each byte that starts no well-formed UTF-8
 * sequence with U+FFFD (so the log stays valid UTF-8 JSON whatever the
 * script printed: an overlong C0 80 becomes two of them), then append "\n"
 * if asked. */
static char *shell_text_sanitize(const char *s, size_t len, bool newline, size_t *ret_len) {
        char *out = malloc(len * 3 + 2);
        if (!out) return NULL;
        size_t o = 0;
        for (size_t i = 0; i < len;) {
                Utf8Char u = utf8_decode(s + i, len - i);
                if (u.status != UTF8_VALID) {
                        memcpy(out + o, UTF8_REPLACEMENT_CHARACTER_STR, 3);
                        o += 3;
                        i++;
                } else {
                        memcpy(out + o, s + i, u.len);
                        o += u.len;
                        i += u.len;
                }
        }
        if (newline) out[o++] = '\n';
        out[o] = 0;
        *ret_len = o;
        return out;
}

static int shell_normalize_line(normalizer *n, const char *line, size_t len, bool newline, char ***out) {
        size_t tlen;
        _cleanup_free_ char *text = shell_text_sanitize(line, len, newline, &tlen);
        if (!text) return -ENOMEM;

        _cleanup_json_ json_object *o = json_object_new_object();
        _cleanup_json_ json_object *part = json_object_new_object();
        if (!o || !part) return -ENOMEM;
        if (json_add_string(o, "type", "text") < 0 || json_add_string(part, "type", "text") < 0 ||
            json_add(part, "text", json_object_new_string_len(text, (int) tlen)) < 0 ||
            json_add_string(part, "messageID", SHELL_MESSAGE_ID) < 0 || json_add(o, "part", TAKE_PTR(part)) < 0)
                return -ENOMEM;
        const char *s = json_to_line(o, NULL);
        if (!s) return -ENOMEM;
        return strv_push(out, s);
}

const executor executor_shell = {
        .id = "shell",
        .failure_prefix = "shell",
        .structured_prefix = "shell",
        .boot_failure_reason = "shell_boot_failure",
        .needs_model = false,
        .exit_code_is_success = true, /* `make fmt` succeeds silently */
        .build_argv = shell_build_argv,
        .normalizer_new = shell_normalizer_new,
        .normalizer_free = shell_normalizer_free,
        .normalize_line = shell_normalize_line,
        .normalize_finish = NULL,
};
