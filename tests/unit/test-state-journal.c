/* state-journal.c: the line format and its checks (CRC-32C), append and
 * group commit (one fdatasync per commit, nothing on disk before it, a failed
 * commit leaves nothing), a torn tail cut, a damaged record in the middle
 * stopping the replay, a stale journal ignored, compaction with appends
 * racing it, a crash or a failure at every step of a compaction, and
 * snapshot + journal giving back the same records through any mix of
 * appends and compactions.
 *
 * The records here are a toy table (payload "<key> <value>", tombstone
 * "<key>"; the snapshot one "<key> <value>" line each, sorted): the module
 * does not know what a task is. */

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "state-journal.h"
#include "string-util.h"
#include "unit.h"

static char *dir;
static int dir_fd = -1;

static void setup(void) {
        dir = tf_tmpdir_new("state-journal");
        dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dir_fd, 0);
        state_journal_fault_hook = NULL;
}

static void teardown(void) {
        state_journal_fault_hook = NULL;
        dir_fd = safe_close(dir_fd);
        dir = tf_tmpdir_free(dir);
}

/* ---- the toy table ---- */

#define KEYS 16

typedef struct Table {
        char *v[KEYS]; /* NULL: no such key */
} Table;

static void table_done(Table *t) {
        for (int i = 0; i < KEYS; i++) free(TAKE_PTR(t->v[i]));
}

static void table_set(Table *t, int k, const char *v) {
        free(t->v[k]);
        t->v[k] = v ? strdup(v) : NULL;
}

static void table_copy(Table *dst, const Table *src) {
        table_done(dst);
        for (int i = 0; i < KEYS; i++) table_set(dst, i, src->v[i]);
}

/* the canonical text: the snapshot's */
static char *table_text(const Table *t) {
        char *s = strdup("");
        for (int i = 0; i < KEYS; i++)
                if (t->v[i]) {
                        char *n = strdup_printf("%s%02d %s\n", s, i, t->v[i]);
                        free(s);
                        s = n;
                }
        return s;
}

static int apply(JournalKind kind, uint64_t seq, const char *payload, size_t len, void *userdata) {
        Table *t = userdata;
        if (len < 2 || payload[0] < '0' || payload[0] > '9' || payload[1] < '0' || payload[1] > '9') return -EBADMSG;
        int k = (payload[0] - '0') * 10 + (payload[1] - '0');
        if (k >= KEYS) return -EBADMSG;
        if (kind == JOURNAL_TOMBSTONE) {
                table_set(t, k, NULL);
                return 0;
        }
        if (len < 4 || payload[2] != ' ') return -EBADMSG;
        _cleanup_free_ char *v = strndup(payload + 3, len - 3);
        table_set(t, k, v);
        return 0;
}

/* tasks.json's bytes, and the table they hold */
static char *read_snapshot(size_t *len) {
        _cleanup_free_ char *p = tf_path(dir, STATE_SNAPSHOT_FILE);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                *len = 0;
                return strdup("");
        }
        struct stat st;
        ck_assert_int_eq(fstat(fd, &st), 0);
        char *s = calloc(1, (size_t) st.st_size + 1);
        ck_assert_int_eq(read(fd, s, (size_t) st.st_size), st.st_size);
        close(fd);
        *len = (size_t) st.st_size;
        return s;
}

static void parse_snapshot(const char *s, Table *t) {
        for (const char *p = s; *p;) {
                const char *nl = strchr(p, '\n');
                ck_assert_ptr_nonnull(nl);
                ck_assert_int_eq(apply(JOURNAL_TASK, 1, p, (size_t) (nl - p), t), 0);
                p = nl + 1;
        }
}

/* What a start after a crash sees: snapshot + the journal's valid prefix.
 * ld and j (opened to append after it; may be NULL) say how it went. */
static void load(Table *t, JournalLoad *ld, StateJournal *j) {
        table_done(t);
        size_t len;
        _cleanup_free_ char *snap = read_snapshot(&len);
        parse_snapshot(snap, t);
        JournalLoad l;
        ck_assert_int_eq(state_journal_load(dir_fd, len, crc32c(0, snap, len), apply, t, &l), 0);
        if (ld) *ld = l;
        if (j) {
                state_journal_done(j);
                *j = (StateJournal) STATE_JOURNAL_INIT;
                j->dir_fd = dir_fd;
                if (l.found && !l.from_next && l.scan.end == JOURNAL_END_CLEAN)
                        ck_assert_int_eq(state_journal_open(j, dir_fd, &l.scan), 0);
                else
                        j->next_seq = l.found ? l.scan.last_seq + 1 : 1;
        }
}

static void assert_same(const Table *a, const Table *b) {
        _cleanup_free_ char *x = table_text(a), *y = table_text(b);
        ck_assert_str_eq(x, y);
}

/* one change to the model and to the journal's buffer */
static void change(StateJournal *j, Table *model, int k, const char *v) {
        char payload[64];
        int n = v ? snprintf(payload, sizeof payload, "%02d %s", k, v) : snprintf(payload, sizeof payload, "%02d", k);
        ck_assert_int_eq(state_journal_append(j, v ? JOURNAL_TASK : JOURNAL_TOMBSTONE, payload, (size_t) n, NULL), 0);
        table_set(model, k, v);
}

/* a whole compaction of snapshot state s */
static int compact(StateJournal *j, const Table *s) {
        JournalCompaction c = JOURNAL_COMPACTION_INIT;
        int r = state_journal_compact_begin(j, &c);
        if (r < 0) return r;
        _cleanup_free_ char *text = table_text(s);
        r = state_journal_compact_write(&c, text, strlen(text));
        if (r < 0) {
                state_journal_compact_abort(&c);
                return r;
        }
        return state_journal_compact_finish(j, &c);
}

/* a fresh state dir: an empty snapshot and journal, j open on it */
static void fresh(StateJournal *j) {
        *j = (StateJournal) STATE_JOURNAL_INIT;
        j->dir_fd = dir_fd;
        Table empty = {0};
        ck_assert_int_eq(compact(j, &empty), 0);
        ck_assert(state_journal_usable(j));
}

static char *journal_text(size_t *len) {
        _cleanup_free_ char *p = tf_path(dir, STATE_JOURNAL_FILE);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        struct stat st;
        ck_assert_int_eq(fstat(fd, &st), 0);
        char *s = calloc(1, (size_t) st.st_size + 1);
        ck_assert_int_eq(read(fd, s, (size_t) st.st_size), st.st_size);
        close(fd);
        *len = (size_t) st.st_size;
        return s;
}

static char *dup_bytes(const char *s, size_t len) {
        char *d = malloc(len + 1);
        memcpy(d, s, len);
        d[len] = 0;
        return d;
}

static void journal_put(const char *text, size_t len) {
        _cleanup_free_ char *p = tf_path(dir, STATE_JOURNAL_FILE);
        int fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, len), (ssize_t) len);
        close(fd);
}

/* {1: a, 2: b} committed (at2 then), then {3: c} committed */
static void two_commits(StateJournal *j, Table *model, Table *at2) {
        change(j, model, 1, "a");
        change(j, model, 2, "b");
        ck_assert_int_eq(state_journal_commit(j), 0);
        table_copy(at2, model);
        change(j, model, 3, "c");
        ck_assert_int_eq(state_journal_commit(j), 0);
}

/* a state dir of its own below the case's (sub_leave goes back) */
static int saved_fd = -1;
static char *saved_dir;
static char *sub_enter(const char *fmt, const char *name, size_t i) {
        char *sub = strdup_printf(fmt, dir, name, i);
        ck_assert_int_eq(mkdir(sub, 0700), 0);
        saved_fd = dir_fd;
        saved_dir = dir;
        dir_fd = open(sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dir_fd, 0);
        dir = sub;
        return sub;
}

static void sub_leave(void) {
        close(dir_fd);
        free(dir);
        dir_fd = saved_fd;
        dir = saved_dir;
}

/* ---- the format ---- */

START_TEST(crc32c_vectors) {
        /* the check value of CRC-32C, and the empty string */
        ck_assert_uint_eq(crc32c(0, "123456789", 9), 0xE3069283U);
        ck_assert_uint_eq(crc32c(0, "", 0), 0);
        /* in pieces the same as whole, across every split of a longer text */
        char buf[200];
        for (size_t i = 0; i < sizeof buf; i++) buf[i] = (char) (i * 37 + 11);
        uint32_t whole = crc32c(0, buf, sizeof buf);
        for (size_t cut = 0; cut <= sizeof buf; cut += 7) ck_assert_uint_eq(crc32c(crc32c(0, buf, cut), buf + cut, sizeof buf - cut), whole);
}
END_TEST

START_TEST(line_format_and_checks) {
        char *b = NULL;
        size_t len = 0, cap = 0;
        ck_assert_int_eq(journal_format_line(&b, &len, &cap, JOURNAL_TASK, 42, "{\"a\":1}", 7), 0);
        /* kind, seq, length, payload, CRC of what precedes it */
        char want_head[] = "T 42 7 {\"a\":1}";
        ck_assert_uint_eq(len, strlen(want_head) + 10);
        ck_assert(!memcmp(b, want_head, strlen(want_head)));
        char crc[9];
        snprintf(crc, sizeof crc, "%08x", crc32c(0, want_head, strlen(want_head)));
        ck_assert(!memcmp(b + strlen(want_head) + 1, crc, 8));
        ck_assert_int_eq(b[len - 1], '\n');
        /* a payload with a newline cannot be a line */
        ck_assert_int_eq(journal_format_line(&b, &len, &cap, JOURNAL_TASK, 43, "a\nb", 3), -EINVAL);
        free(b);
        /* nor one longer than load accepts (nothing buffered) */
        StateJournal big = STATE_JOURNAL_INIT;
        char *huge = malloc(STATE_JOURNAL_LINE_MAX);
        memset(huge, 'x', STATE_JOURNAL_LINE_MAX);
        ck_assert_int_eq(state_journal_append(&big, JOURNAL_TASK, huge, STATE_JOURNAL_LINE_MAX, NULL), -E2BIG);
        ck_assert_uint_eq(big.len, 0);
        ck_assert_uint_eq(big.next_seq, 1);
        free(huge);
        state_journal_done(&big);

        /* every single-byte change of a valid journal's record is caught */
        StateJournal j;
        fresh(&j);
        Table model = {0};
        change(&j, &model, 1, "one");
        ck_assert_int_eq(state_journal_commit(&j), 0);
        size_t jl;
        _cleanup_free_ char *text = journal_text(&jl);
        const char *rec = strchr(text, '\n') + 1;
        size_t at = (size_t) (rec - text);
        for (size_t i = at; i < jl - 1; i++) {
                _cleanup_free_ char *bad = dup_bytes(text, jl);
                bad[i] ^= 0x20;
                JournalScan sc;
                size_t n = 0;
                ck_assert_int_eq(journal_scan(bad, jl, NULL, &n, &sc), 0);
                ck_assert_msg(sc.end == JOURNAL_END_TORN && sc.n_records == 0 && sc.valid_bytes == at,
                              "byte %zu changed: end %s, %zu records", i, journal_end_to_string(sc.end), sc.n_records);
        }
        /* a header that is damaged makes the whole journal unusable */
        _cleanup_free_ char *bad = dup_bytes(text, jl);
        bad[3] ^= 1;
        JournalScan sc;
        ck_assert_int_eq(journal_scan(bad, jl, NULL, NULL, &sc), 0);
        ck_assert_int_eq(sc.end, JOURNAL_END_NO_HEADER);
        ck_assert_uint_eq(sc.valid_bytes, 0);
        state_journal_done(&j);
        table_done(&model);
}
END_TEST

/* ---- append and group commit ---- */

static unsigned syncs, writes;
static int count_steps(JournalStep s) {
        if (s == JOURNAL_STEP_APPEND_SYNC) syncs++;
        if (s == JOURNAL_STEP_APPEND_WRITE) writes++;
        return 0;
}

START_TEST(append_and_group_commit) {
        StateJournal j;
        fresh(&j);
        Table model = {0}, got = {0};
        size_t before;
        free(journal_text(&before));
        /* three changes in one commit: nothing on disk before it, one write and
         * one fdatasync for all of them */
        change(&j, &model, 1, "a");
        change(&j, &model, 2, "b");
        change(&j, &model, 1, "c");
        size_t mid;
        free(journal_text(&mid));
        ck_assert_uint_eq(mid, before);
        syncs = writes = 0;
        state_journal_fault_hook = count_steps;
        ck_assert_int_eq(state_journal_commit(&j), 0);
        ck_assert_uint_eq(syncs, 1);
        ck_assert_uint_eq(writes, 1);
        /* an empty commit does nothing */
        ck_assert_int_eq(state_journal_commit(&j), 0);
        ck_assert_uint_eq(syncs, 1);
        state_journal_fault_hook = NULL;
        ck_assert_uint_eq(j.n_records, 3);
        ck_assert_uint_eq(j.next_seq, 4);
        JournalLoad ld;
        load(&got, &ld, NULL);
        ck_assert(ld.found && !ld.stale && !ld.from_next);
        ck_assert_int_eq(ld.scan.end, JOURNAL_END_CLEAN);
        ck_assert_uint_eq(ld.scan.n_records, 3);
        ck_assert_uint_eq(ld.scan.last_seq, 3);
        assert_same(&got, &model);
        /* a tombstone removes */
        change(&j, &model, 2, NULL);
        ck_assert_int_eq(state_journal_commit(&j), 0);
        load(&got, NULL, NULL);
        assert_same(&got, &model);
        ck_assert_ptr_null(got.v[2]);
        state_journal_done(&j);
        table_done(&model), table_done(&got);
}
END_TEST

static int fail_sync(JournalStep s) { return s == JOURNAL_STEP_APPEND_SYNC ? -EIO : 0; }

START_TEST(failed_commit_leaves_nothing) {
        StateJournal j;
        fresh(&j);
        Table model = {0}, got = {0};
        change(&j, &model, 1, "kept");
        ck_assert_int_eq(state_journal_commit(&j), 0);
        size_t good;
        free(journal_text(&good));
        /* the write made it, the fdatasync did not: cut back, numbers reused */
        Table lost = {0};
        table_copy(&lost, &model);
        change(&j, &lost, 2, "lost");
        state_journal_fault_hook = fail_sync;
        ck_assert_int_eq(state_journal_commit(&j), -EIO);
        state_journal_fault_hook = NULL;
        size_t now;
        free(journal_text(&now));
        ck_assert_uint_eq(now, good);
        ck_assert_uint_eq(j.next_seq, 2);
        ck_assert(state_journal_usable(&j));
        /* the caller appends it anew; the next commit follows the good prefix */
        change(&j, &model, 2, "again");
        ck_assert_int_eq(state_journal_commit(&j), 0);
        JournalLoad ld;
        load(&got, &ld, NULL);
        ck_assert_int_eq(ld.scan.end, JOURNAL_END_CLEAN);
        ck_assert_uint_eq(ld.scan.n_records, 2);
        assert_same(&got, &model);
        state_journal_done(&j);
        table_done(&model), table_done(&got), table_done(&lost);
}
END_TEST

/* ---- damage ---- */

START_TEST(torn_tail_is_cut) {
        StateJournal j;
        fresh(&j);
        Table model = {0}, got = {0}, at2 = {0};
        two_commits(&j, &model, &at2);
        size_t len;
        _cleanup_free_ char *text = journal_text(&len);
        size_t last = len - 1;
        while (text[last - 1] != '\n') last--;
        /* every cut inside the last record leaves the two before it */
        for (size_t cut = last + 1; cut < len; cut++) {
                journal_put(text, cut);
                JournalLoad ld;
                load(&got, &ld, NULL);
                ck_assert_msg(ld.scan.end == JOURNAL_END_TORN, "cut at %zu: %s", cut, journal_end_to_string(ld.scan.end));
                ck_assert_uint_eq(ld.scan.valid_bytes, last);
                ck_assert_uint_eq(ld.scan.n_records, 2);
                assert_same(&got, &at2);
        }
        /* what a crash on a delayed-allocation file system leaves: zeros */
        _cleanup_free_ char *zeros = calloc(1, len + 4096);
        memcpy(zeros, text, last);
        journal_put(zeros, last + 4096);
        JournalLoad ld;
        load(&got, &ld, NULL);
        ck_assert_int_eq(ld.scan.end, JOURNAL_END_TORN);
        assert_same(&got, &at2);
        /* the whole file back: all three */
        journal_put(text, len);
        load(&got, &ld, NULL);
        ck_assert_int_eq(ld.scan.end, JOURNAL_END_CLEAN);
        assert_same(&got, &model);
        state_journal_done(&j);
        table_done(&model), table_done(&got), table_done(&at2);
}
END_TEST

START_TEST(damaged_record_in_the_middle_stops_there) {
        StateJournal j;
        fresh(&j);
        Table model = {0}, got = {0}, at1 = {0};
        change(&j, &model, 1, "a");
        ck_assert_int_eq(state_journal_commit(&j), 0);
        table_copy(&at1, &model);
        change(&j, &model, 2, "b");
        change(&j, &model, 3, "c");
        change(&j, &model, 4, "d");
        ck_assert_int_eq(state_journal_commit(&j), 0);
        size_t len;
        _cleanup_free_ char *text = journal_text(&len);
        /* the second record's payload */
        char *r2 = strchr(strchr(text, '\n') + 1, '\n') + 1;
        size_t at = (size_t) (r2 - text);
        r2[6] ^= 1;
        journal_put(text, len);
        JournalLoad ld;
        load(&got, &ld, NULL);
        ck_assert_int_eq(ld.scan.end, JOURNAL_END_DAMAGED);
        ck_assert_uint_eq(ld.scan.valid_bytes, at);
        ck_assert_uint_eq(ld.scan.n_records, 1);
        ck_assert_uint_lt(ld.scan.valid_bytes, ld.scan.total_bytes);
        assert_same(&got, &at1);
        /* a record whose number does not grow is damaged as well */
        r2[6] ^= 1;
        char *r3 = strchr(r2, '\n') + 1;
        char *line = NULL;
        size_t ll = 0, lc = 0;
        ck_assert_int_eq(journal_format_line(&line, &ll, &lc, JOURNAL_TASK, 1, "03 c", 4), 0);
        _cleanup_free_ char *spliced = strdup_printf("%.*s%.*s%s", (int) (r3 - text), text, (int) ll, line, strchr(r3, '\n') + 1);
        ll = 0;
        journal_put(spliced, strlen(spliced));
        load(&got, &ld, NULL);
        ck_assert_int_eq(ld.scan.end, JOURNAL_END_DAMAGED);
        ck_assert_uint_eq(ld.scan.n_records, 2);
        /* a record the consumer cannot read (valid line, payload it refuses:
         * the callback's -EBADMSG) stops the replay too */
        ck_assert_int_eq(journal_format_line(&line, &ll, &lc, JOURNAL_TASK, 3, "99 no such key", 14), 0);
        _cleanup_free_ char *refused = strdup_printf("%.*s%.*s%s", (int) (r3 - text), text, (int) ll, line, strchr(r3, '\n') + 1);
        free(line);
        journal_put(refused, strlen(refused));
        load(&got, &ld, NULL);
        ck_assert_int_eq(ld.scan.end, JOURNAL_END_DAMAGED);
        ck_assert_uint_eq(ld.scan.n_records, 2);
        ck_assert_str_eq(got.v[2], "b");
        ck_assert_ptr_null(got.v[3]);
        state_journal_done(&j);
        table_done(&model), table_done(&got), table_done(&at1);
}
END_TEST

START_TEST(stale_journal_is_ignored) {
        StateJournal j;
        fresh(&j);
        Table model = {0}, got = {0};
        change(&j, &model, 1, "a");
        ck_assert_int_eq(state_journal_commit(&j), 0);
        /* tasks.json replaced by something else (a restore, another program) */
        free(tf_put(dir, STATE_SNAPSHOT_FILE, "05 other\n", 9));
        JournalLoad ld;
        load(&got, &ld, NULL);
        ck_assert(!ld.found && ld.stale);
        ck_assert_uint_gt(ld.stale_bytes, 0);
        ck_assert_ptr_null(got.v[1]);
        ck_assert_str_eq(got.v[5], "other");
        /* no journal at all: the snapshot alone */
        _cleanup_free_ char *jp = tf_path(dir, STATE_JOURNAL_FILE);
        ck_assert_int_eq(unlink(jp), 0);
        load(&got, &ld, NULL);
        ck_assert(!ld.found && !ld.stale);
        ck_assert_str_eq(got.v[5], "other");
        state_journal_done(&j);
        table_done(&model), table_done(&got);
}
END_TEST

/* ---- compaction ---- */

START_TEST(compaction_racing_appends) {
        StateJournal j;
        fresh(&j);
        Table model = {0}, got = {0}, snap = {0};
        change(&j, &model, 1, "a");
        change(&j, &model, 2, "b");
        ck_assert_int_eq(state_journal_commit(&j), 0);
        /* the snapshot is of the state now ... */
        JournalCompaction c = JOURNAL_COMPACTION_INIT;
        ck_assert_int_eq(state_journal_compact_begin(&j, &c), 0);
        ck_assert_uint_eq(c.base_seq, 2);
        table_copy(&snap, &model);
        _cleanup_free_ char *text = table_text(&snap);
        /* ... while changes go on being committed, before and after its text */
        change(&j, &model, 3, "c");
        ck_assert_int_eq(state_journal_commit(&j), 0);
        ck_assert_int_eq(state_journal_compact_write(&c, text, strlen(text)), 0);
        change(&j, &model, 1, NULL);
        change(&j, &model, 2, "b2");
        ck_assert_int_eq(state_journal_commit(&j), 0);
        /* nothing buffered may wait at a begin */
        JournalCompaction c2 = JOURNAL_COMPACTION_INIT;
        change(&j, &model, 4, "buffered");
        ck_assert_int_eq(state_journal_compact_begin(&j, &c2), -EBUSY);
        ck_assert_int_eq(state_journal_compact_finish(&j, &c), 0);
        /* the buffered one goes to the new journal */
        ck_assert_int_eq(state_journal_commit(&j), 0);
        JournalLoad ld;
        load(&got, &ld, NULL);
        ck_assert(ld.found && !ld.from_next);
        ck_assert_int_eq(ld.scan.end, JOURNAL_END_CLEAN);
        ck_assert_uint_eq(ld.scan.header.base_seq, 2);
        ck_assert_uint_eq(ld.scan.n_records, 4); /* 3, 4 and 5 carried, 6 appended */
        assert_same(&got, &model);
        /* the snapshot is the state as of the begin, the original's format */
        size_t sl;
        _cleanup_free_ char *s = read_snapshot(&sl);
        ck_assert_str_eq(s, text);
        state_journal_done(&j);
        table_done(&model), table_done(&got), table_done(&snap);
}
END_TEST

static JournalStep fault_step;
static int fault_mode; /* JOURNAL_FAULT_CRASH or -EIO */
static int fault_at(JournalStep s) { return s == fault_step ? fault_mode : 0; }

/* A compaction stopped at each of its steps, as a crash (nothing cleaned up)
 * and as a failure: a start afterwards gets every committed record back, and
 * a daemon that goes on after a failure keeps them too. */
START_TEST(crash_at_every_compaction_step) {
        static const int modes[] = {JOURNAL_FAULT_CRASH, -EIO};
        for (JournalStep step = JOURNAL_STEP_SNAPSHOT_WRITE; step < _JOURNAL_STEP_MAX; step++)
                for (size_t mi = 0; mi < ELEMENTSOF(modes); mi++) {
                        sub_enter("%s/%s-%zu", journal_step_to_string(step), mi);

                        StateJournal j;
                        fresh(&j);
                        Table model = {0}, got = {0};
                        change(&j, &model, 1, "a");
                        change(&j, &model, 2, "b");
                        ck_assert_int_eq(state_journal_commit(&j), 0);
                        Table at_begin = {0};
                        table_copy(&at_begin, &model);
                        JournalCompaction c = JOURNAL_COMPACTION_INIT;
                        ck_assert_int_eq(state_journal_compact_begin(&j, &c), 0);
                        _cleanup_free_ char *text = table_text(&at_begin);
                        ck_assert_int_eq(state_journal_compact_write(&c, text, strlen(text)), 0);
                        change(&j, &model, 3, "racing");
                        change(&j, &model, 1, NULL);
                        ck_assert_int_eq(state_journal_commit(&j), 0);
                        fault_step = step;
                        fault_mode = modes[mi];
                        state_journal_fault_hook = fault_at;
                        int r = state_journal_compact_finish(&j, &c);
                        state_journal_fault_hook = NULL;
                        ck_assert_msg(r == (modes[mi] == JOURNAL_FAULT_CRASH ? -ECANCELED : -EIO), "%s: %d",
                                      journal_step_to_string(step), r);

                        /* a start now: every committed record */
                        JournalLoad ld;
                        StateJournal j2 = STATE_JOURNAL_INIT;
                        load(&got, &ld, &j2);
                        ck_assert_msg(ld.found, "%s/%d: no journal follows tasks.json", journal_step_to_string(step), modes[mi]);
                        _cleanup_free_ char *want = table_text(&model), *have = table_text(&got);
                        ck_assert_msg(streq(want, have), "%s/%d: got\n%s\nwant\n%s", journal_step_to_string(step), modes[mi],
                                      have, want);
                        /* after the renames, only .next names the new tasks.json */
                        if (step >= JOURNAL_STEP_SNAPSHOT_DIR_SYNC && step <= JOURNAL_STEP_JOURNAL_RENAME)
                                ck_assert(ld.from_next);
                        /* that start compacts (it found a journal to replace or a
                         * partial one) and carries on */
                        if (!state_journal_usable(&j2)) ck_assert_int_eq(compact(&j2, &got), 0);
                        change(&j2, &model, 5, "after");
                        ck_assert_int_eq(state_journal_commit(&j2), 0);
                        load(&got, &ld, NULL);
                        ck_assert_int_eq(ld.scan.end, JOURNAL_END_CLEAN);
                        assert_same(&got, &model);
                        state_journal_done(&j2);
                        state_journal_done(&j);
                        table_done(&model), table_done(&got), table_done(&at_begin);
                        sub_leave();
                }
}
END_TEST

/* The daemon that saw the failure goes on: its commits after it are durable
 * (a compaction first where the old journal no longer follows tasks.json). */
START_TEST(going_on_after_a_failed_compaction) {
        for (JournalStep step = JOURNAL_STEP_SNAPSHOT_WRITE; step < _JOURNAL_STEP_MAX; step++) {
                sub_enter("%s/go-%s-%zu", journal_step_to_string(step), 0);
                StateJournal j;
                fresh(&j);
                Table model = {0}, got = {0};
                change(&j, &model, 1, "a");
                ck_assert_int_eq(state_journal_commit(&j), 0);
                fault_step = step;
                fault_mode = -EIO;
                state_journal_fault_hook = fault_at;
                ck_assert_int_eq(compact(&j, &model), -EIO);
                state_journal_fault_hook = NULL;
                change(&j, &model, 2, "b");
                int r = state_journal_commit(&j);
                if (!state_journal_usable(&j)) {
                        /* what the store does: a compaction holds them all */
                        ck_assert_int_eq(r, -EBADF);
                        state_journal_discard(&j);
                        ck_assert_int_eq(compact(&j, &model), 0);
                } else
                        ck_assert_int_eq(r, 0);
                load(&got, NULL, NULL);
                assert_same(&got, &model);
                state_journal_done(&j);
                table_done(&model), table_done(&got);
                sub_leave();
        }
}
END_TEST

/* A start that found the journal cut (or stale) writes a fresh one for the
 * same tasks.json, carrying the valid records, without a snapshot. */
START_TEST(reset_carries_the_valid_records) {
        StateJournal j;
        fresh(&j);
        Table model = {0}, got = {0}, at2 = {0};
        two_commits(&j, &model, &at2);
        state_journal_done(&j);
        size_t len;
        _cleanup_free_ char *text = journal_text(&len);
        journal_put(text, len - 3);
        size_t sl;
        _cleanup_free_ char *snap = read_snapshot(&sl);
        JournalLoad ld;
        StateJournal j2 = STATE_JOURNAL_INIT;
        load(&got, &ld, &j2);
        ck_assert_int_eq(ld.scan.end, JOURNAL_END_TORN);
        JournalHeader h = {.base_seq = ld.scan.header.base_seq, .snapshot_bytes = sl, .snapshot_crc = crc32c(0, snap, sl)};
        ck_assert_int_eq(state_journal_reset(&j2, &h, STATE_JOURNAL_FILE, ld.scan.header_bytes, ld.scan.valid_bytes,
                                             ld.scan.n_records, ld.scan.last_seq),
                         0);
        ck_assert(state_journal_usable(&j2));
        ck_assert_uint_eq(j2.next_seq, 3);
        change(&j2, &at2, 4, "d");
        ck_assert_int_eq(state_journal_commit(&j2), 0);
        load(&got, &ld, NULL);
        ck_assert_int_eq(ld.scan.end, JOURNAL_END_CLEAN);
        ck_assert_uint_eq(ld.scan.n_records, 3);
        assert_same(&got, &at2);
        /* the snapshot was not touched */
        size_t sl2;
        _cleanup_free_ char *snap2 = read_snapshot(&sl2);
        ck_assert_str_eq(snap2, snap);
        /* a stale journal: a fresh one with nothing carried */
        free(tf_put(dir, STATE_SNAPSHOT_FILE, "07 x\n", 5));
        load(&got, &ld, NULL);
        ck_assert(ld.stale);
        JournalHeader h2 = {.base_seq = 0, .snapshot_bytes = 5, .snapshot_crc = crc32c(0, "07 x\n", 5)};
        ck_assert_int_eq(state_journal_reset(&j2, &h2, STATE_JOURNAL_FILE, 0, 0, 0, 0), 0);
        load(&got, &ld, NULL);
        ck_assert(ld.found && !ld.stale);
        ck_assert_uint_eq(ld.scan.n_records, 0);
        ck_assert_str_eq(got.v[7], "x");
        state_journal_done(&j2);
        table_done(&model), table_done(&got), table_done(&at2);
}
END_TEST

/* Any mix of commits, compactions and starts: snapshot + journal is the
 * table as it was. */
START_TEST(snapshot_plus_journal_is_the_same_table) {
        StateJournal j;
        fresh(&j);
        Table model = {0}, got = {0};
        unsigned seed = 12345;
        for (int round = 0; round < 400; round++) {
                seed = seed * 1103515245 + 12345;
                unsigned x = seed >> 8;
                int k = (int) (x % KEYS);
                char v[32];
                snprintf(v, sizeof v, "v%d", round);
                change(&j, &model, k, x % 5 == 0 ? NULL : v);
                if (x % 3 == 0) ck_assert_int_eq(state_journal_commit(&j), 0);
                if (x % 17 == 0) {
                        ck_assert_int_eq(state_journal_commit(&j), 0);
                        ck_assert_int_eq(compact(&j, &model), 0);
                }
                if (x % 29 == 0) {
                        /* a restart: what is committed comes back */
                        ck_assert_int_eq(state_journal_commit(&j), 0);
                        JournalLoad ld;
                        load(&got, &ld, &j);
                        ck_assert(ld.found);
                        ck_assert_int_eq(ld.scan.end, JOURNAL_END_CLEAN);
                        assert_same(&got, &model);
                }
        }
        ck_assert_int_eq(state_journal_commit(&j), 0);
        load(&got, NULL, NULL);
        assert_same(&got, &model);
        state_journal_done(&j);
        table_done(&model), table_done(&got);
}
END_TEST

TF_MAIN("state-journal", "state-journal", setup, teardown, 0, crc32c_vectors, line_format_and_checks,
        append_and_group_commit, failed_commit_leaves_nothing, torn_tail_is_cut, damaged_record_in_the_middle_stops_there,
        stale_journal_is_ignored, compaction_racing_appends, crash_at_every_compaction_step,
        going_on_after_a_failed_compaction, reset_carries_the_valid_records, snapshot_plus_journal_is_the_same_table)
