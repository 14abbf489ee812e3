/* The scheduler through the real daemon (scenarios D7, D8, D10): the global
 * cap, the launch
 * window, the lower-dir stagger, per-provider limits, round-robin between
 * providers with FIFO within each, the queue position in task.status, and
 * provider cooldowns after a rate limit that said when to retry.
 *
 * Workers are `shell` tasks (the model name only picks the provider). Each
 * timed worker prints its own start time (`date +%s%3N`, wall clock ms) as
 * the first line of its output; the assertions are orderings and lower
 * bounds against times the test took before dispatching or the daemon
 * recorded (endedAt), never upper bounds on a loaded machine. */

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "json-util.h"
#include "macro.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

/* ---- helpers ---- */

static char *dispatch_shell(tf_world *w, const char *model, const char *prompt) {
        return tf_dispatch_worker(w, "shell", model, w->repo_parent, NULL, prompt);
}

/* A worker that prints its start time and then waits until the file
 * <repo_parent>/release-<name> exists (at most 2 minutes, so a failed case
 * leaves no worker behind for long). */
static char *dispatch_held(tf_world *w, const char *model, const char *name) {
        char *p = strdup_printf("date +%%s%%3N; i=0; while [ ! -e %s/release-%s ] && [ $i -lt 2400 ]; do sleep 0.05; "
                                "i=$((i+1)); done; echo %s",
                                w->repo_parent, name, name);
        char *id = dispatch_shell(w, model, p);
        free(p);
        return id;
}

static void release(tf_world *w, const char *name) {
        free(tf_shf(w, NULL, "touch %s/release-%s", w->repo_parent, name));
}

static void wait_status(tf_world *w, const char *id, const char *status) {
        ck_assert_msg(tf_wait_status(w, id, status, 60000), "task %s never became %s", id, status);
}

/* Wall-clock ms the worker printed first. */
static uint64_t started_ms(tf_world *w, const char *id) {
        json_object_put(tf_wait_settled(w, id));
        char *msg = tf_task_message(w, id);
        uint64_t v = strtoull(msg, NULL, 10);
        ck_assert_msg(v > 0, "task %s printed no start time: %s", id, msg);
        free(msg);
        return v;
}

static uint64_t ended_ms(tf_world *w, const char *id) {
        json_object *o = tf_wait_settled(w, id);
        uint64_t v = 0;
        ck_assert_int_eq(parse_iso(strempty(json_get_string(o, "endedAt")), &v), 0);
        json_object_put(o);
        return v;
}

static void assert_reason(json_object *st, const char *needle) {
        const char *r = json_get_string(st, "queuedReason");
        ck_assert_msg(r && strstr(r, needle), "queuedReason \"%s\" does not say \"%s\"", strnull(r), needle);
}

/* ---- D7: the global cap ---- */

TF_WORLD_TEST_ENV(concurrency_cap, "TASKFERRY_DISABLE_SANDBOX=1", "TASKFERRY_MAX_CONCURRENT_TASKS=2") {
        char *a = dispatch_held(w, "p/x", "a"), *b = dispatch_held(w, "p/x", "b"), *c = dispatch_held(w, "p/x", "c");
        wait_status(w, a, "running");
        wait_status(w, b, "running");
        json_object *st = tf_status_rpc(w, c);
        ck_assert_str_eq(json_get_string(st, "status"), "queued");
        int64_t pos = 0;
        ck_assert(json_get_int64(st, "queuePosition", &pos));
        ck_assert_int_eq(pos, 1);
        ck_assert_str_eq(json_get_string(st, "queueProvider"), "p");
        assert_reason(st, "task slots are in use");
        json_object_put(st);
        /* the CLI's status shows them too */
        const char *sa[] = {"status", c, NULL};
        tf_run r = tf_cli(w, NULL, NULL, sa);
        ck_assert_msg(strstr(r.out, "queuePosition: 1") && strstr(r.out, "queuedReason:"), "%s", r.out);
        tf_run_done(&r);
        usleep(300 * 1000);
        ck_assert(tf_status_is(w, c, "queued"));
        release(w, "a");
        wait_status(w, c, "running");
        ck_assert(tf_status_is(w, b, "running"));
        release(w, "b"), release(w, "c");
        const char *ids[] = {a, b, c};
        for (int i = 0; i < 3; i++) {
                json_object *o = tf_wait_settled(w, ids[i]);
                ck_assert_str_eq(tf_jstr(o, "status"), "done");
                json_object_put(o);
        }
        free(a), free(b), free(c);
}
END_TEST

/* D7: a worker whose spawn fails (binary missing) frees exactly one slot. */
TF_WORLD_TEST_ENV(failed_spawn_frees_one_slot, "TASKFERRY_DISABLE_SANDBOX=1", "TASKFERRY_MAX_CONCURRENT_TASKS=2") {
        tf_world_setenv(w, "PATH", "/usr/bin:/bin"); /* no pi or opencode */
        char *a = dispatch_held(w, "p/x", "a");
        wait_status(w, a, "running");
        json_object *o = NULL;
        char *bad = tf_worker_settled(w, "opencode", "p/x", w->repo_parent, NULL, "hi", &o);
        ck_assert_str_eq(tf_jstr(o, "status"), "crashed");
        json_object_put(o);
        char *c = dispatch_held(w, "p/x", "c"), *dd = dispatch_held(w, "p/x", "d");
        wait_status(w, c, "running");
        usleep(300 * 1000);
        ck_assert_msg(tf_status_is(w, dd, "queued"), "the failed spawn freed more than its slot");
        release(w, "a"), release(w, "c"), release(w, "d");
        wait_status(w, dd, "done");
        free(a), free(bad), free(c), free(dd);
}
END_TEST

/* ---- the launch window and the stagger ---- */

TF_WORLD_TEST_ENV(launch_window, "TASKFERRY_DISABLE_SANDBOX=1", "TASKFERRY_MAX_DISPATCHES_PER_WINDOW=2",
                  "TASKFERRY_DISPATCH_WINDOW_MS=3000") {
        tf_daemon_start(w);
        uint64_t t0 = now_ms();
        char *ids[3];
        for (int i = 0; i < 3; i++) ids[i] = dispatch_shell(w, "p/x", "date +%s%3N");
        json_object *st = tf_status_rpc(w, ids[2]);
        if (streq_ptr(json_get_string(st, "status"), "queued")) assert_reason(st, "maxDispatchesPerWindow");
        json_object_put(st);
        uint64_t s[3];
        for (int i = 0; i < 3; i++) s[i] = started_ms(w, ids[i]);
        ck_assert_msg(s[2] >= t0 + 3000, "the third launch came %" PRIu64 " ms after the first dispatch", s[2] - t0);
        ck_assert_uint_lt(s[0], s[2]);
        ck_assert_uint_lt(s[1], s[2]);
        for (int i = 0; i < 3; i++) free(ids[i]);
}
END_TEST

TF_WORLD_TEST_ENV(lowerdir_stagger, "TASKFERRY_DISABLE_SANDBOX=1", "TASKFERRY_LOWERDIR_STAGGER_MS=2000") {
        tf_daemon_start(w);
        uint64_t t0 = now_ms();
        char *a = dispatch_shell(w, "p/x", "date +%s%3N");
        char *b = dispatch_shell(w, "q/x", "date +%s%3N"); /* another provider: the stagger is global */
        json_object *st = tf_status_rpc(w, b);
        if (streq_ptr(json_get_string(st, "status"), "queued")) assert_reason(st, "staggered");
        json_object_put(st);
        uint64_t sb = started_ms(w, b);
        ck_assert_msg(sb >= t0 + 2000, "the second launch came %" PRIu64 " ms after the first dispatch", sb - t0);
        ck_assert_uint_lt(started_ms(w, a), sb);
        free(a), free(b);
}
END_TEST

/* ---- D8: per-provider limits ---- */

TF_WORLD_TEST_ENV(provider_limits, "TASKFERRY_DISABLE_SANDBOX=1", "TASKFERRY_PROVIDER_LIMITS=opencode-go:1") {
        char *g1 = dispatch_held(w, "opencode-go/minimax-m3", "g1");
        char *g2 = dispatch_held(w, "opencode-go/other", "g2");
        char *g3 = dispatch_held(w, "opencode-go/other", "g3");
        char *o1 = dispatch_held(w, "openai/gpt", "o1");
        wait_status(w, g1, "running");
        wait_status(w, o1, "running");
        json_object *st = tf_status_rpc(w, g2);
        ck_assert_str_eq(json_get_string(st, "status"), "queued");
        assert_reason(st, "provider opencode-go is at its limit of 1");
        json_object_put(st);
        /* cancelling a queued task touches only its provider's queue */
        const char *cn[] = {"cancel", g3, "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, cn);
        ck_assert_msg(r.exit_code == 0 && strstr(r.out, "queued task cancelled before launch"), "%s", r.out);
        tf_run_done(&r);
        ck_assert(tf_status_is(w, g2, "queued"));
        ck_assert(tf_status_is(w, o1, "running"));
        release(w, "g1");
        wait_status(w, g2, "running");
        release(w, "g2"), release(w, "o1");
        wait_status(w, g2, "done");
        ck_assert(tf_status_is(w, g3, "cancelled"));
        free(g1), free(g2), free(g3), free(o1);
}
END_TEST

/* prov:10:2 holds the 3rd launch until the (global-length) window passes;
 * an unlisted provider is limited only globally. */
TF_WORLD_TEST_ENV(provider_window, "TASKFERRY_DISABLE_SANDBOX=1", "TASKFERRY_PROVIDER_LIMITS=prov:10:2",
                  "TASKFERRY_DISPATCH_WINDOW_MS=3000") {
        tf_daemon_start(w);
        uint64_t t0 = now_ms();
        char *p[3];
        for (int i = 0; i < 3; i++) p[i] = dispatch_shell(w, "prov/m", "date +%s%3N");
        char *u = dispatch_shell(w, "unlisted/m", "date +%s%3N");
        uint64_t s2 = started_ms(w, p[2]);
        ck_assert_msg(s2 >= t0 + 3000, "prov's third launch came %" PRIu64 " ms after the first dispatch", s2 - t0);
        ck_assert_uint_lt(started_ms(w, u), s2);
        ck_assert_uint_lt(started_ms(w, p[1]), s2);
        for (int i = 0; i < 3; i++) free(p[i]);
        free(u);
}
END_TEST

/* A malformed TASKFERRY_PROVIDER_LIMITS fails the daemon's start with the
 * spec's message, directly and through the CLI's auto-start. */
START_TEST(malformed_provider_limits_refuse_start) {
        static const char *const bad[] = {":1", "a:0", "a:x", "a:1:2:3"}; /* empty name, 0, non-integer, 4 fields */
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                char *env = strdup_printf("TASKFERRY_PROVIDER_LIMITS=%s", bad[i]);
                char *extra[] = {(char *) "TASKFERRY_DISABLE_SANDBOX=1", env, NULL};
                tf_world *w = tf_world_new(extra);
                tf_run r = tf_sh(w, NULL, "\"$TASKFERRY_DAEMON\"; echo rc=$?", true);
                char *want = strdup_printf("error: malformed TASKFERRY_PROVIDER_LIMITS entry \"%s\"", bad[i]);
                ck_assert_msg(strstr(r.out, "rc=78"), "%s: %s (EX_CONFIG)", bad[i], r.out);
                ck_assert_msg(strstr(r.err, want), "%s: %s", bad[i], r.err);
                ck_assert_msg(strstr(r.err, "help: use provider:maxConcurrentTasks[:maxDispatchesPerWindow], comma-separated"),
                              "%s", r.err);
                tf_run_done(&r);
                const char *l[] = {"list", NULL};
                r = tf_cli(w, NULL, NULL, l);
                ck_assert_int_eq(r.exit_code, 1);
                ck_assert_msg(strstr(r.out, "daemon boot failed: ") && strstr(r.out, "malformed TASKFERRY_PROVIDER_LIMITS entry"), "%s", r.out);
                tf_run_done(&r);
                free(want), free(env);
                tf_world_free(w);
        }
}
END_TEST

/* ---- round-robin between providers, FIFO within each ---- */

TF_WORLD_TEST_ENV(round_robin_and_queue_position, "TASKFERRY_DISABLE_SANDBOX=1", "TASKFERRY_MAX_CONCURRENT_TASKS=1") {
        char *z = dispatch_held(w, "z/x", "z");
        wait_status(w, z, "running");
        char *order = strdup(tf_path(w->repo_parent, "order"));
        const char *names[] = {"a1", "a2", "b1"};
        const char *models[] = {"a/x", "a/y", "b/x"};
        char *ids[3];
        for (int i = 0; i < 3; i++) {
                char *p = strdup_printf("echo %s >> %s", names[i], order);
                ids[i] = dispatch_shell(w, models[i], p);
                free(p);
        }
        json_object *st = tf_status_rpc(w, ids[1]);
        int64_t pos = 0;
        ck_assert(json_get_int64(st, "queuePosition", &pos));
        ck_assert_int_eq(pos, 2);
        ck_assert_str_eq(json_get_string(st, "queueProvider"), "a");
        json_object_put(st);
        st = tf_status_rpc(w, ids[2]);
        ck_assert(json_get_int64(st, "queuePosition", &pos));
        ck_assert_int_eq(pos, 1);
        json_object_put(st);
        release(w, "z");
        for (int i = 0; i < 3; i++) json_object_put(tf_wait_settled(w, ids[i]));
        /* providers z, a, b in that order; z launched, so a, then b, then a */
        char *got = tf_read(order, NULL);
        ck_assert_str_eq(got, "a1\nb1\na2\n");
        free(got);
        for (int i = 0; i < 3; i++) free(ids[i]);
        free(order), free(z);
}
END_TEST

/* ---- D10: cancel while queued ---- */

TF_WORLD_TEST_ENV(cancel_while_queued, "TASKFERRY_DISABLE_SANDBOX=1", "TASKFERRY_MAX_CONCURRENT_TASKS=1") {
        char *z = dispatch_held(w, "p/x", "z");
        wait_status(w, z, "running");
        char *marker = strdup(tf_path(w->repo_parent, "spawned"));
        char *p = strdup_printf("touch %s", marker);
        char *q = dispatch_shell(w, "p/x", p);
        ck_assert(tf_status_is(w, q, "queued"));
        const char *cn[] = {"cancel", q, "--json", NULL};
        tf_run r = tf_cli(w, NULL, NULL, cn);
        ck_assert_int_eq(r.exit_code, 0);
        json_object *o = tf_json(r.out);
        ck_assert_str_eq(tf_jstr(o, "status"), "cancelled");
        ck_assert_str_eq(tf_jstr(o, "note"), "queued task cancelled before launch");
        json_object_put(o);
        tf_run_done(&r);
        o = tf_wait_settled(w, q);
        ck_assert_str_eq(tf_jstr(o, "status"), "cancelled");
        json_object_put(o);
        release(w, "z");
        json_object_put(tf_wait_settled(w, z));
        char *after = dispatch_shell(w, "p/x", "true");
        json_object_put(tf_wait_settled(w, after));
        ck_assert_msg(!tf_exists(marker), "the cancelled task's worker ran");
        free(after), free(q), free(p), free(marker), free(z);
}
END_TEST

/* ---- provider cooldown after a rate limit ---- */

static char *dispatch_rate_limited(tf_world *w, const char *model, const char *retry_after) {
        char *p = strdup_printf("echo 'HTTP/1.1 429 Too Many Requests' >&2; echo 'Retry-After: %s' >&2; exit 1", retry_after);
        char *id = dispatch_shell(w, model, p);
        free(p);
        return id;
}

static json_object *cooldowns_of_list(tf_world *w) {
        json_object *frame = tf_rpc(w, "task.list", "{}");
        json_object *c = json_object_get(json_get_array(tf_result(frame), "cooldowns"));
        json_object_put(frame);
        return c;
}

/* The acceptance test: a fake provider answers 429 with Retry-After: 3 →
 * the next dispatch for that provider starts ≥ 3 s later, a dispatch for
 * another provider starts at once; status and list say why. */
TF_WORLD_TEST_ENV(cooldown_after_retry_after, "TASKFERRY_DISABLE_SANDBOX=1") {
        char *a = dispatch_rate_limited(w, "prov/a", "3");
        json_object *o = tf_wait_settled(w, a);
        ck_assert_str_eq(tf_jstr(o, "status"), "crashed");
        ck_assert_str_eq(tf_jstr(o, "failureReason"), "shell_rate_limited");
        json_object_put(o);
        uint64_t a_end = ended_ms(w, a);
        char *b = dispatch_shell(w, "prov/b", "date +%s%3N");
        char *c = dispatch_shell(w, "other/c", "date +%s%3N");
        json_object *st = tf_status_rpc(w, b);
        if (streq_ptr(json_get_string(st, "status"), "queued")) {
                assert_reason(st, "cooling down");
                ck_assert_ptr_nonnull(json_get_string(st, "cooldownUntil"));
        }
        json_object_put(st);
        json_object *cd = cooldowns_of_list(w);
        if (cd && json_object_array_length(cd) > 0) {
                json_object *e = json_object_array_get_idx(cd, 0);
                ck_assert_str_eq(json_get_string(e, "provider"), "prov");
                ck_assert_str_eq(json_get_string(e, "taskId"), a);
                ck_assert_str_eq(json_get_string(e, "reason"), "shell_rate_limited");
        }
        json_object_put(cd);
        uint64_t sc = started_ms(w, c), sb = started_ms(w, b);
        ck_assert_msg(sb >= a_end + 3000, "prov's next task started %" PRId64 " ms after the 429", (int64_t) (sb - a_end));
        ck_assert_msg(sc < sb, "the other provider's task waited for prov's cooldown");
        /* once it is over, list shows none */
        cd = cooldowns_of_list(w);
        ck_assert_ptr_null(cd);
        free(a), free(b), free(c);
}
END_TEST

/* The cooldown is visible while it lasts, capped at an hour however long
 * the worker asks for, and TASKFERRY_PROVIDER_COOLDOWN=0 turns it off. */
START_TEST(cooldown_capped_and_switch) {
        char *extra[] = {(char *) "TASKFERRY_DISABLE_SANDBOX=1", NULL};
        tf_world *w = tf_world_new(extra);
        char *a = dispatch_rate_limited(w, "prov/a", "99999999");
        json_object_put(tf_wait_settled(w, a));
        json_object *cd = cooldowns_of_list(w);
        ck_assert_ptr_nonnull(cd);
        ck_assert_uint_eq(json_object_array_length(cd), 1);
        int64_t left = 0;
        ck_assert(json_get_int64(json_object_array_get_idx(cd, 0), "remainingMs", &left));
        ck_assert_int_le(left, 3600 * 1000);
        ck_assert_int_gt(left, 3000 * 1000);
        json_object_put(cd);
        const char *l[] = {"list", NULL};
        tf_run r = tf_cli(w, NULL, NULL, l);
        ck_assert_msg(strstr(r.out, "cooldowns") && strstr(r.out, "prov"), "%s", r.out);
        tf_run_done(&r);
        /* doctor --stats shows it too */
        const char *ds[] = {"doctor", "--stats", "--json", NULL};
        r = tf_cli(w, NULL, NULL, ds);
        json_object *so = tf_json(r.out);
        json_object *scd = json_get_array(so, "cooldowns");
        ck_assert_msg(scd && json_object_array_length(scd) == 1 &&
                              streq_ptr(json_get_string(json_object_array_get_idx(scd, 0), "provider"), "prov"),
                      "%s", r.out);
        json_object_put(so);
        tf_run_done(&r);
        char *b = dispatch_shell(w, "prov/b", "true");
        usleep(500 * 1000);
        json_object *st = tf_status_rpc(w, b);
        ck_assert_str_eq(json_get_string(st, "status"), "queued");
        assert_reason(st, "cooling down");
        json_object_put(st);
        const char *cn[] = {"cancel", b, NULL};
        r = tf_cli(w, NULL, NULL, cn);
        ck_assert_int_eq(r.exit_code, 0);
        tf_run_done(&r);
        free(a), free(b);
        tf_world_free(w);

        char *off[] = {(char *) "TASKFERRY_DISABLE_SANDBOX=1", (char *) "TASKFERRY_PROVIDER_COOLDOWN=0", NULL};
        w = tf_world_new(off);
        a = dispatch_rate_limited(w, "prov/a", "600");
        json_object *o = tf_wait_settled(w, a);
        ck_assert_str_eq(tf_jstr(o, "failureReason"), "shell_rate_limited");
        json_object_put(o);
        ck_assert_ptr_null(cooldowns_of_list(w));
        b = dispatch_shell(w, "prov/b", "date +%s%3N");
        ck_assert_uint_lt(started_ms(w, b), ended_ms(w, a) + 600 * 1000);
        free(a), free(b);
        tf_world_free(w);
}
END_TEST

/* Attack: a worker dispatches a nested task on another provider that
 * prints a rate limit with a long Retry-After, to park the user's provider.
 * A task dispatched from inside a sandbox parks nothing. */
TF_WORLD_TEST(nested_task_cannot_park_a_provider) {
        char *repo = tf_repo_new(w, NULL, NULL);
        char *script = strdup_printf(
                "c=$(taskferry dispatch --executor shell --model victim/x --prompt "
                "\"echo 'rate limit exceeded; Retry-After: 3600' >&2; exit 1\" | sed -n 's/^id: //p'); "
                "taskferry wait $c >/dev/null; echo child=$c");
        char *id = tf_worker_settled(w, "shell", "attacker/x", repo, NULL, script, NULL);
        char *msg = tf_task_message(w, id);
        ck_assert_msg(strstr(msg, "child=oc_"), "nested dispatch failed: %s", msg);
        char *cid = tf_value_after(msg, "child=");
        json_object *o = tf_wait_settled(w, cid);
        ck_assert_str_eq(tf_jstr(o, "failureReason"), "shell_rate_limited");
        json_object_put(o);
        ck_assert_ptr_null(cooldowns_of_list(w));
        char *v = dispatch_shell(w, "victim/y", "true");
        usleep(300 * 1000);
        json_object *st = tf_status_rpc(w, v);
        ck_assert_ptr_null(json_get_string(st, "cooldownUntil"));
        json_object_put(st);
        o = tf_wait_settled(w, v);
        ck_assert_str_eq(tf_jstr(o, "status"), "done");
        json_object_put(o);
        free(v), free(cid), free(msg), free(id), free(script), free(repo);
}
END_TEST

int main(void) {
        return tf_run_tests("scheduler", "scheduler", 300,
                            TF_TESTS(concurrency_cap, failed_spawn_frees_one_slot, launch_window, lowerdir_stagger,
                                     provider_limits, provider_window, malformed_provider_limits_refuse_start,
                                     round_robin_and_queue_position, cancel_while_queued, cooldown_after_retry_after,
                                     cooldown_capped_and_switch, nested_task_cannot_park_a_provider));
}
