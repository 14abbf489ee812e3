/* .taskferry.toml, the file a repository (so anyone who can push to it)
 * writes: its keys over the TOML reader. Checked: a file with a warning
 * is the empty config; one without has a timeout within 1..604800 s and
 * relative review patterns; every allowHosts rule parses as a rule. */

#include <string.h>

#include "fuzz.h"
#include "net-policy.h"
#include "project-config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        ProjectConfig c = {};
        int r = project_config_parse("/repo/.taskferry.toml", (const char *) data, size, &c);
        fuzz_check(r == 0 || r == -ENOMEM);
        if (r == 0) {
                fuzz_check(c.exists && c.path && strcmp(c.path, "/repo/.taskferry.toml") == 0);
                if (c.warning) {
                        fuzz_check(!c.check && !c.ro_bind && !c.review_paths && !c.allow_hosts);
                        fuzz_check(c.check_timeout_s == 900);
                        fuzz_check(strncmp(c.warning, "/repo/.taskferry.toml", 21) == 0);
                } else {
                        fuzz_check(c.check_timeout_s >= 1 && c.check_timeout_s <= 604800);
                        if (c.check) fuzz_check(*c.check);
                        for (char **p = c.review_paths; p && *p; p++) fuzz_check(**p && **p != '/');
                        for (char **h = c.allow_hosts; h && *h; h++) {
                                NetRule rule = {};
                                const char *why = NULL;
                                fuzz_check(net_rule_parse(*h, &rule, &why) == 0);
                                net_rule_done(&rule);
                        }
                }
        }
        project_config_done(&c);
        return 0;
}
