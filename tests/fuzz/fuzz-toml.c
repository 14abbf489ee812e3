/* The one TOML reader (job files, .taskferry.toml). Checked: an accepted
 * text is a table of strings, integers, booleans and arrays of strings and
 * integers, with a line (>= 1, within the text) for every key and no other;
 * a refused one a line and a reason that never holds the text of a value
 * (the seeds' values hold SECRET+VALUE, which no bare key can hold); a string holds no NUL. */

#include <string.h>
#include <json-c/json.h>

#include "fuzz.h"
#include "toml.h"

static void check_value(json_object *v, bool in_array) {
        switch (json_object_get_type(v)) {
        case json_type_string:
                fuzz_check(strlen(json_object_get_string(v)) == (size_t) json_object_get_string_len(v));
                break;
        case json_type_int:
        case json_type_boolean:
                fuzz_check(!in_array || json_object_get_type(v) == json_type_int);
                break;
        case json_type_array:
                fuzz_check(!in_array);
                for (size_t i = 0; i < json_object_array_length(v); i++) check_value(json_object_array_get_idx(v, i), true);
                break;
        default:
                fuzz_check(!"a TOML value of another type");
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        json_object *table = NULL, *lines = NULL;
        unsigned line = 0;
        char *reason = NULL;
        int r = toml_parse((const char *) data, size, &table, &lines, &line, &reason);
        if (r == 0) {
                size_t n_lines = 1;
                for (size_t i = 0; i < size; i++) n_lines += data[i] == '\n';
                fuzz_check(json_object_is_type(table, json_type_object) && json_object_is_type(lines, json_type_object));
                fuzz_check(json_object_object_length(table) == json_object_object_length(lines));
                json_object_object_foreach(table, key, val) {
                        check_value(val, false);
                        json_object *l = NULL;
                        fuzz_check(json_object_object_get_ex(lines, key, &l));
                        int64_t ln = json_object_get_int64(l);
                        fuzz_check(ln >= 1 && (size_t) ln <= n_lines);
                }
        } else {
                fuzz_check(r == -ENOMEM || (r == -EINVAL && reason && line >= 1));
                if (reason) fuzz_check(!strstr(reason, "SECRET+VALUE"));
        }
        json_object_put(table);
        json_object_put(lines);
        free(reason);
        return 0;
}
