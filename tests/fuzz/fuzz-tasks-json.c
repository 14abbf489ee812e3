/* tasks.json, the daemon's durable state (a damaged file, a file another
 * program wrote): the load's streaming reader (store_parse_records) and the
 * record reader behind it (task_from_json), without a Manager. Checked: the
 * stream accepts exactly what json_parse_strict accepts as an array and
 * hands out its elements in order; every record it reads serializes
 * (task_record_to_json), reads back and serializes to the same text (what
 * a load then a flush writes is stable: nothing lost, nothing invented).
 * The journal beside it (tasks.journal) has its own target, fuzz-journal.c. */

#include <string.h>
#include <json-c/json.h>

#include "core/store.h"
#include "core/task.h"
#include "fuzz.h"
#include "json-util.h"

typedef struct seen {
        size_t n;
        json_object *whole; /* the whole text's parse, when it is an array */
} seen;

static char *text_of(json_object *o) {
        size_t len;
        const char *l = json_to_line(o, &len);
        char *s = strndup(l, len);
        fuzz_check(s);
        return s;
}

static int one_record(void *userdata, json_object *e) {
        seen *st = userdata;
        if (st->whole) {
                json_object *w = json_object_array_get_idx(st->whole, st->n);
                char *a = text_of(e), *b = w ? text_of(w) : strdup("null");
                fuzz_check(strcmp(a, b) == 0);
                free(a);
                free(b);
        }
        st->n++;
        Task *t = NULL;
        int r = task_from_json(e, &t);
        fuzz_check(r == 0 || r == -EINVAL || r == -ENOMEM);
        if (r == 0) {
                json_object *o = task_record_to_json(&t->rec);
                fuzz_check(o);
                Task *t2 = NULL;
                fuzz_check(task_from_json(o, &t2) == 0);
                json_object *o2 = task_record_to_json(&t2->rec);
                fuzz_check(o2);
                char *a = text_of(o), *b = text_of(o2);
                fuzz_check(strcmp(a, b) == 0);
                free(a);
                free(b);
                json_object_put(o);
                json_object_put(o2);
                task_free(t2);
                task_free(t);
        }
        json_object_put(e);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        json_object *whole = NULL;
        bool strict = json_parse_strict((const char *) data, size, &whole) == 0 &&
                      json_object_is_type(whole, json_type_array);
        seen st = {.whole = strict ? whole : NULL};
        int r = store_parse_records((const char *) data, size, one_record, &st);
        fuzz_check(r == 0 || r == -EBADMSG || r == -ENOMEM);
        if (r != -ENOMEM) fuzz_check((r == 0) == strict);
        if (r == 0) fuzz_check(st.n == json_object_array_length(whole));
        json_object_put(whole);
        return 0;
}
