/* The executor table: each worker CLI taskferry can run is one executor
 * (executor.h), a small table of functions. A new executor is one new
 * executor-<id>.c file defining a `const executor executor_<id>` and one
 * entry here. */

#include "executor.h"

#include "macro.h"

extern const executor executor_opencode;
extern const executor executor_pi;
extern const executor executor_shell;
extern const executor executor_check;

/* Alphabetical, the order executor_names() prints. */
static const executor *const executor_table[] = {
        &executor_opencode,
        &executor_pi,
        &executor_shell,
};

const executor *executor_find(const char *id) {
        if (!id) return NULL;
        for (size_t i = 0; i < ELEMENTSOF(executor_table); i++)
                if (streq(executor_table[i]->id, id)) return executor_table[i];
        return NULL;
}

const executor *executor_find_any(const char *id) {
        if (streq_ptr(id, executor_check.id)) return &executor_check;
        return executor_find(id);
}

const char *executor_names(void) {
        /* Kept in step with executor_table (test-executor checks it). */
        return "opencode, pi, shell";
}
