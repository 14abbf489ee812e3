/* taskferry: the command-line client. Output is TOON on stdout (JSON with
 * --json), errors included; stderr carries only warnings. Exit 0 success,
 * 1 operational error, 2 usage error. The verb table (cli-verbs.h) says
 * what each command is: main parses, prints the help or runs the row. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-args.h"
#include "cli-error.h"
#include "cli-verbs.h"
#include "commands.h"
#include "json-util.h"
#include "toon.h"
#include "log.h"
#include "macro.h"
#include "process-util.h"

/* Set by the one-shot SIGINT/SIGTERM handler: the first signal only ends
 * `watch` and aborts a `--prompt -` stdin read; other calls swallow it; the
 * second one terminates (SA_RESETHAND). */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig) {
        (void) sig;
        interrupted = 1;
}

static void install_signal_handlers(void) {
        struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESETHAND };
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
}

static int print_value(json_object *v, bool json) {
        if (json) {
                const char *s = v ? json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
                                  : "null";
                printf("%s\n", s);
        } else {
                _cleanup_free_ char *s = toon_encode(v);
                if (!s) return -ENOMEM;
                printf("%s\n", s);
        }
        return 0;
}

static int print_error(const cli_error *err, bool json) {
        _cleanup_json_ json_object *v = cli_error_value(err);
        if (!v) return -ENOMEM;
        return print_value(v, json);
}

static int finish(int code) {
        if (fflush(stdout) != 0 && code == CLI_EXIT_OK) return CLI_EXIT_FAILURE;
        return code;
}

static int out_of_memory(bool json) {
        cli_error e = {};
        cli_error_fail(&e, NULL, "out of memory");
        print_error(&e, json);
        cli_error_done(&e);
        return finish(CLI_EXIT_FAILURE);
}

int main(int argc, char **argv) {
        log_set_program("taskferry");
        install_signal_handlers();

        bool json = false;
        for (int i = 1; i < argc; i++)
                if (streq(argv[i], "--json")) json = true;

        _cleanup_(cli_args_done) cli_args args = {};
        _cleanup_(cli_error_done) cli_error err = {};
        int r = cli_args_parse(argv + 1, (size_t) (argc > 0 ? argc - 1 : 0), &args, &err);
        if (r == -ENOMEM) return out_of_memory(json);
        if (r < 0) {
                print_error(&err, json);
                return finish(err.exit_code ? err.exit_code : CLI_EXIT_USAGE);
        }
        for (char **w = args.warnings; w && *w; w++) fprintf(stderr, "warning: %s\n", *w);

        if (args.help) {
                _cleanup_json_ json_object *help = cli_help_object(args.command);
                if (!help) return out_of_memory(json);
                /* the JSON keeps the spec's shape (options:{} for none); the
                 * TOON would print a bare "options:" line, so it prints none */
                json_object *opts = json_get_object(help, "options");
                if (!json && opts && json_object_object_length(opts) == 0) json_object_object_del(help, "options");
                if (print_value(help, json) < 0) return out_of_memory(json);
                return finish(CLI_EXIT_OK);
        }
        if (!args.verb->run) {
                /* a command of the spec's CLI surface that this build does not have yet */
                _cleanup_free_ char *available = cli_available_commands();
                if (!available) return out_of_memory(json);
                cli_error_fail(&err, NULL,
                               "%s is not available in this build of taskferry yet\n"
                               "help: available now: %s",
                               args.command, available);
                print_error(&err, json);
                return finish(CLI_EXIT_FAILURE);
        }

        _cleanup_(cli_context_done) cli_context ctx = {
                .args = &args,
                .argv0 = argc > 0 ? argv[0] : "taskferry",
                .interrupted = &interrupted,
                .client = CLI_CLIENT_INIT,
        };
        _cleanup_json_ json_object *value = NULL;
        _cleanup_json_ json_object *raw = NULL;
        r = args.verb->run(&ctx, &value, &raw, &err);
        if (r == -ENOMEM) return out_of_memory(json);
        if (r < 0) {
                /* accept with applied:false: --json prints the daemon's result */
                if (json && raw) print_value(raw, true);
                else print_error(&err, json);
                return finish(err.exit_code ? err.exit_code : CLI_EXIT_FAILURE);
        }
        if (ctx.output_done) return finish(CLI_EXIT_OK); /* streamed (watch) or written (diff) */
        if (print_value(json ? raw : value, json) < 0) return out_of_memory(json);
        return finish(CLI_EXIT_OK);
}
