#pragma once
/* A realistic big canonical log for the logparse bench and its golden test:
 * every recorded pi and OpenCode stream of tests/fixtures/real, normalized by
 * its executor as the shim does, repeated in rounds until the wanted size,
 * each round with its own session and message ids ("-r<round>" appended), as
 * a long-lived worker's log has many messages. Deterministic: the same size
 * always gives the same bytes. Header-only (static functions) so that a bench
 * and a unit suite can both include it. */

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor.h"
#include "json-util.h"
#include "macro.h"
#include "fileio.h"
#include "string-util.h"
#include "strv.h"

#ifndef TASKFERRY_FIXTURES_DIR
#error "TASKFERRY_FIXTURES_DIR must name tests/fixtures"
#endif

typedef struct canon_line {
        json_object *obj; /* NULL: a non-JSON line, written as text */
        char *text;
        json_object *ids[3]; /* string members whose value gets the round's suffix */
        char *orig[3];
        size_t n_ids;
} canon_line;

typedef struct canon_log {
        canon_line *lines;
        size_t n, cap;
} canon_log;

static int canon_push(canon_log *c, const char *line) {
        if (c->n == c->cap) {
                size_t nc = c->cap ? c->cap * 2 : 256;
                canon_line *nl = realloc(c->lines, nc * sizeof(*nl));
                if (!nl) return -ENOMEM;
                c->lines = nl;
                c->cap = nc;
        }
        canon_line *l = &c->lines[c->n++];
        *l = (canon_line) {};
        if (json_parse_strict(line, strlen(line), &l->obj) < 0 || !json_is_object(l->obj)) {
                json_object_put(l->obj);
                l->obj = NULL;
                l->text = strdup(line);
                return l->text ? 0 : -ENOMEM;
        }
        json_object *part = json_get_object(l->obj, "part");
        json_object *holders[3] = { l->obj, part, part };
        const char *keys[3] = { "sessionID", "messageID", "sessionID" };
        for (size_t i = 0; i < 3; i++) {
                json_object *v;
                if (holders[i] && json_object_object_get_ex(holders[i], keys[i], &v) &&
                    json_object_is_type(v, json_type_string)) {
                        l->ids[l->n_ids] = v;
                        l->orig[l->n_ids++] = strdup(json_object_get_string(v));
                }
        }
        return 0;
}

/* Normalize one recorded stdout file as the shim does and append its lines. */
static int canon_add_fixture(canon_log *c, const executor *ex, const char *path) {
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = read_file(path, (size_t) 1 << 24, &data, &len);
        if (r < 0) return r;
        normalizer *n = ex->normalizer_new();
        if (!n) return -ENOMEM;
        for (size_t p = 0; p < len;) {
                char *nl = memchr(data + p, '\n', len - p);
                size_t l = nl ? (size_t) (nl - data - p) : len - p;
                _cleanup_strv_free_ char **out = NULL;
                (void) ex->normalize_line(n, data + p, l, nl != NULL, &out);
                for (char **o = out; o && *o; o++)
                        if ((r = canon_push(c, *o)) < 0) break;
                p += l + (nl ? 1 : 0);
        }
        if (ex->normalize_finish) {
                _cleanup_strv_free_ char **out = NULL;
                (void) ex->normalize_finish(n, &out);
                for (char **o = out; o && *o; o++)
                        if ((r = canon_push(c, *o)) < 0) break;
        }
        ex->normalizer_free(n);
        return r < 0 ? r : 0;
}

static int filter_stdout(const struct dirent *d) {
        size_t l = strlen(d->d_name);
        return l > 14 && streq(d->d_name + l - 14, ".stdout.ndjson");
}

static int canon_load(canon_log *c, size_t *ret_fixtures) {
        const char *dir = TASKFERRY_FIXTURES_DIR "/real";
        struct dirent **names = NULL;
        int k = scandir(dir, &names, filter_stdout, alphasort);
        if (k < 0) return -errno;
        int r = 0;
        size_t used = 0;
        for (int i = 0; i < k; i++) {
                const char *name = names[i]->d_name;
                const executor *ex = strncmp(name, "pi-", 3) == 0         ? executor_find("pi")
                                     : strncmp(name, "opencode-", 9) == 0 ? executor_find("opencode")
                                                                           : NULL;
                if (ex && r >= 0) {
                        _cleanup_free_ char *p = strdup_printf("%s/%s", dir, name);
                        r = p ? canon_add_fixture(c, ex, p) : -ENOMEM;
                        used++;
                }
                free(names[i]);
        }
        free(names);
        *ret_fixtures = used;
        return r;
}

static void canon_free(canon_log *c) {
        for (size_t i = 0; i < c->n; i++) {
                json_object_put(c->lines[i].obj);
                free(c->lines[i].text);
                for (size_t j = 0; j < c->lines[i].n_ids; j++) free(c->lines[i].orig[j]);
        }
        free(c->lines);
}

/* Write rounds of c, ids suffixed "-r<round>", until target bytes. */
static int write_realistic(int fd, canon_log *c, size_t target, size_t *ret_written, size_t *ret_rounds) {
        size_t written = 0, rounds = 0;
        while (written < target) {
                for (size_t i = 0; i < c->n; i++) {
                        canon_line *l = &c->lines[i];
                        for (size_t j = 0; j < l->n_ids; j++) {
                                char id[512];
                                snprintf(id, sizeof id, "%s-r%zu", l->orig[j], rounds);
                                json_object_set_string(l->ids[j], id);
                        }
                        size_t len = 0;
                        const char *s = l->obj ? json_to_line(l->obj, &len) : l->text;
                        if (!l->obj) len = strlen(s);
                        if (loop_write(fd, s, len) < 0 || loop_write(fd, "\n", 1) < 0) return -EIO;
                        written += len + 1;
                }
                rounds++;
        }
        *ret_written = written;
        *ret_rounds = rounds;
        return 0;
}

/* Write a realistic log of at least target bytes to fd. */
static _unused_ int realistic_log_write(int fd, size_t target, size_t *ret_written, size_t *ret_rounds,
                                         size_t *ret_fixtures) {
        canon_log c = {};
        size_t fixtures = 0;
        int r = canon_load(&c, &fixtures);
        if (r >= 0 && (c.n == 0 || fixtures == 0)) r = -ENOENT;
        if (r >= 0) r = write_realistic(fd, &c, target, ret_written, ret_rounds);
        canon_free(&c);
        if (ret_fixtures) *ret_fixtures = fixtures;
        return r;
}
