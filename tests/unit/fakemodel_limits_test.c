/*
 * sg-fakemodel's bounded name map (tools/sg-fakemodel/namemap.c), which
 * holds its fail_first counters.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../tools/sg-fakemodel/namemap.c"

static void the_name_map_is_bounded_and_zero_fills(void **state) {
    (void)state;
    sg_fm_map m = {.record = sizeof(int64_t) * 3, .max = 3};
    int64_t *a = sg_fm_map_get(&m, "a");
    assert_non_null(a);
    assert_int_equal(a[0] + a[1] + a[2], 0);
    a[2] = 7;
    assert_ptr_equal(sg_fm_map_get(&m, "a"), a);
    sg_fm_map_get(&m, "b");
    sg_fm_map_get(&m, "");
    assert_int_equal(m.n, 3);
    assert_int_equal(((int64_t *)sg_fm_map_get(&m, "a"))[2], 7);
    /* a fourth name: everything restarts */
    int64_t *d = sg_fm_map_get(&m, "d");
    assert_non_null(d);
    assert_int_equal(d[2], 0);
    assert_int_equal(m.n, 1);
    assert_int_equal(((int64_t *)sg_fm_map_get(&m, "a"))[2], 0);
    sg_fm_map_clear(&m);
    assert_null(m.buckets);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_name_map_is_bounded_and_zero_fills),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
