/* The task table (task-table.h): the tasks in creation order, their counts
 * per status and how far the table is from startedAt order. */

#include <assert.h>

#include "core/manager.h"
#include "core/task-table.h"
#include "core/task.h"
#include "json-util.h"
#include "macro.h"

static const char *started(const Task *t) { return strempty(t->rec.started_at); }

/* ---- the incremental order and counts of task.list ----
 * The table is in creation order, and tasks are created with startedAt
 * "now", so it is nearly always sorted by startedAt already: count the
 * neighbours that are not (Manager.started_inversions). While that is 0, the
 * list (newest first, ties in table order) is the table read backwards with
 * each run of equal startedAt read forwards, and task.list {} touches only
 * the rows it returns. Kept by task_table_add/manager_remove_task and, around
 * every write of startedAt, by the table's key observer. */

static bool inverted(const Task *a, const Task *b) { return strcmp(started(a), started(b)) > 0; }

/* t's place in the table, searched from the end (where new tasks are) */
static bool table_index(Manager *m, const Task *t, size_t *ret) {
        for (size_t i = m->n_tasks; i > 0; i--)
                if (m->tasks[i - 1] == t) {
                        *ret = i - 1;
                        return true;
                }
        return false;
}

/* add (+1) or take away (-1) the inversions of the pairs around index i */
static void count_pairs_at(Manager *m, size_t i, int sign) {
        if (i > 0 && inverted(m->tasks[i - 1], m->tasks[i])) m->started_inversions += (size_t) sign;
        if (i + 1 < m->n_tasks && inverted(m->tasks[i], m->tasks[i + 1])) m->started_inversions += (size_t) sign;
}

static void count_status(Manager *m, TaskStatus s, int sign) {
        if (s >= 0 && s < _TASK_STATUS_MAX) m->status_counts[s] += sign;
}

/* the table's key observer: counts and order follow status and startedAt */
static void on_key_changing(Task *t, TaskKey k, void *userdata) {
        size_t i;
        if (k == TASK_KEY_status) count_status(t->m, t->rec.status, -1);
        else if (k == TASK_KEY_started_at && table_index(t->m, t, &i))
                count_pairs_at(t->m, i, -1);
}

static void on_key_changed(Task *t, TaskKey k, void *userdata) {
        size_t i;
        if (k == TASK_KEY_status) count_status(t->m, t->rec.status, +1);
        else if (k == TASK_KEY_started_at && table_index(t->m, t, &i))
                count_pairs_at(t->m, i, +1);
}

int task_table_init(Manager *m) {
        return manager_add_observer(m, &(TaskObserver) {.key_changing = on_key_changing, .key_changed = on_key_changed});
}

int task_table_add(Manager *m, Task *t) {
        assert(!t->m);
        if (m->n_tasks == m->cap_tasks) {
                size_t ncap = m->cap_tasks ? m->cap_tasks * 2 : 64;
                Task **n = reallocarray(m->tasks, ncap, sizeof *n);
                if (!n) return -ENOMEM;
                m->tasks = n;
                m->cap_tasks = ncap;
        }
        t->m = m;
        m->tasks[m->n_tasks++] = t;
        count_pairs_at(m, m->n_tasks - 1, +1);
        count_status(m, t->rec.status, +1);
        for (size_t i = 0; i < m->observers.n; i++)
                if (m->observers.v[i].inserted) m->observers.v[i].inserted(t, m->observers.v[i].userdata);
        return 0;
}

Task *task_table_add_json(Manager *m, json_object *json) {
        _cleanup_json_ json_object *owned = json;
        Task *t = NULL;
        if (task_from_json(owned, &t) < 0) return NULL;
        if (task_table_add(m, t) < 0) {
                task_free(t);
                return NULL;
        }
        return t;
}

int task_table_replace_json(Manager *m, Task *old, json_object *json, Task **ret) {
        _cleanup_json_ json_object *owned = json;
        size_t i;
        if (!table_index(m, old, &i)) return -ENOENT;
        Task *t = NULL;
        int r = task_from_json(owned, &t);
        if (r < 0) return r;
        count_pairs_at(m, i, -1);
        count_status(m, old->rec.status, -1);
        t->m = m;
        m->tasks[i] = t;
        count_pairs_at(m, i, +1);
        count_status(m, t->rec.status, +1);
        old->m = NULL;
        task_free(old);
        *ret = t;
        return 0;
}

void manager_remove_task(Manager *m, Task *t) {
        size_t i;
        for (size_t k = 0; t->m == m && k < m->observers.n; k++)
                if (m->observers.v[k].removed) m->observers.v[k].removed(t, m->observers.v[k].userdata);
        if (table_index(m, t, &i)) {
                count_pairs_at(m, i, -1);
                count_status(m, t->rec.status, -1);
                memmove(m->tasks + i, m->tasks + i + 1, (m->n_tasks - i - 1) * sizeof *m->tasks);
                m->n_tasks--;
                /* the neighbours meet */
                if (i > 0 && i < m->n_tasks && inverted(m->tasks[i - 1], m->tasks[i])) m->started_inversions++;
        }
        t->m = NULL;
        task_free(t);
}

Task *manager_find_task(Manager *m, const char *id) {
        for (size_t i = 0; i < m->n_tasks; i++)
                if (streq(m->tasks[i]->id, id)) return m->tasks[i];
        return NULL;
}

