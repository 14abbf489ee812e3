/* The pi executor: `pi --mode json -p`, with a stateful normalizer from
 * pi's event stream to the canonical log events.
 *
 * Deliberate difference from the original: pi reports token usage per LLM
 * call in each assistant `message_end` (tests/fixtures/real/README.md), so a
 * `step_finish` is written for every assistant message_end that carries
 * usage. `agent_end` only produces a step_finish when its agent run emitted
 * none (older or synthetic streams without usage on message_end); the
 * original mapped agent_end alone and under-counted multi-call runs. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "executor.h"
#include "json-util.h"
#include "logparse.h"
#include "macro.h"
#include "string-util.h"
#include "strv.h"

#define PROMPT_FILE_INSTRUCTION "Follow the instructions in the attached prompt file exactly."
#define UNKNOWN_MESSAGE "__unknown_message__"

struct normalizer {
        /* A step_finish was written since the last agent_start. */
        bool step_finish_emitted;
        /* toolCallId → args of tool_execution_start, for tool_execution_end
         * events that do not repeat them (pi 0.73 does not). */
        json_object *tool_args;
};

/* pi 0.73.1's --thinking levels are off, minimal, low, medium, high and
 * xhigh; "max" is refused with a warning on every run and the level ignored.
 * "highest" (and the original's "max") therefore mean xhigh. */
#define PI_HIGHEST_THINKING "xhigh"

const char *executor_pi_thinking_level(const char *variant) {
        if (streq_ptr(variant, "highest") || streq_ptr(variant, "max")) return PI_HIGHEST_THINKING;
        return variant;
}

/* pi [--provider <p>] --model <m> --mode json [--continue --session <id>]
 *    [--thinking <v>] (-p <instruction> @<promptFile> | -p <prompt>) */
static int pi_build_argv(const executor_launch *l, char ***ret_argv) {
        if (!l || isempty(l->model) || (!l->prompt_file && !l->prompt)) return -EINVAL;

        _cleanup_strv_free_ char **argv = NULL;
        int r = strv_push(&argv, "pi");
        const char *slash = strchr(l->model, '/');
        if (r >= 0 && slash && slash > l->model) {
                r = strv_push(&argv, "--provider");
                if (r >= 0) r = strv_consume(&argv, strndup(l->model, (size_t) (slash - l->model)));
                if (r >= 0) r = strv_push(&argv, "--model");
                if (r >= 0) r = strv_push(&argv, slash + 1);
        } else if (r >= 0) {
                r = strv_push(&argv, "--model");
                if (r >= 0) r = strv_push(&argv, l->model);
        }
        if (r >= 0) r = strv_push(&argv, "--mode");
        if (r >= 0) r = strv_push(&argv, "json");
        if (r >= 0 && l->session_id) {
                r = strv_push(&argv, "--continue");
                if (r >= 0) r = strv_push(&argv, "--session");
                if (r >= 0) r = strv_push(&argv, l->session_id);
        }
        if (r >= 0 && l->variant) {
                r = strv_push(&argv, "--thinking");
                if (r >= 0) r = strv_push(&argv, executor_pi_thinking_level(l->variant));
        }
        if (r >= 0) r = strv_push(&argv, "-p");
        if (r >= 0 && l->prompt_file) {
                r = strv_push(&argv, PROMPT_FILE_INSTRUCTION);
                if (r >= 0) r = strv_pushf(&argv, "@%s", l->prompt_file);
        } else if (r >= 0)
                r = strv_push(&argv, l->prompt);
        if (r < 0) return r;
        *ret_argv = TAKE_PTR(argv);
        return 0;
}

static normalizer *pi_normalizer_new(void) {
        normalizer *n = calloc(1, sizeof(*n));
        if (!n) return NULL;
        n->tool_args = json_object_new_object();
        if (!n->tool_args) {
                free(n);
                return NULL;
        }
        return n;
}

static void pi_normalizer_free(normalizer *n) {
        if (!n) return;
        json_object_put(n->tool_args);
        free(n);
}

/* ---- building canonical events ---- */

static bool is_number(json_object *v) {
        return v && (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double));
}

/* A new reference to o[key] if it is a number, else a new 0. */
static json_object *number_or_zero(json_object *o, const char *key) {
        json_object *v = json_get(o, key);
        return is_number(v) ? json_object_get(v) : json_object_new_int(0);
}

/* Add a new reference to v (may be NULL → JSON null). */
static int add_ref(json_object *obj, const char *key, json_object *v) {
        return json_add(obj, key, json_object_get(v));
}

static int emit(char ***out, json_object *obj) {
        const char *s = json_to_line(obj, NULL);
        if (!s) return -ENOMEM;
        return strv_push(out, s);
}

/* pi usage → canonical tokens {total,input,output,cache:{write,read}}. */
static json_object *pi_tokens(json_object *usage) {
        _cleanup_json_ json_object *t = json_object_new_object();
        _cleanup_json_ json_object *cache = json_object_new_object();
        if (!t || !cache) return NULL;
        if (json_add(t, "total", number_or_zero(usage, "totalTokens")) < 0 ||
            json_add(t, "input", number_or_zero(usage, "input")) < 0 ||
            json_add(t, "output", number_or_zero(usage, "output")) < 0 ||
            json_add(cache, "write", number_or_zero(usage, "cacheWrite")) < 0 ||
            json_add(cache, "read", number_or_zero(usage, "cacheRead")) < 0 ||
            json_add(t, "cache", TAKE_PTR(cache)) < 0)
                return NULL;
        return TAKE_PTR(t);
}

/* {"type":"step_finish","part":{"type":"step-finish","reason","tokens","cost","messageID"}}.
 * reason NULL → JSON null; tokens omitted when usage is not an object. */
static int emit_step_finish(char ***out, const char *reason, json_object *message) {
        json_object *usage = json_get_object(message, "usage");
        const char *rid = json_get_string(message, "responseId");
        json_object *cost = json_get(json_get_object(usage, "cost"), "total");

        _cleanup_json_ json_object *evt = json_object_new_object();
        _cleanup_json_ json_object *part = json_object_new_object();
        if (!evt || !part) return -ENOMEM;
        if (json_add_string(evt, "type", "step_finish") < 0 || json_add_string(part, "type", "step-finish") < 0 ||
            json_add_string(part, "reason", reason) < 0)
                return -ENOMEM;
        if (usage) {
                json_object *tokens = pi_tokens(usage);
                if (!tokens || json_add(part, "tokens", tokens) < 0) return -ENOMEM;
        }
        if (add_ref(part, "cost", is_number(cost) ? cost : NULL) < 0 ||
            json_add_string(part, "messageID", rid ? rid : UNKNOWN_MESSAGE) < 0 ||
            json_add(evt, "part", TAKE_PTR(part)) < 0)
                return -ENOMEM;
        return emit(out, evt);
}

static int on_message_update(json_object *evt, char ***out) {
        json_object *ame = json_get_object(evt, "assistantMessageEvent");
        if (!streq_ptr(json_get_string(ame, "type"), "text_delta")) return 0;
        const char *delta = json_get_string(ame, "delta");
        const char *rid = json_get_string(json_get_object(evt, "message"), "responseId");

        _cleanup_json_ json_object *o = json_object_new_object();
        _cleanup_json_ json_object *part = json_object_new_object();
        if (!o || !part) return -ENOMEM;
        json_object *d = json_get(ame, "delta");
        if (json_add_string(o, "type", "text") < 0 || json_add_string(part, "type", "text") < 0 ||
            json_add(part, "text", delta ? json_object_get(d) : json_object_new_string("")) < 0 ||
            json_add_string(part, "messageID", rid ? rid : UNKNOWN_MESSAGE) < 0 ||
            json_add(o, "part", TAKE_PTR(part)) < 0)
                return -ENOMEM;
        return emit(out, o);
}

static int on_tool_progress(normalizer *n, json_object *evt, bool start, char ***out) {
        const char *tool = json_get_string(evt, "toolName");
        json_object *id = json_get(evt, "toolCallId");
        const char *id_s = json_get_string(evt, "toolCallId");
        json_object *args = json_get(evt, "args");
        if (start && id_s && args && json_add(n->tool_args, id_s, json_object_get(args)) < 0) return -ENOMEM;

        _cleanup_json_ json_object *o = json_object_new_object();
        _cleanup_json_ json_object *part = json_object_new_object();
        if (!o || !part) return -ENOMEM;
        if (json_add_string(o, "type", "tool_progress") < 0 || json_add_string(part, "type", "tool-progress") < 0 ||
            json_add_string(part, "tool", tool ? tool : "unknown") < 0 || add_ref(part, "toolCallId", id) < 0 ||
            json_add(o, "part", TAKE_PTR(part)) < 0)
                return -ENOMEM;
        return emit(out, o);
}

static int on_tool_end(normalizer *n, json_object *evt, char ***out) {
        const char *tool = json_get_string(evt, "toolName");
        const char *id_s = json_get_string(evt, "toolCallId");

        /* args: from this event, else remembered from tool_execution_start. */
        json_object *args = NULL;
        bool have_args = json_is_object(evt) && json_object_object_get_ex(evt, "args", &args);
        _cleanup_json_ json_object *remembered = NULL;
        if (id_s) {
                json_object *r;
                if (json_object_object_get_ex(n->tool_args, id_s, &r)) {
                        remembered = json_object_get(r);
                        json_object_object_del(n->tool_args, id_s);
                }
        }
        if (!have_args && remembered) {
                args = remembered;
                have_args = true;
        }

        /* output: the concatenated text of result.content items of type "text". */
        size_t olen = 0;
        _cleanup_free_ char *output = NULL;
        json_object *content = json_get_array(json_get_object(evt, "result"), "content");
        size_t nc = content ? json_object_array_length(content) : 0;
        for (size_t i = 0; i < nc; i++) {
                json_object *item = json_object_array_get_idx(content, i);
                if (!streq_ptr(json_get_string(item, "type"), "text")) continue;
                json_object *t = json_get(item, "text");
                if (!t || !json_object_is_type(t, json_type_string)) continue;
                size_t tl = (size_t) json_object_get_string_len(t);
                char *no = realloc(output, olen + tl + 1);
                if (!no) return -ENOMEM;
                output = no;
                memcpy(output + olen, json_object_get_string(t), tl);
                olen += tl;
                output[olen] = 0;
        }

        _cleanup_json_ json_object *o = json_object_new_object();
        _cleanup_json_ json_object *part = json_object_new_object();
        _cleanup_json_ json_object *state = json_object_new_object();
        if (!o || !part || !state) return -ENOMEM;
        if (have_args && add_ref(state, "input", args) < 0) return -ENOMEM;
        if (olen > 0 && json_add(state, "output", json_object_new_string_len(output, (int) olen)) < 0)
                return -ENOMEM;
        if (json_add_string(o, "type", "tool_use") < 0 || json_add_string(part, "type", "tool") < 0 ||
            json_add_string(part, "tool", tool ? tool : "unknown") < 0 ||
            json_add(part, "state", TAKE_PTR(state)) < 0 || json_add(o, "part", TAKE_PTR(part)) < 0)
                return -ENOMEM;
        return emit(out, o);
}

static int on_message_end(normalizer *n, json_object *evt, char ***out) {
        json_object *m = json_get_object(evt, "message");
        if (!streq_ptr(json_get_string(m, "role"), "assistant")) return 0;
        const char *stop = json_get_string(m, "stopReason");
        if (streq_ptr(stop, "error") || !json_get_object(m, "usage")) return 0;
        const char *reason = streq_ptr(stop, "stop") ? "stop" : streq_ptr(stop, "toolUse") ? "tool-calls" : stop;
        int r = emit_step_finish(out, reason, m);
        if (r < 0) return r;
        n->step_finish_emitted = true;
        return 0;
}

/* pi reports an HTTP error as "<status> <provider message>", but when the
 * provider's error body is JSON without a message pi's SDK understands it
 * prints the body (Anthropic: `401 {"type":"error","error":{"type":
 * "authentication_error","message":"invalid x-api-key"}}`). For such a body:
 * "<status> <error.type>: <error.message>" (the type keeps it classifiable),
 * malloc'd; NULL when e is not of that shape (then e is the message). */
static char *provider_message(const char *e) {
        size_t i = 0;
        while (e[i] >= '0' && e[i] <= '9') i++;
        if (i != 3 || e[i] != ' ' || e[i + 1] != '{') return NULL;
        _cleanup_json_ json_object *body = NULL;
        if (json_parse_strict(e + i + 1, strlen(e + i + 1), &body) < 0) return NULL;
        json_object *error = json_get_object(body, "error");
        const char *msg = json_get_string(error, "message"), *type = json_get_string(error, "type");
        if (isempty(msg)) return NULL;
        return isempty(type) ? strdup_printf("%.3s %s", e, msg) : strdup_printf("%.3s %s: %s", e, type, msg);
}

static int on_agent_end(normalizer *n, json_object *evt, char ***out) {
        json_object *msgs = json_get_array(evt, "messages");
        json_object *last = NULL;
        for (size_t i = msgs ? json_object_array_length(msgs) : 0; i > 0; i--) {
                json_object *m = json_object_array_get_idx(msgs, i - 1);
                if (streq_ptr(json_get_string(m, "role"), "assistant")) {
                        last = m;
                        break;
                }
        }
        if (!last) return 0;

        if (streq_ptr(json_get_string(last, "stopReason"), "error")) {
                const char *e = json_get_string(last, "errorMessage");
                if (isempty(e)) e = "pi agent error";
                _cleanup_free_ char *pm = provider_message(e);
                _cleanup_json_ json_object *o = json_object_new_object();
                _cleanup_json_ json_object *error = json_object_new_object();
                _cleanup_json_ json_object *data = json_object_new_object();
                if (!o || !error || !data) return -ENOMEM;
                if (json_add_string(o, "type", "error") < 0 || json_add_string(o, "message", pm ? pm : e) < 0 ||
                    json_add_string(error, "name", "pi_error") < 0 || json_add_string(data, "message", pm ? pm : e) < 0 ||
                    json_add(error, "data", TAKE_PTR(data)) < 0 || json_add(o, "error", TAKE_PTR(error)) < 0)
                        return -ENOMEM;
                return emit(out, o);
        }
        if (n->step_finish_emitted) return 0;
        int r = emit_step_finish(out, "stop", last);
        if (r < 0) return r;
        n->step_finish_emitted = true;
        return 0;
}

static int pi_normalize_line(normalizer *n, const char *line, size_t len, bool newline, char ***out) {
        if (log_line_is_blank(line, len)) return 0;

        _cleanup_json_ json_object *evt = NULL;
        if (json_parse_strict(line, len, &evt) < 0)
                /* pi prints plain-text errors ("No API key found for openai."). */
                return strv_consume(out, strndup(line, len));
        if (!json_is_object(evt)) return 0;

        const char *type = json_get_string(evt, "type");
        if (!type) return 0;

        if (streq(type, "session")) {
                const char *id = json_get_string(evt, "id");
                if (!id) return 0;
                _cleanup_json_ json_object *o = json_object_new_object();
                if (!o || json_add_string(o, "sessionID", id) < 0) return -ENOMEM;
                return emit(out, o);
        }
        if (streq(type, "message_update")) return on_message_update(evt, out);
        if (streq(type, "tool_execution_start")) return on_tool_progress(n, evt, true, out);
        if (streq(type, "tool_execution_update")) return on_tool_progress(n, evt, false, out);
        if (streq(type, "tool_execution_end")) return on_tool_end(n, evt, out);
        if (streq(type, "message_end")) return on_message_end(n, evt, out);
        if (streq(type, "agent_start")) {
                n->step_finish_emitted = false;
                return 0;
        }
        if (streq(type, "agent_end")) return on_agent_end(n, evt, out);
        return 0;
}

const executor executor_pi = {
        .id = "pi",
        .failure_prefix = "pi",
        .structured_prefix = "pi",
        .boot_failure_reason = "pi_boot_failure",
        .needs_model = true,
        .build_argv = pi_build_argv,
        .normalizer_new = pi_normalizer_new,
        .normalizer_free = pi_normalizer_free,
        .normalize_line = pi_normalize_line,
        .normalize_finish = NULL,
};
