/* The check executor: a check gate's run of the project's check command
 * (`sh -c <check>`), never a worker. Its output is not a transcript: stdout
 * and stderr go to the log byte for byte, interleaved as they arrive, and
 * nothing is normalized. executor_find() does not list it (no dispatch can
 * choose it); executor_find_any() does, for the shim. */

#include <errno.h>
#include <stdlib.h>

#include "executor.h"
#include "macro.h"
#include "strv.h"

static int check_build_argv(const executor_launch *l, char ***ret_argv) {
        if (!l || !l->prompt) return -EINVAL;
        /* the command is the project file's, no secret: it may be on argv */
        _cleanup_strv_free_ char **argv = NULL;
        int r = strv_push(&argv, "sh");
        if (r >= 0) r = strv_push(&argv, "-c");
        if (r >= 0) r = strv_push(&argv, l->prompt);
        if (r < 0) return r;
        *ret_argv = TAKE_PTR(argv);
        return 0;
}

const executor executor_check = {
        .id = "check",
        .failure_prefix = "check",
        .structured_prefix = "check",
        .boot_failure_reason = "check_boot_failure",
        .needs_model = false,
        .exit_code_is_success = true,
        .raw_output = true,
        .build_argv = check_build_argv,
};
