/* The wire protocol's frames, both directions: the input is what a peer
 * writes on a socket (a hostile worker on its task socket). Its bytes go
 * through the daemon's connection reader (a line buffer limited to what it
 * holds) in reads of varying size, every line through proto_parse_request as
 * the server takes it; each line also through the client's frame
 * classification. Checked: a request either parses (an id and a known
 * method) or yields an error frame that a client classifies as an error
 * response (string id) or as invalid (id null), never anything else; the
 * frame serializes to one line without a newline. */

#include <string.h>
#include <json-c/json.h>

#include "fuzz.h"
#include "json-util.h"
#include "line-buffer.h"
#include "protocol.h"

static void check_error_frame(json_object *err) {
        fuzz_check(err);
        size_t len = 0;
        const char *line = json_to_line(err, &len);
        fuzz_check(line && strlen(line) == len && !memchr(line, '\n', len));
        json_object *back = NULL;
        fuzz_check(json_parse_strict(line, len, &back) == 0);
        proto_frame_kind k = proto_classify_frame(back);
        const char *id = json_get_string(back, "id");
        fuzz_check(id ? k == PROTO_FRAME_RESPONSE_ERROR : k == PROTO_FRAME_INVALID);
        json_object_put(back);
}

static void one_line(const char *line, size_t len) {
        proto_request pr;
        json_object *err = NULL;
        int r = proto_parse_request(line, len, &pr, &err);
        if (r == 0) {
                fuzz_check(!err);
                fuzz_check(pr.id && *pr.id && pr.method && pr.method_id >= 0 && pr.method_id < _PROTO_METHOD_MAX);
                fuzz_check(proto_method_served(pr.method));
                (void) proto_params_task_id(pr.method_id, &pr.p);
                proto_request_done(&pr);
        } else {
                fuzz_check(r == -EBADMSG || r == -ENOMEM);
                if (r == -EBADMSG) check_error_frame(err);
                json_object_put(err);
        }

        /* the same line as a frame from the daemon (the client's view) */
        json_object *frame = NULL;
        if (json_parse_strict(line, len, &frame) == 0) {
                proto_frame_kind k = proto_classify_frame(frame);
                fuzz_check(k >= PROTO_FRAME_INVALID && k <= PROTO_FRAME_SHUTDOWN);
                json_object_put(frame);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* the first byte: the size of the reads the bytes arrive in */
        size_t chunk = (size_t) fuzz_take_byte(&data, &size) * 37 + 1;
        LineBuffer b = LINE_BUFFER_INIT(PROTOCOL_MAX_BUFFER_BYTES, LINE_BUFFER_LIMIT_BUFFERED);
        for (size_t off = 0; off < size;) {
                size_t n = size - off < chunk ? size - off : chunk;
                int r = line_buffer_append(&b, data + off, n);
                if (r == -ENOBUFS) break; /* REQUEST_TOO_LARGE: the server closes */
                fuzz_check(r == 0);
                off += n;
                const char *line;
                size_t len;
                while (line_buffer_pop(&b, &line, &len) == LINE_BUFFER_LINE) {
                        fuzz_check(!memchr(line, '\n', len));
                        one_line(line, len);
                }
        }
        line_buffer_done(&b);
        return 0;
}
