#pragma once
/* The one TOML reader: a strict subset of TOML v1.0
 * (https://toml.io/en/v1.0.0), what taskferry's own TOML files use (the
 * timer-job files of docs/taskferry-jobs.5.md, the project file
 * .taskferry.toml of docs/taskferry-project.5.md). Pure: no I/O.
 *
 * Accepted: `#` comments, blank lines, `key = value` with a bare key, values
 * "basic strings" (escapes \b \t \n \f \r \" \\ \uXXXX \UXXXXXXXX),
 * 'literal strings', """multi-line basic""" (a newline right after the
 * opening quotes trimmed, line-ending backslash) and '''multi-line
 * literal''' strings, decimal integers (optional sign, `_` between digits,
 * no leading zero, within int64), true/false, and arrays of strings and
 * integers (across lines, comments inside, trailing comma). Everything else
 * TOML has is refused with a message rather than misread: tables, quoted and
 * dotted keys, floats, hexadecimal/octal/binary integers, dates and times,
 * inline tables, nested arrays. A duplicate key is an error (TOML says so).
 * The text must be UTF-8 without control characters but tab and newline
 * (CRLF or LF) outside escapes; \u0000 is refused (a string travels as a C
 * string).
 *
 * Error messages name a line and what is wrong, never the text of a value (a
 * job's prompt is a secret: CONTRIBUTING.md "Rules"); they may name a key. */

#include <stddef.h>
#include <json-c/json.h>

/* Parse text[0..len) (it need not be NUL-terminated). On success returns 0
 * and *ret_table: a new JSON object of key → value (string — with its exact
 * bytes —, int64 integer, boolean, or array of strings and integers) in
 * file order, and *ret_lines: key → the 1-based line of its key (int). On a
 * malformed text returns -EINVAL with *ret_line (1-based) and *reason set
 * (the sentence for the user, set exactly when the return is -EINVAL; the
 * caller frees it); -ENOMEM. */
int toml_parse(const char *text, size_t len, json_object **ret_table, json_object **ret_lines, unsigned *ret_line,
               char **reason);
