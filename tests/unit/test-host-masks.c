/* host-masks.h: the sorted list (set, replace, remove with what is below),
 * what an entry is by its mode, the kinds' names, and a whole walk of the
 * real /etc and /opt (sorted, under them, capped). */

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "host-masks.h"
#include "macro.h"
#include "path-util.h"
#include "string-util.h"
#include "unit.h"

START_TEST(list_ops) {
        HostMaskList l = {0};
        ck_assert_int_eq(host_mask_list_set(&l, "/opt/b", HOST_MASK_SOCKET), 0);
        ck_assert_int_eq(host_mask_list_set(&l, "/opt/a/x", HOST_MASK_PRIVATE_FILE), 0);
        ck_assert_int_eq(host_mask_list_set(&l, "/opt/a", HOST_MASK_PRIVATE_DIR), 0);
        ck_assert_int_eq(host_mask_list_set(&l, "/opt/a-b", HOST_MASK_SOCKET), 0);
        ck_assert_int_eq(host_mask_list_set(&l, "/opt/b", HOST_MASK_PRIVATE_FILE), 0); /* replaced */
        ck_assert_uint_eq(l.n, 4);
        for (size_t i = 1; i < l.n; i++) ck_assert_int_lt(strcmp(l.items[i - 1].path, l.items[i].path), 0);
        HostMaskList c = {0};
        ck_assert_int_eq(host_mask_list_copy(&l, &c), 0);
        ck_assert_uint_eq(c.n, 4);
        /* /opt/a and below, not /opt/a-b */
        ck_assert_uint_eq(host_mask_list_remove(&l, "/opt/a", true), 2);
        ck_assert_uint_eq(l.n, 2);
        ck_assert_str_eq(l.items[0].path, "/opt/a-b");
        ck_assert_int_eq(l.items[1].kind, HOST_MASK_PRIVATE_FILE);
        ck_assert_uint_eq(host_mask_list_remove(&l, "/opt/nothing", false), 0);
        host_mask_list_done(&l);
        ck_assert_uint_eq(c.n, 4);
        host_mask_list_done(&c);
}
END_TEST

START_TEST(classify) {
        struct stat st = {.st_mode = S_IFSOCK | 0755};
        ck_assert_int_eq(host_mask_classify(&st, false), HOST_MASK_SOCKET);
        st.st_mode = S_IFREG | 0600;
        ck_assert_int_eq(host_mask_classify(&st, false), _HOST_MASK_KIND_INVALID);
        ck_assert_int_eq(host_mask_classify(&st, true), HOST_MASK_PRIVATE_FILE);
        st.st_mode = S_IFREG | 0644;
        ck_assert_int_eq(host_mask_classify(&st, true), _HOST_MASK_KIND_INVALID);
        st.st_mode = S_IFDIR | 0711; /* enterable, not listable */
        ck_assert_int_eq(host_mask_classify(&st, true), HOST_MASK_PRIVATE_DIR);
        st.st_mode = S_IFDIR | 0755;
        ck_assert_int_eq(host_mask_classify(&st, true), _HOST_MASK_KIND_INVALID);
        st.st_mode = S_IFLNK | 0700;
        ck_assert_int_eq(host_mask_classify(&st, true), _HOST_MASK_KIND_INVALID);
        for (int k = 0; k < _HOST_MASK_KIND_MAX; k++)
                ck_assert_int_eq(host_mask_kind_from_string(host_mask_kind_to_string(k)), k);
        ck_assert_int_eq(host_mask_kind_from_string("fifo"), _HOST_MASK_KIND_INVALID);
        ck_assert_ptr_null(host_mask_kind_to_string(_HOST_MASK_KIND_MAX));
}
END_TEST

START_TEST(whole_walk) {
        HostMaskList l = {0};
        ck_assert_int_eq(host_masks_scan(HOST_MASKS_SCAN_MAX, true, &l), 0);
        for (size_t i = 0; i < l.n; i++) {
                ck_assert(path_is_at_or_below(l.items[i].path, "/etc") || path_is_at_or_below(l.items[i].path, "/opt"));
                if (i) ck_assert_int_lt(strcmp(l.items[i - 1].path, l.items[i].path), 0);
        }
        host_mask_list_done(&l);
        ck_assert_int_eq(host_masks_scan(1, true, &l), 0);
        ck_assert(l.partial);
        host_mask_list_done(&l);
}
END_TEST

TF_MAIN("host-masks", "host-masks", NULL, NULL, 0, list_ops, classify, whole_walk)
