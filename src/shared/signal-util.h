#pragma once
/* Signal names. */

/* The name of a standard signal, 15 → "SIGTERM"; NULL for a number outside
 * the table (a realtime signal, 0). Static string. */
const char *signal_to_name(int sig);
