/* `taskferry advisor`'s context and prompt (cli-advisor.h). */

#include "cli-advisor.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <json-c/json.h>

#include "cli-args.h"
#include "json-util.h"
#include "fileio.h"
#include "macro.h"
#include "string-util.h"
#include "utf8.h"

const char cli_advisor_instructions[] =
        "You are the advisor of an autonomous coding agent that is in the middle of a task. The attached context "
        "below is the latest part of its session: what it was asked to do, what it looked at, what it decided and "
        "what it plans next. Read it critically; do not take its conclusions on trust.\n\n"
        "Your answer goes straight back to that agent while it works; no person reads it first. Do not restate "
        "what the agent did and do not praise it. Challenge it.\n\n"
        "Name the assumptions it acts on without having checked them, and say which of them its plan depends on. "
        "Point out what it has not read, run or tested, and any familiar trap it is walking into (an error that is "
        "swallowed, a test that passes only against a mock, an off-by-one at the boundary it edits, a default it "
        "never verified). For each decision it is about to commit to, offer at least one concrete alternative, "
        "naming the file and roughly the line. Put the single most valuable change first.\n\n"
        "Answer as terse bullets: no introduction, no closing summary, short sentences, code referenced as "
        "`path/to/file:LINE`, \"must\" and \"should\" rather than \"consider\". If you have nothing material to "
        "add, answer `no change, proceed` and nothing else.";

const char cli_advisor_condense_lead[] =
        "Condense the following into a dense technical summary that keeps the key facts, the decisions taken and "
        "every code reference. Add no commentary and no preamble.";

uint64_t cli_advisor_budget(const char *env_value, const char *config_path) {
        if (env_value) {
                double v = cli_js_number(env_value);
                if (isfinite(v) && v >= 1) return v > 1e15 ? (uint64_t) 1e15 : (uint64_t) v;
        }
        if (config_path) {
                _cleanup_free_ char *data = NULL;
                size_t len = 0;
                _cleanup_json_ json_object *o = NULL;
                if (read_file(config_path, (size_t) 1 << 20, &data, &len) >= 0 && json_parse_strict(data, len, &o) >= 0 &&
                    json_is_object(o)) {
                        json_object *v = NULL;
                        if (json_object_object_get_ex(o, "advisorContextChars", &v) &&
                            (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double))) {
                                double d = json_object_get_double(v);
                                if (isfinite(d) && d >= 1) return d > 1e15 ? (uint64_t) 1e15 : (uint64_t) d;
                        }
                }
        }
        return CLI_ADVISOR_CONTEXT_CHARS;
}

char *cli_advisor_transcript_path(const char *home, const char *cwd, const char *session_id) {
        _cleanup_free_ char *slug = strdup(cwd);
        if (!slug) return NULL;
        for (char *p = slug; *p; p++)
                if (*p == '/') *p = '-';
        return strdup_printf("%s/.claude/projects/%s/%s.jsonl", home, slug, session_id);
}

static int append(char **acc, size_t *len, const char *s, size_t n) {
        char *x = realloc(*acc, *len + n + 1);
        if (!x) return -ENOMEM;
        memcpy(x + *len, s, n);
        *len += n;
        x[*len] = 0;
        *acc = x;
        return 0;
}

/* One transcript line → "<type>: <text>" (malloc'd), or NULL (skipped). */
static char *transcript_turn(json_tokener *tok, const char *line, size_t len) {
        _cleanup_json_ json_object *e = NULL;
        if (len == 0 || json_parse_strict_with(tok, line, len, &e) < 0 || !json_is_object(e)) return NULL;
        const char *type = json_get_string(e, "type");
        if (!streq_ptr(type, "user") && !streq_ptr(type, "assistant")) return NULL;
        json_object *msg = json_get_object(e, "message"), *content = NULL;
        if (!msg || !json_object_object_get_ex(msg, "content", &content) || !content) return NULL;
        _cleanup_free_ char *text = NULL;
        size_t tl = 0;
        if (json_object_is_type(content, json_type_string)) {
                text = strdup(json_object_get_string(content));
                if (!text) return NULL;
                tl = strlen(text);
        } else if (json_object_is_type(content, json_type_array)) {
                bool first = true;
                text = strdup("");
                for (size_t i = 0; text && i < json_object_array_length(content); i++) {
                        json_object *b = json_object_array_get_idx(content, i), *t = NULL;
                        if (!json_is_object(b) || !streq_ptr(json_get_string(b, "type"), "text") ||
                            !json_object_object_get_ex(b, "text", &t) || !json_object_is_type(t, json_type_string))
                                continue;
                        if ((!first && append(&text, &tl, "\n", 1) < 0) ||
                            append(&text, &tl, json_object_get_string(t), (size_t) json_object_get_string_len(t)) < 0)
                                return NULL;
                        first = false;
                }
        } else
                return NULL;
        if (!text || tl == 0) return NULL;
        return strdup_printf("%s: %s", type, text);
}

int cli_advisor_transcript_text(const char *path, uint64_t budget, char **ret, cli_error *err) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return cli_error_usage(
                        err,
                        "CLAUDE_CODE_SESSION_ID was set but its transcript file wasn't readable -- --prompt does not "
                        "skip auto-context (it's prepended to it), so this still fails even with --prompt set; unset "
                        "CLAUDE_CODE_SESSION_ID for this call, or check the transcript path",
                        "advisor could not read the Claude session transcript at %s: %s", path, strerror(errno));
        uint64_t size = (uint64_t) st.st_size;
        uint64_t want = budget > CLI_ADVISOR_TAIL_BYTES_CAP / CLI_ADVISOR_TAIL_BYTES_MULTIPLIER
                                ? CLI_ADVISOR_TAIL_BYTES_CAP
                                : budget * CLI_ADVISOR_TAIL_BYTES_MULTIPLIER;
        if (want < CLI_ADVISOR_TAIL_BYTES_FLOOR) want = CLI_ADVISOR_TAIL_BYTES_FLOOR;
        if (want > size) want = size;
        _cleanup_free_ char *raw = malloc(want + 1);
        if (!raw) return -ENOMEM;
        size_t got = 0;
        while (got < want) {
                ssize_t k = pread(fd, raw + got, want - got, (off_t) (size - want + got));
                if (k < 0 && errno == EINTR) continue;
                if (k <= 0) break;
                got += (size_t) k;
        }
        _cleanup_free_ char *text = utf8_sanitize(raw, got);
        if (!text) return -ENOMEM;
        char *p = text;
        if (strncmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3;
        if (want < size) {
                char *nl = strchr(p, '\n');
                p = nl ? nl + 1 : p + strlen(p);
        }
        json_tokener *tok = json_tokener_new();
        if (!tok) return -ENOMEM;
        char *out = strdup("");
        size_t olen = 0;
        bool any = false;
        for (char *line = p; out && line;) {
                char *nl = strchr(line, '\n');
                size_t ll = nl ? (size_t) (nl - line) : strlen(line);
                char *turn = transcript_turn(tok, line, ll);
                if (turn) {
                        if ((any && append(&out, &olen, "\n\n", 2) < 0) || append(&out, &olen, turn, strlen(turn)) < 0) {
                                free(out);
                                out = NULL;
                        }
                        any = true;
                        free(turn);
                }
                line = nl ? nl + 1 : NULL;
        }
        json_tokener_free(tok);
        if (!out) return -ENOMEM;
        size_t off = utf8_tail_offset(out, olen, budget);
        if (off > 0) memmove(out, out + off, olen - off + 1);
        *ret = out;
        return 0;
}

char *cli_advisor_prompt(const char *user_prompt, const char *source, const char *text) {
        _cleanup_free_ char *block = NULL;
        if (!isempty(text))
                block = strdup_printf("\n--- attached context (%s, %zu chars) ---\n%s\n---", source,
                                      utf8_utf16_length(text, strlen(text)), text);
        if (!isempty(text) && !block) return NULL;
        return strdup_printf("%s%s%s%s%s", isempty(user_prompt) ? "" : user_prompt, isempty(user_prompt) ? "" : "\n",
                             cli_advisor_instructions, block ? "\n" : "", block ? block : "");
}
