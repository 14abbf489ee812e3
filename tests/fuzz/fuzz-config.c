/* config.json and the environment the daemon resolves its settings from.
 * The first byte picks the input's role: config.json's text (config_parse,
 * then settings_resolve over the accepted object, then the CLI's own
 * readers of it), or an environment, one "NAME=value" per line
 * (settings_resolve with no config). Checked: an accepted config is an
 * object and a refused one has its reason; what the settings resolve to is
 * within their documented ranges; the numeric readers never fail. */

#include <math.h>
#include <string.h>
#include <json-c/json.h>

#include "config.h"
#include "fuzz.h"
#include "core/settings.h"
#include "strv.h"

static void resolve(json_object *cfg, char *const *envp) {
        Settings s = {}; /* settings_resolve fills a zeroed Settings */
        char **warnings = NULL;
        char *reason = NULL;
        int r = settings_resolve(&s, cfg, envp, &warnings, &reason);
        fuzz_check(r == 0 || r == -ENOMEM || (r == -EINVAL && reason));
        if (r == 0) fuzz_check(!reason);
        settings_done(&s);
        strv_free(warnings);
        free(reason);
}

static void env_line(void *userdata, const char *line, size_t len, bool newline) {
        char ***envp = userdata;
        if (!memchr(line, 0, len) && memchr(line, '=', len)) fuzz_check(strv_consume(envp, strndup(line, len)) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        bool env = fuzz_take_byte(&data, &size) & 1;
        if (env) {
                char **envp = NULL;
                fuzz_lines(data, size, env_line, &envp);
                resolve(NULL, envp ? envp : (char *const[]) {NULL});
                strv_free(envp);
                return 0;
        }
        json_object *cfg = NULL;
        char **warnings = NULL;
        char *reason = NULL;
        int r = config_parse("/home/fuzz/.config/taskferry/config.json", (const char *) data, size, &cfg, &warnings,
                             &reason);
        fuzz_check(r == 0 || r == -ENOMEM || (r == -EINVAL && reason));
        if (r == 0) {
                fuzz_check(cfg && json_object_is_type(cfg, json_type_object) && !reason);
                resolve(cfg, (char *const[]) {(char *) "HOME=/home/fuzz", NULL});
                double ms = 0;
                int w = config_wait_default_timeout(cfg, NULL, &ms);
                fuzz_check(w == 0 || (w == 1 && ms > 0 && isfinite(ms)));
                double chars = config_advisor_context_chars(cfg, NULL);
                fuzz_check(chars > 0 && isfinite(chars));
                for (const ConfigKey *k = config_keys; k->name; k++)
                        if (k->type == CONFIG_NUMBER) {
                                (void) config_integer(cfg, k->name, NULL, CONFIG_POSITIVE, 1);
                                (void) config_boolean(cfg, k->name, NULL, true, false);
                        }
        }
        json_object_put(cfg);
        strv_free(warnings);
        free(reason);

        /* the input as an environment variable's value */
        char *s = fuzz_strndup(data, size);
        (void) config_js_number(s);
        double ms = 0;
        (void) config_wait_default_timeout(NULL, s, &ms);
        (void) config_integer(NULL, "maxConcurrentTasks", s, CONFIG_NONNEGATIVE, 7);
        char **l = NULL;
        fuzz_check(config_list_append(&l, s) == 0);
        for (char **e = l; e && *e; e++) fuzz_check(**e);
        strv_free(l);
        free(s);
        return 0;
}
