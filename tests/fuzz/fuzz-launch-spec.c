/* The launch request the shim reads from its spec fd, and the launch.json
 * and exit.json the daemon reads back from a task dir (a worker that got
 * out of its sandbox could write them). The first byte picks the reader;
 * the input is read as the shim reads its fd (launch_spec_read_fd) or
 * parsed as JSON. Checked: what a reader accepts serializes, parses again
 * and serializes to the same text (nothing lost or invented). */

#include <string.h>
#include <unistd.h>
#include <json-c/json.h>

#include "fuzz.h"
#include "json-util.h"
#include "launch-spec.h"

static char *line_of(json_object *o) {
        size_t len;
        const char *l = json_to_line(o, &len);
        return strndup(l, len);
}

static void spec_round_trip(launch_spec *s) {
        json_object *j = NULL;
        fuzz_check(launch_spec_to_json(s, &j) == 0);
        launch_spec *s2 = NULL;
        fuzz_check(launch_spec_from_json(j, &s2) == 0);
        json_object *j2 = NULL;
        fuzz_check(launch_spec_to_json(s2, &j2) == 0);
        char *a = line_of(j), *b = line_of(j2);
        fuzz_check(a && b && strcmp(a, b) == 0);
        free(a);
        free(b);
        json_object_put(j);
        json_object_put(j2);
        launch_spec_free(s2);
}

/* When from() accepts j into *a: *a serializes (to), the text reads back
 * into *b, which serializes to the same text. */
#define ROUND_TRIP(j, a, b, from, to)                                           \
        do {                                                                    \
                if (from(j, a) < 0) break;                                      \
                json_object *o = NULL, *o2 = NULL;                              \
                fuzz_check(to(a, &o) == 0);                                     \
                fuzz_check(from(o, b) == 0);                                    \
                fuzz_check(to(b, &o2) == 0);                                    \
                char *x = line_of(o), *y = line_of(o2);                         \
                fuzz_check(x && y && strcmp(x, y) == 0);                        \
                free(x);                                                        \
                free(y);                                                        \
                json_object_put(o);                                             \
                json_object_put(o2);                                            \
        } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint8_t which = fuzz_take_byte(&data, &size) % 3;
        if (which == 0) {
                int fd = fuzz_memfd(data, size);
                fuzz_check(fd >= 0);
                launch_spec *s = NULL;
                int r = launch_spec_read_fd(fd, &s);
                close(fd);
                if (r == 0) {
                        spec_round_trip(s);
                        launch_spec_free(s);
                } else
                        fuzz_check(r == -EBADMSG || r == -ENOMEM);
                return 0;
        }
        json_object *j = NULL;
        if (json_parse_strict((const char *) data, size, &j) < 0) return 0;
        if (which == 1) {
                launch_info i = {}, i2 = {};
                ROUND_TRIP(j, &i, &i2, launch_info_from_json, launch_info_to_json);
                launch_info_done(&i);
                launch_info_done(&i2);
        } else {
                exit_info e = {}, e2 = {};
                ROUND_TRIP(j, &e, &e2, exit_info_from_json, exit_info_to_json);
                exit_info_done(&e);
                exit_info_done(&e2);
        }
        json_object_put(j);
        return 0;
}
