/* signal-util.c: the names of the standard signals, NULL outside them. */

#include <check.h>
#include <signal.h>
#include <string.h>

#include "macro.h"
#include "signal-util.h"
#include "unit.h"

START_TEST(standard_names) {
        static const struct {
                int sig;
                const char *name;
        } t[] = {
                {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
                {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
                {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
                {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGCHLD, "SIGCHLD"},
                {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"}, {SIGTTIN, "SIGTTIN"},
                {SIGTTOU, "SIGTTOU"}, {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
        };
        for (size_t i = 0; i < ELEMENTSOF(t); i++) ck_assert_str_eq(signal_to_name(t[i].sig), t[i].name);
        ck_assert_str_eq(signal_to_name(15), "SIGTERM");
        ck_assert_str_eq(signal_to_name(9), "SIGKILL");
        /* the name agrees with the C library's description of the number */
        ck_assert_ptr_nonnull(strstr(strsignal(SIGSEGV), "egmentation"));
}
END_TEST

START_TEST(outside_the_table) {
        const int none[] = {0, -1, -15, SIGRTMIN, SIGRTMAX, SIGRTMIN + 1, 65, 1000, 0x7fffffff, (int) 0x80000000};
        for (size_t i = 0; i < ELEMENTSOF(none); i++) ck_assert_msg(!signal_to_name(none[i]), "%d", none[i]);
        /* every number 1..31 but the unused ones (16 SIGSTKFLT, 28 SIGWINCH,
         * 23 SIGURG, 26 SIGVTALRM, 27 SIGPROF, 29 SIGIO, 30 SIGPWR) has a name,
         * each distinct */
        const char *seen[32] = {0};
        for (int s = 1; s < 32; s++) {
                const char *n = signal_to_name(s);
                if (!n) continue;
                ck_assert(strncmp(n, "SIG", 3) == 0);
                for (int k = 1; k < s; k++) ck_assert(!seen[k] || strcmp(seen[k], n) != 0);
                seen[s] = n;
        }
}
END_TEST

TF_MAIN("signal-util", "signals", NULL, NULL, 0, standard_names, outside_the_table)
