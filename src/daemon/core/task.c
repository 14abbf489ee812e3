/* The typed task record and its one transition function (task.h). */

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/manager.h"
#include "core/task.h"
#include "json-util.h"
#include "protocol-keys.h"
#include "macro.h"

#define assert_not_reached() assert(!"not reached")

#define IN_SET(x, ...)                                                          \
        ({                                                                      \
                const int _set_[] = {__VA_ARGS__};                              \
                bool _found_ = false;                                           \
                for (size_t _i_ = 0; _i_ < ELEMENTSOF(_set_); _i_++)            \
                        if (_set_[_i_] == (int) (x)) _found_ = true;            \
                _found_;                                                        \
        })

static const char *const task_status_table[_TASK_STATUS_MAX] = {
        [TASK_QUEUED] = "queued",       [TASK_RUNNING] = "running",     [TASK_DONE] = "done",
        [TASK_CRASHED] = "crashed",     [TASK_CANCELLED] = "cancelled", [TASK_UNKNOWN] = "unknown",
};

static const char *const changeset_status_table[_CHANGESET_STATUS_MAX] = {
        [CHANGESET_NONE] = "none",
        [CHANGESET_PENDING] = "pending",
        [CHANGESET_ACCEPTED] = "accepted",
        [CHANGESET_REJECTED] = "rejected",
};

static const char *table_to_string(const char *const *table, size_t n, int i) {
        return i >= 0 && (size_t) i < n ? table[i] : NULL;
}

static int table_from_string(const char *const *table, size_t n, const char *s) {
        if (!s) return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (table[i] && streq(table[i], s)) return (int) i;
        return -EINVAL;
}

/* systemd's DEFINE_STRING_TABLE_LOOKUP shape */
#define DEFINE_STRING_TABLE_LOOKUP(name, type)                                                                         \
        const char *name##_to_string(type i) { return table_to_string(name##_table, ELEMENTSOF(name##_table), i); }  \
        type name##_from_string(const char *s) {                                                                       \
                return (type) table_from_string(name##_table, ELEMENTSOF(name##_table), s);                           \
        }

static const TaskKindInfo task_kind_infos[_TASK_KIND_MAX] = {
        [TASK_KIND_DISPATCH] = {.name = "dispatch", .role = "dispatch", .overlay = true},
        [TASK_KIND_NESTED] = {.name = "nested", .role = "dispatch", .overlay = true},
        [TASK_KIND_JOB] = {.name = "job", .role = "dispatch", .overlay = true},
        /* an advisor only answers; its writes must be gated by an overlay and
         * are never applied */
        [TASK_KIND_ADVISOR] = {.name = "advisor", .role = "advisor", .overlay = true, .requires_overlay = true,
                               .answers_only = true, .never_lands = true},
        /* a report summary reads its snapshot and answers: no overlay, no
         * socket, not shown as a task of the user's */
        [TASK_KIND_SUMMARY] = {.name = "summary", .internal = true, .answers_only = true},
};

static const char *const task_kind_table[_TASK_KIND_MAX] = {
        [TASK_KIND_DISPATCH] = "dispatch", [TASK_KIND_NESTED] = "nested", [TASK_KIND_JOB] = "job",
        [TASK_KIND_ADVISOR] = "advisor",   [TASK_KIND_SUMMARY] = "summary",
};

DEFINE_STRING_TABLE_LOOKUP(task_kind, TaskKind)
DEFINE_STRING_TABLE_LOOKUP(task_status, TaskStatus)
DEFINE_STRING_TABLE_LOOKUP(changeset_status, ChangesetStatus)

const TaskKindInfo *task_kind_info(TaskKind k) {
        assert(k >= 0 && k < _TASK_KIND_MAX);
        return &task_kind_infos[k];
}

TaskKind task_kind_of_record(const TaskRecord *rec) {
        if (task_record_is_set(rec, TASK_KEY_summary_of) || (task_record_is_set(rec, TASK_KEY_internal) && rec->internal))
                return TASK_KIND_SUMMARY;
        if (streq_ptr(rec->role, "advisor")) return TASK_KIND_ADVISOR;
        if (task_record_is_set(rec, TASK_KEY_job)) return TASK_KIND_JOB;
        if (task_record_is_set(rec, TASK_KEY_dispatched_by)) return TASK_KIND_NESTED;
        return TASK_KIND_DISPATCH;
}

/* ---- the field table ---- */

typedef enum FieldKind { KIND_STR, KIND_INT, KIND_BOOL, KIND_OBJ, KIND_ARR, KIND_STATUS, KIND_CHANGESET } FieldKind;

typedef struct FieldInfo {
        const char *name;
        FieldKind kind;
        size_t offset;
} FieldInfo;

#define _FIELD_INFO(json, field, kind) [TASK_KEY_##field] = {json, KIND_##kind, offsetof(TaskRecord, field)},
static const FieldInfo fields[_TASK_KEY_MAX] = {TASK_FIELDS(_FIELD_INFO)};
#undef _FIELD_INFO

_Static_assert(_TASK_KEY_MAX <= 64, "present/nonnull are 64-bit masks");
_Static_assert(_TASK_KEY_MAX < TASK_ORDER_EXTRA, "order entries are uint8_t");

#define FIELD_PTR(rec, k, type) ((type *) ((char *) (rec) + fields[k].offset))
#define BIT(k) (UINT64_C(1) << (k))

/* Records hold their keys mostly in table order: try the key after the
 * previous one first (hint), then scan. */
static TaskKey key_lookup(const char *name, TaskKey hint) {
        if (!name) return _TASK_KEY_INVALID;
        if (hint >= 0 && hint < _TASK_KEY_MAX && streq(fields[hint].name, name)) return hint;
        for (size_t i = 0; i < _TASK_KEY_MAX; i++)
                if (streq(fields[i].name, name)) return (TaskKey) i;
        return _TASK_KEY_INVALID;
}

TaskKey task_key_from_string(const char *name) { return key_lookup(name, _TASK_KEY_INVALID); }

const char *task_key_to_string(TaskKey k) { return k >= 0 && k < _TASK_KEY_MAX ? fields[k].name : NULL; }

bool task_record_has(const TaskRecord *rec, TaskKey k) { return rec->present & BIT(k); }
bool task_record_is_set(const TaskRecord *rec, TaskKey k) { return (rec->present & rec->nonnull & BIT(k)) != 0; }

bool task_record_get_int(const TaskRecord *rec, TaskKey k, int64_t *ret) {
        assert(fields[k].kind == KIND_INT);
        if (!task_record_is_set(rec, k)) return false;
        *ret = *FIELD_PTR(rec, k, const int64_t);
        return true;
}

static bool in_pool(const TaskRecord *rec, const void *p) {
        uintptr_t a = (uintptr_t) p, b = (uintptr_t) rec->pool;
        return rec->pool && a >= b && a < b + rec->pool_size;
}

static void field_clear(TaskRecord *rec, TaskKey k) {
        switch (fields[k].kind) {
        case KIND_STR: {
                char **p = FIELD_PTR(rec, k, char *);
                if (!in_pool(rec, *p)) free(*p);
                *p = NULL;
                break;
        }
        case KIND_OBJ:
        case KIND_ARR: {
                json_object **p = FIELD_PTR(rec, k, json_object *);
                json_object_put(*p);
                *p = NULL;
                break;
        }
        case KIND_INT: *FIELD_PTR(rec, k, int64_t) = 0; break;
        case KIND_BOOL: *FIELD_PTR(rec, k, bool) = false; break;
        case KIND_STATUS: *FIELD_PTR(rec, k, TaskStatus) = _TASK_STATUS_INVALID; break;
        case KIND_CHANGESET: *FIELD_PTR(rec, k, ChangesetStatus) = _CHANGESET_STATUS_INVALID; break;
        }
        rec->nonnull &= ~BIT(k);
}

static int order_append(TaskRecord *rec, uint8_t entry) {
        uint8_t *n;
        if (in_pool(rec, rec->order)) {
                /* the loaded order grows out of the pool */
                n = malloc(rec->n_order + 1);
                if (n) memcpy(n, rec->order, rec->n_order);
        } else
                n = realloc(rec->order, rec->n_order + 1);
        if (!n) return -ENOMEM;
        rec->order = n;
        rec->order[rec->n_order++] = entry;
        return 0;
}

/* Mark k present (appending it to the order when new) and clear its old value. */
static int field_begin(TaskRecord *rec, TaskKey k) {
        assert(k >= 0 && k < _TASK_KEY_MAX);
        if (!(rec->present & BIT(k))) {
                int r = order_append(rec, (uint8_t) k);
                if (r < 0) return r;
                rec->present |= BIT(k);
        }
        field_clear(rec, k);
        return 0;
}

/* A typed string value: a JSON string without NUL bytes. */
static bool str_fits(json_object *v) { return json_object_is_type(v, json_type_string) && !json_string_has_nul(v); }

/* Store v into field k if its JSON type fits the field: 1 stored, 0 does not
 * fit (the caller keeps it verbatim), -ENOMEM. A string goes to *pool (the
 * cursor moves past it) when pool is given, else to its own allocation. */
static int field_from_json(TaskRecord *rec, TaskKey k, json_object *v, char **pool) {
        FieldKind kind = fields[k].kind;
        if (!v) {
                if (kind == KIND_STATUS || kind == KIND_CHANGESET) return 0;
                field_clear(rec, k);
                return 1;
        }
        switch (kind) {
        case KIND_STR: {
                if (!str_fits(v)) return 0;
                char *s;
                if (pool) {
                        size_t n = (size_t) json_object_get_string_len(v);
                        s = memcpy(*pool, json_object_get_string(v), n + 1);
                        *pool += n + 1;
                } else if (!(s = strdup(json_object_get_string(v))))
                        return -ENOMEM;
                field_clear(rec, k);
                *FIELD_PTR(rec, k, char *) = s;
                break;
        }
        case KIND_INT:
                if (!json_object_is_type(v, json_type_int)) return 0;
                field_clear(rec, k);
                *FIELD_PTR(rec, k, int64_t) = json_object_get_int64(v);
                break;
        case KIND_BOOL:
                if (!json_object_is_type(v, json_type_boolean)) return 0;
                field_clear(rec, k);
                *FIELD_PTR(rec, k, bool) = json_object_get_boolean(v);
                break;
        case KIND_OBJ:
        case KIND_ARR:
                if (!json_object_is_type(v, kind == KIND_OBJ ? json_type_object : json_type_array)) return 0;
                field_clear(rec, k);
                *FIELD_PTR(rec, k, json_object *) = json_object_get(v);
                break;
        case KIND_STATUS: {
                TaskStatus s = json_object_is_type(v, json_type_string) ? task_status_from_string(json_object_get_string(v))
                                                                        : _TASK_STATUS_INVALID;
                if (s < 0) return 0;
                *FIELD_PTR(rec, k, TaskStatus) = s;
                break;
        }
        case KIND_CHANGESET: {
                ChangesetStatus s = json_object_is_type(v, json_type_string)
                                            ? changeset_status_from_string(json_object_get_string(v))
                                            : _CHANGESET_STATUS_INVALID;
                if (s < 0) return 0;
                *FIELD_PTR(rec, k, ChangesetStatus) = s;
                break;
        }
        }
        rec->nonnull |= BIT(k);
        return 1;
}

json_object *task_record_get_json(const TaskRecord *rec, TaskKey k) {
        assert(k >= 0 && k < _TASK_KEY_MAX);
        if (!task_record_is_set(rec, k)) return NULL;
        switch (fields[k].kind) {
        case KIND_STR: return json_object_new_string(*FIELD_PTR(rec, k, char *const));
        case KIND_INT: return json_object_new_int64(*FIELD_PTR(rec, k, const int64_t));
        case KIND_BOOL: return json_object_new_boolean(*FIELD_PTR(rec, k, const bool));
        case KIND_OBJ:
        case KIND_ARR: return json_object_get(*FIELD_PTR(rec, k, json_object *const));
        case KIND_STATUS: return json_object_new_string(task_status_to_string(*FIELD_PTR(rec, k, const TaskStatus)));
        case KIND_CHANGESET:
                return json_object_new_string(changeset_status_to_string(*FIELD_PTR(rec, k, const ChangesetStatus)));
        }
        return NULL;
}

json_object *task_record_get_json_by_name(const TaskRecord *rec, const char *name) {
        TaskKey k = task_key_from_string(name);
        if (k >= 0 && task_record_has(rec, k)) return task_record_get_json(rec, k);
        json_object *v = NULL;
        if (rec->extras && json_object_object_get_ex(rec->extras, name, &v)) return json_object_get(v);
        return NULL;
}

void task_record_done(TaskRecord *rec) {
        for (size_t k = 0; k < _TASK_KEY_MAX; k++) field_clear(rec, (TaskKey) k);
        json_object_put(rec->extras);
        if (!in_pool(rec, rec->order)) free(rec->order);
        free(rec->pool);
        *rec = (TaskRecord) {0};
        rec->status = _TASK_STATUS_INVALID;
        rec->changeset_status = _CHANGESET_STATUS_INVALID;
}

int task_record_from_json(TaskRecord *rec, json_object *o) {
        *rec = (TaskRecord) {0};
        rec->status = _TASK_STATUS_INVALID;
        rec->changeset_status = _CHANGESET_STATUS_INVALID;
        if (!json_is_object(o) || !json_get_string(o, PK_id)) return -EINVAL;
        /* one block for the order and every typed string (task.h "pool") */
        size_t n_keys = 0, str_bytes = 0;
        TaskKey hint = 0;
        json_object_object_foreach(o, key0, v0) {
                TaskKey k = key_lookup(key0, hint);
                n_keys++;
                if (k >= 0) {
                        hint = k + 1;
                        if (fields[k].kind == KIND_STR && str_fits(v0)) str_bytes += (size_t) json_object_get_string_len(v0) + 1;
                }
        }
        rec->pool_size = n_keys + str_bytes;
        rec->pool = malloc(rec->pool_size ? rec->pool_size : 1);
        if (!rec->pool) return -ENOMEM;
        rec->order = (uint8_t *) rec->pool;
        char *cursor = rec->pool + n_keys;
        int r = 0;
        hint = 0;
        json_object_object_foreach(o, key, v) {
                TaskKey k = key_lookup(key, hint);
                if (k >= 0) hint = k + 1;
                if (k >= 0 && !(rec->present & BIT(k))) {
                        r = field_from_json(rec, k, v, &cursor);
                        if (r < 0) goto fail;
                        if (r > 0) {
                                assert(rec->n_order < n_keys);
                                rec->order[rec->n_order++] = (uint8_t) k;
                                rec->present |= BIT(k);
                                continue;
                        }
                }
                /* unknown, or a value the typed field cannot hold: verbatim */
                if (!rec->extras && !(rec->extras = json_object_new_object())) goto oom;
                assert(rec->n_order < n_keys);
                rec->order[rec->n_order++] = TASK_ORDER_EXTRA;
                if (json_object_object_add(rec->extras, key, json_object_get(v)) < 0) goto oom;
        }
        if (!task_record_is_set(rec, TASK_KEY_id)) {
                r = -EINVAL;
                goto fail;
        }
        return 0;
oom:
        r = -ENOMEM;
fail:
        task_record_done(rec);
        return r;
}

json_object *task_record_to_json(const TaskRecord *rec) {
        _cleanup_json_ json_object *o = json_object_new_object();
        if (!o) return NULL;
        struct lh_entry *e = rec->extras ? json_object_get_object(rec->extras)->head : NULL;
        for (size_t i = 0; i < rec->n_order; i++) {
                const char *key;
                json_object *v;
                if (rec->order[i] == TASK_ORDER_EXTRA) {
                        if (!e) continue;
                        key = lh_entry_k(e);
                        v = json_object_get((json_object *) lh_entry_v(e));
                        e = lh_entry_next(e);
                        TaskKey k = task_key_from_string(key);
                        if (k >= 0 && task_record_has(rec, k)) {
                                json_object_put(v); /* the typed field took over */
                                continue;
                        }
                } else {
                        TaskKey k = rec->order[i];
                        key = fields[k].name;
                        v = task_record_get_json(rec, k);
                        if (!v && task_record_is_set(rec, k)) return NULL;
                }
                if (json_object_object_add(o, key, v) < 0) {
                        json_object_put(v);
                        return NULL;
                }
        }
        return TAKE_PTR(o);
}

/* ---- writers ---- */

/* Around every write of key k of a task in a table: the observers that keep
 * something ordered or counted by a key look before and after. */
static void key_changing(Task *t, TaskKey k) {
        if (!t->m) return;
        const TaskObservers *o = &t->m->observers;
        for (size_t i = 0; i < o->n; i++)
                if (o->v[i].key_changing) o->v[i].key_changing(t, k, o->v[i].userdata);
}

static void key_changed(Task *t, TaskKey k) {
        t->generation++; /* what was derived from the record is stale */
        if (IN_SET(k, TASK_KEY_role, TASK_KEY_summary_of, TASK_KEY_internal, TASK_KEY_job, TASK_KEY_dispatched_by))
                t->kind = task_kind_of_record(&t->rec);
        if (!t->m) return;
        const TaskObservers *o = &t->m->observers;
        for (size_t i = 0; i < o->n; i++)
                if (o->v[i].key_changed) o->v[i].key_changed(t, k, o->v[i].userdata);
}

static void assert_writable(TaskKey k) {
        assert(k >= 0 && k < _TASK_KEY_MAX);
        /* status and changesetStatus move only through task_transition */
        assert(fields[k].kind != KIND_STATUS && fields[k].kind != KIND_CHANGESET);
}

/* Write one typed value into field k (its kind checked), the observers told
 * around it; the old value is cleared first. */
static int set_field(Task *t, TaskKey k, FieldKind kind, const void *value) {
        assert_writable(k);
        assert(fields[k].kind == kind);
        char *s = NULL;
        if (kind == KIND_STR && value && !(s = strdup(value))) return -ENOMEM;
        key_changing(t, k);
        int r = field_begin(&t->rec, k);
        if (r >= 0) {
                switch (kind) {
                case KIND_STR: *FIELD_PTR(&t->rec, k, char *) = TAKE_PTR(s); break;
                case KIND_INT: *FIELD_PTR(&t->rec, k, int64_t) = *(const int64_t *) value; break;
                case KIND_BOOL: *FIELD_PTR(&t->rec, k, bool) = *(const bool *) value; break;
                default: assert_not_reached();
                }
                if (value) t->rec.nonnull |= BIT(k);
        }
        free(s);
        key_changed(t, k);
        return r;
}

int task_set_str(Task *t, TaskKey k, const char *v) { return set_field(t, k, KIND_STR, v); }
int task_set_int(Task *t, TaskKey k, int64_t v) { return set_field(t, k, KIND_INT, &v); }
int task_set_bool(Task *t, TaskKey k, bool v) { return set_field(t, k, KIND_BOOL, &v); }

int task_set_null(Task *t, TaskKey k) {
        assert_writable(k);
        key_changing(t, k);
        int r = field_begin(&t->rec, k);
        key_changed(t, k);
        return r;
}

int task_set_json(Task *t, TaskKey k, json_object *v) {
        assert_writable(k);
        assert(fields[k].kind == KIND_OBJ || fields[k].kind == KIND_ARR);
        assert(!v || json_object_is_type(v, fields[k].kind == KIND_OBJ ? json_type_object : json_type_array));
        key_changing(t, k);
        int r = field_begin(&t->rec, k);
        if (r >= 0) {
                *FIELD_PTR(&t->rec, k, json_object *) = v;
                if (v) t->rec.nonnull |= BIT(k);
        } else
                json_object_put(v);
        key_changed(t, k);
        return r;
}

/* ---- the state machine ---- */

bool task_status_transition_ok(TaskStatus from, TaskStatus to) {
        if (from < 0 || from >= _TASK_STATUS_MAX || to < 0 || to >= _TASK_STATUS_MAX) return false;
        if (from == to) return true;
        switch (from) {
        case TASK_QUEUED:
                return IN_SET(to, TASK_RUNNING, TASK_CRASHED, TASK_CANCELLED, TASK_UNKNOWN);
        case TASK_RUNNING:
                return IN_SET(to, TASK_DONE, TASK_CRASHED, TASK_CANCELLED, TASK_UNKNOWN);
        default:
                return false;
        }
}

bool changeset_status_transition_ok(ChangesetStatus from, ChangesetStatus to) {
        if (from < 0 || from >= _CHANGESET_STATUS_MAX || to < 0 || to >= _CHANGESET_STATUS_MAX) return false;
        if (from == to) return true;
        switch (from) {
        case CHANGESET_NONE: return to == CHANGESET_PENDING;
        case CHANGESET_PENDING: return IN_SET(to, CHANGESET_ACCEPTED, CHANGESET_REJECTED);
        default: return false;
        }
}

static int set_enum(Task *t, TaskKey k) {
        /* the key is present from here on; nonnull: an enum always has a value */
        if (!(t->rec.present & BIT(k))) {
                int r = order_append(&t->rec, (uint8_t) k);
                if (r < 0) return r;
                t->rec.present |= BIT(k);
        }
        t->rec.nonnull |= BIT(k);
        return 0;
}

int task_init_status(Task *t, TaskStatus s) {
        assert(s >= 0 && s < _TASK_STATUS_MAX);
        if (task_record_has(&t->rec, TASK_KEY_status)) return -EEXIST;
        key_changing(t, TASK_KEY_status);
        int r = set_enum(t, TASK_KEY_status);
        if (r >= 0) t->rec.status = s;
        key_changed(t, TASK_KEY_status);
        return r < 0 ? r : 0;
}

int task_init_changeset(Task *t, ChangesetStatus cs) {
        assert(cs >= 0 && cs < _CHANGESET_STATUS_MAX);
        if (task_record_has(&t->rec, TASK_KEY_changeset_status)) return -EEXIST;
        key_changing(t, TASK_KEY_changeset_status);
        int r = set_enum(t, TASK_KEY_changeset_status);
        if (r >= 0) t->rec.changeset_status = cs;
        key_changed(t, TASK_KEY_changeset_status);
        return r < 0 ? r : 0;
}

/* Write s and cs (checked by the caller) and tell the observers. */
static int transition_apply(Task *t, TaskStatus s, ChangesetStatus cs) {
        TaskStatus old_s = t->rec.status;
        ChangesetStatus old_cs = t->rec.changeset_status;
        bool ds = s != old_s, dcs = cs != old_cs;
        int r = 0;
        if (ds) {
                key_changing(t, TASK_KEY_status);
                r = set_enum(t, TASK_KEY_status);
                if (r >= 0) t->rec.status = s;
                key_changed(t, TASK_KEY_status);
        }
        if (r >= 0 && dcs) {
                key_changing(t, TASK_KEY_changeset_status);
                r = set_enum(t, TASK_KEY_changeset_status);
                if (r >= 0) t->rec.changeset_status = cs;
                key_changed(t, TASK_KEY_changeset_status);
        }
        if (r < 0) return r;
        Manager *m = t->m;
        if (!m) return 1;
        /* by index: an observer may register no one, but may transition again */
        for (size_t i = 0; i < m->observers.n; i++)
                if (m->observers.v[i].transitioned)
                        m->observers.v[i].transitioned(t, old_s, old_cs, m->observers.v[i].userdata);
        return 1;
}

int task_transition(Task *t, TaskStatus s, ChangesetStatus cs) {
        assert(t);
        TaskStatus old_s = t->rec.status;
        ChangesetStatus old_cs = t->rec.changeset_status;
        bool ds = s != old_s, dcs = cs != old_cs;
        if (!ds && !dcs) return 0;
        if (ds && !task_status_transition_ok(old_s, s)) return -EINVAL;
        if (dcs && !changeset_status_transition_ok(old_cs, cs)) return -EINVAL;
        return transition_apply(t, s, cs);
}

int task_transition_unlaunch(Task *t) {
        assert(t);
        if (t->rec.status != TASK_RUNNING || !IN_SET(t->rec.changeset_status, CHANGESET_NONE, CHANGESET_PENDING))
                return -EINVAL;
        return transition_apply(t, TASK_QUEUED, CHANGESET_NONE);
}

Task *task_alloc(void) {
        Task *t = calloc(1, sizeof *t);
        if (!t) return NULL;
        t->rec.status = _TASK_STATUS_INVALID;
        t->rec.changeset_status = _CHANGESET_STATUS_INVALID;
        t->shim_pidfd = -1;
        t->status_fd = -1;
        t->scope_hold_fd = -1;
        return t;
}

int task_from_json(json_object *o, Task **ret) {
        Task *t = task_alloc();
        if (!t) return -ENOMEM;
        int r = task_record_from_json(&t->rec, o);
        if (r < 0) {
                free(t);
                return r;
        }
        t->id = t->rec.id;
        t->kind = task_kind_of_record(&t->rec);
        *ret = t;
        return 0;
}

void task_free(Task *t) {
        if (!t) return;
        assert(!t->socket); /* its owner closes it first */
        task_record_done(&t->rec);
        json_object_put(t->list_row);
        json_object_put(t->caller_env);
        launch_options_done(&t->launch);
        line_buffer_done(t->status_buf);
        free(t->status_buf);
        free(t);
}

int manager_add_observer(Manager *m, const TaskObserver *o) {
        assert(m && o);
        TaskObserver *n = reallocarray(m->observers.v, m->observers.n + 1, sizeof *n);
        if (!n) return -ENOMEM;
        m->observers.v = n;
        m->observers.v[m->observers.n++] = *o;
        return 0;
}

int manager_add_task_observer(Manager *m, task_observer_fn fn, void *userdata) {
        assert(fn);
        return manager_add_observer(m, &(TaskObserver) {.transitioned = fn, .userdata = userdata});
}

void manager_free_task_observers(Manager *m) {
        free(m->observers.v);
        m->observers = (TaskObservers) {0};
}

void task_announce_added(Task *t) {
        Manager *m = t->m;
        assert(m);
        for (size_t i = 0; i < m->observers.n; i++)
                if (m->observers.v[i].added) m->observers.v[i].added(t, m->observers.v[i].userdata);
}

void task_announce_checked(Task *t) {
        Manager *m = t->m;
        assert(m);
        for (size_t i = 0; i < m->observers.n; i++)
                if (m->observers.v[i].checked) m->observers.v[i].checked(t, m->observers.v[i].userdata);
}

bool task_is_active(const Task *t) { return IN_SET(t->rec.status, TASK_QUEUED, TASK_RUNNING); }

bool task_is_settled(const Task *t) { return !task_is_active(t) && !t->settling; }
