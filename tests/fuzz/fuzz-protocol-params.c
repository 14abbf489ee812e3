/* Each method's params: the first byte picks the method (the 16 of
 * protocol_methods), the rest is the params JSON. It goes through the field
 * table's parse (proto_params_parse) and the check alone
 * (proto_validate_params), which must agree; a refusal is an
 * INVALID_PARAMS error frame a client classifies as an error response. */

#include <string.h>
#include <json-c/json.h>

#include "fuzz.h"
#include "json-util.h"
#include "protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        ProtoMethod m = (ProtoMethod) (fuzz_take_byte(&data, &size) % _PROTO_METHOD_MAX);
        json_object *params = NULL;
        if (json_parse_strict((const char *) data, size, &params) < 0) return 0;
        if (!json_is_object(params)) { /* the envelope's check refuses it before the params' */
                json_object_put(params);
                return 0;
        }
        const char *method = proto_method_to_string(m);
        fuzz_check(method && proto_method_from_string(method) == m);

        ProtoParams p;
        json_object *err = NULL;
        int r = proto_params_parse("fuzz-id", m, params, &p, &err);
        json_object *err2 = NULL;
        int r2 = proto_validate_params("fuzz-id", method, params, &err2);
        if (r == 0) {
                fuzz_check(!err);
                (void) proto_params_task_id(m, &p);
                proto_params_done(m, &p);
        } else if (r == -EINVAL) {
                fuzz_check(err);
                size_t len;
                const char *line = json_to_line(err, &len);
                json_object *back = NULL;
                fuzz_check(json_parse_strict(line, len, &back) == 0);
                fuzz_check(proto_classify_frame(back) == PROTO_FRAME_RESPONSE_ERROR);
                json_object_put(back);
        } else
                fuzz_check(r == -ENOMEM);
        if (r != -ENOMEM && r2 != -ENOMEM) fuzz_check((r == 0) == (r2 == 0));
        json_object_put(err);
        json_object_put(err2);
        json_object_put(params);
        return 0;
}
