#pragma once
/* TOON encoder: what @toon-format/toon 2.3.1 prints with indent 2, delimiter
 * ',' and no key folding, byte for byte. Object keys print in insertion order;
 * a json-c NULL value is JSON null. */

#include <json-c/json.h>

/* Encode v as TOON. Returns a malloc'd NUL-terminated string WITHOUT a
 * trailing newline (the caller prints "%s\n"); NULL on ENOMEM.
 * Root {} → "", root [] → "[]". */
char *toon_encode(json_object *v);
