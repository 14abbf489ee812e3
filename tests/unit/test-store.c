/* store.c: tasks.json and tasks.journal loaded and written (store.h): a
 * missing file is an empty store, a malformed one is kept and never
 * overwritten, a failed write is an error, the streamed text is json-c's;
 * changes go to the journal (tasks.json untouched), a removal leaves a
 * tombstone, a restart gets every committed change back, a torn or damaged
 * journal is reported and replaced by a fresh pair, the journal past its
 * threshold is compacted; and, with the lifecycle's coldplug after the load,
 * queued tasks are queued again. */

#include <check.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon-fixture.h"
#include "daemon.h"
#include "core/store.h"
#include "json-util.h"
#include "unit.h"
#include "fileio.h"
#include "fs-util.h"
#include "macro.h"
#include "string-util.h"

static Manager m;
static char *dir;

static void setup(void) {
        m = (Manager) {0};
        ck_assert_int_ge(sd_event_new(&m.event), 0);
        dir = m.paths.state_dir = tf_tmpdir_new("test-store");
        ck_assert_int_eq(task_table_init(&m), 0);
        ck_assert_int_eq(store_init(&m), 0);
}

/* the dir removed with it, also when a case left it read-only */
static void teardown(void) { tf_manager_teardown(&m); }

static char *tasks_path(void) { return strdup_printf("%s/tasks.json", dir); }

static void write_tasks(const char *s) {
        char *p = tasks_path();
        ck_assert_int_eq(write_file_atomic(p, s, strlen(s), 0600), 0);
        free(p);
}

static char *read_tasks(void) {
        char *p = tasks_path(), *data = NULL;
        size_t len = 0;
        ck_assert_int_ge(read_file(p, 1 << 20, &data, &len), 0);
        free(p);
        return data;
}

/* What the daemon does at start: the store's load, then the lifecycle's
 * coldplug of what was loaded (run/lifecycle.h). */
static int load_and_coldplug(void) {
        int r = manager_load_tasks(&m);
        if (r >= 0) task_coldplug(&m);
        return r;
}

/* A task whose record holds only its id, appended to the table. */
static Task *task_with_id(const char *id) {
        json_object *o = json_object_new_object();
        ck_assert_int_eq(json_add_string(o, "id", id), 0);
        return task_table_add_json(&m, o);
}

/* the daemon's own tasks.json formatting */
static char *pretty(const char *s) {
        json_object *o = NULL;
        ck_assert_int_eq(json_parse_strict(s, strlen(s), &o), 0);
        char *out = strdup(json_object_to_json_string_ext(
                o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
        return out;
}

START_TEST(missing_file_is_an_empty_store) {
        ck_assert_int_eq(manager_load_tasks(&m), 0);
        ck_assert_uint_eq(m.n_tasks, 0);
        ck_assert_ptr_null(m.store.load_error);
        ck_assert_int_eq(manager_flush(&m), 0);
        char *s = read_tasks();
        json_object *o = NULL;
        ck_assert_int_eq(json_parse_strict(s, strlen(s), &o), 0);
        ck_assert(json_object_is_type(o, json_type_array));
        ck_assert_uint_eq(json_object_array_length(o), 0);
        json_object_put(o);
        free(s);
        struct stat st;
        char *p = tasks_path();
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0600);
        free(p);
}
END_TEST

START_TEST(load_store_round_trip) {
        const char *in =
                "[{\"id\":\"oc_a\",\"directory\":\"/w\",\"status\":\"done\",\"newer\":[1,{\"x\":null}],\"pid\":3,"
                "\"changesetStatus\":\"accepted\",\"overlayDirs\":null,\"endedAt\":\"2026-01-01T00:00:00.000Z\"},"
                "{\"id\":\"oc_s\",\"logPath\":\"/l\",\"summaryOf\":{\"maxWords\":5},\"status\":\"crashed\",\"internal\":true}]";
        char *want = pretty(in);
        write_tasks(want);
        ck_assert_int_eq(manager_load_tasks(&m), 0);
        ck_assert_uint_eq(m.n_tasks, 2);
        ck_assert_int_eq(m.tasks[0]->rec.status, TASK_DONE);
        ck_assert_int_eq(m.tasks[1]->rec.status, TASK_CRASHED);
        /* load normalization: a missing executorId becomes "opencode", appended */
        ck_assert_str_eq(m.tasks[0]->rec.executor_id, "opencode");
        m.store.dirty = true;
        ck_assert_int_eq(manager_flush(&m), 0);
        ck_assert(!m.store.dirty);
        char *got = read_tasks();
        const char *in2 =
                "[{\"id\":\"oc_a\",\"directory\":\"/w\",\"status\":\"done\",\"newer\":[1,{\"x\":null}],\"pid\":3,"
                "\"changesetStatus\":\"accepted\",\"overlayDirs\":null,\"endedAt\":\"2026-01-01T00:00:00.000Z\","
                "\"executorId\":\"opencode\"},"
                "{\"id\":\"oc_s\",\"logPath\":\"/l\",\"summaryOf\":{\"maxWords\":5},\"status\":\"crashed\",\"internal\":true,"
                "\"executorId\":\"opencode\"}]";
        char *want2 = pretty(in2);
        ck_assert_str_eq(got, want2);
        free(got);
        free(want);
        free(want2);
}
END_TEST

START_TEST(malformed_file_is_kept_and_never_overwritten) {
        write_tasks("{\"not\": \"an array\"}");
        ck_assert_int_eq(manager_load_tasks(&m), 0);
        ck_assert_ptr_nonnull(m.store.load_error);
        ck_assert_ptr_nonnull(strstr(m.store.load_error, "not a JSON array"));
        m.store.dirty = true;
        ck_assert_int_eq(manager_flush(&m), -EIO);
        char *s = read_tasks();
        ck_assert_str_eq(s, "{\"not\": \"an array\"}");
        free(s);
        free(m.store.load_error);
        m.store.load_error = NULL;
        write_tasks("[{\"id\":\"oc_a\"},");
        ck_assert_int_eq(manager_load_tasks(&m), 0);
        ck_assert_ptr_nonnull(m.store.load_error);
}
END_TEST

START_TEST(failed_write_is_an_error) {
        ck_assert_int_eq(manager_load_tasks(&m), 0);
        /* a rename over a non-empty directory fails for root too */
        char *p = tasks_path(), *q = strdup_printf("%s/keep", p);
        ck_assert_int_eq(mkdir(p, 0700), 0);
        ck_assert_int_eq(mkdir(q, 0700), 0);
        m.store.dirty = true;
        int r = manager_flush(&m);
        ck_assert_int_lt(r, 0);
        ck_assert(m.store.dirty); /* still to be written */
        ck_assert_int_eq(rmdir(q), 0);
        ck_assert_int_eq(rmdir(p), 0);
        if (geteuid() != 0) {
                /* a read-only state dir (root ignores the mode) */
                ck_assert_int_eq(chmod(dir, 0500), 0);
                ck_assert_int_eq(manager_flush(&m), -EACCES);
                ck_assert(m.store.dirty);
                ck_assert_int_eq(chmod(dir, 0700), 0);
        }
        ck_assert_int_eq(manager_flush(&m), 0);
        ck_assert(!m.store.dirty);
        free(p);
        free(q);
}
END_TEST

/* <state>/tasks/<id>/pending-launch.json (launch-options.h launch_request_*) */
static void write_launch_request(const char *id, const char *json) {
        char *d = strdup_printf("%s/tasks/%s", dir, id);
        ck_assert_int_eq(mkdir_p(d, 0700), 0);
        char *p = strdup_printf("%s/" LAUNCH_REQUEST_FILE, d);
        ck_assert_int_eq(write_file_atomic(p, json, strlen(json), 0600), 0);
        free(p), free(d);
}

/* Each queued task comes back with the launch options and caller env its
 * dispatch recorded; one without its launch request (oc_5) cannot run as
 * dispatched and crashes with a spawnError instead; a malformed one (oc_6)
 * likewise. */
START_TEST(queued_tasks_are_queued_again_in_order) {
        write_launch_request("oc_1", "{\"launch\":{\"noOverlay\":true,\"roBind\":[\"/srv\"]},\"env\":{\"K\":\"v1\"}}");
        write_launch_request("oc_3", "{\"launch\":{},\"env\":null}");
        write_launch_request("oc_6", "{\"env\":{}}");
        write_tasks("[{\"id\":\"oc_1\",\"status\":\"queued\",\"changesetStatus\":\"none\"},"
                    "{\"id\":\"oc_2\",\"status\":\"done\",\"changesetStatus\":\"none\"},"
                    "{\"id\":\"oc_3\",\"status\":\"queued\",\"changesetStatus\":\"none\"},"
                    "{\"id\":\"oc_4\",\"status\":\"cancelled\"},"
                    "{\"id\":\"oc_5\",\"status\":\"queued\"},"
                    "{\"id\":\"oc_6\",\"status\":\"queued\"}]");
        m.settings.max_concurrent_tasks = 0; /* nothing launches in this test */
        ck_assert_int_eq(load_and_coldplug(), 0);
        ck_assert_uint_eq(m.n_tasks, 6);
        const char *want[] = {"oc_1", "oc_3"};
        size_t n = 0;
        for (Task *t = m.scheduler.queue_head; t; t = t->next_queued) {
                ck_assert_uint_lt(n, ELEMENTSOF(want));
                ck_assert_str_eq(t->id, want[n++]);
                ck_assert_int_eq(t->rec.status, TASK_QUEUED);
        }
        ck_assert_uint_eq(n, ELEMENTSOF(want));
        ck_assert_int_eq(m.tasks[1]->rec.status, TASK_DONE);
        ck_assert_int_eq(m.tasks[3]->rec.status, TASK_CANCELLED);
        Task *t1 = m.tasks[0], *t3 = m.tasks[2];
        ck_assert(t1->launch.no_overlay);
        ck_assert_str_eq(t1->launch.ro_bind[0], "/srv");
        ck_assert_str_eq(strempty(json_get_string(t1->caller_env, "K")), "v1");
        ck_assert(!t3->launch.no_overlay && !t3->launch.ro_bind_given); /* loaded: an empty {} */
        ck_assert_ptr_null(t3->caller_env);
        for (size_t i = 4; i < 6; i++) {
                ck_assert_int_eq(m.tasks[i]->rec.status, TASK_CRASHED);
                ck_assert_ptr_nonnull(strstr(strempty(m.tasks[i]->rec.spawn_error), "dispatch it again"));
        }
}
END_TEST

/* manager_tasks_json prints the table one record at a time: byte for byte
 * what json-c prints for the whole array (and what tasks.json held). */
START_TEST(streamed_text_is_json_c_text) {
        const char *cases[] = {
                "[]",
                "[{\"id\":\"oc_a\",\"executorId\":\"opencode\"}]",
                "[{\"id\":\"oc_a\",\"executorId\":\"x\",\"directory\":\"/w/a b\\n\\\"q\\\"\",\"status\":\"done\",\"newer\":[1,{\"x\":null,\"y\":[]},{}],"
                "\"overlayDirs\":{\"upper\":\"/u\",\"deep\":{\"a\":[[{}]]}},\"summaryOf\":{},\"changesetWarnings\":[],\"pid\":3,"
                "\"internal\":true,\"exitCode\":-1,\"odd\":1.5e3,\"prompt\":\"line1\\nline2\\t\\u00e9/\"},"
                "{\"id\":\"oc_b\",\"status\":7,\"executorId\":\"pi\"},{\"id\":\"oc_c\",\"executorId\":\"pi\"}]",
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *want = pretty(cases[i]);
                write_tasks(want);
                ck_assert_int_eq(manager_load_tasks(&m), 0);
                ck_assert_ptr_null(m.store.load_error);
                char *got = NULL;
                size_t len = 0;
                ck_assert_int_eq(manager_tasks_json(&m, &got, &len), 0);
                ck_assert_uint_eq(len, strlen(got));
                ck_assert_str_eq(got, want);
                manager_tasks_json_free(got, len);
                free(want);
                for (size_t k = 0; k < m.n_tasks; k++) task_free(m.tasks[k]);
                m.n_tasks = 0;
        }
}
END_TEST

/* The file is parsed one record at a time: text that turns out malformed
 * after good records loads none of them; the first record of an id wins. */
START_TEST(streamed_load_is_all_or_nothing) {
        const char *bad[] = {
                "[{\"id\":\"oc_a\"},{\"id\":\"oc_b\"}",   "[{\"id\":\"oc_a\"},{\"id\":\"oc_b\"},]",
                "[{\"id\":\"oc_a\"} {\"id\":\"oc_b\"}]",  "[{\"id\":\"oc_a\"}] x",
                "[{\"id\":\"oc_a\"},{\"id\":\"\xff\"}]",   "",
                " ",                                        "[{\"id\":\"oc_a\"},1",
                /* what json-c takes and JSON.parse (the Node CLI's) does not:
                 * kept, it would be written back as no JSON at the next flush */
                "[{\"id\":\"oc_a\",\"x\":NaN}]",     "[{\"id\":\"oc_a\",\"note\":\"a\x1c\"}]",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                write_tasks(bad[i]);
                ck_assert_int_eq(manager_load_tasks(&m), 0);
                ck_assert_msg(m.store.load_error, "accepted: %s", bad[i]);
                ck_assert_uint_eq(m.n_tasks, 0);
                free(m.store.load_error);
                m.store.load_error = NULL;
        }
        write_tasks(" [ 1 , {\"id\":\"oc_a\",\"role\":\"first\"} ,\"x\",{\"id\":\"oc_a\",\"role\":\"second\"},{\"no\":1},"
                    "{\"id\":\"oc_b\"} ] \n");
        ck_assert_int_eq(manager_load_tasks(&m), 0);
        ck_assert_ptr_null(m.store.load_error);
        ck_assert_uint_eq(m.n_tasks, 2);
        ck_assert_str_eq(m.tasks[0]->id, "oc_a");
        ck_assert_str_eq(m.tasks[0]->rec.role, "first");
        ck_assert_str_eq(m.tasks[1]->id, "oc_b");
}
END_TEST

static int count_record(void *userdata, json_object *e) {
        size_t *n = userdata;
        (*n)++;
        json_object_put(e);
        return 0;
}

/* The reader alone, without a Manager: the verdict of json_parse_strict on
 * the whole text, the elements in order */
START_TEST(parse_records_is_strict_json) {
        static const char *const texts[] = {
                "[]", " [ ] ", "[1,\"x\",{\"id\":\"oc_a\"},[2]]", "[{\"id\":\"oc_a\"},]", "[1", "[1] [2]", "{}", "",
                "[\"\\u0000\"]", "[\"\xff\"]",
                /* json-c's extensions, which JSON.parse refuses */
                "[{\"id\":\"oc_a\",\"x\":NaN}]", "[{\"id\":\"oc_a\",\"x\":\"a\x1c\"}]", "[{'id':\"oc_a\"}]", "[1.]",
                "[{\"id\":\"oc_a\",\"x\":\"\xc0\xaf\"}]", "[{\"id\":\"oc_a\",\"x\":-Infinity}]",
        };
        for (size_t i = 0; i < ELEMENTSOF(texts); i++) {
                json_object *whole = NULL;
                bool ok = json_parse_strict(texts[i], strlen(texts[i]), &whole) == 0 && json_object_is_type(whole, json_type_array);
                size_t n = 0;
                int r = store_parse_records(texts[i], strlen(texts[i]), count_record, &n);
                ck_assert_msg((r == 0) == ok, "%s: %d", texts[i], r);
                if (ok) ck_assert_uint_eq(n, json_object_array_length(whole));
                else ck_assert_int_eq(r, -EBADMSG);
                json_object_put(whole);
        }
        /* nesting: 64 levels counting the array, like json_parse_strict */
        char deep[200] = "", *p = deep;
        for (int d = 0; d < 65; d++) *p++ = '[';
        for (int d = 0; d < 65; d++) *p++ = ']';
        size_t n = 0;
        ck_assert_int_eq(store_parse_records(deep, strlen(deep), count_record, &n), -EBADMSG);
        ck_assert_int_eq(store_parse_records(deep + 1, strlen(deep) - 2, count_record, &n), 0);
}
END_TEST

static void assert_file_is_full_text(void) {
        char *want = NULL;
        size_t len = 0;
        char *got = read_tasks();
        /* what the file holds vs the table printed from scratch (this resets the copy state) */
        ck_assert_int_eq(manager_tasks_json(&m, &want, &len), 0);
        ck_assert_str_eq(got, want);
        manager_tasks_json_free(want, len);
        free(got);
}

/* A compaction copies the text of records unchanged since the last one
 * from the file it wrote; every changed record is printed again, and a file
 * someone else replaced is never copied from. */
START_TEST(flush_copies_unchanged_records) {
        char *in = pretty("[{\"id\":\"oc_1\",\"status\":\"done\",\"executorId\":\"pi\",\"x\":[1]},"
                          "{\"id\":\"oc_2\",\"status\":\"running\",\"executorId\":\"pi\",\"changesetStatus\":\"none\"},"
                          "{\"id\":\"oc_3\",\"status\":\"crashed\",\"executorId\":\"pi\",\"model\":\"m\"}]");
        write_tasks(in);
        free(in);
        ck_assert_int_eq(load_and_coldplug(), 0); /* oc_2 becomes unknown: dirty */
        ck_assert_int_eq(manager_compact(&m), 0);
        char *first = read_tasks();
        ck_assert_ptr_nonnull(strstr(first, "\"unknown\""));
        /* copy path: one record changed, one appended, one removed */
        ck_assert_int_eq(task_set_str(m.tasks[2], TASK_KEY_model, "a much longer model name than before"), 0);
        ck_assert_int_eq(task_set_int(m.tasks[0], TASK_KEY_pid, 42), 0);
        Task *t = task_with_id("oc_4");
        ck_assert_ptr_nonnull(t);
        manager_remove_task(&m, m.tasks[1]);
        m.store.dirty = true;
        ck_assert_int_eq(manager_compact(&m), 0);
        char *second = read_tasks();
        ck_assert_ptr_nonnull(strstr(second, "a much longer model name"));
        ck_assert_ptr_nonnull(strstr(second, "\"pid\": 42"));
        ck_assert_ptr_null(strstr(second, "oc_2"));
        assert_file_is_full_text();
        /* nothing changed: a flush of copies only */
        m.store.dirty = true;
        ck_assert_int_eq(manager_compact(&m), 0);
        char *third = read_tasks();
        ck_assert_str_eq(third, second);
        /* replaced behind the daemon's back with text of the same length */
        char *other = strdup(third);
        for (char *p = other; *p; p++)
                if (*p == 'o' && p[1] == 'c') *p = 'x';
        write_tasks(other);
        ck_assert_int_eq(task_set_bool(m.tasks[1], TASK_KEY_internal, true), 0);
        m.store.dirty = true;
        ck_assert_int_eq(manager_compact(&m), 0);
        char *fourth = read_tasks();
        ck_assert_ptr_null(strstr(fourth, "xc_"));
        assert_file_is_full_text();
        free(first), free(second), free(third), free(other), free(fourth);
}
END_TEST


/* A daemon's restart on the same state dir: the table freed, the store
 * loaded again. */
static void restart(void) {
        for (size_t i = 0; i < m.n_tasks; i++) task_free(m.tasks[i]);
        m.n_tasks = 0;
        memset(m.status_counts, 0, sizeof m.status_counts);
        m.started_inversions = 0;
        store_done(&m);
        manager_free_task_observers(&m);
        ck_assert_int_eq(task_table_init(&m), 0);
        ck_assert_int_eq(store_init(&m), 0);
        ck_assert_int_eq(manager_load_tasks(&m), 0);
        ck_assert_ptr_null(m.store.load_error);
}

static char *journal_path(void) { return strdup_printf("%s/tasks.journal", dir); }

/* tasks.json with a record large enough that the state is past the size
 * written whole at every commit (store.c), then records (JSON text, "" for
 * none) after it */
static void write_large_tasks(const char *records) {
        char *pad = malloc(96 << 10);
        memset(pad, 'p', (96 << 10) - 1);
        pad[(96 << 10) - 1] = 0;
        char *raw = strdup_printf("[{\"id\":\"oc_ballast\",\"status\":\"done\",\"executorId\":\"pi\",\"notes\":\"%s\"}%s%s]", pad,
                                  *records ? "," : "", records);
        char *in = pretty(raw);
        write_tasks(in);
        free(in), free(raw), free(pad);
}

static off_t size_of(const char *p) {
        struct stat st;
        return stat(p, &st) == 0 ? st.st_size : -1;
}

/* Changes are journal records: tasks.json is not rewritten for them, and a
 * restart gets them back, in table order, a removed task's tombstone
 * included. */
START_TEST(changes_go_to_the_journal) {
        write_large_tasks("{\"id\":\"oc_1\",\"status\":\"done\",\"executorId\":\"pi\"},"
                          "{\"id\":\"oc_2\",\"status\":\"done\",\"executorId\":\"pi\"},"
                          "{\"id\":\"oc_3\",\"status\":\"done\",\"executorId\":\"pi\"}");
        ck_assert_int_eq(manager_load_tasks(&m), 0);
        ck_assert(m.store.dirty); /* no journal follows it yet: a fresh pair is owed */
        ck_assert_int_eq(manager_flush(&m), 0);
        char *snap = read_tasks(), *jp = journal_path();
        off_t j0 = size_of(jp);
        ck_assert_int_gt(j0, 0);
        ck_assert_int_eq(task_set_str(m.tasks[2], TASK_KEY_model, "changed"), 0);
        ck_assert(m.tasks[2]->store_pending && m.store.dirty);
        Task *t = task_with_id("oc_4");
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(manager_flush(&m), 0);
        ck_assert(!m.store.dirty && !t->store_pending && t->store_durable);
        off_t j1 = size_of(jp);
        ck_assert_int_gt(j1, j0);
        manager_remove_task(&m, m.tasks[1]);
        ck_assert_uint_eq(m.store.n_tombstones, 1);
        ck_assert_int_eq(manager_flush(&m), 0);
        /* tasks.json as it was */
        char *now = read_tasks();
        ck_assert_str_eq(now, snap);
        /* a record per change: each a line, about one record's size */
        ck_assert_int_lt(size_of(jp) - j0, 1024);
        restart();
        ck_assert_uint_eq(m.n_tasks, 4);
        ck_assert_str_eq(m.tasks[0]->id, "oc_ballast");
        ck_assert_str_eq(m.tasks[1]->id, "oc_2");
        ck_assert_str_eq(m.tasks[1]->rec.model, "changed");
        ck_assert_str_eq(m.tasks[2]->id, "oc_3");
        ck_assert_str_eq(m.tasks[3]->id, "oc_4");
        ck_assert_ptr_null(store_journal_note(&m));
        ck_assert(!m.store.dirty); /* the journal followed: nothing owed */
        /* the durable view a reader of the state dir gets is the same */
        json_object *arr = tf_durable_tasks(dir);
        ck_assert_uint_eq(json_object_array_length(arr), 4);
        ck_assert_str_eq(json_get_string(json_object_array_get_idx(arr, 1), "model"), "changed");
        json_object_put(arr);
        /* a compaction: tasks.json whole again, the journal empty again */
        ck_assert_int_eq(manager_compact(&m), 0);
        char *after = read_tasks();
        ck_assert_ptr_nonnull(strstr(after, "\"model\": \"changed\""));
        ck_assert_ptr_null(strstr(after, "oc_1"));
        ck_assert_int_lt(size_of(jp), 128); /* its header alone */
        restart();
        ck_assert_uint_eq(m.n_tasks, 4);
        free(snap), free(now), free(after), free(jp);
}
END_TEST

/* A journal cut short by a crash loads what is valid, says so, and the
 * first flush writes a fresh journal carrying it (tasks.json is not
 * rewritten); a damaged record stops the replay there and the damaged
 * journal is kept beside it. Neither is fatal. */
START_TEST(torn_and_damaged_journals_are_reported) {
        write_large_tasks("");
        ck_assert_int_eq(manager_load_tasks(&m), 0);
        ck_assert_int_eq(manager_flush(&m), 0);
        task_with_id("oc_a");
        ck_assert_int_eq(manager_flush(&m), 0);
        task_with_id("oc_b");
        ck_assert_int_eq(manager_flush(&m), 0);
        char *jp = journal_path();
        off_t full = size_of(jp);
        /* torn: the last record half there */
        ck_assert_int_eq(truncate(jp, full - 7), 0);
        restart();
        ck_assert_uint_eq(m.n_tasks, 2);
        ck_assert_str_eq(m.tasks[1]->id, "oc_a");
        ck_assert_ptr_nonnull(strstr(strempty(store_journal_note(&m)), "torn tail"));
        ck_assert(m.store.dirty);
        char *snap = read_tasks();
        uint64_t compactions = m.store.compactions;
        ck_assert_int_eq(manager_flush(&m), 0); /* a fresh journal; what the start found is still said */
        ck_assert_ptr_nonnull(store_journal_note(&m));
        ck_assert_uint_eq(m.store.compactions, compactions);
        char *s = read_tasks();
        ck_assert_str_eq(s, snap);
        free(s), free(snap);
        ck_assert_int_lt(size_of(jp), full - 7);
        restart();
        ck_assert_uint_eq(m.n_tasks, 2);
        ck_assert_str_eq(m.tasks[1]->id, "oc_a");
        ck_assert_ptr_null(store_journal_note(&m)); /* clean now */
        /* damaged in the middle */
        task_with_id("oc_c");
        ck_assert_int_eq(manager_flush(&m), 0);
        task_with_id("oc_d");
        ck_assert_int_eq(manager_flush(&m), 0);
        char *text = NULL;
        size_t len = 0;
        ck_assert_int_ge(read_file(jp, 1 << 20, &text, &len), 0);
        char *rec = strstr(text, "oc_c");
        ck_assert_ptr_nonnull(rec);
        rec[1] = 'X';
        ck_assert_int_eq(write_file_atomic(jp, text, len, 0600), 0);
        restart();
        ck_assert_uint_eq(m.n_tasks, 2); /* oc_c damaged, oc_d after it */
        ck_assert_ptr_nonnull(strstr(strempty(store_journal_note(&m)), "damaged record"));
        ck_assert_int_eq(manager_flush(&m), 0);
        char *dp = strdup_printf("%s/tasks.journal.damaged", dir), *kept = NULL;
        ck_assert_int_ge(read_file(dp, 1 << 20, &kept, NULL), 0);
        ck_assert_str_eq(kept, text);
        free(text), free(kept), free(dp), free(jp);
}
END_TEST

/* Past its threshold the journal is compacted at idle priority, in the
 * loop, not by the flush that crossed it. */
START_TEST(threshold_compaction_runs_when_idle) {
        write_large_tasks("");
        ck_assert_int_eq(manager_load_tasks(&m), 0);
        ck_assert_int_eq(manager_flush(&m), 0);
        Task *t = task_with_id("oc_big");
        char *big = malloc(64 << 10);
        memset(big, 'x', (64 << 10) - 1);
        big[(64 << 10) - 1] = 0;
        uint64_t before;
        ck_assert_int_eq(manager_flush(&m), 0);
        before = m.store.compactions; /* (the first flush wrote the new task whole: the state was small) */
        for (int i = 0; i < 20 && !m.store.compact_source; i++) {
                big[i] = 'y';
                ck_assert_int_eq(task_set_str(t, TASK_KEY_model, big), 0);
                ck_assert_int_eq(manager_flush(&m), 0);
        }
        ck_assert_ptr_nonnull(m.store.compact_source);
        ck_assert_uint_eq(m.store.compactions, before);
        while (m.store.compact_source) ck_assert_int_ge(sd_event_run(m.event, 0), 0);
        ck_assert_uint_eq(m.store.compactions, before + 1);
        char *jp = journal_path();
        ck_assert_int_lt(size_of(jp), 4096);
        char *s = read_tasks();
        ck_assert_ptr_nonnull(strstr(s, big));
        free(s), free(jp), free(big);
}
END_TEST

/* A small state is written whole by every flush a caller asks for:
 * tasks.json is current for whoever reads it alone at those points; the
 * loop's own commit appends. */
START_TEST(small_state_is_written_whole) {
        write_tasks("[]");
        ck_assert_int_eq(manager_load_tasks(&m), 0);
        ck_assert_int_eq(manager_flush(&m), 0);
        Task *t = task_with_id("oc_small");
        ck_assert_int_eq(manager_flush(&m), 0);
        char *s = read_tasks();
        ck_assert_ptr_nonnull(strstr(s, "oc_small"));
        free(s);
        ck_assert_int_eq(task_set_str(t, TASK_KEY_model, "now"), 0);
        ck_assert_int_eq(manager_flush(&m), 0);
        s = read_tasks();
        ck_assert_ptr_nonnull(strstr(s, "\"model\": \"now\""));
        free(s);
        char *jp = journal_path();
        off_t header = size_of(jp);
        ck_assert_int_lt(header, 128); /* its header alone */
        /* the loop's commit, once nothing else is due: the journal */
        ck_assert_int_eq(task_set_str(t, TASK_KEY_model, "later"), 0);
        while (m.store.dirty) ck_assert_int_ge(sd_event_run(m.event, UINT64_MAX), 0);
        ck_assert_int_gt(size_of(jp), header);
        s = read_tasks();
        ck_assert_ptr_null(strstr(s, "later"));
        free(s);
        restart();
        ck_assert_str_eq(m.tasks[0]->rec.model, "later");
        free(jp);
}
END_TEST

/* tasks.json replaced behind a running daemon (a restore, another program):
 * appending to a journal that no longer follows it would be lost at the next
 * start, so the next commit writes both anew from memory; and one that
 * cannot be written (a directory there) is an error, the changes kept. */
START_TEST(replaced_snapshot_is_written_anew) {
        write_large_tasks("{\"id\":\"oc_1\",\"status\":\"done\",\"executorId\":\"pi\"}");
        ck_assert_int_eq(manager_load_tasks(&m), 0);
        ck_assert_int_eq(manager_flush(&m), 0);
        write_large_tasks("{\"id\":\"oc_other\",\"status\":\"done\",\"executorId\":\"pi\"}");
        ck_assert_int_eq(task_set_str(m.tasks[1], TASK_KEY_model, "kept"), 0);
        ck_assert_int_eq(manager_flush(&m), 0);
        char *s = read_tasks();
        ck_assert_ptr_nonnull(strstr(s, "\"model\": \"kept\""));
        ck_assert_ptr_null(strstr(s, "oc_other"));
        free(s);
        restart();
        ck_assert_str_eq(m.tasks[1]->rec.model, "kept");
        /* a directory where tasks.json was: the commit fails, nothing lost */
        char *p = tasks_path(), *q = strdup_printf("%s/keep", p);
        ck_assert_int_eq(unlink(p), 0);
        ck_assert_int_eq(mkdir(p, 0700), 0);
        ck_assert_int_eq(mkdir(q, 0700), 0);
        ck_assert_int_eq(task_set_str(m.tasks[1], TASK_KEY_model, "later"), 0);
        ck_assert_int_lt(manager_flush(&m), 0);
        ck_assert(m.store.dirty);
        ck_assert_int_eq(rmdir(q), 0);
        ck_assert_int_eq(rmdir(p), 0);
        ck_assert_int_eq(manager_flush(&m), 0);
        restart();
        ck_assert_str_eq(m.tasks[1]->rec.model, "later");
        free(p), free(q);
}
END_TEST

/* At shutdown tasks.json is made whole again, but only where the journal
 * holds records after it: a daemon that changed nothing writes nothing.
 * A change waits at most 250 ms for its commit. */
START_TEST(shutdown_compacts_only_a_journal_with_records) {
        write_large_tasks("{\"id\":\"oc_1\",\"status\":\"done\",\"executorId\":\"pi\"}");
        ck_assert_int_eq(manager_load_tasks(&m), 0);
        ck_assert_int_eq(manager_flush(&m), 0); /* the journal that follows it */
        restart();
        uint64_t c = m.store.compactions;
        ck_assert_int_eq(manager_flush_final(&m), 0);
        ck_assert_uint_eq(m.store.compactions, c);
        ck_assert_int_eq(task_set_str(m.tasks[1], TASK_KEY_model, "x"), 0);
        ck_assert_ptr_nonnull(m.store.deadline_timer);
        ck_assert_int_eq(manager_flush(&m), 0);
        ck_assert_ptr_null(m.store.deadline_timer);
        ck_assert_uint_eq(m.store.journal.n_records, 1);
        ck_assert_int_eq(manager_flush_final(&m), 0);
        ck_assert_uint_eq(m.store.compactions, c + 1);
        char *s = read_tasks(), *jp = journal_path();
        ck_assert_ptr_nonnull(strstr(s, "\"model\": \"x\""));
        ck_assert_int_lt(size_of(jp), 128);
        free(s), free(jp);
}
END_TEST

TF_MAIN("store", "store", setup, teardown, 0, missing_file_is_an_empty_store, load_store_round_trip,
        malformed_file_is_kept_and_never_overwritten, failed_write_is_an_error, queued_tasks_are_queued_again_in_order,
        streamed_text_is_json_c_text, streamed_load_is_all_or_nothing, parse_records_is_strict_json, flush_copies_unchanged_records,
        changes_go_to_the_journal, torn_and_damaged_journals_are_reported, threshold_compaction_runs_when_idle,
        small_state_is_written_whole, replaced_snapshot_is_written_anew, shutdown_compacts_only_a_journal_with_records)
