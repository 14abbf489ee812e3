/* protocol-keys.h: every key of the wire spelled once, each PK_<key> the
 * NUL-terminated text of its own token. */

#include <check.h>
#include <ctype.h>
#include <string.h>

#include "macro.h"
#include "protocol-keys.h"
#include "unit.h"

#define KEY_ROW(k) {PK_##k, #k},
static const struct {
        const char *key, *token;
} keys[] = {PROTOCOL_KEYS(KEY_ROW)};

START_TEST(each_key_is_its_token) {
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                ck_assert_str_eq(keys[i].key, keys[i].token);
                ck_assert_uint_gt(strlen(keys[i].key), 0);
                for (const char *p = keys[i].key; *p; p++)
                        ck_assert_msg(isalnum((unsigned char) *p) || *p == '_', "%s", keys[i].key);
        }
}
END_TEST

START_TEST(keys_are_unique) {
        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                for (size_t j = i + 1; j < ELEMENTSOF(keys); j++) {
                        ck_assert_msg(strcmp(keys[i].key, keys[j].key) != 0, "%s twice", keys[i].key);
                        ck_assert_ptr_ne(keys[i].key, keys[j].key);
                }
}
END_TEST

START_TEST(known_keys) {
        ck_assert_str_eq(PK_taskId, "taskId");
        ck_assert_str_eq(PK_task_id, "task_id"); /* task.advisor's snake_case */
        ck_assert_str_eq(PK_class, "class");
        ck_assert_str_eq(PK_maxOutputFileBytes, "maxOutputFileBytes");
        ck_assert_uint_gt(ELEMENTSOF(keys), 200);
}
END_TEST

TF_MAIN("protocol-keys", "keys", NULL, NULL, 0, each_key_is_its_token, keys_are_unique, known_keys)
