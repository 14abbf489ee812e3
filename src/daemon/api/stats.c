/* task.stats (stats.h). */
#include "api/stats.h"

#include <errno.h>

#include "core/cooldown.h"
#include "json-util.h"
#include "core/manager.h"
#include "core/peer.h"
#include "protocol-keys.h"
#include "net-policy.h"
#include "run/scope.h"
#include "api/server.h"
#include "task-stats.h"
#include "core/task.h"
#include "core/task-table.h"
#include "api/task-views.h"
#include "macro.h"
#include "time-util.h"

json_object *stats_rows(Manager *m, const char *visible_to) {
        json_object *rows = json_object_new_array();
        if (!rows) return NULL;
        for (size_t i = 0; i < m->n_tasks; i++) {
                Task *t = m->tasks[i];
                if (task_kind_info(t->kind)->internal) continue;
                if (visible_to && !streq(t->id, visible_to) && !streq_ptr(t->rec.dispatched_by, visible_to)) continue;
                json_object *row = json_object_new_object();
                if (!row || json_object_array_add(rows, row) < 0) {
                        json_object_put(row);
                        json_object_put(rows);
                        return NULL;
                }
                static const TaskKey keys[] = {TASK_KEY_id,         TASK_KEY_status,    TASK_KEY_model,
                                               TASK_KEY_started_at, TASK_KEY_directory, TASK_KEY_failure_reason};
                for (size_t k = 0; k < ELEMENTSOF(keys); k++) task_copy_key(row, t, keys[k]);
        }
        return rows;
}

int method_stats(Manager *m, Request *r, Task *target, json_object **ret, MethodError *err) {
        Caller who = caller_of(m, r->conn);
        _cleanup_json_ json_object *rows = stats_rows(m, who.sandboxed ? (who.task ? who.task->id : "") : NULL);
        if (!rows) return -ENOMEM;
        json_object *o = task_stats_compute(rows, now_ms());
        if (!o) return -ENOMEM;
        /* the active provider cooldowns (cooldown.h), an addition after
         * the original's keys; not for a caller in a sandbox */
        if (!who.sandboxed) {
                json_object *cd = cooldown_snapshot(m);
                if (!cd || json_add(o, PK_cooldowns, cd) < 0) {
                        json_object_put(o);
                        return -ENOMEM;
                }
                /* are the scope limits enforced (scope.h)? `doctor` reads
                 * it here: system.health's result stays exactly its three keys */
                json_object *rl = scope_health(m);
                if (!rl || json_add(o, PK_resourceLimits, rl) < 0) {
                        json_object_put(o);
                        return -ENOMEM;
                }
                /* what the start found wrong with the state journal (store.h), if anything */
                const char *note = store_journal_note(m);
                if (note && json_add_string(o, PK_stateJournal, note) < 0) {
                        json_object_put(o);
                        return -ENOMEM;
                }
                /* the workers' default network: its mode and the hosts every
                 * proxy allows besides each executor's own (network.h) */
                json_object *net = json_object_new_object(), *hosts = json_object_new_array();
                for (char **h = m->settings.allow_hosts; hosts && h && *h; h++)
                        json_object_array_add(hosts, json_object_new_string(*h));
                if (!net || !hosts || json_add_string(net, PK_mode, net_mode_to_string(m->settings.net_mode)) < 0 ||
                    json_add(net, PK_allowHosts, hosts) < 0 || json_add(o, PK_network, net) < 0) {
                        json_object_put(o);
                        return -ENOMEM;
                }
        }
        *ret = o;
        return 0;
}
