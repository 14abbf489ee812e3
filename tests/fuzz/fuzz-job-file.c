/* Timer-job files ($XDG_CONFIG_HOME/taskferry/jobs/<name>.toml): the TOML
 * reader and the job's keys over it. Checked: an accepted job has an
 * absolute directory, exactly one of prompt and prompt_file (absolute),
 * absolute binds and a known network mode; a refused one a reason with a
 * line, and never the prompt's text (the seeds' prompts hold
 * SECRET+PROMPT, which no bare key can hold: a
 * message may name a key). */

#include <string.h>

#include "fuzz.h"
#include "job-file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        job_spec j = {};
        unsigned line = 0;
        char *reason = NULL;
        int r = job_spec_parse((const char *) data, size, "/home/fuzz", "/home/fuzz/.config/taskferry/jobs", &j, &line,
                               &reason);
        if (r == 0) {
                fuzz_check(j.directory && j.directory[0] == '/');
                fuzz_check(!j.prompt != !j.prompt_file);
                if (j.prompt) fuzz_check(*j.prompt);
                if (j.prompt_file) fuzz_check(j.prompt_file[0] == '/');
                for (char **b = j.rw_bind; b && *b; b++) fuzz_check(**b == '/');
                for (char **b = j.ro_bind; b && *b; b++) fuzz_check(**b == '/');
                if (j.network)
                        fuzz_check(!strcmp(j.network, "proxy") || !strcmp(j.network, "none") || !strcmp(j.network, "host"));
        } else {
                fuzz_check(r == -ENOMEM || (r == -EINVAL && reason));
                if (reason) fuzz_check(!strstr(reason, "SECRET+PROMPT"));
        }
        job_spec_done(&j);
        free(reason);
        (void) job_name_is_valid(j.directory ? j.directory : "x");
        return 0;
}
