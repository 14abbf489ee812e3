/* json_scan against json-c: for any bytes, the scan says valid exactly when
 * a strict json-c tokener with the same depth bound parses them (unless it
 * is unsure: an escaped top-level key), too deep only when that tokener
 * refuses them, and the named keys' spans are where json-c finds their
 * values. */

#include <string.h>

#include "fuzz.h"
#include "json-scan.h"
#include "json-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static json_tokener *tok;
        if (!tok) tok = json_strict_tokener_new_depth(JSON_SCAN_DEPTH_MAX);
        fuzz_check(tok);
        static const char *const keys[] = {"type", "part", "sessionID", "a", NULL};
        JsonScanValue v[4];
        JsonScanType top = JSON_SCAN_NONE;
        const char *text = (const char *) data;
        JsonScanResult k = json_scan(text, size, keys, &top, v);
        if (k == JSON_SCAN_UNSURE) return 0;
        json_object *o = NULL;
        bool parsed = json_parse_strict_with(tok, text, size, &o) >= 0;
        fuzz_check(parsed == (k == JSON_SCAN_VALID));
        if (parsed && top == JSON_SCAN_OBJECT) {
                fuzz_check(json_object_is_type(o, json_type_object));
                for (size_t i = 0; keys[i]; i++) {
                        json_object *m = NULL;
                        bool has = json_object_object_get_ex(o, keys[i], &m);
                        fuzz_check(has == (v[i].type != JSON_SCAN_NONE));
                        if (!has) continue;
                        fuzz_check(v[i].offset + v[i].len <= size);
                        /* the span holds the value: parsed alone it is the same JSON */
                        const char *span = text + v[i].offset - (v[i].type == JSON_SCAN_STRING);
                        size_t span_len = v[i].len + 2 * (v[i].type == JSON_SCAN_STRING);
                        json_object *alone = NULL;
                        fuzz_check(json_parse_strict_with(tok, span, span_len, &alone) >= 0);
                        fuzz_check(json_object_equal(alone, m));
                        json_object_put(alone);
                }
        }
        json_object_put(o);
        return 0;
}
